//! `sluice-tensor`: the values Sluice pipelines carry — a [`DType`], a [`Shape`] and
//! contiguous, shared data ([`TensorData`]) whose large buffers are recycled ([`pool`]).
//!
//! ```
//! use sluice_tensor::{DType, Tensor, TensorData};
//!
//! # fn main() -> sluice_tensor::Result<()> {
//! // Two [1, 3] tensors of u8 values, stacked into a batch [2, 1, 3].
//! let a = Tensor::new(&[1, 3], TensorData::U8(vec![1, 2, 3].into()))?;
//! let b = Tensor::new(&[1, 3], TensorData::U8(vec![4, 5, 6].into()))?;
//! let batch = Tensor::stack(&[&a, &b])?;
//! assert_eq!(batch.shape(), &[2, 1, 3]);
//! assert_eq!(batch.dtype(), DType::U8);
//! // Rows share the batch's buffer; clones share it too.
//! assert_eq!(batch.row(1)?, b);
//! assert_eq!(batch.row(1)?.as_u8(), Some(&[4, 5, 6][..]));
//!
//! // Errors say what does not fit, in TensorFlow-like words.
//! let err = Tensor::new(&[2, 2], TensorData::F32(vec![1.0].into())).unwrap_err();
//! assert_eq!(err.to_string(), "shape [2, 2] needs 4 values, got 1");
//! assert!(matches!(batch.row(2), Err(sluice_tensor::Error::RowOutOfRange { index: 2, rows: 2 })));
//! # Ok(())
//! # }
//! ```
//!
//! - A [`Tensor`] is dense, row-major; cloning or slicing it ([`Tensor::row`]) shares the
//!   values. `u8` values are [`bytes::Bytes`], so image bytes sliced from a record are not
//!   copied.
//! - [`Shared`] is the cheaply cloneable slice behind the other dtypes; buffers of at least
//!   [`pool::MIN_POOLED_BYTES`] go back to the [`pool`] when the last reference drops and are
//!   reused for the next buffer of a similar size (on Linux, backed by transparent huge
//!   pages when `SLUICE_HUGE_PAGES=1`). [`BatchRows`] is a batch's buffer whose rows are
//!   written from several threads, taken from the pool when the first row is.
//! - [`Error`] has one variant per kind of failure (value count, dtype or shape mismatch,
//!   row out of range, ...).
// `unsafe` in two places: the madvise(MADV_HUGEPAGE) call in `pool.rs`, and
// `batch_rows.rs`, which hands out a batch's rows to be written from several threads.
#![deny(unsafe_code)]

mod batch_rows;
mod error;
pub mod pool;
mod tensor;

pub use batch_rows::BatchRows;
pub use error::{Error, Result};
pub use tensor::{DType, Shape, Shared, Tensor, TensorData};
