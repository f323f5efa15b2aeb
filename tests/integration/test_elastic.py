#!/usr/bin/env python3
"""Elastic workers (sluice-trainer --elastic, issue #30 part 2; docs/trainer.md
"Elastic workers"): workers join and leave a running ring at a step boundary
without a restart.

One feeder serves a 3-epoch job. Two workers start elastic (--model softmax);
a third process asks to join (--join) in epoch 0 and is admitted within two
steps (2 x 1 -> 3 x 1 at step t1 of epoch 0: the feeders' mid-epoch
change). In the same epoch worker 1 gets a SIGTERM and a fourth process asks
to join: a second change within an epoch is not allowed (docs/semantics.md
5.2), so worker 0 defers both to epoch 1's start, where the world keeps 3
workers (worker 1 out, the second joiner in; the stream's change kept). Then
the first joiner gets a SIGTERM in epoch 1 and is let go before the next
step (3 x 1 -> 2 x 1 at step t2 of epoch 1); the second joiner's SIGTERM
in the job's last 8 steps waits for the job's end (its window of 8 pieces
may hold the rest of its stream). Each process's --trace must
equal the reference model (tests/plan/ref_plan.py: the plain plans, and
transition_pieces for the streams after a mid-epoch change) for each world
it was in, every epoch holds every element exactly once across the
workers, the global step carries on across the changes, and from the first
join on every member's weights hash (--metrics) is the same at each step.
Meanwhile the coordinator's refusals, each named: a joiner with another
model config, another replica count, one too many (--elastic-max-workers),
a join in the job's last epoch, and a SIGTERM to worker 0 (it cannot leave:
it trains on). A second case starts one worker of 2 replicas alone (no
ring): a joiner comes mid-epoch 0 (1 x 2 -> 2 x 2), asks to leave in the
same epoch and is let go at epoch 1's start (2 x 2 -> 1 x 2: the feeders'
epoch-boundary reshape after a mid-epoch change), and a joiner that dies
while its change waits is forgotten. Then usage errors.

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


def check(what, got, expect):
    if got != expect:
        for i, (g, e) in enumerate(zip(got, expect)):
            if g != e:
                fail("%s: piece %d differs:\n  got  %s\n  want %s" % (what, i, g, e))
        fail("%s: %d pieces, want %d" % (what, len(got), len(expect)))


def wait_step(who, proc, epoch, step, what, timeout=30, tag=TAG):
    """Until who's log (--log-every 1) says it trained step `step` of `epoch`."""
    wait_for_log(tag, who, "epoch %d step %d: loss" % (epoch, step), proc, what, timeout)


def epoch_now(who, tag=TAG):
    """The epoch of the newest step who's log reports (-1: none yet)."""
    found = re.findall(r"epoch (\d+) step \d+: loss", read_log(tag, who))
    return int(found[-1]) if found else -1


def refused_join(who, ep, job, extra, text):
    p, _, _ = trainer(who, ep, job, ["--join", sock(who)] + list(extra))
    rc = wait(p, 20, "the refused joiner %s" % who)
    log = read_log(TAG, who)
    if rc == 0 or text not in log:
        fail("%s: expected a failure saying %r, got exit %d:\n%s" % (who, text, rc, log[-1500:]))


CHANGE = re.compile(r"elastic: before step (\d+) of epoch (\d+) \(global step (\d+)\): (\d+) workers -> (\d+)")


def changes(tag, who):
    """The changes who's log reports: [(epoch, step, global step, old size, new size)]."""
    return [(int(e), int(s), int(g), int(a), int(b)) for s, e, g, a, b in CHANGE.findall(read_log(tag, who))]


def wait_change(tag, who, proc, n, what, timeout=15):
    """Until who's log reports its n-th change; returns them all."""
    end = time.time() + timeout
    while time.time() < end:
        got = changes(tag, who)
        if len(got) >= n:
            return got
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    fail("%s (%s's log, exit %s):\n%s" % (what, who, proc.poll(), read_log(tag, who)[-3000:]))


def ref_cfg(job, W, R):
    """The reference model's config of the job for W x R (bed.reference's, normalized)."""
    return bed.ref_plan.normalize({
        "counts": [len(x) for x in IDS], "source_is_files": 1, "policy": "auto", "hint": "files",
        "G": job["global_batch_size"], "drop_remainder": 0, "shuffle_buffer": SHUFFLE["buffer"],
        "seed": SHUFFLE["seed"], "reshuffle": 1, "epochs": EPOCHS, "W": W, "R": R})


