#!/usr/bin/env python3
"""The feeder's side of a change of the cluster shape mid-epoch
(docs/semantics.md 5.2, docs/protocol.md "Reshape mid-epoch"), over raw
HELLOs (python3-zmq; exit 77 without it): a feeder whose first HELLO carries
a transition serves each new worker the transition's stream (every piece's
epoch, step, seq, LAST_STEP flag and record ids equal to ref_plan's
transition_pieces; a resume_seq inside the transition gives its tail), a
granted RESHAPE with a transition in a later epoch does too, and every
refusal of the feeder's rules comes with its exact reason.

Usage: test_transition_feeder.py BUILD_DIR
"""
import json
import os
import struct
import subprocess
import sys
import time

try:
    import zmq
except ImportError:
    system = "/usr/bin/python3"
    if os.path.exists(system) and os.path.realpath(sys.executable) != os.path.realpath(system) and \
            not os.environ.get("SLUICE_TRANSITION_REEXEC"):
        os.environ["SLUICE_TRANSITION_REEXEC"] = "1"
        os.execv(system, [system] + sys.argv)
    print("# skipped: python3-zmq is not installed")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "plan"))
import bed  # noqa: E402
import harness  # noqa: E402
import ref_plan  # noqa: E402
import wire  # noqa: E402
from bed import read_log, wait, wait_for_log  # noqa: E402
from harness import fail, ok, spawn  # noqa: E402

bed.setup(sys.argv[1], "transition")
EPOCHS = 2
SHUFFLE = {"buffer": 10, "seed": 5}
RESHAPE, EPOCH, TRANSITION = 0x100, 0x80, 0x200
FILES = bed.gen("data", 48, 6)  # 8 records a file
CTX = zmq.Context()


def ids_of_files():
    """record (file, record) -> id, from sluice-record cat"""
    out = []
    for f in FILES:
        p = subprocess.run([bed.RECORD, "cat", "--decode", "example", f], check=True, capture_output=True, text=True)
        out.append([int(json.loads(x)["example"]["features"]["feature"]["id"]["int64List"]["value"][0])
                    for x in p.stdout.splitlines()])
    return out


IDS = ids_of_files()


def cfg(W, R):
    return ref_plan.normalize({"counts": [len(x) for x in IDS], "policy": "auto", "G": 8,
                               "shuffle_buffer": SHUFFLE["buffer"], "seed": SHUFFLE["seed"], "epochs": EPOCHS,
                               "W": W, "R": R})


def hello(worker, workers, replicas, x=None, flags=0, credits=4, job="job-tr", **kw):
    """A HELLO, with the trailing transition x = (W, R, epoch, step)."""
    msg = wire.hello(worker=worker, workers=workers, replicas=replicas, credits=credits,
                     flags=flags | (TRANSITION if x else 0), job=job, **kw)
    return msg + (struct.pack("<IIQQ", *x) if x else b"")


def feeder(tag, extra=(), name="job-tr", **keys):
    path, job = bed.write_job(name, FILES, epochs=EPOCHS, shuffle=SHUFFLE, **keys)
    sock = os.path.join(bed.TMP, tag + ".sock")
    f = spawn([bed.FEEDER, "--job", path, "--listen", "ipc://" + sock, "--threads", "2", "--heartbeat-ms", "200",
               "--timeout-ms", "5000"] + list(extra), log=bed.log_path(tag, "feeder"))
    wait_for_log(tag, "feeder", "serving job", f, "%s: the feeder did not start" % tag)
    return f, "ipc://" + sock


def connect(ep, msg):
    s = CTX.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(ep)
    s.send(msg)
    return s


