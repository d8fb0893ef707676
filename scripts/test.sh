#!/usr/bin/env bash
# Sets up (dependencies, build) and runs the whole test suite. CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
# Everything: the runtime binaries setup.sh builds, plus every test and benchmark.
HEADROOM_BUILD_TARGETS=all scripts/setup.sh
built=$SECONDS
BUILD_DIR=${HEADROOM_BUILD_DIR:-build}
cd "$BUILD_DIR"
status=0
# Tests that need root (memory cgroups) detect it and skip with a reason otherwise.
ctest --output-on-failure -j "${HEADROOM_TEST_JOBS:-2}" "$@" || status=$?
elapsed() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
echo "test.sh: setup+build $(elapsed $((built - started))), tests $(elapsed $((SECONDS - built)))"
exit $status
