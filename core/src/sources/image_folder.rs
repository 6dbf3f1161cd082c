//! `image_folder`: the images of a directory of class folders, labelled by folder, as
//! `tf.keras.utils.image_dataset_from_directory` reads them.
//!
//! ```text
//! photos/
//!   cat/  a.jpg  b.png  sub/c.bmp
//!   dog/  d.gif  e.jpeg
//! ```
//!
//! Indexing follows Keras exactly ([`ImageFolderSpec::index`]): class folders sorted
//! alphanumerically (folders starting with `.` skipped) are labels `0..n-1`, or
//! `class_names` chooses and orders them; each class folder is walked recursively (folders
//! in sorted path order, files sorted by name; symlinked folders only with `follow_links`),
//! keeping files ending in `.bmp`, `.gif`, `.jpeg`, `.jpg` or `.png` (any case). With
//! `shuffle` (the default) the list is shuffled with NumPy's legacy `RandomState(seed)`
//! (Mersenne Twister) as Keras does, so the same seed gives Keras's file order; then
//! `validation_split` keeps the first part (`subset = "training"`) or the last
//! `int(validation_split * n)` files (`"validation"`). The file list is the dataset's
//! input: `shard`, `interleave`, checkpoints and elastic resume work as over any files.
//!
//! Each image is an element `{image, label}`:
//! - `image`: decoded with `color_mode`'s channels (`rgb` 3, `rgba` 4, `grayscale` 1) and
//!   resized to `image_size` (`[height, width]`, default `[256, 256]`) with
//!   `interpolation` as `tf.image.resize` does: `float32` for `bilinear` (the default) and
//!   `area`, the decoded dtype (`uint8`) for `nearest`, as Keras returns them. With
//!   `decode = false` it is the file's bytes instead (a scalar byte string), for an
//!   `image_ops` stage to decode and augment.
//! - `label` (unless `labels = "none"` or `label_mode = "none"`): `int32` scalar for
//!   `label_mode = "int"`, one-hot `float32 [num_classes]` for `"categorical"`, `float32 [1]`
//!   for `"binary"` (two classes only), as Keras.
//!
//! Differences from Keras: elements are not batched (add `batch`), and the file order is
//! the indexed order each epoch (Keras also passes the shuffled list through a
//! `shuffle(batch_size * 8)` buffer; add a `shuffle` stage for a per-epoch reshuffle);
//! `interpolation` is `bilinear`, `nearest` or `area` only; no `crop_to_aspect_ratio` /
//! `pad_to_aspect_ratio`; local directories only. A `seed` left out draws one at random
//! (as Keras): give one for a file order that is the same on every run (and a checkpoint
//! that can be resumed).

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sluice_image::ResizeMethod;

use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::invalid::Invalid;
use crate::params::Params;
use crate::sources::format::{FileFormat, OpenedFile, Opening, Record, RecordError, RecordReader};
use crate::tensor::{Tensor, TensorData};

/// The file extensions Keras reads (compared in lower case).
pub(crate) const ALLOWED_EXTENSIONS: [&str; 5] = [".bmp", ".gif", ".jpeg", ".jpg", ".png"];

/// How images get their labels (`labels`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Labels {
    /// From the class folders (`"inferred"`, the default).
    #[default]
    Inferred,
    /// No labels: every image file under the directory, at any depth (`"none"`).
    None,
    /// These labels, one per image file in sorted order (the whole directory walked).
    List(Vec<i64>),
}

/// How labels are encoded (`label_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LabelMode {
    /// `int32` scalars (the default).
    #[default]
    Int,
    /// One-hot `float32` vectors of the class count.
    Categorical,
    /// `float32 [1]`, 0 or 1 (exactly two classes).
    Binary,
    /// No label.
    None,
}

/// The channels images are decoded to (`color_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ColorMode {
    /// 3 channels (the default).
    #[default]
    Rgb,
    /// 4 channels (JPEG, BMP with 3 channels and GIF cannot, as in TensorFlow).
    Rgba,
    /// 1 channel (BMP and GIF cannot, as in TensorFlow).
    Grayscale,
}

impl ColorMode {
    fn channels(self) -> usize {
        match self {
            ColorMode::Rgb => 3,
            ColorMode::Rgba => 4,
            ColorMode::Grayscale => 1,
        }
    }
}

