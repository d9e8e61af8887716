//! The Python module `battle_rust`: `EnvBatch`, a batch of battles stepped in one call (rayon
//! across envs, the GIL released), with the canonical state of reference/env.toml.

mod battle;

use battle::{Battle, OBS_SIZE};
use numpy::ndarray::ArrayViewD;
use numpy::{
    PyArray1, PyArrayMethods, PyReadonlyArray1, PyReadonlyArrayDyn, PyReadwriteArray1, PyReadwriteArray2,
};
use pyo3::exceptions::{PyKeyError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rayon::prelude::*;

const CHUNK: usize = 256;

/// The int32 canonical fields and their shapes per env (the uint32 `rng` is handled apart).
const I32_FIELDS: [(&str, &[usize]); 9] = [
    ("species", &[2, 3]),
    ("moves", &[2, 3, 4]),
    ("hp", &[2, 3]),
    ("status", &[2, 3]),
    ("sleep_turns", &[2, 3]),
    ("active", &[2]),
    ("stages", &[2, 5]),
    ("charge", &[2]),
    ("turn", &[]),
];

/// The places of one int32 field in a battle, in C order of the field's shape.
fn field_refs<'a>(b: &'a mut Battle, name: &str) -> Vec<&'a mut i32> {
    let mut out = Vec::new();
    match name {
        "turn" => out.push(&mut b.turn),
        "active" => out.extend(b.sides.iter_mut().map(|side| &mut side.active)),
        "charge" => out.extend(b.sides.iter_mut().map(|side| &mut side.charge)),
        "stages" => out.extend(b.sides.iter_mut().flat_map(|side| side.stages.iter_mut())),
        _ => {
            for mon in b.sides.iter_mut().flat_map(|side| side.team.iter_mut()) {
                match name {
                    "species" => out.push(&mut mon.species),
                    "moves" => out.extend(mon.moves.iter_mut()),
                    "hp" => out.push(&mut mon.hp),
                    "status" => out.push(&mut mon.status),
                    "sleep_turns" => out.push(&mut mon.sleep_turns),
                    _ => {}
                }
            }
        }
    }
    out
}

fn check_len(what: &str, got: usize, want: usize) -> PyResult<()> {
    if got != want {
        return Err(PyValueError::new_err(format!("{what}: length {got}, expected {want}")));
    }
    Ok(())
}

fn field_array<'py, T: numpy::Element>(
    fields: &Bound<'py, PyDict>,
    name: &str,
) -> PyResult<PyReadonlyArrayDyn<'py, T>> {
    match fields.get_item(name)? {
        Some(value) => value.extract(),
        None => Err(PyKeyError::new_err(name.to_string())),
    }
}

fn check_shape(name: &str, view: &ArrayViewD<'_, impl Sized>, n: usize, shape: &[usize]) -> PyResult<()> {
    let mut want = vec![n];
    want.extend_from_slice(shape);
    if view.shape() != want.as_slice() {
        return Err(PyValueError::new_err(format!("{name}: shape {:?}, expected {want:?}", view.shape())));
    }
    Ok(())
}

#[pyclass]
struct EnvBatch {
    envs: Vec<Battle>,
    #[allow(dead_code)]
    strict_float: bool,
}

#[pymethods]
impl EnvBatch {
    #[new]
    #[pyo3(signature = (num_envs, strict_float = false))]
    fn new(num_envs: usize, strict_float: bool) -> Self {
        EnvBatch { envs: vec![Battle::default(); num_envs], strict_float }
    }

    #[getter]
    fn num_envs(&self) -> usize {
        self.envs.len()
    }

    /// Resize the batch to len(seeds) and reset every env from its seed.
    fn reset(&mut self, py: Python<'_>, seeds: PyReadonlyArray1<'_, u32>) -> PyResult<()> {
        let seeds = seeds.as_slice()?;
        self.envs.resize(seeds.len(), Battle::default());
        let envs = &mut self.envs;
        py.detach(|| envs.par_iter_mut().zip(seeds.par_iter()).for_each(|(env, &seed)| env.reset(seed)));
        Ok(())
    }

