"""Entry point of a driver server inside a sandbox: ``python -m envforge.sandbox.serve <scratch>``.

The host left three files in ``scratch``: the pickled Recipe, an auth key, and nothing else; the
server listens on ``scratch/driver.sock`` (a Unix socket, so no network is needed), accepts the
one host connection, then serves Driver calls exactly like an isolated child (see
envforge/backends/isolated.py), writing its stderr to ``scratch/driver.log``.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
from multiprocessing.connection import Listener
from pathlib import Path

RECIPE = "recipe.pickle"
AUTHKEY = "authkey"
SOCKET = "driver.sock"
LOG = "driver.log"
ACCEPT_TIMEOUT_S = 300
"""A server nobody connects to exits (its host died before connecting)."""


def main(argv: list[str]) -> None:
    scratch = Path(argv[0])
    recipe = pickle.loads((scratch / RECIPE).read_bytes())
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

    from envforge.backends.isolated import serve_recipe

    serve_recipe(recipe, conn, str(scratch / LOG))


if __name__ == "__main__":
    main(sys.argv[1:])
