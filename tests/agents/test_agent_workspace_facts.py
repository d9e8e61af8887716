"""What an agent reads in an `envforge prompt` workspace states the spec's facts, once and alike.

Every shipped env's workspace is rendered for both targets (no verify runs) and read the way an
agent reads it: AGENTS.md stays under 20 KB; its field table, observation, action, episode cap,
comparison and randomness lines say what env.toml says, each exactly once, and no other sentence
of it contradicts them (an exact spec's prose never speaks of tolerances); a Rust task never asks
to derive `Default` for an array Rust cannot derive it for; the files the reference loads are
named with how the port gets them; the README tables of field dtypes and shapes agree with the
spec; and no file of the workspace points at a shipped port (`generated/`) or holds the
project's own notes (status, campaigns, benchmarks).
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT

from envforge.prompts.render import RUST_DEFAULT_MAX
from envforge.prompts.render import TARGETS as PROMPT_TARGETS
from envforge.spec import EnvSpec, load_spec
from envforge.verify.stats import compare_samples
from envforge.verify.verdict import LevelResult, Report
from envforge.workspace.agent_task import QUOTE_UNDER, TASK_MAX
from envforge.workspace.next_prompt import next_repair_prompt
from envforge.workspace.reference_copy import (
    PROJECT_NOTES,
    SHIPPED_PORTS,
    implementer_notes,
    without_port_table,
)
from envforge.workspace.write import TASK_FILES, write_workspace

ENVS = sorted(p.parent.name for p in (ROOT / "references").glob("*/env.toml"))
TARGETS = tuple(PROMPT_TARGETS)  # every target envforge can write a task for
DTYPES = {"float32", "float64", "int32", "int64", "uint8", "uint32", "int8", "int16", "bool"}


def prose(task: str) -> str:
    """The task without fenced blocks (quoted source, code examples): the sentences envforge
    writes about this env."""
    return re.sub(r"^(`{3,})[^\n]*\n.*?^\1[ \t]*$", "", task, flags=re.DOTALL | re.MULTILINE)


def _once(text: str, pattern: str) -> re.Match[str] | None:
    found = list(re.finditer(pattern, text, flags=re.MULTILINE))
    return found[0] if len(found) == 1 else None


def _shape(spec_shape: tuple[int, ...]) -> str:
    return str(list(spec_shape)) if spec_shape else "scalar"


def _bare_spec_table(task: str) -> list[list[str]]:
    section = task.split("## The env spec", 1)[1].split("\n- Observation:", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    return [[c.strip() for c in row.strip("|").split("|")] for row in rows[1:]]  # no header


def readme_rows(text: str) -> list[dict[str, str]]:
    """The rows of every markdown table in ``text``, each as {header: cell}."""
    rows: list[dict[str, str]] = []
    header: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("|"):
            header = []
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if not header:
            header = [c.lower() for c in cells]
        elif not line.startswith("|---"):
            rows.append(dict(zip(header, cells, strict=False)))
    return rows


def check_workspace(root: Path, spec: EnvSpec, target: str) -> list[str]:
    """What the workspace at ``root`` states that the spec does not (empty: nothing)."""
    problems: list[str] = []
    task = (root / "AGENTS.md").read_text()
    size = len(task.encode())
    if size >= TASK_MAX:
        problems.append(f"AGENTS.md is {size} bytes (limit {TASK_MAX})")
    text = prose(task)
    # the comparison: one line, the spec's mode and tolerances, no other sentence about it
    compare = _once(text, r"^- Comparison: (exact|tolerance)(?: \(atol (\S+), rtol (\S+)\))?")
    if compare is None:
        problems.append("not exactly one '- Comparison:' line")
    else:
        if compare.group(1) != spec.compare.mode:
            problems.append(f"Comparison: {compare.group(1)}, spec says {spec.compare.mode}")
        if spec.compare.mode == "tolerance" and (
            float(compare.group(2).rstrip(")")) != spec.compare.atol
            or float(compare.group(3).rstrip(")")) != spec.compare.rtol
        ):
            problems.append(f"tolerances {compare.group(2)}/{compare.group(3)} differ")
    field_tolerances = any(f.atol is not None or f.rtol is not None for f in spec.state)
    if spec.compare.mode == "exact" and not field_tolerances and "toleran" in text.lower():
        problems.append("an exact spec's task speaks of tolerances")
    if spec.compare.mode == "tolerance" and "bit for bit" in text:
        problems.append("a tolerance spec's task asks for bit-for-bit results")
    # the field table: the spec's fields, in order, with their dtypes and shapes
    table = _bare_spec_table(task)
    stated = [(row[0], row[1], row[2]) for row in table]
    wanted = [(f.name, f.dtype, _shape(f.shape)) for f in spec.state]
    if stated != wanted:
        problems.append(f"field table {stated} is not the spec's {wanted}")
    obs = _once(text, r"^- Observation: shape (\[[^\]]*\]), (\w+)")
    if obs is None or (obs.group(1), obs.group(2)) != (
        str(list(spec.observation.shape)),
        spec.observation.dtype,
    ):
        problems.append("the observation line is missing, repeated or not the spec's")
    if spec.action.type == "discrete":
        action = _once(text, r"^- Action: discrete, (\d+) actions")
        if action is None or int(action.group(1)) != spec.action.n:
            problems.append("the action line is missing, repeated or not the spec's")
    cap = _once(text, r"^- Episode cap: (\d+) steps")
    if cap is None or int(cap.group(1)) != spec.episode_cap:
        problems.append("the episode cap line is missing, repeated or not the spec's")
    rng = _once(text, r"^- Randomness: (\w+)")
    if rng is None or rng.group(1) != spec.rng.mode:
        problems.append("the randomness line is missing, repeated or not the spec's")
    in_step = re.findall(r"^- Randomness inside `step`: (\w+)", text, flags=re.MULTILINE)
    if in_step != ([spec.rng.step] if spec.rng.step in ("tape", "distribution") else []):
        problems.append(f"randomness inside step stated as {in_step}, spec {spec.rng.step}")
    if target == "rust":
        n = spec.observation.shape
        if f"obs {spec.observation.dtype}[n, {', '.join(map(str, n))}]" not in task:
            problems.append("the Rust contract's obs buffer is not the spec's dtype and shape")
        large = [f.name for f in spec.state if len(f.shape) and _size(f.shape) > RUST_DEFAULT_MAX]
        if large and ("derive(Clone, Copy, Default)" in task or "impl Default" not in task):
            problems.append(f"asks to derive Default for arrays over 32 elements: {large}")
        if "compares with tolerances" in task and spec.compare.mode != "tolerance":
            problems.append("the Rust rules say tolerances for an exact spec")
    # the files the reference loads: named, present, and how the port gets what it needs
    for name in spec.sources:
        if f"reference/{name}" not in task or not (root / "reference" / name).is_file():
            problems.append(f"reference/{name} is not named or not in the workspace")
    if spec.sources and "into the port as constants" not in task:
        problems.append("the task does not say how the port gets what the reference loads")
    # README: the implementer's part, its field tables agreeing with the spec
    readme = root / "reference" / "README.md"
    if readme.is_file():
        notes = readme.read_text()
        if PROJECT_NOTES[:20] in notes or "## The project's notes" in notes:
            problems.append("reference/README.md holds the project's notes")
        problems += readme_disagreements(notes, spec)
    # no pointer to a shipped port anywhere, env.toml without [port]
    for path in root.rglob("*"):
        if path.is_file() and SHIPPED_PORTS in path.read_text(errors="replace"):
            problems.append(f"{path.relative_to(root)} names {SHIPPED_PORTS}")
    if re.search(r"^\s*\[port\]", (root / "reference" / "env.toml").read_text(), re.MULTILINE):
        problems.append("reference/env.toml keeps [port]")
    return problems


def _size(shape: tuple[int, ...]) -> int:
    count = 1
    for n in shape:
        count *= n
    return count


def readme_disagreements(notes: str, spec: EnvSpec) -> list[str]:
    """Rows of README tables that name spec fields (backticked, first column) and state a dtype
    or a shape (columns so headed) other than the spec's."""
    fields = {f.name: f for f in spec.state}
    found = []
    for row in readme_rows(notes):
        names = re.findall(r"`([^`]+)`", next(iter(row.values()), ""))
        if not names or not all(n in fields for n in names):
            continue
        for name in names:
            f = fields[name]
            dtype = row.get("dtype", "")
            if dtype in DTYPES and dtype != f.dtype:
                found.append(f"README: {name} is {dtype}, the spec says {f.dtype}")
            shape = re.fullmatch(r"\[([\d, ]*)\]", row.get("shape", ""))
            if shape and tuple(int(x) for x in shape.group(1).split(",") if x.strip()) != f.shape:
                found.append(f"README: {name} has shape {row['shape']}, the spec {list(f.shape)}")
    return found


