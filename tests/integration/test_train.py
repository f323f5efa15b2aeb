#!/usr/bin/env python3
"""Integration: synchronous data-parallel training with real processes.

The same job trained as W x R = 1x1, 1x2, 2x1 and 2x2 replicas must give the
same loss and accuracy, up to float reassociation (sync data parallelism
sums the same per-row gradients of the same global batches), and every
worker of a run must end with bit-identical weights. Tower mode
(--mode tower, replicate_model_fn) must match mirrored variables on the
same job: same per-step losses, same weights. A small learning rate
keeps reassociation from compounding (an MLP with momentum can fork
chaotically after many steps from reassociation alone).

Usage: test_train.py BUILD_DIR     (prints "N passed, 0 failed")
"""
import atexit
import json
import re
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time

BUILD = os.path.abspath(sys.argv[1])
RECORD = os.path.join(BUILD, "tools", "sluice-record")
FEEDER = os.path.join(BUILD, "feeder", "sluice-feeder")
TRAINER = os.path.join(BUILD, "trainer", "sluice-trainer")
TMP = tempfile.mkdtemp(prefix="sluice-train-")
PASSED = 0
LR = "0.01"


STRAYS = []  # feeders a case started: stopped when it fails, and at exit


def stop_strays():
    for p in STRAYS:
        if p.poll() is None:
            p.kill()
            p.wait()


atexit.register(stop_strays)


def fail(msg):
    stop_strays()
    print("FAIL: " + msg, file=sys.stderr)
    print("%d passed, 1 failed" % PASSED)
    sys.exit(1)


def ok(name):
    global PASSED
    PASSED += 1
    print("ok %d - %s" % (PASSED, name))


def train(job_path, W, R, model, tag, extra=(), may_fail=False):
    """The workers' summaries; with may_fail, None when a trainer fails."""
    sock = "ipc://%s/%s-feeder.sock" % (TMP, tag)
    ring = ",".join("ipc://%s/%s-ring-%d.sock" % (TMP, tag, w) for w in range(W))
    flog = open(os.path.join(TMP, tag + "-feeder.log"), "w")
    feeder = subprocess.Popen([FEEDER, "--job", job_path, "--listen", sock, "--threads", "1"],
                              stdout=flog, stderr=subprocess.STDOUT)
    STRAYS.append(feeder)
    time.sleep(0.2)
    procs = []
    for w in range(W):
        err = open(os.path.join(TMP, "%s-trainer%d.log" % (tag, w)), "w")
        args = [TRAINER, "--connect", sock, "--job", "train-it", "--worker", str(w), "--workers", str(W),
                "--devices", "cpu:%d" % R, "--model", model, "--hidden", "16", "--lr", LR, "--momentum", "0.5",
                "--seed", "7", "--input", "image", "--label", "label", "--classes", "3"]
        if W > 1:
            args += ["--ring", ring]
        args += list(extra)
        args += ["--save-weights", os.path.join(TMP, "%s-w%d.npy" % (tag, w)),
                 "--metrics", os.path.join(TMP, "%s-w%d.jsonl" % (tag, w))]
        procs.append(subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, text=True))
    outs = []
    for w, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            for q in procs + [feeder]:
                q.kill()
            fail("%s: trainer %d did not finish" % (tag, w))
        if p.returncode != 0 and may_fail:
            outs = None
            continue
        if p.returncode != 0:
            feeder.kill()
            fail("%s: trainer %d exited %d: %s" % (tag, w, p.returncode,
                                                   open(os.path.join(TMP, "%s-trainer%d.log" % (tag, w))).read()))
        if outs is not None:
            outs.append(json.loads(out.strip().splitlines()[-1])["summary"])
    if outs is None:
        feeder.kill()
    feeder.wait(timeout=15)
    return outs


