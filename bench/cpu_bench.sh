#!/usr/bin/env bash
# CPU throughput of the qwen2.5-0.5b preset (random weights, real shape), on one host in one
# run, each qmpi figure next to a plain STREAM-style read (bench/stream_read.c, built by
# bench/stream_read.sh with the system compiler) measured just before it:
#   - decode at batch 1 and 16 (step time, and the 16-sequence step over the 1-sequence step),
#   - prefill of 128 and 1024 tokens,
#   for bf16 weights with --dtype auto (bf16 activations) and float32 (exact), and f32 weights,
#   with QMPI_THREADS threads (default 2) on one rank;
#   - bf16 weights, --dtype auto: the B-sequence step over the 1-sequence step for B = 4, 32, 64;
#   - the qwen3-moe-bench MoE shape (synthetic weights) at batch 1 and 16;
#   - the matmul kernels alone on a decode step's weights (qmpi_kernel_bench: 1, 16 and 128
#     rows of x, exact, each matrix alone and with q/k/v and gate/up grouped as the model calls
#     them; 1 to 128 rows with bf16 activations; int4 AWQ 1 to 64 rows);
#   - then the 2x1 and 1x2 layouts (one thread per rank) with the communication share.
# Writes JSON lines to bench/results/cpu-<date>.jsonl and prints a table.
# Usage: bench/cpu_bench.sh [build dir]. QMPI_BENCH_ARGS adds flags to every qmpi bench run
# (e.g. --kv-dtype f32); QMPI_PRESET=tiny runs the whole script in seconds (a smoke test);
# QMPI_STREAM_MIB sizes the STREAM read (2048); QMPI_BENCH_OUT names the JSON-lines file. On a host shared with other work, read the
# ratios, not the rates.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$here/build}"
qmpi="$build/qmpi"
threads="${QMPI_THREADS:-2}"
preset="${QMPI_PRESET:-qwen2.5-0.5b}"
stream_mib="${QMPI_STREAM_MIB:-2048}"
models="$here/.cache/models"
out="${QMPI_BENCH_OUT:-$here/bench/results/cpu-$(date +%Y%m%d).jsonl}"
mkdir -p "$models" "$(dirname "$out")"
: >"$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for dtype in bf16 f32; do
  m="$models/$preset-$dtype"
  [[ -f "$m/config.json" ]] || "$qmpi" make-model --preset "$preset" --dtype "$dtype" --out "$m" >/dev/null
done
label_json() { sed "s#^{#{\"label\":\"$1\",#"; }
stream() {  # label
  OMP_NUM_THREADS="$threads" "$here/bench/stream_read.sh" "$build" "$stream_mib" 10 |
    label_json "$1" | tee -a "$out"
}
run() {  # label, then the command
  local label=$1; shift
  # shellcheck disable=SC2086
  "$@" ${QMPI_BENCH_ARGS:-} --json 2>/dev/null | tail -1 | label_json "$label" | tee -a "$out"
}
for run_as in "bf16 auto" "bf16 float32" "f32 auto"; do
  read -r dtype act <<<"$run_as"
  m="$models/$preset-$dtype"
  stream "stream $dtype"
  run "$dtype $act decode b1+b16 p128" "$qmpi" bench --model "$m" --threads "$threads" \
    --prompt-len 128 --gen-len 32 --batch 16 --repeats 2 --dtype "$act"
  run "$dtype $act prefill 128" "$qmpi" bench --model "$m" --threads "$threads" \
    --prompt-len 128 --gen-len 2 --repeats 2 --no-membw --dtype "$act"
  run "$dtype $act prefill 1024" "$qmpi" bench --model "$m" --threads "$threads" \
    --prompt-len 1024 --gen-len 2 --repeats 2 --no-membw --dtype "$act"
done
for b in 4 32 64; do
  run "bf16 auto decode b1+b$b p128" "$qmpi" bench --model "$models/$preset-bf16" \
    --threads "$threads" --prompt-len 128 --gen-len 16 --batch "$b" --repeats 2 --no-membw
