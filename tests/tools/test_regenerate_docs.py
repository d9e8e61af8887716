"""benchmarks/regenerate_docs.py --targets/--port: only the rows asked for are re-measured and
merged into docs/bench/<env>.json; every other row stays as recorded, and each merged row says
when, where and by what command it was measured."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from envforge.bench.bench_report import BenchReport
from envforge.bench.markdown import section
from envforge.bench.measure import Measurement

ROOT = Path(__file__).resolve().parents[2]


def _report(date: str, cpu: str, rows: list[Measurement]) -> BenchReport:
    machine = {"cpu": cpu, "cores": 2, "memory_gib": 8, "load_before": [3.0, 2.0, 1.0]}
    machine |= {"bandwidth_gbs": 10.0, "peak_gflops": 100.0}
    return BenchReport("pong", "pong.c", {"repeats": 3}, machine, date, f"cmd {date}", rows)


def test_merged_rows_replace_only_their_series_and_keep_their_own_run() -> None:
    old = _report(
        "day 1",
        "Xeon",
        [
            Measurement("C loop (reference)", "reference", "random", 1, [1e6]),
            Measurement("jax port", "port", "random", 1, [1e5]),
            Measurement("jax port", "port", "random", 64, [1e6]),
            Measurement("jax port", "port", "mlp", 64, [5e5]),
            Measurement("rust port", "port", "random", 64, [2e7]),
        ],
    )
    new = _report("day 2", "EPYC", [Measurement("jax port", "port", "random", 16, [3e6])])
    merged = BenchReport.from_dict(json.loads(json.dumps(old.merged(new).to_dict())))
    jax = merged.series("jax port", "random")
    # the whole series is the new run's (no batch 1 or 64 left from day 1)
    assert [(m.batch, m.sps) for m in jax] == [(16, 3e6)]
    assert jax[0].measured is not None
    assert jax[0].measured["date"] == "day 2" and jax[0].measured["cpu"] == "EPYC"
    assert jax[0].measured["load_before"] == [3.0, 2.0, 1.0]
    # every other row, the MLP series of the same port included, as recorded on day 1
    for impl, policy, sps in [
        ("C loop (reference)", "random", 1e6),
        ("jax port", "mlp", 5e5),
        ("rust port", "random", 2e7),
    ]:
        (row,) = merged.series(impl, policy)
        assert row.sps == sps and row.measured is None
    assert merged.date == "day 1" and merged.machine["cpu"] == "Xeon"
    text = section(merged)
    assert "The `jax port` rows were measured separately, day 2 on EPYC" in text
    assert "`cmd day 2`" in text and "`rust port` rows" not in text


def test_a_run_that_measured_every_row_again_is_the_whole_record() -> None:
    old = _report("day 1", "EPYC", [Measurement("jax port", "port", "random", 1, [1e5])])
    new = _report("day 2", "Xeon", [Measurement("jax port", "port", "random", 1, [2e5])])
    merged = old.merged(new)
    assert merged.date == "day 2" and merged.machine["cpu"] == "Xeon"
    assert merged.separately_measured() == []
    assert "measured separately" not in section(merged)


@pytest.mark.slow  # about 80 s at load 15 on 2 cores: the machine's limits are measured twice
def test_targets_re_measures_one_port_and_merges_it(tmp_path: Path) -> None:
    """The script end to end on a copy of docs/bench/cartpole.json: only the JAX port's
    random-action rows are measured again."""
    recorded = json.loads((ROOT / "docs/bench/cartpole.json").read_text())
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench/cartpole.json").write_text(json.dumps(recorded))
    proc = subprocess.run(
        [sys.executable, "benchmarks/regenerate_docs.py", "--envs", "cartpole"]
        + ["--targets", "jax", "--quick", "--quick-batch", "2", "--policy", "random"]
        + ["--resets", "fresh", "--steps-per-call", "64", "--docs", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    after = json.loads((tmp_path / "bench/cartpole.json").read_text())
    key = ("implementation", "policy", "batch", "runs_sps")
    fresh = [m for m in after["measurements"] if "measured" in m]
    assert {(m["implementation"], m["policy"], m["batch"]) for m in fresh} == {
        ("jax port", "random", 2)
    }
    assert "--targets jax" in fresh[0]["measured"]["command"]
    untouched = [
        m
        for m in recorded["measurements"]
        if (m["implementation"], m["policy"]) != ("jax port", "random")
    ]
    assert [tuple(m[k] for k in key) for m in after["measurements"] if "measured" not in m] == [
        tuple(m[k] for k in key) for m in untouched
    ]
    assert after["date"] == recorded["date"] and after["command"] == recorded["command"]
    assert (tmp_path / "img/bench-cartpole.png").exists()
    assert not (tmp_path / "BENCHMARKS.md").exists()


def test_the_page_is_what_its_json_renders(tmp_path: Path) -> None:
    """docs/BENCHMARKS.md is never edited by hand: re-rendered from docs/bench/*.json it comes
    out the same, its header pointing to docs/BENCH.md for the method."""
    page = (ROOT / "docs/BENCHMARKS.md").read_text()
    envs = re.findall(r"^## (\S+)$", page, re.M)
    proc = subprocess.run(
        [sys.executable, "benchmarks/regenerate_docs.py", "--from-json", "--envs", ",".join(envs)]
        + ["--out", str(tmp_path / "BENCHMARKS.md")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "BENCHMARKS.md").read_text() == page
    assert "docs/BENCH.md" in page.split("\n## ")[0]
