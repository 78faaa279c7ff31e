#!/usr/bin/python3
"""A replica killed outright (SIGKILL) under `--dp 2 --tp 3` with the launcher told to recover
(OMPI_MCA_orte_enable_recovery=1): the other replica goes on.

serve: four ZeroMQ streams and two HTTP completions run (three per replica) when a rank of
replica 1 is killed. The requests on replica 1 end with a QM402 error naming replica 1 (not
silence), those on replica 0 finish;
afterwards new requests get the same tokens as before the kill; /metrics, /health and the
ZeroMQ stats show replica 1 down with per-replica counters; SIGTERM ends the job with exit 0
and no rank is left.

batch: a rank of replica 1 is killed once the first results are out; every request still gets
exactly one result line, with the tokens of a 1x1 run (the lost ones were re-queued).
"""

import json
import os
import signal
import subprocess
import threading
import time

import serve_zmq_http as sz
import testlib as t

TIMEOUT = 5
RECOVER = {"OMPI_MCA_orte_enable_recovery": "1"}
PROBE = {"prompt": "the old bridge and the birds", "max_tokens": 10, "temperature": 0}


def alive(pids) -> list:
    out = []
    for p in pids:
        try:
            if open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
                out.append(p)
        except OSError:
            pass
    return out


def check_no_rank_left(c: t.Checks, label: str, pids) -> None:
    grace = time.monotonic() + 15
    while alive(pids) and time.monotonic() < grace:
        time.sleep(0.2)
    c.check(not alive(pids), f"{label}: no rank process is left running ({alive(pids)})")


def probe_tokens(server: sz.Server, rid: str) -> list:
    final = server.call(dict(PROBE, v=1, type="generate", id=rid), timeout=60)[-1]
    if final["type"] != "final":
        raise t.TestFailure(f"{rid}: {json.dumps(final)[:300]}")
    return final["choices"][0]["token_ids"]


def serve_part(c: t.Checks, model: str) -> None:
    os.environ.update(RECOVER)
    try:
        server = sz.Server(model, tp=3, pp=1, dp=2,
                           extra=["--comm-timeout", str(TIMEOUT), "--max-num-seqs", "4",
                                  "--served-model-name", "tiny"])
    finally:
        for k in RECOVER:
            del os.environ[k]
    pids = {}
    try:
        server.wait_ready(timeout=120)
        pids = t.rank_pids(server.proc.pid)
        c.check(len(pids) == 6, f"serve: found the 6 rank processes ({sorted(pids)})")
        before = [probe_tokens(server, f"p{i}") for i in range(2)]
        socks = [sz.streaming_socket(server, f"s{i}") for i in range(4)]
        http = {}

        def http_call(i):
            body = dict(sz.LONG, stream=False, model="tiny")
            try:
                http[i] = sz.http_request(server.http_port, "POST", "/v1/completions", body,
                                          timeout=TIMEOUT * 4 + 60)[::2]
            except Exception as e:  # noqa: BLE001 (silence is what is checked)
                http[i] = (None, str(e))

        threads = [threading.Thread(target=http_call, args=(i,)) for i in range(2)]
        for th in threads:
            th.start()
        server.wait_stats(lambda st: st["running"] == 6)
        os.kill(pids[4], signal.SIGKILL)  # replica 1, TP rank 1
        ends = []
        for sock in socks:
            try:
                ends.append(sz.read_replies(sock, TIMEOUT * 4 + 60)[-1])
            except t.TestFailure as e:
                ends.append({"type": "silence", "message": str(e)})
            sock.close()
        for th in threads:
            th.join()
        lost = [e for e in ends if e["type"] == "error" and e.get("code") == "QM402" and
                "replica 1" in e.get("message", "")]
        done = [e for e in ends if e["type"] == "final"]
        http_lost = [b for st, b in http.values() if st not in (None, 200) and "QM402" in b and
                     "replica 1" in b]
        http_done = [b for st, b in http.values() if st == 200]
        c.check(len(lost) + len(http_lost) >= 1 and len(lost) + len(done) == 4 and
                len(http_lost) + len(http_done) == 2,
                f"serve: requests on replica 1 ended with QM402 naming it ({len(lost)} ZeroMQ "
                f"streams, {len(http_lost)} HTTP), the others finished, none silent: "
                f"{json.dumps(lost[0] if lost else ends)[:200]} {str(http)[:200]}")
        after = [probe_tokens(server, f"q{i}") for i in range(4)]
        c.check(all(a == before[0] for a in after + before),
                f"serve: after the loss 4 new requests get the tokens of before ({after[0]})")

        url = f"http://127.0.0.1:{server.http_port}"
        metrics = t.run(["curl", "-s", f"{url}/metrics"]).stdout
        up = [sz.metric(metrics, f'qmpi_replica_up{{replica="{r}"}}') for r in range(2)]
        gen = [sz.metric(metrics, f'qmpi_replica_generation_tokens_total{{replica="{r}"}}')
               for r in range(2)]
        c.check(up == [1, 0] and gen[0] > 0 and gen[1] > 0,
                f"/metrics: replica up {up}, tokens generated per replica {gen}")
        health = json.loads(t.run(["curl", "-s", f"{url}/health"]).stdout)
        states = [r["state"] for r in health.get("replicas", [])]
        c.check(health["status"] == "ready" and states == ["up", "down"] and
                "replica 1" in health["replicas"][1].get("reason", ""),
                f"/health: {json.dumps(health)[:300]}")
        stats = server.stats()
        reps = stats.get("replicas", [])
        c.check(len(reps) == 2 and reps[1]["state"] == "down" and reps[0]["state"] == "up" and
                reps[0]["running"] == 0 and reps[0]["generated"] > 0,
                f"ZeroMQ stats: {json.dumps(reps)[:300]}")
        rc = server.stop()
        c.check(rc == 0, f"serve: SIGTERM ended the job with exit {rc}")
        log = server.log_text()
        c.check("replica 1 lost" in log, "serve: the log names the lost replica")
    finally:
        server.kill()
    check_no_rank_left(c, "serve", pids.values())


