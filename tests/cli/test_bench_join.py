#!/usr/bin/env python3
"""tools/bench_join.py, smoke-tested (issue #30 part 1; docs/performance.md,
"Feeders that join"). No rate is asserted (the machine's cores are shared).

- --help: exit 0, the options listed.
- Usage errors: exit 2 with the option's name (workers 0, a join after the
  run's end, a scrape interval of 0).
- --quick --json (a run of about 6 s with one feeder, a joiner at 2 s):
  exit 0; the JSON's shape; every element of every epoch delivered once
  (the trainers' elements = epochs x 200); the joiner served pieces, was
  counted in by feeder 0 and the trainers switched after its start; both
  rates measured, and the table of the rate over time covers the join.
- Without root: exit 77 and a SKIP line (setpriv, where there is one).

Root (the test bed's namespaces) is needed for the run: without it, exit
77 (skipped).
"""
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "tools", "bench_join.py")
RECORDS = 200  # the bench's data set


def fail(msg):
    print("FAIL: %s" % msg)
    sys.exit(1)


def main():
    if len(sys.argv) != 2:
        print("usage: test_bench_join.py BUILD_DIR", file=sys.stderr)
        return 2
    build = sys.argv[1]
    h = subprocess.run([sys.executable, BENCH, "--help"], capture_output=True, text=True, timeout=30)
    if h.returncode != 0 or "--join-at" not in h.stdout or "--autoscale" not in h.stdout:
        fail("--help: exit %d\n%s" % (h.returncode, h.stdout + h.stderr))
    print("ok --help")
    for extra, name in ((["--workers", "0"], "--workers"), (["--run-s", "5", "--join-at", "6"], "--join-at"),
                        (["--interval-s", "0"], "--interval-s")):
        q = subprocess.run([sys.executable, BENCH, build] + extra, capture_output=True, text=True, timeout=30)
        if q.returncode != 2 or name not in q.stderr:
            fail("%s: exit %d (want 2 naming %s), %r" % (extra, q.returncode, name, q.stderr))
    print("ok 3 usage errors refused (exit 2)")
    if os.geteuid() != 0:
        print("SKIP: the bench's run needs root (the test bed's network namespaces)")
        return 77
    p = subprocess.run([sys.executable, BENCH, build, "--quick", "--json"], capture_output=True, text=True,
                       timeout=120)
    if p.returncode == 77:
        print(p.stdout.strip())
        return 77
    if p.returncode != 0:
        fail("bench --quick: exit %d\n%s%s" % (p.returncode, p.stdout, p.stderr[-3000:]))
    r = json.loads(p.stdout.splitlines()[-1])
    for k in ("rate_before", "rate_after", "ratio", "join_at_s", "to_90pct_from_start_s", "serving_after_start_s",
              "accepted_after_start_s", "switch_after_start_s", "joiner_pieces", "table", "epochs", "elements"):
        if k not in r:
            fail("the JSON has no %r: %s" % (k, r))
    if r["bench"] != "join" or r["mode"] != "fixed" or r["workers"] != 2:
        fail("the JSON's bench, mode, workers: %s" % r)
    if r["elements"] != r["epochs"] * RECORDS:
        fail("the trainers got %d elements, %d epochs of %d records make %d"
             % (r["elements"], r["epochs"], RECORDS, r["epochs"] * RECORDS))
    if r["joiner_pieces"] <= 0:
        fail("the joining feeder served no piece: %s" % r)
    for k in ("serving_after_start_s", "accepted_after_start_s", "switch_after_start_s"):
        if r[k] is None or not 0 <= r[k] < 30:
            fail("%s: %s (want seconds after the joiner's start)" % (k, r[k]))
    if not r["rate_before"] or not r["rate_after"]:
        fail("a rate is missing: before %s, after %s" % (r["rate_before"], r["rate_after"]))
    ts = [t for t, _ in r["table"]]
    if not ts or ts[0] >= 0 or ts[-1] <= 1:
        fail("the table should cover the join (from before it to more than 1 s after): %s" % ts)
    print("ok --quick: %d epochs, the joiner served %d pieces; %.0f samples/s before, %.0f after"
          % (r["epochs"], r["joiner_pieces"], r["rate_before"], r["rate_after"]))
    if shutil.which("setpriv"):
        q = subprocess.run(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", sys.executable,
                            BENCH, build, "--quick"], capture_output=True, text=True, timeout=30)
        if q.returncode != 77 or not q.stdout.startswith("SKIP: cannot make a cluster"):
            fail("bench without root: exit %d (want 77), %r %r" % (q.returncode, q.stdout, q.stderr))
        print("ok bench without root: exit 77")
    print("passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
