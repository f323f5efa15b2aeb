"""The sluice Python package against real sluice-feeder processes.

Run by ctest (python_client) as
    SLUICE_BUILD=BUILD PYTHONPATH=BUILD/python /usr/bin/python3 -m pytest python/tests
Every stream is compared, piece by piece, with the reference model of the
plan (tests/plan/ref_plan.py, through tests/integration/bed.py): the ids of
every row of every replica of every step.
"""
import gc
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import tracemalloc

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import bed  # noqa: E402

import sluice  # noqa: E402

BUILD = os.environ.get("SLUICE_BUILD", os.path.join(ROOT, "build"))


@pytest.fixture(scope="module")
def data():
    bed.setup(BUILD, "python")
    files = bed.gen("d", 300, 3)
    ids = []
    for f in files:
        p = subprocess.run([bed.RECORD, "cat", "--decode", "example", f], check=True, capture_output=True, text=True)
        ids.append([int(json.loads(x)["example"]["features"]["feature"]["id"]["int64List"]["value"][0])
                    for x in p.stdout.splitlines()])
    yield files, ids
    bed.cleanup()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Feeders:
    """F sluice-feeder processes serving one job over ipc."""

    def __init__(self, tag, files, F=1, extra=(), tcp=False, **keys):
        self.job_path, self.job = bed.write_job("job-" + tag, files, **keys)
        self.eps = ["tcp://127.0.0.1:%d" % free_port() if tcp else "ipc://%s/%s-%d.sock" % (bed.TMP, tag, j)
                    for j in range(F)]
        self.procs = []
        for j, ep in enumerate(self.eps):
            log = open(os.path.join(bed.TMP, "%s-feeder%d.log" % (tag, j)), "w")
            self.procs.append(subprocess.Popen(
                [bed.FEEDER, "--job", self.job_path, "--listen", ep, "--feeder-index", str(j), "--feeders", str(F),
                 "--threads", "1", "--heartbeat-ms", "200", "--timeout-ms", "3000"] + list(extra),
                stdout=log, stderr=subprocess.STDOUT))
            log.close()

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()

    def wait(self):
        return [p.wait(timeout=30) for p in self.procs]


def want_ids(job, ids, W, R):
    """{worker: [(epoch, step, replica, [ids])...]} from the reference model."""
    ref = bed.reference(job, [len(x) for x in ids], W, R)
    return {w: [(x["epoch"], x["step"], x["replica"], [ids[fi][r] for fi, r in x["elems"]]) for x in ref.get(w, [])]
            for w in range(W)}


