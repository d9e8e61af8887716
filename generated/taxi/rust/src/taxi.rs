//! One Taxi-v4 (gymnasium 1.4.0 `toy_text/taxi.py`, `is_rainy=True`, `fickle_passenger=True`,
//! inside `TimeLimit(200)`), in the reference's names and order.
//!
//! `P[s][a]` is computed where the reference looks it up (`_build_rainy_transitions`): a move
//! has three transitions, forward with `rainy_probability` and the two lateral drifts with
//! `_rainy_lateral_probability` each (all three stay put when the forward move is blocked);
//! pickup and dropoff have one. `step` draws one `random()` for `categorical_sample` and, when
//! the passenger was in the taxi, the fickle flag is set and the taxi moved, one
//! `choice(possible_destinations)` (a choice of 3) through `Draws`.

use crate::draws::Draws;

pub const MAP: [&[u8; 11]; 7] = [
    b"+---------+",
    b"|R: | : :G|",
    b"| : | : : |",
    b"| : : : : |",
    b"| | : | : |",
    b"|Y| : |B: |",
    b"+---------+",
];
pub const LOCS: [(i32, i32); 4] = [(0, 0), (0, 4), (4, 0), (4, 3)];
pub const MAX_ROW: i32 = 4;
pub const MAX_COL: i32 = 4;
pub const RAINY_PROBABILITY: f64 = 0.8;
pub const FICKLE_PASSENGER: bool = true;
/// TimeLimit's `max_episode_steps` for Taxi-v4.
pub const MAX_EPISODE_STEPS: i32 = 200;
/// (forward, left, right) relative to each heading: south, north, east, west.
const MOVES: [[(i32, i32); 3]; 4] = [
    [(1, 0), (0, 1), (0, -1)],
    [(-1, 0), (0, -1), (0, 1)],
    [(0, 1), (-1, 0), (1, 0)],
    [(0, -1), (1, 0), (-1, 0)],
];

#[derive(Clone, Copy, Default)]
pub struct Taxi {
    /// `((taxi_row * 5 + taxi_col) * 5 + pass_loc) * 4 + dest_idx` (pass_loc 4: in the taxi).
    pub s: i32,
    /// The passenger may still change their mind once.
    pub fickle_step: bool,
    /// TimeLimit's `_elapsed_steps`.
    pub time: i32,
}

fn desc(row: i32, col: i32) -> u8 {
    MAP[row as usize][col as usize]
}

pub fn encode(taxi_row: i32, taxi_col: i32, pass_loc: i32, dest_idx: i32) -> i32 {
    ((taxi_row * 5 + taxi_col) * 5 + pass_loc) * 4 + dest_idx
}

/// (taxi_row, taxi_col, pass_loc, dest_idx).
pub fn decode(mut i: i32) -> (i32, i32, i32, i32) {
    let dest_idx = i % 4;
    i /= 4;
    let pass_loc = i % 5;
    i /= 5;
    let taxi_col = i % 5;
    i /= 5;
    (i, taxi_col, pass_loc, dest_idx)
}

fn loc_index(taxi_loc: (i32, i32)) -> Option<i32> {
    LOCS.iter().position(|&l| l == taxi_loc).map(|i| i as i32)
}

fn pickup(taxi_loc: (i32, i32), pass_idx: i32, reward: i32) -> (i32, i32) {
    if pass_idx < 4 && taxi_loc == LOCS[pass_idx as usize] {
        (4, reward)
    } else {
        (pass_idx, -10)
    }
}

fn dropoff(
    taxi_loc: (i32, i32),
    pass_idx: i32,
    dest_idx: i32,
    default_reward: i32,
) -> (i32, i32, bool) {
    if taxi_loc == LOCS[dest_idx as usize] && pass_idx == 4 {
        (dest_idx, 20, true)
    } else if let (Some(at), 4) = (loc_index(taxi_loc), pass_idx) {
        (at, default_reward, false)
    } else {
        (pass_idx, -10, false)
    }
}

fn calc_new_position(row: i32, col: i32, (dr, dc): (i32, i32)) -> (i32, i32) {
    let new_row = (row + dr).min(MAX_ROW).max(0);
    let new_col = (col + dc).min(MAX_COL).max(0);
    if dc == 1 && desc(1 + new_row, 2 * new_col) != b':' {
        return (row, col); // east wall blocks
    }
    if dc == -1 && desc(1 + new_row, 2 * new_col + 2) != b':' {
        return (row, col); // west wall blocks
    }
    (new_row, new_col)
}

