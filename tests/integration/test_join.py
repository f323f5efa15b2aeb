#!/usr/bin/env python3
"""Feeders that join a running job (issue #30 part 1), on real processes:
sluice-feeder, sluice-trainer and the Python client over ipc sockets, on
records written by sluice-record.

A job (shuffled, 4 epochs) is served to W = 2 workers of R = 2 replicas by
one feeder; more feeders join it with `sluice-feeder --join EP
--feeder-index J --feeders F'`. The trainers know only the first feeder:
they learn of the others from its ROSTER and switch, each at its own
position, to the new modulus. Whatever the moment, every worker's trace
(one line per piece: worker, replica, epoch, step, seq, size, ids) must
equal the trace of an undisturbed run with the one feeder, and the
reference model's (tests/plan/ref_plan.py); every epoch holds every
element exactly once; and each joined feeder served pieces (its --stats).

The cases: a feeder joins before the first piece (a client connected and
holding still, and a trainer started after the join), mid-epoch, exactly
at an epoch boundary (a Python client stopped there), 1 -> 2 -> 4
feeders, and a join followed by SIGKILL of feeder 0 (its share taken over
under the new modulus), the joiner killed (feeder 0 takes its share
over), and a trainer given both feeders after a join.

Usage: test_join.py BUILD_DIR [BINARIES_BUILD_DIR]
  BUILD_DIR gives the Python package (and the binaries, unless the second
  argument names a sanitizer build whose feeder, trainer and sluice-record
  are used instead)
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
from harness import fail, ok, spawn  # noqa: E402

W, R, EPOCHS = 2, 2, 4
RECORDS, SHARDS, G = 240, 4, 8
STEPS = RECORDS // G          # global steps per epoch
PIECES = STEPS * R            # pieces per worker per epoch
STEP_MS = 25.0                # the paced trainers' --step-ms: a run of about 3 s, whatever the build
TAKEOVER_S = 0.5

# A Python client for one worker (argv: endpoints, job, worker, workers,
# replicas, pause (steps to take, then hold still; -1: never), the folder
# of the marker files, the trace file). Holding still: it writes
# PAUSED (its position), keeps the connections alive until GO exists, and
# goes on. Its trace has sluice-trainer's lines, then a summary line
# {"summary": {"ok": true, "feeders": N}}.
CLIENT = r"""
import json, os, sys, time
import sluice
eps, job, w, nw, nr, pause, where, trace = sys.argv[1].split(","), sys.argv[2], int(sys.argv[3]), \
    int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), sys.argv[7], sys.argv[8]
out = open(trace, "w")
steps = 0
try:
    with sluice.Client(eps, job, worker=w, workers=nw, replicas=nr, heartbeat_ms=200, timeout_ms=3000,
                       takeover_ms=500) as c:
        it = iter(c)
        while True:
            if steps == pause:
                with open(os.path.join(where, "PAUSED.tmp"), "w") as f:
                    f.write(str(c.position))
                os.rename(os.path.join(where, "PAUSED.tmp"), os.path.join(where, "PAUSED"))
                while not os.path.exists(os.path.join(where, "GO")):
                    c.keepalive(20)
            try:
                s = next(it)
            except StopIteration:
                break
            for r, rep in enumerate(s.replicas):
                ids = [int(x) for x in rep["id"]]
                out.write(json.dumps({"worker": w, "replica": r, "epoch": s.epoch, "step": s.step,
                                      "seq": s.seq + r, "size": len(ids), "ids": ids}) + "\n")
            out.flush()
            steps += 1
        feeders = getattr(c, "feeders", None)
except sluice.Error as e:
    out.write(json.dumps({"summary": {"ok": False, "error": str(e)}}) + "\n")
    out.close()
    sys.exit(3)
