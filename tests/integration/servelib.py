#!/usr/bin/python3
"""What the serve tests share: `qmpi serve` as a `Server` (on free ports, under mpirun), its
ZeroMQ and HTTP clients, the batch reference they are compared with, and /metrics and /proc
readers. Imported by the tests; not a test itself (tests/CMakeLists.txt leaves it out)."""

import http.client
import json
import os
import random
import signal
import socket
import subprocess
import threading
import time

import zmq

import testlib as t

MAX_MODEL_LEN = 256
WORDS = ("the quick brown fox jumps over a lazy dog while seven red birds sing about rivers "
         "and mountains near old stone bridges").split()


# The API key of the servers the hostile-input tests start, its HTTP header, and a valid ZeroMQ
# generate request carrying it.
API_KEY = "fuzz-secret"
AUTH = {"Authorization": f"Bearer {API_KEY}"}
VALID_GENERATE = {"v": 1, "type": "generate", "id": "ok", "api_key": API_KEY,
                  "prompt": "the quick brown fox", "max_tokens": 4, "temperature": 0}

# The npm clients the serve tests drive, pinned; scripts/setup.sh --tests installs the same list
# into .cache/npm-tests (keep the two in step).
NPM_CLIENTS = ("openai@4.104.0", "ai@6.0.326", "@ai-sdk/openai-compatible@2.0.92",
               "@langchain/openai@1.5.8", "@langchain/core@1.4.0", "zod@4.6.7")


def npm_clients_dir() -> str:
    """A folder whose node_modules holds NPM_CLIENTS at their pinned versions: the setup's
    .cache/npm-tests, else one this test run installs into the build folder (npm, a minute)."""
    def complete(d: str) -> bool:
        for spec in NPM_CLIENTS:
            name, version = spec.rsplit("@", 1)
            try:
                with open(os.path.join(d, "node_modules", name, "package.json")) as f:
                    if json.load(f)["version"] != version:
                        return False
            except OSError:
                return False
        return True

    own = os.path.join(os.environ.get("QMPI_BUILD_DIR") or t.test_tmp(), "npm-tests")
    with t.locked("npm-tests"):  # two serve tests may run at once
        for d in (os.path.join(t.SOURCE_DIR, ".cache", "npm-tests"), own):
            if complete(d):
                return d
        os.makedirs(own, exist_ok=True)
        with open(os.path.join(own, "package.json"), "w") as f:
            f.write('{"name": "qmpi-tests", "private": true}\n')
        t.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", own,
               *NPM_CLIENTS], timeout=600)
    return own


