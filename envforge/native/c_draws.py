"""The draw hook of C code that draws inside ``step`` (docs/SPEC.md, randomness inside step).

A C reference of a ``[rng] step = "tape"`` (or ``"distribution"``) spec takes every random
number through one function, ``double <prefix>_draw(void *draws, int kind, double a, double b)``,
and its ``<prefix>_step`` takes the ``void *draws`` it passes on as a sixth argument. Kinds and
parameters are ``rng/draws.py``'s (1 ``random`` on [0, 1), 2 ``uniform[a, b)``, 3
``integers[a, b)``, 4 ``choice`` of ``a`` items (uniform: ``b`` = 0), 5 ``normal(a, b)``); a
shuffle is Fisher-Yates from the end, one ``integers[0, i + 1)`` per position, as the recorder
logs numpy's. The reference declares the function under a guard, because envforge defines
``<prefix>_draw`` as a macro that also passes ``__FILE__`` and ``__LINE__`` (the draw's site)::

    #ifndef pig_draw
    double pig_draw(void *draws, int kind, double a, double b);
    #endif

:func:`hook_source` is the C text that supplies it, placed before the reference is included: a
per-env generator (xoshiro256++ seeded through splitmix64, the numbers of ``rng/draws.rs``'s
``Rng``), and, when the driver hands a log, the record of every draw (kind, parameters, value,
site) -- a reference's draws are its tape; a port's come from the tape it is handed (clamped
into the range it asked, as ``draws.rs`` does) and its log is accounted against the reference's.
Without a log (the bench harness, and ``envforge_step_own``: a C port's envs under
``envforge.make``, each with its own generator seeded at reset) a draw is a few integer
operations.
"""

from __future__ import annotations

import ctypes
import re
from typing import Any

from envforge.native.c_struct import strip_comments

