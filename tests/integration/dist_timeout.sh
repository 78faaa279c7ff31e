#!/usr/bin/env bash
# No silent hangs: one rank never joins (or dies) and the job must end non-zero soon after
# --comm-timeout, with one line naming the waiting rank, the operation, the peer and their hosts.
# Hosts are simulated (h1:3,h2:3) so that the message's host names can be checked.
source "$(dirname "$0")/dist_lib.bash"
bin=$(mpitest comm_timeout)
timeout_s=3
slack_s=25  # MPI start-up and teardown of 6 ranks on 2 busy cores; a hang takes 120 s
export QMPI_FAKE_HOSTS=h1:3,h2:3

check_time() {
  awk -v t="$ELAPSED" -v lo="$timeout_s" -v hi="$((timeout_s + slack_s))" \
    'BEGIN { exit !(t >= lo && t < hi) }' ||
    fail "$1: ended after $ELAPSED s, expected between $timeout_s and $((timeout_s + slack_s)) s"
}

# Rank 4 (stage 1) waits for activations from rank 1 (stage 0), which is stuck.
log="$TMP_DIR/recv.log"
run_mpi "$log" 6 "$bin" --tp 3 --pp 2 --timeout $timeout_s --stuck 1 --op recv
expect_rc 4 "stuck recv"
check_time "stuck recv"
expect_regex "$log" '^error QM402 \(comm-timeout\): rank 4 \(host h2\) waited [0-9.]+ s in recv \(4096 bytes\) on world without completing, waiting for rank 1 \(host h1\); fix: Check rank 1 on host h1'

# Ranks 3 and 5 wait in their TP group's all-reduce for rank 4.
log="$TMP_DIR/tp_allreduce.log"
run_mpi "$log" 6 "$bin" --tp 3 --pp 2 --timeout $timeout_s --stuck 4 --op tp-allreduce
expect_rc 4 "stuck tp all-reduce"
check_time "stuck tp all-reduce"
expect_regex "$log" '^error QM402 \(comm-timeout\): rank [35] \(host h2\) waited [0-9.]+ s in all_reduce_sum \(16 floats\) on tp group 1 \(world ranks 3-5\) without completing, waiting for its peers .*rank 4 \(host h2\)'

# A rank that exits without MPI_Finalize takes the job down (well before the timeout).
log="$TMP_DIR/die.log"
run_mpi "$log" 6 "$bin" --tp 3 --pp 2 --timeout $timeout_s --stuck 2 --op die
[[ "$RC" != 0 ]] || fail "a dead rank left the job with exit code 0"
awk -v t="$ELAPSED" -v hi="$((timeout_s + slack_s))" 'BEGIN { exit !(t < hi) }' ||
  fail "dead rank: the job took $ELAPSED s to end"
expect_text "$log" "rank 2: exiting with status 3"
expect_regex "$log" 'Process name: +\[\[[0-9]+,1\],2\]'
finish
