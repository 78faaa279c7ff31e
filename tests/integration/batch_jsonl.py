#!/usr/bin/python3
"""`qmpi batch` end to end on the tiny model: 200 requests (plain, chat and OpenAI Batch lines,
greedy and seeded, n = 2) with 5 bad lines, under `mpirun -np 6 --tp 2 --pp 3`. Exactly 200
result lines, the 5 errors with their codes and messages, three micro-batches in flight (one
per stage), and every result identical to the same file run at 1x1, to a 1x2 run whose tiny KV
cache and token budget force preemption and chunked prefill while two micro-batches are in
flight (without prefix caching, in input order), and, for a handful, to `qmpi run` of the
request alone. The HDF5 output opens in h5py and agrees with the JSONL.
"""

import json
import os
import re
import random

import h5py
import numpy as np

import testlib

MAX_MODEL_LEN = 256
WORDS = ("the quick brown fox jumps over a lazy dog while seven red birds sing about rivers "
         "and mountains near old stone bridges").split()
BAD = {  # custom_id -> (line, catalogue code)
    "qmpi-line-18": ('{"id": "bad-json", "prompt": ', "QM500"),
    "bad-field": (json.dumps({"id": "bad-field", "prompt": "x", "temprature": 0}), "QM501"),
    "bad-type": (json.dumps({"id": "bad-type", "prompt": "x", "max_tokens": "8"}), "QM501"),
    "bad-long": (json.dumps({"id": "bad-long", "prompt": " ".join(["word"] * 300),
                             "max_tokens": 4}), "QM502"),
    "bad-sampling": (json.dumps({"id": "bad-sampling", "prompt": "x", "top_p": 1.5}), "QM503"),
}


def make_input(path: str) -> None:
    rng = random.Random(5)
    lines = []
    for i in range(195):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 30)))
        n_out = rng.randint(2, 8)
        kind = i % 4
        if kind == 0:
            line = {"id": f"p{i}", "prompt": text, "max_tokens": n_out, "temperature": 0}
        elif kind == 1:
            line = {"custom_id": f"c{i}", "method": "POST", "url": "/v1/chat/completions",
                    "body": {"model": "tiny", "messages": [{"role": "user", "content": text}],
                             "max_tokens": n_out, "temperature": 0, "logprobs": True,
                             "top_logprobs": 2}}
        elif kind == 2:
            line = {"custom_id": f"o{i}", "method": "POST", "url": "/v1/completions",
                    "body": {"prompt": text, "max_tokens": n_out, "temperature": 0}}
        else:
            line = {"id": f"s{i}", "prompt": text, "max_tokens": n_out, "temperature": 0.8,
                    "seed": i, "n": 2}
        lines.append(json.dumps(line))
    for k, (line, _) in enumerate(BAD.values()):
        lines.insert(17 + 40 * k, line)  # the first lands on line 18
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def load(path: str):
    with open(path) as f:
        raw = f.read()
    if not raw.endswith("\n"):
        raise testlib.TestFailure(f"{path} does not end with a newline")
    return [json.loads(line) for line in raw.splitlines()]


def token_ids(result) -> list:
    return [c["token_ids"] for c in result["response"]["body"]["choices"]]


def batch(model, inp, out, tp=1, pp=1, extra=()):
    # Exact math: the layouts are compared token for token, and a random model's greedy answers
    # meet near-ties (p148: top two 0.002 apart at 36) that bf16 K/V rounding after a differently
    # ordered all-reduce tips.
    args = ["batch", "--model", model, "--input", inp, "--output", out, "--overwrite",
            "--token-ids", "--max-model-len", MAX_MODEL_LEN, "--served-model-name", "tiny"] + \
        testlib.EXACT_KV + list(extra)
    proc = testlib.qmpi(args, tp=tp, pp=pp, timeout=240)
    summary = [l for l in proc.stderr.splitlines() if " ok, " in l]
    print("  " + (summary[-1] if summary else "(no summary line)"), flush=True)
    return load(out), (summary[-1] if summary else "")


def compare(c: testlib.Checks, label: str, got, want) -> None:
    got_by = {r["custom_id"]: r for r in got}
    diffs = [cid for cid, r in want.items()
             if r["error"] is None and token_ids(got_by.get(cid, r)) != token_ids(r)]
    missing = [cid for cid in want if cid not in got_by]
    c.check(not diffs and not missing and len(got_by) == len(got),
            f"{label}: every result identical to 1x1 ({len(diffs)} differ"
            f"{', e.g. ' + diffs[0] if diffs else ''}; {len(missing)} missing)")


