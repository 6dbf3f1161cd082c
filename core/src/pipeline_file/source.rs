//! `[source]`: the TFRecord files a pipeline reads.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sluice_proto::tfrecord::Compression;

use crate::parallelism::NumParallel;
use crate::sources::csv::CsvSpec;
use crate::sources::fixed_length::FixedLengthSpec;
use crate::sources::format::FileFormat;
use crate::sources::global_shuffle::GlobalShuffleSpec;
use crate::sources::image_folder::{ImageFolderSpec, Subset};
use crate::sources::numpy::NumpySpec;
use crate::sources::sql::SqlSpec;
use crate::sources::storage::StorageSpec;
use crate::sources::text_lines::TextLinesSpec;
use crate::sources::tfds::TfdsSpec;
use crate::sources::tfrecord::{TfRecordSpec, compression_str};
#[cfg(feature = "columnar")]
use crate::sources::{arrow_ipc::ArrowSpec, parquet::ParquetSpec};

use crate::invalid::{Invalid as Problem, Key as Seg};

use super::inputs::CombineSpec;

/// The `[source]` table: TFRecord files, by glob pattern or path.
///
/// ```toml
/// [source]
/// dir = "data"                      # optional; `sluice run --data DIR` replaces it
/// files = ["train.tfrecord-*"]      # or one string
/// compression = "auto"              # auto | none | gzip | zlib
/// mmap = true                       # read local files mapped, records not copied
/// shuffle_files = false             # reshuffle the file list each epoch (seeded)
/// global_shuffle = false            # every record once per epoch, in a seeded global order
/// index_dir = "/tmp/idx"            # global shuffle only: where record indexes are kept
/// num_parallel = "auto"             # global shuffle only: reader threads
///
/// [source.storage]                  # optional: for URLs (s3://, gs://, az://, http(s)://)
/// aws_endpoint = "http://127.0.0.1:9000"
/// block_size = "8MiB"
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceSpec {
    /// Glob patterns or plain paths (one string or a list). Relative ones are under
    /// [`dir`](SourceSpec::dir) when it is set, else under the current directory. Each
    /// pattern must match at least one file; matches are sorted per pattern.
    pub files: Vec<String>,
    /// The directory relative patterns are under (itself relative to the current directory
    /// when relative). Default: none (the current directory).
    pub dir: Option<PathBuf>,
    /// How the files are compressed: `auto` (default, detected per file), `none`, `gzip` or
    /// `zlib`.
    pub compression: Compression,
    /// Shuffle the file list each epoch, seeded by the pipeline's seed and the epoch (as
    /// `list_files(shuffle=True)`). Default false: sorted order.
    pub shuffle_files: bool,
    /// Largest record accepted, in bytes. Default 1 GiB.
    pub max_record_len: Option<u64>,
    /// Read-ahead buffer per open file, in bytes. Default 256 KiB.
    pub buffer_size: Option<usize>,
    /// Map local files into memory and read records where they lie instead of copying them
    /// into read buffers. Default true; see [`TfRecordSpec::mmap`].
    pub mmap: Option<bool>,
    /// Read every record of every file exactly once per epoch in a seeded global
    /// permutation, through record indexes
    /// ([`global_shuffle`](crate::Dataset::tfrecord_global_shuffle)), instead of file after file.
    /// The files must be uncompressed. Default false.
    pub global_shuffle: bool,
    /// With `global_shuffle`: keep record indexes in this directory only (relative to the
    /// current directory). Default: beside each file, or in the cache directory when the
    /// data's directory is not writable.
    pub index_dir: Option<PathBuf>,
    /// With `global_shuffle`: reader threads, a number or `"auto"` (default: the CPU
    /// budget, at most 4).
    pub num_parallel: Option<NumParallel>,
    /// `[source.storage]`: how URLs are reached and read (see [`StorageSpec`]). Default:
    /// the environment's credentials and endpoints, 8 MiB blocks, 4 in flight per file.
    pub storage: StorageSpec,
    /// `format`: what the files hold, TFRecord (the default: the keys above) or another
    /// format with its own keys beside `files` ([`SourceFormat`]).
    pub format: SourceFormat,
}

