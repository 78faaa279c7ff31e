#!/usr/bin/env bash
# The Executor's pipeline on real ranks (mpitest_pipeline): with 3 stages (and with 2 TP ranks
# per stage), three steps in flight together sample what the same steps sample one at a time,
# and shutting down with steps still in flight ends every rank with exit 0, not a hang.
source "$(dirname "$0")/dist_lib.bash"
bin=$(mpitest pipeline)

cfg="$TMP_DIR/config.json"
small_config "$cfg" 6

log="$TMP_DIR/pp3.log"
run_mpi "$log" 3 "$bin" --model-config "$cfg" --pp 3
expect_rc 0 "pp 3: shutdown with 3 steps in flight"
expect_text "$log" "pipeline OK: 9 steps, 3 in flight"

log="$TMP_DIR/tp2pp3.log"
run_mpi "$log" 6 "$bin" --model-config "$cfg" --tp 2 --pp 3
expect_rc 0 "tp 2 x pp 3: shutdown with 3 steps in flight"
expect_text "$log" "pipeline OK: 9 steps, 3 in flight"
finish
