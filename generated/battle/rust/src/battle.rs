//! One battle (reference: battle.js), ported line by line with the reference's names.
//! Integer arithmetic throughout: every value the reference floors is non-negative, so Rust's
//! truncating `/` equals `Math.floor`; the generator is xorshift32 in `rng` (uint32, wrapping).

pub const TEAM: usize = 3;
pub const TURN_CAP: i32 = 200; // truncation: the battle is cut after this many agent steps
pub const SWITCH_PRIORITY: i32 = 7; // switching always goes before any move
pub const OBS_SIZE: usize = 48;

pub const NONE: usize = 10; // the "no second type" column of the chart

// Effectiveness times two: 0 immune, 1 not very effective, 2 neutral, 4 super effective.
// Rows: attacking type; columns: defending type (and NONE).
#[rustfmt::skip]
const CHART: [[i32; 11]; 10] = [
    //N Fi Wa Gr El Ic Fg Gd Fl Ps NONE
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

const PHYSICAL: i32 = 0;
const SPECIAL: i32 = 1;
const STATUS: i32 = 2;
// move effects
const E_NONE: i32 = 0;
const E_STATUS: i32 = 1;
const E_TARGET_STAGE: i32 = 2;
const E_SELF_STAGE: i32 = 3;
const E_HEAL: i32 = 4;
const E_DRAIN: i32 = 5;
const E_RECOIL: i32 = 6;
const E_CHARGE: i32 = 7;
const E_HIGH_CRIT: i32 = 8;
const E_REST: i32 = 9;
// statuses
const BURN: i32 = 1;
const POISON: i32 = 2;
const PARALYSIS: i32 = 3;
const SLEEP: i32 = 4;
// stat stages
const ATK: usize = 0;
const DEF: usize = 1;
const SPA: usize = 2;
const SPD: usize = 3;
const SPE: usize = 4;

/// A move: the reference's row `[name, type, category, power, accuracy, priority, effect, p1,
/// p2, chance]` without the name.
#[derive(Clone, Copy)]
struct Move {
    typ: i32,
    category: i32,
    power: i32,
    accuracy: i32, // 0: never misses
    priority: i32,
    effect: i32,
    p1: i32,
    p2: i32,
    chance: i32,
}

const fn mv(typ: i32, category: i32, power: i32, accuracy: i32, priority: i32, effect: i32, p1: i32, p2: i32, chance: i32) -> Move {
    Move { typ, category, power, accuracy, priority, effect, p1, p2, chance }
}

const A: i32 = ATK as i32;
const D: i32 = DEF as i32;
const SA: i32 = SPA as i32;
const SD: i32 = SPD as i32;
const SE: i32 = SPE as i32;

#[rustfmt::skip]
const MOVES: [Move; 50] = [
    mv(0, PHYSICAL, 40, 100, 0, E_NONE, 0, 0, 0),              // Tackle
    mv(0, PHYSICAL, 40, 100, 1, E_NONE, 0, 0, 0),              // Quick Attack
    mv(0, PHYSICAL, 85, 100, 0, E_STATUS, PARALYSIS, 0, 30),   // Body Slam
    mv(0, PHYSICAL, 70, 100, 0, E_HIGH_CRIT, 0, 0, 0),         // Slash
    mv(0, PHYSICAL, 120, 100, 0, E_RECOIL, 33, 0, 100),        // Double-Edge
    mv(0, STATUS, 0, 0, 0, E_SELF_STAGE, A, 2, 100),           // Swords Dance
    mv(0, STATUS, 0, 100, 0, E_TARGET_STAGE, A, -1, 100),      // Growl
    mv(0, STATUS, 0, 0, 0, E_HEAL, 50, 0, 100),                // Recover
    mv(1, SPECIAL, 40, 100, 0, E_STATUS, BURN, 0, 10),         // Ember
    mv(1, SPECIAL, 90, 100, 0, E_STATUS, BURN, 0, 10),         // Flamethrower
    mv(1, SPECIAL, 110, 85, 0, E_STATUS, BURN, 0, 10),         // Fire Blast
    mv(1, PHYSICAL, 50, 100, 0, E_SELF_STAGE, SE, 1, 100),     // Flame Charge
    mv(1, STATUS, 0, 85, 0, E_STATUS, BURN, 0, 100),           // Will-O-Wisp
    mv(2, SPECIAL, 40, 100, 0, E_NONE, 0, 0, 0),               // Water Gun
    mv(2, SPECIAL, 90, 100, 0, E_NONE, 0, 0, 0),               // Surf
    mv(2, SPECIAL, 110, 80, 0, E_NONE, 0, 0, 0),               // Hydro Pump
    mv(2, PHYSICAL, 40, 100, 1, E_NONE, 0, 0, 0),              // Aqua Jet
    mv(2, SPECIAL, 65, 100, 0, E_TARGET_STAGE, SE, -1, 10),    // Bubble Beam
    mv(2, STATUS, 0, 0, 0, E_SELF_STAGE, D, 1, 100),           // Withdraw
    mv(3, PHYSICAL, 45, 100, 0, E_NONE, 0, 0, 0),              // Vine Whip
    mv(3, SPECIAL, 75, 100, 0, E_DRAIN, 50, 0, 100),           // Giga Drain
    mv(3, SPECIAL, 120, 100, 0, E_CHARGE, 0, 0, 0),            // Solar Beam
    mv(3, PHYSICAL, 55, 95, 0, E_HIGH_CRIT, 0, 0, 0),          // Razor Leaf
    mv(3, STATUS, 0, 75, 0, E_STATUS, SLEEP, 0, 100),          // Sleep Powder
    mv(3, STATUS, 0, 0, 0, E_HEAL, 50, 0, 100),                // Synthesis
    mv(4, SPECIAL, 40, 100, 0, E_STATUS, PARALYSIS, 0, 10),    // Thunder Shock
    mv(4, SPECIAL, 90, 100, 0, E_STATUS, PARALYSIS, 0, 10),    // Thunderbolt
    mv(4, SPECIAL, 110, 70, 0, E_STATUS, PARALYSIS, 0, 30),    // Thunder
    mv(4, STATUS, 0, 90, 0, E_STATUS, PARALYSIS, 0, 100),      // Thunder Wave
    mv(4, SPECIAL, 50, 90, 0, E_SELF_STAGE, SA, 1, 70),        // Charge Beam
    mv(5, PHYSICAL, 40, 100, 1, E_NONE, 0, 0, 0),              // Ice Shard
    mv(5, SPECIAL, 90, 100, 0, E_NONE, 0, 0, 0),               // Ice Beam
    mv(5, SPECIAL, 110, 70, 0, E_NONE, 0, 0, 0),               // Blizzard
    mv(5, SPECIAL, 65, 100, 0, E_TARGET_STAGE, A, -1, 10),     // Aurora Beam
    mv(6, PHYSICAL, 50, 100, 0, E_HIGH_CRIT, 0, 0, 0),         // Karate Chop
    mv(6, PHYSICAL, 120, 100, 0, E_SELF_STAGE, D, -1, 100),    // Close Combat
    mv(6, PHYSICAL, 40, 100, 1, E_NONE, 0, 0, 0),              // Mach Punch
    mv(6, STATUS, 0, 0, 0, E_SELF_STAGE, A, 1, 100),           // Bulk Up
    mv(7, PHYSICAL, 100, 100, 0, E_NONE, 0, 0, 0),             // Earthquake
    mv(7, SPECIAL, 55, 95, 0, E_TARGET_STAGE, SE, -1, 100),    // Mud Shot
    mv(7, PHYSICAL, 80, 100, 0, E_CHARGE, 0, 0, 0),            // Dig
    mv(8, PHYSICAL, 35, 100, 0, E_NONE, 0, 0, 0),              // Peck
    mv(8, SPECIAL, 75, 95, 0, E_NONE, 0, 0, 0),                // Air Slash
    mv(8, PHYSICAL, 120, 100, 0, E_RECOIL, 33, 0, 100),        // Brave Bird
    mv(8, PHYSICAL, 140, 90, 0, E_CHARGE, 0, 0, 0),            // Sky Attack
    mv(9, SPECIAL, 90, 100, 0, E_TARGET_STAGE, SD, -1, 10),    // Psychic
    mv(9, STATUS, 0, 0, 0, E_SELF_STAGE, SD, 2, 100),          // Amnesia
    mv(9, STATUS, 0, 0, 0, E_REST, 0, 0, 100),                 // Rest
    mv(3, STATUS, 0, 75, 0, E_STATUS, POISON, 0, 100),         // Poison Powder
    mv(9, SPECIAL, 50, 100, 0, E_NONE, 0, 0, 0),               // Confusion
];

/// A species: `[name, type1, type2, hp, atk, def, spa, spd, spe, moves]` without the name.
struct Species {
    type1: usize,
    type2: usize,
    base: [i32; 6], // hp, atk, def, spa, spd, spe
    moves: [i32; 4],
}

#[rustfmt::skip]
const SPECIES: [Species; 12] = [
    Species { type1: 1, type2: 8, base: [78, 84, 78, 109, 85, 100], moves: [9, 42, 12, 44] },      // Cindrake
    Species { type1: 2, type2: NONE, base: [79, 83, 100, 85, 105, 78], moves: [14, 15, 18, 31] },  // Tidalon
    Species { type1: 3, type2: 9, base: [80, 82, 83, 100, 100, 80], moves: [20, 21, 23, 45] },     // Verdant
    Species { type1: 4, type2: NONE, base: [60, 90, 55, 90, 80, 110], moves: [26, 1, 28, 29] },    // Voltmouse
    Species { type1: 5, type2: 7, base: [110, 100, 80, 70, 60, 50], moves: [30, 38, 32, 47] },     // Glacierra
    Species { type1: 6, type2: NONE, base: [90, 130, 80, 65, 85, 55], moves: [35, 36, 37, 34] },   // Brawlox
    Species { type1: 7, type2: 8, base: [75, 95, 125, 45, 75, 95], moves: [40, 43, 39, 5] },       // Dunewyrm
    Species { type1: 0, type2: NONE, base: [95, 80, 105, 40, 70, 100], moves: [2, 4, 7, 6] },      // Normacow
    Species { type1: 9, type2: NONE, base: [65, 50, 45, 135, 95, 120], moves: [45, 49, 46, 25] },  // Mindrake
    Species { type1: 2, type2: 5, base: [90, 85, 80, 85, 95, 70], moves: [13, 16, 33, 17] },       // Kelpie
    Species { type1: 3, type2: NONE, base: [70, 100, 70, 60, 60, 70], moves: [19, 22, 24, 48] },   // Sproutle
    Species { type1: 0, type2: 8, base: [83, 80, 75, 70, 70, 101], moves: [41, 3, 8, 27] },        // Stormhawk
];

#[derive(Clone, Copy, Default)]
pub struct Monster {
    pub species: i32,
    pub moves: [i32; 4],
    pub hp: i32,
    pub status: i32,
    pub sleep_turns: i32,
}

#[derive(Clone, Copy, Default)]
pub struct Side {
    pub team: [Monster; TEAM],
    pub active: i32,
    pub stages: [i32; 5],
    pub charge: i32,
}

#[derive(Clone, Copy, Default)]
pub struct Battle {
    pub sides: [Side; 2],
    pub turn: i32,
    pub rng: u32,
}

// ---- randomness: xorshift32 on battle.rng ----

fn next_rng(mut x: u32) -> u32 {
    x ^= x << 13;
    x ^= x >> 17;
    x ^ (x << 5)
}

/// PCG's output hash of the seed (uint32), never 0
pub fn seed_rng(seed: u32) -> u32 {
    let mut x = seed.wrapping_mul(747796405).wrapping_add(2891336453);
    x = ((x >> ((x >> 28) + 4)) ^ x).wrapping_mul(277803737);
    x = (x >> 22) ^ x;
    if x == 0 {
        1
    } else {
        x
    }
}

// ---- derived stats ----

fn species_of(species: i32) -> &'static Species {
    &SPECIES[species as usize]
}

