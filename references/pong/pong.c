/*
 * pong.c -- Pong against a scripted opponent, the envforge reference environment.
 *
 * Written from scratch for envforge in the style of the PufferLib "Ocean" C environments:
 * one plain struct holds the whole state, reset/step/observe are small functions over it,
 * no allocation, no globals, no libc rand(). The agent controls the right paddle; the left
 * paddle follows the ball at a limited speed. All state is float32 / int32 / uint32 so a
 * port can reproduce it bit for bit (build with -O2 -ffp-contract=off for that).
 *
 * Randomness: a 32-bit xorshift generator whose state lives in the struct (field `rng`):
 *     x ^= x << 13;  x ^= x >> 17;  x ^= x << 5;
 * A uniform float in [0, 1) is (x >> 8) * 2^-24, exact in float32. The seed is mixed with
 * the PCG output hash (see seed_rng) so nearby seeds give unrelated serves.
 *
 * Interface (what the envforge C backend calls):
 *     void pong_reset(Pong* env, uint32_t seed);
 *     void pong_step(Pong* env, int32_t action, float* reward, uint8_t* terminated,
 *                    uint8_t* truncated);
 *     void pong_observe(const Pong* env, float* obs);   // 8 floats
 */
#include <stdint.h>

#ifndef PONG_FRAMESKIP
#define PONG_FRAMESKIP 4 /* physics frames per agent step */
#endif

#define WIDTH 640.0f
#define HEIGHT 480.0f
#define PADDLE_W 10.0f
#define PADDLE_H 80.0f
#define PADDLE_MARGIN 20.0f /* gap between a paddle and its wall */
#define BALL 10.0f          /* the ball is a BALL x BALL square */
#define PADDLE_SPEED 8.0f   /* agent paddle, per frame */
#define OPPONENT_SPEED 5.0f /* scripted paddle, per frame: slower than the fastest ball */
#define BALL_SPEED_X 8.0f
#define SERVE_MAX_VY 4.0f
#define MAX_VY 10.0f     /* cap on vertical speed after paddle hits */
#define SPEEDUP 1.125f   /* vertical speed-up per paddle hit */
#define DEFLECT 0.125f   /* extra vy per pixel of hit offset from the paddle centre */
#define RETURN_REWARD 0.1f
#define WIN_SCORE 21
#define MAX_TICKS 10000 /* agent steps before truncation */

#define LEFT_X PADDLE_MARGIN                        /* left paddle's left edge */
#define RIGHT_X (WIDTH - PADDLE_MARGIN - PADDLE_W) /* right paddle's left edge */

typedef struct {
    float paddle_yl; /* top edge of the scripted (left) paddle */
    float paddle_yr; /* top edge of the agent's (right) paddle */
    float ball_x;    /* left edge of the ball */
    float ball_y;    /* top edge of the ball */
    float ball_vx;
    float ball_vy;
    int32_t score_l; /* points of the scripted player */
    int32_t score_r; /* points of the agent */
    int32_t tick;    /* agent steps taken in this episode */
    uint32_t rng;    /* xorshift32 state, never 0 */
} Pong;

static uint32_t next_rng(uint32_t x) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return x;
}

static float uniform01(Pong* env) {
    env->rng = next_rng(env->rng);
    return (float)(env->rng >> 8) * (1.0f / 16777216.0f);
}

static uint32_t seed_rng(uint32_t seed) {
    uint32_t x = seed * 747796405u + 2891336453u;
    x = ((x >> ((x >> 28u) + 4u)) ^ x) * 277803737u;
    x = (x >> 22u) ^ x;
    return x == 0u ? 1u : x;
}

static float clampf(float v, float lo, float hi) {
    return v < lo ? lo : (v > hi ? hi : v);
}

/* Ball to the centre, moving towards `direction` (+1 right, -1 left), random vertical speed. */
static void serve(Pong* env, float direction) {
    env->ball_x = (WIDTH - BALL) * 0.5f;
    env->ball_y = (HEIGHT - BALL) * 0.5f;
    env->ball_vx = BALL_SPEED_X * direction;
    env->ball_vy = (uniform01(env) * 2.0f - 1.0f) * SERVE_MAX_VY;
}

void pong_reset(Pong* env, uint32_t seed) {
    env->rng = seed_rng(seed);
    env->paddle_yl = (HEIGHT - PADDLE_H) * 0.5f;
    env->paddle_yr = (HEIGHT - PADDLE_H) * 0.5f;
    env->score_l = 0;
    env->score_r = 0;
    env->tick = 0;
    serve(env, uniform01(env) < 0.5f ? -1.0f : 1.0f);
}

