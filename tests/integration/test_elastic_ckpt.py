#!/usr/bin/env python3
"""Checkpoints of an elastic ring job (sluice-trainer --elastic with
--checkpoint and --restore; docs/trainer.md "Elastic workers" and
"Checkpoints").

Two workers start elastic with --checkpoint DIR --checkpoint-every 4
--keep 1; a third joins mid-epoch 0 (2 x 1 -> 3 x 1 at step t1). Once every
member of the 3-worker world wrote a checkpoint of epoch 1, the feeder and
all trainers get a SIGKILL. DIR then holds the 2-worker world's last set
(--keep never prunes another world's files) and the 3-worker world's
newest set(s), at most two files a member (the previous complete set is
kept until the next one is). Restored as 3 workers (--elastic --restore
DIR, a fresh feeder): every member continues from the newest complete
step S; the traces continue the reference stream (the transition stream
of the change at t1) from S's position, the killed run's traces up to it
and the restored run's deliver every element once per epoch, and the
weights hash of every step (--metrics) equals, step for step from t1 to
the end, a run without elastic workers that makes the same change: a plain
2-worker ring with a checkpoint every step, restored at step t1 as 3
workers with --reshape (the feeders' mid-epoch change is what the elastic
change makes). So the final weights equal an uninterrupted run's with the
same world changes, and the state at S equals the checkpoint's: asserted
bit for bit, the join step t1 taken from the killed run's log (it depends
on timing; the reference is built for it afterwards). The same checkpoint
restored as 2 workers with --reshape (mid-epoch 1: the transition 3 x 1 at
step s of epoch 1) likewise equals the plain chain restored at S as 2
workers. Hostile: a DIR holding the newest set without one member's file
is refused naming that worker; with an older complete set, the restore
falls back to it, saying which worker's file it lacked; as 2 workers
without --reshape refused; a fresh elastic job into that directory (4
workers: no file of its own size) refused; an empty --restore directory
refused; --join with --restore refused. Then the global
step across a change of size at an epoch's start, where the feeders'
count of the new shape's steps differs from it (offset_case). About 9 s.

Usage: test_elastic_ckpt.py BUILD_DIR
"""
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_reshape as reshape  # noqa: E402  (its own scratch folder first: removed below)
RESHAPE_TMP = reshape.bed.TMP
import test_elastic as el  # noqa: E402
import bed  # noqa: E402
import harness  # noqa: E402
from bed import read_log, wait, wait_for_log  # noqa: E402
from harness import fail, ok, spawn  # noqa: E402

shutil.rmtree(RESHAPE_TMP, ignore_errors=True)
TAG = "eckpt"
EPOCHS = el.EPOCHS
MODEL = el.MODEL
RESTORED = re.compile(r"restoring step (\d+) ")


def plain(who, ep, job, W, w, ring, extra):
    """A worker of a plain (not elastic) ring job: (process, trace, metrics)."""
    trace = os.path.join(bed.TMP, "%s.trace" % who)
    metrics = os.path.join(bed.TMP, "%s.jsonl" % who)
    p = spawn([bed.TRAINER, "--connect", ep, "--job", job["name"], "--devices", "cpu:1", "--trace", trace,
               "--metrics", metrics, "--heartbeat-ms", "200", "--timeout-ms", "5000", "--progress", "off",
               "--credits", "8", "--log-every", "1", "--worker", str(w), "--workers", str(W), "--ring", ring]
              + MODEL + list(extra), log=bed.log_path(TAG, who), stdout=open(os.devnull, "w"))
    return p, trace, metrics


def rings(prefix, W):
    return ",".join(el.sock("%s-ring%d" % (prefix, k)) for k in range(W))


def hashes(metrics):
    """{(epoch, step): weights hash} of one worker's --metrics."""
    return {(x["epoch"], x["step"]): x["weights_hash"] for x in el.lines(metrics)}


def all_exit(procs, f):
    for who, (p, _, _) in procs.items():
        if wait(p, 40, who) != 0:
            fail("%s exited %d:\n%s" % (who, p.returncode, read_log(TAG, who)[-3000:]))
    if wait(f, 30, "the feeder") != 0:
        fail("the feeder did not exit 0:\n%s" % read_log(TAG, f.args[-1])[-2000:])


def feeder(name):
    f, job, ep = el.feeder(TAG, name)
    f.args.append(name)  # for all_exit's message
    return f, job, ep


