//! What the Parquet and Arrow IPC sources share: Arrow record batches as rows.
//!
//! A batch's columns are converted once, each into one buffer of values (numbers copied into
//! a tensor buffer, byte strings into one `Bytes` they are slices of), and every row's tensor
//! is a slice of it: no copy per element.
//!
//! Types: `bool` → u8; `int8`, `int16`, `uint16` → i32; `uint8` → u8; `int32` → i32;
//! `uint32`, `int64` → i64; `float16` → f32; `float32`, `float64` as themselves; dates,
//! times, timestamps and durations → their integer (i32 or i64, in the column's unit);
//! strings and binaries (any offset width, views, fixed size) → byte strings; lists (any
//! kind) of those → 1-D tensors, one length per row; a struct → one feature per field,
//! named `struct.field`. Other types (`uint64`, decimals, maps, lists of lists, dictionaries,
//! unions) are an error naming the column and its type.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float16Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type,
    UInt16Type, UInt32Type,
};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_buffer::NullBuffer;
use arrow_schema::DataType;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::element::{Ragged, Value};
use crate::sources::format::{Chunk, ChunkReader, Record, RecordError};
use crate::tensor::{Shared, Tensor, TensorData};

/// The value a null takes when `null_value` is given: a number for numeric columns (cast to
/// the column's type), a string for string and binary columns (a number is written as its
/// decimal text there, a string in a numeric column is an error). A null list is an empty
/// list.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum NullValue {
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A string.
    Text(String),
}

impl PartialEq for NullValue {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (NullValue::Int(a), NullValue::Int(b)) => a == b,
            (NullValue::Float(a), NullValue::Float(b)) => a.to_bits() == b.to_bits(),
            (NullValue::Text(a), NullValue::Text(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for NullValue {}

impl std::fmt::Display for NullValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NullValue::Int(i) => write!(f, "{i}"),
            NullValue::Float(x) => write!(f, "{x}"),
            NullValue::Text(s) => write!(f, "{s:?}"),
        }
    }
}

impl NullValue {
    fn as_f64(&self, column: &str) -> Result<f64, String> {
        match self {
            NullValue::Int(i) => Ok(*i as f64),
            NullValue::Float(x) => Ok(*x),
            NullValue::Text(s) => Err(format!(
                "column `{column}` is numeric but null_value is the string {s:?}"
            )),
        }
    }

    fn as_i64(&self, column: &str) -> Result<i64, String> {
        match self {
            NullValue::Int(i) => Ok(*i),
            other => other.as_f64(column).map(|x| x as i64),
        }
    }

    fn as_bytes(&self) -> Bytes {
        match self {
            NullValue::Text(s) => Bytes::from(s.clone()),
            other => Bytes::from(other.to_string()),
        }
    }
}

/// One column of a batch, converted.
struct Column {
    name: Arc<str>,
    /// One value per row (`offsets == None`) or the lists' values.
    values: TensorData,
    /// A list column: row `i` is `values[offsets[i]..offsets[i + 1]]`.
    offsets: Option<Vec<usize>>,
    /// Rows that are null (left to report when no `null_value` is given).
    nulls: Option<NullBuffer>,
    /// Null items inside the lists (left to report).
    item_nulls: Option<NullBuffer>,
}

/// The rows of one record batch.
pub(crate) struct BatchRows {
    columns: Vec<Column>,
    rows: usize,
    next: usize,
    /// The index in the file of this batch's first row.
    first_row: u64,
}

