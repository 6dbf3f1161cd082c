"""The adapted Keras layers and numeric helpers from Python, against Keras and TensorFlow
(tests/fixtures/preprocessing/adapt_more.json, written by generate_adapt_more.py there):
Discretization's boundaries learnt by adapt, tf_idf vectors, clip and log1p, bit for bit."""

import base64
import json

import numpy as np
import pytest

import sluice
from conftest import REPO

FIXTURE = json.loads((REPO / "tests" / "fixtures" / "preprocessing" / "adapt_more.json").read_text())


def floats(t):
    dtype = {"float32": (np.uint32, np.float32), "float64": (np.uint64, np.float64)}[t["dtype"]]
    return np.array(t["bits"], dtype=dtype[0]).view(dtype[1]).reshape(t["shape"])


def array(t):
    if "bits" in t:
        return floats(t)
    if t["dtype"] == "string":
        return np.array([base64.b64decode(v) for v in t["values"]], dtype=object).reshape(t["shape"])
    return np.array(t["values"], dtype=t["dtype"]).reshape(t["shape"])


def same_bits(got, want):
    """Equal bit for bit, any NaN equal to any NaN."""
    u = np.uint64 if got.dtype == np.float64 else np.uint32
    return got.shape == want.shape and bool(np.all((got.view(u) == want.view(u))
                                                   | (np.isnan(got) & np.isnan(want))))


def batches(case):
    if "array" in case:
        values = floats(FIXTURE["arrays"][case["array"]])
        out, at = [], 0
        for n in case["batch_sizes"]:
            out.append(values[at:at + n])
            at += n
        return out
    return [floats(b) for b in case["batches"]]


def batched_evenly(case):
    """Whether the case's batches are what `batch(size of the first)` makes."""
    bs = batches(case)
    return all(len(b) == len(bs[0]) for b in bs[:-1]) and len(bs[-1]) <= len(bs[0])


@pytest.mark.parametrize("case", [c for c in FIXTURE["discretization"] if batched_evenly(c)],
                         ids=lambda c: c["name"])
def test_discretization_adapt_matches_keras(case, tmp_path):
    # The values batched by the pipeline as Keras's batches were.
    bs = batches(case)
    values = np.concatenate(bs).astype(np.float32)
    p = sluice.from_tensor_slices({"x": values}).batch(len(bs[0]))
    stats = p.adapt({"x": {"analyzer": "quantiles", "num_bins": case["num_bins"],
                           "epsilon": case["epsilon"]}}, out=tmp_path / "s.json")
    got = np.array(stats["features"]["x"]["bin_boundaries"], dtype=np.float32)
    assert got.tobytes() == floats(case["bin_boundaries"]).tobytes()
    q = (sluice.from_tensor_slices({"x": values}).batch(len(values))
         .discretization("x", num_bins=case["num_bins"], adapted=tmp_path / "s.json"))
    (batch,) = list(q)
    assert np.asarray(batch["x"]).tolist() == case["outputs"]


def test_quantiles_batch_size_gathers_elements():
    case = next(c for c in FIXTURE["discretization"] if c["name"] == "normal, batches of 64")
    values = np.concatenate(batches(case)).astype(np.float32)
    stats = sluice.from_tensor_slices({"x": values}).adapt(
        {"x": {"analyzer": "quantiles", "num_bins": 4, "batch_size": 64}})
    got = np.array(stats["features"]["x"]["bin_boundaries"], dtype=np.float32)
    assert got.tobytes() == floats(case["bin_boundaries"]).tobytes()


@pytest.mark.parametrize("case", FIXTURE["tf_idf"], ids=lambda c: c["name"])
def test_tf_idf_matches_keras(case, tmp_path):
    data = array(case["adapt"])
    analyzer = {"analyzer": "text_vocabulary" if case["layer"] == "TextVectorization"
                else "vocabulary", "tf_idf": True, **case["config"]}
    p = sluice.from_tensor_slices({"x": data}).batch(case["batch"])
    p.adapt({"x": analyzer}, out=tmp_path / "s.json")
    x = array(case["input"])
    q = sluice.from_tensor_slices({"x": x}).batch(len(x))
    vocabulary = {"adapted": tmp_path / "s.json"}
    if case["layer"] == "TextVectorization":
        q = q.text_vectorization("x", vocabulary=vocabulary, output_mode="tf_idf",
                                 ngrams=case["config"].get("ngrams"))
    elif case["layer"] == "StringLookup":
        q = q.string_lookup("x", vocabulary=vocabulary, output_mode="tf_idf")
    else:
        q = q.integer_lookup("x", vocabulary=vocabulary, output_mode="tf_idf")
    (batch,) = list(q)
    got = np.asarray(batch["x"])
    want = floats(case["output"])
    assert got.dtype == np.float32 and got.shape == want.shape
    assert got.tobytes() == want.tobytes()


def test_tf_idf_with_given_weights():
    g = FIXTURE["tf_idf_given"]
    x = array(g["input"])
    (batch,) = list(sluice.from_tensor_slices({"x": x}).batch(len(x)).text_vectorization(
        "x", vocabulary=g["vocabulary"], output_mode="tf_idf", idf_weights=g["idf_weights"]))
    assert np.asarray(batch["x"]).tobytes() == floats(g["output"]).tobytes()
    with pytest.raises(sluice.InvalidArgumentError, match="idf_weights"):
        sluice.from_tensor_slices({"x": x}).text_vectorization(
            "x", vocabulary=["a"], output_mode="tf_idf")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_log1p_matches_tensorflow(dtype):
    case = FIXTURE["log1p"][dtype]
    x = floats(case["input"])
    (batch,) = list(sluice.from_tensor_slices({"x": x}).batch(len(x)).log1p("x"))
    got, want = np.asarray(batch["x"]), floats(case["output"])
    assert got.dtype == want.dtype
    assert same_bits(got, want)


def test_clip_matches_tensorflow():
    for case in FIXTURE["clip"]:
        lo, hi = float(floats(case["clip_value_min"])), float(floats(case["clip_value_max"]))
        x = floats(case["input"])
        (batch,) = list(sluice.from_tensor_slices({"x": x}).batch(len(x))
                        .clip("x", clip_value_min=lo, clip_value_max=hi))
        got, want = np.asarray(batch["x"]), floats(case["output"])
        assert got.dtype == want.dtype
        assert same_bits(got, want), (lo, hi)
    with pytest.raises(sluice.InvalidArgumentError, match="clip"):
        sluice.from_tensor_slices({"x": np.zeros(2)}).clip("x", clip_value_min=1.0, clip_value_max=0.0)


def test_bounded_vocabulary_is_exact_within_capacity():
    words = np.array([f"w{i % 40}".encode() for i in range(400)], dtype=object)
    p = sluice.from_tensor_slices({"w": words})
    exact = p.adapt({"w": "vocabulary"})["features"]["w"]
    bounded = p.adapt({"w": {"analyzer": "vocabulary", "capacity": 40}})["features"]["w"]
    assert bounded == exact
    small = p.adapt({"w": {"analyzer": "vocabulary", "capacity": 10}})["features"]["w"]
    assert small["approximate"] is True and len(small["tokens"]) <= 10
