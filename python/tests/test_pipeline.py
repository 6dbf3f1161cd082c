"""The builder, TOML pipelines, NumPy hand-off (zero-copy), Python sources and functions,
checkpoints and statistics."""

from __future__ import annotations

import gc
import json
import textwrap

import numpy as np
import pytest

import sluice
from conftest import run_python

AUGMENT_OPS = [
    {"op": "decode", "channels": 3},
    {"op": "random_crop", "height": 24, "width": 24},
    {"op": "random_flip_left_right", "p": 0.5},
    {"op": "to_unit_f32"},
    {"op": "random_brightness", "max_delta": 0.1},
    {"op": "normalize", "mean": [0.5, 0.5, 0.5], "std": [0.25, 0.25, 0.25]},
]

AUGMENT_TOML = """
[source]
files = ["images.tfrecord-*"]
shuffle_files = true

[options]
seed = 7

[[stage]]
kind = "interleave"
cycle_length = 2
num_parallel = 2

[[stage]]
kind = "shuffle"
buffer_size = 8

[[stage]]
kind = "parse_example"
features.image = { dtype = "string" }
features.label = { dtype = "int64" }

[[stage]]
kind = "image_ops"
num_parallel = "auto"
ops = [
  { op = "decode", channels = 3 },
  { op = "random_crop", height = 24, width = 24 },
  { op = "random_flip_left_right", p = 0.5 },
  { op = "to_unit_f32" },
  { op = "random_brightness", max_delta = 0.1 },
  { op = "normalize", mean = [0.5, 0.5, 0.5], std = [0.25, 0.25, 0.25] },
]

[[stage]]
kind = "batch"
batch_size = 5

[[stage]]
kind = "prefetch"
"""


def augment_builder(fixtures, seed=7):
    return (
        sluice.tfrecord(str(fixtures / "images.tfrecord-*"), shuffle_files=True)
        .interleave(cycle_length=2, num_parallel=2)
        .shuffle(8)
        .parse_example({"image": "string", "label": "int64"})
        .image_ops(AUGMENT_OPS, num_parallel="auto")
        .batch(5)
        .prefetch()
        .options(seed=seed)
    )


