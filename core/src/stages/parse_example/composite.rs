//! Feature values from raw columns: each feature of a spec is read from one or more record
//! keys ([`Raw`] columns, filled by the scanner), as TensorFlow builds `SparseFeature`s and
//! `RaggedFeature`s from VarLen parts. This module turns the columns of a batch (or of one
//! record) into the features' outputs: dense, ragged, a sparse tensor's three parts, or the
//! flat values and nested row splits of a ragged tensor of ragged rank 2 or more.

use std::collections::BTreeMap;
use std::ops::Range;

use super::columns::{Raw, RawColumn};
use super::{FeatureSpec, FeatureType, Partition};
use crate::element::{Ragged, Value};
use crate::error::{Error, Result};
use crate::stages::padded_batch::PadValue;
use crate::tensor::{Shape, Tensor, TensorData};

/// The record keys a set of features reads and how, sorted by key; an error names a key
/// read in two incompatible ways.
pub(super) fn raw_features<'s>(
    features: impl IntoIterator<Item = (&'s str, &'s FeatureSpec)>,
) -> std::result::Result<Vec<(&'s str, Raw<'s>)>, String> {
    let mut raws: BTreeMap<&str, (Raw<'s>, &str)> = BTreeMap::new();
    let mut add = |key: &'s str, raw: Raw<'s>, by: &'s str| -> std::result::Result<(), String> {
        match raws.get(key) {
            None => {
                raws.insert(key, (raw, by));
                Ok(())
            }
            Some((other, _)) if *other == raw && matches!(raw, Raw::VarLen { .. }) => Ok(()),
            Some((_, other_by)) => Err(format!(
                "record key `{key}` is read by features `{other_by}` and `{by}` in different ways"
            )),
        }
    };
    for (name, spec) in features {
        match spec {
            FeatureSpec::FixedLen {
                dtype,
                shape,
                default,
            } => add(
                name,
                Raw::Fixed {
                    dtype: *dtype,
                    shape,
                    default: default.as_deref(),
                },
                name,
            )?,
            FeatureSpec::VarLen { dtype } => add(name, Raw::VarLen { dtype: *dtype }, name)?,
            FeatureSpec::FixedLenSequence { dtype, shape, .. } => add(
                name,
                Raw::Sequence {
                    dtype: *dtype,
                    shape,
                },
                name,
            )?,
            FeatureSpec::Sparse {
                dtype,
                index_key,
                value_key,
                ..
            } => {
                for k in index_key {
                    add(
                        k,
                        Raw::VarLen {
                            dtype: FeatureType::Int64,
                        },
                        name,
                    )?;
                }
                add(value_key, Raw::VarLen { dtype: *dtype }, name)?;
            }
            FeatureSpec::Ragged {
                dtype,
                value_key,
                partitions,
            } => {
                add(
                    value_key.as_deref().unwrap_or(name),
                    Raw::VarLen { dtype: *dtype },
                    name,
                )?;
                for k in partitions.iter().filter_map(Partition::key) {
                    add(
                        k,
                        Raw::VarLen {
                            dtype: FeatureType::Int64,
                        },
                        name,
                    )?;
                }
            }
        }
    }
    Ok(raws.into_iter().map(|(k, (raw, _))| (k, raw)).collect())
}

/// The ragged rank of a ragged feature's value in one record: its partitions less the
/// innermost uniform ones (which become dense dimensions).
pub(super) fn record_ragged_rank(partitions: &[Partition]) -> usize {
    let uniform_tail = partitions
        .iter()
        .rev()
        .take_while(|p| matches!(p, Partition::UniformRowLength(_)))
        .count();
    partitions.len() - uniform_tail
}

