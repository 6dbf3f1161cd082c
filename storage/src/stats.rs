//! What the process asked of each store: requests, retries, bytes and time, counted per
//! store (`s3://bucket`, `gs://bucket`, `https://host:port`, ...) from the first request on.
//! Stats never hold credentials: a store is named by its scheme and bucket or host only.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// Counters of one store, updated by every reader and writer that uses it.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    requests: AtomicU64,
    retries: AtomicU64,
    failures: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
    request_nanos: AtomicU64,
    max_request_nanos: AtomicU64,
    in_flight: AtomicU64,
    max_in_flight: AtomicU64,
}

impl Counters {
    /// A request starts; the returned guard ends it (counting its time) when dropped.
    pub(crate) fn start(self: &Arc<Self>) -> RequestGuard {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let now = self.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        self.max_in_flight.fetch_max(now, Ordering::Relaxed);
        RequestGuard {
            counters: Arc::clone(self),
            started: std::time::Instant::now(),
        }
    }

    /// A request is retried (after a failure or a body cut short).
    pub(crate) fn retry(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }

    /// A request failed (retried or not).
    pub(crate) fn failure(&self) {
        self.failures.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn read(&self, bytes: u64) {
        self.bytes_read.fetch_add(bytes, Ordering::Relaxed);
    }

    pub(crate) fn written(&self, bytes: u64) {
        self.bytes_written.fetch_add(bytes, Ordering::Relaxed);
    }

    fn snapshot(&self) -> StoreStats {
        let requests = self.requests.load(Ordering::Relaxed);
        let nanos = self.request_nanos.load(Ordering::Relaxed);
        StoreStats {
            requests,
            retries: self.retries.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
            bytes_read: self.bytes_read.load(Ordering::Relaxed),
            bytes_written: self.bytes_written.load(Ordering::Relaxed),
            mean_request_time: Duration::from_nanos(nanos.checked_div(requests).unwrap_or(0)),
            max_request_time: Duration::from_nanos(self.max_request_nanos.load(Ordering::Relaxed)),
            max_in_flight: self.max_in_flight.load(Ordering::Relaxed),
        }
    }
}

/// Ends a request when dropped.
pub(crate) struct RequestGuard {
    counters: Arc<Counters>,
    started: std::time::Instant,
}

impl Drop for RequestGuard {
    fn drop(&mut self) {
        let nanos = u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let c = &self.counters;
        c.request_nanos.fetch_add(nanos, Ordering::Relaxed);
        c.max_request_nanos.fetch_max(nanos, Ordering::Relaxed);
        c.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

static STATS: OnceLock<Mutex<BTreeMap<String, Arc<Counters>>>> = OnceLock::new();

/// The counters of the store named `name` (`scheme://bucket-or-host`).
pub(crate) fn counters(name: &str) -> Arc<Counters> {
    let map = STATS.get_or_init(Default::default);
    let mut map = map.lock().unwrap_or_else(|p| p.into_inner());
    Arc::clone(map.entry(name.to_string()).or_default())
}

/// What was asked of one store so far in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StoreStats {
    /// Requests sent (each attempt counts, including retries; listings and HEADs too).
    pub requests: u64,
    /// Attempts that were retries of a failed or cut-short request.
    pub retries: u64,
    /// Attempts that failed (an error, or a body that ended early).
    pub failures: u64,
    /// Bytes received in object bodies.
    pub bytes_read: u64,
    /// Bytes sent in uploads.
    pub bytes_written: u64,
    /// Mean time from sending a request to the end of its body.
    pub mean_request_time: Duration,
    /// The longest request.
    pub max_request_time: Duration,
    /// The most requests that were in flight at once.
    pub max_in_flight: u64,
}

/// Stats of every store this process used, by store (`s3://bucket`, `https://host:port`,
/// ...): requests, retries, failures, bytes and request times.
///
/// ```
/// // No store used yet in this process: nothing to report.
/// assert!(sluice_storage::stats().is_empty());
/// ```
pub fn stats() -> BTreeMap<String, StoreStats> {
    let Some(map) = STATS.get() else {
        return BTreeMap::new();
    };
    map.lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .map(|(k, v)| (k.clone(), v.snapshot()))
        .collect()
}
