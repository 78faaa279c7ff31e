#!/usr/bin/python3
"""Qwen3, Qwen2-MoE and Qwen3-MoE under TP 2 (MoE: experts split whole over the ranks), PP 3
and TP 2 x PP 3, plus TP 3 (8 experts as 3, 3, 2) for Qwen2-MoE: `qmpi logits` equals the
float64 reference (tests/reference/qwen_family_ref.py) within 1e-4 relative and 16 greedy ids
equal the reference's argmax chain, on f32 untied models (Qwen3-MoE's TP 2 x PP 3 on a tied one,
where the last stage holds the embedding as its lm_head: the untied lm_head at TP 2 x PP 3 is
Qwen3's and Qwen2-MoE's here).
"""

import testlib
import qwen_family_ref

UNTIED = dict(seed=31, dtype="f32", shards=2, untied=True)
TIED = dict(seed=32, dtype="f32", shards=1, untied=False)  # the last stage holds the embedding
CASES = [
    ("tiny-qwen3", UNTIED, [(2, 1), (1, 3), (2, 3)]),
    ("tiny-qwen2-moe", UNTIED, [(2, 1), (1, 3), (2, 3), (3, 1)]),
    ("tiny-qwen3-moe", UNTIED, [(2, 1), (1, 3)]),
    ("tiny-qwen3-moe", TIED, [(2, 3)]),
]
LOGITS_LEN = 24
GREEDY_PROMPT_LEN = 7
GREEDY_TOKENS = 16
TOLERANCE = 1e-4
MPI_TIMEOUT = 240  # 6 ranks share 2 cores here


def check_case(c: testlib.Checks, preset: str, opts: dict, layouts) -> None:
    model_dir = c.guard(preset, testlib.make_model, preset=preset, **opts)
    if model_dir is None:
        return
    ref = qwen_family_ref.load_model(model_dir)
    ids = testlib.random_ids(300 + len(preset), LOGITS_LEN)
    prompt = ids[:GREEDY_PROMPT_LEN]
    ref_logits = ref.logits(ids)
    want = ref.greedy(prompt, GREEDY_TOKENS, testlib.tokenizer_size(model_dir))
    for tp, pp in layouts:
        name = f"{preset} {'untied' if opts['untied'] else 'tied'} {tp}x{pp}"
        got = c.guard(name, testlib.qmpi_logits, model_dir, ids=ids, tp=tp, pp=pp, mpi=True,
                      timeout=MPI_TIMEOUT)
        if got is not None:
            err = c.guard(name, testlib.rel_err, got, ref_logits)
            if err is not None:
                c.check(err <= TOLERANCE, f"{name}: logits T={len(ids)} rel err {err:.2e} "
                                          f"(limit {TOLERANCE:g})")
        result = c.guard(name, testlib.qmpi_greedy, model_dir, GREEDY_TOKENS, ids=prompt, tp=tp,
                         pp=pp, mpi=True, timeout=MPI_TIMEOUT)
        if result is not None:
            got_ids = result["output_ids"]
            first = next((i for i, (a, b) in enumerate(zip(got_ids, want)) if a != b), None)
            where = "" if first is None else f"; first difference at step {first}"
            c.check(got_ids == want, f"{name}: {len(got_ids)} greedy ids == reference{where}")


def body(c: testlib.Checks) -> None:
    for preset, opts, layouts in CASES:
        check_case(c, preset, opts, layouts)


if __name__ == "__main__":
    testlib.main("families_layouts", body)
