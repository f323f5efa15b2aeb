#!/usr/bin/env python3
"""Takeover of a lost feeder's share, and a restarted trainer's place, on
real processes: sluice-feeder and sluice-trainer over ipc sockets, on
records written by sluice-record.

A job is served by F feeders; feeder j makes the pieces with seq % F == j.
When feeders are killed (SIGKILL or SIGTERM) at random points, a surviving
feeder serves each lost share from the first piece the trainer lacks, and
every trainer's trace (one line per piece: worker, replica, epoch, step,
seq, size, ids) must equal, line for line, the trace of an undisturbed run
of the same job: nothing lost, nothing twice, the order unchanged, shuffled
job included. Also: a feeder killed while it takes a share over, a
survivor that refuses (--no-takeover), a feeder that comes back after its
share was taken, every feeder lost (the trainer fails naming them), and a
trainer killed and started again at once (accepted at once through its new
incarnation, by copy and in shared memory) while a second live trainer for
the same worker is refused.

Usage: test_takeover.py BUILD_DIR [RUNS]   (RUNS: random kill runs, default 10,
4 in a sanitizer build; the base seed is printed, and SLUICE_TAKEOVER_SEED
sets it; the jobs' length and the kill moments follow this build's measured
speed)
"""
import json
import os
import random
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

TAKEOVER_S = 0.5
# The jobs' epochs and the kill moments follow the speed of this build on
# this machine (calibrate()): an undisturbed run lasts about TARGET_S, and
# kills land at fractions of that, so that a fast sanitizer build does not
# end before its kill point, nor a slow one get its kills during start-up.
TARGET_S = 2.5
EPOCHS = 800
RUN_S = 2.0  # how long an undisturbed run of EPOCHS takes (calibrate())
# Where the stream is faster than that, the cases' trainers spend --step-ms
# STEP_MS after each step instead, so that a run of EPOCHS lasts at least
# RUN_S however much faster the stream goes than in calibration (a
# calibration under load measured 8x the time a later, quieter case took:
# it ended before its kill)
STEP_MS = 0.0


def start_feeders(tag, job_path, F, extra=None):
    """F feeders over ipc; extra: {j: [args]}. Returns (procs, endpoints)."""
    eps = ["ipc://%s/%s-%d.sock" % (bed.TMP, tag, j) for j in range(F)]
    procs = []
    for j in range(F):
        procs.append(spawn([bed.FEEDER, "--job", job_path, "--listen", eps[j], "--feeder-index", str(j),
                            "--feeders", str(F), "--threads", "1", "--heartbeat-ms", "200", "--timeout-ms", "3000"]
                           + list((extra or {}).get(j, ())), log=bed.log_path(tag, "feeder%d" % j)))
    return procs, eps


def restart_feeder(tag, job_path, F, j, eps, extra=()):
    return spawn([bed.FEEDER, "--job", job_path, "--listen", eps[j], "--feeder-index", str(j), "--feeders", str(F),
                  "--threads", "1", "--heartbeat-ms", "200", "--timeout-ms", "3000"] + list(extra),
                 log=bed.log_path(tag, "feeder%d-again" % j))


def start_trainers(tag, eps, job, W, R, extra=(), paced=True):
    """W trainers of R replicas; paced: with --step-ms STEP_MS (the
    undisturbed reference and calibration runs are not)."""
    out = []
    if paced and STEP_MS > 0:
        extra = ("--step-ms", "%.4f" % STEP_MS) + tuple(extra)
    for w in range(W):
        trace = os.path.join(bed.TMP, "%s-trace%d.jsonl" % (tag, w))
        p = spawn([bed.TRAINER, "--connect", ",".join(eps), "--job", job["name"], "--worker", str(w), "--workers",
                   str(W), "--replicas", str(R), "--trace", trace, "--heartbeat-ms", "200", "--timeout-ms", "2000",
                   "--takeover-s", str(TAKEOVER_S)] + list(extra), log=bed.log_path(tag, "trainer%d" % w))
        out.append((p, trace))
    return out


