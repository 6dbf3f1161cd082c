"""Pipelines: what to read, the stages, the options; and their iterators."""

from __future__ import annotations

import builtins
import json
import os
import sys
import time
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
)

import numpy as np

from . import _sluice
from .errors import InvalidArgumentError

if TYPE_CHECKING:
    from .observe import Observer

__all__ = [
    "Pipeline",
    "range",
    "zip",
    "sample_from_datasets",
    "choose_from_datasets",
    "PipelineIterator",
    "TensorSpec",
    "tfrecord",
    "from_tensor_slices",
    "from_generator",
]

NumParallel = Union[int, str, None]
Element = Dict[str, Any]

_OPTION_KEYS = ("seed", "cpu_budget", "ram_budget", "error_policy", "map_and_batch_fusion")


def _num_parallel(value: NumParallel) -> Optional[Union[int, str]]:
    if value is None or isinstance(value, (int, str)):
        return value
    raise InvalidArgumentError(
        f"num_parallel must be an int, 'auto' or 'sequential', not {value!r}"
    )


class Pipeline:
    """A pipeline: a source, its stages and its options. Immutable: every method returns a
    new pipeline, as ``tf.data.Dataset``'s do.

    Iterating a pipeline runs one epoch and yields one ``dict`` per element (or batch):
    feature name -> ``numpy.ndarray``. Numeric arrays are the buffers Rust wrote (no copy);
    byte strings are object arrays of ``bytes``; variable-length features are lists of
    arrays, one per row (``padded_batch`` makes them dense).

    Make one with :func:`sluice.tfrecord`, :meth:`Pipeline.from_toml`,
    :func:`sluice.from_tensor_slices` or :func:`sluice.from_generator`.
    """

    def __init__(
        self,
        _source: "_Source",
        _ops: Tuple[tuple, ...] = (),
        _options: Optional[Dict[str, Any]] = None,
        _data_dir: Optional[str] = None,
        _plugin_dir: Optional[str] = None,
        _shard: Optional[Tuple[int, int]] = None,
    ) -> None:
        self._source = _source
        # How the source was made (to pickle a pipeline for spawned DataLoader workers).
        self._recipe: Optional[tuple] = _source.recipe
        self._ops = tuple(_ops)
        self._options = dict(_options or {})
        self._data_dir = _data_dir
        self._plugin_dir = _plugin_dir
        self._shard = _shard
        self._built: Optional[_sluice.Built] = None

    # -- making pipelines ------------------------------------------------------------

    @staticmethod
    def from_toml(
        path_or_text: Union[str, "os.PathLike[str]"],
        data: Optional[Union[str, "os.PathLike[str]"]] = None,
        plugin_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
        **options: Any,
    ) -> "Pipeline":
        """A pipeline file, as ``sluice run`` reads it: a path to a ``.toml`` file, or the
        TOML text itself. Mistakes raise :class:`InvalidArgumentError` with the line and
        column (also as ``error.line``/``error.column``), exactly as ``sluice run`` words
        them.

        ``data`` replaces the source's ``dir`` (``sluice run --data``), ``plugin_dir`` looks
        plugins up by file name there (``--plugin-dir``), and ``options`` (``seed``,
        ``cpu_budget``, ``ram_budget``, ``error_policy``, ``map_and_batch_fusion``) override
        the file's ``[options]``.
        """
        text = os.fspath(path_or_text)
        looks_like_toml = "\n" in text or "[" in text or "=" in text
        if not looks_like_toml or os.path.isfile(text):
            recipe: tuple = ("toml_file", text)
        else:
            recipe = ("toml_text", text)
        pipeline = Pipeline(
            _make_source(recipe),
            _data_dir=os.fspath(data) if data is not None else None,
            _plugin_dir=os.fspath(plugin_dir) if plugin_dir is not None else None,
        )
        return pipeline.options(**options) if options else pipeline

    def _then(self, op: tuple) -> "Pipeline":
        return Pipeline(
            self._source,
            self._ops + (op,),
            self._options,
            self._data_dir,
            self._plugin_dir,
            self._shard,
        )

    def __getstate__(self) -> Dict[str, Any]:
        # Pickled (for DataLoader workers started with `spawn`) as what was written; the
        # Python functions in it must be picklable themselves (module-level).
        if self._recipe is None:
            raise TypeError("this pipeline's source cannot be pickled")
        return {
            "recipe": self._recipe,
            "ops": self._ops,
            "options": self._options,
            "data_dir": self._data_dir,
            "plugin_dir": self._plugin_dir,
            "shard": self._shard,
        }

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__init__(  # type: ignore[misc]
            _make_source(state["recipe"]),
            state["ops"],
            state["options"],
            state["data_dir"],
            state["plugin_dir"],
            state["shard"],
        )

    def stage(self, kind: str, **params: Any) -> "Pipeline":
        """This pipeline followed by a stage of the registry, given as in a ``[[stage]]``
        table of a pipeline file (``kind`` and its keys). Checked now: a wrong key or value
        raises :class:`InvalidArgumentError` naming it. The named methods below are this
        with their parameters spelt out."""
        spec = {"kind": kind}
        spec.update({k: v for k, v in params.items() if v is not None})
        return self._then(("stage", _sluice.check_stage(json.dumps(spec))))

    def shard(self, num_shards: int, index: int) -> "Pipeline":
        """Every ``num_shards``-th element starting at ``index`` (``Dataset.shard``). Right
        after the source it is pushed down to whole files when each shard gets files."""
        return self.stage("shard", num_shards=num_shards, index=index)

    def interleave(
        self,
        cycle_length: int = 4,
        block_length: int = 1,
        num_parallel: NumParallel = None,
        deterministic: bool = True,
    ) -> "Pipeline":
        """Reads ``cycle_length`` of the source's files at once, ``block_length`` records
        from each in turn (``Dataset.interleave`` over files). Right after the source (or a
        ``shard``). ``num_parallel``: threads reading files (int, ``"auto"``)."""
        return self.stage(
            "interleave",
            cycle_length=cycle_length,
            block_length=block_length,
            num_parallel=_num_parallel(num_parallel),
            deterministic=deterministic,
        )

    def shuffle(
        self,
        buffer_size: int,
        seed: Optional[int] = None,
        reshuffle_each_epoch: bool = True,
    ) -> "Pipeline":
        """Shuffles through a buffer of ``buffer_size`` elements (``Dataset.shuffle``),
        seeded by ``seed`` or the pipeline's seed."""
        return self.stage(
            "shuffle",
            buffer_size=buffer_size,
            seed=seed,
            reshuffle_each_epoch=reshuffle_each_epoch,
        )

    def parse_example(
        self,
        features: Mapping[str, Union[str, Mapping[str, Any]]],
        input: Optional[str] = None,
    ) -> "Pipeline":
        """Parses ``tf.train.Example`` records (``tf.io.parse_example``). ``features``:
        name -> dtype (``"int64"``, ``"float"``, ``"string"``) or a table as in a pipeline
        file: ``{"dtype": "float", "shape": [3], "default": 0.0, "kind": "var_len"}``; the
        kinds ``fixed_len_sequence`` (``allow_missing: True``), ``sparse`` (``index_key``,
        ``value_key``, ``size``: outputs ``<name>.indices``/``.values``/``.dense_shape``) and
        ``ragged`` (``value_key``, ``partitions`` such as ``[{"row_lengths": "l"}]``) as
        ``tf.io``'s."""
        table = {
            name: ({"dtype": spec} if isinstance(spec, str) else dict(spec))
            for name, spec in features.items()
        }
        return self.stage("parse_example", features=table, input=input)

    def parse_sequence_example(
        self,
        context_features: Optional[Mapping[str, Union[str, Mapping[str, Any]]]] = None,
        sequence_features: Optional[Mapping[str, Union[str, Mapping[str, Any]]]] = None,
        input: Optional[str] = None,
    ) -> "Pipeline":
        """Parses ``tf.train.SequenceExample`` records (``tf.io.parse_single_sequence_example``,
        after ``batch`` ``tf.io.parse_sequence_example``). ``context_features``: name -> dtype
        or a table (``fixed_len`` or ``var_len``); ``sequence_features``: name -> a table with
        ``"kind": "fixed_len_sequence"`` (``shape`` of a step, ``allow_missing``) or
        ``"var_len"`` (a bare dtype string means ``fixed_len_sequence`` of scalars)."""

        def table(features, kind):
            return {
                name: ({"dtype": spec, "kind": kind} if isinstance(spec, str) else dict(spec))
                for name, spec in (features or {}).items()
            }

        return self.stage(
            "parse_sequence_example",
            context_features=table(context_features, "fixed_len"),
            sequence_features=table(sequence_features, "fixed_len_sequence"),
            input=input,
        )

    def image_ops(
        self,
        ops: Sequence[Mapping[str, Any]],
        num_parallel: NumParallel = None,
        input: Optional[str] = None,
        output: Optional[str] = None,
        deterministic: Optional[bool] = None,
    ) -> "Pipeline":
        """Image ops on the feature ``input`` (default ``image``), in order: each a dict
        as in a pipeline file, e.g. ``{"op": "decode", "channels": 3}``,
        ``{"op": "random_crop", "height": 224, "width": 224}``."""
        return self.stage(
            "image_ops",
            ops=[dict(op) for op in ops],
            num_parallel=_num_parallel(num_parallel),
            input=input,
            output=output,
            deterministic=deterministic,
        )

    def _plugin(
        self,
        path: Union[str, "os.PathLike[str]"],
        config: Optional[Mapping[str, Any]],
        num_parallel: NumParallel,
        chunk_size: Optional[int],
        deterministic: Optional[bool],
        limits: Optional[Mapping[str, Any]],
        expect: str,
    ) -> "Pipeline":
        params = {
            "kind": "plugin",
            "path": os.fspath(path),
            "config": dict(config or {}),
            "num_parallel": _num_parallel(num_parallel),
            "chunk_size": chunk_size,
            "deterministic": deterministic,
            "limits": dict(limits) if limits else None,
        }
        spec = json.dumps({k: v for k, v in params.items() if v is not None})
        # The plugin's declared kind is checked against `expect` when it is loaded.
        return self._then(("stage", _sluice.check_stage(spec), expect))

    def map_plugin(
        self,
        path: Union[str, "os.PathLike[str]"],
        config: Optional[Mapping[str, Any]] = None,
        num_parallel: NumParallel = None,
        chunk_size: Optional[int] = None,
        deterministic: Optional[bool] = None,
        limits: Optional[Mapping[str, Any]] = None,
    ) -> "Pipeline":
        """Runs a map plugin (a native library ``.so``/``.dylib``/``.dll``, or a WASM module
        ``.wasm``/``.wat`` run sandboxed under ``limits`` such as ``{"memory": "256MiB",
        "time_ms": 1000}``) with its ``config``. Loaded when the pipeline is built; a
        plugin that declares itself a filter is refused (use :meth:`filter_plugin`)."""
        return self._plugin(path, config, num_parallel, chunk_size, deterministic, limits, "map")

    def filter_plugin(
        self,
        path: Union[str, "os.PathLike[str]"],
        config: Optional[Mapping[str, Any]] = None,
        num_parallel: NumParallel = None,
        chunk_size: Optional[int] = None,
        deterministic: Optional[bool] = None,
        limits: Optional[Mapping[str, Any]] = None,
    ) -> "Pipeline":
        """Runs a filter plugin (one that keeps or drops each element); parameters as
        :meth:`map_plugin`. Both run the pipeline file's ``plugin`` stage; the plugin's
        declared kind must be ``filter``."""
        return self._plugin(path, config, num_parallel, chunk_size, deterministic, limits, "filter")

    def map(
        self,
        fn: Callable[..., Mapping[str, Any]],
        num_parallel: NumParallel = None,
        deterministic: bool = True,
        with_seed: bool = False,
    ) -> "Pipeline":
        """Applies a Python function to every element: ``fn(element) -> dict``
        (``fn(element, seed)`` with ``with_seed=True``: a seed fixed by the pipeline's seed,
        the epoch and the element, for reproducible random transforms).

        Slower than built-in stages and plugins: the function holds the GIL, so calls run
        one at a time whatever ``num_parallel`` says (the stages around it still run in
        parallel). Use it for what no built-in stage or plugin covers."""
        if not callable(fn):
            raise InvalidArgumentError(f"map: {fn!r} is not callable")
        np_json = json.dumps(_num_parallel(num_parallel) or "sequential")
        return self._then(("map", fn, np_json, bool(deterministic), bool(with_seed)))

    def filter(
        self,
        predicate: Callable[..., Any],
        num_parallel: NumParallel = None,
        deterministic: bool = True,
        with_seed: bool = False,
    ) -> "Pipeline":
        """Keeps the elements for which ``predicate(element)`` is true (see :meth:`map` for
        the cost of Python code)."""
        if not callable(predicate):
            raise InvalidArgumentError(f"filter: {predicate!r} is not callable")
        np_json = json.dumps(_num_parallel(num_parallel) or "sequential")
        return self._then(("filter", predicate, np_json, bool(deterministic), bool(with_seed)))

    def flat_map(
        self,
        fn: Callable[..., Iterable[Mapping[str, Any]]],
        num_parallel: NumParallel = None,
        deterministic: bool = True,
        with_seed: bool = False,
    ) -> "Pipeline":
        """Maps every element to any number of elements: ``fn(element)`` returns an
        iterable of dicts (none drops the element), in order (``Dataset.flat_map`` with a
        function returning elements rather than a dataset). ``with_seed`` as in
        :meth:`map`; see :meth:`map` for the cost of Python code. In a pipeline file a flat
        map is a ``plugin`` stage whose plugin returns many elements."""
        if not callable(fn):
            raise InvalidArgumentError(f"flat_map: {fn!r} is not callable")
        np_json = json.dumps(_num_parallel(num_parallel) or "sequential")
        return self._then(("flat_map", fn, np_json, bool(deterministic), bool(with_seed)))

    def scan(
        self,
        initial_state: Mapping[str, Any],
        fn: Callable[[Dict[str, Any], Dict[str, Any]], Any],
    ) -> "Pipeline":
        """Carries a state through the elements (``Dataset.scan``): ``fn(state, element)``
        returns ``(new_state, output)``, both dicts of arrays (``output`` ``None`` drops the
        element). The state starts as ``initial_state`` each epoch; a resumed run replays
        the input up to its checkpoint, so the state is what it was. Runs in order on one
        thread. For a running count, cumulative sum or running mean see :meth:`scan_op`."""
        if not callable(fn):
            raise InvalidArgumentError(f"scan: {fn!r} is not callable")
        if not isinstance(initial_state, Mapping):
            raise InvalidArgumentError(
                f"scan: initial_state must be a dict of feature name -> array, not "
                f"{type(initial_state).__name__}")
        return self._then(("scan", fn, dict(initial_state)))

    def batch(
        self,
        batch_size: int,
        drop_remainder: bool = False,
        num_parallel: NumParallel = None,
        deterministic: Optional[bool] = None,
    ) -> "Pipeline":
        """Stacks ``batch_size`` consecutive elements into one (``Dataset.batch``)."""
        return self.stage(
            "batch",
            batch_size=batch_size,
            drop_remainder=drop_remainder,
            num_parallel=_num_parallel(num_parallel),
            deterministic=deterministic,
        )

    def padded_batch(
        self,
        batch_size: int,
        padded_shapes: Optional[Mapping[str, Sequence[Optional[int]]]] = None,
        padding_values: Optional[Mapping[str, Any]] = None,
        drop_remainder: bool = False,
    ) -> "Pipeline":
        """Batches elements of different shapes, padding each value to ``padded_shapes``
        (per name; ``None`` in a dimension: the batch's largest) with ``padding_values``
        (default 0 or ``b""``) (``Dataset.padded_batch``)."""
        shapes = None
        if padded_shapes is not None:
            shapes = {
                name: ["max" if d is None else d for d in dims]
                for name, dims in padded_shapes.items()
            }
        values = None
        if padding_values is not None:
            values = {
                k: (v.decode() if isinstance(v, bytes) else v) for k, v in padding_values.items()
            }
        return self.stage(
            "padded_batch",
            batch_size=batch_size,
            padded_shapes=shapes,
            padding_values=values,
            drop_remainder=drop_remainder,
        )

    def unbatch(self) -> "Pipeline":
        """Splits batches back into elements (``Dataset.unbatch``)."""
        return self.stage("unbatch")

    def cache(self, directory: Optional[Union[str, "os.PathLike[str]"]] = None) -> "Pipeline":
        """Keeps the first epoch's elements (in memory, or in ``directory``) and replays
        them in later epochs (``Dataset.cache``)."""
        return self.stage("cache", directory=os.fspath(directory) if directory else None)

    def prefetch(self, buffer_size: Union[int, str] = "auto") -> "Pipeline":
        """Prepares up to ``buffer_size`` elements ahead on a thread of its own
        (``"auto"``: tuned within the RAM budget)."""
        return self.stage("prefetch", buffer_size=buffer_size)

    # Keras preprocessing layers (issue 25): each reads the feature ``input`` and writes
    # ``output`` (default: ``input``, replaced), with the Keras layer's parameter names and
    # TensorFlow's outputs bit for bit. Before ``batch`` they see one element's value,
    # after it the whole batch (one call per batch).

    def normalization(self, input: str, mean: Any = None, variance: Any = None,
                      invert: bool = False, adapted: Any = None,
                      output: Optional[str] = None) -> "Pipeline":
        """``keras.layers.Normalization(mean=, variance=)``: ``(x - mean) /
        max(sqrt(variance), 1e-7)`` in float32 (``mean``/``variance``: a number, or one
        per position of the last axis; or ``adapted``: a statistics file of :meth:`adapt`)."""
        return self.stage("normalization", input=input, output=output, mean=_plain(mean),
                          variance=_plain(variance), invert=invert,
                          adapted=None if adapted is None else os.fspath(adapted))

    def discretization(self, input: str, bin_boundaries: Optional[Sequence[float]] = None,
                       num_bins: Optional[int] = None, epsilon: Optional[float] = None,
                       adapted: Any = None, output: Optional[str] = None) -> "Pipeline":
        """``keras.layers.Discretization``: int32 bucket indices, by ``bin_boundaries``, or
        by the boundaries :meth:`adapt` learnt (``{"analyzer": "quantiles", "num_bins": N}``,
        Keras's ``Discretization(num_bins=N, epsilon=0.01).adapt`` bit for bit) in the
        statistics file ``adapted`` (``num_bins`` / ``epsilon``, when given, are checked
        against it)."""
        return self.stage("discretization", input=input, output=output,
                          bin_boundaries=None if bin_boundaries is None
                          else [float(b) for b in bin_boundaries],
                          num_bins=num_bins, epsilon=epsilon,
                          adapted=None if adapted is None else os.fspath(adapted))

    def clip(self, input: str, clip_value_min: Optional[float] = None,
             clip_value_max: Optional[float] = None,
             output: Optional[str] = None) -> "Pipeline":
        """``tf.clip_by_value``: numbers clipped to ``[clip_value_min, clip_value_max]`` (a
        bound left out does not clip), NaN kept, dtype kept, TensorFlow's bits."""
        def bound(x: Optional[float]) -> Any:
            # JSON has no infinities: the stage takes them as words.
            if x is None:
                return None
            x = float(x)
            if x != x:
                return "nan"
            if x in (float("inf"), float("-inf")):
                return "inf" if x > 0 else "-inf"
            return x

        return self.stage("clip", input=input, output=output,
                          clip_value_min=bound(clip_value_min),
                          clip_value_max=bound(clip_value_max))

    def log1p(self, input: str, output: Optional[str] = None) -> "Pipeline":
        """``tf.math.log1p``: ``log(1 + x)`` in float32 / float64 (integers cast to
        float32), TensorFlow's bits."""
        return self.stage("log1p", input=input, output=output)

    def hashing(self, input: str, num_bins: int, mask_value: Any = None, salt: Any = None,
                output: Optional[str] = None) -> "Pipeline":
        """``keras.layers.Hashing``: int64 bins by TensorFlow's FarmHash Fingerprint64 (or
        SipHash keyed by ``salt``: an int or two)."""
        return self.stage("hashing", input=input, output=output, num_bins=num_bins,
                          mask_value=_plain(mask_value), salt=_plain(salt))

    def string_lookup(self, input: str, vocabulary: Any, num_oov_indices: int = 1,
                      mask_token: Optional[str] = None, oov_token: Optional[str] = None,
                      invert: bool = False, salt: Any = None, output_mode: str = "int",
                      idf_weights: Optional[Sequence[float]] = None,
                      output: Optional[str] = None) -> "Pipeline":
        """``keras.layers.StringLookup``: ``vocabulary`` is a list of tokens or a file of one
        per line; OOV tokens hashed over ``num_oov_indices``. ``output_mode="tf_idf"``:
        float32 count x idf vectors (``idf_weights`` for a given vocabulary, or learnt with
        an adapted one: ``{"analyzer": "vocabulary", "tf_idf": True}``)."""
        return self.stage("string_lookup", input=input, output=output,
                          vocabulary=_vocabulary(vocabulary), num_oov_indices=num_oov_indices,
                          mask_token=mask_token, oov_token=oov_token, invert=invert,
                          salt=_plain(salt), output_mode=output_mode,
                          idf_weights=_plain(idf_weights))

    def integer_lookup(self, input: str, vocabulary: Any, num_oov_indices: int = 1,
                       mask_token: Optional[int] = None, oov_token: Optional[int] = None,
                       invert: bool = False, salt: Any = None, oov_method: str = "floormod",
                       output_mode: str = "int", idf_weights: Optional[Sequence[float]] = None,
                       output: Optional[str] = None) -> "Pipeline":
        """``keras.layers.IntegerLookup`` (``output_mode="int"`` or ``"tf_idf"``, as
        :meth:`string_lookup`)."""
        return self.stage("integer_lookup", input=input, output=output,
                          vocabulary=_vocabulary(vocabulary), num_oov_indices=num_oov_indices,
                          mask_token=mask_token, oov_token=oov_token, invert=invert,
                          salt=_plain(salt), oov_method=oov_method, output_mode=output_mode,
                          idf_weights=_plain(idf_weights))

    def category_encoding(self, input: str, num_tokens: int, output_mode: str = "multi_hot",
                          output: Optional[str] = None) -> "Pipeline":
        """``keras.layers.CategoryEncoding``: float32 ``one_hot``, ``multi_hot`` or
        ``count`` vectors of ``num_tokens``."""
        return self.stage("category_encoding", input=input, output=output,
                          num_tokens=num_tokens, output_mode=output_mode)

    def hashed_crossing(self, inputs: Sequence[str], output: str, num_bins: int,
                        output_mode: str = "int") -> "Pipeline":
        """``keras.layers.HashedCrossing``: the features ``inputs`` crossed into
        ``num_bins`` bins (TensorFlow's ``FingerprintCat64``), written to ``output``
        (int64, or ``output_mode="one_hot"``)."""
        return self.stage("hashed_crossing", inputs=list(inputs), output=output,
                          num_bins=num_bins, output_mode=output_mode)

    def text_vectorization(self, input: str, vocabulary: Any,
                           standardize: Optional[str] = "lower_and_strip_punctuation",
                           split: Optional[str] = "whitespace", ngrams: Any = None,
                           output_mode: str = "int",
                           output_sequence_length: Optional[int] = None,
                           num_parallel: NumParallel = None,
                           idf_weights: Optional[Sequence[float]] = None,
                           output: Optional[str] = None) -> "Pipeline":
        """``keras.layers.TextVectorization`` with a vocabulary (a list, or a file of one
        token per line): int64 token indices padded to ``output_sequence_length`` (or to the
        batch's longest text), or ``multi_hot`` / ``count`` vectors, or ``tf_idf`` float32
        count x idf vectors (``idf_weights`` for a given vocabulary; an adapted one,
        ``{"adapted": ...}`` learnt with ``{"analyzer": "text_vocabulary", "tf_idf": True}``,
        brings Keras's). ``standardize=None`` and ``split=None`` as in Keras.
        ``num_parallel``: threads (int, ``"auto"``), batches kept in order."""
        return self.stage("text_vectorization", input=input, output=output,
                          vocabulary=_vocabulary(vocabulary),
                          standardize="none" if standardize is None else standardize,
                          split="none" if split is None else split,
                          ngrams=_plain(ngrams), output_mode=output_mode,
                          output_sequence_length=output_sequence_length,
                          num_parallel=num_parallel, idf_weights=_plain(idf_weights))

    def window(self, size: int, shift: Optional[int] = None, stride: int = 1,
               drop_remainder: bool = False) -> "Pipeline":
        """Windows of ``size`` elements every ``shift`` (default ``size``), every
        ``stride``-th element, each batched (``tf.data.Dataset.window`` then ``batch``)."""
        return self.stage("window", size=size, shift=shift, stride=stride,
                          drop_remainder=drop_remainder)

    def group_by_window(
        self,
        key: str,
        window_size: int,
        padded: bool = False,
        padded_shapes: Optional[Mapping[str, Sequence[Optional[int]]]] = None,
        padding_values: Optional[Mapping[str, Any]] = None,
        drop_remainder: bool = False,
    ) -> "Pipeline":
        """Batches of ``window_size`` elements sharing the int64 scalar feature ``key``
        (``Dataset.group_by_window`` with ``reduce_func`` a ``batch`` of the window, or a
        ``padded_batch`` with ``padded``). A group's batch comes as soon as it is full;
        the groups left at the end come in ascending key order (left out with
        ``drop_remainder``). ``padded_shapes``/``padding_values`` as :meth:`padded_batch`."""
        return self.stage(
            "group_by_window",
            key=key,
            window_size=window_size,
            drop_remainder=drop_remainder,
            padded=padded,
            padded_shapes=_padded_shapes(padded_shapes),
            padding_values=_padding_values(padding_values),
        )

    def bucket_by_sequence_length(
        self,
        input: str,
        bucket_boundaries: Sequence[int],
        bucket_batch_sizes: Sequence[int],
        padded_shapes: Optional[Mapping[str, Sequence[Optional[int]]]] = None,
        padding_values: Optional[Mapping[str, Any]] = None,
        pad_to_bucket_boundary: bool = False,
        no_padding: bool = False,
        drop_remainder: bool = False,
    ) -> "Pipeline":
        """Padded batches of elements of similar length (``Dataset.bucket_by_sequence_length``
        with ``element_length_func`` the first dimension of ``input``): bucket ``i`` holds
        lengths in ``[bucket_boundaries[i-1], bucket_boundaries[i])`` and batches
        ``bucket_batch_sizes[i]`` elements (one more size than boundaries).
        ``pad_to_bucket_boundary`` pads the first dimension of every value not in
        ``padded_shapes`` (and its ``None`` dimensions) to the boundary minus one;
        ``no_padding`` batches as :meth:`batch`."""
        return self.stage(
            "bucket_by_sequence_length",
            input=input,
            bucket_boundaries=list(bucket_boundaries),
            bucket_batch_sizes=list(bucket_batch_sizes),
            padded_shapes=_padded_shapes(padded_shapes),
            padding_values=_padding_values(padding_values),
            pad_to_bucket_boundary=pad_to_bucket_boundary,
            no_padding=no_padding,
            drop_remainder=drop_remainder,
        )

    def decode_raw(self, input: str, out_type: str, little_endian: bool = True,
                   shape: Optional[Sequence[int]] = None,
                   output: Optional[str] = None) -> "Pipeline":
        """``tf.io.decode_raw``: each byte string as values of ``out_type`` (``uint8``,
        ``int32``, ``int64``, ``float32``, ``float64``), reshaped to ``shape`` if given."""
        return self.stage("decode_raw", input=input, output=output, out_type=out_type,
                          little_endian=little_endian,
                          shape=None if shape is None else list(shape))

    def enumerate(self, start: int = 0, output: str = "index") -> "Pipeline":
        """Numbers the elements from ``start`` in the int64 feature ``output``
        (``tf.data.Dataset.enumerate``; a resumed run goes on counting)."""
        return self.stage("enumerate", start=start, output=output)

    def scan_op(self, op: str, input: Optional[str] = None,
                output: Optional[str] = None) -> "Pipeline":
        """A built-in ``scan`` (a pipeline file's ``kind = "scan"``): ``"count"`` (1, 2, 3,
        ... in ``output``, default ``count``), ``"cumsum"`` or ``"running_mean"`` of the
        feature ``input`` (``output`` default: replaces it)."""
        return self.stage("scan", op=op, input=input, output=output)

    def rejection_resample(self, class_feature: str, target_dist: Sequence[float],
                           initial_dist: Optional[Sequence[float]] = None,
                           seed: Optional[int] = None) -> "Pipeline":
        """Resamples so that the int64 scalar feature ``class_feature`` follows
        ``target_dist`` (``Dataset.rejection_resample`` with TensorFlow's acceptance
        probabilities; the input's distribution ``initial_dist`` estimated online when not
        given). Keeps the elements (TensorFlow's pairs' second half); seeded by ``seed`` or
        the pipeline's seed."""
        return self.stage("rejection_resample", **{
            "class": class_feature,
            "target_dist": [float(w) for w in target_dist],
            "initial_dist": None if initial_dist is None else [float(w) for w in initial_dist],
            "seed": seed,
        })

    def repeat(self, count: Optional[int] = None) -> "Pipeline":
        """Repeats the input ``count`` times (``None``: forever), reshuffling each pass."""
        return self.stage("repeat", count=count)

    def take(self, count: int) -> "Pipeline":
        """The first ``count`` elements."""
        return self.stage("take", count=count)

    def skip(self, count: int) -> "Pipeline":
        """All but the first ``count`` elements."""
        return self.stage("skip", count=count)

    def concatenate(self, other: "Pipeline") -> "Pipeline":
        """This pipeline's elements, then ``other``'s (``Dataset.concatenate``). The
        options of the result apply to both."""
        _check_pipelines("concatenate", [other])
        return Pipeline(_make_source(("concatenate", self, other)))

    def options(
        self,
        seed: Optional[int] = None,
        cpu_budget: Optional[int] = None,
        ram_budget: Optional[Union[int, str]] = None,
        error_policy: Optional[str] = None,
        map_and_batch_fusion: Optional[bool] = None,
    ) -> "Pipeline":
        """The pipeline with these options (the others kept): ``seed`` fixes every random
        decision (bit-identical output at any parallelism); ``cpu_budget`` caps worker
        threads per stage; ``ram_budget`` (bytes, or ``"4GiB"``) caps buffers and caches;
        ``error_policy`` is ``"fail"`` or ``"skip"`` (skipped elements are counted in
        :meth:`stats`)."""
        given = {
            "seed": seed,
            "cpu_budget": cpu_budget,
            "ram_budget": ram_budget,
            "error_policy": error_policy,
            "map_and_batch_fusion": map_and_batch_fusion,
        }
        given = {k: v for k, v in given.items() if v is not None}
        _sluice.check_options(json.dumps(given))
        merged = dict(self._options)
        merged.update(given)
        return Pipeline(
            self._source, self._ops, merged, self._data_dir, self._plugin_dir, self._shard
        )

    def with_shard(self, num_shards: int, index: int) -> "Pipeline":
        """This pipeline reading only shard ``index`` of ``num_shards`` of its source: a
        ``shard`` stage is put right after the source (before any shuffle, so the shards are
        disjoint and cover every record once per epoch), where it reads whole files when
        each shard gets files. What :mod:`sluice.torch` does per worker and rank."""
        if self._shard is not None:
            n, i = self._shard
            num_shards, index = n * num_shards, i + n * index
        return Pipeline(
            self._source, self._ops, self._options, self._data_dir, self._plugin_dir,
            (num_shards, index),
        )

    # -- running ---------------------------------------------------------------------

    def _dataset(self) -> "_sluice.Built":
        if self._source.inner is None:
            raise InvalidArgumentError(
                "this pipeline is a fragment of stages without a source (sluice.ray.stages()): "
                "run it with sluice.ray.map_batches or sluice.ray.SluiceTransform"
            )
        if self._built is None:
            self._built = _sluice.build(
                self._source.inner,
                list(self._ops),
                json.dumps(self._options) if self._options else None,
                self._shard,
                self._data_dir,
                self._plugin_dir,
            )
        return self._built

    def build(self) -> "Pipeline":
        """Builds the pipeline now (resolves the files, loads the plugins, checks the
        stages) and returns it; iterating builds it otherwise."""
        self._dataset()
        return self

    def iter(
        self,
        resume: Optional[Union[bytes, Sequence[bytes]]] = None,
        progress: Union[bool, str] = False,
    ) -> "PipelineIterator":
        """An iterator over one epoch (each call starts the next epoch), or the rest of an
        epoch:

        - ``resume=checkpoint`` (the bytes :meth:`PipelineIterator.checkpoint` returned):
          exactly the elements an uninterrupted run would still have yielded;
        - ``resume=[checkpoint, ...]``, the checkpoints **every host** of a run took at one
          step: this host's share of what the epoch has left, on any number of hosts (this
          pipeline's ``shard(num_hosts, rank)``; one host without a shard). Every record
          not yet delivered is read by exactly one host, none twice (elastic resume; with as
          many hosts as before, each continues its own stream exactly).

        ``progress=True`` (or a description) shows a progress bar on stderr."""
        if resume is None:
            arg: Optional[Union[bytes, List[bytes]]] = None
        elif isinstance(resume, (bytes, bytearray)):
            arg = bytes(resume)
        elif isinstance(resume, (list, tuple)) and all(
            isinstance(c, (bytes, bytearray)) for c in resume
        ):
            arg = [bytes(c) for c in resume]
        else:
            raise InvalidArgumentError(
                "resume must be the bytes checkpoint() returned, or a list of every host's"
            )
        inner = self._dataset().iter(arg)
        return PipelineIterator(inner, self, progress)

    def iter_epoch(self, epoch: int, progress: Union[bool, str] = False) -> "PipelineIterator":
        """An iterator over epoch ``epoch`` (0-based), whatever ran before: the same
        elements, in the same order, as the ``epoch``-th ``iter()`` of a fresh pipeline with
        this seed (for processes that start afresh each epoch, such as DataLoader workers)."""
        if epoch < 0:
            raise InvalidArgumentError("iter_epoch: epoch must be >= 0")
        return PipelineIterator(self._dataset().iter_epoch(int(epoch)), self, progress)

    def __iter__(self) -> "PipelineIterator":
        return self.iter()

    def as_numpy_iterator(self) -> "PipelineIterator":
        """The same as ``iter()`` (tf.data's name for it)."""
        return self.iter()

    def collect(self) -> List[Element]:
        """Every element of one epoch, as a list."""
        return list(self.iter())

    def stats(self) -> Optional[Dict[str, Any]]:
        """The latest run's per-stage statistics: ``elements``, ``skipped``,
        ``wall_seconds``, ``stages`` (a list: ``name``, ``elements_in``, ``elements_out``,
        ``busy_seconds``, waits, ``skipped``, ...), ``bottleneck`` (the stage others waited
        on most, or ``None``), what autotune decided, and ``records``: every record the
        sources read accounted for, a dict with ``read``, ``delivered`` (rows of batches
        counted one by one), ``skipped`` (failed under ``error_policy="skip"``),
        ``filtered`` (left out by filters and functions returning nothing), ``dropped``
        (``drop_remainder``, incomplete windows) and ``unfinished`` (still in buffers, or
        left there by a run stopped early); ``read`` is always the sum of the other five.
        ``records`` is ``None`` when the pipeline's records cannot be followed (``take``,
        ``skip``, ``repeat`` or ``cache`` after the source). ``None`` before any run."""
        raw = self._dataset().stats_json()
        return _stats_dict(raw) if raw is not None else None

    def stats_report(self) -> Optional[str]:
        """The latest run's statistics as ``sluice run`` prints them."""
        return self._dataset().stats_report()

    def observe(
        self,
        trace: Optional[Union[str, "os.PathLike[str]"]] = None,
        tensorboard: Optional[Union[str, "os.PathLike[str]"]] = None,
        name: Optional[str] = None,
    ) -> "Observer":
        """Makes this pipeline's runs, every epoch from now on, report to the returned
        :class:`sluice.observe.Observer`: always a timeline of their statistics (its
        :meth:`~sluice.observe.Observer.save` writes the run JSON ``sluice report`` reads);
        with ``trace``, a trace of every thread written to that file (Chrome trace event
        format: https://ui.perfetto.dev) when the ``with`` block ends or on
        ``write_trace()``; with ``tensorboard``, TensorBoard scalars written into that
        directory as the run goes. ``sluice run --trace/--tensorboard/--json`` in Python."""
        from .observe import Observer

        inner = self._dataset().observe(
            None if trace is None else os.fspath(trace),
            None if tensorboard is None else os.fspath(tensorboard),
        )
        return Observer(inner, name)

    def adapt(self, features: Mapping[str, Any], out: Optional[Union[str, "os.PathLike[str]"]] = None) -> Dict[str, Any]:
        """Reads the pipeline once and learns, per feature, what the Keras stages load
        (Keras's ``layer.adapt``): ``features`` maps a feature to ``"mean_variance"`` (exact,
        float64), ``"batch_mean_variance"`` (Keras's ``Normalization.adapt`` bit for bit:
        float32 batch by batch, each element one batch unless ``batch_size`` elements are),
        ``"vocabulary"``, ``"text_vocabulary"``, or a dict with ``analyzer`` and its options
        (``max_tokens``; for ``vocabulary`` ``num_oov_indices``, ``mask_token``,
        ``oov_token``; for ``text_vocabulary`` ``standardize``, ``split``, ``ngrams``; for
        both ``tf_idf`` (document frequencies too) and ``capacity`` (distinct tokens held at
        most: bounded memory, approximate past it); ``"quantiles"`` with ``num_bins``,
        ``epsilon``, ``batch_size``, ``steps``: Keras's ``Discretization.adapt``, each element
        one batch unless ``batch_size`` elements are). Returns the statistics and, with
        ``out``, writes them there (the file ``normalization(adapted=...)``,
        ``discretization(adapted=...)`` and ``vocabulary={"adapted": ...}`` read)."""
        spec = {"features": {name: ({"analyzer": a} if isinstance(a, str) else dict(a))
                             for name, a in features.items()}}
        stats = json.loads(self._dataset().adapt(json.dumps(spec)))
        if out is not None:
            _write_durably(out, json.dumps(stats, indent=2) + "\n")
        return stats

    def explain(self) -> str:
        """The plan as written, the optimizer's rewrites, and the plan that runs."""
        return self._dataset().explain()

    def fingerprint(self) -> str:
        """A fingerprint of the stages and their parameters (what checkpoints check)."""
        return self._dataset().fingerprint()

    def __repr__(self) -> str:
        steps = []
        for op in self._ops:
            if op[0] == "stage":
                steps.append(json.loads(op[1])["kind"])
            else:
                steps.append(f"{op[0]}({getattr(op[1], '__name__', 'fn')})")
        return f"<sluice.Pipeline {' -> '.join(['source'] + steps)}>"