impl BatchRows {
    /// Converts `batch` (whose first row is row `first_row` of the file), its columns in the
    /// order of `wanted` (empty: all, in the batch's order).
    pub(crate) fn new(
        batch: &RecordBatch,
        wanted: &[String],
        null_value: Option<&NullValue>,
        first_row: u64,
    ) -> Result<BatchRows, String> {
        let schema = batch.schema();
        let mut columns = Vec::new();
        let mut add =
            |name: &str, array: &ArrayRef| convert(name, array, None, null_value, &mut columns);
        if wanted.is_empty() {
            for (field, array) in schema.fields().iter().zip(batch.columns()) {
                add(field.name(), array)?;
            }
        } else {
            for w in wanted {
                let i = schema.index_of(w).map_err(|_| missing(w, &schema))?;
                add(w, batch.column(i))?;
            }
        }
        Ok(BatchRows {
            columns,
            rows: batch.num_rows(),
            next: 0,
            first_row,
        })
    }

    /// The next row, `None` after the last.
    pub(crate) fn next_row(&mut self) -> Option<Result<Record, RecordError>> {
        if self.next >= self.rows {
            return None;
        }
        let i = self.next;
        self.next += 1;
        let row = self.first_row + i as u64;
        let mut features = Vec::with_capacity(self.columns.len());
        for c in &self.columns {
            if c.nulls.as_ref().is_some_and(|n| n.is_null(i)) {
                return Some(Err(null_error(row, &c.name, "is null")));
            }
            let t = match &c.offsets {
                None => Tensor::new(&[], c.values.slice(i..i + 1)),
                Some(o) => {
                    let (a, b) = (o[i], o[i + 1]);
                    if let Some(n) = &c.item_nulls
                        && (a..b).any(|j| n.is_null(j))
                    {
                        return Some(Err(null_error(row, &c.name, "has a null item")));
                    }
                    Tensor::new(&[b - a], c.values.slice(a..b))
                }
            }
            .expect("a row's shape matches its values");
            features.push((Arc::clone(&c.name), t));
        }
        Some(Ok(Record {
            offset: row,
            features,
        }))
    }
}

impl BatchRows {
    /// Whether row `i` of column `c` is null, or (a list) holds a null item: an error.
    fn bad(c: &Column, i: usize) -> bool {
        c.nulls.as_ref().is_some_and(|n| n.is_null(i))
            || match (&c.item_nulls, &c.offsets) {
                (Some(n), Some(o)) => (o[i]..o[i + 1]).any(|j| n.is_null(j)),
                _ => false,
            }
    }

    /// The next at most `max` rows as a chunk (columns sliced, not copied), stopping
    /// before a row that is an error (which is the next call's); `None` after the last.
    pub(crate) fn next_chunk(&mut self, max: usize) -> Option<Result<Chunk, RecordError>> {
        let start = self.next;
        let mut stop = (start + max.max(1)).min(self.rows);
        if start >= stop {
            return None;
        }
        for c in &self.columns {
            if (c.nulls.is_some() || c.item_nulls.is_some())
                && let Some(r) = (start..stop).find(|&r| Self::bad(c, r))
            {
                stop = r;
            }
        }
        if stop == start {
            // The bad row's error, as the record reader gives it.
            return match self.next_row() {
                Some(Err(e)) => Some(Err(e)),
                _ => Some(Err(null_error(
                    self.first_row + start as u64,
                    "?",
                    "is bad",
                ))),
            };
        }
        self.next = stop;
        let n = stop - start;
        let columns = self
            .columns
            .iter()
            .map(|c| {
                let value = match &c.offsets {
                    None => Value::Dense(
                        Tensor::new(&[n], c.values.slice(start..stop)).expect("n values"),
                    ),
                    Some(o) => {
                        let (a, b) = (o[start], o[stop]);
                        let values = c.values.slice(a..b);
                        let len = o[start + 1] - o[start];
                        if (start..stop).all(|i| o[i + 1] - o[i] == len) {
                            // Lists of one length stack into a dense tensor, as `batch` does.
                            Value::Dense(Tensor::new(&[n, len], values).expect("n × len"))
                        } else {
                            let splits: Vec<i64> =
                                o[start..=stop].iter().map(|&x| (x - a) as i64).collect();
                            let values = Tensor::new(&[b - a], values).expect("b - a values");
                            Value::Ragged(
                                Ragged::new(values, splits.into()).expect("valid row splits"),
                            )
                        }
                    }
                };
                (Arc::clone(&c.name), value)
            })
            .collect();
        Some(Ok(Chunk {
            offsets: (start..stop).map(|i| self.first_row + i as u64).collect(),
            columns,
        }))
    }
}