def run_workers(feeders, W, R, keep_steps=True, **options):
    """Each worker's stream from its own thread: {worker: [Step, ...]} (the
    steps kept alive to the end: their arrays must still be right)."""
    got, errors = {}, []

    def one(w):
        try:
            with sluice.Client(feeders.eps, feeders.job["name"], worker=w, workers=W, replicas=R,
                               heartbeat_ms=200, **options) as c:
                got[w] = [s for s in c] if keep_steps else sum(1 for _ in c)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append((w, e))

    threads = [threading.Thread(target=one, args=(w,)) for w in range(W)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    return got


def flat(steps):
    return [(s.epoch, s.step, r, rep["id"].tolist()) for s in steps for r, rep in enumerate(s.replicas)]


@pytest.mark.parametrize("lend", [False, True])
@pytest.mark.parametrize("W,R,F,keys", [
    (1, 1, 1, {}),
    (2, 2, 1, {"shard_policy": "data"}),
    (2, 1, 2, {"shard_policy": "file", "shuffle": {"buffer": 32, "seed": 5, "reshuffle_each_epoch": True}}),
    (1, 3, 2, {"shard_policy": "off", "drop_remainder": True}),
    (3, 2, 1, {"global_batch_size": 12, "epochs": 3}),
])
def test_exact_batches(data, W, R, F, keys, lend):
    files, ids = data
    tag = "exact%d%d%d%s%s" % (W, R, F, keys.get("shard_policy", ""), "lend" if lend else "")
    f = Feeders(tag, files, F, **keys)
    try:
        # lend: every step is kept to the end, far past the credits (a
        # few per feeder): the lent steps are copied out where they lie
        got = run_workers(f, W, R, lend=lend, credits=4) if lend else run_workers(f, W, R)
        assert f.wait() == [0] * F
    finally:
        f.stop()
    want = want_ids(f.job, ids, W, R)
    for w in range(W):
        # every step's arrays were kept alive to the end of the stream (the
        # feeders' shared memory reused meanwhile): still exact
        assert flat(got[w]) == want[w], "worker %d" % w
        for s in got[w]:
            for r, rep in enumerate(s.replicas):
                assert rep["id"].flags.writeable != lend
                assert s.rows[r] == len(rep["id"])
                assert rep["image"].shape == (s.rows[r], 16) and rep["image"].dtype == np.uint8
                assert rep["label"].dtype == np.int64 and rep["label"].shape == (s.rows[r],)
    plan = sluice.plan(f.job_path, W, R)
    for w in range(W):
        pw = plan["workers"][w]
        epochs = f.job["epochs"]
        assert len(got[w]) == pw["steps"] * epochs
        assert sum(len(x[3]) for x in want[w]) == pw["elements"] * epochs
        assert [s.last_step for s in got[w]].count(True) == epochs


def test_copy_path_and_step_fields(data):
    """no_shm: the arrays lie in the received frames; seq, last_step and
    the client's position follow the stream."""
    files, ids = data
    f = Feeders("copy", files, 1, epochs=1)
    try:
        with sluice.Client(f.eps, f.job["name"], replicas=2, no_shm=True) as c:
            assert c.replicas_per_step == 2 and c.epochs == 1
            steps = []
            for s in c:
                assert s.seq == len(steps) * 2
                assert c.position == s.seq + 2
                steps.append(s)
            assert c.steps_per_epoch == len(steps)
            assert [s.last_step for s in steps] == [False] * (len(steps) - 1) + [True]
    finally:
        f.stop()
    assert flat(steps) == want_ids(f.job, ids, 1, 2)[0]


def test_arrays_outlive_step_and_client(data):
    """An array is all that is kept: the step and the client are gone, the
    values stay."""
    files, ids = data
    f = Feeders("outlive", files, 1, epochs=1)
    try:
        c = sluice.Client(f.eps, f.job["name"])
        first = next(c).replicas[0]["id"]
        rest = [s.replicas[0]["id"] for s in c]
        c.close()
        del c
        gc.collect()
    finally:
        f.stop()
    want = want_ids(f.job, ids, 1, 1)[0]
    assert first.tolist() == want[0][3]
    assert [a.tolist() for a in rest] == [x[3] for x in want[1:]]
    first[0] = -1  # the memory is this process's own: writable
    assert first[0] == -1


def mapping_of(array):
    """The pathname of the mapping holding an array's first byte ("" for
    anonymous memory), from /proc/self/maps."""
    addr = array.__array_interface__["data"][0]
    with open("/proc/self/maps") as fh:
        for line in fh:
            parts = line.split(None, 5)
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            if lo <= addr < hi:
                return parts[5].strip() if len(parts) > 5 else ""
    raise AssertionError("address %#x is not mapped" % addr)


def test_lent_steps_are_the_feeders_memory(data):
    """lend=True: a loop that lets each step go within a step or two reads
    every step in the feeder's shared memory (no copy; read-only), exact."""
    files, ids = data
    f = Feeders("lent", files, 1, epochs=3)
    try:
        with sluice.Client(f.eps, f.job["name"], replicas=2, lend=True) as c:
            seen, where = [], set()
            for s in c:
                seen.append((s.epoch, s.step, [rep["id"].tolist() for rep in s.replicas]))
                where.update(mapping_of(rep["id"]) for rep in s.replicas if rep["id"].size)
                with pytest.raises(ValueError):
                    s.replicas[0]["label"][0] = 1
            assert where == {"/memfd:sluice-pieces (deleted)"}, where
        assert f.wait() == [0]
    finally:
        f.stop()
    got = [(e, st, r, x) for e, st, xs in seen for r, x in enumerate(xs)]
    assert got == want_ids(f.job, ids, 1, 2)[0]


def test_lent_step_kept_long_is_copied_out(data):
    """A lent step kept while the stream goes on (its credit holds every
    later one back): once half the credits wait behind it, it is copied out
    where it lies (its arrays keep their address, values exact) and
    lending goes on for the steps after it."""
    files, ids = data
    f = Feeders("lentkeep", files, 1, epochs=3)
    try:
        with sluice.Client(f.eps, f.job["name"], credits=8, lend=True) as c:
            first = next(c)
            addr = first.replicas[0]["id"].__array_interface__["data"][0]
            assert mapping_of(first.replicas[0]["id"]) == "/memfd:sluice-pieces (deleted)"
            rest, where = [], []
            for s in c:
                rest.append((s.epoch, s.step, 0, s.replicas[0]["id"].tolist()))
                where.append(mapping_of(s.replicas[0]["id"]))
            assert mapping_of(first.replicas[0]["id"]) == ""  # copied out, in place
            assert first.replicas[0]["id"].__array_interface__["data"][0] == addr
        assert f.wait() == [0]
    finally:
        f.stop()
    want = want_ids(f.job, ids, 1, 1)[0]
    assert flat([first]) + rest == want
    # lent again after the copy: the last steps came in shared memory
    assert where[-5:] == ["/memfd:sluice-pieces (deleted)"] * 5, where


def test_lent_steps_freed_by_another_thread(data):
    """Lent steps handed to a second thread, which checks and drops them a
    few steps later: every step exact, the stream to its end."""
    import queue
    files, ids = data
    f = Feeders("lentq", files, 1, epochs=4)
    q, out, errors = queue.Queue(maxsize=3), [], []

    def drop():
        while True:
            s = q.get()
            if s is None:
                return
            out.append((s.epoch, s.step, s.replicas[0]["id"].tolist()))
            time.sleep(0.0005)

    t = threading.Thread(target=drop)
    t.start()
    try:
        with sluice.Client(f.eps, f.job["name"], lend=True, credits=8) as c:
            for s in c:
                q.put(s)
            del s
    except Exception as e:  # noqa: BLE001 - reported below
        errors.append(e)
    finally:
        q.put(None)
        t.join(60)
        f.stop()
    assert not errors, errors
    assert [(e, st, 0, x) for e, st, x in out] == want_ids(f.job, ids, 1, 1)[0]


def test_bytes_feature(data):
    """A variable-length bytes feature: one flat uint8 array per piece (the
    values concatenated) and NAME.offsets splitting it, each value the
    record's bytes exactly (from `sluice-record cat`), kept and lent."""
    import base64
    files, ids = data
    images = {}
    for f in files:
        p = subprocess.run([bed.RECORD, "cat", "--decode", "example", f], check=True, capture_output=True, text=True)
        for x in p.stdout.splitlines():
            feat = json.loads(x)["example"]["features"]["feature"]
            images[int(feat["id"]["int64List"]["value"][0])] = base64.b64decode(feat["image"]["bytesList"]["value"][0])
    feats = {"image": {"dtype": "bytes", "shape": []}, "id": {"dtype": "int64", "shape": []}}
    for lend in (False, True):
        f = Feeders("bytes%d" % lend, files, 1, epochs=1, features=feats)
        try:
            with sluice.Client(f.eps, f.job["name"], replicas=2, lend=lend) as c:
                seen = 0
                for s in c:
                    for rep in s.replicas:
                        img, off, rid = rep["image"], rep["image.offsets"], rep["id"]
                        assert img.dtype == np.uint8 and img.ndim == 1
                        assert off.tolist()[0] == 0 and off.tolist()[-1] == len(img) and len(off) == len(rid) + 1
                        for k, i in enumerate(rid.tolist()):
                            assert img[off[k]:off[k + 1]].tobytes() == images[i], "id %d" % i
                        seen += len(rid)
            assert f.wait() == [0]
        finally:
            f.stop()
        assert seen == sum(len(x) for x in ids)


def test_resume_at_position(data):
    """A second client from the first's position continues exactly there."""
    files, ids = data
    f = Feeders("resume", files, 1, epochs=2)
    try:
        c = sluice.Client(f.eps, f.job["name"], replicas=2)
        head = [next(c) for _ in range(7)]
        pos = c.position
        c.close()
        with sluice.Client(f.eps, f.job["name"], replicas=2, resume_seq=pos) as c2:
            tail = list(c2)
    finally:
        f.stop()
    assert pos == 14
    assert flat(head) + flat(tail) == want_ids(f.job, ids, 1, 2)[0]


def _forked_child(c, q):
    """multiprocessing's child (fork start method): every call that would
    hand out data must raise at once; close must return."""
    out = {}
    t0 = time.monotonic()
    for name, call in (("next", lambda: next(c)), ("keepalive", lambda: c.keepalive(100))):
        try:
            call()
            out[name] = ("data", None, None)
        except sluice.Error as e:
            out[name] = ("error", str(e), e.code_name)
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            out[name] = (type(e).__name__, str(e), None)
    out["raise_s"] = time.monotonic() - t0
    t0 = time.monotonic()
    c.close()
    out["close_s"] = time.monotonic() - t0
    out["closed"] = c.closed
    q.put(out)


@pytest.mark.parametrize("no_shm", [False, True])
def test_fork_child_raises_parent_goes_on(data, no_shm):
    """A client used in a child of fork() (multiprocessing's fork start
    method) raises at once, before handing out any data, and the child's
    close leaves the parent's connection alone: the parent's stream stays
    exact (issue #24 A.4: the child used to get the parent's next step, or
    shared-memory buffers the feeder had reused)."""
    import multiprocessing
    files, ids = data
    f = Feeders("fork%d" % no_shm, files, 1, epochs=1)
    try:
        c = sluice.Client(f.eps, f.job["name"], replicas=2, heartbeat_ms=200, no_shm=no_shm)
        head = [next(c) for _ in range(3)]
        ctx = multiprocessing.get_context("fork")
        q = ctx.Queue()
        p = ctx.Process(target=_forked_child, args=(c, q))
        p.start()
        got = q.get(timeout=30)
        p.join(30)
        assert p.exitcode == 0
        tail = list(c)
        c.close()
        assert f.wait() == [0]
    finally:
        f.stop()
    msg = "client used after fork(): create a new client in the child (this one belongs to process %d)" % os.getpid()
    assert got["next"] == ("error", msg, "invalid")
    assert got["keepalive"] == ("error", msg, "invalid")
    assert got["raise_s"] < 1.0 and got["close_s"] < 1.0 and got["closed"]
    assert flat(head) + flat(tail) == want_ids(f.job, ids, 1, 2)[0]


def test_dead_feeder_raises(data):
    files, _ = data
    f = Feeders("dead", files, 1, epochs=0)
    try:
        c = sluice.Client(f.eps, f.job["name"], heartbeat_ms=200, timeout_ms=2000)
        for _ in range(3):
            next(c)
        f.procs[0].send_signal(signal.SIGKILL)
        f.procs[0].wait()
        with pytest.raises(sluice.Error) as e:
            for _ in c:
                pass
        assert e.value.code < 0 and e.value.code_name in ("io", "timeout", "closed", "proto")
        assert f.eps[0] in str(e.value)
        # the error again, not a quiet end
        with pytest.raises(sluice.Error):
            next(c)
        c.close()
    finally:
        f.stop()


def test_bad_job_raises(data):
    files, _ = data
    f = Feeders("badjob", files, 1)
    try:
        with pytest.raises(sluice.Error) as e:
            sluice.Client(f.eps, "no-such-job", connect_timeout_ms=5000)
        assert e.value.code_name == "proto", (e.value.code_name, str(e.value))
        assert "refused: job 'no-such-job' is not served here" in str(e.value) and f.eps[0] in str(e.value)
    finally:
        f.stop()
    bad = os.path.join(bed.TMP, "bad.json")
    with open(bad, "w") as fh:
        fh.write('{"name": "x", "files": [], "global_batch_size": -3}')
    with pytest.raises(sluice.Error) as e:
        sluice.plan(bad, 1, 1)
    assert "bad.json" in str(e.value)


def test_nothing_listening_times_out():
    t0 = time.time()
    with pytest.raises(sluice.Error) as e:
        sluice.Client(["ipc:///nonexistent-dir/none.sock"], "j", connect_timeout_ms=300)
    assert time.time() - t0 < 10
    assert "none.sock" in str(e.value)
    # the keyword, not sluice-trainer's flag (issue #24 item 15)
    assert "no answer to HELLO within 0.3 s (connect_timeout_ms)" in str(e.value), str(e.value)
    assert "--" not in str(e.value)


@pytest.mark.parametrize("ep,hint", [
    ("localhost:5555", "tcp://localhost:5555"),
    ("127.0.0.1:5555", "tcp://127.0.0.1:5555"),
    ("/run/sluice/f.sock", "ipc:///run/sluice/f.sock"),
    ("", "tcp://"),
])
def test_endpoint_without_transport_hints(ep, hint):
    with pytest.raises(ValueError) as e:
        sluice.Client(["ipc:///nonexistent-dir/a.sock", ep], "j", connect_timeout_ms=100)
    assert str(e.value) == ("feeders[1]: '%s' is not a ZeroMQ endpoint (TRANSPORT://ADDRESS): did you mean %s?"
                            % (ep, hint))


@pytest.mark.parametrize("kw,exc", [
    ({"worker": -1}, ValueError),
    ({"worker": 2, "workers": 2}, ValueError),
    ({"workers": 0}, ValueError),
    ({"replicas": 0}, ValueError),
    ({"replicas": 10 ** 20}, ValueError),
    ({"credits": -5}, ValueError),
    ({"credits": 2 ** 20 + 1}, ValueError),
    ({"replicas": 65537}, ValueError),
    ({"heartbeat_ms": 9}, ValueError),
    ({"timeout_ms": 3600001}, ValueError),
    ({"takeover_ms": 86400001}, ValueError),
    ({"heartbeat_ms": 2 ** 31}, ValueError),
    ({"timeout_ms": 1.5}, TypeError),
    ({"worker": True}, TypeError),
    ({"resume_seq": 3, "replicas": 2}, ValueError),
    ({"resume_seq": -1}, ValueError),
    ({"resume_epoch": -1}, ValueError),
    ({"resume_epoch": 2 ** 48 + 1}, ValueError),
    ({"resume_epoch": 1.5}, TypeError),
    ({"resume_epoch": 2, "resume_seq": 4}, sluice.Error),  # the library: one or the other
    ({"transition": (2, 1, 1)}, ValueError),
    ({"transition": (2, 1, 1, 3, 4)}, ValueError),
    ({"transition": 5}, TypeError),
    ({"transition": "2113"}, TypeError),
    ({"transition": (2, 1, 1, None)}, TypeError),
    ({"transition": (2, 1.0, 1, 3)}, TypeError),
    ({"transition": (-1, 1, 1, 3)}, ValueError),
    ({"transition": (2 ** 32, 1, 1, 3)}, ValueError),
    ({"transition": (2, 1, 2 ** 64, 3)}, ValueError),
    ({"curve_server_keys": ["a.pub"]}, ValueError),
    ({"curve_key": "a.key"}, ValueError),
    ({"curve_key": "a.key", "curve_server_keys": ["a.pub", "b.pub"]}, ValueError),
    ({"bogus": 1}, TypeError),
])
def test_hostile_options(kw, exc):
    with pytest.raises(exc):
        sluice.Client(["ipc:///nonexistent-dir/x.sock"], "j", connect_timeout_ms=100, **kw)


@pytest.mark.parametrize("kw,msg", [
    ({"credits": 2 ** 20 + 1}, "credits: 1048577 is out of range (0 to 1048576)"),
    ({"heartbeat_ms": 9}, "heartbeat_ms: 9 is out of range (0 or 10 to 600000)"),
    ({"timeout_ms": 49}, "timeout_ms: 49 is out of range (0 or 50 to 3600000)"),
])
def test_option_bounds_are_the_librarys(kw, msg):
    """The bounds the trainer's flags and the C API share (SLUICE_MAX_*):
    past the most, the binding says so; under the least, the library."""
    with pytest.raises(ValueError) as e:
        sluice.Client(["ipc:///nonexistent-dir/x.sock"], "j", connect_timeout_ms=100, **kw)
    assert msg in str(e.value)


@pytest.mark.parametrize("kw,msg", [
    ({"transition": (0, 1, 1, 3)}, "transition: from_workers 0 is out of range (1 to 65536)"),
    ({"transition": [65537, 1, 1, 3]}, "transition: from_workers 65537 is out of range (1 to 65536)"),
    ({"transition": (2, 0, 1, 3)}, "transition: from_replicas 0 is out of range (1 to 1024)"),
    ({"transition": (2, 1025, 1, 3)}, "transition: from_replicas 1025 is out of range (1 to 1024)"),
    ({"transition": (2, 1, 2 ** 48 + 1, 3)}, "transition: from_epoch 281474976710657 is out of range (at most 2^48)"),
    ({"transition": (2, 1, 1, 0)}, "transition: from_step 0 is out of range (1 to 2^48; a change at step 0 is an "
                                   "epoch's start: resume_epoch with reshape)"),
    ({"transition": (2, 1, 1, 2 ** 48 + 1)}, "transition: from_step 281474976710657 is out of range (1 to 2^48; "),
    ({"transition": (2, 1, 1, 3), "resume_epoch": 2},
     "resume at epoch 2 with a transition (from 2 x 1 at step 3 of epoch 1): give one or the other (with a "
     "transition, resume_seq counts from the change)"),
])
def test_hostile_transitions(kw, msg):
    """transition=(W, R, e, t): the library checks each field's range and
    refuses it with resume_epoch, before anything is connected."""
    with pytest.raises(sluice.Error) as e:
        sluice.Client(["ipc:///nonexistent-dir/x.sock"], "j", connect_timeout_ms=100, **kw)
    assert msg in str(e.value)


@pytest.mark.parametrize("feeders,job,exc", [
    ([], "j", ValueError),
    (["ipc:///x"] * 65, "j", ValueError),
    ([5], "j", TypeError),
    (["ipc:///x\0y"], "j", ValueError),
    (["ipc:///x"], "j\0", ValueError),
    (["ipc:///x"], None, TypeError),
    (None, "j", TypeError),
])
def test_hostile_feeders_and_job(feeders, job, exc):
    with pytest.raises(exc):
        sluice.Client(feeders, job, connect_timeout_ms=100)


# every endpoint checked before anything connects (issue #24 item 11):
# ZeroMQ would take port 99999 as 34463 (an endpoint without a transport
# gets a hint instead: test_endpoint_without_transport_hints)
@pytest.mark.parametrize("feeder,msg", [
    ("tcp://127.0.0.1:99999", "'tcp://127.0.0.1:99999': port 99999 is out of range (1-65535)"),
    ("tcp://127.0.0.1:0", "'tcp://127.0.0.1:0': port 0 is out of range (1-65535)"),
    ("tcp://127.0.0.1:-1", "'tcp://127.0.0.1:-1': port '-1' is not a decimal number (expected 1-65535)"),
    ("tcp://::1:5555", "'tcp://::1:5555': an IPv6 address needs brackets ([::1]:PORT), and a host one colon"),
    ("tcp://127.0.0.1", "'tcp://127.0.0.1': no port (expected HOST:PORT, PORT 1-65535)"),
])
def test_bad_endpoints_refused(feeder, msg):
    with pytest.raises(sluice.Error) as e:
        sluice.Client(["ipc:///nonexistent-dir/x.sock", feeder], "j", connect_timeout_ms=100)
    assert str(e.value) == "feeder 1: " + msg


def test_bad_curve_key_file_named(tmp_path):
    with pytest.raises(sluice.Error) as e:
        sluice.Client(["ipc:///nonexistent-dir/x.sock"], "j", curve_key=str(tmp_path / "missing.key"),
                      curve_server_keys=[str(tmp_path / "f.pub")], connect_timeout_ms=100)
    assert "missing.key" in str(e.value)


def test_from_tf_config(monkeypatch):
    cfg = {"cluster": {"chief": ["h0:1"], "worker": ["h1:1", "h2:1"], "feeder": ["ipc:///nonexistent-dir/f"]},
           "task": {"type": "worker", "index": 1}}
    seen = {}

    class Probe(sluice.Client):
        def __init__(self, feeders, job, **options):
            seen.update(options, feeders=feeders, job=job)

    Probe.from_tf_config("j", tf_config=json.dumps(cfg))
    # (every option passed on, each at its default unless given)
    assert seen == {"feeders": ["ipc:///nonexistent-dir/f"], "job": "j", "worker": 2, "workers": 3, "replicas": 1,
                    "credits": None, "heartbeat_ms": None, "timeout_ms": None, "connect_timeout_ms": None,
                    "reconnect_ms": None, "takeover_ms": None, "no_shm": False, "resume_seq": 0, "curve_key": None,
                    "curve_server_keys": None, "lend": False, "metrics_listen": None}
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["a:1"], "feeder": ["f:5555"]},
                                                "task": {"type": "worker", "index": 0}}))
    Probe.from_tf_config("j", replicas=2)
    assert seen["feeders"] == ["tcp://f:5555"] and seen["worker"] == 0 and seen["workers"] == 1
    assert seen["replicas"] == 2
    for bad in ("{", "[]", json.dumps({"cluster": {"worker": ["a"]}, "task": {"type": "worker", "index": 0}}),
                json.dumps({"cluster": {"worker": ["a"], "feeder": ["f"]}, "task": {"type": "ps", "index": 0}}),
                json.dumps({"cluster": {"worker": ["a"], "feeder": ["f"]}, "task": {"type": "worker",
                                                                                     "index": 5}})):
        with pytest.raises(ValueError):
            Probe.from_tf_config("j", tf_config=bad)
    monkeypatch.delenv("TF_CONFIG")
    with pytest.raises(ValueError, match="TF_CONFIG is not set"):
        Probe.from_tf_config("j")
    with pytest.raises(ValueError, match="duplicate"):
        Probe.from_tf_config("j", tf_config='{"cluster": {}, "cluster": {}}')
    huge = {"cluster": {"worker": ["a:1"], "feeder": ["f:1"]}, "task": {"type": "worker", "index": 0},
            "pad": "x" * (5 << 20)}
    with pytest.raises(ValueError, match="TF_CONFIG"):
        Probe.from_tf_config("j", tf_config=huge)
    many = {"cluster": {"worker": ["a:1"], "feeder": ["f:%d" % (i + 1) for i in range(65)]},
            "task": {"type": "worker", "index": 0}}
    with pytest.raises(ValueError, match="65 feeders, at most 64"):
        Probe.from_tf_config("j", tf_config=many)
    with pytest.raises(ValueError):
        Probe.from_tf_config("j", tf_config="{}\0")


