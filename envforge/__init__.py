"""envforge: port slow RL environments to fast JAX or Rust, and prove the port is the same env."""

import warnings
from typing import Any

__version__ = "0.1.0"


class InProcessPortWarning(UserWarning):
    """``envforge.make`` runs a port's code in the caller's process, outside any sandbox."""


def make(*args: Any, **kwargs: Any) -> Any:
    """A port of an env as an environment: ``envforge.make('pong', target='rust',
    num_envs=64)`` (a ``gymnasium.vector.VectorEnv``), ``envforge.make('pong')`` (gymnax's
    functional API for a JAX port), ``api=`` to choose; the whole list of options is
    ``envforge.envs.make.make``'s.

    The port runs in this process, not in a sandbox: its code (a JAX module imported, a Rust
    or C library loaded) runs as you, with your files, network and credentials. Make only a
    port you trust, such as one envforge verified and you read. Each call says so with an
    ``envforge.InProcessPortWarning``; once you know, silence it with
    ``warnings.filterwarnings("ignore", category=envforge.InProcessPortWarning)``.

    Imported on first use, so ``import envforge`` stays light."""
    from envforge.envs.make import make as make_env

    warnings.warn(
        "envforge.make runs the port's code in this process, outside any sandbox: make only a "
        "port you trust (silence: warnings.filterwarnings('ignore', "
        "category=envforge.InProcessPortWarning))",
        InProcessPortWarning,
        stacklevel=2,
    )
    return make_env(*args, **kwargs)
