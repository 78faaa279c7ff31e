#!/usr/bin/python3
"""A batch job killed at random moments and resumed each time loses nothing and repeats
nothing. Under `mpirun -np 2 --pp 2`, each run starts with --resume and rank 0 gets SIGKILL at
a random point (one run gets SIGTERM instead and must drain, print the --resume command and exit
143; another is launch/mpirun/batch.sh stopped by a Ctrl-C, as a terminal sends it to the whole
process group, which must drain the same way through the script and exit 130); a last run
finishes the job. The final file has exactly one valid line per input id, no torn line, and the same
results as an uninterrupted run; the HDF5 file opens and agrees with it.
"""

import json
import os
import random
import signal
import subprocess
import time

import h5py

import testlib

KILLS = 6
REQUESTS = 200
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()


def make_input(path: str) -> None:
    rng = random.Random(11)
    with open(path, "w") as f:
        for i in range(REQUESTS):
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 40)))
            line = {"id": f"r{i}", "prompt": text, "max_tokens": rng.randint(6, 16),
                    "ignore_eos": True}
            if i % 3 == 0:
                line.update(temperature=0.7, seed=i)
            else:
                line.update(temperature=0)
            if i % 10 == 0:
                line = {"custom_id": f"r{i}", "method": "POST", "url": "/v1/chat/completions",
                        "body": {"messages": [{"role": "user", "content": text}],
                                 "max_tokens": 8, "temperature": 0, "n": 2}}
            f.write(json.dumps(line) + "\n")


def rank0_pid(mpirun_pid: int):
    """The pid of world rank 0 among mpirun's children, once it has started."""
    try:
        children = subprocess.run(["pgrep", "-P", str(mpirun_pid)], capture_output=True,
                                  text=True).stdout.split()
    except FileNotFoundError:
        raise testlib.TestFailure("pgrep is not installed")
    for pid in children:
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if b"OMPI_COMM_WORLD_RANK=0" in env or b"PMIX_RANK=0" in env:
            return int(pid)
    return None


def job_args(model, inp, out, h5):
    return [testlib.mpirun_binary(), "--oversubscribe", "-np", "2", "-x", "OMP_NUM_THREADS",
            testlib.qmpi_binary(), "batch", "--model", model, "--pp", "2", "--input", inp,
            "--output", out, "--output-h5", h5, "--token-ids", "--max-model-len", "256",
            "--max-num-seqs", "8", "--fsync-interval", "0.5"]


