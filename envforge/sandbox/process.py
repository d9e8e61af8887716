"""The process sandbox: a child in its own process group, under rlimits, a pids cgroup, a wall
clock, and (where the kernel allows) namespaces.

Each command or server gets: rlimits on CPU time, address space and file size; a pids cgroup
(root) or ``RLIMIT_NPROC`` (other users) against fork bombs; a network namespace with only a
downed loopback; a pid namespace (it cannot signal the verifier); a memory cgroup (real memory,
``SandboxLimits.memory_mb``); a file system of its own (envforge/sandbox/view.py: the same host
paths the docker sandbox mounts, read-only, private ``/tmp`` and ``/dev/shm``) in which only its
workspace, a scratch directory (HOME, TMPDIR) and the sandbox's own Rust build cache are
writable, with no host socket reachable; no capabilities. A command past its wall-clock limit
is killed with its whole process group and cgroup. Its environment is an allow-list (no
credentials). What the kernel refused is left out and named by :meth:`ProcessSandbox.describe`.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from envforge.native.rust_build import RustCache, fetch_workspace_dependencies, offline_cargo
from envforge.sandbox.base import (
    CommandResult,
    Sandbox,
    SandboxLimits,
    ServerProcess,
    read_clipped,
)
from envforge.sandbox.cgroups import make_memory_cgroup, oom_kills
from envforge.sandbox.confine import (
    Capabilities,
    Confinement,
    confine,
    host_sockets,
    kill_cgroup,
    make_pids_cgroup,
    probe,
    remove_cgroup,
)
from envforge.sandbox.paths import (
    child_environment,
    host_rust_cache,
    read_only_view,
    sandbox_realm,
)
from envforge.untrusted.owned_names import owned_prefix

MB = 1024 * 1024
SERVER_CPU_S = 4 * 3600
"""CPU seconds a driver server may use over its life (each call has its own wall clock)."""
_names = itertools.count()


class ProcessSandbox(Sandbox):
    kind = "process"

    def __init__(self, limits: SandboxLimits | None = None, confined: bool = True) -> None:
        super().__init__(limits)
        self.caps = probe() if confined else Capabilities(False, False, False, False)
        self.private_view = self.caps.read_only_mounts and view_works()
        self.memory_limited = confined and _memory_cgroup_works(self.caps)

    def describe(self) -> str:
        parts = ["own process group", "rlimits"]
        parts.append("pids cgroup" if self.caps.pids_cgroup else "RLIMIT_NPROC")
        if self.caps.network_namespace:
            parts.append("no network")
        if self.caps.pid_namespace:
            parts.append("own pids")
        if self.private_view:
            parts.append(
                "a file system of its own: system, interpreter, envforge's package, toolchain "
                "and the port read-only, the workspace writable, private /tmp and /dev/shm"
            )
        elif self.caps.read_only_mounts:
            parts.append("read-only filesystem outside the workspace, no host sockets")
        if self.memory_limited:
            parts.append(f"{self.limits.memory_mb} MB memory cgroup")
        missing = [
            name
            for name, ok in (
                ("network namespace", self.caps.network_namespace),
                ("read-only mounts", self.caps.read_only_mounts),
                ("pid namespace", self.caps.pid_namespace),
                ("private file system view (the host's files stay readable)", self.private_view),
                ("memory cgroup (address-space rlimit only)", self.memory_limited),
            )
            if not ok
        ]
        refused = f"; kernel refused: {', '.join(missing)}" if missing else ""
        return f"process ({', '.join(parts)}{refused})"

    # ---- the child's setup -------------------------------------------------------------------
    def _limits_in_child(self, cpu_s: int) -> None:
        limits = self.limits
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 5))
        size = limits.file_size_mb * MB
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
        if limits.address_space_mb is not None:
            space = limits.address_space_mb * MB
            resource.setrlimit(resource.RLIMIT_AS, (space, space))

    def _setup(
        self, writable: list[Path], cpu_s: int, readable: tuple[Path, ...] = ()
    ) -> tuple[Callable[[], None], Held]:
        """The child's preexec function, and what the host holds for it until it ends."""
        held = Held()
        number = next(_names)
        if self.caps.pids_cgroup:
            held.pids = make_pids_cgroup(f"{owned_prefix('pids')}{number}", self.limits.max_pids)
        if self.memory_limited:
            name = f"{owned_prefix('mem')}{number}"
            held.memory = make_memory_cgroup(name, self.limits.memory_mb, held.pids)
        if self.private_view:
            held.staging = Path(tempfile.mkdtemp(prefix=owned_prefix("root")))
        nproc = None if (held.pids or os.getuid() == 0) else _user_tasks() + self.limits.max_pids
        paths = [str(p) for p in writable if p.exists()]
        confinement = Confinement(
            writable=tuple(paths),
            no_network=self.caps.network_namespace,
            read_only=self.caps.read_only_mounts,
            drop_caps=self.caps.drop_caps,
            pids_cgroup=held.pids,
            own_pids=self.caps.pid_namespace,
            hidden_sockets=host_sockets() if self.caps.read_only_mounts else (),
            memory_cgroup=held.memory,
            view_root=str(held.staging) if held.staging else None,
            visible=tuple(str(p) for p in read_only_view(readable)) if held.staging else (),
            shm_mb=min(self.limits.memory_mb, 1024),
        )

        def setup() -> None:
            self._limits_in_child(cpu_s)
            if nproc is not None:
                resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
            confine(confinement)

        return setup, held

    def _writable(self, *paths: Path) -> list[Path]:
        """The given paths and the sandbox's own build cache (never the host's: a library
        planted there would be loaded by the host, see :func:`sandbox_realm`)."""
        return [*paths, sandbox_realm(self.kind)]

    def _cargo(self) -> dict[str, str]:
        """cargo's offline settings, with its target directory in the sandbox's own cache."""
        _, _, host_vendor = host_rust_cache()
        return offline_cargo(RustCache(sandbox_realm(self.kind) / "rust", host_vendor))

    # ---- commands ----------------------------------------------------------------------------
    def run(self, command: str, workspace: Path, readable: tuple[Path, ...] = ()) -> CommandResult:
        fetch_workspace_dependencies(workspace)  # on the host: the command has no network
        scratch = Path(tempfile.mkdtemp(prefix=owned_prefix("sbx")))
        setup, held = self._setup(self._writable(workspace, scratch), self.limits.cpu_s, readable)
        # output goes to a file, not a pipe: a grandchild holding a pipe open cannot hang us
        try:
            with tempfile.TemporaryFile() as sink:
                process = subprocess.Popen(
                    ["/bin/sh", "-c", command],
                    cwd=workspace,
                    stdin=subprocess.DEVNULL,
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                    env=child_environment(scratch, sandbox_realm(self.kind), self._cargo()),
                    start_new_session=True,
                    preexec_fn=setup,
                )
                timed_out = False
                try:
                    exit_code: int | None = process.wait(timeout=self.limits.wall_s)
                except subprocess.TimeoutExpired:
                    timed_out = True
                    exit_code = None
                finally:
                    _kill_group(process.pid)
                    held.kill()
                    process.wait()
                output, truncated = read_clipped(sink, self.limits.output_chars)
                if held.memory and oom_kills(held.memory):
                    output += f"\n[killed: out of memory (limit {self.limits.memory_mb} MB)]"
        finally:
            held.release()
            shutil.rmtree(scratch, ignore_errors=True)
        return CommandResult(exit_code, output, timed_out, truncated)

    # ---- servers -----------------------------------------------------------------------------
    def start_server(
        self, argv: list[str], scratch: Path, env: dict[str, str], readable: tuple[Path, ...] = ()
    ) -> ServerProcess:
        setup, held = self._setup(self._writable(scratch), SERVER_CPU_S, readable)
        log = open(scratch / "server.out", "wb")  # noqa: SIM115 - the child owns it from here
        try:
            process = subprocess.Popen(
                argv,
                cwd=scratch,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=child_environment(scratch, sandbox_realm(self.kind), env),
                process_group=0,
                preexec_fn=setup,
            )
        except BaseException:
            held.release()
            raise
        finally:
            log.close()
        return ProcessServer(process, held)


