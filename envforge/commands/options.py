"""The options several commands take, defined once: the same flag, check, help and meaning in
every command (``seed: options.Seed = 0``). A command whose option means something else
(``train --port``, required; ``bench --target``, repeatable) declares its own.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from envforge.sandbox.select import SANDBOX_HELP
from envforge.spec import bounds
from envforge.targets import target_help
from envforge.verify.levels import LEVELS_HELP

REF_HELP = (
    "Reference: path/to/env.c, gymnasium:<id>, gymnasium:<module>:<id>, file.py:Class, "
    "pkg.module:Class or node:file.js."
)

EnvOrRef = Annotated[
    str | None, typer.Argument(help="Env name (references/<env>), or omit and use --ref.")
]
Ref = Annotated[str | None, typer.Option("--ref", help=REF_HELP)]
Spec = Annotated[
    str | None, typer.Option("--spec", help="env.toml to use (default: beside the reference).")
]


def _port_option(help_text: str) -> Any:
    return typer.Option("--port", callback=bounds.text_option(), help=help_text)


Port = Annotated[
    str | None,
    _port_option("The port: a folder or module (default: the env's shipped --target port)."),
]
CheckedPort = Annotated[
    str | None,
    _port_option("A port (a folder or module) to run the cases on too (default: none)."),
]
CandidatePort = Annotated[
    str | None, _port_option("A candidate port (a folder or module) instead of the shipped one.")
]
Target = Annotated[str, typer.Option("--target", help=target_help())]
Levels = Annotated[str, typer.Option("--levels", help=LEVELS_HELP)]
Seed = Annotated[
    int,
    typer.Option(
        "--seed", callback=bounds.option(bounds.SEED), help="Seed of the run's random choices."
    ),
]
Scale = Annotated[
    float,
    typer.Option(
        "--scale",
        callback=bounds.option(bounds.SCALE),
        help="Scale the verifier's example and episode counts (0.2 = quick).",
    ),
]
SeedSweep = Annotated[
    str | None,
    typer.Option(
        "--seed-sweep",
        help="L1, replicate mode: reset exactly the seeds in [0, N) (N, 2^k, or full = 2^32). "
        "Default: the spec's (every seed) times --scale, cut to its time budget.",
    ),
]
Sandbox = Annotated[str, typer.Option("--sandbox", help=SANDBOX_HELP)]
Init = Annotated[
    bool, typer.Option("--init", help="No spec for --ref yet: draft one first (envforge init).")
]
Json = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]
