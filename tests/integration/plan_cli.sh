#!/usr/bin/env bash
# `qmpi plan` and `qmpi help errors` through the real binary: Qwen2.5-72B-Instruct's config on
# 6 x 24 GiB (nothing fits in bf16, int4 suggested) and 6 x 80 GB (--tp 6 fits with 13 KV-head
# copies, --tp 2 --pp 3 recommended for its KV room, the choice explained), one layout
# explained, JSON for scripts, the MoE models (Qwen2-57B-A14B, Qwen3-30B-A3B, Qwen3-235B-A22B)
# planned with their total and active parameters and experts split over TP, a refused
# architecture, and a generated model folder
# read through its safetensors headers.
set -u
: "${QMPI:?set QMPI to the qmpi binary}" "${QMPI_SOURCE_DIR:?}" "${QMPI_TEST_TMP:?}"
CFG="$QMPI_SOURCE_DIR/tests/fixtures/configs"
TMP="$QMPI_TEST_TMP/plan_cli"
rm -rf "$TMP" && mkdir -p "$TMP"
failures=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# run NAME ARGS...: stdout -> $TMP/NAME.out, stderr -> $TMP/NAME.err, exit code -> $rc
run() {
  local name=$1
  shift
  "$QMPI" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
  rc=$?
}
expect_rc() { [ "$rc" -eq "$1" ] || fail "$2: exit code $rc, expected $1"; }
# expect NAME.out|NAME.err TEXT: the file contains TEXT as a fixed string
expect() {
  grep -qF -- "$2" "$TMP/$1" || { fail "$1 lacks: $2"; sed 's/^/    | /' "$TMP/$1" | head -40; }
}

M72="$CFG/qwen2.5-72b-instruct.json"
common=(--model-config "$M72" --gpus 6 --max-model-len 32768 --kv-dtype bf16)

run small plan "${common[@]}" --gpu-mem 24GiB
expect_rc 2 "72B on 6 x 24 GiB"
expect small.out "weights   145.41 GB (135.43 GiB) in BF16"
expect small.out "KV cache  320 KiB per token in BF16"
expect small.out "budget    21.60 GiB per GPU (24.00 GiB x 0.90), 6 GPUs on 1 node"
grep -E '^  1   6   1     6  yes .* 13/8 .* QM150 weights-do-not-fit$' "$TMP/small.out" >/dev/null ||
  fail "the --tp 6 row does not show 13/8 KV heads and QM150"
expect small.out "Nothing fits on 6 GPUs"
expect small.out "An int4 AWQ/GPTQ checkpoint (about 41.46 GB, int4-g128 estimate) would fit as --tp 2 --pp 3"
expect small.err "error QM150 (weights-do-not-fit)"

run both plan "${common[@]}" --gpu-mem 80GB --model /models/Qwen2.5-72B-Instruct
expect_rc 2 "--model and --model-config together"
expect both.err "error QM100 (usage)"

run big plan "${common[@]}" --gpu-mem 80GB
expect_rc 0 "72B on 6 x 80 GB"
expect big.out "budget    67.06 GiB per GPU (74.51 GiB x 0.90), 6 GPUs on 1 node"
expect big.out "<- recommended"
grep -E '^  1   6   1     6  yes .* yes .* 13/8 ' "$TMP/big.out" >/dev/null ||
  fail "the --tp 6 row does not fit with 13/8 KV heads"
expect big.out "Why not the others:"
expect big.out "  - --tp 6 --pp 1: room for "
expect big.out "its tightest rank (rank 2) holds 3 of the 8 KV heads for 80 layers (the uneven head split holds 13 KV-head copies per stage)"
expect big.out "  - --tp 3 --pp 2: "
expect big.out "  - --tp 1 --pp 6: "
expect big.out "Use --tp 2 --pp 3 on 6 GPUs: its biggest rank (rank 0) needs"
expect big.out "mpirun -np 6 qmpi serve --model MODEL_DIR --tp 2 --pp 3 --backend cuda --max-model-len 32768"
grep -E '^  1   2   3     6  yes .* <- recommended$' "$TMP/big.out" >/dev/null ||
  fail "the --tp 2 --pp 3 row is not the recommended one"
