//! A source and its stages, built into a [`Dataset`].
//!
//! The Python builder records what the user wrote; [`build`] makes the dataset. Stages of
//! the registry come as JSON (`{"kind": "batch", "batch_size": 64}`, as a `[[stage]]`
//! table), Python functions as `("map" | "filter" | "flat_map", f, ...)` and
//! `("scan", f, initial_state)`. Over TFRecord files, the
//! registered stages before the first Python function join the pipeline file's own, so a
//! builder pipeline and the same pipeline written in TOML are one [`PipelineFile`] and give
//! the same batches.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};
use serde_json::Value;
use std::sync::Arc;

use sluice_core::pipeline_file::{
    LoadedPlugin, OptionsSpec, PipelineFile, PluginLoader, PluginStageSpec,
};
use sluice_core::prelude::{MapSpec, ShardSpec};
use sluice_core::registry::{self, AppendContext, StageSpec};
use sluice_core::{Checkpoint, Dataset, Element, Error, NumParallel, PipelineIter};
use sluice_plugins::Loader;
use sluice_sdk::Kind;

use crate::callable::{call_filter, call_flat_map, call_map, call_scan};
use crate::errors::{IntoPy, invalid};
use crate::iterator::Iter;
use crate::source::{Source, SourceKind};

/// A stage given as JSON, read and checked (as a `[[stage]]` table is).
pub(crate) fn stage_from_json(py: Python<'_>, json: &str) -> PyResult<StageSpec> {
    let value: Value =
        serde_json::from_str(json).map_err(|e| invalid(py, format!("stage: {e}")))?;
    let spec = StageSpec::from_json(value).py_err(py)?;
    spec.validate().map_err(|p| {
        let key = p.path_display().to_string();
        let message = if key.is_empty() {
            p.message.clone()
        } else {
            format!("{key}: {}", p.message)
        };
        invalid(py, format!("{}: {message}", spec.kind()))
    })?;
    Ok(spec)
}

/// Checks a stage given as JSON; returns it as the registry writes it (defaults filled).
#[pyfunction]
pub(crate) fn check_stage(py: Python<'_>, json: &str) -> PyResult<String> {
    Ok(stage_from_json(py, json)?.to_json().to_string())
}

/// Options given as JSON (`seed`, `cpu_budget`, `ram_budget`, `error_policy`,
/// `map_and_batch_fusion`) over `base` (a pipeline file's), checked.
pub(crate) fn options_over(
    py: Python<'_>,
    base: &OptionsSpec,
    json: Option<&str>,
) -> PyResult<OptionsSpec> {
    let Some(json) = json else {
        return Ok(base.clone());
    };
    let given: Value =
        serde_json::from_str(json).map_err(|e| invalid(py, format!("options: {e}")))?;
    let mut merged = serde_json::to_value(base).map_err(|e| invalid(py, e.to_string()))?;
    if let (Value::Object(m), Value::Object(g)) = (&mut merged, given) {
        for (k, v) in g {
            if v.is_null() {
                m.remove(&k);
            } else {
                m.insert(k, v);
            }
        }
    }
    let options: OptionsSpec =
        serde_json::from_value(merged).map_err(|e| invalid(py, format!("options: {e}")))?;
    options.validate().py_err(py)?;
    Ok(options)
}

/// Checks options given as JSON.
#[pyfunction]
pub(crate) fn check_options(py: Python<'_>, json: &str) -> PyResult<()> {
    options_over(py, &OptionsSpec::default(), Some(json)).map(|_| ())
}

/// The registered stage kinds.
#[pyfunction]
pub(crate) fn stage_kinds() -> Vec<&'static str> {
    registry::kinds().collect()
}

/// One of the builder's steps after the source.
pub(crate) enum Op {
    /// A registered stage; for a plugin stage, the kind of plugin the method that made it
    /// expects (`map_plugin`, `filter_plugin`).
    Stage(StageSpec, Option<Expect>),
    Map {
        f: Py<PyAny>,
        spec: MapSpec,
        with_seed: bool,
    },
    Filter {
        f: Py<PyAny>,
        spec: MapSpec,
        with_seed: bool,
    },
    FlatMap {
        f: Py<PyAny>,
        spec: MapSpec,
        with_seed: bool,
    },
    /// A Python `scan`: its function and initial state.
    Scan { f: Py<PyAny>, initial: Element },
}

