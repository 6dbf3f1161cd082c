"""sluice.image_folder against Keras's image_dataset_from_directory on the same folder
(tests/fixtures/image_folder/, written by generate.py there): class names, Keras's file
order for a seed and split, and the decoded, resized images with their labels."""

import json

import numpy as np
import pytest

import sluice
from conftest import REPO

FIXTURES = REPO / "tests" / "fixtures" / "image_folder"
TREE = FIXTURES / "tree"


def case(name):
    cases = json.loads((FIXTURES / "expected.json").read_text())["cases"]
    return next(c for c in cases if c["name"] == name)


def label_of(path, class_names):
    return class_names.index(path.split("/")[0])


def test_rgb_images_and_labels_are_keras_s():
    want = case("sorted")["subsets"][0]
    p = sluice.image_folder(TREE, image_size=(5, 4), shuffle=False)
    assert p.class_names == want["class_names"]
    got = list(p)
    assert len(got) == len(want["elements"])
    for e, w, path in zip(got, want["elements"], want["file_paths"]):
        assert e["image"].dtype == np.float32 and list(e["image"].shape) == w["shape"]
        assert e["label"].dtype == np.int32 and int(e["label"]) == w["label"]
        diff = np.abs(e["image"].reshape(-1) - np.asarray(w["pixels"], dtype=np.float32))
        if path.endswith((".jpg", ".jpeg")):
            assert diff.max() <= 16, path  # decoders differ (see sluice-image's docs)
        else:
            assert diff.max() <= 1e-3, path


def test_seeded_order_and_validation_subsets():
    for name, subset in [("train_seed_7", "training"), ("val_seed_7", "validation")]:
        want = case(name)["subsets"][0]
        p = sluice.image_folder(
            TREE, image_size=(5, 4), seed=7, validation_split=0.25, subset=subset, decode=False
        )
        got = [int(e["label"]) for e in p]
        assert got == [label_of(f, want["class_names"]) for f in want["file_paths"]], name
    train, val = sluice.image_folder(
        TREE, image_size=4, seed=7, validation_split=0.3, subset="both", label_mode="categorical"
    )
    want = case("both_seed_7")["subsets"]
    assert len(list(train)) == len(want[0]["file_paths"])
    batch = next(iter(val.batch(8)))
    assert batch["image"].shape == (len(want[1]["file_paths"]), 4, 4, 3)
    assert batch["label"].dtype == np.float32 and batch["label"].shape[1] == 3


def test_no_labels_and_keras_s_checks():
    p = sluice.image_folder(TREE, labels=None, image_size=2, seed=5)
    assert p.class_names is None
    elements = list(p)
    assert len(elements) == len(case("no_labels")["subsets"][0]["file_paths"])
    assert set(elements[0]) == {"image"}
    with pytest.raises(sluice.SluiceError, match="seed"):
        list(sluice.image_folder(TREE, validation_split=0.2, subset="training"))
    with pytest.raises(sluice.SluiceError, match="cow"):
        list(sluice.image_folder(TREE, class_names=["cow"]))
