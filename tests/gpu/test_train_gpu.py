#!/usr/bin/env python3
"""GPU training against CPU training (ctest label gpu; exit 77 without a GPU).

A real feeder serves a small generated job (uint8 inputs, so the device's
uint8 scaling runs too) and sluice-trainer trains an MLP on it twice, with
--devices cpu:1 and with --devices gpu:0 (then, when the machine has two
GPUs, cpu:2 against gpu:0,1: NCCL across two local replicas). The GPU
kernels sum in the CPU model's order without FMA, so every step's loss and
the final weights must agree within a float tolerance (1e-5 absolute +
1e-4 relative), the per-step row counts exactly, and the evaluation's test
accuracy within one row in a hundred; the predictions gathered from the
GPU replicas (--predictions) name every id once, in order, and differ from
the CPU ones in at most one row in a hundred (near-ties). --hash-every 1
makes every step copy the device weights back for the mirrored check.
Parameter-server mode (--mode ps, one server) is compared the same way:
a GPU worker loading the pulled weights and pushing its gradient through
pinned staging against a CPU worker.

Usage: test_train_gpu.py BUILD_DIR     (prints "N passed, 0 failed";
figures go to $OUT/gpu-train.json when OUT is set; SLUICE_GPU_TEST_DRY=1
runs the harness with cpu:1 in place of gpu:0; SLUICE_GPU_TEST_WRAP="compute-sanitizer
--tool memcheck ..." runs the GPU trainers under that command)
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

BUILD = os.path.abspath(sys.argv[1])
RECORD = os.path.join(BUILD, "tools", "sluice-record")
FEEDER = os.path.join(BUILD, "feeder", "sluice-feeder")
TRAINER = os.path.join(BUILD, "trainer", "sluice-trainer")
TMP = tempfile.mkdtemp(prefix="sluice-train-gpu-")
PASSED = 0
ATOL, RTOL = 1e-5, 1e-4


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    print("%d passed, 1 failed" % PASSED)
    sys.exit(1)


def ok(name):
    global PASSED
    PASSED += 1
    print("ok %d - %s" % (PASSED, name))


def gpus():
    """GPUs sluice-trainer sees: --devices gpu:N parses only when GPU N exists."""
    n = 0
    while n < 16 and subprocess.run([TRAINER, "--devices", "gpu:%d" % n, "--help"],
                                    capture_output=True).returncode == 0:
        n += 1
    return n


def serve(job_path, tag):
    sock = "ipc://%s/%s.sock" % (TMP, tag)
    log = open(os.path.join(TMP, tag + "-feeder.log"), "w")
    p = subprocess.Popen([FEEDER, "--job", job_path, "--listen", sock, "--threads", "1"],
                         stdout=log, stderr=subprocess.STDOUT)
    return p, sock


def train(job_path, eval_path, devices, tag, ps=False):
    """ps: --mode ps on one parameter server of the same model flags (the
    gradient goes to it from pinned staging and the weights come back
    each step; no --predictions there, no ring to gather them)."""
    feeder, sock = serve(job_path, tag)
    efeeder, esock = serve(eval_path, tag + "-eval")
    time.sleep(0.3)
    weights = os.path.join(TMP, tag + ".npy")
    metrics = os.path.join(TMP, tag + ".jsonl")
    preds = os.path.join(TMP, tag + "-predictions.jsonl")
    wrap = os.environ.get("SLUICE_GPU_TEST_WRAP", "").split() if devices.startswith("gpu") else []
    model = ["--model", "mlp", "--hidden", "32,16", "--lr", "0.02", "--momentum", "0.5", "--seed", "11",
             "--classes", "4"]
    args = wrap + [TRAINER, "--connect", sock, "--job", "train-gpu", "--devices", devices] + model + [
            "--hash-every", "1", "--save-weights", weights, "--metrics", metrics,
            "--eval-connect", esock, "--eval-job", "eval-gpu"]
    server = None
    if ps:
        ep = "ipc://%s/%s-ps.sock" % (TMP, tag)
        args += ["--mode", "ps", "--ps", ep]
        server = subprocess.Popen([TRAINER, "--mode", "ps", "--ps", ep, "--ps-task", "0"] + model,
                                  stdout=subprocess.DEVNULL, stderr=open(os.path.join(TMP, tag + "-ps.log"), "w"))
    else:
        args += ["--predictions", preds]
    err = open(os.path.join(TMP, tag + "-trainer.log"), "w")
    t0 = time.time()
    try:
        # seconds when it works (2.5 s for both runs on CPU); a hang is NCCL's
        # NCCL_DEBUG=VERSION: NCCL prints its version line to stdout; the
        # trainer must keep it off its stdout, which holds the summary alone
        env = dict(os.environ, NCCL_DEBUG="VERSION")
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=err, text=True, timeout=120 if wrap else 40,
                           env=env)
    except subprocess.TimeoutExpired:
        feeder.kill()
        efeeder.kill()
        fail("%s: sluice-trainer still running after 40 s (hung?): %s" % (
            tag, open(os.path.join(TMP, tag + "-trainer.log")).read()[-3000:]))
    secs = time.time() - t0
    for f in (feeder, efeeder) + ((server,) if server else ()):
        try:
            f.wait(timeout=15)
        except subprocess.TimeoutExpired:
            f.kill()
    if p.returncode != 0:
        fail("%s: sluice-trainer exited %d: %s" % (tag, p.returncode,
                                                  open(os.path.join(TMP, tag + "-trainer.log")).read()[-3000:]))
    lines = p.stdout.strip().splitlines()
    if len(lines) != 1:
        fail("%s: stdout must hold the JSON summary alone, got %d lines: %r" % (tag, len(lines), lines[:3]))
    summary = json.loads(lines[0])["summary"]
    log = open(os.path.join(TMP, tag + "-trainer.log")).read()
    if devices.startswith("gpu") and "NCCL version" not in log:
        fail("%s: NCCL_DEBUG=VERSION printed no version line on stderr" % tag)
    steps = [json.loads(x) for x in open(metrics)]
    data = open(weights, "rb").read()
    hlen = data[8] | data[9] << 8
    w = struct.unpack("<%df" % ((len(data) - 10 - hlen) // 4), data[10 + hlen:])
    pred = None if ps else [json.loads(x) for x in open(preds)]
    return summary, steps, w, secs, pred


def close(a, b):
    return abs(a - b) <= ATOL + RTOL * abs(b)


def compare(tag, cpu, gpu):
    (cs, csteps, cw, _, cpred), (gs, gsteps, gw, gsecs, gpred) = cpu, gpu
    if len(csteps) != len(gsteps) or len(csteps) == 0:
        fail("%s: %d CPU steps, %d GPU steps" % (tag, len(csteps), len(gsteps)))
    worst_loss = 0.0
    for a, b in zip(gsteps, csteps):
        if (a["epoch"], a["step"], a["rows"]) != (b["epoch"], b["step"], b["rows"]):
            fail("%s: GPU step %r vs CPU step %r" % (tag, a, b))
        worst_loss = max(worst_loss, abs(a["loss"] - b["loss"]))
        if not close(a["loss"], b["loss"]):
            fail("%s: epoch %d step %d: GPU loss %.7f, CPU %.7f" % (tag, a["epoch"], a["step"], a["loss"], b["loss"]))
    if len(gw) != len(cw):
        fail("%s: %d GPU weights, %d CPU weights" % (tag, len(gw), len(cw)))
    bad = [i for i in range(len(cw)) if not close(gw[i], cw[i])]
    worst_w = max(abs(gw[i] - cw[i]) for i in range(len(cw)))
    if bad:
        i = bad[0]
        fail("%s: %d of %d weights differ beyond tolerance, first [%d] GPU %.8g CPU %.8g" % (
            tag, len(bad), len(cw), i, gw[i], cw[i]))
    if abs(gs["test_accuracy"] - cs["test_accuracy"]) > 0.01 or gs["test_rows"] != cs["test_rows"]:
        fail("%s: GPU test accuracy %.4f over %d rows, CPU %.4f over %d" % (
            tag, gs["test_accuracy"], gs["test_rows"], cs["test_accuracy"], cs["test_rows"]))
    if gpred is None:  # ps mode: no predictions gathered
        ok("%s: %d steps, losses within %.2g (largest), %d weights within %.2g, test accuracy %.4f vs %.4f" %
           (tag, len(gsteps), worst_loss, len(cw), worst_w, gs["test_accuracy"], cs["test_accuracy"]))
        return {"steps": len(gsteps), "max_loss_diff": worst_loss, "max_weight_diff": worst_w,
                "gpu_test_accuracy": gs["test_accuracy"], "cpu_test_accuracy": cs["test_accuracy"]}
    # the predictions gathered from the GPU replicas: every evaluated id once,
    # in order, with its label; the accuracy they give is the counted one;
    # and they are the CPU's, row for row, up to near-ties (1 row in 100)
    if [p["id"] for p in gpred] != list(range(gs["test_rows"])):
        fail("%s: GPU predictions name ids %s..., expected 0..%d in order" % (
            tag, [p["id"] for p in gpred[:5]], gs["test_rows"] - 1))
    if [p["label"] for p in gpred] != [p["label"] for p in cpred]:
        fail("%s: GPU predictions carry other labels than CPU ones" % tag)
    gacc = sum(p["prediction"] == p["label"] for p in gpred) / len(gpred)
    if abs(gacc - gs["test_accuracy"]) > 1e-4:
        fail("%s: accuracy of the GPU predictions %.5f, counted %.5f" % (tag, gacc, gs["test_accuracy"]))
    differ = sum(a["prediction"] != b["prediction"] for a, b in zip(gpred, cpred))
    if differ > len(cpred) // 100:
        fail("%s: %d of %d GPU predictions differ from the CPU ones" % (tag, differ, len(cpred)))
    ok("%s: %d steps, losses within %.2g (largest), %d weights within %.2g, test accuracy %.4f vs %.4f, "
       "%d of %d predictions differ" % (tag, len(gsteps), worst_loss, len(cw), worst_w, gs["test_accuracy"],
                                        cs["test_accuracy"], differ, len(cpred)))
    return {"steps": len(gsteps), "max_loss_diff": worst_loss, "max_weight_diff": worst_w,
            "gpu_test_accuracy": gs["test_accuracy"], "cpu_test_accuracy": cs["test_accuracy"],
            "gpu_seconds": gsecs, "gpu_h2d_gb_per_s": gs.get("h2d_gb_per_s"),
            "gpu_samples_per_s": gs.get("stream_elements_per_s"), "predictions_differ": differ}


def main():
    # SLUICE_GPU_TEST_DRY=1: the harness alone, with cpu:1 standing in for
    # gpu:0 (how it was checked on a machine without a GPU)
    dry = os.environ.get("SLUICE_GPU_TEST_DRY") == "1"
    n = 1 if dry else gpus()
    if n == 0:
        print("SKIP: sluice-trainer sees no GPU (or this build has no CUDA)")
        sys.exit(77)
    data = os.path.join(TMP, "data")
    subprocess.run([RECORD, "gen", "--output-dir", data, "--records", "1200", "--shards", "4", "--seed", "9",
                    "--image-bytes", "48", "--classes", "4"], check=True, capture_output=True)
    features = {"image": {"dtype": "uint8", "shape": [48], "from": "bytes"}, "label": {"dtype": "int64", "shape": []}}
    job = {"name": "train-gpu", "files": [os.path.join(data, "gen-*.tfrecord")], "format": "tfrecord",
           "features": features, "shard_policy": "data", "global_batch_size": 40, "epochs": 2,
           "shuffle": {"buffer": 64, "seed": 3}}
    ev = {"name": "eval-gpu", "files": [os.path.join(data, "gen-*.tfrecord")], "format": "tfrecord",
          "features": dict(features, id={"dtype": "int64", "shape": []}), "shard_policy": "data", "global_batch_size": 40, "epochs": 1}
    paths = []
    for j in (job, ev):
        paths.append(os.path.join(TMP, j["name"] + ".json"))
        with open(paths[-1], "w") as f:
            json.dump(j, f)
    results = {"gpus": n}
    cpu = train(paths[0], paths[1], "cpu:1", "cpu1")
    gpu = train(paths[0], paths[1], "cpu:1" if dry else "gpu:0", "gpu0")
    results["gpu:0 vs cpu:1"] = compare("gpu:0 vs cpu:1", cpu, gpu)
    # parameter-server mode (issue #18): a GPU worker pulls into and pushes
    # from pinned staging; against a CPU worker on its own server
    cps = train(paths[0], paths[1], "cpu:1", "cpu1-ps", ps=True)
    gps = train(paths[0], paths[1], "cpu:1" if dry else "gpu:0", "gpu0-ps", ps=True)
    results["ps gpu:0 vs cpu:1"] = compare("ps mode, gpu:0 vs cpu:1", cps, gps)
    if n >= 2:
        cpu2 = train(paths[0], paths[1], "cpu:2", "cpu2")
        gpu2 = train(paths[0], paths[1], "gpu:0,1", "gpu01")
        results["gpu:0,1 vs cpu:2"] = compare("gpu:0,1 vs cpu:2", cpu2, gpu2)
        cps2 = train(paths[0], paths[1], "cpu:2", "cpu2-ps", ps=True)
        gps2 = train(paths[0], paths[1], "gpu:0,1", "gpu01-ps", ps=True)
        results["ps gpu:0,1 vs cpu:2"] = compare("ps mode, gpu:0,1 vs cpu:2", cps2, gps2)
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "gpu-train.json"), "w") as f:
            json.dump(results, f, indent=1)
    print("%d passed, 0 failed" % PASSED)


def keep_logs():
    """The trainers' and feeders' logs and metrics into $OUT/gpu-train-logs
    (when OUT is set), so a failure on a GPU machine can be read later."""
    if not os.environ.get("OUT") or not os.path.isdir(TMP):
        return
    dest = os.path.join(os.environ["OUT"], "gpu-train-logs")
    os.makedirs(dest, exist_ok=True)
    for name in os.listdir(TMP):
        if name.endswith((".log", ".jsonl", ".json")):
            shutil.copy(os.path.join(TMP, name), dest)


if __name__ == "__main__":
    try:
        main()
    finally:
        keep_logs()
        shutil.rmtree(TMP, ignore_errors=True)
