"""Rust backend: a crate (PyO3 + numpy, built with maturin) that steps the whole batch in one call.

Port contract (``envforge.kit.contract.RustEnvBatch``, checked on import): the extension module
(named by the crate's ``[lib] name``) exposes a class ``EnvBatch(num_envs, strict_float=False)``
with

    reset(seeds: uint32[n])                        # resizes the batch to n, resets every env
    step(actions, obs, reward, terminated, truncated)
        # actions int32[n] (discrete) or float32[n, *shape]; writes obs [n, *obs_shape]
        # (the spec's dtype), reward float32[n], terminated bool[n], truncated bool[n]
    observe(obs)                                   # writes observations of the current envs
    get_state() -> dict[str, ndarray[n, ...]]      # canonical state, the spec's names/dtypes
    set_state(fields: dict[str, ndarray[n, ...]])  # resizes the batch to n and loads it
    reset_where(done: bool[n], seeds: uint32[n])   # optional (bench auto-reset): reset where done
    step_draws(actions, obs, reward, terminated, truncated, log: dict) -> list[str]
        # for specs with [rng] step: the step with its draws from the tape in ``log``, logged
        # there (``envforge/rng/draws.rs``, which the crate copies as src/draws.rs)

The driver loads the given state, steps once and reads the state back (pure from the caller's
view). ``strict_float`` asks the port to set flush-to-zero/denormals-are-zero while it computes,
as the strict C reference does; rustc never contracts multiply-adds, so that is all strict needs.
See docs/RUST.md.
"""

from __future__ import annotations

import ctypes
import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from envforge.backends.base import Driver, State, Transition, batch_size, canonicalize
from envforge.errors import ContractViolation
from envforge.kit.contract import RustEnvBatch, lacks, members
from envforge.native.rust_build import build_extension, crate_files, module_name
from envforge.rng.draws import DrawLog, row_seeds
from envforge.spec import EnvSpec

BATCH_CLASS = "EnvBatch"
METHODS = members(RustEnvBatch)
"""What ``EnvBatch`` must have (``envforge.kit.contract.RustEnvBatch``), checked on import."""


def load_extension(library: Path, name: str) -> ModuleType:
    """Import a built extension under a name unique to this build (``PyInit_<name>`` is kept)."""
    unique = f"envforge_rust_{library.stem.replace('-', '_')}.{name}"
    if unique in sys.modules:
        return sys.modules[unique]
    loader = importlib.machinery.ExtensionFileLoader(unique, str(library))
    spec = importlib.util.spec_from_file_location(unique, library, loader=loader)
    if spec is None:
        raise ContractViolation("port", "import", f"cannot import {library}")
    try:
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    except ImportError as e:
        raise ContractViolation("port", "import", f"{library.name}: {e}") from None
    sys.modules[unique] = module
    return module


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
"""glibc's ``mallopt`` parameters (malloc.h)."""


