#!/usr/bin/python3
"""Chat as OpenAI and vLLM clients send it, through every front (HTTP, ZeroMQ, batch), on the
tiny model with the Qwen3 chat template, one rank.

- tools, a tool-call round trip in the history (assistant tool_calls with reasoning_content,
  a role "tool" result) and chat_template_kwargs {"enable_thinking": false} reach the template:
  the prompt ids equal `qmpi tokenize --chat` on the same fields, on all three fronts;
  tool_choice "none" leaves the tools out; a named tool_choice starts the answer with that call.
- SDK fields qmpi does not use (store, metadata, user...) are accepted; response_format
  json_object gives a JSON object; another model is a 404
  model_not_found (HTTP and ZeroMQ), GET /v1/models/{id} answers for the served name.
- --reasoning-parser qwen3 with a template whose generation prompt opens <think>: the answer is
  reasoning_content (message and stream deltas agree), content is null.
- logprobs over HTTP, streamed and not, chat and completions, agree token by token.
- A vLLM command line (`qmpi serve MODEL --host --port --tensor-parallel-size
  --pipeline-parallel-size --max-num-batched-tokens`, no --http) serves HTTP on that address and says it has no API key.
"""

import json
import os
import shutil
import subprocess
import time

import numpy as np

import testlib as t  # first: it puts tests/reference on the path
import safetensors_ref as st
import servelib as sz

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]
HISTORY = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": None, "reasoning_content": "Call the tool.",
     "tool_calls": [{"id": "c1", "type": "function", "function": {
         "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "sunny, 21 C"},
    {"role": "user", "content": "And tomorrow?"},
]
KWARGS = {"enable_thinking": False}
# ChatML whose generation prompt opens a <think> block (as Qwen3 thinking-only models' do), and
# closes it empty with enable_thinking false (as Qwen3's own template does).
THINK_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n"
    "{% if enable_thinking is defined and not enable_thinking %}\n</think>\n\n{% endif %}"
    "{% endif %}")
YES_NO = {"type": "json_schema", "json_schema": {"name": "answer", "schema": {"enum": ["yes", "no"]}}}


def tokenize_chat(model: str, fields: dict) -> list:
    proc = subprocess.run([t.qmpi_binary(), "tokenize", "--model", model, "--chat"],
                          input=json.dumps(fields) + "\n", capture_output=True, text=True,
                          timeout=60)
    if proc.returncode != 0:
        raise t.TestFailure(f"qmpi tokenize --chat failed: {proc.stderr}")
    return json.loads(proc.stdout)["ids"]


def encode(model: str, text: str) -> list:
    proc = subprocess.run([t.qmpi_binary(), "tokenize", "--model", model],
                          input=json.dumps({"text": text}) + "\n", capture_output=True, text=True,
                          timeout=60)
    return json.loads(proc.stdout)["ids"]


def decode(model: str, ids: list) -> str:
    proc = subprocess.run([t.qmpi_binary(), "tokenize", "--model", model, "--decode"],
                          input=json.dumps({"ids": ids}) + "\n", capture_output=True, text=True,
                          timeout=60)
    return json.loads(proc.stdout)["text"]


def post(server, path: str, body: dict):
    status, _, text = sz.http_request(server.http_port, "POST", path, body)
    return status, json.loads(text) if text.startswith("{") else text


def stream(server, path: str, body: dict) -> list:
    status, _, text = sz.http_request(server.http_port, "POST", path, dict(body, stream=True))
    if status != 200:
        raise t.TestFailure(f"stream answered {status}: {text[:300]}")
    return [json.loads(e) for e in sz.sse_events(text) if e != "[DONE]"]


def body(c: t.Checks) -> None:
    sz.MAX_MODEL_LEN = 512  # the Server's --max-model-len: room for the tool prompt
    model = t.make_model("tiny")
    want_ids = tokenize_chat(model, {"messages": HISTORY, "tools": TOOLS,
                                     "chat_template_kwargs": KWARGS})
    no_tools = tokenize_chat(model, {"messages": HISTORY, "chat_template_kwargs": KWARGS})
    thinking = tokenize_chat(model, {"messages": HISTORY, "tools": TOOLS})
    c.check(want_ids != no_tools and want_ids != thinking,
            "tools and enable_thinking each change the rendered prompt")
    chat = {"model": "tiny-seed1-f32-shards1-tied", "messages": HISTORY, "tools": TOOLS,
            "chat_template_kwargs": KWARGS, "max_tokens": 4, "temperature": 0,
            "return_token_ids": True}

    # --- batch ---------------------------------------------------------------------------------
    tmp = t.test_tmp("serve_openai_chat")
    inp, out = os.path.join(tmp, "in.jsonl"), os.path.join(tmp, "out.jsonl")
    lines = [{"custom_id": "tools", "method": "POST", "url": "/v1/chat/completions",
              "body": {k: v for k, v in chat.items() if k != "return_token_ids"}},
             {"custom_id": "none", "method": "POST", "url": "/v1/chat/completions",
              "body": dict({k: v for k, v in chat.items() if k != "return_token_ids"},
                           tool_choice="none", store=False, metadata={"a": "b"})}]
    with open(inp, "w") as f:
        f.write("".join(json.dumps(x) + "\n" for x in lines))
    t.qmpi(["batch", "--model", model, "--input", inp, "--output", out, "--overwrite",
            "--token-ids", "--max-model-len", "512"] + t.EXACT_KV)
    got = {}
    with open(out) as f:
        for line in f:
            r = json.loads(line)
            got[r["custom_id"]] = r
    c.check(got["tools"]["response"]["body"]["prompt_token_ids"] == want_ids,
            "batch: tools, tool-call history and chat_template_kwargs reach the template")
    c.check(got["none"]["response"]["status_code"] == 200 and
            got["none"]["response"]["body"]["prompt_token_ids"] == no_tools,
            "batch: tool_choice none leaves the tools out; store and metadata are ignored")

    # --- serve ---------------------------------------------------------------------------------
    server = sz.Server(model, tp=1, pp=1, extra=[])
    try:
        server.wait_ready()
        status, r = post(server, "/v1/chat/completions", chat)
        c.check(status == 200 and r["prompt_token_ids"] == want_ids,
                f"HTTP: the prompt is the template's over tools and kwargs ({status})")
        replies = server.call({"v": 1, "id": "z1", **{k: v for k, v in chat.items()
                                                       if k != "return_token_ids"}})
        c.check(replies[-1]["type"] == "final" and
                replies[-1]["usage"]["prompt_tokens"] == len(want_ids),
                "ZeroMQ: the same prompt")
        got_none = tokenize_chat(model, {"messages": HISTORY, "tools": TOOLS, "tool_choice": "none",
                                         "chat_template_kwargs": KWARGS})
        c.check(got_none == no_tools, "tokenize --chat: tool_choice none leaves the tools out too")
        replies = server.call({"v": 1, "id": "z3", "prompt": "the quick brown fox", "max_tokens": 4,
                               "temperature": 0, "stream": True, "logprobs": 1})
        deltas = [m for m in replies if m["type"] == "delta"]
        c.check(replies[-1]["type"] == "final" and len(deltas) == 4 and
                all(len(m.get("logprobs", [])) == len(m["token_ids"]) and
                    len(m.get("top_logprobs", [[]])[0]) == 1 for m in deltas),
                "ZeroMQ: streamed deltas carry each token's logprob and its alternatives")
        named = dict(chat, tool_choice={"type": "function", "function": {"name": "get_weather"}},
                     max_tokens=3)
        status, r = post(server, "/v1/chat/completions", named)
        prefill = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
        c.check(status == 200 and r["prompt_token_ids"][:len(want_ids)] == want_ids and
                r["prompt_token_ids"][len(want_ids):] == encode(model, prefill) and
                (r["choices"][0]["message"]["content"] or "").startswith(prefill),
                "a named tool_choice starts the answer with that call (an unfinished call "
                "stays content)")

        status, r = post(server, "/v1/chat/completions",
                         dict(chat, store=False, metadata={"x": "y"}, user="u",
                              parallel_tool_calls=True, service_tier="auto"))
        c.check(status == 200, f"SDK fields qmpi does not use are accepted ({status})")
        status, r = post(server, "/v1/chat/completions",
                         dict(chat, response_format={"type": "json_object"}, max_tokens=300))
        ch = r["choices"][0] if status == 200 else {}
        c.check(status == 200 and (ch["finish_reason"] == "length" or
                                   isinstance(json.loads(ch["message"]["content"]), dict)),
                f"response_format json_object: a JSON object ({status}, {r})")
        status, r = post(server, "/v1/chat/completions", dict(chat, model="gpt-4o"))
        c.check(status == 404 and r["error"]["code"] == "model_not_found" and
                r["error"]["type"] == "invalid_request_error",
                f"another model: 404 model_not_found ({status})")
        replies = server.call({"v": 1, "id": "z2", **dict(chat, model="gpt-4o")})
        c.check(replies[-1]["type"] == "error" and replies[-1]["name"] == "model-not-found",
                "ZeroMQ: another model is refused too")
        status, _, text = sz.http_request(server.http_port, "GET",
                                          "/v1/models/tiny-seed1-f32-shards1-tied")
        c.check(status == 200 and json.loads(text)["id"] == "tiny-seed1-f32-shards1-tied",
                "GET /v1/models/{id} answers for the served name")
        status, _, text = sz.http_request(server.http_port, "GET", "/v1/models/gpt-4o")
        c.check(status == 404 and json.loads(text)["error"]["code"] == "model_not_found",
                "GET /v1/models/{other}: 404")

        # logprobs, streamed and not
        for path, req, label in [
                ("/v1/chat/completions", dict(chat, logprobs=True, top_logprobs=2, max_tokens=5),
                 "chat"),
                ("/v1/completions", {"prompt": "the quick brown fox", "logprobs": 2,
                                     "max_tokens": 5, "temperature": 0}, "completions")]:
            status, whole = post(server, path, req)
            chunks = stream(server, path, req)
            lp = whole["choices"][0]["logprobs"]
            if label == "chat":
                want = [(e["token"], e["logprob"], len(e["top_logprobs"])) for e in lp["content"]]
                got_lp = [(e["token"], e["logprob"], len(e["top_logprobs"])) for ch in chunks
                          for chc in ch["choices"] if chc.get("logprobs")
                          for e in chc["logprobs"]["content"]]
            else:
                want = list(zip(lp["tokens"], lp["token_logprobs"], lp["text_offset"]))
                got_lp = [x for ch in chunks for chc in ch["choices"] if chc.get("logprobs")
                          for x in zip(chc["logprobs"]["tokens"], chc["logprobs"]["token_logprobs"],
                                       chc["logprobs"]["text_offset"])]
            c.check(status == 200 and len(want) == 5 and got_lp == want,
                    f"{label}: streamed logprobs equal the whole response's ({len(got_lp)} tokens)")
    finally:
        server.stop()

    # --- reasoning -----------------------------------------------------------------------------
    tpl = os.path.join(tmp, "think.jinja")
    with open(tpl, "w") as f:
        f.write(THINK_TEMPLATE)
    server = sz.Server(model, tp=1, pp=1, extra=["--chat-template", tpl,
                                                  "--reasoning-parser", "qwen3"])
    try:
        server.wait_ready()
        req = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 6,
               "temperature": 0, "return_token_ids": True}
        status, r = post(server, "/v1/chat/completions", req)
        ids = r["choices"][0]["token_ids"]
        if r["choices"][0]["finish_reason"] == "stop":
            ids = ids[:-1]  # the stop token's text is not part of the answer
        text = decode(model, ids)
        reasoning, _, content = text.partition("</think>")
        msg = r["choices"][0]["message"]
        c.check(status == 200 and msg["reasoning_content"] == (reasoning.strip("\n") or None) and
                msg["content"] == (content.lstrip("\n") or None),
                f"a prompt that opened <think>: the answer is reasoning_content ({msg})")
        chunks = stream(server, "/v1/chat/completions", req)
        streamed = "".join(ch["choices"][0]["delta"].get("reasoning_content", "")
                           for ch in chunks if ch["choices"])
        c.check(streamed == (msg["reasoning_content"] or ""),
                "streamed reasoning_content deltas add up to the message's")
    finally:
        server.stop()
    constrained_after_think(c, model, tpl)
    vllm_flags(c, model)


