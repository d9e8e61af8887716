//! `pong_rust`: the Pong port as a Python extension that steps a whole batch in one call.
//!
//! Python sees one class, `EnvBatch(num_envs, strict_float=False)`:
//!   reset(seeds: uint32[n])                          resizes the batch to n and resets it
//!   reset_where(done: bool[n], seeds: uint32[n])     resets env i from seeds[i] where done[i]
//!   step(actions: int32[n], obs: float32[n, 8], reward: float32[n],
//!        terminated: bool[n], truncated: bool[n])    steps every env, writes into the buffers
//!   observe(obs: float32[n, 8])
//!   get_state() -> dict[str, ndarray[n]]             the canonical state of references/pong
//!   set_state(fields: dict[str, ndarray[n]])         resizes the batch to n and loads it
//! Environments are stepped in parallel with rayon (about four chunks per thread), with the GIL released
//! and nothing allocated inside `step`; within a chunk, four at a time in SIMD lanes (`lanes.rs`).

mod float_mode;
mod lanes;
mod pong;

use numpy::{PyArray1, PyReadonlyArray1, PyReadwriteArray1, PyReadwriteArray2};
use pyo3::exceptions::{PyKeyError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rayon::prelude::*;

use float_mode::FlushDenormals;
use lanes::{step_all, LANES};
use pong::{Pong, OBS_SIZE};

/// Fewest envs per rayon task: below this, scheduling costs more than stepping.
const MIN_CHUNK: usize = 256;

/// Envs per rayon task: about four tasks per thread, so every core gets work at batch 1k too;
/// a whole number of SIMD blocks.
fn chunk_size(n: usize) -> usize {
    n.div_ceil(rayon::current_num_threads() * 4)
        .max(MIN_CHUNK)
        .next_multiple_of(LANES)
}

/// The canonical state: one numpy column per field of `Pong`, named as in env.toml.
macro_rules! canonical_fields {
    ($($name:ident: $ty:ty),* $(,)?) => {
        const FIELDS: &[&str] = &[$(stringify!($name)),*];

        fn state_to_dict<'py>(py: Python<'py>, envs: &[Pong]) -> PyResult<Bound<'py, PyDict>> {
            $( let mut $name: Vec<$ty> = vec![<$ty>::default(); envs.len()]; )*
            {
                // every column filled in one pass over the envs, chunks across threads (a
                // pass per column, on one thread, was most of the verifier's reset sweep)
                struct Columns<'a> { $($name: &'a mut [$ty]),* }
                let chunk = chunk_size(envs.len());
                let mut parts = Vec::new();
                let mut rest = Columns { $($name: &mut $name[..]),* };
                for part in envs.chunks(chunk) {
                    let k = part.len();
                    let columns = Columns { $($name: {
                        let (head, tail) = std::mem::take(&mut rest.$name).split_at_mut(k);
                        rest.$name = tail;
                        head
                    }),* };
                    parts.push((part, columns));
                }
                py.detach(|| {
                    parts.into_par_iter().for_each(|(part, columns)| {
                        for (i, env) in part.iter().enumerate() {
                            $( columns.$name[i] = env.$name; )*
                        }
                    })
                });
            }
            let fields = PyDict::new(py);
            $( fields.set_item(stringify!($name), PyArray1::from_vec(py, $name))?; )*
            Ok(fields)
        }

        fn dict_to_state(fields: &Bound<'_, PyDict>, envs: &mut Vec<Pong>) -> PyResult<()> {
            let mut len: Option<usize> = None;
            $(
                let $name = column::<$ty>(fields, stringify!($name))?;
                let $name = $name.as_slice().map_err(|e| field_error(stringify!($name), e))?;
                check_len(&mut len, stringify!($name), $name.len())?;
            )*
            envs.clear();
            envs.resize(len.unwrap_or(0), Pong::default());
            for (i, env) in envs.iter_mut().enumerate() {
                $( env.$name = $name[i]; )*
            }
            Ok(())
        }
    };
}

canonical_fields!(
    paddle_yl: f32,
    paddle_yr: f32,
    ball_x: f32,
    ball_y: f32,
    ball_vx: f32,
    ball_vy: f32,
    score_l: i32,
    score_r: i32,
    tick: i32,
    rng: u32,
);

fn column<'py, T: numpy::Element>(
    fields: &Bound<'py, PyDict>,
    name: &str,
) -> PyResult<PyReadonlyArray1<'py, T>> {
    let item = fields
        .get_item(name)?
        .ok_or_else(|| PyKeyError::new_err(format!("canonical state lacks field {name}")))?;
    item.extract::<PyReadonlyArray1<'py, T>>()
        .map_err(|e| field_error(name, e))
}

fn field_error(name: &str, error: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(format!("field {name}: {error}"))
}

fn check_len(len: &mut Option<usize>, name: &str, got: usize) -> PyResult<()> {
    match *len {
        Some(n) if n != got => Err(PyValueError::new_err(format!(
            "field {name} has {got} envs, other fields have {n}"
        ))),
        _ => {
            *len = Some(got);
            Ok(())
        }
    }
}

