"""What every level receives: the spec, both drivers, options, and the Finding builders."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from envforge.backends.base import Driver, State, Transition, take_state
from envforge.errors import DriverFailure
from envforge.sandbox.base import Sandbox
from envforge.spec import EnvSpec, bounds
from envforge.spec.bounds import check, check_optional
from envforge.verify.compare import (
    Diff,
    compare_states,
    first_element_out,
    not_float32,
    values_close,
)
from envforge.verify.findings import Finding, to_jsonable
from envforge.verify.localize import locate
from envforge.verify.observe_lines import observe_lines
from envforge.verify.plain import explain_all
from envforge.verify.strategies import spec_function


@dataclass
class VerifyOptions:
    seed: int = 0
    """Seed of every random choice the verifier makes (seeds, actions, hypothesis)."""
    all_levels: bool = False
    scale: float = 1.0
    """Multiplies example/episode counts (CI can run a lighter verify, users a heavier one)."""
    isolate: bool = True
    timeout_s: float | None = None
    """Seconds one driver call may take, the port's import included; None: the spec's."""
    build_timeout_s: float | None = None
    """Seconds compiling a driver may take (a Rust port's build, JAX's own import, a whole
    reference); None: ``backends.isolated.BUILD_TIMEOUT_S``."""
    strict_float: bool | None = None
    both_directions: bool = False
    seed_sweep: int | None = None
    """Seeds swept at L1 reset in replicate mode (every seed in [0, N)); None: the spec's."""
    sandbox: str | None = None
    """Where the port's driver runs: "process", "docker", or None/"none" (a plain child process)."""
    fail_fast: bool = False
    """Stop at the first difference (the repair loop's choice); by default a level goes on and
    names every distinct cause it finds (``groups.py``)."""
    coverage: bool | None = None
    """Measure the reference's line (C: and branch) coverage at L1-L3 (``coverage/lines.py``).
    None: for C references only, where it costs ~2% of a verify's CPU; coverage.py made a
    gymnasium verify take ~13% more CPU (docs/COVERAGE.md), so there it is asked for."""

    def coverage_for(self, reference_kind: str) -> bool:
        return self.coverage if self.coverage is not None else reference_kind == "c"

    def __post_init__(self) -> None:
        # the same rules as the command line's and the manifest's (envforge/spec/bounds.py)
        check("seed", self.seed, bounds.SEED)
        check("scale", self.scale, bounds.SCALE)
        check_optional("timeout", self.timeout_s, bounds.SECONDS)
        check_optional("build_timeout", self.build_timeout_s, bounds.SECONDS)
        check_optional("seed_sweep", self.seed_sweep, bounds.SEED_SWEEP)


