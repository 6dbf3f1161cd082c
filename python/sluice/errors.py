"""Sluice's exceptions: one hierarchy under :class:`SluiceError`.

Every error a pipeline raises is an instance of the subclass for its kind (named as
TensorFlow names its error classes where it has the kind). The message is the full Rust
message, and the context it carries is also given as attributes, ``None`` where the error
does not know:

- ``kind``: the kind's name (``"DataLoss"``, ``"InvalidArgument"``, ...)
- ``stage``: the stage that failed, e.g. ``"stage 3 (parse_example)"``
- ``element``: the element's id
- ``file``, ``offset``, ``record_index``: where the failing record is
- ``feature``: the feature being read
- ``line``, ``column``: where in a pipeline file (TOML) the mistake is

An exception raised by your own Python code (a ``map``/``filter`` function, a generator)
becomes :class:`UserCodeError`, with your exception as its ``__cause__``.
"""

from __future__ import annotations

from typing import Optional

__all__ = [
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


class SluiceError(Exception):
    """The base of every error Sluice raises."""

    kind: Optional[str] = None
    stage: Optional[str] = None
    element: Optional[str] = None
    file: Optional[str] = None
    offset: Optional[int] = None
    record_index: Optional[int] = None
    feature: Optional[str] = None
    line: Optional[int] = None
    column: Optional[int] = None

    @property
    def message(self) -> str:
        """The message (``str(error)``)."""
        return str(self.args[0]) if self.args else ""


class InvalidArgumentError(SluiceError, ValueError):
    """A parameter, option, argument or pipeline file is wrong."""


class NotFoundError(SluiceError, FileNotFoundError):
    """A file, a pattern's match or a plugin does not exist."""


class DataLossError(SluiceError):
    """Stored data is damaged: a checksum, a truncated record, a stream that does not
    decompress, a record that is not a ``tf.train.Example``."""


class InvalidDataError(SluiceError):
    """Well-formed data that is not what a stage needs: a missing feature, a value of the
    wrong type or shape, elements that cannot be batched."""


class ImageError(SluiceError):
    """An image that cannot be decoded or processed."""


class ResourceExhaustedError(SluiceError, MemoryError):
    """A budget or limit would be exceeded (the RAM budget, an image's pixel limit)."""


class PluginError(SluiceError):
    """A plugin could not be loaded or configured, or a call failed (its error, a panic,
    a trap, a timeout)."""


class FailedPreconditionError(SluiceError):
    """A checkpoint, cache or index cannot be used with this pipeline or file as it is."""


class IoError(SluiceError, OSError):
    """Reading or writing a file failed."""


class UserCodeError(SluiceError):
    """Your Python code (a ``map``/``filter`` function, a generator) raised; the exception
    it raised is ``__cause__``."""


class CancelledError(SluiceError):
    """The iteration was cancelled."""


class InternalError(SluiceError):
    """A bug in Sluice (please report it with the message)."""