def rss_kb():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


@pytest.mark.parametrize("lend", [False, True])
def test_no_leak_over_10000_steps(data, lend):
    files, _ = data
    f = Feeders("leak%d" % lend, files, 1, epochs=0)  # endless
    try:
        with sluice.Client(f.eps, f.job["name"], replicas=2, lend=lend) as c:
            it = iter(c)
            total = 0
            for _ in range(1000):  # warm up: pools, caches
                total += int(next(it).replicas[0]["id"].sum())
            gc.collect()
            tracemalloc.start()
            rss0 = rss_kb()
            snap0 = tracemalloc.take_snapshot()
            for _ in range(10000):
                s = next(it)
                total += int(s.replicas[1]["label"].sum())
            del s
            gc.collect()
            grown = sum(x.size_diff for x in tracemalloc.take_snapshot().compare_to(snap0, "filename"))
            rss1 = rss_kb()
            tracemalloc.stop()
    finally:
        f.stop()
    assert grown < 64 * 1024, "Python objects grew by %d bytes over 10,000 steps" % grown
    assert rss1 - rss0 < 4096, "RSS grew by %d KiB over 10,000 steps" % (rss1 - rss0)


def test_one_thread_at_a_time(data):
    """A second thread's call while one waits: RuntimeError, not a crash."""
    files, _ = data
    f = Feeders("busy", files, 1, epochs=1)
    try:
        time.sleep(0.3)
        f.procs[0].send_signal(signal.SIGSTOP)  # the feeder answers nothing
        c = sluice.Client.__new__(sluice.Client)
        opened = threading.Event()
        result = []

        def opener():
            try:
                sluice.Client.__init__(c, f.eps, f.job["name"], connect_timeout_ms=1500)
            except sluice.Error as e:
                result.append(e)
            opened.set()

        t = threading.Thread(target=opener)
        t.start()
        time.sleep(0.3)
        with pytest.raises(RuntimeError):
            c.close()
        t.join()
        assert result and result[0].code_name == "timeout"
    finally:
        f.procs[0].send_signal(signal.SIGCONT)
        f.stop()


