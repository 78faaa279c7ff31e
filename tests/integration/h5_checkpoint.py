#!/usr/bin/python3
"""qmpi .h5 checkpoints (docs/hdf5-format.md), end to end:
- `qmpi convert` (alone, and under mpirun with 3 ranks) of a tied f32 model and an untied bf16
  model in 2 shards; `qmpi logits` from the .h5 (with --verify) equals the logits from the
  safetensors folder exactly at 1x1, 2x1 and 2x3, and a text prompt (the tokenizer stored in the
  .h5) generates what the folder generates;
- the file, read with h5py and h5dump, has the documented layout: version, /meta files, one
  dataset per tensor with its bytes, dtype, chunks along the TP dimension and CRC-32s that
  zlib.crc32 reproduces;
- a file written by the h5py recipe in docs/hdf5-format.md loads and gives the same logits;
- a corrupted chunk fails --verify naming the tensor; truncated, wrong-version, missing-tensor,
  shape-mismatch and non-HDF5 files fail with their catalogue errors.
"""

import itertools
import json
import os
import re
import shutil
import subprocess
import zlib

import h5py
import numpy as np

import testlib as t

LAYOUTS = [(1, 1), (2, 1), (2, 3)]
IDS = t.random_ids(901, 12)
MPI_TIMEOUT = 240
META_FILES = ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"]


def safetensors_raw(model_dir: str) -> dict:
    """name -> (dtype, shape, raw bytes) of every tensor in the folder, from the headers."""
    from safetensors_ref import read_header  # tests/reference, on the path testlib sets
    out = {}
    for file in sorted(f for f in os.listdir(model_dir) if f.endswith(".safetensors")):
        path = os.path.join(model_dir, file)
        header, start, _ = read_header(path)
        with open(path, "rb") as f:
            for name, e in header.items():
                begin, end = e["data_offsets"]
                f.seek(start + begin)
                out[name] = (e["dtype"], e["shape"], f.read(end - begin))
    return out


def convert(model_dir: str, out: str, ranks: int = 1, dtype: str = "keep") -> None:
    args = ["convert", "--model", model_dir, "--out", out, "--dtype", dtype]
    if ranks == 1:
        t.run([t.qmpi_binary()] + args, timeout=120)
    else:
        t.run([t.mpirun_binary(), "--oversubscribe", "-np", str(ranks), t.qmpi_binary()] + args,
              timeout=MPI_TIMEOUT)


def launch(args, ranks: int = 1):
    """Runs qmpi (under mpirun when ranks > 1) and returns the finished process, failed or not."""
    cmd = [t.qmpi_binary()] + [str(a) for a in args]
    if ranks > 1:
        cmd = [t.mpirun_binary(), "--oversubscribe", "-np", str(ranks), "-x", "OMP_NUM_THREADS"] + cmd
    return subprocess.run(cmd, capture_output=True, text=True, timeout=MPI_TIMEOUT,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))


# The folder's logits per (folder, tp, pp): the docs recipe's file is compared with the tied
# folder at layouts the tied .h5 already ran, so those runs are made once.
FOLDER_LOGITS = {}


def folder_logits(folder: str, tp: int, pp: int) -> np.ndarray:
    key = (folder, tp, pp)
    if key not in FOLDER_LOGITS:
        FOLDER_LOGITS[key] = t.qmpi_logits(folder, ids=IDS, tp=tp, pp=pp, mpi=tp * pp > 1,
                                           timeout=MPI_TIMEOUT)
    return FOLDER_LOGITS[key]


def check_logits_match(c: t.Checks, label: str, folder: str, h5: str, layouts) -> None:
    for tp, pp in layouts:
        want = c.guard(f"{label} {tp}x{pp} folder", folder_logits, folder, tp, pp)
        got = c.guard(f"{label} {tp}x{pp} .h5", logits_verified, h5, tp, pp)
        if want is not None and got is not None:
            same_shape = got.shape == want.shape
            diff = float(np.max(np.abs(got - want))) if same_shape else float("nan")
            c.check(same_shape and np.array_equal(got, want),
                    f"{label} {tp}x{pp}: .h5 logits {got.shape} (--verify) equal the folder's "
                    f"exactly (max diff {diff:g})")


