#!/usr/bin/env python3
"""Integration: ParameterServerStrategy (--mode ps) with real processes.

- One worker with synchronous pulls trains exactly as mirrored training
  does: the same weights, bit for bit (--save-weights files equal byte for
  byte, the same per-step losses), with one server and with two.
- 2 parameter servers x 2 workers x 2 CPU replicas and the evaluator,
  started from one TF_CONFIG cluster with only the task changed, train the
  main job's MLP on Fashion-MNIST to >= 0.85 test accuracy (the
  evaluator's, equal to the workers' shares' row-weighted mean); the servers hold disjoint
  variable sets covering the model; the global step equals the workers'
  steps; both workers end with the same weights.
- A parameter server killed mid-run: every worker fails within its
  --timeout-ms, naming the server.
- A worker that never comes: the server serves the other to its end and
  exits 1 naming the lost worker; the other trains to its end and exits 1
  saying the job did not finish (lost_workers 1).
- A server started with other model flags than the workers': refused,
  both sides say why.
- train_and_evaluate's evaluator (a TF_CONFIG task of type "evaluator",
  not listed among the workers): with 2 servers and 2 workers each
  evaluating its half, it reads the final weights (the workers' hash) and
  reports the whole test set: its rows and correct count are the sum of
  the workers' shares, and its --predictions file lists every element once
  in id order, as many right as it counted; the servers never counted it
  as a worker (pushes = the workers' steps) and say "served". The same by
  flags (--evaluator, --ps-evaluator); an evaluator expected and never
  come: the workers are not held up, the server counts it lost (exit 0).
- Usage errors: --mode ps without servers, with a ring, --ps-task out of
  range, a server without a model, a public address without --insecure,
  --ps with 257 servers.

Usage: test_ps.py BUILD_DIR [--no-fmnist]     (prints "N passed, 0 failed")
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

BUILD = os.path.abspath(sys.argv[1])
RECORD = os.path.join(BUILD, "tools", "sluice-record")
FEEDER = os.path.join(BUILD, "feeder", "sluice-feeder")
TRAINER = os.path.join(BUILD, "trainer", "sluice-trainer")
FMNIST = "/usr/share/datasets/fashion-mnist"
TMP = tempfile.mkdtemp(prefix="sluice-ps-")
PASSED = 0
PROCS = []
# Fashion-MNIST epochs: asynchronous runs vary (0.8495, 0.8672 and 0.8699 test
# accuracy in three 5-epoch runs at --lr 0.025); 8 epochs gave 0.8752 and 0.8750
EPOCHS = 8


def fail(msg):
    for p in PROCS:
        if p.poll() is None:
            p.kill()
    print("FAIL: " + msg, file=sys.stderr)
    print("%d passed, 1 failed" % PASSED)
    sys.exit(1)


def ok(name):
    global PASSED
    PASSED += 1
    print("ok %d - %s" % (PASSED, name))


def log(tag):
    return open(os.path.join(TMP, tag + ".log"), "w")


def logtext(tag):
    with open(os.path.join(TMP, tag + ".log")) as f:
        return f.read()


def start(args, tag, env=None):
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log(tag), text=True, env=env)
    PROCS.append(p)
    return p


def finish(p, tag, timeout=300):
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        fail("%s did not finish within %d s: %s" % (tag, timeout, logtext(tag)[-2000:]))
    return p.returncode, out


def summary(out):
    lines = [json.loads(l)["summary"] for l in out.splitlines() if l.startswith('{"summary"')]
    if len(lines) != 1:
        fail("expected one summary line, got: %r" % out)
    return lines[0]


def feeder(job_path, sock, tag, extra=()):
    p = subprocess.Popen([FEEDER, "--job", job_path, "--listen", sock, "--threads", "1", "--quiet"] + list(extra),
                         stdout=subprocess.DEVNULL, stderr=log(tag))
    PROCS.append(p)
    return p


SMALL_MODEL = ["--model", "mlp", "--hidden", "16", "--lr", "0.05", "--momentum", "0.9", "--seed", "7",
               "--input", "image", "--label", "label", "--classes", "3"]


def small_job():
    data = os.path.join(TMP, "small")
    subprocess.run([RECORD, "gen", "--output-dir", data, "--records", "480", "--shards", "4", "--seed", "5",
                    "--image-bytes", "12", "--classes", "3"], check=True, capture_output=True)
    job = {"name": "ps-it", "files": [os.path.join(data, "gen-*.tfrecord")], "format": "tfrecord",
           "features": {"image": {"dtype": "uint8", "shape": [12], "from": "bytes"},
                        "label": {"dtype": "int64", "shape": []}},
           "shard_policy": "data", "global_batch_size": 16, "epochs": 3,
           "shuffle": {"buffer": 64, "seed": 3}}
    path = os.path.join(TMP, "small.json")
    with open(path, "w") as f:
        json.dump(job, f)
    return path


def train_one(job_path, tag, mode_args, servers=0, placement="round-robin"):
    """One worker of 2 replicas; with servers > 0, --mode ps on that many
    parameter servers. Returns (summary, weights bytes, per-step losses)."""
    sock = "ipc://%s/%s-f.sock" % (TMP, tag)
    f = feeder(job_path, sock, tag + "-feeder")
    eps = ",".join("ipc://%s/%s-ps%d.sock" % (TMP, tag, i) for i in range(servers))
    ps = []
    for i in range(servers):
        ps.append(start([TRAINER, "--mode", "ps", "--ps", eps, "--ps-task", str(i), "--workers", "1",
                         "--ps-placement", placement] + SMALL_MODEL, "%s-ps%d" % (tag, i)))
    weights = os.path.join(TMP, tag + ".npy")
    metrics = os.path.join(TMP, tag + ".jsonl")
    args = [TRAINER, "--connect", sock, "--job", "ps-it", "--worker", "0", "--workers", "1", "--devices", "cpu:2",
            "--save-weights", weights, "--metrics", metrics] + SMALL_MODEL + list(mode_args)
    if servers:
        args += ["--mode", "ps", "--ps", eps, "--ps-placement", placement]
    w = start(args, tag + "-w0")
    rc, out = finish(w, tag + "-w0")
    if rc != 0:
        fail("%s: the worker exited %d: %s" % (tag, rc, logtext(tag + "-w0")[-2000:]))
    for i, p in enumerate(ps):
        prc, pout = finish(p, "%s-ps%d" % (tag, i), 30)
        if prc != 0:
            fail("%s: server %d exited %d: %s" % (tag, i, prc, logtext("%s-ps%d" % (tag, i))))
        s = summary(pout)
        if s["ok"] is not True or s["bad_messages"] != 0 or s["lost_workers"] != 0:
            fail("%s: server %d's summary: %r" % (tag, i, s))
    f.wait(timeout=30)
    with open(weights, "rb") as fh:
        wb = fh.read()
    with open(metrics) as fh:
        losses = [json.loads(l)["loss"] for l in fh]
    return summary(out), wb, losses


def test_one_worker_equals_mirrored(job_path):
    mir, wm, lm = train_one(job_path, "mirrored", [])
    for servers, placement in ((1, "round-robin"), (2, "balanced"), (3, "round-robin")):
        tag = "ps%d-%s" % (servers, placement)
        ps, wp, lp = train_one(job_path, tag, [], servers, placement)
        if ps["mode"] != "ps" or mir["mode"] != "mirrored":
            fail("modes: %s %s" % (ps["mode"], mir["mode"]))
        if ps["steps"] != mir["steps"] or ps["steps"] != 90:
            fail("%s: %d steps, mirrored %d (expected 90: 480 x 3 / 16)" % (tag, ps["steps"], mir["steps"]))
        if lp != lm:
            first = next(i for i in range(min(len(lp), len(lm))) if lp[i] != lm[i]) if lp[:1] else 0
            fail("%s: per-step losses differ from mirrored training's (first at step %d)" % (tag, first))
        if wp != wm or ps["weights_hash"] != mir["weights_hash"]:
            fail("%s: final weights differ from mirrored training's (%s vs %s)" %
                 (tag, ps["weights_hash"], mir["weights_hash"]))
        if ps["ps_global_step"] != 90 or ps["ps_steps"] != 90 or ps["ps_staleness_max"] != 0:
            fail("%s: global step %d, pushes %d, staleness max %d (expected 90, 90, 0)" %
                 (tag, ps["ps_global_step"], ps["ps_steps"], ps["ps_staleness_max"]))
        ok("one worker, %d server(s) (%s): the same %d losses and weights (%s) as mirrored training, bit for bit" %
           (servers, placement, len(lp), ps["weights_hash"]))


def fmnist_job():
    data = os.path.join(TMP, "fmnist")
    os.makedirs(data)
    for prefix, images, labels, shards in (("train", "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", 4),
                                           ("test", "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz", 2)):
        subprocess.run([RECORD, "convert", "idx", "--images", os.path.join(FMNIST, images), "--labels",
                        os.path.join(FMNIST, labels), "--output-dir", data, "--prefix", prefix, "--shards",
                        str(shards)], check=True, capture_output=True)
    feats = {"image": {"dtype": "uint8", "shape": [784], "from": "bytes"},
             "label": {"dtype": "int64", "shape": []}, "id": {"dtype": "int64", "shape": []}}
    train = {"name": "fmnist-train", "files": [os.path.join(data, "train-*.tfrecord")], "format": "tfrecord",
             "features": feats, "shard_policy": "auto", "global_batch_size": 256, "epochs": EPOCHS,
             "shuffle": {"buffer": 10000, "seed": 7, "reshuffle_each_epoch": True}}
    test = {"name": "fmnist-test", "files": [os.path.join(data, "test-*.tfrecord")], "format": "tfrecord",
            "features": feats, "shard_policy": "auto", "global_batch_size": 500, "epochs": 1}
    paths = []
    for j in (train, test):
        paths.append(os.path.join(TMP, j["name"] + ".json"))
        with open(paths[-1], "w") as f:
            json.dump(j, f)
    return paths


def free_ports(n):
    import socket
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def test_cluster_fmnist(train_json, test_json):
    if not os.path.isdir(FMNIST):
        ok("SKIPPED 2 ps x 2 workers on Fashion-MNIST: %s not installed" % FMNIST)
        return
    fsock, esock, vsock = ("ipc://%s/fm-%s.sock" % (TMP, k) for k in ("f", "e", "v"))
    feeders = [feeder(train_json, fsock, "fm-feeder"), feeder(test_json, esock, "fm-efeeder"),
               feeder(test_json, vsock, "fm-vfeeder")]
    ports = free_ports(2)
    cluster = {"worker": ["127.0.0.1:1", "127.0.0.1:2"], "ps": ["127.0.0.1:%d" % p for p in ports],
               "feeder": [fsock], "evaluator": ["127.0.0.1:3"]}
    # one command line for every task: only TF_CONFIG's task differs (and
    # the evaluation feeder: the workers share one, the evaluator has its own)
    # the main job's MLP; its learning rate divided by the workers, as
    # asynchronous updates need (each push is a step of its own: at 0.05
    # two workers' pushes can throw the ReLUs off in the first epoch)
    cmd = [TRAINER, "--job", "fmnist-train", "--mode", "ps", "--model", "mlp", "--hidden", "256,128", "--lr",
           "0.025", "--momentum", "0.9", "--devices", "cpu:2", "--eval-job", "fmnist-test"]
    procs = {}
    # and the evaluator (train_and_evaluate's) on its own evaluation feeder
    for kind, n in (("ps", 2), ("worker", 2), ("evaluator", 1)):
        for i in range(n):
            env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": kind, "index": i}}))
            tag = "fm-%s%d" % (kind, i)
            extra = {"ps": [], "evaluator": ["--eval-connect", vsock],
                     "worker": ["--eval-connect", esock, "--metrics", os.path.join(TMP, tag + ".jsonl")]}[kind]
            procs[tag] = start(cmd + extra, tag, env)
    outs = {}
    t0 = time.time()
    for tag in ("fm-worker0", "fm-worker1", "fm-evaluator0", "fm-ps0", "fm-ps1"):
        rc, out = finish(procs[tag], tag, 600)
        if rc != 0:
            fail("%s exited %d: %s" % (tag, rc, logtext(tag)[-3000:]))
        outs[tag] = summary(out)
    for f in feeders:
        f.wait(timeout=30)
    wall = time.time() - t0
    w0, w1, p0, p1 = outs["fm-worker0"], outs["fm-worker1"], outs["fm-ps0"], outs["fm-ps1"]
    rows = w0["test_rows"] + w1["test_rows"]
    acc = (w0["test_accuracy"] * w0["test_rows"] + w1["test_accuracy"] * w1["test_rows"]) / rows
    if rows != 10000:
        fail("evaluated %d test elements, expected 10000" % rows)
    if acc < 0.85:
        fail("test accuracy %.4f < 0.85" % acc)
    ev = outs["fm-evaluator0"]
    correct = sum(round(w["test_accuracy"] * w["test_rows"]) for w in (w0, w1))
    if ev["test_rows"] != 10000 or ev["test_correct"] != correct or abs(ev["test_accuracy"] - acc) > 1e-5 or \
            ev["weights_hash"] != w0["weights_hash"] or p0["evaluator"] != "served" or p1["evaluator"] != "served":
        fail("the evaluator: %r; the workers' shares: %d correct of %d, accuracy %.5f, weights %s; servers %s %s" %
             (ev, correct, rows, acc, w0["weights_hash"], p0["evaluator"], p1["evaluator"]))
    if w0["weights_hash"] != w1["weights_hash"]:
        fail("the workers end with different weights: %s %s" % (w0["weights_hash"], w1["weights_hash"]))
    steps = w0["steps"] + w1["steps"]
    if steps != 2 * 235 * EPOCHS or w0["ps_steps"] + w1["ps_steps"] != steps:
        fail("worker steps %d + %d (pushes %d + %d), expected %d" %
             (w0["steps"], w1["steps"], w0["ps_steps"], w1["ps_steps"], 2 * 235 * EPOCHS))
    if p0["global_step"] != steps or p1["global_step"] != 0 or w0["ps_global_step"] != steps:
        fail("global step: server 0 %d, server 1 %d, the workers' %d; expected %d on server 0" %
             (p0["global_step"], p1["global_step"], w0["ps_global_step"], steps))
    if p0["pushes"] != steps or p1["pushes"] != steps:
        fail("pushes %d, %d; expected %d each" % (p0["pushes"], p1["pushes"], steps))
    v0, v1 = set(p0["variables"]), set(p1["variables"])
    want = {"W1", "b1", "W2", "b2", "W3", "b3"}
    if v0 & v1 or v0 | v1 != want or v0 != {"W1", "W2", "W3"}:
        fail("variables: server 0 %s, server 1 %s (round robin: W1 W2 W3 on 0, the biases on 1)" % (v0, v1))
    if p0["elements"] + p1["elements"] != 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10:
        fail("the servers hold %d + %d elements" % (p0["elements"], p1["elements"]))
    hist = [a + b for a, b in zip(p0["staleness_hist"], p1["staleness_hist"])]
    if sum(hist) != 2 * steps:
        fail("staleness histogram counts %d pushes, expected %d" % (sum(hist), 2 * steps))
    with open(os.path.join(TMP, "fm-worker0.jsonl")) as f:
        lines = [json.loads(l) for l in f]
    if len(lines) != w0["steps"] or any(k not in lines[0] for k in ("staleness", "pull_s", "push_s", "global_step")):
        fail("--metrics lines in ps mode: %d for %d steps, first %r" % (len(lines), w0["steps"], lines[:1]))
    ok("2 ps x 2 workers x 2 replicas and the evaluator from one TF_CONFIG command line: test accuracy %.4f (the "
       "evaluator's, the workers' shares' row-weighted mean), %d worker steps = the global step, variables %s | %s, "
       "staleness mean %.2f (histogram %s), %.0f s" %
       (acc, steps, sorted(v0), sorted(v1), (p0["staleness_mean"] + p1["staleness_mean"]) / 2, hist[:4], wall))


def test_server_killed(job_path):
    sock = "ipc://%s/kill-f.sock" % TMP
    f = feeder(job_path, sock, "kill-feeder", ["--set", "epochs=100000"])  # minutes: the kill ends it
    eps = "ipc://%s/kill-ps0.sock" % TMP
    ps = start([TRAINER, "--mode", "ps", "--ps", eps, "--ps-task", "0", "--workers", "2"] + SMALL_MODEL, "kill-ps0")
    ws = [start([TRAINER, "--connect", sock, "--job", "ps-it", "--worker", str(w), "--workers", "2",
                 "--devices", "cpu:2", "--mode", "ps", "--ps", eps, "--timeout-ms", "2000"] + SMALL_MODEL,
                "kill-w%d" % w) for w in range(2)]
    time.sleep(1.5)
    for w in ws:
        if w.poll() is not None:
            fail("a worker ended before the kill: %s" % logtext("kill-w0")[-1500:])
    ps.kill()
    t0 = time.time()
    for i, w in enumerate(ws):
        rc, _ = finish(w, "kill-w%d" % i, 30)
        dt = time.time() - t0
        text = logtext("kill-w%d" % i)
        if rc != 1 or "parameter server 0 (%s) did not answer within 2.0 s" % eps not in text:
            fail("worker %d after the server's kill: exit %d, log %s" % (i, rc, text[-1500:]))
        # the timeout, then one more pull of up to 2 s (a restarted server
        # would answer it with its new incarnation), then slack
        if dt > 2.0 + 2.0 + 5.0:
            fail("worker %d took %.1f s to fail (timeout 2 s, then 2 s asking again)" % (i, dt))
    f.kill()
    f.wait()
    ok("a parameter server killed mid-run: both workers fail within %.1f s (--timeout-ms 2000), naming it" %
       (time.time() - t0))


def scrape(port):
    import urllib.request
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
        text = r.read().decode()
    vals = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, v = line.rsplit(" ", 1)
            vals[name] = float(v)
    return text, vals


def test_ps_metrics(job_path):
    """A server's /metrics while a worker trains: pulls, pushes, the global
    step, the staleness histogram (one worker: all 0), then the worker killed
    and the server's end naming it lost, its summary past what was scraped."""
    sock = "ipc://%s/met-f.sock" % TMP
    f = feeder(job_path, sock, "met-feeder", ["--set", "epochs=100000"])
    eps = "ipc://%s/met-ps0.sock" % TMP
    ps = start([TRAINER, "--mode", "ps", "--ps", eps, "--ps-task", "0", "--workers", "1", "--job", "ps-it",
                "--ps-worker-timeout", "2", "--metrics-listen", "127.0.0.1:0"] + SMALL_MODEL, "met-ps0")
    t0 = time.time()
    port = None
    while port is None and time.time() - t0 < 30:
        m = re.search(r"serving /metrics on \S+ \(port (\d+)\)", logtext("met-ps0"))
        port = int(m.group(1)) if m else None
        time.sleep(0.05)
    if port is None:
        fail("the server did not serve /metrics: %s" % logtext("met-ps0"))
    _, before = scrape(port)
    lab = '{sluice_job="ps-it",ps="0"}'
    if before.get("sluice_ps_pushes_total" + lab) != 0 or before.get("sluice_ps_elements" + lab) != 0:
        fail("before any worker: %r" % before)
    w = start([TRAINER, "--connect", sock, "--job", "ps-it", "--devices", "cpu:1", "--mode", "ps", "--ps", eps] +
              SMALL_MODEL, "met-w0")
    time.sleep(1.5)
    text, v = scrape(port)
    # the server publishes its figures one after another while it serves: a
    # scrape mid-run may see them a push apart (never more than 2 here)
    pushes = v.get("sluice_ps_pushes_total" + lab, 0)
    if pushes < 10 or abs(v["sluice_ps_global_step" + lab] - pushes) > 2 or \
            v["sluice_ps_pulls_total" + lab] < pushes - 2:
        fail("mid-run: %r" % v)
    le0 = 'sluice_ps_push_staleness_bucket{sluice_job="ps-it",ps="0",le="0"}'
    inf = 'sluice_ps_push_staleness_bucket{sluice_job="ps-it",ps="0",le="+Inf"}'
    if v[le0] != v[inf] or abs(v[inf] - pushes) > 2 or v["sluice_ps_push_staleness_count" + lab] != v[inf] or \
            v["sluice_ps_push_staleness_sum" + lab] != 0:
        fail("one worker's staleness must be 0 for every push: %r" % {k: x for k, x in v.items() if "stale" in k})
    if v["sluice_ps_elements" + lab] != 12 * 16 + 16 + 16 * 3 + 3:
        fail("elements %r" % v["sluice_ps_elements" + lab])
    if "# TYPE sluice_ps_push_staleness histogram" not in text:
        fail("the staleness is no histogram: %s" % text[:500])
    w.kill()
    w.wait()
    rc, out = finish(ps, "met-ps0", 30)
    s = summary(out)
    if rc != 1 or s["lost_workers"] != 1 or s["pushes"] < pushes:
        fail("after the worker's kill: exit %d, summary %r" % (rc, s))
    f.kill()
    f.wait()
    ok("a server's /metrics mid-run: %d pushes = the global step, every push's staleness 0, %d elements; the worker "
       "killed, the server exits 1 naming it lost" % (pushes, v["sluice_ps_elements" + lab]))


