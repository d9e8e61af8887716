"""The training path under a tape spec (envforge/verify/training_path.py and the mutation
differential's training phase): a JAX port's own ``step``, which draws from its ``key``, is
compared in distribution with the reference, and a bug only that step takes is found."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, apply_patch

from envforge.backends.base import Transition
from envforge.backends.jax import JaxDriver
from envforge.errors import SpecError
from envforge.mutate.differential import LIGHT, Differential
from envforge.spec import EnvSpec, load_spec
from envforge.verify import training_path
from envforge.verify.context import VerifyContext, VerifyOptions
from envforge.verify.runner import DriverPair

LAKE = ROOT / "references" / "frozenlake"
LAKE_PORT = ROOT / "generated" / "frozenlake" / "jax" / "frozenlake.py"
UNO = ROOT / "references" / "uno"
UNO_PORT = ROOT / "generated" / "uno" / "jax" / "uno.py"
QUICK = VerifyOptions(isolate=False, sandbox=None, scale=0.2)
GOAL_PAYS_MORE_IN_TRAINING = (
    "    return new._replace(key=key), obs, reward, terminated, truncated\n",
    "    return new._replace(key=key), obs, reward * 1.5, terminated, truncated\n",
)
DEALS_THE_BOTTOM_IN_TRAINING = (  # the campaign's draw_skip in the lazy deal
    "    j, draws = draws.integers(0, top + 1, when=when)\n",
    "    j = jnp.int32(0)\n",
)


def _check(spec_dir: Path, port: Path, options: VerifyOptions = QUICK) -> tuple:
    spec = load_spec(spec_dir / "env.toml")
    pair = DriverPair(spec, port, options)
    try:
        ref, prt = pair.open()
        ctx = VerifyContext(spec, ref, prt, options, pair.sources("port"))
        probe = ref.reset(np.zeros(1, np.uint32))
        return training_path.check(ctx, probe, np.zeros(1, np.int32), measuring=False)
    finally:
        pair.close()


def test_a_jax_ports_training_step_draws_from_the_key_it_is_given() -> None:
    spec = load_spec(LAKE / "env.toml")
    port = JaxDriver(spec, LAKE_PORT.parent)
    state = {k: np.repeat(v, 4096, axis=0) for k, v in port.reset(np.zeros(1, np.uint32)).items()}
    actions = np.full(4096, 1, np.int32)  # down: slips left or right a third of the time each
    tr = port.step_training(state, actions, np.arange(4096, dtype=np.uint64))
    again = port.step_training(state, actions, np.arange(4096, dtype=np.uint64))
    assert tr is not None and again is not None
    assert np.array_equal(tr.state["s"], again.state["s"])  # the same seeds, the same draws
    _, counts = np.unique(tr.state["s"], return_counts=True)
    assert len(counts) == 3 and counts.min() > 4096 / 3 - 200  # fresh draws per row


def test_the_shipped_frozenlake_training_step_agrees_with_gymnasium() -> None:
    finding, stats, clause = _check(LAKE, LAKE_PORT.parent)
    assert finding is None, finding.message
    assert stats["training_path"]["distribution_tests"] > 0
    assert clause.startswith("; its training step (its own key) agrees in distribution")


def test_a_bug_only_the_training_step_takes_is_a_finding_naming_reward(tmp_path: Path) -> None:
    port = apply_patch(LAKE_PORT, tmp_path, GOAL_PAYS_MORE_IN_TRAINING)
    finding, _, _ = _check(LAKE, port.path.parent)
    assert finding is not None and finding.check == "step.training_distribution"
    assert finding.fields == ["reward"]
    assert "training step" in finding.message
    assert "reached_goal" in finding.message and "found by seeking" in finding.message


def test_the_differential_compares_training_steps_before_calling_a_mutant_equivalent(
    tmp_path: Path,
) -> None:
    spec = load_spec(LAKE / "env.toml")
    original = JaxDriver(spec, LAKE_PORT.parent)
    mutant = JaxDriver(spec, apply_patch(LAKE_PORT, tmp_path, GOAL_PAYS_MORE_IN_TRAINING).path)
    result = Differential(original, mutant, 0).run(LIGHT, "light")
    assert "reward" in result.differing and result.training_transitions > 0
    same = Differential(original, JaxDriver(spec, LAKE_PORT), 0).run(LIGHT, "light")
    assert not same.differing and same.training_transitions > 0


def _spec_with_pile() -> EnvSpec:
    spec = load_spec(UNO / "env.toml")
    assert [f.name for f in spec.state if f.shuffled] == ["deck"]
    return spec


def test_a_shuffled_pile_is_shuffled_alike_for_alike_seeds_and_compared_as_a_multiset() -> None:
    spec = _spec_with_pile()
    deck = np.full((3, 108), -1, np.int32)
    deck[:, :5] = [7, 3, 9, 1, 5]
    state = {"deck": deck, "played": deck.copy()}
    seeds = np.arange(3, dtype=np.uint64)
    once = training_path.shuffle_piles(spec, state, seeds)
    assert np.array_equal(once["deck"], training_path.shuffle_piles(spec, state, seeds)["deck"])
    assert np.array_equal(once["played"], deck)  # only the declared pile
    assert (once["deck"][:, 5:] == -1).all()
    assert not all(np.array_equal(row[:5], deck[0, :5]) for row in once["deck"])
    tr = Transition(once, np.zeros((3, 1)), np.zeros(3), np.zeros(3, bool), np.zeros(3, bool))
    assert (training_path.sort_piles(spec, tr).state["deck"][:, :5] == [1, 3, 5, 7, 9]).all()


def test_shuffled_needs_a_padded_list(tmp_path: Path) -> None:
    text = (UNO / "env.toml").read_text().replace("shuffled = true\n", "")
    text = text.replace('name = "direction"\n', 'name = "direction"\nshuffled = true\n', 1)
    (tmp_path / "env.toml").write_text(text)
    with pytest.raises(SpecError, match="shuffled needs a 1-D field with pad"):
        load_spec(tmp_path / "env.toml")


@pytest.mark.slow  # about 60 s on the 2-core Xeon (UNO's JAX compile, the reference's rollouts)
def test_unos_lazy_deal_from_a_reshuffled_pile_is_found_at_a_reshuffle(tmp_path: Path) -> None:
    shipped, _, _ = _check(UNO, UNO_PORT.parent)
    assert shipped is None, shipped.message  # the lazy deal agrees with a shuffled pile's top
    port = apply_patch(UNO_PORT, tmp_path, DEALS_THE_BOTTOM_IN_TRAINING)
    finding, _, _ = _check(UNO, port.path.parent)
    assert finding is not None and finding.check == "step.training_distribution"
    assert "reshuffle" in finding.message
    assert finding.fields[0] in ("deck", "hands")
