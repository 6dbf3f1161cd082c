//! `parse_example`: `tf.train.Example` records → dense and ragged tensors, as `tf.io` does.
//!
//! Parsing is TensorFlow's "fast example parsing": no `Example` message is built. A
//! wire-format scanner (`fast.rs`) walks each record and appends the requested features'
//! values straight to one column per feature for the whole batch (`columns.rs`, which also
//! checks counts and types with TensorFlow's wording). The original prost-based path
//! (`reference.rs`) is kept as the oracle the fast one is tested and benchmarked against.

mod columns;
mod composite;
mod fast;
mod reference;
mod sequence;

pub use sequence::ParseSequenceExampleSpec;

use std::collections::BTreeMap;

use bytes::Bytes;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::dataset::Dataset;
use crate::element::{Element, RECORD, Value};
use crate::error::{Error, Result};
use crate::invalid::{Invalid, Key};
use crate::params::Params;
use crate::registry::{AppendContext, Spec};
use crate::run::{BuildContext, Input};
use crate::stage::Stage;
use crate::stages::padded_batch::PadValue;
use crate::stream::{BoxStream, ElementStream};
use crate::tensor::{DType, Tensor, TensorData};

use columns::Columns;

/// The three value types a `tf.train.Feature` can hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FeatureType {
    /// `Int64List` → `i64`.
    Int64,
    /// `FloatList` → `f32`.
    #[serde(alias = "float32")]
    Float,
    /// `BytesList` → byte strings.
    #[serde(alias = "bytes")]
    String,
}

impl FeatureType {
    /// The tensor dtype of parsed values.
    pub fn dtype(self) -> DType {
        match self {
            FeatureType::Int64 => DType::I64,
            FeatureType::Float => DType::F32,
            FeatureType::String => DType::Bytes,
        }
    }

    fn tf_name(self) -> &'static str {
        self.dtype().tf_name()
    }
}

/// How one feature is parsed (`tf.io.FixedLenFeature`, `VarLenFeature`,
/// `FixedLenSequenceFeature`, `SparseFeature` or `RaggedFeature`). Written as a
/// [`FeatureEntry`]: `label = { dtype = "int64" }`, `tags = { dtype = "string", kind =
/// "var_len" }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "FeatureEntry", into = "FeatureEntry")]
pub enum FeatureSpec {
    /// Exactly `shape.product()` values, as a dense tensor of `shape`. Missing: `default`
    /// (one value, broadcast, or the full count), or an error if there is none.
    FixedLen {
        /// Value type.
        dtype: FeatureType,
        /// Output shape (`[]` for a scalar).
        shape: Vec<usize>,
        /// Value(s) used when the feature is absent.
        default: Option<Vec<PadValue>>,
    },
    /// Any number of values, as a 1-D tensor (ragged once batched: values + row splits).
    /// Missing: no values.
    VarLen {
        /// Value type.
        dtype: FeatureType,
    },
    /// `tf.io.FixedLenSequenceFeature`: any multiple of `shape.product()` values, as a dense
    /// tensor `[n, ...shape]`; batched, padded to the longest with `default` (or zero / empty).
    /// In `parse_example`, `allow_missing` must be true (TensorFlow's rule) and a missing
    /// feature has no rows; in `parse_sequence_example`, the steps of a feature list, required
    /// unless `allow_missing`, with no `default` (TensorFlow's rule).
    FixedLenSequence {
        /// Value type.
        dtype: FeatureType,
        /// The shape of one row (`[]`: one value per row).
        shape: Vec<usize>,
        /// Whether a missing feature is allowed (no rows).
        allow_missing: bool,
        /// The padding value of batched rows (default zero or empty).
        default: Option<PadValue>,
    },
    /// `tf.io.SparseFeature`: indices from the int64 features `index_key` (one per dimension)
    /// and values from `value_key`, as TensorFlow's SparseTensor in three outputs
    /// `<name>.indices` (`[nnz, rank]`, batched `[nnz, 1 + rank]`), `<name>.values`
    /// (`[nnz]`) and `<name>.dense_shape` (`size`, batched `[records, ...size]`). Indices are
    /// sorted (stable) unless `already_sorted`; like TensorFlow, they are not checked
    /// against `size`.
    Sparse {
        /// Value type.
        dtype: FeatureType,
        /// The int64 features holding the indices, one per dimension.
        index_key: Vec<String>,
        /// The feature holding the values.
        value_key: String,
        /// The dense shape, one size per index key.
        size: Vec<usize>,
        /// Keep the indices in the order the record has them.
        already_sorted: bool,
    },
    /// `tf.io.RaggedFeature`: the values of `value_key` (default: the feature's name) split by
    /// `partitions` (outermost first). Output by its ragged rank (partitions that are not
    /// innermost uniform ones, plus one when batched): 0 a dense tensor, 1 a ragged value,
    /// more `<name>.flat_values` and `<name>.row_splits.<k>` (outermost first, TensorFlow's
    /// `nested_row_splits`). Partitions that do not fit their values are an error (TensorFlow
    /// builds such tensors unchecked).
    Ragged {
        /// Value type.
        dtype: FeatureType,
        /// The feature holding the values; default the feature's name.
        value_key: Option<String>,
        /// Row partitions, outermost first.
        partitions: Vec<Partition>,
    },
}

