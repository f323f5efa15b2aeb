#!/usr/bin/env python3
"""Integration: the trainer says which feeder its input waited for (issue #19 part 2).

Two feeders serve one long job to one trainer (a softmax model: --metrics
lines are per trained step). Feeder 1 is
stopped (SIGSTOP) for 1.5 s mid-run, under the takeover delay, then let go
(SIGCONT); the trainer is stopped with SIGINT a little later. Its summary's
input_wait_by_feeder_s must put the pause on feeder 1 (at least 1.3 s, and
at least twice feeder 0's), the parts must add up to the summary's wait_s (to
the wait at the stream's end, here none), the --metrics lines must name
feeder 1 as the bound of the steps that waited longest, and the log line
must give the shares.

Usage: test_stall.py BUILD_DIR     (prints "N passed, 0 failed")
"""
import json
import re
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

BUILD = os.path.abspath(sys.argv[1])
RECORD = os.path.join(BUILD, "tools", "sluice-record")
FEEDER = os.path.join(BUILD, "feeder", "sluice-feeder")
TRAINER = os.path.join(BUILD, "trainer", "sluice-trainer")
TMP = tempfile.mkdtemp(prefix="sluice-stall-")
PASSED = 0
PROCS = []
STAGES = ("read", "decompress", "decode", "assemble", "send", "map")


def fail(msg):
    for p in PROCS:
        if p.poll() is None:
            p.kill()
    print("FAIL: " + msg, file=sys.stderr)
    print("%d passed, 1 failed" % PASSED)
    sys.exit(1)


def ok(name):
    global PASSED
    PASSED += 1
    print("ok %d - %s" % (PASSED, name))


def scrape(port):
    import urllib.request
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
        return r.read().decode()