/// Which part of a `validation_split` (`subset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Subset {
    /// The first `n - int(validation_split * n)` files.
    Training,
    /// The last `int(validation_split * n)` files.
    Validation,
    /// Both, as two datasets ([`Dataset::image_folder_both`]; Python's
    /// `subset="both"`); a pipeline file's one source cannot.
    Both,
}

/// The resize method (`interpolation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Interpolation {
    /// Bilinear, half-pixel centres, no antialiasing (the default); `float32`.
    #[default]
    Bilinear,
    /// Nearest neighbour; keeps `uint8`.
    Nearest,
    /// Area averaging; `float32`.
    Area,
}

/// The images of a folder of class folders (`tf.keras.utils.image_dataset_from_directory`'s
/// parameters, same names and defaults; see the [module docs](self)).
///
/// ```toml
/// [source]
/// format = "image_folder"
/// directory = "photos"          # relative: under `dir` (or --data) when set
/// image_size = [224, 224]       # [height, width] (default [256, 256])
/// label_mode = "categorical"    # int (default) | categorical | binary | none
/// class_names = ["dog", "cat"]  # optional: which class folders, in label order
/// color_mode = "rgb"            # rgb (default) | rgba | grayscale
/// seed = 1337                   # the file order (shuffle = true, the default)
/// validation_split = 0.2
/// subset = "training"           # training | validation
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ImageFolderSpec {
    /// `"inferred"` (default), `"none"`, or a list of integer labels.
    #[serde(with = "labels_serde", skip_serializing_if = "is_inferred")]
    pub labels: Labels,
    /// `int` (default), `categorical`, `binary` or `none`.
    pub label_mode: LabelMode,
    /// The class folders to read, in label order (default: all, sorted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class_names: Option<Vec<String>>,
    /// `rgb` (default), `rgba` or `grayscale`.
    pub color_mode: ColorMode,
    /// `[height, width]` (or one number for both) images are resized to; default `[256, 256]`.
    #[serde(deserialize_with = "image_size_de")]
    pub image_size: [usize; 2],
    /// Shuffle the file list with `seed` (default true); false: sorted.
    pub shuffle: bool,
    /// The shuffle's seed (`0 ..= 2^32 - 1`); default: drawn at random.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// The fraction of files set apart for validation (`0 < v < 1`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validation_split: Option<f64>,
    /// `training` or `validation` (with `validation_split`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subset: Option<Subset>,
    /// `bilinear` (default), `nearest` or `area`.
    pub interpolation: Interpolation,
    /// Walk into symlinked folders (default false).
    pub follow_links: bool,
    /// Decode and resize (default true); false: `image` is the file's bytes.
    pub decode: bool,
}

impl Default for ImageFolderSpec {
    fn default() -> Self {
        ImageFolderSpec {
            labels: Labels::Inferred,
            label_mode: LabelMode::Int,
            class_names: None,
            color_mode: ColorMode::Rgb,
            image_size: [256, 256],
            shuffle: true,
            seed: None,
            validation_split: None,
            subset: None,
            interpolation: Interpolation::Bilinear,
            follow_links: false,
            decode: true,
        }
    }
}

// `validation_split` is never NaN (checked), so equality is an equivalence.
impl Eq for ImageFolderSpec {}

fn is_inferred(l: &Labels) -> bool {
    *l == Labels::Inferred
}

mod labels_serde {
    use super::*;

    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Word(String),
        List(Vec<i64>),
    }

    pub(super) fn serialize<S: Serializer>(
        l: &Labels,
        s: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        match l {
            Labels::Inferred => Raw::Word("inferred".into()),
            Labels::None => Raw::Word("none".into()),
            Labels::List(v) => Raw::List(v.clone()),
        }
        .serialize(s)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> std::result::Result<Labels, D::Error> {
        use serde::de::Error as _;
        match Raw::deserialize(d).map_err(|_| {
            D::Error::custom(
                "`labels`: expected \"inferred\", \"none\" or a list of integer labels",
            )
        })? {
            Raw::Word(w) if w == "inferred" => Ok(Labels::Inferred),
            Raw::Word(w) if w == "none" => Ok(Labels::None),
            Raw::Word(w) => Err(D::Error::custom(format!(
                "`labels`: unknown value {w:?}: expected \"inferred\", \"none\" or a list of \
                 integer labels"
            ))),
            Raw::List(v) => Ok(Labels::List(v)),
        }
    }
}

