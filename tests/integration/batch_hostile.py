#!/usr/bin/python3
"""`qmpi batch` against the hostile inputs of issue 19, at 1 rank and at 2 ranks (--tp 2):

- a line with a number beyond a double (1e400) is one error line with its own id, the other
  lines are answered, the job exits 0, and under mpirun nothing hangs;
- generated ids (qmpi-line-N) never collide with the input's own ids, and a job cut after any
  line and resumed answers each line once;
- --output naming the --input file (directly or through a symlink) is refused with QM601
  before the weights load, and the input is left as it was;
- negative limits (--max-num-seqs -1, ...) are usage errors showing the value as given;
- a model without tokenizer.json is refused before its weights load.
"""

import json
import os
import shutil
import subprocess
import time

import testlib as t

NUMBERS = ['{"id":"g1","prompt":"a","max_tokens":2}',
           '{"id":"g3","prompt":"x","max_tokens":1e400}',
           '{"custom_id":"g4","url":"/v1/completions","body":{"prompt":"b","max_tokens":2,'
           '"temperature":-1e999}}',
           '{"id":"g5","prompt":"c","max_tokens":2}']
# The hostile run's id input, and the reserved form.
IDS = ['{"id": "broken", ',
       '{"id":"line-1","prompt":"a","max_tokens":2}',
       '{"id":"x3","prompt":"b","max_tokens":2}',
       '{"id":"x3","prompt":"c","max_tokens":2}',
       '{"id":"line-4","prompt":"d","max_tokens":2}',
       '{"id":"qmpi-line-1","prompt":"e","max_tokens":2}',
       '{"id":"qmpi-line-7","prompt":"f","max_tokens":2}']
IDS_WANT = {"qmpi-line-1": "QM500", "line-1": None, "x3": None, "qmpi-line-4": "QM501",
            "line-4": None, "qmpi-line-6": "QM501", "qmpi-line-7": None}


