#!/usr/bin/env python3
"""Sluice on Ray (issue 22): `sluice.ray.read` of the augment workload next to the
single-process Python package and Ray Data's own `read_images` + torchvision, in one run.

Usage (from the repository root):

    PY bench/ray_read.py DATA_DIR IMG_DIR [--rounds 3] [--epochs 2] [--only NAME ...]
        [--out FILE.json] [--quiet 20] [--disturbed 0.10] [--retries 2]
    PY bench/ray_read.py --diagnose DATA_DIR      # where Ray's time goes (see below)
    PY bench/ray_read.py --report RUN.json ...    # the summary again, over one or more runs

PY is the python of a venv with `sluice` (python/), `ray[data]`, torch, torchvision and psutil.
DATA_DIR holds the 16 x 256 JPEG shards (`tfdata_baseline.py gen DATA_DIR`), IMG_DIR the same
JPEGs as an ImageFolder (`peers/extract_jpegs.py DATA_DIR IMG_DIR`).

The contenders, all on the augment workload (decode JPEG, random crop 224, flip, brightness,
contrast, normalize, batch 64), one process each, one at a time, the order rotated every
round; each runs E epochs and reports every epoch (the first includes starting Ray's
worker processes, later ones find them running):

  python       `sluice.Pipeline.from_toml(augment.toml, data=DATA_DIR)`, `for batch in
               pipeline.iter()`, touching every batch: `float(batch["image"][..., 0].sum())`
  ray          `ray.init(num_cpus=2)`, `sluice.ray.read(augment.toml, data=DATA_DIR)` with its
               defaults (as many read tasks as run at once: 2 on 2 CPUs, 8 files each, each
               reserving 1 CPU, so Sluice's cpu_budget is 1), `ds.iter_batches(batch_size=None,
               batch_format="numpy")` (the blocks as Ray shaped them), the same touch
  ray-2tasks   the same with `num_tasks=2` given
  ray-cpus2    `num_tasks=2, num_cpus=2`: each task reserves both CPUs (Sluice's cpu_budget 2)
  ray-b32      ray-cpus2 with the dataset's `target_max_block_size` at 32 MiB
  ray-prealloc ray-cpus2 with `preallocate_plasma_memory`
  ray-tuned    ray-cpus2, and the dataset's `target_max_block_size` at 32 MiB (so Ray does
               not merge the 38.5 MB batches into 154 MB blocks) and the object store's
               memory populated at start (`preallocate_plasma_memory`)
  ray-torch    ray-cpus2 through `ds.iter_torch_batches(batch_size=None)` (needs pydantic, as
               ray.train does), the touch on the tensor
  ray-u8       ray-cpus2 on augment.toml cut after the flip (uint8 batches, 9.6 MB; the float
               ops left to the consumer, e.g. the GPU)
  python-u8    python on the same cut pipeline
  ray-images   `ray.init(num_cpus=2)`, `ray.data.read_images(IMG_DIR, mode="RGB")` +
               `map_batches` of bench/peers/bench_torch.py's torchvision v2 transforms
               (per image, `torch.set_num_threads(1)`), `iter_batches(batch_size=64)`

Figures are images over the seconds from the start of iteration (Ray already initialized, the
dataset or pipeline already made) to the end of each epoch. `ray.init` and imports are left
out and reported apart (`startup_s`). The measuring (quiet machine before each run, the CPU
other processes used, peak RSS of the process tree, which for Ray includes its raylet, GCS,
and worker processes) is bench/python_augment.py's, except that the run's CPU and memory
are summed over its whole process tree (Ray's daemons and workers included; memory as PSS,
which counts the object store's shared pages once).

`--diagnose` measures, on one batch of the workload (64 x 224 x 224 x 3 float32, 38.5 MB),
what each step of Ray's path costs: NumPy -> Arrow block (Ray's `batch_to_block`), `ray.put`
of the block (serialization into the object store), `ray.get` (zero-copy read), Arrow ->
NumPy; and a read task's start-up (an empty Sluice shard read by a task).
"""
import argparse
import datetime
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import python_augment as pa  # noqa: E402  (machine(), warm())
from run_measure import busy_seconds, last_json, wait_quiet  # noqa: E402