fn image_size_de<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<[usize; 2], D::Error> {
    use serde::de::Error as _;
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        One(usize),
        Two(Vec<usize>),
    }
    match Raw::deserialize(d)
        .map_err(|_| D::Error::custom("`image_size`: expected [height, width] or one number"))?
    {
        Raw::One(n) => Ok([n, n]),
        Raw::Two(v) if v.len() == 2 => Ok([v[0], v[1]]),
        Raw::Two(v) => Err(D::Error::custom(format!(
            "`image_size`: expected [height, width], got {} numbers",
            v.len()
        ))),
    }
}

/// What indexing a directory found: the files to read in order, their labels, and the
/// class names (Keras's `file_paths` and `class_names`).
#[derive(Debug, Clone, PartialEq)]
pub struct ImageFolderIndex {
    /// The image files, in reading order (the directory joined with the class folder and
    /// the path under it, as Keras's `file_paths`).
    pub file_paths: Vec<PathBuf>,
    /// Each file's label (empty without labels).
    pub labels: Vec<i64>,
    /// The classes in label order (`None` without labels; for a list of labels, their
    /// sorted distinct values as text, as Keras).
    pub class_names: Option<Vec<String>>,
}

impl ImageFolderSpec {
    /// Checks the options as Keras does before reading anything.
    pub fn check(&self) -> std::result::Result<(), Invalid> {
        if self.class_names.is_some() && self.labels != Labels::Inferred {
            return Err(Invalid::at(
                "class_names",
                "`class_names` can only be given with labels = \"inferred\"",
            ));
        }
        if self.image_size.contains(&0) {
            return Err(Invalid::at(
                "image_size",
                "`image_size` must be two positive numbers [height, width]",
            ));
        }
        if let Some(v) = self.validation_split
            && !(v > 0.0 && v < 1.0)
        {
            return Err(Invalid::at(
                "validation_split",
                format!("`validation_split` must be between 0 and 1, got {v}"),
            ));
        }
        match (self.validation_split.is_some(), self.subset.is_some()) {
            (true, false) => {
                return Err(Invalid::at(
                    "subset",
                    "with `validation_split`, `subset` must be set (\"training\" or \
                     \"validation\")",
                ));
            }
            (false, true) => {
                return Err(Invalid::at(
                    "validation_split",
                    "with `subset`, `validation_split` must be set",
                ));
            }
            _ => {}
        }
        if self.validation_split.is_some() && self.shuffle && self.seed.is_none() {
            return Err(Invalid::at(
                "seed",
                "with `validation_split` and `shuffle`, give a `seed`, so that the training \
                 and validation subsets do not overlap",
            ));
        }
        if let Some(seed) = self.seed
            && seed > u64::from(u32::MAX)
        {
            return Err(Invalid::at(
                "seed",
                format!("`seed` must be between 0 and 2^32 - 1, got {seed}"),
            ));
        }
        Ok(())
    }

    fn has_labels(&self) -> bool {
        self.labels != Labels::None && self.label_mode != LabelMode::None
    }

