#!/usr/bin/env python3
"""Integration: sluice-trainer --checkpoint / --restore (issue #15 part 2).

The property: a training run (--model mlp, a shuffled job reshuffled each
epoch, 3 epochs) killed with SIGKILL at a random step and restarted with
--restore ends with the same final weights, bit for bit (the summary's
weights hash and the --save-weights bytes), as the run nobody killed; for
1 worker x 1 replica and 2 workers x 2 replicas, with KILLS random kill
points each (seeded: the seed is printed; SLUICE_CKPT_SEED=N repeats a
run). The feeder keeps running across the kill: the restarted trainer's
HELLO asks for the stream from the checkpoint's input position.

With --model none, the traces of a killed run (up to its checkpoint) and
of its restored run, put together, are the uninterrupted run's trace.

Also: a damaged newest checkpoint (a flipped byte, truncated, bad magic,
another version) or one made for another command line (hidden sizes,
classes, replicas, workers, job) is refused naming the file and what is
wrong, and the previous step is named for --restore-step; --keep,
--checkpoint-every 0 / huge / negative / repeated, --restore on an empty
or missing directory, a fresh run into a directory that holds checkpoints,
workers whose newest steps differ (they continue from the older one, or
fail naming both), a SIGKILL during a checkpoint's write (the temporary is
ignored and removed, the restore exact), and SIGTERM (a preemption): each
worker writes a checkpoint of the last step it trained before it exits,
and the restore ends with the same weights; and SIGTERM to worker 1 alone
of a 2 x 1 job: both workers stop after the same step (agreed in the
step's control value), exit 143, and the restore is exact.

Usage: test_checkpoint.py BUILD_DIR     (prints "N passed, 0 failed")
"""
import json
import os
import random
import shutil
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bed  # noqa: E402
import harness  # noqa: E402
from bed import read_log, wait_for_log  # noqa: E402
from harness import fail, ok, spawn  # noqa: E402

bed.setup(sys.argv[1], "ckpt")
FEEDER, TRAINER, TMP = bed.FEEDER, bed.TRAINER, bed.TMP
SEED = int(os.environ.get("SLUICE_CKPT_SEED", random.randrange(1 << 30)))
KILLS = int(os.environ.get("SLUICE_CKPT_KILLS", "3"))
print("seed %d (SLUICE_CKPT_SEED=%d repeats this run), %d kills per shape" % (SEED, SEED, KILLS))
sys.stdout.flush()
rng = random.Random(SEED)

EPOCHS, G, RECORDS = 3, 8, 1200
STEPS = EPOCHS * RECORDS // G  # 450 steps per worker, whatever W x R
FILES = bed.gen("a", RECORDS, 4)
JOB_PATH, _ = bed.write_job("ck", FILES, epochs=EPOCHS, global_batch_size=G,
                            shuffle={"buffer": 64, "seed": 11, "reshuffle_each_epoch": True})
MODEL = ["--model", "mlp", "--hidden", "16", "--classes", "10", "--lr", "0.01", "--momentum", "0.9", "--seed", "7",
         "--input", "image", "--label", "label"]
RUN = [0]


def feeder(tag):
    sock = "ipc://%s/%s-feeder.sock" % (TMP, tag)
    p = spawn([FEEDER, "--job", JOB_PATH, "--listen", sock, "--threads", "1"], log=bed.log_path(tag, "feeder"))
    wait_for_log(tag, "feeder", "serving job", p, "%s: the feeder did not start" % tag)
    return p, sock


def start(tag, sock, W, R, extra=(), per_worker=None, model=MODEL):
    """W trainer processes; their summaries go to TMP/tag-wN.out."""
    ring = ",".join("ipc://%s/%s-ring-%d.sock" % (TMP, tag, w) for w in range(W))
    procs = []
    for w in range(W):
        args = [TRAINER, "--connect", sock, "--job", "ck", "--worker", str(w), "--workers", str(W),
                "--devices", "cpu:%d" % R, "--timeout-ms", "20000"] + list(model)
        if W > 1:
            args += ["--ring", ring]
        args += list(extra) + (per_worker(w) if per_worker else [])
        out = open(os.path.join(TMP, "%s-w%d.out" % (tag, w)), "w")
        procs.append(spawn(args, log=bed.log_path(tag, "trainer%d" % w), stdout=out))
        out.close()
    return procs