def test_sigint_ends_a_wait(data):
    """Ctrl-C while the client waits for a silent feeder: KeyboardInterrupt
    within a heartbeat tick, not after the timeouts."""
    files, _ = data
    f = Feeders("sigint", files, 1, epochs=0)
    child = r"""
import sys, time
import sluice
c = sluice.Client([sys.argv[1]], sys.argv[2], heartbeat_ms=200, timeout_ms=60000)
next(c)
print("waiting", flush=True)
t0 = time.time()
try:
    for _ in c:
        pass
except KeyboardInterrupt:
    print("interrupted after %.2f s" % (time.time() - t0), flush=True)
try:
    next(c)
except sluice.Error as e:
    print("then:", e.code_name, flush=True)
"""
    try:
        p = subprocess.Popen([sys.executable, "-c", child, f.eps[0], f.job["name"]], stdout=subprocess.PIPE,
                             text=True, env=dict(os.environ))
        time.sleep(0.5)
        assert p.stdout.readline().strip() == "waiting"
        f.procs[0].send_signal(signal.SIGSTOP)  # pieces stop coming; the connection stays
        time.sleep(1.0)
        t0 = time.time()
        p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=20)
        took = time.time() - t0
    finally:
        f.procs[0].send_signal(signal.SIGCONT)
        f.stop()
    assert p.returncode == 0 and out.startswith("interrupted after"), out
    assert took < 5, took
    assert "then: closed" in out, out