def stream(job, W, R, kind, r):
    """Worker r's pieces (as its trace writes them) of the W x R input: kind
    None the plain plan (seq from the job's start), or (W_old, e, t) the
    stream after the change at step t of epoch e from W_old x R (seq from
    the change; ref_plan.transition_pieces)."""
    piece = (lambda k, e, s, p: {"worker": r, "replica": k % R, "epoch": e, "step": s, "seq": k, "size": len(p),
                                 "ids": [IDS[fi][x] for fi, x in p]})
    if kind is None:
        return [piece(x["seq"], x["epoch"], x["step"], x["elems"])
                for x in bed.reference(job, [len(x) for x in IDS], W, R).get(r, [])]
    Wo, e, t = kind
    co, cn = ref_cfg(job, Wo, R), ref_cfg(job, W, R)
    T, T2 = bed.ref_plan.epoch_steps(co), bed.ref_plan.epoch_steps(cn)
    head = (T - t) * R
    out = []
    for k, p in enumerate(bed.ref_plan.transition_pieces(co, cn, r, e, t, EPOCHS)):
        if k < head:
            out.append(piece(k, e, t + k // R, p))
        else:
            out.append(piece(k, e + 1 + (k - head) // (T2 * R), (k - head) % (T2 * R) // R, p))
    return out


def check_worlds(tag, job, worlds, procs, R=1):
    """worlds: [{"at": (epoch, step), "W": W, "kind": stream kind, "ranks":
    {process: rank}}] in order, each lasting until the next one's "at". Each
    process's trace must be the concatenation, over the worlds it was in, of
    its rank's stream pieces within that world's steps; every epoch every
    element once; from the second world on, one weights hash per step from
    exactly that world's members."""
    want, steps = {}, []
    for i, wd in enumerate(worlds):
        end = worlds[i + 1]["at"] if i + 1 < len(worlds) else (EPOCHS, 0)
        keys = set()
        for who, r in wd["ranks"].items():
            got = [x for x in stream(job, wd["W"], R, wd["kind"], r) if wd["at"] <= (x["epoch"], x["step"]) < end]
            want.setdefault(who, []).extend(got)
            keys |= {(x["epoch"], x["step"]) for x in got}
        steps.append(sorted(keys))
    seen = {e: [] for e in range(EPOCHS)}
    for who, (_, trace, _) in procs.items():
        got = lines(trace)
        check("%s: %s" % (tag, who), got, want.get(who, []))
        for x in got:
            seen[x["epoch"]] += x["ids"]
    every = sorted(i for ids in IDS for i in ids)
    for e in range(EPOCHS):
        if sorted(seen[e]) != every:
            fail("%s: epoch %d delivered %d elements (%d distinct), want each of %d once"
                 % (tag, e, len(seen[e]), len(set(seen[e])), len(every)))
    hashes = {}
    for who, (_, _, m) in procs.items():
        for x in lines(m):
            hashes.setdefault((x["epoch"], x["step"]), {})[who] = x["weights_hash"]
    for i, wd in enumerate(worlds[1:], 1):
        for key in steps[i]:
            h = hashes.get(key, {})
            if set(h) != set(wd["ranks"]) or len(set(h.values())) != 1:
                fail("%s: epoch %d step %d: weights hashes %r, want one hash from each of %s"
                     % (tag, key[0], key[1], h, sorted(wd["ranks"])))
    return sum(len(x) for x in steps)


def exits(tag, procs, f):
    for who, (p, _, _) in procs.items():
        if wait(p, 40, who) != 0:
            fail("%s: %s exited %d:\n%s" % (tag, who, p.returncode, read_log(tag, who)[-3000:]))
    if wait(f, 30, "the feeder") != 0:
        fail("%s: the feeder did not exit 0:\n%s" % (tag, read_log(tag, "feeder")[-2000:]))
    if os.environ.get("SLUICE_ELASTIC_SHOW"):
        for who in ["feeder"] + list(procs):
            print("\n".join(x for x in read_log(tag, who).splitlines() if ": loss " not in x))


def feeder(tag, name):
    job_path, job = bed.write_job("job-" + tag, FILES, epochs=EPOCHS, shuffle=SHUFFLE)
    f = spawn([bed.FEEDER, "--job", job_path, "--listen", sock(name), "--threads", "2", "--heartbeat-ms", "200",
               "--timeout-ms", "5000"], log=bed.log_path(tag, "feeder"))
    wait_for_log(tag, "feeder", "serving job", f, "%s: the feeder did not start" % tag)
    return f, job, sock(name)


def main_case():
    harness.case()
    f, job, ep = feeder(TAG, "feeder")
    ring = ",".join(RING)
    w0 = trainer("w0", ep, job, ["--worker", "0", "--workers", "2", "--ring", ring, "--elastic-max-workers", "3"])
    w1 = trainer("w1", ep, job, ["--worker", "1", "--workers", "2", "--ring", ring])
    wait_step("w0", w0[0], 0, 1, "worker 0 did not train epoch 0")
    # a join in epoch 0 (30 steps of 80 ms): admitted within two steps
    j = trainer("joiner", ep, job, ["--join", sock("joiner")])
    wait_for_log(TAG, "w0", "elastic: a worker (ring endpoint %s) asks to join in epoch 0: admitted" % sock("joiner"),
                 w0[0], "the join was not admitted", 10)
    wait_change(TAG, "w0", w0[0], 1, "the join did not come mid-epoch")
    # in the same epoch: worker 1's leave and a second joiner wait for epoch 1's start
    w1[0].send_signal(signal.SIGTERM)
    wait_for_log(TAG, "w0", "elastic: worker 1 asks to leave in epoch 0: let go at the next change", w0[0],
                 "the leave was not heard in epoch 0", 10)
    t1 = changes(TAG, "w0")[0][1]
    wait_for_log(TAG, "w0", "elastic: the job's shape changed at step %d of epoch 0 already (one change per epoch, "
                 "docs/semantics.md 5.2): the next change waits for epoch 1's start" % t1, w0[0],
                 "the second change was not deferred", 10)
    j2 = trainer("joiner2", ep, job, ["--join", sock("joiner2")])
    wait_for_log(TAG, "w0", "elastic: a worker (ring endpoint %s) asks to join in epoch 0: admitted"
                 % sock("joiner2"), w0[0], "the second join was not admitted in epoch 0", 10)
    wait_for_log(TAG, "w0", "elastic: the change keeps the world's size (3 workers): it waits for epoch 1's start",
                 w0[0], "the leave and the join together were not deferred", 10)
    refused_join("too-many", ep, job, [],
                 "elastic: the joining worker (%s) would make 4 workers, more than --elastic-max-workers 3"
                 % sock("too-many"))
    refused_join("other-config", ep, job, ["--momentum", "0.5"], "has config 'model=softmax")
    refused_join("other-replicas", ep, job, ["--devices", "cpu:2"],
                 "elastic: the joining worker (%s) has 2 replicas, but the job's workers have 1: every worker of an "
                 "elastic job has the same --replicas" % sock("other-replicas"))
    wait_change(TAG, "w0", w0[0], 2, "the deferred change did not come")
    # epoch 1: the first joiner (now worker 1 of 3) leaves mid-epoch
    wait_step("joiner", j[0], 1, 1, "the first joiner did not train epoch 1")
    j[0].send_signal(signal.SIGTERM)
    wait_change(TAG, "w0", w0[0], 3, "the first joiner was not let go")
    # worker 0 cannot leave: it says so and trains on
    w0[0].send_signal(signal.SIGTERM)
    wait_for_log(TAG, "w0", "elastic: worker 0 cannot leave the job: it holds the coordinator endpoint (--elastic %s)"
                 % COORD, w0[0], "worker 0 did not refuse to leave", 10)
    wait_step("w0", w0[0], 2, 1, "worker 0 did not reach epoch 2")
    refused_join("last-epoch", ep, job, [],
                 "elastic: the job is in its last epoch (epoch 2 of 3): no epoch boundary is left to admit the "
                 "joining worker (%s) at" % sock("last-epoch"))
    # the window rule: in the job's last 8 steps (--credits 8 x 1 feeder, 1 replica) a leave waits for the end
    wait_step("w0", w0[0], 2, 21, "worker 0 did not reach step 21 of epoch 2")
    j2[0].send_signal(signal.SIGTERM)
    wait_for_log(TAG, "w0", "so the change waits for the job's end", w0[0],
                 "the leave in the last steps was not deferred", 10)
    if not re.search(r"elastic: the job's last \d steps \(\d pieces a worker\) fit a worker's window of 8 "
                     r"\(--credits x feeders\): the feeders may have sent their end, so the change waits for the "
                     r"job's end", read_log(TAG, "w0")):
        fail("worker 0's deferral to the job's end is not as documented:\n%s" % read_log(TAG, "w0")[-2000:])
    procs = {"w0": w0, "w1": w1, "joiner": j, "joiner2": j2}
    exits(TAG, procs, f)
    ch = changes(TAG, "w0")
    T = bed.ref_plan.epoch_steps(ref_cfg(job, 2, 1))
    t2 = ch[2][1] if len(ch) == 3 else -1
    # the global step: steps trained before the change (epoch 0 has T steps of 2 x 1 then 3 x 1)
    if len(ch) != 3 or not (1 <= t1 < T and 1 <= t2 < T) or \
            ch != [(0, t1, t1, 2, 3), (1, 0, T, 3, 3), (1, t2, T + t2, 3, 2)]:
        fail("worker 0's changes: %r, want [(0, t1, t1, 2, 3), (1, 0, %d, 3, 3), (1, t2, %d + t2, 3, 2)]"
             % (ch, T, T))
    for who, text in (("w1", "elastic: worker 1 let go before step 0 of epoch 1 (global step %d), as asked" % T),
                      ("joiner", "elastic: joined as worker 2 of 3 before step %d of epoch 0 (global step %d)"
                       % (t1, t1)),
                      ("joiner", "elastic: worker 1 let go before step %d of epoch 1 (global step %d), as asked"
                       % (t2, T + t2)),
                      ("joiner2", "elastic: joined as worker 2 of 3 before step 0 of epoch 1 (global step %d)" % T),
                      ("joiner2", "worker 2 is now worker 1 of 2")):
        if text not in read_log(TAG, who):
            fail("%s's log lacks %r:\n%s" % (who, text, read_log(TAG, who)[-2000:]))
    log = read_log(TAG, "feeder")
    for line in ("cluster shape 2 x 1 -> 3 x 1 at step %d of epoch 0" % t1,
                 "cluster shape 3 x 1 -> 2 x 1 at step %d of epoch 1" % t2):
        if log.count(line) != 1:
            fail("the feeder's log lacks %r (once):\n%s" % (line, log[-3000:]))
    if len(re.findall(r"cluster shape \d+ x \d+ -> ", log)) != 2:
        fail("the feeder changed its shape other than twice (the world kept its size at epoch 1's start):\n%s"
             % log[-3000:])
    worlds = [{"at": (0, 0), "W": 2, "kind": None, "ranks": {"w0": 0, "w1": 1}},
              {"at": (0, t1), "W": 3, "kind": (2, 0, t1), "ranks": {"w0": 0, "w1": 1, "joiner": 2}},
              {"at": (1, 0), "W": 3, "kind": (2, 0, t1), "ranks": {"w0": 0, "joiner": 1, "joiner2": 2}},
              {"at": (1, t2), "W": 2, "kind": (3, 1, t2), "ranks": {"w0": 0, "joiner2": 1}}]
    n = check_worlds(TAG, job, worlds, procs)
    ok("elastic: 2 x 1 -> 3 x 1 at step %d of epoch 0 (a join), a leave and a join in the same epoch deferred to "
       "epoch 1's start (3 workers kept, the change kept), 3 x 1 -> 2 x 1 at step %d of epoch 1 (a leave): traces "
       "equal the reference (plain and transition streams), every element once per epoch, the global step carried, "
       "one weights hash per step on every member from the join (%d steps); a leave in the last 8 steps waits for "
       "the job's end (the window rule); refusals named (config, replicas, too many, last epoch, worker 0's leave)"
       % (t1, t2, n))


def solo_case():
    """One worker of 2 replicas starts elastic (no ring, no rendezvous); a
    joiner comes mid-epoch 0 (1 x 2 -> 2 x 2) and asks to leave in the same
    epoch: let go at epoch 1's start (2 x 2 -> 1 x 2, the feeders' epoch
    boundary reshape after a mid-epoch change). A joiner that dies while its
    change waits is forgotten."""
    harness.case()
    tag, coord = "solo", sock("solo-coord")
    f, job, ep = feeder(tag, "solo-feeder")
    kw = dict(step_ms=120, coord=coord, tag=tag, devices="cpu:2")
    w0 = trainer("solo-w0", ep, job, ["--worker", "0", "--workers", "1", "--ring", sock("solo-r0")], **kw)
    wait_step("solo-w0", w0[0], 0, 1, "solo: worker 0 did not train epoch 0", tag=tag)
    b = trainer("solo-b", ep, job, ["--join", sock("solo-b")], **kw)
    wait_change(tag, "solo-w0", w0[0], 1, "solo: the join did not come mid-epoch")
    b[0].send_signal(signal.SIGTERM)
    wait_for_log(tag, "solo-w0", "elastic: worker 1 asks to leave in epoch 0: let go at the next change", w0[0],
                 "solo: the leave was not heard in epoch 0", 10)
    dead = trainer("solo-dead", ep, job, ["--join", sock("solo-dead")], **kw)
    wait_for_log(tag, "solo-dead", "elastic: admitted in epoch 0: joining at the next change", dead[0],
                 "solo: the second joiner was not admitted in epoch 0", 10)
    dead[0].kill()
    wait(dead[0], 10, "solo: the killed joiner")
    wait_for_log(tag, "solo-w0", "elastic: the joining worker (%s) went away before its change: forgotten"
                 % sock("solo-dead"), w0[0], "solo: worker 0 did not forget the dead joiner", 10)
    exits(tag, {"solo-w0": w0, "solo-b": b}, f)
    ch = changes(tag, "solo-w0")
    T = bed.ref_plan.epoch_steps(ref_cfg(job, 1, 2))
    t1 = ch[0][1] if ch else -1
    if ch != [(0, t1, t1, 1, 2), (1, 0, T, 2, 1)] or not 1 <= t1 < T:
        fail("solo: worker 0's changes: %r, want [(0, t1, t1, 1, 2), (1, 0, %d, 2, 1)]" % (ch, T))
    if "elastic: worker 1 let go before step 0 of epoch 1 (global step %d)" % T not in read_log(tag, "solo-b"):
        fail("solo: the joiner's log does not say it was let go:\n%s" % read_log(tag, "solo-b")[-2000:])
    log = read_log(tag, "feeder")
    for line in ("cluster shape 1 x 2 -> 2 x 2 at step %d of epoch 0" % t1, "cluster shape 2 x 2 -> 1 x 2 at epoch 1"):
        if log.count(line) != 1:
            fail("solo: the feeder's log lacks %r (once):\n%s" % (line, log[-3000:]))
    worlds = [{"at": (0, 0), "W": 1, "kind": None, "ranks": {"w0": 0}},
              {"at": (0, t1), "W": 2, "kind": (1, 0, t1), "ranks": {"w0": 0, "joiner": 1}},
              {"at": (1, 0), "W": 1, "kind": None, "ranks": {"w0": 0}}]
    check_worlds(tag, job, worlds, {"w0": w0, "joiner": b}, R=2)
    ok("solo: 1 worker of 2 replicas, 1 x 2 -> 2 x 2 at step %d of epoch 0, the joiner let go at epoch 1's start "
       "(its leave deferred: one change per epoch), a joiner that died while its change waited forgotten: traces "
       "equal the reference, every element once per epoch, one weights hash per step while 2 workers trained" % t1)


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
        (["--elastic", COORD] + MODEL + ["--resume-epoch", "1"], "--elastic does not support --resume-epoch yet"),
        (["--elastic", COORD] + MODEL + ["--join", sock("x"), "--elastic-max-workers", "5"],
         "--elastic-max-workers is worker 0's"),
        (["--elastic", "tcp://192.0.2.1:7777"] + MODEL,
         "--elastic tcp://192.0.2.1:7777 is not a loopback or ipc endpoint, and without --curve-key the "
         "coordinator's messages travel in plaintext: give every worker the job's --curve-key (docs/security.md), "
         "or --insecure to accept that"),
        (["--elastic", COORD] + MODEL + ["--join", "tcp://192.0.2.1:7001"],
         "--join: this worker's ring endpoint tcp://192.0.2.1:7001 can be reached from other hosts, and without "
         "--curve-key the ring carries the weights in plaintext: give it the job's --curve-key (docs/security.md), "
         "or --insecure to listen in plaintext anyway"),
        (["--elastic", COORD] + MODEL + ["--mode", "tower"], "not --mode tower"),
    ]
    for extra, text in cases:
        p = subprocess.run(base + extra, capture_output=True, text=True, timeout=20)
        if p.returncode != 2 or text not in p.stderr:
            fail("sluice-trainer %s: expected exit 2 saying %r, got %d:\n%s" % (" ".join(extra), text, p.returncode,
                                                                               p.stderr[-1000:]))
    ok("usage errors: %d, each naming the option" % len(cases))


if __name__ == "__main__":  # other tests import the helpers above
    try:
        usage_errors()
        main_case()
        solo_case()
    finally:
        bed.finish()
        if not os.environ.get("SLUICE_ELASTIC_KEEP"):
            bed.cleanup()
