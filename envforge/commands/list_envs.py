"""`envforge list`: the known reference envs and their ports."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from envforge.spec import all_specs, project_roots
from envforge.targets import find_port_folders, target_of_port
from envforge.translate.made_by import port_made_by


def list_envs(
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """List reference environments, their RNG/compare modes and available ports: every folder
    of generated/<env>/ that a target (envforge/targets) recognises, with its target and how it
    was made (hand, agent or third-party, from its PROVENANCE.md)."""
    rows = []
    for toml, spec in all_specs():
        ports = []
        made_by: dict[str, str | None] = {}
        targets: dict[str, str] = {}
        for label, path in find_port_folders(spec.name, project_roots(), spec.port):
            ports.append(label)
            made_by[label] = port_made_by(path)
            targets[label] = target_of_port(path).name
        rows.append(
            {
                "name": spec.name,
                "reference": spec.reference,
                "rng": spec.rng.mode,
                "compare": spec.compare.mode,
                "ports": ports,
                "made_by": made_by,
                "targets": targets,
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
        made, kinds = r["made_by"], r["targets"]
        assert isinstance(made, dict) and isinstance(kinds, dict)
        shown = ", ".join(port_label(p, kinds[p], made.get(p)) for p in r["ports"]) or "-"
        table.add_row(str(r["name"]), str(r["reference"]), str(r["rng"]), str(r["compare"]), shown)
    Console().print(table)


def port_label(label: str, target: str, made_by: str | None) -> str:
    """``jax (hand)``; a port in a folder not named after its target says which it is:
    ``brax (jax, third-party)``."""
    kind = "" if label == target else f"{target}, "
    return f"{label} ({kind}{made_by or 'undeclared'})"


def register(app: typer.Typer) -> None:
    app.command("list")(list_envs)
