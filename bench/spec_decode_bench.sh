#!/usr/bin/env bash
# Speculative decoding on the qwen2.5-0.5b preset (bf16, random weights, real shape), 1 rank,
# 2 threads:
#  1. the cost of a step that checks k = 4 guesses per sequence against a plain decode step, at
#     batch 1 and 8 (`qmpi bench --speculative-config`; the guesses' values do not change the
#     cost), and the tokens/s if every guess were accepted (the self-draft upper bound);
#  2. end to end, `qmpi batch` one request at a time (--max-num-seqs 1: decode latency) on
#     prompts that repeat a passage, greedy, plain against prompt lookup (ngram, k = 4) and two
#     draft models (k = 4): the model as its own draft (every guess accepted: the upper bound of
#     acceptance, at a draft as costly as the model) and a 2-layer random draft of the same
#     shape otherwise (what the draft's own work costs when its guesses are mostly wrong):
#     output tokens/s and the guesses accepted, from the batch summary; each output must equal
#     the plain one.
# Writes bench/results/spec-decode-<date>.txt.
# Usage: bench/spec_decode_bench.sh [build dir] [requests (8)]
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_setup spec-decode "${1:-}"
n="${2:-8}"
spec='{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}'
# The small draft: the preset's shape with 2 layers, its embedding padded to 152064 rows (as
# Qwen2.5's large checkpoints pad the same tokenizer).
small="$here/.cache/models/qwen2.5-0.5b-2layer-draft"
if [[ ! -f "$small/config.json" ]]; then
  jq '.num_hidden_layers = 2 | .max_window_layers = 2 | .vocab_size = 152064' \
    "$model/config.json" > "$work/draft-config.json"
  "$qmpi" make-model --like "$work/draft-config.json" --seed 7 --dtype bf16 --out "$small" >/dev/null
fi

: > "$out"
for b in 1 8; do
  line=$("$qmpi" bench --model "$model" --threads 2 --prompt-len 128 --gen-len 16 --repeats 2 \
         --batch "$b" --no-membw --json --speculative-config "$spec" 2>/dev/null | tail -1)
  echo "bench-batch-$b: $line" | tee -a "$out"
done

# A 48-token passage said twice, then 64 greedy tokens: what a "rewrite this" request looks like
# to prompt lookup. No repetition penalty (generation_config.json's 1.05 would otherwise apply):
# a draft guesses the raw argmax, so the self-draft then accepts every guess.
/usr/bin/python3 - "$work/in.jsonl" "$n" <<'PY'
import json, random, sys
path, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(32)
with open(path, "w") as f:
    for i in range(n):
        passage = [rng.randrange(1000, 150000) for _ in range(48)]
        f.write(json.dumps({"id": f"r{i}", "prompt": passage + [13] + passage, "max_tokens": 64,
                            "temperature": 0, "repetition_penalty": 1.0,
                            "ignore_eos": True}) + "\n")
PY
for mode in plain ngram self-draft small-draft; do
  flags=()
  case $mode in
    ngram) flags=(--speculative-config "$spec") ;;
    self-draft) flags=(--speculative-config "{\"model\": \"$model\", \"num_speculative_tokens\": 4}") ;;
    small-draft) flags=(--speculative-config "{\"model\": \"$small\", \"num_speculative_tokens\": 4}") ;;
  esac
  line=$("$qmpi" batch --model "$model" --input "$work/in.jsonl" --output "$work/$mode.jsonl" \
         --overwrite --max-num-seqs 1 --max-model-len 512 --threads 2 "${flags[@]}" 2>&1 |
         grep " ok, " | tail -1)
  echo "batch-$mode: $line" | tee -a "$out"
done
for mode in ngram self-draft small-draft; do
  if cmp -s <(jq -c '[.custom_id, .response.body.choices]' "$work/plain.jsonl" | sort) \
            <(jq -c '[.custom_id, .response.body.choices]' "$work/$mode.jsonl" | sort); then
    echo "$mode output equals plain" | tee -a "$out"
  else
    echo "$mode output DIFFERS from plain" | tee -a "$out"
  fi
done
