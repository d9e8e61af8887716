"""Every way into envforge, with the untrusted inputs it touches and the door each goes through.

The inventory is code so that a test can hold the source tree to it
(``tests/house/test_one_door.py``): an entry point found in the source (a typer command, an MCP
tool, a workspace script, an agent tool, a name of the Python API) that is not listed here
fails it, and so does a listed one that is gone; docs/SANDBOX.md's entry-point table is this
list, checked by the same test.
"""

from __future__ import annotations

from dataclasses import dataclass

INPUTS = {
    "port": "a port's code and what it says (a shipped, candidate, agent-written or mutated port)",
    "agent files": "files an agent wrote in its workspace (links, FIFOs, planted modules, reports)",
    "reference copy": "a workspace's copy of the reference (reference/)",
    "spec expressions": "a spec's expressions ([[event]], [valid], state rules)",
    "model output": "what a model answers (tool calls, a drafted spec, a drafted version)",
}
"""What envforge never trusts, and what each is."""

DOORS = {
    "driver sandbox": "the port's driver server in the chosen sandbox (sandbox/driver.py "
    "open_sandboxed); replies framed, size-capped, unpickled by allow-list",
    "job sandbox": "a sandboxed job whose one reply is plain data (sandbox/jobs.py run_job)",
    "command sandbox": "Sandbox.run: a shell in the workspace, in the process (or docker) "
    "sandbox, whatever --sandbox says for verification",
    "file rule": "one rule for a file someone else shaped: opened without following a link, a "
    "regular file, size-capped, written new at the destination (untrusted/regular.py, the "
    "host's own port listing in untrusted/port_files.py)",
    "pinned reference": "the real reference, recorded outside the workspace when it was "
    "written; an edited copy is refused before anything builds (workspace/pinned.py)",
    "isolated interpreter": "an absolute interpreter in isolated mode, no cd into the "
    "workspace (untrusted/scripts.py)",
    "bounded expressions": "cost-checked when the spec loads, evaluated within a deadline "
    "(spec/expr.py)",
    "shown as data": "a port's text escaped and its control characters made visible "
    "(untrusted/shown.py)",
    "host reference": "run as a reference on the host: the user's own code, vouched for by "
    "the user (a rules version), said in the command's help",
    "in-process": "the port in the caller's own process: the one deliberate exception, said in "
    "the help and the docstring",
}
"""How an entry point keeps each input from the host."""


@dataclass(frozen=True)
class EntryPoint:
    surface: str
    """command, mcp tool, workspace script, workspace config, agent tool or python api."""
    name: str
    inputs: tuple[str, ...]
    doors: tuple[str, ...]


SURFACES = (
    "command",
    "mcp tool",
    "workspace script",
    "workspace config",
    "agent tool",
    "python api",
)

_VERIFY = ("driver sandbox", "job sandbox", "file rule", "bounded expressions", "shown as data")
_WORKSPACE = ("port", "agent files", "reference copy")

