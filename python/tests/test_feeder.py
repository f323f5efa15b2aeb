"""sluice.Feeder and sluice.Job (issue #29 item 2) with real sluice-feeder
processes: streams exact against the plan's reference model, the feeder's
own error messages, the process stopped by close(), a with block, garbage
collection and the interpreter's exit, --serve-runs, hostile values.

Run by ctest (python_feeder) as
    SLUICE_BUILD=BUILD PYTHONPATH=BUILD/python /usr/bin/python3 -m pytest python/tests/test_feeder.py
"""
import json
import os
import re
import subprocess
import sys
import textwrap
import time
import urllib.request

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import bed  # noqa: E402

import sluice  # noqa: E402

BUILD = os.environ.get("SLUICE_BUILD", os.path.join(ROOT, "build"))
FEATURES = {"id": {"dtype": "int64"}, "image": {"dtype": "uint8", "shape": [16], "from": "bytes"}}


@pytest.fixture(scope="module")
def data():
    bed.setup(BUILD, "pyfeeder")
    files = bed.gen("d", 100, 2)
    ids = []
    for f in files:
        p = subprocess.run([bed.RECORD, "cat", "--decode", "example", f], check=True, capture_output=True, text=True)
        ids.append([int(json.loads(x)["example"]["features"]["feature"]["id"]["int64List"]["value"][0])
                    for x in p.stdout.splitlines()])
    yield files, ids
    bed.cleanup()


def job_keys(files, **more):
    keys = {"name": "pyf", "files": files, "format": "tfrecord", "features": FEATURES, "global_batch_size": 8,
            "epochs": 2, "prefetch": 4, "shuffle": {"buffer": 16, "seed": 7}}
    keys.update(more)
    return keys


def want(job, ids, W=1, R=1, worker=0):
    """[(epoch, step, [ids]), ...] of one worker from the reference model."""
    ref = bed.reference(job, [len(x) for x in ids], W, R)
    return [(x["epoch"], x["step"], [ids[fi][r] for fi, r in x["elems"]]) for x in ref.get(worker, [])]


def read(client):
    return [(s.epoch, s.step, s.replicas[0]["id"].tolist()) for s in client]


def gone(pid, within=10.0):
    """True once no process has `pid` (the feeder was reaped)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    return False


def feeder_message(args):
    """The message of the feeder's last error line, run by hand."""
    r = subprocess.run([bed.FEEDER] + args, capture_output=True, text=True)
    line = [x for x in r.stderr.splitlines() if not x.startswith("Try ")][-1]
    return r.returncode, line.split("sluice-feeder: ", 1)[1].removeprefix("error: ")


def test_stream_exact_from_a_dict(data):
    files, ids = data
    keys = job_keys(files)
    with sluice.Feeder(keys, threads=1, heartbeat_ms=200) as f:
        assert f.address.startswith("ipc://") and f.returncode is None
        assert "serving job 'pyf'" in f.log
        with sluice.Client(f.address, "pyf", heartbeat_ms=200) as c:
            got = read(c)
        pid = f.pid
        # one run served: the feeder ends by itself, status 0
        deadline = time.monotonic() + 10
        while f.returncode is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert f.returncode == 0
    assert got == want(keys, ids)
    assert gone(pid)
    assert "every worker has its data: done" in f.log  # kept after close
    assert repr(f) == "<sluice.Feeder job='pyf' address=%r pid=%d closed, exit status 0>" % (f.address, pid)