fn move_of(id: i32) -> &'static Move {
    &MOVES[id as usize]
}

fn max_hp(species: i32) -> i32 {
    species_of(species).base[0] + 75
}

fn base_stat(species: i32, stat: usize) -> i32 {
    species_of(species).base[1 + stat] + 20
}

/// a stat with its stage applied: stat * (2 + s) / 2 for s > 0, stat * 2 / (2 - s) below
/// (stage 0 is the stat itself: no division on the common path)
fn staged(value: i32, stage: i32) -> i32 {
    if stage > 0 {
        (value * (2 + stage)) / 2
    } else if stage < 0 {
        (value * 2) / (2 - stage)
    } else {
        value
    }
}

fn effectiveness(move_type: i32, species: i32) -> i32 {
    let sp = species_of(species);
    let row = &CHART[move_type as usize];
    row[sp.type1] * row[sp.type2] // 0..16, neutral 4
}

fn has_type(species: i32, typ: usize) -> bool {
    let sp = species_of(species);
    (sp.type1 == typ) | (sp.type2 == typ) // `|`, not `||`: no branch to mispredict
}

impl Side {
    fn mon(&self) -> &Monster {
        &self.team[self.active as usize]
    }

    fn mon_mut(&mut self) -> &mut Monster {
        &mut self.team[self.active as usize]
    }

