#!/usr/bin/env bash
# qmpi against llama.cpp on this host, the external baseline issue 17's goals are stated against:
# the same random-weight Qwen2.5-0.5B-shaped bf16 checkpoint (converted byte for byte to GGUF by
# tests/reference/gguf_ref.py), the same prompt length, generated tokens and thread count, one
# engine after the other, alternated ROUNDS times so that both see the same swings of a shared
# VM. A plain STREAM-style read (bench/stream_read.c) opens each round.
#
# llama.cpp comes as node-llama-cpp's prebuilt CPU binaries (npm, pinned; ggml picks the CPU
# variant that suits the host and the record names it), installed into .cache/llama-cpp on first
# use. Both engines read bf16 weights; llama.cpp keeps an f16 K/V cache, qmpi its default bf16 one.
#
# Usage: bench/llama_cpp/compare.sh [build dir]
#   QMPI_THREADS (2), ROUNDS (3), PROMPT_LEN (128), GEN_LEN (32), QMPI_PRESET (qwen2.5-0.5b),
#   QMPI_BENCH_ARGS (extra qmpi bench flags, e.g. --bf16-activations),
#   QMPI_BENCH_OUT (bench/results/llama-cpp-<date>.jsonl).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$here/build}"
threads="${QMPI_THREADS:-2}" rounds="${ROUNDS:-3}"
prompt="${PROMPT_LEN:-128}" gen="${GEN_LEN:-32}"
preset="${QMPI_PRESET:-qwen2.5-0.5b}"
out="${QMPI_BENCH_OUT:-$here/bench/results/llama-cpp-$(date +%Y%m%d).jsonl}"
llama_dir="$here/.cache/llama-cpp"
model="$here/.cache/models/$preset-bf16"
gguf="$model.gguf"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

if [[ ! -d "$llama_dir/node_modules/node-llama-cpp" ]]; then
  mkdir -p "$llama_dir"
  # 3.21.1: later releases publish lockfiles npm refuses for platforms they do not serve.
  npm i -E --prefix "$llama_dir" --no-audit --no-fund node-llama-cpp@3.21.1 >&2
fi
cp "$here/bench/llama_cpp/bench.mjs" "$llama_dir/"  # node resolves the package beside the script
[[ -f "$model/config.json" ]] || "$build/qmpi" make-model --preset "$preset" --dtype bf16 --out "$model" >/dev/null
[[ -f "$gguf" && "$gguf" -nt "$model/config.json" ]] || /usr/bin/python3 "$here/tests/reference/gguf_ref.py" "$model" "$gguf"
mkdir -p "$(dirname "$out")"
: >"$out"

label() { sed "s#^{#{\"round\":$1,#" | tee -a "$out"; }
for r in $(seq 1 "$rounds"); do
  OMP_NUM_THREADS="$threads" "$here/bench/stream_read.sh" "$build" 2048 5 | label "$r"
  # shellcheck disable=SC2086
  "$build/qmpi" bench --model "$model" --prompt-len "$prompt" --gen-len "$gen" --threads "$threads" \
    --repeats 2 --no-membw ${QMPI_BENCH_ARGS:-} --json 2>/dev/null | tail -1 |
    sed 's#^{#{"engine":"qmpi",#' | label "$r"
  node "$llama_dir/bench.mjs" "$gguf" "$prompt" "$gen" "$threads" 2 | label "$r"
done

# Same model in both engines: llama.cpp's greedy tokens of the last round must be the argmax of
# qmpi's logits over the same ids (a wrong tensor mapping in gguf_ref.py would change them).
ids=$(/usr/bin/python3 -c 'import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if "tokens" in l][-1]
print(",".join(map(str, r["prompt"] + r["tokens"])))' "$out")
"$build/qmpi" logits --model "$model" --ids "$ids" --out "$llama_dir/check.npy" >/dev/null 2>&1
/usr/bin/python3 - "$out" "$llama_dir/check.npy" <<'PY'
import json, statistics, sys
import numpy as np
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def col(engine, key):
    return [r[key] for r in rows if r.get("engine") == engine]
stream = [r["median_gb_s"] for r in rows if "stream_read_mib" in r]
print(f"STREAM read, GB/s: {' '.join(f'{s:.1f}' for s in stream)}")
print(f"{'figure':<24}{'qmpi':>22}{'llama.cpp':>22}{'ratio':>8}")
for key, name in (("prefill_tokens_per_s", "prefill tok/s"), ("decode_tokens_per_s", "decode tok/s")):
    q, l = col("qmpi", key), col("llama.cpp", key)
    # rounds pair up one qmpi run with the llama.cpp run right after it
    ratios = [a / b for a, b in zip(q, l)]
    print(f"{name:<24}{' '.join(f'{v:.1f}' for v in q):>22}{' '.join(f'{v:.1f}' for v in l):>22}"
          f"{statistics.median(ratios):>7.2f}x")
variants = sorted({r.get("cpu_variant") for r in rows if r.get("engine") == "llama.cpp"} - {None})
print(f"llama.cpp CPU variant: {', '.join(variants) or 'unknown'}; ratio = median of qmpi / llama.cpp per round")
last = [r for r in rows if "tokens" in r][-1]
logits = np.load(sys.argv[2])[len(last["prompt"]) - 1:-1]
top2 = np.sort(logits, axis=-1)[:, -2:]
same = [int(a) == b for a, b in zip(logits.argmax(-1), last["tokens"])]
# qmpi's logits are over llama.cpp's own ids, so each step compares alone; a difference where
# qmpi's top two logits nearly tie is rounding (f16 against bf16 K/V), a wide one a wrong model.
gaps = [top2[i, 1] - top2[i, 0] for i, ok in enumerate(same) if not ok]
where = f"; where they differ, qmpi's top two logits are at most {max(gaps):.3f} apart" if gaps else ""
print(f"same model: {sum(same)} of {len(same)} llama.cpp greedy tokens are qmpi's argmax{where}")
PY
