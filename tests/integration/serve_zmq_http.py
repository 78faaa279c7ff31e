#!/usr/bin/python3
"""`qmpi serve` end to end under `mpirun -np 6 --tp 2 --pp 3` on the tiny model.

Health says "loading" before "ready". 32 ZeroMQ clients and 32 HTTP clients at once (chat and
completions, streamed and not) each get exactly the tokens and text `qmpi batch` gives the same
request, streamed in order, with usage counts that add up; /metrics agrees with them. `curl`
against /v1/chat/completions and /metrics as a user types it; `qmpi client` and
docs/examples/zmq_client.py work. A cancel, a ZeroMQ client that disconnects and an HTTP client
that hangs up mid-stream each free their KV blocks (seen in stats). SIGTERM to rank 0 while
streams run lets them all finish, then every rank exits 0. An idle server outlives
--comm-timeout; a rank that stops answering ends the job with a non-zero exit, and the stream in
flight gets an error first.
"""

import http.client
import json
import os
import signal
import socket
import subprocess
import threading
import time

import zmq

import testlib as t
from servelib import (LONG, Server, batch_reference, compare, free_port, http_client, make_requests,
                      metric, read_replies, streaming_socket, zmq_client)


def idle(s: dict) -> bool:
    return s["running"] == 0 and s["waiting"] == 0 and s["kv_blocks_used"] == 0


def check_frees(c: t.Checks, server: Server, label: str, before: dict) -> None:
    after = server.wait_stats(lambda s: idle(s) and s["requests"]["cancelled"] > before["requests"]["cancelled"])
    c.check(idle(after) and after["requests"]["cancelled"] == before["requests"]["cancelled"] + 1,
            f"{label}: the request was cancelled and its KV blocks freed (in use mid-stream: "
            f"{before['kv_blocks_used']}, after: {after['kv_blocks_used']}; running "
            f"{after['running']})")


def cancel_and_disconnect(c: t.Checks, server: Server) -> None:
    sock = streaming_socket(server, "cancel-me")
    mid = server.stats()
    c.check(mid["kv_blocks_used"] > 0 and mid["running"] == 1,
            f"mid-stream stats show the request's KV blocks ({mid['kv_blocks_used']} in use)")
    sock.send_json({"v": 1, "type": "cancel", "id": "cancel-me"})
    replies = read_replies(sock, 30)
    sock.close()
    final = replies[-1]
    n = 3 + sum(len(r.get("token_ids", [])) for r in replies[:-1])
    c.check(final["type"] == "final" and final["finish_reason"] == "cancelled" and n < 200 and
            final["usage"]["completion_tokens"] == n,
            f"cancel ends the stream with finish_reason cancelled after {n} of 200 tokens")
    check_frees(c, server, "cancel", mid)

    sock = streaming_socket(server, "drop-me")
    mid = server.stats()
    sock.close()  # gone mid-stream, no cancel
    check_frees(c, server, "ZeroMQ client disconnect", mid)

    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=60)
    body = {k: v for k, v in LONG.items()}
    conn.request("POST", "/v1/completions", body=json.dumps(body),
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    got = b""
    while got.count(b"data: ") < 3:
        got += resp.read1(4096)
    mid = server.stats()
    conn.sock.shutdown(socket.SHUT_RDWR)
    conn.close()
    check_frees(c, server, "HTTP client hang-up", mid)

    err = server.call({"v": 1, "type": "cancel", "id": "never-sent"})[-1]
    c.check(err["type"] == "error" and err["code"] == "QM505",
            f"cancel of an unknown id: {err.get('code')} {err.get('message', '')[:60]}")


# --- the test --------------------------------------------------------------------------------

def body(c: t.Checks) -> None:
    model = t.make_model()
    zreqs = make_requests(32, "z", 11)
    hreqs = make_requests(32, "h", 12)
    ref = batch_reference(model, zreqs + hreqs)

    server = Server(model, extra=["--default-max-tokens", "12", "--served-model-name", "tiny"])
    try:
        seen = server.wait_ready()
        c.check(seen[0] == "loading" and seen[-1] == "ready",
                f"health went {' -> '.join(seen)} while the 6 ranks loaded")

        zres, hres = {}, {}
        threads = [threading.Thread(target=zmq_client, args=(server, r, zres)) for r in zreqs]
        threads += [threading.Thread(target=http_client, args=(server, r, hres)) for r in hreqs]
        start = time.monotonic()
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=180)
        took = time.monotonic() - start
        print(f"  64 concurrent requests took {took:.1f}s", flush=True)
        zp, zg = compare(c, "ZeroMQ", zres, ref)
        hp, hg = compare(c, "HTTP", hres, ref)

        # The check every deployment guide uses, typed as a user would.
        url = f"http://127.0.0.1:{server.http_port}"
        out = t.run(["curl", "-s", f"{url}/v1/chat/completions", "-H",
                     "Content-Type: application/json", "-d",
                     '{"model": "tiny", "messages": [{"role": "user", "content": "Hello!"}]}'])
        j = json.loads(out.stdout)
        cu = j["usage"]
        c.check(j["object"] == "chat.completion" and j["choices"][0]["message"]["role"] ==
                "assistant" and cu["completion_tokens"] == 12,
                f"curl /v1/chat/completions: {cu['completion_tokens']} tokens "
                f"({j['choices'][0]['finish_reason']}) {j['choices'][0]['message']['content'][:40]!r}")
        metrics = t.run(["curl", "-s", f"{url}/metrics"]).stdout
        ok = metric(metrics, 'qmpi_requests_total{status="ok"}')
        gen = metric(metrics, "qmpi_generation_tokens_total")
        prompt = metric(metrics, "qmpi_prompt_tokens_total")
        c.check(ok == 65 and gen == zg + hg + cu["completion_tokens"] and
                prompt == zp + hp + cu["prompt_tokens"],
                f"curl /metrics: {ok:.0f} requests ok, {gen:.0f} generated and {prompt:.0f} prompt "
                f"tokens, as the responses add up")
        c.check(metric(metrics, "qmpi_time_to_first_token_seconds_count") == 65 and
                metric(metrics, "qmpi_kv_blocks_total") > 0 and "qmpi_step_duration_seconds_bucket"
                in metrics and metric(metrics, "qmpi_ready") == 1,
                "/metrics has the TTFT histogram (65 requests), KV blocks, step times, readiness")

        out = t.run([t.qmpi_binary(), "client", "--connect", server.endpoint, "--prompt",
                     "the quick brown fox", "--max-tokens", "6", "--temperature", "0", "--stream"])
        c.check(len(out.stdout.strip()) > 0, f"qmpi client --stream printed {out.stdout.strip()!r}")
        ex = os.path.join(t.SOURCE_DIR, "docs", "examples", "zmq_client.py")
        out = t.run(["/usr/bin/python3", ex, "--connect", server.endpoint, "--prompt", "Hello",
                     "--max-tokens", "5"])
        c.check("finish_reason: length" in out.stdout,
                f"docs/examples/zmq_client.py: {out.stdout.strip()[-80:]!r}")
        # Nothing listens on a fresh port: ZeroMQ would wait forever, qmpi client says so.
        nobody = f"tcp://127.0.0.1:{free_port()}"
        proc = subprocess.run([t.qmpi_binary(), "client", "--connect", nobody, "--prompt", "hi",
                               "--timeout", "1.5"], capture_output=True, text=True, timeout=30)
        c.check(proc.returncode != 0 and "QM509" in proc.stderr and "1.5 s" in proc.stderr
                and nobody in proc.stderr,
                f"qmpi client with no server: exit {proc.returncode}, "
                f"{proc.stderr.strip()[-160:]!r}")

        cancel_and_disconnect(c, server)
        sigterm_under_load(c, server)
    finally:
        server.kill()
    rank_failure(c, model)