    fn speed_of(&self) -> i32 {
        let mon = self.mon();
        let speed = staged(base_stat(mon.species, SPE), self.stages[SPE]);
        if mon.status == PARALYSIS {
            speed / 2
        } else {
            speed
        }
    }

    fn alive(&self) -> i32 {
        self.team.iter().filter(|mon| mon.hp > 0).count() as i32
    }

    /// the two team slots the active monster can switch to, in slot order
    fn bench(&self) -> [usize; 2] {
        const BENCH: [[usize; 2]; 3] = [[1, 2], [0, 2], [0, 1]]; // a table, not a branch per active
        BENCH[(self.active as usize).min(2)]
    }

    /// actions 0-3: the active monster's moves; 4, 5: switch to the first / second bench slot.
    /// Bit k of the result is mask[k] (one byte: no array on the stack to read back).
    pub fn legal_mask(&self) -> u8 {
        let mut mask = 0u8;
        let mon = self.mon();
        if mon.hp > 0 && self.charge > 0 {
            return 1 << (self.charge - 1); // locked into the move it is charging
        }
        if mon.hp > 0 {
            mask |= 0b1111;
        }
        let slots = self.bench();
        for j in 0..2 {
            if self.team[slots[j]].hp > 0 {
                mask |= 1 << (4 + j);
            }
        }
        mask
    }

