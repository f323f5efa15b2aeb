#!/usr/bin/env python3
"""Time from a feeder's loss to the next piece of its share, taken over by a
surviving feeder: two feeders and one trainer (--model none) on loopback tcp,
a long shuffled job; feeder 1 is killed (SIGKILL: its connection closes) or
frozen (SIGSTOP: it falls silent, found at --timeout-ms) mid-stream, and the
trainer's log says when the first piece of feeder 1's share came from
feeder 0. The run's pieces are checked against an undisturbed run's.

    tools/bench_takeover.py BUILD_DIR [--rounds N] [--takeover-s S ...]

Prints one line per case: the medians of N rounds of kill -> first piece,
and its parts (kill -> loss found, loss -> takeover asked, asked -> first
piece).
"""
import argparse
import datetime
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import tempfile
import time


def stamp(line):
    """The RFC 3339 time at the start of a log line, as seconds since the epoch."""
    t = line.split(" ", 1)[0]
    return datetime.datetime.strptime(t, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc).timestamp()


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def one(build, tmp, job_path, name, takeover_s, sig, tag, kill_after=1.0):
    feeder = os.path.join(build, "feeder", "sluice-feeder")
    trainer = os.path.join(build, "trainer", "sluice-trainer")
    eps = ["tcp://127.0.0.1:%d" % p for p in free_ports(2)]
    fl = []
    for j in range(2):
        log = open(os.path.join(tmp, "%s-f%d.log" % (tag, j)), "w")
        fl.append(subprocess.Popen([feeder, "--job", job_path, "--listen", eps[j], "--feeder-index", str(j),
                                    "--feeders", "2", "--threads", "1", "--heartbeat-ms", "200", "--timeout-ms",
                                    "3000"], stdout=log, stderr=subprocess.STDOUT))
    time.sleep(0.3)
    tlog = os.path.join(tmp, "%s-t.log" % tag)
    trace = os.path.join(tmp, "%s-trace.jsonl" % tag)
    tp = subprocess.Popen([trainer, "--connect", ",".join(eps), "--job", name, "--trace", trace, "--heartbeat-ms",
                           "200", "--timeout-ms", "1000", "--takeover-s", str(takeover_s)],
                          stdout=subprocess.DEVNULL, stderr=open(tlog, "w"))
    time.sleep(kill_after)
    if tp.poll() is not None:
        raise SystemExit("the job ended before the kill: make it longer")
    killed = time.time()
    fl[1].send_signal(sig)
    code = tp.wait(timeout=600)
    for p in fl:
        if sig == signal.SIGSTOP and p is fl[1]:
            p.send_signal(signal.SIGCONT)
        p.kill()
        p.wait()
    log = open(tlog).read()
    if code != 0:
        raise SystemExit("trainer failed:\n" + log[-2000:])
    found = asked = first = None
    for line in log.splitlines():
        if found is None and "then a surviving feeder takes its share" in line:
            found = stamp(line)
        elif asked is None and "to take over its share from piece" in line:
            asked = stamp(line)
        elif first is None and "the share's first since its loss" in line:
            first = stamp(line)
    if None in (found, asked, first):
        raise SystemExit("no takeover in the trainer's log:\n" + log[-2000:])
    with open(trace) as f:
        pieces = [x for x in f.read().splitlines() if '"summary"' not in x]
    return {"kill_to_first": first - killed, "kill_to_found": found - killed, "found_to_asked": asked - found,
            "asked_to_first": first - asked}, pieces


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--takeover-s", type=float, nargs="+", default=[0.5, 3.0])
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    tmp = tempfile.mkdtemp(prefix="sluice-bench-takeover-")
    data = os.path.join(tmp, "data")
    subprocess.run([os.path.join(build, "tools", "sluice-record"), "gen", "--output-dir", data, "--records", "6000",
                    "--shards", "8", "--seed", "3", "--image-bytes", "784", "--prefix", "part"], check=True,
                   capture_output=True)
    files = sorted(os.path.join(data, f) for f in os.listdir(data) if f.startswith("part-"))
    job = {"name": "bench-takeover", "files": files, "format": "tfrecord", "global_batch_size": 32, "epochs": 400,
           "prefetch": 4, "shuffle": {"buffer": 256, "seed": 5, "reshuffle_each_epoch": True},
           "features": {"image": {"dtype": "uint8", "shape": [784], "from": "bytes"},
                        "label": {"dtype": "int64", "shape": []}, "id": {"dtype": "int64", "shape": []}}}
    job_path = os.path.join(tmp, "job.json")
    with open(job_path, "w") as f:
        json.dump(job, f)
    ref = None
    print("# 2 feeders, 1 trainer (--model none, --timeout-ms 1000), tcp on loopback; %d rounds each, medians"
          % a.rounds)
    for sig, sname in ((signal.SIGKILL, "SIGKILL (connection closed)"), (signal.SIGSTOP, "SIGSTOP (silent)")):
        for ts in a.takeover_s:
            rows = []
            for r in range(a.rounds):
                m, pieces = one(build, tmp, job_path, job["name"], ts, sig, "%s-%s-%d" % (sig, ts, r))
                if ref is None:
                    ref = pieces
                elif pieces != ref:
                    raise SystemExit("the pieces differ between runs: takeover broke the stream")
                rows.append(m)
            med = {k: statistics.median(x[k] for x in rows) for k in rows[0]}
            print("%-28s --takeover-s %-4g kill -> first piece %.3f s (kill -> loss found %.3f, then takeover "
                  "asked after %.3f, first piece %.3f s later)" % (sname, ts, med["kill_to_first"],
                                                                    med["kill_to_found"], med["found_to_asked"],
                                                                    med["asked_to_first"]))
    print("# every run's %d pieces equal the first run's" % len(ref))


if __name__ == "__main__":
    main()
