#!/usr/bin/env python3
"""Integration: the network endpoints of real sluice processes (issue #24
items 6, 7, 8, 11, 12).

- /metrics under Slowloris: 40 connections from 127.0.0.2, each trickling
  a header line every second (inside the 10 s silence timeout), do not keep
  a scrape from 127.0.0.1 out: one address holds at most 8 connections.
- /metrics addresses: ':PORT' is refused (exit 2, saying why); '*:PORT'
  serves with a warning that other hosts can reach it; '127.0.0.1:PORT'
  serves without one.
- ipc://: a second feeder on a live feeder's path is refused (exit 1, the
  path named) and the first still serves a trainer; a feeder killed with
  SIGKILL leaves a stale socket file, which the next feeder replaces.
- Ports outside 1..65535 refused by every parser a user reaches: --listen,
  --connect, --ps, --peers, --metrics-listen, TF_CONFIG.
- tcp://localhost:PORT and tcp://[::1]:PORT bind and serve a trainer, and
  carry two workers' ring (--ring tcp://localhost:P, tcp://[::1]:P) (the
  [::1] cases are skipped without an IPv6 loopback); the seed's TF_CONFIG,
  "ps": ["localhost:PORT"], runs a parameter server and a worker in ps mode.

Usage: test_endpoints.py BUILD_DIR     (prints "N passed, 0 failed" at the end)
"""
import json
import os
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bed  # noqa: E402
import harness  # noqa: E402
from bed import log_path, read_log, wait, wait_for_log  # noqa: E402
from harness import fail, ok, spawn  # noqa: E402

bed.setup(sys.argv[1], "endpoints")
FEEDER, TRAINER, TMP = bed.FEEDER, bed.TRAINER, bed.TMP
FAST = ["--heartbeat-ms", "200"]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def has_ipv6_loopback():
    try:
        s = socket.socket(socket.AF_INET6)
        s.bind(("::1", 0))
        s.close()
        return True
    except OSError:
        return False


def feeder(tag, job_path, listen, extra=(), who="feeder"):
    return spawn([FEEDER, "--job", job_path, "--listen", listen, "--threads", "1"] + FAST + list(extra),
                 log=log_path(tag, who))


def trainer(tag, connect, job, extra=(), who="trainer"):
    trace = os.path.join(TMP, "%s-%s-trace.jsonl" % (tag, who))
    p = spawn([TRAINER, "--connect", connect, "--job", job["name"], "--trace", trace, "--connect-timeout", "20"]
              + FAST + list(extra), log=log_path(tag, who), stdout=subprocess.DEVNULL)
    return p, trace


def pieces(trace):
    with open(trace) as f:
        return sum(1 for line in f if "ids" in json.loads(line))


def serve_one(tag, job_path, job, listen, connect, want):
    """A feeder on `listen` serves a trainer at `connect` every piece."""
    f = feeder(tag, job_path, listen)
    t, trace = trainer(tag, connect, job)
    if wait(t, 120, tag + ": the trainer") != 0:
        fail("%s: the trainer exited %d:\n%s\n%s" % (tag, t.returncode, read_log(tag, "trainer")[-1500:],
                                                     read_log(tag, "feeder")[-1500:]))
    if wait(f, 30, tag + ": the feeder") != 0 or pieces(trace) != want:
        fail("%s: feeder exit %s, %d pieces (want %d):\n%s" % (tag, f.returncode, pieces(trace), want,
                                                               read_log(tag, "feeder")[-1500:]))


def usage(args, want, what, env=None):
    """args exit 2 with `want` in their stderr."""
    p = subprocess.run(args, capture_output=True, text=True, timeout=60, env=env)
    if p.returncode != 2 or want not in p.stderr:
        fail("%s: exit %d (want 2), stderr %r (want %r)" % (what, p.returncode, p.stderr[-600:], want))