    fn change_stage(&mut self, stat: i32, delta: i32) {
        let s = &mut self.stages[stat as usize];
        *s = (*s + delta).clamp(-6, 6);
    }

    fn switch_to(&mut self, slot: usize) {
        self.active = slot as i32;
        self.stages = [0; 5];
        self.charge = 0;
    }

    fn replace_fainted(&mut self) {
        if self.mon().hp > 0 {
            return;
        }
        for k in 0..TEAM {
            if self.team[k].hp > 0 {
                self.switch_to(k);
                return;
            }
        }
    }
}

fn new_monster(species: i32) -> Monster {
    Monster { species, moves: species_of(species).moves, hp: max_hp(species), status: 0, sleep_turns: 0 }
}

impl Battle {
    /// a number in [0, n): the next xorshift32 output modulo n
    fn rand(&mut self, n: u32) -> u32 {
        self.rng = next_rng(self.rng);
        self.rng % n
    }

    pub fn reset(&mut self, seed: u32) {
        self.turn = 0;
        self.rng = seed_rng(seed);
        for s in 0..2 {
            for k in 0..TEAM {
                let species = self.rand(SPECIES.len() as u32) as i32;
                self.sides[s].team[k] = new_monster(species);
            }
            let side = &mut self.sides[s];
            side.active = 0;
            side.stages = [0; 5];
            side.charge = 0;
        }
    }

    // ---- the scripted opponent ----

