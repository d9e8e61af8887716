"""Holes a hostile-user probe found in the sandboxes, one test each.

Each test is a hostile agent command (``Sandbox.run``) or a hostile port that the verifier
drives, in the sandboxes the hole concerns: it reaches for the docker daemon's socket, plants
a library in the host's Rust build cache, turns its log into a symlink to a secret or into a
FIFO, kills the verifier, or reads credentials from its environment. Item 7 (leftovers) is in
tests/sandbox/test_sandbox_leftovers.py. Hostile ports do their work when the server imports them
(the code goes before the port's own imports), so no JAX tracing is paid for.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from envforge.sandbox.base import Sandbox, SandboxLimits
from envforge.sandbox.confine import probe
from envforge.sandbox.docker import docker_available
from envforge.sandbox.select import open_sandbox
from envforge.spec import spec_for_name
from envforge.verify.context import VerifyOptions
from envforge.verify.runner import verify
from envforge.verify.verdict import Report

ROOT = Path(__file__).resolve().parents[2]
PONG_PORT = ROOT / "generated/pong/jax/pong.py"
DOCKER = pytest.mark.skipif(not docker_available(), reason="no docker engine")
KINDS = ["process", pytest.param("docker", marks=DOCKER)]
LIMITS = SandboxLimits(wall_s=20.0, output_chars=8000)


@pytest.fixture(scope="module", params=KINDS)
def sandbox(request: pytest.FixtureRequest) -> Sandbox:
    if request.param == "process" and not probe().read_only_mounts:
        pytest.skip("this kernel refuses mount namespaces")
    opened = open_sandbox(request.param, LIMITS)
    assert opened is not None
    return opened


def hostile_port(folder: Path, code: str) -> Path:
    """The pong JAX port with ``code`` run first thing when the sandboxed server imports it."""
    future = "from __future__ import annotations\n"
    source = PONG_PORT.read_text()
    assert source.count(future) == 1
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pong.py").write_text(source.replace(future, future + code.strip() + "\n"))
    return folder


def verify_quickly(kind: str, port: Path) -> Report:
    return verify(spec_for_name("pong"), port, [0], VerifyOptions(sandbox=kind, timeout_s=20))


def finding_text(report: Report) -> str:
    level = report.levels[0]
    assert level.status in ("fail", "error") and level.findings, level.summary
    return "\n".join(f.message + "\n" + f.detail for f in level.findings)


# ---- 1: host sockets (the docker daemon's first) -------------------------------------------


class UnixListener:
    """A Unix socket on the host that records whatever connects to it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(str(path))
        self.server.listen()
        self.connections = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.server.close()
        self.path.unlink(missing_ok=True)


@pytest.fixture
def host_sockets(tmp_path: Path) -> Iterator[list[UnixListener]]:
    """Listeners beside the workspace and (as root) in /run, where daemons put theirs."""
    listeners = [UnixListener(tmp_path / "host.sock")]
    if os.access("/run", os.W_OK):
        listeners.append(UnixListener(Path(f"/run/envforge-test-{uuid.uuid4().hex[:8]}.sock")))
    yield listeners
    for listener in listeners:
        listener.close()


def test_commands_reach_no_host_socket(
    sandbox: Sandbox, tmp_path: Path, host_sockets: list[UnixListener]
) -> None:
    """A connect needs no write access, so a read-only mount does not stop it: a command that
    reached /var/run/docker.sock would be a ``docker run -v /:/host`` away from root."""
    ws = tmp_path / "ws"
    ws.mkdir()
    paths = [str(listener.path) for listener in host_sockets]
    paths += [p for p in ("/var/run/docker.sock", "/run/docker.sock") if os.path.exists(p)]
    probe_code = (
        "import socket, sys\n"
        "for path in sys.argv[1:]:\n"
        "    s = socket.socket(socket.AF_UNIX)\n"
        "    try:\n"
        "        s.connect(path); print('CONNECTED', path)\n"
        "    except OSError as e:\n"
        "        print('BLOCKED', path, e)\n"
    )
    (ws / "probe.py").write_text(probe_code)
    result = sandbox.run("python3 probe.py " + " ".join(paths), ws)
    assert result.exit_code == 0, result.output
    assert "CONNECTED" not in result.output and result.output.count("BLOCKED") == len(paths)
    assert [listener.connections for listener in host_sockets] == [0] * len(host_sockets)


