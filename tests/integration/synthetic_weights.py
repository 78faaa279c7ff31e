"""--synthetic-weights: a real-shape model from config.json alone, each rank generating only its
own shard.

1. Qwen2.5-0.5B's config under `mpirun -np 6 ... --tp 2 --pp 3` generates tokens, and every
   rank's peak RSS (measured from outside, by /usr/bin/time around each rank) stays below the
   weights of its own shard (the engine's "MiB of weights" line) plus a fixed allowance.
   Allowance = the CPU runtime overhead the planner budgets for every rank (kRuntimeOverheadCpu,
   256 MiB: MPI shared-memory segments, OpenMP stacks, the executable and its
   libraries; if a rank needed more, `qmpi plan` would be wrong too) + this rank's KV cache
   (float32 K and V for --max-model-len tokens of its layers and KV heads) + its activations
   (float32 scratch of one step, under 8 MiB at this length). A rank holding the whole model
   (943 MiB in bf16) would exceed it by far. The measured excess over the shard is printed:
   about 30 MiB per rank on the dev box for a CPU-only build, about 180 MiB when the CUDA
   libraries (cudart, cuBLAS, NCCL) are linked in and loaded without a GPU.
2. A synthetic run equals a run on the `qmpi make-model` checkpoint of the same seed: the same
   greedy tokens under the same --tp 2 --pp 3 (tiny preset, to stay fast).
3. Without a tokenizer (a config.json alone), `qmpi run` prints the generated token ids and one
   line saying why, and its log does not claim bytes were read."""

import glob
import json
import os
import re
import shutil
import subprocess

import testlib as t

MIB = 1 << 20
RUNTIME_OVERHEAD_CPU = 256 * MIB  # plan/memory_model.h kRuntimeOverheadCpu
MAX_MODEL_LEN = 512
WEIGHTS = re.compile(r"\[rank (\d+) [^\]]*\] stage (\d+) tp (\d+): layers (\d+)-(\d+), "
                     r"([\d.]+) MiB of weights")


def mpirun(np_, argv, timeout=90):
    cmd = [t.mpirun_binary(), "--oversubscribe", "-np", str(np_), "-x", "OMP_NUM_THREADS"] + argv
    return t.run(cmd, timeout=timeout, env=dict(os.environ, OMP_NUM_THREADS="1"))


def last_json(proc):
    return json.loads([line for line in proc.stdout.splitlines() if line.strip()][-1])