def pieces_of(path):
    """A trace's piece lines (the summary line apart), and the summary."""
    with open(path) as f:
        lines = f.read().splitlines()
    if not lines:
        fail("%s: empty trace" % path)
    summary = json.loads(lines[-1])
    if "summary" not in summary:
        fail("%s: no summary line" % path)
    return lines[:-1], summary["summary"]


REFS = {}


def reference(files, job_path, job, W, R):
    """The traces of an undisturbed run of the job with one feeder (cached per shape)."""
    key = (job["name"], W, R)
    if key not in REFS:
        tag = "ref-%s-%dx%d" % (job["name"], W, R)
        feeders, eps = start_feeders(tag, job_path, 1)
        trainers = start_trainers(tag, eps, job, W, R, paced=False)
        for w, (p, _) in enumerate(trainers):
            if bed.wait(p, 120, tag + " trainer") != 0:
                fail("%s: the undisturbed trainer %d failed:\n%s" % (tag, w, bed.read_log(tag, "trainer%d" % w)))
        if bed.wait(feeders[0], 20, tag + " feeder") != 0:
            fail("%s: the undisturbed feeder failed" % tag)
        REFS[key] = [pieces_of(t)[0] for _, t in trainers]
        if not all(REFS[key]):
            fail("%s: a worker got no piece" % tag)
    return REFS[key]


def compare(name, traces, ref):
    for w, path in enumerate(traces):
        got, summary = pieces_of(path)
        if not summary["ok"]:
            fail("%s: worker %d's summary says it failed" % (name, w))
        if got != ref[w]:
            for i, (g, e) in enumerate(zip(got, ref[w])):
                if g != e:
                    fail("%s: worker %d piece %d differs from the undisturbed run:\n  got  %s\n  want %s"
                         % (name, w, i, g, e))
            fail("%s: worker %d got %d pieces, the undisturbed run %d" % (name, w, len(got), len(ref[w])))
    return summary


def stop_rest(procs):
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


def calibrate(files):
    """Time undisturbed 100-epoch runs of the fastest shapes the cases use
    (three feeders to one worker, two feeders to two workers: with one
    feeder a run took 3x as long as with two, and a case's kill landed after
    its stream had ended); set EPOCHS so the fastest lasts about TARGET_S,
    and RUN_S to its expected length. Slower shapes then run longer."""
    global EPOCHS, RUN_S, STEP_MS
    took = None
    steps = 1
    for F, W in ((3, 1), (2, 2)):
        tag = "calibrate%d%d" % (F, W)
        job_path, job = job_for(files, "tkcal%d%d" % (F, W), 100)
        feeders, eps = start_feeders(tag, job_path, F)
        trainers = start_trainers(tag, eps, job, W, 1, paced=False)
        for w, (p, _) in enumerate(trainers):
            if bed.wait(p, 120, tag + " trainer") != 0:
                fail("calibrate: the undisturbed run failed:\n%s" % bed.read_log(tag, "trainer%d" % w))
        for p in feeders:
            if bed.wait(p, 20, tag + " feeder") != 0:
                fail("calibrate: an undisturbed feeder failed")
        t = max(max(pieces_of(tr)[1]["seconds"] for _, tr in trainers), 0.01)
        took = t if took is None else min(took, t)
        steps = pieces_of(trainers[0][1])[1]["steps"] // 100  # a worker's steps per epoch
    if took >= 0.8 * TARGET_S:
        # a slow build or machine: the stream itself lasts; no pacing
        EPOCHS = min(max(int(100 * TARGET_S / took), 100), 4000)
        RUN_S = took * EPOCHS / 100
        STEP_MS = 0.0
    else:
        # a fast stream: 100 epochs paced to last TARGET_S (more epochs
        # instead made traces of 500,000 pieces and steps too short for a
        # sleep: 0.0077 ms asked, ~0.06 ms slept, a 458 s test)
        EPOCHS = 100
        RUN_S = TARGET_S
        STEP_MS = TARGET_S * 1000 / (steps * EPOCHS)
    print("# 100 epochs took %.2f s: %d epochs per job, about %.1f s undisturbed; the cases' trainers --step-ms %.4f"
          % (took, EPOCHS, RUN_S, STEP_MS))