out.write(json.dumps({"summary": {"ok": True, "feeders": feeders}}) + "\n")
out.close()
"""

RESHAPE_RE = r"feeders: (\d+) -> (\d+) \((.*?)\); serving from piece (\d+)"


def ids_of(files):
    """The id of every record of every file, read with sluice-record cat."""
    out = []
    for f in files:
        p = subprocess.run([bed.RECORD, "cat", "--decode", "example", f], check=True, capture_output=True,
                           text=True)
        out.append([int(json.loads(x)["example"]["features"]["feature"]["id"]["int64List"]["value"][0])
                    for x in p.stdout.splitlines()])
    return out


def endpoint(tag, j):
    return "ipc://%s/%s-f%d.sock" % (bed.TMP, tag, j)


def feeder_args(job_path, tag, j, F, extra=()):
    return [bed.FEEDER, "--job", job_path, "--listen", endpoint(tag, j), "--feeder-index", str(j), "--feeders",
            str(F), "--threads", "1", "--heartbeat-ms", "200", "--timeout-ms", "3000",
            "--stats", stats_path(tag, j)] + list(extra)


def stats_path(tag, j):
    return os.path.join(bed.TMP, "%s-f%d-stats.json" % (tag, j))


def start_first(job_path, tag):
    """Feeder 0 of 1."""
    p = spawn(feeder_args(job_path, tag, 0, 1), log=bed.log_path(tag, "feeder0"))
    bed.wait_for_log(tag, "feeder0", "serving job", p, "%s: feeder 0 did not start" % tag)
    return p


def join(job_path, tag, j, F, joins):
    """Feeder j joining as one of F, told the endpoints of feeders `joins`."""
    return spawn(feeder_args(job_path, tag, j, F, ("--join", ",".join(endpoint(tag, i) for i in joins))),
                 log=bed.log_path(tag, "feeder%d" % j))


def wait_roster(tag, F, joiners, timeout=30):
    """Until feeder 0's log says its roster counts F feeders (every joiner
    in); fail if a joiner ends first."""
    deadline = time.time() + timeout
    while not re.search(r"roster: \d+ -> %d feeders" % F, bed.read_log(tag, "feeder0")):
        for j, p in joiners:
            if p.poll() is not None:
                fail("%s: joining feeder %d exited %d before feeder 0 counted it:\n%s"
                     % (tag, j, p.returncode, bed.read_log(tag, "feeder%d" % j)[-2000:]))
        if time.time() > deadline:
            fail("%s: feeder 0's roster did not reach %d feeders in %d s" % (tag, F, timeout))
        time.sleep(0.02)


def trainer(tag, w, paced=True, extra=(), credits=8, feeders=(0,)):
    """sluice-trainer worker w of W, told feeder 0 only (or `feeders`)."""
    trace = os.path.join(bed.TMP, "%s-trace%d.jsonl" % (tag, w))
    # paced: a few credits, so that the feeders cannot send a worker's
    # whole stream before the join (a ROSTER after every feeder's END is
    # ignored), and the client, which reads its feeders when its window
    # runs dry, hears of the join within a few steps
    pace = ["--step-ms", "%.3f" % STEP_MS] if paced else []
    if paced and credits:
        pace += ["--credits", str(credits)]
    p = spawn([bed.TRAINER, "--connect", ",".join(endpoint(tag, j) for j in feeders), "--job", JOB["name"], "--worker", str(w), "--workers",
               str(W), "--replicas", str(R), "--trace", trace, "--heartbeat-ms", "200", "--timeout-ms", "3000",
               "--takeover-s", str(TAKEOVER_S)] + pace + list(extra), log=bed.log_path(tag, "trainer%d" % w))
    return p, trace


def py_client(tag, w, pause):
    """The Python client worker w, holding still after `pause` steps."""
    trace = os.path.join(bed.TMP, "%s-trace%d.jsonl" % (tag, w))
    where = os.path.join(bed.TMP, "%s-marks%d" % (tag, w))
    os.makedirs(where)
    env = dict(os.environ, PYTHONPATH=os.path.join(bed.BUILD, "python"), PYTHONDONTWRITEBYTECODE="1",
               SLUICE_LOG_LEVEL="info")
    p = spawn(["/usr/bin/python3", "-c", CLIENT, endpoint(tag, 0), JOB["name"], str(w), str(W), str(R), str(pause),
               where, trace], log=bed.log_path(tag, "trainer%d" % w), env=env)
    return p, trace, where


def wait_paused(tag, w, p, where, timeout=30):
    deadline = time.time() + timeout
    path = os.path.join(where, "PAUSED")
    while not os.path.exists(path):
        if p.poll() is not None or time.time() > deadline:
            fail("%s: the Python client %d did not reach its pause (exit %s):\n%s"
                 % (tag, w, p.poll(), bed.read_log(tag, "trainer%d" % w)[-2000:]))
        time.sleep(0.01)
    with open(path) as f:
        return int(f.read())


def go(where):
    open(os.path.join(where, "GO"), "w").close()


def wait_pieces(tag, w, trace, p, n, timeout=60):
    """Until worker w's trace has n piece lines."""
    deadline = time.time() + timeout
    while True:
        try:
            with open(trace) as f:
                if sum(1 for _ in f) >= n:
                    return
        except FileNotFoundError:
            pass
        if p.poll() is not None:
            fail("%s: worker %d ended (exit %d) before its %dth piece: the join came too late to test"
                 % (tag, w, p.returncode, n))
        if time.time() > deadline:
            fail("%s: worker %d did not reach piece %d in %d s" % (tag, w, n, timeout))
        time.sleep(0.005)


