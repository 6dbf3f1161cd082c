//! Where a pipeline starts: a `[source]` of TFRecord files, a whole pipeline file, NumPy
//! arrays already in memory, or a Python generator.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use sluice_core::pipeline_file::{PipelineFile, SourceSpec};
use sluice_core::prelude::{
    ChooseFromSpec, ConcatenateSpec, FilesSpec, RangeSpec, SampleFromSpec, ZipSpec,
};
use sluice_core::{Dataset, Element, ElementId, Error, Tensor};

use crate::pipeline::Built;

use crate::callable::GeneratorStage;
use crate::convert::tensor_from_py;
use crate::errors::{IntoPy, invalid};

/// A pipeline's start, made by one of the `source_*` functions.
#[pyclass(module = "sluice._sluice", frozen)]
pub(crate) struct Source {
    pub(crate) kind: SourceKind,
}

pub(crate) enum SourceKind {
    /// TFRecord files (a `[source]` table), with the stages and options of a pipeline file
    /// when it came from one.
    File(Box<PipelineFile>),
    /// Elements already in memory (`from_tensor_slices`).
    Elements(Arc<Vec<Element>>),
    /// A Python generator (`from_generator`).
    Generator(GeneratorStage),
    /// A dataset made in Rust from others or from nothing: `range`, `zip`,
    /// `concatenate`, `sample_from_datasets`.
    Dataset(Dataset),
}

#[pymethods]
impl Source {
    /// Whether the source came from a pipeline file whose last batching stage batches.
    fn output_is_batched(&self) -> bool {
        match &self.kind {
            SourceKind::File(file) => file.output_is_batched(),
            _ => false,
        }
    }

    /// The files the source reads (its patterns expanded, in order) with their sizes in
    /// bytes where known without a request (a local file's, an object's from its
    /// listing); with `data_dir` replacing the source's `dir`. Empty for sources that are
    /// not files.
    #[pyo3(signature = (data_dir=None))]
    fn list_files(
        &self,
        py: Python<'_>,
        data_dir: Option<std::path::PathBuf>,
    ) -> PyResult<Vec<(String, Option<u64>)>> {
        let SourceKind::File(file) = &self.kind else {
            return Ok(Vec::new());
        };
        let mut file = file.as_ref().clone();
        if let Some(dir) = data_dir {
            file = file.with_data_dir(dir);
        }
        let spec = FilesSpec {
            patterns: file.source.patterns(),
            shuffle: false,
            storage: file.source.storage.clone(),
        };
        py.detach(move || {
            let files = spec.resolve()?;
            Ok(files
                .into_iter()
                .map(|path| {
                    let name = path.display().to_string();
                    let size = if name.contains("://") {
                        sluice_storage::listed_size(&name)
                    } else {
                        std::fs::metadata(&path).ok().map(|m| m.len())
                    };
                    (name, size)
                })
                .collect())
        })
        .py_err(py)
    }

    /// The pipeline file's stage kinds and options as JSON (for the Python side's record
    /// of what the pipeline holds).
    fn file_options_json(&self) -> Option<String> {
        match &self.kind {
            SourceKind::File(file) => serde_json::to_string(&file.options).ok(),
            _ => None,
        }
    }
}

/// TFRecord files: `spec` is the `[source]` table as JSON (`files`, `compression`, ...).
#[pyfunction]
pub(crate) fn source_tfrecord(py: Python<'_>, spec: &str) -> PyResult<Source> {
    let spec: SourceSpec =
        serde_json::from_str(spec).map_err(|e| invalid(py, format!("tfrecord source: {e}")))?;
    let file = PipelineFile::new(spec);
    file.validate().py_err(py)?;
    Ok(Source {
        kind: SourceKind::File(Box::new(file)),
    })
}

