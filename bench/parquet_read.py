"""Parquet read into NumPy batches: Sluice against pyarrow's own batch reader on the same
file (issue 24: "Parquet >= 1x pyarrow's batch reader into NumPy").

    python bench/parquet_read.py gen DIR            # DIR/table.parquet: 1 M rows, 8 numeric + 1 string + 1 list column
    python bench/parquet_read.py sluice DIR [--rounds N]
    python bench/parquet_read.py pyarrow DIR [--rounds N]
    python bench/parquet_read.py both DIR [--rounds N]   # alternating rounds

Each round reads the whole file once into batches of 1,024 rows and makes every column a
NumPy array (`sluice.parquet(...).batch(1024)`: its batches are NumPy arrays already;
`pyarrow.parquet.ParquetFile.iter_batches(1024)` then `to_numpy` of each column, strings
as object arrays with `zero_copy_only=False`). The list column is left out of both (Sluice's
batch needs equal lengths; pyarrow's to_numpy of a list column is an object array of
arrays). One JSON line per round: rows/s and peak RSS.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path
import os

# numpy's OpenBLAS threads spin beside the readers on a 2-CPU machine and take a core
# from whichever engine runs (neither uses BLAS here): one thread, for both engines.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


ROWS = 1_000_000
BATCH = 1024
NUMERIC = [f"i{k}" for k in range(4)] + [f"f{k}" for k in range(4)]
COLUMN_SETS = {"all": NUMERIC + ["s"], "numeric": NUMERIC, "string": ["s"]}
COLUMNS = COLUMN_SETS["all"]


def gen(d: Path) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    cols = {f"i{k}": rng.integers(-10**9, 10**9, ROWS) for k in range(4)}
    cols |= {f"f{k}": rng.standard_normal(ROWS).astype(np.float32) for k in range(4)}
    cols["s"] = pa.array([f"id-{r}" for r in range(ROWS)])
    cols["tokens"] = pa.array([list(range(r % 8)) for r in range(ROWS)], pa.list_(pa.int64()))
    pq.write_table(pa.table(cols), d / "table.parquet", row_group_size=128 * 1024)
    print(d / "table.parquet", (d / "table.parquet").stat().st_size, "bytes")


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def report(engine: str, r: int, rows: int, dt: float) -> None:
    print(json.dumps({"engine": engine, "round": r, "rows": rows, "rows_per_s": rows / dt,
                      "seconds": dt, "peak_rss_mb": rss_mb()}), flush=True)


def round_sluice(d: Path, r: int) -> None:
    import sluice

    p = sluice.parquet(d / "table.parquet", columns=COLUMNS).batch(BATCH)
    start = time.perf_counter()
    rows = 0
    for b in p:
        rows += len(b[COLUMNS[0]])
    report("sluice", r, rows, time.perf_counter() - start)


def round_pyarrow(d: Path, r: int) -> None:
    import pyarrow.parquet as pq

    start = time.perf_counter()
    rows = 0
    f = pq.ParquetFile(d / "table.parquet")
    for b in f.iter_batches(batch_size=BATCH, columns=COLUMNS):
        arrays = {n: b.column(i).to_numpy(zero_copy_only=False) for i, n in enumerate(COLUMNS)}
        rows += len(arrays[COLUMNS[0]])
    report("pyarrow", r, rows, time.perf_counter() - start)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["gen", "sluice", "pyarrow", "both"])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--columns", choices=sorted(COLUMN_SETS), default="all",
                    help="all 9 columns, the 8 numeric ones, or the string one")
    a = ap.parse_args()
    global COLUMNS
    COLUMNS = COLUMN_SETS[a.columns]
    if a.what == "gen":
        gen(a.dir)
        return
    for r in range(a.rounds):
        if a.what in ("sluice", "both"):
            round_sluice(a.dir, r)
        if a.what in ("pyarrow", "both"):
            round_pyarrow(a.dir, r)


if __name__ == "__main__":
    main()
