"""PyTorch: a Sluice pipeline as a ``torch.utils.data.IterableDataset``, and batches moved
to the accelerator ahead of the training step.

Sluice does the parallelism (its own threads, with the GIL released), so give the
DataLoader ``batch_size=None`` (the pipeline batches) and ``num_workers=0``::

    import sluice, sluice.torch, torch

    ds = sluice.torch.IterableDataset(pipeline)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)
    for batch in loader:                       # dict of torch tensors
        ...

With ``num_workers > 0``, or under ``torch.distributed``, each worker of each rank reads
its own shard of the source (a ``shard`` right after it, so every record is read exactly
once per epoch across all of them). ``state_dict()``/``load_state_dict()`` save and restore
the position, as ``torchdata.stateful_dataloader.StatefulDataLoader`` expects.

Device hand-off: :func:`prefetch_to_device` pins each batch (``pin_memory``) and copies
the next ``buffer_size`` batches to the device on a background thread, so the step never
waits on a host-to-device copy. On a machine without CUDA, asking for ``"cuda"`` or for
pinned memory raises a clear error (``device="cpu"`` runs the same machinery without a
copy).
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

try:
    import torch
    import torch.utils.data as _tud
except ImportError as e:  # pragma: no cover - said plainly to the user
    raise ImportError(
        "sluice.torch needs PyTorch: pip install torch (CPU wheels are enough)"
    ) from e

from .errors import InvalidArgumentError
from .pipeline import Pipeline, PipelineIterator

__all__ = ["IterableDataset", "to_torch", "prefetch_to_device", "shard_of_this_process"]


def to_torch(value: Any) -> Any:
    """A batch's value as torch: numeric arrays without a copy (``torch.from_numpy`` over
    Sluice's buffer; a read-only array, which Sluice shares with a cache, is copied
    instead), byte strings left as NumPy object arrays, ragged lists as lists of tensors,
    dicts value by value."""
    if isinstance(value, dict):
        return {k: to_torch(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return value
        if not value.flags.writeable:
            value = value.copy()
        return torch.from_numpy(value)
    if isinstance(value, list):
        return [to_torch(v) for v in value]
    return value


def shard_of_this_process() -> Tuple[int, int]:
    """``(num_shards, index)`` of the calling DataLoader worker of this rank: ranks of
    ``torch.distributed`` (when initialized) times the DataLoader's workers."""
    world, rank = 1, 0
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        world = torch.distributed.get_world_size()
        rank = torch.distributed.get_rank()
    info = _tud.get_worker_info()
    workers, worker = (info.num_workers, info.id) if info is not None else (1, 0)
    return world * workers, rank * workers + worker