/// A pipeline file given as TOML text (errors name it `origin`).
#[pyfunction]
#[pyo3(signature = (text, origin="<string>"))]
pub(crate) fn source_toml_text(py: Python<'_>, text: &str, origin: &str) -> PyResult<Source> {
    let file = PipelineFile::from_toml_named(text, origin).py_err(py)?;
    Ok(Source {
        kind: SourceKind::File(Box::new(file)),
    })
}

/// A pipeline file read from `path`.
#[pyfunction]
pub(crate) fn source_toml_file(py: Python<'_>, path: std::path::PathBuf) -> PyResult<Source> {
    let file = py.detach(|| PipelineFile::load(&path)).py_err(py)?;
    Ok(Source {
        kind: SourceKind::File(Box::new(file)),
    })
}

/// One element per row of every array in `arrays` (a dict name -> array-like): what
/// `tf.data.Dataset.from_tensor_slices` does. Every array must have the same first
/// dimension. The arrays are copied once; the elements share that copy.
#[pyfunction]
pub(crate) fn source_slices(py: Python<'_>, arrays: &Bound<'_, PyDict>) -> PyResult<Source> {
    if arrays.is_empty() {
        return Err(invalid(py, "from_tensor_slices: no arrays given"));
    }
    let mut columns: Vec<(String, Tensor)> = Vec::new();
    let mut rows: Option<(String, usize)> = None;
    for (key, value) in arrays.iter() {
        let name: String = key.extract().map_err(|_| {
            invalid(
                py,
                format!("from_tensor_slices: names must be str, got {key}"),
            )
        })?;
        let tensor = tensor_from_py(py, &name, &value)?;
        let Some(&n) = tensor.shape().first() else {
            return Err(invalid(
                py,
                format!(
                    "from_tensor_slices: `{name}` is a scalar; each value needs a first dimension to slice"
                ),
            ));
        };
        match &rows {
            Some((first, m)) if *m != n => {
                return Err(invalid(
                    py,
                    format!(
                        "from_tensor_slices: `{name}` has {n} rows but `{first}` has {m}: \
                         every array must have the same first dimension"
                    ),
                ));
            }
            None => rows = Some((name.clone(), n)),
            _ => {}
        }
        columns.push((name, tensor));
    }
    let n = rows.map(|(_, n)| n).unwrap_or(0);
    let elements = py
        .detach(|| -> Result<Vec<Element>, Error> {
            (0..n)
                .map(|i| {
                    let mut e = Element::new(ElementId::new(0, i as u64));
                    for (name, t) in &columns {
                        e.insert(name, t.row(i)?);
                    }
                    Ok(e)
                })
                .collect()
        })
        .py_err(py)?;
    Ok(Source {
        kind: SourceKind::Elements(Arc::new(elements)),
    })
}

/// The elements a Python generator yields: `callable()` returns an iterator of dicts
/// (already checked against the output signature by the Python side). `name` names it in
/// stats and fingerprints.
#[pyfunction]
pub(crate) fn source_generator(callable: Py<PyAny>, name: String) -> Source {
    Source {
        kind: SourceKind::Generator(GeneratorStage::new(callable, name)),
    }
}