impl SourceSpec {
    /// A source reading the files matching `patterns`, with every other key at its default.
    pub fn new<S: Into<String>>(patterns: impl IntoIterator<Item = S>) -> Self {
        SourceSpec {
            files: patterns.into_iter().map(Into::into).collect(),
            dir: None,
            compression: Compression::Auto,
            shuffle_files: false,
            max_record_len: None,
            buffer_size: None,
            mmap: None,
            global_shuffle: false,
            index_dir: None,
            num_parallel: None,
            storage: StorageSpec::default(),
            format: SourceFormat::TfRecord,
        }
    }

    /// A source reading the files matching `patterns` in `format`.
    pub fn of_format<S: Into<String>>(
        patterns: impl IntoIterator<Item = S>,
        format: SourceFormat,
    ) -> Self {
        let mut spec = SourceSpec::new(patterns);
        spec.storage = format.storage().cloned().unwrap_or_default();
        spec.format = format;
        spec
    }

    /// The dataset of the source's records: its files read in its format, or a TFDS
    /// dataset, the images an image folder indexes to, a SQL query's rows.
    pub(crate) fn dataset(&self) -> crate::Result<crate::Dataset> {
        let files = || {
            crate::Dataset::files_with(crate::sources::files::FilesSpec {
                patterns: self.patterns(),
                shuffle: self.shuffle_files,
                storage: self.storage.clone(),
            })
        };
        Ok(match &self.format {
            SourceFormat::Tfds(spec) => crate::Dataset::tfds(self.tfds_spec(spec))?,
            SourceFormat::ImageFolder(directory, spec) => {
                crate::Dataset::image_folder(self.directory(directory), spec.clone())?
            }
            SourceFormat::Sql(spec) => {
                let mut spec = spec.clone();
                spec.path = spec.path.map(|p| self.directory(&p));
                spec.dataset()?
            }
            SourceFormat::Combine(c) => {
                return Err(crate::Error::internal(format!(
                    "a {:?} source is built from its inputs",
                    c.name()
                )));
            }
            _ => self.read(&files()?),
        })
    }

    /// The inputs it combines, for a `zip`, `concatenate`, `sample_from` or `choose_from`
    /// source.
    pub fn combine(&self) -> Option<&CombineSpec> {
        match &self.format {
            SourceFormat::Combine(c) => Some(c),
            _ => None,
        }
    }

    /// A TFDS source's spec as read: `shuffle_files` from the common key, a relative
    /// `data_dir` under [`dir`](SourceSpec::dir) (or `dir` itself when `data_dir` is not
    /// set but `dir` is).
    pub fn tfds_spec(&self, spec: &TfdsSpec) -> TfdsSpec {
        let mut spec = spec.clone();
        spec.shuffle_files = self.shuffle_files;
        spec.data_dir = match (&self.dir, spec.data_dir.take()) {
            (Some(dir), Some(d)) if d.is_relative() && !d.starts_with("~") => Some(dir.join(d)),
            (_, Some(d)) => Some(d),
            (dir, None) => dir.clone(),
        };
        spec
    }

    /// An `image_folder`'s directory or a SQLite `path`: under [`dir`](SourceSpec::dir)
    /// when relative.
    pub fn directory(&self, directory: &Path) -> PathBuf {
        match &self.dir {
            Some(dir) if directory.is_relative() => dir.join(directory),
            _ => directory.to_path_buf(),
        }
    }

    /// The dataset of the records the source reads from the file list `files`.
    pub(crate) fn read(&self, files: &crate::Dataset) -> crate::Dataset {
        match &self.format {
            SourceFormat::TfRecord => match self.global_shuffle_spec() {
                Some(spec) => files.read_tfrecord_global_shuffle(self.reader(), spec),
                None => files.read_tfrecord(self.reader()),
            },
            SourceFormat::Csv(spec) => files.read_files(spec.clone()),
            SourceFormat::TextLines(spec) => files.read_files(spec.clone()),
            SourceFormat::FixedLength(spec) => files.read_files(spec.clone()),
            SourceFormat::Tfds(_) => unreachable!("a tfds source reads no file list"),
            SourceFormat::Numpy(spec) => files.read_files(spec.clone()),
            #[cfg(feature = "columnar")]
            SourceFormat::Parquet(spec) => files.read_files(spec.clone()),
            #[cfg(feature = "columnar")]
            SourceFormat::Arrow(spec) => files.read_files(spec.clone()),
            SourceFormat::ImageFolder(..) | SourceFormat::Sql(_) | SourceFormat::Combine(_) => {
                unreachable!("image folders, SQL and combining sources read no file list")
            }
        }
    }