def think_closer(model: str, after: list, think_end: int) -> str:
    """A copy of `model` that answers </think> to any of the tokens `after`: with every
    attention and MLP output projection zero the last hidden state is the input token's
    embedding, so those tokens' embeddings (the unit vector e0) meet </think>'s output row
    (40 e0) and nothing else comes close; everything else stays random."""
    out = t.test_tmp("serve_openai_chat", "think-closer")
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(model, out, ignore=shutil.ignore_patterns("*.safetensors*"))
    w = st.read_model_dir(model)
    for name in w:
        if name.endswith(("o_proj.weight", "down_proj.weight")):
            w[name] = np.zeros_like(w[name])
    w["model.norm.weight"] = np.ones_like(w["model.norm.weight"])
    emb = w["model.embed_tokens.weight"]
    for i in after:
        emb[i] = 0.0
        emb[i, 0] = 1.0
    head = w.get("lm_head.weight", emb)
    head[think_end] = 0.0
    head[think_end, 0] = 40.0
    st.write_model_dir(out, w, "F32")
    return out


def constrained_after_think(c: t.Checks, model: str, tpl: str) -> None:
    """A response_format holds from </think> on, as vLLM's reasoning parser has it. On a model
    that closes its thought at once, the answer starts with </think> (the constraint did not
    forbid it) and the text after it fits the schema; when the prompt closed the thought
    already, the constraint holds from the first token, so the same model cannot say
    </think>."""
    think_end = encode(model, "</think>")
    c.check(len(think_end) == 1, f"</think> is one token ({think_end})")
    closer = think_closer(model, encode(model, "\n") + encode(model, "\n\n"), think_end[0])
    server = sz.Server(closer, tp=1, pp=1, extra=["--chat-template", tpl,
                                                   "--reasoning-parser", "qwen3"])
    try:
        server.wait_ready()
        req = {"messages": [{"role": "user", "content": "yes or no?"}], "max_tokens": 24,
               "temperature": 0, "return_token_ids": True}
        status, r = post(server, "/v1/chat/completions", req)
        ids = r["choices"][0]["token_ids"] if status == 200 else []
        c.check(ids[:1] == think_end, f"the crafted model closes its thought first ({r})")
        status, r = post(server, "/v1/chat/completions", dict(req, response_format=YES_NO))
        choice = r["choices"][0] if status == 200 else {}
        c.check(status == 200 and choice["token_ids"][:1] == think_end and
                choice["finish_reason"] == "stop" and
                json.loads(choice["message"]["content"]) in ("yes", "no"),
                f"thinking on: </think> first, then an answer that fits the schema ({r})")
        status, r = post(server, "/v1/chat/completions",
                         dict(req, response_format=YES_NO,
                              chat_template_kwargs={"enable_thinking": False}))
        choice = r["choices"][0] if status == 200 else {}
        c.check(status == 200 and think_end[0] not in choice.get("token_ids", []) and
                choice["finish_reason"] == "stop" and
                json.loads(choice["message"]["content"]) in ("yes", "no"),
                f"thinking closed in the prompt: constrained from the first token ({r})")
    finally:
        server.stop()