pub(crate) fn read_op(py: Python<'_>, op: &Bound<'_, PyAny>) -> PyResult<Op> {
    let tuple = op.cast::<PyTuple>()?;
    let tag: String = tuple.get_item(0)?.extract()?;
    match tag.as_str() {
        "stage" => {
            let spec = stage_from_json(py, &tuple.get_item(1)?.extract::<String>()?)?;
            let expect = match tuple.len() {
                3 => match tuple.get_item(2)?.extract::<Option<String>>()?.as_deref() {
                    Some("map") => Some(Expect::Map),
                    Some("filter") => Some(Expect::Filter),
                    _ => None,
                },
                _ => None,
            };
            Ok(Op::Stage(spec, expect))
        }
        "scan" => {
            let f: Py<PyAny> = tuple.get_item(1)?.unbind();
            let initial = crate::convert::dict_to_element(
                py,
                &tuple.get_item(2)?,
                None,
                "scan's initial_state",
            )?;
            Ok(Op::Scan { f, initial })
        }
        "map" | "filter" | "flat_map" => {
            let f: Py<PyAny> = tuple.get_item(1)?.unbind();
            let num_parallel: String = tuple.get_item(2)?.extract()?;
            let num_parallel: NumParallel = serde_json::from_str(&num_parallel)
                .map_err(|e| invalid(py, format!("{tag}: num_parallel: {e}")))?;
            if num_parallel == NumParallel::Fixed(0) {
                return Err(invalid(
                    py,
                    format!("{tag}: num_parallel must be at least 1"),
                ));
            }
            let spec = MapSpec {
                num_parallel,
                deterministic: tuple.get_item(3)?.extract()?,
            };
            let with_seed: bool = tuple.get_item(4)?.extract()?;
            Ok(match tag.as_str() {
                "map" => Op::Map { f, spec, with_seed },
                "flat_map" => Op::FlatMap { f, spec, with_seed },
                _ => Op::Filter { f, spec, with_seed },
            })
        }
        other => Err(invalid(py, format!("unknown step {other:?}"))),
    }
}

/// A dataset ready to run.
#[pyclass(module = "sluice._sluice", frozen)]
pub(crate) struct Built {
    pub(crate) dataset: Dataset,
}

#[pymethods]
impl Built {
    /// A new epoch's iterator; the rest of the epoch `resume` (bytes) was taken in; or,
    /// given the checkpoints of every host of a run (a list of bytes), this host's share of
    /// what that epoch has left.
    #[pyo3(signature = (resume=None))]
    fn iter(&self, py: Python<'_>, resume: Option<&Bound<'_, PyAny>>) -> PyResult<Iter> {
        let parse = |bytes: &Bound<'_, PyBytes>| -> PyResult<Checkpoint> {
            let text = std::str::from_utf8(bytes.as_bytes())
                .map_err(|_| invalid(py, "not a Sluice checkpoint (not UTF-8)"))?;
            Checkpoint::from_json(text).py_err(py)
        };
        enum Resume {
            Fresh,
            Own(Checkpoint),
            Hosts(Vec<Checkpoint>),
        }
        let resume = match resume {
            None => Resume::Fresh,
            Some(obj) => {
                match obj.cast::<PyBytes>() {
                    Ok(bytes) => Resume::Own(parse(bytes)?),
                    Err(_) => {
                        let mut all = Vec::new();
                        for item in obj.try_iter().map_err(|_| {
                            invalid(py, "resume must be a checkpoint (bytes) or a list of them")
                        })? {
                            let item = item?;
                            let bytes = item.cast::<PyBytes>().map_err(|_| {
                            invalid(py, "resume: every checkpoint must be the bytes checkpoint() returned")
                        })?;
                            all.push(parse(bytes)?);
                        }
                        Resume::Hosts(all)
                    }
                }
            }
        };
        let dataset = self.dataset.clone();
        let iter = py
            .detach(move || match resume {
                Resume::Fresh => dataset.iter(),
                Resume::Own(cp) => dataset.resume(&cp),
                Resume::Hosts(cps) => dataset.resume_elastic(&cps),
            })
            .py_err(py)?;
        Ok(Iter::start(iter))
    }

    /// An iterator over epoch `epoch` (0-based) whatever epochs ran before here: what a
    /// DataLoader worker, a fresh copy of the pipeline each epoch, needs to shuffle each
    /// epoch differently (`set_epoch`). With no seed fixed, each run draws its own anyway.
    fn iter_epoch(&self, py: Python<'_>, epoch: u64) -> PyResult<Iter> {
        let dataset = self.dataset.clone();
        let iter = py.detach(move || iter_epoch(&dataset, epoch)).py_err(py)?;
        Ok(Iter::start(iter))
    }

    /// The statistics of the latest run (JSON), or None before any.
    fn stats_json(&self) -> Option<String> {
        self.dataset
            .stats()
            .and_then(|s| serde_json::to_string(&s).ok())
    }

    /// Makes this dataset's runs report to an observer: a timeline always, a trace into
    /// `trace` (a file), TensorBoard events into `tensorboard` (a directory).
    #[pyo3(signature = (trace=None, tensorboard=None))]
    fn observe(
        &self,
        py: Python<'_>,
        trace: Option<std::path::PathBuf>,
        tensorboard: Option<std::path::PathBuf>,
    ) -> PyResult<crate::observe::Observer> {
        crate::observe::start(py, &self.dataset, trace, tensorboard)
    }

    /// The latest run's report, as `sluice run` prints it.
    fn stats_report(&self) -> Option<String> {
        self.dataset.stats().map(|s| s.report())
    }

    /// The plan as written, the optimizer's rewrites, and the plan that runs.
    fn explain(&self, py: Python<'_>) -> PyResult<String> {
        let dataset = self.dataset.clone();
        py.detach(move || dataset.explain()).py_err(py)
    }

    /// Reads the pipeline once and learns what `spec` (an `AdaptSpec` as JSON) asks;
    /// returns the statistics as JSON (what `sluice adapt` writes), the GIL released.
    fn adapt(&self, py: Python<'_>, spec: &str) -> PyResult<String> {
        let spec: sluice_core::adapt::AdaptSpec = serde_json::from_str(spec).map_err(|e| {
            crate::errors::to_py(py, &sluice_core::Error::invalid(format!("adapt: {e}")))
        })?;
        let dataset = self.dataset.clone();
        let stats = py
            .detach(move || sluice_core::adapt::adapt(&dataset, &spec))
            .py_err(py)?;
        serde_json::to_string(&stats)
            .map_err(|e| crate::errors::to_py(py, &sluice_core::Error::internal(e.to_string())))
    }

    /// The pipeline's fingerprint (stages and parameters).
    fn fingerprint(&self) -> String {
        self.dataset.fingerprint()
    }

    /// The seed, when the options fix one.
    fn seed(&self) -> Option<u64> {
        self.dataset.seed()
    }
}