def pieces_of(path):
    with open(path) as f:
        lines = [json.loads(x) for x in f.read().splitlines()]
    if not lines or "summary" not in lines[-1]:
        fail("%s: no summary line" % path)
    return lines[:-1], lines[-1]["summary"]


def oracle():
    """The reference model's pieces per worker, as trace lines."""
    ref = bed.reference(JOB, [len(x) for x in IDS], W, R)
    return {w: [{"worker": x["worker"], "replica": x["replica"], "epoch": x["epoch"], "step": x["step"],
                 "seq": x["seq"], "size": len(x["elems"]), "ids": [IDS[fi][r] for fi, r in x["elems"]]}
                for x in ref.get(w, [])] for w in range(W)}


def undisturbed():
    """The traces of an undisturbed run with the one feeder; they must be
    the oracle's already."""
    harness.case()
    tag = "ref"
    f0 = spawn(feeder_args(JOB_PATH, tag, 0, 1), log=bed.log_path(tag, "feeder0"))
    bed.wait_for_log(tag, "feeder0", "serving job", f0, "ref: feeder 0 did not start")
    t0 = time.time()
    trainers = [trainer(tag, w, paced=False) for w in range(W)]
    for w, (p, _) in enumerate(trainers):
        if bed.wait(p, 120, "ref trainer") != 0:
            fail("ref: the undisturbed trainer %d failed:\n%s" % (w, bed.read_log(tag, "trainer%d" % w)))
    took = time.time() - t0
    if bed.wait(f0, 20, "ref feeder") != 0:
        fail("ref: the undisturbed feeder failed")
    ref = {w: pieces_of(t)[0] for w, (_, t) in enumerate(trainers)}
    orc = oracle()
    for w in range(W):
        if ref[w] != orc[w]:
            fail("ref: the undisturbed run's worker %d differs from the reference model" % w)
        if len(ref[w]) != EPOCHS * PIECES:
            fail("ref: worker %d got %d pieces, expected %d" % (w, len(ref[w]), EPOCHS * PIECES))
    ok("undisturbed run with one feeder: the reference model's stream (%d pieces per worker, %.2f s)"
       % (len(ref[0]), took))
    return ref, took


def check(tag, traces, ref):
    """Each worker's trace equals the undisturbed run's (so the oracle's),
    and each epoch holds every element once over the workers."""
    for w, path in enumerate(traces):
        got, summary = pieces_of(path)
        if not summary.get("ok"):
            fail("%s: worker %d's summary says it failed: %s" % (tag, w, summary))
        if got != ref[w]:
            for i, (g, e) in enumerate(zip(got, ref[w])):
                if g != e:
                    fail("%s: worker %d piece %d differs from the undisturbed run:\n  got  %s\n  want %s"
                         % (tag, w, i, g, e))
            fail("%s: worker %d got %d pieces, the undisturbed run %d" % (tag, w, len(got), len(ref[w])))
    everything = sorted(i for f in IDS for i in f)
    for e in range(EPOCHS):
        seen = sorted(i for path in traces for x in pieces_of(path)[0] if x["epoch"] == e for i in x["ids"])
        if seen != everything:
            fail("%s: epoch %d does not hold every element exactly once" % (tag, e))


def reshapes(tag, w):
    """The reshapes worker w's log tells: [(F, F', joined text, S)]."""
    return [(int(a), int(b), c, int(s)) for a, b, c, s in re.findall(RESHAPE_RE, bed.read_log(tag, "trainer%d" % w))]


