#!/usr/bin/env python3
"""The `augment` workload from Python, side by side with `sluice run` and the other loaders.

Usage (from the repository root):

    PY bench/python_augment.py DATA_DIR IMG_DIR TF_PY [--sluice target/release/sluice]
        [--rounds 5] [--epochs 2] [--only NAME ...] [--out FILE.json]
        [--quiet 20] [--disturbed 0.10] [--retries 3] [--max-wait 600]
    PY bench/python_augment.py --report FILE.json     # the table again, from a run's JSON

PY is the python of a venv with `sluice` (the wheel of python/), torch, torchvision, grain,
nvidia-dali-cuda120, numpy and psutil; it runs this script, the Sluice-from-Python contenders
and the peers of bench/peers/. TF_PY is the python of a venv with tensorflow-cpu (for
bench/tfdata_baseline.py). DATA_DIR holds the 16 x 256 JPEG shards
(`tfdata_baseline.py gen DATA_DIR`), IMG_DIR the same JPEGs as an ImageFolder
(`bench/peers/extract_jpegs.py DATA_DIR IMG_DIR`). Build the CLI first
(`cargo build --release -p sluice-cli`).

The contenders, all on the augment workload (decode JPEG, random crop 224, flip, brightness,
contrast, normalize, batch 64), run one at a time, one process each, in an order rotated every
round:

  cli             `sluice run examples/pipelines/augment.toml --data DATA_DIR --epochs E --json`
  cli-1epoch      the same, one epoch
  python          `sluice.Pipeline.from_toml(augment.toml, data=DATA_DIR)`, E epochs, a loop
                  that touches every batch: `float(batch["image"][..., 0].sum())`
  python-notouch  the same loop without the touch (counts rows only): what the binding costs
                  apart from the consumer's own work
  python-torch    `sluice.torch.IterableDataset` + `DataLoader(ds, batch_size=None,
                  num_workers=0)`, E epochs, the same touch on the torch tensor
                  (`torch.set_num_threads(1)`, as bench_torch.py does)
  torch           bench/peers/bench_torch.py IMG_DIR --workers 2 (one epoch)
  grain           bench/peers/bench_grain.py IMG_DIR --workers 2 (one epoch)
  dali            bench/peers/bench_dali.py DATA_DIR --threads 2 (one epoch)
  tfdata          bench/tfdata_baseline.py run DATA_DIR augment (one epoch)

What the figures are (the same clock for every contender): images over the seconds from the
start of iteration (the pipeline, loader or dataset already built) to the end of the last
epoch; process start-up, imports and building are left out. The peers and tf.data run one
epoch of 4,096 images (their scripts have no epoch count); the CLI's `seconds` spans its E
epochs; the Python contenders report every epoch and the whole run. So: Python against the
CLI compares E-epoch runs (8,192 images for E = 2), and Python against the peers compares
Python's first epoch against the peers' one epoch (4,096 images each, each from a cold
start of iteration: the torch and Grain figures include starting their workers).

Peak RSS is measured here for every contender the same way: the sum of the RSS of the
process and all its descendants (DataLoader and Grain workers included), polled every 20 ms
(the list of descendants every 0.2 s), or the process's own peak from wait4() if that is
higher (exact for single processes) and above this script's own peak (on Linux a child's
starts from its parent's at fork). A sum of RSS counts pages shared between processes once
per process, as the peers' scripts do.

The VM is shared and small (2 vCPUs): before each run the script waits until the machine's
CPU use is below --quiet % (default 20) for a second, and it records, for every run, the CPU
seconds the rest of the machine used while it ran (`other_cpu_seconds`: the machine's busy
time less the run's own CPU and this script's). A run during which other processes took more
than --disturbed (default 10 %) of all CPUs is marked `disturbed`, kept in the JSON, left out
of the summary, and run again (at most --retries times; a round whose every attempt was
disturbed, or failed, is left out for that contender and named under the table).

Prints a table (best and median images/s, median peak RSS per contender, and the ratios the
Python-package issue names) and writes every run, with its raw output, to one JSON file.
"""
import argparse
import datetime
import glob
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

