#!/usr/bin/env python3
"""The copy path across hosts: feeders and one trainer on separate hosts of
the test bed (tests/cluster/netns.py: network namespaces on a bridge, the
trainer in a PID namespace of its own, so every piece crosses the link by
copy), against raw ZeroMQ PUSH/PULL of same-sized messages over the same
link (sluice-bench link on the same two hosts), measured in one run, and
the same pair on this host's loopback (sluice-bench feed --no-shm
--transport tcp) to show whether loopback measures the same thing.

    tools/bench_testbed.py BUILD_DIR [--job FILE] [--epochs E] [--repeat N]
                           [--feeders 1,2] [--rate RATE] [--delay-ms D] [--credits N]
                           [--threads N] [--json]

--rate shapes each host's link (tc tbf on its eth0, e.g. 10gbit): the rate
a real network gives, where the loopback-speed veth of one machine does not
bound anything; --delay-ms adds latency (tc netem), to see whether the
trainer's credit window (--credits) covers the link's bandwidth-delay
product. Root is needed (namespaces); without it the script says so
and exits 77. Medians of --repeat runs; the ratio of each run is taken
within the run.

The copy path is measured against raw ZeroMQ, which has no encryption, so
those sluice runs are in plaintext: the feeders get --insecure (they listen
on the hosts' addresses, which without keys they refuse). --curve adds, in
the same repeats, runs with keys as a real cluster has them (each feeder its
own pair from sluice-feeder keygen, the trainer's key on their allow-list):
their GB/s, and their ratio to the plaintext runs (what CURVE costs).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "cluster"))
import netns  # noqa: E402

FEEDER_PORT = 5555
LINK_PORT = 5600


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build")
    ap.add_argument("--job", default=os.path.join(HERE, "..", "examples", "fmnist-train.json"))
    ap.add_argument("--epochs", type=int, default=20, help="epochs per sluice run (default 20)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--feeders", default="1", help="feeder counts, e.g. 1,2 (one host each)")
    ap.add_argument("--threads", type=int, default=0, help="decode threads per feeder (default: the feeder's)")
    ap.add_argument("--rate", default=None, help="shape every host's link to this rate (tc tbf), e.g. 10gbit")
    ap.add_argument("--delay-ms", type=float, default=0,
                    help="add this one-way delay on every host's link (tc netem; the round trip is twice it)")
    ap.add_argument("--credits", type=int, default=0, help="the trainer's --credits (default: its own)")
    ap.add_argument("--curve", action="store_true",
                    help="also run sluice with CURVE keys, and report its speed against the plaintext runs")
    ap.add_argument("--json", action="store_true", help="one JSON object per configuration")
    a = ap.parse_args()
    if a.repeat < 1 or a.epochs < 1:
        ap.error("--repeat and --epochs must be at least 1")
    try:
        a.feeders = [int(x) for x in a.feeders.split(",")]
    except ValueError:
        ap.error("--feeders: a list of integers")
    if any(f < 1 or f > 16 for f in a.feeders):
        ap.error("--feeders: each between 1 and 16")
    return a


def binary(a, *path):
    p = os.path.join(os.path.abspath(a.build), *path)
    if not os.access(p, os.X_OK):
        sys.exit("bench_testbed: no executable %s (build first)" % p)
    return p


def job_name(path):
    with open(path) as f:
        return json.load(f)["name"]


def shape(net, hosts, rate, delay_ms):
    for h in hosts:
        if delay_ms > 0:  # netem: the delay, and the rate too when one is given
            q = ["netem", "delay", "%gms" % delay_ms, "limit", "100000"] + (["rate", rate] if rate else [])
        else:
            q = ["tbf", "rate", rate, "burst", "4mb", "latency", "50ms"]
        r = net.run(h, ["tc", "qdisc", "replace", "dev", "eth0", "root"] + q, capture_output=True, text=True)
        if r.returncode != 0:
            net.down()
            sys.exit("bench_testbed: cannot shape %s's link (tc qdisc %s): %s%s" % (
                h, q[0], r.stderr.strip(), " (this kernel has no netem)" if q[0] == "netem" else ""))


def wait(p, what, timeout=600):
    try:
        return p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        sys.exit("bench_testbed: %s did not finish within %d s" % (what, timeout))


def make_keys(a, tmp, F):
    """Keys for F feeders and the trainer, made with sluice-feeder keygen in
    tmp/keys: {"feeder": [secret key of feeder j], "allow": the feeders'
    allow-list, "trainer": the trainer's secret key, "servers": the folder
    of feeder-J.pub}."""
    feeder = binary(a, "feeder", "sluice-feeder")
    d = os.path.join(tmp, "keys")
    for sub in ("allow", "servers"):
        os.makedirs(os.path.join(d, sub), mode=0o700, exist_ok=True)
    for n in ["trainer"] + ["feeder-%d" % j for j in range(F)]:
        if not os.path.exists(os.path.join(d, n + ".key")):
            subprocess.run([feeder, "keygen", n], cwd=d, check=True, capture_output=True)
        dest = "allow" if n == "trainer" else "servers"
        with open(os.path.join(d, n + ".pub")) as src, open(os.path.join(d, dest, n + ".pub"), "w") as dst:
            dst.write(src.read())
    return {"feeder": [os.path.join(d, "feeder-%d.key" % j) for j in range(F)], "allow": os.path.join(d, "allow"),
            "trainer": os.path.join(d, "trainer.key"), "servers": os.path.join(d, "servers")}


def sluice_run(a, net, F, tmp, rep, keys=None):
    """One run: F feeders on f0..f(F-1), one trainer on t0 (PID namespace),
    in plaintext (--insecure), or over CURVE with keys (make_keys). Returns
    the trainer's summary."""
    feeder, trainer = binary(a, "feeder", "sluice-feeder"), binary(a, "trainer", "sluice-trainer")
    conns, fs = [], []
    tag = "curve-" if keys else ""
    for j in range(F):
        ep = "tcp://%s:%d" % (net.addr("f%d" % j), FEEDER_PORT)
        conns.append(ep)
        args = [feeder, "--job", a.job, "--listen", ep, "--feeder-index", str(j), "--feeders", str(F),
                "--workers", "1", "--replicas", "1", "--epochs=%d" % a.epochs]
        args += ["--curve-key", keys["feeder"][j], "--curve-allow", keys["allow"]] if keys else ["--insecure"]
        if a.threads:
            args += ["--threads", str(a.threads)]
        fs.append(net.spawn("f%d" % j, args, log=os.path.join(tmp, "%sfeeder%d-%d-%d.log" % (tag, F, j, rep))))
    out = os.path.join(tmp, "%strainer%d-%d.json" % (tag, F, rep))
    with open(out, "w") as o:
        t = net.spawn("t0", [trainer, "--connect", ",".join(conns), "--job", job_name(a.job), "--model", "none",
                             "-q"] + (["--credits", str(a.credits)] if a.credits else []) +
                      (["--curve-key", keys["trainer"], "--curve-server-key", keys["servers"]] if keys else []),
                      log=os.path.join(tmp, "%strainer%d-%d.log" % (tag, F, rep)), pidns=True, stdout=o)
        code = wait(t, "the trainer")
    fcodes = [wait(p, "a feeder", timeout=60) for p in fs]
    if code != 0 or any(fcodes):
        sys.exit("bench_testbed: the trainer exited %d, the feeders %s; logs in %s" % (code, fcodes, tmp))
    with open(out) as f:
        return json.loads(f.read().splitlines()[-1])["summary"]


