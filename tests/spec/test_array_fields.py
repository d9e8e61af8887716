"""Array-valued canonical fields: per-element ranges, tolerances and labels in the spec, the
strategies that draw inside each element's range, findings and error tables that name the
element (``qvel[3] (bthigh)``), and dotted attributes on the reference (``data.qpos``)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings

from envforge.backends.attrs import AttrMap
from envforge.backends.base import Transition
from envforge.errors import SpecError
from envforge.spec import EnvSpec, load_spec
from envforge.verify.compare import compare_states, compare_transitions
from envforge.verify.context import _first_element
from envforge.verify.episodes import Tally
from envforge.verify.strategies import field_strategy, sample_states

LOW = [-10.0, -0.5, -0.4, -1.0]
HIGH = [10.0, 0.5, 0.8, -0.2]  # the last element's range excludes 0
LABELS = ["rootx", "rootz", "bthigh", "bshin"]


def make_spec(**field: Any) -> EnvSpec:
    qvel = {
        "name": "qvel",
        "dtype": "float64",
        "shape": [4],
        "low": LOW,
        "high": HIGH,
        "labels": LABELS,
        "attr": "data.qvel",
        **field,
    }
    return EnvSpec.model_validate(
        {
            "name": "arrays",
            "reference": "gymnasium:Arrays-v0",
            "episode_cap": 10,
            "observation": {"shape": [4], "low": -1.0, "high": 1.0},
            "action": {"type": "discrete", "n": 2},
            "state": [qvel, {"name": "t", "dtype": "int32", "low": 0, "high": 9, "attr": "t"}],
            "rng": {"mode": "sync"},
            "compare": {"mode": "tolerance", "atol": 1e-3},
        }
    )


def test_per_element_ranges_tolerances_and_labels_load(tmp_path: Path) -> None:
    spec = make_spec(atol=[1e-3, 1e-6, 1e-3, 1e-3])
    f = spec.field("qvel")
    low, high = f.limits(-np.inf, np.inf)
    assert low.tolist() == LOW and high.tolist() == HIGH
    atol, rtol = spec.tolerance("qvel")
    assert np.asarray(atol).tolist() == [1e-3, 1e-6, 1e-3, 1e-3] and rtol == 0.0
    assert f.element_name(2) == "qvel[2] (bthigh)"
    assert spec.field("t").element_name(0) == "t"


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ("low = [-1.0, -2.0, -3.0]", "low = [-1.0, -2.0]", "state[0].low"),
        ('labels = ["a", "b", "c"]', 'labels = ["a", "b"]', "state[0].labels"),
        ("atol = [0.1, 0.1, 0.1]", "atol = [0.1]", "state[0].atol"),
        ("high = [1.0, 2.0, 3.0]", "high = [1.0, 2.0, -4.0]", "state[0].low"),
    ],
)
def test_per_element_lists_must_fit_the_shape(tmp_path: Path, old: str, new: str, key: str) -> None:
    text = """
