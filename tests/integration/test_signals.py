#!/usr/bin/env python3
"""Integration: every wait of sluice-trainer and sluice-feeder ends within
a second of SIGINT or SIGTERM (issue #14 part 3), with the documented exit
status: a trainer cut short exits 128 + the signal (130, 143); a feeder's
stop is its normal end (0), unless it had already failed (1).

How soon a wait ended is read from the log line it writes when it ends
("stopped by a signal", "stopping on signal"), whose RFC 3339 time is
compared with the moment the signal was sent: process teardown (sockets
lingering, sanitizers' reports) is not the wait, and gets a generous bound.
Under sanitizers the bound is 3 s instead of 1 s (the build's --version
says which).

Usage: test_signals.py BUILD_DIR     (prints "N passed, 0 failed" at the end)
"""
import calendar
import os
import re
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bed  # noqa: E402
import harness  # noqa: E402
from bed import log_path, read_log, wait_for_log  # noqa: E402
from harness import fail, ok, spawn  # noqa: E402

bed.setup(sys.argv[1], "signals")
FEEDER, TRAINER, TMP = bed.FEEDER, bed.TRAINER, bed.TMP
SANITIZED = "sanitizers:" in subprocess.run([TRAINER, "--version"], capture_output=True, text=True).stdout
BOUND = 3.0 if SANITIZED else 1.0
EXIT_WAIT = 20  # teardown after the wait ended


def write_job(name, files):
    """An endless job (epochs 0): the trainers wait wherever the case puts them."""
    return bed.write_job(name, files, epochs=0)[0]