    /// Reset env i from seeds[i] where done[i].
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
        let envs = &mut self.envs;
        py.detach(|| {
            envs.par_iter_mut().zip(done.par_iter().zip(seeds.par_iter())).for_each(|(env, (&d, &seed))| {
                if d {
                    env.reset(seed)
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
        check_len("obs", obs.len(), n * OBS_SIZE)?;
        check_len("reward", reward.len(), n)?;
        check_len("terminated", terminated.len(), n)?;
        check_len("truncated", truncated.len(), n)?;
        let envs = &mut self.envs;
        py.detach(|| {
            (
                envs.par_chunks_mut(CHUNK),
                actions.par_chunks(CHUNK),
                obs.par_chunks_mut(CHUNK * OBS_SIZE),
                reward.par_chunks_mut(CHUNK),
                terminated.par_chunks_mut(CHUNK),
                truncated.par_chunks_mut(CHUNK),
            )
                .into_par_iter()
                .for_each(|(envs, actions, obs, reward, terminated, truncated)| {
                    for (i, env) in envs.iter_mut().enumerate() {
                        let (r, term, trunc) = env.step(actions[i]);
                        env.observe(&mut obs[i * OBS_SIZE..(i + 1) * OBS_SIZE]);
                        (reward[i], terminated[i], truncated[i]) = (r, term, trunc);
                    }
                })
        });
        Ok(())
    }

    fn observe(&self, py: Python<'_>, mut obs: PyReadwriteArray2<'_, f32>) -> PyResult<()> {
        let obs = obs.as_slice_mut()?;
        check_len("obs", obs.len(), self.envs.len() * OBS_SIZE)?;
        let envs = &self.envs;
        py.detach(|| {
            envs.par_iter()
                .zip(obs.par_chunks_mut(OBS_SIZE))
                .for_each(|(env, obs)| env.observe(obs))
        });
        Ok(())
    }

    /// The canonical fields, each an array [n, *shape] of the spec's dtype.
    fn get_state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let n = self.envs.len();
        let out = PyDict::new(py);
        for (name, shape) in I32_FIELDS {
            let mut values = Vec::with_capacity(n * shape.iter().product::<usize>());
            for env in &self.envs {
                let mut copy = *env;
                values.extend(field_refs(&mut copy, name).into_iter().map(|v| *v));
            }
            let mut dims = vec![n];
            dims.extend_from_slice(shape);
            out.set_item(name, PyArray1::from_vec(py, values).reshape(dims)?)?;
        }
        let rng: Vec<u32> = self.envs.iter().map(|env| env.rng).collect();
        out.set_item("rng", PyArray1::from_vec(py, rng))?;
        Ok(out)
    }

    /// Resize the batch to the fields' length and load them.
    fn set_state(&mut self, fields: &Bound<'_, PyDict>) -> PyResult<()> {
        let rng = field_array::<u32>(fields, "rng")?;
        let rng = rng.as_array();
        if rng.ndim() != 1 {
            return Err(PyValueError::new_err(format!("rng: shape {:?}, expected [n]", rng.shape())));
        }
        let n = rng.len();
        let mut envs = vec![Battle::default(); n];
        for (env, &r) in envs.iter_mut().zip(rng.iter()) {
            env.rng = r;
        }
        for (name, shape) in I32_FIELDS {
            let array = field_array::<i32>(fields, name)?;
            let view = array.as_array();
            check_shape(name, &view, n, shape)?;
            let per = shape.iter().product::<usize>();
            let mut values = view.iter();
            for env in envs.iter_mut() {
                for place in field_refs(env, name).into_iter().take(per) {
                    *place = *values.next().unwrap_or(&0);
                }
            }
        }
        self.envs = envs;
        Ok(())
    }
}

#[pymodule]
fn battle_rust(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<EnvBatch>()
}
