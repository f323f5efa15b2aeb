#!/usr/bin/env python3
"""Integration: start-up and shutdown an operator can trust (issue #14 part 3).
Real sluice-feeder and sluice-trainer processes (and rogue_peer, a raw wire
peer) over real ZeroMQ sockets.

A feeder binds before it scans its files and answers every HELLO meanwhile
with a STATUS ("scanning, k of n files"): a trainer started first logs it and
waits, however long the scan, as long as the feeder keeps answering
(--connect-timeout between answers). The scan's length is in the test's
hands: the first file of each job is a FIFO, whose scan blocks until the test
writes into it (40 bytes that are no TFRecord: under skip-file the file is
left out, under fail it is the start-up error). --idle-exit stops a feeder
that has had no trainer for that long, with exit status 3.

Waits are on events in the logs; the few sleeps are the scenario itself (a
scan held longer than the trainer's --connect-timeout), never a guess at how
long something takes. Time bounds only tell "soon" from "never", generously,
for sanitizers on a loaded machine.

Usage: test_startup.py BUILD_DIR     (prints "N passed, 0 failed" at the end)
"""
import errno
import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bed  # noqa: E402
import harness  # noqa: E402
from bed import log_path, read_log, wait, wait_for_log  # noqa: E402
from harness import fail, ok, spawn  # noqa: E402

bed.setup(sys.argv[1], "startup")
FEEDER, TRAINER, ROGUE, TMP = bed.FEEDER, bed.TRAINER, bed.ROGUE, bed.TMP
NREC = 120
NOT_A_TFRECORD = b"\xff" * 40  # a length whose CRC does not match: "corrupted record at 0"


def gen():
    return bed.gen("data", NREC, 2, seed=5)


def fifo(tag):
    path = os.path.join(TMP, "%s-slow.tfrecord" % tag)
    os.mkfifo(path)
    return path


def release(path, proc, what, timeout=30):
    """Let the scan past the FIFO: write into it once the feeder has opened
    it for reading (never blocks: no reader yet is ENXIO, and we ask again)."""
    deadline = time.time() + timeout
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as e:
            if e.errno != errno.ENXIO:
                raise
        if time.time() > deadline or proc.poll() is not None:
            fail("%s: the feeder never opened its FIFO" % what)
        time.sleep(0.02)
    os.write(fd, NOT_A_TFRECORD)
    os.close(fd)


def write_job(tag, files, **keys):
    keys.setdefault("epochs", 1)
    return bed.write_job("job-" + tag, files, **keys)


def feeder(tag, job_path, extra=()):
    sock = "ipc://%s/%s.sock" % (TMP, tag)
    p = spawn([FEEDER, "--job", job_path, "--listen", sock, "--threads", "1", "--heartbeat-ms", "200"] + list(extra),
              log=log_path(tag, "feeder"))
    return p, sock


def trainer(tag, sock, job, extra=()):
    trace = os.path.join(TMP, "%s-trace.jsonl" % tag)
    p = spawn([TRAINER, "--connect", sock, "--job", job["name"], "--trace", trace, "--heartbeat-ms", "200"]
              + list(extra), log=log_path(tag, "trainer"), stdout=subprocess.DEVNULL)
    return p, trace


def rogue(sock, job, *opts):
    """rogue_peer's answer to one HELLO (worker 0 of 1, 1 replica)."""
    p = subprocess.run([ROGUE, sock, job, "0", "1", "1", "0"] + list(opts), capture_output=True, text=True,
                       timeout=60)
    if p.returncode != 0:
        fail("rogue_peer exited %d: %s" % (p.returncode, p.stderr))
    return json.loads(p.stdout.splitlines()[0])


def trace_ids(path):
    ids = []
    with open(path) as f:
        for line in f:
            d = json.loads(line)
            ids += d.get("ids", [])
    return ids


# ---- a trainer started before the feeder waits for its scan ----