def ring_endpoints(n):
    """n distinct free loopback ports as a --ring list (the sockets are held
    together, so the kernel cannot hand out one port twice)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return ",".join("tcp://127.0.0.1:%d" % s.getsockname()[1] for s in socks)
    finally:
        for s in socks:
            s.close()


def line_time(tag, who, text):
    """The wall time of the first log line holding text (None if none)."""
    for line in read_log(tag, who).splitlines():
        if text in line:
            m = re.match(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)\.(\d{3})Z ", line)
            if m is None:
                fail("%s: a log line without its time: %r" % (tag, line))
            y, mo, d, h, mi, s, ms = (int(x) for x in m.groups())
            return calendar.timegm((y, mo, d, h, mi, s)) + ms / 1000.0
    return None


def stop_and_check(tag, who, p, sig, marker, want, what):
    """Send sig to p; the wait must log `marker` within BOUND s and p exit
    with `want`. Returns the seconds to the marker."""
    sent = time.time()
    p.send_signal(sig)
    try:
        code = p.wait(timeout=EXIT_WAIT)
    except subprocess.TimeoutExpired:
        fail("%s: still running %d s after %s" % (what, EXIT_WAIT, signal.Signals(sig).name))
    at = line_time(tag, who, marker)
    if at is None:
        fail("%s: no '%s' line after %s (exit %d):\n%s" % (what, marker, signal.Signals(sig).name, code,
                                                           read_log(tag, who)[-2000:]))
    took = max(0.0, at - sent)
    # the log's clock has milliseconds: a line may read up to 1 ms early
    if took > BOUND or took < -0.002:
        fail("%s: the wait ended %.3f s after %s (at most %.1f s)" % (what, took, signal.Signals(sig).name, BOUND))
    if code != want:
        fail("%s: exit status %d after %s, expected %d:\n%s" % (what, code, signal.Signals(sig).name, want,
                                                                read_log(tag, who)[-2000:]))
    return took


def feeder(tag, job_path, extra=(), ready="serving job"):
    sock = "ipc://%s/%s.sock" % (TMP, tag)
    p = spawn([FEEDER, "--job", job_path, "--listen", sock, "--threads", "1", "--heartbeat-ms", "200",
               "--timeout-ms", "3000"] + list(extra), log=log_path(tag, "feeder"))
    if ready:
        wait_for_log(tag, "feeder", ready, p, "%s: the feeder did not start" % tag)
    return p, sock


def trainer(tag, conn, job, w=0, W=1, extra=()):
    return spawn([TRAINER, "--connect", conn, "--job", job, "--worker", str(w), "--workers", str(W),
                  "--replicas", "1", "--heartbeat-ms", "200", "--timeout-ms", "60000"] + list(extra),
                 log=log_path(tag, "trainer%d" % w), stdout=subprocess.DEVNULL)


TRAINER_STOPPED = "stopped by a signal"
FEEDER_STOPPED = "stopping on signal"


def case_trainer_welcome():
    """Waiting for a WELCOME that never comes (nothing listens)."""
    harness.case()
    tag = "welcome"
    p = trainer(tag, "ipc://%s/nobody.sock" % TMP, "nobody")
    time.sleep(1.0)
    took = stop_and_check(tag, "trainer0", p, signal.SIGTERM, TRAINER_STOPPED, 128 + signal.SIGTERM,
                          "a trainer waiting for its WELCOME")
    ok("a trainer waiting for its WELCOME: SIGTERM ends the wait in %.3f s, exit 143" % took)


def case_trainer_pieces(files):
    """Waiting for pieces from a feeder that went quiet (stopped)."""
    harness.case()
    tag = "pieces"
    f, sock = feeder(tag, write_job("job-" + tag, files))
    p = trainer(tag, sock, "job-" + tag)
    wait_for_log(tag, "feeder", "worker 0 connected", p, "%s: the trainer did not connect" % tag)
    time.sleep(0.5)
    f.send_signal(signal.SIGSTOP)
    time.sleep(0.5)
    took = stop_and_check(tag, "trainer0", p, signal.SIGINT, TRAINER_STOPPED, 128 + signal.SIGINT,
                          "a trainer waiting for pieces")
    f.send_signal(signal.SIGCONT)
    took_f = stop_and_check(tag, "feeder", f, signal.SIGTERM, FEEDER_STOPPED, 0, "the feeder after SIGCONT")
    ok("a trainer waiting for pieces: SIGINT ends the wait in %.3f s, exit 130 (the feeder, resumed: "
       "%.3f s, exit 0)" % (took, took_f))


def case_trainer_rendezvous():
    """Worker 1 waiting at the rendezvous for a worker 0 that never comes."""
    harness.case()
    tag = "rendezvous"
    ring = ring_endpoints(2)
    p = trainer(tag, "ipc://%s/nobody.sock" % TMP, "nobody", w=1, W=2,
                extra=("--model", "mlp", "--ring", ring, "--rendezvous-timeout", "600"))
    time.sleep(1.0)
    if p.poll() is not None:
        fail("%s: the trainer exited before the signal:\n%s" % (tag, read_log(tag, "trainer1")))
    took = stop_and_check(tag, "trainer1", p, signal.SIGTERM, TRAINER_STOPPED, 128 + signal.SIGTERM,
                          "a worker waiting at the rendezvous")
    ok("a worker waiting at the rendezvous: SIGTERM ends the wait in %.3f s, exit 143" % took)


def case_trainer_ring(files):
    """Worker 0 waiting in the gradient all-reduce for a stopped worker 1:
    the first SIGTERM is a wish the workers agree on at a step (it waits,
    up to the grace: --timeout-ms), the second stops it at once."""
    harness.case()
    tag = "ring"
    f, sock = feeder(tag, write_job("job-" + tag, files))
    ring = ring_endpoints(2)
    extra = ("--model", "mlp", "--hidden", "8", "--ring", ring, "--log-every", "1")
    p0 = trainer(tag, sock, "job-" + tag, w=0, W=2, extra=extra)
    p1 = trainer(tag, sock, "job-" + tag, w=1, W=2, extra=extra)
    wait_for_log(tag, "trainer0", "step 3:", p0, "%s: worker 0 did not train" % tag)
    p1.send_signal(signal.SIGSTOP)
    time.sleep(0.5)
    p0.send_signal(signal.SIGTERM)
    time.sleep(1.0)
    if p0.poll() is not None or TRAINER_STOPPED in read_log(tag, "trainer0"):
        fail("%s: the first SIGTERM stopped worker 0 at once (exit %r), not at a step every worker runs:\n%s"
             % (tag, p0.poll(), read_log(tag, "trainer0")[-1500:]))
    took = stop_and_check(tag, "trainer0", p0, signal.SIGTERM, TRAINER_STOPPED, 128 + signal.SIGTERM,
                          "a worker waiting in the all-reduce, signalled twice")
    p1.send_signal(signal.SIGCONT)
    p1.send_signal(signal.SIGTERM)
    try:
        p1.wait(timeout=EXIT_WAIT)
    except subprocess.TimeoutExpired:
        fail("%s: worker 1 did not stop" % tag)
    stop_and_check(tag, "feeder", f, signal.SIGTERM, FEEDER_STOPPED, 0, "the ring case's feeder")
    ok("a worker waiting in the all-reduce for a stopped peer: the first SIGTERM waits for the workers to agree, "
       "the second ends the wait in %.3f s, exit 143" % took)


def case_trainer_ring_grace(files):
    """The same with a 2 s --timeout-ms and one SIGTERM: the grace (or the
    ring's own timeout on the silent peer, the same length) ends the wait,
    and the worker stops as a signal stops it (exit 143)."""
    harness.case()
    tag = "ring-grace"
    f, sock = feeder(tag, write_job("job-" + tag, files))
    ring = ring_endpoints(2)
    extra = ("--model", "mlp", "--hidden", "8", "--ring", ring, "--log-every", "1", "--timeout-ms", "2000")
    p0 = trainer(tag, sock, "job-" + tag, w=0, W=2, extra=extra)
    p1 = trainer(tag, sock, "job-" + tag, w=1, W=2, extra=extra)
    wait_for_log(tag, "trainer0", "step 3:", p0, "%s: worker 0 did not train" % tag)
    p1.send_signal(signal.SIGSTOP)
    sent = time.time()
    p0.send_signal(signal.SIGTERM)
    try:
        code = p0.wait(timeout=EXIT_WAIT)
    except subprocess.TimeoutExpired:
        fail("%s: worker 0 still running %d s after SIGTERM (the grace is 2 s)" % (tag, EXIT_WAIT))
    at = line_time(tag, "trainer0", TRAINER_STOPPED)
    if code != 128 + signal.SIGTERM or at is None or not 1.0 < at - sent < 2.0 + BOUND:
        fail("%s: exit %d, '%s' %s s after SIGTERM (expected 143, after 1 to %.0f s):\n%s"
             % (tag, code, TRAINER_STOPPED, None if at is None else "%.3f" % (at - sent), 2.0 + BOUND,
                read_log(tag, "trainer0")[-1500:]))
    p1.send_signal(signal.SIGCONT)
    p1.send_signal(signal.SIGTERM)
    try:
        p1.wait(timeout=EXIT_WAIT)
    except subprocess.TimeoutExpired:
        fail("%s: worker 1 did not stop" % tag)
    stop_and_check(tag, "feeder", f, signal.SIGTERM, FEEDER_STOPPED, 0, "the grace case's feeder")
    ok("a worker waiting in the all-reduce for a stopped peer, one SIGTERM, --timeout-ms 2000: stopped after "
       "%.3f s (the grace), exit 143" % (at - sent))


def case_trainer_reconnect(files):
    """Waiting for a lost feeder to come back (--reconnect-s)."""
    harness.case()
    tag = "reconnect"
    f, sock = feeder(tag, write_job("job-" + tag, files))
    p = trainer(tag, sock, "job-" + tag, extra=("--timeout-ms", "1000", "--reconnect-s", "600"))
    wait_for_log(tag, "feeder", "worker 0 connected", p, "%s: the trainer did not connect" % tag)
    f.kill()
    f.wait()
    wait_for_log(tag, "trainer0", "waiting up to", p, "%s: the trainer did not wait for its feeder" % tag)
    took = stop_and_check(tag, "trainer0", p, signal.SIGTERM, TRAINER_STOPPED, 128 + signal.SIGTERM,
                          "a trainer waiting for a lost feeder")
    ok("a trainer waiting for a lost feeder to return: SIGTERM ends the wait in %.3f s, exit 143" % took)


def case_feeder_idle(files):
    """A feeder serving nobody, and one whose trainer stopped (no credit)."""
    harness.case()
    tag = "fidle"
    f, _ = feeder(tag, write_job("job-" + tag, files))
    time.sleep(0.5)
    took = stop_and_check(tag, "feeder", f, signal.SIGINT, FEEDER_STOPPED, 0, "a feeder with no trainer")
    harness.case()
    tag = "fblocked"
    f, sock = feeder(tag, write_job("job-" + tag, files))
    p = trainer(tag, sock, "job-" + tag)
    wait_for_log(tag, "feeder", "worker 0 connected", p, "%s: the trainer did not connect" % tag)
    time.sleep(0.5)
    p.send_signal(signal.SIGSTOP)
    time.sleep(0.5)
    took2 = stop_and_check(tag, "feeder", f, signal.SIGTERM, FEEDER_STOPPED, 0, "a feeder blocked on credits")
    p.send_signal(signal.SIGCONT)
    p.kill()
    p.wait()
    ok("a feeder serving nobody (SIGINT: %.3f s) or blocked on a stopped trainer's credits (SIGTERM: %.3f s) "
       "stops at once, exit 0" % (took, took2))


def case_feeder_refusing():
    """A feeder that failed at start refuses HELLOs for --timeout-ms: a
    signal ends that too (exit 1: it had failed)."""
    harness.case()
    tag = "frefuse"
    bad = os.path.join(TMP, "bad.tfrecord")
    with open(bad, "wb") as fh:
        fh.write(b"\x10\x00\x00\x00\x00\x00\x00\x00garbage-not-a-crc")
    f, _ = feeder(tag, write_job("job-" + tag, [bad]), extra=("--timeout-ms", "600000"), ready=None)
    wait_for_log(tag, "feeder", "error", f, "%s: the feeder did not fail" % tag)
    time.sleep(0.5)
    if f.poll() is not None:
        fail("%s: the feeder exited before the signal (it should refuse HELLOs for a while):\n%s"
             % (tag, read_log(tag, "feeder")))
    sent = time.time()
    f.send_signal(signal.SIGTERM)
    try:
        code = f.wait(timeout=EXIT_WAIT)
    except subprocess.TimeoutExpired:
        fail("%s: still running after SIGTERM" % tag)
    took = time.time() - sent
    if code != 1 or took > BOUND + 1:
        fail("%s: a failed feeder refusing HELLOs: exit %d %.3f s after SIGTERM (want 1 within %.1f s)"
             % (tag, code, took, BOUND + 1))
    ok("a failed feeder refusing HELLOs stops on SIGTERM in %.3f s (process exit), exit 1" % took)


def main():
    files = bed.gen("d", 400, 2, seed=5)
    case_trainer_welcome()
    case_trainer_pieces(files)
    case_trainer_rendezvous()
    case_trainer_ring(files)
    case_trainer_ring_grace(files)
    case_trainer_reconnect(files)
    case_feeder_idle(files)
    case_feeder_refusing()
    bed.finish()


if __name__ == "__main__":
    try:
        main()
    finally:
        harness.stop_all()
        bed.cleanup()