class _Source:
    """A source with the recipe it was made from."""

    def __init__(self, inner: Optional["_sluice.Source"], recipe: tuple) -> None:
        self.inner = inner
        self.recipe = recipe
        # A TFDS source with `as_supervised=True`: its elements are yielded as `(x, y)`.
        self.supervised: Optional[Tuple[str, str]] = None


def _make_source(recipe: tuple) -> "_Source":
    kind = recipe[0]
    if kind == "toml_file":
        inner = _sluice.source_toml_file(recipe[1])
    elif kind == "toml_text":
        inner = _sluice.source_toml_text(recipe[1])
    elif kind == "tfrecord":
        inner = _sluice.source_tfrecord(recipe[1])
    elif kind == "tfds":
        source = _Source(_sluice.source_tfrecord(recipe[1]), recipe)
        source.supervised = recipe[2]
        return source
    elif kind == "slices":
        inner = _sluice.source_slices(dict(recipe[1]))
    elif kind == "range":
        inner = _sluice.source_range(*recipe[1:])
    elif kind == "zip":
        inner = _sluice.source_zip([p._dataset() for p in recipe[1]])
    elif kind == "concatenate":
        inner = _sluice.source_concatenate(recipe[1]._dataset(), recipe[2]._dataset())
    elif kind == "sample_from":
        inner = _sluice.source_sample_from([p._dataset() for p in recipe[1]], *recipe[2:])
    elif kind == "choose_from":
        inner = _sluice.source_choose_from(
            [p._dataset() for p in recipe[1]], recipe[2]._dataset(), recipe[3])
    elif kind == "fragment":
        # Stages without a source (sluice.ray.stages()): they run on batches given to them.
        return _Source(None, recipe)
    elif kind == "generator":
        inner = _sluice.source_generator(_checked_generator(recipe[1], recipe[2]), recipe[3])
    else:  # pragma: no cover
        raise InvalidArgumentError(f"unknown source {kind!r}")
    return _Source(inner, recipe)