def body(c: testlib.Checks) -> None:
    model = testlib.make_model("tiny", seed=21)
    work = testlib.test_tmp("batch_jsonl")
    inp = os.path.join(work, "in.jsonl")
    make_input(inp)

    h5_path = os.path.join(work, "mesh.h5")
    if os.path.exists(h5_path):
        os.remove(h5_path)
    mesh, summary = batch(model, inp, os.path.join(work, "mesh.jsonl"), tp=2, pp=3,
                          extra=["--output-h5", h5_path])
    c.check("up to 3 micro-batches in flight" in summary,
            "2x3: the three stages each had a micro-batch in flight (PP micro-batching)")
    ids = [r["custom_id"] for r in mesh]
    c.check(len(mesh) == 200 and len(set(ids)) == 200,
            f"2x3: {len(mesh)} lines, {len(set(ids))} distinct ids (want 200, 200)")
    errors = {r["custom_id"]: r for r in mesh if r["error"] is not None}
    c.check(set(errors) == set(BAD), f"2x3: errors for exactly the bad lines: {sorted(errors)}")
    for cid, (_, code) in BAD.items():
        e = errors.get(cid, {}).get("error") or {}
        c.check(e.get("code") == code and len(e.get("message", "")) > 20,
                f"{cid}: {e.get('code')} (want {code}): {e.get('message', '')[:90]}")
    ok = [r for r in mesh if r["error"] is None]
    c.check(all(r["response"]["status_code"] == 200 and r["response"]["body"]["usage"]
                ["completion_tokens"] == sum(len(t) for t in token_ids(r)) for r in ok),
            f"2x3: {len(ok)} results with status 200 and matching usage")
    chat = [r for r in ok if r["custom_id"].startswith("c")]
    c.check(all(r["response"]["body"]["object"] == "chat.completion" and
                len(r["response"]["body"]["choices"][0]["logprobs"]["content"]) ==
                len(token_ids(r)[0]) for r in chat),
            f"2x3: {len(chat)} chat completions with a logprob per token")

    single, _ = batch(model, inp, os.path.join(work, "single.jsonl"))
    want = {r["custom_id"]: r for r in single}
    compare(c, "2x3 vs 1x1", mesh, want)
    # Two pipeline stages on a cache this small: preemption while other micro-batches are in
    # flight.
    tight, summary = batch(model, inp, os.path.join(work, "tight.jsonl"), pp=2,
                           extra=["--kv-blocks", 12, "--max-batched-tokens", 24,
                                  "--max-num-seqs", 8, "--no-prefix-caching", "--ordered"])
    compare(c, "1x2, 12 KV blocks, 24-token steps", tight, want)
    preempted = re.search(r"(\d+) preemptions", summary)
    c.check(preempted is not None and int(preempted.group(1)) > 0 and
            "up to 2 micro-batches in flight" in summary,
            f"1x2 tight: preemptions with 2 micro-batches in flight ({summary[-120:]})")
    order = [int(r["id"].split("_")[-1]) for r in tight]
    c.check(order == sorted(order) and len(order) == 200, "--ordered: results in input order")

    # A handful against `qmpi run` of the request alone.
    greedy = [r for r in ok if r["custom_id"][0] in "po"][:5]
    for r in greedy:
        b = r["response"]["body"]
        run = testlib.qmpi(["run", "--model", model, "--ids",
                            testlib.ids_arg(b["prompt_token_ids"]), "--max-tokens",
                            len(token_ids(r)[0]), "--temperature", 0, "--json"] +
                           testlib.EXACT_KV)
        got = json.loads(run.stdout.splitlines()[-1])
        c.check(got["output_ids"] == token_ids(r)[0],
                f"{r['custom_id']}: batch 2x3 {token_ids(r)[0]} == qmpi run {got['output_ids']}")

    with h5py.File(h5_path, "r") as f:
        cids = [x.decode() for x in f["custom_id"][:]]
        choice, start, count = f["choice"][:], f["token_start"][:], f["token_count"][:]
        toks, lps = f["token_ids"][:], f["logprobs"][:]
        by_id = {r["custom_id"]: r for r in ok}
        rows = sum(len(r["response"]["body"]["choices"]) for r in ok)
        same = all(toks[start[i]:start[i] + count[i]].tolist() == token_ids(by_id[cid])[choice[i]]
                   for i, cid in enumerate(cids))
        c.check(len(cids) == rows and set(cids) == set(by_id) and same,
                f"HDF5: {len(cids)} rows (want {rows}), token ids agree with the JSONL: {same}")
        chat_lp = [(cid, i) for i, cid in enumerate(cids) if cid.startswith("c")]
        lp_ok = all(np.allclose(lps[start[i]:start[i] + count[i]],
                                [t["logprob"] for t in by_id[cid]["response"]["body"]["choices"]
                                 [0]["logprobs"]["content"]], atol=1e-6) for cid, i in chat_lp)
        c.check(lp_ok and np.all(f["ttft_s"][:] >= 0) and
                np.all(f["latency_s"][:] >= f["ttft_s"][:]),
                "HDF5: logprobs agree with the JSONL, timings are ordered")


if __name__ == "__main__":
    testlib.main("batch_jsonl", body)