def raw_run(a, net, size, count, tmp, rep):
    """Raw ZeroMQ: PUSH on f0, PULL on t0. Bytes per second."""
    bench = binary(a, "tools", "sluice-bench")
    ep = "tcp://%s:%d" % (net.addr("f0"), LINK_PORT)
    out = os.path.join(tmp, "raw-%d.json" % rep)
    with open(out, "w") as o:
        pull = net.spawn("t0", [bench, "link", "--pull", ep, "--count", str(count)], pidns=True, stdout=o,
                         log=os.path.join(tmp, "raw-pull-%d.log" % rep))
        push = net.spawn("f0", [bench, "link", "--push", ep, "--size", str(size), "--count", str(count)],
                         log=os.path.join(tmp, "raw-push-%d.log" % rep))
        if wait(pull, "the raw receiver") != 0 or wait(push, "the raw sender", timeout=60) != 0:
            sys.exit("bench_testbed: the raw ZeroMQ transfer failed; logs in %s" % tmp)
    with open(out) as f:
        return json.loads(f.read())["bytes_per_s"]


def loopback(a):
    """sluice-bench feed --no-shm --transport tcp on this host's loopback."""
    bench = binary(a, "tools", "sluice-bench")
    args = [bench, "feed", "--job", a.job, "--no-shm", "--transport", "tcp", "--repeat", str(a.repeat), "--json",
            "--epochs=%d" % a.epochs]
    if a.threads:
        args += ["--threads", str(a.threads)]
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("bench_testbed: sluice-bench feed failed:\n" + p.stderr)
    return json.loads(p.stdout.splitlines()[-1])