/// The names of the outputs of feature `name` (alone and batched, for collision checks).
pub(super) fn output_names(name: &str, spec: &FeatureSpec) -> Vec<String> {
    match spec {
        FeatureSpec::Sparse { .. } => ["indices", "values", "dense_shape"]
            .iter()
            .map(|part| format!("{name}.{part}"))
            .collect(),
        FeatureSpec::Ragged { partitions, .. } => {
            let rank = record_ragged_rank(partitions);
            let mut names = vec![name.to_string()];
            if rank + 1 >= 2 {
                names.push(format!("{name}.flat_values"));
                names.extend((0..=rank).map(|k| format!("{name}.row_splits.{k}")));
            }
            names
        }
        _ => vec![name.to_string()],
    }
}

/// The parsed columns of a batch, looked up by record key.
pub(super) struct Raws<'s> {
    keys: Vec<&'s str>,
    columns: Vec<RawColumn>,
    rows: usize,
    /// Whether one record is parsed alone; its position in its batch.
    single: Option<usize>,
}

impl<'s> Raws<'s> {
    pub(super) fn new(
        features: &[(&'s str, Raw<'s>)],
        columns: Vec<RawColumn>,
        rows: usize,
        single: Option<usize>,
    ) -> Self {
        Raws {
            keys: features.iter().map(|(k, _)| *k).collect(),
            columns,
            rows,
            single,
        }
    }

    fn get(&self, key: &str) -> Result<&RawColumn> {
        self.keys
            .binary_search(&key)
            .ok()
            .map(|i| &self.columns[i])
            .ok_or_else(|| Error::internal(format!("parse_example: no column for key `{key}`")))
    }

    /// Record `r`'s values in a VarLen or sequence column.
    fn range(column: &RawColumn, r: usize) -> Range<usize> {
        column.splits[r] as usize..column.splits[r + 1] as usize
    }

    /// The position to name in messages for record `r`.
    fn index(&self, r: usize) -> usize {
        self.single.unwrap_or(r)
    }

    /// The outputs of feature `name`, appended to `out`.
    pub(super) fn build(
        &self,
        name: &str,
        spec: &FeatureSpec,
        out: &mut Vec<(String, Value)>,
    ) -> Result<()> {
        let batched = self.single.is_none();
        match spec {
            FeatureSpec::FixedLen { shape, .. } => {
                let data = self.get(name)?.data.clone();
                let tensor = if batched {
                    let mut full = Shape::from_slice(&[self.rows]);
                    full.extend_from_slice(shape);
                    Tensor::new(&full, data)?
                } else {
                    Tensor::new(shape, data)?
                };
                out.push((name.to_string(), Value::Dense(tensor)));
            }
            FeatureSpec::VarLen { .. } => {
                let column = self.get(name)?;
                let data = column.data.clone();
                let value = match (batched, self.rows) {
                    (false, _) => Value::Dense(Tensor::vector(data)),
                    (true, 0) => Value::Dense(Tensor::new(&[0, 0], data)?),
                    (true, _) => Value::Ragged(Ragged {
                        values: Tensor::vector(data),
                        row_splits: column.splits.clone().into(),
                    }),
                };
                out.push((name.to_string(), value));
            }
            FeatureSpec::FixedLenSequence {
                dtype,
                shape,
                default,
                ..
            } => {
                let column = self.get(name)?;
                let tensor = sequence_tensor(
                    name,
                    column,
                    self.rows,
                    *dtype,
                    shape,
                    default.as_ref(),
                    batched,
                )?;
                out.push((name.to_string(), Value::Dense(tensor)));
            }
            FeatureSpec::Sparse {
                index_key,
                value_key,
                size,
                already_sorted,
                ..
            } => self.sparse(name, index_key, value_key, size, *already_sorted, out)?,
            FeatureSpec::Ragged {
                value_key,
                partitions,
                ..
            } => self.ragged(name, value_key.as_deref().unwrap_or(name), partitions, out)?,
        }
        Ok(())
    }