def started(tag, trainers):
    """Once every trainer has its WELCOMEs (its stream begins)."""
    for w, (p, _) in enumerate(trainers):
        bed.wait_for_log(tag, "trainer%d" % w, "worker %d of " % w, p, "%s: trainer %d did not start" % (tag, w))


def job_for(files, name, epochs):
    return bed.write_job(name, files, epochs=epochs, global_batch_size=8,
                         shuffle={"buffer": 64, "seed": 11, "reshuffle_each_epoch": True})


def run_kills(files, rnd, run, F, W, R, kills, sig=signal.SIGKILL, during=False, back=False):
    """F feeders, W x R trainers, `kills` feeders killed at random moments
    (with `during`, the second one is the survivor just asked to take the
    first one's share; with `back`, each killed feeder is started again at
    its address a random moment later, and takes its share back). The
    traces must equal the undisturbed run's."""
    harness.case()
    tag = "run%d" % run
    job_path, job = job_for(files, "tk%dx%d" % (W, R), EPOCHS)
    ref = reference(files, job_path, job, W, R)
    feeders, eps = start_feeders(tag, job_path, F)
    time.sleep(0.2)
    trainers = start_trainers(tag, eps, job, W, R)
    victims = rnd.sample(range(F), kills)
    killed = []
    started(tag, trainers)
    time.sleep(rnd.uniform(0.05, 0.4) * RUN_S)
    for i, j in enumerate(victims):
        if i > 0 and during:
            # the survivor the trainer asks first: kill it as it takes the share over
            m = None
            deadline = time.time() + 20
            while m is None and time.time() < deadline:
                m = re.search(r"asking feeder (\S+) to take over its share", bed.read_log(tag, "trainer0"))
                time.sleep(0.005)
            if m is None:
                fail("%s: trainer 0 never asked a survivor to take over" % tag)
            j = eps.index(m.group(1))
        elif i > 0:
            time.sleep(rnd.uniform(0.0, 0.3) * RUN_S)
        if feeders[j].poll() is not None:
            fail("%s: feeder %d had ended before it could be killed (the job is too short)" % (tag, j))
        feeders[j].send_signal(sig)
        killed.append(j)
    again = []
    for j in killed if back else ():
        # once every trainer has had the share taken over (a feeder back
        # sooner keeps its share: back_in_time), a random moment later
        for w in range(W):
            bed.wait_for_log(tag, "trainer%d" % w, "took over feeder %s's share" % eps[j], trainers[w][0],
                             "%s: worker %d had no takeover of feeder %d's share" % (tag, w, j))
        time.sleep(rnd.uniform(0.0, 1.0))
        feeders[j].wait()
        again.append(restart_feeder(tag, job_path, F, j, eps, extra=("--idle-exit", "5")))
    for w, (p, _) in enumerate(trainers):
        code = bed.wait(p, 120, "%s trainer %d" % (tag, w))
        if code != 0:
            fail("%s: trainer %d exited %d after feeders %s were killed:\n%s"
                 % (tag, w, code, killed, bed.read_log(tag, "trainer%d" % w)[-3000:]))
    summary = compare(tag, [t for _, t in trainers], ref)
    takeovers = summary["feeder_takeovers"]
    if takeovers < 1:
        fail("%s: worker %d's summary counts no takeover (feeders %s killed)" % (tag, W - 1, killed))
    for j, p in enumerate(feeders):
        code = bed.wait(p, 30, "%s feeder %d" % (tag, j))
        if j not in killed and code != 0:
            fail("%s: surviving feeder %d exited %d" % (tag, j, code))
    for j, p in zip(killed, again):
        code = bed.wait(p, 30, "%s feeder %d started again" % (tag, j))
        if code not in (0, 3):  # 3: back after every trainer had finished (idle)
            fail("%s: feeder %d started again exited %d" % (tag, j, code))
    handed = bed.read_log(tag, "trainer0").count("takes its share back")
    ok("run %d: F=%d, %dx%d, feeder%s %s %s%s%s: traces equal the undisturbed run's (%d pieces per worker, %d "
       "takeovers by the last worker, %d shares handed back to worker 0)"
       % (run, F, W, R, "s" if kills > 1 else "", killed, "SIGTERM'd" if sig == signal.SIGTERM else "killed",
          ", the second while taking the share" if during else "", ", then started again" if back else "",
          len(ref[0]), takeovers, handed))


