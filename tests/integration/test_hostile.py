#!/usr/bin/env python3
"""Integration: a feeder against hostile peers and unlucky operators (issue
#12). Real sluice-feeder and sluice-trainer processes, and rogue_peer, a raw
wire peer that sends whatever HELLO it is told, over real ZeroMQ sockets.

Time bounds here only tell "at once" from "never" (or from the 30-60 s the
old code took): they are generous, for sanitizers on a loaded machine.

Usage: test_hostile.py BUILD_DIR     (prints "N passed, 0 failed" at the end)
"""
import json
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bed  # noqa: E402
import harness  # noqa: E402
from bed import gen, log_path, read_log, wait, wait_for_log, write_job  # noqa: E402
from harness import fail, ok, spawn  # noqa: E402

bed.setup(sys.argv[1], "hostile")
RECORD, FEEDER, TRAINER, ROGUE, TMP = bed.RECORD, bed.FEEDER, bed.TRAINER, bed.ROGUE, bed.TMP


def start_feeder(tag, job_path, extra=()):
    sock = "ipc://%s/%s.sock" % (TMP, tag)
    p = spawn([FEEDER, "--job", job_path, "--listen", sock, "--threads", "1", "--heartbeat-ms", "200",
               "--timeout-ms", "3000"] + list(extra), log=log_path(tag, "feeder"))
    wait_for_log(tag, "feeder", "serving job", p, "%s: the feeder did not start" % tag)
    return p, sock