REPO = os.path.dirname(HERE)
TOML = os.path.join(REPO, "examples", "pipelines", "augment.toml")


def _u8_toml():
    """augment.toml up to the flip: batches of uint8 images (the float conversion, brightness,
    contrast and normalization left to the consumer, e.g. on the GPU): 4x fewer bytes per
    batch through the object store."""
    with open(TOML) as f:
        text = f.read()
    start = text.index('  { op = "to_unit_f32" },')
    end = text.index("\n]\n", start)
    return text[:start] + text[end + 1:]
# The sluice.ray.read contenders: read options, Ray's block target for the dataset, and
# whether the object store's memory is populated at start (Ray's preallocate_plasma_memory).
RAY_SETTINGS = {
    "ray": {},
    "ray-2tasks": {"num_tasks": 2},
    "ray-cpus2": {"num_tasks": 2, "num_cpus": 2},
    "ray-b32": {"num_tasks": 2, "num_cpus": 2, "block_mib": 32},
    "ray-prealloc": {"num_tasks": 2, "num_cpus": 2, "preallocate": True},
    "ray-tuned": {"num_tasks": 2, "num_cpus": 2, "block_mib": 32, "preallocate": True},
    "ray-torch": {"num_tasks": 2, "num_cpus": 2, "torch": True},
    "ray-u8": {"num_tasks": 2, "num_cpus": 2, "u8": True},
}
ALL = ["python", *RAY_SETTINGS, "ray-images", "python-u8"]


def _touch(image):
    return float(image[..., 0].sum())


def _ray_init(preallocate=False):
    import ray

    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False, log_to_driver=False,
             object_store_memory=1 << 30,
             _system_config={"preallocate_plasma_memory": True} if preallocate else None)


def run(mode, data, images, epochs):
    t0 = time.perf_counter()
    per_epoch = []
    s = 0.0
    extra = {}
    if mode in ("python", "python-u8"):
        import sluice

        pipeline = sluice.Pipeline.from_toml(_u8_toml() if mode == "python-u8" else TOML,
                                             data=data).build()
        startup = time.perf_counter() - t0

        def epoch(e):
            n, first, s = 0, None, 0.0
            t = time.perf_counter()
            for batch in pipeline.iter():
                first = first or time.perf_counter() - t
                s += _touch(batch["image"])
                n += batch["image"].shape[0]
            return n, first, s
        system = f"sluice {sluice.__version__} (Python package, one process)"
    elif mode in RAY_SETTINGS:
        import ray
        import sluice.ray

        cfg = RAY_SETTINGS[mode]
        _ray_init(preallocate=cfg.get("preallocate", False))
        options = {"num_cpus": cfg["num_cpus"]} if "num_cpus" in cfg else {}
        ds = sluice.ray.read(_u8_toml() if cfg.get("u8") else TOML, data=data,
                             num_tasks=cfg.get("num_tasks"), **options)
        if "block_mib" in cfg:
            ds.context.target_max_block_size = cfg["block_mib"] << 20
        startup = time.perf_counter() - t0
        torch_iter = cfg.get("torch", False)
        if torch_iter:
            import torch

            torch.set_num_threads(1)

        def epoch(e):
            n, first, s = 0, None, 0.0
            t = time.perf_counter()
            batches = (ds.iter_torch_batches(batch_size=None) if torch_iter
                       else ds.iter_batches(batch_size=None, batch_format="numpy"))
            for batch in batches:
                first = first or time.perf_counter() - t
                s += _touch(batch["image"])
                n += batch["image"].shape[0]
            return n, first, s
        system = f"sluice.ray.read on ray {ray.__version__} ({cfg})"
    elif mode == "ray-images":
        import ray
        import torch
        import torchvision

        _ray_init()
        ds = ray.data.read_images(images, mode="RGB", include_paths=True)

        def augment(batch):
            import numpy as np
            import torch
            from torchvision.transforms import v2

            torch.set_num_threads(1)
            tf = v2.Compose([v2.RandomCrop(224), v2.RandomHorizontalFlip(),
                             v2.ToDtype(torch.float32, scale=True),
                             v2.ColorJitter(brightness=0.1, contrast=(0.75, 1.5)),
                             v2.Normalize([0.5] * 3, [0.25] * 3)])
            out = [tf(torch.from_numpy(np.ascontiguousarray(img)).permute(2, 0, 1)).permute(1, 2, 0)
                   for img in batch["image"]]
            labels = [int(os.path.basename(os.path.dirname(p))) for p in batch["path"]]
            return {"image": torch.stack(out).numpy(), "label": np.asarray(labels, dtype=np.int64)}

        ds = ds.map_batches(augment, batch_size=64, batch_format="numpy")
        startup = time.perf_counter() - t0

        def epoch(e):
            n, first, s = 0, None, 0.0
            t = time.perf_counter()
            for batch in ds.iter_batches(batch_size=64, batch_format="numpy"):
                first = first or time.perf_counter() - t
                s += _touch(batch["image"])
                n += batch["image"].shape[0]
            return n, first, s
        system = (f"ray.data.read_images + map_batches(torchvision v2) on ray {ray.__version__}, "
                  f"torch {torch.__version__}, torchvision {torchvision.__version__}")
    else:
        raise SystemExit(f"unknown contender {mode}")
    start = time.perf_counter()
    for e in range(epochs):
        t = time.perf_counter()
        n, first, s_e = epoch(e)
        s += s_e
        seconds = time.perf_counter() - t
        per_epoch.append({"images": n, "seconds": round(seconds, 4),
                          "images_per_s": round(n / seconds, 1),
                          "first_batch_s": round(first or 0.0, 4)})
    seconds = time.perf_counter() - start
    if mode.startswith("ray"):
        extra["ray_data_stats"] = ds.stats()
    images_total = sum(e["images"] for e in per_epoch)
    print(json.dumps({"system": system, "images": images_total, "seconds": round(seconds, 4),
                      "images_per_s": round(images_total / seconds, 1), "epochs": per_epoch,
                      "startup_s": round(startup, 3), "checksum": s, **extra}))


