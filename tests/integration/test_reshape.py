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
checkpoint of another shape without --reshape, or not at an epoch's end.

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
    """The trainer's own: another shape's checkpoint without --reshape, or
    one not at an epoch's end; --resume-epoch with --restore."""
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
    refused_trainer(tag, ep, job, 2, 1, ["--restore", mid, "--restore-step", "7", "--reshape"],
                    "was taken with 1 workers x 1 replicas at step 7 of %d of epoch 0; this run has 2 x 1: with "
                    "another shape sluice continues only from an epoch's start" % step)
    refused_trainer(tag, ep, job, 2, 1, ["--restore", d, "--resume-epoch", "1"],
                    "--resume-epoch: --restore's checkpoint gives where to continue")
    f.kill()
    wait(f, 10, "%s: the feeder" % tag)
    ok("the trainer refuses another shape's checkpoint without --reshape, one taken mid-epoch (step 7), and "
       "--resume-epoch with --restore, each saying why")


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
# torch): argv[1] the job, argv[2] the feeder. Two sluice.torch datasets
# (2 x 1) take epoch 0 and save their states at its end; a state saved
# mid-epoch is refused by a 3 x 1 reader; three datasets (3 x 1) load the
# epoch-end states (worker w of 3 takes worker w % 2's) and take the rest.
# Prints {"old": [[ids of epoch 0] per worker], "new": [[[ids] per epoch
# 1..] per worker], "refused": text}.
TORCH_CLIENT = r"""
import json, sys
import sluice.torch
job, ep = sys.argv[1], sys.argv[2]
def ds(w, W):
    return sluice.torch.IterableDataset([ep], job, worker=w, workers=W, heartbeat_ms=200, timeout_ms=5000)
old, states = [], []
for w in range(2):
    d = ds(w, 2)
    ids = []
    for b in d:
        ids += [int(x) for x in b["id"]]
        if w == 0 and len(states) == 0 and d.position == 3:
            mid = d.state_dict()
            states.append(None)
    states[w:w + 1] = [d.state_dict()]
    old.append(ids)
    d.close()
refused = ""
try:
    ds(0, 3).load_state_dict(mid)
except ValueError as e:
    refused = str(e)
news = [ds(w, 3) for w in range(3)]
for w, d in enumerate(news):
    d.load_state_dict(states[w % 2])
new = [[] for _ in range(3)]
while True:
    got = False
    for w, d in enumerate(news):
        ids = []
        for b in d:
            ids += [int(x) for x in b["id"]]
        if ids:
            got = True
            new[w].append(ids)
    if not got:
        break
for d in news:
    d.close()
print(json.dumps({"old": old, "new": new, "refused": refused}))
"""


def python_case():
    """sluice.torch: load_state_dict of another workers count at an epoch's end, refused mid-epoch."""
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
    # goodbyes at epoch 0's end come before their END, so the feeder waits
    f, ep = feeder(tag, job_path, ["--piece-memory", "1000000"])
    p = subprocess.run([py, "-c", TORCH_CLIENT, job["name"], ep], capture_output=True, text=True, env=env,
                       timeout=120)
    if p.returncode != 0:
        fail("%s: the Python program failed:\n%s" % (tag, p.stderr[-3000:]))
    out = json.loads(p.stdout.strip().splitlines()[-1])
    if wait(f, 30, "%s: the feeder" % tag) != 0:
        fail("%s: the feeder did not exit 0" % tag)
    counts = [len(x) for x in IDS]
    for W, got, epochs in ((2, out["old"], [0]), (3, out["new"], range(1, EPOCHS))):
        ref = bed.reference(job, counts, W, 1)
        for w in range(W):
            exp = [[IDS[fi][r] for x in ref[w] if x["epoch"] == e for fi, r in x["elems"]] for e in epochs]
            have = [got[w]] if W == 2 else got[w]
            if have != exp:
                fail("%s: %d workers, worker %d: the ids per epoch differ from the reference's:\n  got  %s\n  "
                     "want %s" % (tag, W, w, have, exp))
    want = "the state was saved with 2 workers x 1 replicas at step 3 of 30 of epoch 0; with 3 workers x 1 " \
        "replicas sluice continues only from an epoch's start"
    if want not in out["refused"]:
        fail("%s: the mid-epoch state: expected %r, got %r" % (tag, want, out["refused"]))
    if "cluster shape 2 x 1 -> 3 x 1 at epoch 1" not in read_log(tag, "feeder"):
        fail("%s: the feeder did not reshape:\n%s" % (tag, read_log(tag, "feeder")[-1500:]))
    ok("sluice.torch: 2 x 1 datasets' states at epoch 0's end loaded by 3 x 1 datasets (load_state_dict: resume by "
       "epoch with reshape), ids equal the reference's per shape; a state saved mid-epoch refused")


IDS = ids_of_files()
reshape_case("w2-w3-restore", 2, 1, 3, 1, "restore")
reshape_case("w3r1-w2r2-epoch", 3, 1, 2, 2, "epoch")
trainer_refusals()
raw_refusals()
python_case()
bed.cleanup()
bed.finish()
