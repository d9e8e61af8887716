//! One FrozenLake-v1 (gymnasium 1.4.0 `toy_text/frozen_lake.py`, `map_name="8x8"`,
//! `is_slippery=True`, inside `TimeLimit(100)`), in the reference's names and order.
//!
//! `P[s][a]` is computed where the reference looks it up: from a hole or the goal one
//! transition (stay, reward 0, terminated); elsewhere the three moves `(a - 1) % 4, a,
//! (a + 1) % 4` with probabilities `fail_rate, success_rate, fail_rate`. `step` draws one
//! `random()` through `Draws` for `categorical_sample` (also from a hole or the goal, as the
//! reference does), and picks the first transition whose cumulative probability exceeds it.

use crate::draws::Draws;

pub const NROW: i32 = 8;
pub const NCOL: i32 = 8;
pub const MAP: [&[u8; 8]; 8] = [
    b"SFFFFFFF",
    b"FFFFFFFF",
    b"FFFHFFFF",
    b"FFFFFHFF",
    b"FFFHFFFF",
    b"FHHFFFHF",
    b"FHFFHFHF",
    b"FFFHFFFG",
];
pub const LEFT: i32 = 0;
pub const DOWN: i32 = 1;
pub const RIGHT: i32 = 2;
pub const UP: i32 = 3;
pub const SUCCESS_RATE: f64 = 1.0 / 3.0;
/// TimeLimit's `max_episode_steps` for FrozenLake8x8.
pub const MAX_EPISODE_STEPS: i32 = 100;

#[derive(Clone, Copy, Default)]
pub struct FrozenLake {
    /// The cell, `row * NCOL + col`.
    pub s: i32,
    /// TimeLimit's `_elapsed_steps`.
    pub time: i32,
}

fn letter(row: i32, col: i32) -> u8 {
    MAP[row as usize][col as usize]
}

fn to_s(row: i32, col: i32) -> i32 {
    row * NCOL + col
}

fn inc(mut row: i32, mut col: i32, a: i32) -> (i32, i32) {
    if a == LEFT {
        col = (col - 1).max(0);
    } else if a == DOWN {
        row = (row + 1).min(NROW - 1);
    } else if a == RIGHT {
        col = (col + 1).min(NCOL - 1);
    } else if a == UP {
        row = (row - 1).max(0);
    }
    (row, col)
}

/// (new state, reward, terminated) of moving in direction `action` from (row, col).
fn update_probability_matrix(row: i32, col: i32, action: i32) -> (i32, f32, bool) {
    let (new_row, new_col) = inc(row, col, action);
    let new_letter = letter(new_row, new_col);
    let terminated = new_letter == b'G' || new_letter == b'H';
    let reward = if new_letter == b'G' { 1.0 } else { 0.0 };
    (to_s(new_row, new_col), reward, terminated)
}

/// `np.argmax(np.cumsum(prob_n) > u)`: the first index whose running sum (float64, left to
/// right) exceeds `u`, 0 when none does.
fn categorical_sample(prob_n: &[f64], u: f64) -> usize {
    let mut cumulative = 0.0;
    for (i, p) in prob_n.iter().enumerate() {
        cumulative += p;
        if cumulative > u {
            return i;
        }
    }
    0
}

impl FrozenLake {
    /// The start cell (the only `S`; the reference's draw over one cell needs no number here).
    pub fn reset(&mut self) {
        self.s = 0;
        self.time = 0;
    }

    /// (reward, terminated, truncated).
    pub fn step<D: Draws>(&mut self, a: i32, draws: &mut D) -> (f32, bool, bool) {
        let (row, col) = (self.s / NCOL, self.s % NCOL);
        let fail_rate = (1.0 - SUCCESS_RATE) / 2.0;
        let u = draws.random(); // categorical_sample's np_random.random()
        let (s, r, t) = if matches!(letter(row, col), b'G' | b'H') {
            (self.s, 0.0, true) // the one transition (1.0, s, 0, True)
        } else {
            let moves = [(a - 1).rem_euclid(4), a, (a + 1).rem_euclid(4)];
            let prob_n = [fail_rate, SUCCESS_RATE, fail_rate];
            let i = categorical_sample(&prob_n, u);
            update_probability_matrix(row, col, moves[i])
        };
        self.s = s;
        self.time += 1;
        (r, t, self.time >= MAX_EPISODE_STEPS)
    }

    pub fn observe(&self, obs: &mut f32) {
        *obs = self.s as f32;
    }
}