    /// The patterns as they are matched: relative ones joined to [`dir`](SourceSpec::dir)
    /// (whose own glob characters are escaped, so only the pattern part is a glob).
    pub fn patterns(&self) -> Vec<String> {
        self.files
            .iter()
            .map(|f| match &self.dir {
                Some(dir) if !Path::new(f).is_absolute() => {
                    let dir = glob::Pattern::escape(&dir.to_string_lossy());
                    Path::new(&dir).join(f).to_string_lossy().into_owned()
                }
                _ => f.clone(),
            })
            .collect()
    }

    /// How each file is read.
    pub fn reader(&self) -> TfRecordSpec {
        let d = TfRecordSpec::default();
        TfRecordSpec {
            compression: self.compression,
            max_record_len: self.max_record_len.unwrap_or(d.max_record_len),
            buffer_size: self.buffer_size.unwrap_or(d.buffer_size),
            mmap: self.mmap.unwrap_or(d.mmap),
            storage: self.storage.clone(),
        }
    }

    /// The global shuffle to read with, when `global_shuffle` is set.
    pub fn global_shuffle_spec(&self) -> Option<GlobalShuffleSpec> {
        self.global_shuffle.then(|| GlobalShuffleSpec {
            index_dir: self.index_dir.clone(),
            num_parallel: self.num_parallel.unwrap_or(NumParallel::Auto),
            ..GlobalShuffleSpec::default()
        })
    }

