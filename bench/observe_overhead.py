#!/usr/bin/env python3
"""What observing a run costs (issue 27): the pipelines bench binary (core/benches/pipelines.rs)
with OBSERVE=off, timeline and trace, alternating in one session, and optionally the binary of
a commit before observing existed ("before"), on the same files; medians of the rounds.

    cargo bench -p sluice-core --bench pipelines --no-run     # prints the binary's path
    python3 bench/observe_overhead.py BIN DIR [--before OLD_BIN] [--rounds 5] [--epochs 3] [--pipelines parse augment]

Prints one JSON line per run, then a table: records/s per setting, and each setting's
throughput relative to `off` (and `off` relative to `before`).
"""
import argparse
import json
import os
import statistics
import subprocess

ap = argparse.ArgumentParser()
ap.add_argument("bin")
ap.add_argument("dir")
ap.add_argument("--before")
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--pipelines", nargs="+", default=["parse", "augment"])
ap.add_argument("--epochs", type=int, default=1,
                help="EPOCHS for the bench binary: the last of N epochs is timed (steady state)")
a = ap.parse_args()

settings = [("off", a.bin, "off"), ("timeline", a.bin, "timeline"), ("trace", a.bin, "trace")]
if a.before:
    settings.insert(0, ("before", a.before, None))

results = {}
for r in range(a.rounds):
    order = settings if r % 2 == 0 else list(reversed(settings))
    for pipeline in a.pipelines:
        for name, binary, observe in order:
            env = dict(os.environ)
            env.pop("OBSERVE", None)
            env["EPOCHS"] = str(a.epochs)
            if observe is not None:
                env["OBSERVE"] = observe
            out = subprocess.run([binary, a.dir, pipeline], env=env, capture_output=True,
                                 text=True, check=True).stdout
            line = [l for l in out.splitlines() if l.startswith("{")][-1]
            rps = json.loads(line)["records_per_s"]
            results.setdefault((pipeline, name), []).append(rps)
            print(json.dumps({"round": r, "pipeline": pipeline, "setting": name,
                              "records_per_s": rps}), flush=True)

print()
print(f"{'pipeline':<10} {'setting':<9} {'median rec/s':>13} {'vs off':>8}  runs")
for pipeline in a.pipelines:
    off = statistics.median(results[(pipeline, "off")])
    for name, _, _ in settings:
        runs = results[(pipeline, name)]
        med = statistics.median(runs)
        print(f"{pipeline:<10} {name:<9} {med:>13,.0f} {med / off:>8.3f}  "
              + ", ".join(f"{x:,.0f}" for x in runs))
