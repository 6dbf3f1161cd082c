//! Elements: what flows through a pipeline. A set of named values, an id and a provenance.

use std::fmt;
use std::sync::Arc;

use crate::elastic::Units;
use crate::error::{Error, Result};
use crate::tensor::{Shared, Tensor, TensorData};

/// Identifies an element for provenance and for deterministic randomness.
///
/// For records read from files: the index of the file in the (sharded, shuffled) file list
/// and the record's index in its file. For in-memory sources and `range`: source 0 and the
/// position. Stages that combine elements (batch, zip, ...) give the result the id of its
/// first input; stages that split elements (unbatch) derive ids from the input's id and
/// the position, so ids stay unique and independent of thread timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ElementId {
    /// Source (file) index.
    pub source: u64,
    /// Index within the source.
    pub index: u64,
}

impl ElementId {
    /// An id.
    pub fn new(source: u64, index: u64) -> Self {
        ElementId { source, index }
    }

    /// The id of part `i` of this element (used by `unbatch` and flat maps).
    pub fn child(self, i: u64) -> ElementId {
        ElementId {
            source: crate::rng::mix(self.source ^ 0x005e_ed0f_c41d) ^ self.index,
            index: i,
        }
    }
}

impl fmt::Display for ElementId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.source, self.index)
    }
}

/// Where an element came from: a file and the byte offset of its record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provenance {
    /// The file's path.
    pub file: Arc<str>,
    /// Offset of the record's header in the (uncompressed) file.
    pub offset: u64,
}

impl fmt::Display for Provenance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at offset {}", self.file, self.offset)
    }
}

/// A ragged tensor: rows of different lengths, as `values` plus `row_splits`.
///
/// Row `i` is `values[row_splits[i]..row_splits[i + 1]]` along the leading dimension of
/// `values`; `row_splits` starts at 0, never decreases and ends at the number of values
/// (TensorFlow's `tf.RaggedTensor.from_row_splits`). Batching VarLen features gives these.
#[derive(Clone, Debug, PartialEq)]
pub struct Ragged {
    /// The rows' values, concatenated.
    pub values: Tensor,
    /// `rows + 1` offsets into `values`.
    pub row_splits: Shared<i64>,
}

impl Ragged {
    /// A ragged tensor; checks the row splits.
    pub fn new(values: Tensor, row_splits: Shared<i64>) -> Result<Ragged> {
        let n = values.shape().first().copied().unwrap_or(0) as i64;
        let ok = row_splits.first() == Some(&0)
            && row_splits.windows(2).all(|w| w[0] <= w[1])
            && row_splits.last() == Some(&n);
        if !ok {
            return Err(Error::invalid(format!(
                "invalid row splits {:?} for {n} values",
                &row_splits[..]
            )));
        }
        Ok(Ragged { values, row_splits })
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.row_splits.len() - 1
    }

    /// Row `i` as a dense tensor (sharing the values).
    pub fn row(&self, i: usize) -> Result<Tensor> {
        if i >= self.rows() {
            return Err(Error::invalid(format!("row {i} out of {}", self.rows())));
        }
        let (a, b) = (self.row_splits[i] as usize, self.row_splits[i + 1] as usize);
        let per: usize = self.values.shape()[1..].iter().product();
        let mut shape = crate::tensor::Shape::from_slice(self.values.shape());
        shape[0] = b - a;
        Ok(Tensor::new(
            &shape,
            self.values.data().slice(a * per..b * per),
        )?)
    }
}

/// One named value of an element.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A dense tensor.
    Dense(Tensor),
    /// A ragged batch (from batching tensors whose leading dimension differs).
    Ragged(Ragged),
}

impl Value {
    /// The dense tensor, if this is one.
    pub fn as_dense(&self) -> Option<&Tensor> {
        match self {
            Value::Dense(t) => Some(t),
            Value::Ragged(_) => None,
        }
    }

    /// Bytes of memory the values occupy.
    pub fn nbytes(&self) -> usize {
        match self {
            Value::Dense(t) => t.nbytes(),
            Value::Ragged(r) => r.values.nbytes() + r.row_splits.len() * 8,
        }
    }
}

impl From<Tensor> for Value {
    fn from(t: Tensor) -> Value {
        Value::Dense(t)
    }
}

/// The name of the single value of a raw record element (as `TFRecordDataset` yields).
pub(crate) const RECORD: &str = "record";

/// An element: named values, an id and (for data read from files) a provenance.
///
/// Values keep the order they were inserted in. Cloning an element shares every buffer.
///
/// An element also carries the records it was made of ([`Units`]), which elastic checkpoints
/// count; they are bookkeeping, not data: equality, `Debug` and digests leave them out.
#[derive(Clone)]
pub struct Element {
    id: ElementId,
    provenance: Option<Provenance>,
    values: Vec<(Arc<str>, Value)>,
    units: Units,
}