def summaries(tag, procs, what, codes=(0,)):
    res = []
    for w, p in enumerate(procs):
        rc = bed.wait(p, 120, "%s: trainer %d" % (tag, w))
        if rc not in codes:
            fail("%s: trainer %d exited %d (%s)" % (tag, w, rc, what))
        lines = open(os.path.join(TMP, "%s-w%d.out" % (tag, w))).read().strip().splitlines()
        res.append(json.loads(lines[-1])["summary"] if lines else None)
    return res


def train(tag, W, R, extra=(), per_worker=None, model=MODEL):
    """A whole run with its own feeder: the workers' summaries."""
    f, sock = feeder(tag)
    outs = summaries(tag, start(tag, sock, W, R, extra, per_worker, model), "a whole run")
    bed.wait(f, 30, "%s: the feeder" % tag)
    return outs


def refused(tag, args, text, code=1):
    """One trainer that must fail before it connects, saying text."""
    p = start(tag, "ipc://%s/nobody.sock" % TMP, 1, 1, args)[0]
    rc = bed.wait(p, 30, tag)
    log = read_log(tag, "trainer0")
    if rc != code or text not in log:
        fail("%s: expected exit %d and %r, got %d: %s" % (tag, code, text, rc, log[-1500:]))


def ckpt_steps(d, w, W):
    suffix = ".w%dof%d" % (w, W)
    return sorted(int(n[5:17]) for n in os.listdir(d) if n.startswith("ckpt-") and n.endswith(suffix))


def weights_bytes(tag, w):
    return open(os.path.join(TMP, "%s-w%d.npy" % (tag, w)), "rb").read()


def save_weights(tag):
    return lambda w: ["--save-weights", os.path.join(TMP, "%s-w%d.npy" % (tag, w))]


def kill_at(procs, d, target, poll_tmp=False):
    """SIGKILL every trainer once worker 0's newest checkpoint reaches step
    target (or, poll_tmp, once a checkpoint temporary is in d). False when
    they had finished first."""
    deadline = time.time() + 120
    while time.time() < deadline:
        if any(p.poll() is not None for p in procs):
            break
        if os.path.isdir(d):
            names = os.listdir(d)
            if poll_tmp and any(n.startswith(".ckpt-") and n.endswith(".tmp") for n in names) and \
                    any(n.startswith("ckpt-") for n in names):
                break
            if not poll_tmp:
                steps = [int(n[5:17]) for n in names if n.startswith("ckpt-") and n.endswith(".w0of%d" % len(procs))]
                if steps and max(steps) >= target:
                    break
        time.sleep(0.001)
    finished = any(p.poll() is not None for p in procs)
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
    for p in procs:
        bed.wait(p, 30, "a killed trainer")
    return not finished


def kill_and_restore(W, R, ref_hash, ref_weights, trial):
    tag = "kill-%dx%d-%d" % (W, R, trial)
    d = os.path.join(TMP, tag + "-ckpt")
    every = rng.choice([1, 3, 7])
    target = rng.randrange(2, STEPS - 30)
    harness.case()
    f, sock = feeder(tag)
    args = ["--checkpoint", d, "--checkpoint-every", str(every)]
    procs = start(tag, sock, W, R, args)
    if not kill_at(procs, d, target):
        fail("%s: the trainers finished before step %d" % (tag, target))
    newest = [ckpt_steps(d, w, W)[-1] for w in range(W)]
    rtag = tag + "-restored"
    outs = summaries(rtag, start(rtag, sock, W, R, args + ["--restore", d], save_weights(rtag)), "restored")
    bed.wait(f, 30, "%s: the feeder" % tag)
    for w, o in enumerate(outs):
        step = o["restored_step"]
        if step != min(newest):
            fail("%s: worker %d restored step %d; the newest checkpoints were %r" % (tag, w, step, newest))
        if o["steps"] != STEPS - step:
            fail("%s: worker %d trained %d steps after step %d of %d" % (tag, w, o["steps"], step, STEPS))
        if o["weights_hash"] != ref_hash or weights_bytes(rtag, w) != ref_weights:
            fail("%s: worker %d ended with weights %s, the uninterrupted run with %s (killed after checkpoint "
                 "step %r, every %d, seed %d)" % (tag, w, o["weights_hash"], ref_hash, newest, every, SEED))
    ok("%d x %d: killed after step %d's checkpoint (target %d, every %d), restored: the same weights %s"
       % (W, R, min(newest), target, every, ref_hash))


