//! `tfds`: TensorFlow Datasets data directories, read without TensorFlow.
//!
//! A prepared TFDS dataset lives in `DATA_DIR/NAME[/CONFIG]/VERSION/`: `dataset_info.json`
//! (splits, their shard lengths, the file format, the supervised keys), `features.json`
//! (the features spec) and the shard files, named by the split's `filepathTemplate`
//! (by default `NAME-SPLIT.FILEFORMAT-XXXXX-of-YYYYY`). [`TfdsSpec`] says what to read as
//! `tfds.load` does (`name`, `split`, `data_dir`, `as_supervised`, `shuffle_files`);
//! [`Dataset::tfds`] resolves it into TFRecord reads of the shards (each with the record
//! range the split's slicing selects), interleaved as TFDS interleaves them (16 files at
//! once, blocks of 16), `parse_example` with the spec `features.json` gives, and the
//! decoding TFDS does by default (images to `uint8 [H, W, C]`, class labels as `int64`,
//! tensors in their dtype and shape). PNG images decode to TensorFlow's pixels exactly; JPEG
//! ones to zune-jpeg's (within a few levels of TensorFlow's, see `sluice_image::decode`).
//!
//! File formats: `tfrecord` only. `array_record`, `riegeli` and `parquet` shards are
//! refused with an error naming the format.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use crate::dataset::Dataset;
use crate::element::{Element, ElementId, Value};
use crate::error::{Error, Result};
use crate::sources::tfrecord::{TfRecordFile, TfRecordSpec};
use crate::stages::image_ops::{ImageOp, ImageOpsSpec};
use crate::stages::interleave::InterleaveSpec;
use crate::stages::parse_example::{FeatureSpec, FeatureType, ParseExampleSpec};
use crate::stages::shuffle::ShuffleSpec;
use crate::tensor::{Tensor, TensorData};

/// What to load, with `tfds.load`'s parameter names and meaning.
///
/// ```toml
/// [source]
/// format = "tfds"
/// name = "mnist:3.*.*"          # NAME[/CONFIG][:VERSION], VERSION may use `*`
/// split = "train[:10%]+test"    # TFDS's split syntax
/// data_dir = "~/tensorflow_datasets"
/// as_supervised = true
/// shuffle_files = false
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TfdsSpec {
    /// `NAME`, `NAME:VERSION`, `NAME/CONFIG` or `NAME/CONFIG:VERSION`. A version may be a
    /// pattern (`3.*.*`): the newest prepared version matching it is read; without a
    /// version, the newest prepared one.
    pub name: String,
    /// The split to read, in TFDS's syntax: `train`, `train[:10%]`, `train[10%:20%]`,
    /// `train[:500]`, `test[-10:]`, `train[1shard:3shard]`, `train+test`, `all`.
    /// Default `train`.
    #[serde(default = "train")]
    pub split: String,
    /// Where prepared datasets are: default `$TFDS_DATA_DIR`, else
    /// `~/tensorflow_datasets`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<PathBuf>,
    /// Keep only the dataset's two `supervised_keys` features (under their own names,
    /// e.g. `image` and `label`). Default false: every feature, nested names flattened
    /// with `/` (`meta/id`).
    #[serde(default)]
    pub as_supervised: bool,
    /// Shuffle the order the shards are read in, each epoch (seeded by the pipeline's
    /// seed), as `tfds.load(shuffle_files=True)`. Default false.
    #[serde(default)]
    pub shuffle_files: bool,
    /// Decode images to `uint8 [H, W, C]` (default true); false keeps the encoded bytes
    /// (TFDS's `decoders={'image': tfds.decode.SkipDecoding()}`).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub decode_images: bool,
}

fn train() -> String {
    "train".to_string()
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

/// TFDS's interleave defaults (`ReadConfig`): 16 files at once, blocks of 16.
const CYCLE_LENGTH: usize = 16;
const BLOCK_LENGTH: usize = 16;

impl TfdsSpec {
    /// Reads `name`'s `split` from the default data dir.
    pub fn new(name: impl Into<String>, split: impl Into<String>) -> Self {
        TfdsSpec {
            name: name.into(),
            split: split.into(),
            data_dir: None,
            as_supervised: false,
            shuffle_files: false,
            decode_images: true,
        }
    }

    /// This spec reading from `data_dir`.
    pub fn data_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.data_dir = Some(dir.into());
        self
    }

    /// This spec with `as_supervised`.
    pub fn as_supervised(mut self, yes: bool) -> Self {
        self.as_supervised = yes;
        self
    }

    /// This spec with `shuffle_files`.
    pub fn shuffle_files(mut self, yes: bool) -> Self {
        self.shuffle_files = yes;
        self
    }

    /// The data dir read: `data_dir`, else `$TFDS_DATA_DIR`, else `~/tensorflow_datasets`.
    pub fn resolved_data_dir(&self) -> PathBuf {
        default_data_dir(self.data_dir.as_deref())
    }

    /// The prepared dataset `name` names (version resolved).
    pub fn info(&self) -> Result<TfdsInfo> {
        TfdsInfo::find(&self.resolved_data_dir(), &self.name)
    }

    /// The shards and record ranges `split` selects, in reading order (before the
    /// interleave).
    pub fn file_instructions(&self) -> Result<(TfdsInfo, Vec<FileInstruction>)> {
        let info = self.info()?;
        let instructions = info.file_instructions(&self.split)?;
        Ok((info, instructions))
    }
}

