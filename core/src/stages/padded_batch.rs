//! `padded_batch`: batch elements whose shapes differ by padding them to a common shape.

use std::collections::BTreeMap;

use std::fmt;

use bytes::Bytes;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::dataset::Dataset;
use crate::element::{Element, Value};
use crate::error::{Error, Result};
use crate::invalid::{Invalid, Key};
use crate::params::Params;
use crate::registry::{AppendContext, Batching, Spec};
use crate::run::{BuildContext, Input};
use crate::stage::Stage;
use crate::stages::batch::{BatchStream, Groups, common_names};
use crate::stream::BoxStream;
use crate::tensor::{DType, Tensor, TensorData};

/// A padding value: a number (for numeric dtypes) or a string (for byte strings).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum PadValue {
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A byte string.
    Bytes(String),
}

impl PadValue {
    pub(crate) fn to_data(&self, dtype: DType) -> Result<TensorData> {
        Ok(match (dtype, self) {
            (DType::U8, PadValue::Int(v)) => TensorData::U8(Bytes::from(vec![*v as u8])),
            (DType::I32, PadValue::Int(v)) => TensorData::I32(vec![*v as i32].into()),
            (DType::I64, PadValue::Int(v)) => TensorData::I64(vec![*v].into()),
            (DType::F32, PadValue::Int(v)) => TensorData::F32(vec![*v as f32].into()),
            (DType::F64, PadValue::Int(v)) => TensorData::F64(vec![*v as f64].into()),
            (DType::F32, PadValue::Float(v)) => TensorData::F32(vec![*v as f32].into()),
            (DType::F64, PadValue::Float(v)) => TensorData::F64(vec![*v].into()),
            (DType::Bytes, PadValue::Bytes(s)) => {
                TensorData::Bytes(vec![Bytes::from(s.clone().into_bytes())].into())
            }
            (d, v) => {
                return Err(Error::invalid(format!(
                    "padding value {v:?} does not fit {d}"
                )));
            }
        })
    }

    fn zero(dtype: DType) -> PadValue {
        match dtype {
            DType::Bytes => PadValue::Bytes(String::new()),
            _ => PadValue::Int(0),
        }
    }
}

/// Batches elements of different shapes by padding each value to the largest shape in the
/// batch, or to `padded_shapes` where given (a value larger than a fixed size is an error),
/// with `padding_values` (default 0, or `""` for strings).
///
/// ```toml
/// [[stage]]
/// kind = "padded_batch"
/// batch_size = 32
/// padded_shapes = { tokens = [128], mask = ["max", 8] }
/// padding_values = { tokens = -1 }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PaddedBatchSpec {
    /// Elements per batch (≥ 1).
    #[schemars(range(min = 1))]
    pub batch_size: usize,
    /// Drop a last, smaller batch (default false).
    #[serde(default)]
    pub drop_remainder: bool,
    /// Padded shape per value name: sizes or `"max"` (the batch's largest) per dimension,
    /// e.g. `tokens = [128]`, `mask = ["max", 8]`; `None` (`"max"`) in a dimension means
    /// the batch maximum. Values not listed pad to the batch's largest shape.
    #[serde(default, with = "pad_dims")]
    #[schemars(with = "BTreeMap<String, Vec<PadDim>>")]
    pub padded_shapes: BTreeMap<String, Vec<Option<usize>>>,
    /// Padding value per value name (a number or a string); default 0 or `""`.
    #[serde(default)]
    pub padding_values: BTreeMap<String, PadValue>,
}

/// One padded dimension as written: a size, or `"max"` (the largest in the batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PadDim {
    /// Exactly this size.
    Fixed(usize),
    /// The batch's largest size in this dimension (`"max"`).
    Max,
}

impl From<PadDim> for Option<usize> {
    fn from(d: PadDim) -> Self {
        match d {
            PadDim::Fixed(n) => Some(n),
            PadDim::Max => None,
        }
    }
}

impl From<Option<usize>> for PadDim {
    fn from(d: Option<usize>) -> Self {
        d.map_or(PadDim::Max, PadDim::Fixed)
    }
}

impl Serialize for PadDim {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            PadDim::Fixed(n) => s.serialize_u64(*n as u64),
            PadDim::Max => s.serialize_str("max"),
        }
    }
}

