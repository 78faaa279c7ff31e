#!/usr/bin/env bash
# Every Comm operation (all-reduce, all-gather, broadcast, send/recv, barrier) on the world, the
# TP groups and between pipeline neighbours, for each layout the issue lists on the tiny shape
# (6 layers, 12 heads, 6 KV heads), checked element by element by mpitest_comm_selftest.
source "$(dirname "$0")/dist_lib.bash"
bin=$(mpitest comm_selftest)

for layout in 1x1 2x1 1x2 1x3 2x2 2x3 3x2 6x1 1x6; do
  tp=${layout%x*} pp=${layout#*x}
  log="$TMP_DIR/selftest_tp${tp}_pp${pp}.log"
  run_mpi "$log" $((tp * pp)) "$bin" --tp "$tp" --pp "$pp" --timeout 60
  expect_rc 0 "--tp $tp --pp $pp"
  expect_text "$log" "comm_selftest OK: $((tp * pp)) ranks, --tp $tp --pp $pp"
  expect_text "$log" "rank  host  device  stage  tp  layers"
done
finish
