"""What a vLLM user's clients and dashboards find on `qmpi serve` (issue 29), one rank, tiny model:

- /v1/models carries max_model_len and root; /version answers;
- /tokenize of a prompt and of chat messages (its count is the chat request's
  usage.prompt_tokens), token_strs on request; /detokenize gives the text back;
- OPTIONS is answered with Allow; an unknown route is 404 route_not_found in OpenAI's error
  shape, with the catalogue code in the message; error codes are snake_case;
- every series docs/grafana-qmpi.json queries is on /metrics with the server's model_name label,
  and the counters moved with the requests sent;
- the stats line (VLLM_LOG_STATS_INTERVAL=1) and --enable-log-requests lines are in the log."""

import json
import os
import re
import time

import servelib as sz
import testlib as t


def get(server, path, body=None, method=None):
    status, headers, text = sz.http_request(server.http_port, method or ("POST" if body else "GET"),
                                            path, body)
    return status, headers, text


def dashboard_series() -> set:
    dash = json.load(open(os.path.join(t.SOURCE_DIR, "docs", "grafana-qmpi.json")))
    exprs = [target["expr"] for p in dash["panels"] for target in p["targets"]]
    return {m for e in exprs for m in re.findall(r"vllm:[a-z0-9_]+", e)}


def body(c: t.Checks) -> None:
    model = t.make_model("tiny")
    os.environ["VLLM_LOG_STATS_INTERVAL"] = "1"
    server = sz.Server(model, tp=1, pp=1, extra=["--served-model-name", "tiny",
                                                  "--enable-log-requests", "--max-log-len", "12"])
    try:
        server.wait_ready()
        status, _, text = get(server, "/v1/models")
        m = json.loads(text)["data"][0]
        c.check(status == 200 and m["id"] == "tiny" and m["root"] == model and
                m["max_model_len"] == sz.MAX_MODEL_LEN,
                f"/v1/models: max_model_len and root ({m})")
        status, _, text = get(server, "/version")
        c.check(status == 200 and json.loads(text)["version"], f"/version: {text}")

        chat = {"messages": [{"role": "user", "content": "count the birds"}], "max_tokens": 3,
                "temperature": 0}
        status, _, text = get(server, "/v1/chat/completions", chat)
        usage = json.loads(text)["usage"]
        status, _, text = get(server, "/tokenize", {"model": "tiny", "messages": chat["messages"]})
        tok = json.loads(text)
        c.check(status == 200 and tok["count"] == usage["prompt_tokens"] == len(tok["tokens"]) and
                tok["max_model_len"] == sz.MAX_MODEL_LEN and tok["token_strs"] is None,
                f"/tokenize of messages: count {tok.get('count')} = the chat request's "
                f"prompt_tokens {usage['prompt_tokens']}")
        status, _, text = get(server, "/tokenize", {"prompt": "old stone bridges",
                                                   "return_token_strs": True})
        tok = json.loads(text)
        c.check(status == 200 and len(tok["token_strs"]) == tok["count"] > 0,
                f"/tokenize of a prompt with token_strs: {tok}")
        status, _, text = get(server, "/detokenize", {"tokens": tok["tokens"]})
        c.check(status == 200 and json.loads(text) == {"prompt": "old stone bridges"},
                f"/detokenize gives the prompt back: {text}")
        status, _, text = get(server, "/tokenize", {"model": "gpt-4o", "prompt": "x"})
        c.check(status == 404 and json.loads(text)["error"]["code"] == "model_not_found",
                f"/tokenize for another model: 404 model_not_found ({status})")

        status, headers, _ = get(server, "/v1/chat/completions", method="OPTIONS")
        c.check(status == 204 and "POST" in headers.get("Allow", ""),
                f"OPTIONS: 204 with Allow ({status}, {headers.get('Allow')})")
        status, _, text = get(server, "/v1/nothing-here")
        err = json.loads(text)["error"]
        c.check(status == 404 and err["code"] == "route_not_found" and
                err["type"] == "invalid_request_error" and "[QM523]" in err["message"],
                f"an unknown route: 404 in OpenAI's error shape ({err})")
        status, _, text = get(server, "/v1/completions", {"prompt": "x", "temperature": -1})
        err = json.loads(text)["error"]
        c.check(status == 400 and err["code"] == "sampling_invalid" and "[QM503]" in err["message"],
                f"a bad temperature: snake_case code, QM code in the message ({err['code']})")

        time.sleep(2.5)  # a stats line after the requests
        status, _, metrics = get(server, "/metrics")
        label = 'model_name="tiny"'
        for name in sorted(dashboard_series()):
            c.check(re.search(rf"^{re.escape(name)}\{{[^}}]*{re.escape(label)}", metrics, re.M)
                    is not None, f"/metrics has {name}{{{label}}}, which the dashboard queries")
        answered = sum(sz.metric(metrics, f'vllm:request_success_total{{{label},finished_reason='
                                           f'"{reason}"}}') for reason in ("stop", "length"))
        c.check(sz.metric(metrics, f"vllm:generation_tokens_total{{{label}}}") >= 1 and
                answered >= 1, "vllm: counters moved with the requests")
    finally:
        rc = server.stop()
    log = server.log_text()
    c.check(rc == 0, f"the server stopped cleanly ({rc})")
    c.check(re.search(r"Avg prompt throughput: [\d.]+ tokens/s, Avg generation throughput: "
                      r"[\d.]+ tokens/s, Running: \d+ reqs, Waiting: \d+ reqs, KV cache usage: "
                      r"[\d.]+%", log) is not None, "the periodic stats line is logged")
    c.check(re.search(r'request http-\d+: received: \d+ prompt tokens.*prompt: ".{12}\.\.\."',
                      log) is not None and re.search(r"request http-\d+: (length|stop) after", log),
            "--enable-log-requests: a line per request received (prompt cut to --max-log-len) "
            "and one as it ends")


t.main("serve_vllm_api", body)
