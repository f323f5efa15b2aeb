#!/usr/bin/env python3
"""A feeder joining a running job across hosts (issue #30 part 1): the
trainers' rate over time on the namespace test bed (tests/cluster/netns.py)
when a second feeder host joins a decode-bound job mid-run.

    tools/bench_join.py BUILD_DIR [--run-s S] [--join-at S] [--workers W] [--threads N]
                        [--interval-s S] [--autoscale] [--quick] [--json]

The job: 4 files of 512 x 512 x 3 images, each cropped (half the area or
more) and resized to 32 x 32 by the feeder's map (random_resized_crop,
antialiased), shuffled, G = 32: a costly map and small pieces, so that one
feeder host (f0, --threads decode threads) is the bottleneck. W trainers
(t0 .. t(W-1), each in a PID namespace of its own: pieces by copy) do
nothing with their steps (--model none). A first run of 20 epochs with one
feeder calibrates the job to about --run-s seconds with one feeder. Then
the measured run: feeder 0 on f0, the trainers, and at --join-at seconds a
joining feeder on f1 (`sluice-feeder --join tcp://F0:5555 --feeder-index 1
--feeders 2`); with --autoscale instead, tools/sluice-autoscale (on t0)
starts it when the trainers' input wait share stays above 0.3 for 1 s.

The rate is the trainers' samples per second, summed over the trainers,
from their /metrics (sluice_trainer_samples_total) scraped every
--interval-s by tools/sluice-autoscale --record on t0 (in the fixed mode it
never starts anything: --max-feeders 1). Reported: the rate before the
join (its last 2 s), the new level (from 2 s after the join to the last
0.5 s of the stream), and the seconds from the joiner's start, from its
"serving job", and from the trainers' switch (their "feeders: 1 -> 2")
to the first scrape at 90% of the new level; then a table of the rate
over time around the join. Plaintext (--insecure), as tools/bench_testbed.py
runs: the cost measured is the map's, not the link's.

Root is needed (namespaces); without it the script says so and exits 77.
On a machine with few cores the ratio is bounded by them: two feeders of
one thread each and the trainers share the cores.
"""
import argparse
import calendar
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "cluster"))
import netns  # noqa: E402

AUTOSCALE = os.path.join(HERE, "sluice-autoscale")
PORT = 5555
METRICS_PORT = 9465
SIDE = 512  # the stored images: SIDE x SIDE x 3 bytes
OUT = 32  # cropped and resized (antialiased) to OUT x OUT: a costly map, a small piece
RECORDS = 200  # 4 files of 50
CAL_EPOCHS = 20  # the calibration run
STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d{3})Z")


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build")
    ap.add_argument("--run-s", type=float, default=12.0, help="the job's length with one feeder (default 12)")
    ap.add_argument("--join-at", type=float, default=None,
                    help="seconds after the trainers' start when the joiner starts (default: a third of --run-s)")
    ap.add_argument("--workers", type=int, default=2, help="trainer workers, one host each (default 2)")
    ap.add_argument("--threads", type=int, default=1, help="decode threads per feeder (default 1)")
    ap.add_argument("--interval-s", type=float, default=0.25, help="scrape the trainers every S (default 0.25)")
    ap.add_argument("--autoscale", action="store_true",
                    help="let tools/sluice-autoscale start the joiner (input wait above 0.3 for 1 s)")
    ap.add_argument("--quick", action="store_true", help="a short run (--run-s 6, join at 2 s), for the test")
    ap.add_argument("--json", action="store_true", help="one JSON object, the rate series included")
    a = ap.parse_args()
    if a.quick:
        a.run_s, a.join_at = 6.0, 2.0
    if a.join_at is None:
        a.join_at = a.run_s / 3
    if not 1 <= a.workers <= 8 or not 1 <= a.threads <= 64:
        ap.error("--workers: 1 to 8; --threads: 1 to 64")
    if not 0.05 <= a.interval_s <= 5 or not 1 <= a.run_s <= 3600 or not 0 < a.join_at < a.run_s:
        ap.error("--interval-s: 0.05 to 5; --run-s: 1 to 3600; --join-at: between 0 and --run-s")
    return a


