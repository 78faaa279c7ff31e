"""`qmpi bench` through the scheduler (issue 27): its JSON line carries what bench/*.sh and
bench/plot.py read, one row per --batch entry (1 always first), the speculation fields with
--speculative-config, a shared --context prefix served by the prefix cache, --dp replicas under
mpirun; bad --batch lists are usage errors. Figures are only checked to be positive: timings
belong in bench/, not in a test."""

import json
import subprocess

import testlib as t

COMMON = ["--prompt-len", "8", "--gen-len", "4", "--repeats", "1", "--no-membw", "--json",
          "--threads", "1"]
SCRIPT_KEYS = ["tp", "pp", "threads", "prompt_len", "context", "kv_dtype", "gen_len", "batch",
               "prefill_tokens_per_s", "decode_tokens_per_s", "decode_step_ms",
               "comm_fraction_of_step", "weight_bytes_rank0", "membw_bytes_per_s",
               "decode_fraction_of_membw", "prefill_gflops"]


def bench_json(c: t.Checks, label: str, args, mpi_ranks: int = 0):
    if mpi_ranks:
        cmd = [t.mpirun_binary(), "--oversubscribe", "-np", str(mpi_ranks), t.qmpi_binary()]
    else:
        cmd = [t.qmpi_binary()]
    proc = c.guard(label, t.run, cmd + ["bench"] + [str(a) for a in args], timeout=180)
    if proc is None:
        return None
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    c.check(len(lines) == 1, f"{label}: one JSON line on stdout ({len(lines)})")
    return json.loads(lines[-1]) if lines else None


def body(c: t.Checks) -> None:
    model = t.make_model()
    j = bench_json(c, "batch 1,4", ["--model", model, "--batch", "4,1,4"] + COMMON)
    if j:
        missing = [k for k in SCRIPT_KEYS if k not in j]
        c.check(not missing, f"the keys the bench scripts read are there (missing: {missing})")
        rows = j.get("batches", [])
        c.check([r["batch"] for r in rows] == [1, 4], f"one row per batch, 1 first: {rows}")
        c.check(all(r["decode_tokens_per_s"] > 0 and r["step_ms"] > 0 and
                    r["prefill_tokens_per_s"] > 0 and r["preemptions"] == 0 for r in rows),
                "every row has positive rates and no preemption")
        c.check(j["batch"] == 4 and j.get("batch_tokens_per_s", 0) > 0 and
                j["batch_step_ms"] == rows[-1]["step_ms"],
                "batch_* fields are the largest batch's, as bench/plot.py reads them")
        c.check(j["decode_step_ms"] == rows[0]["step_ms"], "decode_step_ms is batch 1's step")

    s = bench_json(c, "speculation", ["--model", model, "--batch", "2", "--speculative-config",
                                      '{"method": "ngram", "num_speculative_tokens": 2}'] + COMMON)
    if s:
        keys = ["spec_tokens", "verify_step_ms", "plain_step_ms", "verify_vs_decode_step",
                "spec_upper_bound_tokens_per_s", "batch_verify_step_ms",
                "batch_verify_vs_batch_step"]
        c.check(all(k in s and s[k] > 0 for k in keys) and s["spec_tokens"] == 2,
                "--speculative-config: the verification fields gpu_check.sh reads")

    ctx = bench_json(c, "context", ["--model", model, "--context", "40"] + COMMON)
    if ctx:
        c.check(ctx["context"] == 40 and ctx["decode_tokens_per_s"] > 0,
                "--context 40: decode after a 32-token shared prefix")

    dp = bench_json(c, "dp 2", ["--model", model, "--dp", "2", "--batch", "4"] + COMMON,
                    mpi_ranks=2)
    if dp:
        c.check(dp.get("dp") == 2 and [r["batch"] for r in dp["batches"]] == [1, 4],
                "--dp 2 under mpirun: serve's replicas take the requests")

    p = subprocess.run([t.mpirun_binary(), "--oversubscribe", "-np", "2", t.qmpi_binary(), "bench",
                        "--model", model, "--dp", "2", "--speculative-config",
                        '{"method": "ngram", "num_speculative_tokens": 2}'] + COMMON,
                       capture_output=True, text=True, timeout=120)
    c.check(p.returncode == 2 and "QM100" in p.stderr and "--dp" in p.stderr,
            f"--speculative-config with --dp 2: a usage error (exit {p.returncode})")
    for bad in ["0", "1,x", ""]:
        p = subprocess.run([t.qmpi_binary(), "bench", "--model", model, "--batch", bad] + COMMON,
                           capture_output=True, text=True, timeout=60)
        c.check(p.returncode == 2 and "QM100" in p.stderr and "--batch" in p.stderr,
                f"--batch {bad!r}: a usage error naming --batch (exit {p.returncode})")


if __name__ == "__main__":
    t.main("bench_cli", body)
