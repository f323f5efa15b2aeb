#!/usr/bin/env python3
"""Checkpoints of an elastic parameter-server job (sluice-trainer --mode ps
--elastic, the server's --checkpoint and --restore; docs/trainer.md
"Elastic ps workers").

One feeder (3 epochs), one parameter server with --checkpoint DIR
--checkpoint-every 1 and two ps workers; a third joins in epoch 0 and
trains from epoch 1 (the server's WORLD 2 -> 3, which it checkpoints at
once). Mid-epoch 1 the feeder, the server and every worker get a SIGKILL.
A second case kills the server and the workers (the feeder lives on) as
soon as the server took the WORLD: then no worker has pushed in epoch 1
yet. The checkpoint holds the world: 3 workers, change 1 from epoch 1,
each worker's position of epoch 1 (none for one that had not pushed in
it).

Hostile first: the server restored with --workers 2 is refused, naming the
checkpoint's 3 and the 2 asked for; a worker started as 1 of 2 against
the restored server is refused, naming the world of 3 (first case). Then
the job restarts: a fresh feeder (first case) or the one still running,
the server with --workers 3 --restore DIR, three workers started as
--worker k --workers 3 --elastic (no --join): each asks the server where
it stands (RESUME) and continues there, or at epoch 1's first piece when
it had no push of epoch 1 recorded. What is deterministic is asserted
(ps workers push asynchronously, so the final values depend on the order
of the pushes and are not compared with a reference run):
- each worker's restarted trace is exactly the reference plan of the
  3-worker shape for its rank from its recorded position to the job's end
  (its steps, the global numbering, included), and the killed run's trace
  of epoch 1 begins with the plan up to that position: the two together
  deliver every element exactly once in epochs 1 and 2;
- the server's version restored plus the pushes it applied after the
  restart equal the job's steps over the 3 epochs (every step's gradient
  applied exactly once: none lost, none twice), its summary says ok, 1
  world change, 3 workers at the end, nobody lost or failed;
- the three workers end with the same final weights hash (one final pull).
The restored values bit for bit are the unit tests' (tests/unit/
test_train_ps_world.c: a restored server's pull returns the checkpoint's
values). About 8 s.

Usage: test_ps_elastic_ckpt.py BUILD_DIR
"""
import os
import re
import signal
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_ps_elastic as pse  # noqa: E402  (its setup: the scratch folder, the data, the job)
import bed  # noqa: E402
import harness  # noqa: E402
from bed import read_log, wait, wait_for_log  # noqa: E402
from harness import fail, ok, spawn  # noqa: E402

TAG = pse.TAG
RESUMED = re.compile(r"worker (\d) restarted: resuming at epoch (\d+) step (\d+) \(input position (\d+)")
AT_EPOCH = re.compile(r"worker (\d) restarted: starting at epoch (\d+), where the parameter servers' world of 3 "
                      r"workers begins \(change 1;")


def server(name, workers, ckpt, extra):
    out = os.path.join(bed.TMP, name + ".out")
    p = spawn([bed.TRAINER, "--ps", pse.PS, "--ps-task", "0", "--workers", str(workers), "--elastic", pse.COORD,
               "--ps-worker-timeout", "20", "--checkpoint", ckpt] + pse.MODEL + list(extra),
              log=bed.log_path(TAG, name), stdout=open(out, "w"))
    return p, out