def logits_verified(h5: str, tp: int, pp: int) -> np.ndarray:
    """`qmpi logits --verify` from a .h5 file."""
    out = os.path.join(t.test_tmp("logits"), f"h5-{os.getpid()}-{tp}x{pp}.npy")
    # EXACT_KV, as testlib.qmpi_logits runs the folder it is compared with.
    t.qmpi(["logits", "--model", h5, "--verify", "--ids", t.ids_arg(IDS), "--out", out]
           + t.EXACT_KV,
           tp=tp, pp=pp, mpi=tp * pp > 1, timeout=MPI_TIMEOUT)
    try:
        return np.load(out)
    finally:
        os.remove(out)


def chunk_boxes(shape, chunks):
    """Slices of every chunk, row-major over the chunk grid, clipped at the edges."""
    chunks = chunks or shape
    for origin in itertools.product(*[range(0, s, c) for s, c in zip(shape, chunks)]):
        yield tuple(slice(o, min(o + c, s)) for o, c, s in zip(origin, chunks, shape))


def check_layout(c: t.Checks, label: str, folder: str, h5: str, head_dim: int) -> None:
    raw = safetensors_raw(folder)
    with h5py.File(h5, "r") as f:
        c.check(int(f.attrs.get("qmpi_format_version", -1)) == 1,
                f"{label}: root attribute qmpi_format_version = 1")
        for name in META_FILES:
            want = open(os.path.join(folder, name), "rb").read()
            got = f["meta"][name][()] if name in f["meta"] else None
            c.check(got == want, f"{label}: /meta/{name} holds the folder's {len(want)} bytes")
        weights = f["weights"]
        c.check(sorted(weights.keys()) == sorted(raw),
                f"{label}: /weights has one dataset per tensor ({len(weights)} vs {len(raw)})")
        bad_bytes, bad_crc, bad_chunks = [], [], []
        for name, (dtype, shape, data) in raw.items():
            if name not in weights:
                continue
            ds = weights[name]
            stored = ds[()]
            want_np = "<u2" if dtype in ("BF16", "F16") else "<f4"
            if (ds.attrs["dtype"].decode() != dtype or stored.dtype != np.dtype(want_np)
                    or list(stored.shape) != shape or stored.tobytes() != data):
                bad_bytes.append(name)
            if int(ds.attrs["crc32"]) != zlib.crc32(data):
                bad_crc.append(name)
            crcs = [zlib.crc32(np.ascontiguousarray(stored[b]).tobytes())
                    for b in chunk_boxes(ds.shape, ds.chunks)]
            if list(ds.attrs["chunk_crc32"]) != crcs:
                bad_crc.append(name + " (chunks)")
            split = 1 if re.search(r"(o_proj|down_proj)\.weight$", name) else 0
            if re.search(r"(proj|embed_tokens|lm_head)\.weight$", name):
                whole = [d for i, d in enumerate(ds.shape) if i != split]
                if list(ds.chunks[:split]) + list(ds.chunks[split + 1:]) != whole:
                    bad_chunks.append(f"{name} {ds.chunks}")
                if re.search(r"self_attn\.\w_proj", name) and ds.chunks[split] % head_dim:
                    bad_chunks.append(f"{name} {ds.chunks} (not whole heads)")
        c.check(not bad_bytes, f"{label}: every dataset has the tensor's dtype attribute, shape "
                               f"and exact bytes (bad: {bad_bytes[:3]})")
        c.check(not bad_crc, f"{label}: crc32 and chunk_crc32 equal zlib.crc32 of the data "
                             f"(bad: {bad_crc[:3]})")
        c.check(not bad_chunks, f"{label}: matrices are chunked along the TP dimension only, "
                                f"attention in whole heads (bad: {bad_chunks[:3]})")
        q = weights["model.layers.0.self_attn.q_proj.weight"]
        c.check(q.id.get_num_chunks() > 1, f"{label}: q_proj is stored in "
                                          f"{q.id.get_num_chunks()} chunks of {q.chunks}")
    dump = subprocess.run(["h5dump", "-H", h5], capture_output=True, text=True, timeout=60)
    c.check(dump.returncode == 0 and 'GROUP "weights"' in dump.stdout
            and 'DATASET "model.norm.weight"' in dump.stdout
            and 'ATTRIBUTE "qmpi_format_version"' in dump.stdout,
            f"{label}: h5dump -H reads the file (exit {dump.returncode})")


