#!/usr/bin/env bash
# The C and C++ files of src/, kernels/, io/, tests/ and bench/ (those git tracks) as
# clang-format writes them with the checkout's .clang-format: prints each file that differs and
# exits 1 (CI runs it before the tests). `--fix` rewrites them instead.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
fix=0
[[ "${1:-}" == "--fix" ]] && fix=1
[[ -f .clang-format ]] || { echo "check_format: no .clang-format in $(pwd)" >&2; exit 1; }
command -v clang-format >/dev/null || { echo "check_format: clang-format is not installed (scripts/setup.sh --tests)" >&2; exit 1; }
mapfile -t files < <(git ls-files -- src kernels io tests bench |
  grep -E '\.(c|cc|cpp|h|hpp|cu|cuh)$' || true)
# Batches of files on every core: one clang-format per file (682 files) took most of a minute.
mapfile -t differ < <(printf '%s\0' "${files[@]}" | xargs -0 -r -n 32 -P "$(nproc)" sh -c '
  for f; do [ -f "$f" ] && ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1 && echo "$f"; done
  exit 0' _ | sort)
if ((fix && ${#differ[@]})); then clang-format -i "${differ[@]}"; fi
if ((${#differ[@]} == 0)); then
  echo "check_format: ${#files[@]} files as clang-format writes them"
  exit 0
fi
printf '%s\n' "${differ[@]}"
if ((fix)); then
  echo "check_format: formatted ${#differ[@]} file(s)"
  exit 0
fi
echo "check_format: ${#differ[@]} of ${#files[@]} files differ from clang-format's output;" \
  "run scripts/check_format.sh --fix (or clang-format -i FILE)" >&2
exit 1
