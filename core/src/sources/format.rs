//! File formats other than TFRecord: what a format says (how one file's bytes become
//! records, [`FileFormat`]) and the one stage that reads any of them over a file list
//! ([`ReadFiles`]), so that each format is a spec and a record reader and nothing else.
//!
//! A format's records become elements with ids `(file index, record index)` and provenance
//! `(file, byte offset)`, like TFRecord's: `shard`, `interleave` over files, shuffles,
//! checkpoints and elastic resume treat every format alike
//! ([`Stage::file_reader`], [`Stage::shards_by_input`]). Files are local paths or object-store
//! URLs; compressed files are decompressed as they are read.

use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::sync::Arc;

use flate2::read::{MultiGzDecoder, ZlibDecoder};
use sluice_proto::tfrecord::Compression;

use crate::dataset::Dataset;
use crate::element::{Element, ElementId, Provenance, Value};
use crate::error::{Error, Result};
use crate::invalid::Invalid;
use crate::params::Params;
use crate::run::{BuildContext, Input};
use crate::sources::files::{filename_of, is_remote};
use crate::sources::storage::StorageSpec;
use crate::stage::{Arity, OpenFn, Stage};
use crate::stream::{BoxStream, ElementStream};
use crate::tensor::Tensor;

/// One record of a file: its features and the byte offset it starts at (in the
/// decompressed stream).
#[derive(Debug)]
pub struct Record {
    /// Where the record starts, in bytes from the start of the (decompressed) file.
    pub offset: u64,
    /// Its features, in order, named by shared names (distinct).
    pub features: Vec<(Arc<str>, Tensor)>,
}

/// A record that could not be read: where, which feature (when one), and why.
#[derive(Debug)]
pub struct RecordError {
    /// Where the bad record starts, in bytes from the start of the (decompressed) file.
    pub offset: u64,
    /// The feature (column) at fault, when one is.
    pub feature: Option<String>,
    /// What is wrong, with the place in the format's own terms (e.g. the CSV line).
    pub message: String,
    /// Whether reading can go on after it (a bad CSV row: yes; a truncated file: no).
    pub recoverable: bool,
}

/// The records of one file, read in order.
pub trait RecordReader: Send {
    /// The next record, `None` at the end of the file.
    fn next_record(&mut self) -> Option<std::result::Result<Record, RecordError>>;
}

/// Consecutive records of one file read column by column: what a format that can read
/// straight into columns gives [`ReadFiles`] fused with the `batch` after it (see
/// [`crate::optimize::ReadAndBatchFusion`]).
#[derive(Debug)]
pub struct Chunk {
    /// Each record's byte offset (in the decompressed file), in order: one per row.
    pub offsets: Vec<u64>,
    /// The features, in the order a record of [`RecordReader`] has them, each with one row
    /// per record: a dense tensor `[rows, ...]` (each row the record's value), or a ragged
    /// value whose rows are the records' values.
    pub columns: Vec<(Arc<str>, Value)>,
}

impl Chunk {
    /// Its number of records.
    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    /// True when it holds no record.
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }
}

/// The records of one file read in chunks (see [`Chunk`]).
pub trait ChunkReader: Send {
    /// The next at most `max` (≥ 1) records, consecutive, as one chunk; `None` at the end of
    /// the file. A bad record ends the chunk before it and is what the next call returns
    /// (so a chunk is never empty); reading goes on after it when it is recoverable.
    fn next_chunk(&mut self, max: usize) -> Option<std::result::Result<Chunk, RecordError>>;
}

/// A [`ChunkReader`] read record by record (a format that reads in chunks, where no
/// `batch` follows its reader): each record's values are one-row slices of its chunk's
/// columns, sharing their buffers.
pub struct ChunkRecords {
    chunks: Box<dyn ChunkReader>,
    /// Records per chunk read.
    size: usize,
    current: Option<Chunk>,
    /// The next row of `current`.
    next: usize,
}