def preempted(W, R, ref_hash, ref_weights):
    """SIGTERM (a preemption) to every worker once the first epoch's
    checkpoint is written, with --checkpoint-every far away: each writes a
    checkpoint of the last step it trained before it exits 143, and the
    restored run ends with the uninterrupted run's weights."""
    tag = "preempt-%dx%d" % (W, R)
    d = os.path.join(TMP, tag + "-ckpt")
    harness.case()
    f, sock = feeder(tag)
    args = ["--checkpoint", d, "--checkpoint-every", "1000000"]
    procs = start(tag, sock, W, R, args)
    per_epoch = STEPS // EPOCHS
    deadline = time.time() + 120
    while time.time() < deadline and not (os.path.isdir(d) and ckpt_steps(d, 0, W)):
        if any(p.poll() is not None for p in procs):
            fail("%s: a trainer ended before its first checkpoint" % tag)
        time.sleep(0.001)
    for p in procs:
        p.send_signal(signal.SIGTERM)
    for w, p in enumerate(procs):
        rc = bed.wait(p, 30, "%s: trainer %d" % (tag, w))
        log = read_log(tag, "trainer%d" % w)
        if rc == 0:
            fail("%s: trainer %d finished before the signal: nothing tested" % (tag, w))
        if rc != 128 + signal.SIGTERM or "stopped by a signal" not in log:
            fail("%s: trainer %d exited %d after SIGTERM:\n%s" % (tag, w, rc, log[-1500:]))
    newest = [ckpt_steps(d, w, W)[-1] for w in range(W)]
    if min(newest) < per_epoch:
        fail("%s: newest checkpoints %r, before the first epoch's end" % (tag, newest))
    if len(set(newest)) != 1:  # a ring job's workers agree on the step they stop after
        fail("%s: the workers' stop checkpoints are of different steps: %r" % (tag, newest))
    rtag = tag + "-restored"
    outs = summaries(rtag, start(rtag, sock, W, R, args + ["--restore", d], save_weights(rtag)), "restored")
    bed.wait(f, 30, "%s: the feeder" % tag)
    for w, o in enumerate(outs):
        if o["weights_hash"] != ref_hash or weights_bytes(rtag, w) != ref_weights:
            fail("%s: worker %d ended with weights %s, the uninterrupted run with %s (stopped at %r)"
                 % (tag, w, o["weights_hash"], ref_hash, newest))
    ok("%d x %d: SIGTERM after the first epoch: checkpoints of steps %r written at the stop (exit 143), restored "
       "from step %d: the same weights %s" % (W, R, newest, outs[0]["restored_step"], ref_hash))


