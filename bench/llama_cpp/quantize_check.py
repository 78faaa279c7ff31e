#!/usr/bin/python3
"""GGUF files made by llama.cpp's own llama-quantize, read by qmpi (issue 35): a random float
model (gguf_vs_reference's 256-wide shape, untied) is written as an F32 GGUF by the oracle's
converter (tests/reference/gguf_ref.py), then quantized by llama-quantize (bench/llama_cpp/
build.sh builds it from a pinned release) to each of Q8_0, Q6_K, Q5_K_M, Q4_K_M, Q4_0, Q3_K_M
and Q2_K. For each file: the tensor types llama-quantize chose, and `qmpi logits` at 1x1 and
TP 2 against the float64 forward on the file's tensors decoded by the oracle's NumPy decoder
(tests/reference/ggml_blocks.py, which agrees exactly with llama.cpp's gguf-py decoder). Not a
ctest (it needs the llama.cpp build); run it where that build exists:

    bench/llama_cpp/quantize_check.py [build dir]
"""

import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))
build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "build")
os.environ.setdefault("QMPI", os.path.join(build, "qmpi"))
os.environ.setdefault("QMPI_SOURCE_DIR", root)
os.environ.setdefault("QMPI_BUILD_DIR", build)
os.environ.setdefault("QMPI_TEST_TMP", os.path.join(build, "tests", "tmp"))
os.environ.setdefault("MPIRUN", "mpirun")
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
os.environ.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
sys.path.insert(0, os.path.join(root, "tests", "integration"))

import numpy as np  # noqa: E402

import testlib  # noqa: E402  (puts tests/reference on the path)
import gguf_ref  # noqa: E402
import gguf_vs_reference as gvr  # noqa: E402

TYPES = ["Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q4_0", "Q3_K_M", "Q2_K"]


def main() -> int:
    llama = subprocess.run([os.path.join(here, "build.sh")], capture_output=True, text=True,
                           check=True).stdout.strip()
    base = gvr.base_model("k256", True)
    work = testlib.test_tmp("llama_quantize")
    f32 = os.path.join(work, "k256-f32.gguf")
    gguf_ref.write_model(base, f32, gguf_ref.options([base, f32, "--type", "F32"]))
    ids = np.random.default_rng(37).integers(0, gvr.K256["vocab_size"], size=8).tolist()
    worst = 0.0
    for qtype in TYPES:
        out = os.path.join(work, f"k256-{qtype}.gguf")
        subprocess.run([os.path.join(llama, "llama-quantize"), f32, out, qtype],
                       capture_output=True, text=True, check=True)
        types = sorted({t for t, _, _ in gguf_ref.read(out)[1].values()})
        want = gvr.reference(base, out).logits(ids)
        errs = []
        for tp in (1, 2):
            got = testlib.qmpi_logits(out, ids=ids, tp=tp, mpi=tp > 1, timeout=240)
            errs.append(testlib.rel_err(got, want))
        worst = max(worst, *errs)
        print(f"{qtype:7s} types {', '.join(types):28s} rel err 1x1 {errs[0]:.2e}, "
              f"TP 2 {errs[1]:.2e}", flush=True)
    print(f"worst {worst:.2e} (limit {gvr.TOLERANCE:g})")
    return 0 if worst <= gvr.TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())
