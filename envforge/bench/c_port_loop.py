"""The C target's bench job: a C port timed in the same generated C loop as a C reference.

``bench/c_loop.py`` builds a harness around a header with an env struct and its
``<prefix>_reset``/``_step``/``_observe``; a C port is such a header, so its rows are that
loop's, labelled as the port's. Run as a sandboxed job by ``bench/suite.run_bench`` (the
C target's ``bench_job``, ``envforge/targets/c.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from envforge.backends.c_port import port_source, port_spec
from envforge.bench.c_loop import measure_c_loop
from envforge.bench.measure import BenchSettings
from envforge.spec import EnvSpec


def job_c_port(spec: EnvSpec, port: str, settings: BenchSettings, label: str) -> dict[str, Any]:
    source = port_source(Path(port), spec.name)
    rows = measure_c_loop(port_spec(spec, source), source, settings)
    for row in rows:
        row.implementation, row.role = label, "port"
    return {"measurements": [m.to_dict() for m in rows]}
