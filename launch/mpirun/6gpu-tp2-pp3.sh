#!/usr/bin/env bash
# Any qmpi command on 6 GPUs of one host as --tp 2 --pp 3: three pipeline stages of two GPUs
# each, the layout `qmpi plan` picks for Qwen2.5-72B on 6 GPUs (the most KV cache; --tp 6 also
# runs, splitting heads unevenly: see docs/choosing-layouts.md "Uneven TP").
#
#   MODEL=models/Qwen2.5-72B-Instruct launch/mpirun/6gpu-tp2-pp3.sh run --chat --prompt "Hello"
#   MODEL=... launch/mpirun/6gpu-tp2-pp3.sh logits --ids 9707,11 --out logits.npy
#   SYNTHETIC_CONFIG=config.json launch/mpirun/6gpu-tp2-pp3.sh run --prompt hi   # dry run
#
# Each pair should share the fastest link: on an 8-GPU PCIe server, choose the six GPUs so that
# pairs (0,1), (2,3), (4,5) sit under the same PCIe switch, e.g. CUDA_VISIBLE_DEVICES=0,1,2,3,4,5
# when GPUs 0-3 share socket 0 (nvidia-smi topo -m). Other settings: launch/mpirun/common.bash.
set -euo pipefail
# shellcheck source=launch/mpirun/common.bash
source "$(dirname "${BASH_SOURCE[0]}")/common.bash"
[[ $# -ge 1 ]] || { sed -n '2,9p' "$0"; exit 2; }
TP=2 PP=3 qmpi_mpirun "$@"