def sigterm_under_load(c: t.Checks, server: Server) -> None:
    n = 8
    socks = []
    for i in range(n):
        sock = zmq.Context.instance().socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(server.endpoint)
        sock.send_json({"v": 1, "type": "generate", "id": f"term{i}", "prompt": "old stone " * (i + 1),
                        "max_tokens": 40, "temperature": 0, "ignore_eos": True, "stream": True})
        socks.append(sock)
    first = [read_first(s) for s in socks]
    rc_holder = {}
    stopper = threading.Thread(target=lambda: rc_holder.update(rc=server.stop()))
    stopper.start()
    done = []
    for sock, msg in zip(socks, first):
        replies = [msg] + (read_replies(sock, 120) if msg["type"] == "delta" else [])
        sock.close()
        final = replies[-1]
        tokens = sum(len(r.get("token_ids", [])) for r in replies if r["type"] == "delta")
        done.append(final["type"] == "final" and final["finish_reason"] == "length" and tokens == 40)
    stopper.join(timeout=90)
    c.check(all(done), f"SIGTERM while {n} streams ran: {sum(done)}/{n} finished all 40 tokens")
    rc = rc_holder.get("rc")
    log = server.log_text()
    c.check(rc == 0 and "stopped cleanly" in log and "stop requested" in log,
            f"after draining, mpirun exited {rc} and rank 0 logged a clean stop")


def rank_failure(c: t.Checks, model: str) -> None:
    """A rank that stops answering (SIGSTOP): the comm watchdog ends the job, and rank 0 first
    turns the stream in flight into an error."""
    timeout = 4
    server = Server(model, extra=["--comm-timeout", str(timeout)])
    try:
        server.wait_ready()
        time.sleep(timeout + 2)  # idle past --comm-timeout: the other ranks must not time out
        r = server.call({"v": 1, "type": "generate", "id": "after-idle", "prompt": "x",
                         "max_tokens": 3, "temperature": 0})[-1]
        c.check(r["type"] == "final" and server.proc.poll() is None,
                f"after {timeout + 2}s idle (--comm-timeout {timeout}) the mesh still serves")
        sock = streaming_socket(server, "victim")
        pids = t.rank_pids(server.proc.pid)
        os.kill(pids[3], signal.SIGSTOP)
        stopped_at = time.monotonic()
        replies = read_replies(sock, timeout + 30)
        sock.close()
        last = replies[-1]
        c.check(last["type"] == "error" and last["code"] in ("QM402", "QM403"),
                f"a rank that stops answering: the stream in flight ends with "
                f"{last.get('code')} {last.get('name', '')} "
                f"{time.monotonic() - stopped_at:.1f}s later")
        try:
            rc = server.proc.wait(timeout=timeout + 30)
        except subprocess.TimeoutExpired:
            rc = None
        c.check(rc not in (None, 0), f"the job ended with a non-zero exit ({rc}) instead of hanging")
    finally:
        for pid in t.rank_pids(server.proc.pid).values():
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError:
                pass
        server.kill()


def read_first(sock) -> dict:
    if not sock.poll(60000):
        raise t.TestFailure("no first reply in 60s")
    return json.loads(sock.recv())


if __name__ == "__main__":
    t.main("serve_zmq_http", body)
