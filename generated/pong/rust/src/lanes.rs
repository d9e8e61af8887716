//! Four games stepped side by side in SSE4.1 registers (x86-64 CPUs since 2008; others, and
//! CPUs without it, step one game at a time).
//!
//! Every lane does exactly the float32 operations of `Pong::step`, in the same order: each `if`
//! of the scalar code becomes a select between the two values it would have produced, and the
//! frames after a point (which the scalar code skips with `break`) are computed and then
//! discarded. Packed SSE arithmetic rounds like the scalar instructions and obeys the same
//! MXCSR (flush-to-zero, denormals-are-zero), compares are false on NaN as in the scalar code,
//! and selects never round, so each lane agrees bit for bit with `Pong::step` and the C
//! reference (`tests/test_rust.py` checks it from states full of NaN, infinities, signed zeros
//! and denormals).

#[cfg(target_arch = "x86_64")]
mod sse {
    use std::arch::x86_64::*;

    use crate::pong::{
        Pong, BALL, BALL_SPEED_X, DEFLECT, FRAMESKIP, HEIGHT, LEFT_X, MAX_TICKS, MAX_VY,
        OPPONENT_SPEED, PADDLE_H, PADDLE_SPEED, PADDLE_W, RETURN_REWARD, RIGHT_X, SERVE_MAX_VY,
        SPEEDUP, WIDTH, WIN_SCORE,
    };

    pub const LANES: usize = 4;

    type F = __m128;
    type I = __m128i;

    #[target_feature(enable = "sse4.1")]
    #[inline]
    fn splat(v: f32) -> F {
        _mm_set1_ps(v)
    }

