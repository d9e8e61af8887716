"""Node backend: a JavaScript reference run by node as a child process, called in batches.

The reference is a CommonJS module exporting ``reset(seed) -> object``, ``step(object, action)
-> {reward, terminated, truncated}`` (it changes the object) and ``observe(object, out)``
(it fills the Float32Array ``out``). Each canonical field's ``attr`` is a path into that
object, one ``[*]`` per dimension of the field (``sides[*].team[*].hp`` for a ``[2, 3]``
field). ``envforge/backends/node_runner.js`` loads the module and serves whole batches per
call: the states travel as typed arrays, one per field (never one JSON object per step). A
step writes each env's state into a fresh object from ``reset(0)``, steps it and reads it
back, so the reference is pure from the verifier's view.

A thrown error comes back as :class:`DriverRaised` with the JavaScript stack (the reference's
frames are what localization reads); node dying is :class:`DriverCrashed`; a call that does
not return within the time limit kills node and is :class:`DriverTimeout`.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import struct
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from envforge.backends.base import Driver, State, Transition
from envforge.errors import BadInput, DriverCrashed, DriverRaised, DriverTimeout
from envforge.spec import EnvSpec
from envforge.untrusted.owned_names import owned_prefix
from envforge.untrusted.sandbox_logs import read_tail

RUNNER = Path(__file__).with_name("node_runner.js")
NODE_DTYPES = ("float32", "float64", "int32", "uint32", "uint8", "bool")
"""Field dtypes a typed array holds exactly (64-bit integers would need BigInt)."""
_PATH = re.compile(
    r"^[A-Za-z_$][\w$]*(?:\[(?:\*|\d+)\])*(?:\.[A-Za-z_$][\w$]*(?:\[(?:\*|\d+)\])*)*$"
)


def _pad8(n: int) -> int:
    return (n + 7) & ~7


def node_executable() -> str:
    node = shutil.which("node")
    if node is None:
        raise BadInput("the JavaScript reference needs node on PATH: install Node.js")
    return node


def field_paths(spec: EnvSpec) -> list[dict[str, Any]]:
    """The runner's view of the canonical fields; a mapping that cannot work is BadInput."""
    out = []
    for f in spec.state:
        if f.attr is None or not _PATH.match(f.attr):
            raise BadInput(
                f"{spec.name}: field {f.name} needs attr = a path into the JavaScript object "
                f"(e.g. 'sides[*].team[*].hp'), got {f.attr!r}"
            )
        if f.dtype not in NODE_DTYPES:
            raise BadInput(
                f"{spec.name}: field {f.name} is {f.dtype}; a JavaScript reference's fields "
                f"are one of {', '.join(NODE_DTYPES)}"
            )
        if f.attr.count("[*]") != len(f.shape):
            raise BadInput(
                f"{spec.name}: field {f.name} has shape {list(f.shape)} but its path "
                f"{f.attr} has {f.attr.count('[*]')} [*]"
            )
        out.append({"name": f.name, "dtype": f.dtype, "shape": list(f.shape), "path": f.attr})
    return out


