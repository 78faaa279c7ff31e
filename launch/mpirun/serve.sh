#!/usr/bin/env bash
# qmpi serve under mpirun: ZeroMQ on ZMQ_ADDR (tcp://0.0.0.0:5555) and the OpenAI-compatible
# HTTP front on HTTP_ADDR (0.0.0.0:8000; HTTP_ADDR= turns it off), both on rank 0's host.
#
#   MODEL=models/Qwen2.5-72B-Instruct launch/mpirun/serve.sh                # 6 GPUs, TP 2 x PP 3
#   MODEL=... TP=4 PP=2 HOSTFILE=launch/mpirun/hostfile-2x4 launch/mpirun/serve.sh
#
# Extra arguments go to qmpi serve (e.g. --max-num-seqs 32). To stop with the requests in
# flight finished, send SIGTERM to rank 0's process (`pkill -TERM -o -x qmpi` on its host): it
# drains, then every rank exits 0. Ctrl-C here interrupts mpirun itself, which kills every rank
# about a second after its own SIGTERM: the requests in flight get an error at once instead.
# Other settings: launch/mpirun/common.bash.
set -euo pipefail
# shellcheck source=launch/mpirun/common.bash
source "$(dirname "${BASH_SOURCE[0]}")/common.bash"
TP="${TP:-2}" PP="${PP:-3}"
http=()
[[ -n "${HTTP_ADDR-0.0.0.0:8000}" ]] && http=(--http "${HTTP_ADDR-0.0.0.0:8000}")
TP="$TP" PP="$PP" qmpi_mpirun serve --zmq "${ZMQ_ADDR:-tcp://0.0.0.0:5555}" "${http[@]}" "$@"
