"""The shipped pong port passes L0–L3, and each level catches the broken ports it should.

Every broken port is a small exact patch of ``generated/pong/jax/pong.py`` (see conftest). Each
bug lists the levels that, each at a fifth of the default scale (and L1's reset sweep cut to
``QUICK_SWEEP`` seeds), must catch it; the test asserts the check, the diverging field, and
that the finding's port lines name the patched line. The lists were measured, not assumed, and
leave a level out where it cannot see the bug at that scale (no episode lasts the 10000 ticks
that truncate; L1 then never resets with a seed of 2**24 or more; L2's few short programs
rarely meet a moving paddle) or only slowly.

A bug's levels run in one verification with ``all_levels`` (one pair of drivers, one compile of
the patched port): each level runs whatever the one before it found, and levels share no
findings, so each level's result is its own (a level listed that cannot see the bug fails its
test even when another level of the same run caught it).
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import PONG_PORT, PONG_SPEC, QUICK_SWEEP, ROOT, PatchedPort, apply_patch

from envforge.spec import load_spec
from envforge.verify.context import VerifyOptions
from envforge.verify.findings import Finding
from envforge.verify.runner import verify
from envforge.verify.verdict import Report

CARTPOLE_SPEC = ROOT / "references" / "cartpole" / "env.toml"
CARTPOLE_PORT = ROOT / "generated" / "cartpole" / "jax" / "cartpole.py"


@dataclass(frozen=True)
class Broken:
    """A bug as an exact patch of the port, and what the verifier must say about it."""

    name: str
    edits: tuple[tuple[str, str], ...]
    field: str
    """A field the finding must name; its assigning lines must lead to the patched line."""
    levels: tuple[int, ...]
    """The levels that, each run alone, must catch it (measured, see the module docstring)."""
    at_reset: bool = False
    """The bug shows in reset states, so every level reports ``reset.mismatch``."""
    policy: str = "uniform"
    """L3: the rollout policy whose episode reaches the bug at the earliest step (L3 steps all
    policies' episodes in one batch)."""
    l0_check: str | None = None

    def check(self, level: int) -> str:
        if level == 0:
            assert self.l0_check is not None
            return self.l0_check
        if self.at_reset:
            return "reset.mismatch"
        return {1: "step.mismatch", 2: "sequence.mismatch", 3: "rollout.mismatch"}[level]


BROKEN = [
    Broken(
        "wrong_constant",
        (("OPPONENT_SPEED = f32(5.0)", "OPPONENT_SPEED = f32(6.0)"),),
        "paddle_yl",
        (1, 2, 3),
    ),
    Broken(
        "flipped_sign",
        (("jnp.where(action == 1, -PADDLE_SPEED,", "jnp.where(action == 1, PADDLE_SPEED,"),),
        "paddle_yr",
        (1, 2, 3),
    ),
    Broken(
        "missing_clip",
        (
            (
                "paddle_yr = jnp.clip(state.paddle_yr + move, f32(0.0), HEIGHT - PADDLE_H)",
                "paddle_yr = state.paddle_yr + move",
            ),
        ),
        "paddle_yr",
        (0, 1, 2, 3),
        l0_check="contract.obs_bounds",  # the paddle leaves the field, and so does its obs
        policy="sticky",  # L3 steps every policy's episodes together: long runs hit a wall first
    ),
    Broken(
        "missing_speed_cap",
        (
            (
                "return jnp.clip((vy + offset * DEFLECT) * SPEEDUP, -MAX_VY, MAX_VY)",
                "return (vy + offset * DEFLECT) * SPEEDUP",
            ),
        ),
        "ball_vy",
        (3,),  # L1 and L2 catch it too, L2 only after a long shrink
        policy="tracker",  # long rallies speed the ball up to the cap
    ),
    Broken(
        "terminal_off_by_one",
        (("(state.score_l >= WIN_SCORE)", "(state.score_l > WIN_SCORE)"),),
        "terminated",
        (1, 3),  # L2 too, but only after a long program: shrinking it is slow
    ),
    Broken(
        "truncation_off_by_one",
        (("~terminated & (state.tick >= MAX_TICKS)", "~terminated & (state.tick > MAX_TICKS)"),),
        "truncated",
        (1,),  # episodes end long before 10000 ticks: only a drawn tick of 9999 shows it
    ),
    Broken(
        "tick_starts_at_one",
        (("        tick=zero,", "        tick=jnp.int32(1),"),),
        "tick",
        (1, 2),
        at_reset=True,
    ),
    Broken(
        "serve_range",
        (("SERVE_MAX_VY = f32(4.0)", "SERVE_MAX_VY = f32(5.0)"),),
        "ball_vy",
        (1, 2, 3),
        at_reset=True,
    ),
    Broken(
        "serve_rng_order",
        (
            (
                "    rng, u = uniform01(state.rng)\n"
                "    direction = jnp.where(u < HALF, f32(-1.0), f32(1.0))\n"
                "    return serve(state._replace(rng=rng), direction)",
                "    served = serve(state, f32(1.0))  # draws vy before the direction\n"
                "    rng, u = uniform01(served.rng)\n"
                "    direction = jnp.where(u < HALF, f32(-1.0), f32(1.0))\n"
                "    return served._replace(ball_vx=BALL_SPEED_X * direction, rng=rng)",
            ),
        ),
        "ball_vx",
        (1, 2),
        at_reset=True,
    ),
    Broken(
        "bounce_before_paddle_moves",
        (
            (
                "        & (ball_y + BALL >= paddle_yr)\n        & (ball_y <= paddle_yr + PADDLE_H)",
                "        & (ball_y + BALL >= state.paddle_yr)\n"
                "        & (ball_y <= state.paddle_yr + PADDLE_H)",
            ),
        ),
        "ball_vx",
        (1, 3),  # L2's few short programs rarely see the ball reach a moving paddle
        policy="sticky",
    ),
    Broken(
        "serve_direction_after_point",
        (
            (
                "serve(moved, jnp.where(scored_r, f32(1.0), f32(-1.0)))",
                "serve(moved, jnp.where(scored_r, f32(-1.0), f32(1.0)))",
            ),
        ),
        "ball_vx",
        (2,),
    ),
    Broken(
        "seed_wraps_at_2_24",
        (
            (
                "x = seed.astype(jnp.uint32) * jnp.uint32(747796405)",
                "x = (seed.astype(jnp.uint32) & jnp.uint32(0xFFFFFF)) * jnp.uint32(747796405)",
            ),
        ),
        "rng",
        (),  # L2 only, see its own test
        at_reset=True,
    ),
    Broken(
        "agent_win_off_by_one",
        (("(state.score_r >= WIN_SCORE)", "(state.score_r > WIN_SCORE)"),),
        "terminated",
        (1, 3),  # L1 from a drawn score of 20; L2's short programs never reach 21 points
        policy="tracker",  # only the ball-tracking policy ever wins 21 points
    ),
]
BY_NAME = {b.name: b for b in BROKEN}


# ---- the verifications the tests need, run two at a time ----------------------------------


@dataclass(frozen=True)
class Job:
    """One verification: a port (a patched copy, or the shipped one), levels, options."""

    edits: tuple[tuple[str, str], ...] = ()
    levels: tuple[int, ...] = (0, 1, 2, 3)
    options: VerifyOptions = field(
        default_factory=lambda: VerifyOptions(scale=0.2, seed_sweep=QUICK_SWEEP)
    )
    spec: Path = PONG_SPEC
    port: Path = PONG_PORT
    settings: tuple[tuple[str, int], ...] = ()
    """Overrides of the spec's [verify] settings."""


@dataclass(frozen=True)
class Verified:
    report: Report
    port: PatchedPort | None


BUG_OPTIONS = {"scale": 0.2, "seed_sweep": QUICK_SWEEP, "all_levels": True}


def bug_job(bug: Broken) -> str:
    """The name of the one verification that runs all of ``bug.levels`` on the patched port."""
    return f"{bug.name}@" + "+".join(f"L{level}" for level in bug.levels)


JOBS: dict[str, Job] = {
    # full L3 (100 episodes per policy); L1 and L2 with fewer examples than their defaults
    "shipped": Job(
        options=VerifyOptions(scale=1.0, seed_sweep=QUICK_SWEEP),
        settings=(("l1_examples", 50), ("l1_sweep", 1024), ("l2_examples", 12)),
    ),
    # each bug's levels in one verification (see the module docstring)
    **{
        bug_job(b): Job(b.edits, b.levels, VerifyOptions(**BUG_OPTIONS)) for b in BROKEN if b.levels
    },
    "seed_wraps_at_2_24": Job(
        BY_NAME["seed_wraps_at_2_24"].edits,
        (1, 2),
        VerifyOptions(scale=0.2, all_levels=True, seed_sweep=QUICK_SWEEP),
    ),
    "serve_direction_le_half": Job(
        (("direction = jnp.where(u < HALF", "direction = jnp.where(u <= HALF"),),
        (1,),
        VerifyOptions(scale=0.2, seed_sweep=1 << 25),
    ),
    "serve_out_of_spec_range": Job(
        (("SERVE_MAX_VY = f32(4.0)", "SERVE_MAX_VY = f32(12.0)"),), (0,)
    ),
    "float_tick": Job((("tick=state.tick + 1)", "tick=state.tick + 1.0)"),), (0,)),
    "short_observation": Job(
        (("            state.score_r.astype(jnp.float32) * (f32(1.0) / f32(WIN_SCORE)),\n", ""),),
        (0,),
    ),
    "missing_function": Job((("def to_canonical(", "def to_canonical_state("),)),
    "cartpole_reset_range": Job(
        (
            (
                "uniform_from_seed(seed, lane, -0.05, 0.05)",
                "uniform_from_seed(seed, lane, -0.08, 0.08)",
            ),
        ),
        (1,),
        spec=CARTPOLE_SPEC,
        port=CARTPOLE_PORT,
    ),
}


LONGEST = ("shipped", "seed_wraps_at_2_24", "serve_direction_le_half")
"""The jobs that took longest (CPU s, measured one by one: 42, 40, 12; an L0-only verify: 5)."""


def missing_files(job: Job) -> list[Path]:
    return [p for p in (job.spec, job.port) if not p.is_file()]


def run_job(job: Job, workdir: Path) -> Verified:
    spec = load_spec(job.spec)
    if job.settings:
        spec = spec.model_copy(update={"verify": spec.verify.model_copy(update=dict(job.settings))})
    port = apply_patch(job.port, workdir, *job.edits) if job.edits else None
    report = verify(spec, port.path if port else job.port, list(job.levels), job.options)
    return Verified(report, port)


@pytest.fixture(scope="module")
def verifications(request, tmp_path_factory):
    """Every verification the selected tests of this module need, started up front two at a
    time: a verify mostly waits on its own child processes, so two share a 2-core machine."""
    names = [
        mark.args[0]
        for item in request.session.items
        if item.module is request.module
        for mark in item.iter_markers("verifies")
    ]
    pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="verify")
    futures: dict[str, Future[Verified]] = {}
    # the longest first, so that neither core idles at the end while one of them runs alone
    for name in sorted(dict.fromkeys(names), key=lambda n: n not in LONGEST):
        if not missing_files(JOBS[name]):
            futures[name] = pool.submit(run_job, JOBS[name], tmp_path_factory.mktemp(name))
    yield futures
    pool.shutdown(cancel_futures=True)


