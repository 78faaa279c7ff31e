# Shared by launch/mpirun/*.sh (sourced, not run): builds and runs one mpirun line that starts
# TP x PP qmpi ranks with a placement that keeps each TP group on one host and, where the host
# has several NUMA domains, consecutive ranks in the same domain. See launch/mpirun/README.md.
#
# Environment (all optional except MODEL or SYNTHETIC_CONFIG):
#   MODEL / SYNTHETIC_CONFIG  model folder, or a config.json for --synthetic-weights
#   TP, PP                    layout (each script sets its default)
#   DP                        data-parallel replicas of the TP x PP mesh (batch, serve; default 1)
#   REPLICA_RECOVERY          with DP > 1: 1 (default) keeps the other replicas going when one
#                             loses a rank (mpirun --enable-recovery), 0 ends the whole job
#   BACKEND                   cuda (default) or cpu
#   HOSTFILE                  Open MPI hostfile (default: this host only, TP x PP slots)
#   RANKS_PER_HOST            ranks on each host (default: the first host's slots=, or TP x PP)
#   NUMA_PER_HOST             NUMA domains per host (default: counted on this host)
#   MAP_BY, BIND_TO           override the placement chosen below
#   MPIRUN, MPIRUN_ARGS       the mpirun to use and extra options for it
#   QMPI_BIN                  qmpi binary (default: qmpi on PATH, else build/qmpi of this checkout)
#   LOG_DIR                   also write each rank's output to LOG_DIR/1/rank.N/{stdout,stderr}
#   QMPI_STATUS_FILE          where rank 0 leaves its exit status (default: a temporary file;
#                             give a path on a shared folder when rank 0 runs on another host)
#   EXIT_GRACE                seconds mpirun may go on after rank 0 has finished (default 10)
#   DRY_RUN=1                 print the mpirun line instead of running it
#
# The exit status is the job's (docs/architecture.md, "Exit status"): rank 0's own exit code,
# which mpirun --enable-recovery does not pass on (it exits 0 whatever the ranks do), else
# mpirun's. 5 means the job finished on fewer replicas than it started with (QM414).
set -euo pipefail

_launch_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

