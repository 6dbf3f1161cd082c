#!/usr/bin/env python3
"""tf.data's reference pipelines next to Sluice's, on the same files, in one run.

Usage: python3 bench/compare_pipelines.py DATA_DIR VENV_PYTHON [--runs 5] [PIPELINE ...]

DATA_DIR holds train.tfrecord-* (make it with `tfdata_baseline.py gen DATA_DIR`); VENV_PYTHON
is the python of a venv with tensorflow-cpu. PIPELINEs (default: read parse cache2) are those of
bench/tfdata_baseline.py; Sluice's versions are in core/benches/pipelines.rs. Each
side runs RUNS times, alternating, and the best and median records/s are printed. For cache2 the
figure is the second epoch (served from the cache), as tfdata_baseline.py reports it.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASELINE = os.environ.get("TFDATA_BASELINE", os.path.join(REPO, "bench", "tfdata_baseline.py"))


def sluice_bench_binary():
    out = subprocess.run(
        ["cargo", "bench", "-p", "sluice-core", "--bench", "pipelines", "--no-run", "--message-format=json"],
        cwd=REPO, check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg["target"]["name"] == "pipelines" and msg.get("executable"):
            return msg["executable"]
    sys.exit("could not find the pipelines bench binary")


def run_json(cmd):
    res = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("python")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("pipelines", nargs="*", default=["read", "parse", "cache2"])
    a = ap.parse_intermixed_args()
    binary = sluice_bench_binary()
    rows = []
    for name in a.pipelines:
        tf, sl = [], []
        for _ in range(a.runs):
            tf.append(run_json([a.python, BASELINE, "run", a.data, name])["records_per_s"])
            sl.append(run_json([binary, a.data, name])["records_per_s"])
        rows.append((name, max(tf), statistics.median(tf), max(sl), statistics.median(sl)))
    print(f"{a.runs} runs each, alternating; records (images) per second")
    print(f"{'pipeline':10} {'tf.data best':>13} {'tf.data median':>15} {'sluice best':>12} {'sluice median':>14} {'ratio (median)':>15}")
    for name, tb, tm, sb, sm in rows:
        print(f"{name:10} {tb:13.0f} {tm:15.0f} {sb:12.0f} {sm:14.0f} {sm / tm:14.2f}x")


if __name__ == "__main__":
    main()