def _write_durably(path: Union[str, "os.PathLike[str]"], text: str) -> None:
    """Writes ``text`` to ``path`` whole or not at all: a temporary file beside it,
    synced, renamed into place, the directory synced (as Sluice's Rust writers do)."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    temp = os.path.join(directory, f".{os.path.basename(path)}.partial-{os.getpid()}")
    try:
        with open(temp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.remove(temp)
        raise
    if hasattr(os, "O_DIRECTORY"):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _stats_dict(raw: str) -> Dict[str, Any]:
    stats = json.loads(raw)
    index = stats.get("bottleneck")
    stats["bottleneck"] = stats["stages"][index] if index is not None else None
    return stats


class _Progress:
    """A progress line on stderr (tqdm's when it is installed)."""

    def __init__(self, desc: str) -> None:
        self.n = 0
        self.start = time.monotonic()
        self.last = 0.0
        self.desc = desc
        try:
            from tqdm import tqdm  # type: ignore

            self.bar = tqdm(desc=desc, unit="it")
        except ImportError:
            self.bar = None

    def update(self) -> None:
        self.n += 1
        if self.bar is not None:
            self.bar.update(1)
            return
        now = time.monotonic()
        if now - self.last >= 0.5:
            self.last = now
            rate = self.n / max(now - self.start, 1e-9)
            sys.stderr.write(f"\r{self.desc}: {self.n} [{rate:,.1f} it/s]")
            sys.stderr.flush()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        else:
            elapsed = time.monotonic() - self.start
            rate = self.n / max(elapsed, 1e-9)
            sys.stderr.write(f"\r{self.desc}: {self.n} in {elapsed:.1f}s [{rate:,.1f} it/s]\n")
            sys.stderr.flush()


class PipelineIterator(Iterator[Element]):
    """One epoch of a pipeline. ``next()`` waits with the GIL released; Ctrl-C raises
    ``KeyboardInterrupt`` promptly and stops the run. ``close()`` (or leaving a ``with``
    block, or dropping the iterator) stops the pipeline's threads."""

    def __init__(self, inner: "_sluice.Iter", pipeline: Pipeline, progress: Union[bool, str]) -> None:
        self._inner = inner
        self._pipeline = pipeline
        self._progress: Optional[_Progress] = None
        if progress:
            self._progress = _Progress(progress if isinstance(progress, str) else "sluice")

    def __iter__(self) -> "PipelineIterator":
        return self

    def __next__(self) -> Any:
        """The next element: a dict of features, or, for a TFDS source loaded with
        ``as_supervised=True``, the ``(input, target)`` pair."""
        try:
            element = self._inner.__next__()
        except StopIteration:
            self._end_progress()
            raise
        if self._progress is not None:
            self._progress.update()
        supervised = self._pipeline._source.supervised
        if supervised is not None and isinstance(element, dict):
            return (element[supervised[0]], element[supervised[1]])
        return element

    def _end_progress(self) -> None:
        if self._progress is not None:
            self._progress.close()
            self._progress = None

    def checkpoint(self) -> bytes:
        """Where the iteration is, as the checkpoint the Rust API writes (JSON bytes): give
        it to ``pipeline.iter(resume=...)``, here or in another process, to continue at
        exactly the next element; or give every host's to each host of a new layout (elastic
        resume). After the epoch's end it is the end (what other hosts still in the epoch
        need); after a failure or ``close()`` there is none (``RuntimeError``)."""
        return self._inner.checkpoint()

    def stats(self) -> Optional[Dict[str, Any]]:
        """This run's statistics so far (as :meth:`Pipeline.stats`)."""
        raw = self._inner.stats_json()
        return _stats_dict(raw) if raw is not None else None

    @property
    def yielded(self) -> int:
        """Elements returned so far."""
        return self._inner.yielded

    def close(self) -> None:
        """Stops the run and joins its threads."""
        self._inner.close()
        self._end_progress()

    def __enter__(self) -> "PipelineIterator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def tfrecord(
    files: Union[str, "os.PathLike[str]", Iterable[Union[str, "os.PathLike[str]"]]],
    compression: str = "auto",
    shuffle_files: bool = False,
    dir: Optional[Union[str, "os.PathLike[str]"]] = None,
    max_record_len: Optional[int] = None,
    buffer_size: Optional[int] = None,
    mmap: Optional[bool] = None,
    global_shuffle: bool = False,
    index_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
    num_parallel: NumParallel = None,
    storage: Optional[Mapping[str, Any]] = None,
) -> Pipeline:
    """TFRecord files (``tf.data.TFRecordDataset``): paths or glob patterns, one or a
    list. Each element is ``{"record": bytes}``; follow with :meth:`Pipeline.parse_example`.

    Paths may be URLs: ``s3://bucket/train-*``, ``gs://...``, ``az://...``,
    ``http(s)://...``, ``file://...`` (globs expand by listing). Credentials and endpoints
    come from the environment (``AWS_ACCESS_KEY_ID``, ``AWS_ENDPOINT_URL``, ...);
    ``storage`` sets them explicitly, as ``[source.storage]`` does: object_store's keys
    (``aws_endpoint``, ``aws_region``, ``google_service_account``, ...) and ``block_size``,
    ``max_in_flight``, ``max_retries``. The values travel with the pipeline (also when it
    is pickled) but are never printed.

    ``compression``: ``"auto"`` (per file), ``"none"``, ``"gzip"``, ``"zlib"``.
    ``mmap`` (default ``True``): local files are mapped into memory and records are
    slices of the mapping, not copies; ``False`` reads them with ``read(2)`` into buffers.
    ``shuffle_files`` shuffles the file list each epoch. ``global_shuffle`` reads every
    record once per epoch in a seeded global permutation (uncompressed files).
    """
    if isinstance(files, (str, os.PathLike)):
        patterns = [os.fspath(files)]
    else:
        patterns = [os.fspath(f) for f in files]
    spec: Dict[str, Any] = {
        "files": patterns,
        "compression": compression,
        "shuffle_files": shuffle_files,
    }
    optional = {
        "dir": os.fspath(dir) if dir is not None else None,
        "max_record_len": max_record_len,
        "buffer_size": buffer_size,
        "mmap": mmap,
        "global_shuffle": global_shuffle or None,
        "index_dir": os.fspath(index_dir) if index_dir is not None else None,
        "num_parallel": _num_parallel(num_parallel),
        "storage": dict(storage) if storage else None,
    }
    spec.update({k: v for k, v in optional.items() if v is not None})
    return Pipeline(_make_source(("tfrecord", json.dumps(spec))))


