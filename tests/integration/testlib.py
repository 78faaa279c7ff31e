"""Shared helpers for the Python integration tests (tests/CMakeLists.txt leaves this file out
of the integration-test glob).

Paths come from the environment ctest sets: QMPI (the binary), QMPI_SOURCE_DIR,
QMPI_BUILD_DIR, QMPI_TEST_TMP and MPIRUN. Commands run with a timeout and their output is
printed when they fail. Tiny models are made once and cached under QMPI_TEST_TMP/models,
keyed by their make-model options and remade when the qmpi binary changes.
"""

import contextlib
import fcntl
import functools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("QMPI_SOURCE_DIR") or os.path.dirname(os.path.dirname(_HERE))
sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "reference"))

# Ids below this are ordinary BPE tokens (151643 = <|endoftext|>, the first added token).
FIRST_SPECIAL_ID = 151643

# Tests that compare layouts (or serve with batch) token for token, or logits within 1e-5, keep
# float32 K/V: with the engine's bf16 default, the TP all-reduce's last-bit differences can cross
# a bf16 rounding and move a sampled token or a near-tie on the random tiny models. The KV
# cache's own rounding has tests of its own (kv_dtype_vs_reference passes bf16 and fp8).
# Tests of exact math also keep float32 activations: the engine's default, --dtype auto, rounds
# them to bf16 in the matmuls of bf16 weights (auto_dtype_vs_reference tests that bound). Every
# exact comparison goes through EXACT_KV or kv_args, so both switches live here.
EXACT_MATH = ["--dtype", "float32"]
EXACT_KV = EXACT_MATH + ["--kv-dtype", "f32"]


class TestFailure(Exception):
    pass


def _required_env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise TestFailure(f"environment variable {name} is not set (ctest sets it; "
                          f"set it by hand to run this test outside ctest)")
    return value


def qmpi_binary() -> str:
    path = _required_env("QMPI")
    if not os.access(path, os.X_OK):
        raise TestFailure(f"QMPI={path} is not an executable file; build the qmpi target")
    return path


@functools.cache
def cpu_dot_products() -> dict:
    """Which hardware dot products the build's CPU kernels use (`qmpi --version`'s second line;
    kernels/cpu/dot_products.h): {"bf16": bool, "int8": bool, "int16": bool}. Without them
    `--dtype auto` keeps the exact float32 path for int4 prefill tiles (bf16), GGUF blocks (int8)
    and the int4 decode GEMV (int16)."""
    out = run([qmpi_binary(), "--version"], timeout=30).stdout
    m = re.search(r"bf16 dot products (yes|no), int8 dot products (yes|no), "
                  r"int16 dot products (yes|no)", out)
    if not m:
        raise TestFailure(f"qmpi --version does not say its dot products:\n{out}")
    return {"bf16": m.group(1) == "yes", "int8": m.group(2) == "yes",
            "int16": m.group(3) == "yes"}


def mpirun_binary() -> str:
    return _required_env("MPIRUN")


def test_tmp(*parts: str) -> str:
    """A folder under QMPI_TEST_TMP (created on demand)."""
    path = os.path.join(_required_env("QMPI_TEST_TMP"), *parts)
    os.makedirs(path, exist_ok=True)
    return path


def _tail(text: str, limit: int = 6000) -> str:
    return text if len(text) <= limit else "...\n" + text[-limit:]


def run(cmd, timeout: float = 120, env=None) -> subprocess.CompletedProcess:
    """Runs cmd; on a non-zero exit or a timeout prints its output and raises TestFailure."""
    shown = " ".join(shlex.quote(str(c)) for c in cmd)
    if len(shown) > 400:  # long --ids lists
        shown = shown[:400] + " ..."
    start = time.monotonic()
    try:
        proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                              timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        print(f"TIMEOUT after {timeout:.0f}s: {shown}\n--- stdout\n{_tail(out)}\n--- stderr\n"
              f"{_tail(err)}", flush=True)
        raise TestFailure(f"timed out after {timeout:.0f}s: {shown}") from None
    elapsed = time.monotonic() - start
    if proc.returncode != 0:
        print(f"FAILED (exit {proc.returncode}, {elapsed:.1f}s): {shown}\n--- stdout\n"
              f"{_tail(proc.stdout)}\n--- stderr\n{_tail(proc.stderr)}", flush=True)
        raise TestFailure(f"exit {proc.returncode}: {shown}")
    print(f"  ran in {elapsed:5.1f}s: {shown}", flush=True)
    return proc


