//! The one error type of `sluice-core`.

use std::path::PathBuf;

use crate::element::{ElementId, Provenance};

/// Everything that can go wrong in a pipeline.
///
/// Errors raised while processing an element travel down the stream wrapped in
/// [`Error::Stage`], which names the stage, the element's id and its provenance (file and
/// byte offset), so a failure can always be traced to the record that caused it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Reading or decoding TFRecord data failed (the message names the file and offset).
    #[error(transparent)]
    Proto(#[from] sluice_proto::Error),
    /// Values do not fit a shape, or tensors cannot be combined (stacked, concatenated,
    /// padded) or indexed as asked.
    #[error(transparent)]
    Tensor(#[from] sluice_tensor::Error),
    /// A file pattern matched nothing.
    #[error("no file matches the pattern {pattern:?}")]
    NoMatch {
        /// The pattern as given.
        pattern: String,
    },
    /// A glob pattern is malformed.
    #[error("invalid file pattern {pattern:?}: {message}")]
    Pattern {
        /// The pattern as given.
        pattern: String,
        /// What is wrong with it.
        message: String,
    },
    /// A file-system operation failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// An argument or a configuration value is invalid.
    #[error("{0}")]
    Invalid(String),
    /// An element does not match what a stage expects; worded as TensorFlow words it where
    /// TensorFlow has a message for it (e.g. `Feature: label (data type: int64) is required
    /// but could not be found.`).
    #[error("{0}")]
    Data(String),
    /// An image cannot be decoded or processed (truncated or unknown data, zero or absurd
    /// dimensions, a shape an op cannot take); the image error tells which kind.
    #[error(transparent)]
    Image(#[from] sluice_image::Error),
    /// An error from user code (a `map` or `filter` closure).
    #[error("{0}")]
    User(Box<dyn std::error::Error + Send + Sync>),
    /// A disk cache problem (locked by another writer, or made by a different pipeline).
    #[error("cache {}: {message}", path.display())]
    Cache {
        /// The cache file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Global shuffle was given a GZIP or ZLIB shard: it reads records at their offsets,
    /// which a compressed stream cannot do.
    #[error(
        "{file} is {compression}-compressed: global shuffle reads records at their offsets, \
         which a compressed stream cannot do; decompress the shards, or use interleave and \
         shuffle"
    )]
    CompressedShard {
        /// The shard.
        file: String,
        /// `gzip` or `zlib`.
        compression: &'static str,
    },
    /// A record read at its indexed offset does not have the indexed length: the shard
    /// changed after it was indexed (a later run rebuilds the index).
    #[error(
        "{file}: the record at {offset} is {found} bytes long but the record index says \
         {indexed}: the file changed after it was indexed (the next run rebuilds the index)"
    )]
    StaleIndex {
        /// The shard.
        file: String,
        /// Offset of the record's header.
        offset: u64,
        /// The length the index gives.
        indexed: u64,
        /// The length the record's header gives.
        found: u64,
    },
    /// The RAM budget does not allow what the pipeline asks for.
    #[error("RAM budget exceeded: {0}")]
    RamBudget(String),

    /// A checkpoint cannot be taken, read or resumed from (names why).
    #[error("checkpoint: {0}")]
    Checkpoint(String),
    /// An error raised by a stage while processing an element, with its context.
    #[error("{stage}: {}: {source}", describe(*.element, .provenance.as_ref()))]
    Stage {
        /// The stage's name and index in the pipeline, e.g. `parse_example#2`.
        stage: String,
        /// The element being processed.
        element: Option<ElementId>,
        /// Where that element came from.
        provenance: Option<Provenance>,
        /// The error.
        #[source]
        source: Box<Error>,
    },
    /// A pipeline file is malformed (TOML syntax, an unknown key, a wrong type) or holds an
    /// impossible value. Raised before anything runs; `location` is the 1-based line and
    /// column of the offending key or value when the file's text is known.
    #[error("{}: {message}", located(origin, *location))]
    PipelineFile {
        /// The file's path, or `<string>` for text given directly.
        origin: String,
        /// Line and column (1-based), when known.
        location: Option<(usize, usize)>,
        /// What is wrong, with the closest valid key for a misspelt one.
        message: String,
    },
    /// A `plugin` stage of a pipeline file could not be made: no loader was given, the file
    /// is missing or not a plugin, or the plugin refused its config. Raised by
    /// `PipelineFile::build_with` before anything runs; `error` is the loader's error.
    #[error("stage {stage} (plugin {}): {error}", path.display())]
    Plugin {
        /// The stage's number in the file (1-based).
        stage: usize,
        /// The plugin file, as the pipeline names it.
        path: PathBuf,
        /// What went wrong.
        error: Box<Error>,
    },
    /// A pipeline with a `plugin` stage was built without a plugin loader.
    #[error(
        "this build has no plugin loader; run it with `sluice run` or PipelineFile::build_with"
    )]
    NoPluginLoader,
    /// Something that should not happen did (a bug): a stage missing from the running
    /// plan, a lock poisoned by a panic, a thread that could not be started.
    #[error("internal error: {0}")]
    Internal(String),
    /// A worker thread panicked (a bug in a closure); the pipeline stops.
    #[error("{stage}: a worker panicked: {message}")]
    Panic {
        /// The stage.
        stage: String,
        /// The panic's message.
        message: String,
    },
}

fn located(origin: &str, location: Option<(usize, usize)>) -> String {
    match location {
        Some((line, column)) => format!("{origin}:{line}:{column}"),
        None => origin.to_string(),
    }
}

fn describe(element: Option<ElementId>, provenance: Option<&Provenance>) -> String {
    match (element, provenance) {
        (Some(id), Some(p)) => format!("element {id} ({p})"),
        (Some(id), None) => format!("element {id}"),
        (None, Some(p)) => format!("{p}"),
        (None, None) => "stream".to_string(),
    }
}

impl Error {
    /// An [`Error::Invalid`].
    pub fn invalid(message: impl Into<String>) -> Error {
        Error::Invalid(message.into())
    }

    /// An [`Error::Internal`].
    pub fn internal(message: impl Into<String>) -> Error {
        Error::Internal(message.into())
    }

    /// An [`Error::Data`].
    pub fn data(message: impl Into<String>) -> Error {
        Error::Data(message.into())
    }

    /// An [`Error::User`] from any error or message.
    pub fn user(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Error {
        Error::User(error.into())
    }

    /// The innermost error, below any [`Error::Stage`] or [`Error::Plugin`] context.
    pub fn root(&self) -> &Error {
        match self {
            Error::Stage { source, .. } => source.root(),
            Error::Plugin { error, .. } => error.root(),
            other => other,
        }
    }

    /// The element the error is about, if known.
    pub fn element(&self) -> Option<ElementId> {
        match self {
            Error::Stage { element, .. } => *element,
            _ => None,
        }
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
