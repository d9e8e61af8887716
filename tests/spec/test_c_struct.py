"""The C struct parser: array sizes written as the file's integer constants."""

from __future__ import annotations

import pytest

from envforge.errors import BadInput
from envforge.native.c_struct import parse_struct

HEADER = """
#define HAND 12
#define DECK (4 * 13)   /* a parenthesised product */
#define SEED_MASK 0xffu /* not a size: skipped, not an error */
enum { SLOTS = 2 * HAND, LAST };
typedef struct {
    int32_t cards[DECK];
    uint8_t hands[2][HAND];
    float slots[SLOTS];
    double g[3u], h;
} Game;
"""


def test_array_sizes_from_defines_and_enums() -> None:
    assert parse_struct(HEADER, "Game") == [
        ("cards", "i4", (52,)),
        ("hands", "u1", (2, 12)),
        ("slots", "f4", (24,)),
        ("g", "f8", (3,)),
        ("h", "f8", ()),
    ]


@pytest.mark.parametrize("size", ["N", "LAST", "HAND - 12", "2 ** 64", "sizeof(int)"])
def test_a_size_that_is_no_known_positive_constant_is_one_clear_error(size: str) -> None:
    source = HEADER + f"typedef struct {{ int32_t a[{size}]; }} Bad;"
    with pytest.raises(BadInput, match=r"struct Bad: array size \[.*\] is not a positive integer"):
        parse_struct(source, "Bad")