def node_client(server, script: str, api_key: str, model: str, what: str) -> dict:
    """Runs tests/integration/SCRIPT with node against the server's /v1 (the npm clients of
    npm_clients_dir()) and returns the JSON object its last line prints; `what` names the client
    in a failure."""
    proc = subprocess.run(
        ["node", os.path.join(t.SOURCE_DIR, "tests", "integration", script), npm_clients_dir(),
         f"http://127.0.0.1:{server.http_port}/v1", api_key, model],
        capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise t.TestFailure(f"{what} failed:\n{proc.stderr[-3000:]}\n"
                            f"server log:\n{server.log_text()[-2000:]}")
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    print(json.dumps(r, indent=1)[:3000])
    return r


def free_ports(count: int) -> list:
    """count distinct free local ports. The sockets stay bound until all are chosen: two calls of
    free_port() in a row may get the same port back (it was free again after the first closed),
    and a server given it for both --zmq and --http fails with QM413."""
    socks = [socket.socket() for _ in range(count)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port() -> int:
    return free_ports(1)[0]



class Server:
    """`qmpi serve` on free local ports (under mpirun for tp * pp > 1), its output in a file."""

    def __init__(self, model: str, tp: int = 2, pp: int = 3, extra=(), dp: int = 1,
                 max_model_len: int | None = None):
        # Read when the server starts, so a test that sets MAX_MODEL_LEN gets it.
        max_model_len = max_model_len or MAX_MODEL_LEN
        self.zmq_port, self.http_port = free_ports(2)
        self.endpoint = f"tcp://127.0.0.1:{self.zmq_port}"
        self.log_path = os.path.join(t.test_tmp("serve"), f"serve-{os.getpid()}-{self.zmq_port}.log")
        args = ["serve", "--model", model, "--zmq", self.endpoint, "--http",
                f"127.0.0.1:{self.http_port}", "--max-model-len", str(max_model_len)] + t.EXACT_KV + list(extra)
        cmd = [t.qmpi_binary()] + args
        if dp * tp * pp > 1:
            cmd = [t.mpirun_binary(), "--oversubscribe", "-np", str(dp * tp * pp), "-x",
                   "OMP_NUM_THREADS"] + cmd + ["--tp", str(tp), "--pp", str(pp)]
            if dp > 1:
                cmd += ["--dp", str(dp)]
        self.log = open(self.log_path, "w")
        env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self.mpi = dp * tp * pp > 1

    def log_text(self) -> str:
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def call(self, message: dict, timeout: float = 60.0) -> list:
        """Sends one message on a fresh DEALER; the replies up to the last one it asks for."""
        sock = zmq.Context.instance().socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(self.endpoint)
        try:
            sock.send_json(message)
            return read_replies(sock, timeout)
        finally:
            sock.close()

    def wait_ready(self, timeout: float = 90.0) -> list:
        """Health replies until "ready" (every status seen, in order)."""
        seen = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise t.TestFailure(f"the server exited ({self.proc.returncode}):\n"
                                    f"{self.log_text()[-3000:]}")
            try:
                status = self.call({"v": 1, "type": "health"}, timeout=1.0)[-1]["status"]
            except t.TestFailure:
                continue
            if not seen or seen[-1] != status:
                seen.append(status)
            if status == "ready":
                return seen
            time.sleep(0.05)
        raise t.TestFailure(f"the server was not ready in {timeout:.0f}s: {self.log_text()[-3000:]}")

    def stats(self) -> dict:
        return self.call({"v": 1, "type": "stats"}, timeout=10.0)[-1]

    def wait_stats(self, pred, timeout: float = 20.0) -> dict:
        """Stats once pred(stats) holds (the engine publishes them every loop iteration)."""
        deadline = time.monotonic() + timeout
        s = self.stats()
        while not pred(s) and time.monotonic() < deadline:
            time.sleep(0.05)
            s = self.stats()
        return s

    def rank0_pid(self) -> int:
        if not self.mpi:
            return self.proc.pid
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            pids = t.rank_pids(self.proc.pid)
            if 0 in pids:
                return pids[0]
            time.sleep(0.1)
        raise t.TestFailure("rank 0's process was not found under mpirun")

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM to rank 0 (the others learn of it through the stop poll); the exit status."""
        if self.proc.poll() is None:
            os.kill(self.rank0_pid(), signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise t.TestFailure(f"the server did not stop {timeout:.0f}s after SIGTERM")
        finally:
            self.log.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def read_replies(sock, timeout: float) -> list:
    """Replies on `sock` up to a final, error, health or stats message."""
    out = []
    while True:
        if not sock.poll(int(timeout * 1000)):
            raise t.TestFailure(f"no reply in {timeout:.0f}s after {len(out)} replies")
        msg = json.loads(sock.recv_multipart()[-1])  # after the empty frame REQ-style senders get
        out.append(msg)
        if msg["type"] in ("final", "error", "health", "stats"):
            return out


def http_request(port: int, method: str, path: str, body=None, headers=None, timeout=60.0):
    """(status, headers, body text) of one HTTP request."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        conn.request(method, path, body=data, headers=h)
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read().decode("utf-8", errors="replace")
    finally:
        conn.close()


def sse_events(text: str) -> list:
    """The data payloads of a server-sent-events body, in order."""
    return [block[len("data: "):] for block in text.split("\n\n") if block.startswith("data: ")]


# --- the concurrent phase -------------------------------------------------------------------

def make_requests(n: int, prefix: str, seed: int) -> list:
    rng = random.Random(seed)
    reqs = []
    for i in range(n):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 30)))
        r = {"id": f"{prefix}{i}", "max_tokens": rng.randint(4, 12), "stream": i % 2 == 0}
        if i % 4 in (1, 2):
            r["messages"] = [{"role": "user", "content": text}]
        else:
            r["prompt"] = text
        if i % 8 == 5:
            r.update(temperature=0.8, seed=1000 + i)  # seeded sampling matches batch too
        else:
            r["temperature"] = 0
        reqs.append(r)
    return reqs


