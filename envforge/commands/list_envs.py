"""`envforge list`: the known reference envs and their ports."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from envforge.made_by import port_made_by
from envforge.spec_lookup import all_specs, project_roots


def list_envs(
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """List reference environments, their RNG/compare modes and available ports (with how each
    was made: hand, agent or third-party, from its PROVENANCE.md)."""
    rows = []
    for toml, spec in all_specs():
        ports = []
        made_by: dict[str, str | None] = {}
        for target in ("jax", "rust"):
            rel = spec.port.get(target, f"generated/{spec.name}/{target}")
            found = [root / rel for root in project_roots() if (root / rel).exists()]
            if found:
                ports.append(target)
                made_by[target] = port_made_by(found[0])
        rows.append(
            {
                "name": spec.name,
                "reference": spec.reference,
                "rng": spec.rng.mode,
                "compare": spec.compare.mode,
                "ports": ports,
                "made_by": made_by,
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
        made = r["made_by"]
        assert isinstance(made, dict)
        shown = ", ".join(f"{t} ({made.get(t) or 'undeclared'})" for t in r["ports"]) or "-"
        table.add_row(str(r["name"]), str(r["reference"]), str(r["rng"]), str(r["compare"]), shown)
    Console().print(table)


def register(app: typer.Typer) -> None:
    app.command("list")(list_envs)