def main():
    data = os.path.join(TMP, "data")
    subprocess.run([RECORD, "gen", "--output-dir", data, "--records", "480", "--shards", "4", "--seed", "5",
                    "--image-bytes", "12", "--classes", "3"], check=True, capture_output=True)
    job = {"name": "stall-it", "files": [os.path.join(data, "gen-*.tfrecord")], "format": "tfrecord",
           "features": {"image": {"dtype": "uint8", "shape": [12], "from": "bytes"},
                        "label": {"dtype": "int64", "shape": []}},
           "shard_policy": "data", "global_batch_size": 16, "epochs": 1000000}
    jpath = os.path.join(TMP, "job.json")
    with open(jpath, "w") as f:
        json.dump(job, f)
    socks = ["ipc://%s/f%d.sock" % (TMP, j) for j in range(2)]
    feeders = []
    for j in range(2):
        feeders.append(subprocess.Popen([FEEDER, "--job", jpath, "--listen", socks[j], "--feeder-index", str(j),
                                         "--feeders", "2", "--threads", "1", "--quiet",
                                         "--heartbeat-ms", "100"],
                                        stdout=subprocess.DEVNULL,
                                        stderr=open(os.path.join(TMP, "f%d.log" % j), "w")))
    PROCS.extend(feeders)
    metrics = os.path.join(TMP, "m.jsonl")
    tlog = os.path.join(TMP, "t.log")
    tr = subprocess.Popen([TRAINER, "--connect", ",".join(socks), "--job", "stall-it", "--devices", "cpu:2",
                           "--model", "softmax", "--classes", "3", "--lr", "0.01",
                           "--metrics", metrics, "--log-every", "200", "--timeout-ms", "10000",
                           "--takeover-s", "5", "--metrics-listen", "127.0.0.1:0"],
                          stdout=subprocess.PIPE, stderr=open(tlog, "w"), text=True)
    PROCS.append(tr)
    # the stream is flowing once the metrics file has lines
    t0 = time.time()
    while time.time() - t0 < 60 and (not os.path.exists(metrics) or os.path.getsize(metrics) < 2000):
        if tr.poll() is not None:
            fail("the trainer ended early: %s" % open(tlog).read()[-2000:])
        time.sleep(0.05)
    time.sleep(1.0)  # several STATS (every 100 ms) before the pause
    port = int(re.search(r"serving /metrics on \S+ \(port (\d+)\)", open(tlog).read()).group(1))
    scrape(port)  # the next step marks where the bound is measured from
    time.sleep(0.2)
    feeders[1].send_signal(signal.SIGSTOP)
    time.sleep(0.5)
    scrape(port)  # asks for the bound again: evaluated at the first step after the pause
    time.sleep(1.0)
    feeders[1].send_signal(signal.SIGCONT)
    time.sleep(0.5)
    after = scrape(port)
    time.sleep(0.5)
    tr.send_signal(signal.SIGINT)
    out, _ = tr.communicate(timeout=30)
    for f in feeders:
        f.kill()
        f.wait()
    if tr.returncode != 130:
        fail("the trainer exited %d after SIGINT (expected 130): %s" % (tr.returncode, open(tlog).read()[-2000:]))
    s = json.loads(out.strip().splitlines()[-1])["summary"]
    w = s["input_wait_by_feeder_s"]
    # the pause is 1.5 s: nearly all of it on feeder 1; feeder 0 gets the
    # ordinary waits, larger in a sanitizer build (0.31 s under TSan)
    if len(w) != 2 or w[1] < 1.3 or w[1] < 2 * w[0]:
        fail("wait by feeder %r: the 1.5 s pause of feeder 1 is not on feeder 1 (summary %r)" % (w, s))
    if abs(sum(w) - s["wait_s"]) > 0.01 + 0.01 * s["wait_s"]:
        fail("the feeders' waits add up to %.4f s, the trainer waited %.4f s" % (sum(w), s["wait_s"]))
    ok("a 1.5 s pause of feeder 1: input wait %.3f s on feeder 1, %.3f s on feeder 0, adding up to the trainer's %.3f s"
       % (w[1], w[0], s["wait_s"]))
    with open(metrics) as f:
        lines = [json.loads(l) for l in f]
    worst = max(lines, key=lambda l: l["input_wait_s"])
    if worst["input_bound_feeder"] != 1 or worst["input_wait_by_feeder_s"][1] < 0.5:
        fail("the step that waited longest (%r) does not name feeder 1" % worst)
    if worst["input_bound_stage"] not in STAGES:
        fail("the step that waited longest names no stage of feeder 1 (its STATS): %r" % worst)
    # a step that waited under 1 us names nobody (a sanitizer build's steps
    # may all wait a little: there may be none such)
    still = [l for l in lines if l["input_wait_s"] == 0]
    named = [l for l in still if l["input_bound_feeder"] != -1 or l["input_bound_stage"] != ""]
    if named:
        fail("steps without a wait must name no feeder (input_bound_feeder -1): %r" % named[:3])
    # a step's wait counts from its start; a feeder's share from the first
    # poll for its piece: the time between (popping pieces already there, or
    # the thread descheduled on a loaded machine: once 2 ms) is no feeder's
    total = [sum(l["input_wait_by_feeder_s"]) for l in lines]
    off = [l for a, l in zip(total, lines) if abs(a - l["input_wait_s"]) > 0.02 + 0.05 * l["input_wait_s"]]
    if off:
        fail("%d --metrics lines' waits by feeder do not add up to their input_wait_s: %r" % (len(off), off[:3]))
    ok("--metrics: the step that waited %.3f s names feeder 1 (its busiest stage before the pause: %s); %d steps "
       "without a wait name none; every line's parts add up" % (worst["input_wait_s"], worst["input_bound_stage"],
                                                                len(still)))
    m = re.search(r'^sluice_trainer_input_bound_info\{[^}]*feeder="(\d+)",stage="(\w*)"\} 1$', after, re.M)
    if m is None or m.group(1) != "1" or m.group(2) not in STAGES:
        fail("/metrics after the pause: the input's bound is not feeder 1 with a stage: %s" %
             "\n".join(l for l in after.splitlines() if "bound" in l or "by_feeder" in l))
    w1 = re.search(r'^sluice_trainer_input_wait_by_feeder_seconds_total\{[^}]*feeder="1"\} (\S+)$', after, re.M)
    if w1 is None or float(w1.group(1)) < 1.0:
        fail("/metrics after the pause: feeder 1's wait %r" % (w1.group(1) if w1 else None))
    ok("/metrics after the pause: sluice_trainer_input_bound_info names feeder 1 (stage %s), its wait %.2f s" %
       (m.group(2), float(w1.group(1))))
    log = open(tlog).read()
    found = re.findall(r"\(waiting for feeder 0 (\d+)%, 1 (\d+)%(?:; its busiest stage: (\w+))?\)", log)
    shares = [(int(a), int(b)) for a, b, _ in found]
    if any(st != "" and st not in STAGES for _, _, st in found):  # "": before two STATS
        fail("a log line names a stage that is none: %r" % found)
    if not shares or any(abs(a + b - 100) > 1 for a, b in shares) or max(b for _, b in shares) < 75:
        fail("the log lines' shares by feeder %r: none with feeder 1 at 75%% or more: %s" % (shares, log[-1500:]))
    ok("the log lines give the input stall's shares by feeder: %r" % shares)
    print("%d passed, 0 failed" % PASSED)
    shutil.rmtree(TMP, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    finally:
        for p in PROCS:
            if p.poll() is None:
                p.kill()