def case_trainer_first(files):
    harness.case()
    tag = "first"
    slow = fifo(tag)
    job_path, job = write_job(tag, [slow] + files, on_error="skip-file")
    sock = "ipc://%s/%s.sock" % (TMP, tag)
    # the trainer first, with a connect timeout far shorter than the scan
    t, trace = trainer(tag, sock, job, ("--connect-timeout", "2"))
    f, _ = feeder(tag, job_path)
    wait_for_log(tag, "feeder", "listening on %s" % sock, f, "first: the feeder did not bind before its scan")
    wait_for_log(tag, "trainer", "feeder %s: scanning, 0 of 3 files" % sock, t,
                 "first: the trainer should log the feeder's STATUS")
    # what the scanning feeder answers: a STATUS to a trainer that can take
    # one, a REFUSE in words to one that predates it, the usual REFUSE for
    # another job
    st = rogue(sock, job["name"], "--flags", "2")
    if st["reply"] != "STATUS" or st["state"] != 1 or st["files"] != 3 or st["files_done"] != 0 \
            or st["retry_ms"] != 200:
        fail("first: a HELLO with the STATUS flag should get STATUS (scanning, 0 of 3 files, retry 200 ms): %s" % st)
    old = rogue(sock, job["name"])
    if old["reply"] != "REFUSE" or "still scanning its files (0 of 3 done)" not in old["reason"] \
            or "predates STATUS" not in old["reason"]:
        fail("first: a HELLO without the STATUS flag should be refused in words: %s" % old)
    other = rogue(sock, "no-such-job", "--flags", "2")
    if other["reply"] != "REFUSE" or "job 'no-such-job' is not served here" not in other["reason"]:
        fail("first: a HELLO for another job should be refused at once, scan or not: %s" % other)
    # the scan lasts more than twice the trainer's --connect-timeout: the
    # STATUS answers keep it waiting (the sleep is the slow file system)
    time.sleep(4.5)
    if t.poll() is not None:
        fail("first: the trainer gave up on a feeder that answers STATUS (exit %s)" % t.returncode)
    release(slow, f, "first")
    code = wait(t, 60, "first: trainer")
    tlog = read_log(tag, "trainer")
    if code != 0:
        fail("first: the trainer should get its data once the scan is done, exit %d" % code)
    if "feeder %s: done scanning, serving" % sock not in tlog:
        fail("first: the trainer should log the end of the wait")
    if wait(f, 30, "first: feeder") != 0:
        fail("first: the feeder should exit 0 once the worker had its END")
    ids = trace_ids(trace)
    if sorted(ids) != list(range(NREC)):
        fail("first: expected ids 0..%d once each, got %d ids" % (NREC - 1, len(ids)))
    flog = read_log(tag, "feeder")
    if "worker 0 said HELLO while scanning: told to wait" not in flog or "skipping file" not in flog:
        fail("first: the feeder should log the STATUS answers and the skipped FIFO")
    lines = sum(": scanning, " in x for x in tlog.splitlines())
    ok("a trainer started before its feeder waits out a 4.5 s scan with --connect-timeout 2 (%d 'scanning' "
       "line%s), then gets every record once; STATUS, and REFUSEs in words, answered during the scan"
       % (lines, "" if lines == 1 else "s"))


def case_bad_file(files):
    harness.case()
    tag = "bad"
    slow = fifo(tag)
    job_path, job = write_job(tag, [slow] + files)  # on_error: fail
    sock = "ipc://%s/%s.sock" % (TMP, tag)
    t, _ = trainer(tag, sock, job, ("--connect-timeout", "5"))
    f, _ = feeder(tag, job_path, ("--timeout-ms", "2000"))
    wait_for_log(tag, "trainer", "feeder %s: scanning, 0 of 3 files" % sock, t,
                 "bad: the trainer should be waiting for the scan")
    release(slow, f, "bad")
    code = wait(t, 30, "bad: trainer")
    tlog = read_log(tag, "trainer")
    want = "refused: %s: corrupted record at 0" % slow
    if code != 1 or want not in tlog:
        fail("bad: a waiting trainer should be told the scan's error (%r), exit %d" % (want, code))
    if wait(f, 30, "bad: feeder") != 1:
        fail("bad: the feeder should exit 1")
    ok("a damaged file found by the scan fails the feeder (exit 1) and the waiting trainer with its error")


