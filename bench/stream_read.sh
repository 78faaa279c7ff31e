#!/usr/bin/env bash
# The plain STREAM-style read every bench script compares against (bench/stream_read.c): built
# into BUILD_DIR with the system compiler, with the one set of flags that defines the yardstick,
# then run; prints its JSON line. Threads come from OMP_NUM_THREADS.
# Usage: bench/stream_read.sh BUILD_DIR [MiB] [repetitions]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="$1/stream_read"
shift
[[ "$bin" -nt "$here/stream_read.c" ]] ||
  cc -O3 -march=native -ffast-math -fopenmp "$here/stream_read.c" -o "$bin"
exec "$bin" "$@"
