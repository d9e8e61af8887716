//! `taxi_rust`: Taxi-v4 (rainy, fickle passenger) as a Python extension that steps a whole
//! batch in one call.
//!
//! Python sees one class, `EnvBatch(num_envs, strict_float=False)` (`strict_float` is accepted
//! and ignored: the only floats are the reference's float64 probabilities, computed as it does):
//!   reset(seeds: uint32[n])                          resizes the batch to n and resets it
//!   reset_where(done: bool[n], seeds: uint32[n])     resets env i from seeds[i] where done[i]
//!   step(actions: int32[n], obs: float32[n], reward: float32[n],
//!        terminated: bool[n], truncated: bool[n])    steps every env, draws from its own Rng
//!   step_draws(actions, obs, reward, terminated, truncated, log: dict) -> list[str]
//!                                                    the same step with the draws from the
//!                                                    RNG tape, every draw logged (src/draws.rs)
//!   observe(obs: float32[n])
//!   get_state() -> dict[str, ndarray[n]]             the canonical `s`, `fickle_step`, `time`
//!   set_state(fields: dict[str, ndarray[n]])         resizes the batch to n and loads it
//! `step` runs the envs in parallel with rayon, with the GIL released.

mod draws;
mod taxi;

use numpy::{
    PyArray1, PyReadonlyArray1, PyReadonlyArrayDyn, PyReadwriteArray1, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyKeyError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rayon::prelude::*;

use draws::Rng;
use taxi::Taxi;

/// Fewest envs per rayon task: below this, scheduling costs more than stepping.
const MIN_CHUNK: usize = 1024;

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

/// Env `i`'s own generator, from its reset seed (or, for envs loaded by `set_state`, its index).
fn own_rng(seed: u64) -> Rng {
    Rng::new(seed ^ 0x7A41_0000_0000_0000)
}

/// The step's buffers, checked against the batch size.
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
        obs: &'a mut PyReadwriteArray1<'_, f32>,
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
        expect_len("obs", out.obs.len(), n)?;
        expect_len("reward", out.reward.len(), n)?;
        expect_len("terminated", out.terminated.len(), n)?;
        expect_len("truncated", out.truncated.len(), n)?;
        Ok(out)
    }
}

/// One canonical column of `n` envs (`n` from the first column read).
fn column<T: numpy::Element + Copy>(
    fields: &Bound<'_, PyDict>,
    name: &str,
    batch: Option<usize>,
) -> PyResult<Vec<T>> {
    let item = fields
        .get_item(name)?
        .ok_or_else(|| PyKeyError::new_err(format!("canonical state lacks field {name}")))?;
    let array = item
        .extract::<PyReadonlyArrayDyn<'_, T>>()
        .map_err(|e| field_error(name, e))?;
    let n = array.shape().first().copied().unwrap_or(0);
    let values = array.as_slice().map_err(|e| field_error(name, e))?.to_vec();
    expect_len(name, values.len(), batch.unwrap_or(n))?;
    Ok(values)
}

#[pyclass(module = "taxi_rust")]
struct EnvBatch {
    envs: Vec<Taxi>,
    /// Each env's own generator (not canonical state): the draws of `step`.
    rngs: Vec<Rng>,
}

#[pymethods]
impl EnvBatch {
    #[new]
    #[pyo3(signature = (num_envs, strict_float = false))]
    fn new(num_envs: usize, strict_float: bool) -> Self {
        let _ = strict_float;
        Self {
            envs: vec![Taxi::default(); num_envs],
            rngs: (0..num_envs as u64).map(own_rng).collect(),
        }
    }

    #[getter]
    fn num_envs(&self) -> usize {
        self.envs.len()
    }

    fn reset(&mut self, seeds: PyReadonlyArray1<'_, u32>) -> PyResult<()> {
        let seeds = seeds.as_slice().map_err(|e| field_error("seeds", e))?;
        self.envs.resize(seeds.len(), Taxi::default());
        self.rngs.resize(seeds.len(), Rng::default());
        for ((env, rng), &seed) in self.envs.iter_mut().zip(&mut self.rngs).zip(seeds) {
            *rng = own_rng(seed as u64);
            env.reset(rng);
        }
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

    /// One step of every env, the draws from each env's own generator.
    fn step(
        &mut self,
        py: Python<'_>,
        actions: PyReadonlyArray1<'_, i32>,
        mut obs: PyReadwriteArray1<'_, f32>,
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
                out.obs.par_chunks_mut(chunk),
                out.reward.par_chunks_mut(chunk),
                out.terminated.par_chunks_mut(chunk),
                out.truncated.par_chunks_mut(chunk),
            )
                .into_par_iter()
                .for_each(
                    |(envs, rngs, actions, obs, reward, terminated, truncated)| {
                        for (k, (env, rng)) in envs.iter_mut().zip(rngs).enumerate() {
                            (reward[k], terminated[k], truncated[k]) = env.step(actions[k], rng);
                            env.observe(&mut obs[k]);
                        }
                    },
                )
        });
        Ok(())
    }

    /// The same step under verification: the draws from the reference's tape in `log`, every
    /// draw logged there (`draws::step_rows`). Returns the draw sites.
    fn step_draws(
        &mut self,
        actions: PyReadonlyArray1<'_, i32>,
        mut obs: PyReadwriteArray1<'_, f32>,
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
            env.observe(&mut out.obs[k]);
        })
    }

    fn observe(&self, mut obs: PyReadwriteArray1<'_, f32>) -> PyResult<()> {
        let obs = obs.as_slice_mut().map_err(|e| field_error("obs", e))?;
        expect_len("obs", obs.len(), self.envs.len())?;
        for (env, out) in self.envs.iter().zip(obs.iter_mut()) {
            env.observe(out);
        }
        Ok(())
    }

    fn get_state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let fields = PyDict::new(py);
        let s: Vec<i32> = self.envs.iter().map(|e| e.s).collect();
        let fickle: Vec<bool> = self.envs.iter().map(|e| e.fickle_step).collect();
        let time: Vec<i32> = self.envs.iter().map(|e| e.time).collect();
        fields.set_item("s", PyArray1::from_vec(py, s))?;
        fields.set_item("fickle_step", PyArray1::from_vec(py, fickle))?;
        fields.set_item("time", PyArray1::from_vec(py, time))?;
        Ok(fields)
    }

    fn set_state(&mut self, fields: &Bound<'_, PyDict>) -> PyResult<()> {
        let s = column::<i32>(fields, "s", None)?;
        let n = s.len();
        let fickle = column::<bool>(fields, "fickle_step", Some(n))?;
        let time = column::<i32>(fields, "time", Some(n))?;
        self.envs.resize(n, Taxi::default());
        if self.rngs.len() != n {
            self.rngs = (0..n as u64).map(own_rng).collect();
        }
        for (k, env) in self.envs.iter_mut().enumerate() {
            env.s = s[k];
            env.fickle_step = fickle[k];
            env.time = time[k];
        }
        Ok(())
    }
}

#[pymodule]
fn taxi_rust(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<EnvBatch>()?;
    m.add("FIELDS", vec!["s", "fickle_step", "time"])?;
    Ok(())
}
