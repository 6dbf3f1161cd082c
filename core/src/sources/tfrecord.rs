//! `tfrecord`: records of TFRecord files, read file after file.

use std::fs::File;
use std::io::Read;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sluice_proto::tfrecord::{Compression, CorruptionPolicy, ReaderOptions, TfRecordReader};

use crate::dataset::Dataset;
use crate::element::{Element, ElementId, Provenance};
use crate::error::{Error, Result};
use crate::invalid::Invalid;
use crate::options::ErrorPolicy;
use crate::params::Params;
use crate::run::{BuildContext, Input};
use crate::sources::files::filename_of;
use crate::sources::format::Sequential;
use crate::sources::storage::StorageSpec;
use crate::stage::{Arity, OpenFn, Stage};
use crate::stream::{BoxStream, ElementStream};

/// Reads TFRecord files (`tf.data.TFRecordDataset`): each record becomes an element with
/// one scalar byte string named `record`, id (file index, record index)
/// and provenance (file, offset). Its input is a file list; `interleave` reads several
/// files at once instead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TfRecordSpec {
    /// `auto` (default), `none`, `gzip` or `zlib`.
    #[serde(with = "compression_str")]
    pub compression: Compression,
    /// Largest record accepted, in bytes (default 1 GiB).
    pub max_record_len: u64,
    /// Read-ahead buffer per open file, in bytes (default 256 KiB); not used for a mapped file.
    pub buffer_size: usize,
    /// Map local files into memory and hand out records as slices of the mapping, instead of
    /// copying them into read buffers (default true; see [`sluice_storage::map_file`]).
    /// A compressed file is decompressed from its mapping; URLs are read as streams.
    #[serde(skip_serializing_if = "is_true")]
    pub mmap: bool,
    /// How URLs are reached and read (credentials, endpoint, block size, requests in
    /// flight); empty: the environment's and the defaults.
    #[serde(skip_serializing_if = "StorageSpec::is_empty")]
    pub storage: StorageSpec,
}

impl Default for TfRecordSpec {
    fn default() -> Self {
        let d = ReaderOptions::default();
        TfRecordSpec {
            compression: d.compression,
            max_record_len: d.max_record_len,
            buffer_size: d.buffer_size,
            mmap: true,
            storage: StorageSpec::default(),
        }
    }
}

/// `mmap`'s default, left out of the spec's parameters (and fingerprints) when it holds.
fn is_true(b: &bool) -> bool {
    *b
}

pub(crate) mod compression_str {
    use serde::{Deserialize, Deserializer, Serializer};
    use sluice_proto::tfrecord::Compression;

