#!/usr/bin/env python3
"""Cluster test: the main job's MLP training with two workers on two hosts.

The main job (scripts/fmnist-train.sh): Fashion-MNIST as 8 TFRecord shards
and 2 gzip test shards, examples/fmnist-train.json and fmnist-test.json, an
MLP 784-256-128-10 trained 5 epochs by two workers of two CPU replicas,
then evaluated on the test set from the predictions gathered in id order.

It runs twice:
- on one host: the two feeders and both workers on host "solo", the ring
  over tcp on its loopback, pieces through the feeders' shared memory;
- across hosts: the feeders on f0, worker 0 on t0 and worker 1 on t1, each
  in a PID namespace of its own, given each other's addresses as --peers
  (TF_CONFIG style: each binds every interface on its port), their ring
  over tcp between t0 and t1, every piece by copy over the link.
Both must end with the same weights hash on every worker, the same test
accuracy (>= 0.85, as the main job asks) and the same predictions; the
across-hosts run must show its pieces and its gradients on the links.
Both runs use keys (common.py), as a real cluster does: the training
feeder serves with feeder-0's key, the test feeder with eval-feeder-0's,
both allow only the workers' key, and the workers hold one key pair for the
feeders, the ring and the rendezvous; each feeder must log the two workers
accepted over CURVE, and no worker may warn of plaintext.

Usage: test_cluster_train.py BUILD_DIR   (root; exit 77 where namespaces
cannot be made or the dataset-fashion-mnist package is missing)
"""
import json
import os
import subprocess
import sys
import time

from common import (FEEDER, RECORD, TRAINER, check_curve, cleanup, fail, feeder_keys, harness, netns, ok, path,
                    read_log, trainer_keys, wait_all)

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SRC = "/usr/share/datasets/fashion-mnist"
EPOCHS = 5


def convert():
    if not os.path.exists(os.path.join(SRC, "train-images-idx3-ubyte.gz")):
        print("SKIP: %s is missing (the dataset-fashion-mnist package; scripts/deps.sh installs it)" % SRC)
        sys.exit(netns.SKIP)
    data = path("fmnist")
    for prefix, shards, comp, src in (("train", 8, "none", "train"), ("test", 2, "gzip", "t10k")):
        subprocess.run([RECORD, "convert", "idx", "--images", os.path.join(SRC, "%s-images-idx3-ubyte.gz" % src),
                        "--labels", os.path.join(SRC, "%s-labels-idx1-ubyte.gz" % src), "--output-dir", data,
                        "--prefix", prefix, "--shards", str(shards), "--compression", comp],
                       check=True, capture_output=True)
    return data


def npy_floats(p):
    """The length of the float32 vector a .npy v1.0 file holds."""
    with open(p, "rb") as f:
        data = f.read()
    hlen = data[8] | data[9] << 8
    return (len(data) - 10 - hlen) // 4


def train(net, tag, data, feeder_host, worker_hosts, ring_args, pidns):
    """The main job's training and evaluation; returns the two workers'
    (summary, log, number of weights) and the predictions."""
    harness.case()
    feeders = []
    for kind, port in (("train", 5555), ("test", 5556)):
        ep = "tcp://%s:%d" % (net.addr(feeder_host), port)
        log = path("%s-%s-feeder.log" % (tag, kind))
        files = os.path.join(data, "train-*.tfrecord" if kind == "train" else "test-*.tfrecord.gz")
        p = net.spawn(feeder_host, [FEEDER, "--job", os.path.join(ROOT, "examples", "fmnist-%s.json" % kind),
                                    "--files=" + files, "--listen", ep, "--threads", "1" if kind == "test" else "2"]
                      + feeder_keys(0, eval_feeder=kind == "test"), log=log)
        feeders.append((p, ep, log))
    workers = []
    for w, host in enumerate(worker_hosts):
        out = path("%s-w%d.json" % (tag, w))
        log = path("%s-w%d.log" % (tag, w))
        pred = path("%s-predictions.jsonl" % tag)
        args = [TRAINER, "--connect", feeders[0][1], "--job", "fmnist-train", "--worker", str(w), "--workers", "2",
                "--devices", "cpu:2", "--model", "mlp", "--hidden", "256,128", "--lr", "0.05", "--momentum", "0.9",
                "--eval-connect", feeders[1][1], "--eval-job", "fmnist-test",
                "--predictions", pred, "--save-weights", path("%s-w%d.npy" % (tag, w)), "--progress", "off"]
        args += ring_args + trainer_keys()
        with open(out, "w") as f:
            p = net.spawn(host, args, log=log, pidns=pidns, stdout=f)
        workers.append((p, out, log))
    codes = wait_all([p for p, _, _ in workers], 240, "%s: the workers" % tag)
    for w, c in enumerate(codes):
        if c != 0:
            fail("%s: worker %d exited %d" % (tag, w, c))
    for j, c in enumerate(wait_all([p for p, _, _ in feeders], 30, "%s: the feeders" % tag)):
        if c != 0:
            fail("%s: feeder %d exited %d" % (tag, j, c))
    for kind, (_, _, log) in zip(("train", "test"), feeders):
        check_curve("%s: the %s feeder" % (tag, kind), log, 2)
    res = []
    for w, (_, out, log) in enumerate(workers):
        with open(out) as f:
            s = json.loads(f.read().strip().splitlines()[-1])["summary"]
        res.append((s, log, npy_floats(path("%s-w%d.npy" % (tag, w)))))
    with open(path("%s-predictions.jsonl" % tag)) as f:
        pred = [json.loads(x) for x in f]
    return res, pred


