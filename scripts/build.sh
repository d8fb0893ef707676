#!/usr/bin/env bash
# Configures and builds headroom into build/ (or $HEADROOM_BUILD_DIR). Incremental.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${HEADROOM_BUILD_DIR:-build}
JOBS=${HEADROOM_JOBS:-$(nproc)}
# ccache across checkouts: paths relative to the repo root, and the sloppiness a
# precompiled header needs, so a second clone on the same machine rebuilds from cache.
export CCACHE_BASEDIR="$PWD"
export CCACHE_NOHASHDIR=true
export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-8G}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE:-RelWithDebInfo} "$@" >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
