#!/usr/bin/python3
"""GGUF models against the float64 reference.

tests/reference/gguf_ref.py (the oracle's own GGUF writer, quantizing with ggml_blocks.quantize)
writes random float models as GGUF files: the tiny preset's shape as Q8_0 and Q4_0 (its widths,
192 and 384, are whole 32-element blocks but not 256-element k-quant super-blocks), and a
256-wide shape (hidden 256, 4 heads of 64, 2 KV heads, MLP 768) as Q4_K, Q6_K and a Q4_K_M-like
mix split into three files; a Qwen2-MoE (Q8_0) and a Qwen3-MoE (Q5_1) tiny model as llama.cpp
stacks their experts. Every quantized model has a vocabulary of 4096 without tokenizer
(SMALL_VOCAB), so its embedding quantizes fast: with the presets' 151,936 rows, quantizing and
decoding the embedding in NumPy and reading it in every rank took most of the test's time, and
no check here depends on the vocabulary's size (the bf16 GGUF below keeps the real vocabulary and
its embedded tokenizer, which gguf_tokenizer.py checks). The reference reads each file back with
its own reader, decodes every tensor to
float64 with ggml_blocks.dequantize and runs the float64 forward; `qmpi logits` on the file must
match within the exact-math bound (1e-4 of the largest |logit|, tighter than int4's 2e-3) at
1x1, TP 2, TP 3 and PP 2 (MoE: 1x1 and TP 3 / TP 2) with `--dtype float32`; under the default
`--dtype auto` (int8 activations for Q8_0, Q4_0 and Q4_K) within auto's bound at 1x1. TP 2 and TP 3 on the 256-wide shape cut
o_proj's inputs inside a k-quant super-block (heads 2+2 and 2+1+1 of 64 columns): the loader
decodes those slices to float32, the rest stays in blocks. A bf16 GGUF
written byte for byte gives the safetensors folder's logits exactly. A truncated file fails with
QM246 before any weight is used.
"""

import json
import os
import shutil
import subprocess

import numpy as np

import testlib  # first: it puts tests/reference on the path
import gguf_ref
import qwen2_ref
import qwen_family_ref

# The issue asks for int4_vs_reference's bound (2e-3); GGUF blocks decode exactly in float32
# (scale x quant, as the reference's float64 decode), so the exact-math bound holds and is
# what is asserted.
TOLERANCE = 1e-4
LOGITS_LEN = 8
# `--dtype auto` (the default) multiplies Q8_0, Q4_0, Q5_0, Q4_K and Q6_K weights by int8
# activations in decode-sized matmuls (kernels/cpu/matmul_ggml_int8.cpp; 8 positions are
# decode-sized), as llama.cpp does. Measured here (2026-12-02): 1.71e-2 (Q8_0), 1.93e-2 (Q4_0),
# 1.92e-2 (Q4_K), about twice bf16 activations' error and just above the 1.85e-2 of Hugging
# Face's bf16 run against its float32 run (auto_dtype_vs_reference.py): an int8 activation's step
# is max|x| / 127 of its block of 32, coarser than bf16's 2^-8 of each value for all but the
# block's largest. The bound below is that measurement with headroom, not a derived figure; the
# kernel's own bound is asserted by MatmulGgmlInt8 and ggml_blocks.py. A build for a CPU without
# int8 dot products (`qmpi --version`) has no such kernel: there `auto` is the exact path.
AUTO_TOLERANCE = 3e-2
AUTO_CASES = ("Q8_0", "Q4_0", "Q4_K")
# A prefill above the GEMV's 16 rows: under `auto` Q8_0, Q4_0 and Q4_K weights (every type but
# Q2_K and Q3_K) meet x rounded to bf16 on the bf16 GEMM's tiles (kernels/cpu/matmul_ggml_bf16.cpp)
# where the CPU has bf16 dot products, within the same bound (measured 7.7e-3 Q8_0, 7.3e-3 Q4_0,
# 8.3e-3 Q4_K, as bf16 activations on bf16 weights); without them the prefill keeps exact float32
# panels.
PREFILL_LEN = 24
LAYOUTS = [(1, 1), (2, 1), (3, 1), (1, 2)]
MPI_TIMEOUT = 240
SMALL_VOCAB = 4096
K256 = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 256,
        "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
        "intermediate_size": 768, "vocab_size": SMALL_VOCAB, "max_position_embeddings": 4096,
        "rope_theta": 1000000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": True,
        "hidden_act": "silu", "torch_dtype": "float32", "bos_token_id": 151643,
        "eos_token_id": 151645}
