#!/usr/bin/env python3
"""The trainers' worker count changed at an epoch boundary (issue #30 part 2,
docs/semantics.md 5.2): one feeder keeps running (its pid checked) while the
trainers of one cluster shape stop after an epoch's checkpoint (SIGKILL) and
trainers of another shape continue from the next epoch, restored from that
checkpoint (--restore --reshape) or told the epoch (--resume-epoch E
--reshape). Each worker's trace must equal the reference model's: the old
shape's for the epochs it finished, the new shape's from the next epoch on,
and every element is delivered exactly once per epoch across the workers.
Then the refusals, each with its reason: a reshape while a trainer of the old
shape is connected and heard from, mid-epoch, by a feeder whose shape is
fixed, resume by epoch with a resume_seq, an epoch past the job's end (raw
HELLOs over python3-zmq, skipped without it), and the trainer's own: a
checkpoint of another shape without --reshape.

Mid-epoch (the transition, docs/semantics.md 5.2): 2 x 1 trainers stop
(SIGKILL) after their checkpoint at step 7 of epoch 1; 3 x 1 trainers
restore it with --reshape and take the rest of epoch 1 as transition pieces
(the old plans' step s cut 3 ways); they stop after a checkpoint inside that
epoch, which 3 x 1 trainers restore with the same shape (the transition
and its seq carried); those stop after epoch 1's end, whose checkpoint
2 x 2 trainers restore with --reshape (an epoch boundary in transition
numbering). Every trace equals the reference model (ref_plan's
transition_pieces), every element of every epoch once across the workers.
The refusals: mid-epoch without --reshape, a second change within the
transition epoch (the trainer's), a trainer of the shape whose HELLO lacks
the transition (the feeder's), --mode tower's checkpoint with another shape.
Two changes in different epochs (2 x 1 -> 3 x 1 in epoch 1, 3 x 1 -> 2 x 2
in epoch 2). The feeder killed inside the transition epoch and started
again (the trainers' re-HELLOs carry the transition); with a model
(mirrored, the ring), 2 x 1 -> 3 x 1 mid-epoch. sluice.torch: 3 x 1
datasets' states mid-epoch loaded by 2 x 2 datasets (load_state_dict makes
the change), a second change refused.

Usage: test_reshape.py BUILD_DIR [OTHER_BUILD]  (OTHER_BUILD: another build
whose feeder and trainer run instead, e.g. one that predates the change)
"""
import json
import os
import re
import struct
import sys
import time

try:
    import zmq
except ImportError:
    # Debian's python3-zmq belongs to /usr/bin/python3; a python3 found
    # first on PATH (pyenv, a virtual environment) may lack it
    system = "/usr/bin/python3"
    if os.path.exists(system) and os.path.realpath(sys.executable) != os.path.realpath(system) and \
            not os.environ.get("SLUICE_RESHAPE_REEXEC"):
        os.environ["SLUICE_RESHAPE_REEXEC"] = "1"
        os.execv(system, [system] + sys.argv)
    zmq = None

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bed  # noqa: E402
import harness  # noqa: E402
import wire  # noqa: E402
from bed import read_log, wait, wait_for_log  # noqa: E402
from harness import fail, ok, spawn  # noqa: E402

bed.setup(sys.argv[1], "reshape")
if len(sys.argv) > 2:
    bed.use_binaries(sys.argv[2])
EPOCHS = 3
FILES = bed.gen("data", 240, 6)
IDS = None
SHUFFLE = {"buffer": 40, "seed": 11}


def ids_of_files():
    """The id of each record (file, record) -> id: sluice-record gen numbers them in file order."""
    import subprocess
    out = []
    for f in FILES:
        p = subprocess.run([bed.RECORD, "cat", "--decode", "example", f], check=True, capture_output=True, text=True)
        out.append([int(json.loads(x)["example"]["features"]["feature"]["id"]["int64List"]["value"][0])
                    for x in p.stdout.splitlines()])
    return out


def feeder(tag, job_path, extra=()):
    sock = os.path.join(bed.TMP, tag + ".sock")
    f = spawn([bed.FEEDER, "--job", job_path, "--listen", "ipc://" + sock, "--threads", "2", "--heartbeat-ms", "200",
               "--timeout-ms", "5000"] + list(extra), log=bed.log_path(tag, "feeder"))
    wait_for_log(tag, "feeder", "serving job", f, "%s: the feeder did not start" % tag)
    return f, "ipc://" + sock


def trainers(tag, ep, job, W, R, extra, who="trainer", only=None):
    out = []
    for w in range(W) if only is None else [only]:
        trace = os.path.join(bed.TMP, "%s-%s%d.trace" % (tag, who, w))
        p = spawn([bed.TRAINER, "--connect", ep, "--job", job["name"], "--worker", str(w), "--workers", str(W),
                   "--devices", "cpu:%d" % R, "--model", "none", "--trace", trace, "--heartbeat-ms", "200",
                   "--timeout-ms", "5000", "--progress", "off"] + list(extra),
                  log=bed.log_path(tag, "%s%d" % (who, w)), stdout=open(os.devnull, "w"))
        out.append((p, trace))
    return out


def trace_lines(path):
    """The complete piece lines of a trace (a killed run's last may be cut)."""
    out = []
    with open(path) as f:
        for line in f:
            if not line.endswith("\n"):
                break
            x = json.loads(line)
            if "summary" not in x:
                out.append(x)
    return out


def want(ref, w, epochs):
    return [{"worker": x["worker"], "replica": x["replica"], "epoch": x["epoch"], "step": x["step"], "seq": x["seq"],
             "size": len(x["elems"]), "ids": [IDS[fi][r] for fi, r in x["elems"]]}
            for x in ref.get(w, []) if x["epoch"] in epochs]


def check(tag, what, got, expect):
    if got != expect:
        for i, (g, e) in enumerate(zip(got, expect)):
            if g != e:
                fail("%s: %s: piece %d differs:\n  got  %s\n  want %s" % (tag, what, i, g, e))
        fail("%s: %s: %d pieces, want %d" % (tag, what, len(got), len(expect)))


