"""The docker sandbox's image, built here from nothing: no registry is needed or contacted.

The image is a skeleton root filesystem (directories, the host's top-level symlinks such as
``/bin -> usr/bin``, a passwd file naming the unprivileged sandbox user) made with
``docker import``. Programs come from the host, bind-mounted read-only at their own paths:
``/usr`` and friends, the Python interpreter and its packages, envforge, the Rust toolchain.
A user with a registry can point ``ENVFORGE_SANDBOX_IMAGE`` at an image of their own; the same
host paths are mounted over it.
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from pathlib import Path
from typing import Any

IMAGE_REPOSITORY = "envforge-sandbox"
SANDBOX_UID = 65534
SKELETON_DIRS = ("etc", "tmp", "proc", "dev", "sys", "root", "home", "run", "var", "work", "opt")
SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime")


def sandbox_user() -> tuple[int, int]:
    """Who runs in the container: the host user, or ``nobody`` when the host user is root."""
    if os.getuid() != 0:
        return os.getuid(), os.getgid()
    return SANDBOX_UID, SANDBOX_UID


def skeleton_tar() -> bytes:
    """The image's root filesystem as a tar archive (deterministic: same bytes, same tag)."""
    uid, gid = sandbox_user()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:

        def add(name: str, kind: bytes, mode: int, data: bytes = b"", link: str = "") -> None:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime, info.size = kind, mode, 0, len(data)
            info.linkname = link
            tar.addfile(info, io.BytesIO(data) if data else None)

        for name in SKELETON_DIRS:
            add(name, tarfile.DIRTYPE, 0o1777 if name == "tmp" else 0o755)
        add("sbin", tarfile.DIRTYPE, 0o755)  # docker binds its init at /sbin/docker-init
        for name in SYSTEM_DIRS:
            host = Path("/") / name
            if name == "sbin":
                continue
            if host.is_symlink():
                add(name, tarfile.SYMTYPE, 0o777, link=os.readlink(host))
            elif host.is_dir():
                add(name, tarfile.DIRTYPE, 0o755)
        passwd = (
            f"root:x:0:0:root:/root:/bin/sh\nsandbox:x:{uid}:{gid}:envforge sandbox:/tmp:/bin/sh\n"
        )
        group = f"root:x:0:\nsandbox:x:{gid}:\n"
        add("etc/passwd", tarfile.REGTYPE, 0o644, passwd.encode())
        add("etc/group", tarfile.REGTYPE, 0o644, group.encode())
    return buffer.getvalue()


def ensure_image(client: Any) -> str:
    """The sandbox image's tag, importing it first if this engine does not have it yet."""
    chosen = os.environ.get("ENVFORGE_SANDBOX_IMAGE")
    if chosen:
        return chosen
    import docker.errors

    data = skeleton_tar()
    tag = hashlib.sha256(data).hexdigest()[:12]
    name = f"{IMAGE_REPOSITORY}:{tag}"
    try:
        client.images.get(name)
    except docker.errors.ImageNotFound:
        client.api.import_image_from_data(data, repository=IMAGE_REPOSITORY, tag=tag)
    return name


def system_mounts() -> list[Path]:
    """Host paths every container needs read-only: system directories and loader config."""
    out = [Path("/") / d for d in SYSTEM_DIRS if (Path("/") / d).is_dir() and d != "sbin"]
    out = [p for p in out if not p.is_symlink()]
    out += [Path("/etc") / f for f in ETC_FILES if (Path("/etc") / f).exists()]
    return out
