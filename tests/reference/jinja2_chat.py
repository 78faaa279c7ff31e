#!/usr/bin/env python3
"""The oracle for qmpi's chat templates: Jinja2 set up the way Hugging Face transformers sets it
up for apply_chat_template -- a sandboxed environment with trim_blocks and lstrip_blocks, the
loop-control extension, a `raise_exception` global, and a `tojson` filter that is Python's
json.dumps without ASCII escaping (so keys keep their order and ", "/": " separators).

Used as a module (render()) or as a filter: JSONL on stdin, one
{"template", "messages", "tools", "add_generation_prompt", "kwargs", "special_tokens"} per line,
{"text": ...} or {"error": ...} out.
"""

import json
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def _raise(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise
    return env


def render(template, messages, tools=None, add_generation_prompt=True, kwargs=None,
           special_tokens=None):
    variables = dict(special_tokens or {})
    variables.update(messages=messages, tools=tools, documents=None,
                     add_generation_prompt=add_generation_prompt)
    variables.update(kwargs or {})
    return environment().from_string(template).render(**variables)


def main():
    for line in sys.stdin:
        req = json.loads(line)
        try:
            out = {"text": render(req["template"], req["messages"], req.get("tools"),
                                  req.get("add_generation_prompt", True), req.get("kwargs"),
                                  req.get("special_tokens"))}
        except jinja2.exceptions.TemplateError as e:
            out = {"error": str(e)}
        print(json.dumps(out, ensure_ascii=False), flush=True)


if __name__ == "__main__":
    main()
