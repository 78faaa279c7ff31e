#!/usr/bin/python3
"""LoRA adapter errors (issue 33), on one rank: a truncated adapter, a missing folder, one made
for another base model (shapes), a rank above --max-lora-rank, a target that is not a
projection, bias "all", more adapters than --max-loras and a --lora naming no adapter each give
their QM code. Split from lora_vs_reference.py (whose layouts hold the MPI lock) so these
single-rank runs go beside the MPI tests; the adapters are lora_vs_reference's q/v and
all-module ones, made in a folder of this test's own.
"""

import json
import os
import shutil
import subprocess

import testlib
from lora_vs_reference import ADAPTERS, make_adapter

FOLDER = "lora-errors"


def expect_error(c, label, base, extra, code) -> None:
    out = os.path.join(testlib.test_tmp(FOLDER), "bad.npy")
    proc = subprocess.run([testlib.qmpi_binary(), "logits", "--model", base, "--out", out,
                           "--ids", "1,2,3"] + extra, capture_output=True, text=True, timeout=120)
    text = proc.stdout + proc.stderr
    c.check(proc.returncode != 0 and code in text,
            f"{label}: exit {proc.returncode}, {code}" + ("" if code in text else f"\n{text[-600:]}"))


def check_errors(c, base, adapters) -> None:
    tmp = testlib.test_tmp(FOLDER)
    truncated = os.path.join(tmp, "truncated")
    shutil.rmtree(truncated, ignore_errors=True)
    shutil.copytree(adapters["qv"], truncated)
    path = os.path.join(truncated, "adapter_model.safetensors")
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 100)
    expect_error(c, "truncated adapter", base, ["--lora-modules", f"t={truncated}"],
                 "QM260 (lora-adapter-unreadable)")
    expect_error(c, "missing adapter folder", base, ["--lora-modules", f"t={tmp}/nowhere"],
                 "QM260 (lora-adapter-unreadable)")

    other = testlib.make_model("tiny-qwen3", seed=2, dtype="f32")  # q width 384, not 192
    foreign = make_adapter(other, "foreign", ["--targets", "q_proj"], FOLDER)
    expect_error(c, "adapter of another base model", base, ["--lora-modules", f"f={foreign}"],
                 "QM261 (lora-shape-mismatch)")

    big = make_adapter(base, "rank32", ["--rank", "32"], FOLDER)
    expect_error(c, "rank above --max-lora-rank", base, ["--lora-modules", f"b={big}"],
                 "QM262 (lora-rank-too-large)")

    edited = os.path.join(tmp, "edited")
    for key, value, code in (("target_modules", ["q_proj", "lm_head"],
                              "QM263 (lora-module-unknown)"),
                             ("bias", "all", "QM264 (lora-config-unsupported)")):
        shutil.rmtree(edited, ignore_errors=True)
        shutil.copytree(adapters["qv"], edited)
        cfg_path = os.path.join(edited, "adapter_config.json")
        with open(cfg_path) as f:
            cfg = json.load(f)
        cfg[key] = value
        with open(cfg_path, "w") as f:
            json.dump(cfg, f)
        expect_error(c, f"{key} {value}", base, ["--lora-modules", f"e={edited}"], code)

    expect_error(c, "two adapters, --max-loras 1", base,
                 ["--lora-modules", f"a={adapters['qv']}", f"b={adapters['all']}"],
                 "QM265 (lora-too-many)")
    expect_error(c, "--lora naming no adapter", base,
                 ["--lora-modules", f"a={adapters['qv']}", "--lora", "b"],
                 "QM266 (lora-option-invalid)")


def body(c: testlib.Checks) -> None:
    base = testlib.make_model("tiny", seed=7, dtype="f32")
    adapters = {}
    for name in ("qv", "all"):
        made = c.guard(f"make-lora {name}", make_adapter, base, name, ADAPTERS[name], FOLDER)
        if made is not None:
            adapters[name] = made
    if len(adapters) == 2:
        check_errors(c, base, adapters)


if __name__ == "__main__":
    testlib.main("lora_errors", body)
