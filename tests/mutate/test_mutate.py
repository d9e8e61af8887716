"""envforge mutate: operators, sampling, triage, the differential test, and a small fixed campaign."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest
from conftest import QUICK_SWEEP

from envforge.errors import BadInput
from envforge.mutate.ast_ops import python_edits
from envforge.mutate.generate import generate, sample, sibling_fields
from envforge.mutate.mutant import Mutant, SourceText
from envforge.mutate.text_ops import text_edits
from envforge.mutate.triage import (
    affected_keys,
    field_localized,
    line_localized,
    static_equivalence,
)
from envforge.resolve import default_port
from envforge.spec import spec_for_name

PY = '''"""docstring 1 + 2 is not code"""
import jax.numpy as jnp

LIMIT = 10  # module constant


def unused(x):
    return x * 3


def step(state, action):
    """Also not code: x < 1."""
    move = jnp.where(action == 1, -2.0, 2.0)
    pos = jnp.clip(state.pos + move, 0.0, LIMIT)
    tick = state.tick + 1
    done = tick >= LIMIT
    return state._replace(pos=pos, tick=tick), done
'''

C = """/* a + b in a comment */
typedef struct { float pos; float vel; int tick; } S;
static float clampf(float v, float lo, float hi) { return v < lo ? lo : (v > hi ? hi : v); }
void s_step(S* env, int action) {
    env->pos = clampf(env->pos + env->vel, 0.0f, 10.0f); // x * y here too
    if (env->pos > 5.0f) {
        env->tick += 1;
    }
}
"""


def _apply(source: str, edits: list) -> list[str]:
    text = SourceText(source)
    return [text.apply(e) for e in edits]


def test_python_operators_touch_only_code_and_keep_line_numbers() -> None:
    edits = python_edits(PY, {"pos": "tick", "tick": "pos"})
    ops = {e.operator for e in edits}
    assert {"arith", "compare", "constant", "off_by_one", "sign", "clip", "where"} <= ops
    assert "field_swap" in ops
    for source, edit in zip(_apply(PY, edits), edits, strict=True):
        ast.parse(source)  # every mutant still parses
        assert source.count("\n") == PY.count("\n")
        assert source.splitlines()[0] == PY.splitlines()[0], f"docstring mutated by {edit}"
        assert "import jax.numpy as jnp" in source
    texts = {e.description for e in edits}
    assert "`>=` -> `>`" in texts and "`where(...)` -> its false branch" in texts
    assert "`.pos` -> `.tick`" in texts and "`pos=` -> `tick=`" in texts


def test_multiline_replacement_keeps_later_lines_in_place() -> None:
    source = "x = f(\n    a,\n    b,\n)\ny = 1\n"
    text = SourceText(source)
    tree = ast.parse(source)
    call = tree.body[0].value  # type: ignore[attr-defined]
    from envforge.mutate.mutant import Edit

    start = text.offset(call.lineno, call.col_offset)
    end = text.offset(call.end_lineno, call.end_col_offset)
    out = text.apply(Edit("clip", start, end, "a", "drop"))
    assert out.splitlines()[4] == "y = 1"
    assert ast.parse(out)


def test_c_operators_skip_comments_and_definitions() -> None:
    edits = text_edits(C, {"pos": "vel", "vel": "pos"})
    mutated = _apply(C, edits)
    for source in mutated:
        assert source.splitlines()[0] == C.splitlines()[0]
        assert "// x * y here too" in source
        assert "static float clampf(float v, float lo, float hi)" in source
    ops = {e.operator for e in edits}
    assert {"arith", "compare", "constant", "branch", "clip", "field_swap", "off_by_one"} <= ops
    assert any("env->pos = (env->pos + env->vel);" in s for s in mutated)  # clip dropped
    assert any("env->vel = clampf" in s for s in mutated)  # swapped field


RUST = """\
fn step(x: f32) -> f32 {
    x * 2.0
}