# The `qmpi make-model` presets' shapes (src/app's tiny, tiny-qwen2-moe, tiny-qwen3-moe) with
# SMALL_VOCAB rows instead of 151,936.
TINY = dict(K256, hidden_size=192, num_hidden_layers=6, num_attention_heads=12,
            num_key_value_heads=6, intermediate_size=384)
SHAPES = {
    "k256": K256,
    "tiny": TINY,
    "tiny-qwen2-moe": dict(TINY, architectures=["Qwen2MoeForCausalLM"], model_type="qwen2_moe",
                           decoder_sparse_step=1, mlp_only_layers=[2], moe_intermediate_size=64,
                           norm_topk_prob=False, num_experts=8, num_experts_per_tok=2,
                           qkv_bias=True, shared_expert_intermediate_size=256),
    "tiny-qwen3-moe": dict(TINY, architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe",
                           attention_bias=False, decoder_sparse_step=2, head_dim=32,
                           mlp_only_layers=[], moe_intermediate_size=96, norm_topk_prob=True,
                           num_experts=7, num_experts_per_tok=3),
}
# label, base model (a SHAPES key), untied, writer options, layouts
CASES = [
    ("Q8_0", "tiny", False, ["--type", "Q8_0"], LAYOUTS),
    ("Q4_0", "tiny", True, ["--type", "Q4_0", "--output-type", "Q8_0"], LAYOUTS),
    ("Q4_K", "k256", True, ["--type", "Q4_K"], LAYOUTS),
    ("Q6_K", "k256", False, ["--type", "Q6_K"], LAYOUTS),
    ("Q4_K_M mix", "k256", True, ["--mix", "q4_k_m", "--split", "3"], LAYOUTS),
    # Experts stacked per layer, routers in float32, layer 2 dense (no router in the file).
    ("qwen2moe Q8_0", "tiny-qwen2-moe", False, ["--type", "Q8_0"], [(1, 1), (3, 1)]),
    ("qwen3moe Q5_1", "tiny-qwen3-moe", False, ["--type", "Q5_1"], [(1, 1), (2, 1)]),
]


def cached(path: str, identity: str, make) -> str:
    """`path`, made by make(path) unless a stamp beside it says it was made from `identity`."""
    stamp = path + ".made-by"
    if os.path.exists(stamp) and open(stamp).read() == identity:
        return path
    make(path)
    with open(stamp, "w") as f:
        f.write(identity)
    return path


def base_model(kind: str, untied: bool) -> str:
    """A random f32 float model folder of SHAPES[kind], made once per qmpi binary."""
    st = os.stat(testlib.qmpi_binary())
    identity = f"{st.st_size}:{st.st_mtime_ns}:{json.dumps(SHAPES[kind], sort_keys=True)}"
    root = testlib.test_tmp("models")
    dest = os.path.join(root, f"gguf-base-{kind}-v{SMALL_VOCAB}-{'untied' if untied else 'tied'}")

    def make(path):
        shutil.rmtree(path, ignore_errors=True)
        like = os.path.join(root, f"gguf-{kind}-config.json")
        with open(like, "w") as f:
            json.dump(SHAPES[kind], f)
        args = ["make-model", "--out", path, "--seed", "31", "--dtype", "f32", "--like", like]
        testlib.qmpi(args + (["--untied"] if untied else []), timeout=300)

    return cached(dest, identity, make)


def gguf_file(label: str, base: str, options) -> str:
    """The GGUF file of `base` written with `options`, made once per base model and writer."""
    writer = os.path.join(os.path.dirname(gguf_ref.__file__), "gguf_ref.py")
    identity = (open(base + ".made-by").read() + ":" + str(os.stat(writer).st_mtime_ns) + ":" +
                " ".join(options))
    out = os.path.join(testlib.test_tmp("models"), "gguf-" + label.replace(" ", "-") + ".gguf")
    paths = gguf_ref.split_paths(out, int(options[options.index("--split") + 1])
                                 if "--split" in options else 1)
    cached(out, identity, lambda _: gguf_ref.write_model(
        base, out, gguf_ref.options([base, out] + options)))
    return paths[0]


def reference(base: str, path: str):
    with open(os.path.join(base, "config.json")) as f:
        raw = json.load(f)
    tensors = gguf_ref.hf_tensors(path)
    if raw["architectures"][0] == "Qwen2ForCausalLM":
        return qwen2_ref.Qwen2Reference(qwen2_ref.Qwen2Config(raw), tensors)
    return qwen_family_ref.FamilyReference(qwen_family_ref.FamilyConfig(raw), tensors)