def answer(s, timeout=10):
    """The first WELCOME or REFUSE on s: (kind, reason or header)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if not s.poll(int((deadline - time.time()) * 1000) + 1):
            break
        h = s.recv_multipart()[0]
        mtype = struct.unpack_from("<H", h, 6)[0]
        if mtype == wire.REFUSE:
            n = struct.unpack_from("<H", h, 8)[0]
            return "REFUSE", h[10:10 + n].decode()
        if mtype == wire.WELCOME:
            return "WELCOME", h
    return None, None


def refused(tag, ep, msg, want):
    s = connect(ep, msg)
    try:
        kind, why = answer(s)
    finally:
        s.close()
    if kind != "REFUSE" or why != want:
        fail("%s: expected a REFUSE saying\n  %r\ngot %s\n  %r" % (tag, want, kind, why))


def id_index(welcome):
    """The index of tensor 'id' in the WELCOME's schema."""
    n = struct.unpack_from("<H", welcome, 40)[0]
    off = 42
    for i in range(n):
        ln = struct.unpack_from("<H", welcome, off)[0]
        name = welcome[off + 2:off + 2 + ln].decode()
        rank = welcome[off + 4 + ln]
        if name == "id":
            return i
        off += 5 + ln + 8 * rank
    fail("no tensor 'id' in the WELCOME")


def stream(tag, ep, msg, bye=True):
    """Every piece the feeder sends to a HELLO until its END, a credit
    returned for each: [(epoch, step, seq, last_step, [ids])]. Without
    `bye` the connection closes without a BYE (the feeder then waits
    --end-wait-s for the worker instead of ending)."""
    s = connect(ep, msg)
    kind, welcome = answer(s)
    if kind != "WELCOME":
        fail("%s: expected a WELCOME, got %s %r" % (tag, kind, welcome))
    which = id_index(welcome)
    out = []
    deadline = time.time() + 30
    try:
        while time.time() < deadline:
            if not s.poll(int((deadline - time.time()) * 1000) + 1):
                break
            frames = s.recv_multipart()
            h = frames[0]
            mtype = struct.unpack_from("<H", h, 6)[0]
            if mtype == wire.END:
                if bye:
                    s.send(wire.bye())
                return sorted(out, key=lambda p: p[2])  # the feeder's threads finish pieces in any order
            if mtype != wire.PIECE:
                continue
            epoch, step, _worker, _replica, seq, rows, flags, nt = struct.unpack_from("<QQIIQIIH", h, 8)
            off, ids = 50, []
            for i in range(nt):
                rank = h[off + 1]
                nbytes, at = struct.unpack_from("<QQ", h, off + 2 + 8 * rank)
                if i == which and rows > 0:
                    ids = list(struct.unpack_from("<%dq" % rows, frames[1], at))
                off += 18 + 8 * rank
            out.append((epoch, step, seq, flags & 1, ids))
            s.send(wire.credit(1))
        fail("%s: no END within 30 s (%d pieces)" % (tag, len(out)))
    finally:
        s.close()


def want_stream(old, new, worker, e, t, start=0):
    """ref_plan's transition stream, as stream() gives it."""
    T, T2, R2 = ref_plan.epoch_steps(old), ref_plan.epoch_steps(new), new["R"]
    trans = (T - t) * R2
    out = []
    for k, piece in enumerate(ref_plan.transition_pieces(old, new, worker, e, t, EPOCHS)):
        if k < trans:
            epoch, step, steps = e, t + k // R2, T
        else:
            epoch, step, steps = e + 1 + (k - trans) // (T2 * R2), (k - trans) % (T2 * R2) // R2, T2
        if k >= start:
            out.append((epoch, step, k, int(step + 1 == steps), [IDS[f][r] for f, r in piece]))
    return out


def check_stream(tag, got, want):
    if got != want:
        for i, (g, w) in enumerate(zip(got + [None] * len(want), want + [None] * len(got))):
            if g != w:
                fail("%s: piece %d is %r, the reference model's %r (%d pieces, %d wanted)" %
                     (tag, i, g, w, len(got), len(want)))


