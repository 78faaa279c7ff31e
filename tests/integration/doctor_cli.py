"""`qmpi doctor` through the real binary: it passes on this machine alone and under
`mpirun -np 6` with bandwidth numbers from its self-test; it passes on a good model folder (and
its sha256 manifest); and each kind of damage to a copy of that folder makes it FAIL with the
catalogue code and fix, naming the file or tensor, and the exit code of that failure."""

import json
import os
import shutil
import subprocess

import testlib as t

MIB = 1 << 20


def doctor(args, ranks=0, timeout=90, shell_prefix=None):
    """(exit code, stdout, stderr) of `qmpi doctor ARGS`, under mpirun when ranks > 0."""
    cmd = [t.qmpi_binary(), "doctor"] + [str(a) for a in args]
    if shell_prefix:  # e.g. a ulimit before exec
        cmd = ["bash", "-c", shell_prefix + ' && exec "$@"', "doctor"] + cmd
    if ranks:
        cmd = [t.mpirun_binary(), "--oversubscribe", "-np", str(ranks), "-x", "OMP_NUM_THREADS"] + cmd
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    return p.returncode, p.stdout, p.stderr


def show(out, err):
    print("--- stdout\n" + out[-5000:] + "\n--- stderr\n" + err[-3000:])


def fails(text):
    return [line for line in text.splitlines() if line.startswith("  FAIL")]


def check_passes(c, label, rc, out, err, ok_lines):
    good = c.check(rc == 0, f"{label}: exit 0 (got {rc})")
    good &= c.check(not fails(out), f"{label}: no FAIL line")
    for line in ok_lines:
        good &= c.check(any(l.startswith("  OK") and line in l for l in out.splitlines()),
                        f"{label}: OK line with {line!r}")
    if not good:
        show(out, err)


def check_fails(c, label, rc, out, err, code, name, words, exit_code):
    lines = [l for l in fails(out) if f"{code} {name}:" in l]
    good = c.check(rc == exit_code, f"{label}: exit {exit_code} (got {rc})")
    good &= c.check(bool(lines), f"{label}: a FAIL {code} {name} line")
    for w in words:
        good &= c.check(any(w in l for l in lines), f"{label}: the {code} line names {w!r}")
    # The advice follows the finding: its catalogue fix or a specific one.
    at = out.find(lines[0]) if lines else -1
    good &= c.check(at >= 0 and "        fix: " in out[at:at + len(lines[0]) + 400],
                    f"{label}: a fix line follows the {code} finding")
    if not good:
        show(out, err)


def check_selftest(c, label, report, groups):
    comm = report["comm"]
    seen = {(m["op"], m["group"]) for m in comm}
    c.check(len(seen) == groups, f"{label}: {groups} group/pair self-tests ({len(seen)})")
    sizes = sorted({m["bytes"] for m in comm})
    c.check(sizes == [8, MIB, 64 * MIB], f"{label}: sizes 8 B, 1 MiB, 64 MiB ({sizes})")
    c.check(all(m["correct"] for m in comm), f"{label}: every transfer delivered correct data")
    c.check(all(m["time_us"] > 0 and m["algbw_gbs"] > 0 and m["busbw_gbs"] > 0 for m in comm),
            f"{label}: every time, algbw and busbw is > 0")
    for m in comm:
        if m["bytes"] == 64 * MIB:
            print(f"    {m['op']:10s} {m['group']:48s} 64 MiB  algbw {m['algbw_gbs']:.2f} "
                  f"busbw {m['busbw_gbs']:.2f} GB/s")
        if m["bytes"] == 8:
            print(f"    {m['op']:10s} {m['group']:48s}    8 B  {m['time_us']:.1f} us")


