#!/usr/bin/env python3
"""A feeder waits for a worker killed after its END (sluice-feeder
--end-wait-s, docs/feeder.md "Exit status"), on real processes: one
sluice-feeder (heartbeat 200 ms, --timeout-ms 1000) serving one worker a
job of 96 records in batches of 8 (12 steps, one epoch) with a window as
wide as the stream (prefetch 16, the trainer's 64 credits), and
sluice-trainer --model none pacing its steps, so that the feeder has sent
every piece and its END long before the trainer has taken them.

1. An uninterrupted trainer: the reference trace; the feeder ends after
   its BYE (no "never said BYE" line).
2. The trainer (--checkpoint every step) SIGKILLed after the feeder's END,
   at step 6 or later, the shape fixed (--workers 1 --replicas 1); 3 s later (past --timeout-ms, the feeder's whole
   wait before --end-wait-s) the feeder still serves, and a trainer
   restored from the last checkpoint gets exactly the remaining pieces:
   the killed run's trace up to the checkpoint and the restored run's are
   the reference, every record once. The feeder then ends with status 0.
3. The trainer killed after the END and nobody coming back, --end-wait-s
   2: the feeder ends with status 0 no sooner than 2 s after it dropped the
   connection, with a line naming worker 0 as never having said BYE; with
   --end-wait-s 0 it ends at once (well within --timeout-ms 5000). The
   shape is the trainer's, killed before it returned a credit: a drop after
   the END holds the shape as a BYE does (else it was released and the
   feeder waited for a new first trainer for ever).
   With --serve-runs, run 1 ends after the wait (naming worker 0) and run
   2 serves a new trainer the whole job.
4. --end-wait-s refused when hostile: -1, 86401, 10^30, 1.5, abc, empty
   (exit status 2, the option named).

Usage: test_end_wait.py BUILD_DIR [FEEDER_BUILD_DIR]
"""
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bed  # noqa: E402
import harness  # noqa: E402
from harness import fail, ok  # noqa: E402

RECORDS, G, STEPS = 96, 8, 12


def feeder(tag, job_path, *extra):
    sock = "ipc://%s/%s.sock" % (bed.TMP, tag)
    p = harness.spawn([bed.FEEDER, "--job", job_path, "--listen", sock, "--threads", "1", "--heartbeat-ms", "200"]
                      + list(extra), log=bed.log_path(tag, "feeder"))
    bed.wait_for_log(tag, "feeder", "serving job", p, "%s: the feeder did not start" % tag)
    return p, sock


def trainer(tag, who, sock, name, *extra):
    trace = os.path.join(bed.TMP, "%s-%s.jsonl" % (tag, who))
    p = harness.spawn([bed.TRAINER, "--connect", sock, "--job", name, "--model", "none", "--devices", "cpu:1",
                       "--trace", trace, "--heartbeat-ms", "200", "--timeout-ms", "5000"] + list(extra),
                      log=bed.log_path(tag, who), stdout=subprocess.DEVNULL)
    return p, trace


def pieces(path, below=None):
    """The trace's (epoch, step, seq, ids) per piece (seq < below when given)."""
    out = []
    with open(path) as f:
        for line in f:
            if not line.endswith("\n"):
                break
            x = json.loads(line)
            if "summary" not in x and (below is None or x["seq"] < below):
                out.append((x["epoch"], x["step"], x["seq"], x["ids"]))
    return out