/// One row partition of a [`FeatureSpec::Ragged`] feature (`tf.io.RaggedFeature`'s
/// partitions): `{ row_lengths = "key" }`, `{ row_splits = "key" }`, `{ row_starts = "key" }`,
/// `{ row_limits = "key" }` (each an int64 feature of the record) or
/// `{ uniform_row_length = n }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Partition {
    /// Each row's length.
    RowLengths(String),
    /// Row splits: 0, then where each row ends.
    RowSplits(String),
    /// Where each row starts (the first 0).
    RowStarts(String),
    /// Where each row ends.
    RowLimits(String),
    /// Rows of `n` (which must divide the count).
    UniformRowLength(usize),
}

impl Partition {
    /// The feature holding the partition, if it reads one.
    pub fn key(&self) -> Option<&str> {
        match self {
            Partition::RowLengths(k)
            | Partition::RowSplits(k)
            | Partition::RowStarts(k)
            | Partition::RowLimits(k) => Some(k),
            Partition::UniformRowLength(_) => None,
        }
    }
}

impl JsonSchema for FeatureSpec {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        FeatureEntry::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        FeatureEntry::json_schema(generator)
    }
}

/// Which `tf.io` feature kind a feature entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FeatureKind {
    /// `tf.io.FixedLenFeature` (the default).
    #[default]
    FixedLen,
    /// `tf.io.VarLenFeature`.
    VarLen,
    /// `tf.io.FixedLenSequenceFeature`.
    FixedLenSequence,
    /// `tf.io.SparseFeature`.
    Sparse,
    /// `tf.io.RaggedFeature`.
    Ragged,
}

/// One name or several (`index_key = "i"` or `index_key = ["i", "j"]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum OneOrMany<T> {
    /// One.
    One(T),
    /// Several.
    Many(Vec<T>),
}

impl<T> OneOrMany<T> {
    fn into_vec(self) -> Vec<T> {
        match self {
            OneOrMany::One(v) => vec![v],
            OneOrMany::Many(v) => v,
        }
    }

