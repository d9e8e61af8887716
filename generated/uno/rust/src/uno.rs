// One game of rlcard 1.2.0's two-player UNO, played as player 0 against rlcard's RandomAgent
// (reference/uno.py:UnoVsRandom). The names follow rlcard's (games/uno/round.py, dealer.py,
// game.py, utils.py) and the adapter's.
//
// Cards are numbered like rlcard's action ids: card = 15 * colour + trait (colours r g b y;
// traits 0-9, skip, reverse, draw_2, wild, wild_draw_4). A wild keeps the colour it was
// created with in its id (rlcard's `card.str`); the colour chosen when it is played is
// `target_color`. The colour a wild carries anywhere but the target never matters in rlcard
// (legal actions, plays and the hand encoding ignore it), so only the target's is kept.

use crate::draws::Draws;

pub const CAPACITY: usize = 108;
pub const NUM_ACTIONS: usize = 61;
/// rlcard's 4 x 4 x 15 planes for player 0, then player 0's legal-action mask.
pub const OBS: usize = 4 * 60 + NUM_ACTIONS;
pub const NO_CARD: i32 = -1;
const NUM_PLAYERS: i32 = 2;
const DRAW: i32 = 60;

const SKIP: i32 = 10;
const REVERSE: i32 = 11;
const DRAW_2: i32 = 12;
const WILD: i32 = 13;
const WILD_DRAW_4: i32 = 14;

#[inline]
fn color_of(card: i32) -> i32 {
    card / 15
}

#[inline]
fn trait_of(card: i32) -> i32 {
    card % 15
}

/// rlcard's card types: number (traits 0-9), action (skip, reverse, draw_2), wild.
#[inline]
fn is_number(card: i32) -> bool {
    trait_of(card) < 10
}

#[inline]
fn is_wild(card: i32) -> bool {
    trait_of(card) >= WILD
}

/// A Python list of cards with room for the whole deck: `cards[..len]`, in list order.
#[derive(Clone, Copy)]
pub struct Pile {
    pub cards: [i32; CAPACITY],
    pub len: usize,
}

impl Default for Pile {
    fn default() -> Self {
        Pile {
            cards: [NO_CARD; CAPACITY],
            len: 0,
        }
    }
}

impl Pile {
    pub fn as_slice(&self) -> &[i32] {
        &self.cards[..self.len]
    }

    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// `list.append` (a full pile, which the 108-card deck cannot make, keeps its cards).
    pub fn append(&mut self, card: i32) {
        if self.len < CAPACITY {
            self.cards[self.len] = card;
            self.len += 1;
        }
    }

    /// `list.pop()`: the last card, or NO_CARD from an empty list (where Python raises).
    pub fn pop(&mut self) -> i32 {
        if self.len == 0 {
            return NO_CARD;
        }
        self.len -= 1;
        self.cards[self.len]
    }

    /// `list.pop(index)`.
    fn pop_at(&mut self, index: usize) -> i32 {
        let card = self.cards[index];
        self.cards.copy_within(index + 1..self.len, index);
        self.len -= 1;
        card
    }

    /// Loads a canonical row: the cards up to the first NO_CARD (the spec's pad).
    pub fn load(&mut self, row: &[i32]) {
        self.len = 0;
        for &card in row.iter().take(CAPACITY) {
            if !(0..60).contains(&card) {
                break;
            }
            self.append(card);
        }
    }

    /// Writes the canonical row: the cards, then NO_CARD.
    pub fn store(&self, row: &mut [i32]) {
        for (i, out) in row.iter_mut().enumerate() {
            *out = if i < self.len { self.cards[i] } else { NO_CARD };
        }
    }
}

/// A list of action ids without repeats, in first-seen order (rlcard's legal actions as
/// `UnoEnv._get_legal_actions` makes them: an OrderedDict's keys).
#[derive(Clone, Copy)]
pub struct Legal {
    pub ids: [i32; NUM_ACTIONS],
    pub n: usize,
    seen: u64,
}