/// The column names a file has, for a message about one it lacks.
pub(crate) fn missing(name: &str, schema: &arrow_schema::Schema) -> String {
    format!(
        "no column `{name}` (the file has {})",
        schema
            .fields()
            .iter()
            .map(|f| format!("`{}`", f.name()))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

fn null_error(row: u64, column: &str, what: &str) -> RecordError {
    RecordError {
        offset: row,
        feature: Some(column.to_string()),
        message: format!(
            "row {row}: column `{column}` {what} (give the source a `null_value` to read \
             nulls as a value)"
        ),
        recoverable: true,
    }
}

/// Converts `array` (a column, or a struct's field) into `out`.
fn convert(
    name: &str,
    array: &ArrayRef,
    parent_nulls: Option<&NullBuffer>,
    fill: Option<&NullValue>,
    out: &mut Vec<Column>,
) -> Result<(), String> {
    let nulls = NullBuffer::union(parent_nulls, array.logical_nulls().as_ref());
    let nulls = nulls.filter(|n| n.null_count() > 0);
    let keep = |nulls: Option<NullBuffer>| if fill.is_some() { None } else { nulls };
    let list = |offsets: Vec<usize>, values: &ArrayRef, out: &mut Vec<Column>| {
        let item_nulls = values.logical_nulls().filter(|n| n.null_count() > 0);
        let data = flat(name, values, item_nulls.as_ref(), fill)?;
        if let (Some(n), Some(_)) = (&nulls, fill)
            && (0..offsets.len() - 1).any(|i| n.is_null(i) && offsets[i] != offsets[i + 1])
        {
            // A null list is an empty list; this writer left values in its slot.
            gathered(name, &offsets, &data, n, out);
            return Ok::<_, String>(());
        }
        out.push(Column {
            name: Arc::from(name),
            values: data,
            offsets: Some(offsets),
            nulls: keep(nulls.clone()),
            item_nulls: if fill.is_some() { None } else { item_nulls },
        });
        Ok(())
    };
    match array.data_type() {
        DataType::Struct(fields) => {
            let s = array.as_struct();
            for (field, child) in fields.iter().zip(s.columns()) {
                convert(
                    &format!("{name}.{}", field.name()),
                    child,
                    nulls.as_ref(),
                    fill,
                    out,
                )?;
            }
            Ok(())
        }
        DataType::List(_) => {
            let l = array.as_list::<i32>();
            let offsets = l.offsets().iter().map(|&o| o as usize).collect();
            list(offsets, l.values(), out)
        }
        DataType::LargeList(_) => {
            let l = array.as_list::<i64>();
            let offsets = l.offsets().iter().map(|&o| o as usize).collect();
            list(offsets, l.values(), out)
        }
        DataType::FixedSizeList(_, n) => {
            let l = array.as_fixed_size_list();
            let n = *n as usize;
            let start = l.offset() * n;
            let offsets = (0..=l.len()).map(|i| start + i * n).collect();
            list(offsets, l.values(), out)
        }
        _ => {
            let data = flat(name, array, nulls.as_ref(), fill)?;
            out.push(Column {
                name: Arc::from(name),
                values: data,
                offsets: None,
                nulls: keep(nulls),
                item_nulls: None,
            });
            Ok(())
        }
    }
}

/// A list column with null lists made empty when their slots were not empty: the values
/// gathered row by row (rare: writers leave null lists empty).
fn gathered(
    name: &str,
    offsets: &[usize],
    data: &TensorData,
    nulls: &NullBuffer,
    out: &mut Vec<Column>,
) {
    let rows = offsets.len() - 1;
    let mut parts = Vec::with_capacity(rows);
    let mut fixed = vec![0usize];
    for i in 0..rows {
        let (a, b) = if nulls.is_null(i) {
            (offsets[i], offsets[i])
        } else {
            (offsets[i], offsets[i + 1])
        };
        parts.push(data.slice(a..b));
        fixed.push(fixed[i] + (b - a));
    }
    let refs: Vec<&TensorData> = parts.iter().collect();
    let values = TensorData::concat(&refs).unwrap_or_else(|_| data.slice(0..0));
    out.push(Column {
        name: Arc::from(name),
        values,
        offsets: Some(fixed),
        nulls: None,
        item_nulls: None,
    });
}

/// The values of a column of scalars (or a list's items), one per slot, nulls replaced by
/// `fill` when given (else left as the writer left them, to be reported).
fn flat(
    name: &str,
    array: &ArrayRef,
    nulls: Option<&NullBuffer>,
    fill: Option<&NullValue>,
) -> Result<TensorData, String> {
    let fill = if nulls.is_some() { fill } else { None };
    macro_rules! prim {
        ($ty:ty, $out:ty, $variant:ident, $conv:expr, $fill:expr) => {{
            let values = array.as_primitive::<$ty>().values();
            let mut v: Vec<$out> = values.iter().map(|&x| $conv(x)).collect();
            if let (Some(n), Some(f)) = (nulls, fill) {
                let f: $out = $fill(f)?;
                fill_nulls(&mut v, n, f);
            }
            TensorData::$variant(Shared::new(v))
        }};
    }
    let as_i32 = |f: &NullValue| f.as_i64(name).map(|x| x as i32);
    let as_i64 = |f: &NullValue| f.as_i64(name);
    let as_f32 = |f: &NullValue| f.as_f64(name).map(|x| x as f32);
    let as_f64 = |f: &NullValue| f.as_f64(name);
    let as_u8 = |f: &NullValue| f.as_i64(name).map(|x| x as u8);
    Ok(match array.data_type() {
        DataType::Boolean => {
            let b = array.as_boolean();
            let mut v: Vec<u8> = b.values().iter().map(u8::from).collect();
            if let (Some(n), Some(f)) = (nulls, fill) {
                let f = as_u8(f)?;
                fill_nulls(&mut v, n, f);
            }
            TensorData::U8(Bytes::from(v))
        }
        DataType::UInt8 => {
            let values = array.as_primitive::<UInt8Type>().values();
            let mut v = values.to_vec();
            if let (Some(n), Some(f)) = (nulls, fill) {
                let f = as_u8(f)?;
                fill_nulls(&mut v, n, f);
            }
            TensorData::U8(Bytes::from(v))
        }
        DataType::Int8 => prim!(Int8Type, i32, I32, i32::from, as_i32),
        DataType::Int16 => prim!(Int16Type, i32, I32, i32::from, as_i32),
        DataType::UInt16 => prim!(UInt16Type, i32, I32, i32::from, as_i32),
        DataType::Int32 => prim!(Int32Type, i32, I32, |x| x, as_i32),
        DataType::UInt32 => prim!(UInt32Type, i64, I64, i64::from, as_i64),
        DataType::Int64 => prim!(Int64Type, i64, I64, |x| x, as_i64),
        DataType::Float16 => prim!(Float16Type, f32, F32, |x: HalfF16| x.to_f32(), as_f32),
        DataType::Float32 => prim!(Float32Type, f32, F32, |x| x, as_f32),
        DataType::Float64 => prim!(Float64Type, f64, F64, |x| x, as_f64),
        DataType::Date32 | DataType::Time32(_) => {
            let v = raw_fixed::<4>(array)
                .into_iter()
                .map(i32::from_le_bytes)
                .collect();
            fill_raw(TensorData::I32(Shared::new(v)), nulls, fill, name)?
        }
        DataType::Date64
        | DataType::Time64(_)
        | DataType::Timestamp(..)
        | DataType::Duration(_) => {
            let v = raw_fixed::<8>(array)
                .into_iter()
                .map(i64::from_le_bytes)
                .collect();
            fill_raw(TensorData::I64(Shared::new(v)), nulls, fill, name)?
        }
        DataType::Utf8 => {
            let a = array.as_string::<i32>();
            strings(a.values(), a.value_offsets(), nulls, fill)
        }
        DataType::LargeUtf8 => {
            let a = array.as_string::<i64>();
            strings(a.values(), a.value_offsets(), nulls, fill)
        }
        DataType::Binary => {
            let a = array.as_binary::<i32>();
            strings(a.values(), a.value_offsets(), nulls, fill)
        }
        DataType::LargeBinary => {
            let a = array.as_binary::<i64>();
            strings(a.values(), a.value_offsets(), nulls, fill)
        }
        DataType::Utf8View => {
            let a = array.as_string_view();
            views((0..a.len()).map(|i| a.value(i).as_bytes()), nulls, fill)
        }
        DataType::BinaryView => {
            let a = array.as_binary_view();
            views((0..a.len()).map(|i| a.value(i)), nulls, fill)
        }
        DataType::FixedSizeBinary(_) => {
            let a = array.as_fixed_size_binary();
            views((0..a.len()).map(|i| a.value(i)), nulls, fill)
        }
        other => {
            return Err(format!(
                "column `{name}` has type {other}, which is not supported (numbers, strings, \
                 binaries, lists of them and structs are)"
            ));
        }
    })
}

type HalfF16 = <Float16Type as arrow_array::ArrowPrimitiveType>::Native;

/// The values of a fixed-width column as little-endian byte groups (the Arrow format is
/// little-endian).
fn raw_fixed<const N: usize>(array: &ArrayRef) -> Vec<[u8; N]> {
    let data = array.to_data();
    let buf = &data.buffers()[0];
    let start = data.offset() * N;
    buf.as_slice()[start..start + data.len() * N]
        .chunks_exact(N)
        .map(|c| c.try_into().expect("N bytes"))
        .collect()
}

fn fill_raw(
    data: TensorData,
    nulls: Option<&NullBuffer>,
    fill: Option<&NullValue>,
    name: &str,
) -> Result<TensorData, String> {
    let (Some(n), Some(f)) = (nulls, fill) else {
        return Ok(data);
    };
    let f = f.as_i64(name)?;
    Ok(match data {
        TensorData::I32(v) => {
            let mut v = v.into_vec();
            for (i, x) in v.iter_mut().enumerate() {
                if n.is_null(i) {
                    *x = f as i32;
                }
            }
            TensorData::I32(Shared::new(v))
        }
        TensorData::I64(v) => {
            let mut v = v.into_vec();
            for (i, x) in v.iter_mut().enumerate() {
                if n.is_null(i) {
                    *x = f;
                }
            }
            TensorData::I64(Shared::new(v))
        }
        other => other,
    })
}

/// Sets the null slots of `v` to `f`.
fn fill_nulls<T: Copy>(v: &mut [T], nulls: &NullBuffer, f: T) {
    for (i, x) in v.iter_mut().enumerate() {
        if nulls.is_null(i) {
            *x = f;
        }
    }
}

/// Byte strings at `offsets` in `values`: one copy of the batch's bytes, each value a slice.
fn strings<O: arrow_array::OffsetSizeTrait>(
    values: &[u8],
    offsets: &[O],
    nulls: Option<&NullBuffer>,
    fill: Option<&NullValue>,
) -> TensorData {
    let first = offsets.first().map_or(0, |o| o.as_usize());
    let last = offsets.last().map_or(0, |o| o.as_usize());
    let all = Bytes::copy_from_slice(&values[first..last]);
    let fill = fill.map(NullValue::as_bytes);
    let v = offsets
        .windows(2)
        .enumerate()
        .map(|(i, w)| match (&fill, nulls) {
            (Some(f), Some(n)) if n.is_null(i) => f.clone(),
            _ => all.slice(w[0].as_usize() - first..w[1].as_usize() - first),
        })
        .collect();
    TensorData::Bytes(Shared::new(v))
}

/// Byte strings one by one (views, fixed-size binaries): one copy of all of them, each a
/// slice.
fn views<'a>(
    items: impl Iterator<Item = &'a [u8]> + Clone,
    nulls: Option<&NullBuffer>,
    fill: Option<&NullValue>,
) -> TensorData {
    let total: usize = items.clone().map(<[u8]>::len).sum();
    let mut buf = Vec::with_capacity(total);
    let mut ends = Vec::new();
    for item in items {
        buf.extend_from_slice(item);
        ends.push(buf.len());
    }
    let all = Bytes::from(buf);
    let fill = fill.map(NullValue::as_bytes);
    let mut start = 0;
    let v = ends
        .into_iter()
        .enumerate()
        .map(|(i, end)| {
            let b = match (&fill, nulls) {
                (Some(f), Some(n)) if n.is_null(i) => f.clone(),
                _ => all.slice(start..end),
            };
            start = end;
            b
        })
        .collect();
    TensorData::Bytes(Shared::new(v))
}

/// The record batches of one file as records.
pub(crate) struct Batches {
    batches: Box<dyn Iterator<Item = Result<RecordBatch, String>> + Send>,
    current: Option<BatchRows>,
    columns: Vec<String>,
    null_value: Option<NullValue>,
    /// Rows of the batches before `current`.
    rows: u64,
    done: bool,
}

impl Batches {
    /// Reads `batches`, keeping `columns` (empty: all).
    pub(crate) fn new(
        batches: Box<dyn Iterator<Item = Result<RecordBatch, String>> + Send>,
        columns: Vec<String>,
        null_value: Option<NullValue>,
    ) -> Batches {
        Batches {
            batches,
            current: None,
            columns,
            null_value,
            rows: 0,
            done: false,
        }
    }
}

impl Batches {
    /// What `take` gives of the current record batch, the next batch read when it is
    /// done; `None` after the last. A batch that cannot be read or converted ends the file.
    fn next_with<T>(
        &mut self,
        mut take: impl FnMut(&mut BatchRows) -> Option<Result<T, RecordError>>,
    ) -> Option<Result<T, RecordError>> {
        loop {
            if self.done {
                return None;
            }
            if let Some(cur) = self.current.as_mut() {
                if let Some(r) = take(cur) {
                    return Some(r);
                }
                self.rows += cur.rows as u64;
                self.current = None;
            }
            let fatal = |rows: u64, message: String| RecordError {
                offset: rows,
                feature: None,
                message,
                recoverable: false,
            };
            // The arrow and parquet readers panic on some malformed files (arrow-ipc 60
            // slices a buffer at an offset read from the file before checking it: fuzz
            // finding `columnar-ipc-buffer-offset`): a panic while reading a batch is this
            // file's error, not the process's.
            let next =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.batches.next()))
                    .unwrap_or_else(|panic| {
                        Some(Err(format!(
                            "the file is malformed: {}",
                            panic_message(&*panic)
                        )))
                    });
            match next? {
                Ok(batch) => {
                    match BatchRows::new(&batch, &self.columns, self.null_value.as_ref(), self.rows)
                    {
                        Ok(rows) => self.current = Some(rows),
                        Err(m) => {
                            self.done = true;
                            return Some(Err(fatal(self.rows, m)));
                        }
                    }
                }
                Err(m) => {
                    self.done = true;
                    return Some(Err(fatal(
                        self.rows,
                        format!("cannot read the rows from row {}: {m}", self.rows),
                    )));
                }
            }
        }
    }
}