Files = Union[str, "os.PathLike[str]", Iterable[Union[str, "os.PathLike[str]"]]]


def _patterns(files: Files) -> List[str]:
    if isinstance(files, (str, os.PathLike)):
        return [os.fspath(files)]
    return [os.fspath(f) for f in files]


def _file_source(
    format: str,
    files: Files,
    keys: Mapping[str, Any],
    shuffle_files: bool,
    dir: Optional[Union[str, "os.PathLike[str]"]],
    compression_type: Optional[str],
    storage: Optional[Mapping[str, Any]],
) -> Pipeline:
    """A ``[source]`` of ``format`` with its keys (``None`` values left out)."""
    spec: Dict[str, Any] = {"files": _patterns(files), "format": format}
    common = {
        "shuffle_files": shuffle_files or None,
        "dir": os.fspath(dir) if dir is not None else None,
        "compression_type": compression_type,
        "storage": dict(storage) if storage else None,
    }
    spec.update({k: v for k, v in {**common, **keys}.items() if v is not None})
    return Pipeline(_make_source(("tfrecord", json.dumps(spec))))


_CSV_TYPES = ("int32", "int64", "float32", "float64", "string")


def _csv_type(d: Any) -> Optional[str]:
    """The CSV column type a type object names (``np.int64``, ``np.dtype("float32")``,
    ``tf.int64``, ``int``, ``float``, ``str``, ``bytes``), else ``None``."""
    if hasattr(d, "as_numpy_dtype"):  # a tf.DType
        return d.name if d.name in _CSV_TYPES else None
    if d is int:
        return "int32"
    if d is float:
        return "float32"
    if d in (str, bytes):
        return "string"
    if isinstance(d, (type, np.dtype)):
        try:
            name = np.dtype(d).name
        except TypeError:
            return None
        return name if name in _CSV_TYPES else None
    return None