@dataclass
class VerifyContext:
    spec: EnvSpec
    ref: Driver
    port: Driver
    options: VerifyOptions = field(default_factory=VerifyOptions)
    port_files: list[Path] | None = None
    """The port's source files as the host listed them in the port folder (the runner's; the
    driver's own list is never opened for a sandboxed port). None: the driver's list, for a
    port driven in this process (tests)."""
    sandbox: Sandbox | None = None
    """The sandbox the user chose (the runner's), in which anything else a level runs of the
    port (L4's training) must run too; None only for ``--sandbox none``."""

    def rng(self, salt: int) -> np.random.Generator:
        return np.random.default_rng([self.options.seed, salt])

    def count(self, n: int, minimum: int = 1) -> int:
        return max(minimum, int(round(n * self.options.scale)))

    def port_sources(self) -> list[Path]:
        return self.port.source_files() if self.port_files is None else self.port_files

    def ref_sources(self) -> list[Path]:
        return [p.resolve() for p in self.ref.source_files()]

    def localize(self, keys: list[str], phase: str | None = "step") -> tuple[list, list]:
        """Both sides' lines for ``keys``, in the code ``phase`` (step or reset; None: either)
        runs."""
        return (
            locate(self.spec, keys, self.ref_sources(), phase=phase),
            locate(self.spec, keys, self.port_sources(), phase=phase),
        )

    def finding_from_diff(
        self,
        level: int,
        check: str,
        message: str,
        diff: Diff,
        i: int,
        ref: Transition,
        port: Transition,
        state_before: State | None = None,
        only: list[str] | None = None,
        **extra: Any,
    ) -> Finding:
        """The Finding for env ``i`` of a compared batch, localized to the diverging keys
        (``only``: to those of them, a group's own)."""
        keys = only or diff.keys_at(i)
        expected: dict[str, Any] = {}
        actual: dict[str, Any] = {}
        for k in keys:
            expected[k] = _value(ref, k, i)
            actual[k] = _value(port, k, i)
        plain = explain_all(expected, actual)
        if plain:
            extra.setdefault("extra", {})["explanations"] = plain
        error: dict[str, float] = {}
        for k in keys:
            error[k] = float(diff.abs_err[k][i])
            if k in diff.ulp:
                error[f"{k}.ulp"] = float(diff.ulp[k][i])
        phase = "reset" if check.startswith("reset") else "step"
        ref_lines, port_lines = self.localize(
            _localization_keys(keys, self.spec.field_names), phase
        )
        if keys == ["obs"]:  # equal states, different observations: the observe function
            tolerance = self.spec.tolerance(None)
            differing = _differing_elements(
                _value(ref, "obs", i), _value(port, "obs", i), *tolerance
            )
            extra.setdefault("extra", {})["obs_elements"] = differing
            ref_lines = observe_lines(self.ref_sources(), differing[:4]) or ref_lines
            port_lines = observe_lines(self.port_sources(), differing[:4]) or port_lines
        elements = [
            e for k in keys if (e := _first_element(self.spec, ref, port, k, i)) is not None
        ]
        if elements:
            extra.setdefault("extra", {})["elements"] = elements
        agents = differing_agents(self.spec, ref, port, keys, i)
        if agents:
            extra.setdefault("extra", {})["agents"] = agents
        named = ", ".join(keys) + (f" (first at {', '.join(elements)})" if elements else "")
        for k in ("reward", "obs"):
            why = (
                not_float32(expected[k])
                if k in keys and self.spec.compare.mode == "exact"
                else None
            )
            if why is not None:  # a float64 reference value a float32 port rounds
                named += f"; {k}: {why}"
        if state_before is not None:
            explained = _explain(self.spec, _single(state_before, i), extra.get("actions"), keys)
            if explained:  # the spec's own words on where (the opcode handler): in the message
                extra.setdefault("extra", {})["explain"] = explained
                named += "; " + "; ".join(explained.splitlines()[:-1] or explained.splitlines())
        said = self.explain(state_before, i, extra.get("actions"))
        if said is not None:
            extra.setdefault("extra", {})["reference_explains"] = said
        return Finding(
            level=level,
            check=check,
            message=message.format(fields=named)
            + (f"; the reference says: {said}" if said else ""),
            fields=keys,
            state_before=None if state_before is None else to_jsonable(_single(state_before, i)),
            expected=to_jsonable(expected),
            actual=to_jsonable(actual),
            error=error,
            reference_lines=ref_lines,
            port_lines=port_lines,
            **extra,
        )

    def explain(self, state_before: State | None, i: int, actions: Any) -> str | None:
        """The reference's own words for env ``i``'s diverging step (``Driver.explain``), when
        it has any: the last action of ``actions`` taken from ``state_before``."""
        if state_before is None or not actions:
            return None
        try:
            texts = self.ref.explain(
                take_state(state_before, slice(i, i + 1)),
                np.asarray([actions[-1]], dtype=self.spec.action.dtype),
            )
        except DriverFailure:
            return None
        return texts[0] if texts else None


def _explain(spec: EnvSpec, state: dict[str, Any], actions: Any, keys: list[str]) -> str:
    """The spec's ``[verify] explain`` text for a step finding (empty without one)."""
    function = spec_function(spec, "explain")
    if function is None or not actions:
        return ""
    try:
        return str(function(state, actions[-1], keys))
    except Exception as e:  # an explanation must never hide the finding itself
        return f"([verify] explain failed: {type(e).__name__}: {e})"


