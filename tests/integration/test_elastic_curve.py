#!/usr/bin/env python3
"""Elastic workers with CURVE (sluice-trainer --elastic with --curve-key;
docs/trainer.md "Elastic workers", docs/security.md): every link of the
job over tcp on 127.0.0.1, each encrypted with the job's keys.

One feeder with its key pair (--curve-key, --curve-allow holding the
trainer key) serves test_elastic.py's 3-epoch job; two workers start with
the job's one trainer key (--curve-key, and the feeder's public key as
--curve-server-key), their ring and worker 0's coordinator endpoint on
tcp://127.0.0.1. The coordinator endpoint answers a ZeroMQ greeting with
the CURVE mechanism (read off a raw tcp connection: the endpoint does not
speak plaintext). A third process with the key joins mid-epoch 0 (2 x 1
-> 3 x 1): over the new, CURVE, ring and the feeders' links reopened with
the feeder's key. Each process's trace must equal the reference model
for each world it was in, every element once per epoch, one weights hash
per step on every member from the join (test_elastic.py's check_worlds).
Meanwhile a joiner without keys and one with another trainer key ask to
join: neither handshake completes, worker 0 never reads their JOIN (its
log names neither), and each fails within a few seconds, well inside its
--rendezvous-timeout, saying that the handshake with worker 0 (naming its
endpoint) failed and why. The job finishes as if they never came.

A ps case: one parameter server (--elastic) and two ps workers, all with
the trainer key; a third process with the key joins and trains from epoch
1 (the WORLD to the server goes over the ps client's CURVE sockets). Its
traces equal the reference plan of each epoch's shape.

Then the options: without keys a non-loopback --elastic or --join is
refused (exit 2, naming --curve-key and --insecure); with the key both are
taken (the joiner then fails only when worker 0 does not answer).

Usage: test_elastic_curve.py BUILD_DIR
"""
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from datetime import datetime

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_elastic as te  # noqa: E402  (its bed.setup: the scratch folder, the job's files and ids)
import bed  # noqa: E402
import harness  # noqa: E402
from bed import read_log, wait, wait_for_log  # noqa: E402
from harness import fail, ok, spawn  # noqa: E402
from test_ring_curve import free_port, keygen  # noqa: E402

TAG = "curve"
STEP_MS = 60
LOCAL = "tcp://127.0.0.1:%d"
STAMP = "%Y-%m-%dT%H:%M:%S.%fZ"  # a log line's time


def zmtp_mechanism(endpoint):
    """The security mechanism a ZeroMQ endpoint (tcp://127.0.0.1:P) states in
    its ZMTP 3 greeting (64 bytes, the mechanism's name at 12..31). libzmq
    sends the rest of its greeting once the peer's signature and major
    version came, and drops a peer that states another mechanism before
    it has written its own: so we send those 11 bytes only."""
    port = int(endpoint.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"\xff" + b"\0" * 8 + b"\x7f" + b"\x03")
        got = b""
        while len(got) < 64:
            chunk = s.recv(64 - len(got))
            if not chunk:
                break
            got += chunk
    if len(got) < 32 or got[0] != 0xFF or got[9] != 0x7F:
        fail("%s: not a ZMTP greeting: %r" % (endpoint, got))
    return got[12:32].rstrip(b"\0").decode()


def keys():
    k = {"trainer": keygen("trainer"), "other": keygen("other"), "feeder": keygen("feeder")}
    allow = os.path.join(bed.TMP, "allow")
    os.makedirs(allow)
    for n in ("trainer", "other"):  # the feeder lets both in: only the workers' links differ
        shutil.copy(k[n] + ".pub", os.path.join(allow, n + ".pub"))
    k["allow"] = allow
    return k


def trainer_keys(k, name="trainer"):
    return ["--curve-key", k[name] + ".key", "--curve-server-key", k["feeder"] + ".pub"]


