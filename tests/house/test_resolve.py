"""Every command resolves its env, spec and port in one place
(``envforge/resolve.py``), so a missing port is the same one line (exit 2) everywhere and an
env name that disagrees with ``--spec`` is refused by every command that takes both."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cli

from envforge.errors import BadInput
from envforge.resolve import resolve, resolve_spec, spec_for_port

ROOT = Path(__file__).resolve().parents[2]
PONG_SPEC = ROOT / "references/pong/env.toml"


@pytest.mark.parametrize(
    "args",
    [
        ["verify", "pong", "--no-self-check"],
        ["bench", "pong"],
        ["profile", "pong"],
        ["mutate", "pong"],
        ["train"],
    ],
    ids=lambda args: args[0],
)
def test_a_missing_port_is_the_same_line_in_every_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    missing = tmp_path / "no_port"
    code, out, err = run_cli([*args, "--port", str(missing)], capsys)
    assert code == 2, (out, err)
    assert err.strip() == f"envforge: error: port not found: {missing} (no such file or folder)"


def test_the_resolver_decides_which_option_wins(tmp_path: Path) -> None:
    # --spec beside an env name: the env must be the spec's own
    assert resolve_spec("pong", spec=PONG_SPEC).name == "pong"
    with pytest.raises(BadInput, match="is not the env of the spec in use"):
        resolve_spec("cartpole", spec=PONG_SPEC)
    with pytest.raises(BadInput, match=r"name an env \(envforge prompt pong\) or pass --ref"):
        resolve_spec(None, command="prompt")
    # the shipped port by target, or the port given
    assert resolve("pong", None, None, None, "jax").port == ROOT / "generated/pong/jax"
    with pytest.raises(BadInput, match="no c port found for pong"):
        resolve("pong", None, None, None, "c")
    # a port path names its env: generated/<env>/<target>[/<module>.py]
    assert spec_for_port(ROOT / "generated/pong/jax/pong.py").name == "pong"
    with pytest.raises(BadInput, match="cannot tell which env"):
        spec_for_port(tmp_path)


SHARED_FLAGS = ("--seed", "--scale", "--sandbox", "--levels", "--seed-sweep", "--init")


def test_shared_options_are_defined_once() -> None:
    """``--seed``, ``--scale``, ``--sandbox``, ``--levels``... come from
    ``envforge/commands/options.py`` in every command: a command declaring one again fails
    here, and every command that takes one shows the same help for it."""
    import click
    import typer.main

    from envforge.cli import app

    commands = ROOT / "envforge" / "commands"
    for module in sorted(commands.glob("*.py")):
        if module.name != "options.py":
            text = module.read_text()
            again = [f for f in SHARED_FLAGS if "typer.Option(" in text and f'"{f}"' in text]
            assert not again, f"{module.name} declares {again} again: use commands/options.py"
    helps: dict[str, set[str]] = {}

    def walk(command: click.Command) -> None:
        for sub in getattr(command, "commands", {}).values():
            walk(sub)
        for param in command.params:
            for flag in set(getattr(param, "opts", [])) & set(SHARED_FLAGS):
                helps.setdefault(flag, set()).add(str(getattr(param, "help", "")))

    walk(typer.main.get_command(app))
    assert set(helps) == set(SHARED_FLAGS)
    assert all(len(texts) == 1 for texts in helps.values()), helps
