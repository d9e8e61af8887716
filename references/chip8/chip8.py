"""CHIP-8 interpreter and a Breakout environment on it (the reference; written for envforge).

One agent step is one 60 Hz frame: the action's key is held, ``INSTRUCTIONS_PER_FRAME``
instructions run, then the delay and sound timers count down by one. The game is
``breakout.asm`` (assembled by ``asm.py`` at import); the reward is the change of its score
byte in memory, the episode ends when the game sets its OVER byte, and is truncated after
``EPISODE_CAP`` frames.

Interpreter choices (where CHIP-8 interpreters differ; ports must make the same ones):

* Addresses wrap at 4 KiB: every memory access and ``I``'s arithmetic are taken mod 0x1000,
  ``PC`` advances mod 0x1000.
* ``8XY6``/``8XYE`` shift ``VY`` into ``VX`` (COSMAC VIP); ``8XY1/2/3`` leave ``VF`` alone.
* Flag ops (``8XY4/5/6/7/E``) write the result first and ``VF`` last, so ``X = F`` keeps the flag.
* ``FX55``/``FX65`` leave ``I`` at ``I + X + 1`` (VIP). ``BNNN`` jumps to ``NNN + V0``.
* ``DXYN`` XORs a sprite of ``N`` rows from ``memory[I..]`` at ``(VX, VY)``; every pixel wraps
  around the screen (``x mod 64``, ``y mod 32``); ``VF`` = 1 when a lit pixel was erased.
* ``FX0A`` waits: with no key held the instruction repeats (``PC`` stays); otherwise ``VX`` is
  the lowest held key.
* ``CXNN`` draws from xorshift32 (state field ``rng``): ``VX = (next >> 24) & NN``. The generator
  is replicated by ports (``[rng] mode = "replicate"``), not taped.
* The stack has 16 slots and ``SP`` wraps mod 16 (a 17th nested call overwrites slot 0).
* Opcodes outside the standard set (``5XY1``, ``8XY8``, ``EX00``...) and ``0NNN`` do nothing.

Each opcode has its own handler method, named after its pattern (``op_8xy6``), so that a
finding's source location names the handler.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent


def _load_assembler() -> Any:
    """asm.py beside this file (the verifier loads this file by path, not as a package)."""
    spec = importlib.util.spec_from_file_location("chip8_asm", HERE / "asm.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("chip8_asm", module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


PROGRAM = _load_assembler().assemble_file(HERE / "breakout.asm")
ROM = PROGRAM.code
ROM_START = 0x200
ROM_END = ROM_START + len(ROM)  # first address after the program
SCORE = PROGRAM.symbols["score"]
OVER = PROGRAM.symbols["over"]

INSTRUCTIONS_PER_FRAME = 32
EPISODE_CAP = 3000
KEYMAP = (-1, 0x4, 0x6)  # action -> key held for the frame (-1: none)
OBS_REGISTERS = slice(4, 12)  # V4..VB: paddle x/y, ball x/y/dx/dy, score, lives

FONT = bytes(
    [
        0xF0, 0x90, 0x90, 0x90, 0xF0, 0x20, 0x60, 0x20, 0x20, 0x70,  # 0 1
        0xF0, 0x10, 0xF0, 0x80, 0xF0, 0xF0, 0x10, 0xF0, 0x10, 0xF0,  # 2 3
        0x90, 0x90, 0xF0, 0x10, 0x10, 0xF0, 0x80, 0xF0, 0x10, 0xF0,  # 4 5
        0xF0, 0x80, 0xF0, 0x90, 0xF0, 0xF0, 0x10, 0x20, 0x40, 0x40,  # 6 7
        0xF0, 0x90, 0xF0, 0x90, 0xF0, 0xF0, 0x90, 0xF0, 0x10, 0xF0,  # 8 9
        0xF0, 0x90, 0xF0, 0x90, 0x90, 0xE0, 0x90, 0xE0, 0x90, 0xE0,  # A B
        0xF0, 0x80, 0x80, 0x80, 0xF0, 0xE0, 0x90, 0x90, 0x90, 0xE0,  # C D
        0xF0, 0x80, 0xF0, 0x80, 0xF0, 0xF0, 0x80, 0xF0, 0x80, 0x80,  # E F
    ]
)  # fmt: skip
WIDTH, HEIGHT = 64, 32
MASK32 = 0xFFFFFFFF


def xorshift32(x: int) -> int:
    x ^= (x << 13) & MASK32
    x ^= x >> 17
    x ^= (x << 5) & MASK32
    return x


def seed_to_rng(seed: int) -> int:
    """The generator's first state for a reset seed (never 0, xorshift's fixed point)."""
    x = ((seed & MASK32) ^ 0x9E3779B9) * 0x85EBCA6B & MASK32
    x ^= x >> 13
    return x or 1


def boot_memory() -> np.ndarray:
    memory = np.zeros(4096, dtype=np.uint8)
    memory[: len(FONT)] = np.frombuffer(FONT, dtype=np.uint8)
    memory[ROM_START:ROM_END] = np.frombuffer(ROM, dtype=np.uint8)
    return memory


class Chip8Breakout:
    """Breakout on a CHIP-8 interpreter, with gymnasium's reset/step API (no gymnasium needed)."""

    def __init__(self, instructions_per_frame: int = INSTRUCTIONS_PER_FRAME) -> None:
        self.instructions_per_frame = instructions_per_frame
        self.reset(seed=0)

    # ---- canonical state ----------------------------------------------------------------
    def reset(self, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict]:
        self.memory = boot_memory()
        self.v = np.zeros(16, dtype=np.uint8)
        self.i = 0
        self.pc = ROM_START
        self.sp = 0
        self.stack = np.zeros(16, dtype=np.int32)
        self.delay_timer = 0
        self.sound_timer = 0
        self.framebuffer = np.zeros((HEIGHT, WIDTH), dtype=np.uint8)
        self.keys = np.zeros(16, dtype=np.uint8)
        self.rng = seed_to_rng(0 if seed is None else int(seed))
        self.frame = 0
        return self._get_obs(), {}

    def _get_obs(self) -> np.ndarray:
        return np.asarray(self.v[OBS_REGISTERS], dtype=np.float32) / 255.0

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        score_before = int(self.memory[SCORE])
        self.keys = np.zeros(16, dtype=np.uint8)
        key = KEYMAP[int(action)]
        if key >= 0:
            self.keys[key] = 1
        self._load()
        for _ in range(self.instructions_per_frame):
            self.execute()
        self._store()
        self.delay_timer = max(int(self.delay_timer) - 1, 0)
        self.sound_timer = max(int(self.sound_timer) - 1, 0)
        self.frame = int(self.frame) + 1
        reward = float(int(self.memory[SCORE]) - score_before)
        terminated = bool(self.memory[OVER] != 0)
        truncated = self.frame >= EPISODE_CAP
        return self._get_obs(), reward, terminated, truncated, {}

    # The interpreter runs on Python ints and bytearrays; the canonical fields are numpy.
    def _load(self) -> None:
        self.mem = bytearray(np.asarray(self.memory, dtype=np.uint8).tobytes())
        self.reg = [int(x) for x in self.v]
        self.fb = bytearray(np.asarray(self.framebuffer, dtype=np.uint8).tobytes())
        self.key = [int(k) for k in self.keys]
        self.ret = [int(x) for x in self.stack]
        self.i, self.pc, self.sp = int(self.i), int(self.pc), int(self.sp)
        self.delay_timer, self.sound_timer = int(self.delay_timer), int(self.sound_timer)
        self.rng = int(self.rng)

    def _store(self) -> None:
        self.memory = np.frombuffer(bytes(self.mem), dtype=np.uint8).copy()
        self.v = np.array(self.reg, dtype=np.uint8)
        self.framebuffer = np.frombuffer(bytes(self.fb), dtype=np.uint8).reshape(HEIGHT, WIDTH)
        self.stack = np.array(self.ret, dtype=np.int32)

    # ---- fetch, decode, execute -----------------------------------------------------------
    def execute(self) -> None:
        pc = self.pc
        op = self.mem[pc] << 8 | self.mem[(pc + 1) & 0xFFF]
        self.pc = (pc + 2) & 0xFFF
        DISPATCH[op >> 12](self, op)

    def family_0(self, op: int) -> None:
        if op == 0x00E0:
            self.op_00e0(op)
        elif op == 0x00EE:
            self.op_00ee(op)
        # 0NNN (machine-code call) and anything else in this family: ignored

    def op_00e0(self, op: int) -> None:
        self.fb = bytearray(WIDTH * HEIGHT)

    def op_00ee(self, op: int) -> None:
        self.sp = (self.sp - 1) & 0xF
        self.pc = self.ret[self.sp]

    def op_1nnn(self, op: int) -> None:
        self.pc = op & 0xFFF

    def op_2nnn(self, op: int) -> None:
        self.ret[self.sp] = self.pc
        self.sp = (self.sp + 1) & 0xF
        self.pc = op & 0xFFF

    def op_3xnn(self, op: int) -> None:
        if self.reg[op >> 8 & 0xF] == op & 0xFF:
            self.pc = (self.pc + 2) & 0xFFF

    def op_4xnn(self, op: int) -> None:
        if self.reg[op >> 8 & 0xF] != op & 0xFF:
            self.pc = (self.pc + 2) & 0xFFF

    def op_5xy0(self, op: int) -> None:
        if op & 0xF == 0 and self.reg[op >> 8 & 0xF] == self.reg[op >> 4 & 0xF]:
            self.pc = (self.pc + 2) & 0xFFF

    def op_6xnn(self, op: int) -> None:
        self.reg[op >> 8 & 0xF] = op & 0xFF

    def op_7xnn(self, op: int) -> None:
        x = op >> 8 & 0xF
        self.reg[x] = (self.reg[x] + (op & 0xFF)) & 0xFF

    def family_8(self, op: int) -> None:
        handler = ALU.get(op & 0xF)
        if handler is not None:
            handler(self, op >> 8 & 0xF, op >> 4 & 0xF)

    def op_8xy0(self, x: int, y: int) -> None:
        self.reg[x] = self.reg[y]

    def op_8xy1(self, x: int, y: int) -> None:
        self.reg[x] |= self.reg[y]

    def op_8xy2(self, x: int, y: int) -> None:
        self.reg[x] &= self.reg[y]

    def op_8xy3(self, x: int, y: int) -> None:
        self.reg[x] ^= self.reg[y]

    def op_8xy4(self, x: int, y: int) -> None:
        total = self.reg[x] + self.reg[y]
        self.reg[x] = total & 0xFF
        self.reg[0xF] = 1 if total > 0xFF else 0

    def op_8xy5(self, x: int, y: int) -> None:
        a, b = self.reg[x], self.reg[y]
        self.reg[x] = (a - b) & 0xFF
        self.reg[0xF] = 1 if a >= b else 0

    def op_8xy6(self, x: int, y: int) -> None:
        b = self.reg[y]
        self.reg[x] = b >> 1
        self.reg[0xF] = b & 1

    def op_8xy7(self, x: int, y: int) -> None:
        a, b = self.reg[x], self.reg[y]
        self.reg[x] = (b - a) & 0xFF
        self.reg[0xF] = 1 if b >= a else 0

    def op_8xye(self, x: int, y: int) -> None:
        b = self.reg[y]
        self.reg[x] = (b << 1) & 0xFF
        self.reg[0xF] = b >> 7

    def op_9xy0(self, op: int) -> None:
        if op & 0xF == 0 and self.reg[op >> 8 & 0xF] != self.reg[op >> 4 & 0xF]:
            self.pc = (self.pc + 2) & 0xFFF

    def op_annn(self, op: int) -> None:
        self.i = op & 0xFFF

    def op_bnnn(self, op: int) -> None:
        self.pc = ((op & 0xFFF) + self.reg[0]) & 0xFFF

    def op_cxnn(self, op: int) -> None:
        self.rng = xorshift32(self.rng)
        self.reg[op >> 8 & 0xF] = (self.rng >> 24) & op & 0xFF

    def op_dxyn(self, op: int) -> None:
        x0 = self.reg[op >> 8 & 0xF] % WIDTH
        y0 = self.reg[op >> 4 & 0xF] % HEIGHT
        erased = 0
        for row in range(op & 0xF):
            bits = self.mem[(self.i + row) & 0xFFF]
            y = (y0 + row) % HEIGHT
            for col in range(8):
                if bits & (0x80 >> col):
                    at = y * WIDTH + (x0 + col) % WIDTH
                    erased |= self.fb[at]
                    self.fb[at] ^= 1
        self.reg[0xF] = erased

    def family_e(self, op: int) -> None:
        if op & 0xFF == 0x9E:
            self.op_ex9e(op)
        elif op & 0xFF == 0xA1:
            self.op_exa1(op)

    def op_ex9e(self, op: int) -> None:
        if self.key[self.reg[op >> 8 & 0xF] & 0xF]:
            self.pc = (self.pc + 2) & 0xFFF

    def op_exa1(self, op: int) -> None:
        if not self.key[self.reg[op >> 8 & 0xF] & 0xF]:
            self.pc = (self.pc + 2) & 0xFFF

    def family_f(self, op: int) -> None:
        handler = MISC.get(op & 0xFF)
        if handler is not None:
            handler(self, op >> 8 & 0xF)

    def op_fx07(self, x: int) -> None:
        self.reg[x] = self.delay_timer

    def op_fx0a(self, x: int) -> None:
        for k in range(16):
            if self.key[k]:
                self.reg[x] = k
                return
        self.pc = (self.pc - 2) & 0xFFF  # no key held: wait on this instruction

    def op_fx15(self, x: int) -> None:
        self.delay_timer = self.reg[x]

    def op_fx18(self, x: int) -> None:
        self.sound_timer = self.reg[x]

    def op_fx1e(self, x: int) -> None:
        self.i = (self.i + self.reg[x]) & 0xFFF

    def op_fx29(self, x: int) -> None:
        self.i = (self.reg[x] & 0xF) * 5

    def op_fx33(self, x: int) -> None:
        value = self.reg[x]
        self.mem[self.i] = value // 100
        self.mem[(self.i + 1) & 0xFFF] = value // 10 % 10
        self.mem[(self.i + 2) & 0xFFF] = value % 10

    def op_fx55(self, x: int) -> None:
        for k in range(x + 1):
            self.mem[(self.i + k) & 0xFFF] = self.reg[k]
        self.i = (self.i + x + 1) & 0xFFF

    def op_fx65(self, x: int) -> None:
        for k in range(x + 1):
            self.reg[k] = self.mem[(self.i + k) & 0xFFF]
        self.i = (self.i + x + 1) & 0xFFF