def check_outputs(tag, outs):
    """--save-weights: a .npy float32 vector, the same bytes on every worker;
    --metrics: one line per step, whose last epoch's mean is the summary's loss."""
    blobs = []
    for w, o in enumerate(outs):
        data = open(os.path.join(TMP, "%s-w%d.npy" % (tag, w)), "rb").read()
        if data[:8] != b"\x93NUMPY\x01\x00":
            fail("%s: weights file is not a .npy v1.0 file" % tag)
        hlen = data[8] | data[9] << 8
        header = data[10:10 + hlen].decode()
        if "'descr': '<f4'" not in header or (10 + hlen) % 64 != 0:
            fail("%s: bad .npy header %r" % (tag, header))
        n = int(header.split("'shape': (")[1].split(",")[0])
        if len(data) != 10 + hlen + 4 * n:
            fail("%s: .npy holds %d bytes for %d floats" % (tag, len(data), n))
        blobs.append(data)
        lines = [json.loads(x) for x in open(os.path.join(TMP, "%s-w%d.jsonl" % (tag, w)))]
        if len(lines) != o["steps"]:
            fail("%s: %d metrics lines for %d steps" % (tag, len(lines), o["steps"]))
        # look-ahead staging runs step s after receiving s+1: the lines must
        # still name each step once, in order
        keys = [(x["epoch"], x["step"]) for x in lines]
        if keys != sorted(set(keys)):
            fail("%s: metrics lines out of step order: %r" % (tag, keys[:8]))
        # the last line's weights hash is the final weights' (the summary's);
        # the per-step rates are consistent with the step's own figures
        if lines[-1]["weights_hash"] != o["weights_hash"]:
            fail("%s: last metrics line's weights %s, summary %s" % (tag, lines[-1]["weights_hash"], o["weights_hash"]))
        for x in lines:
            # times are printed to 1e-6 s: allow for that rounding
            rel = 5e-7 / x["step_s"] if x["step_s"] > 0 else 0
            if x["step_s"] > 0 and (
                    abs(x["samples_per_s"] - x["rows"] / x["step_s"]) > 0.1 + (rel + 1e-4) * x["samples_per_s"] or
                    abs(x["input_stall_pct"] - 100 * x["input_wait_s"] / x["step_s"]) > 0.01 + 200 * rel):
                fail("%s: metrics line inconsistent: %r" % (tag, x))
            if x["h2d_gb_per_s"] < 0 or not 0 <= x["input_stall_pct"] <= 100.01 or \
                    not re.fullmatch(r"[0-9a-f]{16}", x["weights_hash"]):
                fail("%s: bad metrics line %r" % (tag, x))
        # one source: the lines' input waits add up to the summary's (which
        # also counts the wait for the end of the stream after the last line)
        waited = sum(x["input_wait_s"] for x in lines)
        if not waited <= o["wait_s"] + 5e-7 * len(lines) + 5e-4 or waited < o["wait_s"] - 2.0:
            fail("%s: metrics lines waited %.6f s, summary %.3f s" % (tag, waited, o["wait_s"]))
        if len({x["weights_hash"] for x in lines}) < len(lines) // 2:
            fail("%s: the weights hash barely changes from step to step" % tag)
        last = [x for x in lines if x["epoch"] == lines[-1]["epoch"] and x["rows"] > 0]
        mean = sum(x["loss"] for x in last) / len(last)
        if abs(mean - o["loss"]) > 1e-5:
            fail("%s: metrics' last-epoch mean loss %.6f, summary %.6f" % (tag, mean, o["loss"]))
    if len(set(blobs)) != 1:
        fail("%s: workers saved different weights" % tag)


def keepalive(job_path):
    """A trainer busy right after connecting (creating its training loop:
    GPU contexts and NCCL can take seconds) must keep its feeders' connections
    alive. A feeder that drops trainers silent for 800 ms, and a client busy
    for 2.5 s: with client_keepalive it gets all 60 steps (960 rows)
    and the feeder never calls it silent; asleep instead (the control), the
    feeder drops it."""
    helper = os.path.join(BUILD, "tests", "client_keepalive")
    for mode in ("keepalive", "sleep"):
        sock = "ipc://%s/keepalive-%s.sock" % (TMP, mode)
        flog_path = os.path.join(TMP, "keepalive-%s-feeder.log" % mode)
        # --piece-memory 1M: the prefetch's window, too small for the
        # stream (the 8 MiB window floor would send all 60 steps before the
        # client sleeps, and nothing would be left to wait for it)
        feeder = subprocess.Popen([FEEDER, "--job", job_path, "--listen", sock, "--threads", "1",
                                   "--heartbeat-ms", "100", "--timeout-ms", "800", "--piece-memory", "1M"],
                                  stdout=open(flog_path, "w"), stderr=subprocess.STDOUT)
        time.sleep(0.2)
        p = subprocess.run([helper, sock, "train-it", mode, "2500"], capture_output=True, text=True, timeout=60)
        feeder.kill()
        feeder.wait()
        flog = open(flog_path).read()
        if mode == "keepalive":
            if p.returncode != 0:
                fail("keepalive: the client failed: %s\nfeeder: %s" % (p.stderr, flog))
            got = json.loads(p.stdout)
            if got != {"steps": 60, "rows": 960}:
                fail("keepalive: %r, expected 60 steps of 960 rows" % got)
            if "silent" in flog:
                fail("keepalive: the feeder found the client silent: %s" % flog)
        elif "worker 0 silent" not in flog or p.returncode == 0:
            fail("keepalive control: a client asleep for 2.5 s was not dropped (exit %d): %s" % (p.returncode, flog))
    ok("a client busy for 2.5 s after connecting stays connected through client_keepalive "
       "(60 steps, 960 rows; asleep instead, the feeder drops it after its 800 ms timeout)")


