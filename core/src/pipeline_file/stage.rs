//! `[[stage]]`: one stage of the pipeline, tagged by `kind`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::dataset::Dataset;
use crate::stages::batch::BatchSpec;
use crate::stages::cache::CacheSpec;
use crate::stages::image_ops::ImageOpsSpec;
use crate::stages::interleave::InterleaveSpec;
use crate::stages::padded_batch::{PadValue, PaddedBatchSpec};
use crate::stages::parse_example::{FeatureSpec, FeatureType, ParseExampleSpec};
use crate::stages::prefetch::BufferSize;
use crate::stages::repeat::RepeatSpec;
use crate::stages::shard::ShardSpec;
use crate::stages::shuffle::ShuffleSpec;
use crate::stages::skip::SkipSpec;
use crate::stages::take::TakeSpec;
use crate::stages::unbatch::UnbatchSpec;

use crate::error::Result;

use super::plugin::{NoPluginLoader, PluginLoader, PluginStageSpec};
use super::validate::{Problem, Seg, check_image_ops, check_num_parallel, under};

/// One `[[stage]]` table: `kind` names the stage, the other keys are its parameters. Stages
/// run in file order after the source.
///
/// Where a stage's parameters are exactly its runtime spec, the variant holds that spec
/// (e.g. [`BatchSpec`]: `batch_size`, `drop_remainder`, `num_parallel`, `deterministic`);
/// the others hold a file-friendly form ([`ParseExampleEntry`], [`PaddedBatchEntry`],
/// [`CacheEntry`], [`PrefetchEntry`]) that [`StageSpec::apply`] converts.
///
/// `map` and `filter` take Rust closures and `zip`, `concatenate` and `sample_from` take
/// several pipelines, so a file cannot express them; a user transform goes in a file as a
/// `plugin` stage ([`PluginStageSpec`]), loaded by a [`PluginLoader`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StageSpec {
    /// `shard`: keep one shard of the files (right after the source) or of the elements.
    Shard(ShardSpec),
    /// `interleave`: read several files at once; only right after the source (or `shard`).
    Interleave(InterleaveSpec),
    /// `parse_example`: `tf.train.Example` records to tensors.
    ParseExample(ParseExampleEntry),
    /// `shuffle`: a seeded shuffle buffer.
    Shuffle(ShuffleSpec),
    /// `repeat`: `count` passes, or forever.
    Repeat(RepeatSpec),
    /// `take`: the first `count` elements.
    Take(TakeSpec),
    /// `skip`: all but the first `count` elements.
    Skip(SkipSpec),
    /// `batch`: stack `batch_size` elements.
    Batch(BatchSpec),
    /// `padded_batch`: batch, padding values to a common shape.
    PaddedBatch(PaddedBatchEntry),
    /// `unbatch`: split batches back into elements.
    Unbatch(UnbatchSpec),
    /// `cache`: keep the first pass in memory or in a directory.
    Cache(CacheEntry),
    /// `prefetch`: run ahead on a thread.
    Prefetch(PrefetchEntry),
    /// `image_ops`: decode and augment images with the built-in ops.
    ImageOps(ImageOpsSpec),
    /// `plugin`: a native or WASM plugin with a config table (needs a [`PluginLoader`]).
    Plugin(PluginStageSpec),
}