def refusing_survivor(files):
    """F = 3, feeder 2 started with --no-takeover: the trainer asks it first
    (same load as feeder 0, next after feeder 1), is refused, asks feeder 0."""
    harness.case()
    tag = "refuse"
    job_path, job = job_for(files, "tk1x1", EPOCHS)
    ref = reference(files, job_path, job, 1, 1)
    feeders, eps = start_feeders(tag, job_path, 3, extra={2: ["--no-takeover"]})
    time.sleep(0.2)
    trainers = start_trainers(tag, eps, job, 1, 1)
    started(tag, trainers)
    time.sleep(0.2 * RUN_S)
    if feeders[1].poll() is not None:
        fail("refuse: feeder 1 had ended before it could be killed (the job is too short)")
    feeders[1].kill()
    if bed.wait(trainers[0][0], 120, tag + " trainer") != 0:
        fail("refuse: the trainer failed:\n%s" % bed.read_log(tag, "trainer0")[-3000:])
    compare(tag, [trainers[0][1]], ref)
    log = bed.read_log(tag, "trainer0")
    if "%s will not take over feeder %s's share: this feeder serves its own share only (--no-takeover)" % (
            eps[2], eps[1]) not in log or "feeder %s took over feeder %s's share" % (eps[0], eps[1]) not in log:
        fail("refuse: expected feeder 2 to refuse and feeder 0 to take over:\n%s" % log[-3000:])
    stop_rest(feeders)
    ok("a survivor with --no-takeover refuses, the next one takes the share over: trace exact")


def comes_back(files):
    """Feeder 1 killed; its share is taken over; it then comes back at its
    address: the trainer's probe finds it and hands the share back to it
    (the survivor lets it go), the trace stays exact, and the returned
    feeder serves its share to the end and exits 0."""
    harness.case()
    tag = "back"
    # long enough, also in a sanitizer build, for the takeover, the
    # restarted feeder's scan and the probe (every 1 s) that finds it: two
    # calibrated runs (about 5 s undisturbed; one run's 2.5 s let a fast
    # machine end the stream first), 400 epochs at least
    job_path, job = job_for(files, "tk1x2b", max(2 * EPOCHS, 400))
    ref = reference(files, job_path, job, 1, 2)
    feeders, eps = start_feeders(tag, job_path, 2)
    time.sleep(0.2)
    trainers = start_trainers(tag, eps, job, 1, 2)
    started(tag, trainers)
    time.sleep(0.1 * RUN_S)
    feeders[1].kill()
    bed.wait_for_log(tag, "trainer0", "took over", trainers[0][0], "back: the share was not taken over")
    again = restart_feeder(tag, job_path, 2, 1, eps, extra=("--idle-exit", "60"))
    if bed.wait(trainers[0][0], 120, tag + " trainer") != 0:
        fail("back: the trainer failed:\n%s" % bed.read_log(tag, "trainer0")[-3000:])
    summary = compare(tag, [trainers[0][1]], ref)
    log = bed.read_log(tag, "trainer0")
    m = re.search(r"feeder %s is back: it takes its share back from feeder %s at piece (\d+)" % (
        re.escape(eps[1]), re.escape(eps[0])), log)
    if m is None or summary["feeder_takeovers"] != 1:
        fail("back: the trainer should hand the share back to the returned feeder:\n%s" % log[-3000:])
    code = bed.wait(again, 30, "back: the returned feeder")
    flog = bed.read_log(tag, "feeder1-again")
    if code != 0 or "worker 0: end of data" not in flog:
        fail("back: the returned feeder should serve its share to the end and exit 0: exit %d\n%s"
             % (code, flog[-2000:]))
    if "worker 0 (feeder 1's share, taken over) said goodbye" not in bed.read_log(tag, "feeder0"):
        fail("back: the survivor should have been told to let the share go (BYE)")
    if bed.wait(feeders[0], 30, "back: feeder 0") != 0:
        fail("back: feeder 0 failed")
    stop_rest(feeders)
    ok("a feeder back after its share was taken over gets it back at piece %s (the survivor told BYE); trace "
       "exact, the returned feeder serves to the end" % m.group(1))


