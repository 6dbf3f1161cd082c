"""Sluice: fast, reproducible input pipelines for ML training, from Python.

A pipeline reads TFRecord files (or NumPy arrays, or a Python generator), parses,
decodes and augments in parallel Rust threads with the GIL released, and yields one dict
per batch: feature name -> ``numpy.ndarray`` over the memory Rust wrote (no copy).

>>> import sluice
>>> pipeline = (
...     sluice.tfrecord("train-*.tfrecord")
...     .interleave(cycle_length=4, num_parallel="auto")
...     .shuffle(1024)
...     .parse_example({"image": "string", "label": "int64"})
...     .image_ops([{"op": "decode", "channels": 3},
...                 {"op": "random_crop", "height": 224, "width": 224}],
...                num_parallel="auto")
...     .batch(64)
...     .prefetch()
...     .options(seed=42)
... )                                                       # doctest: +SKIP
>>> for batch in pipeline:                                  # doctest: +SKIP
...     batch["image"].shape, batch["label"].dtype          # (64, 224, 224, 3), int64

The same pipelines as ``sluice run`` reads: :meth:`Pipeline.from_toml`. For PyTorch:
:mod:`sluice.torch`. Errors: :mod:`sluice.errors`.
"""

from . import errors, tfds
from ._sluice import __version__, storage_stats
from .errors import (
    CancelledError,
    DataLossError,
    FailedPreconditionError,
    ImageError,
    InternalError,
    InvalidArgumentError,
    InvalidDataError,
    IoError,
    NotFoundError,
    PluginError,
    ResourceExhaustedError,
    SluiceError,
    UserCodeError,
)
from .observe import Observer, report
from .pipeline import (
    Pipeline,
    PipelineIterator,
    TensorSpec,
    arrow,
    csv,
    fixed_length_records,
    from_generator,
    from_tensor_slices,
    numpy,
    parquet,
    image_folder,
    range,
    sample_from_datasets,
    choose_from_datasets,
    sql,
    text_lines,
    tfrecord,
    zip,
)

__all__ = [
    "__version__",
    "errors",
    "Pipeline",
    "PipelineIterator",
    "TensorSpec",
    "tfrecord",
    "csv",
    "text_lines",
    "fixed_length_records",
    "numpy",
    "parquet",
    "arrow",
    "image_folder",
    "sql",
    "from_tensor_slices",
    "from_generator",
    "range",
    "zip",
    "sample_from_datasets",
    "choose_from_datasets",
    "storage_stats",
    "Observer",
    "report",
    "tfds",
    "SluiceError",
    "InvalidArgumentError",
    "NotFoundError",
    "DataLossError",
    "InvalidDataError",
    "ImageError",
    "ResourceExhaustedError",
    "PluginError",
    "FailedPreconditionError",
    "IoError",
    "UserCodeError",
    "CancelledError",
    "InternalError",
]
