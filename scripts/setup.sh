#!/usr/bin/env bash
# Sets up a bare Debian machine for headroom: dependencies, configure, and a build of what
# running a job on this machine needs (headroom, headroom-worker). scripts/build.sh builds
# the rest (the operator, tests, benchmarks), and scripts/test.sh with every package the
# tests use; this installs only the
# packages that building and running need unless HEADROOM_BUILD_TARGETS asks for more.
set -euo pipefail
cd "$(dirname "$0")/.."
targets=${HEADROOM_BUILD_TARGETS:-headroom_runtime_binaries}
deps_set=""
if [ "$targets" = headroom_runtime_binaries ]; then deps_set=run; fi
if ! scripts/deps.sh $deps_set; then
  echo "setup: installing dependencies failed; check network access to Debian's mirrors and root/sudo, then rerun scripts/setup.sh" >&2
  exit 1
fi
HEADROOM_BUILD_TARGETS=$targets scripts/build.sh "$@"
