#!/usr/bin/python3
"""int4 checkpoints (AWQ, GPTQ sym / asym / act-order) against the float64 reference.

`qmpi make-model --quant` writes each random int4 model and the float model it dequantizes to.
The reference unpacks the int4 files with its own code (tests/reference/int4_ref.py, written
from the format description) and must get exactly the float twin's weights; then `qmpi logits`
on the int4 model must match the reference's logits to 2e-3 of the largest |logit| at 1x1,
TP 2, PP 3 and TP 2 x PP 3, and greedy tokens must equal the reference's where the top-2 margin
is clear. `qmpi convert` carries the int4 tensors into a .h5 file unchanged: the same logits.
`qmpi batch` on the act-order model gives the same completions at 2x3 as at 1x1, and `qmpi serve`
at 2x3 answers 32 concurrent ZeroMQ and HTTP requests with `qmpi batch` 1x1's tokens and text.
"""

import json
import os
import threading

import numpy as np

import testlib  # first: it puts tests/reference on the path
import int4_ref
import qwen2_ref
import safetensors_ref
import servelib as sz

MODELS = [
    ("awq g64", ["--quant", "awq", "--group-size", "64"]),
    ("gptq sym g64", ["--quant", "gptq", "--group-size", "64", "--sym"]),
    ("gptq asym g32", ["--quant", "gptq", "--group-size", "32", "--shards", "3"]),
    ("gptq act-order g64", ["--quant", "gptq", "--group-size", "64", "--desc-act"]),
]
LAYOUTS = [(1, 1), (2, 1), (1, 3), (2, 3)]
GREEDY_LAYOUTS = [(1, 1), (2, 3)]
TOLERANCE = 2e-3
LOGITS_LEN = 16
GREEDY_TOKENS = 8
# A greedy step whose top-2 margin is below this may flip on rounding alone.
CLEAR_MARGIN = 0.05
MPI_TIMEOUT = 240


def make_int4(label: str, args) -> tuple:
    """(int4 folder, float twin folder), made once per qmpi binary."""
    return testlib.make_model_pair("int4-" + key_of(label),
                                   ["--preset", "tiny", "--seed", "21"] + args)


def check_unpacking(c, label, model_dir, twin_dir) -> qwen2_ref.Qwen2Reference:
    """The reference's unpacking of the int4 files == the float twin's weights, exactly; the
    reference model on those weights (as qwen2_ref.load_model unpacks them, done once)."""
    with open(os.path.join(model_dir, "config.json")) as f:
        raw = json.load(f)
    mine = int4_ref.dequantize_tensors(safetensors_ref.read_model_dir(model_dir),
                                       raw["quantization_config"])
    twin = safetensors_ref.read_model_dir(twin_dir)
    c.check(sorted(mine) == sorted(twin), f"{label}: reference unpacking names the twin's tensors")
    worst = max(float(np.max(np.abs(mine[n] - twin[n]))) for n in twin if n in mine)
    c.check(worst == 0.0, f"{label}: reference unpacking == float twin (max diff {worst:g})")
    return qwen2_ref.Qwen2Reference(qwen2_ref.Qwen2Config(raw), mine)


def batch_texts(model_dir: str, tp: int, pp: int) -> dict:
    """{custom_id: text} of a two-request greedy `qmpi batch` run."""
    work = testlib.test_tmp("int4")
    src, out = os.path.join(work, "batch.jsonl"), os.path.join(work, f"batch-{tp}x{pp}.jsonl")
    with open(src, "w") as f:
        for cid, prompt in (("a", "Hello world"), ("b", "The quick brown fox")):
            f.write(json.dumps({"custom_id": cid, "method": "POST", "url": "/v1/completions",
                                "body": {"prompt": prompt, "max_tokens": 12,
                                         "temperature": 0}}) + "\n")
    if os.path.exists(out):
        os.remove(out)
    testlib.qmpi(["batch", "--model", model_dir, "--input", src, "--output", out]
                 + testlib.EXACT_KV, tp=tp, pp=pp,
                 mpi=tp * pp > 1, timeout=MPI_TIMEOUT)
    with open(out) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return {r["custom_id"]: r["response"]["body"]["choices"][0]["text"] for r in rows}