impl fmt::Debug for Element {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Element")
            .field("id", &self.id)
            .field("provenance", &self.provenance)
            .field("values", &self.values)
            .finish()
    }
}

impl PartialEq for Element {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id && self.provenance == other.provenance && self.values == other.values
    }
}

impl Element {
    /// An element with no values.
    pub fn new(id: ElementId) -> Element {
        Element {
            id,
            provenance: None,
            values: Vec::new(),
            units: Units::none(),
        }
    }

    /// A raw record element: one scalar byte string named `record`.
    pub fn record(id: ElementId, data: bytes::Bytes, provenance: Option<Provenance>) -> Element {
        Element {
            id,
            provenance,
            values: vec![(Arc::from(RECORD), Value::Dense(Tensor::scalar_bytes(data)))],
            units: Units::none(),
        }
    }

    /// An element of these values (their names distinct), for readers that make many
    /// elements with the same names (shared, not copied).
    pub fn from_values(
        id: ElementId,
        provenance: Option<Provenance>,
        values: Vec<(Arc<str>, Value)>,
    ) -> Element {
        debug_assert!(
            values
                .iter()
                .enumerate()
                .all(|(i, (n, _))| values[..i].iter().all(|(m, _)| m != n)),
            "duplicate value names"
        );
        Element {
            id,
            provenance,
            values,
            units: Units::none(),
        }
    }

    /// This element with `name` set to `value`.
    pub fn with(mut self, name: &str, value: impl Into<Value>) -> Element {
        self.insert(name, value);
        self
    }

    /// The id.
    pub fn id(&self) -> ElementId {
        self.id
    }

    /// Replaces the id.
    pub fn set_id(&mut self, id: ElementId) {
        self.id = id;
    }

    /// The records this element was made of (see [`crate::elastic`]).
    pub fn units(&self) -> &Units {
        &self.units
    }

    /// Sets the records this element was made of.
    pub fn set_units(&mut self, units: Units) {
        self.units = units;
    }

    /// Takes the records this element was made of, leaving none.
    pub fn take_units(&mut self) -> Units {
        std::mem::take(&mut self.units)
    }

    /// Where the element came from, if from a file.
    pub fn provenance(&self) -> Option<&Provenance> {
        self.provenance.as_ref()
    }

    /// Sets the provenance.
    pub fn set_provenance(&mut self, provenance: Option<Provenance>) {
        self.provenance = provenance;
    }

    /// The value named `name`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.values
            .iter()
            .find(|(n, _)| &**n == name)
            .map(|(_, v)| v)
    }

    /// The name and value at position `i` (values keep the order they were added in).
    pub(crate) fn value_at(&self, i: usize) -> Option<(&Arc<str>, &Value)> {
        self.values.get(i).map(|(n, v)| (n, v))
    }

    /// Whether the values are named `names`, in this order (names shared with the same
    /// source compare by pointer first).
    pub(crate) fn has_names_in_order(&self, names: &[Arc<str>]) -> bool {
        self.values.len() == names.len()
            && self
                .values
                .iter()
                .zip(names)
                .all(|((m, _), n)| Arc::ptr_eq(m, n) || **m == **n)
    }

    /// The dense tensor named `name`.
    pub fn tensor(&self, name: &str) -> Option<&Tensor> {
        self.get(name).and_then(Value::as_dense)
    }

    /// Sets `name` to `value` (replacing an existing value of that name in place).
    pub fn insert(&mut self, name: &str, value: impl Into<Value>) {
        let value = value.into();
        match self.values.iter_mut().find(|(n, _)| &**n == name) {
            Some(slot) => slot.1 = value,
            None => self.values.push((Arc::from(name), value)),
        }
    }

    /// Removes and returns the value named `name`.
    pub fn remove(&mut self, name: &str) -> Option<Value> {
        let i = self.values.iter().position(|(n, _)| &**n == name)?;
        Some(self.values.remove(i).1)
    }

    /// The names and values, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.values.iter().map(|(n, v)| (&**n, v))
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// True when the element has no values.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Bytes of memory the values occupy (what the RAM budget counts).
    pub fn nbytes(&self) -> usize {
        self.values.iter().map(|(_, v)| v.nbytes()).sum()
    }

    /// A description of the element for error messages: its id and provenance.
    pub fn describe(&self) -> String {
        match &self.provenance {
            Some(p) => format!("element {} ({p})", self.id),
            None => format!("element {}", self.id),
        }
    }

    pub(crate) fn names(&self) -> Vec<Arc<str>> {
        self.values.iter().map(|(n, _)| Arc::clone(n)).collect()
    }
}

