#!/usr/bin/env python3
"""The trainers' own links with CURVE (issue #16), on real processes:
sluice-feeder and two sluice-trainer workers (--model mlp) whose ring and
rendezvous run over tcp on 127.0.0.1.

- Two workers sharing one trainer key (--curve-key; the feeder's CURVE
  too: --curve-key/--curve-allow, the trainers' --curve-server-key) end
  with the same weights hash as the same job trained in plaintext, and so
  do two workers taking their key files from the cluster spec's "curve"
  object (--cluster) instead of the command line.
- A worker with another trainer key (one the feeder allows, so only the
  workers' links can fail) makes both fail: worker 1 at once, saying the
  workers do not share one trainer key; worker 0 after its rendezvous
  timeout, naming worker 1 and counting the failed handshakes.
- Safe by default: a worker whose ring endpoint other hosts can reach
  (--ring tcp://*:P, or --peers, which binds every interface) refuses to
  start without --curve-key (exit 2, saying why), unless --insecure, with
  which the run trains (warning in the log) to the plaintext weights.
- A cluster spec whose "curve" is malformed is refused (exit 2) naming it.

Usage: test_ring_curve.py BUILD_DIR   (prints "N passed, 0 failed")
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bed  # noqa: E402
import harness  # noqa: E402
from harness import fail, ok, spawn  # noqa: E402


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def keygen(name):
    """NAME.key and NAME.pub under TMP/keys; returns the path without suffix."""
    path = os.path.join(bed.TMP, "keys", name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    r = subprocess.run([bed.FEEDER, "keygen", path], capture_output=True, text=True)
    if r.returncode != 0:
        fail("keygen %s: exit %d: %s" % (name, r.returncode, r.stderr))
    return path


def make_job():
    data = os.path.join(bed.TMP, "data")
    subprocess.run([bed.RECORD, "gen", "--output-dir", data, "--records", "480", "--shards", "4", "--seed", "5",
                    "--image-bytes", "12", "--classes", "3"], check=True, capture_output=True)
    job = {"name": "ring-curve", "files": [os.path.join(data, "gen-*.tfrecord")], "format": "tfrecord",
           "features": {"image": {"dtype": "uint8", "shape": [12], "from": "bytes"},
                        "label": {"dtype": "int64", "shape": []}},
           "shard_policy": "data", "global_batch_size": 16, "epochs": 2, "shuffle": {"buffer": 64, "seed": 3}}
    path = os.path.join(bed.TMP, "job.json")
    with open(path, "w") as f:
        json.dump(job, f)
    return path


MODEL = ["--model", "mlp", "--hidden", "16", "--lr", "0.01", "--momentum", "0.5", "--seed", "7",
         "--input", "image", "--label", "label", "--classes", "3", "--devices", "cpu:1"]


def start_feeder(tag, job_path, listen, key=None, allow=None):
    args = [bed.FEEDER, "--job", job_path, "--listen", listen, "--threads", "1"]
    if key is not None:
        args += ["--curve-key", key + ".key", "--curve-allow", allow]
    return spawn(args, log=bed.log_path(tag, "feeder"))


def start_workers(tag, per_worker):
    """per_worker: [args, ...]; returns the Popen list (stdout: the summary)."""
    procs = []
    for w, args in enumerate(per_worker):
        procs.append(spawn([bed.TRAINER] + MODEL + args + ["--job", "ring-curve"], log=bed.log_path(tag, "w%d" % w),
                           stdout=subprocess.PIPE, text=True))
    return procs


def summaries(tag, procs, feeder, timeout=120):
    """Every worker exits 0; their summaries' weights hashes, which must agree."""
    outs = []
    for w, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            fail("%s: worker %d did not finish" % (tag, w))
        if p.returncode != 0:
            fail("%s: worker %d exited %d" % (tag, w, p.returncode))
        outs.append(json.loads(out.strip().splitlines()[-1])["summary"])
    if feeder is not None:
        bed.wait(feeder, 30, "%s: the feeder" % tag)
    hashes = {o["weights_hash"] for o in outs}
    if len(hashes) != 1:
        fail("%s: the workers end with different weights: %s" % (tag, hashes))
    return hashes.pop()


def ring_arg(ports):
    return ["--ring", ",".join("tcp://127.0.0.1:%d" % p for p in ports)]


