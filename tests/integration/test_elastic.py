#!/usr/bin/env python3
"""Elastic workers (sluice-trainer --elastic, issue #30 part 2; docs/trainer.md
"Elastic workers"): workers join and leave a running ring at an epoch boundary
without a restart.

One feeder serves a 3-epoch job. Two workers start elastic (--model softmax);
a third process asks to join (--join) in the middle of epoch 0 and trains from
epoch 1's start; then worker 1 gets a SIGTERM in epoch 1 and is let go at its
end, the joiner becoming worker 1 of 2. Each process's --trace must equal the
reference model (tests/plan/ref_plan.py) for the shape of each epoch it
trained (2 x 1, 3 x 1, 2 x 1), every epoch holds every element exactly once
across the workers, and from the join on every member's weights hash
(--metrics) is the same at each step. Meanwhile the coordinator's refusals,
each named: a joiner with another model config, another replica count, one
too many (--elastic-max-workers), a join in the job's last epoch, and a
SIGTERM to worker 0 (it cannot leave: it trains on). A second case starts
one worker of 2 replicas alone (no ring): a joiner that dies while it
waits is forgotten, another joins at epoch 1 (1 x 2 -> 2 x 2) and leaves
at its end. A third has one worker leave and one join at the same
boundary (the shape kept). Then usage errors.

Usage: test_elastic.py BUILD_DIR
"""
import json
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bed  # noqa: E402
import harness  # noqa: E402
from bed import read_log, wait, wait_for_log  # noqa: E402
from harness import fail, ok, spawn  # noqa: E402

bed.setup(sys.argv[1], "elastic")
EPOCHS = 3
FILES = bed.gen("data", 240, 6)
SHUFFLE = {"buffer": 40, "seed": 11}
TAG = "elastic"
MODEL = ["--model", "softmax", "--input", "image", "--label", "label", "--classes", "10", "--lr", "0.05",
         "--seed", "5"]


def ids_of_files():
    out = []
    for f in FILES:
        p = subprocess.run([bed.RECORD, "cat", "--decode", "example", f], check=True, capture_output=True, text=True)
        out.append([int(json.loads(x)["example"]["features"]["feature"]["id"]["int64List"]["value"][0])
                    for x in p.stdout.splitlines()])
    return out


IDS = ids_of_files()


def sock(name):
    return "ipc://" + os.path.join(bed.TMP, name + ".sock")


COORD = sock("coord")
RING = [sock("ring0"), sock("ring1")]


def trainer(who, ep, job, extra, step_ms=80, coord=COORD, tag=TAG, devices="cpu:1"):
    trace = os.path.join(bed.TMP, "%s.trace" % who)
    metrics = os.path.join(bed.TMP, "%s.jsonl" % who)
    p = spawn([bed.TRAINER, "--connect", ep, "--job", job["name"], "--devices", devices, "--trace", trace,
               "--metrics", metrics, "--heartbeat-ms", "200", "--timeout-ms", "5000", "--progress", "off",
               "--credits", "8", "--step-ms", str(step_ms), "--log-every", "1", "--elastic", coord]
              + MODEL + list(extra),
              log=bed.log_path(tag, who), stdout=open(os.devnull, "w"))
    return p, trace, metrics


def lines(path, summary=False):
    out = []
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            if not line.endswith("\n"):
                break
            x = json.loads(line)
            if ("summary" in x) == summary:
                out.append(x)
    return out


def want(ref, w, epoch):
    return [{"worker": x["worker"], "replica": x["replica"], "epoch": x["epoch"], "step": x["step"], "seq": x["seq"],
             "size": len(x["elems"]), "ids": [IDS[fi][r] for fi, r in x["elems"]]}
            for x in ref.get(w, []) if x["epoch"] == epoch]


def check(what, got, expect):
    if got != expect:
        for i, (g, e) in enumerate(zip(got, expect)):
            if g != e:
                fail("%s: piece %d differs:\n  got  %s\n  want %s" % (what, i, g, e))
        fail("%s: %d pieces, want %d" % (what, len(got), len(expect)))


def wait_step(who, proc, epoch, step, what, timeout=30, tag=TAG):
    """Until who's log (--log-every 1) says it trained step `step` of `epoch`."""
    wait_for_log(tag, who, "epoch %d step %d: loss" % (epoch, step), proc, what, timeout)


