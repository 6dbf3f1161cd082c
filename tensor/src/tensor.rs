//! Tensors: a dtype, a shape and contiguous, shared data.

use std::fmt;
use std::ops::{Deref, Range};
use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use smallvec::SmallVec;

use crate::error::{Error, Result};
use crate::pool::Poolable;

/// The element type of a [`Tensor`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// Unsigned bytes (pixels).
    U8,
    /// 32-bit signed integers.
    I32,
    /// 64-bit signed integers (`tf.int64`, what `Int64List` holds).
    I64,
    /// 32-bit floats (`tf.float32`, what `FloatList` holds).
    F32,
    /// 64-bit floats.
    F64,
    /// Byte strings (`tf.string`, what `BytesList` holds): each value is one byte string.
    Bytes,
}

impl DType {
    /// TensorFlow's name for the type, as used in its error messages (`int64`, `float`, `string`).
    pub fn tf_name(self) -> &'static str {
        match self {
            DType::U8 => "uint8",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::F32 => "float",
            DType::F64 => "double",
            DType::Bytes => "string",
        }
    }

    /// Size of one value in bytes (for byte strings: of the handle, not the contents).
    #[inline]
    pub fn size_of(self) -> usize {
        match self {
            DType::U8 => 1,
            DType::I32 | DType::F32 => 4,
            DType::I64 | DType::F64 => 8,
            DType::Bytes => std::mem::size_of::<Bytes>(),
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DType::U8 => "u8",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::Bytes => "bytes",
        })
    }
}

/// A shape: the size of each dimension. Scalars have the empty shape.
pub type Shape = SmallVec<[usize; 4]>;

/// A cheaply cloneable, sliceable, shared slice of values. Large buffers are recycled when
/// the last reference drops (see [`crate::pool`]).
pub struct Shared<T: Poolable> {
    buf: Arc<Recycled<T>>,
    range: Range<usize>,
}

/// A vector that goes back to the buffer pool when dropped.
struct Recycled<T: Poolable>(Vec<T>);

impl<T: Poolable> Drop for Recycled<T> {
    fn drop(&mut self) {
        crate::pool::give(std::mem::take(&mut self.0));
    }
}

impl<T: Poolable> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared {
            buf: Arc::clone(&self.buf),
            range: self.range.clone(),
        }
    }
}

impl<T: Poolable> Shared<T> {
    /// Takes ownership of `values` without copying them.
    pub fn new(values: Vec<T>) -> Self {
        let len = values.len();
        Shared {
            buf: Arc::new(Recycled(values)),
            range: 0..len,
        }
    }

    /// A sub-slice sharing the same buffer.
    ///
    /// # Panics
    /// If `range` is out of bounds.
    pub fn slice(&self, range: Range<usize>) -> Self {
        assert!(range.start <= range.end && range.end <= self.range.len());
        Shared {
            buf: Arc::clone(&self.buf),
            range: self.range.start + range.start..self.range.start + range.end,
        }
    }
}

impl<T: Poolable> Shared<T> {
    /// Whether this is the only reference to the buffer: no clone or slice of it is
    /// alive elsewhere (so a front end may hand the memory out as writable).
    pub fn is_unique(&self) -> bool {
        Arc::strong_count(&self.buf) == 1 && Arc::weak_count(&self.buf) == 0
    }
}

impl<T: Poolable + Clone> Shared<T> {
    /// The values as an owned vector (without copying when this is the only reference to
    /// the whole buffer).
    pub fn into_vec(self) -> Vec<T> {
        let whole = self.range.start == 0 && self.range.end == self.buf.0.len();
        match Arc::try_unwrap(self.buf) {
            Ok(mut only) if whole => std::mem::take(&mut only.0),
            Ok(only) => only.0[self.range].to_vec(),
            Err(shared) => shared.0[self.range].to_vec(),
        }
    }
}

impl<T: Poolable> Deref for Shared<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.buf.0[self.range.clone()]
    }
}