# ---- 2: the host's Rust build cache --------------------------------------------------------

PLANT = """
import sys
from pathlib import Path
from envforge.native.rust_build import build_hash, module_name, rust_cache
crate = Path("planted")
name = f"{module_name(crate)}-{build_hash(crate)}.so"
for lib in (Path(sys.argv[1]), rust_cache().root / "lib"):
    try:
        lib.mkdir(parents=True, exist_ok=True)
        (lib / name).write_bytes(b"planted")
        print("PLANTED", lib)
    except OSError as e:
        print("REFUSED", lib, e.strerror)
"""
LOOK = """
from pathlib import Path
from envforge.native.rust_build import cached_extension
print("FOUND", cached_extension(Path("planted")))
"""


def test_commands_cannot_plant_libraries_in_a_rust_cache_others_load(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A library written under another crate's build name would be loaded by the host (``bench
    --target rust``, as root) and by a later sandboxed run, whose crate would then "verify"."""
    host = tmp_path / "cache" / "rust"  # the host's cache, here a fresh one
    monkeypatch.setenv("ENVFORGE_RUST_CACHE", str(host))
    monkeypatch.delenv("ENVFORGE_RUST_VENDOR", raising=False)
    ws = tmp_path / "ws"
    (ws / "planted" / "src").mkdir(parents=True)
    (ws / "planted" / "Cargo.toml").write_text(
        '[package]\nname = "planted"\nversion = "0.1.0"\nedition = "2021"\n'
    )
    (ws / "planted" / "src" / "lib.rs").write_text("pub fn f() {}\n")
    (ws / "plant.py").write_text(PLANT)
    (ws / "look.py").write_text(LOOK)
    (host / "lib").mkdir(parents=True)
    planted = sandbox.run(f"python3 plant.py {host / 'lib'}", ws)
    assert f"REFUSED {host / 'lib'} Read-only file system" in planted.output, planted.output
    assert list((host / "lib").iterdir()) == []
    later = sandbox.run("python3 look.py", ws)
    assert "FOUND None" in later.output, later.output


# ---- 3 and 4: the host reads the port's logs -----------------------------------------------


def test_the_host_does_not_follow_a_ports_log_symlinks(sandbox: Sandbox, tmp_path: Path) -> None:
    """A port replaces its logs with symlinks to a secret and to the verifier's environment,
    then dies: the host shows the log tail in the Finding (and translate in the next prompt)."""
    secret = tmp_path / "secret.txt"
    secret.write_text("the-secret-is-" + uuid.uuid4().hex)
    secret.chmod(0o600)
    port = hostile_port(
        tmp_path / "port",
        f"""
import os
home = os.environ["HOME"]
for name, target in (("server.out", {str(secret)!r}), ("driver.log", "/proc/{os.getpid()}/environ")):
    os.unlink(os.path.join(home, name))
    os.symlink(target, os.path.join(home, name))
os._exit(3)
""",
    )
    text = finding_text(verify_quickly(sandbox.kind, port))
    assert secret.read_text() not in text
    assert f"PATH={os.environ['PATH']}" not in text
    assert "server.out was not read" in text and "driver.log was not read" in text


def test_a_fifo_for_a_log_does_not_hang_the_verifier(sandbox: Sandbox, tmp_path: Path) -> None:
    """Opening a FIFO to read blocks until a writer comes: the verifier must not wait for one."""
    port = hostile_port(
        tmp_path / "port",
        """