def main():
    a = parse()
    a.job = os.path.abspath(a.job)
    Fmax = max(a.feeders)
    hosts = ["f%d" % j for j in range(Fmax)] + ["t0"]
    net = netns.require(hosts)
    tmp = "/tmp/sluice-testbed-%d" % os.getpid()
    os.makedirs(tmp, exist_ok=True)
    if a.rate or a.delay_ms > 0:
        shape(net, hosts, a.rate, a.delay_ms)
    results = {}
    keys = make_keys(a, tmp, Fmax) if a.curve else None
    for F in a.feeders:
        runs = []
        for rep in range(a.repeat):
            s = sluice_run(a, net, F, tmp, rep)
            piece = s["bytes"] / max(1, s["pieces"])
            r = {"gb_per_s": s["stream_bytes_per_s"] / 1e9, "piece_bytes": piece}
            if keys:
                c = sluice_run(a, net, F, tmp, rep, keys)
                r["curve_gb_per_s"] = c["stream_bytes_per_s"] / 1e9
                r["curve_ratio"] = r["curve_gb_per_s"] / r["gb_per_s"]
            if F == 1:
                count = max(1000, int(s["bytes"] / piece))
                r["raw_gb_per_s"] = raw_run(a, net, int(piece), count, tmp, rep) / 1e9
                r["ratio"] = r["gb_per_s"] / r["raw_gb_per_s"]
            runs.append(r)
        med = {k: statistics.median(x[k] for x in runs) for k in runs[0]}
        med["runs"] = runs
        results[F] = med
    lo = loopback(a)
    one = results.get(1)
    for F in a.feeders:
        r = results[F]
        r["scaling"] = r["gb_per_s"] / one["gb_per_s"] if one else None
        doc = {"bench": "testbed", "feeders": F, "rate": a.rate or "unshaped", "delay_ms": a.delay_ms,
               "credits": a.credits or None, "epochs": a.epochs,
               "repeat": a.repeat, "gb_per_s": r["gb_per_s"], "piece_bytes": r["piece_bytes"],
               "raw_gb_per_s": r.get("raw_gb_per_s"), "ratio": r.get("ratio"), "scaling": r["scaling"],
               "ratios": [x.get("ratio") for x in r["runs"]],
               "curve_gb_per_s": r.get("curve_gb_per_s"), "curve_ratio": r.get("curve_ratio"),
               "curve_ratios": [x.get("curve_ratio") for x in r["runs"]] if a.curve else None,
               "loopback": {"gb_per_s": lo["gb_per_s"], "raw_zmq_gb_per_s": lo["raw_zmq_gb_per_s"],
                            "ratio": lo["ratio"]}}
        if a.json:
            print(json.dumps(doc))
        else:
            print("feeders %d (%s link%s): %.3f GB/s in plaintext%s%s%s; loopback: %.3f GB/s, raw %.3f, ratio %.2f" % (
                F, doc["rate"], ", %g ms each way" % a.delay_ms if a.delay_ms else "", r["gb_per_s"],
                ", raw ZeroMQ %.3f GB/s, ratio %.2f (runs %s)" % (
                    r["raw_gb_per_s"], r["ratio"], ", ".join("%.2f" % x["ratio"] for x in r["runs"]))
                if "ratio" in r else "",
                "; with CURVE %.3f GB/s, %.2f of plaintext (runs %s)" % (
                    r["curve_gb_per_s"], r["curve_ratio"], ", ".join("%.2f" % x["curve_ratio"] for x in r["runs"]))
                if a.curve else "",
                ", %.2fx one feeder" % r["scaling"] if r["scaling"] and F > 1 else "",
                lo["gb_per_s"], lo["raw_zmq_gb_per_s"], lo["ratio"]))
    net.down()


if __name__ == "__main__":
    main()
