#!/usr/bin/env python3
"""Cluster test: a feeder reading its files from a web server on another
host (issue #28 section 2), with the server's cable cut.

Host s0 runs Debian's nginx serving indexed TFRecord shards; host f0 runs a
feeder whose job lists their http:// URLs (use_index: the scan reads the
URL.idx files, and each object is fetched at its first access) and a
trainer. s0's link is shaped to 50 Mbit/s (tc tbf) so that the fetches take
seconds.

1. The cable cut while the feeder fetches (once s0 has sent 1 MB of the
   objects), and mended 2.5 s later: the
   transfers stall (--remote-stall-timeout-ms 800) and are retried; while
   the cable is out the connections fail (--remote-connect-timeout-ms 800)
   and are retried with backoff; once it is back each retry resumes at the
   first byte not received (nginx's log shows a range from the middle of
   an object). The trainer's trace equals the reference model's, piece for
   piece.
2. The cable cut for good: the feeder gives up after its retries (2),
   naming the URL and the attempts, within seconds: no hang.

Usage: test_cluster_remote.py BUILD_DIR   (root; exit 77 where namespaces
cannot be made; prints "N passed, 0 failed")
"""
import os
import subprocess
import sys
import time

from common import (RECORD, check_trace, cleanup, fail, finish, harness, ids_of, netns, ok, path, read_log, reference,
                    start_feeder, start_trainer, wait_all, wait_for_log, write_job)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nginx  # noqa: E402

RECORDS, SHARDS = 16000, 4
FEATURES = {"image": {"dtype": "uint8", "shape": [1000], "from": "bytes"},
            "label": {"dtype": "int64", "shape": []}, "id": {"dtype": "int64", "shape": []}}
RETRY = ("--remote-connect-timeout-ms", "800", "--remote-stall-timeout-ms", "800", "--remote-backoff-ms", "100",
         "--remote-backoff-max-ms", "400")


def main():
    net = netns.require(["s0", "f0"])
    p = net.run("s0", ["tc", "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate", "50mbit", "burst", "64kb",
                       "latency", "50ms"], capture_output=True, text=True)
    if p.returncode != 0:
        net.down()
        print("SKIP: cannot shape a link here (tc qdisc tbf): %s" % p.stderr.strip())
        sys.exit(netns.SKIP)
    www = path("www")
    subprocess.run([RECORD, "gen", "--output-dir", www, "--records", str(RECORDS), "--shards", str(SHARDS), "--seed",
                    "11", "--image-bytes", "1000", "--prefix", "part", "--index"], check=True, capture_output=True)
    files = sorted(f for f in os.listdir(www) if f.startswith("part-") and not f.endswith(".idx"))
    ids = ids_of([os.path.join(www, f) for f in files])
    try:
        srv = nginx.start(www, host="s0", net=net)
    except (nginx.Unavailable, RuntimeError) as e:
        fail(str(e))
    urls = [srv.url_of(f) for f in files]

    # 1. cut while fetching, mended within the retries
    harness.case()
    job_path, job = write_job("remote", urls, epochs=2, use_index=True, features=FEATURES, global_batch_size=64)
    fp, ep, flog = start_feeder(net, "f0", job_path, 5800, tag="mend", insecure=True,
                                extra=("--remote-retries", "20") + RETRY)
    wait_for_log(flog, "serving job", fp, "mend: the feeder did not start")
    tp, trace, tlog = start_trainer(net, "f0", [ep], "remote", 0, 1, 1, tag="mend", insecure=True,
                                    extra=("--model", "none"))
    # cut once the objects' bytes flow: 1 MB of 16 sent (about 0.2 s at 50 Mbit/s)
    tx0, deadline = net.link_bytes("s0")[1], time.time() + 30
    while net.link_bytes("s0")[1] - tx0 < 1 << 20:
        if time.time() > deadline or tp.poll() is not None:
            fail("mend: s0 sent no MB within 30 s (trainer %s):\n%s" % (tp.poll(), read_log(flog)[-1500:]))
        time.sleep(0.02)
    net.cut("s0")
    time.sleep(2.5)
    net.mend("s0")
    if wait_all([tp], 120, "mend: trainer")[0] != 0:
        fail("mend: the trainer failed:\n%s\nfeeder:\n%s" % (read_log(tlog)[-1500:], read_log(flog)[-1500:]))
    if wait_all([fp], 30, "mend: feeder")[0] != 0:
        fail("mend: the feeder failed:\n%s" % read_log(flog)[-2000:])
    check_trace("mend", 0, trace, reference(job, [len(x) for x in ids], 1, 1), ids)
    resumed = [r for r in srv.requests() if r["method"] == "GET" and r["range"] and
               not r["range"].startswith("bytes=0-") and not r["uri"].endswith(".idx")]
    if not resumed:
        fail("mend: no request resumed an object from its middle (the cut met no transfer?): %s" %
             [(r["uri"], r["range"], r["status"]) for r in srv.requests()])
    ok("s0's cable cut 2.5 s while the feeder fetched: retried and resumed (%s %s), the trace equals the model's" %
       (resumed[0]["uri"], resumed[0]["range"]))

    # 2. cut for good: a clear error within the bound, no hang
    harness.case()
    net.cut("s0")
    t0 = time.time()
    fp, ep, flog = start_feeder(net, "f0", job_path, 5801, tag="gone", insecure=True,
                                extra=("--remote-retries", "2") + RETRY)
    code = wait_all([fp], 60, "gone: feeder")[0]
    took = time.time() - t0
    log = read_log(flog)
    url = urls[0].rsplit("/", 1)[0] + "/part-"
    if code == 0 or "(3 attempts)" not in log or url not in log:
        fail("gone: feeder exit %d after %.1f s, its log lacks the URL and the 3 attempts:\n%s" % (code, took,
                                                                                                    log[-2000:]))
    line = [x for x in log.splitlines() if "(3 attempts)" in x][0]
    ok("s0's cable cut for good: the feeder gave up after its retries in %.1f s: %s" % (took, line[line.find("open("):]))
    net.mend("s0")
    srv.stop()
    finish(net)


if __name__ == "__main__":
    try:
        main()
    finally:
        cleanup()
