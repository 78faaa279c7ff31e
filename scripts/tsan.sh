#!/usr/bin/env bash
# The threaded parts (HTTP front, request hub, ZeroMQ broker, serve loop, replica scheduler)
# built with ThreadSanitizer, in their own folder (build-tsan/, or $QMPI_TSAN_BUILD_DIR), and
# their unit tests run (test_serve, test_engine). Any data race or lock-order inversion fails
# its binary with both stacks in build-tsan/unit-logs/.
#   bash scripts/tsan.sh                  # test_serve and test_engine
#   bash scripts/tsan.sh test_serve       # only these
# Reports from libraries qmpi does not build (Open MPI, libzmq, libgomp) are suppressed in
# scripts/tsan.supp, each with its reason; qmpi's own code never is.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${QMPI_TSAN_BUILD_DIR:-$here/build-tsan}"
jobs="${QMPI_JOBS:-$(nproc)}"
source "$here/scripts/ccache_env.sh"
source "$here/scripts/timed.sh"
mkdir -p "$build"
# -O1 as in sanitize.sh: compile time, and stacks that read well.
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O1" \
  -DQMPI_CUDA=OFF -DQMPI_SANITIZE=thread -DPython3_EXECUTABLE=/usr/bin/python3 \
  >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
targets=("$@")
[[ ${#targets[@]} == 0 ]] && targets=(test_serve test_engine)
timed "tsan: build" cmake --build "$build" -j "$jobs" --target "${targets[@]}"
# halt_on_error: the first report fails the binary with its two stacks. libgomp is not
# instrumented, so its barriers are invisible to TSan: one OpenMP thread.
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$here/scripts/tsan.supp:${TSAN_OPTIONS:-}"
export QMPI_UNIT_OMP_THREADS=1
timed "tsan: unit tests" bash "$here/scripts/run_unit_binaries.sh" "$build" "${targets[@]}"