HOOK = r"""
/* ---- envforge's draw hook (envforge/native/c_draws.py; docs/SPEC.md) ---- */
#include <math.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    uint64_t s[4];          /* own generator: xoshiro256++ (rng/draws.rs's Rng) */
    const double* tape;     /* the reference's values (a port under verification), or NULL */
    int8_t* kind;           /* the log, `size` draws (NULL: nothing is logged) */
    double* a;
    double* b;
    double* value;
    int32_t* site;
    int32_t size;
    int32_t count;          /* draws asked (may pass size: counted, not logged) */
    int32_t bad;            /* 1: a weighted choice, 2: an unknown kind (the driver refuses) */
} envforge_draws;

static inline uint64_t envforge_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline void envforge_draws_seed(envforge_draws* d, uint64_t seed) {
    for (int i = 0; i < 4; i++) {
        seed += 0x9E3779B97F4A7C15ull;
        uint64_t z = seed;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        d->s[i] = z ^ (z >> 31);
    }
}

static inline uint64_t envforge_next(envforge_draws* d) {
    uint64_t* s = d->s;
    uint64_t out = envforge_rotl(s[0] + s[3], 23) + s[0];
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = envforge_rotl(s[3], 45);
    return out;
}

static inline double envforge_unit(envforge_draws* d) {
    return (double)(envforge_next(d) >> 11) * (1.0 / 9007199254740992.0);
}

/* unbiased integer on [0, range) (Lemire's multiply-and-reject); 0 when range is 0 */
static inline uint64_t envforge_below(envforge_draws* d, uint64_t range) {
    if (range == 0) return 0;
    uint64_t threshold = (0 - range) % range;
    for (;;) {
        unsigned __int128 m = (unsigned __int128)envforge_next(d) * range;
        if ((uint64_t)m >= threshold) return (uint64_t)(m >> 64);
    }
}

/* a taped value inside the range asked (a wrong range is a finding, not an index off the end) */
static inline double envforge_clamp(int kind, double a, double b, double v) {
    if (v != v) v = a;
    switch (kind) {
    case 1: return v < 0.0 ? 0.0 : (v > 1.0 - 1.1102230246251565e-16 ? 1.0 - 1.1102230246251565e-16 : v);
    case 2: return b > a ? (v < a ? a : (v > b ? b : v)) : v;
    case 3: return b > a ? floor(v < a ? a : (v > b - 1.0 ? b - 1.0 : v)) : v;
    case 4: return a >= 1.0 ? floor(v < 0.0 ? 0.0 : (v > a - 1.0 ? a - 1.0 : v)) : v;
    default: return v;
    }
}

#define ENVFORGE_SITES 256
static const char* envforge_site_files[ENVFORGE_SITES];
static int32_t envforge_site_lines[ENVFORGE_SITES];
static int32_t envforge_site_n;

static int32_t envforge_site_id(const char* file, int32_t line) {
    for (int32_t i = 0; i < envforge_site_n; i++)
        if (envforge_site_lines[i] == line && strcmp(envforge_site_files[i], file) == 0) return i;
    if (envforge_site_n == ENVFORGE_SITES) return -1;
    envforge_site_files[envforge_site_n] = file;
    envforge_site_lines[envforge_site_n] = line;
    return envforge_site_n++;
}

int32_t envforge_draw_site_count(void) { return envforge_site_n; }
const char* envforge_draw_site_file(int32_t i) { return envforge_site_files[i]; }
int32_t envforge_draw_site_line(int32_t i) { return envforge_site_lines[i]; }

static double envforge_draw_at(void* draws, int kind, double a, double b, const char* file,
                               int32_t line) {
    envforge_draws* d = (envforge_draws*)draws;
    double own = 0.0;
    switch (kind) {
    case 1: own = envforge_unit(d); break;
    case 2: own = a + (b - a) * envforge_unit(d); break;
    case 3: {
        int64_t lo = (int64_t)a, hi = (int64_t)b;
        own = (double)(lo + (int64_t)envforge_below(d, hi > lo ? (uint64_t)(hi - lo) : 0));
        break;
    }
    case 4:
        if (b != 0.0) d->bad = 1;
        own = (double)envforge_below(d, a >= 1.0 ? (uint64_t)a : 0);
        break;
    case 5: {
        double u1 = 1.0 - envforge_unit(d), u2 = envforge_unit(d);
        own = a + b * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
        break;
    }
    default: d->bad = 2;
    }
    int32_t j = d->count++;
    double v = d->tape ? (j < d->size ? d->tape[j] : 0.0) : own;
    v = envforge_clamp(kind, a, b, v);
    if (d->kind && j < d->size) {
        d->kind[j] = (int8_t)kind;
        d->a[j] = a;
        d->b[j] = b;
        d->value[j] = v;
        d->site[j] = envforge_site_id(file, line);
    }
    return v;
}

/* the reference's draws, with their site; the function itself for separately compiled sources */
#define {prefix}_draw(draws, kind, a, b) \
    envforge_draw_at((draws), (kind), (a), (b), __FILE__, __LINE__)
double ({prefix}_draw)(void* draws, int kind, double a, double b) {
    return envforge_draw_at(draws, kind, a, b, "", 0);
}
/* ---- end of the draw hook ---- */
"""

BATCH = r"""
/* a batch step under the draw hook: row i draws from tape + i * size (taped) or from its own
   generator seeded by seeds[i], and logs into the rows of kind .. site; count[i] draws */
void envforge_step_draws(int64_t n, {struct}* envs, {action_arg}, float* rewards,
                         uint8_t* terminated, uint8_t* truncated, const uint64_t* seeds,
                         const double* tape, int32_t size, int8_t* kind, double* a, double* b,
                         double* value, int32_t* site, int32_t* count, int32_t* bad) {{
    ENVFORGE_ENTER
    for (int64_t i = 0; i < n; i++) {{
        envforge_draws d;
        memset(&d, 0, sizeof d);
        envforge_draws_seed(&d, seeds[i]);
        int64_t row = i * size;
        d.tape = tape ? tape + row : NULL;
        d.kind = kind + row; d.a = a + row; d.b = b + row; d.value = value + row;
        d.site = site + row;
        d.size = size;
        {prefix}_step(&envs[i], {action_expr}, &rewards[i], &terminated[i], &truncated[i], &d);
        count[i] = d.count;
        bad[i] = d.bad;
    }}
    ENVFORGE_LEAVE
}}

/* the speed path (envforge.make): row i draws from its own generator, whose four words the
   caller keeps between steps (gens + 4 * i) and seeds at reset; nothing is logged */
void envforge_seed_own(int64_t n, const uint64_t* seeds, uint64_t* gens) {{
    for (int64_t i = 0; i < n; i++) {{
        envforge_draws d;
        envforge_draws_seed(&d, seeds[i]);
        memcpy(gens + 4 * i, d.s, sizeof d.s);
    }}
}}

void envforge_step_own(int64_t n, {struct}* envs, {action_arg}, float* rewards,
                       uint8_t* terminated, uint8_t* truncated, uint64_t* gens) {{
    ENVFORGE_ENTER
    for (int64_t i = 0; i < n; i++) {{
        envforge_draws d;
        memset(&d, 0, sizeof d);
        memcpy(d.s, gens + 4 * i, sizeof d.s);
        {prefix}_step(&envs[i], {action_expr}, &rewards[i], &terminated[i], &truncated[i], &d);
        memcpy(gens + 4 * i, d.s, sizeof d.s);
    }}
    ENVFORGE_LEAVE
}}
"""