    /// how much the opponent likes move slot k of its active monster against the agent's
    fn move_score(&self, k: usize) -> i32 {
        let (side, target) = (&self.sides[1], &self.sides[0]);
        let mon = side.mon();
        let foe = target.mon();
        let m = move_of(mon.moves[k]);
        let effect = m.effect;
        if m.category != STATUS {
            let stab = if has_type(mon.species, m.typ as usize) { 3 } else { 2 };
            return m.power * effectiveness(m.typ, foe.species) * stab;
        }
        if effect == E_STATUS {
            return if foe.status == 0 { 500 } else { 0 };
        }
        if effect == E_SELF_STAGE {
            return if side.stages[m.p1 as usize] < 2 { 300 } else { 0 };
        }
        if effect == E_TARGET_STAGE {
            return if target.stages[m.p1 as usize] > -2 { 200 } else { 0 };
        }
        if effect == E_HEAL || effect == E_REST {
            return if mon.hp * 2 < max_hp(mon.species) { 700 } else { 0 };
        }
        0
    }

    fn opponent_slot(&self) -> usize {
        let side = &self.sides[1];
        if side.charge > 0 {
            return (side.charge - 1) as usize;
        }
        let mut best = 0;
        let mut best_score = -1;
        for k in 0..4 {
            let score = self.move_score(k);
            if score > best_score {
                best = k;
                best_score = score;
            }
        }
        best
    }

    // ---- one move ----

    fn inflict(&mut self, t: usize, status: i32) {
        let foe = self.sides[t].mon();
        if foe.hp == 0 || foe.status != 0 {
            return;
        }
        if status == BURN && has_type(foe.species, 1) {
            return; // fire types do not burn
        }
        self.sides[t].mon_mut().status = status;
        if status == SLEEP {
            let turns = 1 + self.rand(3) as i32;
            self.sides[t].mon_mut().sleep_turns = turns;
        }
    }

    fn damage(&mut self, u: usize, t: usize, m: &Move) -> i32 {
        let mon = *self.sides[u].mon();
        let foe = *self.sides[t].mon();
        let eff = effectiveness(m.typ, foe.species);
        if eff == 0 {
            return 0;
        }
        let crit = if m.effect == E_HIGH_CRIT { self.rand(8) == 0 } else { self.rand(24) == 0 };
        let attack_stat = if m.category == PHYSICAL { ATK } else { SPA };
        let defense_stat = if m.category == PHYSICAL { DEF } else { SPD };
        let mut atk_stage = self.sides[u].stages[attack_stat];
        let mut def_stage = self.sides[t].stages[defense_stat];
        if crit {
            atk_stage = atk_stage.max(0); // a critical hit ignores the attacker's drops
            def_stage = def_stage.min(0); // and the defender's boosts
        }
        let attack = staged(base_stat(mon.species, attack_stat), atk_stage);
        let defense = staged(base_stat(foe.species, defense_stat), def_stage);
        let mut dmg = ((22 * m.power * attack) / defense) / 50 + 2;
        if crit {
            dmg = (dmg * 3) / 2;
        }
        let roll = 85 + self.rand(16) as i32;
        dmg = (dmg * roll) / 100;
        if has_type(mon.species, m.typ as usize) {
            dmg = (dmg * 3) / 2;
        }
        dmg = (dmg * eff) / 4;
        if (m.category == PHYSICAL) & (mon.status == BURN) {
            dmg /= 2;
        }
        dmg.max(1)
    }

    /// what the move's effect does after (or, for status moves, instead of) its damage
    fn secondary(&mut self, u: usize, t: usize, m: &Move, dealt: i32) {
        let effect = m.effect;
        let chance = m.chance;
        let mon = self.sides[u].mon_mut();
        let max = max_hp(mon.species);
        if effect == E_DRAIN {
            mon.hp = max.min(mon.hp + (dealt * m.p1) / 100);
        } else if effect == E_RECOIL {
            mon.hp = 0.max(mon.hp - 1.max((dealt * m.p1) / 100));
        } else if effect == E_HEAL {
            mon.hp = max.min(mon.hp + (max * m.p1) / 100);
        } else if effect == E_REST {
            mon.hp = max;
            mon.status = SLEEP;
            mon.sleep_turns = 2;
        } else if effect == E_STATUS || effect == E_TARGET_STAGE || effect == E_SELF_STAGE {
            if effect != E_SELF_STAGE && self.sides[t].mon().hp == 0 {
                return;
            }
            if chance < 100 && self.rand(100) as i32 >= chance {
                return;
            }
            if effect == E_STATUS {
                self.inflict(t, m.p1);
            } else if effect == E_TARGET_STAGE {
                self.sides[t].change_stage(m.p1, m.p2);
            } else {
                self.sides[u].change_stage(m.p1, m.p2);
            }
        }
    }

