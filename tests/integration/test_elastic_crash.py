#!/usr/bin/env python3
"""An elastic ring job survives a member's crash (sluice-trainer --elastic;
docs/trainer.md "Elastic workers", "A member that dies").

One feeder per case serves test_elastic.py's 3-epoch job (its helpers and
data, by import). Three ring workers start elastic with --timeout-ms 500,
so a broken ring is seen within half a second.

- kill-2: worker 2 gets a SIGKILL mid-epoch 0. Workers 0 and 1 see their
  all-reduce fail, report to worker 0, and go on as 2 workers from the
  step after worker 0's last trained step (the feeders' mid-epoch change
  from 3 x 1) to the job's end; both exit 0, and so does the feeder.
- kill-1: worker 1 gets a SIGKILL in epoch 0's last steps: workers 0 and 2
  go on as 2 workers (worker 2 renumbered 1), from wherever worker 0
  stopped (mid-epoch, or at epoch 1's start by epoch).
- kill-0: worker 0, the coordinator, gets a SIGKILL: workers 1 and 2 exit 1
  naming it.
- twice: 2 workers, a third joins mid-epoch 0 and is killed in the same
  epoch: the feeders take one change per epoch, so worker 0 and worker 1
  exit 1 naming that.

Exactly once, as docs/trainer.md defines it: with (e, t) the change's step
(worker 0's log: "elastic: before step t of epoch e (global step g): 3
workers -> 2"), every member of the old world trained the pieces of the
old shape's steps before (e, t), the dead one included (worker 0 trained
step t-1, whose all-reduce holds every member's gradient), and the new
world the new shape's from (e, t). So each survivor's trace is its old
stream (the reference plan of 3 x 1) up to some step at or past (e, t)
(pieces received and not trained), then exactly its new stream (the
reference's transition from 3 x 1 at (e, t), or the plain 2 x 1 plan from
epoch e when t = 0); the dead member's trace is a prefix of its old stream
holding every step before (e, t); the pieces before (e, t) of the three
and the survivors' new pieces hold every element once per epoch; the
global step g is the steps before (e, t); and from (e, t) on, both
survivors report one weights hash per step.

Usage: test_elastic_crash.py BUILD_DIR (about 17 s)
"""
import importlib
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bed  # noqa: E402
import harness  # noqa: E402
from bed import read_log, wait  # noqa: E402
from harness import fail, ok  # noqa: E402

E = importlib.import_module("test_elastic")  # its cases run only as a script; its bed.setup gives bed.TMP
FAST = ["--timeout-ms", "500"]  # after the helper's --timeout-ms 5000: the last one counts
STEP_MS = 20


def start(tag):
    """A feeder and 3 elastic ring workers: (feeder, job, {name: (proc, trace, metrics)})."""
    f, job, ep = E.feeder(tag, tag + "-feeder")
    coord = E.sock(tag + "-coord")
    ring = ",".join(E.sock("%s-r%d" % (tag, k)) for k in range(3))
    procs = {}
    for k in range(3):
        args = ["--worker", str(k), "--workers", "3", "--ring", ring] + FAST
        procs["w%d" % k] = E.trainer(name(tag, "w%d" % k), ep, job, args, step_ms=STEP_MS, coord=coord, tag=tag)
    return f, job, procs


def name(tag, w):
    """A worker's process name (its log, trace and metrics files)."""
    return "%s-%s" % (tag, w)


def key(x):
    return (x["epoch"], x["step"])


