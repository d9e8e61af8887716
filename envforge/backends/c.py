"""C backend: compile a reference into a shared library and drive a batch of structs with ctypes.

The reference exposes ``<prefix>_reset(S*, uint32_t seed)``, ``<prefix>_step(S*, action,
float* reward, uint8_t* terminated, uint8_t* truncated)`` and ``<prefix>_observe(const S*,
float* obs)``; ``action`` is ``int32_t`` for discrete and ``const float*`` for continuous
actions. The backend writes a small shim that includes the reference and loops over a batch,
parses the struct declaration into a numpy dtype, checks that layout against the compiler's
own ``sizeof``/``offsetof``, and caches the library by content hash and flags.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from envforge.backends.base import Driver, State, Transition, canonicalize
from envforge.backends.c_threads import sweep_threads
from envforge.backends.cc import c_compiler
from envforge.backends.coverage import LineCoverage
from envforge.backends.digest import LANE_START, ROW_MULT, join, state_digests, word_key
from envforge.backends.gcov import GcovBuild
from envforge.cache import cache_root
from envforge.errors import BadInput, ContractViolation
from envforge.spec import EnvSpec

THREADED_SEEDS = 1 << 16
"""Digest calls of at least this many seeds are split across threads where that is safe."""
STRICT_CFLAGS = ("-O2", "-ffp-contract=off", "-fno-fast-math", "-DENVFORGE_FTZ")
FAST_CFLAGS = ("-O2",)

C_TYPES = {
    "float": "f4",
    "double": "f8",
    "int": "i4",
    "int32_t": "i4",
    "unsigned": "u4",
    "unsigned int": "u4",
    "uint32_t": "u4",
    "int64_t": "i8",
    "long long": "i8",
    "uint64_t": "u8",
    "unsigned long long": "u8",
    "int16_t": "i2",
    "short": "i2",
    "uint16_t": "u2",
    "unsigned short": "u2",
    "int8_t": "i1",
    "char": "i1",
    "signed char": "i1",
    "uint8_t": "u1",
    "unsigned char": "u1",
    "bool": "u1",
    "_Bool": "u1",
}


def cache_dir() -> Path:
    path = cache_root() / "c"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _strip_comments(source: str) -> str:
    source = re.sub(r"/\*.*?\*/", " ", source, flags=re.S)
    return re.sub(r"//[^\n]*", " ", source)


def parse_struct(source: str, name: str) -> list[tuple[str, str, tuple[int, ...]]]:
    """Members ``(name, numpy type code, shape)`` of ``typedef struct {...} name;`` or ``struct name {...}``."""
    text = _strip_comments(source)
    match = re.search(
        r"typedef\s+struct\s*\w*\s*\{(?P<body>[^{}]*)\}\s*" + re.escape(name) + r"\s*;", text
    )
    if match is None:
        match = re.search(r"struct\s+" + re.escape(name) + r"\s*\{(?P<body>[^{}]*)\}\s*;", text)
    if match is None:
        raise BadInput(f"struct {name} not found in the C reference")
    members = []
    for decl in match.group("body").split(";"):
        decl = " ".join(decl.split())
        if not decl:
            continue
        m = re.match(
            r"(?P<type>(?:const\s+)?(?:unsigned\s+|signed\s+)?(?:long\s+long|\w+))\s+(?P<rest>.+)",
            decl,
        )
        if m is None:
            raise BadInput(f"cannot parse struct {name} member: {decl!r}")
        ctype = m.group("type").replace("const ", "").strip()
        if ctype not in C_TYPES:
            raise BadInput(f"struct {name}: unsupported member type {ctype!r} in {decl!r}")
        for declarator in m.group("rest").split(","):
            d = re.match(r"\s*(\w+)\s*((?:\[\s*\d+\s*\])*)\s*$", declarator)
            if d is None:
                raise BadInput(f"struct {name}: unsupported declarator {declarator!r}")
            dims = tuple(int(x) for x in re.findall(r"\d+", d.group(2)))
            members.append((d.group(1), C_TYPES[ctype], dims))
    return members


# spec dtype -> the struct member type codes whose bytes are that dtype's canonical bytes
_DIGEST_TYPES = {
    "float32": ("f4",),
    "int32": ("i4",),
    "uint32": ("u4",),
    "float64": ("f8",),
    "int64": ("i8",),
    "uint64": ("u8",),
    "uint8": ("u1",),
    "bool": ("u1",),
}


def _digest_shim(spec: EnvSpec, members: list[tuple[str, str, tuple[int, ...]]]) -> str:
    """C source of ``envforge_reset_digest``: each seed reset into one struct and hashed as
    ``backends.digest`` defines it, with no state leaving C; or ``""`` when a field's member is
    not stored as the spec's dtype (then the driver hashes in numpy)."""
    assert spec.c is not None
    by_name = {m: (code, dims) for m, code, dims in members}
    lines, j = [], 0
    for f in spec.state:
        member = f.c_field or f.name
        code, dims = by_name.get(member, ("", ()))
        if code not in _DIGEST_TYPES[f.dtype] or int(np.prod(dims)) != int(np.prod(f.shape)):
            return ""
        size = int(code[1])
        for k in range(int(np.prod(f.shape))):
            at = f"(const char*)&ef_env.{member} + {k * size}"
            if size == 1:
                test = " != 0" if f.dtype == "bool" else ""
                reads = [f"ef_w = (uint32_t)(*(const uint8_t*)({at}){test});"]
            elif size == 4:
                reads = [f"memcpy(&ef_w, {at}, 4);"]
            else:
                reads = [
                    f"memcpy(&ef_v, {at}, 8); ef_w = (uint32_t)ef_v;",
                    "ef_w = (uint32_t)(ef_v >> 32);",
                ]
            for read in reads:
                lines.append(
                    f"            {read} ef_lo = (ef_lo ^ ef_w) * {word_key(j, 0)}u; "
                    f"ef_hi = (ef_hi ^ ef_w) * {word_key(j, 1)}u;"
                )
                j += 1
    body = "\n".join(lines)
    return f"""
static inline uint32_t envforge_fmix32(uint32_t ef_x) {{
    ef_x ^= ef_x >> 16; ef_x *= 0x85EBCA6Bu; ef_x ^= ef_x >> 13; ef_x *= 0xC2B2AE35u;
    return ef_x ^ (ef_x >> 16);
}}

/* block digests of the reset states (envforge/backends/digest.py defines them); locals are
   prefixed so that no macro of the reference can clash with them */
void envforge_reset_digest(int64_t ef_n, const uint32_t* ef_seeds, int64_t ef_block,
                           uint32_t* ef_lo_sums, uint32_t* ef_hi_sums) {{
    ENVFORGE_ENTER
    {spec.c.struct} ef_env;
    for (int64_t ef_first = 0; ef_first < ef_n; ef_first += ef_block) {{
        int64_t ef_end = ef_n - ef_first < ef_block ? ef_n : ef_first + ef_block;
        uint32_t ef_lo_sum = 0, ef_hi_sum = 0;
        for (int64_t ef_i = ef_first; ef_i < ef_end; ef_i++) {{
            memset(&ef_env, 0, sizeof ef_env);
            {spec.c.prefix}_reset(&ef_env, ef_seeds[ef_i]);
            uint32_t ef_lo = {LANE_START[0]}u, ef_hi = {LANE_START[1]}u, ef_w;
            uint64_t ef_v;
            (void)ef_v;
{body}
            uint32_t ef_row = (uint32_t)(ef_i - ef_first);
            ef_lo_sum += envforge_fmix32(ef_lo + ef_row * {ROW_MULT[0]}u);
            ef_hi_sum += envforge_fmix32(ef_hi ^ (ef_row * {ROW_MULT[1]}u));
        }}
        ef_lo_sums[ef_first / ef_block] = ef_lo_sum;
        ef_hi_sums[ef_first / ef_block] = ef_hi_sum;
    }}
    ENVFORGE_LEAVE
}}
"""


