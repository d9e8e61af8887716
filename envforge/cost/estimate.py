"""The input tokens of the next call, from what the provider billed for the previous one.

A fixed characters-per-token rate is wrong both ways: code and JSON tokenize denser than prose
(a run priced at 3 characters per token overspent its budget), and a rate low enough to be safe
refuses affordable calls. Within a run each request mostly repeats the previous one, whose
input tokens the provider has just counted. So the estimate is the previous call's billed input
plus the characters added since at the rate that call showed (with a margin); a request that
shrank (old output elided) is scaled by that rate. Before the first priced call, 3 characters
per token (``budget.estimate_input_tokens``) is all there is.
"""

from __future__ import annotations

import math

from envforge.agents.messages import ModelRequest, Usage
from envforge.cost.budget import CHARS_PER_TOKEN_LOW, estimate_input_tokens

MARGIN = 1.1
"""Characters not yet billed are counted at the observed rate plus 10%."""


class InputTokenEstimate:
    def __init__(self) -> None:
        self.chars = 0
        """Characters of the last request the provider billed (0: none yet)."""
        self.tokens = 0
        """Input tokens billed for it, cache reads and writes included."""

    def __call__(self, request: ModelRequest) -> int:
        chars = request.char_count()
        floor = estimate_input_tokens(request) if not self.chars else 0
        if not self.chars:
            return floor
        rate = max(self.tokens / self.chars, 1 / CHARS_PER_TOKEN_LOW) * MARGIN
        if chars >= self.chars:
            return self.tokens + math.ceil((chars - self.chars) * rate)
        return math.ceil(chars * rate)

    def observe(self, request: ModelRequest, usage: Usage) -> None:
        """Learn from a billed call (calls billed no input, e.g. scripted ones, teach nothing)."""
        if usage.total_input > 0:
            self.chars, self.tokens = request.char_count(), usage.total_input