def check_crash(tag, job, procs, dead, change):
    """The traces, the elements and the weights hashes after `dead` died,
    `change` the survivors' change (epoch, step, global step, 3, 2)."""
    e, t, g = change[0], change[1], change[2]
    at = (e, t)
    T = bed.ref_plan.epoch_steps(E.ref_cfg(job, 3, 1))
    if g != e * T + t or change[3:] != (3, 2):
        fail("%s: the change %r: want 3 -> 2 workers at global step %d (epoch %d step %d, %d steps an epoch)"
             % (tag, change, e * T + t, e, t, T))
    survivors = [w for w in ("w0", "w1", "w2") if w != dead]
    seen = {x: [] for x in range(E.EPOCHS)}
    for who in ("w0", "w1", "w2"):
        r = int(who[1])
        old = E.stream(job, 3, 1, None, r)
        before = [x for x in old if key(x) < at]
        got = E.lines(procs[who][1])
        if who == dead:
            if got != old[:len(got)] or got[:len(before)] != before:
                fail("%s: the dead %s's trace (%d pieces) is not its stream with every step before %r (%d pieces)"
                     % (tag, who, len(got), at, len(before)))
        else:
            r2 = survivors.index(who)
            kind = (3, e, t) if t > 0 else None
            new = [x for x in E.stream(job, 2, 1, kind, r2) if key(x) >= at]
            head = got[:len(got) - len(new)]
            E.check("%s: %s after the change (rank %d of 2)" % (tag, who, r2), got[len(head):], new)
            if head != old[:len(head)] or head[:len(before)] != before:
                fail("%s: %s's trace before the change (%d pieces) is not its stream with every step before %r"
                     % (tag, who, len(head), at))
            if any(key(x) < at for x in head[len(before):]):
                fail("%s: %s's trace holds old pieces before %r after its untrained ones" % (tag, who, at))
            for x in new:
                seen[x["epoch"]] += x["ids"]
        for x in before:
            seen[x["epoch"]] += x["ids"]
    every = sorted(i for ids in E.IDS for i in ids)
    for ep in range(E.EPOCHS):
        if sorted(seen[ep]) != every:
            fail("%s: epoch %d trained %d elements (%d distinct), want each of %d once"
                 % (tag, ep, len(seen[ep]), len(set(seen[ep])), len(every)))
    hashes = {}
    for who in survivors:
        for x in E.lines(procs[who][2]):
            hashes.setdefault(key(x), {})[who] = x["weights_hash"]  # a step trained again: the later line
    steps = sorted(k for k in hashes if k >= at)
    T2 = bed.ref_plan.epoch_steps(E.ref_cfg(job, 2, 1))
    want = (T - t) + (E.EPOCHS - e - 1) * T2 if t > 0 else (E.EPOCHS - e) * T2
    if len(steps) != want:
        fail("%s: %d steps with weights hashes from %r, want %d" % (tag, len(steps), at, want))
    for k in steps:
        h = hashes[k]
        if set(h) != set(survivors) or len(set(h.values())) != 1:
            fail("%s: epoch %d step %d: weights hashes %r, want one hash from each of %s" % (tag, k[0], k[1], h,
                                                                                           survivors))
    return len(steps)


def survive(tag, dead, when):
    """Kill `dead` once `when` (a wait) returns; the others go on as 2."""
    harness.case()
    f, job, procs = start(tag)
    when(procs)
    procs[dead][0].kill()
    wait(procs[dead][0], 10, "%s: the killed %s" % (tag, dead))
    live = {name(tag, w): procs[w] for w in procs if w != dead}
    E.exits(tag, live, f)
    w0 = name(tag, "w0")
    ch = E.changes(tag, w0)
    if len(ch) != 1:
        fail("%s: worker 0's changes %r, want one:\n%s" % (tag, ch, read_log(tag, w0)[-3000:]))
    gone = int(dead[1])
    text = "elastic: worker %d did not report the broken ring within 2.0 s: counted dead" % gone
    if text not in read_log(tag, w0):
        fail("%s: worker 0's log lacks %r:\n%s" % (tag, text, read_log(tag, w0)[-3000:]))
    e, t = ch[0][0], ch[0][1]
    for w in procs:
        if w not in ("w0", dead) and "elastic: before step %d of epoch %d (global step %d): 3 workers -> 2; worker " \
                "%s is now worker 1 of 2" % (t, e, ch[0][2], w[1]) not in read_log(tag, name(tag, w)):
            fail("%s: %s's log does not report the change:\n%s" % (tag, w, read_log(tag, name(tag, w))[-3000:]))
    log = read_log(tag, "feeder")
    line = "cluster shape 3 x 1 -> 2 x 1 at " + ("step %d of epoch %d" % (t, e) if t > 0 else "epoch %d" % e)
    if log.count(line) != 1:
        fail("%s: the feeder's log lacks %r (once):\n%s" % (tag, line, log[-3000:]))
    n = check_crash(tag, job, procs, dead, ch[0])
    return e, t, n


def kill_0():
    """Worker 0 dies: the others exit 1 naming it."""
    harness.case()
    tag = "kill-0"
    f, job, procs = start(tag)
    E.wait_step(name(tag, "w0"), procs["w0"][0], 0, 5, "%s: worker 0 did not train epoch 0" % tag, tag=tag)
    procs["w0"][0].kill()
    wait(procs["w0"][0], 10, "%s: the killed worker 0" % tag)
    pat = re.compile(r"elastic: the ring broke in step \d+ of epoch 0 and worker 0 \(%s\) did not answer the report "
                     r"within 2\.\d s: worker 0, the coordinator, is gone, so the job cannot go on"
                     % re.escape(E.sock(tag + "-coord")))
    for who in ("w1", "w2"):
        rc = wait(procs[who][0], 15, "%s: %s" % (tag, who))
        log = read_log(tag, name(tag, who))
        if rc != 1 or not pat.search(log):
            fail("%s: %s exited %d, want 1 naming worker 0:\n%s" % (tag, who, rc, log[-2000:]))
    f.kill()
    wait(f, 10, "%s: the feeder" % tag)
    ok("kill-0: worker 0 (the coordinator) killed: workers 1 and 2 exit 1 saying it is gone")


