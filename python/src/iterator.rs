//! One epoch of a pipeline, as a Python iterator.
//!
//! The [`PipelineIter`] is pulled on a thread of its own, one element per request: the
//! caller waits for the reply with the GIL released, in slices of [`POLL`], and checks for
//! signals between them, so Ctrl-C raises `KeyboardInterrupt` within [`POLL`] (the run is
//! cancelled and its threads joined). Nothing is pulled ahead of the caller, so a
//! checkpoint is exactly after the last element returned.

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use pyo3::exceptions::{PyRuntimeError, PyStopIteration};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use sluice_core::{Canceller, Element, PipelineIter, Result};

use crate::convert::element_into_dict;
use crate::errors::{IntoPy, to_py};

/// How long the caller waits with the GIL released before it checks for signals.
const POLL: Duration = Duration::from_millis(20);

type Reply = Option<Result<Element>>;

/// An element with its id, file and offset.
type WithInfo<'py> = (Bound<'py, PyDict>, String, Option<String>, Option<u64>);

struct Running {
    iter: Arc<Mutex<PipelineIter>>,
    canceller: Canceller,
    requests: Option<Sender<()>>,
    replies: Receiver<Reply>,
    worker: Option<JoinHandle<()>>,
    /// A request was sent and its reply not yet received.
    pending: bool,
}

impl Running {
    /// Stops the run: cancels it, ends the worker and drops the iterator (joining the
    /// pipeline's threads). Call with the GIL released: the pipeline's threads may be
    /// waiting for it (a Python `map`).
    fn stop(mut self) {
        self.canceller.cancel();
        self.requests = None;
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
        drop(self.iter);
    }
}

/// An epoch's iterator (`sluice.Pipeline.iter()`).
#[pyclass(module = "sluice._sluice")]
pub(crate) struct Iter {
    running: Option<Running>,
    /// Elements returned so far.
    yielded: u64,
    /// The checkpoint at the end of the epoch, once it ended (every record done: what the
    /// hosts still in the epoch need to resume on another number of hosts).
    ended: Option<String>,
}

