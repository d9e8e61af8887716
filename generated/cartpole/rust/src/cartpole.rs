//! CartPole-v1, one environment.
//!
//! Reference: gymnasium 1.x `envs/classic_control/cartpole.py` with its `TimeLimit(500)`
//! wrapper. Names and constants follow the reference; the state is float64 and every
//! expression keeps the reference's operation order (Python evaluates left to right), so the
//! dynamics agree with numpy's float64 to the last bit or two (`sin`/`cos` from [`sin_cos`], within
//! an ulp or two of libm's; the three divisions by the total mass are multiplications by its
//! reciprocal, [`INV_TOTAL_MASS`], each within an ulp of the quotient).
//! Explicit Euler, the reference's default `kinematics_integrator`.

pub const OBS_SIZE: usize = 4;

const GRAVITY: f64 = 9.8;
const MASSCART: f64 = 1.0;
const MASSPOLE: f64 = 0.1;
const TOTAL_MASS: f64 = MASSPOLE + MASSCART;
/// `1 / TOTAL_MASS`: the step multiplies by it where the reference divides by the total mass
/// (three times; the fourth division, by a function of the angle, stays). A float64 division
/// is a long-latency instruction on a step's critical path; a product is within an ulp of the
/// quotient. Measured: 6-12% less CPU time per batch step at 65536 envs.
const INV_TOTAL_MASS: f64 = 1.0 / TOTAL_MASS;
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

// pi/2 in three parts (Cody-Waite; twice Cephes' DP1..DP3): `k * PIO2_1` is exact for |k| < 2^29
const PIO2_1: f64 = 1.570796251296997;
const PIO2_2: f64 = 7.549789415861596e-08;
const PIO2_3: f64 = 5.390302858158119e-15;
const ROUNDER: f64 = 6755399441055744.0; // 1.5 * 2^52

// minimax polynomials for sin and cos on [-pi/4, pi/4] (Cephes sin.c)
const SIN: [f64; 6] = [
    1.5896230157654656e-10,
    -2.5050747762857807e-08,
    2.7557313621385722e-06,
    -0.0001984126982958954,
    0.008333333333322118,
    -0.1666666666666663,
];
const COS: [f64; 6] = [
    -1.1358536521387682e-11,
    2.087570084197473e-09,
    -2.755731417929674e-07,
    2.4801587288851704e-05,
    -0.0013888888888873056,
    0.041666666666666595,
];

/// `(sin(x), cos(x))` from one range reduction and two polynomials: within one ulp of libm's
/// for |x| <= 0.25 (the pole's range), two near the ends of the reduced interval (measured on
/// 2e6 points for |x| <= 4 and 1e4; the test below checks 1e5 per range); NaN for NaN and
/// infinities, as libm. libm's `sin` and `cos` are two opaque calls per step (an earlier
/// measurement: 12.5 of about 30 ns per step on one core); this inlines and vectorizes.
#[inline(always)]
pub fn sin_cos(x: f64) -> (f64, f64) {
    // nearest integer by the 1.5 * 2^52 trick (exact for |x| < 2^51; ties to even), no libm call;
    // the low bits of the sum's mantissa are k's
    let shifted = x * std::f64::consts::FRAC_2_PI + ROUNDER;
    let k = shifted - ROUNDER;
    let r = ((x - k * PIO2_1) - k * PIO2_2) - k * PIO2_3;
    let z = r * r;
    let ps = SIN[1..].iter().fold(SIN[0], |acc, &c| acc * z + c);
    let pc = COS[1..].iter().fold(COS[0], |acc, &c| acc * z + c);
    let s = r + r * z * ps;
    let c = 1.0 - 0.5 * z + z * z * pc;
    // quadrant k mod 4: sin is s, c, -s, -c and cos is c, -s, -c, s; written as selects, not a
    // branch, so that lanes of envs vectorize
    let q = shifted.to_bits();
    let (a, b) = if q & 1 != 0 { (c, s) } else { (s, c) };
    let sin = if q & 2 != 0 { -a } else { a };
    let cos = if q.wrapping_add(1) & 2 != 0 { -b } else { b };
    (sin, cos)
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
    #[inline(always)]
    pub fn step(&mut self, action: i32) -> (f32, bool, bool) {
        let (x, x_dot, theta, theta_dot) =
            dynamics(self.x, self.x_dot, self.theta, self.theta_dot, action);
        (self.x, self.x_dot, self.theta, self.theta_dot) = (x, x_dot, theta, theta_dot);
        self.end_step()
    }

    /// After the float fields have moved: count the step, then `(reward, terminated, truncated)`.
    #[inline(always)]
    fn end_step(&mut self) -> (f32, bool, bool) {
        self.time = self.time.wrapping_add(1);
        (
            1.0,
            terminated(self.x, self.theta),
            self.time >= MAX_EPISODE_STEPS,
        )
    }

    #[inline(always)]
    pub fn observe(&self, obs: &mut [f32]) {
        obs[0] = self.x as f32;
        obs[1] = self.x_dot as f32;
        obs[2] = self.theta as f32;
        obs[3] = self.theta_dot as f32;
    }
}

