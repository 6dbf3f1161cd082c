//! The error type of `sluice-tensor`.

use crate::tensor::DType;

/// What can go wrong building or combining tensors. Each variant is one kind of failure;
/// the messages name the shapes and dtypes involved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The number of values does not match the shape ([`Tensor::new`](crate::Tensor::new)).
    #[error("shape {shape:?} needs {needed} values, got {got}")]
    ValueCount {
        /// The shape asked for.
        shape: Vec<usize>,
        /// The values it needs (the product of its dimensions).
        needed: usize,
        /// The values given.
        got: usize,
    },
    /// Values of different dtypes were to be combined (concatenated, stacked or padded).
    #[error("cannot combine {expected} values with {found} values")]
    DTypeMismatch {
        /// The dtype of the first values.
        expected: DType,
        /// The first other dtype met.
        found: DType,
    },
    /// Tensors of different shapes were to be stacked into one batch.
    #[error(
        "cannot batch tensors of shapes {first:?} and {other:?} (use padded_batch, or VarLen \
         features give ragged batches)"
    )]
    ShapeMismatch {
        /// The first tensor's shape.
        first: Vec<usize>,
        /// The first other shape met.
        other: Vec<usize>,
    },
    /// [`Tensor::stack`](crate::Tensor::stack) was given no tensor.
    #[error("cannot stack zero tensors")]
    EmptyStack,
    /// [`Tensor::row`](crate::Tensor::row) of a scalar, which has no rows.
    #[error("cannot take a row of a scalar")]
    RowOfScalar,
    /// A row index past the leading dimension.
    #[error("row {index} out of {rows}")]
    RowOutOfRange {
        /// The index asked for.
        index: usize,
        /// The number of rows.
        rows: usize,
    },
    /// [`Tensor::pad_to`](crate::Tensor::pad_to) to a shape of another rank or smaller in
    /// some dimension.
    #[error("cannot pad shape {shape:?} to {target:?}")]
    PadShape {
        /// The tensor's shape.
        shape: Vec<usize>,
        /// The shape asked for.
        target: Vec<usize>,
    },
    /// The padding value of [`Tensor::pad_to`](crate::Tensor::pad_to) is not one value of
    /// the tensor's dtype.
    #[error("padding value must be one {dtype} value")]
    PadValue {
        /// The tensor's dtype.
        dtype: DType,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
