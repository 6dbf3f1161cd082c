"""Every record accounted for (issue 26): ``stats()["records"]`` of a pipeline and of an
iterator; ``adapt(out=...)`` writes its file whole (a temporary renamed into place).
Needs the wheel rebuilt with the Rust side of ``records``."""

from __future__ import annotations

import json
import os

import numpy as np

import sluice


def _pipeline() -> sluice.Pipeline:
    # 40 records: multiples of 5 filtered (8), 32 left in batches of 6: 5 batches, 2 dropped.
    return (sluice.from_tensor_slices({"id": np.arange(40, dtype=np.int64)})
            .filter(lambda e: int(e["id"]) % 5 != 0)
            .batch(6, drop_remainder=True))


def test_a_whole_epoch_accounts_for_every_record():
    p = _pipeline()
    batches = list(p)
    assert len(batches) == 5
    r = p.stats()["records"]
    assert r == {"read": 40, "delivered": 30, "skipped": 0, "filtered": 8, "dropped": 2,
                 "unfinished": 0}


def test_an_iterator_stopped_early_shows_its_unfinished_records():
    it = _pipeline().iter()
    next(it)
    r = it.stats()["records"]
    assert r["delivered"] == 6
    assert r["read"] == sum(r[k] for k in ("delivered", "skipped", "filtered", "dropped",
                                           "unfinished"))
    it.close()


def test_records_are_none_when_a_take_stops_following_them():
    p = sluice.from_tensor_slices({"id": np.arange(10, dtype=np.int64)}).take(3)
    assert len(list(p)) == 3
    assert p.stats()["records"] is None


def test_adapt_writes_its_file_whole(tmp_path):
    p = sluice.from_tensor_slices({"x": np.array([1.0, 3.0], dtype=np.float32)})
    out = tmp_path / "stats.json"
    out.write_text("an older file")
    stats = p.adapt({"x": "mean_variance"}, out=out)
    assert json.loads(out.read_text()) == stats
    assert os.listdir(tmp_path) == ["stats.json"]