C = Chip8Breakout
DISPATCH = (
    C.family_0, C.op_1nnn, C.op_2nnn, C.op_3xnn, C.op_4xnn, C.op_5xy0, C.op_6xnn, C.op_7xnn,
    C.family_8, C.op_9xy0, C.op_annn, C.op_bnnn, C.op_cxnn, C.op_dxyn, C.family_e, C.family_f,
)  # fmt: skip
ALU = {
    0x0: C.op_8xy0, 0x1: C.op_8xy1, 0x2: C.op_8xy2, 0x3: C.op_8xy3,
    0x4: C.op_8xy4, 0x5: C.op_8xy5, 0x6: C.op_8xy6, 0x7: C.op_8xy7, 0xE: C.op_8xye,
}  # fmt: skip
MISC = {
    0x07: C.op_fx07, 0x0A: C.op_fx0a, 0x15: C.op_fx15, 0x18: C.op_fx18, 0x1E: C.op_fx1e,
    0x29: C.op_fx29, 0x33: C.op_fx33, 0x55: C.op_fx55, 0x65: C.op_fx65,
}  # fmt: skip


# ---- meaningful states for the verifier ([verify] constrain in env.toml) ------------------------
CODE_END = PROGRAM.symbols["score"]  # code and sprites end before; the game's variables from here
INSTRUCTIONS = np.array(PROGRAM.instructions, dtype=np.int32)
RETURN_SITES = np.array(
    [a + 2 for a in PROGRAM.instructions if ROM[a - ROM_START] >> 4 == 0x2], dtype=np.int32
)