def _csv_default(d: Any) -> Any:
    """One ``record_defaults`` entry as the pipeline file writes it: a type is a required
    column of it; a value is a column of its type defaulting to it (``0`` int32, ``0.0``
    float32, as ``tf.constant`` types them; NumPy scalars keep their dtype; strings are
    string columns)."""
    if isinstance(d, (bool, np.bool_)):
        raise InvalidArgumentError("csv: record_defaults: a boolean is not a CSV column type")
    if isinstance(d, (type, np.dtype)) or hasattr(d, "as_numpy_dtype"):
        name = _csv_type(d)
        if name is None:
            raise InvalidArgumentError(f"csv: record_defaults: {d!r} is not a CSV column type")
        return name
    if isinstance(d, np.generic):
        name = _csv_type(d.dtype)
        if name is None or name == "string":
            raise InvalidArgumentError(f"csv: record_defaults: {d!r} is not a CSV default")
        return {"type": name, "default": d.item()}
    if isinstance(d, (int, float)):
        return d
    if isinstance(d, bytes):
        d = d.decode()
    if isinstance(d, str):
        return {"type": "string", "default": d}
    raise InvalidArgumentError(f"csv: record_defaults: cannot read {d!r} as a default")


def csv(
    files: Files,
    record_defaults: Optional[Sequence[Any]] = None,
    compression_type: Optional[str] = None,
    header: bool = False,
    field_delim: str = ",",
    use_quote_delim: bool = True,
    na_value: str = "",
    select_cols: Optional[Sequence[Union[int, str]]] = None,
    column_names: Optional[Sequence[str]] = None,
    num_rows_for_inference: int = 100,
    shuffle_files: bool = False,
    dir: Optional[Union[str, "os.PathLike[str]"]] = None,
    storage: Optional[Mapping[str, Any]] = None,
) -> Pipeline:
    """CSV files (``tf.data.experimental.CsvDataset``, same parameter names): one element
    per row, one scalar per selected column, named by the header (``header=True``), by
    ``column_names``, or ``col<i>``.

    ``record_defaults``: one entry per selected column: a type (``np.int64``, ``int``,
    ``str``, ``tf.float32``: a required column, a missing field is an error naming its line
    and column) or a default value (``0``: int32, ``0.0``: float32, ``""``: string;
    ``np.int64(-1)`` keeps its dtype). Without it the types are inferred from the first
    ``num_rows_for_inference`` rows as ``make_csv_dataset`` does. A field that is empty or
    equal to ``na_value`` is missing. ``compression_type``: ``None``/``""``, ``"GZIP"``,
    ``"ZLIB"`` (or ``"auto"``).
    """
    keys: Dict[str, Any] = {
        "record_defaults": [_csv_default(d) for d in record_defaults] if record_defaults else None,
        "header": header or None,
        "field_delim": field_delim if field_delim != "," else None,
        "use_quote_delim": None if use_quote_delim else False,
        "na_value": na_value or None,
        "select_cols": list(select_cols) if select_cols else None,
        "column_names": list(column_names) if column_names else None,
        "num_rows_for_inference": num_rows_for_inference if num_rows_for_inference != 100 else None,
    }
    return _file_source("csv", files, keys, shuffle_files, dir, compression_type, storage)