fn lock(iter: &Mutex<PipelineIter>) -> std::sync::MutexGuard<'_, PipelineIter> {
    iter.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Iter {
    pub(crate) fn start(iter: PipelineIter) -> Iter {
        let canceller = iter.canceller();
        let iter = Arc::new(Mutex::new(iter));
        let (requests, incoming) = crossbeam_channel::bounded::<()>(1);
        let (outgoing, replies) = crossbeam_channel::bounded::<Reply>(1);
        let shared = Arc::clone(&iter);
        let worker = std::thread::Builder::new()
            .name("sluice-py-iter".into())
            .spawn(move || {
                while incoming.recv().is_ok() {
                    let reply = lock(&shared).next();
                    let last = !matches!(reply, Some(Ok(_)));
                    if outgoing.send(reply).is_err() || last {
                        break;
                    }
                }
            })
            .expect("spawn the iterator thread");
        Iter {
            running: Some(Running {
                iter,
                canceller,
                requests: Some(requests),
                replies,
                worker: Some(worker),
                pending: false,
            }),
            yielded: 0,
            ended: None,
        }
    }

    fn close_now(&mut self, py: Python<'_>) {
        if let Some(running) = self.running.take() {
            py.detach(move || running.stop());
        }
    }

    /// The next element, or None at the end.
    fn next_element(&mut self, py: Python<'_>) -> PyResult<Option<Element>> {
        let Some(running) = self.running.as_mut() else {
            return Ok(None);
        };
        if !running.pending {
            if let Some(requests) = &running.requests {
                // The worker ended (after the last element or an error): the reply is in
                // the channel or the channel is closed.
                let _ = requests.send(());
            }
            running.pending = true;
        }
        loop {
            let replies = running.replies.clone();
            match py.detach(move || replies.recv_timeout(POLL)) {
                Ok(reply) => {
                    running.pending = false;
                    match reply {
                        Some(Ok(element)) => {
                            self.yielded += 1;
                            return Ok(Some(element));
                        }
                        Some(Err(error)) => {
                            let err = to_py(py, &error);
                            self.close_now(py);
                            return Err(err);
                        }
                        None => {
                            // The end of the epoch: keep its checkpoint, then stop.
                            let iter = Arc::clone(&running.iter);
                            self.ended = py
                                .detach(move || lock(&iter).checkpoint())
                                .ok()
                                .map(|c| c.to_json());
                            self.close_now(py);
                            return Ok(None);
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    if let Err(interrupt) = py.check_signals() {
                        // KeyboardInterrupt (or whatever a signal handler raised): cancel
                        // the run and let the exception propagate at once; the threads are
                        // joined on a thread of their own (an element half made, e.g. a
                        // large batch, finishes or sees the cancel first).
                        if let Some(running) = self.running.take() {
                            running.canceller.cancel();
                            let _ = std::thread::Builder::new()
                                .name("sluice-py-stop".into())
                                .spawn(move || running.stop());
                        }
                        return Err(interrupt);
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    self.close_now(py);
                    return Ok(None);
                }
            }
        }
    }
}

#[pymethods]
impl Iter {
    #[allow(clippy::self_named_constructors)] // Python's iterator protocol names it.
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        match self.next_element(py)? {
            Some(element) => element_into_dict(py, element),
            None => Err(PyStopIteration::new_err(())),
        }
    }

    /// The next element with its id and provenance: `(dict, id, file, offset)`.
    fn next_with_info<'py>(&mut self, py: Python<'py>) -> PyResult<WithInfo<'py>> {
        match self.next_element(py)? {
            Some(element) => {
                let (file, offset) = match element.provenance() {
                    Some(p) => (Some(p.file.to_string()), Some(p.offset)),
                    None => (None, None),
                };
                let id = element.id().to_string();
                Ok((element_into_dict(py, element)?, id, file, offset))
            }
            None => Err(PyStopIteration::new_err(())),
        }
    }

    /// Where the iteration is: the checkpoint the Rust API writes, as bytes (JSON); after
    /// the epoch's end, its end.
    fn checkpoint<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let Some(running) = &self.running else {
            if let Some(json) = &self.ended {
                return Ok(PyBytes::new(py, json.as_bytes()));
            }
            return Err(PyRuntimeError::new_err(
                "the iterator is closed (it failed or was closed): take checkpoints while it runs",
            ));
        };
        if running.pending {
            return Err(PyRuntimeError::new_err(
                "an element is being fetched: take the checkpoint between elements",
            ));
        }
        let iter = Arc::clone(&running.iter);
        let checkpoint = py.detach(move || lock(&iter).checkpoint()).py_err(py)?;
        Ok(PyBytes::new(py, checkpoint.to_json().as_bytes()))
    }

    /// This run's statistics so far (JSON).
    fn stats_json(&self, py: Python<'_>) -> Option<String> {
        let running = self.running.as_ref()?;
        if running.pending {
            return None;
        }
        let iter = Arc::clone(&running.iter);
        py.detach(move || serde_json::to_string(&lock(&iter).stats()).ok())
    }

    /// Elements returned so far.
    #[getter]
    fn yielded(&self) -> u64 {
        self.yielded
    }

    /// Whether the iterator was closed (or ended).
    #[getter]
    fn closed(&self) -> bool {
        self.running.is_none()
    }

    /// Stops the run and joins its threads; further `next` calls end the iteration.
    fn close(&mut self, py: Python<'_>) {
        self.close_now(py);
    }
}

impl Drop for Iter {
    fn drop(&mut self) {
        if let Some(running) = self.running.take() {
            // The pipeline's threads may need the GIL to finish (a Python `map`): join
            // them with it released.
            Python::attach(|py| py.detach(move || running.stop()));
        }
    }
}
