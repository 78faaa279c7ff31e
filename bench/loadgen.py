#!/usr/bin/python3
"""Load generator for `qmpi serve`, reporting like vLLM's serving benchmark.

Requests arrive as a Poisson process at --rate per second (inf: all at once) for --duration
seconds, each with a fixed prompt of --prompt-tokens random token ids and exactly
--output-tokens generated tokens (greedy, or with --sampled each server's own sampling;
ignore_eos), streamed over ZeroMQ (--zmq) or the HTTP API (--http). Reports request and token
throughput and p50/p90/p99 of time to first token (TTFT), inter-token latency (ITL) and
end-to-end latency. With --metrics URL (the server's
/metrics) it also reports the server's own mean step time, TTFT and ITL over the run: the
client's TTFT and ITL minus the server's are what the fronts and the transport add.

    python3 bench/loadgen.py --zmq tcp://127.0.0.1:5555 --rate 4 --duration 30
    python3 bench/loadgen.py --http http://127.0.0.1:8000 --rate 4 --duration 30 --json out.jsonl

With --sweep 64,256,1024,4096 (HTTP only) it opens that many streams at once instead, one level
after the other, each bounded by --duration seconds (a stream not done by then is unfinished),
and reports per level TTFT and inter-token p50/p99, output tok/s, failed (an error, or a
stream cut short: a lost reply) and unfinished requests and, with --pid (rank 0's process, on
this host), its RSS and thread count at the peak; --plot PNG draws them (python3-matplotlib).

    python3 bench/loadgen.py --http http://127.0.0.1:8000 --sweep 64,256,1024,4096 \
        --output-tokens 64 --duration 120 --pid $(pgrep -f 'qmpi serve') --plot sweep.png

--llama-server sends the sweep's streams to llama.cpp's own server instead (its /completion
endpoint with return_tokens, which streams each generated token's id, so both servers are
timed per token the same way); bench/llama_cpp/serve_compare.sh runs both.
"""

import argparse
import asyncio
import http.client
import json
import math
import random
import resource
import sys
import threading
import time
import urllib.parse
import urllib.request

import zmq


# The sampling fields every request carries: greedy, unless --sampled leaves them to the server
# (qmpi: the model's generation_config.json, Qwen2.5's temperature 0.7, top-p 0.8, top-k 20,
# repetition penalty 1.05; llama-server: its own defaults).
SAMPLING = {"temperature": 0}


class Result:
    def __init__(self):
        self.ok = False
        self.error = ""
        self.start = 0.0
        self.token_times = []  # arrival time of each token (a delta may carry several)
        self.end = 0.0


def zmq_request(endpoint: str, rid: str, prompt: list, n_out: int, timeout: float, r: Result):
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(endpoint)
    try:
        r.start = time.perf_counter()
        sock.send_json({"v": 1, "type": "generate", "id": rid, "prompt": prompt,
                        "max_tokens": n_out, **SAMPLING, "ignore_eos": True,
                        "stream": True})
        while True:
            if not sock.poll(int(timeout * 1000)):
                r.error = "timeout"
                return
            msg = json.loads(sock.recv_multipart()[-1])
            now = time.perf_counter()
            if msg["type"] == "delta":
                r.token_times += [now] * len(msg["token_ids"])
            elif msg["type"] == "final":
                r.end = now
                r.ok = len(r.token_times) == n_out
                r.error = "" if r.ok else f"{len(r.token_times)} tokens"
                return
            else:
                r.error = msg.get("code", msg["type"])
                return
    finally:
        sock.close()


def http_request(url: str, key: str, prompt: list, n_out: int, timeout: float, r: Result):
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=timeout)
    body = {"prompt": prompt, "max_tokens": n_out, **SAMPLING, "ignore_eos": True,
            "stream": True, "return_token_ids": True}
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    try:
        r.start = time.perf_counter()
        conn.request("POST", "/v1/completions", body=json.dumps(body), headers=headers)
        resp = conn.getresponse()
        if resp.status != 200:
            r.error = f"HTTP {resp.status}"
            return
        while True:
            line = resp.fp.readline()
            if not line:
                r.error = "stream ended early"
                return
            if not line.startswith(b"data: "):
                continue
            payload = line[6:].strip()
            now = time.perf_counter()
            if payload == b"[DONE]":
                r.end = now
                r.ok = len(r.token_times) == n_out
                r.error = "" if r.ok else f"{len(r.token_times)} tokens"
                return
            chunk = json.loads(payload)
            if "error" in chunk:
                r.error = chunk["error"].get("qmpi_code", "error")
                return
            for c in chunk["choices"]:
                r.token_times += [now] * len(c.get("token_ids", []))
    except (OSError, http.client.HTTPException) as e:
        r.error = type(e).__name__
    finally:
        conn.close()


