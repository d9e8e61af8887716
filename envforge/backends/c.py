"""C backend: compile a reference into a shared library and drive a batch of structs with ctypes.

The reference exposes ``<prefix>_reset(S*, uint32_t seed)``, ``<prefix>_step(S*, action,
float* reward, uint8_t* terminated, uint8_t* truncated)`` and ``<prefix>_observe(const S*,
float* obs)``; ``action`` is ``int32_t`` for discrete and ``const float*`` for continuous
actions. The backend parses the struct declaration into a numpy dtype (``c_struct.py``),
compiles a small shim that includes the reference and loops over a batch (``c_shim.py``),
checks that layout against the compiler's own ``sizeof``/``offsetof``, and caches the library
by content hash and flags.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from envforge.backends.base import Driver, State, Transition, canonicalize
from envforge.cache import cache_root
from envforge.coverage.gcov import GcovBuild
from envforge.coverage.lines import LineCoverage
from envforge.errors import BadInput, ContractViolation
from envforge.native import c_draws
from envforge.native.c_includes import quoted_includes
from envforge.native.c_shim import shim_source
from envforge.native.c_struct import StructMember, parse_struct
from envforge.native.c_threads import sweep_threads
from envforge.native.cc import c_compiler
from envforge.native.digest.blocks import join, state_digests
from envforge.rng.draws import DrawLog, row_seeds
from envforge.spec import EnvSpec

THREADED_SEEDS = 1 << 16
"""Digest calls of at least this many seeds are split across threads where that is safe."""
STRICT_CFLAGS = ("-O2", "-ffp-contract=off", "-fno-fast-math", "-DENVFORGE_FTZ")
FAST_CFLAGS = ("-O2",)


def cache_dir() -> Path:
    path = cache_root() / "c"
    path.mkdir(parents=True, exist_ok=True)
    return path


def compile_reference(spec: EnvSpec, reference: Path, strict_float: bool) -> tuple[Path, list]:
    """Build (or reuse) the shared library; returns its path and the parsed struct members."""
    assert spec.c is not None
    source = reference.read_text()
    members = parse_struct(source, spec.c.struct)
    if not c_draws.draws_spec(spec.rng.step) and c_draws.calls_hook(source, spec.c.prefix):
        raise BadInput(
            f"{reference.name} draws through {spec.c.prefix}_draw but its spec has [rng] step = "
            f'"none"; declare step = "tape" (its draws replayed to the port) or "distribution" '
            "(docs/SPEC.md, randomness inside step)"
        )
    compiler = c_compiler()
    if compiler is None:
        raise BadInput("no C compiler found (set CC)")
    flags = [*(STRICT_CFLAGS if strict_float else FAST_CFLAGS), *spec.c.cflags]
    shim = shim_source(spec, reference.resolve(), members)
    extra = [(spec.root / src) for src in spec.c.sources]
    digest = hashlib.sha256()
    for part in (source, shim, " ".join(flags), compiler, *(p.read_text() for p in extra)):
        digest.update(part.encode())
    out_dir = cache_dir()
    lib = out_dir / f"{spec.c.prefix}-{digest.hexdigest()[:16]}.so"
    if not lib.exists():
        shim_path = out_dir / f"{lib.stem}.c"
        shim_path.write_text(shim)
        tmp = lib.with_suffix(f".{os.getpid()}.tmp")
        cmd = [
            compiler,
            *flags,
            "-shared",
            "-fPIC",
            "-o",
            str(tmp),
            str(shim_path),
            *map(str, extra),
            "-lm",
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise ContractViolation(
                "reference", "build", f"C compilation failed:\n{proc.stderr[-3000:]}"
            )
        tmp.replace(lib)  # atomic: concurrent builders never load a half-written library
    return lib, members


class CDriver(Driver):
    side = "reference"

    def __init__(self, spec: EnvSpec, reference: Path, strict_float: bool = False) -> None:
        super().__init__(spec)
        if spec.c is None:
            raise BadInput(f"{spec.name}: a C reference needs a [c] table in env.toml")
        self.reference = reference
        lib_path, members = compile_reference(spec, reference, strict_float)
        self.lib = ctypes.CDLL(str(lib_path))
        # the library's name carries the hash of its source, shim, flags and compiler
        self._fingerprint = f"c:{lib_path.stem}"
        self.dtype = self._checked_dtype(members)
        self.field_map = {f.name: (f.c_field or f.name) for f in spec.state}
        names = {m for m, _, _ in members}
        missing = [c for c in self.field_map.values() if c not in names]
        if missing:
            raise BadInput(f"{spec.name}: struct {spec.c.struct} has no member(s) {missing}")
        self.hooked = c_draws.draws_spec(spec.rng.step)
        self._bind(self.lib)
        self._plain_lib = self.lib  # the seed sweep's, also while coverage is counted
        self._members = members
        self.strict_float = strict_float
        self._gcov: GcovBuild | None = None
        # absent when a field is not stored as its spec dtype (see c_shim.digest_shim)
        self._native_digest = getattr(self.lib, "envforge_reset_digest", None)
        if self._native_digest is not None:
            vp, i64 = ctypes.c_void_p, ctypes.c_int64
            self._native_digest.argtypes = [i64, vp, i64, vp, vp]
        self._sweep_threads = sweep_threads(lib_path)

    def _bind(self, lib: ctypes.CDLL) -> None:
        vp, i64 = ctypes.c_void_p, ctypes.c_int64
        lib.envforge_reset.argtypes = [i64, vp, vp]
        if self.hooked:
            c_draws.bind(lib)
        else:
            lib.envforge_step.argtypes = [i64, vp, vp, vp, vp, vp]
        lib.envforge_observe.argtypes = [i64, vp, vp]

    # ---- reference coverage (gcov.py): reset, step and observe run instrumented; the seed
    # sweep's digests keep the plain build, so coverage costs the sweep no seeds
    def coverage_start(self) -> bool:
        if self._gcov is None:
            assert self.spec.c is not None
            flags = [*(STRICT_CFLAGS if self.strict_float else FAST_CFLAGS), *self.spec.c.cflags]
            shim = shim_source(self.spec, self.reference.resolve(), self._members)
            self._gcov = GcovBuild(shim, flags, self.compiled_sources())
            self.lib = self._gcov.lib
            self._bind(self.lib)
        self._gcov.start()
        return True

    def coverage_read(self) -> list[LineCoverage] | None:
        return self._gcov.read() if self._gcov is not None else None

    def close(self) -> None:
        if self._gcov is not None:
            self._gcov.close()

    def _checked_dtype(self, members: list[StructMember]) -> np.dtype:
        dtype = np.dtype([(m, t, shape) for m, t, shape in members], align=True)
        sizeof = self.lib.envforge_sizeof
        sizeof.restype = ctypes.c_size_t
        if dtype.itemsize != sizeof():
            raise ContractViolation(
                "reference", "build", f"struct size {sizeof()} != parsed {dtype.itemsize}"
            )
        for m, _, _ in members:
            fn = getattr(self.lib, f"envforge_offsetof_{m}")
            fn.restype = ctypes.c_size_t
            if dtype.fields is None or fn() != dtype.fields[m][1]:
                raise ContractViolation(
                    "reference", "build", f"offset of {m} differs from parsed layout"
                )
        return dtype

    def structs_of(self, state: State) -> np.ndarray:
        n = len(next(iter(state.values())))
        envs = np.zeros(n, dtype=self.dtype)
        for name, member in self.field_map.items():
            envs[member] = state[name]
        return envs

    def canonical_of(self, envs: np.ndarray) -> State:
        return {
            f.name: np.array(envs[self.field_map[f.name]], dtype=f.np_dtype)
            for f in self.spec.state
        }

    def reset_structs(self, seeds: np.ndarray, lib: ctypes.CDLL | None = None) -> np.ndarray:
        seeds = np.ascontiguousarray(seeds, dtype=np.uint32)
        envs = np.zeros(len(seeds), dtype=self.dtype)
        (lib or self.lib).envforge_reset(len(seeds), envs.ctypes.data, seeds.ctypes.data)
        return envs

    def reset(self, seeds: np.ndarray) -> State:
        return self.canonical_of(self.reset_structs(seeds))

    def reset_digest(self, seeds: np.ndarray, block: int) -> np.ndarray:
        seeds = np.ascontiguousarray(seeds, dtype=np.uint32)
        native = self._native_digest
        if native is not None and block >= 1:
            blocks = -(-len(seeds) // block)
            lo, hi = np.zeros(blocks, np.uint32), np.zeros(blocks, np.uint32)
            # whole blocks per thread: each writes its own sums (c_threads.py says when)
            half = blocks // 2 * block if len(seeds) >= THREADED_SEEDS else 0
            parts = [(0, half), (half, len(seeds))] if half and self._sweep_threads > 1 else []
            parts = parts or [(0, len(seeds))]

            def digest(part: tuple[int, int]) -> None:
                first, end = part
                at, word = first // block, lo.itemsize
                native(
                    end - first,
                    seeds[first:].ctypes.data,
                    block,
                    lo.ctypes.data + at * word,
                    hi.ctypes.data + at * word,
                )

            if len(parts) > 1:
                with ThreadPoolExecutor(len(parts)) as pool:
                    list(pool.map(digest, parts))  # ctypes calls release the GIL
            else:
                digest(parts[0])
            return join(lo, hi)
        # hashed straight from the structs' fields (strided views): copying each field out
        # first took twice as long as the reset and the hash together
        envs = self.reset_structs(seeds, self._plain_lib)
        fields = {f.name: envs[self.field_map[f.name]] for f in self.spec.state}
        return state_digests(self.spec, canonicalize(self.spec, fields, self.side, "reset"), block)

    def step(self, state: State, actions: np.ndarray) -> Transition:
        return self.step_structs(self.structs_of(state), actions)

    def step_structs(self, envs: np.ndarray, actions: np.ndarray) -> Transition:
        """Step whole structs in place (every member, not only the canonical fields). Under the
        draw hook the draws come from a generator seeded by each row's state and action, so the
        same input gives the same output."""
        if self.hooked:
            seeds = row_seeds(self.canonical_of(envs), np.asarray(actions))
            return self.step_hooked(envs, actions, seeds, None)[0]
        n = len(envs)
        acts = self._actions(actions)
        rewards = np.zeros(n, np.float32)
        term = np.zeros(n, np.uint8)
        trunc = np.zeros(n, np.uint8)
        self.lib.envforge_step(
            n,
            envs.ctypes.data,
            acts.ctypes.data,
            rewards.ctypes.data,
            term.ctypes.data,
            trunc.ctypes.data,
        )
        return self._transition(envs, rewards, term, trunc)

    def _actions(self, actions: np.ndarray) -> np.ndarray:
        act_dtype = np.int32 if self.spec.action.type == "discrete" else np.float32
        return np.ascontiguousarray(actions, dtype=act_dtype)

    def _transition(
        self, envs: np.ndarray, rewards: np.ndarray, term: np.ndarray, trunc: np.ndarray
    ) -> Transition:
        return Transition(
            self.canonical_of(envs),
            self.observe_structs(envs),
            rewards.astype(np.float64),
            term.astype(bool),
            trunc.astype(bool),
        )

    def step_draws(
        self, state: State, actions: np.ndarray, seeds: np.ndarray, tape: DrawLog | None
    ) -> tuple[Transition, DrawLog]:
        """Through the draw hook: a reference draws from ``seeds`` and records every draw (a
        tape is ignored); a C port (``side == "port"``) takes the tape's values when it is
        handed one. Returns the transition and the draws this side asked for."""
        if not self.hooked:
            return super().step_draws(state, actions, seeds, tape)
        replay = tape if self.side == "port" else None
        return self.step_hooked(self.structs_of(state), actions, seeds, replay)

    def step_hooked(
        self, envs: np.ndarray, actions: np.ndarray, seeds: np.ndarray, tape: DrawLog | None
    ) -> tuple[Transition, DrawLog]:
        n, size = len(envs), self.spec.rng.tape_size
        acts = self._actions(actions)
        rewards = np.zeros(n, np.float32)
        term = np.zeros(n, np.uint8)
        trunc = np.zeros(n, np.uint8)
        seeds = np.ascontiguousarray(seeds, dtype=np.uint64)
        values = None
        if tape is not None:
            values = np.zeros((n, size))
            k = min(size, tape.size)
            values[:, :k] = tape.value[:n, :k]
        log = DrawLog.empty(n, size)
        bad = np.zeros(n, np.int32)
        self.lib.envforge_step_draws(
            n,
            envs.ctypes.data,
            acts.ctypes.data,
            rewards.ctypes.data,
            term.ctypes.data,
            trunc.ctypes.data,
            seeds.ctypes.data,
            None if values is None else values.ctypes.data,
            size,
            *(col.ctypes.data for col in (log.kind, log.a, log.b, log.value, log.site)),
            log.count.ctypes.data,
            bad.ctypes.data,
        )
        log.sites = c_draws.sites(self.lib)
        self._check_draws(log, bad)
        return self._transition(envs, rewards, term, trunc), log

    def _check_draws(self, log: DrawLog, bad: np.ndarray) -> None:
        """A draw the hook cannot make, or more draws than the tape holds, is refused."""
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            what = (
                "a weighted choice (draw random() and search the cumulative weights)"
                if bad[i] == 1
                else "a draw of an unknown kind (kinds 1-5: random, uniform, integers, "
                "choice, normal)"
            )
            raise ContractViolation(
                self.side, "step", f"{self.describe()} asked the draw hook for {what}"
            )
        if self.spec.rng.step == "tape" and int(log.count.max(initial=0)) > log.size:
            i = int(np.argmax(log.count))
            raise ContractViolation(
                self.side,
                "step",
                f"drew {int(log.count[i])} numbers in one step; the spec's [rng] tape_size "
                f"is {log.size} (raise it)",
            )

    def observe_structs(self, envs: np.ndarray) -> np.ndarray:
        obs = np.zeros((len(envs), *self.spec.observation.shape), np.float32)
        self.lib.envforge_observe(len(envs), envs.ctypes.data, obs.ctypes.data)
        return obs

    def observe(self, state: State) -> np.ndarray:
        return self.observe_structs(self.structs_of(state))

    def reset_fingerprint(self) -> str | None:
        return self._fingerprint

    def compiled_sources(self) -> list[Path]:
        """The reference (which the shim includes) and the spec's extra compiled units."""
        extra = self.spec.c.sources if self.spec.c else ()
        return [self.reference, *(self.spec.root / s for s in extra)]

    def source_files(self) -> list[Path]:
        compiled = self.compiled_sources()  # and the headers they include: findings name them
        return [compiled[0], *quoted_includes(self.reference), *compiled[1:]]

    def describe(self) -> str:
        return f"C reference {self.reference.name}"