def batch_reference(model: str, reqs: list, tp: int = 2, pp: int = 3) -> dict:
    """{id: body} of the same requests through `qmpi batch` (by default at the serve layout)."""
    d = t.test_tmp("serve")
    inp, out = os.path.join(d, f"ref-{os.getpid()}.jsonl"), os.path.join(d, f"ref-{os.getpid()}.out")
    with open(inp, "w") as f:
        for r in reqs:
            line = {k: v for k, v in r.items() if k != "stream"}
            f.write(json.dumps(line) + "\n")
    t.qmpi(["batch", "--model", model, "--input", inp, "--output", out, "--overwrite",
            "--token-ids", "--max-model-len", MAX_MODEL_LEN] + t.EXACT_KV, tp=tp, pp=pp, timeout=180)
    ref = {}
    with open(out) as f:
        for line in f:
            j = json.loads(line)
            if j["error"] is not None:
                raise t.TestFailure(f"batch refused {j['custom_id']}: {j['error']}")
            ref[j["custom_id"]] = j["response"]["body"]
    return ref


def zmq_client(server: Server, req: dict, results: dict) -> None:
    msg = dict(req, v=1, type="generate")
    try:
        replies = server.call(msg, timeout=120)
    except Exception as e:  # noqa: BLE001 (reported as this request's failure)
        results[req["id"]] = {"failure": str(e)}
        return
    final = replies[-1]
    if final["type"] != "final":
        results[req["id"]] = {"failure": json.dumps(final)}
        return
    if req["stream"]:
        deltas = replies[:-1]
        if any(d["type"] != "delta" for d in deltas):
            results[req["id"]] = {"failure": "a non-delta message before the final"}
            return
        tokens = [tk for d in deltas for tk in d["token_ids"]]
        text = "".join(d["text"] for d in deltas)
    else:
        if len(replies) != 1:
            results[req["id"]] = {"failure": f"{len(replies)} replies to a request that did not stream"}
            return
        tokens, text = final["choices"][0]["token_ids"], final["choices"][0]["text"]
    results[req["id"]] = {"tokens": tokens, "text": text, "usage": final["usage"],
                          "finish_reason": final["finish_reason"]}


def http_client(server: Server, req: dict, results: dict) -> None:
    chat = "messages" in req
    body = {k: v for k, v in req.items() if k != "id"}
    body.update(model="tiny", return_token_ids=True)
    if req["stream"]:
        body["stream_options"] = {"include_usage": True}
    try:
        status, headers, text = http_request(
            server.http_port, "POST", "/v1/chat/completions" if chat else "/v1/completions", body,
            timeout=120)
    except Exception as e:  # noqa: BLE001
        results[req["id"]] = {"failure": str(e)}
        return
    if status != 200:
        results[req["id"]] = {"failure": f"HTTP {status}: {text[:300]}"}
        return
    if not req["stream"]:
        j = json.loads(text)
        c = j["choices"][0]
        results[req["id"]] = {"tokens": c["token_ids"],
                              "text": c["message"]["content"] if chat else c["text"],
                              "usage": j["usage"], "finish_reason": c["finish_reason"]}
        return
    events = sse_events(text)
    if not events or events[-1] != "[DONE]" or "text/event-stream" not in headers.get(
            "Content-Type", ""):
        results[req["id"]] = {"failure": f"not an SSE stream ending in [DONE]: {text[-200:]}"}
        return
    chunks = [json.loads(e) for e in events[:-1]]
    usage = [c["usage"] for c in chunks if c.get("usage")]
    tokens, pieces, reasons = [], [], []
    for ch in chunks:
        for c in ch["choices"]:
            tokens += c.get("token_ids", [])
            pieces.append(c["delta"].get("content", "") if chat else c["text"])
            if c["finish_reason"] is not None:
                reasons.append(c["finish_reason"])
    results[req["id"]] = {"tokens": tokens, "text": "".join(pieces),
                          "usage": usage[0] if len(usage) == 1 else None,
                          "finish_reason": reasons[0] if len(reasons) == 1 else None}