def plaintext_run(job_path):
    harness.case()
    tag = "plain"
    sock = "ipc://%s/plain.sock" % bed.TMP
    f = start_feeder(tag, job_path, sock)
    ports = [free_port(), free_port()]
    ws = start_workers(tag, [["--connect", sock, "--worker", str(w), "--workers", "2"] + ring_arg(ports)
                             for w in range(2)])
    h = summaries(tag, ws, f)
    ok("plaintext: 2 workers, ring over tcp 127.0.0.1 (local: no keys needed), weights %s" % h)
    return h


def curve_run(job_path, keys, want):
    harness.case()
    tag = "curve"
    listen = "tcp://127.0.0.1:%d" % free_port()
    f = start_feeder(tag, job_path, listen, keys["feeder"], keys["allow"])
    ports = [free_port(), free_port()]
    ws = start_workers(tag, [["--connect", listen, "--worker", str(w), "--workers", "2",
                              "--curve-key", keys["trainer"] + ".key", "--curve-server-key",
                              keys["feeder"] + ".pub"] + ring_arg(ports) for w in range(2)])
    h = summaries(tag, ws, f)
    if h != want:
        fail("curve: weights %s, plaintext %s" % (h, want))
    ok("CURVE everywhere (feeder link, ring, rendezvous): the plaintext run's weights %s" % h)


def cluster_spec_run(job_path, keys, want):
    """The key files from the cluster spec's "curve" object."""
    harness.case()
    tag = "spec"
    listen = "tcp://127.0.0.1:%d" % free_port()
    f = start_feeder(tag, job_path, listen, keys["feeder"], keys["allow"])
    ports = [free_port(), free_port()]
    args = []
    for w in range(2):
        spec = {"cluster": {"worker": ["tcp://127.0.0.1:%d" % p for p in ports], "feeder": [listen]},
                "task": {"type": "worker", "index": w},
                "curve": {"key": keys["trainer"] + ".key", "server_keys": keys["feeder"] + ".pub"}}
        path = os.path.join(bed.TMP, "spec-%d.json" % w)
        with open(path, "w") as out:
            json.dump(spec, out)
        args.append(["--cluster", path])
    ws = start_workers(tag, args)
    h = summaries(tag, ws, f)
    if h != want:
        fail("spec: weights %s, plaintext %s" % (h, want))
    ok("--cluster with 'curve': {'key', 'server_keys'} (and worker addresses, which bind every interface): "
       "the plaintext weights")


def other_key_run(job_path, keys):
    harness.case()
    tag = "other"
    listen = "tcp://127.0.0.1:%d" % free_port()
    f = start_feeder(tag, job_path, listen, keys["feeder"], keys["allow"])
    ports = [free_port(), free_port()]
    t0 = time.time()
    ws = start_workers(tag, [["--connect", listen, "--worker", str(w), "--workers", "2", "--rendezvous-timeout", "4",
                              "--curve-key", (keys["trainer"] if w == 0 else keys["other"]) + ".key",
                              "--curve-server-key", keys["feeder"] + ".pub"] + ring_arg(ports) for w in range(2)])
    codes, took = [None, None], [None, None]
    for w in (1, 0):
        codes[w] = bed.wait(ws[w], 30, "other: worker %d" % w)
        took[w] = time.time() - t0
    logs = [bed.read_log(tag, "w%d" % w) for w in range(2)]
    if codes[0] == 0 or codes[1] == 0:
        fail("other: exits %s, expected both to fail" % codes)
    w1 = ("rendezvous: the CURVE handshake with rank 0 (tcp://127.0.0.1:%d) failed: the workers do not share one "
          "trainer key (--curve-key)" % ports[0])
    if w1 not in logs[1]:
        fail("other: worker 1 does not say %r" % w1)
    w0 = "rendezvous: rank 1 (tcp://127.0.0.1:%d) did not show up within 4.0 s; " % ports[1]
    tail = " CURVE handshake(s) on rank 0's endpoint failed: the workers do not share one trainer key (--curve-key)"
    if w0 not in logs[0] or tail not in logs[0]:
        fail("other: worker 0 does not say %r ... %r" % (w0, tail))
    if took[1] > 3.0 or took[0] < 4.0 or took[0] > 10.0:
        fail("other: worker 1 failed after %.1f s (at most 3), worker 0 after %.1f s (4 to 10)" % (took[1], took[0]))
    f.kill()
    f.wait()
    ok("a worker with another trainer key: worker 1 fails at once (%.1f s), worker 0 after its rendezvous timeout "
       "(%.1f s), both saying the workers do not share one trainer key" % (took[1], took[0]))


