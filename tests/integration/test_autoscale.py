#!/usr/bin/env python3
"""tools/sluice-autoscale on real processes (issue #30 part 3): one
feeder with one thread, bound by its map (a random_resized_crop of
150 x 150 images to 224 x 224), serves two
trainers that do nothing with their steps, so they wait for input most of
the time; the controller scrapes their /metrics, finds the wait share
above its threshold for its sustain time, and starts a feeder that joins
the job (`sluice-feeder --join ... --feeder-index {index} --feeders
{feeders}`) exactly once (--max-feeders 2). The joiner serves pieces, the
traces equal the reference model's, and the controller ends (0) once the
trainers are gone. Its --record lines give the trainers' rate before and
after the join (printed, not asserted: this machine's cores are shared).
Also: its usage errors (exit 2) and --help.

Usage: test_autoscale.py BUILD_DIR
  SLUICE_AUTOSCALE_RUN_S=S: a job of about S seconds with one feeder
  (default 5); SLUICE_AUTOSCALE_RECORD=FILE: keep the controller's --record
  (one line per scrape: the wait share and the trainers' samples per second
  over time, the join's scrape marked "started")
"""
import json
import os
import re
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bed  # noqa: E402
import harness  # noqa: E402
from harness import fail, ok, spawn  # noqa: E402

TOOL = os.path.join(HERE, "..", "..", "tools", "sluice-autoscale")
W, R = 2, 1
RUN_S = float(os.environ.get("SLUICE_AUTOSCALE_RUN_S", "5"))  # the job with one feeder (calibrated)
IMAGE = 67500  # bytes: a 150 x 150 x 3 image, cropped and resized to 224 x 224 by the map


def free_port():
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
    finally:
        s.close()


def usage():
    harness.case()
    h = subprocess.run([sys.executable, TOOL, "--help"], capture_output=True, text=True)
    if h.returncode != 0 or "--threshold" not in h.stdout or "exit status" not in h.stdout:
        fail("--help: exit %d\n%s" % (h.returncode, h.stdout + h.stderr))
    base = ["--metrics", "127.0.0.1:9", "--feeders", "1", "--command", "true {index}"]
    bad = [(["--threshold", "1.5"], "between 0 and 1"), (["--threshold", "nan"], "between 0 and 1"),
           (["--max-feeders", "65"], "at most 64"), (["--feeders", "3", "--max-feeders", "2"], "only added"),
           (["--interval-s", "-1"], "more than 0"), (["--sustain-s", "inf"], "more than 0"),
           (["--metrics", "host"], "neither"), (["--command", "sluice-feeder --join x"], "{index}")]
    for extra, why in bad:
        args = list(base)
        for i in range(0, len(extra), 2):
            if extra[i] in args:
                args[args.index(extra[i]) + 1] = extra[i + 1]
            else:
                args += extra[i:i + 2]
        p = subprocess.run([sys.executable, TOOL] + args, capture_output=True, text=True, timeout=20)
        if p.returncode != 2 or why not in p.stderr:
            fail("%s: expected exit 2 naming %r, got %d:\n%s" % (extra, why, p.returncode, p.stderr))
    ok("--help, and %d usage errors refused (exit 2) with their reason" % len(bad))


def job_for(files, epochs):
    return bed.write_job("scale%d" % epochs, files, epochs=epochs,
                         features={"image": {"dtype": "uint8", "shape": [150, 150, 3], "from": "bytes"},
                                   "label": {"dtype": "int64", "shape": []},
                                   "id": {"dtype": "int64", "shape": []}},
                         map=[{"op": "random_resized_crop", "feature": "image", "size": [224, 224]}],
                         shuffle={"buffer": 16, "seed": 5, "reshuffle_each_epoch": True})


def feeder(tag, job_path, j, F, extra=()):
    return [bed.FEEDER, "--job", job_path, "--listen", "ipc://%s/%s-f%d.sock" % (bed.TMP, tag, j),
            "--feeder-index", str(j), "--feeders", str(F), "--threads", "1", "--heartbeat-ms", "200",
            "--timeout-ms", "3000"] + list(extra)