def case_feeder_gone(files):
    harness.case()
    tag = "gone"
    slow = fifo(tag)
    job_path, job = write_job(tag, [slow] + files)
    sock = "ipc://%s/%s.sock" % (TMP, tag)
    f, _ = feeder(tag, job_path)
    wait_for_log(tag, "feeder", "listening on", f, "gone: the feeder did not bind")
    t, _ = trainer(tag, sock, job, ("--connect-timeout", "2"))
    wait_for_log(tag, "trainer", "scanning, 0 of 3 files", t, "gone: the trainer should be waiting for the scan")
    f.kill()  # a feeder killed in its scan: no more STATUS
    f.wait()
    t0 = time.time()
    code = wait(t, 30, "gone: trainer")
    took = time.time() - t0
    tlog = read_log(tag, "trainer")
    if code != 1 or "silent for 2.0 s while scanning its files (it last said 0 of 3 done; --connect-timeout 2 s)" \
            not in tlog:
        fail("gone: a feeder gone silent in its scan should fail the trainer after --connect-timeout, exit %d"
             % code)
    if took > 25:
        fail("gone: took %.1f s (--connect-timeout 3)" % took)
    ok("a feeder killed in its scan fails the waiting trainer after --connect-timeout 2 (%.1f s)" % took)


def trace_lines(path):
    with open(path) as f:
        return [json.loads(x) for x in f if x.strip()]


