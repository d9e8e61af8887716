"""JAX port of the three-on-three monster battle.

Reference: ``references/battle/battle.js`` (envforge's JavaScript reference). Names follow the
JS source (``useMove``, ``secondary``, ``replaceFainted`` become ``use_move``, ``secondary``,
``replace_fainted``). Every branch of the reference is a ``jnp.where`` over the state, and
every draw of its xorshift32 generator happens here under the same condition and in the same
order (``draw_if``), so whole battles agree bit for bit. All arithmetic is int32 (the reference
only ever computes integers; its observation divides small integers, which float32 division
rounds exactly as JS's double division followed by ``Float32Array`` storage does).

Single-env, pure functions; the envforge JAX backend vmaps and jits them.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

# ---- tables (battle.js MOVES, SPECIES, CHART) ------------------------------------------------

NONE = 10
CHART = np.array(
    [
        [2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2],
        [2, 1, 1, 4, 2, 4, 2, 2, 2, 2, 2],
        [2, 4, 1, 1, 2, 2, 2, 4, 2, 2, 2],
        [2, 1, 4, 1, 2, 2, 2, 4, 1, 2, 2],
        [2, 2, 4, 1, 1, 2, 2, 0, 4, 2, 2],
        [2, 1, 1, 4, 2, 1, 2, 4, 4, 2, 2],
        [4, 2, 2, 2, 2, 4, 2, 2, 1, 1, 2],
        [2, 4, 2, 1, 4, 2, 2, 2, 0, 2, 2],
        [2, 2, 2, 4, 1, 2, 4, 2, 2, 2, 2],
        [2, 2, 2, 2, 2, 2, 4, 2, 2, 1, 2],
    ],
    np.int32,
)

PHYSICAL, SPECIAL, STATUS = 0, 1, 2
E_NONE, E_STATUS, E_TARGET_STAGE, E_SELF_STAGE, E_HEAL, E_DRAIN = 0, 1, 2, 3, 4, 5
E_RECOIL, E_CHARGE, E_HIGH_CRIT, E_REST = 6, 7, 8, 9
BURN, POISON, PARALYSIS, SLEEP = 1, 2, 3, 4
ATK, DEF, SPA, SPD, SPE = 0, 1, 2, 3, 4

# type, category, power, accuracy, priority, effect, p1, p2, chance (names in battle.js)
MOVES = np.array(
    [
        [0, PHYSICAL, 40, 100, 0, E_NONE, 0, 0, 0],  # Tackle
        [0, PHYSICAL, 40, 100, 1, E_NONE, 0, 0, 0],  # Quick Attack
        [0, PHYSICAL, 85, 100, 0, E_STATUS, PARALYSIS, 0, 30],  # Body Slam
        [0, PHYSICAL, 70, 100, 0, E_HIGH_CRIT, 0, 0, 0],  # Slash
        [0, PHYSICAL, 120, 100, 0, E_RECOIL, 33, 0, 100],  # Double-Edge
        [0, STATUS, 0, 0, 0, E_SELF_STAGE, ATK, 2, 100],  # Swords Dance
        [0, STATUS, 0, 100, 0, E_TARGET_STAGE, ATK, -1, 100],  # Growl
        [0, STATUS, 0, 0, 0, E_HEAL, 50, 0, 100],  # Recover
        [1, SPECIAL, 40, 100, 0, E_STATUS, BURN, 0, 10],  # Ember
        [1, SPECIAL, 90, 100, 0, E_STATUS, BURN, 0, 10],  # Flamethrower
        [1, SPECIAL, 110, 85, 0, E_STATUS, BURN, 0, 10],  # Fire Blast
        [1, PHYSICAL, 50, 100, 0, E_SELF_STAGE, SPE, 1, 100],  # Flame Charge
        [1, STATUS, 0, 85, 0, E_STATUS, BURN, 0, 100],  # Will-O-Wisp
        [2, SPECIAL, 40, 100, 0, E_NONE, 0, 0, 0],  # Water Gun
        [2, SPECIAL, 90, 100, 0, E_NONE, 0, 0, 0],  # Surf
        [2, SPECIAL, 110, 80, 0, E_NONE, 0, 0, 0],  # Hydro Pump
        [2, PHYSICAL, 40, 100, 1, E_NONE, 0, 0, 0],  # Aqua Jet
        [2, SPECIAL, 65, 100, 0, E_TARGET_STAGE, SPE, -1, 10],  # Bubble Beam
        [2, STATUS, 0, 0, 0, E_SELF_STAGE, DEF, 1, 100],  # Withdraw
        [3, PHYSICAL, 45, 100, 0, E_NONE, 0, 0, 0],  # Vine Whip
        [3, SPECIAL, 75, 100, 0, E_DRAIN, 50, 0, 100],  # Giga Drain
        [3, SPECIAL, 120, 100, 0, E_CHARGE, 0, 0, 0],  # Solar Beam
        [3, PHYSICAL, 55, 95, 0, E_HIGH_CRIT, 0, 0, 0],  # Razor Leaf
        [3, STATUS, 0, 75, 0, E_STATUS, SLEEP, 0, 100],  # Sleep Powder
        [3, STATUS, 0, 0, 0, E_HEAL, 50, 0, 100],  # Synthesis
        [4, SPECIAL, 40, 100, 0, E_STATUS, PARALYSIS, 0, 10],  # Thunder Shock
        [4, SPECIAL, 90, 100, 0, E_STATUS, PARALYSIS, 0, 10],  # Thunderbolt
        [4, SPECIAL, 110, 70, 0, E_STATUS, PARALYSIS, 0, 30],  # Thunder
        [4, STATUS, 0, 90, 0, E_STATUS, PARALYSIS, 0, 100],  # Thunder Wave
        [4, SPECIAL, 50, 90, 0, E_SELF_STAGE, SPA, 1, 70],  # Charge Beam
        [5, PHYSICAL, 40, 100, 1, E_NONE, 0, 0, 0],  # Ice Shard
        [5, SPECIAL, 90, 100, 0, E_NONE, 0, 0, 0],  # Ice Beam
        [5, SPECIAL, 110, 70, 0, E_NONE, 0, 0, 0],  # Blizzard
        [5, SPECIAL, 65, 100, 0, E_TARGET_STAGE, ATK, -1, 10],  # Aurora Beam
        [6, PHYSICAL, 50, 100, 0, E_HIGH_CRIT, 0, 0, 0],  # Karate Chop
        [6, PHYSICAL, 120, 100, 0, E_SELF_STAGE, DEF, -1, 100],  # Close Combat
        [6, PHYSICAL, 40, 100, 1, E_NONE, 0, 0, 0],  # Mach Punch
        [6, STATUS, 0, 0, 0, E_SELF_STAGE, ATK, 1, 100],  # Bulk Up
        [7, PHYSICAL, 100, 100, 0, E_NONE, 0, 0, 0],  # Earthquake
        [7, SPECIAL, 55, 95, 0, E_TARGET_STAGE, SPE, -1, 100],  # Mud Shot
        [7, PHYSICAL, 80, 100, 0, E_CHARGE, 0, 0, 0],  # Dig
        [8, PHYSICAL, 35, 100, 0, E_NONE, 0, 0, 0],  # Peck
        [8, SPECIAL, 75, 95, 0, E_NONE, 0, 0, 0],  # Air Slash
        [8, PHYSICAL, 120, 100, 0, E_RECOIL, 33, 0, 100],  # Brave Bird
        [8, PHYSICAL, 140, 90, 0, E_CHARGE, 0, 0, 0],  # Sky Attack
        [9, SPECIAL, 90, 100, 0, E_TARGET_STAGE, SPD, -1, 10],  # Psychic
        [9, STATUS, 0, 0, 0, E_SELF_STAGE, SPD, 2, 100],  # Amnesia
        [9, STATUS, 0, 0, 0, E_REST, 0, 0, 100],  # Rest
        [3, STATUS, 0, 75, 0, E_STATUS, POISON, 0, 100],  # Poison Powder
        [9, SPECIAL, 50, 100, 0, E_NONE, 0, 0, 0],  # Confusion
    ],
    np.int32,
)
MOVE_TYPE, MOVE_CAT, MOVE_POWER, MOVE_ACC, MOVE_PRIO = (MOVES[:, i] for i in range(5))
MOVE_EFFECT, MOVE_P1, MOVE_P2, MOVE_CHANCE = (MOVES[:, i] for i in range(5, 9))

# type1, type2, hp, atk, def, spa, spd, spe, then the four moves
SPECIES = np.array(
    [
        [1, 8, 78, 84, 78, 109, 85, 100, 9, 42, 12, 44],  # Cindrake
        [2, NONE, 79, 83, 100, 85, 105, 78, 14, 15, 18, 31],  # Tidalon
        [3, 9, 80, 82, 83, 100, 100, 80, 20, 21, 23, 45],  # Verdant
        [4, NONE, 60, 90, 55, 90, 80, 110, 26, 1, 28, 29],  # Voltmouse
        [5, 7, 110, 100, 80, 70, 60, 50, 30, 38, 32, 47],  # Glacierra
        [6, NONE, 90, 130, 80, 65, 85, 55, 35, 36, 37, 34],  # Brawlox
        [7, 8, 75, 95, 125, 45, 75, 95, 40, 43, 39, 5],  # Dunewyrm
        [0, NONE, 95, 80, 105, 40, 70, 100, 2, 4, 7, 6],  # Normacow
        [9, NONE, 65, 50, 45, 135, 95, 120, 45, 49, 46, 25],  # Mindrake
        [2, 5, 90, 85, 80, 85, 95, 70, 13, 16, 33, 17],  # Kelpie
        [3, NONE, 70, 100, 70, 60, 60, 70, 19, 22, 24, 48],  # Sproutle
        [0, 8, 83, 80, 75, 70, 70, 101, 41, 3, 8, 27],  # Stormhawk
    ],
    np.int32,
)
SPECIES_T1, SPECIES_T2 = SPECIES[:, 0], SPECIES[:, 1]
MAX_HP = SPECIES[:, 2] + 75  # maxHp
BASE_STATS = SPECIES[:, 3:8] + 20  # baseStat: atk, def, spa, spd, spe
SPECIES_MOVES = SPECIES[:, 8:12]

TEAM = 3
TURN_CAP = 200
SWITCH_PRIORITY = 7
OBS_SIZE = 48


class EnvState(NamedTuple):
    species: jax.Array  # [2, 3]
    moves: jax.Array  # [2, 3, 4]
    hp: jax.Array  # [2, 3]
    status: jax.Array  # [2, 3]
    sleep_turns: jax.Array  # [2, 3]
    active: jax.Array  # [2]
    stages: jax.Array  # [2, 5]
    charge: jax.Array  # [2]
    turn: jax.Array  # []
    rng: jax.Array  # [] uint32


def i32(x: object) -> jax.Array:
    return jnp.asarray(x, jnp.int32)


# ---- randomness: xorshift32, as battle.js ----------------------------------------------------


def next_rng(x: jax.Array) -> jax.Array:
    x = x ^ (x << 13)
    x = x ^ (x >> 17)
    return x ^ (x << 5)


def draw_if(rng: jax.Array, cond: jax.Array, n: jax.Array | int) -> tuple[jax.Array, jax.Array]:
    """``rand(battle, n)`` when ``cond`` holds: the generator moves only then."""
    new = next_rng(rng)
    value = (new % jnp.asarray(n).astype(jnp.uint32)).astype(jnp.int32)
    return jnp.where(cond, new, rng), value


def seed_rng(seed: jax.Array) -> jax.Array:
    x = seed.astype(jnp.uint32) * jnp.uint32(747796405) + jnp.uint32(2891336453)
    x = ((x >> ((x >> 28) + jnp.uint32(4))) ^ x) * jnp.uint32(277803737)
    x = (x >> 22) ^ x
    return jnp.where(x == 0, jnp.uint32(1), x)


# ---- derived stats ---------------------------------------------------------------------------


def staged(value: jax.Array, stage: jax.Array) -> jax.Array:
    num = jnp.where(stage > 0, 2 + stage, 2)
    den = jnp.where(stage < 0, 2 - stage, 2)
    return (value * num) // den


def effectiveness(move_type: jax.Array, species: jax.Array) -> jax.Array:
    chart = jnp.asarray(CHART)
    t1, t2 = jnp.asarray(SPECIES_T1)[species], jnp.asarray(SPECIES_T2)[species]
    return chart[move_type, t1] * chart[move_type, t2]


def has_type(species: jax.Array, t: jax.Array) -> jax.Array:
    return (jnp.asarray(SPECIES_T1)[species] == t) | (jnp.asarray(SPECIES_T2)[species] == t)


def speed_of(state: EnvState, s: int) -> jax.Array:
    a = state.active[s]
    sp = state.species[s, a]
    speed = staged(jnp.asarray(BASE_STATS)[sp, SPE], state.stages[s, SPE])
    return jnp.where(state.status[s, a] == PARALYSIS, speed // 2, speed)


def alive(state: EnvState, s: int) -> jax.Array:
    return jnp.sum(state.hp[s] > 0)


def bench(active: jax.Array, j: int) -> jax.Array:
    """The ``j``-th team slot (in slot order) that is not ``active``."""
    if j == 0:
        return jnp.where(active == 0, 1, 0)
    return jnp.where(active == 2, 1, 2)


def legal_mask(state: EnvState, s: int) -> jax.Array:
    a = state.active[s]
    up = state.hp[s, a] > 0
    charging = up & (state.charge[s] > 0)
    moves = jnp.where(charging, jnp.arange(4) == state.charge[s] - 1, up)
    switches = jnp.stack([state.hp[s, bench(a, j)] > 0 for j in range(2)]) & ~charging
    return jnp.concatenate([jnp.broadcast_to(moves, (4,)), switches])


# ---- reset -----------------------------------------------------------------------------------


def reset(seed: jax.Array) -> EnvState:
    rng = seed_rng(seed)
    species = []
    for _ in range(2 * TEAM):
        rng, sp = draw_if(rng, True, len(SPECIES))
        species.append(sp)
    sp = jnp.stack(species).reshape(2, TEAM)
    return EnvState(
        species=sp,
        moves=jnp.asarray(SPECIES_MOVES)[sp],
        hp=jnp.asarray(MAX_HP)[sp],
        status=jnp.zeros((2, TEAM), jnp.int32),
        sleep_turns=jnp.zeros((2, TEAM), jnp.int32),
        active=jnp.zeros(2, jnp.int32),
        stages=jnp.zeros((2, 5), jnp.int32),
        charge=jnp.zeros(2, jnp.int32),
        turn=i32(0),
        rng=rng,
    )


# ---- the scripted opponent -------------------------------------------------------------------


def opponent_slot(state: EnvState) -> jax.Array:
    a, fa = state.active[1], state.active[0]
    sp, foe = state.species[1, a], state.species[0, fa]
    mv = state.moves[1, a]
    effect = jnp.asarray(MOVE_EFFECT)[mv]
    p1 = jnp.asarray(MOVE_P1)[mv]
    mtype = jnp.asarray(MOVE_TYPE)[mv]
    stab = jnp.where(has_type(sp, mtype), 3, 2)
    damage_score = jnp.asarray(MOVE_POWER)[mv] * effectiveness(mtype, foe) * stab
    low_hp = state.hp[1, a] * 2 < jnp.asarray(MAX_HP)[sp]
    status_score = jnp.select(
        [
            effect == E_STATUS,
            effect == E_SELF_STAGE,
            effect == E_TARGET_STAGE,
            (effect == E_HEAL) | (effect == E_REST),
        ],
        [
            jnp.where(state.status[0, fa] == 0, 500, 0),
            jnp.where(state.stages[1, p1] < 2, 300, 0),
            jnp.where(state.stages[0, p1] > -2, 200, 0),
            jnp.where(low_hp, 700, 0),
        ],
        0,
    )
    score = jnp.where(jnp.asarray(MOVE_CAT)[mv] != STATUS, damage_score, status_score)
    return jnp.where(state.charge[1] > 0, state.charge[1] - 1, jnp.argmax(score).astype(jnp.int32))


# ---- one move --------------------------------------------------------------------------------


def damage(state: EnvState, rng: jax.Array, s: int, mv: jax.Array, go: jax.Array) -> tuple:
    """The damage of move ``mv`` by side ``s`` (when ``go``), and the generator after it."""
    o = 1 - s
    sp = state.species[s, state.active[s]]
    foe_sp = state.species[o, state.active[o]]
    mtype, cat = jnp.asarray(MOVE_TYPE)[mv], jnp.asarray(MOVE_CAT)[mv]
    eff = effectiveness(mtype, foe_sp)
    hits = go & (eff != 0)
    high = jnp.asarray(MOVE_EFFECT)[mv] == E_HIGH_CRIT
    rng, r = draw_if(rng, hits, jnp.where(high, 8, 24))
    crit = r == 0
    physical = cat == PHYSICAL
    attack_stat = jnp.where(physical, ATK, SPA)
    defense_stat = jnp.where(physical, DEF, SPD)
    atk_stage = state.stages[s, attack_stat]
    def_stage = state.stages[o, defense_stat]
    atk_stage = jnp.where(crit, jnp.maximum(atk_stage, 0), atk_stage)
    def_stage = jnp.where(crit, jnp.minimum(def_stage, 0), def_stage)
    attack = staged(jnp.asarray(BASE_STATS)[sp, attack_stat], atk_stage)
    defense = staged(jnp.asarray(BASE_STATS)[foe_sp, defense_stat], def_stage)
    dmg = ((22 * jnp.asarray(MOVE_POWER)[mv] * attack) // defense) // 50 + 2
    dmg = jnp.where(crit, (dmg * 3) // 2, dmg)
    rng, roll = draw_if(rng, hits, 16)
    dmg = (dmg * (85 + roll)) // 100
    dmg = jnp.where(has_type(sp, mtype), (dmg * 3) // 2, dmg)
    dmg = (dmg * eff) // 4
    burned = state.status[s, state.active[s]] == BURN
    dmg = jnp.where(physical & burned, dmg // 2, dmg)
    return jnp.maximum(dmg, 1), eff, rng


def change_stage(stages: jax.Array, s: int, stat: jax.Array, delta: jax.Array, do: jax.Array):
    value = jnp.clip(stages[s, stat] + delta, -6, 6)
    return stages.at[s, stat].set(jnp.where(do, value, stages[s, stat]))


def use_move(state: EnvState, s: int, slot: jax.Array) -> EnvState:
    o = 1 - s
    a, fa = state.active[s], state.active[o]
    hp, status, sleep_turns, stages = state.hp, state.status, state.sleep_turns, state.stages
    rng = state.rng
    mv = state.moves[s, a, slot]
    effect = jnp.asarray(MOVE_EFFECT)[mv]
    p1, p2 = jnp.asarray(MOVE_P1)[mv], jnp.asarray(MOVE_P2)[mv]
    # sleep: a sleeping monster counts down, one at zero wakes up and acts
    asleep = status[s, a] == SLEEP
    sleeping = asleep & (sleep_turns[s, a] > 0)
    sleep_turns = sleep_turns.at[s, a].add(jnp.where(sleeping, -1, 0))
    status = status.at[s, a].set(jnp.where(asleep & ~sleeping, 0, status[s, a]))
    go = ~sleeping
    paralyzed = go & (status[s, a] == PARALYSIS)
    rng, r = draw_if(rng, paralyzed, 4)
    go = go & ~(paralyzed & (r == 0))
    starts_charging = go & (effect == E_CHARGE) & (state.charge[s] == 0)
    charge = state.charge.at[s].set(jnp.where(starts_charging, slot + 1, 0))
    go = go & ~starts_charging
    accuracy = jnp.asarray(MOVE_ACC)[mv]
    aims = go & (accuracy > 0)
    rng, r = draw_if(rng, aims, 100)
    go = go & ~(aims & (r >= accuracy))
    # damage
    attacks = go & (jnp.asarray(MOVE_CAT)[mv] != STATUS)
    dmg, eff, rng = damage(state._replace(status=status), rng, s, mv, attacks)
    dealt = jnp.where(attacks & (eff != 0), jnp.minimum(dmg, hp[o, fa]), 0)
    go = go & ~(attacks & (eff == 0))
    hp = hp.at[o, fa].add(-dealt)
    # secondary effects
    max_hp = jnp.asarray(MAX_HP)[state.species[s, a]]
    own = hp[s, a]
    own = jnp.where(go & (effect == E_DRAIN), jnp.minimum(max_hp, own + (dealt * p1) // 100), own)
    recoil = jnp.maximum(1, (dealt * p1) // 100)
    own = jnp.where(go & (effect == E_RECOIL), jnp.maximum(0, own - recoil), own)
    own = jnp.where(go & (effect == E_HEAL), jnp.minimum(max_hp, own + (max_hp * p1) // 100), own)
    rest = go & (effect == E_REST)
    own = jnp.where(rest, max_hp, own)
    hp = hp.at[s, a].set(own)
    status = status.at[s, a].set(jnp.where(rest, SLEEP, status[s, a]))
    sleep_turns = sleep_turns.at[s, a].set(jnp.where(rest, 2, sleep_turns[s, a]))
    chanced = (effect == E_STATUS) | (effect == E_TARGET_STAGE) | (effect == E_SELF_STAGE)
    chanced = go & chanced & ~((effect != E_SELF_STAGE) & (hp[o, fa] == 0))
    chance = jnp.asarray(MOVE_CHANCE)[mv]
    rolls = chanced & (chance < 100)
    rng, r = draw_if(rng, rolls, 100)
    applies = chanced & ~(rolls & (r >= chance))
    # inflict
    foe_sp = state.species[o, fa]
    immune = (p1 == BURN) & has_type(foe_sp, 1)
    inflicts = applies & (effect == E_STATUS) & (hp[o, fa] != 0) & (status[o, fa] == 0) & ~immune
    status = status.at[o, fa].set(jnp.where(inflicts, p1, status[o, fa]))
    rng, r = draw_if(rng, inflicts & (p1 == SLEEP), 3)
    sleep_turns = sleep_turns.at[o, fa].set(
        jnp.where(inflicts & (p1 == SLEEP), 1 + r, sleep_turns[o, fa])
    )
    stages = change_stage(stages, o, p1, p2, applies & (effect == E_TARGET_STAGE))
    stages = change_stage(stages, s, p1, p2, applies & (effect == E_SELF_STAGE))
    return state._replace(
        hp=hp, status=status, sleep_turns=sleep_turns, stages=stages, charge=charge, rng=rng
    )


def switch_to(state: EnvState, s: int, slot: jax.Array) -> EnvState:
    return state._replace(
        active=state.active.at[s].set(slot),
        stages=state.stages.at[s].set(0),
        charge=state.charge.at[s].set(0),
    )


def select(cond: jax.Array, a: EnvState, b: EnvState) -> EnvState:
    return jax.tree.map(lambda x, y: jnp.where(cond, x, y), a, b)


# ---- one turn --------------------------------------------------------------------------------


def replace_fainted(state: EnvState, s: int) -> EnvState:
    first_alive = jnp.argmax(state.hp[s] > 0).astype(jnp.int32)
    needs = (state.hp[s, state.active[s]] == 0) & (alive(state, s) > 0)
    return select(needs, switch_to(state, s, first_alive), state)


def act(state: EnvState, s: int, choice: jax.Array) -> EnvState:
    switched = switch_to(state, s, bench(state.active[s], 0))
    switched = select(choice == 5, switch_to(state, s, bench(state.active[s], 1)), switched)
    moved = use_move(state, s, jnp.clip(choice, 0, 3))
    up = state.hp[s, state.active[s]] > 0
    return select(choice >= 4, switched, select(up, moved, state))


def turn(state: EnvState, action: jax.Array) -> EnvState:
    """Both sides act (faster first), then burn and poison."""
    choices = [action, opponent_slot(state)]
    priority = []
    for s in range(2):
        mv = state.moves[s, state.active[s], jnp.clip(choices[s], 0, 3)]
        priority.append(jnp.where(choices[s] >= 4, SWITCH_PRIORITY, jnp.asarray(MOVE_PRIO)[mv]))
    speed0, speed1 = speed_of(state, 0), speed_of(state, 1)
    tie = (priority[0] == priority[1]) & (speed0 == speed1)
    rng, coin = draw_if(state.rng, tie, 2)
    state = state._replace(rng=rng)
    first = jnp.where(
        priority[1] != priority[0],
        (priority[1] > priority[0]).astype(jnp.int32),
        jnp.where(speed1 != speed0, (speed1 > speed0).astype(jnp.int32), coin),
    )
    agent_first = act(act(state, 0, choices[0]), 1, choices[1])
    foe_first = act(act(state, 1, choices[1]), 0, choices[0])
    state = select(first == 0, agent_first, foe_first)
    hp = state.hp
    for s in range(2):
        a = state.active[s]
        st = state.status[s, a]
        cut = jnp.where(st == BURN, 16, 8)
        loss = jnp.maximum(1, jnp.asarray(MAX_HP)[state.species[s, a]] // cut)
        hurt = (hp[s, a] > 0) & ((st == BURN) | (st == POISON))
        hp = hp.at[s, a].set(jnp.where(hurt, jnp.maximum(0, hp[s, a] - loss), hp[s, a]))
    return state._replace(hp=hp)


def step(
    state: EnvState, action: jax.Array
) -> tuple[EnvState, jax.Array, jax.Array, jax.Array, jax.Array]:
    action = jnp.asarray(action, jnp.int32)
    over = (alive(state, 0) == 0) | (alive(state, 1) == 0)
    start = state
    state = replace_fainted(state, 1)
    mask = legal_mask(state, 0)
    legal = (action >= 0) & (action < 6) & mask[jnp.clip(action, 0, 5)]
    action = jnp.where(legal, action, jnp.argmax(mask).astype(jnp.int32))
    own_before, opp_before = alive(state, 0), alive(state, 1)
    forced = state.hp[0, state.active[0]] == 0
    replaced = switch_to(
        state, 0, jnp.where(action == 5, bench(state.active[0], 1), bench(state.active[0], 0))
    )
    state = select(forced, replaced, turn(state, action))
    for s in range(2):
        fainted = state.hp[s, state.active[s]] == 0
        state = state._replace(
            stages=state.stages.at[s].set(jnp.where(fainted, 0, state.stages[s])),
            charge=state.charge.at[s].set(jnp.where(fainted, 0, state.charge[s])),
        )
    own_left, opp_left = alive(state, 0), alive(state, 1)
    reward = 0.25 * (opp_before - opp_left).astype(jnp.float32) - 0.25 * (
        own_before - own_left
    ).astype(jnp.float32)
    reward = reward + jnp.where(opp_left == 0, 1.0, 0.0) - jnp.where(own_left == 0, 1.0, 0.0)
    state = replace_fainted(state, 1)
    state = state._replace(turn=state.turn + 1)
    terminated = (own_left == 0) | (opp_left == 0)
    truncated = ~terminated & (state.turn >= TURN_CAP)
    state = select(over, start, state)
    reward = jnp.where(over, 0.0, reward).astype(jnp.float32)
    terminated = over | terminated
    truncated = ~over & truncated
    return state, observe(state), reward, terminated, truncated


# ---- observation (side 0's view) -------------------------------------------------------------


def observe(state: EnvState) -> jax.Array:
    f32 = jnp.float32
    teams = []
    for s in range(2):
        max_hp = jnp.asarray(MAX_HP)[state.species[s]]
        hp_fraction = state.hp[s].astype(f32) / max_hp.astype(f32)
        status = state.status[s].astype(f32) / f32(4)
        is_active = (jnp.arange(TEAM) == state.active[s]).astype(f32)
        teams.append(jnp.stack([hp_fraction, status, is_active], axis=1).reshape(-1))
    mine = state.species[0, state.active[0]]
    theirs = state.species[1, state.active[1]]
    t1, t2 = jnp.asarray(SPECIES_T1), jnp.asarray(SPECIES_T2)
    types = jnp.stack([t1[mine], t2[mine], t1[theirs], t2[theirs]]).astype(f32) / f32(16)
    stages = state.stages.reshape(-1).astype(f32) / f32(8)
    mv = state.moves[0, state.active[0]]
    powers = jnp.asarray(MOVE_POWER)[mv].astype(f32) / f32(256)
    move_eff = effectiveness(jnp.asarray(MOVE_TYPE)[mv], theirs).astype(f32) / f32(16)
    charge = (state.charge[0].astype(f32) / f32(4)).reshape(1)
    turn = (state.turn.astype(f32) / f32(256)).reshape(1)
    mask = legal_mask(state, 0).astype(f32)
    obs = jnp.concatenate([*teams, types, stages, powers, move_eff, charge, turn, mask])
    return obs


def to_canonical(state: EnvState) -> dict[str, jax.Array]:
    return state._asdict()


def from_canonical(fields: dict[str, jax.Array]) -> EnvState:
    return EnvState(**{name: fields[name] for name in EnvState._fields})
