#!/usr/bin/env python3
"""A libsluice client used after fork() (issue #24 item A.4).

A real sluice-feeder serves a job; tests/client_fork (the public C API)
takes 3 steps and forks while it holds the third, with the feeder's
shared memory mapped and with no_shm. In the child, next_step, keep_step
and keepalive must fail at once with SLUICE_EINVAL and the message
"client used after fork(): create a new client in the child (this one
belongs to process PID)", handing out nothing; its close must return at
once (it closes no socket: ZeroMQ's threads did not follow the fork). The
parent then takes the rest of the stream: every piece of the reference
model exactly once, in order, the shared-memory ones too, and the feeder
ends cleanly. Before the fix the child got the parent's next step (no_shm)
or buffers the feeder had reused (shm).

Usage: test_client_fork.py BUILD_DIR     (prints "N passed, 0 failed" at the end)
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bed  # noqa: E402
import harness  # noqa: E402
from harness import fail, ok, spawn  # noqa: E402

R = 2
EINVAL = -3


def main():
    bed.setup(sys.argv[1], "fork")
    files = bed.gen("d", 120, 3)
    _, job = bed.write_job("job-fork", files, epochs=2, global_batch_size=8)
    ids = {}
    for f in files:
        out = subprocess.run([bed.RECORD, "cat", "--decode", "example", f], check=True, capture_output=True,
                             text=True).stdout
        ids[f] = [int(json.loads(x)["example"]["features"]["feature"]["id"]["int64List"]["value"][0])
                  for x in out.splitlines()]
    counts = [len(ids[f]) for f in files]
    ref = bed.reference(job, counts, 1, R)[0]
    want = [(x["seq"], x["epoch"], x["step"], x["replica"], [ids[files[fi]][r] for fi, r in x["elems"]])
            for x in ref]
    prog = os.path.join(bed.BUILD, "tests", "client_fork")
    for mode in ("shm", "no_shm"):
        harness.case()
        tag = mode
        ep = "ipc://%s/%s.sock" % (bed.TMP, tag)
        feeder = spawn([bed.FEEDER, "--job", os.path.join(bed.TMP, "job-fork.json"), "--listen", ep, "--threads", "1",
                        "--heartbeat-ms", "200", "--timeout-ms", "10000"], log=bed.log_path(tag, "feeder"))
        bed.wait_for_log(tag, "feeder", "serving job", feeder, "%s: the feeder did not start" % tag)
        client = spawn([prog, ep, job["name"], str(R), mode], log=bed.log_path(tag, "client-stderr"),
                       stdout=open(bed.log_path(tag, "client"), "w"))
        code = bed.wait(client, 60, "%s: client_fork" % tag)
        lines = [json.loads(x) for x in open(bed.log_path(tag, "client"))]
        if code != 0:
            fail("%s: client_fork exited %d: %s\n%s" % (tag, code, bed.read_log(tag, "client-stderr"), lines[-5:]))
        pid = lines[0]["pid"]
        child = next((x["child"] for x in lines if "child" in x), None)
        exits = [x["child_exit"] for x in lines if "child_exit" in x]
        msg = ("client used after fork(): create a new client in the child (this one belongs to process %d)" % pid)
        if exits != [0] or child is None:
            fail("%s: the child exited %r (a hang ends in SIGALRM), said %r" % (tag, exits, child))
        for call in ("next_step", "keep", "keepalive"):
            got = (child[call], child["message" if call == "next_step" else call + "_message"])
            if got != (EINVAL, msg):
                fail("%s: the child's %s returned %r, want (%d, %r)" % (tag, call, got, EINVAL, msg))
        if child["pieces_untouched"] != 1:
            fail("%s: the child was handed pieces" % tag)
        if child["close_ms"] > 500:
            fail("%s: the child's close took %.1f ms" % (tag, child["close_ms"]))
        ok("%s: in the forked child next_step, keep_step and keepalive fail at once with EINVAL %r; "
           "close returns in %.1f ms" % (tag, msg, child["close_ms"]))
        pieces = [(x["seq"], x["epoch"], x["step"], x["replica"], x["ids"]) for x in lines if "seq" in x]
        if pieces != want:
            for i, (a, b) in enumerate(zip(pieces, want)):
                if a != b:
                    fail("%s: the parent's piece %d is %r, want %r" % (tag, i, a, b))
            fail("%s: the parent got %d pieces, want %d" % (tag, len(pieces), len(want)))
        shm = sum(x["shm"] for x in lines if "seq" in x)
        if (mode == "shm") != (shm > 0) or not lines[-1].get("end"):
            fail("%s: %d pieces through shared memory, end %r" % (tag, shm, lines[-1]))
        fcode = bed.wait(feeder, 30, "%s: the feeder" % tag)
        if fcode != 0:
            fail("%s: the feeder exited %d:\n%s" % (tag, fcode, bed.read_log(tag, "feeder")[-2000:]))
        ok("%s: the parent, after the fork, took the whole stream: %d pieces exactly as the model, %d through "
           "shared memory; the feeder ended cleanly" % (tag, len(pieces), shm))
    bed.finish()


if __name__ == "__main__":
    try:
        main()
    finally:
        bed.cleanup()