    fn sparse(
        &self,
        name: &str,
        index_key: &[String],
        value_key: &str,
        size: &[usize],
        already_sorted: bool,
        out: &mut Vec<(String, Value)>,
    ) -> Result<()> {
        let batched = self.single.is_none();
        let values = self.get(value_key)?;
        let index_columns: Vec<(&str, &RawColumn, &[i64])> = index_key
            .iter()
            .map(|k| {
                let column = self.get(k)?;
                match &column.data {
                    TensorData::I64(v) => Ok((k.as_str(), column, &v[..])),
                    other => Err(Error::internal(format!(
                        "parse_example: index key `{k}` holds {} values",
                        other.dtype()
                    ))),
                }
            })
            .collect::<Result<_>>()?;
        let width = index_key.len() + usize::from(batched);
        let mut indices: Vec<i64> = Vec::with_capacity(values.data.len() * width);
        let mut order: Vec<usize> = Vec::with_capacity(values.data.len());
        for r in 0..self.rows {
            let span = Self::range(values, r);
            for (k, column, _) in &index_columns {
                let n = Self::range(column, r).len();
                if n != span.len() {
                    return Err(Error::data_of(
                        name,
                        format!(
                            "Key: {value_key}, Index: {}.  SparseFeature {name}: {n} indices in {k} but {} values in {value_key} (Dimensions {n} and {} are not compatible)",
                            self.index(r),
                            span.len(),
                            span.len()
                        ),
                    ));
                }
            }
            let first = order.len();
            for (i, v) in span.clone().enumerate() {
                order.push(v);
                if batched {
                    indices.push(r as i64);
                }
                for (_, column, ids) in &index_columns {
                    indices.push(ids[column.splits[r] as usize + i]);
                }
            }
            if !already_sorted {
                // Sort this record's entries by index (stable, as TensorFlow's reorder keeps
                // equal indices in order); records are already in order.
                let n = order.len() - first;
                let mut perm: Vec<usize> = (0..n).collect();
                let base = first * width;
                perm.sort_by(|&a, &b| {
                    indices[base + a * width..base + (a + 1) * width]
                        .cmp(&indices[base + b * width..base + (b + 1) * width])
                });
                let old_indices = indices[base..].to_vec();
                let old_order = order[first..].to_vec();
                for (to, &from) in perm.iter().enumerate() {
                    indices[base + to * width..base + (to + 1) * width]
                        .copy_from_slice(&old_indices[from * width..(from + 1) * width]);
                    order[first + to] = old_order[from];
                }
            }
        }
        let nnz = order.len();
        let mut dense_shape: Vec<i64> = Vec::with_capacity(width);
        if batched {
            dense_shape.push(self.rows as i64);
        }
        dense_shape.extend(size.iter().map(|&s| s as i64));
        out.push((
            format!("{name}.indices"),
            Value::Dense(Tensor::new(&[nnz, width], TensorData::I64(indices.into()))?),
        ));
        out.push((
            format!("{name}.values"),
            Value::Dense(Tensor::vector(gather(&values.data, &order))),
        ));
        out.push((
            format!("{name}.dense_shape"),
            Value::Dense(Tensor::vector(TensorData::I64(dense_shape.into()))),
        ));
        Ok(())
    }

