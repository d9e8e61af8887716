"""A benchmark job ends with the bench that started it (``envforge/untrusted/orphans.py``): killing a
bench from outside left its measuring job running for minutes, holding a core and 4 GiB."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

STARTS_A_JOB = """
import time
from envforge.bench.suite import run_job
run_job(time.sleep, (300,))
"""


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_bench_job_exits_when_the_bench_is_killed() -> None:
    bench = subprocess.Popen([sys.executable, "-c", STARTS_A_JOB])
    try:
        deadline = time.monotonic() + 60
        jobs: list[int] = []
        while not jobs and time.monotonic() < deadline:  # the spawned job (not the tracker)
            jobs = [
                c
                for c in _children(bench.pid)
                if "resource_tracker" not in Path(f"/proc/{c}/cmdline").read_text()
            ]
            time.sleep(0.2)
        assert jobs, "the bench started no job"
        # killed at once: the job may still be importing, and must still see its bench gone
        os.kill(bench.pid, signal.SIGKILL)
        bench.wait()
        deadline = time.monotonic() + 15
        while any(_alive(j) for j in jobs) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(_alive(j) for j in jobs), "the job outlived its bench"
    finally:
        bench.kill()
