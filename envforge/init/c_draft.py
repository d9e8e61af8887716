"""Draft a spec for a C reference from the struct the C backend parses.

The reference's ``<prefix>_reset(S*, uint32_t)`` names the prefix and the state struct; every
member of the struct becomes a canonical field (a C reference keeps its whole state there, by
the backend's contract). What the source does not say is measured by running it: the
observation's length (``<prefix>_observe`` writes into a buffer of NaNs), the number of discrete
actions (the largest action whose step differs from every smaller one's, from many states),
ranges over random episodes, and the step at which episodes are truncated.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from envforge.backends.c import CDriver
from envforge.errors import BadInput
from envforge.init.draft import Draft
from envforge.init.fields import FieldDraft, range_note
from envforge.init.render import events_seen
from envforge.native.c_struct import parse_struct
from envforge.spec import EnvSpec

MAX_OBS = 1024
MAX_ACTIONS = 64
DTYPES = {"f4": "float32", "f8": "float64", "i4": "int32", "u4": "uint32", "i8": "int64"}
DTYPES |= {"u8": "uint64", "u1": "uint8", "i1": "int32", "i2": "int32", "u2": "int32"}


def c_entry_points(source: str) -> tuple[str, str, bool]:
    """``(prefix, struct, discrete)`` from the reset and step declarations."""
    reset = re.search(r"\b(\w+)_reset\s*\(\s*(?:struct\s+)?(\w+)\s*\*", source)
    if reset is None:
        raise BadInput("no <prefix>_reset(Struct* env, uint32_t seed) in the C reference")
    prefix, struct = reset.group(1), reset.group(2)
    step = re.search(rf"\b{prefix}_step\s*\(\s*[^,]+,\s*([^,]+?)\s*\w+\s*,", source)
    if step is None:
        raise BadInput(f"no {prefix}_step(...) in the C reference")
    return prefix, struct, not ("float" in step.group(1) and "*" in step.group(1))


def _spec(name: str, reference: str, root: Path, table: dict[str, Any]) -> EnvSpec:
    return EnvSpec.model_validate(
        {"name": name, "reference": reference, "root": root, "rng": {"mode": "replicate"}} | table
    )


def _observation_length(driver: CDriver) -> int:
    structs = driver.reset_structs(np.arange(4, dtype=np.uint32))
    buffer = np.full(MAX_OBS, np.nan, np.float32)
    driver.lib.envforge_observe(1, structs.ctypes.data, buffer.ctypes.data)
    written = np.flatnonzero(~np.isnan(buffer))
    if not len(written):
        raise BadInput(f"{driver.describe()}: <prefix>_observe wrote no number")
    return int(written[-1]) + 1


def _action_count(driver: CDriver, states: np.ndarray) -> int:
    """1 + the largest action whose outcome differs from every smaller action's somewhere."""
    outcomes = []
    for a in range(MAX_ACTIONS):
        tr = driver.step_structs(states.copy(), np.full(len(states), a, np.int32))
        outcomes.append(np.concatenate([tr.obs.reshape(len(states), -1), tr.reward[:, None]], 1))
    n = 1
    for a in range(1, MAX_ACTIONS):
        if all(np.any(outcomes[a] != outcomes[b]) for b in range(a)):
            n = a + 1
    return n


