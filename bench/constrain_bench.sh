#!/usr/bin/env bash
# Structured output's cost: the rank-0 micro-benchmark (qmpi_constrain_bench: compile times,
# mask time per token per sequence with the real tokenizer), then decode tokens/s of `qmpi
# batch` with and without a JSON-schema constraint at batch 1 and 16 on the qwen2.5-0.5b preset
# (bf16, random weights, 2 threads): 16-token prompts, 64 output tokens each (ignore_eos, seeded
# temperature 1; the schema, an array of strings, never completes in 64 tokens, so both runs
# generate the same number of tokens). Writes bench/results/constrain-<date>.txt.
# Usage: bench/constrain_bench.sh [build dir]
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_setup constrain "${1:-}"

{ echo "host load: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
  "$build/qmpi_constrain_bench" "$here/.cache/qwen-tokenizer" 16 200; } | tee "$out"

requests() {  # file, count, constrained (0/1)
  /usr/bin/python3 - "$@" <<'PY'
import json, sys
path, n, constrained = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
with open(path, "w") as f:
    for i in range(n):
        r = {"id": f"r{i}", "prompt": [1000 + 7 * i + k for k in range(16)], "max_tokens": 64,
             "temperature": 1.0, "seed": i, "ignore_eos": True}
        if constrained:
            r["guided_json"] = {"type": "array", "items": {"type": "string"}}
        f.write(json.dumps(r) + "\n")
PY
}
for b in 1 16; do
  for c in 0 1; do
    requests "$work/in.jsonl" "$b" "$c"
    line=$("$qmpi" batch --model "$model" --input "$work/in.jsonl" --output "$work/out.jsonl" \
           --overwrite --max-num-seqs "$b" --max-model-len 512 --threads 2 2>&1 | grep " ok, " | tail -1)
    echo "batch $b $([[ $c == 1 ]] && echo constrained || echo free): $line" | tee -a "$out"
  done
done
