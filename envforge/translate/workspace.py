"""A run's workspace: where the agent writes the port, and what each iteration leaves behind.

<workspace>/port/                 the port the agent edits (what gets verified)
<workspace>/reference/            copies of the reference sources, for reading and running
<workspace>/iterations/NN/        per iteration: port/ snapshot (its regular files: no link is
                                  followed or copied), report.json, cost.json,
                                  transcript.jsonl (the conversation, without credentials,
                                  appended as each message arrives, so a killed run keeps it)
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envforge.agents.messages import Message, part_to_dict
from envforge.errors import BadInput
from envforge.prompts.sources import SourceFile
from envforge.spec import EnvSpec
from envforge.targets import get_target
from envforge.untrusted.port_files import PortFiles, copy_port, list_port
from envforge.untrusted.regular import (
    NotPlainFile,
    append_file,
    copy_file,
    fresh_folder,
    write_file,
)
from envforge.verify.verdict import Report

PROVENANCE = "PROVENANCE.md"
REFERENCE_BYTES = 64 * 2**20
"""Largest reference source copied into a workspace (sources are kilobytes, library code more)."""


@dataclass(frozen=True)
class PortLayout:
    port_rel: str
    """What the agent is told to write, relative to the workspace."""
    main_file: str
    """The file shown in repair prompts, relative to the workspace."""


def port_layout(spec: EnvSpec, target: str) -> PortLayout:
    kind = get_target(target)
    return PortLayout(
        kind.workspace_port.format(env=spec.name), kind.workspace_main.format(env=spec.name)
    )


class RunWorkspace:
    def __init__(self, root: Path, spec: EnvSpec, target: str) -> None:
        self.root = root.resolve()
        self.spec = spec
        self.layout = port_layout(spec, target)
        self.port_dir = self.root / "port"
        self.root.mkdir(parents=True, exist_ok=True)
        self.port_dir.mkdir(exist_ok=True)

    def copy_reference(self, sources: list[SourceFile]) -> str | None:
        """Copy the reference files the agent may read or run; returns their folder, if any.
        The workspace is the agent's (an earlier run's agent included): each copy is written
        new by the one rule (``untrusted/regular.py``), never through a link it left there."""
        files = [s for s in sources if s.path is not None]
        if not files:
            return None
        for source in files:
            assert source.path is not None
            copy = f"reference/{source.library or source.path.name}"  # library code in library/
            try:  # the source: the user's reference (or its environment's library code)
                copy_file(source.path, self.root, copy, REFERENCE_BYTES, one_link=False)
            except NotPlainFile as e:
                raise BadInput(f"workspace {self.root}: {copy} not written ({e.why})") from None
        return "reference/"

    @property
    def main_file(self) -> Path:
        return self.root / self.layout.main_file

    def port_files(self) -> PortFiles:
        """``port/`` as the host lists it: regular files only; links (``port/`` itself
        included), FIFOs and hard links an agent's command made are refused, never followed."""
        return list_port(self.port_dir, follow_root=False)

    def port_source(self) -> str | None:
        """The main file as a repair prompt shows it (listed, no link followed, size-capped)."""
        return self.port_files().read_text(self.main_file.relative_to(self.port_dir))

    def has_port(self) -> bool:
        return bool(self.port_files().names)

    def iteration_dir(self, number: int) -> Path:
        return self.root / self.iteration_name(number)

    @staticmethod
    def iteration_name(number: int) -> str:
        return f"iterations/{number:02d}"

    # the agent's commands may have left links anywhere in the workspace (iterations/
    # included): what the host writes there is written by the one rule, through none of them
    def start_transcript(self, number: int) -> Callable[[Message], None]:
        """A fresh iteration folder, and the function that appends a message to its transcript."""
        name = f"{self.iteration_name(number)}/transcript.jsonl"
        fresh_folder(self.root, self.iteration_name(number))
        append_file(self.root, name, "")

        def append(message: Message) -> None:
            line = {"role": message.role, "parts": [part_to_dict(p) for p in message.parts]}
            append_file(self.root, name, json.dumps(line) + "\n")

        return append

    def snapshot(self, number: int, report: Report | None, cost: dict[str, Any]) -> Path:
        """The iteration's port, report and cost beside its transcript."""
        folder = self.iteration_name(number)
        copy_port(self.port_files(), fresh_folder(self.root, f"{folder}/port"))
        if report is not None:
            write_file(
                self.root, f"{folder}/report.json", json.dumps(report.to_dict(), indent=2).encode()
            )
        write_file(self.root, f"{folder}/cost.json", json.dumps(cost, indent=2).encode())
        return self.root / folder

    def restore(self, number: int) -> None:
        """Put iteration ``number``'s port snapshot back as the current port."""
        if self.port_dir.is_dir() and not self.port_dir.is_symlink():
            shutil.rmtree(self.port_dir)
        elif self.port_dir.is_symlink() or self.port_dir.exists():
            self.port_dir.unlink()  # a link or a file an agent's command put there
        copy_port(list_port(self.iteration_dir(number) / "port", False), self.port_dir)


def check_out_dir(out: Path) -> None:
    """Refuse an --out folder we did not make: landing a port there would overwrite files."""
    if out.exists() and (
        not out.is_dir() or (any(out.iterdir()) and not (out / PROVENANCE).is_file())
    ):
        raise BadInput(
            f"--out {out} exists and was not written by envforge translate; choose another"
        )


def land(workspace: RunWorkspace, out: Path, provenance: str) -> None:
    """Copy the port to ``out`` (replacing an earlier envforge output there) with PROVENANCE.md."""

    def fill(folder: Path) -> None:
        copy_port(workspace.port_files(), folder)

    land_atomically(out, fill, provenance)


def land_atomically(out: Path, fill: Callable[[Path], None], provenance: str) -> None:
    """Put a port at ``out`` so that a kill at any moment leaves either the earlier envforge
    output or the new one there, each with its PROVENANCE.md, never a part-written folder
    (which ``check_out_dir`` would then refuse, and a resumed batch with it).

    ``fill(folder)`` writes the port into a new folder beside ``out``; PROVENANCE.md is added
    and the folder renamed into place (an earlier output is renamed away first, then removed).
    Leftovers of a killed landing are hidden dot-folders, cleared by the next landing."""
    check_out_dir(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.parent / f".{out.name}.landing"
    replaced = out.parent / f".{out.name}.replaced"
    for leftover in (staging, replaced):
        if leftover.exists():
            shutil.rmtree(leftover)
    fill(staging)
    (staging / PROVENANCE).write_text(provenance)
    if out.exists():
        out.rename(replaced)
    staging.rename(out)
    shutil.rmtree(replaced, ignore_errors=True)