def curve_feeder(k, tag):
    job_path, job = bed.write_job("job-" + tag, te.FILES, epochs=te.EPOCHS, shuffle=te.SHUFFLE)
    listen = LOCAL % free_port()
    f = spawn([bed.FEEDER, "--job", job_path, "--listen", listen, "--threads", "2", "--heartbeat-ms", "200",
               "--timeout-ms", "5000", "--curve-key", k["feeder"] + ".key", "--curve-allow", k["allow"]],
              log=bed.log_path(tag, "feeder"))
    wait_for_log(tag, "feeder", "serving job", f, "%s: the feeder did not start" % tag)
    return f, job, listen


def stranger(who, ep, job, coord, extra):
    """A joiner the coordinator must not answer: started now, checked by
    strangers_failed."""
    join = LOCAL % free_port()
    p = te.trainer(who, ep, job, ["--join", join, "--rendezvous-timeout", "10"] + extra, step_ms=STEP_MS,
                   coord=coord, tag=TAG)[0]
    return p, join


def strangers_failed(started):
    """started: [(who, stranger(...), texts)]: each exits 1 saying one of the
    texts, in time, its JOIN never read by worker 0."""
    for who, (p, join), texts in started:
        rc = wait(p, 15, "the joiner %s" % who)
        log = read_log(TAG, who)
        if rc != 1 or not any(x in log for x in texts):
            fail("%s: expected exit 1 saying %r, got exit %d:\n%s" % (who, texts[0], rc, log[-1500:]))
        # from its JOIN to its error, by the log's own clock
        stamp = {k: re.search(r"^(\S+) sluice-trainer: \w+: " + re.escape(x), log, re.M)
                 for k, x in (("asked", "elastic: asking worker 0"), ("failed", "elastic: the "))}
        if stamp["asked"] is None or stamp["failed"] is None:
            fail("%s: its log lacks the JOIN or the error's line:\n%s" % (who, log[-1500:]))
        took = (datetime.strptime(stamp["failed"].group(1), STAMP) -
                datetime.strptime(stamp["asked"].group(1), STAMP)).total_seconds()
        if took > 3.0:
            fail("%s: failed %.1f s after its JOIN, want about one (its --rendezvous-timeout is 10 s)" % (who, took))
        if join in read_log(TAG, "w0"):
            fail("worker 0's log names the joiner %s (%s): its JOIN was read:\n%s"
                 % (who, join, read_log(TAG, "w0")[-2000:]))


