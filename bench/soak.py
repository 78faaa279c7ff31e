#!/usr/bin/python3
"""Soak test for `qmpi serve`: valid, hostile and slow clients at once over ZeroMQ and HTTP for
--duration seconds against a running server (hostile chat bodies too, meant for the template
bench/soak_template.jinja that bench/soak.sh serves). Reports requests ok, errors by catalogue code,
lost replies (a request that got neither a final nor an error: must be 0) and rank 0's RSS over
time (--rss-pid), with a PNG plot (python3-matplotlib) and a CSV beside it.

    python3 bench/soak.py --zmq tcp://127.0.0.1:5555 --http 127.0.0.1:8000 --rss-pid PID \\
        --duration 600 --out bench/results/soak
bench/soak.sh starts the server (6 ranks by default) and runs this.
"""

import argparse
import collections
import http.client
import json
import random
import sys
import threading
import time

import zmq

HOSTILE = [b"", b"{", b"null", b"[1]", b'{"id": "h", "prompt": "x", "max_tokens": 1e400}',
           b'{"id": "h", "prompt": [1, 2, ' + b"9" * 400 + b"]}", b"[" * 100000,
           b'{"id": "h", "prompt": "x", "temprature": 0}', b'{"id": "h", "prompt": "x", "n": 0}',
           b'{"id": "h", "messages": [{"role": "user", "content": [{"type": 5}]}]}',
           b'{"id": "h", "prompt": "\xff\xfe"}', b'{"id": "h", "prompt": "x", "max_tokens": 99999}',
           b'{"type": "cancel", "id": "nope"}', b'{"v": 2, "type": "health"}']