    fn of(mut v: Vec<T>) -> Option<Self> {
        match v.len() {
            0 => None,
            1 => v.pop().map(OneOrMany::One),
            _ => Some(OneOrMany::Many(v)),
        }
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// One feature as written: `label = { dtype = "int64" }`,
/// `bbox = { dtype = "float", shape = [4] }`, `tags = { dtype = "string", kind = "var_len" }`,
/// `weight = { dtype = "float", default = 1.0 }`,
/// `pairs = { dtype = "int64", kind = "fixed_len_sequence", shape = [2], allow_missing = true }`,
/// `s = { dtype = "float", kind = "sparse", index_key = "i", value_key = "v", size = 100 }`,
/// `r = { dtype = "int64", kind = "ragged", value_key = "v", partitions = [{ row_lengths = "l" }] }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FeatureEntry {
    /// `int64`, `float` (or `float32`) or `string` (or `bytes`).
    pub dtype: FeatureType,
    /// `fixed_len` (default), `var_len`, `fixed_len_sequence`, `sparse` or `ragged`.
    #[serde(default)]
    pub kind: FeatureKind,
    /// The dense shape of a `fixed_len` feature, or of one row of a `fixed_len_sequence`
    /// one; default `[]` (a scalar).
    #[serde(default)]
    pub shape: Vec<usize>,
    /// For a `fixed_len` feature, the value(s) used when it is absent: one value (broadcast)
    /// or one per element of `shape`. Default: none (the feature is required).
    #[serde(
        default,
        deserialize_with = "crate::stages::padded_batch::one_or_many_pad_values",
        skip_serializing_if = "Option::is_none"
    )]
    pub default: Option<Vec<PadValue>>,
    /// `fixed_len_sequence` only: whether the feature may be missing (no rows).
    #[serde(default, skip_serializing_if = "is_false")]
    pub allow_missing: bool,
    /// `sparse` only: the int64 feature(s) holding the indices, one per dimension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_key: Option<OneOrMany<String>>,
    /// `sparse` (required) and `ragged` (default: the feature's name): the feature holding
    /// the values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_key: Option<String>,
    /// `sparse` only: the dense shape, one size per index key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<OneOrMany<usize>>,
    /// `sparse` only: keep the indices in the record's order (default: sorted).
    #[serde(default, skip_serializing_if = "is_false")]
    pub already_sorted: bool,
    /// `ragged` only: row partitions, outermost first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partitions: Vec<Partition>,
}

impl FeatureEntry {
    /// The keys given that `kind` does not take.
    fn stray_keys(&self) -> Vec<&'static str> {
        let k = self.kind;
        let given = [
            (
                "shape",
                !self.shape.is_empty(),
                matches!(k, FeatureKind::FixedLen | FeatureKind::FixedLenSequence),
            ),
            (
                "default",
                self.default.is_some(),
                matches!(k, FeatureKind::FixedLen | FeatureKind::FixedLenSequence),
            ),
            (
                "allow_missing",
                self.allow_missing,
                k == FeatureKind::FixedLenSequence,
            ),
            (
                "index_key",
                self.index_key.is_some(),
                k == FeatureKind::Sparse,
            ),
            (
                "value_key",
                self.value_key.is_some(),
                matches!(k, FeatureKind::Sparse | FeatureKind::Ragged),
            ),
            ("size", self.size.is_some(), k == FeatureKind::Sparse),
            (
                "already_sorted",
                self.already_sorted,
                k == FeatureKind::Sparse,
            ),
            (
                "partitions",
                !self.partitions.is_empty(),
                k == FeatureKind::Ragged,
            ),
        ];
        given
            .into_iter()
            .filter(|&(_, present, allowed)| present && !allowed)
            .map(|(name, ..)| name)
            .collect()
    }
}

impl TryFrom<FeatureEntry> for FeatureSpec {
    type Error = String;

    fn try_from(e: FeatureEntry) -> std::result::Result<Self, String> {
        let kind_name = match e.kind {
            FeatureKind::FixedLen => "fixed_len",
            FeatureKind::VarLen => "var_len",
            FeatureKind::FixedLenSequence => "fixed_len_sequence",
            FeatureKind::Sparse => "sparse",
            FeatureKind::Ragged => "ragged",
        };
        let stray = e.stray_keys();
        // var_len keeps its own wording for shape and default.
        if e.kind != FeatureKind::VarLen
            && let Some(key) = stray.first()
        {
            return Err(format!("a {kind_name} feature takes no `{key}`"));
        }
        if e.kind == FeatureKind::VarLen
            && let Some(key) = stray.iter().find(|k| !matches!(**k, "shape" | "default"))
        {
            return Err(format!("a var_len feature takes no `{key}`"));
        }
        Ok(match e.kind {
            FeatureKind::FixedLenSequence => {
                let default = match e.default {
                    None => None,
                    Some(mut d) if d.len() == 1 => d.pop(),
                    Some(_) => {
                        return Err(
                            "a fixed_len_sequence feature's default is one value (the padding)"
                                .into(),
                        );
                    }
                };
                FeatureSpec::FixedLenSequence {
                    dtype: e.dtype,
                    shape: e.shape,
                    allow_missing: e.allow_missing,
                    default,
                }
            }
            FeatureKind::Sparse => {
                let index_key = e
                    .index_key
                    .map(OneOrMany::into_vec)
                    .ok_or("a sparse feature needs `index_key`")?;
                let value_key = e.value_key.ok_or("a sparse feature needs `value_key`")?;
                let size = e
                    .size
                    .map(OneOrMany::into_vec)
                    .ok_or("a sparse feature needs `size`")?;
                FeatureSpec::Sparse {
                    dtype: e.dtype,
                    index_key,
                    value_key,
                    size,
                    already_sorted: e.already_sorted,
                }
            }
            FeatureKind::Ragged => FeatureSpec::Ragged {
                dtype: e.dtype,
                value_key: e.value_key,
                partitions: e.partitions,
            },
            FeatureKind::FixedLen => FeatureSpec::FixedLen {
                dtype: e.dtype,
                shape: e.shape,
                default: e.default,
            },
            FeatureKind::VarLen if !e.shape.is_empty() => {
                return Err("a var_len feature takes no shape".into());
            }
            FeatureKind::VarLen if e.default.is_some() => {
                return Err(
                    "a var_len feature takes no default (a missing one has no values)".into(),
                );
            }
            FeatureKind::VarLen => FeatureSpec::VarLen { dtype: e.dtype },
        })
    }
}

