"""A TFDS image dataset read and decoded: sluice.tfds.load against tfds.load (issue 24).

    python bench/tfds_read.py gen DIR [--images N] [--content photo|noise]
                                                   # DIR/bench_images/1.0.0: N 128x128 JPEGs, 8 shards
    python bench/tfds_read.py sluice DIR [--rounds N]
    python bench/tfds_read.py tfds DIR [--rounds N]

Each run reads the `train` split once per round, every image decoded to uint8 [H, W, 3]
with its int64 label, into batches of 64 (`as_supervised=True`), touches every batch and
prints one JSON line per round: images/s and peak RSS. `tfds` is
`tfds.load(..., batch_size=64).prefetch(AUTOTUNE)` (TFDS's own reading: 16 shards
interleaved, decoding with AUTOTUNE); `sluice` is `sluice.tfds.load(...,
batch_size=64).prefetch()`. `gen` needs tensorflow-datasets; `sluice` needs only sluice.

TFDS caches a small dataset in memory after its first pass (`ReadConfig(try_autocache=True)`,
datasets under 250 MiB), decoded: later rounds then measure the cache, not reading and
decoding. `tfds` therefore runs with `try_autocache=False` unless `--autocache` is given.
"""

from __future__ import annotations

import argparse
import json
import sys
import resource
import time
from pathlib import Path
import os

# numpy's OpenBLAS threads spin beside the readers on a 2-CPU machine and take a core
# from whichever engine runs (neither uses BLAS here): one thread, for both engines.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


BATCH = 64


def gen(d: Path, n: int, content: str = "photo") -> None:
    import numpy as np
    import tensorflow_datasets as tfds

    class BenchImages(tfds.core.GeneratorBasedBuilder):
        VERSION = tfds.core.Version("1.0.0")

        def _info(self):
            return tfds.core.DatasetInfo(
                builder=self,
                features=tfds.features.FeaturesDict({
                    "image": tfds.features.Image(shape=(128, 128, 3), encoding_format="jpeg"),
                    "label": tfds.features.ClassLabel(num_classes=10),
                }),
                supervised_keys=("image", "label"),
            )

        def _split_generators(self, dl_manager):
            return {"train": self._generate_examples()}

        def _generate_examples(self):
            # Photo-like images, made as the tf.data baseline makes its own.
            sys.path.insert(0, str(Path(__file__).parent))
            from tfdata_baseline import synthetic_image

            rng = np.random.default_rng(0)
            base = rng.integers(0, 256, size=(128, 128, 3), dtype=np.uint8)
            for i in range(n):
                # "noise": uniform noise (JPEG's worst case: ~19 KB per image, decoding
                # bound by entropy decoding); "photo": photo-like (~5 KB).
                image = (np.roll(base, i, axis=1) if content == "noise"
                         else synthetic_image(rng, 128, 128))
                yield i, {"image": image, "label": i % 10}

    BenchImages(data_dir=str(d)).download_and_prepare(
        download_config=tfds.download.DownloadConfig(num_shards=8)
    )


def report(system: str, round_: int, images: int, seconds: float) -> None:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"system": system, "round": round_, "images": images,
                      "images_per_s": round(images / seconds), "peak_rss_mib": round(rss)}))


def run(system: str, d: Path, rounds: int, autocache: bool = False) -> None:
    if system == "sluice":
        import sluice.tfds

        ds = sluice.tfds.load("bench_images", split="train", data_dir=d, as_supervised=True,
                              batch_size=BATCH).prefetch()
    else:
        import tensorflow as tf
        import tensorflow_datasets as tfds

        ds = tfds.load("bench_images", split="train", data_dir=str(d), as_supervised=True,
                       batch_size=BATCH,
                       read_config=tfds.ReadConfig(try_autocache=autocache),
                       ).prefetch(tf.data.AUTOTUNE)
        ds = tfds.as_numpy(ds)
    for r in range(rounds):
        start = time.perf_counter()
        images = 0
        for x, y in ds:
            images += len(y)
        report(system, r, images, time.perf_counter() - start)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["gen", "sluice", "tfds"])
    p.add_argument("dir", type=Path)
    p.add_argument("--images", type=int, default=4096)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--autocache", action="store_true", help="tfds: keep TFDS's in-memory cache")
    p.add_argument("--content", choices=["photo", "noise"], default="photo",
                   help="gen: photo-like images (default) or uniform noise")
    a = p.parse_args()
    if a.what == "gen":
        gen(a.dir, a.images, a.content)
    else:
        run(a.what, a.dir, a.rounds, a.autocache)


if __name__ == "__main__":
    main()