@pytest.fixture
def verified(request, verifications) -> Verified:
    """The verification named by the test's ``verifies`` mark."""
    name = request.node.get_closest_marker("verifies").args[0]
    for path in missing_files(JOBS[name]):
        pytest.skip(f"{path.relative_to(ROOT)} does not exist yet")
    return verifications[name].result()


def broken_ports() -> list:
    return [
        pytest.param(b, level, id=f"{b.name}@L{level}", marks=pytest.mark.verifies(bug_job(b)))
        for b in BROKEN
        for level in b.levels
    ]


# ---- assertions ------------------------------------------------------------------------


def assert_localized(finding: Finding, port: PatchedPort | None) -> None:
    """The finding's port lines include a line the patch wrote, with its text."""
    assert port is not None
    patched = {(n, t) for n, t in zip(port.lines, port.line_texts(), strict=True)}
    named = {
        (loc.line, loc.text.strip())
        for loc in finding.port_lines
        if Path(loc.file).resolve() == port.path.resolve()
    }
    assert patched & named, (
        f"patched lines {sorted(patched)} not among the finding's port lines {sorted(named)}"
    )


def only_finding(report: Report, level: int) -> Finding:
    assert report.exit_code == 1
    [result] = [lv for lv in report.levels if lv.level == level]
    assert result.status == "fail", result.summary
    assert result.findings, result.summary
    return result.findings[0]


