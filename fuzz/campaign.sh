#!/usr/bin/env bash
# A fuzzing campaign: each target named (default: all) runs until 10 M executions or
# 30 minutes, whichever comes first (issue 26's budget), two targets at a time (one per
# core). New inputs go to the committed corpus (fuzz/corpus/<target>/: campaigns
# accumulate; minimize with `cargo +nightly fuzz cmin` before committing), findings to
# fuzz/artifacts/<target>/, libFuzzer's output to fuzz/campaign-logs/<target>.log, whose
# last lines (`stat::number_of_executed_units`, `cov:`/`ft:`) go into RELIABILITY.md.
#
#   cd fuzz && cargo +nightly fuzz build -O && ./campaign.sh [target ...]
#
# Environment: JOBS (targets at a time, default 2), SECONDS_PER_TARGET (default 1800),
# RUNS (default 10000000).
set -uo pipefail
cd "$(dirname "$0")"
jobs=${JOBS:-2}
seconds=${SECONDS_PER_TARGET:-1800}
runs=${RUNS:-10000000}
bin=target/x86_64-unknown-linux-gnu/release
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cargo +nightly fuzz list)
fi
mkdir -p campaign-logs
# The sanitizer build links the same Rust code twice into some targets; ODR checks
# would stop them at start-up (as `cargo fuzz run` disables them too).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_odr_violation=0}

run_one() {
  local target=$1 dict=()
  if [ -f "dict/$target.dict" ]; then dict=("-dict=dict/$target.dict"); fi
  mkdir -p "corpus/$target" "artifacts/$target"
  local start=$SECONDS
  "$bin/$target" "corpus/$target" -artifact_prefix="artifacts/$target/" \
    -runs="$runs" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 "${dict[@]}" >"campaign-logs/$target.log" 2>&1
  local rc=$?
  echo "$target: exit $rc after $((SECONDS - start)) s: $(grep -E '^#[0-9]+[[:space:]]' "campaign-logs/$target.log" | tail -n 1)"
  grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "campaign-logs/$target.log" | sed "s/^/  $target /"
}

running=0
for target in "${targets[@]}"; do
  if [ "$running" -ge "$jobs" ]; then wait -n; running=$((running - 1)); fi
  run_one "$target" &
  running=$((running + 1))
done
wait
