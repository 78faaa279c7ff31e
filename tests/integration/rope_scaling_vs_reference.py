#!/usr/bin/python3
"""rope_scaling (YaRN, linear, dynamic NTK) against the float64 reference, past the length the
model was trained for.

A random f32 model with original_max_position_embeddings (or max_position_embeddings) 64 and
14 query / 2 KV heads of 16 dims gets each scaling in its config.json. Over a 192-token prompt
(3x the original length) `qmpi logits` equals the reference (tests/reference/qwen2_ref.py's
RopeScaling, written from transformers' documented formulas) within 1e-4 relative at 1x1, TP 2,
PP 3 and TP 4 (heads 4,4,3,3: uneven), and greedy decoding from a 180-token prompt gives the
reference's tokens at 1x1 and TP 4; the default --max-model-len is the one vLLM derives (64 x 4), so nothing
here passes it.
"""

import json
import os

import numpy as np

import testlib
import qwen2_ref  # tests/reference, on the path testlib sets

ORIGINAL = 64
VOCAB = 1000
SCALINGS = {
    "yarn": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": ORIGINAL},
    "linear": {"rope_type": "linear", "factor": 4.0},
    "dynamic": {"type": "dynamic", "factor": 4.0},
}
LAYOUTS = [(1, 1), (2, 1), (1, 3), (4, 1)]
GREEDY_LAYOUTS = [(1, 1), (4, 1)]  # decode past the original length; the others share its code
LOGITS_LEN = 3 * ORIGINAL
GREEDY_PROMPT_LEN = 180
GREEDY_TOKENS = 12
TOLERANCE = 1e-4
MPI_TIMEOUT = 300


def make_model(name: str, scaling: dict) -> str:
    root = testlib.test_tmp("models")
    config = os.path.join(root, f"rope-{name}.json")
    with open(config, "w") as f:
        json.dump({
            "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_act": "silu",
            "hidden_size": 14 * 16, "intermediate_size": 96, "max_position_embeddings": ORIGINAL,
            "num_attention_heads": 14, "num_hidden_layers": 3, "num_key_value_heads": 2,
            "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "rope_scaling": scaling,
            "tie_word_embeddings": False, "torch_dtype": "float32", "use_sliding_window": False,
            "vocab_size": VOCAB, "bos_token_id": 151643, "eos_token_id": 151645}, f)
    dest = os.path.join(root, f"rope-{name}")
    testlib.qmpi(["make-model", "--out", dest, "--like", config, "--seed", 41, "--dtype", "f32"],
                 timeout=120)
    return dest


def check_scaling(c: testlib.Checks, name: str, scaling: dict) -> None:
    model_dir = c.guard(name, make_model, name, scaling)
    if model_dir is None:
        return
    ref = qwen2_ref.load_model(model_dir)
    ids = np.random.default_rng(500 + len(name)).integers(0, VOCAB, size=LOGITS_LEN).tolist()
    prompt = ids[:GREEDY_PROMPT_LEN]
    ref_logits = ref.logits(ids)
    trace = ref.greedy_trace(prompt, GREEDY_TOKENS, VOCAB)
    want = [t for t, _ in trace]
    margin = min(m for _, m in trace)
    for tp, pp in LAYOUTS:
        label = f"{name} {tp}x{pp}"
        mpi = tp * pp > 1
        got = c.guard(label, testlib.qmpi_logits, model_dir, ids=ids, tp=tp, pp=pp, mpi=mpi,
                      timeout=MPI_TIMEOUT)
        if got is not None:
            err = c.guard(label, testlib.rel_err, got, ref_logits)
            if err is not None:
                c.check(err <= TOLERANCE, f"{label}: logits T={len(ids)} rel err {err:.2e} "
                                          f"(limit {TOLERANCE:g})")
        if (tp, pp) not in GREEDY_LAYOUTS:
            continue
        result = c.guard(label, testlib.qmpi_greedy, model_dir, GREEDY_TOKENS, ids=prompt, tp=tp,
                         pp=pp, mpi=mpi, timeout=MPI_TIMEOUT)
        if result is not None:
            got_ids = result["output_ids"]
            first = next((i for i, (a, b) in enumerate(zip(got_ids, want)) if a != b), None)
            where = "" if first is None else f"; first difference at step {first}"
            c.check(got_ids == want, f"{label}: {len(got_ids)} greedy ids == reference "
                                     f"(min top-2 margin {margin:.3g}){where}")


def body(c: testlib.Checks) -> None:
    for name, scaling in SCALINGS.items():
        check_scaling(c, name, scaling)


if __name__ == "__main__":
    testlib.main("rope_scaling_vs_reference", body)
