//! `parse_example`: `tf.train.Example` records → dense and ragged tensors, as `tf.io` does.
//!
//! Parsing is TensorFlow's "fast example parsing": no `Example` message is built. A
//! wire-format scanner (`fast.rs`) walks each record and appends the requested features'
//! values straight to one column per feature for the whole batch (`columns.rs`, which also
//! checks counts and types with TensorFlow's wording). The original prost-based path
//! (`reference.rs`) is kept as the oracle the fast one is tested and benchmarked against.

mod columns;
mod fast;
mod reference;

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

/// How one feature is parsed (`tf.io.FixedLenFeature` / `tf.io.VarLenFeature`). Written
/// as a [`FeatureEntry`]: `label = { dtype = "int64" }`, `tags = { dtype = "string", kind =
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
}

impl JsonSchema for FeatureSpec {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        FeatureEntry::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        FeatureEntry::json_schema(generator)
    }
}

/// Whether a feature is dense with a fixed number of values or has any number of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FeatureKind {
    /// `tf.io.FixedLenFeature` (the default).
    #[default]
    FixedLen,
    /// `tf.io.VarLenFeature`.
    VarLen,
}

/// One feature as written: `label = { dtype = "int64" }`,
/// `bbox = { dtype = "float", shape = [4] }`, `tags = { dtype = "string", kind = "var_len" }`,
/// `weight = { dtype = "float", default = 1.0 }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
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
        deserialize_with = "crate::stages::padded_batch::one_or_many_pad_values",
        skip_serializing_if = "Option::is_none"
    )]
    pub default: Option<Vec<PadValue>>,
}

impl TryFrom<FeatureEntry> for FeatureSpec {
    type Error = String;

    fn try_from(e: FeatureEntry) -> std::result::Result<Self, String> {
        Ok(match e.kind {
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
                dtype,
                kind: FeatureKind::FixedLen,
                shape,
                default,
            },
            FeatureSpec::VarLen { dtype } => FeatureEntry {
                dtype,
                kind: FeatureKind::VarLen,
                shape: Vec::new(),
                default: None,
            },
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

    fn dtype(&self) -> FeatureType {
        match self {
            FeatureSpec::FixedLen { dtype, .. } | FeatureSpec::VarLen { dtype } => *dtype,
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
/// `"bytes"`), `kind` (`"fixed_len"`, the default, or `"var_len"`), `shape` (`fixed_len` only:
/// the dense shape, default `[]`, a scalar; the feature must hold exactly that many values) and
/// `default` (`fixed_len` only: used when the feature is absent, one value broadcast or one per
/// element of `shape`; without it the feature is required). Names may contain `/` (quote them:
/// `features."image/encoded" = {...}`).
///
/// ```toml
/// [[stage]]
/// kind = "parse_example"
/// features.image = { dtype = "string" }
/// features.label = { dtype = "int64", default = -1 }
/// features.bbox = { dtype = "float", shape = [4] }
/// features.tags = { dtype = "string", kind = "var_len" }
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
    /// is the record's position in its batch (TensorFlow's `Index:` in messages).
    pub fn parse_one(&self, record: &Bytes, index: usize) -> Result<Vec<(String, Tensor)>> {
        let mut columns = Columns::new(self, 1);
        columns.push(record, index)?;
        columns.into_tensors()
    }

    /// Parses a batch of serialized Examples, as `tf.io.parse_example` parses a 1-D tensor:
    /// one value per feature, in the order of the feature names. FixedLen features are
    /// dense `[records, ...shape]`; VarLen features are ragged (values and row splits), or,
    /// for an empty batch, dense `[0, 0]`. Errors name the first bad record's position.
    pub fn parse_batch(&self, records: &[Bytes]) -> Result<Vec<(String, Value)>> {
        let mut columns = Columns::new(self, records.len());
        for (i, record) in records.iter().enumerate() {
            columns.push(record, i)?;
        }
        columns.into_batch()
    }
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
            let fits = |v: &PadValue| {
                matches!(
                    (dtype, v),
                    (FeatureType::Int64, PadValue::Int(_))
                        | (FeatureType::Float, PadValue::Int(_) | PadValue::Float(_))
                        | (FeatureType::String, PadValue::Bytes(_))
                )
            };
            if let Some(bad) = default.iter().find(|v| !fits(v)) {
                return Err(Invalid::new(
                    at("default"),
                    format!(
                        "parse_example: feature `{name}` is {}: its default {bad:?} does not fit",
                        dtype.dtype().tf_name()
                    ),
                ));
            }
        }
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
            let values = self.spec.parse_one(&list[0], 0)?;
            Ok(values
                .into_iter()
                .map(|(k, t)| (k, Value::Dense(t)))
                .collect())
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