def position(S, t1, T2, T3):
    """Where the stream stands after global step S of the job (2 x 1 to step
    t1 of epoch 0, then 3 x 1: the transition epoch keeps the old steps'
    numbers): (epoch, step) of the next piece."""
    if S < T2:
        return (0, S)
    return (1 + (S - T2) // T3, (S - T2) % T3)


def same_hashes(what, got, ref, keys):
    for k in keys:
        if got.get(k) is None or got.get(k) != ref.get(k):
            fail("%s: epoch %d step %d: weights hash %s, the reference's %s" % (what, k[0], k[1], got.get(k),
                                                                               ref.get(k)))


def killed_run(d):
    """The elastic job until every member of the 3-worker world wrote a
    checkpoint of epoch 1, then SIGKILL to all. Returns t1, the processes."""
    f, job, ep = feeder("feeder-k")
    coord = el.sock("coord-k")
    ring = rings("k", 2)
    ck = ["--checkpoint", d, "--checkpoint-every", "4", "--keep", "1"]
    w0 = el.trainer("w0", ep, job, ["--worker", "0", "--workers", "2", "--ring", ring] + ck, step_ms=40,
                    coord=coord, tag=TAG)
    w1 = el.trainer("w1", ep, job, ["--worker", "1", "--workers", "2", "--ring", ring] + ck, step_ms=40,
                    coord=coord, tag=TAG)
    el.wait_step("w0", w0[0], 0, 4, "worker 0 did not train epoch 0", tag=TAG)  # a checkpoint of 2 workers first
    j = el.trainer("joiner", ep, job, ["--join", el.sock("k-joiner")] + ck, step_ms=40, coord=coord, tag=TAG)
    ch = el.wait_change(TAG, "w0", w0[0], 1, "the join did not come")
    t1 = ch[0][1]
    T2 = bed.ref_plan.epoch_steps(el.ref_cfg(job, 2, 1))
    if ch[0][:2] != (0, t1) or not 1 <= t1 < T2:
        fail("the join came at %r, want mid-epoch 0" % (ch[0],))
    # every member's file of a step in epoch 1 (after T2 = epoch 0's end)
    procs = {"w0": w0, "w1": w1, "joiner": j}
    end = time.time() + 30
    while not any(s > T2 and all(s in reshape.ckpt_steps(d, k, 3) for k in range(3))
                  for s in reshape.ckpt_steps(d, 0, 3)):
        if time.time() > end or any(p.poll() is not None for p, _, _ in procs.values()):
            fail("the 3 workers did not write a checkpoint of epoch 1:\n%s" % read_log(TAG, "w0")[-2000:])
        time.sleep(0.005)
    for p in [f] + [p for p, _, _ in procs.values()]:
        p.kill()
    for p in [f] + [p for p, _, _ in procs.values()]:
        wait(p, 10, "a killed process")
    return t1, job, procs


def check_keep(d, t1):
    """--keep 1 across the change: the 2-worker world's last set whole, at
    most 2 files of each 3-worker member, a complete 3-worker set."""
    old = [reshape.ckpt_steps(d, k, 2) for k in range(2)]
    both = set(old[0]) & set(old[1])
    if any(not 1 <= len(x) <= 2 for x in old) or not both or max(both) > t1 + 1 or max(both) < 4:
        fail("--keep 1: the 2-worker world's files %r, want 1 or 2 per worker and a complete set at or before the "
             "change (step %d)" % (old, t1))
    new = [reshape.ckpt_steps(d, k, 3) for k in range(3)]
    if any(not 1 <= len(x) <= 2 for x in new) or not set(new[0]) & set(new[1]) & set(new[2]):
        fail("--keep 1: the 3-worker world's files %r, want 1 or 2 per member and a complete set" % (new,))
    return max(set(new[0]) & set(new[1]) & set(new[2]))


def reference(t1, S):
    """The plain chain: 2 x 1 with a checkpoint every step; restored at step
    t1 as 3 x 1 (--reshape), a checkpoint every step; restored at step S as
    2 x 1 (--reshape). Each a fresh feeder. The hashes per step of the 3 x 1
    and the 2 x 1 parts (worker 0's)."""
    d1, d2 = os.path.join(bed.TMP, "ref1"), os.path.join(bed.TMP, "ref2")
    every = ["--checkpoint-every", "1", "--keep", "1000"]
    out = []
    for name, W, extra in (("p1", 2, ["--checkpoint", d1] + every),
                           ("p2", 3, ["--restore", d1, "--restore-step", str(t1), "--reshape", "--checkpoint", d2]
                            + every),
                           ("p3", 2, ["--restore", d2, "--restore-step", str(S), "--reshape"])):
        f, job, ep = feeder("feeder-" + name)
        ring = rings(name, W)
        procs = {"%s-%d" % (name, k): plain("%s-%d" % (name, k), ep, job, W, k, ring, extra) for k in range(W)}
        all_exit(procs, f)
        out.append(hashes(procs["%s-0" % name][2]))
    return out[1], out[2], job


def restored(name, d, W, extra):
    """W elastic workers --restore d --checkpoint d (a fresh feeder) to the
    job's end: the step they restored (one for all), the job, the members."""
    f, job, ep = feeder("feeder-" + name)
    coord = el.sock("coord-" + name)
    ring = rings(name, W)
    procs = {"%s%d" % (name, k): el.trainer("%s%d" % (name, k), ep, job,
                                             ["--worker", str(k), "--workers", str(W), "--ring", ring,
                                              "--restore", d, "--checkpoint", d] + list(extra),
                                             step_ms=0, coord=coord, tag=TAG) for k in range(W)}
    all_exit(procs, f)
    got = set()
    for who in procs:
        m = RESTORED.findall(read_log(TAG, who))
        got |= set(m)
    if len(got) != 1:
        fail("%s: the members restored steps %r, want one" % (name, sorted(got)))
    return int(got.pop()), job, procs


def check_traces(what, job, kept, procs, world, cut):
    """kept: {who: (rank in the 3 x 1 world, rank in the 2 x 1 world before
    step t1 or None, trace, t1)} of the killed run; procs the restored run's
    members (ranks in name order), world (W, kind) their stream (el.stream's
    kind). Each trace equals the reference on its side of `cut`; every epoch
    every element once."""
    W, kind = world
    seen = {e: [] for e in range(EPOCHS)}
    for who, (r, r0, trace, t1) in kept.items():
        want = []
        if r0 is not None:
            want += [x for x in el.stream(job, 2, 1, None, r0) if (x["epoch"], x["step"]) < (0, t1)]
        want += [x for x in el.stream(job, 3, 1, (2, 0, t1), r) if (0, t1) <= (x["epoch"], x["step"]) < cut]
        got = [x for x in el.lines(trace) if (x["epoch"], x["step"]) < cut]
        el.check("%s: the killed %s" % (what, who), got, want)
        for x in got:
            seen[x["epoch"]] += x["ids"]
    for k, (who, (_, trace, _)) in enumerate(sorted(procs.items())):
        want = [x for x in el.stream(job, W, 1, kind, k) if (x["epoch"], x["step"]) >= cut]
        got = el.lines(trace)
        el.check("%s: %s" % (what, who), got, want)
        for x in got:
            seen[x["epoch"]] += x["ids"]
    every = sorted(i for ids in el.IDS for i in ids)
    for e in range(EPOCHS):
        if sorted(seen[e]) != every:
            fail("%s: epoch %d delivered %d elements (%d distinct), want each of %d once"
                 % (what, e, len(seen[e]), len(set(seen[e])), len(every)))


def member_hashes(what, procs):
    """Every member's hash per step, the same on all: worker 0's."""
    hs = [hashes(m) for _, (_, _, m) in sorted(procs.items())]
    for h in hs[1:]:
        if h != hs[0]:
            fail("%s: the members' weights hashes differ" % what)
    return hs[0]


def refused(who, extra, text, workers=3):
    p = el.trainer(who, el.sock("nobody"), {"name": job_name()},
                   ["--worker", "0", "--workers", str(workers), "--ring", rings(who, workers)] + list(extra),
                   coord=el.sock("coord-" + who), tag=TAG)[0]
    rc = wait(p, 20, who)
    log = read_log(TAG, who)
    if rc == 0 or text not in log:
        fail("%s: expected a failure saying %r, got exit %d:\n%s" % (who, text, rc, log[-1500:]))


def main_case():
    harness.case()
    d = os.path.join(bed.TMP, "ckpt")
    t1, job, killed = killed_run(d)
    T2 = bed.ref_plan.epoch_steps(el.ref_cfg(job, 2, 1))
    T3 = bed.ref_plan.epoch_steps(el.ref_cfg(job, 3, 1))
    S = check_keep(d, t1)
    snap, pristine = os.path.join(bed.TMP, "ckpt-snap"), os.path.join(bed.TMP, "ckpt-pristine")
    shutil.copytree(d, snap)
    shutil.copytree(d, pristine)
    # the traces and hashes of the killed run, cut at S's position
    kept = {"w0": (0, 0, killed["w0"][1], t1), "w1": (1, 1, killed["w1"][1], t1),
            "joiner": (2, None, killed["joiner"][1], t1)}
    k_hash, k_join = hashes(killed["w0"][2]), hashes(killed["joiner"][2])
    S3, job3, r3 = restored("r3", d, 3, [])
    if S3 != S:
        fail("restored as 3: step %d, want the newest complete set's %d" % (S3, S))
    cut = position(S, t1, T2, T3)
    check_traces("restored as 3", job3, kept, r3, (3, (2, 0, t1)), cut)
    ref3, ref2, _ = reference(t1, S)
    h3 = member_hashes("restored as 3", r3)
    after = sorted(k for k in ref3 if k >= cut)
    same_hashes("restored as 3", h3, ref3, after)
    same_hashes("the killed run (3 workers)", k_hash, ref3, sorted(k for k in ref3 if (0, t1) <= k < cut))
    same_hashes("the killed run's joiner", k_join, ref3, sorted(k for k in ref3 if (0, t1) <= k < cut))
    if sorted(h3) != after:
        fail("restored as 3: steps %r, want %r" % (sorted(h3)[:3], after[:3]))
    ok("elastic ring: 2 x 1 -> 3 x 1 at step %d of epoch 0 (a join), SIGKILL after step %d's checkpoint (--keep 1: "
       "the old world's set kept); restored as 3 workers from step %d: traces continue the transition stream, "
       "every element once per epoch, weights hash of every step from the join to the end equal to a plain ring's "
       "with the same change (%d steps)" % (t1, S, S, len(after)))
    # the same checkpoint as 2 workers: mid-epoch 1, the transition (3, 1, s)
    harness.case()
    S2, job2, r2 = restored("r2", snap, 2, ["--reshape"])
    if S2 != S or cut[0] != 1 or cut[1] == 0:
        fail("restored as 2: step %d at %r, want %d mid-epoch 1" % (S2, cut, S))
    check_traces("restored as 2", job2, kept, r2, (2, (3, cut[0], cut[1])), cut)
    h2 = member_hashes("restored as 2", r2)
    same_hashes("restored as 2", h2, ref2, sorted(ref2))
    if sorted(h2) != sorted(ref2):
        fail("restored as 2: %d steps, the reference %d" % (len(h2), len(ref2)))
    for who in r2:
        if "continuing at step %d of %d of epoch 1 with 2 x 1" % (cut[1], T3) not in read_log(TAG, who):
            fail("%s's log does not say the reshape:\n%s" % (who, read_log(TAG, who)[-2000:]))
    ok("restored as 2 workers with --reshape at step %d of epoch 1: traces the transition stream (3 x 1 -> 2 x 1), "
       "every element once per epoch, weights hashes equal the plain chain's" % cut[1])
    return pristine, S, t1


def hostile_case(snap, S):
    harness.case()
    # the newest set without worker 1's file, and no older one: refused naming it
    lone = os.path.join(bed.TMP, "lone")
    os.mkdir(lone)
    for k in (0, 2):
        name = "ckpt-%012d.w%dof3" % (S, k)
        shutil.copy(os.path.join(snap, name), os.path.join(lone, name))
    refused("lone", ["--restore", lone],
            "--restore %s: no complete checkpoint of the elastic job: step %d of 3 workers lacks worker 1's file "
            "(ckpt-%012d.w1of3), and no older step has every worker's" % (lone, S, S))
    # an older complete set: the restore falls back to it, naming the missing file
    older = sorted(set.intersection(*[set(reshape.ckpt_steps(snap, k, 3)) for k in range(3)]))
    fallback = os.path.join(bed.TMP, "fallback")
    shutil.copytree(snap, fallback)
    for name in os.listdir(fallback):  # a kill's newer files, then step S + 4 without worker 1's
        if int(name[5:17]) > S:
            os.unlink(os.path.join(fallback, name))
    for k in (0, 2):
        shutil.copy(os.path.join(snap, "ckpt-%012d.w%dof3" % (S, k)),
                    os.path.join(fallback, "ckpt-%012d.w%dof3" % (S + 4, k)))
    p = el.trainer("fallback", el.sock("nobody"), {"name": job_name()},
                   ["--worker", "0", "--workers", "3", "--ring", rings("fallback", 3), "--restore", fallback],
                   coord=el.sock("coord-fallback"), tag=TAG)[0]
    wait_for_log(TAG, "fallback", "--restore %s: step %d of 3 workers lacks worker 1's file (ckpt-%012d.w1of3): "
                 "continuing from step %d of 3 workers, the newest every worker wrote" % (fallback, S + 4, S + 4, S),
                 p, "the restore did not fall back to step %d (sets %r)" % (S, older), 10)
    p.kill()
    wait(p, 10, "fallback")
    refused("two", ["--restore", snap],
            "was taken with 3 workers x 1 replicas at step", workers=2)
    refused("two-hint", ["--restore", snap], "give --reshape to continue from this step", workers=2)
    # a fresh elastic job into a directory of another job's worlds; a restore from an empty one
    refused("fresh", ["--checkpoint", snap],
            "--checkpoint %s already holds %d checkpoint(s) of other worker counts (such as ckpt-" % (snap, len(
                [n for n in os.listdir(snap) if n.startswith("ckpt-")])), workers=4)
    empty = os.path.join(bed.TMP, "empty")
    os.mkdir(empty)
    refused("empty", ["--restore", empty], "--restore %s: no checkpoint" % empty)
    p = subprocess.run([bed.TRAINER, "--connect", el.sock("nobody"), "--job", "j", "--elastic", el.sock("c")] + MODEL
                       + ["--join", el.sock("j"), "--restore", snap], capture_output=True, text=True, timeout=20)
    text = "--join: the joining worker takes the job's state and place from worker 0: drop --restore"
    if p.returncode != 2 or text not in p.stderr:
        fail("--join --restore: expected exit 2 saying %r, got %d:\n%s" % (text, p.returncode, p.stderr[-1000:]))
    ok("hostile: an incomplete newest set refused naming worker 1; with an older complete set the restore falls back "
       "to it, naming the missing file; another worker count without --reshape refused; a fresh job into a directory of other worker counts refused; "
       "an empty --restore directory refused; --join with --restore refused")


def offset_case(pristine, S, t1):
    """The job's global step across a change of size at an epoch's start,
    where the feeders' count of the new shape's steps differs from it.
    Restored as 3 workers from S (epoch 1), a fourth joins mid-epoch 1
    (3 x 1 -> 4 x 1 at step t2) and a fifth asks in the same epoch: admitted
    at epoch 2's start (4 x 1 -> 5 x 1, the feeders' epoch-boundary
    reshape), global step 2 T (T = 30 for 2, 3 and, in the transition
    epoch, 4 workers), while the feeders count 2 T5 = 100 steps of 5
    workers before epoch 2. SIGKILL after the 5 workers' checkpoint of
    epoch 2: its files are named by the global step (an offset of -40
    recorded). Then: restored as 5 (the newest complete set, its offset
    adopted), and the 4-worker world's set of epoch 1's end (--restore-step
    60, kept by --keep 1: no member prunes another size's files) restored
    as 5 with --reshape; both end with the files of global step 2 T + T5
    and every step's weights hash equal to the plain chain's (3 x 1
    restored at T + t2 as 4 x 1, then at epoch 1's end as 5 x 1)."""
    harness.case()
    f, job, ep = feeder("feeder-o")
    T = bed.ref_plan.epoch_steps(el.ref_cfg(job, 3, 1))
    T5 = bed.ref_plan.epoch_steps(el.ref_cfg(job, 5, 1))
    if T != bed.ref_plan.epoch_steps(el.ref_cfg(job, 2, 1)) or T5 == T:
        fail("the job's plans: T %d, T5 %d; the case wants 2 and 3 workers alike and 5 other" % (T, T5))
    d = os.path.join(bed.TMP, "offset")
    shutil.copytree(pristine, d)
    coord = el.sock("coord-o")
    ring = rings("o", 3)
    ck = ["--checkpoint", d, "--checkpoint-every", "4", "--keep", "1"]
    procs = {"o%d" % k: el.trainer("o%d" % k, ep, job, ["--worker", str(k), "--workers", "3", "--ring", ring,
                                                         "--restore", d] + ck, step_ms=30, coord=coord, tag=TAG)
             for k in range(3)}
    o0 = procs["o0"][0]
    el.wait_step("o0", o0, 1, 4, "worker 0 did not train epoch 1", tag=TAG)
    ja = el.trainer("oja", ep, job, ["--join", el.sock("o-ja")] + ck, step_ms=30, coord=coord, tag=TAG)
    t2 = el.wait_change(TAG, "o0", o0, 1, "the join did not come")[0][1]
    jb = el.trainer("ojb", ep, job, ["--join", el.sock("o-jb")] + ck, step_ms=30, coord=coord, tag=TAG)
    ch = el.wait_change(TAG, "o0", o0, 2, "the second join did not come", timeout=20)
    if ch != [(1, t2, T + t2, 3, 4), (2, 0, 2 * T, 4, 5)]:
        fail("the changes %r, want [(1, t2, %d + t2, 3, 4), (2, 0, %d, 4, 5)]" % (ch, T, 2 * T))
    end = time.time() + 30
    while not set.intersection(*[set(x for x in reshape.ckpt_steps(d, k, 5) if x > 2 * T) for k in range(5)]):
        if time.time() > end or o0.poll() is not None:
            fail("the 5 workers did not write a checkpoint of epoch 2:\n%s" % read_log(TAG, "o0")[-2000:])
        time.sleep(0.005)
    for p in [f, ja[0], jb[0]] + [p for p, _, _ in procs.values()]:
        p.kill()
        wait(p, 10, "a killed process")
    last = 2 * T + T5
    four = [reshape.ckpt_steps(d, k, 4) for k in range(4)]
    if any(x[-1:] != [2 * T] for x in four):
        fail("the 4-worker world's files %r, want the set of step %d (epoch 1's end) kept" % (four, 2 * T))
    at_end = os.path.join(bed.TMP, "offset-at-end")
    shutil.copytree(d, at_end)
    # the plain chain
    ref2, ref4, ref5 = (os.path.join(bed.TMP, x) for x in ("ref2", "ref4", "ref5"))
    every = ["--checkpoint-every", "1", "--keep", "1000"]
    want = {}
    for name, W, extra in (("p4", 4, ["--restore", ref2, "--restore-step", str(T + t2), "--reshape",
                                      "--checkpoint", ref4] + every),
                           ("p5", 5, ["--restore", ref4, "--restore-step", str(2 * T), "--reshape"])):
        pf, _, pep = feeder("feeder-" + name)
        pp = {"%s-%d" % (name, k): plain("%s-%d" % (name, k), pep, job, W, k, rings(name, W), extra)
              for k in range(W)}
        all_exit(pp, pf)
        want.update((k, v) for k, v in hashes(pp["%s-0" % name][2]).items() if name == "p5" or k < (2, 0))
    got = {k: v for k, v in hashes(procs["o0"][2]).items() if k >= (1, t2)}
    for name, dd, extra, step in (("q", d, [], None),
                                  ("e", at_end, ["--restore-step", str(2 * T), "--reshape"], 2 * T)):
        S2, _, rp = restored(name, dd, 5, extra)
        if (step is not None and S2 != step) or (step is None and not 2 * T < S2 < last):
            fail("%s: restored step %d" % (name, S2))
        h = member_hashes(name, rp)
        cut = (2, S2 - 2 * T)
        mine = {k: v for k, v in got.items() if k < cut} if step is None else {}
        mine.update(h)
        keys = sorted(k for k in want if k >= ((1, t2) if step is None else (2, 0)))
        same_hashes("%s (restored at %d)" % (name, S2), mine, want, keys)
        if sorted(mine) != keys:
            fail("%s: %d steps hashed, the reference %d" % (name, len(mine), len(keys)))
        names = [reshape.ckpt_steps(dd, k, 5) for k in range(5)]
        if any(x[-1:] != [last] for x in names):
            fail("%s: the files of 5 workers %r, want the job's end at global step %d" % (name, names, last))
    ok("the global step across 4 x 1 -> 5 x 1 at epoch 2's start (after 3 x 1 -> 4 x 1 at step %d of epoch 1; the "
       "feeders count %d steps of 5 workers before epoch 2, the job %d): checkpoints named by it, restored as 5 from "
       "epoch 2 and from the 4 workers' set of epoch 1's end (--restore-step %d --reshape); weights hashes equal "
       "the plain chain's, the last files of step %d" % (t2, 2 * T5, 2 * T, 2 * T, last))


def job_name():
    return "job-" + TAG


try:
    pristine, S, t1 = main_case()
    hostile_case(pristine, S)
    offset_case(pristine, S, t1)
finally:
    bed.finish()
    if not os.environ.get("SLUICE_ELASTIC_KEEP"):
        bed.cleanup()
