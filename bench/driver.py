#!/usr/bin/env python3
"""Sluice and the other input pipelines on the same files, in ONE command: every workload on
every system, one process per run, alternating the systems within each round, medians of the
rounds, peak RSS of each run's process tree, and the table of BENCHMARKS.md's headline with the
issue's targets (met / not met).

Usage (from anywhere; paths default to this machine's layout):

    python3 bench/driver.py [--data /work/bench-data] [--images /work/bench-jpegs]
        [--rounds 3] [--workloads read,parse,augment,cache2,eval]
        [--systems sluice-cli,sluice-verify,sluice-decode-only,sluice-decode-write,sluice-python,tfdata,torch,dali,grain]
        [--out FILE.md] [--jsonl FILE.jsonl] [--timeout 600] [--quiet 0]
        [--sluice target/release/sluice] [--bench-bin PATH] [--sluice-py /work/venv/bin/python]
        [--tf-py /work/venv-tf/bin/python] [--peers-py /work/venv-peers/bin/python]
    python3 bench/driver.py --report FILE.jsonl [--out FILE.md]   # the table again from a run's lines

The driver needs psutil in the python running it (/work/venv's has it); without psutil it
falls back to the kernel's peak RSS of the largest single process (wait4's ru_maxrss).

Workloads (the pipelines of tfdata_baseline.py; `eval` from eval_baselines.py / eval.toml):
  read     interleave 4 -> repeat 10 -> batch 256 of raw records          (records/s, MB/s)
  parse    interleave 4 -> repeat 5 -> batch 256 -> parse_example           (records/s)
  augment  interleave 4 -> parse, decode, random crop 224, flip, brightness, contrast,
           normalize -> batch 64 -> prefetch                                (images/s)
  cache2   parse, decode, resize 64x64 -> cache -> batch 64; the 2nd epoch  (images/s)
  eval     interleave 4 -> parse, decode, centre crop 224, to [0,1], ImageNet normalize
           -> batch 64 -> prefetch                                          (images/s)

Systems (what each figure is: rows over the seconds of iteration the process itself reports,
from the start of iteration to its last batch, start-up and imports left out; the whole
process's wall time is kept too, as `process_seconds`):
  sluice-cli          `sluice run examples/pipelines/<w>.toml --data DIR --json` (read.toml,
                      parse.toml, augment.toml, cache.toml with --epochs 2, eval.toml):
                      `elements_per_s` (rows over the CLI's epochs' wall time); for cache2 the
                      second epoch (the run's seconds less the timeline's `epoch 1 started`)
  sluice-verify       `sluice verify --json 'DIR/train.tfrecord-*'`: every record read once and
                      both CRCs checked; records/s and MB/s (size on disk) over the whole
                      verification. Runs on `read` (the issue's read figure) and on `parse`
                      (the reference of the target "parse >= 60 % of verify's records/s")
  sluice-decode-only  the pipelines bench's `decode_only` (the JPEGs in memory decoded by a
                      plain parallel loop: augment's ceiling); `augment` only
  sluice-decode-write the pipelines bench's `decode_to_batch`: the same loop, each image's
                      first 224x224x3 values then written as f32 into a 64-row batch buffer
                      (the output augment delivers; no other op): what decoding plus writing
                      that output costs on the machine; `augment` only, no target
  sluice-python       `sluice.Pipeline.from_toml(<w>.toml, data=DIR)` in --sluice-py, a loop
                      touching each batch lightly (sum of channel 0 / of the labels / record
                      lengths); cache2: two epochs, the second timed
  tfdata              `tfdata_baseline.py run DIR <w>` (eval: `eval_baselines.py tfdata DIR`)
  torch               PyTorch DataLoader (2 workers) + torchvision v2 on IMG_DIR:
                      peers/bench_torch.py (augment), eval_baselines.py torch (eval)
  dali                DALI's CPU pipeline (2 threads) on the TFRecords: peers/bench_dali.py,
                      eval_baselines.py dali (its index files are written before the clock)
  grain               Grain (2 worker processes, PIL decode) on IMG_DIR: peers/bench_grain.py,
                      eval_baselines.py grain
Peers run only the workloads they have (augment, eval); elsewhere the table shows "—".

Peak RSS: the sum of the RSS of the process and all its descendants (workers included), polled
every 20 ms (the list of descendants every 0.2 s) with psutil, or the process's own peak from
wait4() if higher (and above the driver's own peak, which a forked child's starts from on
Linux). A sum counts pages shared between processes once per process.

Before each round the driver measures the machine's memory (`memory_probe`, in a process of
its own: the first write to each page of 64 MiB just mapped, then a 64 MiB copy into it;
a child's `ru_maxrss` starts from its parent's peak, so the probe's memory must not be the
driver's) and the table's head gives the median and range: on a VM the host can make fresh
memory several times dearer from one hour to the next, which moves Sluice's `augment`
(602 KB of output per image) more than the decode-only loop. `--calm-memory US` makes each
round wait (probing every 30 s, at most `--calm-wait` s) until a fresh page costs at most
US µs, and the table's head says how long that took: every system of the round then runs
with the host as the probe found it.

After each run the driver ends what is left of its process group and removes the Python
shared-memory segments (`/dev/shm/psm_*`) that appeared during it: Grain's worker processes
leave theirs behind (two batches, 77 MB, per run), which would otherwise pile up as memory
no process can use (the run's JSON line says how much, as `shm_left_mb`).

Output: one JSON line per run on stdout (and in --jsonl), then the markdown table (also
written to --out): the machine and date, per workload each system's median and min-max, the
ratio Sluice CLI / system, median peak RSS and the RSS ratio, then the issue's targets.
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
import time

from run_measure import have_psutil, last_json, measure, wait_quiet  # measuring one run

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(REPO, "bench")
PIPELINES = os.path.join(REPO, "examples", "pipelines")

WORKLOADS = ["read", "parse", "augment", "cache2", "eval"]
SYSTEMS = ["sluice-cli", "sluice-verify", "sluice-decode-only", "sluice-decode-write", "sluice-python",
           "tfdata", "torch", "dali", "grain"]
TOML = {"read": "read.toml", "parse": "parse.toml", "augment": "augment.toml", "cache2": "cache.toml",
        "eval": "eval.toml"}
# Which workloads each system has (the table shows "—" for the others).
APPLIES = {
    "sluice-cli": set(WORKLOADS),
    "sluice-verify": {"read", "parse"},
    "sluice-decode-only": {"augment"},
    "sluice-decode-write": {"augment"},
    "sluice-python": set(WORKLOADS),
    "tfdata": set(WORKLOADS),
    "torch": {"augment", "eval"},
    "dali": {"augment", "eval"},
    "grain": {"augment", "eval"},
}
LABELS = {
    "sluice-cli": "Sluice CLI", "sluice-verify": "`sluice verify`", "sluice-decode-only": "Sluice decode-only loop",
    "sluice-decode-write": "Sluice decode + f32 output loop",
    "sluice-python": "Sluice Python", "tfdata": "tf.data", "torch": "PyTorch DataLoader + torchvision v2",
    "dali": "DALI CPU", "grain": "Grain",
}
UNITS = {"read": "records/s", "parse": "records/s", "augment": "images/s", "cache2": "images/s",
         "eval": "images/s"}
# The targets: (workload, Sluice's system, other system, kind, threshold, words).
#   kind "speed": median(Sluice) / median(other) >= threshold
#   kind "speed-best": median(Sluice) / max(other)  >= threshold (tf.data's faster mode too)
#   kind "rss": median peak RSS(Sluice) / median peak RSS(other) <= threshold
TARGETS = [
    ("read", "sluice-verify", "tfdata", "speed", 3.0, "read: `sluice verify` >= 3x tf.data"),
    ("read", "sluice-cli", "tfdata", "speed", 3.0, "read: `sluice run read.toml` >= 3x tf.data"),
    ("parse", "sluice-cli", "tfdata", "speed", 3.0, "parse >= 3x tf.data"),
    ("parse", "sluice-cli", "sluice-verify", "speed", 0.6, "parse >= 60 % of `sluice verify`'s records/s"),
    ("augment", "sluice-cli", "tfdata", "speed-best", 2.0,
     "augment >= 2x tf.data in either mode (against tf.data's fastest run)"),
    ("augment", "sluice-cli", "sluice-decode-only", "speed", 0.85, "augment >= 85 % of the decode-only loop"),
    ("augment", "sluice-cli", "dali", "speed", 3.0, "augment >= 3x DALI CPU"),
    ("augment", "sluice-cli", "torch", "speed", 5.0, "augment >= 5x PyTorch DataLoader"),
    ("augment", "sluice-cli", "tfdata", "rss", 0.25, "augment peak RSS <= 0.25x tf.data"),
    ("augment", "sluice-cli", "torch", "rss", 0.25, "augment peak RSS <= 0.25x PyTorch DataLoader"),
    ("augment", "sluice-cli", "dali", "rss", 0.25, "augment peak RSS <= 0.25x DALI CPU"),
    ("augment", "sluice-cli", "grain", "rss", 0.25, "augment peak RSS <= 0.25x Grain"),
    ("cache2", "sluice-cli", "tfdata", "speed", 2.0, "cache2 >= 2x tf.data"),
]
SLUICE = "sluice-cli"


# --- Sluice from Python (run in a subprocess: `driver.py _sluice_python WORKLOAD TOML DATA`) ----

def run_sluice_python(workload, toml, data):
    import sluice

    pipeline = sluice.Pipeline.from_toml(toml, data=data).build()
    epochs = 2 if workload == "cache2" else 1
    s = 0.0
    n = nbytes = 0
    seconds = 0.0
    for _ in range(epochs):
        n = nbytes = 0
        t = time.perf_counter()
        for batch in pipeline.iter():
            if workload == "read":
                recs = batch["record"]
                n += len(recs)
                nbytes += sum(len(r) for r in recs)
            elif workload == "parse":
                labels = batch["label"]
                s += float(labels.sum())
                n += labels.shape[0]
            else:
                image = batch["image"]
                s += float(image[..., 0].sum())
                n += image.shape[0]
        seconds = time.perf_counter() - t
    print(json.dumps({"system": f"sluice {getattr(sluice, '__version__', '?')} from Python",
                      "pipeline": workload, "records": n, "seconds": round(seconds, 4),
                      "records_per_s": round(n / seconds, 1),
                      "mb_per_s": round(nbytes / seconds / 1e6, 1) if nbytes else None, "checksum": s}))


# --- the machine's memory, before each round (runs are measured by run_measure.measure) ------

def probe_memory_apart(mib=64):
    """`memory_probe` in a process of its own: a child's `ru_maxrss` (which the driver reads
    for peak RSS) starts from its parent's peak at fork, so the probe's 128 MiB must never be
    the driver's. None if the probe fails."""
    try:
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "_memory_probe", str(mib)],
                             capture_output=True, text=True, timeout=120, check=True).stdout
        return json.loads(out.strip().splitlines()[-1])
    except (subprocess.SubprocessError, OSError, ValueError, IndexError):
        return None