def _shim(spec: EnvSpec, reference: Path, members: list[tuple[str, str, tuple[int, ...]]]) -> str:
    assert spec.c is not None
    s, p = spec.c.struct, spec.c.prefix
    if spec.action.type == "discrete":
        action_arg, action_expr = "const int32_t* actions", "actions[i]"
    else:
        dim = int(np.prod(spec.action.shape or (1,)))
        action_arg, action_expr = "const float* actions", f"actions + i * {dim}"
    obs_dim = int(np.prod(spec.observation.shape))
    offsets = "\n".join(
        f"size_t envforge_offsetof_{m}(void) {{ return offsetof({s}, {m}); }}"
        for m, _, _ in members
    )
    return f"""/* generated by envforge: batch entry points around the reference */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "{reference}"

/* Strict float: XLA on CPU runs with flush-to-zero and denormals-are-zero, so the strict
   build does the same around every batch call (MXCSR bits 15 and 6), then restores them. */
#if defined(ENVFORGE_FTZ) && (defined(__x86_64__) || defined(__i386__))
#include <xmmintrin.h>
#define ENVFORGE_ENTER unsigned int envforge_csr = _mm_getcsr(); _mm_setcsr(envforge_csr | 0x8040u);
#define ENVFORGE_LEAVE _mm_setcsr(envforge_csr);
#else
#define ENVFORGE_ENTER
#define ENVFORGE_LEAVE
#endif

size_t envforge_sizeof(void) {{ return sizeof({s}); }}
{offsets}

void envforge_reset(int64_t n, {s}* envs, const uint32_t* seeds) {{
    ENVFORGE_ENTER
    for (int64_t i = 0; i < n; i++) {p}_reset(&envs[i], seeds[i]);
    ENVFORGE_LEAVE
}}

void envforge_step(int64_t n, {s}* envs, {action_arg}, float* rewards,
                   uint8_t* terminated, uint8_t* truncated) {{
    ENVFORGE_ENTER
    for (int64_t i = 0; i < n; i++)
        {p}_step(&envs[i], {action_expr}, &rewards[i], &terminated[i], &truncated[i]);
    ENVFORGE_LEAVE
}}

void envforge_observe(int64_t n, const {s}* envs, float* obs) {{
    ENVFORGE_ENTER
    for (int64_t i = 0; i < n; i++) {p}_observe(&envs[i], obs + i * {obs_dim});
    ENVFORGE_LEAVE
}}
{_digest_shim(spec, members)}"""