#[cfg(test)]
mod tests {
    #[test]
    fn doubles() {
        assert!((super::step(1.0) - 2.0).abs() < 1e-6, "{}", "}");
    }
}

fn after(x: f32) -> f32 { x + 1.0 }
"""


def test_rust_rng_mutant_flips_a_borrowed_generator_and_compiles() -> None:
    source = (
        "fn reset(s: &mut S) {\n    let mut rng = 7u64;\n    s.x = uniform(&mut rng, 0.0);\n}\n"
    )
    (edit,) = [e for e in text_edits(source, {}, rust=True) if e.operator == "rng"]
    assert edit.text == "{ rng ^= 1; &mut rng }"


def test_rust_unit_tests_are_not_mutated() -> None:
    """`#[cfg(test)]` modules are not in the built extension: mutants there change nothing."""
    lines = [SourceText(RUST).line_of(e.start) for e in text_edits(RUST, {}, rust=True)]
    assert lines and set(lines) <= {2, 13}  # step's body and the function after the tests
    assert 13 in lines


def test_sampling_is_seeded_and_covers_rare_operators() -> None:
    mutants = [Mutant(f"arith:{i}:1", "arith", "f.py", i, "", "") for i in range(50)]
    mutants.append(Mutant("rng:99:1", "rng", "f.py", 99, "", ""))
    first = sample(mutants, 6, seed=1)
    assert first == sample(mutants, 6, seed=1)
    assert len(first) == 6 and any(m.operator == "rng" for m in first)
    assert [m.line for m in first] == sorted(m.line for m in first)
    assert len(sample(mutants, None)) == len(mutants)


def test_shuffled_sample_order_reaches_the_late_operators() -> None:
    """With --max below the operator count, sorted turns (the default, the recorded
    campaigns' picks) take only the first names; shuffled turns, seeded, reach the late ones."""
    names = ["arith", "clip", "compare", "constant", "probability", "rng", "sign", "wrong_end"]
    mutants = [Mutant(f"{op}:{i}:1", op, "f.py", i, "", "") for i, op in enumerate(names * 3)]
    for seed in range(5):
        picked = {m.operator for m in sample(mutants, 4, seed=seed)}
        assert picked == set(names[:4])
        assert sample(mutants, 4, seed=seed) == sample(mutants, 4, seed, "sorted")
        assert sample(mutants, 5, seed, "shuffled") == sample(mutants, 5, seed, "shuffled")
    reached = {m.operator for seed in range(8) for m in sample(mutants, 4, seed, "shuffled")}
    assert reached == set(names)  # every operator drawn by some seed
    with pytest.raises(BadInput, match="--sample-order"):
        sample(mutants, 4, 0, "alphabetical")


def test_generate_on_the_pong_port_drops_duplicates_and_stillborn() -> None:
    spec = spec_for_name("pong")
    path = default_port(spec, "jax") / "pong.py"
    gen = generate(path, "pong.py", spec)
    assert len(gen.mutants) > 100
    assert len({m.id for m in gen.mutants}) == len(gen.mutants)
    assert len({m.source for m in gen.mutants}) == len(gen.mutants)
    assert sibling_fields(spec)["ball_x"] == "ball_y"  # same dtype, next in spec order
    assert "rng" not in sibling_fields(spec)  # the only uint32 field has no sibling


def test_lines_marked_no_mutate_are_not_mutated(tmp_path: Path) -> None:
    spec = spec_for_name("pong")
    source = "def f(x):\n    y = x + 1.5  # envforge: no-mutate\n    return y * 2.0\n"
    path = tmp_path / "m.py"
    path.write_text(source)
    gen = generate(path, "m.py", spec)
    assert gen.exempt > 0
    assert gen.mutants and {m.line for m in gen.mutants} == {3}
    path.write_text(source.replace("  # envforge: no-mutate", ""))
    assert 2 in {m.line for m in generate(path, "m.py", spec).mutants}
    rust = "fn f(x: f32) -> f32 {\n    let y = x + 1.5; // envforge: no-mutate\n    y * 2.0\n}\n"
    (tmp_path / "m.rs").write_text(rust)
    assert {m.line for m in generate(tmp_path / "m.rs", "m.rs", spec).mutants} == {3}


def test_static_equivalence_is_only_claimed_for_dead_code() -> None:
    line_in_unused = PY.splitlines().index("    return x * 3") + 1
    dead = Mutant("arith:1:1", "arith", "m.py", line_in_unused, "", "")
    live = Mutant(
        "arith:1:1", "arith", "m.py", PY.splitlines().index("    tick = state.tick + 1") + 1, "", ""
    )
    assert "unused() is never called" in (static_equivalence(dead, PY) or "")
    assert static_equivalence(live, PY) is None
    c_dead = C + "static int helper(int x) {\n    return x + 1;\n}\n"
    line = c_dead.splitlines().index("    return x + 1;") + 1
    assert "helper()" in (
        static_equivalence(Mutant("a", "arith", "r.c", line, "", ""), c_dead) or ""
    )
    line = C.splitlines().index("        env->tick += 1;") + 1
    assert static_equivalence(Mutant("a", "arith", "r.c", line, "", ""), C) is None


def test_localization_judgement() -> None:
    from envforge.mutate.differential import DifferentialResult

    result = DifferentialResult("light", differing={"ball_y": 3, "obs": 3})
    affected = affected_keys(result, ["ball_y", "ball_x"])
    assert affected == {"ball_y"}
    assert field_localized({"fields": ["ball_y", "obs"]}, affected)
    assert not field_localized({"fields": ["obs"]}, affected)
    only_obs = affected_keys(DifferentialResult("light", differing={"obs": 1}), ["ball_y"])
    assert field_localized({"fields": ["obs"]}, only_obs)
    # a rule only the observation reads (Blackjack's usable ace): obs changed in a step whose
    # next state did not, so a finding naming obs is localized though a state field changed too
    alone = DifferentialResult("light", differing={"dealer": 5, "obs": 9}, alone={"obs": 4})
    assert affected_keys(alone, ["player", "dealer"]) == {"dealer", "obs"}
    m = Mutant("x", "arith", "pong.py", 42, "", "")
    finding = {"port_lines": [{"file": "/tmp/m/pong.py", "line": 42, "text": ""}]}
    assert line_localized(finding, m, "port")
    assert not line_localized(finding, m, "reference")


def test_differential_finds_a_changed_constant_and_not_an_unchanged_copy(tmp_path: Path) -> None:
    from envforge.backends.jax import JaxDriver
    from envforge.mutate.differential import LIGHT, Differential

    spec = spec_for_name("pong")
    port = default_port(spec, "jax")
    original = (port / "pong.py").read_text()
    same = tmp_path / "same"
    slow = tmp_path / "slow"
    for d, text in (
        (same, original),
        (slow, original.replace("PADDLE_SPEED = f32(8.0)", "PADDLE_SPEED = f32(7.0)")),
    ):
        d.mkdir()
        (d / "pong.py").write_text(text)
    base = JaxDriver(spec, port)
    small = type(LIGHT)(reset_seeds=64, sampled_states=256, rollout_envs=16, rollout_steps=16)
    clean = Differential(base, JaxDriver(spec, same)).run(small, "light")
    assert not clean.differs and clean.transitions > 0
    changed = Differential(base, JaxDriver(spec, slow)).run(small, "light")
    assert "paddle_yr" in changed.differing and changed.witness is not None


def test_differential_counts_outputs_that_change_where_the_state_does_not(tmp_path: Path) -> None:
    """Blackjack's usable ace at `total + 10 < 21` (was `<=`): the dealer's stick changes (a
    state field), and a player's ace-and-ten shows 11, not 21, while the cards stay the same.
    The second is counted as ``alone``, so a finding naming ``obs`` there is localized."""
    from envforge.backends.jax import JaxDriver
    from envforge.mutate.differential import LIGHT, Differential

    spec = spec_for_name("blackjack")
    port = default_port(spec, "jax")
    text = (port / "blackjack.py").read_text()
    rule = "return hand.ace & (hand.total + 10 <= 21)"
    assert rule in text
    (tmp_path / "blackjack.py").write_text(text.replace(rule, rule.replace("<=", "<")))
    small = type(LIGHT)(reset_seeds=256, sampled_states=512, rollout_envs=16, rollout_steps=16)
    result = Differential(JaxDriver(spec, port), JaxDriver(spec, tmp_path)).run(small, "light")
    assert "dealer" in result.differing and result.alone.get("obs", 0) > 0, result
    assert affected_keys(result, spec.field_names) >= {"dealer", "obs"}


def test_all_seeds_comparison_of_drivers_finds_a_guard_that_changes_two_seeds(tmp_path) -> None:
    """A seed-hash guard `x == 0 ? 1 : x` changed to `? 2 :` differs on 2 seeds of 2^32 (the
    first is 449710063). Rust and C drivers are compared by block digests; here the real C
    reference against its mutant, over a range around that seed (the whole range takes
    minutes)."""
    from envforge.backends.c import CDriver
    from envforge.mutate.seeds import CHUNK, first_differing_seed_of_drivers

    spec = spec_for_name("pong")
    source = (spec.root / "pong.c").read_text()
    mutated = tmp_path / "pong.c"
    mutated.write_text(source.replace("return x == 0u ? 1u : x;", "return x == 0u ? 2u : x;"))
    original, mutant = CDriver(spec, spec.root / "pong.c"), CDriver(spec, mutated)
    first = 449_710_063 - CHUNK - 12345
    seed, checked = first_differing_seed_of_drivers(
        spec, original, mutant, first, first + 3 * CHUNK
    )
    assert seed == 449_710_063 and checked == 2 * CHUNK
    assert first_differing_seed_of_drivers(spec, original, original, first, first + 3 * CHUNK) == (
        None,
        3 * CHUNK,
    )


def small_campaign(kind: str, mutants: list[str]):  # type: ignore[no-untyped-def]
    """The named mutants of pong's ``kind`` port through L0-L1 at reduced scale, two at once."""
    from envforge.mutate.campaign import run_campaign
    from envforge.mutate.workspace import resolve_target
    from envforge.verify.context import VerifyOptions

    target = resolve_target(spec_for_name("pong"), "port", kind, None)
    options = VerifyOptions(scale=0.2, seed_sweep=QUICK_SWEEP)
    return run_campaign(target, [0, 1], options, parallel=2, time_limit_s=300, only=mutants)


@pytest.mark.slow
def test_small_fixed_campaign_kills_and_localizes() -> None:
    """CI's fixed sample: two pong port mutants through L0-L1 at reduced scale."""
    spec = spec_for_name("pong")
    gen = generate(default_port(spec, "jax") / "pong.py", "pong.py", spec)
    wanted = [
        next(m.id for m in gen.mutants if m.description == d)
        for d in ("`5.0` -> `5.5`", "`.tick` -> `.score_l`")  # opponent speed, tick counter
    ]
    report = small_campaign("jax", wanted)
    assert [o.status for o in report.outcomes] == ["killed", "killed"], report.to_dict()
    assert all(o.level == 1 and o.field_localized for o in report.outcomes)
    assert report.kill_rate() == 1.0


@pytest.mark.skipif(shutil.which("cargo") is None, reason="needs cargo")
def test_small_fixed_rust_campaign_builds_each_mutant_and_sets_aside_the_stillborn() -> None:
    """CI's Rust sample: the crate's mutants are built by the verifier (each from its own
    files), one in the one-by-one step is killed and field-localized, one that cannot
    compile (`^ 1` on a SIMD register) is stillborn, not a kill."""
    wanted = ["src/pong.rs:arith:118:1", "src/lanes.rs:rng:242:1"]
    report = small_campaign("rust", wanted)
    by_id = {o.id: o for o in report.outcomes}
    assert set(by_id) == set(wanted), report.to_dict()
    killed, unbuilt = by_id["src/pong.rs:arith:118:1"], by_id["src/lanes.rs:rng:242:1"]
    assert killed.status == "killed" and killed.field_localized, killed
    assert "paddle_yr" in killed.affected
    assert unbuilt.status == "stillborn" and "cargo build failed" in unbuilt.error, unbuilt
    assert report.kill_rate() == 1.0 and report.to_dict()["stillborn"] >= 1


def test_judge_classifies_runs() -> None:
    from envforge.mutate.execute import MutantJob, MutantRun
    from envforge.mutate.mutation_report import MutationReport, judge
    from envforge.mutate.workspace import Target
    from envforge.verify.context import VerifyOptions

    spec = spec_for_name("pong")
    target = Target(spec, "port", Path("."), (), Path("."))
    dead_line = PY.splitlines().index("    return x * 3") + 1
    live_line = PY.splitlines().index("    tick = state.tick + 1") + 1

    def run(line: int, levels: list[str], **kw: object) -> MutantRun:
        m = Mutant(f"arith:{line}:1", "arith", "m.py", line, "`*` -> `/`", PY.replace("*", "/"))
        report = {
            "verdict": "equivalent" if all(s == "pass" for s in levels) else "not equivalent",
            "levels": [{"level": i, "status": s} for i, s in enumerate(levels)],
        }
        job = MutantJob(target, m, Path("."), (0, 1), VerifyOptions())
        return MutantRun(job, report=report, **kw)  # type: ignore[arg-type]

    finding = {"check": "step.mismatch", "fields": ["tick"], "port_lines": []}
    diff = {"effort": "light", "differing": {"tick": 5}}
    killed = judge(
        run(live_line, ["pass", "fail"], first_finding=finding, differential=diff), PY, ["tick"]
    )
    assert (killed.status, killed.level, killed.field_localized) == ("killed", 1, True)
    witness = {"effort": "full", "differing": {"tick": 1}, "witness": {"where": "x"}}
    survived = judge(run(live_line, ["pass", "pass"], differential=witness), PY, ["tick"])
    assert survived.status == "survived" and survived.witness == {"where": "x"}
    dead = judge(run(dead_line, ["pass", "pass"]), PY, ["tick"])
    assert dead.status == "equivalent" and "never called" in (dead.equivalence or "")
    clean = {"effort": "full", "resets": 10, "transitions": 10}
    equal = judge(run(live_line, ["pass", "pass"], differential=clean), PY, ["tick"])
    assert equal.status == "equivalent" and "differential" in (equal.equivalence or "")
    no_evidence = judge(run(live_line, ["pass", "pass"]), PY, ["tick"])
    assert no_evidence.status == "survived"
    timed_out = MutantRun(run(live_line, []).job, timed_out=True)
    assert judge(timed_out, PY, ["tick"]).status == "timeout"
    # a mutant whose own crate does not build says nothing about the verifier
    unbuilt = {"check": "contract", "message": "port build: cargo build failed: E0369"}
    unbuilt["extra"] = {"side": "port", "call": "build"}  # type: ignore[assignment]
    stillborn = judge(run(live_line, ["fail"], first_finding=unbuilt), PY, ["tick"])
    assert stillborn.status == "stillborn" and "E0369" in stillborn.error

    report = MutationReport("pong", "port", ["m.py"], [0, 1], {}, 6, 0)
    report.outcomes = [killed, survived, dead, equal, no_evidence, judge(timed_out, PY, ["tick"])]
    report.outcomes.append(stillborn)
    assert report.non_equivalent == 4 and report.kill_rate() == 0.25
    assert report.to_dict()["stillborn"] == 1
    assert report.per_level()[1]["killed_through"] == 1
    assert report.localization()["field"] == report.localization()["localized"] == 1.0


def test_a_crash_in_the_mutated_handler_is_a_localized_kill() -> None:
    """A kill by an exception names no field; it is localized when the line it was raised at
    lies in the function the mutant changed, and only then."""
    from envforge.mutate.execute import MutantJob, MutantRun
    from envforge.mutate.mutation_report import MutationReport, judge
    from envforge.mutate.workspace import Target
    from envforge.verify.context import VerifyOptions

    target = Target(spec_for_name("pong"), "port", Path("."), (), Path("."))
    lines = PY.splitlines()
    mutated = lines.index("    tick = state.tick + 1") + 1
    in_step, in_unused = (
        lines.index("    done = tick >= LIMIT") + 1,
        lines.index("    return x * 3") + 1,
    )

    def crashed(at: int, fields: list[str] | None = None) -> MutantRun:
        m = Mutant(f"arith:{mutated}:1", "arith", "port/m.py", mutated, "`+` -> `-`", PY)
        report = {"verdict": "not equivalent", "levels": [{"level": 0, "status": "error"}]}
        thrown = {"file": "/tmp/work/port/m.py", "line": at, "text": ""}
        finding = {"check": "exception", "fields": fields or [], "port_lines": [thrown]}
        finding["extra"] = {"side": "port", "call": "step", "handler": "step"}  # type: ignore[assignment]
        job = MutantJob(target, m, Path("."), (0,), VerifyOptions())
        return MutantRun(job, report=report, first_finding=finding)

    here, there = judge(crashed(in_step), PY, ["tick"]), judge(crashed(in_unused), PY, ["tick"])
    assert (here.status, here.site_localized, here.field_localized) == ("killed", True, False)
    assert here.handler == "step" and not here.line_localized
    assert there.status == "killed" and not there.site_localized
    # a finding that names fields is judged by them, not by where it points
    assert not judge(crashed(in_step, ["pos"]), PY, ["tick"]).site_localized
    report = MutationReport("pong", "port", ["m.py"], [0], {}, 2, 0)
    report.outcomes = [here, there]
    assert report.localization() == {
        "localized": 0.5,
        "field": 0.0,
        "site": 0.5,
        "draw": 0.0,
        "line": 0.0,
        "handler": None,
    }
    assert report.to_dict()["targets"]["localization_met"] is False


def test_a_call_timeout_kill_is_rerun_with_a_longer_limit(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A verify stopped by one slow driver call runs again with RETIME_FACTOR times the limit:
    what the re-run finds is the outcome (a real kill, or a pass), and only a mutant that
    times out again is a kill by timeout. Runs without a timeout finding are not re-run."""
    from envforge.mutate import campaign
    from envforge.mutate.execute import MutantJob, MutantRun
    from envforge.mutate.mutation_report import judge
    from envforge.mutate.workspace import Target
    from envforge.verify.context import VerifyOptions

    spec = spec_for_name("pong")
    target = Target(spec, "port", Path("."), (), Path("."))
    line = PY.splitlines().index("    tick = state.tick + 1") + 1

    def job(n: int) -> MutantJob:
        m = Mutant(f"arith:{line}:{n}", "arith", "m.py", line, "`+` -> `-`", PY.replace("+", "-"))
        return MutantJob(target, m, Path("."), (0, 1), VerifyOptions(timeout_s=30.0))

    failed = {"verdict": "not equivalent", "levels": [{"level": 0, "status": "fail"}]}
    timeout = {"check": "timeout", "fields": [], "port_lines": []}
    mismatch = {"check": "step.mismatch", "fields": ["tick"], "port_lines": []}
    runs = [
        MutantRun(job(1), report=failed, first_finding=timeout, wall_s=31.0),  # slow, not hung
        MutantRun(job(2), report=failed, first_finding=timeout, wall_s=31.0),  # hung
        MutantRun(job(3), report=failed, first_finding=mismatch, wall_s=5.0),
    ]
    seen: list[float | None] = []

    def rerun(jobs, parallel, time_limit_s):  # type: ignore[no-untyped-def]
        seen.extend(j.options.timeout_s for j in jobs)
        second = {"verdict": "not equivalent", "levels": [{"level": 0, "status": "pass"}]}
        second["levels"].append({"level": 1, "status": "fail"})  # type: ignore[attr-defined]
        return [
            MutantRun(jobs[0], report=second, first_finding=mismatch, wall_s=40.0),
            MutantRun(jobs[1], report=failed, first_finding=timeout, wall_s=121.0),
        ]

    monkeypatch.setattr(campaign, "run_jobs", rerun)
    out = campaign._retime(runs, spec.verify.timeout_s, 1, 900.0)
    assert seen == [30.0 * campaign.RETIME_FACTOR] * 2
    slow, hung, plain = (judge(r, PY, ["tick"]) for r in out)
    assert (slow.status, slow.level, slow.check, slow.retimed_from) == (
        "killed",
        1,
        "step.mismatch",
        30.0,
    )
    assert slow.wall_s == 71.0
    assert (hung.status, hung.check, hung.retimed_from) == ("killed", "timeout", 30.0)
    assert plain.retimed_from is None and out[2] is runs[2]


def test_campaign_sweep_plan_keeps_the_reference_and_fits_the_budget(monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Before a campaign the reference's digests of the whole default sweep are kept (by two
    workers), and every mutant gets one fixed sweep: all of it when the unmutated port's rate
    fits the budget, else the power of two that does."""
    from envforge.mutate.sweep_plan import plan_sweep
    from envforge.mutate.workspace import resolve_target
    from envforge.verify.context import VerifyOptions

    monkeypatch.setenv("ENVFORGE_CACHE", str(tmp_path))
    base = spec_for_name("pong")

    def target(seconds: float):  # type: ignore[no-untyped-def]
        settings = {"seed_sweep": 1 << 23, "seed_sweep_seconds": seconds}
        spec = base.model_copy(update={"verify": base.verify.model_copy(update=settings)})
        return resolve_target(spec, "port", "jax", None)

    notes: list[str] = []
    n, info = plan_sweep(target(600.0), [0, 1], VerifyOptions(), 2, notes.append)
    assert n == 1 << 23 and info["reference_kept"] == 1 << 23
    assert len(notes) == 1 and "0..8388607" in notes[0]
    [kept] = (tmp_path / "digests").iterdir()
    assert kept.stat().st_size == (1 << 23) // 4096 * 8
    # a budget of a millisecond: the plan is cut by the measured rate, and nothing is recomputed
    n, info = plan_sweep(target(0.001), [0, 1], VerifyOptions(), 2, notes.append)
    assert len(notes) == 1 and n < 1 << 23 and n & (n - 1) == 0
    assert n * info["seconds_per_seed"] <= 0.001 or n == 4096
    assert plan_sweep(target(600.0), [0, 2, 3], VerifyOptions(), 2, notes.append) == (1 << 23, {})


def test_a_mutant_rerun_alone_replaces_its_campaign_outcome_and_the_rates() -> None:
    """A survivor whose differential outlasted the worker's limit, run again alone and found
    equivalent: the campaign's kill rate is computed again and the re-run is recorded."""
    from envforge.mutate.mutation_report import MutationReport, Outcome
    from envforge.mutate.rerun import put_back, report_from_dict

    killed = Outcome("arith:1:1", "arith", "m.py", 1, "", "killed", level=1, field_localized=True)
    unknown = Outcome("clip:2:1", "clip", "m.py", 2, "", "survived", error="no full differential")
    report = MutationReport("m", "port", ["m.py"], [0, 1], {}, 9, 1, exempt=2)
    report.outcomes = [killed, unknown]
    campaign = report.to_dict() | {"command": "envforge mutate m --max 2", "target": "jax"}
    assert campaign["kill_rate"] == 0.5
    assert report_from_dict(campaign).to_dict() == report.to_dict()  # a lossless round trip
    again = MutationReport("m", "port", ["m.py"], [0, 1], {}, 9, 1, wall_s=30.0)
    again.outcomes = [Outcome("clip:2:1", "clip", "m.py", 2, "", "equivalent", wall_s=30.0)]
    data = put_back(campaign, again, "the differential timed out", "2026-12-02", 3600.0)
    assert data["kill_rate"] == 1.0 and data["non_equivalent"] == 1
    assert data["command"] == campaign["command"] and data["exempt"] == 2
    [redone] = [m for m in data["mutants"] if m["id"] == "clip:2:1"]
    assert redone["rerun"]["campaign_status"] == "survived"
    assert data["reruns"][0]["ids"] == ["clip:2:1"]
    assert data["wall_s"] == campaign["wall_s"] and data["reruns"][0]["wall_s"] == again.wall_s
    stray = MutationReport("m", "port", ["m.py"], [0, 1], {}, 9, 1)
    stray.outcomes = [Outcome("sign:9:1", "sign", "m.py", 9, "", "killed")]
    with pytest.raises(ValueError, match="sign:9:1"):
        put_back(campaign, stray, "x", "y", 1.0)
    # ids that selected no mutant: before, the JSON got an empty re-run entry
    nothing = MutationReport("m", "port", ["m.py"], [0, 1], {}, 9, 1)
    with pytest.raises(ValueError, match="no mutant"):
        put_back(campaign, nothing, "x", "y", 1.0)


def test_an_rng_tape_kill_is_localized_to_the_draw_it_names() -> None:
    """The unmutated port accounts for every draw, so the first draw an ``rng.tape`` finding
    names (both sides' asks, the port's line) is one the mutant changed."""
    from envforge.mutate.execute import MutantJob, MutantRun
    from envforge.mutate.mutation_report import MutationReport, judge
    from envforge.mutate.workspace import Target
    from envforge.verify.context import VerifyOptions

    target = Target(spec_for_name("pong"), "port", Path("."), (), Path("."))
    line = PY.splitlines().index("    tick = state.tick + 1") + 1

    def killed_by(check: str, extra: dict[str, object]) -> MutantRun:
        m = Mutant(f"off_by_one:{line}:1", "off_by_one", "m.py", line, "`1` -> `2`", PY)
        report = {"verdict": "not equivalent", "levels": [{"level": 1, "status": "fail"}]}
        finding = {"check": check, "fields": [], "port_lines": [], "extra": extra}
        job = MutantJob(target, m, Path("."), (1,), VerifyOptions())
        diff = {"effort": "light", "differing": {"tick": 3}}
        return MutantRun(job, report=report, first_finding=finding, differential=diff)

    asked = {"index": 0, "reference": "integers[1, 7)", "port": "integers[1, 6)"}
    by_draw = judge(killed_by("rng.tape", {"draw": asked}), PY, ["tick"])
    assert (by_draw.field_localized, by_draw.draw_localized) == (False, True)
    by_nothing = judge(killed_by("step.mismatch", {}), PY, ["tick"])
    assert not by_nothing.draw_localized and not by_nothing.field_localized
    report = MutationReport("pong", "port", ["m.py"], [1], {}, 2, 0)
    report.outcomes = [by_draw, by_nothing]
    assert report.localization()["draw"] == report.localization()["localized"] == 0.5