def batch_part(c: t.Checks, model: str) -> None:
    reqs = sz.make_requests(48, "b", 31)
    for r in reqs:
        r["max_tokens"] = 40
    d = t.test_tmp("dp_survival")
    inp, out, ref_out = (os.path.join(d, n) for n in ("in.jsonl", "out.jsonl", "ref.jsonl"))
    with open(inp, "w") as f:
        for r in reqs:
            f.write(json.dumps({k: v for k, v in r.items() if k != "stream"}) + "\n")
    common = ["batch", "--model", model, "--input", inp, "--overwrite", "--token-ids",
              "--max-model-len", str(sz.MAX_MODEL_LEN)] + sz.EXACT_KV
    t.qmpi(common + ["--output", ref_out], timeout=180)

    cmd = [t.mpirun_binary(), "--oversubscribe", "-np", "6", "-x", "OMP_NUM_THREADS",
           t.qmpi_binary()] + common + ["--output", out, "--dp", "2", "--tp", "3", "--comm-timeout",
                                        str(TIMEOUT), "--max-num-seqs", "4"]
    env = dict(os.environ, OMP_NUM_THREADS="1", **RECOVER)
    if os.path.exists(out):
        os.remove(out)  # the first result line of this run is the signal to kill
    log_path = os.path.join(d, "batch.log")
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        pids = {}
        try:
            deadline = time.monotonic() + 150
            while time.monotonic() < deadline and proc.poll() is None:
                if os.path.exists(out) and os.path.getsize(out) > 0:
                    break
                time.sleep(0.05)
            while time.monotonic() < deadline and proc.poll() is None and len(pids) < 6:
                pids = t.rank_pids(proc.pid)
            killed = proc.poll() is None and 4 in pids
            if killed:
                os.kill(pids[4], signal.SIGKILL)
            rc = proc.wait(timeout=180)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    text = open(log_path, errors="replace").read()
    c.check(killed and rc == 0 and "replica 1 lost" in text,
            f"batch: a rank of replica 1 killed mid-run, the job went on and exited {rc}"
            + ("" if rc == 0 else "\n" + text[-2000:]))

    def bodies(path):
        got = {}
        with open(path) as f:
            for line in f:
                j = json.loads(line)
                got.setdefault(j["custom_id"], []).append(
                    None if j["error"] else j["response"]["body"]["choices"])
        return got

    ref, got = bodies(ref_out), bodies(out)
    bad = [k for k in ref if got.get(k) != ref[k]]
    c.check(len(got) == len(ref) == 48 and not bad,
            f"batch: every one of the {len(ref)} ids has one result line with the 1x1 tokens "
            f"({len(bad)} differ: {bad[:5]})")
    check_no_rank_left(c, "batch", pids.values())


def body(c: t.Checks) -> None:
    model = t.make_model()
    serve_part(c, model)
    batch_part(c, model)


t.main("dp_replica_survival", body)