impl StageSpec {
    /// Every `kind` a file may use, in the order of the reference.
    pub const KINDS: &'static [&'static str] = &[
        "shard",
        "interleave",
        "parse_example",
        "shuffle",
        "repeat",
        "take",
        "skip",
        "batch",
        "padded_batch",
        "unbatch",
        "cache",
        "prefetch",
        "image_ops",
        "plugin",
    ];

    /// The stage's `kind`.
    pub fn kind(&self) -> &'static str {
        match self {
            StageSpec::Shard(_) => "shard",
            StageSpec::Interleave(_) => "interleave",
            StageSpec::ParseExample(_) => "parse_example",
            StageSpec::Shuffle(_) => "shuffle",
            StageSpec::Repeat(_) => "repeat",
            StageSpec::Take(_) => "take",
            StageSpec::Skip(_) => "skip",
            StageSpec::Batch(_) => "batch",
            StageSpec::PaddedBatch(_) => "padded_batch",
            StageSpec::Unbatch(_) => "unbatch",
            StageSpec::Cache(_) => "cache",
            StageSpec::Prefetch(_) => "prefetch",
            StageSpec::ImageOps(_) => "image_ops",
            StageSpec::Plugin(_) => "plugin",
        }
    }

    /// `dataset` followed by this stage; a `plugin` stage is
    /// [`Error::NoPluginLoader`](crate::Error::NoPluginLoader) (use
    /// [`StageSpec::apply_with`]).
    pub fn apply(&self, dataset: &Dataset) -> Result<Dataset> {
        self.apply_with(dataset, &NoPluginLoader)
    }

    /// `dataset` followed by this stage, a `plugin` stage's plugin loaded by `loader`.
    pub fn apply_with(&self, dataset: &Dataset, loader: &dyn PluginLoader) -> Result<Dataset> {
        Ok(match self {
            StageSpec::Shard(s) => dataset.shard(s.num_shards, s.index),
            StageSpec::Interleave(s) => dataset.interleave(*s),
            StageSpec::ParseExample(s) => dataset.parse_example(s.to_spec()),
            StageSpec::Shuffle(s) => dataset.shuffle_with(*s),
            StageSpec::Repeat(s) => dataset.repeat(s.count),
            StageSpec::Take(s) => dataset.take(s.count),
            StageSpec::Skip(s) => dataset.skip(s.count),
            StageSpec::Batch(s) => dataset.batch_with(*s),
            StageSpec::PaddedBatch(s) => dataset.padded_batch(s.to_spec()),
            StageSpec::Unbatch(_) => dataset.unbatch(),
            StageSpec::Cache(s) => dataset.cache(s.to_spec()),
            StageSpec::Prefetch(s) => dataset.prefetch(s.buffer_size),
            StageSpec::ImageOps(s) => dataset.image_ops(s.clone()),
            StageSpec::Plugin(s) => return s.apply(dataset, loader),
        })
    }

    /// Checks the parameters; `base` is the stage's path (`stage[i]`).
    pub(super) fn check(&self, base: &[Seg]) -> Result<(), Problem> {
        let at = |key: &str, message: String| Err(Problem::new(under(base, &[key]), message));
        match self {
            StageSpec::Shard(s) => {
                if s.num_shards == 0 {
                    return at(
                        "num_shards",
                        "shard: `num_shards` must be at least 1".into(),
                    );
                }
                if s.index >= s.num_shards {
                    return at(
                        "index",
                        format!(
                            "shard: `index` {} must be below `num_shards` {}",
                            s.index, s.num_shards
                        ),
                    );
                }
            }
            StageSpec::Interleave(s) => {
                if s.cycle_length == 0 {
                    return at(
                        "cycle_length",
                        "interleave: `cycle_length` must be at least 1".into(),
                    );
                }
                if s.block_length == 0 {
                    return at(
                        "block_length",
                        "interleave: `block_length` must be at least 1".into(),
                    );
                }
                check_num_parallel(base, "interleave", s.num_parallel)?;
            }
            StageSpec::ParseExample(s) => s.check(base)?,
            StageSpec::Shuffle(s) => {
                if s.buffer_size == 0 {
                    return at(
                        "buffer_size",
                        "shuffle: `buffer_size` must be at least 1".into(),
                    );
                }
            }
            StageSpec::Repeat(_) | StageSpec::Take(_) | StageSpec::Skip(_) => {}
            StageSpec::Batch(s) => {
                if s.batch_size == 0 {
                    return at(
                        "batch_size",
                        "batch: `batch_size` must be at least 1".into(),
                    );
                }
                check_num_parallel(base, "batch", s.num_parallel)?;
            }
            StageSpec::PaddedBatch(s) => s.check(base)?,
            StageSpec::Unbatch(_) => {}
            StageSpec::Cache(s) => {
                if s.directory
                    .as_ref()
                    .is_some_and(|d| d.as_os_str().is_empty())
                {
                    return at(
                        "directory",
                        "cache: `directory` must not be empty (leave it out to cache in memory)"
                            .into(),
                    );
                }
            }
            StageSpec::Prefetch(s) => {
                if s.buffer_size == BufferSize::Fixed(0) {
                    return at(
                        "buffer_size",
                        "prefetch: `buffer_size` must be at least 1 or \"auto\"".into(),
                    );
                }
            }
            StageSpec::ImageOps(s) => check_image_ops(base, s)?,
            StageSpec::Plugin(s) => s.check(base)?,
        }
        Ok(())
    }
}

/// Whether a feature is dense with a fixed number of values or has any number of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FeatureKind {
    /// `tf.io.FixedLenFeature` (the default).
    #[default]
    FixedLen,
    /// `tf.io.VarLenFeature`.
    VarLen,
}