def epoch_now(who):
    """The epoch of the newest step who's log reports (-1: none yet)."""
    found = re.findall(r"epoch (\d+) step \d+: loss", read_log(TAG, who))
    return int(found[-1]) if found else -1


def refused_join(who, ep, job, extra, text):
    p, _, _ = trainer(who, ep, job, ["--join", sock(who)] + list(extra))
    rc = wait(p, 20, "the refused joiner %s" % who)
    log = read_log(TAG, who)
    if rc == 0 or text not in log:
        fail("%s: expected a failure saying %r, got exit %d:\n%s" % (who, text, rc, log[-1500:]))


def check_run(job, places, procs, members, R=1):
    """Each process's trace against the reference for the shape of each
    epoch it trained (places: (process, epoch) -> (W, worker)), every
    element once per epoch, and for each epoch in members one weights hash
    per step from exactly those processes. Returns the steps per epoch."""
    counts = [len(x) for x in IDS]
    ref = {W: bed.reference(job, counts, W, R) for W in sorted({W for W, _ in places.values()})}
    seen = {e: [] for e in range(EPOCHS)}
    for who, (_, trace, _) in procs.items():
        got = lines(trace)
        epochs = sorted({x["epoch"] for x in got})
        if epochs != sorted(e for (w, e) in places if w == who):
            fail("%s traced epochs %s" % (who, epochs))
        for e in epochs:
            W, w = places[(who, e)]
            check("%s, epoch %d (worker %d of %d)" % (who, e, w, W), [x for x in got if x["epoch"] == e],
                  want(ref[W], w, e))
            seen[e] += [i for x in got if x["epoch"] == e for i in x["ids"]]
    every = sorted(i for ids in IDS for i in ids)
    for e in range(EPOCHS):
        if sorted(seen[e]) != every:
            fail("epoch %d delivered %d elements (%d distinct), want each of %d once"
                 % (e, len(seen[e]), len(set(seen[e])), len(every)))
    hashes = {}
    for who, (_, _, m) in procs.items():
        for x in lines(m):
            hashes.setdefault((x["epoch"], x["step"]), {})[who] = x["weights_hash"]
    W0 = places[("w0", 0)][0]
    steps = len(want(ref[W0], 0, 0)) // R
    for e, who in members.items():
        for s in range(steps):
            h = hashes.get((e, s), {})
            if set(h) != who or len(set(h.values())) != 1:
                fail("epoch %d step %d: weights hashes %r, want one hash from each of %s" % (e, s, h, sorted(who)))
    return steps


