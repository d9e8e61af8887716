"""Reference coverage: gcov for C references, coverage.py for gymnasium/Python references, per
level in the verify report and its JSON; lines the verifier never reached are named."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from envforge.backends.c import CDriver
from envforge.backends.gymnasium import GymnasiumDriver
from envforge.coverage.lines import LineCoverage, excluded_lines, line_ranges, merge_all
from envforge.spec import load_spec, spec_for_name
from envforge.verify.context import VerifyOptions
from envforge.verify.runner import verify
from envforge.verify.strategies import sample_actions, sample_states
from envforge.verify.verdict import Report

ROOT = Path(__file__).resolve().parents[2]
PONG_C = ROOT / "references/pong/pong.c"
needs_gcov = pytest.mark.skipif(shutil.which("gcov") is None, reason="needs gcc's gcov")

# A branch no state in the spec's ranges reaches (tick <= 9999 there): it must be reported.
UNREACHABLE = (
    "    env->tick += 1;\n",
    "    env->tick += 1;\n    if (env->tick > 20000) {\n        env->tick = -1; /* unreachable */\n    }\n",
)


def patched_pong(tmp_path: Path) -> Path:
    """references/pong with the unreachable branch added to pong_step; returns its env.toml."""
    folder = tmp_path / "pong"
    folder.mkdir()
    source = PONG_C.read_text()
    assert source.count(UNREACHABLE[0]) == 1
    (folder / "pong.c").write_text(source.replace(*UNREACHABLE))
    shutil.copy(ROOT / "references/pong/env.toml", folder / "env.toml")
    return folder / "env.toml"


def line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


@needs_gcov
def test_gcov_counts_the_lines_a_batch_executed(tmp_path: Path) -> None:
    spec = load_spec(patched_pong(tmp_path))
    reference = spec.root / "pong.c"
    driver = CDriver(spec, reference, strict_float=True)
    state = driver.reset(np.arange(64, dtype=np.uint32))
    assert driver.coverage_read() is None  # nothing is counted before coverage_start
    assert driver.coverage_start()
    rng = np.random.default_rng(0)
    plain = CDriver(spec, reference, strict_float=True)
    for _ in range(50):
        actions = sample_actions(spec, rng, 64)
        tr = driver.step(state, actions)
        # the instrumented build computes exactly what the plain one does
        want = plain.step(state, actions)
        for name in state:
            np.testing.assert_array_equal(tr.state[name], want.state[name])
        state = tr.state
    (cov,) = driver.coverage_read() or []
    assert Path(cov.file) == reference.resolve() and cov.scope == "file"
    unreachable = line_of(reference, "/* unreachable */")
    assert unreachable in cov.never_executed()
    assert cov.lines[line_of(reference, "env->tick += 1;")] == 50 * 64
    assert cov.branches_total > 0 and cov.branches_taken < cov.branches_total
    # start forgets: a window with only resets executes no line of pong_step
    driver.coverage_start()
    driver.reset(np.arange(4, dtype=np.uint32))
    (reset_only,) = driver.coverage_read() or []
    assert reset_only.lines[line_of(reference, "env->tick += 1;")] == 0
    driver.close()
    plain.close()


BUILD_THEN_DIE = """
import os, sys
from pathlib import Path
from envforge.backends.c import CDriver
from envforge.spec import load_spec
spec = load_spec(Path(sys.argv[1]))
driver = CDriver(spec, spec.root / "pong.c", strict_float=True)
driver.coverage_start()
print(driver._gcov.dir, flush=True)
os._exit(0)  # no finalizers, no atexit: as after SIGKILL
"""


@needs_gcov
def test_a_killed_references_coverage_build_is_swept_by_the_next_run(tmp_path: Path) -> None:
    import subprocess
    import sys

    from envforge.sandbox.leftovers import sweep

    child = subprocess.run(
        [sys.executable, "-c", BUILD_THEN_DIE, str(patched_pong(tmp_path))],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == 0, child.stderr
    folder = Path(child.stdout.strip())
    assert folder.is_dir(), "the dead reference left its coverage build"
    assert str(folder) in sweep(folder.parent)
    assert not folder.exists()


@needs_gcov
def test_verify_reports_the_unreachable_branch_as_never_executed(tmp_path: Path) -> None:
    """L1's strategies draw states in the spec's ranges (and along the reference's own
    trajectories, and on its branch thresholds); none has tick > 20000, so the line under
    that branch is reported, in the level's JSON, the report's and its sentence."""
    spec = load_spec(patched_pong(tmp_path))
    settings = {"l1_examples": 10, "l1_sweep": 256, "reset_samples": 200}
    spec = spec.model_copy(update={"verify": spec.verify.model_copy(update=settings)})
    options = VerifyOptions(scale=0.05, seed_sweep=1 << 12)
    report = verify(spec, ROOT / "generated/pong/rust", [1], options)
    assert report.passed, report.to_dict()
    data = json.loads(json.dumps(report.to_dict()))
    unreachable = line_of(spec.root / "pong.c", "/* unreachable */")
    (cov,) = data["levels"][0]["reference_coverage"]
    assert cov["never_executed"] == [unreachable]  # every other line ran
    search = data["levels"][0]["stats"]["coverage_search"]
    assert search["lines_missing_before"] >= 1 and search["batches"] >= 5  # it tried
    assert data["reference_coverage"]["levels"] == "L1"
    (line,) = report.coverage_lines()
    assert (
        line.startswith("L1 executed 99% of pong.c")
        and f"never executed: line {unreachable}" in line
    )
    again = Report.from_dict(data)  # reports read back from JSON keep their coverage
    assert again.coverage_lines() == report.coverage_lines()


def test_coverage_py_counts_a_gymnasium_step_function() -> None:
    spec = spec_for_name("cartpole")
    driver = GymnasiumDriver(spec, "CartPole-v1")
    try:
        assert driver.coverage_start()
        rng = np.random.default_rng(1)
        driver.step(sample_states(spec, rng, 32), sample_actions(spec, rng, 32))
        (cov,) = driver.coverage_read() or []
        source = Path(cov.file)
        assert cov.scope == "CartPoleEnv.step" and source.name == "cartpole.py"
        text = source.read_text().splitlines()
        assert not any(text[n - 1].lstrip().startswith("def ") for n in cov.lines)
        render = next(n for n in cov.lines if text[n - 1].strip() == "self.render()")
        assert render in cov.never_executed()  # no render mode: never drawn
        assert 0.6 < cov.percent / 100 < 1.0
        # the reset sweep's digests are not counted (run untraced)
        driver.coverage_start()
        driver.reset_digest(np.arange(8, dtype=np.uint32), 4)
        (swept,) = driver.coverage_read() or []
        assert swept.executed == 0
    finally:
        driver.close()


def test_line_coverage_sentences_and_merging() -> None:
    a = LineCoverage("/x/pong.c", "file", {1: 2, 2: 0, 3: 0, 5: 0}, {1: [2, 0]})
    b = LineCoverage("/x/pong.c", "file", {1: 0, 2: 1, 3: 0, 5: 0}, {1: [0, 0]})
    (merged,) = merge_all([[a], [b]])
    assert merged.never_executed() == [3, 5] and merged.branches_taken == 1
    assert merged.sentence("L1\u2013L3") == (
        "L1\u2013L3 executed 50% of pong.c (2 of 4 lines; branch outcomes 1 of 2); never "
        "executed: lines 3, 5; a branch outcome never taken on line 1"
    )
    assert line_ranges([3, 4, 5, 9, 11, 12]) == "3-5, 9, 11-12"
    assert LineCoverage.from_dict(merged.to_dict()) == merged


def test_spec_exclusions_pick_a_line_and_its_block(tmp_path: Path) -> None:
    source = (
        "def step(self):\n"  # 1
        "    if self.mode == 'a':\n"  # 2
        "        x = 1\n"  # 3
        "    else:  # mode b\n"  # 4
        "        x = 2\n"  # 5
        "\n"  # 6
        "        y = 3\n"  # 7
        "    if self.render_mode == 'human':\n"  # 8
        "        self.render()\n"  # 9
        "    return x\n"  # 10
    )
    assert excluded_lines(source, r"else:  # mode b") == {4, 5, 6, 7}
    assert excluded_lines(source, r"^\s*x = 1$") == {3}  # not a block: the line alone
    assert excluded_lines(source, r"if self\.mode == 'a':\n\s*x = 1") == {2, 3}
    path = tmp_path / "env.py"
    path.write_text(source)
    cov = LineCoverage(str(path), "step", {2: 1, 3: 1, 5: 0, 7: 0, 8: 1, 9: 0, 10: 1})
    rules = [("else:  # mode b", "mode b only"), ("render_mode == 'human'", "rendering")]
    out = cov.excluding(rules)
    assert out.percent == 100.0 and out.never_executed() == []
    # the render branch's `if` line ran: an exclusion never hides a line that ran
    assert out.excluded == {5: "mode b only", 7: "mode b only", 9: "rendering"}
    assert out.lines == {2: 1, 3: 1, 8: 1, 10: 1}
    assert out.sentence("L1").endswith("excused: lines 5, 7 (mode b only); line 9 (rendering)")
    assert LineCoverage.from_dict(out.to_dict()) == out
    assert cov.excluding([("no such text", "-")]) is cov


def test_the_agents_verify_text_names_reference_lines_never_run() -> None:
    from envforge.prompts.render import verify_result
    from envforge.verify.verdict import LevelResult

    cov = LineCoverage(str(ROOT / "references/pong/pong.c"), "file", {10: 3, 11: 0, 12: 0})
    report = Report("pong", "pong.c", "port", [LevelResult(1, "pass", "ok", coverage=[cov])], [1])
    text = verify_result(report, [ROOT])
    assert "never ran" in text and "never executed: lines 11-12" in text
    assert str(ROOT) not in text  # paths relative, as everywhere in prompts
    full = LineCoverage(cov.file, "file", {10: 3})
    report.levels[0].coverage = [full]
    assert "never ran" not in verify_result(report, [ROOT])


@needs_gcov
def test_steered_search_reaches_unexecuted_lines_and_compares_there(tmp_path: Path) -> None:
    """With nothing executed yet, the search's batches run pong_step's lines (and compare both
    sides there); the unreachable line stays unexecuted. Against a reference that differs in
    one of those lines, the search returns the mismatching batch."""
    from envforge.verify.context import VerifyContext
    from envforge.verify.unexecuted import search_unexecuted

    spec = load_spec(patched_pong(tmp_path))
    reference = spec.root / "pong.c"
    ref = CDriver(spec, reference, strict_float=True)
    same = CDriver(spec, reference, strict_float=True)
    ref.coverage_start()

    def compare(port: CDriver):  # type: ignore[no-untyped-def]
        def step(state, actions):  # type: ignore[no-untyped-def]
            a, b = ref.step(state, actions), port.step(state, actions)
            return None if np.array_equal(a.obs, b.obs) else (state, actions)

        return step

    ctx = VerifyContext(spec, ref, same, VerifyOptions(scale=0.25))
    result = search_unexecuted(ctx, compare(same))
    unreachable = line_of(reference, "/* unreachable */")
    reached = {line for _, line in result.reached}
    assert line_of(reference, "env->tick += 1;") in reached and unreachable not in reached
    assert result.failure is None and result.batches == 10  # the budget: it never got there
    wrong = tmp_path / "wrong"
    wrong.mkdir()
    (wrong / "pong.c").write_text(
        reference.read_text().replace("#define PADDLE_SPEED 8.0f", "#define PADDLE_SPEED 9.0f")
    )
    ref.coverage_start()
    result = search_unexecuted(ctx, compare(CDriver(spec, wrong / "pong.c", strict_float=True)))
    assert result.failure is not None  # the search stopped at the first batch that differed
    ref.close()
