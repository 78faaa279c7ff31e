#!/usr/bin/python3
"""Hostile chat templates, batch lines and configs (issue 28) against the tiny model, one rank:

- `qmpi serve` and `qmpi batch` with a `--chat-template` that cannot compile (50,000 nested
  parentheses) or that fails on every conversation (`1 // 0`, `2 ** 1000`) exit at start-up with
  QM302 and exit status 3, before serving or loading weights;
- a template that fails only on some requests (a raise_exception, a loop past the budget) answers
  those with HTTP 400 in OpenAI's error shape carrying QM303, and the server still answers
  /health and a normal request after them;
- a batch line over --max-line-bytes is one QM506 record under its generated id while the other
  lines are answered;
- `qmpi tokenize --chat` refuses `messages: []` with QM501, as a chat request does;
- a config.json with num_hidden_layers 10^9 is QM201 at once, and one with a layer more than
  the checkpoint holds is QM209 naming the missing layer, both before any weight loads.
"""

import json
import os
import subprocess

import servelib as sz
import testlib as t

EXIT_MODEL = 3  # the catalogue's exit status for model files (QM2xx, QM30x)

# Fails only when asked: a refusal, and nested loops of 10^12 iterations.
PICKY = ("{% for m in messages %}"
         "{% if m.content == 'refuse' %}{{ raise_exception('no refusals here') }}{% endif %}"
         "{% if m.content == 'spin' %}{% for i in range(1000000) %}{% for j in range(1000000) %}"
         "{% endfor %}{% endfor %}{% endif %}"
         "<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
         "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def run(cmd) -> subprocess.CompletedProcess:
    """Runs cmd to its end whatever its exit status (t.run raises on a failure)."""
    return subprocess.run([str(x) for x in cmd], capture_output=True, text=True, timeout=180)


def write(path: str, text: str) -> str:
    with open(path, "w") as f:
        f.write(text)
    return path


def startup_failures(c: t.Checks, model: str, tmp: str) -> None:
    broken = {
        "deep": "{{ " + "(" * 50000 + "1" + ")" * 50000 + " }}",
        "div0": "{% for m in messages %}{{ 1 // 0 }}{% endfor %}",
        "pow": "{{ 2 ** 1000 }}",
    }
    for name, text in broken.items():
        path = write(os.path.join(tmp, f"{name}.jinja"), text)
        proc = run([t.qmpi_binary(), "serve", "--model", model, "--http",
                      f"127.0.0.1:{sz.free_port()}", "--chat-template", path])
        c.check(proc.returncode == EXIT_MODEL and "QM302" in proc.stderr,
                f"serve --chat-template {name}: exits {proc.returncode} with QM302 at start-up "
                f"({proc.stderr.strip().splitlines()[0][:160] if proc.stderr.strip() else ''})")
    inp = write(os.path.join(tmp, "one.jsonl"), '{"id": "a", "prompt": "x", "max_tokens": 1}\n')
    proc = run([t.qmpi_binary(), "batch", "--model", model, "--input", inp, "--output",
                  os.path.join(tmp, "one.out.jsonl"), "--overwrite", "--chat-template",
                  os.path.join(tmp, "div0.jinja")])
    c.check(proc.returncode == EXIT_MODEL and "QM302" in proc.stderr and
            "sample conversation" in proc.stderr,
            f"batch --chat-template div0: exits {proc.returncode} with QM302 naming the dry run")


def request_failures(c: t.Checks, model: str, tmp: str) -> None:
    picky = write(os.path.join(tmp, "picky.jinja"), PICKY)
    server = sz.Server(model, tp=1, pp=1, extra=["--chat-template", picky])
    try:
        server.wait_ready()
        for content, needle in (("refuse", "no refusals here"),
                                ("spin", "--chat-template-limits")):
            status, _, text = sz.http_request(server.http_port, "POST", "/v1/chat/completions", {
                "messages": [{"role": "user", "content": content}], "max_tokens": 2})
            err = json.loads(text).get("error", {}) if text.startswith("{") else {}
            c.check(status == 400 and err.get("qmpi_code") == "QM303" and
                    needle in err.get("message", "") and err.get("type"),
                    f"'{content}': HTTP {status}, OpenAI error shape with QM303 and "
                    f"'{needle}' ({text[:200]})")
        status = sz.http_request(server.http_port, "GET", "/health")[0]
        c.check(status == 200, f"/health after the refusals: {status}")
        status, _, text = sz.http_request(server.http_port, "POST", "/v1/chat/completions", {
            "messages": [{"role": "user", "content": "hello"}], "max_tokens": 2})
        c.check(status == 200 and json.loads(text)["choices"][0]["message"] is not None,
                f"a normal request after them: {status}")
    finally:
        server.stop()


def long_line(c: t.Checks, model: str, tmp: str) -> None:
    lines = ['{"id": "a", "prompt": "x", "max_tokens": 1}',
             json.dumps({"id": "huge", "prompt": "y" * 300000, "max_tokens": 1}),
             '{"id": "b", "prompt": "z", "max_tokens": 1}']
    inp = write(os.path.join(tmp, "long.jsonl"), "\n".join(lines) + "\n")
    out = os.path.join(tmp, "long.out.jsonl")
    proc = run([t.qmpi_binary(), "batch", "--model", model, "--input", inp, "--output", out,
                  "--overwrite", "--max-line-bytes", "64KiB"])
    got = {}
    if proc.returncode == 0:
        with open(out) as f:
            for line in f:
                r = json.loads(line)
                got[r["custom_id"]] = r["error"]["code"] if r["error"] else None
    c.check(proc.returncode == 0 and got == {"a": None, "qmpi-line-2": "QM506", "b": None},
            f"a 300 KB line over --max-line-bytes 64KiB is one QM506 record, the others answered "
            f"(exit {proc.returncode}: {got})")


def tokenize_empty(c: t.Checks, model: str) -> None:
    proc = subprocess.run([t.qmpi_binary(), "tokenize", "--model", model, "--chat"],
                          input='{"messages": []}\n', capture_output=True, text=True, timeout=60)
    out = json.loads(proc.stdout) if proc.stdout.startswith("{") else {}
    c.check("QM501" in out.get("error", ""),
            f"tokenize --chat with messages [] is QM501 as in serve ({proc.stdout.strip()})")


def hostile_configs(c: t.Checks, model: str, tmp: str) -> None:
    with open(os.path.join(model, "config.json")) as f:
        config = json.load(f)
    for name, layers, code, needle in (
            ("billion", 10 ** 9, "QM201", "num_hidden_layers"),
            ("one-more", config["num_hidden_layers"] + 1, "QM209",
             f"model.layers.{config['num_hidden_layers']}.")):
        folder = os.path.join(tmp, f"config-{name}")
        os.makedirs(folder, exist_ok=True)
        for entry in os.listdir(model):
            if entry != "config.json" and not os.path.exists(os.path.join(folder, entry)):
                os.symlink(os.path.join(model, entry), os.path.join(folder, entry))
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(dict(config, num_hidden_layers=layers), f)
        proc = run([t.qmpi_binary(), "run", "--model", folder, "--prompt", "hi",
                    "--max-tokens", "1"])
        c.check(proc.returncode == EXIT_MODEL and code in proc.stderr and needle in proc.stderr,
                f"num_hidden_layers {layers}: exit {proc.returncode} with {code} naming {needle}")


def body(c: t.Checks) -> None:
    model = t.make_model("tiny")
    tmp = t.test_tmp("hostile_inputs")
    os.makedirs(tmp, exist_ok=True)
    startup_failures(c, model, tmp)
    request_failures(c, model, tmp)
    long_line(c, model, tmp)
    tokenize_empty(c, model)
    hostile_configs(c, model, tmp)


if __name__ == "__main__":
    t.main("hostile_inputs", body)