/// The reference's explicit Euler step of the four float fields.
#[inline(always)]
fn dynamics(x: f64, x_dot: f64, theta: f64, theta_dot: f64, action: i32) -> (f64, f64, f64, f64) {
    let force = if action == 1 { FORCE_MAG } else { -FORCE_MAG };
    let (sintheta, costheta) = sin_cos(theta);
    let temp = (force + POLEMASS_LENGTH * (theta_dot * theta_dot) * sintheta) * INV_TOTAL_MASS;
    let thetaacc = (GRAVITY * sintheta - costheta * temp)
        / (LENGTH * (4.0 / 3.0 - MASSPOLE * (costheta * costheta) * INV_TOTAL_MASS));
    let xacc = temp - POLEMASS_LENGTH * thetaacc * costheta * INV_TOTAL_MASS;
    (
        x + TAU * x_dot,
        x_dot + TAU * xacc,
        theta + TAU * theta_dot,
        theta_dot + TAU * thetaacc,
    )
}

/// The reference's termination test on the new state (`|`, not `||`: no branches). Not
/// `!(-T..=T).contains(&v)`, which clippy suggests: that is true for NaN, the reference's
/// comparisons are false.
#[allow(clippy::manual_range_contains)]
#[inline(always)]
fn terminated(x: f64, theta: f64) -> bool {
    (x < -X_THRESHOLD)
        | (x > X_THRESHOLD)
        | (theta < -THETA_THRESHOLD_RADIANS)
        | (theta > THETA_THRESHOLD_RADIANS)
}

/// Envs stepped together by [`step_lanes`]: two AVX2 registers of four float64 per field, so
/// that two independent chains of the step's dependent operations are in flight at once.
pub const LANES: usize = 8;

/// Where a batch step writes: per env `i`, its observation at `obs[i * OBS_SIZE..]`, reward and
/// flags at `[i]`.
pub struct Outputs<'a> {
    pub obs: &'a mut [f32],
    pub reward: &'a mut [f32],
    pub terminated: &'a mut [bool],
    pub truncated: &'a mut [bool],
}

impl Outputs<'_> {
    #[inline(always)]
    fn record(
        &mut self,
        i: usize,
        env: &CartPole,
        (reward, terminated, truncated): (f32, bool, bool),
    ) {
        env.observe(&mut self.obs[i * OBS_SIZE..(i + 1) * OBS_SIZE]);
        self.reward[i] = reward;
        self.terminated[i] = terminated;
        self.truncated[i] = truncated;
    }
}

/// One block of [`LANES`] envs and the parts of the outputs that are theirs.
struct Block<'a> {
    envs: &'a mut [CartPole; LANES],
    actions: &'a [i32; LANES],
    obs: &'a mut [f32; LANES * OBS_SIZE],
    reward: &'a mut [f32; LANES],
    terminated: &'a mut [bool; LANES],
    truncated: &'a mut [bool; LANES],
}

/// Steps one block of envs at once: the same operations in the same order as
/// [`CartPole::step`] (so bit for bit the same results), on arrays of one field per lane, which
/// the compiler turns into SIMD instructions (two f64 per SSE2 register, four per AVX register).
/// Stepping envs one at a time waits on each step's chain of dependent operations; lanes run
/// eight envs' chains at once. The block's slices have fixed lengths, so no index is checked.
#[inline(always)]
fn step_lanes(block: Block<'_>) {
    let Block {
        envs,
        actions,
        obs,
        reward,
        terminated: term,
        truncated: trunc,
    } = block;
    // one array per field (a lane per env), so that each operation is one SIMD instruction
    let mut x: [f64; LANES] = std::array::from_fn(|i| envs[i].x);
    let mut x_dot: [f64; LANES] = std::array::from_fn(|i| envs[i].x_dot);
    let mut theta: [f64; LANES] = std::array::from_fn(|i| envs[i].theta);
    let mut theta_dot: [f64; LANES] = std::array::from_fn(|i| envs[i].theta_dot);
    for i in 0..LANES {
        (x[i], x_dot[i], theta[i], theta_dot[i]) =
            dynamics(x[i], x_dot[i], theta[i], theta_dot[i], actions[i]);
    }
    let ended: [bool; LANES] = std::array::from_fn(|i| terminated(x[i], theta[i]));
    for (i, env) in envs.iter_mut().enumerate() {
        (env.x, env.x_dot, env.theta, env.theta_dot) = (x[i], x_dot[i], theta[i], theta_dot[i]);
        // end_step's counter and flags, with `terminated` taken from the lanes above
        env.time = env.time.wrapping_add(1);
        env.observe(&mut obs[i * OBS_SIZE..(i + 1) * OBS_SIZE]);
        reward[i] = 1.0;
        term[i] = ended[i];
        trunc[i] = env.time >= MAX_EPISODE_STEPS;
    }
}