impl Legal {
    fn new() -> Self {
        Legal {
            ids: [0; NUM_ACTIONS],
            n: 0,
            seen: 0,
        }
    }

    fn push(&mut self, id: i32) {
        if !(0..NUM_ACTIONS as i32).contains(&id) || self.seen & (1u64 << id) != 0 {
            return;
        }
        self.seen |= 1u64 << id;
        self.ids[self.n] = id;
        self.n += 1;
    }

    /// rlcard's `WILD` or `WILD_DRAW_4` list: the four colours of a wild trait.
    fn extend_wild(&mut self, trait_: i32) {
        for color in 0..4 {
            self.push(15 * color + trait_);
        }
    }

    pub fn contains(&self, id: i32) -> bool {
        (0..NUM_ACTIONS as i32).contains(&id) && self.seen & (1u64 << id) != 0
    }

    fn is_empty(&self) -> bool {
        self.n == 0
    }
}

#[derive(Clone)]
pub struct Uno {
    // the canonical state (env.toml)
    pub deck: Pile,
    pub played: Pile,
    pub hands: [Pile; 2],
    pub target: i32,
    pub target_color: i32,
    pub direction: i32,
    // within a step only: at every state the agent acts from it is player 0's turn, nobody won
    current_player: i32,
    is_over: bool,
    winner: i32,
}

impl Default for Uno {
    fn default() -> Self {
        Uno {
            deck: Pile::default(),
            played: Pile::default(),
            hands: [Pile::default(), Pile::default()],
            target: 0,
            target_color: 0,
            direction: 1,
            current_player: 0,
            is_over: false,
            winner: -1,
        }
    }
}

impl Uno {
    /// rlcard's `utils.init_deck`: per colour one 0, two each of 1-9, skip, reverse, draw_2,
    /// then one wild and one wild_draw_4.
    fn init_deck(&mut self) {
        self.deck.clear();
        for color in 0..4 {
            for num in 0..10 {
                self.deck.append(15 * color + num);
                if num != 0 {
                    self.deck.append(15 * color + num);
                }
            }
            for action in SKIP..=DRAW_2 {
                self.deck.append(15 * color + action);
                self.deck.append(15 * color + action);
            }
            for wild in WILD..=WILD_DRAW_4 {
                self.deck.append(15 * color + wild);
            }
        }
    }

    /// `dealer.shuffle()`: `np_random.shuffle(deck)`.
    #[track_caller]
    fn shuffle<D: Draws>(&mut self, draws: &mut D) {
        let len = self.deck.len;
        draws.shuffle(&mut self.deck.cards[..len]);
    }

    /// `dealer.deal_cards(players[player], num)`.
    fn deal_cards(&mut self, player: usize, num: usize) {
        for _ in 0..num {
            if self.deck.len == 0 {
                return; // rlcard pops from an empty list (IndexError); valid states never do
            }
            let card = self.deck.pop();
            self.hands[player].append(card);
        }
    }

    /// `round.replace_deck()`: the played cards onto the deck, the deck shuffled.
    #[track_caller]
    fn replace_deck<D: Draws>(&mut self, draws: &mut D) {
        for i in 0..self.played.len {
            let card = self.played.cards[i];
            self.deck.append(card);
        }
        self.shuffle(draws);
        self.played.clear();
    }

    fn next_player(&self, current: i32, direction: i32) -> i32 {
        (current + direction).rem_euclid(NUM_PLAYERS)
    }

    /// `round.get_legal_actions(players, player_id)`, without repeats.
    pub fn get_legal_actions(&self, player_id: usize) -> Legal {
        let mut wild_flag = false;
        let mut wild_draw_4_flag = false;
        let mut legal_actions = Legal::new();
        let mut wild_4_actions = Legal::new();
        let target_trait = trait_of(self.target);
        for &card in self.hands[player_id].as_slice() {
            if is_wild(card) {
                if trait_of(card) == WILD_DRAW_4 {
                    if !wild_draw_4_flag {
                        wild_draw_4_flag = true;
                        wild_4_actions.extend_wild(WILD_DRAW_4);
                    }
                } else if !wild_flag {
                    wild_flag = true;
                    legal_actions.extend_wild(WILD);
                }
            // a wild target's trait is no card's in a hand here, so one test serves both of
            // rlcard's branches (wild target: colour only; else colour or trait)
            } else if color_of(card) == self.target_color || trait_of(card) == target_trait {
                legal_actions.push(card);
            }
        }
        if legal_actions.is_empty() {
            legal_actions = wild_4_actions;
        }
        if legal_actions.is_empty() {
            legal_actions.push(DRAW);
        }
        legal_actions
    }