def served(tag, j):
    """Pieces feeder j's --stats says it sent."""
    try:
        with open(stats_path(tag, j)) as f:
            return json.load(f)["pieces"]
    except (OSError, ValueError, KeyError):
        fail("%s: feeder %d wrote no --stats:\n%s" % (tag, j, bed.read_log(tag, "feeder%d" % j)[-2000:]))


def finish_case(tag, workers, feeders, ref, killed=()):
    """Wait for every worker and feeder, check the traces, and that each
    feeder that joined served pieces: {feeder: pieces}."""
    for w, p in enumerate(workers):
        code = bed.wait(p, 120, "%s worker %d" % (tag, w))
        if code != 0:
            fail("%s: worker %d exited %d:\n%s" % (tag, w, code, bed.read_log(tag, "trainer%d" % w)[-3000:]))
    for j, p in feeders.items():
        code = bed.wait(p, 30, "%s feeder %d" % (tag, j))
        if j not in killed and code != 0:
            fail("%s: feeder %d exited %d:\n%s" % (tag, j, code, bed.read_log(tag, "feeder%d" % j)[-2000:]))
    check(tag, [os.path.join(bed.TMP, "%s-trace%d.jsonl" % (tag, w)) for w in range(len(workers))], ref)
    out = {}
    for j in feeders:
        if j in killed:
            continue
        out[j] = served(tag, j)
        if j > 0 and out[j] == 0:
            fail("%s: joined feeder %d served no piece:\n%s" % (tag, j, bed.read_log(tag, "feeder%d" % j)[-2000:]))
    return out


def before_first(ref):
    """(a) A feeder joins before the first piece: worker 0 (Python) is
    connected and holds still before its first step; worker 1
    (sluice-trainer) starts after the join and gets the ROSTER right after
    its WELCOME. Worker 0 switches at piece 0, worker 1 within its first
    window."""
    harness.case()
    tag = "first"
    f0 = start_first(JOB_PATH, tag)
    py, _, where = py_client(tag, 0, 0)
    if wait_paused(tag, 0, py, where) != 0:
        fail("first: the client's position before its first step is not 0")
    f1 = join(JOB_PATH, tag, 1, 2, [0])
    wait_roster(tag, 2, [(1, f1)])
    t1, _ = trainer(tag, 1)
    go(where)
    sent = finish_case(tag, [py, t1], {0: f0, 1: f1}, ref)
    # worker 0 held still before its first piece: it switches at 0. Worker
    # 1 hears the ROSTER right after its WELCOME, but the pieces feeder 0
    # sent behind it may be read in the same pass and taken in order
    # before the switch (2 of them in a CI run): within its first window
    # of 8 credits
    for w in range(W):
        got = reshapes(tag, w)
        at = [s for _, _, _, s in got]
        if [(a, b) for a, b, _, _ in got] != [(1, 2)] or not (at[0] == 0 if w == 0 else at[0] < 8):
            fail("first: worker %d should switch from 1 to 2 feeders at piece %s, its log says %s:\n%s"
                 % (w, "0" if w == 0 else "0-7", got, bed.read_log(tag, "trainer%d" % w)[-2000:]))
    ok("(a) a feeder joins before the first piece (a client holding still, a trainer started after): they "
       "switch at pieces 0 and %d, traces exact; feeder 0 sent %d pieces, the joiner %d"
       % (reshapes(tag, 1)[0][3], sent[0], sent[1]))


