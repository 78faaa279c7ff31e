#!/usr/bin/env bash
# SIGTERM/SIGINT: a signal to one rank or to mpirun stops every rank at the same step (the run
# loop's collective stop check); a second signal ends the job at once with error QM409.
source "$(dirname "$0")/dist_lib.bash"
bin=$(mpitest signal_stop)

# Rank 4 signals itself at step 5: every rank stops after step 5.
log="$TMP_DIR/raise.log"
run_mpi "$log" 6 "$bin" --tp 2 --pp 3 --raise 4
expect_rc 0 "one SIGTERM on rank 4"
expect_text "$log" "signal_stop OK: all 6 ranks stopped at step 5"

# Two signals on rank 4: the interrupted error, and mpirun takes the job down.
log="$TMP_DIR/twice.log"
run_mpi "$log" 6 "$bin" --tp 2 --pp 3 --raise 4 --twice
expect_rc 4 "two SIGTERMs on rank 4"
expect_text "$log" "error QM409 (interrupted): rank 4 (host "

# SIGTERM from outside, to one rank's process and to mpirun itself.
for target in rank3 mpirun; do
  pids="$TMP_DIR/pids_$target"
  rm -rf "$pids" && mkdir -p "$pids"
  log="$TMP_DIR/kill_$target.log"
  "$MPIRUN" --oversubscribe -np 6 "$bin" --tp 2 --pp 3 --pid-dir "$pids" >"$log" 2>&1 &
  launcher=$!
  for _ in $(seq 300); do
    [[ $(ls "$pids" | wc -l) == 6 ]] && break
    sleep 0.1
  done
  sleep 0.3
  if [[ $target == rank3 ]]; then kill -TERM "$(cat "$pids/rank3.pid")"; else kill -TERM $launcher; fi
  set +e
  wait $launcher
  RC=$?
  set -e
  echo "--- SIGTERM to $target (mpirun rc $RC)"
  sed -e 's/\x1b\[[0-9;]*m//g' "$log"
  expect_regex "$log" "signal_stop OK: all 6 ranks stopped at step [0-9]+"
  # mpirun reports its own signal with a non-zero status; a signal to one rank is a clean stop.
  [[ $target == mpirun || $RC == 0 ]] || fail "SIGTERM to $target: exit code $RC"
done
finish
