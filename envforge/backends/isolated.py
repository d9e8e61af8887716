"""Run a Driver in a child process, so a segfault, abort or hang cannot take the verifier down.

The child builds the driver from a picklable :class:`Recipe`, then serves ``reset``/``step``/
``observe`` calls over a pipe. Every call has a time limit, and so has opening the driver: the
build limit for compiling (a Rust port's cargo build, JAX's own import, a whole reference),
then the call timeout for importing the port. Every reply is read whole within that limit and
is refused beyond a size cap (``backends/frames.py``). On a crash, timeout or refused reply the
whole child process group is killed and the caller gets a typed :class:`DriverFailure` with
the signal and the tail of the child's stderr (Python's faulthandler writes the stack there).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import select
import signal
import tempfile
import threading
import time
import traceback
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np

from envforge.backends.base import Driver, State, Transition
from envforge.backends.frames import (
    FrameClosed,
    FrameTimeout,
    FrameTooLong,
    recv_frame,
    reply_cap,
    send_frame,
)
from envforge.backends.recipe import Recipe, build_driver, compile_step
from envforge.coverage.lines import LineCoverage
from envforge.errors import (
    ContractViolation,
    DriverCrashed,
    DriverFailure,
    DriverRaised,
    DriverTimeout,
)
from envforge.rng.draws import DrawLog
from envforge.untrusted.owned_names import owned_prefix
from envforge.untrusted.sandbox_logs import read_tail

_FAILURES = {
    "ContractViolation": ContractViolation,
    "DriverCrashed": DriverCrashed,
    "DriverTimeout": DriverTimeout,
}
BUILD_TIMEOUT_S = 600.0
"""Default limit on compiling a driver (``--build-timeout``): a Rust port's cargo build, JAX's
own import, a whole reference. Importing the port itself falls under the call timeout."""
CLOSE_TIMEOUT_S = 5.0


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
        # first what the build limit covers, then (the host's call timeout) the port's import
        driver = compile_step(recipe)
        conn.send(("built", None))
        driver = driver or build_driver(recipe)
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
        self, recipe: Recipe, timeout_s: float = 120.0, build_timeout_s: float = BUILD_TIMEOUT_S
    ) -> None:
        super().__init__(recipe.spec)
        self.side = recipe.named
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
        info = self._open(build_timeout_s)
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

    def _open(self, build_timeout_s: float) -> Any:
        """The build's reply: compiling within ``build_timeout_s``, then (after the server's
        one ``built`` frame) the port's import within the call timeout."""
        os.set_blocking(self._conn.fileno(), False)  # frames are read against deadlines
        limit = f"{build_timeout_s:g} s (the build limit, --build-timeout)"
        reply = self._exchange("build", time.monotonic() + build_timeout_s, (), limit)
        if isinstance(reply, tuple) and reply[:1] == ("built",):
            limit = f"{self.timeout_s:g} s (the call timeout, --timeout, covers the import)"
            reply = self._exchange("build", time.monotonic() + self.timeout_s, (), limit)
        return self._result("build", reply)

    def _decode(self, data: bytes) -> Any:
        """A reply's object. The unsandboxed child runs as this user anyway; a sandboxed
        server's replies are unpickled with an allow-list (``sandbox/driver.py``)."""
        try:
            return pickle.loads(data)
        except Exception as e:  # noqa: BLE001 - a malformed reply is the child's failure
            return ("raise", "ContractViolation", f"unreadable reply: {e}", "")

    def _exchange(self, method: str, deadline: float, args: tuple[Any, ...], limit: str) -> Any:
        """Send ``method(*args)`` (not for the build, which the server starts by itself) and
        read its reply, whole, before ``deadline``: a server that does not take the call, or
        sends less than its reply's header announced, is killed with a timeout finding; one
        that announces more than ``reply_cap`` is killed with a contract finding."""
        # No liveness check first: it cost a waitpid per call here and a docker API round trip
        # per call in a container. A dead child's end of the connection is closed, so the send
        # or the reply read below reports the crash with its exit status.
        fd = self._conn.fileno()
        try:
            if method != "build":
                send_frame(fd, pickle.dumps((method, args), pickle.HIGHEST_PROTOCOL), deadline)
            data = recv_frame(fd, deadline, reply_cap(self.spec, method, args))
        except FrameTimeout as e:
            self._kill()
            seen = "" if e.size is None and not e.got else f"; {e.seen()} of a frame had come"
            raise DriverTimeout(
                self.side,
                method,
                f"did not return within {limit} (killed{seen})",
                self._stderr_tail(),
            ) from None
        except FrameTooLong as e:
            self._kill()
            raise ContractViolation(
                self.side,
                method,
                f"its reply's header announced {e.size:,} bytes, more than the {e.cap:,} "
                f"a {method} of this spec may send (killed)",
                self._stderr_tail(),
            ) from None
        except (FrameClosed, OSError) as e:
            self._proc.join(5)
            code = self._proc.exitcode
            how = f"exit code {code}"
            if code is not None and code < 0:
                how = f"signal {signal.Signals(-code).name}"
            partial = (
                f"; {e.seen()} of its reply had come"
                if isinstance(e, FrameClosed) and e.size
                else ""
            )
            raise DriverCrashed(
                self.side, method, f"process died ({how}{partial})", self._stderr_tail()
            ) from None
        return self._decode(data)

    def _result(self, method: str, reply: Any) -> Any:
        """A reply's value, or its failure raised as the DriverFailure it names."""
        if isinstance(reply, tuple) and len(reply) == 2 and reply[0] == "ok":
            return reply[1]
        if not (
            isinstance(reply, tuple)
            and len(reply) == 4
            and reply[0] == "raise"
            and all(isinstance(part, str) for part in reply[1:])
        ):
            self._kill()
            raise ContractViolation(
                self.side, method, f"sent a reply of no known form: {repr(reply)[:200]} (killed)"
            )
        _, type_name, message, tb = reply
        cls = _FAILURES.get(type_name, DriverRaised)
        if cls is DriverRaised:
            message = f"raised {type_name}: {message}"
            written = self._stderr_new()
            tb += f"\nstderr since the last failure:\n{written}" if written.strip() else ""
        raise cls(self.side, method, message, tb)

    def _call_raw(self, method: str, timeout: float, *args: Any) -> Any:
        reply = self._exchange(method, time.monotonic() + timeout, args, f"{timeout:g} s")
        return self._result(method, reply)

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

    def step_own(self, state: State, actions: np.ndarray) -> Transition | None:
        result: Transition | None = self._call("step_own", state, actions)
        return result

    def step_training(
        self, state: State, actions: np.ndarray, seeds: np.ndarray
    ) -> Transition | None:
        result: Transition | None = self._call("step_training", state, actions, seeds)
        return result

    def reset_rows(self, state: State, done: np.ndarray, seeds: np.ndarray) -> State | None:
        result = self._call("reset_rows", state, done, seeds)
        if result is not None and not isinstance(result, dict):
            raise ContractViolation(self.side, "reset_where", f"returned {type(result).__name__}")
        return result

    def reset_digest(self, seeds: np.ndarray, block: int) -> np.ndarray:
        result: np.ndarray = self._call("reset_digest", seeds, block)
        return result

    def reset_digest_range(self, start: int, count: int, block: int) -> np.ndarray:
        result: np.ndarray = self._call("reset_digest_range", start, count, block)
        return result

    def run_steps(self, batch: int, steps: int, seed: int) -> float:
        result = self._call("run_steps", int(batch), int(steps), int(seed))
        if isinstance(result, bool) or not isinstance(result, (int, float, np.floating)):
            raise ContractViolation(self.side, "run_steps", f"returned {type(result).__name__}")
        return float(result)

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
                deadline = time.monotonic() + CLOSE_TIMEOUT_S
                send_frame(self._conn.fileno(), pickle.dumps(("close", ())), deadline)
                self._proc.join(CLOSE_TIMEOUT_S)
            except (FrameTimeout, OSError):
                pass
        self._kill()
        self._conn.close()
        Path(self._log_path).unlink(missing_ok=True)
