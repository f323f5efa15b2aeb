#!/usr/bin/env python3
"""The feeder's scan cache (--scan-cache DIR, issue #15 part 4) with real
processes: two feeders started at once over one cache directory both write
it (whole entries, no temporary left); a third takes every file from it and
serves every record once; a shard replaced after caching is scanned again
and its new records served, a truncated entry is ignored with a warning and
rewritten; a cache directory that cannot be made leaves a warning and a
feeder that serves.

    python3 tests/integration/test_scan_cache.py BUILD_DIR
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bed  # noqa: E402
import harness  # noqa: E402
from bed import log_path, read_log, wait, wait_for_log  # noqa: E402
from harness import fail, ok, spawn  # noqa: E402

bed.setup(sys.argv[1], "scancache")
FEEDER, TRAINER, TMP = bed.FEEDER, bed.TRAINER, bed.TMP
NREC, NSHARDS = 600, 24  # shard k holds ids 25k .. 25k + 24


def feeder(tag, job_path, cache):
    sock = "ipc://%s/%s.sock" % (TMP, tag)
    p = spawn([FEEDER, "--job", job_path, "--listen", sock, "--threads", "2", "--heartbeat-ms", "200",
               "--scan-cache", cache], log=log_path(tag, "feeder"))
    return p, sock


def serve_all(tag, job_path, job, cache, want_ids, want_line):
    """A feeder with the cache and one trainer: every id of want_ids once,
    and the feeder's scan cache line as given."""
    f, sock = feeder(tag, job_path, cache)
    wait_for_log(tag, "feeder", "serving job", f, "%s: the feeder did not serve" % tag)
    if want_line not in read_log(tag, "feeder"):
        fail("%s: expected %r in the feeder's log" % (tag, want_line))
    trace = os.path.join(TMP, "%s-trace.jsonl" % tag)
    t = spawn([TRAINER, "--connect", sock, "--job", job["name"], "--trace", trace, "--heartbeat-ms", "200"],
              log=log_path(tag, "trainer"), stdout=subprocess.DEVNULL)
    if wait(t, 60, "%s: trainer" % tag) != 0:
        fail("%s: the trainer failed" % tag)
    if wait(f, 30, "%s: feeder" % tag) != 0:
        fail("%s: the feeder should exit 0 once its worker had its END" % tag)
    ids = []
    with open(trace) as fp:
        for line in fp:
            ids += json.loads(line).get("ids", [])
    if sorted(ids) != sorted(want_ids):
        fail("%s: expected %d ids (each as often as the files hold it), got %d" % (tag, len(want_ids), len(ids)))


def entries(cache):
    names = os.listdir(cache)
    left = [n for n in names if n.startswith(".")]
    if left:
        fail("temporaries left in the cache: %s" % left)
    return sorted(n for n in names if n.endswith(".scan"))


def main():
    files = bed.gen("a", NREC, NSHARDS)
    job_path, job = bed.write_job("sc", files, epochs=1)
    cache = os.path.join(TMP, "cache")
    time.sleep(2.2)  # the shards are older than the cache's settle time: entries are written

    # two feeders at once over one directory
    harness.case()
    procs = [feeder(tag, job_path, cache)[0] for tag in ("twoA", "twoB")]
    for tag, p in zip(("twoA", "twoB"), procs):
        wait_for_log(tag, "feeder", "serving job", p, "%s: the feeder did not serve" % tag)
        if "scan cache %s: " % cache not in read_log(tag, "feeder"):
            fail("%s: no scan cache line in the feeder's log" % tag)
    for p in procs:
        p.send_signal(signal.SIGTERM)
        wait(p, 30, "two feeders")
    if len(entries(cache)) != NSHARDS:
        fail("expected %d entries, got %s" % (NSHARDS, entries(cache)))
    serve_all("warm", job_path, job, cache, list(range(NREC)),
              "scan cache %s: %d of %d files from the cache, 0 scanned" % (cache, NSHARDS, NSHARDS))
    ok("two feeders at once write %d whole entries into one directory; a third takes all %d files from it and "
       "serves ids 0..%d once each" % (NSHARDS, NSHARDS, NREC - 1))

    # a shard replaced (its records change), an entry truncated
    harness.case()
    other = bed.gen("b", 2 * NREC, NSHARDS)  # its shard 0 holds ids 0..49
    shutil.copyfile(other[0], files[0])  # same inode, new size and mtime
    sizes = {}
    for name in entries(cache):
        sizes[name] = os.path.getsize(os.path.join(cache, name))
    # one entry truncated: another file's than shard 0's (shard 0's own
    # entry is stale by its header, which the cut leaves whole, so it is
    # scanned again without being read as damaged: no report to expect).
    # An entry's body holds its data file's absolute path.
    own = os.path.realpath(files[0]).encode()
    others = [n for n in entries(cache) if own not in open(os.path.join(cache, n), "rb").read()]
    if len(others) != NSHARDS - 1:
        fail("changed: %d entries name %s, want 1" % (NSHARDS - len(others), own.decode()))
    victim = others[0]
    with open(os.path.join(cache, victim), "r+b") as fp:
        fp.truncate(sizes[victim] // 2)
    want = list(range(50)) + list(range(25, NREC))
    serve_all("changed", job_path, job, cache, want, "scan cache %s: " % cache)
    log = read_log("changed", "feeder")
    if "scan cache: ignored" not in log or victim not in log:
        fail("changed: the truncated entry %s should be reported" % victim)
    line = [x for x in log.splitlines() if "files from the cache" in x][0]
    # shard 0 changed (scanned; too recent to cache), the truncated entry's file scanned and rewritten
    if "22 of 24 files from the cache, 2 scanned (1 damaged entries), 1 entries written" not in line:
        fail("changed: unexpected scan cache line: %s" % line)
    if os.path.getsize(os.path.join(cache, victim)) == sizes[victim] // 2 and "1 entries written" in line:
        fail("changed: the truncated entry should have been rewritten")
    ok("a shard replaced after caching is scanned again and its new ids served; a truncated entry is "
       "reported, its file scanned and the entry rewritten")

    # a cache directory that cannot be made
    harness.case()
    bad = "/proc/self/no-such/cache"
    f, sock = feeder("bad", job_path, bad)
    wait_for_log("bad", "feeder", "serving job", f, "bad: the feeder did not serve")
    log = read_log("bad", "feeder")
    if "warning: scan cache: mkdir(%s)" % bad not in log:
        fail("bad: expected a warning naming mkdir(%s)" % bad)
    f.send_signal(signal.SIGTERM)
    wait(f, 30, "bad: feeder")
    ok("a cache directory that cannot be made is a warning; the feeder scans and serves")
    bed.finish()


if __name__ == "__main__":
    try:
        main()
    finally:
        harness.stop_all()
        bed.cleanup()
