//! `sluice._sluice`: the extension module under the `sluice` Python package.
//!
//! A thin layer over [`sluice_core`] and [`sluice_plugins`]: the pure-Python package
//! (`python/sluice/`) holds the public API, its documentation and the builder; this module
//! turns what it is given into a [`sluice_core::Dataset`], runs it, and hands batches back
//! as NumPy arrays over the buffers Rust wrote (no copy).
//!
//! - [`source`]: where a pipeline starts (TFRecord files, a pipeline file, NumPy arrays, a
//!   Python generator).
//! - [`pipeline`]: a source and its stages (registered stages as JSON, Python callables)
//!   built into a dataset.
//! - [`iterator`]: one epoch, pulled on a thread of its own so the caller waits with the
//!   GIL released and Ctrl-C is seen within 50 ms.
//! - [`convert`]: tensors to NumPy arrays (zero-copy) and back.
//! - [`callable`]: Python functions as `map`/`filter` stages and generators as sources.
//! - [`transform`]: stages applied to batches that come from elsewhere (Ray Data's
//!   `map_batches`), plugins loaded once.
//! - [`observe`]: a run's trace, timeline and TensorBoard events (`Pipeline.observe`).
//! - [`report`]: `sluice report`'s HTML page (`sluice.report`).
//! - [`writer`]: TFRecord files of `tf.train.Example`s, whole under their name or absent.
//! - [`errors`]: every Rust error as an instance of `sluice.errors`' hierarchy, with the
//!   context the error carries.
//!
//! Every call that runs or waits on Rust work releases the GIL (`Python::detach`).

use pyo3::prelude::*;

mod callable;
mod convert;
mod errors;
mod iterator;
mod observe;
mod pipeline;
mod report;
mod source;
mod storage;
mod transform;
mod writer;

/// The extension module.
#[pymodule]
fn _sluice(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<convert::Buffer>()?;
    m.add_class::<source::Source>()?;
    m.add_class::<pipeline::Built>()?;
    m.add_class::<iterator::Iter>()?;
    m.add_class::<observe::Observer>()?;
    m.add_class::<transform::Transform>()?;
    m.add_class::<writer::TfRecordWriter>()?;
    m.add_function(wrap_pyfunction!(source::source_tfrecord, m)?)?;
    m.add_function(wrap_pyfunction!(source::tfds_info, m)?)?;
    m.add_function(wrap_pyfunction!(source::source_toml_text, m)?)?;
    m.add_function(wrap_pyfunction!(source::source_toml_file, m)?)?;
    m.add_function(wrap_pyfunction!(source::source_slices, m)?)?;
    m.add_function(wrap_pyfunction!(source::source_generator, m)?)?;
    m.add_function(wrap_pyfunction!(source::source_range, m)?)?;
    m.add_function(wrap_pyfunction!(source::source_zip, m)?)?;
    m.add_function(wrap_pyfunction!(source::source_concatenate, m)?)?;
    m.add_function(wrap_pyfunction!(source::source_sample_from, m)?)?;
    m.add_function(wrap_pyfunction!(source::source_choose_from, m)?)?;
    m.add_function(wrap_pyfunction!(pipeline::check_stage, m)?)?;
    m.add_function(wrap_pyfunction!(pipeline::check_options, m)?)?;
    m.add_function(wrap_pyfunction!(pipeline::build, m)?)?;
    m.add_function(wrap_pyfunction!(pipeline::stage_kinds, m)?)?;
    m.add_function(wrap_pyfunction!(storage::storage_stats, m)?)?;
    m.add_function(wrap_pyfunction!(report::render_report, m)?)?;
    Ok(())
}
