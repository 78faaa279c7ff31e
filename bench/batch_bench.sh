#!/usr/bin/env bash
# Batched throughput of `qmpi batch` on the qwen2.5-0.5b preset (bf16, random weights, real
# shape): N requests of exactly 128 prompt tokens (distinct random ids, so no prefix-cache hits)
# and 128 greedy output tokens (ignore_eos), at 1x1 (2 threads) and at 2x1 and 1x2 (one thread
# per rank, so every layout uses the 2 cores; 1x2 also without micro-batching), next to the
# single-sequence decode rate.
# Then the cost of a decode step against the batch size (1 to 32 sequences, 1x1).
# Writes bench/results/batch-<date>.txt and prints two tables.
# Usage: bench/batch_bench.sh [build dir] [requests (256)] [max-num-seqs (16)]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
qmpi="${1:-$here/build}/qmpi"
n="${2:-256}"
seqs="${3:-16}"
model="$here/.cache/models/qwen2.5-0.5b-bf16"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
out="$here/bench/results/batch-$(date +%Y%m%d).txt"
mkdir -p "$(dirname "$out")"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[[ -f "$model/config.json" ]] || "$qmpi" make-model --preset qwen2.5-0.5b --dtype bf16 --out "$model" >/dev/null

requests() {  # file, count, prompt tokens, output tokens: greedy, distinct random prompts
  /usr/bin/python3 - "$@" <<'PY'
import json, random, sys
path, n, prompt, out = sys.argv[1], *map(int, sys.argv[2:])
rng = random.Random(n * 1000 + prompt)
with open(path, "w") as f:
    for i in range(n):
        f.write(json.dumps({"id": f"r{i}", "prompt": [rng.randrange(1000, 150000) for _ in range(prompt)],
                            "max_tokens": out, "temperature": 0, "ignore_eos": True}) + "\n")
PY
}
requests "$work/in.jsonl" "$n" 128 128

single=$("$qmpi" bench --model "$model" --threads 2 --prompt-len 128 --gen-len 64 --repeats 2 \
         --no-membw --json 2>/dev/null | tail -1)
echo "single sequence 1x1 2t: $single" | tee "$out"
common=(batch --model "$model" --input "$work/in.jsonl" --overwrite --max-num-seqs "$seqs"
        --max-model-len 512)
run() {  # label, qmpi flags, then the launcher (none for one rank)
  local label=$1 flags=$2 line
  shift 2
  # shellcheck disable=SC2086
  line=$("$@" "$qmpi" "${common[@]}" $flags --output "$work/$label.jsonl" 2>&1 | grep " ok, " | tail -1)
  echo "$label: $line" | tee -a "$out"
}
run 1x1-2t "--threads 2"
run 2x1-1t "--tp 2 --threads 1" mpirun -np 2 -x OMP_NUM_THREADS=1
run 1x2-1t "--pp 2 --threads 1" mpirun -np 2 -x OMP_NUM_THREADS=1
run 1x2-1t-mb1 "--pp 2 --threads 1 --micro-batches 1" mpirun -np 2 -x OMP_NUM_THREADS=1

# Step cost against batch size at 1x1: 4 x B requests of 16 prompt tokens and 64 output tokens
# at --max-num-seqs B, so nearly every step is a decode of B sequences.
for b in 1 2 4 8 16 32; do
  requests "$work/sweep.jsonl" "$((4 * b))" 16 64
  line=$("$qmpi" batch --model "$model" --input "$work/sweep.jsonl" --output "$work/sweep-out.jsonl" \
         --overwrite --max-num-seqs "$b" --max-model-len 512 --threads 2 2>&1 | grep " ok, " | tail -1)
  echo "sweep-$b: $line" | tee -a "$out"
done

/usr/bin/python3 - "$out" <<'PY'
import json, re, sys
lines = open(sys.argv[1]).read().splitlines()
single = json.loads(lines[0].split(": ", 1)[1])
print(f"\n{'run':<12}{'out tok/s':>10}{'in tok/s':>10}{'wall s':>8}{'x single':>9}  pipeline")
print(f"{'single':<12}{single['decode_tokens_per_s']:>10.1f}{'':>10}{'':>8}{1.0:>9.1f}")
for l in lines[1:]:
    label, rest = l.split(": ", 1)
    m = re.search(r"wall ([\d.]+) s \| ([\d.]+) tok/s in, ([\d.]+) tok/s out", rest)
    f = re.search(r"up to (\d+) micro-batches", rest)
    if label.startswith("sweep-"):
        continue
    if not m:
        print(f"{label:<12} (no summary: {rest[:80]})")
        continue
    wall, tin, tout = map(float, m.groups())
    print(f"{label:<12}{tout:>10.1f}{tin:>10.1f}{wall:>8.1f}"
          f"{tout / single['decode_tokens_per_s']:>9.1f}  {f.group(1) if f else '?'} in flight")
print(f"\n{'batch':>6}{'out tok/s':>10}{'ms/step':>9}{'step vs batch 1':>17}")
base = None
for l in lines[1:]:
    label, rest = l.split(": ", 1)
    if not label.startswith("sweep-"):
        continue
    b = int(label[6:])
    m = re.search(r"([\d.]+) tok/s out", rest)
    if not m:
        continue
    step_ms = 1e3 * b / float(m.group(1))
    base = base or step_ms
    print(f"{b:>6}{float(m.group(1)):>10.1f}{step_ms:>9.1f}{step_ms / base:>16.2f}x")
PY
