#!/usr/bin/env bash
# qmpi against llama.cpp on this host, the external baseline issue 34's goals are stated against:
# the same random-weight Qwen2.5-0.5B-shaped bf16 checkpoint (converted byte for byte to GGUF by
# tests/reference/gguf_ref.py), the same prompt length, generated tokens and thread count, one
# engine after the other, alternated ROUNDS times so that both see the same swings of a shared
# VM. A plain STREAM-style read (bench/stream_read.c) opens each round.
#
# llama.cpp is its own llama-bench, built from a pinned source release with native code by
# bench/llama_cpp/build.sh (the engine as its users run it, not a binding). Both engines read
# bf16 weights; llama.cpp keeps an f16 K/V cache, qmpi its default bf16 one. That both run the
# same model is checked by serve_compare.sh (llama-server's greedy tokens against qmpi's logits).
#
# Usage: bench/llama_cpp/compare.sh [build dir]
#   QMPI_THREADS (2), ROUNDS (2), PROMPT_LEN (128), GEN_LEN (32), QMPI_PRESET (qwen2.5-0.5b),
#   QMPI_BENCH_ARGS (extra qmpi bench flags, e.g. --dtype float32), GGUF (another GGUF file for
#   llama.cpp, e.g. a Q4_0 one: compare.sh then names it in the record),
#   QMPI_BENCH_OUT (bench/results/llama-cpp-<date>.jsonl),
#   BATCHES (e.g. 1,16,64: also the decode step of that many sequences together, qmpi bench
#   --batch against llama.cpp's own llama-batched-bench, each sequence with its own prompt; the
#   table gives each engine's step in ms and against its own single-sequence step).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$here/build}"
threads="${QMPI_THREADS:-2}" rounds="${ROUNDS:-2}"
prompt="${PROMPT_LEN:-128}" gen="${GEN_LEN:-32}"
preset="${QMPI_PRESET:-qwen2.5-0.5b}"
batches="${BATCHES:-}"
[[ -z "$batches" || ",$batches," == *,1,* ]] || batches="1,$batches"  # the single step: the ratios' base
out="${QMPI_BENCH_OUT:-$here/bench/results/llama-cpp-$(date +%Y%m%d).jsonl}"
bin="$("$here/bench/llama_cpp/build.sh")"
model="${QMPI_MODEL:-$here/.cache/models/$preset-bf16}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

[[ -n "${QMPI_MODEL:-}" || -f "$model/config.json" ]] ||
  "$build/qmpi" make-model --preset "$preset" --dtype bf16 --out "$model" >/dev/null
gguf="${GGUF:-$model.gguf}"
[[ -n "${GGUF:-}" || ( -f "$gguf" && "$gguf" -nt "$model/config.json" ) ]] ||
  /usr/bin/python3 "$here/tests/reference/gguf_ref.py" "$model" "$gguf"
mkdir -p "$(dirname "$out")"
: >"$out"

label() { sed "s#^{#{\"round\":$1,#" | tee -a "$out"; }
for r in $(seq 1 "$rounds"); do
  OMP_NUM_THREADS="$threads" "$here/bench/stream_read.sh" "$build" 2048 5 | label "$r"
  # shellcheck disable=SC2086
  "$build/qmpi" bench --model "$model" --prompt-len "$prompt" --gen-len "$gen" --threads "$threads" \
    --repeats 2 --no-membw ${batches:+--batch "$batches"} ${QMPI_BENCH_ARGS:-} --json 2>/dev/null |
    tail -1 |
    sed 's#^{#{"engine":"qmpi",#' | label "$r"
  # llama-bench: prefill of the prompt in one batch (pp), then generation (tg), best-of-2 mean.
  "$bin/llama-bench" -m "$gguf" -p "$prompt" -n "$gen" -t "$threads" -r 2 -o jsonl 2>/dev/null |
    /usr/bin/python3 -c 'import json, sys
rows = [json.loads(l) for l in sys.stdin if l.strip()]
pp = next(r for r in rows if r["n_gen"] == 0)
tg = next(r for r in rows if r["n_gen"] > 0)
print(json.dumps({"engine": "llama.cpp", "prefill_tokens_per_s": pp["avg_ts"],
                  "decode_tokens_per_s": tg["avg_ts"], "type": pp.get("model_type"),
                  "build": pp.get("build_commit"), "cpu": pp.get("cpu_info")}))' | label "$r"
  [[ -n "$batches" ]] || continue
  # llama-batched-bench: per batch size, the prompts prefilled, then `gen` steps of all sequences;
  # its context must hold every sequence.
  most="$(tr ',' '\n' <<<"$batches" | sort -n | tail -1)"
  "$bin/llama-batched-bench" -m "$gguf" -c $((most * (prompt + gen) + 256)) -b 2048 -ub 512 \
    -npp "$prompt" -ntg "$gen" -npl "$batches" -t "$threads" --output-format jsonl 2>/dev/null |
    grep '^{' | /usr/bin/python3 -c 'import json, sys
rows = [json.loads(l) for l in sys.stdin]
print(json.dumps({"engine": "llama.cpp", "batched": [
    {"batch": r["pl"], "step_ms": 1000 * r["t_tg"] / r["tg"], "decode_tokens_per_s": r["speed_tg"]}
    for r in rows]}))' | label "$r"
done

/usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def col(engine, key):
    return [r[key] for r in rows if r.get("engine") == engine and key in r]
stream = [r["median_gb_s"] for r in rows if "stream_read_mib" in r]
print(f"STREAM read, GB/s: {' '.join(f'{s:.1f}' for s in stream)}")
print(f"{'figure':<24}{'qmpi':>22}{'llama.cpp':>22}{'ratio':>8}")
for key, name in (("prefill_tokens_per_s", "prefill tok/s"), ("decode_tokens_per_s", "decode tok/s")):
    q, l = col("qmpi", key), col("llama.cpp", key)
    # rounds pair up one qmpi run with the llama.cpp run right after it
    ratios = [a / b for a, b in zip(q, l)]
    print(f"{name:<24}{' '.join(f'{v:.1f}' for v in q):>22}{' '.join(f'{v:.1f}' for v in l):>22}"
          f"{statistics.median(ratios):>7.2f}x")
llama = [r for r in rows if r.get("engine") == "llama.cpp" and "build" in r]
if llama:
    print(f"llama.cpp {llama[-1].get('build')} ({llama[-1].get('type')}) on {llama[-1].get('cpu')}; "
          f"ratio = median of qmpi / llama.cpp per round")
# Batched decode: per round, each engine's step at every batch size (ms), and against its own
# single-sequence step of the same run.
qb = [{b["batch"]: b["step_ms"] for b in r["batches"]} for r in rows
      if r.get("engine") == "qmpi" and "batches" in r]
lb = [{b["batch"]: b["step_ms"] for b in r["batched"]} for r in rows if "batched" in r]
if qb and lb:
    print(f"{'sequences':<10}{'qmpi step ms (x single)':>34}{'llama.cpp step ms (x single)':>38}"
          f"{'llama.cpp/qmpi':>16}")
    for b in sorted(qb[0]):
        q = [r[b] for r in qb if b in r]
        l = [r[b] for r in lb if b in r]
        qs = " ".join(f"{v:.1f} ({v / r[1]:.2f})" for v, r in zip(q, qb))
        ls = " ".join(f"{v:.1f} ({v / r[1]:.2f})" for v, r in zip(l, lb))
        print(f"{b:<10}{qs:>34}{ls:>38}{statistics.median(a / c for a, c in zip(l, q)):>15.2f}x")
PY
