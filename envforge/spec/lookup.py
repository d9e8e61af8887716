"""Find specs from what the user typed: an env name, a reference path, or an id.

(Finding a port is ``envforge/resolve.py``'s; ``verify/localize.py`` finds the source lines
behind a finding.)
"""

from __future__ import annotations

from pathlib import Path

from envforge.errors import BadInput, SpecError
from envforge.spec.load import (
    EnvSpec,
    installed_class_module,
    load_spec,
    reference_kind,
    with_reference,
)


def project_roots() -> list[Path]:
    """Where ``references/`` may live: the working directory, then this checkout."""
    roots = [Path.cwd(), Path(__file__).resolve().parents[2]]
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
    """The spec to verify ``ref`` with, whose reference is ``ref``: ``--spec`` when given, else
    the env.toml beside a reference file (or ``file.py:Class``), else the spec that declares
    this id. A reference that does not exist is bad input, whatever spec came with it."""
    source = reference_file(ref)
    if source is not None and not source.exists():
        raise BadInput(f"reference not found: {source}")
    if spec_path:
        spec = load_spec(spec_path)
    elif source is not None:
        toml = (source if source.is_dir() else source.parent) / "env.toml"
        if not toml.is_file():
            raise BadInput(f"no env.toml beside {ref}; pass --spec (or draft one: envforge init)")
        spec = load_spec(toml)
    else:
        for _, declared in all_specs():
            if declared.reference == ref:
                return declared
        raise BadInput(
            f"no references/*/env.toml declares reference = {ref!r}; draft one with "
            f"`envforge init --ref {ref}` or add --init (or pass --spec)"
        )
    if source is not None and source.is_dir():  # a reference folder: its spec's own reference
        _check_folder(ref, source, spec)
        return spec
    return _with_reference(spec, ref, source)


def _check_folder(ref: str, folder: Path, spec: EnvSpec) -> None:
    """A folder given as ``--ref`` must be the spec's own folder or hold the reference the spec
    names: else what is verified would be some other reference than the one the user named."""
    inside = folder.resolve()
    own = spec.reference_path()
    if spec.root.resolve() == inside:
        return
    if own is not None and own.resolve().is_relative_to(inside):
        return
    raise BadInput(
        f"--ref {ref}: this folder holds neither {spec.root / 'env.toml'} nor the reference it "
        f"names ({spec.reference}); pass the reference itself"
    )


def reference_file(ref: str) -> Path | None:
    """The file a reference names (``env.c``, ``env.py`` of ``env.py:Class``, a folder), or
    None for a registry id (``gymnasium:CartPole-v1``)."""
    if ref.startswith("gymnasium:") or installed_class_module(ref) is not None:
        return None  # an id, or a class of an installed module: imported by name
    if reference_kind(ref) == "python":
        return Path(ref.rsplit(":", 1)[0])
    if ":" in ref and not Path(ref).exists():
        return None  # some other id; only a spec that declares it can say what it is
    return Path(ref)


def _with_reference(spec: EnvSpec, ref: str, source: Path | None) -> EnvSpec:
    """``spec`` with ``ref`` as its reference (unchanged when it already names that one)."""
    if source is None:
        reference = ref
    else:
        own = spec.reference_path()
        if own is not None and own.resolve() == source.resolve():
            return spec
        reference = str(source.resolve())
        if reference_kind(ref) == "python":
            reference += ":" + ref.rsplit(":", 1)[1]
    if reference == spec.reference:
        return spec
    try:
        return with_reference(spec, reference)
    except SpecError as e:
        raise BadInput(
            f"--ref {ref} does not fit {e.path}: key '{e.key}': expected {e.expected}"
        ) from None