def test_worker_lost(job_path, test_path):
    sock = "ipc://%s/lost-f.sock" % TMP
    vsock = "ipc://%s/lost-v.sock" % TMP
    f = feeder(job_path, sock, "lost-feeder")
    vf = feeder(test_path, vsock, "lost-vfeeder")
    eps = "ipc://%s/lost-ps0.sock" % TMP
    ps = start([TRAINER, "--mode", "ps", "--ps", eps, "--ps-task", "0", "--workers", "2",
                "--ps-worker-timeout", "2", "--ps-evaluator"] + SMALL_MODEL, "lost-ps0")
    ev = start([TRAINER, "--mode", "ps", "--ps", eps, "--evaluator", "--workers", "2", "--eval-connect", vsock,
                "--eval-job", "ps-it-test"] + SMALL_MODEL, "lost-ev")
    w = start([TRAINER, "--connect", sock, "--job", "ps-it", "--worker", "0", "--workers", "2",
               "--devices", "cpu:1", "--mode", "ps", "--ps", eps] + SMALL_MODEL, "lost-w0")
    rc, out = finish(w, "lost-w0", 60)
    # it trains its shard to the end, then its final pull says the job did
    # not finish (issue #24 item 3): exit 1, naming the lost worker
    if rc != 1 or summary(out)["ok"] is not False or summary(out)["lost_workers"] != 1 or \
            "the job did not finish: 1 of 2 workers were lost or failed (worker 1 first" not in logtext("lost-w0"):
        fail("the worker that came: exit %d, %s" % (rc, logtext("lost-w0")[-1500:]))
    prc, pout = finish(ps, "lost-ps0", 30)
    s = summary(pout)
    text = logtext("lost-ps0")
    if prc != 1 or s["ok"] is not False or s["lost_workers"] != 1 or \
            "worker 1 was silent for 2.0 s and is lost (1 lost in all)" not in text:
        fail("server with a lost worker: exit %d, summary %r, log %s" % (prc, s, text[-1500:]))
    if s["global_step"] != summary(out)["steps"]:
        fail("global step %d, the worker's steps %d" % (s["global_step"], summary(out)["steps"]))
    # the evaluator read the unfinished job's weights: it says so, exit 1
    erc, eout = finish(ev, "lost-ev", 30)
    e = summary(eout)
    if erc != 1 or e["ok"] is not False or e["lost_workers"] != 1 or \
            "the job did not finish: 1 of 2 workers were lost or failed (worker 1 first" not in logtext("lost-ev"):
        fail("the evaluator of a job with a lost worker: exit %d, %r, %s" % (erc, e, logtext("lost-ev")[-1500:]))
    f.kill()
    f.wait()
    vf.kill()
    vf.wait()
    ok("a worker that never came: the server serves the other to its end (%d steps) and exits 1 naming worker 1; "
       "so do the other and the evaluator (lost_workers 1 in every summary)" % s["global_step"])