def keep_freed_memory() -> None:
    """Let glibc keep freed memory for reuse instead of handing it back to the kernel.

    ``get_state`` returns new columns (numpy owns and frees them), so every call of the reset
    sweep allocated and freed a few MiB; glibc returned them each time and the kernel zeroed
    fresh pages for the next call: half the time of pong's Rust sweep in ``clear_page`` (perf),
    29 M seeds/s against 57 M/s with this. Process-wide and harmless elsewhere (memory is kept
    up to its peak); a no-op off glibc."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(M_TRIM_THRESHOLD, 1 << 30)
        libc.mallopt(M_MMAP_THRESHOLD, 1 << 25)  # glibc's largest: 32 MiB
    except (OSError, AttributeError):
        pass


class RustDriver(Driver):
    def __init__(self, spec: EnvSpec, crate: Path, strict_float: bool = False) -> None:
        super().__init__(spec)
        keep_freed_memory()
        self.crate = crate.resolve()
        self.library = build_extension(self.crate)
        self.module = load_extension(self.library, module_name(self.crate))
        batch_class = getattr(self.module, BATCH_CLASS, None)
        if batch_class is None:
            raise ContractViolation(
                "port", "import", f"{self.library.name} defines no class {BATCH_CLASS}"
            )
        lacking = lacks(BATCH_CLASS, batch_class, RustEnvBatch)
        if lacking is not None:
            raise ContractViolation("port", "import", lacking)
        try:
            self._batch: Any = batch_class(0, strict_float=strict_float)
        except TypeError as e:
            raise ContractViolation(
                "port", "import", f"{BATCH_CLASS}(num_envs, strict_float=...) failed: {e}"
            ) from None
        self.strict_float = strict_float

    # ---- numpy <-> extension -----------------------------------------------------------------
    def _load(self, state: State) -> int:
        fields = {
            f.name: np.ascontiguousarray(state[f.name], dtype=f.np_dtype) for f in self.spec.state
        }
        self._batch.set_state(fields)
        return batch_size(state)

    def _state(self, call: str) -> State:
        return canonicalize(self.spec, dict(self._batch.get_state()), "port", call)

    def _obs_buffer(self, n: int) -> np.ndarray:
        return np.zeros((n, *self.spec.observation.shape), dtype=self.spec.observation.dtype)

    def _actions(self, actions: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(actions, dtype=self.spec.action.dtype)

    # ---- Driver API --------------------------------------------------------------------------
    def reset(self, seeds: np.ndarray) -> State:
        self._batch.reset(np.ascontiguousarray(seeds, dtype=np.uint32))
        return self._state("reset")

    def reset_rows(self, state: State, done: np.ndarray, seeds: np.ndarray) -> State | None:
        if not callable(getattr(self._batch, "reset_where", None)):
            return None
        self._load(state)
        self._batch.reset_where(
            np.ascontiguousarray(done, dtype=bool), np.ascontiguousarray(seeds, dtype=np.uint32)
        )
        return self._state("reset_where")

    def step(self, state: State, actions: np.ndarray) -> Transition:
        if self.spec.rng.step != "none" and callable(getattr(self._batch, "step_draws", None)):
            # pure, as the verifier needs: draws seeded by the row's state and action, never by
            # the generator the batch carries from step to step (which bench and make use)
            return self.step_draws(state, actions, row_seeds(state, actions), None)[0]
        return self._batch_step(state, actions)

    def step_own(self, state: State, actions: np.ndarray) -> Transition | None:
        if self.spec.rng.step == "none" or not callable(getattr(self._batch, "step_draws", None)):
            return None  # its own step is ``step``
        return self._batch_step(state, actions)

    def _batch_step(self, state: State, actions: np.ndarray) -> Transition:
        """The batch's own ``step``: in-step draws from each env's generator."""
        n = self._load(state)
        obs = self._obs_buffer(n)
        reward = np.zeros(n, np.float32)
        terminated = np.zeros(n, bool)
        truncated = np.zeros(n, bool)
        self._batch.step(self._actions(actions), obs, reward, terminated, truncated)
        return Transition(
            self._state("step"), obs, reward.astype(np.float64), terminated, truncated
        )

    def step_draws(
        self, state: State, actions: np.ndarray, seeds: np.ndarray, tape: DrawLog | None
    ) -> tuple[Transition, DrawLog]:
        """The port's ``step_draws``: its draws from ``tape`` (the reference's values) or, without
        one, from a generator seeded by each row's seed; what it asked for comes back as a log."""
        if not callable(getattr(self._batch, "step_draws", None)):
            raise ContractViolation(
                "port",
                "step_draws",
                f"{BATCH_CLASS} lacks step_draws(actions, obs, reward, terminated, truncated, "
                f"log), which [rng] step = {self.spec.rng.step!r} needs (docs/RUST.md)",
            )
        n = self._load(state)
        size = self.spec.rng.tape_size
        values = np.zeros((n, size))
        if tape is not None:
            k = min(size, tape.size)
            values[:, :k] = tape.value[:n, :k]
        drawn = DrawLog.empty(n, size)
        log = {
            "tape": values,
            "taped": tape is not None,
            "seeds": np.ascontiguousarray(seeds, dtype=np.uint64),
            "kind": drawn.kind,
            "a": drawn.a,
            "b": drawn.b,
            "value": drawn.value,
            "site": drawn.site,
            "count": drawn.count,
        }
        obs = self._obs_buffer(n)
        reward = np.zeros(n, np.float32)
        terminated = np.zeros(n, bool)
        truncated = np.zeros(n, bool)
        sites = self._batch.step_draws(
            self._actions(actions), obs, reward, terminated, truncated, log
        )
        drawn.sites = [self._site_path(str(site)) for site in sites]
        transition = Transition(
            self._state("step_draws"), obs, reward.astype(np.float64), terminated, truncated
        )
        return transition, drawn

    def run_steps(self, batch: int, steps: int, seed: int) -> float:
        """``Driver.run_steps`` on a batch of the port's own (``EnvBatch(batch)``): stepped in
        place with uniform random actions, ended envs reset where the port has
        ``reset_where``, no state copied out between steps (the default would load and read
        every state each step, timing the copies rather than the port)."""
        rng = np.random.default_rng(seed)
        envs = getattr(self.module, BATCH_CLASS)(batch, strict_float=self.strict_float)
        envs.reset(np.arange(batch, dtype=np.uint32))
        obs = self._obs_buffer(batch)
        reward = np.zeros(batch, np.float32)
        terminated, truncated = np.zeros(batch, bool), np.zeros(batch, bool)
        auto_reset = callable(getattr(envs, "reset_where", None))
        total = 0.0
        for _ in range(steps):
            envs.step(
                self._actions(self.spec.action.sample(rng, batch)),
                obs,
                reward,
                terminated,
                truncated,
            )
            total += float(np.sum(reward))
            if auto_reset:
                fresh = rng.integers(0, 2**32, batch, dtype=np.uint32)
                envs.reset_where(np.logical_or(terminated, truncated), fresh)
        return total

    def _site_path(self, site: str) -> str:
        """``src/x.rs:12`` (rustc's path, relative to the crate) as a path a finding can read."""
        path, _, line = site.rpartition(":")
        if path and not Path(path).is_absolute() and (self.crate / path).is_file():
            return f"{self.crate / path}:{line}"
        return site

    def observe(self, state: State) -> np.ndarray:
        obs = self._obs_buffer(self._load(state))
        self._batch.observe(obs)
        return obs

    def source_files(self) -> list[Path]:
        sources = [p for p in crate_files(self.crate) if p.suffix == ".rs"]
        # the physics first: localization lists the files in this order
        return sorted(sources, key=lambda p: p.name in ("lib.rs", "float_mode.rs", "draws.rs"))

    def describe(self) -> str:
        mode = "strict float" if self.strict_float else "fast float"
        return f"Rust port {self.crate.name} ({self.library.name}, {mode})"
