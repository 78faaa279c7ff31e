#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds (warnings are errors), and runs every
# unit and integration test with ctest (integration tests take a lock, so MPI jobs never overlap).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$here/scripts/setup.sh" --tests
bash "$here/scripts/build.sh" -DQMPI_WERROR=ON  # a new warning fails the suite
cd "${QMPI_BUILD_DIR:-$here/build}"
ctest --output-on-failure --timeout 900 -j 2 "$@"