impl From<FeatureSpec> for FeatureEntry {
    fn from(f: FeatureSpec) -> Self {
        match f {
            FeatureSpec::FixedLen {
                dtype,
                shape,
                default,
            } => FeatureEntry {
                default,
                shape,
                ..FeatureEntry::of(dtype, FeatureKind::FixedLen)
            },
            FeatureSpec::VarLen { dtype } => FeatureEntry::of(dtype, FeatureKind::VarLen),
            FeatureSpec::FixedLenSequence {
                dtype,
                shape,
                allow_missing,
                default,
            } => FeatureEntry {
                shape,
                allow_missing,
                default: default.map(|d| vec![d]),
                ..FeatureEntry::of(dtype, FeatureKind::FixedLenSequence)
            },
            FeatureSpec::Sparse {
                dtype,
                index_key,
                value_key,
                size,
                already_sorted,
            } => FeatureEntry {
                index_key: OneOrMany::of(index_key),
                value_key: Some(value_key),
                size: OneOrMany::of(size),
                already_sorted,
                ..FeatureEntry::of(dtype, FeatureKind::Sparse)
            },
            FeatureSpec::Ragged {
                dtype,
                value_key,
                partitions,
            } => FeatureEntry {
                value_key,
                partitions,
                ..FeatureEntry::of(dtype, FeatureKind::Ragged)
            },
        }
    }
}

impl FeatureEntry {
    fn of(dtype: FeatureType, kind: FeatureKind) -> Self {
        FeatureEntry {
            dtype,
            kind,
            shape: Vec::new(),
            default: None,
            allow_missing: false,
            index_key: None,
            value_key: None,
            size: None,
            already_sorted: false,
            partitions: Vec::new(),
        }
    }
}

impl FeatureSpec {
    /// A required scalar.
    pub fn scalar(dtype: FeatureType) -> Self {
        FeatureSpec::FixedLen {
            dtype,
            shape: Vec::new(),
            default: None,
        }
    }

    /// A VarLen feature.
    pub fn var_len(dtype: FeatureType) -> Self {
        FeatureSpec::VarLen { dtype }
    }

    /// A `tf.io.FixedLenSequenceFeature` with rows of `shape`, allowed to be missing.
    pub fn fixed_len_sequence(dtype: FeatureType, shape: impl Into<Vec<usize>>) -> Self {
        FeatureSpec::FixedLenSequence {
            dtype,
            shape: shape.into(),
            allow_missing: true,
            default: None,
        }
    }

    /// A `tf.io.SparseFeature` of one dimension of `size`.
    pub fn sparse(
        dtype: FeatureType,
        index_key: impl Into<String>,
        value_key: impl Into<String>,
        size: usize,
    ) -> Self {
        FeatureSpec::Sparse {
            dtype,
            index_key: vec![index_key.into()],
            value_key: value_key.into(),
            size: vec![size],
            already_sorted: false,
        }
    }