/// One feature of a `parse_example` stage:
/// `label = { dtype = "int64" }`, `bbox = { dtype = "float", shape = [4] }`,
/// `tags = { dtype = "string", kind = "var_len" }`, `weight = { dtype = "float", default = 1.0 }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeatureEntry {
    /// `int64`, `float` (or `float32`) or `string` (or `bytes`).
    pub dtype: FeatureType,
    /// `fixed_len` (default) or `var_len`.
    #[serde(default)]
    pub kind: FeatureKind,
    /// The dense shape of a `fixed_len` feature; default `[]` (a scalar).
    #[serde(default)]
    pub shape: Vec<usize>,
    /// For a `fixed_len` feature, the value(s) used when it is absent: one value (broadcast)
    /// or one per element of `shape`. Default: none (the feature is required).
    #[serde(
        default,
        deserialize_with = "pad_values",
        skip_serializing_if = "Option::is_none"
    )]
    pub default: Option<Vec<PadValue>>,
}

impl FeatureEntry {
    /// The runtime feature spec.
    pub fn to_spec(&self) -> FeatureSpec {
        match self.kind {
            FeatureKind::FixedLen => FeatureSpec::FixedLen {
                dtype: self.dtype,
                shape: self.shape.clone(),
                default: self.default.clone(),
            },
            FeatureKind::VarLen => FeatureSpec::VarLen { dtype: self.dtype },
        }
    }
}

/// The `parse_example` stage as written in a file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParseExampleEntry {
    /// The features to parse, by name (a table of [`FeatureEntry`]).
    pub features: BTreeMap<String, FeatureEntry>,
    /// The value holding the serialized records; default `record`.
    #[serde(default = "record")]
    pub input: String,
}

fn record() -> String {
    crate::element::RECORD.to_string()
}

impl ParseExampleEntry {
    /// The runtime spec.
    pub fn to_spec(&self) -> ParseExampleSpec {
        ParseExampleSpec {
            features: self
                .features
                .iter()
                .map(|(k, v)| (k.clone(), v.to_spec()))
                .collect(),
            input: self.input.clone(),
        }
    }