def percentile(values: list, p: float) -> float:
    if not values:
        return float("nan")
    v = sorted(values)
    k = (len(v) - 1) * p / 100
    lo, hi = math.floor(k), math.ceil(k)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def scrape(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as f:
        text = f.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


# --- the concurrency sweep -------------------------------------------------------------------

async def stream_async(host: str, port: int, key: str, prompt: list, n_out: int, r: Result,
                       llama: bool = False):
    if llama:
        path = b"/completion"
        body = json.dumps({"prompt": prompt, "n_predict": n_out, **SAMPLING,
                           "ignore_eos": True, "stream": True, "return_tokens": True,
                           "cache_prompt": False}).encode()
    else:
        path = b"/v1/completions"
        body = json.dumps({"prompt": prompt, "max_tokens": n_out, **SAMPLING,
                           "ignore_eos": True, "stream": True, "return_token_ids": True}).encode()
    auth = f"Authorization: Bearer {key}\r\n".encode() if key else b""
    writer = None
    try:
        r.start = time.perf_counter()
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(b"POST " + path + b" HTTP/1.1\r\nHost: qmpi\r\nConnection: close\r\n"
                     b"Content-Type: application/json\r\n" + auth +
                     b"Content-Length: %d\r\n\r\n" % len(body) + body)
        await writer.drain()
        status = await reader.readline()
        if b" 200 " not in status:
            r.error = status.decode(errors="replace").strip()[:40]
            return
        while True:
            line = await reader.readline()
            if not line:
                r.error = "stream ended early"
                return
            if not line.startswith(b"data: "):
                continue
            payload = line[6:].strip()
            now = time.perf_counter()
            if payload == b"[DONE]":
                r.end = now
                r.ok = len(r.token_times) == n_out
                r.error = "" if r.ok else f"{len(r.token_times)} tokens"
                return
            chunk = json.loads(payload)
            if "error" in chunk:
                e = chunk["error"]
                r.error = e.get("qmpi_code") or str(e.get("message", "error"))[:60]
                r.error += f" after {len(r.token_times)} tokens"
                return
            if llama:  # one chunk per token, the last one with "stop": true
                r.token_times += [now] * len(chunk.get("tokens", []))
                if chunk.get("stop"):
                    r.end = now
                    r.ok = len(r.token_times) == n_out
                    r.error = "" if r.ok else f"{len(r.token_times)} tokens"
                    return
                continue
            for c in chunk["choices"]:
                r.token_times += [now] * len(c.get("token_ids", []))
    except (OSError, ValueError) as e:
        r.error = type(e).__name__
    finally:
        if writer is not None:
            writer.close()


def proc_status(pid: int) -> dict:
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "Threads"):
                    out[k] = int(v.split()[0])
    except OSError:
        pass
    return out


async def sweep_level(args, n: int, rng: random.Random) -> dict:
    u = urllib.parse.urlsplit(args.http)
    results = [Result() for _ in range(n)]
    peak = {"VmRSS": 0, "Threads": 0}
    tasks = [asyncio.create_task(stream_async(
        u.hostname, u.port or 80, args.api_key,
        [rng.randrange(1000, 30000) for _ in range(args.prompt_tokens)], args.output_tokens, r,
        args.llama_server)) for r in results]
    t0 = time.perf_counter()
    pending = set(tasks)
    while pending and time.perf_counter() - t0 < args.duration:
        _, pending = await asyncio.wait(pending, timeout=0.5)
        if args.pid:
            st = proc_status(args.pid)
            for k in peak:
                peak[k] = max(peak[k], st.get(k, 0))
    for task in pending:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    wall = time.perf_counter() - t0
    ok = [r for r in results if r.ok]
    # Over every stream that got tokens: at a level the time bound cuts, the latencies of the
    # streams still running are the point.
    started = [r for r in results if r.token_times]
    ttft = [(r.token_times[0] - r.start) * 1000 for r in started]
    itl = [(b - a) * 1000 for r in started for a, b in zip(r.token_times, r.token_times[1:])]
    out_tokens = sum(len(r.token_times) for r in results)
    unfinished = sum(1 for r in results if not r.ok and not r.error)
    return {"concurrency": n, "completed": len(ok), "failed": n - len(ok) - unfinished,
            "unfinished": unfinished,
            "errors": sorted({r.error for r in results if r.error}),
            "wall_s": round(wall, 2), "output_token_throughput": round(out_tokens / wall, 1),
            "ttft_ms": {f"p{p}": round(percentile(ttft, p), 1) for p in (50, 99)},
            "itl_ms": {f"p{p}": round(percentile(itl, p), 1) for p in (50, 99)},
            "rank0_rss_mib": round(peak["VmRSS"] / 1024, 1) if args.pid else None,
            "rank0_threads": peak["Threads"] if args.pid else None}


