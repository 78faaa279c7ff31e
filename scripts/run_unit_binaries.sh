#!/usr/bin/env bash
# Runs gtest binaries of a build folder whole, two at a time, the longest first: one process per
# binary instead of ctest's one per test (a sanitizer build pays for each process start, and the
# tokenizer tests would load the Qwen tokenizer once each). The slowest binaries run as two
# gtest shards, so the two slots end together. Each run's output goes to
# BUILD/unit-logs/NAME[.SHARD].log and is printed when it fails; a line per run says how long it
# took. Exits 1 if any fails or runs past QMPI_UNIT_TIMEOUT seconds (default 1800).
#   scripts/run_unit_binaries.sh BUILD test_text test_serve ...
# The environment is the unit tests' under ctest (the tests/ build folder, OMP_NUM_THREADS=2
# unless QMPI_UNIT_OMP_THREADS says otherwise); sanitizer options pass through.
set -euo pipefail
build=$1
shift
logs="$build/unit-logs"
mkdir -p "$logs"
# The slowest first (measured under ctest, 2026-12-02); NAME:N runs as N shards.
order=(test_kernels:2 test_text:2 test_serve test_model test_parallel test_engine test_doctor
  test_io test_plan test_batch test_requests test_constrain test_core test_app)
runs=()
for entry in "${order[@]}"; do
  name=${entry%%:*} shards=1
  [[ $entry == *:* ]] && shards=${entry#*:}
  [[ " $* " == *" $name "* ]] || continue
  for ((i = 0; i < shards; i++)); do runs+=("$name $i $shards"); done
done
for name in "$@"; do [[ " ${runs[*]} " == *"$name "* ]] || runs+=("$name 0 1"); done

run_one() {
  local name=$1 shard=$2 shards=$3 log t0 rc=0
  log="$logs/$name$( ((shards > 1)) && echo ".$shard").log"
  t0=$(date +%s)
  (cd "$build/tests" && OMP_NUM_THREADS="${QMPI_UNIT_OMP_THREADS:-2}" GTEST_TOTAL_SHARDS=$shards \
    GTEST_SHARD_INDEX=$shard timeout "${QMPI_UNIT_TIMEOUT:-1800}" "./$name" --gtest_brief=1 \
    --gtest_color=no) >"$log" 2>&1 || rc=$?
  local took=$(($(date +%s) - t0)) what="$name" summary
  ((shards > 1)) && what+=" (shard $((shard + 1))/$shards)"
  summary=$(grep -E '^\[  (PASSED|FAILED)  \]' "$log" | head -2 | tr '\n' ' ')
  if ((rc != 0)); then
    ((rc == 124)) && summary+=" timed out"
    echo "---- $what: FAILED (exit $rc, $took s); its output ($log):"
    tail -n 200 "$log"
    echo "unit: $what FAILED in $took s $summary"
    return 1
  fi
  echo "unit: $what ok in $took s $summary"
}
export -f run_one
export build logs
printf '%s\n' "${runs[@]}" | xargs -P 2 -L 1 bash -c 'run_one "$@"' _ ||
  { echo "unit: a run failed (above)"; exit 1; }