import os
for name in ("server.out", "driver.log"):
    path = os.path.join(os.environ["HOME"], name)
    os.unlink(path)
    os.mkfifo(path)
os._exit(3)
""",
    )
    reports: list[Report] = []
    worker = threading.Thread(
        target=lambda: reports.append(verify_quickly(sandbox.kind, port)), daemon=True
    )
    worker.start()
    worker.join(90)  # far past the 20 s timeout: on a hang the thread is left behind
    assert reports, "the verifier hung on the port's FIFO"
    assert "not a regular file" in finding_text(reports[0])


# ---- 5: the verifier's life ----------------------------------------------------------------

KILLER = """
import os, signal
for pid in (os.getppid(), int(os.environ["ENVFORGE_PROBE_VERIFIER"])):
    try:
        if pid > 1:
            os.kill(pid, signal.SIGKILL)
    except OSError as e:
        print("kill", pid, e)
raise RuntimeError("still here: the verifier could not be killed")
"""
RUN_VERIFIER = """
import os, sys
os.environ["ENVFORGE_PROBE_VERIFIER"] = str(os.getpid())
from envforge.spec import spec_for_name
from envforge.verify.context import VerifyOptions
from envforge.verify.runner import verify
report = verify(spec_for_name("pong"), sys.argv[1], [0], VerifyOptions(sandbox=sys.argv[2]))
print("VERDICT", report.levels[0].status, report.levels[0].summary)
"""


@pytest.mark.parametrize("kind", KINDS)
def test_a_port_cannot_kill_the_verifier(kind: str, tmp_path: Path) -> None:
    """The port signals its parent and the verifier's pid (it knows it here): the verifier
    must live to report it."""
    port = hostile_port(tmp_path / "port", KILLER)
    done = subprocess.run(
        [sys.executable, "-c", RUN_VERIFIER, str(port), kind],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert "VERDICT error" in done.stdout and "could not be killed" in done.stdout


# ---- 6: credentials ------------------------------------------------------------------------

CREDENTIALS = {
    "GH_PAT": "ghp_" + "x" * 20,
    "DATABASE_URL": "postgres://app:hunter2-in-the-url@db/app",
    "AWS_ACCESS_KEY_ID": "AKIA" + "Y" * 16,
    "AWS_SECRET_ACCESS_KEY": "z" * 40,
    "ANTHROPIC_API_KEY": "sk-ant-" + "q" * 20,
    "ENVFORGE_PROBE_API_KEY": "sk-probe-" + "w" * 12,
}


def test_commands_see_no_credentials_whatever_their_names(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Credentials have any name, so the environment is an allow-list, not a filter by name."""
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("ENVFORGE_PROBE_SETTING", "passed")
    ws = tmp_path / "ws"
    ws.mkdir()
    result = sandbox.run("env", ws)
    assert result.exit_code == 0, result.output
    leaked = [name for name, value in CREDENTIALS.items() if value in result.output]
    assert leaked == []
    assert "ENVFORGE_PROBE_SETTING=passed" in result.output  # the allow-list lets settings pass


def test_a_crate_whose_lock_file_is_a_fifo_is_refused_on_the_host(tmp_path: Path) -> None:
    """The host vendors a crate's dependencies before a sandbox runs: it reads ``Cargo.lock``,
    which an agent's command may have made a FIFO (reading it would block for ever)."""
    from envforge.errors import ContractViolation
    from envforge.native.rust_build import fetch_dependencies

    crate = tmp_path / "crate"
    (crate / "src").mkdir(parents=True)
    (crate / "Cargo.toml").write_text('[package]\nname = "x"\nversion = "0.1.0"\n')
    (crate / "src" / "lib.rs").write_text("")
    os.mkfifo(crate / "Cargo.lock")
    with pytest.raises(ContractViolation, match="Cargo.lock is not a regular file"):
        fetch_dependencies(crate)
