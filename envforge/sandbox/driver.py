"""A Driver whose implementation runs in a sandbox: the isolated driver, launched differently.

The server is ``python -m envforge.sandbox.serve <scratch>`` started by ``Sandbox.start_server``
(a confined child process, or a container); the host talks to it over a Unix socket in the
scratch directory. Everything else — per-call timeouts, a deadline and a size cap on every
reply frame, crash and timeout findings with the server's stderr — is :class:`IsolatedDriver`'s.
Replies are unpickled with an allow-list: code in the sandbox can write anything to its end of
the socket, and a plain unpickle would run it on the host. The connection's handshake, before
any port code runs, is bounded too (``CONNECT_TIMEOUT_S``).
"""

from __future__ import annotations

import io
import os
import pickle
import socket
import struct
import sys
import tempfile
import time
from multiprocessing.connection import Connection, answer_challenge, deliver_challenge
from pathlib import Path
from typing import Any

from envforge.backends.base import Driver
from envforge.backends.isolated import BUILD_TIMEOUT_S, IsolatedDriver
from envforge.backends.recipe import Recipe, open_driver
from envforge.errors import DriverCrashed, DriverTimeout
from envforge.sandbox.base import Sandbox, SandboxError
from envforge.sandbox.leftovers import remove_tree
from envforge.sandbox.serve import AUTHKEY, LOG, RECIPE, SOCKET
from envforge.targets import get_target
from envforge.untrusted.owned_names import owned_prefix
from envforge.untrusted.sandbox_logs import read_tail

CONNECT_TIMEOUT_S = 120.0
ALLOWED_GLOBALS = {
    ("numpy", "dtype"),
    ("numpy", "ndarray"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy._core.numeric", "_frombuffer"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"),
    ("envforge.backends.base", "Transition"),
    ("envforge.rng.draws", "DrawLog"),
    ("envforge.coverage.lines", "LineCoverage"),  # a drafted version's lines (rules/)
}


class _ReplyUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in ALLOWED_GLOBALS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"sandboxed driver sent a forbidden object {module}.{name}")


def decode_reply(data: bytes) -> Any:
    """A sandboxed server's reply, unpickled with the allow-list; anything else is the
    server's contract failure."""
    try:
        return _ReplyUnpickler(io.BytesIO(data)).load()
    except Exception as e:  # noqa: BLE001 - any malformed reply is the server's failure
        return ("raise", "ContractViolation", f"unreadable reply: {e}", "")