def ring_case(k):
    harness.case()
    f, job, ep = curve_feeder(k, TAG)
    coord = LOCAL % free_port()
    ring = ",".join(LOCAL % free_port() for _ in range(2))
    kw = dict(step_ms=STEP_MS, coord=coord, tag=TAG)
    w0 = te.trainer("w0", ep, job, ["--worker", "0", "--workers", "2", "--ring", ring, "--elastic-max-workers", "3"]
                    + trainer_keys(k), **kw)
    w1 = te.trainer("w1", ep, job, ["--worker", "1", "--workers", "2", "--ring", ring] + trainer_keys(k), **kw)
    te.wait_step("w0", w0[0], 0, 1, "worker 0 did not train epoch 0", tag=TAG)
    joiner_ep = LOCAL % free_port()
    j = te.trainer("joiner", ep, job, ["--join", joiner_ep] + trainer_keys(k), **kw)
    mech = zmtp_mechanism(coord)
    if mech != "CURVE":
        fail("worker 0's coordinator endpoint %s greets with mechanism %r, want CURVE" % (coord, mech))
    wait_for_log(TAG, "w0", "elastic: a worker (ring endpoint %s) asks to join in epoch 0: admitted" % joiner_ep,
                 w0[0], "the join was not admitted", 10)
    # the strangers while the job runs: no key, another key
    started = [("bare", stranger("bare", ep, job, coord, []),
                ("elastic: the handshake with worker 0 (%s) failed: it uses CURVE, but this worker has no trainer key "
                 "(give every worker the same --curve-key)" % coord,
                 # ZeroMQ's mismatch unseen (worker 0 closed the connection first): what the joiner then knows
                 "elastic: the handshake with worker 0 (%s) failed: it closed the connection (a worker with a trainer "
                 "key? give every worker the same --curve-key, or none)" % coord)),
               ("other", stranger("other", ep, job, coord, trainer_keys(k, "other")),
                ("elastic: the CURVE handshake with worker 0 (%s) failed: the workers do not share one trainer key "
                 "(--curve-key)" % coord,))]
    te.wait_change(TAG, "w0", w0[0], 1, "the join did not come mid-epoch")
    strangers_failed(started)
    procs = {"w0": w0, "w1": w1, "joiner": j}
    te.exits(TAG, procs, f)
    ch = te.changes(TAG, "w0")
    T = bed.ref_plan.epoch_steps(te.ref_cfg(job, 2, 1))
    t1 = ch[0][1] if ch else -1
    if ch != [(0, t1, t1, 2, 3)] or not 1 <= t1 < T:
        fail("worker 0's changes: %r, want [(0, t1, t1, 2, 3)] with 1 <= t1 < %d" % (ch, T))
    if "elastic: joined as worker 2 of 3 before step %d of epoch 0 (global step %d)" % (t1, t1) not in \
            read_log(TAG, "joiner"):
        fail("the joiner's log does not say it joined:\n%s" % read_log(TAG, "joiner")[-2000:])
    if "CURVE" not in read_log(TAG, "feeder"):
        fail("the feeder's log does not report its CURVE connections:\n%s" % read_log(TAG, "feeder")[-2000:])
    worlds = [{"at": (0, 0), "W": 2, "kind": None, "ranks": {"w0": 0, "w1": 1}},
              {"at": (0, t1), "W": 3, "kind": (2, 0, t1), "ranks": {"w0": 0, "w1": 1, "joiner": 2}}]
    n = te.check_worlds(TAG, job, worlds, procs)
    ok("CURVE everywhere over tcp 127.0.0.1 (coordinator greets with CURVE): 2 x 1 -> 3 x 1 at step %d of epoch 0, "
       "traces equal the reference, one weights hash per step on every member from the join (%d steps); a joiner "
       "without keys and one with another key never admitted, each failing at once naming worker 0's endpoint"
       % (t1, n))


def ps_case(k):
    harness.case()
    tag = "curve-ps"
    f, job, ep = curve_feeder(k, tag)
    coord, ps = LOCAL % free_port(), LOCAL % free_port()
    model = te.MODEL + ["--mode", "ps"]
    srv = spawn([bed.TRAINER, "--ps", ps, "--ps-task", "0", "--workers", "2", "--elastic", coord,
                 "--ps-worker-timeout", "20", "--curve-key", k["trainer"] + ".key"] + model,
                log=bed.log_path(tag, "ps0"), stdout=open(os.devnull, "w"))
    wait_for_log(tag, "ps0", "serving", srv, "ps: the parameter server did not start")
    if "CURVE: holders of the job's trainer key only" not in read_log(tag, "ps0"):
        fail("ps: the server does not say it uses CURVE:\n%s" % read_log(tag, "ps0")[-1500:])

    def worker(who, extra):
        trace = os.path.join(bed.TMP, "%s.trace" % who)
        p = spawn([bed.TRAINER, "--connect", ep, "--job", job["name"], "--devices", "cpu:1", "--trace", trace,
                   "--ps", ps, "--heartbeat-ms", "200", "--timeout-ms", "5000", "--progress", "off", "--credits", "8",
                   "--step-ms", "30", "--log-every", "1", "--elastic", coord] + model + trainer_keys(k) + extra,
                  log=bed.log_path(tag, who), stdout=open(os.devnull, "w"))
        return p, trace

    w0 = worker("ps-w0", ["--worker", "0", "--workers", "2", "--elastic-max-workers", "3"])
    w1 = worker("ps-w1", ["--worker", "1", "--workers", "2"])
    wait_for_log(tag, "ps-w0", "epoch 0 step 1: loss", w0[0], "ps: worker 0 did not train epoch 0")
    j = worker("ps-joiner", ["--join", "ps-joiner"])
    wait_for_log(tag, "ps-w0", "elastic: a worker (ps-joiner) asks to join in epoch 0: admitted at the epoch's end",
                 w0[0], "ps: the join was not admitted", 10)
    procs = {"ps-w0": w0, "ps-w1": w1, "ps-joiner": j}
    for who, (p, _) in procs.items():
        if wait(p, 40, who) != 0:
            fail("ps: %s exited %d:\n%s" % (who, p.returncode, read_log(tag, who)[-3000:]))
    if wait(srv, 30, "ps: the parameter server") != 0:
        fail("ps: the server exited %d:\n%s" % (srv.returncode, read_log(tag, "ps0")[-3000:]))
    if wait(f, 30, "ps: the feeder") != 0:
        fail("ps: the feeder did not exit 0:\n%s" % read_log(tag, "feeder")[-2000:])
    worlds = [(2, {"ps-w0": 0, "ps-w1": 1})] + [(3, {"ps-w0": 0, "ps-w1": 1, "ps-joiner": 2})] * (te.EPOCHS - 1)
    want = {}
    for e, (W, ranks) in enumerate(worlds):
        for who, r in ranks.items():
            want.setdefault(who, []).extend(x for x in te.stream(job, W, 1, None, r) if x["epoch"] == e)
    for who, (_, trace) in procs.items():
        te.check("ps: %s" % who, te.lines(trace), want[who])
    ok("ps mode with CURVE (feeder, parameter server, coordinator over tcp 127.0.0.1): a joiner trains from epoch 1, "
       "the traces equal each epoch's reference plan")


