"""Layouts that cannot work fail before any weight is read, with one sentence, the catalogue
code and exit code, and a layout that would work; printed once, not once per rank."""

import json
import os
import socket
import subprocess

import testlib as t

QWEN72B = {
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 8192,
    "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8,
    "intermediate_size": 29568, "vocab_size": 152064, "max_position_embeddings": 32768,
    "rope_theta": 1000000.0, "rms_norm_eps": 1e-06, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "bos_token_id": 151643, "eos_token_id": 151645,
    "hidden_act": "silu", "use_sliding_window": False,
}


def launch(np_, args):
    cmd = [t.mpirun_binary(), "--oversubscribe", "-np", str(np_), "-x", "OMP_NUM_THREADS",
           t.qmpi_binary()] + [str(a) for a in args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))


def serve_files_first(c: t.Checks, model: str):
    """Issue 18 item 6: `qmpi serve` finds a port in use (ZeroMQ or HTTP) and a model without
    tokenizer.json before it reads a weight, with the code that names the cause."""
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    port = busy.getsockname()[1]
    bare = t.test_tmp("serve-no-tokenizer")
    for name in os.listdir(model):
        if name != "tokenizer.json" and not os.path.lexists(os.path.join(bare, name)):
            os.symlink(os.path.join(model, name), os.path.join(bare, name))
    try:
        for label, args, code in [
                ("ZeroMQ port in use", ["--model", model, "--zmq", f"tcp://127.0.0.1:{port}",
                                        "--no-http"], "QM413"),
                ("HTTP port in use", ["--model", model, "--zmq", "tcp://127.0.0.1:*", "--http",
                                      f"127.0.0.1:{port}"], "QM413"),
                ("no tokenizer.json", ["--model", bare, "--zmq", "tcp://127.0.0.1:*",
                                       "--no-http"], "QM300")]:
            p = subprocess.run([t.qmpi_binary(), "serve", *args], capture_output=True, text=True,
                               timeout=60, env=dict(os.environ, OMP_NUM_THREADS="1"))
            out = p.stdout + p.stderr
            c.check(p.returncode != 0 and code in out and "MiB of weights" not in out and
                    "bytes read" not in out,
                    f"serve ({label}): {code} before a weight is read, exit {p.returncode}"
                    + ("" if code in out else "\n" + out[-1500:]))
    finally:
        busy.close()


def body(c: t.Checks):
    model = t.make_model(dtype="bf16")
    odd_dir = t.test_tmp("odd-mlp-config")
    with open(os.path.join(odd_dir, "config.json"), "w") as f:
        json.dump(dict(QWEN72B, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, intermediate_size=91, vocab_size=1000), f)

    cases = [
        # (ranks, args, code, exit code, words the sentence must carry, words of the fix)
        (6, ["run", "--model", model, "--ids", "1,2", "--tp", "4", "--pp", "2"], "QM101", 2,
         ["6 ranks cannot form --tp 4 --pp 2 (8 ranks)"], ["--tp"]),
        # Any TP up to the head count runs; 4 heads cannot feed 6 TP ranks.
        (6, ["run", "--synthetic-weights", "--model-config", os.path.join(odd_dir, "config.json"),
             "--ids", "1,2", "--tp", "6", "--pp", "1"], "QM102", 2,
         ["--tp 6 is larger than num_attention_heads (4)"], ["--tp 3 --pp 2"]),
        (3, ["run", "--model", model, "--ids", "1,2", "--tp", "1", "--pp", "3",
             "--pp-layers", "3,3,1"], "QM105", 2, ["--pp-layers"], []),
    ]
    for ranks, args, code, rc, words, fix_words in cases:
        p = launch(ranks, args)
        out = p.stdout + p.stderr
        c.check(p.returncode == rc, f"{code}: exit {p.returncode} (want {rc}) for {' '.join(map(str, args[-6:]))}")
        c.check(out.count(f"error {code}") == 1,
                f"{code}: printed exactly once (seen {out.count('error ' + code)} times)")
        for w in words:
            c.check(w in out, f"{code}: message says {w!r}")
        fix = [line for line in out.splitlines() if line.strip().startswith("fix:")]
        c.check(bool(fix) and all(w in fix[0] for w in fix_words),
                f"{code}: fix line {fix[0].strip() if fix else None!r} has {fix_words}")
        c.check("bytes read" not in out, f"{code}: no rank read weights before failing")
        if p.returncode != rc:
            print(out[-3000:])
    serve_files_first(c, model)


t.main("launch_errors", body)
