#!/usr/bin/env bash
# Qwen2.5-72B-Instruct-AWQ (int4, ~41.5 GB) on six 24 GB cards of one node (RTX 4090 / A10 /
# L4 class, PCIe): --tp 2 --pp 3, serving by default. bf16 (145 GB) fits no layout on these
# cards; the int4 checkpoint leaves each card ~7 GB of weights and the rest for KV cache.
# TP 2 x PP 3 keeps the all-reduces inside GPU pairs (put each pair under one PCIe switch:
# nvidia-smi topo -m) and sends one hidden state per step between stages; `qmpi plan` compares
# it with TP 6 and DP 2 x TP 3 (docs/choosing-layouts.md, "6 x RTX 4090 24GB over PCIe").
#
#   sbatch launch/slurm/qwen72b-awq-24gb.sh
#   MODE=batch INPUT=prompts.jsonl OUTPUT=results.jsonl sbatch launch/slurm/qwen72b-awq-24gb.sh
#   sbatch -p gpu24 -A myproject launch/slurm/qwen72b-awq-24gb.sh      # partition and account
#   SETUP=site-modules.sh CONTAINER_EXEC="apptainer exec --nv qmpi.sif" sbatch ...  # see README
#
# Every other setting is an environment variable of launch/slurm/qmpi.sbatch (README.md).
#
#SBATCH --job-name=qwen72b-awq
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=6
#SBATCH --gpus-per-node=6
#SBATCH --time=12:00:00
#SBATCH --output=%x-%j.out
#SBATCH --signal=B:TERM@120
set -euo pipefail

export MODEL="${MODEL-models/Qwen2.5-72B-Instruct-AWQ}"
export MODE="${MODE:-serve}"
export TP="${TP:-2}"
export PP="${PP:-3}"
export DP="${DP:-1}"
# 24 GB cards: 8k-token sequences, 32 at a time; the plan checks that this KV cache fits.
export MAX_MODEL_LEN="${MAX_MODEL_LEN:-8192}"
export MAX_NUM_SEQS="${MAX_NUM_SEQS:-32}"

# The job body is qmpi.sbatch beside this file (Slurm runs a copy of this script from its spool
# folder: QMPI_LAUNCH_DIR, else the job's Command, else this file's folder).
dir="${QMPI_LAUNCH_DIR:-}"
if [[ -z "$dir" && -n "${SLURM_JOB_ID:-}" ]]; then
  cmd="$(scontrol show job -o "$SLURM_JOB_ID" 2>/dev/null | sed -n 's/.* Command=\([^ ]*\).*/\1/p')"
  [[ -n "$cmd" && "$cmd" != /* ]] && cmd="${SLURM_SUBMIT_DIR:-$PWD}/$cmd"
  [[ -f "$(dirname "$cmd")/qmpi.sbatch" ]] && dir="$(dirname "$cmd")"
fi
body="${dir:-$(dirname "${BASH_SOURCE[0]}")}/qmpi.sbatch"
[[ -f "$body" ]] ||
  { echo "[qmpi-job] error: cannot find qmpi.sbatch next to this script; set QMPI_LAUNCH_DIR to launch/slurm" >&2; exit 2; }
exec bash "$body"