    fn use_move(&mut self, s: usize, slot: usize) {
        let t = 1 - s;
        let user = &mut self.sides[s];
        let m = move_of(user.mon().moves[slot]);
        let a = user.active as usize;
        if user.team[a].status == SLEEP {
            if user.team[a].sleep_turns > 0 {
                user.team[a].sleep_turns -= 1;
                user.charge = 0;
                return;
            }
            user.team[a].status = 0; // wakes up and acts
        }
        if self.sides[s].mon().status == PARALYSIS && self.rand(4) == 0 {
            self.sides[s].charge = 0; // fully paralyzed
            return;
        }
        if m.effect == E_CHARGE && self.sides[s].charge == 0 {
            self.sides[s].charge = slot as i32 + 1; // the first turn only charges
            return;
        }
        self.sides[s].charge = 0;
        if m.accuracy > 0 && self.rand(100) as i32 >= m.accuracy {
            return; // missed
        }
        let mut dealt = 0;
        if m.category != STATUS {
            dealt = self.damage(s, t, m).min(self.sides[t].mon().hp);
            let foe = self.sides[t].mon_mut();
            if effectiveness(m.typ, foe.species) == 0 {
                return; // no effect at all
            }
            foe.hp -= dealt;
        }
        self.secondary(s, t, m, dealt);
    }

    // ---- one turn ----

    pub fn step(&mut self, action: i32) -> (f32, bool, bool) {
        if self.sides[0].alive() == 0 || self.sides[1].alive() == 0 {
            return (0.0, true, false); // the battle is already over
        }
        self.sides[1].replace_fainted();
        let mask = self.sides[0].legal_mask();
        let mut action = action;
        if !(0..6).contains(&action) || mask & (1 << action) == 0 {
            // an illegal choice becomes the first legal one
            action = if mask == 0 { 0 } else { mask.trailing_zeros() as i32 };
        }
        let own_before = self.sides[0].alive();
        let opp_before = self.sides[1].alive();
        if self.sides[0].mon().hp == 0 {
            // replacing a fainted monster costs no turn of the foe's
            let slot = self.sides[0].bench()[(action - 4) as usize];
            self.sides[0].switch_to(slot);
        } else {
            let choices = [action, self.opponent_slot() as i32];
            let mut priority = [0; 2];
            for s in 0..2 {
                priority[s] = if choices[s] >= 4 {
                    SWITCH_PRIORITY
                } else {
                    move_of(self.sides[s].mon().moves[choices[s] as usize]).priority
                };
            }
            let mut first = 0;
            if priority[1] > priority[0] {
                first = 1;
            } else if priority[1] == priority[0] {
                let speed0 = self.sides[0].speed_of();
                let speed1 = self.sides[1].speed_of();
                if speed1 > speed0 {
                    first = 1;
                } else if speed1 == speed0 {
                    first = self.rand(2) as usize;
                }
            }
            for s in [first, 1 - first] {
                if choices[s] >= 4 {
                    let slot = self.sides[s].bench()[(choices[s] - 4) as usize];
                    self.sides[s].switch_to(slot);
                } else if self.sides[s].mon().hp > 0 {
                    self.use_move(s, choices[s] as usize);
                }
            }
            // residual damage from burn and poison
            for side in self.sides.iter_mut() {
                let mon = side.mon_mut();
                if (mon.hp > 0) & ((mon.status == BURN) | (mon.status == POISON)) {
                    let max = max_hp(mon.species);
                    let cut = if mon.status == BURN { max / 16 } else { max / 8 };
                    mon.hp = 0.max(mon.hp - 1.max(cut));
                }
            }
        }
        for side in self.sides.iter_mut() {
            if side.mon().hp == 0 {
                side.stages = [0; 5];
                side.charge = 0;
            }
        }
        let own_left = self.sides[0].alive();
        let opp_left = self.sides[1].alive();
        let mut reward = 0.25 * (opp_before - opp_left) as f64 - 0.25 * (own_before - own_left) as f64;
        if opp_left == 0 {
            reward += 1.0;
        }
        if own_left == 0 {
            reward -= 1.0;
        }
        self.sides[1].replace_fainted();
        self.turn += 1;
        let terminated = own_left == 0 || opp_left == 0;
        (reward as f32, terminated, !terminated && self.turn >= TURN_CAP)
    }

