#!/usr/bin/env python3
"""Integration: the parameter servers' integrity and runs that diverge
(issue #24 items 1, 2 and 5), with real processes.

- A rogue peer against a real ps task: a description with control bytes,
  one naming no input width, another model's; pushes of NaNs, infinities,
  version 2^63, a stray fourth frame, a short body: each refused with its
  ERROR (counted), nothing applied (the values and the global step stay at
  0), control bytes escaped in the ps task's log; then a real worker trains
  on that same server to its end, and the server's summary is ok.
- A run whose loss diverges (--lr 1000 --momentum 0.99) stops at step 1
  naming it (exit 1, "ok":false); --check-numerics finite lets it run.
- A NaN in the input at row 20 (float32 .npy arrays): mirrored, tower and
  ps runs stop at epoch 0 step 2 naming it; in ps mode the server refuses
  the NaN gradient and its summary says the worker failed;
  --check-numerics off trains on (the summary's loss is null).
- A ps task killed (SIGKILL) mid-run and restarted on its endpoint: both
  workers fail naming the restart (both incarnations); the new server's
  summary is not ok (the workers left before their final pull).
- A worker killed mid-run and started again (issue #24 item 3): it resumes
  at the position the servers recorded; the global step and both traces
  are the uninterrupted run's. Killed and never back: the survivor exits 1
  naming it, lost_workers 1.
- CURVE on the ps link: a ps task with --curve-key serves workers holding
  the job's key; a rogue without it gets no answer at all.

Usage: test_ps_integrity.py BUILD_DIR     (prints "N passed, 0 failed")
"""
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

BUILD = os.path.abspath(sys.argv[1])
RECORD = os.path.join(BUILD, "tools", "sluice-record")
FEEDER = os.path.join(BUILD, "feeder", "sluice-feeder")
TRAINER = os.path.join(BUILD, "trainer", "sluice-trainer")
ROGUE = os.path.join(BUILD, "tests", "rogue_ps")
TMP = tempfile.mkdtemp(prefix="sluice-psi-")
PASSED = 0
PROCS = []

SMALL_MODEL = ["--model", "mlp", "--hidden", "16", "--lr", "0.05", "--momentum", "0.9", "--seed", "7",
               "--input", "image", "--label", "label", "--classes", "3"]
DESC = ("inputs=12 classes=3 hidden=16 seed=7 lr=0.0500000007 momentum=0.899999976 servers=1 "
        "placement=round-robin")
NPARAMS = 12 * 16 + 16 + 16 * 3 + 3


def fail(msg):
    for p in PROCS:
        if p.poll() is None:
            p.kill()
    print("FAIL: " + msg, file=sys.stderr)
    print("%d passed, 1 failed" % PASSED)
    sys.exit(1)


def ok(name):
    global PASSED
    PASSED += 1
    print("ok %d - %s" % (PASSED, name))


def logpath(tag):
    return os.path.join(TMP, tag + ".log")


def logtext(tag):
    with open(logpath(tag), errors="replace") as f:
        return f.read()


def start(args, tag):
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=open(logpath(tag), "w"), text=True)
    PROCS.append(p)
    return p


def finish(p, tag, timeout=120):
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        fail("%s did not finish within %d s: %s" % (tag, timeout, logtext(tag)[-2000:]))
    return p.returncode, out


def summary(out, tag):
    lines = [json.loads(l)["summary"] for l in out.splitlines() if l.startswith('{"summary"')]
    if len(lines) != 1:
        fail("%s: expected one summary line, got %r (log %s)" % (tag, out, logtext(tag)[-1500:]))
    return lines[0]


def feeder(job_path, sock, tag, extra=()):
    p = subprocess.Popen([FEEDER, "--job", job_path, "--listen", sock, "--threads", "1", "--quiet"] + list(extra),
                         stdout=subprocess.DEVNULL, stderr=open(logpath(tag), "w"))
    PROCS.append(p)
    return p


def stop(p):
    if p.poll() is None:
        p.kill()
    p.wait()


def small_job():
    data = os.path.join(TMP, "small")
    subprocess.run([RECORD, "gen", "--output-dir", data, "--records", "480", "--shards", "4", "--seed", "5",
                    "--image-bytes", "12", "--classes", "3"], check=True, capture_output=True)
    job = {"name": "psi", "files": [os.path.join(data, "gen-*.tfrecord")], "format": "tfrecord",
           "features": {"image": {"dtype": "uint8", "shape": [12], "from": "bytes"},
                        "label": {"dtype": "int64", "shape": []}, "id": {"dtype": "int64", "shape": []}},
           "shard_policy": "data", "global_batch_size": 16, "epochs": 3, "shuffle": {"buffer": 64, "seed": 3}}
    path = os.path.join(TMP, "small.json")
    with open(path, "w") as f:
        json.dump(job, f)
    return path


