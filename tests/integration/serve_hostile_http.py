#!/usr/bin/python3
"""`qmpi serve` against hostile HTTP framings and bodies (issue 28), on a 1-rank tiny model.

Framings, each checked against RFC 9112's rule for it and sent with a second request smuggled
behind it: Transfer-Encoding with Content-Length (either order), a coding other than chunked
last (`xchunked`, `chunked, identity`), a coding before chunked (`gzip, chunked`: 501), chunked
twice, Transfer-Encoding on HTTP/1.0, conflicting Content-Lengths, no Host or two. Each gets its
status and catalogue code, the connection is closed, and the smuggled request is never
answered. HEAD is answered with GET's headers and no body; an absolute-form target is routed.
Bodies: 80,000 keys in `metadata`, a 50,000-entry `logit_bias`, deep nesting, too many or too
long stop strings, `chat_template_kwargs` that would replace `messages`, unknown roles; each
gets its code (the time each took is printed, for the record). `developer` is read as `system`.
After every case /health and a normal request are answered, and rank 0's memory stays bounded
from one round of the corpus to the next.
"""

import json
import re
import socket
import time

import servelib as sz
import testlib as t

SMUGGLED = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
BODY = b'{"prompt": "x", "max_tokens": 2}'
CL = b"Content-Length: %d\r\n" % len(BODY)


