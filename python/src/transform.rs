//! Sluice stages applied to batches that come from elsewhere: what `sluice.ray`'s
//! `SluiceTransform` runs inside each Ray Data `map_batches` actor.
//!
//! A [`Transform`] is made once per actor: its steps are read and checked and every plugin
//! is loaded then (a WASM module compiled and instantiated once, a native library opened
//! once), kept by a caching [`PluginLoader`]. Each batch then becomes a small dataset:
//! its rows as elements (the columns copied once into Rust memory, the rows sharing that
//! copy), the steps appended with the cached plugins, and, when stacking, a `batch` of all
//! its rows at the end, so the optimizer fuses an `image_ops` with it and each row is
//! decoded and augmented straight into the output buffer. The output goes back to NumPy
//! without a copy (arrays over the batch buffer Rust wrote).
//!
//! Element ids, which key every random decision with the seed, the epoch and the stage,
//! are taken from the rows themselves (a CRC32C of each row's values, or an integer id
//! column), so a row gets the same augmentation whatever batch, block or actor Ray puts
//! it in.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use sluice_core::pipeline_file::{LoadedPlugin, PluginLoader, PluginStageSpec};
use sluice_core::prelude::BatchSpec;
use sluice_core::registry::{AppendContext, StageSpec};
use sluice_core::{
    Arity, BoxStream, BuildContext, Dataset, Element, ElementId, Error, Input, IterStream,
    NumParallel, Options, Params, Stage, Tensor, TensorData,
};

use crate::callable::{call_filter, call_flat_map, call_map};
use crate::convert::{element_into_dict, tensor_from_py};
use crate::errors::{IntoPy, invalid};
use crate::pipeline::{CheckedLoader, Op, iter_epoch, options_over, read_op};
use crate::source::{Source, SourceKind};

/// The registered stage kinds a transform runs: those that take one element and give one
/// (or none). Reading, sharding, shuffling, batching and repeating belong to the pipeline
/// that reads the data (`sluice.ray.read`) or to Ray.
const ELEMENT_WISE: [&str; 4] = ["parse_example", "image_ops", "plugin", "prefetch"];

/// A loader that loads each plugin once and hands out the loaded plugin again (its
/// instance pool with it) for every later dataset.
struct CachingLoader {
    inner: CheckedLoader,
    loaded: Mutex<Vec<(PluginStageSpec, LoadedPlugin)>>,
}

impl PluginLoader for CachingLoader {
    fn load(&self, spec: &PluginStageSpec) -> sluice_core::Result<LoadedPlugin> {
        let mut loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, plugin)) = loaded.iter().find(|(s, _)| s == spec) {
            return Ok(plugin.clone());
        }
        let plugin = self.inner.load(spec)?;
        loaded.push((spec.clone(), plugin.clone()));
        Ok(plugin)
    }
}

/// The rows of one batch as a source that keeps their ids (`Dataset::from_elements` numbers
/// elements by position, which would key every batch's random draws alike).
#[derive(Debug, Clone)]
struct Rows(Arc<Vec<Element>>);

impl Stage for Rows {
    fn name(&self) -> &'static str {
        "batch_rows"
    }

    fn params(&self) -> Params {
        Params::new().with("rows", self.0.len())
    }

    fn arity(&self) -> Arity {
        Arity::None
    }

    fn build(&self, _inputs: &[Input], _ctx: &BuildContext) -> sluice_core::Result<BoxStream> {
        let rows = Arc::clone(&self.0);
        Ok(Box::new(IterStream(
            (0..rows.len()).map(move |i| Ok(rows[i].clone())),
        )))
    }
}

/// Sluice stages made ready once and applied to batch after batch.
#[pyclass(module = "sluice._sluice", frozen)]
pub(crate) struct Transform {
    steps: Vec<Op>,
    loader: CachingLoader,
    options: Options,
    epoch: u64,
}

