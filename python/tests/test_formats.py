"""CSV, text lines and fixed-length records from Python, against what TensorFlow read from
the same files (tests/fixtures/formats/, written by generate.py there)."""

import base64
import json
import math

import numpy as np
import pytest

import sluice
from conftest import REPO

FORMATS = REPO / "tests" / "fixtures" / "formats"


def expected(name):
    return json.loads((FORMATS / f"{name}.expected.json").read_text())


def plain(v):
    if isinstance(v, dict):
        return base64.b64decode(v["b64"])
    return v


def value(x):
    x = np.asarray(x)
    if x.dtype == object or x.dtype.kind in "SU":
        v = x.item()
        return v if isinstance(v, bytes) else str(v).encode()
    return x.item()


def same(a, b):
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def check(name, pipeline):
    want = expected(name)
    want_rows = [[plain(v) for v in e.values()] for e in want["elements"]]
    got = []
    error = None
    try:
        for e in pipeline:
            got.append([value(v) for v in e.values()])
    except sluice.SluiceError as err:
        error = err
    assert len(got) == len(want_rows), (name, got, error)
    for g, w in zip(got, want_rows):
        assert len(g) == len(w) and all(same(a, b) for a, b in zip(g, w)), (name, g, w)
    if "error" in want:
        assert isinstance(error, sluice.InvalidDataError), (name, error)
        assert FORMATS.name in str(error) or ".csv" in str(error) or ".bin" in str(error), error
    else:
        assert error is None, (name, error)


def test_csv_matches_tensorflow():
    basic = dict(header=True, na_value="NA", record_defaults=[np.int64(-1), 0.0, "?", 0])
    check("basic.csv", sluice.csv(FORMATS / "basic.csv", **basic))
    check("basic.select_cols.csv", sluice.csv(
        FORMATS / "basic.csv", header=True, na_value="NA",
        record_defaults=[np.int64(-1), "?"], select_cols=[0, 2]))
    check("basic.required.csv", sluice.csv(
        FORMATS / "basic.csv", header=True, na_value="NA",
        record_defaults=[np.int64, np.float32, str, np.int32]))
    check("ragged.csv", sluice.csv(FORMATS / "ragged.csv", record_defaults=[np.int64(0)] * 3))
    check("badtype.csv", sluice.csv(FORMATS / "badtype.csv", record_defaults=[np.int64(0), 0.0]))
    check("piped.csv", sluice.csv(FORMATS / "piped.csv", record_defaults=[""] * 3,
                                  field_delim="|", use_quote_delim=False))
    check("numbers.csv.gz", sluice.csv(FORMATS / "numbers.csv.gz", compression_type="GZIP",
                                       record_defaults=[0, np.float64(0), ""]))


def test_csv_errors_name_line_column_and_feature():
    with pytest.raises(sluice.InvalidDataError) as info:
        list(sluice.csv(FORMATS / "badtype.csv", record_defaults=[np.int64(0), 0.0]))
    message = str(info.value)
    assert "badtype.csv" in message and "line 2, column 0" in message, message
    assert "not a valid int64" in message, message
    with pytest.raises(sluice.InvalidArgumentError):
        sluice.csv(FORMATS / "basic.csv", record_defaults=[True])


def test_csv_inference_batches_and_names_like_make_csv_dataset():
    dtypes = json.loads((FORMATS / "inferred.csv.dtypes.json").read_text())
    rows = list(sluice.csv(FORMATS / "inferred.csv", header=True))
    want = expected("inferred.csv")["elements"]
    assert len(rows) == len(want)
    for row, w in zip(rows, want):
        for name, v in w.items():
            x = np.asarray(row[name])
            assert (x.dtype.name if x.dtype.kind != "O" and x.dtype.kind not in "SU" else "string") == dtypes[name], name
            assert same(value(x), plain(v)), (name, value(x), v)
    batches = list(sluice.csv(FORMATS / "inferred.csv", header=True).batch(2))
    assert np.asarray(batches[0]["weight"]).tolist() == [70, 81]


def test_csv_batches_read_fused_equal_the_rows_batched():
    """`csv` then `batch` runs as one stage (read_and_batch_fusion); its batches are the
    ones of the rows batched apart, and a bad row is the same error."""
    basic = dict(header=True, na_value="NA", record_defaults=[np.int64(-1), 0.0, "?", 0])
    fused = sluice.csv(FORMATS / "basic.csv", **basic).batch(2)
    apart = fused.options(map_and_batch_fusion=False)
    assert "read_and_batch_fusion" in fused.explain()
    assert "read_and_batch_fusion" not in apart.explain()
    a, b = list(fused), list(apart)
    assert len(a) == len(b) > 1
    for x, y in zip(a, b):
        assert list(x) == list(y)
        for k in x:
            assert np.asarray(x[k]).tolist() == np.asarray(y[k]).tolist(), k
    bad = sluice.csv(FORMATS / "badtype.csv", record_defaults=[np.int64(0), 0.0]).batch(8)
    with pytest.raises(sluice.InvalidDataError) as info:
        list(bad)
    assert "badtype.csv" in str(info.value) and "line 2, column 0" in str(info.value)


def test_text_lines_and_fixed_length_records_match_tensorflow():
    check("lines.txt", sluice.text_lines(FORMATS / "lines.txt"))
    check("lines.txt.gz", sluice.text_lines(FORMATS / "lines.txt.gz", compression_type="GZIP"))
    check("newlines.txt", sluice.text_lines(FORMATS / "newlines.txt"))
    for name, compression in [("records.bin", None), ("records.bin.zlib", "ZLIB"),
                              ("truncated.bin", None), ("truncated.bin.gz", "GZIP")]:
        check(name, sluice.fixed_length_records(
            FORMATS / name, record_bytes=7, header_bytes=5, footer_bytes=3,
            compression_type=compression))