def _handler_weights() -> np.ndarray:
    """A weight per instruction of the program: uniform over opcode handlers, then over that
    handler's addresses. Uniform over the 178 addresses, a handler the program has once
    (``FX0A``'s wait, the self-test's ``8XY6``) was drawn once in 178 states, behind the 39
    ``6XNN``; weighted (see ``_snap``), once in about 55."""
    names = [opcode_name(ROM[a - ROM_START] << 8 | ROM[a - ROM_START + 1]) for a in INSTRUCTIONS]
    count = {name: names.count(name) for name in names}
    return np.array([1 / (len(count) * count[n]) for n in names])


def _snap(
    values: np.ndarray, low: int, high: int, onto: np.ndarray, weights: np.ndarray | None = None
) -> np.ndarray:
    """Each value of ``[low, high]`` onto an element of ``onto``, in order (so that hypothesis,
    shrinking a value towards ``low``, shrinks towards the first element). Equal shares of the
    range without ``weights``; with them, every element one value and the rest of the range
    shared in proportion to its weight."""
    span = high - low + 1
    where = np.clip(values.astype(np.int64), low, high) - low
    if weights is None or span <= len(onto):
        index = where * len(onto) // span
    else:
        share = 1 + (span - len(onto)) * weights / np.sum(weights)
        index = np.searchsorted(np.cumsum(share), where, side="right")  # k owns [c[k-1], c[k])
    return onto[np.clip(index, 0, len(onto) - 1)]