def plot_sweep(rows: list, path: str, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    n = [r["concurrency"] for r in rows]
    fig, ax = plt.subplots(1, 3, figsize=(13, 3.8))
    ax[0].plot(n, [r["ttft_ms"]["p50"] / 1000 for r in rows], "o-", label="p50")
    ax[0].plot(n, [r["ttft_ms"]["p99"] / 1000 for r in rows], "s--", label="p99")
    ax[0].set_ylabel("time to first token (s)")
    ax[1].plot(n, [r["output_token_throughput"] for r in rows], "o-", label="output tok/s")
    ax[1].plot(n, [r["itl_ms"]["p50"] for r in rows], "s--", label="inter-token p50 (ms)")
    ax[1].set_ylabel("tok/s ; ms")
    if rows and rows[0]["rank0_rss_mib"] is not None:
        ax[2].plot(n, [r["rank0_rss_mib"] for r in rows], "o-", label="rank 0 RSS (MiB)")
        ax[2].plot(n, [r["rank0_threads"] for r in rows], "s--", label="rank 0 threads")
    ax[2].plot(n, [r["failed"] + r["unfinished"] for r in rows], "x:", label="failed + unfinished")
    for a in ax:
        a.set_xscale("log", base=2)
        a.set_xlabel("concurrent streams")
        a.grid(True, alpha=0.3)
        a.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def sweep(args) -> int:
    levels = [int(x) for x in args.sweep.split(",")]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = max(levels) + 256
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    rng = random.Random(args.seed)
    rows = []
    for n in levels:
        row = asyncio.run(sweep_level(args, n, rng))
        rows.append(row)
        ttft, itl = row["ttft_ms"], row["itl_ms"]
        print(f"  {n:5d} streams: {row['completed']} done, {row['failed']} failed, "
              f"{row['unfinished']} unfinished in {row['wall_s']}s; "
              f"{row['output_token_throughput']} out tok/s; TTFT p50/p99 "
              f"{ttft['p50']}/{ttft['p99']} ms; ITL p50/p99 {itl['p50']}/{itl['p99']} ms; "
              f"rank 0 {row['rank0_rss_mib']} MiB, {row['rank0_threads']} threads"
              + (f" ({', '.join(row['errors'])})" if row["errors"] else ""), flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(dict(row, prompt_tokens=args.prompt_tokens,
                                        output_tokens=args.output_tokens,
                                        sampled=args.sampled)) + "\n")
    if args.plot:
        plot_sweep(rows, args.plot, f"qmpi serve HTTP front: streams of {args.prompt_tokens} "
                   f"prompt / {args.output_tokens} output tokens opened at once")
    return 0 if all(r["failed"] + r["unfinished"] == 0 for r in rows) else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    dest = ap.add_mutually_exclusive_group(required=True)
    dest.add_argument("--zmq", help="the server's ZeroMQ endpoint")
    dest.add_argument("--http", help="the server's HTTP base URL")
    ap.add_argument("--api-key", default="")
    ap.add_argument("--rate", type=float, default=1.0, help="requests per second (inf: burst)")
    ap.add_argument("--duration", type=float, default=30.0, help="seconds of arrivals")
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--output-tokens", type=int, default=64)
    ap.add_argument("--max-requests", type=int, default=10000)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per message")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sampled", action="store_true",
                    help="send no temperature: each server samples with its own defaults")
    ap.add_argument("--metrics", help="the server's /metrics URL, for its own step time and ITL")
    ap.add_argument("--json", help="append the summary as one JSON line to this file")
    ap.add_argument("--sweep", help="HTTP: comma-separated stream counts opened at once, each "
                    "level bounded by --duration")
    ap.add_argument("--pid", type=int,
                    help="rank 0's pid (this host): RSS and threads in the sweep")
    ap.add_argument("--plot", help="the sweep's PNG plot")
    ap.add_argument("--llama-server", action="store_true",
                    help="--sweep against llama.cpp's llama-server (its /completion endpoint)")
    args = ap.parse_args()
    if args.sampled:
        SAMPLING.clear()
    if args.sweep:
        if not args.http:
            ap.error("--sweep drives the HTTP front: give --http")
        return sweep(args)

    rng = random.Random(args.seed)
    before = scrape(args.metrics) if args.metrics else None
    results, threads = [], []
    t0 = time.perf_counter()
    next_at = t0
    i = 0
    while i < args.max_requests:
        if math.isfinite(args.rate):
            next_at += rng.expovariate(args.rate)
        if next_at - t0 > args.duration:
            break
        time.sleep(max(0.0, next_at - time.perf_counter()))
        prompt = [rng.randrange(1000, 30000) for _ in range(args.prompt_tokens)]
        r = Result()
        results.append(r)
        if args.zmq:
            fn, fargs = zmq_request, (args.zmq, f"load-{i}", prompt)
        else:
            fn, fargs = http_request, (args.http, args.api_key, prompt)
        th = threading.Thread(target=fn, args=fargs + (args.output_tokens, args.timeout, r))
        th.start()
        threads.append(th)
        i += 1
        if not math.isfinite(args.rate) and i >= args.max_requests:
            break
    for th in threads:
        th.join()
    wall = time.perf_counter() - t0
    after = scrape(args.metrics) if args.metrics else None

    ok = [r for r in results if r.ok]
    ttft = [(r.token_times[0] - r.start) * 1000 for r in ok]
    itl = [(b - a) * 1000 for r in ok for a, b in zip(r.token_times, r.token_times[1:])]
    e2e = [(r.end - r.start) * 1000 for r in ok]
    out_tokens = sum(len(r.token_times) for r in ok)
    summary = {
        "front": "zmq" if args.zmq else "http", "rate": args.rate, "duration_s": args.duration,
        "prompt_tokens": args.prompt_tokens, "output_tokens": args.output_tokens,
        "requests": len(results), "completed": len(ok), "failed": len(results) - len(ok),
        "errors": sorted({r.error for r in results if not r.ok}),
        "wall_s": round(wall, 2), "request_throughput": round(len(ok) / wall, 3),
        "output_token_throughput": round(out_tokens / wall, 2),
        "total_token_throughput": round((out_tokens + len(ok) * args.prompt_tokens) / wall, 2),
    }
    for name, vals in (("ttft_ms", ttft), ("itl_ms", itl), ("e2e_ms", e2e)):
        summary[name] = {"mean": round(sum(vals) / len(vals), 2) if vals else None,
                         **{f"p{p}": round(percentile(vals, p), 2) for p in (50, 90, 99)}}
    if before is not None and after is not None:
        def delta(k):
            return after.get(k, 0.0) - before.get(k, 0.0)
        steps = delta("qmpi_step_duration_seconds_count")
        itls = delta("qmpi_inter_token_latency_seconds_count")
        firsts = delta("qmpi_time_to_first_token_seconds_count")
        summary["server"] = {
            "mean_ttft_ms": round(1000 * delta("qmpi_time_to_first_token_seconds_sum") / firsts, 3)
            if firsts else None,
            "steps": int(steps),
            "mean_step_ms": round(1000 * delta("qmpi_step_duration_seconds_sum") / steps, 3)
            if steps else None,
            "mean_itl_ms": round(1000 * delta("qmpi_inter_token_latency_seconds_sum") / itls, 3)
            if itls else None,
        }
        # What the fronts and the transport add: to each request (both ways, TTFT) and to each
        # token after the first (ITL).
        for key in ("ttft", "itl"):
            srv, cli = summary["server"][f"mean_{key}_ms"], summary[f"{key}_ms"]["mean"]
            if srv is not None and cli is not None:
                summary["server"][f"client_minus_server_{key}_ms"] = round(cli - srv, 3)

    print(f"front {summary['front']}, rate {args.rate}/s for {args.duration:.0f}s, prompt "
          f"{args.prompt_tokens} / output {args.output_tokens} tokens")
    print(f"  requests {len(ok)}/{len(results)} completed in {wall:.1f}s"
          + (f" (errors: {', '.join(summary['errors'])})" if summary["errors"] else ""))
    print(f"  throughput {summary['request_throughput']} req/s, "
          f"{summary['output_token_throughput']} output tok/s, "
          f"{summary['total_token_throughput']} total tok/s")
    for name in ("ttft_ms", "itl_ms", "e2e_ms"):
        s = summary[name]
        print(f"  {name:8s} mean {s['mean']}  p50 {s['p50']}  p90 {s['p90']}  p99 {s['p99']}")
    if "server" in summary:
        print(f"  server: {summary['server']}")
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps(summary) + "\n")
    return 0 if ok and len(ok) == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
