#!/usr/bin/python3
"""LoRA adapters (issue 33) against the float64 reference on merged weights.

`qmpi make-lora` writes random PEFT adapters for the tiny f32 model: q/v at r 8, all seven
projections at r 4 with use_rslora, and k/o/gate/up/down at r 16. For each, `qmpi logits
--lora NAME` must match the reference run on W + scale * B @ A (tests/reference/lora_ref.py)
within the exact-math bound (1e-4 of the largest |logit|), at 1x1, TP 2, TP 3 and, for the
all-module adapter, TP 5 (heads 3,3,2,2,2, KV heads straddling ranks, MLP columns uneven) and
PP 3; and the adapter must move the logits visibly away from the base model's.

`qmpi batch` with the three adapters and base requests interleaved (the same 40-token prompt
under every model too, so a prefix-cache hit across adapters would show) gives each line the
greedy tokens of `qmpi run` with only that adapter (or none), at 1x1 and TP 2. The adapter
errors (their QM codes) are lora_errors.py's: one rank, so they run beside the MPI tests.
"""

import json
import os
import shutil

import numpy as np

import testlib  # first: it puts tests/reference on the path
import lora_ref
import qwen2_ref
import safetensors_ref

TOLERANCE = 1e-4
MIN_EFFECT = 1e-2  # an adapter must change the logits by more than this (relative)
LOGITS_LEN = 12
MPI_TIMEOUT = 300
GREEDY = 12
EXACT = ["--kv-dtype", "f32"]

# name -> make-lora options
ADAPTERS = {
    "qv": ["--rank", "8", "--alpha", "16", "--targets", "q_proj,v_proj", "--seed", "3"],
    "all": ["--rank", "4", "--alpha", "6", "--rslora", "--targets",
            "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj", "--seed", "4"],
    "mlp": ["--rank", "16", "--alpha", "8", "--targets", "k_proj,o_proj,gate_proj,up_proj,"
            "down_proj", "--seed", "5"],
}


def make_adapter(base: str, name: str, options: list, folder: str = "lora") -> str:
    dest = os.path.join(testlib.test_tmp(folder), name)
    shutil.rmtree(dest, ignore_errors=True)
    testlib.qmpi(["make-lora", "--model", base, "--out", dest] + options)
    return dest


def modules_args(adapters: dict) -> list:
    return ["--lora-modules"] + [f"{n}={d}" for n, d in adapters.items()] + \
        ["--max-loras", str(max(len(adapters), 1))]


def lora_logits(base, adapters, name, ids, tp=1, pp=1) -> np.ndarray:
    out = os.path.join(testlib.test_tmp("lora"), f"logits-{os.getpid()}.npy")
    args = ["logits", "--model", base, "--out", out, "--ids", testlib.ids_arg(ids)] + EXACT
    args += modules_args(adapters) + (["--lora", name] if name else [])
    testlib.qmpi(args, tp=tp, pp=pp, mpi=tp * pp > 1, timeout=MPI_TIMEOUT)
    try:
        return np.load(out)
    finally:
        os.remove(out)


def check_logits(c, base, adapters) -> None:
    tensors = safetensors_ref.read_model_dir(base)
    with open(os.path.join(base, "config.json")) as f:
        cfg = qwen2_ref.Qwen2Config(json.load(f))
    ids = testlib.random_ids(41, LOGITS_LEN)
    base_ref = qwen2_ref.Qwen2Reference(cfg, tensors).logits(ids)
    for name, path in adapters.items():
        want = qwen2_ref.Qwen2Reference(cfg, lora_ref.merged(tensors, path)).logits(ids)
        effect = testlib.rel_err(want, base_ref)
        c.check(effect > MIN_EFFECT, f"{name}: the adapter moves the reference logits "
                                     f"(rel {effect:.2e} > {MIN_EFFECT:g})")
        layouts = [(1, 1), (2, 1), (3, 1)] + ([(5, 1), (1, 3)] if name == "all" else [])
        for tp, pp in layouts:
            label = f"{name} {tp}x{pp}"
            got = c.guard(label, lora_logits, base, adapters, name, ids, tp, pp)
            if got is None:
                continue
            err = testlib.rel_err(got, want)
            c.check(err <= TOLERANCE, f"{label}: logits vs merged reference rel err {err:.2e} "
                                      f"(limit {TOLERANCE:g})")
    # With adapters loaded, a run without --lora is the base model's.
    got = c.guard("base 2x1", lora_logits, base, adapters, None, ids, 2, 1)
    if got is not None:
        err = testlib.rel_err(got, base_ref)
        c.check(err <= TOLERANCE, f"base with adapters loaded, 2x1: rel err {err:.2e}")