def scrape(port, timeout=5.0):
    """GET /metrics from 127.0.0.1: the status line, or '' when the
    connection was closed unanswered."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
    except OSError:
        pass
    finally:
        s.close()
    return data.split(b"\r\n", 1)[0].decode(errors="replace")


# ---- /metrics ----

def case_slowloris(job_path):
    harness.case()
    tag = "slowloris"
    port = free_port()
    f = spawn([FEEDER, "--job", job_path, "--listen", "ipc://%s/%s.sock" % (TMP, tag), "--threads", "1",
               "--metrics-listen", "127.0.0.1:%d" % port] + FAST, log=log_path(tag, "feeder"))
    wait_for_log(tag, "feeder", "metrics: serving /metrics", f, "slowloris: the feeder did not serve /metrics")
    if scrape(port) != "HTTP/1.1 200 OK":
        fail("slowloris: a scrape before the attack failed")
    slow = []
    for _ in range(40):
        s = socket.socket()
        s.bind(("127.0.0.2", 0))
        s.connect(("127.0.0.1", port))
        s.setblocking(False)
        try:
            s.send(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        except OSError:
            pass
        slow.append(s)
    statuses = []
    t0 = time.time()
    while time.time() - t0 < 4.0:
        for s in slow:  # a header line a second each (the 10 s silence timeout never fires)
            try:
                s.send(b"X-Slow: 1\r\n")
            except OSError:
                pass
        for _ in range(2):
            statuses.append(scrape(port))
            time.sleep(0.5)
    alive = 0
    for s in slow:
        try:
            s.recv(1)  # b"": closed by the server
        except BlockingIOError:
            alive += 1  # still open, nothing from the server
        except OSError:
            pass  # reset by the server
        s.close()
    f.send_signal(signal.SIGTERM)
    wait(f, 30, "slowloris: the feeder")
    bad = [x for x in statuses if x != "HTTP/1.1 200 OK"]
    if bad:
        fail("slowloris: %d of %d scrapes failed during the attack: %r" % (len(bad), len(statuses), bad[:3]))
    if alive != 8:
        fail("slowloris: %d of the attacker's 40 connections were held open (want 8, the per-address cap)" % alive)
    ok("/metrics under Slowloris: 40 trickling connections from 127.0.0.2 hold 8 slots (the cap), and all %d "
       "scrapes from 127.0.0.1 meanwhile are answered 200" % len(statuses))


def case_metrics_address(job_path):
    harness.case()
    tag = "maddr"
    port = free_port()
    sock = "ipc://%s/%s.sock" % (TMP, tag)
    usage([FEEDER, "--job", job_path, "--listen", sock, "--metrics-listen", ":%d" % port],
          "--metrics-listen: ':%d' names no host: give 127.0.0.1:%d (this host only) or, to be scraped from other "
          "hosts, *:%d or an address of this host" % (port, port, port), "metrics ':PORT'")
    usage([FEEDER, "--job", job_path, "--listen", sock, "--metrics-listen", "127.0.0.1:99999"],
          "got '127.0.0.1:99999' (port 99999 is out of range (0-65535))", "metrics port 99999")
    warning = "can be reached from other hosts, and it shows file names, the job's name and shape"
    for listen, warned in (("*:%d" % port, True), ("0.0.0.0:%d" % port, True), ("127.0.0.1:%d" % port, False)):
        who = "feeder-" + listen.split(":")[0].replace("*", "star")
        f = spawn([FEEDER, "--job", job_path, "--listen", sock, "--threads", "1", "--metrics-listen", listen]
                  + FAST, log=log_path(tag, who))
        wait_for_log(tag, who, "metrics: serving /metrics", f, "metrics %s: the feeder did not serve" % listen)
        f.send_signal(signal.SIGTERM)
        wait(f, 30, "metrics %s: the feeder" % listen)
        if (warning in read_log(tag, who)) != warned:
            fail("metrics %s: warning %s expected:\n%s" % (listen, "a" if warned else "no",
                                                           read_log(tag, who)[-1500:]))
    ok("/metrics address: ':PORT' refused (exit 2, saying why), '*:PORT' and '0.0.0.0:PORT' serve with a warning, "
       "127.0.0.1 without one")


# ---- ipc ----

def case_ipc_takeover(job_path, job, want):
    harness.case()
    tag = "ipc"
    path = os.path.join(TMP, "ipc-live.sock")
    sock = "ipc://" + path
    a = feeder(tag, job_path, sock, who="feeder-a")
    wait_for_log(tag, "feeder-a", "listening on", a, "ipc: feeder a did not bind")
    b = feeder(tag, job_path, sock, who="feeder-b")
    if wait(b, 30, "ipc: feeder b") != 1:
        fail("ipc: a second feeder on a live path exited %d (want 1):\n%s" % (b.returncode,
                                                                          read_log(tag, "feeder-b")[-1500:]))
    msg = "bind(%s): a live process serves %s (another feeder, trainer or server?): stop it or choose another path" \
        % (sock, path)
    if msg not in read_log(tag, "feeder-b"):
        fail("ipc: feeder b's log lacks %r:\n%s" % (msg, read_log(tag, "feeder-b")[-1500:]))
    t, trace = trainer(tag, sock, job)
    if wait(t, 120, "ipc: the trainer of feeder a") != 0 or wait(a, 30, "ipc: feeder a") != 0 or \
            pieces(trace) != want:
        fail("ipc: feeder a no longer serves its path (trainer %s, feeder %s):\n%s" %
             (t.returncode, a.returncode, read_log(tag, "trainer")[-1500:]))
    # a feeder killed leaves its socket file behind: stale, replaced
    c = feeder(tag, job_path, sock, who="feeder-c")
    wait_for_log(tag, "feeder-c", "listening on", c, "ipc: feeder c did not bind")
    c.send_signal(signal.SIGKILL)
    c.wait()
    if not os.path.exists(path):
        fail("ipc: a killed feeder's socket file is gone (the stale case is not tested)")
    tag2 = "ipc-stale"
    serve_one(tag2, job_path, job, sock, sock, want)
    # a parameter server binds through the same check
    ps_path = os.path.join(TMP, "ipc-ps.sock")
    model = ["--mode", "ps", "--model", "mlp", "--hidden", "8", "--classes", "10", "--ps", "ipc://" + ps_path,
             "--ps-task", "0", "--workers", "1"]
    p1 = spawn([TRAINER] + model, log=log_path(tag, "ps1"), stdout=subprocess.DEVNULL)
    wait_for_log(tag, "ps1", "serving 1 workers", p1, "ipc: the first parameter server did not start")
    p2 = spawn([TRAINER] + model, log=log_path(tag, "ps2"), stdout=subprocess.DEVNULL)
    msg = "parameter server 0: cannot listen: bind(ipc://%s): a live process serves %s" % (ps_path, ps_path)
    if wait(p2, 30, "ipc: the second parameter server") != 1 or msg not in read_log(tag, "ps2"):
        fail("ipc: a second parameter server on a live one's path: exit %s, want 1 and %r:\n%s"
             % (p2.returncode, msg, read_log(tag, "ps2")[-1500:]))
    if p1.poll() is not None:
        fail("ipc: the first parameter server ended when a second tried its path")
    p1.send_signal(signal.SIGTERM)
    wait(p1, 30, "ipc: the first parameter server")
    ok("ipc: a second feeder on a live feeder's path refused (exit 1, naming it), the first serves on (%d pieces); "
       "a killed feeder's stale socket replaced by the next; a second parameter server on a live one's path "
       "refused too" % want)


# ---- ports and addresses ----

def case_port_range(job_path):
    harness.case()
    sock = "ipc://%s/range.sock" % TMP
    usage([FEEDER, "--job", job_path, "--listen", "tcp://127.0.0.1:99999"],
          "--listen: 'tcp://127.0.0.1:99999': port 99999 is out of range (1-65535)", "--listen 99999")
    usage([FEEDER, "--job", job_path, "--listen", "tcp://127.0.0.1:0"],
          "--listen: 'tcp://127.0.0.1:0': port 0 is out of range (1-65535)", "--listen 0")
    usage([TRAINER, "--connect", "tcp://127.0.0.1:65536", "--job", "j"],
          "--connect: 'tcp://127.0.0.1:65536': port 65536 is out of range (1-65535)", "--connect 65536")
    usage([TRAINER, "--connect", sock, "--job", "j", "--mode", "ps", "--model", "mlp", "--ps", "127.0.0.1:-1"],
          "--ps: 'tcp://127.0.0.1:-1': port '-1' is not a decimal number (expected 1-65535)", "--ps -1")
    usage([TRAINER, "--connect", sock, "--job", "j", "--model", "mlp", "--workers", "2", "--peers",
           "127.0.0.1:7000,127.0.0.1:99999999999999999999"],
          "--peers: 'tcp://127.0.0.1:99999999999999999999': port 9999999999999999... is out of range (1-65535)",
          "--peers huge")
    env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": {"worker": ["localhost:12345"],
                                                             "ps": ["localhost:99999"]},
                                                 "task": {"type": "ps", "index": 0}}))
    usage([TRAINER, "--mode", "ps", "--model", "mlp"],
          "cluster spec: 'cluster.ps[0]': 'tcp://localhost:99999': port 99999 is out of range (1-65535)",
          "TF_CONFIG ps 99999", env=env)
    ok("ports outside 1..65535 refused (exit 2, the value named): --listen 99999 and 0, --connect 65536, --ps -1, "
       "--peers with 20 digits, TF_CONFIG's ps 99999")


def case_localhost(job_path, job, want):
    harness.case()
    port = free_port()
    serve_one("lh", job_path, job, "tcp://localhost:%d" % port, "tcp://localhost:%d" % port, want)
    if "can be reached from other hosts" in read_log("lh", "feeder"):
        fail("localhost: the feeder took tcp://localhost for a public address")
    if has_ipv6_loopback():
        port = free_port()
        serve_one("v6", job_path, job, "tcp://[::1]:%d" % port, "tcp://[::1]:%d" % port, want)
        v6 = "and tcp://[::1]"
    else:
        v6 = "(SKIPPED tcp://[::1]: no IPv6 loopback here)"
    ok("tcp://localhost %s bind without --insecure and serve a trainer every piece (%d)" % (v6, want))


def ring_pair(tag, job_path, job, ring_args):
    """Two workers whose ring is given by ring_args(w): both exit 0 with the
    same weights (the ring and worker 0's rendezvous bound and reached)."""
    sock = "ipc://%s/%s-f.sock" % (TMP, tag)
    f = feeder(tag, job_path, sock)
    model = ["--model", "mlp", "--hidden", "8", "--lr", "0.05", "--momentum", "0.9", "--seed", "7", "--input",
             "image", "--label", "label", "--classes", "10", "--devices", "cpu:1"]
    ws = [spawn([TRAINER, "--connect", sock, "--job", job["name"], "--worker", str(w), "--workers", "2",
                 "--connect-timeout", "20"] + model + ring_args(w),
                log=log_path(tag, "w%d" % w), stdout=subprocess.PIPE, text=True) for w in range(2)]
    hashes = set()
    for w, p in enumerate(ws):
        try:
            out, _ = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            fail("%s: worker %d did not finish" % (tag, w))
        if p.returncode != 0:
            fail("%s: worker %d exited %d:\n%s" % (tag, w, p.returncode, read_log(tag, "w%d" % w)[-1500:]))
        hashes.add(json.loads(out.strip().splitlines()[-1])["summary"]["weights_hash"])
    wait(f, 30, tag + ": the feeder")
    if len(hashes) != 1:
        fail("%s: the workers end with different weights: %s" % (tag, hashes))


def case_ring_localhost(job_path, job):
    harness.case()
    p = [free_port(), free_port()]
    ring_pair("ring-lh", job_path, job, lambda w: ["--ring", "tcp://localhost:%d,tcp://localhost:%d" % (p[0], p[1])])
    if has_ipv6_loopback():
        q = [free_port(), free_port()]
        ring_pair("ring-v6", job_path, job, lambda w: ["--ring", "tcp://[::1]:%d,tcp://[::1]:%d" % (q[0], q[1])])
        v6 = "and --ring tcp://[::1]"
    else:
        v6 = "(SKIPPED tcp://[::1]: no IPv6 loopback here)"
    ok("a ring on --ring tcp://localhost:P %s: two workers train without --insecure to the same weights" % v6)


def case_seed_tf_config(job_path, job):
    """The seed's TF_CONFIG: 'ps': ['localhost:PORT'] (and workers on
    localhost), a ps task and a worker in ps mode, one command line."""
    harness.case()
    tag = "seed"
    fsock = "ipc://%s/seed-f.sock" % TMP
    f = feeder(tag, job_path, fsock)
    ps_port, w_port = free_port(), free_port()
    cluster = {"worker": ["localhost:%d" % w_port], "ps": ["localhost:%d" % ps_port], "feeder": [fsock]}
    model = ["--model", "mlp", "--hidden", "8", "--lr", "0.05", "--momentum", "0.9", "--seed", "7", "--input",
             "image", "--label", "label", "--classes", "10"]
    procs = {}
    for kind in ("ps", "worker"):
        env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": kind, "index": 0}}))
        procs[kind] = spawn([TRAINER, "--job", job["name"], "--mode", "ps", "--connect-timeout", "20"] + model,
                            log=log_path(tag, kind), env=env, stdout=subprocess.DEVNULL)
    for kind in ("worker", "ps"):
        if wait(procs[kind], 120, "seed: the %s task" % kind) != 0:
            fail("seed TF_CONFIG: the %s task exited %d:\n%s" % (kind, procs[kind].returncode,
                                                                read_log(tag, kind)[-2000:]))
    wait(f, 30, "seed: the feeder")
    if "serving 1 workers on tcp://localhost:%d" % ps_port not in read_log(tag, "ps"):
        fail("seed TF_CONFIG: the server did not serve on localhost:\n%s" % read_log(tag, "ps")[-1500:])
    ok("the seed's TF_CONFIG ('ps': ['localhost:%d']): a parameter server and a worker in ps mode train to the end"
       % ps_port)


def main():
    files = bed.gen("data", 96, 2, seed=4)
    job_path, job = bed.write_job("ep-job", files, epochs=1)
    want = 96 // 8
    case_slowloris(job_path)
    case_metrics_address(job_path)
    case_ipc_takeover(job_path, job, want)
    case_port_range(job_path)
    case_localhost(job_path, job, want)
    case_ring_localhost(job_path, job)
    case_seed_tf_config(job_path, job)
    bed.finish()
    bed.cleanup()


if __name__ == "__main__":
    main()