impl crate::sources::format::RecordReader for Batches {
    fn next_record(&mut self) -> Option<Result<Record, RecordError>> {
        self.next_with(BatchRows::next_row)
    }
}

impl ChunkReader for Batches {
    fn next_chunk(&mut self, max: usize) -> Option<Result<Chunk, RecordError>> {
        self.next_with(|rows| rows.next_chunk(max))
    }
}

/// The [`FileFormat`](crate::sources::format::FileFormat) of a columnar format's spec (its
/// `columns`, `null_value` and `storage`, and a `rows(file)` reading one file's record
/// batches as [`Batches`]): Parquet's and Arrow IPC's. Both read in chunks (a batch after
/// them is fused with them).
macro_rules! columnar_format {
    ($spec:ty, $name:literal) => {
        impl $crate::sources::format::FileFormat for $spec {
            fn name(&self) -> &'static str {
                $name
            }

            fn params(&self) -> $crate::params::Params {
                self.opening()
                    .params()
                    .with("columns", self.columns.join(","))
                    .with(
                        "null_value",
                        self.null_value
                            .as_ref()
                            .map_or(String::new(), ToString::to_string),
                    )
            }

            fn opening(&self) -> $crate::sources::format::Opening {
                $crate::sources::format::Opening {
                    compression_type: sluice_proto::tfrecord::Compression::None,
                    storage: self.storage.clone(),
                }
            }

            fn records(
                &self,
                file: $crate::sources::format::OpenedFile,
            ) -> $crate::error::Result<Box<dyn $crate::sources::format::RecordReader>> {
                let path = file.path.clone();
                Ok(Box::new($crate::sources::columnar::opened(&path, || {
                    self.rows(file)
                })?))
            }

            fn reads_chunks(&self) -> bool {
                true
            }

            fn open_chunks(
                &self,
                path: &str,
            ) -> $crate::error::Result<Box<dyn $crate::sources::format::ChunkReader>> {
                let file = self.opening().open(path)?;
                Ok(Box::new($crate::sources::columnar::opened(path, || {
                    self.rows(file)
                })?))
            }
        }
    };
}
pub(crate) use columnar_format;

