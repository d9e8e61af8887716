"""The process and docker sandboxes against hostile generated code.

Each hostile behaviour (open a socket, write outside the workspace, fork-bomb, allocate 50 GB,
loop forever) runs twice per sandbox: as an agent command (``Sandbox.run``) and inside a port
that the verifier drives. Either way it must be stopped and reported, and the verifier must go
on: it returns a report with a Finding instead of dying, and verifies the next port normally.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import QUICK_SWEEP

import envforge
from envforge.sandbox.base import Sandbox, SandboxLimits
from envforge.sandbox.confine import probe
from envforge.sandbox.docker import OWNER_LABEL, docker_available
from envforge.sandbox.select import choose_sandbox, open_sandbox
from envforge.spec import spec_for_name
from envforge.verify.context import VerifyOptions
from envforge.verify.runner import verify

ROOT = Path(__file__).resolve().parents[2]
REPO = Path(envforge.__file__).resolve().parents[1]
KINDS = [
    "process",
    pytest.param(
        "docker", marks=pytest.mark.skipif(not docker_available(), reason="no docker engine")
    ),
]
LIMITS = SandboxLimits(wall_s=5.0, output_chars=4000, max_pids=128, memory_mb=2048)


@pytest.fixture(params=KINDS)
def sandbox(request: pytest.FixtureRequest) -> Sandbox:
    opened = open_sandbox(request.param, LIMITS)
    assert opened is not None
    if request.param == "process" and not probe().network_namespace:
        pytest.skip("this kernel refuses network namespaces")
    return opened


class Listener:
    """A TCP server on the host's loopback that records whatever reaches it."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.received: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                self.received.append(conn.recv(100))


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.server.close()


@pytest.fixture
def outside() -> Iterator[Path]:
    """A path outside any workspace, in a directory the host user may write."""
    path = REPO / f"sandbox-escape-{uuid.uuid4().hex[:8]}"
    yield path
    path.unlink(missing_ok=True)


HOSTILE = {
    "network": """
    import socket
    with socket.create_connection(("127.0.0.1", {port}), timeout=5) as s:
        s.sendall(b"leak")
""",
    "write": """
    with open({outside!r}, "w") as f:
        f.write("escaped")
""",
    "fork": """
    import os
    while True:
        try:
            os.fork()
        except OSError:
            pass
""",
    "memory": """
    global HOARD
    HOARD = bytearray(50 * 1024**3)
""",
    "loop": """
    while True:
        pass
""",
}
SHELL = {
    "network": 'python3 -c \'import socket; socket.create_connection(("127.0.0.1", {port}), 5).sendall(b"leak")\'',
    "write": "echo escaped > {outside}",
    "fork": "bomb() {{ bomb | bomb & }}; bomb; sleep 60",
    "memory": "python3 -c 'x = bytearray(50 * 1024**3); print(len(x))'",
    "loop": "while true; do :; done",
}


# ---- commands ----------------------------------------------------------------------------------