# ---- the tests -------------------------------------------------------------------------


def test_apply_patch_reports_the_lines_it_wrote(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("a = 1\nb = 2\nc = 3\nd = 4\n")
    # the second edit adds a line above the first one's: its line number moves down
    port = apply_patch(source, tmp_path / "out", ("c = 3", "c = 30"), ("a = 1", "a = 1\nz = 0"))
    assert port.path.read_text() == "a = 1\nz = 0\nb = 2\nc = 30\nd = 4\n"
    assert port.lines == (1, 2, 4)
    assert port.line_texts() == ["a = 1", "z = 0", "c = 30"]
    for edit in (("x = 9", "y"), ("= ", "==")):  # absent, and not unique
        with pytest.raises(AssertionError, match="patch target occurs"):
            apply_patch(source, tmp_path / "bad", edit)


@pytest.mark.verifies("shipped")
def test_shipped_port_passes_l0_to_l3(verified: Verified) -> None:
    report = verified.report
    assert [lv.status for lv in report.levels] == ["pass"] * 4, report.to_dict()
    assert report.exit_code == 0
    l3 = report.levels[3].stats
    assert l3["episodes_per_policy"] >= 100
    assert set(l3["policies"]) == {"uniform", "sticky", "tracker"}
    # the scripted policy is what makes the rare events happen, on both sides equally
    assert l3["events_never_seen"] == []
    tracker = l3["event_coverage"]["tracker"]
    assert tracker["point_won"]["reference"] == tracker["point_won"]["port"] > 0
    assert tracker["vy_capped"]["reference"] > 0
    # reference coverage per level in the JSON, and of L1-L3 together: every line of pong.c
    data = report.to_dict()
    assert data["levels"][0]["reference_coverage"] is None  # L0 is not measured
    for level in data["levels"][1:]:
        (cov,) = level["reference_coverage"]
        assert cov["file"].endswith("pong.c") and cov["lines_executed"] > 0
    (total,) = data["reference_coverage"]["files"]
    assert data["reference_coverage"]["levels"] == "L1\u2013L3"
    assert total["percent"] >= 95.0, total["never_executed"]


@pytest.mark.parametrize(("bug", "level"), broken_ports())
def test_level_alone_catches_and_localizes(bug: Broken, level: int, verified: Verified) -> None:
    finding = only_finding(verified.report, level)
    assert finding.level == level
    assert finding.check == bug.check(level)
    assert bug.field in finding.fields
    assert_localized(finding, verified.port)
    if finding.check == "step.mismatch":  # reproducible: one state, one action
        assert finding.state_before is not None and len(finding.actions) == 1
    if finding.check == "sequence.mismatch":  # reproducible: the shrunk program
        assert finding.detail.startswith("shrunk program:\nreset(seed=")
    if finding.check == "rollout.mismatch":  # reproducible: seed, policy and every action
        assert finding.extra["policy"] == bug.policy
        assert finding.seed is not None and finding.step is not None
        assert len(finding.actions) == finding.step + 1
        assert finding.state_before is not None


@pytest.mark.verifies("serve_out_of_spec_range")
def test_l0_catches_reset_outside_the_spec_range(verified: Verified) -> None:
    finding = only_finding(verified.report, 0)
    assert finding.check == "contract.reset_range"
    assert finding.fields == ["ball_vy"]
    assert_localized(finding, verified.port)


@pytest.mark.verifies("float_tick")
def test_l0_catches_wrong_dtype(verified: Verified) -> None:
    """A float tick is cast back to int32 by canonicalization; L0 compares dtype kinds."""
    finding = only_finding(verified.report, 0)
    assert finding.check == "contract.dtype"
    assert finding.fields == ["tick"]
    assert "float32" in finding.message and "int32" in finding.message
    assert_localized(finding, verified.port)


@pytest.mark.verifies("short_observation")
def test_l0_catches_wrong_observation_shape(verified: Verified) -> None:
    finding = only_finding(verified.report, 0)
    assert finding.check == "contract.observe"
    assert "(16, 7)" in finding.message and "(16, 8)" in finding.message


@pytest.mark.verifies("missing_function")
def test_l0_catches_missing_function(verified: Verified) -> None:
    finding = only_finding(verified.report, 0)  # and stops there
    assert [lv.level for lv in verified.report.levels] == [0]
    assert finding.check == "contract"
    assert "to_canonical" in finding.message


@pytest.mark.verifies(bug_job(BY_NAME["serve_direction_after_point"]))
def test_l2_catches_bug_after_several_steps(verified: Verified) -> None:
    """The serve after a point goes the wrong way: visible only once a point was played."""
    bug = BY_NAME["serve_direction_after_point"]
    finding = only_finding(verified.report, 2)
    assert finding.check == bug.check(2)
    assert bug.field in finding.fields
    assert_localized(finding, verified.port)
    program = finding.detail.splitlines()
    assert program[0] == "shrunk program:"
    assert program[1].startswith("reset(seed=")
    assert any(line.startswith(("step(", "run(", "sequence(")) for line in program[2:])
    assert len(finding.actions) > 1  # several steps from the reset before the sides differ


@pytest.mark.verifies("seed_wraps_at_2_24")
def test_l2_catches_seed_wrap_that_l1_misses(verified: Verified) -> None:
    """Seeds wrap at 2**24: L1's reset seeds (and L3's episode seeds) all lie below it, L2's
    hypothesis-drawn seeds do not, and shrinking finds the wrap point itself."""
    bug = BY_NAME["seed_wraps_at_2_24"]
    assert verified.report.levels[0].status == "pass"
    finding = only_finding(verified.report, 2)
    assert finding.check == bug.check(2)
    assert bug.field in finding.fields
    assert finding.detail == "shrunk program:\nreset(seed=16777216)"
    assert_localized(finding, verified.port)


@pytest.mark.verifies("serve_direction_le_half")
def test_l1_reset_sweep_catches_a_port_wrong_on_few_seeds(verified: Verified) -> None:
    """`u < 0.5` as `u <= 0.5` changes the serve of the ~256 seeds (of 2^32) whose first draw is
    exactly 0.5; the first is 20203367. Sampled seeds never meet one; the block-digest sweep
    over every seed below 2^25 does, and names the seed, the field and the patched line."""
    finding = only_finding(verified.report, 1)
    assert finding.check == "reset.mismatch"
    assert finding.seed == 20203367
    assert finding.fields == ["ball_vx"]
    assert finding.expected == {"ball_vx": 8.0} and finding.actual == {"ball_vx": -8.0}
    assert "reset sweep over seeds 0..33554431" in finding.message
    assert_localized(finding, verified.port)


@pytest.mark.verifies(bug_job(BY_NAME["agent_win_off_by_one"]))
def test_l3_catches_what_only_the_scripted_policy_reaches(verified: Verified) -> None:
    """Random policies never win 21 points, the scripted tracker does: L3's uniform and sticky
    episodes all end without a difference, the tracker's diverge where the agent wins."""
    finding = only_finding(verified.report, 3)
    assert finding.extra["policy"] == "tracker"
    assert finding.state_before is not None and finding.state_before["score_r"] == 20
    assert finding.expected == {"terminated": True} and finding.actual == {"terminated": False}


@pytest.mark.verifies("cartpole_reset_range")
def test_l1_ks_test_catches_wrong_reset_range_in_sync_mode(verified: Verified) -> None:
    """Sync mode (gymnasium's RNG cannot be replicated): resets are compared as distributions.
    Pong's exact reset check has its counterpart here: the KS test on CartPole's reset."""
    spec = load_spec(CARTPOLE_SPEC)
    assert spec.rng.mode == "sync"
    finding = only_finding(verified.report, 1)
    assert finding.check == "reset.distribution"
    assert finding.fields[0] in {"x", "x_dot", "theta", "theta_dot"}
    assert "KS" in finding.message and finding.error["p_value"] < spec.verify.alpha
    assert_localized(finding, verified.port)