qmpi_mpirun() {  # qmpi_mpirun COMMAND [qmpi options...]
  local sub="$1"
  shift
  local qmpi="${QMPI_BIN:-}"
  if [[ -z "$qmpi" ]]; then
    if command -v qmpi >/dev/null; then qmpi=qmpi
    elif [[ -x "$_launch_dir/../../build/qmpi" ]]; then qmpi="$(cd "$_launch_dir/../.." && pwd)/build/qmpi"
    else echo "error: qmpi is not on PATH and build/qmpi does not exist; set QMPI_BIN" >&2; return 2
    fi
  fi
  local model_args=()
  if [[ -n "${SYNTHETIC_CONFIG:-}" ]]; then
    model_args=(--synthetic-weights --model-config "$SYNTHETIC_CONFIG")
  elif [[ -n "${MODEL:-}" ]]; then
    model_args=(--model "$MODEL")
  else
    echo "error: set MODEL to the model folder (or SYNTHETIC_CONFIG to a config.json)" >&2
    return 2
  fi
  local tp="${TP:?}" pp="${PP:?}" dp="${DP:-1}" np
  np=$((dp * tp * pp))
  local replicas=() recovery=()
  ((dp > 1)) && replicas=(--dp "$dp")
  # Open MPI ends the job when a rank dies unless told to recover; qmpi then loses only that
  # rank's replica (the variable reaches every rank, which is how qmpi knows).
  ((dp > 1)) && [[ "${REPLICA_RECOVERY:-1}" == 1 ]] && recovery=(--enable-recovery)

  local hosts=() per_host
  if [[ -n "${HOSTFILE:-}" ]]; then
    [[ -r "$HOSTFILE" ]] || { echo "error: HOSTFILE=$HOSTFILE cannot be read" >&2; return 2; }
    hosts=(--hostfile "$HOSTFILE")
    per_host="${RANKS_PER_HOST:-$(grep -v '^ *#' "$HOSTFILE" | grep -oE 'slots=[0-9]+' | head -n1 | cut -d= -f2)}"
    per_host="${per_host:-$np}"
  else
    hosts=(--host "localhost:$np")
    per_host="${RANKS_PER_HOST:-$np}"
  fi
  if ((tp > per_host || per_host % tp != 0)); then
    echo "error: --tp $tp does not fit in $per_host ranks per host: a TP group would span hosts" >&2
    echo "       (TP all-reduces twice per layer; keep it inside a host and let PP cross hosts)" >&2
    return 2
  fi

  # Placement. ppr:N:numa puts N consecutive ranks in each NUMA domain in turn (ranks 0-3 in
  # domain 0, 4-7 in domain 1 for N=4), and --bind-to numa keeps each rank's host memory next
  # to its GPU, assuming GPUs are numbered by domain (the usual PCIe layout; check with
  # `nvidia-smi topo -m`). Without several domains, ppr:N:node fills one host before the next.
  # Never --map-by slot/core with --bind-to numa: that binds rank 0 to domain 0, rank 1 to
  # domain 1, ... and splits every TP pair across the sockets.
  local numa="${NUMA_PER_HOST:-$(ls -d /sys/devices/system/node/node[0-9]* 2>/dev/null | wc -l)}"
  ((numa >= 1)) || numa=1
  local map_by bind_to
  if ((numa > 1 && per_host % numa == 0)); then
    map_by="ppr:$((per_host / numa)):numa"
    bind_to=numa
  else
    map_by="ppr:$per_host:node"
    bind_to=none
  fi
  map_by="${MAP_BY:-$map_by}"
  bind_to="${BIND_TO:-$bind_to}"

  # One OpenMP thread pool per rank, sized so the ranks of a host share its cores.
  local cores threads
  cores="$(nproc)"
  threads=$((cores / per_host))
  ((threads >= 1)) || threads=1
  export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$threads}"
  export NCCL_DEBUG="${NCCL_DEBUG:-WARN}"
  local forward=() v
  for v in OMP_NUM_THREADS NCCL_DEBUG NCCL_DEBUG_SUBSYS NCCL_IB_DISABLE NCCL_SOCKET_IFNAME \
    NCCL_P2P_LEVEL CUDA_VISIBLE_DEVICES; do
    [[ -n "${!v:-}" ]] && forward+=(-x "$v")
  done
  local logs=()
  [[ -n "${LOG_DIR:-}" ]] && logs=(--output-filename "$LOG_DIR")
  local extra=()
  eval "extra=(${MPIRUN_ARGS:-})"

  local cmd=("${MPIRUN:-mpirun}" -np "$np" "${hosts[@]}" --map-by "$map_by" --bind-to "$bind_to"
    "${recovery[@]}" "${forward[@]}" -x QMPI_STATUS_FILE "${logs[@]}" "${extra[@]}"
    "$qmpi" "$sub" "${model_args[@]}" "${replicas[@]}" --tp "$tp" --pp "$pp" --backend "${BACKEND:-cuda}" "$@")
  if [[ "${DRY_RUN:-0}" == 1 ]]; then
    printf '%q ' "${cmd[@]}"
    echo
    return 0
  fi
  local status_file="${QMPI_STATUS_FILE:-}" rc
  [[ -n "$status_file" ]] || status_file="$(mktemp -u "${TMPDIR:-/tmp}/qmpi-status.XXXXXX")"
  rm -f "$status_file"
  export QMPI_STATUS_FILE="$status_file"
  qmpi_run_until_rank0_done "${cmd[@]}" && rc=0 || rc=$?
  qmpi_job_status "$status_file" "$rc" "${#recovery[@]}"
}

