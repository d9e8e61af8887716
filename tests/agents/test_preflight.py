"""`envforge translate` checks what the verifier will need before the first model call: a tool
missing from PATH is one line on stderr and exit 2, and the model server never hears of it.

Absence is real: the CLI runs in a child whose PATH lacks the tool's folders, through an
interpreter linked from a folder without maturin (the build also looks beside the interpreter).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from envforge.errors import BadInput
from envforge.native.rust_crates import RUST_CRATES, RustCrate
from envforge.spec import spec_for_name
from envforge.translate.preflight import check_translate

ROOT = Path(__file__).resolve().parents[2]


class CountingServer(ThreadingHTTPServer):
    requests = 0


class _Refuse(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        assert isinstance(self.server, CountingServer)
        self.server.requests += 1
        self.send_error(500, "this test expects no model call")

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def model_server() -> Iterator[CountingServer]:
    server = CountingServer(("127.0.0.1", 0), _Refuse)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _path_without(*programs: str) -> str:
    folders = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join(f for f in folders if not any((Path(f) / p).exists() for p in programs))


def _translate(
    tmp_path: Path, server: CountingServer, path: str, *args: str
) -> subprocess.CompletedProcess[str]:
    python = tmp_path / "bin" / "python"
    python.parent.mkdir(exist_ok=True)
    if not python.exists():
        python.symlink_to(sys.executable)
    env = {k: v for k, v in os.environ.items() if k not in ("CC", "CARGO", "VIRTUAL_ENV")}
    env.update(
        PATH=path,
        PYTHONPATH=os.pathsep.join([str(ROOT), *(p for p in sys.path if p and Path(p).is_dir())]),
        OPENAI_BASE_URL=f"http://127.0.0.1:{server.server_address[1]}/v1",
        OPENAI_API_KEY="test-key",
    )
    cmd = [str(python), "-m", "envforge.cli", "translate", "--model", "openai:local"]
    cmd += ["--sandbox", "process", "--ledger", str(tmp_path / "ledger.sqlite"), *args]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def _one_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


@pytest.mark.skipif(shutil.which("cargo") is None, reason="needs cargo, so that maturin is next")
def test_rust_target_without_maturin_stops_before_the_model(
    tmp_path: Path, model_server: CountingServer
) -> None:
    proc = _translate(
        tmp_path,
        model_server,
        _path_without("maturin"),
        "--ref",
        "references/pong/pong.c",
        "--target",
        "rust",
    )
    assert "maturin not found" in _one_line(proc)
    assert model_server.requests == 0
    assert not (tmp_path / "ledger.sqlite").exists()


def test_c_reference_without_a_compiler_stops_before_the_model(
    tmp_path: Path, model_server: CountingServer
) -> None:
    proc = _translate(
        tmp_path,
        model_server,
        _path_without("cc", "gcc"),
        "--ref",
        "references/pong/pong.c",
        "--target",
        "jax",
    )
    line = _one_line(proc)
    assert "C compiler" in line and "gcc" in line
    assert model_server.requests == 0


def test_the_checks_pass_where_the_tools_are_here() -> None:
    pong = spec_for_name("pong")
    check_translate(pong, "jax")  # this machine has a C compiler and JAX
    with pytest.raises(BadInput, match="unsupported target"):
        check_translate(pong, "cobol")


def test_vendored_crates_are_recognized_by_their_versioned_folders(tmp_path: Path) -> None:
    pyo3, numpy, rayon = RUST_CRATES
    for name in ("pyo3-0.30.2", "numpy-0.29.0", "rayon-1.11.0"):
        (tmp_path / name).mkdir()
    assert pyo3.vendored_in(tmp_path) and rayon.vendored_in(tmp_path)
    assert not numpy.vendored_in(tmp_path)  # 0.29 does not meet "0.30"
    assert not RustCrate("pyo3", "0.30").vendored_in(tmp_path / "missing")
    assert pyo3.requirement() == 'pyo3 = { version = "0.30", features = ["extension-module"] }'