def ckpt_steps(d, w, W):
    pat = re.compile(r"^ckpt-(\d+)\.w%dof%d$" % (w, W))
    return sorted(int(m.group(1)) for m in (pat.match(n) for n in (os.listdir(d) if os.path.isdir(d) else [])) if m)


def first_epoch_then_kill(tag, ep, job, W, R, d):
    """W x R trainers (slowed) until every worker wrote epoch 0's checkpoint, then SIGKILL: their traces."""
    ts = trainers(tag, ep, job, W, R, ["--checkpoint", d, "--checkpoint-every", "1000000", "--step-ms", "40"],
                  who="old")
    deadline = time.time() + 60
    while not all(ckpt_steps(d, w, W) for w in range(W)):
        if time.time() > deadline or any(p.poll() is not None for p, _ in ts):
            fail("%s: the %d x %d trainers did not write epoch 0's checkpoint" % (tag, W, R))
        time.sleep(0.005)
    for p, _ in ts:
        p.kill()
    for p, _ in ts:
        wait(p, 10, "%s: a killed trainer" % tag)
    steps = [ckpt_steps(d, w, W) for w in range(W)]
    if any(s != steps[0] or len(s) != 1 for s in steps):
        fail("%s: expected one checkpoint (epoch 0's end) per worker, got %r" % (tag, steps))
    return [t for _, t in ts], steps[0][0]


def reshape_case(tag, W, R, W2, R2, how):
    """W x R for epoch 0, then W2 x R2 from epoch 1 (how: 'restore' or 'epoch'), one feeder throughout."""
    harness.case()
    job_path, job = bed.write_job("job-" + tag, FILES, epochs=EPOCHS, shuffle=SHUFFLE)
    stats = os.path.join(bed.TMP, tag + "-stats.json")
    f, ep = feeder(tag, job_path, ["--stats", stats])
    d = os.path.join(bed.TMP, tag + "-ckpt")
    old, step = first_epoch_then_kill(tag, ep, job, W, R, d)
    ref_old = bed.reference(job, [len(x) for x in IDS], W, R)
    ref_new = bed.reference(job, [len(x) for x in IDS], W2, R2)
    per_epoch = len([x for x in ref_old[0] if x["epoch"] == 0]) // R
    if step != per_epoch:
        fail("%s: the checkpoint is step %d, epoch 0 has %d steps" % (tag, step, per_epoch))
    extra = ["--restore", d, "--reshape"] if how == "restore" else ["--resume-epoch", "1", "--reshape"]
    new = trainers(tag, ep, job, W2, R2, extra)
    for w, (p, _) in enumerate(new):
        if wait(p, 60, "%s: trainer %d" % (tag, w)) != 0:
            fail("%s: trainer %d of the new shape failed:\n%s" % (tag, w, read_log(tag, "trainer%d" % w)[-2000:]))
    if f.poll() is not None and f.returncode != 0:
        fail("%s: the feeder exited %d" % (tag, f.returncode))
    if wait(f, 30, "%s: the feeder" % tag) != 0:
        fail("%s: the feeder did not exit 0 after the new shape's end" % tag)
    seen = {e: [] for e in range(EPOCHS)}
    for w in range(W):
        got = [x for x in trace_lines(old[w]) if x["epoch"] == 0]
        check(tag, "old worker %d, epoch 0" % w, got, want(ref_old, w, {0}))
        for x in got:
            seen[0] += x["ids"]
    for w, (_, t) in enumerate(new):
        got = trace_lines(t)
        check(tag, "new worker %d, epochs 1.." % w, got, want(ref_new, w, set(range(1, EPOCHS))))
        for x in got:
            seen[x["epoch"]] += x["ids"]
    every = sorted(i for ids in IDS for i in ids)
    for e in range(EPOCHS):
        if sorted(seen[e]) != every:
            fail("%s: epoch %d delivered %d elements (%d distinct), want each of %d once"
                 % (tag, e, len(seen[e]), len(set(seen[e])), len(every)))
    log = read_log(tag, "feeder")
    line = "cluster shape %d x %d -> %d x %d at epoch 1" % (W, R, W2, R2)
    if log.count(line) != 1 or len(re.findall(r"cluster shape \d+ x \d+ -> ", log)) != 1:
        fail("%s: the feeder's log lacks %r (once):\n%s" % (tag, line, log[-2000:]))
    with open(stats) as fh:
        if json.load(fh).get("reshapes") != 1:
            fail("%s: the feeder's --stats does not count one reshape: %s" % (tag, open(stats).read()[:400]))
    ok("%s: %d x %d for epoch 0, %d x %d from epoch 1 (%s), one feeder (pid %d) throughout: traces equal the "
       "reference's, every element once per epoch" % (tag, W, R, W2, R2, " ".join(extra), f.pid))


# ---- mid-epoch: the transition ----

def ref_cfg(job, W, R):
    """The reference model's config of job for W x R (as bed.reference's)."""
    shuffle = job.get("shuffle") or {}
    return bed.ref_plan.normalize({
        "counts": [len(x) for x in IDS], "source_is_files": 1, "policy": job.get("shard_policy", "auto"),
        "hint": job.get("shard_hint", "files"), "G": job["global_batch_size"],
        "drop_remainder": int(job.get("drop_remainder", False)), "shuffle_buffer": shuffle.get("buffer", 0),
        "seed": shuffle.get("seed", 0), "reshuffle": int(shuffle.get("reshuffle_each_epoch", True)),
        "epochs": job["epochs"], "W": W, "R": R})