def back_in_time(files):
    """Feeder 1 killed and restarted at once (within --takeover-s 5): the
    trainer resumes it, no takeover."""
    harness.case()
    tag = "quick"
    job_path, job = job_for(files, "tk1x1", EPOCHS)
    ref = reference(files, job_path, job, 1, 1)
    feeders, eps = start_feeders(tag, job_path, 2)
    time.sleep(0.2)
    global TAKEOVER_S
    TAKEOVER_S, was = 5, TAKEOVER_S
    trainers = start_trainers(tag, eps, job, 1, 1)
    TAKEOVER_S = was
    started(tag, trainers)
    time.sleep(0.2 * RUN_S)
    if feeders[1].poll() is not None:
        fail("quick: feeder 1 had ended before it could be killed (the job is too short)")
    feeders[1].kill()
    feeders[1].wait()
    again = restart_feeder(tag, job_path, 2, 1, eps)
    if bed.wait(trainers[0][0], 120, tag + " trainer") != 0:
        fail("quick: the trainer failed:\n%s" % bed.read_log(tag, "trainer0")[-3000:])
    summary = compare(tag, [trainers[0][1]], ref)
    if summary["feeder_takeovers"] != 0 or summary["feeder_rejoins"] != 1 or "is back after" not in bed.read_log(
            tag, "trainer0"):
        fail("quick: expected one rejoin and no takeover: %s" % summary)
    if bed.wait(again, 30, "quick: the restarted feeder") != 0:
        fail("quick: the restarted feeder failed")
    stop_rest(feeders)
    ok("a feeder restarted within --takeover-s keeps its share (rejoined, no takeover); trace exact")


def all_lost(files):
    """Every feeder killed: the trainer fails within --takeover-s (plus the
    0.2 s a closed connection is given), naming each feeder."""
    harness.case()
    tag = "all"
    job_path, job = job_for(files, "tk1x1", EPOCHS)
    feeders, eps = start_feeders(tag, job_path, 2)
    time.sleep(0.2)
    trainers = start_trainers(tag, eps, job, 1, 1)
    bed.wait_for_log(tag, "feeder0", "worker 0 connected", trainers[0][0], "all: the trainer did not connect")
    time.sleep(0.3)
    for p in feeders:
        p.kill()
    t0 = time.time()
    code = bed.wait(trainers[0][0], 30, "all: the trainer")
    took = time.time() - t0
    log = bed.read_log(tag, "trainer0")
    if code == 0 or took > TAKEOVER_S + 1.5:
        fail("all: the trainer should fail within %.1f s: exit %d after %.2f s" % (TAKEOVER_S + 1.5, code, took))
    m = re.search(r"error: (.*no other feeder took its share.*)", log)
    if m is None or not all(ep in m.group(1) for ep in eps) or "lost too" not in m.group(1):
        fail("all: the error should name both feeders:\n%s" % log[-2000:])
    stop_rest(feeders)
    ok("every feeder lost: the trainer fails in %.2f s (--takeover-s %.1f): %s" % (took, TAKEOVER_S, m.group(1)))