def check_cast(c: t.Checks, folder: str, out: str) -> None:
    """`--dtype f32` of a bf16 model: every float tensor widened exactly, and labelled F32."""
    convert(folder, out, dtype="f32")
    raw = safetensors_raw(folder)
    bad = []
    with h5py.File(out, "r") as f:
        for name, (dtype, shape, data) in raw.items():
            ds = f["weights"][name]
            want = (np.frombuffer(data, "<u2").astype(np.uint32) << 16).view(np.float32)
            if dtype != "BF16" or ds.attrs["dtype"] != b"F32" or ds.dtype != np.float32 or \
                    not np.array_equal(ds[()].ravel(), want):
                bad.append(name)
    c.check(not bad,
            f"--dtype f32: {len(raw)} bf16 tensors stored as their exact F32 values (bad: {bad[:3]})")


def doc_recipe() -> dict:
    """Executes the Python block of docs/hdf5-format.md and returns its namespace."""
    text = open(os.path.join(t.SOURCE_DIR, "docs", "hdf5-format.md"), encoding="utf-8").read()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    if not blocks:
        raise t.TestFailure("docs/hdf5-format.md has no ```python block")
    ns = {}
    exec(compile(blocks[0], "docs/hdf5-format.md", "exec"), ns)
    return ns


def copy_of(src: str, name: str) -> str:
    dst = os.path.join(t.test_tmp("h5-bad"), name)
    shutil.copyfile(src, dst)
    return dst


def expect_failure(c: t.Checks, label: str, args, code: str, words, ranks: int = 1) -> None:
    p = launch(args, ranks)
    out = p.stdout + p.stderr
    c.check(p.returncode == 3 and f"error {code}" in out,
            f"{label}: exit {p.returncode} with {code} (want 3)")
    for w in words:
        c.check(w in out, f"{label}: message names {w!r}" + ("" if w in out else f"\n{out[-1500:]}"))