def trainers(tag, job, ports=None):
    out = []
    for w in range(W):
        trace = os.path.join(bed.TMP, "%s-trace%d.jsonl" % (tag, w))
        m = ["--metrics-listen", "127.0.0.1:%d" % ports[w]] if ports else []
        p = spawn([bed.TRAINER, "--connect", "ipc://%s/%s-f0.sock" % (bed.TMP, tag), "--job", job["name"],
                   "--worker", str(w), "--workers", str(W), "--replicas", str(R), "--trace", trace,
                   "--heartbeat-ms", "200", "--timeout-ms", "3000", "--takeover-s", "1"] + m,
                  log=bed.log_path(tag, "trainer%d" % w))
        out.append((p, trace))
    return out


def calibrate(files):
    """Epochs for a job of about RUN_S with one feeder on this build."""
    harness.case()
    tag = "cal"
    job_path, job = job_for(files, 2)  # 2 epochs: a sanitizer build's map is 100x slower
    f0 = spawn(feeder(tag, job_path, 0, 1), log=bed.log_path(tag, "feeder0"))
    bed.wait_for_log(tag, "feeder0", "serving job", f0, "cal: the feeder did not start")
    ts = trainers(tag, job)
    for w, (p, _) in enumerate(ts):
        if bed.wait(p, 120, "cal trainer") != 0:
            fail("cal: trainer %d failed:\n%s" % (w, bed.read_log(tag, "trainer%d" % w)))
    took = 0.01
    for _, trace in ts:
        with open(trace) as f:
            took = max(took, json.loads(f.read().splitlines()[-1])["summary"]["stream_seconds"])
    bed.wait(f0, 20, "cal feeder")
    epochs = int(min(max(2 * RUN_S / took, 4), 100 * RUN_S))
    print("# 2 epochs took %.2f s with one feeder: %d epochs (about %.0f s)" % (took, epochs, RUN_S))
    return epochs


def rate_around(record, at):
    """(the trainers' mean samples/s before the join, after it, seconds
    from the join to the first scrape at 1.3x the rate before or None)"""
    before = [x["samples_per_s"] for x in record if x["t"] < at and x["trainers"] == W]
    after = [x for x in record if x["t"] > at and x["trainers"] == W]
    if not before or not after:
        return None, None, None
    b = sum(before[-10:]) / len(before[-10:])
    a = sum(x["samples_per_s"] for x in after) / len(after)
    up = next((x["t"] - at for x in after if x["samples_per_s"] > 1.3 * b), None)
    return b, a, up


