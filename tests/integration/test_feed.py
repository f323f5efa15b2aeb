#!/usr/bin/env python3
"""Integration tests of the feeder and the receiving side: real sluice-feeder
and sluice-trainer processes over real ZeroMQ sockets (tcp on loopback and
ipc in a temporary folder), on real TFRecord files written by sluice-record.

Every trace a trainer writes (one line per piece: worker, replica, epoch,
step, seq, size, ids) must equal, line for line, what the independent Python
model of the rules (tests/plan/ref_plan.py) says that worker gets, with the
model's (file, record) elements turned into the records' ids. That checks
sharding, interleave, shuffle, batching, both splits, empty pieces, epochs and
sequence order end to end, for F = 1, 2, 3 feeders.

Usage: test_feed.py BUILD_DIR     (prints "N passed, 0 failed" at the end)
"""
import json
import re
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bed import reference  # noqa: E402
import harness  # noqa: E402
from harness import fail, ok, spawn  # noqa: E402,F401

BUILD = os.path.abspath(sys.argv[1])
RECORD = os.path.join(BUILD, "tools", "sluice-record")
FEEDER = os.path.join(BUILD, "feeder", "sluice-feeder")
TRAINER = os.path.join(BUILD, "trainer", "sluice-trainer")
TMP = tempfile.mkdtemp(prefix="sluice-it-")
FEATURES = {"image": {"dtype": "uint8", "shape": [16], "from": "bytes"},
            "label": {"dtype": "int64", "shape": []},
            "id": {"dtype": "int64", "shape": []}}


