//! `padded_batch`: batch elements whose shapes differ by padding them to a common shape.

use std::any::Any;
use std::collections::BTreeMap;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::element::{Element, Value};
use crate::error::{Error, Result};
use crate::stage::{BuildContext, Input, Stage};
use crate::stages::batch::{BatchStream, Groups, common_names};
use crate::stream::BoxStream;
use crate::tensor::{DType, Tensor, TensorData};

/// A padding value: a number (for numeric dtypes) or a string (for byte strings).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

/// Batches `batch_size` elements, padding each value to the largest shape in the batch (or
/// to `padded_shapes` where given) with `padding_values` (default 0, or `""`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaddedBatchSpec {
    /// Elements per batch (≥ 1).
    pub batch_size: usize,
    /// Drop a last, smaller batch (default false).
    #[serde(default)]
    pub drop_remainder: bool,
    /// Fixed padded shapes per value name; `None` in a dimension means the batch maximum.
    #[serde(default)]
    pub padded_shapes: BTreeMap<String, Vec<Option<usize>>>,
    /// Padding value per value name.
    #[serde(default)]
    pub padding_values: BTreeMap<String, PadValue>,
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

    fn build(&self, inputs: &[Input], ctx: &BuildContext) -> Result<BoxStream> {
        if self.batch_size == 0 {
            return Err(Error::invalid(
                "padded_batch: batch_size must be at least 1",
            ));
        }
        let spec = self.clone();
        Ok(Box::new(BatchStream {
            groups: Groups {
                upstream: crate::stages::single_input(inputs, "padded_batch")?.open()?,
                size: self.batch_size,
                drop_remainder: self.drop_remainder,
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
        if ctx.error_policy() != crate::options::ErrorPolicy::Fail || self.batch_size == 0 {
            let mut stream = self.build(inputs, ctx)?;
            let skipped = crate::stage::discard(&mut stream, skip)?;
            return Ok((stream, skipped));
        }
        // `skip` batches are `skip × batch_size` inputs, not assembled.
        let size = self.batch_size as u64;
        let input = crate::stages::single_input(inputs, "padded_batch")?
            .skipping(skip.saturating_mul(size));
        let stream = self.build(std::slice::from_ref(&input), ctx)?;
        let k = input.skipped();
        // Short of the mark only at the end: a last partial batch was one more output.
        let skipped = if self.drop_remainder {
            k / size
        } else {
            k.div_ceil(size)
        };
        Ok((stream, skipped.min(skip)))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn pad_and_stack(items: &[Element], spec: &PaddedBatchSpec) -> Result<Element> {
    let names = common_names(items)?;
    let mut out = Element::new(items[0].id());
    out.set_provenance(items[0].provenance().cloned());
    for name in names {
        let tensors: Vec<&Tensor> = items
            .iter()
            .map(|e| {
                e.tensor(&name)
                    .ok_or_else(|| Error::data(format!("{name}: cannot pad a ragged value")))
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