def test_job_file_two_workers_tcp(data):
    files, ids = data
    keys = job_keys(files, shard_policy="data")
    path = os.path.join(bed.TMP, "two.json")
    sluice.Job(keys).save(path)
    job = sluice.Job.from_file(path)
    assert job.to_dict() == keys and job.name == "pyf"
    with sluice.Feeder(path, listen="tcp://127.0.0.1:0".replace(":0", ":%d" % free_port()), workers=2,
                       replicas=1, threads=1) as f:
        got = {}
        clients = [f.client(worker=w, workers=2, heartbeat_ms=200) for w in range(2)]
        # two workers read in turn: each one's stream, exact (credits let
        # worker 0 read all of its own while worker 1 waits)
        for w, c in enumerate(clients):
            got[w] = read(c)
            c.close()
    for w in range(2):
        assert got[w] == want(keys, ids, W=2, worker=w)


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_runs_and_past_the_end(data):
    files, ids = data
    keys = job_keys(files, epochs=1)
    with sluice.Feeder(keys, threads=1, serve_runs=True, heartbeat_ms=200) as f:
        for run in range(3):  # a notebook cell run three times: three whole runs, from piece 0
            with f.client(heartbeat_ms=200) as c:
                assert read(c) == want(keys, ids), "run %d" % run
                with pytest.warns(RuntimeWarning, match=r"stream ended after the job's last epoch \(1 epochs of "
                                                        r"13 steps\): iterating it again yields nothing"):
                    assert list(c) == []
        assert f.returncode is None
        assert f.log.count("serving job 'pyf'") == 4
        assert "--serve-runs: run 3 served; the next trainers get run 4" in f.log
    assert f.returncode == 0


def test_json_log_format(data):
    files, _ = data
    with sluice.Feeder(job_keys(files), threads=1, extra_args=["--log-format", "json"]) as f:
        assert '"msg":"serving job' in f.log
    with pytest.raises(sluice.FeederError) as e:
        sluice.Feeder(job_keys(files, bogus=1), extra_args=["--log-format=json"])
    assert str(e.value) == "unknown key 'bogus'"


def test_metrics_url(data):
    files, _ = data
    with sluice.Feeder(job_keys(files), threads=1, metrics_listen="127.0.0.1:0") as f:
        assert f.metrics_url is not None and f.metrics_url.startswith("http://127.0.0.1:")
        assert not f.metrics_url.endswith(":0/metrics")
        with urllib.request.urlopen(f.metrics_url, timeout=10) as r:
            body = r.read().decode()
        assert "sluice_feeder_" in body


@pytest.mark.parametrize("keys,message", [
    ({"bogus": 1}, "unknown key 'bogus'"),
    ({"global_batch_size": 0}, None),
    ({"features": {}}, "'features' is required with format \"tfrecord\""),
    ({"files": ["/nonexistent/x*.tfrecord"]}, "files: pattern '/nonexistent/x*.tfrecord' matches no file"),
])
def test_bad_job_the_feeders_message(data, keys, message):
    """Feeder and Job say what the feeder says of the same job in a file
    (less the file's name)."""
    files, _ = data
    bad = job_keys(files)
    bad.update(keys)
    path = os.path.join(bed.TMP, "bad.json")
    with open(path, "w") as f:
        json.dump(bad, f)
    rc, text = feeder_message(["--job", path, "--listen", "ipc://%s/bad.sock" % bed.TMP])
    own = text.removeprefix(path + ": ")
    if message is not None:
        assert own == message
    t0 = time.monotonic()
    with pytest.raises(sluice.FeederError) as e:
        sluice.Feeder(bad, threads=1)
    assert time.monotonic() - t0 < 5  # not the feeder's --timeout-ms of refusals
    assert str(e.value) == own and e.value.returncode == rc
    with pytest.raises(sluice.FeederError) as e:
        sluice.Feeder(path, threads=1)
    assert str(e.value) == text
    with pytest.raises(ValueError) as v:
        sluice.Job(bad)
    assert str(v.value) == own
    with pytest.raises(ValueError) as v:
        sluice.Job.from_file(path)
    assert str(v.value) == text


