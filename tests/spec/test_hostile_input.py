"""Hostile input: nesting depth, special files, symlinked workspace
parts, names with control characters. Each is bad input, refused with one line on stderr and
exit code 2 (never a traceback, a hang or a write through a link); a port's own Cargo.toml is a
finding about the port instead."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import PONG_SPEC, ROOT

from envforge.native.rust_build import fetch_workspace_dependencies
from envforge.spec import spec_for_name
from envforge.workspace.write import write_workspace

PONG_C = PONG_SPEC.parent / "pong.c"
DEEP = 3000
"""Brackets deep enough for tomllib's recursion to give out (it did from about 500)."""


def _limit_memory() -> None:  # in the child: /dev/zero read whole must fail fast, not swap
    resource.setrlimit(resource.RLIMIT_AS, (4 * 2**30, 4 * 2**30))


def envforge(*args: str, cwd: Path = ROOT, timeout: float = 60) -> subprocess.CompletedProcess:
    """The CLI in a child with a memory limit; a hang fails the test after ``timeout``."""
    return subprocess.run(
        [sys.executable, "-m", "envforge.cli", *args],
        cwd=cwd,
        env=dict(os.environ, COLUMNS="200"),
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=_limit_memory,
    )


def assert_one_line(result: subprocess.CompletedProcess, *needles: str) -> str:
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr[-2000:])
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr[-2000:]
    assert lines[0].startswith("envforge: error: "), lines[0]
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def manifest(
    folder: Path, name: str, job: str, model: str = "scripted:s.json", head: str = ""
) -> Path:
    path = folder / f"{name}.toml"
    path.write_text(
        f"[batch]\ntotal_budget_usd = 1\n{head}[[job]]\nname = {json.dumps(job)}\n"
        f"model = {json.dumps(model)}\nref = {json.dumps(str(PONG_C))}\n"
    )
    return path


def test_deeply_nested_toml_is_refused_in_one_line(tmp_path: Path) -> None:
    """Case 13: a spec, a manifest and a port's Cargo.toml, each 3000 arrays deep."""
    deep = "deep = " + "[" * DEEP + "]" * DEEP + "\n"
    (tmp_path / "ref").mkdir()
    shutil.copy(PONG_C, tmp_path / "ref" / "pong.c")
    (tmp_path / "ref" / "env.toml").write_text(deep + PONG_SPEC.read_text())
    line = assert_one_line(
        envforge("verify", "--ref", str(tmp_path / "ref" / "pong.c")), "valid TOML"
    )
    assert "nested more than 64 deep" in line and str(tmp_path / "ref" / "env.toml") in line

    batch = manifest(tmp_path, "deep", "a")
    batch.write_text(deep + batch.read_text())
    assert_one_line(envforge("batch", "status", str(batch)), "not valid TOML", "nested more than")

    # an agent's command left this crate in its workspace: translate's host fetch step reads
    # it before the next sandboxed command, and a problem there is reported, not raised
    crate = tmp_path / "workspace" / "port"
    crate.mkdir(parents=True)
    (crate / "Cargo.toml").write_text('[package]\nname = "p"\n' + deep)
    [problem] = fetch_workspace_dependencies(tmp_path / "workspace")
    assert "Cargo.toml does not parse" in problem and "nested more than 64 deep" in problem


def test_model_scripts_must_be_regular_files(tmp_path: Path) -> None:
    """Case 14: ``scripted:/dev/zero`` read until memory ran out; a FIFO blocked for ever."""
    (tmp_path / "s.json").write_text("[]")
    zero = manifest(tmp_path, "zero", "a", "scripted:/dev/zero")
    assert_one_line(envforge("batch", "run", str(zero)), "/dev/zero", "not a regular file")
    os.mkfifo(tmp_path / "fifo.json")
    fifo = manifest(tmp_path, "fifo", "a", "scripted:fifo.json")
    assert_one_line(envforge("batch", "run", str(fifo)), "fifo.json", "(a FIFO)")
    replay = manifest(tmp_path, "replay", "a", "replay:fifo.json")
    assert_one_line(envforge("batch", "run", str(replay)), "cassette", "(a FIFO)")
    # a script that nests too deep for json is refused like any other malformed script
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    deep = manifest(tmp_path, "deep", "a", "scripted:deep.json")
    assert_one_line(envforge("batch", "run", str(deep)), "deep.json", "not a JSON model script")


def test_workspace_parts_that_are_links_are_refused(tmp_path: Path) -> None:
    """Case 15: ``prompt --out`` onto a workspace an agent has worked in: a linked reference/
    gave an OSError traceback; a linked AGENTS.md was written through (its target replaced)."""
    victim = tmp_path / "victim.txt"
    victim.write_text("not yours\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("kept\n")
    ws = write_workspace(spec_for_name("pong"), "jax", tmp_path / "ws").root

    shutil.rmtree(ws / "reference")
    (ws / "reference").symlink_to(elsewhere)
    assert_one_line(envforge("prompt", "pong", "--out", str(ws)), "reference", "symbolic link")
    assert (elsewhere / "keep.txt").read_text() == "kept\n"
    (ws / "reference").unlink()

    (ws / "AGENTS.md").unlink()
    (ws / "AGENTS.md").symlink_to(victim)
    assert_one_line(envforge("prompt", "pong", "--out", str(ws)), "AGENTS.md", "symbolic link")
    assert victim.read_text() == "not yours\n"
    (ws / "AGENTS.md").unlink()

    (ws / "CLAUDE.md").unlink()
    os.mkfifo(ws / "CLAUDE.md")  # writing would block until a reader came
    assert_one_line(envforge("prompt", "pong", "--out", str(ws)), "CLAUDE.md", "not a file")
    (ws / "CLAUDE.md").unlink()
    assert envforge("prompt", "pong", "--out", str(ws)).returncode == 0  # plain parts again
    assert (ws / "AGENTS.md").is_file() and not (ws / "AGENTS.md").is_symlink()


def test_what_the_user_names_is_what_is_used(tmp_path: Path) -> None:
    """Case 16: ``--ref <empty folder> --spec pong`` verified pong.c instead (exit 0); names
    ending in a newline were accepted (a port landed in a folder whose name ends in one)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    line = assert_one_line(
        envforge("verify", "--ref", str(empty), "--spec", str(PONG_SPEC), "--levels", "0"),
        "--ref",
    )
    assert str(empty) in line and "pong.c" in line

    (tmp_path / "s.json").write_text("[]")
    job = manifest(tmp_path, "job", "a\n")
    assert_one_line(envforge("batch", "run", str(job)), "name", "'a\\n'")
    batch = manifest(tmp_path, "batch", "a", head='name = "b\\n"\n')
    assert_one_line(envforge("batch", "status", str(batch)), "batch.name", "'b\\n'")
    for option, value in (("--job", "j\n"), ("--out", "out\n"), ("--workspace", "w\x1b[2J")):
        assert_one_line(
            envforge("translate", "--ref", str(PONG_C), option, value), option, "control"
        )
    assert_one_line(envforge("prompt", "pong", "--out", "ws\r"), "--out", "control")

    (tmp_path / "ref").mkdir()
    shutil.copy(PONG_C, tmp_path / "ref" / "pong.c")
    spec = PONG_SPEC.read_text()
    (tmp_path / "ref" / "env.toml").write_text(spec.replace('name = "pong"', 'name = "pong\\n"', 1))
    assert_one_line(envforge("verify", "--ref", str(tmp_path / "ref" / "pong.c")), "'name'")
