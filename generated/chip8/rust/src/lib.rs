//! `chip8_rust`: the CHIP-8 Breakout port as a Python extension that steps a whole batch in one call.
//!
//! Python sees one class, `EnvBatch(num_envs, strict_float=False)` (no floats in the machine:
//! `strict_float` is accepted and ignored):
//!   reset(seeds: uint32[n])                          resizes the batch to n and resets it
//!   reset_where(done: bool[n], seeds: uint32[n])     resets env i from seeds[i] where done[i]
//!   step(actions: int32[n], obs: float32[n, 8], reward: float32[n],
//!        terminated: bool[n], truncated: bool[n])    steps every env, writes into the buffers
//!   observe(obs: float32[n, 8])
//!   get_state() -> dict[str, ndarray[n, ...]]        the canonical state of references/chip8
//!   set_state(fields: dict[str, ndarray[n, ...]])    resizes the batch to n and loads it
//! Environments are stepped in parallel with rayon, with the GIL released.

mod chip8;

use numpy::{
    Element, PyArray1, PyArrayMethods, PyReadonlyArray1, PyReadonlyArrayDyn, PyReadwriteArray1,
    PyReadwriteArray2, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyKeyError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rayon::prelude::*;

use chip8::{Chip8, HEIGHT, MEMORY, OBS_SIZE, PIXELS, WIDTH};

/// Fewest envs per rayon task: below this, scheduling costs more than stepping.
const MIN_CHUNK: usize = 16;

fn chunk_size(n: usize) -> usize {
    n.div_ceil(rayon::current_num_threads() * 4).max(MIN_CHUNK)
}

const FIELDS: &[&str] = &[
    "memory",
    "V",
    "I",
    "pc",
    "sp",
    "stack",
    "delay_timer",
    "sound_timer",
    "framebuffer",
    "keys",
    "rng",
    "frame",
];

fn field_error(name: &str, error: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(format!("field {name}: {error}"))
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

/// One canonical column as a flat slice of `n * per_env` values (the driver passes contiguous
/// arrays); `batch` is the batch size of the fields read before it.
fn column<'py, T: Element + Copy>(
    fields: &Bound<'py, PyDict>,
    name: &str,
    per_env: usize,
    batch: Option<usize>,
) -> PyResult<(Vec<T>, usize)> {
    let item = fields
        .get_item(name)?
        .ok_or_else(|| PyKeyError::new_err(format!("canonical state lacks field {name}")))?;
    let array = item
        .extract::<PyReadonlyArrayDyn<'py, T>>()
        .map_err(|e| field_error(name, e))?;
    let n = array.shape().first().copied().unwrap_or(0);
    if let Some(batch) = batch {
        expect_len(&format!("field {name}'s batch"), n, batch)?;
    }
    let values = array.as_slice().map_err(|e| field_error(name, e))?.to_vec();
    expect_len(name, values.len(), n * per_env)?;
    Ok((values, n))
}

fn to_numpy<'py, T: Element>(
    py: Python<'py>,
    values: Vec<T>,
    shape: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    Ok(PyArray1::from_vec(py, values).reshape(shape)?.into_any())
}

#[pyclass(module = "chip8_rust")]
struct EnvBatch {
    envs: Vec<Chip8>,
}

#[pymethods]
impl EnvBatch {
    #[new]
    #[pyo3(signature = (num_envs, strict_float = false))]
    fn new(num_envs: usize, strict_float: bool) -> Self {
        let _ = strict_float;
        Self {
            envs: vec![Chip8::default(); num_envs],
        }
    }

    #[getter]
    fn num_envs(&self) -> usize {
        self.envs.len()
    }

    fn reset(&mut self, py: Python<'_>, seeds: PyReadonlyArray1<'_, u32>) -> PyResult<()> {
        let seeds = seeds.as_slice().map_err(|e| field_error("seeds", e))?;
        self.envs.resize(seeds.len(), Chip8::default());
        let envs = &mut self.envs;
        let chunk = chunk_size(envs.len());
        py.detach(|| {
            (envs.par_chunks_mut(chunk), seeds.par_chunks(chunk))
                .into_par_iter()
                .for_each(|(envs, seeds)| {
                    for (env, &seed) in envs.iter_mut().zip(seeds) {
                        env.reset(seed);
                    }
                })
        });
        Ok(())
    }