def auto_logits(path: str, ids) -> np.ndarray:
    """`qmpi logits` under the default `--dtype auto` (float32 K/V: only the matmuls differ)."""
    out = os.path.join(testlib.test_tmp("logits"), f"auto-{os.getpid()}.npy")
    testlib.qmpi(["logits", "--model", path, "--out", out, "--kv-dtype", "f32",
                  "--ids", testlib.ids_arg(ids)], timeout=MPI_TIMEOUT)
    try:
        return np.load(out)
    finally:
        os.remove(out)


def check_case(c: testlib.Checks, label: str, kind: str, untied: bool, options, layouts) -> None:
    base = c.guard(f"{label} base model", base_model, kind, untied)
    path = base and c.guard(f"{label} write", gguf_file, label, base, options)
    if not path:
        return
    types = sorted({t for t, _, _ in gguf_ref.read(path)[1].values()})
    print(f"  {label}: {os.path.basename(path)} holds {', '.join(types)}", flush=True)
    ids = np.random.default_rng(37).integers(0, K256["vocab_size"], size=LOGITS_LEN).tolist()
    ref = reference(base, path)
    want = ref.logits(ids)
    for tp, pp in layouts:
        name = f"{label} {tp}x{pp}"
        got = c.guard(name, testlib.qmpi_logits, path, ids=ids,
                      tp=tp, pp=pp, mpi=tp * pp > 1, timeout=MPI_TIMEOUT)
        if got is not None:
            err = testlib.rel_err(got, want)
            c.check(err <= TOLERANCE, f"{name}: logits T={LOGITS_LEN} rel err {err:.2e} "
                                      f"(limit {TOLERANCE:g})")
    if label in AUTO_CASES:
        got = c.guard(f"{label} auto", auto_logits, path, ids)
        if got is not None:
            err = testlib.rel_err(got, want)
            if testlib.cpu_dot_products()["int8"]:
                # Above the exact bound: the int8 path ran; within auto's bound.
                c.check(TOLERANCE < err <= AUTO_TOLERANCE,
                        f"{label} --dtype auto (int8 activations): rel err {err:.2e} "
                        f"(above the exact {TOLERANCE:g}, limit {AUTO_TOLERANCE:g})")
            else:
                c.check(err <= TOLERANCE, f"{label} --dtype auto (no int8 dot products: the "
                                          f"exact path): rel err {err:.2e} (limit {TOLERANCE:g})")
        long_ids = np.random.default_rng(39).integers(0, K256["vocab_size"],
                                                      size=PREFILL_LEN).tolist()
        got = c.guard(f"{label} auto prefill", auto_logits, path, long_ids)
        if got is not None:
            err = testlib.rel_err(got, ref.logits(long_ids))
            what = (f"{label} --dtype auto, {PREFILL_LEN} positions in one prefill: "
                    f"rel err {err:.2e}")
            if testlib.cpu_dot_products()["bf16"]:
                c.check(TOLERANCE < err <= AUTO_TOLERANCE,
                        f"{what} (bf16 tiles: above the exact {TOLERANCE:g}, "
                        f"limit {AUTO_TOLERANCE:g})")
            else:
                c.check(err <= TOLERANCE, f"{what} (float32 panels: limit {TOLERANCE:g})")


def check_dense(c: testlib.Checks) -> None:
    """A bf16 GGUF written byte for byte runs exactly as its safetensors folder."""
    base = testlib.make_model("tiny", seed=5, dtype="bf16")
    out = os.path.join(testlib.test_tmp("models"), "gguf-bf16.gguf")
    gguf_ref.write_model(base, out, gguf_ref.options([base, out]))
    ids = testlib.random_ids(38, LOGITS_LEN)
    folder = c.guard("bf16 folder", testlib.qmpi_logits, base, ids=ids)
    gguf = c.guard("bf16 gguf", testlib.qmpi_logits, out, ids=ids)
    if folder is not None and gguf is not None:
        c.check(np.array_equal(folder, gguf), "bf16 GGUF: logits == the safetensors folder's")
    cut = os.path.join(testlib.test_tmp("models"), "gguf-truncated.gguf")
    with open(out, "rb") as src, open(cut, "wb") as dst:
        dst.write(src.read(os.path.getsize(out) - 1000))
    proc = subprocess.run([testlib.qmpi_binary(), "logits", "--model", cut, "--ids", "1,2",
                           "--out", cut + ".npy"], capture_output=True, text=True, timeout=120)
    c.check(proc.returncode != 0 and "QM246" in proc.stderr + proc.stdout,
            f"truncated GGUF: exit {proc.returncode} with QM246 gguf-truncated")


def body(c: testlib.Checks) -> None:
    check_dense(c)
    for case in CASES:
        check_case(c, *case)


if __name__ == "__main__":
    testlib.main("gguf_vs_reference", body)