def want_transition(job, old, new, w2, e, t):
    """New worker w2's trace after the change at step t of epoch e from
    old = (W, R) to new = (W2, R2): the transition pieces (seq 0 the
    change; epoch e, steps t..T-1), then the new shape's epochs."""
    (W, R), (W2, R2) = old, new
    cfg_old, cfg_new = ref_cfg(job, W, R), ref_cfg(job, W2, R2)
    T, T2 = bed.ref_plan.epoch_steps(cfg_old), bed.ref_plan.epoch_steps(cfg_new)
    head = (T - t) * R2
    out = []
    for k, p in enumerate(bed.ref_plan.transition_pieces(cfg_old, cfg_new, w2, e, t, job["epochs"])):
        if k < head:
            epoch, step = e, t + k // R2
        else:
            epoch, step = e + 1 + (k - head) // (T2 * R2), (k - head) % (T2 * R2) // R2
        out.append({"worker": w2, "replica": k % R2, "epoch": epoch, "step": step, "seq": k, "size": len(p),
                    "ids": [IDS[fi][r] for fi, r in p]})
    return out


def run_until_checkpoint(tag, ep, job, W, R, extra, d, step, who):
    """W x R trainers (slowed) until every worker wrote step's checkpoint
    into d, then SIGKILL: their traces."""
    ts = trainers(tag, ep, job, W, R, extra + ["--checkpoint", d, "--step-ms", "40"], who=who)
    deadline = time.time() + 60
    while not all(step in ckpt_steps(d, w, W) for w in range(W)):
        if time.time() > deadline or any(p.poll() is not None for p, _ in ts):
            logs = "\n".join(read_log(tag, "%s%d" % (who, w))[-1500:] for w in range(W))
            fail("%s: the %d x %d trainers (%s) did not write step %d's checkpoint:\n%s" % (tag, W, R, who, step,
                                                                                        logs))
        time.sleep(0.005)
    for p, _ in ts:
        p.kill()
    for p, _ in ts:
        wait(p, 10, "%s: a killed trainer" % tag)
    return [t for _, t in ts]


def mid_epoch_case():
    """2 x 1 -> 3 x 1 at step 7 of epoch 1 (--restore --reshape of a mid-epoch
    checkpoint); 3 x 1 killed inside the transition epoch and restored with
    its own shape; 3 x 1 -> 2 x 2 at epoch 2's start (--restore --reshape of
    the transition epoch's end); one feeder throughout."""
    tag = "mid-w2-w3"
    harness.case()
    job_path, job = bed.write_job("job-" + tag, FILES, epochs=EPOCHS, shuffle=SHUFFLE)
    f, ep = feeder(tag, job_path)
    d, d2 = os.path.join(bed.TMP, tag + "-ckpt"), os.path.join(bed.TMP, tag + "-ckpt2")
    T = bed.ref_plan.epoch_steps(ref_cfg(job, 2, 1))
    T3 = bed.ref_plan.epoch_steps(ref_cfg(job, 3, 1))
    e, t = 1, 7
    # 2 x 1: epoch 0, then epoch 1 to step 7 (global step T + 7)
    old = run_until_checkpoint(tag, ep, job, 2, 1, ["--checkpoint-every", str(T + t)], d, T + t, "old")
    if any(max(ckpt_steps(d, w, 2)) != T + t for w in range(2)):
        fail("%s: the 2 x 1 trainers' newest checkpoints are %r, want step %d"
             % (tag, [ckpt_steps(d, w, 2) for w in range(2)], T + t))
    # the refusal first: another shape mid-epoch without --reshape
    refused_trainer(tag, ep, job, 3, 1, ["--restore", d],
                    "was taken with 2 workers x 1 replicas at step %d of %d of epoch %d; this run has 3 x 1: give "
                    "--reshape to continue from this step (the rest of the epoch cut for this shape)" % (t, T, e))
    # 3 x 1 from the change: 10 steps into the transition epoch (global T + t + 10)
    mid_step = T + t + 10
    mid = run_until_checkpoint(tag, ep, job, 3, 1, ["--restore", d, "--reshape", "--checkpoint-every",
                                                     str(mid_step)], d2, mid_step, "mid")
    for w in range(3):
        log = read_log(tag, "mid%d" % w)
        line = "restoring step %d of 2 workers x 1 replicas from %s/ckpt-%012d.w%dof2: continuing at step %d of " \
            "%d of epoch %d with 3 x 1" % (T + t, d, T + t, w % 2, t, T, e)
        if line not in log:
            fail("%s: trainer %d's log lacks %r:\n%s" % (tag, w, line, log[-1500:]))
    # a second change within epoch 1 is refused (its checkpoint lies in the transition epoch)
    refused_trainer(tag, ep, job, 2, 1, ["--restore", d2, "--restore-step", str(mid_step), "--reshape"],
                    "a second change within epoch %d (the job's shape changed at its step %d from 2 x 1): change "
                    "again at epoch %d's start" % (e, t, e + 1))
    # the feeder's side: a trainer of the shape that does not know of the change
    refused_trainer(tag, ep, job, 3, 1, ["--resume-epoch", "2"],
                    "the job's shape changed at step %d of epoch %d from 2 x 1; this trainer does not know of the "
                    "change (its HELLO carries no transition)" % (t, e))
    # the same shape from the checkpoint inside the transition epoch, until its end (global T + T)
    same = run_until_checkpoint(tag, ep, job, 3, 1, ["--restore", d2, "--checkpoint-every", "1000000"], d2, 2 * T,
                                "same")
    for w in range(3):
        log = read_log(tag, "same%d" % w)
        line = "the job's shape changed at step %d of epoch %d from 2 x 1; input position 10 counted from there, " \
            "step %d" % (t, e, mid_step)
        if line not in log:
            fail("%s: trainer %d's log lacks %r:\n%s" % (tag, w, line, log[-1500:]))
    # 2 x 2 from epoch 2: the transition epoch's end is an epoch boundary
    last = trainers(tag, ep, job, 2, 2, ["--restore", d2, "--reshape"], who="last")
    for w, (p, _) in enumerate(last):
        if wait(p, 60, "%s: trainer %d" % (tag, w)) != 0:
            fail("%s: 2 x 2 trainer %d failed:\n%s" % (tag, w, read_log(tag, "last%d" % w)[-2000:]))
    if wait(f, 30, "%s: the feeder" % tag) != 0:
        fail("%s: the feeder did not exit 0 after the last shape's end" % tag)
    ref_old = bed.reference(job, [len(x) for x in IDS], 2, 1)
    ref_last = bed.reference(job, [len(x) for x in IDS], 2, 2)
    seen = {x: [] for x in range(EPOCHS)}

    def before_change(x):
        return x["epoch"] < e or (x["epoch"] == e and x["step"] < t)

    for w in range(2):
        got = [x for x in trace_lines(old[w]) if before_change(x)]
        check(tag, "2 x 1 worker %d, before the change" % w, got,
              [x for x in want(ref_old, w, set(range(EPOCHS))) if before_change(x)])
        for x in got:
            seen[x["epoch"]] += x["ids"]
    for w in range(3):
        # the first 3 x 1 run's pieces up to its checkpoint (seq 10), then the second's of epoch 1
        got = [x for x in trace_lines(mid[w]) if x["seq"] < 10] + \
            [x for x in trace_lines(same[w]) if x["epoch"] == e]
        check(tag, "3 x 1 worker %d, the transition epoch" % w, got,
              [x for x in want_transition(job, (2, 1), (3, 1), w, e, t) if x["epoch"] == e])
        for x in got:
            seen[x["epoch"]] += x["ids"]
    for w, (_, tr) in enumerate(last):
        got = trace_lines(tr)
        check(tag, "2 x 2 worker %d, epochs 2.." % w, got, want(ref_last, w, set(range(e + 1, EPOCHS))))
        for x in got:
            seen[x["epoch"]] += x["ids"]
    every = sorted(i for ids in IDS for i in ids)
    for x in range(EPOCHS):
        if sorted(seen[x]) != every:
            fail("%s: epoch %d delivered %d elements (%d distinct), want each of %d once"
                 % (tag, x, len(seen[x]), len(set(seen[x])), len(every)))
    ok("%s: 2 x 1 to step %d of epoch %d, 3 x 1 from there (--restore --reshape of a mid-epoch checkpoint: the "
       "transition), killed at step %d and restored with its shape, 2 x 2 from epoch %d (an epoch end in "
       "transition numbering); 3 x 1's epoch has %d steps of its own; traces equal the reference's, every "
       "element once per epoch; mid-epoch without --reshape, a second change within epoch %d and a trainer "
       "without the transition refused" % (tag, t, e, mid_step, e + 1, T3, e))