def main_case():
    harness.case()
    job_path, job = bed.write_job("job-" + TAG, FILES, epochs=EPOCHS, shuffle=SHUFFLE)
    f = spawn([bed.FEEDER, "--job", job_path, "--listen", sock("feeder"), "--threads", "2", "--heartbeat-ms", "200",
               "--timeout-ms", "5000"], log=bed.log_path(TAG, "feeder"))
    wait_for_log(TAG, "feeder", "serving job", f, "the feeder did not start")
    ep = sock("feeder")
    ring = ",".join(RING)
    w0 = trainer("w0", ep, job, ["--worker", "0", "--workers", "2", "--ring", ring, "--elastic-max-workers", "3"])
    w1 = trainer("w1", ep, job, ["--worker", "1", "--workers", "2", "--ring", ring])
    wait_step("w0", w0[0], 0, 2, "worker 0 did not train epoch 0")
    # the joiner in epoch 0 (30 steps of 80 ms), then the refusals (the one
    # too many before worker 1's leave frees a place)
    j = trainer("joiner", ep, job, ["--join", sock("joiner")])
    wait_for_log(TAG, "w0", "asks to join: admitted at epoch 1's start", w0[0], "the join was not admitted", 10)
    refused_join("other-config", ep, job, ["--momentum", "0.5"], "has config 'model=softmax")
    refused_join("other-replicas", ep, job, ["--devices", "cpu:2"],
                 "elastic: the joining worker (%s) has 2 replicas, but the job's workers have 1: every worker of an "
                 "elastic job has the same --replicas" % sock("other-replicas"))
    refused_join("too-many", ep, job, [],
                 "elastic: the joining worker (%s) would make 4 workers, more than --elastic-max-workers 3"
                 % sock("too-many"))
    if epoch_now("w0") > 1:
        fail("epoch 1 ended before the refusals were done: the test is too slow for its --step-ms")
    # epoch 1: 3 workers; worker 1 asked to leave at its end
    wait_step("joiner", j[0], 1, 2, "the joiner did not train epoch 1")
    w1[0].send_signal(signal.SIGTERM)
    wait_for_log(TAG, "w0", "worker 1 asks to leave: let go at epoch 1's end", w0[0], "the leave was not heard", 10)
    # worker 0 cannot leave: it says so and trains on
    w0[0].send_signal(signal.SIGTERM)
    wait_for_log(TAG, "w0", "elastic: worker 0 cannot leave the job: it holds the coordinator endpoint (--elastic %s)"
                 % COORD, w0[0], "worker 0 did not refuse to leave", 10)
    wait_step("w0", w0[0], 2, 1, "worker 0 did not reach epoch 2")
    refused_join("last-epoch", ep, job, [],
                 "elastic: the job is in its last epoch (epoch 2 of 3): no epoch boundary is left to admit the "
                 "joining worker (%s) at" % sock("last-epoch"))
    for who, (p, _, _) in (("w0", w0), ("w1", w1), ("joiner", j)):
        if wait(p, 40, who) != 0:
            fail("%s exited %d:\n%s" % (who, p.returncode, read_log(TAG, who)[-3000:]))
    if wait(f, 30, "the feeder") != 0:
        fail("the feeder did not exit 0:\n%s" % read_log(TAG, "feeder")[-2000:])
    if "worker 1 let go at epoch 1's end" not in read_log(TAG, "w1"):
        fail("worker 1's log does not say it was let go:\n%s" % read_log(TAG, "w1")[-2000:])
    if "worker 2 is now worker 1 of 2" not in read_log(TAG, "joiner"):
        fail("the joiner's log does not say it became worker 1:\n%s" % read_log(TAG, "joiner")[-2000:])
    log = read_log(TAG, "feeder")
    for line in ("cluster shape 2 x 1 -> 3 x 1 at epoch 1", "cluster shape 3 x 1 -> 2 x 1 at epoch 2"):
        if log.count(line) != 1:
            fail("the feeder's log lacks %r (once):\n%s" % (line, log[-3000:]))
    if os.environ.get("SLUICE_ELASTIC_SHOW"):
        for who in ("feeder", "w0", "w1", "joiner"):
            print("\n".join(x for x in read_log(TAG, who).splitlines() if ": loss " not in x))
    places = {("w0", 0): (2, 0), ("w0", 1): (3, 0), ("w0", 2): (2, 0),
              ("w1", 0): (2, 1), ("w1", 1): (3, 1),
              ("joiner", 1): (3, 2), ("joiner", 2): (2, 1)}
    procs = {"w0": w0, "w1": w1, "joiner": j}
    steps = check_run(job, places, procs, {1: {"w0", "w1", "joiner"}, 2: {"w0", "joiner"}})
    ok("elastic: 2 workers, a third joined at epoch 1 and worker 1 left at epoch 1's end: traces equal the reference "
       "for 2 x 1, 3 x 1, 2 x 1, every element once per epoch, one weights hash per step on every member from the "
       "join (%d steps each epoch); refusals named (config, replicas, too many, last epoch, worker 0's leave)"
       % steps)