/// `data_dir`, else `$TFDS_DATA_DIR`, else `~/tensorflow_datasets`.
pub fn default_data_dir(data_dir: Option<&Path>) -> PathBuf {
    if let Some(d) = data_dir {
        return expand_home(d);
    }
    if let Some(d) = std::env::var_os("TFDS_DATA_DIR").filter(|d| !d.is_empty()) {
        return expand_home(Path::new(&d));
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    home.join("tensorflow_datasets")
}

fn expand_home(p: &Path) -> PathBuf {
    match p.strip_prefix("~") {
        Ok(rest) => std::env::var_os("HOME")
            .map_or_else(|| p.to_path_buf(), |h| PathBuf::from(h).join(rest)),
        Err(_) => p.to_path_buf(),
    }
}

/// One split of a prepared dataset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SplitInfo {
    /// Its name (`train`).
    pub name: String,
    /// The number of examples in each shard, in shard order.
    pub shard_lengths: Vec<u64>,
    /// Its size in bytes, as recorded.
    pub num_bytes: u64,
    /// The shard file name template (`{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}`).
    pub filepath_template: String,
}

impl SplitInfo {
    /// Its number of examples.
    pub fn num_examples(&self) -> u64 {
        self.shard_lengths.iter().sum()
    }
}

/// A leaf feature of `features.json`, with its flattened name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TfdsFeature {
    /// Its name, nested names joined with `/` (`meta/id`).
    pub name: String,
    /// What it is.
    pub kind: FeatureKind,
    /// The dtype TFDS returns (`uint8`, `int64`, `float32`, `string`, ...).
    pub dtype: String,
    /// Its shape, `None` for an unknown dimension (a `Sequence`'s length, an image's height
    /// and width).
    pub shape: Vec<Option<usize>>,
    /// A class label's names (from `NAME.labels.txt` or `features.json`), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub names: Option<Vec<String>>,
    /// A class label's number of classes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_classes: Option<u64>,
}

/// The kinds of leaf features read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FeatureKind {
    /// `Image`: encoded PNG/JPEG bytes, decoded to `uint8 [H, W, C]`.
    Image,
    /// `ClassLabel`: an `int64`.
    ClassLabel,
    /// `Text`: a byte string.
    Text,
    /// `Tensor` (and `Scalar`), or a `Sequence` of one.
    Tensor,
}

impl fmt::Display for FeatureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FeatureKind::Image => "Image",
            FeatureKind::ClassLabel => "ClassLabel",
            FeatureKind::Text => "Text",
            FeatureKind::Tensor => "Tensor",
        })
    }
}

/// A prepared dataset: what `dataset_info.json` and `features.json` of one version say.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TfdsInfo {
    /// The dataset's name.
    pub name: String,
    /// Its config, when it has configs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
    /// The version read.
    pub version: String,
    /// The version's directory.
    pub dir: PathBuf,
    /// The shards' file format (`tfrecord`).
    pub file_format: String,
    /// Its description.
    pub description: String,
    /// The splits, as recorded.
    pub splits: Vec<SplitInfo>,
    /// `(input, target)` features for `as_supervised`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub supervised_keys: Option<(String, String)>,
    /// The leaf features, in name order.
    pub features: Vec<TfdsFeature>,
}

/// One shard to read and the record range of it: `skip` records, then `take` (`None`:
/// to the end).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileInstruction {
    /// The shard file.
    pub path: PathBuf,
    /// Records skipped at its start.
    pub skip: u64,
    /// Records read after those (`None`: all the rest).
    pub take: Option<u64>,
    /// Its number of records.
    pub examples_in_shard: u64,
}

impl FileInstruction {
    /// The number of records it reads.
    pub fn len(&self) -> u64 {
        self.take
            .unwrap_or(self.examples_in_shard.saturating_sub(self.skip))
    }

    /// Whether it reads nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A prepared dataset found in a data dir: `NAME[/CONFIG]` and its versions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PreparedDataset {
    /// The name (with `/CONFIG` when it has one).
    pub name: String,
    /// Its prepared versions, oldest first.
    pub versions: Vec<String>,
}

/// The prepared datasets of `data_dir`: every `NAME/VERSION` and `NAME/CONFIG/VERSION`
/// with a `dataset_info.json`, sorted.
pub fn list_prepared(data_dir: &Path) -> Result<Vec<PreparedDataset>> {
    let mut out = Vec::new();
    for name in subdirs(data_dir)? {
        let dir = data_dir.join(&name);
        let versions = versions_in(&dir);
        if !versions.is_empty() {
            out.push(PreparedDataset {
                name: name.clone(),
                versions: versions.iter().map(|v| v.to_string()).collect(),
            });
        }
        for config in subdirs(&dir).unwrap_or_default() {
            let versions = versions_in(&dir.join(&config));
            if !versions.is_empty() {
                out.push(PreparedDataset {
                    name: format!("{name}/{config}"),
                    versions: versions.iter().map(|v| v.to_string()).collect(),
                });
            }
        }
    }
    Ok(out)
}

