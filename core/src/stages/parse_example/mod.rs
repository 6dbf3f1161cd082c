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

use std::any::Any;
use std::collections::BTreeMap;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::element::{Element, RECORD, Value};
use crate::error::{Error, Result};
use crate::stage::{BuildContext, Input, Stage};
use crate::stages::padded_batch::PadValue;
use crate::stream::{BoxStream, ElementStream};
use crate::tensor::{DType, Tensor, TensorData};

use columns::Columns;

/// The three value types a `tf.train.Feature` can hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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

/// How one feature is parsed (`tf.io.FixedLenFeature` / `tf.io.VarLenFeature`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum FeatureSpec {
    /// Exactly `shape.product()` values, as a dense tensor of `shape`. Missing: `default`
    /// (one value, broadcast, or the full count), or an error if there is none.
    FixedLen {
        /// Value type.
        dtype: FeatureType,
        /// Output shape (`[]` for a scalar).
        #[serde(default)]
        shape: Vec<usize>,
        /// Value(s) used when the feature is absent.
        #[serde(default)]
        default: Option<Vec<PadValue>>,
    },
    /// Any number of values, as a 1-D tensor (ragged once batched: values + row splits).
    /// Missing: no values.
    VarLen {
        /// Value type.
        dtype: FeatureType,
    },
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

/// Parses the serialized `tf.train.Example` in value `input` (default `record`) of each
/// element into one value per feature of `features`, replacing `input`. A scalar record
/// gives unbatched values; a batch of records (after `batch`) gives batched values, as
/// `tf.io.parse_example` does (VarLen features become ragged).
///
/// Byte values are slices of the record (no copy). Errors are worded as TensorFlow words
/// them, e.g. `Feature: label (data type: int64) is required but could not be found.`, and
/// carry the element's id and provenance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParseExampleSpec {
    /// Features to parse, by name. Others in the record are ignored.
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

impl Stage for ParseExampleSpec {
    fn name(&self) -> &'static str {
        "parse_example"
    }

    fn build(&self, inputs: &[Input], ctx: &BuildContext) -> Result<BoxStream> {
        for (key, spec) in &self.features {
            if let FeatureSpec::FixedLen {
                dtype,
                shape,
                default: Some(d),
            } = spec
            {
                default_tensor(key, *dtype, shape, d)?;
            }
        }
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
        crate::stage::build_one_to_one(self, inputs, ctx, skip)
    }

    fn as_any(&self) -> &dyn Any {
        self
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
                    if let Some(e) = self.ctx.on_error(self.ctx.element_error(&element, e)) {
                        return Some(Err(e));
                    }
                }
            }
        }
    }
}
