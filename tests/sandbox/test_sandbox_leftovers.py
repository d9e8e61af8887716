"""Issue 16, item 7: a verifier stopped in the middle (SIGTERM, ``kill -9``) leaves nothing.

A verifier runs in a child process here, verifying a port that hangs while the sandboxed server
imports it; the test stops the verifier once the port is running. What it had on the host (the
port's scratch folder, the reference's log in ``$TMPDIR``, a pids cgroup, a container, the
sandboxed processes) must be gone: at once after SIGTERM (it unwinds), and after ``kill -9``
once the next envforge run opens a sandbox (it sweeps what dead owners left); sandboxed
processes of a killed process-sandbox verifier must not wait for that.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from envforge.sandbox.confine import PIDS_CGROUP_ROOTS, probe
from envforge.sandbox.docker import OWNER_LABEL, docker_available

ROOT = Path(__file__).resolve().parents[2]
PONG_PORT = ROOT / "generated/pong/jax/pong.py"
DOCKER = pytest.mark.skipif(not docker_available(), reason="no docker engine")
PROCESS = pytest.mark.skipif(not probe().read_only_mounts, reason="no mount namespaces")
VICTIM = """
import sys
from envforge.spec import spec_for_name
from envforge.verify.context import VerifyOptions
from envforge.verify.runner import verify
verify(spec_for_name("pong"), sys.argv[1], [0], VerifyOptions(sandbox=sys.argv[2], timeout_s=300))
"""
NEXT_RUN = "import sys; from envforge.sandbox.select import open_sandbox; open_sandbox(sys.argv[1])"


def hanging_port(folder: Path, marker: str) -> Path:
    future = "from __future__ import annotations\n"
    hang = (
        "import os, time\n"
        f"open(os.path.join(os.environ['HOME'], {marker!r}), 'w').close()\n"
        "time.sleep(600)\n"
    )
    folder.mkdir(parents=True)
    (folder / "pong.py").write_text(PONG_PORT.read_text().replace(future, future + hang))
    return folder


def wait_for(condition: Callable[[], object], seconds: float, what: str) -> object:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"gave up waiting for {what}")


def owner_tag(pid: int) -> str:
    """What envforge names a process's leftovers after (pid namespace, pid, start time)."""
    namespace = os.stat("/proc/self/ns/pid").st_ino
    start = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    return f"{namespace}.{pid}.{start}"


def processes_using(path: Path) -> list[int]:
    """Live processes whose command line names ``path`` (the sandboxed driver server does)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if str(path).encode() in cmdline.read_bytes():
                state = (cmdline.parent / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state not in ("Z", "X"):
                    found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


def leftovers(kind: str, pid: int, tag: str, scratch: Path) -> list[str]:
    """What the stopped verifier ``pid`` still has on the host."""
    out = [str(scratch)] if scratch.exists() else []
    out += [f"process {p}" for p in processes_using(scratch)]
    out += [str(p) for p in Path(tempfile.gettempdir()).glob(f"envforge-{tag}-*")]
    for root in PIDS_CGROUP_ROOTS:
        for name in (f"envforge-{tag}-*", f"envforge-{pid}-*"):  # (the second: before tags)
            out += [str(p) for p in Path(root).glob(name) if p.is_dir()]
    if kind == "docker":
        out += [f"container {c.short_id} ({c.status})" for c in containers_of(pid)]
    return out


def containers_of(pid: int) -> list:  # type: ignore[type-arg]
    from envforge.sandbox.docker import docker_client

    return docker_client().containers.list(all=True, filters={"label": f"{OWNER_LABEL}={pid}"})


def start_victim(kind: str, tmp_path: Path) -> tuple[subprocess.Popen[bytes], str, Path]:
    """A verifier whose port hangs in the sandbox: (process, its owner tag, the scratch dir)."""
    marker = f"hanging-{uuid.uuid4().hex}"
    port = hanging_port(tmp_path / "port", marker)
    victim = subprocess.Popen(
        [sys.executable, "-c", VICTIM, str(port), kind],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    tag = owner_tag(victim.pid)
    temp = Path(tempfile.gettempdir())
    found = wait_for(lambda: list(temp.glob(f"envforge-*/{marker}")), 180, "the port to run")
    assert isinstance(found, list)
    return victim, tag, found[0].parent


@pytest.mark.parametrize(
    "kind", [pytest.param("process", marks=PROCESS), pytest.param("docker", marks=DOCKER)]
)
def test_a_killed_verifier_leaves_nothing_after_the_next_run(kind: str, tmp_path: Path) -> None:
    victim, tag, scratch = start_victim(kind, tmp_path)
    victim.kill()
    victim.wait(30)
    # its sandboxed server stops at once (the container waits for the next run's sweep)
    wait_for(lambda: not processes_using(scratch), 20, "the sandboxed server to stop")
    if kind == "docker":
        stopped = lambda: all(c.status == "exited" for c in containers_of(victim.pid))  # noqa: E731
        wait_for(stopped, 20, "the container to stop")
    assert leftovers(kind, victim.pid, tag, scratch) != []  # a killed verifier cleans nothing
    subprocess.run([sys.executable, "-c", NEXT_RUN, kind], check=True, timeout=120)
    assert leftovers(kind, victim.pid, tag, scratch) == []


@DOCKER
def test_a_terminated_verifier_removes_its_container_and_folders(tmp_path: Path) -> None:
    victim, tag, scratch = start_victim("docker", tmp_path)
    victim.send_signal(signal.SIGTERM)
    victim.wait(60)
    assert victim.returncode == 128 + signal.SIGTERM, victim.stderr.read() if victim.stderr else ""
    assert leftovers("docker", victim.pid, tag, scratch) == []
