// Duel (reference/duel.py:Duel) in Rust: one environment, followed line by line.
//
// List attributes are kept as the spec's padded arrays: a deck, hand or board is read up to its
// first pad value (as the reference's `_upto`), and every list the reference rewrites (`_set`)
// is written back as its elements followed by the pad value.

use crate::draws::{Draws, Rng};

pub const DECK_SIZE: usize = 20; // L7
pub const HAND_SIZE: usize = 6; // L15 L24
pub const BOARD_SIZE: usize = 4; // L18
pub const MAX_LIFE: i32 = 15; // L7
pub const MAX_ENERGY: i32 = 5; // L12
pub const STEP_CAP: i32 = 200; // L44
pub const OBS: usize = 36;

pub const MY: usize = 0;
pub const OPP: usize = 1;

// L46: cards by number: cost, power, health (health 0 marks a spell)
const COST: [i32; 21] = [0, 1, 2, 2, 2, 1, 3, 3, 2, 3, 4, 3, 4, 5, 2, 1, 2, 2, 4, 1, 5];
const POWER: [i32; 21] = [0, 1, 2, 1, 1, 1, 3, 2, 0, 3, 5, 0, 3, 6, 0, 0, 0, 0, 0, 1, 4];
const HEALTH: [i32; 21] = [0, 1, 1, 3, 2, 1, 3, 2, 3, 1, 4, 6, 3, 6, 0, 0, 0, 0, 0, 1, 7];

#[inline]
fn idx(card: i32) -> usize {
    card.clamp(0, 20) as usize
}
#[inline]
fn cost(card: i32) -> i32 {
    COST[idx(card)]
}
#[inline]
fn power(card: i32) -> i32 {
    POWER[idx(card)]
}
#[inline]
fn is_creature(card: i32) -> bool {
    HEALTH[idx(card)] != 0
}
#[inline]
fn swift(card: i32) -> bool {
    matches!(card, 2 | 9 | 19) // L48 L55 L65
}
#[inline]
fn guard(card: i32) -> bool {
    matches!(card, 3 | 11 | 20) // L49 L57 L66
}
#[inline]
fn drain(card: i32) -> bool {
    matches!(card, 4 | 12) // L50 L58
}

/// The number of values before the first `pad` (the reference's `_upto`).
#[inline]
fn upto(values: &[i32], pad: i32) -> usize {
    values.iter().position(|&v| v == pad).unwrap_or(values.len())
}

/// The episode ended at once (the reference's `_GameOver`).
pub struct Over;
type Flow = Result<(), Over>;

/// A side's creatures as parallel lists, oldest first (the reference's `_board`).
#[derive(Clone, Copy, Default)]
struct Board {
    card: [i32; BOARD_SIZE],
    health: [i32; BOARD_SIZE],
    ready: [i32; BOARD_SIZE],
    len: usize,
}

impl Board {
    fn push(&mut self, card: i32, health: i32, ready: i32) {
        let k = self.len;
        self.card[k] = card;
        self.health[k] = health;
        self.ready[k] = ready;
        self.len += 1;
    }

    /// The creatures whose health is above 0, in order (the board closes up).
    fn alive(&self) -> Board {
        let mut out = Board::default();
        for k in 0..self.len {
            if self.health[k] > 0 {
                out.push(self.card[k], self.health[k], self.ready[k]);
            }
        }
        out
    }
}

#[derive(Clone, Copy, Default)]
pub struct Duel {
    pub my_life: i32,
    pub opp_life: i32,
    pub energy: i32,
    pub turn: i32,
    pub steps: i32,
    pub my_deck: [i32; DECK_SIZE],
    pub opp_deck: [i32; DECK_SIZE],
    pub my_hand: [i32; HAND_SIZE],
    pub opp_hand: [i32; HAND_SIZE],
    pub my_board: [i32; BOARD_SIZE],
    pub my_health: [i32; BOARD_SIZE],
    pub my_ready: [i32; BOARD_SIZE],
    pub opp_board: [i32; BOARD_SIZE],
    pub opp_health: [i32; BOARD_SIZE],
    pub opp_ready: [i32; BOARD_SIZE],
}

impl Duel {
    // ---------------------------------------------------------------- reset / step

    pub fn reset(&mut self, rng: &mut Rng) {
        // L8 L75: your deck is shuffled first, then the opponent's; first card is the top
        let mut my_deck: [i32; DECK_SIZE] = std::array::from_fn(|i| i as i32 + 1);
        let mut opp_deck: [i32; DECK_SIZE] = std::array::from_fn(|i| i as i32 + 1);
        rng.shuffle(&mut my_deck);
        rng.shuffle(&mut opp_deck);
        *self = Duel::default();
        self.my_deck = my_deck;
        self.opp_deck = opp_deck;
        self.my_life = MAX_LIFE;
        self.opp_life = MAX_LIFE;
        self.my_ready = [-1; BOARD_SIZE];
        self.opp_ready = [-1; BOARD_SIZE];
        self.energy = 0;
        self.steps = 0;
        // L8: each side draws 4 cards, you first (decks are full: no life is lost)
        for _ in 0..4 {
            let _ = self.draw(MY);
        }
        for _ in 0..4 {
            let _ = self.draw(OPP);
        }
        self.turn = 1;
        let _ = self.start_my_turn();
    }

