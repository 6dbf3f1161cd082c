#!/usr/bin/env python3
"""Soak: the augment pipeline with a sandboxed WASM plugin, repeated forever, for a fixed
time, checkpointing every N batches; samples the process's RSS, open file descriptors and
threads, and says whether they stayed flat (RELIABILITY.md, "Soak"). Run by hand, not in CI.

    sluice gen --out /tmp/soak-data                       # the synthetic JPEG dataset
    cargo build --release --target wasm32-unknown-unknown -p sluice-example-solarize \\
        --target-dir target/wasm-guests
    python bench/soak.py --data /tmp/soak-data --minutes 10 \\
        --csv bench/results/soak-$(date +%F).csv

The pipeline is `examples/pipelines/wasm_augment.toml` (interleave, parse, decode + random
crop + flip, the `gray_solarize` WASM plugin, colour ops, batch 64, prefetch) with a
`repeat` stage (no count: forever) after the parse. Every `--checkpoint-every` batches the
iterator's checkpoint is written to a file (write to a temporary name, fsync, rename); every
`--resume-every` checkpoints the iterator is closed and a new one resumes from the file just
written, so the soak also covers closing a run (its threads joined, its files closed) and
resuming one. A sample (elapsed seconds, batches, RSS, fds, threads) is taken every
`--sample-seconds`.

Verdict: after a warm-up (the first 20 % of the time: buffer pools, the allocator's arenas
and autotune settle), RSS must stay within `--rss-tolerance-mib` of its warm-up level, and
the fd and thread counts sampled at the moments between runs must not grow (sampled once
the ended run's row threads have exited: rayon ends them just after the pool is dropped).
Exit status 1 otherwise.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import time
from pathlib import Path

import sluice

ROOT = Path(__file__).resolve().parent.parent


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def threads() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    raise RuntimeError("no Threads in /proc/self/status")


def thread_names() -> list[str]:
    names = []
    for t in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{t}/comm") as f:
                names.append(f.read().strip())
        except FileNotFoundError:  # ended meanwhile
            pass
    return names


def settle_row_threads(limit: float = 2.0) -> None:
    """Waits (at most `limit` s) for the ended run's row threads to finish exiting: its
    rayon pool is dropped with the run, and rayon's threads end after the drop returns."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if not any(n.startswith("sluice-rows") for n in thread_names()):
            return
        time.sleep(0.01)


def fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def write_durably(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def pipeline_text(wasm: Path) -> str:
    text = (ROOT / "examples/pipelines/wasm_augment.toml").read_text()
    old_path = 'path = "target/wasm-guests/wasm32-unknown-unknown/release/sluice_example_solarize.wasm"'
    assert old_path in text, "wasm_augment.toml's plugin path changed"
    text = text.replace(old_path, f'path = "{wasm}"')
    parse = 'features."image/class/label" = { dtype = "int64" }\n'
    assert parse in text, "wasm_augment.toml's parse stage changed"
    # Repeat forever, after the parse (as a tf.data user writes `.repeat()`).
    return text.replace(parse, parse + '\n[[stage]]\nkind = "repeat"\n', 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="a directory written by `sluice gen`")
    ap.add_argument(
        "--wasm",
        default=str(
            ROOT / "target/wasm-guests/wasm32-unknown-unknown/release/sluice_example_solarize.wasm"
        ),
    )
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--checkpoint-every", type=int, default=20, help="batches")
    ap.add_argument("--resume-every", type=int, default=10, help="checkpoints")
    ap.add_argument("--sample-seconds", type=float, default=5.0)
    ap.add_argument("--rss-tolerance-mib", type=float, default=64.0)
    ap.add_argument("--ram-budget", default="1GiB")
    ap.add_argument("--csv", help="write the samples here")
    ap.add_argument("--checkpoint-file", default="/tmp/sluice-soak.ckpt")
    args = ap.parse_args()

    pipeline = sluice.Pipeline.from_toml(
        pipeline_text(Path(args.wasm)), data=args.data, ram_budget=args.ram_budget
    )
    ckpt_path = Path(args.checkpoint_file)
    duration = args.minutes * 60
    start = time.monotonic()
    samples: list[tuple[float, int, float, int, int]] = []
    # fds and threads between runs (one iterator closed, the next not yet started): what a
    # leak would grow.
    between: list[tuple[float, int, int]] = [(0.0, fds(), threads())]
    batches = checkpoints = runs = resumes = 0
    images = 0
    next_sample = 0.0
    resume: bytes | None = None
    # Seconds from a resume to its first batch, with the batches delivered before it.
    resume_latency: list[tuple[int, float]] = []
    while True:
        opened = time.monotonic()
        it = pipeline.iter(resume=resume)
        runs += 1
        resumed = resume is not None
        resume = None
        for batch in it:
            if resumed:
                resume_latency.append((batches, time.monotonic() - opened))
                resumed = False
            batches += 1
            images += len(batch["image/class/label"])
            if batches % args.checkpoint_every == 0:
                data = it.checkpoint()
                write_durably(ckpt_path, data)
                checkpoints += 1
                if checkpoints % args.resume_every == 0:
                    resume = ckpt_path.read_bytes()
                    break
            now = time.monotonic() - start
            if now >= next_sample:
                samples.append((now, batches, rss_mib(), fds(), threads()))
                next_sample = now + args.sample_seconds
            if now >= duration:
                break
        it.close()
        del it
        settle_row_threads()
        between.append((time.monotonic() - start, fds(), threads()))
        if resume is not None:
            resumes += 1
        if time.monotonic() - start >= duration:
            break
        if resume is None:
            # The repeat never ends: only a resume or the time limit leaves the loop.
            print("error: the repeated pipeline ended", file=sys.stderr)
            return 1

    elapsed = time.monotonic() - start
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["seconds", "batches", "rss_mib", "fds", "threads"])
            for s in samples:
                w.writerow([f"{s[0]:.1f}", s[1], f"{s[2]:.1f}", s[3], s[4]])

    warm = [s for s in samples if s[0] >= 0.2 * elapsed]
    rss_warm = [s[2] for s in warm]
    first_minute = [s[2] for s in warm if s[0] < warm[0][0] + 60]
    last_minute = [s[2] for s in warm if s[0] >= elapsed - 60]
    base = statistics.median(first_minute)
    end = statistics.median(last_minute)
    drift = end - base
    spread = max(rss_warm) - min(rss_warm)
    between_warm = [b for b in between[1:] if b[0] >= 0.2 * elapsed] or between[-1:]
    fd_growth = max(b[1] for b in between_warm) - min(b[1] for b in between[1:])
    thread_growth = max(b[2] for b in between_warm) - min(b[2] for b in between[1:])
    print(
        f"soak: {elapsed / 60:.1f} min, {batches} batches ({images} images, "
        f"{images / elapsed:.0f} images/s), {checkpoints} checkpoints, {runs} runs "
        f"({resumes} resumed from a checkpoint)"
    )
    print(
        f"RSS after warm-up: first minute median {base:.1f} MiB, last minute median "
        f"{end:.1f} MiB (drift {drift:+.1f} MiB), min {min(rss_warm):.1f}, max "
        f"{max(rss_warm):.1f} (spread {spread:.1f} MiB); peak over the run "
        f"{max(s[2] for s in samples):.1f} MiB"
    )
    print(
        f"between runs: fds {between[0][1]} before the first, {min(b[1] for b in between[1:])}"
        f"..{max(b[1] for b in between[1:])} after; threads {between[0][2]} before the "
        f"first, {min(b[2] for b in between[1:])}..{max(b[2] for b in between[1:])} after; "
        f"while running: fds {min(s[3] for s in samples)}..{max(s[3] for s in samples)}, "
        f"threads {min(s[4] for s in samples)}..{max(s[4] for s in samples)}"
    )
    if resume_latency:
        lat = [r[1] for r in resume_latency]
        print(
            f"resume to first batch: median {statistics.median(lat):.2f} s, max {max(lat):.2f} s; "
            f"first {resume_latency[0][1]:.2f} s (at batch {resume_latency[0][0]}), last "
            f"{resume_latency[-1][1]:.2f} s (at batch {resume_latency[-1][0]})"
        )
    if os.environ.get("SOAK_DEBUG"):
        print("between:", between)
    ok = abs(drift) <= args.rss_tolerance_mib and fd_growth <= 0 and thread_growth <= 0
    print("verdict:", "flat" if ok else "GROWS")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
