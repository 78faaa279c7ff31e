#!/usr/bin/python3
"""`qmpi serve` under hostile input: a few hundred malformed ZeroMQ messages and frames and bad
HTTP requests (invalid JSON, deep nesting, unknown fields, wrong types, out-of-range values,
prompts over --max-model-len, absurd max_tokens, oversized frames and bodies, bad envelopes,
unknown cancel ids, duplicate ids, a full queue, missing or wrong API keys, unknown routes,
random mutations of a valid request). Each one is answered with an error carrying its catalogue
code, the server keeps serving valid requests afterwards, its memory does not grow from one
round of it to the next, and SIGTERM still stops it cleanly. A client that streams without
reading is dropped with client-too-slow (one error per request, with its id) and its requests
freed; one that only reads late is neither dropped nor taken for gone. Numbers beyond a double
are request errors with the request's id, and /metrics counts each refusal once.
"""

import json
import os
import random
import socket
import subprocess
import time

import zmq

import servelib as sz
import testlib as t

KEY = "fuzz-secret"
AUTH = {"Authorization": f"Bearer {KEY}"}
VALID = {"v": 1, "type": "generate", "id": "ok", "api_key": KEY,
         "prompt": "the quick brown fox", "max_tokens": 4, "temperature": 0}


def zmq_cases() -> list:
    """(label, frames, expected code) for one DEALER; frames are bytes."""
    def j(obj):
        return [json.dumps(obj).encode()]

    def gen(**kw):
        m = dict(VALID, id="bad")
        m.update(kw)
        return m

    cases = []
    for text in ["", "{", "}", "null", "[]", "42", '"str"', '{"id": "a", "prompt": ',
                 "{'id': 'single quotes'}", '{"id": "a", "prompt": "x",}', "\x00\x01\x02",
                 "\xff\xfe{}", '{"id": "a", "prompt": "\\ud800"}', "NaN", "true"]:
        cases.append((f"not JSON {text[:12]!r}", [text.encode("latin-1")], "QM500"))
    cases.append(("nesting 100000 deep", [b"[" * 100000], "QM500"))
    cases.append(("nesting in a field", [b'{"id": "a", "prompt": ' + b"[" * 5000 + b"]" * 5000
                                         + b"}"], "QM500"))
    cases.append(("three frames", [b"", b"", json.dumps(VALID).encode()], "QM500"))
    cases.append(("two frames, no delimiter", [b"x", json.dumps(VALID).encode()], "QM500"))
    # Unknown fields are ignored (as vLLM ignores them) except near-misses of known ones,
    # fields of the other endpoint, and fields that would change the answer.
    for field, value in [("temprature", 0), ("max_token", 4), ("max_completion_tokens", 4),
                         ("top_logprobs", 2)]:
        cases.append((f"field {field!r}", j(gen(**{field: value})), "QM501"))
    for field, value in [("logit_bias", {"5": 1}), ("echo", True),
                         ("guided_json", {"type": "object", "minProperties": 1}),
                         ("structured_outputs", {"whitespace_pattern": " "})]:
        cases.append((f"unsupported field {field!r}", j(gen(**{field: value})), "QM520"))
    for field, value in [("guided_regex", "a("), ("guided_grammar", "root ::= x"),
                         ("guided_choice", []), ("response_format", {"type": "yaml"})]:
        cases.append((f"bad structured output {field!r}", j(gen(**{field: value})), "QM501"))
    for field, value in [("max_tokens", "8"), ("max_tokens", 4.5), ("max_tokens", None),
                         ("temperature", "hot"), ("top_k", 1.5), ("stop", 5), ("stop", [1]),
                         ("seed", "x"), ("stream", "yes"), ("ignore_eos", 1), ("n", "2"),
                         ("prompt", 5), ("prompt", []), ("prompt", [[1], 3]), ("prompt", [-1]),
                         ("prompt", ""), ("prompt", [999999999]), ("prompt", {"a": 1}),
                         ("stop_token_ids", [-3]), ("model", 7),
                         ("max_tokens", 2 ** 70), ("logprobs", True)]:
        if value is None:
            continue
        cases.append((f"{field}={json.dumps(value)[:20]}", j(gen(**{field: value})), "QM501"))
    msgs = [("messages not a list", "hi"), ("messages empty", []),
            ("message without a role", [{"content": "x"}]),
            ("message content a number", [{"role": "user", "content": 5}]),
            ("image part", [{"role": "user", "content": [{"type": "image_url", "image_url": "x"}]}])]
    for label, value in msgs:
        m = gen(messages=value)
        del m["prompt"]
        cases.append((label, j(m), "QM501"))
    both = gen(messages=[{"role": "user", "content": "x"}])
    cases.append(("prompt and messages", j(both), "QM501"))
    none = gen()
    del none["prompt"]
    cases.append(("neither prompt nor messages", j(none), "QM501"))
    for field, value in [("temperature", -1), ("top_p", 0), ("top_p", 2), ("max_tokens", 0),
                         ("max_tokens", -5), ("n", 0), ("n", 1000), ("presence_penalty", 5),
                         ("repetition_penalty", 0), ("top_k", 0), ("min_p", 2)]:
        cases.append((f"{field}={value}", j(gen(**{field: value})), "QM503"))
    cases.append(("stop_token_ids past the vocabulary", j(gen(stop_token_ids=[10 ** 9])), "QM503"))
    cases.append(("prompt over --max-model-len", j(gen(prompt="word " * 400)), "QM502"))
    cases.append(("absurd max_tokens", j(gen(max_tokens=10 ** 12)), "QM502"))
    cases.append(("max_tokens past the model length", j(gen(max_tokens=300)), "QM502"))
    cases.append(("frame over --max-request-bytes", j(gen(prompt="x" * (2 << 20))), "QM506"))
    for m, label in [({"type": "launch", "id": "a"}, "unknown type"),
                     ({"type": 3}, "type a number"), ({"v": 2, "type": "health"}, "version 2"),
                     ({"v": "1", "type": "health"}, "version a string"),
                     ({"type": "cancel"}, "cancel without id"),
                     ({"type": "health", "prompt": "x"}, "health with a prompt"),
                     ({"type": "generate", "prompt": "x"}, "generate without id"),
                     ({"id": "", "prompt": "x"}, "empty id"), ({"id": [1], "prompt": "x"}, "list id"),
                     ({"id": "x" * 400, "prompt": "x"}, "long id")]:
        cases.append((label, j(dict(m, api_key=KEY)), "QM501"))
    cases.append(("cancel of an unknown id", j({"type": "cancel", "id": "nope", "api_key": KEY}),
                  "QM505"))
    cases.append(("cancel of an integer id", j({"type": "cancel", "id": 12345, "api_key": KEY}),
                  "QM505"))
    # The server has --api-key: ZeroMQ is no way around it.
    keyless = dict(VALID, id="nokey")
    del keyless["api_key"]
    cases.append(("generate without api_key", j(keyless), "QM507"))
    cases.append(("generate with a wrong api_key", j(gen(api_key=KEY + "x")), "QM507"))
    cases.append(("generate with api_key a number", j(gen(api_key=7)), "QM507"))
    cases.append(("cancel without api_key", j({"type": "cancel", "id": "nope"}), "QM507"))
    # Random mutations of a valid request: each is refused, or (rarely) still valid.
    rng = random.Random(7)
    base = json.dumps(dict(VALID, id="mut")).encode()
    for i in range(120):
        b = bytearray(base)
        kind = i % 3
        if kind == 0:
            b = b[:rng.randrange(len(b))]
        elif kind == 1:
            for _ in range(rng.randint(1, 4)):
                b[rng.randrange(len(b))] = rng.randrange(256)
        else:
            b = bytes(rng.randrange(256) for _ in range(rng.randint(1, 200)))
        cases.append((f"mutation {i}", [bytes(b)], None))
    return cases


