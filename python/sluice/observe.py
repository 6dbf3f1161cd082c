"""Seeing where a pipeline's time goes: a trace of its threads (Perfetto,
``chrome://tracing``), TensorBoard scalars, and the run JSON ``sluice report`` turns into
an HTML page. The same as ``sluice run --trace FILE --tensorboard DIR --json``.

>>> import sluice
>>> pipeline = sluice.range(1000).batch(10)
>>> with pipeline.observe(trace="trace.json", tensorboard="tb/") as obs:  # doctest: +SKIP
...     for batch in pipeline:
...         pass
>>> obs.save("run.json")                                     # doctest: +SKIP
>>> sluice.report(["run.json"], "report.html")               # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Optional, Sequence, Union

from . import _sluice

__all__ = ["Observer", "report"]

PathLike = Union[str, "os.PathLike[str]"]


class Observer:
    """What :meth:`Pipeline.observe` returns: the pipeline's runs (every epoch from then
    on) report to it. A context manager: leaving the ``with`` block writes the trace."""

    def __init__(self, inner: "_sluice.Observer", name: Optional[str]) -> None:
        self._inner = inner
        self._name = name

    def __enter__(self) -> "Observer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.write_trace()

    def write_trace(self) -> Optional[str]:
        """Writes the trace (Chrome trace event JSON) to its file, whole or not at all, and
        returns its path; ``None`` when no trace was asked for. Open it in
        https://ui.perfetto.dev or ``chrome://tracing``."""
        path = self._inner.write_trace()
        return None if path is None else os.fspath(path)

    @property
    def trace_events(self) -> int:
        """Events the trace recorded so far (0 without a trace)."""
        return self._inner.trace_events()

    @property
    def tensorboard_file(self) -> Optional[str]:
        """The TensorBoard event file being written (``tensorboard --logdir`` its directory),
        or ``None``."""
        path = self._inner.tensorboard_file
        return None if path is None else os.fspath(path)

    def timeline(self) -> Dict[str, Any]:
        """The runs' statistics over time: ``samples`` (per sample ``t``, ``epoch``,
        ``elements``, ``buffered_bytes``, the interval's ``bottleneck`` stage number, and per
        stage cumulative counts and times), ``stages`` (number and name), ``events``
        (epochs, autotune decisions, storage retries, skips)."""
        return json.loads(self._inner.timeline_json())

    def run(self) -> Dict[str, Any]:
        """The run as ``sluice run --json`` describes it (what :func:`report` reads): the
        latest epoch's statistics and the timeline of every epoch observed."""
        return json.loads(self._inner.run_json(self._name))

    def save(self, path: PathLike) -> None:
        """Writes :meth:`run` as JSON to ``path`` (for ``sluice report`` or :func:`report`)."""
        from .pipeline import _write_durably

        _write_durably(path, json.dumps(self.run()) + "\n")


def report(runs: Sequence[Union[PathLike, Dict[str, Any]]], out: PathLike = "report.html") -> str:
    """Writes ``sluice report``'s self-contained HTML page for one run or two (compared
    side by side) to ``out`` and returns its path. ``runs``: run JSON files (``sluice run
    --json``, :meth:`Observer.save`) or the dicts :meth:`Observer.run` returns."""
    texts, labels = [], []
    for r in runs:
        if isinstance(r, dict):
            texts.append(json.dumps(r))
            labels.append(str(r.get("pipeline") or "run"))
        else:
            with open(r, encoding="utf-8") as f:
                texts.append(f.read())
            labels.append(os.path.basename(os.fspath(r)))
    html = _sluice.render_report(texts, labels)
    from .pipeline import _write_durably

    _write_durably(out, html)
    return os.fspath(out)