def test_commands_write_only_their_workspace(sandbox: Sandbox, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    result = sandbox.run("echo inside > inside.txt && cat inside.txt && pwd", ws)
    assert result.exit_code == 0, result.output
    assert (ws / "inside.txt").read_text() == "inside\n"
    assert str(ws) in result.output


@pytest.mark.parametrize("behaviour", sorted(SHELL))
def test_hostile_commands_are_stopped(
    sandbox: Sandbox, behaviour: str, tmp_path: Path, listener: Listener, outside: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    command = SHELL[behaviour].format(port=listener.port, outside=outside)
    result = sandbox.run(command, ws)
    assert result.exit_code != 0 or result.timed_out, result.output
    if behaviour == "network":
        assert listener.received == [] and _no_route(result.output)
    if behaviour == "write":
        assert not outside.exists() and "read-only file system" in result.output.lower()
    if behaviour == "memory":
        assert "MemoryError" in result.output or "out of memory" in result.output
    if (
        behaviour == "fork"
    ):  # killed at the wall clock, or ended when the pids limit broke its shell
        assert result.timed_out or "Cannot fork" in result.output
    if behaviour == "loop":
        assert result.timed_out
    assert _leftovers(sandbox) == []


def test_cargo_build_scripts_run_sandboxed(sandbox: Sandbox, tmp_path: Path, outside: Path) -> None:
    """A build script is generated code too: cargo runs inside the sandbox, offline."""
    crate = tmp_path / "ws" / "evil"
    (crate / "src").mkdir(parents=True)
    (crate / "Cargo.toml").write_text(
        '[package]\nname = "evil"\nversion = "0.1.0"\nedition = "2021"\n'
    )
    (crate / "src" / "lib.rs").write_text("pub fn f() {}\n")
    (crate / "build.rs").write_text(
        f'fn main() {{ std::fs::write({str(outside)!r}, "escaped").unwrap(); }}\n'.replace("'", '"')
    )
    result = sandbox.run("cd evil && cargo build --offline", tmp_path / "ws")
    assert result.exit_code != 0, result.output
    assert "Read-only file system" in result.output and not outside.exists()


def test_agent_crates_resolve_offline_from_vendored_sources(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """The agent's crate gets its dependencies vendored on the host; cargo inside finds them."""
    ws = tmp_path / "ws"
    shutil.copytree(
        ROOT / "generated/pong/rust",
        ws / "port",
        ignore=shutil.ignore_patterns("target", "Cargo.lock"),
    )
    result = sandbox.run("cd port && cargo tree --offline -e normal --depth 1", ws)
    assert result.exit_code == 0, result.output
    assert "pyo3 v0.30" in result.output and "rayon v1." in result.output
    assert (ws / "port" / "Cargo.lock").is_file()  # locked on the host before the command ran


# ---- ports driven by the verifier ------------------------------------------------------------


def hostile_port(tmp_path: Path, behaviour: str, **values: object) -> Path:
    """The pong JAX port with hostile code run by ``reset`` (traced on the first reset call)."""
    source = (ROOT / "generated/pong/jax/pong.py").read_text()
    head = "def reset(seed: jax.Array) -> EnvState:\n"
    assert head in source
    port = tmp_path / "port"
    port.mkdir()
    body = "def _hostile():" + HOSTILE[behaviour].format(**values)
    (port / "pong.py").write_text(source.replace(head, head + "    _hostile()\n") + "\n" + body)
    return port


@pytest.mark.parametrize("behaviour", sorted(HOSTILE))
def test_hostile_ports_become_findings(
    sandbox: Sandbox,
    behaviour: str,
    tmp_path: Path,
    listener: Listener,
    outside: Path,
) -> None:
    port = hostile_port(tmp_path, behaviour, port=listener.port, outside=str(outside))
    options = VerifyOptions(sandbox=sandbox.kind, timeout_s=6, scale=0.1)
    report = verify(spec_for_name("pong"), port, [0], options)
    level = report.levels[0]
    assert level.status in ("fail", "error") and level.findings, level.summary
    finding = level.findings[0]
    expected = {
        "network": ("exception", ""),
        "write": ("exception", "read-only file system"),
        "fork": ("timeout", "did not return"),
        "memory": ("", ""),  # MemoryError (rlimit) or the OOM killer (docker): both are findings
        "loop": ("timeout", "did not return"),
    }[behaviour]
    assert expected[0] in finding.check
    assert expected[1] in (finding.message + finding.detail).lower()
    text = finding.message + finding.detail
    if behaviour == "memory":
        assert "MemoryError" in text or "out of memory" in text
    if behaviour == "network":
        assert _no_route(text)
    assert listener.received == [] and not outside.exists()
    assert _leftovers(sandbox) == []


def test_the_verifier_goes_on_after_a_hostile_port(sandbox: Sandbox, tmp_path: Path) -> None:
    spec = spec_for_name("pong")
    options = VerifyOptions(sandbox=sandbox.kind, timeout_s=10, scale=0.1, seed_sweep=QUICK_SWEEP)
    bad = verify(spec, hostile_port(tmp_path, "memory"), [0, 1], options)
    good = verify(spec, ROOT / "generated/pong/jax", [0], options)
    assert not bad.passed and good.passed


# ---- choosing a sandbox ------------------------------------------------------------------------


def test_default_sandbox_is_docker_when_an_engine_answers() -> None:
    choice = choose_sandbox(None)
    assert choice.kind == ("docker" if docker_available() else "process")
    assert "default" in choice.line()
    assert choose_sandbox("process").kind == "process"


def test_verify_cli_rejects_unknown_sandboxes_and_names_the_choice() -> None:
    bad = subprocess.run(
        [sys.executable, "-m", "envforge.cli", "verify", "pong", "--sandbox", "vm"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "--sandbox: expected one of docker, process, none" in bad.stderr
    assert choose_sandbox("none").line() == "sandbox: none (--sandbox none)"


# ---- helpers -----------------------------------------------------------------------------------


def _no_route(text: str) -> bool:
    """The socket found no way out: no interface up (netns) or only the sandbox's own loopback."""
    return "network is unreachable" in text.lower() or "connection refused" in text.lower()


def _leftovers(sandbox: Sandbox) -> list[str]:
    """Processes or containers this test process started that are still running."""
    if sandbox.kind == "docker":
        from envforge.sandbox.docker import docker_client

        owner = f"{OWNER_LABEL}={os.getpid()}"
        found = docker_client().containers.list(all=True, filters={"label": owner})
        return [c.id for c in found]
    return [f"{pid}: {args}" for pid, args in _descendants(os.getpid())]


def _descendants(root: int) -> list[tuple[int, str]]:
    """Live (not zombie) processes below ``root``."""
    parent: dict[int, int] = {}
    args: dict[int, str] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            pid = int(stat.parent.name)
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError):
            continue
        if fields[0] not in ("Z", "X"):
            parent[pid] = int(fields[1])
            args[pid] = cmdline
    out = []
    for pid in parent:
        p = parent[pid]
        while p > 1 and p != root:
            p = parent.get(p, 0)
        if p == root and "resource_tracker" not in args[pid]:
            out.append((pid, args[pid]))
    return out


def test_children_use_the_hosts_vendored_crates_whatever_home_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sandboxed child's HOME is its scratch dir: without the caches named explicitly it would
    look for vendored crates under it, find none and (no network) fail to fetch them. It reads
    the host's vendored crates and built modules, and builds into its sandbox's own cache."""
    from envforge.native.rust_build import rust_cache
    from envforge.sandbox.paths import child_environment

    for name in ("ENVFORGE_RUST_CACHE", "ENVFORGE_RUST_VENDOR", "ENVFORGE_CACHE"):
        monkeypatch.delenv(name, raising=False)
    host = rust_cache()
    env = child_environment(tmp_path / "scratch", tmp_path / "realm")
    assert env["HOME"] == str(tmp_path / "scratch")
    assert env["ENVFORGE_RUST_VENDOR"] == str(host.vendor)
    assert env["ENVFORGE_RUST_PREBUILT"] == str(host.lib)
    assert env["ENVFORGE_RUST_CACHE"] == str(tmp_path / "realm" / "rust")
