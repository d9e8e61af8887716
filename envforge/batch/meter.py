"""A job's meter inside a batch: replays logged calls, reserves before live ones, logs after.

Call ``k`` of a job is looked up in the call log first. A logged call is answered from the log
(its request must hash to the logged digest, or the job stops loudly: a resumed job that asks
something else would be a different run); it costs nothing again and writes no ledger row.
Otherwise the gate must grant a reservation of the call's worst case, the call is made, and its
ledger row and log entry are written together before the next call.
"""

from __future__ import annotations

import hashlib
import json

from envforge.agents.messages import (
    Model,
    ModelRequest,
    ModelResponse,
    request_to_dict,
    response_from_dict,
    response_to_dict,
)
from envforge.agents.select import skip_calls
from envforge.batch.gate import CallRecord, Channel, ProgressUpdate, Refusal, budget_error
from envforge.cost.meter import BaseMeter
from envforge.cost.prices import Price
from envforge.errors import EnvforgeError


class ResumeDiverged(EnvforgeError):
    """A resumed job asked the model something other than what its first run asked."""


def request_digest(request: ModelRequest) -> str:
    text = json.dumps(request_to_dict(request), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


class BatchMeter(BaseMeter):
    """Satisfies ``envforge.cost.meter.Meter``; totals include replayed calls (the job's total)."""

    def __init__(self, model: Model, price: Price, channel: Channel, job: str, run: str) -> None:
        super().__init__(model, price, job, run, "translate")
        self.channel = channel
        self.replayed = 0
        self._skipped = False
        self.iteration = 0
        """The episode the last call belonged to (0 before the first call)."""

    def complete(self, request: ModelRequest) -> ModelResponse:
        seq = self.calls + 1
        digest = request_digest(request)
        self._report_iteration()
        logged = self.channel.logged_call(self.job, seq)
        if logged is not None:
            if logged.digest != digest:
                raise ResumeDiverged(
                    f"job {self.job}: call {seq} differs from the one logged before the restart "
                    "(the manifest, the reference or envforge changed?); give the job a new name "
                    "to start it afresh"
                )
            self.replayed += 1
            response = response_from_dict(json.loads(logged.response))
            self.estimate.observe(request, response.usage)
            return self.count(response, logged.cost_usd)
        if not self._skipped:
            skip_calls(self.inner, self.replayed)
            self._skipped = True
        grant = self.channel.reserve(self.job, self.worst_case(request))
        if isinstance(grant, Refusal):
            raise budget_error(grant)
        try:
            response = self.inner.complete(request)
        except BaseException:
            self.channel.release(grant.reservation)
            raise
        cost = self.price.cost(response.usage)
        self.estimate.observe(request, response.usage)
        entry = self.ledger_entry(response.usage, cost)
        record = CallRecord(seq, digest, json.dumps(response_to_dict(response)), entry)
        self.channel.settle(grant.reservation, record)
        return self.count(response, cost)

    def _report_iteration(self) -> None:
        """The loop names each episode ``translate 1``, ``repair 2``, ``optimize 3``."""
        number = self.purpose.rsplit(" ", 1)[-1]
        if number.isdigit() and int(number) != self.iteration:
            self.iteration = int(number)
            self.channel.progress(self.job, ProgressUpdate(iteration=self.iteration))
