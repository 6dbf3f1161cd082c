//! What `sluice gen` and `sluice convert` share: the `tf.train.Example` of one labelled image,
//! TFRecord shards written round-robin and named as TensorFlow names them, the labels file.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;

use anyhow::{Context, Result, bail};
use sluice_proto::example::{BytesList, Feature, Features, Int64List, feature::Kind};
use sluice_proto::tfrecord::{Compression, TfRecordWriter};
use sluice_proto::{Example, TfMessage};
use sluice_storage::{Location, ObjectWriter};

/// The encoded image, as stored in the file (bytes).
pub(crate) const ENCODED: &str = "image/encoded";
/// The 0-based label: the class's line in `labels.txt` (int64).
pub(crate) const LABEL: &str = "image/class/label";
/// The class name (bytes).
pub(crate) const CLASS_TEXT: &str = "image/class/text";
/// The image's height in pixels (int64).
pub(crate) const HEIGHT: &str = "image/height";
/// The image's width in pixels (int64).
pub(crate) const WIDTH: &str = "image/width";
/// `jpeg` or `png` (bytes).
pub(crate) const FORMAT: &str = "image/format";
/// The image's path relative to the dataset folder, `/`-separated (bytes).
pub(crate) const FILENAME: &str = "image/filename";

/// The name of the labels file written beside the shards.
pub(crate) const LABELS_FILE: &str = "labels.txt";

/// The largest shard count whose index fits TensorFlow's 5-digit file names.
pub(crate) const MAX_SHARDS: u32 = 99_999;

/// One labelled image, ready to become an Example.
pub(crate) struct ImageRecord<'a> {
    /// The encoded image.
    pub(crate) encoded: Vec<u8>,
    /// `jpeg` or `png`.
    pub(crate) format: &'static str,
    pub(crate) height: u32,
    pub(crate) width: u32,
    pub(crate) label: usize,
    pub(crate) class: &'a str,
    /// Path relative to the dataset folder, `/`-separated.
    pub(crate) filename: String,
}

impl ImageRecord<'_> {
    /// The serialized `tf.train.Example`. The encoded image moves into it without a copy.
    pub(crate) fn into_example_bytes(self) -> Vec<u8> {
        let bytes = |value: Vec<u8>| Feature {
            kind: Some(Kind::BytesList(BytesList {
                value: vec![value.into()],
            })),
        };
        let int64 = |value: i64| Feature {
            kind: Some(Kind::Int64List(Int64List { value: vec![value] })),
        };
        let label = i64::try_from(self.label).expect("a label fits in i64");
        let feature = BTreeMap::from([
            (ENCODED.to_string(), bytes(self.encoded)),
            (LABEL.to_string(), int64(label)),
            (
                CLASS_TEXT.to_string(),
                bytes(self.class.as_bytes().to_vec()),
            ),
            (HEIGHT.to_string(), int64(self.height.into())),
            (WIDTH.to_string(), int64(self.width.into())),
            (FORMAT.to_string(), bytes(self.format.as_bytes().to_vec())),
            (FILENAME.to_string(), bytes(self.filename.into_bytes())),
        ]);
        Example {
            features: Some(Features { feature }),
        }
        .to_bytes()
    }
}

/// `{name}.tfrecord-{index:05}-of-{count:05}`, as TensorFlow's sharded writers name files.
pub(crate) fn shard_file_name(name: &str, index: u32, count: u32) -> String {
    format!("{name}.tfrecord-{index:05}-of-{count:05}")
}

/// Checks `--name`: it becomes the start of file names in the output folder.
pub(crate) fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name.starts_with('.') || name.contains(['/', '\\']) {
        bail!(
            "--name {name:?}: must be a plain file name (not empty, no `/`, not starting with `.`)"
        );
    }
    Ok(())
}

/// TFRecord shards written round-robin: record `i` goes to shard `i % count`. Each shard
/// appears under its name only when [`Shards::finish`] commits it: shards dropped
/// unfinished (an error, `--strict`, a kill) leave nothing under their names.
pub(crate) struct Shards {
    dir: Location,
    name: String,
    writers: Vec<TfRecordWriter<ObjectWriter>>,
    next: usize,
}

impl Shards {
    /// Starts `count` shards in `dir` (a folder, created with its parents if needed, or an
    /// object-store prefix).
    pub(crate) fn create(dir: &Location, name: &str, count: u32) -> Result<Self> {
        check_name(name)?;
        let writers = (0..count)
            .map(|i| {
                let at = dir.join(&shard_file_name(name, i, count));
                let file = sluice_storage::create(&at, &Default::default())
                    .with_context(|| format!("cannot create {}", at.display()))?;
                Ok(TfRecordWriter::new(file, Compression::None)?)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Shards {
            dir: dir.clone(),
            name: name.to_string(),
            writers,
            next: 0,
        })
    }

    /// Appends a record to the next shard in turn.
    pub(crate) fn write(&mut self, record: &[u8]) -> Result<()> {
        self.writers[self.next].write_record(record)?;
        self.next = (self.next + 1) % self.writers.len();
        Ok(())
    }

    /// Finishes every shard and returns what was written.
    pub(crate) fn finish(self) -> Result<Written> {
        let count = u32::try_from(self.writers.len()).expect("shard count fits in u32");
        let mut written = Written {
            dir: self.dir,
            name: self.name,
            files: count,
            records: 0,
            bytes: 0,
        };
        for (i, writer) in (0..count).zip(self.writers) {
            written.records += writer.records();
            let at = written.dir.join(&shard_file_name(&written.name, i, count));
            written.bytes += writer
                .finish()?
                .commit()
                .with_context(|| format!("cannot write {}", at.display()))?;
        }
        Ok(written)
    }
}

/// What [`Shards`] wrote.
pub(crate) struct Written {
    dir: Location,
    name: String,
    pub(crate) files: u32,
    pub(crate) records: u64,
    pub(crate) bytes: u64,
}

impl fmt::Display for Written {
    /// `4 files, 1024 records, 13520384 bytes: out/train.tfrecord-*-of-00004 (labels in
    /// out/labels.txt)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pattern = format!("{}.tfrecord-*-of-{:05}", self.name, self.files);
        write!(
            f,
            "{} file{}, {} record{}, {} bytes: {} (labels in {})",
            self.files,
            plural(self.files.into()),
            self.records,
            plural(self.records),
            self.bytes,
            self.dir.join(&pattern).display(),
            self.dir.join(LABELS_FILE).display(),
        )
    }
}

/// Writes `labels.txt`: one class name per line, line `i` (0-based) is label `i`.
pub(crate) fn write_labels(dir: &Location, classes: &[String]) -> Result<()> {
    let at = dir.join(LABELS_FILE);
    let mut text = String::new();
    for class in classes {
        text.push_str(class);
        text.push('\n');
    }
    let write = || -> Result<()> {
        let mut file = sluice_storage::create(&at, &Default::default())?;
        file.write_all(text.as_bytes())?;
        file.commit()?;
        Ok(())
    };
    write().with_context(|| format!("cannot write {}", at.display()))
}

pub(crate) fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_names_have_five_digit_indices() {
        assert_eq!(
            shard_file_name("train", 0, 4),
            "train.tfrecord-00000-of-00004"
        );
        assert_eq!(
            shard_file_name("val", 12, 128),
            "val.tfrecord-00012-of-00128"
        );
    }

    #[test]
    fn names_that_are_not_plain_file_names_are_refused() {
        assert!(check_name("train").is_ok());
        for bad in ["", "a/b", ".hidden", "a\\b"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }
}