from run_measure import last_json, measure, wait_quiet  # measuring one run

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOML = os.path.join(REPO, "examples", "pipelines", "augment.toml")
PEERS = os.path.join(REPO, "bench", "peers")
TFDATA = os.path.join(REPO, "bench", "tfdata_baseline.py")

ALL = ["cli", "cli-1epoch", "python", "python-notouch", "python-torch", "torch", "grain", "dali", "tfdata"]


# --- the Sluice-from-Python contenders (run in a subprocess: `python_augment.py _run MODE ...`)

def run_sluice_python(mode, toml, data, epochs):
    import sluice

    touch = mode != "numpy-notouch"
    if mode == "torch":
        import torch
        import sluice.torch

        torch.set_num_threads(1)
    pipeline = sluice.Pipeline.from_toml(toml, data=data).build()
    loader = None
    if mode == "torch":
        ds = sluice.torch.IterableDataset(pipeline)
        loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)
    per_epoch = []
    s = 0.0
    start = time.perf_counter()
    for _ in range(epochs):
        t = time.perf_counter()
        n = 0
        for batch in (loader if loader is not None else pipeline.iter()):
            image = batch["image"]
            if touch:
                s += float(image[..., 0].sum())
            n += image.shape[0]
        per_epoch.append({"images": n, "seconds": round(time.perf_counter() - t, 4)})
    seconds = time.perf_counter() - start
    images = sum(e["images"] for e in per_epoch)
    for e in per_epoch:
        e["images_per_s"] = round(e["images"] / e["seconds"], 1)
    stats = pipeline.stats() or {}
    system = f"sluice {getattr(sluice, '__version__', '?')} from Python ({mode})"
    if mode == "torch":
        system += f", torch {torch.__version__}"
    print(json.dumps({"system": system, "images": images, "seconds": round(seconds, 4),
                      "images_per_s": round(images / seconds, 1), "epochs": per_epoch,
                      "checksum": s,
                      "last_epoch_bottleneck": (stats.get("bottleneck") or {}).get("name")}))


def command(name, a):
    me = os.path.abspath(__file__)
    if name == "cli":
        return [a.sluice, "run", TOML, "--data", a.data, "--epochs", str(a.epochs), "--json"]
    if name == "cli-1epoch":
        return [a.sluice, "run", TOML, "--data", a.data, "--epochs", "1", "--json"]
    if name == "python":
        return [a.py, me, "_run", "numpy", TOML, a.data, str(a.epochs)]
    if name == "python-notouch":
        return [a.py, me, "_run", "numpy-notouch", TOML, a.data, str(a.epochs)]
    if name == "python-torch":
        return [a.py, me, "_run", "torch", TOML, a.data, str(a.epochs)]
    if name == "torch":
        return [a.py, os.path.join(PEERS, "bench_torch.py"), a.images, "--workers", "2"]
    if name == "grain":
        return [a.py, os.path.join(PEERS, "bench_grain.py"), a.images, "--workers", "2"]
    if name == "dali":
        return [a.py, os.path.join(PEERS, "bench_dali.py"), a.data, "--threads", "2"]
    if name == "tfdata":
        return [a.tf_py, TFDATA, "run", a.data, "augment"]
    raise SystemExit(f"unknown contender {name}")


def one_run(name, a):
    cmd = command(name, a)
    waited, quiet = wait_quiet(a.quiet, a.max_wait) if a.quiet > 0 else (0.0, None)
    m = measure(cmd)
    run = {"contender": name, "cmd": cmd, "exit": m["exit"], "process_seconds": round(m["process_seconds"], 3),
           "peak_rss_mb": round(m["peak_rss"] / 2**20, 1), "cpu_seconds": round(m["cpu_seconds"], 2),
           "other_cpu_seconds": round(m["other_cpu_seconds"], 2), "waited_for_quiet_s": waited,
           "cpu_percent_before": quiet}
    if m["exit"] != 0:
        run["stderr_tail"] = m["stderr"][-3000:]
        return run
    raw = last_json(m["stdout"])
    if name.startswith("cli"):
        raw = {k: v for k, v in raw.items() if k not in ("stages", "autotune")}
        run.update(images=raw["elements"], seconds=raw["seconds"], images_per_s=raw["elements_per_s"])
        run["first_epoch_images_per_s"] = raw["elements_per_s"] if raw["epochs"] == 1 else None
    elif name == "tfdata":
        ep = raw["epochs"][-1]
        run.update(images=ep["records"], seconds=ep["seconds"], images_per_s=ep["records_per_s"],
                   first_epoch_images_per_s=raw["epochs"][0]["records_per_s"])
    elif name.startswith("python"):
        run.update(images=raw["images"], seconds=raw["seconds"], images_per_s=raw["images_per_s"],
                   first_epoch_images_per_s=raw["epochs"][0]["images_per_s"])
    else:
        run.update(images=raw["images"], seconds=raw["seconds"], images_per_s=raw["images_per_s"],
                   first_epoch_images_per_s=raw["images_per_s"])
    run["raw"] = raw
    return run