def case_rejoin_scanning(files):
    """A trainer whose feeder is killed mid-stream rejoins the feeder
    restarted on the same address, which scans for twice --reconnect-s:
    its STATUS answers keep the trainer waiting, and the stream goes on
    where it stopped, no piece lost or repeated."""
    harness.case()
    tag = "rejoin"
    slow = fifo(tag)
    job_path, job = write_job(tag, [slow] + files, on_error="skip-file", epochs=0)  # for ever
    a, sock = feeder(tag, job_path)
    release(slow, a, "rejoin: feeder A")
    wait_for_log(tag, "feeder", "serving job", a, "rejoin: feeder A did not start")
    t, trace = trainer(tag, sock, job, ("--timeout-ms", "1000", "--reconnect-s", "2", "--connect-timeout", "10"))
    deadline = time.time() + 30
    while not os.path.exists(trace) or os.path.getsize(trace) < 20000:  # some hundreds of pieces
        if time.time() > deadline or t.poll() is not None:
            fail("rejoin: the trainer took no pieces from feeder A")
        time.sleep(0.02)
    a.kill()
    a.wait()
    b = spawn([FEEDER, "--job", job_path, "--listen", sock, "--threads", "1", "--heartbeat-ms", "200",
               "--idle-exit", "1"], log=log_path(tag, "feederB"))
    wait_for_log(tag, "trainer", "waiting up to 2 s for it to come back", t, "rejoin: the trainer did not rejoin")
    wait_for_log(tag, "trainer", "scanning, 0 of 3 files", t, "rejoin: the trainer should hear feeder B's STATUS")
    time.sleep(4)  # feeder B's scan outlasts --reconnect-s 2 twice over
    if t.poll() is not None:
        fail("rejoin: the trainer gave up on a restarted feeder that answers STATUS (exit %s)" % t.returncode)
    release(slow, b, "rejoin: feeder B")
    wait_for_log(tag, "trainer", "is back after", t, "rejoin: the trainer should resume from feeder B")
    size = os.path.getsize(trace)
    deadline = time.time() + 30
    while os.path.getsize(trace) < size + 20000:  # pieces from feeder B
        if time.time() > deadline or t.poll() is not None:
            fail("rejoin: no pieces from feeder B")
        time.sleep(0.02)
    t.send_signal(signal.SIGTERM)
    wait(t, 30, "rejoin: trainer")
    lines = [x for x in trace_lines(trace) if "seq" in x]
    steps = NREC // 8
    for i, x in enumerate(lines):
        want = list(range(8 * (i % steps), 8 * (i % steps) + 8))
        if x["seq"] != i or x["epoch"] != i // steps or x["ids"] != want:
            fail("rejoin: piece %d of the trace is %s, expected seq %d, epoch %d, ids %s"
                 % (i, x, i, i // steps, want))
    if wait(b, 30, "rejoin: feeder B") != 3:
        fail("rejoin: feeder B (--idle-exit 1) should stop with exit 3 once its trainer has gone")
    ok("a trainer rejoining a restarted feeder waits out its 4 s scan (--reconnect-s 2) and resumes: %d pieces "
       "in order, none lost or repeated" % len(lines))


def case_connect_timeout():
    harness.case()
    tag = "nobody"
    sock = "ipc://%s/nobody.sock" % TMP
    t0 = time.time()
    p, _ = trainer(tag, sock, {"name": "j"}, ("--connect-timeout", "2"))
    code = wait(p, 30, "nobody: trainer")
    took = time.time() - t0
    tlog = read_log(tag, "trainer")
    want = "feeder %s: no answer to HELLO within 2.0 s (--connect-timeout)" % sock
    if code != 1 or want not in tlog:
        fail("nobody: expected exit 1 and %r, got %d" % (want, code))
    if took < 1.9 or took > 25:
        fail("nobody: gave up after %.1f s, --connect-timeout 2" % took)
    for bad in ("0", "-1", "86401", "99999999999999999999", "abc", "", "1.5", "2s"):
        r = subprocess.run([TRAINER, "--connect", sock, "--job", "j", "--connect-timeout", bad], capture_output=True,
                           text=True, timeout=20)
        if r.returncode != 2 or not r.stderr.startswith("sluice-trainer: --connect-timeout: "):
            fail("nobody: --connect-timeout %r: expected a usage error (exit 2), got %d: %s"
                 % (bad, r.returncode, r.stderr))
    ok("--connect-timeout 2 with no feeder fails in %.1f s naming the option; 0, negative, huge and non-numbers "
       "are usage errors" % took)


# ---- --idle-exit ----

def case_idle_exit(files):
    harness.case()
    tag = "idle"
    slow = fifo(tag)
    job_path, job = write_job(tag, [slow] + files, on_error="skip-file")
    f, _ = feeder(tag, job_path, ("--idle-exit", "1"))
    wait_for_log(tag, "feeder", "listening on", f, "idle: the feeder did not bind")
    time.sleep(2.5)  # a scan longer than --idle-exit is not idleness
    if f.poll() is not None:
        fail("idle: the feeder stopped during its scan (exit %s)" % f.returncode)
    release(slow, f, "idle")
    wait_for_log(tag, "feeder", "serving job", f, "idle: the feeder should serve after its scan")
    t0 = time.time()
    code = wait(f, 30, "idle: feeder")
    took = time.time() - t0
    flog = read_log(tag, "feeder")
    want = "idle: no trainer connected for 1 s (--idle-exit 1): stopping with exit status 3 (no trainer came)"
    if code != 3 or want not in flog:
        fail("idle: expected exit 3 and %r, got %d" % (want, code))
    if took > 25:
        fail("idle: took %.1f s to stop (--idle-exit 1)" % took)

    # a trainer connected keeps it serving, even one stopped for twice
    # --idle-exit; once it has gone, the feeder stops
    harness.case()
    tag = "busy"
    job_path, job = write_job(tag, files, epochs=0)  # for ever: the trainer never runs out
    f, sock = feeder(tag, job_path, ("--idle-exit", "2", "--timeout-ms", "30000"))
    wait_for_log(tag, "feeder", "serving job", f, "busy: the feeder did not start")
    t, _ = trainer(tag, sock, job, ("--timeout-ms", "30000"))
    wait_for_log(tag, "feeder", "worker 0 connected", f, "busy: the trainer did not connect")
    t.send_signal(signal.SIGSTOP)
    time.sleep(4)
    alive = f.poll() is None
    t.send_signal(signal.SIGCONT)
    if not alive:
        fail("busy: the feeder stopped (exit %s) while a trainer was connected" % f.returncode)
    t.send_signal(signal.SIGTERM)
    wait(t, 30, "busy: trainer")
    code = wait(f, 60, "busy: feeder")
    flog = read_log(tag, "feeder")
    if code != 3 or "idle: no trainer connected for 2 s (--idle-exit 2)" not in flog:
        fail("busy: once its trainer has gone the feeder should stop idle with exit 3, got %d" % code)

    for bad in ("-1", "604801", "99999999999999999999", "abc", "", "1.5"):
        r = subprocess.run([FEEDER, "--job", job_path, "--listen", sock, "--idle-exit", bad], capture_output=True,
                           text=True, timeout=20)
        if r.returncode != 2 or not r.stderr.startswith("sluice-feeder: --idle-exit: "):
            fail("idle: --idle-exit %r: expected a usage error (exit 2), got %d: %s" % (bad, r.returncode, r.stderr))
    ok("--idle-exit: a feeder without trainers stops with exit 3 after S s (%.1f s for 1), not during its scan "
       "nor while a trainer is connected (stopped 4 s); bad values are usage errors" % took)


def main():
    files = gen()
    case_trainer_first(files)
    case_bad_file(files)
    case_feeder_gone(files)
    case_rejoin_scanning(files)
    case_connect_timeout()
    case_idle_exit(files)
    bed.finish()


if __name__ == "__main__":
    try:
        main()
    finally:
        bed.cleanup()
