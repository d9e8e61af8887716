// A turn-based monster battle: two teams of three, the agent (side 0) against a scripted
// opponent (side 1). Written for envforge as a JavaScript reference; see README.md.
//
// Everything is integer arithmetic on plain JS numbers (exact below 2^53); the generator is
// xorshift32 carried in battle.rng, so a port replays every draw bit for bit.
"use strict";

const TYPES = ["normal", "fire", "water", "grass", "electric", "ice", "fighting", "ground", "flying", "psychic"];
const NONE = 10; // the "no second type" column of the chart: neutral against everything

// Effectiveness times two: 0 immune, 1 not very effective, 2 neutral, 4 super effective.
// Rows: attacking type; columns: defending type (and NONE).
const CHART = [
  //N  Fi Wa Gr El Ic Fg Gd Fl Ps NONE
  [2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2], // normal
  [2, 1, 1, 4, 2, 4, 2, 2, 2, 2, 2], // fire
  [2, 4, 1, 1, 2, 2, 2, 4, 2, 2, 2], // water
  [2, 1, 4, 1, 2, 2, 2, 4, 1, 2, 2], // grass
  [2, 2, 4, 1, 1, 2, 2, 0, 4, 2, 2], // electric
  [2, 1, 1, 4, 2, 1, 2, 4, 4, 2, 2], // ice
  [4, 2, 2, 2, 2, 4, 2, 2, 1, 1, 2], // fighting
  [2, 4, 2, 1, 4, 2, 2, 2, 0, 2, 2], // ground
  [2, 2, 2, 4, 1, 2, 4, 2, 2, 2, 2], // flying
  [2, 2, 2, 2, 2, 2, 4, 2, 2, 1, 2], // psychic
];

const PHYSICAL = 0, SPECIAL = 1, STATUS = 2;
// move effects
const E_NONE = 0, E_STATUS = 1, E_TARGET_STAGE = 2, E_SELF_STAGE = 3, E_HEAL = 4, E_DRAIN = 5;
const E_RECOIL = 6, E_CHARGE = 7, E_HIGH_CRIT = 8, E_REST = 9;
// statuses
const BURN = 1, POISON = 2, PARALYSIS = 3, SLEEP = 4;
// stat stages
const ATK = 0, DEF = 1, SPA = 2, SPD = 3, SPE = 4;