/// Epoch `epoch` (0-based) of `dataset` from its start, whatever ran before: with a seed,
/// the same elements as the `epoch`-th `iter()` of a fresh dataset; without one, a new
/// run (which draws its own seed).
pub(crate) fn iter_epoch(dataset: &Dataset, epoch: u64) -> sluice_core::Result<PipelineIter> {
    match dataset.seed() {
        Some(_) => dataset.iter_epoch(epoch),
        None => dataset.iter(),
    }
}

/// Builds the dataset: `source`, then `ops` (see the module docs), with `options` (JSON)
/// over the pipeline file's, reading shard `shard = (num_shards, index)` of the source
/// when given (the torch adapter's per-worker shard).
#[pyfunction]
#[pyo3(signature = (source, ops, options=None, shard=None, data_dir=None, plugin_dir=None))]
pub(crate) fn build(
    py: Python<'_>,
    source: &Source,
    ops: &Bound<'_, PyList>,
    options: Option<&str>,
    shard: Option<(u64, u64)>,
    data_dir: Option<PathBuf>,
    plugin_dir: Option<PathBuf>,
) -> PyResult<Built> {
    let mut steps = Vec::with_capacity(ops.len());
    for op in ops.iter() {
        steps.push(read_op(py, &op)?);
    }
    let shard_spec = match shard {
        Some((num_shards, index)) => {
            let spec = StageSpec::new(ShardSpec { num_shards, index });
            spec.validate()
                .map_err(|p| invalid(py, format!("shard: {}", p.message)))?;
            Some(spec)
        }
        None => None,
    };
    let checked = CheckedLoader::for_steps(&steps);
    let mut steps = steps.into_iter().peekable();
    let (mut dataset, options) = match &source.kind {
        SourceKind::File(file) => {
            let mut file: PipelineFile = file.as_ref().clone();
            if let Some(dir) = data_dir {
                file = file.with_data_dir(dir);
            }
            if let Some(spec) = shard_spec {
                file.stages.insert(0, spec);
            }
            while let Some(Op::Stage(..)) = steps.peek() {
                let Some(Op::Stage(spec, _)) = steps.next() else {
                    unreachable!()
                };
                file.stages.push(spec);
            }
            if let Some(dir) = plugin_dir {
                file = file.with_plugin_dir(dir);
            }
            let options = options_over(py, &file.options, options)?;
            file.options = options.clone();
            let dataset = py.detach(|| file.build_with(&checked)).py_err(py)?;
            (dataset, options)
        }
        other => {
            let base = match other {
                SourceKind::Elements(elements) => Dataset::from_elements(elements.as_ref().clone()),
                SourceKind::Dataset(dataset) => dataset.clone(),
                SourceKind::Generator(generator) => Dataset::from_stage(generator.clone(), vec![]),
                SourceKind::File(_) => unreachable!("handled above"),
            };
            let dataset = match shard_spec {
                Some(spec) => spec.append_to(&base).py_err(py)?,
                None => base,
            };
            (dataset, options_over(py, &OptionsSpec::default(), options)?)
        }
    };
    let first_appended = ops.len() - steps.len() + 1;
    for (i, step) in steps.enumerate() {
        dataset = match step {
            Op::Stage(spec, _) => py
                .detach(|| {
                    spec.append_with(&dataset, &AppendContext { plugins: &checked })
                        .map_err(|error| match spec.get::<PluginStageSpec>() {
                            // As a pipeline file's plugin stages: naming the stage and file.
                            Some(plugin) => Error::PluginStage {
                                stage: first_appended + i,
                                path: plugin.path.clone(),
                                error: Box::new(error),
                            },
                            None => error,
                        })
                })
                .py_err(py)?,
            Op::Map { f, spec, with_seed } => {
                dataset.map_with(spec, move |e, rng| call_map(&f, with_seed, e, rng))
            }
            Op::Filter { f, spec, with_seed } => {
                dataset.filter_with(spec, move |e, rng| call_filter(&f, with_seed, e, rng))
            }
            Op::FlatMap { f, spec, with_seed } => {
                dataset.flat_map_with(spec, move |e, rng| call_flat_map(&f, with_seed, e, rng))
            }
            Op::Scan { f, initial } => {
                dataset.scan(initial, move |state, e| call_scan(&f, state, e))
            }
        };
    }
    let dataset = dataset.with_options(options.to_options());
    // Stage-level checks (what follows what) run when the plan is optimized: do it now, so
    // a mistake is raised where the pipeline is made rather than at the first element.
    py.detach(|| dataset.explain()).py_err(py)?;
    Ok(Built { dataset })
}