    pub fn step<D: Draws>(&mut self, action: i32, draws: &mut D) -> (f32, bool, bool) {
        self.steps = self.steps.wrapping_add(1);
        let _ = match action {
            0..=5 => self.play_mine(action as usize, draws),
            6 => self.attack(MY),
            7 => self.end_turn(draws),
            _ => Ok(()),
        };
        let (reward, terminated) = self.outcome();
        // L44 (Q8: not when the step already ended the episode)
        let truncated = !terminated && self.steps >= STEP_CAP;
        (reward, terminated, truncated)
    }

    fn end_turn<D: Draws>(&mut self, draws: &mut D) -> Flow {
        self.opponent_turn(draws)?;
        // L39 L82: the counter has no upper limit
        self.turn = self.turn.wrapping_add(1);
        self.start_my_turn()
    }

    // ---------------------------------------------------------------- observation

    pub fn observe(&self, obs: &mut [f32]) {
        obs[0] = self.my_life.max(0) as f32;
        obs[1] = self.opp_life.max(0) as f32;
        obs[2] = self.energy as f32;
        obs[3] = self.turn as f32;
        obs[4] = upto(&self.my_deck, 0) as f32;
        obs[5] = upto(&self.opp_deck, 0) as f32;
        let hand = upto(&self.my_hand, 0);
        for k in 0..HAND_SIZE {
            obs[6 + k] = if k < hand { self.my_hand[k] as f32 } else { 0.0 };
        }
        for (s, side) in [MY, OPP].into_iter().enumerate() {
            let board = self.board(side);
            let base = 12 + s * 3 * BOARD_SIZE;
            for k in 0..BOARD_SIZE {
                let on = k < board.len;
                obs[base + k] = if on { board.card[k] as f32 } else { 0.0 };
                obs[base + BOARD_SIZE + k] = if on { board.health[k] as f32 } else { 0.0 };
                obs[base + 2 * BOARD_SIZE + k] = if on { board.ready[k] as f32 } else { 0.0 };
            }
        }
    }

    // ---------------------------------------------------------------- helpers

    fn life_mut(&mut self, side: usize) -> &mut i32 {
        if side == MY {
            &mut self.my_life
        } else {
            &mut self.opp_life
        }
    }

    fn deck_mut(&mut self, side: usize) -> &mut [i32; DECK_SIZE] {
        if side == MY {
            &mut self.my_deck
        } else {
            &mut self.opp_deck
        }
    }

    fn hand_mut(&mut self, side: usize) -> &mut [i32; HAND_SIZE] {
        if side == MY {
            &mut self.my_hand
        } else {
            &mut self.opp_hand
        }
    }

    fn board(&self, side: usize) -> Board {
        let (cards, health, ready) = if side == MY {
            (&self.my_board, &self.my_health, &self.my_ready)
        } else {
            (&self.opp_board, &self.opp_health, &self.opp_ready)
        };
        let len = upto(cards, 0);
        let h = upto(health, 0);
        let r = upto(ready, -1);
        let mut b = Board { len, ..Board::default() };
        for k in 0..len {
            b.card[k] = cards[k];
            b.health[k] = if k < h { health[k] } else { 0 };
            b.ready[k] = if k < r { ready[k] } else { 0 };
        }
        b
    }

    fn store_board(&mut self, side: usize, b: &Board) {
        let (cards, health, ready) = if side == MY {
            (&mut self.my_board, &mut self.my_health, &mut self.my_ready)
        } else {
            (&mut self.opp_board, &mut self.opp_health, &mut self.opp_ready)
        };
        for k in 0..BOARD_SIZE {
            let on = k < b.len;
            cards[k] = if on { b.card[k] } else { 0 };
            health[k] = if on { b.health[k] } else { 0 };
            ready[k] = if on { b.ready[k] } else { -1 };
        }
    }

    fn lose_life(&mut self, side: usize, amount: i32) -> Flow {
        let life = self.life_mut(side);
        *life -= amount;
        // L42: the episode ends at once (Q2)
        if *life <= 0 {
            Err(Over)
        } else {
            Ok(())
        }
    }

    fn gain_life(&mut self, side: usize, amount: i32) {
        // L32 (Q3: every life gain is capped at 15)
        let life = self.life_mut(side);
        *life = MAX_LIFE.min(*life + amount);
    }

    fn outcome(&self) -> (f32, bool) {
        if self.opp_life <= 0 {
            return (1.0, true);
        }
        if self.my_life <= 0 {
            return (-1.0, true);
        }
        (0.0, false)
    }

    // ---------------------------------------------------------------- drawing

    fn draw(&mut self, side: usize) -> Flow {
        let deck = self.deck_mut(side);
        let n = upto(deck, 0);
        // L25
        if n == 0 {
            return self.lose_life(side, 1);
        }
        // L23
        let card = deck[0];
        for k in 0..DECK_SIZE {
            deck[k] = if k + 1 < n { deck[k + 1] } else { 0 };
        }
        let hand = self.hand_mut(side);
        let h = upto(hand, 0);
        // L24 (Q9)
        if h >= HAND_SIZE {
            return Ok(());
        }
        hand[h] = card;
        for v in hand.iter_mut().skip(h + 1) {
            *v = 0;
        }
        Ok(())
    }

