"""The reference a workspace verifies against, recorded where its agent cannot write.

A workspace belongs to its agent: ``envforge-workspace.toml``, ``reference/`` and every script
in it may have been rewritten by the time anything verifies. So when ``envforge prompt`` writes
a workspace it records, in envforge's own state folder (``$ENVFORGE_CACHE/workspaces/``, keyed
by the workspace's path), what is verified there: the real spec and reference (absolute
paths), the digest of each real source, and the digest of each file of the ``reference/`` copy
as written. ``./verify``, ``./bench``, ``./profile`` and ``envforge mcp --workspace`` read only
that record: they verify against the real reference, and refuse (one line) a workspace whose
copy was edited, or whose real reference changed since, before anything is built or imported.
The copy is for reading only; it is never compiled or imported on the host.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from envforge.cache import cache_root
from envforge.errors import BadInput
from envforge.prompts.sources import SourceFile
from envforge.untrusted.port_files import list_port

PIN_FOLDER = "workspaces"
COPY = "reference"
"""The folder of a workspace that holds the reference's copy."""
FILE_BYTES = 64 * 2**20
"""Largest reference file digested (references are kilobytes; library code megabytes)."""


class WorkspaceEdited(BadInput):
    """The workspace's copy of the reference is not what envforge wrote, or the real one changed."""


@dataclass(frozen=True)
class Pin:
    """What a workspace verifies, as envforge recorded it when it wrote the workspace."""

    root: Path
    env: str
    target: str
    spec: str
    """The real env.toml (absolute)."""
    reference: str
    """The real ``--ref`` (an absolute path, ``path:Class``, or a gymnasium id)."""
    levels: str
    real: dict[str, str]
    """Each real source file (absolute) and its sha256."""
    copy: dict[str, str]
    """Each file of the workspace's ``reference/`` (relative to it) and its sha256 as written."""


def pin_file(root: Path) -> Path:
    key = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:32]
    return cache_root() / PIN_FOLDER / f"{key}.json"


def copy_digests(root: Path) -> tuple[dict[str, str], list[str]]:
    """Digests of the regular files of ``root/reference`` (walked without following links),
    and the names that are links, FIFOs, hard links or too large (never read)."""
    files = list_port(root / COPY, follow_root=False)
    digests, odd = {}, [r.line() for r in files.refused]
    for name in files.names:
        data = files.read_bytes(name, FILE_BYTES + 1)
        if data is None or len(data) > FILE_BYTES:
            odd.append(f"{COPY}/{name}: not a regular file of at most {FILE_BYTES} bytes")
            continue
        digests[name] = hashlib.sha256(data).hexdigest()
    return digests, odd


def _real_digests(paths: list[Path]) -> dict[str, str]:
    return {str(p.resolve()): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


def real_files(spec_path: Path, sources: list[SourceFile]) -> list[Path]:
    """The real files a workspace's reference is: its env.toml and every source file that is
    not installed library code (that belongs to the environment, and is digested as copied)."""
    paths = [spec_path] + [s.path for s in sources if s.path is not None and s.library is None]
    return list(dict.fromkeys(paths))


def record(
    root: Path,
    env: str,
    target: str,
    spec: Path,
    reference: str,
    levels: str,
    real: list[Path],
) -> Pin:
    """Record the workspace just written at ``root``: its real reference and its copy."""
    copy, odd = copy_digests(root)
    if odd:  # written by us a moment ago: something raced the writing
        raise BadInput(f"workspace {root}: {odd[0]}")
    pin = Pin(root.resolve(), env, target, str(spec.resolve()), reference, levels, {}, copy)
    pin = Pin(**{**pin.__dict__, "real": _real_digests(real)})
    path = pin_file(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {k: str(v) if isinstance(v, Path) else v for k, v in pin.__dict__.items()}
    scratch = path.with_name(f".{path.name}.{os.getpid()}")
    scratch.write_text(json.dumps(data, indent=1))
    os.replace(scratch, path)
    return pin


def load_pin(root: Path) -> Pin:
    """The record of the workspace at ``root``; BadInput when envforge wrote none."""
    path = pin_file(root)
    try:
        data = json.loads(path.read_text())
        data["root"] = Path(data["root"])
        pin = Pin(**data)
    except FileNotFoundError:
        raise BadInput(
            f"{root}: envforge has no record of writing this workspace (in {path.parent}); "
            f"write it again with envforge prompt --out {root}"
        ) from None
    except (OSError, ValueError, TypeError, KeyError) as e:
        raise BadInput(f"{path}: malformed workspace record ({e})") from None
    return pin


def check_pin(pin: Pin) -> None:
    """Refuse (WorkspaceEdited, one line) a workspace whose ``reference/`` is not the copy
    envforge wrote, or whose real reference changed since: before anything is built."""
    copy, odd = copy_digests(pin.root)
    edited = odd + [
        f"{COPY}/{name}: {'removed' if name not in copy else 'edited'}"
        for name, digest in sorted(pin.copy.items())
        if copy.get(name) != digest
    ]
    edited += [f"{COPY}/{name}: added" for name in sorted(set(copy) - set(pin.copy))]
    if edited:
        raise WorkspaceEdited(
            f"the workspace's reference was changed ({edited[0]}"
            + (f", and {len(edited) - 1} more" if len(edited) > 1 else "")
            + "): reference/ is for reading only and envforge verifies against the real "
            f"reference ({Path(pin.spec).parent}); restore it or write the workspace again "
            "with envforge prompt"
        )
    for name, digest in pin.real.items():
        path = Path(name)
        now = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
        if now != digest:
            raise WorkspaceEdited(
                f"the reference changed since the workspace was written ({name} "
                f"{'edited' if now else 'removed'}): the agent's copy is out of date; write the "
                "workspace again with envforge prompt"
            )


def shown_in_workspace(text: str, pin: Pin) -> str:
    """The real reference's folder named as the agent finds its copy (``reference/``)."""
    folder = str(Path(pin.spec).parent)
    return text.replace(folder + "/", f"{COPY}/").replace(folder, COPY)