fn datasets(inputs: &[PyRef<'_, Built>]) -> Vec<Dataset> {
    inputs.iter().map(|b| b.dataset.clone()).collect()
}

/// The integers `start, start + step, ...` below `end` (above, for a negative step), as
/// elements `{"value": int64}` (`Dataset.range`).
#[pyfunction]
pub(crate) fn source_range(py: Python<'_>, start: i64, end: i64, step: i64) -> PyResult<Source> {
    if step == 0 {
        return Err(invalid(py, "range: `step` must not be 0"));
    }
    Ok(Source {
        kind: SourceKind::Dataset(Dataset::from_stage(RangeSpec { start, end, step }, vec![])),
    })
}

/// The i-th elements of every input merged into one (`Dataset.zip`); ends with the
/// shortest input. Value names must not clash.
#[pyfunction]
pub(crate) fn source_zip(py: Python<'_>, inputs: Vec<PyRef<'_, Built>>) -> PyResult<Source> {
    if inputs.is_empty() {
        return Err(invalid(py, "zip: no pipelines given"));
    }
    Ok(Source {
        kind: SourceKind::Dataset(Dataset::from_stage(ZipSpec {}, datasets(&inputs))),
    })
}

/// The first input's elements, then the second's (`Dataset.concatenate`).
#[pyfunction]
pub(crate) fn source_concatenate(first: PyRef<'_, Built>, second: PyRef<'_, Built>) -> Source {
    Source {
        kind: SourceKind::Dataset(Dataset::from_stage(
            ConcatenateSpec {},
            vec![first.dataset.clone(), second.dataset.clone()],
        )),
    }
}

/// Elements drawn at random from the inputs with `weights`
/// (`Dataset.sample_from_datasets`), seeded by `seed` or the pipeline's seed.
#[pyfunction]
#[pyo3(signature = (inputs, weights, seed=None, stop_on_empty=false))]
pub(crate) fn source_sample_from(
    py: Python<'_>,
    inputs: Vec<PyRef<'_, Built>>,
    weights: Vec<f64>,
    seed: Option<u64>,
    stop_on_empty: bool,
) -> PyResult<Source> {
    if inputs.is_empty() || weights.len() != inputs.len() {
        return Err(invalid(
            py,
            format!(
                "sample_from_datasets: {} pipelines and {} weights: give one weight per pipeline",
                inputs.len(),
                weights.len()
            ),
        ));
    }
    if weights.iter().any(|w| !w.is_finite() || *w < 0.0) || weights.iter().all(|w| *w == 0.0) {
        return Err(invalid(
            py,
            "sample_from_datasets: weights must be finite, non-negative and not all zero",
        ));
    }
    let spec = SampleFromSpec {
        weights,
        seed,
        stop_on_empty,
    };
    Ok(Source {
        kind: SourceKind::Dataset(Dataset::from_stage(spec, datasets(&inputs))),
    })
}

/// Each element from the input that the next element of `choice` names by its integer
/// scalar `value` (`Dataset.choose_from_datasets`); ends with `choice`, or when a chosen
/// input is exhausted if `stop_on_empty`.
#[pyfunction]
#[pyo3(signature = (inputs, choice, stop_on_empty=true))]
pub(crate) fn source_choose_from(
    py: Python<'_>,
    inputs: Vec<PyRef<'_, Built>>,
    choice: PyRef<'_, Built>,
    stop_on_empty: bool,
) -> PyResult<Source> {
    if inputs.is_empty() {
        return Err(invalid(py, "choose_from_datasets: no pipelines given"));
    }
    let spec = ChooseFromSpec {
        stop_on_empty,
        ..ChooseFromSpec::default()
    };
    Ok(Source {
        kind: SourceKind::Dataset(Dataset::choose_from_with(
            spec,
            datasets(&inputs),
            &choice.dataset,
        )),
    })
}

/// A prepared TFDS dataset's info as JSON (`sluice tfds info --json`): version, file
/// format, splits with their shard lengths, supervised keys, features; with `split`, also
/// `num_examples` (what the split string selects).
#[pyfunction]
#[pyo3(signature = (name, data_dir=None, split=None))]
pub(crate) fn tfds_info(
    py: Python<'_>,
    name: &str,
    data_dir: Option<std::path::PathBuf>,
    split: Option<&str>,
) -> PyResult<String> {
    use sluice_core::tfds::{TfdsInfo, default_data_dir};
    let dir = default_data_dir(data_dir.as_deref());
    let info = TfdsInfo::find(&dir, name).py_err(py)?;
    let mut json = serde_json::to_value(&info).map_err(|e| invalid(py, e.to_string()))?;
    if let Some(split) = split {
        let n: u64 = info
            .file_instructions(split)
            .py_err(py)?
            .iter()
            .map(|f| f.len())
            .sum();
        json["num_examples"] = n.into();
    }
    Ok(json.to_string())
}
