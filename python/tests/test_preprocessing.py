"""The Keras preprocessing stages from Python, against what Keras itself returned for the
same inputs (tests/fixtures/preprocessing/, written by generate.py there): each case's
input is sliced into elements and batched back whole, so that the stage, placed after the
batch, sees the tensor Keras saw."""

import base64
import json
import math

import numpy as np
import pytest

import sluice
from conftest import REPO

FIXTURE = REPO / "tests" / "fixtures" / "preprocessing" / "keras_layers.json"
METHODS = {
    "Hashing": "hashing",
    "StringLookup": "string_lookup",
    "IntegerLookup": "integer_lookup",
    "Normalization": "normalization",
    "Discretization": "discretization",
    "CategoryEncoding": "category_encoding",
    "TextVectorization": "text_vectorization",
}


def array(t):
    values = t["values"]
    if t["dtype"] == "string":
        flat = np.array([base64.b64decode(v) for v in values], dtype=object)
    elif t["dtype"].startswith("float"):
        flat = np.array([float(v) if isinstance(v, str) else v for v in values], dtype=t["dtype"])
    else:
        flat = np.array(values, dtype=t["dtype"])
    return flat.reshape(t["shape"])


def cases():
    for c in json.loads(FIXTURE.read_text())["cases"]:
        first = c["inputs"][0] if "inputs" in c else c["input"]
        if len(first["shape"]) >= 1 and first["shape"][0] > 0:
            yield c


@pytest.mark.parametrize("case", list(cases()), ids=lambda c: f"{c['layer']}-{c['name']}")
def test_layer_matches_keras(case):
    if "inputs" in case:
        xs = {f"x{k}": array(t) for k, t in enumerate(case["inputs"])}
        n = len(xs["x0"])
        p = sluice.from_tensor_slices(xs).batch(n)
        p = p.hashed_crossing(list(xs), output="x", **case["config"])
    else:
        x = array(case["input"])
        p = sluice.from_tensor_slices({"x": x}).batch(len(x))
        p = getattr(p, METHODS[case["layer"]])("x", **case["config"])
    if "error" in case:
        with pytest.raises(sluice.SluiceError) as info:
            list(p)
        assert "`x" in str(info.value)
        return
    (got,) = list(p)
    want = array(case["output"])
    got = np.asarray(got["x"])
    assert got.shape == want.shape
    if want.dtype == object:
        assert [bytes(v) for v in got.reshape(-1)] == list(want.reshape(-1))
    else:
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        if want.dtype.kind == "f":
            assert got.tobytes() == want.tobytes() or np.array_equal(got, want, equal_nan=True)
        else:
            assert np.array_equal(got, want)


def test_stages_in_a_pipeline_file(tmp_path):
    toml = """
[source]
format = "csv"
files = ["data.csv"]
header = true
record_defaults = ["", 0.0]

[[stage]]
kind = "string_lookup"
input = "city"
vocabulary = ["paris", "lima"]

[[stage]]
kind = "normalization"
input = "temp"
output = "temp_n"
mean = 10.0
variance = 4.0

[[stage]]
kind = "batch"
batch_size = 3
"""
    (tmp_path / "data.csv").write_text("city,temp\nlima,12\nrome,8\nparis,10\n")
    (tmp_path / "p.toml").write_text(toml)
    (batch,) = list(sluice.Pipeline.from_toml(tmp_path / "p.toml", data=tmp_path))
    assert np.asarray(batch["city"]).tolist() == [2, 0, 1]
    assert np.asarray(batch["temp_n"]).tolist() == [1.0, -1.0, 0.0]


def test_filter_and_enumerate_stages():
    x = np.arange(10, dtype=np.int64)
    p = (sluice.from_tensor_slices({"x": x})
         .stage("filter", feature="x", **{"in": [1, 4, 7, 8]}, ge=4)
         .enumerate(start=100))
    rows = [(int(e["x"]), int(e["index"])) for e in p]
    assert rows == [(4, 100), (7, 101), (8, 102)]
    with pytest.raises(sluice.InvalidArgumentError):
        sluice.from_tensor_slices({"x": x}).stage("filter", feature="x")


def test_text_vectorization_from_a_vocabulary_file(tmp_path):
    (tmp_path / "vocab.txt").write_text("the\ncat\nsat\n")
    texts = np.array([b"The cat sat!", b"a cat"], dtype=object)
    p = sluice.from_tensor_slices({"t": texts}).batch(2).text_vectorization(
        "t", vocabulary=tmp_path / "vocab.txt", output_sequence_length=4)
    (batch,) = list(p)
    assert np.asarray(batch["t"]).tolist() == [[2, 3, 4, 0], [1, 3, 0, 0]]


def test_adapt_learns_and_the_stages_load_the_file(tmp_path):
    ages = np.array([20.0, 30.0, 40.0, 50.0], dtype=np.float32)
    cities = np.array([b"lima", b"rome", b"lima", b"oslo"], dtype=object)
    p = sluice.from_tensor_slices({"age": ages, "city": cities})
    stats = p.adapt({"age": "mean_variance", "city": {"analyzer": "vocabulary", "max_tokens": 3}},
                    out=tmp_path / "stats.json")
    assert stats["features"]["age"]["mean"] == 35.0
    assert stats["features"]["age"]["variance"] == 125.0
    assert stats["features"]["city"]["tokens"] == ["lima", "rome"]
    q = (p.batch(4)
         .normalization("age", adapted=tmp_path / "stats.json")
         .string_lookup("city", vocabulary={"adapted": tmp_path / "stats.json"}))
    (batch,) = list(q)
    assert np.asarray(batch["city"]).tolist() == [1, 2, 1, 0]
    np.testing.assert_allclose(np.asarray(batch["age"]), (ages - 35.0) / np.sqrt(125.0), rtol=1e-6)