def meaningful_states(state: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Drawn canonical states made ones the machine can be in: the font and the program (code
    and sprites) in memory, the PC on an instruction of the program (weighted towards handlers
    the program has few of: ``_handler_weights``), every stack slot holding a
    return address (the instruction after a CALL; SP wraps, so a RET at SP 0 pops slot 15). Registers, timers, the screen and the
    game's variables in memory keep their drawn values (the OVER flag only its low bit)."""
    memory = state["memory"]
    memory[:, : len(FONT)] = np.frombuffer(FONT, dtype=np.uint8)
    memory[:, ROM_START:CODE_END] = np.frombuffer(ROM[: CODE_END - ROM_START], dtype=np.uint8)
    memory[:, OVER] &= 1  # half the drawn games over, half running
    state["pc"] = _snap(state["pc"], ROM_START, CODE_END - 1, INSTRUCTIONS, PC_WEIGHTS)
    state["stack"] = _snap(state["stack"], 0, CODE_END - 1, RETURN_SITES)
    return state


# ---- opcode-level explanation of a finding ([verify] explain in env.toml) -----------------------
ALU_NAMES = {0x0: "8XY0", 0x1: "8XY1", 0x2: "8XY2", 0x3: "8XY3", 0x4: "8XY4", 0x5: "8XY5",
             0x6: "8XY6", 0x7: "8XY7", 0xE: "8XYE"}  # fmt: skip
MISC_NAMES = {0x07: "FX07", 0x0A: "FX0A", 0x15: "FX15", 0x18: "FX18", 0x1E: "FX1E",
              0x29: "FX29", 0x33: "FX33", 0x55: "FX55", 0x65: "FX65"}  # fmt: skip
FAMILY_NAMES = ("0NNN", "1NNN", "2NNN", "3XNN", "4XNN", "5XY0", "6XNN", "7XNN", "8XY?", "9XY0",
                "ANNN", "BNNN", "CXNN", "DXYN", "EX??", "FX??")  # fmt: skip
# instructions that decide the next PC (every instruction writes it: these choose where)
CONTROL = {"00EE", "1NNN", "2NNN", "3XNN", "4XNN", "5XY0", "9XY0", "BNNN", "EX9E", "EXA1", "FX0A"}
# which canonical field a transition key is computed from
DERIVED = {"obs": "V", "reward": "memory", "terminated": "memory", "truncated": "frame"}


def opcode_name(op: int) -> str:
    """The pattern of an instruction word (``8XY6``), as the handlers are named."""
    family = op >> 12
    if family == 0:
        return {0x00E0: "00E0", 0x00EE: "00EE"}.get(op, "0NNN")
    if family == 8:
        return ALU_NAMES.get(op & 0xF, f"8XY{op & 0xF:X} (no-op)")
    if family == 0xE:
        return {0x9E: "EX9E", 0xA1: "EXA1"}.get(op & 0xFF, f"EX{op & 0xFF:02X} (no-op)")
    if family == 0xF:
        return MISC_NAMES.get(op & 0xFF, f"FX{op & 0xFF:02X} (no-op)")
    return FAMILY_NAMES[family]


PC_WEIGHTS = _handler_weights()


def _machine_fields(m: Chip8Breakout) -> dict[str, np.ndarray]:
    return {
        "memory": np.frombuffer(bytes(m.mem), np.uint8),
        "V": np.array(m.reg),
        "I": np.array([m.i]),
        "pc": np.array([m.pc]),
        "sp": np.array([m.sp]),
        "stack": np.array(m.ret),
        "delay_timer": np.array([m.delay_timer]),
        "sound_timer": np.array([m.sound_timer]),
        "framebuffer": np.frombuffer(bytes(m.fb), np.uint8),
        "rng": np.array([m.rng]),
    }


def _element(field: str, index: int) -> str:
    if field == "framebuffer":
        return f"framebuffer[{index // WIDTH}][{index % WIDTH}]"
    if field == "pc":
        return f"to 0x{index:03X}"
    return f"{field}[{index}]" if field in ("memory", "V", "stack") else field


def explain_step(state: dict[str, Any], action: Any, fields: list[str]) -> str:
    """Which instructions of the reference's step wrote each diverging field (and elements):
    the finding then names the opcode handler, e.g. ``V[15] by 8XY6 at PC 0x35A``."""
    m = Chip8Breakout()
    for name, attr in (("memory", "memory"), ("V", "v"), ("stack", "stack"),
                       ("framebuffer", "framebuffer")):  # fmt: skip
        setattr(m, attr, np.asarray(state[name]).copy())
    for name in ("I", "pc", "sp", "delay_timer", "sound_timer", "rng"):
        setattr(m, name.lower() if name == "I" else name, int(state[name]))
    m.keys = np.zeros(16, dtype=np.uint8)
    key = KEYMAP[int(action)] if 0 <= int(action) < len(KEYMAP) else -1
    if key >= 0:
        m.keys[key] = 1
    m._load()
    writes: dict[str, list[str]] = {}
    ran: list[str] = []
    wanted = list(dict.fromkeys(DERIVED.get(f, f) for f in fields))
    first = ""  # the first instruction run that wrote a diverging field: the likeliest culprit
    for _ in range(m.instructions_per_frame):
        pc = m.pc
        op = m.mem[pc] << 8 | m.mem[(pc + 1) & 0xFFF]
        before = _machine_fields(m)
        m.execute()
        after = _machine_fields(m)
        name = opcode_name(op)
        ran.append(f"{name}@{pc:03X}")
        for field, old in before.items():
            changed = np.flatnonzero(old != after[field])
            if field == "pc" and name in CONTROL:  # where it went, not just pc + 2
                changed = np.array([int(after["pc"][0])])
            elif field == "pc" or not len(changed):
                continue
            elements = ", ".join(_element(field, int(k)) for k in changed[:4])
            writes.setdefault(field, []).append(
                f"{name} (op_{name.lower()}) at PC 0x{pc:03X}: {elements}"
            )
            if not first and field in wanted:
                first = f"{name} (op_{name.lower()}) at PC 0x{pc:03X} ({field})"
    lines = [f"first instruction of the step to write a diverging field: {first}"] if first else []
    for key in wanted:
        if key in writes:
            lines.append(f"{key} written in the reference's step by " + "; ".join(writes[key][:6]))
        elif key in ("delay_timer", "sound_timer", "frame", "keys"):
            lines.append(f"{key} is updated once per frame, after the instructions")
        else:
            lines.append(f"no instruction of the reference's step wrote {key}: a port handler that "
                         "should not have (see the instructions run below)")  # fmt: skip
    return "\n".join(lines + ["instructions run (pattern@PC): " + " ".join(ran)])
