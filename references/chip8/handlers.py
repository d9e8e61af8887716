"""Which CHIP-8 opcode handler a source line belongs to ([verify] handlers in env.toml), for the
handler-level localization of mutation campaigns (docs/MUTATE.md, "Localization").

``handlers_at(file, scope, text)`` gets a line of the reference (``chip8.py``), a JAX port
(``chip8.py``) or a Rust port (``src/chip8.rs``): its file, its scope as
envforge reads it (the function, and in Rust the ``match`` arms around the line: ``alu [0x6]``,
``execute [0xE => 0x9E]``, ``misc [0x33]``; for Python at module level the name assigned:
``ALU``) and its text. It returns the opcode patterns as ``explain_step`` names them (``8XY6``).
Code outside every handler (reset, the step's key and timers, fetch and decode, observation,
the PyO3 glue in ``lib.rs``) belongs to none; a helper shared by a few handlers (the skip of
``3XNN``/``4XNN``/...) to all of them. Self-contained: the verifier loads this file by path.
"""

from __future__ import annotations

import re

ALU = {0x0: "8XY0", 0x1: "8XY1", 0x2: "8XY2", 0x3: "8XY3", 0x4: "8XY4", 0x5: "8XY5",
       0x6: "8XY6", 0x7: "8XY7", 0xE: "8XYE"}  # fmt: skip
MISC = {0x07: "FX07", 0x0A: "FX0A", 0x15: "FX15", 0x18: "FX18", 0x1E: "FX1E",
        0x29: "FX29", 0x33: "FX33", 0x55: "FX55", 0x65: "FX65"}  # fmt: skip
FAMILY = {0x1: "1NNN", 0x2: "2NNN", 0x3: "3XNN", 0x4: "4XNN", 0x5: "5XY0", 0x6: "6XNN",
          0x7: "7XNN", 0x9: "9XY0", 0xA: "ANNN", 0xB: "BNNN", 0xC: "CXNN", 0xD: "DXYN"}  # fmt: skip
SYSTEM = {0x00E0: "00E0", 0x00EE: "00EE"}
KEYS = {0x9E: "EX9E", 0xA1: "EXA1"}
HANDLERS = frozenset([*ALU.values(), *MISC.values(), *FAMILY.values(), *SYSTEM.values(),
                      *KEYS.values()])  # fmt: skip
"""Every opcode handler, named as ``chip8.opcode_name`` names the instructions."""

SKIPS = ["3XNN", "4XNN", "5XY0", "9XY0", "EX9E", "EXA1"]
FLAGGED = ["8XY4", "8XY5", "8XY6", "8XY7", "8XYE"]  # ALU handlers that write VF after VX

# helpers named by their function (Python: reference and JAX port; Rust) -> their handlers
HELPERS: dict[str, list[str]] = {
    "family_0": list(SYSTEM.values()),
    "family_8": list(ALU.values()),
    "family_e": list(KEYS.values()),
    "family_f": list(MISC.values()),
    "xorshift32": ["CXNN"],  # only CXNN draws
    "skip": SKIPS,  # Rust
    "skip_if": SKIPS,  # JAX
    "set_v": ["6XNN", "7XNN", "8XY0", "8XY1", "8XY2", "8XY3", "CXNN", "FX07", "FX0A"],
    "set_v_flag": FLAGGED,
    "_xy": FLAGGED,
    "draw_sprite": ["DXYN"],  # JAX: the sprite is drawn outside the switch
    "ALU": list(ALU.values()),  # dispatch tables (Python, module level)
    "MISC": list(MISC.values()),
    "SYSTEM": list(SYSTEM.values()),  # JAX: 00E0/00EE by word
    "FAMILIES": [*FAMILY.values(), *KEYS.values()],  # JAX: by the top nibble (E: family_e)
    "MISC_INDEX": list(MISC.values()),
}

# the JAX port's `execute` applies a handler's Effect after the switch: these lines are theirs
JAX_APPLY = (("e.push", ["2NNN"]), ("e.write", ["FX33", "FX55"]), ("e.clear", ["00E0"]),
             ("e.draw", ["DXYN"]), ("draw_sprite(", ["DXYN"]))  # fmt: skip


def handlers_at(file: str, scope: str, text: str) -> list[str]:
    name = file.rsplit("/", 1)[-1]
    if name == "chip8.rs":
        return _rust(scope)
    if name.endswith(".py"):
        return _python(scope, text)
    return []  # lib.rs: the PyO3 glue


def _python(scope: str, text: str) -> list[str]:
    if scope.startswith("op_") and scope[3:].upper() in HANDLERS:
        return [scope[3:].upper()]
    if scope == "execute":
        return [h for key, handlers in JAX_APPLY if key in text for h in handlers]
    return HELPERS.get(scope, [])


def _rust(scope: str) -> list[str]:
    match = re.fullmatch(r"(\w+)(?: \[(.*)\])?", scope)
    if match is None:
        return []
    function, arms = match.group(1), (match.group(2) or "").split(" => ")
    codes = [_code(a) for a in arms if a]
    if function.startswith("op_") and function[3:].upper() in HANDLERS:
        return [function[3:].upper()]
    if function == "alu":
        return _table(ALU, codes)
    if function == "misc":
        return _table(MISC, codes)
    if function == "execute" and arms[0]:
        return _family(codes)
    return HELPERS.get(function, [])  # `skip`; `execute`'s fetch and decode: none


def _code(arm: str) -> int | None:
    """A ``match`` arm's opcode bits (``0x9E``); None for ``_``, -1 for any other pattern."""
    if arm == "_":
        return None
    try:
        return int(arm, 16)
    except ValueError:
        return -1


def _table(table: dict[int, str], codes: list[int | None]) -> list[str]:
    """``alu``/``misc``: a line in arm ``k`` is that handler's, a line before the arms all's."""
    if not codes:
        return list(table.values())
    return [table[codes[0]]] if codes[0] in table else []


def _family(codes: list[int | None]) -> list[str]:
    """An arm of ``execute``'s ``match op >> 12`` (``_`` is the last family, ``FX__``)."""
    family = 0xF if codes[0] is None else codes[0]
    inner = {0x0: SYSTEM, 0x8: ALU, 0xE: KEYS, 0xF: MISC}.get(family)
    if inner is None:
        return [FAMILY[family]] if family in FAMILY else []
    if len(codes) == 1:  # the arm's own line: dispatches the whole family
        return list(inner.values())
    return [inner[codes[1]]] if codes[1] in inner else []  # `_ => {}`: an ignored opcode
