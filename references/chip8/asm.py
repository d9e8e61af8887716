"""A small two-pass CHIP-8 assembler (Cowgod's mnemonics), written for envforge.

Syntax, one statement per line, ``;`` starts a comment:

    label:                  a label (may share its line with an instruction)
    NAME = 0x2F             a constant
    LD V3, 0x10             an instruction: mnemonic, then comma-separated operands
    db 0xF0, 0x90, 7        data bytes
    org 0x3A0               zero bytes up to this address (data at a fixed place)

Operands: registers ``V0``..``VF``, ``I``, ``DT``, ``ST``, ``K``, ``F``, ``B``, ``[I]``; numbers
(decimal, ``0x``, ``0b``); labels and constants; sums and differences of those (``ball + 1``).
The program is placed at 0x200. :func:`assemble` returns the bytes, the symbol table and the
address of every instruction (the program counters a verifier may start from: data is not code).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ORIGIN = 0x200
_REGISTER = re.compile(r"^V([0-9A-F])$", re.IGNORECASE)
_TERM = re.compile(r"\s*([+-])?\s*([A-Za-z_][A-Za-z0-9_]*|0x[0-9A-Fa-f]+|0b[01]+|\d+)\s*")


class AsmError(ValueError):
    """A line the assembler cannot encode (the message names the line)."""


@dataclass
class Program:
    code: bytes
    symbols: dict[str, int]
    instructions: list[int] = field(default_factory=list)
    """Addresses of the instructions (not of ``db`` data)."""


def _reg(text: str) -> int | None:
    m = _REGISTER.match(text.strip())
    return int(m.group(1), 16) if m else None


def _value(text: str, symbols: dict[str, int], line: int) -> int:
    text = text.strip()
    pos, total = 0, 0
    if not text:
        raise AsmError(f"line {line}: missing operand")
    while pos < len(text):
        m = _TERM.match(text, pos)
        if m is None or m.end() == pos:
            raise AsmError(f"line {line}: cannot read {text!r}")
        sign, token = m.group(1), m.group(2)
        if token[0].isdigit():
            v = int(token, 0)
        elif token in symbols:
            v = symbols[token]
        else:
            raise AsmError(f"line {line}: unknown symbol {token!r}")
        total += -v if sign == "-" else v
        pos = m.end()
    return total


def _encode(mn: str, ops: list[str], symbols: dict[str, int], line: int) -> int:
    """One instruction word."""
    regs = [_reg(o) for o in ops]
    upper = [o.strip().upper() for o in ops]

    def val(k: int, bits: int) -> int:
        v = _value(ops[k], symbols, line)
        if not -(1 << (bits - 1)) <= v < (1 << bits):
            raise AsmError(f"line {line}: {ops[k]!r} = {v} does not fit in {bits} bits")
        return v & ((1 << bits) - 1)

    def shape(*kinds: str) -> bool:
        if len(kinds) != len(ops):
            return False
        for kind, r, u in zip(kinds, regs, upper, strict=True):
            if kind == "V" and r is None:
                return False
            if kind == "n" and (r is not None or u in ("I", "DT", "ST", "K", "F", "B", "[I]")):
                return False
            if kind not in ("V", "n") and u != kind:
                return False
        return True

    x = regs[0] if regs and regs[0] is not None else 0
    y = regs[1] if len(regs) > 1 and regs[1] is not None else 0
    alu = {"OR": 1, "AND": 2, "XOR": 3, "SUB": 5, "SHR": 6, "SUBN": 7, "SHL": 0xE}
    if mn == "CLS" and not ops:
        return 0x00E0
    if mn == "RET" and not ops:
        return 0x00EE
    if mn == "SYS" and shape("n"):
        return val(0, 12)
    if mn == "JP" and shape("n"):
        return 0x1000 | val(0, 12)
    if mn == "JP" and shape("V", "n") and x == 0:
        return 0xB000 | val(1, 12)
    if mn == "CALL" and shape("n"):
        return 0x2000 | val(0, 12)
    if mn in ("SE", "SNE") and shape("V", "n"):
        return (0x3000 if mn == "SE" else 0x4000) | x << 8 | val(1, 8)
    if mn in ("SE", "SNE") and shape("V", "V"):
        return (0x5000 if mn == "SE" else 0x9000) | x << 8 | y << 4
    if mn == "LD":
        if shape("V", "n"):
            return 0x6000 | x << 8 | val(1, 8)
        if shape("V", "V"):
            return 0x8000 | x << 8 | y << 4
        if shape("I", "n"):
            return 0xA000 | val(1, 12)
        if shape("V", "DT"):
            return 0xF007 | x << 8
        if shape("V", "K"):
            return 0xF00A | x << 8
        if shape("DT", "V"):
            return 0xF015 | y << 8
        if shape("ST", "V"):
            return 0xF018 | y << 8
        if shape("F", "V"):
            return 0xF029 | y << 8
        if shape("B", "V"):
            return 0xF033 | y << 8
        if shape("[I]", "V"):
            return 0xF055 | y << 8
        if shape("V", "[I]"):
            return 0xF065 | x << 8
    if mn == "ADD":
        if shape("V", "n"):
            return 0x7000 | x << 8 | val(1, 8)
        if shape("V", "V"):
            return 0x8004 | x << 8 | y << 4
        if shape("I", "V"):
            return 0xF01E | y << 8
    if mn in alu and shape("V", "V"):
        return 0x8000 | x << 8 | y << 4 | alu[mn]
    if mn == "RND" and shape("V", "n"):
        return 0xC000 | x << 8 | val(1, 8)
    if mn == "DRW" and shape("V", "V", "n"):
        return 0xD000 | x << 8 | y << 4 | val(2, 4)
    if mn in ("SKP", "SKNP") and shape("V"):
        return (0xE09E if mn == "SKP" else 0xE0A1) | x << 8
    raise AsmError(f"line {line}: cannot encode {mn} {', '.join(ops)}")


def _statements(source: str) -> list[tuple[int, str | None, str, list[str]]]:
    """(line, label, mnemonic, operands) per statement; constants come back as mnemonic '='."""
    out: list[tuple[int, str | None, str, list[str]]] = []
    for number, raw in enumerate(source.splitlines(), start=1):
        text = raw.split(";", 1)[0].strip()
        if not text:
            continue
        label = None
        m = re.match(r"^([A-Za-z_]\w*)\s*:(.*)$", text)
        if m:
            label, text = m.group(1), m.group(2).strip()
        m = re.match(r"^([A-Za-z_]\w*)\s*=\s*(.+)$", text)
        if m:
            out.append((number, None, "=", [m.group(1), m.group(2)]))
            continue
        if not text:
            out.append((number, label, "", []))
            continue
        mnemonic, _, rest = text.partition(" ")
        ops = [o.strip() for o in rest.split(",")] if rest.strip() else []
        out.append((number, label, mnemonic.upper(), ops))
    return out


def assemble(source: str) -> Program:
    statements = _statements(source)
    symbols: dict[str, int] = {}
    address = ORIGIN
    for line, label, mn, ops in statements:  # pass 1: addresses
        if label is not None:
            if label in symbols:
                raise AsmError(f"line {line}: {label!r} defined twice")
            symbols[label] = address
        if mn == "=":
            symbols[ops[0]] = _value(ops[1], symbols, line)
        elif mn == "DB":
            address += len(ops)
        elif mn == "ORG":
            target = _value(ops[0], symbols, line) if len(ops) == 1 else -1
            if target < address:
                raise AsmError(f"line {line}: org {ops} is behind the current address")
            address = target
        elif mn:
            address += 2
    code = bytearray()
    instructions: list[int] = []
    for line, _, mn, ops in statements:  # pass 2: bytes
        if mn in ("", "="):
            continue
        if mn == "ORG":
            code += bytes(_value(ops[0], symbols, line) - ORIGIN - len(code))
            continue
        if mn == "DB":
            for o in ops:
                v = _value(o, symbols, line)
                if not 0 <= v <= 0xFF:
                    raise AsmError(f"line {line}: byte {o!r} = {v} out of range")
                code.append(v)
            continue
        instructions.append(ORIGIN + len(code))
        word = _encode(mn, ops, symbols, line)
        code += bytes((word >> 8, word & 0xFF))
    if ORIGIN + len(code) > 0x1000:
        raise AsmError(f"program of {len(code)} bytes does not fit below 0x1000")
    return Program(bytes(code), symbols, instructions)


def assemble_file(path: str | Path) -> Program:
    return assemble(Path(path).read_text(encoding="utf-8"))
