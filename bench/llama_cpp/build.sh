#!/usr/bin/env bash
# Builds llama.cpp's own binaries (llama-bench, llama-batched-bench, llama-server, llama-quantize,
# llama-cli) from a pinned source release with native code, the way its users build it, for the
# external baselines of bench/llama_cpp/*. Nothing of llama.cpp is committed here.
#
# The source: GitHub is not reachable from these machines, but npm is, and node-llama-cpp
# publishes the exact llama.cpp release it binds as a git bundle (llama/gitRelease.bundle).
# node-llama-cpp 3.21.1 pins llama.cpp commit 80fb11ac73e6 (September 2026); only its source is
# used, not the binding.
#
# Usage: bench/llama_cpp/build.sh [DIR]   (default .cache/llama.cpp; prints DIR/build/bin)
#   LLAMA_JOBS (nproc), NICE (10: builds beside other work without starving it)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dir="${1:-$here/.cache/llama.cpp}"
pin_pkg="node-llama-cpp@3.21.1" pin_commit="80fb11ac73e66d89eae2c6a91d8a77428fa733ed"
bin="$dir/build/bin"
if [[ -x "$bin/llama-server" && -x "$bin/llama-bench" && -x "$bin/llama-batched-bench" &&
      -x "$bin/llama-quantize" ]]; then
  echo "$bin"; exit 0
fi
if [[ ! -d "$dir/src/.git" ]]; then
  tmp="$(mktemp -d)"
  (cd "$tmp" && npm pack --silent "$pin_pkg" >/dev/null && tar xzf node-llama-cpp-*.tgz package/llama/gitRelease.bundle)
  mkdir -p "$dir"
  git -c advice.detachedHead=false clone -q "$tmp/package/llama/gitRelease.bundle" "$dir/src"
  rm -rf "$tmp"
fi
got="$(git -C "$dir/src" rev-parse HEAD)"
[[ "$got" == "$pin_commit" ]] || { echo "llama.cpp source is $got, expected $pin_commit" >&2; exit 1; }
# Release build, native code (GGML_NATIVE, llama.cpp's default), no curl/SSL (no downloads here).
nice -n "${NICE:-10}" cmake -S "$dir/src" -B "$dir/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF >"$dir/configure.log" 2>&1 || { cat "$dir/configure.log" >&2; exit 1; }
nice -n "${NICE:-10}" cmake --build "$dir/build" -j "${LLAMA_JOBS:-$(nproc)}" \
  --target llama-bench llama-batched-bench llama-server llama-quantize llama-cli >"$dir/build.log" 2>&1 ||
  { tail -30 "$dir/build.log" >&2; exit 1; }
echo "$bin"
