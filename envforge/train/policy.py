"""A trained policy: K seeds' parameters stacked, its observation statistics, save and load.

``Policy.actions`` maps observations laid out ``[K, N, *obs_shape]`` (N envs per training seed)
to environment actions; it is jitted once per shape and runs on numpy batches from any Driver.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from envforge.errors import BadInput
from envforge.train.networks import ActionHead, ActorCritic, Params
from envforge.train.obs_norm import ObsNorm, normalize_obs

FORMAT = "envforge-policy-1"


@dataclass
class Policy:
    net: ActorCritic
    params: Params
    """Parameters stacked over K training seeds (leading axis)."""
    norm: ObsNorm | None = None
    """Observation statistics stacked over seeds, when trained with normalize_obs."""
    meta: dict[str, Any] = field(default_factory=dict)
    """Where it came from: env, port, config, training seed."""

    def __post_init__(self) -> None:
        # on the device once (a policy sent back from the training child holds numpy arrays)
        self.params = jax.device_put(self.params)
        self.norm = None if self.norm is None else jax.device_put(self.norm)
        self._act = jax.jit(self._act_impl, static_argnames="deterministic")

    @property
    def num_seeds(self) -> int:
        return int(jax.tree_util.tree_leaves(self.params)[0].shape[0])

    def _act_impl(
        self,
        params: Params,
        norm: ObsNorm | None,
        obs: jax.Array,
        key: jax.Array,
        deterministic: bool,
    ) -> jax.Array:
        def one_seed(p: Params, n: ObsNorm | None, o: jax.Array, k: jax.Array) -> jax.Array:
            x = o.reshape(o.shape[0], -1).astype(jnp.float32)
            if n is not None:
                x = normalize_obs(n, x)
            head_out, _ = self.net.apply(p, x)
            raw = self.net.mode(head_out) if deterministic else self.net.sample(k, p, head_out)
            return self.net.env_action(raw)

        keys = jax.random.split(key, obs.shape[0])
        return jax.vmap(one_seed)(params, norm, obs, keys)

    def actions(self, obs: np.ndarray, key: jax.Array, deterministic: bool = True) -> np.ndarray:
        """Actions ``[K, N, ...]`` for observations ``[K, N, *obs_shape]``."""
        out = self._act(self.params, self.norm, jnp.asarray(obs), key, deterministic=deterministic)
        return np.asarray(out)

    def seed_slice(self, index: int) -> Policy:
        """The policy of one training seed (still with a leading axis of 1)."""
        take = lambda x: x[index : index + 1]  # noqa: E731
        norm = None if self.norm is None else jax.tree_util.tree_map(take, self.norm)
        return Policy(self.net, jax.tree_util.tree_map(take, self.params), norm, dict(self.meta))

    # ---- persistence ----------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Write ``.npz``: every parameter leaf plus a JSON header describing the network."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        leaves = jax.tree_util.tree_leaves(self.params)
        arrays: dict[str, Any] = {f"param_{i}": np.asarray(leaf) for i, leaf in enumerate(leaves)}
        if self.norm is not None:
            arrays.update({f"norm_{k}": np.asarray(v) for k, v in self.norm._asdict().items()})
        header = {
            "format": FORMAT,
            "net": {**asdict(self.net), "head": asdict(self.net.head)},
            "num_seeds": self.num_seeds,
            "meta": self.meta,
        }
        with path.open("wb") as fh:
            arrays["header"] = np.asarray(json.dumps(header))
            np.savez(fh, **arrays)
        return path


def load_policy(path: str | Path) -> Policy:
    path = Path(path)
    if not path.is_file():
        raise BadInput(f"policy file not found: {path}")
    with np.load(path) as data:
        header = json.loads(str(data["header"]))
        if header.get("format") != FORMAT:
            raise BadInput(f"{path}: not an envforge policy (format {header.get('format')!r})")
        net_cfg = dict(header["net"])
        head_cfg = net_cfg.pop("head")
        head = ActionHead(
            kind=head_cfg["kind"],
            n=head_cfg["n"],
            shape=tuple(head_cfg["shape"]),
            low=tuple(head_cfg["low"]),
            high=tuple(head_cfg["high"]),
        )
        net = ActorCritic(
            obs_dim=net_cfg["obs_dim"],
            head=head,
            hidden=tuple(net_cfg["hidden"]),
            activation=net_cfg["activation"],
            one_hot=int(net_cfg.get("one_hot", 0)),
        )
        template = net.init(jax.random.PRNGKey(0))
        treedef = jax.tree_util.tree_structure(template)
        count = len(jax.tree_util.tree_leaves(template))
        leaves = [jnp.asarray(data[f"param_{i}"]) for i in range(count)]
        params = jax.tree_util.tree_unflatten(treedef, leaves)
        norm = None
        if "norm_mean" in data:
            norm = ObsNorm(*(jnp.asarray(data[f"norm_{k}"]) for k in ObsNorm._fields))
    return Policy(net, params, norm, header.get("meta", {}))
