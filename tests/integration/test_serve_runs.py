#!/usr/bin/env python3
"""Integration: sluice-feeder --serve-runs (issue #29 item 2). Real
sluice-feeder and sluice-trainer processes over an ipc socket.

Without the flag a feeder exits 0 once every worker has had its END; with
it, the run's end binds the socket anew and the next trainers get a new run
of the job from its first piece, the same stream, over the same scan
(one "listening on ... scanning" line, one "serving job" per run); the
cluster shape is each run's first trainer's; a signal ends it with 0 and
--idle-exit with 3, counted from the last run's start.

Usage: test_serve_runs.py BUILD_DIR     (prints "N passed, 0 failed" at the end)
"""
import json
import os
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bed  # noqa: E402
import harness  # noqa: E402
from bed import log_path, read_log, wait, wait_for_log  # noqa: E402
from harness import fail, ok, spawn  # noqa: E402

bed.setup(sys.argv[1], "serveruns")
FEEDER, TRAINER, TMP = bed.FEEDER, bed.TRAINER, bed.TMP
NREC = 60


def feeder(tag, job_path, extra=()):
    sock = "ipc://%s/%s.sock" % (TMP, tag)
    p = spawn([FEEDER, "--job", job_path, "--listen", sock, "--threads", "1", "--heartbeat-ms", "200"] + list(extra),
              log=log_path(tag, "feeder"))
    return p, sock


def run_trainers(tag, sock, job, workers):
    """One run: `workers` trainers, each to its end; every one's steps as
    [(epoch, [ids])...] from its --trace."""
    procs = []
    for w in range(workers):
        trace = os.path.join(TMP, "%s-w%d.jsonl" % (tag, w))
        p = spawn([TRAINER, "--connect", sock, "--job", job["name"], "--trace", trace, "--heartbeat-ms", "200",
                   "--worker", str(w), "--workers", str(workers)],
                  log=log_path(tag, "trainer%d" % w), stdout=subprocess.DEVNULL)
        procs.append((p, trace))
    out = []
    for w, (p, trace) in enumerate(procs):
        if wait(p, 60, "%s: trainer %d" % (tag, w)) != 0:
            fail("%s: trainer %d exited %d: %s" % (tag, w, p.returncode, read_log(tag, "trainer%d" % w)[-2000:]))
        with open(trace) as f:
            out.append([(d.get("epoch"), d.get("ids", [])) for d in map(json.loads, f)])
    return out


def case_runs(files):
    harness.case()
    tag = "runs"
    job_path, job = bed.write_job("job-" + tag, files, epochs=2, shuffle={"buffer": 16, "seed": 3})
    f, sock = feeder(tag, job_path, ("--serve-runs",))
    wait_for_log(tag, "feeder", "serving job", f, "runs: the feeder did not serve")
    first = run_trainers(tag + "1", sock, job, 1)
    ids = [i for _, xs in first[0] for i in xs]
    if len(ids) != 2 * NREC or sorted(ids) != sorted(list(range(NREC)) * 2):
        fail("runs: run 1 should hold every id once per epoch, got %d ids" % len(ids))
    again = run_trainers(tag + "2", sock, job, 1)
    if again != first:
        fail("runs: run 2 should be run 1's stream again, from its first piece")
    # run 3 with another shape: two workers, the ids split between them
    two = run_trainers(tag + "3", sock, job, 2)
    both = [i for w in two for _, xs in w for i in xs]
    if sorted(both) != sorted(list(range(NREC)) * 2) or not two[0] or not two[1]:
        fail("runs: run 3 (2 workers) should split every id once per epoch, got %d ids" % len(both))
    wait_for_log(tag, "feeder", "--serve-runs: run 3 served; the next trainers get run 4", f,
                 "runs: the feeder should log the end of run 3")
    if f.poll() is not None:
        fail("runs: the feeder exited (%d) between runs" % f.returncode)
    f.send_signal(signal.SIGTERM)
    code = wait(f, 30, "runs: feeder")
    flog = read_log(tag, "feeder")
    if code != 0:
        fail("runs: SIGTERM between runs should end the feeder with 0, got %d" % code)
    if flog.count("listening on ") != 1 or flog.count("serving job ") != 4:
        fail("runs: one scan and four 'serving job' lines expected:\n%s" % flog[-3000:])
    ok("--serve-runs: three runs from one feeder and one scan (the second the first's stream again, the third "
       "of 2 workers), SIGTERM between runs exits 0")


def case_idle_after_run(files):
    harness.case()
    tag = "idle"
    job_path, job = bed.write_job("job-" + tag, files, epochs=1)
    f, sock = feeder(tag, job_path, ("--serve-runs", "--idle-exit", "1"))
    wait_for_log(tag, "feeder", "serving job", f, "idle: the feeder did not serve")
    run_trainers(tag + "1", sock, job, 1)
    code = wait(f, 30, "idle: feeder")
    flog = read_log(tag, "feeder")
    if code != 3 or "idle: no trainer connected for 1 s (--idle-exit 1)" not in flog \
            or "the next trainers get run 2" not in flog:
        fail("idle: after run 1, no trainer for 1 s should stop the feeder with 3, got %d:\n%s" % (code, flog[-2000:]))
    ok("--serve-runs --idle-exit 1: no trainer for the next run stops the feeder with exit status 3")


def case_without(files):
    harness.case()
    tag = "once"
    job_path, job = bed.write_job("job-" + tag, files, epochs=1)
    f, sock = feeder(tag, job_path)
    wait_for_log(tag, "feeder", "serving job", f, "once: the feeder did not serve")
    run_trainers(tag + "1", sock, job, 1)
    if wait(f, 30, "once: feeder") != 0 or "--serve-runs" in read_log(tag, "feeder"):
        fail("once: without --serve-runs the feeder should exit 0 after its run, got %s" % f.returncode)
    ok("without --serve-runs the feeder exits 0 after one run")


def main():
    files = bed.gen("data", NREC, 2, seed=4)
    case_runs(files)
    case_idle_after_run(files)
    case_without(files)
    bed.finish()


if __name__ == "__main__":
    try:
        main()
    finally:
        bed.cleanup()