def test_model_mismatch(job_path):
    sock = "ipc://%s/mm-f.sock" % TMP
    f = feeder(job_path, sock, "mm-feeder")
    eps = "ipc://%s/mm-ps0.sock" % TMP
    other = [a if a != "16" else "32" for a in SMALL_MODEL]  # --hidden 32
    ps = start([TRAINER, "--mode", "ps", "--ps", eps, "--ps-task", "0", "--workers", "1"] + other, "mm-ps0")
    w = start([TRAINER, "--connect", sock, "--job", "ps-it", "--devices", "cpu:1", "--mode", "ps", "--ps", eps] +
              SMALL_MODEL, "mm-w0")
    rc, _ = finish(w, "mm-w0", 60)
    prc, pout = finish(ps, "mm-ps0", 30)
    want = ("the workers' model 'inputs=12 classes=3 hidden=16 seed=7 lr=0.0500000007 momentum=0.899999976 "
            "servers=1 placement=round-robin' is not this parameter server's 'inputs=12 classes=3 hidden=32 seed=7 "
            "lr=0.0500000007 momentum=0.899999976 servers=1 placement=round-robin'")
    if rc != 1 or "parameter server 0 (%s) refused: %s" % (eps, want) not in logtext("mm-w0"):
        fail("worker against a mismatched server: exit %d, log %s" % (rc, logtext("mm-w0")[-1500:]))
    if prc != 1 or want not in logtext("mm-ps0") or summary(pout)["pushes"] != 0:
        fail("mismatched server: exit %d, log %s" % (prc, logtext("mm-ps0")[-1500:]))
    f.kill()
    f.wait()
    ok("a server with other model flags: the worker is refused and the server exits 1, both naming the two models")