def free_ports(n):
    """n distinct free loopback ports (the sockets are held together, so the
    kernel cannot hand out one port twice)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def gen(name, records, shards, compression="none"):
    out = os.path.join(TMP, name)
    subprocess.run([RECORD, "gen", "--output-dir", out, "--records", str(records), "--shards", str(shards),
                    "--seed", "3", "--image-bytes", "16", "--compression", compression, "--prefix", "part"],
                   check=True, capture_output=True)
    files = sorted(os.path.join(out, f) for f in os.listdir(out) if f.startswith("part-"))
    return files


def ids_of(files):
    """The id of every record of every file, read with sluice-record cat."""
    out = []
    for f in files:
        p = subprocess.run([RECORD, "cat", "--decode", "example", f], check=True, capture_output=True, text=True)
        ids = []
        for line in p.stdout.splitlines():
            ex = json.loads(line)["example"]["features"]["feature"]
            ids.append(int(ex["id"]["int64List"]["value"][0]))
        out.append(ids)
    return out


def write_job(name, files, **keys):
    job = {"name": name, "files": files, "format": "tfrecord", "features": FEATURES, "global_batch_size": 8,
           "epochs": 2, "prefetch": 4}
    job.update(keys)
    path = os.path.join(TMP, name + ".json")
    with open(path, "w") as f:
        json.dump(job, f)
    return path, job


def endpoints(kind, n, tag):
    if kind == "tcp":
        ports = free_ports(n)
        return ["tcp://127.0.0.1:%d" % p for p in ports], ["tcp://127.0.0.1:%d" % p for p in ports]
    paths = ["ipc://%s/%s-%d.sock" % (TMP, tag, j) for j in range(n)]
    return paths, paths


def start_feeders(job_path, F, kind, tag, extra=()):
    binds, conns = endpoints(kind, F, tag)
    procs = []
    for j in range(F):
        procs.append(spawn([FEEDER, "--job", job_path, "--listen", binds[j], "--feeder-index", str(j),
                            "--feeders", str(F), "--threads", "2", "--heartbeat-ms", "200",
                            "--timeout-ms", "5000"] + list(extra),
                           log=os.path.join(TMP, "%s-feeder%d.log" % (tag, j))))
    return procs, conns


def start_trainer(conns, job, w, W, R, tag, extra=()):
    trace = os.path.join(TMP, "%s-trace%d.jsonl" % (tag, w))
    p = spawn([TRAINER, "--connect", ",".join(conns), "--job", job["name"], "--worker", str(w),
               "--workers", str(W), "--replicas", str(R), "--trace", trace, "--heartbeat-ms", "200",
               "--timeout-ms", "5000"] + list(extra), log=os.path.join(TMP, "%s-trainer%d.log" % (tag, w)),
              stdout=subprocess.DEVNULL)
    return p, trace


def read_log(tag, who):
    with open(os.path.join(TMP, "%s-%s.log" % (tag, who))) as f:
        return f.read()


def wait_for_log(tag, whos, text, proc, what, timeout=20):
    """Wait until every log in whos holds text; fail with what if proc ends first or time runs out."""
    deadline = time.time() + timeout
    while not all(text in read_log(tag, who) for who in whos):
        if time.time() > deadline or (proc is not None and proc.poll() is not None):
            fail(what)
        time.sleep(0.02)


def wait_all(procs, timeout, what):
    deadline = time.time() + timeout
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=max(0.1, deadline - time.time())))
        except subprocess.TimeoutExpired:
            fail("%s did not finish within %d s" % (what, timeout))
    return codes


def check_traces(name, traces, ref, ids):
    for w, path in enumerate(traces):
        if path is None:
            continue
        with open(path) as f:
            got = [json.loads(x) for x in f]
        summary = got.pop()
        if "summary" not in summary or not summary["summary"]["ok"]:
            fail("%s: worker %d trace has no successful summary line: %s" % (name, w, summary))
        want = [{"worker": x["worker"], "replica": x["replica"], "epoch": x["epoch"], "step": x["step"],
                 "seq": x["seq"], "size": len(x["elems"]), "ids": [ids[fi][r] for fi, r in x["elems"]]}
                for x in ref.get(w, [])]
        if got != want:
            for i, (g, e) in enumerate(zip(got, want)):
                if g != e:
                    fail("%s: worker %d piece %d differs:\n  got  %s\n  want %s" % (name, w, i, g, e))
            fail("%s: worker %d got %d pieces, want %d" % (name, w, len(got), len(want)))


def shm_pieces(path):
    """(pieces with rows, pieces read in shared memory) from a trace and its summary line."""
    with open(path) as f:
        lines = [json.loads(x) for x in f]
    return sum(1 for x in lines[:-1] if x["size"] > 0), lines[-1]["summary"]["shm_pieces"]


def run_case(name, files, ids, W, R, F, kind="ipc", counts=None, feeder_extra=(), trainer_extra=(), shm=None,
             window=None, **keys):
    """shm: None, or True / False: every piece with rows came in shared memory / none did. window: None, or
    the window every feeder must say it gives each worker."""
    harness.case()
    tag = "c%d" % (harness.passed() + 1)
    job_path, job = write_job("job-" + tag, files, **keys)
    feeders, conns = start_feeders(job_path, F, kind, tag, extra=feeder_extra)
    time.sleep(0.2)
    trainers = [start_trainer(conns, job, w, W, R, tag, extra=trainer_extra) for w in range(W)]
    codes = wait_all([p for p, _ in trainers], 60, name + ": trainers")
    for w, c in enumerate(codes):
        if c != 0:
            logs = "".join(read_log(tag, "feeder%d" % j) for j in range(F))
            fail("%s: trainer %d exited %d:\n%s\nfeeder logs:\n%s" % (name, w, c, read_log(tag, "trainer%d" % w),
                                                                      logs[-4000:]))
    fcodes = wait_all(feeders, 15, name + ": feeders")
    for j, c in enumerate(fcodes):
        if c != 0:
            fail("%s: feeder %d exited %d:\n%s" % (name, j, c, read_log(tag, "feeder%d" % j)))
    ref = reference(job, counts if counts is not None else [len(x) for x in ids], W, R)
    check_traces(name, [t for _, t in trainers], ref, ids)
    for j in range(F if window is not None else 0):
        got = re.findall(r"piece buffers of \d+ bytes \(a window of (\d+) pieces per worker\)",
                         read_log(tag, "feeder%d" % j))
        if not got or any(int(x) != window for x in got):
            fail("%s: feeder %d: expected a window of %d pieces per worker, its log says %s" % (name, j, window, got))
    for w, (_, path) in enumerate(trainers):
        rows, shared = shm_pieces(path)
        if shm is not None and shared != (rows if shm else 0):
            fail("%s: worker %d read %d of its %d pieces with rows in shared memory, expected %s" %
                 (name, w, shared, rows, "all" if shm else "none"))
    ok(name)


def kill_feeder_under_trainer(files, tag, trainer_extra, sig=signal.SIGKILL):
    """A trainer on an endless job whose only feeder gets sig after 1 s: (exit code, seconds it took, log)."""
    job_path, job = write_job("job-" + tag, files, epochs=0)
    feeders, conns = start_feeders(job_path, 1, "ipc", tag)
    time.sleep(0.2)
    p, _ = start_trainer(conns, job, 0, 1, 1, tag, extra=trainer_extra)
    time.sleep(1.0)
    feeders[0].send_signal(sig)
    t0 = time.time()
    code = wait_all([p], 20, tag + ": trainer of a killed feeder")[0]
    took = time.time() - t0
    feeders[0].kill()
    feeders[0].wait()
    return code, took, read_log(tag, "trainer0")


def rejoining_pair(tag, files, shuffle, line, why):
    """A long job (1000 epochs, batch 6: 50,000 pieces; a case stops its
    trainer 0.1 s in, when it has had 6,000-7,500 of them here; 1500
    epochs checked nothing more) served by 2 feeders over ipc that drop a
    trainer silent for 1.5 s, and one trainer of 2 replicas that fails a
    feeder after 1 s and rejoins it within 30 s; returns once both feeders'
    logs show `line` (else fails with `why`)."""
    job_path, job = write_job("job-" + tag, files, epochs=1000, global_batch_size=6, shuffle=shuffle)
    feeders, conns = start_feeders(job_path, 2, "ipc", tag, extra=("--timeout-ms", "1500"))
    time.sleep(0.2)
    p, trace = start_trainer(conns, job, 0, 1, 2, tag, extra=("--timeout-ms", "1000", "--reconnect-s", "30"))
    wait_for_log(tag, ("feeder0", "feeder1"), line, p, why)
    time.sleep(0.1)
    return job, feeders, p, trace

def selftest(name):
    """The harness on a case that times out (tests/integration/test_harness.sh):
    an endless job's trainer does not finish within 2 s."""
    files = gen("s", 20, 2)
    job_path, job = write_job(name, files, epochs=0)
    harness.case()
    feeders, conns = start_feeders(job_path, 1, "ipc", "self")
    time.sleep(0.2)
    p, _ = start_trainer(conns, job, 0, 1, 1, "self")
    wait_for_log("self", ("feeder0",), "worker 0 connected", p, "selftest: the trainer did not connect")
    wait_all([p], 2, "selftest: trainer")
    fail("selftest: an endless job finished")