    /// A `tf.io.RaggedFeature` reading `value_key`, split by `partitions` (outermost first).
    pub fn ragged(
        dtype: FeatureType,
        value_key: impl Into<String>,
        partitions: impl IntoIterator<Item = Partition>,
    ) -> Self {
        FeatureSpec::Ragged {
            dtype,
            value_key: Some(value_key.into()),
            partitions: partitions.into_iter().collect(),
        }
    }

    /// The value type.
    pub fn dtype(&self) -> FeatureType {
        match self {
            FeatureSpec::FixedLen { dtype, .. }
            | FeatureSpec::VarLen { dtype }
            | FeatureSpec::FixedLenSequence { dtype, .. }
            | FeatureSpec::Sparse { dtype, .. }
            | FeatureSpec::Ragged { dtype, .. } => *dtype,
        }
    }

    /// The name of the kind, as written.
    fn kind_name(&self) -> &'static str {
        match self {
            FeatureSpec::FixedLen { .. } => "fixed_len",
            FeatureSpec::VarLen { .. } => "var_len",
            FeatureSpec::FixedLenSequence { .. } => "fixed_len_sequence",
            FeatureSpec::Sparse { .. } => "sparse",
            FeatureSpec::Ragged { .. } => "ragged",
        }
    }
}

/// Parses serialized `tf.train.Example`s (`tf.io.parse_example`), replacing the `input` value
/// by one value per feature. On single records it gives unbatched values; after `batch` it
/// parses the whole batch at once (faster), giving batched values (VarLen features become
/// ragged). Byte values are slices of the record (no copy). Errors are worded as TensorFlow
/// words them (`Feature: label (data type: int64) is required but could not be found.`) and
/// carry the element's id and provenance.
///
/// A feature is a table: `dtype` (`"int64"`, `"float"` or `"float32"`, `"string"` or
/// `"bytes"`), `kind` (`"fixed_len"`, the default, `"var_len"`, `"fixed_len_sequence"`,
/// `"sparse"` or `"ragged"`), `shape` (`fixed_len` only: the dense shape, default `[]`, a
/// scalar; the feature must hold exactly that many values) and `default` (`fixed_len` only:
/// used when the feature is absent, one value broadcast or one per element of `shape`; without
/// it the feature is required). Names may contain `/` (quote them:
/// `features."image/encoded" = {...}`).
///
/// The other kinds follow `tf.io` (see [`FeatureSpec`]): `fixed_len_sequence` (`shape` of one
/// row, `allow_missing = true` as TensorFlow requires here, `default`: one padding value) gives
/// `[n, ...shape]`, batched `[records, longest, ...shape]`; `sparse` (`index_key`, one key or a
/// list, `value_key`, `size`, one or a list, `already_sorted`) gives `<name>.indices`,
/// `<name>.values` and `<name>.dense_shape`; `ragged` (`value_key`, default the name,
/// `partitions`, outermost first, each `{ row_lengths = "key" }`, `{ row_splits = "key" }`,
/// `{ row_starts = "key" }`, `{ row_limits = "key" }` or `{ uniform_row_length = n }`) gives a
/// dense value (ragged rank 0), a ragged one (rank 1) or `<name>.flat_values` and
/// `<name>.row_splits.<k>` (rank 2 or more; batching adds one).
///
/// ```toml
/// [[stage]]
/// kind = "parse_example"
/// features.image = { dtype = "string" }
/// features.label = { dtype = "int64", default = -1 }
/// features.bbox = { dtype = "float", shape = [4] }
/// features.tags = { dtype = "string", kind = "var_len" }
/// features.pairs = { dtype = "int64", kind = "fixed_len_sequence", shape = [2], allow_missing = true }
/// features.weights = { dtype = "float", kind = "sparse", index_key = "ids", value_key = "w", size = 1000 }
/// features.words = { dtype = "string", kind = "ragged", value_key = "tokens", partitions = [{ row_lengths = "sentence_lengths" }] }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ParseExampleSpec {
    /// Features to parse, by name (a table of features). Others in the record are
    /// ignored.
    pub features: BTreeMap<String, FeatureSpec>,
    /// The value holding the serialized record(s). Default `record`.
    #[serde(default = "record_name")]
    pub input: String,
}

