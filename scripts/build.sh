#!/usr/bin/env bash
# Configures and builds headroom into build/ (or $HEADROOM_BUILD_DIR). Incremental.
# HEADROOM_BUILD_TARGETS: what to build (default: everything, tests and benchmarks included).
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
mkdir -p "$BUILD_DIR"
if ! cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE:-RelWithDebInfo} "$@" \
     >"$BUILD_DIR/configure.log" 2>&1; then
  tail -n 30 "$BUILD_DIR/configure.log" >&2
  echo "build: configuring failed (full log: $BUILD_DIR/configure.log); a missing package? run scripts/deps.sh" >&2
  exit 1
fi
targets=()
for t in ${HEADROOM_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
# CMake prints [ NN%] progress per file: what is left is 100 minus that.
if ! cmake --build "$BUILD_DIR" -j "$JOBS" "${targets[@]}"; then
  echo "build: failed; the first 'error:' above names the file and line (rerun with HEADROOM_JOBS=1 for an unmixed log)" >&2
  exit 1
fi