/// One column of an incoming batch: one tensor whose rows are the rows, or (an object
/// array of arrays of different shapes) one tensor per row.
pub(crate) enum Column {
    Whole(Tensor),
    Rows(Vec<Tensor>),
}

impl Column {
    pub(crate) fn rows(&self) -> usize {
        match self {
            Column::Whole(t) => t.shape().first().copied().unwrap_or(0),
            Column::Rows(rows) => rows.len(),
        }
    }

    pub(crate) fn row(&self, i: usize) -> sluice_core::Result<Tensor> {
        match self {
            Column::Whole(t) => Ok(t.row(i)?),
            Column::Rows(rows) => Ok(rows[i].clone()),
        }
    }
}

/// `data`'s bytes folded into `crc`.
fn crc_of(crc: u32, data: &TensorData) -> u32 {
    match data {
        TensorData::U8(v) => crc32c::crc32c_append(crc, v),
        TensorData::I32(v) => crc32c::crc32c_append(crc, bytemuck::cast_slice(v)),
        TensorData::I64(v) => crc32c::crc32c_append(crc, bytemuck::cast_slice(v)),
        TensorData::F32(v) => crc32c::crc32c_append(crc, bytemuck::cast_slice(v)),
        TensorData::F64(v) => crc32c::crc32c_append(crc, bytemuck::cast_slice(v)),
        TensorData::Bytes(v) => v.iter().fold(crc, |c, b| {
            let c = crc32c::crc32c_append(c, &(b.len() as u64).to_le_bytes());
            crc32c::crc32c_append(c, b)
        }),
    }
}

/// A row's id from its values: the CRC32C of every value (with its name and shape), and
/// the row's size in bytes.
fn content_id(row: &[(&str, Tensor)]) -> ElementId {
    let mut crc = 0u32;
    let mut bytes = 0u64;
    for (name, t) in row {
        crc = crc32c::crc32c_append(crc, name.as_bytes());
        for d in t.shape() {
            crc = crc32c::crc32c_append(crc, &(*d as u64).to_le_bytes());
        }
        crc = crc_of(crc, t.data());
        bytes += t.nbytes() as u64;
    }
    ElementId::new(u64::from(crc), bytes)
}

/// The integer value of a row of the id column.
fn id_value(name: &str, t: &Tensor) -> sluice_core::Result<u64> {
    let value = match (t.shape().is_empty(), t.data()) {
        (true, TensorData::I64(v)) => v[0] as u64,
        (true, TensorData::I32(v)) => v[0] as u64,
        (true, TensorData::U8(v)) => u64::from(v[0]),
        _ => {
            return Err(Error::invalid(format!(
                "id_column `{name}` must hold one integer per row, got {} of shape {:?}",
                t.dtype(),
                t.shape()
            )));
        }
    };
    Ok(value)
}

/// A column of a batch as Rust tensors (copied once).
pub(crate) fn column_from_py(
    py: Python<'_>,
    name: &str,
    value: &Bound<'_, PyAny>,
) -> PyResult<Column> {
    // An object array of arrays (Ray's variable-shaped tensor column): one tensor per row.
    let is_object = value
        .getattr("dtype")
        .and_then(|d| d.getattr("kind"))
        .and_then(|k| k.extract::<String>())
        .map(|k| k == "O")
        .unwrap_or(false)
        || value.cast::<PyList>().is_ok();
    if is_object {
        let items: Vec<Bound<'_, PyAny>> = value.try_iter()?.collect::<PyResult<_>>()?;
        let arrays = items
            .first()
            .map(|first| first.hasattr("__array_interface__").unwrap_or(false))
            .unwrap_or(false);
        if arrays {
            let rows = items
                .iter()
                .map(|item| tensor_from_py(py, name, item))
                .collect::<PyResult<_>>()?;
            return Ok(Column::Rows(rows));
        }
    }
    let tensor = tensor_from_py(py, name, value)?;
    if tensor.shape().is_empty() {
        return Err(invalid(
            py,
            format!("column `{name}` is a scalar: a batch's columns need one value per row"),
        ));
    }
    Ok(Column::Whole(tensor))
}

