#!/usr/bin/env bash
# The per-language cost table (issue 23): the same transforms (gaussian_noise σ 0.05 and
# gray_solarize 0.2/0.2 on 224×224×3 u8 images) as native Rust (the lent path of ABI
# version 2, and the wire path of version 1), WASM core-ABI Rust, WASM component Rust, and
# components written in C, Zig, JavaScript and Python (gray_solarize only: gaussian_noise
# exists in Rust only), in one run:
#
#   1. criterion, plugin-wasm's wasm_calls bench, groups plugin_64x224 and languages_64x224:
#      PluginStage::call on 64 images -> µs per image (kernel + boundary, one thread);
#   2. plugin-wasm's augment_plugin bench with every variant, in alternating rounds: the
#      augment pipeline of bench/tfdata_baseline.py with the plugin on the u8 crops, end
#      to end -> images/s and CPU ms per image (every thread);
#   3. the table (bench/plugin_costs_table.py), printed and written to OUT_DIR/table.md.
#
# Usage: bench/plugin_costs.sh OUT_DIR [DATA_DIR]
#
#   OUT_DIR   where the outputs go (created): criterion.txt (criterion's output),
#             augment.jsonl (one JSON line per pipeline run), augment.log (the pipelines'
#             stats and each variant's median and best), meta.txt (machine, commit,
#             settings), table.md
#   DATA_DIR  the JPEG TFRecord shards, train.tfrecord-* (default /work/bench-data;
#             make them with `python bench/tfdata_baseline.py gen DATA_DIR`)
#
# Environment:
#   ROUNDS          rounds of the augment bench (default 11; each round runs every variant
#                   once, in turn)
#   VARIANTS        the augment bench's variants (default: all, below)
#   CRITERION_ARGS  extra arguments for criterion (default none; e.g. `--quick`, or
#                   `--warm-up-time 1 --measurement-time 2` for a smoke run)
#   SKIP_CRITERION=1, SKIP_AUGMENT=1   skip a part (the table shows what there is)
#   CARGO_TARGET_DIR is honoured.
#
# The language components are built by the benches (sluice-plugin-build, into
# target/plugin-guests/, only when a source is newer than the component): their toolchains
# must be installed when they are not built yet (.ci/run; clang, componentize-py, ziglang,
# componentize-js via $SLUICE_COMPONENTIZE_JS ...). Run it on an idle machine: on 2 cores
# the full run takes about 13 minutes (build excluded): criterion about 3, each augment
# round about 55 s, of which the JavaScript and Python variants take 40 (some 12 and 8.5 ms
# per image against 0.04 natively; every other variant runs 4096 images in 1 to 2 s).
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
    exit 2
fi
OUT=$(realpath -m "$1")
DATA=$(realpath -m "${2:-/work/bench-data}")
ROUNDS=${ROUNDS:-11}
VARIANTS=${VARIANTS:-"none native_noise nativewire_noise wasm_noise component_noise native_solarize nativewire_solarize wasm_solarize component_solarize c_solarize zig_solarize js_solarize python_solarize"}
CRITERION_ARGS=${CRITERION_ARGS:-}
FILTER='plugin_64x224|languages_64x224'
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "error: ROUNDS must be a positive integer" >&2; exit 2; }
if ! compgen -G "$DATA/train.tfrecord-*" >/dev/null; then
    echo "error: no $DATA/train.tfrecord-* (python bench/tfdata_baseline.py gen $DATA)" >&2
    exit 2
fi
mkdir -p "$OUT"
cd "$REPO"

# shellcheck disable=SC2086  # VARIANTS and CRITERION_ARGS are word lists
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo ' (modified tree)')"
    echo "machine: $(uname -srm), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ //')"
    echo "rustc: $(rustc -V)"
    echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
    echo "data: $DATA ($(ls "$DATA"/train.tfrecord-* | wc -l) shards, $(du -sh "$DATA" | cut -f1))"
    echo "criterion: cargo bench -p sluice-plugin-wasm --bench wasm_calls -- --noplot --color never $CRITERION_ARGS '$FILTER'"
    echo "augment: ROUNDS=$ROUNDS cargo bench -p sluice-plugin-wasm --bench augment_plugin -- $DATA $VARIANTS"
} >"$OUT/meta.txt"
cat "$OUT/meta.txt"

echo "== building the benches" >&2
cargo bench -p sluice-plugin-wasm --bench wasm_calls --bench augment_plugin --no-run

# Warm page cache: every pipeline run reads the same files.
cat "$DATA"/train.tfrecord-* >/dev/null

started=$SECONDS
if [[ ${SKIP_CRITERION:-0} != 1 ]]; then
    echo "== criterion: $FILTER" >&2
    # shellcheck disable=SC2086
    cargo bench -p sluice-plugin-wasm --bench wasm_calls -- --noplot --color never \
        $CRITERION_ARGS "$FILTER" | tee "$OUT/criterion.txt"
    echo "criterion: $((SECONDS - started)) s" | tee -a "$OUT/meta.txt"
fi

if [[ ${SKIP_AUGMENT:-0} != 1 ]]; then
    echo "== augment pipeline, $ROUNDS round(s): $VARIANTS" >&2
    t=$SECONDS
    # shellcheck disable=SC2086
    ROUNDS=$ROUNDS cargo bench -p sluice-plugin-wasm --bench augment_plugin -- "$DATA" $VARIANTS \
        2>"$OUT/augment.log" | tee "$OUT/augment.jsonl"
    grep -E '^[a-z_]+: median' "$OUT/augment.log" >&2 || true
    echo "augment: $((SECONDS - t)) s" | tee -a "$OUT/meta.txt"
fi
echo "total: $((SECONDS - started)) s" | tee -a "$OUT/meta.txt"

python3 "$REPO/bench/plugin_costs_table.py" "$OUT" | tee "$OUT/table.md"
