#!/usr/bin/env python3
"""Arrays as a source (issue #18, experimental_make_numpy_dataset): a feeder
serving groups of .npy and IDX arrays must hand every trainer exactly the
pieces it hands them from the TFRecord conversion of the same arrays
(`sluice-record convert idx`), for several (W, R, shard policy, shuffle)
settings: the two runs' traces (ids, and labels once) are compared piece
by piece, and both against the reference model of the plan.

The arrays are written here: images as .npy (uint8, [n, 4, 4]), labels as
gzip'd IDX (uint8), ids as big-endian int32 .npy (converted to int64 by
the feeder), in three groups cut where `convert idx --shards 3` cuts; and,
when /usr/share/datasets/fashion-mnist is there, the real Fashion-MNIST
IDX files in one group. A group whose arrays disagree on their row count
must stop the feeder with the file named.

Usage: test_arrays.py BUILD_DIR     (prints "N passed, 0 failed" at the end)
"""
import gzip
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bed import reference  # noqa: E402
import harness  # noqa: E402
from harness import fail, ok, spawn  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
RECORD = os.path.join(BUILD, "tools", "sluice-record")
FEEDER = os.path.join(BUILD, "feeder", "sluice-feeder")
TRAINER = os.path.join(BUILD, "trainer", "sluice-trainer")
TMP = tempfile.mkdtemp(prefix="sluice-arrays-")
FMNIST = "/usr/share/datasets/fashion-mnist"


def write_idx(path, a):
    """An IDX file of a uint8 array (gzip'd when path ends in .gz)."""
    head = struct.pack(">BBBB", 0, 0, 0x08, a.ndim) + b"".join(struct.pack(">I", d) for d in a.shape)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wb") as f:
        f.write(head + a.astype(np.uint8).tobytes())


def convert(images, labels, out, shards):
    subprocess.run([RECORD, "convert", "idx", "--images", images, "--labels", labels, "--output-dir", out,
                    "--shards", str(shards)], check=True, capture_output=True)
    return sorted(os.path.join(out, f) for f in os.listdir(out) if f.endswith(".tfrecord"))


