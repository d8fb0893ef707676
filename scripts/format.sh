#!/usr/bin/env bash
# Formats the C++ sources git tracks (and the untracked ones it does not ignore) with
# .clang-format.
#   scripts/format.sh            rewrites them in place
#   scripts/format.sh --check    changes nothing: lists the files that would change and
#                                exits 1 when there is one
#   scripts/format.sh [--check] FILE...   only those files
# Test data (tests/**/testdata/) is left as written.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
check=0
if [ "${1:-}" = "--check" ]; then
  check=1
  shift
fi
if ! command -v clang-format >/dev/null 2>&1; then
  echo "format: clang-format is not installed (scripts/deps.sh installs it)" >&2
  exit 2
fi

if [ $# -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(git ls-files --cached --others --exclude-standard -- '*.cc' '*.h' | grep -v '/testdata/' |
                       while read -r f; do [ -f "$f" ] && echo "$f"; done)
fi
if [ ${#files[@]} -eq 0 ]; then exit 0; fi

if [ $check = 0 ]; then
  clang-format -i --style=file "${files[@]}"
  exit 0
fi
unformatted=0
for f in "${files[@]}"; do
  if ! clang-format --style=file "$f" | cmp -s - "$f"; then
    echo "$f"
    unformatted=1
  fi
done
if [ $unformatted = 1 ]; then
  echo "format: the files above differ from .clang-format (scripts/format.sh rewrites them)" >&2
fi
exit $unformatted