    pub(crate) fn serialize<S: Serializer>(c: &Compression, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(c.name())
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Compression, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl TfRecordSpec {
    /// The spec's parameters as `explain`, stats and fingerprints show them: `storage`
    /// without the values of store options (they may be secrets).
    pub(crate) fn redacted_params(&self) -> Params {
        let params = Params::of(self).without(&["storage"]);
        if self.storage.is_empty() {
            params
        } else {
            params.with("storage", self.storage.redacted())
        }
    }

    /// Whether the file at `path` is read uncompressed (so it can be entered part way):
    /// as configured, or, for `auto`, as its first bytes say.
    fn uncompressed(&self, path: &str) -> bool {
        match self.compression {
            Compression::Auto => {
                let head = if sluice_storage::is_url(path) {
                    sluice_storage::Location::parse(path)
                        .and_then(|l| {
                            sluice_storage::RemoteObject::open(&l, &self.storage.to_options())
                        })
                        .and_then(|o| o.read_range(0, o.size().min(12)))
                        .map(|b| b.to_vec())
                        .ok()
                } else {
                    let mut head = Vec::new();
                    File::open(path)
                        .and_then(|f| f.take(12).read_to_end(&mut head))
                        .ok()
                        .map(|_| head)
                };
                head.is_some_and(|h| Compression::Auto.resolve(&h) == Compression::None)
            }
            configured => configured == Compression::None,
        }
    }

    /// Opens one file as a stream of record elements. `file_index` becomes the source of the
    /// element ids.
    pub fn open_file(&self, path: &str, file_index: u64, ctx: &BuildContext) -> Result<BoxStream> {
        let skip = ctx.error_policy() == ErrorPolicy::Skip;
        let options = ReaderOptions {
            compression: self.compression,
            max_record_len: self.max_record_len,
            on_corruption: if skip {
                CorruptionPolicy::SkipBadData
            } else {
                CorruptionPolicy::Fail
            },
            buffer_size: self.buffer_size,
        };
        // An epoch resumed on another number of hosts may start part way into the file,
        // at a record before which this host's records are all done (uncompressed files).
        let resume = ctx.resume_seek(file_index);
        let local = !sluice_storage::is_url(path);
        let mapped = if local && self.mmap {
            // Under a `repeat`, the run keeps the mapping for the next pass.
            match &ctx.shared.kept_mappings {
                Some(kept) => kept.map(path),
                None => sluice_storage::map_file(std::path::Path::new(path)),
            }
            .map_err(|error| Error::Io {
                path: path.into(),
                error,
            })?
        } else {
            None
        };
        let reader = match mapped {
            Some(data) => TfRecordReader::over_file_from(data, path, options, resume),
            None => {
                let start = resume.filter(|_| self.uncompressed(path));
                let offset = start.map_or(0, |(_, offset)| offset);
                let input: Box<dyn Read + Send> = if local {
                    let mut file = File::open(path).map_err(|error| Error::Io {
                        path: path.into(),
                        error,
                    })?;
                    if offset > 0 {
                        use std::io::{Seek, SeekFrom};
                        file.seek(SeekFrom::Start(offset))
                            .map_err(|error| Error::Io {
                                path: path.into(),
                                error,
                            })?;
                    }
                    Box::new(file)
                } else {
                    let location = sluice_storage::Location::parse(path)?;
                    // The lookup and first requests go out now; errors come with the first
                    // read (and name the URL and offset).
                    sluice_storage::open_ahead_at(&location, &self.storage.to_options(), offset)?
                };
                match start {
                    Some((index, offset)) => {
                        TfRecordReader::new(input, path, options).starting_at(offset, index)
                    }
                    None => TfRecordReader::new(input, path, options),
                }
            }
        };
        Ok(Box::new(FileRecords {
            reader,
            file: Arc::from(path),
            file_index,
            skipped: 0,
            ctx: ctx.clone(),
            ended: false,
        }))
    }
}

struct FileRecords {
    reader: TfRecordReader<Box<dyn Read + Send>>,
    file: Arc<str>,
    file_index: u64,
    skipped: u64,
    ctx: BuildContext,
    /// The end was reported (elastic checkpoints: the file's lanes end there).
    ended: bool,
}

impl ElementStream for FileRecords {
    fn next(&mut self) -> Option<Result<Element>> {
        loop {
            let item = self.reader.read_record();
            let skipped = self.reader.skipped();
            if skipped > self.skipped {
                self.ctx.metrics().add_skipped(skipped - self.skipped);
                self.ctx.skipped_below_points(skipped - self.skipped);
                self.skipped = skipped;
            }
            return match item {
                Ok(Some(record)) => {
                    self.ctx.metrics().add_in(1);
                    Some(Ok(Element::record(
                        ElementId::new(self.file_index, record.index),
                        record.data,
                        Some(Provenance {
                            file: Arc::clone(&self.file),
                            offset: record.offset,
                        }),
                    )))
                }
                Ok(None) => {
                    if !self.ended {
                        self.ended = true;
                        self.ctx
                            .file_ended(self.file_index, self.reader.next_index());
                    }
                    None
                }
                Err(e) => {
                    // The reader has ended; under the skip policy the rest of the file is
                    // one skip, counted; otherwise the error travels. It names the record
                    // that could not be read: its id (the records returned and skipped
                    // before it) and where it starts.
                    let err = Error::Stage {
                        stage: self.ctx.stage_label(),
                        element: Some(ElementId::new(self.file_index, self.reader.next_index())),
                        provenance: Some(Provenance {
                            file: Arc::clone(&self.file),
                            offset: self.reader.stream_offset(),
                        }),
                        error: Box::new(Error::from(e)),
                    };
                    match self.ctx.on_error(err) {
                        Some(err) => Some(Err(err)),
                        None => continue,
                    }
                }
            };
        }
    }
}

impl Stage for TfRecordSpec {
    fn name(&self) -> &'static str {
        "tfrecord"
    }

    fn params(&self) -> Params {
        self.redacted_params()
    }

    fn validate(&self) -> std::result::Result<(), Invalid> {
        if self.max_record_len == 0 {
            return Err(Invalid::at(
                "max_record_len",
                "`max_record_len` must be at least 1",
            ));
        }
        if self.buffer_size == 0 {
            return Err(Invalid::at(
                "buffer_size",
                "`buffer_size` must be at least 1",
            ));
        }
        Ok(())
    }

    fn check_inputs(
        &self,
        inputs: &[Arc<crate::plan::PlanNode>],
    ) -> std::result::Result<(), String> {
        crate::plan::check_file_list_input("tfrecord", inputs)
    }

    fn file_reader(&self) -> Option<OpenFn> {
        let spec = self.clone();
        Some(Arc::new(move |file: &Element| {
            Ok(Dataset::from_stage(
                TfRecordFile {
                    path: filename_of(file)?,
                    file_index: file.id().source,
                    spec: spec.clone(),
                },
                vec![],
            ))
        }))
    }

    fn shards_by_input(&self) -> bool {
        true
    }

    fn build(&self, inputs: &[Input], ctx: &BuildContext) -> Result<BoxStream> {
        let input = crate::stages::single_input(inputs, "tfrecord")?;
        // `in` counts the records read, not the file names taken from the input.
        ctx.metrics().set_counts_own_inputs();
        let (spec, file_ctx) = (self.clone(), ctx.clone());
        Ok(Box::new(Sequential::new(
            input.open()?,
            move |file: &Element| {
                filename_of(file)
                    .and_then(|path| spec.open_file(&path, file.id().source, &file_ctx))
            },
            ctx,
        )))
    }
}

/// One TFRecord file as a source: its records, with ids `(file_index, record index)`. The
/// sub-dataset `interleave` reads for each file of a `tfrecord` source.
#[derive(Debug, Clone)]
pub(crate) struct TfRecordFile {
    path: String,
    file_index: u64,
    spec: TfRecordSpec,
}

impl TfRecordFile {
    /// The records of `path`, with ids `(file_index, record index)`.
    pub(crate) fn new(path: String, file_index: u64, spec: TfRecordSpec) -> Self {
        TfRecordFile {
            path,
            file_index,
            spec,
        }
    }
}

impl Stage for TfRecordFile {
    fn name(&self) -> &'static str {
        "tfrecord_file"
    }

    fn params(&self) -> Params {
        self.spec
            .redacted_params()
            .with("path", &self.path)
            .with("file_index", self.file_index)
    }

    fn arity(&self) -> Arity {
        Arity::None
    }

    fn build(&self, _inputs: &[Input], ctx: &BuildContext) -> Result<BoxStream> {
        self.spec.open_file(&self.path, self.file_index, ctx)
    }
}
