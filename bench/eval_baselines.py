"""The `eval` workload outside Sluice: decode JPEG (3 channels), centre crop 224x224, to [0, 1]
f32, normalize with the ImageNet mean and std, batch 64, in order (no shuffle, nothing random).
What examples/pipelines/eval.toml (and the `eval` pipeline of core/benches/pipelines.rs) does.

Kept apart from tfdata_baseline.py and peers/, which stay byte-identical to the shared bench
scripts they were copied from (see bench/README.md, "Origin").

Usage (each prints one JSON line: images, seconds of iteration, images_per_s):
  TF_PY    eval_baselines.py tfdata DATA_DIR        tf.data: interleave 4 -> map(parse, decode,
                                                    crop, normalize; AUTOTUNE) -> batch 64 -> prefetch
  PEER_PY  eval_baselines.py torch IMG_DIR [--workers 2]   DataLoader + torchvision v2
  PEER_PY  eval_baselines.py dali DATA_DIR [--threads 2]   DALI's CPU pipeline on the TFRecords
  PEER_PY  eval_baselines.py grain IMG_DIR [--workers 2]   Grain, PIL decode, numpy ops

DATA_DIR holds the TFRecord shards (`tfdata_baseline.py gen`), IMG_DIR the same JPEGs as files
(`peers/extract_jpegs.py`). Iteration is timed from its start (the loader or pipeline built,
workers not yet started) to the last batch; every batch is touched (a sum over channel 0).
"""
import argparse
import glob
import json
import os
import struct
import tempfile
import time

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]
SIZE = 224
BATCH = 64


def emit(system, n, dt, **extra):
    print(json.dumps({"system": system, "pipeline": "eval", "images": n, "seconds": round(dt, 4),
                      "images_per_s": round(n / dt, 1), **extra}))


def run_tfdata(d, _args):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    spec = {"image": tf.io.FixedLenFeature([], tf.string),
            "label": tf.io.FixedLenFeature([], tf.int64)}
    mean = tf.constant(MEAN, tf.float32)
    std = tf.constant(STD, tf.float32)

    def one(rec):
        ex = tf.io.parse_single_example(rec, spec)
        img = tf.io.decode_jpeg(ex["image"], channels=3)
        # The central window: offsets (h - 224) // 2 and (w - 224) // 2, as Sluice's
        # center_crop takes it.
        img = tf.image.resize_with_crop_or_pad(img, SIZE, SIZE)
        img = tf.cast(img, tf.float32) / 255.0
        return (img - mean) / std, ex["label"]

    files = tf.data.Dataset.list_files(os.path.join(d, "train.tfrecord-*"), shuffle=False)
    ds = (files.interleave(tf.data.TFRecordDataset, cycle_length=4, num_parallel_calls=tf.data.AUTOTUNE)
          .map(one, num_parallel_calls=tf.data.AUTOTUNE).batch(BATCH).prefetch(tf.data.AUTOTUNE))
    n, s = 0, 0.0
    t = time.perf_counter()
    for img, _ in ds:
        s += float(tf.reduce_sum(img[..., 0]))
        n += int(img.shape[0])
    emit(f"tf.data {tf.__version__}", n, time.perf_counter() - t)


def image_files(d):
    files = sorted(glob.glob(os.path.join(d, "*", "*.jpg")))
    if not files:
        raise SystemExit(f"no JPEG files in {d}/*/ (run bench/peers/extract_jpegs.py)")
    return files


def run_torch(d, a):
    import torch
    import torchvision
    from torchvision.io import decode_jpeg, read_file
    from torchvision.transforms import v2

    torch.set_num_threads(1)
    files = image_files(d)
    tf = v2.Compose([v2.CenterCrop(SIZE), v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)])

    class DS(torch.utils.data.Dataset):
        def __len__(self):
            return len(files)

        def __getitem__(self, i):
            return tf(decode_jpeg(read_file(files[i]))), int(os.path.basename(os.path.dirname(files[i])))

    dl = torch.utils.data.DataLoader(DS(), batch_size=BATCH, num_workers=a.workers, shuffle=False,
                                     prefetch_factor=2 if a.workers else None)
    n, s = 0, 0.0
    t = time.perf_counter()
    for x, _ in dl:
        s += float(x[:, 0].sum())
        n += x.shape[0]
    emit(f"torch {torch.__version__} torchvision {torchvision.__version__} workers={a.workers}", n,
         time.perf_counter() - t)