def exchange(port: int, data: bytes, timeout: float = 15.0) -> tuple:
    """Every byte the server sends back to `data` on a fresh connection until it closes, and
    whether it closed (False: it was still open after `timeout`)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    return out, True
                out += chunk
        except socket.timeout:
            return out, False
        except ConnectionResetError:
            return out, True


def framing_cases() -> list:
    """(label, raw request, status, code) per RFC 9112 (section)."""
    post = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
    return [
        ("TE chunked then CL (6.3)", post + b"Transfer-Encoding: chunked\r\n" + CL + b"\r\n" + BODY,
         400, "QM500"),
        ("CL then TE chunked (6.3)", post + CL + b"Transfer-Encoding: chunked\r\n\r\n" + BODY, 400,
         "QM500"),
        ("TE xchunked with CL (6.3)", post + b"Transfer-Encoding: xchunked\r\n" + CL + b"\r\n" +
         BODY, 400, "QM500"),
        ("TE chunked, identity with CL (6.3)", post + CL +
         b"Transfer-Encoding: chunked, identity\r\n\r\n" + BODY, 400, "QM500"),
        ("TE xchunked alone: chunked not last (6.3)", post + b"Transfer-Encoding: xchunked\r\n\r\n"
         + BODY, 400, "QM500"),
        ("TE gzip, chunked: a coding not implemented (6.1)", post +
         b"Transfer-Encoding: gzip, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 501, "QM522"),
        ("TE chunked twice (6.1)", post + b"Transfer-Encoding: chunked\r\n"
         b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, "QM500"),
        ("TE on HTTP/1.0 (6.1)", b"POST /v1/completions HTTP/1.0\r\n"
         b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, "QM500"),
        ("two Content-Lengths (6.3)", post + b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n" +
         BODY, 400, "QM500"),
        ("HTTP/1.1 without Host (3.2)", b"GET /health HTTP/1.1\r\n\r\n", 400, "QM500"),
        ("two Host headers (3.2)", b"GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400,
         "QM500"),
    ]


def framing_round(c: t.Checks, server, label: str) -> None:
    wrong = []
    for name, raw, status, code in framing_cases():
        reply, closed = exchange(server.http_port, raw + SMUGGLED)
        head, _, rest = reply.partition(b"\r\n\r\n")
        got = int(head.split()[1]) if head.startswith(b"HTTP/1.") else None
        answers = len(re.findall(rb"HTTP/1\.[01] \d{3} ", reply))  # status lines
        ok = (got == status and f'"qmpi_code":"{code}"'.encode() in rest.replace(b" ", b"")
              and closed and answers == 1)
        if not ok:
            wrong.append(f"{name}: HTTP {got}, closed {closed}, {answers} answers, "
                         f"{reply[:160]!r}")
        healthy(server, wrong, name)
    c.check(not wrong, f"{label}: {len(framing_cases())} ambiguous framings refused per RFC 9112, "
                       f"the connection closed, the smuggled request never answered" +
            "".join("\n      " + w for w in wrong[:6]))


def healthy(server, wrong: list, after: str) -> None:
    status, _, _ = sz.http_request(server.http_port, "GET", "/health", timeout=30)
    if status != 200:
        wrong.append(f"after {after}: /health {status}")


def head_and_absolute_form(c: t.Checks, server) -> None:
    _, headers, body = sz.http_request(server.http_port, "GET", "/v1/models", headers=sz.AUTH)
    reply, _ = exchange(server.http_port, b"HEAD /v1/models HTTP/1.1\r\nHost: x\r\n"
                        b"Authorization: Bearer " + sz.API_KEY.encode() + b"\r\n"
                        b"Connection: close\r\n\r\n")
    head, _, rest = reply.partition(b"\r\n\r\n")
    length = b"Content-Length: %d" % len(body.encode())
    c.check(head.startswith(b"HTTP/1.1 200") and length in head and rest == b"",
            f"HEAD /v1/models: GET's status and {length.decode()}, no body ({len(rest)} bytes)")
    port = server.http_port
    reply, _ = exchange(port, b"GET http://127.0.0.1:%d/health HTTP/1.1\r\nHost: x\r\n"
                        b"Connection: close\r\n\r\n" % port)
    c.check(reply.startswith(b"HTTP/1.1 200"), f"an absolute-form target is routed: {reply[:15]!r}")


def big_object(n: int, value: str = "1") -> str:
    return "{" + ",".join(f'"{i}":{value}' for i in range(n)) + "}"


def body_cases() -> list:
    """(label, body bytes, status, code)."""
    msgs = '"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2'

    def chat(extra: str) -> bytes:
        return ("{" + msgs + ", " + extra + "}").encode()

    return [
        ("80000 keys in metadata", chat('"metadata": ' + big_object(80000)), 400, "QM500"),
        ("50000-entry logit_bias", chat('"logit_bias": ' + big_object(50000, "5")), 400, "QM500"),
        ("300-entry logit_bias (OpenAI's limit)", chat('"logit_bias": ' + big_object(300, "5")),
         400, "QM520"),
        ("nesting 33 deep in metadata", chat('"metadata": ' + "[" * 33 + "]" * 33), 400, "QM500"),
        ("17 stop strings", chat('"stop": ' + json.dumps([str(i) for i in range(17)])), 400,
         "QM503"),
        ("a 2000-byte stop string", chat('"stop": "' + "s" * 2000 + '"'), 400, "QM503"),
        ("chat_template_kwargs replacing messages",
         chat('"chat_template_kwargs": {"messages": []}'), 400, "QM501"),
        ("chat_template_kwargs replacing tools", chat('"chat_template_kwargs": {"tools": [1]}'),
         400, "QM501"),
        ("role function", b'{"messages": [{"role": "function", "content": "x"}]}', 400, "QM501"),
        ("role bot", b'{"messages": [{"role": "bot", "content": "x"}]}', 400, "QM501"),
    ]


def body_round(c: t.Checks, server, label: str) -> None:
    wrong, took = [], []
    for name, data, status, code in body_cases():
        start = time.monotonic()
        got, _, text = sz.http_request(server.http_port, "POST", "/v1/chat/completions", data,
                                       sz.AUTH, timeout=60)
        took.append(f"{name} {(time.monotonic() - start) * 1000:.0f} ms")
        try:
            err = json.loads(text).get("error") or {}
        except ValueError:
            err = {}
        if got != status or err.get("qmpi_code") != code:
            wrong.append(f"{name}: HTTP {got} {text[:160]}")
        healthy(server, wrong, name)
    print("  " + label + ": " + "; ".join(took), flush=True)
    c.check(not wrong, f"{label}: {len(body_cases())} hostile bodies each refused with their "
                       f"status and code" + "".join("\n      " + w for w in wrong[:6]))


def developer_role(c: t.Checks, server) -> None:
    got, _, text = sz.http_request(
        server.http_port, "POST", "/v1/chat/completions",
        {"messages": [{"role": "developer", "content": "Be brief."},
                      {"role": "user", "content": "hi"}], "max_tokens": 2,
         "return_token_ids": True}, sz.AUTH)
    as_system = sz.http_request(
        server.http_port, "POST", "/v1/chat/completions",
        {"messages": [{"role": "system", "content": "Be brief."},
                      {"role": "user", "content": "hi"}], "max_tokens": 2,
         "return_token_ids": True}, sz.AUTH)[2]
    same = got == 200 and (json.loads(text)["prompt_token_ids"] ==
                           json.loads(as_system)["prompt_token_ids"])
    c.check(same, f"a developer message is the same prompt as a system one (HTTP {got})")


def body(c: t.Checks) -> None:
    model = t.make_model()
    server = sz.Server(model, tp=1, pp=1, extra=["--api-key", sz.API_KEY])
    try:
        server.wait_ready()
        sz.served(c, server, "before")
        head_and_absolute_form(c, server)
        developer_role(c, server)
        pid = server.rank0_pid()
        framing_round(c, server, "round 1")
        body_round(c, server, "round 1")
        sz.served(c, server, "after round 1")
        one_kib = sz.rss_kib(pid)
        framing_round(c, server, "round 2")
        body_round(c, server, "round 2")
        sz.served(c, server, "after round 2")
        two_kib = sz.rss_kib(pid)
        grew = (two_kib - one_kib) / 1024
        c.check(grew < 16, f"rank 0's memory stayed bounded: {one_kib / 1024:.0f} MiB after round "
                           f"1, {two_kib / 1024:.0f} after round 2 ({grew:+.1f} MiB)")
        rc = server.stop()
        c.check(rc == 0, f"SIGTERM stops the server cleanly (exit {rc})")
    finally:
        server.kill()


if __name__ == "__main__":
    t.main("serve_hostile_http", body)
