"""The feeder's decoded-element cache (the job key cache_bytes, issue #25)
against real sluice-feeder processes: the stream is the same, byte for
byte (every tensor of every replica of every step), with the cache off, on
and holding the whole job, and on with a bound that holds most of it but
not all; over 4 shuffled epochs, 2 workers, 2 feeders, 2 decode threads
each. And the ids are the reference model's. A job with a bytes feature
gets no cache, and the feeder says so.

Run by ctest (python_client) with the rest of python/tests.
"""
import json
import os
import subprocess
import sys
import threading

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import bed  # noqa: E402

import sluice  # noqa: E402

BUILD = os.environ.get("SLUICE_BUILD", os.path.join(ROOT, "build"))
IMAGE = 2048  # bytes per image: a row is 2048 + 8 + 8 bytes
RECORDS = 600  # 1.24 MB of rows: a 1 MiB bound holds 508 of them
SHUFFLE = {"buffer": 64, "seed": 9, "reshuffle_each_epoch": True}


@pytest.fixture(scope="module")
def data():
    bed.setup(BUILD, "cache")
    files = bed.gen("d", RECORDS, 3, image_bytes=IMAGE)
    ids = []
    for f in files:
        p = subprocess.run([bed.RECORD, "cat", "--decode", "example", f], check=True, capture_output=True, text=True)
        ids.append([int(json.loads(x)["example"]["features"]["feature"]["id"]["int64List"]["value"][0])
                    for x in p.stdout.splitlines()])
    yield files, ids
    if not os.environ.get("SLUICE_KEEP"):
        bed.cleanup()


def stream(tag, files, F=2, W=2, features=None, **keys):
    """Each worker's stream, every tensor's bytes: {w: [(epoch, step, replica, {name: bytes})...]},
    the job, and the feeders' logs."""
    features = features or {"image": {"dtype": "uint8", "shape": [IMAGE], "from": "bytes"},
                            "label": {"dtype": "int64", "shape": []}, "id": {"dtype": "int64", "shape": []}}
    job_path, job = bed.write_job("job-" + tag, files, features=features, global_batch_size=16, epochs=4,
                                  shuffle=SHUFFLE, **keys)
    eps = ["ipc://%s/%s-%d.sock" % (bed.TMP, tag, j) for j in range(F)]
    logs = [os.path.join(bed.TMP, "%s-feeder%d.log" % (tag, j)) for j in range(F)]
    procs = []
    for j, ep in enumerate(eps):
        with open(logs[j], "w") as log:
            procs.append(subprocess.Popen(
                [bed.FEEDER, "--job", job_path, "--listen", ep, "--feeder-index", str(j), "--feeders", str(F),
                 "--threads", "2", "--heartbeat-ms", "200", "--timeout-ms", "5000"],
                stdout=log, stderr=subprocess.STDOUT))
    got, errors = {}, []

    def one(w):
        try:
            with sluice.Client(eps, job["name"], worker=w, workers=W, replicas=1, heartbeat_ms=200) as c:
                got[w] = [(s.epoch, s.step, r, {k: v.tobytes() for k, v in rep.items()})
                          for s in c for r, rep in enumerate(s.replicas)]
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append((w, e))

    try:
        threads = [threading.Thread(target=one, args=(w,)) for w in range(W)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors, errors
        assert [p.wait(timeout=30) for p in procs] == [0] * F
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
    texts = []
    for path in logs:
        with open(path) as f:
            texts.append(f.read())
    return got, job, texts


def cache_lines(texts):
    return [line for t in texts for line in t.splitlines() if "decoded-element cache" in line or "cache_bytes" in line]


def test_same_stream_with_and_without_the_cache(data):
    files, ids = data
    off, job, off_logs = stream("off", files)
    assert cache_lines(off_logs) == []
    ref = bed.reference(job, [len(x) for x in ids], 2, 1)
    for w in range(2):
        want = [(x["epoch"], x["step"], [ids[fi][r] for fi, r in x["elems"]]) for x in ref[w]]
        assert [(e, s, list(memoryview(t["id"]).cast("q"))) for e, s, _, t in off[w]] == want
    for tag, bound, cached in (("whole", 1 << 30, RECORDS), ("part", 1 << 20, (1 << 20) // (IMAGE + 16))):
        on, _, logs = stream(tag, files, cache_bytes=bound)
        for w in range(2):
            assert len(on[w]) == len(off[w])
            for i, (a, b) in enumerate(zip(on[w], off[w])):
                assert a == b, "%s: worker %d, piece %d differs with the cache on" % (tag, w, i)
        lines = cache_lines(logs)
        # each feeder: its slots at the start, hits and misses at the end
        assert sum("%d of %d elements have a row" % (cached, RECORDS) in x for x in lines) == 2, lines
        ends = [x for x in lines if " hits, " in x]
        assert len(ends) == 2, lines
        for x in ends:
            hits, misses = (int(v) for v in x.split("cache: ")[1].replace(" hits, ", " ").split(" misses")[0].split())
            assert hits > 0 and misses > 0, x
            if tag == "whole":  # each feeder decodes an element once (twice when two threads race for it)
                assert misses <= RECORDS + 16, x
        served = sum(int(t.split(" records=")[1].split()[0]) for t in logs)
        assert served == 4 * RECORDS
        assert sum(int(x.split("cache: ")[1].split(" hits")[0]) + int(x.split(" hits, ")[1].split(" misses")[0])
                   for x in ends) == served


def trainer_trace(tag, files, features, **keys):
    """One feeder, one sluice-trainer tracing the bytes feature 'image': (trace lines, feeder log)."""
    job_path, job = bed.write_job("job-" + tag, files, features=features, global_batch_size=16, epochs=3,
                                  shuffle=SHUFFLE, **keys)
    ep = "ipc://%s/%s.sock" % (bed.TMP, tag)
    log, trace = os.path.join(bed.TMP, tag + "-feeder.log"), os.path.join(bed.TMP, tag + "-trace.jsonl")
    with open(log, "w") as out:
        feeder = subprocess.Popen([bed.FEEDER, "--job", job_path, "--listen", ep, "--threads", "2",
                                   "--heartbeat-ms", "200", "--timeout-ms", "5000"], stdout=out, stderr=subprocess.STDOUT)
    try:
        t = subprocess.run([bed.TRAINER, "--connect", ep, "--job", job["name"], "--trace", trace, "--trace-feature",
                            "image", "--heartbeat-ms", "200", "--timeout-ms", "5000"], capture_output=True, timeout=60)
        assert t.returncode == 0, t.stderr
        assert feeder.wait(timeout=30) == 0
    finally:
        if feeder.poll() is None:
            feeder.kill()
        feeder.wait()
    with open(trace) as f:
        lines = [json.loads(x) for x in f if '"summary"' not in x]
    with open(log) as f:
        return lines, f.read()


def test_bytes_feature_gets_no_cache(data):
    files, _ = data
    feats = {"image": {"dtype": "bytes", "shape": []}, "id": {"dtype": "int64", "shape": []}}
    off, _ = trainer_trace("boff", files, feats)
    on, log = trainer_trace("bon", files, feats, cache_bytes=1 << 20)
    assert len(off) > 0 and on == off
    lines = cache_lines([log])
    assert len(lines) == 1 and "feature 'image' is bytes" in lines[0] and "it is off for this job" in lines[0], lines
