#!/usr/bin/env python3
"""Integration: a feeder takes turns between its trainers (feed__schedule's
round robin). One decode thread and a costly map make the feeder the
bottleneck; two sluice-trainer workers that do not wait for each other
(--model none, no all-reduce) consume as fast as pieces come. Each task
that frees must go to the next trainer in turn: when the first trainer
ends, the other has had most of its stream too. Before the fix, every call
began again at connection 0, which took every free task while it had
credits: worker 1 had none of its pieces when worker 0 ended (0 of 320 in
two runs), and ended twice as late.

Usage: test_fair.py BUILD_DIR
"""
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bed  # noqa: E402
import harness  # noqa: E402
from harness import fail, ok  # noqa: E402

SIDE = 512


def pieces(path):
    """Whole lines of the trace but its summary."""
    try:
        with open(path) as f:
            return sum(1 for line in f if line.endswith("\n") and '"summary"' not in line)
    except OSError:
        return 0


def main():
    bed.setup(sys.argv[1], "fair")
    files = bed.gen("d", 256, 4, image_bytes=SIDE * SIDE * 3)
    job_path, _ = bed.write_job(
        "fair", files, epochs=20, global_batch_size=16, prefetch=4,
        features=dict(bed.FEATURES, image={"dtype": "uint8", "shape": [SIDE, SIDE, 3], "from": "bytes"}),
        map=[{"op": "random_resized_crop", "feature": "image", "size": [16, 16], "scale": [0.5, 1.0]}])
    sock = "ipc://%s/f.sock" % bed.TMP
    f = harness.spawn([bed.FEEDER, "--job", job_path, "--listen", sock, "--threads", "1", "--workers", "2", "--replicas", "1"],
                      log=bed.log_path("fair", "feeder"))
    bed.wait_for_log("fair", "feeder", "serving job", f, "the feeder did not start")
    trainers = []
    for w in range(2):
        trace = os.path.join(bed.TMP, "trace%d.jsonl" % w)
        p = harness.spawn([bed.TRAINER, "--connect", sock, "--job", "fair", "--worker", str(w), "--workers", "2",
                           "--model", "none", "--trace", trace], log=bed.log_path("fair", "trainer%d" % w),
                          stdout=subprocess.DEVNULL)
        trainers.append((p, trace))
    deadline = time.time() + 120
    first = None
    while first is None:
        for w, (p, trace) in enumerate(trainers):
            if p.poll() is not None:
                other = trainers[1 - w][1]
                first = (w, pieces(trace), pieces(other))
                break
        if time.time() > deadline:
            fail("no trainer ended within 120 s")
        time.sleep(0.002)
    for w, (p, _) in enumerate(trainers):
        if bed.wait(p, 120, "trainer %d" % w) != 0:
            fail("trainer %d failed:\n%s" % (w, bed.read_log("fair", "trainer%d" % w)[-2000:]))
    if bed.wait(f, 30, "the feeder") != 0:
        fail("the feeder failed")
    w, total, had = first
    # the other's trace had `had` pieces when the first one's was whole
    if total <= 0 or had < 0.75 * total:
        fail("worker %d ended with %d pieces while worker %d had %d of its %d: the feeder served them in turn, "
             "not in turns" % (w, total, 1 - w, had, total))
    ok("the feeder takes turns: when worker %d ended (%d pieces), worker %d had %d" % (w, total, 1 - w, had))
    bed.finish()


if __name__ == "__main__":
    try:
        main()
    finally:
        harness.stop_all()
        bed.cleanup()