    pub(super) fn check(&self) -> Result<(), Problem> {
        let at = |key: &str| vec![Seg::name("source"), Seg::name(key)];
        let invalid = |e: crate::invalid::Invalid| e.under(&[Seg::name("source")]);
        match &self.format {
            SourceFormat::TfRecord => {}
            SourceFormat::Csv(spec) => spec.validate().map_err(invalid)?,
            SourceFormat::TextLines(spec) => spec.validate().map_err(invalid)?,
            SourceFormat::FixedLength(spec) => spec.validate().map_err(invalid)?,
            SourceFormat::Tfds(spec) => {
                if !self.files.is_empty() {
                    return Err(Problem::new(
                        at("files"),
                        "a tfds source names its data with `name`, `split` and `data_dir`; \
                         `files` does not apply",
                    ));
                }
                if spec.name.trim().is_empty() {
                    return Err(Problem::new(at("name"), "`name` names the TFDS dataset"));
                }
                return Ok(());
            }
            SourceFormat::Numpy(spec) => spec.validate().map_err(invalid)?,
            #[cfg(feature = "columnar")]
            SourceFormat::Parquet(spec) => spec.validate().map_err(invalid)?,
            #[cfg(feature = "columnar")]
            SourceFormat::Arrow(spec) => spec.validate().map_err(invalid)?,
            SourceFormat::ImageFolder(directory, spec) => {
                spec.check().map_err(invalid)?;
                if directory.as_os_str().is_empty() {
                    return Err(Problem::new(
                        at("directory"),
                        "format \"image_folder\" needs `directory`: the folder of class folders",
                    ));
                }
                if !self.files.is_empty() {
                    return Err(Problem::new(
                        at("files"),
                        "format \"image_folder\" reads `directory` (its class folders), not \
                         `files`",
                    ));
                }
                if self.shuffle_files {
                    return Err(Problem::new(
                        at("shuffle_files"),
                        "format \"image_folder\" orders its files by `shuffle` and `seed`",
                    ));
                }
                if spec.subset == Some(Subset::Both) {
                    return Err(Problem::new(
                        at("subset"),
                        "a source is one dataset: subset = \"training\" or \"validation\" \
                         (\"both\" only from Rust or Python)",
                    ));
                }
                return Ok(());
            }
            SourceFormat::Combine(spec) => {
                if !self.files.is_empty() || self.shuffle_files {
                    return Err(Problem::new(
                        at(if self.files.is_empty() {
                            "shuffle_files"
                        } else {
                            "files"
                        }),
                        format!(
                            "format {:?} reads the pipelines named in `inputs`, not `files`",
                            spec.name()
                        ),
                    ));
                }
                return spec.check(&[Seg::name("source")]);
            }
            SourceFormat::Sql(spec) => {
                spec.check().map_err(invalid)?;
                if !self.files.is_empty() || self.shuffle_files {
                    return Err(Problem::new(
                        at(if self.files.is_empty() {
                            "shuffle_files"
                        } else {
                            "files"
                        }),
                        "format \"sql\" reads `query` from `path` or `url`, not `files`",
                    ));
                }
                return Ok(());
            }
        }
        if self.files.is_empty() {
            return Err(Problem::new(
                at("files"),
                "`files` needs at least one pattern or path",
            ));
        }
        if let Some(i) = self.files.iter().position(|f| f.trim().is_empty()) {
            let mut path = at("files");
            path.push(Seg::Index(i));
            return Err(Problem::new(path, "an empty file pattern matches nothing"));
        }
        if self.max_record_len == Some(0) {
            return Err(Problem::new(
                at("max_record_len"),
                "`max_record_len` must be at least 1",
            ));
        }
        if self.buffer_size == Some(0) {
            return Err(Problem::new(
                at("buffer_size"),
                "`buffer_size` must be at least 1",
            ));
        }
        self.storage
            .check(&[Seg::name("source"), Seg::name("storage")])?;
        if !self.global_shuffle {
            for (key, set) in [
                ("index_dir", self.index_dir.is_some()),
                ("num_parallel", self.num_parallel.is_some()),
            ] {
                if set {
                    return Err(Problem::new(
                        at(key),
                        format!("`{key}` applies only with `global_shuffle = true`"),
                    ));
                }
            }
            return Ok(());
        }
        if self.num_parallel == Some(NumParallel::Fixed(0)) {
            return Err(Problem::new(
                at("num_parallel"),
                "`num_parallel` must be at least 1 or \"auto\" (the default)",
            ));
        }
        if self
            .index_dir
            .as_ref()
            .is_some_and(|d| d.as_os_str().is_empty())
        {
            return Err(Problem::new(
                at("index_dir"),
                "`index_dir` must name a directory",
            ));
        }
        if matches!(self.compression, Compression::Gzip | Compression::Zlib) {
            return Err(Problem::new(
                at("compression"),
                format!(
                    "global shuffle reads records at their offsets, which a {} stream cannot \
                     do: use uncompressed files (or interleave and shuffle)",
                    self.compression
                ),
            ));
        }
        Ok(())
    }
}

/// What a source's files hold: `format = "..."` in `[source]`, with the format's keys
/// beside `files` (TensorFlow's parameter names). TFRecord is the default.
///
/// ```toml
/// [source]
/// files = ["train-*.csv"]
/// format = "csv"
/// header = true
/// record_defaults = [0, 0.0, ""]
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SourceFormat {
    /// `tfrecord`: the keys of [`SourceSpec`].
    #[default]
    TfRecord,
    /// `csv`: [`CsvSpec`].
    Csv(CsvSpec),
    /// `text_lines`: [`TextLinesSpec`].
    TextLines(TextLinesSpec),
    /// `fixed_length`: [`FixedLengthSpec`].
    FixedLength(FixedLengthSpec),
    /// `tfds`: a prepared TensorFlow Datasets dataset, [`TfdsSpec`] (`name`, `split`,
    /// `data_dir`, `as_supervised`; `shuffle_files` is the common key). It has no `files`.
    Tfds(TfdsSpec),
    /// `numpy`: [`NumpySpec`].
    Numpy(NumpySpec),
    /// `parquet`: [`ParquetSpec`] (feature `columnar`).
    #[cfg(feature = "columnar")]
    Parquet(ParquetSpec),
    /// `arrow`: [`ArrowSpec`], Arrow IPC files and streams (feature `columnar`).
    #[cfg(feature = "columnar")]
    Arrow(ArrowSpec),
    /// `image_folder`: the folder of class folders (`directory`, in place of `files`) and
    /// [`ImageFolderSpec`].
    ImageFolder(PathBuf, ImageFolderSpec),
    /// `sql`: [`SqlSpec`] (`path` or `url` and `query`, in place of `files`).
    Sql(SqlSpec),
    /// `zip`, `concatenate`, `sample_from`, `choose_from`: the elements of the pipeline's
    /// named `[inputs.NAME]`, combined ([`CombineSpec`]); no `files`.
    Combine(CombineSpec),
}