// [name, type, category, power, accuracy (0: never misses), priority, effect, p1, p2, chance]
const MOVES = [
  ["Tackle", 0, PHYSICAL, 40, 100, 0, E_NONE, 0, 0, 0],
  ["Quick Attack", 0, PHYSICAL, 40, 100, 1, E_NONE, 0, 0, 0],
  ["Body Slam", 0, PHYSICAL, 85, 100, 0, E_STATUS, PARALYSIS, 0, 30],
  ["Slash", 0, PHYSICAL, 70, 100, 0, E_HIGH_CRIT, 0, 0, 0],
  ["Double-Edge", 0, PHYSICAL, 120, 100, 0, E_RECOIL, 33, 0, 100],
  ["Swords Dance", 0, STATUS, 0, 0, 0, E_SELF_STAGE, ATK, 2, 100],
  ["Growl", 0, STATUS, 0, 100, 0, E_TARGET_STAGE, ATK, -1, 100],
  ["Recover", 0, STATUS, 0, 0, 0, E_HEAL, 50, 0, 100],
  ["Ember", 1, SPECIAL, 40, 100, 0, E_STATUS, BURN, 0, 10],
  ["Flamethrower", 1, SPECIAL, 90, 100, 0, E_STATUS, BURN, 0, 10],
  ["Fire Blast", 1, SPECIAL, 110, 85, 0, E_STATUS, BURN, 0, 10],
  ["Flame Charge", 1, PHYSICAL, 50, 100, 0, E_SELF_STAGE, SPE, 1, 100],
  ["Will-O-Wisp", 1, STATUS, 0, 85, 0, E_STATUS, BURN, 0, 100],
  ["Water Gun", 2, SPECIAL, 40, 100, 0, E_NONE, 0, 0, 0],
  ["Surf", 2, SPECIAL, 90, 100, 0, E_NONE, 0, 0, 0],
  ["Hydro Pump", 2, SPECIAL, 110, 80, 0, E_NONE, 0, 0, 0],
  ["Aqua Jet", 2, PHYSICAL, 40, 100, 1, E_NONE, 0, 0, 0],
  ["Bubble Beam", 2, SPECIAL, 65, 100, 0, E_TARGET_STAGE, SPE, -1, 10],
  ["Withdraw", 2, STATUS, 0, 0, 0, E_SELF_STAGE, DEF, 1, 100],
  ["Vine Whip", 3, PHYSICAL, 45, 100, 0, E_NONE, 0, 0, 0],
  ["Giga Drain", 3, SPECIAL, 75, 100, 0, E_DRAIN, 50, 0, 100],
  ["Solar Beam", 3, SPECIAL, 120, 100, 0, E_CHARGE, 0, 0, 0],
  ["Razor Leaf", 3, PHYSICAL, 55, 95, 0, E_HIGH_CRIT, 0, 0, 0],
  ["Sleep Powder", 3, STATUS, 0, 75, 0, E_STATUS, SLEEP, 0, 100],
  ["Synthesis", 3, STATUS, 0, 0, 0, E_HEAL, 50, 0, 100],
  ["Thunder Shock", 4, SPECIAL, 40, 100, 0, E_STATUS, PARALYSIS, 0, 10],
  ["Thunderbolt", 4, SPECIAL, 90, 100, 0, E_STATUS, PARALYSIS, 0, 10],
  ["Thunder", 4, SPECIAL, 110, 70, 0, E_STATUS, PARALYSIS, 0, 30],
  ["Thunder Wave", 4, STATUS, 0, 90, 0, E_STATUS, PARALYSIS, 0, 100],
  ["Charge Beam", 4, SPECIAL, 50, 90, 0, E_SELF_STAGE, SPA, 1, 70],
  ["Ice Shard", 5, PHYSICAL, 40, 100, 1, E_NONE, 0, 0, 0],
  ["Ice Beam", 5, SPECIAL, 90, 100, 0, E_NONE, 0, 0, 0],
  ["Blizzard", 5, SPECIAL, 110, 70, 0, E_NONE, 0, 0, 0],
  ["Aurora Beam", 5, SPECIAL, 65, 100, 0, E_TARGET_STAGE, ATK, -1, 10],
  ["Karate Chop", 6, PHYSICAL, 50, 100, 0, E_HIGH_CRIT, 0, 0, 0],
  ["Close Combat", 6, PHYSICAL, 120, 100, 0, E_SELF_STAGE, DEF, -1, 100],
  ["Mach Punch", 6, PHYSICAL, 40, 100, 1, E_NONE, 0, 0, 0],
  ["Bulk Up", 6, STATUS, 0, 0, 0, E_SELF_STAGE, ATK, 1, 100],
  ["Earthquake", 7, PHYSICAL, 100, 100, 0, E_NONE, 0, 0, 0],
  ["Mud Shot", 7, SPECIAL, 55, 95, 0, E_TARGET_STAGE, SPE, -1, 100],
  ["Dig", 7, PHYSICAL, 80, 100, 0, E_CHARGE, 0, 0, 0],
  ["Peck", 8, PHYSICAL, 35, 100, 0, E_NONE, 0, 0, 0],
  ["Air Slash", 8, SPECIAL, 75, 95, 0, E_NONE, 0, 0, 0],
  ["Brave Bird", 8, PHYSICAL, 120, 100, 0, E_RECOIL, 33, 0, 100],
  ["Sky Attack", 8, PHYSICAL, 140, 90, 0, E_CHARGE, 0, 0, 0],
  ["Psychic", 9, SPECIAL, 90, 100, 0, E_TARGET_STAGE, SPD, -1, 10],
  ["Amnesia", 9, STATUS, 0, 0, 0, E_SELF_STAGE, SPD, 2, 100],
  ["Rest", 9, STATUS, 0, 0, 0, E_REST, 0, 0, 100],
  ["Poison Powder", 3, STATUS, 0, 75, 0, E_STATUS, POISON, 0, 100],
  ["Confusion", 9, SPECIAL, 50, 100, 0, E_NONE, 0, 0, 0],
];

