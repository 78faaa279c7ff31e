#!/usr/bin/env bash
# Placement on simulated hosts (QMPI_FAKE_HOSTS, the Mesh's test hook) and the layout errors a
# launch can meet before any weight is read: TP groups stay inside hosts or the job refuses to
# start, world size errors state their arithmetic and a layout that works, and an uneven TP
# split is accepted.
source "$(dirname "$0")/dist_lib.bash"
bin=$(mpitest comm_selftest)

# 2 hosts x 3 slots, --tp 3 --pp 2: one TP group per host.
log="$TMP_DIR/h1x3_h2x3_tp3_pp2.log"
QMPI_FAKE_HOSTS=h1:3,h2:3 run_mpi "$log" 6 "$bin" --tp 3 --pp 2
expect_rc 0 "tp 3 pp 2 on h1:3,h2:3"
expect_text "$log" "comm_selftest OK"
expect_tp_groups_on_one_host "$log"
expect_regex "$log" '^3 +h2 +cpu +1 +0 +3-5 \(3\)'

# 3 hosts x 2 slots, --tp 2 --pp 3: one TP group per host, stages cross hosts.
log="$TMP_DIR/h1x2_h2x2_h3x2_tp2_pp3.log"
QMPI_FAKE_HOSTS=h1:2,h2:2,h3:2 run_mpi "$log" 6 "$bin" --tp 2 --pp 3
expect_rc 0 "tp 2 pp 3 on h1:2,h2:2,h3:2"
expect_text "$log" "comm_selftest OK"
expect_tp_groups_on_one_host "$log"

# 2 hosts x 3 slots cannot hold three TP pairs: the middle pair would straddle the hosts.
log="$TMP_DIR/h1x3_h2x3_tp2_pp3.log"
QMPI_FAKE_HOSTS=h1:3,h2:3 run_mpi "$log" 6 "$bin" --tp 2 --pp 3
expect_rc 2 "tp 2 pp 3 on h1:3,h2:3"
expect_text "$log" "error QM106 (tp-spans-hosts): the TP group of stage 1 (world ranks 2-3) spans 2 hosts: h1 (ranks 2), h2 (ranks 3)"
expect_text "$log" "fix: Use --tp 3 --pp 2 or --tp 1 --pp 6"

# --tp 6 over 2 hosts is rejected, or runs with a loud warning when allowed.
log="$TMP_DIR/h1x3_h2x3_tp6.log"
QMPI_FAKE_HOSTS=h1:3,h2:3 run_mpi "$log" 6 "$bin" --tp 6 --pp 1
expect_rc 2 "tp 6 on h1:3,h2:3"
expect_text "$log" "error QM106 (tp-spans-hosts): the TP group of stage 0 (world ranks 0-5) spans 2 hosts: h1 (ranks 0,1,2), h2 (ranks 3,4,5)"
log="$TMP_DIR/h1x3_h2x3_tp6_allowed.log"
QMPI_FAKE_HOSTS=h1:3,h2:3 run_mpi "$log" 6 "$bin" --tp 6 --pp 1 --allow-tp-across-hosts
expect_rc 0 "tp 6 on h1:3,h2:3 with --allow-tp-across-hosts"
expect_regex "$log" "WARNING mesh: the TP group of stage 0 .* spans 2 hosts"
expect_text "$log" "comm_selftest OK"

# Hosts filled round-robin (mpirun --map-by node): every TP group would cross hosts.
log="$TMP_DIR/round_robin_tp3.log"
QMPI_FAKE_HOSTS=h1,h2,h1,h2,h1,h2 run_mpi "$log" 6 "$bin" --tp 3 --pp 2
expect_rc 2 "tp 3 pp 2 on round-robin hosts"
expect_text "$log" "--map-by slot"

# A malformed test hook is a usage error, not a silent fallback.
log="$TMP_DIR/bad_fake_hosts.log"
QMPI_FAKE_HOSTS=h1:3,h2:2 run_mpi "$log" 6 "$bin" --tp 3 --pp 2
expect_rc 2 "QMPI_FAKE_HOSTS naming 5 ranks"
expect_text "$log" "QMPI_FAKE_HOSTS=h1:3,h2:2 names 5 ranks but the job has 6"

# World size errors: the arithmetic and a layout for the same ranks.
log="$TMP_DIR/world_size.log"
run_mpi "$log" 6 "$bin" --tp 4 --pp 2
expect_rc 2 "tp 4 pp 2 on 6 ranks"
expect_text "$log" "error QM101 (world-size): 6 ranks cannot form --tp 4 --pp 2 (8 ranks)"
expect_text "$log" "fix: Use --tp 6 --pp 1 for 6 ranks (also valid: --tp 3 --pp 2, --tp 2 --pp 3, --tp 1 --pp 6), or launch with mpirun -np 8."
# 12 heads / 6 KV heads on TP 4 split unevenly (3 query heads, 1 or 2 KV heads per rank): the
# mesh accepts it.
log="$TMP_DIR/uneven_tp4.log"
run_mpi "$log" 4 "$bin" --tp 4 --pp 1
expect_rc 0 "tp 4 on 6 KV heads"
expect_text "$log" "comm_selftest OK"
finish