def solo_case():
    """One worker of 2 replicas starts elastic (no ring, no rendezvous); a
    joiner admitted in epoch 0 dies before the boundary (worker 0 forgets
    it), another joins at epoch 1 (1 x 2 -> 2 x 2) and leaves at its end
    (back to 1 x 2)."""
    harness.case()
    tag, coord = "solo", sock("solo-coord")
    job_path, job = bed.write_job("job-" + tag, FILES, epochs=EPOCHS, shuffle=SHUFFLE)
    f = spawn([bed.FEEDER, "--job", job_path, "--listen", sock("solo-feeder"), "--threads", "2", "--heartbeat-ms",
               "200", "--timeout-ms", "5000"], log=bed.log_path(tag, "feeder"))
    wait_for_log(tag, "feeder", "serving job", f, "solo: the feeder did not start")
    ep = sock("solo-feeder")
    kw = dict(step_ms=120, coord=coord, tag=tag, devices="cpu:2")
    w0 = trainer("solo-w0", ep, job, ["--worker", "0", "--workers", "1", "--ring", sock("solo-r0")], **kw)
    wait_step("solo-w0", w0[0], 0, 1, "solo: worker 0 did not train epoch 0", tag=tag)
    dead = trainer("solo-dead", ep, job, ["--join", sock("solo-dead")], **kw)
    wait_for_log(tag, "solo-dead", "elastic: admitted: joining at epoch 1's start", dead[0],
                 "solo: the first joiner was not admitted", 10)
    dead[0].kill()
    wait(dead[0], 10, "solo: the killed joiner")
    wait_for_log(tag, "solo-w0", "elastic: the joining worker (%s) went away before the epoch boundary: forgotten"
                 % sock("solo-dead"), w0[0], "solo: worker 0 did not forget the dead joiner", 10)
    b = trainer("solo-b", ep, job, ["--join", sock("solo-b")], **kw)
    wait_for_log(tag, "solo-w0", "asks to join: admitted at epoch 1's start", w0[0], "solo: the join was not admitted",
                 10)
    wait_step("solo-b", b[0], 1, 1, "solo: the joiner did not train epoch 1", tag=tag)
    b[0].send_signal(signal.SIGTERM)
    for who, (p, _, _) in (("solo-w0", w0), ("solo-b", b)):
        if wait(p, 40, who) != 0:
            fail("%s exited %d:\n%s" % (who, p.returncode, read_log(tag, who)[-3000:]))
    if wait(f, 30, "solo: the feeder") != 0:
        fail("solo: the feeder did not exit 0:\n%s" % read_log(tag, "feeder")[-2000:])
    if "elastic: worker 1 let go at epoch 1's end" not in read_log(tag, "solo-b"):
        fail("solo: the joiner's log does not say it was let go:\n%s" % read_log(tag, "solo-b")[-2000:])
    log = read_log(tag, "feeder")
    for line in ("cluster shape 1 x 2 -> 2 x 2 at epoch 1", "cluster shape 2 x 2 -> 1 x 2 at epoch 2"):
        if log.count(line) != 1:
            fail("solo: the feeder's log lacks %r (once):\n%s" % (line, log[-3000:]))
    places = {("w0", 0): (1, 0), ("w0", 1): (2, 0), ("w0", 2): (1, 0), ("joiner", 1): (2, 1)}
    check_run(job, places, {"w0": w0, "joiner": b}, {1: {"w0", "joiner"}}, R=2)
    ok("solo: 1 worker of 2 replicas, a joiner that died while it waited forgotten, another joined at epoch 1 and left at its "
       "end: traces equal the reference for 1 x 2, 2 x 2, 1 x 2, every element once per epoch, one weights hash per "
       "step in epoch 1")


def same_shape_case():
    """Worker 1 leaves and a joiner comes at the same boundary (epoch 0's
    end): the world keeps 2 workers, so the feeder keeps its shape and
    serves epoch 1 on by epoch resume, the joiner as worker 1."""
    harness.case()
    tag, coord = "same", sock("same-coord")
    job_path, job = bed.write_job("job-" + tag, FILES, epochs=EPOCHS, shuffle=SHUFFLE)
    f = spawn([bed.FEEDER, "--job", job_path, "--listen", sock("same-feeder"), "--threads", "2", "--heartbeat-ms",
               "200", "--timeout-ms", "5000"], log=bed.log_path(tag, "feeder"))
    wait_for_log(tag, "feeder", "serving job", f, "same: the feeder did not start")
    ep = sock("same-feeder")
    kw = dict(coord=coord, tag=tag)
    ring = sock("same-r0") + "," + sock("same-r1")
    w0 = trainer("same-w0", ep, job, ["--worker", "0", "--workers", "2", "--ring", ring], **kw)
    w1 = trainer("same-w1", ep, job, ["--worker", "1", "--workers", "2", "--ring", ring], **kw)
    wait_step("same-w0", w0[0], 0, 1, "same: worker 0 did not train epoch 0", tag=tag)
    b = trainer("same-b", ep, job, ["--join", sock("same-b")], **kw)
    wait_for_log(tag, "same-w0", "asks to join: admitted at epoch 1's start", w0[0], "same: the join was not admitted",
                 10)
    w1[0].send_signal(signal.SIGTERM)
    wait_for_log(tag, "same-w0", "worker 1 asks to leave: let go at epoch 0's end", w0[0],
                 "same: the leave was not heard in epoch 0", 10)
    for who, (p, _, _) in (("same-w0", w0), ("same-w1", w1), ("same-b", b)):
        if wait(p, 40, who) != 0:
            fail("%s exited %d:\n%s" % (who, p.returncode, read_log(tag, who)[-3000:]))
    if wait(f, 30, "same: the feeder") != 0:
        fail("same: the feeder did not exit 0:\n%s" % read_log(tag, "feeder")[-2000:])
    if "->" in "".join(x for x in read_log(tag, "feeder").splitlines() if "cluster shape" in x):
        fail("same: the feeder changed its shape:\n%s" % read_log(tag, "feeder")[-2000:])
    places = {("w0", 0): (2, 0), ("w0", 1): (2, 0), ("w0", 2): (2, 0), ("w1", 0): (2, 1),
              ("joiner", 1): (2, 1), ("joiner", 2): (2, 1)}
    check_run(job, places, {"w0": w0, "w1": w1, "joiner": b}, {1: {"w0", "joiner"}, 2: {"w0", "joiner"}})
    ok("same shape: worker 1 left and a joiner came at epoch 0's end, the feeder kept 2 x 1: traces equal the "
       "reference, every element once per epoch, one weights hash per step on both members from the join")


