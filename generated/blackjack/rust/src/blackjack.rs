//! One game of Blackjack-v1 (gymnasium 1.4.0 `toy_text/blackjack.py`, `natural=True`,
//! `sab=False`), in the reference's names and order.
//!
//! Cards come from an infinite deck: `draw_card` is the reference's `np_random.choice(deck)`, a
//! choice among 13 through `Draws` (the RNG tape under verification, the env's own `Rng`
//! otherwise). A hand is a list on the reference; here it is `HAND` slots, the cards first and
//! then 0 (no card has value 0), and the list ends at the first 0, as the spec's `pad = 0` says.

use crate::draws::Draws;

pub const HAND: usize = 24;
pub const OBS_SIZE: usize = 3;
/// 1 = Ace, 2-10 = number cards, Jack/Queen/King = 10.
pub const DECK: [i32; 13] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 10, 10, 10];
/// Pay 1.5 for a winning natural (the reference's `natural`).
pub const NATURAL: bool = true;
/// Sutton and Barto's rule (overrides `NATURAL`).
pub const SAB: bool = false;

#[derive(Clone, Copy)]
pub struct Blackjack {
    pub player: [i32; HAND],
    pub dealer: [i32; HAND],
}

impl Default for Blackjack {
    fn default() -> Self {
        Blackjack {
            player: [0; HAND],
            dealer: [0; HAND],
        }
    }
}

/// The cards of a hand: the slots before the first 0.
fn cards(hand: &[i32; HAND]) -> &[i32] {
    let len = hand.iter().position(|&c| c == 0).unwrap_or(HAND);
    &hand[..len]
}

/// `hand.append(card)`; a full hand (never reached in play) keeps its cards.
fn append(hand: &mut [i32; HAND], card: i32) {
    let len = cards(hand).len();
    if len < HAND {
        hand[len] = card;
    }
}

fn cmp(a: i32, b: i32) -> f32 {
    (a > b) as i32 as f32 - ((a < b) as i32 as f32)
}

#[track_caller]
fn draw_card<D: Draws>(draws: &mut D) -> i32 {
    DECK[draws.choice(DECK.len())]
}

fn usable_ace(hand: &[i32; HAND]) -> bool {
    let hand = cards(hand);
    hand.contains(&1) && hand.iter().sum::<i32>() + 10 <= 21
}

fn sum_hand(hand: &[i32; HAND]) -> i32 {
    let total = cards(hand).iter().sum::<i32>();
    if usable_ace(hand) {
        total + 10
    } else {
        total
    }
}

fn is_bust(hand: &[i32; HAND]) -> bool {
    sum_hand(hand) > 21
}

fn score(hand: &[i32; HAND]) -> i32 {
    if is_bust(hand) {
        0
    } else {
        sum_hand(hand)
    }
}

fn is_natural(hand: &[i32; HAND]) -> bool {
    let hand = cards(hand);
    hand.len() == 2 && hand.contains(&1) && hand.contains(&10)
}

impl Blackjack {
    /// Two cards each, the dealer's first, from the env's own generator (resets are compared
    /// in distribution: `[rng] mode = "sync"`).
    pub fn reset<D: Draws>(&mut self, draws: &mut D) {
        *self = Blackjack::default();
        self.dealer[0] = draw_card(draws);
        self.dealer[1] = draw_card(draws);
        self.player[0] = draw_card(draws);
        self.player[1] = draw_card(draws);
    }

    /// (reward, terminated, truncated); there is no time limit.
    pub fn step<D: Draws>(&mut self, action: i32, draws: &mut D) -> (f32, bool, bool) {
        let terminated;
        let mut reward;
        if action != 0 {
            // hit: add a card to the player's hand
            append(&mut self.player, draw_card(draws));
            if is_bust(&self.player) {
                terminated = true;
                reward = -1.0;
            } else {
                terminated = false;
                reward = 0.0;
            }
        } else {
            // stick: play out the dealer's hand, and score
            terminated = true;
            while sum_hand(&self.dealer) < 17 && cards(&self.dealer).len() < HAND {
                append(&mut self.dealer, draw_card(draws));
            }
            reward = cmp(score(&self.player), score(&self.dealer));
            if SAB && is_natural(&self.player) && !is_natural(&self.dealer) {
                reward = 1.0;
            } else if !SAB && NATURAL && is_natural(&self.player) && reward == 1.0 {
                reward = 1.5;
            }
        }
        (reward, terminated, false)
    }

    /// (player's sum, dealer's showing card, usable ace) as floats.
    pub fn observe(&self, obs: &mut [f32]) {
        obs[0] = sum_hand(&self.player) as f32;
        obs[1] = self.dealer[0] as f32;
        obs[2] = usable_ace(&self.player) as i32 as f32;
    }
}