def diagnose(data):
    """What each step of a batch's way through Ray costs, on this machine."""
    import numpy as np
    import ray
    import sluice
    import sluice.ray
    from ray.data.block import BlockAccessor

    _ray_init()
    out = {}
    batch = next(iter(sluice.Pipeline.from_toml(TOML, data=data)))
    mb = batch["image"].nbytes / 2**20

    def best(f, n=10):
        times = []
        for _ in range(n):
            t = time.perf_counter()
            f()
            times.append(time.perf_counter() - t)
        return round(min(times) * 1e3, 2), round(statistics.median(times) * 1e3, 2)

    out["batch_mb"] = round(mb, 1)
    out["numpy_to_block_ms"] = best(lambda: BlockAccessor.batch_to_block(dict(batch)))
    block = BlockAccessor.batch_to_block(dict(batch))
    column = block.column("image").chunk(0)
    out["block_shares_sluice_memory"] = (
        column.storage.buffers()[-1].address == batch["image"].__array_interface__["data"][0]
        if hasattr(column, "storage") else None)
    out["put_ms"] = best(lambda: ray.put(block))
    ref = ray.put(block)
    out["get_ms"] = best(lambda: ray.get(ref))
    got = ray.get(ref)
    out["block_to_numpy_ms"] = best(lambda: BlockAccessor.for_block(got).to_numpy())
    array = BlockAccessor.for_block(got).to_numpy()["image"]
    out["numpy_from_store_is_view"] = not array.flags.owndata
    out["memcpy_ms"] = best(lambda: np.copy(batch["image"]))
    # Ray's transport alone: read tasks that yield this batch again and again (no Sluice
    # work), 64 batches an epoch over 2 tasks, consumed as in the contenders (second epoch).
    from ray.data.block import BlockMetadata
    from ray.data.datasource import Datasource, ReadTask

    class Replay(Datasource):
        def __init__(self, batch):
            super().__init__()
            self.batch = batch

        def estimate_inmemory_data_size(self):
            return None

        def get_read_tasks(self, parallelism, per_task_row_limit=None, data_context=None):
            def read(batch=self.batch):
                for _ in range(32):
                    yield BlockAccessor.batch_to_block(dict(batch))
            meta = BlockMetadata(num_rows=None, size_bytes=None, input_files=None, exec_stats=None)
            return [ReadTask(read, meta) for _ in range(2)]

    u8 = {"image": np.ascontiguousarray((batch["image"] * 0).astype(np.uint8)), "label": batch["label"]}
    for label, b, cpus in (("f32", batch, 1), ("f32_cpus2", batch, 2), ("u8", u8, 1)):
        ds = ray.data.read_datasource(Replay(dict(b)), override_num_blocks=2, num_cpus=cpus)
        rates = []
        for _ in range(2):
            t = time.perf_counter()
            n = 0
            for got in ds.iter_batches(batch_size=None, batch_format="numpy"):
                _touch(got["image"])
                n += got["image"].shape[0]
            rates.append(round(n / (time.perf_counter() - t)))
        out[f"transport_only_{label}_images_per_s"] = rates
    # A read task's start-up: a Sluice pipeline reading nothing (take 0), through Ray.
    empty = sluice.Pipeline.from_toml(TOML, data=data).take(0)
    ds = sluice.ray.read(empty, num_tasks=2)
    ds.materialize()  # workers started
    out["empty_read_2tasks_ms"] = best(lambda: sluice.ray.read(empty, num_tasks=2).materialize(), n=5)
    out["empty_read_16tasks_ms"] = best(lambda: sluice.ray.read(empty, num_tasks=16).materialize(), n=5)
    print(json.dumps(out))