# The three layouts of issue 15 side by side, each with its per-rank bytes: TP 6, TP 2 x PP 3,
# and two TP 3 replicas (each rank a third of the model, 10 KV-head copies per replica).
grep -E '^  2   3   1     6  yes +45\.46 .* yes .* 10/8 ' "$TMP/big.out" >/dev/null ||
  fail "no --dp 2 --tp 3 row that fits with 45.46 GiB of weights and 10/8 KV heads"
expect big.out "  - --dp 2 --tp 3 --pp 1: room for "
expect big.out "each of its 2 replicas holds a whole copy of the weights"

run dp2tp3 plan "${common[@]}" --gpu-mem 80GB --dp 2 --tp 3
expect_rc 0 "--dp 2 --tp 3 explained"
expect dp2tp3.out "layout    --dp 2 --tp 3 --pp 1 on 6 ranks: valid, fits"
expect dp2tp3.out "tokens on the tightest rank (its 2 replicas together)"
expect dp2tp3.out "mpirun -np 6 qmpi serve --model MODEL_DIR --dp 2 --tp 3 --pp 1 --backend cuda"

run tp6 plan "${common[@]}" --gpu-mem 80GB --tp 6
expect_rc 0 "--tp 6 explained"
expect tp6.out "layout    --tp 6 --pp 1 on 6 ranks: valid, fits; 1 host, 0 cross-host pipeline hops; 13 KV-head copies per stage (the model has 8)"
# Every rank, with the KV heads it holds: 2,2,3,2,2,2.
for r in 0 1 2 3 4 5; do
  kvh=2; [ "$r" -eq 2 ] && kvh=3
  grep -qE "^ +$r +0 +0 +$r +0-79 .* yes +$kvh\$" "$TMP/tp6.out" || fail "no rank $r row with $kvh KV heads"
done
expect tp6.out "mpirun -np 6 qmpi serve --model MODEL_DIR --tp 6 --pp 1 --backend cuda"

run tp65 plan --model-config "$M72" --gpus 65 --gpu-mem 80GB --tp 65
expect_rc 2 "--tp 65 on 64 heads"
expect tp65.err "error QM102 (tp-exceeds-heads): --tp 65 is larger than num_attention_heads (64)"

run tp2pp3 plan "${common[@]}" --gpu-mem 80GB --tp 2 --pp 3
expect_rc 0 "--tp 2 --pp 3 explained"
expect tp2pp3.out "layout    --tp 2 --pp 3 on 6 ranks: valid, fits"
for r in 0 1 2 3 4 5; do
  grep -qE "^ +$r +0 +$((r / 2)) +$((r % 2)) " "$TMP/tp2pp3.out" || fail "no row for rank $r"
done
expect tp2pp3.out "   0     0     0   0  0-26        23.23     1.69"
expect tp2pp3.out "   5     0     2   1  54-79       22.41     1.62"

run tp2pp3_small plan "${common[@]}" --gpu-mem 24GiB --tp 2 --pp 3
expect_rc 2 "--tp 2 --pp 3 on 24 GiB"
expect tp2pp3_small.err "error QM150 (weights-do-not-fit): The model does not fit: with --tp 2 --pp 3, rank 0"
expect tp2pp3_small.err "int4"

run json plan "${common[@]}" --gpu-mem 80GB --json
expect_rc 0 "--json"
/usr/bin/python3 - "$TMP/json.out" <<'EOF' || fail "JSON output"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["fits"] is True, d["fits"]
assert (d["recommended"]["dp"], d["recommended"]["tp"], d["recommended"]["pp"]) == (1, 2, 3), d["recommended"]
dp2 = [l for l in d["layouts"] if (l["dp"], l["tp"], l["pp"]) == (2, 3, 1)][0]
assert dp2["fits"] is True and dp2["kv_head_copies"] == 10, dp2
assert d["model"]["kv_bytes_per_token"] == 327680, d["model"]
assert d["model"]["weights_bytes"] == 145412407296, d["model"]
tp6 = [l for l in d["layouts"] if (l["dp"], l["tp"], l["pp"]) == (1, 6, 1)][0]
assert tp6["valid"] is True and tp6["fits"] is True and tp6["kv_head_copies"] == 13, tp6
assert any(w.startswith("--tp 6 --pp 1: room for ") for w in d["recommended"]["why"]), d["recommended"]
EOF

