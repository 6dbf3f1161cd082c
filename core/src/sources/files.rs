//! `files`: a list of files from glob patterns or paths, optionally shuffled per epoch.

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};

use crate::element::{Element, ElementId};
use crate::error::{Error, Result};
use crate::params::Params;
use crate::run::{BuildContext, Input};
use crate::sources::storage::StorageSpec;
use crate::stage::{Arity, Stage};
use crate::stream::{BoxStream, IterStream};
use crate::tensor::Tensor;

/// The name of the value a file-list element holds: the path, as a byte string.
pub(crate) const FILENAME: &str = "filename";

/// What the user writes for a file source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilesSpec {
    /// Glob patterns or plain paths. Every one must match at least one file.
    pub patterns: Vec<String>,
    /// Shuffle the file list (seeded by the pipeline's seed and the epoch) each epoch, as
    /// `list_files(shuffle=True)` does. Default: false (sorted order).
    #[serde(default)]
    pub shuffle: bool,
    /// How URLs among the patterns are reached (credentials, endpoint); empty: the
    /// environment's.
    #[serde(default, skip_serializing_if = "StorageSpec::is_empty")]
    pub storage: StorageSpec,
}

impl FilesSpec {
    /// Expands the patterns: each pattern's matches sorted, duplicates removed, in pattern
    /// order. A pattern matching nothing is an error naming it.
    pub fn resolve(&self) -> Result<Vec<PathBuf>> {
        let mut out: Vec<PathBuf> = Vec::new();
        let options = self.storage.to_options();
        for pattern in &self.patterns {
            // A local glob or an object-store listing, matched, sorted, each file once
            // (sluice-storage does both; its errors keep core's kinds and words).
            let found = sluice_storage::expand(pattern, &options).map_err(|e| match e {
                sluice_storage::Error::NoMatch { .. } => Error::NoMatch {
                    pattern: pattern.clone(),
                },
                sluice_storage::Error::Pattern { pattern, message } => {
                    Error::Pattern { pattern, message }
                }
                sluice_storage::Error::Io { path, error } => Error::Io { path, error },
                other => Error::Storage(other),
            })?;
            for location in found {
                let p = match location {
                    sluice_storage::Location::Local(p) => p,
                    remote => PathBuf::from(remote.display()),
                };
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
        Ok(out)
    }

    /// Resolves the patterns now into a `FileList` stage.
    pub(crate) fn build_list(&self) -> Result<FileList> {
        Ok(FileList {
            files: Arc::new(self.resolve()?),
            shuffle: self.shuffle,
        })
    }
}

/// A resolved file list: yields one element per file with the path as [`FILENAME`]; the
/// element id's source is the file's position in the list.
#[derive(Debug, Clone)]
pub(crate) struct FileList {
    files: Arc<Vec<PathBuf>>,
    shuffle: bool,
}

impl FileList {
    /// The number of files.
    pub(crate) fn len(&self) -> usize {
        self.files.len()
    }

    /// A list of exactly these files.
    pub(crate) fn new(files: Vec<PathBuf>, shuffle: bool) -> Self {
        FileList {
            files: Arc::new(files),
            shuffle,
        }
    }
}

impl Stage for FileList {
    fn name(&self) -> &'static str {
        "files"
    }

    fn params(&self) -> Params {
        let files: Vec<String> = self
            .files
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        Params::new()
            .with("files", files)
            .with("shuffle", self.shuffle)
    }

    fn arity(&self) -> Arity {
        Arity::None
    }

    fn build(&self, _inputs: &[Input], ctx: &BuildContext) -> Result<BoxStream> {
        let mut order: Vec<usize> = (0..self.files.len()).collect();
        if self.shuffle {
            order.shuffle(&mut ctx.stream_key().rng());
        }
        let files = Arc::clone(&self.files);
        Ok(Box::new(IterStream(order.into_iter().map(move |i| {
            let path = files[i].to_string_lossy().into_owned();
            Ok(Element::new(ElementId::new(i as u64, 0))
                .with(FILENAME, Tensor::scalar_bytes(Bytes::from(path))))
        }))))
    }
}

/// Whether a file-list element names an object-store file (a URL other than `file://`),
/// which is worth opening ahead of time.
pub(crate) fn is_remote(file: &Element) -> bool {
    filename_of(file).is_ok_and(|p| sluice_storage::is_url(&p) && !p.starts_with("file://"))
}

/// The path held by a file-list element.
pub(crate) fn filename_of(element: &Element) -> Result<String> {
    let t = element
        .tensor(FILENAME)
        .and_then(|t| t.as_bytes_list())
        .and_then(|v| v.first())
        .ok_or_else(|| Error::data(format!("element has no `{FILENAME}` value")))?;
    Ok(String::from_utf8_lossy(t).into_owned())
}
