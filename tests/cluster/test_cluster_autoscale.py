#!/usr/bin/env python3
"""Cluster test: tools/sluice-autoscale adds a feeder host to a running job
(issue #30 part 3, across hosts).

Feeder 0 on f0, with one decode thread, bound by its map (512 x 512 x 3
images cropped and resized, antialiased, to 32 x 32), serves two trainers
(t0, t1, each in a PID namespace of its own, --model none) that wait for
it most of the time. sluice-autoscale runs on t0, scrapes both trainers'
/metrics across the link every 0.2 s, and when their input wait share
stays above 0.3 for 0.6 s runs its --command once: `ip netns exec <f1>
sluice-feeder --join tcp://<f0>:PORT --feeder-index {index} --feeders
{feeders} ...`, a joining feeder on the host f1. Every link is encrypted
(the keys of common.py). As docs/feeder.md says for a join under CURVE,
the job's feeders share one key pair (feeder-0's: the joiner reaches
feeder 0 with it, and the trainers get its public key in the ROSTER), and
the feeders' allow-list holds the feeders' public key beside the
trainers'. Checked: the controller
started feeder 1 of 2 exactly once and ended 0 after the trainers, the
joiner exited 0 and served pieces (--stats) over CURVE, both trainers
logged the switch (`feeders: 1 -> 2`), each trainer's trace equals the
reference model's line for line, and the trainers' rate (the controller's
--record) after the join is above their rate before it (printed with the
figures; in a Debug or sanitizer build, where every process is slow and
the two cores are full before the join, printed only).

Usage: test_cluster_autoscale.py BUILD_DIR   (root; exit 77 where
namespaces cannot be made; prints "N passed, 0 failed")
"""
import json
import os
import re
import subprocess
import sys
import time

import shutil

from common import (BUILD, FEEDER, HB, RECORD, check_trace, cleanup, fail, finish, harness, ids_of, keys, netns, ok, path,
                    read_log, reference, start_trainer, wait_all, wait_for_log)

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "sluice-autoscale")
W, R = 2, 1
SIDE, OUT = 512, 32
RUN_S = 8.0  # the job's length with one feeder (calibrated)
CAL_EPOCHS = 20
METRICS_PORT = 9465


def feeder_keys():
    """Every feeder's CURVE options: feeder-0's pair, an allow-list of the
    trainers' and the feeders' public keys (a joiner connects to the feeder
    it joins as a client)."""
    k = keys()
    allow = path("keys/allow-feeders")
    if not os.path.isdir(allow):
        os.makedirs(allow, mode=0o700)
        shutil.copy(os.path.join(k["allow"], "trainer.pub"), allow)
        shutil.copy(path("keys/feeder-0.pub"), allow)
    return ["--curve-key", k["feeder"][0], "--curve-allow", allow]


def check_curve(name, log, trainers):
    """The feeder served over CURVE and accepted `trainers` connections,
    refusing none."""
    text = read_log(log)
    m = re.search(r"CURVE: (\d+) trainer connections accepted, 0 refused", text)
    if "CURVE: this feeder's public key is" not in text or m is None or int(m.group(1)) < trainers:
        fail("%s: the feeder should have served over CURVE, accepting at least %d connections and refusing "
             "none:\n%s" % (name, trainers, text[-2000:]))


def feeder0(net, job_path, port, tag):
    """Feeder 0 of 1 on f0, one decode thread, the feeders' keys; (process,
    endpoint, log path)."""
    ep = "tcp://%s:%d" % (net.addr("f0"), port)
    log = path("%s-feeder0.log" % tag)
    p = net.spawn("f0", [FEEDER, "--job", job_path, "--listen", ep, "--feeder-index", "0", "--feeders", "1",
                         "--threads", "1"] + feeder_keys() + list(HB), log=log)
    return p, ep, log


def write_job(files, epochs):
    job = {"name": "autoscale", "files": files, "format": "tfrecord", "global_batch_size": 32, "epochs": epochs,
           "prefetch": 4,
           "features": {"image": {"dtype": "uint8", "shape": [SIDE, SIDE, 3], "from": "bytes"},
                        "label": {"dtype": "int64", "shape": []}, "id": {"dtype": "int64", "shape": []}},
           "map": [{"op": "random_resized_crop", "feature": "image", "size": [OUT, OUT], "scale": [0.5, 1.0]}],
           "shuffle": {"buffer": 16, "seed": 5, "reshuffle_each_epoch": True}}
    p = path("autoscale-%d.json" % epochs)
    with open(p, "w") as f:
        json.dump(job, f)
    return p, job