def main():
    if os.environ.get("SLUICE_IT_SELFTEST"):
        selftest(os.environ["SLUICE_IT_SELFTEST"])
    files = gen("a", 150, 5)
    ids = ids_of(files)
    uneven = gen("u", 61, 4)
    uneven = [uneven[0], uneven[1], uneven[2], uneven[3]]
    uneven_ids = ids_of(uneven)
    gz = gen("g", 70, 3, "gzip")
    gz_ids = ids_of(gz)

    shuffle = {"buffer": 20, "seed": 11, "reshuffle_each_epoch": True}
    # pieces in the feeder's shared memory (the default on one host: ipc and
    # tcp on loopback alike), and by copy when either side says --no-shm;
    # the traces are the same
    run_case("shared memory: W=2 R=2 F=2, every piece with rows", files, ids, 2, 2, 2, shm=True,
             shuffle=shuffle)
    run_case("shared memory over tcp on loopback", files, ids, 1, 3, 1, kind="tcp", shm=True)
    run_case("trainer --no-shm: by copy", files, ids, 2, 2, 2, trainer_extra=("--no-shm",), shm=False,
             shuffle=shuffle)
    run_case("feeder --no-shm: by copy", files, ids, 1, 3, 1, feeder_extra=("--no-shm",), shm=False)
    # the decoded-element cache (issue #25): epochs after the first copy rows
    # decoded before; the stream is the reference model's all the same
    # (python/tests/test_cache.py compares every tensor's bytes with it off)
    run_case("decoded-element cache: W=2 R=1 F=2 shuffled, 3 epochs", files, ids, 2, 1, 2, shuffle=shuffle, epochs=3,
             cache_bytes=1 << 20)
    for F in (1, 2, 3):
        run_case("FILE W=2 R=2 shuffled, interleaved, tcp, F=%d" % F, files, ids, 2, 2, F, kind="tcp",
                 shuffle=shuffle, parallel_reads=2)
    run_case("DATA W=3 R=1 G=5 F=2", files, ids, 3, 1, 2, shard_policy="data", global_batch_size=5)
    run_case("OFF W=2 R=3 G=7 drop_remainder", files, ids, 2, 3, 1, shard_policy="off", global_batch_size=7,
             drop_remainder=True)
    run_case("HINT records W=2 R=2 G=6 F=2", files, ids, 2, 2, 2, shard_policy="hint", shard_hint="records",
             global_batch_size=6, shuffle=shuffle)
    run_case("HINT batches W=2 R=1 G=4", files, ids, 2, 1, 1, shard_policy="hint", shard_hint="batches",
             global_batch_size=4)
    run_case("per-replica input W=2 R=2 G=8 records F=3", files, ids, 2, 2, 3, per_replica_input=True,
             per_replica_shard="records")
    run_case("FILE W=4 R=1 uneven files: empty pieces", uneven, uneven_ids, 4, 1, 1, global_batch_size=4)
    run_case("gzip shards DATA W=1 R=3 G=8 F=2, 3 epochs", gz, gz_ids, 1, 3, 2, shard_policy="data", epochs=3)
    # prefetch counts steps: with prefetch 1 a feeder still lets R pieces
    # out (a window of 1 piece could never make up a 4-replica step: the
    # trainer waited for pieces, the feeder for credits, for ever)
    # (--piece-memory 1M: too little for the 8 MiB window floor, so the
    # window is the prefetch's, as these cases need)
    small_pool = ("--piece-memory", "1M")
    run_case("prefetch 1, W=1 R=4 G=8: a step's R pieces fit the window", files, ids, 1, 4, 1, prefetch=1,
             global_batch_size=8, feeder_extra=small_pool, window=4)
    # a trainer granting more credits than the feeder's window must give
    # back what it owes before it blocks (it held them back until a quarter
    # of its grant had piled up, so each piece waited for a poll timeout or
    # a heartbeat: 1 s here, 150 pieces, past the case's 60 s)
    slow_polls = ("--heartbeat-ms", "4000", "--timeout-ms", "20000")
    run_case("prefetch 1, 64 credits, 1 s polls: credits go back before the trainer waits", files, ids, 1, 1, 1,
             feeder_extra=slow_polls + small_pool, trainer_extra=("--credits", "64") + slow_polls, prefetch=1,
             global_batch_size=4, epochs=4, window=1)
    # the same with the trainer's default grant (64): its credit batches
    # stay within half the window it has seen, so a feeder with a window of
    # 2 keeps working (issue #25; before, batches of 16 came back only when
    # the trainer waited)
    run_case("prefetch 2, default credits, 1 s polls: batches within the feeder's window", files, ids, 1, 1, 1,
             feeder_extra=slow_polls + small_pool, trainer_extra=slow_polls, prefetch=2, global_batch_size=4,
             epochs=4, window=2)
    # the window's floor (issue #25): 8 MiB of pieces per worker where the
    # pool then fits --piece-memory; at exactly that pool it does, a byte
    # less and the window is prefetch x R (4 x 2 here). Every element
    # exactly once either way; a window as wide as the stream (150 records,
    # 19 pieces a worker) delivers it all before any credit comes back
    # a piece: 3 tensors of 2 rows, each rounded up to 64 bytes, + 64 bytes
    # for each of 64 tensor slots; tasks: max(prefetch, 2 x 2 threads)
    piece, tasks = 3 * 64 + 64 * 64, 4
    least = -(-(8 << 20) // piece)
    floor_pool = (least * 2 + tasks) * piece
    run_case("window floor: 8 MiB of pieces a worker when the pool fits --piece-memory exactly", files, ids, 2, 2, 1,
             feeder_extra=("--piece-memory", str(floor_pool)), prefetch=4, window=least, shuffle=shuffle)
    run_case("window floor: a byte less and the window is prefetch x R", files, ids, 2, 2, 1,
             feeder_extra=("--piece-memory", str(floor_pool - 1)), prefetch=4, window=8, shuffle=shuffle)

    # --stats: the feeder's counters as JSON, matching what the trainer got
    tag = "stats"
    stats_path = os.path.join(TMP, "stats.json")
    job_path, job = write_job("job-stats", gz, epochs=2)
    feeders, conns = start_feeders(job_path, 1, "ipc", tag, extra=("--stats", stats_path))
    time.sleep(0.2)
    trainer, trace = start_trainer(conns, job, 0, 1, 2, tag)
    if wait_all([trainer], 60, "stats: trainer") != [0] or wait_all(feeders, 15, "stats: feeder") != [0]:
        fail("stats: a process failed:\n%s\n%s" % (read_log(tag, "trainer0"), read_log(tag, "feeder0")))
    with open(stats_path) as f:
        st = json.load(f)
    with open(trace) as f:
        pieces = [json.loads(x) for x in f if '"summary"' not in x]
    nrec = sum(len(x) for x in gz_ids)
    disk = sum(os.path.getsize(x) for x in gz)
    want = {"pieces": len(pieces), "records": 2 * nrec, "errors": 0, "trainers": 1, "refused": 0,
            "disk_bytes": 2 * disk}
    for k, v in want.items():
        if st[k] != v:
            fail("stats: %s is %r, expected %r (%s)" % (k, st[k], v, st))
    if st["records"] != sum(p["size"] for p in pieces):
        fail("stats: records %d but the trace holds %d rows" % (st["records"], sum(p["size"] for p in pieces)))
    stages = ("read", "decompress", "decode", "map", "assemble", "send")
    cpu = st["cpu_s"]
    if any(not isinstance(cpu[k], float) or cpu[k] < 0 for k in stages + ("serve", "zmq_io", "total")):
        fail("stats: bad cpu_s %s" % cpu)
    if cpu["decompress"] <= 0:
        fail("stats: gzip shards were inflated but decompress is %r" % cpu["decompress"])
    if abs(cpu["total"] - sum(cpu[k] for k in stages)) > 1e-5 or abs(cpu["send"] - cpu["serve"] - cpu["zmq_io"]) > 1e-5:
        fail("stats: cpu_s totals do not add up: %s" % cpu)
    ok("--stats counters match the trainer's trace")

    # --threads left out: one decode thread per CPU the feeder may run on,
    # at most 8 (its affinity mask, not the machine's CPU count)
    job_path, job = write_job("job-threads", files)
    for cpus in sorted({1, 2, 3, 4, 12, len(os.sched_getaffinity(0))}):
        if cpus > len(os.sched_getaffinity(0)):
            continue
        mask = set(sorted(os.sched_getaffinity(0))[:cpus])
        tag = "threads%d" % cpus
        sock = "ipc://%s/%s.sock" % (TMP, tag)
        feeder = spawn([FEEDER, "--job", job_path, "--listen", sock], log=os.path.join(TMP, "%s-feeder0.log" % tag),
                       preexec_fn=lambda m=mask: os.sched_setaffinity(0, m))
        want = min(8, cpus)
        wait_for_log(tag, ["feeder0"], "serving job", feeder, "threads: the feeder on %d CPUs did not start" % cpus)
        feeder.send_signal(signal.SIGTERM)
        wait_all([feeder], 15, "threads: feeder on %d CPUs" % cpus)
        if "(%d threads," % want not in read_log(tag, "feeder0"):
            fail("threads: on %d CPUs expected %d decode threads:\n%s" % (cpus, want, read_log(tag, "feeder0")))
    ok("default decode threads follow the feeder's CPU affinity")

    # text lines (TextLineDataset rules: '\r' deleted, empty lines kept), one gzip file
    tdir = os.path.join(TMP, "text")
    os.makedirs(tdir)
    import gzip
    text_files, text_ids = [], []
    for f, (n, nl, gz) in enumerate([(23, "\n", False), (17, "\r\n", True), (0, "\n", False), (30, "\n", False)]):
        lines = ["" if k % 7 == 3 else "file%d line %d" % (f, k) for k in range(n)]
        data = "".join(x + nl for x in lines).encode()
        path = os.path.join(tdir, "part-%d.txt" % f + (".gz" if gz else ""))
        with (gzip.open(path, "wb") if gz else open(path, "wb")) as out:
            out.write(data)
        text_files.append(path)
        text_ids.append(lines)
    tag = "text"
    job_path, job = write_job("job-text", text_files, format="text", features={}, shuffle=shuffle,
                              global_batch_size=6, parallel_reads=2)
    feeders, conns = start_feeders(job_path, 2, "ipc", tag)
    time.sleep(0.2)
    trainers = [start_trainer(conns, job, w, 2, 2, tag, extra=("--trace-feature", "line")) for w in range(2)]
    codes = wait_all([p for p, _ in trainers], 60, "text trainers")
    if codes != [0, 0]:
        fail("text trainers exited %s: %s" % (codes, read_log(tag, "trainer0") + read_log(tag, "feeder0")))
    wait_all(feeders, 15, "text feeders")
    check_traces("text lines", [t for _, t in trainers], reference(job, [len(x) for x in text_ids], 2, 2), text_ids)
    ok("text lines (CRLF, empty lines, gzip) served as a bytes feature, F=2")

    # tar shards (WebDataset): fields by extension, numbers as text, raw bytes, a gzip shard
    import tarfile
    import io
    tar_files, tar_ids = [], []
    sid = 0
    for f, (n, gz) in enumerate([(9, False), (14, True), (5, False)]):
        path = os.path.join(TMP, "shard-%d.tar" % f + (".gz" if gz else ""))
        with tarfile.open(path, "w:gz" if gz else "w", format=tarfile.PAX_FORMAT) as t:
            d = tarfile.TarInfo("dir")
            d.type = tarfile.DIRTYPE
            t.addfile(d)
            sample_ids = []
            for k in range(n):
                fields = {"cls": b"%d\n" % sid, "bin": bytes((sid + j) % 256 for j in range(8)),
                          "txt": ("sample %d" % sid).encode() * (k % 3)}
                for ext, data in fields.items():
                    info = tarfile.TarInfo("dir/s%05d.%s" % (sid, ext))
                    info.size = len(data)
                    t.addfile(info, io.BytesIO(data))
                sample_ids.append(sid)
                sid += 1
        tar_files.append(path)
        tar_ids.append(sample_ids)
    tag = "tar"
    job_path, job = write_job("job-tar", tar_files, format="tar", global_batch_size=4, shuffle=shuffle,
                              features={"cls": {"dtype": "int64", "shape": []},
                                        "bin": {"dtype": "uint8", "shape": [8], "from": "bytes"},
                                        "txt": {"dtype": "bytes", "shape": []}})
    feeders, conns = start_feeders(job_path, 1, "ipc", tag)
    time.sleep(0.2)
    trainers = [start_trainer(conns, job, w, 1, 2, tag, extra=("--trace-feature", "cls")) for w in range(1)]
    codes = wait_all([p for p, _ in trainers], 60, "tar trainers")
    if codes != [0]:
        fail("tar trainer exited %s: %s" % (codes, read_log(tag, "trainer0") + read_log(tag, "feeder0")))
    wait_all(feeders, 15, "tar feeders")
    check_traces("tar shards", [t for _, t in trainers], reference(job, [len(x) for x in tar_ids], 1, 2), tar_ids)
    # the bytes field's contents too: trace 'txt' as strings
    tag = "tar-txt"
    txt = [[("sample %d" % i) * (k % 3) for k, i in enumerate(ids_)] for ids_ in tar_ids]
    feeders, conns = start_feeders(job_path, 1, "ipc", tag)
    time.sleep(0.2)
    p, trace = start_trainer(conns, job, 0, 1, 1, tag, extra=("--trace-feature", "txt"))
    if wait_all([p], 60, "tar txt trainer") != [0]:
        fail("tar txt trainer: " + read_log(tag, "trainer0"))
    wait_all(feeders, 15, "tar txt feeder")
    check_traces("tar txt", [trace], reference(job, [len(x) for x in tar_ids], 1, 1), txt)
    ok("tar shards (pax, gzip, directories skipped) served by field extension, numbers and bytes exact")

    # a TF_CONFIG-style cluster spec: chief + worker, two feeders
    tag = "tfconfig"
    job_path, job = write_job("job-tfconfig", files, shuffle=shuffle)
    feeders_addr = ["ipc://%s/tfc-%d.sock" % (TMP, j) for j in range(2)]
    cluster = {"chief": ["host0:2222"], "worker": ["host1:2222"], "feeder": feeders_addr}
    procs = []
    for j in range(2):
        spec = json.dumps({"cluster": cluster, "task": {"type": "feeder", "index": j}})
        procs.append(spawn([FEEDER, "--job", job_path, "--cluster", spec, "--heartbeat-ms", "200"],
                           log=os.path.join(TMP, "%s-feeder%d.log" % (tag, j))))
    time.sleep(0.2)
    traces = []
    trainers = []
    for w, task in enumerate([{"type": "chief", "index": 0}, {"type": "worker", "index": 0}]):
        trace = os.path.join(TMP, "%s-trace%d.jsonl" % (tag, w))
        env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": cluster, "task": task}))
        trainers.append(spawn([TRAINER, "--job", job["name"], "--replicas", "2", "--trace", trace],
                              log=os.path.join(TMP, "%s-trainer%d.log" % (tag, w)), env=env,
                              stdout=subprocess.DEVNULL))
        traces.append(trace)
    codes = wait_all(trainers, 60, "TF_CONFIG trainers")
    if codes != [0, 0]:
        fail("TF_CONFIG trainers exited %s: %s" % (codes, read_log(tag, "trainer0") + read_log(tag, "trainer1")))
    wait_all(procs, 15, "TF_CONFIG feeders")
    check_traces("TF_CONFIG", traces, reference(job, [len(x) for x in ids], 2, 2), ids)
    ok("TF_CONFIG cluster spec: chief is worker 0, feeders from the 'feeder' list")

    # a damaged record: fail tells the trainer the file and offset; skip-file leaves the file out
    bad = gen("bad", 40, 2)
    bad_ids = ids_of(bad)
    data = bytearray(open(bad[1], "rb").read())
    data[-5] ^= 1
    open(bad[1], "wb").write(data)
    tag = "fail"
    job_path, job = write_job("job-fail", bad)
    feeders, conns = start_feeders(job_path, 1, "ipc", tag, extra=("--timeout-ms", "1500"))
    time.sleep(0.2)
    p, _ = start_trainer(conns, job, 0, 1, 1, tag)
    code = wait_all([p], 30, "trainer of a damaged job")[0]
    log = read_log(tag, "trainer0")
    if code != 1 or "corrupted record at" not in log or os.path.basename(bad[1]) not in log:
        fail("on_error=fail: trainer should exit 1 naming the file and offset; exit %d:\n%s" % (code, log))
    wait_all(feeders, 15, "feeder of a damaged job")
    ok("on_error=fail: the trainer fails with the file and offset")
    run_case("on_error=skip-file leaves the damaged file out", bad, bad_ids, 1, 2, 1, counts=[len(bad_ids[0]), 0],
             on_error="skip-file")

    # refusals
    tag = "refuse"
    job_path, job = write_job("job-refuse", files)
    feeders, conns = start_feeders(job_path, 1, "ipc", tag)
    time.sleep(0.2)
    p0, _ = start_trainer(conns, job, 0, 2, 1, tag)
    time.sleep(0.3)
    wrong = dict(job, name="no-such-job")
    p1, _ = start_trainer(conns, wrong, 1, 2, 1, tag + "x")
    if wait_all([p1], 20, "wrong job trainer")[0] != 1 or "is not served here" not in read_log(tag + "x", "trainer1"):
        fail("a trainer asking for another job must be refused: " + read_log(tag + "x", "trainer1"))
    p2, _ = start_trainer(conns, job, 1, 3, 1, tag + "y")
    if wait_all([p2], 20, "disagreeing trainer")[0] != 1 or \
            "cluster shape disagrees" not in read_log(tag + "y", "trainer1"):
        fail("a trainer with another W must be refused: " + read_log(tag + "y", "trainer1"))
    p3, _ = start_trainer(conns, job, 1, 2, 1, tag)
    wait_all([p0, p3], 30, "trainers after refusals")
    wait_all(feeders, 15, "feeder after refusals")
    ok("refusals name the reason (other job, other cluster shape)")

    # a trainer that stops reading does not stall another
    tag = "stall"
    job_path, job = write_job("job-stall", files, epochs=200, global_batch_size=4)
    # (a long timeout: the stopped trainer must not be dropped as silent,
    # however slow a sanitizer build makes the other one)
    feeders, conns = start_feeders(job_path, 1, "ipc", tag, extra=("--report-s", "1", "--timeout-ms", "60000"))
    time.sleep(0.2)
    slow, slow_trace = start_trainer(conns, job, 0, 2, 1, tag, extra=("--credits", "2"))
    # stopped as soon as its first pieces are in its trace: a fixed sleep let
    # a fast machine take all 9000 pieces before the stop (0.26 s)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and slow.poll() is None:
        if os.path.exists(slow_trace) and os.path.getsize(slow_trace) > 0:
            break
        time.sleep(0.001)
    slow.send_signal(signal.SIGSTOP)
    time.sleep(0.05)
    ref = reference(job, [len(x) for x in ids], 2, 1)
    with open(slow_trace) as f:
        got = sum(1 for _ in f)
    if got >= len(ref[0]):
        slow.send_signal(signal.SIGCONT)
        fail("the slow trainer had all its %d pieces before it was stopped: the case tests nothing" % got)
    fast, fast_trace = start_trainer(conns, job, 1, 2, 1, tag)
    try:
        code = fast.wait(timeout=50)
    except subprocess.TimeoutExpired:
        slow.send_signal(signal.SIGCONT)
        fail("a stopped trainer stalled the other one")
    # keep the slow one stopped, the other done, past two of the feeder's
    # 1 s reports: one of them then covers a whole second with work left
    # and no credit
    time.sleep(2.3)
    slow.send_signal(signal.SIGCONT)
    if code != 0 or wait_all([slow], 30, "resumed trainer")[0] != 0:
        fail("trainers after a pause: " + read_log(tag, "trainer0") + read_log(tag, "trainer1"))
    wait_all(feeders, 15, "feeder after a pause")
    check_traces("pause", [slow_trace, fast_trace], ref, ids)
    ok("a trainer stopped mid-stream (after %d of %d pieces) does not stall another; both get exact data"
       % (got, len(ref[0])))
    # --report-s: progress lines while serving; the stopped trainer shows as
    # time waiting for credits
    reports = re.findall(r"served (\d+) pieces, (\d+) records \([0-9.]+ MB/s over the last \d+ s\), (\d+) of (\d+) "
                         r"trainers connected, waiting for credits (\d+)% of that time", read_log(tag, "feeder0"))
    if len(reports) < 2 or not any(int(r[4]) >= 90 and r[3] == "2" for r in reports) or \
            [int(r[1]) for r in reports] != sorted(int(r[1]) for r in reports):
        fail("--report-s 1: expected progress lines, one of them >= 90%% waiting for credits: %r" % reports)
    ok("--report-s: %d progress lines, the stopped trainer seen as %s%% waiting for credits"
       % (len(reports), max(int(r[4]) for r in reports)))

    # --step-ms: a stand-in step longer than the feeder's timeout keeps the
    # trainer connected (its heartbeats go out while it "computes"), the data
    # exact, and the steps take at least their time
    tag = "stepms"
    job_path, job = write_job("job-stepms", files, epochs=1, global_batch_size=50)
    feeders, conns = start_feeders(job_path, 1, "ipc", tag, extra=("--heartbeat-ms", "100", "--timeout-ms", "500"))
    time.sleep(0.2)
    t_start = time.monotonic()
    p, trace = start_trainer(conns, job, 0, 1, 1, tag, extra=("--step-ms", "700.5"))
    code = wait_all([p], 60, "trainer with --step-ms")[0]
    took = time.monotonic() - t_start
    wait_all(feeders, 15, "feeder of --step-ms")
    flog = read_log(tag, "feeder0")
    if code != 0 or "silent" in flog or "dropped" in flog:
        fail("--step-ms 700.5 against a feeder timing out at 500 ms: exit %d\n%s\n%s"
             % (code, read_log(tag, "trainer0"), flog))
    ref = reference(job, [len(x) for x in ids], 1, 1)
    check_traces("step-ms", [trace], ref, ids)
    if len(ref[0]) != 3 or took < 3 * 0.7005:
        fail("--step-ms 700.5: %d steps took %.2f s, expected 3 steps of at least 0.7005 s" % (len(ref[0]), took))
    ok("--step-ms 700.5: 3 steps in %.2f s (>= 2.10), the feeder (500 ms timeout) never found the trainer silent, "
       "trace exact" % took)

    # a killed feeder is reported by the trainer before its heartbeat
    # timeout (5 s here): the closed connection is what it reports, not the
    # silence (the time bound only has to beat the timeout, for loaded
    # machines and sanitizers)
    code, took, log = kill_feeder_under_trainer(files, "kill", ())
    if code != 1 or "connection closed" not in log or "silent for" in log or took >= 5:
        fail("killed feeder: exit %d after %.1f s:\n%s" % (code, took, log))
    ok("a killed feeder is reported at once, not after the 5 s heartbeat timeout (%.1f s): its connection closed"
       % took)
    # one that hangs (stopped: its connection stays open) within the timeout
    code, took, log = kill_feeder_under_trainer(files, "hung", ("--timeout-ms", "1500"), signal.SIGSTOP)
    if code != 1 or "silent for" not in log or not 1.0 <= took < 6:
        fail("hung feeder: exit %d after %.1f s:\n%s" % (code, took, log))
    ok("a hung feeder is reported within the heartbeat timeout (%.1f s)" % took)

    # a feeder killed mid-stream and started again (tcp): with --reconnect-s the
    # trainer asks the new process to resume where the old one stopped, and
    # its trace is still exactly the reference stream (2 feeders: the other
    # goes on meanwhile, its pieces waiting in the reorder window)
    tag = "rejoin"
    job_path, job = write_job("job-rejoin", files, epochs=1000, global_batch_size=6, shuffle=shuffle)
    feeders, conns = start_feeders(job_path, 2, "tcp", tag)  # the new process binds the same port
    time.sleep(0.2)
    p, trace = start_trainer(conns, job, 0, 1, 2, tag, extra=("--timeout-ms", "1000", "--reconnect-s", "30"))
    wait_for_log(tag, ("feeder0", "feeder1"), "worker 0 connected", p,
                 "rejoin: the trainer did not connect to both feeders")
    time.sleep(0.1)
    p.send_signal(signal.SIGSTOP)  # hold the stream mid-way while feeder 1 is replaced
    if p.poll() is not None:
        fail("rejoin: the trainer finished before its feeder could be killed")
    feeders[1].kill()
    feeders[1].wait()
    again = spawn([FEEDER, "--job", job_path, "--listen", conns[1], "--feeder-index", "1",
                   "--feeders", "2", "--threads", "2", "--heartbeat-ms", "200", "--timeout-ms", "5000"],
                  log=os.path.join(TMP, "%s-feeder1b.log" % tag))
    p.send_signal(signal.SIGCONT)
    code = wait_all([p], 120, "rejoin: trainer")[0]
    tlog = read_log(tag, "trainer0")
    if code != 0:
        fail("rejoin: trainer exited %d:\n%s" % (code, tlog[-3000:]))
    if wait_all([feeders[0], again], 15, "rejoin: feeders") != [0, 0]:
        fail("rejoin: a feeder failed:\n%s" % read_log(tag, "feeder1b"))
    check_traces("rejoin", [trace], reference(job, [len(x) for x in ids], 1, 2), ids)
    m = re.search(r"resume at piece (\d+)", read_log(tag, "feeder1b"))
    # where it resumes depends on how far the stream got (a slow build may
    # not be past piece 1 yet); it must be one of feeder 1's pieces
    if m is None or int(m.group(1)) % 2 != 1 or "is back after" not in tlog:
        fail("rejoin: expected a resume at one of feeder 1's pieces and the trainer's notice:\n%s\n%s"
             % (read_log(tag, "feeder1b"), tlog[-2000:]))
    with open(trace) as f:
        summary = [json.loads(x) for x in f if '"summary"' in x][0]["summary"]
    if summary["feeder_rejoins"] != 1:
        fail("rejoin: summary says %r rejoins" % summary["feeder_rejoins"])
    ok("a feeder killed mid-stream and restarted: the trainer resumed it at piece %s, trace exact (%d pieces)"
       % (m.group(1), summary["pieces"]))

    # a trainer stopped past the feeders' timeout is dropped by both; when it
    # runs again it finds them silent, and both take it back where it was
    tag = "dropped"
    job, feeders, p, trace = rejoining_pair(tag, files, shuffle, "worker 0 connected",
                                            "dropped: the trainer did not connect to both feeders")
    p.send_signal(signal.SIGSTOP)
    if p.poll() is not None:
        fail("dropped: the trainer finished before it could be stopped")
    wait_for_log(tag, ("feeder0", "feeder1"), "timed out after", None,
                 "dropped: the feeders did not drop the stopped trainer")
    p.send_signal(signal.SIGCONT)
    if wait_all([p], 120, "dropped: trainer") != [0] or wait_all(feeders, 15, "dropped: feeders") != [0, 0]:
        fail("dropped: a process failed:\n%s" % read_log(tag, "trainer0")[-3000:])
    check_traces("dropped", [trace], reference(job, [len(x) for x in ids], 1, 2), ids)
    resumed = [re.findall(r"connected \(\d+ credits, resume at piece (\d+)\)", read_log(tag, "feeder%d" % j))
               for j in (0, 1)]
    if any(len(r) != 2 or r[0] != "0" or int(r[1]) % 2 != j for j, r in enumerate(resumed)):
        fail("dropped: expected each feeder to take the trainer back at one of its own pieces: %r" % resumed)
    ok("a trainer dropped by both feeders while stopped is taken back at pieces %s and %s, trace exact"
       % (resumed[0][1], resumed[1][1]))

    # shared memory and a rejoin to the same feeder process: feeder 1 stopped,
    # so the trainer holds feeder 0's piece of the next step while it waits
    # for feeder 1's; the trainer is then stopped until feeder 0 drops it.
    # When it rejoins feeder 0 it must copy that piece out of the shared
    # memory first: feeder 0 reuses the old connection's buffers as soon as
    # it has the new HELLO (without the copy the step's ids come out wrong)
    tag = "shmrejoin"
    job, feeders, p, trace = rejoining_pair(tag, files, shuffle, "pieces through shared memory",
                                            "shmrejoin: the trainer did not map both feeders' memory")
    feeders[1].send_signal(signal.SIGSTOP)
    time.sleep(0.5)  # the trainer runs out of feeder 1's pieces, holding feeder 0's next one
    p.send_signal(signal.SIGSTOP)
    if p.poll() is not None:
        fail("shmrejoin: the trainer finished before it could be stopped")
    wait_for_log(tag, ("feeder0",), "timed out after", None, "shmrejoin: feeder 0 did not drop the stopped trainer")
    p.send_signal(signal.SIGCONT)
    wait_for_log(tag, ("trainer0",), "is back after", p, "shmrejoin: the trainer did not rejoin feeder 0")
    feeders[1].send_signal(signal.SIGCONT)
    if wait_all([p], 120, "shmrejoin: trainer") != [0] or wait_all(feeders, 15, "shmrejoin: feeders") != [0, 0]:
        fail("shmrejoin: a process failed:\n%s" % read_log(tag, "trainer0")[-3000:])
    check_traces("shmrejoin", [trace], reference(job, [len(x) for x in ids], 1, 2), ids)
    resumed = re.findall(r"connected \(\d+ credits, resume at piece (\d+)\)", read_log(tag, "feeder0"))
    rows, shared = shm_pieces(trace)
    if len(resumed) != 2 or int(resumed[1]) % 2 != 0 or shared == 0:
        fail("shmrejoin: expected feeder 0 to take the trainer back once, in shared memory: %r, %d of %d shared" %
             (resumed, shared, rows))
    ok("a trainer rejoining a live feeder keeps the shared piece it held (resumed at piece %s), trace exact"
       % resumed[1])

    # a trainer killed and started again: once the old connection has been
    # silent for 2.5 heartbeats (0.5 s here) the feeder gives its place to the
    # new one instead of refusing it until the timeout (60 s here)
    tag = "replace"
    job_path, job = write_job("job-replace", files, epochs=1000, global_batch_size=6)
    feeders, conns = start_feeders(job_path, 1, "ipc", tag, extra=("--timeout-ms", "60000"))
    time.sleep(0.2)
    p, _ = start_trainer(conns, job, 0, 1, 2, tag)
    wait_for_log(tag, ("feeder0",), "worker 0 connected", p, "replace: the first trainer did not connect")
    p.kill()
    p.wait()
    time.sleep(1.0)
    p, trace = start_trainer(conns, job, 0, 1, 2, tag + "b")
    if wait_all([p], 120, "replace: trainer") != [0] or wait_all(feeders, 15, "replace: feeder") != [0]:
        fail("replace: a process failed:\n%s\n%s" % (read_log(tag + "b", "trainer0")[-2000:],
                                                      read_log(tag, "feeder0")[-2000:]))
    check_traces("replace", [trace], reference(job, [len(x) for x in ids], 1, 2), ids)
    # the killed trainer's connection is gone: either the feeder's next send
    # to it failed (it is dropped as unreachable at once), or the new HELLO
    # came first and took the place of the silent one
    flog = read_log(tag, "feeder0")
    if "takes the place of one silent for" not in flog and "(Host unreachable) and was dropped" not in flog:
        fail("replace: the feeder did not log the replacement:\n%s" % flog)
    ok("a killed trainer's replacement is served from the start 1 s later, not refused until the timeout")

    # a worker that connects again after its END gets the stream and END
    # again, and the feeder still waits for the other worker before it
    # exits (it counted ENDs sent, so the second one let it stop early)
    tag = "again"
    job_path, job = write_job("job-again", files, epochs=300, global_batch_size=6)
    feeders, conns = start_feeders(job_path, 1, "ipc", tag, extra=("--timeout-ms", "60000"))
    time.sleep(0.2)
    slow, slow_trace = start_trainer(conns, job, 1, 2, 1, tag + "w1")
    wait_for_log(tag, ("feeder0",), "worker 1 connected", slow, "again: worker 1 did not connect")
    slow.send_signal(signal.SIGSTOP)
    runs = []
    for k in ("a", "b"):
        p, trace = start_trainer(conns, job, 0, 2, 1, tag + "w0" + k)
        if wait_all([p], 60, "again: worker 0") != [0]:
            fail("again: worker 0 (%s) failed:\n%s" % (k, read_log(tag + "w0" + k, "trainer0")))
        runs.append(trace)
    time.sleep(0.5)
    alive = feeders[0].poll() is None
    slow.send_signal(signal.SIGCONT)
    if not alive:
        fail("again: the feeder exited while worker 1 was still mid-stream:\n%s" % read_log(tag, "feeder0")[-2000:])
    if wait_all([slow], 60, "again: worker 1") != [0] or wait_all(feeders, 15, "again: feeder") != [0]:
        fail("again: a process failed:\n%s" % read_log(tag, "feeder0")[-2000:])
    ref = reference(job, [len(x) for x in ids], 2, 1)
    for trace in runs:
        check_traces("again (worker 0)", [trace], {0: ref[0]}, ids)
    check_traces("again (worker 1)", [None, slow_trace], ref, ids)
    ok("a worker served twice to its END: the feeder still waits for the other worker, all traces exact")

    # ... and one that does not come back fails the trainer once the wait is over
    code, took, log = kill_feeder_under_trainer(files, "gone", ("--reconnect-s", "2"))
    if code != 1 or "connection closed" not in log or "did not come back within 2.0 s" not in log or \
            not 2 <= took < 6:
        fail("feeder gone for good: exit %d after %.1f s:\n%s" % (code, took, log))
    ok("a feeder that does not come back fails the trainer once the wait is over (%.1f s)" % took)

    left = harness.running()
    harness.stop_all()
    if left:
        fail("%d processes were still running at the end: %s" % (len(left), [p.args[0] for p in left]))
    print("%d passed, 0 failed" % harness.passed())


if __name__ == "__main__":
    try:
        main()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
