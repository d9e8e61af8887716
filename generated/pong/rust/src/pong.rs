//! Pong against a scripted opponent, one environment.
//!
//! Reference: `references/pong/pong.c`. Names, constants and the order of every float32
//! operation follow the C source, so that a strict build of both (no FMA: rustc never
//! contracts `a * b + c`, the C side is built with `-ffp-contract=off`) agrees bit for bit.
//! Randomness replicates the reference's xorshift32 generator, carried in the state as `rng`.

pub const FRAMESKIP: usize = 4; // physics frames per agent step (PONG_FRAMESKIP)
pub const OBS_SIZE: usize = 8;

pub(crate) const WIDTH: f32 = 640.0;
pub(crate) const HEIGHT: f32 = 480.0;
pub(crate) const PADDLE_W: f32 = 10.0;
pub(crate) const PADDLE_H: f32 = 80.0;
pub(crate) const PADDLE_MARGIN: f32 = 20.0;
pub(crate) const BALL: f32 = 10.0;
pub(crate) const PADDLE_SPEED: f32 = 8.0;
pub(crate) const OPPONENT_SPEED: f32 = 5.0;
pub(crate) const BALL_SPEED_X: f32 = 8.0;
pub(crate) const SERVE_MAX_VY: f32 = 4.0;
pub(crate) const MAX_VY: f32 = 10.0;
pub(crate) const SPEEDUP: f32 = 1.125;
pub(crate) const DEFLECT: f32 = 0.125;
pub(crate) const RETURN_REWARD: f32 = 0.1;
pub(crate) const WIN_SCORE: i32 = 21;
pub(crate) const MAX_TICKS: i32 = 10000;

pub(crate) const LEFT_X: f32 = PADDLE_MARGIN;
pub(crate) const RIGHT_X: f32 = WIDTH - PADDLE_MARGIN - PADDLE_W;

/// The whole state of one game: the fields of the C struct `Pong`, in its order.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Pong {
    pub paddle_yl: f32, // top edge of the scripted (left) paddle
    pub paddle_yr: f32, // top edge of the agent's (right) paddle
    pub ball_x: f32,    // left edge of the ball
    pub ball_y: f32,    // top edge of the ball
    pub ball_vx: f32,
    pub ball_vy: f32,
    pub score_l: i32, // points of the scripted player
    pub score_r: i32, // points of the agent
    pub tick: i32,    // agent steps taken in this episode
    pub rng: u32,     // xorshift32 state, never 0
}

pub(crate) fn next_rng(mut x: u32) -> u32 {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    x
}

fn seed_rng(seed: u32) -> u32 {
    let mut x = seed.wrapping_mul(747796405).wrapping_add(2891336453);
    x = ((x >> ((x >> 28) + 4)) ^ x).wrapping_mul(277803737);
    x = (x >> 22) ^ x;
    if x == 0 {
        1
    } else {
        x
    }
}

/// `v < lo ? lo : (v > hi ? hi : v)`, exactly (NaN passes through, as in the C helper).
fn clampf(v: f32, lo: f32, hi: f32) -> f32 {
    if v < lo {
        lo
    } else if v > hi {
        hi
    } else {
        v
    }
}

/// New vertical speed after a paddle hit: deflect by hit offset, speed up, cap.
fn bounce_vy(vy: f32, ball_y: f32, paddle_y: f32) -> f32 {
    let offset = (ball_y + BALL * 0.5) - (paddle_y + PADDLE_H * 0.5);
    clampf((vy + offset * DEFLECT) * SPEEDUP, -MAX_VY, MAX_VY)
}

impl Pong {
    fn uniform01(&mut self) -> f32 {
        self.rng = next_rng(self.rng);
        (self.rng >> 8) as f32 * (1.0 / 16777216.0)
    }

    /// Ball to the centre, moving towards `direction` (+1 right, -1 left), random vertical speed.
    fn serve(&mut self, direction: f32) {
        self.ball_x = (WIDTH - BALL) * 0.5;
        self.ball_y = (HEIGHT - BALL) * 0.5;
        self.ball_vx = BALL_SPEED_X * direction;
        self.ball_vy = (self.uniform01() * 2.0 - 1.0) * SERVE_MAX_VY;
    }

    pub fn reset(&mut self, seed: u32) {
        self.rng = seed_rng(seed);
        self.paddle_yl = (HEIGHT - PADDLE_H) * 0.5;
        self.paddle_yr = (HEIGHT - PADDLE_H) * 0.5;
        self.score_l = 0;
        self.score_r = 0;
        self.tick = 0;
        // the C call evaluates its argument (one draw) before serve draws again
        let direction = if self.uniform01() < 0.5 { -1.0 } else { 1.0 };
        self.serve(direction);
    }