impl ChunkRecords {
    /// The records of `chunks`, read `size` at a time.
    pub fn new(chunks: impl ChunkReader + 'static, size: usize) -> Self {
        ChunkRecords {
            chunks: Box::new(chunks),
            size: size.max(1),
            current: None,
            next: 0,
        }
    }
}

impl RecordReader for ChunkRecords {
    fn next_record(&mut self) -> Option<std::result::Result<Record, RecordError>> {
        loop {
            if let Some(chunk) = &self.current
                && self.next < chunk.len()
            {
                let r = self.next;
                self.next += 1;
                let features = chunk
                    .columns
                    .iter()
                    .map(|(name, value)| {
                        let row = match value {
                            Value::Dense(t) => t.row(r).map_err(Error::from),
                            Value::Ragged(g) => g.row(r),
                        };
                        row.map(|t| (Arc::clone(name), t))
                    })
                    .collect::<Result<Vec<_>>>();
                return Some(match features {
                    Ok(features) => Ok(Record {
                        offset: chunk.offsets[r],
                        features,
                    }),
                    Err(e) => Err(RecordError {
                        offset: chunk.offsets[r],
                        feature: None,
                        message: format!("a chunk's row {r}: {e}"),
                        recoverable: false,
                    }),
                });
            }
            self.current = None;
            self.next = 0;
            match self.chunks.next_chunk(self.size)? {
                Ok(chunk) => self.current = Some(chunk),
                Err(bad) => return Some(Err(bad)),
            }
        }
    }
}

/// A file format: reads one file's bytes as records.
pub trait FileFormat: fmt::Debug + Send + Sync + 'static {
    /// The reading stage's name (`csv`, `text_lines`, ...).
    fn name(&self) -> &'static str;

    /// The format's parameters, as `explain`, stats and fingerprints show them.
    fn params(&self) -> Params;

    /// Checks the parameters before anything runs. Default: nothing to check.
    fn validate(&self) -> std::result::Result<(), Invalid> {
        Ok(())
    }

    /// How files are opened: compression, object-store settings.
    fn opening(&self) -> Opening;

    /// The records of one file, read from `file.input` (already decompressed).
    fn records(&self, file: OpenedFile) -> Result<Box<dyn RecordReader>>;

    /// The records of the entry `path` of the file list. Default: the file opened as
    /// [`opening`](FileFormat::opening) says, then [`records`](FileFormat::records). A
    /// format whose entries are not files (a SQL query's partitions) reads them itself.
    fn open_records(&self, path: &str) -> Result<Box<dyn RecordReader>> {
        self.records(self.opening().open(path)?)
    }

    /// Whether the format reads files in [`Chunk`]s ([`open_chunks`](FileFormat::open_chunks)):
    /// then a `batch` right after the reader is fused with it. Default: no.
    fn reads_chunks(&self) -> bool {
        false
    }

    /// The records of the entry `path` in [`Chunk`]s: the same records, values, offsets and
    /// errors as [`open_records`](FileFormat::open_records), column by column. Only called
    /// when [`reads_chunks`](FileFormat::reads_chunks) is true.
    fn open_chunks(&self, _path: &str) -> Result<Box<dyn ChunkReader>> {
        Err(Error::internal(format!(
            "the {} format does not read in chunks",
            self.name()
        )))
    }
}

/// A file opened for reading, decompressed.
pub struct OpenedFile {
    /// Its (decompressed) bytes.
    pub input: Box<dyn BufRead + Send>,
    /// Its path or URL, for messages.
    pub path: String,
    /// Its size in bytes when it is read uncompressed and the size is known.
    pub size: Option<u64>,
}

/// How the files of a format are opened: compression and object-store settings. Every
/// format's spec has these two keys: `compression_type` (TensorFlow's name; `compression`
/// is accepted too): `""` or `none` (the default, as in TensorFlow), `gzip`, `zlib`, or
/// `auto` (detected from the first bytes: only for files whose data cannot look like a
/// compressed stream's header); and `storage`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Opening {
    /// The files' compression.
    pub compression_type: Compression,
    /// How URLs are reached and read; empty: the environment's settings.
    pub storage: StorageSpec,
}