def draft_c_spec(reference: str, name: str, root: Path, episodes: int = 64) -> Draft:
    """A drafted spec for the C reference at ``root / reference`` (self-check not yet run)."""
    path = root / reference
    source = path.read_text()
    prefix, struct, discrete = c_entry_points(source)
    members = parse_struct(source, struct)
    fields = [{"name": m, "dtype": DTYPES[code], "shape": list(dims)} for m, code, dims in members]
    action: dict[str, Any] = (
        {"type": "discrete", "n": MAX_ACTIONS}
        if discrete
        else {"type": "continuous", "shape": [1], "low": -1.0, "high": 1.0}
    )
    table = {
        "episode_cap": 1_000_000,
        "observation": {"shape": [MAX_OBS], "low": -np.inf, "high": np.inf},
        "action": action,
        "state": fields,
        "c": {"struct": struct, "prefix": prefix},
    }
    driver = CDriver(_spec(name, reference, root, table), path)
    try:
        obs_len = _observation_length(driver)
        starts = driver.reset_structs(np.arange(episodes, dtype=np.uint32))
        if discrete:
            action["n"] = _action_count(driver, starts)
        seen = _rollouts(driver, starts, action)
    finally:
        driver.close()
    low, high, steps, term, trunc, cap = seen
    drafted = []
    for member, code, dims in members:
        dtype = DTYPES[code]
        lo, hi = float(low[member]), float(high[member])
        if dtype == "uint32" and re.search(r"rng|seed|rand", member, re.I):
            lo, hi, why = (1 if lo > 0 else 0), 4294967295, "an RNG's state: any value it holds"
        else:
            lo, hi, why = range_note(lo, hi, dtype, f"{episodes} random episodes")
        # no attr: a C field is the struct member of its name
        drafted.append(
            FieldDraft(
                member,
                dtype,
                "",
                member,
                shape=tuple(dims),
                low=lo,
                high=hi,
                notes=[f"struct member {member}", f"range: {why}"],
            )
        )
    floats = any(str(f["dtype"]).startswith("float") for f in fields)
    return Draft(
        name=name,
        reference=reference,
        probe=None,
        fields=drafted,
        observation={"shape": [obs_len], "dtype": "float32", "low": -np.inf, "high": np.inf},
        observation_note=(
            f"GUESS: {prefix}_observe writes {obs_len} floats; set low/high to their bounds"
        ),
        action=action,
        action_note=(
            f"GUESS: actions 0..{action['n'] - 1} each step differently (measured); check "
            "the source"
            if discrete
            else "GUESS: a float action; set its shape and bounds"
        ),
        probed=f"Probed with {episodes} random episodes ({steps} steps).",
        episode_cap=cap or 10000,
        episode_cap_note=(
            f"episodes were truncated after {cap} steps (measured)"
            if cap
            else "GUESS: no episode was truncated in the probe"
        ),
        events=events_seen(term, trunc),
        state_note="every member of the struct",
        c={"struct": struct, "prefix": prefix},
        c_note=f"found from {prefix}_reset({struct}*, ...) in {Path(reference).name}",
        rng={"mode": "replicate"},
        rng_note=(
            "GUESS: a C reference keeps its generator in the struct (never libc rand()), so a "
            "port replicates it bit for bit"
        ),
        compare={"mode": "exact", "strict_float": True} if floats else {"mode": "exact"},
        compare_note=(
            "C built with -ffp-contract=off and XLA without FMA agree bit for bit"
            if floats
            else "integer state: transitions must agree exactly"
        ),
        termination_note="not drafted for C references",
        root=root,
    )


def _rollouts(
    driver: CDriver, structs: np.ndarray, action: dict[str, Any]
) -> tuple[dict, dict, int, int, int, int]:
    """Random episodes: per-member minima and maxima, steps, flags, the truncation step."""
    rng = np.random.default_rng(0)
    names = driver.dtype.names or ()
    low = {m: np.min(structs[m]) for m in names}
    high = {m: np.max(structs[m]) for m in names}
    steps = terminated = truncated = cap = 0
    live = structs.copy()
    for t in range(1, 20_001):
        if action["type"] == "discrete":
            acts = rng.integers(0, action["n"], len(live)).astype(np.int32)
        else:
            acts = rng.uniform(-1, 1, (len(live), 1)).astype(np.float32)
        tr = driver.step_structs(live, acts)
        steps += len(live)
        for m in names:
            low[m] = min(low[m], np.min(live[m]))
            high[m] = max(high[m], np.max(live[m]))
        terminated += int(tr.terminated.sum())
        truncated += int(tr.truncated.sum())
        if tr.truncated.any() and not cap:
            cap = t
        live = live[~(tr.terminated | tr.truncated)]
        if not len(live):
            break
    return low, high, steps, terminated, truncated, cap