def second_change():
    """A member dies in an epoch that had a mid-epoch change already (a
    join): the feeders take one change per epoch, so the job cannot go on;
    worker 0 and the survivor exit 1 naming why."""
    harness.case()
    tag = "twice"
    f, job, ep = E.feeder(tag, tag + "-feeder")
    coord = E.sock(tag + "-coord")
    ring = ",".join(E.sock("%s-r%d" % (tag, k)) for k in range(2))
    kw = dict(step_ms=STEP_MS, coord=coord, tag=tag)
    w0n, w1n, jn = name(tag, "w0"), name(tag, "w1"), name(tag, "j")
    w0 = E.trainer(w0n, ep, job, ["--worker", "0", "--workers", "2", "--ring", ring] + FAST, **kw)
    w1 = E.trainer(w1n, ep, job, ["--worker", "1", "--workers", "2", "--ring", ring] + FAST, **kw)
    E.wait_step(w0n, w0[0], 0, 1, "%s: worker 0 did not train epoch 0" % tag, tag=tag)
    j = E.trainer(jn, ep, job, ["--join", E.sock(jn)] + FAST, **kw)
    t1 = E.wait_change(tag, w0n, w0[0], 1, "%s: the join did not come mid-epoch" % tag)[0][1]
    E.wait_step(jn, j[0], 0, t1 + 1, "%s: the joiner did not train" % tag, tag=tag)
    j[0].kill()
    wait(j[0], 10, "%s: the killed joiner" % tag)
    pat = r"elastic: a member died in step (\d+) of epoch 0, but the job's shape changed at step %d of that epoch " \
          r"already, and the feeders take one change per epoch \(docs/semantics\.md 5\.2\): the job cannot go on; " \
          r"restart it from its checkpoints" % t1
    for who, p, tail in ((w0n, w0[0], ""), (w1n, w1[0], r" \(reported by worker 0, %s\)" % re.escape(coord))):
        rc = wait(p, 15, "%s: %s" % (tag, who))
        m = re.search(pat + tail, read_log(tag, who))
        if rc != 1 or m is None or int(m.group(1)) <= t1:
            fail("%s: %s exited %d, want 1 naming the second change:\n%s" % (tag, who, rc,
                                                                            read_log(tag, who)[-2000:]))
    f.kill()
    wait(f, 10, "%s: the feeder" % tag)
    ok("twice: a member killed after a mid-epoch join in the same epoch (step %d): worker 0 and the survivor exit 1 "
       "naming the feeders' one change per epoch" % t1)


def mid_epoch(procs):
    E.wait_step(name("kill-2", "w2"), procs["w2"][0], 0, 8, "kill-2: worker 2 did not train step 8", tag="kill-2")


def epoch_end(procs):
    T = 30  # 240 elements, a global batch of 8
    E.wait_step(name("kill-1", "w1"), procs["w1"][0], 0, T - 3, "kill-1: worker 1 did not reach epoch 0's end",
                tag="kill-1")


if __name__ == "__main__":
    try:
        e, t, n = survive("kill-2", "w2", mid_epoch)
        if e != 0 or t == 0:
            fail("kill-2: the change came at step %d of epoch %d, want mid-epoch 0" % (t, e))
        ok("kill-2: worker 2 of 3 killed mid-epoch 0: workers 0 and 1 go on as 2 from step %d (the feeders' "
           "transition), every element trained once per epoch (the dead one's pieces before the change counted), "
           "one weights hash per step on both survivors (%d steps)" % (t, n))
        e, t, n = survive("kill-1", "w1", epoch_end)
        ok("kill-1: worker 1 of 3 killed in epoch 0's last steps: workers 0 and 2 go on as 2 from step %d of epoch "
           "%d, every element once per epoch, one weights hash per step (%d steps)" % (t, e, n))
        kill_0()
        second_change()
    finally:
        bed.finish()
        if not os.environ.get("SLUICE_ELASTIC_KEEP"):
            bed.cleanup()
