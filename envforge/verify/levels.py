"""The verifier's levels, declared once: number, name, the module that runs it, and what it
measures. The runner imports the modules from here, ``--levels`` is parsed and explained from
here, reports and prompts name levels from here, and ``tests/house/test_levels.py`` checks that the
README's and docs/DESIGN.md's level tables say the same.

A neutral module (it imports nothing of envforge but its errors), so commands, the agent loop,
batch manifests and the workspace text can read it without importing the verifier.
"""

from __future__ import annotations

from dataclasses import dataclass

from envforge.errors import BadInput


@dataclass(frozen=True)
class Level:
    number: int
    name: str
    module: str
    """The module whose ``run(ctx)`` checks this level."""
    question: str
    """What it measures, as the README's table asks it."""

    @property
    def title(self) -> str:
        """``L2 interactions``."""
        return f"L{self.number} {self.name}"


LEVELS: tuple[Level, ...] = (
    Level(0, "contract", "envforge.verify.level0_contract", "does it build and honour the API?"),
    Level(
        1,
        "properties",
        "envforge.verify.level1_properties",
        "is each transition right from any valid state?",
    ),
    Level(
        2,
        "interactions",
        "envforge.verify.level2_interactions",
        "are event orders and episode boundaries right?",
    ),
    Level(3, "rollouts", "envforge.verify.level3_rollouts", "do whole episodes match?"),
    Level(
        4,
        "transfer",
        "envforge.verify.level4_transfer",
        "does a policy trained on the port score the same on the reference?",
    ),
)
EQUIVALENCE_LEVELS: tuple[int, ...] = tuple(lv.number for lv in LEVELS if lv.name != "transfer")
"""The levels that compare the two implementations directly (L4 compares policies trained on
them): a port is done when it passes all of these."""
DEFAULT_LEVELS = f"{EQUIVALENCE_LEVELS[0]}-{EQUIVALENCE_LEVELS[-1]}"
"""``--levels``' default: ``0-3``."""
LEVEL_NAMES: dict[int, str] = {lv.number: lv.name for lv in LEVELS}
LEVELS_HELP = (
    "Verifier levels, e.g. 0-3, 1,3 or 4 ("
    + ", ".join(f"{lv.number} {lv.name}" for lv in LEVELS)
    + ")."
)
"""The ``--levels`` option's help in every command."""


def level(number: int) -> Level:
    for lv in LEVELS:
        if lv.number == number:
            return lv
    raise BadInput(f"no level {number}: levels are {LEVELS[0].number}..{LEVELS[-1].number}")


def parse_levels(text: str) -> list[int]:
    """'0-3' -> [0, 1, 2, 3]; '1,3' -> [1, 3]; '4' -> [4]."""
    levels: set[int] = set()
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                levels.update(range(lo, hi + 1))
            elif part:
                levels.add(int(part))
    except ValueError:
        raise BadInput(f"--levels: expected e.g. '0-3' or '1,3', got {text!r}") from None
    bad = sorted(lv for lv in levels if lv not in LEVEL_NAMES)
    if bad or not levels:
        raise BadInput(
            f"--levels: levels are {LEVELS[0].number}..{LEVELS[-1].number}, got {text!r}"
        )
    return sorted(levels)