/// Helpers for building tensors in tests and examples.
impl Element {
    /// An element holding one scalar `i64` named `name` (handy for `range` and tests).
    pub fn scalar_i64(id: ElementId, name: &str, value: i64) -> Element {
        Element::new(id).with(name, Tensor::scalar_i64(value))
    }
}

/// The dense tensors of `values` (batching ragged values again is not supported).
fn all_dense<'a>(values: &[&'a Value]) -> Result<Vec<&'a Tensor>> {
    values
        .iter()
        .map(|v| {
            v.as_dense()
                .ok_or_else(|| Error::invalid("cannot batch ragged values again"))
        })
        .collect()
}

/// Batches values of one name: stacks equal shapes, or makes a ragged batch when only the
/// leading dimension differs.
pub(crate) fn batch_values(values: &[&Value]) -> Result<Value> {
    let dense = all_dense(values)?;
    let first = dense[0];
    if dense.iter().all(|t| t.shape() == first.shape()) {
        return Ok(Value::Dense(Tensor::stack(&dense)?));
    }
    let same_inner = first.rank() >= 1
        && dense
            .iter()
            .all(|t| t.rank() == first.rank() && t.shape()[1..] == first.shape()[1..]);
    if !same_inner {
        return Err(Error::invalid(format!(
            "cannot batch values of shapes {:?} and {:?}: only the first dimension may differ",
            first.shape(),
            dense
                .iter()
                .find(|t| t.shape() != first.shape())
                .map(|t| t.shape())
                .unwrap_or(&[])
        )));
    }
    batch_ragged(values)
}

/// Batches 1-D (or higher) tensors as a ragged value, whatever their lengths.
pub(crate) fn batch_ragged(values: &[&Value]) -> Result<Value> {
    let dense = all_dense(values)?;
    let first = dense[0];
    if first.rank() == 0
        || dense
            .iter()
            .any(|t| t.rank() != first.rank() || t.shape()[1..] != first.shape()[1..])
    {
        return Err(Error::invalid(
            "ragged rows must have rank ≥ 1 and equal inner dimensions",
        ));
    }
    let mut splits = Vec::with_capacity(dense.len() + 1);
    splits.push(0i64);
    let mut total = 0usize;
    for t in &dense {
        total += t.shape()[0];
        splits.push(total as i64);
    }
    let data = TensorData::concat(&dense.iter().map(|t| t.data()).collect::<Vec<_>>())?;
    let mut shape = crate::tensor::Shape::from_slice(first.shape());
    shape[0] = total;
    Ok(Value::Ragged(Ragged::new(
        Tensor::new(&shape, data)?,
        splits.into(),
    )?))
}

/// Row `i` of a batched value.
pub(crate) fn unbatch_value(value: &Value, i: usize) -> Result<Value> {
    Ok(Value::Dense(match value {
        Value::Dense(t) => t.row(i)?,
        Value::Ragged(r) => r.row(i)?,
    }))
}

/// The batch size of a batched value.
pub(crate) fn batch_len(value: &Value) -> Result<usize> {
    match value {
        Value::Dense(t) => t
            .shape()
            .first()
            .copied()
            .ok_or_else(|| Error::invalid("cannot unbatch a scalar")),
        Value::Ragged(r) => Ok(r.rows()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batching_different_lengths_is_ragged_and_unbatches_back() {
        let a = Value::Dense(Tensor::vector(TensorData::I64(vec![1].into())));
        let b = Value::Dense(Tensor::vector(TensorData::I64(vec![2, 3].into())));
        let batch = batch_values(&[&a, &b]).unwrap();
        let Value::Ragged(r) = &batch else {
            panic!("expected ragged")
        };
        assert_eq!(&r.row_splits[..], &[0, 1, 3]);
        assert_eq!(unbatch_value(&batch, 0).unwrap(), a);
        assert_eq!(unbatch_value(&batch, 1).unwrap(), b);
        assert_eq!(batch_len(&batch).unwrap(), 2);
    }

    #[test]
    fn insert_replaces_in_place() {
        let mut e = Element::new(ElementId::new(0, 1))
            .with("a", Tensor::scalar_i64(1))
            .with("b", Tensor::scalar_i64(2));
        e.insert("a", Tensor::scalar_i64(3));
        let names: Vec<_> = e.iter().map(|(n, _)| n.to_string()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(e.tensor("a").unwrap().as_i64().unwrap(), &[3]);
    }
}
