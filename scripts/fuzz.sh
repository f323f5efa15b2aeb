#!/usr/bin/env bash
# Build the libFuzzer targets with clang and fuzz them, one at a time.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]          each target SECONDS (default 60)
#   scripts/fuzz.sh --total SECONDS [TARGET...]    SECONDS in all, split evenly (at least 1 s each):
#                                                  CI's budget (scripts/test.sh, SLUICE_FUZZ_SECONDS)
#
# TARGETs are names such as fuzz_ckpt (default: every tests/fuzz/fuzz_*.c,
# one per parser entry point). Corpora live in build-fuzz/corpus/<target>
# and grow across runs; the committed seeds in tests/fuzz/seeds/<name>
# (fuzz_wire: tests/fuzz/make_wire_seeds.py; the targets of issue #26:
# tests/fuzz/make_seeds.py) are copied in before each run. Each target
# prints its inputs run and inputs per second. A crash leaves its input in
# build-fuzz/ (crash-*) and fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
total=""
if [ "${1:-}" = "--total" ]; then
  total=${2:?--total needs SECONDS}
  shift 2
fi
secs=60
if [ -z "$total" ] && [ $# -gt 0 ] && [[ "$1" =~ ^[0-9]+$ ]]; then
  secs=$1
  shift
fi
if [ $# -gt 0 ]; then
  targets=("$@")
else
  targets=()
  for f in tests/fuzz/fuzz_*.c; do
    targets+=("$(basename "$f" .c)")
  done
fi
if [ -n "$total" ]; then
  secs=$(( total / ${#targets[@]} ))
  [ "$secs" -ge 1 ] || secs=1
fi
# the scratch files of the targets that read a path (tests/fuzz/fuzz_common.h)
SLUICE_FUZZ_TMPDIR=$(mktemp -d "$( [ -w /dev/shm ] && echo /dev/shm || echo /tmp )/sluice-fuzz.XXXXXX")
export SLUICE_FUZZ_TMPDIR
trap 'rm -rf "$SLUICE_FUZZ_TMPDIR"' EXIT
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_FUZZ=ON >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target "${targets[@]}"
for t in "${targets[@]}"; do
  mkdir -p "build-fuzz/corpus/$t"
  seeds="tests/fuzz/seeds/${t#fuzz_}"
  if [ -d "$seeds" ]; then
    cp -p "$seeds"/* "build-fuzz/corpus/$t/"
  fi
  log="build-fuzz/$t.log"
  if ! (cd build-fuzz && "./tests/$t" -max_total_time="$secs" -print_final_stats=1 "corpus/$t" >"$t.log" 2>&1); then
    tail -n 60 "$log"
    echo "fuzz: $t FAILED (input saved in build-fuzz/)"
    exit 1
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  echo "fuzz: $t ${secs}s, $runs inputs ($rate/s), no crash"
done