def test_failed_scan(data):
    """A damaged file under on_error fail: the feeder logs the error and
    would tell trainers for --timeout-ms (here 60 s); Feeder raises at
    once and the feeder is stopped (exit 1: it had failed)."""
    files, _ = data
    damaged = os.path.join(bed.TMP, "damaged.tfrecord")
    with open(damaged, "wb") as f:
        f.write(b"\xff" * 40)
    t0 = time.monotonic()
    with pytest.raises(sluice.FeederError) as e:
        sluice.Feeder(job_keys([damaged] + files), threads=1, timeout_ms=60000)
    assert time.monotonic() - t0 < 10
    assert e.value.returncode == 1 and str(e.value).startswith(damaged + ": ")
    assert str(e.value) == _last_error_line(e.value.log)


def _last_error_line(log):
    return [x for x in log.splitlines() if " error: " in x][-1].split(" error: ", 1)[1]


def test_absent_job_file(data):
    path = os.path.join(bed.TMP, "absent.json")
    with pytest.raises(sluice.FeederError) as e:
        sluice.Feeder(path)
    assert str(e.value) == "open(%s): No such file or directory" % path and e.value.returncode == 1
    assert "error: open(" in e.value.log
    with pytest.raises(ValueError, match=r"^open\(%s\): No such file or directory$" % path):
        sluice.Job.from_file(path)


def test_join_a_running_job(data):
    """A second Feeder joins the first one's job while a client reads it
    (issue #30): the client learns of it and switches, its stream the
    reference's; the joined feeder served pieces."""
    files, ids = data
    keys = job_keys(files, epochs=3)
    with sluice.Feeder(keys, threads=1, heartbeat_ms=200) as f0:
        with f0.client(heartbeat_ms=200, credits=2) as c:
            got = []
            for step in c:
                got.append((step.epoch, step.step, step.replicas[0]["id"].tolist()))
                if len(got) == 5:
                    f1 = sluice.Feeder(keys, threads=1, heartbeat_ms=200, join=f0, feeder_index=1, feeders=2)
                    # the client holds its step until feeder 0 has counted
                    # the joiner in and told it (ROSTER, read while it
                    # keeps its connections alive); it switches at its
                    # next step
                    deadline = time.monotonic() + 30
                    while "feeder 1 of 2 joined the job" not in f0.log and time.monotonic() < deadline:
                        c.keepalive(50)
                    c.keepalive(200)
            assert c.feeders == 2
        f1.close()
        assert "feeder 1 of 2 joined the job" in f0.log
        sent = [int(x) for x in re.findall(r"worker 0 said goodbye after (\d+) pieces", f1.log)]
        assert sent and sent[0] > 0, f1.log
    assert got == want(keys, ids)
    assert f1.args[f1.args.index("--join") + 1] == f0.address


def test_join_hostile_values(data):
    files, _ = data
    for bad, kind in ((5, TypeError), ([5], TypeError), ([], ValueError), ("", ValueError), (["a,b"], ValueError),
                      (["ipc:///a", None], TypeError)):
        with pytest.raises(kind, match="^join: "):
            sluice.Feeder(job_keys(files), join=bad, feeder_index=1, feeders=2)
    with pytest.raises(TypeError, match="^advertise: "):
        sluice.Feeder(job_keys(files), join="ipc:///x", advertise=5, feeder_index=1, feeders=2)
    # the feeder's own refusal: a joiner needs an index past the first feeders
    with pytest.raises(sluice.FeederError, match="--feeder-index 0 is one of the job's first feeders"):
        sluice.Feeder(job_keys(files), join="ipc:///nowhere")


@pytest.mark.parametrize("threads,got", [(0, "0"), (-1, "-1"), (257, "257"), (10**30, str(10**30))])
def test_hostile_threads(data, threads, got):
    files, _ = data
    with pytest.raises(sluice.FeederError) as e:
        sluice.Feeder(job_keys(files), threads=threads)
    assert str(e.value) == "--threads: must be an integer in [1, 256], got '%s'" % got
    assert e.value.returncode == 2


