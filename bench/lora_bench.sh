#!/usr/bin/env bash
# LoRA overhead at batch 16 (issue 33): `qmpi batch` decode steps of 16 sequences with no
# adapter, against the same 16 requests spread over 4 distinct adapters (4 sequences each, so
# every step carries four row groups), on a preset (default qwen2.5-0.5b, bf16 weights), 1x1.
# Adapters are `qmpi make-lora` ones: rank 16, all seven projections, f32 (PEFT's usual dtype).
# Each request: 16 prompt tokens, 64 greedy output tokens (ignore_eos), --max-num-seqs 16, so
# nearly every step is a decode of 16 rows; the step time is 16 / output tok/s.
# Writes bench/results/lora-<date>.txt and prints both lines and the overhead.
# Usage: bench/lora_bench.sh [build dir] [preset (qwen2.5-0.5b)] [threads (2)]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
qmpi="${1:-$here/build}/qmpi"
preset="${2:-qwen2.5-0.5b}"
threads="${3:-2}"
model="$here/.cache/models/$preset-bf16"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
out="$here/bench/results/lora-$(date +%Y%m%d).txt"
mkdir -p "$(dirname "$out")"
[[ -f "$model/config.json" ]] ||
  "$qmpi" make-model --preset "$preset" --dtype bf16 --out "$model" >/dev/null
modules=()
for a in 0 1 2 3; do
  "$qmpi" make-lora --model "$model" --out "$work/a$a" --rank 16 --alpha 16 --seed "$a" \
    --targets q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj >/dev/null
  modules+=("a$a=$work/a$a")
done

requests() {  # file, adapters (0: none): 16 greedy requests of 16 random prompt ids
  /usr/bin/python3 - "$@" <<'PY'
import json, random, sys
path, adapters = sys.argv[1], int(sys.argv[2])
rng = random.Random(16)
with open(path, "w") as f:
    for i in range(16):
        line = {"id": f"r{i}", "prompt": [rng.randrange(1000, 150000) for _ in range(16)],
                "max_tokens": 64, "temperature": 0, "ignore_eos": True}
        if adapters:
            line["model"] = f"a{i % adapters}"
        f.write(json.dumps(line) + "\n")
PY
}
run() {  # label, adapters
  requests "$work/in.jsonl" "$2"
  local line
  line=$("$qmpi" batch --model "$model" --input "$work/in.jsonl" --output "$work/out.jsonl" \
         --overwrite --max-num-seqs 16 --max-model-len 256 --threads "$threads" \
         --lora-modules "${modules[@]}" --max-loras 4 2>&1 | grep " ok, " | tail -1)
  echo "$1: $line" | tee -a "$out"
}
echo "# $preset bf16, 1x1, $threads threads, $(date -u +%FT%TZ), host load: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$out"
run base 0
run lora4 4