def preempted_one():
    """SIGTERM to worker 1 ONLY of a 2 x 1 ring job: the workers agree, in
    the step's control value, on the step they stop after; both exit 143
    with stop checkpoints of that one step, worker 0 saying another
    worker's signal stopped it, and the restore ends with the uninterrupted
    run's weights (a 2 x 1 reference run first)."""
    tag = "ref-2x1"
    harness.case()
    outs = train(tag, 2, 1, per_worker=save_weights(tag))
    ref_hash, ref_weights = outs[0]["weights_hash"], weights_bytes(tag, 0)
    if {o["weights_hash"] for o in outs} != {ref_hash} or any(o["steps"] != STEPS for o in outs):
        fail("%s: %r" % (tag, outs))
    tag = "preempt-one-2x1"
    d = os.path.join(TMP, tag + "-ckpt")
    harness.case()
    f, sock = feeder(tag)
    args = ["--checkpoint", d, "--checkpoint-every", "1000000"]
    procs = start(tag, sock, 2, 1, args)
    per_epoch = STEPS // EPOCHS
    deadline = time.time() + 120
    while time.time() < deadline and not (os.path.isdir(d) and ckpt_steps(d, 0, 2)):
        if any(p.poll() is not None for p in procs):
            fail("%s: a trainer ended before its first checkpoint" % tag)
        time.sleep(0.001)
    t0 = time.time()
    procs[1].send_signal(signal.SIGTERM)
    logs = []
    for w, p in enumerate(procs):
        rc = bed.wait(p, 30, "%s: trainer %d" % (tag, w))
        logs.append(read_log(tag, "trainer%d" % w))
        if rc == 0:
            fail("%s: trainer %d finished before the signal: nothing tested" % (tag, w))
        if rc != 128 + signal.SIGTERM:
            fail("%s: trainer %d exited %d after SIGTERM to worker 1:\n%s" % (tag, w, rc, logs[w][-1500:]))
    took = time.time() - t0
    newest = [ckpt_steps(d, w, 2)[-1] for w in range(2)]
    if newest[0] != newest[1] or newest[0] <= per_epoch:
        fail("%s: the stop checkpoints are of steps %r (expected one step past %d)" % (tag, newest, per_epoch))
    # the log names the step (epoch e, step s of it: global step e x 150 + s + 1, the checkpoint's)
    e, s = divmod(newest[0] - 1, per_epoch)
    agreed = "1 of 2 workers were signalled; every worker stops after epoch %d step %d" % (e, s)
    for w, (text, stop) in enumerate([("stopped by another worker's signal: ", "stopped by another worker's signal "
                                       "after "), ("a signal stops the job: ", "stopped by a signal after ")]):
        if text + agreed not in logs[w] or stop not in logs[w]:
            fail("%s: worker %d's log lacks %r and %r:\n%s" % (tag, w, text + agreed, stop, logs[w][-1500:]))
    if took > 5:
        fail("%s: the workers took %.1f s to stop (the agreement is one step; the grace 20 s)" % (tag, took))
    for w, by in enumerate(["another worker's signal", "signal"]):
        o = json.loads(open(os.path.join(TMP, "%s-w%d.out" % (tag, w))).read().strip().splitlines()[-1])["summary"]
        if o["ok"] or o["stopped_by"] != by:
            fail("%s: worker %d's summary says ok %r, stopped_by %r (expected false, %r)"
                 % (tag, w, o["ok"], o["stopped_by"], by))
    rtag = tag + "-restored"
    outs = summaries(rtag, start(rtag, sock, 2, 1, args + ["--restore", d], save_weights(rtag)), "restored")
    bed.wait(f, 30, "%s: the feeder" % tag)
    for w, o in enumerate(outs):
        if o["restored_step"] != newest[0] or o["weights_hash"] != ref_hash or weights_bytes(rtag, w) != ref_weights \
                or o["stopped_by"] is not None:
            fail("%s: worker %d restored step %d and ended with weights %s, the uninterrupted run with %s (stopped "
                 "at %r)" % (tag, w, o["restored_step"], o["weights_hash"], ref_hash, newest))
    ok("2 x 1: SIGTERM to worker 1 only: both stopped after step %d (%.2f s, exit 143; worker 0 by another worker's "
       "signal), restored: the same weights %s" % (newest[0], took, ref_hash))


def trace_lines(path, below=None):
    """The trace's piece lines as dicts (complete lines only: a killed run's
    last may be cut), those with seq < below when given."""
    out = []
    with open(path) as f:
        for line in f:
            if not line.endswith("\n"):
                break
            x = json.loads(line)
            if "summary" in x:
                continue
            if below is None or x["seq"] < below:
                out.append(x)
    return out