def test_job(n=200):
    """A test set of n elements (ids 0..n-1) for the small model."""
    data = os.path.join(TMP, "smalltest")
    subprocess.run([RECORD, "gen", "--output-dir", data, "--records", str(n), "--shards", "2", "--seed", "9",
                    "--image-bytes", "12", "--classes", "3", "--prefix", "test"], check=True, capture_output=True)
    job = {"name": "ps-it-test", "files": [os.path.join(data, "test-*.tfrecord")], "format": "tfrecord",
           "features": {"image": {"dtype": "uint8", "shape": [12], "from": "bytes"},
                        "label": {"dtype": "int64", "shape": []}, "id": {"dtype": "int64", "shape": []}},
           "shard_policy": "data", "global_batch_size": 16, "epochs": 1}
    path = os.path.join(TMP, "smalltest.json")
    with open(path, "w") as f:
        json.dump(job, f)
    return path


def test_evaluator(job_path, test_path, by_flags):
    """2 servers, 2 workers evaluating their halves on one eval feeder, and
    the evaluator on its own: the whole test set's figure is the workers'
    shares summed, from the same final weights."""
    tag = "evf" if by_flags else "evt"
    fsock, esock, vsock = ("ipc://%s/%s-%s.sock" % (TMP, tag, k) for k in ("f", "e", "v"))
    feeders = [feeder(job_path, fsock, tag + "-feeder"), feeder(test_path, esock, tag + "-efeeder"),
               feeder(test_path, vsock, tag + "-vfeeder")]
    eps = ["ipc://%s/%s-ps%d.sock" % (TMP, tag, i) for i in range(2)]
    preds = os.path.join(TMP, tag + "-predictions.jsonl")
    cmd = [TRAINER, "--mode", "ps", "--devices", "cpu:2", "--eval-job", "ps-it-test"] + SMALL_MODEL
    procs = {}
    if by_flags:
        for i in range(2):
            procs["ps%d" % i] = start(cmd + ["--ps", ",".join(eps), "--ps-task", str(i), "--workers", "2",
                                             "--ps-evaluator"], "%s-ps%d" % (tag, i))
        for i in range(2):
            procs["worker%d" % i] = start(cmd + ["--ps", ",".join(eps), "--connect", fsock, "--job", "ps-it",
                                                 "--worker", str(i), "--workers", "2", "--eval-connect", esock],
                                          "%s-worker%d" % (tag, i))
        procs["evaluator"] = start(cmd + ["--ps", ",".join(eps), "--evaluator", "--eval-connect", vsock,
                                          "--predictions", preds], tag + "-evaluator")
    else:
        # TensorFlow's cluster: the evaluator is listed apart from the
        # workers (it may also be left out; the servers then wait for it
        # only once they have heard it)
        cluster = {"worker": ["127.0.0.1:1", "127.0.0.1:2"], "ps": eps, "feeder": [fsock],
                   "evaluator": ["127.0.0.1:3"]}
        for kind, n in (("ps", 2), ("worker", 2), ("evaluator", 1)):
            for i in range(n):
                env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": kind, "index": i}}))
                extra = {"ps": [], "worker": ["--job", "ps-it", "--eval-connect", esock],
                         "evaluator": ["--eval-connect", vsock, "--predictions", preds]}[kind]
                procs["%s%d" % (kind, i) if kind != "evaluator" else kind] = start(cmd + extra, "%s-%s%d" % (
                    tag, kind, i) if kind != "evaluator" else tag + "-evaluator", env)
    outs = {}
    for name in ("worker0", "worker1", "evaluator", "ps0", "ps1"):
        rc, out = finish(procs[name], "%s-%s" % (tag, name), 120)
        if rc != 0:
            fail("%s: %s exited %d: %s" % (tag, name, rc, logtext("%s-%s" % (tag, name))[-3000:]))
        outs[name] = summary(out)
    for f in feeders:
        f.wait(timeout=30)
    w0, w1, ev, p0, p1 = (outs[k] for k in ("worker0", "worker1", "evaluator", "ps0", "ps1"))
    shares = [round(w["test_accuracy"] * w["test_rows"]) for w in (w0, w1)]
    if w0["test_rows"] == 0 or w1["test_rows"] == 0 or w0["test_rows"] + w1["test_rows"] != 200:
        fail("%s: the workers evaluated %d + %d elements of 200" % (tag, w0["test_rows"], w1["test_rows"]))
    if ev["test_rows"] != 200 or ev["test_correct"] != sum(shares):
        fail("%s: the evaluator: %d rows, %d correct; the workers' shares %d + %d rows, %r correct" %
             (tag, ev["test_rows"], ev["test_correct"], w0["test_rows"], w1["test_rows"], shares))
    mean = (w0["test_accuracy"] * w0["test_rows"] + w1["test_accuracy"] * w1["test_rows"]) / 200
    if abs(ev["test_accuracy"] - mean) > 1e-5 or ev["test_accuracy"] != round(sum(shares) / 200.0, 5):
        fail("%s: the evaluator's accuracy %.5f, the workers' row-weighted mean %.6f" %
             (tag, ev["test_accuracy"], mean))
    if not (ev["weights_hash"] == w0["weights_hash"] == w1["weights_hash"]):
        fail("%s: weights: evaluator %s, workers %s %s" % (tag, ev["weights_hash"], w0["weights_hash"],
                                                          w1["weights_hash"]))
    steps = w0["steps"] + w1["steps"]
    if ev["global_step"] != steps or p0["global_step"] != steps or p0["pushes"] != steps or p1["pushes"] != steps:
        fail("%s: global step: evaluator %d, server 0 %d; pushes %d %d; the workers' steps %d" %
             (tag, ev["global_step"], p0["global_step"], p0["pushes"], p1["pushes"], steps))
    for i, p in enumerate((p0, p1)):
        if p["ok"] is not True or p["evaluator"] != "served" or p["lost_workers"] != 0 or p["bad_messages"] != 0 or \
                p["workers"] != 2:
            fail("%s: server %d's summary %r" % (tag, i, p))
    with open(preds) as f:
        lines = [json.loads(l) for l in f]
    if [l["id"] for l in lines] != list(range(200)) or \
            sum(l["prediction"] == l["label"] for l in lines) != ev["test_correct"]:
        fail("%s: --predictions: %d lines, ids %r..., %d right (counted %d)" %
             (tag, len(lines), [l["id"] for l in lines][:5], sum(l["prediction"] == l["label"] for l in lines),
              ev["test_correct"]))
    if "evaluator: every worker is done; the final weights (global step %d)" % steps not in \
            logtext(tag + "-evaluator"):
        fail("%s: the evaluator's log: %s" % (tag, logtext(tag + "-evaluator")[-1500:]))
    ok("the evaluator (%s): the whole test set, %d of 200 right (%.5f) = the workers' shares %d/%d + %d/%d, the "
       "same final weights %s, predictions in id order; not a worker on the servers (pushes %d = the steps)" %
       ("--evaluator, --ps-evaluator" if by_flags else "TF_CONFIG task 'evaluator'", ev["test_correct"],
        ev["test_accuracy"], shares[0], w0["test_rows"], shares[1], w1["test_rows"], ev["weights_hash"], steps))