def zmq_round(c: t.Checks, server, label: str) -> None:
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(server.endpoint)
    wrong, answered, valid = [], 0, 0
    for name, frames, code in zmq_cases():
        sock.send_multipart(frames)
        replies = sz.read_replies(sock, 30)
        last = replies[-1]
        if code is None:  # a mutation: an error, or a request that happened to stay valid
            ok = last["type"] == "error" or last["type"] == "final"
            valid += last["type"] == "final"
        else:
            ok = last["type"] == "error" and last["code"] == code
        answered += 1
        if not ok:
            wrong.append(f"{name}: {json.dumps(last)[:160]}")
    c.check(not wrong, f"{label}: {answered} hostile ZeroMQ messages each answered with their "
                       f"error code ({valid} mutations stayed valid)" +
            "".join("\n      " + w for w in wrong[:6]))

    # One in-flight id used twice, then a full queue (--max-queue 8, 2 sequences at once).
    sock.send_json(dict(VALID, id="dup", max_tokens=200, ignore_eos=True, stream=True))
    sock.send_json(dict(VALID, id="dup"))
    replies = []
    while not any(r["type"] == "error" for r in replies) and sock.poll(30000):
        replies.append(json.loads(sock.recv()))
    err = ([r for r in replies if r["type"] == "error"] or [{"code": "none", "message": ""}])[0]
    c.check(err["code"] == "QM501" and "already in flight" in err["message"],
            f"{label}: a second request with an id in flight: {err['code']}")
    sock.send_json({"type": "cancel", "id": "dup", "api_key": KEY})
    for i in range(20):
        sock.send_json(dict(VALID, id=f"q{i}", max_tokens=100, ignore_eos=True))
    finals, busy, other = 0, 0, []
    dup_done = False
    while finals + busy < 20 or not dup_done:
        if not sock.poll(60000):
            break
        r = json.loads(sock.recv())
        if r.get("id") == "dup":
            dup_done = r["type"] in ("final", "error")
        elif r["type"] == "final":
            finals += 1
        elif r["type"] == "error" and r["code"] == "QM504":
            busy += 1
        elif r["type"] != "delta":
            other.append(r)
    c.check(busy > 0 and finals > 0 and finals + busy == 20 and not other,
            f"{label}: 20 requests at once past --max-queue 8: {finals} served, {busy} busy "
            f"(QM504)")
    sock.close()