def check_bad_files(c: t.Checks, h5: str) -> None:
    base = ["logits", "--ids", t.ids_arg(IDS[:4]), "--out",
            os.path.join(t.test_tmp("h5-bad"), "x.npy")]
    tensor = "model.layers.1.self_attn.q_proj.weight"
    corrupt = copy_of(h5, "corrupt.h5")
    with h5py.File(corrupt, "r") as f:
        info = f["weights"][tensor].id.get_chunk_info(1)
    with open(corrupt, "r+b") as f:
        f.seek(info.byte_offset + 5)
        byte = f.read(1)
        f.seek(info.byte_offset + 5)
        f.write(bytes([byte[0] ^ 0x40]))
    ok = launch(["logits", "--model", corrupt] + base[1:])
    c.check(ok.returncode == 0, f"corrupt chunk: without --verify the load does not notice "
                                f"(exit {ok.returncode})")
    expect_failure(c, "corrupt chunk --verify",
                   ["logits", "--model", corrupt, "--verify"] + base[1:], "QM211",
                   [tensor, "chunk 1"])
    expect_failure(c, "corrupt chunk --verify 2x1",
                   ["logits", "--model", corrupt, "--verify", "--tp", 2, "--pp", 1] + base[1:],
                   "QM211", [tensor], ranks=2)

    truncated = copy_of(h5, "truncated.h5")
    os.truncate(truncated, os.path.getsize(truncated) // 2)
    expect_failure(c, "truncated", ["logits", "--model", truncated] + base[1:], "QM212",
                   ["truncated.h5", "truncated file"])

    version = copy_of(h5, "version.h5")
    with h5py.File(version, "r+") as f:
        f.attrs["qmpi_format_version"] = 7
    expect_failure(c, "wrong version", ["logits", "--model", version] + base[1:], "QM212",
                   ["qmpi_format_version 7", "reads version 1"])

    missing = copy_of(h5, "missing.h5")
    gone = "model.layers.2.mlp.up_proj.weight"
    with h5py.File(missing, "r+") as f:
        del f["weights"][gone]
    expect_failure(c, "missing dataset", ["logits", "--model", missing] + base[1:], "QM209",
                   [gone, "/weights/" + gone])

    shape = copy_of(h5, "shape.h5")
    with h5py.File(shape, "r+") as f:
        cfg = json.loads(f["meta/config.json"][()])
        cfg["intermediate_size"] //= 2
        del f["meta/config.json"]
        f["meta/config.json"] = json.dumps(cfg)
    expect_failure(c, "shape mismatch", ["logits", "--model", shape] + base[1:], "QM210",
                   ["model.layers.0.mlp.gate_proj.weight", "shape.h5"])

    not_h5 = os.path.join(t.test_tmp("h5-bad"), "notes.h5")
    with open(not_h5, "w") as f:
        f.write("these are not weights\n")
    expect_failure(c, "not HDF5", ["logits", "--model", not_h5] + base[1:], "QM212",
                   ["not an HDF5 file"])


def body(c: t.Checks) -> None:
    tied = t.make_model(seed=31, dtype="f32", shards=1, untied=False)
    untied = t.make_model(seed=32, dtype="bf16", shards=2, untied=True)
    with open(os.path.join(tied, "config.json")) as f:
        cfg = json.load(f)
    head_dim = cfg["hidden_size"] // cfg["num_attention_heads"]
    work = t.test_tmp("h5")
    tied_h5, untied_h5 = os.path.join(work, "tied-f32.h5"), os.path.join(work, "untied-bf16.h5")
    for path in (tied_h5, untied_h5):
        if os.path.exists(path):
            os.remove(path)
    convert(tied, tied_h5)
    convert(untied, untied_h5, ranks=3)

    check_layout(c, "f32 tied", tied, tied_h5, head_dim)
    check_layout(c, "bf16 untied (3-rank convert)", untied, untied_h5, head_dim)
    check_logits_match(c, "f32 tied", tied, tied_h5, LAYOUTS)
    check_logits_match(c, "bf16 untied", untied, untied_h5, LAYOUTS)

    prompt = "The capital of France is"
    want = c.guard("text from folder", t.qmpi_greedy, tied, 6, prompt=prompt)
    got = c.guard("text from .h5", t.qmpi_greedy, tied_h5, 6, prompt=prompt)
    if want and got:
        c.check(got["prompt_ids"] == want["prompt_ids"] and got["output_ids"] == want["output_ids"],
                f"text prompt: the .h5's tokenizer gives prompt ids {got['prompt_ids']} and the "
                f"same 6 greedy tokens as the folder")

    recipe = c.guard("docs recipe", doc_recipe)
    if recipe is not None:
        user_h5 = os.path.join(work, "from-h5py.h5")
        recipe["write_qmpi_h5"](tied, user_h5)
        check_logits_match(c, "h5py-written (docs recipe)", tied, user_h5, [(1, 1), (2, 3)])

    c.guard("--dtype f32", check_cast, c, untied, os.path.join(work, "untied-as-f32.h5"))
    check_bad_files(c, untied_h5)
    if not c.failures:  # the files are kept for a look when something failed
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(t.test_tmp("h5-bad"), ignore_errors=True)


if __name__ == "__main__":
    t.main("h5_checkpoint", body)