def test_evaluator_lost(job_path):
    """A server told of an evaluator that never comes: the worker is not
    held up; the server waits --ps-worker-timeout, counts it lost, warns and
    exits 0."""
    sock = "ipc://%s/evl-f.sock" % TMP
    f = feeder(job_path, sock, "evl-feeder")
    eps = "ipc://%s/evl-ps0.sock" % TMP
    ps = start([TRAINER, "--mode", "ps", "--ps", eps, "--ps-task", "0", "--workers", "1", "--ps-evaluator",
                "--ps-worker-timeout", "2"] + SMALL_MODEL, "evl-ps0")
    w = start([TRAINER, "--connect", sock, "--job", "ps-it", "--devices", "cpu:1", "--mode", "ps", "--ps", eps] +
              SMALL_MODEL, "evl-w0")
    rc, out = finish(w, "evl-w0", 60)
    t_done = time.time()
    if rc != 0:
        fail("the worker exited %d: %s" % (rc, logtext("evl-w0")[-1500:]))
    prc, pout = finish(ps, "evl-ps0", 30)
    s = summary(pout)
    text = logtext("evl-ps0")
    if prc != 0 or s["ok"] is not True or s["evaluator"] != "lost" or s["lost_workers"] != 0 or \
            "the evaluator was silent for 2.0 s once the workers were done and is lost" not in text or \
            time.time() - t_done > 10:
        fail("server with an evaluator that never came: exit %d, summary %r, log %s" % (prc, s, text[-1500:]))
    f.kill()
    f.wait()
    ok("an evaluator expected and never come: the worker ends at once, the server counts it lost and exits 0")