def usage_errors():
    harness.case()
    base = [bed.TRAINER, "--connect", sock("none"), "--job", "j"]
    cases = [
        (["--join", sock("x")], "--join needs --elastic EP (worker 0's coordinator endpoint)"),
        (["--elastic", COORD, "--model", "none"], "--elastic trains a model on CPU replicas with --mode mirrored"),
        (["--elastic", COORD] + MODEL + ["--workers", "3", "--ring", "ipc://a,ipc://b,ipc://c",
                                         "--elastic-max-workers", "2"],
         "--workers 3 is more than --elastic-max-workers 2"),
        (["--elastic", COORD] + MODEL + ["--workers", "2", "--ring", "ipc://a," + COORD],
         "--elastic %s is worker 1's ring endpoint: give the coordinator its own" % COORD),
        (["--elastic", COORD] + MODEL + ["--join", sock("x"), "--workers", "2"],
         "--join: worker 0 gives this process its index, the worker count and the ring's endpoints"),
        (["--elastic", COORD] + MODEL + ["--join", "ipc://a,ipc://b"], "--join takes this process's one ring endpoint"),
        (["--elastic", ""] + MODEL, "--elastic: an empty endpoint"),
        (["--elastic", COORD] + MODEL + ["--elastic-max-workers", "0"], "elastic-max-workers"),
        (["--elastic", COORD] + MODEL + ["--checkpoint", os.path.join(bed.TMP, "ck")],
         "--elastic does not support --checkpoint yet"),
        (["--elastic", COORD] + MODEL + ["--join", sock("x"), "--elastic-max-workers", "5"],
         "--elastic-max-workers is worker 0's"),
        (["--elastic", "tcp://192.0.2.1:7777"] + MODEL,
         "--elastic tcp://192.0.2.1:7777 is not a loopback or ipc endpoint, and the coordinator's messages travel in "
         "plaintext (an elastic job has no CURVE yet): give --insecure to accept that"),
        (["--elastic", COORD] + MODEL + ["--join", "tcp://192.0.2.1:7001"],
         "--join: this worker's ring endpoint tcp://192.0.2.1:7001 can be reached from other hosts"),
        (["--elastic", COORD] + MODEL + ["--mode", "ps", "--ps", "tcp://127.0.0.1:1"], "not --mode tower or ps"),
    ]
    for extra, text in cases:
        p = subprocess.run(base + extra, capture_output=True, text=True, timeout=20)
        if p.returncode != 2 or text not in p.stderr:
            fail("sluice-trainer %s: expected exit 2 saying %r, got %d:\n%s" % (" ".join(extra), text, p.returncode,
                                                                               p.stderr[-1000:]))
    ok("usage errors: %d, each naming the option" % len(cases))


try:
    usage_errors()
    main_case()
    solo_case()
    same_shape_case()
finally:
    bed.finish()
    bed.cleanup()