def killed_run(c, job, ep, ckpt, at_boundary):
    """2 workers, a joiner from epoch 1, all killed mid-epoch 1 (or as soon
    as the server took the WORLD): the server and the workers."""
    ps, _ = server(c + "ps0", 2, ckpt, ["--checkpoint-every", "1"])
    wait_for_log(TAG, c + "ps0", "serving", ps, "the parameter server did not start")
    w0 = pse.trainer(c + "w0", ep, job, ["--worker", "0", "--workers", "2", "--elastic-max-workers", "3"], step_ms=60)
    w1 = pse.trainer(c + "w1", ep, job, ["--worker", "1", "--workers", "2"], step_ms=60)
    wait_for_log(TAG, c + "w0", "epoch 0 step 1: loss", w0[0], "worker 0 did not train epoch 0")
    j = pse.trainer(c + "joiner", ep, job, ["--join", "joiner"], step_ms=60)
    if at_boundary:
        wait_for_log(TAG, c + "ps0", "parameter server 0: the workers change (change 1): 2 -> 3 from epoch 1", ps,
                     "the server did not take the WORLD", 20)
    else:
        wait_for_log(TAG, c + "joiner", "elastic: joined as worker 2 of 3 from epoch 1", j[0],
                     "the joiner did not come in", 20)
        wait_for_log(TAG, c + "w0", "epoch 1 step 4: loss", w0[0], "worker 0 did not train epoch 1", 10)
    return ps, [w0, w1, j]


