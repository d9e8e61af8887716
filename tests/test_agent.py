"""The agent loop, its workspace tools and the process sandbox, with a scripted model."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from envforge.agents.loop import Agent, AgentLimits
from envforge.agents.messages import INVALID_ARGUMENTS, ToolCall, ToolResult, user
from envforge.agents.scripted import ScriptedModel, reply
from envforge.agents.tools import WorkspaceTools
from envforge.sandbox.base import SandboxLimits
from envforge.sandbox.process import ProcessSandbox

TOOL_NAMES = ["read_file", "write_file", "edit_file", "list_files", "run_verify", "run_command"]


def call(name: str, **arguments: object) -> ToolCall:
    return ToolCall(f"id-{name}", name, dict(arguments))


def run(tools: WorkspaceTools, name: str, **arguments: object) -> ToolResult:
    return tools.execute(call(name, **arguments))


@pytest.fixture
def tools(tmp_path: Path) -> WorkspaceTools:
    return WorkspaceTools(tmp_path / "ws", verify=lambda levels: f"verified levels {levels}")


def test_the_six_tools_have_exactly_the_issue_names(tools: WorkspaceTools) -> None:
    assert [spec.name for spec in tools.specs] == TOOL_NAMES
    for spec in tools.specs:
        assert spec.parameters["type"] == "object" and spec.description


def test_write_read_edit_and_list_stay_in_the_workspace(tools: WorkspaceTools) -> None:
    assert not run(tools, "write_file", path="port/env.py", content="A = 1\nB = 1\n").is_error
    assert run(tools, "read_file", path="port/env.py").content == "A = 1\nB = 1\n"
    edited = run(tools, "edit_file", path="port/env.py", old="B = 1", new="B = 2")
    assert not edited.is_error and "line 2" in edited.content
    assert (tools.root / "port/env.py").read_text() == "A = 1\nB = 2\n"
    (tools.root / "port" / "__pycache__").mkdir()
    (tools.root / "port" / "__pycache__" / "env.pyc").write_bytes(b"x")
    listing = run(tools, "list_files", path=".").content
    assert "port/env.py" in listing and "pycache" not in listing


def test_edit_file_needs_one_exact_match(tools: WorkspaceTools) -> None:
    run(tools, "write_file", path="a.py", content="x = 1\nx = 1\ny = 2\n")
    missing = run(tools, "edit_file", path="a.py", old="z = 3", new="z = 4")
    twice = run(tools, "edit_file", path="a.py", old="x = 1", new="x = 5")
    spacing = run(tools, "edit_file", path="a.py", old="y=2", new="y = 3")
    assert missing.is_error and "not found" in missing.content
    assert twice.is_error and "2 times" in twice.content
    assert spacing.is_error
    assert (tools.root / "a.py").read_text() == "x = 1\nx = 1\ny = 2\n"


@pytest.mark.parametrize(
    "path", ["../escape.txt", "/tmp/escape.txt", "port/../../escape.txt", "link/x.txt"]
)
def test_paths_cannot_leave_the_workspace(tools: WorkspaceTools, tmp_path: Path, path: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (tools.root / "link").symlink_to(outside)
    result = run(tools, "write_file", path=path, content="nope")
    assert result.is_error and "outside the workspace" in result.content
    assert run(tools, "read_file", path=path).is_error
    assert not (tmp_path / "escape.txt").exists() and not (outside / "x.txt").exists()


def test_bad_calls_are_errors_the_model_can_read(tools: WorkspaceTools) -> None:
    assert "unknown tool" in run(tools, "delete_everything").content
    assert "missing argument" in run(tools, "write_file", path="a").content
    assert "unknown argument" in run(tools, "read_file", path="a", mode="rb").content
    assert "must be a string" in run(tools, "read_file", path=3).content
    bad_json = tools.execute(ToolCall("x", "read_file", {INVALID_ARGUMENTS: "{path: a"}))
    assert bad_json.is_error and "not valid JSON" in bad_json.content
    assert run(tools, "run_verify", levels="0-1").content == "verified levels 0-1"


def test_commands_run_in_the_workspace_without_keys_and_bounded(tmp_path: Path) -> None:
    os.environ["ENVFORGE_TEST_API_KEY"] = "do-not-leak"
    try:
        sandbox = ProcessSandbox(SandboxLimits(wall_s=1.0, output_chars=300, file_size_mb=1))
        tools = WorkspaceTools(tmp_path / "ws", sandbox=sandbox)
        here = run(tools, "run_command", command="pwd; env | grep -c API_KEY; exit 3").content
        assert here.startswith("[exit code 3]") and "\n.\n0\n" in here  # cwd shown relative
        noisy = run(tools, "run_command", command="seq 1 100000").content
        assert (
            "output truncated" in noisy
            and "bytes cut" in noisy
            and noisy.rstrip().endswith("100000")
        )
        big = run(tools, "run_command", command="head -c 3000000 /dev/zero > big.bin").content
        assert "exit code 0" not in big and (tools.root / "big.bin").stat().st_size <= 1024 * 1024

        started = time.monotonic()
        hung = run(tools, "run_command", command="sleep 30.4321 & sleep 30").content
        assert "wall-clock limit" in hung and time.monotonic() - started < 10
        time.sleep(0.1)
        # the background child died with its group (found by its command line: a pid inside
        # the sandbox's pid namespace means nothing out here)
        assert not [pid for pid in _processes() if "sleep\x0030.4321" in pid[1]]
    finally:
        del os.environ["ENVFORGE_TEST_API_KEY"]


def _processes() -> list[tuple[int, str]]:
    """(pid, command line with NULs) of every live process."""
    out = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        pid = int(cmdline.parent.name)
        try:
            if _running(pid):
                out.append((pid, cmdline.read_bytes().decode(errors="replace")))
        except OSError:
            continue
    return out


def _running(pid: int) -> bool:
    """Alive and not a zombie (an unreaped dead process still answers kill(pid, 0))."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def test_agent_runs_tools_until_the_model_stops(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            reply(
                calls=[
                    ("write_file", {"path": "notes.txt", "content": "one"}),
                    ("read_file", {"path": "notes.txt"}),
                ],
                turn=1,
            ),
            reply(calls=[("edit_file", {"path": "notes.txt", "old": "one", "new": "two"})], turn=2),
            reply("All done."),
        ]
    )
    agent = Agent(model, WorkspaceTools(tmp_path), AgentLimits(max_steps=10))
    result = agent.run("system", user("context", "task", cache_first=True))
    assert (result.status, result.message, result.steps) == ("submitted", "All done.", 3)
    assert (tmp_path / "notes.txt").read_text() == "two"
    second = model.requests[1]
    assert second.system == "system" and second.tools == agent.tools.specs
    results = second.messages[-1].tool_results
    assert [r.content for r in results] == ["wrote 3 characters to notes.txt", "one"]


def test_step_and_time_limits_end_the_episode(tmp_path: Path) -> None:
    looping = ScriptedModel(
        [reply(calls=[("list_files", {"path": "."})], turn=i) for i in range(10)]
    )
    stepped = Agent(looping, WorkspaceTools(tmp_path), AgentLimits(max_steps=3)).run("s", user("t"))
    assert (stepped.status, stepped.steps, len(looping.requests)) == ("step_limit", 3, 3)

    timed = Agent(ScriptedModel([]), WorkspaceTools(tmp_path), AgentLimits(max_wall_s=0)).run(
        "s", user("t")
    )
    assert timed.status == "time_limit" and timed.steps == 0
