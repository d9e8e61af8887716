"""The sandbox interface: run one shell command for the agent, bounded and in the workspace."""

from __future__ import annotations

import os
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from envforge.errors import EnvforgeError

PASSED_VARIABLES = (
    "LANG",
    "LANGUAGE",
    "TZ",
    "TERM",
    "LD_LIBRARY_PATH",
    "RAYON_NUM_THREADS",
    "OMP_NUM_THREADS",
)
PASSED_PREFIXES = ("LC_", "JAX_", "XLA_", "ENVFORGE_", "PYTHON")
"""Generated code sees only these host variables: an allow-list, since a credential can have
any name (``GH_PAT``, ``DATABASE_URL`` with a password, ``AWS_ACCESS_KEY_ID``)."""
SECRET_VARIABLE = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|PAT$)", re.IGNORECASE)
"""Dropped even under an allowed prefix (``ENVFORGE_..._API_KEY``)."""


@dataclass(frozen=True)
class SandboxLimits:
    wall_s: float = 120.0
    """Wall-clock limit; the whole process group is killed when it passes."""
    cpu_s: int = 300
    file_size_mb: int = 256
    address_space_mb: int | None = 16384
    """Virtual memory per process (XLA reserves a lot of address space, so not too low)."""
    output_chars: int = 12000
    """Output kept (head and tail) for the model; the rest is cut out of the middle."""
    max_pids: int = 512
    """Tasks (processes and threads) alive at once: a fork bomb stops here."""
    memory_mb: int = 8192
    """Docker: the container's memory limit (swap included)."""
    cpus: float | None = 2.0
    """Docker: CPU quota, in cores (at most the machine's); None: no quota."""


@dataclass(frozen=True)
class CommandResult:
    exit_code: int | None
    """None when the command was killed for running past the wall-clock limit."""
    output: str
    """stdout and stderr interleaved, possibly truncated."""
    timed_out: bool = False
    truncated: bool = False

    def describe(self) -> str:
        if self.timed_out:
            status = "killed: wall-clock limit reached"
        elif self.exit_code is not None and self.exit_code < 0:
            status = f"killed by signal {-self.exit_code}"
        else:
            status = f"exit code {self.exit_code}"
        cut = " (output truncated)" if self.truncated else ""
        return f"[{status}{cut}]\n{self.output}"


def command_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The parent's variables that generated code may see (:data:`PASSED_VARIABLES`)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if (k in PASSED_VARIABLES or k.startswith(PASSED_PREFIXES))
        and not SECRET_VARIABLE.search(k)
    }
    env.update(extra or {})
    return env


def read_clipped(sink: BinaryIO, limit: int) -> tuple[str, bool]:
    """A command's output file as text: whole when short, else its head and tail around a marker."""
    size = sink.seek(0, os.SEEK_END)
    sink.seek(0)
    if size <= limit:
        return sink.read().decode(errors="replace"), False
    head = sink.read(limit // 3)
    sink.seek(size - (limit - len(head)))
    tail = sink.read()
    cut = size - len(head) - len(tail)
    text = head.decode(errors="replace") + f"\n... [{cut} bytes cut] ...\n"
    return text + tail.decode(errors="replace"), True


class SandboxError(EnvforgeError):
    """The sandbox itself failed (could not start a container, for example)."""


class ServerProcess(ABC):
    """A long-lived process started in a sandbox (a driver server), seen like a child process."""

    pid: int | None = None

    @abstractmethod
    def is_alive(self) -> bool: ...

    @property
    @abstractmethod
    def exitcode(self) -> int | None:
        """None while running; minus the signal number when a signal (or the OOM killer) ended it."""

    @abstractmethod
    def join(self, timeout: float | None = None) -> None: ...

    @abstractmethod
    def kill(self) -> None:
        """Kill it and everything it started."""

    def cleanup(self) -> None:  # noqa: B027 - optional hook
        """Release what the sandbox held for it (container, cgroup); the process is dead."""


class Sandbox(ABC):
    """Runs a command with ``cwd`` = the workspace, under limits, never raising for its failure.

    ``start_server`` starts a long-lived process instead (the verifier's driver servers, see
    envforge/sandbox/driver.py): ``scratch`` is its only writable directory besides the build
    cache, ``readable`` lists what it must be able to read (a sandbox may hide the rest).
    """

    kind = "sandbox"

    def __init__(self, limits: SandboxLimits | None = None) -> None:
        self.limits = limits or SandboxLimits()

    @abstractmethod
    def run(self, command: str, workspace: Path, readable: tuple[Path, ...] = ()) -> CommandResult:
        """``readable``: host paths outside the workspace the command must read (a sandbox
        shows little else of the host, see envforge/sandbox/paths.py: read_only_view)."""

    @abstractmethod
    def start_server(
        self, argv: list[str], scratch: Path, env: dict[str, str], readable: tuple[Path, ...] = ()
    ) -> ServerProcess: ...

    def describe(self) -> str:
        return self.kind
