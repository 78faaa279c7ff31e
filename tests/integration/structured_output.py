#!/usr/bin/python3
"""Structured output on a random-weight model, which left alone emits garbage, so every valid
answer is the constraint's doing. `qmpi batch` runs a few hundred generated JSON schemas,
regexes, GBNF grammars (each equivalent to a regex Python checks) and choice lists at
temperature 1 with several seeds, mixed with free lines: every answer that finishes with
"stop" validates (python3-jsonschema, with format checks; `re.fullmatch`), and most do finish.
Then `qmpi serve`: a constrained answer streamed adds up to the same text as whole; tool_choice
"required" and named give tool_calls that parse and fit the tool's parameters, with
finish_reason "tool_calls"; a bad regex and an unsupported keyword are 400s. One rank, so it
runs beside the MPI tests; the same lines under mpirun are structured_output_layouts.py's.
"""

import copy
import datetime
import json
import os
import random
import re

import jsonschema

import servelib as sz
import testlib as t

MAX_TOKENS = 120


def gen_schema(rng: random.Random, depth: int = 0) -> dict:
    kinds = ["string", "integer", "boolean", "null", "enum", "const", "format", "pattern",
             "number", "anyOf"] + (["object", "array"] * 2 if depth < 2 else [])
    k = rng.choice(kinds)
    if k == "string":
        lo = rng.randint(0, 3)
        return {"type": "string", "minLength": lo, "maxLength": lo + rng.randint(0, 6)}
    if k == "integer":
        s = {"type": "integer"}
        lo = rng.randint(-500, 500)
        s["minimum"] = lo
        s["maximum"] = lo + rng.randint(0, 2000)
        if rng.random() < 0.3:
            s["exclusiveMaximum"] = s.pop("maximum")
        return s
    if k == "number":
        return {"type": ["number", "null"]}
    if k in ("boolean", "null"):
        return {"type": k}
    if k == "enum":
        return {"enum": rng.sample(["a", "b c", 7, None, True, {"x": [1]}, "é"], rng.randint(1, 4))}
    if k == "const":
        return {"const": rng.choice(["fixed", 42, [1, "two"], {"k": None}])}
    if k == "format":
        return {"type": "string", "format": rng.choice(["date", "time", "date-time", "uuid",
                                                          "email", "ipv4"])}
    if k == "pattern":
        return {"type": "string", "pattern": rng.choice(["^[A-Z]{2}-\\d{2,4}$", "^(ab|cd)+$",
                                                          "^x?y{1,3}$", "^[^\"\\\\]{0,5}$"])}
    if k == "anyOf":
        return {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 9},
                          {"type": "string", "maxLength": 3}, {"type": "boolean"}][:rng.randint(2, 3)]}
    if k == "object":
        props = {f"p{i}_{rng.randint(0, 99)}": gen_schema(rng, depth + 1) for i in range(rng.randint(0, 4))}
        s = {"type": "object", "properties": props,
             "required": [p for p in props if rng.random() < 0.6]}
        if rng.random() < 0.2:
            s["additionalProperties"] = {"type": "integer", "minimum": 0, "maximum": 5}
        return s
    items = gen_schema(rng, depth + 1)
    s = {"type": "array", "items": items, "maxItems": rng.randint(0, 3)}
    s["minItems"] = rng.randint(0, s["maxItems"])
    if rng.random() < 0.3:
        s["prefixItems"] = [{"type": "boolean"}]
    return s