    /// One physics frame. Returns the frame's reward and whether a point was scored.
    fn frame(&mut self, action: i32) -> (f32, bool) {
        let mut reward: f32 = 0.0;
        let mut point = false;
        let moved = if action == 1 {
            -PADDLE_SPEED
        } else if action == 2 {
            PADDLE_SPEED
        } else {
            0.0
        };
        self.paddle_yr = clampf(self.paddle_yr + moved, 0.0, HEIGHT - PADDLE_H);

        let target = self.ball_y - (PADDLE_H - BALL) * 0.5; // centre on the ball
        let chase = clampf(target - self.paddle_yl, -OPPONENT_SPEED, OPPONENT_SPEED);
        self.paddle_yl = clampf(self.paddle_yl + chase, 0.0, HEIGHT - PADDLE_H);

        self.ball_x += self.ball_vx;
        self.ball_y += self.ball_vy;

        // walls: reflect the overshoot
        if self.ball_y < 0.0 {
            self.ball_y = -self.ball_y;
            self.ball_vy = -self.ball_vy;
        } else if self.ball_y > HEIGHT - BALL {
            self.ball_y = 2.0 * (HEIGHT - BALL) - self.ball_y;
            self.ball_vy = -self.ball_vy;
        }

        // paddles: only a ball moving towards a paddle and overlapping it bounces
        let overlaps_r = self.ball_x + BALL >= RIGHT_X
            && self.ball_x <= RIGHT_X + PADDLE_W
            && self.ball_y + BALL >= self.paddle_yr
            && self.ball_y <= self.paddle_yr + PADDLE_H;
        let overlaps_l = self.ball_x <= LEFT_X + PADDLE_W
            && self.ball_x + BALL >= LEFT_X
            && self.ball_y + BALL >= self.paddle_yl
            && self.ball_y <= self.paddle_yl + PADDLE_H;
        if self.ball_vx > 0.0 && overlaps_r {
            self.ball_x = RIGHT_X - BALL;
            self.ball_vx = -self.ball_vx;
            self.ball_vy = bounce_vy(self.ball_vy, self.ball_y, self.paddle_yr);
            reward += RETURN_REWARD;
        } else if self.ball_vx < 0.0 && overlaps_l {
            self.ball_x = LEFT_X + PADDLE_W;
            self.ball_vx = -self.ball_vx;
            self.ball_vy = bounce_vy(self.ball_vy, self.ball_y, self.paddle_yl);
        }

        // points: the ball left the field
        if self.ball_x + BALL < 0.0 {
            self.score_r = self.score_r.wrapping_add(1);
            reward += 1.0;
            point = true;
            self.serve(1.0);
        } else if self.ball_x > WIDTH {
            self.score_l = self.score_l.wrapping_add(1);
            reward -= 1.0;
            point = true;
            self.serve(-1.0);
        }
        (reward, point)
    }

    /// One agent step: up to FRAMESKIP frames, cut short by a point. Returns
    /// `(reward, terminated, truncated)`; a finished game is not reset here.
    pub fn step(&mut self, action: i32) -> (f32, bool, bool) {
        let mut total: f32 = 0.0;
        for _ in 0..FRAMESKIP {
            let (reward, point) = self.frame(action);
            total += reward;
            if point {
                break; // the rest of the skipped frames are not simulated
            }
        }
        self.tick = self.tick.wrapping_add(1);
        let terminated = self.score_l >= WIN_SCORE || self.score_r >= WIN_SCORE;
        let truncated = !terminated && self.tick >= MAX_TICKS;
        (total, terminated, truncated)
    }

    pub fn observe(&self, obs: &mut [f32]) {
        obs[0] = (self.paddle_yr + PADDLE_H * 0.5) * (1.0 / HEIGHT);
        obs[1] = (self.paddle_yl + PADDLE_H * 0.5) * (1.0 / HEIGHT);
        obs[2] = (self.ball_x + BALL * 0.5) * (1.0 / WIDTH);
        obs[3] = (self.ball_y + BALL * 0.5) * (1.0 / HEIGHT);
        obs[4] = self.ball_vx * (1.0 / BALL_SPEED_X);
        obs[5] = self.ball_vy * (1.0 / MAX_VY);
        obs[6] = self.score_l as f32 * (1.0 / WIN_SCORE as f32);
        obs[7] = self.score_r as f32 * (1.0 / WIN_SCORE as f32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_serves_from_the_centre() {
        let mut env = Pong::default();
        env.reset(7);
        assert_eq!(env.ball_x, 315.0);
        assert_eq!(env.ball_vx.abs(), BALL_SPEED_X);
        assert!(env.ball_vy.abs() <= SERVE_MAX_VY);
        assert_ne!(env.rng, 0);
    }

    #[test]
    fn seed_zero_never_yields_a_zero_generator() {
        for seed in 0..10_000u32 {
            assert_ne!(seed_rng(seed), 0);
        }
    }
}
