//! `blackjack_rust`: Blackjack-v1 as a Python extension that steps a whole batch in one call.
//!
//! Python sees one class, `EnvBatch(num_envs, strict_float=False)` (integer game: `strict_float`
//! is accepted and ignored):
//!   reset(seeds: uint32[n])                          resizes the batch to n and resets it
//!   reset_where(done: bool[n], seeds: uint32[n])     resets env i from seeds[i] where done[i]
//!   step(actions: int32[n], obs: float32[n, 3], reward: float32[n],
//!        terminated: bool[n], truncated: bool[n])    steps every env, cards from its own Rng
//!   step_draws(actions, obs, reward, terminated, truncated, log: dict) -> list[str]
//!                                                    the same step with cards from the RNG
//!                                                    tape, every draw logged (src/draws.rs)
//!   observe(obs: float32[n, 3])
//!   get_state() -> dict[str, ndarray[n, 24]]         the canonical `player` and `dealer`
//!   set_state(fields: dict[str, ndarray[n, 24]])     resizes the batch to n and loads it
//! `step` runs the envs in parallel with rayon, with the GIL released.

mod blackjack;
mod draws;

use numpy::{
    PyArray1, PyArrayMethods, PyReadonlyArray1, PyReadonlyArrayDyn, PyReadwriteArray1,
    PyReadwriteArray2, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyKeyError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rayon::prelude::*;

use blackjack::{Blackjack, HAND, OBS_SIZE};
use draws::Rng;

/// Fewest envs per rayon task: below this, scheduling costs more than stepping.
const MIN_CHUNK: usize = 256;

fn chunk_size(n: usize) -> usize {
    n.div_ceil(rayon::current_num_threads() * 4).max(MIN_CHUNK)
}

fn field_error(name: &str, error: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(format!("field {name}: {error}"))
}
#[track_caller]
fn expect_len(what: &str, got: usize, want: usize) -> PyResult<()> {
    if got == want {
        Ok(())
    } else {
        let at = std::panic::Location::caller(); // the caller's line, as a panic would say
        let at = format!("{}:{}:{}", at.file(), at.line(), at.column());
        Err(PyValueError::new_err(format!("{what} has {got} elements, expected {want} (at {at})")))
    }
}

/// The seed of env `i`'s own generator: the reset seed (and, for envs loaded by `set_state`,
/// their index), so two envs reset from different seeds draw different cards.
fn own_rng(seed: u64) -> Rng {
    Rng::new(seed ^ 0xB1AC_4AC0_0000_0000)
}

/// The step's output buffers, checked against the batch size.
struct Outputs<'a> {
    actions: &'a [i32],
    obs: &'a mut [f32],
    reward: &'a mut [f32],
    terminated: &'a mut [bool],
    truncated: &'a mut [bool],
}

impl<'a> Outputs<'a> {
    fn new(
        n: usize,
        actions: &'a PyReadonlyArray1<'_, i32>,
        obs: &'a mut PyReadwriteArray2<'_, f32>,
        reward: &'a mut PyReadwriteArray1<'_, f32>,
        terminated: &'a mut PyReadwriteArray1<'_, bool>,
        truncated: &'a mut PyReadwriteArray1<'_, bool>,
    ) -> PyResult<Self> {
        let out = Outputs {
            actions: actions.as_slice().map_err(|e| field_error("actions", e))?,
            obs: obs.as_slice_mut().map_err(|e| field_error("obs", e))?,
            reward: reward
                .as_slice_mut()
                .map_err(|e| field_error("reward", e))?,
            terminated: terminated
                .as_slice_mut()
                .map_err(|e| field_error("terminated", e))?,
            truncated: truncated
                .as_slice_mut()
                .map_err(|e| field_error("truncated", e))?,
        };
        expect_len("actions", out.actions.len(), n)?;
        expect_len("obs", out.obs.len(), n * OBS_SIZE)?;
        expect_len("reward", out.reward.len(), n)?;
        expect_len("terminated", out.terminated.len(), n)?;
        expect_len("truncated", out.truncated.len(), n)?;
        Ok(out)
    }
}