    /// `round.proceed_round(players, action)`.
    fn proceed_round<D: Draws>(&mut self, action: i32, draws: &mut D) {
        if action == DRAW {
            self.perform_draw_action(draws);
            return;
        }
        let player = self.current_player as usize;
        let color = color_of(action);
        let trait_ = trait_of(action);
        let hand = self.hands[player].as_slice();
        // remove the corresponding card: a wild from the first of its trait, else the first copy
        let remove_index = if trait_ == WILD || trait_ == WILD_DRAW_4 {
            hand.iter().position(|&card| trait_of(card) == trait_)
        } else {
            hand.iter().position(|&card| card == action)
        };
        let Some(remove_index) = remove_index else {
            return; // not in the hand: rlcard's pop(None) raises; legal actions never do this
        };
        let card = self.hands[player].pop_at(remove_index);
        // a wild takes the colour the action names (card.color = color)
        let card_color = if is_wild(card) { color } else { color_of(card) };
        if self.hands[player].len == 0 {
            self.is_over = true;
            self.winner = self.current_player;
        }
        self.played.append(card);

        if is_number(card) {
            self.current_player = self.next_player(self.current_player, self.direction);
            self.target = card;
            self.target_color = card_color;
        } else {
            self.preform_non_number_action(card, card_color, draws);
        }
    }

    /// `round._perform_draw_action(players)`.
    fn perform_draw_action<D: Draws>(&mut self, draws: &mut D) {
        if self.deck.len == 0 {
            self.replace_deck(draws);
        }
        if self.deck.len == 0 {
            return; // rlcard pops from an empty list (IndexError); valid states never do
        }
        let card = self.deck.pop();

        if is_wild(card) {
            // draw a wild card: played at once in a random colour
            let color = draws.choice(4) as i32; // np_random.choice(UnoCard.info['color'])
            self.target = card;
            self.target_color = color;
            self.played.append(card);
            self.current_player = self.next_player(self.current_player, self.direction);
        } else if color_of(card) == self.target_color {
            // a card of the colour to follow is played at once
            if is_number(card) {
                self.target = card;
                self.target_color = color_of(card);
                self.played.append(card);
                self.current_player = self.next_player(self.current_player, self.direction);
            } else {
                self.played.append(card);
                self.preform_non_number_action(card, color_of(card), draws);
            }
        } else {
            let player = self.current_player as usize;
            self.hands[player].append(card);
            self.current_player = self.next_player(self.current_player, self.direction);
        }
    }

    /// `round._preform_non_number_action(players, card)` (rlcard's spelling).
    fn preform_non_number_action<D: Draws>(&mut self, card: i32, card_color: i32, draws: &mut D) {
        let mut current = self.current_player;
        let direction = self.direction;
        match trait_of(card) {
            REVERSE => self.direction = -direction,
            SKIP => current = self.next_player(current, direction),
            DRAW_2 => {
                if self.deck.len < 2 {
                    self.replace_deck(draws);
                }
                let victim = self.next_player(current, direction);
                self.deal_cards(victim as usize, 2);
                current = victim;
            }
            WILD_DRAW_4 => {
                if self.deck.len < 4 {
                    self.replace_deck(draws);
                }
                let victim = self.next_player(current, direction);
                self.deal_cards(victim as usize, 4);
                current = victim;
            }
            _ => {}
        }
        self.current_player = self.next_player(current, self.direction);
        self.target = card;
        self.target_color = card_color;
    }

