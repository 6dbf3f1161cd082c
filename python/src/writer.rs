//! Writing TFRecord files of `tf.train.Example`s from Python: what `sluice.ray`'s
//! `write_tfrecord` runs in each write task, with the encoding of `sluice run --output`
//! (`sluice_core::example`: one feature per column, flattened row-major; byte strings a
//! `bytes_list`, integers an `int64_list`, floats a `float_list`).
//!
//! The file or object is made by `sluice_storage::create`: nothing appears under its
//! name until [`TfRecordWriter::commit`]; a writer dropped or aborted before that (an
//! error, a killed task) leaves nothing under the name.

use std::path::PathBuf;
use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use sluice_core::prelude::StorageSpec;
use sluice_core::proto::TfMessage;
use sluice_core::proto::tfrecord::{Compression, TfRecordWriter as Writer};
use sluice_core::{Element, ElementId, Error};
use sluice_storage::{Location, ObjectWriter};

use crate::errors::{IntoPy, invalid, to_py};
use crate::transform::{Column, column_from_py};

/// One TFRecord file (or object) being written.
#[pyclass(module = "sluice._sluice")]
pub(crate) struct TfRecordWriter {
    // A Mutex because an upload in progress is `Send` but not `Sync`.
    writer: Mutex<Option<Writer<ObjectWriter>>>,
    name: String,
    records: u64,
}

/// `error` with the file's name in front, as an I/O error of that file.
fn at(name: &str, error: impl std::fmt::Display) -> Error {
    Error::Io {
        path: PathBuf::from(name),
        error: std::io::Error::other(error.to_string()),
    }
}

#[pymethods]
impl TfRecordWriter {
    /// Starts writing `url` (a local path or an object-store URL) with `compression`
    /// (`"none"`, `"gzip"`, `"zlib"`); `storage` (JSON) as `[source.storage]`.
    #[new]
    #[pyo3(signature = (url, compression="none", storage=None))]
    fn new(
        py: Python<'_>,
        url: &str,
        compression: &str,
        storage: Option<&str>,
    ) -> PyResult<TfRecordWriter> {
        let compression: Compression = compression
            .parse()
            .map_err(|e: sluice_core::proto::Error| invalid(py, format!("compression: {e}")))?;
        if compression == Compression::Auto {
            return Err(invalid(
                py,
                "compression: give \"none\", \"gzip\" or \"zlib\" for writing",
            ));
        }
        let storage: StorageSpec = match storage {
            Some(json) => {
                serde_json::from_str(json).map_err(|e| invalid(py, format!("storage: {e}")))?
            }
            None => StorageSpec::default(),
        };
        let location = Location::parse(url).map_err(Error::from).py_err(py)?;
        let name = location.display();
        let writer = py
            .detach(|| -> sluice_core::Result<Writer<ObjectWriter>> {
                let file = sluice_storage::create(&location, &storage.to_options())?;
                Writer::new(file, compression).map_err(|e| at(&name, e))
            })
            .py_err(py)?;
        Ok(TfRecordWriter {
            writer: Mutex::new(Some(writer)),
            name,
            records: 0,
        })
    }

    /// Writes one `tf.train.Example` per row of `columns` (name -> array with one row per
    /// entry; an object array of arrays for rows of different shapes); returns the rows
    /// written.
    fn write(&mut self, py: Python<'_>, columns: &Bound<'_, PyDict>) -> PyResult<u64> {
        let mut cols: Vec<(String, Column)> = Vec::with_capacity(columns.len());
        for (key, value) in columns.iter() {
            let name: String = key
                .extract()
                .map_err(|_| invalid(py, format!("column names must be str, got {key}")))?;
            let column = column_from_py(py, &name, &value)?;
            if let Some((first, c)) = cols.first()
                && c.rows() != column.rows()
            {
                return Err(invalid(
                    py,
                    format!(
                        "{}: column `{name}` has {} rows but `{first}` has {}",
                        self.name,
                        column.rows(),
                        c.rows()
                    ),
                ));
            }
            cols.push((name, column));
        }
        let mut guard = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let Some(writer) = guard.as_mut() else {
            return Err(invalid(
                py,
                format!("{}: the writer was already committed or aborted", self.name),
            ));
        };
        let rows = cols.first().map(|(_, c)| c.rows()).unwrap_or(0);
        let name = &self.name;
        let first = self.records;
        py.detach(|| -> sluice_core::Result<()> {
            for i in 0..rows {
                let mut row = Element::new(ElementId::new(0, first + i as u64));
                for (column, c) in &cols {
                    row.insert(column, c.row(i)?);
                }
                for example in sluice_core::example::to_examples(&row, false)? {
                    writer
                        .write_record(&example.to_bytes())
                        .map_err(|e| at(name, e))?;
                }
            }
            Ok(())
        })
        .map_err(|e| to_py(py, &e))?;
        self.records += rows as u64;
        Ok(rows as u64)
    }

    /// Finishes the file: it appears whole under its name. Returns the records written.
    fn commit(&mut self, py: Python<'_>) -> PyResult<u64> {
        let taken = self.writer.lock().unwrap_or_else(|p| p.into_inner()).take();
        let Some(writer) = taken else {
            return Err(invalid(
                py,
                format!("{}: the writer was already committed or aborted", self.name),
            ));
        };
        let name = self.name.clone();
        py.detach(move || -> sluice_core::Result<()> {
            let file = writer.finish().map_err(|e| at(&name, e))?;
            file.commit()?;
            Ok(())
        })
        .py_err(py)?;
        Ok(self.records)
    }

    /// Stops writing: nothing appears under the name (the temporary file is removed, the
    /// upload aborted).
    fn abort(&mut self, py: Python<'_>) {
        let taken = self.writer.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(writer) = taken {
            py.detach(move || drop(writer));
        }
    }

    /// The path or URL written.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// Records written so far.
    #[getter]
    fn records(&self) -> u64 {
        self.records
    }
}
