//! `Observer`: what `Pipeline.observe` returns: a run's trace (Chrome trace events), its
//! timeline (for `sluice report`) and TensorBoard event files, as `sluice run --trace`,
//! `--json` and `--tensorboard` make them (see `sluice_core::observe`).

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use pyo3::prelude::*;
use sluice_core::Dataset;
use sluice_core::observe::{
    Observe, TensorBoardWriter, Timeline, TimelineConfig, TraceConfig, Tracer,
};

use crate::errors::IntoPy;

/// What a pipeline's runs report to, from `Pipeline.observe` on.
#[pyclass(module = "sluice._sluice", frozen)]
pub(crate) struct Observer {
    dataset: Dataset,
    timeline: Timeline,
    trace: Option<(Tracer, PathBuf)>,
    tensorboard: Option<PathBuf>,
    started_unix: f64,
    written: Mutex<bool>,
}

/// Makes `dataset`'s runs report to a new observer: always a timeline, a trace when
/// `trace` names its file, TensorBoard events when `tensorboard` names their directory.
pub(crate) fn start(
    py: Python<'_>,
    dataset: &Dataset,
    trace: Option<PathBuf>,
    tensorboard: Option<PathBuf>,
) -> PyResult<Observer> {
    let timeline = Timeline::new(TimelineConfig::default());
    let mut observe = Observe::new().timeline(timeline.clone());
    let mut board = None;
    if let Some(dir) = tensorboard {
        let writer = py.detach(|| TensorBoardWriter::create(&dir)).py_err(py)?;
        board = Some(writer.path().to_path_buf());
        timeline.add_sink(Box::new(writer));
    }
    let trace = trace.map(|path| (Tracer::new(TraceConfig::default()), path));
    if let Some((tracer, _)) = &trace {
        observe = observe.trace(tracer.clone());
    }
    dataset.observe(observe);
    Ok(Observer {
        dataset: dataset.clone(),
        timeline,
        trace,
        tensorboard: board,
        started_unix: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64()),
        written: Mutex::new(false),
    })
}

#[pymethods]
impl Observer {
    /// Writes the trace to its file (whole, or not at all); returns the path, or None
    /// without a trace. Events recorded later are kept for the next write.
    fn write_trace(&self, py: Python<'_>) -> PyResult<Option<PathBuf>> {
        let Some((tracer, path)) = &self.trace else {
            return Ok(None);
        };
        py.detach(|| tracer.write_to(path)).py_err(py)?;
        *self.written.lock().unwrap_or_else(|e| e.into_inner()) = true;
        Ok(Some(path.clone()))
    }

    /// Events the trace recorded so far (0 without a trace).
    fn trace_events(&self) -> usize {
        self.trace.as_ref().map_or(0, |(t, _)| t.events())
    }

    /// The TensorBoard event file, if any.
    #[getter]
    fn tensorboard_file(&self) -> Option<PathBuf> {
        self.tensorboard.clone()
    }

    /// The timeline so far (JSON: `sluice_core::observe::TimelineData`).
    fn timeline_json(&self) -> String {
        serde_json::to_string(&self.timeline.data()).unwrap_or_else(|_| "{}".into())
    }

    /// The run as `sluice run --json` writes it (what `sluice report` reads): the latest
    /// epoch's statistics, the timeline of every epoch observed, the machine.
    #[pyo3(signature = (name=None))]
    fn run_json(&self, name: Option<String>) -> String {
        let timeline = self.timeline.data();
        let stats = self.dataset.stats();
        let last = timeline.samples.last();
        let seconds = last.map_or(0.0, |s| s.t);
        let elements = last.map_or(0, |s| s.elements);
        let epochs = timeline.events.iter().filter(|e| e.kind == "epoch").count();
        let run = serde_json::json!({
            "pipeline": name,
            "file": "python",
            "epochs": epochs,
            "elements": elements,
            "batches": 0,
            "seconds": seconds,
            "elements_per_s": elements as f64 / seconds.max(1e-9),
            "skipped": stats.as_ref().map_or(0, |s| s.skipped),
            "records": stats.as_ref().and_then(|s| s.records),
            "bottleneck": stats.as_ref().and_then(|s| s.bottleneck().map(|b| b.name.clone())),
            "stages": stats.as_ref().map(|s| &s.stages),
            "autotune": stats.as_ref().map(|s| &s.autotune),
            "interrupted": null,
            "timeline": timeline,
            "sluice_version": env!("CARGO_PKG_VERSION"),
            "cpus": std::thread::available_parallelism().map_or(1, |n| n.get()),
            "started_unix": self.started_unix,
        });
        run.to_string()
    }
}
