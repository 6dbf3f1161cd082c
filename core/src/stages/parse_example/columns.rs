//! Batch columns: each requested feature's values for a whole batch in one vector, filled
//! record by record by the [scanner](super::fast), checked as TensorFlow checks them (with
//! its error wording) and turned into dense or ragged values.

use bytes::Bytes;
use sluice_proto::{Example, TfMessage};

use super::fast::{self, Malformed, Seen};
use super::{FeatureSpec, FeatureType, ParseExampleSpec, default_tensor, shape_str};
use crate::element::{Ragged, Value};
use crate::error::{Error, Result};
use crate::tensor::{DType, Shape, Tensor, TensorData};

/// One feature's values for a batch, of the feature's type.
#[derive(Debug)]
pub(super) enum Column {
    /// Byte strings (slices of the records).
    Bytes(Vec<Bytes>),
    /// `f32` values.
    Float(Vec<f32>),
    /// `i64` values.
    Int64(Vec<i64>),
}

impl Column {
    fn with_capacity(dtype: FeatureType, n: usize) -> Column {
        match dtype {
            FeatureType::String => Column::Bytes(Vec::with_capacity(n)),
            FeatureType::Float => Column::Float(Vec::with_capacity(n)),
            FeatureType::Int64 => Column::Int64(Vec::with_capacity(n)),
        }
    }

    /// Number of values.
    pub(super) fn len(&self) -> usize {
        match self {
            Column::Bytes(v) => v.len(),
            Column::Float(v) => v.len(),
            Column::Int64(v) => v.len(),
        }
    }

    /// Keeps the first `n` values.
    pub(super) fn truncate(&mut self, n: usize) {
        match self {
            Column::Bytes(v) => v.truncate(n),
            Column::Float(v) => v.truncate(n),
            Column::Int64(v) => v.truncate(n),
        }
    }

    /// Appends `data`, which must have this column's type.
    fn extend(&mut self, data: &TensorData) -> Result<()> {
        match (self, data) {
            (Column::Bytes(v), TensorData::Bytes(d)) => v.extend_from_slice(d),
            (Column::Float(v), TensorData::F32(d)) => v.extend_from_slice(d),
            (Column::Int64(v), TensorData::I64(d)) => v.extend_from_slice(d),
            (column, data) => {
                return Err(Error::invalid(format!(
                    "cannot combine {} values with {} values",
                    column.dtype(),
                    data.dtype()
                )));
            }
        }
        Ok(())
    }

    fn dtype(&self) -> DType {
        match self {
            Column::Bytes(_) => DType::Bytes,
            Column::Float(_) => DType::F32,
            Column::Int64(_) => DType::I64,
        }
    }

    fn into_data(self) -> TensorData {
        match self {
            Column::Bytes(v) => TensorData::Bytes(v.into()),
            Column::Float(v) => TensorData::F32(v.into()),
            Column::Int64(v) => TensorData::I64(v.into()),
        }
    }
}

/// The requested features of a batch of records, parsed into one column per feature.
pub(super) struct Columns<'s> {
    /// Names and specs, sorted by name.
    features: Vec<(&'s str, &'s FeatureSpec)>,
    /// The names as bytes (what the scanner looks keys up in).
    keys: Vec<&'s [u8]>,
    columns: Vec<Column>,
    /// Row splits of VarLen features (`[0]` to start with); empty for FixedLen ones.
    row_splits: Vec<Vec<i64>>,
    /// Default values of FixedLen features, made when first needed.
    defaults: Vec<Option<TensorData>>,
    seen: Vec<Seen>,
    starts: Vec<usize>,
    rows: usize,
}

impl<'s> Columns<'s> {
    /// Empty columns for the features of `spec`, with room for `rows` records.
    pub(super) fn new(spec: &'s ParseExampleSpec, rows: usize) -> Self {
        let features: Vec<(&str, &FeatureSpec)> =
            spec.features.iter().map(|(k, s)| (k.as_str(), s)).collect();
        let n = features.len();
        let columns = features
            .iter()
            .map(|(_, s)| {
                // Room for the expected values (within reason: a spec may be wrong).
                let per_row = match s {
                    FeatureSpec::FixedLen { shape, .. } => shape.iter().product::<usize>().min(64),
                    FeatureSpec::VarLen { .. } => 1,
                };
                Column::with_capacity(s.dtype(), rows.saturating_mul(per_row))
            })
            .collect();
        let row_splits = features
            .iter()
            .map(|(_, s)| match s {
                FeatureSpec::FixedLen { .. } => Vec::new(),
                FeatureSpec::VarLen { .. } => {
                    let mut splits = Vec::with_capacity(rows + 1);
                    splits.push(0);
                    splits
                }
            })
            .collect();
        Columns {
            keys: features.iter().map(|(k, _)| k.as_bytes()).collect(),
            features,
            columns,
            row_splits,
            defaults: vec![None; n],
            seen: vec![Seen::default(); n],
            starts: vec![0; n],
            rows: 0,
        }
    }

