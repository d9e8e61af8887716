// The Python module `uno_rust`: `EnvBatch`, a batch of UNO games stepped in one call (rayon
// across envs), the contract envforge drives.

mod draws;
mod uno;

use draws::Rng;
use numpy::{
    PyArray1, PyArrayMethods, PyReadonlyArray1, PyReadonlyArrayDyn, PyReadwriteArray1,
    PyReadwriteArray2, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyKeyError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rayon::prelude::*;
use uno::{Uno, CAPACITY, OBS};

const CHUNK: usize = 64;

#[pyclass]
struct EnvBatch {
    envs: Vec<Uno>,
    /// each env's own generator (not state): the draws of `step` outside verification
    rngs: Vec<Rng>,
    #[allow(dead_code)]
    strict_float: bool,
}

fn check_len(name: &str, got: usize, want: usize) -> PyResult<()> {
    if got != want {
        return Err(PyValueError::new_err(format!(
            "{name} has {got} elements, expected {want}"
        )));
    }
    Ok(())
}

/// A field of `set_state` as a flat i32 vector of `n * per_env` values.
fn field(fields: &Bound<'_, PyDict>, name: &str, per_env: usize) -> PyResult<(Vec<i32>, usize)> {
    let value = fields
        .get_item(name)?
        .ok_or_else(|| PyKeyError::new_err(format!("set_state: missing field {name}")))?;
    let array: PyReadonlyArrayDyn<'_, i32> = value.extract()?;
    let values: Vec<i32> = array.as_array().iter().copied().collect();
    let n = if array.ndim() == 0 { 1 } else { array.shape()[0] };
    check_len(name, values.len(), n * per_env)?;
    Ok((values, n))
}

impl EnvBatch {
    fn resize(&mut self, n: usize) {
        self.envs.resize_with(n, Uno::default);
        let start = self.rngs.len();
        self.rngs.extend((start..n).map(|i| Rng::new(i as u64)));
        self.rngs.truncate(n);
    }
}

#[pymethods]
impl EnvBatch {
    #[new]
    #[pyo3(signature = (num_envs, strict_float = false))]
    fn new(num_envs: usize, strict_float: bool) -> Self {
        let mut batch = EnvBatch {
            envs: Vec::new(),
            rngs: Vec::new(),
            strict_float,
        };
        batch.resize(num_envs);
        batch
    }

    #[getter]
    fn num_envs(&self) -> usize {
        self.envs.len()
    }

    fn reset(&mut self, py: Python<'_>, seeds: PyReadonlyArray1<'_, u32>) -> PyResult<()> {
        let seeds = seeds.as_slice()?;
        self.resize(seeds.len());
        let (envs, rngs) = (&mut self.envs, &mut self.rngs);
        py.detach(|| {
            envs.par_iter_mut()
                .zip(rngs.par_iter_mut())
                .zip(seeds.par_iter())
                .for_each(|((env, rng), &seed)| {
                    *rng = Rng::new(seed as u64);
                    env.reset(rng);
                })
        });
        Ok(())
    }

    fn reset_where(
        &mut self,
        py: Python<'_>,
        done: PyReadonlyArray1<'_, bool>,
        seeds: PyReadonlyArray1<'_, u32>,
    ) -> PyResult<()> {
        let (done, seeds) = (done.as_slice()?, seeds.as_slice()?);
        let n = self.envs.len();
        check_len("done", done.len(), n)?;
        check_len("seeds", seeds.len(), n)?;
        let (envs, rngs) = (&mut self.envs, &mut self.rngs);
        py.detach(|| {
            envs.par_iter_mut()
                .zip(rngs.par_iter_mut())
                .zip(done.par_iter().zip(seeds.par_iter()))
                .for_each(|((env, rng), (&done, &seed))| {
                    if done {
                        *rng = Rng::new(seed as u64);
                        env.reset(rng);
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
        let actions = actions.as_slice()?;
        let (obs, reward) = (obs.as_slice_mut()?, reward.as_slice_mut()?);
        let (terminated, truncated) = (terminated.as_slice_mut()?, truncated.as_slice_mut()?);
        let n = self.envs.len();
        check_len("actions", actions.len(), n)?;
        check_len("obs", obs.len(), n * OBS)?;
        check_len("reward", reward.len(), n)?;
        check_len("terminated", terminated.len(), n)?;
        check_len("truncated", truncated.len(), n)?;
        let (envs, rngs) = (&mut self.envs, &mut self.rngs);
        py.detach(|| {
            (
                envs.par_chunks_mut(CHUNK),
                rngs.par_chunks_mut(CHUNK),
                actions.par_chunks(CHUNK),
                obs.par_chunks_mut(CHUNK * OBS),
                reward.par_chunks_mut(CHUNK),
                terminated.par_chunks_mut(CHUNK),
                truncated.par_chunks_mut(CHUNK),
            )
                .into_par_iter()
                .for_each(|(envs, rngs, actions, obs, reward, terminated, truncated)| {
                    for (i, env) in envs.iter_mut().enumerate() {
                        let (r, term, trunc) = env.step(actions[i], &mut rngs[i]);
                        env.observe(&mut obs[i * OBS..(i + 1) * OBS]);
                        (reward[i], terminated[i], truncated[i]) = (r, term, trunc);
                    }
                })
        });
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn step_draws(
        &mut self,
        actions: PyReadonlyArray1<'_, i32>,
        mut obs: PyReadwriteArray2<'_, f32>,
        mut reward: PyReadwriteArray1<'_, f32>,
        mut terminated: PyReadwriteArray1<'_, bool>,
        mut truncated: PyReadwriteArray1<'_, bool>,
        log: &Bound<'_, PyDict>,
    ) -> PyResult<Vec<String>> {
        let actions = actions.as_slice()?;
        let (obs, reward) = (obs.as_slice_mut()?, reward.as_slice_mut()?);
        let (terminated, truncated) = (terminated.as_slice_mut()?, truncated.as_slice_mut()?);
        let n = self.envs.len();
        check_len("actions", actions.len(), n)?;
        check_len("obs", obs.len(), n * OBS)?;
        check_len("reward", reward.len(), n)?;
        check_len("terminated", terminated.len(), n)?;
        check_len("truncated", truncated.len(), n)?;
        let envs = &mut self.envs;
        draws::step_rows(log, envs.len(), |k, tape| {
            let env = &mut envs[k];
            (reward[k], terminated[k], truncated[k]) = env.step(actions[k], tape);
            env.observe(&mut obs[k * OBS..(k + 1) * OBS]);
        })
    }

    fn observe(&self, py: Python<'_>, mut obs: PyReadwriteArray2<'_, f32>) -> PyResult<()> {
        let obs = obs.as_slice_mut()?;
        check_len("obs", obs.len(), self.envs.len() * OBS)?;
        let envs = &self.envs;
        py.detach(|| {
            obs.par_chunks_mut(OBS)
                .zip(envs.par_iter())
                .for_each(|(obs, env)| env.observe(obs))
        });
        Ok(())
    }

    fn get_state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let n = self.envs.len();
        let mut deck = vec![0i32; n * CAPACITY];
        let mut played = vec![0i32; n * CAPACITY];
        let mut hands = vec![0i32; n * 2 * CAPACITY];
        for (i, env) in self.envs.iter().enumerate() {
            env.deck.store(&mut deck[i * CAPACITY..(i + 1) * CAPACITY]);
            env.played.store(&mut played[i * CAPACITY..(i + 1) * CAPACITY]);
            for p in 0..2 {
                let row = (2 * i + p) * CAPACITY;
                env.hands[p].store(&mut hands[row..row + CAPACITY]);
            }
        }
        let out = PyDict::new(py);
        out.set_item("deck", PyArray1::from_vec(py, deck).reshape([n, CAPACITY])?)?;
        out.set_item("played", PyArray1::from_vec(py, played).reshape([n, CAPACITY])?)?;
        out.set_item(
            "hands",
            PyArray1::from_vec(py, hands).reshape([n, 2, CAPACITY])?,
        )?;
        let scalar = |f: fn(&Uno) -> i32| -> Vec<i32> { self.envs.iter().map(f).collect() };
        out.set_item("target", PyArray1::from_vec(py, scalar(|e| e.target)))?;
        out.set_item(
            "target_color",
            PyArray1::from_vec(py, scalar(|e| e.target_color)),
        )?;
        out.set_item("direction", PyArray1::from_vec(py, scalar(|e| e.direction)))?;
        Ok(out)
    }

    fn set_state(&mut self, fields: &Bound<'_, PyDict>) -> PyResult<()> {
        let (target, n) = field(fields, "target", 1)?;
        let (target_color, _) = field(fields, "target_color", 1)?;
        let (direction, _) = field(fields, "direction", 1)?;
        let (deck, _) = field(fields, "deck", CAPACITY)?;
        let (played, _) = field(fields, "played", CAPACITY)?;
        let (hands, _) = field(fields, "hands", 2 * CAPACITY)?;
        check_len("target_color", target_color.len(), n)?;
        check_len("direction", direction.len(), n)?;
        check_len("deck", deck.len(), n * CAPACITY)?;
        check_len("played", played.len(), n * CAPACITY)?;
        check_len("hands", hands.len(), n * 2 * CAPACITY)?;
        self.resize(n);
        for (i, env) in self.envs.iter_mut().enumerate() {
            env.deck.load(&deck[i * CAPACITY..(i + 1) * CAPACITY]);
            env.played.load(&played[i * CAPACITY..(i + 1) * CAPACITY]);
            for p in 0..2 {
                let row = (2 * i + p) * CAPACITY;
                env.hands[p].load(&hands[row..row + CAPACITY]);
            }
            env.target = target[i];
            env.target_color = target_color[i];
            env.direction = direction[i];
        }
        Ok(())
    }
}

#[pymodule]
fn uno_rust(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<EnvBatch>()
}
