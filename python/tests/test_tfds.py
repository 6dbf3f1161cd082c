"""sluice.tfds.load against what tfds.load returned from the same data dir
(tests/fixtures/tfds/, written by generate.py there)."""

import hashlib
import json
import pickle

import numpy as np
import pytest

import sluice
import sluice.tfds
from conftest import REPO

TFDS = REPO / "tests" / "fixtures" / "tfds"
DATA_DIR = TFDS / "DATA_DIR"


def expected():
    return json.loads((TFDS / "expected.json").read_text())


def as_json(v):
    v = np.asarray(v) if not isinstance(v, bytes) else v
    if isinstance(v, bytes):
        return {"bytes": v.decode()}
    if v.dtype == object:
        return {"bytes": v.item().decode()}
    if v.dtype == np.uint8 and v.ndim == 3:
        return {"shape": list(v.shape), "sha256": hashlib.sha256(v.tobytes()).hexdigest()}
    return {"dtype": str(v.dtype), "shape": list(v.shape), "value": v.tolist()}


@pytest.mark.parametrize("case", expected()["cases"], ids=lambda c: f"{c['name']}-{c['split']}-{c['as_supervised']}")
def test_load_reads_what_tfds_load_reads(case):
    ds = sluice.tfds.load(
        case["name"], split=case["split"], data_dir=DATA_DIR, as_supervised=case["as_supervised"]
    )
    got = list(ds)
    assert len(got) == len(case["elements"])
    for g, w in zip(got, case["elements"]):
        if case["as_supervised"]:
            assert isinstance(g, tuple) and len(g) == 2
            g = {"image": g[0], "label": g[1]}
        assert {k: as_json(v) for k, v in g.items()} == w


def test_split_none_list_batch_size_and_with_info():
    splits = sluice.tfds.load("toy", data_dir=DATA_DIR)
    assert sorted(splits) == ["test", "train"]
    assert len(list(splits["test"])) == 12
    a, b = sluice.tfds.load("toy", split=["train[:3]", "test[:2]"], data_dir=DATA_DIR)
    assert (len(list(a)), len(list(b))) == (3, 2)
    ds, info = sluice.tfds.load(
        "toy:1.0.0", split="test", data_dir=DATA_DIR, with_info=True,
        decoders={"image": "skip"}, batch_size=-1,
    )
    assert info["version"] == "1.0.0"
    assert [f["names"] for f in info["features"] if f["name"] == "label"] == [["cat", "dog", "bird"]]
    (batch,) = list(ds)
    assert batch["label"].shape == (12,) and batch["label"].dtype == np.int64
    assert batch["image"][0].startswith(b"\x89PNG")
    batches = list(sluice.tfds.load("toy", split="test", data_dir=DATA_DIR, batch_size=5,
                                    as_supervised=True, decoders={"image": "skip"}))
    assert [len(y) for _, y in batches] == [5, 5, 2]


def test_shuffle_files_and_pickling():
    ds = sluice.tfds.load("toy", split="train", data_dir=DATA_DIR, shuffle_files=True,
                          as_supervised=True).options(seed=3)
    labels = [int(y) for _, y in ds]
    again = pickle.loads(pickle.dumps(ds))
    assert [int(y) for _, y in again] == labels


def test_errors_name_what_is_missing_and_what_exists():
    with pytest.raises(sluice.InvalidArgumentError, match=r"\"validation\".*train, test"):
        sluice.tfds.load("toy", split="validation", data_dir=DATA_DIR)
    with pytest.raises(sluice.InvalidArgumentError, match=r"prepared versions: 1.0.0, 1.1.0"):
        sluice.tfds.load("toy:2.*.*", split="train", data_dir=DATA_DIR)
    with pytest.raises(sluice.InvalidArgumentError, match=r"found: toy"):
        sluice.tfds.load("mnist", split="train", data_dir=DATA_DIR)
    assert sluice.tfds.list_builders(DATA_DIR) == ["toy"]