def http_cases(port: int) -> list:
    """(label, method, path, body, headers, status, code)."""
    p = "/v1/completions"
    ch = "/v1/chat/completions"
    ok_body = {"prompt": "x", "max_tokens": 2}
    cases = [("no API key", "POST", p, ok_body, {}, 401, "QM507"),
             ("wrong API key", "POST", p, ok_body, {"Authorization": "Bearer nope"}, 401, "QM507"),
             ("API key without Bearer", "POST", p, ok_body, {"Authorization": KEY}, 401, "QM507"),
             ("models without a key", "GET", "/v1/models", None, {}, 401, "QM507"),
             ("unknown route", "POST", "/v1/embeddings", ok_body, AUTH, 404, "QM523"),
             ("unknown route outside /v1", "GET", "/admin", None, {}, 404, "QM523"),
             ("GET on a POST route", "GET", p, None, AUTH, 404, "QM523"),
             ("body over the limit", "POST", p, b"{" + b" " * (2 << 20) + b"}", AUTH, 413, "QM506"),
             ("messages on /v1/completions", "POST", p,
              {"messages": [{"role": "user", "content": "x"}]}, AUTH, 400, "QM501"),
             ("prompt on /v1/chat/completions", "POST", ch, ok_body, AUTH, 400, "QM501"),
             ("stream_options without stream", "POST", p,
              dict(ok_body, stream_options={"include_usage": True}), AUTH, 400, "QM501"),
             ("stream_options bogus", "POST", p,
              dict(ok_body, stream=True, stream_options={"x": 1}), AUTH, 400, "QM501"),
             ("return_token_ids a string", "POST", p, dict(ok_body, return_token_ids="y"), AUTH,
              400, "QM501"),
             ("prompt over --max-model-len", "POST", p, {"prompt": "word " * 400}, AUTH, 400,
              "QM502"),
             ("absurd max_tokens", "POST", p, dict(ok_body, max_tokens=10 ** 12), AUTH, 400,
              "QM502"),
             ("nesting", "POST", p, b"[" * 100000, AUTH, 400, "QM500")]
    for text in [b"", b"{", b"null", b"[1]", b"\xff\xfe", b'{"prompt": "x",}', b"42"]:
        cases.append((f"not JSON {text[:8]!r}", "POST", p, text, AUTH, 400, "QM500"))
    for field, value, code in [("temprature", 1, "QM501"), ("max_tokens", "8", "QM501"),
                               ("temperature", -1, "QM503"), ("top_p", 0, "QM503"),
                               ("n", 0, "QM503"), ("stop", 5, "QM501"), ("prompt", 5, "QM501"),
                               ("logprobs", True, "QM501"), ("stream", "yes", "QM501"),
                               ("logit_bias", {"1": 5}, "QM520")]:
        cases.append((f"{field}={value}", "POST", p, dict(ok_body, **{field: value}), AUTH, 400,
                      code))
    rng = random.Random(3)
    base = json.dumps(ok_body).encode()
    for i in range(60):
        b = bytearray(base)
        if i % 2:
            b = b[:rng.randrange(len(b))]
        else:
            b[rng.randrange(len(b))] = rng.randrange(256)
        cases.append((f"mutation {i}", "POST", p, bytes(b), AUTH, None, None))
    return cases