/// Why a transform refuses `scan`.
const SCAN_IN_TRANSFORM: &str = "a transform runs on each batch afresh, and `scan` carries a \
     state from row to row: scan in the pipeline given to sluice.ray.read";

impl Transform {
    /// The dataset of `elements` followed by the steps (and a batch of them all when
    /// `stack`).
    fn dataset(&self, py: Python<'_>, elements: Vec<Element>, stack: bool) -> PyResult<Dataset> {
        let rows = elements.len();
        let mut dataset = Dataset::from_stage(Rows(Arc::new(elements)), vec![]);
        for step in &self.steps {
            dataset = match step {
                Op::Stage(spec, _) => py
                    .detach(|| {
                        spec.append_with(
                            &dataset,
                            &AppendContext {
                                plugins: &self.loader,
                            },
                        )
                    })
                    .py_err(py)?,
                Op::Map { f, spec, with_seed } => {
                    let (f, with_seed) = (f.clone_ref(py), *with_seed);
                    dataset.map_with(*spec, move |e, rng| call_map(&f, with_seed, e, rng))
                }
                Op::Filter { f, spec, with_seed } => {
                    let (f, with_seed) = (f.clone_ref(py), *with_seed);
                    dataset.filter_with(*spec, move |e, rng| call_filter(&f, with_seed, e, rng))
                }
                Op::FlatMap { f, spec, with_seed } => {
                    let (f, with_seed) = (f.clone_ref(py), *with_seed);
                    dataset.flat_map_with(*spec, move |e, rng| call_flat_map(&f, with_seed, e, rng))
                }
                Op::Scan { .. } => {
                    return Err(invalid(py, SCAN_IN_TRANSFORM));
                }
            };
        }
        if stack && rows > 0 {
            let batch = StageSpec::new(BatchSpec {
                batch_size: rows,
                drop_remainder: false,
                num_parallel: NumParallel::Sequential,
                deterministic: true,
            });
            dataset = batch.append_to(&dataset).py_err(py)?;
        }
        Ok(dataset.with_options(self.options.clone()))
    }
}

#[pymethods]
impl Transform {
    /// Reads and checks the steps (`ops`, as `build` takes them, after the stages of
    /// `source` when it is a pipeline file), with `options` (JSON) over the file's, and
    /// loads every plugin. `epoch` keys the random decisions with the seed.
    #[new]
    #[pyo3(signature = (ops, source=None, options=None, plugin_dir=None, epoch=0))]
    fn new(
        py: Python<'_>,
        ops: &Bound<'_, PyList>,
        source: Option<&Source>,
        options: Option<&str>,
        plugin_dir: Option<PathBuf>,
        epoch: u64,
    ) -> PyResult<Transform> {
        let mut steps = Vec::new();
        let mut base = Default::default();
        if let Some(source) = source {
            let SourceKind::File(file) = &source.kind else {
                return Err(invalid(
                    py,
                    "a transform takes its stages from a pipeline file or a sluice.ray.stages() \
                     fragment, not from a pipeline over data already in memory",
                ));
            };
            let mut file = file.as_ref().clone();
            if let Some(dir) = &plugin_dir {
                file = file.with_plugin_dir(dir);
            }
            base = file.options.clone();
            steps.extend(file.stages.into_iter().map(|s| Op::Stage(s, None)));
        }
        for op in ops.iter() {
            steps.push(read_op(py, &op)?);
        }
        for (i, step) in steps.iter().enumerate() {
            if let Op::Scan { .. } = step {
                return Err(invalid(py, format!("step {}: {SCAN_IN_TRANSFORM}", i + 1)));
            }
            if let Op::Stage(spec, _) = step
                && !ELEMENT_WISE.contains(&spec.kind())
            {
                return Err(invalid(
                    py,
                    format!(
                        "step {} ({}): a transform runs element-wise stages ({}, and Python \
                         map/filter); read, shard, shuffle and batch in the pipeline given to \
                         sluice.ray.read, or with Ray",
                        i + 1,
                        spec.kind(),
                        ELEMENT_WISE.join(", ")
                    ),
                ));
            }
        }
        let options = options_over(py, &base, options)?.to_options();
        let transform = Transform {
            loader: CachingLoader {
                inner: CheckedLoader::for_steps(&steps),
                loaded: Mutex::new(Vec::new()),
            },
            steps,
            options,
            epoch,
        };
        // Load every plugin and check what follows what now, before any batch arrives.
        let dataset = transform.dataset(py, Vec::new(), false)?;
        py.detach(|| dataset.explain()).py_err(py)?;
        Ok(transform)
    }