def text_lines(
    files: Files,
    compression_type: Optional[str] = None,
    utf8: bool = False,
    name: str = "line",
    shuffle_files: bool = False,
    dir: Optional[Union[str, "os.PathLike[str]"]] = None,
    storage: Optional[Mapping[str, Any]] = None,
) -> Pipeline:
    """Text files, one element ``{"line": bytes}`` per line without its ``\\n`` or
    ``\\r\\n`` (``tf.data.TextLineDataset``). ``utf8=True`` makes a line that is not UTF-8
    an error naming it."""
    keys = {"utf8": utf8 or None, "name": name if name != "line" else None}
    return _file_source("text_lines", files, keys, shuffle_files, dir, compression_type, storage)


def fixed_length_records(
    files: Files,
    record_bytes: int,
    header_bytes: Optional[int] = None,
    footer_bytes: Optional[int] = None,
    compression_type: Optional[str] = None,
    name: str = "record",
    shuffle_files: bool = False,
    dir: Optional[Union[str, "os.PathLike[str]"]] = None,
    storage: Optional[Mapping[str, Any]] = None,
) -> Pipeline:
    """Files of fixed-length records (``tf.data.FixedLengthRecordDataset``): after
    ``header_bytes``, each ``record_bytes`` bytes are an element ``{"record": bytes}``, up to
    the last ``footer_bytes``. A body that is not a whole number of records is an error, as
    in TensorFlow."""
    keys = {
        "record_bytes": record_bytes,
        "header_bytes": header_bytes,
        "footer_bytes": footer_bytes,
        "name": name if name != "record" else None,
    }
    return _file_source("fixed_length", files, keys, shuffle_files, dir, compression_type, storage)


