#!/usr/bin/python3
"""`qmpi logits` and greedy `qmpi run` on one rank against the float64 reference
(tests/reference/qwen_family_ref.py) for Qwen3 (decoupled head_dim, q/k norm), Qwen2-MoE (shared
expert, a dense layer among sparse ones) and Qwen3-MoE (renormalised top-k, sparse every second
layer), tied and untied, f32 and bf16; and the QMPI_DUMP hook's per-layer tensors against the
reference's intermediates. Logits must match within max|qmpi - ref| / max|ref| <= 1e-4 (f32)
or 2e-3 (bf16); greedy ids must equal the reference's argmax chain (the smallest top-2 margin
is printed so a near tie can be told from a bug).
"""

import glob
import os

import numpy as np

import testlib
import qwen_family_ref

FAMILIES = ["tiny-qwen3", "tiny-qwen2-moe", "tiny-qwen3-moe"]
MODELS = [
    dict(seed=21, dtype="f32", shards=1, untied=True),
    dict(seed=22, dtype="f32", shards=3, untied=False),
    dict(seed=23, dtype="bf16", shards=1, untied=False),
]
TOLERANCE = {"f32": 1e-4, "bf16": 2e-3}
LENGTHS = (1, 40)
GREEDY_TOKENS = 16
DUMPED = ["attn_norm", "q", "k", "attn_out", "router_logits", "mlp_out", "hidden"]


def describe(preset: str, opts: dict) -> str:
    return f"{preset} {opts['dtype']} {'untied' if opts['untied'] else 'tied'}"


def check_logits(c, label, model_dir, ref_logits, ids, tol):
    got = c.guard(label, testlib.qmpi_logits, model_dir, ids=ids)
    if got is not None:
        err = c.guard(label, testlib.rel_err, got, ref_logits[:len(ids)])
        if err is not None:
            c.check(err <= tol, f"{label} T={len(ids)}: rel err {err:.2e} (limit {tol:g})")


def check_greedy(c, label, model_dir, ref, prompt, valid_vocab):
    result = c.guard(label, testlib.qmpi_greedy, model_dir, GREEDY_TOKENS, ids=prompt)
    if result is None:
        return
    trace = ref.greedy_trace(prompt, GREEDY_TOKENS, valid_vocab)
    want, margins = [t for t, _ in trace], [m for _, m in trace]
    got = result["output_ids"]
    first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None)
    where = "" if first is None else f"; first difference at step {first}"
    c.check(got == want, f"{label}: {len(got)} greedy ids == reference (min top-2 margin "
                         f"{min(margins):.3g}{where})")


def check_dump(c, label, model_dir, ref, ids):
    """QMPI_DUMP of every layer's intermediates equals the reference's trace."""
    out = testlib.test_tmp("dump", f"{os.getpid()}-{label.replace(' ', '_')}")
    for f in glob.glob(os.path.join(out, "*.npy")):
        os.remove(f)
    spec = ",".join(f"layer.*.{n}" for n in DUMPED)
    env = dict(os.environ, QMPI_DUMP=spec, QMPI_DUMP_DIR=out)
    args = [testlib.qmpi_binary(), "logits", "--model", model_dir, "--ids", testlib.ids_arg(ids),
            "--out", os.path.join(out, "logits.npy")] + testlib.EXACT_KV
    if c.guard(label, testlib.run, args, 180, env) is None:
        return
    _, layers = ref.trace(ids)
    worst, count = 0.0, 0
    for i, want in enumerate(layers):
        for name in DUMPED:
            files = sorted(glob.glob(os.path.join(out, f"layer.{i}.{name}.rank0.step*.npy")))
            if name not in want:  # router logits of a dense layer
                if files:
                    c.check(False, f"{label}: {name} dumped for dense layer {i}")
                continue
            if not files:
                c.check(False, f"{label}: layer.{i}.{name} was not dumped")
                continue
            got = np.load(files[-1])
            err = testlib.rel_err(got, want[name])
            worst, count = max(worst, err), count + 1
            if err > 1e-4:
                c.check(False, f"{label}: layer.{i}.{name} rel err {err:.2e}")
    c.check(count > 0 and worst <= 1e-4,
            f"{label}: {count} dumped tensors equal the reference's (worst rel err {worst:.2e})")


def check_family(c, preset: str) -> None:
    for opts in MODELS:
        label = describe(preset, opts)
        model_dir = c.guard(label, testlib.make_model, preset=preset, **opts)
        if model_dir is None:
            continue
        ref = qwen_family_ref.load_model(model_dir)
        ids = testlib.random_ids(opts["seed"] + len(preset), max(LENGTHS))
        ref_logits = ref.logits(ids)
        for n in LENGTHS:
            check_logits(c, label, model_dir, ref_logits, ids[:n], TOLERANCE[opts["dtype"]])
        if opts["dtype"] == "f32":
            check_greedy(c, label, model_dir, ref, ids[:7], testlib.tokenizer_size(model_dir))
        if opts["untied"]:
            check_dump(c, label, model_dir, ref, ids[:9])


def body(c: testlib.Checks) -> None:
    for preset in FAMILIES:
        check_family(c, preset)


if __name__ == "__main__":
    testlib.main("families_vs_reference", body)