# --- the report -----------------------------------------------------------------------------

def ok_runs(runs, name):
    """The runs of a contender that count: exited 0 and not disturbed (one per round at most;
    a round whose every attempt was disturbed has none)."""
    return [r for r in runs if r["contender"] == name and r.get("exit") == 0 and not r.get("disturbed")]


def disturbed_rounds(runs, name):
    return sorted({r["round"] for r in runs if r["contender"] == name} -
                  {r["round"] for r in ok_runs(runs, name)})


def med(xs):
    return statistics.median(xs) if xs else None


def summarize(runs, names, epochs):
    rows = {}
    for name in names:
        rs = ok_runs(runs, name)
        if not rs:
            continue
        whole = [r["images_per_s"] for r in rs]
        first = [r["first_epoch_images_per_s"] for r in rs if r.get("first_epoch_images_per_s")]
        rss = [r["peak_rss_mb"] for r in rs]
        rows[name] = {"n": len(rs), "images": rs[0]["images"],
                      "best": max(whole), "median": med(whole), "min": min(whole),
                      "first_best": max(first) if first else None, "first_median": med(first),
                      "rss_median": med(rss), "rss_max": max(rss),
                      "other_cpu_max": max(r["other_cpu_seconds"] for r in rs)}
    return rows


def per_round_ratios(runs, num, den, num_key="images_per_s", den_key="images_per_s"):
    out = []
    for rnd in sorted({r["round"] for r in runs}):
        a = [r for r in ok_runs(runs, num) if r["round"] == rnd]
        b = [r for r in ok_runs(runs, den) if r["round"] == rnd]
        if a and b and a[0].get(num_key) and b[0].get(den_key):
            out.append(a[0][num_key] / b[0][den_key])
    return out


def ratio_line(label, rows, runs, num, den, num_key, den_key, target=None):
    if num not in rows or den not in rows:
        return None
    nk = "median" if num_key == "images_per_s" else "first_median"
    dk = "median" if den_key == "images_per_s" else "first_median"
    nb = "best" if num_key == "images_per_s" else "first_best"
    db = "best" if den_key == "images_per_s" else "first_best"
    if rows[num][nk] is None or rows[den][dk] is None:
        return None
    m = rows[num][nk] / rows[den][dk]
    b = rows[num][nb] / rows[den][db]
    pr = per_round_ratios(runs, num, den, num_key, den_key)
    rng = f"{med(pr):.3f} [{min(pr):.3f}-{max(pr):.3f}]" if pr else ""
    verdict = ""
    if target is not None:
        met = sum(x >= target for x in pr)
        verdict = (f">= {target}: {'met' if m >= target else 'NOT met'} on medians,"
                   f" in {met} of {len(pr)} rounds")
    return {"label": label, "median_ratio": round(m, 4), "best_ratio": round(b, 4),
            "per_round": [round(x, 4) for x in pr], "text":
            f"{label:40} medians {m:6.3f}  bests {b:6.3f}  per round {rng:23} {verdict}"}