def main_case(c, at_boundary):
    harness.case()
    ckpt = os.path.join(bed.TMP, c + "ck")
    f, job, ep = pse.feeder()
    ps, procs = killed_run(c, job, ep, ckpt, at_boundary)
    # mid-epoch everything dies; at the WORLD the feeder lives on (it has
    # served the 3-worker shape's first pieces: the restarted workers come
    # back to it)
    dead = ([] if at_boundary else [f]) + [ps] + [x[0] for x in procs]
    for p in dead:
        p.send_signal(signal.SIGKILL)
    for p in dead:
        p.wait(10)
    first = {r: pse.lines(procs[r][1]) for r in range(3)}
    if "parameter server 0: checkpoint: " not in read_log(TAG, c + "ps0"):
        fail("the server wrote no checkpoint:\n%s" % read_log(TAG, c + "ps0")[-2000:])

    # hostile: the 3-worker world's checkpoint restored for 2 workers
    bad, _ = server(c + "ps-two", 2, ckpt, ["--restore", ckpt])
    if wait(bad, 20, "the server restored for 2 workers") == 0:
        fail("a server restored for 2 workers from a 3-worker checkpoint ran")
    text = "for 3 workers, not server 0 of 1 for 2 (--elastic: the job goes on in the world its checkpoint was taken " \
           "in: start the servers and the workers with that --workers"
    if text not in read_log(TAG, c + "ps-two"):
        fail("the refusal does not say %r:\n%s" % (text, read_log(TAG, c + "ps-two")[-2000:]))

    # the restart: 3 workers, the server restored
    f2, job2, ep2 = (f, job, ep) if at_boundary else pse.feeder()
    ps2, ps2_out = server(c + "ps0-again", 3, ckpt, ["--restore", ckpt])
    wait_for_log(TAG, c + "ps0-again", "serving", ps2, "the restored parameter server did not start")
    log = read_log(TAG, c + "ps0-again")
    if "workers' positions; the world of change 1 from epoch 1) from " not in log:
        fail("the server does not say it restored the world of change 1 from epoch 1:\n%s" % log[-2000:])
    if c == "mid-":  # hostile: a worker started with the count before the change
        p, _, _ = pse.trainer(c + "two", ep2, job2, ["--worker", "1", "--workers", "2"])
        text = "worker 1: the parameter servers serve a world of 3 workers (change 1 from epoch 1), not --workers 2: " \
               "start every worker with --workers 3 (a former joiner with the rank it had)"
        if wait(p, 20, "the worker started as 1 of 2") == 0 or text not in read_log(TAG, c + "two"):
            fail("a worker of 2 was not refused with %r:\n%s" % (text, read_log(TAG, c + "two")[-2000:]))
    again = {}
    for r in range(3):
        extra = ["--worker", str(r), "--workers", "3"] + (["--elastic-max-workers", "3"] if r == 0 else [])
        again[r] = pse.trainer(c + "again%d" % r, ep2, job2, extra, step_ms=10)
    for r, (p, _, _) in again.items():
        if wait(p, 40, "restarted worker %d" % r) != 0:
            fail("restarted worker %d exited %d:\n%s" % (r, p.returncode, read_log(TAG, c + "again%d" % r)[-3000:]))
    if wait(ps2, 30, "the restored parameter server") != 0:
        fail("the restored server exited %d:\n%s" % (ps2.returncode, read_log(TAG, c + "ps0-again")[-3000:]))
    if wait(f2, 30, "the feeder") != 0:
        fail("the feeder did not exit 0:\n%s" % read_log(TAG, "feeder")[-2000:])

    # each worker: the plan of the 3-worker shape from where the server recorded it
    seen = {1: [], 2: []}
    how = []
    for r in range(3):
        want = pse.plan(job, 3, r, 1) + pse.plan(job, 3, r, 2)
        wlog = read_log(TAG, c + "again%d" % r)
        m, e = RESUMED.search(wlog), AT_EPOCH.search(wlog)
        if m is not None and int(m.group(1)) == r and int(m.group(2)) == 1:
            k = next((i for i, x in enumerate(want) if x["seq"] + 1 == int(m.group(4))), None)
            if k is None:
                fail("worker %d resumed at input position %s, not a step of its epoch-1 plan" % (r, m.group(4)))
            k += 1
            how.append("%d at step %d" % (r, k))
        elif e is not None and int(e.group(1)) == r and int(e.group(2)) == 1:
            k = 0
            how.append("%d at epoch 1's start" % r)
        else:
            fail("restarted worker %d does not say where it resumed:\n%s" % (r, wlog[-2000:]))
        got = pse.lines(again[r][1])
        pse.check("restarted worker %d" % r, got, want[k:])
        before = [x for x in first[r] if x["epoch"] == 1]
        pse.check("killed worker %d (epoch 1 up to its recorded position)" % r, before[:k], want[:k])
        if len(before) < k:
            fail("killed worker %d traced %d pieces of epoch 1, fewer than the %d the server recorded"
                 % (r, len(before), k))
        for x in want[:k] + got:
            seen[x["epoch"]] += x["ids"]
    every = sorted(i for ids in pse.IDS for i in ids)
    for e in (1, 2):
        if sorted(seen[e]) != every:
            fail("epoch %d delivered %d elements (%d distinct), want each of %d once"
                 % (e, len(seen[e]), len(set(seen[e])), len(every)))
    steps = len(pse.plan(job, 2, 0, 0)) + len(pse.plan(job, 2, 1, 0)) + \
        sum(len(pse.plan(job, 3, r, e)) for r in range(3) for e in (1, 2))
    s = pse.summary(ps2_out)
    if s is None or not s["ok"] or s["restored_version"] + s["pushes"] != steps or s["world_changes"] != 1 \
            or s["final_workers"] != 3 or s["lost_workers"] != 0 or s["failed_workers"] != 0 \
            or s["pushes_not_reapplied"] != 0:
        fail("the restored server's summary: %r (want ok, restored version + pushes = %d steps, 1 change, 3 "
             "workers)" % (s, steps))
    h = [pse.summary(again[r][2]) for r in range(3)]
    if None in h or len(set(x["weights_hash"] for x in h)) != 1:
        fail("the final weights differ: %r" % h)
    ok("elastic ps job (2 workers + a joiner from epoch 1) killed %s, restored as 3 workers (%s): traces "
       "continue the 3-worker plan from the recorded positions, every element once in epochs 1 and 2, version %d "
       "restored + %d pushes = %d steps, one final weights hash; a restore for 2 workers refused%s"
       % ("as the WORLD was taken" if at_boundary else "mid-epoch 1", ", ".join(how), s["restored_version"], s["pushes"], steps,
          ", a worker of 2 refused" if c == "mid-" else ""))


if __name__ == "__main__":
    try:
        main_case("mid-", False)
        main_case("edge-", True)
    finally:
        bed.finish()
