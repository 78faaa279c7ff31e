#!/usr/bin/env bash
# CPU throughput of the qwen2.5-0.5b preset (random weights, real shape): prefill and decode
# tokens/s for bf16 and f32 weights on 1 and 2 threads, then the 2x1 and 1x2 layouts, with the
# communication share of step time. Writes one JSON line per run to bench/results/cpu-<date>.jsonl
# and prints a table. Usage: bench/cpu_bench.sh [build dir]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
qmpi="${1:-$here/build}/qmpi"
models="$here/.cache/models"
out="$here/bench/results/cpu-$(date +%Y%m%d).jsonl"
mkdir -p "$models" "$(dirname "$out")"
: >"$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for dtype in bf16 f32; do
  m="$models/qwen2.5-0.5b-$dtype"
  [[ -f "$m/config.json" ]] || "$qmpi" make-model --preset qwen2.5-0.5b --dtype "$dtype" --out "$m" >/dev/null
done
run() {  # label, then the command
  local label=$1; shift
  "$@" --json 2>/dev/null | tail -1 | sed "s/^{/{\"label\":\"$label\",/" | tee -a "$out"
}
common=(--prompt-len 128 --gen-len 64 --repeats 3)
for dtype in bf16 f32; do
  m="$models/qwen2.5-0.5b-$dtype"
  for t in 1 2; do
    run "$dtype 1x1 ${t}t" "$qmpi" bench --model "$m" --threads "$t" "${common[@]}"
  done
done
m="$models/qwen2.5-0.5b-bf16"
run "bf16 2x1 1t/rank" mpirun -np 2 -x OMP_NUM_THREADS=1 "$qmpi" bench --model "$m" --tp 2 --threads 1 --no-membw "${common[@]}"
run "bf16 1x2 1t/rank" mpirun -np 2 -x OMP_NUM_THREADS=1 "$qmpi" bench --model "$m" --pp 2 --threads 1 --no-membw "${common[@]}"
/usr/bin/python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(f"{'run':<20}{'prefill tok/s':>14}{'decode tok/s':>14}{'comm %':>8}{'decode/membw':>14}")
for r in rows:
    bw = f"{100*r['decode_fraction_of_membw']:.1f}%" if r.get('membw_bytes_per_s') else "-"
    print(f"{r['label']:<20}{r['prefill_tokens_per_s']:>14.1f}{r['decode_tokens_per_s']:>14.2f}"
          f"{100*r['comm_fraction_of_step']:>8.1f}{bw:>14}")
PY