def interrupted_run(c: testlib.Checks, args, delay: float, sig: int) -> None:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.Popen(args + ["--resume"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + delay
    pid = None
    while time.monotonic() < deadline and proc.poll() is None:
        pid = pid or rank0_pid(proc.pid)
        time.sleep(0.05)
    pid = pid or rank0_pid(proc.pid)
    name = signal.Signals(sig).name
    if proc.poll() is None and pid:
        os.kill(pid, sig)
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise testlib.TestFailure(f"the job did not end within 120 s of {name}:\n{err[-3000:]}")
    tail = [l for l in err.splitlines() if l.startswith("batch:")]
    print(f"  {name} after {delay:.1f}s: exit {proc.returncode}; "
          f"{tail[-1] if tail else '(no summary)'}", flush=True)
    if sig == signal.SIGTERM:
        c.check(proc.returncode == 143 and any("stopped early" in l or " ok, " in l for l in tail)
                and " --resume\n" in err,
                f"SIGTERM to rank 0 drains, prints the summary and the --resume command, and "
                f"exits 143 as a shell reports SIGTERM (exit {proc.returncode})")


def ctrl_c_run(c: testlib.Checks, model, inp, out, h5, delay: float) -> None:
    """launch/mpirun/batch.sh in a session of its own, SIGINT to its whole process group."""
    env = dict(os.environ, MODEL=model, INPUT=inp, OUTPUT=out, TP="1", PP="2", BACKEND="cpu",
               QMPI_BIN=testlib.qmpi_binary(), MPIRUN=testlib.mpirun_binary(),
               MPIRUN_ARGS="--oversubscribe", OMP_NUM_THREADS="1")
    env.pop("QMPI_STATUS_FILE", None)
    script = os.path.join(testlib.SOURCE_DIR, "launch", "mpirun", "batch.sh")
    proc = subprocess.Popen(["bash", script] + job_args(model, inp, out, h5)[16:],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    time.sleep(delay)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
    try:
        log, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        log, _ = proc.communicate()
        raise testlib.TestFailure(f"the job did not end within 120 s of Ctrl-C:\n{log[-3000:]}")
    tail = [l for l in log.splitlines() if l.startswith("batch:")]
    print(f"  Ctrl-C of launch/mpirun/batch.sh after {delay:.1f}s: exit {proc.returncode}; "
          f"{tail[-1] if tail else '(no summary)'}", flush=True)
    c.check(proc.returncode == 130 and "passed to rank 0" in log and
            any("stopped early" in l or " ok, " in l for l in tail) and " --resume\n" in log and
            "QM409" not in log,
            f"Ctrl-C of launch/mpirun/batch.sh: rank 0 drains, prints the summary and the "
            f"--resume command, the job exits 130 (exit {proc.returncode})")


def read_results(path: str):
    """The whole lines of `path`, how many of them do not parse, and whether its last line is
    torn. A job killed before it created the file (a loaded machine may take the whole delay to
    start it) wrote nothing: no lines, which is a valid state to resume from."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return [], 0, False
    lines = raw.split(b"\n")
    torn = lines[-1] != b""
    parsed = []
    bad = 0
    for line in lines[:-1]:
        try:
            parsed.append(json.loads(line))
        except ValueError:
            bad += 1
    return parsed, bad, torn


def body(c: testlib.Checks) -> None:
    model = testlib.make_model("tiny", seed=31)
    work = testlib.test_tmp("batch_resume")
    inp = os.path.join(work, "in.jsonl")
    make_input(inp)
    out, h5 = os.path.join(work, "out.jsonl"), os.path.join(work, "out.h5")
    ref, ref_h5 = os.path.join(work, "ref.jsonl"), os.path.join(work, "ref.h5")
    for p in (out, h5, h5 + ".broken", ref, ref_h5):
        if os.path.exists(p):
            os.remove(p)

    start = time.monotonic()
    testlib.run(job_args(model, inp, ref, ref_h5), timeout=240,
                env=dict(os.environ, OMP_NUM_THREADS="1"))
    full_s = time.monotonic() - start
    reference = {r["custom_id"]: r for r in read_results(ref)[0]}
    c.check(len(reference) == REQUESTS, f"uninterrupted run: {len(reference)} results")

    rng = random.Random(int(os.environ.get("QMPI_TEST_SEED", "7")))
    for k in range(KILLS):
        delay = rng.uniform(1.0, 1.0 + full_s * 0.3)
        if k == 4:
            ctrl_c_run(c, model, inp, out, h5, delay + 2.0)  # the script starts mpirun first
        else:
            sig = signal.SIGTERM if k == 2 else signal.SIGKILL
            interrupted_run(c, job_args(model, inp, out, h5), delay, sig)
        results, bad, torn = read_results(out)
        c.check(bad == 0, f"after run {k + 1}: {len(results)} whole lines, {bad} unreadable, "
                          f"torn tail: {torn}")
        if k == 1 and results:
            # As if the kill had come in the middle of a write: the next run must cut it off.
            with open(out, "ab") as f:
                f.write(json.dumps(results[-1]).encode()[:40])
    testlib.run(job_args(model, inp, out, h5) + ["--resume"], timeout=240,
                env=dict(os.environ, OMP_NUM_THREADS="1"))

    results, bad, torn = read_results(out)
    ids = [r["custom_id"] for r in results]
    c.check(not torn and bad == 0, "final file: no torn or unreadable line")
    c.check(len(ids) == REQUESTS and set(ids) == set(reference),
            f"final file: {len(ids)} lines, {len(set(ids))} distinct ids (want {REQUESTS})")
    differ = [r["custom_id"] for r in results
              if r["response"]["body"]["choices"] !=
              reference[r["custom_id"]]["response"]["body"]["choices"]]
    c.check(not differ, f"every result equals the uninterrupted run's ({len(differ)} differ)")

    by_id = {r["custom_id"]: r for r in results}
    with h5py.File(h5, "r") as f:
        cids = [x.decode() for x in f["custom_id"][:]]
        choice, start_, count = f["choice"][:], f["token_start"][:], f["token_count"][:]
        toks = f["token_ids"][:]
        keys = list(zip(cids, choice.tolist()))
        agree = all(toks[start_[i]:start_[i] + count[i]].tolist() ==
                    by_id[cid]["response"]["body"]["choices"][choice[i]]["token_ids"]
                    for i, cid in enumerate(cids))
        c.check(len(keys) == len(set(keys)) and set(cids) <= set(by_id) and agree,
                f"HDF5: {len(keys)} rows, no duplicates, all agree with the JSONL "
                f"({len(set(by_id) - set(cids))} results of killed runs not in it)")


if __name__ == "__main__":
    testlib.main("batch_resume", body)