impl SourceFormat {
    /// The formats' names, as `format` takes them.
    pub const NAMES: &[&str] = &[
        "tfrecord",
        "csv",
        "text_lines",
        "fixed_length",
        "tfds",
        "numpy",
        "parquet",
        "arrow",
        "image_folder",
        "sql",
        "zip",
        "concatenate",
        "sample_from",
        "choose_from",
    ];

    /// Its name.
    pub fn name(&self) -> &'static str {
        match self {
            SourceFormat::TfRecord => "tfrecord",
            SourceFormat::Csv(_) => "csv",
            SourceFormat::TextLines(_) => "text_lines",
            SourceFormat::FixedLength(_) => "fixed_length",
            SourceFormat::Tfds(_) => "tfds",
            SourceFormat::Numpy(_) => "numpy",
            #[cfg(feature = "columnar")]
            SourceFormat::Parquet(_) => "parquet",
            #[cfg(feature = "columnar")]
            SourceFormat::Arrow(_) => "arrow",
            SourceFormat::ImageFolder(..) => "image_folder",
            SourceFormat::Sql(_) => "sql",
            SourceFormat::Combine(c) => c.name(),
        }
    }

    fn storage(&self) -> Option<&StorageSpec> {
        match self {
            SourceFormat::TfRecord | SourceFormat::Tfds(_) => None,
            SourceFormat::Csv(s) => Some(&s.storage),
            SourceFormat::TextLines(s) => Some(&s.storage),
            SourceFormat::FixedLength(s) => Some(&s.storage),
            SourceFormat::Numpy(s) => Some(&s.storage),
            #[cfg(feature = "columnar")]
            SourceFormat::Parquet(s) => Some(&s.storage),
            #[cfg(feature = "columnar")]
            SourceFormat::Arrow(s) => Some(&s.storage),
            SourceFormat::ImageFolder(..) | SourceFormat::Sql(_) | SourceFormat::Combine(_) => None,
        }
    }
}

/// The keys every format has.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CommonKeys {
    #[serde(default, deserialize_with = "one_or_many")]
    files: Vec<String>,
    #[serde(default)]
    dir: Option<PathBuf>,
    #[serde(default)]
    shuffle_files: bool,
    #[serde(default)]
    format: Option<String>,
}

/// The keys of a TFRecord source.
#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TfRecordKeys {
    #[serde(default, with = "compression_str")]
    compression: Compression,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_record_len: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    buffer_size: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mmap: Option<bool>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    global_shuffle: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    index_dir: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    num_parallel: Option<NumParallel>,
    #[serde(default, skip_serializing_if = "StorageSpec::is_empty")]
    storage: StorageSpec,
}

/// The keys of [`CommonKeys`].
pub(crate) const COMMON_KEYS: [&str; 4] = ["files", "dir", "shuffle_files", "format"];

/// A format's own keys, deserialized.
pub(crate) enum FormatKeys {
    TfRecord(TfRecordKeys),
    Format(SourceFormat),
}

impl CommonKeys {
    /// The format named by `format` (default `tfrecord`), checked.
    pub(crate) fn format_name(&self) -> std::result::Result<&str, String> {
        let format = self.format.as_deref().unwrap_or("tfrecord");
        if SourceFormat::NAMES.contains(&format) {
            Ok(format)
        } else {
            Err(format!(
                "unknown format {format:?}: expected one of {}",
                SourceFormat::NAMES.join(", ")
            ))
        }
    }
}