def mid_epoch_twice_case():
    """Two changes in different epochs: 2 x 1 -> 3 x 1 at step 7 of epoch 1,
    then 3 x 1 -> 2 x 2 at step 5 of epoch 2 (the old plan there is 3 x 1's
    plain plan; the checkpoint's position counted in the first transition's
    numbering)."""
    tag = "mid-twice"
    harness.case()
    job_path, job = bed.write_job("job-" + tag, FILES, epochs=EPOCHS, shuffle=SHUFFLE)
    f, ep = feeder(tag, job_path)
    d, d2 = os.path.join(bed.TMP, tag + "-ckpt"), os.path.join(bed.TMP, tag + "-ckpt2")
    T = bed.ref_plan.epoch_steps(ref_cfg(job, 2, 1))
    T3 = bed.ref_plan.epoch_steps(ref_cfg(job, 3, 1))
    e, t, e2, t2 = 1, 7, 2, 5
    at = T + t + (T - t) + t2  # the global step of the second change
    old = run_until_checkpoint(tag, ep, job, 2, 1, ["--checkpoint-every", str(T + t)], d, T + t, "old")
    mid = run_until_checkpoint(tag, ep, job, 3, 1, ["--restore", d, "--reshape", "--checkpoint-every", str(at)], d2,
                               at, "mid")
    last = trainers(tag, ep, job, 2, 2, ["--restore", d2, "--reshape"], who="last")
    for w, (p, _) in enumerate(last):
        if wait(p, 60, "%s: trainer %d" % (tag, w)) != 0:
            fail("%s: 2 x 2 trainer %d failed:\n%s" % (tag, w, read_log(tag, "last%d" % w)[-2000:]))
        line = "continuing at step %d of %d of epoch %d with 2 x 2" % (t2, T3, e2)
        if line not in read_log(tag, "last%d" % w):
            fail("%s: 2 x 2 trainer %d's log lacks %r:\n%s" % (tag, w, line, read_log(tag, "last%d" % w)[-1500:]))
    if wait(f, 30, "%s: the feeder" % tag) != 0:
        fail("%s: the feeder did not exit 0" % tag)
    seen = {x: [] for x in range(EPOCHS)}
    for w in range(2):
        for x in trace_lines(old[w]):
            if x["epoch"] < e or (x["epoch"] == e and x["step"] < t):
                seen[x["epoch"]] += x["ids"]
    head = (T - t) + t2  # the 3 x 1 steps before the second change
    for w in range(3):
        got = [x for x in trace_lines(mid[w]) if x["seq"] < head]
        check(tag, "3 x 1 worker %d, between the changes" % w, got,
              want_transition(job, (2, 1), (3, 1), w, e, t)[:head])
        for x in got:
            seen[x["epoch"]] += x["ids"]
    for w, (_, tr) in enumerate(last):
        got = trace_lines(tr)
        check(tag, "2 x 2 worker %d, from the second change" % w, got,
              want_transition(job, (3, 1), (2, 2), w, e2, t2))
        for x in got:
            seen[x["epoch"]] += x["ids"]
    every = sorted(i for ids in IDS for i in ids)
    for x in range(EPOCHS):
        if sorted(seen[x]) != every:
            fail("%s: epoch %d delivered %d elements (%d distinct), want each of %d once"
                 % (tag, x, len(seen[x]), len(set(seen[x])), len(every)))
    ok("%s: 2 x 1 -> 3 x 1 at step %d of epoch %d, 3 x 1 -> 2 x 2 at step %d of epoch %d (global step %d): traces "
       "equal the reference's, every element once per epoch" % (tag, t, e, t2, e2, at))