def same_batches(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.keys() == y.keys()
        for k in x:
            assert x[k].dtype == y[k].dtype
            np.testing.assert_array_equal(x[k], y[k])


def test_builder_equals_toml(fixtures):
    built = augment_builder(fixtures).collect()
    from_text = sluice.Pipeline.from_toml(AUGMENT_TOML, data=str(fixtures)).collect()
    assert len(built) == 7  # 32 images in batches of 5
    assert built[0]["image"].shape == (5, 24, 24, 3)
    assert built[0]["image"].dtype == np.float32
    assert built[-1]["label"].shape == (2,)
    same_batches(built, from_text)
    # The same seed gives the same batches again; another seed, others.
    same_batches(built, augment_builder(fixtures).collect())
    other = augment_builder(fixtures, seed=8).collect()
    assert any(not np.array_equal(x["image"], y["image"]) for x, y in zip(built, other))


def test_from_toml_file_and_option_override(fixtures, tmp_path):
    path = tmp_path / "augment.toml"
    path.write_text(AUGMENT_TOML)
    a = sluice.Pipeline.from_toml(path, data=fixtures).collect()
    b = sluice.Pipeline.from_toml(str(path), data=fixtures, seed=8).collect()
    same_batches(a, augment_builder(fixtures).collect())
    same_batches(b, augment_builder(fixtures, seed=8).collect())


def test_batches_are_zero_copy(fixtures):
    it = augment_builder(fixtures).iter()
    batch = next(it)
    image = batch["image"]
    base = image.base
    # The array's memory is the buffer Rust wrote, kept alive by the array.
    assert isinstance(base, sluice._sluice.Buffer)
    assert image.__array_interface__["data"][0] == base.address
    assert base.nbytes == image.nbytes
    # A fresh batch is Sluice's no more: writable, like a DataLoader's tensors.
    assert image.flags.writeable and base.writable
    del it, batch, base
    gc.collect()
    # The array outlives the iterator and the batch dict.
    assert float(np.abs(image).sum()) > 0


def test_dlpack_without_copy(fixtures):
    batch = next(augment_builder(fixtures).iter())
    image = batch["image"]
    capsule = image.__dlpack__()
    assert "PyCapsule" in type(capsule).__name__
    roundtrip = np.from_dlpack(image)
    assert roundtrip.__array_interface__["data"][0] == image.__array_interface__["data"][0]
    torch = pytest.importorskip("torch")
    t = torch.from_dlpack(image)
    assert t.data_ptr() == image.__array_interface__["data"][0]
    assert tuple(t.shape) == image.shape


def test_shared_values_are_read_only(fixtures):
    # Records and their features are slices of the file's read buffer: read-only views.
    element = next(sluice.tfrecord(str(fixtures / "images.tfrecord-*")).parse_example({"label": "int64"}).iter())
    assert element["label"].shape == ()
    cached = sluice.from_tensor_slices({"x": np.arange(8)}).batch(4).cache()
    first = list(cached.build())
    assert not first[0]["x"].flags.writeable
    with pytest.raises(ValueError):
        first[0]["x"][0] = 1


def test_from_tensor_slices_map_filter(fixtures):
    xs = np.arange(20, dtype=np.int64)
    names = np.array([f"n{i}".encode() for i in range(20)], dtype=object)
    p = (
        sluice.from_tensor_slices({"x": xs, "name": names, "f": xs.astype(np.float32) / 2})
        .filter(lambda e: int(e["x"]) % 2 == 0)
        .map(lambda e: {"x": e["x"] * 10, "name": e["name"], "f": e["f"]}, num_parallel=2)
        .batch(4)
    )
    out = p.collect()
    assert [b["x"].tolist() for b in out] == [[0, 20, 40, 60], [80, 100, 120, 140], [160, 180]]
    assert out[0]["name"].tolist() == [b"n0", b"n2", b"n4", b"n6"]
    assert out[0]["f"].dtype == np.float32
    single = sluice.from_tensor_slices(np.arange(3.0)).collect()
    assert [e["value"].item() for e in single] == [0.0, 1.0, 2.0]


def test_map_with_seed_is_reproducible():
    def jitter(e, seed):
        rng = np.random.default_rng(seed)
        return {"x": e["x"] + rng.integers(0, 1000)}

    p = sluice.from_tensor_slices({"x": np.arange(16)}).map(jitter, with_seed=True, num_parallel=2)
    a = [int(e["x"]) for e in p.options(seed=3).collect()]
    b = [int(e["x"]) for e in p.options(seed=3).collect()]
    c = [int(e["x"]) for e in p.options(seed=4).collect()]
    assert a == b and a != c


def test_from_generator_checks_the_signature():
    def gen():
        for i in range(5):
            yield {"x": np.full((i + 1,), i, dtype=np.int64), "y": float(i)}

    sig = {"x": sluice.TensorSpec((None,), np.int64), "y": sluice.TensorSpec((), np.float32)}
    p = sluice.from_generator(gen, sig).padded_batch(5)
    (batch,) = p.collect()
    assert batch["x"].shape == (5, 5)
    assert batch["x"][4].tolist() == [4] * 5 and batch["x"][0].tolist() == [0, 0, 0, 0, 0]
    assert batch["y"].dtype == np.float32
    # Each epoch calls the generator again.
    assert len(p.collect()) == 1

    def bad():
        yield {"x": np.zeros((2, 2), dtype=np.int64), "y": 1.0}

    with pytest.raises(sluice.InvalidArgumentError, match="element 0, `x`: shape"):
        sluice.from_generator(bad, sig).collect()


def test_padded_and_ragged(fixtures):
    p = (
        sluice.tfrecord(str(fixtures / "examples.tfrecord"))
        .parse_example({"scores": {"dtype": "float", "kind": "var_len"}})
    )
    ragged = p.batch(4).take(1).collect()[0]["scores"]
    assert isinstance(ragged, list) and len(ragged) == 4
    assert all(isinstance(r, np.ndarray) and r.dtype == np.float32 for r in ragged)
    padded = p.padded_batch(4, padded_shapes={"scores": [None]}, padding_values={"scores": -1.0}).take(1).collect()[0]["scores"]
    assert padded.shape == (4, max(len(r) for r in ragged))
    for row, r in zip(padded, ragged):
        np.testing.assert_array_equal(row[: len(r)], r)
        assert (row[len(r):] == -1.0).all()


def test_stats_and_explain(fixtures):
    p = augment_builder(fixtures)
    assert p.stats() is None
    n = sum(1 for _ in p)
    stats = p.stats()
    assert n == 7 and stats["elements"] == 7
    names = [s["name"] for s in stats["stages"]]
    assert "tfrecord" in names[0] or "files" in names[0]
    assert stats["bottleneck"] is None or stats["bottleneck"]["name"] in names
    assert "interleave" in p.explain()
    assert "stage" in p.stats_report()


def test_progress_bar(fixtures, capsys):
    n = sum(1 for _ in augment_builder(fixtures).iter(progress="augment"))
    assert n == 7
    assert "augment" in capsys.readouterr().err


def test_checkpoint_resumes_in_a_new_process(fixtures):
    p = augment_builder(fixtures)
    it = p.iter()
    first = [next(it) for _ in range(3)]
    checkpoint = it.checkpoint()
    assert json.loads(checkpoint)["position"] == 3
    full = first + list(it)
    code = textwrap.dedent(
        """
        import sys, numpy as np, sluice
        sys.path.insert(0, "python/tests")
        from test_pipeline import augment_builder
        from pathlib import Path
        p = augment_builder(Path(sys.argv[1]))
        rest = list(p.iter(resume=sys.argv[2].encode()))
        np.savez(sys.argv[3], *[b["image"] for b in rest], labels=np.concatenate([b["label"] for b in rest]))
        """
    )
    import tempfile, os

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rest.npz")
        proc = run_python(code, str(fixtures), checkpoint.decode(), out)
        assert proc.returncode == 0, proc.stderr
        saved = np.load(out)
        images = [saved[f"arr_{i}"] for i in range(len(full) - 3)]
        for got, want in zip(images, full[3:]):
            np.testing.assert_array_equal(got, want["image"])
        np.testing.assert_array_equal(saved["labels"], np.concatenate([b["label"] for b in full[3:]]))
    # A checkpoint of another pipeline is refused.
    with pytest.raises(sluice.FailedPreconditionError):
        list(augment_builder(fixtures).batch(2).iter(resume=checkpoint))


def test_range_zip_concatenate_sample_from():
    assert [int(e["value"]) for e in sluice.range(5)] == [0, 1, 2, 3, 4]
    assert [int(e["value"]) for e in sluice.range(10, 0, -3)] == [10, 7, 4, 1]
    words = sluice.from_tensor_slices({"w": np.array([b"a", b"b", b"c"], dtype=object)})
    zipped = sluice.zip([sluice.range(3), words]).collect()
    assert [(int(e["value"]), e["w"].item()) for e in zipped] == [(0, b"a"), (1, b"b"), (2, b"c")]
    both = sluice.range(2).concatenate(sluice.range(5, 7)).collect()
    assert [int(e["value"]) for e in both] == [0, 1, 5, 6]
    def mixed():
        return sluice.sample_from_datasets(
            [sluice.range(0, 50), sluice.range(100, 150)], [0.5, 0.5]
        ).options(seed=1)

    got = [int(e["value"]) for e in mixed()]
    assert sorted(got) == list(range(0, 50)) + list(range(100, 150))
    assert got != sorted(got)
    assert got == [int(e["value"]) for e in mixed()]  # fixed by the seed
    with pytest.raises(sluice.InvalidArgumentError, match="one weight per pipeline"):
        sluice.sample_from_datasets([sluice.range(3)], [0.5, 0.5])


def test_choose_from_datasets_as_tf_data():
    # tests/fixtures/transformations/choose.json, case ([2, 5], [0, 1, 1] x 5): tf.data's
    # values for both stop_on_empty_dataset settings.
    inputs = [sluice.range(0, 2), sluice.range(100, 105)]
    choices = [0, 1, 1] * 5
    got = [int(e["value"]) for e in sluice.choose_from_datasets(inputs, choices)]
    assert got == [0, 100, 101, 1, 102, 103]
    got = sluice.choose_from_datasets(inputs, choices, stop_on_empty_dataset=False)
    assert [int(e["value"]) for e in got] == [0, 100, 101, 1, 102, 103, 104]
    # A pipeline of choices: round robin.
    rr = sluice.choose_from_datasets(
        [sluice.range(0, 3), sluice.range(10, 13)], sluice.range(2).repeat())
    assert [int(e["value"]) for e in rr] == [0, 10, 1, 11, 2, 12]
    with pytest.raises(sluice.InvalidDataError, match="selector index out of range: 2"):
        list(sluice.choose_from_datasets(inputs, [0, 2]))
