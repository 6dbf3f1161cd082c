"""Text vectorization of a 100 MB corpus into padded int sequences (issue 25): Sluice's
`text_vectorization` stage against tf.data with Keras's `TextVectorization` in `map`.

    python bench/text_vectorize.py gen DIR [--mb N]    # DIR/corpus.txt, DIR/vocab.txt
    python bench/text_vectorize.py sluice DIR [--rounds N]
    python bench/text_vectorize.py tfdata DIR [--rounds N]

Both read the lines of the same file, batch 1,024 lines, standardize (lowercase, strip
punctuation), split on white space, look tokens up in the same 20,000-word vocabulary file
and pad or cut to 128 tokens, then touch every batch. Both vectorize batches in parallel
(Sluice `num_parallel="auto"`, tf.data `num_parallel_calls=AUTOTUNE`). One JSON line per round: MB/s of
text, lines/s and peak RSS.
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

BATCH = 1024
LENGTH = 128
VOCAB = 20_000


def gen(d: Path, mb: int) -> None:
    import numpy as np

    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = sorted({"".join(rng.choice(letters, rng.integers(2, 10))) for _ in range(40_000)})
    words = [w for w in words][: VOCAB * 2]
    (d / "vocab.txt").write_text("\n".join(words[:VOCAB]) + "\n")
    # Zipf-like word frequencies, some capitals and punctuation, a quarter of the words
    # outside the vocabulary.
    p = 1.0 / np.arange(1, len(words) + 1)
    p /= p.sum()
    target = mb << 20
    written = 0
    with open(d / "corpus.txt", "w") as f:
        while written < target:
            idx = rng.choice(len(words), size=(4096, 40), p=p)
            for row in idx:
                n = int(rng.integers(5, 40))
                line = " ".join(words[i] for i in row[:n])
                line = line.capitalize() + rng.choice([".", "!", "?", ","]) + "\n"
                f.write(line)
                written += len(line)
    print(d / "corpus.txt", os.path.getsize(d / "corpus.txt"), "bytes")


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def report(engine: str, r: int, lines: int, size: int, dt: float) -> None:
    print(json.dumps({"engine": engine, "round": r, "lines": lines, "lines_per_s": lines / dt,
                      "mb_per_s": size / dt / 1e6, "seconds": dt, "peak_rss_mb": rss_mb()}),
          flush=True)


def run_sluice(d: Path, rounds: int, num_parallel: str = "auto") -> None:
    import sluice

    size = os.path.getsize(d / "corpus.txt")
    for r in range(rounds):
        p = (sluice.text_lines(d / "corpus.txt").batch(BATCH)
             .text_vectorization("line", vocabulary=d / "vocab.txt",
                                 output_sequence_length=LENGTH,
                                 num_parallel=int(num_parallel) if num_parallel.isdigit()
                                 else num_parallel))
        start = time.perf_counter()
        lines = 0
        for batch in p:
            lines += batch["line"].shape[0]
        report("sluice", r, lines, size, time.perf_counter() - start)


def run_tfdata(d: Path, rounds: int) -> None:
    import tensorflow as tf
    import keras

    size = os.path.getsize(d / "corpus.txt")
    layer = keras.layers.TextVectorization(vocabulary=str(d / "vocab.txt"),
                                           output_sequence_length=LENGTH)
    ds = tf.data.TextLineDataset(str(d / "corpus.txt")).batch(BATCH)
    ds = ds.map(layer, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
    for r in range(rounds):
        start = time.perf_counter()
        lines = 0
        for batch in ds:
            lines += int(batch.shape[0])
        report("tf.data", r, lines, size, time.perf_counter() - start)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["gen", "sluice", "tfdata"])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--num-parallel", default="auto",
                    help="sluice: threads vectorizing (a number, auto or sequential)")
    a = ap.parse_args()
    if a.what == "gen":
        gen(a.dir, a.mb)
    elif a.what == "sluice":
        run_sluice(a.dir, a.rounds, a.num_parallel)
    else:
        run_tfdata(a.dir, a.rounds)


if __name__ == "__main__":
    main()