def test_plan_with_odd_file_names(data, tmp_path):
    """File names are escaped in the plan's JSON (a quote, a backslash and
    a non-ASCII letter)."""
    files, ids = data
    odd = [tmp_path / 'we"ird\\name.tfrecord', tmp_path / "plain.tfrecord", tmp_path / "caf\u00e9.tfrecord"]
    for src, dst in zip(files, odd):
        with open(src, "rb") as fi, open(dst, "wb") as fo:
            fo.write(fi.read())
    job = os.path.join(bed.TMP, "odd.json")
    # the job's file entries are glob patterns: a backslash is escaped there
    with open(job, "w") as fh:
        json.dump({"name": "odd", "files": [str(p).replace("\\", "\\\\") for p in odd], "format": "tfrecord",
                   "features": bed.FEATURES, "global_batch_size": 8, "epochs": 1}, fh, ensure_ascii=False)
    p = sluice.plan(job, 2, 1, sets=["shard_policy=file"])
    names = sorted(os.path.basename(f) for w in p["workers"] for f in w["files"])
    assert names == sorted(["we\"ird\\name.tfrecord", "plain.tfrecord", "caf\u00e9.tfrecord"])
    assert sum(w["elements"] for w in p["workers"]) == sum(len(x) for x in ids)
    for bad in (0, -1, 10 ** 6, "2", True):
        with pytest.raises(ValueError):
            sluice.plan(job, bad, 1)


