"""Bad input at the command line: exit code 2 and one clear line on stderr. A port that breaks
the contract or raises is not bad input: it is a verdict (exit 1) with a finding."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PONG_PORT, PONG_SPEC, ROOT, apply_patch


def envforge(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "envforge.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def assert_bad_input(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    [line] = lines
    assert line.startswith("envforge: error: "), line
    for needle in needles:
        assert needle in line, line
    return line


def reference_with_spec(tmp_path: Path, old: str, new: str) -> Path:
    """A copy of pong.c with pong's env.toml beside it, edited (exact, unique match)."""
    text = PONG_SPEC.read_text()
    assert text.count(old) == 1
    (tmp_path / "env.toml").write_text(text.replace(old, new))
    ref = tmp_path / "pong.c"
    ref.write_text((PONG_SPEC.parent / "pong.c").read_text())
    return ref


def test_missing_reference_file(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "pong.c"
    assert_bad_input(envforge("verify", "--ref", str(missing)), "reference not found", str(missing))


def test_missing_spec_file(tmp_path: Path) -> None:
    missing = tmp_path / "env.toml"
    assert_bad_input(
        envforge("verify", "--ref", str(PONG_SPEC.parent / "pong.c"), "--spec", str(missing)),
        str(missing),
    )


def test_missing_port(tmp_path: Path) -> None:
    assert_bad_input(
        envforge("verify", "pong", "--port", str(tmp_path / "no_port")), "port not found"
    )


@pytest.mark.parametrize(
    ("old", "new", "needles"),
    [
        ("episode_cap = 10000", "episode_cap = = 10000", ["(syntax)", "valid TOML"]),
        ("episode_cap = 10000", 'episode_cap = "ten"', ["'episode_cap'", "integer", "'ten'"]),
        (
            "episode_cap = 10000",
            "episode_cap = 10000\nepisod_cap = 1",
            ["'episod_cap'", "no such key"],
        ),
    ],
    ids=["toml_syntax", "wrong_type", "unknown_key"],
)
def test_malformed_spec(tmp_path: Path, old: str, new: str, needles: list[str]) -> None:
    ref = reference_with_spec(tmp_path, old, new)
    line = assert_bad_input(envforge("verify", "--ref", str(ref)), *needles)
    assert str(tmp_path / "env.toml") in line


def test_unknown_env_name() -> None:
    assert_bad_input(envforge("verify", "pongg"), "unknown env 'pongg'", "pong")


@pytest.mark.parametrize("levels", ["0-9", "one", "3-1"])
def test_bad_levels(levels: str) -> None:
    assert_bad_input(envforge("verify", "pong", "--levels", levels), "--levels", repr(levels))


def verify_json(tmp_path: Path, *edits: tuple[str, str], extra: tuple[str, ...] = ()):
    port = apply_patch(PONG_PORT, tmp_path / "port", *edits)
    result = envforge(
        "verify",
        "--ref",
        str(PONG_SPEC.parent / "pong.c"),
        "--port",
        str(port.path),
        "--levels",
        "0-3",
        "--json",
        *extra,
    )
    return result.returncode, json.loads(result.stdout)


def test_port_with_wrong_shapes_fails_every_level(tmp_path: Path) -> None:
    """Each state field comes back with an extra axis. L0 names the contract item; with
    --all-levels the comparing levels fail on the contract too instead of crashing."""
    code, report = verify_json(
        tmp_path,
        (
            "    return state._asdict()",
            "    return {k: v[None] for k, v in state._asdict().items()}",
        ),
        extra=("--all-levels",),
    )
    assert code == 1
    assert report["verdict"] == "not equivalent"
    assert [lv["status"] for lv in report["levels"]] == ["fail"] * 4
    first = report["levels"][0]["findings"][0]
    assert first["check"] == "contract.reset"
    assert "has shape (1,), spec says ()" in first["message"]
    for level in report["levels"][1:]:
        [finding] = level["findings"]
        assert finding["check"] == "contract"
        assert finding["extra"]["side"] == "port"
        assert "spec says ()" in finding["message"]


def test_port_that_raises_is_an_error_verdict(tmp_path: Path) -> None:
    code, report = verify_json(
        tmp_path,
        (
            "    total = f32(0.0) + jnp.zeros((), jnp.float32)",
            '    raise NotImplementedError("frameskip")',
        ),
    )
    assert code == 1
    [level] = report["levels"]
    assert level["status"] == "error"
    [finding] = level["findings"]
    assert finding["check"] == "exception"
    assert finding["extra"] == {"side": "port", "call": "step"}
    assert "NotImplementedError: frameskip" in finding["message"]


def test_bad_seed_sweep() -> None:
    assert_bad_input(envforge("verify", "pong", "--seed-sweep", "2^40"), "--seed-sweep", "2^32")
