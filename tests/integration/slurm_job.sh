#!/usr/bin/env bash
# A real Slurm: installs Debian's slurm-wlm and munge when missing, starts a private one-node
# cluster (tests/slurm/start.sh: 8 CPUs, 8 stand-in GPUs, loopback, all state in a temp folder),
# and submits launch/slurm/qwen72b.sh exactly as launch/slurm/README.md documents its 6-GPU
# variant, with environment overrides for the tiny model and the CPU backend:
#   1. srun --mpi=pmix, MODE=run: COMPLETED 0:0, 6-rank mapping table, the greedy tokens of a
#      single-rank run;
#   2. the same through mpirun inside the allocation;
#   3. a layout that does not fit: `qmpi plan` stops the job before launch, FAILED 2:0;
#   4. a rank failure that is not qmpi's verdict (exit 4): the job reruns once with NCCL_DEBUG=INFO,
#      and the ranks see it;
#   5. MODE=batch: the results of a single-rank `qmpi batch`; submitted again, RESUME=1 adds none;
#   6. MODE=batch DP=2 TP=3 with a rank of replica 1 killed mid-run: launched with mpirun
#      --enable-recovery (srun's PMIx plugin would end the step), every request gets its one
#      result line, and the job ends FAILED 5:0 (a replica was lost, QM414).
# The daemons, munged and every temp folder are removed on exit, also on failure.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="${QMPI_SOURCE_DIR:-$(cd "$here/../.." && pwd)}"
QMPI="${QMPI:-$src/build/qmpi}"
PY=/usr/bin/python3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

die() {
  echo "FAIL: $*" >&2
  exit 1
}
[[ -x "$QMPI" ]] || die "QMPI=$QMPI is not an executable (build the qmpi target)"
[[ $(id -u) -eq 0 ]] || die "this test installs and runs slurmctld/slurmd and needs root (uid $(id -u))"

