#!/usr/bin/env python3
"""A map job's stream is exact whatever serves it (issue #27 section 4),
on real processes: the ImageFolder tree of test_map_images.py (40 JPEGs
and PNGs, RGB and gray, 40-150 px, made with PIL) converted with
`sluice-record convert images`, served by sluice-feeder with the map
decode_image -> random_resized_crop(24x20) -> random_flip ->
normalize(CHW), shuffled and reshuffled each epoch, 4 epochs, to the
Python client (sluice.Client, 1 worker of 2 replicas).

A trace has one line per element: epoch, step, seq, replica, id, the
dtype and shape of its image and the sha256 of its float32 bytes, and one
line per step with the client's position after it. Every trace below must
equal, line for line, the trace of an undisturbed run with one feeder:

1. F = 2 feeders of 1 thread and F = 3 of 2 (the reference: 1 of 2).
2. F = 3, feeder 1 killed (SIGKILL) mid-epoch, its share taken over by a
   survivor (the client's takeover_ms): the survivor's crops and flips of
   the lost share are the lost feeder's; and feeders 2 and 0 killed one
   after the other, feeder 1 the last survivor.
3. The client killed (SIGKILL) mid-epoch and a new one started with
   resume_seq = the last position it wrote (its "checkpoint"): from the
   same two feeders still running, and from three fresh feeders; the
   killed run's trace up to that position and the resumed run's trace are
   the undisturbed trace's head and tail.
4. sluice-trainer --model none --checkpoint killed (SIGKILL) mid-epoch
   and restored (--restore) from the same feeders: its pieces (epoch,
   step, replica, seq, ids) are the undisturbed client's.
5. A job with cache_bytes and a map: the feeder logs that the cache is off
   (docs/map.md) and serves the same trace, new draws each epoch.

Usage: test_map_exact.py BUILD_DIR [FEEDER_BUILD_DIR]
  (the Python package from BUILD_DIR; sluice-feeder, sluice-trainer and
  sluice-record from FEEDER_BUILD_DIR when given, e.g. an ASan build, which has no package)
"""
import glob
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
from harness import fail, ok, spawn  # noqa: E402

import test_map_images as images  # noqa: E402  (exits 77 without numpy or PIL)

EPOCHS, G, R = 4, 4, 2
PACE_S = 0.03  # a paced client's pause after each step, so a kill lands mid-stream

# One line per element and one per step (its position), flushed per step so
# that a killed client's file holds whole steps up to its last position.
CLIENT = r"""
import hashlib, json, sys, time
import sluice
job, eps, opts, pace, out = sys.argv[1], sys.argv[2].split(","), json.loads(sys.argv[3]), float(sys.argv[4]), \
    sys.argv[5]
with open(out, "w") as f, sluice.Client(eps, job, **opts) as c:
    for s in c:
        lines = []
        for r, rep in enumerate(s.replicas):
            img, ids = rep["image"], rep["id"]
            for i in range(len(ids)):
                x = img[i]
                lines.append("%d %d %d %d %d %s:%s %s\n" % (s.epoch, s.step, s.seq, r, int(ids[i]), x.dtype,
                                                           "x".join(map(str, x.shape)),
                                                           hashlib.sha256(x.tobytes()).hexdigest()))
        lines.append("P %d\n" % c.position)
        f.write("".join(lines))
        f.flush()
        if pace > 0:
            time.sleep(pace)
"""

CLIENT_OPTS = {"replicas": R, "heartbeat_ms": 200, "timeout_ms": 2000, "takeover_ms": 500, "credits": 2}


