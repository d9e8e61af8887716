"""A rules text: numbered lines that cases, code comments and rule questions cite.

Lines are numbered from 1 as an editor shows them. A citation is ``L12`` or ``L12-14``; the
clarifications a person writes in answer to rule questions live under a ``## Clarifications``
heading at the end of the same file, so they are lines of the rules like any other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from envforge.errors import BadInput

CLARIFICATIONS = "## Clarifications"
CITATION = re.compile(r"\bL(\d+)(?:\s*-\s*L?(\d+))?\b")
MAX_RULES_BYTES = 1 << 20


def parse_citations(text: str) -> list[int]:
    """Line numbers cited in ``text`` (``L3``, ``L4-6``, ``L4-L6``), in order, without repeats."""
    lines: list[int] = []
    for match in CITATION.finditer(text):
        first = int(match.group(1))
        last = int(match.group(2) or first)
        for n in range(first, min(last, first + 200) + 1):
            if n not in lines:
                lines.append(n)
    return lines


@dataclass(frozen=True)
class RulesText:
    path: Path
    lines: tuple[str, ...]

    @classmethod
    def load(cls, path: str | Path) -> RulesText:
        path = Path(path)
        if not path.is_file():
            raise BadInput(f"rules text not found: {path}")
        data = path.read_bytes()
        if len(data) > MAX_RULES_BYTES:
            raise BadInput(f"rules text {path} is over {MAX_RULES_BYTES >> 10} KiB")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise BadInput(f"rules text {path} is not UTF-8") from None
        return cls(path, tuple(text.splitlines()))

    def line(self, n: int) -> str:
        if not 1 <= n <= len(self.lines):
            raise BadInput(f"{self.path.name} has no line {n} (it has {len(self.lines)})")
        return self.lines[n - 1]

    def quote(self, numbers: list[int]) -> list[str]:
        """``L12: <text of line 12>`` for each cited line that exists."""
        return [f"L{n}: {self.lines[n - 1].strip()}" for n in numbers if 1 <= n <= len(self.lines)]

    def check_citations(self, numbers: list[int], where: str) -> None:
        bad = [n for n in numbers if not 1 <= n <= len(self.lines) or not self.lines[n - 1].strip()]
        if bad:
            raise BadInput(f"{where} cites L{bad[0]}, not a line of {self.path.name} with text")

    def numbered(self) -> str:
        """The text with its line numbers, as an agent is shown it."""
        width = len(str(len(self.lines)))
        return "\n".join(f"L{i:<{width}} {line}" for i, line in enumerate(self.lines, 1))

    def add_clarification(self, question: str, answer: str) -> int:
        """Append a person's answer under ``## Clarifications`` (made if missing); the number of
        the line the answer is on, so versions and cases can cite it."""
        text = "\n".join(self.lines).rstrip("\n")
        if CLARIFICATIONS not in self.lines:
            text += f"\n\n{CLARIFICATIONS}\n"
        answer_line = " ".join(answer.split())
        text += f"\n- {question}: {answer_line}\n"
        self.path.write_text(text)
        return len(text.rstrip("\n").splitlines())