# munged wants every folder above its socket searchable by all: keep Slurm's state under /tmp.
state="$(mktemp -d /tmp/qmpi-slurm.XXXXXX)"
work_root="${QMPI_TEST_TMP:-/tmp}"
mkdir -p "$work_root"
work="$(mktemp -d "$work_root/slurm_job.XXXXXX")"
rmdir "$state"  # start.sh wants to create it
cleanup() {
  local rc=$?
  bash "$src/tests/slurm/stop.sh" "$state" || rc=1
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

t0=$(date +%s%N)
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
eval "$(bash "$src/tests/slurm/start.sh" "$state")"
echo "slurm up after $(ms "$t0") ms (package install included when it ran)"
[[ "$(sinfo -h -o %T)" == idle ]] || die "the test node is not idle"
srun --mpi=list 2>&1 | grep -qw pmix || die "Slurm has no pmix MPI plugin (srun --mpi=list)"

"$QMPI" make-model --preset tiny --seed 3 --out "$work/tiny" >"$work/make-model.log" 2>&1 ||
  { cat "$work/make-model.log"; die "qmpi make-model failed"; }
prompt="Tell me a story."
run_args=(--prompt "$prompt" --chat --max-tokens 8 --temperature 0 --ignore-eos --json)
"$QMPI" run --model "$work/tiny" "${run_args[@]}" >"$work/single.json" 2>"$work/single.log" ||
  { cat "$work/single.log"; die "single-rank qmpi run failed"; }
want_ids="$("$PY" -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])["output_ids"])' "$work/single.json")"
echo "single-rank greedy output ids: $want_ids"

fail=0
check() {  # check CONDITION_TEXT MESSAGE: evaluates with [[ ]]
  if eval "[[ $1 ]]"; then
    echo "  ok    $2"
  else
    echo "  FAIL  $2" >&2
    fail=1
  fi
}

# submit NAME ENV... : submits qwen72b.sh as the README's 6-GPU variant with ENV overrides,
# waits for the end; sets JOB, STATE, EXIT, OUT (the job's output file).
submit() {
  local name=$1 start
  shift
  start=$(date +%s%N)
  JOB="$(cd "$work" && env QMPI_BIN="$QMPI" MODEL="$work/tiny" BACKEND=cpu TP=2 PP=3 MODE=run \
    PROMPT="$prompt" MAX_TOKENS=8 EXTRA_ARGS="--temperature 0 --ignore-eos --json" "$@" \
    sbatch --parsable --job-name="$name" --ntasks-per-node=6 --gpus-per-node=6 \
    "$src/launch/slurm/qwen72b.sh")"
  local info=""
  for _ in $(seq 900); do  # 90 s
    info="$(scontrol show job -o "$JOB")"
    [[ "$info" =~ JobState=(PENDING|CONFIGURING|RUNNING|COMPLETING) ]] || break
    sleep 0.1
  done
  STATE="$(sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' <<<"$info")"
  EXIT="$(sed -n 's/.* ExitCode=\([0-9:]*\).*/\1/p' <<<"$info")"
  OUT="$(sed -n 's/.* StdOut=\([^ ]*\).*/\1/p' <<<"$info")"
  echo "--- job $JOB ($name): $STATE, exit $EXIT, $(ms "$start") ms from sbatch to the end; $OUT:"
  sed -e 's/^/    | /' "$OUT" 2>/dev/null || echo "    (no output file)"
}

mapping_rows() { grep -cE '^[0-5] +[^ ]+ +cpu +[0-2] +[01] +[0-9]+-[0-9]+ ' "$OUT" || true; }
output_ids() {
  "$PY" - "$OUT" <<'PY'
import json, sys
for line in reversed(open(sys.argv[1], encoding="utf-8").read().splitlines()):
    if line.startswith('{"'):
        print(json.loads(line)["output_ids"])
        break
PY
}

echo "== 1. srun --mpi=pmix, MODE=run"
submit qmpi-srun
check '"$STATE" == COMPLETED && "$EXIT" == 0:0' "job state $STATE, exit code $EXIT (want COMPLETED, 0:0)"
check '"$OUT" == "$work/qmpi-srun-$JOB.out"' "output file named by the script's #SBATCH --output (%x-%j.out)"
check '"$(grep -c "launch: srun --mpi=pmix" "$OUT")" == 1' "launched with srun --mpi=pmix"
check '"$(grep -c "plan: --tp 2 --pp 3 is valid and fits on 6 ranks" "$OUT")" == 1' "qmpi plan ran first and accepted the layout"
check '"$(mapping_rows)" == 6' "mapping table with 6 ranks in the job output ($(mapping_rows) rows)"
check '"$(output_ids)" == "$want_ids"' "greedy output ids $(output_ids) equal the single-rank run"
check '"$(ls "$work/qmpi-logs/$JOB" | grep -c "^rank-[0-5].log$")" == 6' "one log per rank in qmpi-logs/$JOB"

echo "== 2. mpirun inside the allocation"
submit qmpi-mpirun LAUNCHER=mpirun
check '"$STATE" == COMPLETED && "$EXIT" == 0:0' "job state $STATE, exit code $EXIT (want COMPLETED, 0:0)"
check '"$(grep -c "launch: mpirun -np 6 --map-by ppr:6:node" "$OUT")" == 1' "launched with mpirun -np 6 --map-by ppr:6:node"
check '"$(mapping_rows)" == 6' "mapping table with 6 ranks ($(mapping_rows) rows)"
check '"$(output_ids)" == "$want_ids"' "greedy output ids $(output_ids) equal the single-rank run"

echo "== 3. a layout that does not fit stops before launch"
submit qmpi-nofit PLAN_ARGS="--host-mem 64MiB"
check '"$STATE" == FAILED && "$EXIT" == 2:0' "job state $STATE, exit code $EXIT (want FAILED, 2:0)"
check '"$(grep -c "error QM150 (weights-do-not-fit)" "$OUT")" == 1' "the planner's error QM150 in the job output"
check '"$(grep -c "nothing was launched" "$OUT")" == 1 && ! -e "$work/qmpi-logs/$JOB"' "no rank was started"

echo "== 4. a runtime failure is rerun once with NCCL_DEBUG=INFO"
# A stand-in qmpi whose ranks fail with qmpi's runtime exit code (4) unless NCCL_DEBUG=INFO
# reached them, as a job whose NCCL set-up failed would.
cat >"$work/qmpi-flaky" <<EOF
#!/bin/sh
if [ "\$1" = run ] && [ "\${NCCL_DEBUG:-}" != INFO ]; then
  echo "error QM401 (nccl-init): stand-in failure, NCCL_DEBUG=\${NCCL_DEBUG:-unset}" >&2
  exit 4
fi
exec "$QMPI" "\$@"
EOF
chmod +x "$work/qmpi-flaky"
submit qmpi-retry QMPI_BIN="$work/qmpi-flaky" NCCL_RETRY_WITH_INFO=1
check '"$STATE" == COMPLETED && "$EXIT" == 0:0' "job state $STATE, exit code $EXIT (want COMPLETED, 0:0 after the rerun)"
check '"$(grep -c "srun exited 4 " "$OUT")" == 1' "the first attempt failed with exit 4"
check '"$(grep -c "stand-in failure, NCCL_DEBUG=WARN" "$work/qmpi-logs/$JOB/rank-0.log")" == 1' "the ranks ran with NCCL_DEBUG=WARN first"
check '"$(grep -c "rerunning once with NCCL_DEBUG=INFO" "$OUT")" == 1' "the job reran with NCCL_DEBUG=INFO"
check '"$(output_ids)" == "$want_ids"' "the rerun's greedy output ids equal the single-rank run"

echo "== 5. MODE=batch, then the same job again: RESUME=1 answers nothing twice"
cat >"$work/prompts.jsonl" <<'EOF'
{"id": "plain", "prompt": "Once upon a time", "max_tokens": 8, "temperature": 0}
{"id": "chat", "messages": [{"role": "user", "content": "Tell me a story."}], "max_tokens": 8, "temperature": 0}
{"custom_id": "openai", "method": "POST", "url": "/v1/chat/completions", "body": {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8, "temperature": 0}}
EOF
"$QMPI" batch --model "$work/tiny" --input "$work/prompts.jsonl" --output "$work/single.out.jsonl" \
  >"$work/single-batch.log" 2>&1 || { cat "$work/single-batch.log"; die "single-rank qmpi batch failed"; }
batch_texts() {  # batch_texts FILE: "id status text" per result line, sorted by id
  "$PY" - "$1" <<'PY'
import json, sys
rows = []
for line in open(sys.argv[1], encoding="utf-8"):
    r = json.loads(line)
    resp = r.get("response") or {}
    choice = (resp.get("body") or {}).get("choices", [{}])[0]
    text = choice.get("text", choice.get("message", {}).get("content"))
    rows.append(f'{r["custom_id"]} {resp.get("status_code", "error")} {text!r}')
print("\n".join(sorted(rows)))
PY
}
want_batch="$(batch_texts "$work/single.out.jsonl")"
submit qmpi-batch MODE=batch INPUT="$work/prompts.jsonl" OUTPUT="$work/results.jsonl" EXTRA_ARGS=
check '"$STATE" == COMPLETED && "$EXIT" == 0:0' "job state $STATE, exit code $EXIT (want COMPLETED, 0:0)"
check '"$(grep -c -- "batch --model .* --input $work/prompts.jsonl --output $work/results.jsonl --resume" "$OUT")" == 1' "qmpi batch --input ... --output ... --resume was launched"
got_batch="$(batch_texts "$work/results.jsonl" 2>&1 || true)"
echo "$got_batch" | sed 's/^/    /'
check '"$(wc -l <"$work/results.jsonl")" == 3' "3 result lines for 3 requests"
check '"$got_batch" == "$want_batch"' "every result (status, greedy text) equals the single-rank batch"
submit qmpi-batch MODE=batch INPUT="$work/prompts.jsonl" OUTPUT="$work/results.jsonl" EXTRA_ARGS=
check '"$STATE" == COMPLETED && "$EXIT" == 0:0' "resubmitted: job state $STATE, exit code $EXIT"
check '"$(wc -l <"$work/results.jsonl")" == 3 && "$(batch_texts "$work/results.jsonl")" == "$want_batch"' "resubmitted: still exactly the 3 results"

echo "== 6. DP=2 TP=3 batch, a rank of replica 1 killed: the job goes on and exits 5"
# 160 tokens a request: at 40 a quiet fast host finished all 24 in 2.2 s, before the killer had
# found rank 4, and the job completed with nothing to recover from.
"$PY" - "$work/dp.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(24):
        f.write(json.dumps({"id": f"r{i}", "prompt": "old stone bridges " * (1 + i % 5),
                            "max_tokens": 160, "temperature": 0, "ignore_eos": True}) + "\n")
PY
kill_rank4() {  # SIGKILLs world rank 4 of the job writing $work/dp.out.jsonl once it has a line
  local p
  for _ in $(seq 1200); do [[ -s "$work/dp.out.jsonl" ]] && break; sleep 0.1; done
  # pgrep narrows /proc to the job's ranks first: reading every process's environ with two
  # forks each took longer than the rest of the job on a loaded host ("rank 4 was not found").
  for p in $(pgrep -f -- "--output $work/dp.out.jsonl"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=4 || continue
    echo "killing rank 4 (pid $p)"
    kill -KILL "$p"
    return 0
  done
  echo "rank 4 was not found"
}
kill_rank4 &
killer=$!
submit qmpi-dp-loss MODE=batch DP=2 TP=3 PP=1 INPUT="$work/dp.jsonl" OUTPUT="$work/dp.out.jsonl" \
  EXTRA_ARGS="--comm-timeout 5 --max-num-seqs 4 --max-model-len 256" NCCL_RETRY_WITH_INFO=0
wait "$killer"
check '"$STATE" == FAILED && "$EXIT" == 5:0' "job state $STATE, exit code $EXIT (want FAILED, 5:0)"
check '"$(grep -c "launch: mpirun .*--enable-recovery" "$OUT")" == 1' "launched with mpirun --enable-recovery, not srun"
check '"$(grep -c "replica 1 lost" "$OUT")" -ge 1 && "$(grep -c "error QM414 (replica-lost)" "$OUT")" == 1' "rank 0 logged the lost replica and QM414"
check '"$(grep -c "rank 0 exited 5: that is the job" "$OUT")" == 1' "the job says mpirun exited 0 but rank 0 exited 5"
dp_ids="$("$PY" -c 'import json,sys; print(sorted(json.loads(l)["custom_id"] for l in open(sys.argv[1])) == sorted(f"r{i}" for i in range(24)))' "$work/dp.out.jsonl" 2>&1)"
check '"$dp_ids" == True' "each of the 24 requests has exactly one result line"

# Without slurmdbd, finished jobs stay visible through the job completion log.
jobcomp="$(sacct -c -n -X -o JobName%20,State,ExitCode 2>&1 || true)"
echo "$jobcomp"
check '"$(grep -cE "qmpi-(srun|mpirun|retry|batch) +COMPLETED +0:0" <<<"$jobcomp")" == 5 && "$(grep -cE "qmpi-nofit +FAILED +2:0" <<<"$jobcomp")" == 1' "sacct -c lists 5 COMPLETED jobs and 1 FAILED"

((fail == 0)) || die "slurm_job: some checks failed"
echo "slurm_job: all checks passed ($(ms "$t0") ms)"