def model_none_traces():
    """--model none: killed trace (up to the checkpoint) + restored trace ==
    the uninterrupted trace, line for line."""
    none = ["--model", "none"]
    ref_tag = "none-ref"
    train(ref_tag, 1, 2, ["--trace", os.path.join(TMP, ref_tag + ".trace")], model=none)
    ref = trace_lines(os.path.join(TMP, ref_tag + ".trace"))
    if len(ref) != 2 * STEPS:
        fail("none: the uninterrupted trace has %d pieces, expected %d" % (len(ref), 2 * STEPS))
    done = 0
    for trial in range(20):
        if done == KILLS:
            break
        tag = "none-kill-%d" % trial
        d = os.path.join(TMP, tag + "-ckpt")
        every = rng.choice([1, 2, 5])
        target = rng.randrange(2, STEPS // 2)
        harness.case()
        f, sock = feeder(tag)
        args = ["--checkpoint", d, "--checkpoint-every", str(every)]
        t1 = os.path.join(TMP, tag + "-1.trace")
        procs = start(tag, sock, 1, 2, args + ["--trace", t1], model=none)
        if not kill_at(procs, d, target):
            bed.wait(f, 30, "%s: the feeder" % tag)
            continue  # too fast for this target: another one
        t2 = os.path.join(TMP, tag + "-2.trace")
        rtag = tag + "-restored"
        o = summaries(rtag, start(rtag, sock, 1, 2, args + ["--restore", d, "--trace", t2], model=none), "restored")[0]
        bed.wait(f, 30, "%s: the feeder" % tag)
        seq = 2 * o["restored_step"]
        joined = trace_lines(t1, below=seq) + trace_lines(t2)
        if joined != ref:
            diff = next((i for i, (a, b) in enumerate(zip(joined, ref)) if a != b), min(len(joined), len(ref)))
            fail("%s: the killed and restored traces (restored at seq %d) differ from the uninterrupted one at "
                 "piece %d: %r against %r (seed %d)" % (tag, seq, diff, joined[diff:diff + 1], ref[diff:diff + 1],
                                                         SEED))
        done += 1
        ok("--model none, 1 x 2: killed after step %d (target %d, every %d): trace up to the checkpoint + restored "
           "trace == the uninterrupted trace (%d pieces)" % (o["restored_step"], target, every, len(ref)))
    if done < KILLS:
        fail("--model none: only %d of %d kills landed before the end" % (done, KILLS))


def flip(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x10]))


