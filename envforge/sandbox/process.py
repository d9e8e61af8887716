"""The process sandbox: a child in its own process group, under rlimits, a pids cgroup, a wall
clock, and (where the kernel allows) namespaces.

Each command or server gets: rlimits on CPU time, address space and file size; a pids cgroup
(root) or ``RLIMIT_NPROC`` (other users) against fork bombs; a network namespace with only a
downed loopback; a pid namespace (it cannot signal the verifier); a read-only view of every
filesystem except its workspace, a scratch directory (HOME, TMPDIR) and the sandbox's own Rust
build cache, with no host socket reachable; no capabilities. A command past its wall-clock limit
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
import tempfile
from collections.abc import Callable
from pathlib import Path

from envforge.backends.rust_build import RustCache, fetch_workspace_dependencies, offline_cargo
from envforge.owned_names import owned_prefix
from envforge.sandbox.base import (
    CommandResult,
    Sandbox,
    SandboxLimits,
    ServerProcess,
    read_clipped,
)
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
from envforge.sandbox.paths import child_environment, host_rust_cache, sandbox_realm

MB = 1024 * 1024
SERVER_CPU_S = 4 * 3600
"""CPU seconds a driver server may use over its life (each call has its own wall clock)."""
_names = itertools.count()


class ProcessSandbox(Sandbox):
    kind = "process"

    def __init__(self, limits: SandboxLimits | None = None, confined: bool = True) -> None:
        super().__init__(limits)
        self.caps = probe() if confined else Capabilities(False, False, False, False)

    def describe(self) -> str:
        parts = ["own process group", "rlimits"]
        parts.append("pids cgroup" if self.caps.pids_cgroup else "RLIMIT_NPROC")
        if self.caps.network_namespace:
            parts.append("no network")
        if self.caps.pid_namespace:
            parts.append("own pids")
        if self.caps.read_only_mounts:
            parts.append("read-only filesystem outside the workspace, no host sockets")
        missing = [
            name
            for name, ok in (
                ("network namespace", self.caps.network_namespace),
                ("read-only mounts", self.caps.read_only_mounts),
                ("pid namespace", self.caps.pid_namespace),
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

    def _setup(self, writable: list[Path], cpu_s: int) -> tuple[Callable[[], None], str | None]:
        """The child's preexec function, and the cgroup it joins (None without one)."""
        cgroup = None
        if self.caps.pids_cgroup:
            cgroup = make_pids_cgroup(f"{owned_prefix('pids')}{next(_names)}", self.limits.max_pids)
        nproc = None if (cgroup or os.getuid() == 0) else _user_tasks() + self.limits.max_pids
        paths = [str(p) for p in writable if p.exists()]
        confinement = Confinement(
            writable=tuple(paths),
            no_network=self.caps.network_namespace,
            read_only=self.caps.read_only_mounts,
            drop_caps=self.caps.drop_caps,
            pids_cgroup=cgroup,
            own_pids=self.caps.pid_namespace,
            hidden_sockets=host_sockets() if self.caps.read_only_mounts else (),
        )

        def setup() -> None:
            self._limits_in_child(cpu_s)
            if nproc is not None:
                resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
            confine(confinement)

        return setup, cgroup

    def _writable(self, *paths: Path) -> list[Path]:
        """The given paths and the sandbox's own build cache (never the host's: a library
        planted there would be loaded by the host, see :func:`sandbox_realm`)."""
        return [*paths, sandbox_realm(self.kind)]

    def _cargo(self) -> dict[str, str]:
        """cargo's offline settings, with its target directory in the sandbox's own cache."""
        _, _, host_vendor = host_rust_cache()
        return offline_cargo(RustCache(sandbox_realm(self.kind) / "rust", host_vendor))

    # ---- commands ----------------------------------------------------------------------------
    def run(self, command: str, workspace: Path) -> CommandResult:
        fetch_workspace_dependencies(workspace)  # on the host: the command has no network
        scratch = Path(tempfile.mkdtemp(prefix=owned_prefix("sbx")))
        setup, cgroup = self._setup(self._writable(workspace, scratch), self.limits.cpu_s)
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
                    if cgroup:
                        kill_cgroup(cgroup)
                    process.wait()
                output, truncated = read_clipped(sink, self.limits.output_chars)
        finally:
            if cgroup:
                remove_cgroup(cgroup)
            shutil.rmtree(scratch, ignore_errors=True)
        return CommandResult(exit_code, output, timed_out, truncated)

    # ---- servers -----------------------------------------------------------------------------
    def start_server(
        self, argv: list[str], scratch: Path, env: dict[str, str], readable: tuple[Path, ...] = ()
    ) -> ServerProcess:
        setup, cgroup = self._setup(self._writable(scratch), SERVER_CPU_S)
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
            if cgroup:
                remove_cgroup(cgroup)
            raise
        finally:
            log.close()
        return ProcessServer(process, cgroup)


class ProcessServer(ServerProcess):
    def __init__(self, process: subprocess.Popen[bytes], cgroup: str | None) -> None:
        self.process = process
        self.pid = process.pid
        self.cgroup = cgroup

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
        if self.cgroup:
            kill_cgroup(self.cgroup)
        self.join(5)

    def cleanup(self) -> None:
        if self.cgroup:
            remove_cgroup(self.cgroup)
            self.cgroup = None


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