impl<'de> Deserialize<'de> for PadDim {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = PadDim;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a dimension size or \"max\"")
            }

            fn visit_u64<E: serde::de::Error>(self, v: u64) -> std::result::Result<PadDim, E> {
                usize::try_from(v)
                    .map(PadDim::Fixed)
                    .map_err(|_| E::custom(format!("dimension {v} is too large")))
            }

            fn visit_i64<E: serde::de::Error>(self, v: i64) -> std::result::Result<PadDim, E> {
                u64::try_from(v)
                    .map_err(|_| {
                        E::custom(format!(
                            "a dimension cannot be negative, got {v} (use \"max\")"
                        ))
                    })
                    .and_then(|v| self.visit_u64(v))
            }

            fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<PadDim, E> {
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

impl JsonSchema for PadDim {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "PadDim".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A dimension size, or \"max\" (the batch's largest).",
            "oneOf": [{ "type": "integer", "minimum": 1 }, { "const": "max" }]
        })
    }
}

/// `padded_shapes` as written: sizes or `"max"` per dimension (also the grouping stages').
pub(crate) mod pad_dims {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::PadDim;

    pub(crate) fn serialize<S: Serializer>(
        shapes: &BTreeMap<String, Vec<Option<usize>>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let written: BTreeMap<&String, Vec<PadDim>> = shapes
            .iter()
            .map(|(k, dims)| (k, dims.iter().map(|d| PadDim::from(*d)).collect()))
            .collect();
        written.serialize(s)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<String, Vec<Option<usize>>>, D::Error> {
        let written = BTreeMap::<String, Vec<PadDim>>::deserialize(d)?;
        Ok(written
            .into_iter()
            .map(|(k, dims)| (k, dims.into_iter().map(Option::from).collect()))
            .collect())
    }
}

/// One value or a list of values (numbers or strings), as a feature's `default` is written.
pub(crate) fn one_or_many_pad_values<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<Vec<PadValue>>, D::Error> {
    struct Visitor;
    impl<'de> serde::de::Visitor<'de> for Visitor {
        type Value = Vec<PadValue>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a number, a string, or a list of them")
        }

        fn visit_i64<E: serde::de::Error>(self, v: i64) -> std::result::Result<Vec<PadValue>, E> {
            Ok(vec![PadValue::Int(v)])
        }

        fn visit_u64<E: serde::de::Error>(self, v: u64) -> std::result::Result<Vec<PadValue>, E> {
            i64::try_from(v)
                .map(|v| vec![PadValue::Int(v)])
                .map_err(|_| E::custom(format!("{v} does not fit an int64")))
        }

        fn visit_f64<E: serde::de::Error>(self, v: f64) -> std::result::Result<Vec<PadValue>, E> {
            Ok(vec![PadValue::Float(v)])
        }

        fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<Vec<PadValue>, E> {
            Ok(vec![PadValue::Bytes(v.to_string())])
        }

        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> std::result::Result<Vec<PadValue>, A::Error> {
            let mut out = Vec::new();
            while let Some(v) = seq.next_element::<PadValue>()? {
                out.push(v);
            }
            Ok(out)
        }
    }
    d.deserialize_any(Visitor).map(Some)
}

impl Spec for PaddedBatchSpec {
    const KIND: &'static str = "padded_batch";
    const SUMMARY: &'static str = "batch, padding values to a common shape";

    fn validate(&self) -> std::result::Result<(), Invalid> {
        if self.batch_size == 0 {
            return Err(Invalid::at(
                "batch_size",
                "padded_batch: `batch_size` must be at least 1",
            ));
        }
        check_padded_shapes(Self::KIND, &self.padded_shapes)
    }

    fn append(&self, input: &Dataset, _: &AppendContext<'_>) -> Result<Dataset> {
        Ok(input.padded_batch(self.clone()))
    }

    fn batching(&self) -> Batching {
        Batching::Batches
    }
}

