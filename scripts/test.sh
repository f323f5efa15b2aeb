#!/usr/bin/env bash
# Build sluice and pass its tests: the README's test command, also run by CI.
#
#   scripts/test.sh          deps, release build, every ctest test (unit, cli,
#                            integration, python, and cluster: root only, else
#                            skipped; docs/testbed.md)
#   scripts/test.sh --all    first the C sources' layout (scripts/format.sh
#                            --check); then also the unit tests and the
#                            integration tests labelled `sanitize` under
#                            ASan+UBSan and under TSan, and a short libFuzzer
#                            run of every fuzz
#                            target (what CI runs; SLUICE_FUZZ_SECONDS: their
#                            time in all, default 80, split evenly)
#
# After each ctest run, scripts/ctest_report.py lists the slowest tests
# against their budgets (their TIMEOUT) and names any test stopped at it. At
# the end (also after a failure) each stage's time is printed against its
# budget (docs/testbed.md, "CI budget"); a stage over its budget is named.
# SLUICE_CI_BUDGET_S=N (.ci/run sets it) also fails a run that took more
# than N seconds in all, even if every test passed (0: no such check).
# SLUICE_TEST_TIMEOUT_SCALE=K multiplies every test's budget by K, for a
# machine known to be slower or busier than CI's (the budgets are for 2
# cores beside two busy loops).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
scale=-DSLUICE_TEST_TIMEOUT_SCALE=${SLUICE_TEST_TIMEOUT_SCALE:-1}

# stage budgets in seconds (build and tests together), for this 2-core
# machine beside two busy loops; together CI's 40 minutes
declare -A budget=([deps]=60 [format]=20 [release]=1080 [asan]=480 [tsan]=540 [fuzz]=220)
stages=()
declare -A took=()
start=$SECONDS
stage=""
stage_t0=$SECONDS

begin() {   # begin NAME TITLE: the stage NAME starts (the previous one ends)
  finish
  stage=$1
  stage_t0=$SECONDS
  stages+=("$1")
  echo "== $2"
}
finish() {
  if [ -n "$stage" ]; then
    took[$stage]=$((SECONDS - stage_t0))
    stage=""
  fi
}
summary() {
  local rc=$? total over=0
  finish
  total=$((SECONDS - start))
  echo "== stage times (budget: docs/testbed.md, \"CI budget\")"
  for s in "${stages[@]}"; do
    printf '  %-8s %5d s of %5d s\n' "$s" "${took[$s]:-0}" "${budget[$s]}"
  done
  printf '  %-8s %5d s of %5s s\n' total "$total" "${SLUICE_CI_BUDGET_S:--}"
  for s in "${stages[@]}"; do
    if [ "${took[$s]:-0}" -gt "${budget[$s]}" ]; then
      echo "test.sh: OVER BUDGET: stage $s took ${took[$s]} s, its budget is ${budget[$s]} s"
    fi
  done
  if [ "${SLUICE_CI_BUDGET_S:-0}" -gt 0 ] && [ "$total" -gt "$SLUICE_CI_BUDGET_S" ]; then
    echo "test.sh: OVER BUDGET: the whole run took $total s, CI's budget is $SLUICE_CI_BUDGET_S s" \
         "(SLUICE_CI_BUDGET_S): find the stage and the tests that grew above"
    over=1
  fi
  if [ "$rc" -eq 0 ] && [ "$over" -eq 1 ]; then
    exit 1
  fi
  exit "$rc"
}
trap summary EXIT

# run_ctest BUILD_DIR [ctest arguments]: the tests, then the slowest of them
# and any stopped at its TIMEOUT (the report runs whatever ctest's verdict)
run_ctest() {
  local dir=$1 rc=0
  shift
  ctest --test-dir "$dir" --output-on-failure -j"$jobs" "$@" || rc=$?
  python3 scripts/ctest_report.py "$dir" || true
  return "$rc"
}

begin deps "dependencies (scripts/deps.sh)"
scripts/deps.sh

if [ "${1:-}" = "--all" ]; then
  begin format "the C sources against .clang-format (scripts/format.sh --check)"
  scripts/format.sh --check
fi

begin release "release build and every test"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo "$scale" >/dev/null
cmake --build build -j"$jobs"
run_ctest build

if [ "${1:-}" = "--all" ]; then
  begin asan "unit and sanitize-labelled integration tests under AddressSanitizer + UndefinedBehaviorSanitizer"
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DSLUICE_SANITIZE=address "$scale" >/dev/null
  cmake --build build-asan -j"$jobs"
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_ctest build-asan -L "^(unit|sanitize)$"
  begin tsan "unit and sanitize-labelled integration tests under ThreadSanitizer"
  cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_SANITIZE=thread "$scale" >/dev/null
  cmake --build build-tsan -j"$jobs"
  TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/tests/tsan.supp" \
    run_ctest build-tsan -L "^(unit|sanitize)$"
  begin fuzz "fuzz targets, ${SLUICE_FUZZ_SECONDS:-80} s in all"
  scripts/fuzz.sh --total "${SLUICE_FUZZ_SECONDS:-80}"
fi