def run(tag, job, W, R, feature="id", timeout=120):
    """Serve job to W trainers of R replicas: their traces (lists of pieces)."""
    job_path = os.path.join(TMP, tag + ".json")
    with open(job_path, "w") as f:
        json.dump(job, f)
    sock = "ipc://%s/%s.sock" % (TMP, tag)
    feeder = spawn([FEEDER, "--job", job_path, "--listen", sock, "--threads", "2", "--heartbeat-ms", "200",
                    "--timeout-ms", "5000"], log=os.path.join(TMP, tag + "-feeder.log"))
    time.sleep(0.2)
    trainers = []
    for w in range(W):
        trace = os.path.join(TMP, "%s-trace%d.jsonl" % (tag, w))
        p = spawn([TRAINER, "--connect", sock, "--job", job["name"], "--worker", str(w), "--workers", str(W),
                   "--replicas", str(R), "--trace", trace, "--trace-feature", feature, "--heartbeat-ms", "200",
                   "--timeout-ms", "5000"], log=os.path.join(TMP, "%s-trainer%d.log" % (tag, w)),
                  stdout=subprocess.DEVNULL)
        trainers.append((p, trace))
    deadline = time.time() + timeout
    for w, (p, _) in enumerate(trainers):
        try:
            code = p.wait(timeout=max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            fail("%s: trainer %d did not finish within %d s" % (tag, w, timeout))
        if code != 0:
            with open(os.path.join(TMP, tag + "-feeder.log")) as f:
                flog = f.read()
            with open(os.path.join(TMP, "%s-trainer%d.log" % (tag, w))) as f:
                fail("%s: trainer %d exited %d:\n%s\nfeeder:\n%s" % (tag, w, code, f.read(), flog[-3000:]))
    if feeder.wait(timeout=15) != 0:
        with open(os.path.join(TMP, tag + "-feeder.log")) as f:
            fail("%s: feeder exited %d:\n%s" % (tag, feeder.returncode, f.read()))
    traces = []
    for _, path in trainers:
        with open(path) as f:
            lines = [json.loads(x) for x in f]
        summary = lines.pop()
        if not summary.get("summary", {}).get("ok"):
            fail("%s: no successful summary line: %s" % (tag, summary))
        traces.append(lines)
    return traces


def check(name, got_arrays, got_records, job, counts, W, R, values, other="TFRecord"):
    """Both runs' traces equal, piece by piece, and equal to the model's."""
    if got_arrays != got_records:
        for w, (a, b) in enumerate(zip(got_arrays, got_records)):
            for i, (x, y) in enumerate(zip(a, b)):
                if x != y:
                    fail("%s: worker %d piece %d differs:\n  arrays   %s\n  %s %s" % (name, w, i, x, other, y))
            if len(a) != len(b):
                fail("%s: worker %d: %d pieces from arrays, %d from %s" % (name, w, len(a), other, len(b)))
    ref = reference(job, counts, W, R)
    for w in range(W):
        want = [{"worker": x["worker"], "replica": x["replica"], "epoch": x["epoch"], "step": x["step"],
                 "seq": x["seq"], "size": len(x["elems"]), "ids": [values[f][r] for f, r in x["elems"]]}
                for x in ref.get(w, [])]
        if got_arrays[w] != want:
            fail("%s: worker %d's trace is not the reference model's (%d pieces, want %d)" %
                 (name, w, len(got_arrays[w]), len(want)))
    pieces = sum(len(t) for t in got_arrays)
    if pieces == 0:
        fail("%s: no pieces at all" % name)
    ok("%s: %d pieces, arrays == %s == model" % (name, pieces, other))


def main():
    rng = np.random.default_rng(18)
    n = 50
    images = rng.integers(0, 256, size=(n, 4, 4), dtype=np.uint8)
    labels = rng.integers(0, 10, size=n, dtype=np.uint8)
    src = os.path.join(TMP, "src")
    os.mkdir(src)
    write_idx(os.path.join(src, "images-idx3-ubyte"), images)
    write_idx(os.path.join(src, "labels-idx1-ubyte.gz"), labels)
    shards = 3
    tfr = convert(os.path.join(src, "images-idx3-ubyte"), os.path.join(src, "labels-idx1-ubyte.gz"),
                  os.path.join(TMP, "tfr"), shards)
    if len(tfr) != shards:
        fail("convert idx wrote %d shards, not %d" % (len(tfr), shards))
    # the same cut as convert idx: element i in shard floor(i * N / count)
    arr = os.path.join(TMP, "arr")
    os.mkdir(arr)
    groups = [[i for i in range(n) if i * shards // n == g] for g in range(shards)]
    for g, idx in enumerate(groups):
        np.save(os.path.join(arr, "images-%d.npy" % g), images[idx])
        write_idx(os.path.join(arr, "labels-%d.idx.gz" % g), labels[idx])
        np.save(os.path.join(arr, "ids-%d.npy" % g), np.array(idx, dtype=">i4"))
    counts = [len(x) for x in groups]

    rec_features = {"image": {"dtype": "uint8", "shape": [16], "from": "bytes"},
                    "label": {"dtype": "int64", "shape": []}, "id": {"dtype": "int64", "shape": []}}
    arr_features = {"image": {"dtype": "uint8", "shape": [4, 4], "array": os.path.join(arr, "images-*.npy")},
                    "label": {"dtype": "int64", "array": os.path.join(arr, "labels-*.idx.gz")},
                    "id": {"dtype": "int64", "array": [os.path.join(arr, "ids-*.npy")]}}
    # tfrecord's image is [16]; trace ids and labels, not images, so the shapes may differ
    # AUTO on arrays is DATA (from_tensor_slices has no file reader), so the
    # TFRecord run it is compared with says "data"
    cases = [
        ("W2 R2 auto shuffled", 2, 2, {"shard_policy": "auto", "shuffle": {"buffer": 16, "seed": 5}}),
        ("W2 R1 data", 2, 1, {"shard_policy": "data"}),
        ("W3 R1 file shuffled", 3, 1, {"shard_policy": "file", "shuffle": {"buffer": 7, "seed": 9}}),
        ("W1 R2 off interleaved", 1, 2, {"shard_policy": "off", "parallel_reads": 2,
                                         "shuffle": {"buffer": 50, "seed": 1}}),
        ("W2 R2 hint batches", 2, 2, {"shard_policy": "hint", "shard_hint": "batches", "drop_remainder": True}),
        ("W2 R2 per-replica records", 2, 2, {"per_replica_input": True, "per_replica_shard": "records"}),
    ]
    ids = [g for g in groups]
    for k, (name, W, R, keys) in enumerate(cases):
        harness.case()
        base = {"global_batch_size": 8, "epochs": 2, "prefetch": 4}
        base.update(keys)
        job_r = dict(base, name="rec-%d" % k, files=tfr, format="tfrecord", features=rec_features)
        if keys.get("shard_policy") == "auto":
            job_r["shard_policy"] = "data"
        job_a = dict(base, name="arr-%d" % k, format="arrays", features=arr_features)
        got_r = run("r%d" % k, job_r, W, R)
        got_a = run("a%d" % k, job_a, W, R)
        check(name, got_a, got_r, job_a, counts, W, R, ids)

    # labels too, once: the trace's "ids" are then the labels
    harness.case()
    base = {"global_batch_size": 8, "epochs": 1, "shard_policy": "data", "shuffle": {"buffer": 20, "seed": 3}}
    job_r = dict(base, name="rec-lab", files=tfr, format="tfrecord", features=rec_features)
    job_a = dict(base, name="arr-lab", format="arrays", features=arr_features)
    lab = [[int(labels[i]) for i in g] for g in groups]
    check("labels, W2 R1 data shuffled", run("al", job_a, 2, 1, feature="label"), run("rl", job_r, 2, 1,
                                                                                       feature="label"),
          job_a, counts, 2, 1, lab)

    # one group (one array per feature) to 2 workers: AUTO is DATA, the
    # traces of "auto" and of an explicit "data" are the same (issue #24 D.16:
    # AUTO was FILE, "FILE sharding needs at least 2 files, found 1")
    harness.case()
    np.save(os.path.join(arr, "all-ids.npy"), np.arange(n, dtype=np.int64))
    one = {"image": {"dtype": "uint8", "shape": [4, 4], "array": os.path.join(src, "images-idx3-ubyte")},
           "label": {"dtype": "int64", "array": os.path.join(src, "labels-idx1-ubyte.gz")},
           "id": {"dtype": "int64", "array": os.path.join(arr, "all-ids.npy")}}
    base = {"global_batch_size": 8, "epochs": 2, "format": "arrays", "features": one,
            "shuffle": {"buffer": 10, "seed": 4}}
    job_auto = dict(base, name="one-auto")
    job_data = dict(base, name="one-data", shard_policy="data")
    check("one group, W2 R2 auto == data", run("oa", job_auto, 2, 2), run("od", job_data, 2, 2), job_auto, [n],
          2, 2, [list(range(n))], other="data")
    p = subprocess.run([FEEDER, "plan", "--job", os.path.join(TMP, "oa.json"), "--workers", "2", "--replicas", "2"],
                       capture_output=True, text=True, timeout=60)
    head = "job 'one-auto': 1 files, %d records; 2 workers x 2 replicas, global batch 8, policy auto (data for arrays)" % n
    if p.returncode != 0 or not p.stdout.startswith(head + "\n"):
        fail("plan of the one-group auto job: exit %d, want %r first in:\n%s%s" % (p.returncode, head, p.stdout,
                                                                                 p.stderr))
    ok("sluice-feeder plan says the arrays' auto is data")

    # a group whose arrays disagree: the feeder stops at start, naming the file
    harness.case()
    np.save(os.path.join(arr, "bad-ids.npy"), np.arange(counts[0] - 1, dtype=np.int64))
    bad = dict(name="arr-bad", format="arrays", global_batch_size=8,
               features={"image": {"dtype": "uint8", "shape": [16], "array": os.path.join(arr, "images-0.npy")},
                         "id": {"dtype": "int64", "array": os.path.join(arr, "bad-ids.npy")}})
    path = os.path.join(TMP, "bad.json")
    with open(path, "w") as f:
        json.dump(bad, f)
    p = subprocess.run([FEEDER, "--job", path, "--listen", "ipc://%s/bad.sock" % TMP, "--timeout-ms", "1000",
                        "--idle-exit", "1"], capture_output=True, text=True, timeout=60)
    want = "%s: %d rows (shape (%d,)), but %s has %d: the arrays of a group need as many rows at 128" % (
        os.path.join(arr, "bad-ids.npy"), counts[0] - 1, counts[0] - 1, os.path.join(arr, "images-0.npy"),
        counts[0])
    if p.returncode == 0 or want not in p.stderr + p.stdout:
        fail("mismatched group: exit %d, want %r in:\n%s" % (p.returncode, want, p.stderr + p.stdout))
    ok("a group whose arrays have different row counts stops the feeder, the file named")

    # Fashion-MNIST itself: the IDX files as shipped, ids written beside them
    if os.path.isdir(FMNIST):
        harness.case()
        imgs = os.path.join(FMNIST, "t10k-images-idx3-ubyte.gz")
        labs = os.path.join(FMNIST, "t10k-labels-idx1-ubyte.gz")
        count = 10000
        np.save(os.path.join(TMP, "fm-ids.npy"), np.arange(count, dtype=np.int64))
        fm_tfr = convert(imgs, labs, os.path.join(TMP, "fm-tfr"), 1)
        base = {"global_batch_size": 256, "epochs": 1, "shard_policy": "data", "shuffle": {"buffer": 1000, "seed": 2}}
        job_r = dict(base, name="fm-rec", files=fm_tfr, format="tfrecord", features=rec_features)
        job_r["features"] = dict(rec_features, image={"dtype": "uint8", "shape": [28, 28], "from": "bytes"})
        job_a = dict(base, name="fm-arr", format="arrays",
                     features={"image": {"dtype": "uint8", "shape": [28, 28], "array": imgs},
                               "label": {"dtype": "int64", "array": labs},
                               "id": {"dtype": "int64", "array": os.path.join(TMP, "fm-ids.npy")}})
        check("Fashion-MNIST t10k IDX, W2 R2 data shuffled", run("fma", job_a, 2, 2), run("fmr", job_r, 2, 2),
              job_a, [count], 2, 2, [list(range(count))])

    left = harness.running()
    harness.stop_all()
    if left:
        fail("%d processes were still running at the end" % len(left))
    print("%d passed, 0 failed" % harness.passed())


if __name__ == "__main__":
    try:
        main()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
