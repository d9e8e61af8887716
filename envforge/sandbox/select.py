"""Which sandbox runs generated code: ``--sandbox process|docker|none`` (default: docker when an
engine answers, else process). The choice and its reason are shown by every command that runs
generated code."""

from __future__ import annotations

from dataclasses import dataclass

from envforge.errors import BadInput
from envforge.sandbox.base import Sandbox, SandboxLimits

KINDS = ("docker", "process", "none")
SANDBOX_HELP = (
    "Where generated code runs: docker, process or none "
    "(default: docker when an engine answers, else process)."
)


@dataclass(frozen=True)
class SandboxChoice:
    kind: str
    """docker | process | none"""
    reason: str

    def line(self, sandbox: Sandbox | None = None) -> str:
        what = sandbox.describe() if sandbox is not None else self.kind
        return f"sandbox: {what} ({self.reason})"


def choose_sandbox(requested: str | None) -> SandboxChoice:
    """Resolve ``--sandbox`` (None or "auto": the default) to a kind, with the reason."""
    from envforge.sandbox.docker import docker_available

    if requested in (None, "", "auto"):
        if docker_available():
            return SandboxChoice("docker", "default: a docker engine answered")
        return SandboxChoice("process", "default: no docker engine answered")
    if requested not in KINDS:
        raise BadInput(f"--sandbox: expected one of {', '.join(KINDS)}, got {requested!r}")
    if requested == "docker" and not docker_available():
        from envforge.sandbox.docker import docker_client

        docker_client()  # raises BadInput with the engine's error
    return SandboxChoice(requested, "--sandbox " + requested)


def open_sandbox(kind: str | None, limits: SandboxLimits | None = None) -> Sandbox | None:
    """The sandbox for a resolved kind (None for "none" or None: no sandbox).

    Every run that verifies or runs generated code comes here first, so this is where the
    leftovers of verifiers killed earlier are swept and a SIGTERM is made to unwind (see
    envforge/sandbox/leftovers.py)."""
    from envforge.sandbox.leftovers import sweep_once, unwind_on_sigterm

    unwind_on_sigterm()
    sweep_once()
    if kind in (None, "none"):
        return None
    if kind == "process":
        from envforge.sandbox.process import ProcessSandbox

        return ProcessSandbox(limits)
    if kind == "docker":
        from envforge.sandbox.docker import DockerSandbox

        return DockerSandbox(limits)
    raise BadInput(f"unknown sandbox {kind!r}; choose one of {', '.join(KINDS)}")