class NodeDriver(Driver):
    side = "reference"

    def __init__(self, spec: EnvSpec, reference: Path, timeout_s: float | None = None) -> None:
        super().__init__(spec)
        self.reference = reference.resolve()
        if not self.reference.is_file():
            raise BadInput(f"reference file not found: {reference}")
        self.timeout_s = timeout_s or spec.verify.timeout_s
        self._fields = field_paths(spec)
        self._obs_size = int(np.prod(spec.observation.shape))
        self._proc: subprocess.Popen[bytes] | None = None
        # named after its owner: a process killed before close() leaves it to the next sweep
        fd, self._log_path = tempfile.mkstemp(prefix=owned_prefix("node"), suffix=".log")
        os.close(fd)
        self._reply = -1
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    # ---- the child -------------------------------------------------------------------
    def _start(self) -> None:
        reply_r, reply_w = os.pipe()
        with open(self._log_path, "ab") as log:
            self._proc = subprocess.Popen(
                [node_executable(), str(RUNNER), str(self.reference), str(reply_w)],
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=log,
                pass_fds=(reply_w,),
                cwd=self.reference.parent,
            )
        os.close(reply_w)
        self._reply = reply_r
        self._call("init", {"fields": self._fields, "obs_size": self._obs_size}, b"")

    def _stderr_tail(self, limit: int = 2000) -> str:
        return read_tail(Path(self._log_path), limit)

    def _kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(5)

    def _read(self, n: int, call: str, deadline: float) -> bytes:
        chunks, got = [], 0
        while got < n:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._reply], [], [], max(0.0, left))
            if not ready:
                self._kill()
                raise DriverTimeout(
                    self.side,
                    call,
                    f"did not return within {self.timeout_s:g} s (node killed)",
                    self._stderr_tail(),
                )
            chunk = os.read(self._reply, min(n - got, 1 << 20))
            if not chunk:
                raise self._crashed(call)
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def _crashed(self, call: str) -> DriverCrashed:
        assert self._proc is not None
        try:
            code = self._proc.wait(5)
        except subprocess.TimeoutExpired:
            self._kill()
            code = self._proc.returncode
        how = f"exit code {code}"
        if code is not None and code < 0:
            how = f"signal {signal.Signals(-code).name}"
        return DriverCrashed(self.side, call, f"node died ({how})", self._stderr_tail())

    def _call(self, op: str, header: dict[str, Any], payload: bytes) -> tuple[dict, bytes]:
        """One request and its reply: ``(reply header, reply payload)``."""
        assert self._proc is not None and self._proc.stdin is not None
        head = json.dumps({"op": op, **header}).encode()
        frame = struct.pack("<II", 8 + len(head) + len(payload), len(head)) + head + payload
        try:
            self._proc.stdin.write(frame)
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._crashed(op) from None
        deadline = time.monotonic() + self.timeout_s
        total, header_len = struct.unpack("<II", self._read(8, op, deadline))
        body = self._read(total - 8, op, deadline)
        reply = json.loads(body[:header_len])
        if "error" in reply:
            raise self._raised(op, reply)
        return reply, body[header_len:]

    def _raised(self, call: str, reply: dict[str, Any]) -> DriverRaised:
        where = f" (env {reply['env']} of the batch)" if reply.get("env", -1) >= 0 else ""
        frames = [line.strip() for line in str(reply.get("stack", "")).splitlines()[1:]]
        ours = [line for line in frames if str(self.reference) in line]
        at = f" {ours[0]}" if ours else ""
        return DriverRaised(
            self.side,
            call,
            f"raised {reply.get('name', 'Error')}: {reply['error']}{where}{at}",
            str(reply.get("stack", "")),
        )

    # ---- encoding --------------------------------------------------------------------
    def _encode_state(self, state: State) -> bytes:
        parts = []
        for f in self.spec.state:
            raw = np.ascontiguousarray(state[f.name], dtype=f.np_dtype).tobytes()
            parts.append(raw + b"\0" * (_pad8(len(raw)) - len(raw)))
        return b"".join(parts)

    def _decode(self, payload: bytes, n: int, with_transition: bool) -> tuple[State, int]:
        state: State = {}
        at = 0
        for f in self.spec.state:
            dtype = np.uint8 if f.dtype == "bool" else f.np_dtype
            count = n * int(np.prod(f.shape))
            arr = np.frombuffer(payload, dtype=dtype, count=count, offset=at)
            state[f.name] = arr.reshape(n, *f.shape).astype(f.np_dtype)
            at += _pad8(count * np.dtype(dtype).itemsize)
        return state, at

    def _obs(self, payload: bytes, n: int, at: int) -> tuple[np.ndarray, int]:
        count = n * self._obs_size
        obs = np.frombuffer(payload, np.float32, count, at).reshape(n, *self.spec.observation.shape)
        return obs.copy(), at + _pad8(4 * count)

    # ---- Driver API ------------------------------------------------------------------
    def reset(self, seeds: np.ndarray) -> State:
        seeds = np.ascontiguousarray(seeds, dtype=np.uint32)
        _, payload = self._call("reset", {"n": len(seeds)}, seeds.tobytes())
        return self._decode(payload, len(seeds), False)[0]

    def step(self, state: State, actions: np.ndarray) -> Transition:
        n = len(actions)
        acts = np.ascontiguousarray(actions, dtype=np.int32).reshape(n)
        _, payload = self._call("step", {"n": n}, self._encode_state(state) + acts.tobytes())
        new_state, at = self._decode(payload, n, True)
        obs, at = self._obs(payload, n, at)
        reward = np.frombuffer(payload, np.float64, n, at).copy()
        at += _pad8(8 * n)
        terminated = np.frombuffer(payload, np.uint8, n, at).astype(bool)
        at += _pad8(n)
        truncated = np.frombuffer(payload, np.uint8, n, at).astype(bool)
        return Transition(new_state, obs, reward, terminated, truncated)

    def observe(self, state: State) -> np.ndarray:
        n = len(next(iter(state.values())))
        _, payload = self._call("observe", {"n": n}, self._encode_state(state))
        return self._obs(payload, n, 0)[0]

    def explain(self, state: State, actions: np.ndarray) -> list[str] | None:
        n = len(actions)
        acts = np.ascontiguousarray(actions, dtype=np.int32).reshape(n)
        reply, _ = self._call("explain", {"n": n}, self._encode_state(state) + acts.tobytes())
        texts = reply.get("texts")
        return None if texts is None else [str(t) for t in texts]

    def reset_fingerprint(self) -> str | None:
        import hashlib

        digest = hashlib.sha256(self.reference.read_bytes() + RUNNER.read_bytes())
        return f"node:{self.reference.stem}-{digest.hexdigest()[:16]}"

    def source_files(self) -> list[Path]:
        return [self.reference]

    def describe(self) -> str:
        return f"JavaScript reference {self.reference.name} (node)"

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            try:
                assert self._proc.stdin is not None
                head = json.dumps({"op": "close"}).encode()
                self._proc.stdin.write(struct.pack("<II", 8 + len(head), len(head)) + head)
                self._proc.stdin.close()
                self._proc.wait(5)
            except (BrokenPipeError, OSError, subprocess.TimeoutExpired):
                pass
        self._kill()
        if self._reply >= 0:
            os.close(self._reply)
            self._reply = -1
        Path(self._log_path).unlink(missing_ok=True)
