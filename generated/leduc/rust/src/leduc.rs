//! One game of Leduc Hold'em (rlcard 1.2.0 `games/leducholdem`, `games/limitholdem/round.py`)
//! as `references/leduc/leduc.py` plays it: the agent is player 0, and after each of its
//! actions rlcard's `RandomAgent` plays player 1 if the game is not over.
//!
//! Six cards, 0..5 = SJ HJ SQ HQ SK HK (rank = card / 2). A betting round: call, raise (at most
//! two a round, by 2 in the first and 4 in the second), fold or check; it ends after two calls
//! or checks in a row. The public card is dealt from the end of the deck after the first round.
//! The opponent's move is `np.random.choice(legal_actions)`: a `choice` of the number of legal
//! actions through `Draws`, the index into them in rlcard's order (call, raise, fold, check).

use crate::draws::Draws;

pub const CALL: i32 = 0;
pub const RAISE: i32 = 1;
pub const FOLD: i32 = 2;
pub const CHECK: i32 = 3;
pub const NO_CARD: i32 = -1;
pub const DECK: usize = 6;
pub const BIG_BLIND: i32 = 2;
pub const RAISES_PER_ROUND: i32 = 2;
pub const OBS_SIZE: usize = 36;

#[derive(Clone, Copy)]
pub struct Leduc {
    /// Cards left to deal, bottom first, then NO_CARD.
    pub deck: [i32; DECK],
    /// The agent's card, the opponent's.
    pub hands: [i32; 2],
    /// The public card, NO_CARD in the first round.
    pub public: i32,
    /// Chips each player put in during finished rounds.
    pub banked: i32,
    /// Chips each player put in during this round.
    pub raised: [i32; 2],
    pub have_raised: i32,
    pub not_raise_num: i32,
    /// Finished rounds (2: the game is over).
    pub round_counter: i32,
    /// Who folded (-1: nobody); not canonical (a fold ends the game).
    pub folded: i32,
}

impl Default for Leduc {
    fn default() -> Self {
        Leduc {
            deck: [NO_CARD; DECK],
            hands: [0; 2],
            public: NO_CARD,
            banked: 0,
            raised: [0; 2],
            have_raised: 0,
            not_raise_num: 0,
            round_counter: 0,
            folded: -1,
        }
    }
}

fn rank(card: i32) -> i32 {
    card.div_euclid(2)
}

impl Leduc {
    fn raise_amount(&self) -> i32 {
        if self.round_counter >= 1 {
            2 * BIG_BLIND
        } else {
            BIG_BLIND
        }
    }

    /// rlcard's legal actions of `player`, as flags in its order: call, raise, fold, check.
    fn legal(&self, player: usize) -> [bool; 4] {
        let top = self.raised[0].max(self.raised[1]);
        let mine = self.raised[player];
        [
            mine != top,
            self.have_raised < RAISES_PER_ROUND,
            true,
            mine >= top,
        ]
    }

    pub fn is_over(&self) -> bool {
        self.folded >= 0 || self.round_counter >= 2
    }

    /// One legal action of `player`, then the end of the round if it ends (the public card
    /// dealt after the first).
    fn act(&mut self, player: usize, action: i32) {
        let top = self.raised[0].max(self.raised[1]);
        if action == CALL {
            self.raised[player] = top;
            self.not_raise_num += 1;
        } else if action == RAISE {
            self.raised[player] = top + self.raise_amount();
            self.not_raise_num = 1;
            self.have_raised += 1;
        } else if action == FOLD {
            self.folded = player as i32;
        } else if action == CHECK {
            self.not_raise_num += 1;
        }
        if self.not_raise_num >= 2 {
            if self.round_counter == 0 {
                let left = self.deck.iter().filter(|&&c| c >= 0).count();
                let top_of_deck = left.saturating_sub(1);
                self.public = self.deck[top_of_deck];
                self.deck[top_of_deck] = NO_CARD;
            }
            self.banked += self.raised[0];
            self.raised = [0, 0];
            self.have_raised = 0;
            self.not_raise_num = 0;
            self.round_counter += 1;
        }
    }

    /// Player 0's payoff in big blinds (rlcard's judger: fold, then a pair with the public
    /// card, then the higher rank; a tie splits the pot).
    fn payoff(&self) -> f32 {
        let chips = [self.banked + self.raised[0], self.banked + self.raised[1]];
        let pot = (chips[0] + chips[1]) as f32;
        let ranks = [rank(self.hands[0]), rank(self.hands[1])];
        let public = rank(self.public);
        let pairs = [ranks[0] == public, ranks[1] == public];
        let wins_0 = if self.folded >= 0 {
            self.folded == 1
        } else if pairs[0] || pairs[1] {
            pairs[0]
        } else {
            ranks[0] >= ranks[1]
        };
        let split = self.folded < 0 && !pairs[0] && !pairs[1] && ranks[0] == ranks[1];
        let winners = if split { 2.0 } else { 1.0 };
        let won = if wins_0 { pot / winners } else { 0.0 };
        (won - chips[0] as f32) / BIG_BLIND as f32
    }

    /// rlcard's `RandomAgent` for player 1: a uniform choice among its legal actions.
    fn opponent<D: Draws>(&mut self, draws: &mut D) {
        if self.is_over() {
            return;
        }
        let ok = self.legal(1);
        let (mut legal_actions, mut n) = ([FOLD; 4], 0);
        for a in 0..4 {
            if ok[a as usize] {
                legal_actions[n] = a;
                n += 1;
            }
        }
        self.act(1, legal_actions[draws.choice(n)]);
    }

    /// (reward, terminated, truncated).
    pub fn step<D: Draws>(&mut self, action: i32, draws: &mut D) -> (f32, bool, bool) {
        let ok = self.legal(0);
        // rlcard's _decode_action: an illegal action is played as check, else fold
        let action = if (0..4).contains(&action) && ok[action as usize] {
            action
        } else if ok[CHECK as usize] {
            CHECK
        } else {
            FOLD
        };
        self.act(0, action);
        self.opponent(draws);
        let over = self.is_over();
        let reward = if over { self.payoff() } else { 0.0 };
        (reward, over, false)
    }

    /// A deal from the env's own generator (resets are compared in distribution): a shuffled
    /// deck, a card each dealt from its end, the blinds with the small blind (who acts first)
    /// chosen at random, and the opponent's first action when it is first; dealt again while
    /// the opponent folds before the agent's first action, as the reference's adapter does.
    pub fn reset<D: Draws>(&mut self, draws: &mut D) {
        loop {
            let mut cards = [0, 1, 2, 3, 4, 5];
            draws.shuffle(&mut cards);
            let small = draws.integers(0, 2) as usize;
            *self = Leduc::default();
            self.deck[..4].copy_from_slice(&cards[..4]);
            self.hands = [cards[5], cards[4]];
            self.raised = if small == 0 { [1, 2] } else { [2, 1] };
            if small == 1 {
                self.opponent(draws);
            }
            if !self.is_over() {
                return;
            }
        }
    }

    /// rlcard's encoding for player 0: hand rank, public rank, own chips, the other's chips.
    pub fn observe(&self, obs: &mut [f32]) {
        obs.fill(0.0);
        let mut set = |i: i32| {
            if (0..OBS_SIZE as i32).contains(&i) {
                obs[i as usize] = 1.0;
            }
        };
        set(rank(self.hands[0]));
        if self.public >= 0 {
            set(3 + rank(self.public));
        }
        set(6 + self.banked + self.raised[0]);
        set(21 + self.banked + self.raised[1]);
    }
}
