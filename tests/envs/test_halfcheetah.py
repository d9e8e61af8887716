"""HalfCheetah-v5 (gymnasium on MuJoCo) and its MJX port. Needs the optional extra
``pip install -e ".[mujoco]"``; skipped without it. The reference-side checks are fast; the
ones that compile MJX (about 20-30 s a shape on 2 cores) are marked slow."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")
pytest.importorskip("gymnasium.envs.mujoco.half_cheetah_v5")

from conftest import ROOT  # noqa: E402

from envforge.backends.gymnasium import POOL_MAX, GymnasiumDriver  # noqa: E402
from envforge.backends.jax import JaxDriver  # noqa: E402
from envforge.spec import EnvSpec, load_spec  # noqa: E402
from envforge.verify.compare import compare_transitions  # noqa: E402
from envforge.verify.context import _first_element  # noqa: E402
from envforge.verify.strategies import sample_actions, sample_states  # noqa: E402

SPEC_DIR = ROOT / "references" / "halfcheetah"
PORT_DIR = ROOT / "generated" / "halfcheetah" / "jax"


@pytest.fixture(scope="module")
def spec() -> EnvSpec:
    return load_spec(SPEC_DIR)


@pytest.fixture(scope="module")
def reference(spec: EnvSpec):
    driver = GymnasiumDriver(spec, "HalfCheetah-v5")
    yield driver
    driver.close()


def test_spec_labels_and_joint_limits_come_from_the_model(
    spec: EnvSpec, reference: GymnasiumDriver
) -> None:
    model = reference.envs[0].unwrapped.model
    joint = mujoco.mjtObj.mjOBJ_JOINT
    names = [mujoco.mj_id2name(model, joint, j) for j in range(model.njnt)]
    for field, address in (("qpos", model.jnt_qposadr), ("qvel", model.jnt_dofadr)):
        f = spec.field(field)
        assert f.shape == ((model.nq,) if field == "qpos" else (model.nv,))
        by_element = [names[int(np.flatnonzero(address == k)[0])] for k in range(f.size)]
        assert list(f.labels) == by_element
    low, high = spec.field("qpos").limits(-np.inf, np.inf)
    for j in range(model.njnt):
        if model.jnt_limited[j]:
            k = model.jnt_qposadr[j]
            assert (low[k], high[k]) == tuple(model.jnt_range[j])


def test_reset_states_lie_in_the_spec_ranges(spec: EnvSpec, reference: GymnasiumDriver) -> None:
    state = reference.reset(np.arange(200, dtype=np.uint32))
    for name in ("qpos", "qvel", "qacc_warmstart"):
        low, high = spec.field(name).limits(-np.inf, np.inf)
        assert (state[name] >= low).all() and (state[name] <= high).all()
    assert np.abs(state["qpos"]).max() <= 0.1  # U(-0.1, 0.1) around the zero qpos0
    assert (state["qacc_warmstart"] == 0).all() and (state["time"] == 0).all()


def test_a_batch_larger_than_the_pool_steps_like_single_rows(
    spec: EnvSpec, reference: GymnasiumDriver
) -> None:
    """Rows share pooled envs; MuJoCo's data.qpos is a live view, so each row must be read
    out as a copy before its env serves the next row."""
    rng = np.random.default_rng(3)
    n = POOL_MAX + 6
    state = sample_states(spec, rng, n)
    actions = sample_actions(spec, rng, n)
    batched = reference.step(state, actions)
    for i in (0, 1, n - 1):
        single = reference.step({k: v[i : i + 1] for k, v in state.items()}, actions[i : i + 1])
        for name in ("qpos", "qvel", "qacc_warmstart"):
            np.testing.assert_array_equal(batched.state[name][i], single.state[name][0])


# ---- the MJX port (compiles: slow) ----------------------------------------------------


def _port(tmp_path: Path, old: str = "", new: str = "") -> JaxDriver:
    spec = load_spec(SPEC_DIR)
    if not old:
        return JaxDriver(spec, PORT_DIR)
    text = (PORT_DIR / "halfcheetah.py").read_text()
    assert text.count(old) == 1
    shutil.copy(PORT_DIR / "halfcheetah.py", tmp_path / "halfcheetah.py")
    (tmp_path / "halfcheetah.py").write_text(text.replace(old, new))
    return JaxDriver(spec, tmp_path)


def _one_step(spec: EnvSpec, reference: GymnasiumDriver, port: JaxDriver, n: int = 64):
    rng = np.random.default_rng(7)
    state = sample_states(spec, rng, n)
    actions = sample_actions(spec, rng, n)
    ref, got = reference.step(state, actions), port.step(state, actions)
    return ref, got, compare_transitions(spec, ref, got, state, actions)


def test_the_ports_step_calls_no_lapack_kernel() -> None:
    """jaxlib's batched LAPACK Cholesky can deadlock XLA's pool on 2 cores (envforge/kit/xla_cpu.py):
    the port lowers MJX's factorizations to XLA's own ops instead."""
    pytest.importorskip("mujoco.mjx")
    import jax
    import jax.numpy as jnp

    from envforge.backends.jax import load_module

    m = load_module(ROOT / "generated" / "halfcheetah" / "jax" / "halfcheetah.py")
    state = jax.vmap(m.reset)(jnp.arange(2, dtype=jnp.uint32))
    text = jax.jit(jax.vmap(m.step)).lower(state, jnp.zeros((2, 6))).as_text()
    assert "cholesky" in text  # the factorization is still there, as XLA's op
    assert not re.findall(r"custom_call @(\w*lapack\w*)", text)


@pytest.mark.slow
def test_port_steps_like_the_reference(
    spec: EnvSpec, reference: GymnasiumDriver, tmp_path: Path
) -> None:
    pytest.importorskip("mujoco.mjx")
    port = _port(tmp_path)
    ref, got, diff = _one_step(spec, reference, port)
    assert diff.first() is None
    assert max(float(e.max()) for e in diff.element_err.values()) < 1e-6
    seeds = np.arange(64, dtype=np.uint32)
    np.testing.assert_allclose(port.observe(ref.state), reference.observe(ref.state), atol=1e-12)
    assert port.reset(seeds)["qpos"].std() > 0.03  # noise drawn, not zeros


@pytest.mark.slow
@pytest.mark.parametrize(
    ("old", "new", "named"),
    [
        # one body mass 5% heavier (the back thigh): a joint velocity is named
        (
            "MODEL = mjx.put_model(MJ_MODEL)",
            "MJ_MODEL.body_mass[2] *= 1.05\nMODEL = mjx.put_model(MJ_MODEL)",
            "qvel[",
        ),
        ("CTRL_COST_WEIGHT = 0.1", "CTRL_COST_WEIGHT = 0.11", "reward"),
    ],
)
def test_mutated_ports_fail_one_step_naming_the_element(
    spec: EnvSpec, reference: GymnasiumDriver, tmp_path: Path, old: str, new: str, named: str
) -> None:
    pytest.importorskip("mujoco.mjx")
    port = _port(tmp_path, old, new)
    ref, got, diff = _one_step(spec, reference, port)
    i = diff.first()
    assert i is not None
    keys = diff.keys_at(i)
    if named == "reward":
        assert keys == ["reward"]
    else:
        element = _first_element(spec, ref, got, "qvel", i)
        assert element is not None and element.startswith(named) and "(" in element


# ---- level 4 -------------------------------------------------------------------------------


def test_l4_table_uses_the_papers_margin_and_a_gaussian_policy(spec: EnvSpec) -> None:
    from envforge.train.config import l4_config
    from envforge.train.ppo import network_for

    cfg = l4_config(spec)
    assert cfg.margin == 100.0
    assert cfg.deterministic_eval  # greedy: the Gaussian's mean
    net = network_for(spec, cfg.ppo)
    assert net.head.kind == "continuous" and net.head.size == 6


@pytest.mark.slow  # about 30-40 min on 2 loaded cores: MJX inside the fused PPO compiles for minutes
def test_l4_passes_for_the_mjx_port() -> None:
    pytest.importorskip("mujoco.mjx")
    from envforge.verify.context import VerifyOptions
    from envforge.verify.runner import verify

    level = verify(load_spec(SPEC_DIR), PORT_DIR, [4], VerifyOptions()).levels[0]
    assert level.status == "pass", level.summary
    direction = level.stats["directions"][0]
    assert direction["beats_random"] and direction["tost"]["equivalent"]
    assert -100.0 < direction["tost"]["ci_low"] <= direction["tost"]["ci_high"] < 100.0