def raw_http(port: int, data: bytes) -> bytes:
    """The response head (status line and headers) to raw bytes on a fresh connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(data)
        out = b""
        try:
            while b"\r\n\r\n" not in out:
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
        except socket.timeout:
            pass
        return out


def http_round(c: t.Checks, server, label: str) -> None:
    wrong, n = [], 0
    for name, method, path, body, headers, status, code in http_cases(server.http_port):
        got, _, text = sz.http_request(server.http_port, method, path, body, headers, timeout=30)
        n += 1
        try:
            err = json.loads(text).get("error") if text else None
        except ValueError:
            err = None
        if status is None:  # a mutation: refused with a JSON error, or served
            ok = (got == 200) or (got in (400, 413) and err is not None)
        else:
            ok = got == status and err is not None and err.get("qmpi_code") == code
        if not ok:
            wrong.append(f"{name}: HTTP {got} {text[:140]}")
    for raw in [b"GARBAGE\r\n\r\n", b"POST /v1/completions HTTP/1.1\r\nContent-Length: x\r\n\r\n",
                b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 64]:
        reply = raw_http(server.http_port, raw)
        n += 1
        if not reply.startswith(b"HTTP/1.1 4") and reply:
            wrong.append(f"raw {raw[:12]!r}: {reply[:80]!r}")
    c.check(not wrong, f"{label}: {n} hostile HTTP requests each answered with their status and "
                       f"error code" + "".join("\n      " + w for w in wrong[:6]))



def served(c: t.Checks, server, label: str) -> None:
    r = server.call(dict(VALID, id="after"), timeout=60)[-1]
    c.check(r["type"] == "final" and r["usage"]["completion_tokens"] == 4,
            f"{label}: a valid ZeroMQ request is served ({r.get('type')})")
    status, _, text = sz.http_request(server.http_port, "POST", "/v1/chat/completions",
                                      {"messages": [{"role": "user", "content": "hi"}],
                                       "max_tokens": 3}, AUTH)
    ok = status == 200 and json.loads(text)["usage"]["completion_tokens"] == 3
    c.check(ok, f"{label}: a valid HTTP request with the API key is served (HTTP {status})")


def client_key(c: t.Checks, server) -> None:
    """`qmpi client` reads the key as `qmpi serve` does (--api-key, --api-key-file,
    QMPI_API_KEY) and sends it over ZeroMQ; without it the server refuses the request."""
    cmd = [t.qmpi_binary(), "client", "--connect", server.endpoint, "--prompt", "once upon",
           "--max-tokens", "3", "--temperature", "0", "--json"]
    env = {k: v for k, v in os.environ.items() if k != "QMPI_API_KEY"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    c.check(proc.returncode != 0 and "QM507" in proc.stderr,
            f"qmpi client without the key is refused: exit {proc.returncode}, "
            f"{proc.stderr.strip()[-120:]!r}")
    key_file = os.path.join(t.test_tmp("serve_fuzz"), "client.key")
    with open(key_file, "w") as f:
        f.write(KEY + "\n")
    for how, extra, run_env in [("--api-key-file", ["--api-key-file", key_file], env),
                                ("QMPI_API_KEY", [], dict(env, QMPI_API_KEY=KEY))]:
        proc = subprocess.run(cmd + extra, capture_output=True, text=True, timeout=60,
                              env=run_env)
        ok = proc.returncode == 0 and json.loads(proc.stdout)["usage"]["completion_tokens"] == 3
        c.check(ok, f"qmpi client with the key from {how} is answered: exit {proc.returncode} "
                    f"{proc.stderr.strip()[-120:]!r}")


def slow_reader(c: t.Checks, model: str) -> None:
    """A client that streams many tokens and reads nothing is dropped with client-too-slow; its
    requests are cancelled (their KV blocks freed) and other clients go on being served."""
    server = sz.Server(model, tp=1, pp=1, extra=["--zmq-sndhwm", "1", "--client-buffer-bytes",
                                                 "4096", "--max-num-seqs", "32",
                                                 "--api-key", KEY])
    try:
        server.wait_ready()
        sock = zmq.Context.instance().socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RCVHWM, 1)
        sock.setsockopt(zmq.RCVBUF, 4096)  # a small kernel buffer: the server's replies back up
        sock.connect(server.endpoint)
        for i in range(8):
            sock.send_json({"v": 1, "type": "generate", "id": f"slow{i}", "api_key": KEY,
                            "prompt": "once upon",
                            "n": 4, "max_tokens": 200, "temperature": 0, "ignore_eos": True,
                            "stream": True})
        dropped = server.wait_stats(lambda s: s["requests"]["cancelled"] >= 8 and
                                    s["running"] == 0 and s["kv_blocks_used"] == 0, timeout=60)
        errors, finals = [], []
        while sock.poll(2000):
            msg = json.loads(sock.recv_multipart()[-1])
            if msg.get("type") == "error":
                errors.append(msg)
            elif msg.get("type") == "final":
                finals.append(msg)
        sock.close()
        codes = sorted({e.get("code") for e in errors})
        ids = sorted(e.get("id") for e in errors)
        c.check(codes == ["QM508"] and ids == [f"slow{i}" for i in range(8)] and not finals and
                "too slowly" in errors[0].get("message", ""),
                f"a client that does not read gets one client-too-slow error per request, with "
                f"its id: {codes} for {ids} "
                f"{(errors or [{}])[0].get('message', '')[:90]!r}")
        c.check(dropped["requests"]["cancelled"] == 8 and dropped["running"] == 0 and
                dropped["kv_blocks_used"] == 0,
                f"its 8 requests were cancelled ({dropped['requests']['cancelled']}), "
                f"{dropped['running']} running, {dropped['kv_blocks_used']} KV blocks in use")
        served(c, server, "after a dropped slow client")
        c.check("dropped a client" in server.log_text(), "the server logged the drop")
    finally:
        server.kill()


def numbers_and_metrics(c: t.Checks, server) -> None:
    """Issue 19, items 1 and 6: a number beyond a double is the request's QM501 with its id
    (it was a 500 / QM999 without one), and a refused request is counted once in /metrics."""
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(server.endpoint)
    for text in [b'{"v": 1, "id": "big", "prompt": "x", "max_tokens": 1e400}',
                 b'{"id": "big", "prompt": [1, 2, ' + b"9" * 400 + b"]}"]:
        sock.send(text)
        r = sz.read_replies(sock, 30)[-1]
        c.check(r["type"] == "error" and r.get("code") == "QM501" and r.get("id") == "big",
                f"ZeroMQ {text[-24:]!r}: {r.get('code')} with id {r.get('id')!r}")
    sock.close()
    status, _, text = sz.http_request(server.http_port, "POST", "/v1/completions",
                                      b'{"prompt": "x", "temperature": -1e400}', AUTH)
    err = json.loads(text).get("error", {}) if text.startswith("{") else {}
    c.check(status == 400 and err.get("qmpi_code") == "QM501" and "1e400" in err.get("message"),
            f"HTTP -1e400: {status} {err.get('qmpi_code')}")

    def counts():
        _, _, m = sz.http_request(server.http_port, "GET", "/metrics")
        errors = 0.0
        for line in m.splitlines():
            if line.startswith('qmpi_request_errors_total{code="QM502"} '):
                errors = float(line.split()[-1])
        return sz.metric(m, 'qmpi_requests_total{status="error"}'), errors

    before = counts()
    status, _, _ = sz.http_request(server.http_port, "POST", "/v1/completions",
                                   {"prompt": "word " * 400}, AUTH)
    after_http = counts()
    r = server.call(dict(VALID, id="long", prompt="word " * 400))[-1]
    after_zmq = counts()
    c.check(status == 400 and r.get("code") == "QM502" and
            after_http == (before[0] + 1, before[1] + 1) and
            after_zmq == (before[0] + 2, before[1] + 2),
            f"one prompt-too-long over HTTP, then one over ZeroMQ, each counted once in "
            f"/metrics: errors and QM502 {before} -> {after_http} -> {after_zmq}")


def late_reader(c: t.Checks, model: str) -> None:
    """Issue 19, item 2: a client with RCVHWM=1 that sends streaming requests, reads nothing for
    20 s (past what ZeroMQ heartbeats would allow) and then reads, gets every delta and every
    final: what the server holds for it is within --client-buffer-bytes, and it is connected,
    so it is neither dropped nor taken for gone."""
    server = sz.Server(model, tp=1, pp=1, extra=["--zmq-sndhwm", "10", "--max-num-seqs", "16"])
    try:
        server.wait_ready()
        sock = zmq.Context.instance().socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RCVHWM, 1)
        sock.setsockopt(zmq.RCVBUF, 4096)
        sock.connect(server.endpoint)
        n, tokens = 8, 200
        sent = time.monotonic()
        for i in range(n):
            sock.send_json({"v": 1, "type": "generate", "id": f"late{i}", "prompt": "once upon",
                            "max_tokens": tokens, "temperature": 0, "ignore_eos": True,
                            "stream": True})
        done = server.wait_stats(lambda s: s["requests"]["ok"] >= n, timeout=120)
        time.sleep(max(0.0, 20 - (time.monotonic() - sent)))
        deltas, finals, other = {}, {}, []
        while sock.poll(3000):
            msg = json.loads(sock.recv_multipart()[-1])
            if msg.get("type") == "delta":
                deltas[msg["id"]] = deltas.get(msg["id"], 0) + len(msg["token_ids"])
            elif msg.get("type") == "final":
                finals[msg["id"]] = msg["usage"]["completion_tokens"]
            else:
                other.append(msg)
        sock.close()
        want = {f"late{i}": tokens for i in range(n)}
        c.check(done["requests"]["ok"] >= n and finals == want and deltas == want and not other,
                f"a client that reads 20 s late gets all {n * tokens} streamed tokens and {n} "
                f"finals: {sum(deltas.values())} tokens, {len(finals)} finals, {other[:2]}")
        c.check("went away" not in server.log_text() and "dropped a client" not in
                server.log_text(), "the server took it neither for gone nor for too slow")
    finally:
        server.kill()


def body(c: t.Checks) -> None:
    model = t.make_model()
    server = sz.Server(model, tp=1, pp=1, extra=["--api-key", KEY, "--max-queue", "8",
                                                 "--max-num-seqs", "2"])
    try:
        server.wait_ready()
        served(c, server, "before")
        client_key(c, server)
        numbers_and_metrics(c, server)
        pid = server.rank0_pid()
        start_kib = sz.rss_kib(pid)
        zmq_round(c, server, "round 1")
        http_round(c, server, "round 1")
        # A frame past the hard limit (16 x --max-request-bytes): ZeroMQ drops that connection.
        huge = zmq.Context.instance().socket(zmq.DEALER)
        huge.setsockopt(zmq.LINGER, 0)
        huge.connect(server.endpoint)
        huge.send(b"x" * (17 << 20))
        time.sleep(0.5)
        huge.close()
        served(c, server, "after round 1 and a 17 MiB frame")
        one_kib = sz.rss_kib(pid)
        zmq_round(c, server, "round 2")
        http_round(c, server, "round 2")
        served(c, server, "after round 2")
        two_kib = sz.rss_kib(pid)
        grew = (two_kib - one_kib) / 1024
        c.check(grew < 16, f"rank 0's memory stayed bounded: {start_kib / 1024:.0f} MiB before, "
                           f"{one_kib / 1024:.0f} after round 1, {two_kib / 1024:.0f} after round 2 "
                           f"({grew:+.1f} MiB in round 2)")
        # The engine publishes its stats once per loop iteration: wait for the one after the last
        # answer (a sequence or block still held then is a leak).
        stats = server.wait_stats(lambda s: s["kv_blocks_used"] == 0 and s["running"] == 0)
        c.check(stats["kv_blocks_used"] == 0 and stats["running"] == 0 and stats["clients"] <= 1,
                f"nothing left behind: {stats['kv_blocks_used']} KV blocks in use, "
                f"{stats['running']} running, {stats['clients']} clients tracked")
        rc = server.stop()
        c.check(rc == 0, f"SIGTERM stops the server cleanly (exit {rc})")
    finally:
        server.kill()
    slow_reader(c, model)
    late_reader(c, model)


if __name__ == "__main__":
    t.main("serve_fuzz", body)