/// For `skip_serializing_if`: no compression.
pub(crate) fn is_none(c: &Compression) -> bool {
    *c == Compression::None
}

/// `compression_type` as written: TensorFlow's names and Sluice's, any case.
pub(crate) mod compression_type {
    use serde::{Deserialize, Deserializer, Serializer};
    use sluice_proto::tfrecord::Compression;

    pub(crate) fn serialize<S: Serializer>(c: &Compression, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(c.name())
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Compression, D::Error> {
        let s = String::deserialize(d)?;
        parse(&s).map_err(serde::de::Error::custom)
    }

    /// `""` and `none` are no compression; `gzip`, `zlib`, `auto` in any case.
    pub(crate) fn parse(s: &str) -> Result<Compression, String> {
        match s.to_ascii_lowercase().as_str() {
            "" | "none" => Ok(Compression::None),
            "gzip" => Ok(Compression::Gzip),
            "zlib" => Ok(Compression::Zlib),
            "auto" => Ok(Compression::Auto),
            other => Err(format!(
                "unknown compression_type {other:?}: expected \"\" or \"none\", \"gzip\", \
                 \"zlib\" or \"auto\""
            )),
        }
    }
}

impl Opening {
    /// The parameters as fingerprints show them (storage without secrets).
    pub(crate) fn params(&self) -> Params {
        let params = Params::new().with("compression_type", self.compression_type.name());
        if self.storage.is_empty() {
            params
        } else {
            params.with("storage", self.storage.redacted())
        }
    }

    /// Opens `path` (a local path or a URL) and decompresses it as configured.
    pub fn open(&self, path: &str) -> Result<OpenedFile> {
        let (raw, size): (Box<dyn Read + Send>, Option<u64>) = if sluice_storage::is_url(path) {
            let location = sluice_storage::Location::parse(path)?;
            let options = self.storage.to_options();
            let object = sluice_storage::RemoteObject::open(&location, &options)?;
            (
                sluice_storage::open_ahead(&location, &options)?,
                Some(object.size()),
            )
        } else {
            let io = |error| Error::Io {
                path: path.into(),
                error,
            };
            let file = File::open(path).map_err(io)?;
            let size = file.metadata().map_err(io)?.len();
            (Box::new(file), Some(size))
        };
        let mut raw = BufReader::with_capacity(256 << 10, raw);
        let compression = match self.compression_type {
            Compression::Auto => {
                let head = raw.fill_buf().map_err(|error| Error::Io {
                    path: path.into(),
                    error,
                })?;
                Compression::detect(head)
            }
            other => other,
        };
        let (input, size): (Box<dyn BufRead + Send>, _) = match compression {
            Compression::Gzip => (
                Box::new(BufReader::with_capacity(
                    256 << 10,
                    MultiGzDecoder::new(raw),
                )),
                None,
            ),
            Compression::Zlib => (
                Box::new(BufReader::with_capacity(256 << 10, ZlibDecoder::new(raw))),
                None,
            ),
            Compression::None | Compression::Auto => (Box::new(raw), size),
        };
        Ok(OpenedFile {
            input,
            path: path.to_string(),
            size,
        })
    }
}

/// The stage reading the files its input names with a [`FileFormat`], file after file
/// (`interleave` reads several at once through [`Stage::file_reader`]).
#[derive(Debug, Clone)]
pub struct ReadFiles {
    format: Arc<dyn FileFormat>,
}

impl ReadFiles {
    /// Reads with `format`.
    pub fn new(format: impl FileFormat) -> Self {
        ReadFiles {
            format: Arc::new(format),
        }
    }

    /// The format it reads.
    pub fn format(&self) -> &Arc<dyn FileFormat> {
        &self.format
    }
}

impl Stage for ReadFiles {
    fn name(&self) -> &'static str {
        self.format.name()
    }

    fn params(&self) -> Params {
        self.format.params()
    }

    fn validate(&self) -> std::result::Result<(), Invalid> {
        self.format.validate()
    }

