"""JAX port of the CHIP-8 Breakout environment (``references/chip8/chip8.py``).

One frame per step: the action's key held, ``INSTRUCTIONS_PER_FRAME`` instructions in a
``lax.fori_loop``, timers down by one. Each instruction is fetched, its family (top nibble)
dispatched with ``lax.switch`` (and ``8XY_``/``FX__`` with a second ``lax.switch``), and the
handler returns an :class:`Effect`: the new registers plus at most one stack write, up to 16
memory writes and a draw/clear flag, applied after the switch. Under ``vmap`` a switch runs
every branch and selects, so branches return these few values rather than the 4 KiB memory
and the 2 KiB screen. Interpreter choices are the reference's (see its docstring).

Single-env, pure functions; the envforge JAX backend vmaps and jits them.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

ROM_START = 0x200
SCORE = 0x3A0
OVER = 0x3A2
INSTRUCTIONS_PER_FRAME = 32
EPISODE_CAP = 3000
WIDTH, HEIGHT = 64, 32
KEYMAP = np.array([-1, 0x4, 0x6], np.int32)  # action -> key held (-1: none)

# breakout.asm as assembled by references/chip8/asm.py (checked by tests/envs/test_chip8_ports.py)
ROM = bytes.fromhex(
    "232000E06415651E6A006B036C24A36760006103D013700430301214A365D45122FE22E0F007300012246001"
    "F015A3656004E0A1225C6006E0A12268A364D6718684879446FF22744630227A47FF2280471F12CAD6713F00"
    "22861224440000EED45174FFD45100EE442A00EED4517401D45100EE6601680100EE662E68FF00EE67016901"
    "00EE471E12B060FC8062A366D071600089078EF022FE7A0122FE80A0A3A0F0556002F0187CFF3C0000EE12F6"
    "D671671D69FF806080458EF06801610380153F0168FFD67100EE22FE7BFF22FE80B0A3A1F0553B0012DC12F6"
    "22E01224C61F7608670A69016801C001300068FFA364D67100EE6001A3A2F05512FCA3A3FA33F26563326D01"
    "F029D3D57305F129D3D57305F229D3D56D0AFB29D3D500EE0000605A610F8011801362C8820486F0832687F0"
    "823E88F0523092307001610FE19E1346F50A64028040B34C1350135265EEF407A3A6F41EF855A3A6F5656000"
    "F01500EE80FCE0E0E0E000000000000000000000000000000000000000000000000000000000000000000000"
    "0000000000000000000000000000000000000000000300000000000000000000000000000000000000000000"
    "00000000"
)
FONT = bytes.fromhex(
    "F0909090F02060202070F010F080F0F010F010F09090F01010F080F010F0F080F090F0F010204040"
    "F090F090F0F090F010F0F090F09090E090E090E0F0808080F0E0909090E0F080F080F0F080F08080"
)
BOOT_MEMORY = np.zeros(4096, np.uint8)
BOOT_MEMORY[: len(FONT)] = np.frombuffer(FONT, np.uint8)
BOOT_MEMORY[ROM_START : ROM_START + len(ROM)] = np.frombuffer(ROM, np.uint8)


class EnvState(NamedTuple):
    memory: jax.Array  # uint8[4096]
    V: jax.Array  # uint8[16]
    I: jax.Array  # noqa: E741  int32
    pc: jax.Array
    sp: jax.Array
    stack: jax.Array  # int32[16]
    delay_timer: jax.Array
    sound_timer: jax.Array
    framebuffer: jax.Array  # uint8[32, 64]
    keys: jax.Array  # uint8[16]
    rng: jax.Array  # uint32
    frame: jax.Array


class Effect(NamedTuple):
    """What one instruction changes; memory and screen writes are applied after the switch."""

    V: jax.Array
    I: jax.Array  # noqa: E741
    pc: jax.Array
    sp: jax.Array
    push: jax.Array  # bool: stack[push_at] = push_value
    push_at: jax.Array
    push_value: jax.Array
    delay_timer: jax.Array
    sound_timer: jax.Array
    rng: jax.Array
    write_addr: jax.Array  # int32[16]
    write_value: jax.Array  # uint8[16]
    write_mask: jax.Array  # bool[16]
    draw: jax.Array
    clear: jax.Array


class Op(NamedTuple):
    word: jax.Array
    x: jax.Array
    y: jax.Array
    n: jax.Array
    nn: jax.Array
    nnn: jax.Array


# ---- randomness: xorshift32, as the reference ------------------------------------------------


def xorshift32(x: jax.Array) -> jax.Array:
    x = x ^ (x << 13)
    x = x ^ (x >> 17)
    return x ^ (x << 5)


def seed_to_rng(seed: jax.Array) -> jax.Array:
    x = (seed.astype(jnp.uint32) ^ jnp.uint32(0x9E3779B9)) * jnp.uint32(0x85EBCA6B)
    x = x ^ (x >> 13)
    return jnp.where(x == 0, jnp.uint32(1), x)


def reset(seed: jax.Array) -> EnvState:
    zero = jnp.int32(0)
    return EnvState(
        memory=jnp.asarray(BOOT_MEMORY),
        V=jnp.zeros(16, jnp.uint8),
        I=zero,
        pc=jnp.int32(ROM_START),
        sp=zero,
        stack=jnp.zeros(16, jnp.int32),
        delay_timer=zero,
        sound_timer=zero,
        framebuffer=jnp.zeros((HEIGHT, WIDTH), jnp.uint8),
        keys=jnp.zeros(16, jnp.uint8),
        rng=seed_to_rng(seed),
        frame=zero,
    )


# ---- handlers: (machine with pc advanced, op) -> Effect ---------------------------------------


def no_effect(m: EnvState) -> Effect:
    no = jnp.zeros((), bool)
    return Effect(
        V=m.V, I=m.I, pc=m.pc, sp=m.sp, push=no, push_at=m.sp, push_value=m.pc,
        delay_timer=m.delay_timer, sound_timer=m.sound_timer, rng=m.rng,
        write_addr=jnp.zeros(16, jnp.int32), write_value=jnp.zeros(16, jnp.uint8),
        write_mask=jnp.zeros(16, bool), draw=no, clear=no,
    )  # fmt: skip


def skip_if(m: EnvState, condition: jax.Array) -> Effect:
    return no_effect(m)._replace(pc=jnp.where(condition, (m.pc + 2) & 0xFFF, m.pc))


def set_v(m: EnvState, x: jax.Array, value: jax.Array) -> Effect:
    return no_effect(m)._replace(V=m.V.at[x].set(value.astype(jnp.uint8)))


def set_v_flag(m: EnvState, x: jax.Array, value: jax.Array, flag: jax.Array) -> Effect:
    """The result into VX, then the flag into VF (so X = F keeps the flag)."""
    v = m.V.at[x].set(value.astype(jnp.uint8))
    return no_effect(m)._replace(V=v.at[0xF].set(flag.astype(jnp.uint8)))


def op_00e0(m: EnvState, op: Op) -> Effect:
    return no_effect(m)._replace(clear=jnp.ones((), bool))


def op_00ee(m: EnvState, op: Op) -> Effect:
    sp = (m.sp - 1) & 0xF
    return no_effect(m)._replace(sp=sp, pc=m.stack[sp])


def family_0(m: EnvState, op: Op) -> Effect:
    index = jnp.where(op.word == 0x00E0, 1, jnp.where(op.word == 0x00EE, 2, 0))
    return lax.switch(index, [lambda m, op: no_effect(m), op_00e0, op_00ee], m, op)


def op_1nnn(m: EnvState, op: Op) -> Effect:
    return no_effect(m)._replace(pc=op.nnn)


def op_2nnn(m: EnvState, op: Op) -> Effect:
    return no_effect(m)._replace(
        push=jnp.ones((), bool), push_at=m.sp, push_value=m.pc, sp=(m.sp + 1) & 0xF, pc=op.nnn
    )


def op_3xnn(m: EnvState, op: Op) -> Effect:
    return skip_if(m, m.V[op.x].astype(jnp.int32) == op.nn)


def op_4xnn(m: EnvState, op: Op) -> Effect:
    return skip_if(m, m.V[op.x].astype(jnp.int32) != op.nn)


def op_5xy0(m: EnvState, op: Op) -> Effect:
    return skip_if(m, (op.n == 0) & (m.V[op.x] == m.V[op.y]))


def op_6xnn(m: EnvState, op: Op) -> Effect:
    return set_v(m, op.x, op.nn)


def op_7xnn(m: EnvState, op: Op) -> Effect:
    return set_v(m, op.x, (m.V[op.x].astype(jnp.int32) + op.nn) & 0xFF)


def _xy(m: EnvState, op: Op) -> tuple[jax.Array, jax.Array]:
    return m.V[op.x].astype(jnp.int32), m.V[op.y].astype(jnp.int32)


def op_8xy0(m: EnvState, op: Op) -> Effect:
    return set_v(m, op.x, m.V[op.y])


def op_8xy1(m: EnvState, op: Op) -> Effect:
    return set_v(m, op.x, m.V[op.x] | m.V[op.y])


def op_8xy2(m: EnvState, op: Op) -> Effect:
    return set_v(m, op.x, m.V[op.x] & m.V[op.y])


def op_8xy3(m: EnvState, op: Op) -> Effect:
    return set_v(m, op.x, m.V[op.x] ^ m.V[op.y])


def op_8xy4(m: EnvState, op: Op) -> Effect:
    a, b = _xy(m, op)
    return set_v_flag(m, op.x, (a + b) & 0xFF, a + b > 0xFF)


def op_8xy5(m: EnvState, op: Op) -> Effect:
    a, b = _xy(m, op)
    return set_v_flag(m, op.x, (a - b) & 0xFF, a >= b)


def op_8xy6(m: EnvState, op: Op) -> Effect:
    _, b = _xy(m, op)
    return set_v_flag(m, op.x, b >> 1, b & 1)


def op_8xy7(m: EnvState, op: Op) -> Effect:
    a, b = _xy(m, op)
    return set_v_flag(m, op.x, (b - a) & 0xFF, b >= a)


def op_8xye(m: EnvState, op: Op) -> Effect:
    _, b = _xy(m, op)
    return set_v_flag(m, op.x, (b << 1) & 0xFF, b >> 7)


def nop(m: EnvState, op: Op) -> Effect:
    return no_effect(m)


ALU = (
    [op_8xy0, op_8xy1, op_8xy2, op_8xy3, op_8xy4, op_8xy5, op_8xy6, op_8xy7]
    + [nop] * 6
    + [
        op_8xye,
        nop,
    ]
)


def family_8(m: EnvState, op: Op) -> Effect:
    return lax.switch(op.n, ALU, m, op)


def op_9xy0(m: EnvState, op: Op) -> Effect:
    return skip_if(m, (op.n == 0) & (m.V[op.x] != m.V[op.y]))


def op_annn(m: EnvState, op: Op) -> Effect:
    return no_effect(m)._replace(I=op.nnn)


def op_bnnn(m: EnvState, op: Op) -> Effect:
    return no_effect(m)._replace(pc=(op.nnn + m.V[0].astype(jnp.int32)) & 0xFFF)


def op_cxnn(m: EnvState, op: Op) -> Effect:
    rng = xorshift32(m.rng)
    value = (rng >> 24).astype(jnp.int32) & op.nn
    return set_v(m, op.x, value)._replace(rng=rng)


def op_dxyn(m: EnvState, op: Op) -> Effect:
    return no_effect(m)._replace(draw=jnp.ones((), bool))


def family_e(m: EnvState, op: Op) -> Effect:
    held = m.keys[m.V[op.x] & 0xF] != 0
    return skip_if(m, ((op.nn == 0x9E) & held) | ((op.nn == 0xA1) & ~held))


def op_fx07(m: EnvState, op: Op) -> Effect:
    return set_v(m, op.x, m.delay_timer)


def op_fx0a(m: EnvState, op: Op) -> Effect:
    held = m.keys != 0
    first = jnp.argmax(held).astype(jnp.int32)
    waiting = ~held.any()
    effect = set_v(m, op.x, jnp.where(waiting, m.V[op.x].astype(jnp.int32), first))
    return effect._replace(pc=jnp.where(waiting, (m.pc - 2) & 0xFFF, m.pc))


def op_fx15(m: EnvState, op: Op) -> Effect:
    return no_effect(m)._replace(delay_timer=m.V[op.x].astype(jnp.int32))


def op_fx18(m: EnvState, op: Op) -> Effect:
    return no_effect(m)._replace(sound_timer=m.V[op.x].astype(jnp.int32))


def op_fx1e(m: EnvState, op: Op) -> Effect:
    return no_effect(m)._replace(I=(m.I + m.V[op.x].astype(jnp.int32)) & 0xFFF)


def op_fx29(m: EnvState, op: Op) -> Effect:
    return no_effect(m)._replace(I=(m.V[op.x].astype(jnp.int32) & 0xF) * 5)


def op_fx33(m: EnvState, op: Op) -> Effect:
    value = m.V[op.x].astype(jnp.int32)
    k = jnp.arange(16, dtype=jnp.int32)
    digits = jnp.stack([value // 100, value // 10 % 10, value % 10])
    return no_effect(m)._replace(
        write_addr=(m.I + k) & 0xFFF,
        write_value=jnp.pad(digits, (0, 13)).astype(jnp.uint8),
        write_mask=k < 3,
    )


def op_fx55(m: EnvState, op: Op) -> Effect:
    k = jnp.arange(16, dtype=jnp.int32)
    return no_effect(m)._replace(
        write_addr=(m.I + k) & 0xFFF,
        write_value=m.V,
        write_mask=k <= op.x,
        I=(m.I + op.x + 1) & 0xFFF,
    )


def op_fx65(m: EnvState, op: Op) -> Effect:
    k = jnp.arange(16, dtype=jnp.int32)
    loaded = m.memory[(m.I + k) & 0xFFF]
    return no_effect(m)._replace(V=jnp.where(k <= op.x, loaded, m.V), I=(m.I + op.x + 1) & 0xFFF)


MISC = [nop, op_fx07, op_fx0a, op_fx15, op_fx18, op_fx1e, op_fx29, op_fx33, op_fx55, op_fx65]
MISC_INDEX = np.zeros(256, np.int32)
for _index, _nn in enumerate((0x07, 0x0A, 0x15, 0x18, 0x1E, 0x29, 0x33, 0x55, 0x65), start=1):
    MISC_INDEX[_nn] = _index


def family_f(m: EnvState, op: Op) -> Effect:
    return lax.switch(jnp.asarray(MISC_INDEX)[op.nn], MISC, m, op)


FAMILIES = [
    family_0, op_1nnn, op_2nnn, op_3xnn, op_4xnn, op_5xy0, op_6xnn, op_7xnn,
    family_8, op_9xy0, op_annn, op_bnnn, op_cxnn, op_dxyn, family_e, family_f,
]  # fmt: skip


# ---- fetch, dispatch, apply ---------------------------------------------------------------------


def draw_sprite(m: EnvState, op: Op) -> tuple[jax.Array, jax.Array]:
    """DXYN: the screen with the sprite XORed in (pixels wrap around), and VF."""
    rows = jnp.arange(15, dtype=jnp.int32)
    cols = jnp.arange(8, dtype=jnp.int32)
    sprite = m.memory[(m.I + rows) & 0xFFF].astype(jnp.int32)
    bits = ((sprite[:, None] >> (7 - cols[None, :])) & 1) * (rows[:, None] < op.n)
    x0 = m.V[op.x].astype(jnp.int32) % WIDTH
    y0 = m.V[op.y].astype(jnp.int32) % HEIGHT
    ys = jnp.broadcast_to(((y0 + rows) % HEIGHT)[:, None], (15, 8))
    xs = jnp.broadcast_to(((x0 + cols) % WIDTH)[None, :], (15, 8))
    current = m.framebuffer[ys, xs].astype(jnp.int32)
    erased = jnp.any((current & bits) != 0)
    screen = m.framebuffer.at[ys, xs].set((current ^ bits).astype(jnp.uint8))
    return screen, erased


def execute(m: EnvState) -> EnvState:
    word = (m.memory[m.pc & 0xFFF].astype(jnp.int32) << 8) | m.memory[(m.pc + 1) & 0xFFF]
    op = Op(
        word=word,
        x=(word >> 8) & 0xF,
        y=(word >> 4) & 0xF,
        n=word & 0xF,
        nn=word & 0xFF,
        nnn=word & 0xFFF,
    )
    m = m._replace(pc=(m.pc + 2) & 0xFFF)
    e = lax.switch(word >> 12, FAMILIES, m, op)
    stack = jnp.where(e.push, m.stack.at[e.push_at].set(e.push_value), m.stack)
    old = m.memory[e.write_addr]
    memory = m.memory.at[e.write_addr].set(jnp.where(e.write_mask, e.write_value, old))
    drawn, erased = draw_sprite(m, op)
    screen = jnp.where(e.clear, jnp.zeros_like(m.framebuffer), m.framebuffer)
    screen = jnp.where(e.draw, drawn, screen)
    v = jnp.where(e.draw, e.V.at[0xF].set(erased.astype(jnp.uint8)), e.V)
    return m._replace(
        memory=memory, V=v, I=e.I, pc=e.pc, sp=e.sp, stack=stack, delay_timer=e.delay_timer,
        sound_timer=e.sound_timer, framebuffer=screen, rng=e.rng,
    )  # fmt: skip


def step(
    state: EnvState, action: jax.Array
) -> tuple[EnvState, jax.Array, jax.Array, jax.Array, jax.Array]:
    score_before = state.memory[SCORE].astype(jnp.int32)
    key = jnp.asarray(KEYMAP)[jnp.clip(action, 0, len(KEYMAP) - 1)]
    keys = (jnp.arange(16, dtype=jnp.int32) == key).astype(jnp.uint8)
    state = state._replace(keys=keys)
    state = lax.fori_loop(0, INSTRUCTIONS_PER_FRAME, lambda _, m: execute(m), state)
    state = state._replace(
        delay_timer=jnp.maximum(state.delay_timer - 1, 0),
        sound_timer=jnp.maximum(state.sound_timer - 1, 0),
        frame=state.frame + 1,
    )
    reward = (state.memory[SCORE].astype(jnp.int32) - score_before).astype(jnp.float32)
    terminated = state.memory[OVER] != 0
    truncated = state.frame >= EPISODE_CAP
    return state, observe(state), reward, terminated, truncated


# byte / 255 in float32, correctly rounded (XLA turns a division by a constant into a
# multiplication by its reciprocal, one ulp off for 30 / 255)
BYTE_SCALE = np.arange(256, dtype=np.float32) / np.float32(255.0)


def observe(state: EnvState) -> jax.Array:
    return jnp.asarray(BYTE_SCALE)[state.V[4:12]]


# ---- canonical state --------------------------------------------------------------------------


def to_canonical(state: EnvState) -> dict[str, jax.Array]:
    return state._asdict()


def from_canonical(fields: dict[str, jax.Array]) -> EnvState:
    return EnvState(**{name: fields[name] for name in EnvState._fields})
