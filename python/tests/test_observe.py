"""Observing a run from Python (issue 27): ``Pipeline.observe`` writes a Chrome trace,
TensorBoard event files that TensorBoard's own ``EventAccumulator`` reads back, and the run
JSON ``sluice.report`` turns into a self-contained HTML page."""

from __future__ import annotations

import json
import time

import pytest

import sluice


def slow(element):
    # A stage with measurable work (and a Python function on the consumer's thread).
    t = time.perf_counter()
    while time.perf_counter() - t < 0.0002:
        pass
    return element


def pipeline() -> sluice.Pipeline:
    return (
        sluice.range(3000)
        .map(slow)
        .batch(32)
        .prefetch(4)
        .options(seed=1)
    )


def test_a_trace_holds_every_stage_and_is_written_when_the_block_ends(tmp_path):
    p = pipeline()
    trace = tmp_path / "trace.json"
    with p.observe(trace=trace) as obs:
        assert sum(1 for _ in p) == 94
        assert not trace.exists()
    assert obs.trace_events > 0
    t = json.loads(trace.read_text())
    spans = {e["name"] for e in t["traceEvents"] if e["ph"] == "X"}
    for stage in ["range", "map", "batch", "prefetch"]:
        assert stage in spans, spans
    # Every event has the fields the format requires.
    for e in t["traceEvents"]:
        assert {"ph", "pid", "tid", "name"} <= e.keys(), e
        if e["ph"] == "X":
            assert e["dur"] >= 0 and e["ts"] >= 0
    assert "one in 16" in t["otherData"]["sampling"]


def test_tensorboard_reads_the_scalars_back(tmp_path):
    # TensorBoard's own reader (the tensorboard package from PyPI; .ci/run installs it).
    from tensorboard.backend.event_processing import event_accumulator

    p = pipeline()
    obs = p.observe(tensorboard=tmp_path / "tb")
    for _ in range(2):
        assert sum(1 for _ in p) == 94
    assert obs.tensorboard_file is not None
    acc = event_accumulator.EventAccumulator(
        str(tmp_path / "tb"), size_guidance={event_accumulator.SCALARS: 0}
    )
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    for tag in [
        "pipeline/elements_per_s",
        "pipeline/buffered_mb",
        "pipeline/bottleneck_stage",
        "stage/01_map/elements_per_s",
        "stage/01_map/busy_fraction",
        "stage/03_prefetch/buffer_fill",
    ]:
        assert tag in tags, sorted(tags)
    rate = acc.Scalars("pipeline/elements_per_s")
    steps = [s.step for s in rate]
    # Steps are milliseconds since the run started, one per sample, both epochs.
    assert len(steps) == len(obs.timeline()["samples"])
    assert steps == sorted(steps)
    assert max(s.value for s in rate) > 0
    # Integrated over time, the rates give the batches both epochs produced.
    produced = sum(b.value * (b.step - a.step) / 1e3 for a, b in zip(rate, rate[1:]))
    assert produced == pytest.approx(188, rel=0.15)
    bottleneck = {s.value for s in acc.Scalars("pipeline/bottleneck_stage")}
    assert bottleneck <= {-1.0, 0.0, 1.0, 2.0, 3.0}


def test_the_timeline_and_the_run_json(tmp_path):
    p = pipeline()
    obs = p.observe()
    assert sum(1 for _ in p) == 94
    timeline = obs.timeline()
    assert [s["name"] for s in timeline["stages"]] == ["range", "map", "batch", "prefetch"]
    last = timeline["samples"][-1]
    assert last["elements"] == 94
    assert last["stages"][0]["elements_out"] == 3000
    run = obs.run()
    assert run["elements"] == 94 and run["timeline"]["samples"]
    map_stage = next(s for s in run["stages"] if s["name"] == "map")
    assert map_stage["element_p50_seconds"] >= 0.00015
    assert map_stage["element_p99_seconds"] >= map_stage["element_p50_seconds"]
    obs.save(tmp_path / "run.json")
    assert json.loads((tmp_path / "run.json").read_text())["elements"] == 94


def test_report_renders_one_run_or_two(tmp_path):
    p = pipeline()
    obs = p.observe(name="first")
    assert sum(1 for _ in p) == 94
    obs.save(tmp_path / "a.json")
    q = pipeline()
    other = q.observe(name="second")
    assert sum(1 for _ in q) == 94
    html_path = sluice.report([tmp_path / "a.json"], tmp_path / "one.html")
    html = open(html_path, encoding="utf-8").read()
    assert html.startswith("<!DOCTYPE html>") or html.lower().startswith("<!doctype html>")
    assert "<svg" in html and "first" in html
    two = sluice.report([tmp_path / "a.json", other.run()], tmp_path / "two.html")
    html = open(two, encoding="utf-8").read()
    assert "first" in html and "second" in html
    # Self-contained: nothing fetched at view time.
    assert "http://" not in html.replace("http://www.w3.org", "")
    assert "<script src" not in html and "<link" not in html


def test_a_bad_run_is_a_typed_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{\"stages\": 3}")
    with pytest.raises(sluice.InvalidArgumentError):
        sluice.report([bad], tmp_path / "out.html")
    assert not (tmp_path / "out.html").exists()
