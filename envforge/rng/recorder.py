"""Record the draws a Python reference makes, without editing it.

For the length of one call, every generator the env object holds as an attribute (gymnasium's
``_np_random``, a ``random.Random``, a ``numpy.random.RandomState``) is replaced by a stand-in
with the same API. The stand-in takes its numbers from one fresh numpy generator seeded by the
verifier, and writes each draw (kind, parameters, value, the reference line that asked) to a
:class:`RowLog`. Afterwards the original generators are put back untouched.

A method the stand-in does not know raises :class:`UnsupportedDraw` naming it, so a draw is
never made unrecorded. Draws through module-level state (``np.random.choice(...)``,
``random.random()``, as rlcard's random agent makes) go through the same stand-ins: for the
length of the call the draw functions of the ``numpy.random`` and ``random`` modules are replaced
too, every other draw function of those modules by one that raises :class:`UnsupportedDraw`. A
reference that imported a draw function by name (``from random import random``) keeps its own
reference to it and is not seen; L0's determinism check catches it (the same step twice differs).
During a reset (:func:`module_draws`) the module functions draw, unrecorded, from the reset's
seed, so that a reference drawing through them still resets deterministically.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from envforge.rng.draws import KIND_CODE, DrawLog, weights_fingerprint
from envforge.rng.recorder_reach import GENERATOR_TYPES, generator_holders


class UnsupportedDraw(Exception):
    """The reference asked a generator for something the tape cannot record."""


@dataclass
class RowLog:
    """The draws of one env during one call, and the registry of source sites (shared)."""

    draws: list[tuple[int, float, float, float, int]] = field(default_factory=list)
    sites: dict[str, int] = field(default_factory=dict)

    def add(self, kind: str, a: float, b: float, value: float) -> None:
        self.draws.append((KIND_CODE[kind], float(a), float(b), float(value), self._site()))

    def _site(self) -> int:
        """The reference line that drew (and its caller, when that is a helper)."""
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename == __file__:
            frame = frame.f_back  # type: ignore[assignment]
        where = []
        for _ in range(2):
            if frame is None:
                break
            where.append(f"{frame.f_code.co_filename}:{frame.f_lineno}")
            frame = frame.f_back  # type: ignore[assignment]
        key = " <- ".join(where)
        return self.sites.setdefault(key, len(self.sites))


def logs_to_array(rows: list[RowLog], size: int, sites: dict[str, int]) -> DrawLog:
    """Stack per-env logs into one :class:`DrawLog` holding at most ``size`` draws per env."""
    log = DrawLog.empty(len(rows), size)
    for i, row in enumerate(rows):
        log.count[i] = len(row.draws)
        for j, (kind, a, b, value, site) in enumerate(row.draws[:size]):
            log.kind[i, j], log.a[i, j], log.b[i, j] = kind, a, b
            log.value[i, j], log.site[i, j] = value, site
    log.sites = [s for s, _ in sorted(sites.items(), key=lambda kv: kv[1])]
    return log


class _Source:
    """The numbers behind every stand-in of one env in one call, and their log."""

    def __init__(self, seed: int, log: RowLog) -> None:
        self.gen = np.random.default_rng(seed)
        self.log = log

    def many(self, size: Any, one: Any) -> Any:
        if size is None:
            return one()
        shape = (size,) if isinstance(size, int | np.integer) else tuple(size)
        return np.array([one() for _ in range(int(np.prod(shape)))]).reshape(shape)

    def random(self) -> float:
        v = float(self.gen.random())
        self.log.add("random", 0.0, 1.0, v)
        return v

    def uniform(self, low: float, high: float) -> float:
        v = float(self.gen.uniform(low, high))
        self.log.add("uniform", low, high, v)
        return v

    def integers(self, low: int, high: int) -> int:
        v = int(self.gen.integers(low, high))
        self.log.add("integers", low, high, v)
        return v

    def index(self, n: int, p: Any = None) -> int:
        v = int(self.gen.integers(0, n)) if p is None else int(self.gen.choice(n, p=p))
        self.log.add("choice", n, weights_fingerprint(p), v)
        return v

    def normal(self, loc: float, scale: float) -> float:
        v = float(self.gen.normal(loc, scale))
        self.log.add("normal", loc, scale, v)
        return v

    def shuffle(self, x: Any) -> None:
        """Fisher-Yates from the end: ``integers[0, i + 1)`` for i = n-1 .. 1, swap x[i], x[j]."""
        for i in range(len(x) - 1, 0, -1):
            j = self.integers(0, i + 1)
            x[i], x[j] = x[j], x[i]


def _pick(src: _Source, a: Any, size: Any, p: Any) -> Any:
    items = np.arange(a) if isinstance(a, int | np.integer) else a
    n = len(items)
    if size is None:
        return items[src.index(n, p)]
    return src.many(size, lambda: items[src.index(n, p)])


class _Stand:
    """Base of the stand-ins: an unknown method is an error, never an unrecorded draw."""

    _kind = "generator"

    def __init__(self, source: _Source) -> None:
        self._src = source

    def __getattr__(self, name: str) -> Any:
        raise UnsupportedDraw(
            f"the RNG tape cannot record {self._kind}.{name}; supported: random, uniform, "
            "integers, choice, normal, shuffle (and their aliases)"
        )


class GeneratorStand(_Stand):
    """Stands in for ``numpy.random.Generator``."""

    _kind = "numpy.random.Generator"

    def random(self, size: Any = None, dtype: Any = np.float64, out: Any = None) -> Any:
        return self._src.many(size, self._src.random)

    def uniform(self, low: float = 0.0, high: float = 1.0, size: Any = None) -> Any:
        return self._src.many(size, lambda: self._src.uniform(low, high))

    def integers(
        self, low: int, high: int | None = None, size: Any = None, dtype: Any = None,
        endpoint: bool = False,
    ) -> Any:  # fmt: skip
        low, high = (0, low) if high is None else (low, high)
        high = high + 1 if endpoint else high
        return self._src.many(size, lambda: self._src.integers(int(low), int(high)))

    def choice(self, a: Any, size: Any = None, replace: bool = True, p: Any = None) -> Any:
        if not replace and size is not None:
            raise UnsupportedDraw("the RNG tape cannot record choice(replace=False)")
        return _pick(self._src, a, size, p)

    def normal(self, loc: float = 0.0, scale: float = 1.0, size: Any = None) -> Any:
        return self._src.many(size, lambda: self._src.normal(loc, scale))

    def standard_normal(self, size: Any = None) -> Any:
        return self.normal(0.0, 1.0, size)

    def shuffle(self, x: Any) -> None:
        self._src.shuffle(x)


class RandomStateStand(GeneratorStand):
    """Stands in for ``numpy.random.RandomState`` (its names for the same draws)."""

    _kind = "numpy.random.RandomState"

    def random_sample(self, size: Any = None) -> Any:
        return self.random(size)

    def rand(self, *shape: int) -> Any:
        return self.random(shape or None)

    def randint(self, low: int, high: int | None = None, size: Any = None, dtype: Any = int) -> Any:
        return self.integers(low, high, size)

    def randn(self, *shape: int) -> Any:
        return self.normal(0.0, 1.0, shape or None)


class RandomStand(_Stand):
    """Stands in for ``random.Random``."""

    _kind = "random.Random"

    def random(self) -> float:
        return self._src.random()

    def uniform(self, a: float, b: float) -> float:
        return self._src.uniform(a, b)

    def randint(self, a: int, b: int) -> int:
        return self._src.integers(a, b + 1)

    def randrange(self, start: int, stop: int | None = None, step: int = 1) -> int:
        if step != 1:
            raise UnsupportedDraw("the RNG tape cannot record randrange with a step")
        start, stop = (0, start) if stop is None else (start, stop)
        return self._src.integers(start, stop)

    def choice(self, seq: Sequence[Any]) -> Any:
        return seq[self._src.index(len(seq))]

    def gauss(self, mu: float = 0.0, sigma: float = 1.0) -> float:
        return self._src.normal(mu, sigma)

    normalvariate = gauss

    def shuffle(self, x: Any) -> None:
        self._src.shuffle(x)


def _stand_for(value: Any, source: _Source) -> _Stand | None:
    if isinstance(value, np.random.Generator):
        return GeneratorStand(source)
    if isinstance(value, np.random.RandomState):
        return RandomStateStand(source)
    if isinstance(value, random.Random):
        return RandomStand(source)
    return None


def generator_attributes(obj: Any) -> list[str]:
    """Names of the attributes of ``obj`` itself that hold a generator the tape can stand in
    for (``recording`` also finds those of the objects it holds: ``recorder_reach``)."""
    return [k for k, v in vars(obj).items() if isinstance(v, GENERATOR_TYPES)]


# The draw functions of the two modules whose global generators references draw through.
_NUMPY_GLOBAL = np.random.mtrand._rand
_MODULES: tuple[tuple[Any, type[_Stand], Any], ...] = (
    (np.random, RandomStateStand, _NUMPY_GLOBAL),
    (random, RandomStand, random._inst),
)


# (re)seeding and state functions draw nothing: left alone
_STATE_FUNCTIONS = frozenset({"seed", "get_state", "set_state", "getstate", "setstate"})


def _module_functions(module: Any, instance: Any) -> list[str]:
    """The module's functions that are bound methods of its global generator."""
    return [
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and name not in _STATE_FUNCTIONS
        and getattr(value, "__self__", None) is instance
    ]