impl FormatKeys {
    /// Deserializes the keys of `format` (a name [`CommonKeys::format_name`] accepted).
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        format: &str,
        d: D,
    ) -> std::result::Result<FormatKeys, D::Error> {
        Ok(match format {
            "csv" => FormatKeys::Format(SourceFormat::Csv(CsvSpec::deserialize(d)?)),
            "text_lines" => {
                FormatKeys::Format(SourceFormat::TextLines(TextLinesSpec::deserialize(d)?))
            }
            "fixed_length" => {
                FormatKeys::Format(SourceFormat::FixedLength(FixedLengthSpec::deserialize(d)?))
            }
            "tfds" => FormatKeys::Format(SourceFormat::Tfds(TfdsSpec::deserialize(d)?)),
            "numpy" => FormatKeys::Format(SourceFormat::Numpy(NumpySpec::deserialize(d)?)),
            "sql" => FormatKeys::Format(SourceFormat::Sql(SqlSpec::deserialize(d)?)),
            "image_folder" => {
                // `directory` beside the spec's keys (what it is read from, not how).
                use serde::de::Error as _;
                let mut keys = toml::Table::deserialize(d)?;
                let directory = match keys.remove("directory") {
                    Some(toml::Value::String(d)) => PathBuf::from(d),
                    Some(_) => return Err(D::Error::custom("`directory`: expected a path")),
                    None => PathBuf::new(),
                };
                let spec = toml::Value::Table(keys)
                    .try_into()
                    .map_err(|e: toml::de::Error| {
                        D::Error::custom(format!(
                            "{} (the keys of format \"image_folder\", with `directory` and `dir`)",
                            e.message()
                        ))
                    })?;
                FormatKeys::Format(SourceFormat::ImageFolder(directory, spec))
            }
            name if CombineSpec::NAMES.contains(&name) => {
                FormatKeys::Format(SourceFormat::Combine(CombineSpec::deserialize(name, d)?))
            }
            #[cfg(feature = "columnar")]
            "parquet" => FormatKeys::Format(SourceFormat::Parquet(ParquetSpec::deserialize(d)?)),
            #[cfg(feature = "columnar")]
            "arrow" => FormatKeys::Format(SourceFormat::Arrow(ArrowSpec::deserialize(d)?)),
            #[cfg(not(feature = "columnar"))]
            "parquet" | "arrow" => {
                return Err(<D::Error as serde::de::Error>::custom(format!(
                    "format {format:?} needs sluice-core's `columnar` feature, which this \
                     build leaves out"
                )));
            }
            _ => FormatKeys::TfRecord(TfRecordKeys::deserialize(d)?),
        })
    }

    /// An unknown key's message with the keys every format has among the expected ones.
    pub(crate) fn unknown_key_message(format: &str, message: &str) -> String {
        let message = message
            .replace(
                "expected one of ",
                "expected one of `files`, `dir`, `shuffle_files`, `format`, ",
            )
            .replace(
                "expected `",
                "expected `files`, `dir`, `shuffle_files`, `format`, `",
            );
        if format == "tfrecord" {
            message
        } else {
            format!("{message} (the keys of format {format:?})")
        }
    }
}

impl SourceSpec {
    /// The spec of these keys.
    pub(crate) fn assemble(common: CommonKeys, keys: FormatKeys) -> SourceSpec {
        let mut spec = SourceSpec::new(common.files);
        spec.dir = common.dir;
        spec.shuffle_files = common.shuffle_files;
        match keys {
            FormatKeys::TfRecord(k) => {
                spec.compression = k.compression;
                spec.max_record_len = k.max_record_len;
                spec.buffer_size = k.buffer_size;
                spec.mmap = k.mmap;
                spec.global_shuffle = k.global_shuffle;
                spec.index_dir = k.index_dir;
                spec.num_parallel = k.num_parallel;
                spec.storage = k.storage;
            }
            FormatKeys::Format(format) => {
                if let Some(storage) = format.storage() {
                    spec.storage = storage.clone();
                }
                spec.format = format;
            }
        }
        spec
    }
}