def connect_bounded(path: Path, authkey: bytes, seconds: float) -> Connection:
    """``multiprocessing.connection.Client`` for a Unix socket, with every read and write of
    the connect and the handshake limited to ``seconds`` (Client's own would wait for good)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    limit = struct.pack("ll", int(seconds), int(seconds % 1 * 1e6))
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, limit)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, limit)
        sock.connect(str(path))
    except BaseException:
        sock.close()
        raise
    conn = Connection(sock.detach())
    try:
        answer_challenge(conn, authkey)
        deliver_challenge(conn, authkey)
    except BaseException:
        conn.close()
        raise
    return conn


def prepare_on_host(kind: str, port: Path) -> None:
    """The target's host step before a sandboxed build of ``port`` (a Rust crate's
    dependencies fetched, with network: the sandbox has none), for a driver server and a
    one-shot job alike: one build path wherever the port is built."""
    prepare = get_target(kind).load_code("host_prepare")
    if prepare is not None:
        prepare(port)


class SandboxedDriver(IsolatedDriver):
    def __init__(
        self,
        recipe: Recipe,
        sandbox: Sandbox,
        timeout_s: float = 120.0,
        build_timeout_s: float = BUILD_TIMEOUT_S,
    ) -> None:
        Driver.__init__(self, recipe.spec)
        self.side = recipe.named
        self.recipe = recipe
        self.timeout_s = timeout_s
        self.sandbox = sandbox
        if recipe.side == "port":
            prepare_on_host(recipe.kind, Path(recipe.target))
        self._scratch = Path(tempfile.mkdtemp(prefix=owned_prefix(recipe.side)))
        self._log_path = str(self._scratch / LOG)
        authkey = os.urandom(32)
        (self._scratch / RECIPE).write_bytes(pickle.dumps(recipe))
        (self._scratch / AUTHKEY).write_bytes(authkey)
        argv = [sys.executable, "-m", "envforge.sandbox.serve", str(self._scratch)]
        target = Path(recipe.target)
        if recipe.side == "reference" and recipe.kind == "python":  # a version drafted from rules
            target = Path(recipe.target.rsplit(":", 1)[0]).parent
        readable = (target,) if target.exists() else ()
        try:
            self._server = sandbox.start_server(argv, self._scratch, dict(recipe.env), readable)
        except SandboxError as e:
            remove_tree(self._scratch)
            raise DriverCrashed(self.side, "build", str(e)) from None
        self._proc = self._server  # type: ignore[assignment]  # the same interface, sandboxed
        try:
            self._conn = self._connect(authkey, CONNECT_TIMEOUT_S)
            info = self._open(build_timeout_s)
        except BaseException:
            self._release()
            raise
        self._describe = info["describe"]
        self._sources = [Path(p) for p in info["sources"]]

    def _connect(self, authkey: bytes, timeout: float) -> Connection:
        socket_path = self._scratch / SOCKET
        deadline = time.monotonic() + timeout
        while True:
            if socket_path.exists():
                try:
                    return connect_bounded(socket_path, authkey, timeout)
                except (ConnectionRefusedError, FileNotFoundError):
                    pass  # bound, not yet listening
                except (OSError, EOFError) as e:  # a handshake that stalled or broke off
                    self._kill()
                    raise DriverCrashed(
                        self.side, "build", f"sandboxed server's handshake failed: {e}"
                    ) from None
            if not self._server.is_alive():
                raise DriverCrashed(
                    self.side,
                    "build",
                    f"sandboxed server exited before serving (exit code {self._server.exitcode})",
                    self._startup_output(),
                )
            if time.monotonic() > deadline:
                self._kill()
                raise DriverTimeout(
                    self.side, "build", f"sandboxed server not up within {timeout:g} s"
                )
            time.sleep(0.02)

    def _startup_output(self, limit: int = 2000) -> str:
        """The server's output and log: files the port may have replaced, read with care."""
        text = "".join(read_tail(self._scratch / name, limit) for name in ("server.out", LOG))
        return text[-limit:]

    def _stderr_tail(self, limit: int = 2000) -> str:
        return self._startup_output(limit)

    def _decode(self, data: bytes) -> Any:
        return decode_reply(data)

    def _kill(self) -> None:
        self._server.kill()

    def _release(self) -> None:
        self._server.kill()
        self._server.cleanup()
        remove_tree(self._scratch)

    def describe(self) -> str:
        return f"{self._describe} (sandbox: {self.sandbox.describe()})"

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._release()


def open_sandboxed(
    recipe: Recipe,
    sandbox: Sandbox | None,
    isolate: bool = True,
    timeout_s: float | None = None,
    build_timeout_s: float | None = None,
) -> Driver:
    """A driver in ``sandbox``; without one (``--sandbox none``), as ``open_driver`` opens it.
    ``timeout_s`` (default: the spec's) limits every call and the port's import,
    ``build_timeout_s`` (default ``BUILD_TIMEOUT_S``) its compiling."""
    if sandbox is None:
        return open_driver(recipe, isolate, timeout_s, build_timeout_s)
    return SandboxedDriver(
        recipe,
        sandbox,
        timeout_s=timeout_s or recipe.spec.verify.timeout_s,
        build_timeout_s=build_timeout_s or BUILD_TIMEOUT_S,
    )