def report(runs, names, epochs):
    rows = summarize(runs, names, epochs)
    lines = []
    lines.append(f"{'contender':15} {'runs':>4} {'images':>6} {'best/s':>8} {'median/s':>9} {'min/s':>8}"
                 f" {'1st ep best':>11} {'1st ep median':>13} {'peak RSS MB (median, max)':>26} {'other CPU s (max)':>17}")
    for name in names:
        if name not in rows:
            continue
        r = rows[name]
        fb = f"{r['first_best']:.0f}" if r["first_best"] else "-"
        fm = f"{r['first_median']:.0f}" if r["first_median"] else "-"
        lines.append(f"{name:15} {r['n']:4} {r['images']:6} {r['best']:8.0f} {r['median']:9.0f} {r['min']:8.0f}"
                     f" {fb:>11} {fm:>13} {r['rss_median']:>20.0f}, {r['rss_max']:>4.0f} {r['other_cpu_max']:>17.1f}")
    for name in names:
        missing = disturbed_rounds(runs, name)
        if missing:
            lines.append(f"{name}: no undisturbed, successful run in round(s) {missing}")
    W, F = "images_per_s", "first_epoch_images_per_s"
    ratios = []
    specs = [
        (f"python / cli ({epochs} epochs)", "python", "cli", W, W, 0.95),
        ("python / cli-1epoch (one epoch)", "python", "cli-1epoch", F, W, 0.95),
        (f"python-notouch / cli ({epochs} epochs)", "python-notouch", "cli", W, W, None),
        (f"python-torch / cli ({epochs} epochs)", "python-torch", "cli", W, W, 0.95),
    ]
    for peer, target in (("torch", 5), ("grain", 5), ("dali", 2.5), ("tfdata", None)):
        specs.append((f"python (1st epoch) / {peer}", "python", peer, F, F, target))
        specs.append((f"python-torch (1st epoch) / {peer}", "python-torch", peer, F, F, target))
        specs.append((f"cli-1epoch / {peer}", "cli-1epoch", peer, W, F, None))
    for spec in specs:
        line = ratio_line(spec[0], rows, runs, *spec[1:5], target=spec[5])
        if line:
            ratios.append(line)
    lines.append("")
    lines.append("speed ratios (above 1: the first named is faster); 'medians': ratio of the medians,"
                 " 'per round': median [min-max] of the ratios within each round:")
    lines.extend("  " + r["text"] for r in ratios)
    lines.append("")
    lines.append("peak RSS against the torch DataLoader run (medians; target <= 0.25 for python):")
    rss = []
    if "torch" in rows:
        for name in ("python", "python-torch", "cli", "cli-1epoch", "grain", "dali", "tfdata"):
            if name in rows:
                x = rows[name]["rss_median"] / rows["torch"]["rss_median"]
                rss.append({"label": f"{name} / torch", "median_ratio": round(x, 4)})
                verdict = ""
                if name.startswith("python"):
                    verdict = f"target <= 0.25: {'met' if x <= 0.25 else 'NOT met'}"
                lines.append(f"  {name + ' / torch':44} {x:7.3f}  {verdict}")
    return "\n".join(lines), {"contenders": rows, "speed_ratios": ratios, "rss_ratios": rss}


# --- main -----------------------------------------------------------------------------------

