//! What listings said about each object (size and ETag), so that opening an object just
//! listed needs no HEAD request: one round trip less per file, which is most of the cost of
//! opening a file when the store is far away.
//!
//! An entry is used for [`FRESH`] after the listing. A reader that opened an object from a
//! listing and finds it changed before it returned a byte looks it up again (see
//! `RemoteReader`), so an object replaced since the listing is read in its new version, not
//! reported as changed.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long a listing's word about an object is used.
pub(crate) const FRESH: Duration = Duration::from_secs(300);

/// Entries kept at most (a listing of more objects keeps the newest).
const MAX_ENTRIES: usize = 1 << 20;

type Entry = (u64, Option<String>, Instant);

static LISTED: OnceLock<Mutex<HashMap<String, Entry>>> = OnceLock::new();

/// Remembers what a listing said about the object at `url`.
pub(crate) fn remember(url: &str, size: u64, etag: Option<String>) {
    let map = LISTED.get_or_init(Default::default);
    let mut map = map.lock().unwrap_or_else(|p| p.into_inner());
    if map.len() >= MAX_ENTRIES {
        map.retain(|_, (_, _, at)| at.elapsed() < FRESH);
        if map.len() >= MAX_ENTRIES {
            map.clear();
        }
    }
    map.insert(url.to_string(), (size, etag, Instant::now()));
}

/// The size a recent listing gave for the object at `url` (a URL as written).
///
/// ```
/// assert_eq!(sluice_storage::listed_size("s3://bucket/never-listed"), None);
/// ```
pub fn listed_size(url: &str) -> Option<u64> {
    let map = LISTED.get()?.lock().unwrap_or_else(|p| p.into_inner());
    map.get(url)
        .filter(|(_, _, at)| at.elapsed() < FRESH)
        .map(|(size, _, _)| *size)
}

/// The size and ETag a recent listing gave for `url`.
pub(crate) fn recall(url: &str) -> Option<(u64, Option<String>)> {
    let map = LISTED.get()?.lock().unwrap_or_else(|p| p.into_inner());
    map.get(url)
        .filter(|(_, etag, at)| at.elapsed() < FRESH && etag.is_some())
        .map(|(size, etag, _)| (*size, etag.clone()))
}
