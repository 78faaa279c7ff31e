# shellcheck shell=bash
# What the bench scripts share; source it after `set -euo pipefail`, then call
#   bench_setup NAME [BUILD_DIR]
# which sets `here` (the checkout), `build` (BUILD_DIR, else build/), `qmpi`, `model` (the
# qwen2.5-0.5b preset: bf16, random weights, the real shape; made on first use under
# .cache/models), `work` (a temporary folder, removed on exit) and `out`
# (bench/results/NAME-<date>.txt, its folder made).
bench_setup() {
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  build="${2:-$here/build}"
  qmpi="$build/qmpi"
  model="$here/.cache/models/qwen2.5-0.5b-bf16"
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  out="$here/bench/results/$1-$(date +%Y%m%d).txt"
  mkdir -p "$(dirname "$out")"
  [[ -f "$model/config.json" ]] ||
    "$qmpi" make-model --preset qwen2.5-0.5b --dtype bf16 --out "$model" >/dev/null
}
