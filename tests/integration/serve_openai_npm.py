#!/usr/bin/python3
"""`qmpi serve` through the official `openai` npm client (tests/integration/openai_client.mjs):
chat whole and streamed (with stream_options usage), n=2, stop, seed, logprobs whole and
streamed, tools with a tool-call round trip, chat_template_kwargs (thinking off), SDK fields
(store, metadata, user, parallel_tool_calls) accepted, completions with logprobs, models list
and retrieve, structured output (json_schema, tool_choice required and named: the calls parse), and the SDK's
errors: 404 model_not_found, 401 for a wrong key, 400 for logit_bias.

The client comes from .cache/npm-tests (scripts/setup.sh --tests puts it there); without it
the test installs the same pinned versions into the build folder (servelib.npm_clients_dir).
"""

import json
import os

import servelib as sz
import testlib as t

def body(c: t.Checks) -> None:
    model = t.make_model("tiny")
    name = os.path.basename(model)
    key_file = os.path.join(t.test_tmp("serve_openai_npm"), "key")
    with open(key_file, "w") as f:
        f.write("sk-test-123\n")
    os.chmod(key_file, 0o600)
    sz.MAX_MODEL_LEN = 512
    server = sz.Server(model, tp=1, pp=1, extra=["--api-key-file", key_file])
    try:
        server.wait_ready()
        r = sz.node_client(server, "openai_client.mjs", "sk-test-123", name, "the openai client")
        w, s = r["whole"], r["stream"]
        c.check(w["object"] == "chat.completion" and w["usage"]["completion_tokens"] > 0,
                "chat: an answer, with store/metadata/user/parallel_tool_calls sent by the SDK")
        c.check(s["content"] == w["content"] and s["finish"] == w["finish"] and
                s["usage"] == w["usage"], "streamed chat adds up to the whole answer (seed 3)")
        c.check(r["n2"] == [0, 1], "n=2 gives two choices")
        c.check(r["stop"]["finish"] in ("stop", "length") and "\n" not in r["stop"]["content"],
                "stop strings cut the text")
        lp = r["logprobs"]
        c.check(lp["n"] == lp["tokens"] and lp["top"] and lp["streamed"] == lp["tokens"],
                f"logprobs: one entry per token with 2 alternatives, streamed too ({lp})")
        c.check(r["tools"]["finish"] in ("stop", "length", "tool_calls") and
                r["roundTrip"]["promptTokens"] > w["usage"]["prompt_tokens"],
                "tools and a tool-call round trip (assistant tool_calls, role tool) are accepted")
        th = r["thinkingOff"]
        c.check(th["promptTokens"] > th["thinkingOnPromptTokens"],
                "chat_template_kwargs enable_thinking false reaches the template (empty <think>)")
        c.check(r["completion"]["tokens"] == 4, "completions with logprobs")
        c.check(r["models"] == [name] and r["model"] == name, "models.list and models.retrieve")
        c.check(r["modelFields"]["maxModelLen"] > 0 and r["modelFields"]["root"],
                f"models.list carries vLLM's max_model_len and root ({r['modelFields']})")
        lst = r["listPrompt"]
        c.check(lst["choices"] == 1 and lst["index"] == 0 and lst["sameAsString"],
                f"completions with a list of one prompt: the same answer as the string ({lst})")
        sp = r["severalPrompts"]
        c.check(sp["indexes"] == list(range(6)) and
                sp["texts"] == [t_ for t_ in sp["aloneTexts"] for _ in range(2)] and
                sp["promptTokens"] == sp["aloneTokens"] and sp["completionTokens"] == 18,
                f"completions with 3 prompts and n 2: 6 choices prompt by prompt, each the "
                f"prompt's own answer, usage summed ({sp})")
        c.check(r["badModel"] == {"status": 404, "code": "model_not_found",
                                  "type": "invalid_request_error", "param": None},
                f"another model: the SDK's NotFoundError with code model_not_found "
                f"({r['badModel']})")
        c.check(r["badKey"] is not None and r["badKey"]["status"] == 401 and
                r["badKey"]["code"] == "invalid_api_key", f"a wrong key: 401 invalid_api_key "
                f"({r['badKey']})")
        c.check(r["unsupported"] == {"status": 400, "code": "unsupported_parameter",
                                     "type": "invalid_request_error",
                                     "param": "logit_bias"},
                f"logit_bias: 400 unsupported_parameter ({r['unsupported']})")
        js = r["jsonSchema"]
        if js["finish"] == "stop":
            v = json.loads(js["content"])
            c.check(set(v) == {"name", "n"} and isinstance(v["name"], str) and len(v["name"]) <= 8
                    and 1 <= v["n"] <= 99, f"response_format json_schema: valid JSON ({js})")
        else:
            c.check(js["finish"] == "length", f"response_format json_schema ends ({js})")
        for key in ("toolRequired", "toolNamed"):
            tc = r[key]
            c.check(tc["finish"] == "length" or (
                tc["finish"] == "tool_calls" and len(tc["calls"]) == 1 and
                tc["calls"][0]["name"] == "get_weather" and
                isinstance(tc["calls"][0]["arguments"].get("city"), str) and
                set(tc["calls"][0]["arguments"]) == {"city"}),
                f"{key}: a tool call whose arguments fit the parameters ({tc})")
        c.check(r["tooLong"] is not None and r["tooLong"]["status"] == 400 and
                r["tooLong"]["code"] == "context_length_exceeded",
                f"max_tokens past the context: 400 context_length_exceeded ({r['tooLong']})")
        c.check(r["badTemperature"] == {"status": 400, "code": "sampling_invalid",
                                        "type": "invalid_request_error",
                                        "param": "temperature"},
                f"temperature -1: 400 naming the param ({r['badTemperature']})")
    finally:
        server.stop()


if __name__ == "__main__":
    t.main("serve_openai_npm", body)