# (module, stand-in type, its draw functions the stand-in knows, those it does not): computed
# once, since every recorded call (each row of each reference step) patches them
_PATCHED = [
    (
        m,
        stand,
        [n for n in _module_functions(m, inst) if hasattr(stand, n)],
        [n for n in _module_functions(m, inst) if not hasattr(stand, n)],
    )
    for m, stand, inst in _MODULES
]


def _refuse(module: Any, name: str) -> Any:
    def draw(*args: Any, **kwargs: Any) -> Any:
        raise UnsupportedDraw(
            f"the RNG tape cannot record {module.__name__}.{name}; supported: random, uniform, "
            "integers, choice, normal, shuffle (and their aliases)"
        )

    return draw


_REFUSALS = {(m.__name__, n): _refuse(m, n) for m, _, _, unknown in _PATCHED for n in unknown}


@contextmanager
def _modules_drawing_from(source: _Source, refuse: bool = True) -> Iterator[None]:
    """Module draw functions the stand-ins know draw from ``source``; the others refuse (or,
    with ``refuse`` off, are left to the module's own generator)."""
    saved: list[tuple[Any, str, Any]] = []
    try:
        for module, stand_type, known, unknown in _PATCHED:
            stand = stand_type(source)
            for name in known:
                saved.append((module, name, getattr(module, name)))
                setattr(module, name, getattr(stand, name))
            for name in unknown if refuse else ():
                saved.append((module, name, getattr(module, name)))
                setattr(module, name, _REFUSALS[module.__name__, name])
        yield
    finally:
        for module, name, value in reversed(saved):
            setattr(module, name, value)


@contextmanager
def recording(obj: Any, seed: int, log: RowLog) -> Iterator[None]:
    """Within the block, ``obj``'s generators and the module-level draw functions draw from
    ``seed`` and every draw goes to ``log``."""
    source = _Source(seed, log)
    originals: list[tuple[Any, str, Any]] = []
    # the generators obj holds and those of the objects it holds (env.game.np_random): one
    # generator held in two places (a game and its dealer) gets two stand-ins of one source
    for holder, name in list(generator_holders(obj)):
        stand = _stand_for(getattr(holder, name), source)
        if stand is not None:
            originals.append((holder, name, getattr(holder, name)))
            setattr(holder, name, stand)
    try:
        with _modules_drawing_from(source):
            yield
    finally:
        for holder, name, value in reversed(originals):
            setattr(holder, name, value)


MODULE_RESET_SALT = 0x5EED


@contextmanager
def module_draws(seed: int) -> Iterator[None]:
    """Within the block, the module-level draw functions draw (unrecorded) from ``seed``; those
    the stand-ins do not know draw from the module's own generator (nothing is refused here:
    resets are compared in distribution, not replayed)."""
    with _modules_drawing_from(_Source(seed ^ MODULE_RESET_SALT, RowLog()), refuse=False):
        yield