class Held:
    """What the host made for one sandboxed child: its cgroups and its new root's staging
    directory (empty on the host: the root lives in the child's mount namespace)."""

    def __init__(self) -> None:
        self.pids: str | None = None
        self.memory: str | None = None
        self.staging: Path | None = None

    def cgroups(self) -> list[str]:
        return list(dict.fromkeys(g for g in (self.pids, self.memory) if g))

    def kill(self) -> None:
        for cgroup in self.cgroups():
            kill_cgroup(cgroup)

    def release(self) -> None:
        for cgroup in self.cgroups():
            remove_cgroup(cgroup)
        self.pids = self.memory = None
        if self.staging is not None:
            with contextlib.suppress(OSError):
                self.staging.rmdir()
            self.staging = None


class ProcessServer(ServerProcess):
    def __init__(self, process: subprocess.Popen[bytes], held: Held) -> None:
        self.process = process
        self.pid = process.pid
        self.held = held

    def is_alive(self) -> bool:
        return self.process.poll() is None

    @property
    def exitcode(self) -> int | None:
        return self.process.poll()

    def join(self, timeout: float | None = None) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout)

    def kill(self) -> None:
        _kill_group(self.process.pid)
        self.held.kill()
        self.join(5)

    def cleanup(self) -> None:
        self.held.release()


def _kill_group(pgid: int) -> None:
    """Kill what the command left running (its process group), if anything."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _user_tasks() -> int:
    """Processes of this user right now (RLIMIT_NPROC counts them all, not just the sandbox's)."""
    uid = str(os.getuid())
    count = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            for line in status.read_text().splitlines():
                if line.startswith("Uid:"):
                    count += line.split()[1] == uid
                    break
        except OSError:
            continue
    return count


@lru_cache(maxsize=1)
def view_works() -> bool:
    """Whether a child can be given a root of its own here (envforge/sandbox/view.py)."""
    staging = Path(tempfile.mkdtemp(prefix=owned_prefix("root")))
    confinement = Confinement(
        no_network=False,
        drop_caps=False,
        own_pids=False,
        view_root=str(staging),
        visible=tuple(str(p) for p in read_only_view()),
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", "import envforge"],
            preexec_fn=lambda: confine(confinement),
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        with contextlib.suppress(OSError):
            staging.rmdir()
    return proc.returncode == 0


@lru_cache(maxsize=1)
def _memory_cgroup_works(caps: Capabilities) -> bool:
    name = f"{owned_prefix('probe')}mem"
    pids = make_pids_cgroup(f"{owned_prefix('probe')}pids", 16) if caps.pids_cgroup else None
    memory = make_memory_cgroup(name, 64, pids)
    for cgroup in dict.fromkeys(g for g in (pids, memory) if g):
        remove_cgroup(cgroup)
    return memory is not None
