"""An L0 contract finding on the port's observation (outside the bounds, or ``observe`` of the
next state not the observation ``step`` returned) also names the keys in which the port's step
differs from the reference's from the same state, when it does: the observation is then wrong
because the step is, and the finding points at the step's field, not at ``obs`` alone."""

from __future__ import annotations

from pathlib import Path

from test_level0_ended import PORT, setup

from envforge.spec import load_spec
from envforge.verify.runner import verify


def _contract(tmp_path: Path, port_text: str, check: str) -> list[str]:
    port = setup(tmp_path, bug=False)
    (port / "line.py").write_text(port_text)
    report = verify(load_spec(tmp_path / "env.toml"), port, [0])
    (level,) = report.levels
    found = [f for f in level.findings if f.check == f"contract.{check}"]
    assert found, (level.summary, [f.message for f in level.findings])
    return found[0].fields


def test_obs_out_of_bounds_names_the_flag_the_port_got_wrong(tmp_path: Path) -> None:
    # the port never ends the game: the token walks past the observation's bounds
    never_ends = PORT.replace("jnp.abs(pos) >= 3, jnp.bool_(False)", "pos > 99, jnp.bool_(False)")
    assert never_ends != PORT
    fields = _contract(tmp_path, never_ends, "obs_bounds")
    # before: ["pos", "obs"] (the state outside its range and the observation), not the cause
    assert "terminated" in fields and "obs" in fields, fields


def test_observe_inconsistency_names_the_field_get_state_reads_wrong(tmp_path: Path) -> None:
    # to_canonical reads pos one too high: observe(state read) is not the step's observation
    reads_wrong = PORT.replace("return state._asdict()", "return {'pos': state.pos + 1}")
    assert reads_wrong != PORT
    fields = _contract(tmp_path, reads_wrong, "observe_consistency")
    # before: ["obs"]
    assert fields[0] == "pos" and "obs" in fields, fields