    // ---------------------------------------------------------------- turns

    fn start_turn(&mut self, side: usize) -> Result<i32, Over> {
        // L12 L36
        self.draw(side)?;
        let energy = self.turn.min(MAX_ENERGY);
        // L13 L36
        let mut board = self.board(side);
        for k in 0..board.len {
            board.ready[k] = 1;
        }
        self.store_board(side, &board);
        Ok(energy)
    }

    fn start_my_turn(&mut self) -> Flow {
        self.energy = self.start_turn(MY)?;
        Ok(())
    }

    fn opponent_turn<D: Draws>(&mut self, draws: &mut D) -> Flow {
        // L35-36 (Q10)
        let mut energy = self.start_turn(OPP)?;
        // L37
        loop {
            let n = upto(&self.opp_hand, 0);
            let legal = (0..n).find(|&p| self.legal(self.opp_hand[p], energy, OPP));
            let Some(p) = legal else { break };
            energy -= cost(self.opp_hand[p]);
            self.play(OPP, p, draws)?;
        }
        // L38
        self.attack(OPP)
    }

    // ---------------------------------------------------------------- playing cards

    fn legal(&self, card: i32, energy: i32, side: usize) -> bool {
        // L18
        if cost(card) > energy {
            return false;
        }
        !(is_creature(card) && self.board(side).len >= BOARD_SIZE)
    }

    fn play_mine<D: Draws>(&mut self, pos: usize, draws: &mut D) -> Flow {
        let n = upto(&self.my_hand, 0);
        // L18 L19
        if pos >= n || !self.legal(self.my_hand[pos], self.energy, MY) {
            return self.lose_life(MY, 1);
        }
        self.energy -= cost(self.my_hand[pos]);
        self.play(MY, pos, draws)
    }

    fn play<D: Draws>(&mut self, side: usize, pos: usize, draws: &mut D) -> Flow {
        let hand = self.hand_mut(side);
        let n = upto(hand, 0);
        let card = hand[pos];
        for k in pos..HAND_SIZE {
            hand[k] = if k + 1 < n { hand[k + 1] } else { 0 };
        }
        let other = 1 - side;
        if is_creature(card) {
            // L20
            let mut board = self.board(side);
            board.push(card, HEALTH[idx(card)], if swift(card) { 1 } else { 0 });
            self.store_board(side, &board);
            match card {
                5 => self.draw(side)?,             // L51
                7 => self.damage_all(other, 1),    // L53
                8 => self.gain_life(side, 3),      // L54
                _ => {}
            }
            return Ok(());
        }
        match card {
            14 => self.lose_life(other, 3)?, // L60
            15 => self.gain_life(side, 4),   // L61
            16 => {
                // L62 L76: one random() when it takes effect; heads is below 0.5
                if draws.random() < 0.5 {
                    self.lose_life(other, 4)?;
                } else {
                    self.draw(side)?;
                    self.draw(side)?;
                }
            }
            17 => {
                // L63
                let mut board = self.board(side);
                for k in 0..board.len {
                    board.ready[k] = 1;
                }
                self.store_board(side, &board);
            }
            18 => {
                // L64
                self.damage_all(side, 2);
                self.damage_all(other, 2);
            }
            _ => {}
        }
        Ok(())
    }

    fn damage_all(&mut self, side: usize, amount: i32) {
        let mut board = self.board(side);
        for k in 0..board.len {
            board.health[k] -= amount;
        }
        // L30
        let board = board.alive();
        self.store_board(side, &board);
    }

    // ---------------------------------------------------------------- attacking

    fn attack(&mut self, side: usize) -> Flow {
        let other = 1 - side;
        // L16 L38
        let mut i = 0;
        loop {
            let mut board = self.board(side);
            if i >= board.len {
                return Ok(());
            }
            if board.ready[i] == 0 {
                i += 1;
                continue;
            }
            board.ready[i] = 0;
            self.store_board(side, &board);
            let card = board.card[i];
            let power = power(card);
            let mut foes = self.board(other);
            // L28
            let target = (0..foes.len).find(|&j| guard(foes.card[j]));
            let Some(t) = target else {
                // L32 (Q4)
                if drain(card) {
                    self.gain_life(side, power);
                }
                // L31
                self.lose_life(other, power)?;
                i += 1;
                continue;
            };
            // L29
            let foe = foes.card[t];
            foes.health[t] -= power;
            board.health[i] -= POWER[idx(foe)];
            // L32 (Q5)
            if drain(card) {
                self.gain_life(side, power);
            }
            if drain(foe) {
                self.gain_life(other, POWER[idx(foe)]);
            }
            // L30
            let died = board.health[i] <= 0;
            self.store_board(side, &board.alive());
            self.store_board(other, &foes.alive());
            if !died {
                i += 1;
            }
        }
    }
}