def test_usage():
    ipc = "ipc://%s/u.sock" % TMP
    cases = [
        (["--connect", ipc, "--job", "j", "--mode", "ps", "--model", "mlp"],
         "--mode ps needs the parameter servers: --ps ADDRS or the cluster spec's 'ps' list"),
        (["--connect", ipc, "--job", "j", "--mode", "ps", "--ps", ipc], "--mode ps trains a model"),
        (["--connect", ipc, "--job", "j", "--mode", "ps", "--model", "mlp", "--ps", ipc, "--workers", "2",
          "--ring", ipc + "1," + ipc + "2"], "--mode ps has no ring"),
        (["--connect", ipc, "--job", "j", "--model", "mlp", "--ps", ipc],
         "--ps names parameter servers: give --mode ps too"),
        (["--mode", "ps", "--model", "mlp", "--ps", ipc, "--ps-task", "1"], "--ps-task 1: --ps names 1 parameter"),
        (["--mode", "ps", "--ps", ipc, "--ps-task", "0"], "a parameter server needs the workers' model flags"),
        (["--model", "mlp", "--ps", ipc, "--ps-task", "0"], "a parameter server serves --mode ps workers"),
        (["--mode", "ps", "--model", "mlp", "--ps", "198.18.0.7:7001", "--ps-task", "0"],
         "parameter server 0 would listen on tcp://*:7001, which other hosts can reach"),
        (["--mode", "ps", "--model", "mlp", "--ps", ",".join([ipc] * 257), "--ps-task", "0"],
         "--ps: at most 256 endpoints"),
        (["--mode", "ps", "--model", "mlp", "--ps", ipc, "--ps-task", "256"], "ps-task"),
        (["--mode", "ps", "--model", "mlp", "--ps", ipc, "--ps-task", "-1"], "ps-task"),
        (["--mode", "ps", "--model", "mlp", "--ps", ipc, "--ps-task", "0", "--ps-worker-timeout", "0"],
         "ps-worker-timeout"),
        (["--mode", "ps", "--model", "mlp", "--ps", ipc, "--ps-task", "0", "--ps-worker-timeout", "99999999999"],
         "ps-worker-timeout"),
        (["--mode", "ps", "--model", "mlp", "--ps", ipc, "--ps-task", "0", "--ps-placement", "random"],
         "ps-placement"),
        (["--connect", ipc, "--job", "j", "--mode", "ps", "--model", "mlp", "--ps", ipc, "--checkpoint", TMP],
         "give --checkpoint and --restore to the ps tasks (a worker started again resumes where the servers "
         "recorded by itself)"),
        (["--mode", "ps", "--model", "mlp", "--ps", ipc, "--ps-task", "0", "--restore", TMP, "--restore-step", "5"],
         "--restore-step: a parameter server restores its newest checkpoint"),
        (["--mode", "ps", "--model", "mlp", "--ps", ipc, "--ps-task", "0", "--keep", "5"],
         "--keep needs --checkpoint DIR"),
        (["--connect", ipc, "--job", "j", "--mode", "ps", "--model", "mlp", "--ps", ipc, "--devices", "gpu:0"],
         ""),  # refused: no GPU 0 on this machine (or no CUDA in this build)
        (["--connect", ipc, "--job", "j", "--mode", "ps", "--model", "mlp", "--ps", ipc, "--eval-connect", ipc,
          "--predictions", TMP + "/p.jsonl"],
         "--predictions in --mode ps are the evaluator's (--evaluator, or a TF_CONFIG task of type 'evaluator')"),
        (["--mode", "ps", "--model", "mlp", "--ps", ipc, "--ps-task", "0", "--evaluator"],
         "a task is a parameter server (--ps-task) or the evaluator (--evaluator), not both"),
        (["--mode", "ps", "--model", "mlp", "--ps", ipc, "--ps-evaluator", "--connect", ipc, "--job", "j"],
         "--ps-evaluator tells a parameter server (--ps-task) that the job has an evaluator"),
        (["--model", "mlp", "--ps", ipc, "--evaluator", "--eval-connect", ipc, "--eval-job", "t"],
         "the evaluator evaluates a --mode ps job: give the workers' --mode ps"),
        (["--mode", "ps", "--ps", ipc, "--evaluator", "--eval-connect", ipc, "--eval-job", "t"],
         "the evaluator needs the workers' model flags"),
        (["--mode", "ps", "--model", "mlp", "--evaluator", "--eval-connect", ipc, "--eval-job", "t"],
         "the evaluator reads the weights from the parameter servers: --ps ADDRS"),
        (["--mode", "ps", "--model", "mlp", "--ps", ipc, "--evaluator", "--eval-job", "t"],
         "the evaluator evaluates on its own evaluation feeders: give --eval-connect ADDRS"),
        (["--mode", "ps", "--model", "mlp", "--ps", ipc, "--evaluator", "--eval-connect", ipc],
         "the evaluator needs the evaluation job's name: --eval-job NAME (or --job)"),
        (["--mode", "ps", "--model", "mlp", "--ps", ipc, "--evaluator", "--eval-connect", ipc, "--job", "t",
          "--connect", ipc], "the evaluator trains nothing and meets no worker: drop --connect"),
        (["--mode", "ps", "--model", "mlp", "--ps", ipc, "--evaluator", "--eval-connect", ipc, "--job", "t",
          "--checkpoint", TMP], "the evaluator trains nothing and meets no worker: drop --checkpoint"),
        (["--mode", "ps", "--model", "mlp", "--ps", ipc, "--evaluator", "--eval-connect", ipc, "--job", "t",
          "--devices", "cpu:2", "--replicas", "3"], "--replicas 3 disagrees with --devices (2 replicas)"),
        (["--mode", "ps", "--model", "mlp", "--ps", ipc, "--evaluator", "--eval-connect", ipc, "--job", "t",
          "--save-weights", TMP + "/w.npy"],
         "the evaluator writes its summary and --predictions, nothing else: drop --save-weights"),
        (["--mode", "ps", "--model", "mlp", "--ps", ipc, "--evaluator", "--eval-connect", ipc, "--job", "t",
          "--metrics-listen", "127.0.0.1:0"],
         "the evaluator writes its summary and --predictions, nothing else: drop --metrics-listen"),
    ]
    for args, want in cases:
        p = subprocess.run([TRAINER] + args, capture_output=True, text=True, timeout=30)
        if p.returncode != 2 or want not in p.stderr:
            fail("usage %r: exit %d, stderr %r (wanted %r)" % (args, p.returncode, p.stderr, want))
    env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": {"ps": ["127.0.0.1:7000"]},
                                                 "task": {"type": "ps", "index": 0}}))
    p = subprocess.run([TRAINER, "--mode", "ps", "--model", "mlp"], capture_output=True, text=True, env=env,
                       timeout=30)
    if p.returncode != 2 or "a 'ps' task needs the 'chief' or 'worker' list" not in p.stderr:
        fail("TF_CONFIG ps task without workers: exit %d, %r" % (p.returncode, p.stderr))
    for spec, want in (({"cluster": {"worker": ["a:1"], "ps": [ipc]}, "task": {"type": "evaluator", "index": 1}},
                        "cluster spec: 'task.index' 1 is out of range for the 1 'evaluator' tasks"),
                       ({"cluster": {"worker": ["a:1"], "ps": [ipc], "evaluator": ["e:1", "e:2"]},
                         "task": {"type": "evaluator", "index": 0}},
                        "cluster spec: 'cluster.evaluator' holds 2 tasks, at most 1"),
                       ({"cluster": {"worker": ["a:1"], "ps": [ipc]}, "task": {"type": "evaluator", "index": 0}},
                        "the evaluator evaluates on its own evaluation feeders: give --eval-connect ADDRS"),
                       ({"cluster": {"worker": ["a:1"], "ps": [ipc]}, "task": {"type": "worker", "index": 0}},
                        "--ps-evaluator tells a parameter server (--ps-task) that the job has an evaluator")):
        extra = ["--ps-evaluator"] if spec["task"]["type"] == "worker" else []
        p = subprocess.run([TRAINER, "--mode", "ps", "--model", "mlp"] + extra, capture_output=True, text=True,
                           env=dict(os.environ, TF_CONFIG=json.dumps(spec)), timeout=30)
        if p.returncode != 2 or want not in p.stderr:
            fail("TF_CONFIG %r: exit %d, %r (wanted %r)" % (spec, p.returncode, p.stderr, want))
    ok("%d usage errors refused with their messages (exit 2)" % (len(cases) + 5))


