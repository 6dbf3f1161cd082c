//! Batch columns: each record key's values for a whole batch in one vector, filled record by
//! record by the [scanner](super::fast) and checked as TensorFlow checks them (with its error
//! wording); [`composite`](super::composite) turns them into the features' values.

use bytes::Bytes;
use sluice_proto::{Example, TfMessage};

use super::fast::{self, Malformed, Seen};
use super::{FeatureType, default_tensor, shape_str};
use crate::error::{Error, Result};
use crate::stages::padded_batch::PadValue;
use crate::tensor::{DType, TensorData};

/// How one record key is read into its column: what the features built from it need.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Raw<'s> {
    /// Exactly `shape.product()` values; missing: `default` or an error.
    Fixed {
        dtype: FeatureType,
        shape: &'s [usize],
        default: Option<&'s [PadValue]>,
    },
    /// Any number of values; missing: none.
    VarLen { dtype: FeatureType },
    /// A multiple of `shape.product()` values; missing: none.
    Sequence {
        dtype: FeatureType,
        shape: &'s [usize],
    },
}

impl Raw<'_> {
    pub(super) fn dtype(&self) -> FeatureType {
        match self {
            Raw::Fixed { dtype, .. } | Raw::VarLen { dtype } | Raw::Sequence { dtype, .. } => {
                *dtype
            }
        }
    }
}

/// One record key's values for the batch, and each record's share of them.
#[derive(Debug)]
pub(super) struct RawColumn {
    /// The values, of the key's type.
    pub(super) data: TensorData,
    /// `rows + 1` offsets into `data` for VarLen and sequence keys; empty for FixedLen ones
    /// (each record has `shape.product()` values).
    pub(super) splits: Vec<i64>,
}

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
    pub(super) fn with_capacity(dtype: FeatureType, n: usize) -> Column {
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
    pub(super) fn extend(&mut self, data: &TensorData) -> Result<()> {
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

    pub(super) fn into_data(self) -> TensorData {
        match self {
            Column::Bytes(v) => TensorData::Bytes(v.into()),
            Column::Float(v) => TensorData::F32(v.into()),
            Column::Int64(v) => TensorData::I64(v.into()),
        }
    }
}

/// The requested keys of a batch of records, parsed into one column per key.
pub(super) struct Columns<'s> {
    /// Keys and how they are read, sorted by key.
    features: Vec<(&'s str, Raw<'s>)>,
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
    /// Parsing one record alone (`parse_single_example`'s wording where it differs).
    single: bool,
}

impl<'s> Columns<'s> {
    /// Empty columns for `features` (sorted by key, keys unique), with room for `rows`
    /// records; `single`: one record parsed alone.
    pub(super) fn new(features: Vec<(&'s str, Raw<'s>)>, rows: usize, single: bool) -> Self {
        let n = features.len();
        let columns = features
            .iter()
            .map(|(_, s)| {
                // Room for the expected values (within reason: a spec may be wrong).
                let per_row = match s {
                    Raw::Fixed { shape, .. } => shape.iter().product::<usize>().min(64),
                    Raw::VarLen { .. } | Raw::Sequence { .. } => 1,
                };
                Column::with_capacity(s.dtype(), rows.saturating_mul(per_row))
            })
            .collect();
        let row_splits = features
            .iter()
            .map(|(_, s)| match s {
                Raw::Fixed { .. } => Vec::new(),
                Raw::VarLen { .. } | Raw::Sequence { .. } => {
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
            single,
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
                let fixed = !matches!(spec, Raw::VarLen { .. });
                return Err(type_mismatch(key, fixed, index, want, got));
            }
            match spec {
                Raw::VarLen { .. } => self.row_splits[j].push(column.len() as i64),
                Raw::Sequence { shape, .. } => {
                    let stride: usize = shape.iter().product();
                    let count = column.len() - self.starts[j];
                    if stride > 0 && !count.is_multiple_of(stride) {
                        return Err(not_a_multiple(key, index, want, count, shape, self.single));
                    }
                    self.row_splits[j].push(column.len() as i64);
                }
                Raw::Fixed {
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
                            slot => slot
                                .insert(default_tensor(key, dtype, shape, default)?.data().clone()),
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

    /// The columns, in key order, and the number of records pushed.
    pub(super) fn into_raw(self) -> (Vec<RawColumn>, usize) {
        let columns = self
            .columns
            .into_iter()
            .zip(self.row_splits)
            .map(|(column, splits)| RawColumn {
                data: column.into_data(),
                splits,
            })
            .collect();
        (columns, self.rows)
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

/// A feature of another type than the spec's. `fixed`: a FixedLen or FixedLenSequence
/// feature (TensorFlow words the two cases differently).
pub(super) fn type_mismatch(
    key: &str,
    fixed: bool,
    index: usize,
    want: FeatureType,
    got: FeatureType,
) -> Error {
    Error::data_of(
        key,
        match fixed {
            true => format!(
                "Key: {key}, Index: {index}.  Data types don't match. Data type: {} but expected type: {}",
                got.tf_name(),
                want.tf_name()
            ),
            false => format!(
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
            type_word(want),
            shape_str(shape)
        ),
    )
}

/// A FixedLenSequence feature whose count is not a multiple of its row's size, worded as
/// `parse_example` words it, or `parse_single_example` when `single`.
pub(super) fn not_a_multiple(
    key: &str,
    index: usize,
    want: FeatureType,
    count: usize,
    shape: &[usize],
    single: bool,
) -> Error {
    let stride: usize = shape.iter().product();
    Error::data_of(
        key,
        if single {
            format!(
                "Error while parsing feature with key {key}: number of elements should be divisible by {stride}, found {count} instead"
            )
        } else {
            let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
            format!(
                "Key: {key}, Index: {index}.  Number of {} values is not a multiple of stride length. Saw {count} values but output shape is: [?{}]",
                type_word(want),
                dims.iter().map(|d| format!(",{d}")).collect::<String>()
            )
        },
    )
}

fn type_word(t: FeatureType) -> &'static str {
    match t {
        FeatureType::String => "bytes",
        FeatureType::Float => "float",
        FeatureType::Int64 => "int64",
    }
}
