#!/usr/bin/env bash
# Configures and builds qmpi in build/ (Release, ccache when present). Extra arguments go to
# CMake's configure step, e.g. scripts/build.sh -DQMPI_NATIVE=OFF
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${QMPI_BUILD_DIR:-$here/build}"
jobs="${QMPI_JOBS:-$(nproc)}"
source "$here/scripts/ccache_env.sh"
mkdir -p "$build"
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DPython3_EXECUTABLE=/usr/bin/python3 "$@" >"$build/configure.log" 2>&1 ||
  { cat "$build/configure.log"; exit 1; }
grep -E "qmpi:" "$build/configure.log" || true
cmake --build "$build" -j "$jobs"
