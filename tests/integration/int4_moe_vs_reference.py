#!/usr/bin/python3
"""int4 (AWQ, GPTQ) mixture-of-experts checkpoints against the float64 reference.

`qmpi make-model --quant` on the MoE presets quantizes every expert's and the shared expert's
projections and the attention projections, and keeps the routers (`mlp.gate`,
`shared_expert_gate`) in float, as AutoAWQ / AutoGPTQ releases of Qwen2-MoE and Qwen3-MoE do.
The reference unpacks the int4 files with its own code (tests/reference/int4_ref.py) and must get
exactly the float twin's weights; then `qmpi logits` must match the reference's logits within
the int4 bounds (2e-3 of the largest |logit|) at 1x1, TP 2 (experts split whole) and TP 3
(Qwen2-MoE: 8 experts over 3 ranks, 3 + 3 + 2; Qwen3-MoE: 7 experts, 3 + 2 + 2).
"""

import json
import os

import numpy as np

import testlib  # first: it puts tests/reference on the path
import int4_ref
import qwen_family_ref
import safetensors_ref

MODELS = [
    ("qwen2-moe gptq g32", "tiny-qwen2-moe", ["--quant", "gptq", "--group-size", "32"]),
    ("qwen3-moe awq g32", "tiny-qwen3-moe", ["--quant", "awq", "--group-size", "32"]),
]
LAYOUTS = [(1, 1), (2, 1), (3, 1)]
TOLERANCE = 2e-3
LOGITS_LEN = 16
MPI_TIMEOUT = 240


def make(label: str, preset: str, args) -> tuple:
    """(int4 folder, float twin folder), made once per qmpi binary."""
    return testlib.make_model_pair("int4-" + label.replace(" ", "-"),
                                   ["--preset", preset, "--seed", "27"] + args)


def body(c: testlib.Checks) -> None:
    for label, preset, args in MODELS:
        made = c.guard(label, make, label, preset, args)
        if made is None:
            continue
        model_dir, twin_dir = made
        with open(os.path.join(model_dir, "config.json")) as f:
            quant = json.load(f)["quantization_config"]
        tensors = safetensors_ref.read_model_dir(model_dir)
        c.check(any(".mlp.experts." in n and n.endswith(".qweight") for n in tensors)
                and any(n.endswith(".mlp.gate.weight") for n in tensors),
                f"{label}: experts are int4 (qweight) and the router is a float .weight")
        mine = int4_ref.dequantize_tensors(tensors, quant)
        twin = safetensors_ref.read_model_dir(twin_dir)
        worst = max(float(np.max(np.abs(mine[n] - twin[n]))) for n in twin if n in mine)
        c.check(sorted(mine) == sorted(twin) and worst == 0.0,
                f"{label}: reference unpacking == float twin (max diff {worst:g})")
        ids = testlib.random_ids(31, LOGITS_LEN)
        want = qwen_family_ref.load_model(model_dir).logits(ids)
        for tp, pp in LAYOUTS:
            name = f"{label} {tp}x{pp}"
            got = c.guard(name, testlib.qmpi_logits, model_dir, ids=ids, tp=tp, pp=pp,
                          mpi=tp * pp > 1, timeout=MPI_TIMEOUT)
            if got is not None:
                err = testlib.rel_err(got, want)
                c.check(err <= TOLERANCE, f"{name}: logits T={LOGITS_LEN} rel err {err:.2e} "
                                          f"(limit {TOLERANCE:g})")


if __name__ == "__main__":
    testlib.main("int4_moe_vs_reference", body)
