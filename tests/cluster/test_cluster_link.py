#!/usr/bin/env python3
"""Cluster test: a stream's end survives a slow link.

Two hosts, a feeder on f0 and a trainer on t0 (PID namespace: pieces by
copy), both links shaped to 10 Gbit/s with a token bucket (tc tbf), so
that the feeder's socket still holds data when its job is done. A feeder
that exited as soon as its ENDs were queued lost them: the trainer's
heartbeats, unread in the feeder's socket, made the kernel close it with a
reset, which discards what it has not sent yet (issue #14: every run of
one epoch of Fashion-MNIST-sized pieces over such a link failed with
"connection closed"). The feeder now waits for each trainer's BYE (sent
when its stream is over) or for its timeout. Three runs; each trainer
must finish with every element, and the feeder must log the BYE before it
says it is done. The link is encrypted (CURVE, the keys of common.py), as
on a real cluster: the feeder must also log the one trainer connection it
accepted over CURVE.

Usage: test_cluster_link.py BUILD_DIR   (root; exit 77 where namespaces
cannot be made; prints "N passed, 0 failed")
"""
import json
import subprocess
import sys

from common import (RECORD, check_curve, cleanup, fail, finish, harness, netns, ok, path, read_log, start_feeder,
                    start_trainer, wait_all, wait_for_log)

RUNS = 3
RECORDS = 30000


def main():
    net = netns.require(["f0", "t0"])
    for h in ("f0", "t0"):
        try:
            p = net.run(h, ["tc", "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate", "10gbit", "burst", "4mb",
                            "latency", "50ms"], capture_output=True, text=True)
        except OSError as e:
            p = None
            why = str(e)
        if p is None or p.returncode != 0:
            net.down()
            print("SKIP: cannot shape a link here (tc qdisc tbf): %s" % (why if p is None else p.stderr.strip()))
            sys.exit(netns.SKIP)
    out = path("big")
    subprocess.run([RECORD, "gen", "--output-dir", out, "--records", str(RECORDS), "--shards", "4", "--seed", "5",
                    "--image-bytes", "784", "--prefix", "part"], check=True, capture_output=True)
    job = {"name": "link", "files": [out + "/part-*"], "format": "tfrecord", "global_batch_size": 256,
           "epochs": 2, "prefetch": 8,
           "features": {"image": {"dtype": "uint8", "shape": [784], "from": "bytes"},
                        "label": {"dtype": "int64", "shape": []}, "id": {"dtype": "int64", "shape": []}}}
    job_path = path("link.json")
    with open(job_path, "w") as f:
        json.dump(job, f)
    for run in range(RUNS):
        harness.case()
        tag = "link%d" % run
        fp, ep, flog = start_feeder(net, "f0", job_path, 5700 + run, tag=tag)
        wait_for_log(flog, "serving job", fp, "%s: the feeder did not start" % tag)
        tp, trace, tlog = start_trainer(net, "t0", [ep], "link", 0, 1, 1, tag=tag, extra=("--model", "none"))
        if wait_all([tp], 120, tag + ": trainer")[0] != 0:
            fail("%s: the trainer failed over a shaped link:\n%s" % (tag, read_log(tlog)))
        if wait_all([fp], 30, tag + ": feeder")[0] != 0:
            fail("%s: the feeder failed:\n%s" % (tag, read_log(flog)))
        with open(trace) as f:
            summary = json.loads(f.read().splitlines()[-1])["summary"]
        if summary["elements"] != 2 * RECORDS:
            fail("%s: the trainer got %d elements of %d" % (tag, summary["elements"], 2 * RECORDS))
        log = read_log(flog)
        bye, done = log.find("worker 0 said goodbye"), log.find("every worker has its data: done")
        if bye < 0 or done < 0 or bye > done:
            fail("%s: the feeder should be done only after the trainer's BYE:\n%s" % (tag, log))
        check_curve(tag, flog, 1)
    ok("%d runs over a 10 Gbit/s shaped, encrypted link: every element arrived, each feeder exited after its "
       "trainer's BYE" % RUNS)
    finish(net)


if __name__ == "__main__":
    try:
        main()
    finally:
        cleanup()