def trace_feature_and_outputs():
    """--trace-feature naming a missing tensor, or one the trace cannot list
    (float32, uint8), fails at once (exit 1) naming it and what the job has;
    an int64 one traces its values. --save-weights and --metrics through
    links to /dev/null leave the links and the device as they are (issue #12).
    Self-contained: its own data, feeder and trainers, all killed on every path."""
    data = os.path.join(TMP, "tf-data")
    subprocess.run([RECORD, "gen", "--output-dir", data, "--records", "32", "--shards", "1", "--seed", "2",
                    "--image-bytes", "4", "--classes", "3", "--floats", "2"], check=True, capture_output=True)
    job = {"name": "tf-it", "files": [os.path.join(data, "gen-*.tfrecord")], "format": "tfrecord",
           "features": {"image": {"dtype": "uint8", "shape": [4], "from": "bytes"},
                        "label": {"dtype": "int64", "shape": []}, "id": {"dtype": "int64", "shape": []},
                        "dense": {"dtype": "float32", "shape": [2]}},
           "global_batch_size": 8, "epochs": 1}
    job_path = os.path.join(TMP, "tf-job.json")
    with open(job_path, "w") as f:
        json.dump(job, f)

    def run(tag, extra):
        sock = "ipc://%s/%s.sock" % (TMP, tag)
        procs = []
        try:
            with open(os.path.join(TMP, tag + "-feeder.log"), "w") as flog:
                procs.append(subprocess.Popen([FEEDER, "--job", job_path, "--listen", sock, "--threads", "1"],
                                              stdout=flog, stderr=subprocess.STDOUT))
            time.sleep(0.2)
            trace = os.path.join(TMP, tag + "-trace.jsonl")
            t = subprocess.Popen([TRAINER, "--connect", sock, "--job", "tf-it", "--replicas", "1",
                                  "--timeout-ms", "5000", "--trace", trace] + list(extra),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            procs.append(t)
            out, err = t.communicate(timeout=60)
            return t.returncode, err, trace
        except subprocess.TimeoutExpired:
            fail("%s: the trainer did not finish" % tag)
        finally:
            for q in procs:
                if q.poll() is None:
                    q.kill()
                q.wait()

    have = "they have: "
    for name, want in (("nosuch", "--trace-feature: the job's pieces have no tensor 'nosuch' (" + have),
                       ("dense", "--trace-feature: tensor 'dense' is float32; the trace lists int64 values or bytes"),
                       ("image", "--trace-feature: tensor 'image' is uint8; the trace lists int64 values or bytes")):
        code, err, _ = run("tf-" + name, ["--model", "none", "--trace-feature", name])
        if code != 1 or want not in err:
            fail("--trace-feature %s: exit %s, expected 1 and %r in: %s" % (name, code, want, err[-800:]))
        if name == "nosuch":
            listed = err.split(have, 1)[1].split(")\n")[0] + ")"
            for t in ("image (uint8)", "label (int64)", "id (int64)", "dense (float32)"):
                if t not in listed:
                    fail("--trace-feature nosuch: the message does not list %s: %r" % (t, listed))
    code, err, trace = run("tf-id", ["--model", "none", "--trace-feature", "id"])
    ids = sorted(i for line in open(trace) for i in json.loads(line).get("ids", []))
    if code != 0 or ids != list(range(32)):
        fail("--trace-feature id: exit %s, ids %r: %s" % (code, ids[:10], err[-800:]))
    ok("--trace-feature: a missing tensor, a float32 and a uint8 one fail (exit 1) naming it and the "
       "job's tensors; an int64 one traces every id")
    links = [os.path.join(TMP, "tf-weights.npy"), os.path.join(TMP, "tf-metrics.jsonl")]
    for link in links:
        os.symlink("/dev/null", link)
    code, err, _ = run("tf-devnull", ["--model", "softmax", "--input", "image", "--label", "label",
                                      "--classes", "3", "--save-weights", links[0], "--metrics", links[1]])
    if code != 0:
        fail("training with outputs on /dev/null links: exit %s: %s" % (code, err[-800:]))
    for link in links:
        if not os.path.islink(link) or os.readlink(link) != "/dev/null":
            fail("%s: the link to /dev/null was replaced" % link)
    if not stat.S_ISCHR(os.stat("/dev/null").st_mode):
        fail("/dev/null is no longer a character device")
    ok("--save-weights and --metrics through links to /dev/null: written, the links and the device left alone")


def main():
    data = os.path.join(TMP, "data")
    subprocess.run([RECORD, "gen", "--output-dir", data, "--records", "480", "--shards", "4", "--seed", "5",
                    "--image-bytes", "12", "--classes", "3"], check=True, capture_output=True)
    job = {"name": "train-it", "files": [os.path.join(data, "gen-*.tfrecord")], "format": "tfrecord",
           "features": {"image": {"dtype": "uint8", "shape": [12], "from": "bytes"},
                        "label": {"dtype": "int64", "shape": []}},
           # DATA sharding: every configuration's global batches hold the same elements
           "shard_policy": "data", "global_batch_size": 16, "epochs": 2,
           "shuffle": {"buffer": 64, "seed": 3}}
    job_path = os.path.join(TMP, "job.json")
    with open(job_path, "w") as f:
        json.dump(job, f)
    for model in ("softmax", "mlp"):
        results = {}
        for W, R in ((1, 1), (1, 2), (2, 1), (2, 2)):
            outs = train(job_path, W, R, model, "%s-%dx%d" % (model, W, R))
            tag = "%s-%dx%d" % (model, W, R)
            check_outputs(tag, outs)
            hashes = {o["weights_hash"] for o in outs}
            if len(hashes) != 1:
                fail("%s %dx%d: workers end with different weights: %s" % (model, W, R, hashes))
            results[(W, R)] = outs[0]
        base = results[(1, 1)]
        dev = max(abs(r["loss"] - base["loss"]) for r in results.values())
        for key, r in results.items():
            if abs(r["loss"] - base["loss"]) > 2e-5 or abs(r["accuracy"] - base["accuracy"]) > 0.02:
                fail("%s: %dx%d loss %.6f accuracy %.4f vs 1x1 loss %.6f accuracy %.4f" % (
                    model, key[0], key[1], r["loss"], r["accuracy"], base["loss"], base["accuracy"]))
            if r["steps"] != base["steps"]:
                fail("%s: %dx%d ran %d steps, 1x1 %d" % (model, key[0], key[1], r["steps"], base["steps"]))
        ok("%s: 1x1, 1x2, 2x1, 2x2 give the same loss (%.6f, largest difference %.2g); workers' weights identical"
           % (model, base["loss"], dev))
    # tower mode (replicate_model_fn: one copy of the weights, tower losses
    # scaled by 1/towers, gradients added, applied once) against mirrored
    # variables on the same job: the same arithmetic for equal towers, so the
    # same per-step losses and the same weights bit for bit
    for model, R in (("softmax", 2), ("mlp", 2), ("mlp", 4)):
        tag = "%s-1x%d" % (model, R)
        mirrored = train(job_path, 1, R, model, tag + "-mirrored", ["--mode", "mirrored", "--hash-every", "1"])[0]
        tower = train(job_path, 1, R, model, tag + "-tower", ["--mode", "tower", "--hash-every", "1"])[0]
        if tower.get("mode") != "tower" or mirrored.get("mode") != "mirrored":
            fail("%s: the summaries do not report the mode: %r / %r" % (tag, tower.get("mode"), mirrored.get("mode")))
        steps = [[json.loads(x) for x in open(os.path.join(TMP, "%s-%s-w0.jsonl" % (tag, m)))]
                 for m in ("mirrored", "tower")]
        if len(steps[0]) != len(steps[1]):
            fail("%s: %d mirrored steps, %d tower steps" % (tag, len(steps[0]), len(steps[1])))
        first = max(abs(a["loss"] - b["loss"]) for a, b in zip(steps[0][:10], steps[1][:10]))
        if first > 1e-6:
            fail("%s: tower and mirrored first-step losses differ by %.3g" % (tag, first))
        if abs(tower["loss"] - mirrored["loss"]) > 2e-5 or tower["weights_hash"] != mirrored["weights_hash"]:
            fail("%s: tower loss %.6f weights %s, mirrored loss %.6f weights %s" % (
                tag, tower["loss"], tower["weights_hash"], mirrored["loss"], mirrored["weights_hash"]))
        if not tower["h2d_bytes"] > 0 or tower["h2d_bytes"] != mirrored["h2d_bytes"]:
            fail("%s: staged bytes %r (tower) vs %r (mirrored)" % (tag, tower["h2d_bytes"], mirrored["h2d_bytes"]))
        ok("%s: tower mode = mirrored: first 10 steps' losses within %.1g, loss %.6f, identical weights (%s)"
           % (tag, first, tower["loss"], tower["weights_hash"]))
    # tower mode with a partial last batch (issue #24 D.17): 100 records,
    # G 16, drop_remainder false, shard_policy auto (FILE). The stream split
    # hands the last batch's 4 rows over as 4, 0 (R 2) or 4, 0, 0, 0 (R 4),
    # which failed "tower 0 4 rows, expected 2"; replicate_model_fn's tf.split
    # makes 2, 2 and 1, 1, 1, 1. The DATA policy's legacy split gives those
    # shards already (and, with one worker, the same full batches), so the
    # tower run must equal a mirrored DATA run step by step, bit for bit.
    tdata = os.path.join(TMP, "taildata")
    subprocess.run([RECORD, "gen", "--output-dir", tdata, "--records", "100", "--shards", "2", "--seed", "4",
                    "--image-bytes", "12", "--classes", "3"], check=True, capture_output=True)
    for R in (2, 4):
        tag = "tail-1x%d" % R
        paths = {}
        for policy in ("auto", "data"):
            tail = dict(job, files=[os.path.join(tdata, "gen-*.tfrecord")], shard_policy=policy,
                        drop_remainder=False)
            paths[policy] = os.path.join(TMP, "tail-%s.json" % policy)
            with open(paths[policy], "w") as f:
                json.dump(tail, f)
        tower = train(paths["auto"], 1, R, "mlp", tag + "-tower", ["--mode", "tower", "--hash-every", "1"])[0]
        mirrored = train(paths["data"], 1, R, "mlp", tag + "-mirrored", ["--hash-every", "1"])[0]
        steps = [[json.loads(x) for x in open(os.path.join(TMP, "%s-%s-w0.jsonl" % (tag, m)))]
                 for m in ("tower", "mirrored")]
        rows = [x["rows"] for x in steps[0]]
        if rows != ([16] * 6 + [4]) * 2 or [x["rows"] for x in steps[1]] != rows:
            fail("%s: step rows %r (tower), %r (mirrored)" % (tag, rows, [x["rows"] for x in steps[1]]))
        diff = max(abs(a["loss"] - b["loss"]) for a, b in zip(steps[0], steps[1]))
        if diff > 1e-6 or tower["weights_hash"] != mirrored["weights_hash"] or not tower.get("ok"):
            fail("%s: tower (auto) loss %.6f weights %s, mirrored (data) loss %.6f weights %s, step losses within "
                 "%.3g" % (tag, tower["loss"], tower["weights_hash"], mirrored["loss"], mirrored["weights_hash"],
                           diff))
        ok("%s: tower mode with a partial last batch (4 rows as %s): split %s, every step's loss and the weights "
           "as a mirrored DATA run's (%s)" % (tag, "4, 0" if R == 2 else "4, 0, 0, 0", "2/2" if R == 2 else
                                               "1/1/1/1", tower["weights_hash"]))
    # and its evaluation with --predictions: the towers' predictions of a
    # re-cut last batch still meet their ids (every id once, in order)
    ejob = {"name": "eval-it", "files": [os.path.join(tdata, "gen-*.tfrecord")], "format": "tfrecord",
            "features": {"image": {"dtype": "uint8", "shape": [12], "from": "bytes"},
                         "label": {"dtype": "int64", "shape": []}, "id": {"dtype": "int64", "shape": []}},
            "global_batch_size": 16, "epochs": 1}
    ejob_path = os.path.join(TMP, "tail-eval.json")
    with open(ejob_path, "w") as f:
        json.dump(ejob, f)
    esock = "ipc://%s/tail-eval.sock" % TMP
    elog = open(os.path.join(TMP, "tail-eval-feeder.log"), "w")
    efeeder = subprocess.Popen([FEEDER, "--job", ejob_path, "--listen", esock, "--threads", "1"], stdout=elog,
                               stderr=subprocess.STDOUT)
    STRAYS.append(efeeder)
    pred = os.path.join(TMP, "tail-pred.jsonl")
    out = train(paths["auto"], 1, 2, "mlp", "tail-pred", ["--mode", "tower", "--eval-connect", esock, "--eval-job",
                                                         "eval-it", "--predictions", pred])[0]
    efeeder.kill()
    efeeder.wait()
    ids = [json.loads(x)["id"] for x in open(pred)]
    if ids != list(range(100)) or out["test_rows"] != 100:
        fail("tower --predictions with a partial last batch: ids %r, test_rows %r" % (ids[:20], out["test_rows"]))
    ok("tower mode --predictions: 100 elements (the last batch's 4 re-cut 2/2), every id once, in order")
    # --progress on: a progress line per redraw on stderr (worker 0), erased
    # before the per-epoch log lines, naming epoch and step of the totals
    # (480 records / G 16 = 30 steps per epoch, 2 epochs)
    train(job_path, 1, 1, "softmax", "progress", ["--progress", "on", "--log-every", "0"])
    log = open(os.path.join(TMP, "progress-trainer0.log"), newline="").read()
    draws = re.findall(r"\r\x1b\[Kepoch (\d+)/2 step (\d+)/30  loss [0-9.]+  \d+ samples/s  input stall [0-9.]+%", log)
    if not draws or draws[0] != ("1", "1"):
        fail("--progress on: no progress line starting at epoch 1/2 step 1/30 in %r" % log[:400])
    if "epoch 1 step 29" not in log.replace("\r\x1b[K", "\n"):
        fail("--progress on: the per-epoch log line is missing or garbled: %r" % log[-600:])
    ok("--progress on: %d progress redraws (epoch e/2 step s/30), log lines intact" % len(draws))
    # --predictions: the evaluation's predictions gathered from both workers
    # by element id, written by worker 0 in id order; labels must be the
    # dataset's (read back with sluice-record cat), accuracy the summary's
    edata = os.path.join(TMP, "evaldata")
    subprocess.run([RECORD, "gen", "--output-dir", edata, "--records", "203", "--shards", "3", "--seed", "9",
                    "--image-bytes", "12", "--classes", "3", "--prefix", "ev"], check=True, capture_output=True)
    efiles = sorted(os.path.join(edata, f) for f in os.listdir(edata))
    truth = {}
    for f in efiles:
        out = subprocess.run([RECORD, "cat", "--decode", "example", f], check=True, capture_output=True, text=True)
        for line in out.stdout.splitlines():
            ft = json.loads(line)["example"]["features"]["feature"]
            truth[int(ft["id"]["int64List"]["value"][0])] = int(ft["label"]["int64List"]["value"][0])
    for policy, expect_ok in (("data", True), ("off", False)):
        ejob = {"name": "eval-it", "files": efiles, "format": "tfrecord", "shard_policy": policy,
                "features": {"image": {"dtype": "uint8", "shape": [12], "from": "bytes"},
                             "label": {"dtype": "int64", "shape": []}, "id": {"dtype": "int64", "shape": []}},
                "global_batch_size": 16, "epochs": 1}
        ejob_path = os.path.join(TMP, "eval-%s.json" % policy)
        with open(ejob_path, "w") as f:
            json.dump(ejob, f)
        esock = "ipc://%s/eval-%s.sock" % (TMP, policy)
        elog = open(os.path.join(TMP, "eval-%s-feeder.log" % policy), "w")
        efeeder = subprocess.Popen([FEEDER, "--job", ejob_path, "--listen", esock, "--threads", "1"],
                                   stdout=elog, stderr=subprocess.STDOUT)
        STRAYS.append(efeeder)
        pred = os.path.join(TMP, "pred-%s.jsonl" % policy)
        tag = "pred-%s" % policy
        outs = train(job_path, 2, 2, "mlp", tag, ["--eval-connect", esock, "--eval-job", "eval-it",
                                                   "--predictions", pred], may_fail=not expect_ok)
        efeeder.kill()
        efeeder.wait()
        if not expect_ok:
            # every worker gets every element under OFF: each id twice
            logs = "".join(open(os.path.join(TMP, "%s-trainer%d.log" % (tag, w))).read() for w in range(2))
            if outs is not None or logs.count("element id 0 was evaluated 2 times") != 2:
                fail("--predictions under shard_policy off: both workers must fail naming id 0 twice: %r" % logs[-600:])
            ok("--predictions refuses an evaluation where ids repeat (OFF: each id on both workers), on every worker")
            continue
        rows = [json.loads(x) for x in open(pred)]
        if [r["id"] for r in rows] != list(range(203)):
            fail("--predictions: ids are not 0..202 in order: %r" % [r["id"] for r in rows][:20])
        wrong = [r["id"] for r in rows if r["label"] != truth[r["id"]]]
        if wrong:
            fail("--predictions: labels differ from the dataset's at ids %r" % wrong[:10])
        acc = sum(r["prediction"] == r["label"] for r in rows) / 203.0
        if any(abs(o["test_accuracy"] - acc) > 1e-5 or o["test_rows"] != 203 for o in outs):
            fail("--predictions: accuracy %.5f from the file, summaries say %r" % (acc, [o["test_accuracy"] for o in outs]))
        if not all(0 <= r["prediction"] < 3 for r in rows):
            fail("--predictions: a prediction outside the 3 classes")
        ok("--predictions: 2 workers x 2 replicas, 203 elements gathered by id in order, labels exact, "
           "accuracy %.4f = the summaries'" % acc)
        # a run restored mid-job evaluates the whole evaluation job: its
        # client starts at the evaluation's first piece, not at the training
        # stream's restored position (which it once inherited: a seq past
        # the evaluation job's end, refused by its feeder)
        ck = os.path.join(TMP, "eval-ck")
        train(job_path, 2, 2, "mlp", "eval-ck-1", ["--checkpoint", ck, "--checkpoint-every", "20"])
        efeeder = subprocess.Popen([FEEDER, "--job", ejob_path, "--listen", esock, "--threads", "1"],
                                   stdout=elog, stderr=subprocess.STDOUT)
        STRAYS.append(efeeder)
        pred2 = os.path.join(TMP, "pred-restored.jsonl")
        outs = train(job_path, 2, 2, "mlp", "eval-ck-2", ["--restore", ck, "--restore-step", "40", "--eval-connect",
                                                           esock, "--eval-job", "eval-it", "--predictions", pred2])
        efeeder.kill()
        efeeder.wait()
        rows2 = [json.loads(x) for x in open(pred2)]
        if [r["id"] for r in rows2] != list(range(203)) or any(o["test_rows"] != 203 for o in outs):
            fail("restored at step 40: the evaluation covered ids %r, test_rows %r" %
                 ([r["id"] for r in rows2][:10], [o["test_rows"] for o in outs]))
        ok("a run restored at step 40 of 60 evaluates all 203 elements of the evaluation job")
    # the tolerance is meaningful: a 5% different step size (as a gradient
    # scaled by the wrong row count would be) moves the loss by more
    global LR
    LR = "0.0105"
    off = train(job_path, 1, 1, "softmax", "softmax-lr")[0]
    LR = "0.01"
    base = train(job_path, 1, 1, "softmax", "softmax-base")[0]
    if abs(off["loss"] - base["loss"]) <= 2e-5:
        fail("the equivalence tolerance cannot tell a 5%% step change: %.6f vs %.6f" % (off["loss"], base["loss"]))
    ok("a 5%% different step changes the loss by %.2g, well beyond the 2e-5 tolerance" % abs(off["loss"] - base["loss"]))
    keepalive(job_path)
    trace_feature_and_outputs()
    print("%d passed, 0 failed" % PASSED)


if __name__ == "__main__":
    try:
        main()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