def mid_epoch_feeder_restart_case():
    """2 x 1 -> 3 x 1 at step 7 of epoch 1; the feeder killed inside the
    transition epoch and started again: the trainers (--reconnect-s) say
    HELLO again with the transition and their seq in its numbering, the
    new feeder takes the shape and the transition from them, and each
    trace is still exactly the reference's."""
    tag = "mid-restart"
    harness.case()
    job_path, job = bed.write_job("job-" + tag, FILES, epochs=EPOCHS, shuffle=SHUFFLE)
    f, ep = feeder(tag, job_path)
    d = os.path.join(bed.TMP, tag + "-ckpt")
    T = bed.ref_plan.epoch_steps(ref_cfg(job, 2, 1))
    e, t = 1, 7
    old = run_until_checkpoint(tag, ep, job, 2, 1, ["--checkpoint-every", str(T + t)], d, T + t, "old")
    # 4 credits: most of the stream is still to come when the feeder dies,
    # 5 steps after the change (their checkpoint says they got there)
    d3 = os.path.join(bed.TMP, tag + "-ckpt3")
    new = trainers(tag, ep, job, 3, 1, ["--restore", d, "--reshape", "--step-ms", "40", "--reconnect-s", "30",
                                        "--credits", "4", "--checkpoint", d3, "--checkpoint-every", str(T + t + 5)])
    deadline = time.time() + 30
    while not all(T + t + 5 in ckpt_steps(d3, w, 3) for w in range(3)):
        if time.time() > deadline or any(p.poll() is not None for p, _ in new):
            fail("%s: the 3 x 1 trainers did not take 5 steps:\n%s" % (tag, read_log(tag, "trainer0")[-1500:]))
        time.sleep(0.005)
    f.kill()
    wait(f, 10, "%s: the killed feeder" % tag)
    # the same job on the same address, a new process knowing nothing of the shape
    f2 = spawn([bed.FEEDER, "--job", job_path, "--listen", ep, "--threads", "2", "--heartbeat-ms", "200",
                "--timeout-ms", "5000"], log=bed.log_path(tag, "feeder2"))
    for w, (p, _) in enumerate(new):
        if wait(p, 60, "%s: trainer %d" % (tag, w)) != 0:
            fail("%s: trainer %d failed after the feeder's restart:\n%s" % (tag, w,
                                                                           read_log(tag, "trainer%d" % w)[-2000:]))
    if wait(f2, 30, "%s: the restarted feeder" % tag) != 0:
        fail("%s: the restarted feeder did not exit 0:\n%s" % (tag, read_log(tag, "feeder2")[-1500:]))
    ref_old = bed.reference(job, [len(x) for x in IDS], 2, 1)
    seen = {x: [] for x in range(EPOCHS)}
    for w in range(2):
        got = [x for x in trace_lines(old[w]) if x["epoch"] < e or (x["epoch"] == e and x["step"] < t)]
        check(tag, "2 x 1 worker %d, before the change" % w, got,
              [x for x in want(ref_old, w, set(range(EPOCHS))) if x["epoch"] < e or (x["epoch"] == e and
                                                                                     x["step"] < t)])
        for x in got:
            seen[x["epoch"]] += x["ids"]
    for w, (_, tr) in enumerate(new):
        got = trace_lines(tr)
        check(tag, "3 x 1 worker %d, from the change" % w, got, want_transition(job, (2, 1), (3, 1), w, e, t))
        for x in got:
            seen[x["epoch"]] += x["ids"]
    every = sorted(i for ids in IDS for i in ids)
    for x in range(EPOCHS):
        if sorted(seen[x]) != every:
            fail("%s: epoch %d delivered %d elements (%d distinct), want each of %d once"
                 % (tag, x, len(seen[x]), len(set(seen[x])), len(every)))
    for w in range(3):
        log = read_log(tag, "trainer%d" % w)
        if not re.search(r"mid-restart\.sock is back after [0-9.]+ s: resuming at piece \d+", log):
            fail("%s: trainer %d does not say the feeder came back:\n%s" % (tag, w, log[-2000:]))
    line = "the shape changed from 2 x 1 at step %d of epoch %d" % (t, e)
    if line not in read_log(tag, "feeder2"):
        fail("%s: the restarted feeder's log lacks %r:\n%s" % (tag, line, read_log(tag, "feeder2")[-1500:]))
    ok("%s: 2 x 1 -> 3 x 1 at step %d of epoch %d, the feeder killed inside the transition epoch and started "
       "again: the trainers' HELLOs carried the transition, traces equal the reference's, every element once per "
       "epoch" % (tag, t, e))


MODEL = ["--model", "mlp", "--hidden", "16", "--classes", "10", "--lr", "0.01", "--momentum", "0.9", "--seed", "7",
         "--input", "image", "--label", "label", "--timeout-ms", "20000"]


