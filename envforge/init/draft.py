"""Draft a spec from a reference: probe it, pick its canonical state, and check that state.

1. ``probe``: random rollouts find the attributes that change on steps and resets.
2. ``fields``: each numeric one becomes canonical field(s) with a dtype and an observed range;
   the TimeLimit counter becomes ``time``.
3. The self-check runs on the draft. While it passes, each candidate attribute is tried
   without: one the check passes without (``last_u``, ``taxi_orientation``: read only by
   ``render``) is left out, so a port does not have to carry it.
4. RNG and comparison modes are proposed from what was seen (float state -> tolerance, with
   a tolerance measured by stepping from states perturbed by a float32 rounding), and the
   termination predicate read from the source is kept only if it reproduces every flag.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from envforge.backends.attrs import SEED
from envforge.backends.gymnasium import OBSERVATION_METHODS
from envforge.init.fields import FieldDraft, draft_fields
from envforge.init.probe import Probe, env_factory, probe, rebuilt_on_reset, state_attributes
from envforge.init.ranges import check_ranges
from envforge.init.render import events_seen
from envforge.init.selfcheck import SelfCheckConfig, SelfCheckResult, reference_driver, self_check
from envforge.init.source import termination_guess
from envforge.init.spaces import action_table, observation_table
from envforge.init.tolerance import propose_reload_tolerance, propose_tolerance
from envforge.spec import EnvSpec


@dataclass
class Draft:
    """Everything a drafted spec says, with the reasons that become its comments."""

    name: str
    reference: str
    probe: Probe | None
    """What the probe of a gymnasium/Python reference saw (None for a C reference)."""
    fields: list[FieldDraft]
    observation: dict[str, Any]
    observation_note: str
    action: dict[str, Any]
    probed: str
    """One line: how the reference was probed."""
    episode_cap: int = 1000
    episode_cap_note: str = ""
    action_note: str = ""
    events: list[dict[str, str]] = field(default_factory=list)
    policies: list[dict[str, str]] = field(default_factory=list)
    state_note: str = "the attributes the probe saw change"
    c: dict[str, Any] = field(default_factory=dict)
    c_note: str = ""
    left_out: list[tuple[str, str]] = field(default_factory=list)
    termination: str | None = None
    termination_note: str = ""
    compare: dict[str, Any] = field(default_factory=dict)
    compare_note: str = ""
    rng: dict[str, Any] = field(default_factory=lambda: {"mode": "sync"})
    options: dict[str, Any] = field(default_factory=dict)
    rng_note: str = ""
    scales: dict[str, float] = field(default_factory=dict)
    """The largest magnitude the observation and the reward took while tolerances were measured."""
    check: SelfCheckResult | None = None
    root: Any = None
    agents: dict[str, Any] = field(default_factory=dict)
    """Several agents: the ``[agents]`` table (``init/seats_draft.py``)."""
    agents_note: str = ""

    def spec(self, fields: list[FieldDraft] | None = None) -> EnvSpec:
        from envforge.init.render import spec_table

        table = spec_table(self, self.fields if fields is None else fields)
        table["root"] = self.root
        return EnvSpec.model_validate(table)


Progress = Callable[[str], None]


def draft_spec(
    reference: str,
    name: str,
    root: Any,
    config: SelfCheckConfig | None = None,
    progress: Progress | None = None,
    options: dict[str, Any] | None = None,
) -> Draft:
    """A drafted spec for ``reference`` (written relative to ``root``, made with ``options``)
    and its self-check."""
    say = progress or (lambda _msg: None)
    say("probing the reference")
    make = env_factory(reference, root, options)
    seen = probe(reference, make)
    candidates, left_out = state_attributes(seen)
    observation, observation_note, parts_left_out = observation_table(seen.observation_space)
    left_out = [
        *(("obs." + n, why + ": left out of the observation") for n, why in parts_left_out),
        *left_out,
    ]
    obs_attr = _observation_attr(seen, candidates)
    if obs_attr is not None:
        observation["attr"] = obs_attr
        observation_note += f"; it is the attribute {obs_attr} (the env has no _get_obs)"
    cap, cap_note = episode_cap(seen)
    draft = Draft(
        name=name,
        reference=reference,
        probe=seen,
        fields=draft_fields(seen, candidates, rebuilt_on_reset(seen)),
        observation=observation,
        observation_note=observation_note,
        action=action_table(seen.action_space),
        probed=f"Probed with {seen.episodes} random episodes ({seen.steps} steps).",
        episode_cap=cap,
        episode_cap_note=cap_note,
        events=events_seen(seen.terminated_seen, seen.truncated_seen),
        left_out=left_out,
        root=root,
        options=dict(options or {}),
    )
    _propose_modes(draft)
    say("stepping the reference from the ends of the drafted ranges")
    check_ranges(draft)
    propose_tolerance(draft)
    say("stepping the reference through the draft")
    propose_reload_tolerance(draft)
    say("self-check of the full draft")
    draft.check = self_check(draft.spec(), config)
    if draft.check.passed:
        _leave_out_unneeded(draft, config, say)
        _propose_termination(draft, make)
        say("self-check of the final draft")
        draft.check = self_check(draft.spec(), config)
    return draft


def episode_cap(seen: Probe) -> tuple[int, str]:
    """The episode cap and its comment: the TimeLimit's, else the step the env truncated its
    own episodes at (MiniGrid's ``max_steps``), else a guess."""
    if seen.max_episode_steps is not None:
        return seen.max_episode_steps, "the TimeLimit's max_episode_steps"
    if len(seen.truncated_at) == 1:
        (length,) = seen.truncated_at
        named = [name for name, s in seen.attrs.items() if _constant(s) == length]
        which = f" (its {named[0]})" if named else ""
        return length, (
            f"the env truncates its own episodes at step {length}{which}: every one of the "
            f"{seen.truncated_seen} truncations the probe saw came there"
        )
    if seen.truncated_at:
        return max(seen.truncated_at), (
            f"GUESS: the env truncated episodes itself at several lengths "
            f"({', '.join(map(str, sorted(seen.truncated_at)))}); the longest"
        )
    return 1000, "GUESS: no TimeLimit (the env never truncates); L3 cuts episodes here"


def _constant(s: Any) -> float | None:
    """The one number an attribute held throughout the probe (None if it moved or is none)."""
    if not s.numeric or s.changes or s.low is None or s.high is None or s.low.size != 1:
        return None
    low, high = float(s.low.reshape(-1)[0]), float(s.high.reshape(-1)[0])
    return low if low == high else None


def _observation_attr(seen: Probe, candidates: list[Any]) -> str | None:
    """A Discrete observation of an env without an observation method: the attribute it is."""
    if not hasattr(seen.observation_space, "n"):
        return None
    if any(callable(getattr(seen.env_class, m, None)) for m in OBSERVATION_METHODS):
        return None
    return next((c.name for c in candidates if c.equals_obs), None)


def _propose_modes(draft: Draft) -> None:
    draft.rng_note = (
        "gymnasium draws from numpy's PCG64 (np_random), which a port cannot reproduce bit for "
        "bit: resets are compared as distributions, dynamics from injected states"
    )
    assert draft.probe is not None
    draws = draft.probe.max_draws_per_step
    if draws:
        draft.rng = {"mode": "sync", "step": "tape", "tape_size": max(16, 2 * draws)}
        draft.rng_note += (
            f". GUESS: step draws random numbers too (up to {draws} per step seen), so its "
            'draws are recorded and replayed to the port (step = "tape"; tape_size twice '
            'the most seen, at least 16); step = "distribution" compares samples instead (docs/SPEC.md)'
        )
    inexact = [f for f in draft.fields if not f.exact]
    whole = [f.name for f in draft.fields if f.dtype.startswith("float") and f.integral]
    draft.compare = {"mode": "tolerance" if inexact else "exact"}
    draft.compare_note = (
        "float state: a port computing in float32 differs from float64 arithmetic"
        if inexact
        else "integer state: transitions must agree exactly"
    )
    if whole:
        draft.compare_note += (
            f"; {', '.join(whole)} held only whole numbers (floats on the reference): compared "
            "exactly (atol = 0), a tolerance would let a port change them by a whole unit"
        )


def _leave_out_unneeded(draft: Draft, config: SelfCheckConfig | None, say: Progress) -> None:
    # the seed first: a field that carries state beats a seed that rebuilds it at reset
    # (Blackjack's dealer hand, dealt at reset, passes without its field once the seed is kept)
    tried = [f.source_attr for f in draft.fields if f.attr == SEED]
    tried += [f.source_attr for f in draft.fields if f.attr[0] != "@"]
    for attr in dict.fromkeys(tried):
        rest = [f for f in draft.fields if f.source_attr != attr]
        if not rest:
            continue
        say(f"self-check without {attr}")
        if self_check(draft.spec(rest), config).passed:
            draft.fields = rest
            draft.left_out.append(
                (attr, "changes, but the self-check passes without it (no step reads it)")
            )


def _propose_termination(draft: Draft, make: Callable[[], Any]) -> None:
    local_fields = {}
    attr_fields: dict[tuple[str, int | None], str] = {}
    for f in draft.fields:
        attr_fields[(f.source_attr, f.index)] = f.name
        if any(note.startswith("name from the source") for note in f.notes):
            local_fields[f.name] = f.name
    assert draft.probe is not None
    env = make()
    guess = termination_guess(
        draft.probe.env_class, getattr(env, "unwrapped", env), local_fields, attr_fields
    )
    if callable(getattr(env, "close", None)):
        env.close()
    if guess is None:
        draft.termination_note = (
            "not drafted: step's `terminated` could not be read as a predicate over the state"
        )
        return
    spec = draft.spec()
    checked, wrong = _check_termination(spec, guess)
    if wrong:
        draft.termination_note = (
            f"read from step's source but wrong on {wrong} of {checked} transitions, so left "
            f"out: {guess}"
        )
        return
    draft.termination = guess
    draft.termination_note = (
        f"read from step's source (`terminated = ...`); reproduced the flag on all {checked} "
        "transitions of random episodes"
    )


def _check_termination(spec: EnvSpec, guess: str, n: int = 32) -> tuple[int, int]:
    from envforge.verify.policies import StickyPolicy

    try:
        predicate = spec.expression(guess)
    except Exception:
        return 0, 1
    driver = reference_driver(spec)
    policy = StickyPolicy(spec, np.random.default_rng(7))
    checked = wrong = 0
    try:
        state = driver.reset(np.arange(n, dtype=np.uint32))
        for t in range(spec.episode_cap):
            acts = policy.act(np.zeros((len(next(iter(state.values()))), 1)), np.array([t]))
            tr = driver.step(state, acts)
            value = np.broadcast_to(
                np.asarray(predicate(**tr.expression_inputs(state, acts)), bool),
                tr.terminated.shape,
            )
            checked += len(value)
            wrong += int(np.count_nonzero(value != tr.terminated))
            live = ~(tr.terminated | tr.truncated)
            if not live.any():
                break
            state = {k: v[live] for k, v in tr.state.items()}
            policy._last = None if policy._last is None else policy._last[live]
    finally:
        driver.close()
    return checked, wrong
