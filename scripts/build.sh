#!/usr/bin/env bash
# Configures and builds headroom into build/ (or $HEADROOM_BUILD_DIR). Incremental.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${HEADROOM_BUILD_DIR:-build}
JOBS=${HEADROOM_JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE:-RelWithDebInfo} "$@" >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