#[pyclass(module = "blackjack_rust")]
struct EnvBatch {
    envs: Vec<Blackjack>,
    /// Each env's own generator (not canonical state): the cards of `reset` and `step`.
    rngs: Vec<Rng>,
}

#[pymethods]
impl EnvBatch {
    #[new]
    #[pyo3(signature = (num_envs, strict_float = false))]
    fn new(num_envs: usize, strict_float: bool) -> Self {
        let _ = strict_float;
        Self {
            envs: vec![Blackjack::default(); num_envs],
            rngs: (0..num_envs as u64).map(own_rng).collect(),
        }
    }

    #[getter]
    fn num_envs(&self) -> usize {
        self.envs.len()
    }

    fn reset(&mut self, py: Python<'_>, seeds: PyReadonlyArray1<'_, u32>) -> PyResult<()> {
        let seeds = seeds.as_slice().map_err(|e| field_error("seeds", e))?;
        self.envs.resize(seeds.len(), Blackjack::default());
        self.rngs.resize(seeds.len(), Rng::default());
        let (envs, rngs) = (&mut self.envs, &mut self.rngs);
        let chunk = chunk_size(envs.len());
        py.detach(|| {
            (
                envs.par_chunks_mut(chunk),
                rngs.par_chunks_mut(chunk),
                seeds.par_chunks(chunk),
            )
                .into_par_iter()
                .for_each(|(envs, rngs, seeds)| {
                    for ((env, rng), &seed) in envs.iter_mut().zip(rngs).zip(seeds) {
                        *rng = own_rng(seed as u64);
                        env.reset(rng);
                    }
                })
        });
        Ok(())
    }

    /// Resets the envs whose `done` is true, env `i` from `seeds[i]` (auto-reset).
    fn reset_where(
        &mut self,
        py: Python<'_>,
        done: PyReadonlyArray1<'_, bool>,
        seeds: PyReadonlyArray1<'_, u32>,
    ) -> PyResult<()> {
        let n = self.envs.len();
        let done = done.as_slice().map_err(|e| field_error("done", e))?;
        let seeds = seeds.as_slice().map_err(|e| field_error("seeds", e))?;
        expect_len("done", done.len(), n)?;
        expect_len("seeds", seeds.len(), n)?;
        let (envs, rngs) = (&mut self.envs, &mut self.rngs);
        let chunk = chunk_size(n);
        py.detach(|| {
            (
                envs.par_chunks_mut(chunk),
                rngs.par_chunks_mut(chunk),
                done.par_chunks(chunk),
                seeds.par_chunks(chunk),
            )
                .into_par_iter()
                .for_each(|(envs, rngs, done, seeds)| {
                    for (k, (env, rng)) in envs.iter_mut().zip(rngs).enumerate() {
                        if done[k] {
                            *rng = own_rng(seeds[k] as u64);
                            env.reset(rng);
                        }
                    }
                })
        });
        Ok(())
    }

    /// One step of every env, the cards from each env's own generator.
    fn step(
        &mut self,
        py: Python<'_>,
        actions: PyReadonlyArray1<'_, i32>,
        mut obs: PyReadwriteArray2<'_, f32>,
        mut reward: PyReadwriteArray1<'_, f32>,
        mut terminated: PyReadwriteArray1<'_, bool>,
        mut truncated: PyReadwriteArray1<'_, bool>,
    ) -> PyResult<()> {
        let n = self.envs.len();
        let out = Outputs::new(
            n,
            &actions,
            &mut obs,
            &mut reward,
            &mut terminated,
            &mut truncated,
        )?;
        let (envs, rngs) = (&mut self.envs, &mut self.rngs);
        let chunk = chunk_size(n);
        py.detach(|| {
            (
                envs.par_chunks_mut(chunk),
                rngs.par_chunks_mut(chunk),
                out.actions.par_chunks(chunk),
                out.obs.par_chunks_mut(chunk * OBS_SIZE),
                out.reward.par_chunks_mut(chunk),
                out.terminated.par_chunks_mut(chunk),
                out.truncated.par_chunks_mut(chunk),
            )
                .into_par_iter()
                .for_each(
                    |(envs, rngs, actions, obs, reward, terminated, truncated)| {
                        for (k, (env, rng)) in envs.iter_mut().zip(rngs).enumerate() {
                            (reward[k], terminated[k], truncated[k]) = env.step(actions[k], rng);
                            env.observe(&mut obs[k * OBS_SIZE..(k + 1) * OBS_SIZE]);
                        }
                    },
                )
        });
        Ok(())
    }