def write(path: str, lines) -> None:
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def results(path: str) -> dict:
    """custom_id -> error code (None when ok); a repeated id fails the test."""
    out = {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r["custom_id"] in out:
                raise t.TestFailure(f"{r['custom_id']} appears twice in {path}")
            out[r["custom_id"]] = r["error"]["code"] if r["error"] else None
    return out


def batch(model: str, inp: str, out: str, ranks: int, extra=()) -> subprocess.CompletedProcess:
    return t.qmpi(["batch", "--model", model, "--input", inp, "--output", out,
                   "--comm-timeout", "60", *extra], tp=ranks, timeout=180)


def numbers(c: t.Checks, model: str, work: str) -> None:
    inp = os.path.join(work, "numbers.jsonl")
    write(inp, NUMBERS)
    for ranks in (1, 2):
        out = os.path.join(work, f"numbers-{ranks}.jsonl")
        started = time.monotonic()
        proc = c.guard(f"1e400 at {ranks} rank(s)", batch, model, inp, out, ranks, ["--overwrite"])
        if proc is None:
            continue
        got = results(out)
        c.check(got == {"g1": None, "g3": "QM501", "g4": "QM501", "g5": None},
                f"{ranks} rank(s): 1e400 and -1e999 are one QM501 line each under their own ids, "
                f"the others answered, exit 0 in {time.monotonic() - started:.0f}s: {got}")
        with open(out) as f:
            msg = [json.loads(x) for x in f if '"g3"' in x][0]["error"]["message"]
        c.check("1e400" in msg and "internal" not in msg, f"the message names the number: {msg}")
    # --resume over the same input works too (it failed the same way forever).
    proc = c.guard("resume", batch, model, inp, os.path.join(work, "numbers-1.jsonl"), 1,
                   ["--resume"])
    c.check(proc is not None and "0 ok, 0 failed, 4 skipped" in proc.stderr,
            "--resume of a finished job skips all 4 lines")


def ids(c: t.Checks, model: str, work: str) -> None:
    inp = os.path.join(work, "ids.jsonl")
    write(inp, IDS)
    out = os.path.join(work, "ids.jsonl.out")
    proc = c.guard("ids", batch, model, inp, out, 1, ["--overwrite"])
    if proc is None:
        return
    got = results(out)
    c.check(got == IDS_WANT, f"one result per line, generated ids apart from the input's: {got}")
    with open(out) as f:
        full = f.readlines()
    # Cut after each line, resume: every line answered once, and the summary says so.
    bad = []
    for cut in range(len(full)):
        with open(out, "w") as f:
            f.writelines(full[:cut])
        proc = c.guard(f"resume after {cut}", batch, model, inp, out, 1, ["--resume"])
        again = results(out) if proc else {}
        if again != IDS_WANT or f"{cut} skipped" not in proc.stderr:
            bad.append(f"cut {cut}: {again}")
    c.check(not bad, f"cut after any of {len(full)} lines and resumed: each id once" +
            "".join("\n      " + b for b in bad[:3]))


def same_file(c: t.Checks, model: str, work: str) -> None:
    inp = os.path.join(work, "same.jsonl")
    write(inp, NUMBERS[:1])
    link = os.path.join(work, "same-link.jsonl")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(inp, link)
    before = open(inp).read()
    for ranks in (1, 2):
        for out in (inp, link):
            cmd = [t.qmpi_binary(), "batch", "--model", model, "--input", inp, "--output", out,
                   "--overwrite"]
            if ranks > 1:
                cmd = [t.mpirun_binary(), "--oversubscribe", "-np", "2", *cmd, "--tp", "2"]
            started = time.monotonic()
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            took = time.monotonic() - started
            loaded = "MiB of weights" in proc.stderr
            c.check(proc.returncode != 0 and "QM601" in proc.stderr and "same file" in proc.stderr
                    and not loaded and open(inp).read() == before,
                    f"{ranks} rank(s), --output {os.path.basename(out)}: refused with QM601 before "
                    f"the weights load ({took:.1f}s, exit {proc.returncode}), input intact"
                    + ("" if "QM601" in proc.stderr else "\n" + proc.stderr[-600:]))
            c.check(proc.stderr.count("QM601") == 1, "the error is printed once")


def files_first(c: t.Checks, model: str, work: str) -> None:
    """Issue 18 item 6: a missing or non-JSONL input, an output folder that does not exist, and
    an output with results in it without --resume / --overwrite fail before the weights load."""
    inp = os.path.join(work, "numbers.jsonl")
    write(inp, NUMBERS)
    held = os.path.join(work, "held.jsonl")
    write(held, ['{"id": "old", "choices": []}'])
    not_jsonl = os.path.join(work, "not.jsonl")
    with open(not_jsonl, "w") as f:
        f.write('\n[{"id": "a", "prompt": "x"}]\n')
    out = os.path.join(work, "files-first.jsonl")
    for label, inp_, out_, extra, code in [
            ("a missing input", os.path.join(work, "no-such.jsonl"), out, ["--overwrite"],
             "QM600"),
            ("an input that is not JSONL", not_jsonl, out, ["--overwrite"], "QM600"),
            ("an output in a missing folder", inp, os.path.join(work, "no-dir", "o.jsonl"), [],
             "QM601"),
            ("an output with results, no --resume/--overwrite", inp, held, [], "QM601")]:
        proc = subprocess.run([t.qmpi_binary(), "batch", "--model", model, "--input", inp_,
                               "--output", out_, *extra], capture_output=True, text=True,
                              timeout=60)
        c.check(proc.returncode != 0 and code in proc.stderr and
                "MiB of weights" not in proc.stderr,
                f"{label}: {code} before the weights load, exit {proc.returncode}"
                + ("" if code in proc.stderr else "\n" + proc.stderr[-600:]))
    c.check(open(held).read() == '{"id": "old", "choices": []}\n', "the held output is intact")


def limits(c: t.Checks, model: str, work: str) -> None:
    """Negative limits are refused at once, the value shown as given (-1 sequences was an
    allocation of 18 EB reported as weights-do-not-fit)."""
    inp = os.path.join(work, "numbers.jsonl")
    for option, value in [("--max-num-seqs", "-1"), ("--kv-blocks", "-1"),
                          ("--max-model-len", "-1"), ("--max-batched-tokens", "0"),
                          ("--default-max-tokens", "-3")]:
        proc = subprocess.run([t.qmpi_binary(), "batch", "--model", model, "--input", inp,
                               "--output", os.path.join(work, "limits.jsonl"), "--overwrite",
                               option, value], capture_output=True, text=True, timeout=60)
        c.check(proc.returncode == 2 and "QM100" in proc.stderr and
                f"got {value}\n" in proc.stderr and "MiB of weights" not in proc.stderr,
                f"{option} {value}: refused with QM100 before loading "
                f"({proc.stderr.splitlines()[0] if proc.stderr else ''})")


def no_tokenizer(c: t.Checks, model: str, work: str) -> None:
    """A model without tokenizer.json: batch and a text prompt of run stop with QM300 before
    the weights load, and the fix names no option run does not have."""
    bare = os.path.join(work, "no-tokenizer")
    shutil.rmtree(bare, ignore_errors=True)
    os.makedirs(bare)
    for name in os.listdir(model):
        if name != "tokenizer.json":
            os.symlink(os.path.join(model, name), os.path.join(bare, name))
    inp = os.path.join(work, "numbers.jsonl")
    for args in (["batch", "--input", inp, "--output", os.path.join(work, "bare.jsonl"),
                  "--overwrite"], ["run", "--prompt", "hi"]):
        proc = subprocess.run([t.qmpi_binary(), *args, "--model", bare], capture_output=True,
                              text=True, timeout=60)
        c.check(proc.returncode != 0 and "QM300" in proc.stderr and
                "MiB of weights" not in proc.stderr and "--tokenizer" not in proc.stderr,
                f"{args[0]} without tokenizer.json: QM300 before the weights load, exit "
                f"{proc.returncode}")


def body(c: t.Checks) -> None:
    model = t.make_model()
    work = t.test_tmp("batch_hostile")
    for part in (numbers, ids, same_file, files_first, limits, no_tokenizer):
        c.guard(part.__name__, part, c, model, work)


if __name__ == "__main__":
    t.main("batch_hostile", body)
