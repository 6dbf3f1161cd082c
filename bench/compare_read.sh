#!/usr/bin/env bash
# Reading TFRecord shards: tf.data's `read` pipeline next to `sluice verify`, on the same files.
#
# Usage: bench/compare_read.sh DATA_DIR VENV_PYTHON [RUNS]
#
#   DATA_DIR     the shards (train.tfrecord-*); generated with TensorFlow if there are none
#                (16 shards x 256 JPEG Examples, ~79 MB). Keep it outside the repository.
#   VENV_PYTHON  the python of a venv with tensorflow-cpu (e.g. /work/.venv-tf/bin/python)
#   RUNS         runs of each side (default 5)
#
# Environment: TFDATA_BASELINE, the tf.data script (default bench/tfdata_baseline.py in this
# repository); CARGO_TARGET_DIR is honoured.
#
# Both sides read warm page cache (the files are read once first). What is measured:
#
#   tf.data  `tfdata_baseline.py run DATA read`: interleave(TFRecordDataset, cycle 4, AUTOTUNE)
#            -> repeat 10 -> batch 256, iterated in Python. Its own clock covers the iteration
#            only (10 passes over the data; MB/s counts record bytes). The process time adds
#            Python and TensorFlow start-up.
#   sluice   `sluice verify 'DATA/train.tfrecord-*' --json`: every record of every file read
#            once, both CRCs checked, files in parallel. Its own clock covers glob expansion to
#            the last record (MB/s counts file bytes: records + 16 bytes of framing each). The
#            process is timed whole with hyperfine if installed (at least 10 runs), else with
#            /usr/bin/time (10 ms resolution).
#
# The in-process MB/s compare throughput; the process times do not compare the same work
# (tf.data reads the data 10 times), hence "process MB/s" = bytes read / process seconds.
set -euo pipefail

