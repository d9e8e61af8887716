"""envforge: port slow RL environments to fast JAX or Rust, and prove the port is the same env."""

from typing import Any

__version__ = "0.1.0"


def make(*args: Any, **kwargs: Any) -> Any:
    """``envforge.make('pong', target='rust', num_envs=64)``: see ``envforge.envs.make.make``.
    Imported on first use, so ``import envforge`` stays light."""
    from envforge.envs.make import make as make_env

    return make_env(*args, **kwargs)