# Chat bodies a client can send against any template: too many messages for a template whose
# cost grows with their square (bench/soak_template.jinja), reserved template variables,
# unknown roles, content of the wrong shape, deep nesting.
MANY = [{"role": "user" if i % 2 == 0 else "assistant", "content": "m"} for i in range(6000)]
HOSTILE_CHAT = [json.dumps(b).encode() for b in (
    {"messages": MANY, "max_tokens": 4},
    {"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"messages": []}},
    {"messages": [{"role": "user", "content": "x"}],
     "chat_template_kwargs": {"add_generation_prompt": False}},
    {"messages": [{"role": "wizard", "content": "x"}]},
    {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": "x"}]}]},
    {"messages": "hello"},
    {"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "regex"}},
)] + [b'{"messages": [{"role": "user", "content": ' + b"[" * 50000 + b"]" * 50000 + b"}]}"]


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = collections.Counter()

    def add(self, key: str, n: int = 1):
        with self.lock:
            self.counts[key] += n


def zmq_socket(endpoint: str, rcvhwm: int = 0):
    s = zmq.Context.instance().socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    if rcvhwm:
        s.setsockopt(zmq.RCVHWM, rcvhwm)
        s.setsockopt(zmq.RCVBUF, 4096)
    s.connect(endpoint)
    return s


def until_end(sock, rid, timeout: float):
    """The final or error of request `rid` (None: lost)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not sock.poll(int((deadline - time.monotonic()) * 1000) + 1):
            return None
        m = json.loads(sock.recv_multipart()[-1])
        if m.get("id") == rid and m.get("type") in ("final", "error"):
            return m
    return None


def valid_zmq(args, tally: Tally, stop: threading.Event, k: int):
    sock = zmq_socket(args.zmq)
    rng = random.Random(k)
    i = 0
    while not stop.is_set():
        i += 1
        rid = f"v{k}-{i}"
        sock.send_json({"id": rid, "prompt": "soak " * rng.randint(1, 20), "temperature": 0,
                        "max_tokens": rng.randint(4, 32), "stream": rng.random() < 0.5})
        m = until_end(sock, rid, 120)
        tally.add("lost" if m is None else "ok" if m["type"] == "final" else m["code"])
    sock.close()


def hostile_zmq(args, tally: Tally, stop: threading.Event):
    sock = zmq_socket(args.zmq)
    rng = random.Random(99)
    while not stop.is_set():
        sock.send(rng.choice(HOSTILE))
        if not sock.poll(30000):
            tally.add("lost")
            sock.close()
            sock = zmq_socket(args.zmq)
            continue
        m = json.loads(sock.recv_multipart()[-1])
        tally.add("hostile answered" if m.get("type") in ("error", "health") else "hostile " +
                  m.get("type", "?"))
        time.sleep(0.02)
    sock.close()


def slow_zmq(args, tally: Tally, stop: threading.Event):
    """Sends streaming requests, reads nothing for 20 s, then reads: every request ends with a
    final or a client-too-slow error, never in silence."""
    round_ = 0
    while not stop.is_set():
        round_ += 1
        sock = zmq_socket(args.zmq, rcvhwm=1)
        ids = [f"slow{round_}-{i}" for i in range(6)]
        for rid in ids:
            sock.send_json({"id": rid, "prompt": "once", "max_tokens": 200, "ignore_eos": True,
                            "temperature": 0, "stream": True})
        stop.wait(20)
        ended = set()
        while sock.poll(5000) and len(ended) < len(ids):
            m = json.loads(sock.recv_multipart()[-1])
            if m.get("type") in ("final", "error"):
                ended.add(m.get("id"))
                tally.add("slow ok" if m["type"] == "final" else "slow " + m.get("code", "?"))
        tally.add("lost", len(set(ids) - ended))
        sock.close()


def http_call(args, method, path, body, timeout=120):
    host, port = args.http.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        return r.status, r.read().decode("utf-8", "replace")
    finally:
        conn.close()


def valid_http(args, tally: Tally, stop: threading.Event, k: int):
    rng = random.Random(100 + k)
    while not stop.is_set():
        stream = rng.random() < 0.5
        body = json.dumps({"prompt": "soak " * rng.randint(1, 20), "max_tokens":
                           rng.randint(4, 32), "temperature": 0, "stream": stream}).encode()
        try:
            status, text = http_call(args, "POST", "/v1/completions", body)
        except OSError:
            tally.add("lost")
            continue
        if status == 200 and (not stream or "[DONE]" in text):
            tally.add("ok")
        elif status != 200 and text.startswith("{"):
            tally.add(json.loads(text)["error"].get("qmpi_code", "http-" + str(status)))
        else:
            tally.add("lost")


def hostile_http(args, tally: Tally, stop: threading.Event):
    rng = random.Random(7)
    while not stop.is_set():
        try:
            status, text = http_call(args, "POST", "/v1/completions", rng.choice(HOSTILE), 30)
            tally.add("hostile answered" if status >= 400 and text.startswith("{") else
                      f"hostile http {status}")
        except OSError:
            tally.add("lost")
        time.sleep(0.02)


def valid_chat(args, tally: Tally, stop: threading.Event):
    rng = random.Random(300)
    while not stop.is_set():
        turns = [{"role": "user", "content": "soak " * rng.randint(1, 8)}]
        body = json.dumps({"messages": turns, "max_tokens": rng.randint(4, 16),
                           "temperature": 0}).encode()
        try:
            status, text = http_call(args, "POST", "/v1/chat/completions", body)
        except OSError:
            tally.add("lost")
            continue
        tally.add("ok" if status == 200 else
                  json.loads(text)["error"].get("qmpi_code", "http-" + str(status))
                  if text.startswith("{") else "lost")


def hostile_chat(args, tally: Tally, stop: threading.Event):
    rng = random.Random(8)
    while not stop.is_set():
        try:
            status, text = http_call(args, "POST", "/v1/chat/completions",
                                     rng.choice(HOSTILE_CHAT), 60)
            tally.add("hostile answered" if 400 <= status < 500 and text.startswith("{") else
                      f"hostile chat {status}")
        except OSError:
            tally.add("lost")
        time.sleep(0.05)


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--zmq", required=True)
    p.add_argument("--http", required=True, help="HOST:PORT")
    p.add_argument("--rss-pid", type=int, required=True, help="rank 0's pid")
    p.add_argument("--duration", type=float, default=600)
    p.add_argument("--out", default="bench/results/soak", help="PNG and CSV path prefix")
    args = p.parse_args()
    tally, stop = Tally(), threading.Event()
    workers = [threading.Thread(target=valid_zmq, args=(args, tally, stop, k)) for k in range(3)]
    workers += [threading.Thread(target=valid_http, args=(args, tally, stop, k)) for k in range(2)]
    workers += [threading.Thread(target=f, args=(args, tally, stop))
                for f in (hostile_zmq, hostile_http, slow_zmq, valid_chat, hostile_chat)]
    for w in workers:
        w.start()
    start, samples = time.monotonic(), []
    while time.monotonic() - start < args.duration:
        samples.append((time.monotonic() - start, rss_kib(args.rss_pid) / 1024))
        time.sleep(2)
    stop.set()
    for w in workers:
        w.join(timeout=180)
    samples.append((time.monotonic() - start, rss_kib(args.rss_pid) / 1024))
    with open(args.out + ".csv", "w") as f:
        f.write("seconds,rss_mib\n" + "".join(f"{t:.1f},{m:.1f}\n" for t, m in samples))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(7, 3.5))
        ax.plot([t for t, _ in samples], [m for _, m in samples])
        ax.set_xlabel("seconds")
        ax.set_ylabel("rank 0 RSS (MiB)")
        ax.set_title("qmpi serve under valid, hostile and slow clients")
        ax.set_ylim(bottom=0)
        fig.tight_layout()
        fig.savefig(args.out + ".png", dpi=100)
    except ImportError:
        print("matplotlib is missing (apt-get install python3-matplotlib): no plot")
    c = tally.counts
    lost = c.pop("lost", 0)
    first = [m for t, m in samples if t >= min(60, args.duration / 4)][:1] or [samples[0][1]]
    print(json.dumps({"seconds": round(samples[-1][0]), "lost": lost, "counts": dict(c),
                      "rss_mib": {"after_warmup": first[0], "end": samples[-1][1],
                                  "max": max(m for _, m in samples)}}, indent=1))
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
