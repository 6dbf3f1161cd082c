//! `sluice-storage`: where Sluice reads data from, local files or object storage, behind
//! one blocking [`std::io::Read`].
//!
//! A location is a local path or a URL: `s3://bucket/prefix/train-*`, `gs://...`,
//! `az://container/...`, `http(s)://host/path`, `file:///abs/path`. Globs in a URL expand by
//! listing the prefix before the first glob character. Remote objects are read with large
//! ranged requests kept in flight ahead of the reader ([`ReadOptions`]), each pinned to the
//! object's ETag (a change during the read is an error), retried with backoff and resumed at
//! the byte offset reached, so no byte is lost or read twice.
//!
//! Credentials and endpoints come from each cloud's usual environment variables (for S3:
//! `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT_URL` for
//! S3-compatible servers), overridden by explicit [`StorageOptions`]. Secrets never appear in
//! errors.
//!
//! ```
//! use std::io::Read;
//!
//! # fn main() -> Result<(), sluice_storage::Error> {
//! // Local paths go through the same calls as URLs.
//! let dir = tempfile::tempdir().unwrap();
//! std::fs::write(dir.path().join("a.bin"), b"hello").unwrap();
//! let pattern = format!("{}/*.bin", dir.path().display());
//! let found = sluice_storage::expand(&pattern, &Default::default())?;
//! assert_eq!(found.len(), 1);
//! let mut text = String::new();
//! sluice_storage::open(&found[0], &Default::default())?.read_to_string(&mut text).unwrap();
//! assert_eq!(text, "hello");
//! # Ok(())
//! # }
//! ```
#![deny(unsafe_code)]

mod durable;
mod error;
mod list;
mod listed;
mod location;
// Maps files and guards the mappings against SIGBUS: `unsafe` by nature, each block says why
// it is sound.
#[allow(unsafe_code)]
mod mapped;
mod options;
mod reader;
mod runtime;
mod stats;
mod store;
#[cfg(feature = "testing")]
pub mod testing;
mod writer;

pub use durable::{remove_stale_temporaries, rename_durably, sync_dir, write_durably};
pub use error::{Error, Result};
pub use list::expand;
pub use listed::listed_size;
pub use location::{Location, is_url};
pub use mapped::{map_file, zero_filled_pages};
pub use options::{ReadOptions, StorageOptions, is_option_key};
pub use reader::{RemoteObject, RemoteReader, open, open_ahead, open_ahead_at, size};
pub use stats::{StoreStats, stats};
pub use writer::{ObjectWriter, create};