RECURSIVE = {"$defs": {"node": {"type": "object", "properties": {
    "v": {"type": "integer", "minimum": 0, "maximum": 9},
    "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
    "required": ["v", "kids"]}}, "$ref": "#/$defs/node"}

REGEXES = ["[a-z]{1,6}", "(yes|no|maybe)", "\\d{3}-\\d{4}", "[A-F0-9]{2}(:[A-F0-9]{2}){2}",
           "(ab|c)*d", "[^\\n]{0,10}!", "\\w+@\\w+\\.(com|org)", "-?(0|[1-9]\\d{0,3})(\\.\\d{1,2})?",
           "[\\u00e9\\u4e2d x]{2,5}", "(?:a|b){2}c?"]
# GBNF grammars and a regex with the same language.
GRAMMARS = [
    ('root ::= "[" item ("," item)* "]"\nitem ::= [0-9] | "x"', r"\[([0-9]|x)(,([0-9]|x))*\]"),
    ('root ::= word (" " word){0,2}\nword ::= [a-c]+', r"[a-c]+( [a-c]+){0,2}"),
    ('root ::= "(" inner ")"\ninner ::= ("a" | "b")? # comment\n', r"\((a|b)?\)"),
]
CHOICES = [["red", "green", "blue"], ["Paris", "Lyon"], ["1", "22", "333"]]


def make_lines(rng: random.Random) -> list:
    lines = []
    for i in range(260):
        seed = rng.randint(0, 10 ** 6)
        base = {"id": f"l{i}", "prompt": f"item {i}:", "max_tokens": MAX_TOKENS,
                "temperature": 1.0, "seed": seed}
        r = i % 13
        if r < 8:
            schema = RECURSIVE if i % 50 == 0 else {"type": "object", "properties": {
                "a": gen_schema(rng), "b": gen_schema(rng)}, "required": ["a"]}
            if i % 3 == 0:
                line = {"custom_id": f"l{i}", "method": "POST", "url": "/v1/chat/completions",
                        "body": {"messages": [{"role": "user", "content": "give JSON"}],
                                 "max_tokens": MAX_TOKENS, "temperature": 1.0, "seed": seed,
                                 "response_format": {"type": "json_schema", "json_schema": {
                                     "name": "x", "schema": schema, "strict": True}}}}
                lines.append(("schema", schema, line))
            else:
                lines.append(("schema", schema, dict(base, guided_json=schema)))
        elif r < 10:
            rx = rng.choice(REGEXES)
            lines.append(("regex", rx, dict(base, structured_outputs={"regex": rx})))
        elif r == 10:
            g, rx = rng.choice(GRAMMARS)
            lines.append(("regex", rx, dict(base, guided_grammar=g)))
        elif r == 11:
            ch = rng.choice(CHOICES)
            lines.append(("choice", ch, dict(base, guided_choice=ch)))
        else:
            lines.append(("free", None, dict(base, max_tokens=12)))
    return lines


def answer(result: dict):
    body = result["response"]["body"] if "response" in result else result
    ch = body["choices"][0]
    text = ch["message"]["content"] if "message" in ch else ch["text"]
    return text or "", ch["finish_reason"]


def batch_property(c: t.Checks, model: str) -> None:
    rng = random.Random(11)
    lines = make_lines(rng)
    work = t.test_tmp("structured_output")
    inp, out = os.path.join(work, "in.jsonl"), os.path.join(work, "out.jsonl")
    with open(inp, "w") as f:
        f.write("".join(json.dumps(line) + "\n" for _, _, line in lines))
    t.qmpi(["batch", "--model", model, "--input", inp, "--output", out, "--overwrite",
            "--max-model-len", 512, "--max-num-seqs", 64], timeout=580)
    results = {}
    with open(out) as f:
        for raw in f:
            r = json.loads(raw)
            results[r.get("custom_id") or r.get("id")] = r
    # Draft 2020-12's format checkers (the default FormatChecker also holds draft 3's "time",
    # which allows no fraction or offset).
    checker = copy.deepcopy(jsonschema.Draft202012Validator.FORMAT_CHECKER)
    # time and date-time need a package Debian lacks; datetime reads RFC 3339 here.
    checker.checks("time", raises=ValueError)(
        lambda v: bool(datetime.datetime.fromisoformat("1970-01-01T" + v).tzinfo))
    checker.checks("date-time", raises=ValueError)(
        lambda v: bool(datetime.datetime.fromisoformat(v).tzinfo))
    stopped = {"schema": 0, "regex": 0, "choice": 0}
    total = {"schema": 0, "regex": 0, "choice": 0}
    bad = []
    for kind, spec, line in lines:
        cid = line.get("custom_id") or line["id"]
        r = results.get(cid)
        if r is None or r.get("error"):
            bad.append((cid, "no result", r))
            continue
        text, finish = answer(r)
        if kind == "free":
            continue
        total[kind] += 1
        if finish != "stop":
            if finish != "length":
                bad.append((cid, finish, text))
            continue
        stopped[kind] += 1
        try:
            if kind == "schema":
                jsonschema.validate(json.loads(text), spec, format_checker=checker)
            elif kind == "regex":
                assert re.fullmatch(spec, text), f"{spec!r} does not match"
            else:
                assert text in spec, f"not one of {spec}"
        except Exception as e:  # noqa: BLE001 (any failure is a finding)
            bad.append((cid, str(e)[:200], text[:200]))
    print(f"  finished with stop: {stopped} of {total}")
    c.check(not bad, f"every answer that stops validates ({len(bad)} bad: {bad[:5]})")
    for kind in stopped:
        c.check(stopped[kind] >= total[kind] // 2,
                f"{kind}: most constrained answers end ({stopped[kind]} of {total[kind]})")


def read_answers(path: str) -> dict:
    """{id: (text, finish_reason)} of a batch output; none when the job was stopped before it
    created the file (a loaded machine may take the whole wait to start it)."""
    try:
        with open(path) as f:
            rows = [json.loads(raw) for raw in f]
    except FileNotFoundError:
        return {}
    return {r.get("custom_id") or r.get("id"): answer(r) for r in rows}


TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                     "days": {"type": "integer", "minimum": 1, "maximum": 7}},
    "required": ["city"]}}},
         {"type": "function", "function": {"name": "now", "parameters": {"type": "object"}}}]