    fn check(&self, base: &[Seg]) -> Result<(), Problem> {
        if self.features.is_empty() {
            return Err(Problem::new(
                under(base, &["features"]),
                "parse_example: `features` needs at least one feature",
            ));
        }
        if self.input.is_empty() {
            return Err(Problem::new(
                under(base, &["input"]),
                "parse_example: `input` must name a value",
            ));
        }
        for (name, f) in &self.features {
            let at = |key: &str| under(base, &["features", name, key]);
            if f.kind == FeatureKind::VarLen {
                if !f.shape.is_empty() {
                    return Err(Problem::new(
                        at("shape"),
                        format!("parse_example: feature `{name}` is var_len and takes no shape"),
                    ));
                }
                if f.default.is_some() {
                    return Err(Problem::new(
                        at("default"),
                        format!(
                            "parse_example: feature `{name}` is var_len and takes no default (a missing one has no values)"
                        ),
                    ));
                }
                continue;
            }
            let Some(default) = &f.default else { continue };
            let n: usize = f.shape.iter().product();
            if default.len() != 1 && default.len() != n {
                return Err(Problem::new(
                    at("default"),
                    format!(
                        "parse_example: feature `{name}` has shape {:?}: its default needs 1 or {n} values, got {}",
                        f.shape,
                        default.len()
                    ),
                ));
            }
            let fits = |v: &PadValue| {
                matches!(
                    (f.dtype, v),
                    (FeatureType::Int64, PadValue::Int(_))
                        | (FeatureType::Float, PadValue::Int(_) | PadValue::Float(_))
                        | (FeatureType::String, PadValue::Bytes(_))
                )
            };
            if let Some(bad) = default.iter().find(|v| !fits(v)) {
                return Err(Problem::new(
                    at("default"),
                    format!(
                        "parse_example: feature `{name}` is {}: its default {bad:?} does not fit",
                        f.dtype.dtype().tf_name()
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// One padded dimension: a size, or `"max"` (the largest in the batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PadDim {
    /// Exactly this size.
    Fixed(usize),
    /// The batch's largest size in this dimension (`"max"`).
    Max,
}

impl Serialize for PadDim {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            PadDim::Fixed(n) => s.serialize_u64(*n as u64),
            PadDim::Max => s.serialize_str("max"),
        }
    }
}

impl<'de> Deserialize<'de> for PadDim {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = PadDim;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a dimension size or \"max\"")
            }

            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<PadDim, E> {
                usize::try_from(v)
                    .map(PadDim::Fixed)
                    .map_err(|_| E::custom(format!("dimension {v} is too large")))
            }

            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<PadDim, E> {
                u64::try_from(v)
                    .map_err(|_| {
                        E::custom(format!(
                            "a dimension cannot be negative, got {v} (use \"max\")"
                        ))
                    })
                    .and_then(|v| self.visit_u64(v))
            }

            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<PadDim, E> {
                match v {
                    "max" => Ok(PadDim::Max),
                    other => Err(E::custom(format!(
                        "expected a dimension size or \"max\", got {other:?}"
                    ))),
                }
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// The `padded_batch` stage as written in a file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaddedBatchEntry {
    /// Elements per batch (≥ 1).
    pub batch_size: usize,
    /// Drop a last, smaller batch (default false).
    #[serde(default)]
    pub drop_remainder: bool,
    /// Padded shape per value name: sizes or `"max"` per dimension, e.g. `tokens = [128]`,
    /// `mask = ["max", 8]`. Values not listed pad to the batch's largest shape.
    #[serde(default)]
    pub padded_shapes: BTreeMap<String, Vec<PadDim>>,
    /// Padding value per value name (a number or a string); default 0 or `""`.
    #[serde(default)]
    pub padding_values: BTreeMap<String, PadValue>,
}

impl PaddedBatchEntry {
    /// The runtime spec.
    pub fn to_spec(&self) -> PaddedBatchSpec {
        PaddedBatchSpec {
            batch_size: self.batch_size,
            drop_remainder: self.drop_remainder,
            padded_shapes: self
                .padded_shapes
                .iter()
                .map(|(k, dims)| {
                    let dims = dims
                        .iter()
                        .map(|d| match d {
                            PadDim::Fixed(n) => Some(*n),
                            PadDim::Max => None,
                        })
                        .collect();
                    (k.clone(), dims)
                })
                .collect(),
            padding_values: self.padding_values.clone(),
        }
    }

    fn check(&self, base: &[Seg]) -> Result<(), Problem> {
        if self.batch_size == 0 {
            return Err(Problem::new(
                under(base, &["batch_size"]),
                "padded_batch: `batch_size` must be at least 1",
            ));
        }
        for (name, dims) in &self.padded_shapes {
            if let Some(i) = dims.iter().position(|d| *d == PadDim::Fixed(0)) {
                let mut p = under(base, &["padded_shapes", name]);
                p.push(Seg::Index(i));
                return Err(Problem::new(
                    p,
                    format!(
                        "padded_batch: dimension {i} of `{name}` must be at least 1 or \"max\""
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// The `cache` stage as written in a file: `directory = "cache/"` caches on disk across runs;
/// without it the cache is in memory (counted against the RAM budget).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheEntry {
    /// The cache directory (relative to the current directory); default: in memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directory: Option<PathBuf>,
}

impl CacheEntry {
    /// The runtime spec.
    pub fn to_spec(&self) -> CacheSpec {
        match &self.directory {
            Some(d) => CacheSpec::Directory(d.clone()),
            None => CacheSpec::Memory,
        }
    }
}

/// The `prefetch` stage as written in a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrefetchEntry {
    /// Elements buffered: a number or `"auto"` (the default: two per CPU of the budget, 2 to
    /// 16).
    #[serde(default = "auto")]
    pub buffer_size: BufferSize,
}

fn auto() -> BufferSize {
    BufferSize::Auto
}

impl Default for PrefetchEntry {
    fn default() -> Self {
        PrefetchEntry {
            buffer_size: BufferSize::Auto,
        }
    }
}

/// One value or a list of values (numbers or strings).
fn pad_values<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<PadValue>>, D::Error> {
    struct Visitor;
    impl<'de> serde::de::Visitor<'de> for Visitor {
        type Value = Vec<PadValue>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a number, a string, or a list of them")
        }

        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Vec<PadValue>, E> {
            Ok(vec![PadValue::Int(v)])
        }

        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Vec<PadValue>, E> {
            i64::try_from(v)
                .map(|v| vec![PadValue::Int(v)])
                .map_err(|_| E::custom(format!("{v} does not fit an int64")))
        }

        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Vec<PadValue>, E> {
            Ok(vec![PadValue::Float(v)])
        }

        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Vec<PadValue>, E> {
            Ok(vec![PadValue::Bytes(v.to_string())])
        }

        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Vec<PadValue>, A::Error> {
            let mut out = Vec::new();
            while let Some(v) = seq.next_element::<PadValue>()? {
                out.push(v);
            }
            Ok(out)
        }
    }
    d.deserialize_any(Visitor).map(Some)
}