def test_curve_stream(data, tmp_path):
    """CURVE over tcp through the binding: an allowed trainer key gets the
    exact stream; a key not on the allow-list gets an error naming the
    refusal, and nothing."""
    files, ids = data
    keys = {}
    for name in ("feeder", "trainer", "stranger"):
        path = str(tmp_path / name)
        subprocess.run([bed.FEEDER, "keygen", path], check=True, capture_output=True)
        keys[name] = path
    allow = tmp_path / "allow"
    allow.mkdir()
    with open(keys["trainer"] + ".pub") as fi, open(allow / "trainer.pub", "w") as fo:
        fo.write(fi.read())
    f = Feeders("curve", files, 1, extra=["--curve-key", keys["feeder"] + ".key", "--curve-allow", str(allow)],
                tcp=True, epochs=1)
    ep = f.eps[0]
    try:
        time.sleep(0.3)
        with pytest.raises(sluice.Error) as e:
            sluice.Client([ep], f.job["name"], curve_key=keys["stranger"] + ".key",
                          curve_server_keys=[keys["feeder"] + ".pub"], connect_timeout_ms=3000)
        assert "CURVE" in str(e.value) and ep in str(e.value)
        # no keys against a CURVE feeder: the keywords to give, not the trainer's flags
        with pytest.raises(sluice.Error) as e:
            sluice.Client([ep], f.job["name"], connect_timeout_ms=3000)
        # (a mechanism mismatch, or the connection closed in the handshake: either names them)
        assert "give curve_key and curve_server_keys" in str(e.value), str(e.value)
        assert "--curve-key" not in str(e.value) and "--curve-server-key" not in str(e.value)
        with sluice.Client([ep], f.job["name"], curve_key=keys["trainer"] + ".key",
                           curve_server_keys=[keys["feeder"] + ".pub"], connect_timeout_ms=10000) as c:
            steps = list(c)
        assert f.wait() == [0]
    finally:
        f.stop()
    assert flat(steps) == want_ids(f.job, ids, 1, 1)[0]
    assert not any(s.rows[0] == 0 for s in steps[:-1])