def rogue(sock, job, worker, workers, replicas, resume, *opts, timeout=60):
    """rogue_peer's answers, one dict per HELLO."""
    p = subprocess.run([ROGUE, sock, job, str(worker), str(workers), str(replicas), str(resume)] + list(opts),
                       capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        fail("rogue_peer exited %d: %s" % (p.returncode, p.stderr))
    return [json.loads(x) for x in p.stdout.splitlines()]


def vm_kb(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def stop(p, what, timeout=10, want=None):
    """SIGTERM p and wait: its exit code (fails past the timeout, or if it is not want)."""
    p.send_signal(signal.SIGTERM)
    try:
        code = p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        fail("%s did not stop within %d s of SIGTERM" % (what, timeout))
    if want is not None and code != want:
        fail("%s exited %d, expected %d" % (what, code, want))
    return code


def trainer(tag, sock, job, W=1, R=1, w=0, extra=()):
    trace = os.path.join(TMP, "%s-trace%d.jsonl" % (tag, w))
    p = spawn([TRAINER, "--connect", sock, "--job", job["name"], "--worker", str(w), "--workers", str(W),
               "--replicas", str(R), "--trace", trace, "--heartbeat-ms", "200", "--timeout-ms", "3000"] + list(extra),
              log=log_path(tag, "trainer%d" % w), stdout=subprocess.DEVNULL)
    return p, trace


def trace_lines(path):
    with open(path) as f:
        return [json.loads(x) for x in f]


# ---- item 1: a HELLO's resume point ----

def case_resume(files):
    harness.case()
    tag = "resume"
    job_path, job = write_job("job-" + tag, files, epochs=0)  # forever
    f, sock = start_feeder(tag, job_path)
    # 2^62 cannot have been reached: refused at once, the feeder stays responsive
    got = rogue(sock, job["name"], 0, 1, 1, 1 << 62, "--wait-ms", "10000")[0]
    if got["reply"] != "REFUSE" or "resume" not in got.get("reason", "") or got["ms"] > 5000:
        fail("resume 2^62 on an endless job: expected a prompt REFUSE naming the resume point, got %s" % got)
    # a far but reachable point: whole epochs skipped arithmetically (2^40 pieces
    # of 19 steps per epoch: one at a time would take hours)
    got = rogue(sock, job["name"], 0, 1, 1, 1 << 40, "--wait-ms", "10000", "--take", "3", "--bye", "1")[0]
    if got["reply"] != "WELCOME" or got.get("pieces") != 3 or got["ms"] > 5000:
        fail("resume 2^40 on an endless job: expected a prompt WELCOME and 3 pieces, got %s" % got)
    far = got["ms"]
    # and a trainer from the start is still served, the feeder stops on SIGTERM
    got = rogue(sock, job["name"], 0, 1, 1, 0, "--wait-ms", "3000", "--take", "3")[0]
    if got["reply"] != "WELCOME" or got.get("pieces") != 3:
        fail("resume: a HELLO from the start after the far ones: got %s" % got)
    stop(f, "resume: feeder", want=0)
    ok("a HELLO resuming at 2^62 is refused at once, one at 2^40 served in %.0f ms (whole epochs skipped)" % far)

    # finite job: past its last piece is refused; exactly at the end is an END
    harness.case()
    tag = "resume2"
    job_path, job = write_job("job-" + tag, files, epochs=1000000000000)
    f, sock = start_feeder(tag, job_path)
    total = 1000000000000 * 19  # epochs x steps (150 records / 8, 19 steps, R = 1)
    got = rogue(sock, job["name"], 0, 1, 1, total + 1, "--wait-ms", "3000")[0]
    if got["reply"] != "REFUSE" or str(total) not in got.get("reason", ""):
        fail("resume past the end of a finite job: expected a REFUSE naming its %d pieces, got %s" % (total, got))
    got = rogue(sock, job["name"], 0, 1, 1, total - 2, "--wait-ms", "10000", "--take", "5")[0]
    if got["reply"] != "WELCOME" or got.get("pieces") != 2 or got["ms"] > 5000 or got.get("end") != total:
        fail("resume 2 pieces before the end of 10^12 epochs: expected WELCOME and the last 2 pieces, got %s" % got)
    stop(f, "resume2: feeder")
    ok("a finite job of 10^12 epochs: resuming past its end is refused, 2 pieces before it gets those 2 at once")


# ---- item 2: the cluster shape and the piece memory ----

def case_shape(files):
    harness.case()
    tag = "shape"
    job_path, job = write_job("job-" + tag, files, shard_policy="data", epochs=1)
    f, sock = start_feeder(tag, job_path)
    before = vm_kb(f.pid, "VmRSS")
    got = rogue(sock, job["name"], 0, 65536, 1024, 0, "--wait-ms", "10000")[0]
    after = vm_kb(f.pid, "VmRSS")
    peak = vm_kb(f.pid, "VmHWM")
    if got["reply"] != "REFUSE" or "piece memory" not in got.get("reason", ""):
        fail("65536 x 1024 workers: expected a REFUSE naming the piece memory bound, got %s" % got)
    if peak > before + 64 * 1024:
        fail("65536 x 1024 workers: the feeder's peak resident memory grew from %d to %d kB" % (before, peak))
    # an unconsumed client fixes nothing: a 4 x 2 HELLO that takes no piece and goes
    got = rogue(sock, job["name"], 0, 4, 2, 0, "--wait-ms", "3000")[0]
    if got["reply"] != "WELCOME":
        fail("a 4 x 2 HELLO: expected a WELCOME, got %s" % got)
    # once it has been silent past its grace (2.5 s for a HELLO without
    # heartbeats), the real 1 x 2 trainer takes the job
    time.sleep(2.7)
    p, trace = trainer(tag, sock, job, W=1, R=2)
    if wait(p, 30, "shape: the real trainer") != 0:
        fail("shape: the real 1 x 2 trainer failed after a 4 x 2 one left unconsumed:\n" + read_log(tag, "trainer0"))
    if wait(f, 15, "shape: feeder") != 0:
        fail("shape: the feeder failed:\n" + read_log(tag, "feeder"))
    rows = sum(x["size"] for x in trace_lines(trace)[:-1])
    if rows != 150:
        fail("shape: the real trainer got %d rows of 150" % rows)
    ok("a 65536 x 1024 HELLO is refused by the piece memory bound (RSS %d -> %d kB, peak %d); a 4 x 2 one that "
       "took nothing does not fix the shape for the real 1 x 2 trainer" % (before, after, peak))

    # a consumed shape stays: the real trainer is refused while it is served
    harness.case()
    tag = "shape2"
    job_path, job = write_job("job-" + tag, files, epochs=0)
    f, sock = start_feeder(tag, job_path)
    got = rogue(sock, job["name"], 0, 2, 1, 0, "--wait-ms", "3000", "--take", "2")[0]
    if got["reply"] != "WELCOME" or got.get("pieces") != 2:
        fail("shape2: a 2 x 1 HELLO taking 2 pieces: got %s" % got)
    got = rogue(sock, job["name"], 0, 1, 2, 0, "--wait-ms", "3000")[0]
    if got["reply"] != "REFUSE" or "2 x 1" not in got.get("reason", ""):
        fail("shape2: after a 2 x 1 trainer consumed pieces, a 1 x 2 HELLO: expected REFUSE, got %s" % got)
    stop(f, "shape2: feeder")

    # the feeder's own --workers/--replicas fix the shape from the start
    harness.case()
    tag = "shape3"
    job_path, job = write_job("job-" + tag, files, epochs=1)
    f, sock = start_feeder(tag, job_path, extra=("--workers", "1", "--replicas", "2"))
    got = rogue(sock, job["name"], 0, 4, 2, 0, "--wait-ms", "3000")[0]
    if got["reply"] != "REFUSE" or "1 x 2" not in got.get("reason", ""):
        fail("shape3: a feeder started with --workers 1 --replicas 2 took a 4 x 2 HELLO: %s" % got)
    p, trace = trainer(tag, sock, job, W=1, R=2)
    if wait(p, 30, "shape3: trainer") != 0 or wait(f, 15, "shape3: feeder") != 0:
        fail("shape3: the 1 x 2 job failed:\n" + read_log(tag, "trainer0") + read_log(tag, "feeder"))
    ok("a shape taken by a consuming trainer stays; --workers/--replicas on the feeder fix it from the start")

    # so do the job file's workers/replicas: a stray 1 x 1 trainer, there
    # first, is refused naming both shapes; the job's 2 x 1 workers get
    # every row
    harness.case()
    tag = "shape5"
    job_path, job = write_job("job-" + tag, files, epochs=1, workers=2, replicas=1)
    f, sock = start_feeder(tag, job_path)
    got = rogue(sock, job["name"], 0, 1, 1, 0, "--wait-ms", "3000")[0]
    want = ("cluster shape disagrees: this trainer says 1 workers x 1 replicas, the job runs with 2 x 1 "
            "(the feeder's --workers and --replicas, or its job's)")
    if got["reply"] != "REFUSE" or got.get("reason") != want:
        fail("shape5: a job file with workers 2, replicas 1 took a 1 x 1 HELLO: %s" % got)
    stray, _ = trainer(tag, sock, job, W=1, R=1, w=0)
    if wait(stray, 30, "shape5: the stray trainer") != 1 or want not in read_log(tag, "trainer0"):
        fail("shape5: the stray 1 x 1 trainer should fail with the refusal:\n" + read_log(tag, "trainer0"))
    ps = [trainer(tag, sock, job, W=2, R=1, w=w) for w in range(2)]
    for w, (p, _) in enumerate(ps):
        if wait(p, 30, "shape5: worker %d" % w) != 0:
            fail("shape5: worker %d of the job's 2 x 1 failed:\n%s" % (w, read_log(tag, "trainer%d" % w)))
    if wait(f, 15, "shape5: feeder") != 0:
        fail("shape5: the feeder failed:\n" + read_log(tag, "feeder"))
    rows = sum(x["size"] for _, t in ps for x in trace_lines(t)[:-1])
    if rows != 150:
        fail("shape5: the job's two workers got %d rows of 150" % rows)
    ok("the job file's workers/replicas fix the shape: a stray 1 x 1 trainer is refused naming both shapes, "
       "the job's 2 x 1 workers get all 150 rows")

    # too small a bound for the real job: refused with the figures, at start
    harness.case()
    tag = "shape4"
    job_path, job = write_job("job-" + tag, files, epochs=1)
    f, sock = start_feeder(tag, job_path, extra=("--piece-memory", "4096"))
    got = rogue(sock, job["name"], 0, 1, 1, 0, "--wait-ms", "3000")[0]
    if got["reply"] != "REFUSE" or "--piece-memory" not in got.get("reason", ""):
        fail("shape4: a 4096-byte --piece-memory: expected a REFUSE saying so, got %s" % got)
    stop(f, "shape4: feeder")
    ok("--piece-memory bounds the pool; a job over it is refused with the figures: %s" % got["reason"])


# ---- items 6 and 7: errors while serving reach the trainer, and the exit status ----

def case_serving_errors():
    # a 3 MB text line passes the scan but not a 1 MB piece buffer
    harness.case()
    tag = "bigline"
    path = os.path.join(TMP, "lines.txt")
    with open(path, "w") as f:
        f.write("alpha\nbeta\n" + "x" * 3000000 + "\ngamma\n")
    job_path, job = write_job("job-" + tag, [path], format="text", features={}, global_batch_size=1, epochs=1)
    del job["features"]
    f, sock = start_feeder(tag, job_path)
    p, trace = trainer(tag, sock, job, extra=("--trace-feature", "line"))
    code = wait(p, 30, "bigline: trainer")
    fcode = wait(f, 30, "bigline: feeder")
    tlog, flog = read_log(tag, "trainer0"), read_log(tag, "feeder")
    want = "%s: line 2 at byte 11" % path
    if code != 1 or want not in tlog:
        fail("bigline: the trainer should fail with '%s', exit %d:\n%s" % (want, code, tlog))
    if fcode != 1 or want not in flog or "every worker has its data" in flog:
        fail("bigline: the feeder should exit 1 naming '%s', exit %d:\n%s" % (want, fcode, flog))
    ok("a text line too large for its piece: trainer and feeder fail (exit 1) with '%s'" % want)

    # a job whose WELCOME cannot be encoded (a global batch over the wire's
    # 2^24 rows): every HELLO is refused with the reason, at once
    harness.case()
    tag = "welcome"
    files = gen("w", 20, 1)
    job_path, job = write_job("job-" + tag, files, global_batch_size=(1 << 24) + 1, epochs=1)
    f, sock = start_feeder(tag, job_path, extra=("--max-piece-bytes", "4096"))
    t0 = time.time()
    p, _ = trainer(tag, sock, job)
    code = wait(p, 60, "welcome: trainer")
    took = time.time() - t0
    tlog = read_log(tag, "trainer0")
    if code != 1 or "cannot describe the job on the wire" not in tlog or "16777217" not in tlog or took > 20:
        fail("welcome: expected a prompt refusal naming the batch of 16777217, exit %d after %.1f s:\n%s"
             % (code, took, tlog))
    stop(f, "welcome: feeder")
    ok("a WELCOME that cannot be encoded is a REFUSE with the reason (%.1f s), not 30 s of silence" % took)


def case_startup_refusals():
    harness.case()
    tag = "unreadable"
    job_path, job = write_job("job-" + tag, ["/proc/self/mem"], epochs=1)
    sock = "ipc://%s/%s.sock" % (TMP, tag)
    f = spawn([FEEDER, "--job", job_path, "--listen", sock, "--threads", "1", "--timeout-ms", "3000"],
              log=log_path(tag, "feeder"))
    p, _ = trainer(tag, sock, job)
    code = wait(p, 20, "unreadable: trainer")
    tlog = read_log(tag, "trainer0")
    if code != 1 or "refused: read(/proc/self/mem): Input/output error" not in tlog:
        fail("unreadable: the trainer should be refused with the read error, exit %d:\n%s" % (code, tlog))
    if wait(f, 20, "unreadable: feeder") != 1:
        fail("unreadable: the feeder should exit 1:\n" + read_log(tag, "feeder"))

    harness.case()
    tag = "nopool"
    files = gen("np", 20, 1)
    job_path, job = write_job("job-" + tag, files, epochs=1)
    sock = "ipc://%s/%s.sock" % (TMP, tag)
    f = spawn([FEEDER, "--job", job_path, "--listen", sock, "--threads", "1", "--timeout-ms", "3000",
               "--workers", "1", "--replicas", "1", "--piece-memory", "4096"], log=log_path(tag, "feeder"))
    p, _ = trainer(tag, sock, job)
    code = wait(p, 20, "nopool: trainer")
    tlog = read_log(tag, "trainer0")
    if code != 1 or "refused: --workers 1 --replicas 1: 1 workers x 1 replicas need" not in tlog:
        fail("nopool: the trainer should be refused with the piece memory figures, exit %d:\n%s" % (code, tlog))
    if wait(f, 20, "nopool: feeder") != 1:
        fail("nopool: the feeder should exit 1:\n" + read_log(tag, "feeder"))
    # a compressed shard that inflates past the job's inflate_cache_bytes
    harness.case()
    tag = "inflate"
    out = os.path.join(TMP, "gz")
    subprocess.run([RECORD, "gen", "--output-dir", out, "--records", "3000", "--shards", "1", "--seed", "3",
                    "--image-bytes", "600", "--compression", "gzip", "--prefix", "part"], check=True,
                   capture_output=True)
    gz = [os.path.join(out, x) for x in sorted(os.listdir(out))]
    job_path, job = write_job("job-" + tag, gz, epochs=1, inflate_cache_bytes=1 << 20,
                              features={"id": {"dtype": "int64", "shape": []}})
    sock = "ipc://%s/%s.sock" % (TMP, tag)
    f = spawn([FEEDER, "--job", job_path, "--listen", sock, "--threads", "1", "--timeout-ms", "3000"],
              log=log_path(tag, "feeder"))
    p, _ = trainer(tag, sock, job)
    code = wait(p, 20, "inflate: trainer")
    tlog = read_log(tag, "trainer0")
    if code != 1 or "refused: %s: inflates past the limit of 1048576 bytes" % gz[0] not in tlog:
        fail("inflate: a 1.9 MB-inflated shard under inflate_cache_bytes 1 MiB: expected a REFUSE naming it, "
             "exit %d:\n%s" % (code, tlog))
    if wait(f, 20, "inflate: feeder") != 1:
        fail("inflate: the feeder should exit 1:\n" + read_log(tag, "feeder"))
    job_path, job = write_job("job-" + tag + "2", gz, epochs=1, inflate_cache_bytes=4 << 20,
                              features={"id": {"dtype": "int64", "shape": []}})
    f, sock = start_feeder(tag + "2", job_path)
    p, trace = trainer(tag + "2", sock, job)
    if wait(p, 30, "inflate2: trainer") != 0 or wait(f, 20, "inflate2: feeder") != 0:
        fail("inflate2: with inflate_cache_bytes 4 MiB the shard should be served:\n" + read_log(tag + "2", "feeder"))
    if sum(x["size"] for x in trace_lines(trace)[:-1]) != 3000:
        fail("inflate2: expected 3000 rows")
    ok("start-up failures (an unreadable file, a pool over --piece-memory, a shard over inflate_cache_bytes) are "
       "REFUSEd with the reason; a larger inflate_cache_bytes serves the shard")


# ---- item 10: rogue messages cannot flood the log; item 11: the frame limit ----

def case_log_flood(files):
    harness.case()
    tag = "flood"
    job_path, job = write_job("job-" + tag, files, epochs=1)
    stats = os.path.join(TMP, "flood-stats.json")
    f, sock = start_feeder(tag, job_path, extra=("--stats", stats))
    answers = rogue(sock, "no-such-job", 0, 1, 1, 0, "--garbage", "3000", "--hellos", "300", "--wait-ms", "3000")
    if len(answers) != 300 or any(a["reply"] != "REFUSE" for a in answers):
        fail("flood: 300 HELLOs for another job: expected 300 REFUSEs, got %s" % answers[:3])
    stop(f, "flood: feeder", want=0)
    flog = read_log(tag, "feeder")
    lines = flog.splitlines()
    shown_ref = sum("refused a trainer: job 'no-such-job'" in x for x in lines)
    shown_bad = sum("bad message from an unknown peer" in x for x in lines)
    held_ref = sum(int(m.group(1)) for m in re.finditer(r"(\d+) more refusals were not logged", flog))
    held_bad = sum(int(m.group(1)) for m in re.finditer(r"(\d+) more malformed or unexpected messages were not logged",
                                                          flog))
    if len(lines) > 120:
        fail("flood: 3300 rogue messages made %d log lines:\n%s" % (len(lines), "\n".join(lines[:40])))
    if shown_ref + held_ref != 300 or shown_bad + held_bad != 3000:
        fail("flood: refusals %d logged + %d held (want 300), bad messages %d + %d (want 3000):\n%s"
             % (shown_ref, held_ref, shown_bad, held_bad, flog[-3000:]))
    with open(stats) as fh:
        refused = json.load(fh)["refused"]
    if refused != 300:
        fail("flood: --stats counts %d refusals, want 300" % refused)
    ok("3,000 malformed frames and 300 refused HELLOs: %d log lines, every one counted (%d + %d refusals, "
       "%d + %d bad messages)" % (len(lines), shown_ref, held_ref, shown_bad, held_bad))

    # the feeder reads header frames only: 64 KiB is the most it takes
    harness.case()
    tag = "frames"
    job_path, job = write_job("job-" + tag, files, epochs=1)
    f, sock = start_feeder(tag, job_path)
    got = rogue(sock, job["name"], 0, 1, 1, 0, "--big", "65536", "--wait-ms", "3000", "--bye", "1")[0]
    if got["reply"] != "WELCOME" or "bad message from an unknown peer" not in read_log(tag, "feeder"):
        fail("frames: a 65,536-byte frame is read (a bad message), the HELLO after it answered: got %s" % got)
    # ZeroMQ drops the connection on the larger frame before the feeder
    # sees it; the DEALER connects again and its HELLO goes through then
    got = rogue(sock, job["name"], 0, 1, 1, 0, "--big", "65537", "--wait-ms", "3000", "--bye", "1")[0]
    stop(f, "frames: feeder")
    bad = read_log(tag, "feeder").count("bad message from an unknown peer")
    if got["reply"] != "WELCOME" or bad != 1:
        fail("frames: a 65,537-byte frame should be dropped unread (1 bad message logged in all, got %d), "
             "the HELLO after it answered (got %s)" % (bad, got))
    ok("the feeder reads frames up to 64 KiB (SL_WIRE_MAX_HEADER); ZeroMQ drops a larger one unread")


# ---- item 9: --cluster is never ignored ----

def case_cluster_flags(files):
    harness.case()
    job_path, job = write_job("job-cluster", files, epochs=1)
    sock = "ipc://%s/cluster.sock" % TMP
    for spec in ("{not json", json.dumps({"cluster": {"feeder": [sock]}, "task": {"type": "feeder", "index": 0}})):
        p = subprocess.run([FEEDER, "--job", job_path, "--listen", sock, "--cluster", spec], capture_output=True,
                           text=True, timeout=20)
        if p.returncode != 2 or "--cluster" not in p.stderr or "not both" not in p.stderr:
            fail("cluster: --cluster %r with --listen: expected exit 2 saying not both, got %d: %s"
                 % (spec, p.returncode, p.stderr))
    p = subprocess.run([FEEDER, "--job", job_path, "--cluster", "{not json"], capture_output=True, text=True,
                       timeout=20)
    if p.returncode != 2:
        fail("cluster: an invalid --cluster alone: expected exit 2, got %d: %s" % (p.returncode, p.stderr))
    for bad in (["--workers", "2"], ["--replicas", "2"], ["--piece-memory", "1"], ["--piece-memory", "-5"],
                ["--piece-memory", "1P"], ["--piece-memory", "99999999999999999999"], ["--piece-memory", ""],
                ["--piece-memory", "513G"], ["--workers", "0", "--replicas", "1"]):
        p = subprocess.run([FEEDER, "--job", job_path, "--listen", sock] + bad, capture_output=True, text=True,
                           timeout=20)
        if p.returncode != 2 or not p.stderr.startswith("sluice-feeder: --"):
            fail("cluster: %s: expected a usage error (exit 2), got %d: %s" % (bad, p.returncode, p.stderr))
    # the trainer's --cluster: never ignored either
    for extra in (["--connect", sock, "--cluster", json.dumps({"cluster": {"feeder": [sock]}})],
                  ["--worker", "0", "--workers", "1", "--ring", sock, "--cluster", "{not json"]):
        p = subprocess.run([TRAINER, "--job", "j"] + extra, capture_output=True, text=True, timeout=20)
        if p.returncode != 2 or "sluice-trainer: " not in p.stderr:
            fail("cluster: sluice-trainer %s: expected a usage error (exit 2), got %d: %s"
                 % (extra, p.returncode, p.stderr))
    ok("--cluster with --listen/--connect, an invalid --cluster, and bad --workers/--replicas/--piece-memory "
       "are usage errors")


# ---- version 4's HELLO fields: share and version ----

def case_hello_v4(files):
    harness.case()
    tag = "v4"
    job_path, job = write_job("job-" + tag, files, epochs=1)
    f, sock = start_feeder(tag, job_path, extra=("--feeder-index", "0", "--feeders", "2"))
    name = job["name"]
    # a takeover of feeder 1's share: served (by copy)
    got = rogue(sock, name, 0, 1, 1, 0, "--share", "1", "--take", "3", "--bye", "1", "--incarnation", "7")[0]
    if got["reply"] != "WELCOME" or got.get("pieces") != 3:
        fail("v4: a HELLO for feeder 1's share: expected a WELCOME and 3 pieces, got %s" % got)
    # shares past the job's feeders: refused in words
    for share in ("2", "4095"):
        got = rogue(sock, name, 0, 1, 1, 0, "--share", share)[0]
        if got["reply"] != "REFUSE" or "asks for feeder %s's share, but the job has 2 feeders" % share not in \
                got.get("reason", ""):
            fail("v4: share %s of 2 feeders: expected a REFUSE naming it, got %s" % (share, got))
    # past the wire's limit (4096 feeders), or -1: a malformed HELLO, no answer
    for share in ("4096", "4294967295"):  # the second: -1 as a u32
        got = rogue(sock, name, 0, 1, 1, 0, "--share", share, "--wait-ms", "1000")[0]
        if got["reply"] != "none":
            fail("v4: share %s: a malformed HELLO should get no answer, got %s" % (share, got))
    # a trainer of another protocol version: refused in words, at once
    for version in ("3", "5", "65535"):
        got = rogue(sock, name, 0, 1, 1, 0, "--version", version, "--wait-ms", "3000")[0]
        if got["reply"] != "REFUSE" or "this feeder speaks protocol version 4, the trainer %s" % version not in \
                got.get("reason", ""):
            fail("v4: a version %s HELLO: expected a REFUSE naming both versions, got %s" % (version, got))
    # and the feeder still serves the job's own share
    got = rogue(sock, name, 0, 1, 1, 0, "--take", "2", "--bye", "1")[0]
    if got["reply"] != "WELCOME" or got.get("pieces") != 2:
        fail("v4: the own share after the hostile HELLOs: got %s" % got)
    stop(f, "v4: feeder")
    ok("version 4 HELLO: a takeover share served; shares 2 and 4095 of 2 feeders refused in words; 4096 and 2^32 - 1 "
       "malformed (no answer); versions 3, 5 and 65535 refused naming both versions; the own share still served")


def main():
    files = gen("a", 150, 5)
    case_hello_v4(files)
    case_resume(files)
    case_shape(files)
    case_serving_errors()
    case_startup_refusals()
    case_log_flood(files)
    case_cluster_flags(files)
    bed.finish()


if __name__ == "__main__":
    try:
        main()
    finally:
        bed.cleanup()