def _pss(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def measure(cmd):
    """Runs cmd; returns (exit code, stdout, stderr, peak RSS and peak PSS of the process tree
    in bytes, wall s, CPU seconds of the tree, CPU seconds the rest of the machine used).

    Unlike run_measure.measure, the run's CPU is summed over every process of its tree as
    last seen (sampled every 0.1 s): Ray's raylet, GCS and worker processes (where Sluice's
    read tasks run) are descendants the driver never waits for, so wait4 would leave them out
    and count them as other processes' CPU. PSS counts the object store's shared memory once
    (RSS counts it in every process that maps it)."""
    import psutil
    import threading

    out = tempfile.TemporaryFile(mode="w+")
    err = tempfile.TemporaryFile(mode="w+")
    me = psutil.Process()
    mine0 = sum(me.cpu_times()[:2])
    busy0 = busy_seconds()
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=REPO)
    cpu_of, peak, done = {}, {"rss": 0, "pss": 0}, threading.Event()

    def poll():
        try:
            root = psutil.Process(proc.pid)
        except psutil.Error:
            return
        last_pss = 0.0
        while not done.is_set():
            try:
                tree = [root] + root.children(recursive=True)
            except psutil.Error:
                tree = [root]
            rss = 0
            for c in tree:
                try:
                    ct = c.cpu_times()
                    cpu_of[c.pid] = ct.user + ct.system
                    rss += c.memory_info().rss
                except psutil.Error:
                    pass
            peak["rss"] = max(peak["rss"], rss)
            now = time.monotonic()
            if now - last_pss >= 0.5:
                peak["pss"] = max(peak["pss"], sum(_pss(c.pid) for c in tree))
                last_pss = now
            done.wait(0.1)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    busy = busy_seconds() - busy0
    done.set()
    poller.join()
    own = usage.ru_utime + usage.ru_stime
    cpu = max(own, sum(cpu_of.values()))
    other = max(0.0, busy - cpu - (sum(me.cpu_times()[:2]) - mine0))
    out.seek(0)
    err.seek(0)
    return (os.waitstatus_to_exitcode(status), out.read(), err.read(), peak["rss"], peak["pss"],
            wall, cpu, other)


def command(name, a):
    return [sys.executable, os.path.abspath(__file__), "_run", name, a.data, a.images, str(a.epochs)]


