#!/usr/bin/env python3
"""The per-language cost table of bench/plugin_costs.sh, in markdown (stdlib only).

Usage: plugin_costs_table.py OUT_DIR

Reads OUT_DIR/criterion.txt (criterion's output of plugin-wasm's wasm_calls bench, groups
plugin_64x224 and languages_64x224: one call of 64 images 224x224x3) and
OUT_DIR/augment.jsonl (plugin-wasm's augment_plugin bench, one JSON line per run), either
may be missing. Columns:

- µs/image: criterion's estimate for the call of 64 u8 images, / 64 (kernel + boundary, one
  thread); "× native": that over the native (lent) build of the same transform;
- images/s: the median of the augment pipeline's runs (end to end, every core);
- time × native: the pipeline's time over the native (lent) variant's (medians);
- CPU ms/image: the median of the process's CPU time per image (every thread), and over
  the pipeline without a plugin (`none`): what the plugin adds.
"""

import json
import re
import statistics
import sys
from pathlib import Path

# (label, criterion id per transform, augment variant per transform); None: no such build.
ROWS = [
    ("native Rust (lent, ABI v2)", "native", "native"),
    ("native Rust (wire, ABI v1 path)", "nativewire", "nativewire"),
    ("WASM core-ABI Rust", "wasm", "wasm"),
    ("WASM component Rust", "component", "component"),
    ("C component", "c", "c"),
    ("Zig component", "zig", "zig"),
    ("JavaScript component", "js", "js"),
    ("Python component", "python", "python"),
]
LANGUAGES = {"c", "zig", "js", "python"}
TRANSFORMS = [("gaussian_noise σ 0.05", "noise"), ("gray_solarize 0.2/0.2", "solarize")]
IMAGES_PER_CALL = 64

UNITS = {"ps": 1e-6, "ns": 1e-3, "µs": 1.0, "us": 1.0, "ms": 1e3, "s": 1e6}
TIME = re.compile(r"time:\s+\[(\S+) (\S+) (\S+) (\S+) (\S+) (\S+)\]")


def criterion_times(path: Path) -> dict:
    """Benchmark id -> (low, estimate, high) in µs per call."""
    times = {}
    if not path.exists():
        return times
    name = None
    for line in path.read_text().splitlines():
        m = TIME.search(line)
        if m:
            head = line[: m.start()].strip()
            if head:
                name = head
            if name is not None:
                v = m.groups()
                times[name] = tuple(float(v[i]) * UNITS[v[i + 1]] for i in (0, 2, 4))
            name = None
        elif line.strip() and not line.startswith((" ", "\t")) and "/" in line:
            # A long id on its own line, its times on the next.
            name = line.strip().split()[0]
    return times


def criterion_id(build: str, transform: str) -> str:
    if build in LANGUAGES:
        return f"languages_64x224/{transform}_u8_{build}"
    return f"plugin_64x224/{transform}_u8_{build}"


def augment_runs(path: Path) -> dict:
    """Variant -> list of runs (dicts)."""
    runs = {}
    if not path.exists():
        return runs
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        run = json.loads(line)
        variant = run["pipeline"].removeprefix("augment+")
        runs.setdefault(variant, []).append(run)
    return runs


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(value, spec, suffix=""):
    return "–" if value is None else f"{value:{spec}}{suffix}"


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    times = criterion_times(out / "criterion.txt")
    runs = augment_runs(out / "augment.jsonl")
    warnings = []

    def rate(variant):
        return median(r["records_per_s"] for r in runs.get(variant, []))

    def cpu(variant):
        return median(r.get("cpu_ms_per_record") for r in runs.get(variant, []))

    def us(build, transform):
        t = times.get(criterion_id(build, transform))
        return None if t is None else t[1] / IMAGES_PER_CALL

    none_cpu = cpu("none")
    rounds = max((len(r) for r in runs.values()), default=0)
    print(
        "| Build | Transform | µs/image (call of 64) | × native | images/s (median) "
        "| time × native | CPU ms/image | CPU ms/image over `none` |"
    )
    print("|---|---|--:|--:|--:|--:|--:|--:|")
    if "none" in runs:
        print(
            f"| no plugin (`none`) | – | – | – | {fmt(rate('none'), '.0f')} | – "
            f"| {fmt(none_cpu, '.2f')} | – |"
        )
    for title, transform in TRANSFORMS:
        base_us = us("native", transform)
        base_rate = rate(f"native_{transform}")
        for label, build, _ in ROWS:
            if build in LANGUAGES and transform != "solarize":
                continue
            variant = f"{build}_{transform}"
            u = us(build, transform)
            r = rate(variant)
            c = cpu(variant)
            if u is None and r is None:
                warnings.append(f"no results for {variant}")
                continue
            ratio_us = None if u is None or not base_us else u / base_us
            ratio_t = None if r is None or not base_rate else base_rate / r
            over = None if c is None or none_cpu is None else c - none_cpu
            print(
                f"| {label} | {title} | {fmt(u, '.1f')} | {fmt(ratio_us, '.2f', '×')} "
                f"| {fmt(r, '.0f')} | {fmt(ratio_t, '.2f', '×')} | {fmt(c, '.2f')} "
                f"| {fmt(over, '+.2f')} |"
            )
            # The paths the native variants took: lent and wire as named.
            for run in runs.get(variant, []):
                lent, wire = run.get("lent_calls", 0), run.get("wire_calls", 0)
                if build == "native" and (lent == 0 or wire != 0):
                    warnings.append(f"{variant} round {run['round']}: {lent} lent, {wire} wire calls")
                if build == "nativewire" and lent != 0:
                    warnings.append(f"{variant} round {run['round']}: {lent} lent calls")
    f32 = [(k, v) for k, v in sorted(times.items()) if "_f32_" in k]
    if f32:
        print()
        print("f32 images (criterion, call of 64): " + ", ".join(
            f"`{k.split('/')[-1]}` {v[1] / IMAGES_PER_CALL:.1f} µs/image" for k, v in f32
        ))
    print()
    print(
        f"µs/image: criterion's estimate of `PluginStage::call` on 64 224×224×3 u8 images, "
        f"/ 64 (one thread). images/s, CPU ms/image: the augment pipeline, median of "
        f"{rounds} round(s) (end to end, every core; CPU of the whole process)."
    )
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