def write_npy(path, descr, shape, data):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else ""))
    pad = 64 - (10 + len(header) + 1) % 64
    header += " " * pad + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data)


def nan_job():
    """64 rows of 4 float32 inputs, row 20 a NaN; batches of 8 in order:
    the NaN is in step 2 of epoch 0."""
    d = os.path.join(TMP, "nan")
    os.makedirs(d)
    xs, ys = [], []
    for r in range(64):
        xs += [((r * 7 + k * 3) % 11) / 11.0 for k in range(4)]
        ys.append(r % 3)
    xs[20 * 4 + 1] = float("nan")
    write_npy(os.path.join(d, "x.npy"), "<f4", (64, 4), struct.pack("<%df" % len(xs), *xs))
    write_npy(os.path.join(d, "y.npy"), "<i8", (64,), struct.pack("<%dq" % len(ys), *ys))
    job = {"name": "nan", "format": "arrays",
           "features": {"x": {"dtype": "float32", "shape": [4], "array": os.path.join(d, "x.npy")},
                        "label": {"dtype": "int64", "array": os.path.join(d, "y.npy")}},
           "shard_policy": "data", "global_batch_size": 8, "epochs": 1}
    path = os.path.join(TMP, "nan.json")
    with open(path, "w") as f:
        json.dump(job, f)
    return path