def mid_epoch_model_case():
    """With a model (mirrored, the workers' ring): 2 x 1 -> 3 x 1 at step 7
    of epoch 1; the 3 x 1 workers load the 2 x 1 weights, agree over their
    ring, train the transition pieces and the 3 x 1 plan to the end."""
    tag = "mid-model"
    harness.case()
    job_path, job = bed.write_job("job-" + tag, FILES, epochs=EPOCHS, shuffle=SHUFFLE)
    f, ep = feeder(tag, job_path)
    d = os.path.join(bed.TMP, tag + "-ckpt")
    T = bed.ref_plan.epoch_steps(ref_cfg(job, 2, 1))
    e, t = 1, 7

    def ring(W, who):
        return ["--ring", ",".join("ipc://%s/%s-%s-ring%d.sock" % (bed.TMP, tag, who, w) for w in range(W))]
    old = run_until_checkpoint(tag, ep, job, 2, 1, MODEL + ring(2, "old") + ["--checkpoint-every", str(T + t)], d,
                               T + t, "old")
    new = trainers(tag, ep, job, 3, 1, MODEL + ring(3, "new") + ["--restore", d, "--reshape"])
    for w, (p, _) in enumerate(new):
        if wait(p, 90, "%s: trainer %d" % (tag, w)) != 0:
            fail("%s: trainer %d failed:\n%s" % (tag, w, read_log(tag, "trainer%d" % w)[-2000:]))
        log = read_log(tag, "trainer%d" % w)
        if "continuing at step %d of %d of epoch %d with 3 x 1" % (t, T, e) not in log:
            fail("%s: trainer %d did not make the change:\n%s" % (tag, w, log[-2000:]))
    if wait(f, 30, "%s: the feeder" % tag) != 0:
        fail("%s: the feeder did not exit 0" % tag)
    seen = {x: [] for x in range(EPOCHS)}
    for w in range(2):
        seen_w = [x for x in trace_lines(old[w]) if x["epoch"] < e or (x["epoch"] == e and x["step"] < t)]
        for x in seen_w:
            seen[x["epoch"]] += x["ids"]
    for w, (_, tr) in enumerate(new):
        got = trace_lines(tr)
        check(tag, "3 x 1 worker %d, from the change" % w, got, want_transition(job, (2, 1), (3, 1), w, e, t))
        for x in got:
            seen[x["epoch"]] += x["ids"]
    every = sorted(i for ids in IDS for i in ids)
    for x in range(EPOCHS):
        if sorted(seen[x]) != every:
            fail("%s: epoch %d delivered %d elements (%d distinct), want each of %d once"
                 % (tag, x, len(seen[x]), len(set(seen[x])), len(every)))
    # --mode tower keeps its shape (its weights are per replica), mid-epoch too
    f2, ep2 = feeder(tag + "-tower", job_path)
    tower = MODEL + ["--mode", "tower"]
    d_t = os.path.join(bed.TMP, tag + "-tower-ckpt")
    run_until_checkpoint(tag, ep2, job, 1, 2, tower + ["--checkpoint-every", "20"], d_t, 20, "tower")
    refused_trainer(tag, ep2, job, 1, 3, tower + ["--restore", d_t, "--reshape"],
                    "was taken with 1 workers x 2 replicas at step 20 of 30 of epoch 0; this run has 1 x 3: --mode "
                    "tower's weights are per replica: keep the shape")
    f2.kill()
    wait(f2, 10, "%s: the tower feeder" % tag)
    ok("%s: --model mlp (mirrored): 2 x 1 -> 3 x 1 at step %d of epoch %d, the weights restored, the ring of 3 "
       "trained the transition pieces and the new plan; traces equal the reference's, every element once; "
       "--mode tower's mid-epoch checkpoint refused for another shape" % (tag, t, e))


# ---- refusals ----

def refused_trainer(tag, ep, job, W, R, extra, text):
    refused_trainer.n = getattr(refused_trainer, "n", 0) + 1
    who = "refused%d-" % refused_trainer.n
    p = trainers(tag, ep, job, W, R, extra, who=who, only=0)[0][0]
    rc = wait(p, 30, "%s: the refused trainer" % tag)
    log = read_log(tag, who + "0")
    if rc == 0 or text not in log:
        fail("%s: expected a failure saying %r, got exit %d:\n%s" % (tag, text, rc, log[-1500:]))


def trainer_refusals():
    """The trainer's own: another shape's checkpoint without --reshape (at
    an epoch's end, or mid-epoch); --resume-epoch with --restore."""
    tag = "trainer-refusals"
    harness.case()
    job_path, job = bed.write_job("job-" + tag, FILES, epochs=EPOCHS, shuffle=SHUFFLE)
    stats = os.path.join(bed.TMP, tag + "-stats.json")
    f, ep = feeder(tag, job_path, ["--stats", stats])
    d = os.path.join(bed.TMP, tag + "-ckpt")
    _, step = first_epoch_then_kill(tag, ep, job, 2, 1, d)
    refused_trainer(tag, ep, job, 3, 1, ["--restore", d],
                    "was taken with 2 workers x 1 replicas at step %d of %d of epoch 0; this run has 3 x 1: give "
                    "--reshape" % (step, step))
    # a checkpoint in the middle of an epoch: step 7 of epoch 0 (renamed
    # from the end's would fail its check: written by a real run instead)
    mid = os.path.join(bed.TMP, tag + "-mid")
    f2, ep2 = feeder(tag + "-mid", job_path)  # the same job, its own feeder (the first keeps 2 x 1)
    ts = trainers(tag + "-mid", ep2, job, 1, 1, ["--checkpoint", mid, "--checkpoint-every", "7", "--step-ms", "40"])
    deadline = time.time() + 60
    while 7 not in ckpt_steps(mid, 0, 1):
        if time.time() > deadline or ts[0][0].poll() is not None:
            fail("%s: no checkpoint of step 7" % tag)
        time.sleep(0.005)
    ts[0][0].kill()
    wait(ts[0][0], 10, "%s: the killed trainer" % tag)
    f2.kill()
    wait(f2, 10, "%s: the second feeder" % tag)
    refused_trainer(tag, ep, job, 2, 1, ["--restore", mid, "--restore-step", "7"],
                    "was taken with 1 workers x 1 replicas at step 7 of %d of epoch 0; this run has 2 x 1: give "
                    "--reshape to continue from this step (the rest of the epoch cut for this shape)" % step)
    refused_trainer(tag, ep, job, 2, 1, ["--restore", d, "--resume-epoch", "1"],
                    "--resume-epoch: --restore's checkpoint gives where to continue")
    f.kill()
    wait(f, 10, "%s: the feeder" % tag)
    ok("the trainer refuses another shape's checkpoint without --reshape (at an epoch's end and mid-epoch: step "
       "7), and --resume-epoch with --restore, each saying why")