def dali_index(files):
    """The index files DALI's TFRecord reader needs (offset and size of every record)."""
    idx_dir = tempfile.mkdtemp()
    out = []
    for f in files:
        path = os.path.join(idx_dir, os.path.basename(f) + ".idx")
        with open(f, "rb") as r, open(path, "w") as w:
            off = 0
            while True:
                h = r.read(12)
                if len(h) < 12:
                    break
                (n,) = struct.unpack("<Q", h[:8])
                r.seek(n + 4, 1)
                w.write(f"{off} {12 + n + 4}\n")
                off += 12 + n + 4
        out.append(path)
    return out


def run_dali(d, a):
    import nvidia.dali
    import nvidia.dali.tfrecord as tfrec
    from nvidia.dali import fn, pipeline_def, types

    files = sorted(glob.glob(os.path.join(d, "train.tfrecord-*")))
    t_idx = time.perf_counter()
    idx = dali_index(files)
    t_idx = time.perf_counter() - t_idx

    @pipeline_def(batch_size=BATCH, num_threads=a.threads, device_id=None, seed=1)
    def pipe():
        inp = fn.readers.tfrecord(path=files, index_path=idx, random_shuffle=False, name="Reader",
                                  features={"image": tfrec.FixedLenFeature((), tfrec.string, ""),
                                            "label": tfrec.FixedLenFeature([1], tfrec.int64, -1)})
        img = fn.decoders.image(inp["image"], device="cpu", output_type=types.RGB)
        img = fn.crop_mirror_normalize(img, dtype=types.FLOAT, output_layout="HWC", crop=(SIZE, SIZE),
                                       crop_pos_x=0.5, crop_pos_y=0.5,
                                       mean=[m * 255 for m in MEAN], std=[s * 255 for s in STD])
        return img, inp["label"]

    p = pipe()
    p.build()
    size = p.epoch_size("Reader")
    n, s = 0, 0.0
    t = time.perf_counter()
    while n < size:
        imgs, _ = p.run()
        arr = imgs.as_array()
        s += float(arr[..., 0].sum())
        n += arr.shape[0]
    emit(f"DALI {nvidia.dali.__version__} CPU threads={a.threads}", n, time.perf_counter() - t,
         index_seconds=round(t_idx, 3))


class _Files:
    """A random-access source that pickles with its list (Grain's workers are spawned)."""

    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        return self.paths[i]


def _grain_eval(path):
    import numpy as np
    from PIL import Image

    img = np.asarray(Image.open(path).convert("RGB"))
    h, w, _ = img.shape
    y, x = (h - SIZE) // 2, (w - SIZE) // 2
    f = img[y:y + SIZE, x:x + SIZE].astype(np.float32) / 255.0
    f = (f - np.asarray(MEAN, np.float32)) / np.asarray(STD, np.float32)
    return {"image": f, "label": int(os.path.basename(os.path.dirname(path)))}


def run_grain(d, a):
    import grain

    ds = grain.MapDataset.source(_Files(image_files(d))).map(_grain_eval).batch(BATCH).to_iter_dataset()
    if a.workers:
        ds = ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=a.workers))
    n, s = 0, 0.0
    t = time.perf_counter()
    for b in ds:
        s += float(b["image"][..., 0].sum())
        n += b["image"].shape[0]
    emit(f"grain {grain.__version__} workers={a.workers}", n, time.perf_counter() - t)


RUNNERS = {"tfdata": run_tfdata, "torch": run_torch, "dali": run_dali, "grain": run_grain}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("system", choices=sorted(RUNNERS))
    ap.add_argument("dir")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    RUNNERS[a.system](a.dir, a)


if __name__ == "__main__":
    main()
