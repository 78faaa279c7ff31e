#!/usr/bin/env bash
# The Engine's KV sizing on a device backend, without a device: mpitest_kv_sizing plugs a
# made-up sizer into the real Engine on the CPU backend (every rank runs the profiling step,
# rank r claims room for 1000 - 100 r blocks). Every rank must allocate the smallest room and
# have its "memory predicted / actual" line in rank 0's start-up summary; a rank with no room
# stops every rank with its error.
source "$(dirname "$0")/dist_lib.bash"
bin=$(mpitest kv_sizing)

cfg="$TMP_DIR/config.json"
small_config "$cfg" 4

log="$TMP_DIR/agree.log"
run_mpi "$log" 4 "$bin" --model-config "$cfg" --tp 2 --pp 2
expect_rc 0 "four ranks agree"
expect_text "$log" "kv_sizing OK: 700 blocks"
for r in 0 1 2 3; do
  expect_regex "$log" "\[rank $r [^]]+\] stage .*; memory predicted / actual: .* = [0-9]+ / 700 blocks"
done
expect_text "$log" "room for 1000 blocks here, the job uses the smallest of any rank"
[[ $(grep -c "memory predicted / actual" "$log") == 4 ]] || fail "agree.log: not one memory line per rank"

log="$TMP_DIR/no_room.log"
run_mpi "$log" 4 "$bin" --model-config "$cfg" --tp 2 --pp 2 --fail-rank 2
expect_rc 2 "rank 2 has no room"
expect_regex "$log" "error QM151 \(kv-cache-does-not-fit\): rank 2 [^ ]+: made-up: no room for one block"
finish