    fn check_inputs(
        &self,
        inputs: &[Arc<crate::plan::PlanNode>],
    ) -> std::result::Result<(), String> {
        crate::plan::check_file_list_input(self.format.name(), inputs)
    }

    fn file_reader(&self) -> Option<OpenFn> {
        let format = Arc::clone(&self.format);
        Some(Arc::new(move |file: &Element| {
            Ok(Dataset::from_stage(
                FormatFile {
                    path: filename_of(file)?,
                    file_index: file.id().source,
                    format: Arc::clone(&format),
                },
                vec![],
            ))
        }))
    }

    fn shards_by_input(&self) -> bool {
        true
    }

    fn elastic(&self) -> std::result::Result<(), std::borrow::Cow<'static, str>> {
        Ok(())
    }

    fn build(&self, inputs: &[Input], ctx: &BuildContext) -> Result<BoxStream> {
        let input = crate::stages::single_input(inputs, self.format.name())?;
        // `in` counts the records read, not the file names taken from the input.
        ctx.metrics().set_counts_own_inputs();
        let (format, file_ctx) = (Arc::clone(&self.format), ctx.clone());
        Ok(Box::new(Sequential::new(
            input.open()?,
            move |file: &Element| {
                filename_of(file)
                    .and_then(|path| open_file(&format, &path, file.id().source, &file_ctx))
            },
            ctx,
        )))
    }
}

/// One file of a format as a source: the sub-dataset `interleave` reads for each file.
#[derive(Debug, Clone)]
struct FormatFile {
    path: String,
    file_index: u64,
    format: Arc<dyn FileFormat>,
}

impl Stage for FormatFile {
    fn name(&self) -> &'static str {
        "format_file"
    }

    fn params(&self) -> Params {
        self.format
            .params()
            .with("format", self.format.name())
            .with("path", &self.path)
            .with("file_index", self.file_index)
    }

    fn arity(&self) -> Arity {
        Arity::None
    }

    fn elastic(&self) -> std::result::Result<(), std::borrow::Cow<'static, str>> {
        Ok(())
    }

    fn build(&self, _inputs: &[Input], ctx: &BuildContext) -> Result<BoxStream> {
        open_file(&self.format, &self.path, self.file_index, ctx)
    }
}

/// The records of one file as elements.
fn open_file(
    format: &Arc<dyn FileFormat>,
    path: &str,
    file_index: u64,
    ctx: &BuildContext,
) -> Result<BoxStream> {
    let reader = format.open_records(path)?;
    Ok(Box::new(FileRecords {
        reader,
        file: Arc::from(path),
        file_index,
        index: 0,
        ctx: ctx.clone(),
        ended: false,
    }))
}

struct FileRecords {
    reader: Box<dyn RecordReader>,
    file: Arc<str>,
    file_index: u64,
    /// The index of the next record (records returned and skipped so far).
    index: u64,
    ctx: BuildContext,
    /// The reader has ended (and, the first time, reported its end).
    ended: bool,
}

impl FileRecords {
    fn end(&mut self) {
        if !self.ended {
            self.ended = true;
            self.ctx.file_ended(self.file_index, self.index);
        }
    }
}

impl ElementStream for FileRecords {
    fn next(&mut self) -> Option<Result<Element>> {
        loop {
            if self.ended {
                return None;
            }
            let Some(item) = self.reader.next_record() else {
                self.end();
                return None;
            };
            let id = ElementId::new(self.file_index, self.index);
            self.index += 1;
            match item {
                Ok(record) => {
                    self.ctx.metrics().add_in(1);
                    let provenance = Provenance {
                        file: Arc::clone(&self.file),
                        offset: record.offset,
                    };
                    let values = record
                        .features
                        .into_iter()
                        .map(|(name, t)| (name, Value::Dense(t)))
                        .collect();
                    return Some(Ok(Element::from_values(id, Some(provenance), values)));
                }
                Err(bad) => {
                    if !bad.recoverable {
                        // Nothing after it can be read: the file ends here either way.
                        self.ended = true;
                    }
                    let err = record_error(&self.ctx, &self.file, id, bad);
                    match self.ctx.on_error(err) {
                        Some(err) => return Some(Err(err)),
                        None => {
                            if self.ended {
                                self.ended = false;
                                self.end();
                                return None;
                            }
                            continue;
                        }
                    }
                }
            }
        }
    }
}