    // ---- observation (side 0's view) ----

    pub fn observe(&self, obs: &mut [f32]) {
        let obs: &mut [f32; OBS_SIZE] = obs.try_into().expect("obs holds OBS_SIZE floats");
        let (me, opp) = (&self.sides[0], &self.sides[1]);
        let mut i = 0;
        for side in [me, opp] {
            for k in 0..TEAM {
                let mon = &side.team[k];
                obs[i] = hp_fraction(mon.hp, mon.species);
                obs[i + 1] = mon.status as f32 / 4.0;
                obs[i + 2] = (k as i32 == side.active) as i32 as f32; // 1 or 0, without a branch
                i += 3;
            }
        }
        let mine = me.mon();
        let theirs = opp.mon();
        obs[i] = species_of(mine.species).type1 as f32 / 16.0;
        obs[i + 1] = species_of(mine.species).type2 as f32 / 16.0;
        obs[i + 2] = species_of(theirs.species).type1 as f32 / 16.0;
        obs[i + 3] = species_of(theirs.species).type2 as f32 / 16.0;
        i += 4;
        for side in [me, opp] {
            for k in 0..5 {
                obs[i] = side.stages[k] as f32 / 8.0;
                i += 1;
            }
        }
        for k in 0..4 {
            obs[i] = POWER_OBS[mine.moves[k] as usize];
            i += 1;
        }
        for k in 0..4 {
            obs[i] = EFFECTIVENESS_OBS[mine.moves[k] as usize][theirs.species as usize];
            i += 1;
        }
        obs[i] = me.charge as f32 / 4.0;
        obs[i + 1] = self.turn as f32 / 256.0;
        i += 2;
        let mask = me.legal_mask();
        for k in 0..6 {
            obs[i] = ((mask >> k) & 1) as f32;
            i += 1;
        }
    }
}

// ---- observation tables (speed): each entry is the observe expression evaluated at compile time ----

/// the largest hp the spec allows (110 + 75); the hp fractions up to it are tabulated
const HP_TABLE: usize = 186;

/// HP_OBS[species][hp] = hp / maxHp(species), divided in f64 and stored as f32 (the JS
/// division into a Float32Array), for every hp in 0..=185
static HP_OBS: [[f32; HP_TABLE]; 12] = {
    let mut table = [[0.0f32; HP_TABLE]; 12];
    let mut s = 0;
    while s < 12 {
        let max = (SPECIES[s].base[0] + 75) as f64;
        let mut hp = 0;
        while hp < HP_TABLE {
            table[s][hp] = (hp as f64 / max) as f32;
            hp += 1;
        }
        s += 1;
    }
    table
};

/// mon.hp / maxHp(mon.species) as observe stores it: tabulated in the spec's range, divided otherwise
fn hp_fraction(hp: i32, species: i32) -> f32 {
    if (hp as u32) < HP_TABLE as u32 {
        HP_OBS[species as usize][hp as usize]
    } else {
        (hp as f64 / max_hp(species) as f64) as f32
    }
}

/// POWER_OBS[move] = MOVES[move].power / 256
static POWER_OBS: [f32; 50] = {
    let mut table = [0.0f32; 50];
    let mut m = 0;
    while m < 50 {
        table[m] = MOVES[m].power as f32 / 256.0;
        m += 1;
    }
    table
};

/// EFFECTIVENESS_OBS[move][species] = effectiveness(MOVES[move].typ, species) / 16
static EFFECTIVENESS_OBS: [[f32; 12]; 50] = {
    let mut table = [[0.0f32; 12]; 50];
    let mut m = 0;
    while m < 50 {
        let row = &CHART[MOVES[m].typ as usize];
        let mut s = 0;
        while s < 12 {
            table[m][s] = (row[SPECIES[s].type1] * row[SPECIES[s].type2]) as f32 / 16.0;
            s += 1;
        }
        m += 1;
    }
    table
};
