#!/usr/bin/env bash
# Qwen2.5-72B-Instruct on Slurm: serve (default) or batch, one rank per GPU.
#
# Default: 1 node x 8 GPUs, --tp 8 (every layer split over 8 GPUs of one NVLink/PCIe domain).
#   sbatch launch/slurm/qwen72b.sh
#
# Variant A: 6 GPUs on one node, --tp 2 --pp 3 (`qmpi plan`'s pick: the most KV room). Each
# pipeline stage is a GPU pair, so put pairs on shared PCIe switches/NVLink. TP=6 PP=1 also runs
# (uneven heads: fastest per token, about half the KV room), and so do two TP 3 replicas behind
# one endpoint (DP=2 TP=3 PP=1; docs/choosing-layouts.md compares the three).
#   TP=2 PP=3 sbatch --ntasks-per-node=6 --gpus-per-node=6 launch/slurm/qwen72b.sh
#
# Variant B: 2 nodes x 4 GPUs, --tp 4 --pp 2: tensor parallel inside each node, one pipeline
# hop between the nodes (one hidden-state transfer per step, instead of two all-reduces per
# layer across the network).
#   TP=4 PP=2 sbatch --nodes=2 --ntasks-per-node=4 --gpus-per-node=4 launch/slurm/qwen72b.sh
#
# Batch instead of serve (JSONL in, JSONL out; RESUME=1 skips ids already answered):
#   MODE=batch INPUT=prompts.jsonl OUTPUT=results.jsonl sbatch launch/slurm/qwen72b.sh
#
# Every setting is an environment variable (sbatch passes your environment to the job); the
# full list is in launch/slurm/README.md. The most used: MODEL (checkpoint folder), TP, PP,
# MODE (serve | batch | run), INPUT/OUTPUT, ZMQ_ADDR/HTTP_ADDR, BACKEND (cuda | cpu),
# QMPI_BIN, EXTRA_ARGS, GPU_MEM, PLAN=0, LAUNCHER (srun | mpirun), NCCL_* .
# The job runs `qmpi plan` first and stops with its verdict if the layout does not fit.
#
#SBATCH --job-name=qwen72b
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-node=8
#SBATCH --time=12:00:00
#SBATCH --output=%x-%j.out
#SBATCH --signal=B:TERM@120
set -euo pipefail

export MODEL="${MODEL-models/Qwen2.5-72B-Instruct}"
export MODE="${MODE:-serve}"
export TP="${TP:-8}"
export PP="${PP:-1}"
export DP="${DP:-1}"
# MAX_NUM_SEQS and MAX_MODEL_LEN (unset: qmpi's defaults) go to both `qmpi plan` and qmpi, so
# the plan checks the KV cache the job will really allocate; e.g. MAX_NUM_SEQS=32 for serving.

# The job body is the generic script next to this one. Slurm runs a copy of this file from its
# spool folder, so find the original through the job's Command (relative to the submit folder).
find_launch_dir() {
  local cmd
  if [[ -n "${QMPI_LAUNCH_DIR:-}" ]]; then
    echo "$QMPI_LAUNCH_DIR"
    return
  fi
  if [[ -n "${SLURM_JOB_ID:-}" ]]; then
    cmd="$(scontrol show job -o "$SLURM_JOB_ID" 2>/dev/null | sed -n 's/.* Command=\([^ ]*\).*/\1/p')"
    [[ -n "$cmd" && "$cmd" != /* ]] && cmd="${SLURM_SUBMIT_DIR:-$PWD}/$cmd"
    if [[ -f "$(dirname "$cmd")/qmpi.sbatch" ]]; then
      dirname "$cmd"
      return
    fi
  fi
  dirname "${BASH_SOURCE[0]}"
}
body="$(find_launch_dir)/qmpi.sbatch"
[[ -f "$body" ]] ||
  { echo "[qmpi-job] error: cannot find qmpi.sbatch next to this script; set QMPI_LAUNCH_DIR to launch/slurm" >&2; exit 2; }
exec bash "$body"