run moe plan --model-config "$CFG/qwen2-57b-a14b.json" --gpus 6 --gpu-mem 80GB --kv-dtype bf16
expect_rc 0 "Qwen2-57B-A14B"
expect moe.out "weights   114.82 GB"
expect moe.out "an int4-g128 AWQ/GPTQ checkpoint would be about 31.45 GB"
expect moe.out "KV cache  56 KiB per token in BF16"
expect moe.out "params    57.409B in all, 14.25B active per token (64 experts, 8 per token"

run moe30 plan --model-config "$CFG/qwen3-30b-a3b.json" --gpus 2 --gpu-mem 80GB --tp 2 --pp 1
expect_rc 0 "Qwen3-30B-A3B --tp 2"
expect moe30.out "params    30.532B in all, 3.35B active per token (128 experts, 8 per token"
expect moe30.out "Routed experts: 64 of 128 per layer on the busiest TP rank, 27.00 GiB of expert weights"

run moe235 plan --model-config "$CFG/qwen3-235b-a22b.json" --gpus 8 --gpu-mem 141GB --json
expect_rc 0 "Qwen3-235B-A22B on 8 x 141 GB"
/usr/bin/python3 - "$TMP/moe235.out" <<'EOF' || fail "Qwen3-235B-A22B JSON"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["fits"] is True, d["sentence"]
assert d["model"]["params"] == 235093634560, d["model"]["params"]
assert d["model"]["experts"] == 128 and d["model"]["experts_per_token"] == 8, d["model"]
assert d["recommended"]["tp"] * d["recommended"]["pp"] == 8, d["recommended"]
EOF

printf '{"architectures": ["LlamaForCausalLM"]}' >"$TMP/llama.json"
run llama plan --model-config "$TMP/llama.json" --gpus 2 --gpu-mem 80GB
expect_rc 3 "LlamaForCausalLM"
expect llama.err "error QM203 (arch-unsupported)"
expect llama.err "Qwen3MoeForCausalLM"

# A model folder: the planner reads the safetensors header (f32 weights), never the data.
if "$QMPI" make-model --out "$TMP/tiny" --preset tiny --dtype f32 >"$TMP/make.log" 2>&1; then
  run cpu plan --model "$TMP/tiny" --backend cpu --gpus 6 --host-mem 8GiB
  expect_rc 0 "tiny model on CPU"
  expect cpu.out "in F32 (safetensors headers)"
  expect cpu.out "8.00 GiB of host memory per host"
else
  fail "qmpi make-model failed"; cat "$TMP/make.log"
fi

run errors help errors
expect_rc 0 "help errors"
expect errors.out "QM102  tp-exceeds-heads  (exit 2)"
run markdown help errors --markdown
expect_rc 0 "help errors --markdown"
sed -n '/^<!-- generated by/,$p' "$QMPI_SOURCE_DIR/docs/troubleshooting.md" | tail -n +3 >"$TMP/doc_body.md"
cmp -s "$TMP/markdown.out" "$TMP/doc_body.md" ||
  fail "docs/troubleshooting.md differs from \`qmpi help errors --markdown\`"

# Issue 18: GPU memory as cards are sold (80 = 80G = 80GB, with a note), vLLM's name for the
# utilization (plan's old --gpu-util still read), and paged KV semantics: 16 sequences of
# 32768 tokens fit on 6 x 80 GB, --max-num-seqs caps the sequences at once and reserves nothing.
run bare plan "${common[@]}" --gpu-mem 80 --max-num-seqs 16
expect_rc 0 "--gpu-mem 80 --max-num-seqs 16 --max-model-len 32768"
expect bare.err "note: --gpu-mem 80 read as 80GB (74.51 GiB)"
expect bare.out "budget    67.06 GiB per GPU (74.51 GiB x 0.90), 6 GPUs on 1 node"
expect bare.out "KV cache  320 KiB per token in BF16; one max-model-len sequence (32768 tokens) = 10.00 GiB over all ranks at least, then the memory left (max-num-seqs limits the sequences at once, it reserves none)"
expect bare.out "Use --tp 2 --pp 3 on 6 GPUs"
grep -qE "with room for [0-9,]+ tokens of KV cache per rank: [0-9,]+ sequences of 32768 tokens at once" "$TMP/bare.out" ||
  fail "the recommendation does not say how many full-length sequences fit"