impl<'de> Deserialize<'de> for SourceSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        let table = toml::Table::deserialize(d)?;
        let (common, rest): (toml::Table, toml::Table) = table
            .into_iter()
            .partition(|(k, _)| COMMON_KEYS.contains(&k.as_str()));
        let common: CommonKeys = toml::Value::Table(common)
            .try_into()
            .map_err(|e: toml::de::Error| D::Error::custom(e.message()))?;
        let format = common.format_name().map_err(D::Error::custom)?.to_string();
        let keys = FormatKeys::deserialize(&format, toml::Value::Table(rest)).map_err(
            |e: toml::de::Error| {
                D::Error::custom(FormatKeys::unknown_key_message(&format, e.message()))
            },
        )?;
        Ok(SourceSpec::assemble(common, keys))
    }
}

impl Serialize for SourceSpec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error as _, SerializeMap};
        let keys = match &self.format {
            SourceFormat::TfRecord => toml::Value::try_from(TfRecordKeys {
                compression: self.compression,
                max_record_len: self.max_record_len,
                buffer_size: self.buffer_size,
                mmap: self.mmap,
                global_shuffle: self.global_shuffle,
                index_dir: self.index_dir.clone(),
                num_parallel: self.num_parallel,
                storage: self.storage.clone(),
            }),
            SourceFormat::Csv(spec) => toml::Value::try_from(spec),
            SourceFormat::TextLines(spec) => toml::Value::try_from(spec),
            SourceFormat::FixedLength(spec) => toml::Value::try_from(spec),
            SourceFormat::Tfds(spec) => {
                let mut spec = spec.clone();
                spec.shuffle_files = false;
                toml::Value::try_from(spec).map(|v| match v {
                    toml::Value::Table(mut t) => {
                        t.remove("shuffle_files");
                        toml::Value::Table(t)
                    }
                    v => v,
                })
            }
            SourceFormat::Numpy(spec) => toml::Value::try_from(spec),
            #[cfg(feature = "columnar")]
            SourceFormat::Parquet(spec) => toml::Value::try_from(spec),
            #[cfg(feature = "columnar")]
            SourceFormat::Arrow(spec) => toml::Value::try_from(spec),
            SourceFormat::ImageFolder(_, spec) => toml::Value::try_from(spec),
            SourceFormat::Sql(spec) => toml::Value::try_from(spec),
            SourceFormat::Combine(spec) => spec.keys(),
        }
        .map_err(S::Error::custom)?;
        let mut m = s.serialize_map(None)?;
        match &self.format {
            SourceFormat::ImageFolder(directory, _) => m.serialize_entry("directory", directory)?,
            // No files: `path` or `url` and `query`; a TFDS source names its data.
            SourceFormat::Sql(_) | SourceFormat::Combine(_) => {}
            SourceFormat::Tfds(_) if self.files.is_empty() => {}
            _ => m.serialize_entry("files", &self.files)?,
        }
        if let Some(dir) = &self.dir {
            m.serialize_entry("dir", dir)?;
        }
        if self.shuffle_files {
            m.serialize_entry("shuffle_files", &true)?;
        }
        if self.format != SourceFormat::TfRecord {
            m.serialize_entry("format", self.format.name())?;
        }
        if let toml::Value::Table(keys) = keys {
            for (k, v) in keys {
                m.serialize_entry(&k, &v)?;
            }
        }
        m.end()
    }
}

/// One string or a list of strings.
fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    struct Visitor;
    impl<'de> serde::de::Visitor<'de> for Visitor {
        type Value = Vec<String>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a file pattern or a list of file patterns")
        }

        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Vec<String>, E> {
            Ok(vec![v.to_string()])
        }

        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Vec<String>, A::Error> {
            let mut out = Vec::new();
            while let Some(s) = seq.next_element::<String>()? {
                out.push(s);
            }
            Ok(out)
        }
    }
    d.deserialize_any(Visitor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_patterns_go_under_dir_with_its_glob_characters_escaped() {
        let mut s = SourceSpec::new(["train-*", "/abs/x.tfrecord"]);
        assert_eq!(s.patterns(), ["train-*", "/abs/x.tfrecord"]);
        s.dir = Some(PathBuf::from("data[1]"));
        assert_eq!(s.patterns(), ["data[[]1[]]/train-*", "/abs/x.tfrecord"]);
    }

    #[test]
    fn reader_defaults_match_the_tfrecord_source() {
        let s = SourceSpec::new(["x"]);
        assert_eq!(s.reader(), TfRecordSpec::default());
    }
}
