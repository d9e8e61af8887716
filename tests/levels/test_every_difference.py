"""One verify names every distinct difference: four independent bugs planted in pong's JAX port
come back as four groups from one default run, each with its own lines, and ``--fail-fast``
keeps stopping at the first.

The bugs (each an exact patch of ``generated/pong/jax/pong.py``): the opponent paddle 1.5x
faster moving down, the return reward doubled, the left side needing one point more to win,
and the sign of the ball's x velocity flipped in ``observe``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import PONG_PORT, PONG_SPEC, QUICK_SWEEP, PatchedPort, apply_patch

from envforge.spec import load_spec
from envforge.verify.context import VerifyOptions
from envforge.verify.runner import verify
from envforge.verify.verdict import Report

FOUR_BUGS = (
    (
        "chase = jnp.clip(target - state.paddle_yl, -OPPONENT_SPEED, OPPONENT_SPEED)",
        "chase = jnp.clip(target - state.paddle_yl, -OPPONENT_SPEED, OPPONENT_SPEED * f32(1.5))",
    ),
    (
        "reward = jnp.where(hit_r, f32(0.0) + RETURN_REWARD, f32(0.0))",
        "reward = jnp.where(hit_r, f32(0.0) + RETURN_REWARD * f32(2.0), f32(0.0))",
    ),
    (
        "terminated = (state.score_l >= WIN_SCORE) |",
        "terminated = (state.score_l >= WIN_SCORE + 1) |",
    ),
    (
        "            state.ball_vx * (f32(1.0) / BALL_SPEED_X),",
        "            -state.ball_vx * (f32(1.0) / BALL_SPEED_X),",
    ),
)
RESET_AND_STEP = (
    (
        "paddle_yl=(HEIGHT - PADDLE_H) * HALF + jnp.zeros((), jnp.float32),",
        "paddle_yl=(HEIGHT - PADDLE_H) * HALF + f32(1.0) + jnp.zeros((), jnp.float32),",
    ),
    FOUR_BUGS[1],  # the return reward doubled
)
OPTIONS = {"scale": 0.2, "seed_sweep": QUICK_SWEEP}


def _run(workdir: Path, name: str) -> tuple[Report, PatchedPort]:
    port = apply_patch(PONG_PORT, workdir, *(RESET_AND_STEP if name == "reset" else FOUR_BUGS))
    options = VerifyOptions(fail_fast=name == "fail_fast", **OPTIONS)  # type: ignore[arg-type]
    levels = [1] if name == "reset" else [0, 1]
    return verify(load_spec(PONG_SPEC), port.path, levels, options), port


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Callable[[str], tuple[Report, PatchedPort]]:
    """The runs the selected tests ask for, each made once (the reset and fail-fast runs are
    in slow tests: the default suite pays only for the four-bug run)."""
    made: dict[str, tuple[Report, PatchedPort]] = {}

    def run(name: str) -> tuple[Report, PatchedPort]:
        if name not in made:
            made[name] = _run(tmp_path_factory.mktemp(name), name)
        return made[name]

    return run


def _patched_line(port: PatchedPort, text: str) -> int:
    [line] = [n for n, t in zip(port.lines, port.line_texts(), strict=True) if text in t]
    return line


def test_one_default_run_names_all_four_bugs_as_groups(runs) -> None:
    report, port = runs("default")
    assert report.exit_code == 1
    groups = {g.cause: g for g in report.groups()}
    assert set(groups) == {"paddle_yl", "reward", "terminated", "obs"}, report.groups_line()
    # most fundamental first: the state field, then reward and flag, the observation last
    assert [g.cause for g in report.groups()][0] == "paddle_yl"
    assert [g.cause for g in report.groups()][-1] == "obs"
    for cause, patched in (
        ("paddle_yl", "OPPONENT_SPEED * f32(1.5)"),
        ("reward", "RETURN_REWARD * f32(2.0)"),
        ("terminated", "WIN_SCORE + 1"),
        ("obs", "-state.ball_vx"),
    ):
        finding = groups[cause].finding
        shown = {(loc.line, Path(loc.file).name) for loc in finding.port_lines}
        assert (_patched_line(port, patched), port.path.name) in shown, (cause, shown)
        assert finding.state_before is not None and len(finding.actions) == 1
    # the observation group names only the observation, at the element and in observe
    obs = groups["obs"].finding
    assert obs.fields == ["obs"] and obs.extra["obs_elements"] == [4]
    assert all("ball_vx" in loc.text for loc in obs.port_lines)
    assert any(loc.text.startswith("obs[4] =") for loc in obs.reference_lines)
    data = json.loads(json.dumps(report.to_dict()))
    assert {g["cause"] for g in data["groups"]} == set(groups)
    assert all(g["count"] >= 1 and g["port_lines"] for g in data["groups"])
    assert data["search_s"] > 0
    assert report.groups_line().startswith("4 distinct differences found in ")


@pytest.mark.slow  # a second verify of the four-bug port
def test_fail_fast_stops_at_the_first_difference(runs) -> None:
    report, _ = runs("fail_fast")
    assert report.exit_code == 1
    assert len(report.groups()) == 1
    assert len(report.levels[-1].findings) == 1


@pytest.mark.slow  # a verify of its own (about 40 s of CPU)
def test_a_reset_finding_does_not_stop_the_step_checks(runs) -> None:
    report, port = runs("reset")
    groups = {g.cause: g for g in report.groups()}
    assert set(groups) == {"reset:paddle_yl", "reward"}, report.groups_line()
    assert report.groups()[0].cause == "reset:paddle_yl"  # the reset first
    assert groups["reset:paddle_yl"].finding.check == "reset.mismatch"
    reward = groups["reward"].finding
    assert reward.check == "step.mismatch" and reward.state_before is not None
    line = _patched_line(port, "RETURN_REWARD * f32(2.0)")
    assert line in [loc.line for loc in reward.port_lines]


def test_the_html_page_has_every_group_with_plots_and_loads_nothing(runs, tmp_path) -> None:
    from envforge.verify.html_report import render_html

    report, _ = runs("default")
    page = render_html(report)
    sections = page.split('<section class="group"')[1:]
    assert len(sections) == len(report.groups()) == 4
    for section, group in zip(sections, report.groups(), strict=True):
        assert f"{group.cause} <span" in section
        assert "<svg" in section and 'class="reference"' in section and 'class="port"' in section
        assert "Minimal input" in section and "Both sides" in section
    # self-contained: no address, no script, nothing fetched
    for needle in ("http:", "https:", "//cdn", "<script", "<link", "src=", "url(", "@import"):
        assert needle not in page, needle


def test_causes_of_one_step() -> None:
    """A state field first; with equal states each of reward, a flag and the observation on its
    own; a truncation that follows a different termination is not a cause of its own."""
    from envforge.verify.groups import causes_of

    spec = load_spec(PONG_SPEC)
    assert causes_of(spec, ["ball_y", "paddle_yl", "obs"]) == ["paddle_yl"]
    assert causes_of(spec, ["reward", "obs"]) == ["reward", "obs"]
    assert causes_of(spec, ["terminated", "truncated"]) == ["terminated"]
    assert causes_of(spec, ["truncated"]) == ["truncated"]
    assert causes_of(spec, ["paddle_yl"], tape_bad=True) == ["rng.tape"]
