"""envforge command line: init, translate, prompt, mcp, verify, batch, bench, mutate, cost, train,
list, profile, play."""

from __future__ import annotations

import importlib
import sys
from typing import NoReturn

import typer

from envforge.errors import DriverFailure, EnvforgeError
from envforge.untrusted.shown import indented, one_line

try:  # typer 0.2x carries its own copy of click; older typer uses click itself
    from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError
except ImportError:  # pragma: no cover - depends on the installed typer
    from click.exceptions import ClickException, NoArgsIsHelpError, UsageError  # type: ignore

app = typer.Typer(
    name="envforge",
    help="Port slow RL environments to fast JAX or Rust, and prove the port is the same env.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

COMMAND_MODULES = (
    "verify",
    "list_envs",
    "translate",
    "prompt",
    "mcp",
    "cost",
    "bench",
    "profile",
    "mutate",
    "batch",
    "train",
    "init",
    "rules",
    "play",
)
for _name in COMMAND_MODULES:
    importlib.import_module(f"envforge.commands.{_name}").register(app)


def main() -> None:
    """Console entry point. Exit codes: 0 done/equivalent, 1 a real verdict (not equivalent,
    not verified, a port that failed to build or run), 2 bad input (one line on stderr, never a
    traceback), 130 interrupted."""
    try:
        code = app(standalone_mode=False, prog_name="envforge")
    except DriverFailure as e:  # built or run outside verify's levels (profile, rules check)
        if e.side == "reference":  # the reference is input: bad input
            _fail(str(e))
        _port_failed(e)
    except EnvforgeError as e:  # BadInput and every other error raised on purpose
        _fail(str(e))
    except UsageError as e:  # click's parsing: unknown option, bad value, no command
        if isinstance(e, NoArgsIsHelpError):
            print(e.format_message())
            _fail("no command given (help above)")
        where = f" (see '{e.ctx.command_path} --help')" if e.ctx is not None else ""
        _fail(f"{e.format_message()}{where}")
    except ClickException as e:  # click's file errors and the like
        _fail(e.format_message())
    except MemoryError:  # sized by the input (a spec's shapes): bad input, not a traceback
        _fail("out of memory on the host: the input asks for more than this machine has")
    except (typer.Abort, KeyboardInterrupt):
        code = INTERRUPTED
    # outside standalone mode typer returns the code of an Exit (Ctrl-C is Exit(130)) instead
    # of leaving with it; a command that finishes normally returns None
    code = code if isinstance(code, int) else 0
    if code == INTERRUPTED:
        print("envforge: interrupted", file=sys.stderr)
    sys.exit(code)


INTERRUPTED = 130
"""The shell's code for a process ended by SIGINT (128 + 2)."""


def _port_failed(e: DriverFailure) -> NoReturn:
    """A port (or another version on the port side) that failed: a verdict on it, exit 1, with
    what it said as the finding (its text shown, not obeyed)."""
    print(f"envforge: the port failed: {indented(str(e))}", file=sys.stderr)
    if e.detail.strip():
        print(f"  detail: {indented(e.detail.strip()[-2000:])}", file=sys.stderr)
    sys.exit(1)


def _fail(message: str) -> NoReturn:
    # the message may quote a port or a file: one line, its control characters shown
    print(f"envforge: error: {one_line(' '.join(message.split()))}", file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    main()