def job_for(name, files, **extra):
    job = {"name": name, "files": files, "format": "tfrecord", "global_batch_size": G, "epochs": EPOCHS,
           "prefetch": 2, "shuffle": {"buffer": 16, "seed": images.SEED, "reshuffle_each_epoch": True},
           "features": {"image": {"dtype": "bytes", "shape": []}, "id": {"dtype": "int64", "shape": []},
                        "label": {"dtype": "int64", "shape": []}},
           "map": [{"op": "decode_image", "feature": "image", "channels": 3},
                   {"op": "random_resized_crop", "feature": "image", "size": [images.OUT_H, images.OUT_W]},
                   {"op": "random_flip", "feature": "image"},
                   {"op": "normalize", "feature": "image", "mean": images.MEAN, "std": images.STD,
                    "layout": "CHW"}]}
    job.update(extra)
    path = os.path.join(bed.TMP, name + ".json")
    with open(path, "w") as f:
        json.dump(job, f)
    return path


def feeders(tag, job_path, F, tag_suffix="", threads=2):
    """F feeders over ipc, each up and serving. Returns (procs, endpoints)."""
    eps = ["ipc://%s/%s-%d.sock" % (bed.TMP, tag, j) for j in range(F)]
    procs = [spawn([bed.FEEDER, "--job", job_path, "--listen", eps[j], "--feeder-index", str(j), "--feeders", str(F),
                    "--threads", str(threads), "--heartbeat-ms", "200", "--timeout-ms", "3000"],
                   log=bed.log_path(tag, "feeder%d%s" % (j, tag_suffix))) for j in range(F)]
    for j in range(F):
        bed.wait_for_log(tag, "feeder%d%s" % (j, tag_suffix), "serving job", procs[j],
                         "%s: feeder %d did not start" % (tag, j), timeout=60)
    return procs, eps


def client(tag, who, job_path, eps, pace=0.0, **opts):
    """The client process; its trace goes to TMP/tag-who.trace, its log
    (stderr: the library's warnings) to tag-who.log."""
    with open(job_path) as f:
        name = json.load(f)["name"]
    env = dict(os.environ, PYTHONPATH=os.path.join(bed.BUILD, "python"), PYTHONDONTWRITEBYTECODE="1")
    out = os.path.join(bed.TMP, "%s-%s.trace" % (tag, who))
    p = spawn(["/usr/bin/python3", "-c", CLIENT, name, ",".join(eps), json.dumps(dict(CLIENT_OPTS, **opts)),
               str(pace), out], log=bed.log_path(tag, who), env=env)
    return p, out


def steps_of(path):
    """A trace's whole steps: [[element lines..., "P n"], ...] (a killed
    client's partial last step left out)."""
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:  # not made yet
        return []
    steps, cur = [], []
    for line in text.splitlines(keepends=True):
        if not line.endswith("\n"):
            break
        cur.append(line[:-1])
        if line.startswith("P "):
            steps.append(cur)
            cur = []
    return steps


def finish_client(tag, who, p, out, timeout=120):
    code = bed.wait(p, timeout, "%s: the client" % tag)
    if code != 0:
        fail("%s: the client exited %d:\n%s" % (tag, code, bed.read_log(tag, who)[-3000:]))
    return steps_of(out)


def finish_feeders(tag, procs, skip=()):
    for j, p in enumerate(procs):
        code = bed.wait(p, 30, "%s: feeder %d" % (tag, j))
        if j not in skip and code != 0:
            fail("%s: feeder %d exited %d" % (tag, j, code))


def check_same(tag, got, ref, first=0):
    """got must be ref's steps from `first` on, line for line."""
    want = ref[first:]
    for k, (g, w) in enumerate(zip(got, want)):
        if g != w:
            for a, b in zip(g, w):
                if a != b:
                    fail("%s: step %d differs from the undisturbed run:\n  got  %s\n  want %s" % (tag, first + k, a, b))
            fail("%s: step %d has %d lines, the undisturbed run's %d" % (tag, first + k, len(g), len(w)))
    if len(got) != len(want):
        fail("%s: %d steps, the undisturbed run %d" % (tag, len(got), len(want)))


def wait_steps(tag, out, proc, n):
    """Until the trace holds n whole steps."""
    deadline = time.time() + 60
    while len(steps_of(out)) < n:
        if proc.poll() is not None or time.time() > deadline:
            fail("%s: the client ended or stalled before step %d (exit %s)" % (tag, n, proc.poll()))
        time.sleep(0.005)