fn expect_len(what: &str, got: usize, want: usize) -> PyResult<()> {
    if got == want {
        Ok(())
    } else {
        Err(PyValueError::new_err(format!(
            "{what} has {got} elements, expected {want}"
        )))
    }
}

#[pyclass(module = "pong_rust")]
struct EnvBatch {
    envs: Vec<Pong>,
    strict_float: bool,
}

#[pymethods]
impl EnvBatch {
    #[new]
    #[pyo3(signature = (num_envs, strict_float = false))]
    fn new(num_envs: usize, strict_float: bool) -> Self {
        Self {
            envs: vec![Pong::default(); num_envs],
            strict_float,
        }
    }

    #[getter]
    fn num_envs(&self) -> usize {
        self.envs.len()
    }

    fn reset(&mut self, py: Python<'_>, seeds: PyReadonlyArray1<'_, u32>) -> PyResult<()> {
        let seeds = seeds.as_slice().map_err(|e| field_error("seeds", e))?;
        self.envs.resize(seeds.len(), Pong::default());
        let (envs, strict) = (&mut self.envs, self.strict_float);
        let chunk = chunk_size(envs.len());
        py.detach(|| {
            (envs.par_chunks_mut(chunk), seeds.par_chunks(chunk))
                .into_par_iter()
                .for_each(|(envs, seeds)| {
                    let _mode = FlushDenormals::enter(strict);
                    for (env, &seed) in envs.iter_mut().zip(seeds) {
                        env.reset(seed);
                    }
                })
        });
        Ok(())
    }

    /// Resets the envs whose `done` is true, env `i` from `seeds[i]` (the others are left as
    /// they are): the auto-reset of a training loop, in one call.
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
        let (envs, strict) = (&mut self.envs, self.strict_float);
        let chunk = chunk_size(n);
        py.detach(|| {
            (
                envs.par_chunks_mut(chunk),
                done.par_chunks(chunk),
                seeds.par_chunks(chunk),
            )
                .into_par_iter()
                .for_each(|(envs, done, seeds)| {
                    let _mode = FlushDenormals::enter(strict);
                    for ((env, &d), &seed) in envs.iter_mut().zip(done).zip(seeds) {
                        if d {
                            env.reset(seed);
                        }
                    }
                })
        });
        Ok(())
    }

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
        let actions = actions.as_slice().map_err(|e| field_error("actions", e))?;
        let obs = obs.as_slice_mut().map_err(|e| field_error("obs", e))?;
        let reward = reward
            .as_slice_mut()
            .map_err(|e| field_error("reward", e))?;
        let terminated = terminated
            .as_slice_mut()
            .map_err(|e| field_error("terminated", e))?;
        let truncated = truncated
            .as_slice_mut()
            .map_err(|e| field_error("truncated", e))?;
        expect_len("actions", actions.len(), n)?;
        expect_len("obs", obs.len(), n * OBS_SIZE)?;
        expect_len("reward", reward.len(), n)?;
        expect_len("terminated", terminated.len(), n)?;
        expect_len("truncated", truncated.len(), n)?;
        let (envs, strict) = (&mut self.envs, self.strict_float);
        let chunk = chunk_size(n);
        py.detach(|| {
            (
                envs.par_chunks_mut(chunk),
                actions.par_chunks(chunk),
                obs.par_chunks_mut(chunk * OBS_SIZE),
                reward.par_chunks_mut(chunk),
                terminated.par_chunks_mut(chunk),
                truncated.par_chunks_mut(chunk),
            )
                .into_par_iter()
                .for_each(|(envs, actions, obs, reward, terminated, truncated)| {
                    let _mode = FlushDenormals::enter(strict);
                    step_all(envs, actions, reward, terminated, truncated);
                    for (env, out) in envs.iter().zip(obs.chunks_exact_mut(OBS_SIZE)) {
                        env.observe(out);
                    }
                })
        });
        Ok(())
    }

    fn observe(&self, py: Python<'_>, mut obs: PyReadwriteArray2<'_, f32>) -> PyResult<()> {
        let obs = obs.as_slice_mut().map_err(|e| field_error("obs", e))?;
        expect_len("obs", obs.len(), self.envs.len() * OBS_SIZE)?;
        let (envs, strict) = (&self.envs, self.strict_float);
        let chunk = chunk_size(envs.len());
        py.detach(|| {
            (envs.par_chunks(chunk), obs.par_chunks_mut(chunk * OBS_SIZE))
                .into_par_iter()
                .for_each(|(envs, obs)| {
                    let _mode = FlushDenormals::enter(strict);
                    for (env, out) in envs.iter().zip(obs.chunks_exact_mut(OBS_SIZE)) {
                        env.observe(out);
                    }
                })
        });
        Ok(())
    }

    fn get_state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        state_to_dict(py, &self.envs)
    }

    fn set_state(&mut self, fields: &Bound<'_, PyDict>) -> PyResult<()> {
        dict_to_state(fields, &mut self.envs)
    }
}

#[pymodule]
fn pong_rust(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<EnvBatch>()?;
    m.add("FIELDS", FIELDS.to_vec())?;
    m.add("OBS_SHAPE", (OBS_SIZE,))?;
    Ok(())
}
