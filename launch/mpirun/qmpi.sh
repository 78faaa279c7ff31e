#!/usr/bin/env bash
# Any qmpi command under mpirun with the layout from TP and PP (default: TP = all ranks of one
# host, PP = 1) and a placement that keeps each TP group on one host (see README.md).
#
#   MODEL=models/Qwen2.5-7B-Instruct TP=2 PP=1 launch/mpirun/qmpi.sh run --prompt "Hello"
#   MODEL=... TP=4 PP=2 HOSTFILE=launch/mpirun/hostfile-2x4 launch/mpirun/qmpi.sh bench
#
# DRY_RUN=1 prints the mpirun line instead. Other settings: launch/mpirun/common.bash.
set -euo pipefail
# shellcheck source=launch/mpirun/common.bash
source "$(dirname "${BASH_SOURCE[0]}")/common.bash"
[[ $# -ge 1 ]] || { sed -n '2,8p' "$0"; exit 2; }
TP="${TP:-${RANKS_PER_HOST:-1}}" PP="${PP:-1}" qmpi_mpirun "$@"
