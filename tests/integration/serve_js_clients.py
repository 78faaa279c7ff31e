#!/usr/bin/python3
"""`qmpi serve` through two application frameworks as their users write them
(tests/integration/js_clients.mjs): the Vercel AI SDK 6 with @ai-sdk/openai-compatible
(generateText, streamText, generateObject with a zod schema, a required tool call) and
LangChain.js (ChatOpenAI invoke and stream, withStructuredOutput, bindTools with a required
tool, and the legacy OpenAI completions class, which sends its prompt as a list).

Structured output and tool calls are constrained by the server, so even a random-weight model's
answers must parse and fit their schemas: the frameworks themselves validate them with zod and
throw otherwise. The clients come from servelib.npm_clients_dir().
"""

import os

import servelib as sz
import testlib as t


def body(c: t.Checks) -> None:
    model = t.make_model("tiny")
    name = os.path.basename(model)
    sz.MAX_MODEL_LEN = 512
    server = sz.Server(model, tp=1, pp=1)
    try:
        server.wait_ready()
        r = sz.node_client(server, "js_clients.mjs", "unused", name, "a framework")
        c.check(r["aiText"]["tokens"] == 6 and r["aiText"]["finish"] == "length",
                f"AI SDK generateText: 6 tokens, finish length ({r['aiText']})")
        c.check(r["aiStream"]["text"] == r["aiText"]["text"],
                "AI SDK streamText adds up to generateText's answer (temperature 0)")
        obj = r["aiObject"]
        c.check(set(obj) == {"color", "sure"} and obj["color"] in ("red", "green", "blue") and
                isinstance(obj["sure"], bool), f"AI SDK generateObject fits the schema ({obj})")
        c.check(len(r["aiTools"]) >= 1 and all(
            tc["name"] == "get_weather" and tc["input"] in ({"city": "Paris"}, {"city": "Rome"})
            for tc in r["aiTools"]) and r["aiFinish"] == "tool-calls",
            f"AI SDK toolChoice required: calls that fit the tool ({r['aiTools']})")
        c.check(r["lcInvoke"]["tokens"] == 6 and isinstance(r["lcInvoke"]["content"], str),
                f"LangChain invoke ({r['lcInvoke']})")
        c.check(r["lcStream"] == r["lcInvoke"]["content"],
                "LangChain stream adds up to invoke's answer (temperature 0)")
        lo = r["lcObject"]
        c.check(set(lo) == {"color", "sure"} and lo["color"] in ("red", "green", "blue") and
                isinstance(lo["sure"], bool), f"LangChain withStructuredOutput fits ({lo})")
        c.check(len(r["lcTools"]) >= 1 and all(
            tc["name"] == "get_weather" and tc["args"] in ({"city": "Paris"}, {"city": "Rome"})
            for tc in r["lcTools"]), f"LangChain bindTools required ({r['lcTools']})")
        c.check(isinstance(r["lcLegacy"], str) and r["lcLegacy"] != "",
                f"LangChain's legacy OpenAI class (list prompt) gets a completion "
                f"({r['lcLegacy']!r})")
    finally:
        server.stop()


if __name__ == "__main__":
    t.main("serve_js_clients", body)
