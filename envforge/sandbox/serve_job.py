"""Entry point of a one-shot job inside a sandbox: ``python -m envforge.sandbox.serve_job <scratch>``.

The host (``envforge/sandbox/jobs.py``) left the pickled job (a function named by module and
name, its arguments, the environment to set) and an auth key in ``scratch``. The server
listens on ``scratch/job.sock``, accepts the one host connection, runs the job and sends back
one reply: ``("ok", value)`` with plain data only (the host unpickles it with an allow-list),
or ``("raise", type, message, traceback)``. Training on a port (L4) runs here: the port's
code is imported inside the sandbox, never on the host.
"""

from __future__ import annotations

import importlib
import os
import pickle
import signal
import sys
import traceback
from multiprocessing.connection import Listener
from pathlib import Path

JOB = "job.pickle"
AUTHKEY = "authkey"
SOCKET = "job.sock"
LOG = "job.log"
ACCEPT_TIMEOUT_S = 300
"""A server nobody connects to exits (its host died before connecting)."""


def main(argv: list[str]) -> None:
    scratch = Path(argv[0])
    module, function, args, env = pickle.loads((scratch / JOB).read_bytes())
    authkey = (scratch / AUTHKEY).read_bytes()
    signal.alarm(ACCEPT_TIMEOUT_S)
    previous = os.umask(0o077)
    try:
        listener = Listener(str(scratch / SOCKET), family="AF_UNIX", authkey=authkey)
    finally:
        os.umask(previous)
    with listener:
        conn = listener.accept()
    signal.alarm(0)
    log_fd = os.open(scratch / LOG, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    import faulthandler

    faulthandler.enable()
    os.environ.update(env)
    try:
        result = getattr(importlib.import_module(module), function)(*args)
        conn.send(("ok", result))
    except BaseException as e:  # noqa: BLE001 - everything goes back to the host
        conn.send(("raise", type(e).__name__, str(e), traceback.format_exc()))


if __name__ == "__main__":
    main(sys.argv[1:])
