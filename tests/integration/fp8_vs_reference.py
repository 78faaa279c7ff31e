#!/usr/bin/python3
"""Block-wise FP8 checkpoints (Qwen's -FP8 layout) against the float64 reference.

`qmpi make-model --quant fp8` writes a random FP8 model (e4m3 weights, float32 scale_inv per
128x128 block; the tiny preset's hidden 192 leaves partial edge blocks) and the float model it
dequantizes to. The reference decodes e4m3 with its own code (tests/reference/fp8_ref.py, from
the format description) and must get exactly the float twin's weights; then `qmpi logits` on
the FP8 model must match the reference's logits within the exact-math bound (1e-4 of the largest
|logit|, tighter than int4's 2e-3) at 1x1, TP 2 (MLP blocks 2 + 1: uneven; q/k/v rows cut inside a block), PP 3 and TP 3
(o_proj inputs cut inside a block). `qmpi convert` carries the e4m3 bytes and scales into a .h5
file: the same logits. An FP8 Qwen2-MoE model (experts FP8, routers bf16) matches its reference
at 1x1 and TP 2 (experts split whole). Damaged scales, NaN weight codes, a scale grid
that disagrees with weight_block_size, and unsupported variants fail with their QM errors.
"""

import json
import os
import shutil
import struct
import subprocess

import numpy as np

import testlib  # first: it puts tests/reference on the path
import fp8_ref
import qwen2_ref
import qwen_family_ref
import safetensors_ref

# The int4 tests' bound is 2e-3; on the CPU FP8 weights decode to within float32 rounding
# (e4m3 x scale as one float32 product), so the exact-math bound holds.
TOLERANCE = 1e-4
LOGITS_LEN = 16
MPI_TIMEOUT = 240


def make_fp8(name: str, preset: str, shards: int = 1) -> tuple:
    """(fp8 folder, float twin folder), made once per qmpi binary."""
    return testlib.make_model_pair(name, ["--preset", preset, "--seed", "23", "--quant", "fp8",
                                          "--shards", str(shards)])


def check_decoding(c, label, model_dir, twin_dir) -> None:
    """The reference's e4m3 decoding of the FP8 files, rounded to float32 as the twin stores it,
    == the float twin's weights, exactly (code x scale is exact in float64)."""
    with open(os.path.join(model_dir, "config.json")) as f:
        quant = json.load(f)["quantization_config"]
    mine = fp8_ref.dequantize_tensors(safetensors_ref.read_model_dir(model_dir), quant)
    twin = safetensors_ref.read_model_dir(twin_dir)
    c.check(sorted(mine) == sorted(twin), f"{label}: reference decoding names the twin's tensors")
    worst = max(float(np.max(np.abs(mine[n].astype(np.float32) - twin[n]))) for n in twin
                if n in mine)
    c.check(worst == 0.0, f"{label}: reference decoding == float twin (max diff {worst:g})")


def check_layouts(c, label, model_dir, ref, layouts) -> np.ndarray:
    ids = testlib.random_ids(31, LOGITS_LEN)
    want = ref.logits(ids)
    single = None
    for tp, pp in layouts:
        name = f"{label} {tp}x{pp}"
        got = c.guard(name, testlib.qmpi_logits, model_dir, ids=ids, tp=tp, pp=pp,
                      mpi=tp * pp > 1, timeout=MPI_TIMEOUT)
        if got is None:
            continue
        if tp * pp == 1:
            single = got
        err = testlib.rel_err(got, want)
        c.check(err <= TOLERANCE, f"{name}: logits T={LOGITS_LEN} rel err {err:.2e} "
                                  f"(limit {TOLERANCE:g})")
    return single


def tensor_span(model_dir: str, name: str) -> tuple:
    """(file, byte offset, byte length) of tensor `name` in a single-file model folder."""
    path = os.path.join(model_dir, "model.safetensors")
    header, data_start, _ = safetensors_ref.read_header(path)
    begin, end = header[name]["data_offsets"]
    return path, data_start + begin, end - begin


def damaged_copy(src: str, name: str) -> str:
    dest = os.path.join(testlib.test_tmp("fp8"), name)
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(src, dest)
    return dest