    fn ragged(
        &self,
        name: &str,
        value_key: &str,
        partitions: &[Partition],
        out: &mut Vec<(String, Value)>,
    ) -> Result<()> {
        let values = self.get(value_key)?;
        let mut records = Vec::with_capacity(self.rows);
        for r in 0..self.rows {
            records.push(self.ragged_record(name, value_key, values, partitions, r)?);
        }
        let inner: Vec<usize> = partitions
            .iter()
            .rev()
            .map_while(|p| match p {
                Partition::UniformRowLength(n) => Some(*n),
                _ => None,
            })
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        let stride: usize = inner.iter().product();
        let rank = record_ragged_rank(partitions);
        // Nested row splits, outermost first: the records' ones offset and joined, and when
        // batched the batch's own level in front.
        let mut levels: Vec<Vec<i64>> = vec![vec![0]; rank];
        let mut batch = vec![0i64];
        for rec in &records {
            for (k, splits) in rec.splits.iter().enumerate() {
                let level = &mut levels[k];
                let offset = *level.last().unwrap_or(&0);
                level.extend(splits[1..].iter().map(|s| s + offset));
            }
            batch.push(batch.last().unwrap_or(&0) + rec.rows as i64);
        }
        let data = values.data.clone();
        let leading = data.len() / stride.max(1);
        let mut shape = Shape::from_slice(&[leading]);
        shape.extend_from_slice(&inner);
        let flat = Tensor::new(&shape, data)?;
        let nested: Vec<Vec<i64>> = match self.single {
            Some(_) => levels,
            None => std::iter::once(batch).chain(levels).collect(),
        };
        match nested.len() {
            0 => out.push((name.to_string(), Value::Dense(flat))),
            1 => {
                let row_splits = nested.into_iter().next().unwrap_or_default();
                out.push((
                    name.to_string(),
                    Value::Ragged(Ragged::new(flat, row_splits.into())?),
                ));
            }
            _ => {
                out.push((format!("{name}.flat_values"), Value::Dense(flat)));
                for (k, splits) in nested.into_iter().enumerate() {
                    out.push((
                        format!("{name}.row_splits.{k}"),
                        Value::Dense(Tensor::vector(TensorData::I64(splits.into()))),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Record `r`'s partitions applied to its values, innermost first, each checked against
    /// the rows it splits.
    fn ragged_record(
        &self,
        name: &str,
        value_key: &str,
        values: &RawColumn,
        partitions: &[Partition],
        r: usize,
    ) -> Result<RaggedRecord> {
        let index = self.index(r);
        // Items at the current outermost level, and whether they are still the values.
        let mut rows = Self::range(values, r).len();
        let mut dense = true;
        let mut splits: Vec<Vec<i64>> = Vec::new();
        for p in partitions.iter().rev() {
            let what = if dense { "values" } else { "rows" };
            let bad = |key: &str, detail: String| {
                Error::data_of(
                    name,
                    format!("Key: {key}, Index: {index}.  RaggedFeature {name}: {detail}"),
                )
            };
            let new_splits: Vec<i64> = match p {
                Partition::UniformRowLength(n) => {
                    let n = *n;
                    if n == 0 || !rows.is_multiple_of(n) {
                        return Err(bad(
                            value_key,
                            format!(
                                "uniform_row_length {n} does not divide {rows} {what} (the count must be a multiple of {n})"
                            ),
                        ));
                    }
                    if dense {
                        rows /= n;
                        continue;
                    }
                    (0..=rows / n).map(|k| (k * n) as i64).collect()
                }
                Partition::RowLengths(key) => {
                    let lengths = self.int64s(key, r)?;
                    let mut s = Vec::with_capacity(lengths.len() + 1);
                    s.push(0i64);
                    for &l in lengths {
                        if l < 0 {
                            return Err(bad(key, format!("row length {l} is negative")));
                        }
                        s.push(s[s.len() - 1].saturating_add(l));
                    }
                    if s[s.len() - 1] != rows as i64 {
                        return Err(bad(
                            key,
                            format!(
                                "row lengths sum to {} but there are {rows} {what}",
                                s[s.len() - 1]
                            ),
                        ));
                    }
                    s
                }
                Partition::RowSplits(key) => self.int64s(key, r)?.to_vec(),
                Partition::RowStarts(key) => {
                    let mut s = self.int64s(key, r)?.to_vec();
                    s.push(rows as i64);
                    s
                }
                Partition::RowLimits(key) => {
                    let mut s = vec![0i64];
                    s.extend_from_slice(self.int64s(key, r)?);
                    s
                }
            };
            let key = p.key().unwrap_or(value_key);
            if new_splits.first() != Some(&0)
                || new_splits.windows(2).any(|w| w[1] < w[0])
                || new_splits.last() != Some(&(rows as i64))
            {
                return Err(bad(
                    key,
                    format!(
                        "row partition {new_splits:?} does not split {rows} {what} (row splits must start at 0, never decrease and end at {rows})"
                    ),
                ));
            }
            rows = new_splits.len() - 1;
            dense = false;
            splits.insert(0, new_splits);
        }
        Ok(RaggedRecord { rows, splits })
    }

    fn int64s(&self, key: &str, r: usize) -> Result<&[i64]> {
        let column = self.get(key)?;
        match &column.data {
            TensorData::I64(v) => Ok(&v[Self::range(column, r)]),
            other => Err(Error::internal(format!(
                "parse_example: partition key `{key}` holds {} values",
                other.dtype()
            ))),
        }
    }
}

/// One record's ragged value: the number of its outermost rows and its nested row splits
/// (outermost first).
struct RaggedRecord {
    rows: usize,
    splits: Vec<Vec<i64>>,
}

/// A FixedLenSequence column as `[n, ...shape]` for one record, or batched as
/// `[records, longest, ...shape]` padded with `default` (or zero / empty).
pub(super) fn sequence_tensor(
    name: &str,
    column: &RawColumn,
    rows: usize,
    dtype: FeatureType,
    shape: &[usize],
    default: Option<&PadValue>,
    batched: bool,
) -> Result<Tensor> {
    let stride: usize = shape.iter().product::<usize>().max(1);
    let lens: Vec<usize> = column
        .splits
        .windows(2)
        .map(|w| (w[1] - w[0]) as usize / stride)
        .collect();
    if !batched {
        let mut full = Shape::from_slice(&[lens.first().copied().unwrap_or(0)]);
        full.extend_from_slice(shape);
        return Ok(Tensor::new(&full, column.data.clone())?);
    }
    let longest = lens.iter().copied().max().unwrap_or(0);
    let mut full = Shape::from_slice(&[rows, longest]);
    full.extend_from_slice(shape);
    if lens.iter().all(|&l| l == longest) {
        return Ok(Tensor::new(&full, column.data.clone())?);
    }
    let fill = pad_fill(name, dtype, default)?;
    let mut parts = Vec::with_capacity(2 * rows);
    for (r, &len) in lens.iter().enumerate() {
        let start = column.splits[r] as usize;
        parts.push(column.data.slice(start..start + len * stride));
        parts.push(TensorData::repeat_scalar(&fill, (longest - len) * stride));
    }
    let data = TensorData::concat(&parts.iter().collect::<Vec<_>>())?;
    Ok(Tensor::new(&full, data)?)
}

/// The one value padding `dtype` rows: `default`, or zero / empty.
fn pad_fill(name: &str, dtype: FeatureType, default: Option<&PadValue>) -> Result<TensorData> {
    let zero = match dtype {
        FeatureType::Int64 => PadValue::Int(0),
        FeatureType::Float => PadValue::Float(0.0),
        FeatureType::String => PadValue::Bytes(String::new()),
    };
    default
        .unwrap_or(&zero)
        .to_data(dtype.dtype())
        .map_err(|e| Error::invalid(format!("{name}: default value: {e}")))
}

/// `data[order[0]], data[order[1]], ...`.
fn gather(data: &TensorData, order: &[usize]) -> TensorData {
    match data {
        TensorData::U8(v) => TensorData::U8(order.iter().map(|&i| v[i]).collect::<Vec<_>>().into()),
        TensorData::I32(v) => {
            TensorData::I32(order.iter().map(|&i| v[i]).collect::<Vec<_>>().into())
        }
        TensorData::I64(v) => {
            TensorData::I64(order.iter().map(|&i| v[i]).collect::<Vec<_>>().into())
        }
        TensorData::F32(v) => {
            TensorData::F32(order.iter().map(|&i| v[i]).collect::<Vec<_>>().into())
        }
        TensorData::F64(v) => {
            TensorData::F64(order.iter().map(|&i| v[i]).collect::<Vec<_>>().into())
        }
        TensorData::Bytes(v) => TensorData::Bytes(
            order
                .iter()
                .map(|&i| v[i].clone())
                .collect::<Vec<_>>()
                .into(),
        ),
    }
}
