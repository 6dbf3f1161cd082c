"""Values read from Python equal what TensorFlow wrote and read back (the fixtures'
MANIFEST.json and expectation files)."""

from __future__ import annotations

import base64
import hashlib
import json

import numpy as np
import pytest

import sluice

# As image/tests/decode.rs: zune-jpeg's IDCT is not libjpeg's INTEGER_FAST.
JPEG_MEAN_TOLERANCE = 1.25


def _expected_values(feature: dict):
    """A tf.train.Feature in JSON (proto3 JSON mapping) as (dtype, list of values)."""
    if "int64List" in feature:
        return "int64", [int(v) for v in feature["int64List"].get("value", [])]
    if "floatList" in feature:
        return "float", [float(v) for v in feature["floatList"].get("value", [])]
    return "string", [base64.b64decode(v) for v in feature["bytesList"].get("value", [])]


@pytest.mark.parametrize("name", ["examples.tfrecord", "examples.tfrecord.gz", "examples.tfrecord.zlib"])
def test_examples_match_tensorflow(fixtures, manifest, name):
    entry = manifest["files"][name]
    want = json.loads((fixtures / entry["expect"]).read_text())
    # Every feature any record has, parsed as var_len (each record's own values).
    kinds = {}
    for record in want:
        for fname, feature in record["features"]["feature"].items():
            kinds[fname] = _expected_values(feature)[0]
    features = {f: {"dtype": d, "kind": "var_len"} for f, d in kinds.items()}
    got = sluice.tfrecord(str(fixtures / name)).parse_example(features).collect()
    assert len(got) == entry["records"] == len(want)
    for i, (element, record) in enumerate(zip(got, want)):
        present = record["features"]["feature"]
        for fname, dtype in kinds.items():
            values = element[fname]
            assert isinstance(values, np.ndarray), (i, fname)
            if fname not in present:
                assert values.size == 0, (i, fname)
                continue
            _, expect = _expected_values(present[fname])
            if dtype == "string":
                assert values.dtype == object
                assert list(values) == expect, (i, fname)
            elif dtype == "int64":
                assert values.dtype == np.int64
                assert values.tolist() == expect, (i, fname)
            else:
                assert values.dtype == np.float32
                np.testing.assert_array_equal(values, np.asarray(expect, dtype=np.float32))


def test_images_match_tensorflow_decode(fixtures):
    want = json.loads((fixtures / "images.json").read_text())
    pipeline = (
        sluice.tfrecord(str(fixtures / "images.tfrecord-*"))
        .parse_example({"image": "string", "label": "int64"})
        .image_ops([{"op": "decode", "channels": 3}])
    )
    got = pipeline.collect()
    assert len(got) == len(want)
    for element, expect in zip(got, want):
        image = element["image"]
        assert image.dtype == np.uint8
        assert list(image.shape) == expect["shape"]
        assert int(element["label"]) == expect["label"]
        if expect["format"] == "png":
            # Lossless: byte for byte what TensorFlow decoded.
            assert hashlib.sha256(image.tobytes()).hexdigest() == expect["tf_decoded_sha256"]
        else:
            # JPEG: TensorFlow's default IDCT (libjpeg INTEGER_FAST) rounds low; the Rust
            # decode tests hold the same tolerance (image/tests/decode.rs).
            assert image.mean() == pytest.approx(expect["tf_decoded_mean"], abs=JPEG_MEAN_TOLERANCE)


@pytest.mark.parametrize("mmap", [None, True, False])
def test_raw_records_match(fixtures, mmap):
    # Mapped (the default for local files) or read into buffers: the same records.
    want = json.loads((fixtures / "raw_records.json").read_text())
    got = sluice.tfrecord(str(fixtures / "raw_records.tfrecord"), mmap=mmap).collect()
    assert [len(e["record"].item()) for e in got] == [w["len"] for w in want]
    assert [hashlib.sha256(e["record"].item()).hexdigest() for e in got] == [w["sha256"] for w in want]


def test_empty_file_has_no_records(fixtures):
    assert sluice.tfrecord(str(fixtures / "empty.tfrecord")).collect() == []