def body(c: t.Checks):
    # This machine, alone: no GPU, no model; everything that applies passes.
    rc, out, err = doctor([])
    check_passes(c, "alone", rc, out, err,
                 ["MPI library: Open MPI", "world: 1 rank(s)", "/dev/shm", "open-file limit",
                  "CUDA backend", "single rank"])
    if "CUDA backend built" in out:  # with nvcc at build time the library it opens is checked too
        c.check("cuBLAS: libcublas.so." in out, "alone: the cuBLAS line")

    # Under mpirun -np 6: the default layout (--tp 6 on one host) and its self-test.
    rc, out, err = doctor([], ranks=6)
    check_passes(c, "mpirun -np 6", rc, out, err,
                 ["world: 6 rank(s) on 1 host(s)", "checking --tp 6 --pp 1",
                  "every TP group of --tp 6 --pp 1 is on one host",
                  "all-reduce on tp group 0 (world ranks 0-5) (host memory): correct at every size",
                  "send-recv on tp group 0 pair (world ranks 4 <-> 5)"])
    c.check("algbw GB/s" in out and out.count(" all-reduce ") >= 3, "mpirun -np 6: the table")

    model = t.make_model(preset="tiny", seed=1, dtype="bf16", shards=3)
    work = t.test_tmp("doctor")
    manifest = os.path.join(work, "SHA256SUMS")
    files = sorted(f for f in os.listdir(model) if f.endswith((".safetensors", ".json")))
    with open(manifest, "w") as f:
        subprocess.run(["sha256sum"] + files, cwd=model, stdout=f, check=True)

    # A good model under its real layout, as JSON, with the sha256 manifest.
    rc, out, err = doctor(["--model", model, "--tp", 2, "--pp", 3, "--verify-sha256", manifest,
                           "--json"], ranks=6)
    try:
        report = json.loads(out)
    except ValueError:
        show(out, err)
        raise t.TestFailure("doctor --json did not print one JSON document")
    c.check(rc == 0 and report["exit_code"] == 0 and report["summary"]["fail"] == 0,
            f"good model --tp 2 --pp 3: exit 0, no FAIL (rc {rc}, {report['summary']})")
    msgs = [f["message"] for f in report["findings"] if f["status"] == "OK"]
    for words in ("all 74 tensors config.json implies are present", "weights: 3 shard(s)",
                  "tokenizer.json", f"sha256: all {len(files)} file(s)",
                  "memory for --tp 2 --pp 3: the biggest rank",
                  "--tp 2 --pp 3 can split the model"):
        c.check(any(words in m for m in msgs), f"good model: OK finding with {words!r}")
    # 3 TP groups and 2 stage boundaries x 2 TP ranks.
    check_selftest(c, "good model --tp 2 --pp 3", report, groups=3 + 4)

    rc, out, err = doctor(["--model", model, "--comm-sizes", "none"])
    check_passes(c, "good model alone", rc, out, err, ["tensors: all 74", "weights: 3 shard(s)"])

    # Two TP 3 replicas: the layout, memory and every replica's TP group checked and tested.
    rc, out, err = doctor(["--model", model, "--dp", 2, "--tp", 3, "--comm-sizes", "8"], ranks=6)
    check_passes(c, "good model --dp 2 --tp 3", rc, out, err,
                 ["--dp 2 --tp 3 --pp 1 can split the model",
                  "every TP group of --dp 2 --tp 3 --pp 1 is on one host",
                  "all-reduce on tp group 1 (world ranks 3-5) (host memory): correct"])
    c.check("checking --dp 2 --tp 3 --pp 1 on the" in out, "good model --dp 2 --tp 3: the header")

    def damaged(name, damage):
        path = os.path.join(work, name)
        shutil.rmtree(path, ignore_errors=True)
        shutil.copytree(model, path)
        damage(path)
        return path

    shard2 = "model-00002-of-00003.safetensors"
    shard3 = "model-00003-of-00003.safetensors"

    def truncate(path):
        p = os.path.join(path, shard2)
        os.truncate(p, os.path.getsize(p) - 4096)

    def wrong_hidden(path):
        p = os.path.join(path, "config.json")
        cfg = json.load(open(p))
        cfg["hidden_size"] = 240  # still divisible by the 12 heads: only the shapes disagree
        json.dump(cfg, open(p, "w"))

    def corrupt_byte(path):
        p = os.path.join(path, shard3)
        with open(p, "r+b") as f:
            f.seek(os.path.getsize(p) - 10)
            b = f.read(1)
            f.seek(-1, 1)
            f.write(bytes([b[0] ^ 0xFF]))

    cases = [
        ("truncated shard", truncate, [], "QM208", "shard-truncated",
         [shard2, "4096 missing"], 3),
        ("deleted shard", lambda p: os.remove(os.path.join(p, shard3)), [], "QM207",
         "shard-missing", [shard3, "is missing"], 3),
        ("wrong hidden_size", wrong_hidden, [], "QM210", "tensor-shape-mismatch",
         ["'model.embed_tokens.weight'", "[151936, 192] but config.json implies [151936, 240]"], 3),
        # A flipped byte inside tensor data: every header check passes, only the digest catches it.
        ("sha256 mismatch", corrupt_byte, ["--verify-sha256", manifest], "QM211",
         "checksum-mismatch", [shard3, "but the manifest says"], 3),
    ]
    for label, damage, extra, code, name, words, exit_code in cases:
        path = damaged(label.replace(" ", "_"), damage)
        rc, out, err = doctor(["--model", path, "--comm-sizes", "none"] + extra)
        check_fails(c, label, rc, out, err, code, name, words, exit_code)
        if label == "sha256 mismatch":
            c.check(len(fails(out)) == 1, f"{label}: the only FAIL ({len(fails(out))})")
    # All findings, not the first: a deleted shard and a broken config in one folder.
    path = damaged("two_problems", lambda p: (os.remove(os.path.join(p, shard3)), wrong_hidden(p)))
    rc, out, err = doctor(["--model", path, "--comm-sizes", "none"])
    codes = {code for code in ("QM207", "QM210") if any(code in l for l in fails(out))}
    c.check(codes == {"QM207", "QM210"}, f"two problems: both reported ({sorted(codes)})")

    # Host limits: a low open-file limit is a warning with the command that raises it.
    rc, out, err = doctor(["--comm-sizes", "none"], shell_prefix="ulimit -S -n 1024")
    warns = [l for l in out.splitlines() if l.startswith("  WARN") and "QM410 host-limits" in l]
    c.check(rc == 0 and bool(warns) and "open-file limit is 1024" in warns[0],
            f"ulimit -n 1024: WARN QM410 and still exit 0 (rc {rc})")
    c.check("fix: Raise it before launching: `ulimit -n" in out, "ulimit -n 1024: the fix line")

    # The wrong rank count for the layout under test.
    rc, out, err = doctor(["--model", model, "--tp", 2, "--pp", 3, "--comm-sizes", "8"], ranks=4)
    check_fails(c, "4 ranks for --tp 2 --pp 3", rc, out, err, "QM101", "world-size",
                ["4 ranks"], 2)


t.main("doctor_cli", body)