def _single(state: State, i: int) -> dict[str, Any]:
    return {k: v[0] for k, v in take_state(state, slice(i, i + 1)).items()}


def _value(tr: Transition, key: str, i: int) -> Any:
    if key in tr.state:
        return tr.state[key][i]
    return getattr(tr, key)[i]


def _first_element(
    spec: EnvSpec, ref: Transition, port: Transition, key: str, i: int
) -> str | None:
    """``hand[3]``, ``qvel[3] (bthigh)``: the first element of an array-valued field of env
    ``i`` outside the spec's tolerance (in tolerance mode every element may differ a little),
    with its label when the spec names the elements."""
    a, b = np.asarray(_value(ref, key, i)), np.asarray(_value(port, key, i))
    if a.ndim == 0 or a.shape != b.shape:
        return None
    if key in spec.field_names:
        f = spec.field(key)
        atol, rtol = spec.tolerance(key)
        flat = first_element_out(f, a, b, atol, rtol)
    else:
        atol, rtol = spec.tolerance(None)
        differs = np.flatnonzero(~values_close(a, b, atol, rtol).reshape(-1))
        if not len(differs):
            return None
        flat = int(differs[0])
    index = tuple(int(j) for j in np.unravel_index(flat, a.shape))
    return spec.element_name(key, index)


def differing_agents(
    spec: EnvSpec, ref: Transition, port: Transition, keys: list[str], i: int
) -> list[str]:
    """The agents whose part of env ``i``'s observation or seat fields differ, in seat order."""
    if spec.agents is None:
        return []
    bad = np.zeros(len(spec.agents.names), dtype=bool)
    for key in keys:
        if key != "obs" and key not in spec.seat_fields:
            continue
        a, b = np.asarray(_value(ref, key, i)), np.asarray(_value(port, key, i))
        if a.shape != b.shape:
            return list(spec.agents.names)
        atol, rtol = spec.tolerance(key if key in spec.field_names else None)
        differs = ~values_close(a, b, atol, rtol)
        if key == "obs":
            bad |= spec.observation_agents(differs)
        else:
            bad |= differs.reshape(len(bad), -1).any(axis=1)
    return [name for name, b in zip(spec.agents.names, bad, strict=True) if b]


def _differing_elements(a: Any, b: Any, atol: Any, rtol: Any) -> list[int]:
    """Flat indices of the elements of two observations that differ beyond the tolerance."""
    x, y = np.asarray(a).reshape(-1), np.asarray(b).reshape(-1)
    if x.shape != y.shape:
        return []
    return [int(j) for j in np.flatnonzero(~values_close(x, y, atol, rtol))]


def _localization_keys(keys: list[str], fields: list[str]) -> list[str]:
    """State fields when any diverged: an observation or reward mismatch follows from them."""
    state_keys = [k for k in keys if k in fields]
    return state_keys or keys


def reset_mismatch(
    ctx: VerifyContext,
    level: int,
    seeds: np.ndarray,
    ref: State,
    port: State,
    prefix: str = "",
    suffix: str = "",
) -> Finding | None:
    """The first seed whose reset states differ beyond the spec's comparison, as a finding."""
    diff = compare_states(ctx.spec, ref, port)
    i = diff.first()
    if i is None:
        return None
    keys = diff.keys_at(i)
    ref_lines, port_lines = ctx.localize(keys, "reset")
    return Finding(
        level=level,
        check="reset.mismatch",
        message=f"{prefix}reset(seed={int(seeds[i])}) differs in {', '.join(keys)}{suffix}",
        fields=keys,
        seed=int(seeds[i]),
        step=0,
        expected=to_jsonable({k: ref[k][i] for k in keys}),
        actual=to_jsonable({k: port[k][i] for k in keys}),
        error={k: float(diff.abs_err[k][i]) for k in keys},
        reference_lines=ref_lines,
        port_lines=port_lines,
    )