def trainers(net, ep, job, tag, metrics):
    out = []
    for w in range(W):
        h = "t%d" % w
        m = ("--metrics-listen", "%s:%d" % (net.addr(h), METRICS_PORT)) if metrics else ()
        out.append(start_trainer(net, h, [ep], job["name"], w, W, R, tag=tag, extra=("--model", "none") + m))
    return out


def calibrate(net, files):
    """Epochs for a job of about RUN_S seconds with one feeder."""
    harness.case()
    job_path, job = write_job(files, CAL_EPOCHS)
    fp, ep, flog = feeder0(net, job_path, 5800, "cal")
    wait_for_log(flog, "serving job", fp, "cal: the feeder did not start")
    ts = trainers(net, ep, job, "cal", False)
    if wait_all([p for p, _, _ in ts], 120, "cal: the trainers") != [0] * W:
        fail("cal: a trainer failed:\n%s" % "\n".join(read_log(lg)[-2000:] for _, _, lg in ts))
    took = 0.01
    for _, trace, _ in ts:
        with open(trace) as f:
            took = max(took, json.loads(f.read().splitlines()[-1])["summary"]["stream_seconds"])
    wait_all([fp], 30, "cal: the feeder")
    epochs = int(min(max(CAL_EPOCHS * RUN_S / took, 2 * CAL_EPOCHS), 2000))
    ok("calibration: %d epochs took %.2f s with one feeder: %d epochs (about %.0f s)"
       % (CAL_EPOCHS, took, epochs, RUN_S))
    return epochs


def optimized():
    """None for a release build (the rate check holds there), else why not:
    in a Debug or sanitizer build every process is many times slower, the
    two cores are full before the join, and a second feeder only splits
    them."""
    cache = {}
    try:
        with open(os.path.join(BUILD, "CMakeCache.txt")) as f:
            for line in f:
                k, _, v = line.strip().partition("=")
                cache[k.split(":")[0]] = v
    except OSError:
        return None
    if cache.get("SLUICE_SANITIZE"):
        return "a build with SLUICE_SANITIZE=%s" % cache["SLUICE_SANITIZE"]
    if cache.get("CMAKE_BUILD_TYPE") not in ("Release", "RelWithDebInfo", "MinSizeRel"):
        return "a %s build" % (cache.get("CMAKE_BUILD_TYPE") or "unoptimized")
    return None


def rate_around(rec, at):
    """The trainers' mean samples/s (summed over those still running) in
    the 2 s before the join, and from 1 s after it to 0.5 s before the last
    scrape that saw one."""
    both = [x for x in rec if x["trainers"] > 0]
    if not both:
        return None, None
    end = both[-1]["time"]
    before = [x["samples_per_s"] for x in both if at - 2.0 <= x["time"] < at]
    after = [x["samples_per_s"] for x in both if at + 1.0 <= x["time"] <= end - 0.5]
    return (sum(before) / len(before) if before else None), (sum(after) / len(after) if after else None)


