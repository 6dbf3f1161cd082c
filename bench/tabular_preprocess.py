"""A Criteo-like tabular pipeline (issue 25): 13 numeric columns normalized, 26 categorical
columns hashed, 2 crosses, batches of 1,024, from a CSV file; Sluice's Keras stages
against tf.data with the same Keras layers inside `map`.

    python bench/tabular_preprocess.py gen DIR [--rows N]   # DIR/criteo.csv
    python bench/tabular_preprocess.py sluice DIR [--rounds N]
    python bench/tabular_preprocess.py tfdata DIR [--rounds N]

Both read the same file with the same record defaults, batch first and run the layers on
whole batches (`batch` before `map`, as tf.data's guide advises), and touch every output.
One JSON line per round: rows/s and peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

NUM = [f"I{k}" for k in range(1, 14)]
CAT = [f"C{k}" for k in range(1, 27)]
CROSSES = [("C1", "C2"), ("C3", "C4")]
BATCH = 1024
BINS = 1000
# Means and variances as `adapt` would have learnt them (fixed here: the bench measures the
# preprocessing, not the analysis).
MEAN, VAR = 50.0, 900.0


def gen(d: Path, rows: int) -> None:
    import numpy as np

    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    with open(d / "criteo.csv", "w") as f:
        f.write(",".join(["label"] + NUM + CAT) + "\n")
        for start in range(0, rows, 10_000):
            n = min(10_000, rows - start)
            label = rng.integers(0, 2, n)
            nums = rng.exponential(50, (n, 13)).astype(int)
            cats = rng.integers(0, 1 << 24, (n, 26))
            for r in range(n):
                f.write(",".join([str(label[r])] + [str(x) for x in nums[r]]
                                 + [f"{x:06x}" for x in cats[r]]) + "\n")
    print(d / "criteo.csv", os.path.getsize(d / "criteo.csv"), "bytes")


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def report(engine: str, r: int, rows: int, dt: float) -> None:
    print(json.dumps({"engine": engine, "round": r, "rows": rows, "rows_per_s": rows / dt,
                      "seconds": dt, "peak_rss_mb": rss_mb()}), flush=True)


def run_sluice(d: Path, rounds: int) -> None:
    import numpy as np
    import sluice

    defaults = [np.int64(0)] + [0.0] * 13 + [""] * 26
    for r in range(rounds):
        p = sluice.csv(d / "criteo.csv", header=True, record_defaults=defaults).batch(BATCH)
        for c in NUM:
            p = p.normalization(c, mean=MEAN, variance=VAR)
        for a, b in CROSSES:
            p = p.hashed_crossing([a, b], output=f"{a}_x_{b}", num_bins=BINS)
        for c in CAT:
            p = p.hashing(c, num_bins=BINS)
        start = time.perf_counter()
        rows = 0
        for batch in p:
            rows += len(batch["label"])
        report("sluice", r, rows, time.perf_counter() - start)


def run_tfdata(d: Path, rounds: int) -> None:
    import tensorflow as tf
    import keras

    # axis=None: one mean and variance for the column (its batches are rank 1).
    norm = {c: keras.layers.Normalization(axis=None, mean=MEAN, variance=VAR) for c in NUM}
    hashes = {c: keras.layers.Hashing(num_bins=BINS) for c in CAT}
    crosses = {(a, b): keras.layers.HashedCrossing(num_bins=BINS) for a, b in CROSSES}
    names = ["label"] + NUM + CAT
    defaults = [tf.constant(0, tf.int64)] + [tf.constant(0.0)] * 13 + [tf.constant("")] * 26

    def preprocess(*cols):
        x = dict(zip(names, cols))
        out = {"label": x["label"]}
        for c in NUM:
            out[c] = norm[c](x[c])
        for (a, b), layer in crosses.items():
            out[f"{a}_x_{b}"] = layer((x[a], x[b]))
        for c in CAT:
            out[c] = hashes[c](x[c])
        return out

    # One dataset, iterated once per round (its map function is traced once: the Keras
    # layers cannot be traced into a second graph).
    ds = tf.data.experimental.CsvDataset(str(d / "criteo.csv"), defaults, header=True)
    ds = ds.batch(BATCH).map(preprocess, num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.prefetch(tf.data.AUTOTUNE)
    for r in range(rounds):
        start = time.perf_counter()
        rows = 0
        for batch in ds:
            rows += int(batch["label"].shape[0])
        report("tf.data", r, rows, time.perf_counter() - start)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["gen", "sluice", "tfdata"])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--rows", type=int, default=500_000)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    if a.what == "gen":
        gen(a.dir, a.rows)
    elif a.what == "sluice":
        run_sluice(a.dir, a.rounds)
    else:
        run_tfdata(a.dir, a.rounds)


if __name__ == "__main__":
    main()
