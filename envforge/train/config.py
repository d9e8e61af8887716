"""Typed training and level-4 settings, parsed from the ``[l4]`` table of an env spec.

The ``[l4]`` table is flat: PPO hyperparameters (:class:`PPOConfig` fields) and level-4
settings (:class:`L4Config` fields) side by side. Unknown keys and bad values raise
:class:`SpecError` naming ``l4.<key>``.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from envforge.errors import SpecError
from envforge.spec import EnvSpec


class ConfigValueError(ValueError):
    """A config value out of range: which key, what was expected, what was given."""

    def __init__(self, key: str, expected: str, got: object) -> None:
        self.key = key
        self.expected = expected
        self.got = got
        super().__init__(f"{key}: expected {expected}, got {got!r}")


def _require(ok: bool, key: str, expected: str, got: object) -> None:
    if not ok:
        raise ConfigValueError(key, expected, got)


@dataclass(frozen=True)
class PPOConfig:
    """PPO hyperparameters, shared by the fused JAX trainer and the host-loop trainer."""

    total_timesteps: int = 500_000
    """Environment steps per training seed."""
    num_envs: int = 16
    """Parallel environments per training seed."""
    num_steps: int = 128
    """Steps each environment takes per rollout (rollout length)."""
    update_epochs: int = 4
    """Passes over each rollout batch."""
    num_minibatches: int = 4
    """Minibatches the rollout batch is split into per epoch."""
    learning_rate: float = 2.5e-4
    """Adam step size (start value when annealed)."""
    anneal_lr: bool = True
    """Decay the learning rate linearly to zero over training."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 0.95
    """GAE lambda: bias/variance trade-off of the advantage estimate."""
    clip_coef: float = 0.2
    """PPO ratio clipping range."""
    clip_value_loss: bool = True
    """Clip the value update to the same range around the rollout's value estimates."""
    ent_coef: float = 0.01
    """Entropy bonus weight."""
    vf_coef: float = 0.5
    """Value loss weight."""
    max_grad_norm: float = 0.5
    """Global gradient norm clip."""
    normalize_advantages: bool = True
    """Standardize advantages per minibatch."""
    normalize_obs: bool = False
    """Keep running observation mean/variance and feed the network standardized observations."""
    obs_one_hot: int = 0
    """For an observation that is one discrete index (FrozenLake's 64 cells, Taxi's 500 states):
    the networks see it one-hot in this many inputs instead of as one number (0: off)."""
    hidden: tuple[int, ...] = (64, 64)
    """Hidden layer widths of the actor and of the critic (separate networks)."""
    activation: Literal["tanh", "relu"] = "tanh"
    """Hidden layer activation."""
    bootstrap_truncation: bool = True
    """At a truncation, add gamma * V(final observation) to the reward instead of cutting the return."""

    def __post_init__(self) -> None:
        for key in ("total_timesteps", "num_envs", "num_steps", "update_epochs", "num_minibatches"):
            value = getattr(self, key)
            _require(value >= 1, key, "an integer >= 1", value)
        _require(self.learning_rate > 0, "learning_rate", "a number > 0", self.learning_rate)
        for key in ("gamma", "gae_lambda"):
            value = getattr(self, key)
            _require(0.0 <= value <= 1.0, key, "a number in [0, 1]", value)
        for key in ("clip_coef", "ent_coef", "vf_coef", "max_grad_norm"):
            value = getattr(self, key)
            _require(value >= 0, key, "a number >= 0", value)
        _require(
            all(h >= 1 for h in self.hidden), "hidden", "a list of layer widths >= 1", self.hidden
        )
        _require(self.obs_one_hot >= 0, "obs_one_hot", "an integer >= 0", self.obs_one_hot)
        _require(
            not (self.obs_one_hot and self.normalize_obs),
            "obs_one_hot",
            "0 when normalize_obs is on (an index is not standardized)",
            self.obs_one_hot,
        )
        _require(
            self.batch_size % self.num_minibatches == 0,
            "num_minibatches",
            f"a divisor of num_envs * num_steps = {self.batch_size}",
            self.num_minibatches,
        )
        _require(
            self.total_timesteps >= self.batch_size,
            "total_timesteps",
            f"at least one rollout (num_envs * num_steps = {self.batch_size})",
            self.total_timesteps,
        )

    @property
    def batch_size(self) -> int:
        """Transitions collected per update."""
        return self.num_envs * self.num_steps

    @property
    def minibatch_size(self) -> int:
        return self.batch_size // self.num_minibatches

    @property
    def num_updates(self) -> int:
        """Rollout + update cycles (the budget rounded down to whole rollouts)."""
        return self.total_timesteps // self.batch_size

    @property
    def steps_per_seed(self) -> int:
        """Environment steps actually taken per seed."""
        return self.num_updates * self.batch_size

    def with_timesteps(self, total_timesteps: int) -> PPOConfig:
        """The same hyperparameters with another budget (at least one rollout)."""
        return dataclasses.replace(self, total_timesteps=max(total_timesteps, self.batch_size))


