"""`envforge list`: the known reference envs and their ports."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from envforge.spec_lookup import all_specs, project_roots


def list_envs(
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """List reference environments, their RNG/compare modes and available ports."""
    rows = []
    for toml, spec in all_specs():
        ports = []
        for target in ("jax", "rust"):
            rel = spec.port.get(target, f"generated/{spec.name}/{target}")
            if any((root / rel).exists() for root in project_roots()):
                ports.append(target)
        rows.append(
            {
                "name": spec.name,
                "reference": spec.reference,
                "rng": spec.rng.mode,
                "compare": spec.compare.mode,
                "ports": ports,
                "spec": str(toml),
            }
        )
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    table = Table(title="envforge environments")
    for col in ("name", "reference", "rng", "compare", "ports"):
        table.add_column(col)
    for r in rows:
        shown = ", ".join(r["ports"]) or "-"
        table.add_row(str(r["name"]), str(r["reference"]), str(r["rng"]), str(r["compare"]), shown)
    Console().print(table)


def register(app: typer.Typer) -> None:
    app.command("list")(list_envs)