class IterableDataset(_tud.IterableDataset):
    """A Sluice pipeline for ``torch.utils.data.DataLoader(ds, batch_size=None)``.

    - ``shard=True``: each DataLoader worker and each ``torch.distributed`` rank reads its
      own shard (:func:`shard_of_this_process`); ``False`` reads everything in each.
    - ``as_torch=True``: values become torch tensors (:func:`to_torch`); ``False`` yields
      the NumPy dicts.
    - ``pin_memory=True``: pins each batch (needs CUDA).

    Each ``iter()`` is one epoch; with ``num_workers > 0`` call :meth:`set_epoch` each
    epoch (as with ``DistributedSampler``) so workers shuffle each epoch anew. ``state_dict()`` is the position of the running epoch
    (the pipeline's checkpoint); after ``load_state_dict(state)`` the next ``iter()``
    continues there.
    """

    def __init__(
        self,
        pipeline: Pipeline,
        shard: bool = True,
        as_torch: bool = True,
        pin_memory: bool = False,
    ) -> None:
        super().__init__()
        if not isinstance(pipeline, Pipeline):
            raise InvalidArgumentError(
                f"IterableDataset takes a sluice.Pipeline, not {type(pipeline).__name__}"
            )
        if pin_memory:
            _require_cuda("pin_memory=True")
        self.pipeline = pipeline
        self.shard = shard
        self.as_torch = as_torch
        self.pin_memory = pin_memory
        self._iterator: Optional[PipelineIterator] = None
        self._resume: Optional[Union[bytes, List[bytes]]] = None
        self._epoch: Optional[int] = None
        self._shard_pipeline: Optional[Tuple[Tuple[int, int], Pipeline]] = None

    def _pipeline_here(self, elastic: bool = False) -> Pipeline:
        if not self.shard:
            return self.pipeline
        num_shards, index = shard_of_this_process()
        # One process reads the pipeline as it is (the same elements as iterating it), but
        # when it continues a run of several ranks: that run's shard stage stays, as 1/0.
        if num_shards == 1 and not elastic:
            return self.pipeline
        cached = self._shard_pipeline
        if cached is None or cached[0] != (num_shards, index):
            cached = ((num_shards, index), self.pipeline.with_shard(num_shards, index))
            self._shard_pipeline = cached
        return cached[1]

    def set_epoch(self, epoch: int) -> None:
        """Read epoch ``epoch`` on the next ``iter()`` (as ``DistributedSampler.set_epoch``):
        DataLoader workers are fresh copies of the dataset each epoch, so without it every
        epoch of a worker would shuffle as the first. Not needed with ``num_workers=0``, where
        each ``iter()`` starts the next epoch."""
        self._epoch = int(epoch)

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        resume, self._resume = self._resume, None
        pipeline = self._pipeline_here(elastic=isinstance(resume, list) and _sharded(resume))
        if self._iterator is not None:
            self._iterator.close()
        if resume is None and self._epoch is not None:
            iterator = pipeline.iter_epoch(self._epoch)
        else:
            iterator = pipeline.iter(resume=resume)
        self._iterator = iterator
        return self._generate(iterator)

    def _generate(self, iterator: PipelineIterator) -> Iterator[Dict[str, Any]]:
        try:
            for batch in iterator:
                if self.as_torch:
                    batch = to_torch(batch)
                    if self.pin_memory:
                        batch = _pin(batch)
                yield batch
        finally:
            iterator.close()

    def state_dict(self) -> Dict[str, Any]:
        """The position: ``{"checkpoint": bytes or None, "shard": [num_shards, index]}``
        (``None`` before the first element of an epoch; after its end, the end: resuming
        from it yields nothing more of that epoch, and the next ``iter()`` starts the
        next)."""
        checkpoint = None
        if self._iterator is not None and self._iterator.yielded > 0:
            try:
                checkpoint = self._iterator.checkpoint()
            except RuntimeError:
                checkpoint = None  # the run failed or was closed: nothing to continue
        return {"checkpoint": checkpoint, "shard": list(shard_of_this_process())}

    def load_state_dict(self, state: Union[Dict[str, Any], Sequence[Dict[str, Any]]]) -> None:
        """Continue at ``state`` (from :meth:`state_dict`) on the next ``iter()``.

        Given the states of **every rank** of a run (a list, e.g. gathered with
        ``torch.distributed.all_gather_object``), each rank of this run, however many there
        are now, reads its share of what the epoch has left: every record once (elastic
        resume; see :meth:`sluice.Pipeline.iter`)."""
        if isinstance(state, dict):
            self._resume = state.get("checkpoint")
            return
        checkpoints = [s.get("checkpoint") for s in state]
        present = [bytes(c) for c in checkpoints if c is not None]
        if not present:
            self._resume = None  # every rank was at an epoch's start
        elif len(present) < len(checkpoints):
            raise InvalidArgumentError(
                "load_state_dict: some ranks' states have no checkpoint (saved before their "
                "first batch) while others do: give the states every rank saved at one step"
            )
        else:
            self._resume = present

    def stats(self) -> Optional[Dict[str, Any]]:
        """The running (or latest) epoch's statistics in this process."""
        if self._iterator is not None:
            stats = self._iterator.stats()
            if stats is not None:
                return stats
        return self._pipeline_here().stats()