def compare(c: t.Checks, label: str, results: dict, ref: dict) -> tuple:
    """Checks every result against batch; returns (prompt tokens, generated tokens)."""
    bad, prompt, generated = [], 0, 0
    for rid, got in sorted(results.items()):
        want = ref[rid]
        wc = want["choices"][0]
        wtext = wc["message"]["content"] if "message" in wc else wc["text"]
        if "failure" in got:
            bad.append(f"{rid}: {got['failure']}")
            continue
        u = got["usage"] or {}
        if got["tokens"] != wc["token_ids"]:
            bad.append(f"{rid}: tokens {got['tokens']} != batch {wc['token_ids']}")
        elif got["text"] != wtext:
            bad.append(f"{rid}: text {got['text']!r} != batch {wtext!r}")
        elif got["finish_reason"] != wc["finish_reason"]:
            bad.append(f"{rid}: finish_reason {got['finish_reason']} != {wc['finish_reason']}")
        elif (u.get("completion_tokens") != len(got["tokens"]) or
              u.get("prompt_tokens") != want["usage"]["prompt_tokens"] or
              u.get("total_tokens") != u.get("prompt_tokens", 0) + len(got["tokens"])):
            bad.append(f"{rid}: usage {u} does not add up")
        prompt += u.get("prompt_tokens", 0)
        generated += u.get("completion_tokens", 0)
    c.check(not bad and len(results) == 32,
            f"{label}: {len(results) - len(bad)}/32 requests match `qmpi batch` token for token, "
            f"streamed in order, usage adding up" + ("".join("\n      " + b for b in bad[:5])))
    return prompt, generated


def metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise t.TestFailure(f"/metrics has no {name}")


# --- cancel and disconnect -------------------------------------------------------------------

LONG = {"prompt": "count the birds near old stone bridges", "max_tokens": 200,
        "temperature": 0, "ignore_eos": True, "stream": True}


def streaming_socket(server: Server, rid: str, **fields):
    """A DEALER with a LONG request (updated with fields) streaming: three deltas read."""
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(server.endpoint)
    sock.send_json(dict(LONG, v=1, type="generate", id=rid, **fields))
    for _ in range(3):
        if not sock.poll(60000):
            raise t.TestFailure(f"{rid}: no delta in 60s")
        msg = json.loads(sock.recv())
        if msg["type"] != "delta":
            raise t.TestFailure(f"{rid}: {msg}")
    return sock


def rss_kib(pid: int) -> int:
    """Resident memory of `pid` in KiB; -1 once it has gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except FileNotFoundError:
        pass
    return -1


def served(c: t.Checks, server: Server, label: str) -> None:
    """A server started with --api-key API_KEY still serves a valid ZeroMQ request and a valid
    HTTP request (after hostile ones)."""
    r = server.call(dict(VALID_GENERATE, id="after"), timeout=60)[-1]
    c.check(r["type"] == "final" and r["usage"]["completion_tokens"] == 4,
            f"{label}: a valid ZeroMQ request is served ({r.get('type')})")
    status, _, text = http_request(server.http_port, "POST", "/v1/chat/completions",
                                   {"messages": [{"role": "user", "content": "hi"}],
                                    "max_tokens": 3}, AUTH)
    ok = status == 200 and json.loads(text)["usage"]["completion_tokens"] == 3
    c.check(ok, f"{label}: a valid HTTP request with the API key is served (HTTP {status})")
