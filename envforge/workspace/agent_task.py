"""The task a workspace's agent reads (AGENTS.md / CLAUDE.md / GEMINI.md of ``envforge prompt``).

Every fact it states about the env comes from the spec, once: the field table, the comparison,
the randomness (``prompts/_spec.j2``); the target's contract quotes sizes from the same spec.
The reference's source is quoted when the whole task stays under :data:`QUOTE_UNDER` bytes;
otherwise the task names the files (they are in ``reference/``) and the agent reads them there,
so that no task passes :data:`TASK_MAX` (tests/agents/test_agent_workspace_facts.py renders every
shipped env's workspace and checks it).
"""

from __future__ import annotations

import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

from envforge.errors import BadInput
from envforge.prompts import render as prompts
from envforge.prompts.sources import SourceFile
from envforge.rng.draws import RUST_DRAWS
from envforge.spec import EnvSpec
from envforge.targets import get_target
from envforge.workspace.reference_copy import NOTES_FILES

TASK_MAX = 20_000
"""Bytes of AGENTS.md no shipped env's workspace may reach."""
QUOTE_UNDER = 17_000
"""The reference's source is quoted in the task only while the task stays under this."""


@dataclass(frozen=True)
class ListedFile:
    path: str
    """Relative to the workspace."""
    lines: int
    role: str


def reference_files(spec: EnvSpec, shown: list[SourceFile], root: Path) -> list[ListedFile]:
    """The reference's files as the workspace holds them, with what each one is."""
    loaded = {str((spec.root / name).resolve()) for name in spec.sources}
    listed: list[ListedFile] = []
    for i, source in enumerate(shown):
        lines = source.text.count("\n") + 1
        if source.path is None:  # a gymnasium class, written out beside env.toml
            path = f"reference/{spec.name}_gymnasium.py"
            role = f"the reference the verifier runs ({source.name}), without its drawing code"
        elif source.library is not None:
            path = source.name
            role = "library code the reference runs, copied to read (env.toml `library_modules`)"
        else:
            path = str(source.path.resolve().relative_to(root))
            if i == 0:
                role = "the reference the verifier runs"
            elif str(source.path.resolve()) in loaded:
                role = "loaded by the reference (env.toml `sources`)"
            else:
                role = "included by the reference"
        listed.append(ListedFile(path, lines, role))
    for name in NOTES_FILES:
        notes = spec.root / name
        if notes.is_file():
            text = notes.read_text(errors="replace")
            listed.append(
                ListedFile(
                    str(notes.resolve().relative_to(root)),
                    text.count("\n") + 1,
                    "the environment described for implementers: its rules, state and quirks",
                )
            )
    hooks = {
        "constrain": "the verifier's hook that makes drawn states consistent: the states it injects",
        "explain": "the verifier's hook that explains a step finding",
        "handlers": "the verifier's map of the reference's handlers",
    }
    for key, role in hooks.items():
        hook = getattr(spec.verify, key, None)
        hook_file = spec.root / hook.split(":", 1)[0] if isinstance(hook, str) else None
        if hook_file is None or not hook_file.is_file():
            continue
        if str(hook_file.resolve()) not in shown_paths(shown):
            text = hook_file.read_text(errors="replace")
            rel = str(hook_file.resolve().relative_to(root))
            listed.append(
                ListedFile(rel, text.count("\n") + 1, f"{role} (env.toml [verify] {key})")
            )
    rules = spec.root / RULES_TEXT
    if rules.is_file():
        text = rules.read_text(errors="replace")
        role = "the rules text the reference was written from (`envforge rules`)"
        listed.append(
            ListedFile(str(rules.resolve().relative_to(root)), text.count("\n") + 1, role)
        )
    return listed


RULES_TEXT = "RULES.md"
"""A reference drafted from a rules text keeps the text beside it (docs/RULES.md)."""


def shown_paths(shown: list[SourceFile]) -> set[str]:
    return {str(s.path.resolve()) for s in shown if s.path is not None}


def loaded_files(spec: EnvSpec, root: Path) -> list[str]:
    """The files env.toml's ``sources`` says the reference loads (modules, data), as the
    workspace names them."""
    return [str((spec.root / name).resolve().relative_to(root)) for name in spec.sources]


def python_module(spec: EnvSpec) -> str | None:
    """``chip8`` for a ``chip8.py:Class`` reference: what ``import`` names in reference/."""
    if spec.reference_kind != "python":
        return None
    return Path(spec.reference.split(":", 1)[0]).stem


KIT = "kit"
"""A workspace folder envforge rewrites: files a port copies verbatim (Rust's draws.rs)."""


def write_kit(spec: EnvSpec, target: str, root: Path) -> list[ListedFile]:
    """``kit/``, written afresh (a link there is refused, not followed): for a Rust port of a
    spec that draws inside ``step``, envforge's draw interface ``draws.rs``."""
    kit = root / KIT
    if kit.is_symlink() or (kit.exists() and not kit.is_dir()):
        raise BadInput(
            f"workspace part {kit} is a link or not a folder: remove it or choose another --out"
        )
    if kit.exists():
        shutil.rmtree(kit)
    if not get_target(target).tape_kit or spec.rng.step not in ("tape", "distribution"):
        return []
    kit.mkdir()
    text = RUST_DRAWS.read_text()
    (kit / "draws.rs").write_text(text)
    role = "envforge's draw interface: copy it verbatim into the crate (see below)"
    return [ListedFile(f"{KIT}/draws.rs", text.count("\n") + 1, role)]


def render_task(
    spec: EnvSpec,
    target: str,
    port_path: str,
    shown: list[SourceFile],
    levels: str,
    root: Path,
    spec_file: str,
) -> str:
    """AGENTS.md for a workspace at ``root`` whose ``reference/`` is written (``spec`` is the
    copy's spec, ``shown`` its sources labelled as the workspace names them). Writes ``kit/``
    (:func:`write_kit`), which the task may point to."""
    kit = write_kit(spec, target, root)
    text = ""
    for quote in (True, False):
        context = prompts.translation_context(
            spec, target, port_path, shown, "./verify", spec_file, quote_sources=quote
        )
        text = prompts.render(
            "agent_workspace.j2",
            spec=spec,
            target_name=prompts.target(target).name,
            port_path=port_path,
            reference_copy="reference/",
            levels=levels,
            verify_name="./verify",
            workspace_hint=shlex.quote(str(root)),
            context=context,
            files=reference_files(spec, shown, root),
            kit=kit,
            loaded=loaded_files(spec, root),
            module=python_module(spec),
        )
        if len(text.encode()) < QUOTE_UNDER:
            break
    return text