def reference(job, n_images):
    harness.case()
    procs, eps = feeders("ref", job, 1)
    p, out = client("ref", "client", job, eps)
    ref = finish_client("ref", "client", p, out)
    finish_feeders("ref", procs)
    # every image once per epoch, float32 [3, 24, 20], new draws each epoch
    per_epoch = {}
    shape = "float32:3x%dx%d" % (images.OUT_H, images.OUT_W)
    for step in ref:
        for line in step[:-1]:
            ep, _, _, _, i, sh, h = line.split()
            if sh != shape:
                fail("ref: element %s of epoch %s is %s, want %s" % (i, ep, sh, shape))
            per_epoch.setdefault(int(ep), {})[int(i)] = h
    if sorted(per_epoch) != list(range(EPOCHS)) or any(sorted(v) != list(range(n_images))
                                                       for v in per_epoch.values()):
        fail("ref: not every image once per epoch: %s" % {e: len(v) for e, v in per_epoch.items()})
    same = sum(per_epoch[0][i] == per_epoch[e][i] for e in range(1, EPOCHS) for i in range(n_images))
    if same > 3:
        fail("ref: %d of %d elements repeat epoch 0's draw: the draws do not change with the epoch"
             % (same, (EPOCHS - 1) * n_images))
    ok("undisturbed, F=1: %d steps, %d elements of %d epochs, float32 [3, %d, %d], %d of %d repeat epoch 0's "
       "output" % (len(ref), EPOCHS * n_images, EPOCHS, images.OUT_H, images.OUT_W, same,
                   (EPOCHS - 1) * n_images))
    return ref


def more_feeders(job, ref):
    for F in (2, 3):
        harness.case()
        tag = "f%d" % F
        procs, eps = feeders(tag, job, F, threads=F - 1)
        p, out = client(tag, "client", job, eps)
        check_same(tag, finish_client(tag, "client", p, out), ref)
        finish_feeders(tag, procs)
    ok("F=2 (1 thread each) and F=3 (2 threads each): traces equal F=1's, every element's sha256 included")