def scale(files, epochs):
    harness.case()
    tag = "scale"
    job_path, job = job_for(files, epochs)
    ref = bed.reference(job, [100] * 4, W, R)
    f0 = spawn(feeder(tag, job_path, 0, 1), log=bed.log_path(tag, "feeder0"))
    bed.wait_for_log(tag, "feeder0", "serving job", f0, "scale: feeder 0 did not start")
    ports = [free_port() for _ in range(W)]
    joiner_log = bed.log_path(tag, "feeder1")
    stats1 = os.path.join(bed.TMP, "scale-f1-stats.json")
    command = " ".join(feeder(tag, job_path, 1, 1)[:5]) + \
        " --join ipc://%s/%s-f0.sock --feeder-index {index} --feeders {feeders} --threads 1 --heartbeat-ms 200 " \
        "--timeout-ms 3000 --stats %s >%s 2>&1" % (bed.TMP, tag, stats1, joiner_log)
    record = os.path.join(bed.TMP, "scale-record.jsonl")
    ctl = spawn([sys.executable, TOOL, "--metrics", ",".join("127.0.0.1:%d" % p for p in ports),
                 "--feeders", "1", "--max-feeders", "2", "--threshold", "0.3", "--sustain-s", "0.6",
                 "--interval-s", "0.2", "--cooldown-s", "60", "--gone-s", "1.5", "--record", record,
                 "--command", command], log=bed.log_path(tag, "autoscale"))
    ts = trainers(tag, job, ports)
    for w, (p, _) in enumerate(ts):
        if bed.wait(p, 120, "scale trainer %d" % w) != 0:
            fail("scale: trainer %d failed:\n%s" % (w, bed.read_log(tag, "trainer%d" % w)[-3000:]))
    if bed.wait(f0, 30, "scale feeder 0") != 0:
        fail("scale: feeder 0 failed")
    if bed.wait(ctl, 60, "scale: sluice-autoscale") != 0:
        fail("scale: sluice-autoscale exited %d" % ctl.returncode)
    clog = bed.read_log(tag, "autoscale")
    starts = re.findall(r"starting feeder (\d+) of (\d+)", clog)
    if starts != [("1", "2")]:
        fail("scale: sluice-autoscale should start feeder 1 of 2 once, its log says %s:\n%s" % (starts, clog))
    if not re.search(r"feeder 1 \(pid \d+\) exited 0", clog):
        fail("scale: the joined feeder should exit 0:\n%s\n%s" % (clog, bed.read_log(tag, "feeder1")[-2000:]))
    try:
        with open(stats1) as f:
            sent = json.load(f)["pieces"]
    except (OSError, ValueError, KeyError):
        fail("scale: the joined feeder wrote no --stats:\n%s" % bed.read_log(tag, "feeder1")[-2000:])
    if sent == 0:
        fail("scale: the joined feeder served no piece:\n%s" % bed.read_log(tag, "feeder1")[-2000:])
    for w, (_, trace) in enumerate(ts):
        with open(trace) as f:
            got = [json.loads(x) for x in f]
        summary = got.pop()["summary"]
        if not summary["ok"]:
            fail("scale: worker %d failed: %s" % (w, summary))
        want = [(x["epoch"], x["step"], x["seq"], [IDS[fi][r] for fi, r in x["elems"]]) for x in ref.get(w, [])]
        have = [(x["epoch"], x["step"], x["seq"], x["ids"]) for x in got]
        if have != want:
            bad = next((i for i, (a, b) in enumerate(zip(have, want)) if a != b), min(len(have), len(want)))
            fail("scale: worker %d's trace differs from the reference model at piece %d (%d pieces, want %d)"
                 % (w, bad, len(have), len(want)))
    with open(record) as f:
        rec = [json.loads(x) for x in f]
    if os.environ.get("SLUICE_AUTOSCALE_RECORD"):
        with open(os.environ["SLUICE_AUTOSCALE_RECORD"], "w") as f:
            f.writelines(json.dumps(x) + "\n" for x in rec)
    at = next(x["t"] for x in rec if x["started"])
    b, a, up = rate_around(rec, at)
    ok("sluice-autoscale started one joining feeder at %.1f s (input wait above 0.3 for 0.6 s), which served %d "
       "pieces; traces exact; the trainers' rate %s samples/s before, %s after%s"
       % (at, sent, "%.0f" % b if b else "?", "%.0f" % a if a else "?",
          ", 1.3x within %.1f s of the join" % up if up is not None else ", not 1.3x higher here"))


def ids_of(files):
    out = []
    for f in files:
        p = subprocess.run([bed.RECORD, "cat", "--decode", "example", f], check=True, capture_output=True,
                           text=True)
        out.append([int(json.loads(x)["example"]["features"]["feature"]["id"]["int64List"]["value"][0])
                    for x in p.stdout.splitlines()])
    return out


def main():
    global IDS
    bed.setup(sys.argv[1], "autoscale")
    usage()
    files = bed.gen("d", 400, 4, image_bytes=IMAGE)
    IDS = ids_of(files)
    if [len(x) for x in IDS] != [100] * 4:
        fail("sluice-record gen: expected 4 files of 100 records, got %s" % [len(x) for x in IDS])
    scale(files, calibrate(files))
    bed.finish()


if __name__ == "__main__":
    try:
        main()
    finally:
        harness.stop_all()
        bed.cleanup()
