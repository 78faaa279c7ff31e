#!/usr/bin/env bash
# A long prompt end to end on the CPU against the planner (issue 31): for N in QMPI_LENGTHS
# (default 1024 4096) and D in QMPI_KV_DTYPES (bf16 fp8), `qmpi plan --backend cpu --gpus 1
# --max-model-len N+8 --tp 1 --pp 1 --json` predicts rank 0's memory (weights, activations of a
# whole-prompt step, one N+8-token sequence of KV, overhead), then `qmpi batch` prefills an N-token
# prompt (random ids; one JSONL line) in one step and decodes 8 tokens, under /usr/bin/time for its peak RSS and
# wall time. Model: the qwen2.5-0.5b preset in bf16 (random weights, made once). One JSON line per
# run: {"tokens", "kv_dtype", "predicted_bytes", "peak_rss_bytes", "wall"} (wall as time -v prints it).
# Usage: bench/long_context_rss.sh [build dir]; QMPI_THREADS (2), QMPI_BENCH_OUT.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$here/build}"
threads="${QMPI_THREADS:-2}"
lengths="${QMPI_LENGTHS:-1024 4096}"
kv_dtypes="${QMPI_KV_DTYPES:-bf16 fp8}"
model="$here/.cache/models/qwen2.5-0.5b-bf16"
out="${QMPI_BENCH_OUT:-$here/bench/results/long-context-$(date +%Y%m%d).jsonl}"
mkdir -p "$(dirname "$out")"
[[ -f "$model/config.json" ]] ||
  "$build/qmpi" make-model --preset qwen2.5-0.5b --dtype bf16 --out "$model" >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for n in $lengths; do
  # One batch line: 32k ids do not fit one command-line argument (128 KiB).
  /usr/bin/python3 -c "import json, random; r = random.Random($n); print(json.dumps({'id': 'long', 'prompt': [r.randrange(100, 150000) for _ in range($n)], 'max_tokens': 8, 'ignore_eos': True, 'temperature': 0}))" >"$tmp/in.jsonl"
  for kv in $kv_dtypes; do
    len=$((n + 8))
    predicted=$("$build/qmpi" plan --model "$model" --backend cpu --gpus 1 --tp 1 --pp 1 \
      --max-model-len "$len" --max-batched-tokens "$len" --kv-dtype "$kv" --json |
      /usr/bin/python3 -c "import json, sys; print(json.load(sys.stdin)['layout']['biggest_rank']['total_bytes'])")
    /usr/bin/time -v -o "$tmp/time" "$build/qmpi" batch --model "$model" --threads "$threads" \
      --input "$tmp/in.jsonl" --output "$tmp/out.jsonl" --max-model-len "$len" \
      --max-batched-tokens "$len" --kv-dtype "$kv" >/dev/null 2>"$tmp/log"
    grep -q '"finish_reason"' "$tmp/out.jsonl" || { cat "$tmp/log" "$tmp/out.jsonl"; exit 1; }
    rss=$(awk -F': ' '/Maximum resident set size/ {print $2 * 1024}' "$tmp/time")
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$tmp/time")
    echo "{\"tokens\": $n, \"kv_dtype\": \"$kv\", \"predicted_bytes\": $predicted, \"peak_rss_bytes\": $rss, \"wall\": \"$wall\"}" |
      tee -a "$out"
  done
done
