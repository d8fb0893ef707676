#!/usr/bin/env bash
# Sets up (dependencies, build) and runs the whole test suite. CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD_DIR=${HEADROOM_BUILD_DIR:-build}
cd "$BUILD_DIR"
# Tests that need root (memory cgroups) detect it and skip with a reason otherwise.
ctest --output-on-failure -j "${HEADROOM_TEST_JOBS:-2}" "$@"