def draws_spec(step: str) -> bool:
    """Whether a spec's C code takes the draw hook (``[rng] step`` other than ``"none"``)."""
    return step != "none"


def calls_hook(source: str, prefix: str) -> bool:
    """Whether C source (comments aside) names the hook ``<prefix>_draw``."""
    return re.search(rf"\b{re.escape(prefix)}_draw\s*\(", strip_comments(source)) is not None


def hook_source(prefix: str) -> str:
    """The hook's C text for code whose functions are named ``<prefix>_...``."""
    return HOOK.replace("{prefix}", prefix)


def batch_source(struct: str, prefix: str, action_arg: str, action_expr: str) -> str:
    """``envforge_step_draws``: the batch step of the C driver under the hook (a tape, or a
    generator per row seeded by the verifier); ``envforge_step_own``: the step of
    ``envforge.make``, each env drawing from its own generator kept between steps."""
    return BATCH.format(
        struct=struct, prefix=prefix, action_arg=action_arg, action_expr=action_expr
    )


def harness_parts(prefix: str, hooked: bool) -> dict[str, str]:
    """The bench harness's pieces for the hook (``bench/c_loop.py``): the hook's text, each
    env's generator (seeded by its index, nothing logged) and the step's extra argument."""
    if not hooked:
        return {"draw_hook": "", "draw_state": "", "draw_init": "", "draw_arg": ""}
    init = (
        "    draws = calloc((size_t)n, sizeof(envforge_draws));\n"
        "    if (!draws) return 3;\n"
        "    for (int64_t i = 0; i < n; i++) envforge_draws_seed(&draws[i], (uint64_t)i);"
    )
    return {
        "draw_hook": hook_source(prefix),
        "draw_state": "static envforge_draws* draws;",
        "draw_init": init,
        "draw_arg": ", &draws[i]",
    }


def bind(lib: ctypes.CDLL) -> None:
    """Argument types of the hook's entry points in a built library."""
    vp, i64, i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32
    lib.envforge_step_draws.argtypes = [i64, vp, vp, vp, vp, vp, vp, vp, i32, *[vp] * 7]
    lib.envforge_seed_own.argtypes = [i64, vp, vp]
    lib.envforge_step_own.argtypes = [i64, vp, vp, vp, vp, vp, vp]
    lib.envforge_draw_site_count.restype = i32
    lib.envforge_draw_site_file.argtypes = [i32]
    lib.envforge_draw_site_file.restype = ctypes.c_char_p
    lib.envforge_draw_site_line.argtypes = [i32]
    lib.envforge_draw_site_line.restype = i32


def sites(lib: Any) -> list[str]:
    """Every site the library has registered, as ``file:line`` (a log's ``site`` indexes it)."""
    out = []
    for i in range(int(lib.envforge_draw_site_count())):
        file = lib.envforge_draw_site_file(i) or b""
        out.append(f"{file.decode(errors='replace')}:{int(lib.envforge_draw_site_line(i))}")
    return out