def test_uneven_shards():
    """FILE sharding of 6 files over 4 workers: workers 2 and 3 read one file
    (20 steps of data), 0 and 1 two (40 steps): every epoch has 40 steps and
    2 and 3 get empty pieces for the last 20 of them. Their steps with no rows
    tell the servers their position (nothing applied), so their next epoch's
    first push is one step after it; the servers used to refuse that push as
    a step skipped, failing both workers."""
    data = os.path.join(TMP, "uneven")
    subprocess.run([RECORD, "gen", "--output-dir", data, "--records", "240", "--shards", "6", "--seed", "5",
                    "--image-bytes", "12", "--classes", "3"], check=True, capture_output=True)
    job = {"name": "ps-uneven", "files": [os.path.join(data, "gen-*.tfrecord")], "format": "tfrecord",
           "features": {"image": {"dtype": "uint8", "shape": [12], "from": "bytes"},
                        "label": {"dtype": "int64", "shape": []}},
           "shard_policy": "file", "global_batch_size": 8, "epochs": 2}
    path = os.path.join(TMP, "uneven.json")
    with open(path, "w") as f:
        json.dump(job, f)
    sock = "ipc://%s/uneven-f.sock" % TMP
    f = feeder(path, sock, "uneven-feeder")
    ep = "ipc://%s/uneven-ps0.sock" % TMP
    ps = start([TRAINER, "--mode", "ps", "--ps", ep, "--ps-task", "0", "--workers", "4"] + SMALL_MODEL, "uneven-ps0")
    ws = [start([TRAINER, "--connect", sock, "--job", "ps-uneven", "--worker", str(w), "--workers", "4",
                 "--devices", "cpu:1", "--mode", "ps", "--ps", ep] + SMALL_MODEL, "uneven-w%d" % w)
          for w in range(4)]
    outs = []
    for w, p in enumerate(ws):
        rc, out = finish(p, "uneven-w%d" % w, 120)
        if rc != 0:
            fail("uneven shards: worker %d exited %d: %s" % (w, rc, logtext("uneven-w%d" % w)[-1500:]))
        outs.append(summary(out))
    prc, pout = finish(ps, "uneven-ps0", 30)
    s = summary(pout)
    # pushes: workers 0 and 1 40 steps an epoch, 2 and 3 20, over 2 epochs
    if prc != 0 or s["ok"] is not True or s["bad_messages"] != 0 or s["pushes"] != 240 or \
            s["empty_steps"] != 80 or s["global_step"] != 240:
        fail("uneven shards: the server exited %d: %r %s" % (prc, s, logtext("uneven-ps0")[-1500:]))
    hashes = {o["weights_hash"] for o in outs}
    if len(hashes) != 1:
        fail("uneven shards: the workers' final weights differ: %r" % hashes)
    f.wait(timeout=30)
    ok("FILE sharding of 6 files over 4 ps workers: the two with one file tell the server their 40 empty steps "
       "(80 recorded, nothing applied), 240 pushes, every worker to the end with one weights hash")


def main():
    job = small_job()
    test_usage()
    test_one_worker_equals_mirrored(job)
    test_model_mismatch(job)
    test_uneven_shards()
    test_server_killed(job)
    test = test_job()
    test_worker_lost(job, test)
    test_ps_metrics(job)
    test_evaluator(job, test, False)
    test_evaluator(job, test, True)
    test_evaluator_lost(job)
    if "--no-fmnist" in sys.argv:
        ok("SKIPPED 2 ps x 2 workers on Fashion-MNIST: --no-fmnist (a sanitizer build)")
    elif os.path.isdir(FMNIST):
        train_json, test_json = fmnist_job()
        test_cluster_fmnist(train_json, test_json)
    else:
        ok("SKIPPED 2 ps x 2 workers on Fashion-MNIST: %s not installed" % FMNIST)
    print("%d passed, 0 failed" % PASSED)
    shutil.rmtree(TMP, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    finally:
        for p in PROCS:
            if p.poll() is None:
                p.kill()