    /// The steps applied to one batch (`columns`: name -> array with one row per entry):
    /// with `stack`, a dict of arrays with a leading row dimension (None when every row
    /// was filtered out); otherwise a list of one dict per row. `id_column` names an
    /// integer column whose values are the rows' ids (default: ids from the rows' values).
    #[pyo3(signature = (columns, stack=true, id_column=None))]
    fn apply<'py>(
        &self,
        py: Python<'py>,
        columns: &Bound<'py, PyDict>,
        stack: bool,
        id_column: Option<&str>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let mut cols: Vec<(String, Column)> = Vec::with_capacity(columns.len());
        let mut rows: Option<(String, usize)> = None;
        for (key, value) in columns.iter() {
            let name: String = key
                .extract()
                .map_err(|_| invalid(py, format!("column names must be str, got {key}")))?;
            let column = column_from_py(py, &name, &value)?;
            let n = column.rows();
            match &rows {
                Some((first, m)) if *m != n => {
                    return Err(invalid(
                        py,
                        format!("column `{name}` has {n} rows but `{first}` has {m}"),
                    ));
                }
                None => rows = Some((name.clone(), n)),
                _ => {}
            }
            cols.push((name, column));
        }
        let n = rows.map(|(_, n)| n).unwrap_or(0);
        if let Some(id) = id_column
            && !cols.iter().any(|(name, _)| name == id)
        {
            return Err(invalid(py, format!("id_column `{id}` is not a column")));
        }
        let elements = py
            .detach(|| -> sluice_core::Result<Vec<Element>> {
                (0..n)
                    .map(|i| {
                        let row: Vec<(&str, Tensor)> = cols
                            .iter()
                            .map(|(name, c)| Ok((name.as_str(), c.row(i)?)))
                            .collect::<sluice_core::Result<_>>()?;
                        let id = match id_column {
                            Some(id) => {
                                let (name, t) = row
                                    .iter()
                                    .find(|(name, _)| *name == id)
                                    .expect("checked above");
                                ElementId::new(0, id_value(name, t)?)
                            }
                            None => content_id(&row),
                        };
                        let mut element = Element::new(id);
                        for (name, t) in row {
                            element.insert(name, t);
                        }
                        Ok(element)
                    })
                    .collect()
            })
            .py_err(py)?;
        let dataset = self.dataset(py, elements, stack)?;
        let epoch = self.epoch;
        let out = py
            .detach(move || -> sluice_core::Result<Vec<Element>> {
                iter_epoch(&dataset, epoch)?.collect()
            })
            .py_err(py)?;
        if stack {
            let mut out = out.into_iter();
            let Some(batch) = out.next() else {
                return Ok(None);
            };
            return Ok(Some(element_into_dict(py, batch)?.into_any()));
        }
        let list = PyList::empty(py);
        for element in out {
            list.append(element_into_dict(py, element)?)?;
        }
        Ok(Some(list.into_any()))
    }
}