def numpy(
    files: Files,
    name: str = "value",
    arrays: Optional[Sequence[str]] = None,
    shuffle_files: bool = False,
    dir: Optional[Union[str, "os.PathLike[str]"]] = None,
    storage: Optional[Mapping[str, Any]] = None,
) -> Pipeline:
    """NumPy files (``np.save``'s ``.npy``, ``np.savez`` / ``savez_compressed``'s
    ``.npz``), sliced along the first axis as ``from_tensor_slices`` slices arrays: one
    element per row. An ``.npy`` file is one feature named ``name``; an ``.npz`` archive one
    feature per array (``arrays``: only these, in this order), all with the same first
    dimension. dtypes: ``uint8``, ``int32``, ``int64``, ``float32``, ``float64`` as
    themselves; ``bool`` as ``uint8``; ``int8``/``int16``/``uint16`` widened to ``int32``,
    ``uint32`` to ``int64``, ``float16`` to ``float32``; ``S``/``U`` strings as bytes; any
    byte order, C or Fortran order. Others (``uint64``, objects, ...) are an error naming
    the dtype. Each file is read into memory whole when it is opened."""
    keys = {
        "name": name if name != "value" else None,
        "arrays": list(arrays) if arrays else None,
    }
    return _file_source("numpy", files, keys, shuffle_files, dir, None, storage)


def _null_value(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)):
        raise InvalidArgumentError("null_value: a boolean is not a null value (use 0 or 1)")
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bytes):
        value = value.decode()
    if not isinstance(value, (int, float, str)):
        raise InvalidArgumentError(f"null_value: expected a number or a string, got {value!r}")
    return value


def parquet(
    files: Files,
    columns: Optional[Sequence[str]] = None,
    null_value: Any = None,
    shuffle_files: bool = False,
    dir: Optional[Union[str, "os.PathLike[str]"]] = None,
    storage: Optional[Mapping[str, Any]] = None,
) -> Pipeline:
    """Parquet files: one element per row, one feature per column (``columns``: only these,
    in this order; only they are decoded). Numbers keep their type (``bool``/``uint8`` as
    ``uint8``, smaller ints widened to ``int32``, ``uint32`` to ``int64``), strings and
    binaries are bytes, list columns 1-D arrays of each row's length, a struct column one
    feature per field (``struct.field``). Row groups are read one after the other.

    A null is an error naming the file, the row and the column, unless ``null_value`` is
    given: a number (for numeric columns, cast to their type) or a string (for string and
    binary columns); a null list reads as an empty list."""
    keys = {
        "columns": list(columns) if columns else None,
        "null_value": _null_value(null_value),
    }
    return _file_source("parquet", files, keys, shuffle_files, dir, None, storage)


def arrow(
    files: Files,
    columns: Optional[Sequence[str]] = None,
    null_value: Any = None,
    shuffle_files: bool = False,
    dir: Optional[Union[str, "os.PathLike[str]"]] = None,
    storage: Optional[Mapping[str, Any]] = None,
) -> Pipeline:
    """Arrow IPC files, in the file format (``pyarrow.ipc.new_file``, Feather v2) or the
    stream format (``pyarrow.ipc.new_stream``; Hugging Face ``datasets``' saved
    ``data-00000-of-00001.arrow`` files, read as they are): one element per row, read as
    :func:`parquet` reads them (same ``columns`` and ``null_value``). Record batches are read
    one after the other."""
    keys = {
        "columns": list(columns) if columns else None,
        "null_value": _null_value(null_value),
    }
    return _file_source("arrow", files, keys, shuffle_files, dir, None, storage)
def sql(
    query: str,
    url: Optional[str] = None,
    path: Optional[Union[str, "os.PathLike[str]"]] = None,
    partition_column: Optional[str] = None,
    num_partitions: Optional[int] = None,
    lower_bound: Optional[int] = None,
    upper_bound: Optional[int] = None,
    null_defaults: Optional[Mapping[str, Union[int, float, str]]] = None,
) -> Pipeline:
    """The rows of a SQL query on a SQLite file (``path``) or a PostgreSQL server (``url``,
    ``postgresql://user@host/db``): one element per row, one scalar per column, typed from
    the column (integers ``int64``, reals ``float64``, text and blobs ``bytes``). A NULL is an
    error naming its row and column unless ``null_defaults`` gives the column a value. With
    ``partition_column`` (an integer column) and ``num_partitions``, the query is read in
    that many ranges of it (between ``lower_bound`` and ``upper_bound``, by default the
    column's minimum and maximum), each a file of the source, so ``with_shard`` and
    ``interleave`` split the reading."""
    keys: Dict[str, Any] = {
        "format": "sql",
        "query": query,
        "url": url,
        "path": os.fspath(path) if path is not None else None,
        "partition_column": partition_column,
        "num_partitions": num_partitions,
        "lower_bound": lower_bound,
        "upper_bound": upper_bound,
        "null_defaults": dict(null_defaults) if null_defaults else None,
    }
    spec = {k: v for k, v in keys.items() if v is not None}
    return Pipeline(_make_source(("tfrecord", json.dumps(spec))))


_IMAGE_EXTENSIONS = (".bmp", ".gif", ".jpeg", ".jpg", ".png")


def image_folder(
    directory: Union[str, "os.PathLike[str]"],
    labels: Union[str, Sequence[int], None] = "inferred",
    label_mode: Optional[str] = "int",
    class_names: Optional[Sequence[str]] = None,
    color_mode: str = "rgb",
    image_size: Union[int, Tuple[int, int]] = (256, 256),
    shuffle: bool = True,
    seed: Optional[int] = None,
    validation_split: Optional[float] = None,
    subset: Optional[str] = None,
    interpolation: str = "bilinear",
    follow_links: bool = False,
    decode: bool = True,
) -> Union[Pipeline, Tuple[Pipeline, Pipeline]]:
    """The images of a folder of class folders, as
    ``tf.keras.utils.image_dataset_from_directory`` reads them (same parameter names and
    defaults; unbatched: add ``.batch(32)``): one element ``{"image", "label"}`` per file.

    Class folders sorted (or ``class_names``, in their order) are labels ``0..n-1``; files
    ending in .bmp/.gif/.jpeg/.jpg/.png are found at any depth; with ``shuffle`` the file
    list is shuffled with ``seed`` exactly as Keras does (same seed, same order), then
    ``validation_split`` keeps ``subset``'s part (``"both"`` returns the training and the
    validation pipelines). ``image``: decoded to ``color_mode``'s channels and resized to
    ``image_size`` (``float32``; ``uint8`` for ``interpolation="nearest"``), or the file's
    bytes with ``decode=False``. ``label``: ``int32`` (``label_mode="int"``), one-hot
    ``float32`` (``"categorical"``), ``float32 [1]`` (``"binary"``), or none
    (``labels=None`` or ``label_mode=None``). The pipeline's ``class_names`` lists the
    classes, as Keras's dataset does.
    """
    if subset == "both":
        if validation_split is None:
            raise InvalidArgumentError(
                "image_folder: with `subset`, `validation_split` must be set"
            )
        common = dict(
            labels=labels, label_mode=label_mode, class_names=class_names,
            color_mode=color_mode, image_size=image_size, shuffle=shuffle, seed=seed,
            validation_split=validation_split, interpolation=interpolation,
            follow_links=follow_links, decode=decode,
        )
        train = image_folder(directory, subset="training", **common)  # type: ignore[arg-type]
        val = image_folder(directory, subset="validation", **common)  # type: ignore[arg-type]
        assert isinstance(train, Pipeline) and isinstance(val, Pipeline)
        return train, val
    if isinstance(labels, str) and labels not in ("inferred", "none"):
        raise InvalidArgumentError(
            f"image_folder: labels must be \"inferred\", None or a list of integers, got {labels!r}"
        )
    size = [image_size, image_size] if isinstance(image_size, int) else list(image_size)
    keys: Dict[str, Any] = {
        "directory": os.fspath(directory),
        "format": "image_folder",
        "labels": "none" if labels is None else (labels if isinstance(labels, str) else [int(v) for v in labels]),
        "label_mode": "none" if label_mode is None else label_mode,
        "class_names": list(class_names) if class_names is not None else None,
        "color_mode": color_mode,
        "image_size": size,
        "shuffle": bool(shuffle),
        "seed": seed,
        "validation_split": validation_split,
        "subset": subset,
        "interpolation": interpolation,
        "follow_links": bool(follow_links),
        "decode": bool(decode),
    }
    spec = {k: v for k, v in keys.items() if v is not None}
    pipeline = Pipeline(_make_source(("tfrecord", json.dumps(spec))))
    pipeline.class_names = _class_names(os.fspath(directory), labels, class_names)  # type: ignore[attr-defined]
    return pipeline


