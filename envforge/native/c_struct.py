"""The C reference's state struct, read from its source: member names, numpy type codes, shapes.

A small declaration parser (``typedef struct {...} name;`` or ``struct name {...};``, scalar
and fixed-size array members of the types below); an array size is a number or an integer
constant the file defines (``#define DECK 52``, ``enum { DECK = 52 };``, and arithmetic of
those: ``[2 * HAND]``). The C driver checks what it reads against the compiler's own
``sizeof``/``offsetof`` before trusting it.
"""

from __future__ import annotations

import re

from envforge.errors import BadInput

StructMember = tuple[str, str, tuple[int, ...]]
"""``(name, numpy type code, shape)`` of one struct member."""

C_TYPES = {
    "float": "f4",
    "double": "f8",
    "int": "i4",
    "int32_t": "i4",
    "unsigned": "u4",
    "unsigned int": "u4",
    "uint32_t": "u4",
    "int64_t": "i8",
    "long long": "i8",
    "uint64_t": "u8",
    "unsigned long long": "u8",
    "int16_t": "i2",
    "short": "i2",
    "uint16_t": "u2",
    "unsigned short": "u2",
    "int8_t": "i1",
    "char": "i1",
    "signed char": "i1",
    "uint8_t": "u1",
    "unsigned char": "u1",
    "bool": "u1",
    "_Bool": "u1",
}


def strip_comments(source: str) -> str:
    source = re.sub(r"/\*.*?\*/", " ", source, flags=re.S)
    return re.sub(r"//[^\n]*", " ", source)


SIZE_EXPRESSION = re.compile(r"[\d\s()+\-*/%]+")
"""What an array size may be once its constants are replaced: integer arithmetic."""


def integer_constants(text: str) -> dict[str, int]:
    """Integer constants a C file defines, in file order: ``#define NAME expr`` and ``enum``
    members with an explicit ``= expr`` (each may use those before it); others are skipped."""
    found: dict[str, int] = {}
    definitions = re.findall(r"^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+([^\n]+)$", text, flags=re.M)
    for body in re.findall(r"\benum\s*\w*\s*\{([^{}]*)\}", text):
        definitions += re.findall(r"(\w+)\s*=\s*([^,]+)", body)
    for macro, expression in definitions:
        value = constant_value(expression, found)
        if value is not None:
            found[macro] = value
    return found


def constant_value(expression: str, constants: dict[str, int]) -> int | None:
    """The value of integer arithmetic over numbers and known constants, or None."""
    expression = re.sub(r"(?<=\d)[uUlL]+\b", "", expression.strip())
    replaced = re.sub(
        r"[A-Za-z_]\w*", lambda m: str(constants.get(m.group(0), "?")), expression
    ).replace("/", "//")
    if not replaced or "**" in replaced or SIZE_EXPRESSION.fullmatch(replaced) is None:
        return None
    try:
        value = eval(replaced, {"__builtins__": {}}, {})  # digits, spaces, ()+-*/% only
    except (SyntaxError, ZeroDivisionError, ValueError):
        return None
    return value if isinstance(value, int) else None


def parse_struct(source: str, name: str) -> list[StructMember]:
    """Members ``(name, numpy type code, shape)`` of ``typedef struct {...} name;`` or ``struct name {...}``."""
    text = strip_comments(source)
    constants = integer_constants(text)
    match = re.search(
        r"typedef\s+struct\s*\w*\s*\{(?P<body>[^{}]*)\}\s*" + re.escape(name) + r"\s*;", text
    )
    if match is None:
        match = re.search(r"struct\s+" + re.escape(name) + r"\s*\{(?P<body>[^{}]*)\}\s*;", text)
    if match is None:
        raise BadInput(f"struct {name} not found in the C reference")
    members = []
    for decl in match.group("body").split(";"):
        decl = " ".join(decl.split())
        if not decl:
            continue
        m = re.match(
            r"(?P<type>(?:const\s+)?(?:unsigned\s+|signed\s+)?(?:long\s+long|\w+))\s+(?P<rest>.+)",
            decl,
        )
        if m is None:
            raise BadInput(f"cannot parse struct {name} member: {decl!r}")
        ctype = m.group("type").replace("const ", "").strip()
        if ctype not in C_TYPES:
            raise BadInput(f"struct {name}: unsupported member type {ctype!r} in {decl!r}")
        for declarator in m.group("rest").split(","):
            d = re.match(r"\s*(\w+)\s*((?:\[[^\[\]]+\])*)\s*$", declarator)
            if d is None:
                raise BadInput(f"struct {name}: unsupported declarator {declarator!r}")
            dims = tuple(
                array_size(size, constants, name)
                for size in re.findall(r"\[([^\]]+)\]", d.group(2))
            )
            members.append((d.group(1), C_TYPES[ctype], dims))
    return members


def array_size(size: str, constants: dict[str, int], struct: str) -> int:
    """One array dimension: a number or integer constant arithmetic the file defines."""
    value = constant_value(size, constants)
    if value is None or value <= 0:
        raise BadInput(
            f"struct {struct}: array size [{size.strip()}] is not a positive integer constant "
            "(a number, or a #define / enum value of this file)"
        )
    return value
