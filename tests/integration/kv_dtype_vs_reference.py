#!/usr/bin/python3
"""`qmpi logits` and greedy `qmpi run` with a bf16 (the default) and an fp8 KV cache against the
float64 reference, on tiny f32 and bf16 models.

Rounding K and V is itself a large change on these random models: the float64 reference that
rounds K/V as the cache does (kv_round.py) moves 4.7e-3 (bf16) and 8e-2 (fp8) of max |logit|
away from the unrounded one on a 20-token prompt. So the engine is held to the rounded
reference at ROUNDED_BOUND (what is left is the float32 math, and the rare element whose float32
and float64 values round to different neighbours, a whole bf16 or e4m3 step apart), and
to the unrounded one at PLAIN_BOUND, the documented bound (docs/perf.md). The default (no
--kv-dtype) must be bf16, greedy continuations must equal the rounded reference's wherever its
top-2 margin is clear. One rank only, so the test runs beside the MPI tests: that --tp 2 gives the
single rank's greedy tokens with a bf16 cache, on both models, is checked by
layouts_match_single_rank.py (BF16_KV_CASES).
"""

import numpy as np

import testlib
import qwen2_ref

MODELS = [
    dict(seed=11, dtype="f32", shards=1, untied=False),
    dict(seed=13, dtype="bf16", shards=3, untied=False),
]
LEN = 120
PLAIN_BOUND = {"bf16": 1e-2, "fp8": 1.5e-1}
ROUNDED_BOUND = {"bf16": 1e-3, "fp8": 2e-3}
GREEDY_TOKENS = 24
CLEAR_MARGIN = 0.05  # top-1 minus top-2 logit below which a greedy step is a near tie


def greedy_until_tie(c, name, ref, result, valid_vocab):
    trace = ref.greedy_trace(result["prompt_ids"], GREEDY_TOKENS, valid_vocab)
    clear = next((i for i, (_, m) in enumerate(trace) if m < CLEAR_MARGIN), len(trace))
    want = [t for t, _ in trace][:clear]
    got = result["output_ids"][:clear]
    c.check(got == want, f"{name}: first {clear} greedy ids (clear margins) == rounded reference")


def check_model(c: testlib.Checks, opts: dict) -> None:
    label = f"{opts['dtype']} weights"
    model_dir = c.guard(label, testlib.make_model, **opts)
    if model_dir is None:
        return
    ids = testlib.random_ids(opts["seed"] + 40, LEN)
    base = qwen2_ref.load_model(model_dir)
    plain = base.logits(ids)
    valid_vocab = testlib.tokenizer_size(model_dir)
    default = None
    for kv in ("bf16", "fp8"):
        name = f"{label}, {kv} KV"
        got = c.guard(name, testlib.qmpi_logits, model_dir, ids=ids, kv_dtype=kv)
        if got is None:
            continue
        if kv == "bf16":
            default = got
        rounded = qwen2_ref.Qwen2Reference(base.cfg, base.w, kv)  # the same weights, read once
        want = rounded.logits(ids)
        err, own = testlib.rel_err(got, plain), testlib.rel_err(want, plain)
        c.check(err <= PLAIN_BOUND[kv], f"{name}: rel err {err:.2e} vs reference (limit "
                                        f"{PLAIN_BOUND[kv]:g}; rounding alone in the reference: "
                                        f"{own:.2e})")
        err, bound = testlib.rel_err(got, want), ROUNDED_BOUND[kv]
        c.check(err <= bound, f"{name}: rel err {err:.2e} vs the reference rounding K/V alike "
                              f"(limit {bound:g})")
        result = c.guard(name, testlib.qmpi_greedy, model_dir, GREEDY_TOKENS, ids=ids[:9],
                         kv_dtype=kv)
        if result is not None:
            greedy_until_tie(c, name, rounded, result, valid_vocab)

    if default is not None:
        out = testlib.test_tmp("logits") + f"/kv-default-{opts['seed']}.npy"
        testlib.qmpi(["logits", "--model", model_dir, "--ids", testlib.ids_arg(ids), "--out", out]
                     + testlib.EXACT_MATH)
        c.check(np.array_equal(np.load(out), default), f"{label}: no --kv-dtype == --kv-dtype bf16")


def body(c: testlib.Checks) -> None:
    for opts in MODELS:
        check_model(c, opts)


if __name__ == "__main__":
    testlib.main("kv_dtype_vs_reference", body)
