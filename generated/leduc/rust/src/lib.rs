//! `leduc_rust`: Leduc Hold'em against rlcard's random agent as a Python extension that steps a
//! whole batch in one call.
//!
//! Python sees one class, `EnvBatch(num_envs, strict_float=False)` (`strict_float` is accepted
//! and ignored: the payoff is one float division, as the reference's):
//!   reset(seeds: uint32[n])                          resizes the batch to n and deals
//!   reset_where(done: bool[n], seeds: uint32[n])     deals env i from seeds[i] where done[i]
//!   step(actions: int32[n], obs: float32[n, 36], reward: float32[n],
//!        terminated: bool[n], truncated: bool[n])    steps every env, the opponent's moves
//!                                                    from its own Rng
//!   step_draws(actions, obs, reward, terminated, truncated, log: dict) -> list[str]
//!                                                    the same step with the opponent's moves
//!                                                    from the RNG tape, logged (src/draws.rs)
//!   observe(obs: float32[n, 36])
//!   get_state() -> dict[str, ndarray[n, ...]]        the canonical fields of references/leduc
//!   set_state(fields: dict[str, ndarray[n, ...]])    resizes the batch to n and loads it
//! `step` runs the envs in parallel with rayon, with the GIL released.

mod draws;
mod leduc;

use numpy::{
    PyArray1, PyArrayMethods, PyReadonlyArray1, PyReadonlyArrayDyn, PyReadwriteArray1,
    PyReadwriteArray2, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyKeyError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rayon::prelude::*;

use draws::Rng;
use leduc::{Leduc, OBS_SIZE};

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
    Rng::new(seed ^ 0x1EDC_0000_0000_0000)
}

/// One canonical int32 column as a flat vector of `n * per_env` values, and `n` (`batch`: the
/// batch size of the fields read before it).
fn column(
    fields: &Bound<'_, PyDict>,
    name: &str,
    per_env: usize,
    batch: Option<usize>,
) -> PyResult<(Vec<i32>, usize)> {
    let item = fields
        .get_item(name)?
        .ok_or_else(|| PyKeyError::new_err(format!("canonical state lacks field {name}")))?;
    let array = item
        .extract::<PyReadonlyArrayDyn<'_, i32>>()
        .map_err(|e| field_error(name, e))?;
    let n = array.shape().first().copied().unwrap_or(0);
    if let Some(batch) = batch {
        expect_len(&format!("field {name}'s batch"), n, batch)?;
    }
    let values = array.as_slice().map_err(|e| field_error(name, e))?.to_vec();
    expect_len(name, values.len(), n * per_env)?;
    Ok((values, n))
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

#[pyclass(module = "leduc_rust")]
struct EnvBatch {
    envs: Vec<Leduc>,
    /// Each env's own generator (not canonical state): the deals and the opponent's moves.
    rngs: Vec<Rng>,
}

#[pymethods]
impl EnvBatch {
    #[new]
    #[pyo3(signature = (num_envs, strict_float = false))]
    fn new(num_envs: usize, strict_float: bool) -> Self {
        let _ = strict_float;
        Self {
            envs: vec![Leduc::default(); num_envs],
            rngs: (0..num_envs as u64).map(own_rng).collect(),
        }
    }

    #[getter]
    fn num_envs(&self) -> usize {
        self.envs.len()
    }

    fn reset(&mut self, py: Python<'_>, seeds: PyReadonlyArray1<'_, u32>) -> PyResult<()> {
        let seeds = seeds.as_slice().map_err(|e| field_error("seeds", e))?;
        self.envs.resize(seeds.len(), Leduc::default());
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

    /// One step of every env, the opponent's moves from each env's own generator.
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

    /// The same step under verification: the opponent's moves from the reference's tape in `log`, every
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
        let envs = &self.envs;
        let fields = PyDict::new(py);
        let wide = |f: &dyn Fn(&Leduc) -> &[i32]| -> Vec<i32> {
            envs.iter().flat_map(|e| f(e).iter().copied()).collect()
        };
        fields.set_item(
            "deck",
            PyArray1::from_vec(py, wide(&|e| &e.deck)).reshape([n, 6])?,
        )?;
        fields.set_item(
            "hands",
            PyArray1::from_vec(py, wide(&|e| &e.hands)).reshape([n, 2])?,
        )?;
        fields.set_item(
            "raised",
            PyArray1::from_vec(py, wide(&|e| &e.raised)).reshape([n, 2])?,
        )?;
        let scalar = |f: &dyn Fn(&Leduc) -> i32| -> Vec<i32> { envs.iter().map(f).collect() };
        fields.set_item("public", PyArray1::from_vec(py, scalar(&|e| e.public)))?;
        fields.set_item("banked", PyArray1::from_vec(py, scalar(&|e| e.banked)))?;
        fields.set_item(
            "have_raised",
            PyArray1::from_vec(py, scalar(&|e| e.have_raised)),
        )?;
        fields.set_item(
            "not_raise_num",
            PyArray1::from_vec(py, scalar(&|e| e.not_raise_num)),
        )?;
        fields.set_item(
            "round_counter",
            PyArray1::from_vec(py, scalar(&|e| e.round_counter)),
        )?;
        Ok(fields)
    }

    /// Loads a canonical state; nobody has folded in it (a fold ends the game).
    fn set_state(&mut self, fields: &Bound<'_, PyDict>) -> PyResult<()> {
        let (deck, n) = column(fields, "deck", 6, None)?;
        let b = Some(n);
        let (hands, _) = column(fields, "hands", 2, b)?;
        let (public, _) = column(fields, "public", 1, b)?;
        let (banked, _) = column(fields, "banked", 1, b)?;
        let (raised, _) = column(fields, "raised", 2, b)?;
        let (have_raised, _) = column(fields, "have_raised", 1, b)?;
        let (not_raise_num, _) = column(fields, "not_raise_num", 1, b)?;
        let (round_counter, _) = column(fields, "round_counter", 1, b)?;
        self.envs.resize(n, Leduc::default());
        if self.rngs.len() != n {
            self.rngs = (0..n as u64).map(own_rng).collect();
        }
        for (k, env) in self.envs.iter_mut().enumerate() {
            env.deck.copy_from_slice(&deck[k * 6..(k + 1) * 6]);
            env.hands.copy_from_slice(&hands[k * 2..(k + 1) * 2]);
            env.public = public[k];
            env.banked = banked[k];
            env.raised.copy_from_slice(&raised[k * 2..(k + 1) * 2]);
            env.have_raised = have_raised[k];
            env.not_raise_num = not_raise_num[k];
            env.round_counter = round_counter[k];
            env.folded = -1;
        }
        Ok(())
    }
}

#[pymodule]
fn leduc_rust(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<EnvBatch>()?;
    m.add(
        "FIELDS",
        vec![
            "deck",
            "hands",
            "public",
            "banked",
            "raised",
            "have_raised",
            "not_raise_num",
            "round_counter",
        ],
    )?;
    m.add("OBS_SHAPE", (OBS_SIZE,))?;
    Ok(())
}
