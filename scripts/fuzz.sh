#!/usr/bin/env bash
# Build the libFuzzer targets with clang and run each for SECONDS (default 60).
# Corpora live in build-fuzz/corpus/<target> and grow across runs; the
# committed seeds in tests/fuzz/seeds/<name> (fuzz_wire: tests/fuzz/seeds/wire,
# made by tests/fuzz/make_wire_seeds.py) are copied in before each run. A
# crash leaves its input in build-fuzz/ (crash-*) and fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_FUZZ=ON >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target fuzz_tfrecord fuzz_example fuzz_tar fuzz_wire
for t in fuzz_tfrecord fuzz_example fuzz_tar fuzz_wire; do
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
  echo "fuzz: $t ${secs}s, $runs inputs, no crash"
done
