//! Python code inside a pipeline: `map`/`filter` functions and `from_generator` sources.
//!
//! They run on the pipeline's threads and take the GIL for each call, so they run one at a
//! time whatever `num_parallel` says (the documented cost of Python code in a pipeline);
//! the stages around them still run in parallel. An exception they raise ends the run
//! with `sluice.UserCodeError`, whose `__cause__` is the exception.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyIterator;
use rand::RngCore;
use sluice_core::rng::ElementRng;
use sluice_core::{
    BoxStream, BuildContext, Element, ElementId, Error, Input, IterStream, Params, Result, Stage,
};

use crate::convert::{dict_to_element, element_into_dict, element_to_dict};

/// A Python exception as a Rust error (`Error::User`), kept to be re-raised as the cause.
fn user(err: PyErr) -> Error {
    Error::User(Box::new(err))
}

/// The element `f` maps `element` to. With `with_seed`, `f` also gets a seed drawn from the
/// element's RNG (fixed by the pipeline's seed, the epoch and the element).
pub(crate) fn call_map(
    f: &Py<PyAny>,
    with_seed: bool,
    element: Element,
    rng: &mut ElementRng,
) -> Result<Element> {
    let seed = with_seed.then(|| rng.next_u64());
    let template = (element.id(), element.provenance().cloned());
    Python::attach(|py| {
        let dict = element_into_dict(py, element)?;
        let out = match seed {
            Some(s) => f.call1(py, (dict, s))?,
            None => f.call1(py, (dict,))?,
        };
        dict_to_element(py, out.bind(py), Some(template), "a map function")
    })
    .map_err(user)
}

/// Whether `f` keeps `element` (its result's truth value).
pub(crate) fn call_filter(
    f: &Py<PyAny>,
    with_seed: bool,
    element: &Element,
    rng: &mut ElementRng,
) -> Result<bool> {
    let seed = with_seed.then(|| rng.next_u64());
    Python::attach(|py| {
        let dict = element_to_dict(py, element)?;
        let out = match seed {
            Some(s) => f.call1(py, (dict, s))?,
            None => f.call1(py, (dict,))?,
        };
        out.bind(py).is_truthy()
    })
    .map_err(user)
}

/// The elements `f` maps `element` to: `f(element)` (or `f(element, seed)`) returns an
/// iterable of dicts, any number of them.
pub(crate) fn call_flat_map(
    f: &Py<PyAny>,
    with_seed: bool,
    element: Element,
    rng: &mut ElementRng,
) -> Result<Vec<Element>> {
    let seed = with_seed.then(|| rng.next_u64());
    let template = (element.id(), element.provenance().cloned());
    Python::attach(|py| {
        let dict = element_into_dict(py, element)?;
        let out = match seed {
            Some(s) => f.call1(py, (dict, s))?,
            None => f.call1(py, (dict,))?,
        };
        let mut elements = Vec::new();
        for item in out.bind(py).try_iter()? {
            elements.push(dict_to_element(
                py,
                &item?,
                Some(template.clone()),
                "a flat_map function's outputs",
            )?);
        }
        Ok(elements)
    })
    .map_err(user)
}

/// One step of a Python `scan`: `f(state, element)` returns `(new_state, output)`, both
/// dicts (`output` may be `None`: the element is dropped); the state is replaced.
pub(crate) fn call_scan(
    f: &Py<PyAny>,
    state: &mut Element,
    element: Element,
) -> Result<Option<Element>> {
    let template = (element.id(), element.provenance().cloned());
    Python::attach(|py| {
        let state_dict = element_to_dict(py, state)?;
        let dict = element_into_dict(py, element)?;
        let out = f.call1(py, (state_dict, dict))?;
        let (new_state, output): (Bound<'_, PyAny>, Bound<'_, PyAny>) =
            out.bind(py).extract().map_err(|_| {
                // The user's function is at fault: a TypeError, raised as UserCodeError.
                pyo3::exceptions::PyTypeError::new_err(format!(
                    "a scan function must return a pair (new_state, output), not {}",
                    out.bind(py)
                        .get_type()
                        .name()
                        .map_or_else(|_| "?".to_string(), |n| n.to_string())
                ))
            })?;
        *state = dict_to_element(py, &new_state, None, "a scan function's new state")?;
        if output.is_none() {
            return Ok(None);
        }
        dict_to_element(py, &output, Some(template), "a scan function's output").map(Some)
    })
    .map_err(user)
}

/// A source reading a Python generator: each epoch calls `callable()` for a new iterator
/// of dicts.
#[derive(Clone)]
pub(crate) struct GeneratorStage {
    callable: Arc<Py<PyAny>>,
    name: String,
}

impl GeneratorStage {
    pub(crate) fn new(callable: Py<PyAny>, name: String) -> Self {
        GeneratorStage {
            callable: Arc::new(callable),
            name,
        }
    }
}

impl std::fmt::Debug for GeneratorStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GeneratorStage")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Stage for GeneratorStage {
    fn name(&self) -> &'static str {
        "from_generator"
    }

    fn params(&self) -> Params {
        Params::new().with("generator", &self.name)
    }

    fn arity(&self) -> sluice_core::Arity {
        sluice_core::Arity::None
    }

    fn build(&self, _inputs: &[Input], _ctx: &BuildContext) -> Result<BoxStream> {
        let iterator: Py<PyIterator> = Python::attach(|py| -> PyResult<_> {
            let it = self.callable.call0(py)?;
            Ok(it.bind(py).try_iter()?.unbind())
        })
        .map_err(user)?;
        let mut index = 0u64;
        let mut done = false;
        Ok(Box::new(IterStream(std::iter::from_fn(move || {
            if done {
                return None;
            }
            let next = Python::attach(|py| -> Option<PyResult<Element>> {
                let mut it = iterator.bind(py).clone();
                let item = it.next()?;
                Some(item.and_then(|obj| dict_to_element(py, &obj, None, "a generator")))
            });
            match next {
                None => {
                    done = true;
                    None
                }
                Some(Ok(mut e)) => {
                    e.set_id(ElementId::new(0, index));
                    index += 1;
                    Some(Ok(e))
                }
                Some(Err(err)) => {
                    done = true;
                    Some(Err(user(err)))
                }
            }
        }))))
    }
}