fn record_name() -> String {
    RECORD.to_string()
}

impl ParseExampleSpec {
    /// A spec for `features`, reading the `record` value.
    pub fn new(features: impl IntoIterator<Item = (impl Into<String>, FeatureSpec)>) -> Self {
        ParseExampleSpec {
            features: features.into_iter().map(|(k, v)| (k.into(), v)).collect(),
            input: record_name(),
        }
    }

    /// Parses one serialized Example into its feature values (FixedLen features as tensors
    /// of their shape, VarLen ones as vectors), in the order of the feature names. `index`
    /// is the record's position in its batch (TensorFlow's `Index:` in messages). A feature
    /// whose value is ragged is an error here: use [`parse_one_values`](Self::parse_one_values).
    pub fn parse_one(&self, record: &Bytes, index: usize) -> Result<Vec<(String, Tensor)>> {
        self.parse_one_values(record, index)?
            .into_iter()
            .map(|(k, v)| match v {
                Value::Dense(t) => Ok((k, t)),
                Value::Ragged(_) => Err(Error::invalid(format!(
                    "parse_example: `{k}` is ragged; parse_one gives dense tensors only (use parse_one_values)"
                ))),
            })
            .collect()
    }

    /// Parses one serialized Example into its outputs (`tf.io.parse_single_example`), in
    /// the order of the feature names (a feature with several outputs gives them in order).
    pub fn parse_one_values(&self, record: &Bytes, index: usize) -> Result<Vec<(String, Value)>> {
        self.parse(std::slice::from_ref(record), Some(index))
    }

    /// Parses a batch of serialized Examples, as `tf.io.parse_example` parses a 1-D tensor:
    /// the outputs in the order of the feature names. FixedLen features are dense
    /// `[records, ...shape]`; VarLen features are ragged (values and row splits), or, for an
    /// empty batch, dense `[0, 0]`. Errors name the first bad record's position.
    pub fn parse_batch(&self, records: &[Bytes]) -> Result<Vec<(String, Value)>> {
        self.parse(records, None)
    }

    /// `single`: one record alone, at this position of its batch.
    fn parse(&self, records: &[Bytes], single: Option<usize>) -> Result<Vec<(String, Value)>> {
        let raw = composite::raw_features(self.features.iter().map(|(k, s)| (k.as_str(), s)))
            .map_err(|e| Error::invalid(format!("parse_example: {e}")))?;
        let mut columns = Columns::new(raw.clone(), records.len(), single.is_some());
        for (i, record) in records.iter().enumerate() {
            columns.push(record, single.unwrap_or(i))?;
        }
        let (columns, rows) = columns.into_raw();
        let raws = composite::Raws::new(&raw, columns, rows, single);
        let mut out = Vec::with_capacity(self.features.len());
        for (name, spec) in &self.features {
            raws.build(name, spec, &mut out)?;
        }
        Ok(out)
    }
}

/// Checks the parameters of one feature that do not fit in its entry's type: a
/// fixed_len_sequence's row shape and padding, a sparse feature's keys and size, a ragged
/// one's uniform row lengths. `stage` names the stage in messages; `at` the feature's path.
pub(crate) fn check_feature(
    stage: &str,
    name: &str,
    spec: &FeatureSpec,
    at: impl Fn(&str) -> Vec<Key>,
) -> std::result::Result<(), Invalid> {
    match spec {
        FeatureSpec::FixedLenSequence {
            dtype,
            shape,
            default,
            ..
        } => {
            if shape.contains(&0) {
                return Err(Invalid::new(
                    at("shape"),
                    format!(
                        "{stage}: feature `{name}`: a fixed_len_sequence row shape has no 0 dimension"
                    ),
                ));
            }
            if let Some(d) = default
                && !fits(*dtype, d)
            {
                return Err(Invalid::new(
                    at("default"),
                    format!(
                        "{stage}: feature `{name}` is {}: its default {d:?} does not fit",
                        dtype.tf_name()
                    ),
                ));
            }
        }
        FeatureSpec::Sparse {
            index_key,
            value_key,
            size,
            ..
        } => {
            if index_key.is_empty() {
                return Err(Invalid::new(
                    at("index_key"),
                    format!("{stage}: sparse feature `{name}` needs at least one index key"),
                ));
            }
            if size.len() != index_key.len() {
                return Err(Invalid::new(
                    at("size"),
                    format!(
                        "{stage}: sparse feature `{name}` has {} index keys but {} sizes",
                        index_key.len(),
                        size.len()
                    ),
                ));
            }
            if value_key.is_empty() || index_key.iter().any(String::is_empty) {
                return Err(Invalid::new(
                    at("value_key"),
                    format!("{stage}: sparse feature `{name}`: keys must not be empty"),
                ));
            }
        }
        FeatureSpec::Ragged { partitions, .. } => {
            if partitions.contains(&Partition::UniformRowLength(0)) {
                return Err(Invalid::new(
                    at("partitions"),
                    format!(
                        "{stage}: ragged feature `{name}`: uniform_row_length must be at least 1"
                    ),
                ));
            }
        }
        FeatureSpec::FixedLen { .. } | FeatureSpec::VarLen { .. } => {}
    }
    Ok(())
}

