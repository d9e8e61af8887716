"""EnvSpec loading: the shipped specs are valid; a malformed one names the file, key and expectation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import PONG_SPEC, ROOT

from envforge.errors import BadInput, SpecError
from envforge.spec import EnvSpec, load_spec


def broken_spec(tmp_path: Path, old: str, new: str) -> Path:
    """pong's env.toml with one exact, unique edit, written beside a copy of pong.c."""
    text = PONG_SPEC.read_text()
    assert text.count(old) == 1, f"edit target occurs {text.count(old)} times: {old!r}"
    (tmp_path / "pong.c").write_text((PONG_SPEC.parent / "pong.c").read_text())
    path = tmp_path / "env.toml"
    path.write_text(text.replace(old, new))
    return path


def spec_error(path: Path) -> SpecError:
    with pytest.raises(SpecError) as info:
        load_spec(path)
    message = str(info.value)
    assert "\n" not in message, "a spec error is one line"
    assert message.startswith(str(path)), message
    return info.value


def test_pong_spec_loads(pong_spec: EnvSpec) -> None:
    assert pong_spec.name == "pong"
    assert pong_spec.reference_kind == "c"
    assert pong_spec.reference_path() == (PONG_SPEC.parent / "pong.c").resolve()
    assert pong_spec.field_names == [
        "paddle_yl",
        "paddle_yr",
        "ball_x",
        "ball_y",
        "ball_vx",
        "ball_vy",
        "score_l",
        "score_r",
        "tick",
        "rng",
    ]
    assert pong_spec.field("rng").np_dtype == np.uint32
    assert pong_spec.field("ball_vy").low == -10.0 and pong_spec.field("ball_vy").high == 10.0
    assert pong_spec.rng.mode == "replicate"
    assert pong_spec.compare.mode == "exact" and pong_spec.compare.strict_float
    assert pong_spec.tolerance("ball_x") == (0.0, 0.0)
    assert pong_spec.observation.shape == (8,)
    assert pong_spec.action.type == "discrete" and pong_spec.action.n == 3
    assert [e.name for e in pong_spec.event] == [
        "ball_returned",
        "point_won",
        "point_lost",
        "vy_capped",
        "game_over",
    ]
    assert [p.name for p in pong_spec.policy] == ["tracker"]
    with pytest.raises(KeyError):
        pong_spec.field("nope")


def test_every_shipped_spec_loads() -> None:
    specs = sorted((ROOT / "references").glob("*/env.toml"))
    assert PONG_SPEC in specs
    for path in specs:
        spec = load_spec(path)
        assert spec.name == path.parent.name
        assert spec.state


def test_directory_is_accepted(pong_spec: EnvSpec) -> None:
    assert load_spec(PONG_SPEC.parent) == pong_spec


def test_expressions_evaluate_on_batches(pong_spec: EnvSpec) -> None:
    before = {f: np.zeros(2, np.float32) for f in pong_spec.field_names}
    after = dict(before, score_r=np.array([0, 1], np.int32), score_l=np.array([21, 0], np.int32))
    won = pong_spec.expression("after.score_r > before.score_r")(before=before, after=after)
    assert won.tolist() == [False, True]
    assert pong_spec.termination is not None
    ended = pong_spec.expression(pong_spec.termination)(before=before, after=after)
    assert ended.tolist() == [True, False]
    obs = np.array([[0.5, 0, 0, 0.1, 0, 0, 0, 0], [0.5, 0, 0, 0.9, 0, 0, 0, 0]])
    action = pong_spec.policy_expression(pong_spec.policy[0].expr)(obs=obs, t=np.zeros(2))
    assert action.tolist() == [1, 2]  # move up to a ball above, down to a ball below


def test_missing_file(tmp_path: Path) -> None:
    error = spec_error(tmp_path / "env.toml")
    assert error.key == "(file)"
    assert isinstance(error, BadInput)


def test_toml_syntax_error(tmp_path: Path) -> None:
    error = spec_error(broken_spec(tmp_path, "episode_cap = 10000", "episode_cap = = 10000"))
    assert error.key == "(syntax)"
    assert "valid TOML" in str(error)


def test_wrong_type_names_the_key(tmp_path: Path) -> None:
    error = spec_error(broken_spec(tmp_path, "episode_cap = 10000", 'episode_cap = "ten"'))
    assert error.key == "episode_cap"
    assert "integer" in error.expected
    assert "'ten'" in str(error)


def test_wrong_type_inside_an_array_of_tables(tmp_path: Path) -> None:
    path = broken_spec(
        tmp_path, 'name = "ball_x"\ndtype = "float32"', 'name = "ball_x"\ndtype = "f16"'
    )
    error = spec_error(path)
    assert error.key == "state[2].dtype"
    assert "float32" in error.expected


def test_unknown_key(tmp_path: Path) -> None:
    error = spec_error(
        broken_spec(tmp_path, "episode_cap = 10000", "episode_cap = 10000\nepisod_cap = 5")
    )
    assert error.key == "episod_cap"
    assert "no such key" in error.expected


def test_unknown_key_in_a_table(tmp_path: Path) -> None:
    error = spec_error(broken_spec(tmp_path, 'mode = "exact"', 'mod = "exact"'))
    assert error.key == "compare.mod"


def test_missing_key(tmp_path: Path) -> None:
    error = spec_error(broken_spec(tmp_path, "episode_cap = 10000 ", "# no cap "))
    assert error.key == "episode_cap"
    assert "present" in error.expected


def test_value_out_of_domain(tmp_path: Path) -> None:
    error = spec_error(broken_spec(tmp_path, "episode_cap = 10000", "episode_cap = 0"))
    assert error.key == "episode_cap"
    assert "greater than 0" in error.expected


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ('name = "paddle_yr"', 'name = "paddle_yl"', "state[1].name"),
        ("low = 0.0\nhigh = 470.0", "low = 471.0\nhigh = 470.0", "state[3].low"),
        ('expr = "after.score_r > before.score_r"', 'expr = "after.nope > 0"', "event[1].expr"),
        ('expr = "terminated"', 'expr = "__import__(1)"', "event[4].expr"),
        ('reference = "pong.c"', 'reference = "pong.f90"', "reference"),
        ('[c]\nstruct = "Pong"\nprefix = "pong"', "", "c"),
        ("n = 3 ", "n = 0 ", "action"),
    ],
    ids=[
        "duplicate_field",
        "low_above_high",
        "unknown_name_in_event",
        "unsafe_expression",
        "unknown_reference_kind",
        "c_reference_without_c_table",
        "discrete_action_without_n",
    ],
)
def test_semantic_errors_name_the_key(tmp_path: Path, old: str, new: str, key: str) -> None:
    assert spec_error(broken_spec(tmp_path, old, new)).key == key
