#!/usr/bin/env bash
# Decode tokens/s against context length and KV cache dtype (issue 17): `qmpi bench --context N
# --kv-dtype D` at batch 1 for N in QMPI_CONTEXTS (128 1024 4096 16384) and D in QMPI_KV_DTYPES
# (f32 bf16 fp8), on the qwen2.5-0.5b preset (bf16 random weights) with QMPI_THREADS threads (2);
# then bench/plot.py draws docs/img/decode-context.png (QMPI_PLOT) from the JSON lines.
# --context puts N - 128 shared tokens before every prompt: prefilled once per run, then read from
# the prefix cache by every timed request (see qmpi bench --help); on a CPU the 16k point's one
# prefill takes minutes.
# QMPI_BASELINE=/path/to/qmpi adds an older build's runs (float32 KV, real prefill of an N-token
# prompt, N up to QMPI_BASELINE_MAX = 1024), each right after the new build's runs at that N.
# QMPI_BATCH=16 decodes that many sequences together, each with the context (issue 34: whether
# attention over 16 x 1k-4k contexts, 0.2-0.8 GB of bf16 K/V per step, keeps pace with the
# weights); the JSON then carries the B-sequence step beside the 1-sequence one.
# Usage: bench/context_bench.sh [build dir]; writes bench/results/context-<date>.jsonl
# (QMPI_BENCH_OUT). On a shared host compare neighbouring rows, not absolute rates.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$here/build}"
threads="${QMPI_THREADS:-2}"
contexts="${QMPI_CONTEXTS:-128 1024 4096 16384}"
kv_dtypes="${QMPI_KV_DTYPES:-f32 bf16 fp8}"
batch="${QMPI_BATCH:-1}"
baseline="${QMPI_BASELINE:-}"
baseline_max="${QMPI_BASELINE_MAX:-1024}"
model="$here/.cache/models/qwen2.5-0.5b-bf16"
out="${QMPI_BENCH_OUT:-$here/bench/results/context-$(date +%Y%m%d).jsonl}"
plot="${QMPI_PLOT:-$here/docs/img/decode-context.png}"
mkdir -p "$(dirname "$out")" "$(dirname "$plot")"
: >"$out"
[[ -f "$model/config.json" ]] ||
  "$build/qmpi" make-model --preset qwen2.5-0.5b --dtype bf16 --out "$model" >/dev/null
run() {  # label, then the qmpi binary and its bench options
  local label=$1 bin=$2; shift 2
  "$bin" bench --model "$model" --threads "$threads" --gen-len 16 --repeats 2 --no-membw \
    "$@" --json 2>/dev/null | tail -1 | sed "s#^{#{\"label\":\"$label\",#" | tee -a "$out"
}
for n in $contexts; do
  for kv in $kv_dtypes; do
    run "new" "$build/qmpi" --prompt-len 128 --context "$n" --kv-dtype "$kv" --batch "$batch"
  done
  if [[ -n "$baseline" && "$n" -le "$baseline_max" ]]; then
    run "main" "$baseline" --prompt-len "$n"
  fi
done
/usr/bin/python3 "$here/bench/plot.py" "$out" --out "$plot" \
  --title "qwen2.5-0.5b bf16, $threads threads, batch $batch"
