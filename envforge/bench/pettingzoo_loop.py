"""The bench's reference loop for a PettingZoo AEC env: ``n`` envs, one move each per call,
as a user's ``agent_iter`` loop makes it (``step`` then ``last``); an env whose game ended is
reset. A step is one agent's move, so steps/s are every agent's moves together, as the port's
row counts them. Actions are uniform, illegal ones included (what the port's row plays); the
``mlp`` policy reads the moving agent's observation."""

from __future__ import annotations

from typing import Any

import numpy as np

from envforge.backends.pettingzoo import load_factory, split_observation
from envforge.bench.jax_loop import mlp_params
from envforge.bench.measure import BenchSettings, Measurement, calls_run, interleaved
from envforge.bench.python_loop import mlp_actions
from envforge.spec import EnvSpec


class _Games:
    def __init__(self, spec: EnvSpec, n: int, policy: str, hidden: int) -> None:
        from pettingzoo.utils.env_logger import EnvLogger

        EnvLogger.suppress_output()
        make = load_factory(spec.reference.split(":", 1)[1])
        self.spec, self.policy = spec, policy
        self.envs = [make(**spec.options) for _ in range(n)]
        for i, env in enumerate(self.envs):
            env.reset(seed=i)
        # the mlp sees the joint observation's shape: the moving agent's part, zeros elsewhere
        self.obs = np.zeros((n, *spec.observation.shape), np.float32)
        self.params = mlp_params(spec, hidden)
        self.rng = np.random.default_rng(0)
        self.total = 0.0

    def step(self) -> None:
        n = len(self.envs)
        if self.policy == "mlp":
            actions = mlp_actions(self.spec, self.params, self.obs)
        else:
            actions = self.rng.integers(int(self.spec.action.n or 1), size=n)
        for i, env in enumerate(self.envs):
            env.step(int(actions[i]))
            observation, reward, terminated, truncated, _ = env.last()
            self.total += float(reward)
            if terminated or truncated:
                env.reset()
                observation = env.observe(env.agent_selection)
            seat = env.possible_agents.index(env.agent_selection)
            self.obs[i, seat] = np.asarray(split_observation(observation)[0], np.float32)


def measure_pettingzoo(spec: EnvSpec, settings: BenchSettings) -> list[Measurement]:
    label = f"{spec.reference} (reference, agent_iter loop)"
    out: list[Measurement] = []
    jobs: list[tuple[Measurement, Any]] = []
    for policy in settings.policies:
        for batch in settings.batch_sizes:
            m = Measurement(label, "reference", policy, batch)
            out.append(m)
            if batch > settings.max_python_batch:
                m.note = f"not run: above --max-python-batch {settings.max_python_batch}"
                continue
            games = _Games(spec, batch, policy, settings.hidden)
            jobs.append((m, calls_run(games.step, batch, settings.min_run_s)))
    interleaved(jobs, settings.repeats)
    return out
