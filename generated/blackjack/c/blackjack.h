/*
 * blackjack.h -- a C port of gymnasium's Blackjack-v1 (natural = true, sab = false).
 *
 * State: the two hands as fixed arrays of 24 slots, the cards in the order dealt, then 0.
 * A hit draws one card; a stick draws the dealer's cards while the dealer's hand is worth less
 * than 17, then scores. Every card inside step is one uniform choice of 13 (the index into
 * DECK) through envforge's draw hook, blackjack_draw.
 */
#include <math.h>
#include <stdint.h>

#ifndef blackjack_draw /* envforge defines blackjack_draw as a macro that also passes the line */
double blackjack_draw(void* draws, int kind, double a, double b);
#endif
#define DRAW_CHOICE 4

#define HAND_SLOTS 24

typedef struct {
    int32_t player[24];
    int32_t dealer[24];
} Blackjack;

static const int32_t DECK[13] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 10, 10, 10};

/* np_random.choice(deck): the index of one of 13 cards (a macro: the draw's site is the line
   of step that uses it) */
#define DRAW_CARD(draws) DECK[(int32_t)blackjack_draw((draws), DRAW_CHOICE, 13, 0)]

/* the number of cards in a hand: the slots before the first 0 */
static inline int32_t blackjack_len(const int32_t* hand) {
    int32_t n = 0;
    while (n < HAND_SLOTS && hand[n] != 0) n++;
    return n;
}

static inline int32_t blackjack_raw_sum(const int32_t* hand) {
    int32_t s = 0;
    for (int32_t i = 0; i < HAND_SLOTS && hand[i] != 0; i++) s += hand[i];
    return s;
}

/* usable_ace: 1 in hand and sum(hand) + 10 <= 21 */
static inline int32_t blackjack_usable_ace(const int32_t* hand) {
    int32_t has_ace = 0;
    for (int32_t i = 0; i < HAND_SLOTS && hand[i] != 0; i++)
        if (hand[i] == 1) has_ace = 1;
    return has_ace && blackjack_raw_sum(hand) + 10 <= 21;
}

/* sum_hand: the sum, an ace counted 11 when usable */
static inline int32_t blackjack_sum_hand(const int32_t* hand) {
    return blackjack_usable_ace(hand) ? blackjack_raw_sum(hand) + 10 : blackjack_raw_sum(hand);
}

static inline int32_t blackjack_is_bust(const int32_t* hand) {
    return blackjack_sum_hand(hand) > 21;
}

static inline int32_t blackjack_score(const int32_t* hand) {
    return blackjack_is_bust(hand) ? 0 : blackjack_sum_hand(hand);
}

/* is_natural: sorted(hand) == [1, 10] */
static inline int32_t blackjack_is_natural(const int32_t* hand) {
    if (blackjack_len(hand) != 2) return 0;
    return (hand[0] == 1 && hand[1] == 10) || (hand[0] == 10 && hand[1] == 1);
}

/* the generator of reset (not of step): splitmix64 over the seed */
static inline uint64_t blackjack_splitmix(uint64_t* s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline int32_t blackjack_reset_card(uint64_t* s) {
    return DECK[blackjack_splitmix(s) % 13u];
}

static inline void blackjack_reset(Blackjack* env, uint32_t seed) {
    uint64_t s = (uint64_t)seed * 0x2545F4914F6CDD1Dull + 0x1234567ull;
    for (int32_t i = 0; i < HAND_SLOTS; i++) {
        env->player[i] = 0;
        env->dealer[i] = 0;
    }
    /* draw_hand for the dealer, then for the player: two cards each */
    env->dealer[0] = blackjack_reset_card(&s);
    env->dealer[1] = blackjack_reset_card(&s);
    env->player[0] = blackjack_reset_card(&s);
    env->player[1] = blackjack_reset_card(&s);
}

static inline void blackjack_step(Blackjack* env, int32_t action, float* reward,
                                  uint8_t* terminated, uint8_t* truncated, void* draws) {
    float r;
    uint8_t term;
    if (action) { /* hit: add a card to the player's hand */
        int32_t n = blackjack_len(env->player);
        int32_t card = DRAW_CARD(draws);
        if (n < HAND_SLOTS) env->player[n] = card;
        if (blackjack_is_bust(env->player)) {
            term = 1;
            r = -1.0f;
        } else {
            term = 0;
            r = 0.0f;
        }
    } else { /* stick: play out the dealer's hand, and score */
        term = 1;
        while (blackjack_sum_hand(env->dealer) < 17) {
            int32_t n = blackjack_len(env->dealer);
            int32_t card = DRAW_CARD(draws);
            if (n < HAND_SLOTS) {
                env->dealer[n] = card;
            } else {
                break; /* no slot left (never in a game: the dealer stops by 17 cards) */
            }
        }
        int32_t p = blackjack_score(env->player), d = blackjack_score(env->dealer);
        r = (float)((p > d) - (p < d)); /* cmp */
        if (blackjack_is_natural(env->player) && r == 1.0f) r = 1.5f; /* natural, sab false */
    }
    *reward = r;
    *terminated = term;
    *truncated = 0;
}

static inline void blackjack_observe(const Blackjack* env, float* obs) {
    obs[0] = (float)blackjack_sum_hand(env->player);
    obs[1] = (float)env->dealer[0];
    obs[2] = (float)blackjack_usable_ace(env->player);
}
