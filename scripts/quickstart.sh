#!/usr/bin/env bash
# Quick start: installs what is missing, builds, creates the tiny random-weight model and runs
# a generation on it across 6 ranks: tensor parallel 2 x pipeline parallel 3.
# (Random weights: the text is meaningless; the point is that the whole path runs.)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$here/scripts/timed.sh"
timed "quickstart: setup" bash "$here/scripts/setup.sh"
timed "quickstart: build" bash "$here/scripts/build.sh"
qmpi="$here/build/qmpi"
model="$here/.cache/models/tiny"
[[ -f "$model/config.json" ]] || "$qmpi" make-model --preset tiny --out "$model"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun -np 6 --oversubscribe -x OMP_NUM_THREADS=1 \
  "$qmpi" run --model "$model" --tp 2 --pp 3 --chat --prompt "Hello! What can you do?" \
  --max-tokens 32 --temperature 0.7 --seed 1
echo "quickstart: ok, generated on 6 ranks (--tp 2 --pp 3) with the tiny model in $model"
