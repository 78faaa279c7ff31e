#!/usr/bin/python3
"""A replica that stops answering, under `qmpi serve --dp 2 --tp 3` (6 oversubscribed ranks) on
a plain mpirun (not told to recover from a lost rank, so the job cannot go on without it;
dp_replica_survival.py has the launcher that can).

What is checked is that the failure is loud and precise: a rank of replica 1 is stopped
(SIGSTOP) while four streams run; within --comm-timeout every stream in flight ends with a QM402
error that names replica 1 (rank 0 notices first: the other ranks wait twice as long, so none of
their watchdogs ends the job before rank 0 has answered), the job exits non-zero instead of
hanging, and no rank is left running.
"""

import json
import os
import signal
import subprocess
import time

import servelib as sz
import testlib as t

TIMEOUT = 4


def body(c: t.Checks) -> None:
    model = t.make_model()
    server = sz.Server(model, tp=3, pp=1, dp=2,
                       extra=["--comm-timeout", str(TIMEOUT), "--max-num-seqs", "4"])
    pids = {}
    try:
        server.wait_ready(timeout=120)
        socks = [sz.streaming_socket(server, f"s{i}") for i in range(4)]
        pids = t.rank_pids(server.proc.pid)
        c.check(len(pids) == 6, f"found the 6 rank processes ({sorted(pids)})")
        os.kill(pids[4], signal.SIGSTOP)  # replica 1, TP rank 1
        stopped_at = time.monotonic()
        ends = []
        for i, sock in enumerate(socks):
            try:
                ends.append(sz.read_replies(sock, TIMEOUT + 30)[-1])
            except t.TestFailure as e:
                ends.append({"type": "silence", "message": str(e)})
            sock.close()
        took = time.monotonic() - stopped_at
        named = [e for e in ends if e["type"] == "error" and e.get("code") == "QM402" and
                 "replica 1" in e.get("message", "")]
        c.check(len(named) == 4,
                f"every stream in flight ended with QM402 naming replica 1, {took:.1f}s after "
                f"the stop: {json.dumps(ends[0])[:260]}")
        try:
            rc = server.proc.wait(timeout=TIMEOUT + 30)
        except subprocess.TimeoutExpired:
            rc = None
        c.check(rc not in (None, 0), f"the job ended with a non-zero exit ({rc}) instead of hanging")
    finally:
        for pid in pids.values():
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError:
                pass
        server.kill()
    t.check_no_rank_left(c, "serve", pids.values(), grace=10)


t.main("dp_replica_failure", body)