def served(c: t.Checks, model: str) -> None:
    server = sz.Server(model, tp=1, pp=1, max_model_len=512)
    try:
        server.wait_ready()
        msgs = [{"role": "user", "content": "go"}]
        for i, extra in enumerate([{"guided_regex": "[a-z]{2,8}( [a-z]{2,8}){0,3}"},
                                   {"response_format": {"type": "json_object"}},
                                   {"guided_json": RECURSIVE}]):
            req = dict(messages=msgs, max_tokens=80, temperature=1.0, seed=40 + i, **extra)
            _, _, text = sz.http_request(server.http_port, "POST", "/v1/chat/completions", req)
            whole = json.loads(text)
            _, _, streamed = sz.http_request(server.http_port, "POST", "/v1/chat/completions",
                                             dict(req, stream=True))
            events = [json.loads(e) for e in sz.sse_events(streamed) if e != "[DONE]"]
            pieces = "".join((e["choices"][0]["delta"].get("content") or "")
                             for e in events if e.get("choices"))
            c.check(pieces == (whole["choices"][0]["message"]["content"] or ""),
                    f"streamed and whole give the same text ({list(extra)[0]})")
        for choice in ["required", {"type": "function", "function": {"name": "get_weather"}}]:
            ok = 0
            for seed in range(6):
                req = dict(messages=msgs, tools=TOOLS, tool_choice=choice, max_tokens=120,
                           temperature=1.0, seed=seed)
                status, _, text = sz.http_request(server.http_port, "POST", "/v1/chat/completions", req)
                if status != 200:
                    c.check(False, f"tool_choice {json.dumps(choice)}: {status} {text[:300]}")
                    continue
                ch = json.loads(text)["choices"][0]
                if ch["finish_reason"] == "length":
                    continue
                calls = ch["message"].get("tool_calls") or []
                good = ch["finish_reason"] == "tool_calls" and len(calls) == 1
                if good:
                    f = calls[0]["function"]
                    tool = next(x for x in TOOLS if x["function"]["name"] == f["name"])
                    jsonschema.validate(json.loads(f["arguments"]), tool["function"]["parameters"])
                    good = choice == "required" or f["name"] == "get_weather"
                c.check(good, f"tool_choice {json.dumps(choice)}: one call that fits ({ch})")
                ok += good
            c.check(ok > 0, f"tool_choice {json.dumps(choice)}: some calls finished ({ok} of 6)")
        for extra, code in [({"guided_regex": "a(b"}, "request_field"),
                            ({"guided_json": {"type": "object", "minProperties": 1}}, "unsupported_parameter")]:
            status, _, text = sz.http_request(server.http_port, "POST", "/v1/chat/completions",
                                              dict(messages=msgs, max_tokens=4, **extra))
            err = json.loads(text).get("error", {})
            c.check(status == 400 and err.get("code") == code,
                    f"{list(extra)[0]}: 400 {code} ({status} {err.get('message')})")
        status, _, text = sz.http_request(server.http_port, "GET", "/metrics")
        c.check("qmpi_constraint_cache_misses_total" in text, "/metrics reports the constraint cache")
    finally:
        server.stop()


def body(c: t.Checks) -> None:
    model = t.make_model("tiny")
    batch_property(c, model)
    served(c, model)


if __name__ == "__main__":
    t.main("structured_output", body)
