"""The hypothesis search every level runs over both drivers, in one place: its settings, and a
run that survives a driver crashing mid-search.

A level's test body steps both sides; a difference raises the level's own exception (the
shrinker then minimises the example), and a :class:`~envforge.errors.DriverFailure` is kept by
the level (not raised through hypothesis, which would shrink against a dead driver) and raised
after the search, where the runner turns it into the level's error finding. Once a driver
died, hypothesis may still complain (``Flaky``: the replay no longer fails the same way); that
is swallowed here, because the kept failure is what the level reports.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis.reporting import with_reporter


def search_settings(max_examples: int, phases: Sequence[Phase], **extra: Any) -> settings:
    """Settings for a verifier search: no deadline (drivers compile), no example database
    (findings reproduce from the seed alone), every health check off (slow drivers, big
    batches), quiet (findings carry the example; stdout may be ``--json``), one bug."""
    return settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=list(phases),
        print_blob=False,
        verbosity=Verbosity.quiet,
        report_multiple_bugs=False,
        **extra,
    )


def run_search(
    test: Callable[[], None],
    found: type[BaseException] | tuple[type[BaseException], ...],
    stopped: Callable[[], bool],
) -> None:
    """Run the hypothesis ``test``: ``found`` (the level's "the sides differ") ends it quietly;
    any other error is raised unless ``stopped()`` says the search had already stopped on
    purpose (a driver failure kept by the level, a spent shrink budget)."""
    try:
        # hypothesis reports some replays by printing, whatever the verbosity
        with with_reporter(lambda text: None):
            test()
    except found:
        pass
    except Exception:
        if not stopped():
            raise
