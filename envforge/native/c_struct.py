"""The C reference's state struct, read from its source: member names, numpy type codes, shapes.

A small declaration parser (``typedef struct {...} name;`` or ``struct name {...};``, scalar
and fixed-size array members of the types below); the C driver checks what it reads against
the compiler's own ``sizeof``/``offsetof`` before trusting it.
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


def parse_struct(source: str, name: str) -> list[StructMember]:
    """Members ``(name, numpy type code, shape)`` of ``typedef struct {...} name;`` or ``struct name {...}``."""
    text = strip_comments(source)
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
            d = re.match(r"\s*(\w+)\s*((?:\[\s*\d+\s*\])*)\s*$", declarator)
            if d is None:
                raise BadInput(f"struct {name}: unsupported declarator {declarator!r}")
            dims = tuple(int(x) for x in re.findall(r"\d+", d.group(2)))
            members.append((d.group(1), C_TYPES[ctype], dims))
    return members