def damaged(base_dir, ref_hash):
    """Variants of a finished run's directory (steps 430, 440, 450)."""
    name = "ckpt-%012d.w0of1" % 450
    cases = [("flipped", lambda p: flip(p, os.path.getsize(p) // 2), "damaged (CRC-32C mismatch"),
             ("flipped-header", lambda p: flip(p, 60), "damaged (CRC-32C mismatch"),
             ("flipped-crc", lambda p: flip(p, os.path.getsize(p) - 1), "damaged (CRC-32C mismatch"),
             ("truncated", lambda p: os.truncate(p, os.path.getsize(p) // 2), "truncated ("),
             ("tiny", lambda p: os.truncate(p, 20), "truncated (20 bytes"),
             ("empty", lambda p: os.truncate(p, 0), "truncated (0 bytes"),
             ("extended", lambda p: open(p, "ab").write(b"\0" * 8), "longer than its header says"),
             ("magic", lambda p: flip(p, 0), "not a sluice checkpoint (bad magic"),
             ("version", lambda p: flip(p, 9), "checkpoint version 4099"),
             ("nparams", lambda p: flip(p, 127), "damaged header"),
             ("directory", lambda p: (os.unlink(p), os.mkdir(p)), "not a regular file (a directory)"),
             # issue #24 item 10: a FIFO hung the open until killed; a symlink said "Too many levels of symbolic links"
             ("fifo", lambda p: (os.unlink(p), os.mkfifo(p)), "not a regular file (a FIFO): refused"),
             ("symlink", lambda p: (os.rename(p, p + ".real"), os.symlink(p + ".real", p)),
              "a symbolic link: refused (checkpoints are never read through symlinks")]
    for what, damage, text in cases:
        tag = "damaged-" + what
        d = os.path.join(TMP, tag)
        shutil.copytree(base_dir, d)
        damage(os.path.join(d, name))
        harness.case()
        refused(tag, ["--restore", d], "--restore: %s/%s: %s" % (d, name, text))
        if "give --restore-step 440 to continue from it" not in read_log(tag, "trainer0"):
            fail("%s: the refusal does not name the previous step: %s" % (tag, read_log(tag, "trainer0")[-800:]))
        ok("a damaged newest checkpoint (%s) is refused naming the file and step 440" % what)
    # a directory named like this worker's temporary is left in place, not
    # "unlink(...): Is a directory" (issue #24 item 10): the run goes on to
    # its next check (here: a fresh run into a directory holding checkpoints)
    tag = "tmp-directory"
    d = os.path.join(TMP, tag)
    shutil.copytree(base_dir, d)
    odd = os.path.join(d, ".ckpt-000000000460.w0of1.abcDEF123456.tmp")
    os.mkdir(odd)
    harness.case()
    refused(tag, ["--checkpoint", d], "--checkpoint %s already holds 3 checkpoint(s) of worker 0 of 1" % d)
    want = "checkpoint: %s is a directory, not a file this trainer wrote: left in place (remove it by hand)" % odd
    if want not in read_log(tag, "trainer0") or not os.path.isdir(odd):
        fail("%s: expected %r: %s" % (tag, want, read_log(tag, "trainer0")[-800:]))
    ok("a directory named like a temporary is left in place with a warning")
    # the explicit choice: the previous step, and the same final weights
    tag = "damaged-flipped-step"
    o = train(tag, 1, 1, ["--restore", os.path.join(TMP, "damaged-flipped"), "--restore-step", "440"])[0]
    if o["restored_step"] != 440 or o["steps"] != 10 or o["weights_hash"] != ref_hash:
        fail("%s: restored %d, trained %d steps, weights %s (expected 440, 10, %s)"
             % (tag, o["restored_step"], o["steps"], o["weights_hash"], ref_hash))
    ok("--restore-step 440 past a damaged step 450: the same final weights")
    # a command line the checkpoint was not made for
    for what, args, text in [
            ("hidden", ["--hidden", "32"], "made with hidden sizes '16', the command line has '32'"),
            ("classes", ["--classes", "12"], "made with --classes 10, the command line has --classes 12"),
            ("model", ["--model", "softmax"], "made with --model mlp, the command line has --model softmax"),
            ("replicas", ["--devices", "cpu:2"], "made with 1 replicas, the command line has 2"),
            ("job", ["--job", "other"], "made for job 'ck', not 'other'"),
            ("mode", ["--mode", "tower"], "made with --mode mirrored, the command line has --mode tower")]:
        tag = "mismatch-" + what
        harness.case()
        refused(tag, ["--restore", base_dir] + args, "%s/%s: %s" % (base_dir, name, text))
        ok("a checkpoint made for another %s is refused, naming the file" % what)
    tag = "mismatch-workers"
    harness.case()
    p = spawn([TRAINER, "--connect", "ipc://%s/nobody.sock" % TMP, "--job", "ck", "--worker", "0", "--workers", "2",
               "--ring", "ipc://%s/r0,ipc://%s/r1" % (TMP, TMP), "--restore", base_dir] + MODEL,
              log=bed.log_path(tag, "trainer0"))
    rc = bed.wait(p, 30, tag)
    want = "ckpt-000000000450.w0of1 was taken with 1 workers x 1 replicas at step 150 of 150 of epoch 2; this " \
        "run has 2 x 1: give --reshape"
    if rc != 1 or want not in read_log(tag, "trainer0"):
        fail("%s: %d %s" % (tag, rc, read_log(tag, "trainer0")[-600:]))
    ok("--workers 2 against 1-worker checkpoints: refused without --reshape, naming one of them and where it stands")


def options(ref_hash):
    d0 = os.path.join(TMP, "opt-every0")
    for every, dirname, expect in [("0", "opt-every0", [150, 300, 450]), ("4294967295", "opt-huge", [150, 300, 450])]:
        harness.case()
        o = train(dirname, 1, 1, ["--checkpoint", os.path.join(TMP, dirname), "--checkpoint-every", every])[0]
        got = ckpt_steps(os.path.join(TMP, dirname), 0, 1)
        if got != expect or o["checkpoints"] != 3 or o["weights_hash"] != ref_hash:
            fail("--checkpoint-every %s: steps %r, %d written (expected %r)" % (every, got, o["checkpoints"], expect))
        ok("--checkpoint-every %s: a checkpoint after each epoch's last step only: %r" % (every, got))
    for args, expect, what in [(["--checkpoint-every", "5", "--checkpoint-every", "50"], [350, 400, 450],
                                "repeated --checkpoint-every: the last wins"),
                               (["--checkpoint-every", "10", "--keep", "2"], [440, 450], "--keep 2"),
                               (["--checkpoint-every", "10"], [430, 440, 450], "--keep absent: 3"),
                               (["--checkpoint-every", "10", "--keep", "1000000"], list(range(10, 451, 10)) + [],
                                "--keep 1000000 keeps all 45")]:
        tag = "opt-%d" % RUN[0]
        RUN[0] += 1
        harness.case()
        d = os.path.join(TMP, tag)
        train(tag, 1, 1, ["--checkpoint", d] + args)
        expect = sorted(set(expect + ([150, 300] if "1000000" in args else [])))
        got = ckpt_steps(d, 0, 1)
        if got != expect or any(n.endswith(".tmp") for n in os.listdir(d)):
            fail("%s: %r in %s, expected %r" % (what, os.listdir(d), d, expect))
        ok("%s: %r" % (what, got if len(got) < 6 else "%d files" % len(got)))
    for args, text in [(["--checkpoint", d0, "--checkpoint-every", "-1"], "checkpoint-every"),
                       (["--checkpoint", d0, "--checkpoint-every", "4294967296"], "checkpoint-every"),
                       (["--checkpoint", d0, "--checkpoint-every", "ten"], "checkpoint-every"),
                       (["--checkpoint", d0, "--keep", "0"], "keep"),
                       (["--checkpoint", d0, "--keep", "-3"], "keep"),
                       (["--checkpoint", d0, "--keep", "1000001"], "keep"),
                       (["--checkpoint-every", "5"], "--checkpoint-every needs --checkpoint DIR"),
                       (["--keep", "5"], "--keep needs --checkpoint DIR"),
                       (["--restore-step", "5"], "--restore-step needs --restore DIR"),
                       (["--restore", d0, "--restore-step", "-5"], "restore-step"),
                       (["--restore", d0, "--restore-step", "281474976710657"], "restore-step"),
                       (["--checkpoint", ""], "--checkpoint: an empty directory name"),
                       (["--restore", ""], "--restore: an empty directory name")]:
        tag = "usage-%d" % RUN[0]
        RUN[0] += 1
        harness.case()
        refused(tag, args, text, code=2)
    ok("usage errors (exit 2): --checkpoint-every -1 / 2^32 / ten, --keep 0 / -3 / 1000001, --restore-step -5 / "
       "2^48+1, options without their directory, empty names")
    empty = os.path.join(TMP, "empty-dir")
    os.mkdir(empty)
    harness.case()
    refused("restore-empty", ["--restore", empty], "--restore %s: no checkpoint of worker 0 of 1" % empty)
    refused("restore-missing", ["--restore", empty + "-no"], "--restore: opendir(%s-no): No such file" % empty)
    refused("restore-step-missing", ["--restore", d0, "--restore-step", "7"],
            "--restore: open(%s/ckpt-000000000007.w0of1): No such file" % d0)
    refused("fresh-into-full", ["--checkpoint", d0],
            "--checkpoint %s already holds 3 checkpoint(s) of worker 0 of 1 (the newest: step 450)" % d0)
    open(os.path.join(TMP, "a-file"), "w").close()
    refused("checkpoint-file", ["--checkpoint", os.path.join(TMP, "a-file")], "not a directory")
    ok("--restore on an empty or missing directory or a missing step, a fresh run into a full directory, "
       "--checkpoint on a file: clear errors")


def workers_disagree(ref_hash):
    """2 x 2 workers whose newest checkpoints differ."""
    tag = "agree-base"
    base = os.path.join(TMP, tag)
    harness.case()
    train(tag, 2, 2, ["--checkpoint", base, "--checkpoint-every", "10"])
    d = os.path.join(TMP, "agree-1")
    shutil.copytree(base, d)
    os.unlink(os.path.join(d, "ckpt-000000000450.w1of2"))
    tag = "agree-run"
    harness.case()
    outs = train(tag, 2, 2, ["--restore", d], save_weights(tag))
    if [o["restored_step"] for o in outs] != [440, 440] or {o["weights_hash"] for o in outs} != {ref_hash}:
        fail("%s: restored %r, weights %r (expected 440 and %s)" % (tag, [o["restored_step"] for o in outs],
                                                                     [o["weights_hash"] for o in outs], ref_hash))
    if "worker 1's newest checkpoint is step 440, this worker's step 450: every worker continues from step 440" \
            not in read_log(tag, "trainer0"):
        fail("%s: worker 0 did not log the step it gave up: %s" % (tag, read_log(tag, "trainer0")[-800:]))
    ok("2 x 2: worker 1's newest is 440, worker 0's 450: both continue from 440 (logged), the same weights")
    d = os.path.join(TMP, "agree-2")
    shutil.copytree(base, d)
    os.unlink(os.path.join(d, "ckpt-000000000450.w1of2"))
    os.unlink(os.path.join(d, "ckpt-000000000440.w0of2"))
    tag = "agree-fail"
    harness.case()
    f, sock = feeder(tag)
    procs = start(tag, sock, 2, 2, ["--restore", d])
    summaries(tag, procs, "expected to fail", codes=(1,))
    for w in range(2):
        if "the workers' newest checkpoints are step 440 (worker 1) and step 450 (worker 0)" not in \
                read_log(tag, "trainer%d" % w):
            fail("%s: worker %d does not name both steps: %s" % (tag, w, read_log(tag, "trainer%d" % w)[-800:]))
    if "ckpt-000000000440.w0of2): No such file" not in read_log(tag, "trainer0"):
        fail("%s: worker 0 does not name its missing file: %s" % (tag, read_log(tag, "trainer0")[-800:]))
    f.kill()
    bed.wait(f, 30, "feeder")
    ok("2 x 2: worker 0 lacks step 440: both fail naming steps 440 and 450 and the missing file")


def kill_during_write():
    """SIGKILL while a checkpoint is being written (a larger model, so the
    write takes a while): the temporary left is removed by the restore,
    which is exact."""
    big = ["--model", "mlp", "--hidden", "256,256", "--classes", "10", "--lr", "0.01", "--momentum", "0.9",
           "--seed", "7", "--input", "image", "--label", "label"]
    ref = train("write-ref", 1, 1, model=big)[0]["weights_hash"]
    for trial in range(10):
        tag = "write-kill-%d" % trial
        d = os.path.join(TMP, tag + "-ckpt")
        harness.case()
        f, sock = feeder(tag)
        args = ["--checkpoint", d, "--checkpoint-every", "1"]
        procs = start(tag, sock, 1, 1, args, model=big)
        # a first checkpoint, then the next temporary
        kill_at(procs, d, 0, poll_tmp=True)
        temps = [n for n in os.listdir(d) if n.endswith(".tmp")]
        if not temps:
            f.kill()
            bed.wait(f, 30, "feeder")
            continue
        rtag = tag + "-restored"
        o = summaries(rtag, start(rtag, sock, 1, 1, ["--restore", d], model=big), "restored")[0]
        bed.wait(f, 30, "%s: the feeder" % tag)
        log = read_log(rtag, "trainer0")
        if "removed 1 temporary file(s) of worker 0 of 1" not in log or \
                any(n.endswith(".tmp") for n in os.listdir(d)) or o["weights_hash"] != ref:
            fail("%s: temporary %r: %s; weights %s, expected %s" % (tag, temps, log[-600:], o["weights_hash"], ref))
        ok("killed while writing a checkpoint (%s left): removed at restore, step %d restored, the same weights"
           % (temps[0], o["restored_step"]))
        return
    fail("no kill landed during a checkpoint's write in 10 tries")


def main():
    refs = {}
    for W, R in ((1, 1), (2, 2)):
        tag = "ref-%dx%d" % (W, R)
        harness.case()
        outs = train(tag, W, R, per_worker=save_weights(tag))
        hashes = {o["weights_hash"] for o in outs}
        if len(hashes) != 1 or any(o["steps"] != STEPS for o in outs):
            fail("%s: %r" % (tag, outs))
        refs[(W, R)] = (hashes.pop(), weights_bytes(tag, 0))
        ok("%d x %d uninterrupted: %d steps, weights %s" % (W, R, STEPS, refs[(W, R)][0]))
    for (W, R), (h, wb) in refs.items():
        for trial in range(KILLS):
            kill_and_restore(W, R, h, wb, trial)
    for (W, R), (h, wb) in refs.items():
        preempted(W, R, h, wb)
    preempted_one()
    model_none_traces()
    options(refs[(1, 1)][0])
    damaged(os.path.join(TMP, "opt-2"), refs[(1, 1)][0])
    workers_disagree(refs[(2, 2)][0])
    kill_during_write()
    bed.finish()


main()