# qmpi_run_until_rank0_done CMD...: runs the mpirun line, passing Ctrl-C and SIGTERM on
# (_qmpi_stop), and returns its exit status. Once rank 0 has left its status, the job is over: a
# rank that mpirun still waits for EXIT_GRACE seconds later (a stopped rank of a lost replica,
# which would keep it waiting forever) is ended by stopping mpirun. mpirun runs in a session of
# its own so that a terminal's Ctrl-C reaches only this script: mpirun would answer it by
# killing every rank a second later (SIGCONT, odls_base_sigkill_timeout, SIGTERM, SIGKILL).
qmpi_run_until_rank0_done() {
  setsid "$@" &
  local pid=$! since=""
  _qmpi_ended_after_rank0=0
  _qmpi_stops=0
  trap '_qmpi_stop INT "$pid"' INT
  trap '_qmpi_stop TERM "$pid"' TERM
  while kill -0 "$pid" 2>/dev/null; do
    [[ -n "$since" || ! -e "$QMPI_STATUS_FILE" ]] || since=$SECONDS
    if ((_qmpi_ended_after_rank0 == 0)) && [[ -n "$since" ]] &&
      ((SECONDS - since >= ${EXIT_GRACE:-10})); then
      echo "qmpi launch: rank 0 finished ${EXIT_GRACE:-10} s ago but mpirun still waits for a rank (stopped, or hung); ending it" >&2
      kill -TERM "$pid" 2>/dev/null
      _qmpi_ended_after_rank0=1
    fi
    sleep 0.2
  done
  trap - TERM INT
  wait "$pid"
}

# _qmpi_stop SIGNAL MPIRUN_PID: the first Ctrl-C or SIGTERM goes to rank 0 itself when it runs on
# this host (it left "HOST PID" in $QMPI_STATUS_FILE.pid): rank 0 stops every rank at the same
# step, finishes the requests in flight and writes the summary (a batch job: the --resume
# command), and mpirun ends when the ranks have. A second signal, or a rank 0 on another host,
# ends the job through mpirun (SIGTERM: the ranks have a second).
_qmpi_stop() {
  local sig="$1" mpirun_pid="$2" host="" rank0=""
  _qmpi_stops=$((_qmpi_stops + 1))
  read -r host rank0 <"$QMPI_STATUS_FILE.pid" 2>/dev/null || true
  if ((_qmpi_stops == 1)) && [[ -n "$rank0" && "$host" == "$(hostname)" ]] &&
    kill -"$sig" "$rank0" 2>/dev/null; then
    echo "qmpi launch: SIG$sig passed to rank 0 (pid $rank0), which finishes the requests in flight; send it again to end the job now" >&2
  else
    kill -TERM "$mpirun_pid" 2>/dev/null || true
  fi
}

# qmpi_job_status STATUS_FILE MPIRUN_RC RECOVERY: prints why when the job failed although mpirun
# says otherwise, and returns the job's exit status.
qmpi_job_status() {
  local file="$1" rc="$2" recovery="$3" own
  own="$(head -n1 "$file" 2>/dev/null || true)"
  rm -f "$file" "$file.pid"
  if [[ "$own" =~ ^[0-9]+$ ]]; then
    if ((own != 0 && own != rc)); then
      echo "qmpi launch: the job failed: rank 0 exited $own (mpirun: $rc); 5 is a lost replica (QM414), the others are in \`qmpi help errors\`" >&2
      return "$own"
    fi
    ((own != 0 || _qmpi_ended_after_rank0 == 0)) || return 0
    return "$rc"
  fi
  if ((rc == 0 && recovery > 0)); then
    echo "qmpi launch: the job failed: rank 0 ended without leaving its exit status in $file (killed, or that path is not on rank 0's host: set QMPI_STATUS_FILE); mpirun --enable-recovery exits 0 regardless" >&2
    return 4
  fi
  return "$rc"
}
