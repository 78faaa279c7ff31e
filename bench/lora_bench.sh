#!/usr/bin/env bash
# LoRA overhead at batch 16 (issue 33): the decode step of 16 sequences with no adapter, against
# the same step with the 16 sequences spread over 4 distinct adapters (4 each, so every step
# carries four row groups on every projection), on a preset (default qwen2.5-0.5b, bf16
# weights, --dtype auto), 1x1. Adapters are `qmpi make-lora` ones: rank 16, all seven
# projections, f32 files (PEFT's usual dtype; held in bf16 on the bf16 projections).
# `qmpi bench --batch 16` times the steps once all 16 sequences decode (best of --repeats), the
# two runs back to back, base first (no --lora-modules: what the server does without adapters),
# ROUNDS times (default 3): the host's swing between two runs can exceed the adapters' cost
# (+31% and -14% in two single rounds on 2026-12-04), so the figure is the median of the
# per-round ratios. Appends to bench/results/lora-<date>.txt (a day's runs side by side) and
# prints one line to paste into docs/perf.md.
# Usage: [ROUNDS=3] bench/lora_bench.sh [build dir] [preset (qwen2.5-0.5b)] [threads (2)]
#        [gen-len (32)]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
qmpi="${1:-$here/build}/qmpi"
preset="${2:-qwen2.5-0.5b}"
threads="${3:-2}"
gen="${4:-32}"
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

load() { cut -d' ' -f1-3 /proc/loadavg; }
step_ms() {  # label, extra flags...: the batch-16 step in ms
  local label=$1 json
  shift
  json=$("$qmpi" bench --model "$model" --threads "$threads" --batch 16 --prompt-len 16 \
         --gen-len "$gen" --repeats 2 --no-membw --max-model-len 256 --json "$@" \
         2>"$work/$label.err" | tail -1) || { cat "$work/$label.err" >&2; exit 1; }
  echo "$label: $json" >>"$out"
  /usr/bin/python3 -c 'import json, sys; print("%.1f" % json.loads(sys.argv[1])["batch_step_ms"])' \
    "$json"
}
before=$(load)
echo "# $preset bf16, 1x1, $threads threads, $(date -u +%FT%TZ), load before: $before" >>"$out"
bases=() loras=()
for _ in $(seq 1 "${ROUNDS:-3}"); do
  bases+=("$(step_ms base)")
  loras+=("$(step_ms lora4 --lora-modules "${modules[@]}" --max-loras 4)")
done
# A row of docs/perf.md's tables: | what | figure | host, date |
line=$(/usr/bin/python3 -c '
import statistics, sys
b, l, preset, threads, before, after, day = sys.argv[1:]
b, l = [float(v) for v in b.split()], [float(v) for v in l.split()]
ratios = [y / x for x, y in zip(b, l)]
pairs = ", ".join(f"{y:.1f} vs {x:.1f}" for x, y in zip(b, l))
print(f"| LoRA: batch-16 decode step, 16 sequences over 4 adapters (r 16, all 7 projections) vs "
      f"no adapter, {preset} bf16, {threads} threads | {pairs} ms: median "
      f"{100 * (statistics.median(ratios) - 1):+.1f}% | load {before} -> {after}, {day} "
      f"(`bench/lora_bench.sh`, {len(ratios)} rounds) |")
' "${bases[*]}" "${loras[*]}" "$preset" "$threads" "$before" "$(load)" "$(date -u +%F)")
echo "$line" | tee -a "$out"