/// Steps every env of `envs` (`actions[i]` for env i), writing what [`CartPole::step`] and
/// [`CartPole::observe`] give into `out`: `LANES` at a time, the rest one by one. Compiled for
/// AVX2 too, and that build is used where the CPU has it (checked once per call).
pub fn step_all(envs: &mut [CartPole], actions: &[i32], out: &mut Outputs) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above).
        unsafe { step_all_avx2(envs, actions, out) };
        return;
    }
    step_all_generic(envs, actions, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn step_all_avx2(envs: &mut [CartPole], actions: &[i32], out: &mut Outputs) {
    step_all_generic(envs, actions, out);
}

#[inline(always)]
fn step_all_generic(envs: &mut [CartPole], actions: &[i32], out: &mut Outputs) {
    let n = envs.len();
    let whole = n - n % LANES;
    let blocks = envs[..whole]
        .chunks_exact_mut(LANES)
        .zip(actions[..whole].chunks_exact(LANES))
        .zip(out.obs[..whole * OBS_SIZE].chunks_exact_mut(LANES * OBS_SIZE))
        .zip(out.reward[..whole].chunks_exact_mut(LANES))
        .zip(out.terminated[..whole].chunks_exact_mut(LANES))
        .zip(out.truncated[..whole].chunks_exact_mut(LANES));
    for (((((envs, actions), obs), reward), terminated), truncated) in blocks {
        // every chunk has exactly the block's length (chunks_exact), so these cannot fail
        step_lanes(Block {
            envs: envs.try_into().unwrap(),
            actions: actions.try_into().unwrap(),
            obs: obs.try_into().unwrap(),
            reward: reward.try_into().unwrap(),
            terminated: terminated.try_into().unwrap(),
            truncated: truncated.try_into().unwrap(),
        });
    }
    for i in whole..n {
        let flags = envs[i].step(actions[i]);
        out.record(i, &envs[i], flags);
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
    fn sin_cos_within_two_ulp_of_libm() {
        let mut state = 7u64;
        for bound in [0.25, 4.0, 1e4] {
            for _ in 0..100_000 {
                let x = uniform(&mut state, -bound, bound);
                let (s, c) = sin_cos(x);
                for (got, want) in [(s, x.sin()), (c, x.cos())] {
                    let ulp = f64::from_bits(want.abs().to_bits() + 1) - want.abs();
                    assert!(
                        (got - want).abs() <= 2.0 * ulp,
                        "x={x} got={got} want={want}"
                    );
                }
            }
        }
    }

    /// Lanes (the AVX2 build where the CPU has it, and the generic one) give bit for bit what
    /// stepping envs one at a time gives, for wild states too (huge angles, infinities, NaN).
    #[test]
    fn lanes_step_exactly_like_single_envs() {
        let mut state = 11u64;
        let n = LANES * 500 + 3; // a remainder too
        let wild = [
            0.0,
            -0.0,
            1e300,
            -1e300,
            f64::INFINITY,
            f64::NAN,
            1e-310,
            12.0,
        ];
        let envs: Vec<CartPole> = (0..n)
            .map(|i| {
                let mut draw = |b: f64| uniform(&mut state, -b, b);
                let mut env = CartPole {
                    x: draw(3.0),
                    x_dot: draw(5.0),
                    theta: draw(if i % 3 == 0 { 50.0 } else { 0.3 }),
                    theta_dot: draw(5.0),
                    time: (i % 501) as i32,
                };
                if i % 97 == 0 {
                    env.theta = wild[i / 97 % wild.len()];
                }
                env
            })
            .collect();
        let actions: Vec<i32> = (0..n).map(|i| (i % 2) as i32).collect();
        let mut want = envs.clone();
        let mut want_out = (
            vec![0f32; n * OBS_SIZE],
            vec![0f32; n],
            vec![false; n],
            vec![false; n],
        );
        for i in 0..n {
            let (r, te, tr) = want[i].step(actions[i]);
            (want_out.1[i], want_out.2[i], want_out.3[i]) = (r, te, tr);
            want[i].observe(&mut want_out.0[i * OBS_SIZE..(i + 1) * OBS_SIZE]);
        }
        let bits = |e: &CartPole| {
            [e.x, e.x_dot, e.theta, e.theta_dot]
                .map(f64::to_bits)
                .to_vec()
        };
        for generic in [false, true] {
            let mut got = envs.clone();
            let mut out = (
                vec![0f32; n * OBS_SIZE],
                vec![0f32; n],
                vec![false; n],
                vec![false; n],
            );
            let mut outputs = Outputs {
                obs: &mut out.0,
                reward: &mut out.1,
                terminated: &mut out.2,
                truncated: &mut out.3,
            };
            if generic {
                step_all_generic(&mut got, &actions, &mut outputs);
            } else {
                step_all(&mut got, &actions, &mut outputs);
            }
            for i in 0..n {
                assert_eq!(bits(&got[i]), bits(&want[i]), "env {i} generic={generic}");
                assert_eq!(got[i].time, want[i].time);
            }
            let obs_bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(obs_bits(&out.0), obs_bits(&want_out.0));
            assert_eq!(
                (&out.1, &out.2, &out.3),
                (&want_out.1, &want_out.2, &want_out.3)
            );
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
