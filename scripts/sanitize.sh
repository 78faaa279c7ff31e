#!/usr/bin/env bash
# The unit tests (the fuzzers among them) built with AddressSanitizer and
# UndefinedBehaviorSanitizer, in their own folder (build-asan/, or $QMPI_ASAN_BUILD_DIR), and run.
# Any report fails the run.
#   bash scripts/sanitize.sh                      # every unit test binary
#   bash scripts/sanitize.sh test_requests test_serve   # only these
# QMPI_FUZZ_ITERATIONS=100000 bash scripts/sanitize.sh test_serve runs the fuzz tests longer.
# Each binary runs whole, two at a time (scripts/run_unit_binaries.sh), not one process per
# test as ctest does: under ASan the per-process start (and the Qwen tokenizer each tokenizer
# test loads) cost more than the tests.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${QMPI_ASAN_BUILD_DIR:-$here/build-asan}"
jobs="${QMPI_JOBS:-$(nproc)}"
source "$here/scripts/ccache_env.sh"
source "$here/scripts/timed.sh"
mkdir -p "$build"
# -O1: a quarter of -O3's compile time, and stacks that still read well; assertions stay on.
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O1" -DQMPI_CUDA=OFF \
  -DQMPI_SANITIZE=address,undefined -DPython3_EXECUTABLE=/usr/bin/python3 \
  >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
targets=("$@")
if [[ ${#targets[@]} == 0 ]]; then
  targets=($(cmake --build "$build" --target help | sed -n 's/^\(test_[a-z]*\):.*/\1/p'))
fi
# and the block decoder the kernels.ggml_blocks_numpy check feeds
extra=()
[[ " ${targets[*]} " == *" test_kernels "* ]] && extra=(qmpi_ggml_decode)
timed "sanitize: build" cmake --build "$build" -j "$jobs" --target "${targets[@]}" "${extra[@]}"
# Open MPI and HDF5 keep some allocations until exit on purpose: leaks are not reported.
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
rc=0
timed "sanitize: unit tests" bash "$here/scripts/run_unit_binaries.sh" "$build" "${targets[@]}" || rc=1
if ((${#extra[@]})); then
  (cd "$build" && timed "sanitize: ggml_blocks" ctest -R '^kernels\.ggml_blocks_numpy$' \
    --output-on-failure --timeout 900) || rc=1
fi
exit $rc
