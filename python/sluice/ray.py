"""Sluice on Ray: read with Sluice into a Ray Dataset, preprocess on Ray's CPU workers, write
TFRecord shards.

Three pieces, each usable alone (see docs/scaling.md for when to use which):

- :func:`read` (a :class:`SluiceDatasource`): Ray Data read tasks that each run a Sluice
  pipeline over their part of the data. Task ``i`` of ``n`` runs
  ``pipeline.with_shard(n, i)``, Sluice's exactly-once shard (whole files when there are
  enough files, records otherwise), so the tasks together read every record once.
- :class:`SluiceTransform` / :func:`map_batches`: Sluice stages (``parse_example``,
  ``image_ops``, ``map_plugin``/``filter_plugin`` with native or WASM plugins, Python
  ``map``/``filter``) applied to each batch of a Ray Dataset in ``map_batches`` actors; the
  stages are built and the plugins loaded once per actor.
- :func:`write_tfrecord`: a Ray Dataset as ``num_shards`` TFRecord files of
  ``tf.train.Example`` (the encoding of ``sluice run --output``), each whole under its name
  or absent, also when a write task is killed and retried.

::

    import ray, sluice, sluice.ray

    ds = sluice.ray.read("examples/pipelines/augment.toml", data="DIR")  # batches of 64
    for batch in ds.iter_torch_batches(batch_size=None):
        ...                                       # {"image": (64, 224, 224, 3), "label": (64,)}

    # Disaggregated: read and parse with Sluice in read tasks, decode and augment (and a
    # WASM plugin) on a pool of 4 actors:
    raw = sluice.ray.read(sluice.tfrecord("s3://bucket/train-*").parse_example(
        {"image": "string", "label": "int64"}))
    steps = (sluice.ray.stages()
             .image_ops([{"op": "decode", "channels": 3},
                         {"op": "random_crop", "height": 224, "width": 224}])
             .map_plugin("solarize.wasm", {"p_solarize": 0.2})
             .options(seed=1))
    ds = sluice.ray.map_batches(raw, steps, batch_size=64, concurrency=4)
    sluice.ray.write_tfrecord(ds, "s3://bucket/prepared/", num_shards=8)

Needs Ray Data (``pip install 'sluice[ray]'``, Ray 2.52 or newer).
"""

from __future__ import annotations

import functools
import glob
import json
import os
import secrets
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

try:
    import ray
    import ray.data
    from ray.data.block import BlockAccessor, BlockMetadata
    from ray.data.datasource import Datasource, ReadTask
except ImportError as e:  # pragma: no cover - said plainly to the user
    raise ImportError(
        "sluice.ray needs Ray Data: pip install 'sluice[ray]' (or 'ray[data]>=2.52')"
    ) from e

from . import _sluice
from .errors import InvalidArgumentError
from .pipeline import Pipeline, _make_source

__all__ = [
    "read",
    "SluiceDatasource",
    "stages",
    "SluiceTransform",
    "map_batches",
    "write_tfrecord",
]

PipelineLike = Union[Pipeline, str, "os.PathLike[str]"]

#: Rows of an unbatched pipeline gathered into one block (at most), and bytes (at most,
#: checked after each row): blocks are cut by these two rules alone, so a retried read task
#: cuts the same blocks.
ROWS_PER_BLOCK = 1024
BYTES_PER_BLOCK = 32 << 20

_BATCHING = {"batch": True, "padded_batch": True, "unbatch": False}


def _as_pipeline(
    pipeline: PipelineLike,
    data: Optional[Union[str, "os.PathLike[str]"]],
    plugin_dir: Optional[Union[str, "os.PathLike[str]"]],
) -> Pipeline:
    if isinstance(pipeline, Pipeline):
        if data is not None or plugin_dir is not None:
            pipeline = Pipeline(
                pipeline._source,
                pipeline._ops,
                pipeline._options,
                os.fspath(data) if data is not None else pipeline._data_dir,
                os.fspath(plugin_dir) if plugin_dir is not None else pipeline._plugin_dir,
                pipeline._shard,
            )
        return pipeline
    if isinstance(pipeline, (str, os.PathLike)):
        return Pipeline.from_toml(pipeline, data=data, plugin_dir=plugin_dir)
    raise InvalidArgumentError(
        f"expected a sluice.Pipeline or a pipeline file (path or TOML text), not "
        f"{type(pipeline).__name__}"
    )