def _sharded(checkpoints: List[bytes]) -> bool:
    """Whether the run that took `checkpoints` had a shard stage."""
    import json

    return any(json.loads(c).get("elastic", {}).get("layout") for c in checkpoints)


def _require_cuda(what: str) -> None:
    if not torch.cuda.is_available():
        raise RuntimeError(
            f"{what} needs a CUDA device, and this machine has none "
            "(torch.cuda.is_available() is False): leave it out to train on the CPU, "
            "where batches are already in host memory"
        )


def _pin(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.pin_memory()
    if isinstance(value, dict):
        return {k: _pin(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_pin(v) for v in value]
    return value


def _to_device(value: Any, device: "torch.device", non_blocking: bool) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device, non_blocking=non_blocking)
    if isinstance(value, dict):
        return {k: _to_device(v, device, non_blocking) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_device(v, device, non_blocking) for v in value]
    return value


_END = object()


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


class prefetch_to_device(Iterator[Any]):
    """Iterates ``batches`` (dicts of tensors, e.g. a DataLoader over
    :class:`IterableDataset`) with the next ``buffer_size`` batches already on ``device``:
    a background thread pins each batch (``pin_memory``, CUDA only) and copies it with
    ``non_blocking=True`` on its own CUDA stream, so the training step never waits on the
    copy. ``device="cpu"`` runs the thread without a copy. Errors from ``batches`` are
    raised here, in order; ``close()`` stops the thread."""

    def __init__(
        self,
        batches: Iterable[Any],
        device: Any = "cuda",
        buffer_size: int = 2,
        pin_memory: Optional[bool] = None,
    ) -> None:
        if buffer_size < 1:
            raise InvalidArgumentError("prefetch_to_device: buffer_size must be at least 1")
        self.device = torch.device(device)
        cuda = self.device.type == "cuda"
        if cuda:
            _require_cuda(f"prefetch_to_device({str(device)!r})")
        if pin_memory is None:
            pin_memory = cuda
        if pin_memory:
            _require_cuda("pin_memory=True")
        self._pin = pin_memory
        self._stream = torch.cuda.Stream(self.device) if cuda else None
        self._queue: "queue.Queue[Any]" = queue.Queue(maxsize=buffer_size)
        self._stop = threading.Event()
        self._source = iter(batches)
        self._thread = threading.Thread(target=self._run, name="sluice-to-device", daemon=True)
        self._thread.start()

    def _put(self, item: Any) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        try:
            for batch in self._source:
                if self._stop.is_set():
                    return
                if self._pin:
                    batch = _pin(batch)
                if self._stream is not None:
                    with torch.cuda.stream(self._stream):
                        moved = _to_device(batch, self.device, non_blocking=True)
                    event = torch.cuda.Event()
                    event.record(self._stream)
                    item: Tuple[Any, Optional["torch.cuda.Event"]] = (moved, event)
                else:
                    item = (_to_device(batch, self.device, non_blocking=False), None)
                if not self._put(item):
                    return
        except BaseException as e:  # handed to the consumer, raised there
            self._put(_Failed(e))
            return
        self._put(_END)

    def __iter__(self) -> "prefetch_to_device":
        return self

    def __next__(self) -> Any:
        while True:
            try:
                item = self._queue.get(timeout=0.05)
                break
            except queue.Empty:
                if not self._thread.is_alive() and self._queue.empty():
                    raise StopIteration
        if item is _END:
            raise StopIteration
        if isinstance(item, _Failed):
            raise item.error
        batch, event = item
        if event is not None:
            torch.cuda.current_stream(self.device).wait_event(event)
        return batch

    def close(self) -> None:
        """Stops the background thread."""
        self._stop.set()
        self._thread.join(timeout=5)
