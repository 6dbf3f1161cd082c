//! The reference implementation: the original prost-based path, kept unchanged as the
//! oracle the fast path is tested (and benchmarked) against. Each record is decoded into an
//! `Example` message, each feature copied into its own tensor, and a batch stacked with
//! `batch_values` / `batch_ragged`.

use std::collections::BTreeMap;

use bytes::Bytes;
use sluice_proto::example::{Feature, feature::Kind};
use sluice_proto::{Example, TfMessage};

use super::columns::{missing, type_mismatch, wrong_count};
use super::{FeatureSpec, FeatureType, ParseExampleSpec, default_tensor};
use crate::element::{Value, batch_values};
use crate::error::{Error, Result};
use crate::tensor::{Shape, Tensor, TensorData};

impl ParseExampleSpec {
    /// [`parse_one`](Self::parse_one) as it was first written, on prost-decoded messages.
    /// For tests and benchmarks only.
    #[doc(hidden)]
    pub fn parse_one_reference(
        &self,
        record: &Bytes,
        index: usize,
    ) -> Result<Vec<(String, Tensor)>> {
        let example = Example::from_bytes(record).map_err(|e| {
            Error::data(format!(
                "Could not parse example input (index {index}): {e}"
            ))
        })?;
        let empty = BTreeMap::new();
        let features = example
            .features
            .as_ref()
            .map(|f| &f.feature)
            .unwrap_or(&empty);
        let mut out = Vec::with_capacity(self.features.len());
        for (key, spec) in &self.features {
            out.push((
                key.clone(),
                parse_feature(key, spec, features.get(key), index)?,
            ));
        }
        Ok(out)
    }

    /// [`parse_batch`](Self::parse_batch) as it was first written: each record parsed by
    /// [`parse_one_reference`](Self::parse_one_reference), then batched. For tests and
    /// benchmarks only.
    #[doc(hidden)]
    pub fn parse_batch_reference(&self, list: &[Bytes]) -> Result<Vec<(String, Value)>> {
        let rows: Vec<Vec<(String, Tensor)>> = list
            .iter()
            .enumerate()
            .map(|(i, r)| self.parse_one_reference(r, i))
            .collect::<Result<_>>()?;
        let mut out = Vec::with_capacity(self.features.len());
        for (j, (key, spec)) in self.features.iter().enumerate() {
            let values: Vec<Value> = rows.iter().map(|r| Value::Dense(r[j].1.clone())).collect();
            let refs: Vec<&Value> = values.iter().collect();
            let batched = if refs.is_empty() {
                // An empty batch: an empty tensor of the right type and inner shape.
                let inner = match spec {
                    FeatureSpec::FixedLen { shape, .. } => shape.clone(),
                    _ => vec![0],
                };
                let mut shape = Shape::from_slice(&[0]);
                shape.extend_from_slice(&inner);
                Value::Dense(Tensor::new(&shape, values_of(None, spec.dtype()))?)
            } else {
                match spec {
                    // VarLen rows always batch as ragged, even when lengths happen to agree.
                    FeatureSpec::FixedLen { .. } => batch_values(&refs)?,
                    _ => crate::element::batch_ragged(&refs)?,
                }
            };
            out.push((key.clone(), batched));
        }
        Ok(out)
    }
}

fn kind_type(kind: &Kind) -> FeatureType {
    match kind {
        Kind::BytesList(_) => FeatureType::String,
        Kind::FloatList(_) => FeatureType::Float,
        Kind::Int64List(_) => FeatureType::Int64,
    }
}

fn values_of(kind: Option<&Kind>, dtype: FeatureType) -> TensorData {
    match (kind, dtype) {
        (Some(Kind::BytesList(l)), _) => TensorData::Bytes(l.value.clone().into()),
        (Some(Kind::FloatList(l)), _) => TensorData::F32(l.value.clone().into()),
        (Some(Kind::Int64List(l)), _) => TensorData::I64(l.value.clone().into()),
        (None, FeatureType::String) => TensorData::Bytes(Vec::new().into()),
        (None, FeatureType::Float) => TensorData::F32(Vec::new().into()),
        (None, FeatureType::Int64) => TensorData::I64(Vec::new().into()),
    }
}

fn parse_feature(
    key: &str,
    spec: &FeatureSpec,
    feature: Option<&Feature>,
    index: usize,
) -> Result<Tensor> {
    let want = spec.dtype();
    // A feature whose kind is unset counts as present and empty (as in TensorFlow).
    let kind = feature.and_then(|f| f.kind.as_ref());
    if let Some(k) = kind {
        let got = kind_type(k);
        if got != want {
            let fixed = matches!(spec, FeatureSpec::FixedLen { .. });
            return Err(type_mismatch(key, fixed, index, want, got));
        }
    }
    match spec {
        FeatureSpec::VarLen { dtype } => Ok(Tensor::vector(values_of(kind, *dtype))),
        FeatureSpec::FixedLenSequence { .. }
        | FeatureSpec::Sparse { .. }
        | FeatureSpec::Ragged { .. } => Err(Error::invalid(format!(
            "{key}: the reference path parses fixed_len and var_len features, not {}",
            spec.kind_name()
        ))),
        FeatureSpec::FixedLen {
            dtype,
            shape,
            default,
        } => {
            let n: usize = shape.iter().product();
            if feature.is_none() {
                let Some(default) = default else {
                    return Err(missing(key, want));
                };
                return default_tensor(key, *dtype, shape, default);
            }
            let values = values_of(kind, *dtype);
            if values.len() != n {
                return Err(wrong_count(key, index, want, values.len(), shape));
            }
            Ok(Tensor::new(shape, values)?)
        }
    }
}
