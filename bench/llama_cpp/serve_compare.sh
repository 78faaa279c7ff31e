#!/usr/bin/env bash
# Serving throughput, qmpi serve against llama.cpp's own llama-server (issue 34): the same
# random-weight Qwen2.5-0.5B-shaped bf16 weights (GGUF by tests/reference/gguf_ref.py, byte for byte;
# tokens that are not whole UTF-8 text never win the argmax, see text_safe_model.py), N streams
# opened at once (bench/loadgen.py --sweep), each a PROMPT-token prompt of random ids and exactly
# GEN greedy tokens, one server after the other on the same threads. llama-server runs as its
# users run it for many clients: --parallel N slots, continuous batching (its default), a context
# of N x (PROMPT + GEN) tokens, prompt cache off for the random prompts. Reports output tok/s,
# TTFT and inter-token latency p50/p99 for each, and checks both serve the same model (llama-server's
# greedy tokens are qmpi's argmax over the same ids).
#
# Usage: bench/llama_cpp/serve_compare.sh [build dir]
#   STREAMS (64), PROMPT_LEN (128), GEN_LEN (64), QMPI_THREADS (2), QMPI_PRESET (qwen2.5-0.5b),
#   DURATION (600: seconds a level may take), QMPI_SERVE_ARGS (extra qmpi serve flags),
#   QMPI_BENCH_OUT (bench/results/serve-llama-cpp-<date>.jsonl), SAMPLED (1: the requests name no
#   temperature, so each server samples with its own defaults: qmpi the model's
#   generation_config.json, llama-server its built-in chain)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$here/build}"
streams="${STREAMS:-64}" prompt="${PROMPT_LEN:-128}" gen="${GEN_LEN:-64}"
threads="${QMPI_THREADS:-2}" preset="${QMPI_PRESET:-qwen2.5-0.5b}" duration="${DURATION:-600}"
out="${QMPI_BENCH_OUT:-$here/bench/results/serve-llama-cpp-$(date +%Y%m%d).jsonl}"
bin="$("$here/bench/llama_cpp/build.sh")"
base="$here/.cache/models/$preset-bf16"
model="$base-text"  # its greedy output is whole UTF-8 text: see text_safe_model.py
gguf="$model.gguf"
port=18431
[[ -f "$base/config.json" ]] || "$build/qmpi" make-model --preset "$preset" --dtype bf16 --out "$base" >/dev/null
[[ -f "$model/config.json" && "$model/config.json" -nt "$base/config.json" ]] ||
  /usr/bin/python3 "$here/bench/llama_cpp/text_safe_model.py" "$base" "$model"
[[ -f "$gguf" && "$gguf" -nt "$model/config.json" ]] || /usr/bin/python3 "$here/tests/reference/gguf_ref.py" "$model" "$gguf"
mkdir -p "$(dirname "$out")"
: >"$out"
server=""
side="$(mktemp -d)"  # the servers' logs (kept when a step fails), the sweep's rows, the check
trap '[[ -n "$server" ]] && kill "$server" 2>/dev/null; echo "logs: $side" >&2' EXIT

wait_health() {  # wait_health URL PID
  for _ in $(seq 600); do
    curl -sf "$1" >/dev/null 2>&1 && return 0
    kill -0 "$2" 2>/dev/null || { echo "the server exited during start-up" >&2; return 1; }
    sleep 0.5
  done
  echo "no answer from $1" >&2
  return 1
}
sweep() {  # sweep ENGINE [loadgen flags]
  local engine="$1"
  shift
  /usr/bin/python3 "$here/bench/loadgen.py" --http "http://127.0.0.1:$port" --sweep "$streams" \
    --prompt-tokens "$prompt" --output-tokens "$gen" --duration "$duration" --pid "$server" \
    --json "$side/sweep.json" ${SAMPLED:+--sampled} "$@" >&2
  sed "s#^{#{\"engine\":\"$engine\",#" "$side/sweep.json" >>"$out"
  rm -f "$side/sweep.json"
}

# qmpi: as many sequences at once as streams, on the same threads.
# shellcheck disable=SC2086
OMP_NUM_THREADS="$threads" "$build/qmpi" serve --model "$model" --port "$port" --threads "$threads" \
  --max-num-seqs "$streams" --max-model-len $((prompt + gen + 16)) --no-prefix-caching \
  ${QMPI_SERVE_ARGS:-} >"$side/qmpi.log" 2>&1 &
server=$!
wait_health "http://127.0.0.1:$port/health" "$server"
sweep qmpi
kill -TERM "$server" && wait "$server" || true
server=""

port=$((port + 1))  # the first server's socket may linger in TIME_WAIT
"$bin/llama-server" -m "$gguf" --port "$port" -t "$threads" -tb "$threads" --parallel "$streams" \
  -c $((streams * (prompt + gen + 16))) --no-webui >"$side/llama-server.log" 2>&1 &
server=$!
wait_health "http://127.0.0.1:$port/health" "$server"
sweep llama.cpp --llama-server
# Same model: llama-server's greedy continuation of a prompt, checked against qmpi's logits.
ids="$(/usr/bin/python3 -c 'import random; r = random.Random(5); print(",".join(str(r.randrange(1000, 30000)) for _ in range(32)))')"
cont="$(curl -sf "http://127.0.0.1:$port/completion" -d "{\"prompt\": [$ids], \"n_predict\": 16, \"temperature\": 0, \"ignore_eos\": true, \"return_tokens\": true, \"cache_prompt\": false}" |
  /usr/bin/python3 -c 'import json, sys; print(",".join(map(str, json.load(sys.stdin)["tokens"])))')"
kill -TERM "$server" && wait "$server" || true
server=""
"$build/qmpi" logits --model "$model" --ids "$ids,$cont" --out "$side/check.npy" >/dev/null 2>&1

/usr/bin/python3 - "$out" "$side/check.npy" "$ids" "$cont" <<'PY'
import json, sys
import numpy as np
rows = {r["engine"]: r for r in map(json.loads, open(sys.argv[1]))}
q, l = rows["qmpi"], rows["llama.cpp"]
print(f"{'':<28}{'qmpi':>14}{'llama-server':>14}{'ratio':>8}")
def line(name, a, b, better_high=True):
    ratio = a / b if better_high else b / a
    print(f"{name:<28}{a:>14.1f}{b:>14.1f}{ratio:>7.2f}x")
line(f"output tok/s ({q['concurrency']} streams)", q["output_token_throughput"], l["output_token_throughput"])
for key in ("ttft_ms", "itl_ms"):
    for p in ("p50", "p99"):
        line(f"{key[:-3]} {p} (ms; ratio: llama/qmpi)", q[key][p], l[key][p], better_high=False)
print(f"completed: qmpi {q['completed']}, llama-server {l['completed']}; failed {q['failed']} / {l['failed']}")
prompt = [int(x) for x in sys.argv[3].split(",")]
cont = [int(x) for x in sys.argv[4].split(",")]
logits = np.load(sys.argv[2])[len(prompt) - 1:-1]
same = sum(int(a) == b for a, b in zip(logits.argmax(-1), cont))
print(f"same model: {same} of {len(cont)} llama-server greedy tokens are qmpi's argmax")
PY