def kill_after_end(tag, p, ck=None, at=0):
    """SIGKILL p once the feeder has sent its END (and, with ck, once a
    checkpoint of step >= at is there); the feeder's drop waited for."""
    deadline = time.time() + 60
    while ck is not None and not any(n.startswith("ckpt-") and int(n[5:17]) >= at
                                     for n in (os.listdir(ck) if os.path.isdir(ck) else [])):
        if p.poll() is not None or time.time() > deadline:
            fail("%s: the trainer ended or stalled before its checkpoint of step %d" % (tag, at))
        time.sleep(0.005)
    bed.wait_for_log(tag, "feeder", "worker 0: end of data", p, "%s: the feeder sent no END" % tag)
    if p.poll() is not None:
        fail("%s: the trainer ended before it could be killed" % tag)
    p.send_signal(signal.SIGKILL)
    p.wait()
    bed.wait_for_log(tag, "feeder", "said no BYE: it may come back", None,
                     "%s: the feeder did not drop the killed trainer" % tag)
    return time.monotonic()


def main():
    bed.setup(sys.argv[1], "end-wait")
    if len(sys.argv) > 2:
        bed.use_binaries(sys.argv[2])
    try:
        files = bed.gen("d", RECORDS, 3)
        job_path, job = bed.write_job("endwait", files, epochs=1, global_batch_size=G, prefetch=16)
        name = job["name"]

        # 1. the reference
        harness.case()
        f, sock = feeder("whole", job_path, "--timeout-ms", "1000")
        p, t = trainer("whole", "trainer", sock, name)
        if bed.wait(p, 60, "whole: the trainer") != 0:
            fail("whole: the trainer failed")
        if bed.wait(f, 30, "whole: the feeder") != 0:
            fail("whole: the feeder failed")
        ref = pieces(t)
        flog = bed.read_log("whole", "feeder")
        if [x[2] for x in ref] != list(range(STEPS)) or sorted(i for x in ref for i in x[3]) != list(range(RECORDS)):
            fail("whole: the reference run is not every record once in %d steps: %s" % (STEPS, [x[:3] for x in ref]))
        if "said goodbye" not in flog or "never said BYE" in flog:
            fail("whole: the feeder's end is not after the trainer's BYE:\n" + flog[-2000:])
        ok("uninterrupted: %d steps, every record once; the feeder ends after the BYE" % STEPS)

        # 2. killed after the END, restored after --timeout-ms
        harness.case()
        tag = "resume"
        ck = os.path.join(bed.TMP, "ckpt")
        f, sock = feeder(tag, job_path, "--workers", "1", "--replicas", "1", "--timeout-ms", "1000",
                         "--end-wait-s", "30")
        p, t1 = trainer(tag, "trainer", sock, name, "--checkpoint", ck, "--checkpoint-every", "1",
                        "--step-ms", "150")
        dropped = kill_after_end(tag, p, ck, 6)
        time.sleep(3.0)
        if f.poll() is not None:
            fail("%s: the feeder ended %.1f s after dropping the killed trainer (status %d), before --end-wait-s 30:"
                 "\n%s" % (tag, time.monotonic() - dropped, f.returncode, bed.read_log(tag, "feeder")[-2000:]))
        step = max(int(n[5:17]) for n in os.listdir(ck) if n.startswith("ckpt-"))
        if step >= STEPS:
            fail("%s: the killed trainer had checkpointed its last step (%d)" % (tag, step))
        q, t2 = trainer(tag, "restored", sock, name, "--restore", ck, "--connect-timeout", "10")
        if bed.wait(q, 60, "%s: the restored trainer" % tag) != 0:
            fail("%s: the restored trainer failed:\n%s" % (tag, bed.read_log(tag, "restored")[-2000:]))
        if bed.wait(f, 30, "%s: the feeder" % tag) != 0:
            fail("%s: the feeder failed" % tag)
        head, tail = pieces(t1, below=step), pieces(t2)
        if head + tail != ref:
            fail("%s: killed after its checkpoint of step %d: seqs %s + %s, want the reference's %s"
                 % (tag, step, [x[2] for x in head], [x[2] for x in tail], [x[2] for x in ref]))
        if "never said BYE" in bed.read_log(tag, "feeder"):
            fail("%s: the feeder says a worker never said BYE though it came back" % tag)
        ok("killed after the END, restored from step %d 3 s later (past --timeout-ms 1000): the remaining %d "
           "pieces exactly, the reference's" % (step, len(tail)))

        # 3. nobody comes back
        for wait_s, lo, hi in ((2, 1.8, 8.0), (0, 0.0, 3.0)):
            harness.case()
            tag = "gone%d" % wait_s
            f, sock = feeder(tag, job_path, "--timeout-ms", "5000", "--end-wait-s", str(wait_s))
            p, _ = trainer(tag, "trainer", sock, name, "--step-ms", "100")
            dropped = kill_after_end(tag, p)
            if bed.wait(f, 30, "%s: the feeder" % tag) != 0:
                fail("%s: the feeder failed" % tag)
            took = time.monotonic() - dropped
            flog = bed.read_log(tag, "feeder")
            want = "worker 0 had its END but never said BYE"
            if not lo <= took <= hi:
                fail("%s: the feeder ended %.2f s after dropping the killed trainer, want %g-%g s" % (tag, took, lo, hi))
            if want not in flog or "within --end-wait-s %d" % wait_s not in flog:
                fail("%s: no line naming worker 0 (%r):\n%s" % (tag, want, flog[-2000:]))
            # dropped once: the heartbeat that found it gone ends its tick
            # (the STATS and END after it were sent to the dropped
            # connection too, each dropping it again and restarting the wait)
            drops = [ln for ln in flog.splitlines() if "and was dropped" in ln]
            if len(drops) != 1:
                fail("%s: the killed trainer dropped %d times:\n%s" % (tag, len(drops), "\n".join(drops)))
            ok("--end-wait-s %d, nobody back: the feeder ends %.1f s after the drop, naming worker 0" % (wait_s, took))

        # 3b. --serve-runs: the run ends after the wait, the next run is served whole
        harness.case()
        tag = "runs"
        f, sock = feeder(tag, job_path, "--serve-runs", "--timeout-ms", "5000", "--end-wait-s", "1")
        p, _ = trainer(tag, "trainer", sock, name, "--step-ms", "100")
        kill_after_end(tag, p)
        bed.wait_for_log(tag, "feeder", "the next trainers get run 2", f, "%s: run 2 did not start" % tag)
        flog = bed.read_log(tag, "feeder")
        if flog.find("worker 0 had its END but never said BYE") > flog.find("the next trainers get run 2"):
            fail("%s: run 1 ended without naming worker 0 first:\n%s" % (tag, flog[-2000:]))
        q, t = trainer(tag, "run2", sock, name)
        if bed.wait(q, 60, "%s: run 2's trainer" % tag) != 0 or pieces(t) != ref:
            fail("%s: run 2's trainer did not get the whole job:\n%s" % (tag, bed.read_log(tag, "run2")[-2000:]))
        if f.poll() is not None:
            fail("%s: the --serve-runs feeder ended" % tag)
        f.send_signal(signal.SIGTERM)
        if bed.wait(f, 30, "%s: the feeder" % tag) != 0:
            fail("%s: the --serve-runs feeder stopped by SIGTERM exited %d" % (tag, f.returncode))
        ok("--serve-runs --end-wait-s 1: run 1 ends 1 s after the killed trainer's drop, naming it; run 2 is "
           "served whole")

        # 4. hostile values
        harness.case()
        for bad in ("-1", "86401", "1" + "0" * 30, "1.5", "abc", ""):
            r = subprocess.run([bed.FEEDER, "--job", job_path, "--listen", "ipc://%s/h.sock" % bed.TMP,
                                "--end-wait-s=" + bad], capture_output=True, text=True, timeout=30)
            if r.returncode != 2 or "--end-wait-s" not in r.stderr:
                fail("--end-wait-s=%r: exit %d, %r" % (bad, r.returncode, r.stderr[-500:]))
        ok("--end-wait-s refused when negative, too large, huge, fractional, not a number, empty")
    finally:
        harness.stop_all()
    bed.finish()
    bed.cleanup()


main()
