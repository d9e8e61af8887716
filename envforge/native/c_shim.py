"""The C source the C backend compiles around a reference: batch entry points and reset digests.

``shim_source`` includes the reference and loops its ``reset``/``step``/``observe`` over a
batch of structs, exposes the compiler's ``sizeof``/``offsetof`` for the layout check, and
adds ``envforge_reset_digest`` (``digest_shim``) when every field is stored as its spec dtype.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from envforge.native.c_draws import batch_source, draws_spec, hook_source
from envforge.native.c_struct import StructMember
from envforge.native.digest.blocks import LANE_START, ROW_MULT, word_key
from envforge.spec import EnvSpec

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


def digest_shim(spec: EnvSpec, members: list[StructMember]) -> str:
    """C source of ``envforge_reset_digest``: each seed reset into one struct and hashed as
    ``digest.blocks`` defines it, with no state leaving C; or ``""`` when a field's member is
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

/* block digests of the reset states (envforge/native/digest/blocks.py defines them); locals are
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


def shim_source(spec: EnvSpec, reference: Path, members: list[StructMember]) -> str:
    assert spec.c is not None
    s, p = spec.c.struct, spec.c.prefix
    if spec.action.type == "discrete":
        action_arg, action_expr = "const int32_t* actions", "actions[i]"
    else:
        dim = int(np.prod(spec.action.shape or (1,)))
        action_arg, action_expr = "const float* actions", f"actions + i * {dim}"
    obs_dim = int(np.prod(spec.observation.shape))
    hooked = draws_spec(spec.rng.step)
    if hooked:  # step takes the draw hook's argument (c_draws.py)
        step = batch_source(s, p, action_arg, action_expr)
    else:
        step = f"""
void envforge_step(int64_t n, {s}* envs, {action_arg}, float* rewards,
                   uint8_t* terminated, uint8_t* truncated) {{
    ENVFORGE_ENTER
    for (int64_t i = 0; i < n; i++)
        {p}_step(&envs[i], {action_expr}, &rewards[i], &terminated[i], &truncated[i]);
    ENVFORGE_LEAVE
}}
"""
    offsets = "\n".join(
        f"size_t envforge_offsetof_{m}(void) {{ return offsetof({s}, {m}); }}"
        for m, _, _ in members
    )
    return f"""/* generated by envforge: batch entry points around the reference */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
{hook_source(p) if hooked else ""}
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

{step}
void envforge_observe(int64_t n, const {s}* envs, float* obs) {{
    ENVFORGE_ENTER
    for (int64_t i = 0; i < n; i++) {p}_observe(&envs[i], obs + i * {obs_dim});
    ENVFORGE_LEAVE
}}
{digest_shim(spec, members)}"""
