// envforge's draw interface for Rust ports (docs/RUST.md, "Randomness inside step").
//
// Copy this file verbatim into the crate as `src/draws.rs` and declare `mod draws;` in lib.rs.
// An env whose reference draws inside `step` (`[rng] step = "tape"` or `"distribution"`) takes
// every random number through `Draws`, in the reference's order and of the reference's kind:
//
//     fn step<D: Draws>(&mut self, action: i32, draws: &mut D) -> (f32, bool, bool) {
//         let card = DECK[draws.choice(13)];          // np_random.choice(deck)
//         if draws.random() < 0.25 { ... }            // np_random.random()
//
// Two implementations:
// * `Rng`: the port's own generator (xoshiro256++), one per env, seeded at reset; `step`
//   (benchmarks, training, envforge.make) passes it. Nothing is logged; it costs a few integer
//   operations per draw.
// * `Tape`: verification. Each draw returns the reference's next recorded value (or, without a
//   tape, a value from a generator seeded from the row's seed) and is logged: kind, parameters,
//   value and the port line that asked (`#[track_caller]`), which envforge accounts draw by draw
//   against the reference's (an `rng.tape` finding names the first draw that differs). Values
//   are clamped into the range the port asked, so a port that asks the wrong range gets a
//   finding, not an out-of-bounds panic. `step_rows` runs a batch's rows through it for the
//   port's `step_draws` method.
//
// Kind codes and parameters are envforge/rng/draws.py's: 1 random [0, 1), 2 uniform [a, b),
// 3 integers [a, b), 4 choice of a items (b: a fingerprint of the weights, 0 when uniform),
// 5 normal(mean a, std b). `shuffle` is Fisher-Yates from the end, one integers[0, i + 1) per
// position, as the recorder logs numpy's and Python's shuffles.

#![allow(dead_code)]