// [name, type1, type2, hp, atk, def, spa, spd, spe, moves]
const SPECIES = [
  ["Cindrake", 1, 8, 78, 84, 78, 109, 85, 100, [9, 42, 12, 44]],
  ["Tidalon", 2, NONE, 79, 83, 100, 85, 105, 78, [14, 15, 18, 31]],
  ["Verdant", 3, 9, 80, 82, 83, 100, 100, 80, [20, 21, 23, 45]],
  ["Voltmouse", 4, NONE, 60, 90, 55, 90, 80, 110, [26, 1, 28, 29]],
  ["Glacierra", 5, 7, 110, 100, 80, 70, 60, 50, [30, 38, 32, 47]],
  ["Brawlox", 6, NONE, 90, 130, 80, 65, 85, 55, [35, 36, 37, 34]],
  ["Dunewyrm", 7, 8, 75, 95, 125, 45, 75, 95, [40, 43, 39, 5]],
  ["Normacow", 0, NONE, 95, 80, 105, 40, 70, 100, [2, 4, 7, 6]],
  ["Mindrake", 9, NONE, 65, 50, 45, 135, 95, 120, [45, 49, 46, 25]],
  ["Kelpie", 2, 5, 90, 85, 80, 85, 95, 70, [13, 16, 33, 17]],
  ["Sproutle", 3, NONE, 70, 100, 70, 60, 60, 70, [19, 22, 24, 48]],
  ["Stormhawk", 0, 8, 83, 80, 75, 70, 70, 101, [41, 3, 8, 27]],
];

const TEAM = 3;
const TURN_CAP = 200; // truncation: the battle is cut after this many agent steps
const SWITCH_PRIORITY = 7; // switching always goes before any move
const OBS_SIZE = 48;

// ---- randomness: xorshift32 on battle.rng ----------------------------------------------

function nextRng(x) {
  x = (x ^ (x << 13)) >>> 0;
  x = (x ^ (x >>> 17)) >>> 0;
  return (x ^ (x << 5)) >>> 0;
}

// a number in [0, n): the next xorshift32 output modulo n
function rand(battle, n) {
  battle.rng = nextRng(battle.rng);
  return battle.rng % n;
}

// PCG's output hash of the seed (uint32), never 0
function seedRng(seed) {
  let x = (Math.imul(seed >>> 0, 747796405) + 2891336453) >>> 0;
  x = Math.imul(((x >>> ((x >>> 28) + 4)) ^ x) >>> 0, 277803737) >>> 0;
  x = ((x >>> 22) ^ x) >>> 0;
  return x === 0 ? 1 : x;
}

// ---- derived stats ---------------------------------------------------------------------

function maxHp(species) {
  return SPECIES[species][3] + 75;
}

function baseStat(species, stat) {
  return SPECIES[species][4 + stat] + 20;
}

// a stat with its stage applied: stat * (2 + s) / 2 for s > 0, stat * 2 / (2 - s) below
function staged(value, stage) {
  const num = stage > 0 ? 2 + stage : 2;
  const den = stage < 0 ? 2 - stage : 2;
  return Math.floor((value * num) / den);
}

function effectiveness(moveType, species) {
  const sp = SPECIES[species];
  return CHART[moveType][sp[1]] * CHART[moveType][sp[2]]; // 0..16, neutral 4
}

function speedOf(side) {
  const mon = side.team[side.active];
  const speed = staged(baseStat(mon.species, SPE), side.stages[SPE]);
  return mon.status === PARALYSIS ? Math.floor(speed / 2) : speed;
}

function alive(side) {
  let count = 0;
  for (const mon of side.team) if (mon.hp > 0) count += 1;
  return count;
}

// the two team slots the active monster can switch to, in slot order
function bench(side) {
  const out = [];
  for (let k = 0; k < TEAM; k++) if (k !== side.active) out.push(k);
  return out;
}

// actions 0-3: the active monster's moves; 4, 5: switch to the first / second bench slot
function legalMask(side) {
  const mask = [0, 0, 0, 0, 0, 0];
  const mon = side.team[side.active];
  if (mon.hp > 0 && side.charge > 0) {
    mask[side.charge - 1] = 1; // locked into the move it is charging
    return mask;
  }
  if (mon.hp > 0) for (let k = 0; k < 4; k++) mask[k] = 1;
  const slots = bench(side);
  for (let j = 0; j < 2; j++) if (side.team[slots[j]].hp > 0) mask[4 + j] = 1;
  return mask;
}

// ---- reset -----------------------------------------------------------------------------

function newMonster(species) {
  return { species, moves: SPECIES[species][9].slice(), hp: maxHp(species), status: 0, sleepTurns: 0 };
}