def test_takeover_keeps_the_stream_exact(data):
    """Two feeders, one killed mid-stream: with takeover_ms the survivor
    serves its share and the stream equals the reference."""
    files, ids = data
    f = Feeders("takeover", files, 2, epochs=40)
    try:
        c = sluice.Client(f.eps, f.job["name"], replicas=2, heartbeat_ms=200, timeout_ms=2000, takeover_ms=500)
        steps = [next(c) for _ in range(50)]
        f.procs[1].kill()
        steps += list(c)
        c.close()
    finally:
        f.stop()
    assert flat(steps) == want_ids(f.job, ids, 1, 2)[0]


def test_short_reprs(data):
    """repr(Client) and repr(Step) say where the stream stands and what a
    step holds, never the arrays (issue #29 item 1)."""
    files, ids = data
    f = Feeders("repr", files, 1, epochs=1)
    try:
        c = sluice.Client(f.eps, f.job["name"], replicas=2)
        steps = len({(e, s) for e, s, _, _ in want_ids(f.job, ids, 1, 2)[0]})
        assert repr(c) == ("<sluice.Client job='job-repr' worker=0/1 replicas=2 position=0 epochs=1 "
                           "steps_per_epoch=%d>" % steps)
        s = next(c)
        assert repr(s) == ("<sluice.Step epoch=0 step=0 seq=0 last_step=False rows=[4, 4] "
                           "tensors=['image', 'label', 'id']>")
        assert str(s) == repr(s) == s.__repr__()
        assert repr(c).endswith(" position=2 epochs=1 steps_per_epoch=%d>" % steps)
        c.close()
        assert repr(c) == "<sluice.Client job='job-repr' worker=0/1 closed>"
    finally:
        f.stop()
    # a Step Python code made of anything: its items as they are
    assert repr(sluice.Step((1, 2, 3, True, [{"a": 1}, {}], [5, 0]))) == (
        "<sluice.Step epoch=2 step=1 seq=3 last_step=True rows=[5, 0] tensors=['a']>")
    assert repr(sluice.Step((-1, 2**70, "x", None, "not a list", None))) == (
        "<sluice.Step epoch=1180591620717411303424 step=-1 seq=x last_step=None rows=None tensors=[]>")
    assert repr(sluice.Step((0, 0, 0, False, [], []))).endswith("rows=[] tensors=[]>")
    assert repr(sluice.Step((0, 0, 0, False, [["not a dict"]], [1]))).endswith("tensors=[]>")


