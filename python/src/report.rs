//! `render_report`: `sluice report`'s HTML page from Python (`sluice.report`).

use pyo3::prelude::*;

use crate::errors::invalid;

/// The HTML page of one run or two (their JSON texts, as `sluice run --json` prints them;
/// `labels` name them on the page). A text that is not a run is `InvalidArgumentError`.
#[pyfunction]
#[pyo3(signature = (runs, labels=None))]
pub(crate) fn render_report(
    py: Python<'_>,
    runs: Vec<String>,
    labels: Option<Vec<String>>,
) -> PyResult<String> {
    if runs.is_empty() || runs.len() > 2 {
        return Err(invalid(
            py,
            format!("report: one run or two, got {}", runs.len()),
        ));
    }
    let parsed = runs
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let run = sluice_report::Run::from_json(text)
                .map_err(|e| invalid(py, format!("report: run {}: {e}", i + 1)))?;
            Ok(match labels.as_ref().and_then(|l| l.get(i)) {
                Some(label) => run.with_label(label),
                None => run,
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    Ok(py.detach(move || sluice_report::render(&parsed)))
}