/// What a panic says (its `&str` or `String` payload).
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a malformed file".to_string())
}

/// Opens a file's record batches with `open`: a panic of the arrow or parquet reader while
/// it reads the file's metadata (parquet 60 sums the row groups' untrusted row counts
/// without checking: fuzz finding `parquet-row-count-overflow`) is the file's error, as it
/// is while reading its batches.
pub(crate) fn opened(
    path: &str,
    open: impl FnOnce() -> crate::error::Result<Batches>,
) -> crate::error::Result<Batches> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(open)).unwrap_or_else(|panic| {
        Err(crate::error::Error::data(format!(
            "{path}: the file is malformed: {}",
            panic_message(&*panic)
        )))
    })
}

/// The whole of an object-store file, or a local file opened again for random access.
pub(crate) enum Whole {
    /// A local file.
    File(std::fs::File),
    /// An object-store file's bytes.
    Bytes(Bytes),
}

impl Whole {
    /// `file` for random access: local files are opened again (not read), object-store
    /// files read whole into memory.
    pub(crate) fn of(file: crate::sources::format::OpenedFile) -> crate::error::Result<Whole> {
        let io = |error| crate::error::Error::Io {
            path: file.path.clone().into(),
            error,
        };
        if sluice_storage::is_url(&file.path) {
            let mut input = file.input;
            let mut v = Vec::with_capacity(file.size.unwrap_or(0) as usize);
            std::io::Read::read_to_end(&mut input, &mut v).map_err(io)?;
            Ok(Whole::Bytes(Bytes::from(v)))
        } else {
            Ok(Whole::File(std::fs::File::open(&file.path).map_err(io)?))
        }
    }
}