def _class_names(directory: str, labels: Any, class_names: Optional[Sequence[str]]) -> Optional[List[str]]:
    """Keras's ``class_names``: the class folders (sorted, or as given), the sorted labels
    of a list as text, or ``None`` without labels."""
    if labels is None:
        return None
    if not isinstance(labels, str):
        return [str(v) for v in sorted(set(labels))]
    if class_names is not None:
        return list(class_names)
    try:
        names = os.listdir(directory)
    except OSError:
        return None
    return sorted(
        n for n in names if not n.startswith(".") and os.path.isdir(os.path.join(directory, n))
    )


def _padded_shapes(
    shapes: Optional[Mapping[str, Sequence[Optional[int]]]],
) -> Optional[Dict[str, List[Any]]]:
    """``padded_shapes`` as a stage spec writes them: ``None`` dimensions as ``"max"``."""
    if shapes is None:
        return None
    return {name: ["max" if d is None else d for d in dims] for name, dims in shapes.items()}


def _padding_values(values: Optional[Mapping[str, Any]]) -> Optional[Dict[str, Any]]:
    """``padding_values`` as a stage spec writes them: bytes as text."""
    if values is None:
        return None
    return {k: (v.decode() if isinstance(v, bytes) else v) for k, v in values.items()}


def from_tensor_slices(tensors: Union[Mapping[str, Any], Any]) -> Pipeline:
    """One element per row of the given arrays (``Dataset.from_tensor_slices``): a dict
    name -> array-like (all with the same first dimension), or one array (named
    ``value``). The arrays are copied once into Rust memory."""
    if not isinstance(tensors, Mapping):
        tensors = {"value": tensors}
    return Pipeline(_make_source(("slices", dict(tensors))))


class TensorSpec:
    """The shape and dtype of one feature of :func:`from_generator`'s elements (as
    ``tf.TensorSpec``): ``None`` in ``shape`` is any size."""

    def __init__(self, shape: Sequence[Optional[int]], dtype: Any, name: Optional[str] = None) -> None:
        self.shape: Tuple[Optional[int], ...] = tuple(shape)
        self.dtype = np.dtype(object) if dtype in (bytes, str, "string", "bytes") else np.dtype(dtype)
        self.name = name

    def is_compatible_with(self, value: np.ndarray) -> bool:
        if value.ndim != len(self.shape):
            return False
        return all(want is None or want == got for want, got in builtins.zip(self.shape, value.shape))

    def __repr__(self) -> str:
        return f"TensorSpec(shape={self.shape}, dtype={self.dtype})"


def _spec_of(value: Any) -> TensorSpec:
    if isinstance(value, TensorSpec):
        return value
    # tf.TensorSpec (or anything with .shape and .dtype)
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is None or dtype is None:
        raise InvalidArgumentError(f"output_signature: {value!r} is not a TensorSpec")
    dims = list(shape) if not hasattr(shape, "as_list") else shape.as_list()
    np_dtype = getattr(dtype, "as_numpy_dtype", dtype)
    if getattr(dtype, "name", None) == "string":
        np_dtype = bytes
    return TensorSpec(dims, np_dtype)


def from_generator(
    generator: Callable[[], Iterable[Mapping[str, Any]]],
    output_signature: Mapping[str, Any],
) -> Pipeline:
    """The elements a Python generator yields (``Dataset.from_generator``):
    ``generator()`` is called each epoch and yields dicts name -> array-like, checked
    against ``output_signature`` (name -> :class:`TensorSpec`); a mismatch raises
    :class:`InvalidArgumentError` naming the element and feature. Runs under the GIL.
    Checkpoints resume it by replaying (the generator must give the same elements)."""
    if not callable(generator):
        raise InvalidArgumentError("from_generator: `generator` must be callable")
    if not isinstance(output_signature, Mapping) or not output_signature:
        raise InvalidArgumentError("from_generator: output_signature must be a dict of TensorSpec")
    signature = {name: _spec_of(spec) for name, spec in output_signature.items()}
    name = getattr(generator, "__qualname__", None) or repr(generator)
    return Pipeline(_make_source(("generator", generator, signature, name)))


class _checked_generator:
    """Calls the user's generator and checks each element against the signature."""

    def __init__(self, generator: Callable[[], Iterable[Mapping[str, Any]]], signature: Dict[str, "TensorSpec"]) -> None:
        self.generator = generator
        self.signature = signature

    def __call__(self) -> Iterator[Dict[str, Any]]:
        generator, signature = self.generator, self.signature

        def checked() -> Iterator[Dict[str, Any]]:
            for index, item in enumerate(generator()):
                if not isinstance(item, Mapping):
                    raise InvalidArgumentError(
                        f"from_generator: element {index} is {type(item).__name__}, not a dict"
                    )
                extra = set(item) - set(signature)
                if extra:
                    raise InvalidArgumentError(
                        f"from_generator: element {index} has {sorted(extra)} beyond the output_signature"
                    )
                out = {}
                for name, spec in signature.items():
                    if name not in item:
                        raise InvalidArgumentError(
                            f"from_generator: element {index} lacks `{name}`"
                        )
                    try:
                        value = np.asarray(item[name], dtype=spec.dtype)
                    except (TypeError, ValueError) as e:
                        raise InvalidArgumentError(
                            f"from_generator: element {index}, `{name}`: not {spec.dtype}: {e}"
                        ) from e
                    if not spec.is_compatible_with(value):
                        raise InvalidArgumentError(
                            f"from_generator: element {index}, `{name}`: shape {value.shape} "
                            f"does not match {spec.shape}"
                        )
                    out[name] = value
                yield out

        return checked()



def _check_pipelines(what: str, pipelines: Sequence[Any]) -> None:
    for p in pipelines:
        if not isinstance(p, Pipeline):
            raise InvalidArgumentError(f"{what}: {p!r} is not a sluice.Pipeline")


def range(start: int, stop: Optional[int] = None, step: int = 1) -> Pipeline:  # noqa: A001
    """Elements ``{"value": int64}`` for ``start, start + step, ...`` before ``stop``
    (``Dataset.range``; ``range(n)`` counts from 0)."""
    if stop is None:
        start, stop = 0, start
    return Pipeline(_make_source(("range", int(start), int(stop), int(step))))


def zip(pipelines: Sequence[Pipeline]) -> Pipeline:  # noqa: A001
    """The i-th elements of every pipeline merged into one dict (``Dataset.zip``); ends
    with the shortest. Feature names must not clash. The options of the result apply."""
    pipelines = list(pipelines)
    _check_pipelines("zip", pipelines)
    return Pipeline(_make_source(("zip", pipelines)))


def sample_from_datasets(
    pipelines: Sequence[Pipeline],
    weights: Optional[Sequence[float]] = None,
    seed: Optional[int] = None,
    stop_on_empty_dataset: bool = False,
) -> Pipeline:
    """Elements drawn at random from ``pipelines`` with probabilities proportional to
    ``weights`` (default: equal), seeded by ``seed`` or the pipeline's seed
    (``Dataset.sample_from_datasets``). An exhausted input leaves the draw, unless
    ``stop_on_empty_dataset``."""
    pipelines = list(pipelines)
    _check_pipelines("sample_from_datasets", pipelines)
    w = [1.0] * len(pipelines) if weights is None else [float(x) for x in weights]
    return Pipeline(_make_source(("sample_from", pipelines, w, seed, bool(stop_on_empty_dataset))))


def choose_from_datasets(
    pipelines: Sequence[Pipeline],
    choice: Union[Pipeline, Sequence[int]],
    stop_on_empty_dataset: bool = True,
) -> Pipeline:
    """Each element from ``pipelines[i]`` for the next choice ``i``
    (``Dataset.choose_from_datasets``). ``choice`` is a pipeline of elements
    ``{"value": integer scalar}`` (e.g. ``sluice.range(3).repeat()`` for round robin) or a
    list of indices. Ends when the choices end or, with ``stop_on_empty_dataset`` (the
    default, as TensorFlow's), when a chosen pipeline is exhausted; otherwise that
    pipeline is dropped and its later choices skipped. A choice out of range raises
    ``InvalidDataError`` when it is reached."""
    pipelines = list(pipelines)
    _check_pipelines("choose_from_datasets", pipelines)
    if not isinstance(choice, Pipeline):
        values = [int(c) for c in choice]
        choice = from_tensor_slices({"value": np.asarray(values, dtype=np.int64)})
    _check_pipelines("choose_from_datasets", [choice])
    return Pipeline(_make_source(("choose_from", pipelines, choice, bool(stop_on_empty_dataset))))


def _plain(x: Any) -> Any:
    """NumPy scalars and arrays as plain Python numbers and lists (for the stage's JSON)."""
    if hasattr(x, "tolist"):
        return x.tolist()
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


def _vocabulary(v: Any) -> Any:
    """A vocabulary: a path (a file of tokens), ``{"adapted": statistics file}``, or the
    tokens as a list."""
    if isinstance(v, Mapping):
        return {k: os.fspath(x) for k, x in v.items()}
    if isinstance(v, os.PathLike):
        return os.fspath(v)
    if isinstance(v, str):
        return v
    return _plain(list(v))
