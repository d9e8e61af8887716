"""Every read from a driver server has a deadline and a size cap; --timeout covers the import.

Case 11: a port that, from inside its server, writes a frame header announcing more than it
sends and then stalls held the verifier for good (``Connection.poll`` saw the header, and
``Connection.recv`` waited for the rest). Case 12: a port that sleeps at import was reported
only at the fixed 600 s build limit, whatever ``--timeout`` said. Each hostile port is the
pong JAX port with code put first in the module (the import) or in ``reset`` (traced on the
first reset); it finds its server's connection among the live objects (the import runs inside
the server) and writes on its socket. Every case runs with ``--sandbox none`` (the plain
isolated driver) and in the process and docker sandboxes, and must end as a finding within
the call timeout plus a margin (the sandbox's start, the reference's build, JAX's import).
On the code before the fix (8ca8e81, this file and frames.py copied in, each test run alone
under ``timeout 75``) every hostile-port test here hung until killed, in each kind tried.
"""

from __future__ import annotations

import os
import pickle
import socket
import struct
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path

import pytest

from envforge.backends.frames import (
    FLOOR_BYTES,
    FrameClosed,
    FrameTimeout,
    FrameTooLong,
    recv_frame,
    reply_cap,
    send_frame,
)
from envforge.sandbox.confine import probe
from envforge.sandbox.docker import docker_available
from envforge.spec import spec_for_name
from envforge.verify.context import VerifyOptions
from envforge.verify.runner import verify

ROOT = Path(__file__).resolve().parents[2]
PONG_PORT = ROOT / "generated/pong/jax/pong.py"
TIMEOUT_S = 8.0
MARGIN_S = 30.0
"""A finding must come within TIMEOUT_S plus this (sandbox start, reference build, JAX import)."""
SKIPS = {
    "none": [],
    "process": [
        pytest.mark.skipif(not probe().read_only_mounts, reason="kernel refuses mount namespaces")
    ],
    "docker": [pytest.mark.skipif(not docker_available(), reason="no docker engine")],
}


def kinds(*default: str) -> list:
    """The three ways a port runs; those not in ``default`` only with ``-m slow`` (each waits
    for the call timeout: the host side they test is the same, the transport is not)."""
    slow = [pytest.mark.slow]
    return [
        pytest.param(kind, marks=SKIPS[kind] + ([] if kind in default else slow), id=kind)
        for kind in SKIPS
    ]


ALL = ("none", "process", "docker")

LIE = """
def _lie(announced):
    import gc, os, struct, time
    from multiprocessing.connection import Connection
    for conn in [o for o in gc.get_objects() if isinstance(o, Connection) and not o.closed]:
        os.write(conn.fileno(), struct.pack("!i", announced) + b"12345678")
    time.sleep(10**6)
"""


def hostile_port(folder: Path, where: str, announced: int | None) -> Path:
    """The pong port that, at import or in ``reset``, sends a frame header announcing
    ``announced`` bytes and 8 of them, then sleeps; ``announced`` None: only sleeps."""
    source = PONG_PORT.read_text()
    call = f"_lie({announced})" if announced is not None else "__import__('time').sleep(10**6)"
    if where == "import":
        future = "from __future__ import annotations\n"
        assert source.count(future) == 1
        source = source.replace(future, future + LIE + call + "\n")
    else:
        head = "def reset(seed: jax.Array) -> EnvState:\n"
        assert source.count(head) == 1
        source = source.replace(head, head + f"    {call}\n") + LIE
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pong.py").write_text(source)
    return folder


def verify_timed(kind: str, port: Path) -> tuple[str, str, float]:
    """(check, message and detail, seconds) of the L0 finding against ``port``."""
    options = VerifyOptions(sandbox=kind, timeout_s=TIMEOUT_S, scale=0.1)
    start = time.monotonic()
    report = verify(spec_for_name("pong"), port, [0], options)
    elapsed = time.monotonic() - start
    level = report.levels[0]
    assert level.status in ("fail", "error") and level.findings, level.summary
    finding = level.findings[0]
    return finding.check, finding.message + "\n" + finding.detail, elapsed


# ---- case 11: a partial frame, and one announced beyond the cap --------------------------------


@pytest.mark.parametrize("kind", kinds(*ALL))
def test_a_partial_reply_in_reset_is_a_timeout_finding_within_the_call_timeout(
    kind: str, tmp_path: Path
) -> None:
    """The hostile-user probe's hanging frame (it hung past 240 s with --timeout 30), with a length under the cap
    (one over it is the next test)."""
    _partial_reply(kind, "reset", tmp_path)


@pytest.mark.parametrize("kind", kinds("none"))
def test_a_partial_reply_at_import_is_a_timeout_finding_within_the_call_timeout(
    kind: str, tmp_path: Path
) -> None:
    """Case 11 sent while the driver opens (it hung past 701 s)."""
    _partial_reply(kind, "import", tmp_path)


def _partial_reply(kind: str, where: str, tmp_path: Path) -> None:
    check, text, elapsed = verify_timed(kind, hostile_port(tmp_path / "port", where, 1_000_000))
    assert check.split(".")[0] == "timeout", text
    assert "8 of 1,000,000 bytes" in text, text
    assert ("--timeout" in text) == (where == "import"), text
    assert elapsed < TIMEOUT_S + MARGIN_S, elapsed


@pytest.mark.parametrize("kind", kinds(*ALL))
def test_a_reply_announced_beyond_the_cap_is_a_contract_finding_at_once(
    kind: str, tmp_path: Path
) -> None:
    """The hostile-user probe: a header announcing 100 MB in ``reset``."""
    check, text, elapsed = verify_timed(kind, hostile_port(tmp_path / "port", "reset", 10**8))
    assert check.split(".")[0] == "contract", text
    assert "announced 100,000,000 bytes" in text, text
    assert elapsed < TIMEOUT_S + MARGIN_S, elapsed


