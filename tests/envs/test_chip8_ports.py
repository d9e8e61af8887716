"""The CHIP-8 ports (generated/chip8/rust, generated/chip8/jax) against the Python reference:
the embedded ROM, one step from meaningful random states, and broken ports that must differ."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, apply_patch

from envforge.backends.base import Driver
from envforge.backends.jax import JaxDriver, load_module
from envforge.backends.python import PythonDriver
from envforge.mutate.handlers import HandlerMap
from envforge.prompts.render import estimate_tokens, repair_task
from envforge.spec import load_spec
from envforge.verify.context import VerifyContext
from envforge.verify.strategies import sample_actions, sample_states
from envforge.verify.tape import pair_finding, step_pair

SPEC_DIR = ROOT / "references" / "chip8"
RUST = ROOT / "generated" / "chip8" / "rust"
JAX = ROOT / "generated" / "chip8" / "jax" / "chip8.py"
HAS_RUST = shutil.which("cargo") is not None and (
    shutil.which("maturin") or (Path(sys.executable).parent / "maturin").exists()
)
reference_module = load_module(SPEC_DIR / "chip8.py")


@pytest.fixture(scope="module")
def spec():  # type: ignore[no-untyped-def]
    return load_spec(SPEC_DIR)


@pytest.fixture(scope="module")
def reference(spec) -> PythonDriver:  # type: ignore[no-untyped-def]
    return PythonDriver(spec, f"{SPEC_DIR / 'chip8.py'}:Chip8Breakout")


def differences(spec, reference: Driver, port: Driver, n: int, seed: int) -> list[str]:  # type: ignore[no-untyped-def]
    """One step on both sides from ``n`` meaningful random states, and 64 resets: the fields
    (and transition parts) that differ."""
    rng = np.random.default_rng(seed)
    state = sample_states(spec, rng, n)
    actions = sample_actions(spec, rng, n)
    ref, out = reference.step(state, actions), port.step(state, actions)
    differ = [n for n in spec.field_names if not np.array_equal(ref.state[n], out.state[n])]
    for name in ("obs", "reward", "terminated", "truncated"):
        if not np.array_equal(getattr(ref, name), getattr(out, name)):
            differ.append(name)
    seeds = rng.integers(0, 2**32, size=64, dtype=np.uint64).astype(np.uint32)
    ref_reset, out_reset = reference.reset(seeds), port.reset(seeds)
    differ += [
        f"reset {n}" for n in spec.field_names if not np.array_equal(ref_reset[n], out_reset[n])
    ]
    return differ


def test_ports_embed_the_assembled_rom():
    rom = reference_module.ROM
    assert rom == load_module(JAX).ROM
    source = (RUST / "src" / "chip8.rs").read_text()
    body = re.search(r"pub const ROM: \[u8; (\d+)\] = \[(.*?)\];", source, re.S)
    assert body is not None and int(body.group(1)) == len(rom)
    assert bytes(int(b, 16) for b in re.findall(r"0x([0-9A-F]{2})", body.group(2))) == rom


def test_jax_port_steps_like_the_reference(spec, reference):  # type: ignore[no-untyped-def]
    assert differences(spec, reference, JaxDriver(spec, JAX), 256, seed=1) == []


def test_jax_port_with_a_wrong_shift_flag_differs(spec, reference, tmp_path):  # type: ignore[no-untyped-def]
    edit = ("set_v_flag(m, op.x, b >> 1, b & 1)", "set_v_flag(m, op.x, b >> 1, b & 3)")
    broken = apply_patch(JAX, tmp_path, edit)
    port = JaxDriver(spec, broken.path)
    # from a state at the shift (only the self-test runs one), V differs and the finding names
    # the handler ([verify] explain)
    state = sample_states(spec, np.random.default_rng(4), 1)
    rom, names = reference_module.ROM, reference_module.opcode_name
    shr = next(
        a
        for a in reference_module.INSTRUCTIONS
        if names(rom[a - 0x200] << 8 | rom[a - 0x1FF]) == "8XY6"
    )
    state["pc"][:] = shr
    state["V"][:, 2] = 0x03  # VY odd and bit 1 set: the flag is 1, the broken port's 3
    ctx = VerifyContext(spec, reference, port)
    pair = step_pair(ctx, state, state, np.zeros(1, np.int32))
    assert "V" in pair.diff.keys_at(0)
    finding = pair_finding(
        ctx, 1, "step.mismatch", "differs in {fields}", pair, 0, state, actions=[0]
    )
    assert f"8XY6 (op_8xy6) at PC 0x{shr:03X}: V[3], V[15]" in finding.message
    assert "instructions run" in finding.extra["explain"]
    # a campaign judges the kill by handler ([verify] handlers): the line is 8XY6's, and so
    # is a handler the finding names
    handlers = HandlerMap.for_spec(spec, {"chip8.py": JAX.read_text()})
    assert handlers is not None
    [line] = broken.lines
    assert handlers.at("chip8.py", JAX.read_text(), line) == ["8XY6"]
    assert "8XY6" in handlers.named(finding.to_dict())
    # the repair prompt names the handler, and shows memory and the screen only where they
    # differ (printed whole: ~24 k tokens)
    text = repair_task(finding, None, 1, "port/chip8.py", broken.path.read_text(), "0-3", [ROOT])
    assert f"8XY6 (op_8xy6) at PC 0x{shr:03X}" in text
    assert "memory = 4096 elements" in text and "framebuffer = 2048 elements" in text
    assert estimate_tokens(text) < 8000


@pytest.mark.skipif(not HAS_RUST, reason="needs cargo and maturin")
def test_rust_port_steps_like_the_reference(spec, reference):  # type: ignore[no-untyped-def]
    from envforge.backends.rust import RustDriver

    assert differences(spec, reference, RustDriver(spec, RUST), 512, seed=3) == []


@pytest.mark.slow
@pytest.mark.skipif(not HAS_RUST, reason="needs cargo and maturin")
def test_rust_port_with_a_draw_wrap_off_by_one_differs(spec, reference, tmp_path):  # type: ignore[no-untyped-def]
    from envforge.backends.rust import RustDriver

    crate = tmp_path / "rust"
    shutil.copytree(RUST, crate, ignore=shutil.ignore_patterns("target"))
    source = crate / "src" / "chip8.rs"
    text = source.read_text()
    wrong = text.replace("(x0 + col) % WIDTH", "(x0 + col) % (WIDTH - 1)")
    assert wrong != text
    source.write_text(wrong)
    assert "framebuffer" in differences(spec, reference, RustDriver(spec, crate), 512, seed=3)


@pytest.mark.slow
@pytest.mark.skipif(not HAS_RUST, reason="needs cargo and maturin")
def test_a_panicking_rust_port_is_found_at_its_opcode_arm(spec, tmp_path):  # type: ignore[no-untyped-def]
    """EX9E indexing the keys with ``VX | 0xF`` panics (index out of bounds): the finding names
    no field, but carries the panic's line and the ``match`` arm holding it, and a campaign
    counts the kill as localized to that handler (and not to another one)."""
    from envforge.mutate.mutant import Mutant
    from envforge.mutate.triage import site_localized
    from envforge.verify.context import VerifyOptions
    from envforge.verify.runner import verify

    crate = tmp_path / "rust"
    shutil.copytree(RUST, crate, ignore=shutil.ignore_patterns("target"))
    source = crate / "src" / "chip8.rs"
    original = source.read_text()
    mutated = original.replace(
        "if self.keys[(self.v[x] & 0xF) as usize] != 0",
        "if self.keys[(self.v[x] | 0xF) as usize] != 0",
    )
    assert mutated != original
    source.write_text(mutated)
    line = 1 + original[: original.index("(self.v[x] & 0xF) as usize] != 0")].count("\n")
    report = verify(spec, crate, [0, 1], VerifyOptions(scale=0.2, seed_sweep=1024))
    [finding] = report.levels[-1].findings
    assert finding.check == "exception" and "PanicException" in finding.message
    assert finding.port_lines[0].file.endswith("src/chip8.rs")
    assert finding.port_lines[0].line == line
    assert finding.extra["handler"] == "execute [0xE => 0x9E]"
    assert f"chip8.rs:{line}, in execute [0xE => 0x9E]" in finding.message
    as_stored = finding.to_dict()
    here = Mutant("m", "arith", "src/chip8.rs", line, "& -> |", mutated)
    assert site_localized(as_stored, here, "port", original)
    elsewhere = Mutant("m", "arith", "src/chip8.rs", line + 5, "EXA1", mutated)  # the EXA1 arm
    assert not site_localized(as_stored, elsewhere, "port", original)
    # and by handler ([verify] handlers): the arm is EX9E's, and the crash site names it
    handlers = HandlerMap.for_spec(spec, {"src/chip8.rs": original})
    assert handlers is not None and handlers.named(as_stored) == ["EX9E"]
    assert handlers.at("src/chip8.rs", original, line) == ["EX9E"]
    assert handlers.at("src/chip8.rs", original, line + 5) == ["EXA1"]
