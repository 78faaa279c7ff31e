#!/usr/bin/python3
"""`qmpi batch --speculative-config '{"model": DRAFT, ...}'` (a draft model) gives the plain
run's results, line for line, and a draft of another tokenizer is refused before anything loads.

The target is the tiny f32 model. Drafts:
- a smaller random model (2 layers, another seed) whose config pads the vocabulary to 152064
  rows against the target's 151936, with the same tokenizer, as Qwen2.5's small and large
  checkpoints do: it must be accepted, and it never guesses an id the target cannot score;
- the target itself: greedy without a repetition penalty, it guesses exactly what the target
  picks, so every guess is accepted (the batch summary's counters say so).
One input of 16 requests, greedy and seeded (temperature 0.9, n = 2, top logprobs), some with a
stop string, runs plain at 1x1, then with the small draft (k = 3) at 1x1, and with the
self-draft at 1x1. The small draft at TP 2, PP 3 (micro-batches in flight), TP 4 (the tiny
model's 6 KV heads split unevenly) and --dp 2 is spec_decode_draft_layouts.py's, which holds the
MPI lock; this test runs on one rank, beside the MPI tests. Every result equals the plain one (tokens, text, finish reasons, usage
and top-logprob tokens exactly, logprobs within 1e-3) and keeps to its max_tokens.
`qmpi plan --speculative-config` counts the draft's weights on rank 0.
"""

import json
import os
import random
import re
import shutil
import subprocess

import testlib as t

MAX_MODEL_LEN = 256
LOGPROB_TOLERANCE = 1e-3
K = 3
WORDS = ("the quick brown fox jumps over a lazy dog while seven red birds sing about rivers "
         "and mountains near old stone bridges").split()


def spec(draft: str) -> list:
    return ["--speculative-config",
            json.dumps({"model": draft, "num_speculative_tokens": K})]


def make_input(path: str, greedy_only: bool) -> dict:
    """Writes the requests; returns {id: max_tokens}."""
    rng = random.Random(7)
    limits = {}
    with open(path, "w") as f:
        for i in range(16):
            phrase = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9)))
            line = {"id": f"r{i}", "prompt": phrase, "max_tokens": rng.randint(6, 20),
                    "temperature": 0}
            if greedy_only:
                # The draft guesses the argmax of the raw logits; the model's
                # generation_config.json would add a repetition penalty of 1.05.
                line["repetition_penalty"] = 1.0
            elif i % 4 == 3:
                line.update(temperature=0.9, seed=100 + i, n=2, logprobs=2)
            if i % 5 == 2:
                line["stop"] = [rng.choice(WORDS)]
            limits[line["id"]] = line["max_tokens"]
            f.write(json.dumps(line) + "\n")
    return limits


def make_small_draft(target: str) -> str:
    """A 2-layer random model like the target, its embedding padded to 152064 rows (made once;
    spec_decode_draft_layouts.py may ask for it at the same time)."""
    root = t.test_tmp("models")
    dest = os.path.join(root, "draft-2layer-vocab152064")
    stamp = os.path.join(dest, ".made-by")
    identity = t._binary_identity()
    with t.locked("model-draft-2layer-vocab152064"):
        if os.path.exists(stamp) and open(stamp).read() == identity:
            return dest
        with open(os.path.join(target, "config.json")) as f:
            cfg = json.load(f)
        cfg.update(num_hidden_layers=2, max_window_layers=2, vocab_size=152064)
        like = os.path.join(root, "draft_config.json")
        with open(like, "w") as f:
            json.dump(cfg, f)
        shutil.rmtree(dest, ignore_errors=True)
        t.qmpi(["make-model", "--out", dest, "--like", like, "--seed", 7, "--dtype", "f32"],
               timeout=300)
        with open(stamp, "w") as f:
            f.write(identity)
    return dest


def make_foreign_draft(target: str) -> str:
    """The target's config and tokenizer with two vocabulary entries swapped, and no weights:
    a refusal that came after loading would fail on the missing weights instead."""
    dest = os.path.join(t.test_tmp("spec_draft"), "foreign-draft")
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest)
    shutil.copy(os.path.join(target, "config.json"), dest)
    shutil.copy(os.path.join(target, "tokenizer_config.json"), dest)
    with open(os.path.join(target, "tokenizer.json")) as f:
        tok = json.load(f)
    vocab = tok["model"]["vocab"]
    a, b = next(k for k, v in vocab.items() if v == 1000), next(
        k for k, v in vocab.items() if v == 1001)
    vocab[a], vocab[b] = 1001, 1000
    with open(os.path.join(dest, "tokenizer.json"), "w") as f:
        json.dump(tok, f)
    return dest


def run_batch(model: str, inp: str, label: str, extra: list, ranks: int,
              folder: str = "spec_draft") -> tuple:
    out = os.path.join(t.test_tmp(folder), f"{label}.jsonl")
    return t.run_batch_job(model, inp, out, extra, ranks, MAX_MODEL_LEN, timeout=300)


