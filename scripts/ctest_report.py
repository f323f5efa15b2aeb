#!/usr/bin/env python3
"""After a ctest run: the slowest tests against their budgets, and every test
that ran out of its budget named with it.

    scripts/ctest_report.py BUILD_DIR [--top N] [--near PERCENT]

A test's budget is its TIMEOUT (tests/CMakeLists.txt, python/CMakeLists.txt),
read from the build's CTestTestfile.cmake files; its time and verdict come from the
last run's BUILD_DIR/Testing/Temporary/LastTest.log. ctest marks a test it
killed at its TIMEOUT as failed; a failed test whose time reached its budget is
reported here as over budget. Tests that used more than --near percent of their
budget (default 50) are named too: they are the next ones to time out on a busy
machine. Exit status: 0, or 1 when a test ran out of its budget (scripts/test.sh
runs this after ctest, whose own status already fails the stage).
"""
import argparse
import os
import re
import sys


def budgets(build):
    """{test name: TIMEOUT seconds} as the build registered them (its
    CTestTestfile.cmake files; read, not asked of ctest, whose every run,
    --show-only included, starts a new LastTest.log)."""
    found = {}
    prop = re.compile(r'set_tests_properties\(\[=\[(.+?)\]=\] PROPERTIES .*?\bTIMEOUT "([0-9.]+)"')
    for root, _, files in os.walk(build):
        if "CTestTestfile.cmake" in files:
            with open(os.path.join(root, "CTestTestfile.cmake"), errors="replace") as f:
                for line in f:
                    m = prop.match(line)
                    if m:
                        found[m.group(1)] = float(m.group(2))
    return found


def last_run(build):
    """[(name, seconds, passed)] from the last run's LastTest.log, in finishing order."""
    path = os.path.join(build, "Testing", "Temporary", "LastTest.log")
    runs, name, secs = [], None, None
    with open(path, errors="replace") as f:
        for line in f:
            m = re.match(r"\d+/\d+ Testing: (\S+)", line)
            if m:
                name, secs = m.group(1), None
                continue
            m = re.match(r"Test time = +([0-9.]+) sec", line)
            if m and name:
                secs = float(m.group(1))
                continue
            if name and secs is not None and line.startswith(("Test Passed.", "Test Failed.")):
                runs.append((name, secs, line.startswith("Test Passed.")))
                name, secs = None, None
    return runs


def main(argv):
    ap = argparse.ArgumentParser(description="the slowest tests of the last ctest run against their budgets")
    ap.add_argument("build", help="the build folder ctest ran in")
    ap.add_argument("--top", type=int, default=10, help="how many of the slowest tests to list (10)")
    ap.add_argument("--near", type=float, default=50.0, help="name the tests past this percent of their budget (50)")
    args = ap.parse_args(argv[1:])
    build, top, near = args.build, args.top, args.near
    if not os.path.exists(os.path.join(build, "Testing", "Temporary", "LastTest.log")):
        print(f"ctest report: no LastTest.log in {build}: ctest has not run there")
        return 0
    limits = budgets(build)
    runs = last_run(build)
    if not runs:
        print(f"ctest report: no test ran in {build}")
        return 0

    total = sum(s for _, s, _ in runs)
    print(f"== slowest tests in {build} ({len(runs)} ran, {total:.0f} s of test time;"
          f" budget = the test's TIMEOUT)")
    for name, secs, _ in sorted(runs, key=lambda r: -r[1])[:top]:
        budget = limits.get(name)
        share = f"{100 * secs / budget:3.0f}%" if budget else "   ?"
        print(f"  {secs:7.1f} s of {budget or 0:5.0f} s {share}  {name}")

    over, close = [], []
    for name, secs, passed in runs:
        budget = limits.get(name)
        if not budget:
            continue
        if not passed and secs >= 0.99 * budget:
            over.append((name, secs, budget))
        elif secs > near / 100 * budget:
            close.append((name, secs, budget))
    for name, secs, budget in close:
        print(f"ctest report: NEAR BUDGET: {name} took {secs:.1f} s, {100 * secs / budget:.0f}%"
              f" of its {budget:.0f} s (its TIMEOUT)")
    for name, secs, budget in over:
        print(f"ctest report: OVER BUDGET: {name} was stopped at its TIMEOUT of {budget:.0f} s"
              f" ({secs:.1f} s): it hangs or has grown past its budget; see its output above,"
              f" and raise the TIMEOUT only with a new measurement (docs/testbed.md, 'CI budget')")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
