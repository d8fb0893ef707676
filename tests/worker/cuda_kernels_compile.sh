#!/usr/bin/env bash
# Compiles every CUDA kernel of the worker (worker/**/*.cu) with nvcc for the GPUs the CUDA
# variant targets, without a device: a CPU build catches a kernel that would break a GPU
# session's build. Exits 77 (skipped) where there is no nvcc.
# Usage: cuda_kernels_compile.sh <nvcc or empty> <source dir> <scratch dir>
set -euo pipefail
nvcc=${1:-}
src=$2
out=$3
if [[ -z "$nvcc" || ! -x "$nvcc" ]]; then
  echo "skipped: no nvcc (HEADROOM_CUDA_ROOT/bin/nvcc)"
  exit 77
fi
mkdir -p "$out"
mapfile -t kernels < <(find "$src/worker" -name '*.cu' | sort)
if [[ ${#kernels[@]} -eq 0 ]]; then
  echo "no kernels under $src/worker" >&2
  exit 1
fi
for k in "${kernels[@]}"; do
  echo "nvcc: $k"
  "$nvcc" -std=c++17 -O3 -I"$src" -Werror all-warnings \
    -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
    -c "$k" -o "$out/$(basename "$k" .cu).o"
done
echo "compiled ${#kernels[@]} kernel file(s)"