/* New vertical speed after a paddle hit: deflect by hit offset, speed up, cap. */
static float bounce_vy(float vy, float ball_y, float paddle_y) {
    float offset = (ball_y + BALL * 0.5f) - (paddle_y + PADDLE_H * 0.5f);
    return clampf((vy + offset * DEFLECT) * SPEEDUP, -MAX_VY, MAX_VY);
}

/* One physics frame. Returns the frame's reward; sets *point when a point was scored. */
static float frame(Pong* env, int32_t action, int* point) {
    float reward = 0.0f;
    float move = action == 1 ? -PADDLE_SPEED : (action == 2 ? PADDLE_SPEED : 0.0f);
    env->paddle_yr = clampf(env->paddle_yr + move, 0.0f, HEIGHT - PADDLE_H);

    float target = env->ball_y - (PADDLE_H - BALL) * 0.5f; /* centre on the ball */
    float chase = clampf(target - env->paddle_yl, -OPPONENT_SPEED, OPPONENT_SPEED);
    env->paddle_yl = clampf(env->paddle_yl + chase, 0.0f, HEIGHT - PADDLE_H);

    env->ball_x += env->ball_vx;
    env->ball_y += env->ball_vy;

    /* walls: reflect the overshoot */
    if (env->ball_y < 0.0f) {
        env->ball_y = -env->ball_y;
        env->ball_vy = -env->ball_vy;
    } else if (env->ball_y > HEIGHT - BALL) {
        env->ball_y = 2.0f * (HEIGHT - BALL) - env->ball_y;
        env->ball_vy = -env->ball_vy;
    }

    /* paddles: only a ball moving towards a paddle and overlapping it bounces */
    int overlaps_r = env->ball_x + BALL >= RIGHT_X && env->ball_x <= RIGHT_X + PADDLE_W &&
                     env->ball_y + BALL >= env->paddle_yr && env->ball_y <= env->paddle_yr + PADDLE_H;
    int overlaps_l = env->ball_x <= LEFT_X + PADDLE_W && env->ball_x + BALL >= LEFT_X &&
                     env->ball_y + BALL >= env->paddle_yl && env->ball_y <= env->paddle_yl + PADDLE_H;
    if (env->ball_vx > 0.0f && overlaps_r) {
        env->ball_x = RIGHT_X - BALL;
        env->ball_vx = -env->ball_vx;
        env->ball_vy = bounce_vy(env->ball_vy, env->ball_y, env->paddle_yr);
        reward += RETURN_REWARD;
    } else if (env->ball_vx < 0.0f && overlaps_l) {
        env->ball_x = LEFT_X + PADDLE_W;
        env->ball_vx = -env->ball_vx;
        env->ball_vy = bounce_vy(env->ball_vy, env->ball_y, env->paddle_yl);
    }

    /* points: the ball left the field */
    if (env->ball_x + BALL < 0.0f) {
        env->score_r += 1;
        reward += 1.0f;
        *point = 1;
        serve(env, 1.0f);
    } else if (env->ball_x > WIDTH) {
        env->score_l += 1;
        reward -= 1.0f;
        *point = 1;
        serve(env, -1.0f);
    }
    return reward;
}

void pong_step(Pong* env, int32_t action, float* reward, uint8_t* terminated, uint8_t* truncated) {
    float total = 0.0f;
    int point = 0;
    /* a point ends the agent step early: the rest of the skipped frames are not simulated */
    for (int i = 0; i < PONG_FRAMESKIP && !point; i++) {
        total += frame(env, action, &point);
    }
    env->tick += 1;
    *reward = total;
    *terminated = (uint8_t)(env->score_l >= WIN_SCORE || env->score_r >= WIN_SCORE);
    *truncated = (uint8_t)(!*terminated && env->tick >= MAX_TICKS);
}

void pong_observe(const Pong* env, float* obs) {
    obs[0] = (env->paddle_yr + PADDLE_H * 0.5f) * (1.0f / HEIGHT);
    obs[1] = (env->paddle_yl + PADDLE_H * 0.5f) * (1.0f / HEIGHT);
    obs[2] = (env->ball_x + BALL * 0.5f) * (1.0f / WIDTH);
    obs[3] = (env->ball_y + BALL * 0.5f) * (1.0f / HEIGHT);
    obs[4] = env->ball_vx * (1.0f / BALL_SPEED_X);
    obs[5] = env->ball_vy * (1.0f / MAX_VY);
    obs[6] = (float)env->score_l * (1.0f / WIN_SCORE);
    obs[7] = (float)env->score_r * (1.0f / WIN_SCORE);
}
