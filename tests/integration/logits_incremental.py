#!/usr/bin/python3
"""The KV cache path gives the logits of a full prefill: `qmpi logits --mode incremental`
(one token per step) and `--mode chunked --chunk 5|16` (a prompt fed in pieces) must match
`--mode prefill` of the same 71 tokens within 1e-5 relative, for f32 and bf16 weights.
71 = 14*5 + 1 = 4*16 + 7, so both chunk sizes end on a partial chunk, and the prompt spans
several KV blocks of any block size up to 64.
"""

import testlib

MODELS = [dict(seed=11, dtype="f32", shards=1, untied=False),
          dict(seed=14, dtype="bf16", shards=1, untied=True)]
PROMPT_LEN = 71
TOLERANCE = 1e-5
VARIANTS = [dict(mode="incremental"), dict(mode="chunked", chunk=5), dict(mode="chunked", chunk=16)]


def body(c: testlib.Checks) -> None:
    for opts in MODELS:
        label = f"{opts['dtype']} {'untied' if opts['untied'] else 'tied'}"
        model_dir = c.guard(label, testlib.make_model, **opts)
        if model_dir is None:
            continue
        ids = testlib.random_ids(100 + opts["seed"], PROMPT_LEN)
        full = c.guard(f"{label} prefill", testlib.qmpi_logits, model_dir, ids=ids, mode="prefill")
        if full is None:
            continue
        for variant in VARIANTS:
            name = f"{label} {variant['mode']}"
            if "chunk" in variant:
                name += f" chunk {variant['chunk']}"
            got = c.guard(name, testlib.qmpi_logits, model_dir, ids=ids, **variant)
            if got is None:
                continue
            err = c.guard(name, testlib.rel_err, got, full.astype("float64"))
            if err is not None:
                c.check(err <= TOLERANCE, f"{name} vs prefill, T={PROMPT_LEN}: rel err {err:.2e} "
                                          f"(limit {TOLERANCE:g})")


if __name__ == "__main__":
    testlib.main("logits_incremental", body)
