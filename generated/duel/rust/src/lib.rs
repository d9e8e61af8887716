// The Python module `duel_rust`: a batch of Duel envs stepped in one call (envforge's
// RustEnvBatch contract).

mod draws;
mod duel;

use draws::Rng;
use duel::{Duel, OBS};
use numpy::ndarray::Array2;
use numpy::{
    IntoPyArray, PyArray1, PyArrayDyn, PyArrayMethods, PyReadonlyArray1, PyReadwriteArray1,
    PyReadwriteArray2,
};
use pyo3::exceptions::{PyKeyError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rayon::prelude::*;

const CHUNK: usize = 256;

const SCALARS: [&str; 5] = ["my_life", "opp_life", "energy", "turn", "steps"];
const ARRAYS: [(&str, usize); 10] = [
    ("my_deck", 20),
    ("opp_deck", 20),
    ("my_hand", 6),
    ("opp_hand", 6),
    ("my_board", 4),
    ("my_health", 4),
    ("my_ready", 4),
    ("opp_board", 4),
    ("opp_health", 4),
    ("opp_ready", 4),
];

fn scalar_mut(e: &mut Duel, k: usize) -> &mut i32 {
    match k {
        0 => &mut e.my_life,
        1 => &mut e.opp_life,
        2 => &mut e.energy,
        3 => &mut e.turn,
        _ => &mut e.steps,
    }
}

fn array_mut(e: &mut Duel, k: usize) -> &mut [i32] {
    match k {
        0 => &mut e.my_deck,
        1 => &mut e.opp_deck,
        2 => &mut e.my_hand,
        3 => &mut e.opp_hand,
        4 => &mut e.my_board,
        5 => &mut e.my_health,
        6 => &mut e.my_ready,
        7 => &mut e.opp_board,
        8 => &mut e.opp_health,
        _ => &mut e.opp_ready,
    }
}

fn check(name: &str, got: usize, want: usize) -> PyResult<()> {
    if got != want {
        return Err(PyValueError::new_err(format!(
            "{name} has {got} elements, expected {want}"
        )));
    }
    Ok(())
}

/// A field of `set_state`'s dict as a flat row-major vector with its row count.
fn field(fields: &Bound<'_, PyDict>, name: &str, width: usize) -> PyResult<(usize, Vec<i32>)> {
    let item = fields
        .get_item(name)?
        .ok_or_else(|| PyKeyError::new_err(name.to_string()))?;
    let array = item
        .cast::<PyArrayDyn<i32>>()
        .map_err(|e| PyValueError::new_err(format!("{name}: {e}")))?;
    let array = array.readonly();
    let view = array.as_array();
    let shape = view.shape().to_vec();
    let n = shape.first().copied().unwrap_or(0);
    let ok = if width == 0 {
        shape.len() == 1
    } else {
        shape.len() == 2 && shape[1] == width
    };
    if !ok {
        return Err(PyValueError::new_err(format!(
            "{name} has shape {shape:?}, expected [n{}]",
            if width == 0 { String::new() } else { format!(", {width}") }
        )));
    }
    Ok((n, view.iter().copied().collect()))
}

#[pyclass]
struct EnvBatch {
    envs: Vec<Duel>,
    rngs: Vec<Rng>,
    strict_float: bool,
}

impl EnvBatch {
    fn resize(&mut self, n: usize) {
        self.envs.resize(n, Duel::default());
        let have = self.rngs.len();
        self.rngs
            .extend((have..n.max(have)).map(|i| Rng::new(i as u64)));
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

    #[getter]
    fn strict_float(&self) -> bool {
        self.strict_float
    }

    fn reset(&mut self, seeds: PyReadonlyArray1<'_, u32>) -> PyResult<()> {
        let seeds = seeds.as_slice()?;
        self.resize(seeds.len());
        for ((env, rng), &seed) in self.envs.iter_mut().zip(self.rngs.iter_mut()).zip(seeds) {
            *rng = Rng::new(seed as u64);
            env.reset(rng);
        }
        Ok(())
    }

    fn reset_where(
        &mut self,
        done: PyReadonlyArray1<'_, bool>,
        seeds: PyReadonlyArray1<'_, u32>,
    ) -> PyResult<()> {
        let (done, seeds) = (done.as_slice()?, seeds.as_slice()?);
        let n = self.envs.len();
        check("done", done.len(), n)?;
        check("seeds", seeds.len(), n)?;
        for i in 0..n {
            if done[i] {
                self.rngs[i] = Rng::new(seeds[i] as u64);
                self.envs[i].reset(&mut self.rngs[i]);
            }
        }
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
        check("actions", actions.len(), n)?;
        check("obs", obs.len(), n * OBS)?;
        check("reward", reward.len(), n)?;
        check("terminated", terminated.len(), n)?;
        check("truncated", truncated.len(), n)?;
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
                    for (i, (env, rng)) in envs.iter_mut().zip(rngs.iter_mut()).enumerate() {
                        let (r, term, trunc) = env.step(actions[i], rng);
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
        check("actions", actions.len(), n)?;
        check("obs", obs.len(), n * OBS)?;
        check("reward", reward.len(), n)?;
        check("terminated", terminated.len(), n)?;
        check("truncated", truncated.len(), n)?;
        let envs = &mut self.envs;
        draws::step_rows(log, n, |k, tape| {
            let env = &mut envs[k];
            (reward[k], terminated[k], truncated[k]) = env.step(actions[k], tape);
            env.observe(&mut obs[k * OBS..(k + 1) * OBS]);
        })
    }

    fn observe(&self, mut obs: PyReadwriteArray2<'_, f32>) -> PyResult<()> {
        let obs = obs.as_slice_mut()?;
        check("obs", obs.len(), self.envs.len() * OBS)?;
        for (env, row) in self.envs.iter().zip(obs.chunks_mut(OBS)) {
            env.observe(row);
        }
        Ok(())
    }

    fn get_state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        let n = self.envs.len();
        let mut envs = self.envs.clone();
        for (k, name) in SCALARS.iter().enumerate() {
            let column: Vec<i32> = envs.iter_mut().map(|e| *scalar_mut(e, k)).collect();
            out.set_item(*name, PyArray1::from_vec(py, column))?;
        }
        for (k, (name, width)) in ARRAYS.iter().enumerate() {
            let mut flat = Vec::with_capacity(n * width);
            for e in envs.iter_mut() {
                flat.extend_from_slice(array_mut(e, k));
            }
            let array = Array2::from_shape_vec((n, *width), flat)
                .map_err(|e| PyValueError::new_err(format!("{name}: {e}")))?;
            out.set_item(*name, array.into_pyarray(py))?;
        }
        Ok(out)
    }

    fn set_state(&mut self, fields: &Bound<'_, PyDict>) -> PyResult<()> {
        let (n, _) = field(fields, SCALARS[0], 0)?;
        let mut envs = vec![Duel::default(); n];
        for (k, name) in SCALARS.iter().enumerate() {
            let (rows, values) = field(fields, name, 0)?;
            check(name, rows, n)?;
            for (e, v) in envs.iter_mut().zip(values) {
                *scalar_mut(e, k) = v;
            }
        }
        for (k, (name, width)) in ARRAYS.iter().enumerate() {
            let (rows, values) = field(fields, name, *width)?;
            check(name, rows, n)?;
            for (e, row) in envs.iter_mut().zip(values.chunks(*width)) {
                array_mut(e, k).copy_from_slice(row);
            }
        }
        self.envs = envs;
        self.resize(n);
        Ok(())
    }
}

#[pymodule]
fn duel_rust(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<EnvBatch>()
}
