#!/usr/bin/env bash
# Sets up a bare Debian machine for headroom: dependencies, configure, build.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh "$@"
