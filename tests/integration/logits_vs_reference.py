#!/usr/bin/python3
"""`qmpi logits` and greedy `qmpi run` against the float64 reference on tiny random models.

Four models cover every pair of (f32, bf16) x (tied, untied) x (single file, 3 shards).
Each gets prompts of 1, 7 and 120 random ids plus one text prompt. Logits must match the
reference to max|qmpi - ref| / max|ref| <= 1e-4 (f32 weights) or 2e-3 (bf16), and 32 greedy
tokens must equal the reference's argmax chain over the ids the tokenizer knows (the engine
never samples the embedding's extra rows); the smallest top-1/top-2 gap is printed so a
mismatch caused by a near tie can be told apart from a bug.
"""

import numpy as np

import testlib
import qwen2_ref

MODELS = [
    dict(seed=11, dtype="f32", shards=1, untied=False),
    dict(seed=12, dtype="f32", shards=3, untied=True),
    dict(seed=13, dtype="bf16", shards=3, untied=False),
    dict(seed=14, dtype="bf16", shards=1, untied=True),
]
TOLERANCE = {"f32": 1e-4, "bf16": 2e-3}
LONG = 120
SHORT = (1, 7)
GREEDY_TOKENS = 32
TEXT = ("Hello world! 你好，世界。 The quick brown fox jumps over 13 lazy dogs.\n"
        "\tdef f(x): return x*2")


def describe(opts: dict) -> str:
    layout = "single" if opts["shards"] == 1 else f"{opts['shards']} shards"
    return f"{opts['dtype']} {'untied' if opts['untied'] else 'tied'} {layout}"


def check_greedy(c, name, ref, result, valid_vocab, ids=None):
    """Compares a `qmpi run --json` result with the reference's greedy chain."""
    prompt_ids = result["prompt_ids"]
    if ids is not None and not c.check(prompt_ids == list(ids), f"{name}: prompt_ids echo --ids"):
        return
    trace = ref.greedy_trace(prompt_ids, GREEDY_TOKENS, valid_vocab)
    want = [t for t, _ in trace]
    got = result["output_ids"]
    margins = [m for _, m in trace]
    first_diff = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None)
    detail = f"min top-2 margin {min(margins):.3g} at step {int(np.argmin(margins))}"
    if first_diff is not None:
        detail += (f"; first difference at step {first_diff}: qmpi {got[first_diff]}, "
                   f"reference {want[first_diff]} (margin there {margins[first_diff]:.3g})")
    c.check(got == want, f"{name}: {len(got)} greedy ids == reference ({detail})")


def check_model(c: testlib.Checks, opts: dict) -> None:
    label = describe(opts)
    model_dir = c.guard(label, testlib.make_model, **opts)
    if model_dir is None:
        return
    ref = qwen2_ref.load_model(model_dir)
    tol = TOLERANCE[opts["dtype"]]
    valid_vocab = testlib.tokenizer_size(model_dir)
    ids = testlib.random_ids(opts["seed"], LONG)
    # The short prompts are prefixes, so one causal reference run serves all three lengths.
    ref_long = ref.logits(ids)
    for n in SHORT + (LONG,):
        got = c.guard(f"{label} T={n}", testlib.qmpi_logits, model_dir, ids=ids[:n])
        if got is not None:
            err = c.guard(f"{label} T={n}", testlib.rel_err, got, ref_long[:n])
            if err is not None:
                c.check(err <= tol, f"{label} T={n}: rel err {err:.2e} (limit {tol:g})")

    result = c.guard(f"{label} ids[:7]", testlib.qmpi_greedy, model_dir, GREEDY_TOKENS, ids=ids[:7])
    if result is not None:
        check_greedy(c, f"{label} ids[:7]", ref, result, valid_vocab, ids=ids[:7])

    result = c.guard(f"{label} text", testlib.qmpi_greedy, model_dir, GREEDY_TOKENS, prompt=TEXT)
    if result is None:
        return
    text_ids = result["prompt_ids"]
    got = c.guard(f"{label} text", testlib.qmpi_logits, model_dir, text=TEXT)
    if got is not None:
        err = c.guard(f"{label} text", testlib.rel_err, got, ref.logits(text_ids))
        if err is not None:
            c.check(err <= tol, f"{label} text prompt ({len(text_ids)} tokens): rel err {err:.2e} "
                                f"(limit {tol:g})")
    check_greedy(c, f"{label} text", ref, result, valid_vocab)


def body(c: testlib.Checks) -> None:
    for opts in MODELS:
        check_model(c, opts)


if __name__ == "__main__":
    testlib.main("logits_vs_reference", body)