use numpy::{
    PyReadonlyArray1, PyReadonlyArray2, PyReadwriteArray1, PyReadwriteArray2, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyKeyError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::panic::Location;
use std::sync::Mutex;

pub const RANDOM: i8 = 1;
pub const UNIFORM: i8 = 2;
pub const INTEGERS: i8 = 3;
pub const CHOICE: i8 = 4;
pub const NORMAL: i8 = 5;

/// Where a port's random numbers come from. Every method is one logged draw (`shuffle` one per
/// position); the line that calls it is the draw's site.
pub trait Draws {
    /// A float on [0, 1) (numpy `random()`, Python `random.random()`).
    #[track_caller]
    fn random(&mut self) -> f64;
    /// A float on [low, high).
    #[track_caller]
    fn uniform(&mut self, low: f64, high: f64) -> f64;
    /// An integer on [low, high).
    #[track_caller]
    fn integers(&mut self, low: i64, high: i64) -> i64;
    /// The index of an element of a sequence of `n` (numpy `choice(seq)`, Python `choice`).
    #[track_caller]
    fn choice(&mut self, n: usize) -> usize;
    /// The index of an element drawn with weights `p` (numpy `choice(seq, p=p)`).
    #[track_caller]
    fn choice_weighted(&mut self, p: &[f64]) -> usize;
    /// A normal with mean `mean` and standard deviation `std`.
    #[track_caller]
    fn normal(&mut self, mean: f64, std: f64) -> f64;
    /// Fisher-Yates from the end, as numpy's and Python's `shuffle` are recorded.
    #[track_caller]
    fn shuffle<T>(&mut self, x: &mut [T]) {
        for i in (1..x.len()).rev() {
            let j = self.integers(0, i as i64 + 1) as usize;
            x.swap(i, j);
        }
    }
}

/// The fingerprint of choice weights the recorder logs: sum of p[i] * (i + 1).
pub fn weights_fingerprint(p: &[f64]) -> f64 {
    p.iter().enumerate().map(|(i, w)| w * (i + 1) as f64).sum()
}

// ---- the port's own generator -------------------------------------------------------------

/// xoshiro256++ seeded through splitmix64: the port's own numbers outside verification.
#[derive(Clone, Copy, Debug, Default)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Rng {
            s: [next(), next(), next(), next()],
        }
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let out = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        out
    }

    #[inline]
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Unbiased integer on [0, range) (Lemire's multiply-and-reject); 0 when range is 0.
    #[inline]
    fn below(&mut self, range: u64) -> u64 {
        if range == 0 {
            return 0;
        }
        let threshold = range.wrapping_neg() % range;
        loop {
            let m = (self.next_u64() as u128) * (range as u128);
            if (m as u64) >= threshold {
                return (m >> 64) as u64;
            }
        }
    }

    fn weighted(&mut self, p: &[f64]) -> usize {
        let total: f64 = p.iter().sum();
        let u = self.unit() * total;
        let mut acc = 0.0;
        for (i, w) in p.iter().enumerate() {
            acc += w;
            if u < acc {
                return i;
            }
        }
        p.len().saturating_sub(1)
    }

    fn gaussian(&mut self) -> f64 {
        let u1 = 1.0 - self.unit(); // (0, 1]
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

impl Draws for Rng {
    #[inline]
    fn random(&mut self) -> f64 {
        self.unit()
    }
    #[inline]
    fn uniform(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.unit()
    }
    #[inline]
    fn integers(&mut self, low: i64, high: i64) -> i64 {
        low.wrapping_add(self.below(high.wrapping_sub(low).max(0) as u64) as i64)
    }
    #[inline]
    fn choice(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }
    fn choice_weighted(&mut self, p: &[f64]) -> usize {
        self.weighted(p)
    }
    fn normal(&mut self, mean: f64, std: f64) -> f64 {
        mean + std * self.gaussian()
    }
}

// ---- verification: the tape and the log ---------------------------------------------------

static SITES: Mutex<Vec<(&str, u32)>> = Mutex::new(Vec::new());

/// The id of a source line in `sites()`.
fn site_id(at: &'static Location<'static>) -> i32 {
    let key = (at.file(), at.line());
    let mut sites = SITES.lock().unwrap_or_else(|e| e.into_inner());
    match sites.iter().position(|s| *s == key) {
        Some(i) => i as i32,
        None => {
            sites.push(key);
            (sites.len() - 1) as i32
        }
    }
}

/// Every site a log's `site` column may name, as `file:line` (files relative to the crate).
pub fn sites() -> Vec<String> {
    let sites = SITES.lock().unwrap_or_else(|e| e.into_inner());
    sites.iter().map(|(f, l)| format!("{f}:{l}")).collect()
}

/// One env's draws in one step under verification: values from the reference's tape (or from a
/// generator seeded from the row's seed when there is none), every ask logged.
pub struct Tape<'a> {
    tape: Option<&'a [f64]>,
    own: Rng,
    drawn: usize,
    kind: &'a mut [i8],
    a: &'a mut [f64],
    b: &'a mut [f64],
    value: &'a mut [f64],
    site: &'a mut [i32],
}

impl<'a> Tape<'a> {
    /// Draws asked so far (may pass the log's length: the extra ones are counted, not logged).
    pub fn count(&self) -> usize {
        self.drawn
    }

    /// The next value: the tape's (0 past its end) or the own generator's; logged.
    fn take(&mut self, kind: i8, a: f64, b: f64, own: f64, at: &'static Location<'static>) -> f64 {
        let j = self.drawn;
        self.drawn += 1;
        let v = match self.tape {
            Some(tape) => tape.get(j).copied().unwrap_or(0.0),
            None => own,
        };
        let v = clamp(kind, a, b, v);
        if j < self.kind.len() {
            self.kind[j] = kind;
            self.a[j] = a;
            self.b[j] = b;
            self.value[j] = v;
            self.site[j] = site_id(at);
        }
        v
    }
}

/// A tape value inside the range the port asked (a wrong range is a finding, not a panic).
fn clamp(kind: i8, a: f64, b: f64, v: f64) -> f64 {
    let v = if v.is_nan() { a } else { v };
    match kind {
        RANDOM => v.clamp(0.0, 1.0 - f64::EPSILON / 2.0),
        UNIFORM if b > a => v.clamp(a, b),
        INTEGERS if b > a => v.clamp(a, b - 1.0).floor(),
        CHOICE if a >= 1.0 => v.clamp(0.0, a - 1.0).floor(),
        _ => v,
    }
}

impl Draws for Tape<'_> {
    #[track_caller]
    fn random(&mut self) -> f64 {
        let own = self.own.random();
        self.take(RANDOM, 0.0, 1.0, own, Location::caller())
    }
    #[track_caller]
    fn uniform(&mut self, low: f64, high: f64) -> f64 {
        let own = self.own.uniform(low, high);
        self.take(UNIFORM, low, high, own, Location::caller())
    }
    #[track_caller]
    fn integers(&mut self, low: i64, high: i64) -> i64 {
        let own = self.own.integers(low, high) as f64;
        self.take(INTEGERS, low as f64, high as f64, own, Location::caller()) as i64
    }
    #[track_caller]
    fn choice(&mut self, n: usize) -> usize {
        let own = self.own.choice(n) as f64;
        self.take(CHOICE, n as f64, 0.0, own, Location::caller()) as usize
    }
    #[track_caller]
    fn choice_weighted(&mut self, p: &[f64]) -> usize {
        let own = self.own.choice_weighted(p) as f64;
        let at = Location::caller();
        self.take(CHOICE, p.len() as f64, weights_fingerprint(p), own, at) as usize
    }
    #[track_caller]
    fn normal(&mut self, mean: f64, std: f64) -> f64 {
        let own = self.own.normal(mean, std);
        self.take(NORMAL, mean, std, own, Location::caller())
    }
}