def mid_epoch(ref):
    """(b) Mid-epoch: two paced trainers with the default credits; the
    feeder joins once worker 0 is halfway through epoch 1. Each switches
    at its own position."""
    harness.case()
    tag = "mid"
    f0 = start_first(JOB_PATH, tag)
    # the default credits (64) here: the feeder a quarter of the stream ahead
    trainers = [trainer(tag, w, credits=None) for w in range(W)]
    wait_pieces(tag, 0, trainers[0][1], trainers[0][0], PIECES + PIECES // 2)
    f1 = join(JOB_PATH, tag, 1, 2, [0])
    sent = finish_case(tag, [p for p, _ in trainers], {0: f0, 1: f1}, ref)
    at = []
    for w in range(W):
        got = reshapes(tag, w)
        if len(got) != 1 or got[0][:2] != (1, 2) or not 0 < got[0][3] < EPOCHS * PIECES:
            fail("mid: worker %d should switch once from 1 to 2 feeders within the stream "
                 "(after its first piece, before its last); its log says %s" % (w, got))
        at.append(got[0][3])
    ok("(b) a feeder joins mid-epoch: the workers switch at pieces %s, traces exact; feeder 0 sent %d pieces, "
       "the joiner %d" % (at, sent[0], sent[1]))


def epoch_boundary(ref):
    """(c) At an epoch boundary: worker 0 (Python) holds still after the
    last step of epoch 1 (position 2 * PIECES, the first piece of epoch
    2); the feeder joins; worker 0 switches exactly there. Worker 1 runs
    paced and switches where it is."""
    harness.case()
    tag = "epoch"
    f0 = start_first(JOB_PATH, tag)
    py, _, where = py_client(tag, 0, 2 * STEPS)
    t1, _ = trainer(tag, 1)
    pos = wait_paused(tag, 0, py, where)
    if pos != 2 * PIECES:
        fail("epoch: the client holds still at position %d, expected %d" % (pos, 2 * PIECES))
    f1 = join(JOB_PATH, tag, 1, 2, [0])
    wait_roster(tag, 2, [(1, f1)])
    go(where)
    sent = finish_case(tag, [py, t1], {0: f0, 1: f1}, ref)
    got = reshapes(tag, 0)
    if [(a, b, s) for a, b, _, s in got] != [(1, 2, 2 * PIECES)]:
        fail("epoch: worker 0 should switch from 1 to 2 feeders at piece %d (epoch 2's first), its log says %s"
             % (2 * PIECES, got))
    other = reshapes(tag, 1)
    if len(other) != 1:
        fail("epoch: worker 1 should switch once, its log says %s" % other)
    with open(os.path.join(bed.TMP, "%s-trace0.jsonl" % tag)) as f:
        last = json.loads(f.read().splitlines()[-1])["summary"]
    if last.get("feeders") not in (None, 2):
        fail("epoch: the Python client's feeders property says %s at the end, expected 2" % last.get("feeders"))
    ok("(c) a feeder joins at an epoch boundary: worker 0 switches at piece %d (epoch 2's first), worker 1 at %d; "
       "traces exact; feeder 0 sent %d pieces, the joiner %d" % (2 * PIECES, other[0][3], sent[0], sent[1]))


def one_two_four(ref):
    """1 -> 2 -> 4: feeder 1 joins a quarter into the stream; once both
    workers switched to 2, feeders 2 and 3 join as two of 4 (told feeders
    0 and 1). Every worker goes 1 -> 2 -> 4; all four feeders serve."""
    harness.case()
    tag = "124"
    f0 = start_first(JOB_PATH, tag)
    trainers = [trainer(tag, w) for w in range(W)]
    wait_pieces(tag, 0, trainers[0][1], trainers[0][0], EPOCHS * PIECES // 4)
    f1 = join(JOB_PATH, tag, 1, 2, [0])
    for w in range(W):
        bed.wait_for_log(tag, "trainer%d" % w, "feeders: 1 -> 2", trainers[w][0],
                         "124: worker %d did not switch to 2 feeders" % w)
    wait_pieces(tag, 0, trainers[0][1], trainers[0][0], EPOCHS * PIECES // 2)
    f2 = join(JOB_PATH, tag, 2, 4, [0, 1])
    f3 = join(JOB_PATH, tag, 3, 4, [0, 1])
    sent = finish_case(tag, [p for p, _ in trainers], {0: f0, 1: f1, 2: f2, 3: f3}, ref)
    for w in range(W):
        got = reshapes(tag, w)
        if [(a, b) for a, b, _, _ in got] != [(1, 2), (2, 4)] or not got[0][3] < got[1][3]:
            fail("124: worker %d should switch 1 -> 2 then 2 -> 4, its log says %s" % (w, got))
    ok("1 -> 2 -> 4 feeders: every worker switches twice, traces exact; pieces sent by feeders 0-3: %s"
       % [sent[j] for j in range(4)])


def join_then_kill(ref, victim):
    """A join, then feeder `victim` SIGKILLed: the other one, the only
    survivor, takes its share over under modulus 2 (feeder 0's share 0 by
    the joiner, which the trainers know from the ROSTER alone; the
    joiner's 1 mod 2 by feeder 0); the stream goes on unchanged."""
    harness.case()
    tag = "kill%d" % victim
    f0 = start_first(JOB_PATH, tag)
    trainers = [trainer(tag, w) for w in range(W)]
    wait_pieces(tag, 0, trainers[0][1], trainers[0][0], EPOCHS * PIECES // 4)
    f1 = join(JOB_PATH, tag, 1, 2, [0])
    for w in range(W):
        bed.wait_for_log(tag, "trainer%d" % w, "feeders: 1 -> 2", trainers[w][0],
                         "%s: worker %d did not switch to 2 feeders" % (tag, w))
    wait_pieces(tag, 0, trainers[0][1], trainers[0][0], EPOCHS * PIECES // 2)
    feeders = {0: f0, 1: f1}
    if feeders[victim].poll() is not None:
        fail("%s: feeder %d had ended before it could be killed (the job is too short)" % (tag, victim))
    feeders[victim].send_signal(signal.SIGKILL)
    sent = finish_case(tag, [p for p, _ in trainers], feeders, ref, killed=(victim,))
    for w in range(W):
        _, summary = pieces_of(os.path.join(bed.TMP, "%s-trace%d.jsonl" % (tag, w)))
        if summary.get("feeder_takeovers", 0) < 1:
            fail("%s: worker %d counts no takeover of feeder %d's share: %s" % (tag, w, victim, summary))
    survivor = 1 - victim
    said = "taking over feeder %d's share (pieces %d mod 2)" % (victim, victim)
    if said not in bed.read_log(tag, "feeder%d" % survivor):
        fail("%s: feeder %d does not say %r:\n%s" % (tag, survivor, said,
                                                    bed.read_log(tag, "feeder%d" % survivor)[-2000:]))
    ok("a join, then feeder %d killed: feeder %d takes its share (%d mod 2) over, traces exact; it sent %d pieces"
       % (victim, survivor, victim, sent[survivor]))


def told_all(ref):
    """A trainer started after a join and told every feeder, the joined
    one too (its operator updated the list): feeder 0, one of the first 1,
    WELCOMEs it with its own count; the trainer asks it again with the
    count of 2 (HELLO's modulus) and reads the undisturbed stream, with no
    reshape. Worker 1, told feeder 0 only, learns of the join from the
    ROSTER as usual."""
    harness.case()
    tag = "all"
    f0 = start_first(JOB_PATH, tag)
    f1 = join(JOB_PATH, tag, 1, 2, [0])
    wait_roster(tag, 2, [(1, f1)])
    t0, _ = trainer(tag, 0, feeders=(0, 1))
    t1, _ = trainer(tag, 1)
    sent = finish_case(tag, [t0, t1], {0: f0, 1: f1}, ref)
    log0 = bed.read_log(tag, "trainer0")
    if "counts 1 feeders, this trainer was given 2" not in log0 or reshapes(tag, 0):
        fail("all: worker 0, given both feeders, should ask feeder 0 again with the count and never reshape:\n%s"
             % log0[-2000:])
    got = reshapes(tag, 1)
    if [(a, b) for a, b, _, _ in got] != [(1, 2)] or got[0][3] >= 8:
        fail("all: worker 1 should switch from 1 to 2 feeders within its first 8 pieces, its log says %s" % got)
    ok("a trainer given both feeders after a join asks feeder 0 again with the count: traces exact; feeder 0 "
       "sent %d pieces, the joiner %d" % (sent[0], sent[1]))


def main():
    global JOB, JOB_PATH, IDS
    bed.setup(sys.argv[1], "join")
    if len(sys.argv) > 2:
        bed.use_binaries(sys.argv[2])
    files = bed.gen("d", RECORDS, SHARDS)
    IDS = ids_of(files)
    JOB_PATH, JOB = bed.write_job("join", files, epochs=EPOCHS, global_batch_size=G,
                                  shuffle={"buffer": 64, "seed": 11, "reshuffle_each_epoch": True})
    ref, _ = undisturbed()
    before_first(ref)
    mid_epoch(ref)
    epoch_boundary(ref)
    one_two_four(ref)
    join_then_kill(ref, 0)
    join_then_kill(ref, 1)
    told_all(ref)
    bed.finish()


if __name__ == "__main__":
    try:
        main()
    finally:
        harness.stop_all()
        bed.cleanup()
