"""The crates a Rust port may depend on, and how a port's Cargo.toml names them.

Both the translation prompt (``prompts/render.py``: what the agent may use) and the preflight
(``preflight.py``: is each one vendored for an offline build) read this list, so it lives on
its own rather than in either.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RustCrate:
    name: str
    version: str
    """A caret requirement, as the port's Cargo.toml writes it."""
    features: tuple[str, ...] = ()

    def requirement(self) -> str:
        """The dependency line of a port's Cargo.toml."""
        if not self.features:
            return f'{self.name} = "{self.version}"'
        features = ", ".join(f'"{f}"' for f in self.features)
        return f'{self.name} = {{ version = "{self.version}", features = [{features}] }}'

    def vendored_in(self, vendor: Path) -> bool:
        """``cargo vendor --versioned-dirs`` writes ``<name>-<full version>`` folders."""
        major, _, minor = self.version.partition(".")
        prefix = f"{self.name}-{major}." + (f"{minor.split('.')[0]}." if major == "0" else "")
        return vendor.is_dir() and any(p.name.startswith(prefix) for p in vendor.iterdir())


RUST_CRATES = (
    RustCrate("pyo3", "0.30", ("extension-module",)),
    RustCrate("numpy", "0.30"),
    RustCrate("rayon", "1.10"),
)
"""The only dependencies a Rust port may use: builds run offline from the vendored copies."""