@dataclass(frozen=True)
class L4Config:
    """Level 4 (transfer): training budget, evaluation size and the equivalence test."""

    margin: float
    """Equivalence margin on mean episode return, in return units: |port - ref| < margin."""
    better_than_random: float
    """The trained policy's mean return on the training side must beat a uniform random policy's
    by at least this much (and significantly), or L4 is inconclusive rather than a vacuous pass."""
    ppo: PPOConfig = field(default_factory=PPOConfig)
    """Hyperparameters and step budget of the trainer."""
    seeds: int = 4
    """Training seeds K, trained in one vmapped run."""
    episodes: int = 32
    """Evaluation episodes per training seed and side (N); the verifier's --scale multiplies it."""
    random_episodes: int = 64
    """Episodes of the uniform random policy used by the vacuous-pass guard."""
    alpha: float = 0.05
    """Significance level of the two one-sided tests."""
    deterministic_eval: bool = True
    """Evaluate the greedy policy (argmax / Gaussian mean) rather than sampling actions."""
    eval_max_steps: int | None = None
    """Cap on evaluation episode length (default: the spec's episode_cap)."""
    reverse_timesteps: int | None = None
    """Budget per seed when training on the reference (--both-directions); default total / 10."""
    train_timeout_s: float = 900.0
    """Wall-clock limit of the training child process."""

    def __post_init__(self) -> None:
        _require(self.margin > 0, "margin", "a number > 0 (return units)", self.margin)
        _require(
            self.better_than_random >= 0,
            "better_than_random",
            "a number >= 0",
            self.better_than_random,
        )
        for key in ("seeds", "episodes", "random_episodes"):
            value = getattr(self, key)
            _require(value >= 2, key, "an integer >= 2 (variances need two samples)", value)
        _require(0 < self.alpha < 0.5, "alpha", "a number in (0, 0.5)", self.alpha)
        if self.eval_max_steps is not None:
            _require(
                self.eval_max_steps >= 1, "eval_max_steps", "an integer >= 1", self.eval_max_steps
            )
        if self.reverse_timesteps is not None:
            _require(
                self.reverse_timesteps >= 1,
                "reverse_timesteps",
                "an integer >= 1",
                self.reverse_timesteps,
            )
        _require(self.train_timeout_s > 0, "train_timeout_s", "a number > 0", self.train_timeout_s)

    @property
    def reverse_ppo(self) -> PPOConfig:
        """Hyperparameters for training on the (slow) reference."""
        budget = self.reverse_timesteps or self.ppo.total_timesteps // 10
        return self.ppo.with_timesteps(budget)


# ---- parsing the [l4] table -----------------------------------------------------------------

_REQUIRED = ("margin", "better_than_random")


def _coerce(key: str, annotation: Any, value: Any) -> Any:
    """Check one TOML value against a dataclass field type; returns the typed value."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Union or (origin is not None and type(None) in args):
        inner = [a for a in args if a is not type(None)]
        return _coerce(key, inner[0], value)
    if origin is Literal:
        if value not in args:
            raise ConfigValueError(key, f"one of {list(args)}", value)
        return value
    if annotation is bool:
        if not isinstance(value, bool):
            raise ConfigValueError(key, "true or false", value)
        return value
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigValueError(key, "an integer", value)
        return value
    if annotation is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigValueError(key, "a number", value)
        return float(value)
    if origin is tuple:
        if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        ):
            raise ConfigValueError(key, "a list of integers", value)
        return tuple(value)
    raise TypeError(f"unsupported config field type for {key}: {annotation}")  # pragma: no cover


def _field_types(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.name != "ppo"}


def parse_l4_table(table: dict[str, Any], path: Path | str = "env.toml") -> L4Config:
    """Build an :class:`L4Config` from a raw ``[l4]`` table, or raise :class:`SpecError`."""
    ppo_types = _field_types(PPOConfig)
    l4_types = _field_types(L4Config)
    ppo_values: dict[str, Any] = {}
    l4_values: dict[str, Any] = {}
    for key, value in table.items():
        try:
            if key in ppo_types:
                ppo_values[key] = _coerce(key, ppo_types[key], value)
            elif key in l4_types:
                l4_values[key] = _coerce(key, l4_types[key], value)
            else:
                known = ", ".join(sorted([*ppo_types, *l4_types]))
                raise SpecError(path, f"l4.{key}", f"a known key (one of: {known})", key)
        except ConfigValueError as e:
            raise SpecError(path, f"l4.{e.key}", e.expected, e.got) from None
    for key in _REQUIRED:
        if key not in l4_values:
            raise SpecError(path, f"l4.{key}", "this key to be present (see docs/L4.md)")
    try:
        return L4Config(ppo=PPOConfig(**ppo_values), **l4_values)
    except ConfigValueError as e:
        raise SpecError(path, f"l4.{e.key}", e.expected, e.got) from None


def l4_config(spec: EnvSpec) -> L4Config:
    """The typed level-4 settings of a spec."""
    if not spec.l4:
        raise SpecError(
            spec.root / "env.toml",
            "l4",
            "an [l4] table with at least margin and better_than_random",
        )
    return parse_l4_table(spec.l4, spec.root / "env.toml")
