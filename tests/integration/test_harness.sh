#!/usr/bin/env bash
# The integration harness itself: a case that times out must stop every
# process it started (feeders too, not only the trainers it waited for) and
# show the tails of their logs.
#
# Usage: test_harness.sh BUILD_DIR     (prints "N passed, N failed")
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$1
name="selftest-$$-$RANDOM"
out=$(SLUICE_IT_SELFTEST=$name python3 "$here/test_feed.py" "$build" 2>&1)
rc=$?
passed=0 failed=0
check() { # check DESCRIPTION CONDITION...
  local what=$1; shift
  if "$@"; then passed=$((passed + 1)); echo "ok - $what"
  else failed=$((failed + 1)); echo "FAIL - $what"; echo "$out" | tail -n 40; fi
}
check "a timed-out case exits 1" test "$rc" -eq 1
check "it says which wait timed out" grep -q "selftest: trainer did not finish within 2 s" <<<"$out"
check "it shows the feeder's log tail" grep -q -- "---- self-feeder0.log" <<<"$out"
check "the tail holds the feeder's lines" grep -q "worker 0 connected" <<<"$out"
check "it shows the trainer's log tail" grep -q -- "---- self-trainer0.log" <<<"$out"
sleep 0.2
left=$(pgrep -f -- "$name" || true)
check "no process of the case is left running" test -z "$left"
[ -n "$left" ] && kill -9 $left 2>/dev/null
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
