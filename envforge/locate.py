"""Find specs and ports from what the user typed: an env name, a reference path, or an id."""

from __future__ import annotations

from pathlib import Path

from envforge.errors import BadInput
from envforge.spec import EnvSpec, load_spec


def project_roots() -> list[Path]:
    """Where ``references/`` may live: the working directory, then this checkout."""
    roots = [Path.cwd(), Path(__file__).resolve().parents[1]]
    return [r for i, r in enumerate(roots) if r not in roots[:i]]


def references_dirs() -> list[Path]:
    return [r / "references" for r in project_roots() if (r / "references").is_dir()]


def all_specs() -> list[tuple[Path, EnvSpec]]:
    out = []
    seen: set[str] = set()
    for refs in references_dirs():
        for toml in sorted(refs.glob("*/env.toml")):
            if toml.parent.name not in seen:
                seen.add(toml.parent.name)
                out.append((toml, load_spec(toml)))
    return out


def spec_for_name(name: str) -> EnvSpec:
    for refs in references_dirs():
        if (refs / name / "env.toml").is_file():
            return load_spec(refs / name / "env.toml")
    known = sorted(p.parent.name for r in references_dirs() for p in r.glob("*/env.toml"))
    raise BadInput(f"unknown env {name!r}; known: {', '.join(known) or 'none'}")


def spec_for_reference(ref: str, spec_path: str | None = None) -> EnvSpec:
    """The spec for ``--ref``: a file's neighbouring env.toml, or the spec naming this id."""
    if spec_path:
        return load_spec(spec_path)
    if ref.startswith("gymnasium:") or (":" in ref and not Path(ref).exists()):
        for _, spec in all_specs():
            if spec.reference == ref:
                return spec
        raise BadInput(
            f"no references/*/env.toml declares reference = {ref!r}; draft one with "
            f"`envforge init --ref {ref}` (or pass --spec)"
        )
    path = Path(ref)
    if not path.exists():
        raise BadInput(f"reference not found: {ref}")
    toml = (path if path.is_dir() else path.parent) / "env.toml"
    if not toml.is_file():
        raise BadInput(f"no env.toml beside {ref}; pass --spec (or draft one: envforge init)")
    return load_spec(toml)


def default_port(spec: EnvSpec, target: str = "jax") -> Path:
    rel = spec.port.get(target, f"generated/{spec.name}/{target}")
    for root in [*project_roots(), spec.root.parent.parent]:
        if (root / rel).exists():
            return root / rel
    raise BadInput(f"no {target} port found for {spec.name} at {rel}; pass --port")
