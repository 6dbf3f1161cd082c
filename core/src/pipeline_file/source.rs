//! `[source]`: the TFRecord files a pipeline reads.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize};
use sluice_proto::tfrecord::Compression;

use crate::parallelism::NumParallel;
use crate::sources::global_shuffle::GlobalShuffleSpec;
use crate::sources::storage::StorageSpec;
use crate::sources::tfrecord::{TfRecordSpec, compression_str};

use crate::invalid::{Invalid as Problem, Key as Seg};

/// The `[source]` table: TFRecord files, by glob pattern or path.
///
/// ```toml
/// [source]
/// dir = "data"                      # optional; `sluice run --data DIR` replaces it
/// files = ["train.tfrecord-*"]      # or one string
/// compression = "auto"              # auto | none | gzip | zlib
/// shuffle_files = false             # reshuffle the file list each epoch (seeded)
/// global_shuffle = false            # every record once per epoch, in a seeded global order
/// index_dir = "/tmp/idx"            # global shuffle only: where record indexes are kept
/// num_parallel = "auto"             # global shuffle only: reader threads
///
/// [source.storage]                  # optional: for URLs (s3://, gs://, az://, http(s)://)
/// aws_endpoint = "http://127.0.0.1:9000"
/// block_size = "8MiB"
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceSpec {
    /// Glob patterns or plain paths (one string or a list). Relative ones are under
    /// [`dir`](SourceSpec::dir) when it is set, else under the current directory. Each
    /// pattern must match at least one file; matches are sorted per pattern.
    #[serde(deserialize_with = "one_or_many")]
    pub files: Vec<String>,
    /// The directory relative patterns are under (itself relative to the current directory
    /// when relative). Default: none (the current directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<PathBuf>,
    /// How the files are compressed: `auto` (default, detected per file), `none`, `gzip` or
    /// `zlib`.
    #[serde(default, with = "compression_str")]
    pub compression: Compression,
    /// Shuffle the file list each epoch, seeded by the pipeline's seed and the epoch (as
    /// `list_files(shuffle=True)`). Default false: sorted order.
    #[serde(default)]
    pub shuffle_files: bool,
    /// Largest record accepted, in bytes. Default 1 GiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_record_len: Option<u64>,
    /// Read-ahead buffer per open file, in bytes. Default 256 KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffer_size: Option<usize>,
    /// Read every record of every file exactly once per epoch in a seeded global
    /// permutation, through record indexes
    /// ([`global_shuffle`](crate::Dataset::tfrecord_global_shuffle)), instead of file after file.
    /// The files must be uncompressed. Default false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub global_shuffle: bool,
    /// With `global_shuffle`: keep record indexes in this directory only (relative to the
    /// current directory). Default: beside each file, or in the cache directory when the
    /// data's directory is not writable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_dir: Option<PathBuf>,
    /// With `global_shuffle`: reader threads, a number or `"auto"` (default: the CPU
    /// budget, at most 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_parallel: Option<NumParallel>,
    /// `[source.storage]`: how URLs are reached and read (see [`StorageSpec`]). Default:
    /// the environment's credentials and endpoints, 8 MiB blocks, 4 in flight per file.
    #[serde(default, skip_serializing_if = "StorageSpec::is_empty")]
    pub storage: StorageSpec,
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
            global_shuffle: false,
            index_dir: None,
            num_parallel: None,
            storage: StorageSpec::default(),
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