    /// Lists the images of `directory` as Keras's `index_directory` does (see the [module
    /// docs](self)), shuffled with the seed when `shuffle`, and keeps `subset`'s part of a
    /// `validation_split` (with `subset = Both`: everything; see [`Self::split`]).
    pub fn index(&self, directory: impl AsRef<Path>) -> Result<ImageFolderIndex> {
        self.check()
            .map_err(|e| Error::invalid(format!("image_folder: {e}")))?;
        let directory = directory.as_ref();
        let label_by_folder = self.labels == Labels::Inferred;
        let subdirs: Vec<String> = if label_by_folder {
            let io = |error| Error::Io {
                path: directory.into(),
                error,
            };
            let mut found = Vec::new();
            for entry in std::fs::read_dir(directory).map_err(io)? {
                let entry = entry.map_err(io)?;
                let name = entry.file_name().to_string_lossy().into_owned();
                if !name.starts_with('.') && entry.path().is_dir() {
                    found.push(name);
                }
            }
            found.sort();
            match &self.class_names {
                Some(names) => {
                    if let Some(bad) = names.iter().find(|n| !found.contains(n)) {
                        return Err(Error::invalid(format!(
                            "image_folder: class_names: {bad:?} is not a folder of {}: \
                             expected some of {found:?}",
                            directory.display()
                        )));
                    }
                    names.clone()
                }
                None => found,
            }
        } else {
            vec![String::new()]
        };
        let mut file_paths = Vec::new();
        let mut labels = Vec::new();
        for (label, subdir) in subdirs.iter().enumerate() {
            let root = if subdir.is_empty() {
                directory.to_path_buf()
            } else {
                directory.join(subdir)
            };
            for file in walk(&root, self.follow_links)? {
                file_paths.push(file);
                labels.push(label as i64);
            }
        }
        let class_names = match &self.labels {
            Labels::Inferred => Some(subdirs),
            Labels::None => None,
            Labels::List(list) => {
                if list.len() != file_paths.len() {
                    return Err(Error::invalid(format!(
                        "image_folder: labels: {} labels for the {} image files of {}",
                        list.len(),
                        file_paths.len(),
                        directory.display()
                    )));
                }
                labels = list.clone();
                let mut distinct = list.clone();
                distinct.sort_unstable();
                distinct.dedup();
                Some(distinct.iter().map(|l| l.to_string()).collect())
            }
        };
        if self.label_mode == LabelMode::Binary
            && self.labels != Labels::None
            && class_names.as_ref().map(Vec::len) != Some(2)
        {
            return Err(Error::invalid(format!(
                "image_folder: label_mode = \"binary\" needs exactly 2 classes, found {:?}",
                class_names.unwrap_or_default()
            )));
        }
        if self.shuffle {
            let seed = match self.seed {
                Some(s) => s as u32,
                None => rand::random::<u32>() % 1_000_000,
            };
            numpy_shuffle(&mut file_paths, seed);
            numpy_shuffle(&mut labels, seed);
        }
        if !self.has_labels() {
            labels.clear();
        }
        let mut index = ImageFolderIndex {
            file_paths,
            labels,
            class_names: if self.labels == Labels::None {
                None
            } else {
                class_names
            },
        };
        match self.subset {
            Some(Subset::Training) => index = self.part(index, false),
            Some(Subset::Validation) => index = self.part(index, true),
            _ => {}
        }
        Ok(index)
    }

    /// The training and validation parts of an index of everything.
    pub fn split(&self, index: ImageFolderIndex) -> (ImageFolderIndex, ImageFolderIndex) {
        (self.part(index.clone(), false), self.part(index, true))
    }

    fn part(&self, mut index: ImageFolderIndex, validation: bool) -> ImageFolderIndex {
        let Some(split) = self.validation_split else {
            return index;
        };
        let n = index.file_paths.len();
        let num_val = (split * n as f64) as usize;
        let num_train = n - num_val;
        let range = if validation {
            num_train..n
        } else {
            0..num_train
        };
        index.file_paths = index.file_paths[range.clone()].to_vec();
        if !index.labels.is_empty() {
            index.labels = index.labels[range].to_vec();
        }
        index
    }

    /// The dataset reading `index`'s files with this spec.
    pub fn dataset(&self, index: &ImageFolderIndex, directory: &Path) -> Result<Dataset> {
        if index.file_paths.is_empty() {
            return Err(Error::NoMatch {
                pattern: format!(
                    "{}/**/*.{{bmp,gif,jpeg,jpg,png}} (image_folder)",
                    directory.display()
                ),
            });
        }
        let labels: HashMap<String, i64> = if index.labels.is_empty() {
            HashMap::new()
        } else {
            index
                .file_paths
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .zip(index.labels.iter().copied())
                .collect()
        };
        let format = ImageFolder {
            spec: self.clone(),
            num_classes: index.class_names.as_ref().map_or(0, Vec::len),
            class_names: index.class_names.clone(),
            labels: Arc::new(labels),
            names: (Arc::from("image"), Arc::from("label")),
        };
        Ok(Dataset::file_list(index.file_paths.clone()).read_files(format))
    }
}