def raw_refusals():
    """Raw HELLOs to a live feeder: each refusal with its reason, and the feeder still serves."""
    if zmq is None:
        print("# raw HELLO refusals skipped: python3-zmq is not installed")
        return
    ctx = zmq.Context()

    def ask(ep, **kw):
        s = ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.connect(ep)
        s.send(wire.hello(**kw))
        deadline = time.time() + 10
        try:
            while time.time() < deadline:
                if not s.poll(int((deadline - time.time()) * 1000) + 1):
                    break
                h = s.recv_multipart()[0]
                mtype = struct.unpack_from("<H", h, 6)[0]
                if mtype == wire.REFUSE:
                    n = struct.unpack_from("<H", h, 8)[0]
                    return "REFUSE", h[10:10 + n].decode()
                if mtype == wire.WELCOME:
                    s.send(wire.bye())
                    return "WELCOME", h
            return None, None
        finally:
            s.close()

    tag = "raw"
    harness.case()
    job_path, job = bed.write_job("job-" + tag, FILES, epochs=EPOCHS, shuffle=SHUFFLE)
    f, ep = feeder(tag, job_path)
    RESHAPE, EPOCH = 0x100, 0x80
    # the shape set and consumed by a live 1 x 1 trainer, slowed
    live = trainers(tag, ep, job, 1, 1, ["--step-ms", "50"], who="live")
    wait_for_log(tag, "feeder", "worker 0 connected", f, "%s: the live trainer did not connect" % tag)
    time.sleep(0.5)
    cases = [
        (dict(workers=2, flags=RESHAPE | EPOCH, resume_epoch=1, heartbeat_ms=200),
         "but worker 0 of the old shape is still connected (heard from"),
        (dict(workers=2, flags=EPOCH, resume_epoch=1, resume_seq=4),
         "cluster shape disagrees"),
    ]
    for kw, text in cases:
        kind, why = ask(ep, job=job["name"], **kw)
        if kind != "REFUSE" or text not in why:
            fail("%s: HELLO %r: expected a REFUSE saying %r, got %s %r" % (tag, kw, text, kind, why))
    # the live trainer goes on, undisturbed; then it is killed (the feeder
    # finds its connection closed when the next reshape is asked for)
    if live[0][0].poll() is not None:
        fail("%s: the live trainer ended during the refusals (exit %s)" % (tag, live[0][0].returncode))
    live[0][0].kill()
    wait(live[0][0], 10, "%s: the killed trainer" % tag)
    per = len([x for x in bed.reference(job, [len(x) for x in IDS], 2, 1)[0] if x["epoch"] == 0])
    cases = [
        (dict(workers=2, flags=RESHAPE, resume_seq=per + 1),
         "which is not an epoch's first piece of that shape (%d steps x 1 replicas per epoch)" % per),
        (dict(workers=2, flags=RESHAPE | EPOCH, resume_epoch=1, resume_seq=5),
         "must say resume_seq 0, not 5"),
        (dict(workers=2, flags=RESHAPE | EPOCH, resume_epoch=EPOCHS + 1),
         "asks to reshape at epoch %d, past the end of the job (%d epochs)" % (EPOCHS + 1, EPOCHS)),
        (dict(workers=1, flags=EPOCH, resume_epoch=1, resume_seq=3),
         "a HELLO that resumes by epoch must say resume_seq 0"),
        (dict(workers=1, flags=EPOCH, resume_epoch=EPOCHS + 1),
         "asks to resume at epoch %d, past the end of the job (%d epochs)" % (EPOCHS + 1, EPOCHS)),
        (dict(workers=1, flags=EPOCH, resume_epoch=1 << 62),
         "past the end of the job"),
    ]
    for kw, text in cases:
        kind, why = ask(ep, job=job["name"], heartbeat_ms=200, **kw)
        if kind != "REFUSE" or text not in why:
            fail("%s: HELLO %r: expected a REFUSE saying %r, got %s %r" % (tag, kw, text, kind, why))
    # resume by epoch EPOCHS: the job's end, END at once
    kind, _ = ask(ep, job=job["name"], heartbeat_ms=200, flags=EPOCH, resume_epoch=EPOCHS)
    per1 = len([x for x in bed.reference(job, [len(x) for x in IDS], 1, 1)[0] if x["epoch"] == 0])
    if kind != "WELCOME" or "resume at piece %d)" % (EPOCHS * per1) not in read_log(tag, "feeder"):
        fail("%s: resume by epoch %d (the job's end, piece %d): %s" % (tag, EPOCHS, EPOCHS * per1, kind))
    f.kill()
    wait(f, 10, "%s: the feeder" % tag)
    # a feeder whose shape is fixed
    tag = "raw-fixed"
    f, ep = feeder(tag, job_path, ["--workers", "1", "--replicas", "1"])
    kind, why = ask(ep, job=job["name"], workers=2, flags=RESHAPE | EPOCH, resume_epoch=1, heartbeat_ms=200)
    if kind != "REFUSE" or "but the shape is fixed by the feeder's --workers and --replicas" not in why:
        fail("%s: expected the fixed shape's refusal, got %s %r" % (tag, kind, why))
    f.kill()
    wait(f, 10, "%s: the feeder" % tag)
    ctx.term()
    ok("raw HELLOs refused with their reasons: a reshape while the old shape's trainer is heard from, mid-epoch, "
       "by epoch with resume_seq, past the end, a fixed shape; by epoch at the job's end: WELCOME")