def options(k):
    harness.case()
    base = [bed.TRAINER, "--connect", te.sock("none"), "--job", "j"] + te.MODEL
    far_coord, far_join = "tcp://192.0.2.1:7777", "tcp://192.0.2.1:7001"
    for extra, text in (
            (["--elastic", far_coord],
             "--elastic %s is not a loopback or ipc endpoint, and without --curve-key the coordinator's messages "
             "travel in plaintext: give every worker the job's --curve-key (docs/security.md), or --insecure to "
             "accept that" % far_coord),
            (["--elastic", te.COORD, "--join", far_join],
             "--join: this worker's ring endpoint %s can be reached from other hosts, and without --curve-key the "
             "ring carries the weights in plaintext: give it the job's --curve-key (docs/security.md), or "
             "--insecure to listen in plaintext anyway" % far_join)):
        p = subprocess.run(base + extra, capture_output=True, text=True, timeout=20)
        if p.returncode != 2 or text not in p.stderr:
            fail("%s without keys: expected exit 2 saying %r, got %d:\n%s"
                 % (" ".join(extra), text, p.returncode, p.stderr[-1000:]))
    # with the key both are taken: the joiner waits for worker 0 (nobody at a TEST-NET address) and says so
    t0 = time.time()
    p = subprocess.run(base + ["--elastic", far_coord, "--join", far_join, "--rendezvous-timeout", "1"]
                       + trainer_keys(k), capture_output=True, text=True, timeout=20)
    text = "elastic: worker 0 (%s) did not answer the JOIN within 1 s" % far_coord
    if p.returncode != 1 or text not in p.stderr or time.time() - t0 > 5:
        fail("a far --elastic and --join with the key: expected exit 1 saying %r within 5 s, got %d after %.1f s:\n%s"
             % (text, p.returncode, time.time() - t0, p.stderr[-1000:]))
    ok("options: a non-loopback --elastic or --join without keys exits 2 naming --curve-key and --insecure; with the "
       "key both are taken")


def main():
    try:
        k = keys()
        options(k)
        ring_case(k)
        ps_case(k)
    finally:
        bed.finish()
        if not os.environ.get("SLUICE_ELASTIC_KEEP"):
            bed.cleanup()


if __name__ == "__main__":
    main()
