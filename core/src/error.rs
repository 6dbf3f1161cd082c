//! The one error type of `sluice-core`.

use std::path::PathBuf;

use crate::element::{ElementId, Provenance};

/// What kind of failure an [`Error`] is, whatever context wraps it: what front ends map
/// errors by (the Python package's exception classes, exit codes). The names follow
/// TensorFlow's status codes where TensorFlow has the kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A parameter, option, argument or pipeline file is wrong (TensorFlow's
    /// `InvalidArgumentError`).
    InvalidArgument,
    /// A file, a pattern's match or a plugin does not exist (`NotFoundError`).
    NotFound,
    /// Stored data is damaged: a checksum, a truncated or oversized record, a stream that
    /// does not decompress, a record that is not the message it should be (`DataLossError`).
    DataLoss,
    /// Well-formed data that is not what a stage needs: a missing feature, a value of the
    /// wrong type or shape, elements that cannot be batched.
    InvalidData,
    /// An image that cannot be decoded or processed (see [`sluice_image::Error`] for which
    /// way: truncated, corrupt, unsupported, ...).
    Image,
    /// A budget or limit would be exceeded: the RAM budget, an image's pixel limit
    /// (`ResourceExhaustedError`).
    ResourceExhausted,
    /// A plugin could not be loaded or configured, or a call failed (its error status, a
    /// panic, a trap, a timeout).
    Plugin,
    /// A checkpoint, cache or index cannot be used with this pipeline or file as it is now
    /// (`FailedPreconditionError`).
    FailedPrecondition,
    /// Reading or writing a file failed.
    Io,
    /// User code (a `map` or `filter` closure) failed.
    User,
    /// The iteration was cancelled ([`Canceller::cancel`](crate::run::Canceller::cancel)).
    Cancelled,
    /// A bug: a panic in a worker, a stage missing from the running plan.
    Internal,
}

