#!/usr/bin/env bash
# Build sluice and pass its tests: the README's test command, also run by CI.
#
#   scripts/test.sh          deps, release build, every ctest test (unit, cli,
#                            integration, and cluster: root only, else skipped;
#                            docs/testbed.md)
#   scripts/test.sh --all    also the unit and integration tests under ASan+UBSan
#                            and under TSan, and a short libFuzzer run of every
#                            fuzz target (what CI runs; SLUICE_FUZZ_SECONDS: their
#                            time in all, default 80, split evenly)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
jobs=$(nproc)

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"

if [ "${1:-}" = "--all" ]; then
  echo "== unit and integration tests under AddressSanitizer + UndefinedBehaviorSanitizer"
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DSLUICE_SANITIZE=address >/dev/null
  cmake --build build-asan -j"$jobs"
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan -L "unit|integration" --output-on-failure -j"$jobs"
  echo "== unit and integration tests under ThreadSanitizer"
  cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_SANITIZE=thread >/dev/null
  cmake --build build-tsan -j"$jobs"
  TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/tests/tsan.supp" \
    ctest --test-dir build-tsan -L "unit|integration" --output-on-failure -j"$jobs"
  echo "== fuzz targets, ${SLUICE_FUZZ_SECONDS:-80} s in all"
  scripts/fuzz.sh --total "${SLUICE_FUZZ_SECONDS:-80}"
fi
