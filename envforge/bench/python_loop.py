"""Python references (gymnasium ids, ``file.py:Class``) stepped the way users step them.

A list of real env objects, one per batch row, stepped in a Python loop with auto-reset, as
gymnasium's ``SyncVectorEnv`` does; actions come from numpy (uniform, or a batched numpy MLP
on the stacked observations).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from envforge.bench.jax_loop import mlp_params
from envforge.bench.measure import BenchSettings, Measurement, calls_run, interleaved
from envforge.errors import BadInput
from envforge.spec import EnvSpec


def env_factory(spec: EnvSpec) -> Callable[[], Any]:
    """A no-argument constructor for one reference env (with gymnasium's own wrappers)."""
    kind = spec.reference_kind
    if kind == "gymnasium":
        from envforge.backends.gym_ids import make_env

        env_id = spec.reference.split(":", 1)[1]
        return lambda: make_env(env_id, spec.options)
    if kind == "python":
        from envforge.backends.python import reference_class

        path = spec.reference_path()
        cls = reference_class(spec.reference if path is None else f"{path}:{spec.class_name}")
        return lambda: cls(**spec.options)
    raise BadInput(f"{spec.name}: no Python loop for a {kind} reference")


def mlp_actions(spec: EnvSpec, params: dict[str, np.ndarray], obs: np.ndarray) -> np.ndarray:
    """The bench's MLP policy in numpy: argmax (discrete, int32) or tanh squashed into the
    action bounds (continuous), for a batch of observations."""
    n = len(obs)
    out = np.tanh(obs.reshape(n, -1) @ params["w1"] + params["b1"]) @ params["w2"] + params["b2"]
    if spec.action.type == "discrete":
        return np.argmax(out, axis=-1).astype(np.int32)
    u = 0.5 * (np.tanh(out) + 1.0)
    low, high = (b.reshape(-1) for b in spec.action.bounds())
    return (low + u * (high - low)).astype(np.float32).reshape(n, *spec.action.shape)


class _Batch:
    """``n`` envs stepped one after another, each reset when its episode ends."""

    def __init__(self, spec: EnvSpec, make: Callable[[], Any], n: int, policy: str, hidden: int):
        self.spec = spec
        self.envs = [make() for _ in range(n)]
        self.obs = np.stack([self.row(env.reset(seed=i)[0]) for i, env in enumerate(self.envs)])
        self.rng = np.random.default_rng(0)
        self.policy = policy
        self.params = mlp_params(spec, hidden)
        self.total = 0.0

    def actions(self) -> np.ndarray:
        spec, n = self.spec, len(self.envs)
        if self.policy == "mlp":
            return mlp_actions(spec, self.params, self.obs)
        if spec.action.type == "discrete":
            assert spec.action.n is not None
            return self.rng.integers(spec.action.n, size=n)
        u = self.rng.random((n, int(np.prod(spec.action.shape or (1,)))))
        low, high = (b.reshape(-1) for b in spec.action.bounds())
        return (low + u * (high - low)).astype(np.float32).reshape(n, *spec.action.shape)

    def step(self) -> None:
        actions = self.actions()
        discrete = self.spec.action.type == "discrete"
        for i, env in enumerate(self.envs):
            a = int(actions[i]) if discrete else actions[i]
            obs, reward, terminated, truncated, _ = env.step(a)
            self.total += float(reward)
            if terminated or truncated:
                obs, _ = env.reset()
            self.obs[i] = self.row(obs)

    def row(self, obs: Any) -> np.ndarray:
        """The observation the MLP reads: a nested one's named parts as one flat row."""
        layout = self.spec.observation.layout
        flat = obs if layout is None else layout.flatten(obs)
        return np.asarray(flat, np.float32)


def measure_python(spec: EnvSpec, settings: BenchSettings) -> list[Measurement]:
    make = env_factory(spec)
    label = f"{spec.reference} (reference, Python loop)"
    out, jobs = [], []
    for policy in settings.policies:
        for batch in settings.batch_sizes:
            m = Measurement(label, "reference", policy, batch)
            out.append(m)
            if batch > settings.max_python_batch:
                m.note = f"not run: above --max-python-batch {settings.max_python_batch}"
                continue
            envs = _Batch(spec, make, batch, policy, settings.hidden)
            jobs.append((m, calls_run(envs.step, batch, settings.min_run_s)))
    interleaved(jobs, settings.repeats)
    return out
