#!/usr/bin/env bash
# Format sluice's C and CUDA sources with the tree's .clang-format.
#
#   scripts/format.sh           rewrite every tracked .c, .h and .cu file in place
#   scripts/format.sh --check   change nothing; list the files that differ and
#                               exit 1 when there are any (CI runs this)
#   scripts/format.sh FILE...   only these files
#
# clang-format 14 (Debian 12's): another version may lay out a few lines
# differently, so the check asks for 14.
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
if [ "${1:-}" = "--check" ]; then
  check=1
  shift
fi
cf=$(command -v clang-format-14 || command -v clang-format || true)
if [ -z "$cf" ]; then
  echo "format.sh: clang-format is not installed (scripts/deps.sh installs it)" >&2
  exit 2
fi
if ! "$cf" --version | grep -q "version 14\."; then
  echo "format.sh: $("$cf" --version) is not clang-format 14, whose layout .clang-format is checked against" >&2
  exit 2
fi
if [ $# -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(git ls-files '*.c' '*.h' '*.cu')
fi
if [ "$check" = 0 ]; then
  "$cf" -i --style=file "${files[@]}"
  exit 0
fi
bad=0
for f in "${files[@]}"; do
  if ! "$cf" --style=file "$f" | cmp -s - "$f"; then
    echo "format.sh: $f is not formatted (scripts/format.sh $f rewrites it)"
    bad=$((bad + 1))
  fi
done
if [ "$bad" -gt 0 ]; then
  echo "format.sh: $bad of ${#files[@]} files differ from .clang-format's layout"
  exit 1
fi
echo "format.sh: ${#files[@]} files formatted"
