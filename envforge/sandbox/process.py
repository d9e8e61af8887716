"""The process sandbox: a child shell in its own process group with rlimits and a wall clock.

This bounds runaway commands (CPU, file size, memory, time, output) and keeps credentials out
of their environment; it does not hide the filesystem. The docker sandbox isolates further.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import tempfile
from pathlib import Path

from envforge.sandbox.base import CommandResult, Sandbox, command_environment, read_clipped

MB = 1024 * 1024


class ProcessSandbox(Sandbox):
    def _set_limits(self) -> None:
        """Runs in the child between fork and exec."""
        limits = self.limits
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 5))
        size = limits.file_size_mb * MB
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
        if limits.address_space_mb is not None:
            space = limits.address_space_mb * MB
            resource.setrlimit(resource.RLIMIT_AS, (space, space))

    def run(self, command: str, workspace: Path) -> CommandResult:
        # output goes to a file, not a pipe: a grandchild holding a pipe open cannot hang us
        with tempfile.TemporaryFile() as sink:
            process = subprocess.Popen(
                ["/bin/sh", "-c", command],
                cwd=workspace,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                env=command_environment({"PYTHONUNBUFFERED": "1"}),
                start_new_session=True,
                preexec_fn=self._set_limits,
            )
            timed_out = False
            try:
                exit_code: int | None = process.wait(timeout=self.limits.wall_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                exit_code = None
            finally:
                _kill_group(process.pid)
                process.wait()
            output, truncated = read_clipped(sink, self.limits.output_chars)
        return CommandResult(exit_code, output, timed_out, truncated)


def _kill_group(pgid: int) -> None:
    """Kill what the command left running (its process group), if anything."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