def qmpi(args, tp: int = 1, pp: int = 1, mpi: bool = False, timeout: float = 120):
    """Runs `qmpi ARGS --tp T --pp P`; under mpirun with T*P ranks when mpi or T*P > 1."""
    args = [str(a) for a in args]
    if tp * pp > 1 or mpi:
        args += ["--tp", str(tp), "--pp", str(pp)]
        cmd = [mpirun_binary(), "--oversubscribe", "-np", str(tp * pp), "-x", "OMP_NUM_THREADS",
               qmpi_binary()] + args
        # More ranks than cores: one OpenMP thread per rank unless the caller chose otherwise.
        env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
        return run(cmd, timeout=timeout, env=env)
    return run([qmpi_binary()] + args, timeout=timeout)


@contextlib.contextmanager
def locked(name: str):
    """Holds QMPI_TEST_TMP/.NAME.lock: single-rank tests run two at a time (ctest -j 2,
    tests/integration/schedule.txt), and two of them may need the same cached model at once;
    the second waits for the first to make it and then finds it made."""
    with open(os.path.join(test_tmp(), f".{name}.lock"), "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def _binary_identity() -> str:
    st = os.stat(qmpi_binary())
    return f"{st.st_size}:{st.st_mtime_ns}"


def make_model(preset: str = "tiny", seed: int = 1, dtype: str = "f32", shards: int = 1,
               untied: bool = False) -> str:
    """Folder of a model made by `qmpi make-model` with these options, reused when it exists."""
    key = f"{preset}-seed{seed}-{dtype}-shards{shards}-{'untied' if untied else 'tied'}"
    root = test_tmp("models")
    dest = os.path.join(root, key)
    stamp = os.path.join(dest, ".made-by")
    identity = _binary_identity()
    with locked("model-" + key):
        if os.path.exists(stamp) and open(stamp).read() == identity:
            return dest
        work = os.path.join(root, f".{key}.{os.getpid()}")
        shutil.rmtree(work, ignore_errors=True)
        args = ["make-model", "--out", work, "--preset", preset, "--seed", seed, "--dtype", dtype,
                "--shards", shards] + (["--untied"] if untied else [])
        qmpi(args, timeout=300)
        with open(os.path.join(work, ".made-by"), "w") as f:
            f.write(identity)
        shutil.rmtree(dest, ignore_errors=True)
        os.rename(work, dest)  # a killed run leaves a stray .KEY.PID folder, never half a model
    return dest


def rank_pids(ancestor_pid: int) -> dict:
    """{world rank: pid} of the rank processes started by an mpirun that is, or runs under,
    ancestor_pid (a launch script), from their environment."""
    parent, ranks = {}, {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                parent[int(pid)] = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
        except (OSError, ValueError):
            continue
        if b"OMPI_COMM_WORLD_RANK" in env:
            ranks[int(pid)] = int(env[b"OMPI_COMM_WORLD_RANK"])
    found = {}
    for pid, rank in ranks.items():
        p = parent.get(pid)
        while p is not None and p > 1 and p != ancestor_pid:
            p = parent.get(p)
        if p == ancestor_pid:
            found[rank] = pid
    return found


def alive(pids) -> list:
    """The pids that still run (neither gone nor a zombie waiting for its parent)."""
    out = []
    for p in pids:
        try:
            if open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
                out.append(p)
        except OSError:
            pass
    return out


def check_no_rank_left(c, label: str, pids, grace: float = 15) -> None:
    """Every one of pids ends within grace seconds (ranks already signalled take a moment)."""
    until = time.monotonic() + grace
    while alive(pids) and time.monotonic() < until:
        time.sleep(0.2)
    c.check(not alive(pids), f"{label}: no rank process is left running ({alive(pids)})")

def ids_arg(ids) -> str:
    return ",".join(str(int(i)) for i in ids)


def kv_args(kv_dtype) -> list:
    """Float32 activations and --kv-dtype kv_dtype, or EXACT_KV when None."""
    return EXACT_KV if kv_dtype is None else EXACT_MATH + ["--kv-dtype", kv_dtype]


def qmpi_logits(model: str, ids=None, text=None, mode=None, chunk=None, tp=1, pp=1, mpi=False,
                timeout: float = 180, kv_dtype=None) -> np.ndarray:
    """`qmpi logits` of every position as a float32 [T, vocab] array (EXACT_KV unless kv_dtype
    is given: the bounds against the reference (1e-4) or a single rank (1e-5) are about the
    math)."""
    out = os.path.join(test_tmp("logits"), f"{os.getpid()}-{time.monotonic_ns()}.npy")
    args = ["logits", "--model", model, "--out", out] + kv_args(kv_dtype)
    args += ["--ids", ids_arg(ids)] if text is None else ["--text", text]
    if mode:
        args += ["--mode", mode]
    if chunk:
        args += ["--chunk", chunk]
    qmpi(args, tp=tp, pp=pp, mpi=mpi, timeout=timeout)
    try:
        logits = np.load(out)
    finally:
        os.remove(out)
    if logits.dtype != np.float32 or logits.ndim != 2:
        raise TestFailure(f"qmpi logits wrote {logits.dtype} {logits.shape}, want float32 [T, V]")
    return logits


def qmpi_greedy(model: str, n: int, ids=None, prompt=None, tp=1, pp=1, mpi=False,
                timeout: float = 180, kv_dtype=None) -> dict:
    """The JSON object `qmpi run --temperature 0 --ignore-eos --json` prints last (EXACT_KV
    unless kv_dtype is given).

    Pure argmax decoding: the repetition penalty is switched off explicitly, because the
    model's generation_config.json (1.05 for Qwen2.5) would otherwise apply even at
    temperature 0, as it does in Hugging Face's greedy generate."""
    args = ["run", "--model", model, "--max-tokens", n, "--temperature", 0,
            "--repetition-penalty", 1, "--ignore-eos", "--json"] + kv_args(kv_dtype)
    args += ["--ids", ids_arg(ids)] if prompt is None else ["--prompt", prompt]
    proc = qmpi(args, tp=tp, pp=pp, mpi=mpi, timeout=timeout)
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    try:
        result = json.loads(lines[-1])
        result["prompt_ids"], result["output_ids"]  # noqa: B018 (presence check)
    except (IndexError, ValueError, KeyError, TypeError):
        print(f"--- stdout\n{_tail(proc.stdout)}")
        raise TestFailure("the last stdout line of `qmpi run --json` is not the result object")
    return result


def tokenizer_size(model_dir: str) -> int:
    """Ids the model's tokenizer.json can produce (regular vocabulary and added tokens): the
    engine samples only below this, though the embedding may have more rows."""
    with open(os.path.join(model_dir, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    ids = list(tok["model"]["vocab"].values()) + [t["id"] for t in tok.get("added_tokens", [])]
    return max(ids) + 1


def random_ids(seed: int, n: int) -> list:
    """n ordinary-token ids (no special tokens) from a fixed seed."""
    return np.random.default_rng(seed).integers(0, FIRST_SPECIAL_ID, size=n).tolist()


def rel_err(x: np.ndarray, ref: np.ndarray) -> float:
    """max|x - ref| / max|ref| over the whole matrix (the tests' one error measure)."""
    if x.shape != ref.shape:
        raise TestFailure(f"shape {x.shape} differs from the reference's {ref.shape}")
    return float(np.max(np.abs(x.astype(np.float64) - ref)) / np.max(np.abs(ref)))


def make_model_pair(key: str, args) -> tuple:
    """(quantized folder, float twin folder) of `qmpi make-model ARGS --out ... --float-out ...`
    (ARGS name --quant, the preset, the seed), under tests/tmp/models/KEY and KEY-float, made
    once per qmpi binary as make_model's models are."""
    root = test_tmp("models")
    dest, twin = os.path.join(root, key), os.path.join(root, key + "-float")
    stamp = os.path.join(dest, ".made-by")
    identity = _binary_identity()
    with locked("model-" + key):
        if os.path.exists(stamp) and open(stamp).read() == identity and os.path.isdir(twin):
            return dest, twin
        shutil.rmtree(dest, ignore_errors=True)
        shutil.rmtree(twin, ignore_errors=True)
        qmpi(["make-model", "--out", dest, "--float-out", twin] + [str(a) for a in args],
             timeout=300)
        with open(stamp, "w") as f:
            f.write(identity)
    return dest, twin


def run_batch_job(model: str, inp: str, out: str, extra, ranks: int = 1,
                  max_model_len: int = 256, timeout: float = 180) -> tuple:
    """`qmpi batch` of `inp` into `out` with token ids and the exact KV cache, under mpirun with
    `ranks` ranks (one OpenMP thread each) when more than one. Returns ({custom_id: {"choices",
    "usage"}}, the job's log); a line that failed raises TestFailure."""
    args = [qmpi_binary(), "batch", "--model", model, "--input", inp, "--output", out,
            "--overwrite", "--token-ids", "--max-model-len", str(max_model_len)] + EXACT_KV
    cmd = args + [str(a) for a in extra]
    if ranks > 1:
        cmd = [mpirun_binary(), "--oversubscribe", "-np", str(ranks), "-x", "OMP_NUM_THREADS"] + cmd
    proc = run(cmd, timeout=timeout, env=dict(os.environ, OMP_NUM_THREADS="1"))
    results = {}
    with open(out) as f:
        for line in f:
            j = json.loads(line)
            if j["error"] is not None:
                raise TestFailure(f"{out}: {j['custom_id']} failed: {j['error']}")
            body = j["response"]["body"]
            results[j["custom_id"]] = {"choices": body["choices"], "usage": body["usage"]}
    return results, proc.stdout + proc.stderr


def _split_floats(x, found: list):
    """x with every float in it (the logprobs) taken out into `found`, in order."""
    if isinstance(x, dict):
        return {k: _split_floats(v, found) for k, v in x.items()}
    if isinstance(x, list):
        return [_split_floats(v, found) for v in x]
    if isinstance(x, float):
        found.append(x)
        return None
    return x


def same_results(a, b, tolerance: float) -> bool:
    """Two batch results (run_batch_job's values) equal in tokens, text, finish reasons, usage and
    top-logprob tokens, their floats (the logprobs) within `tolerance`: another layout or batch
    adds the same numbers in another order."""
    fa, fb = [], []
    if _split_floats(a, fa) != _split_floats(b, fb) or len(fa) != len(fb):
        return False
    return all(abs(x - y) <= tolerance for x, y in zip(fa, fb))


class Checks:
    """Collects pass/fail lines so a test prints every measurement before it fails."""

    def __init__(self, name: str):
        self.name = name
        self.failures = []
        self.count = 0
        self.start = time.monotonic()

    def check(self, ok: bool, line: str) -> bool:
        self.count += 1
        print(("  ok    " if ok else "  FAIL  ") + line, flush=True)
        if not ok:
            self.failures.append(line)
        return ok

    def guard(self, label: str, fn, *args, **kwargs):
        """Calls fn; a TestFailure becomes one failed check and None, so later cases still run."""
        try:
            return fn(*args, **kwargs)
        except TestFailure as e:
            self.check(False, f"{label}: {e}")
            return None

    def finish(self) -> int:
        took = time.monotonic() - self.start
        if self.failures:
            print(f"{self.name}: {len(self.failures)} of {self.count} checks failed "
                  f"({took:.0f}s):", flush=True)
            for line in self.failures:
                print("  " + line)
            return 1
        if self.count == 0:
            print(f"{self.name}: no checks ran")
            return 1
        print(f"{self.name}: all {self.count} checks passed ({took:.0f}s)", flush=True)
        return 0


def check_layouts_match(c, label: str, model_dir: str, ids, prompt, base_logits, base_run,
                        layouts, tolerance: float, greedy_tokens: int, timeout: float) -> None:
    """Each (tp, pp) layout gives the single-rank logits of `ids` within `tolerance` (relative)
    and the single-rank greedy continuation of `prompt` (`base_run`), token for token."""
    for tp, pp in layouts:
        name = f"{label} {tp}x{pp}"
        got = c.guard(name, qmpi_logits, model_dir, ids=ids, tp=tp, pp=pp, mpi=True,
                      timeout=timeout)
        if got is not None:
            err = c.guard(name, rel_err, got, base_logits)
            if err is not None:
                c.check(err <= tolerance, f"{name}: logits T={len(ids)} vs single rank rel err "
                                          f"{err:.2e} (limit {tolerance:g})")
        result = c.guard(name, qmpi_greedy, model_dir, greedy_tokens, ids=prompt, tp=tp, pp=pp,
                         mpi=True, timeout=timeout)
        if result is not None:
            got_ids, want = result["output_ids"], base_run["output_ids"]
            first = next((i for i, (a, b) in enumerate(zip(got_ids, want)) if a != b), None)
            where = "" if first is None else f"; first difference at step {first}"
            c.check(got_ids == want and len(want) == greedy_tokens,
                    f"{name}: {len(got_ids)} greedy ids == single rank's {len(want)}{where}")


def main(name: str, body) -> None:
    """Runs body(checks) and exits with the result; setup errors fail the test loudly."""
    checks = Checks(name)
    try:
        body(checks)
    except TestFailure as e:
        checks.check(False, f"stopped: {e}")
    sys.exit(checks.finish())
