/* CartPole-v1 as a C port: one env struct and its reset/step/observe (the form PufferLib's
   Ocean envs take), verified by envforge against gymnasium's CartPole-v1
   (references/cartpole/env.toml). Written by hand; see PROVENANCE.md.

   Follows gymnasium's classic_control/cartpole.py line by line (explicit Euler, float64
   state, the same operation order) and its TimeLimit(500) wrapper. */
#ifndef CARTPOLE_H
#define CARTPOLE_H

#include <math.h>
#include <stdint.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

#define CARTPOLE_GRAVITY 9.8
#define CARTPOLE_MASSCART 1.0
#define CARTPOLE_MASSPOLE 0.1
#define CARTPOLE_TOTAL_MASS (CARTPOLE_MASSPOLE + CARTPOLE_MASSCART)
#define CARTPOLE_LENGTH 0.5 /* half the pole's length */
#define CARTPOLE_POLEMASS_LENGTH (CARTPOLE_MASSPOLE * CARTPOLE_LENGTH)
#define CARTPOLE_FORCE_MAG 10.0
#define CARTPOLE_TAU 0.02 /* seconds between state updates */
#define CARTPOLE_THETA_THRESHOLD (12 * 2 * M_PI / 360)
#define CARTPOLE_X_THRESHOLD 2.4
#define CARTPOLE_MAX_EPISODE_STEPS 500

/* the canonical state of references/cartpole/env.toml, member names = field names */
typedef struct {
    double x;
    double x_dot;
    double theta;
    double theta_dot;
    int32_t time; /* steps taken in this episode (gymnasium's TimeLimit counter) */
} CartPole;

/* splitmix64: the port's own generator. The spec's RNG mode is sync, which compares reset
   distributions, not numpy's PCG64 stream. */
static inline uint64_t cartpole_next(uint64_t* s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* U[low, high): the top 53 bits as a double in [0, 1) */
static inline double cartpole_uniform(uint64_t* s, double low, double high) {
    double u = (double)(cartpole_next(s) >> 11) * (1.0 / 9007199254740992.0);
    return low + (high - low) * u;
}

/* reset: each state variable from U(-0.05, 0.05), the step counter to 0 */
static inline void cartpole_reset(CartPole* env, uint32_t seed) {
    uint64_t s = (uint64_t)seed ^ 0xC0FFEE5EEDCA27ull;
    env->x = cartpole_uniform(&s, -0.05, 0.05);
    env->x_dot = cartpole_uniform(&s, -0.05, 0.05);
    env->theta = cartpole_uniform(&s, -0.05, 0.05);
    env->theta_dot = cartpole_uniform(&s, -0.05, 0.05);
    env->time = 0;
}

/* step: push left (0) or right (1); reward 1 on every step, the terminal one included; a
   finished episode is not reset here */
static inline void cartpole_step(CartPole* env, int32_t action, float* reward,
                                 uint8_t* terminated, uint8_t* truncated) {
    double force = action == 1 ? CARTPOLE_FORCE_MAG : -CARTPOLE_FORCE_MAG;
    double costheta = cos(env->theta);
    double sintheta = sin(env->theta);
    double temp = (force + CARTPOLE_POLEMASS_LENGTH * (env->theta_dot * env->theta_dot) * sintheta)
                  / CARTPOLE_TOTAL_MASS;
    double thetaacc = (CARTPOLE_GRAVITY * sintheta - costheta * temp)
                      / (CARTPOLE_LENGTH * (4.0 / 3.0 - CARTPOLE_MASSPOLE * (costheta * costheta)
                                                            / CARTPOLE_TOTAL_MASS));
    double xacc = temp - CARTPOLE_POLEMASS_LENGTH * thetaacc * costheta / CARTPOLE_TOTAL_MASS;
    /* euler */
    env->x = env->x + CARTPOLE_TAU * env->x_dot;
    env->x_dot = env->x_dot + CARTPOLE_TAU * xacc;
    env->theta = env->theta + CARTPOLE_TAU * env->theta_dot;
    env->theta_dot = env->theta_dot + CARTPOLE_TAU * thetaacc;
    env->time += 1;
    *terminated = env->x < -CARTPOLE_X_THRESHOLD || env->x > CARTPOLE_X_THRESHOLD
                  || env->theta < -CARTPOLE_THETA_THRESHOLD
                  || env->theta > CARTPOLE_THETA_THRESHOLD;
    *reward = 1.0f;
    *truncated = env->time >= CARTPOLE_MAX_EPISODE_STEPS;
}

/* observe: the four state variables as float32 */
static inline void cartpole_observe(const CartPole* env, float* obs) {
    obs[0] = (float)env->x;
    obs[1] = (float)env->x_dot;
    obs[2] = (float)env->theta;
    obs[3] = (float)env->theta_dot;
}

#endif
