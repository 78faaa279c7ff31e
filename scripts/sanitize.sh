#!/usr/bin/env bash
# The unit tests built with AddressSanitizer and UndefinedBehaviorSanitizer, in their own folder
# (build-asan/, or $QMPI_ASAN_BUILD_DIR), then run with ctest. Any report fails the test.
#   bash scripts/sanitize.sh                      # every unit test binary
#   bash scripts/sanitize.sh test_requests test_serve   # only these
# QMPI_FUZZ_ITERATIONS=100000 bash scripts/sanitize.sh test_serve runs the fuzz tests longer.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${QMPI_ASAN_BUILD_DIR:-$here/build-asan}"
jobs="${QMPI_JOBS:-$(nproc)}"
source "$here/scripts/ccache_env.sh"
mkdir -p "$build"
# -O1: a quarter of -O3's compile time, and stacks that still read well; assertions stay on.
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O1" -DQMPI_CUDA=OFF \
  -DQMPI_SANITIZE=address,undefined -DPython3_EXECUTABLE=/usr/bin/python3 \
  >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
targets=("$@")
if [[ ${#targets[@]} == 0 ]]; then
  # and the block decoder the kernels.ggml_blocks_numpy check feeds
  targets=($(cmake --build "$build" --target help | sed -n 's/^\(test_[a-z]*\):.*/\1/p') qmpi_ggml_decode)
fi
start=$(date +%s)
cmake --build "$build" -j "$jobs" --target "${targets[@]}"
echo "sanitize: built ${targets[*]} in $(( $(date +%s) - start )) s"
# Open MPI and HDF5 keep some allocations until exit on purpose: leaks are not reported.
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
cd "$build"
regex=$(IFS='|'; echo "${targets[*]#test_}")
ctest -L unit -R "^(${regex//test_/})\\." --output-on-failure --timeout 900 -j 2