def rss_test(c: t.Checks):
    cfg_dir = t.test_tmp("synthetic", "qwen2.5-0.5b")
    shutil.copy(os.path.join(t.SOURCE_DIR, "tests", "fixtures", "configs",
                             "qwen2.5-0.5b-instruct.json"), os.path.join(cfg_dir, "config.json"))
    cfg = json.load(open(os.path.join(cfg_dir, "config.json")))
    rss_dir = t.test_tmp("synthetic", "rss")
    for f in glob.glob(os.path.join(rss_dir, "rank.*")):
        os.remove(f)
    tp, pp = 2, 3
    # Each rank under /usr/bin/time, which writes its peak RSS (KiB) to a file named by the rank.
    wrapper = ('exec /usr/bin/time -f %M -o "$RSS_DIR/rank.$OMPI_COMM_WORLD_RANK" "$@"')
    argv = ["-x", "RSS_DIR=" + rss_dir, "bash", "-c", wrapper, "rank", t.qmpi_binary(), "run",
            "--synthetic-weights", "--model-config", os.path.join(cfg_dir, "config.json"),
            "--tp", tp, "--pp", pp, "--ids", "1,2,3", "--max-tokens", 4, "--temperature", 0,
            "--ignore-eos", "--max-model-len", MAX_MODEL_LEN, "--json"]
    p = mpirun(tp * pp, [str(a) for a in argv])
    out = last_json(p)
    c.check(len(out["output_ids"]) == 4 and all(0 <= i < cfg["vocab_size"] for i in out["output_ids"]),
            f"0.5B --tp 2 --pp 3 synthetic: 4 tokens generated {out['output_ids']}")

    logged = {int(m.group(1)): m for m in WEIGHTS.finditer(p.stderr)}
    c.check(len(logged) == tp * pp, f"every rank logged its weights ({len(logged)} of {tp * pp})")
    layers, kv_heads, head_dim = cfg["num_hidden_layers"], cfg["num_key_value_heads"], \
        cfg["hidden_size"] // cfg["num_attention_heads"]
    tokens = -(-MAX_MODEL_LEN // 16) * 16
    for rank in range(tp * pp):
        path = os.path.join(rss_dir, f"rank.{rank}")
        if not c.check(os.path.exists(path) and rank in logged, f"rank {rank}: RSS and weights measured"):
            continue
        rss = int(open(path).read().split()[-1]) * 1024
        m = logged[rank]
        weights = float(m.group(6)) * MIB
        stage_layers = int(m.group(5)) - int(m.group(4)) + 1
        kv = 2 * stage_layers * (kv_heads // tp) * head_dim * 4 * tokens
        # float32 scratch of a step: T x (3h + 2q + 2kv + 2im) / tp-local widths, plus the last
        # stage's logits rows (plan/memory_model.h); bounded here by 8 MiB at 512 tokens.
        activations = 8 * MIB
        limit = weights + RUNTIME_OVERHEAD_CPU + kv + activations
        c.check(rss < limit,
                f"rank {rank} (stage {m.group(2)} tp {m.group(3)}): peak RSS {rss / MIB:.1f} MiB < "
                f"weights {weights / MIB:.1f} MiB + runtime 256 MiB + KV {kv / MIB:.1f} MiB + "
                f"activations 8 MiB = {limit / MIB:.1f} MiB (RSS - weights = "
                f"{(rss - weights) / MIB:.1f} MiB)")


def equality_test(c: t.Checks):
    seed = 11
    model = t.make_model(preset="tiny", seed=seed, dtype="bf16", shards=1)
    common = ["--ids", "1,2,3,4,5", "--max-tokens", 8, "--temperature", 0, "--repetition-penalty", 1,
              "--ignore-eos", "--json", "--tp", 2, "--pp", 3]
    exe = [t.qmpi_binary(), "run"]
    real = last_json(mpirun(6, [str(a) for a in exe + ["--model", model] + common]))
    synth = last_json(mpirun(6, [str(a) for a in exe + [
        "--synthetic-weights", "--seed-weights", seed, "--model-config",
        os.path.join(model, "config.json")] + common]))
    c.check(len(real["output_ids"]) == 8, f"make-model checkpoint: 8 tokens {real['output_ids']}")
    c.check(synth["output_ids"] == real["output_ids"],
            f"synthetic seed {seed} {synth['output_ids']} == make-model --seed {seed} "
            f"{real['output_ids']}")
    other = last_json(mpirun(6, [str(a) for a in exe + [
        "--synthetic-weights", "--seed-weights", seed + 1, "--model-config",
        os.path.join(model, "config.json")] + common]))
    c.check(other["output_ids"] != real["output_ids"],
            f"another seed gives other tokens {other['output_ids']}")


def no_tokenizer_test(c: t.Checks):
    cfg_dir = t.test_tmp("synthetic", "config-only")
    shutil.copy(os.path.join(t.make_model(preset="tiny", seed=3), "config.json"),
                os.path.join(cfg_dir, "config.json"))
    common = ["--synthetic-weights", "--model-config", os.path.join(cfg_dir, "config.json"),
              "--ids", "1,2,3", "--max-tokens", "5", "--temperature", "0", "--ignore-eos"]
    text = t.run([t.qmpi_binary(), "run"] + common, timeout=60)
    as_json = t.run([t.qmpi_binary(), "run", "--json"] + common, timeout=60)
    ids = last_json(as_json)["output_ids"]
    c.check(text.returncode == 0 and text.stdout.split() == [str(i) for i in ids],
            f"no tokenizer: stdout is the generated ids {ids}: {text.stdout!r}")
    c.check("no tokenizer.json" in text.stderr and "output is token ids" in text.stderr,
            "no tokenizer: stderr says why the output is ids\n" + text.stderr[-600:])
    c.check("bytes read" not in text.stderr and "generated from seed 0" in text.stderr,
            "synthetic weights are logged as generated, not read\n" + text.stderr[-600:])


def body(c: t.Checks):
    no_tokenizer_test(c)
    rss_test(c)
    equality_test(c)


t.main("synthetic_weights", body)