    /// Resets the envs whose `done` is true, env `i` from `seeds[i]` (the bench's auto-reset).
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
        let envs = &mut self.envs;
        let chunk = chunk_size(n);
        py.detach(|| {
            (
                envs.par_chunks_mut(chunk),
                done.par_chunks(chunk),
                seeds.par_chunks(chunk),
            )
                .into_par_iter()
                .for_each(|(envs, done, seeds)| {
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
        let envs = &mut self.envs;
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
                    for (k, env) in envs.iter_mut().enumerate() {
                        let (r, term, trunc) = env.step(actions[k]);
                        reward[k] = r;
                        terminated[k] = term;
                        truncated[k] = trunc;
                        env.observe(&mut obs[k * OBS_SIZE..(k + 1) * OBS_SIZE]);
                    }
                })
        });
        Ok(())
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
        let envs = &self.envs;
        let fields = PyDict::new(py);
        let flat = |f: &dyn Fn(&Chip8) -> &[u8]| -> Vec<u8> {
            envs.iter().flat_map(|e| f(e).iter().copied()).collect()
        };
        fields.set_item("memory", to_numpy(py, flat(&|e| &e.memory), &[n, MEMORY])?)?;
        fields.set_item("V", to_numpy(py, flat(&|e| &e.v), &[n, 16])?)?;
        fields.set_item(
            "framebuffer",
            to_numpy(py, flat(&|e| &e.framebuffer), &[n, HEIGHT, WIDTH])?,
        )?;
        fields.set_item("keys", to_numpy(py, flat(&|e| &e.keys), &[n, 16])?)?;
        let stack: Vec<i32> = envs.iter().flat_map(|e| e.stack.iter().copied()).collect();
        fields.set_item("stack", to_numpy(py, stack, &[n, 16])?)?;
        let scalar = |f: &dyn Fn(&Chip8) -> i32| -> Vec<i32> { envs.iter().map(f).collect() };
        fields.set_item("I", to_numpy(py, scalar(&|e| e.i), &[n])?)?;
        fields.set_item("pc", to_numpy(py, scalar(&|e| e.pc), &[n])?)?;
        fields.set_item("sp", to_numpy(py, scalar(&|e| e.sp), &[n])?)?;
        fields.set_item(
            "delay_timer",
            to_numpy(py, scalar(&|e| e.delay_timer), &[n])?,
        )?;
        fields.set_item(
            "sound_timer",
            to_numpy(py, scalar(&|e| e.sound_timer), &[n])?,
        )?;
        fields.set_item("frame", to_numpy(py, scalar(&|e| e.frame), &[n])?)?;
        let rng: Vec<u32> = envs.iter().map(|e| e.rng).collect();
        fields.set_item("rng", to_numpy(py, rng, &[n])?)?;
        Ok(fields)
    }

    fn set_state(&mut self, fields: &Bound<'_, PyDict>) -> PyResult<()> {
        let (memory, n) = column::<u8>(fields, "memory", MEMORY, None)?;
        let b = Some(n);
        let (v, _) = column::<u8>(fields, "V", 16, b)?;
        let (i, _) = column::<i32>(fields, "I", 1, b)?;
        let (pc, _) = column::<i32>(fields, "pc", 1, b)?;
        let (sp, _) = column::<i32>(fields, "sp", 1, b)?;
        let (stack, _) = column::<i32>(fields, "stack", 16, b)?;
        let (delay, _) = column::<i32>(fields, "delay_timer", 1, b)?;
        let (sound, _) = column::<i32>(fields, "sound_timer", 1, b)?;
        let (framebuffer, _) = column::<u8>(fields, "framebuffer", PIXELS, b)?;
        let (keys, _) = column::<u8>(fields, "keys", 16, b)?;
        let (rng, _) = column::<u32>(fields, "rng", 1, b)?;
        let (frame, _) = column::<i32>(fields, "frame", 1, b)?;
        self.envs.resize(n, Chip8::default());
        for (k, env) in self.envs.iter_mut().enumerate() {
            env.memory
                .copy_from_slice(&memory[k * MEMORY..(k + 1) * MEMORY]);
            env.v.copy_from_slice(&v[k * 16..(k + 1) * 16]);
            env.i = i[k];
            env.pc = pc[k];
            env.sp = sp[k];
            env.stack.copy_from_slice(&stack[k * 16..(k + 1) * 16]);
            env.delay_timer = delay[k];
            env.sound_timer = sound[k];
            env.framebuffer
                .copy_from_slice(&framebuffer[k * PIXELS..(k + 1) * PIXELS]);
            env.keys.copy_from_slice(&keys[k * 16..(k + 1) * 16]);
            env.rng = rng[k];
            env.frame = frame[k];
        }
        Ok(())
    }
}

#[pymodule]
fn chip8_rust(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<EnvBatch>()?;
    m.add("FIELDS", FIELDS.to_vec())?;
    m.add("OBS_SHAPE", (OBS_SIZE,))?;
    Ok(())
}