def takeover(job, ref, victims):
    """F = 3; the victims killed one after the other, the first once the
    client has 1.5 epochs' steps, the next 7 steps later."""
    harness.case()
    tag = "takeover-" + "".join(map(str, victims))
    procs, eps = feeders(tag, job, 3)
    p, out = client(tag, "client", job, eps, pace=PACE_S)
    per_epoch = len(ref) // EPOCHS
    at = []
    for k, j in enumerate(victims):
        wait_steps(tag, out, p, per_epoch + per_epoch // 2 + k * (per_epoch // 2 + 2))
        procs[j].send_signal(signal.SIGKILL)
        at.append(len(steps_of(out)))
    got = finish_client(tag, "client", p, out)
    check_same(tag, got, ref)
    log = bed.read_log(tag, "client")
    pieces = EPOCHS * per_epoch * R
    said = []
    for j in victims:
        m = re.search(r"feeder (\S+) took over feeder %s's share [^:]*: resuming at piece (\d+)" % re.escape(eps[j]),
                      log)
        if m is None:
            fail("%s: the client's log shows no takeover of feeder %d's share:\n%s" % (tag, j, log[-2000:]))
        piece = int(m.group(2))
        if not 0 < piece < pieces:
            fail("%s: the takeover of feeder %d's share resumed at piece %d of %d" % (tag, j, piece, pieces))
        said.append("feeder %d's at piece %d by feeder %d" % (j, piece, eps.index(m.group(1))))
    finish_feeders(tag, procs, skip=victims)
    ok("F=3, feeder%s %s killed at step%s %s (%s of %d steps per epoch): shares taken over (%s, of %d pieces); the "
       "trace equals the undisturbed run's" % ("s" if len(victims) > 1 else "", victims, "s" if len(at) > 1 else "",
                                               at, ", ".join("epoch %d step %d" % divmod(a, per_epoch) for a in at),
                                               per_epoch, "; ".join(said), pieces))


def resume(job, ref, fresh):
    """The client killed mid-epoch, a new one from its last position: from
    the same 2 feeders (still running), or from 3 fresh ones."""
    harness.case()
    tag = "resume-fresh" if fresh else "resume"
    procs, eps = feeders(tag, job, 2)
    p, out = client(tag, "client", job, eps, pace=PACE_S)
    per_epoch = len(ref) // EPOCHS
    wait_steps(tag, out, p, 2 * per_epoch + per_epoch // 2 + (1 if fresh else 0))
    p.send_signal(signal.SIGKILL)
    p.wait()
    head = steps_of(out)
    pos = int(head[-1][-1].split()[1])
    check_same(tag + " (the killed run)", head, ref[:len(head)])
    if fresh:
        for q in procs:
            q.kill()
            q.wait()
        procs, eps = feeders(tag, job, 3, tag_suffix="-again")
    p, out = client(tag, "client-again", job, eps, resume_seq=pos)
    tail = finish_client(tag, "client-again", p, out)
    check_same(tag + " (the resumed run)", tail, ref, first=len(head))
    finish_feeders(tag, procs)
    ok("the client killed at step %d (epoch %d, step %d; position %d) and resumed with resume_seq=%d from %s: "
       "%d steps before and %d after, together the undisturbed trace" %
       (len(head), len(head) // per_epoch, len(head) % per_epoch, pos, pos,
        "3 fresh feeders" if fresh else "the same 2 feeders", len(head), len(tail)))


def trainer_trace(path, below=None):
    """sluice-trainer's --trace: (epoch, step, replica, seq, ids) per piece
    (whole lines; seq < below only, when given)."""
    out = []
    with open(path) as f:
        for line in f:
            if not line.endswith("\n"):
                break
            x = json.loads(line)
            if "summary" not in x and (below is None or x["seq"] < below):
                out.append((x["epoch"], x["step"], x["replica"], x["seq"], x["ids"]))
    return out


def c_trainer(job, ref):
    """sluice-trainer --model none --checkpoint, killed (SIGKILL) mid-epoch
    and started again with --restore against the same feeders: its traces
    up to the checkpoint and after the restore are the undisturbed run's
    pieces (the ids; its trace carries no tensor bytes: the client above
    shows the bytes follow the position). The trainer's 64 credits let both
    feeders send their END before the kill, and the restored trainer starts
    only once both have dropped the killed one's connection: a feeder
    waits --timeout-ms for a trainer that had its END but said no BYE
    (before, it exited at once, and the restore found no feeder)."""
    harness.case()
    tag = "trainer"
    with open(job) as f:
        name = json.load(f)["name"]
    want = []
    for step in ref:
        pieces = {}
        for line in step[:-1]:
            ep, st, seq, r, i = map(int, line.split()[:5])
            pieces.setdefault(r, (ep, st, r, seq + r, []))[4].append(i)
        want += [pieces[r] for r in sorted(pieces)]
    ck = os.path.join(bed.TMP, tag + "-ckpt")
    per_epoch = len(ref) // EPOCHS
    target = per_epoch + per_epoch // 2 + 1
    procs, eps = feeders(tag, job, 2)

    def trainer(who, extra):
        trace = os.path.join(bed.TMP, "%s-%s.jsonl" % (tag, who))
        p = spawn([bed.TRAINER, "--connect", ",".join(eps), "--job", name, "--model", "none", "--devices",
                   "cpu:%d" % R, "--checkpoint", ck, "--checkpoint-every", "1", "--trace", trace, "--heartbeat-ms",
                   "200", "--timeout-ms", "5000"] + extra, log=bed.log_path(tag, who), stdout=subprocess.DEVNULL)
        return p, trace
    p, t1 = trainer("trainer", ["--step-ms", "%g" % (PACE_S * 1000)])
    deadline = time.time() + 60
    while not any(n.startswith("ckpt-") and int(n[5:17]) >= target for n in
                  (os.listdir(ck) if os.path.isdir(ck) else [])):
        if p.poll() is not None or time.time() > deadline:
            fail("%s: the trainer ended or stalled before its checkpoint of step %d (exit %s):\n%s"
                 % (tag, target, p.poll(), bed.read_log(tag, "trainer")[-2000:]))
        time.sleep(0.002)
    for j in range(2):
        bed.wait_for_log(tag, "feeder%d" % j, "worker 0: end of data", p, "%s: feeder %d sent no END" % (tag, j))
    p.send_signal(signal.SIGKILL)
    p.wait()
    for j in range(2):
        bed.wait_for_log(tag, "feeder%d" % j, "said no BYE: it may come back", None,
                         "%s: feeder %d did not drop the killed trainer" % (tag, j))
    step = max(int(n[5:17]) for n in os.listdir(ck) if n.startswith("ckpt-"))
    q, t2 = trainer("trainer-again", ["--restore", ck, "--connect-timeout", "20"])
    code = bed.wait(q, 120, "%s: the restored trainer" % tag)
    if code != 0:
        fail("%s: the restored trainer exited %d:\n%s" % (tag, code, bed.read_log(tag, "trainer-again")[-2000:]))
    finish_feeders(tag, procs)
    head = trainer_trace(t1, below=step * R)
    tail = trainer_trace(t2)
    if len(head) != step * R or head + tail != want:
        got = head + tail
        k = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        fail("%s: killed after its checkpoint of step %d: the traces differ from the client's undisturbed run at "
             "piece %d (%d + %d pieces, want %d): %s against %s" % (tag, step, k, len(head), len(tail), len(want),
                                                                   got[k:k + 1], want[k:k + 1]))
    ok("sluice-trainer --model none killed after its checkpoint of step %d (epoch %d, step %d), after the feeders' "
       "ENDs, and restored: its pieces (epoch, step, replica, seq, ids) are the client's undisturbed run's, %d before "
       "and %d after"
       % (step, step // per_epoch, step % per_epoch, len(head), len(tail)))


def cached(files, ref):
    harness.case()
    tag = "cache"
    job = job_for("imgs-cache", files, cache_bytes=1 << 20)
    procs, eps = feeders(tag, job, 2)
    p, out = client(tag, "client", job, eps)
    check_same(tag, finish_client(tag, "client", p, out), ref)
    finish_feeders(tag, procs)
    for j in range(2):
        if "cache_bytes: the job has a map: the decoded-element cache is off" not in bed.read_log(tag, "feeder%d" % j):
            fail("%s: feeder %d does not say the cache is off:\n%s" % (tag, j, bed.read_log(tag, "feeder%d" % j)))
    ok("cache_bytes with a map: each feeder logs that the cache is off; the trace equals the undisturbed run's "
       "(new draws each epoch)")


def main():
    bed.setup(sys.argv[1], "map-exact")
    if len(sys.argv) > 2:
        bed.use_binaries(sys.argv[2])
    version = subprocess.run([bed.FEEDER, "--version"], capture_output=True, text=True).stdout
    print("# %s (%s)" % (bed.FEEDER, re.search(r"build type: (.*)", version).group(1)))
    try:
        tree = os.path.join(bed.TMP, "tree")
        paths = images.make_tree(tree)
        shards = os.path.join(bed.TMP, "shards")
        subprocess.run([bed.RECORD, "convert", "images", "--output-dir", shards, "--shards", "3", tree],
                       check=True, capture_output=True)
        files = sorted(glob.glob(os.path.join(shards, "*.tfrecord")))
        job = job_for("imgs", files)
        ref = reference(job, len(paths))
        more_feeders(job, ref)
        takeover(job, ref, [1])
        takeover(job, ref, [2, 0])
        resume(job, ref, fresh=False)
        resume(job, ref, fresh=True)
        c_trainer(job, ref)
        cached(files, ref)
    finally:
        harness.stop_all()
    bed.finish()
    bed.cleanup()


if __name__ == "__main__":
    main()