def scale(net, files, ids, epochs):
    harness.case()
    tag = "scale"
    job_path, job = write_job(files, epochs)
    ref = reference(job, [len(x) for x in ids], W, R)
    f0, ep0, f0log = feeder0(net, job_path, 5801, tag)
    wait_for_log(f0log, "serving job", f0, "scale: feeder 0 did not start")
    ep1 = "tcp://%s:5801" % net.addr("f1")
    joiner_log, stats1 = path("scale-feeder1.log"), path("scale-feeder1-stats.json")
    command = " ".join(["ip", "netns", "exec", net.ns("f1"), FEEDER, "--job", job_path, "--listen", ep1,
                        "--join", ep0, "--feeder-index", "{index}", "--feeders", "{feeders}", "--threads", "1",
                        "--stats", stats1] + feeder_keys() + list(HB)) + " >%s 2>&1" % joiner_log
    record = path("scale-record.jsonl")
    urls = ",".join("%s:%d" % (net.addr("t%d" % w), METRICS_PORT) for w in range(W))
    ctl = net.spawn("t0", [sys.executable, TOOL, "--metrics", urls, "--feeders", "1", "--max-feeders", "2",
                           "--threshold", "0.3", "--sustain-s", "0.6", "--interval-s", "0.2", "--cooldown-s", "600",
                           "--gone-s", "1.5", "--scrape-timeout-s", "1", "--record", record, "--command", command],
                    log=path("scale-autoscale.log"))
    ts = trainers(net, ep0, job, tag, True)
    codes = wait_all([p for p, _, _ in ts], 240, "scale: the trainers")
    for w, c in enumerate(codes):
        if c != 0:
            fail("scale: trainer %d exited %d:\n%s" % (w, c, read_log(ts[w][2])[-3000:]))
    if wait_all([f0], 30, "scale: feeder 0")[0] != 0:
        fail("scale: feeder 0 failed:\n%s" % read_log(f0log)[-2000:])
    if wait_all([ctl], 60, "scale: sluice-autoscale")[0] != 0:
        fail("scale: sluice-autoscale failed:\n%s" % read_log(path("scale-autoscale.log")))
    clog = read_log(path("scale-autoscale.log"))
    starts = re.findall(r"starting feeder (\d+) of (\d+)", clog)
    if starts != [("1", "2")]:
        fail("scale: sluice-autoscale should start feeder 1 of 2 once; its log says %s:\n%s" % (starts, clog))
    if not re.search(r"feeder 1 \(pid \d+\) exited 0", clog):
        fail("scale: the joining feeder should exit 0:\n%s\n%s" % (clog, read_log(joiner_log)[-2000:]))
    try:
        with open(stats1) as f:
            served = json.load(f)["pieces"]
    except (OSError, ValueError, KeyError):
        fail("scale: the joining feeder wrote no --stats:\n%s" % read_log(joiner_log)[-2000:])
    if served == 0:
        fail("scale: the joining feeder served no piece:\n%s" % read_log(joiner_log)[-2000:])
    if "feeder 1 of 2 joined the job" not in read_log(f0log):
        fail("scale: feeder 0 did not count the joiner in:\n%s" % read_log(f0log)[-2000:])
    check_curve("scale feeder 0", f0log, W)
    check_curve("scale feeder 1 (joined)", joiner_log, W)
    for w, (_, trace, tlog) in enumerate(ts):
        if "feeders: 1 -> 2" not in read_log(tlog):
            fail("scale: trainer %d did not switch to 2 feeders:\n%s" % (w, read_log(tlog)[-2000:]))
        s = check_trace("scale", w, trace, ref, ids)
        if s["shm_pieces"] != 0:
            fail("scale: trainer %d took pieces from shared memory across hosts: %s" % (w, s))
    with open(record) as f:
        rec = [json.loads(x) for x in f]
    at = next((x["time"] for x in rec if x["started"]), None)
    before, after = rate_around(rec, at)
    if before is None or after is None:
        fail("scale: too few scrapes around the join at %.1f s to compare the rates: %s" % (at - rec[0]["time"], rec))
    slow = optimized()
    if after <= before and slow is None:
        fail("scale: the trainers' rate did not rise: %.0f samples/s before the join, %.0f after" % (before, after))
    ok("sluice-autoscale on t0 started one joining feeder on f1 %.1f s into the job, which served %d pieces over "
       "CURVE; traces exact; the trainers' rate %.0f samples/s before, %.0f after (%.2fx%s)"
       % (at - rec[0]["time"], served, before, after, after / before,
          "; not checked in %s" % slow if slow else ""))


def main():
    t0 = time.time()
    net = netns.require(["f0", "f1", "t0", "t1"])
    out = path("data")
    subprocess.run([RECORD, "gen", "--output-dir", out, "--records", "200", "--shards", "4", "--seed", "3",
                    "--image-bytes", str(SIDE * SIDE * 3), "--prefix", "part"], check=True, capture_output=True)
    files = sorted(os.path.join(out, f) for f in os.listdir(out) if f.startswith("part-"))
    ids = ids_of(files)
    scale(net, files, ids, calibrate(net, files))
    finish(net, t0)


if __name__ == "__main__":
    try:
        main()
    finally:
        harness.stop_all()
        cleanup()