    /// The same step under verification: the cards from the reference's tape in `log`, every
    /// draw logged there (`draws::step_rows`). Returns the draw sites.
    fn step_draws(
        &mut self,
        actions: PyReadonlyArray1<'_, i32>,
        mut obs: PyReadwriteArray2<'_, f32>,
        mut reward: PyReadwriteArray1<'_, f32>,
        mut terminated: PyReadwriteArray1<'_, bool>,
        mut truncated: PyReadwriteArray1<'_, bool>,
        log: &Bound<'_, PyDict>,
    ) -> PyResult<Vec<String>> {
        let n = self.envs.len();
        let out = Outputs::new(
            n,
            &actions,
            &mut obs,
            &mut reward,
            &mut terminated,
            &mut truncated,
        )?;
        let envs = &mut self.envs;
        draws::step_rows(log, n, |k, tape| {
            let env = &mut envs[k];
            (out.reward[k], out.terminated[k], out.truncated[k]) = env.step(out.actions[k], tape);
            env.observe(&mut out.obs[k * OBS_SIZE..(k + 1) * OBS_SIZE]);
        })
    }

    fn observe(&self, mut obs: PyReadwriteArray2<'_, f32>) -> PyResult<()> {
        let obs = obs.as_slice_mut().map_err(|e| field_error("obs", e))?;
        expect_len("obs", obs.len(), self.envs.len() * OBS_SIZE)?;
        for (env, out) in self.envs.iter().zip(obs.chunks_exact_mut(OBS_SIZE)) {
            env.observe(out);
        }
        Ok(())
    }

    fn get_state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let n = self.envs.len();
        let fields = PyDict::new(py);
        let player: Vec<i32> = self.envs.iter().flat_map(|e| e.player).collect();
        let dealer: Vec<i32> = self.envs.iter().flat_map(|e| e.dealer).collect();
        fields.set_item("player", PyArray1::from_vec(py, player).reshape([n, HAND])?)?;
        fields.set_item("dealer", PyArray1::from_vec(py, dealer).reshape([n, HAND])?)?;
        Ok(fields)
    }

    fn set_state(&mut self, fields: &Bound<'_, PyDict>) -> PyResult<()> {
        let mut columns = Vec::new();
        for name in ["player", "dealer"] {
            let item = fields.get_item(name)?.ok_or_else(|| {
                PyKeyError::new_err(format!("canonical state lacks field {name}"))
            })?;
            let array = item
                .extract::<PyReadonlyArrayDyn<'_, i32>>()
                .map_err(|e| field_error(name, e))?;
            let n = array.shape().first().copied().unwrap_or(0);
            let values = array.as_slice().map_err(|e| field_error(name, e))?.to_vec();
            expect_len(name, values.len(), n * HAND)?;
            columns.push((values, n));
        }
        let n = columns[0].1;
        expect_len("field dealer's batch", columns[1].1, n)?;
        self.envs.resize(n, Blackjack::default());
        if self.rngs.len() != n {
            self.rngs = (0..n as u64).map(own_rng).collect();
        }
        for (k, env) in self.envs.iter_mut().enumerate() {
            env.player
                .copy_from_slice(&columns[0].0[k * HAND..(k + 1) * HAND]);
            env.dealer
                .copy_from_slice(&columns[1].0[k * HAND..(k + 1) * HAND]);
        }
        Ok(())
    }
}

#[pymodule]
fn blackjack_rust(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<EnvBatch>()?;
    m.add("FIELDS", vec!["player", "dealer"])?;
    m.add("OBS_SHAPE", (OBS_SIZE,))?;
    Ok(())
}
