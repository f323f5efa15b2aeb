"""What the cluster tests share: the binaries, generated record files, job
files, the reference model's pieces, trace checks, and feeders and trainers
started on the cluster's hosts (tests/cluster/netns.py).

Feeders listen on their host's own address (tcp://198.18.0.N:PORT), and
trainers connect to those addresses from other hosts, each trainer in a PID
namespace of its own: no feeder's /proc is visible to it, so every piece
comes over the link, by copy (the traces' summaries must say 0 pieces in
shared memory).

Every link is encrypted, as on a real cluster (docs/security.md): each test
makes its keys once with `sluice-feeder keygen` (keys()): feeder j its own
pair (feeder-J), the trainers one pair shared by every worker (the ring
needs one), the feeders' allow-list holding the trainers' public key, and
the trainers' --curve-server-key a folder of feeder-J.pub (and
eval-feeder-J.pub). start_feeder and start_trainer pass them unless told
insecure=True (then --insecure: plaintext, for a case that measures
against raw ZeroMQ).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, HERE)
from bed import reference  # noqa: E402,F401  (the reference model's pieces, for the tests)
import harness  # noqa: E402
from harness import fail  # noqa: E402,F401
import netns  # noqa: E402

if len(sys.argv) < 2:
    print("usage: %s BUILD_DIR" % sys.argv[0], file=sys.stderr)
    sys.exit(2)
BUILD = os.path.abspath(sys.argv[1])
RECORD = os.path.join(BUILD, "tools", "sluice-record")
FEEDER = os.path.join(BUILD, "feeder", "sluice-feeder")
TRAINER = os.path.join(BUILD, "trainer", "sluice-trainer")
TMP = tempfile.mkdtemp(prefix="sluice-cluster-")
FEATURES = {"image": {"dtype": "uint8", "shape": [16], "from": "bytes"},
            "label": {"dtype": "int64", "shape": []},
            "id": {"dtype": "int64", "shape": []}}
# the cluster's timing: heartbeats every 200 ms, a peer silent for 5 s lost
HB = ("--heartbeat-ms", "200", "--timeout-ms", "5000")


_since = [time.time()]


def ok(name):
    """harness.ok, with the seconds since the last case passed (or the start)."""
    harness.ok("%s (%.1f s)" % (name, time.time() - _since[0]))
    _since[0] = time.time()


def finish(net, t0=None):
    """The end of a cluster test: no process left running, the cluster
    down, "N passed, 0 failed" (with the time since t0)."""
    left = harness.running()
    if left:
        fail("%d processes were still running at the end: %s" % (len(left), [p.args for p in left]))
    net.down()
    took = " (%.1f s)" % (time.time() - t0) if t0 is not None else ""
    print("%d passed, 0 failed%s" % (harness.passed(), took))


_keys = {}
KEY_FEEDERS = 4  # feeder-0 .. feeder-3 and eval-feeder-0 .. eval-feeder-3


def keys():
    """The test's keys, made once in TMP/keys with sluice-feeder keygen:
    {"feeder": [feeder j's secret key file], "eval_feeder": [...],
    "allow": the feeders' allow-list folder, "trainer": the workers' secret
    key file, "servers": the folder of feeder-J.pub and eval-feeder-J.pub,
    "trainer_pub": the workers' public key (Z85)}."""
    if _keys:
        return _keys
    d = path("keys")
    os.makedirs(os.path.join(d, "allow"), mode=0o700)
    os.makedirs(os.path.join(d, "servers"), mode=0o700)
    names = ["trainer"] + ["feeder-%d" % j for j in range(KEY_FEEDERS)] + \
        ["eval-feeder-%d" % j for j in range(KEY_FEEDERS)]
    for n in names:
        subprocess.run([FEEDER, "keygen", n], cwd=d, check=True, capture_output=True)
        if n != "trainer":
            shutil.copy(os.path.join(d, n + ".pub"), os.path.join(d, "servers", n + ".pub"))
    shutil.copy(os.path.join(d, "trainer.pub"), os.path.join(d, "allow", "trainer.pub"))
    with open(os.path.join(d, "trainer.pub")) as f:
        pub = f.read().strip()
    _keys.update({"feeder": [os.path.join(d, "feeder-%d.key" % j) for j in range(KEY_FEEDERS)],
                  "eval_feeder": [os.path.join(d, "eval-feeder-%d.key" % j) for j in range(KEY_FEEDERS)],
                  "allow": os.path.join(d, "allow"), "trainer": os.path.join(d, "trainer.key"),
                  "servers": os.path.join(d, "servers"), "trainer_pub": pub})
    return _keys


def feeder_keys(j, eval_feeder=False):
    """The options that make feeder j (of the training or evaluation
    feeders) serve over CURVE, the workers' key alone on its allow-list."""
    k = keys()
    return ["--curve-key", k["eval_feeder" if eval_feeder else "feeder"][j], "--curve-allow", k["allow"]]


def trainer_keys():
    """The options that make a worker's every link CURVE: feeders (each by
    its own public key, feeder-J.pub in the servers folder), ring and
    rendezvous (the workers' shared pair)."""
    k = keys()
    return ["--curve-key", k["trainer"], "--curve-server-key", k["servers"]]


def check_curve(name, feeder_log, trainers=None):
    """A feeder's log says it served over CURVE and accepted `trainers`
    connections of the workers' key (None: at least one; rejoins and
    takeovers make more), refusing none; for a feeder that ran to its
    end."""
    log = read_log(feeder_log)
    if "CURVE: this feeder's public key is" not in log or "1 trainer keys allowed" not in log:
        fail("%s: the feeder did not serve over CURVE with the workers' key:\n%s" % (name, log[-2000:]))
    m = re.search(r"CURVE: (\d+) trainer connections accepted, 0 refused", log)
    if m is None or int(m.group(1)) < 1 or (trainers is not None and int(m.group(1)) != trainers):
        fail("%s: the feeder should have accepted %s CURVE connections and refused none:\n%s"
             % (name, trainers or "some", log[-2000:]))


def cleanup():
    shutil.rmtree(TMP, ignore_errors=True)


def path(name):
    return os.path.join(TMP, name)


def gen(name, records, shards, compression="none"):
    out = path(name)
    subprocess.run([RECORD, "gen", "--output-dir", out, "--records", str(records), "--shards", str(shards),
                    "--seed", "3", "--image-bytes", "16", "--compression", compression, "--prefix", "part"],
                   check=True, capture_output=True)
    return sorted(os.path.join(out, f) for f in os.listdir(out) if f.startswith("part-"))


def ids_of(files):
    """The id of every record of every file, read back with sluice-record cat."""
    out = []
    for f in files:
        p = subprocess.run([RECORD, "cat", "--decode", "example", f], check=True, capture_output=True, text=True)
        out.append([int(json.loads(line)["example"]["features"]["feature"]["id"]["int64List"]["value"][0])
                    for line in p.stdout.splitlines()])
    return out


def write_job(name, files, **keys):
    job = {"name": name, "files": files, "format": "tfrecord", "features": FEATURES, "global_batch_size": 8,
           "epochs": 2, "prefetch": 4}
    job.update(keys)
    p = path(name + ".json")
    with open(p, "w") as f:
        json.dump(job, f)
    return p, job


def read_trace(p):
    """(pieces, summary) of a trainer's trace."""
    with open(p) as f:
        got = [json.loads(x) for x in f]
    if not got or "summary" not in got[-1]:
        fail("trace %s has no summary line" % p)
    return got[:-1], got[-1]["summary"]


_expected = {}


def expected(ref, ids, w):
    """Worker w's trace lines as the model has them (the (file, record)
    elements turned into the records' ids); kept for the next trace of the
    same job."""
    key = (id(ref), id(ids), w)
    if key not in _expected:
        _expected[key] = (ref, ids, [{"worker": x["worker"], "replica": x["replica"], "epoch": x["epoch"],
                                      "step": x["step"], "seq": x["seq"], "size": len(x["elems"]),
                                      "ids": [ids[fi][r] for fi, r in x["elems"]]} for x in ref.get(w, [])])
    return _expected[key][2]


def check_trace(name, w, trace, ref, ids):
    """Worker w's trace equals the model's pieces, line for line; returns
    its summary."""
    got, summary = read_trace(trace)
    if not summary["ok"]:
        fail("%s: worker %d's trace ends with a failed run: %s" % (name, w, summary))
    want = expected(ref, ids, w)
    if got != want:
        for i, (g, e) in enumerate(zip(got, want)):
            if g != e:
                fail("%s: worker %d piece %d differs:\n  got  %s\n  want %s" % (name, w, i, g, e))
        fail("%s: worker %d got %d pieces, want %d" % (name, w, len(got), len(want)))
    return summary


def read_log(p):
    with open(p, errors="replace") as f:
        return f.read()


def wait_for_log(p, text, proc, what, timeout=30):
    """Until the log at p holds text; fail with what if proc ends first or
    time runs out."""
    deadline = time.time() + timeout
    while text not in read_log(p):
        if time.time() > deadline or (proc is not None and proc.poll() is not None):
            fail(what)
        time.sleep(0.02)


def wait_all(procs, timeout, what):
    deadline = time.time() + timeout
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=max(0.1, deadline - time.time())))
        except subprocess.TimeoutExpired:
            fail("%s did not finish within %d s" % (what, timeout))
    return codes