impl<T: Poolable> From<Vec<T>> for Shared<T> {
    fn from(values: Vec<T>) -> Self {
        Shared::new(values)
    }
}

impl<T: Poolable + fmt::Debug> fmt::Debug for Shared<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T: Poolable + PartialEq> PartialEq for Shared<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

/// The values of a tensor, in row-major order.
#[derive(Clone, Debug, PartialEq)]
pub enum TensorData {
    /// `u8` values. A `Bytes`, so image bytes sliced from a record are not copied.
    U8(Bytes),
    /// `i32` values.
    I32(Shared<i32>),
    /// `i64` values.
    I64(Shared<i64>),
    /// `f32` values.
    F32(Shared<f32>),
    /// `f64` values.
    F64(Shared<f64>),
    /// Byte strings, each a `Bytes` (usually a slice of the record it was parsed from).
    Bytes(Shared<Bytes>),
}

impl TensorData {
    /// The dtype of these values.
    #[inline]
    pub fn dtype(&self) -> DType {
        match self {
            TensorData::U8(_) => DType::U8,
            TensorData::I32(_) => DType::I32,
            TensorData::I64(_) => DType::I64,
            TensorData::F32(_) => DType::F32,
            TensorData::F64(_) => DType::F64,
            TensorData::Bytes(_) => DType::Bytes,
        }
    }

    /// Number of values.
    #[inline]
    pub fn len(&self) -> usize {
        match self {
            TensorData::U8(v) => v.len(),
            TensorData::I32(v) => v.len(),
            TensorData::I64(v) => v.len(),
            TensorData::F32(v) => v.len(),
            TensorData::F64(v) => v.len(),
            TensorData::Bytes(v) => v.len(),
        }
    }

    /// True when there are no values.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Values `range`, sharing the buffer.
    #[inline]
    pub fn slice(&self, range: Range<usize>) -> TensorData {
        match self {
            TensorData::U8(v) => TensorData::U8(v.slice(range)),
            TensorData::I32(v) => TensorData::I32(v.slice(range)),
            TensorData::I64(v) => TensorData::I64(v.slice(range)),
            TensorData::F32(v) => TensorData::F32(v.slice(range)),
            TensorData::F64(v) => TensorData::F64(v.slice(range)),
            TensorData::Bytes(v) => TensorData::Bytes(v.slice(range)),
        }
    }

    /// Bytes of memory the values occupy (byte strings: their contents plus handles).
    pub fn nbytes(&self) -> usize {
        match self {
            TensorData::Bytes(v) => v
                .iter()
                .map(|b| b.len() + std::mem::size_of::<Bytes>())
                .sum(),
            other => other.len() * other.dtype().size_of(),
        }
    }

    /// Concatenates values of one dtype into one new (recycled) buffer; values of another
    /// dtype than the first part's are an [`Error::DTypeMismatch`].
    pub fn concat(parts: &[&TensorData]) -> Result<TensorData> {
        let dtype = parts.first().map(|p| p.dtype()).unwrap_or(DType::U8);
        if let Some(bad) = parts.iter().find(|p| p.dtype() != dtype) {
            return Err(Error::DTypeMismatch {
                expected: dtype,
                found: bad.dtype(),
            });
        }
        macro_rules! cat {
            ($variant:ident) => {{
                let total = parts.iter().map(|p| p.len()).sum();
                let mut out = crate::pool::take(total);
                for p in parts {
                    if let TensorData::$variant(v) = p {
                        out.extend_from_slice(v);
                    }
                }
                out
            }};
        }
        Ok(match dtype {
            DType::U8 => TensorData::U8(Bytes::from(cat!(U8))),
            DType::I32 => TensorData::I32(cat!(I32).into()),
            DType::I64 => TensorData::I64(cat!(I64).into()),
            DType::F32 => TensorData::F32(cat!(F32).into()),
            DType::F64 => TensorData::F64(cat!(F64).into()),
            DType::Bytes => TensorData::Bytes(cat!(Bytes).into()),
        })
    }