function reset(seed) {
  const battle = { sides: [], turn: 0, rng: seedRng(seed) };
  for (let s = 0; s < 2; s++) {
    const team = [];
    for (let k = 0; k < TEAM; k++) team.push(newMonster(rand(battle, SPECIES.length)));
    battle.sides.push({ team, active: 0, stages: [0, 0, 0, 0, 0], charge: 0 });
  }
  return battle;
}

// ---- the scripted opponent -------------------------------------------------------------

// how much the opponent likes move slot k of its active monster against the agent's
function moveScore(side, target, k) {
  const mon = side.team[side.active];
  const foe = target.team[target.active];
  const m = MOVES[mon.moves[k]];
  const effect = m[6];
  if (m[2] !== STATUS) {
    const sp = SPECIES[mon.species];
    const stab = m[1] === sp[1] || m[1] === sp[2] ? 3 : 2;
    return m[3] * effectiveness(m[1], foe.species) * stab;
  }
  if (effect === E_STATUS) return foe.status === 0 ? 500 : 0;
  if (effect === E_SELF_STAGE) return side.stages[m[7]] < 2 ? 300 : 0;
  if (effect === E_TARGET_STAGE) return target.stages[m[7]] > -2 ? 200 : 0;
  if (effect === E_HEAL || effect === E_REST) return mon.hp * 2 < maxHp(mon.species) ? 700 : 0;
  return 0;
}

function opponentSlot(battle) {
  const side = battle.sides[1];
  if (side.charge > 0) return side.charge - 1;
  let best = 0;
  let bestScore = -1;
  for (let k = 0; k < 4; k++) {
    const score = moveScore(side, battle.sides[0], k);
    if (score > bestScore) {
      best = k;
      bestScore = score;
    }
  }
  return best;
}

// ---- one move --------------------------------------------------------------------------

function changeStage(side, stat, delta) {
  side.stages[stat] = Math.min(6, Math.max(-6, side.stages[stat] + delta));
}

function inflict(target, status, battle) {
  const foe = target.team[target.active];
  if (foe.hp === 0 || foe.status !== 0) return;
  const sp = SPECIES[foe.species];
  if (status === BURN && (sp[1] === 1 || sp[2] === 1)) return; // fire types do not burn
  foe.status = status;
  if (status === SLEEP) foe.sleepTurns = 1 + rand(battle, 3);
}

function damage(battle, user, target, m) {
  const mon = user.team[user.active];
  const foe = target.team[target.active];
  const eff = effectiveness(m[1], foe.species);
  if (eff === 0) return 0;
  const crit = rand(battle, m[6] === E_HIGH_CRIT ? 8 : 24) === 0;
  const attackStat = m[2] === PHYSICAL ? ATK : SPA;
  const defenseStat = m[2] === PHYSICAL ? DEF : SPD;
  let atkStage = user.stages[attackStat];
  let defStage = target.stages[defenseStat];
  if (crit) {
    atkStage = Math.max(atkStage, 0); // a critical hit ignores the attacker's drops
    defStage = Math.min(defStage, 0); // and the defender's boosts
  }
  const attack = staged(baseStat(mon.species, attackStat), atkStage);
  const defense = staged(baseStat(foe.species, defenseStat), defStage);
  let dmg = Math.floor(Math.floor((22 * m[3] * attack) / defense) / 50) + 2;
  if (crit) dmg = Math.floor((dmg * 3) / 2);
  const roll = 85 + rand(battle, 16);
  dmg = Math.floor((dmg * roll) / 100);
  const sp = SPECIES[mon.species];
  if (m[1] === sp[1] || m[1] === sp[2]) dmg = Math.floor((dmg * 3) / 2);
  dmg = Math.floor((dmg * eff) / 4);
  if (m[2] === PHYSICAL && mon.status === BURN) dmg = Math.floor(dmg / 2);
  return Math.max(dmg, 1);
}

