#!/usr/bin/python3
"""Structured output under mpirun (TP 2 x PP 2): greedy constrained and free lines (the first 60
of structured_output.py's generated JSON schemas, regexes, grammars, choices and free lines) give
the single rank's answers, also when the job is stopped (SIGTERM to rank 0: it drains, printing
the --resume command) and carried on with --resume. Split from structured_output.py, so that the
single-rank property and serve checks run beside the MPI tests and only this part holds the MPI
lock.
"""

import json
import os
import random
import signal
import subprocess
import time

import testlib as t
from structured_output import make_lines, read_answers


def distributed(c: t.Checks, model: str) -> None:
    """Greedy constrained lines (and free ones) through TP 2 x PP 2 equal the single rank's, and a
    job stopped half way and resumed gives the same file."""
    lines = [line for _, _, line in make_lines(random.Random(5))][:60]
    for line in lines:
        body = line.get("body", line)
        body["temperature"] = 0
        body["max_tokens"] = 40
    work = t.test_tmp("structured_output_mpi")
    inp = os.path.join(work, "in.jsonl")
    with open(inp, "w") as f:
        f.write("".join(json.dumps(line) + "\n" for line in lines))
    # Exact math: greedy answers of a random model meet near-ties that bf16 K/V rounding after a
    # differently ordered all-reduce can tip.
    common = ["--model", model, "--input", inp, "--max-model-len", 512, "--max-num-seqs", 8]
    common += t.EXACT_KV
    ref, out = os.path.join(work, "ref.jsonl"), os.path.join(work, "out.jsonl")
    t.qmpi(["batch", "--output", ref, "--overwrite"] + common, timeout=300)
    want = read_answers(ref)
    t.qmpi(["batch", "--output", out, "--overwrite"] + common, tp=2, pp=2, timeout=400)
    got = read_answers(out)
    differ = [k for k in want if got.get(k) != want[k]]
    c.check(len(got) == len(lines) and not differ,
            f"TP 2 x PP 2: every constrained and free answer equals the single rank's "
            f"({len(differ)} of {len(lines)} differ: {differ[:3]})")

    # Stopped by SIGTERM to mpirun's rank 0 after a few lines, then --resume.
    os.remove(out)
    args = [t.mpirun_binary(), "--oversubscribe", "-np", "4", "-x", "OMP_NUM_THREADS",
            t.qmpi_binary(), "batch", "--output", out, "--tp", "2", "--pp", "2"] + [
                str(a) for a in common]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, OMP_NUM_THREADS="1"))
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if os.path.exists(out) and open(out, "rb").read().count(b"\n") >= 10:
            break
        time.sleep(0.2)
    pid = t.rank_pids(proc.pid).get(0)
    if proc.poll() is None and pid:
        os.kill(pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=240)
    partial = read_answers(out)
    c.check(" --resume" in err and len(partial) < len(lines),
            f"SIGTERM drained the job after {len(partial)} of {len(lines)} lines with the "
            f"--resume command")
    t.qmpi(["batch", "--output", out, "--resume"] + common, tp=2, pp=2, timeout=400)
    resumed = read_answers(out)
    with open(out) as f:
        ids = [json.loads(raw).get("custom_id") or json.loads(raw).get("id") for raw in f]
    c.check(len(ids) == len(set(ids)) == len(lines) and resumed == want,
            f"--resume: every line once, each the uninterrupted single rank's answer "
            f"({len(ids)} lines, {sum(resumed.get(k) != want[k] for k in want)} differ)")


def body(c: t.Checks) -> None:
    distributed(c, t.make_model("tiny"))


if __name__ == "__main__":
    t.main("structured_output_layouts", body)
