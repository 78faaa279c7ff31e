#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds (warnings are errors), and runs every
# unit and integration test with ctest, two at a time. Integration tests that start several
# ranks take both slots and a lock (so MPI jobs never overlap); single-rank ones share the
# slots with each other and with the unit tests (tests/integration/schedule.txt).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$here/scripts/timed.sh"
timed "test: setup" bash "$here/scripts/setup.sh" --tests
timed "test: build" bash "$here/scripts/build.sh" -DQMPI_WERROR=ON  # a new warning fails the suite
cd "${QMPI_BUILD_DIR:-$here/build}"
timed "test: ctest" ctest --output-on-failure --timeout 900 -j 2 "$@"
