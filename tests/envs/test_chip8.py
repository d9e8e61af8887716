"""The CHIP-8 reference (references/chip8): assembler, opcode semantics, the Breakout game, the
meaningful-state constraint, and large array fields in the state strategies."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ROOT
from hypothesis import given, settings

from envforge.backends.jax import load_module
from envforge.spec import load_spec
from envforge.verify.strategies import sample_states, stack_states, state_strategy

CHIP8_DIR = ROOT / "references" / "chip8"
chip8 = load_module(CHIP8_DIR / "chip8.py")
asm = load_module(CHIP8_DIR / "asm.py")


def run(program: str, steps: int, keys: tuple[int, ...] = (), **registers: int):
    """A machine with ``program`` at 0x200, ``steps`` instructions executed."""
    m = chip8.Chip8Breakout()
    code = asm.assemble(program).code
    m.memory[0x200 : 0x200 + len(code)] = np.frombuffer(code, np.uint8)
    m.memory[0x200 + len(code) :] = 0
    for k in keys:
        m.keys[k] = 1
    m._load()
    for name, value in registers.items():
        if name.startswith("V"):
            m.reg[int(name[1:], 16)] = value
        else:
            setattr(m, name.lower(), value)
    for _ in range(steps):
        m.execute()
    m._store()
    return m


def test_assembler_encodes_each_form():
    cases = {
        "CLS": 0x00E0, "RET": 0x00EE, "JP 0x345": 0x1345, "CALL 0x2AB": 0x22AB,
        "SE V3, 0x10": 0x3310, "SNE VA, 7": 0x4A07, "SE V1, V2": 0x5120, "SNE V1, V2": 0x9120,
        "LD V3, 0x10": 0x6310, "ADD V3, 1": 0x7301, "LD V1, V2": 0x8120, "OR V1, V2": 0x8121,
        "AND V1, V2": 0x8122, "XOR V1, V2": 0x8123, "ADD V1, V2": 0x8124, "SUB V1, V2": 0x8125,
        "SHR V1, V2": 0x8126, "SUBN V1, V2": 0x8127, "SHL V1, V2": 0x812E, "LD I, 0x300": 0xA300,
        "JP V0, 0x300": 0xB300, "RND V5, 0x0F": 0xC50F, "DRW V1, V2, 5": 0xD125,
        "SKP V4": 0xE49E, "SKNP V4": 0xE4A1, "LD V2, DT": 0xF207, "LD V2, K": 0xF20A,
        "LD DT, V2": 0xF215, "LD ST, V2": 0xF218, "ADD I, V2": 0xF21E, "LD F, V2": 0xF229,
        "LD B, V2": 0xF233, "LD [I], V2": 0xF255, "LD V2, [I]": 0xF265,
    }  # fmt: skip
    for text, word in cases.items():
        assert asm.assemble(text).code == bytes((word >> 8, word & 0xFF)), text
    program = asm.assemble("start: JP end\nN = 3\nend: LD V0, N + 1\ndata: db 1, 2")
    assert program.code == bytes([0x12, 0x02, 0x60, 0x04, 1, 2])
    assert program.instructions == [0x200, 0x202]
    assert program.symbols["data"] == 0x204
    with pytest.raises(asm.AsmError, match="unknown symbol"):
        asm.assemble("JP nowhere")
    with pytest.raises(asm.AsmError, match="does not fit"):
        asm.assemble("LD V0, 256")


def test_flag_ops_write_vf_last():
    m = run("ADD VF, V1", 1, VF=0xF0, V1=0x20)
    assert m.v[0xF] == 1  # the carry, not the sum 0x10
    m = run("SUB V1, V2", 1, V1=3, V2=5)
    assert (m.v[1], m.v[0xF]) == (0xFE, 0)
    m = run("SUBN V1, V2", 1, V1=3, V2=5)
    assert (m.v[1], m.v[0xF]) == (2, 1)


def test_shifts_take_vy_like_the_cosmac_vip():
    m = run("SHR V1, V2", 1, V1=0xFF, V2=0x05)
    assert (m.v[1], m.v[2], m.v[0xF]) == (0x02, 0x05, 1)
    m = run("SHL V1, V2", 1, V1=0, V2=0x81)
    assert (m.v[1], m.v[0xF]) == (0x02, 1)


def test_draw_wraps_around_and_reports_erased_pixels():
    # a 2-row sprite 0xC0 at (63, 31): pixels land on both edges of the screen
    m = run("LD I, 0x300\nDRW V1, V2, 2", 2, V1=63, V2=31)
    m.memory[0x300:0x302] = 0xC0
    m._load()
    m.pc = 0x202
    m.i = 0x300
    m.execute()
    m._store()
    lit = {(int(y), int(x)) for y, x in zip(*np.nonzero(m.framebuffer), strict=True)}
    assert lit == {(31, 63), (31, 0), (0, 63), (0, 0)}
    assert m.v[0xF] == 0
    m._load()
    m.pc = 0x202
    m.execute()  # drawn again: everything erased
    m._store()
    assert not m.framebuffer.any() and m.v[0xF] == 1


def test_memory_ops_bcd_store_load_and_wait_for_key():
    m = run("LD B, V1", 1, V1=254, I=0xFFF)
    assert (m.memory[0xFFF], m.memory[0], m.memory[1]) == (2, 5, 4)  # wraps at 4 KiB
    m = run("LD [I], V2\nLD V3, [I]", 2, V1=254, V2=9, I=0x400)
    assert list(m.memory[0x400:0x403]) == [0, 254, 9]
    assert m.i == 0x400 + 3 + 4  # FX55 then FX65 each left I past what they touched
    m = run("LD V1, K", 3)
    assert m.pc == 0x200  # no key held: still waiting
    m = run("LD V1, K", 1, keys=(9, 6))
    assert (m.pc, m.v[1]) == (0x202, 6)


def test_stack_wraps_and_random_draws_from_xorshift():
    m = run("CALL 0x200", 17)
    assert m.sp == 1 and m.stack[0] == 0x202
    m = run("RND V2, 0xF0", 1, rng=12345)
    expected = chip8.xorshift32(12345)
    assert m.rng == expected and m.v[2] == (expected >> 24) & 0xF0


def test_breakout_tracker_clears_the_wall_and_random_play_loses():
    env = chip8.Chip8Breakout()
    env.reset(seed=3)
    total, done = 0.0, False
    while not done:
        px, bx = int(env.v[4]) + 2, int(env.v[6])
        _, reward, terminated, truncated, _ = env.step(1 if bx < px else 2 if bx > px + 1 else 0)
        total, done = total + reward, terminated or truncated
    assert total == 36 and terminated and env.memory[chip8.OVER] == 1
    env.reset(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(200):
        _, reward, terminated, _, _ = env.step(int(rng.integers(3)))
        if terminated:
            break
    assert terminated and env.memory[chip8.SCORE] == 0


def test_meaningful_states_keep_the_program_and_a_consistent_stack():
    spec = load_spec(CHIP8_DIR)
    state = sample_states(spec, np.random.default_rng(1), 512)
    rom = np.frombuffer(chip8.ROM, np.uint8)[: chip8.CODE_END - 0x200]
    assert (state["memory"][:, 0x200 : chip8.CODE_END] == rom).all()
    assert np.isin(state["pc"], chip8.INSTRUCTIONS).all()
    assert np.isin(state["stack"], chip8.RETURN_SITES).all()
    assert len(np.unique(state["pc"])) > 100 and len(np.unique(state["stack"])) == 14
    assert set(np.unique(state["memory"][:, chip8.OVER])) == {0, 1}


def test_meaningful_states_reach_handlers_the_program_has_once():
    """The PC is drawn per handler, not per address: FX0A (one address of 178) about once in 60
    states, so that L1 sees its wait branch (no key held) in a sweep of a few hundred states."""
    spec = load_spec(CHIP8_DIR)
    pc = sample_states(spec, np.random.default_rng(2), 4096)["pc"]
    words = {a: chip8.ROM[a - 0x200] << 8 | chip8.ROM[a - 0x1FF] for a in chip8.INSTRUCTIONS}
    wait = next(a for a, op in words.items() if op & 0xF0FF == 0xF00A)
    assert (pc == wait).mean() > 1 / 100  # uniform over addresses: 1 / 178
    assert len(np.unique(pc)) == len(chip8.INSTRUCTIONS)  # every address still drawn


@settings(max_examples=20, deadline=None)
@given(state_strategy(load_spec(CHIP8_DIR)))
def test_hypothesis_draws_large_fields_sparsely_and_constrained(row):
    spec = load_spec(CHIP8_DIR)
    assert row["memory"].shape == (4096,) and row["framebuffer"].shape == (32, 64)
    assert set(np.unique(row["framebuffer"])) <= {0, 1}
    state = stack_states(spec, [row])
    assert state["pc"][0] in chip8.INSTRUCTIONS
    assert state["memory"].dtype == np.uint8


def test_explain_names_the_handler_that_wrote_a_diverging_field():
    spec = load_spec(CHIP8_DIR)
    state = {k: v[0] for k, v in sample_states(spec, np.random.default_rng(5), 1).items()}
    shr = next(
        a
        for a in chip8.INSTRUCTIONS
        if chip8.ROM[a - 0x200] & 0xF0 == 0x80 and chip8.ROM[a - 0x1FF] & 0xF == 6
    )
    state["pc"] = np.int32(shr)
    text = chip8.explain_step(state, 0, ["V", "obs"])
    assert f"8XY6 (op_8xy6) at PC 0x{shr:03X}: V[3], V[15]" in text
    assert text.splitlines()[-1].startswith(f"instructions run (pattern@PC): 8XY6@{shr:03X}")
    assert "2NNN (op_2nnn)" in chip8.explain_step(state, 0, ["stack"])  # RET, then a CALL
    loop = asm.assemble("LD V1, 5\nhere: JP here").code  # writes V1, then spins
    state["memory"][0x200 : 0x200 + len(loop)] = np.frombuffer(loop, np.uint8)
    state["pc"] = np.int32(0x200)
    text = chip8.explain_step(state, 0, ["framebuffer", "V"])
    assert "no instruction of the reference's step wrote framebuffer" in text
    assert "V written in the reference's step by 6XNN (op_6xnn) at PC 0x200: V[1]" in text
    # led by the first instruction that wrote a diverging field; PC by where control went
    text = chip8.explain_step(state, 0, ["pc", "V"])
    first = "first instruction of the step to write a diverging field: 6XNN (op_6xnn) at PC 0x200"
    assert text.startswith(first + " (V)")
    assert "pc written in the reference's step by 1NNN (op_1nnn) at PC 0x202: to 0x202" in text