# The Python side (run by /usr/bin/python3 with this build's package and
# torch): argv[1] the job, argv[2] the feeder. Three sluice.torch datasets
# (3 x 1) take epoch 0 and 7 steps of epoch 1 and save their states there;
# two datasets of 2 workers x 2 replicas load them (worker w of 2 takes
# worker w's state: load_state_dict makes the change, a transition) and take
# the rest, worker 0 leaving its first pass after 3 steps (its state there,
# inside the transition epoch, is refused by a 3 x 1 reader: a second change
# within epoch 1) and coming back. Prints {"old": [[ids of epoch 0, ids of
# epoch 1's first 7 steps] per worker], "new": [[[ids] per epoch 1..] per
# worker], "refused": text, "state": worker 0's state after its load}.
TORCH_CLIENT = r"""
import json, sys
import sluice.torch
job, ep = sys.argv[1], sys.argv[2]
def ds(w, W, R=1):
    return sluice.torch.IterableDataset([ep], job, worker=w, workers=W, replicas=R, heartbeat_ms=200,
                                        timeout_ms=5000)
def ids(b):
    return [int(x) for r in (b if isinstance(b, list) else [b]) for x in r["id"]]
old, states = [], []
for w in range(3):
    d = ds(w, 3)
    e0 = [x for b in d for x in ids(b)]
    e1 = []
    for k, b in enumerate(d):
        e1 += ids(b)
        if k == 6:
            break
    states.append(d.state_dict())
    old.append([e0, e1])
    d.close()
new, refused, loaded = [], "", None
for w in range(2):
    d = ds(w, 2, 2)
    d.load_state_dict(states[w])
    if w == 0:
        loaded = d.state_dict()
    passes, first = [], []
    if w == 0:  # 3 steps, its state inside the transition epoch, then the rest of that pass
        for k, b in enumerate(d):
            first += ids(b)
            if k == 2:
                break
        try:
            ds(0, 3).load_state_dict(d.state_dict())
        except ValueError as e:
            refused = str(e)
    while True:
        got = [x for b in d for x in ids(b)]
        if not got:
            break
        passes.append(first + got if not passes else got)
    new.append(passes)
    d.close()
print(json.dumps({"old": old, "new": new, "refused": refused, "state": loaded}))
"""


def python_case():
    """sluice.torch: load_state_dict of another shape mid-epoch (3 x 1 at step
    7 of epoch 1 -> 2 x 2), a second change within that epoch refused."""
    import subprocess
    py = "/usr/bin/python3"
    env = dict(os.environ, PYTHONPATH=os.path.join(bed.BUILD, "python"), PYTHONDONTWRITEBYTECODE="1")
    if not os.path.isdir(os.path.join(bed.BUILD, "python", "sluice")) or \
            subprocess.run([py, "-c", "import torch, sluice.torch"], env=env, capture_output=True).returncode != 0:
        print("# sluice.torch load_state_dict skipped: no Python package in this build, or no torch")
        return
    tag = "torch"
    harness.case()
    job_path, job = bed.write_job("job-" + tag, FILES, epochs=EPOCHS, shuffle=SHUFFLE)
    # a window of prefetch x R pieces (not the whole job): the datasets'
    # goodbyes come before their END, so the feeder waits
    f, ep = feeder(tag, job_path, ["--piece-memory", "1000000"])
    p = subprocess.run([py, "-c", TORCH_CLIENT, job["name"], ep], capture_output=True, text=True, env=env,
                       timeout=120)
    if p.returncode != 0:
        fail("%s: the Python program failed:\n%s\n%s" % (tag, p.stderr[-3000:], read_log(tag, "feeder")[-1500:]))
    out = json.loads(p.stdout.strip().splitlines()[-1])
    if wait(f, 30, "%s: the feeder" % tag) != 0:
        fail("%s: the feeder did not exit 0" % tag)
    counts = [len(x) for x in IDS]
    e, t = 1, 7
    ref = bed.reference(job, counts, 3, 1)
    T = len([x for x in ref[0] if x["epoch"] == 0])
    for w in range(3):
        exp = [[IDS[fi][r] for x in ref[w] if x["epoch"] == 0 for fi, r in x["elems"]],
               [IDS[fi][r] for x in ref[w] if x["epoch"] == 1 and x["step"] < t for fi, r in x["elems"]]]
        if out["old"][w] != exp:
            fail("%s: 3 x 1 worker %d: the ids differ from the reference's:\n  got  %s\n  want %s"
                 % (tag, w, out["old"][w], exp))
    for w in range(2):
        pieces = want_transition(job, (3, 1), (2, 2), w, e, t)
        exp = [[i for x in pieces if x["epoch"] == ep_ for i in x["ids"]] for ep_ in range(e, EPOCHS)]
        if out["new"][w] != exp:
            fail("%s: 2 x 2 worker %d: the ids per epoch differ from the reference's transition:\n  got  %s\n  "
                 "want %s" % (tag, w, out["new"][w], exp))
    want_state = {"version": 1, "job": job["name"], "worker": 0, "workers": 2, "replicas": 2,
                  "steps_per_epoch": None, "epochs": EPOCHS, "position": 0, "transition": [3, 1, e, t, T]}
    if out["state"] != want_state:
        fail("%s: the state after load_state_dict: %r, want %r" % (tag, out["state"], want_state))
    want_refusal = "a second change within epoch 1 is refused: change again at epoch 2's start"
    if want_refusal not in out["refused"]:
        fail("%s: the state inside the transition epoch: expected %r, got %r" % (tag, want_refusal, out["refused"]))
    ok("sluice.torch: 3 x 1 datasets' states at step %d of epoch %d loaded by 2 x 2 datasets (load_state_dict: "
       "the transition), ids equal the reference's; a dataset left and rejoined inside the transition epoch; "
       "a second change within it refused" % (t, e))


if __name__ == "__main__":  # imported by other tests for its helpers
    IDS = ids_of_files()
    reshape_case("w2-w3-restore", 2, 1, 3, 1, "restore")
    reshape_case("w3r1-w2r2-epoch", 3, 1, 2, 2, "epoch")
    trainer_refusals()
    raw_refusals()
    mid_epoch_case()
    mid_epoch_twice_case()
    mid_epoch_feeder_restart_case()
    mid_epoch_model_case()
    python_case()
    bed.cleanup()
    bed.finish()
