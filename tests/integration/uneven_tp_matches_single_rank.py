#!/usr/bin/python3
"""Tensor parallelism that divides nothing computes what one rank computes.

Two random f32 models with the head shapes that force an uneven split, a small head_dim so that
they stay fast, and an MLP width (94) and vocabulary (1000) that no TP size below divides:
- 64 query / 8 KV heads (the Qwen2.5-72B shape): TP 3, 5, 6 and TP 3 x PP 2. On TP 6 ranks hold
  11,11,11,11,10,10 query heads and 13 KV-head copies, two of them shared by neighbours.
- 14 query / 2 KV heads (the Qwen2.5-0.5B shape): TP 4 (4,4,3,3 heads) and TP 3.
For each layout `qmpi logits` equals the single-rank run within 1e-5 relative and `qmpi run`
gives the same greedy tokens; the single-rank run itself matches the float64 reference.
"""

import json
import os

import numpy as np

import testlib
import qwen2_ref  # tests/reference, on the path testlib sets

HEAD_DIM = 8
MODELS = [
    dict(name="64q/8kv", heads=64, kv_heads=8, seed=31,
         layouts=[(3, 1), (5, 1), (6, 1), (3, 2)]),
    dict(name="14q/2kv", heads=14, kv_heads=2, seed=32, layouts=[(4, 1), (3, 1)]),
]
INTERMEDIATE = 94
VOCAB = 1000
LAYERS = 2
LOGITS_LEN = 12
GREEDY_PROMPT_LEN = 5
GREEDY_TOKENS = 16
TOLERANCE = 1e-5
REFERENCE_TOLERANCE = 1e-4  # f32 engine vs float64 reference, as logits_vs_reference.py
MPI_TIMEOUT = 240


def make_model(spec: dict) -> str:
    """A random model of the spec's shape, made with `qmpi make-model --like` (cached)."""
    root = testlib.test_tmp("models")
    config = os.path.join(root, f"uneven-{spec['heads']}-{spec['kv_heads']}.json")
    with open(config, "w") as f:
        json.dump({
            "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
            "hidden_act": "silu", "hidden_size": spec["heads"] * HEAD_DIM,
            "intermediate_size": INTERMEDIATE, "max_position_embeddings": 4096,
            "num_attention_heads": spec["heads"], "num_hidden_layers": LAYERS,
            "num_key_value_heads": spec["kv_heads"], "rms_norm_eps": 1e-6,
            "rope_theta": 1000000.0, "tie_word_embeddings": False, "torch_dtype": "float32",
            "use_sliding_window": False, "vocab_size": VOCAB,
            "bos_token_id": 151643, "eos_token_id": 151645}, f)
    dest = os.path.join(root, f"uneven-{spec['heads']}-{spec['kv_heads']}-seed{spec['seed']}")
    testlib.qmpi(["make-model", "--out", dest, "--like", config, "--seed", spec["seed"],
                  "--dtype", "f32"], timeout=120)
    return dest


def check_model(c: testlib.Checks, spec: dict) -> None:
    label = spec["name"]
    model_dir = c.guard(label, make_model, spec)
    if model_dir is None:
        return
    ids = np.random.default_rng(spec["seed"]).integers(0, VOCAB, size=LOGITS_LEN).tolist()
    prompt = ids[:GREEDY_PROMPT_LEN]
    base = c.guard(f"{label} 1x1", testlib.qmpi_logits, model_dir, ids=ids)
    base_run = c.guard(f"{label} 1x1", testlib.qmpi_greedy, model_dir, GREEDY_TOKENS, ids=prompt)
    if base is None or base_run is None:
        return
    base = base.astype("float64")
    ref = qwen2_ref.load_model(model_dir).logits(ids)
    err = testlib.rel_err(base, ref)
    c.check(err <= REFERENCE_TOLERANCE,
            f"{label} 1x1: logits vs float64 reference rel err {err:.2e} "
            f"(limit {REFERENCE_TOLERANCE:g})")
    testlib.check_layouts_match(c, label, model_dir, ids, prompt, base, base_run, spec["layouts"],
                                TOLERANCE, GREEDY_TOKENS, MPI_TIMEOUT)


def body(c: testlib.Checks) -> None:
    for spec in MODELS:
        check_model(c, spec)


if __name__ == "__main__":
    testlib.main("uneven_tp_matches_single_rank", body)