# ---- case 12: --timeout covers the import ------------------------------------------------------


@pytest.mark.parametrize("kind", kinds("none"))
def test_a_port_that_sleeps_at_import_times_out_at_the_call_timeout(
    kind: str, tmp_path: Path
) -> None:
    check, text, elapsed = verify_timed(kind, hostile_port(tmp_path / "port", "import", None))
    assert check.split(".")[0] == "timeout", text
    assert f"within {TIMEOUT_S:g} s (the call timeout, --timeout, covers the import" in text
    assert elapsed < TIMEOUT_S + MARGIN_S, elapsed


def test_the_build_limit_is_its_own_option() -> None:
    def envforge(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "envforge.cli", *args]
        env = dict(os.environ, COLUMNS="200")
        return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)

    helped = envforge("verify", "--help")
    assert "--build-timeout" in helped.stdout and "import included" in helped.stdout
    bad = envforge("verify", "pong", "--build-timeout", "0")
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "envforge: error: --build-timeout: expected a finite number of seconds > 0, got 0.0"
    ]


# ---- the frames themselves, on a socket pair ----------------------------------------------------


def _pair() -> tuple[int, Connection]:
    """The host's non-blocking end and a server's multiprocessing Connection."""
    host, server = socket.socketpair()
    os.set_blocking(host.fileno(), False)
    return host.detach(), Connection(server.detach())


def test_frames_speak_multiprocessings_framing_both_ways() -> None:
    host, server = _pair()
    for size in (0, 10, 16384, 16385, 3 << 20):
        payload = os.urandom(size)
        deadline = time.monotonic() + 10
        reader = threading.Thread(target=lambda p=payload: server.send_bytes(p))
        reader.start()
        assert recv_frame(host, deadline, FLOOR_BYTES) == payload
        reader.join()
        got: list[bytes] = []
        reader = threading.Thread(target=lambda g=got: g.append(server.recv_bytes()))
        reader.start()
        send_frame(host, payload, deadline)
        reader.join()
        assert got == [payload]
    os.close(host)
    server.close()


def test_a_stalled_frame_meets_one_deadline_over_the_whole_frame() -> None:
    host, server = _pair()
    raw = server.fileno()

    def trickle() -> None:  # a byte every 0.2 s: each read gets something, the frame never ends
        os.write(raw, struct.pack("!i", 1000))
        for _ in range(30):
            time.sleep(0.2)
            try:
                os.write(raw, b"x")
            except OSError:
                return

    threading.Thread(target=trickle, daemon=True).start()
    start = time.monotonic()
    with pytest.raises(FrameTimeout) as caught:
        recv_frame(host, start + 1.0, FLOOR_BYTES)
    assert time.monotonic() - start < 2.0
    assert caught.value.size == 1000 and 0 < caught.value.got < 1000
    os.close(host)
    server.close()


def test_a_frame_beyond_the_cap_is_refused_from_its_header() -> None:
    host, server = _pair()
    os.write(server.fileno(), struct.pack("!iQ", -1, 1 << 40))
    with pytest.raises(FrameTooLong) as caught:
        recv_frame(host, time.monotonic() + 5, FLOOR_BYTES)
    assert caught.value.size == 1 << 40 and caught.value.cap == FLOOR_BYTES
    server.close()
    with pytest.raises(FrameClosed):
        recv_frame(host, time.monotonic() + 5, FLOOR_BYTES)
    os.close(host)


def test_a_server_that_does_not_read_cannot_hold_a_send() -> None:
    host, server = _pair()
    start = time.monotonic()
    with pytest.raises(FrameTimeout):
        send_frame(host, b"x" * (64 << 20), start + 1.0)
    assert time.monotonic() - start < 2.0
    os.close(host)
    server.close()


def test_the_cap_grows_with_the_rows_asked_for() -> None:
    import numpy as np

    spec = spec_for_name("pong")
    small = reply_cap(spec, "reset", (np.arange(4, dtype=np.uint32),))
    large = reply_cap(spec, "reset", (np.arange(400_000, dtype=np.uint32),))
    assert FLOOR_BYTES < small < large
    # a real reply of many rows fits: pong's reset of 400,000 seeds, pickled
    from envforge.backends.recipe import build_driver, reference_recipe

    driver = build_driver(reference_recipe(spec))
    try:
        state = driver.reset(np.arange(400_000, dtype=np.uint32))
        assert len(pickle.dumps(("ok", state), pickle.HIGHEST_PROTOCOL)) < large
    finally:
        driver.close()


def test_a_partial_reply_from_the_trainer_child_is_a_timeout_within_its_limit(
    tmp_path: Path,
) -> None:
    """L4 under ``--sandbox none`` (and ``envforge train``) trains in a plain child: its one reply
    is read whole within the training limit, so a lying header cannot hold the verifier."""
    from envforge.errors import DriverTimeout
    from envforge.train.child import train_port_isolated
    from envforge.train.config import PPOConfig

    port = hostile_port(tmp_path / "port", "import", 1_000_000)
    cfg = PPOConfig(total_timesteps=512, num_envs=4, num_steps=32)
    start = time.monotonic()
    with pytest.raises(DriverTimeout) as caught:
        train_port_isolated(port, spec_for_name("pong"), cfg, seeds=1, timeout_s=TIMEOUT_S)
    assert time.monotonic() - start < TIMEOUT_S + MARGIN_S
    assert "8 of 1,000,000 bytes" in str(caught.value)
