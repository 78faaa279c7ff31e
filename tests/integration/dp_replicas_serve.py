#!/usr/bin/python3
"""`qmpi serve --dp 2 --tp 3` on 6 oversubscribed ranks: two TP 3 replicas behind one front.

32 ZeroMQ and 32 HTTP clients at once (chat and completions, streamed and not, greedy and
seeded) each get exactly the tokens and text that `qmpi batch` at 1x1 gives the same request;
both replicas did part of the work (the server's per-replica summary at exit), and SIGTERM stops
every rank cleanly. Then the same 64 clients against `--dp 2 --pp 3` (two pipelined replicas)
and `--tp 6` (one uneven TP group over all six ranks) get the same answers.
"""

import threading
import time
import json
import os
import re

import servelib as sz
import testlib as t


def batch_reference_1x1(model: str, reqs: list) -> dict:
    d = t.test_tmp("dp_serve")
    inp, out = os.path.join(d, "ref.jsonl"), os.path.join(d, "ref.out")
    with open(inp, "w") as f:
        for r in reqs:
            f.write(json.dumps({k: v for k, v in r.items() if k != "stream"}) + "\n")
    t.qmpi(["batch", "--model", model, "--input", inp, "--output", out, "--overwrite",
            "--token-ids", "--max-model-len", sz.MAX_MODEL_LEN] + t.EXACT_KV, timeout=120)
    ref = {}
    with open(out) as f:
        for line in f:
            j = json.loads(line)
            if j["error"] is not None:
                raise t.TestFailure(f"batch refused {j['custom_id']}: {j['error']}")
            ref[j["custom_id"]] = j["response"]["body"]
    return ref


def serve_and_compare(c: t.Checks, model: str, label: str, zreqs, hreqs, ref, **layout) -> str:
    server = sz.Server(model, extra=["--default-max-tokens", "12", "--served-model-name", "tiny"],
                       **layout)
    try:
        server.wait_ready(timeout=120)
        zres, hres = {}, {}
        threads = [threading.Thread(target=sz.zmq_client, args=(server, r, zres)) for r in zreqs]
        threads += [threading.Thread(target=sz.http_client, args=(server, r, hres))
                    for r in hreqs]
        start = time.monotonic()
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=180)
        print(f"  {label}: 64 concurrent requests took {time.monotonic() - start:.1f}s", flush=True)
        sz.compare(c, f"{label} ZeroMQ", zres, ref)
        sz.compare(c, f"{label} HTTP", hres, ref)
        rc = server.stop()
        c.check(rc == 0, f"{label}: SIGTERM stopped every rank, exit {rc}")
    finally:
        server.kill()
    return server.log_text()


def body(c: t.Checks) -> None:
    model = t.make_model()
    zreqs = sz.make_requests(32, "z", 21)
    hreqs = sz.make_requests(32, "h", 22)
    ref = batch_reference_1x1(model, zreqs + hreqs)

    log = serve_and_compare(c, model, "--dp 2 --tp 3", zreqs, hreqs, ref, dp=2, tp=3, pp=1)
    per = {int(m.group(1)): int(m.group(2))
           for m in re.finditer(r"replica (\d+): \d+ steps, (\d+) tokens generated", log)}
    c.check(len(per) == 2 and all(v > 0 for v in per.values()),
            f"--dp 2 --tp 3: both replicas generated tokens {per}")

    # Pipelined replicas: micro-batches in flight on both, drained before every stop poll.
    serve_and_compare(c, model, "--dp 2 --pp 3", zreqs, hreqs, ref, dp=2, tp=1, pp=3)
    serve_and_compare(c, model, "--tp 6", zreqs, hreqs, ref, tp=6, pp=1)


t.main("dp_replicas_serve", body)