/// The image files under `root`, as Keras's `iter_valid_files`: folders in sorted path
/// order, each one's files sorted by name, kept when their lower-case name ends with an
/// allowed extension.
fn walk(root: &Path, follow_links: bool) -> Result<Vec<PathBuf>> {
    let mut folders: Vec<(String, Vec<String>)> = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let io = |error| Error::Io {
            path: dir.clone(),
            error,
        };
        let mut files = Vec::new();
        for entry in std::fs::read_dir(&dir).map_err(io)? {
            let entry = entry.map_err(io)?;
            let path = entry.path();
            let is_link = entry.file_type().map_err(io)?.is_symlink();
            // As os.walk: a symlink to a folder is a folder (walked only when following
            // links); anything else that is not a folder is a file.
            if path.is_dir() {
                if !is_link || follow_links {
                    pending.push(path);
                }
            } else {
                files.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        files.sort();
        folders.push((dir.to_string_lossy().into_owned(), files));
    }
    folders.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out = Vec::new();
    for (dir, files) in folders {
        for name in files {
            let lower = name.to_lowercase();
            if ALLOWED_EXTENSIONS.iter().any(|e| lower.ends_with(e)) {
                out.push(Path::new(&dir).join(name));
            }
        }
    }
    Ok(out)
}

/// NumPy's legacy `RandomState(seed).shuffle(x)`: MT19937 seeded with `init_genrand(seed)`,
/// and for `i` from `n - 1` down to 1, `j` drawn in `[0, i]` by masked rejection on 32-bit
/// outputs, then `x[i]` and `x[j]` swapped.
fn numpy_shuffle<T>(x: &mut [T], seed: u32) {
    let mut mt = Mt19937::new(seed);
    for i in (1..x.len()).rev() {
        let max = i as u32;
        let mut mask = max;
        mask |= mask >> 1;
        mask |= mask >> 2;
        mask |= mask >> 4;
        mask |= mask >> 8;
        mask |= mask >> 16;
        let j = loop {
            let v = mt.next_u32() & mask;
            if v <= max {
                break v;
            }
        };
        x.swap(i, j as usize);
    }
}

/// The Mersenne Twister MT19937 (32-bit).
struct Mt19937 {
    state: [u32; 624],
    index: usize,
}

impl Mt19937 {
    fn new(seed: u32) -> Self {
        let mut state = [0u32; 624];
        state[0] = seed;
        for i in 1..624 {
            let prev = state[i - 1];
            state[i] = 1_812_433_253u32
                .wrapping_mul(prev ^ (prev >> 30))
                .wrapping_add(i as u32);
        }
        Mt19937 { state, index: 624 }
    }

    fn next_u32(&mut self) -> u32 {
        if self.index >= 624 {
            for i in 0..624 {
                let y = (self.state[i] & 0x8000_0000) | (self.state[(i + 1) % 624] & 0x7fff_ffff);
                let mut next = self.state[(i + 397) % 624] ^ (y >> 1);
                if y & 1 != 0 {
                    next ^= 0x9908_b0df;
                }
                self.state[i] = next;
            }
            self.index = 0;
        }
        let mut y = self.state[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^= y >> 18;
        y
    }
}

/// The image format of an indexed folder: each file is one record `{image, label}`.
#[derive(Debug, Clone)]
struct ImageFolder {
    spec: ImageFolderSpec,
    class_names: Option<Vec<String>>,
    num_classes: usize,
    labels: Arc<HashMap<String, i64>>,
    names: (Arc<str>, Arc<str>),
}

impl FileFormat for ImageFolder {
    fn name(&self) -> &'static str {
        "image_folder"
    }

    fn params(&self) -> Params {
        let s = &self.spec;
        let mut p = Params::new()
            .with("label_mode", s.label_mode)
            .with("class_names", &self.class_names)
            .with("color_mode", s.color_mode)
            .with("image_size", s.image_size)
            .with("interpolation", s.interpolation)
            .with("decode", s.decode)
            .with("shuffle", s.shuffle)
            .with("seed", s.seed)
            .with("validation_split", s.validation_split)
            .with("subset", s.subset);
        if let Labels::List(l) = &s.labels {
            p = p.with("labels", l);
        }
        p
    }

    fn validate(&self) -> std::result::Result<(), Invalid> {
        self.spec.check()
    }

    fn opening(&self) -> Opening {
        Opening::default()
    }

    fn records(&self, mut file: OpenedFile) -> Result<Box<dyn RecordReader>> {
        let mut data = Vec::new();
        file.input
            .read_to_end(&mut data)
            .map_err(|error| Error::Io {
                path: file.path.clone().into(),
                error,
            })?;
        let record = self.record(&file.path, data);
        Ok(Box::new(OneRecord(Some(record))))
    }
}

struct OneRecord(Option<std::result::Result<Record, RecordError>>);

impl RecordReader for OneRecord {
    fn next_record(&mut self) -> Option<std::result::Result<Record, RecordError>> {
        self.0.take()
    }
}

impl ImageFolder {
    fn record(&self, path: &str, data: Vec<u8>) -> std::result::Result<Record, RecordError> {
        let bad = |feature: &str, message: String| RecordError {
            offset: 0,
            feature: Some(feature.to_string()),
            message: format!("{path}: {message}"),
            recoverable: true,
        };
        let image = if self.spec.decode {
            self.decode(&data).map_err(|m| bad("image", m))?
        } else {
            Tensor::scalar_bytes(Bytes::from(data))
        };
        let mut features = vec![(Arc::clone(&self.names.0), image)];
        if self.spec.has_labels() {
            let label = *self
                .labels
                .get(path)
                .ok_or_else(|| bad("label", "a file the index did not list".into()))?;
            let tensor = match self.spec.label_mode {
                LabelMode::Categorical => {
                    let mut v = vec![0f32; self.num_classes];
                    if let Some(x) = usize::try_from(label).ok().and_then(|i| v.get_mut(i)) {
                        *x = 1.0;
                    }
                    Tensor::vector(TensorData::F32(v.into()))
                }
                LabelMode::Binary => Tensor::vector(TensorData::F32(vec![label as f32].into())),
                _ => Tensor::new(&[], TensorData::I32(vec![label as i32].into()))
                    .expect("one value for a scalar"),
            };
            features.push((Arc::clone(&self.names.1), tensor));
        }
        Ok(Record {
            offset: 0,
            features,
        })
    }

    /// Decodes and resizes as Keras's `_load_image_tf`.
    fn decode(&self, data: &[u8]) -> std::result::Result<Tensor, String> {
        let channels = self.spec.color_mode.channels();
        let decoded = if data.starts_with(b"BM") {
            if channels == 1 {
                return Err(format!(
                    "`channels` must be 0, 3 or 4 for BMP, but got {channels}"
                ));
            }
            decode_with_image_crate(data, image::ImageFormat::Bmp, channels)?
        } else if data.starts_with(b"GIF8") {
            if channels != 3 {
                return Err(format!("channels must be 0 or 3 for GIF, got {channels}"));
            }
            decode_with_image_crate(data, image::ImageFormat::Gif, channels)?
        } else {
            if channels == 4 && data.starts_with(&[0xff, 0xd8, 0xff]) {
                return Err("JPEG does not support 4 channels".into());
            }
            sluice_image::decode_image(data, Some(channels)).map_err(|e| e.to_string())?
        };
        let method = match self.spec.interpolation {
            Interpolation::Bilinear => ResizeMethod::Bilinear,
            Interpolation::Nearest => ResizeMethod::Nearest,
            Interpolation::Area => ResizeMethod::Area,
        };
        let [h, w] = self.spec.image_size;
        sluice_image::resize(&decoded, h, w, method).map_err(|e| e.to_string())
    }
}

/// A BMP or GIF (its first frame) decoded to `channels` (3, or 4 for BMP) `uint8`.
fn decode_with_image_crate(
    data: &[u8],
    format: image::ImageFormat,
    channels: usize,
) -> std::result::Result<Tensor, String> {
    let img = image::load_from_memory_with_format(data, format).map_err(|e| e.to_string())?;
    let (w, h) = (img.width() as usize, img.height() as usize);
    let pixels = if channels == 4 {
        img.into_rgba8().into_raw()
    } else {
        img.into_rgb8().into_raw()
    };
    Tensor::new(&[h, w, channels], TensorData::U8(Bytes::from(pixels))).map_err(|e| e.to_string())
}