if [[ $# -lt 2 || $# -gt 3 ]]; then
    sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
DATA=$(realpath -m "$1")
PY=$2
RUNS=${3:-5}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BASELINE=${TFDATA_BASELINE:-$REPO/bench/tfdata_baseline.py}
TARGET=${CARGO_TARGET_DIR:-$REPO/target}
SLUICE=$TARGET/release/sluice

[[ -x $PY ]] || { echo "error: $PY is not an executable python" >&2; exit 2; }
[[ -f $BASELINE ]] || { echo "error: $BASELINE not found (set TFDATA_BASELINE)" >&2; exit 2; }
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || { echo "error: RUNS must be a positive integer" >&2; exit 2; }
case $DATA/ in
    "$REPO"/*) echo "error: keep the data outside the repository ($REPO)" >&2; exit 2 ;;
esac

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

shards() { compgen -G "$DATA/train.tfrecord-*" || true; }

if [[ -z $(shards) ]]; then
    echo "== generating $DATA with TensorFlow (once; ~30 s)" >&2
    "$PY" "$BASELINE" gen "$DATA" > "$TMP/gen.out" 2> "$TMP/gen.err" || {
        cat "$TMP/gen.err" >&2
        exit 1
    }
    cat "$TMP/gen.out" >&2
fi

echo "== building sluice (release)" >&2
(cd "$REPO" && cargo build --release --quiet -p sluice-cli)
[[ -x $SLUICE ]] || { echo "error: $SLUICE was not built" >&2; exit 1; }

# Warm the page cache for both sides.
shards | while IFS= read -r f; do cat "$f"; done > /dev/null

echo "== tf.data read pipeline, $RUNS runs" >&2
for i in $(seq "$RUNS"); do
    /usr/bin/time -f %e -o "$TMP/tf.time.$i" \
        "$PY" "$BASELINE" run "$DATA" read > "$TMP/tf.json.$i" 2> "$TMP/tf.err.$i" || {
        cat "$TMP/tf.err.$i" >&2
        exit 1
    }
done

echo "== sluice verify, $RUNS runs" >&2
GLOB="$DATA/train.tfrecord-*"
"$SLUICE" verify "$GLOB" --json > /dev/null  # warm-up
for i in $(seq "$RUNS"); do
    /usr/bin/time -f %e -o "$TMP/sl.time.$i" "$SLUICE" verify "$GLOB" --json > "$TMP/sl.json.$i"
done
TIMER=time
if command -v hyperfine > /dev/null; then
    # Finer process times than /usr/bin/time's 10 ms. -N: no shell; sluice expands the glob.
    hyperfine -N --warmup 2 --runs "$((RUNS < 10 ? 10 : RUNS))" --style basic \
        --export-json "$TMP/hyperfine.json" "'$SLUICE' verify '$GLOB' --json" >&2
    TIMER=hyperfine
fi

"$PY" - "$TMP" "$RUNS" "$TIMER" "$(nproc)" <<'EOF'
import glob, json, statistics, sys

tmp, runs, timer, cpus = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]

def load(pattern):
    files = sorted(glob.glob(f"{tmp}/{pattern}"), key=lambda p: int(p.rsplit(".", 1)[1]))
    return [json.loads(open(p).read()) for p in files]

tf = load("tf.json.*")
tf_wall = [float(open(f"{tmp}/tf.time.{i}").read().split()[-1]) for i in range(1, runs + 1)]
sl = load("sl.json.*")
if timer == "hyperfine":
    sl_wall = json.load(open(f"{tmp}/hyperfine.json"))["results"][0]["times"]
else:
    sl_wall = [float(open(f"{tmp}/sl.time.{i}").read().split()[-1]) for i in range(1, runs + 1)]

tf_ep = [r["epochs"][-1] for r in tf]
tf_bytes = [e["mb_per_s"] * 1e6 * e["seconds"] for e in tf_ep]
tf_mb = statistics.median(tf_bytes) / 1e6
sl_mb = sl[0]["bytes"] / 1e6
for r in sl:
    if r["damaged_files"]:
        sys.exit(f"sluice verify reported {r['damaged_files']} damaged files")

def best_med(xs, best=max):
    return best(xs), statistics.median(xs)

rows = [
    ("records read", f"{tf_ep[0]['records']} (10 passes)", f"{sl[0]['records']} (1 pass)"),
    ("MB read", f"{tf_mb:.1f} (record bytes)", f"{sl_mb:.1f} (file bytes)"),
]
def fmt(pair, unit, digits):
    return f"{pair[0]:.{digits}f} / {pair[1]:.{digits}f} {unit}"
rows += [
    ("in-process seconds (best / median)",
     fmt(best_med([e["seconds"] for e in tf_ep], min), "s", 3),
     fmt(best_med([r["seconds"] for r in sl], min), "s", 3)),
    ("in-process MB/s (best / median)",
     fmt(best_med([e["mb_per_s"] for e in tf_ep]), "MB/s", 0),
     fmt(best_med([r["mb_per_s"] for r in sl]), "MB/s", 0)),
    ("in-process records/s (best / median)",
     fmt(best_med([e["records_per_s"] for e in tf_ep]), "rec/s", 0),
     fmt(best_med([r["records"] / r["seconds"] for r in sl]), "rec/s", 0)),
    ("process wall seconds (best / median)",
     fmt(best_med(tf_wall, min), "s", 3), fmt(best_med(sl_wall, min), "s", 3)),
    ("process MB/s (best / median)",
     fmt((tf_mb / min(tf_wall), tf_mb / statistics.median(tf_wall)), "MB/s", 0),
     fmt((sl_mb / min(sl_wall), sl_mb / statistics.median(sl_wall)), "MB/s", 0)),
]
tf_name = tf[0]["system"] + " read"
w0 = max(len(r[0]) for r in rows)
w1 = max(len(r[1]) for r in rows + [("", tf_name)])
print(f"\n{runs} runs each, {cpus} CPUs, page cache warm; process timed with "
      f"{'hyperfine' if timer == 'hyperfine' else '/usr/bin/time'}\n")
print(f"{'':<{w0}}  {tf_name:<{w1}}  sluice verify")
for name, a, b in rows:
    print(f"{name:<{w0}}  {a:<{w1}}  {b}")
EOF
