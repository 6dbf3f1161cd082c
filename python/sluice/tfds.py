"""TensorFlow Datasets data directories, read without TensorFlow.

:func:`load` takes ``tfds.load``'s parameters with their meaning and reads a dataset TFDS
has prepared (``DATA_DIR/NAME[/CONFIG]/VERSION/`` with ``dataset_info.json``,
``features.json`` and ``tfrecord`` shards): the version (a pattern such as ``3.*.*`` picks
the newest prepared match), the split with TFDS's slicing and rounding, the order TFDS
reads the shards in, and its default decoding (images ``uint8 [H, W, C]``, class labels
``int64``, tensors in their dtype and shape, text as ``bytes``).

>>> import sluice.tfds
>>> ds = sluice.tfds.load("mnist:3.*.*", split="train[:10%]", as_supervised=True,
...                       batch_size=32)                      # doctest: +SKIP
>>> for images, labels in ds:                                 # doctest: +SKIP
...     images.shape, labels.dtype           # (32, 28, 28, 1), int64

Elements are dicts, feature name -> ``numpy.ndarray``, nested ``FeaturesDict`` names
joined with ``/`` (``"meta/id"``). With ``as_supervised=True`` iterating yields
``(x, y)`` tuples of the two ``supervised_keys`` features; stages added to the pipeline
(``map``, ``filter``) still see the element as a dict under those two names (e.g.
``{"image": ..., "label": ...}``).

Sluice never downloads or prepares datasets: prepare them once with TFDS
(``tfds.builder(name).download_and_prepare()``), then read them here. Shards in
``array_record``, ``riegeli`` or ``parquet`` are not read.
"""

import json
import os
from typing import Any, Dict, List, Optional, Union

from ._sluice import tfds_info
from .errors import InvalidArgumentError
from .pipeline import Pipeline, _make_source

__all__ = ["load", "info", "list_builders"]

PathLike = Union[str, "os.PathLike[str]"]


def _data_dir(data_dir: Optional[PathLike]) -> Optional[str]:
    return os.fspath(data_dir) if data_dir is not None else None


def info(name: str, data_dir: Optional[PathLike] = None) -> Dict[str, Any]:
    """A prepared dataset's info (as ``sluice tfds info --json``): ``name``, ``config``,
    ``version``, ``dir``, ``file_format``, ``splits`` (``name``, ``shard_lengths``,
    ``num_bytes``, ``filepath_template``), ``supervised_keys`` and ``features`` (``name``,
    ``kind``, ``dtype``, ``shape``, class ``names``)."""
    return json.loads(tfds_info(name, _data_dir(data_dir)))


def list_builders(data_dir: Optional[PathLike] = None) -> List[str]:
    """The prepared datasets of ``data_dir`` (``NAME`` or ``NAME/CONFIG``)."""
    root = _data_dir(data_dir) or os.environ.get("TFDS_DATA_DIR") or os.path.expanduser(
        "~/tensorflow_datasets"
    )
    out = []
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if not os.path.isdir(path) or name.startswith((".", "incomplete")):
            continue
        try:
            info(name, root)
            out.append(name)
        except Exception:  # noqa: BLE001 - configs, or not a dataset
            for config in sorted(os.listdir(path)):
                try:
                    info(f"{name}/{config}", root)
                    out.append(f"{name}/{config}")
                except Exception:  # noqa: BLE001
                    pass
    return out


def _one(
    name: str,
    split: str,
    data_dir: Optional[str],
    batch_size: Optional[int],
    shuffle_files: bool,
    as_supervised: bool,
    decode_images: bool,
) -> Pipeline:
    spec: Dict[str, Any] = {"format": "tfds", "name": name, "split": split}
    if data_dir is not None:
        spec["data_dir"] = data_dir
    if shuffle_files:
        spec["shuffle_files"] = True
    if as_supervised:
        spec["as_supervised"] = True
    if not decode_images:
        spec["decode_images"] = False
    meta = json.loads(tfds_info(name, data_dir, split))
    supervised = None
    if as_supervised:
        keys = meta.get("supervised_keys")
        if not keys:
            raise InvalidArgumentError(
                f"tfds: as_supervised: {meta['name']} {meta['version']} has no supervised_keys"
            )
        supervised = (keys[0], keys[1])
    pipeline = Pipeline(_make_source(("tfds", json.dumps(spec), supervised)))
    # Resolve the split and shards now, as tfds.load does: errors are raised here.
    pipeline._dataset()
    if batch_size is not None:
        if batch_size == -1:
            batch_size = max(int(meta["num_examples"]), 1)
        elif batch_size < 1:
            raise InvalidArgumentError(
                f"tfds: batch_size must be >= 1, or -1 for the whole split, got {batch_size}"
            )
        pipeline = pipeline.batch(batch_size)
    return pipeline


def load(
    name: str,
    *,
    split: Optional[Union[str, List[str]]] = None,
    data_dir: Optional[PathLike] = None,
    batch_size: Optional[int] = None,
    shuffle_files: bool = False,
    download: bool = True,
    as_supervised: bool = False,
    decoders: Optional[Dict[str, Any]] = None,
    with_info: bool = False,
    read_config: Any = None,
) -> Any:
    """``tfds.load``: the prepared dataset ``name`` (``NAME``, ``NAME:VERSION``,
    ``NAME/CONFIG:VERSION``; a version may be a pattern such as ``3.*.*``) as a
    :class:`sluice.Pipeline`.

    - ``split``: a split string in TFDS's syntax (``"train"``, ``"train[:10%]"``,
      ``"train[10%:20%]"``, ``"test[-10:]"``, ``"train+test"``, ``"all"``), a list of them
      (a list of pipelines), or ``None``: a dict of every split's pipeline.
    - ``data_dir``: default ``$TFDS_DATA_DIR``, else ``~/tensorflow_datasets``.
    - ``batch_size``: batches of that many (``-1``: the whole split as one batch).
    - ``shuffle_files``: read the shards in another order each epoch (seeded by the
      pipeline's seed, ``.options(seed=...)``).
    - ``as_supervised``: yield ``(x, y)`` tuples of the ``supervised_keys`` features.
    - ``decoders``: ``None``, or ``{"image": "skip"}`` (TFDS's ``SkipDecoding``) for every
      image feature to stay encoded bytes. Any other decoder is refused.
    - ``with_info``: also return :func:`info` (a dict).
    - ``download``: Sluice never downloads; it only reads prepared data (accepted for
      ``tfds.load`` compatibility). ``read_config``: not supported (``None``).
    """
    del download
    if read_config is not None:
        raise InvalidArgumentError("tfds.load: read_config is not supported by Sluice")
    decode_images = True
    if decoders:
        skips = {k for k, v in decoders.items() if _is_skip(v)}
        if skips != set(decoders):
            raise InvalidArgumentError(
                f"tfds.load: decoders: only SkipDecoding (or \"skip\") is supported, got "
                f"{decoders!r}"
            )
        decode_images = False
    data_dir = _data_dir(data_dir)
    args = (data_dir, batch_size, shuffle_files, as_supervised, decode_images)
    if split is None:
        meta = info(name, data_dir)
        result: Any = {s["name"]: _one(name, s["name"], *args) for s in meta["splits"]}
    elif isinstance(split, (list, tuple)):
        result = [_one(name, s, *args) for s in split]
    else:
        result = _one(name, str(split), *args)
    if with_info:
        return result, info(name, data_dir)
    return result


def _is_skip(decoder: Any) -> bool:
    if isinstance(decoder, str):
        return decoder.lower() in ("skip", "skipdecoding")
    return type(decoder).__name__ == "SkipDecoding"