name = "arrays"
reference = "gymnasium:Arrays-v0"
episode_cap = 10
[observation]
shape = [3]
low = -1.0
high = 1.0
[action]
type = "discrete"
n = 2
[[state]]
name = "x"
dtype = "float64"
shape = [3]
low = [-1.0, -2.0, -3.0]
high = [1.0, 2.0, 3.0]
atol = [0.1, 0.1, 0.1]
labels = ["a", "b", "c"]
attr = "x"
[rng]
mode = "sync"
"""
    path = tmp_path / "env.toml"
    path.write_text(text)
    load_spec(path)  # the unedited spec is valid
    path.write_text(text.replace(old, new))
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert key in str(info.value)


def test_sampled_states_keep_each_element_in_its_own_range() -> None:
    spec = make_spec()
    qvel = sample_states(spec, np.random.default_rng(0), 20000)["qvel"]
    assert (qvel >= np.array(LOW)).all() and (qvel <= np.array(HIGH)).all()
    # every element's own ends are drawn (boundaries over-weighted), and 0 only where inside
    for j in range(4):
        assert (qvel[:, j] == LOW[j]).any() and (qvel[:, j] == HIGH[j]).any()
    assert (qvel[:, 0] == 0.0).any() and not (qvel[:, 3] == 0.0).any()
    assert qvel[:, 0].std() > 10 * qvel[:, 1].std()  # a shared range would give equal spreads


@settings(max_examples=200, database=None)
@given(field_strategy(make_spec().field("qvel")))
def test_hypothesis_draws_keep_each_element_in_its_own_range(value: np.ndarray) -> None:
    assert value.shape == (4,)
    assert (value >= np.array(LOW)).all() and (value <= np.array(HIGH)).all()


def transitions(spec: EnvSpec, ref_qvel: np.ndarray, port_qvel: np.ndarray) -> tuple:
    def tr(qvel: np.ndarray) -> Transition:
        n = len(qvel)
        return Transition(
            state={"qvel": qvel, "t": np.zeros(n, np.int32)},
            obs=np.zeros((n, 4)),
            reward=np.zeros(n),
            terminated=np.zeros(n, bool),
            truncated=np.zeros(n, bool),
        )

    return tr(ref_qvel), tr(port_qvel)


def test_per_element_tolerance_decides_per_element() -> None:
    spec = make_spec(atol=[1e-3, 1e-6, 1e-3, 1e-3])
    ref = np.zeros((2, 4))
    port = ref.copy()
    port[0, 0] = 1e-4  # inside element 0's tolerance
    port[1, 1] = 1e-4  # outside element 1's
    diff = compare_states(spec, {"qvel": ref, "t": np.zeros(2)}, {"qvel": port, "t": np.zeros(2)})
    assert diff.ok["qvel"].tolist() == [True, False]
    assert diff.element_err["qvel"].tolist() == [1e-4, 1e-4, 0.0, 0.0]


def test_finding_names_the_element_outside_tolerance_with_its_label() -> None:
    """In tolerance mode every element may differ a little: the element named is the first
    outside the tolerance (the old rule named the first that differs at all, qvel[0])."""
    spec = make_spec()
    ref_q = np.array([[1.0, 0.2, 0.3, -0.5]])
    port_q = ref_q + np.array([[1e-5, 2e-5, 0.0, 0.3]])
    ref, port = transitions(spec, ref_q, port_q)
    diff = compare_transitions(spec, ref, port)
    assert diff.keys_at(0) == ["qvel", "obs"] or diff.keys_at(0) == ["qvel"]
    assert _first_element(spec, ref, port, "qvel", 0) == "qvel[3] (bshin)"
    exact = make_spec(labels=[]).model_copy(
        update={"compare": spec.compare.model_copy(update={"mode": "exact"})}
    )
    assert _first_element(exact, ref, port, "qvel", 0) == "qvel[0]"


def test_rollout_error_table_is_per_element() -> None:
    spec = make_spec()
    tally = Tally()
    ref = {"qvel": np.zeros((3, 4)), "t": np.zeros(3, np.int32)}
    for k, err in enumerate((2e-4, 5e-4)):
        port = {"qvel": np.zeros((3, 4)), "t": np.zeros(3, np.int32)}
        port["qvel"][k, k + 1] = err
        tally.errors(compare_states(spec, ref, port))
    table = tally.element_table(spec)
    assert table == {
        "qvel[0] (rootx)": 0.0,
        "qvel[1] (rootz)": 2e-4,
        "qvel[2] (bthigh)": 5e-4,
        "qvel[3] (bshin)": 0.0,
    }


class LiveData:
    """Like MuJoCo's MjData: ``qvel`` is a fixed buffer that assignment copies into, and
    reading it gives a view of live memory."""

    def __init__(self) -> None:
        self._qvel = np.zeros(4)

    @property
    def qvel(self) -> np.ndarray:
        return self._qvel

    @qvel.setter
    def qvel(self, value: np.ndarray) -> None:
        self._qvel[:] = value


def test_dotted_attributes_are_read_as_copies() -> None:
    spec = make_spec()
    attrs = AttrMap(spec, allow_elapsed_steps=False)
    env = SimpleNamespace(data=LiveData(), t=0)
    state = {
        "qvel": np.array([[1.0, 0.1, 0.2, -0.3], [2.0, 0.2, 0.3, -0.4]]),
        "t": np.array([3, 4]),
    }
    attrs.write(env, state, 0)
    first = attrs.read(env)
    assert first["qvel"].tolist() == [1.0, 0.1, 0.2, -0.3] and int(first["t"]) == 3
    attrs.write(env, state, 1)  # the same (pooled) env serves the next row
    assert first["qvel"].tolist() == [1.0, 0.1, 0.2, -0.3]  # not a view of the live buffer
    assert attrs.read(env)["qvel"].tolist() == [2.0, 0.2, 0.3, -0.4]


def test_reset_distribution_finding_names_the_element() -> None:
    """Sync mode compares reset distributions element by element: the finding names the
    element whose distribution differs, and summarizes that element (not the whole array)."""
    from envforge.verify.reset_checks import distribution_finding

    spec = make_spec()
    rng = np.random.default_rng(1)
    n = 2000
    ref = {"qvel": rng.uniform(-0.1, 0.1, (n, 4)), "t": np.zeros(n, np.int32)}
    port = {"qvel": rng.uniform(-0.1, 0.1, (n, 4)), "t": np.zeros(n, np.int32)}
    ctx = SimpleNamespace(spec=spec, localize=lambda keys, phase=None: ([], []))
    assert distribution_finding(ctx, ref, port, "reset.distribution", "{f}") is None  # type: ignore[arg-type]
    port["qvel"][:, 2] += 0.05
    finding = distribution_finding(ctx, ref, port, "reset.distribution", "{f}")  # type: ignore[arg-type]
    assert finding is not None and finding.message.startswith("qvel[2] (bthigh)")
    assert abs(finding.actual["qvel"]["mean"] - finding.expected["qvel"]["mean"] - 0.05) < 0.01