expect bare.out "--max-model-len 32768 --max-num-seqs 16"
run letter plan "${common[@]}" --gpu-mem 80G --gpu-util 0.8
expect_rc 0 "--gpu-mem 80G --gpu-util 0.8"
expect letter.err "note: --gpu-mem 80G read as 80GB"
expect letter.out "(74.51 GiB x 0.80)"
run util plan "${common[@]}" --gpu-mem 80GiB --gpu-memory-utilization 1.5
expect_rc 2 "--gpu-memory-utilization 1.5"
expect util.err "--gpu-memory-utilization 1.5 is not in (0, 1]"
[ -s "$TMP/util.out" ] && fail "--gpu-mem 80GiB printed a note or a plan: $(cat "$TMP/util.out")"
run usage plan --model-config "$M72" --gpus 6 --gpu-mem 24Q
expect_rc 2 "--gpu-mem 24Q"
expect usage.err "has an unknown unit"

# The CPU KV budget as serve takes it: 2 GiB per rank hold 174762 tokens of 0.5B's 12 KiB each,
# and the suggested launch carries it; on CUDA the option is refused.
M05="$CFG/qwen2.5-0.5b-instruct.json"
run cpukv plan --model-config "$M05" --backend cpu --gpus 1 --host-mem 16GiB --kv-cache-memory 2GiB --max-model-len 32768
expect_rc 0 "plan --backend cpu --kv-cache-memory"
expect cpukv.out "up to --kv-cache-memory 2 GiB per rank"
expect cpukv.out " 174762 "
expect cpukv.out "--kv-cache-memory 2147483648"
run cudakv plan --model-config "$M05" --gpus 1 --gpu-mem 24GiB --kv-cache-memory 2GiB
expect_rc 2 "plan --kv-cache-memory on cuda"

# The picture: the same run draws docs/img/plan-72b-6x80gb.svg byte for byte (the docs show the
# binary's current output, not an old one), and a path that cannot be written is QM601.
run svg plan --model-config "$M72" --gpus 6 --gpu-mem 80GiB --max-model-len 8192 --svg "$TMP/plan.svg"
expect_rc 0 "plan --svg"
cmp -s "$TMP/plan.svg" "$QMPI_SOURCE_DIR/docs/img/plan-72b-6x80gb.svg" ||
  fail "docs/img/plan-72b-6x80gb.svg is not what plan --svg draws now (regenerate it with the command above)"
python3 -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' "$TMP/plan.svg" ||
  fail "plan --svg wrote XML that does not parse"
run svg_bad plan --model-config "$M72" --gpus 6 --gpu-mem 80GiB --svg /nonexistent/dir/p.svg
expect_rc 2 "plan --svg into a missing folder (a user error)"
expect svg_bad.err "QM601"

# LoRA adapter slots in the weights: 4 of rank 16 on 0.5B's seven projections are
# 4 x 16 x 24 layers x 22912 (in + out) x 2 bytes = 70385664 bytes in bf16 (--dtype auto), twice
# that in float32, on the one rank of --tp 1.
run lora plan --model-config "$M05" --gpus 1 --gpu-mem 24GiB --max-loras 4 --max-lora-rank 16
expect_rc 0 "plan --max-loras"
expect lora.out "LoRA      4 adapters (--max-loras) x rank 16 on q/k/v/o/gate/up/down: 67.12 MiB in BF16 over all ranks, counted in their weights"
run lora32 plan --model-config "$M05" --gpus 1 --gpu-mem 24GiB --max-loras 4 --max-lora-rank 16 --dtype float32 --tp 1 --json
expect_rc 0 "plan --max-loras --dtype float32 --tp 1"
expect lora32.out '"lora_weights_bytes": 140771328'
grep -q '^LoRA ' "$TMP/big.out" && fail "a plan without --max-loras prints a LoRA line"

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed; outputs in $TMP"
  exit 1
fi
echo "plan_cli: all checks passed"