def one_run(name, a):
    cmd = command(name, a)
    waited, quiet = wait_quiet(a.quiet, a.max_wait) if a.quiet > 0 else (0.0, None)
    code, out, err, peak, pss, wall, cpu, other = measure(cmd)
    run = {"contender": name, "exit": code, "process_seconds": round(wall, 3),
           "peak_rss_mb": round(peak / 2**20, 1), "peak_pss_mb": round(pss / 2**20, 1),
           "cpu_seconds": round(cpu, 2),
           "other_cpu_seconds": round(other, 2), "waited_for_quiet_s": waited,
           "cpu_percent_before": quiet}
    if code != 0:
        run["stderr_tail"] = err[-3000:]
        return run
    raw = last_json(out)
    run.update(raw)
    return run


def summarize(runs, names):
    lines = [f"{'contender':12} {'runs':>4} {'all epochs: best':>17} {'median':>7}"
             f" {'1st epoch: median':>18} {'later epochs: median':>21} {'1st batch s (ep 1, ep 2)':>25}"
             f" {'startup s':>9} {'peak PSS MB':>11} {'CPU s':>6}"]
    rows = {}
    for name in names:
        ok = [r for r in runs if r["contender"] == name and r["exit"] == 0 and not r.get("disturbed")]
        if not ok:
            continue
        all_ = [r["images_per_s"] for r in ok]
        first = [r["epochs"][0]["images_per_s"] for r in ok]
        later = [e["images_per_s"] for r in ok for e in r["epochs"][1:]]
        fb1 = statistics.median(r["epochs"][0]["first_batch_s"] for r in ok)
        fb2 = statistics.median(e["first_batch_s"] for r in ok for e in r["epochs"][1:]) if later else 0
        row = {"n": len(ok), "best": max(all_), "median": statistics.median(all_),
               "first_median": statistics.median(first),
               "later_median": statistics.median(later) if later else None,
               "first_batch_s": [round(fb1, 3), round(fb2, 3)],
               "startup_s": statistics.median(r["startup_s"] for r in ok),
               "rss": statistics.median(r["peak_rss_mb"] for r in ok),
               "pss": statistics.median(r["peak_pss_mb"] for r in ok),
               "cpu_s": statistics.median(r["cpu_seconds"] for r in ok)}
        rows[name] = row
        lines.append(f"{name:12} {row['n']:4} {row['best']:17.0f} {row['median']:7.0f}"
                     f" {row['first_median']:18.0f} {(row['later_median'] or 0):21.0f}"
                     f" {str(row['first_batch_s']):>25} {row['startup_s']:9.2f} {row['pss']:11.0f}"
                     f" {row['cpu_s']:6.1f}")
    lines.append("")
    lines.append("ratios to python, per round (same round), median [min-max]:")
    for name in names:
        base_name = "python-u8" if name == "ray-u8" else "python"
        if name.startswith("python") or name not in rows or base_name not in rows:
            continue
        for key, label in (("images_per_s", "all epochs"),):
            ratios = []
            for rnd in sorted({r["round"] for r in runs}, key=str):
                mine = [r for r in runs if r["round"] == rnd and r["contender"] == name and r["exit"] == 0 and not r.get("disturbed")]
                base = [r for r in runs if r["round"] == rnd and r["contender"] == base_name and r["exit"] == 0 and not r.get("disturbed")]
                if mine and base:
                    ratios.append(mine[-1][key] / base[-1][key])
            later = []
            for rnd in sorted({r["round"] for r in runs}, key=str):
                mine = [r for r in runs if r["round"] == rnd and r["contender"] == name and r["exit"] == 0 and not r.get("disturbed")]
                base = [r for r in runs if r["round"] == rnd and r["contender"] == base_name and r["exit"] == 0 and not r.get("disturbed")]
                if mine and base and len(mine[-1]["epochs"]) > 1:
                    m = statistics.mean(e["images_per_s"] for e in mine[-1]["epochs"][1:])
                    b = statistics.mean(e["images_per_s"] for e in base[-1]["epochs"][1:])
                    later.append(m / b)
            if ratios:
                text = (f"  {name + ' / ' + base_name:24} {label}: {statistics.median(ratios):.3f}"
                        f" [{min(ratios):.3f}-{max(ratios):.3f}]")
                if later:
                    text += (f"; later epochs: {statistics.median(later):.3f}"
                             f" [{min(later):.3f}-{max(later):.3f}]")
                lines.append(text)
    return "\n".join(lines), rows


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "_run":
        mode, data, images, epochs = sys.argv[2:6]
        run(mode, data, images, int(epochs))
        return
    if len(sys.argv) >= 3 and sys.argv[1] == "--report":
        # The summary of the undisturbed runs of one or more runs' JSON files (rounds are
        # paired within each file).
        runs, names = [], []
        for i, path in enumerate(sys.argv[2:]):
            with open(path) as f:
                doc = json.load(f)
            for r in doc["runs"]:
                r["round"] = f"{i}:{r['round']}"
                runs.append(r)
                if r["contender"] not in names:
                    names.append(r["contender"])
        names = [n for n in ALL if n in names]
        print(summarize(runs, names)[0])
        return
    if len(sys.argv) == 3 and sys.argv[1] == "--diagnose":
        diagnose(os.path.abspath(sys.argv[2]))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data")
    ap.add_argument("images")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--only", nargs="+", choices=ALL)
    ap.add_argument("--out")
    ap.add_argument("--quiet", type=float, default=20.0)
    ap.add_argument("--disturbed", type=float, default=0.10)
    ap.add_argument("--retries", type=int, default=2)
    ap.add_argument("--max-wait", type=float, default=300.0)
    a = ap.parse_args()
    a.data, a.images = os.path.abspath(a.data), os.path.abspath(a.images)
    names = a.only or ALL
    out = a.out or os.path.join(tempfile.gettempdir(), f"ray_read-{datetime.datetime.now():%Y%m%d-%H%M%S}.json")
    shards = sorted(glob.glob(os.path.join(a.data, "train.tfrecord-*")))
    jpegs = sorted(glob.glob(os.path.join(a.images, "*", "*.jpg")))
    if not shards:
        sys.exit(f"no train.tfrecord-* in {a.data}")
    pa.warm(shards + jpegs)
    doc = {"started": datetime.datetime.now().isoformat(timespec="seconds"), "machine": pa.machine(),
           "args": vars(a), "runs": []}
    versions = subprocess.run([sys.executable, "-c", "import ray, sluice, numpy, pyarrow; print(ray.__version__, "
                               "sluice.__version__, numpy.__version__, pyarrow.__version__)"],
                              capture_output=True, text=True).stdout.split()
    doc["versions"] = dict(zip(["ray", "sluice", "numpy", "pyarrow"], versions))
    for rnd in range(a.rounds):
        order = names[rnd % len(names):] + names[:rnd % len(names)]
        for name in order:
            for attempt in range(1 + a.retries):
                r = one_run(name, a)
                r["round"] = rnd + 1
                share = r["other_cpu_seconds"] / max(r["process_seconds"] * (os.cpu_count() or 1), 1e-9)
                r["other_cpu_share"] = round(share, 3)
                r["disturbed"] = share > a.disturbed
                doc["runs"].append(r)
                if not r["disturbed"] or attempt == a.retries:
                    break
            shown = (f"{r['images_per_s']:8.1f} images/s, epochs "
                     + ", ".join(f"{e['images_per_s']:.0f}" for e in r["epochs"])
                     if r["exit"] == 0 else f"FAILED: {r['stderr_tail'][-600:]}")
            print(f"round {rnd + 1}/{a.rounds} {name:11} {shown}, peak PSS {r['peak_pss_mb']:.0f} MB,"
                  f" CPU {r['cpu_seconds']:.1f} s,"
                  f" other CPU {r['other_cpu_seconds']:.1f} s{' DISTURBED' if r['disturbed'] else ''}",
                  flush=True)
            with open(out, "w") as f:
                json.dump(doc, f, indent=1)
    text, rows = summarize(doc["runs"], names)
    doc["summary"] = rows
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
    print()
    print(text)
    print(f"\nevery run: {out}")


if __name__ == "__main__":
    main()
