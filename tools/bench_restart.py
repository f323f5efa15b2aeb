#!/usr/bin/env python3
"""Restart cost of a feeder: the time from its start to "serving job" over
many shards, without the scan cache, with a cold cache (the first start,
writing it) and with a warm one, measured in one run (docs/performance.md,
"Restart of a feeder: the scan cache").

    tools/bench_restart.py BUILD [--shards 1000] [--records 1000000]
        [--image-bytes 784] [--rounds 3] [--threads N] [--dir /tmp/...]

The shards are made with the project's own `sluice-record gen` (kept in
--dir between runs when they are already there). Every start reads the
shards from the page cache (the first, untimed, start warms it), so the
figures compare the scan's CPU work with the cache's, not the disk. Each
configuration runs --rounds times, interleaved; the medians are printed.
"""
import argparse
import glob
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time


def evict(paths):
    """Drop these files' pages from the page cache (posix_fadvise DONTNEED:
    only their clean pages, nothing else on the machine)."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def start_to_serving(feeder, job, listen, extra, threads, cold=None):
    """Seconds from exec to the "serving job" line, and the scan cache line.
    cold: files to evict from the page cache first (a restart after a reboot,
    or data much larger than memory)."""
    if cold:
        evict(cold)
    cmd = [feeder, "--job", job, "--listen", listen, "--threads", str(threads)] + extra
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    cache_line = ""
    try:
        for line in p.stderr:
            if "scan cache" in line:
                cache_line = line.split("info: ", 1)[-1].strip()
            if "serving job" in line:
                return time.monotonic() - t0, cache_line
            if "error" in line:
                sys.exit("feeder failed: " + line.strip())
        sys.exit("feeder ended before serving")
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=30)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("--shards", type=int, default=1000)
    ap.add_argument("--records", type=int, default=1000000)
    ap.add_argument("--image-bytes", type=int, default=784)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dir", default="/tmp/sluice-bench-restart")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    feeder = os.path.join(build, "feeder", "sluice-feeder")
    record = os.path.join(build, "tools", "sluice-record")
    data = os.path.join(a.dir, "data")
    if len(glob.glob(os.path.join(data, "gen-*.tfrecord"))) != a.shards:
        shutil.rmtree(data, ignore_errors=True)
        os.makedirs(a.dir, exist_ok=True)
        subprocess.run([record, "gen", "--output-dir", data, "--records", str(a.records), "--shards",
                        str(a.shards), "--image-bytes", str(a.image_bytes)], check=True, stdout=subprocess.DEVNULL)
        time.sleep(2.5)  # older than the cache's settle time, so the cold start writes every entry
    files = sorted(glob.glob(os.path.join(data, "gen-*.tfrecord")))
    total = sum(os.path.getsize(f) for f in files)
    job = os.path.join(a.dir, "job.json")
    with open(job, "w") as f:
        json.dump({"name": "restart", "files": files, "format": "tfrecord", "global_batch_size": 64, "epochs": 1,
                   "features": {"label": {"dtype": "int64", "shape": []}}}, f)
    cache = os.path.join(a.dir, "cache")
    listen = "ipc://" + os.path.join(a.dir, "feeder.sock")
    start_to_serving(feeder, job, listen, [], a.threads)  # warm the page cache
    print("%d shards, %d records, %.1f MB; --threads %d; %d rounds (median)" %
          (len(files), a.records, total / 1e6, a.threads, a.rounds))
    for pages in ("in the page cache", "evicted from the page cache before each start"):
        times = {"none": [], "cold": [], "warm": []}
        lines = {}
        for _ in range(a.rounds):
            entries = glob.glob(os.path.join(cache, "*.scan"))
            cold = files if pages.startswith("evicted") else None
            t, _line = start_to_serving(feeder, job, listen, [], a.threads, cold)
            times["none"].append(t)
            shutil.rmtree(cache, ignore_errors=True)
            t, lines["cold"] = start_to_serving(feeder, job, listen, ["--scan-cache", cache], a.threads, cold)
            times["cold"].append(t)
            entries = glob.glob(os.path.join(cache, "*.scan"))
            t, lines["warm"] = start_to_serving(feeder, job, listen, ["--scan-cache", cache], a.threads,
                                                cold and cold + entries)
            times["warm"].append(t)
        size = sum(os.path.getsize(f) for f in glob.glob(os.path.join(cache, "*.scan")))
        med = {k: statistics.median(v) for k, v in times.items()}
        print("\nshards (and, for the warm cache, its entries) %s; entries: %.2f MB" % (pages, size / 1e6))
        for k, label in (("none", "no cache  "), ("cold", "cold cache"), ("warm", "warm cache")):
            print("%s: %.3f s to serving (%.2fx the time without)   all: %s" %
                  (label, med[k], med[k] / med["none"], " ".join("%.3f" % x for x in times[k])))
        print("cold:", lines.get("cold", ""))
        print("warm:", lines.get("warm", ""))


if __name__ == "__main__":
    main()