def rogue(ep, worker, actions, extra=()):
    r = subprocess.run([ROGUE, ep, str(worker)] + list(extra) + actions, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        fail("rogue_ps exited %d: %s" % (r.returncode, r.stderr))
    return [json.loads(l) for l in r.stdout.splitlines()]


def ps_task(eps, index, workers, tag, model=SMALL_MODEL, extra=()):
    return start([TRAINER, "--mode", "ps", "--ps", eps, "--ps-task", str(index), "--workers", str(workers)] +
                 model + list(extra), tag)


def test_rogue(job_path):
    eps = "ipc://%s/rogue-ps0.sock" % TMP
    ps = ps_task(eps, 0, 1, "rogue-ps0")
    other = DESC.replace("hidden=16", "hidden=32")
    got = rogue(eps, 0, ["pull:inputs=12 \x1b[31mred\nline\\", "pull:garbage", "pull:" + other, "pull:" + DESC,
                         "push:nan", "push:inf", "push:version", "push:stray", "push:short", "pull:" + DESC])
    inc = got[3]["incarnation"]
    want = [
        ("ERROR", "the workers' model 'inputs=12 \\x1b[31mred\\x0aline\\x5c' is not this parameter server's '%s': "
                  "start it with the workers' model flags" % DESC),
        ("ERROR", "a worker's model description names no input width: 'garbage'"),
        ("ERROR", "the workers' model '%s' is not this parameter server's '%s': start it with the workers' model "
                  "flags" % (other, DESC)),
        ("VALUES", ""),
        ("ERROR", "a gradient with a non-finite value (nan at element 0 of %d): nothing applied" % NPARAMS),
        ("ERROR", "a gradient with a non-finite value (inf at element 0 of %d): nothing applied" % NPARAMS),
        ("ERROR", "a push computed from version 9223372036854775808, newer than this server's 0"),
        ("ERROR", "a message of 4 frames (a PUSH takes 3)"),
        ("ERROR", "a push of %d bytes (this server holds %d floats: %d bytes)" % (4 * NPARAMS - 4, NPARAMS,
                                                                                  4 * NPARAMS)),
        ("VALUES", ""),
    ]
    for i, ((reply, why), g) in enumerate(zip(want, got)):
        if g["reply"] != reply or g["why"] != why or g["incarnation"] != inc:
            fail("rogue action %d (%r): got %r, wanted %s %r (incarnation %s)" % (i, g["action"], g, reply, why, inc))
    if got[3]["bytes"] != 4 * NPARAMS or got[-1]["version"] != 0 or got[-1]["step"] != 0 or inc == "0" * 16:
        fail("after the refused pushes: %r (nothing may be applied)" % got[-1])
    # a real worker trains on the same server to its end
    sock = "ipc://%s/rogue-f.sock" % TMP
    f = feeder(job_path, sock, "rogue-feeder")
    w = start([TRAINER, "--connect", sock, "--job", "psi", "--devices", "cpu:1", "--mode", "ps", "--ps", eps] +
              SMALL_MODEL, "rogue-w0")
    rc, out = finish(w, "rogue-w0")
    prc, pout = finish(ps, "rogue-ps0", 30)
    s, ws = summary(pout, "rogue-ps0"), summary(out, "rogue-w0")
    if rc != 0 or prc != 0 or not s["ok"] or s["bad_messages"] != 8 or s["global_step"] != 90 or ws["steps"] != 90:
        fail("the worker after the rogue: exit %d, server exit %d, server %r, log %s" %
             (rc, prc, s, logtext("rogue-ps0")[-2000:]))
    log = logtext("rogue-ps0")
    if "\x1b" in log or "refused worker 0's message: the workers' model 'inputs=12 \\x1b[31mred\\x0aline\\x5c'" \
            not in log or "refused worker 0's message: a gradient with a non-finite value (nan" not in log:
        fail("the ps task's log of the refusals: %r" % log[-2000:])
    stop(f)
    ok("a rogue's 3 bad descriptions and 5 bad pushes refused (ERROR, counted, nothing applied, control bytes "
       "escaped); a real worker then trains 90 steps on the same server")


def run_mirrored(job_path, tag, args, job="psi", model=SMALL_MODEL):
    sock = "ipc://%s/%s-f.sock" % (TMP, tag)
    f = feeder(job_path, sock, tag + "-feeder")
    w = start([TRAINER, "--connect", sock, "--job", job, "--metrics", os.path.join(TMP, tag + ".jsonl")] +
              model + args, tag)
    rc, out = finish(w, tag)
    stop(f)
    return rc, summary(out, tag), logtext(tag)


DIV_MODEL = ["--model", "mlp", "--hidden", "16", "--seed", "7", "--input", "image", "--label", "label", "--classes",
             "3", "--lr", "1000", "--momentum", "0.99", "--devices", "cpu:1"]


def test_divergence(job_path):
    rc, s, log = run_mirrored(job_path, "div", [], model=DIV_MODEL)
    want = ("error: epoch 0 step 1: the loss is 60443.6, over 1098.61 (1000 x ln 3 classes: a uniform guess scores "
            "ln 3): the training diverged")
    if rc != 1 or s["ok"] is not False or want not in log or abs(s["loss"] - 60443.6) > 0.1:
        fail("--lr 1000 --momentum 0.99: exit %d, summary %r, log %s" % (rc, s, log[-1500:]))
    rc2, s2, log2 = run_mirrored(job_path, "div-finite", ["--check-numerics", "finite"], model=DIV_MODEL)
    if rc2 != 0 or s2["ok"] is not True or s2["steps"] != 90:
        fail("--check-numerics finite: exit %d, %r, %s" % (rc2, s2, log2[-1500:]))
    ok("--lr 1000 --momentum 0.99 stops at epoch 0 step 1 (loss 60443.6 over 1098.61), exit 1, ok false; "
       "--check-numerics finite runs its 90 steps")


NAN_MODEL = ["--model", "softmax", "--lr", "0.1", "--momentum", "0.9", "--seed", "3", "--input", "x", "--label",
             "label", "--classes", "3"]


def test_nan(nan_path):
    want = "error: epoch 0 step 2: the loss is nan: the training diverged"
    for mode, args in (("mirrored", ["--devices", "cpu:1"]), ("tower", ["--mode", "tower", "--devices", "cpu:2"])):
        rc, s, log = run_mirrored(nan_path, "nan-" + mode, args, job="nan", model=NAN_MODEL)
        if rc != 1 or s["ok"] is not False or want not in log or s["loss"] is not None:
            fail("NaN input, %s: exit %d, %r, log %s" % (mode, rc, s, log[-1500:]))
    rc, s, log = run_mirrored(nan_path, "nan-off", ["--devices", "cpu:1", "--check-numerics", "off"], job="nan",
                              model=NAN_MODEL)
    if rc != 0 or s["ok"] is not True or s["steps"] != 8 or s["loss"] is not None:
        fail("NaN input, --check-numerics off: exit %d, %r, %s" % (rc, s, log[-1500:]))
    # ps mode: the NaN gradient is refused by the server; the worker names the step
    eps = "ipc://%s/nan-ps0.sock" % TMP
    ps = ps_task(eps, 0, 1, "nan-ps0", model=NAN_MODEL)
    rc, s, log = run_mirrored(nan_path, "nan-ps", ["--devices", "cpu:1", "--mode", "ps", "--ps", eps], job="nan",
                              model=NAN_MODEL)
    prc, pout = finish(ps, "nan-ps0", 30)
    p = summary(pout, "nan-ps0")
    wl = ("error: epoch 0 step 2: parameter server 0 (%s) refused: a gradient with a non-finite value (nan at "
          "element 0 of 15): nothing applied" % eps)
    if rc != 1 or s["ok"] is not False or wl not in log:
        fail("NaN input, ps mode: the worker exited %d, ok %r, log %s" % (rc, s["ok"], log[-1500:]))
    if prc != 1 or p["ok"] is not False or p["failed_workers"] != 1 or p["pushes"] != 2 or p["global_step"] != 2 or \
            p["bad_messages"] != 1 or "worker 0 left before its final pull" not in logtext("nan-ps0"):
        fail("NaN input, ps mode: the server exited %d, %r, %s" % (prc, p, logtext("nan-ps0")[-1500:]))
    ok("a NaN at row 20: mirrored, tower and ps runs stop at epoch 0 step 2 (exit 1, ok false; the server refuses "
       "the NaN gradient and says the worker failed); --check-numerics off trains on (loss null)")


def wait_steps(tags, n, timeout=60):
    """Until each worker's --metrics file (TMP/TAG.jsonl) has n steps."""
    t0 = time.time()
    while time.time() - t0 < timeout:
        counts = []
        for tag in tags:
            try:
                with open(os.path.join(TMP, tag + ".jsonl")) as f:
                    counts.append(sum(1 for _ in f))
            except OSError:
                counts.append(0)
        if min(counts) >= n:
            return
        time.sleep(0.05)
    fail("workers %s did not train %d steps within %d s: %s" % (tags, n, timeout, logtext(tags[0])[-1500:]))


def test_restart(job_path):
    sock = "ipc://%s/rs-f.sock" % TMP
    f = feeder(job_path, sock, "rs-feeder", ["--set", "epochs=100000"])  # minutes: the failures end it
    eps = "ipc://%s/rs-ps0.sock" % TMP
    ps = ps_task(eps, 0, 2, "rs-ps0")
    ws = [start([TRAINER, "--connect", sock, "--job", "psi", "--worker", str(w), "--workers", "2",
                 "--devices", "cpu:1", "--mode", "ps", "--ps", eps, "--timeout-ms", "3000", "--metrics",
                 os.path.join(TMP, "rs-w%d.jsonl" % w)] + SMALL_MODEL, "rs-w%d" % w) for w in range(2)]
    wait_steps(["rs-w0", "rs-w1"], 20)  # both have pulled from the first server
    for i, w in enumerate(ws):
        if w.poll() is not None:
            fail("worker %d ended before the kill: %s" % (i, logtext("rs-w%d" % i)[-1500:]))
    ps.kill()
    ps.wait()
    ps2 = ps_task(eps, 0, 2, "rs-ps0b")
    pat = re.compile(r"parameter server 0 \(%s\) restarted: its incarnation is ([0-9a-f]{16}), this worker pulled "
                     r"from ([0-9a-f]{16}) \(at version (\d+)\)" % re.escape(eps))
    incs = set()
    for i, w in enumerate(ws):
        rc, out = finish(w, "rs-w%d" % i, 60)
        text = logtext("rs-w%d" % i)
        m = pat.search(text)
        if rc != 1 or m is None or summary(out, "rs-w%d" % i)["ok"] is not False or int(m.group(3)) < 10:
            fail("worker %d after the restart: exit %d, log %s" % (i, rc, text[-1500:]))
        incs.add((m.group(1), m.group(2)))
    prc, pout = finish(ps2, "rs-ps0b", 60)
    p = summary(pout, "rs-ps0b")
    if len(incs) != 1 or list(incs)[0][0] != p["incarnation"] or list(incs)[0][1] == p["incarnation"]:
        fail("incarnations named %r, the new server's %s" % (incs, p["incarnation"]))
    if prc != 1 or p["ok"] is not False or p["failed_workers"] != 2 or p["pushes"] != 0:
        fail("the restarted server: exit %d, %r, log %s" % (prc, p, logtext("rs-ps0b")[-1500:]))
    stop(f)
    ok("a ps task killed and restarted under 2 workers: both fail naming the restart (%s -> %s); the new server "
       "exits 1, ok false, 2 failed workers, nothing applied" % (list(incs)[0][1], list(incs)[0][0]))


def trace_lines(path, below=None):
    """A trace's piece lines as dicts (complete lines only: a killed run's
    last may be cut), those with seq < below when given."""
    out = []
    with open(path) as f:
        for line in f:
            if not line.endswith("\n"):
                break
            x = json.loads(line)
            if "summary" not in x and (below is None or x["seq"] < below):
                out.append(x)
    return out


def wait_lines(path, n, proc, tag, timeout=60):
    t0 = time.time()
    while time.time() - t0 < timeout:
        try:
            with open(path) as f:
                if sum(1 for _ in f) >= n:
                    return
        except OSError:
            pass
        if proc.poll() is not None:
            fail("%s ended before the kill: %s" % (tag, logtext(tag)[-1500:]))
        time.sleep(0.01)
    fail("%s did not trace %d pieces within %d s" % (tag, n, timeout))


EPOCHS = 100  # 480 records, 2 workers, batches of 8 each: 30 steps a worker an epoch


def ps_run(job_path, tag, servers=2, kill_after=None, restart=True, timeout="5"):
    """Feeder, `servers` ps tasks, 2 workers with --trace. kill_after: worker
    1 is killed (SIGKILL) once its trace has that many pieces, then started
    again (restart) or not. Returns (worker exits, their summaries, the ps
    summaries, traces by worker [list of lists], the resume position)."""
    sock = "ipc://%s/%s-f.sock" % (TMP, tag)
    f = feeder(job_path, sock, tag + "-feeder", ["--set", "epochs=%d" % EPOCHS])
    eps = ",".join("ipc://%s/%s-ps%d.sock" % (TMP, tag, i) for i in range(servers))
    ps = [ps_task(eps, i, 2, "%s-ps%d" % (tag, i), extra=["--ps-worker-timeout", timeout])
          for i in range(servers)]

    def worker(w, wtag):
        return start([TRAINER, "--connect", sock, "--job", "psi", "--worker", str(w), "--workers", "2",
                      "--devices", "cpu:1", "--mode", "ps", "--ps", eps, "--timeout-ms", "5000", "--trace",
                      os.path.join(TMP, wtag + ".trace")] + SMALL_MODEL, wtag)
    tags = [tag + "-w0", tag + "-w1"]
    ws = [worker(0, tags[0]), worker(1, tags[1])]
    resume = None
    if kill_after is not None:
        wait_lines(os.path.join(TMP, tags[1] + ".trace"), kill_after, ws[1], tags[1])
        ws[1].kill()
        ws[1].wait()
        if restart:
            tags.append(tag + "-w1b")
            ws.append(worker(1, tags[2]))
    rcs, outs = [], []
    for w, wtag in zip(ws, tags):
        if w.returncode is not None and wtag == tags[1] and kill_after is not None:
            rcs.append(-9)
            outs.append(None)
            continue
        rc, out = finish(w, wtag, 120)
        rcs.append(rc)
        outs.append(summary(out, wtag))
    pss = []
    for i, p in enumerate(ps):
        prc, pout = finish(p, "%s-ps%d" % (tag, i), 60)
        pss.append((prc, summary(pout, "%s-ps%d" % (tag, i))))
    stop(f)
    traces = [trace_lines(os.path.join(TMP, tags[0] + ".trace"))]
    if kill_after is not None and restart:
        m = re.search(r"worker 1 restarted: resuming at epoch (\d+) step (\d+) \(input position (\d+), as (\d+) of "
                      r"%d parameter servers recorded it" % servers, logtext(tags[2]))
        if m is None:
            fail("%s: the restarted worker does not say where it resumes: %s" % (tag, logtext(tags[2])[-1500:]))
        resume = tuple(int(x) for x in m.groups())
        traces.append(trace_lines(os.path.join(TMP, tags[1] + ".trace"), below=resume[2]) +
                      trace_lines(os.path.join(TMP, tags[2] + ".trace")))
    elif kill_after is None:
        traces.append(trace_lines(os.path.join(TMP, tags[1] + ".trace")))
    return rcs, outs, pss, traces, resume


def test_worker_killed_and_restarted(job_path):
    """Issue #24 item 3: a worker killed (SIGKILL) mid-run and started again
    resumes at the input position the servers recorded (both servers adopt
    its new session and say so): every process exits 0, the global step is
    the uninterrupted run's, and each worker's trace (the killed process's
    up to the resume position, then the new one's) is the uninterrupted
    run's piece for piece: every element exactly once an epoch."""
    global REF
    rcs, outs, pss, ref, _ = ps_run(job_path, "ref")
    REF = ref
    if rcs != [0, 0] or any(prc != 0 for prc, _ in pss):
        fail("the uninterrupted run: exits %r, %r" % (rcs, pss))
    steps = EPOCHS * 60
    if pss[0][1]["global_step"] != steps or [len(t) for t in ref] != [steps // 2, steps // 2]:
        fail("the uninterrupted run: global step %d, traces of %r pieces" % (pss[0][1]["global_step"],
                                                                              [len(t) for t in ref]))
    for epoch in range(EPOCHS):
        ids = sorted(i for t in ref for x in t if x["epoch"] == epoch for i in x["ids"])
        if ids != list(range(480)):
            fail("the uninterrupted run's epoch %d is not every element once" % epoch)
    rcs, outs, pss, got, resume = ps_run(job_path, "rw", kill_after=steps // 6)
    if rcs != [0, -9, 0]:
        fail("killed and restarted: exits %r (w0, w1 killed, w1 again): %s" % (rcs, logtext("rw-w1b")[-1500:]))
    epoch, step, seq, agreeing = resume
    for i, (prc, p) in enumerate(pss):
        text = logtext("rw-ps%d" % i)
        if prc != 0 or p["ok"] is not True or p["restarted_workers"] != 1 or p["lost_workers"] != 0 or \
                p["failed_workers"] != 0 or "parameter server %d: worker 1 restarted: resuming at epoch " % i not in text:
            fail("killed and restarted: server %d exit %d, %r, %s" % (i, prc, p, text[-1500:]))
    skipped = sum(p["pushes_not_reapplied"] for _, p in pss)
    if agreeing + skipped != 2 or pss[0][1]["global_step"] != steps:
        fail("killed and restarted: %d servers at the resume position, %d pushes not applied again, global step %d "
             "(expected %d)" % (agreeing, skipped, pss[0][1]["global_step"], steps))
    if got[0] != ref[0] or got[1] != ref[1]:
        w = 0 if got[0] != ref[0] else 1
        diff = next((k for k, (a, b) in enumerate(zip(got[w], ref[w])) if a != b), min(len(got[w]), len(ref[w])))
        fail("killed and restarted at seq %d: worker %d's trace differs from the uninterrupted run's at piece %d: "
             "%r against %r" % (seq, w, diff, got[w][diff:diff + 1], ref[w][diff:diff + 1]))
    if outs[0]["lost_workers"] != 0 or outs[2]["lost_workers"] != 0 or outs[2]["ok"] is not True:
        fail("killed and restarted: summaries %r %r" % (outs[0], outs[2]))
    ok("a worker killed (SIGKILL) at its step %d and started again resumes at epoch %d step %d (input position %d; "
       "%d of 2 servers there, %d push acknowledged and not applied again): all exit 0, global step %d as "
       "uninterrupted, both traces piece for piece the uninterrupted run's" % (step, epoch, step, seq, agreeing,
                                                                              skipped, steps))


REF = None


def ps_restore_fails(extra, tag, want):
    """A ps task started with extra args exits 1 at once, saying want."""
    eps = "ipc://%s/bad-ps0.sock,ipc://%s/bad-ps1.sock" % (TMP, TMP)
    rc, out = finish(ps_task(eps, 0, 2, tag, extra=extra), tag, 30)
    if rc != 1 or want not in logtext(tag):
        fail("%s: exit %d, wanted 1 and %r in %s" % (tag, rc, want, logtext(tag)[-1500:]))


def test_cluster_restored(job_path):
    """Issue #24 item 3, ps checkpoints: 2 ps tasks with --checkpoint write
    their state every 200 pushes; both are killed (SIGKILL) under running
    workers and started again with --restore: they say what they restored;
    the running workers fail loudly naming the restart (exit 1); started
    again, the workers resume where the restored servers recorded (each
    server skips the steps it had beyond the lowest position), and the job
    ends with the uninterrupted run's global step and both traces piece
    for piece the uninterrupted run's. Hostile checkpoint directories (a
    FIFO, a symlink, a flipped byte, nothing there, a fresh run into a used
    directory) are refused at once."""
    steps = EPOCHS * 60
    d = os.path.join(TMP, "ps-ckpt")
    sock = "ipc://%s/cr-f.sock" % TMP
    f = feeder(job_path, sock, "cr-feeder", ["--set", "epochs=%d" % EPOCHS])
    eps = ",".join("ipc://%s/cr-ps%d.sock" % (TMP, i) for i in range(2))
    ckpt = ["--checkpoint", d, "--checkpoint-every", "200", "--ps-worker-timeout", "30"]
    ps = [ps_task(eps, i, 2, "cr-ps%d" % i, extra=ckpt) for i in range(2)]

    def worker(w, tag):
        return start([TRAINER, "--connect", sock, "--job", "psi", "--worker", str(w), "--workers", "2",
                      "--devices", "cpu:1", "--mode", "ps", "--ps", eps, "--timeout-ms", "1500", "--trace",
                      os.path.join(TMP, tag + ".trace")] + SMALL_MODEL, tag)
    ws = [worker(0, "cr-w0"), worker(1, "cr-w1")]
    wait_lines(os.path.join(TMP, "cr-w1.trace"), steps // 6, ws[1], "cr-w1")
    for p in ps:
        p.kill()
        p.wait()
    names = sorted(os.listdir(d))
    if not any(n.endswith(".w0of2") for n in names) or not any(n.endswith(".w1of2") for n in names):
        fail("ps checkpoints: %r in %s" % (names, d))
    # hostile directories: each refused at once, naming the file
    newest0 = max(n for n in names if n.endswith(".w0of2"))
    for kind in ("fifo", "symlink", "flipped", "empty"):
        bad = os.path.join(TMP, "ps-ckpt-" + kind)
        shutil.copytree(d, bad)
        target = os.path.join(bad, newest0)
        if kind == "fifo":
            os.unlink(target)
            os.mkfifo(target)
            want = "%s: not a regular file (a FIFO): refused" % target
        elif kind == "symlink":
            os.unlink(target)
            os.symlink(os.path.join(d, newest0), target)
            want = "%s: a symbolic link: refused" % target
        elif kind == "flipped":
            with open(target, "r+b") as fh:
                fh.seek(100)
                b = fh.read(1)
                fh.seek(100)
                fh.write(bytes([b[0] ^ 0x10]))
            want = "%s: damaged (CRC-32C mismatch" % target
        else:
            for n in os.listdir(bad):
                os.unlink(os.path.join(bad, n))
            want = "--restore %s: no checkpoint of parameter server 0 of 2 there" % bad
        ps_restore_fails(["--restore", bad], "cr-bad-" + kind, want)
    ps_restore_fails(["--checkpoint", d], "cr-bad-fresh", "--checkpoint %s already holds" % d)
    ps = [ps_task(eps, i, 2, "cr-ps%db" % i, extra=ckpt + ["--restore", d]) for i in range(2)]
    for i, w in enumerate(ws):
        rc, out = finish(w, "cr-w%d" % i, 60)
        if rc != 1 or "restarted: its incarnation is " not in logtext("cr-w%d" % i):
            fail("a worker running when the servers were restored: exit %d, %s" % (rc, logtext("cr-w%d" % i)[-1500:]))
    ws = [worker(0, "cr-w0b"), worker(1, "cr-w1b")]
    resume = []
    for i, w in enumerate(ws):
        rc, out = finish(w, "cr-w%db" % i, 120)
        m = re.search(r"worker %d restarted: resuming at epoch (\d+) step (\d+) \(input position (\d+)" % i,
                      logtext("cr-w%db" % i))
        if rc != 0 or m is None or summary(out, "cr-w%db" % i)["ok"] is not True:
            fail("worker %d after the restore: exit %d, %s" % (i, rc, logtext("cr-w%db" % i)[-1500:]))
        resume.append(int(m.group(3)))
    pss = []
    for i, p in enumerate(ps):
        prc, pout = finish(p, "cr-ps%db" % i, 60)
        s = summary(pout, "cr-ps%db" % i)
        text = logtext("cr-ps%db" % i)
        if prc != 0 or s["ok"] is not True or s["restored_version"] == 0 or s["restored_version"] % 200 != 0 or \
                "parameter server %d: restoring version %d (global step " % (i, s["restored_version"]) not in text \
                or "worker 1 restarted: resuming at epoch " not in text or s["restarted_workers"] != 2:
            fail("restored server %d: exit %d, %r, %s" % (i, prc, s, text[-1500:]))
        pss.append(s)
    stop(f)
    if pss[0]["global_step"] != steps:
        fail("restored: global step %d, the uninterrupted run's %d" % (pss[0]["global_step"], steps))
    for w in range(2):
        got = trace_lines(os.path.join(TMP, "cr-w%d.trace" % w), below=resume[w]) + \
              trace_lines(os.path.join(TMP, "cr-w%db.trace" % w))
        if got != REF[w]:
            diff = next((k for k, (a, b) in enumerate(zip(got, REF[w])) if a != b), min(len(got), len(REF[w])))
            fail("restored: worker %d's trace (resumed at seq %d) differs from the uninterrupted run's at piece %d: "
                 "%r against %r" % (w, resume[w], diff, got[diff:diff + 1], REF[w][diff:diff + 1]))
    ok("2 ps tasks killed under running workers and restarted with --restore (versions %d and %d): the running "
       "workers fail naming the restart; started again they resume at input positions %r (%d pushes acknowledged "
       "and not applied again), global step %d as uninterrupted, both traces piece for piece the uninterrupted "
       "run's; a FIFO, a symlink, a flipped byte, an empty directory and a fresh run into a used one refused"
       % (pss[0]["restored_version"], pss[1]["restored_version"], resume,
          sum(s["pushes_not_reapplied"] for s in pss), steps))


def test_worker_killed_never_back(job_path):
    """Issue #24 item 3: a worker killed and never started again: the
    survivor trains its shard, then exits 1 naming the lost worker (its
    final pull waits up to --ps-worker-timeout); the servers exit 1,
    lost_workers 1 in every summary."""
    rcs, outs, pss, _, _ = ps_run(job_path, "wk", servers=1, kill_after=300, restart=False, timeout="2")
    s = outs[0]
    if rcs != [1, -9] or s["ok"] is not False or s["lost_workers"] != 1 or \
            "the job did not finish: 1 of 2 workers were lost or failed (worker 1 first" not in logtext("wk-w0"):
        fail("the survivor: exit %r, %r, %s" % (rcs, s, logtext("wk-w0")[-1500:]))
    prc, p = pss[0]
    if prc != 1 or p["ok"] is not False or p["lost_workers"] != 1 or \
            "worker 1 was silent for 2.0 s and is lost" not in logtext("wk-ps0"):
        fail("the server: exit %d, %r, %s" % (prc, p, logtext("wk-ps0")[-1500:]))
    ok("a worker killed and not started again: the survivor trains %d steps, then exits 1 naming worker 1; the "
       "server exits 1, lost_workers 1" % s["steps"])


def keygen(name):
    path = os.path.join(TMP, "keys", name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    r = subprocess.run([FEEDER, "keygen", path], capture_output=True, text=True)
    if r.returncode != 0:
        fail("keygen %s: %s" % (name, r.stderr))
    return path


def test_curve(job_path):
    trainer, fkey = keygen("trainer"), keygen("feeder")
    allow = os.path.join(TMP, "allow")
    os.makedirs(allow)
    shutil.copy(trainer + ".pub", os.path.join(allow, "trainer.pub"))
    sock = "ipc://%s/cv-f.sock" % TMP
    f = feeder(job_path, sock, "cv-feeder", ["--curve-key", fkey + ".key", "--curve-allow", allow])
    eps = "ipc://%s/cv-ps0.sock" % TMP
    ps = ps_task(eps, 0, 1, "cv-ps0", extra=["--curve-key", trainer + ".key"])
    got = rogue(eps, 0, ["pull:" + DESC], ["--wait-ms", "1500"])
    if got[0]["reply"] != "none":
        fail("a plaintext rogue got an answer from a CURVE server: %r" % got)
    w = start([TRAINER, "--connect", sock, "--job", "psi", "--devices", "cpu:1", "--mode", "ps", "--ps", eps,
               "--curve-key", trainer + ".key", "--curve-server-key", fkey + ".pub"] + SMALL_MODEL, "cv-w0")
    rc, out = finish(w, "cv-w0")
    prc, pout = finish(ps, "cv-ps0", 30)
    s = summary(pout, "cv-ps0")
    if rc != 0 or prc != 0 or s["global_step"] != 90 or s["bad_messages"] != 0 or \
            "(CURVE: holders of the job's trainer key only)" not in logtext("cv-ps0"):
        fail("CURVE ps: worker exit %d (%s), server exit %d %r" % (rc, logtext("cv-w0")[-1500:], prc, s))
    stop(f)
    ok("CURVE on the ps link: the key holder trains 90 steps; a plaintext rogue is never answered")


def main():
    job = small_job()
    test_rogue(job)
    test_divergence(job)
    test_nan(nan_job())
    test_restart(job)
    test_worker_killed_and_restarted(job)
    test_worker_killed_never_back(job)
    test_cluster_restored(job)
    test_curve(job)
    print("%d passed, 0 failed" % PASSED)
    shutil.rmtree(TMP, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    finally:
        for p in PROCS:
            if p.poll() is None:
                p.kill()
