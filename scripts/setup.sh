#!/usr/bin/env bash
# Sets up a bare Debian machine for headroom: dependencies, configure, and a build of what
# running a job needs (headroom, headroom-worker, headroom-operator). scripts/test.sh builds
# the rest (tests, benchmarks).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! scripts/deps.sh; then
  echo "setup: installing dependencies failed; check network access to Debian's mirrors and root/sudo, then rerun scripts/setup.sh" >&2
  exit 1
fi
HEADROOM_BUILD_TARGETS=${HEADROOM_BUILD_TARGETS:-headroom_runtime_binaries} scripts/build.sh "$@"