@pytest.mark.parametrize("env", ENVS)
def test_every_shipped_workspace_states_the_specs_facts_once(env: str, tmp_path: Path) -> None:
    spec = load_spec(ROOT / "references" / env / "env.toml")
    for target in TARGETS:
        root = tmp_path / target
        write_workspace(spec, target, root)
        task = (root / "AGENTS.md").read_text()
        assert all((root / name).read_text() == task for name in TASK_FILES)
        assert check_workspace(root, spec, target) == [], target


def test_the_checker_finds_what_an_old_workspace_said(tmp_path: Path) -> None:
    """The checks above fail on a workspace as envforge wrote it before (the CHIP-8 Rust task of
    2026-12-02: 44 KB, "compares with tolerances" beside "Comparison: exact", derive(Default) on
    `[u8; 4096]`, README with status and the shipped ports, env.toml's [port])."""
    spec = load_spec(ROOT / "references" / "chip8" / "env.toml")
    root = tmp_path / "ws"
    write_workspace(spec, "rust", root)
    task = (root / "AGENTS.md").read_text()
    old = task.replace(
        "this spec does not set strict float, so it changes\n  nothing here.",
        "this spec compares with tolerances.",
    ).replace("`#[derive(Clone)]` struct", "`#[derive(Clone, Copy, Default)]` struct")
    old = old.replace("impl Default", "Default") + "x" * TASK_MAX
    (root / "AGENTS.md").write_text(old)
    (root / "reference" / "README.md").write_text(
        (ROOT / "references" / "chip8" / "README.md").read_text()
    )
    (root / "reference" / "env.toml").write_text(
        (ROOT / "references" / "chip8" / "env.toml").read_text()
    )
    problems = "\n".join(check_workspace(root, spec, "rust"))
    for expected in (
        "AGENTS.md is",
        "an exact spec's task speaks of tolerances",
        "derive Default",
        "the Rust rules say tolerances",
        "holds the project's notes",
        "reference/README.md names generated/",
        "reference/env.toml names generated/",
        "keeps [port]",
    ):
        assert expected in problems, expected


