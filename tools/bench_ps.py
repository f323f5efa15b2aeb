#!/usr/bin/env python3
"""bench_ps: parameter-server training (--mode ps) against mirrored training
on the same job, in one run.

For W in --workers (default 1,2,4) it trains the job's MLP with:
  - mirrored: W workers on a ring (one worker: no ring);
  - ps:       W workers on S parameter servers, for S in --servers (1,2).
Every run uses one feeder, R replicas per worker (--replicas, default 1) and
the same epochs. It reports:
  - samples/s: the elements trained by every worker over the wall time of the
    slowest worker (start to its summary), and its ratio to mirrored's for
    the same W;
  - the staleness distribution (the servers' histograms summed: how many
    other pushes each push's server applied between its pull and it);
  - mean pull and push time per step.

Usage: bench_ps.py [--build DIR] [--data DIR] [--workers 1,2,4] [--servers 1,2]
                   [--replicas R] [--epochs N] [--lr X] [--json FILE] [--quick]
--data: Fashion-MNIST TFRecord shards (train-*.tfrecord, as scripts/main-job.sh
writes them); without it they are converted from
/usr/share/datasets/fashion-mnist into a temporary folder. --quick: 2 of the
shards' worth (the smoke test), W 1,2 and S 1.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

FMNIST = "/usr/share/datasets/fashion-mnist"


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--data")
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--servers", default="1,2")
    ap.add_argument("--replicas", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--lr", default="0.025")
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    try:
        a.workers = [int(x) for x in a.workers.split(",")]
        a.servers = [int(x) for x in a.servers.split(",")]
    except ValueError:
        ap.error("--workers and --servers take comma-separated integers")
    if any(w < 1 or w > 16 for w in a.workers) or any(s < 1 or s > 16 for s in a.servers):
        ap.error("--workers and --servers: 1 to 16 each")
    if a.replicas < 1 or a.replicas > 16 or a.epochs < 1 or a.epochs > 100:
        ap.error("--replicas 1-16, --epochs 1-100")
    if a.quick:
        a.workers, a.servers = [1, 2], [1]
    return a


def convert(tmp):
    data = os.path.join(tmp, "data")
    os.makedirs(data)
    rec = os.path.join(ARGS.build, "tools", "sluice-record")
    subprocess.run([rec, "convert", "idx", "--images", os.path.join(FMNIST, "train-images-idx3-ubyte.gz"),
                    "--labels", os.path.join(FMNIST, "train-labels-idx1-ubyte.gz"), "--output-dir", data,
                    "--prefix", "train", "--shards", "8"], check=True, capture_output=True)
    return data


def run(tmp, data, mode, W, S, tag):
    feeder = os.path.join(ARGS.build, "feeder", "sluice-feeder")
    trainer = os.path.join(ARGS.build, "trainer", "sluice-trainer")
    files = sorted(glob.glob(os.path.join(data, "train-*.tfrecord")))
    if ARGS.quick:
        files = files[:2]
    job = {"name": "bench-ps", "files": files, "format": "tfrecord",
           "features": {"image": {"dtype": "uint8", "shape": [784], "from": "bytes"},
                        "label": {"dtype": "int64", "shape": []}},
           "shard_policy": "auto", "global_batch_size": 256, "epochs": ARGS.epochs,
           "shuffle": {"buffer": 10000, "seed": 7}}
    jpath = os.path.join(tmp, tag + ".json")
    with open(jpath, "w") as f:
        json.dump(job, f)
    sock = "ipc://%s/%s-f.sock" % (tmp, tag)
    procs = [subprocess.Popen([feeder, "--job", jpath, "--listen", sock, "--threads", "2", "--quiet"],
                              stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, tag + "-f.log"), "w"))]
    model = ["--model", "mlp", "--hidden", "256,128", "--lr", ARGS.lr, "--momentum", "0.9", "--quiet"]
    servers = []
    if mode == "ps":
        eps = ",".join("ipc://%s/%s-ps%d.sock" % (tmp, tag, i) for i in range(S))
        model += ["--mode", "ps", "--ps", eps]
        for i in range(S):
            servers.append(subprocess.Popen([trainer, "--ps-task", str(i), "--workers", str(W)] + model,
                                            stdout=subprocess.PIPE, stderr=open(os.path.join(tmp, "%s-ps%d.log" %
                                                                                             (tag, i)), "w"),
                                            text=True))
    elif W > 1:
        model += ["--ring", ",".join("ipc://%s/%s-r%d.sock" % (tmp, tag, w) for w in range(W))]
    t0 = time.time()
    workers = [subprocess.Popen([trainer, "--connect", sock, "--job", "bench-ps", "--worker", str(w), "--workers",
                                 str(W), "--devices", "cpu:%d" % ARGS.replicas] + model,
                                stdout=subprocess.PIPE, stderr=open(os.path.join(tmp, "%s-w%d.log" % (tag, w)), "w"),
                                text=True) for w in range(W)]
    sums, ends = [], []
    for w, p in enumerate(workers):
        out, _ = p.communicate(timeout=1800)
        ends.append(time.time())
        if p.returncode != 0:
            sys.exit("bench_ps: %s worker %d exited %d (%s)" % (tag, w, p.returncode,
                                                                 os.path.join(tmp, "%s-w%d.log" % (tag, w))))
        sums.append(json.loads(out.strip().splitlines()[-1])["summary"])
    wall = max(ends) - t0
    ps = []
    for i, p in enumerate(servers):
        out, _ = p.communicate(timeout=120)
        if p.returncode != 0:
            sys.exit("bench_ps: %s server %d exited %d" % (tag, i, p.returncode))
        ps.append(json.loads(out.strip().splitlines()[-1])["summary"])
    procs[0].wait(timeout=60)
    elements = sum(s["elements"] for s in sums)
    r = {"mode": mode, "workers": W, "servers": S if mode == "ps" else 0, "elements": elements,
         "wall_s": round(wall, 3), "samples_per_s": round(elements / wall, 1)}
    if mode == "ps":
        hist = [sum(x) for x in zip(*(p["staleness_hist"] for p in ps))]
        steps = sum(s["ps_steps"] for s in sums)
        r.update({"staleness_hist": hist, "staleness_mean": round(sum(p["staleness_mean"] for p in ps) / len(ps), 3),
                  "staleness_max": max(p["staleness_max"] for p in ps), "global_step": ps[0]["global_step"],
                  "pull_ms": round(1e3 * sum(s["ps_pull_s"] for s in sums) / max(steps, 1), 3),
                  "push_ms": round(1e3 * sum(s["ps_push_s"] for s in sums) / max(steps, 1), 3)})
        if r["global_step"] != steps:
            sys.exit("bench_ps: %s: global step %d, the workers pushed %d" % (tag, r["global_step"], steps))
    return r


def main():
    tmp = tempfile.mkdtemp(prefix="sluice-bench-ps-")
    try:
        data = ARGS.data or convert(tmp)
        rows = []
        print("%-9s %3s %3s %10s %8s %9s %8s %8s  %s" % ("mode", "W", "S", "samples/s", "x mirr.", "stale.mean",
                                                          "pull ms", "push ms", "staleness 0,1,2,3,4+"))
        for W in ARGS.workers:
            base = run(tmp, data, "mirrored", W, 0, "m%d" % W)
            rows.append(base)
            print("%-9s %3d %3s %10.0f %8s" % ("mirrored", W, "-", base["samples_per_s"], "1.00"))
            for S in ARGS.servers:
                r = run(tmp, data, "ps", W, S, "p%d-%d" % (W, S))
                r["vs_mirrored"] = round(r["samples_per_s"] / base["samples_per_s"], 3)
                rows.append(r)
                h = r["staleness_hist"]
                print("%-9s %3d %3d %10.0f %8.2f %9.2f %8.3f %8.3f  %s" %
                      ("ps", W, S, r["samples_per_s"], r["vs_mirrored"], r["staleness_mean"], r["pull_ms"],
                       r["push_ms"], ",".join(str(x) for x in h[:4] + [sum(h[4:])])))
        if ARGS.json:
            with open(ARGS.json, "w") as f:
                json.dump({"replicas": ARGS.replicas, "epochs": ARGS.epochs, "runs": rows}, f, indent=1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


ARGS = parse()
if __name__ == "__main__":
    main()