    /// Two-operand lane-wise operations, named for what they compute.
    macro_rules! binary {
        ($($(#[$doc:meta])* $name:ident = $intrinsic:ident;)*) => {$(
            $(#[$doc])*
            #[target_feature(enable = "sse4.1")]
            #[inline]
            fn $name(a: F, b: F) -> F {
                $intrinsic(a, b)
            }
        )*};
    }

    binary! {
        add = _mm_add_ps;
        sub = _mm_sub_ps;
        mul = _mm_mul_ps;
        /// `a < b` as a mask (false on NaN, as the scalar compare).
        lt = _mm_cmplt_ps;
        gt = _mm_cmpgt_ps;
        ge = _mm_cmpge_ps;
        le = _mm_cmple_ps;
        and = _mm_and_ps;
        or = _mm_or_ps;
    }

    /// `-a`: flips the sign bit, as Rust's and C's unary minus do.
    #[target_feature(enable = "sse4.1")]
    #[inline]
    fn neg(a: F) -> F {
        _mm_xor_ps(a, _mm_set1_ps(-0.0))
    }

    /// `a & !b` on masks.
    #[target_feature(enable = "sse4.1")]
    #[inline]
    fn and_not(a: F, b: F) -> F {
        _mm_andnot_ps(b, a)
    }

    /// `mask ? a : b`, lane by lane, bits untouched.
    #[target_feature(enable = "sse4.1")]
    #[inline]
    fn pick(mask: F, a: F, b: F) -> F {
        _mm_blendv_ps(b, a, mask)
    }

    #[target_feature(enable = "sse4.1")]
    #[inline]
    fn pick_int(mask: F, a: I, b: I) -> I {
        _mm_blendv_epi8(b, a, _mm_castps_si128(mask))
    }

    /// `v < lo ? lo : (v > hi ? hi : v)`, the scalar `clampf` (NaN passes through).
    #[target_feature(enable = "sse4.1")]
    #[inline]
    fn clampf(v: F, lo: f32, hi: f32) -> F {
        let (lo, hi) = (splat(lo), splat(hi));
        pick(lt(v, lo), lo, pick(gt(v, hi), hi, v))
    }

    #[target_feature(enable = "sse4.1")]
    #[inline]
    fn bounce_vy(vy: F, ball_y: F, paddle_y: F) -> F {
        let offset = sub(
            add(ball_y, splat(BALL * 0.5)),
            add(paddle_y, splat(PADDLE_H * 0.5)),
        );
        clampf(
            mul(add(vy, mul(offset, splat(DEFLECT))), splat(SPEEDUP)),
            -MAX_VY,
            MAX_VY,
        )
    }

    #[target_feature(enable = "sse4.1")]
    #[inline]
    fn next_rng(x: I) -> I {
        {
            let x = _mm_xor_si128(x, _mm_slli_epi32::<13>(x));
            let x = _mm_xor_si128(x, _mm_srli_epi32::<17>(x));
            _mm_xor_si128(x, _mm_slli_epi32::<5>(x))
        }
    }

    struct Block {
        paddle_yl: F,
        paddle_yr: F,
        ball_x: F,
        ball_y: F,
        ball_vx: F,
        ball_vy: F,
        score_l: I,
        score_r: I,
        rng: I,
    }

    #[target_feature(enable = "sse4.1")]
    #[inline]
    fn floats(envs: &[Pong; LANES], field: impl Fn(&Pong) -> f32) -> F {
        _mm_setr_ps(
            field(&envs[0]),
            field(&envs[1]),
            field(&envs[2]),
            field(&envs[3]),
        )
    }

    #[target_feature(enable = "sse4.1")]
    #[inline]
    fn ints(envs: &[Pong; LANES], field: impl Fn(&Pong) -> i32) -> I {
        _mm_setr_epi32(
            field(&envs[0]),
            field(&envs[1]),
            field(&envs[2]),
            field(&envs[3]),
        )
    }

    #[target_feature(enable = "sse4.1")]
    #[inline]
    fn lanes_f(v: F) -> [f32; LANES] {
        let mut out = [0.0f32; LANES];
        unsafe { _mm_storeu_ps(out.as_mut_ptr(), v) };
        out
    }

    #[target_feature(enable = "sse4.1")]
    #[inline]
    fn lanes_i(v: I) -> [i32; LANES] {
        let mut out = [0i32; LANES];
        unsafe { _mm_storeu_si128(out.as_mut_ptr().cast(), v) };
        out
    }

    /// One frame of `Pong::frame` in every lane of `$active` of block `$b` (the others keep
    /// their fields); evaluates to the frame's `(reward, point)`. A macro rather than a method so
    /// that it is always inlined into `step_block` (`#[inline(always)]` cannot go with
    /// `#[target_feature]`) and the block stays in registers.
    macro_rules! frame {
        ($b:ident, $up:expr, $down:expr, $active:expr) => {{
            let (up, down, active): (F, F, F) = ($up, $down, $active);
            let moved = pick(
                up,
                splat(-PADDLE_SPEED),
                pick(down, splat(PADDLE_SPEED), splat(0.0)),
            );
            let paddle_yr = clampf(add($b.paddle_yr, moved), 0.0, HEIGHT - PADDLE_H);

            let target = sub($b.ball_y, splat((PADDLE_H - BALL) * 0.5));
            let chase = clampf(sub(target, $b.paddle_yl), -OPPONENT_SPEED, OPPONENT_SPEED);
            let paddle_yl = clampf(add($b.paddle_yl, chase), 0.0, HEIGHT - PADDLE_H);

            let mut ball_x = add($b.ball_x, $b.ball_vx);
            let moved_y = add($b.ball_y, $b.ball_vy);
            let vx = $b.ball_vx;

            // walls: reflect the overshoot
            let below = lt(moved_y, splat(0.0));
            let above = and_not(gt(moved_y, splat(HEIGHT - BALL)), below);
            let reflected = sub(splat(2.0 * (HEIGHT - BALL)), moved_y);
            let ball_y = pick(below, neg(moved_y), pick(above, reflected, moved_y));
            let mut ball_vy = pick(or(below, above), neg($b.ball_vy), $b.ball_vy);

            // paddles: only a ball moving towards a paddle and overlapping it bounces
            let ball_right = add(ball_x, splat(BALL));
            let ball_bottom = add(ball_y, splat(BALL));
            let overlaps_r = and(
                and(
                    ge(ball_right, splat(RIGHT_X)),
                    le(ball_x, splat(RIGHT_X + PADDLE_W)),
                ),
                and(
                    ge(ball_bottom, paddle_yr),
                    le(ball_y, add(paddle_yr, splat(PADDLE_H))),
                ),
            );
            let overlaps_l = and(
                and(
                    le(ball_x, splat(LEFT_X + PADDLE_W)),
                    ge(ball_right, splat(LEFT_X)),
                ),
                and(
                    ge(ball_bottom, paddle_yl),
                    le(ball_y, add(paddle_yl, splat(PADDLE_H))),
                ),
            );
            let hit_r = and(gt(vx, splat(0.0)), overlaps_r);
            let hit_l = and_not(and(lt(vx, splat(0.0)), overlaps_l), hit_r);
            ball_x = pick(
                hit_r,
                splat(RIGHT_X - BALL),
                pick(hit_l, splat(LEFT_X + PADDLE_W), ball_x),
            );
            let mut ball_vx = pick(or(hit_r, hit_l), neg(vx), vx);
            let bounced_r = bounce_vy(ball_vy, ball_y, paddle_yr);
            let bounced_l = bounce_vy(ball_vy, ball_y, paddle_yl);
            ball_vy = pick(hit_r, bounced_r, pick(hit_l, bounced_l, ball_vy));
            let reward = pick(hit_r, splat(0.0 + RETURN_REWARD), splat(0.0));

            // points: the ball left the field; serve from the centre
            let scored_r = lt(add(ball_x, splat(BALL)), splat(0.0));
            let scored_l = and_not(gt(ball_x, splat(WIDTH)), scored_r);
            let point = or(scored_r, scored_l);
            let reward = pick(
                scored_r,
                add(reward, splat(1.0)),
                pick(scored_l, sub(reward, splat(1.0)), reward),
            );
            let next = next_rng($b.rng);
            // (rng >> 8) < 2^24 converts exactly as a signed integer too
            let u = mul(
                _mm_cvtepi32_ps(_mm_srli_epi32::<8>(next)),
                splat(1.0 / 16777216.0),
            );
            let direction = pick(scored_r, splat(1.0), splat(-1.0));
            let serve_vy = mul(sub(mul(u, splat(2.0)), splat(1.0)), splat(SERVE_MAX_VY));
            ball_x = pick(point, splat((WIDTH - BALL) * 0.5), ball_x);
            let ball_y = pick(point, splat((HEIGHT - BALL) * 0.5), ball_y);
            ball_vx = pick(point, mul(splat(BALL_SPEED_X), direction), ball_vx);
            ball_vy = pick(point, serve_vy, ball_vy);

            $b.paddle_yl = pick(active, paddle_yl, $b.paddle_yl);
            $b.paddle_yr = pick(active, paddle_yr, $b.paddle_yr);
            $b.ball_x = pick(active, ball_x, $b.ball_x);
            $b.ball_y = pick(active, ball_y, $b.ball_y);
            $b.ball_vx = pick(active, ball_vx, $b.ball_vx);
            $b.ball_vy = pick(active, ball_vy, $b.ball_vy);
            // a true mask is -1: subtracting it adds one point
            $b.score_l = _mm_sub_epi32($b.score_l, _mm_castps_si128(and(active, scored_l)));
            $b.score_r = _mm_sub_epi32($b.score_r, _mm_castps_si128(and(active, scored_r)));
            $b.rng = pick_int(and(active, point), next, $b.rng);
            (reward, point)
        }};
    }

    /// `Pong::step` for `LANES` games at once: `envs`, `actions` and the outputs hold `LANES`.
    #[target_feature(enable = "sse4.1")]
    #[inline]
    pub fn step_block(
        envs: &mut [Pong],
        actions: &[i32],
        reward: &mut [f32],
        terminated: &mut [bool],
        truncated: &mut [bool],
    ) {
        let envs: &mut [Pong; LANES] = envs.try_into().expect("a block holds LANES games");
        let actions: &[i32; LANES] = actions.try_into().expect("one action per game");
        let mut block = Block {
            paddle_yl: floats(envs, |e| e.paddle_yl),
            paddle_yr: floats(envs, |e| e.paddle_yr),
            ball_x: floats(envs, |e| e.ball_x),
            ball_y: floats(envs, |e| e.ball_y),
            ball_vx: floats(envs, |e| e.ball_vx),
            ball_vy: floats(envs, |e| e.ball_vy),
            score_l: ints(envs, |e| e.score_l),
            score_r: ints(envs, |e| e.score_r),
            rng: ints(envs, |e| e.rng as i32),
        };
        let (up, down) = unsafe {
            let a = _mm_loadu_si128(actions.as_ptr().cast());
            (
                _mm_castsi128_ps(_mm_cmpeq_epi32(a, _mm_set1_epi32(1))),
                _mm_castsi128_ps(_mm_cmpeq_epi32(a, _mm_set1_epi32(2))),
            )
        };
        let mut active = _mm_castsi128_ps(_mm_set1_epi32(-1));
        let mut total = splat(0.0);
        for _ in 0..FRAMESKIP {
            let (r, point) = frame!(block, up, down, active);
            total = pick(active, add(total, r), total);
            active = and_not(active, point);
        }
        let (pyl, pyr) = (lanes_f(block.paddle_yl), lanes_f(block.paddle_yr));
        let (bx, by) = (lanes_f(block.ball_x), lanes_f(block.ball_y));
        let (vx, vy) = (lanes_f(block.ball_vx), lanes_f(block.ball_vy));
        let (sl, sr, rng) = (
            lanes_i(block.score_l),
            lanes_i(block.score_r),
            lanes_i(block.rng),
        );
        let total = lanes_f(total);
        for (l, env) in envs.iter_mut().enumerate() {
            env.paddle_yl = pyl[l];
            env.paddle_yr = pyr[l];
            env.ball_x = bx[l];
            env.ball_y = by[l];
            env.ball_vx = vx[l];
            env.ball_vy = vy[l];
            env.score_l = sl[l];
            env.score_r = sr[l];
            env.rng = rng[l] as u32;
            env.tick = env.tick.wrapping_add(1);
            let term = env.score_l >= WIN_SCORE || env.score_r >= WIN_SCORE;
            terminated[l] = term;
            truncated[l] = !term && env.tick >= MAX_TICKS;
            reward[l] = total[l];
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub use sse::LANES;

/// `Pong::step` for every game of `envs` (`actions` and the outputs hold one per game): whole
/// blocks of `LANES` in SSE4.1 registers where the CPU has them, the rest (or all, without
/// SSE4.1) one after another with the scalar step.
pub fn step_all(
    envs: &mut [crate::pong::Pong],
    actions: &[i32],
    reward: &mut [f32],
    terminated: &mut [bool],
    truncated: &mut [bool],
) {
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("sse4.1") {
        done = envs.len() / LANES * LANES;
        for start in (0..done).step_by(LANES) {
            let end = start + LANES;
            // SAFETY: the CPU has SSE4.1, the only target feature `sse::step_block` needs.
            unsafe {
                sse::step_block(
                    &mut envs[start..end],
                    &actions[start..end],
                    &mut reward[start..end],
                    &mut terminated[start..end],
                    &mut truncated[start..end],
                )
            };
        }
    }
    for i in done..envs.len() {
        let (r, term, trunc) = envs[i].step(actions[i]);
        reward[i] = r;
        terminated[i] = term;
        truncated[i] = trunc;
    }
}

#[cfg(not(target_arch = "x86_64"))]
pub const LANES: usize = 1;
