#!/usr/bin/env bash
# Compiles (syntax only, -Wall -Wextra -Werror) every worker source whose LibTorch API moved
# between versions - the files that include worker/torch_version.h - against each LibTorch
# given, so a version gate that is wrong for some LibTorch shows here without a full build
# or a GPU. Deprecated calls fail too (-Werror turns their warnings into errors).
#
#   scripts/check-libtorch-versions.sh [LIBTORCH...]
#
# LIBTORCH: an unpacked LibTorch zip (has include/), a PyTorch package directory
# (site-packages/torch), or an include directory. Default: Debian's (/usr) and, when
# `python3 -c 'import torch'` works, that PyTorch's. Several versions: unpack the zips
# from download.pytorch.org side by side and name each.
# CUDA sources (*_cuda.cc) also need the CUDA runtime headers: $CUDA_HOME/include
# (default /usr/local/cuda); without them they are skipped, and the output says so.
set -euo pipefail
cd "$(dirname "$0")/.."
CXX=${CXX:-g++}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}

roots=("$@")
if [ ${#roots[@]} -eq 0 ]; then
  [ -f /usr/include/torch/csrc/api/include/torch/version.h ] && roots+=(/usr)
  for py in python3 /usr/bin/python3; do
    dir=$("$py" -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2>/dev/null) || continue
    [[ " ${roots[*]} " == *" $dir "* ]] || roots+=("$dir")
  done
fi
[ ${#roots[@]} -gt 0 ] || { echo "check-libtorch-versions: no LibTorch found; name one" >&2; exit 2; }

mapfile -t sources < <(grep -rl --include='*.cc' '#include "worker/torch_version.h"' worker | sort)
[ ${#sources[@]} -gt 0 ] || { echo "check-libtorch-versions: no source includes worker/torch_version.h" >&2; exit 2; }

# A CPU LibTorch ships the c10/cuda headers without the generated cuda_cmake_macros.h (it
# only sets export macros, which a syntax check does not need): an empty one stands in.
stub=$(mktemp -d)
trap 'rm -rf "$stub"' EXIT
mkdir -p "$stub/c10/cuda/impl"
touch "$stub/c10/cuda/impl/cuda_cmake_macros.h"

failed=0
for root in "${roots[@]}"; do
  include=$root
  [ -d "$root/include" ] && include=$root/include
  version_h=$include/torch/csrc/api/include/torch/version.h
  if [ ! -f "$version_h" ]; then
    echo "$root: no torch/csrc/api/include/torch/version.h under $include" >&2
    failed=1
    continue
  fi
  # The same headers reached twice (Debian's python3-torch links to /usr/include): once.
  real=$(realpath "$version_h")
  [[ " ${seen:-} " == *" $real "* ]] && continue
  seen="${seen:-} $real"
  version=$(sed -n 's/^#define TORCH_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' "$version_h" | paste -sd.)
  flags=(-std=c++20 -fsyntax-only -Wall -Wextra -Werror -I. -isystem "$include/torch/csrc/api/include")
  # /usr/include is the compiler's own: naming it again reorders it and breaks <cstdlib>.
  [ "$(realpath "$include")" = /usr/include ] || flags+=(-isystem "$include")
  for src in "${sources[@]}"; do
    extra=()
    if [[ $src == *_cuda.cc ]]; then
      if [ ! -f "$CUDA_HOME/include/cuda_runtime_api.h" ]; then
        echo "LibTorch $version: $src skipped (no $CUDA_HOME/include/cuda_runtime_api.h)"
        continue
      fi
      extra=(-isystem "$CUDA_HOME/include")
      [ -f "$include/c10/cuda/impl/cuda_cmake_macros.h" ] || extra+=(-isystem "$stub")
    fi
    if log=$("$CXX" "${flags[@]}" "${extra[@]}" "$src" 2>&1); then
      echo "LibTorch $version ($root): $src ok"
    else
      echo "LibTorch $version ($root): $src FAILED"
      echo "$log" | grep -E 'error|warning' | head -20
      failed=1
    fi
  done
done
exit $failed