    /// `n` copies of one scalar value `fill` (which must hold exactly one value).
    ///
    /// # Panics
    /// If `fill` holds no value.
    pub fn repeat_scalar(fill: &TensorData, n: usize) -> TensorData {
        match fill {
            TensorData::U8(v) => TensorData::U8(Bytes::from(vec![v[0]; n])),
            TensorData::I32(v) => TensorData::I32(vec![v[0]; n].into()),
            TensorData::I64(v) => TensorData::I64(vec![v[0]; n].into()),
            TensorData::F32(v) => TensorData::F32(vec![v[0]; n].into()),
            TensorData::F64(v) => TensorData::F64(vec![v[0]; n].into()),
            TensorData::Bytes(v) => TensorData::Bytes(vec![v[0].clone(); n].into()),
        }
    }
}

/// A dense tensor: a dtype, a shape and `shape.iter().product()` values in row-major order.
/// Cloning shares the values.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    shape: Shape,
    data: TensorData,
}

impl Tensor {
    /// A tensor of `shape` over `data`; the number of values must match the shape.
    #[inline]
    pub fn new(shape: &[usize], data: TensorData) -> Result<Tensor> {
        let shape = Shape::from_slice(shape);
        let n: usize = shape.iter().product();
        if n != data.len() {
            return Err(Error::ValueCount {
                shape: shape.to_vec(),
                needed: n,
                got: data.len(),
            });
        }
        Ok(Tensor { shape, data })
    }

    /// A scalar byte string.
    pub fn scalar_bytes(value: Bytes) -> Tensor {
        Tensor {
            shape: Shape::new(),
            data: TensorData::Bytes(vec![value].into()),
        }
    }

    /// A scalar `i64`.
    pub fn scalar_i64(value: i64) -> Tensor {
        Tensor {
            shape: Shape::new(),
            data: TensorData::I64(vec![value].into()),
        }
    }

    /// A scalar `f32`.
    pub fn scalar_f32(value: f32) -> Tensor {
        Tensor {
            shape: Shape::new(),
            data: TensorData::F32(vec![value].into()),
        }
    }

    /// A 1-D tensor of the given values.
    pub fn vector(data: TensorData) -> Tensor {
        Tensor {
            shape: smallvec::smallvec![data.len()],
            data,
        }
    }

