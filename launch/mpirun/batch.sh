#!/usr/bin/env bash
# qmpi batch under mpirun: INPUT (JSONL requests) -> OUTPUT (JSONL results, one line per
# request). RESUME=1 (default) skips ids already in OUTPUT, so rerunning after a crash or a
# kill finishes the file without duplicates.
#
#   MODEL=models/Qwen2.5-72B-Instruct INPUT=prompts.jsonl OUTPUT=results.jsonl launch/mpirun/batch.sh
#   MODEL=... TP=4 PP=2 HOSTFILE=launch/mpirun/hostfile-2x4 INPUT=... OUTPUT=... launch/mpirun/batch.sh
#
# Extra arguments go to qmpi batch (e.g. --max-num-seqs 64). Other settings:
# launch/mpirun/common.bash.
set -euo pipefail
# shellcheck source=launch/mpirun/common.bash
source "$(dirname "${BASH_SOURCE[0]}")/common.bash"
: "${INPUT:?set INPUT to a JSONL file of requests}"
OUTPUT="${OUTPUT:-${INPUT%.jsonl}.out.jsonl}"
resume=()
[[ "${RESUME:-1}" == 1 ]] && resume=(--resume)
TP="${TP:-2}" PP="${PP:-3}" qmpi_mpirun batch --input "$INPUT" --output "$OUTPUT" "${resume[@]}" "$@"
