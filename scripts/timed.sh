# Sourced by the CI scripts: `timed NAME COMMAND...` runs COMMAND and prints how long it took
# ("timed: NAME 123 s"); under .ci/run (QMPI_CI_TIMES names a file) the line is also appended
# there, so the run ends with one table of where its time went. COMMAND's exit status is kept.
timed() {
  local name=$1 t0 rc=0 line
  shift
  t0=$(date +%s)
  "$@" || rc=$?
  line=$(printf '%-24s %5d s' "$name" $(($(date +%s) - t0)))
  ((rc == 0)) || line+="  (failed, exit $rc)"
  echo "timed: $line"
  [[ -z "${QMPI_CI_TIMES:-}" ]] || echo "$line" >>"$QMPI_CI_TIMES"
  return $rc
}
