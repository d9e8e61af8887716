"""Agent-assisted drafting: a model reads the reference and proposes events and policies.

Introspection finds the state but not what matters in a game: the rare transitions a port can
get wrong (named events) and scripted policies that reach them. One metered model call reads
the reference's source and the draft and answers with ``[[event]]``/``[[policy]]`` tables. The
reference decides, as in ``translate``: a proposal is kept only if it parses, runs on the
reference's own rollouts without error, and (an event) happens there at least once; the caller
then runs the self-check again with the kept policies.
"""

from __future__ import annotations

import re
import tomllib
import uuid
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from envforge.agents.messages import Model, ModelRequest, user
from envforge.cost.meter import Meter
from envforge.spec.expr import evaluation_deadline
from envforge.untrusted.input_files import parse_toml
from envforge.verify.policies import ScriptedPolicy, UniformPolicy

if TYPE_CHECKING:
    from envforge.init.draft import Draft

SYSTEM = """You review a drafted envforge spec (env.toml) of a reinforcement-learning
environment, given the environment's source. Propose what introspection could not find:
[[event]] tables (name, expr) naming the rare or important transitions a port could get wrong,
and [[policy]] tables (name, expr) of scripted policies that reach them.

Event expressions see before.<field>, after.<field> (the drafted canonical state fields),
action, reward, terminated, truncated and obs, as numpy batches. Policy expressions see obs
(shape [B, obs_dim]) and t, and return one action per row. Allowed: arithmetic, comparisons,
& | ~, subscripts, and abs where minimum maximum clip sqrt sin cos arctan2 sign floor.
Answer with TOML only: [[event]] and [[policy]] tables, nothing else."""


@dataclass
class Assisted:
    events: list[dict[str, str]] = field(default_factory=list)
    policies: list[dict[str, str]] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)
    """(name, why) of each proposal the reference refused."""
    occurrences: dict[str, int] = field(default_factory=dict)


def proposals(text: str) -> dict[str, Any]:
    """The TOML in a model's answer (a fenced block, or the whole text)."""
    fenced = re.search(r"```(?:toml)?\s*\n(.*?)```", text, re.S)
    try:
        return parse_toml(fenced.group(1) if fenced else text)
    except tomllib.TOMLDecodeError as e:
        return {"error": str(e)}


def assist(draft: Draft, draft_toml: str, source: str, model: Meter, steps: int = 300) -> Assisted:
    """Ask ``model`` once, then keep what the reference accepts."""
    request = ModelRequest(
        system=SYSTEM,
        messages=(
            user(f"Reference source:\n```\n{source}\n```\n\nDraft:\n```toml\n{draft_toml}```"),
        ),
        max_tokens=4000,
    )
    answer = proposals(model.complete(request).text)
    out = Assisted()
    if "error" in answer:
        out.rejected.append(("(answer)", f"not TOML: {answer['error']}"))
        return out
    spec = draft.spec()
    for p in answer.get("policy", []):
        name, expr = str(p.get("name", "")), str(p.get("expr", ""))
        try:
            ScriptedPolicy(spec, expr, name).act(
                np.zeros((2, *spec.observation.shape)), np.zeros(2)
            )
            out.policies.append({"name": name, "expr": expr})
        except Exception as err:  # the reference decides: any error refuses the proposal
            out.rejected.append((name, f"policy does not run: {err}"))
    events = []
    for proposed in answer.get("event", []):
        name, expr = str(proposed.get("name", "")), str(proposed.get("expr", ""))
        try:
            spec.expression(expr)
            events.append({"name": name, "expr": expr})
        except Exception as err:
            out.rejected.append((name, f"event does not parse: {err}"))
    with evaluation_deadline(spec.verify.timeout_s):  # the model's expressions run here
        counts = _count(draft, out.policies, events, steps)
    for event in events:
        n = counts.get(event["name"])
        if n is None:
            out.rejected.append((event["name"], "event fails on the reference's transitions"))
        elif n == 0:
            out.rejected.append((event["name"], f"never happened in {steps} steps per policy"))
        else:
            out.events.append(event)
            out.occurrences[event["name"]] = n
    return out


def _count(
    draft: Draft, policies: list[dict[str, str]], events: list[dict[str, str]], steps: int
) -> dict[str, int]:
    """How often each event happens on the reference under uniform and proposed policies."""
    from envforge.init.selfcheck import reference_driver

    spec = draft.spec()
    counts: dict[str, int] = {e["name"]: 0 for e in events}
    driver = reference_driver(spec)
    try:
        runners: list[Any] = [UniformPolicy(spec, np.random.default_rng(3))]
        runners += [ScriptedPolicy(spec, p["expr"], p["name"]) for p in policies]
        for policy in runners:
            seeds = np.arange(8, dtype=np.uint32)
            state = driver.reset(seeds)
            obs = driver.observe(state)
            for t in range(steps):
                acts = policy.act(obs, np.full(len(obs), t))
                tr = driver.step(state, acts)
                inputs = tr.expression_inputs(state, acts)
                for e in events:
                    if counts.get(e["name"]) is None:
                        continue
                    try:
                        hit = spec.expression(e["expr"])(**inputs)
                        counts[e["name"]] += int(
                            np.count_nonzero(np.broadcast_to(hit, tr.reward.shape))
                        )
                    except Exception:
                        counts.pop(e["name"])
                live = ~(tr.terminated | tr.truncated)
                if not live.any():
                    break
                state = {k: v[live] for k, v in tr.state.items()}
                obs = tr.obs[live]
    finally:
        driver.close()
    return counts


def reference_source(draft: Draft) -> str:
    """The reference's source text: the C file, or the module of the env class."""
    import inspect

    if draft.probe is None:
        return (draft.root / draft.reference).read_text()
    path = inspect.getsourcefile(draft.probe.env_class)
    return open(path).read() if path else ""


def assist_with_model(
    draft: Draft,
    live: Model,
    requested: str,
    budget_usd: Decimal,
    ledger: Path | None,
    job: str | None,
) -> tuple[Assisted, Decimal]:
    """``assist`` through a live model, metered: budget-checked before and priced into the
    ledger after the call, like every call ``translate`` makes. Returns the cost too."""
    from envforge.cost.budget import Budget
    from envforge.cost.ledger import Ledger
    from envforge.cost.meter import MeteredModel
    from envforge.cost.prices import load_price_table
    from envforge.init.render import render_toml
    from envforge.translate.job import pricing_name

    price = load_price_table().price_for(pricing_name(live, requested))
    run = f"init-{draft.name}-{uuid.uuid4().hex[:8]}"
    with Ledger(ledger) as book:
        metered = MeteredModel(
            live, price, book, Budget(budget_usd), job or run, run, purpose="init"
        )
        result = assist(draft, render_toml(draft), reference_source(draft), metered)
        return result, metered.cost_usd