// what the move's effect does after (or, for status moves, instead of) its damage
function secondary(battle, user, target, m, dealt) {
  const mon = user.team[user.active];
  const effect = m[6];
  const chance = m[9];
  if (effect === E_DRAIN) {
    mon.hp = Math.min(maxHp(mon.species), mon.hp + Math.floor((dealt * m[7]) / 100));
  } else if (effect === E_RECOIL) {
    mon.hp = Math.max(0, mon.hp - Math.max(1, Math.floor((dealt * m[7]) / 100)));
  } else if (effect === E_HEAL) {
    mon.hp = Math.min(maxHp(mon.species), mon.hp + Math.floor((maxHp(mon.species) * m[7]) / 100));
  } else if (effect === E_REST) {
    mon.hp = maxHp(mon.species);
    mon.status = SLEEP;
    mon.sleepTurns = 2;
  } else if (effect === E_STATUS || effect === E_TARGET_STAGE || effect === E_SELF_STAGE) {
    const foe = target.team[target.active];
    if (effect !== E_SELF_STAGE && foe.hp === 0) return;
    if (chance < 100 && rand(battle, 100) >= chance) return;
    if (effect === E_STATUS) inflict(target, m[7], battle);
    else if (effect === E_TARGET_STAGE) changeStage(target, m[7], m[8]);
    else changeStage(user, m[7], m[8]);
  }
}

function useMove(battle, s, slot) {
  const user = battle.sides[s];
  const target = battle.sides[1 - s];
  const mon = user.team[user.active];
  const m = MOVES[mon.moves[slot]];
  if (mon.status === SLEEP) {
    if (mon.sleepTurns > 0) {
      mon.sleepTurns -= 1;
      user.charge = 0;
      return;
    }
    mon.status = 0; // wakes up and acts
  }
  if (mon.status === PARALYSIS && rand(battle, 4) === 0) {
    user.charge = 0; // fully paralyzed
    return;
  }
  if (m[6] === E_CHARGE) {
    if (user.charge === 0) {
      user.charge = slot + 1; // the first turn only charges
      return;
    }
  }
  user.charge = 0;
  if (m[4] > 0 && rand(battle, 100) >= m[4]) return; // missed
  let dealt = 0;
  if (m[2] !== STATUS) {
    const foe = target.team[target.active];
    dealt = Math.min(damage(battle, user, target, m), foe.hp);
    if (effectiveness(m[1], foe.species) === 0) return; // no effect at all
    foe.hp -= dealt;
  }
  secondary(battle, user, target, m, dealt);
}

function switchTo(side, slot) {
  side.active = slot;
  side.stages = [0, 0, 0, 0, 0];
  side.charge = 0;
}

// ---- one turn --------------------------------------------------------------------------

function replaceFainted(side) {
  if (side.team[side.active].hp > 0) return;
  for (let k = 0; k < TEAM; k++) {
    if (side.team[k].hp > 0) {
      switchTo(side, k);
      return;
    }
  }
}

function step(battle, action) {
  const me = battle.sides[0];
  const opp = battle.sides[1];
  if (alive(me) === 0 || alive(opp) === 0) {
    return { reward: 0, terminated: true, truncated: false }; // the battle is already over
  }
  replaceFainted(opp);
  const mask = legalMask(me);
  if (!mask[action]) action = mask.indexOf(1); // an illegal choice becomes the first legal one
  const ownBefore = alive(me);
  const oppBefore = alive(opp);
  if (me.team[me.active].hp === 0) {
    switchTo(me, bench(me)[action - 4]); // replacing a fainted monster costs no turn of the foe's
  } else {
    const choices = [action, opponentSlot(battle)];
    const priority = choices.map((a, s) => {
      if (a >= 4) return SWITCH_PRIORITY;
      const side = battle.sides[s];
      return MOVES[side.team[side.active].moves[a]][5];
    });
    let first = 0;
    if (priority[1] > priority[0]) first = 1;
    else if (priority[1] === priority[0]) {
      const speed0 = speedOf(me);
      const speed1 = speedOf(opp);
      if (speed1 > speed0) first = 1;
      else if (speed1 === speed0) first = rand(battle, 2);
    }
    for (const s of [first, 1 - first]) {
      const side = battle.sides[s];
      if (choices[s] >= 4) switchTo(side, bench(side)[choices[s] - 4]);
      else if (side.team[side.active].hp > 0) useMove(battle, s, choices[s]);
    }
    // residual damage from burn and poison
    for (const side of battle.sides) {
      const mon = side.team[side.active];
      if (mon.hp > 0 && (mon.status === BURN || mon.status === POISON)) {
        const cut = mon.status === BURN ? 16 : 8;
        mon.hp = Math.max(0, mon.hp - Math.max(1, Math.floor(maxHp(mon.species) / cut)));
      }
    }
  }
  for (const side of battle.sides) {
    if (side.team[side.active].hp === 0) {
      side.stages = [0, 0, 0, 0, 0];
      side.charge = 0;
    }
  }
  const ownLeft = alive(me);
  const oppLeft = alive(opp);
  let reward = 0.25 * (oppBefore - oppLeft) - 0.25 * (ownBefore - ownLeft);
  if (oppLeft === 0) reward += 1;
  if (ownLeft === 0) reward -= 1;
  replaceFainted(opp);
  battle.turn += 1;
  const terminated = ownLeft === 0 || oppLeft === 0;
  return { reward, terminated, truncated: !terminated && battle.turn >= TURN_CAP };
}

