"""No leak over many batches: RSS stays flat over 10,000 batches (arrays dropped as they go,
as a training loop does)."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import sluice

psutil = pytest.importorskip("psutil")


def test_rss_is_flat_over_ten_thousand_batches():
    proc = psutil.Process()
    data = {
        "x": np.random.default_rng(0).random((1024, 256), dtype=np.float32),
        "name": np.array([b"abc"] * 1024, dtype=object),
    }
    p = sluice.from_tensor_slices(data).repeat().batch(64).prefetch(4).take(10_500)
    it = p.iter()
    total = 0.0
    for i, batch in enumerate(it):
        total += float(batch["x"][:, 0].sum())
        if i == 500:
            gc.collect()
            start = proc.memory_info().rss
    gc.collect()
    grown = proc.memory_info().rss - start
    assert i == 10_499 and total > 0
    # Each batch is 64 KiB; 10,000 of them leaked would be 640 MB.
    assert grown < 16 * 2**20, f"RSS grew {grown / 2**20:.1f} MiB over 10,000 batches"