/// Whether a default (or padding) value fits a feature of type `dtype`.
fn fits(dtype: FeatureType, v: &PadValue) -> bool {
    matches!(
        (dtype, v),
        (FeatureType::Int64, PadValue::Int(_))
            | (FeatureType::Float, PadValue::Int(_) | PadValue::Float(_))
            | (FeatureType::String, PadValue::Bytes(_))
    )
}

/// Checks that no two features give outputs of one name.
pub(crate) fn check_output_names<'a>(
    stage: &str,
    features: impl IntoIterator<Item = (&'a str, &'a FeatureSpec, Vec<Key>)>,
) -> std::result::Result<(), Invalid> {
    let mut seen: BTreeMap<String, &str> = BTreeMap::new();
    for (name, spec, at) in features {
        let mut names = composite::output_names(name, spec);
        if matches!(spec, FeatureSpec::FixedLenSequence { .. }) && stage == "parse_sequence_example"
        {
            names.push(format!("{name}.lengths"));
        }
        for out in names {
            if let Some(other) = seen.insert(out.clone(), name)
                && other != name
            {
                return Err(Invalid::new(
                    at,
                    format!("{stage}: features `{other}` and `{name}` both output `{out}`"),
                ));
            }
        }
    }
    Ok(())
}

fn shape_str(shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("[{}]", dims.join(","))
}

fn default_tensor(
    key: &str,
    dtype: FeatureType,
    shape: &[usize],
    default: &[PadValue],
) -> Result<Tensor> {
    let n: usize = shape.iter().product();
    let dt = dtype.dtype();
    let parts: Vec<TensorData> = default
        .iter()
        .map(|v| v.to_data(dt))
        .collect::<Result<_>>()
        .map_err(|e| Error::invalid(format!("{key}: default value: {e}")))?;
    let data = match parts.len() {
        1 => TensorData::repeat_scalar(&parts[0], n),
        // No values for no values (`concat` of nothing would not know the type).
        0 if n == 0 => match dtype {
            FeatureType::Int64 => TensorData::I64(Vec::new().into()),
            FeatureType::Float => TensorData::F32(Vec::new().into()),
            FeatureType::String => TensorData::Bytes(Vec::new().into()),
        },
        m if m == n => TensorData::concat(&parts.iter().collect::<Vec<_>>())?,
        m => {
            return Err(Error::invalid(format!(
                "{key}: default has {m} values; shape {} needs 1 or {n}",
                shape_str(shape)
            )));
        }
    };
    Ok(Tensor::new(shape, data)?)
}

impl Spec for ParseExampleSpec {
    const KIND: &'static str = "parse_example";
    const SUMMARY: &'static str = "`tf.train.Example` records to tensors";

