/*
 * pig.c -- the dice game Pig against a scripted opponent, an envforge reference environment
 * whose step rolls dice through envforge's draw hook.
 *
 * Written for envforge: the agent and the opponent take turns; on its turn a player
 * rolls a six-sided die as often as it likes, adding each roll to its turn total, and banks the
 * total by holding. A 1 loses the turn total and ends the turn. The first to GOAL points wins.
 * The agent's step is one decision (0 roll, 1 hold); when the agent's turn ends (a 1 or a
 * hold) the opponent plays its whole turn inside the same step: it is greedy with probability
 * GREEDY (holds at 25 instead of 20) and holds early when its total would win.
 *
 * Randomness: every number comes from pig_draw (kinds as envforge's recorder logs them: 1
 * random on [0, 1), 3 integers on [a, b)), which envforge supplies: under verification it
 * records each draw to the tape that the port replays (docs/SPEC.md, randomness inside step).
 * A standalone build defines pig_draw over its own generator. One step draws at most 15
 * numbers: the agent's roll, the opponent's greed, and at most 13 opponent rolls (a greedy
 * opponent rolling only 2s reaches 25 on its 13th roll).
 *
 * Interface (what the envforge C backend calls):
 *     void pig_reset(Pig* env, uint32_t seed);
 *     void pig_step(Pig* env, int32_t action, float* reward, uint8_t* terminated,
 *                   uint8_t* truncated, void* draws);
 *     void pig_observe(const Pig* env, float* obs);   // 4 floats
 */
#include <stdint.h>

#ifndef pig_draw /* envforge defines pig_draw as a macro that also passes the draw's line */
double pig_draw(void* draws, int kind, double a, double b);
#endif

#define DRAW_RANDOM 1
#define DRAW_INTEGERS 3

#define GOAL 50        /* points to win */
#define HOLD_AT 20     /* the opponent's turn total at which it holds */
#define GREEDY_AT 25   /* ... when greedy */
#define GREEDY 0.25    /* probability that an opponent turn is greedy */
#define MAX_STEPS 100  /* agent decisions before truncation */

typedef struct {
    int32_t me;    /* the agent's banked points */
    int32_t opp;   /* the opponent's banked points */
    int32_t turn;  /* the agent's current turn total */
    int32_t last;  /* the agent's last roll this step (0: none) */
    int32_t steps; /* agent decisions taken in this episode */
} Pig;

void pig_reset(Pig* env, uint32_t seed) {
    (void)seed; /* every game starts at 0 : 0 with the agent to play */
    env->me = 0;
    env->opp = 0;
    env->turn = 0;
    env->last = 0;
    env->steps = 0;
}

/* one die (a macro, so that the draw's site is the line that rolls) */
#define ROLL(draws) ((int32_t)pig_draw((draws), DRAW_INTEGERS, 1, 7))

/* the opponent's whole turn: rolls until a 1, its hold total, or a total that wins */
static void opponent_turn(Pig* env, void* draws) {
    int32_t hold = pig_draw(draws, DRAW_RANDOM, 0, 1) < GREEDY ? GREEDY_AT : HOLD_AT;
    int32_t total = 0;
    for (;;) {
        int32_t die = ROLL(draws);
        if (die == 1) {
            total = 0;
            break;
        }
        total += die;
        if (total >= hold || env->opp + total >= GOAL) break;
    }
    env->opp += total;
}

void pig_step(Pig* env, int32_t action, float* reward, uint8_t* terminated, uint8_t* truncated,
              void* draws) {
    *reward = 0.0f;
    *terminated = 0;
    env->steps += 1;
    env->last = 0;
    int turn_over = 0;
    if (action == 0) {
        int32_t die = ROLL(draws);
        env->last = die;
        if (die == 1) {
            env->turn = 0;
            turn_over = 1;
        } else {
            env->turn += die;
        }
    } else {
        turn_over = 1;
    }
    if (turn_over || env->me + env->turn >= GOAL) {
        env->me += env->turn;
        env->turn = 0;
    }
    if (env->me >= GOAL) {
        *reward = 1.0f;
        *terminated = 1;
    } else if (turn_over) {
        opponent_turn(env, draws);
        if (env->opp >= GOAL) {
            *reward = -1.0f;
            *terminated = 1;
        }
    }
    *truncated = !*terminated && env->steps >= MAX_STEPS;
}

void pig_observe(const Pig* env, float* obs) {
    obs[0] = (float)env->me / GOAL;
    obs[1] = (float)env->opp / GOAL;
    obs[2] = (float)env->turn / GOAL;
    obs[3] = (float)env->last / 6.0f;
}