def trainer_restart(files, shm):
    """A trainer killed and started again at once (the same worker) is
    accepted at once (its old connection closed, a new incarnation), by copy
    and in shared memory; a second live trainer for that worker is
    refused. The feeder's --timeout-ms is 60 s and its heartbeat grace 2.5 s
    (--heartbeat-ms 1000): neither is waited out."""
    harness.case()
    tag = "restart-" + ("shm" if shm else "copy")
    job_path, job = bed.write_job("tr-" + tag, files, epochs=0, global_batch_size=8)
    ep = "ipc://%s/%s.sock" % (bed.TMP, tag)
    feeder = spawn([bed.FEEDER, "--job", job_path, "--listen", ep, "--threads", "1", "--heartbeat-ms", "1000",
                    "--timeout-ms", "60000"], log=bed.log_path(tag, "feeder"))
    extra = [] if shm else ["--no-shm"]

    def trainer(i):
        return spawn([bed.TRAINER, "--connect", ep, "--job", job["name"], "--heartbeat-ms", "1000",
                      ] + extra, log=bed.log_path(tag, "trainer%d" % i))
    first = trainer(0)
    bed.wait_for_log(tag, "feeder", "worker 0 connected", first, tag + ": the first trainer did not connect")
    bed.wait_for_log(tag, "feeder", "pieces through shared memory" if shm else "worker 0 connected", first,
                     tag + ": the first trainer's pieces")
    time.sleep(0.3)
    second = trainer(1)
    code = bed.wait(second, 10, tag + ": a second live trainer for worker 0")
    if code == 0 or "worker 0 is already connected (another trainer process" not in bed.read_log(tag, "trainer1"):
        fail("%s: a second live trainer should be refused: exit %d\n%s" % (tag, code,
                                                                          bed.read_log(tag, "trainer1")[-1500:]))
    first.kill()
    first.wait()
    t0 = time.time()
    third = trainer(2)
    bed.wait_for_log(tag, "trainer2", "1 feeders,", third, tag + ": the restarted trainer was not accepted",
                     timeout=10)
    took = time.time() - t0
    flog = bed.read_log(tag, "feeder")
    # the feeder learns of the close from the new HELLO's probe, or, when a
    # piece was on its way, from the send that failed first
    if not ("a new trainer process takes the place of one whose connection has closed" in flog or
            re.search(r"worker 0 could not be sent piece \d+ \(Host unreachable\) and was dropped", flog)) or \
            took > 1.5:
        fail("%s: the restarted trainer should be accepted at once (took %.2f s):\n%s" % (tag, took, flog[-2000:]))
    time.sleep(0.5)
    if third.poll() is not None:
        fail("%s: the restarted trainer ended: %s" % (tag, bed.read_log(tag, "trainer2")[-1500:]))
    third.send_signal(signal.SIGTERM)
    bed.wait(third, 10, tag + ": the restarted trainer")
    feeder.send_signal(signal.SIGTERM)
    bed.wait(feeder, 10, tag + ": the feeder")
    ok("%s: a second live trainer for worker 0 is refused; one killed and started again is accepted in %.2f s"
       % (tag, took))


def main():
    bed.setup(sys.argv[1], "takeover")
    sanitized = "sanitizers:" in subprocess.run([bed.TRAINER, "--version"], capture_output=True,
                                                 text=True).stdout
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 4 if sanitized else 10
    seed = int(os.environ.get("SLUICE_TAKEOVER_SEED", random.randrange(1 << 30)))
    print("# seed %d (SLUICE_TAKEOVER_SEED=%d reruns these kill points)" % (seed, seed))
    rnd = random.Random(seed)
    files = bed.gen("d", 600, 6)
    calibrate(files)
    trainer_restart(files, shm=True)
    trainer_restart(files, shm=False)
    all_lost(files)
    refusing_survivor(files)
    comes_back(files)
    back_in_time(files)
    shapes = [(2, 1, 1, 1), (3, 2, 2, 1), (3, 1, 2, 2), (2, 2, 2, 1), (3, 2, 1, 2)]
    for run in range(runs):
        F, W, R, kills = shapes[run % len(shapes)]
        during = kills == 2 and run % 2 == 0
        sig = signal.SIGTERM if run % 4 == 3 else signal.SIGKILL
        run_kills(files, rnd, run, F, W, R, kills, sig=sig, during=during, back=run % 3 == 1)
    bed.finish()


if __name__ == "__main__":
    try:
        main()
    finally:
        harness.stop_all()
        bed.cleanup()