// ---- observation (side 0's view) -------------------------------------------------------
// Constant scales are powers of two, so every entry but the hp fractions is exact in float32;
// an hp fraction is one division of two small integers (correctly rounded either way).

function observe(battle, obs) {
  const [me, opp] = battle.sides;
  let i = 0;
  for (const side of [me, opp]) {
    for (let k = 0; k < TEAM; k++) {
      const mon = side.team[k];
      obs[i++] = mon.hp / maxHp(mon.species);
      obs[i++] = mon.status / 4;
      obs[i++] = k === side.active ? 1 : 0;
    }
  }
  const mine = me.team[me.active];
  const theirs = opp.team[opp.active];
  obs[i++] = SPECIES[mine.species][1] / 16;
  obs[i++] = SPECIES[mine.species][2] / 16;
  obs[i++] = SPECIES[theirs.species][1] / 16;
  obs[i++] = SPECIES[theirs.species][2] / 16;
  for (const side of [me, opp]) for (let k = 0; k < 5; k++) obs[i++] = side.stages[k] / 8;
  for (let k = 0; k < 4; k++) obs[i++] = MOVES[mine.moves[k]][3] / 256;
  for (let k = 0; k < 4; k++) obs[i++] = effectiveness(MOVES[mine.moves[k]][1], theirs.species) / 16;
  obs[i++] = me.charge / 4;
  obs[i++] = battle.turn / 256;
  for (const legal of legalMask(me)) obs[i++] = legal;
  return obs;
}

// ---- explain: the turn in words, for envforge's findings ---------------------------------

function typesOf(species) {
  const sp = SPECIES[species];
  return sp[2] === NONE ? TYPES[sp[1]] : `${TYPES[sp[1]]}/${TYPES[sp[2]]}`;
}

function describeMove(user, target, slot) {
  const mon = user.team[user.active];
  const foe = target.team[target.active];
  const m = MOVES[mon.moves[slot]];
  const eff = effectiveness(m[1], foe.species);
  return (
    `${SPECIES[mon.species][0]} (${typesOf(mon.species)}) uses ${m[0]} ` +
    `(${TYPES[m[1]]}, power ${m[3]}, priority ${m[5]}) on ${SPECIES[foe.species][0]} ` +
    `(${typesOf(foe.species)}): chart ${TYPES[m[1]]} vs ${typesOf(foe.species)} = x${eff / 4}`
  );
}

// what both sides are about to do in this state with this agent action (on a copy of the
// battle envforge made for the purpose, so it may change it)
function explain(battle, action) {
  const [me, opp] = battle.sides;
  const over = alive(me) === 0 || alive(opp) === 0;
  if (!over) replaceFainted(opp);
  const mine = me.team[me.active];
  const theirs = opp.team[opp.active];
  const chart = mine.moves.map((id) => {
    const m = MOVES[id];
    return `${m[0]} (${TYPES[m[1]]}) x${effectiveness(m[1], theirs.species) / 4}`;
  });
  const parts = [
    `agent's ${SPECIES[mine.species][0]} (${typesOf(mine.species)}) faces ` +
      `${SPECIES[theirs.species][0]} (${typesOf(theirs.species)}); its moves against it: ${chart.join(", ")}`,
  ];
  if (over) return `${parts[0]}; the battle is over (nothing moves)`;
  const mask = legalMask(me);
  if (!mask[action]) action = mask.indexOf(1);
  if (mine.hp === 0 || action >= 4) {
    const slot = bench(me)[action - 4];
    parts.push(`agent switches to ${SPECIES[me.team[slot].species][0]} (${typesOf(me.team[slot].species)})`);
  } else parts.push(`agent: ${describeMove(me, opp, action)}`);
  if (mine.hp > 0) parts.push(`opponent: ${describeMove(opp, me, opponentSlot(battle))}`);
  return parts.join("; ");
}

module.exports = { reset, step, observe, explain, OBS_SIZE, MOVES, SPECIES, CHART, TYPES };
