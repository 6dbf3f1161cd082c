"""rejection_resample, scan (Python functions and the built-in ops) and flat_map from
Python: the same stages as the Rust API and pipeline files (core/tests/rejection_resample.rs,
core/tests/flat_map_scan.rs hold the ground-truth comparisons)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import sluice


def labelled(n: int, dist, seed: int = 11):
    rng = np.random.default_rng(seed)
    labels = rng.choice(len(dist), size=n, p=dist).astype(np.int64)
    return sluice.from_tensor_slices({"value": np.arange(n, dtype=np.int64), "label": labels})


def classes(pipeline) -> np.ndarray:
    return np.array([int(e["label"]) for e in pipeline.collect()], dtype=np.int64)


def test_rejection_resample_reaches_the_target_distribution():
    target = [0.2, 0.3, 0.5]
    for initial in ([0.5, 0.3, 0.2], None):
        p = labelled(50_000, [0.5, 0.3, 0.2]).rejection_resample(
            "label", target, initial_dist=initial).options(seed=1)
        out = classes(p)
        n = len(out)
        assert 18_000 < n < 22_000, n
        for c, t in enumerate(target):
            sigma = math.sqrt(n * t * (1 - t))
            assert abs((out == c).sum() - n * t) <= 5 * sigma, (initial, c)


def test_rejection_resample_is_seeded_and_keeps_input_order():
    def run(seed, stage_seed=None):
        p = labelled(4000, [0.8, 0.2]).rejection_resample("label", [0.5, 0.5], seed=stage_seed)
        return [int(e["value"]) for e in p.options(seed=seed).collect()]

    a = run(7)
    assert a == run(7) and a != run(8)
    assert a == sorted(set(a))
    assert run(1, stage_seed=5) == run(2, stage_seed=5)


def test_rejection_resample_resumes_from_a_checkpoint():
    def make():
        return labelled(3000, [0.6, 0.3, 0.1]).rejection_resample(
            "label", [0.3, 0.3, 0.4]).options(seed=5)

    everything = [int(e["value"]) for e in make().collect()]
    it = make().iter()
    first = [int(next(it)["value"]) for _ in range(37)]
    checkpoint = it.checkpoint()
    rest = [int(e["value"]) for e in make().iter(resume=checkpoint)]
    assert first + rest == everything


def test_rejection_resample_errors():
    with pytest.raises(sluice.InvalidArgumentError, match="target_dist"):
        labelled(10, [0.5, 0.5]).rejection_resample("label", [])
    with pytest.raises(sluice.InvalidArgumentError, match="initial_dist"):
        labelled(10, [0.5, 0.5]).rejection_resample("label", [0.5, 0.5], initial_dist=[1.0])
    bad = sluice.from_tensor_slices({"label": np.array([0, 5], dtype=np.int64)})
    with pytest.raises(sluice.InvalidDataError, match=r"outside \[0, 2\)") as info:
        bad.rejection_resample("label", [0.5, 0.5]).collect()
    assert info.value.feature == "label"


def test_scan_ops():
    p = sluice.from_tensor_slices({"x": np.array([1.5, 2.0, -0.5], dtype=np.float32)})
    sums = [e["s"].tolist() for e in p.scan_op("cumsum", input="x", output="s").collect()]
    assert sums == [1.5, 3.5, 3.0]
    means = [float(e["x"]) for e in p.scan_op("running_mean", input="x").collect()]
    assert means == pytest.approx([1.5, 1.75, 1.0])
    counts = [int(e["count"]) for e in p.scan_op("count").collect()]
    assert counts == [1, 2, 3]
    with pytest.raises(sluice.InvalidArgumentError, match="input"):
        p.scan_op("cumsum")


def test_scan_with_a_python_function_carries_its_state():
    def step(state, e):
        total = state["total"] + e["x"]
        out = {"x": e["x"], "total": total} if total % 2 == 0 else None
        return {"total": total}, out

    def make():
        return sluice.from_tensor_slices({"x": np.arange(1, 9, dtype=np.int64)}).scan(
            {"total": np.int64(0)}, step)

    # Totals 1 3 6 10 15 21 28 36: the even ones.
    assert [int(e["total"]) for e in make().collect()] == [6, 10, 28, 36]
    it = make().iter()
    next(it)
    checkpoint = it.checkpoint()
    assert [int(e["total"]) for e in make().iter(resume=checkpoint)] == [10, 28, 36]
    with pytest.raises(sluice.InvalidArgumentError, match="initial_state"):
        make().scan(3, step)

    def not_a_pair(state, e):
        return state

    with pytest.raises(sluice.UserCodeError):
        make().scan({"total": np.int64(0)}, not_a_pair).collect()


def test_flat_map_with_a_python_function():
    def repeat(e):
        n = int(e["x"])
        return [{"x": np.int64(n * 10 + k)} for k in range(n)]

    p = sluice.from_tensor_slices({"x": np.arange(5, dtype=np.int64)})
    want = [n * 10 + k for n in range(5) for k in range(n)]
    assert [int(e["x"]) for e in p.flat_map(repeat).collect()] == want
    assert [int(e["x"]) for e in p.flat_map(repeat, num_parallel=2).collect()] == want
    with pytest.raises(sluice.InvalidArgumentError, match="not callable"):
        p.flat_map(3)