def serve_matches_batch(c: testlib.Checks, label: str, model_dir: str) -> None:
    """`qmpi serve --tp 2 --pp 3`: 16 ZeroMQ and 16 HTTP clients at once get batch 1x1's answers."""
    reqs = sz.make_requests(16, "z", 41) + sz.make_requests(16, "h", 42)
    ref = c.guard(f"{label} serve reference", sz.batch_reference, model_dir, reqs, tp=1, pp=1)
    if ref is None:
        return
    server = sz.Server(model_dir, tp=2, pp=3, extra=["--served-model-name", "tiny"])
    try:
        server.wait_ready(timeout=120)
        results = {}
        threads = [threading.Thread(target=sz.zmq_client if r["id"][0] == "z" else sz.http_client,
                                    args=(server, r, results)) for r in reqs]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=180)
        sz.compare(c, f"{label} serve 2x3", results, ref)
        rc = server.stop()
        c.check(rc == 0, f"{label} serve 2x3: SIGTERM stopped every rank, exit {rc}")
    finally:
        server.kill()


def key_of(label: str) -> str:
    return label.replace(" ", "-")


def check_model(c: testlib.Checks, label: str, args, convert: bool) -> None:
    made = c.guard(label, make_int4, label, args)
    if made is None:
        return
    model_dir, twin_dir = made
    ref = check_unpacking(c, label, model_dir, twin_dir)
    ids = testlib.random_ids(31, LOGITS_LEN)
    want = ref.logits(ids)
    single = None
    for tp, pp in LAYOUTS:
        name = f"{label} {tp}x{pp}"
        got = c.guard(name, testlib.qmpi_logits, model_dir, ids=ids, tp=tp, pp=pp,
                      mpi=tp * pp > 1, timeout=MPI_TIMEOUT)
        if got is not None and tp * pp == 1:
            single = got
        if got is not None:
            err = testlib.rel_err(got, want)
            c.check(err <= TOLERANCE, f"{name}: logits T={LOGITS_LEN} rel err {err:.2e} "
                                      f"(limit {TOLERANCE:g})")
    if convert and single is not None:
        h5 = os.path.join(testlib.test_tmp("int4"), key_of(label) + ".h5")
        if c.guard(f"{label} convert", testlib.qmpi, ["convert", "--model", model_dir, "--out", h5],
                   timeout=120) is not None:
            got = c.guard(f"{label} .h5", testlib.qmpi_logits, h5, ids=ids)
            if got is not None:
                c.check(np.array_equal(got, single), f"{label}: .h5 from qmpi convert gives the "
                                                     f"same logits as the safetensors folder")
    if convert:
        one = c.guard(f"{label} batch 1x1", batch_texts, model_dir, 1, 1)
        six = c.guard(f"{label} batch 2x3", batch_texts, model_dir, 2, 3)
        if one is not None and six is not None:
            c.check(len(one) == 2 and one == six,
                    f"{label}: qmpi batch completions at 2x3 == 1x1 ({len(one)} requests)")
        c.guard(f"{label} serve", serve_matches_batch, c, label, model_dir)
    prompt = ids[:5]
    trace = ref.greedy_trace(prompt, GREEDY_TOKENS, testlib.tokenizer_size(model_dir))
    clear = next((i for i, (_, m) in enumerate(trace) if m < CLEAR_MARGIN), len(trace))
    expect = [t for t, _ in trace][:clear]
    for tp, pp in GREEDY_LAYOUTS:
        name = f"{label} {tp}x{pp}"
        result = c.guard(name, testlib.qmpi_greedy, model_dir, GREEDY_TOKENS, ids=prompt, tp=tp,
                         pp=pp, mpi=tp * pp > 1, timeout=MPI_TIMEOUT)
        if result is not None:
            got = result["output_ids"][:clear]
            c.check(got == expect, f"{name}: first {clear} greedy ids (margins >= {CLEAR_MARGIN}) "
                                   f"== reference")


def body(c: testlib.Checks) -> None:
    for i, (label, args) in enumerate(MODELS):
        check_model(c, label, args, convert=i == len(MODELS) - 1)


if __name__ == "__main__":
    testlib.main("int4_vs_reference", body)