def main():
    harness.case()
    tag = "first"
    f, ep = feeder(tag)
    old, new = cfg(2, 1), cfg(3, 1)
    T = ref_plan.epoch_steps(old)
    if T != 6 or ref_plan.epoch_steps(new) != 6:
        fail("the job's steps per epoch: %d and %d, the test expects 6" % (T, ref_plan.epoch_steps(new)))
    pre = "this trainer continues a change of the job's shape from %d x 1 to 3 x 1 at step %d of epoch %d, which " \
          "this feeder cannot serve: "
    refused(tag, ep, hello(0, 3, 1, (2, 1, 0, 6)), pre % (2, 6, 0) +
            "the change at step 6 of epoch 0 is not within that epoch: 2 x 1 take 6 steps per epoch, and a change "
            "mid-epoch comes at step 1..5 (at step 0 or 6, it is an epoch's start: resume by epoch)")
    refused(tag, ep, hello(0, 3, 1, (2, 1, 2, 1)), pre % (2, 1, 2) +
            "the change at step 1 of epoch 2 is past the end of the job (2 epochs)")
    refused(tag, ep, hello(0, 3, 1, (7, 1, 0, 1)), pre % (7, 1, 0) +
            "the shape before the change, 7 x 1: FILE sharding needs at least 7 files, found 6")
    refused(tag, ep, hello(0, 3, 1, (2, 1, 0, 2), flags=EPOCH, resume_epoch=1),
            "worker 0 resumes by epoch (epoch 1) and continues a change of the shape mid-epoch: a HELLO with a "
            "transition resumes at a piece of the transition's numbering, not by epoch")
    ok("a first HELLO's transition outside its epoch, past the job, of a shape that cannot plan, or with EPOCH: "
       "refused, each saying why")

    # the three new workers' streams: worker 1 resumes inside the transition;
    # worker 2 goes without a BYE, so the feeder waits for it
    x = (2, 1, 0, 2)
    for w, start in ((0, 0), (1, 3), (2, 0)):
        got = stream(tag, ep, hello(w, 3, 1, x, resume_seq=start), bye=w != 2)
        check_stream("%s: worker %d from %d" % (tag, w, start), got, want_stream(old, new, w, 0, 2, start))
    if "the shape changed from 2 x 1 at step 2 of epoch 0" not in read_log(tag, "feeder"):
        fail("%s: the feeder's log does not name the change" % tag)
    ok("2 x 1 -> 3 x 1 at step 2 of epoch 0: each new worker's pieces (epoch, step, seq, LAST_STEP, ids) are "
       "ref_plan's transition_pieces, from seq 0 and from seq 3")

    # while the feeder has the transition: every HELLO of its shape carries it
    refused(tag, ep, hello(0, 3, 1),
            "the job's shape changed at step 2 of epoch 0 from 2 x 1; this trainer does not know of the change "
            "(its HELLO carries no transition)")
    refused(tag, ep, hello(0, 3, 1, (2, 1, 0, 3)),
            "the job's shape changed at step 2 of epoch 0 from 2 x 1; this trainer says it changed at step 3 of "
            "epoch 0 from 2 x 1")
    refused(tag, ep, hello(0, 3, 1, x, resume_seq=11),
            "worker 0 asks to resume at piece 11, past the end of the job (10 pieces per worker after the change at "
            "step 2 of epoch 0: 4 steps x 1 replicas, then 1 epochs of 6 steps x 1 replicas)")
    # a second change: within the same epoch, or from another shape than the one served, refused
    refused(tag, ep, hello(0, 1, 1, (3, 1, 0, 4), flags=RESHAPE),
            "a second change within epoch 0: the job's shape changed at step 2 of it from 2 x 1 to 3 x 1, and this "
            "trainer asks to change it again at step 4 to 1 x 1: change again at epoch 1's start")
    refused(tag, ep, hello(0, 1, 1, (2, 1, 1, 1), flags=RESHAPE),
            "this trainer continues a change of the job's shape from 2 x 1 at step 1 of epoch 1, but this feeder "
            "served 3 workers x 1 replicas: the trainer's checkpoint is not of the shape this feeder served")
    ok("HELLOs of the shape without the transition or with another, past the transition's end, a second change "
       "within the epoch, a checkpoint of a shape not served: refused, each saying why")

    # a later epoch's change is granted: 3 x 1 -> 1 x 2 at step 2 of epoch 1
    # (its old plans are the plain 3 x 1 plan's)
    got = stream(tag, ep, hello(0, 1, 2, (3, 1, 1, 2), flags=RESHAPE), bye=False)
    check_stream("%s: 3 x 1 -> 1 x 2" % tag, got, want_stream(new, cfg(1, 2), 0, 1, 2))
    if "cluster shape 3 x 1 -> 1 x 2 at step 2 of epoch 1" not in read_log(tag, "feeder"):
        fail("%s: the feeder's log does not name the reshape" % tag)
    ok("a RESHAPE with a transition in a later epoch (3 x 1 -> 1 x 2 at step 2 of epoch 1): the pieces are "
       "ref_plan's")

    # a RESHAPE at an epoch's start (here the job's end) forgets the transition
    # (the 1 x 2 stream above closed without a BYE: until the feeder has
    # seen that connection go, it refuses the RESHAPE as "still connected",
    # and a trainer asks again, as here)
    deadline = time.time() + 10
    while True:
        s = connect(ep, hello(0, 2, 1, flags=RESHAPE | EPOCH, resume_epoch=EPOCHS))
        kind, why = answer(s)
        s.close()
        if kind != "REFUSE" or "is still connected" not in str(why) or time.time() > deadline:
            break
        time.sleep(0.05)
    if kind != "WELCOME":
        fail("%s: a RESHAPE at epoch %d's start: expected a WELCOME, got %s %r" % (tag, EPOCHS, kind, why))
    refused(tag, ep, hello(1, 2, 1, (3, 1, 1, 2)),
            "this trainer says the job's shape changed at step 2 of epoch 1 from 3 x 1; this feeder's shape, 2 x 1, "
            "was set without that change (by a trainer that carried no transition)")
    ok("a RESHAPE at an epoch's start replaces the shape and forgets the transition: a HELLO that still carries "
       "it is refused, saying why")
    f.kill()
    wait(f, 10, "%s: the feeder" % tag)

    harness.case()
    tag = "fixed"
    f, ep = feeder(tag, ["--workers", "3", "--replicas", "1"])
    refused(tag, ep, hello(0, 3, 1, x),
            "this trainer says the job's shape changed at step 2 of epoch 0 from 2 x 1; this feeder's shape, 3 x 1, "
            "was set without that change (by its --workers and --replicas, or its job's: a change mid-epoch needs "
            "a feeder whose shape the trainers set)")
    f.kill()
    wait(f, 10, "%s: the feeder" % tag)
    ok("a feeder whose shape is fixed refuses a transition, saying why")

    # the old plans of the W' connections count against --piece-memory:
    # 2048 x 1 -> 3 x 1 without sharding holds 2048 plans a connection
    # (2670720 bytes each by feed_transition_bytes' estimate: 2048 x 1288 +
    # (8 + 2048) x 16), 8 MB for 3
    harness.case()
    for tag, memory, want in (("memory-4m", "4M", "REFUSE"), ("memory-16m", "16M", "WELCOME")):
        f, ep = feeder(tag, ["--piece-memory", memory], name="job-off", shard_policy="off")
        msg = hello(0, 3, 1, (2048, 1, 0, 1), job="job-off")
        if want == "REFUSE":
            refused(tag, ep, msg,
                    "this trainer continues a change of the job's shape from 2048 x 1 to 3 x 1 at step 1 of epoch 0, "
                    "which this feeder cannot serve: its 3 connections would hold 2048 plans of the old shape each "
                    "until epoch 0 ends, about 2670720 bytes each, over this feeder's --piece-memory of 4194304 "
                    "bytes in all: give the feeder more --piece-memory, or change the shape at an epoch's start")
        else:
            s = connect(ep, msg)
            kind, why = answer(s)
            s.close()
            if kind != "WELCOME":
                fail("%s: expected a WELCOME, got %s %r" % (tag, kind, why))
        f.kill()
        wait(f, 10, "%s: the feeder" % tag)
    ok("a transition whose old plans for the new workers pass --piece-memory is refused, saying so; with more "
       "memory it is served")
    bed.finish()


if __name__ == "__main__":
    main()
