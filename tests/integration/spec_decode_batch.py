#!/usr/bin/python3
"""`qmpi batch --speculative-config` (prompt lookup) gives the plain run's results, line for line.

One input of 24 requests whose prompts repeat a phrase (so prompt lookup has something to
guess), greedy and seeded (temperature 0.9), n = 2 and top logprobs on some, a stop string on
some, runs plain at 1x1, then with ngram speculation (k = 4) at 1x1, TP 2, PP 3 (micro-batches
in flight), TP 4 (the tiny model's 6 KV heads split unevenly) and --dp 2. Every result equals
the plain one: tokens, text, finish reasons, usage and top-logprob tokens exactly, logprobs
within 1e-3 (a step that checks guesses computes several rows in one pass: the same terms, added
in another order). Each speculative run accepted some guesses (the batch summary says so).
"""

import json
import os
import random
import re

import testlib as t

MAX_MODEL_LEN = 256
LOGPROB_TOLERANCE = 1e-3
SPEC = '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3, ' \
       '"prompt_lookup_min": 1}'
WORDS = ("the quick brown fox jumps over a lazy dog while seven red birds sing about rivers "
         "and mountains near old stone bridges").split()


def make_input(path: str) -> None:
    rng = random.Random(32)
    with open(path, "w") as f:
        for i in range(24):
            phrase = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 8)))
            line = {"id": f"r{i}", "prompt": " ".join([phrase] * rng.randint(2, 4)),
                    "max_tokens": rng.randint(8, 24), "temperature": 0}
            if i % 4 == 3:
                line.update(temperature=0.9, seed=100 + i, n=2, logprobs=2)
            if i % 5 == 2:
                line["stop"] = [rng.choice(WORDS)]
            f.write(json.dumps(line) + "\n")


def run_batch(model: str, inp: str, label: str, extra: list, ranks: int) -> tuple:
    out = os.path.join(t.test_tmp("spec_batch"), f"{label}.jsonl")
    return t.run_batch_job(model, inp, out, extra, ranks, MAX_MODEL_LEN, timeout=180)


def body(c: t.Checks) -> None:
    model = t.make_model()
    inp = os.path.join(t.test_tmp("spec_batch"), "input.jsonl")
    make_input(inp)
    ref, _ = run_batch(model, inp, "plain", [], 1)
    c.check(len(ref) == 24, f"plain 1x1: {len(ref)} results")
    spec = ["--speculative-config", SPEC]
    for label, layout, ranks in (("1x1", [], 1), ("tp2", ["--tp", "2"], 2),
                                 ("pp3", ["--pp", "3"], 3), ("tp4", ["--tp", "4"], 4),
                                 ("dp2", ["--dp", "2"], 2)):
        got = c.guard(label, run_batch, model, inp, label, spec + layout, ranks)
        if got is None:
            continue
        results, log = got
        differ = [rid for rid in ref if rid not in results or not t.same_results(results[rid], ref[rid], LOGPROB_TOLERANCE)]
        c.check(not differ and len(results) == len(ref),
                f"ngram {label}: {len(results) - len(differ)}/{len(ref)} results equal plain "
                f"1x1's (tokens, text, usage; logprobs within {LOGPROB_TOLERANCE:g})" +
                (f"; first differing: {differ[0]}: {str(results.get(differ[0]))[:600]} vs "
                 f"{str(ref[differ[0]])[:600]}" if differ else ""))
        m = re.search(r"speculation: (\d+) of (\d+) guessed tokens accepted", log)
        c.check(m is not None and int(m.group(1)) > 0,
                f"ngram {label}: guesses were accepted ({m.group(0) if m else 'no summary'})")


t.main("spec_decode_batch", body)
