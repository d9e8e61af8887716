"""Train on a JAX port away from the caller: generated code that crashes, hangs or eats memory
while tracing or training becomes a typed DriverFailure, not a dead verifier.

``trained_payload`` imports the port, runs the fused trainer and returns plain arrays
(parameters, observation statistics, learning curve, timings); ``training_result`` rebuilds
the Policy from them. Verification (L4) runs ``trained_payload`` inside the sandbox the user
chose (``envforge/sandbox/jobs.py``); ``train_port_isolated`` runs it in a plain child process,
for ``--sandbox none`` and for ``envforge train`` on a user's own port (the one deliberate
exception to "every port runs sandboxed").
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import signal
import tempfile
import time
import traceback
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import jax
import numpy as np

from envforge.backends.frames import FrameClosed, FrameError, FrameTimeout, FrameTooLong, recv_frame
from envforge.errors import DriverCrashed, DriverRaised, DriverTimeout
from envforge.spec import EnvSpec
from envforge.train.config import PPOConfig
from envforge.train.obs_norm import ObsNorm
from envforge.train.policy import Policy
from envforge.train.ppo import TrainResult, network_for


def trained_payload(port: str, spec: EnvSpec, cfg: PPOConfig, seeds: int, seed: int) -> dict:
    """Import the port, train on it, and return the result as plain data (run where the port
    may run: a sandboxed job, or the child process of ``train_port_isolated``)."""
    from envforge.train.port_env import load_port
    from envforge.train.ppo import train_fused

    result = train_fused(load_port(port, spec.name), spec, cfg, seeds=seeds, seed=seed)
    norm = None if result.policy.norm is None else jax.device_get(result.policy.norm)._asdict()
    return {
        "params": jax.device_get(result.policy.params),
        "norm": norm,
        "meta": result.policy.meta,
        "episode_returns": np.asarray(result.episode_returns),
        "jit_s": float(result.jit_s),
        "train_s": float(result.train_s),
        "env_steps": int(result.env_steps),
    }


def training_result(payload: Any, spec: EnvSpec, cfg: PPOConfig) -> TrainResult:
    """The TrainResult that ``trained_payload`` described; a payload of another shape (the
    port's side sent it) is a DriverRaised of the port's training."""
    try:
        norm = None if payload["norm"] is None else ObsNorm(**payload["norm"])
        policy = Policy(network_for(spec, cfg), payload["params"], norm, dict(payload["meta"]))
        return TrainResult(
            policy=policy,
            episode_returns=np.asarray(payload["episode_returns"], dtype=np.float64),
            jit_s=float(payload["jit_s"]),
            train_s=float(payload["train_s"]),
            env_steps=int(payload["env_steps"]),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise DriverRaised(
            "port", "train", f"sent a training result of no known form: {e}"
        ) from None


def _train(
    port: str,
    spec: EnvSpec,
    cfg: PPOConfig,
    seeds: int,
    seed: int,
    env: dict[str, str],
    conn: Connection,
    log_path: str,
) -> None:
    os.setpgrp()
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    import faulthandler

    faulthandler.enable()
    os.environ.update(env)
    try:
        conn.send(("ok", trained_payload(port, spec, cfg, seeds, seed)))
    except BaseException as e:  # noqa: BLE001 - everything goes back to the parent
        conn.send(("raise", type(e).__name__, str(e), traceback.format_exc()))


REPLY_CAP = 256 * 2**20
"""The trained payload (parameters, statistics, curve) is far smaller; a larger header is a lie."""


def _partial(e: FrameError) -> str:
    return f"; {e.got:,} of {e.size:,} bytes of its reply had come" if e.size else ""


def _tail(path: str, limit: int = 2000) -> str:
    try:
        return Path(path).read_text(errors="replace")[-limit:]
    except OSError:
        return ""


def train_port_isolated(
    port: Path,
    spec: EnvSpec,
    cfg: PPOConfig,
    seeds: int,
    seed: int = 0,
    timeout_s: float = 900.0,
    env: dict[str, str] | None = None,
) -> TrainResult:
    """:func:`envforge.train.ppo.train_fused` in a child process, with a wall-clock limit."""
    ctx = mp.get_context("spawn")
    parent_conn, child_conn = ctx.Pipe(duplex=False)
    fd, log_path = tempfile.mkstemp(prefix="envforge-train-", suffix=".log")
    os.close(fd)
    args = (str(port), spec, cfg, seeds, seed, dict(env or {}), child_conn, log_path)
    proc = ctx.Process(target=_train, args=args, daemon=True)
    proc.start()
    child_conn.close()
    deadline = time.monotonic() + timeout_s
    os.set_blocking(parent_conn.fileno(), False)
    try:
        try:
            data = recv_frame(parent_conn.fileno(), deadline, REPLY_CAP)
        except FrameTimeout as e:
            raise DriverTimeout(
                "port",
                "train",
                f"training did not finish within {timeout_s:g} s (killed{_partial(e)})",
                _tail(log_path),
            ) from None
        except FrameTooLong as e:
            raise DriverCrashed(
                "port", "train", f"its reply announced {e.size:,} bytes (killed)", _tail(log_path)
            ) from None
        except (FrameClosed, OSError):
            proc.join(5)
            code = proc.exitcode
            how = (
                f"signal {signal.Signals(-code).name}"
                if code is not None and code < 0
                else f"exit code {code}"
            )
            raise DriverCrashed(
                "port", "train", f"training process died ({how})", _tail(log_path)
            ) from None
        # a plain child of --sandbox none or `envforge train`: the port already runs as this user
        reply = pickle.loads(data)
    finally:
        if proc.is_alive() and proc.pid is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                proc.kill()
        proc.join(5)
        parent_conn.close()
        Path(log_path).unlink(missing_ok=True)
    if reply[0] != "ok":
        _, type_name, message, tb = reply
        raise DriverRaised("port", "train", f"raised {type_name}: {message}", tb)
    return training_result(reply[1], spec, cfg)
