"""envforge command line: init, translate, prompt, mcp, verify, batch, bench, mutate, cost, train,
list."""

from __future__ import annotations

import importlib
import sys

import typer

from envforge.errors import BadInput, EnvforgeError

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
    "mutate",
    "batch",
    "train",
    "init",
)
for _name in COMMAND_MODULES:
    importlib.import_module(f"envforge.commands.{_name}").register(app)


def main() -> None:
    """Console entry point: typed errors become one line on stderr and exit code 2."""
    try:
        app(standalone_mode=False)
    except BadInput as e:
        print(f"envforge: error: {e}", file=sys.stderr)
        sys.exit(2)
    except EnvforgeError as e:
        print(f"envforge: error: {e}", file=sys.stderr)
        sys.exit(2)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        print("envforge: aborted", file=sys.stderr)
        sys.exit(130)
    except Exception as e:  # click usage errors
        import click

        if isinstance(e, click.ClickException):
            e.show()
            sys.exit(2)
        raise


if __name__ == "__main__":
    main()
