#!/usr/bin/python3
"""`qmpi batch` over data-parallel replicas and wide uneven TP gives the 1x1 results.

One input of 48 requests (plain and chat, greedy and seeded, n = 2 on some) runs at 1x1, then on
6 oversubscribed ranks as --dp 2 --tp 3, --dp 2 --pp 3 (pipelined replicas, micro-batches in
flight on both) and --tp 6 (uneven heads: 12 query / 6 KV heads over 6 ranks is even, so the
tiny model's 384-wide MLP and 192 hidden make the split; the head mapping runs all the same).
Every result line equals the 1x1 one: tokens, text, finish reasons, usage and the top-logprob
tokens exactly, logprobs within 1e-3 (TP and batching add the same terms in another order). With
replicas, the mapping table shows the replica column and both replicas generated tokens.

Every run keeps float32 K/V (testlib.EXACT_KV, which says why).
"""

import json
import os
import random
import re
import subprocess

import testlib as t

MAX_MODEL_LEN = 256
LOGPROB_TOLERANCE = 1e-3
WORDS = ("the quick brown fox jumps over a lazy dog while seven red birds sing about rivers "
         "and mountains near old stone bridges").split()


def make_input(path: str) -> None:
    rng = random.Random(7)
    with open(path, "w") as f:
        for i in range(48):
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 40)))
            line = {"id": f"r{i}", "max_tokens": rng.randint(3, 10)}
            if i % 3 == 1:
                line["messages"] = [{"role": "user", "content": text}]
            else:
                line["prompt"] = text
            if i % 4 == 3:
                line.update(temperature=0.9, seed=100 + i, n=2)
                if "messages" in line:
                    line.update(logprobs=True, top_logprobs=2)
            else:
                line["temperature"] = 0
            f.write(json.dumps(line) + "\n")


def run_batch(model: str, inp: str, label: str, extra: list, ranks: int) -> tuple:
    out = os.path.join(t.test_tmp("dp_batch"), f"{label}.jsonl")
    return t.run_batch_job(model, inp, out, extra, ranks, MAX_MODEL_LEN, timeout=150)


def body(c: t.Checks) -> None:
    model = t.make_model()
    inp = os.path.join(t.test_tmp("dp_batch"), "input.jsonl")
    make_input(inp)
    proc = subprocess.run([t.qmpi_binary(), "run", "--model", model, "--dp", "2", "--prompt", "x"],
                          capture_output=True, text=True, timeout=60)
    c.check(proc.returncode == 2 and "QM100" in proc.stderr and "--dp is for batch, serve and bench"
            in proc.stderr, f"qmpi run --dp 2 is refused: {proc.stderr.strip()[:160]!r}")
    ref, _ = run_batch(model, inp, "1x1", [], 1)
    c.check(len(ref) == 48, f"1x1: {len(ref)} results")
    for label, layout in (("dp2-tp3", ["--dp", "2", "--tp", "3"]),
                          ("dp2-pp3", ["--dp", "2", "--pp", "3"]),
                          ("tp6", ["--tp", "6"])):
        got = c.guard(label, run_batch, model, inp, label, layout, 6)
        if got is None:
            continue
        results, log = got
        differ = [rid for rid in ref if rid not in results or not t.same_results(results[rid], ref[rid], LOGPROB_TOLERANCE)]
        c.check(not differ and len(results) == len(ref),
                f"{label}: {len(results) - len(differ)}/{len(ref)} results equal 1x1's "
                f"(tokens, text, usage; logprobs within {LOGPROB_TOLERANCE:g})" +
                (f"; first differing: {differ[0]}: {str(results.get(differ[0]))[:600]} vs "
                 f"{str(ref[differ[0]])[:600]}" if differ else ""))
        if label.startswith("dp"):
            per = {int(m.group(1)): int(m.group(2))
                   for m in re.finditer(r"replica (\d+): \d+ steps, (\d+) tokens generated", log)}
            c.check("replica" in log.split("mesh (")[1].splitlines()[1] and
                    len(per) == 2 and all(v > 0 for v in per.values()),
                    f"{label}: mapping table has a replica column; tokens per replica {per}")


t.main("dp_replicas_batch", body)
