//! Rust errors as Python exceptions: the class is chosen by the error's
//! [`ErrorKind`](sluice_core::ErrorKind) from `sluice.errors` (pure Python, where the
//! hierarchy is documented), and the context the error carries becomes attributes.

use pyo3::prelude::*;
use pyo3::types::PyString;
use sluice_core::{Error, ErrorKind};

/// The `sluice.errors` class for `kind`.
fn class_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::InvalidArgument => "InvalidArgumentError",
        ErrorKind::NotFound => "NotFoundError",
        ErrorKind::DataLoss => "DataLossError",
        ErrorKind::InvalidData => "InvalidDataError",
        ErrorKind::Image => "ImageError",
        ErrorKind::ResourceExhausted => "ResourceExhaustedError",
        ErrorKind::Plugin => "PluginError",
        ErrorKind::FailedPrecondition => "FailedPreconditionError",
        ErrorKind::Io => "IoError",
        ErrorKind::User => "UserCodeError",
        ErrorKind::Cancelled => "CancelledError",
        ErrorKind::Internal => "InternalError",
        // A kind added to core later: the base class, until it gets its own.
        #[allow(unreachable_patterns)]
        _ => "SluiceError",
    }
}

/// `error` as an instance of its `sluice.errors` class, with the attributes `kind`,
/// `stage`, `element`, `file`, `offset`, `record_index`, `feature`, `line` and `column`
/// (None where the error does not know). An error raised by Python code (a `map`
/// function, a generator) is the new exception's `__cause__`.
pub(crate) fn to_py(py: Python<'_>, error: &Error) -> PyErr {
    match build(py, error) {
        Ok(err) => err,
        // `sluice.errors` could not be imported (a broken installation): say so, with the
        // message.
        Err(e) => e,
    }
}

fn build(py: Python<'_>, error: &Error) -> PyResult<PyErr> {
    let module = py.import("sluice.errors")?;
    // A Sluice error raised by Python code the pipeline runs (the output-signature check
    // of `from_generator`): raised as it is, with the stage added.
    if let Error::User(inner) = error.root()
        && let Some(cause) = inner.downcast_ref::<PyErr>()
        && cause.is_instance(py, &module.getattr("SluiceError")?)
    {
        let exc = cause.clone_ref(py).into_value(py).into_bound(py).into_any();
        if exc.getattr("stage")?.is_none() {
            exc.setattr("stage", error.stage())?;
        }
        return Ok(PyErr::from_value(exc));
    }
    let kind = error.kind();
    let class = module.getattr(class_name(kind))?;
    let message = error.to_string();
    let exc = class.call1((PyString::new(py, &message),))?;
    exc.setattr("kind", kind.name())?;
    exc.setattr("stage", error.stage())?;
    exc.setattr("element", error.element().map(|id| id.to_string()))?;
    exc.setattr("file", error.file())?;
    exc.setattr("offset", error.offset())?;
    exc.setattr("record_index", error.record_index())?;
    exc.setattr("feature", error.feature())?;
    let (line, column) = match error.root() {
        Error::PipelineFile {
            location: Some((line, column)),
            ..
        } => (Some(*line), Some(*column)),
        _ => (None, None),
    };
    exc.setattr("line", line)?;
    exc.setattr("column", column)?;
    if let Error::User(inner) = error.root()
        && let Some(cause) = inner.downcast_ref::<PyErr>()
    {
        exc.setattr("__cause__", cause.clone_ref(py).into_value(py))?;
    }
    Ok(PyErr::from_value(exc))
}

/// A `sluice.errors.InvalidArgumentError` with `message` (a bad argument caught in this
/// layer).
pub(crate) fn invalid(py: Python<'_>, message: impl Into<String>) -> PyErr {
    to_py(py, &Error::invalid(message.into()))
}

/// Converts `Result<T, sluice_core::Error>` to `PyResult<T>`.
pub(crate) trait IntoPy<T> {
    /// The error as its Python exception.
    fn py_err(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPy<T> for sluice_core::Result<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, &e))
    }
}