def test_keyword_only_signatures():
    """help(sluice.Client) shows every option as a keyword-only parameter
    (the Python class and the C type alike), not **options."""
    import inspect
    import pydoc
    want = ["worker", "workers", "replicas", "credits", "heartbeat_ms", "timeout_ms", "connect_timeout_ms",
            "reconnect_ms", "takeover_ms", "no_shm", "resume_seq", "curve_key", "curve_server_keys", "lend",
            "metrics_listen", "resume_epoch", "reshape", "transition"]
    for cls in (sluice.Client, sluice._sluice.Client):
        sig = inspect.signature(cls)
        params = list(sig.parameters.values())
        assert [p.name for p in params] == ["feeders", "job"] + want, cls
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params[2:]), cls
        assert {p.name: p.default for p in params[2:]} == {
            "worker": 0, "workers": 1, "replicas": 1, "credits": None, "heartbeat_ms": None, "timeout_ms": None,
            "connect_timeout_ms": None, "reconnect_ms": None, "takeover_ms": None, "no_shm": False,
            "resume_seq": 0, "curve_key": None, "curve_server_keys": None, "lend": False, "metrics_listen": None,
            "resume_epoch": 0, "reshape": False, "transition": None}, cls
    text = pydoc.render_doc(sluice.Client, renderer=pydoc.plaintext)
    assert "**options" not in text and "curve_server_keys=None, lend=False, metrics_listen=None)" in text
    assert str(inspect.signature(sluice._sluice.Client.keepalive)) == "(self, ms, /)"
    with pytest.raises(TypeError):
        sluice.Client(["ipc:///x"], "j", 0)  # the options are keyword-only
    with pytest.raises(TypeError):
        sluice._sluice.Client(["ipc:///x"], "j", 0)