impl ErrorKind {
    /// The kind's name, as TensorFlow names its error classes where it has the kind
    /// (`InvalidArgument`, `DataLoss`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::InvalidArgument => "InvalidArgument",
            ErrorKind::NotFound => "NotFound",
            ErrorKind::DataLoss => "DataLoss",
            ErrorKind::InvalidData => "InvalidData",
            ErrorKind::Image => "Image",
            ErrorKind::ResourceExhausted => "ResourceExhausted",
            ErrorKind::Plugin => "Plugin",
            ErrorKind::FailedPrecondition => "FailedPrecondition",
            ErrorKind::Io => "Io",
            ErrorKind::User => "User",
            ErrorKind::Cancelled => "Cancelled",
            ErrorKind::Internal => "Internal",
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Everything that can go wrong in a pipeline: one variant per kind of failure (see
/// [`Error::kind`]), with its context as fields.
///
/// Errors raised while processing an element travel down the stream wrapped in
/// [`Error::Stage`], which names the stage, the element's id and its provenance (file and
/// byte offset), so a failure can always be traced to the record that caused it: the
/// accessors ([`stage`](Error::stage), [`file`](Error::file), [`offset`](Error::offset),
/// [`record_index`](Error::record_index), [`feature`](Error::feature)) find that context
/// whatever wraps it. An error's message says its cause once: a wrapper's message includes
/// the error it wraps, and does not also return it as its `source()`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Reading, decompressing or decoding TFRecord data failed (the message names the file
    /// and offset; kind: data loss, I/O or invalid argument, by the reader's error).
    #[error(transparent)]
    Proto(#[from] sluice_proto::Error),
    /// Listing or reading object storage (or a local file through it) failed; the message
    /// names the URL and byte offset.
    #[error(transparent)]
    Storage(#[from] sluice_storage::Error),
    /// Values do not fit a shape, or tensors cannot be combined (stacked, concatenated,
    /// padded) or indexed as asked.
    #[error(transparent)]
    Tensor(#[from] sluice_tensor::Error),
    /// An image cannot be decoded or processed (truncated or unknown data, zero or absurd
    /// dimensions, a shape an op cannot take); the image error tells which kind.
    #[error(transparent)]
    Image(#[from] sluice_image::Error),
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
    #[error("{}: {error}", path.display())]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The error.
        error: std::io::Error,
    },
    /// An argument, option or parameter is invalid.
    #[error("{0}")]
    InvalidArgument(String),
    /// An element does not match what a stage expects; worded as TensorFlow words it where
    /// TensorFlow has a message for it (e.g. `Feature: label (data type: int64) is required
    /// but could not be found.`).
    #[error("{message}")]
    InvalidData {
        /// What is wrong.
        message: String,
        /// The feature (value) it is about, when it is about one.
        feature: Option<String>,
    },
    /// An error from user code (a `map` or `filter` closure).
    #[error("{0}")]
    User(Box<dyn std::error::Error + Send + Sync>),
    /// A plugin host's error: a plugin that cannot be loaded or configured, or a call that
    /// failed (the host's error type, e.g. `sluice_plugin_host::Error`, tells which).
    #[error("{0}")]
    Plugin(Box<dyn std::error::Error + Send + Sync>),
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
    /// A budget does not allow what the pipeline asks for.
    #[error("{} exceeded: {message}", budget_name(budget))]
    ResourceExhausted {
        /// The option that sets the budget, as written (`ram_budget`).
        budget: &'static str,
        /// What needed more, and what to do.
        message: String,
    },
    /// A checkpoint cannot be taken, read or resumed from (names why).
    #[error("checkpoint: {0}")]
    Checkpoint(String),
    /// An error raised by a stage while processing an element, with its context.
    #[error("{stage}: {}{error}", describe(*.element, .provenance.as_ref()))]
    Stage {
        /// The stage's name and number in the pipeline, e.g. `parse_example#2`.
        stage: String,
        /// The element being processed.
        element: Option<ElementId>,
        /// Where that element came from.
        provenance: Option<Provenance>,
        /// The error.
        error: Box<Error>,
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
    PluginStage {
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
    /// The iteration was cancelled while an element was awaited
    /// ([`Canceller::cancel`](crate::run::Canceller::cancel)).
    #[error("the iteration was cancelled")]
    Cancelled,
    /// Something that should not happen did (a bug): a stage missing from the running
    /// plan, a thread that could not be started.
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

fn budget_name(budget: &str) -> &str {
    match budget {
        "ram_budget" => "RAM budget",
        other => other,
    }
}

fn located(origin: &str, location: Option<(usize, usize)>) -> String {
    match location {
        Some((line, column)) => format!("{origin}:{line}:{column}"),
        None => origin.to_string(),
    }
}

/// `element ID (FILE at offset N): `, as much of it as is known, or nothing.
fn describe(element: Option<ElementId>, provenance: Option<&Provenance>) -> String {
    match (element, provenance) {
        (Some(id), Some(p)) => format!("element {id} ({p}): "),
        (Some(id), None) => format!("element {id}: "),
        (None, Some(p)) => format!("{p}: "),
        (None, None) => String::new(),
    }
}

impl Error {
    /// An [`Error::InvalidArgument`].
    pub fn invalid(message: impl Into<String>) -> Error {
        Error::InvalidArgument(message.into())
    }

    /// An [`Error::Internal`].
    pub fn internal(message: impl Into<String>) -> Error {
        Error::Internal(message.into())
    }

    /// An [`Error::InvalidData`] not about one feature.
    pub fn data(message: impl Into<String>) -> Error {
        Error::InvalidData {
            message: message.into(),
            feature: None,
        }
    }

    /// An [`Error::InvalidData`] about the feature (value) `feature`.
    pub fn data_of(feature: &str, message: impl Into<String>) -> Error {
        Error::InvalidData {
            message: message.into(),
            feature: Some(feature.to_string()),
        }
    }

    /// An [`Error::ResourceExhausted`]: the RAM budget (`ram_budget`) would be exceeded.
    pub fn ram_budget(message: impl Into<String>) -> Error {
        Error::ResourceExhausted {
            budget: "ram_budget",
            message: message.into(),
        }
    }

    /// An [`Error::User`] from any error or message.
    pub fn user(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Error {
        Error::User(error.into())
    }

    /// An [`Error::Plugin`] from a plugin host's error.
    pub fn plugin(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Error {
        Error::Plugin(error.into())
    }

    /// The innermost error, below any [`Error::Stage`] or [`Error::PluginStage`] context.
    pub fn root(&self) -> &Error {
        match self {
            Error::Stage { error, .. } | Error::PluginStage { error, .. } => error.root(),
            other => other,
        }
    }

    /// What kind of failure this is (of the innermost error).
    pub fn kind(&self) -> ErrorKind {
        use sluice_image::Error as I;
        use sluice_proto::Error as P;
        match self.root() {
            Error::Proto(p) => match p {
                P::CorruptedRecord { .. }
                | P::TruncatedRecord { .. }
                | P::RecordTooLarge { .. }
                | P::Decompress { .. }
                | P::Decode { .. } => ErrorKind::DataLoss,
                P::Io { error, .. } => match storage_error(error) {
                    Some(e) => storage_kind(e),
                    None => ErrorKind::Io,
                },
                P::Write { .. } => ErrorKind::Io,
                _ => ErrorKind::InvalidArgument,
            },
            Error::Storage(e) => storage_kind(e),
            Error::Tensor(_) | Error::InvalidData { .. } => ErrorKind::InvalidData,
            Error::Image(i) => match i {
                I::TooLarge { .. } => ErrorKind::ResourceExhausted,
                I::InvalidArgument { .. } => ErrorKind::InvalidArgument,
                I::Shape { .. } | I::DType { .. } | I::Tensor(_) => ErrorKind::InvalidData,
                _ => ErrorKind::Image,
            },
            Error::NoMatch { .. } => ErrorKind::NotFound,
            Error::Io { error, .. } if error.kind() == std::io::ErrorKind::NotFound => {
                ErrorKind::NotFound
            }
            Error::Io { .. } => ErrorKind::Io,
            Error::Pattern { .. }
            | Error::InvalidArgument(_)
            | Error::CompressedShard { .. }
            | Error::PipelineFile { .. } => ErrorKind::InvalidArgument,
            Error::User(_) => ErrorKind::User,
            Error::Plugin(_) | Error::NoPluginLoader => ErrorKind::Plugin,
            Error::Cache { .. } | Error::StaleIndex { .. } | Error::Checkpoint(_) => {
                ErrorKind::FailedPrecondition
            }
            Error::ResourceExhausted { .. } => ErrorKind::ResourceExhausted,
            Error::Cancelled => ErrorKind::Cancelled,
            Error::Internal(_) | Error::Panic { .. } => ErrorKind::Internal,
            // `root` never returns a wrapper.
            Error::Stage { .. } | Error::PluginStage { .. } => ErrorKind::Internal,
        }
    }

    /// The stage the error was raised in, as stats and errors name it (`parse_example#2`),
    /// if it was raised in one.
    pub fn stage(&self) -> Option<&str> {
        match self {
            Error::Stage { stage, error, .. } => error.stage().or(Some(stage)),
            Error::PluginStage { error, .. } => error.stage(),
            Error::Panic { stage, .. } => Some(stage),
            _ => None,
        }
    }

    /// The element the error is about, if known.
    pub fn element(&self) -> Option<ElementId> {
        match self {
            Error::Stage { element, error, .. } => error.element().or(*element),
            _ => None,
        }
    }

    /// Where the element the error is about came from (file and byte offset), if known.
    pub fn provenance(&self) -> Option<&Provenance> {
        match self {
            Error::Stage {
                provenance, error, ..
            } => error.provenance().or(provenance.as_ref()),
            _ => None,
        }
    }

    /// The file (or URL) the error is about: the element's file, or the file an I/O,
    /// reader, cache or index error names.
    pub fn file(&self) -> Option<&str> {
        if let Some(p) = self.provenance() {
            return Some(&p.file);
        }
        match self.root() {
            Error::Proto(p) => p.file(),
            Error::Io { path, .. } | Error::Cache { path, .. } => path.to_str(),
            Error::CompressedShard { file, .. } | Error::StaleIndex { file, .. } => Some(file),
            _ => None,
        }
    }

    /// The byte offset in [`file`](Error::file) the error is about: the reader's offset
    /// for damaged data, else the element's record's.
    pub fn offset(&self) -> Option<u64> {
        match self.root() {
            Error::Proto(
                sluice_proto::Error::CorruptedRecord { offset, .. }
                | sluice_proto::Error::TruncatedRecord { offset, .. }
                | sluice_proto::Error::RecordTooLarge { offset, .. }
                | sluice_proto::Error::Decode { offset, .. },
            )
            | Error::StaleIndex { offset, .. } => Some(*offset),
            _ => self.provenance().map(|p| p.offset),
        }
    }

    /// The index of the record the error is about within its file: the reader's for
    /// damaged data, else the index of the element's id in its source (for a record read
    /// from a file, its record index).
    pub fn record_index(&self) -> Option<u64> {
        match self.root() {
            Error::Proto(
                sluice_proto::Error::CorruptedRecord { index, .. }
                | sluice_proto::Error::TruncatedRecord { index, .. }
                | sluice_proto::Error::RecordTooLarge { index, .. }
                | sluice_proto::Error::Decode { index, .. },
            ) => Some(*index),
            _ => self.element().map(|id| id.index),
        }
    }

    /// The feature (value) the error is about, when it is about one.
    pub fn feature(&self) -> Option<&str> {
        match self.root() {
            Error::InvalidData { feature, .. } => feature.as_deref(),
            _ => None,
        }
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The storage error an I/O error carries (a remote read's failure), if any.
fn storage_error(error: &std::io::Error) -> Option<&sluice_storage::Error> {
    error.get_ref()?.downcast_ref::<sluice_storage::Error>()
}

fn storage_kind(e: &sluice_storage::Error) -> ErrorKind {
    use sluice_storage::Error as S;
    match e {
        S::NotFound { .. } | S::NoMatch { .. } => ErrorKind::NotFound,
        S::Changed { .. } => ErrorKind::FailedPrecondition,
        S::InvalidUrl { .. } | S::Pattern { .. } | S::Unauthenticated { .. } => {
            ErrorKind::InvalidArgument
        }
        _ => ErrorKind::Io,
    }
}
