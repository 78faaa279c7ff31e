#!/usr/bin/env bash
# Decode tokens/s of the three ways to run 6 ranks (issue 15): --tp 6, --tp 2 --pp 3 and
# --dp 2 --tp 3, on the qwen2.5-0.5b preset (bf16, random weights, real shape), one thread per
# rank, oversubscribed. Batch 1: `qmpi bench` decode (a single sequence runs on one replica, so
# DP 2 x TP 3 at batch 1 is --tp 3 on 3 ranks). 32 concurrent: `qmpi batch` of 32 requests of 32
# prompt and 64 greedy output tokens (ignore_eos) at --max-num-seqs 32, generated tokens over
# the wall time (prefill included).
# Writes bench/results/dp-layouts-<date>.txt.
# Usage: bench/dp_layouts_bench.sh [build dir]
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_setup dp-layouts "${1:-}"
: >"$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
mpi=(mpirun --oversubscribe -x OMP_NUM_THREADS)

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out"
for layout in "6|--tp 6" "6|--tp 2 --pp 3" "3|--tp 3"; do
  np=${layout%%|*} flags=${layout#*|}
  # shellcheck disable=SC2086
  line=$("${mpi[@]}" -np "$np" "$qmpi" bench --model "$model" $flags --threads 1 --prompt-len 32 \
         --gen-len 32 --repeats 1 --no-membw --json 2>/dev/null | tail -1)
  echo "batch1 $flags: $line" | tee -a "$out"
done

/usr/bin/python3 - "$work/in.jsonl" <<'PY'
import json, random, sys
rng = random.Random(32)
with open(sys.argv[1], "w") as f:
    for i in range(32):
        f.write(json.dumps({"id": f"r{i}", "prompt": [rng.randrange(1000, 150000) for _ in range(32)],
                            "max_tokens": 64, "temperature": 0, "ignore_eos": True}) + "\n")
PY
for flags in "--tp 6" "--tp 2 --pp 3" "--dp 2 --tp 3"; do
  # shellcheck disable=SC2086
  line=$("${mpi[@]}" -np 6 "$qmpi" batch --model "$model" --input "$work/in.jsonl" \
         --output "$work/out.jsonl" --overwrite --max-num-seqs 32 --max-model-len 256 --threads 1 \
         $flags 2>&1 | grep " ok, " | tail -1)
  echo "batch32 $flags: $line" | tee -a "$out"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out"