def _is_file_source(pipeline: Pipeline) -> bool:
    return pipeline._recipe is not None and pipeline._recipe[0] in (
        "toml_file",
        "toml_text",
        "tfrecord",
    )


def _seed_of(pipeline: Pipeline) -> Optional[int]:
    seed = pipeline._options.get("seed")
    if seed is None and pipeline._source.inner is not None:
        raw = pipeline._source.inner.file_options_json()
        if raw:
            seed = json.loads(raw).get("seed")
    return seed


def _output_is_batched(pipeline: Pipeline) -> bool:
    batched = bool(pipeline._source.inner is not None and pipeline._source.inner.output_is_batched())
    for op in pipeline._ops:
        if op[0] == "stage":
            kind = json.loads(op[1])["kind"]
            batched = _BATCHING.get(kind, batched)
    return batched


def _file_level_tasks(files: int, want: int) -> int:
    """The most tasks, at most ``want``, that Sluice shards by whole files: every task gets
    a file and no task more than 1.25 times another's count (docs/multi-host.md)."""
    for n in range(min(want, files), 0, -1):
        most, least = -(-files // n), files // n
        if least >= 1 and most <= 1.25 * least:
            return n
    return 1


def _assigned_cpus() -> Optional[int]:
    try:
        cpus = ray.get_runtime_context().get_assigned_resources().get("CPU")
    except Exception:  # not in a Ray worker
        return None
    return max(1, int(round(cpus))) if cpus else None


def _with_cpu_budget(pipeline: Pipeline) -> Pipeline:
    """Caps Sluice's threads per stage at the CPUs Ray gave this task or actor (unless the
    pipeline sets ``cpu_budget`` itself): Sluice's output does not depend on it."""
    if "cpu_budget" in pipeline._options:
        return pipeline
    cpus = _assigned_cpus()
    return pipeline.options(cpu_budget=cpus) if cpus else pipeline


def _column(values: Sequence[Any]) -> Any:
    """Rows of one feature as one array: stacked when they share a shape, else an object
    array of arrays (Ray's variable-shaped tensor column)."""
    first = values[0]
    if isinstance(first, list):  # a ragged value: rows of different lengths
        values = [np.asarray(v) for v in values]
        first = values[0]
    if all(getattr(v, "shape", None) == first.shape for v in values):
        return np.stack(values)
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        out[i] = v
    return out


def _batch_columns(batch: Mapping[str, Any]) -> Dict[str, Any]:
    """A Sluice batch as Ray's numpy batch format: ragged values (lists of arrays, one per
    row) become object arrays of arrays; dense arrays pass as they are (no copy)."""
    return {k: (_column(v) if isinstance(v, list) else v) for k, v in batch.items()}


def _rows_columns(rows: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
    return {k: _column([r[k] for r in rows]) for k in rows[0]}


def _nbytes(element: Mapping[str, Any]) -> int:
    total = 0
    for v in element.values():
        if isinstance(v, np.ndarray) and v.dtype != object:
            total += v.nbytes
        elif isinstance(v, np.ndarray):
            total += sum(len(x) for x in v.ravel() if isinstance(x, (bytes, str)))
        elif isinstance(v, list):
            total += sum(getattr(x, "nbytes", 0) for x in v)
    return total


def _read_shard(
    pipeline: Pipeline, num_tasks: int, index: int, epoch: int, batched: bool, rows_per_block: int
) -> Iterator[Any]:
    """Read task ``index`` of ``num_tasks``: its shard of ``pipeline``, epoch ``epoch``, as
    blocks. Deterministic (the pipeline has a seed, blocks are cut by counts and sizes), so
    a retried attempt yields the same blocks: Ray keeps the blocks a failed attempt already
    yielded and drops the retry's first ones, which must be equal for exactly-once."""
    shard = pipeline.with_shard(num_tasks, index) if num_tasks > 1 else pipeline
    shard = _with_cpu_budget(shard)
    iterator = shard.iter_epoch(epoch)
    try:
        if batched:
            for batch in iterator:
                yield BlockAccessor.batch_to_block(_batch_columns(batch))
            return
        rows: List[Mapping[str, Any]] = []
        size = 0
        for element in iterator:
            rows.append(element)
            size += _nbytes(element)
            if len(rows) >= rows_per_block or size >= BYTES_PER_BLOCK:
                yield BlockAccessor.batch_to_block(_rows_columns(rows))
                rows, size = [], 0
        if rows:
            yield BlockAccessor.batch_to_block(_rows_columns(rows))
    finally:
        iterator.close()


class SluiceDatasource(Datasource):
    """A Ray Data datasource whose read tasks run a Sluice pipeline, each over its shard
    (see :func:`read`, which makes one and reads it)."""

    def __init__(
        self,
        pipeline: PipelineLike,
        *,
        num_tasks: Optional[int] = None,
        data: Optional[Union[str, "os.PathLike[str]"]] = None,
        plugin_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
        epoch: int = 0,
        rows_per_block: Optional[int] = None,
    ) -> None:
        super().__init__()
        pipeline = _as_pipeline(pipeline, data, plugin_dir)
        if pipeline._source.inner is None:
            raise InvalidArgumentError(
                "sluice.ray.read needs a pipeline with a source, not a stages() fragment"
            )
        if num_tasks is not None and num_tasks < 1:
            raise InvalidArgumentError(f"num_tasks must be at least 1, got {num_tasks}")
        if epoch < 0:
            raise InvalidArgumentError(f"epoch must be >= 0, got {epoch}")
        # Every attempt of every task must draw the same random decisions (shuffles,
        # augmentations), or a retried task would yield other records than the blocks its
        # failed attempt already gave Ray: fix a seed now when the pipeline has none.
        if _seed_of(pipeline) is None:
            pipeline = pipeline.options(seed=secrets.randbits(63))
        self._pipeline = pipeline
        self._num_tasks = num_tasks
        # CPUs each read task reserves, to cap the default task count at what runs at once
        # (None: the count Ray asked for, from override_num_blocks, is the cap).
        self._task_cpus: Optional[float] = 1.0
        self._epoch = int(epoch)
        self._rows_per_block = int(rows_per_block or ROWS_PER_BLOCK)
        self._batched = _output_is_batched(pipeline)
        self._files: List[Tuple[str, Optional[int]]] = []
        if _is_file_source(pipeline) and pipeline._source.inner is not None:
            self._files = pipeline._source.inner.list_files(pipeline._data_dir)

    @property
    def pipeline(self) -> Pipeline:
        """The pipeline every read task runs a shard of (with the seed fixed)."""
        return self._pipeline

    def get_name(self) -> str:
        """``Sluice`` (Ray names the read operator after it)."""
        return "Sluice"

    def estimate_inmemory_data_size(self) -> Optional[int]:
        """The files' size in bytes when the source is files whose sizes are known (the
        data as stored: decoded images take more memory), else None."""
        sizes = [s for _, s in self._files]
        if not sizes or any(s is None for s in sizes):
            return None
        return int(sum(s for s in sizes if s is not None))

    def num_tasks_for(self, parallelism: int) -> int:
        """The read tasks for Ray's requested ``parallelism``: ``num_tasks`` when given;
        else at most as many as can run at once (the cluster's CPUs over each task's
        ``num_cpus``; ``parallelism`` when ``override_num_blocks`` gave it) and, over files,
        the most of those that Sluice shards by whole files, so that no task reads another's
        files. Fewer, longer tasks: each task starts a pipeline (files opened, buffers
        filled), and Ray Data runs as many at once as the CPUs allow."""
        if self._num_tasks is not None:
            return self._num_tasks
        want = max(1, int(parallelism))
        if self._task_cpus is not None:
            cpus = float(ray.cluster_resources().get("CPU", 1))
            want = min(want, max(1, int(cpus // max(self._task_cpus, 1e-9))))
        if self._files:
            return _file_level_tasks(len(self._files), want)
        return want

    def get_read_tasks(
        self,
        parallelism: int,
        per_task_row_limit: Optional[int] = None,
        data_context: Optional[Any] = None,
    ) -> List[ReadTask]:
        """One read task per shard (see :meth:`num_tasks_for`)."""
        n = self.num_tasks_for(parallelism)
        names = [f for f, _ in self._files]
        total = self.estimate_inmemory_data_size()
        file_level = bool(self._files) and _file_level_tasks(len(self._files), n) == n
        tasks = []
        for i in range(n):
            if file_level:
                mine = list(range(i, len(self._files), n))
                files = [names[j] for j in mine]
                sizes = [self._files[j][1] for j in mine]
                size = None if total is None else int(sum(s or 0 for s in sizes))
            else:
                files = names
                size = None if total is None else total // n
            metadata = BlockMetadata(
                num_rows=None, size_bytes=size, input_files=tuple(files), exec_stats=None
            )
            read_fn = functools.partial(
                _read_shard, self._pipeline, n, i, self._epoch, self._batched, self._rows_per_block
            )
            tasks.append(ReadTask(read_fn, metadata, per_task_row_limit=per_task_row_limit))
        return tasks


def read(
    pipeline_or_toml: PipelineLike,
    *,
    num_tasks: Optional[int] = None,
    data: Optional[Union[str, "os.PathLike[str]"]] = None,
    plugin_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
    epoch: int = 0,
    rows_per_block: Optional[int] = None,
    **ray_options: Any,
) -> "ray.data.Dataset":
    """A Ray Dataset of a Sluice pipeline's elements, read by Ray tasks that each run the
    pipeline over their shard: task ``i`` of ``n`` runs ``pipeline.with_shard(n, i)``, so
    every record is read by exactly one task (docs/multi-host.md), also when Ray retries a
    task whose worker died.

    - ``pipeline_or_toml``: a :class:`sluice.Pipeline` (it is pickled to the tasks) or a
      pipeline file (path or TOML text, as :meth:`sluice.Pipeline.from_toml`). Local paths
      must be readable on every node; object-store URLs (``s3://``, ``gs://``, ...) are read
      by each task directly.
    - ``num_tasks``: read tasks. Default: as many as run at once (the cluster's CPUs over
      ``num_cpus`` per task, or ``override_num_blocks``) and, over files, the most of those
      that Sluice shards by whole files (each file read by one task); more tasks than files
      shard by record, each task reading every file and keeping its records.
    - ``num_cpus`` (in ``ray_options``): CPUs each task reserves, and Sluice's
      ``cpu_budget`` in it (unless the pipeline sets one): give a read task the CPUs its
      threads should use.
    - ``data``, ``plugin_dir``: as ``sluice run --data`` / ``--plugin-dir``.
    - ``epoch``: the epoch to read (shuffles and random augmentations differ per epoch; Ray
      runs a dataset afresh each time it is iterated, so give each epoch's number).
    - ``rows_per_block``: rows per block when the pipeline does not batch (default 1024,
      and at most 32 MiB); a batching pipeline gives one block per batch.
    - ``ray_options``: given to ``ray.data.read_datasource``: ``override_num_blocks``,
      ``concurrency``, ``num_cpus``, ``memory``, ``ray_remote_args``, ...

    A pipeline without a seed gets one drawn now, shared by every task and attempt (a
    retried task must repeat its random decisions). Elements become rows: numeric arrays as
    tensor columns (multi-dimensional values kept), byte strings as binary columns; a
    batching pipeline's batches become blocks as they are. Errors in a task (a damaged
    record, ...) reach the caller as Ray's task error wrapping the Sluice exception, whose
    message names the file and offset.
    """
    datasource = SluiceDatasource(
        pipeline_or_toml,
        num_tasks=num_tasks,
        data=data,
        plugin_dir=plugin_dir,
        epoch=epoch,
        rows_per_block=rows_per_block,
    )
    if "override_num_blocks" not in ray_options:
        # Ray splits every block of a read that makes fewer tasks than the parallelism it
        # asked for (SplitBlocks: a batch of 64 becomes slices of a few rows): ask for
        # exactly the tasks the datasource makes.
        if num_tasks is None:
            if not ray.is_initialized():
                ray.init()
            datasource._task_cpus = float(ray_options.get("num_cpus") or 1)
            num_tasks = datasource.num_tasks_for(1 << 30)
        ray_options["override_num_blocks"] = num_tasks
    datasource._task_cpus = None
    return ray.data.read_datasource(datasource, **ray_options)


def stages() -> Pipeline:
    """An empty fragment of stages: build it with the same methods as a pipeline
    (``.parse_example``, ``.image_ops``, ``.map_plugin``, ``.filter_plugin``, ``.map``,
    ``.filter``, ``.options(seed=...)``) and give it to :func:`map_batches` or
    :class:`SluiceTransform`. It has no source, so it cannot be iterated by itself."""
    return Pipeline(_make_source(("fragment",)))


def _numpy_columns(batch: Any) -> Dict[str, Any]:
    if isinstance(batch, Mapping):
        return dict(batch)
    # A pyarrow table or a pandas DataFrame (batch_format other than "numpy").
    return dict(BlockAccessor.for_block(batch).to_numpy())


class SluiceTransform:
    """Sluice stages as a Ray Data ``map_batches`` callable class: built once per actor
    (every plugin loaded once), then applied to each batch::

        ds.map_batches(sluice.ray.SluiceTransform, fn_constructor_args=(steps,),
                       batch_size=64, batch_format="numpy", concurrency=4)

    ``steps``: a :func:`stages` fragment, or a pipeline file (path, TOML text or
    :meth:`sluice.Pipeline.from_toml`) whose stages run (its source is not read). The stages
    must be element-wise: ``parse_example``, ``image_ops``, ``plugin``
    (``map_plugin``/``filter_plugin``), Python ``map``/``filter``.

    Each batch's rows become Sluice elements (each column copied once into Sluice's memory)
    and go through the stages, in Sluice's threads with the GIL released. With ``stack``
    (the default) the output is one batch (a dict of arrays with a leading row dimension,
    NumPy arrays over the buffer Sluice wrote, not copied): the rows must then have one
    shape per feature, as ``batch`` needs (resize or crop images). ``stack=False`` gives
    rows of any shapes (object columns of arrays). Rows a filter drops are left out; a
    batch with none left gives no output.

    Random decisions are keyed by the seed, ``epoch`` and each row's id: a CRC32C of the
    row's values, or the integer column ``id_column``. So with a seed a row gets the same
    augmentation whatever batch, block or actor it lands in; give each epoch's number as
    ``epoch`` for new draws. Without a seed each batch draws its own.
    ``cpu_budget``: Sluice threads per stage (default: the CPUs Ray gave the actor).
    """

    def __init__(
        self,
        steps: PipelineLike,
        *,
        epoch: int = 0,
        stack: bool = True,
        id_column: Optional[str] = None,
        cpu_budget: Optional[int] = None,
        plugin_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
    ) -> None:
        if isinstance(steps, (str, os.PathLike)):
            steps = Pipeline.from_toml(steps, plugin_dir=plugin_dir)
        if not isinstance(steps, Pipeline):
            raise InvalidArgumentError(
                f"SluiceTransform takes sluice.ray.stages() or a pipeline file, not "
                f"{type(steps).__name__}"
            )
        kind = steps._recipe[0] if steps._recipe else None
        if kind not in ("fragment", "toml_file", "toml_text"):
            raise InvalidArgumentError(
                "SluiceTransform runs stages on the batches Ray gives it: build them on "
                "sluice.ray.stages() (or give a pipeline file), not on a pipeline that reads data"
            )
        options = dict(steps._options)
        if cpu_budget is not None:
            options["cpu_budget"] = int(cpu_budget)
        elif "cpu_budget" not in options:
            cpus = _assigned_cpus()
            if cpus:
                options["cpu_budget"] = cpus
        source = steps._source.inner if kind != "fragment" else None
        directory = plugin_dir if plugin_dir is not None else steps._plugin_dir
        self._transform = _sluice.Transform(
            list(steps._ops),
            source,
            json.dumps(options) if options else None,
            os.fspath(directory) if directory is not None else None,
            int(epoch),
        )
        self._stack = bool(stack)
        self._id_column = id_column

    def __call__(self, batch: Any) -> Iterator[Dict[str, Any]]:
        """The stages applied to ``batch`` (a dict of arrays, or a pyarrow table or pandas
        DataFrame): yields the output batch, or nothing when every row was dropped."""
        columns = _numpy_columns(batch)
        out = self._transform.apply(columns, self._stack, self._id_column)
        if out is None:
            return
        if isinstance(out, dict):
            yield _batch_columns(out)
        elif out:
            yield _rows_columns(list(out))


def map_batches(
    ds: "ray.data.Dataset",
    steps: PipelineLike,
    *,
    batch_size: Optional[int] = 64,
    concurrency: Optional[Union[int, Tuple[int, int]]] = None,
    num_cpus: float = 1,
    epoch: int = 0,
    stack: bool = True,
    id_column: Optional[str] = None,
    **map_batches_args: Any,
) -> "ray.data.Dataset":
    """``ds`` with Sluice ``steps`` applied to each batch of ``batch_size`` rows, in a pool
    of ``concurrency`` actors of ``num_cpus`` CPUs each (default: as many as the cluster's
    CPUs allow): ``ds.map_batches(SluiceTransform, ...)`` with the batches given as NumPy
    without a copy (``zero_copy_batch``: Sluice copies each column once into its own
    memory). See :class:`SluiceTransform` for ``steps``, ``epoch``, ``stack`` and
    ``id_column``; other arguments go to ``Dataset.map_batches``."""
    if isinstance(concurrency, int):
        compute = ray.data.ActorPoolStrategy(size=concurrency)
    elif concurrency is not None:
        compute = ray.data.ActorPoolStrategy(min_size=concurrency[0], max_size=concurrency[1])
    else:
        cpus = int(ray.cluster_resources().get("CPU", 1))
        compute = ray.data.ActorPoolStrategy(
            min_size=1, max_size=max(1, int(cpus // max(num_cpus, 1e-9)))
        )
    return ds.map_batches(
        SluiceTransform,
        fn_constructor_args=(steps,),
        fn_constructor_kwargs={"epoch": epoch, "stack": stack, "id_column": id_column},
        batch_size=batch_size,
        batch_format="numpy",
        zero_copy_batch=True,
        compute=compute,
        num_cpus=num_cpus,
        **map_batches_args,
    )


_SUFFIX = {"none": "", "gzip": ".gz", "zlib": ".zlib"}


def shard_name(prefix: str, index: int, num_shards: int, compression: str = "none") -> str:
    """The name of shard ``index`` of ``num_shards``: ``PREFIX-00003-of-00008.tfrecord``
    (``.gz`` / ``.zlib`` added when compressed)."""
    return f"{prefix}-{index:05d}-of-{num_shards:05d}.tfrecord{_SUFFIX[compression]}"


def _join(base: str, name: str) -> str:
    if "://" in base:
        return base.rstrip("/") + "/" + name
    return os.path.join(base, name)


def _writable(columns: Mapping[str, Any]) -> Dict[str, Any]:
    """Columns in dtypes Sluice holds: small and unsigned integers and booleans as int64,
    float16 as float32 (an Example has int64 and float lists only)."""
    out = {}
    for name, value in columns.items():
        if isinstance(value, np.ndarray) and value.dtype != object:
            kind, size = value.dtype.kind, value.dtype.itemsize
            if kind == "b" or (kind in "iu" and (kind, size) not in (("i", 4), ("i", 8), ("u", 1))):
                value = value.astype(np.int64)
            elif kind == "f" and size == 2:
                value = value.astype(np.float32)
        out[name] = value
    return out


_ROWS_PER_WRITE = 512


def _write_shard(url: str, compression: str, storage: Optional[str], *blocks: Any) -> Tuple[str, int]:
    writer = _sluice.TfRecordWriter(url, compression, storage)
    try:
        for block in blocks:
            accessor = BlockAccessor.for_block(block)
            rows = accessor.num_rows()
            for start in range(0, rows, _ROWS_PER_WRITE):
                part = accessor.slice(start, min(rows, start + _ROWS_PER_WRITE), copy=False)
                columns = BlockAccessor.for_block(part).to_numpy()
                if not isinstance(columns, dict):  # a block of one unnamed column
                    columns = {"value": columns}
                writer.write(_writable(columns))
        return writer.name, writer.commit()
    except BaseException:
        writer.abort()
        raise


def write_tfrecord(
    ds: "ray.data.Dataset",
    url_or_dir: Union[str, "os.PathLike[str]"],
    *,
    num_shards: int,
    compression: str = "none",
    prefix: str = "part",
    storage: Optional[Mapping[str, Any]] = None,
    **ray_remote_args: Any,
) -> List[Tuple[str, int]]:
    """Writes ``ds`` as ``num_shards`` TFRecord files of ``tf.train.Example`` in
    ``url_or_dir`` (a local directory or an object-store URL), named
    :func:`shard_name` (``part-00000-of-00008.tfrecord``, ...); returns ``(path, records)``
    per shard, in order.

    The encoding is ``sluice run --output``'s (its single-host equivalent): one feature per
    column, values flattened row-major (read them back with ``fixed_len`` features of the
    known shape); byte strings a ``bytes_list``, integers an ``int64_list``, floats a
    ``float_list``. ``compression``: ``"none"``, ``"gzip"``, ``"zlib"``.

    The dataset is repartitioned into ``num_shards`` blocks (Ray's split-and-combine, no
    shuffle: a barrier that holds the dataset in the object store, spilling to disk) and each
    shard is written by one Ray task (``ray_remote_args``, e.g. ``num_cpus``,
    ``max_retries``: default 3). Each file appears whole under its final name or not at all:
    local files are written under a hidden temporary name and renamed, objects by a
    multipart upload completed at the end; a task killed midway leaves nothing under the
    name, and its retry writes the whole shard again (the killed attempt's hidden temporary
    file is removed at the end). Every shard is written, empty ones too, so the ``-of-N``
    names are always complete.
    """
    if num_shards < 1:
        raise InvalidArgumentError(f"num_shards must be at least 1, got {num_shards}")
    compression = compression.lower()
    if compression not in _SUFFIX:
        raise InvalidArgumentError(
            f"compression must be 'none', 'gzip' or 'zlib', not {compression!r}"
        )
    base = os.fspath(url_or_dir)
    storage_json = json.dumps(dict(storage)) if storage else None
    refs = ds.repartition(num_shards).to_arrow_refs()
    # Exactly num_shards blocks, as Ray promises; if a version gave another count, shard i
    # takes a contiguous run of them, so every row is still written once.
    groups = [refs[len(refs) * i // num_shards : len(refs) * (i + 1) // num_shards] for i in range(num_shards)]
    options = {"num_cpus": 1, "max_retries": 3}
    options.update(ray_remote_args)
    task = ray.remote(_write_shard).options(**options)
    pending = [
        task.remote(_join(base, shard_name(prefix, i, num_shards, compression)), compression, storage_json, *group)
        for i, group in enumerate(groups)
    ]
    written = [(name, int(records)) for name, records in ray.get(pending)]
    if "://" not in base:
        # The hidden temporary files of attempts that were killed (their retries wrote the
        # shards): remove them, now that every shard is in place.
        for i in range(num_shards):
            name = shard_name(prefix, i, num_shards, compression)
            for leftover in glob.glob(os.path.join(glob.escape(base), f".{glob.escape(name)}.partial-*")):
                try:
                    os.remove(leftover)
                except FileNotFoundError:
                    pass
    return written