    /// Parses the record at position `index` of its batch into a new row of every column.
    pub(super) fn push(&mut self, record: &Bytes, index: usize) -> Result<()> {
        for (start, column) in self.starts.iter_mut().zip(&self.columns) {
            *start = column.len();
        }
        fast::scan(
            record,
            &self.keys,
            &mut self.columns,
            &self.starts,
            &mut self.seen,
        )
        .map_err(|e| malformed(record, index, e))?;
        for (j, &(key, spec)) in self.features.iter().enumerate() {
            let seen = self.seen[j];
            let column = &mut self.columns[j];
            let want = spec.dtype();
            if let Some(got) = seen.kind
                && got != want
            {
                return Err(type_mismatch(key, spec, index, got));
            }
            match spec {
                FeatureSpec::VarLen { .. } => self.row_splits[j].push(column.len() as i64),
                FeatureSpec::FixedLen {
                    dtype,
                    shape,
                    default,
                } => {
                    if !seen.present {
                        let Some(default) = default else {
                            return Err(missing(key, want));
                        };
                        let data = match &mut self.defaults[j] {
                            Some(data) => data,
                            slot => slot.insert(
                                default_tensor(key, *dtype, shape, default)?.data().clone(),
                            ),
                        };
                        column.extend(data)?;
                    } else {
                        let count = column.len() - self.starts[j];
                        if count != shape.iter().product::<usize>() {
                            return Err(wrong_count(key, index, want, count, shape));
                        }
                    }
                }
            }
        }
        self.rows += 1;
        Ok(())
    }

    /// The values of the one record pushed: FixedLen features as tensors of their shape,
    /// VarLen ones as vectors.
    pub(super) fn into_tensors(self) -> Result<Vec<(String, Tensor)>> {
        debug_assert_eq!(self.rows, 1);
        self.features
            .into_iter()
            .zip(self.columns)
            .map(|((key, spec), column)| {
                let data = column.into_data();
                let tensor = match spec {
                    FeatureSpec::FixedLen { shape, .. } => Tensor::new(shape, data)?,
                    FeatureSpec::VarLen { .. } => Tensor::vector(data),
                };
                Ok((key.to_string(), tensor))
            })
            .collect()
    }

    /// The batched values: FixedLen features dense `[rows, ...shape]`, VarLen ones ragged
    /// (an empty batch gives empty dense tensors: `[0, ...shape]`, VarLen `[0, 0]`).
    pub(super) fn into_batch(self) -> Result<Vec<(String, Value)>> {
        let rows = self.rows;
        self.features
            .into_iter()
            .zip(self.columns)
            .zip(self.row_splits)
            .map(|(((key, spec), column), splits)| {
                let data = column.into_data();
                let value = match spec {
                    FeatureSpec::FixedLen { shape, .. } => {
                        let mut full = Shape::from_slice(&[rows]);
                        full.extend_from_slice(shape);
                        Value::Dense(Tensor::new(&full, data)?)
                    }
                    FeatureSpec::VarLen { .. } if rows == 0 => {
                        Value::Dense(Tensor::new(&[0, 0], data)?)
                    }
                    FeatureSpec::VarLen { .. } => Value::Ragged(Ragged {
                        values: Tensor::vector(data),
                        row_splits: splits.into(),
                    }),
                };
                Ok((key.to_string(), value))
            })
            .collect()
    }
}

/// The error for a record that is not a valid Example, with prost's account of what is
/// wrong (the scanner accepts exactly what prost accepts; should they ever disagree, the
/// scanner's own account is given).
fn malformed(record: &Bytes, index: usize, scanner: Malformed) -> Error {
    let detail = match Example::from_bytes(record) {
        Err(e) => e.to_string(),
        Ok(_) => scanner.to_string(),
    };
    Error::data(format!(
        "Could not parse example input (index {index}): {detail}"
    ))
}

pub(super) fn type_mismatch(
    key: &str,
    spec: &FeatureSpec,
    index: usize,
    got: FeatureType,
) -> Error {
    let want = spec.dtype();
    Error::data_of(
        key,
        match spec {
            FeatureSpec::FixedLen { .. } => format!(
                "Key: {key}, Index: {index}.  Data types don't match. Data type: {} but expected type: {}",
                got.tf_name(),
                want.tf_name()
            ),
            FeatureSpec::VarLen { .. } => format!(
                "Key: {key}, Index: {index}.  Data types don't match. Expected type: {}, Actual type: {}",
                want.tf_name(),
                got.tf_name()
            ),
        },
    )
}

pub(super) fn missing(key: &str, want: FeatureType) -> Error {
    Error::data_of(
        key,
        format!(
            "Feature: {key} (data type: {}) is required but could not be found.",
            want.tf_name()
        ),
    )
}

pub(super) fn wrong_count(
    key: &str,
    index: usize,
    want: FeatureType,
    count: usize,
    shape: &[usize],
) -> Error {
    Error::data_of(
        key,
        format!(
            "Key: {key}, Index: {index}.  Number of {} values != expected.  Values size: {count} but output shape: {}",
            match want {
                FeatureType::String => "bytes",
                FeatureType::Float => "float",
                FeatureType::Int64 => "int64",
            },
            shape_str(shape)
        ),
    )
}
