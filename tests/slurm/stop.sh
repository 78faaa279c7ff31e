#!/usr/bin/env bash
# Stops what tests/slurm/start.sh STATE_DIR started (jobs, slurmctld, slurmd, munged) and deletes
# STATE_DIR. Safe to call on a half-started or already stopped folder; it touches only the
# processes named in STATE_DIR's pid files and only a folder start.sh marked.
set -uo pipefail

state="${1:?usage: stop.sh STATE_DIR}"
[[ -d "$state" ]] || exit 0
if [[ ! -f "$state/.qmpi-slurm-state" ]]; then
  echo "slurm-stop: $state was not made by tests/slurm/start.sh; leaving it alone" >&2
  exit 1
fi
export SLURM_CONF="$state/etc/slurm.conf"

pid_of() {  # pid_of NAME: the live pid in STATE_DIR/run/NAME.pid, or nothing
  local f="$state/run/$1.pid" pid
  [[ -s "$f" ]] || return 0
  pid="$(cat "$f")"
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

wait_gone() {  # wait_gone PID...: up to 10 s, then SIGKILL
  local pid
  for _ in $(seq 100); do
    local alive=0
    for pid in "$@"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    ((alive)) || return 0
    sleep 0.1
  done
  for pid in "$@"; do kill -9 "$pid" 2>/dev/null; done
}

ctld="$(pid_of slurmctld)"
slurmd="$(pid_of slurmd)"
if [[ -n "$ctld" ]]; then
  # Jobs first, so no slurmstepd outlives the daemons.
  jobs="$(squeue -h -o %i 2>/dev/null)"
  if [[ -n "$jobs" ]]; then
    # shellcheck disable=SC2086
    scancel $jobs 2>/dev/null
    for _ in $(seq 100); do
      [[ -z "$(squeue -h -t running,completing -o %i 2>/dev/null)" ]] && break
      sleep 0.1
    done
  fi
  scontrol shutdown >/dev/null 2>&1 || kill "$ctld" ${slurmd:+"$slurmd"} 2>/dev/null
elif [[ -n "$slurmd" ]]; then
  kill "$slurmd" 2>/dev/null
fi
pids=()
[[ -n "$ctld" ]] && pids+=("$ctld")
[[ -n "$slurmd" ]] && pids+=("$slurmd")
((${#pids[@]})) && wait_gone "${pids[@]}"

munged_pid="$(pid_of munged)"
if [[ -n "$munged_pid" ]]; then
  munged --socket="$state/munge/munge.socket" --stop >/dev/null 2>&1 || kill "$munged_pid" 2>/dev/null
  wait_gone "$munged_pid"
fi
rm -rf "$state"
