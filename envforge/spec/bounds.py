"""The rules every numeric option obeys, wherever it comes from: the command line (a typer
callback), a batch manifest (a pydantic validator) or the Python API (``VerifyOptions``); and
the rules for names and paths a user passes (job, batch, env, workspace), which become folder
names, ledger keys and lines of reports: no control characters (a newline included) in any.

One rule, one check, one message: ``--scale nan``, ``scale = inf`` in a manifest and
``VerifyOptions(scale=-1)`` are refused the same way, as :class:`BadInput` (exit code 2) naming
the option and what it expects, before anything is built or spent.
"""

from __future__ import annotations

import math
import numbers
import re
import unicodedata
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, TypeVar

import typer
from pydantic import AfterValidator

from envforge.errors import BadInput

N = TypeVar("N", int, float, Decimal)


@dataclass(frozen=True)
class Rule:
    expected: str
    """What a valid value is, in words (the error message says ``expected <this>``)."""
    above: float | None = None
    """Values must be greater than this."""
    at_least: float | None = None
    below: float | None = None
    """Values must be less than this."""
    integer: bool = False

    def allows(self, value: object) -> bool:
        if isinstance(value, bool) or not isinstance(value, numbers.Real | Decimal):
            return False
        if self.integer and not isinstance(value, numbers.Integral):
            return False
        x: Decimal | int | float
        if isinstance(value, Decimal):
            x = value
        elif isinstance(value, numbers.Integral):
            x = int(value)
        else:
            x = float(value)
        # no bound is infinite, and nan compares false with everything
        if not (x.is_finite() if isinstance(x, Decimal) else math.isfinite(x)):
            return False
        if self.above is not None and not x > self.above:
            return False
        if self.at_least is not None and not x >= self.at_least:
            return False
        return self.below is None or x < self.below


SEED_SWEEP = Rule("a count of seeds in [0, 2^32]", at_least=0, below=2**32 + 1, integer=True)
SCALE = Rule("a finite number > 0", above=0)
SEED = Rule("an integer in [0, 2^32)", at_least=0, below=2**32, integer=True)
SECONDS = Rule("a finite number of seconds > 0", above=0)
MINUTES = Rule("a finite number of minutes > 0", above=0)
WORKERS = Rule("an integer in [1, 256]", at_least=1, below=257, integer=True)
AT_LEAST_ONE = Rule("an integer >= 1", at_least=1, integer=True)
NON_NEGATIVE = Rule("an integer >= 0", at_least=0, integer=True)
USD = Rule("a finite number of USD > 0", above=0)
USD_PER_MTOK = Rule("a finite number of USD per million tokens >= 0", at_least=0)
RESOURCES = Rule("a finite number >= 0", at_least=0)
PROBABILITY = Rule("a probability in (0, 1)", above=0, below=1)
POSITIVE = Rule("a finite number > 0", above=0)


NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
NAME_RULE = "a name of letters, digits, '.', '_' or '-' (at most 64)"
CONTROL_CATEGORIES = ("Cc", "Zl", "Zp")
"""C0 and C1 controls (newline, tab, escape, NUL ...) and the Unicode line and paragraph
separators: each would split or hide a line where the name is printed."""


def is_name(value: str) -> bool:
    """A short name fit for a folder (the whole string: a trailing newline is not one)."""
    return NAME.fullmatch(value) is not None


def control_character(text: str) -> str | None:
    """The first control character in ``text`` (as ``\\n``, ``\\x1b``), or None."""
    for char in text:
        if unicodedata.category(char) in CONTROL_CATEGORIES:
            return repr(char)[1:-1]
    return None


def check_text(name: str, value: str) -> str:
    """``value`` if it has no control character; else BadInput naming the option."""
    found = control_character(value)
    if found is not None:
        raise BadInput(f"{name}: expected text without control characters, got {value!r}")
    return value


def text_option() -> Any:
    """A typer callback: a name or path option refused when it holds a control character."""

    def callback(param: typer.CallbackParam, value: Any) -> Any:
        if value is None:
            return value
        name = max(param.opts, key=len) if param.opts else str(param.name)
        check_text(name, str(value))
        return value

    return callback


def check(name: str, value: N, rule: Rule) -> N:
    """``value`` if the rule allows it; else BadInput ``<name>: expected ..., got ...``."""
    if not rule.allows(value):
        raise BadInput(f"{name}: expected {rule.expected}, got {value}")
    return value


def check_optional(name: str, value: N | None, rule: Rule) -> N | None:
    return None if value is None else check(name, value, rule)


def option(rule: Rule) -> Any:
    """A typer callback: the option's value checked as it is parsed (None: not given)."""

    def callback(param: typer.CallbackParam, value: Any) -> Any:
        if value is None:
            return value
        name = max(param.opts, key=len) if param.opts else str(param.name)
        return check(name, value, rule)

    return callback


def field(rule: Rule) -> AfterValidator:
    """A pydantic validator (manifests): the rule's words become the error's 'expected'."""

    def validate(value: Any) -> Any:
        if value is not None and not rule.allows(value):
            raise ValueError(rule.expected)
        return value

    return AfterValidator(validate)