def accepted(log: str) -> tuple:
    m = re.search(r"speculation: (\d+) of (\d+) guessed tokens accepted", log)
    return (int(m.group(1)), int(m.group(2))) if m else None


def check_equal(c: t.Checks, label: str, results: dict, ref: dict, limits: dict) -> None:
    differ = [rid for rid in ref if rid not in results or
              not t.same_results(results[rid], ref[rid], LOGPROB_TOLERANCE)]
    c.check(not differ and len(results) == len(ref),
            f"{label}: {len(results) - len(differ)}/{len(ref)} results equal plain 1x1's (tokens, "
            f"text, usage; logprobs within {LOGPROB_TOLERANCE:g})" +
            (f"; first differing: {differ[0]}: {str(results.get(differ[0]))[:600]} vs "
             f"{str(ref[differ[0]])[:600]}" if differ else ""))
    over = [rid for rid, r in results.items() for ch in r["choices"]
            if len(ch["token_ids"]) > limits[rid]
            or (ch["finish_reason"] == "length" and len(ch["token_ids"]) != limits[rid])]
    c.check(not over, f"{label}: no choice has more tokens than its max_tokens, and one that "
                      f"stopped for length has exactly that many"
                      + (f" ({over[:3]})" if over else ""))


def check_plan(c: t.Checks, target: str, draft: str) -> None:
    base = ["plan", "--model", target, "--gpus", 1, "--backend", "cpu", "--host-mem", "8GiB",
            "--tp", 1, "--pp", 1, "--json"]
    plain = json.loads(t.qmpi(base).stdout)
    with_draft = json.loads(t.qmpi(base + spec(draft)).stdout)
    rank0, draft0 = plain["layout"]["ranks"][0], with_draft["layout"]["ranks"][0]
    w0, w1, d = rank0["weights_bytes"], draft0["weights_bytes"], draft0["draft_weights_bytes"]
    files = sum(os.path.getsize(os.path.join(draft, f)) for f in os.listdir(draft)
                if f.endswith(".safetensors"))
    c.check(d > 0 and w1 - w0 == d and 0.99 * files <= d <= files,
            f"plan: rank 0 holds the draft's {d} bytes of weights on top of its {w0} "
            f"(its safetensors: {files} bytes)")
    k0, k1 = rank0["kv_bytes_per_token"], draft0["kv_bytes_per_token"]
    c.check(k1 > k0, f"plan: rank 0's KV per token grows by the draft's ({k0} -> {k1} bytes)")


def check_small_draft(c: t.Checks, target: str, small: str, folder: str, layouts) -> None:
    """The input run plain at 1x1, then with the small draft at each (label, options, ranks)."""
    inp = os.path.join(t.test_tmp(folder), "input.jsonl")
    limits = make_input(inp, greedy_only=False)
    ref, _ = run_batch(target, inp, "plain", [], 1, folder)
    c.check(len(ref) == 16, f"plain 1x1: {len(ref)} results")
    for label, layout, ranks in layouts:
        got = c.guard(label, run_batch, target, inp, "small-" + label, spec(small) + layout,
                      ranks, folder)
        if got is None:
            continue
        results, log = got
        check_equal(c, f"small draft {label}", results, ref, limits)
        a = accepted(log)
        c.check(a is not None and a[1] > 0,
                f"small draft {label}: guesses were made and checked ({a})")


def body(c: t.Checks) -> None:
    target = t.make_model()
    small = make_small_draft(target)
    tmp = t.test_tmp("spec_draft")
    check_small_draft(c, target, small, "spec_draft", [("1x1", [], 1)])

    # The target as its own draft, greedy only: every guess is the target's own pick.
    greedy = os.path.join(tmp, "greedy.jsonl")
    limits = make_input(greedy, greedy_only=True)
    ref, _ = run_batch(target, greedy, "plain-greedy", [], 1)
    got = c.guard("self", run_batch, target, greedy, "self-1x1", spec(target), 1)
    if got is not None:
        results, log = got
        check_equal(c, "self-draft 1x1", results, ref, limits)
        a = accepted(log)
        c.check(a is not None and a[1] > 0 and a[0] == a[1],
                f"self-draft 1x1: every guessed token accepted ({a})")

    # Another tokenizer: refused by name before any weight loads.
    foreign = make_foreign_draft(target)
    cmd = [t.qmpi_binary(), "batch", "--model", target, "--input", greedy, "--output",
           os.path.join(tmp, "foreign.jsonl"), "--overwrite", "--token-ids"] + spec(foreign)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    text = proc.stdout + proc.stderr
    c.check(proc.returncode != 0 and "QM270" in text and "token id 1000" in text
            and "start-up" not in text,
            f"foreign draft: refused before load with QM270 (exit {proc.returncode}): "
            f"{text.strip().splitlines()[-3:] if text.strip() else ''}")

    check_plan(c, target, small)


if __name__ == "__main__":
    t.main("spec_decode_draft", body)