def start_feeder(net, host, job_path, port, j=0, F=1, tag="f", extra=(), insecure=False):
    """Feeder j of F on host, bound to the host's own address, with its
    keys (insecure: --insecure, plaintext); returns (process, endpoint, log
    path)."""
    ep = "tcp://%s:%d" % (net.addr(host), port)
    log = path("%s-feeder%d.log" % (tag, j))
    sec = ["--insecure"] if insecure else feeder_keys(j)
    p = net.spawn(host, [FEEDER, "--job", job_path, "--listen", ep, "--feeder-index", str(j), "--feeders", str(F),
                         "--threads", "1"] + sec + list(HB) + list(extra), log=log)
    return p, ep, log


def start_trainer(net, host, conns, job_name, w, W, R, tag="t", extra=(), stdout=subprocess.DEVNULL,
                  insecure=False):
    """Trainer worker w of W (R replicas) on host, in a PID namespace of its
    own, with the workers' keys (insecure: --insecure, plaintext); returns
    (process, trace path, log path)."""
    trace = path("%s-trace%d.jsonl" % (tag, w))
    log = path("%s-trainer%d.log" % (tag, w))
    sec = ["--insecure"] if insecure else trainer_keys()
    p = net.spawn(host, [TRAINER, "--connect", ",".join(conns), "--job", job_name, "--worker", str(w),
                         "--workers", str(W), "--replicas", str(R), "--trace", trace] + sec + list(HB) +
                  list(extra), log=log, pidns=True, stdout=stdout)
    return p, trace, log


def wait_listening(net, host, port, proc, what, timeout=20):
    """Until something listens on host's port (a feeder bound its socket)."""
    probe = ("import socket, sys\n"
             "s = socket.socket(); s.settimeout(1)\n"
             "try:\n    s.connect((sys.argv[1], int(sys.argv[2])))\nexcept OSError:\n    sys.exit(1)\n")
    deadline = time.time() + timeout
    while net.run(host, [sys.executable, "-c", probe, net.addr(host), str(port)]).returncode != 0:
        if time.time() > deadline or (proc is not None and proc.poll() is not None):
            fail(what)
        time.sleep(0.05)