def refusals(job_path, keys):
    harness.case()
    sock = "ipc://%s/refuse.sock" % bed.TMP
    p0, p1 = free_port(), free_port()
    cases = [
        ("--ring tcp://*", ["--ring", "tcp://*:%d,tcp://127.0.0.1:%d" % (p0, p1), "--worker", "0"],
         "this worker's ring endpoint tcp://*:%d can be reached from other hosts" % p0),
        ("--peers", ["--peers", "127.0.0.1:%d,127.0.0.1:%d" % (p0, p1), "--worker", "1"],
         "this worker's ring endpoint tcp://*:%d can be reached from other hosts" % p1),
        ("--ring on a host's address", ["--ring", "tcp://127.0.0.1:%d,tcp://10.1.2.3:%d" % (p0, p1), "--worker", "1"],
         "this worker's ring endpoint tcp://10.1.2.3:%d can be reached from other hosts" % p1),
    ]
    for what, args, text in cases:
        r = subprocess.run([bed.TRAINER] + MODEL + ["--connect", sock, "--job", "ring-curve", "--workers", "2"] + args,
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 2 or text not in r.stderr or "--curve-key" not in r.stderr or "--insecure" not in r.stderr:
            fail("%s without keys: exit %d, stderr %r" % (what, r.returncode, r.stderr))
    # a malformed 'curve' in the cluster spec
    spec = {"cluster": {"worker": ["127.0.0.1:%d" % p0, "127.0.0.1:%d" % p1], "feeder": [sock]},
            "task": {"type": "worker", "index": 0}}
    for curve, text in (({"key": 5}, "cluster spec: 'curve.key' must be a key file's path (a non-empty string)"),
                        ({"secret": "x"}, "cluster spec: unknown key 'curve.secret' (expected 'key', 'server_keys' or 'allow')"),
                        ("x", "cluster spec: 'curve' must be an object")):
        spec["curve"] = curve
        r = subprocess.run([bed.TRAINER] + MODEL + ["--cluster", json.dumps(spec), "--job", "ring-curve"],
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 2 or text not in r.stderr:
            fail("spec 'curve' %r: exit %d, stderr %r" % (curve, r.returncode, r.stderr))
    # the spec's key path is read like --curve-key's: a missing file is named,
    # exit 1 as every file that is not there (docs/exit-codes.md)
    spec["curve"] = {"key": os.path.join(bed.TMP, "no-such.key"), "server_keys": keys["feeder"] + ".pub"}
    r = subprocess.run([bed.TRAINER] + MODEL + ["--cluster", json.dumps(spec), "--job", "ring-curve"],
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 1 or "--curve-key: " not in r.stderr or "no-such.key" not in r.stderr:
        fail("spec with a missing key file: exit %d, stderr %r" % (r.returncode, r.stderr))
    ok("a ring other hosts can reach, without keys: exit 2 saying why (--ring tcp://*, --peers, a host's "
       "address); a malformed 'curve' in the cluster spec: exit 2 naming it; a missing key file: exit 1")


def insecure_run(job_path, want):
    harness.case()
    tag = "insecure"
    sock = "ipc://%s/insecure.sock" % bed.TMP
    f = start_feeder(tag, job_path, sock)
    ports = [free_port(), free_port()]
    peers = ",".join("127.0.0.1:%d" % p for p in ports)
    ws = start_workers(tag, [["--connect", sock, "--worker", str(w), "--workers", "2", "--peers", peers,
                              "--insecure"] for w in range(2)])
    h = summaries(tag, ws, f)
    if h != want:
        fail("insecure: weights %s, plaintext %s" % (h, want))
    for w in range(2):
        text = "ring: listening on tcp://*:%d in plaintext (--insecure)" % ports[w]
        if text not in bed.read_log(tag, "w%d" % w):
            fail("insecure: worker %d does not warn %r" % (w, text))
    ok("--insecure: --peers (every interface) in plaintext trains to the same weights, with a warning")


def main():
    bed.setup(sys.argv[1], "ring-curve")
    try:
        job_path = make_job()
        keys = {"trainer": keygen("trainer"), "other": keygen("other"), "feeder": keygen("feeder")}
        allow = os.path.join(bed.TMP, "allow")
        os.makedirs(allow)
        for n in ("trainer", "other"):  # the feeder lets both in: only the workers' links differ
            shutil.copy(keys[n] + ".pub", os.path.join(allow, n + ".pub"))
        keys["allow"] = allow
        want = plaintext_run(job_path)
        curve_run(job_path, keys, want)
        cluster_spec_run(job_path, keys, want)
        insecure_run(job_path, want)
        other_key_run(job_path, keys)
        refusals(job_path, keys)
        bed.finish()
    finally:
        harness.stop_all()
        bed.cleanup()


if __name__ == "__main__":
    main()