def run_tokens(base, adapters, name, prompt) -> list:
    args = ["run", "--model", base, "--prompt", prompt, "--max-tokens", GREEDY,
            "--temperature", 0, "--ignore-eos", "--json"] + EXACT + modules_args(adapters)
    args += ["--lora", name] if name else []
    lines = [l for l in testlib.qmpi(args).stdout.splitlines() if l.strip()]
    return json.loads(lines[-1])["output_ids"]


def check_batch(c, base, adapters) -> None:
    shared = " ".join(["the quick brown fox jumps over the lazy dog"] * 5)  # > one KV block
    prompts = [shared, "Once upon a time", "def main():\n    return", "1, 2, 3, 5, 8,"]
    models = [None] + list(adapters)  # None: the base model
    lines, want = [], {}
    # Round 0: every model on the shared prompt; round 1: each on another prompt.
    for round_ in range(2):
        for m, model in enumerate(models):
            prompt = shared if round_ == 0 else prompts[1 + m % 3]
            cid = f"r{round_}-{model or 'base'}"
            line = {"id": cid, "prompt": prompt, "max_tokens": GREEDY, "temperature": 0,
                    "ignore_eos": True}
            if model:
                line["model"] = model
            lines.append(json.dumps(line))
            if (model, prompt) not in want:
                want[(model, prompt)] = c.guard(f"run {model} {prompt[:12]!r}", run_tokens,
                                                base, adapters, model, prompt)
            want[cid] = want[(model, prompt)]
    inp = os.path.join(testlib.test_tmp("lora"), "in.jsonl")
    with open(inp, "w") as f:
        f.write("\n".join(lines) + "\n")
    for tp in (1, 2):
        out = os.path.join(testlib.test_tmp("lora"), f"out-{tp}.jsonl")
        args = ["batch", "--model", base, "--input", inp, "--output", out, "--overwrite",
                "--token-ids", "--served-model-name", "tiny"] + EXACT + modules_args(adapters)
        if c.guard(f"batch tp {tp}", testlib.qmpi, args, tp=tp, mpi=tp > 1,
                   timeout=MPI_TIMEOUT) is None:
            continue
        with open(out) as f:
            results = [json.loads(l) for l in f if l.strip()]
        differ = [r["custom_id"] for r in results
                  if r.get("error") or want.get(r["custom_id"]) is None
                  or r["response"]["body"]["choices"][0]["token_ids"] != want[r["custom_id"]]]
        c.check(len(results) == len(lines) and not differ,
                f"batch tp {tp}: {len(results)} lines, base and 3 adapters interleaved, each == "
                f"its own `qmpi run` ({len(differ)} differ{': ' + differ[0] if differ else ''})")
    # The adapters change the continuation of the shared prompt (else the test shows nothing).
    outs = [want.get((m, shared)) for m in models]
    c.check(all(o is not None for o in outs) and len({tuple(o) for o in outs}) == len(models),
            "the shared prompt continues differently under the base model and each adapter")


def body(c: testlib.Checks) -> None:
    base = testlib.make_model("tiny", seed=7, dtype="f32")
    adapters = {}
    for name, options in ADAPTERS.items():
        made = c.guard(f"make-lora {name}", make_adapter, base, name, options)
        if made is not None:
            adapters[name] = made
    if len(adapters) != len(ADAPTERS):
        return
    check_logits(c, base, adapters)
    check_batch(c, base, adapters)


if __name__ == "__main__":
    testlib.main("lora_vs_reference", body)