def wait_calm_memory(limit_us, max_wait, probe=probe_memory_apart, sleep=time.sleep, every=30):
    """Probes the memory (`probe()`) until a fresh page costs at most `limit_us` µs, every
    `every` s for up to `max_wait` s (the last probe is kept if it never does). Returns
    (probe, seconds waited, calm): a round then starts with the host in the state the
    table's head reports, for every system of the round alike."""
    waited = 0.0
    while True:
        p = probe()
        calm = p is not None and p["fresh_page_us"] <= limit_us
        if calm or waited >= max_wait:
            return p, waited, calm
        sleep(every)
        waited += every


def memory_probe(mib=64):
    """How this machine's memory behaves right now (a VM's host can make fresh memory far
    dearer from one hour to the next, and Sluice's `augment`, which writes 602 KB of `f32`
    per image, feels it more than a loop that works inside its L2): `fresh_page_us`, the
    first write to each 4 KiB page of `mib` MiB just mapped (fault, zeroing and whatever the
    host does), per page; `write_gb_s`, then copying `mib` MiB into those pages, now
    touched. Standard library only (an anonymous `mmap`)."""
    import mmap

    n = mib << 20
    page = mmap.PAGESIZE
    m = mmap.mmap(-1, n)
    try:
        t = time.perf_counter()
        for i in range(0, n, page):
            m[i] = 1
        fresh = time.perf_counter() - t
        block = b"\x5a" * n
        t = time.perf_counter()
        m[:] = block
        copy = time.perf_counter() - t
    finally:
        m.close()
    return {"fresh_page_us": round(fresh * 1e6 / (n // page), 2), "write_gb_s": round(n / copy / 1e9, 1)}


# --- what each system runs and how its output reads -------------------------------------------

def find_bench_bin():
    """The newest pipelines bench binary (`cargo bench -p sluice-core --bench pipelines --no-run`)."""
    found = [p for p in glob.glob(os.path.join(REPO, "target", "release", "deps", "pipelines-*"))
             if os.access(p, os.X_OK) and not p.endswith(".d")]
    return max(found, key=os.path.getmtime) if found else None


def command(system, workload, a):
    """The command of one run, or None if the system has no such workload."""
    if workload not in APPLIES[system]:
        return None
    data = a.data
    if system == "sluice-cli":
        cmd = [a.sluice, "run", os.path.join(PIPELINES, TOML[workload]), "--data", data, "--json"]
        return cmd + (["--epochs", "2"] if workload == "cache2" else [])
    if system == "sluice-verify":
        return [a.sluice, "verify", "--json", os.path.join(data, "train.tfrecord-*")]
    if system == "sluice-decode-only":
        return [a.bench_bin, data, "decode_only"]
    if system == "sluice-decode-write":
        return [a.bench_bin, data, "decode_to_batch"]
    if system == "sluice-python":
        return [a.sluice_py, os.path.abspath(__file__), "_sluice_python", workload,
                os.path.join(PIPELINES, TOML[workload]), data]
    if system == "tfdata":
        if workload == "eval":
            return [a.tf_py, os.path.join(BENCH, "eval_baselines.py"), "tfdata", data]
        return [a.tf_py, os.path.join(BENCH, "tfdata_baseline.py"), "run", data, workload]
    peer_dir = data if system == "dali" else a.images
    if workload == "eval":
        return [a.peers_py, os.path.join(BENCH, "eval_baselines.py"), system, peer_dir]
    script = {"torch": "bench_torch.py", "dali": "bench_dali.py", "grain": "bench_grain.py"}[system]
    flag = "--threads" if system == "dali" else "--workers"
    return [a.peers_py, os.path.join(BENCH, "peers", script), peer_dir, flag, "2"]


def read_result(system, workload, raw):
    """(records, seconds, records/s, MB/s or None, system's own name) from a run's JSON line."""
    if system == "sluice-cli":
        seconds, n = raw["seconds"], raw["elements"]
        name = f"sluice {raw.get('sluice_version', '?')} CLI"
        if workload == "cache2" and raw.get("epochs") == 2:
            # The second epoch: from the timeline's `epoch 1 started` to the end of the run.
            starts = [e["t"] for e in (raw.get("timeline") or {}).get("events", [])
                      if e.get("kind") == "epoch" and e.get("text") == "epoch 1 started"]
            if not starts:
                raise ValueError("cache2: no `epoch 1 started` event in the CLI's timeline")
            seconds, n = seconds - starts[0], n // 2
        return n, seconds, n / seconds, None, name
    if system == "sluice-verify":
        if raw.get("damaged_files"):
            raise ValueError(f"sluice verify: {raw['damaged_files']} damaged files")
        return raw["records"], raw["seconds"], raw["records"] / raw["seconds"], raw["mb_per_s"], "sluice verify"
    if system == "tfdata" and "epochs" in raw:
        ep = raw["epochs"][-1]
        return ep["records"], ep["seconds"], ep["records_per_s"], ep.get("mb_per_s"), raw["system"]
    if "records_per_s" in raw:  # sluice-python, the decode-only bench
        return raw["records"], raw["seconds"], raw["records_per_s"], raw.get("mb_per_s"), raw["system"]
    return raw["images"], raw["seconds"], raw["images_per_s"], None, raw["system"]


def one_run(system, workload, rnd, a):
    cmd = command(system, workload, a)
    run = {"round": rnd, "workload": workload, "system": system, "cmd": cmd}
    if a.quiet > 0 and have_psutil():
        run["waited_for_quiet_s"], run["cpu_percent_before"] = wait_quiet(a.quiet)
    m = measure(cmd, a.timeout)
    run.update(exit=m["exit"], timed_out=m["timed_out"], process_seconds=round(m["process_seconds"], 3),
               peak_rss_mb=round(m["peak_rss"] / 2**20, 1), cpu_seconds=round(m["cpu_seconds"], 2),
               other_cpu_seconds=None if m["other_cpu_seconds"] is None else round(m["other_cpu_seconds"], 2))
    if m["shm_left"]:
        run["shm_left_mb"] = round(m["shm_left"] / 2**20, 1)  # removed after the run
    if m["other_cpu_seconds"] is not None:
        # Other processes took more than 10 % of all CPUs while it ran: say so.
        run["disturbed"] = m["other_cpu_seconds"] > 0.10 * (os.cpu_count() or 1) * m["process_seconds"]
    if m["timed_out"] or m["exit"] != 0:
        run["ok"] = False
        run["error"] = "timed out after %ss" % a.timeout if m["timed_out"] else f"exit {m['exit']}"
        run["stderr_tail"] = m["stderr"][-2000:]
        return run
    try:
        raw = last_json(m["stdout"])
        n, seconds, rate, mbps, name = read_result(system, workload, raw)
    except (ValueError, KeyError, TypeError) as e:
        run.update(ok=False, error=f"unreadable output: {e}", stdout_tail=m["stdout"][-2000:],
                   stderr_tail=m["stderr"][-2000:])
        return run
    run.update(ok=True, version=name, records=n, seconds=round(seconds, 4), records_per_s=round(rate, 1),
               mb_per_s=None if mbps is None else round(mbps, 1))
    return run


# --- what is installed -----------------------------------------------------------------------

PROBES = {
    "sluice-python": "import sluice; print(getattr(sluice, '__version__', '?'))",
    "tfdata": "import os; os.environ['TF_CPP_MIN_LOG_LEVEL']='3'; import tensorflow as tf; print(tf.__version__)",
    "torch": "import torch, torchvision, psutil; print(torch.__version__, 'torchvision', torchvision.__version__)",
    "dali": "import nvidia.dali, psutil; print(nvidia.dali.__version__)",
    "grain": "import grain, PIL, psutil; print(grain.__version__)",
}


def probe(system, a):
    """(version string, None) if the system can run here, else (None, why not)."""
    if system in ("sluice-cli", "sluice-verify"):
        if not os.access(a.sluice, os.X_OK):
            return None, f"no {a.sluice} (cargo build --release -p sluice-cli)"
        r = subprocess.run([a.sluice, "--version"], capture_output=True, text=True)
        return r.stdout.strip() or "sluice", None
    if system in ("sluice-decode-only", "sluice-decode-write"):
        if not a.bench_bin or not os.access(a.bench_bin, os.X_OK):
            return None, "no pipelines bench binary (cargo bench -p sluice-core --bench pipelines --no-run)"
        return os.path.basename(a.bench_bin), None
    py = {"sluice-python": a.sluice_py, "tfdata": a.tf_py}.get(system, a.peers_py)
    if not (py and os.access(py, os.X_OK)):
        return None, f"no python at {py}"
    if system in ("torch", "grain") and not glob.glob(os.path.join(a.images, "*", "*.jpg")):
        return None, f"no JPEG files in {a.images}/*/ (bench/peers/extract_jpegs.py DATA IMG_DIR)"
    try:
        r = subprocess.run([py, "-c", PROBES[system]], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return None, f"{py}: importing took over 300 s"
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["?"])[-1]
        return None, f"not installed in {py}: {last}"
    return r.stdout.strip().splitlines()[-1], None


def machine():
    info = {"model": platform.processor() or platform.machine(), "cpus": os.cpu_count(), "ram_gib": None}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            k, _, v = line.partition(":")
            if k.strip() == "Model name":
                info["model"] = v.strip()
            elif k.strip() == "Core(s) per socket":
                info["cores_per_socket"] = int(v.strip())
            elif k.strip() == "Socket(s)":
                info["sockets"] = int(v.strip())
    except (OSError, ValueError):
        pass
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    info["ram_gib"] = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    info["kernel"] = platform.release()
    return info


# --- the table (pure functions of the runs: bench/tests/test_driver.py checks them) ------------

def summarize(runs):
    """{(workload, system): {"median", "min", "max", "mb_median", "rss_median", "runs", "failed"}}
    over the runs that ended well."""
    out = {}
    for r in runs:
        if "workload" not in r:
            continue
        key = (r["workload"], r["system"])
        s = out.setdefault(key, {"rates": [], "mbs": [], "rss": [], "failed": 0, "disturbed": 0, "version": None})
        if not r.get("ok"):
            s["failed"] += 1
            continue
        s["rates"].append(r["records_per_s"])
        if r.get("mb_per_s") is not None:
            s["mbs"].append(r["mb_per_s"])
        s["rss"].append(r["peak_rss_mb"])
        s["disturbed"] += bool(r.get("disturbed"))
        s["version"] = r.get("version") or s["version"]
    for s in out.values():
        rates = s["rates"]
        s["runs"] = len(rates)
        s["median"] = statistics.median(rates) if rates else None
        s["min"] = min(rates) if rates else None
        s["max"] = max(rates) if rates else None
        s["mb_median"] = statistics.median(s["mbs"]) if s["mbs"] else None
        s["rss_median"] = statistics.median(s["rss"]) if s["rss"] else None
    return out


def ratio(a, b):
    return a / b if a is not None and b else None


def check_targets(summary, workloads=None):
    """[(words, value, threshold, kind, met: True/False/None)] for the targets whose workload ran
    (None: a side has no result)."""
    rows = []
    for workload, mine, other, kind, threshold, words in TARGETS:
        if workloads is not None and workload not in workloads:
            continue
        s, o = summary.get((workload, mine)), summary.get((workload, other))
        value = None
        if s and o:
            if kind == "speed":
                value = ratio(s["median"], o["median"])
            elif kind == "speed-best":
                value = ratio(s["median"], o["max"])
            else:
                value = ratio(s["rss_median"], o["rss_median"])
        met = None if value is None else (value <= threshold if kind == "rss" else value >= threshold)
        rows.append((words, value, threshold, kind, met))
    return rows


def fmt_rate(x):
    if x is None:
        return "—"
    return f"{x / 1000:,.1f}k" if x >= 10_000 else f"{x:,.0f}"


def fmt_ratio(x):
    return "—" if x is None else f"{x:.2f}×"


def table(runs, meta):
    """The markdown of a run: machine and date, a table per workload, the targets."""
    summary = summarize(runs)
    workloads = [w for w in WORKLOADS if w in meta.get("workloads", WORKLOADS)]
    systems = [s for s in SYSTEMS if s in meta.get("systems", SYSTEMS)]
    m = meta.get("machine", {})
    lines = [
        f"Measured {meta.get('date', '?')} on {m.get('model', '?')}, {m.get('cpus', '?')} CPUs, "
        f"{m.get('ram_gib', '?')} GiB RAM (kernel {m.get('kernel', '?')}); data `{meta.get('data', '?')}`; "
        f"medians of {meta.get('rounds', '?')} rounds, the systems alternating within each round, one "
        "process per run. Throughput: rows over each process's own iteration time (start-up and imports "
        "left out). Peak RSS: " + (
            "the largest single process's peak (wait4; psutil was missing)"
            if meta.get("rss_method") == "wait4 ru_maxrss" else
            "the process and all its descendants, summed (psutil, polled every 20 ms)") + ".",
        "",
    ]
    probes = meta.get("probes") or []
    if probes:
        fresh = [p["fresh_page_us"] for p in probes]
        write = [p["write_gb_s"] for p in probes]
        lines.append(
            f"Memory before each round (`memory_probe`): the first write to a fresh 4 KiB page "
            f"{statistics.median(fresh):.2f} µs ({min(fresh):.2f}–{max(fresh):.2f}), copying 64 MiB "
            f"{statistics.median(write):.1f} GB/s ({min(write):.1f}–{max(write):.1f}).")
        waits = [w for w in meta.get("calm_waits") or [] if "calm" in w]
        if meta.get("calm_memory_us") and waits:
            uncalm = sum(1 for w in waits if not w["calm"])
            lines.append(
                f"Each round started once a fresh page cost at most {meta['calm_memory_us']:g} µs "
                f"(`--calm-memory`): {sum(w['waited_for_calm_s'] for w in waits):.0f} s of waiting in all"
                + (f"; {uncalm} of {len(waits)} rounds started without, after `--calm-wait`" if uncalm else "")
                + ".")
        lines.append("")
    versions = meta.get("versions", {})
    if versions:
        lines.append("Versions: " + "; ".join(f"{LABELS.get(k, k)} {v}" for k, v in versions.items()) + ".")
        lines.append("")
    skipped = meta.get("skipped", {})
    if skipped:
        lines.append("Not run: " + "; ".join(f"{LABELS.get(k, k)}: {v}" for k, v in skipped.items()) + ".")
        lines.append("")
    for w in workloads:
        unit = UNITS[w]
        mine = summary.get((w, SLUICE))
        lines += [f"**{w}** ({unit})", "",
                  f"| System | Median {unit} | Min–max | Sluice CLI ÷ system | Peak RSS (MB) | RSS: Sluice CLI ÷ system |",
                  "|---|---:|---:|---:|---:|---:|"]
        for sys_ in systems:
            s = summary.get((w, sys_))
            label = LABELS[sys_]
            if w not in APPLIES[sys_] or sys_ in skipped:
                lines.append(f"| {label} | — | — | — | — | — |")
                continue
            if not s or s["median"] is None:
                failed = s["failed"] if s else 0
                lines.append(f"| {label} | failed ({failed} runs) | — | — | — | — |" if failed else
                             f"| {label} | — | — | — | — | — |")
                continue
            med = fmt_rate(s["median"])
            if w == "read" and s["mb_median"] is not None:
                med += f" ({s['mb_median']:,.0f} MB/s)"
            note = ""
            if s["failed"]:
                note += f" ({s['failed']} failed)"
            if s["disturbed"]:
                note += f" ({s['disturbed']} disturbed)"
            same = sys_ == SLUICE
            lines.append(
                f"| {label}{note} | {med} | {fmt_rate(s['min'])}–{fmt_rate(s['max'])} | "
                f"{'—' if same else fmt_ratio(ratio(mine and mine['median'], s['median']))} | "
                f"{s['rss_median']:,.0f} | "
                f"{'—' if same else fmt_ratio(ratio(mine and mine['rss_median'], s['rss_median']))} |")
        lines.append("")
    targets = check_targets(summary, workloads)
    if targets:
        lines += ["**The issue's targets**", "", "| Target | Measured | Goal | Met |", "|---|---:|---:|---|"]
        for words, value, threshold, kind, met in targets:
            goal = f"≤ {threshold:g}×" if kind == "rss" else f"≥ {threshold:g}×"
            verdict = "not measured" if met is None else ("met" if met else "**not met**")
            lines.append(f"| {words} | {fmt_ratio(value)} | {goal} | {verdict} |")
        lines.append("")
    return "\n".join(lines)


# --- the command -------------------------------------------------------------------------------

def parse_list(text, allowed, what):
    items = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in items if x not in allowed]
    if bad:
        raise SystemExit(f"unknown {what}: {', '.join(bad)} (expected some of {', '.join(allowed)})")
    return items


def ensure_images(a):
    """Extracts the JPEGs of DATA into IMG_DIR (ImageFolder layout) if it has none."""
    if glob.glob(os.path.join(a.images, "*", "*.jpg")):
        return None
    if not os.access(a.tf_py, os.X_OK):
        return "no TF python to extract the JPEGs"
    print(f"# extracting the JPEGs of {a.data} into {a.images}", file=sys.stderr)
    r = subprocess.run([a.tf_py, os.path.join(BENCH, "peers", "extract_jpegs.py"), a.data, a.images],
                       capture_output=True, text=True)
    return None if r.returncode == 0 else f"extract_jpegs.py failed: {r.stderr.strip()[-300:]}"


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "_sluice_python":
        return run_sluice_python(*sys.argv[2:5])
    if len(sys.argv) > 1 and sys.argv[1] == "_memory_probe":
        return print(json.dumps(memory_probe(int(sys.argv[2]))))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="/work/bench-data", help="the TFRecord shards (default /work/bench-data)")
    ap.add_argument("--images", default="/work/bench-jpegs",
                    help="the same JPEGs as files, ImageFolder layout, for torch and Grain (extracted if empty)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--out", help="also write the markdown table to this file")
    ap.add_argument("--jsonl", help="also write the run lines (and a meta line) to this file")
    ap.add_argument("--timeout", type=float, default=600, help="seconds before a run is killed (default 600)")
    ap.add_argument("--quiet", type=float, default=0,
                    help="before each run wait until the machine's CPU use is below this %% (0: don't)")
    ap.add_argument("--calm-memory", type=float, default=0, metavar="US",
                    help="before each round wait until a fresh 4 KiB page costs at most US µs "
                         "(memory_probe; 0: don't wait)")
    ap.add_argument("--calm-wait", type=float, default=900,
                    help="at most this many seconds of --calm-memory waiting per round (default 900)")
    ap.add_argument("--sluice", default=os.path.join(REPO, "target", "release", "sluice"))
    ap.add_argument("--bench-bin", default=None, help="the pipelines bench binary (default: newest built)")
    ap.add_argument("--sluice-py", default="/work/venv/bin/python")
    ap.add_argument("--tf-py", default="/work/venv-tf/bin/python")
    ap.add_argument("--peers-py", default="/work/venv-peers/bin/python")
    ap.add_argument("--report", help="print the table of a --jsonl file instead of running")
    a = ap.parse_args()

    if a.report:
        with open(a.report) as f:
            lines = [json.loads(x) for x in f if x.strip()]
        meta = next((x["meta"] for x in lines if "meta" in x), {})
        meta["probes"] = [x["probe"] for x in lines if x.get("probe")]
        meta["calm_waits"] = [{k: x[k] for k in ("waited_for_calm_s", "calm") if k in x}
                              for x in lines if x.get("probe")]
        text = table([x for x in lines if "workload" in x], meta)
        print(text)
        if a.out:
            with open(a.out, "w") as f:
                f.write(text + "\n")
        return

    workloads = parse_list(a.workloads, WORKLOADS, "workloads")
    systems = parse_list(a.systems, SYSTEMS, "systems")
    a.bench_bin = a.bench_bin or find_bench_bin()
    if not have_psutil():
        print("# psutil missing: peak RSS is the largest single process's (wait4)", file=sys.stderr)
    versions, skipped = {}, {}
    if any(s in systems for s in ("torch", "grain")) and any(w in workloads for w in ("augment", "eval")):
        why = ensure_images(a)
        if why:
            print(f"# {why}", file=sys.stderr)
    for s in systems:
        if not any(w in APPLIES[s] for w in workloads):
            continue
        version, why = probe(s, a)
        if why:
            skipped[s] = why
            print(f"# skipping {s}: {why}", file=sys.stderr)
        else:
            versions[s] = version
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": machine(), "data": a.data, "images": a.images, "rounds": a.rounds,
            "workloads": workloads, "systems": systems, "versions": versions, "skipped": skipped,
            "rss_method": "psutil tree sum, 20 ms" if have_psutil() else "wait4 ru_maxrss"}
    if a.calm_memory > 0:
        meta["calm_memory_us"] = a.calm_memory
    jsonl = open(a.jsonl, "w") if a.jsonl else None
    if jsonl:
        jsonl.write(json.dumps({"meta": meta}) + "\n")
    runnable = [s for s in systems if s not in skipped]
    runs = []
    for rnd in range(a.rounds):
        if a.calm_memory > 0:
            p, waited, calm = wait_calm_memory(a.calm_memory, a.calm_wait)
            probe_line = {"probe": p, "round": rnd, "waited_for_calm_s": waited, "calm": calm}
        else:
            probe_line = {"probe": probe_memory_apart(), "round": rnd}
        if probe_line["probe"]:
            meta.setdefault("calm_waits", []).append({k: probe_line[k] for k in ("waited_for_calm_s", "calm")
                                                      if k in probe_line})
            meta.setdefault("probes", []).append(probe_line["probe"])
            print(json.dumps(probe_line), flush=True)
            if jsonl:
                jsonl.write(json.dumps(probe_line) + "\n")
        for w in workloads:
            order = [s for s in runnable if w in APPLIES[s]]
            if order:
                k = rnd % len(order)
                order = order[k:] + order[:k]  # a different system first each round
            for s in order:
                run = one_run(s, w, rnd, a)
                runs.append(run)
                line = json.dumps(run)
                print(line, flush=True)
                if jsonl:
                    jsonl.write(line + "\n")
                    jsonl.flush()
    if jsonl:
        jsonl.close()
    text = table(runs, meta)
    print()
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
