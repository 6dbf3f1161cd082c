"""`Pipeline.group_by_window` and `Pipeline.bucket_by_sequence_length` against what tf.data
gave for the same inputs (tests/fixtures/transformations/grouping.json, written by
generate_grouping.py there), plus their parameter checks and a checkpoint resumed."""

import json

import numpy as np
import pytest

import sluice
from conftest import REPO

FIXTURE = json.loads(
    (REPO / "tests" / "fixtures" / "transformations" / "grouping.json").read_text())

SIGNATURE = {
    "key": sluice.TensorSpec([], np.int64),
    "label": sluice.TensorSpec([], np.int64),
    "tokens": sluice.TensorSpec([None], np.int64),
    "weights": sluice.TensorSpec([None], np.float32),
}


def source(elements):
    """The fixture's elements as a generator source (as tf.data's `from_generator`)."""
    def gen():
        for e in elements:
            yield {"key": np.int64(e["key"]), "label": np.int64(e["label"]),
                   "tokens": np.array(e["tokens"], dtype=np.int64),
                   "weights": np.array(e["weights"], dtype=np.float32)}
    return sluice.from_generator(gen, output_signature=SIGNATURE)


def encode(batch, names):
    return {n: {"shape": list(np.asarray(batch[n]).shape),
                "values": np.asarray(batch[n]).reshape(-1).tolist()} for n in names}


def padded_cases():
    return [c for c in FIXTURE["group_by_window"] if c["padded"] and c["input"] == "mixed"]


@pytest.mark.parametrize("case", padded_cases(),
                         ids=lambda c: f"w{c['window_size']}-drop{c['drop_remainder']}"
                                       f"-{sorted(c['padding_values'])}")
def test_group_by_window_matches_tf_data(case):
    elements = FIXTURE["inputs"]["group_by_window"][case["input"]]
    p = source(elements).group_by_window(
        "key", case["window_size"], padded=True, drop_remainder=case["drop_remainder"],
        padded_shapes=case["padded_shapes"] or None,
        padding_values=case["padding_values"] or None)
    got = [encode(b, SIGNATURE) for b in p]
    assert got == case["batches"]


def bucket_cases():
    return [c for c in FIXTURE["bucket_by_sequence_length"] if "error" not in c]


@pytest.mark.parametrize("case", bucket_cases(), ids=lambda c: json.dumps(
    {k: v for k, v in c.items() if k != "batches"}, sort_keys=True))
def test_bucket_by_sequence_length_matches_tf_data(case):
    elements = FIXTURE["inputs"]["bucket_by_sequence_length"][case["input"]]
    p = source(elements).bucket_by_sequence_length(
        "tokens", case["bucket_boundaries"], case["bucket_batch_sizes"],
        padded_shapes=case.get("padded_shapes"),
        padding_values=case.get("padding_values"),
        pad_to_bucket_boundary=case.get("pad_to_bucket_boundary", False),
        no_padding=case.get("no_padding", False),
        drop_remainder=case.get("drop_remainder", False))
    got = [encode(b, SIGNATURE) for b in p]
    assert got == case["batches"]


def test_pad_to_bucket_boundary_fails_on_the_last_bucket_as_tf_data():
    case = next(c for c in FIXTURE["bucket_by_sequence_length"] if "error" in c)
    elements = FIXTURE["inputs"]["bucket_by_sequence_length"][case["input"]]
    p = source(elements).bucket_by_sequence_length(
        "tokens", case["bucket_boundaries"], case["bucket_batch_sizes"],
        pad_to_bucket_boundary=True)
    got = []
    with pytest.raises(sluice.InvalidDataError) as err:
        for b in p:
            got.append(encode(b, SIGNATURE))
    assert got == case["batches"]
    assert err.value.feature == "tokens"
    assert "pad_to_bucket_boundary" in str(err.value)


def test_a_bad_key_and_bad_parameters_are_named():
    keys = np.array([1, 2], dtype=np.int32)
    with pytest.raises(sluice.InvalidDataError, match=r"must be int64 \(i64\), found i32"):
        list(sluice.from_tensor_slices({"k": keys}).group_by_window("k", 2))
    with pytest.raises(sluice.InvalidArgumentError, match="window_size"):
        sluice.range(4).group_by_window("value", 0)
    with pytest.raises(sluice.InvalidArgumentError, match="one more entry"):
        sluice.range(4).bucket_by_sequence_length("value", [2, 3], [4, 4])


def test_a_checkpoint_resumes_with_the_open_groups():
    keys = np.arange(30, dtype=np.int64) % 4
    p = sluice.from_tensor_slices({"key": keys, "v": np.arange(30, dtype=np.int64)}) \
        .group_by_window("key", 3)
    whole = [np.asarray(b["v"]).tolist() for b in p]
    it = p.iter()
    first = [np.asarray(next(it)["v"]).tolist() for _ in range(3)]
    state = it.checkpoint()
    rest = [np.asarray(b["v"]).tolist() for b in p.iter(resume=state)]
    assert first + rest == whole
    # Groups fill in key order of arrival; the leftovers come in key order.
    assert whole[0] == [0, 4, 8] and whole[-2:] == [[26], [27]]