/// The kind of plugin a builder method runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expect {
    /// `map_plugin`: anything but a filter.
    Map,
    /// `filter_plugin`: a filter.
    Filter,
}

/// The plugin hosts' loader, checking that a plugin given to `map_plugin` or
/// `filter_plugin` is of that kind.
pub(crate) struct CheckedLoader {
    inner: Loader,
    expect: Vec<(PluginStageSpec, Expect)>,
}

impl CheckedLoader {
    /// The loader for `steps`: their `map_plugin` / `filter_plugin` stages are checked.
    pub(crate) fn for_steps(steps: &[Op]) -> CheckedLoader {
        CheckedLoader {
            inner: Loader::default(),
            expect: steps
                .iter()
                .filter_map(|op| match op {
                    Op::Stage(spec, Some(expect)) => {
                        Some((spec.get::<PluginStageSpec>()?.clone(), *expect))
                    }
                    _ => None,
                })
                .collect(),
        }
    }
}

impl PluginLoader for CheckedLoader {
    fn load(&self, spec: &PluginStageSpec) -> sluice_core::Result<LoadedPlugin> {
        let backend = self.inner.backend(spec)?;
        if let Some((_, expect)) = self.expect.iter().find(|(s, _)| s == spec) {
            let stage =
                sluice_plugins::PluginStage::new(Arc::clone(&backend), &spec.config_json())?;
            let info = stage.info();
            let is_filter = info.kind == Kind::Filter;
            let wrong = match expect {
                Expect::Map if is_filter => Some(("map_plugin", "filter_plugin")),
                Expect::Filter if !is_filter => Some(("filter_plugin", "map_plugin")),
                _ => None,
            };
            if let Some((used, instead)) = wrong {
                return Err(Error::Plugin(
                    format!(
                        "{used}: plugin {} is a {} plugin; run it with {instead}",
                        info.name,
                        serde_json::to_value(info.kind)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_string))
                            .unwrap_or_default()
                    )
                    .into(),
                ));
            }
        }
        sluice_plugins::loaded(backend, spec)
    }
}
