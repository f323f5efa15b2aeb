#!/usr/bin/env python3
"""Check trainer traces: every element exactly once per epoch across the
workers (or `--copies W` times under shard_policy off), and print totals.

Usage: check_traces.py [--expect N] [--copies K] TRACE.jsonl...
Exit 0 when every epoch holds ids 0..N-1 exactly K times each."""
import argparse
import collections
import json
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--expect", type=int, help="elements per epoch (ids 0..N-1)")
ap.add_argument("--copies", type=int, default=1)
ap.add_argument("traces", nargs="+")
a = ap.parse_args()
per_epoch = collections.defaultdict(collections.Counter)
pieces = empty = 0
for path in a.traces:
    with open(path) as f:
        for line in f:
            x = json.loads(line)
            if "summary" in x:
                s = x["summary"]
                print("worker %d: %d steps, %d pieces, %d elements in %.2f s (%.0f elements/s, waited %.2f s)"
                      % (s["worker"], s["steps"], s["pieces"], s["elements"], s["seconds"], s["elements_per_s"],
                         s["wait_s"]))
                if not s["ok"]:
                    sys.exit("trace %s ends with a failed run" % path)
                continue
            pieces += 1
            empty += x["size"] == 0
            per_epoch[x["epoch"]].update(x["ids"])
bad = 0
for epoch, ids in sorted(per_epoch.items()):
    n = a.expect if a.expect is not None else len(ids)
    want = collections.Counter({i: a.copies for i in range(n)})
    if ids != want:
        missing = sum((want - ids).values())
        extra = sum((ids - want).values())
        print("epoch %d: %d ids missing, %d extra" % (epoch, missing, extra))
        bad += 1
    else:
        print("epoch %d: all %d elements exactly %s" % (epoch, n, "once" if a.copies == 1 else "%d times" % a.copies))
print("%d pieces (%d empty)" % (pieces, empty))
sys.exit(1 if bad else 0)
