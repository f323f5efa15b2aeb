#!/usr/bin/env python3
"""What one hostile HELLO costs a feeder: the figures of issue #12 items 1-2.

    tools/bench_hostile.py --feeder BUILD/feeder/sluice-feeder \
        --rogue BUILD/tests/rogue_peer --record BUILD/tools/sluice-record [--json]

Against a feeder serving a small generated job it sends, with rogue_peer
(a raw wire peer, tests/integration/rogue_peer.c):
  1. resume_seq = 2^62 on an endless job: how long until an answer (if any
     comes within 10 s), and how long the feeder then takes to stop on
     SIGTERM (killed after 10 s);
  2. a 65,536 workers x 1,024 replicas HELLO (shard policy data): the
     answer, how long it took (30 s at most), the feeder's resident memory
     (VmRSS) before and after, its peak (VmHWM) and its virtual size
     (VmSize) after.
Run it against two builds to compare them (the wire is the same).
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time


def status_kb(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def start_feeder(args, tmp, tag, job):
    path = os.path.join(tmp, tag + ".json")
    with open(path, "w") as f:
        json.dump(job, f)
    sock = "ipc://%s/%s.sock" % (tmp, tag)
    log = open(os.path.join(tmp, tag + ".log"), "w")
    p = subprocess.Popen([args.feeder, "--job", path, "--listen", sock, "--threads", "1"], stdout=log,
                         stderr=subprocess.STDOUT)
    deadline = time.time() + 20
    while "serving job" not in open(os.path.join(tmp, tag + ".log")).read():
        if time.time() > deadline or p.poll() is not None:
            raise SystemExit("the feeder did not start: " + open(os.path.join(tmp, tag + ".log")).read())
        time.sleep(0.02)
    return p, sock


def rogue(args, sock, job, workers, replicas, resume, wait_ms):
    out = subprocess.run([args.rogue, sock, job, "0", str(workers), str(replicas), str(resume), "--wait-ms",
                          str(wait_ms)], capture_output=True, text=True, timeout=wait_ms / 1000 + 30)
    return json.loads(out.stdout.splitlines()[0])


def stop_time(p, limit=10):
    t0 = time.time()
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=limit)
        return time.time() - t0
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--feeder", required=True)
    ap.add_argument("--rogue", required=True)
    ap.add_argument("--record", required=True)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="sluice-hostile-bench-")
    try:
        subprocess.run([args.record, "gen", "--output-dir", os.path.join(tmp, "d"), "--records", "150", "--shards",
                        "5", "--image-bytes", "16", "--prefix", "part"], check=True, capture_output=True)
        files = sorted(os.path.join(tmp, "d", f) for f in os.listdir(os.path.join(tmp, "d")))
        feats = {"image": {"dtype": "uint8", "shape": [16], "from": "bytes"}, "label": {"dtype": "int64", "shape": []},
                 "id": {"dtype": "int64", "shape": []}}
        base = {"files": files, "format": "tfrecord", "features": feats, "global_batch_size": 8, "prefetch": 4}
        res = {}
        # 1. a far resume point on an endless job
        p, sock = start_feeder(args, tmp, "resume", dict(base, name="resume", epochs=0))
        got = rogue(args, sock, "resume", 1, 1, 1 << 62, 10000)
        res["resume_2^62"] = {"reply": got["reply"], "answer_ms": got["ms"] if got["reply"] != "none" else None,
                              "reason": got.get("reason"), "stop_s": stop_time(p)}
        # 2. a 65536 x 1024 shape
        p, sock = start_feeder(args, tmp, "shape", dict(base, name="shape", epochs=1, shard_policy="data"))
        rss0 = status_kb(p.pid, "VmRSS")
        got = rogue(args, sock, "shape", 65536, 1024, 0, 30000)
        time.sleep(0.5)
        res["shape_65536x1024"] = {"reply": got["reply"], "answer_ms": got["ms"] if got["reply"] != "none" else None,
                                   "reason": got.get("reason"), "rss_before_kb": rss0,
                                   "rss_after_kb": status_kb(p.pid, "VmRSS"), "peak_rss_kb": status_kb(p.pid, "VmHWM"),
                                   "vsize_kb": status_kb(p.pid, "VmSize"), "stop_s": stop_time(p, 30)}
        if args.json:
            print(json.dumps(res))
            return
        for k, v in res.items():
            print("%s: reply %s after %s ms; stopped on SIGTERM %s" % (
                k, v["reply"], "%.1f" % v["answer_ms"] if v["answer_ms"] is not None else "(none)",
                "in %.2f s" % v["stop_s"] if v["stop_s"] is not None else "NOT within the limit (killed)"))
            if "rss_before_kb" in v:
                print("  RSS %d -> %d kB, peak %d kB, virtual %d kB" % (v["rss_before_kb"], v["rss_after_kb"],
                                                                       v["peak_rss_kb"], v["vsize_kb"]))
            if v["reason"]:
                print("  reason: " + v["reason"])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