def binary(a, *path):
    p = os.path.join(os.path.abspath(a.build), *path)
    if not os.access(p, os.X_OK):
        sys.exit("bench_join: no executable %s (build first)" % p)
    return p


def wait(p, what, timeout):
    try:
        return p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        sys.exit("bench_join: %s did not finish within %d s" % (what, timeout))


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def log_time(path, text):
    """The Unix time of the first line of a sluice log holding text, or None."""
    for line in read(path).splitlines():
        if text in line:
            m = STAMP.match(line)
            if m:
                return calendar.timegm(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S")) + int(m.group(2)) / 1000
    return None


def wait_log(path, text, proc, what, timeout=60):
    deadline = time.time() + timeout
    while text not in read(path):
        if time.time() > deadline or proc.poll() is not None:
            sys.exit("bench_join: %s; log %s:\n%s" % (what, path, read(path)[-2000:]))
        time.sleep(0.02)


class Bed:
    def __init__(self, a):
        self.a = a
        self.feeder = binary(a, "feeder", "sluice-feeder")
        self.trainer = binary(a, "trainer", "sluice-trainer")
        self.record_tool = binary(a, "tools", "sluice-record")
        self.trainer_hosts = ["t%d" % w for w in range(a.workers)]
        self.net = netns.require(["f0", "f1"] + self.trainer_hosts)
        self.tmp = tempfile.mkdtemp(prefix="sluice-bench-join-")
        out = os.path.join(self.tmp, "data")
        subprocess.run([self.record_tool, "gen", "--output-dir", out, "--records", str(RECORDS), "--shards", "4",
                        "--seed", "3", "--image-bytes", str(SIDE * SIDE * 3), "--prefix", "part"], check=True,
                       capture_output=True)
        self.files = sorted(os.path.join(out, f) for f in os.listdir(out) if f.startswith("part-"))
        self.f0 = "tcp://%s:%d" % (self.net.addr("f0"), PORT)
        self.f1 = "tcp://%s:%d" % (self.net.addr("f1"), PORT)

    def job(self, epochs):
        job = {"name": "join", "files": self.files, "format": "tfrecord", "global_batch_size": 32,
               "epochs": epochs, "prefetch": 4,
               "features": {"image": {"dtype": "uint8", "shape": [SIDE, SIDE, 3], "from": "bytes"},
                            "label": {"dtype": "int64", "shape": []}, "id": {"dtype": "int64", "shape": []}},
               "map": [{"op": "random_resized_crop", "feature": "image", "size": [OUT, OUT], "scale": [0.5, 1.0]}],
               "shuffle": {"buffer": 16, "seed": 5, "reshuffle_each_epoch": True}}
        p = os.path.join(self.tmp, "join-%d.json" % epochs)
        with open(p, "w") as f:
            json.dump(job, f)
        return p

    def feeder_args(self, job, j, F, listen):
        return [self.feeder, "--job", job, "--listen", listen, "--feeder-index", str(j), "--feeders", str(F),
                "--workers", str(self.a.workers), "--replicas", "1", "--threads", str(self.a.threads),
                "--insecure", "--heartbeat-ms", "200", "--timeout-ms", "5000"]

    def log(self, name):
        return os.path.join(self.tmp, name + ".log")

    def trainers(self, tag, metrics):
        out = []
        for w, h in enumerate(self.trainer_hosts):
            trace = os.path.join(self.tmp, "%s-trace%d.jsonl" % (tag, w))
            m = ["--metrics-listen", "%s:%d" % (self.net.addr(h), METRICS_PORT)] if metrics else []
            p = self.net.spawn(h, [self.trainer, "--connect", self.f0, "--job", "join", "--worker", str(w),
                                   "--workers", str(self.a.workers), "--replicas", "1", "--model", "none",
                                   "--trace", trace, "--insecure", "--heartbeat-ms", "200", "--timeout-ms", "5000"]
                               + m, log=self.log("%s-trainer%d" % (tag, w)), pidns=True)
            out.append((p, trace))
        return out

    def summaries(self, ts, tag):
        out = []
        for w, (p, trace) in enumerate(ts):
            if wait(p, "trainer %d" % w, 600) != 0:
                sys.exit("bench_join: trainer %d failed:\n%s" % (w, read(self.log("%s-trainer%d" % (tag, w)))[-2000:]))
            lines = read(trace).splitlines()
            s = json.loads(lines[-1])["summary"]
            if not s["ok"]:
                sys.exit("bench_join: trainer %d's run failed: %s" % (w, s))
            out.append(s)
        return out

    def calibrate(self):
        job = self.job(CAL_EPOCHS)
        f0 = self.net.spawn("f0", self.feeder_args(job, 0, 1, self.f0), log=self.log("cal-feeder0"))
        wait_log(self.log("cal-feeder0"), "serving job", f0, "the calibration's feeder did not start")
        took = max(s["stream_seconds"] for s in self.summaries(self.trainers("cal", False), "cal"))
        wait(f0, "the calibration's feeder", 60)
        return max(2, int(round(CAL_EPOCHS * self.a.run_s / max(took, 0.01)))), took

    def run(self, epochs):
        a, net = self.a, self.net
        job = self.job(epochs)
        f0 = net.spawn("f0", self.feeder_args(job, 0, 1, self.f0), log=self.log("feeder0"))
        wait_log(self.log("feeder0"), "serving job", f0, "feeder 0 did not start")
        stats1 = os.path.join(self.tmp, "feeder1-stats.json")
        joiner = self.feeder_args(job, 1, 2, self.f1) + ["--join", self.f0, "--stats", stats1]
        record = os.path.join(self.tmp, "record.jsonl")
        urls = ",".join("%s:%d" % (net.addr(h), METRICS_PORT) for h in self.trainer_hosts)
        ctl = [sys.executable, AUTOSCALE, "--metrics", urls, "--feeders", "1", "--interval-s", str(a.interval_s),
               "--gone-s", "1.5", "--record", record, "--scrape-timeout-s", "1"]
        if a.autoscale:
            cmd = " ".join(["ip", "netns", "exec", net.ns("f1")] + joiner[:6] + ["{index}", "--feeders", "{feeders}"]
                           + joiner[9:]) + " >%s 2>&1" % self.log("feeder1")
            ctl += ["--max-feeders", "2", "--threshold", "0.3", "--sustain-s", "1", "--cooldown-s", "3600",
                    "--command", cmd]
        else:  # a recorder only: it never starts a feeder
            ctl += ["--max-feeders", "1", "--threshold", "0.99", "--sustain-s", "3600", "--command", "true {index}"]
        c = net.spawn("t0", ctl, log=self.log("autoscale"))
        ts = self.trainers("run", True)
        t0 = time.time()
        f1, start = None, None
        if not a.autoscale:
            time.sleep(max(0.0, t0 + a.join_at - time.time()))
            start = time.time()
            f1 = net.spawn("f1", joiner, log=self.log("feeder1"))
        sums = self.summaries(ts, "run")
        if wait(f0, "feeder 0", 60) != 0:
            sys.exit("bench_join: feeder 0 failed:\n" + read(self.log("feeder0"))[-2000:])
        if wait(c, "sluice-autoscale", 60) != 0:
            sys.exit("bench_join: sluice-autoscale failed:\n" + read(self.log("autoscale"))[-2000:])
        if f1 is not None and wait(f1, "the joining feeder", 60) != 0:
            sys.exit("bench_join: the joining feeder failed:\n" + read(self.log("feeder1"))[-2000:])
        with open(record) as f:
            rec = [json.loads(x) for x in f]
        if a.autoscale:
            start = next((x["time"] for x in rec if x["started"]), None)
            if start is None:
                sys.exit("bench_join: sluice-autoscale started no feeder:\n" + read(self.log("autoscale"))[-2000:])
        try:
            with open(stats1) as f:
                served = json.load(f)["pieces"]
        except (OSError, ValueError, KeyError):
            sys.exit("bench_join: the joining feeder wrote no --stats:\n" + read(self.log("feeder1"))[-2000:])
        first = []  # each trainer's first piece from the joiner, seconds after its ROSTER
        for w in range(a.workers):
            m = re.search(r"\(joined\): its first piece, \d+, came ([0-9.]+) s after the ROSTER",
                          read(self.log("run-trainer%d" % w)))
            first.append(float(m.group(1)) if m else None)
        switch = [log_time(self.log("run-trainer%d" % w), "feeders: 1 -> 2") for w in range(a.workers)]
        return {"record": rec, "t0": t0, "start": start, "served": served, "summaries": sums,
                "serving": log_time(self.log("feeder1"), "serving job"),
                "accepted": log_time(self.log("feeder0"), "feeder 1 of 2 joined the job"),
                "switch": None if None in switch else max(switch), "first_piece": first}

    def down(self):
        self.net.down()
        shutil.rmtree(self.tmp, ignore_errors=True)


def analyse(r, interval):
    """The rate before, the new level, and the times to 90% of it."""
    rec = [x for x in r["record"] if x["trainers"] > 0]
    start = r["start"]
    end = rec[-1]["time"] if rec else start
    before = [x["samples_per_s"] for x in rec if start - 2.0 <= x["time"] < start]
    after = sorted(x["samples_per_s"] for x in rec if start + 1.0 <= x["time"] <= end - 0.5)
    b = sum(before) / len(before) if before else None
    n = after[len(after) // 2] if after else None  # the median: one slow scrape does not move it
    up = None
    if n:
        up = next((x["time"] for x in rec if x["time"] >= start and x["samples_per_s"] >= 0.9 * n), None)

    def since(t):
        return round(up - t, 3) if up is not None and t is not None else None
    table = [(round(x["time"] - start, 2), x["samples_per_s"]) for x in rec if start - 2.0 <= x["time"]]
    return {"rate_before": b, "rate_after": n, "ratio": n / b if b and n else None,
            "join_at_s": round(start - r["t0"], 3),
            "to_90pct_from_start_s": since(start), "to_90pct_from_serving_s": since(r["serving"]),
            "to_90pct_from_switch_s": since(r["switch"]),
            "serving_after_start_s": round(r["serving"] - start, 3) if r["serving"] else None,
            "accepted_after_start_s": round(r["accepted"] - start, 3) if r["accepted"] else None,
            "switch_after_start_s": round(r["switch"] - start, 3) if r["switch"] else None,
            "first_piece_after_roster_s": r["first_piece"], "joiner_pieces": r["served"], "interval_s": interval, "table": table}


def fmt(v, f="%.2f"):
    return "?" if v is None else f % v


def main():
    a = parse()
    bed = Bed(a)
    try:
        epochs, took = bed.calibrate()
        r = bed.run(epochs)
    finally:
        bed.down()
    out = analyse(r, a.interval_s)
    out.update({"bench": "join", "mode": "autoscale" if a.autoscale else "fixed", "workers": a.workers,
                "threads": a.threads, "epochs": epochs, "calibration_epochs": CAL_EPOCHS, "calibration_s": took,
                "stream_s": max(s["stream_seconds"] for s in r["summaries"]),
                "trainer_stream_s": [s["stream_seconds"] for s in r["summaries"]],
                "elements": sum(s["elements"] for s in r["summaries"])})
    if a.json:
        print(json.dumps(out))
        return
    print("%d epochs (%d took %.2f s with one feeder), %d trainers, %d-thread feeders; the joiner (%s) started "
          "%.2f s into the run, said 'serving job' %s s later, was counted in by feeder 0 %s s after its start; "
          "the trainers switched %s s after its start and had its first piece %s s after that; it served %d pieces"
          % (epochs, CAL_EPOCHS, took, a.workers, a.threads, out["mode"], out["join_at_s"], fmt(out["serving_after_start_s"]),
             fmt(out["accepted_after_start_s"]), fmt(out["switch_after_start_s"]),
             "/".join(fmt(x, "%.3f") for x in out["first_piece_after_roster_s"]), out["joiner_pieces"]))
    print("rate: %s samples/s before, %s after (%sx); 90%% of the new level %s s after the joiner's start, %s s "
          "after its 'serving job', %s s after the trainers' switch"
          % (fmt(out["rate_before"], "%.0f"), fmt(out["rate_after"], "%.0f"), fmt(out["ratio"]),
             fmt(out["to_90pct_from_start_s"]), fmt(out["to_90pct_from_serving_s"]),
             fmt(out["to_90pct_from_switch_s"])))
    print("| s from the joiner's start | samples/s |")
    print("|---|---|")
    for t, v in out["table"]:
        print("| %.2f | %.0f |" % (t, v))


if __name__ == "__main__":
    main()
