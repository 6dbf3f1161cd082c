//! `storage_stats()`: what the process asked of each object store.

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// `{store: {requests, retries, failures, bytes_read, bytes_written, mean_request_ms,
/// max_request_ms, max_in_flight}}` for every object store this process used.
#[pyfunction]
pub(crate) fn storage_stats(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let out = PyDict::new(py);
    for (store, s) in sluice_storage::stats() {
        let d = PyDict::new(py);
        d.set_item("requests", s.requests)?;
        d.set_item("retries", s.retries)?;
        d.set_item("failures", s.failures)?;
        d.set_item("bytes_read", s.bytes_read)?;
        d.set_item("bytes_written", s.bytes_written)?;
        d.set_item("mean_request_ms", s.mean_request_time.as_secs_f64() * 1e3)?;
        d.set_item("max_request_ms", s.max_request_time.as_secs_f64() * 1e3)?;
        d.set_item("max_in_flight", s.max_in_flight)?;
        out.set_item(store, d)?;
    }
    Ok(out)
}