    fn validate(&self) -> std::result::Result<(), Invalid> {
        if self.features.is_empty() {
            return Err(Invalid::at(
                "features",
                "parse_example: `features` needs at least one feature",
            ));
        }
        if self.input.is_empty() {
            return Err(Invalid::at(
                "input",
                "parse_example: `input` must name a value",
            ));
        }
        for (name, f) in &self.features {
            let at = |key: &str| vec![Key::name("features"), Key::name(name), Key::name(key)];
            if let FeatureSpec::FixedLenSequence {
                allow_missing: false,
                ..
            } = f
            {
                return Err(Invalid::new(
                    at("allow_missing"),
                    format!(
                        "parse_example: feature `{name}`: Unsupported: FixedLenSequenceFeature requires allow_missing to be True."
                    ),
                ));
            }
            check_feature("parse_example", name, f, at)?;
            let FeatureSpec::FixedLen {
                dtype,
                shape,
                default: Some(default),
            } = f
            else {
                continue;
            };
            let n: usize = shape.iter().product();
            if default.len() != 1 && default.len() != n {
                return Err(Invalid::new(
                    at("default"),
                    format!(
                        "parse_example: feature `{name}` has shape {shape:?}: its default needs 1 or {n} values, got {}",
                        default.len()
                    ),
                ));
            }
            if let Some(bad) = default.iter().find(|v| !fits(*dtype, v)) {
                return Err(Invalid::new(
                    at("default"),
                    format!(
                        "parse_example: feature `{name}` is {}: its default {bad:?} does not fit",
                        dtype.dtype().tf_name()
                    ),
                ));
            }
        }
        check_output_names(
            "parse_example",
            self.features
                .iter()
                .map(|(k, s)| (k.as_str(), s, vec![Key::name("features"), Key::name(k)])),
        )?;
        composite::raw_features(self.features.iter().map(|(k, s)| (k.as_str(), s)))
            .map_err(|e| Invalid::at("features", format!("parse_example: {e}")))?;
        Ok(())
    }

    fn append(&self, input: &Dataset, _: &AppendContext<'_>) -> Result<Dataset> {
        Ok(input.parse_example(self.clone()))
    }
}

impl Stage for ParseExampleSpec {
    fn name(&self) -> &'static str {
        "parse_example"
    }

    fn elastic(&self) -> std::result::Result<(), std::borrow::Cow<'static, str>> {
        Ok(())
    }

    fn params(&self) -> Params {
        Params::of(self)
    }

    fn validate(&self) -> std::result::Result<(), Invalid> {
        Spec::validate(self)
    }

    fn build(&self, inputs: &[Input], ctx: &BuildContext) -> Result<BoxStream> {
        Ok(Box::new(ParseStream {
            upstream: crate::stages::single_input(inputs, "parse_example")?.open()?,
            spec: self.clone(),
            ctx: ctx.clone(),
        }))
    }

    fn build_from(
        &self,
        inputs: &[Input],
        ctx: &BuildContext,
        skip: u64,
    ) -> Result<(BoxStream, u64)> {
        // One output per input: skip inputs without doing this stage's work.
        crate::run::build_one_to_one(self, inputs, ctx, skip)
    }
}

struct ParseStream {
    upstream: BoxStream,
    spec: ParseExampleSpec,
    ctx: BuildContext,
}

impl ParseStream {
    /// The parsed values replacing the input value of `element`.
    fn parse(&self, element: &Element) -> Result<Vec<(String, Value)>> {
        let records = match element.tensor(&self.spec.input) {
            Some(t) if t.dtype() == DType::Bytes && t.rank() <= 1 => t,
            _ => {
                return Err(Error::data(format!(
                    "parse_example: value {:?} must be a scalar or a 1-D batch of serialized Examples",
                    self.spec.input
                )));
            }
        };
        let list = records.as_bytes_list().expect("checked dtype");
        if records.rank() == 0 {
            self.spec.parse_one_values(&list[0], 0)
        } else {
            self.spec.parse_batch(list)
        }
    }
}

impl ElementStream for ParseStream {
    fn next(&mut self) -> Option<Result<Element>> {
        loop {
            let element = match self.upstream.next()? {
                Ok(e) => e,
                Err(e) => return Some(Err(e)),
            };
            match self.parse(&element) {
                Ok(values) => {
                    let mut element = element;
                    element.remove(&self.spec.input);
                    for (k, v) in values {
                        element.insert(&k, v);
                    }
                    return Some(Ok(element));
                }
                Err(e) => {
                    if let Some(e) = self.ctx.on_element_error(&element, e) {
                        return Some(Err(e));
                    }
                }
            }
        }
    }
}
