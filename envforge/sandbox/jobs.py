"""One-shot jobs on a port, run inside the sandbox the user chose: the host's side.

A job is a function (named by module and name, imported only inside the sandbox) that
imports or runs the port and returns plain data: numbers, strings, numpy arrays and plain
containers. The host starts ``python -m envforge.sandbox.serve_job`` with
``Sandbox.start_server`` (a confined process or a container, the same door as the verifier's
driver servers), reads the one reply frame against a deadline and a size cap, and unpickles
it with the driver's allow-list (``sandbox.driver.decode_reply``): the sandboxed side owns
its end of the socket, so nothing but plain data may come back.
"""

from __future__ import annotations

import os
import pickle
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from envforge.backends.frames import FrameClosed, FrameTimeout, FrameTooLong, recv_frame
from envforge.errors import ContractViolation, DriverCrashed, DriverRaised, DriverTimeout
from envforge.sandbox.base import Sandbox, SandboxError
from envforge.sandbox.driver import (
    CONNECT_TIMEOUT_S,
    connect_bounded,
    decode_reply,
    prepare_on_host,
)
from envforge.sandbox.leftovers import remove_tree
from envforge.sandbox.serve_job import AUTHKEY, JOB, LOG, SOCKET
from envforge.targets import target_of_port
from envforge.untrusted.owned_names import owned_prefix
from envforge.untrusted.sandbox_logs import read_tail

REPLY_CAP = 256 << 20
"""The most bytes a job's reply may take (a trained policy's parameters are far less)."""


def _output(scratch: Path, limit: int = 2000) -> str:
    """The server's output and log: files the port may have replaced, read with care."""
    text = "".join(read_tail(scratch / name, limit) for name in ("server.out", LOG))
    return text[-limit:]


def run_job(
    sandbox: Sandbox,
    target: str,
    args: tuple[Any, ...],
    *,
    readable: tuple[Path, ...],
    env: dict[str, str] | None = None,
    timeout_s: float,
    what: str,
    side: str = "port",
    cap: int = REPLY_CAP,
    port: Path | None = None,
) -> Any:
    """Run ``target`` (``"package.module:function"``) on ``args`` in ``sandbox`` and return its
    value, plain data only. ``timeout_s`` bounds the whole job, start to reply; ``readable``
    are the host paths it must read (the port). A job that builds ``port`` gets the host step
    a driver's build gets first (``prepare_on_host``). A job that dies, passes its time, sends
    more than ``cap`` bytes or anything but plain data is killed and raised as a DriverFailure
    of ``side`` named ``what``; an exception it raised comes back as DriverRaised."""
    if port is not None:
        prepare_on_host(target_of_port(port).name, port)
    module, function = target.split(":")
    deadline = time.monotonic() + timeout_s
    scratch = Path(tempfile.mkdtemp(prefix=owned_prefix(side)))
    authkey = os.urandom(32)
    (scratch / JOB).write_bytes(pickle.dumps((module, function, args, dict(env or {}))))
    (scratch / AUTHKEY).write_bytes(authkey)
    argv = [sys.executable, "-m", "envforge.sandbox.serve_job", str(scratch)]
    try:
        server = sandbox.start_server(argv, scratch, dict(env or {}), readable)
    except SandboxError as e:
        remove_tree(scratch)
        raise DriverCrashed(side, what, str(e)) from None
    try:
        conn = _connect(server, scratch, authkey, side, what)
        try:
            os.set_blocking(conn.fileno(), False)
            data = recv_frame(conn.fileno(), deadline, cap)
        except FrameTimeout:
            raise DriverTimeout(
                side, what, f"did not finish within {timeout_s:g} s (killed)", _output(scratch)
            ) from None
        except FrameTooLong as e:
            raise ContractViolation(
                side, what, f"its reply announced {e.size:,} bytes, over {cap:,} (killed)"
            ) from None
        except (FrameClosed, OSError):
            server.join(5)
            raise DriverCrashed(
                side, what, f"process died (exit code {server.exitcode})", _output(scratch)
            ) from None
        finally:
            conn.close()
        reply = decode_reply(data)
        if isinstance(reply, tuple) and len(reply) == 2 and reply[0] == "ok":
            return reply[1]
        if (
            isinstance(reply, tuple)
            and len(reply) == 4
            and reply[0] == "raise"
            and all(isinstance(part, str) for part in reply[1:])
        ):
            _, type_name, message, tb = reply
            kind = ContractViolation if type_name == "ContractViolation" else DriverRaised
            text = message if kind is ContractViolation else f"raised {type_name}: {message}"
            raise kind(side, what, text, tb)
        raise ContractViolation(side, what, f"sent a reply of no known form: {repr(reply)[:200]}")
    finally:
        server.kill()
        server.cleanup()
        remove_tree(scratch)


def _connect(server: Any, scratch: Path, authkey: bytes, side: str, what: str) -> Any:
    socket_path = scratch / SOCKET
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    while True:
        if socket_path.exists():
            try:
                return connect_bounded(socket_path, authkey, CONNECT_TIMEOUT_S)
            except (ConnectionRefusedError, FileNotFoundError):
                pass  # bound, not yet listening
            except (OSError, EOFError) as e:
                raise DriverCrashed(side, what, f"sandboxed job's handshake failed: {e}") from None
        if not server.is_alive():
            raise DriverCrashed(
                side,
                what,
                f"sandboxed job exited before serving (exit code {server.exitcode})",
                _output(scratch),
            )
        if time.monotonic() > deadline:
            raise DriverTimeout(side, what, f"sandboxed job not up within {CONNECT_TIMEOUT_S:g} s")
        time.sleep(0.02)
