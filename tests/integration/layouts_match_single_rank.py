#!/usr/bin/python3
"""Every TP x PP layout computes what one rank computes: under `mpirun -np TP*PP`, `qmpi
logits` matches the single-rank run within 1e-4 relative and `qmpi run` produces the same 32
greedy tokens. The tiny preset (12 heads, 6 KV heads, 6 layers) allows TP 1/2/3 and PP 1/2/3.
The base model (f32, tied, one file) runs every layout, 1x1 under `mpirun -np 1` included; its
opposite (untied, 3 shards) every multi-rank layout; the other two tied/untied x single/sharded
combinations run one layout that splits both ways each (untied single file at 2x3, tied 3 shards
at 3x2), so every combination meets a mesh split both ways and both such layouts run on the
tied and the untied lm_head. With the engine's default bf16 KV cache, --tp 2 gives the single rank's 24 greedy
tokens on kv_dtype_vs_reference.py's two models (f32 and bf16 weights; moved here so that test
runs on one rank, beside the MPI tests).
"""

import testlib

ALL_LAYOUTS = [(1, 1), (2, 1), (1, 2), (1, 3), (2, 2), (2, 3), (3, 2)]
CASES = [
    (dict(seed=11, dtype="f32", shards=1, untied=False), ALL_LAYOUTS),
    (dict(seed=12, dtype="f32", shards=3, untied=True), ALL_LAYOUTS[1:]),
    (dict(seed=15, dtype="f32", shards=1, untied=True), [(2, 3)]),
    (dict(seed=16, dtype="f32", shards=3, untied=False), [(3, 2)]),
]
# kv_dtype_vs_reference.py's models and greedy prompt (its ids[:9]): --tp 2 with the bf16 KV cache.
BF16_KV_CASES = [
    dict(seed=11, dtype="f32", shards=1, untied=False),
    dict(seed=13, dtype="bf16", shards=3, untied=False),
]
BF16_KV_TOKENS = 24
LOGITS_LEN = 24
GREEDY_PROMPT_LEN = 7
GREEDY_TOKENS = 32
TOLERANCE = 1e-4
# 6 ranks share 2 cores here; give a slow start room before calling it a hang.
MPI_TIMEOUT = 240


def describe(opts: dict) -> str:
    layout = "single" if opts["shards"] == 1 else f"{opts['shards']} shards"
    return f"f32 {'untied' if opts['untied'] else 'tied'} {layout}"


def check_case(c: testlib.Checks, opts: dict, layouts) -> None:
    label = describe(opts)
    model_dir = c.guard(label, testlib.make_model, **opts)
    if model_dir is None:
        return
    ids = testlib.random_ids(200 + opts["seed"], LOGITS_LEN)
    prompt = ids[:GREEDY_PROMPT_LEN]
    base_logits = c.guard(f"{label} single rank", testlib.qmpi_logits, model_dir, ids=ids)
    base_run = c.guard(f"{label} single rank", testlib.qmpi_greedy, model_dir, GREEDY_TOKENS,
                       ids=prompt)
    if base_logits is None or base_run is None:
        return
    base_logits = base_logits.astype("float64")
    testlib.check_layouts_match(c, label, model_dir, ids, prompt, base_logits, base_run, layouts,
                                TOLERANCE, GREEDY_TOKENS, MPI_TIMEOUT)


def check_bf16_kv(c: testlib.Checks, opts: dict) -> None:
    label = f"{opts['dtype']} weights, bf16 KV"
    model_dir = c.guard(label, testlib.make_model, **opts)
    if model_dir is None:
        return
    prompt = testlib.random_ids(opts["seed"] + 40, 9)
    one = c.guard(f"{label} single rank", testlib.qmpi_greedy, model_dir, BF16_KV_TOKENS,
                  ids=prompt, kv_dtype="bf16")
    tp2 = c.guard(f"{label} tp 2", testlib.qmpi_greedy, model_dir, BF16_KV_TOKENS, ids=prompt,
                  tp=2, kv_dtype="bf16", timeout=MPI_TIMEOUT)
    if one is not None and tp2 is not None:
        c.check(tp2["output_ids"] == one["output_ids"] and len(one["output_ids"]) == BF16_KV_TOKENS,
                f"{label}: --tp 2 greedy ids == single rank's")


def body(c: testlib.Checks) -> None:
    for opts, layouts in CASES:
        check_case(c, opts, layouts)
    for opts in BF16_KV_CASES:
        check_bf16_kv(c, opts)


if __name__ == "__main__":
    testlib.main("layouts_match_single_rank", body)
