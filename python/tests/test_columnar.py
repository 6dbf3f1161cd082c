"""NumPy, Parquet and Arrow IPC files from Python: `.npy`/`.npz` against `np.load` itself,
Parquet and Arrow against what pyarrow read from the same files (tests/fixtures/columnar/,
written by generate.py there)."""

import base64
import json

import numpy as np
import pytest

import sluice
from conftest import REPO

COLUMNAR = REPO / "tests" / "fixtures" / "columnar"

SLUICE_DTYPE = {"u8": np.uint8, "i32": np.int32, "i64": np.int64, "f32": np.float32,
                "f64": np.float64}


def expected(name):
    return json.loads((COLUMNAR / f"{name}.expected.json").read_text())


def as_bytes(x):
    x = np.asarray(x, dtype=object).reshape(-1)
    return [v if isinstance(v, bytes) else str(v).encode() for v in x]


def npy_rows(file, **kwargs):
    return list(sluice.numpy(COLUMNAR / file, **kwargs))


@pytest.mark.parametrize("name", sorted(p.name for p in COLUMNAR.glob("*.np[yz]")))
def test_numpy_files_match_np_load(name):
    want = expected(name)
    if "error" in want:
        with pytest.raises(sluice.SluiceError) as info:
            npy_rows(name)
        assert want["error"] in str(info.value) and name in str(info.value), info.value
        return
    loaded = np.load(COLUMNAR / name)
    arrays = {"value": loaded} if isinstance(loaded, np.ndarray) else dict(loaded)
    rows = npy_rows(name)
    n = next(iter(arrays.values())).shape[0]
    assert len(rows) == n
    for i, row in enumerate(rows):
        assert list(row) == list(arrays), name
        for k, a in arrays.items():
            got, ref = np.asarray(row[k]), a[i]
            if a.dtype.kind in "SU":
                ref_bytes = [v.encode() if isinstance(v, str) else bytes(v)
                             for v in np.asarray(ref).reshape(-1)]
                assert as_bytes(got) == ref_bytes, (name, k, i)
                continue
            assert got.shape == ref.shape, (name, k, i)
            dtype = want["elements"][i][k]["dtype"]
            assert got.dtype == SLUICE_DTYPE[dtype], (name, k, got.dtype)
            np.testing.assert_array_equal(got, ref.astype(got.dtype), err_msg=f"{name} {k} {i}")


def test_numpy_name_arrays_and_batches():
    rows = npy_rows("c_f32.npy", name="x")
    assert list(rows[0]) == ["x"]
    batch = next(iter(sluice.numpy(COLUMNAR / "compressed.npz", arrays=["label"]).batch(3)))
    np.testing.assert_array_equal(batch["label"], np.load(COLUMNAR / "compressed.npz")["label"])


def cell(c, fill):
    if c.get("null"):
        if c["list"]:
            return []
        return b"0" if c["dtype"] == "bytes" else 0
    vals = [base64.b64decode(v["b64"]) if isinstance(v, dict) else v for v in c["values"]]
    return vals if c["shape"] else vals[0]


def plain(x):
    x = np.asarray(x) if not isinstance(x, bytes) else x
    if isinstance(x, bytes):
        return x
    if x.dtype == object:
        return [bytes(v) for v in x.reshape(-1)] if x.ndim else bytes(x.item())
    return x.tolist()


@pytest.mark.parametrize("name", ["table_snappy.parquet", "table_zstd.parquet",
                                  "table.arrow", "table.stream.arrow", "table_zstd.arrow"])
def test_parquet_and_arrow_match_pyarrow(name):
    read = sluice.parquet if name.endswith(".parquet") else sluice.arrow
    want = expected(name)["elements"]
    rows = list(read(COLUMNAR / name, null_value=0))
    assert len(rows) == len(want)
    for row, w in zip(rows, want):
        assert sorted(row) == sorted(w)
        for k, c in w.items():
            assert plain(row[k]) == cell(c, 0), (name, k, row[k], c)
    # A null without null_value: an error naming the file, row and column.
    with pytest.raises(sluice.InvalidDataError) as info:
        list(read(COLUMNAR / name))
    assert name in str(info.value) and "row 4" in str(info.value), info.value
    assert info.value.feature == "label"
    # Projection, in the order given.
    first = next(iter(read(COLUMNAR / name, columns=["score", "id"])))
    assert list(first) == ["score", "id"]
    assert first["score"].dtype == np.float32 and first["id"].dtype == np.int64


def test_hugging_face_datasets_stream_and_batches():
    ds = sluice.arrow(COLUMNAR / "hf_dataset" / "data-*.arrow", columns=["label", "image"],
                      null_value="")
    rows = list(ds)
    want = expected("hf_dataset/data-00000-of-00001.arrow")["elements"]
    assert [int(r["label"]) for r in rows] == [cell(w["label"], 0) for w in want]
    assert [plain(r["image.bytes"]) for r in rows] == [cell(w["image.bytes"], 0) for w in want]
    batch = next(iter(ds.batch(5)))
    assert batch["label"].tolist() == [0, 1, 0, 2, 1]


def test_lists_are_ragged_until_padded_batch():
    ds = sluice.parquet(COLUMNAR / "table_snappy.parquet", columns=["tokens"], null_value=0)
    batch = next(iter(ds.padded_batch(4)))
    assert batch["tokens"].tolist() == [[0, 0, 0], [0, 0, 0], [0, 1, 0], [0, 1, 2]]


def test_null_value_must_be_a_number_or_string():
    with pytest.raises(sluice.InvalidArgumentError):
        sluice.parquet(COLUMNAR / "dense.parquet", null_value=True)
