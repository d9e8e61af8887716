//! CartPole-v1, one environment.
//!
//! Reference: gymnasium 1.x `envs/classic_control/cartpole.py` with its `TimeLimit(500)`
//! wrapper. Names and constants follow the reference; the state is float64 and every
//! expression keeps the reference's operation order (Python evaluates left to right), so the
//! dynamics agree with numpy's float64 to the last bit or two (`sin`/`cos` come from libm here).
//! Explicit Euler, the reference's default `kinematics_integrator`.

pub const OBS_SIZE: usize = 4;

const GRAVITY: f64 = 9.8;
const MASSCART: f64 = 1.0;
const MASSPOLE: f64 = 0.1;
const TOTAL_MASS: f64 = MASSPOLE + MASSCART;
const LENGTH: f64 = 0.5; // half the pole's length, as in the reference
const POLEMASS_LENGTH: f64 = MASSPOLE * LENGTH;
const FORCE_MAG: f64 = 10.0;
const TAU: f64 = 0.02; // seconds between state updates
const THETA_THRESHOLD_RADIANS: f64 = 12.0 * 2.0 * std::f64::consts::PI / 360.0;
const X_THRESHOLD: f64 = 2.4;
const MAX_EPISODE_STEPS: i32 = 500; // gymnasium's TimeLimit for CartPole-v1

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CartPole {
    pub x: f64,
    pub x_dot: f64,
    pub theta: f64,
    pub theta_dot: f64,
    pub time: i32, // steps since reset: the TimeLimit wrapper's counter
}

/// splitmix64: the port's own reset generator. In `sync` RNG mode the verifier compares reset
/// distributions, not draws, so this need not (and cannot) reproduce numpy's PCG64.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E3779B97F4A7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
    z ^ (z >> 31)
}

/// Uniform in [low, high) from the top 53 bits, like `np_random.uniform(low, high)`.
fn uniform(state: &mut u64, low: f64, high: f64) -> f64 {
    let unit = (splitmix64(state) >> 11) as f64 * (1.0 / 9007199254740992.0);
    low + (high - low) * unit
}

impl CartPole {
    pub fn reset(&mut self, seed: u32) {
        let mut rng = u64::from(seed) ^ 0x5EED_CA27_F01E_0000;
        self.x = uniform(&mut rng, -0.05, 0.05);
        self.x_dot = uniform(&mut rng, -0.05, 0.05);
        self.theta = uniform(&mut rng, -0.05, 0.05);
        self.theta_dot = uniform(&mut rng, -0.05, 0.05);
        self.time = 0;
    }

    /// One step: `(reward, terminated, truncated)`. Reward is 1 on every step, the terminal one
    /// included; a finished episode is not reset here.
    pub fn step(&mut self, action: i32) -> (f32, bool, bool) {
        let force = if action == 1 { FORCE_MAG } else { -FORCE_MAG };
        let costheta = self.theta.cos();
        let sintheta = self.theta.sin();
        let temp =
            (force + POLEMASS_LENGTH * (self.theta_dot * self.theta_dot) * sintheta) / TOTAL_MASS;
        let thetaacc = (GRAVITY * sintheta - costheta * temp)
            / (LENGTH * (4.0 / 3.0 - MASSPOLE * (costheta * costheta) / TOTAL_MASS));
        let xacc = temp - POLEMASS_LENGTH * thetaacc * costheta / TOTAL_MASS;

        self.x += TAU * self.x_dot;
        self.x_dot += TAU * xacc;
        self.theta += TAU * self.theta_dot;
        self.theta_dot += TAU * thetaacc;
        self.time = self.time.wrapping_add(1);

        let terminated = self.x < -X_THRESHOLD
            || self.x > X_THRESHOLD
            || self.theta < -THETA_THRESHOLD_RADIANS
            || self.theta > THETA_THRESHOLD_RADIANS;
        let truncated = self.time >= MAX_EPISODE_STEPS;
        (1.0, terminated, truncated)
    }

    pub fn observe(&self, obs: &mut [f32]) {
        obs[0] = self.x as f32;
        obs[1] = self.x_dot as f32;
        obs[2] = self.theta as f32;
        obs[3] = self.theta_dot as f32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resets_inside_the_starting_box() {
        for seed in 0..1000 {
            let mut env = CartPole::default();
            env.reset(seed);
            for v in [env.x, env.x_dot, env.theta, env.theta_dot] {
                assert!((-0.05..0.05).contains(&v));
            }
        }
    }

    #[test]
    fn pushing_right_accelerates_right() {
        let mut env = CartPole::default();
        env.step(1);
        env.step(1);
        assert!(env.x_dot > 0.0 && env.x > 0.0 && env.time == 2);
    }
}