def expect_error(c, label: str, model_dir: str, code: str, needle: str) -> None:
    """`qmpi logits` on model_dir exits non-zero naming `code` and `needle`."""
    out = os.path.join(testlib.test_tmp("fp8"), "bad.npy")
    proc = subprocess.run([testlib.qmpi_binary(), "logits", "--model", model_dir, "--out", out,
                           "--ids", "1,2,3"], capture_output=True, text=True, timeout=120)
    text = proc.stdout + proc.stderr
    c.check(proc.returncode != 0 and code in text and needle in text,
            f"{label}: exit {proc.returncode}, {code} naming {needle!r}"
            + ("" if code in text else f"\n{text[-600:]}"))


def check_damage(c, model_dir: str) -> None:
    scale = "model.layers.1.mlp.down_proj.weight_scale_inv"
    bad = damaged_copy(model_dir, "nan-scale")
    path, at, _ = tensor_span(bad, scale)
    with open(path, "r+b") as f:
        f.seek(at + 4)
        f.write(struct.pack("<f", float("nan")))
    expect_error(c, "NaN block scale", bad, "quant-tensor-invalid", scale)

    weight = "model.layers.2.self_attn.k_proj.weight"
    bad = damaged_copy(model_dir, "nan-code")
    path, at, n = tensor_span(bad, weight)
    with open(path, "r+b") as f:
        f.seek(at + n // 2)
        f.write(b"\x7f")
    expect_error(c, "e4m3 NaN code", bad, "quant-tensor-invalid", weight)

    bad = damaged_copy(model_dir, "block-64")
    cfg_path = os.path.join(bad, "config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    cfg["quantization_config"]["weight_block_size"] = [64, 64]
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    expect_error(c, "scale grid of other blocks", bad, "quant-tensor-invalid", "weight_scale_inv")

    for key, value, needle in (("activation_scheme", "static", "static"),
                               ("fmt", "e5m2", "e5m2"), ("weight_block_size", None, "per-tensor")):
        cfg["quantization_config"] = fp8_ref_config()
        cfg["quantization_config"][key] = value
        with open(cfg_path, "w") as f:
            json.dump(cfg, f)
        expect_error(c, f"refused variant {key}={value}", bad, "quant-unsupported", needle)


def fp8_ref_config() -> dict:
    return {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
            "weight_block_size": [128, 128]}


def body(c: testlib.Checks) -> None:
    made = c.guard("make fp8 tiny", make_fp8, "fp8-tiny", "tiny")
    if made is not None:
        model_dir, twin_dir = made
        check_decoding(c, "fp8 tiny", model_dir, twin_dir)
        single = check_layouts(c, "fp8 tiny", model_dir, qwen2_ref.load_model(model_dir),
                               [(1, 1), (2, 1), (1, 3), (3, 1)])
        if single is not None:
            h5 = os.path.join(testlib.test_tmp("fp8"), "fp8-tiny.h5")
            if c.guard("fp8 convert", testlib.qmpi, ["convert", "--model", model_dir, "--out", h5],
                       timeout=120) is not None:
                got = c.guard("fp8 .h5", testlib.qmpi_logits, h5, ids=testlib.random_ids(31, 16))
                if got is not None:
                    c.check(np.array_equal(got, single), "fp8: .h5 from qmpi convert gives the "
                                                         "same logits as the safetensors folder")
        c.guard("fp8 damage", check_damage, c, model_dir)
    made = c.guard("make fp8 moe", make_fp8, "fp8-qwen2-moe", "tiny-qwen2-moe", 2)
    if made is not None:
        model_dir, twin_dir = made
        check_decoding(c, "fp8 qwen2-moe", model_dir, twin_dir)
        # TP 3: the shared expert's 256 columns are two 128-wide FP8 blocks, so one rank holds
        # none of them (a zero-width slice) and adds nothing to that all-reduce.
        check_layouts(c, "fp8 qwen2-moe", model_dir, qwen_family_ref.load_model(model_dir),
                      [(1, 1), (2, 1), (3, 1)])


if __name__ == "__main__":
    testlib.main("fp8_vs_reference", body)