done
# MoE (issue 34): the qwen3-moe-bench shape (Qwen3-30B-A3B's layer, 8 layers, 64 experts, top 8;
# synthetic weights, 6.4 GB) at batch 1 and 16: a 16-sequence step runs its ~56 active experts
# per layer side by side over the threads, each read once for all its tokens.
moe_cfg="$models/qwen3-moe-bench.json"
/usr/bin/python3 - "$here/tests/fixtures/configs/qwen3-30b-a3b.json" "$moe_cfg" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(num_hidden_layers=8, num_experts=64)
json.dump(c, open(sys.argv[2], "w"))
PY
run "moe bf16 auto decode b1+b16 p32" "$qmpi" bench --synthetic-weights --model-config "$moe_cfg" \
  --threads "$threads" --prompt-len 32 --gen-len 9 --batch 16 --repeats 2 --no-membw
stream "stream kernels"
"$build/qmpi_kernel_bench" --threads "$threads" --rows 1,16,128 --reps 3 | label_json "kernels bf16" | tee -a "$out"
"$build/qmpi_kernel_bench" --threads "$threads" --rows 1,16,128 --reps 3 --fused |
  label_json "kernels bf16 fused" | tee -a "$out"
"$build/qmpi_kernel_bench" --threads "$threads" --rows 1,2,4,8,12,16,32,64,128 --reps 3 \
  --bf16-activations --fused | label_json "kernels bf16 bf16-act fused" | tee -a "$out"
"$build/qmpi_kernel_bench" --threads "$threads" --rows 1,2,4,8,16,32,64 --reps 3 --int4 awq |
  label_json "kernels int4 awq" | tee -a "$out"
m="$models/$preset-bf16"
common=(--prompt-len 128 --gen-len 32 --repeats 2 --no-membw)
run "bf16 2x1 1t/rank" mpirun -np 2 -x OMP_NUM_THREADS=1 "$qmpi" bench --model "$m" --tp 2 --threads 1 "${common[@]}"
run "bf16 1x2 1t/rank" mpirun -np 2 -x OMP_NUM_THREADS=1 "$qmpi" bench --model "$m" --pp 2 --threads 1 "${common[@]}"
/usr/bin/python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
stream = None
print(f"{'run':<26}{'prefill tok/s':>14}{'GFLOP/s':>9}{'decode tok/s':>13}{'b16 step/b1':>12}"
      f"{'probe GB/s':>11}{'STREAM GB/s':>12}{'decode/STREAM':>14}")
for r in rows:
    if "stream_read_mib" in r:
        stream = r["median_gb_s"]
        continue
    if "pass_ms_min" in r:
        if "plain_read_gb_per_cpu_s" not in r:  # the int4 rows: CPU time per pass only
            print(f"{r['label'] + ' n=' + str(r['n']):<26}{'':>14}{r['gflops_best']:>9.1f}"
                  f"   cpu ms per pass {r['pass_cpu_ms_min']:.1f}")
            continue
        print(f"{r['label'] + ' n=' + str(r['n']):<26}{'':>14}{r['gflops_best']:>9.1f}{'':>13}{'':>12}"
              f"{r['probe_gb_s_median']:>11.2f}{stream or 0:>12.2f}"
              # the kernels' own plain read of the same bytes, per CPU-second (shared hosts)
              f"{100 * r['weight_gb_per_cpu_s'] / r['plain_read_gb_per_cpu_s']:>9.1f}% cpu")
        continue
    bw = r.get("membw_bytes_per_s", 0) / 1e9
    dec = r["decode_tokens_per_s"]
    frac = (dec * (r["weight_bytes_rank0"] + r.get("kv_bytes_per_token", 0)) / 1e9 / stream
            if stream and bw else 0)  # prefill-only rows (no probe) have no decode to speak of
    ratio = f"{r['batch_step_vs_single']:.2f}x" if "batch_step_vs_single" in r else "-"
    print(f"{r['label']:<26}{r['prefill_tokens_per_s']:>14.1f}{r['prefill_gflops']:>9.1f}{dec:>13.2f}"
          f"{ratio:>12}{bw:>11.2f}{stream or 0:>12.2f}"
          + (f"{100 * frac:>13.1f}%" if frac else f"{'-':>14}"))
PY
