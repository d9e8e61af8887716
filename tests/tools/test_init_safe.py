"""A safe `envforge init`: whole-number fields are exact, a tolerance comes only from
measured float error and stays on its own field, a drafted spec never passes a port that doubles
the reward, ranges that make the reference raise are narrowed, the game object a wrapper holds
is probed (with the generator it holds deeper), and the fields the observation reads are kept."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT

from envforge.errors import BadInput
from envforge.init.draft import draft_spec
from envforge.init.render import render_toml
from envforge.rng.recorder import RowLog, recording
from envforge.spec import load_spec
from envforge.verify.context import VerifyOptions
from envforge.verify.runner import verify

WRAPPED = '''
import math
import random

import numpy as np
from gymnasium import spaces

CELLS = 12


class Game:
    """Coins on a ring of cells, the map 0/1 kept as floats; a gust may drop a new coin (a
    draw from the game's own random.Random inside a step); fuel burns down (a square root of
    it is paid, so fuel below 0 raises)."""

    def __init__(self, rng):
        self.rng = rng
        self.board = np.zeros(CELLS)
        self.pos = 0
        self.coins = 0.0
        self.fuel = 10.0
        self.last = 0

    def deal(self):
        self.board = np.array([float(self.rng.random() < 0.5) for _ in range(CELLS)])
        self.board[0] = 1.0
        self.pos = self.rng.randrange(CELLS)

    def move(self, action):
        self.pos = (self.pos + (1 if action == 1 else -1)) % CELLS
        got = 0.0
        if self.board[self.pos] == 1.0:
            self.board[self.pos] = 0.0
            got = 1.0 + 0.25 * self.coins + 0.1 * math.sqrt(self.fuel)
            self.coins += 1.0
        self.fuel = max(0.0, self.fuel - 0.37)
        self.last = 1 if action == 1 else -1  # read only by the observation
        if self.rng.random() < 0.05:
            self.board[self.rng.randrange(CELLS)] = 1.0
        return got


class Wrapped:
    """The env holds the game object; its own state is only a step counter."""

    def __init__(self):
        self.observation_space = spaces.Box(-1.0, 100.0, (CELLS + 3,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.game = Game(random.Random(0))
        self.time = 0

    def _get_obs(self):
        g = self.game
        return np.concatenate([g.board, [g.pos, g.coins, g.last]]).astype(np.float32)

    def reset(self, seed=None, options=None):
        self.game = Game(random.Random(seed))
        self.game.deal()
        self.time = 0
        return self._get_obs(), {}

    def step(self, action):
        reward = self.game.move(action)
        self.time += 1
        return self._get_obs(), reward, not self.game.board.any(), self.time >= 200, {}
'''

FLAT = '''
import numpy as np
from gymnasium import spaces


class Flat:
    """Coins on a ring of 12 cells, the map 0/1 kept as floats on the env itself; every other
    coin pays double (a flag)."""

    def __init__(self):
        self.observation_space = spaces.Box(0.0, 12.0, (13,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.board = np.zeros(12)
        self.pos = 0
        self.bonus = False

    def _get_obs(self):
        return np.concatenate([self.board, [self.pos]]).astype(np.float32)

    def reset(self, seed=None, options=None):
        self.np_random = np.random.default_rng(seed)
        self.board = (self.np_random.random(12) < 0.5).astype(np.float64)
        self.board[0] = 1.0
        self.pos = int(self.np_random.integers(12))
        self.bonus = False
        return self._get_obs(), {}

    def step(self, action):
        self.pos = (self.pos + (1 if action == 1 else -1)) % 12
        reward = 0.0
        if self.board[self.pos] == 1.0:
            self.board[self.pos] = 0.0
            reward = 2.0 if self.bonus else 1.0
            self.bonus = not self.bonus
        return self._get_obs(), reward, not self.board.any(), False, {}
'''

FLAT_PORT = """
from typing import NamedTuple

import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)  # the map is float64 on the reference, compared exactly
REWARD_SCALE = __SCALE__


