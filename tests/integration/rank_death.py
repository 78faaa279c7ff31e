"""A rank killed (SIGKILL) under a plain mpirun, which then ends the whole job.

run: `qmpi run` on 6 ranks; mpirun exits non-zero well within --comm-timeout and the output
names the dead rank. No rank is left running.

serve: `qmpi serve --tp 2` with a ZeroMQ stream and an HTTP (SSE) stream in flight when rank 1
is killed. mpirun sends every other rank SIGTERM and SIGKILL a second later; in that second rank
0 answers both streams with QM403 naming the rank it was waiting for (not silence, and long
before --comm-timeout), and the job exits non-zero with no rank left.
"""

import json
import os
import signal
import subprocess
import threading
import time

import servelib as sz
import testlib as t

LONG_TOKENS = 2000  # streams still running, on a fast host too, when the rank is killed


def run_part(c: t.Checks, model: str) -> None:
    timeout = 20
    victim = 3
    cmd = [t.mpirun_binary(), "--oversubscribe", "-np", "6", "-x", "OMP_NUM_THREADS",
           t.qmpi_binary(), "run", "--model", model, "--ids", "1,2,3", "--max-tokens", "3000",
           "--max-model-len", "4000", "--ignore-eos", "--temperature", "0", "--tp", "2", "--pp",
           "3", "--comm-timeout", str(timeout)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, OMP_NUM_THREADS="1"))
    pids = {}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(pids) < 6:
        time.sleep(0.5)
        pids = t.rank_pids(proc.pid)
    c.check(len(pids) == 6, f"run: found the 6 rank processes ({sorted(pids)})")
    time.sleep(3)  # let it load and start generating
    c.check(proc.poll() is None, "run: the job is still running before the kill")
    killed_at = time.monotonic()
    if victim in pids:
        os.kill(pids[victim], signal.SIGKILL)
    try:
        out, _ = proc.communicate(timeout=timeout + 30)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        c.check(False, "run: the job hung after a rank was killed")
    took = time.monotonic() - killed_at
    print(out[-2500:])
    c.check(proc.returncode != 0, f"run: mpirun exited non-zero ({proc.returncode})")
    c.check(took < timeout + 10, f"run: the job stopped {took:.1f}s after the kill (timeout {timeout}s)")
    c.check(f"rank {victim}" in out, f"run: the output names rank {victim}")
    t.check_no_rank_left(c, "run", pids.values(), grace=10)


def serve_part(c: t.Checks, model: str) -> None:
    timeout = 60  # far beyond the answer's deadline: the watchdog is not what answers
    server = sz.Server(model, tp=2, pp=1, max_model_len=2048,
                       extra=["--comm-timeout", str(timeout), "--max-num-seqs", "4"])
    pids = {}
    try:
        server.wait_ready(timeout=120)
        pids = t.rank_pids(server.proc.pid)
        c.check(len(pids) == 2, f"serve: found the 2 rank processes ({sorted(pids)})")
        sock = sz.streaming_socket(server, "zmq-victim", max_tokens=LONG_TOKENS)
        http = {}

        def http_stream():
            body = dict(sz.LONG, max_tokens=LONG_TOKENS)
            try:
                status, _, text = sz.http_request(server.http_port, "POST", "/v1/completions",
                                                  body, timeout=timeout)
                http["events"] = sz.sse_events(text)
                http["status"] = status
            except Exception as e:  # noqa: BLE001 (silence is what is checked)
                http["failure"] = str(e)

        th = threading.Thread(target=http_stream)
        th.start()
        server.wait_stats(lambda st: st["running"] == 2)
        os.kill(pids[1], signal.SIGKILL)
        killed_at = time.monotonic()
        try:
            last = sz.read_replies(sock, 15)[-1]
        except t.TestFailure as e:
            last = {"type": "silence", "message": str(e)}
        took = time.monotonic() - killed_at
        sock.close()
        c.check(last["type"] == "error" and last.get("code") == "QM403" and
                "rank 1" in last.get("message", "") and took < 5,
                f"serve: the ZeroMQ stream ended with an error frame {took:.1f}s after the kill: "
                f"{json.dumps(last)[:400]}")
        th.join(timeout=20)
        tail = http.get("events", [])[-2:]
        c.check(any("QM403" in e and "rank 1" in e for e in tail),
                f"serve: the HTTP stream ended with an SSE error naming rank 1: "
                f"{str(tail or http)[:400]}")
        try:
            rc = server.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            rc = None
        c.check(rc not in (None, 0), f"serve: the job ended with a non-zero exit ({rc})")
    finally:
        server.kill()
    t.check_no_rank_left(c, "serve", pids.values(), grace=10)


def body(c: t.Checks):
    model = t.make_model(dtype="bf16")
    run_part(c, model)
    serve_part(c, model)


t.main("rank_death", body)