def vllm_flags(c: t.Checks, model: str) -> None:
    port, zmq_port = sz.free_ports(2)
    log_path = os.path.join(t.test_tmp("serve_openai_chat"), "vllm-flags.log")
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [t.qmpi_binary(), "serve", model, "--zmq",
             f"tcp://127.0.0.1:{zmq_port}", "--host", "127.0.0.1", "--port", str(port),
             "--tensor-parallel-size", "1", "-pp", "1", "--max-num-batched-tokens=512",
             "--max-request-bytes", "64KiB"],
            stdout=log, stderr=subprocess.STDOUT)
    try:
        status = 0
        for _ in range(600):
            if proc.poll() is not None:
                break
            try:
                status = sz.http_request(port, "GET", "/health", timeout=2)[0]
            except OSError:
                status = 0
            if status == 200:
                break
            time.sleep(0.1)
        text = open(log_path, errors="replace").read()
        c.check(status == 200 and f"http: listening on 127.0.0.1:{port}" in text,
                f"vLLM's `serve MODEL` --host/--port/--tensor-parallel-size/-pp/"
                f"--max-num-batched-tokens serve HTTP there (health {status})")
        c.check("no API key" in text, "a server without an API key says so")
        status, _, _ = sz.http_request(port, "POST", "/v1/completions",
                                       {"prompt": "x" * 70000, "max_tokens": 1})
        c.check(status == 413, f"--max-request-bytes 64KiB: a 70 kB body is refused ({status})")
        ok = subprocess.run([t.qmpi_binary(), "client", "--connect", f"tcp://127.0.0.1:{zmq_port}",
                             "--prompt", "hi", "--max-tokens", "2"],
                            capture_output=True, text=True, timeout=120)
        c.check(ok.returncode == 0, f"qmpi client gets an answer after its probe ({ok.stderr})")
        gone = subprocess.run([t.qmpi_binary(), "client", "--connect",
                               f"tcp://127.0.0.1:{sz.free_port()}", "--prompt", "hi",
                               "--connect-timeout", "1"],
                              capture_output=True, text=True, timeout=120)
        c.check(gone.returncode != 0 and "QM509" in gone.stderr and
                "--connect-timeout" in gone.stderr,
                "qmpi client with nothing listening stops after --connect-timeout with QM509")
    finally:
        proc.terminate()
        proc.wait(timeout=60)


if __name__ == "__main__":
    t.main("serve_openai_chat", body)