/// The transitions `(probability, new state, reward, terminated)` of `action` from `s`; the
/// first `count` are used.
fn build_rainy_transitions(s: i32, action: i32) -> ([(f64, i32, i32, bool); 3], usize) {
    let (row, col, pass_idx, dest_idx) = decode(s);
    let taxi_loc = (row, col);
    let (mut left_pos, mut right_pos) = (taxi_loc, taxi_loc);
    let (mut new_row, mut new_col, mut new_pass_idx) = (row, col, pass_idx);
    let mut reward = -1;
    let mut terminated = false;
    let lateral = (1.0 - RAINY_PROBABILITY) / 2.0;
    if (action == 0 && row < MAX_ROW)
        || (action == 1 && row > 0)
        || (action == 2 && desc(1 + row, 2 * col + 2) == b':')
        || (action == 3 && desc(1 + row, 2 * col) == b':')
    {
        let (dr, dc) = MOVES[action as usize][0];
        new_row = (row + dr).min(MAX_ROW).max(0);
        new_col = (col + dc).min(MAX_COL).max(0);
        left_pos = calc_new_position(row, col, MOVES[action as usize][1]);
        right_pos = calc_new_position(row, col, MOVES[action as usize][2]);
    } else if action == 4 {
        (new_pass_idx, reward) = pickup(taxi_loc, new_pass_idx, reward);
    } else if action == 5 {
        (new_pass_idx, reward, terminated) = dropoff(taxi_loc, new_pass_idx, dest_idx, reward);
    }
    let intended_state = encode(new_row, new_col, new_pass_idx, dest_idx);
    if action <= 3 {
        let left_state = encode(left_pos.0, left_pos.1, new_pass_idx, dest_idx);
        let right_state = encode(right_pos.0, right_pos.1, new_pass_idx, dest_idx);
        let transitions = [
            (RAINY_PROBABILITY, intended_state, -1, terminated),
            (lateral, left_state, -1, terminated),
            (lateral, right_state, -1, terminated),
        ];
        (transitions, 3)
    } else {
        ([(1.0, intended_state, reward, terminated); 3], 1)
    }
}

/// `np.argmax(np.cumsum(prob_n) > u)`: the first index whose running sum (float64, left to
/// right) exceeds `u`, 0 when none does.
fn categorical_sample(prob_n: impl Iterator<Item = f64>, u: f64) -> usize {
    let mut cumulative = 0.0;
    for (i, p) in prob_n.enumerate() {
        cumulative += p;
        if cumulative > u {
            return i;
        }
    }
    0
}

impl Taxi {
    /// The reference's start distribution (a uniform cell, the passenger waiting at one of the
    /// four locations, another destination; fickle with probability 0.3) from the env's own
    /// generator (resets are compared in distribution: `[rng] mode = "sync"`).
    pub fn reset<D: Draws>(&mut self, draws: &mut D) {
        let cell = draws.integers(0, 25) as i32;
        let pass_loc = draws.integers(0, 4) as i32;
        let dest_idx = (pass_loc + draws.integers(1, 4) as i32) % 4;
        self.s = encode(cell / 5, cell % 5, pass_loc, dest_idx);
        self.fickle_step = FICKLE_PASSENGER && draws.random() < 0.3;
        self.time = 0;
    }

    /// (reward, terminated, truncated).
    pub fn step<D: Draws>(&mut self, a: i32, draws: &mut D) -> (f32, bool, bool) {
        let (transitions, count) = build_rainy_transitions(self.s, a);
        let transitions = &transitions[..count];
        let i = categorical_sample(transitions.iter().map(|t| t.0), draws.random());
        let (_p, mut s, r, t) = transitions[i];

        let (shadow_row, shadow_col, shadow_pass_loc, shadow_dest_idx) = decode(self.s);
        let (taxi_row, taxi_col, pass_loc, _) = decode(s);
        // the fickle step: the passenger was in the taxi and this step the position changed
        if FICKLE_PASSENGER
            && self.fickle_step
            && shadow_pass_loc == 4
            && (taxi_row != shadow_row || taxi_col != shadow_col)
        {
            self.fickle_step = false;
            let possible_destinations: [i32; 3] = match shadow_dest_idx {
                0 => [1, 2, 3],
                1 => [0, 2, 3],
                2 => [0, 1, 3],
                _ => [0, 1, 2],
            };
            let dest_idx = possible_destinations[draws.choice(3)];
            s = encode(taxi_row, taxi_col, pass_loc, dest_idx);
        }
        self.s = s;
        self.time += 1;
        (r as f32, t, self.time >= MAX_EPISODE_STEPS)
    }

    pub fn observe(&self, obs: &mut f32) {
        *obs = self.s as f32;
    }
}
