"""Connect Four from PettingZoo, both seats played: the AEC reference driven through canonical
state (seats, masks, illegal moves), the hand-written JAX port on the port kit's seat
bookkeeping, and each level catching a port that is wrong for one seat only, the finding
naming that agent.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, apply_patch

from envforge.spec import load_spec
from envforge.verify.context import VerifyOptions
from envforge.verify.findings import Finding
from envforge.verify.runner import verify

pytest.importorskip("pettingzoo")

SPEC = ROOT / "references" / "connect_four" / "env.toml"
PORT = ROOT / "generated" / "connect_four" / "jax" / "connect_four.py"
MODULE = "pettingzoo.classic.connect_four_v3"
QUICK = VerifyOptions(scale=0.05, isolate=False, sandbox=None, seed_sweep=1 << 10)


@pytest.fixture(scope="module")
def reference():  # type: ignore[no-untyped-def]
    from envforge.backends.pettingzoo import PettingZooDriver

    driver = PettingZooDriver(load_spec(SPEC), MODULE)
    yield driver
    driver.close()


def _state(board: list[int], player: int) -> dict[str, np.ndarray]:
    return {
        "board": np.asarray([board], np.int32),
        "current_player": np.asarray([player], np.int32),
        "rewards": np.zeros((1, 2), np.float32),
        "terminations": np.zeros((1, 2), bool),
        "truncations": np.zeros((1, 2), bool),
        "legal_action_mask": np.zeros((1, 2, 7), bool),
    }


def test_the_reference_steps_the_seat_the_state_names(reference) -> None:  # type: ignore[no-untyped-def]
    board = [0] * 42
    board[35:38] = [2, 2, 2]  # player_1 has three in the bottom row
    tr = reference.step(_state(board, 1), np.asarray([3], np.int32))
    assert tr.state["board"][0, 38] == 2
    assert tr.state["rewards"][0].tolist() == [-1.0, 1.0]
    assert tr.terminated[0] and not tr.truncated[0]
    assert tr.reward[0] == -1.0  # the first agent's
    assert tr.state["current_player"][0] == 0
    # as player_1 the same move does not win for player_0's pieces
    tr0 = reference.step(_state(board, 0), np.asarray([3], np.int32))
    assert tr0.state["board"][0, 38] == 1 and not tr0.terminated[0]
    assert tr0.state["legal_action_mask"][0].tolist() == [[False] * 7, [True] * 7]
    assert tr0.obs.shape == (1, 2, 6, 7, 2)
    assert tr0.obs[0, 1, 5, 3].tolist() == [0.0, 1.0]  # player_1 sees player_0's new piece


def test_an_illegal_move_ends_the_game_as_the_wrapper_says(reference) -> None:  # type: ignore[no-untyped-def]
    board = [0] * 42
    for row in range(6):
        board[row * 7] = 1 + row % 2  # column 0 is full
    tr = reference.step(_state(board, 1), np.asarray([0], np.int32))
    assert tr.terminated[0] and tr.truncated[0]
    assert tr.state["rewards"][0].tolist() == [0.0, -1.0]
    assert tr.state["current_player"][0] == 0  # PettingZoo hands the turn to the first done agent
    assert tr.state["board"][0].tolist() == board


@pytest.mark.slow  # the verifier's levels cover the same (10 s)
def test_port_and_reference_agree_over_random_games(reference) -> None:  # type: ignore[no-untyped-def]
    from envforge.backends.recipe import build_driver, port_recipe

    spec = load_spec(SPEC)
    port = build_driver(port_recipe(spec, PORT.parent))
    rng = np.random.default_rng(1)
    state = reference.reset(np.arange(16, dtype=np.uint32))
    assert not (port.reset(np.arange(16, dtype=np.uint32))["board"]).any()
    ends = 0
    for _ in range(60):
        actions = rng.integers(0, 7, 16).astype(np.int32)
        a, b = reference.step(state, actions), port.step(state, actions)
        for name in spec.field_names:
            assert np.array_equal(a.state[name], b.state[name]), name
        assert np.array_equal(a.obs, b.obs) and np.array_equal(a.reward, b.reward)
        done = a.terminated | a.truncated
        ends += int(done.sum())
        fresh = reference.reset(np.arange(16, dtype=np.uint32))
        state = {
            k: np.where(done.reshape(-1, *[1] * (v.ndim - 1)), fresh[k], v)
            for k, v in a.state.items()
        }
    assert ends > 4


# ---- a port wrong for one seat: every level names the agent ----------------------------------

SEAT_BUGS = {
    # player_1's planes swapped: its own pieces shown as its opponent's
    "observation": (
        "    own = board == seat + 1\n    opponent = board == (seat + 1) % N_AGENTS + 1\n",
        "    own = board == jnp.where(seat == 1, 1, seat + 1)\n"
        "    opponent = board == jnp.where(seat == 1, 2, (seat + 1) % N_AGENTS + 1)\n",
    ),
    # player_1 loses nothing when player_0 wins
    "reward": (
        ".at[other].set(-1.0)",
        ".at[other].set(jnp.where(other == 1, 0.0, -1.0))",
    ),
    # player_1's mask never offers the last column
    "mask": (
        "legal_action_mask = GAME.legal_action_mask\n",
        "def legal_action_mask(state):\n"
        "    return GAME.legal_action_mask(state).at[1, COLUMN_COUNT - 1].set(False)\n\n\n"
        "def to_canonical(state):\n"
        "    return {**GAME.to_canonical(state), 'legal_action_mask': legal_action_mask(state)}\n",
    ),
}
SEAT_FIELDS = {"observation": "obs", "reward": "rewards", "mask": "legal_action_mask"}


def _seat_port(tmp_path: Path, bug: str) -> Path:
    old, new = SEAT_BUGS[bug]
    edits = [(old, new)]
    if bug == "mask":
        edits.append(("to_canonical = GAME.to_canonical\n", ""))
    return apply_patch(PORT, tmp_path / bug, *edits).path


def _names_player_1(finding: Finding, field: str) -> None:
    assert field in finding.fields, finding.message
    assert finding.extra.get("agents") == ["player_1"], finding.extra
    assert f"{field}[player_1]" in finding.message, finding.message


@pytest.mark.parametrize(
    "bug",
    [
        # three verifies of 15-140 s each: the slow suite (the default one runs the L0 test and
        # L1 on the observation bug with observations as named parts, below)
        pytest.param("observation", marks=pytest.mark.slow),
        pytest.param("reward", marks=pytest.mark.slow),
        pytest.param("mask", marks=pytest.mark.slow),
    ],
)
def test_each_level_names_the_one_seat_that_is_wrong(tmp_path: Path, bug: str) -> None:
    spec = load_spec(SPEC)
    options = VerifyOptions(
        scale=0.05, isolate=False, sandbox=None, seed_sweep=1 << 10, all_levels=True
    )
    report = verify(spec, _seat_port(tmp_path, bug), levels=[1, 2, 3], options=options)
    for level in report.levels:
        assert level.status == "fail", (level.level, level.summary)
        _names_player_1(level.findings[0], SEAT_FIELDS[bug])


def test_level0_names_the_seat_whose_observation_leaves_its_bounds(tmp_path: Path) -> None:
    port = apply_patch(
        PORT,
        tmp_path,
        (
            "return jnp.stack([own, opponent], axis=2).astype(jnp.float32)",
            "return jnp.stack([own, opponent], axis=2).astype(jnp.float32) * (1 + seat)",
        ),
    ).path
    report = verify(load_spec(SPEC), port, levels=[0], options=QUICK)
    finding = report.levels[0].findings[0]
    assert finding.check == "contract.obs_bounds"
    assert "obs[player_1]" in finding.message and finding.extra["agents"] == ["player_1"]


@pytest.mark.slow  # 16 s quiet, minutes under load: hypothesis' shrink
def test_observations_as_named_parts_per_agent_name_the_agent(tmp_path: Path) -> None:
    """The same seats with each agent's observation a named part ([observation.parts.<agent>],
    the nested-observation machinery): the finding names the part, which is the agent."""
    whole = '[observation]\nshape = [2, 6, 7, 2]\ndtype = "float32"\nlow = 0.0\nhigh = 1.0\n'
    per_agent = "".join(
        f'[observation.parts.{a}]\nshape = [6, 7, 2]\ndtype = "int8"\nlow = 0\nhigh = 1\n'
        for a in ("player_0", "player_1")
    )
    text = SPEC.read_text()
    assert whole in text
    (tmp_path / "env.toml").write_text(text.replace(whole, per_agent))
    spec = load_spec(tmp_path / "env.toml")
    assert spec.observation.shape == (2 * 84,)
    parts = 'illegal_reward=-1.0, observation_parts=("player_0", "player_1"))'
    port = apply_patch(
        PORT,
        tmp_path / "port",
        SEAT_BUGS["observation"],
        ("illegal_reward=-1.0)", parts),
        ("axis=2).astype(jnp.float32)", "axis=2).astype(jnp.int8)"),  # the reference's dtype
    ).path
    report = verify(spec, port, levels=[1], options=QUICK)
    finding = report.levels[0].findings[0]
    assert "obs" in finding.fields and "obs.player_1[" in finding.message, finding.message
    assert finding.extra["agents"] == ["player_1"]


@pytest.mark.slow  # a whole L1 runs before the property (25 s)
def test_a_port_within_tolerance_but_not_zero_sum_fails_the_property(tmp_path: Path) -> None:
    text = SPEC.read_text().replace('mode = "exact"', 'mode = "tolerance"\natol = 1.5')
    (tmp_path / "env.toml").write_text(text)
    port = apply_patch(PORT, tmp_path / "port", SEAT_BUGS["reward"]).path
    report = verify(load_spec(tmp_path / "env.toml"), port, levels=[1], options=QUICK)
    finding = report.levels[0].findings[0]
    assert finding.check == "property.zero_sum", finding.message
    assert "player_0 1.0, player_1 0.0" in finding.message


@pytest.mark.slow
def test_the_shipped_port_is_equivalent_at_l0_to_l3() -> None:
    report = verify(load_spec(SPEC), PORT.parent, options=QUICK)
    assert [lv.status for lv in report.levels] == ["pass"] * 4, report.levels


def test_l3s_seat_policies_play_only_legal_moves_of_the_player_to_move() -> None:
    from envforge.verify.policies import legal_random, rollout_policies

    spec = load_spec(SPEC)
    names = [p.name for p in rollout_policies(spec, np.random.default_rng(0))]
    assert "random_legal" in names and "centre_column_vs_random_legal" in names
    mask = np.zeros((64, 2, 7), bool)
    mask[:32, 0, [2, 5]] = True  # rows 0-31: player_0 to move, columns 2 and 5 open
    mask[32:, 1, 6] = True  # rows 32-63: player_1 to move, only column 6
    state = {"legal_action_mask": mask, "current_player": np.repeat([0, 1], 32).astype(np.int32)}
    actions = legal_random(spec, np.random.default_rng(1), state)
    assert set(actions[:32].tolist()) == {2, 5} and set(actions[32:].tolist()) == {6}