def test_a_readme_table_that_contradicts_the_spec_is_found() -> None:
    spec = load_spec(ROOT / "references" / "chip8" / "env.toml")
    table = "| field | dtype | shape |\n|---|---|---|\n| `memory` | uint8 | [2048] |\n"
    assert readme_disagreements(table, spec) == ["README: memory has shape [2048], the spec [4096]"]
    assert readme_disagreements(table.replace("uint8 | [2048]", "int32 | [4096]"), spec) == [
        "README: memory is int32, the spec says uint8"
    ]


def test_readme_and_env_toml_lose_what_the_project_keeps() -> None:
    readme = (
        "# x\n\nThe environment.\nPort: `generated/x/jax`.\nOther: `my/ports/x`.\n\n"
        f"## State\n\nfields\n\n{PROJECT_NOTES}\n\n## Status\n\nkilled 20 of 21\n"
    )
    kept = implementer_notes(readme, ("my/ports/x",))
    assert kept == "# x\n\nThe environment.\n\n## State\n\nfields\n"
    toml = 'name = "x"\n\n[port]\njax = "generated/x/jax"  # shipped\n\n[rng]\nmode = "sync"\n'
    assert without_port_table(toml) == 'name = "x"\n\n[rng]\nmode = "sync"\n'
    inline = 'name = "x"\nport = {jax = "generated/x/jax"}\nport.rust = "p"\n[rng]\nport = 1\n'
    assert without_port_table(inline) == 'name = "x"\n[rng]\nport = 1\n'
    assert without_port_table('[port.jax]\npath = "p"\n[x]\n') == "[x]\n"


def test_large_references_are_named_not_quoted_small_ones_quoted(tmp_path: Path) -> None:
    chip8 = write_workspace(load_spec(ROOT / "references" / "chip8" / "env.toml"), "jax", tmp_path)
    task = (chip8.root / "AGENTS.md").read_text()
    assert "class Chip8Breakout" not in task and "`reference/chip8.py` (" in task
    assert 'python -c "import\n  chip8;' in task  # how to print what the reference computes
    assert (
        'python -c "import chip8; print(chip8.ROM.hex())'
        in (chip8.root / "reference" / "README.md").read_text()
    )
    pong = write_workspace(
        load_spec(ROOT / "references" / "pong" / "env.toml"), "jax", tmp_path / "p"
    )
    pong_task = (pong.root / "AGENTS.md").read_text()
    assert "### reference/pong.c" in pong_task and len(pong_task.encode()) < QUOTE_UNDER


def test_a_pass_at_some_levels_says_which_remain() -> None:
    report = Report("pong", "pong.c", "port", [LevelResult(0, "pass")], requested=[0])
    line = report.verdict_line()
    assert line == "verdict: equivalent at level 0 only; levels 1-3 not run yet", line
    full = Report(
        "pong", "pong.c", "port", [LevelResult(n, "pass") for n in range(4)], requested=[0, 1, 2, 3]
    )
    assert full.verdict_line() == "verdict: equivalent"
    spec = load_spec(ROOT / "references" / "pong" / "env.toml")
    text = next_repair_prompt(report, spec, Path("port"), "0", "./verify {levels}", [ROOT])
    assert "levels 1-3 not run yet" in text and "`./verify 0-3` passes all of 0-3" in text
    assert "nothing to repair" not in text


def test_scipy_warnings_are_captured_where_they_arise() -> None:
    """Welch's t-test on nearly identical samples made scipy print a precision-loss warning
    above the report; it is captured in envforge.verify.stats, and such samples are decided by their
    means (scipy's p-value there is unreliable)."""
    nearly = np.full(20, 3.0)
    nearly[0] += 1e-12
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning that escapes fails the test
        same = compare_samples("x", nearly, np.full(20, 3.0) + 1e-13)
        other = compare_samples("x", nearly, np.full(20, 4.0) + 1e-13)
        spread = compare_samples("x", np.array([1.0, 2, 3, 4]), np.array([1.0, 2, 3, 5]))
    assert (same.p_value, other.p_value) == (1.0, 0.0)
    assert 0.5 < spread.p_value < 1.0  # an ordinary Welch test still comes from scipy