/// Item `$name` of the draw log dict, as `$ty` (a clear error when missing or mistyped).
macro_rules! log_item {
    ($log:expr, $name:literal, $ty:ty) => {
        $log.get_item($name)?
            .ok_or_else(|| PyKeyError::new_err(concat!("draw log lacks ", $name)))?
            .extract::<$ty>()
            .map_err(|e| PyValueError::new_err(format!("draw log {}: {e}", $name)))?
    };
}

fn flat<'s, T>(
    name: &str,
    values: Result<&'s mut [T], numpy::AsSliceError>,
    want: usize,
) -> PyResult<&'s mut [T]> {
    let values = values.map_err(|e| PyValueError::new_err(format!("draw log {name}: {e}")))?;
    if values.len() != want {
        return Err(PyValueError::new_err(format!(
            "draw log {name} has {} elements, expected {want}",
            values.len()
        )));
    }
    Ok(values)
}

/// Runs `step(i, tape)` for every row `i < n` of a batch under verification, with row `i`'s
/// tape and log from the dict envforge passes to `step_draws`: `tape` float64[n, K], `taped`
/// bool, `seeds` uint64[n], and the log it fills, `kind` int8[n, K], `a`, `b`, `value`
/// float64[n, K], `site` int32[n, K], `count` int32[n]. Returns the sites (`sites()`).
pub fn step_rows<F>(log: &Bound<'_, PyDict>, n: usize, mut step: F) -> PyResult<Vec<String>>
where
    F: FnMut(usize, &mut Tape<'_>),
{
    let tape = log_item!(log, "tape", PyReadonlyArray2<'_, f64>);
    let taped = log_item!(log, "taped", bool);
    let seeds = log_item!(log, "seeds", PyReadonlyArray1<'_, u64>);
    let mut kind = log_item!(log, "kind", PyReadwriteArray2<'_, i8>);
    let mut a = log_item!(log, "a", PyReadwriteArray2<'_, f64>);
    let mut b = log_item!(log, "b", PyReadwriteArray2<'_, f64>);
    let mut value = log_item!(log, "value", PyReadwriteArray2<'_, f64>);
    let mut site = log_item!(log, "site", PyReadwriteArray2<'_, i32>);
    let mut count = log_item!(log, "count", PyReadwriteArray1<'_, i32>);
    let size = tape.shape()[1];
    let tape = tape
        .as_slice()
        .map_err(|e| PyValueError::new_err(format!("draw log tape: {e}")))?;
    let seeds = seeds
        .as_slice()
        .map_err(|e| PyValueError::new_err(format!("draw log seeds: {e}")))?;
    if tape.len() != n * size || seeds.len() != n {
        return Err(PyValueError::new_err(format!(
            "draw log: tape has {} values and seeds {}, expected {n} x {size} and {n}",
            tape.len(),
            seeds.len()
        )));
    }
    let kind = flat("kind", kind.as_slice_mut(), n * size)?;
    let a = flat("a", a.as_slice_mut(), n * size)?;
    let b = flat("b", b.as_slice_mut(), n * size)?;
    let value = flat("value", value.as_slice_mut(), n * size)?;
    let site = flat("site", site.as_slice_mut(), n * size)?;
    let count = flat("count", count.as_slice_mut(), n)?;
    for i in 0..n {
        let row = i * size..(i + 1) * size;
        let mut draws = Tape {
            tape: if taped {
                Some(&tape[row.clone()])
            } else {
                None
            },
            own: Rng::new(seeds[i]),
            drawn: 0,
            kind: &mut kind[row.clone()],
            a: &mut a[row.clone()],
            b: &mut b[row.clone()],
            value: &mut value[row.clone()],
            site: &mut site[row],
        };
        step(i, &mut draws);
        count[i] = draws.count().min(i32::MAX as usize) as i32;
    }
    Ok(sites())
}