class EnvState(NamedTuple):
    board: jax.Array
    pos: jax.Array
    bonus: jax.Array


def reset(seed):
    k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
    board = (jax.random.uniform(k1, (12,)) < 0.5).astype(jnp.float64).at[0].set(1.0)
    return EnvState(board, jax.random.randint(k2, (), 0, 12).astype(jnp.int32), jnp.bool_(False))


def observe(s):
    # float64: the Driver casts it to the spec's float32 (XLA's own cast flushes subnormals,
    # which L1 draws into the map's range, to 0; the reference's numpy cast keeps them)
    return jnp.concatenate([s.board, s.pos[None].astype(jnp.float64)])


def step(s, action):
    pos = ((s.pos + jnp.where(action == 1, 1, -1)) % 12).astype(jnp.int32)
    coin = s.board[pos] == 1.0
    board = jnp.where(coin, s.board.at[pos].set(0.0), s.board)
    reward = jnp.where(coin, jnp.where(s.bonus, 2.0, 1.0), 0.0) * REWARD_SCALE
    nxt = EnvState(board, pos, jnp.where(coin, ~s.bonus, s.bonus))
    return nxt, observe(nxt), reward, ~jnp.any(board != 0.0), jnp.bool_(False)


def to_canonical(s):
    return {"board": s.board, "pos": s.pos, "bonus": s.bonus}


def from_canonical(f):
    return EnvState(
        jnp.asarray(f["board"], jnp.float64),
        jnp.asarray(f["pos"], jnp.int32),
        jnp.asarray(f["bonus"], jnp.bool_),
    )
