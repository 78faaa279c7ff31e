#!/usr/bin/python3
"""The CPU KV cache takes memory as sequences write it, from a budget, and preempts when full.

1. `qmpi serve --max-num-seqs 512` on the tiny model holds about the memory of
   `--max-num-seqs 16` once ready (RSS of the server, measured): the cache's blocks are mapped,
   not touched, at start-up, though the 512-sequence server counts more of them.
2. A `--kv-cache-memory` that holds three full-length sequences, given eight long requests at
   once: the server preempts (its stats count it) and still answers every request with the
   tokens `qmpi batch` gives them with the default budget; /metrics shows the blocks in use
   going back to 0.
"""

import json
import os
import threading

import servelib as sz
import testlib as t

RSS_SLACK = 64 << 20  # allocator and thread-stack noise between two runs
MAX_MODEL_LEN = 256
BLOCK = 16


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise t.TestFailure(f"no VmRSS for pid {pid}")


def ready_server(model: str, extra: list, max_model_len: int) -> sz.Server:
    server = sz.Server(model, tp=1, pp=1, extra=extra, max_model_len=max_model_len)
    try:
        server.wait_ready(timeout=180)
    except t.TestFailure:
        server.kill()
        raise
    return server


def check_startup_memory(c: t.Checks, model: str) -> None:
    seen = {}
    for seqs in (16, 512):
        server = c.guard(f"{seqs} seqs", ready_server, model, ["--max-num-seqs", str(seqs)], 4096)
        if server is None:
            return
        try:
            seen[seqs] = (rss_bytes(server.proc.pid), server.stats()["kv_blocks_total"])
        finally:
            server.stop()
    (rss16, blocks16), (rss512, blocks512) = seen[16], seen[512]
    c.check(blocks512 > blocks16, f"512 sequences count more KV blocks ({blocks512}) than 16 "
                                  f"({blocks16}): the count follows the budget")
    c.check(rss512 <= rss16 + RSS_SLACK,
            f"RSS once ready: {rss512 >> 20} MiB with --max-num-seqs 512, {rss16 >> 20} MiB "
            f"with 16 (at most {RSS_SLACK >> 20} MiB apart)")


def long_requests(n: int) -> list:
    reqs = []
    for i in range(n):
        words = [sz.WORDS[(i * 7 + k) % len(sz.WORDS)] for k in range(90)]
        reqs.append({"id": f"long{i}", "prompt": " ".join(words), "max_tokens": 100,
                     "temperature": 0, "ignore_eos": True, "stream": False})
    return reqs


def check_preemption(c: t.Checks, model: str) -> None:
    with open(os.path.join(model, "config.json")) as f:
        cfg = json.load(f)
    head_dim = cfg["hidden_size"] // cfg["num_attention_heads"]
    # K and V in f32 (EXACT_KV) for every layer and KV head: three sequences' worth of blocks.
    block_bytes = 2 * cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * head_dim * 4 * BLOCK
    budget = 3 * (MAX_MODEL_LEN // BLOCK) * block_bytes
    reqs = long_requests(8)
    sz.MAX_MODEL_LEN = MAX_MODEL_LEN  # batch_reference's --max-model-len
    ref = c.guard("batch reference", sz.batch_reference, model, reqs, tp=1, pp=1)
    if ref is None:
        return
    server = c.guard("small budget", ready_server, model,
                     ["--max-num-seqs", "8", "--kv-cache-memory", str(budget),
                      "--no-prefix-caching"], MAX_MODEL_LEN)
    if server is None:
        return
    try:
        c.check(server.stats()["kv_blocks_total"] == 3 * MAX_MODEL_LEN // BLOCK,
                f"--kv-cache-memory {budget} holds {3 * MAX_MODEL_LEN // BLOCK} blocks")
        results = {}
        threads = [threading.Thread(target=sz.zmq_client, args=(server, r, results)) for r in reqs]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        wrong = [f"{r['id']}: {results.get(r['id'])}" for r in reqs
                 if results.get(r["id"], {}).get("tokens") != ref[r["id"]]["choices"][0]["token_ids"]]
        c.check(not wrong, f"{len(reqs) - len(wrong)}/{len(reqs)} answers equal `qmpi batch`'s "
                           f"token for token {wrong[:1]}")
        stats = server.wait_stats(lambda s: s["kv_blocks_used"] == 0)
        c.check(stats["preemptions"] > 0, f"the full budget preempted {stats['preemptions']} times")
        status, _, text = sz.http_request(server.http_port, "GET", "/metrics")
        c.check(status == 200 and sz.metric(text, "qmpi_kv_blocks_used") == 0
                and sz.metric(text, "qmpi_kv_blocks_total") == 3 * MAX_MODEL_LEN // BLOCK,
                "/metrics: qmpi_kv_blocks_used back to 0 of qmpi_kv_blocks_total")
    finally:
        server.stop()


def body(c: t.Checks) -> None:
    model = t.make_model("tiny", seed=5)
    check_startup_memory(c, model)
    check_preemption(c, model)


if __name__ == "__main__":
    t.main("kv_cache_growth", body)