def test_hostile_values(data):
    files, _ = data
    for bad in (True, "3", 2.0):
        with pytest.raises(TypeError, match="^threads: an int"):
            sluice.Feeder(job_keys(files), threads=bad)
    with pytest.raises(TypeError):
        sluice.Feeder(job_keys(files), extra_args="--quiet")
    for quiet in (["--quiet"], ["-q"], ["--log-level", "error"], ["--log-level=warning"]):
        with pytest.raises(ValueError, match="^extra_args: %s: Feeder waits for the feeder's info line" % quiet[0]):
            sluice.Feeder(job_keys(files), extra_args=quiet)
    with pytest.raises(ValueError, match="^start_timeout: seconds above 0"):
        sluice.Feeder(job_keys(files), start_timeout=-1)
    with pytest.raises(FileNotFoundError, match="is not an executable file"):
        sluice.Feeder(job_keys(files), binary=os.path.join(bed.TMP, "no-feeder"))
    with pytest.raises(sluice.FeederError) as e:
        sluice.Feeder(job_keys(files), listen="tcp://127.0.0.1:99999")
    assert str(e.value) == "--listen: 'tcp://127.0.0.1:99999': port 99999 is out of range (1-65535)"
    with pytest.raises(sluice.FeederError) as e:
        sluice.Feeder(job_keys(files), feeder_index=2, feeders=2)
    assert str(e.value) == "--feeder-index 2 must be below --feeders 2"
    with pytest.raises(ValueError, match="^job: not JSON"):
        sluice.Job(name="x", files=object())
    with pytest.raises(TypeError):
        sluice.Job(["name"])


def test_close_and_repeated_close(data):
    files, _ = data
    f = sluice.Feeder(job_keys(files), threads=1)
    pid, sock = f.pid, f.address[len("ipc://"):]
    tmp = os.path.dirname(sock)
    assert os.path.exists(sock)
    f.close()
    assert gone(pid) and f.closed and f.returncode == 0  # SIGTERM: a clean stop
    assert not os.path.exists(tmp)  # its temporary folder went too
    f.close()
    f.close()
    assert "stopping on signal" in f.log
    with pytest.raises(ValueError, match="closed"):
        f.client()


def test_stopped_by_gc_and_interpreter_exit(data):
    files, _ = data
    f = sluice.Feeder(job_keys(files), threads=1)
    pid = f.pid
    del f
    assert gone(pid)
    # another interpreter makes a feeder and exits without closing it (a
    # plain end, and an uncaught exception): the feeder is stopped
    for end in ("", "raise SystemExit(3)", "raise RuntimeError('boom')"):
        prog = textwrap.dedent("""
            import sys, sluice
            f = sluice.Feeder(%r, threads=1)
            print(f.pid, flush=True)
            %s
        """) % (job_keys(files), end)
        r = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=60)
        assert r.stdout.strip().isdigit(), r.stderr
        assert gone(int(r.stdout)), "the feeder outlived its interpreter (%r)" % end


def test_job_validation(data):
    files, ids = data
    job = sluice.Job(name="pyf", files=files, features=FEATURES, global_batch_size=8, epochs=3)
    assert job.plan["job"] == "pyf"
    assert job.plan["workers"][0]["steps"] == 13 and job.plan["workers"][0]["elements"] == 100
    assert repr(job) == "<sluice.Job 'pyf' tfrecord files=2 global_batch_size=8 epochs=3>"
    d = job.to_dict()
    d["epochs"] = 1
    assert job.to_dict()["epochs"] == 3  # a copy
    # a job with its own shape is planned for it
    job2 = sluice.Job(job.to_dict(), workers=2, replicas=2, shard_policy="data")
    assert [w["worker"] for w in job2.plan["workers"]] == [0, 1]
    with sluice.Feeder(job, threads=1) as f:
        with f.client(heartbeat_ms=200) as c:
            assert read(c) == want(job.to_dict(), ids)