"""


def drafted(tmp_path: Path, source: str, ref: str, name: str) -> Path:
    """Draft a spec for ``source`` (written to ``tmp_path``), write it, return its path."""
    (tmp_path / f"{ref.split('.')[0]}.py").write_text(source)
    draft = draft_spec(ref, name, tmp_path)
    assert draft.check is not None and draft.check.passed, [f.message for f in draft.check.findings]
    (tmp_path / "env.toml").write_text(render_toml(draft))
    return tmp_path / "env.toml"


def test_init_on_a_wrapper_probes_the_game_object(tmp_path: Path) -> None:
    spec = load_spec(drafted(tmp_path, WRAPPED, "coins.py:Wrapped", "coins"))
    fields = {f.name: f for f in spec.state}
    # before: only the wrapper's own `time` was drafted (the game was "a Game object")
    assert {"game_board", "game_pos", "game_coins", "game_fuel"} <= set(fields), list(fields)
    assert fields["game_board"].attr == "game.board" and fields["game_board"].shape == (12,)
    # game.last is read by the observation only (step overwrites it before reading): the
    # self-check asks the Driver for the observation of each reached state, so it is kept
    assert "game_last" in fields
    # the game's random.Random, held below the env, is recorded: its draws become the tape
    assert spec.rng.step == "tape"
    # fuel's 10% headroom went below 0, where the step's square root raises: narrowed
    assert (fields["game_fuel"].low, fields["game_fuel"].high) == (0.0, 10.0)
    # whole-number floats are exact; the float fuel has its own small measured tolerance
    assert fields["game_board"].atol == 0.0 and fields["game_coins"].atol == 0.0
    assert fields["game_fuel"].atol is not None and 0 < fields["game_fuel"].atol <= 0.1


def test_whole_number_fields_are_exact_and_no_tolerance_reaches_the_reward(
    tmp_path: Path,
) -> None:
    spec = load_spec(drafted(tmp_path, FLAT, "flat.py:Flat", "flat"))
    board, pos, bonus = (spec.field(n) for n in ("board", "pos", "bonus"))
    assert (board.dtype, pos.dtype, bonus.dtype) == ("float64", "int32", "bool")
    # before: the 0/1 map was drafted with atol = 100, and [compare] atol = 100 for the
    # observation and the reward (a nudged 1.0 missed `== 1.0`: a branch, not float error)
    assert spec.tolerance("board") == (0.0, 0.0)
    assert spec.tolerance(None) == (0.0, 0.0)


def port(tmp_path: Path, scale: float) -> Path:
    folder = tmp_path / f"port_{scale:g}"
    folder.mkdir()
    (folder / "flat.py").write_text(FLAT_PORT.replace("__SCALE__", repr(scale)))
    return folder


@pytest.mark.slow
def test_a_drafted_spec_does_not_pass_a_port_that_doubles_the_reward(tmp_path: Path) -> None:
    """The issue's case: under the old draft (atol = 100 on observation and reward) the doubled
    port verified equivalent. L3 (whole episodes) is the quick level here: L1's exact-mode
    boundary search bisects every element of the float map."""
    spec = load_spec(drafted(tmp_path, FLAT, "flat.py:Flat", "flat"))
    quick = VerifyOptions(scale=0.1)
    right = verify(spec, port(tmp_path, 1.0), [3], quick)
    assert [r.status for r in right.levels] == ["pass"], right.levels
    doubled = verify(spec, port(tmp_path, 2.0), [3], quick)
    assert doubled.levels[-1].status == "fail", doubled.levels
    assert "reward" in doubled.levels[-1].findings[0].fields


class Dealer:
    def __init__(self, gen: np.random.Generator) -> None:
        self.gen = gen


class Game:
    def __init__(self) -> None:
        self.rng = random.Random(5)
        self.dealer = Dealer(np.random.default_rng(5))
        self.players = [Dealer(self.dealer.gen)]  # the same generator, held twice


class Holder:
    def __init__(self) -> None:
        self.game = Game()


def test_the_recorder_stands_in_for_generators_held_below_the_env() -> None:
    env = Holder()
    originals = (env.game.rng, env.game.dealer.gen)
    log = RowLog()
    with recording(env, 11, log):
        a = env.game.rng.random()
        b = env.game.dealer.gen.integers(0, 6)
        c = env.game.players[0].gen.random()
    # before: only the env's own attributes were stood in for; these three went unrecorded
    assert [d[0] for d in log.draws] and len(log.draws) == 3
    assert [d[3] for d in log.draws] == [a, b, c]
    assert (env.game.rng, env.game.dealer.gen) == originals
    assert env.game.players[0].gen is originals[1]
    again = RowLog()
    with recording(env, 11, again):
        assert env.game.rng.random() == a  # the verifier's seed decides, not the game's state


@pytest.mark.slow
def test_a_drafted_cartpole_spec_does_not_pass_a_doubled_reward(tmp_path: Path) -> None:
    shipped = load_spec(ROOT / "references" / "cartpole" / "env.toml")
    draft = draft_spec(shipped.reference, "cartpole", tmp_path)
    assert draft.check is not None and draft.check.passed
    (tmp_path / "env.toml").write_text(render_toml(draft))
    spec = load_spec(tmp_path / "env.toml")
    atol, _ = spec.tolerance(None)
    assert atol <= 0.01  # the reward is 1.0: no tolerance near it
    source = (ROOT / "generated" / "cartpole" / "jax" / "cartpole.py").read_text()
    folder = tmp_path / "doubled"
    folder.mkdir()
    (folder / "cartpole.py").write_text(
        source
        + "\n\n_step = step\n\n\ndef step(state, action):\n"
        + "    s, o, r, te, tr = _step(state, action)\n    return s, o, 2 * r, te, tr\n"
    )
    report = verify(spec, folder, [3], VerifyOptions(scale=0.1))
    assert report.levels[-1].status == "fail", report.levels
    assert "reward" in report.levels[-1].findings[0].fields


def test_a_reference_without_spaces_is_one_clear_error(tmp_path: Path) -> None:
    """rlcard-style adapters (references/leduc) have no gymnasium spaces: before, the probe
    crashed with an AttributeError traceback."""
    (tmp_path / "bare.py").write_text(
        "class Bare:\n    def reset(self, seed=None):\n        return 0, {}\n"
    )
    with pytest.raises(BadInput, match="no observation_space or action_space"):
        draft_spec("bare.py:Bare", "bare", tmp_path)
