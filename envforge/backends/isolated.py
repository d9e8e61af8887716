"""Run a Driver in a child process, so a segfault, abort or hang cannot take the verifier down.

The child builds the driver from a picklable :class:`Recipe`, then serves ``reset``/``step``/
``observe`` calls over a pipe. Every call has a time limit; on a crash or timeout the whole
child process group is killed and the caller gets a typed :class:`DriverFailure` with the
signal and the tail of the child's stderr (Python's faulthandler writes the stack there).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import select
import signal
import tempfile
import threading
import traceback
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np

from envforge.backends.base import Driver, State, Transition
from envforge.backends.coverage import LineCoverage
from envforge.backends.recipe import Recipe, build_driver
from envforge.errors import (
    ContractViolation,
    DriverCrashed,
    DriverFailure,
    DriverRaised,
    DriverTimeout,
)
from envforge.owned_names import owned_prefix
from envforge.rng.draws import DrawLog
from envforge.untrusted_files import read_tail

_FAILURES = {
    "ContractViolation": ContractViolation,
    "DriverCrashed": DriverCrashed,
    "DriverTimeout": DriverTimeout,
}


def _message(e: BaseException) -> str:
    """What the parent puts after its own ``side call:`` (a DriverFailure has one already)."""
    return e.message if isinstance(e, DriverFailure) else str(e)


def _end_with_host(conn: Connection) -> None:
    """Kill this server's process group when the host's end of ``conn`` closes. The host
    closes it only after asking the server to close, or by dying: a host killed with
    ``kill -9`` cannot stop a port busy in its own code, and nobody else would."""

    def watch() -> None:
        poller = select.poll()
        poller.register(conn.fileno(), select.POLLRDHUP)
        while True:
            for _, events in poller.poll():
                if events & (select.POLLRDHUP | select.POLLHUP | select.POLLERR):
                    os.killpg(os.getpgrp(), signal.SIGKILL)

    threading.Thread(target=watch, name="end-with-host", daemon=True).start()


def serve_recipe(recipe: Recipe, conn: Connection, log_path: str) -> None:
    """A driver process's main: build the recipe's driver and answer calls on ``conn`` until the
    host closes it (the isolated driver's child, and the sandboxed server's body)."""
    os.setpgrp()  # own process group: a kill takes compilers and grandchildren too
    _end_with_host(conn)
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    import faulthandler

    faulthandler.enable()
    for key, value in recipe.env.items():
        os.environ[key] = value
    try:
        driver = build_driver(recipe)
        conn.send(
            (
                "ok",
                {
                    "describe": driver.describe(),
                    "sources": [str(p) for p in driver.source_files()],
                    "fingerprint": driver.reset_fingerprint(),
                },
            )
        )
    except BaseException as e:  # noqa: BLE001 - everything goes back to the parent
        conn.send(("raise", type(e).__name__, _message(e), traceback.format_exc()))
        return
    while True:
        try:
            method, args = conn.recv()
        except EOFError:
            return
        if method == "close":
            driver.close()
            return
        try:
            result = getattr(driver, method)(*args)
            conn.send(("ok", result))
        except BaseException as e:  # noqa: BLE001
            conn.send(("raise", type(e).__name__, _message(e), traceback.format_exc()))


class IsolatedDriver(Driver):
    """A Driver proxy whose implementation lives in a child process."""

    _log_seen = 0
    """Bytes of the child's log already handed out with a failure (see ``_stderr_new``)."""

    def __init__(
        self, recipe: Recipe, timeout_s: float = 120.0, build_timeout_s: float = 600.0
    ) -> None:
        super().__init__(recipe.spec)
        self.side = recipe.side
        self.recipe = recipe
        self.timeout_s = timeout_s
        ctx = mp.get_context("spawn")
        self._conn, child_conn = ctx.Pipe()
        # named after its owner: a verifier killed before close() leaves it to the next sweep
        fd, self._log_path = tempfile.mkstemp(prefix=owned_prefix(recipe.side), suffix=".log")
        os.close(fd)
        self._proc = ctx.Process(
            target=serve_recipe, args=(recipe, child_conn, self._log_path), daemon=True
        )
        self._proc.start()
        child_conn.close()
        info = self._call_raw("build", build_timeout_s)
        self._describe = info["describe"]
        self._sources = [Path(p) for p in info["sources"]]
        fingerprint = info.get("fingerprint")
        self._fingerprint = fingerprint if isinstance(fingerprint, str) else None

    # ---- plumbing ---------------------------------------------------------------------
    def _stderr_tail(self, limit: int = 2000) -> str:
        return read_tail(Path(self._log_path), limit)

    def _stderr_new(self, limit: int = 600) -> str:
        """What the child wrote since the last failure read it: a Rust panic's location is
        printed there by its panic hook, while PyO3 raises only the panic's message. Every
        panic raises, so nothing older than the last failed call is in it."""
        try:
            size = os.lstat(self._log_path).st_size  # a sandboxed port may have replaced it
        except OSError:
            return ""
        seen, self._log_seen = self._log_seen, size
        # from its start: a panic's location comes first, before any RUST_BACKTRACE stack
        return read_tail(Path(self._log_path), limit, start=seen) if size > seen else ""

    def _kill(self) -> None:
        if self._proc.is_alive() and self._proc.pid is not None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self._proc.kill()
        self._proc.join(5)

    def _call_raw(self, method: str, timeout: float, *args: Any) -> Any:
        # No liveness check first: it cost a waitpid per call here and a docker API round trip
        # per call in a container. A dead child's end of the connection is closed, so the send
        # or the reply read below reports the crash with its exit status.
        try:
            if method != "build":
                self._conn.send((method, args))
            ready = self._conn.poll(timeout)
        except (BrokenPipeError, EOFError, OSError):
            ready = True  # fall through to recv, which reports the crash
        if not ready:
            self._kill()
            raise DriverTimeout(
                self.side,
                method,
                f"did not return within {timeout:g} s (killed)",
                self._stderr_tail(),
            )
        try:
            reply = self._conn.recv()
        except (EOFError, OSError):
            self._proc.join(5)
            code = self._proc.exitcode
            how = f"exit code {code}"
            if code is not None and code < 0:
                how = f"signal {signal.Signals(-code).name}"
            raise DriverCrashed(
                self.side, method, f"process died ({how})", self._stderr_tail()
            ) from None
        if reply[0] == "ok":
            return reply[1]
        _, type_name, message, tb = reply
        cls = _FAILURES.get(type_name, DriverRaised)
        if cls is DriverRaised:
            message = f"raised {type_name}: {message}"
            written = self._stderr_new()
            tb += f"\nstderr since the last failure:\n{written}" if written.strip() else ""
        raise cls(self.side, method if method != "build" else "build", message, tb)

    def _call(self, method: str, *args: Any) -> Any:
        return self._call_raw(method, self.timeout_s, *args)

    # ---- Driver API -------------------------------------------------------------------
    def reset(self, seeds: np.ndarray) -> State:
        result: State = self._call("reset", seeds)
        return result

    def step(self, state: State, actions: np.ndarray) -> Transition:
        result: Transition = self._call("step", state, actions)
        return result

    def step_sequence(
        self, state: State, actions: np.ndarray, until_done: bool = False
    ) -> list[Transition]:
        result: list[Transition] = self._call("step_sequence", state, actions, until_done)
        return result

    def observe(self, state: State) -> np.ndarray:
        result: np.ndarray = self._call("observe", state)
        return result

    def step_draws(
        self, state: State, actions: np.ndarray, seeds: np.ndarray, tape: DrawLog | None
    ) -> tuple[Transition, DrawLog]:
        result: tuple[Transition, DrawLog] = self._call("step_draws", state, actions, seeds, tape)
        return result

    def explain(self, state: State, actions: np.ndarray) -> list[str] | None:
        result: list[str] | None = self._call("explain", state, actions)
        return result

    def reset_digest(self, seeds: np.ndarray, block: int) -> np.ndarray:
        result: np.ndarray = self._call("reset_digest", seeds, block)
        return result

    def reset_digest_range(self, start: int, count: int, block: int) -> np.ndarray:
        result: np.ndarray = self._call("reset_digest_range", start, count, block)
        return result

    def coverage_start(self) -> bool:
        started: bool = self._call("coverage_start")
        return started

    def coverage_read(self) -> list[LineCoverage] | None:
        result: list[LineCoverage] | None = self._call("coverage_read")
        return result

    def reset_fingerprint(self) -> str | None:
        return self._fingerprint

    def source_files(self) -> list[Path]:
        return self._sources

    def describe(self) -> str:
        return f"{self._describe} (isolated, pid {self._proc.pid})"

    def close(self) -> None:
        if self._proc.is_alive():
            try:
                self._conn.send(("close", ()))
                self._proc.join(5)
            except (BrokenPipeError, OSError):
                pass
        self._kill()
        self._conn.close()
        Path(self._log_path).unlink(missing_ok=True)
