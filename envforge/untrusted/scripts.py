"""The one way envforge writes a script into a workspace an agent owns (``./verify``,
``./bench``, ``./profile``, ``./check``): the interpreter that wrote the workspace, by absolute
path (``$ENVFORGE_PYTHON`` overrides), in isolated mode, started from wherever the script is
called. ``python -m`` otherwise puts the working folder first on the import path, and a
``cd`` into the workspace would make it the agent's: an ``argparse.py`` written there would be
imported by the host. The MCP configs start ``envforge mcp`` with the same :data:`ISOLATED`.
"""

from __future__ import annotations

import shlex
import sys

ISOLATED = "-I"
"""Python's isolated mode: neither the working folder nor ``PYTHON*`` variables reach its
import path, nor the user's site-packages."""


def entry_script(name: str, usage: str, command: list[str], before: str = "") -> str:
    """The text of the workspace script ``name``: ``before`` (shell lines that may change
    ``"$@"``), then ``exec python -I <command> "$@"``. ``name`` is the file it is written to
    (the entry-point inventory lists each)."""
    quoted = " ".join(shlex.quote(part) for part in [ISOLATED, *command])
    return f"""#!/bin/sh
# ./{name}: {usage}
python=${{ENVFORGE_PYTHON:-}}
[ -n "$python" ] || python={shlex.quote(sys.executable)}
{before}exec "$python" {quoted} "$@"
"""