def machine():
    info = {"platform": platform.platform(), "cpus": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        info["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                                        capture_output=True, text=True).stdout.strip()
        # Uncommitted changes the binaries may have been built with.
        info["uncommitted"] = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                                             cwd=REPO, capture_output=True, text=True).stdout.split("\n")
        info["uncommitted"] = [line.strip() for line in info["uncommitted"] if line.strip()]
    except OSError:
        pass
    return info


def warm(paths):
    """Reads every input file once, so that every contender finds them in the page cache."""
    for p in paths:
        with open(p, "rb") as f:
            while f.read(1 << 20):
                pass


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "_run":
        mode, toml, data, epochs = sys.argv[2:6]
        run_sluice_python(mode, toml, data, int(epochs))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    if len(sys.argv) == 3 and sys.argv[1] == "--report":
        with open(sys.argv[2]) as f:
            doc = json.load(f)
        names = [n for n in ALL if any(r["contender"] == n for r in doc["runs"])]
        print(report(doc["runs"], names, doc["args"]["epochs"])[0])
        return
    ap.add_argument("data", help="the directory of train.tfrecord-* (tfdata_baseline.py gen)")
    ap.add_argument("images", help="the same JPEGs as an ImageFolder (peers/extract_jpegs.py)")
    ap.add_argument("tf_py", help="python of a venv with tensorflow-cpu")
    ap.add_argument("--py", default=sys.executable,
                    help="python with sluice, torch, torchvision, grain, DALI, psutil (default: this one)")
    ap.add_argument("--sluice", default=os.path.join(REPO, "target", "release", "sluice"),
                    help="the sluice CLI binary (default: target/release/sluice)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=2,
                    help="epochs of the cli, python, python-notouch and python-torch runs (default 2)")
    ap.add_argument("--only", nargs="+", choices=ALL, help="run only these contenders")
    ap.add_argument("--out", help="the JSON file of every run (default: a new file in the temp dir)")
    ap.add_argument("--quiet", type=float, default=20.0,
                    help="before each run, wait until the machine's CPU use is below this %% "
                         "(0: do not wait; default 20)")
    ap.add_argument("--disturbed", type=float, default=0.10,
                    help="a run during which other processes took more than this share of all "
                         "CPUs is marked disturbed, kept in the JSON, left out of the summary, "
                         "and run again (default 0.10)")
    ap.add_argument("--retries", type=int, default=3,
                    help="runs again after a disturbed run at most this many times (default 3)")
    ap.add_argument("--max-wait", type=float, default=600.0,
                    help="wait for quiet at most this many seconds per run (default 600)")
    a = ap.parse_args()
    a.data = os.path.abspath(a.data)
    a.images = os.path.abspath(a.images)
    names = a.only or ALL
    out = a.out or os.path.join(tempfile.gettempdir(),
                                f"python_augment-{datetime.datetime.now():%Y%m%d-%H%M%S}.json")
    shards = sorted(glob.glob(os.path.join(a.data, "train.tfrecord-*")))
    jpegs = sorted(glob.glob(os.path.join(a.images, "*", "*.jpg")))
    if not shards:
        sys.exit(f"no train.tfrecord-* in {a.data} (tfdata_baseline.py gen DIR)")
    if any(n in ("torch", "grain") for n in names) and not jpegs:
        sys.exit(f"no */*.jpg in {a.images} (peers/extract_jpegs.py DIR IMG_DIR)")
    warm(shards + jpegs)
    doc = {"started": datetime.datetime.now().isoformat(timespec="seconds"), "machine": machine(),
           "args": {k: v for k, v in vars(a).items()}, "runs": []}
    try:
        ver = subprocess.run([a.py, "-c", "import sluice, os; print(sluice.__file__)"],
                             capture_output=True, text=True)
        doc["sluice_module"] = ver.stdout.strip()
        doc["sluice_cli_mtime"] = datetime.datetime.fromtimestamp(os.path.getmtime(a.sluice)).isoformat()
    except OSError:
        pass
    for rnd in range(a.rounds):
        order = names[rnd % len(names):] + names[:rnd % len(names)]
        for name in order:
            for attempt in range(1 + a.retries):
                run = one_run(name, a)
                run["round"] = rnd + 1
                share = run["other_cpu_seconds"] / max(run["process_seconds"] * (os.cpu_count() or 1), 1e-9)
                run["other_cpu_share"] = round(share, 3)
                run["disturbed"] = share > a.disturbed
                doc["runs"].append(run)
                if not run["disturbed"] or attempt == a.retries:
                    break
                print(f"round {rnd + 1}/{a.rounds} {name:15} disturbed: other processes took"
                      f" {share:.0%} of the machine; run again", flush=True)
            shown = (f"{run['images_per_s']:9.1f} images/s over {run['images']} images"
                     if run["exit"] == 0 else f"FAILED (exit {run['exit']}): {run['stderr_tail'][-400:]}")
            print(f"round {rnd + 1}/{a.rounds} {name:15} {shown}, peak RSS {run['peak_rss_mb']:.0f} MB,"
                  f" process {run['process_seconds']:.1f} s, other processes' CPU"
                  f" {run['other_cpu_seconds']:.1f} s", flush=True)
            with open(out, "w") as f:
                json.dump(doc, f, indent=1)
    text, summary = report(doc["runs"], names, a.epochs)
    doc["summary"] = summary
    doc["finished"] = datetime.datetime.now().isoformat(timespec="seconds")
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
    print()
    print(f"{a.rounds} rounds, contenders alternating (order rotated each round); images/s from the "
          f"start of iteration; 'images' is each run's count; '1st ep' is the first epoch alone")
    print(text)
    print(f"\nevery run: {out}")


if __name__ == "__main__":
    main()