/// Checks `padded_shapes` as `kind` wrote it: no dimension of 0.
pub(crate) fn check_padded_shapes(
    kind: &str,
    shapes: &BTreeMap<String, Vec<Option<usize>>>,
) -> std::result::Result<(), Invalid> {
    for (name, dims) in shapes {
        if let Some(i) = dims.iter().position(|d| *d == Some(0)) {
            return Err(Invalid::new(
                vec![Key::name("padded_shapes"), Key::name(name), Key::Index(i)],
                format!("{kind}: dimension {i} of `{name}` must be at least 1 or \"max\""),
            ));
        }
    }
    Ok(())
}

impl PaddedBatchSpec {
    /// Padded batches of `batch_size` with default padding.
    pub fn new(batch_size: usize) -> Self {
        PaddedBatchSpec {
            batch_size,
            drop_remainder: false,
            padded_shapes: BTreeMap::new(),
            padding_values: BTreeMap::new(),
        }
    }
}

impl Stage for PaddedBatchSpec {
    fn name(&self) -> &'static str {
        "padded_batch"
    }

    fn params(&self) -> Params {
        Params::of(self)
    }

    fn validate(&self) -> std::result::Result<(), Invalid> {
        Spec::validate(self)
    }

    fn build(&self, inputs: &[Input], ctx: &BuildContext) -> Result<BoxStream> {
        let spec = self.clone();
        Ok(Box::new(BatchStream {
            groups: Groups {
                upstream: crate::stages::single_input(inputs, "padded_batch")?.open()?,
                size: self.batch_size,
                drop_remainder: self.drop_remainder,
                ctx: ctx.clone(),
            },
            combine: Box::new(move |items| pad_and_stack(items, &spec)),
            ctx: ctx.clone(),
        }))
    }

    fn build_from(
        &self,
        inputs: &[Input],
        ctx: &BuildContext,
        skip: u64,
    ) -> Result<(BoxStream, u64)> {
        crate::stages::batch::batch_from(
            self,
            self.batch_size,
            self.drop_remainder,
            inputs,
            ctx,
            skip,
        )
    }

    fn elastic(&self) -> std::result::Result<(), std::borrow::Cow<'static, str>> {
        Ok(())
    }
}

/// One batch of `items`, each value padded as `spec` says (its `padded_shapes` and
/// `padding_values`; its batch size is not looked at).
pub(crate) fn pad_and_stack(items: &[Element], spec: &PaddedBatchSpec) -> Result<Element> {
    let names = common_names(items)?;
    let mut out = Element::new(items[0].id());
    out.set_provenance(items[0].provenance().cloned());
    out.set_units(crate::stages::batch::units_of(items));
    for name in names {
        let tensors: Vec<&Tensor> = items
            .iter()
            .map(|e| {
                e.tensor(&name).ok_or_else(|| {
                    Error::data_of(&name, format!("{name}: cannot pad a ragged value"))
                })
            })
            .collect::<Result<_>>()?;
        let rank = tensors[0].rank();
        if tensors.iter().any(|t| t.rank() != rank) {
            return Err(Error::data(format!(
                "{name}: values of different ranks cannot be padded"
            )));
        }
        let mut target: Vec<usize> = (0..rank)
            .map(|d| tensors.iter().map(|t| t.shape()[d]).max().unwrap_or(0))
            .collect();
        if let Some(fixed) = spec.padded_shapes.get(&*name) {
            if fixed.len() != rank {
                return Err(Error::invalid(format!(
                    "{name}: padded shape {fixed:?} has rank {}, values have rank {rank}",
                    fixed.len()
                )));
            }
            for (d, f) in fixed.iter().enumerate() {
                if let Some(f) = f {
                    if *f < target[d] {
                        return Err(Error::data(format!(
                            "{name}: a value of size {} in dimension {d} does not fit the padded shape {fixed:?}",
                            target[d]
                        )));
                    }
                    target[d] = *f;
                }
            }
        }
        let dtype = tensors[0].dtype();
        let fill = spec
            .padding_values
            .get(&*name)
            .cloned()
            .unwrap_or_else(|| PadValue::zero(dtype))
            .to_data(dtype)?;
        let padded: Vec<Tensor> = tensors
            .iter()
            .map(|t| t.pad_to(&target, &fill))
            .collect::<Result<_, _>>()?;
        let refs: Vec<&Tensor> = padded.iter().collect();
        out.insert(&name, Value::Dense(Tensor::stack(&refs)?));
    }
    Ok(out)
}
