"""The self-check, run by ``verify`` once per spec content (``init/selfcheck.py``).

A spec that is new or changed is checked before its first verification: the reference against
itself through the canonical state. The verdict is kept under a hash of what it depends on
(the validated spec, the reference's source file or gymnasium's version), so later runs of
the same spec pay nothing.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from envforge.cache import cache_root
from envforge.spec import EnvSpec, load_spec

CHECKED_KINDS = ("gymnasium", "python", "c")
"""References the self-check can drive (it reaches inside their instances)."""


def content_key(spec: EnvSpec) -> str:
    digest = hashlib.sha256(spec.model_dump_json(exclude={"root"}).encode())
    path = spec.reference_path()
    if path is not None and path.is_file():
        digest.update(path.read_bytes())
    if spec.reference_kind == "gymnasium":
        import gymnasium

        digest.update(f"gymnasium {gymnasium.__version__}".encode())
    return digest.hexdigest()[:32]


def _entry(spec: EnvSpec) -> Path:
    return cache_root() / "selfcheck" / f"{content_key(spec)}.json"


def remember(spec_path: Path, result: Any) -> None:
    """Keep a self-check verdict for the spec at ``spec_path`` (its current content)."""
    entry = _entry(load_spec(spec_path))
    entry.parent.mkdir(parents=True, exist_ok=True)
    tmp = entry.with_suffix(".tmp")
    tmp.write_text(json.dumps(result.to_dict()))
    tmp.replace(entry)


def cached_or_run(spec: EnvSpec) -> tuple[dict[str, Any], bool] | None:
    """The self-check verdict for ``spec`` (as a dict) and whether it came from the cache;
    None for a reference the self-check cannot drive."""
    if spec.reference_kind not in CHECKED_KINDS:
        return None
    entry = _entry(spec)
    if entry.is_file():
        try:
            return json.loads(entry.read_text()), True
        except ValueError:
            pass  # a torn write: run it again
    from envforge.init.selfcheck import SelfCheckConfig, self_check

    # lighter than init's check (8 episodes, 1000 steps): verify pays it per new spec
    result = self_check(spec, SelfCheckConfig(episodes=4, max_steps=min(spec.episode_cap, 500)))
    entry.parent.mkdir(parents=True, exist_ok=True)
    tmp = entry.with_suffix(f".{id(result)}.tmp")
    tmp.write_text(json.dumps(result.to_dict()))
    tmp.replace(entry)
    return result.to_dict(), False