def compile_reference(spec: EnvSpec, reference: Path, strict_float: bool) -> tuple[Path, list]:
    """Build (or reuse) the shared library; returns its path and the parsed struct members."""
    assert spec.c is not None
    source = reference.read_text()
    members = parse_struct(source, spec.c.struct)
    compiler = c_compiler()
    if compiler is None:
        raise BadInput("no C compiler found (set CC)")
    flags = [*(STRICT_CFLAGS if strict_float else FAST_CFLAGS), *spec.c.cflags]
    shim = _shim(spec, reference.resolve(), members)
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
        self._bind(self.lib)
        self._plain_lib = self.lib  # the seed sweep's, also while coverage is counted
        self._members = members
        self.strict_float = strict_float
        self._gcov: GcovBuild | None = None
        # absent when a field is not stored as its spec dtype (see _digest_shim)
        self._native_digest = getattr(self.lib, "envforge_reset_digest", None)
        if self._native_digest is not None:
            vp, i64 = ctypes.c_void_p, ctypes.c_int64
            self._native_digest.argtypes = [i64, vp, i64, vp, vp]
        self._sweep_threads = sweep_threads(lib_path)

    @staticmethod
    def _bind(lib: ctypes.CDLL) -> None:
        vp, i64 = ctypes.c_void_p, ctypes.c_int64
        lib.envforge_reset.argtypes = [i64, vp, vp]
        lib.envforge_step.argtypes = [i64, vp, vp, vp, vp, vp]
        lib.envforge_observe.argtypes = [i64, vp, vp]

    # ---- reference coverage (gcov.py): reset, step and observe run instrumented; the seed
    # sweep's digests keep the plain build, so coverage costs the sweep no seeds
    def coverage_start(self) -> bool:
        if self._gcov is None:
            assert self.spec.c is not None
            flags = [*(STRICT_CFLAGS if self.strict_float else FAST_CFLAGS), *self.spec.c.cflags]
            shim = _shim(self.spec, self.reference.resolve(), self._members)
            self._gcov = GcovBuild(shim, flags, self.source_files())
            self.lib = self._gcov.lib
            self._bind(self.lib)
        self._gcov.start()
        return True

    def coverage_read(self) -> list[LineCoverage] | None:
        return self._gcov.read() if self._gcov is not None else None

    def close(self) -> None:
        if self._gcov is not None:
            self._gcov.close()

    def _checked_dtype(self, members: list[tuple[str, str, tuple[int, ...]]]) -> np.dtype:
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
        """Step whole structs in place (every member, not only the canonical fields)."""
        n = len(envs)
        act_dtype = np.int32 if self.spec.action.type == "discrete" else np.float32
        acts = np.ascontiguousarray(actions, dtype=act_dtype)
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
        obs = self.observe_structs(envs)
        return Transition(
            self.canonical_of(envs),
            obs,
            rewards.astype(np.float64),
            term.astype(bool),
            trunc.astype(bool),
        )

    def observe_structs(self, envs: np.ndarray) -> np.ndarray:
        obs = np.zeros((len(envs), *self.spec.observation.shape), np.float32)
        self.lib.envforge_observe(len(envs), envs.ctypes.data, obs.ctypes.data)
        return obs

    def observe(self, state: State) -> np.ndarray:
        return self.observe_structs(self.structs_of(state))

    def reset_fingerprint(self) -> str | None:
        return self._fingerprint

    def source_files(self) -> list[Path]:
        return [
            self.reference,
            *(self.spec.root / s for s in (self.spec.c.sources if self.spec.c else ())),
        ]

    def describe(self) -> str:
        return f"C reference {self.reference.name}"
