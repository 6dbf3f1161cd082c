"""parse_sequence_example and parse_example's fixed_len_sequence / sparse / ragged kinds from
Python, against TensorFlow's outputs in tests/fixtures/parse/parse.json (written by
tests/fixtures/parse/generate.py). The records are written to a TFRecord file here."""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path

import numpy as np
import pytest

import sluice

FIXTURE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "parse" / "parse.json"


def _crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def _masked(data: bytes) -> int:
    crc = _crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def _write_tfrecord(path: Path, records: list[bytes]) -> None:
    with open(path, "wb") as f:
        for r in records:
            length = struct.pack("<Q", len(r))
            f.write(length + struct.pack("<I", _masked(length)) + r + struct.pack("<I", _masked(r)))


def _case(section: str, name: str) -> dict:
    cases = json.loads(FIXTURE.read_text())[section]
    return next(c for c in cases if c["name"] == name)


def _records(case: dict, tmp_path: Path) -> Path:
    path = tmp_path / "records.tfrecord"
    _write_tfrecord(path, [base64.b64decode(r) for r in case["records"]])
    return path


def _dense(d: dict) -> np.ndarray:
    if d["dtype"] == "string":
        return np.array([base64.b64decode(v) for v in d["values"]], dtype=object).reshape(d["shape"])
    dtype = np.int64 if d["dtype"] == "int64" else np.float32
    return np.array(d["values"], dtype=dtype).reshape(d["shape"])


def _check(got, want: dict) -> None:
    if "dense" in want:
        expected = _dense(want["dense"])
        got = np.asarray(got)
        assert got.shape == expected.shape
        if expected.dtype == object:
            assert [bytes(x) for x in got.reshape(-1)] == list(expected.reshape(-1))
        else:
            np.testing.assert_array_equal(got, expected)
    else:
        values = _dense(want["ragged"]["values"])
        splits = want["ragged"]["row_splits"]
        assert len(got) == len(splits) - 1
        for row, (a, b) in zip(got, zip(splits, splits[1:])):
            _check(row, {"dense": {**want["ragged"]["values"], "shape": [b - a, *values.shape[1:]],
                                   "values": want["ragged"]["values"]["values"][a:b]}})


def test_parse_sequence_example_alone_and_batched(tmp_path):
    case = _case("parse_sequence_example", "basic")
    path = _records(case, tmp_path)
    p = sluice.tfrecord(str(path))
    ctx, seq = case["context_features"], case["sequence_features"]
    alone = p.parse_sequence_example(context_features=ctx, sequence_features=seq).collect()
    assert len(alone) == len(case["single"])
    for element, tf in zip(alone, case["single"]):
        assert set(element) == set(tf["output"])
        for name, want in tf["output"].items():
            _check(element[name], want)
    batched = p.batch(len(case["records"])).parse_sequence_example(
        context_features=ctx, sequence_features=seq).collect()[0]
    assert set(batched) == set(case["batched"]["output"])
    for name, want in case["batched"]["output"].items():
        _check(batched[name], want)


def test_parse_example_new_kinds(tmp_path):
    for name in ["fls_pairs_default", "sparse_unsorted_sorted", "ragged_row_lengths"]:
        case = _case("parse_example", name)
        path = _records(case, tmp_path)
        got = sluice.tfrecord(str(path)).batch(len(case["records"])).parse_example(
            case["features"]).collect()[0]
        assert set(got) == set(case["batched"]["output"]), name
        for out, want in case["batched"]["output"].items():
            _check(got[out], want)


def test_missing_feature_list_is_invalid_data(tmp_path):
    case = _case("parse_sequence_example", "missing_feature_list")
    path = _records(case, tmp_path)
    p = sluice.tfrecord(str(path)).parse_sequence_example(
        context_features=case["context_features"], sequence_features=case["sequence_features"])
    with pytest.raises(sluice.errors.InvalidDataError) as info:
        p.collect()
    assert "tok" in str(info.value) and "is required but could not be found" in str(info.value)


def test_bad_sequence_spec_is_refused_at_once():
    with pytest.raises(sluice.errors.InvalidArgumentError, match="takes no default"):
        sluice.tfrecord("unused.tfrecord").parse_sequence_example(
            sequence_features={"t": {"dtype": "int64", "kind": "fixed_len_sequence",
                                     "default": 1}})
