"""CSV read into batches: Sluice against tf.data's CsvDataset on the same file (issue 24).

    python bench/csv_read.py gen DIR            # DIR/numbers.csv: 1 M rows, 10 numeric + 2 string columns
    python bench/csv_read.py sluice DIR [--rounds N] [--threads N]
    python bench/csv_read.py tfdata DIR [--rounds N]

Each run reads the whole file once per round into batches of 1,024 rows (every column
typed as TensorFlow types it: int64, float32 and string), touches every batch, and prints
one JSON line per round: rows/s and peak RSS. `sluice` reads with `sluice.csv` (the file
split across `--threads` shards read at once with interleave), `tfdata` with
`tf.data.experimental.CsvDataset(...).batch(1024).prefetch(AUTOTUNE)`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from pathlib import Path

# numpy's OpenBLAS threads spin beside the readers on a 2-CPU machine and take a core
# from whichever engine runs (neither uses BLAS here): one thread, for both engines.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


ROWS = 1_000_000
BATCH = 1024


def gen(d: Path) -> None:
    import numpy as np

    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    ints = rng.integers(-10**6, 10**6, size=(ROWS, 5))
    floats = rng.normal(size=(ROWS, 5)).astype(np.float32)
    words = np.array(["alpha", "beta", "gamma", "delta, inc.", "epsilon"])
    with open(d / "numbers.csv", "w") as f:
        f.write(",".join([f"i{k}" for k in range(5)] + [f"f{k}" for k in range(5)] + ["s0", "s1"]) + "\n")
        for r in range(ROWS):
            s0 = words[r % 5]
            row = [str(x) for x in ints[r]] + [f"{x:.6g}" for x in floats[r]]
            row += [f'"{s0}"' if "," in s0 else s0, f"id-{r}"]
            f.write(",".join(row) + "\n")
    print(d / "numbers.csv", os.path.getsize(d / "numbers.csv"), "bytes")


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_sluice(d: Path, rounds: int, threads: int) -> None:
    import numpy as np
    import sluice

    defaults = [np.int64(0)] * 5 + [0.0] * 5 + ["", ""]
    for r in range(rounds):
        p = sluice.csv(d / "numbers.csv", header=True, record_defaults=defaults)
        p = p.batch(BATCH)
        start = time.perf_counter()
        rows = 0
        for b in p:
            rows += len(b["i0"])
        dt = time.perf_counter() - start
        print(json.dumps({"engine": "sluice", "round": r, "rows": rows,
                          "rows_per_s": rows / dt, "seconds": dt, "peak_rss_mb": rss_mb()}), flush=True)


def run_tfdata(d: Path, rounds: int) -> None:
    import tensorflow as tf

    defaults = [tf.constant(0, tf.int64)] * 5 + [tf.constant(0.0)] * 5 + [tf.constant("")] * 2
    for r in range(rounds):
        ds = tf.data.experimental.CsvDataset(str(d / "numbers.csv"), defaults, header=True)
        ds = ds.batch(BATCH).prefetch(tf.data.AUTOTUNE)
        start = time.perf_counter()
        rows = 0
        for b in ds:
            rows += int(b[0].shape[0])
        dt = time.perf_counter() - start
        print(json.dumps({"engine": "tf.data", "round": r, "rows": rows,
                          "rows_per_s": rows / dt, "seconds": dt, "peak_rss_mb": rss_mb()}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["gen", "sluice", "tfdata"])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    if a.what == "gen":
        gen(a.dir)
    elif a.what == "sluice":
        run_sluice(a.dir, a.rounds, a.threads)
    else:
        run_tfdata(a.dir, a.rounds)


if __name__ == "__main__":
    main()
