# Shared by the dist_*.sh integration tests (sourced; the .bash suffix keeps it out of ctest's
# *.sh glob). Paths come from the environment ctest sets.
set -euo pipefail

: "${QMPI_BUILD_DIR:?QMPI_BUILD_DIR is not set (ctest sets it)}"
: "${MPIRUN:?MPIRUN is not set (ctest sets it)}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
TMP_DIR="${QMPI_TEST_TMP:-/tmp}/$(basename "$0" .sh)"
mkdir -p "$TMP_DIR"
FAILURES=0

fail() {
  echo "FAIL: $*" >&2
  FAILURES=$((FAILURES + 1))
}

mpitest() {  # mpitest NAME: the path of mpitest_NAME, which must be built
  local bin="$QMPI_BUILD_DIR/tests/mpitest_$1"
  [[ -x "$bin" ]] || { echo "FAIL: $bin is not built (target mpitest_$1)" >&2; exit 1; }
  echo "$bin"
}

# run_mpi LOG NP ARGS...: runs mpirun with a hard limit, output to LOG and to the test log;
# sets RC and ELAPSED (seconds, 1 decimal).
run_mpi() {
  local log=$1 np=$2
  shift 2
  local start end
  start=$(date +%s%N)
  set +e
  timeout 120 "$MPIRUN" --oversubscribe -np "$np" "$@" >"$log" 2>&1
  RC=$?
  set -e
  end=$(date +%s%N)
  ELAPSED=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
  echo "--- ${QMPI_FAKE_HOSTS:+QMPI_FAKE_HOSTS=$QMPI_FAKE_HOSTS }mpirun -np $np ${*##*/} (rc $RC, ${ELAPSED} s)"
  sed -e 's/\x1b\[[0-9;]*m//g' "$log"
}

# small_config FILE LAYERS: a Qwen2 config.json (hidden 64, 4 heads, 2 KV heads, vocab 1000,
# float32) for synthetic weights, written to FILE.
small_config() {
  cat >"$1" <<JSON
{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 64,
 "num_hidden_layers": $2, "num_attention_heads": 4, "num_key_value_heads": 2,
 "intermediate_size": 128, "vocab_size": 1000, "max_position_embeddings": 1024,
 "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": false,
 "torch_dtype": "float32"}
JSON
}

expect_text() {  # expect_text LOG TEXT: fixed string
  grep -qF -- "$2" "$1" || fail "$(basename "$1"): missing \"$2\""
}

expect_regex() {  # expect_regex LOG EXTENDED_REGEX
  grep -qE -- "$2" "$1" || fail "$(basename "$1"): nothing matches /$2/"
}

expect_rc() {  # expect_rc WANT WHAT
  [[ "$RC" == "$1" ]] || fail "$2: exit code $RC, expected $1"
}

# Every TP group (same stage) in the mapping table of LOG sits on one host.
expect_tp_groups_on_one_host() {
  local bad
  bad=$(sed -e 's/\x1b\[[0-9;]*m//g' "$1" | awk '
    $1 ~ /^[0-9]+$/ && NF >= 6 { if (($4 in host) && host[$4] != $2) print "stage " $4; host[$4] = $2 }')
  [[ -z "$bad" ]] || fail "$(basename "$1"): a TP group spans hosts ($bad)"
  grep -qE '^0 +[^ ]+ +cpu' "$1" || fail "$(basename "$1"): no mapping table"
}

finish() {
  if ((FAILURES > 0)); then
    echo "$FAILURES check(s) failed" >&2
    exit 1
  fi
  echo "all checks passed"
}
