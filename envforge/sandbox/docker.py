"""The docker sandbox: each command or driver server runs in a fresh container.

Containers have no network (``network_mode=none``), a read-only root, memory / CPU / pids
limits, no capabilities, no-new-privileges, and run as an unprivileged user. The only writable
places are the workspace (commands) or scratch directory (servers), a small ``/tmp`` tmpfs and
the sandbox's own build cache ``docker/`` beside the Rust cache (so a container never writes into the
host's cache; it reads the host's built modules and vendored crates). Everything else a run
caches (envforge's ``$ENVFORGE_CACHE``: C libraries, the native digest) is that run's own, in its
scratch directory, removed with it. The image is imported locally, see envforge/sandbox/image.py.
"""

from __future__ import annotations

import contextlib
import io
import os
import shlex
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

from envforge.errors import BadInput
from envforge.native.rust_build import (
    RustCache,
    fetch_workspace_dependencies,
    offline_cargo,
    rust_cache,
)
from envforge.sandbox.base import (
    CommandResult,
    Sandbox,
    SandboxError,
    SandboxLimits,
    ServerProcess,
    read_clipped,
)
from envforge.sandbox.image import ensure_image, sandbox_user
from envforge.sandbox.paths import container_environment, host_rust_cache, read_only_view
from envforge.untrusted.owned_names import owned_prefix, owner_gone, owner_tag
from envforge.untrusted.sandbox_logs import append_note

MB = 1024 * 1024
LABEL = "envforge.sandbox"
OWNER_LABEL = "envforge.sandbox.owner"
"""The pid of the host process that started the container."""
OWNER_TAG_LABEL = "envforge.sandbox.owner-tag"
"""Its owner tag (envforge/untrusted/owned_names.py): who may remove the container when it died."""
BOOT_LABEL = "envforge.sandbox.boot"
"""The host's boot id: an engine may serve several machines, whose pids mean nothing here."""
CLIENT_TIMEOUT_S = 60


@lru_cache(maxsize=1)
def docker_client() -> Any:
    """A client of the local engine, or BadInput naming why there is none."""
    try:
        import docker

        client = docker.from_env(timeout=CLIENT_TIMEOUT_S)
        client.ping()
    except Exception as e:  # noqa: BLE001 - any failure means: no engine
        raise BadInput(f"no docker engine answered ({type(e).__name__}: {e})") from None
    return client


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


@lru_cache(maxsize=1)
def sweep_containers(client: Any) -> list[str]:
    """Remove the sandbox containers of this machine whose owner process is gone (killed
    before it could remove them); once per process, when the first docker sandbox opens."""
    removed: list[str] = []
    try:
        found = client.containers.list(all=True, filters={"label": f"{BOOT_LABEL}={_boot_id()}"})
    except Exception:  # noqa: BLE001 - a sweep must never stop the run it precedes
        return removed
    for container in found:
        tag = container.labels.get(OWNER_TAG_LABEL, "")
        if owner_gone(f"envforge-{tag}-"):
            with contextlib.suppress(Exception):
                container.remove(force=True)
                removed.append(container.id)
    return removed


def docker_available() -> bool:
    try:
        docker_client()
    except BadInput:
        return False
    return True


def realm_cache() -> Path:
    """The docker sandbox's own cache root, owned by the container user."""
    root = rust_cache().root.parent / "docker"
    if not root.is_dir():
        root.mkdir(parents=True)
        _give_to_sandbox_user(root)
    return root


def _give_to_sandbox_user(path: Path) -> None:
    """Make a host directory writable by the container user (chown when we are root)."""
    uid, gid = sandbox_user()
    if os.getuid() != 0:
        return
    for root, dirs, files in os.walk(path):
        for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
            try:
                if os.lstat(name).st_uid != uid:
                    os.lchown(name, uid, gid)
            except FileNotFoundError:
                pass


