"""Shared fixtures: the pong spec, broken ports as small patches, a derandomized hypothesis profile.

Broken ports are never committed as copies: a test names an exact ``old -> new`` edit of the
shipped port, :func:`apply_patch` applies it to a copy in a temporary directory (asserting the
``old`` text occurs exactly once) and returns the copy with the line numbers the edit wrote.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

# Before anything imports jax (children inherit the environment): CPU only, so results do not
# depend on which accelerator a CI machine happens to have.
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

from envforge.spec import EnvSpec, load_spec  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PONG_SPEC = ROOT / "references" / "pong" / "env.toml"
PONG_PORT = ROOT / "generated" / "pong" / "jax" / "pong.py"
QUICK_SWEEP = 1 << 22
"""The L1 reset sweep of tests that are not about it: by default the verifier sweeps every
seed that fits its time budget (tens of seconds), which the suite cannot pay per verify."""


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``envforge <args>`` through the console entry point, in this process: (exit code,
    stdout, stderr)."""
    from envforge.cli import main

    saved = sys.argv
    sys.argv = ["envforge", *args]
    try:
        with pytest.raises(SystemExit) as ended:
            main()
    finally:
        sys.argv = saved
    out, err = capsys.readouterr()
    code = ended.value.code
    return (code if isinstance(code, int) else 1), out, err


settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


@pytest.fixture(autouse=True)
def _restore_jax_x64():
    """Ports that need float64 (the FrozenLake and Taxi JAX ports) turn on ``jax_enable_x64`` when
    imported; a test that imports one in-process must not change the dtypes of every later test
    (the fused PPO's scan carry is float32)."""
    import sys

    jax = sys.modules.get("jax")
    before = bool(jax.config.read("jax_enable_x64")) if jax is not None else False
    yield
    jax = sys.modules.get("jax")
    if jax is not None and bool(jax.config.read("jax_enable_x64")) != before:
        jax.config.update("jax_enable_x64", before)


@dataclass(frozen=True)
class PatchedPort:
    path: Path
    """The patched module (a copy of the shipped port)."""
    lines: tuple[int, ...]
    """1-based line numbers in ``path`` that the patch's new text occupies."""

    def line_texts(self) -> list[str]:
        text = self.path.read_text().splitlines()
        return [text[n - 1].strip() for n in self.lines]


def apply_patch(source: Path, dest_dir: Path, *edits: tuple[str, str]) -> PatchedPort:
    """Copy ``source`` into ``dest_dir`` applying exact, unique ``(old, new)`` replacements."""
    text = source.read_text()
    spans: list[tuple[int, int]] = []  # (offset, length) of each new text in the current text
    for old, new in edits:
        count = text.count(old)
        assert count == 1, f"patch target occurs {count} times in {source.name}: {old!r}"
        at = text.index(old)
        text = text[:at] + new + text[at + len(old) :]
        shift = len(new) - len(old)
        spans = [(o + shift if o > at else o, n) for o, n in spans] + [(at, len(new))]
    lines: set[int] = set()
    for offset, length in spans:
        first = text.count("\n", 0, offset) + 1
        last = text.count("\n", 0, offset + max(0, length - 1)) + 1
        lines.update(range(first, last + 1))
    dest_dir.mkdir(parents=True, exist_ok=True)
    dest = dest_dir / source.name
    dest.write_text(text)
    return PatchedPort(dest, tuple(sorted(lines)))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "verifies(name): the verification (test_verify_pong.JOBS) a test asserts on"
    )


@pytest.fixture(scope="session")
def pong_spec() -> EnvSpec:
    return load_spec(PONG_SPEC)