ENTRY_POINTS: tuple[EntryPoint, ...] = (
    EntryPoint("command", "envforge verify", ("port", "spec expressions"), _VERIFY),
    EntryPoint(
        "command",
        "envforge verify --workspace",
        (*_WORKSPACE, "spec expressions"),
        ("pinned reference", *_VERIFY),
    ),
    EntryPoint("command", "envforge list", (), ()),
    EntryPoint(
        "command",
        "envforge translate",
        (*_WORKSPACE, "model output", "spec expressions"),
        ("command sandbox", *_VERIFY),
    ),
    EntryPoint(
        "command",
        "envforge prompt",
        ("port", "reference copy"),
        ("file rule", "pinned reference", "isolated interpreter"),
    ),
    EntryPoint(
        "command",
        "envforge mcp",
        (*_WORKSPACE, "spec expressions"),
        ("pinned reference", "isolated interpreter", *_VERIFY),
    ),
    EntryPoint("command", "envforge cost", (), ()),
    EntryPoint("command", "envforge bench", ("port",), ("job sandbox", "shown as data")),
    EntryPoint("command", "envforge profile", ("port",), ("job sandbox", "shown as data")),
    EntryPoint("command", "envforge mutate", ("port", "spec expressions"), _VERIFY),
    EntryPoint("command", "envforge train", ("port",), ("in-process",)),
    EntryPoint(
        "command",
        "envforge init",
        ("model output", "spec expressions"),
        ("bounded expressions", "file rule"),
    ),
    EntryPoint(
        "command",
        "envforge batch run",
        (*_WORKSPACE, "model output", "spec expressions"),
        ("command sandbox", *_VERIFY),
    ),
    EntryPoint("command", "envforge batch status", ("port",), ("shown as data",)),
    EntryPoint("command", "envforge batch report", ("port",), ("shown as data",)),
    EntryPoint(
        "command",
        "envforge rules check",
        ("agent files", "port", "spec expressions"),
        ("host reference", *_VERIFY),
    ),
    EntryPoint(
        "command",
        "envforge rules compare",
        ("agent files", "spec expressions"),
        ("host reference", "driver sandbox", "file rule", "shown as data"),
    ),
    EntryPoint(
        "command",
        "envforge rules draft",
        ("agent files", "model output"),
        ("command sandbox", "file rule", "isolated interpreter"),
    ),
    EntryPoint("command", "envforge play serve", ("model output",), ("file rule",)),
    EntryPoint("command", "envforge play wait", ("model output",), ("file rule",)),
    EntryPoint(
        "mcp tool", "verify", (*_WORKSPACE, "spec expressions"), ("pinned reference", *_VERIFY)
    ),
    EntryPoint("mcp tool", "repair_prompt", ("port", "agent files"), ("file rule",)),
    EntryPoint("mcp tool", "latest_report", ("agent files",), ("file rule",)),
    EntryPoint("mcp tool", "spec", ("reference copy",), ("pinned reference", "file rule")),
    EntryPoint("mcp tool", "reference", ("reference copy",), ("pinned reference",)),
    EntryPoint(
        "mcp tool", "bench", ("port", "reference copy"), ("pinned reference", "driver sandbox")
    ),
    EntryPoint(
        "workspace script",
        "verify",
        _WORKSPACE,
        ("isolated interpreter", "pinned reference", *_VERIFY),
    ),
    EntryPoint(
        "workspace script",
        "bench",
        ("port", "agent files"),
        ("isolated interpreter", "job sandbox"),
    ),
    EntryPoint(
        "workspace script",
        "profile",
        ("port", "agent files"),
        ("isolated interpreter", "job sandbox"),
    ),
    EntryPoint(
        "workspace script", "check", ("agent files",), ("isolated interpreter", "host reference")
    ),
    EntryPoint("workspace config", ".mcp.json", ("agent files",), ("isolated interpreter",)),
    EntryPoint(
        "workspace config", ".gemini/settings.json", ("agent files",), ("isolated interpreter",)
    ),
    EntryPoint(
        "workspace config", ".codex/config.toml", ("agent files",), ("isolated interpreter",)
    ),
    EntryPoint("agent tool", "read_file", ("agent files",), ("file rule",)),
    EntryPoint("agent tool", "write_file", ("agent files",), ("file rule",)),
    EntryPoint("agent tool", "edit_file", ("agent files",), ("file rule",)),
    EntryPoint("agent tool", "list_files", ("agent files",), ("file rule",)),
    EntryPoint("agent tool", "run_verify", ("port",), _VERIFY),
    EntryPoint("agent tool", "run_command", ("agent files", "model output"), ("command sandbox",)),
    EntryPoint("python api", "envforge.make", ("port",), ("in-process",)),
)
"""Every entry point (tests/house/test_one_door.py keeps this list whole)."""


def table() -> str:
    """The inventory as docs/SANDBOX.md shows it (a Markdown table)."""
    rows = ["| entry point | untrusted inputs | door |", "|---|---|---|"]
    for point in ENTRY_POINTS:
        name = f"`./{point.name}`" if point.surface == "workspace script" else f"`{point.name}`"
        shown = f"{name} ({point.surface})" if point.surface != "command" else name
        inputs = ", ".join(point.inputs) or "none"
        doors = ", ".join(point.doors) or "—"
        rows.append(f"| {shown} | {inputs} | {doors} |")
    return "\n".join(rows) + "\n"