/// A bad record as the reading stage's error: the record's id, file and offset, and the
/// feature at fault when one is.
pub(crate) fn record_error(
    ctx: &BuildContext,
    file: &Arc<str>,
    id: ElementId,
    bad: RecordError,
) -> Error {
    let error = match bad.feature {
        Some(f) => Error::data_of(&f, bad.message),
        None => Error::data(bad.message),
    };
    Error::Stage {
        stage: ctx.stage_label(),
        element: Some(id),
        provenance: Some(Provenance {
            file: Arc::clone(file),
            offset: bad.offset,
        }),
        error: Box::new(error),
    }
}

/// Reads the files of a file list one after the other. While an object-store file is
/// read, the next one (when it is one too) is already open.
pub(crate) struct Sequential {
    files: FileWalk<BoxStream>,
    current: Option<BoxStream>,
    ctx: BuildContext,
}

impl Sequential {
    /// The records of the files `files` names, each file's opened by `open` (a file that
    /// cannot be opened goes through `ctx`'s error policy).
    pub(crate) fn new(
        files: BoxStream,
        open: impl Fn(&Element) -> Result<BoxStream> + Send + 'static,
        ctx: &BuildContext,
    ) -> Self {
        Sequential {
            files: FileWalk::new(files, open),
            current: None,
            ctx: ctx.clone(),
        }
    }
}

impl ElementStream for Sequential {
    fn next(&mut self) -> Option<Result<Element>> {
        loop {
            if let Some(cur) = self.current.as_mut() {
                match cur.next() {
                    Some(item) => return Some(item),
                    None => self.current = None,
                }
            }
            let (file, opened) = match self.files.next_file()? {
                Ok(entry) => entry,
                Err(e) => return Some(Err(e)),
            };
            match opened {
                Ok(s) => self.current = Some(s),
                Err(e) => {
                    if let Some(e) = self.ctx.on_error(self.ctx.element_error(&file, e)) {
                        return Some(Err(e));
                    }
                }
            }
        }
    }
}

/// The entries of a file list, each opened by `open` as it is reached; while an
/// object-store file is read, the next entry (when it is one too) is already open.
pub(crate) struct FileWalk<T> {
    files: BoxStream,
    /// The next entry of the file list, taken ahead (and opened, when an object-store
    /// file).
    ahead: Option<Result<(Element, Option<Result<T>>)>>,
    open: OpenEntry<T>,
}

/// Opens an entry of a file list.
type OpenEntry<T> = Box<dyn Fn(&Element) -> Result<T> + Send>;

impl<T> FileWalk<T> {
    /// The entries of `files`, opened by `open`.
    pub(crate) fn new(
        files: BoxStream,
        open: impl Fn(&Element) -> Result<T> + Send + 'static,
    ) -> Self {
        FileWalk {
            files,
            ahead: None,
            open: Box::new(open),
        }
    }

    /// The next entry and what opening it gave; `None` after the last; `Err` when the
    /// file list itself failed.
    pub(crate) fn next_file(&mut self) -> Option<Result<(Element, Result<T>)>> {
        let (file, opened) = match self
            .ahead
            .take()
            .or_else(|| self.files.next().map(|r| r.map(|f| (f, None))))?
        {
            Ok(entry) => entry,
            Err(e) => return Some(Err(e)),
        };
        let opened = opened.unwrap_or_else(|| (self.open)(&file));
        if is_remote(&file) {
            self.ahead = self.files.next().map(|r| {
                r.map(|next| {
                    let opened = is_remote(&next).then(|| (self.open)(&next));
                    (next, opened)
                })
            });
        }
        Some(Ok((file, opened)))
    }
}