def check_run(tag, res, pred, shm):
    hashes = {s["weights_hash"] for s, _, _ in res}
    if len(hashes) != 1:
        fail("%s: the workers end with different weights: %s" % (tag, hashes))
    for w, (s, log, _) in enumerate(res):
        if not s["ok"] or s["epochs"] != EPOCHS or s["test_rows"] != 10000:
            fail("%s: worker %d's summary: %s" % (tag, w, s))
        if (s["shm_pieces"] > 0) != shm:
            fail("%s: worker %d read %d pieces in shared memory, expected %s" % (tag, w, s["shm_pieces"],
                                                                                  "some" if shm else "none"))
        if "rendezvous: 2 workers agree" not in read_log(log):
            fail("%s: worker %d did not log the rendezvous" % (tag, w))
        if "plaintext" in read_log(log):
            fail("%s: worker %d warns of plaintext:\n%s" % (tag, w, read_log(log)))
    if [p["id"] for p in pred] != list(range(10000)):
        fail("%s: the predictions do not cover ids 0..9999 in order" % tag)
    acc = sum(p["prediction"] == p["label"] for p in pred) / 10000.0
    if abs(acc - res[0][0]["test_accuracy"]) > 1e-4 or acc < 0.85:
        fail("%s: test accuracy %.4f (summary %.4f), the main job needs >= 0.85" % (tag, acc,
                                                                                   res[0][0]["test_accuracy"]))
    return acc


def main():
    net = netns.require(["solo", "f0", "t0", "t1"])
    t0 = time.time()
    data = convert()

    one, one_pred = train(net, "one", data, "solo", ["solo", "solo"],
                          ["--ring", "tcp://127.0.0.1:7000,tcp://127.0.0.1:7001"], pidns=False)
    one_acc = check_run("one host", one, one_pred, shm=True)
    ok("one host: 2 workers x 2 CPU replicas, ring on loopback: test accuracy %.4f, weights %s"
       % (one_acc, one[0][0]["weights_hash"]))

    # the workers' addresses as a TF_CONFIG-style list: each binds every
    # interface of its host on its port, and they meet at worker 0's
    peers = "%s:7000,%s:7001" % (net.addr("t0"), net.addr("t1"))
    before = {h: net.link_bytes(h) for h in ("f0", "t0", "t1")}
    two, two_pred = train(net, "two", data, "f0", ["t0", "t1"], ["--peers", peers], pidns=True)
    after = {h: net.link_bytes(h) for h in ("f0", "t0", "t1")}
    two_acc = check_run("two hosts", two, two_pred, shm=False)
    for w, (s, log, _) in enumerate(two):
        flog = read_log(path("two-train-feeder.log"))
        if "worker %d: shared memory not offered (the peer is on another host); pieces go by copy" % w not in flog:
            fail("two hosts: the feeder's log does not say worker %d's pieces go by copy" % w)
    if two[0][0]["weights_hash"] != one[0][0]["weights_hash"] or two_acc != one_acc or two_pred != one_pred:
        fail("two hosts: weights %s, test accuracy %.4f; one host: weights %s, test accuracy %.4f%s"
             % (two[0][0]["weights_hash"], two_acc, one[0][0]["weights_hash"], one_acc,
                "" if two_pred == one_pred else " (and other predictions)"))
    # the links carried the pieces (every training and test image, once per
    # epoch, to one worker or the other) and the ring's gradients: each step
    # each rank sends half the weights twice (reduce-scatter, all-gather)
    floats = two[0][2]
    steps = two[0][0]["steps"]
    pieces = sum(s["bytes"] for s, _, _ in two)
    rx = {h: after[h][0] - before[h][0] for h in after}
    tx = {h: after[h][1] - before[h][1] for h in after}
    if tx["f0"] < pieces or rx["t0"] + rx["t1"] < pieces:
        fail("two hosts: f0 sent %d bytes, t0 and t1 received %d: fewer than the pieces' %d bytes"
             % (tx["f0"], rx["t0"] + rx["t1"], pieces))
    if min(tx["t0"], tx["t1"]) < steps * floats * 4:
        fail("two hosts: t0 and t1 sent %d and %d bytes; %d steps of ring all-reduce over %d floats need %d each"
             % (tx["t0"], tx["t1"], steps, floats, steps * floats * 4))
    ok("two hosts (feeders on f0, workers on t0 and t1 met by --peers, ring over tcp between them): the same "
       "weights (%s), "
       "test accuracy %.4f and predictions as on one host; pieces by copy (%.0f MB from f0), %.0f MB of "
       "gradients each way" % (two[0][0]["weights_hash"], two_acc, tx["f0"] / 1e6, tx["t0"] / 1e6))
    net.down()
    print("%d passed, 0 failed (%.1f s)" % (harness.passed(), time.time() - t0))


if __name__ == "__main__":
    try:
        main()
    finally:
        cleanup()
