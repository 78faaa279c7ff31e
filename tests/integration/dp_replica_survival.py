#!/usr/bin/python3
"""A replica killed outright (SIGKILL) under `--dp 2 --tp 3` with the launcher told to recover
(OMPI_MCA_orte_enable_recovery=1): the other replica goes on, and the job's exit status still
says that a replica was lost.

serve: four ZeroMQ streams and two HTTP completions run (three per replica) when a rank of
replica 1 is killed. The requests on replica 1 end with a QM402 error naming replica 1 (not
silence), those on replica 0 finish;
afterwards new requests get the same tokens as before the kill; /metrics, /health and the
ZeroMQ stats show replica 1 down with per-replica counters; SIGTERM ends the job (mpirun exits
0, as it does under recovery) with rank 0's exit status 5 (QM414) in QMPI_STATUS_FILE, and no
rank is left.

batch, through launch/mpirun/batch.sh: a clean --dp 2 run exits 0; in a --dp 2 --tp 3 run a rank
of replica 1 is killed once the first results are out, every request still gets exactly one
result line with the clean run's tokens (the lost ones were re-queued), and the script exits 5
with a line saying the job failed although mpirun exited 0.
"""

import json
import os
import signal
import subprocess
import threading
import time

import servelib as sz
import testlib as t

TIMEOUT = 5
RECOVER = {"OMPI_MCA_orte_enable_recovery": "1"}
PROBE = {"prompt": "the old bridge and the birds", "max_tokens": 10, "temperature": 0}



def probe_tokens(server: sz.Server, rid: str) -> list:
    final = server.call(dict(PROBE, v=1, type="generate", id=rid), timeout=60)[-1]
    if final["type"] != "final":
        raise t.TestFailure(f"{rid}: {json.dumps(final)[:300]}")
    return final["choices"][0]["token_ids"]


def serve_part(c: t.Checks, model: str) -> None:
    status_file = os.path.join(t.test_tmp("dp_survival"), "serve.status")
    if os.path.exists(status_file):
        os.remove(status_file)
    env = dict(RECOVER, QMPI_STATUS_FILE=status_file)
    os.environ.update(env)
    try:
        server = sz.Server(model, tp=3, pp=1, dp=2,
                           extra=["--comm-timeout", str(TIMEOUT), "--max-num-seqs", "4",
                                  "--served-model-name", "tiny"])
    finally:
        for k in env:
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
        status = open(status_file).read().strip() if os.path.exists(status_file) else None
        log = server.log_text()
        c.check(rc == 0 and status == "5" and "QM414" in log,
                f"serve: SIGTERM ended the job; mpirun exited {rc}, rank 0 left exit status "
                f"{status} (QM414 replica-lost) for the launch scripts")
        c.check("replica 1 lost" in log, "serve: the log names the lost replica")
    finally:
        server.kill()
    t.check_no_rank_left(c, "serve", pids.values())


def launch_batch(model: str, inp: str, out: str, log_path: str, dp: int, tp: int):
    """launch/mpirun/batch.sh started in the background; its output goes to log_path."""
    env = dict(os.environ, MODEL=model, INPUT=inp, OUTPUT=out, RESUME="0", DP=str(dp),
               TP=str(tp), PP="1", BACKEND="cpu", QMPI_BIN=t.qmpi_binary(),
               MPIRUN=t.mpirun_binary(), MPIRUN_ARGS="--oversubscribe", OMP_NUM_THREADS="1")
    env.pop("QMPI_STATUS_FILE", None)
    script = os.path.join(t.SOURCE_DIR, "launch", "mpirun", "batch.sh")
    args = ["--overwrite", "--token-ids", "--max-model-len", str(sz.MAX_MODEL_LEN),
            "--comm-timeout", str(TIMEOUT), "--max-num-seqs", "4"] + t.EXACT_KV
    with open(log_path, "w") as log:
        return subprocess.Popen(["bash", script] + args, stdout=log, stderr=subprocess.STDOUT,
                                env=env)


def batch_part(c: t.Checks, model: str) -> None:
    reqs = sz.make_requests(48, "b", 31)
    for r in reqs:
        r["max_tokens"] = 40
    d = t.test_tmp("dp_survival")
    inp, out, ref_out = (os.path.join(d, n) for n in ("in.jsonl", "out.jsonl", "ref.jsonl"))
    with open(inp, "w") as f:
        for r in reqs:
            f.write(json.dumps({k: v for k, v in r.items() if k != "stream"}) + "\n")

    ref_log = os.path.join(d, "batch-clean.log")
    proc = launch_batch(model, inp, ref_out, ref_log, dp=2, tp=1)
    rc = proc.wait(timeout=240)
    text = open(ref_log, errors="replace").read()
    c.check(rc == 0, f"batch: a clean --dp 2 run through launch/mpirun/batch.sh exited {rc}"
            + ("" if rc == 0 else "\n" + text[-2000:]))

    if os.path.exists(out):
        os.remove(out)  # the first result line of this run is the signal to kill
    log_path = os.path.join(d, "batch.log")
    proc = launch_batch(model, inp, out, log_path, dp=2, tp=3)
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
    c.check(killed and rc == 5 and "replica 1 lost" in text and "QM414" in text and
            "the job failed: rank 0 exited 5 (mpirun: 0)" in text,
            f"batch: a rank of replica 1 killed mid-run, the job went on and batch.sh exited {rc} "
            f"with a line saying why" + ("" if rc == 5 else "\n" + text[-2000:]))

    def bodies(path):
        """{id: [choices or None per result line]}; none when the job ended before it created
        the file."""
        got = {}
        if not os.path.exists(path):
            return got
        with open(path) as f:
            for line in f:
                j = json.loads(line)
                got.setdefault(j["custom_id"], []).append(
                    None if j["error"] else j["response"]["body"]["choices"])
        return got

    ref, got = bodies(ref_out), bodies(out)
    bad = [k for k in ref if got.get(k) != ref[k]]
    c.check(len(got) == len(ref) == 48 and not bad,
            f"batch: every one of the {len(ref)} ids has one result line with the clean run's "
            f"tokens ({len(bad)} differ: {bad[:5]})")
    t.check_no_rank_left(c, "batch", pids.values())


def body(c: t.Checks) -> None:
    model = t.make_model()
    serve_part(c, model)
    batch_part(c, model)


t.main("dp_replica_survival", body)