    /// The dtype.
    #[inline]
    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }

    /// The shape.
    #[inline]
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The number of dimensions.
    #[inline]
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// The values in row-major order.
    #[inline]
    pub fn data(&self) -> &TensorData {
        &self.data
    }

    /// Number of values.
    #[inline]
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// True when the tensor has no values.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Bytes of memory the values occupy.
    pub fn nbytes(&self) -> usize {
        self.data.nbytes()
    }

    /// The values as `i64`, if that is the dtype.
    #[inline]
    pub fn as_i64(&self) -> Option<&[i64]> {
        match &self.data {
            TensorData::I64(v) => Some(v),
            _ => None,
        }
    }

    /// The values as `f32`, if that is the dtype.
    #[inline]
    pub fn as_f32(&self) -> Option<&[f32]> {
        match &self.data {
            TensorData::F32(v) => Some(v),
            _ => None,
        }
    }

    /// The values as byte strings, if that is the dtype.
    #[inline]
    pub fn as_bytes_list(&self) -> Option<&[Bytes]> {
        match &self.data {
            TensorData::Bytes(v) => Some(v),
            _ => None,
        }
    }

    /// The values as `u8`, if that is the dtype.
    #[inline]
    pub fn as_u8(&self) -> Option<&[u8]> {
        match &self.data {
            TensorData::U8(v) => Some(v),
            _ => None,
        }
    }

    /// Stacks tensors of one dtype and shape along a new leading dimension.
    pub fn stack(parts: &[&Tensor]) -> Result<Tensor> {
        let first = parts.first().ok_or(Error::EmptyStack)?;
        if let Some(bad) = parts.iter().find(|t| t.shape != first.shape) {
            return Err(Error::ShapeMismatch {
                first: first.shape.to_vec(),
                other: bad.shape.to_vec(),
            });
        }
        let data = TensorData::concat(&parts.iter().map(|t| &t.data).collect::<Vec<_>>())?;
        let mut shape = Shape::with_capacity(first.rank() + 1);
        shape.push(parts.len());
        shape.extend_from_slice(&first.shape);
        Ok(Tensor { shape, data })
    }

    /// Row `i` along the leading dimension, sharing the values.
    pub fn row(&self, i: usize) -> Result<Tensor> {
        let Some((&n, rest)) = self.shape.split_first() else {
            return Err(Error::RowOfScalar);
        };
        if i >= n {
            return Err(Error::RowOutOfRange { index: i, rows: n });
        }
        let per: usize = rest.iter().product();
        Ok(Tensor {
            shape: rest.into(),
            data: self.data.slice(i * per..(i + 1) * per),
        })
    }

    /// Pads (or keeps) each dimension to `target` with the scalar `fill`, which must be of
    /// this tensor's dtype. `target` has this tensor's rank, each entry ≥ the current size.
    pub fn pad_to(&self, target: &[usize], fill: &TensorData) -> Result<Tensor> {
        if target.len() != self.rank() || target.iter().zip(&self.shape).any(|(t, s)| t < s) {
            return Err(Error::PadShape {
                shape: self.shape.to_vec(),
                target: target.to_vec(),
            });
        }
        if fill.dtype() != self.dtype() || fill.len() != 1 {
            return Err(Error::PadValue {
                dtype: self.dtype(),
            });
        }
        if target == &self.shape[..] {
            return Ok(self.clone());
        }
        let total: usize = target.iter().product();
        // Build index by index: padded copies are not a hot path next to the values moved.
        let mut out = Vec::with_capacity(total);
        let mut idx = vec![0usize; target.len()];
        for _ in 0..total {
            let inside = idx.iter().zip(&self.shape).all(|(i, s)| i < s);
            if inside {
                let mut flat = 0;
                for (i, s) in idx.iter().zip(&self.shape) {
                    flat = flat * s + i;
                }
                out.push(self.data.slice(flat..flat + 1));
            } else {
                out.push(fill.clone());
            }
            for d in (0..target.len()).rev() {
                idx[d] += 1;
                if idx[d] < target[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        let data = TensorData::concat(&out.iter().collect::<Vec<_>>())?;
        Tensor::new(target, data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stack_and_row_are_inverse() {
        let a = Tensor::new(&[2], TensorData::I64(vec![1, 2].into())).unwrap();
        let b = Tensor::new(&[2], TensorData::I64(vec![3, 4].into())).unwrap();
        let s = Tensor::stack(&[&a, &b]).unwrap();
        assert_eq!(s.shape(), &[2, 2]);
        assert_eq!(s.as_i64().unwrap(), &[1, 2, 3, 4]);
        assert_eq!(s.row(1).unwrap(), b);
        assert!(s.row(2).is_err());
    }

    #[test]
    fn stack_refuses_different_shapes() {
        let a = Tensor::vector(TensorData::F32(vec![1.0].into()));
        let b = Tensor::vector(TensorData::F32(vec![1.0, 2.0].into()));
        assert!(Tensor::stack(&[&a, &b]).is_err());
    }

    #[test]
    fn pad_to_fills_the_tail() {
        let t = Tensor::new(&[2, 1], TensorData::I64(vec![1, 2].into())).unwrap();
        let p = t
            .pad_to(&[3, 2], &TensorData::I64(vec![-1].into()))
            .unwrap();
        assert_eq!(p.as_i64().unwrap(), &[1, -1, 2, -1, -1, -1]);
        assert!(t.pad_to(&[1, 1], &TensorData::I64(vec![0].into())).is_err());
    }

    #[test]
    fn shared_slices_share() {
        let s = Shared::new(vec![1, 2, 3, 4]);
        let t = s.slice(1..3);
        assert_eq!(&*t, &[2, 3]);
        assert_eq!(t.slice(1..2).into_vec(), vec![3]);
    }
}