    /// The adapter's `_opponent_turns`: rlcard's RandomAgent plays player 1's turns
    /// (`np.random.choice(list(state['legal_actions'].keys()))`).
    fn opponent_turns<D: Draws>(&mut self, draws: &mut D) {
        while self.current_player == 1 && !self.is_over {
            let legal = self.get_legal_actions(1);
            let action = legal.ids[draws.choice(legal.n)];
            self.proceed_round(action, draws);
        }
    }

    /// The adapter's reset: rlcard's `init_game` (dealer, deal, flip and perform the top card),
    /// then the random agent's first turns; dealt again while the game ends before player 0
    /// acts.
    pub fn reset<D: Draws>(&mut self, draws: &mut D) {
        loop {
            // Dealer: a new deck, shuffled
            self.init_deck();
            self.shuffle(draws);
            // deal 7 cards to each player
            for player in 0..2 {
                self.hands[player].clear();
                self.deal_cards(player, 7);
            }
            // Round
            self.target = NO_CARD;
            self.current_player = 0;
            self.direction = 1;
            self.played.clear();
            self.is_over = false;
            self.winner = -1;
            // round.flip_top_card / dealer.flip_top_card
            let mut top = self.deck.pop();
            while trait_of(top) == WILD_DRAW_4 {
                self.deck.append(top);
                self.shuffle(draws);
                top = self.deck.pop();
            }
            self.target_color = if trait_of(top) == WILD {
                draws.choice(4) as i32
            } else {
                color_of(top)
            };
            self.target = top;
            self.played.append(top);
            // round.perform_top_card
            match trait_of(top) {
                SKIP => self.current_player = 1,
                REVERSE => {
                    self.direction = -1;
                    self.current_player = self.next_player(0, self.direction);
                }
                DRAW_2 => {
                    let player = self.current_player as usize;
                    self.deal_cards(player, 2);
                }
                _ => {}
            }
            self.opponent_turns(draws);
            if !self.is_over {
                return;
            }
        }
    }

    /// The adapter's step: an illegal action is a uniformly random legal one, then rlcard's
    /// step, then the random agent's turns. Reward: player 0's payoff when the game is over.
    pub fn step<D: Draws>(&mut self, action: i32, draws: &mut D) -> (f32, bool, bool) {
        // the adapter's _agent_to_act: a state the agent acts from
        self.current_player = 0;
        self.is_over = false;
        self.winner = -1;
        let legal = self.get_legal_actions(0);
        let action = if legal.contains(action) {
            action
        } else {
            legal.ids[draws.choice(legal.n)] // np.random.choice(len(legal))
        };
        self.proceed_round(action, draws);
        self.opponent_turns(draws);
        let over = self.is_over;
        let reward = if !over {
            0.0
        } else if self.winner == 0 {
            1.0
        } else {
            -1.0
        };
        (reward, over, false)
    }

    /// rlcard's `_extract_state(get_state(0))["obs"]` flattened (encode_hand, encode_target),
    /// then the mask of player 0's legal actions.
    pub fn observe(&self, obs: &mut [f32]) {
        obs.fill(0.0);
        // encode_hand: plane 0 holds none, planes 1 and 2 one or two of a card
        obs[..60].fill(1.0);
        let mut count = [0u8; 60];
        for &card in self.hands[0].as_slice() {
            count[card as usize] += 1;
        }
        for (card, &n) in count.iter().enumerate() {
            if n == 0 {
                continue;
            }
            let trait_ = card % 15;
            if trait_ >= WILD as usize {
                // a wild of either kind counts as one in all four colours
                for color in 0..4 {
                    obs[15 * color + trait_] = 0.0;
                    obs[60 + 15 * color + trait_] = 1.0;
                }
            } else if n <= 2 {
                obs[card] = 0.0;
                obs[60 * n as usize + card] = 1.0;
            }
        }
        // encode_target: the target card by the colour it was created with
        if (0..60).contains(&self.target) {
            obs[180 + self.target as usize] = 1.0;
        }
        let legal = self.get_legal_actions(0);
        for &id in &legal.ids[..legal.n] {
            obs[240 + id as usize] = 1.0;
        }
    }
}