fn subdirs(dir: &Path) -> Result<Vec<String>> {
    let entries = std::fs::read_dir(dir).map_err(|error| Error::Io {
        path: dir.to_path_buf(),
        error,
    })?;
    let mut out: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| {
            !n.starts_with('.') && !n.starts_with("incomplete") && Version::parse(n).is_none()
        })
        .collect();
    out.sort();
    Ok(out)
}

/// The prepared versions in `dir` (subdirectories `X.Y.Z` with a `dataset_info.json`),
/// oldest first.
fn versions_in(dir: &Path) -> Vec<Version> {
    let mut out: Vec<Version> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter_map(|e| {
                    let v = Version::parse(e.file_name().to_str()?)?;
                    e.path().join("dataset_info.json").is_file().then_some(v)
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// A version `MAJOR.MINOR.PATCH`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Version([u64; 3]);

impl Version {
    fn parse(s: &str) -> Option<Version> {
        let parts: Vec<&str> = s.split('.').collect();
        let [a, b, c] = parts.as_slice() else {
            return None;
        };
        let n = |p: &str| {
            (!p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
                .then(|| p.parse().ok())
                .flatten()
        };
        Some(Version([n(a)?, n(b)?, n(c)?]))
    }

    /// Whether it matches `pattern` (`3.*.*`, `1.0.0`, `*.*.*`).
    fn matches(&self, pattern: &[Option<u64>; 3]) -> bool {
        self.0
            .iter()
            .zip(pattern)
            .all(|(v, p)| p.is_none_or(|p| p == *v))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.0[0], self.0[1], self.0[2])
    }
}

fn parse_version_pattern(s: &str) -> Option<[Option<u64>; 3]> {
    let parts: Vec<&str> = s.split('.').collect();
    let [a, b, c] = parts.as_slice() else {
        return None;
    };
    let p = |p: &str| -> Option<Option<u64>> {
        if p == "*" {
            Some(None)
        } else if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) {
            p.parse().ok().map(Some)
        } else {
            None
        }
    };
    Some([p(a)?, p(b)?, p(c)?])
}

fn invalid(message: impl Into<String>) -> Error {
    Error::invalid(message)
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_string()
    } else {
        items.join(", ")
    }
}

impl TfdsInfo {
    /// Finds `name` (`NAME[/CONFIG][:VERSION]`) in `data_dir` and reads its info.
    pub fn find(data_dir: &Path, name: &str) -> Result<TfdsInfo> {
        let (path, version) = match name.split_once(':') {
            Some((p, v)) => (p.trim(), Some(v.trim())),
            None => (name.trim(), None),
        };
        let (dataset, config) = match path.split_once('/') {
            Some((d, c)) => (d, Some(c)),
            None => (path, None),
        };
        if dataset.is_empty() {
            return Err(invalid(format!("tfds: no dataset name in {name:?}")));
        }
        let dataset_dir = data_dir.join(dataset);
        if !dataset_dir.is_dir() {
            let found = list_prepared(data_dir)
                .map(|l| l.into_iter().map(|d| d.name).collect::<Vec<_>>())
                .unwrap_or_default();
            return Err(invalid(format!(
                "tfds: dataset {dataset:?} is not prepared in {}: {} (found: {})",
                data_dir.display(),
                if data_dir.is_dir() {
                    "no such directory"
                } else {
                    "the data dir does not exist"
                },
                list(&found)
            )));
        }
        let (config, dir) = match config {
            Some(c) => {
                let dir = dataset_dir.join(c);
                if !dir.is_dir() {
                    return Err(invalid(format!(
                        "tfds: {dataset} has no prepared config {c:?} in {} (configs: {})",
                        dataset_dir.display(),
                        list(&subdirs(&dataset_dir)?)
                    )));
                }
                (Some(c.to_string()), dir)
            }
            None if !versions_in(&dataset_dir).is_empty() => (None, dataset_dir.clone()),
            None => {
                let configs = subdirs(&dataset_dir)?;
                match configs.as_slice() {
                    [one] => (Some(one.clone()), dataset_dir.join(one)),
                    _ => {
                        return Err(invalid(format!(
                            "tfds: {dataset} has {} configs; name one as {dataset}/CONFIG \
                             (configs: {})",
                            configs.len(),
                            list(&configs)
                        )));
                    }
                }
            }
        };
        let shown = match &config {
            Some(c) => format!("{dataset}/{c}"),
            None => dataset.to_string(),
        };
        let versions = versions_in(&dir);
        let prepared: Vec<String> = versions.iter().map(|v| v.to_string()).collect();
        let chosen = match version {
            None => versions.last().copied(),
            Some(v) => {
                let pattern = parse_version_pattern(v).ok_or_else(|| {
                    invalid(format!(
                        "tfds: bad version {v:?} in {name:?}: expected MAJOR.MINOR.PATCH, \
                         each a number or `*` (e.g. 3.*.*)"
                    ))
                })?;
                versions.iter().rev().find(|x| x.matches(&pattern)).copied()
            }
        };
        let Some(chosen) = chosen else {
            return Err(invalid(format!(
                "tfds: no prepared version of {shown} matches {:?} in {} (prepared versions: {})",
                version.unwrap_or("*.*.*"),
                dir.display(),
                list(&prepared)
            )));
        };
        let dir = dir.join(chosen.to_string());
        let mut info = TfdsInfo::read(&dir)?;
        info.config = config;
        Ok(info)
    }

    /// Reads the info of the version directory `dir`.
    pub fn read(dir: &Path) -> Result<TfdsInfo> {
        let info = read_json(&dir.join("dataset_info.json"))?;
        let info_path = dir.join("dataset_info.json");
        let bad = |what: String| Error::data(format!("tfds: {}: {what}", info_path.display()));
        let name = info
            .get("name")
            .and_then(Json::as_str)
            .ok_or_else(|| bad("no `name`".into()))?
            .to_string();
        let version = info
            .get("version")
            .and_then(Json::as_str)
            .unwrap_or_default()
            .to_string();
        let file_format = info
            .get("fileFormat")
            .and_then(Json::as_str)
            .unwrap_or("tfrecord")
            .to_string();
        let description = info
            .get("description")
            .and_then(Json::as_str)
            .unwrap_or_default()
            .to_string();
        let mut splits = Vec::new();
        for (i, s) in info
            .get("splits")
            .and_then(Json::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            let split_name = s
                .get("name")
                .and_then(Json::as_str)
                .ok_or_else(|| bad(format!("splits[{i}] has no `name`")))?
                .to_string();
            let shard_lengths = s
                .get("shardLengths")
                .and_then(Json::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default()
                .iter()
                .enumerate()
                .map(|(j, n)| {
                    json_u64(n).ok_or_else(|| {
                        bad(format!(
                            "splits[{i}] ({split_name}): shardLengths[{j}] is not a count: {n}"
                        ))
                    })
                })
                .collect::<Result<Vec<u64>>>()?;
            splits.push(SplitInfo {
                name: split_name,
                shard_lengths,
                num_bytes: s.get("numBytes").and_then(json_u64).unwrap_or(0),
                filepath_template: s
                    .get("filepathTemplate")
                    .and_then(Json::as_str)
                    .unwrap_or("{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}")
                    .to_string(),
            });
        }
        let supervised_keys = info.get("supervisedKeys").and_then(supervised_keys);
        let features_path = dir.join("features.json");
        let features = if features_path.is_file() {
            let json = read_json(&features_path)?;
            let mut out = Vec::new();
            flatten_features(&json, "", dir, &mut out)
                .map_err(|m| Error::data(format!("tfds: {}: {m}", features_path.display())))?;
            out.sort_by(|a, b| a.name.cmp(&b.name));
            out
        } else {
            return Err(Error::data(format!(
                "tfds: {} has no features.json (datasets prepared before TFDS 4.0 are not \
                 read)",
                dir.display()
            )));
        };
        Ok(TfdsInfo {
            name,
            config: None,
            version,
            dir: dir.to_path_buf(),
            file_format,
            description,
            splits,
            supervised_keys,
            features,
        })
    }

    /// The split named `name`, or an error listing the splits.
    pub fn split(&self, name: &str) -> Result<&SplitInfo> {
        self.splits.iter().find(|s| s.name == name).ok_or_else(|| {
            invalid(format!(
                "tfds: {} {} has no split {name:?} (splits: {})",
                self.name,
                self.version,
                list(
                    &self
                        .splits
                        .iter()
                        .map(|s| s.name.clone())
                        .collect::<Vec<_>>()
                )
            ))
        })
    }

    /// The shard files of `split`, in order.
    pub fn shard_paths(&self, split: &SplitInfo) -> Vec<PathBuf> {
        let n = split.shard_lengths.len();
        (0..n)
            .map(|i| {
                let index = format!("{i:05}");
                let count = format!("{n:05}");
                let file = split
                    .filepath_template
                    .replace("{DATASET}", &self.name)
                    .replace("{SPLIT}", &split.name)
                    .replace("{FILEFORMAT}", &self.file_format)
                    .replace("{SHARD_X_OF_Y}", &format!("{index}-of-{count}"))
                    .replace("{SHARD_INDEX}", &index)
                    .replace("{NUM_SHARDS}", &count);
                self.dir.join(file)
            })
            .collect()
    }

    /// The shards and record ranges `split` (TFDS's syntax) selects, in order. Shards
    /// named are checked to exist.
    pub fn file_instructions(&self, split: &str) -> Result<Vec<FileInstruction>> {
        let mut out = Vec::new();
        for (name, from, to) in self.absolute_instructions(split)? {
            let info = self.split(&name)?;
            let paths = self.shard_paths(info);
            let mut start = 0u64;
            for (path, &length) in paths.iter().zip(&info.shard_lengths) {
                if length == 0 {
                    continue;
                }
                let end = start + length;
                if from < end && to > start {
                    let skip = from.saturating_sub(start);
                    let take = (to < end).then(|| to - start - skip);
                    if take != Some(0) {
                        if !path.is_file() {
                            let present: Vec<String> = std::fs::read_dir(&self.dir)
                                .map(|d| {
                                    let mut v: Vec<String> = d
                                        .filter_map(|e| e.ok())
                                        .filter_map(|e| e.file_name().into_string().ok())
                                        .filter(|n| n.contains(&format!("-{name}.")))
                                        .collect();
                                    v.sort();
                                    v
                                })
                                .unwrap_or_default();
                            return Err(invalid(format!(
                                "tfds: shard {} of split {name:?} is missing (the split's \
                                 files present: {})",
                                path.display(),
                                list(&present)
                            )));
                        }
                        out.push(FileInstruction {
                            path: path.clone(),
                            skip,
                            take,
                            examples_in_shard: length,
                        });
                    }
                }
                start = end;
            }
        }
        Ok(out)
    }

    /// `split` as `(split name, from, to)` record ranges, with TFDS's rounding.
    pub fn absolute_instructions(&self, split: &str) -> Result<Vec<(String, u64, u64)>> {
        let mut out = Vec::new();
        for part in split_parts(split)? {
            let part = part?;
            if part.name == "all" {
                if part.from.is_some() || part.to.is_some() {
                    return Err(invalid(format!(
                        "tfds: split {split:?}: `all` cannot be sliced"
                    )));
                }
                for s in &self.splits {
                    out.push((s.name.clone(), 0, s.num_examples()));
                }
                continue;
            }
            let info = self.split(&part.name)?;
            let n = info.num_examples() as i64;
            let bound = |b: Option<Bound>, default: i64| -> Result<i64> {
                Ok(match b {
                    None => default,
                    Some(Bound::Abs(v)) => v,
                    // Python's round(): half to even.
                    Some(Bound::Pct(p)) => (p * n as f64 / 100.0).round_ties_even() as i64,
                    Some(Bound::Shard(s)) => {
                        let lengths = &info.shard_lengths;
                        let s = if s < 0 { lengths.len() as i64 + s } else { s };
                        lengths
                            .iter()
                            .take(s.clamp(0, lengths.len() as i64) as usize)
                            .sum::<u64>() as i64
                    }
                })
            };
            let from = bound(part.from, 0)?;
            let to = bound(part.to, n)?;
            if from.abs() > n || to.abs() > n {
                return Err(invalid(format!(
                    "tfds: split {:?}: slice [{from}:{to}] is out of range: {} has {n} examples",
                    part.text, part.name
                )));
            }
            let from = if from < 0 { n + from } else { from };
            let to = if to < 0 { n + to } else { to };
            out.push((part.name, from as u64, to.max(from) as u64));
        }
        Ok(out)
    }
}

fn read_json(path: &Path) -> Result<Json> {
    let text = std::fs::read_to_string(path).map_err(|error| Error::Io {
        path: path.to_path_buf(),
        error,
    })?;
    serde_json::from_str(&text).map_err(|e| {
        Error::data(format!(
            "tfds: {} is not valid JSON: {e} (line {}, column {})",
            path.display(),
            e.line(),
            e.column()
        ))
    })
}

/// A JSON count: proto3 JSON writes 64-bit integers as strings.
fn json_u64(v: &Json) -> Option<u64> {
    match v {
        Json::String(s) => s.parse().ok(),
        Json::Number(n) => n.as_u64(),
        _ => None,
    }
}

fn json_i64(v: &Json) -> Option<i64> {
    match v {
        Json::String(s) => s.parse().ok(),
        Json::Number(n) => n.as_i64(),
        _ => None,
    }
}

/// `supervisedKeys`: `{"tuple": {"items": [{"featureKey": a}, {"featureKey": b}]}}`, or
/// the older `{"input": a, "output": b}`.
fn supervised_keys(v: &Json) -> Option<(String, String)> {
    if let (Some(a), Some(b)) = (
        v.get("input").and_then(Json::as_str),
        v.get("output").and_then(Json::as_str),
    ) {
        return Some((a.to_string(), b.to_string()));
    }
    let items = v.get("tuple")?.get("items")?.as_array()?;
    let key = |i: &Json| i.get("featureKey").and_then(Json::as_str).map(String::from);
    match items.as_slice() {
        [a, b] => Some((key(a)?, key(b)?)),
        _ => None,
    }
}

fn shape_of(v: Option<&Json>) -> Vec<Option<usize>> {
    v.and_then(|s| s.get("dimensions"))
        .and_then(Json::as_array)
        .map(|dims| {
            dims.iter()
                .map(|d| json_i64(d).and_then(|d| usize::try_from(d).ok()))
                .collect()
        })
        .unwrap_or_default()
}

/// The leaf features of a `features.json` node, under `prefix`.
fn flatten_features(
    node: &Json,
    prefix: &str,
    dir: &Path,
    out: &mut Vec<TfdsFeature>,
) -> std::result::Result<(), String> {
    let class = node
        .get("pythonClassName")
        .and_then(Json::as_str)
        .unwrap_or_default();
    let short = class.rsplit('.').next().unwrap_or(class);
    let name = prefix.trim_end_matches('/').to_string();
    if let Some(dict) = node.get("featuresDict") {
        let features = dict
            .get("features")
            .and_then(Json::as_object)
            .ok_or("a featuresDict without `features`")?;
        for (k, v) in features {
            flatten_features(v, &format!("{prefix}{k}/"), dir, out)?;
        }
        return Ok(());
    }
    if let Some(seq) = node.get("sequence") {
        let length = seq
            .get("length")
            .and_then(json_i64)
            .and_then(|l| usize::try_from(l).ok());
        let inner = seq.get("feature").ok_or("a sequence without `feature`")?;
        let mut inner_out = Vec::new();
        flatten_features(inner, prefix, dir, &mut inner_out)?;
        for mut f in inner_out {
            if f.kind == FeatureKind::Image {
                return Err(format!(
                    "feature {:?}: Sequence(Image) is not read yet (supported: Image, \
                     ClassLabel, Text, Tensor, Scalar, Sequence of those but Image, \
                     FeaturesDict)",
                    f.name
                ));
            }
            f.shape.insert(0, length);
            out.push(f);
        }
        return Ok(());
    }
    if let Some(image) = node.get("image") {
        let dtype = image.get("dtype").and_then(Json::as_str).unwrap_or("uint8");
        if dtype != "uint8" {
            return Err(format!(
                "feature {name:?}: images of dtype {dtype} are not read (uint8 only)"
            ));
        }
        out.push(TfdsFeature {
            name,
            kind: FeatureKind::Image,
            dtype: dtype.into(),
            shape: shape_of(image.get("shape")),
            names: None,
            num_classes: None,
        });
        return Ok(());
    }
    if let Some(label) = node.get("classLabel") {
        let num_classes = label.get("numClasses").and_then(json_u64);
        let names = std::fs::read_to_string(dir.join(format!("{name}.labels.txt")))
            .ok()
            .map(|t| t.lines().map(str::to_string).collect::<Vec<_>>());
        out.push(TfdsFeature {
            name,
            kind: FeatureKind::ClassLabel,
            dtype: "int64".into(),
            shape: vec![],
            names,
            num_classes,
        });
        return Ok(());
    }
    if node.get("text").is_some() {
        out.push(TfdsFeature {
            name,
            kind: FeatureKind::Text,
            dtype: "string".into(),
            shape: vec![],
            names: None,
            num_classes: None,
        });
        return Ok(());
    }
    if let Some(t) = node.get("tensor") {
        let dtype = t.get("dtype").and_then(Json::as_str).unwrap_or_default();
        let encoding = t.get("encoding").and_then(Json::as_str).unwrap_or("none");
        if encoding != "none" {
            return Err(format!(
                "feature {name:?}: Tensor encoding {encoding:?} is not read (only \"none\")"
            ));
        }
        if parse_type(dtype).is_none() {
            return Err(format!(
                "feature {name:?}: dtype {dtype:?} is not read (int64, int32, uint8, bool, \
                 float32, float64, string)"
            ));
        }
        out.push(TfdsFeature {
            name,
            kind: FeatureKind::Tensor,
            dtype: dtype.into(),
            shape: shape_of(t.get("shape")),
            names: None,
            num_classes: None,
        });
        return Ok(());
    }
    Err(format!(
        "feature {name:?}: {} is not read (supported: Image, ClassLabel, Text, Tensor, \
         Scalar, Sequence, FeaturesDict)",
        if short.is_empty() {
            "this feature"
        } else {
            short
        }
    ))
}

/// How a TFDS dtype is stored in a `tf.train.Example`.
fn parse_type(dtype: &str) -> Option<FeatureType> {
    Some(match dtype {
        "int64" | "int32" | "uint8" | "bool" | "int16" | "int8" | "uint16" | "uint32" => {
            FeatureType::Int64
        }
        "float32" | "float64" => FeatureType::Float,
        "string" => FeatureType::String,
        _ => return None,
    })
}

impl TfdsFeature {
    /// How it is parsed out of the `tf.train.Example`.
    fn parse_spec(&self) -> FeatureSpec {
        let dtype = match self.kind {
            FeatureKind::Image | FeatureKind::Text => FeatureType::String,
            FeatureKind::ClassLabel => FeatureType::Int64,
            FeatureKind::Tensor => parse_type(&self.dtype).unwrap_or(FeatureType::Int64),
        };
        if self.kind == FeatureKind::Image {
            return FeatureSpec::FixedLen {
                dtype,
                shape: vec![],
                default: None,
            };
        }
        match self.shape.iter().copied().collect::<Option<Vec<usize>>>() {
            Some(shape) => FeatureSpec::FixedLen {
                dtype,
                shape,
                default: None,
            },
            None => FeatureSpec::VarLen { dtype },
        }
    }

    /// The parsed value in TFDS's dtype and shape.
    fn finish(&self, t: Tensor) -> Result<Tensor> {
        if self.kind != FeatureKind::Tensor {
            return Ok(t);
        }
        let data = match (self.dtype.as_str(), t.data()) {
            ("int32" | "int16" | "int8", TensorData::I64(v)) => {
                TensorData::I32(v.iter().map(|&x| x as i32).collect::<Vec<_>>().into())
            }
            ("uint8" | "bool", TensorData::I64(v)) => {
                TensorData::U8(Bytes::from(v.iter().map(|&x| x as u8).collect::<Vec<_>>()))
            }
            ("float64", TensorData::F32(v)) => {
                TensorData::F64(v.iter().map(|&x| x as f64).collect::<Vec<_>>().into())
            }
            (_, d) => d.clone(),
        };
        // A first dimension unknown (a Sequence's length): the rest gives the shape.
        let shape: Vec<usize> = if self.shape.iter().all(Option::is_some) {
            t.shape().to_vec()
        } else {
            let rest: Option<Vec<usize>> = self.shape[1..].iter().copied().collect();
            let Some(rest) = rest else {
                return Err(Error::data_of(
                    &self.name,
                    format!(
                        "tfds: feature {:?} has more than one unknown dimension ({:?}), which \
                         is not read",
                        self.name, self.shape
                    ),
                ));
            };
            let inner: usize = rest.iter().product();
            let n = data.len();
            if inner == 0 || n % inner != 0 {
                return Err(Error::data_of(
                    &self.name,
                    format!(
                        "tfds: feature {:?}: {n} values do not fill rows of shape {rest:?}",
                        self.name
                    ),
                ));
            }
            std::iter::once(n / inner).chain(rest).collect()
        };
        Ok(Tensor::new(&shape, data)?)
    }
}

struct SplitPart {
    text: String,
    name: String,
    from: Option<Bound>,
    to: Option<Bound>,
}

#[derive(Debug, Clone, Copy)]
enum Bound {
    Abs(i64),
    Pct(f64),
    Shard(i64),
}

/// `train[:10%]+test` into its parts, each checked as TFDS checks them.
fn split_parts(spec: &str) -> Result<Vec<Result<SplitPart>>> {
    let bad = |part: &str, why: &str| {
        invalid(format!(
            "tfds: bad split {spec:?} at {part:?}: {why} (the syntax: NAME, NAME[FROM:TO] with \
             FROM and TO numbers of examples, N% or Nshard, negative from the end; parts \
             joined with `+`, e.g. train[:10%]+test[-10:])"
        ))
    };
    let parts: Vec<&str> = spec.split('+').map(str::trim).collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(bad(spec, "an empty part"));
    }
    Ok(parts
        .into_iter()
        .map(|part| {
            let (name, selector) = match part.split_once('[') {
                Some((n, rest)) => {
                    let sel = rest
                        .strip_suffix(']')
                        .ok_or_else(|| bad(part, "no closing `]`"))?;
                    (n.trim(), Some(sel))
                }
                None => (part, None),
            };
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
            {
                return Err(bad(part, "a split name is letters, digits, `_` and `-`"));
            }
            let (from, to) = match selector {
                None => (None, None),
                Some(sel) => {
                    let bounds: Vec<&str> = sel.split(':').collect();
                    let parse = |b: &str| -> Result<Option<(f64, &'static str)>> {
                        let b = b.trim();
                        if b.is_empty() {
                            return Ok(None);
                        }
                        let (num, unit) = if let Some(n) = b.strip_suffix('%') {
                            (n, "%")
                        } else if let Some(n) = b.strip_suffix("shard") {
                            (n, "shard")
                        } else {
                            (b, "abs")
                        };
                        let v: f64 = num
                            .replace('_', "")
                            .parse()
                            .map_err(|_| bad(part, &format!("{b:?} is not a boundary")))?;
                        Ok(Some((v, unit)))
                    };
                    match bounds.as_slice() {
                        [one] => {
                            let Some((v, "shard")) = parse(one)? else {
                                return Err(bad(
                                    part,
                                    "only shards can be selected alone (train[3shard]); use \
                                     a slice FROM:TO",
                                ));
                            };
                            (
                                Some(Bound::Shard(v as i64)),
                                Some(Bound::Shard(v as i64 + 1)),
                            )
                        }
                        [a, b] => {
                            let (a, b) = (parse(a)?, parse(b)?);
                            if a.is_none() && b.is_none() {
                                return Err(bad(part, "an empty slice"));
                            }
                            let unit = a.map(|x| x.1).or(b.map(|x| x.1)).unwrap_or("abs");
                            let mk = |x: Option<(f64, &str)>| -> Result<Option<Bound>> {
                                let Some((v, _)) = x else { return Ok(None) };
                                Ok(Some(match unit {
                                    "%" => {
                                        if v.abs() > 100.0 {
                                            return Err(bad(
                                                part,
                                                "percent boundaries are within [-100, 100]",
                                            ));
                                        }
                                        Bound::Pct(v)
                                    }
                                    "shard" => Bound::Shard(v as i64),
                                    _ => {
                                        if v.fract() != 0.0 {
                                            return Err(bad(
                                                part,
                                                "example boundaries are whole numbers",
                                            ));
                                        }
                                        Bound::Abs(v as i64)
                                    }
                                }))
                            };
                            (mk(a)?, mk(b)?)
                        }
                        _ => return Err(bad(part, "more than one `:`")),
                    }
                }
            };
            Ok(SplitPart {
                text: part.to_string(),
                name: name.to_string(),
                from,
                to,
            })
        })
        .collect())
}

/// The name of the instruction values the interleave opens.
const FILENAME: &str = "filename";
const SKIP: &str = "skip";
const TAKE: &str = "take";

impl Dataset {
    /// A prepared TFDS dataset, as `tfds.load(name, split=..., data_dir=...,
    /// as_supervised=..., shuffle_files=...)` reads it (see [`TfdsSpec`]): elements with
    /// the features flattened (`meta/id`), images decoded to `uint8 [H, W, C]`, labels
    /// `int64`, in TFDS's order. The version, split and shards are resolved now: an error
    /// names what is missing and what exists.
    ///
    /// ```no_run
    /// use sluice_core::prelude::*;
    ///
    /// # fn main() -> sluice_core::Result<()> {
    /// let spec = TfdsSpec::new("mnist:3.*.*", "train[:10%]").as_supervised(true);
    /// for element in Dataset::tfds(spec)?.batch(32).iter()? {
    ///     let element = element?;
    ///     let _images = element.tensor("image"); // uint8 [32, 28, 28, 1]
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn tfds(spec: TfdsSpec) -> Result<Dataset> {
        let (info, instructions) = spec.file_instructions()?;
        if info.file_format != "tfrecord" {
            return Err(invalid(format!(
                "tfds: {} {} is stored as {:?} shards; Sluice reads TFDS's tfrecord shards \
                 only (not array_record, riegeli or parquet)",
                info.name, info.version, info.file_format
            )));
        }
        let features: Vec<TfdsFeature> = if spec.as_supervised {
            let Some((x, y)) = &info.supervised_keys else {
                return Err(invalid(format!(
                    "tfds: as_supervised: {} {} has no supervised_keys",
                    info.name, info.version
                )));
            };
            [x, y]
                .into_iter()
                .map(|k| {
                    info.features
                        .iter()
                        .find(|f| &f.name == k)
                        .cloned()
                        .ok_or_else(|| {
                            invalid(format!(
                                "tfds: supervised key {k:?} is not a feature of {} (features: \
                                 {})",
                                info.name,
                                list(
                                    &info
                                        .features
                                        .iter()
                                        .map(|f| f.name.clone())
                                        .collect::<Vec<_>>()
                                )
                            ))
                        })
                })
                .collect::<Result<_>>()?
        } else {
            info.features.clone()
        };
        let n = instructions.len();
        let elements: Vec<Element> = instructions
            .iter()
            .enumerate()
            .map(|(i, fi)| {
                Element::new(ElementId::new(0, i as u64))
                    .with(
                        FILENAME,
                        Tensor::scalar_bytes(Bytes::from(fi.path.to_string_lossy().into_owned())),
                    )
                    .with(SKIP, Tensor::scalar_i64(fi.skip as i64))
                    .with(TAKE, Tensor::scalar_i64(fi.take.map_or(-1, |t| t as i64)))
            })
            .collect();
        let mut files = Dataset::from_elements(elements);
        if spec.shuffle_files && n > 1 {
            files = files.shuffle_with(ShuffleSpec::new(n));
        }
        let reader = TfRecordSpec::default();
        let records = files.interleave_with(
            InterleaveSpec::new(CYCLE_LENGTH).block_length(BLOCK_LENGTH),
            move |e: &Element| {
                let path = e
                    .tensor(FILENAME)
                    .and_then(Tensor::as_bytes_list)
                    .and_then(|b| b.first())
                    .map(|b| String::from_utf8_lossy(b).into_owned())
                    .ok_or_else(|| Error::internal("tfds: an instruction without its file"))?;
                let skip = e.tensor(SKIP).and_then(Tensor::as_i64).map_or(0, |v| v[0]);
                let take = e.tensor(TAKE).and_then(Tensor::as_i64).map_or(-1, |v| v[0]);
                let mut d = Dataset::from_stage(
                    TfRecordFile::new(path, e.id().index, reader.clone()),
                    vec![],
                );
                if skip > 0 {
                    d = d.skip(skip as u64);
                }
                if take >= 0 {
                    d = d.take(take as u64);
                }
                Ok(d)
            },
        );
        let parse =
            ParseExampleSpec::new(features.iter().map(|f| (f.name.clone(), f.parse_spec())));
        let mut d = records.parse_example(parse);
        if spec.decode_images {
            for f in features.iter().filter(|f| f.kind == FeatureKind::Image) {
                let channels = f.shape.get(2).copied().flatten();
                d = d.image_ops(ImageOpsSpec {
                    ops: vec![ImageOp::Decode { channels }],
                    input: f.name.clone(),
                    output: None,
                    // In parallel (in order), as TFDS decodes with AUTOTUNE.
                    num_parallel: crate::parallelism::NumParallel::Auto,
                    deterministic: true,
                });
            }
        }
        let finish: Arc<Vec<TfdsFeature>> = Arc::new(
            features
                .into_iter()
                .filter(|f| f.kind == FeatureKind::Tensor)
                .collect(),
        );
        if !finish.is_empty() {
            d = d.map(move |mut e| {
                for f in finish.iter() {
                    if let Some(Value::Dense(t)) = e.remove(&f.name) {
                        e.insert(&f.name, f.finish(t)?);
                    }
                }
                Ok(e)
            });
        }
        Ok(d)
    }
}

/// `true` when `features` name a leaf in this dataset.
impl TfdsInfo {
    /// The features, flattened, by name.
    pub fn feature_map(&self) -> BTreeMap<&str, &TfdsFeature> {
        self.features.iter().map(|f| (f.name.as_str(), f)).collect()
    }
}
