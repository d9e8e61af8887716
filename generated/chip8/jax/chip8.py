"""JAX port of the CHIP-8 Breakout environment (``references/chip8/chip8.py``).

One frame per step: the action's key held, ``INSTRUCTIONS_PER_FRAME`` instructions in a
``lax.fori_loop``, timers down by one. Each instruction is fetched and decoded once (its fields,
``VX``/``VY`` and the 16 bytes at ``I``), every handler returns the fields it writes, and
``execute`` keeps those of the handler the opcode selects. Under ``vmap`` every handler runs for
every env whatever the opcode (a ``lax.switch`` would too, then select every output of every
branch), so handlers return a few scalars: one register write, one flag, at most 16 memory
bytes at ``I``, the screen only for ``00E0`` and ``DXYN``. Interpreter choices are the
reference's (see its docstring).

Single-env, pure functions; the envforge JAX backend vmaps and jits them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from envforge.kit import speed_layer

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


class Op(NamedTuple):
    """The instruction, decoded once: its fields, and the registers and memory it may read."""

    word: jax.Array
    x: jax.Array
    y: jax.Array
    n: jax.Array
    nn: jax.Array
    nnn: jax.Array
    vx: jax.Array  # int32: V[x] and V[y], read once per instruction
    vy: jax.Array
    window: jax.Array  # uint8[16]: memory[I .. I + 15] (FX65's loads, DXYN's sprite)


# An instruction's effect: each handler returns the fields it writes (a dict); `execute`
# keeps the one of the handler the opcode selects. Under `vmap` every handler runs for every
# env, so handlers return a few scalars, not the 4 KiB memory: memory writes are
# `write_value`/`write_mask` at `I .. I + 15`, register writes `vx`/`vf` (one each).
class Effect(NamedTuple):
    V: jax.Array  # uint8[16]: the registers before VX and VF are written (FX65 loads them)
    vx: jax.Array
    vf: jax.Array
    I: jax.Array  # noqa: E741
    pc: jax.Array
    sp: jax.Array
    push: jax.Array  # bool: stack[sp] = pc (the return address)
    delay_timer: jax.Array
    sound_timer: jax.Array
    rng: jax.Array
    write_value: jax.Array  # uint8[16] for memory[I + k]
    write_mask: jax.Array  # bool[16]
    framebuffer: jax.Array


# ---- the screen: pixels, or (speed layer) each row's 64 pixels in two uint32 words ---------------
#
# `framebuffer` is uint8[32, 64] in the canonical state. With the speed layer on, the port keeps
# it as uint32[32, 2] (pixel (y, x) is bit 31 - x % 32 of word x // 32 of row y): a sprite is XORed
# into 32 rows of two words instead of scattered pixel by pixel, and 00E0 clears 256 bytes, not
# 2 KiB (under `vmap` both run for every instruction of every env).
BIT = (31 - np.arange(32)).astype(np.uint32)  # a word's pixels, x % 32 = 0..31


def blank_screen() -> jax.Array:
    if speed_layer.enabled():
        return jnp.zeros((HEIGHT, 2), jnp.uint32)
    return jnp.zeros((HEIGHT, WIDTH), jnp.uint8)


def draw_sprite(framebuffer: jax.Array, op: Op) -> tuple[jax.Array, jax.Array]:
    """DXYN: the screen with the sprite XORed in (pixels wrap around), and VF."""
    x0 = op.vx % WIDTH
    y0 = op.vy % HEIGHT
    if speed_layer.enabled():
        rows = jnp.arange(2 * 16, dtype=jnp.int32)
        sprite = jnp.where(rows < op.n, jnp.pad(op.window, (0, 16)), 0).astype(jnp.uint32)
        # screen row y shows sprite row (y - y0) % 32: a slice of the sprite rows twice over
        line = lax.dynamic_slice(jnp.concatenate([sprite, sprite]), ((-y0) & 31,), (HEIGHT,))
        line = line << 24  # the row's 8 pixels at x = 0..7 of a word
        words = []
        for w in range(2):  # the word of pixels x = 32 w .. 32 w + 31
            at = (x0 - 32 * w) & 63  # x0 from the word's first pixel, around the screen
            right = line >> jnp.minimum(at, 31).astype(jnp.uint32)
            left = line << jnp.clip(64 - at, 0, 31).astype(jnp.uint32)  # wrapped past x = 63
            words.append(jnp.where(at < 32, right, jnp.where(at > 56, left, jnp.uint32(0))))
        bits = jnp.stack(words, axis=1)
        erased = jnp.any((framebuffer & bits) != 0)
        return framebuffer ^ bits, erased
    rows = jnp.arange(15, dtype=jnp.int32)
    cols = jnp.arange(8, dtype=jnp.int32)
    sprite = op.window[:15].astype(jnp.int32)
    bits = ((sprite[:, None] >> (7 - cols[None, :])) & 1) * (rows[:, None] < op.n)
    ys = jnp.broadcast_to(((y0 + rows) % HEIGHT)[:, None], (15, 8))
    xs = jnp.broadcast_to(((x0 + cols) % WIDTH)[None, :], (15, 8))
    current = framebuffer[ys, xs].astype(jnp.int32)
    erased = jnp.any((current & bits) != 0)
    return framebuffer.at[ys, xs].set((current ^ bits).astype(jnp.uint8)), erased


def screen_pixels(framebuffer: jax.Array) -> jax.Array:
    """The canonical uint8[32, 64] screen."""
    if not speed_layer.enabled():
        return framebuffer
    bits = (framebuffer[:, :, None] >> jnp.asarray(BIT)) & 1
    return bits.reshape(HEIGHT, WIDTH).astype(jnp.uint8)


def screen_from_pixels(framebuffer: jax.Array) -> jax.Array:
    if not speed_layer.enabled():
        return framebuffer
    bits = framebuffer.reshape(HEIGHT, 2, 32).astype(jnp.uint32) & 1
    return jnp.sum(bits << jnp.asarray(BIT), axis=-1, dtype=jnp.uint32)


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
        framebuffer=blank_screen(),
        keys=jnp.zeros(16, jnp.uint8),
        rng=seed_to_rng(seed),
        frame=zero,
    )


# ---- handlers: (machine with pc advanced, op) -> the fields they write ---------------------------

Writes = dict[str, jax.Array]
TRUE = True


def skip_if(m: EnvState, condition: jax.Array) -> Writes:
    return {"pc": jnp.where(condition, (m.pc + 2) & 0xFFF, m.pc)}


def set_v(m: EnvState, x: jax.Array, value: jax.Array) -> Writes:
    return {"vx": value & 0xFF}


def set_v_flag(m: EnvState, x: jax.Array, value: jax.Array, flag: jax.Array) -> Writes:
    """The result into VX, then the flag into VF (so X = F keeps the flag)."""
    return {"vx": value & 0xFF, "vf": flag.astype(jnp.int32)}


def op_00e0(m: EnvState, op: Op) -> Writes:
    return {"framebuffer": blank_screen()}


def op_00ee(m: EnvState, op: Op) -> Writes:
    sp = (m.sp - 1) & 0xF
    return {"sp": sp, "pc": m.stack[sp]}


def op_1nnn(m: EnvState, op: Op) -> Writes:
    return {"pc": op.nnn}


def op_2nnn(m: EnvState, op: Op) -> Writes:
    return {"push": TRUE, "sp": (m.sp + 1) & 0xF, "pc": op.nnn}


def op_3xnn(m: EnvState, op: Op) -> Writes:
    return skip_if(m, op.vx == op.nn)


def op_4xnn(m: EnvState, op: Op) -> Writes:
    return skip_if(m, op.vx != op.nn)


def op_5xy0(m: EnvState, op: Op) -> Writes:
    return skip_if(m, (op.n == 0) & (op.vx == op.vy))


def op_6xnn(m: EnvState, op: Op) -> Writes:
    return set_v(m, op.x, op.nn)


def op_7xnn(m: EnvState, op: Op) -> Writes:
    return set_v(m, op.x, (op.vx + op.nn) & 0xFF)


def _xy(m: EnvState, op: Op) -> tuple[jax.Array, jax.Array]:
    return op.vx, op.vy


def op_8xy0(m: EnvState, op: Op) -> Writes:
    return set_v(m, op.x, op.vy)


def op_8xy1(m: EnvState, op: Op) -> Writes:
    return set_v(m, op.x, op.vx | op.vy)


def op_8xy2(m: EnvState, op: Op) -> Writes:
    return set_v(m, op.x, op.vx & op.vy)


def op_8xy3(m: EnvState, op: Op) -> Writes:
    return set_v(m, op.x, op.vx ^ op.vy)


def op_8xy4(m: EnvState, op: Op) -> Writes:
    a, b = _xy(m, op)
    return set_v_flag(m, op.x, (a + b) & 0xFF, a + b > 0xFF)


def op_8xy5(m: EnvState, op: Op) -> Writes:
    a, b = _xy(m, op)
    return set_v_flag(m, op.x, (a - b) & 0xFF, a >= b)


def op_8xy6(m: EnvState, op: Op) -> Writes:
    _, b = _xy(m, op)
    return set_v_flag(m, op.x, b >> 1, b & 1)


def op_8xy7(m: EnvState, op: Op) -> Writes:
    a, b = _xy(m, op)
    return set_v_flag(m, op.x, (b - a) & 0xFF, b >= a)


def op_8xye(m: EnvState, op: Op) -> Writes:
    _, b = _xy(m, op)
    return set_v_flag(m, op.x, (b << 1) & 0xFF, b >> 7)


def op_9xy0(m: EnvState, op: Op) -> Writes:
    return skip_if(m, (op.n == 0) & (op.vx != op.vy))


def op_annn(m: EnvState, op: Op) -> Writes:
    return {"I": op.nnn}


def op_bnnn(m: EnvState, op: Op) -> Writes:
    return {"pc": (op.nnn + m.V[0].astype(jnp.int32)) & 0xFFF}


def op_cxnn(m: EnvState, op: Op) -> Writes:
    rng = xorshift32(m.rng)
    value = (rng >> 24).astype(jnp.int32) & op.nn
    return set_v(m, op.x, value) | {"rng": rng}


def op_dxyn(m: EnvState, op: Op) -> Writes:
    framebuffer, erased = draw_sprite(m.framebuffer, op)
    return {"framebuffer": framebuffer, "vf": erased.astype(jnp.int32)}


def family_e(m: EnvState, op: Op) -> Writes:
    held = m.keys[op.vx & 0xF] != 0
    return skip_if(m, ((op.nn == 0x9E) & held) | ((op.nn == 0xA1) & ~held))


def op_fx07(m: EnvState, op: Op) -> Writes:
    return set_v(m, op.x, m.delay_timer)


def op_fx0a(m: EnvState, op: Op) -> Writes:
    held = m.keys != 0
    first = jnp.argmax(held).astype(jnp.int32)
    waiting = ~held.any()
    effect = set_v(m, op.x, jnp.where(waiting, op.vx, first))
    return effect | {"pc": jnp.where(waiting, (m.pc - 2) & 0xFFF, m.pc)}


def op_fx15(m: EnvState, op: Op) -> Writes:
    return {"delay_timer": op.vx}


def op_fx18(m: EnvState, op: Op) -> Writes:
    return {"sound_timer": op.vx}


def op_fx1e(m: EnvState, op: Op) -> Writes:
    return {"I": (m.I + op.vx) & 0xFFF}


def op_fx29(m: EnvState, op: Op) -> Writes:
    return {"I": (op.vx & 0xF) * 5}


def op_fx33(m: EnvState, op: Op) -> Writes:
    value = op.vx
    k = jnp.arange(16, dtype=jnp.int32)
    digits = jnp.stack([value // 100, value // 10 % 10, value % 10])
    return {"write_value": jnp.pad(digits, (0, 13)).astype(jnp.uint8), "write_mask": k < 3}


def op_fx55(m: EnvState, op: Op) -> Writes:
    k = jnp.arange(16, dtype=jnp.int32)
    return {"write_value": m.V, "write_mask": k <= op.x, "I": (m.I + op.x + 1) & 0xFFF}


def op_fx65(m: EnvState, op: Op) -> Writes:
    k = jnp.arange(16, dtype=jnp.int32)
    loaded = op.window
    return {"V": jnp.where(k <= op.x, loaded, m.V), "I": (m.I + op.x + 1) & 0xFFF}


# dispatch tables, as the reference's: family (top nibble), then 00E0/00EE, 8XY_ and FX__
FAMILIES = {
    0x1: op_1nnn, 0x2: op_2nnn, 0x3: op_3xnn, 0x4: op_4xnn, 0x5: op_5xy0, 0x6: op_6xnn,
    0x7: op_7xnn, 0x9: op_9xy0, 0xA: op_annn, 0xB: op_bnnn, 0xC: op_cxnn, 0xD: op_dxyn,
    0xE: family_e,
}  # fmt: skip
SYSTEM = {0x00E0: op_00e0, 0x00EE: op_00ee}
ALU = {
    0x0: op_8xy0, 0x1: op_8xy1, 0x2: op_8xy2, 0x3: op_8xy3,
    0x4: op_8xy4, 0x5: op_8xy5, 0x6: op_8xy6, 0x7: op_8xy7, 0xE: op_8xye,
}  # fmt: skip
MISC = {
    0x07: op_fx07, 0x0A: op_fx0a, 0x15: op_fx15, 0x18: op_fx18, 0x1E: op_fx1e,
    0x29: op_fx29, 0x33: op_fx33, 0x55: op_fx55, 0x65: op_fx65,
}  # fmt: skip


def handlers(op: Op) -> list[tuple[jax.Array, Callable[[EnvState, Op], Writes]]]:
    """Every handler with whether it is the one this opcode runs (at most one is)."""
    family = op.word >> 12
    return (
        [(family == f, h) for f, h in FAMILIES.items()]
        + [(op.word == w, h) for w, h in SYSTEM.items()]
        + [((family == 0x8) & (op.n == k), h) for k, h in ALU.items()]
        + [((family == 0xF) & (op.nn == k), h) for k, h in MISC.items()]
    )


# ---- fetch, dispatch, apply ---------------------------------------------------------------------


def decode(m: EnvState) -> Op:
    word = (m.memory[m.pc & 0xFFF].astype(jnp.int32) << 8) | m.memory[(m.pc + 1) & 0xFFF]
    x = (word >> 8) & 0xF
    y = (word >> 4) & 0xF
    k = jnp.arange(16, dtype=jnp.int32)
    return Op(
        word=word,
        x=x,
        y=y,
        n=word & 0xF,
        nn=word & 0xFF,
        nnn=word & 0xFFF,
        vx=m.V[x].astype(jnp.int32),
        vy=m.V[y].astype(jnp.int32),
        window=m.memory[(m.I + k) & 0xFFF],
    )


def execute(m: EnvState) -> EnvState:
    op = decode(m)
    m = m._replace(pc=(m.pc + 2) & 0xFFF)
    no = jnp.zeros((), bool)
    effect = {
        "V": m.V, "vx": op.vx, "vf": jnp.int32(0), "I": m.I, "pc": m.pc, "sp": m.sp, "push": no,
        "delay_timer": m.delay_timer, "sound_timer": m.sound_timer, "rng": m.rng,
        "write_value": jnp.zeros(16, jnp.uint8), "write_mask": jnp.zeros(16, bool),
        "framebuffer": m.framebuffer,
    }  # fmt: skip
    wrote = {"vx": no, "vf": no}
    for hit, handler in handlers(op):
        for field, value in handler(m, op).items():
            effect[field] = jnp.where(hit, value, effect[field])
            wrote[field] = wrote.get(field, no) | hit
    e = Effect(**effect)
    k = jnp.arange(16, dtype=jnp.int32)
    v = jnp.where(wrote["vx"] & (k == op.x), e.vx.astype(jnp.uint8), e.V)
    v = jnp.where(wrote["vf"] & (k == 0xF), e.vf.astype(jnp.uint8), v)
    stack = jnp.where(e.push & (k == m.sp), m.pc, m.stack)
    # every instruction writes the 16 bytes at I back (FX33/FX55 change some): reading them
    # first keeps XLA's update of the loop's memory in place (no 4 KiB copy per instruction)
    written = jnp.where(e.write_mask, e.write_value, op.window)
    memory = m.memory.at[(m.I + k) & 0xFFF].set(written)
    return m._replace(
        memory=memory, V=v, I=e.I, pc=e.pc, sp=e.sp, stack=stack, delay_timer=e.delay_timer,
        sound_timer=e.sound_timer, framebuffer=e.framebuffer, rng=e.rng,
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
    return state._asdict() | {"framebuffer": screen_pixels(state.framebuffer)}


def from_canonical(fields: dict[str, jax.Array]) -> EnvState:
    state = EnvState(**{name: fields[name] for name in EnvState._fields})
    return state._replace(framebuffer=screen_from_pixels(state.framebuffer))