class DockerSandbox(Sandbox):
    kind = "docker"

    def __init__(self, limits: SandboxLimits | None = None) -> None:
        super().__init__(limits)
        self.client = docker_client()
        sweep_containers(self.client)
        self.image = ensure_image(self.client)

    def describe(self) -> str:
        uid, _ = sandbox_user()
        lim = self.limits
        return (
            f"docker ({self.image}, no network, read-only root, {lim.memory_mb} MB, "
            f"{'no CPU quota' if lim.cpus is None else f'{lim.cpus:g} CPUs'}, "
            f"{lim.max_pids} pids, uid {uid})"
        )

    # ---- containers --------------------------------------------------------------------------
    def _volumes(self, writable: list[Path], readable: tuple[Path, ...]) -> dict[str, dict]:
        volumes: dict[str, dict] = {}
        for path in read_only_view(readable):  # never the checkout: see paths.python_roots
            volumes[str(path)] = {"bind": str(path), "mode": "ro"}
        for path in [*writable, realm_cache()]:
            volumes[str(path)] = {"bind": str(path), "mode": "rw"}
        return volumes

    def _environment(self, scratch: Path, extra: dict[str, str]) -> dict[str, str]:
        """The container's variables. Its envforge cache (C libraries, the native digest, ...)
        is its own run's, in the scratch directory: a shared one let a C port write a library
        under the shipped CartPole's name that the next docker run loaded."""
        cache = {"ENVFORGE_CACHE": str(scratch / "cache")}
        return container_environment(scratch, realm_cache(), {**extra, **cache})

    def _start(
        self,
        command: list[str],
        cwd: Path,
        scratch: Path,
        writable: list[Path],
        readable: tuple[Path, ...],
        env: dict[str, str],
    ) -> Any:
        import docker.errors
        import docker.types

        uid, gid = sandbox_user()
        lim = self.limits
        file_size = lim.file_size_mb * MB
        try:
            container = self.client.containers.create(
                self.image,
                command,
                working_dir=str(cwd),
                user=f"{uid}:{gid}",
                environment=self._environment(scratch, env),
                volumes=self._volumes(writable, readable),
                network_mode="none",
                read_only=True,
                tmpfs={"/tmp": "size=256m,mode=1777"},
                mem_limit=f"{lim.memory_mb}m",
                memswap_limit=f"{lim.memory_mb}m",
                nano_cpus=None if lim.cpus is None else int(min(lim.cpus, _cores()) * 1e9),
                pids_limit=lim.max_pids,
                ulimits=[docker.types.Ulimit(name="fsize", soft=file_size, hard=file_size)],
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                init=True,
                labels={
                    LABEL: "1",
                    OWNER_LABEL: str(os.getpid()),
                    OWNER_TAG_LABEL: owner_tag(),
                    BOOT_LABEL: _boot_id(),
                },
            )
        except docker.errors.APIError as e:
            raise SandboxError(f"docker refused the container: {e.explanation or e}") from None
        try:
            container.start()
        except docker.errors.APIError as e:
            container.remove(force=True)
            raise SandboxError(
                f"docker could not start the container: {e.explanation or e}"
            ) from None
        return container

    # ---- commands ----------------------------------------------------------------------------
    def run(self, command: str, workspace: Path, readable: tuple[Path, ...] = ()) -> CommandResult:
        import requests.exceptions

        fetch_workspace_dependencies(workspace)  # on the host: the container has no network
        _give_to_sandbox_user(workspace)
        scratch = Path(tempfile.mkdtemp(prefix=owned_prefix("sbx")))
        _give_to_sandbox_user(scratch)
        cargo = offline_cargo(RustCache(realm_cache() / "rust", host_rust_cache()[2]))
        _give_to_sandbox_user(realm_cache())
        try:
            container = self._start(
                ["/bin/sh", "-c", command],
                workspace,
                scratch,
                [workspace, scratch],
                readable,
                cargo,
            )
        except SandboxError as e:
            shutil.rmtree(scratch, ignore_errors=True)
            return CommandResult(None, f"[sandbox failed] {e}")
        timed_out = False
        try:
            try:
                status = container.wait(timeout=self.limits.wall_s)
                exit_code: int | None = _signed(status.get("StatusCode", -1))
            except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
                timed_out, exit_code = True, None
                container.kill()
            sink = io.BytesIO(container.logs(stdout=True, stderr=True))
            output, truncated = read_clipped(sink, self.limits.output_chars)
            if _oom_killed(container):
                output += f"\n[killed: out of memory (limit {self.limits.memory_mb} MB)]"
        finally:
            container.remove(force=True)
            shutil.rmtree(scratch, ignore_errors=True)
        return CommandResult(exit_code, output, timed_out, truncated)

    # ---- servers -----------------------------------------------------------------------------
    def start_server(
        self, argv: list[str], scratch: Path, env: dict[str, str], readable: tuple[Path, ...] = ()
    ) -> ServerProcess:
        _give_to_sandbox_user(scratch)
        out = shlex.quote(str(scratch / "server.out"))
        shell = f"exec {shlex.join(argv)} > {out} 2>&1"
        container = self._start(
            ["/bin/sh", "-c", shell], scratch, scratch, [scratch], readable, env
        )
        return DockerServer(container, scratch, self.limits.memory_mb)


class DockerServer(ServerProcess):
    def __init__(self, container: Any, scratch: Path, memory_mb: int) -> None:
        self.container = container
        self.scratch = scratch
        self.memory_mb = memory_mb
        self._noted = False

    def _state(self) -> dict:
        import docker.errors

        try:
            self.container.reload()
        except docker.errors.NotFound:
            return {"Status": "removed", "ExitCode": -9}
        state: dict = self.container.attrs.get("State", {})
        return state

    def is_alive(self) -> bool:
        return self._state().get("Status") in ("created", "running", "restarting")

    @property
    def exitcode(self) -> int | None:
        state = self._state()
        if state.get("Status") in ("created", "running", "restarting"):
            return None
        if state.get("OOMKilled") and not self._noted:
            self._noted = True  # the finding shows the log tail: say why the server died there
            note = f"\n[sandbox] killed: out of memory (limit {self.memory_mb} MB)\n"
            append_note(self.scratch / "server.out", note)  # if still a file: the port owns it
        return _signed(int(state.get("ExitCode", -1)))

    def join(self, timeout: float | None = None) -> None:
        import requests.exceptions

        try:
            self.container.wait(timeout=timeout)
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
            pass
        except Exception:  # noqa: BLE001 - a removed container has nothing to wait for
            pass

    def kill(self) -> None:
        with contextlib.suppress(Exception):  # already dead or removed
            self.container.kill()
        self.join(10)

    def cleanup(self) -> None:
        with contextlib.suppress(Exception):  # already removed
            self.container.remove(force=True)


def _signed(status: int) -> int:
    """Docker's 128+n for a signal n as Python's -n (what IsolatedDriver reports)."""
    return -(status - 128) if 128 < status < 160 else status


def _oom_killed(container: Any) -> bool:
    try:
        container.reload()
    except Exception:  # noqa: BLE001
        return False
    return bool(container.attrs.get("State", {}).get("OOMKilled"))


def _cores() -> int:
    return len(os.sched_getaffinity(0))
