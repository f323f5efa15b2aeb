#!/usr/bin/env python3
"""Integration: the /metrics endpoint of sluice-feeder and sluice-trainer
(--metrics-listen, issue #19 part 1), read with curl and scraped by a real
Prometheus.

    test_metrics.py BUILD_DIR curl        curl against a feeder and a trainer
    test_metrics.py BUILD_DIR prometheus  Prometheus scrapes a feeder and two
                                          trainers (exit 77 without prometheus)

curl: the exposition's shape (every sample's family has HELP and TYPE lines
before it, every line parses, no series twice, buckets cumulative), the
scan's figures before any trainer, the exact counts of a run once it is
over (the trainer held before its exit: --save-weights is a FIFO the test
opens last), the same counts in the trainer's summary line, 404 and 405, a
port in use and an address that does not parse (for both programs).

prometheus: a prometheus.yml bound to loopback, scraping every second, the
three endpoints on ports picked free. The trainers are held twice: mid-run
(--trace is a FIFO with a 4 KiB pipe that the test leaves unread until
Prometheus has seen both workers past step 3, so a scrape asks for the
weights' hash while they train), and after training (as above). The test
polls Prometheus' query API until the final values appear, then checks them
against the trainers' summaries: steps, samples, bytes, pieces (the
feeder's = the trainers' sum), shared-memory pieces, records, histogram
counts, connected trainers, errors; and the weights hash Prometheus holds is
the hash of one of that worker's steps (its --metrics lines).

Waits poll for an event with generous bounds (a loaded 2-core machine, the
sanitizers); no sleep stands for "long enough".
"""
import fcntl
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bed  # noqa: E402
import harness  # noqa: E402
from bed import log_path, read_log, wait  # noqa: E402
from harness import fail, ok, spawn  # noqa: E402

MODE = sys.argv[2] if len(sys.argv) > 2 else "curl"
PROMETHEUS = shutil.which("prometheus") or ("/usr/bin/prometheus" if os.path.exists("/usr/bin/prometheus") else None)
if MODE == "prometheus" and PROMETHEUS is None:
    print("SKIP: no prometheus binary (apt-get install prometheus)")
    sys.exit(77)
if shutil.which("curl") is None:
    print("SKIP: no curl")
    sys.exit(77)

bed.setup(sys.argv[1], "metrics")
FEEDER, TRAINER, TMP = bed.FEEDER, bed.TRAINER, bed.TMP
F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*",?)*\})? '
                    r'(-?[0-9.e+-]+|NaN|\+Inf|-Inf)$')


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def curl(url, *extra):
    """(status, body) of one request with curl."""
    r = subprocess.run(["curl", "-s", "-S", "--max-time", "30", "-o", "-", "-w", "\n%{http_code}"] + list(extra)
                       + [url], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        fail("curl %s: %s" % (url, r.stderr.strip()))
    body, _, code = r.stdout.rpartition("\n")
    return int(code), body


def parse(text, what):
    """{(name, frozenset(labels)): value} of an exposition, its shape checked."""
    typed, series, family = {}, {}, None
    for line in text.splitlines():
        if line.startswith("# HELP "):
            family = line.split(" ")[2]
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            if name != family or name in typed:
                fail("%s: TYPE %s without its HELP just before, or twice" % (what, name))
            typed[name] = kind
            continue
        m = SAMPLE.match(line)
        if m is None:
            fail("%s: a line that is no sample: %r" % (what, line))
        name = m.group(1)
        base = re.sub(r"_(bucket|sum|count)$", "", name) if name not in typed else name
        if base not in typed or base != family:
            fail("%s: sample %s outside its family (HELP/TYPE %s)" % (what, name, base))
        labels = frozenset(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        key = (name, labels)
        if key in series:
            fail("%s: series %s %s twice" % (what, name, sorted(labels)))
        series[key] = float(m.group(3))
    return typed, series


def value(series, name, **labels):
    """The one series of `name` whose labels include `labels`."""
    hits = [v for (n, ls), v in series.items() if n == name and set(labels.items()) <= set(ls)]
    if len(hits) != 1:
        fail("%d series %s%s (want 1)" % (len(hits), name, labels))
    return hits[0]


def check_histogram(series, name, count, what):
    buckets = sorted(((float(dict(ls)["le"]), v) for (n, ls), v in series.items() if n == name + "_bucket"))
    if not buckets or buckets[-1][0] != float("inf"):
        fail("%s: %s has no +Inf bucket" % (what, name))
    if any(b[1] > c[1] for b, c in zip(buckets, buckets[1:])):
        fail("%s: %s buckets are not cumulative: %r" % (what, name, buckets))
    if buckets[-1][1] != count or value(series, name + "_count") != count:
        fail("%s: %s counted %s (+Inf %s), want %d" % (what, name, value(series, name + "_count"),
                                                      buckets[-1][1], count))


def port_of(tag, who, proc):
    bed.wait_for_log(tag, who, "metrics: serving /metrics on", proc, "%s: the %s did not serve /metrics" % (tag, who))
    return int(re.search(r"metrics: serving /metrics on \S+ \(port (\d+)\)", read_log(tag, who)).group(1))


def fifo(path, pipe_size=None):
    """A FIFO opened for reading without blocking (a writer then opens it
    at once; its writes block once the pipe is full)."""
    os.mkfifo(path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    if pipe_size is not None:
        fcntl.fcntl(fd, F_SETPIPE_SZ, pipe_size)
    return fd


def drain(fd):
    """Read fd to its end on a thread (blocking reads); the text comes in the returned list."""
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    out = []

    def run():
        chunks = []
        while True:
            b = os.read(fd, 65536)
            if not b:
                break
            chunks.append(b)
        os.close(fd)
        out.append(b"".join(chunks).decode())
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def weights_reader(path):
    """Open the --save-weights FIFO for reading (the trainer waits for it)
    and read it whole, on a thread."""
    def run():
        with open(path, "rb") as f:
            f.read()
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def summary_of(out):
    return json.loads(out.strip().splitlines()[-1])["summary"]


def trainer_args(eps, job, w, W, tag, extra=()):
    args = [TRAINER, "--connect", eps, "--job", job, "--worker", str(w), "--workers", str(W), "--replicas", "1",
            "--model", "softmax", "--input", "image", "--label", "label", "--classes", "10", "--progress", "off",
            "--save-weights", os.path.join(TMP, "%s-w%d.npy" % (tag, w)),
            "--metrics", os.path.join(TMP, "%s-w%d.jsonl" % (tag, w))]
    return args + list(extra)


# ---------------------------------------------------------------- curl

def check_names(families, programs):
    """docs/operations.md lists exactly the families the processes export,
    and every query of the Grafana dashboard names only exported ones."""
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(src, "docs", "operations.md")) as f:
        documented = set(re.findall(r"^\| `(sluice_(?:feeder|trainer)_[a-z0-9_]+|sluice_process_info)` \|", f.read(),
                                    re.M))
    # present only when something happened: the input's bound between two
    # scrapes (absent when nothing was waited for); an elastic member's
    # world (--elastic: test_elastic_metrics.py)
    optional = {"sluice_trainer_input_bound_info", "sluice_trainer_workers", "sluice_trainer_worker_index",
                "sluice_trainer_world_changes_total"}
    if not families <= documented or documented - families - optional:
        fail("docs/operations.md lists %s but not %s" % (sorted(documented - families) or "nothing more",
                                                         sorted(families - documented) or "nothing less"))
    known = families | (optional & documented)  # an optional family: documented, seen when it happens
    with open(os.path.join(src, "deploy", "grafana", "sluice-dashboard.json")) as f:
        dash = json.load(f)
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    job_var = dash["templating"]["list"][1]["definition"]
    exprs.append(job_var)
    # the job variable lists jobs from a family every process exports
    # (the client library's too: python/tests/test_metrics.py)
    if job_var != "label_values(sluice_process_info, sluice_job)" or not {"feeder", "trainer"} <= programs:
        fail("the dashboard's job variable %r: not sluice_process_info, or not exported by %s" %
             (job_var, sorted({"feeder", "trainer"} - programs)))
    used = set()
    for e in exprs:
        for name in re.findall(r"\b(sluice_(?:feeder|trainer)_[a-z0-9_]+|sluice_process_info)", e):
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            if name not in known and base not in known:
                fail("the dashboard's query %r names %s, which no process exports" % (e, name))
            used.add(name if name in known else base)
    needed = {"sluice_trainer_input_wait_seconds_total", "sluice_trainer_input_wait_by_feeder_seconds_total",
              "sluice_feeder_cpu_seconds_total", "sluice_trainer_samples_total"}
    if not needed <= used:
        fail("the dashboard lacks %s (input-bound, stall by feeder, stages, throughput)" % sorted(needed - used))
    ok("docs/operations.md lists the %d exported families; the dashboard's %d queries name only them (%d used)" %
       (len(families), len(exprs), len(used)))


def case_curl():
    harness.case()
    tag = "curl"
    files = bed.gen("data-curl", 200, 2)
    job_path, job = bed.write_job("job-curl", files)  # G = 8, 2 epochs
    steps = 2 * 200 // 8
    sock = "ipc://%s/%s.sock" % (TMP, tag)
    feeder = spawn([FEEDER, "--job", job_path, "--listen", sock, "--threads", "1", "--metrics-listen", "127.0.0.1:0",
                    "--metrics-linger", "120"], log=log_path(tag, "feeder"))
    fport = port_of(tag, "feeder", feeder)
    bed.wait_for_log(tag, "feeder", "serving job", feeder, "curl: the feeder did not serve")
    url = "http://127.0.0.1:%d/metrics" % fport
    code, text = curl(url)
    if code != 200:
        fail("curl: GET /metrics answered %d" % code)
    typed, s = parse(text, "feeder before any trainer")
    for name, kind in (("sluice_feeder_pieces_total", "counter"), ("sluice_feeder_cpu_seconds_total", "counter"),
                       ("sluice_feeder_trainers_connected", "gauge"), ("sluice_feeder_scan_files", "gauge"),
                       ("sluice_feeder_errors_total", "counter")):
        if typed.get(name) != kind:
            fail("curl: %s is %r, want %s" % (name, typed.get(name), kind))
    want = {"sluice_feeder_scan_files": 2, "sluice_feeder_scan_files_done": 2, "sluice_feeder_scan_records": 200,
            "sluice_feeder_pieces_total": 0, "sluice_feeder_trainers_connected": 0, "sluice_feeder_workers": 0}
    for name, v in want.items():
        if value(s, name, sluice_job="job-curl", feeder="0") != v:
            fail("curl: before any trainer %s = %s, want %s" % (name, value(s, name), v))
    stages = sorted(dict(ls)["stage"] for (n, ls) in s if n == "sluice_feeder_cpu_seconds_total")
    if stages != ["assemble", "decode", "decompress", "map", "read", "send"]:
        fail("curl: cpu stages %r" % stages)
    ok("feeder before any trainer: the format, the scan's figures, nothing sent")

    # one trainer, held before its exit by its --save-weights FIFO
    os.mkfifo(os.path.join(TMP, "%s-w0.npy" % tag))
    trainer = spawn(trainer_args(sock, "job-curl", 0, 1, tag, ["--metrics-listen", "127.0.0.1:0"]),
                    log=log_path(tag, "trainer"), stdout=subprocess.PIPE, text=True)
    tport = port_of(tag, "trainer", trainer)
    turl = "http://127.0.0.1:%d/metrics" % tport
    deadline = time.time() + 120
    while True:  # until it has trained every step (then it waits for the FIFO's reader)
        _, ts = parse(curl(turl)[1], "trainer")
        if value(ts, "sluice_trainer_trained_steps_total") == steps:
            break
        if time.time() > deadline or trainer.poll() is not None:
            fail("curl: the trainer did not train its %d steps" % steps)
        time.sleep(0.05)
    # the feeder, done, keeps its final figures up for one scrape (--metrics-linger), then exits
    bed.wait_for_log(tag, "feeder", "metrics: serving the final figures until a scrape reads them", feeder,
                     "curl: the feeder did not linger")
    ftyped, fs = parse(curl(url)[1], "feeder after the run")
    if wait(feeder, 60, "curl: the lingering feeder") != 0:
        fail("curl: the feeder exited %d" % feeder.returncode)
    ttyped, ts = parse(curl(turl)[1], "trainer after the run")
    check_names(set(ftyped) | set(ttyped), {dict(ls).get("program") for (n, ls) in list(fs) + list(ts)
                                            if n == "sluice_process_info"})
    reader = weights_reader(os.path.join(TMP, "%s-w0.npy" % tag))
    out, _ = trainer.communicate(timeout=120)
    reader.join(timeout=30)
    if trainer.returncode != 0:
        fail("curl: the trainer exited %d" % trainer.returncode)
    sm = summary_of(out)
    exact = [("sluice_feeder_pieces_total", steps), ("sluice_feeder_records_total", 400),
             ("sluice_feeder_sent_bytes_total", sm["bytes"]), ("sluice_feeder_trainers_connected", 0),
             ("sluice_feeder_trainers_accepted_total", 1), ("sluice_feeder_workers", 1)]
    for name, v in exact:
        if value(fs, name) != v:
            fail("curl: feeder %s = %s, want %s" % (name, value(fs, name), v))
    if value(fs, "sluice_feeder_transport_pieces_total", transport="shm") != sm["shm_pieces"] or \
            value(fs, "sluice_feeder_transport_pieces_total", transport="copy") != steps - sm["shm_pieces"]:
        fail("curl: feeder transport split %s/%s, trainer shm_pieces %d" % (
            value(fs, "sluice_feeder_transport_pieces_total", transport="shm"),
            value(fs, "sluice_feeder_transport_pieces_total", transport="copy"), sm["shm_pieces"]))
    for kind in ("data", "refused", "bad_message", "dropped"):
        if value(fs, "sluice_feeder_errors_total", kind=kind) != 0:
            fail("curl: feeder errors{kind=%s} = %s" % (kind, value(fs, "sluice_feeder_errors_total", kind=kind)))
    # every record read once per epoch: the records' bytes, as many as two epochs of the files' payloads
    if not 0 < value(fs, "sluice_feeder_read_bytes_total") < 2 * sum(os.path.getsize(f) for f in files):
        fail("curl: feeder read %s bytes" % value(fs, "sluice_feeder_read_bytes_total"))
    if sm["steps"] != steps or sm["pieces"] != steps or sm["elements"] != 400:
        fail("curl: the trainer's summary %r" % sm)
    texact = [("sluice_trainer_steps_total", steps), ("sluice_trainer_trained_steps_total", steps),
              ("sluice_trainer_pieces_total", sm["pieces"]), ("sluice_trainer_samples_total", sm["elements"]),
              ("sluice_trainer_received_bytes_total", sm["bytes"]), ("sluice_trainer_epochs_total", 2),
              ("sluice_trainer_shm_pieces_total", sm["shm_pieces"]), ("sluice_trainer_h2d_bytes_total", sm["h2d_bytes"])]
    for name, v in texact:
        if value(ts, name, sluice_job="job-curl", worker="0") != v:
            fail("curl: trainer %s = %s, want %s" % (name, value(ts, name), v))
    check_histogram(ts, "sluice_trainer_step_input_wait_seconds", steps, "curl")
    check_histogram(ts, "sluice_trainer_step_seconds", steps - 1, "curl")
    if abs(value(ts, "sluice_trainer_input_wait_seconds_total") - sm["wait_s"]) > 0.0006:
        fail("curl: trainer input wait %s s, summary %s s" % (value(ts, "sluice_trainer_input_wait_seconds_total"),
                                                            sm["wait_s"]))
    if value(ts, "sluice_trainer_step_input_wait_seconds_sum") > value(ts, "sluice_trainer_input_wait_seconds_total"):
        fail("curl: the steps' waits sum past the total wait")
    info = [dict(ls)["hash"] for (n, ls) in ts if n == "sluice_trainer_weights_info"]
    if len(info) != 1 or not re.fullmatch(r"[0-9a-f]{16}", info[0]):
        fail("curl: weights_info %r" % info)
    # (the hash's value is checked against the steps' in the Prometheus case,
    # whose trainers are scraped mid-run; this run may be over between two
    # scrapes)
    ok("a run's exact counts (the feeder's final ones while it lingers): feeder %d pieces, trainer %d steps, histograms, = the summary" % (steps, steps))

    # other paths, other methods, hostile requests: a fresh feeder (the first has exited)
    feeder = spawn([FEEDER, "--job", job_path, "--listen", sock, "--threads", "1", "--metrics-listen", "127.0.0.1:0"],
                   log=log_path(tag, "feeder2"))
    fport = port_of(tag, "feeder2", feeder)
    base = "http://127.0.0.1:%d" % fport
    for path, method, want_code in (("/", "GET", 404), ("/metricsx", "GET", 404), ("/metrics", "POST", 405),
                                    ("/metrics", "DELETE", 405), ("/metrics", "PUT", 405)):
        code, _ = curl(base + path, "-X", method)
        if code != want_code:
            fail("curl: %s %s answered %d, want %d" % (method, path, code, want_code))
    r = subprocess.run(["curl", "-s", "-i", "-X", "POST", "--data", "x", base + "/metrics"], capture_output=True,
                       text=True, timeout=60)
    if "\nAllow: GET, HEAD\n" not in r.stdout:  # text mode: \r\n read as \n
        fail("curl: 405 without Allow: %r" % r.stdout[:300])
    code, text = curl(base + "/metrics", "-H", "X-Big: " + "b" * 40000)
    if code != 431:
        fail("curl: a 40 KB header answered %d, want 431" % code)
    if curl(base + "/metrics")[0] != 200:
        fail("curl: no answer after a hostile request")
    ok("404 for other paths, 405 with Allow for other methods, 431 for a huge header, then 200")

    # the port in use, an address that does not parse: both programs say so
    for who, args in (("feeder", [FEEDER, "--job", job_path, "--listen", "ipc://%s/other.sock" % TMP]),
                      ("trainer", trainer_args("ipc://%s/none.sock" % TMP, "job-curl", 0, 1, "x"))):
        r = subprocess.run(args + ["--metrics-listen", "127.0.0.1:%d" % fport], capture_output=True, text=True,
                           timeout=60)
        want = "--metrics-listen: 127.0.0.1:%d: bind: Address already in use" % fport
        if r.returncode != 1 or want not in r.stderr:
            fail("curl: %s on a port in use: exit %d, %r" % (who, r.returncode, r.stderr[-400:]))
        r = subprocess.run(args + ["--metrics-listen", "127.0.0.1:http"], capture_output=True, text=True, timeout=60)
        if r.returncode != 2 or "--metrics-listen: expected HOST:PORT" not in r.stderr:
            fail("curl: %s with a bad address: exit %d, %r" % (who, r.returncode, r.stderr[-400:]))
    feeder.terminate()
    wait(feeder, 30, "curl: the second feeder")
    ok("a port in use (exit 1) and an address that does not parse (exit 2), named, by feeder and trainer")


# ---------------------------------------------------------------- Prometheus

# The Prometheus case's own deadline, below its ctest TIMEOUT: a run that
# stalls fails here naming the wait and showing the logs (harness.fail),
# instead of being killed by ctest with nothing to read (it timed out once in
# CI, after its first check, with no log to say why)
PROM_BUDGET_S = 45
PROM_DEADLINE = [None]


def prom_left():
    return PROM_DEADLINE[0] - time.time() if PROM_DEADLINE[0] is not None else 60.0


def prom_query(pport, expr):
    url = "http://127.0.0.1:%d/api/v1/query?%s" % (pport, urllib.parse.urlencode({"query": expr}))
    while True:
        try:
            with urllib.request.urlopen(url, timeout=max(1.0, min(5.0, prom_left()))) as r:
                d = json.loads(r.read().decode())
            break
        except (socket.timeout, TimeoutError, urllib.error.URLError) as e:
            if prom_left() <= 0:
                fail("prometheus: query %s did not answer within the case's %d s: %s" % (expr, PROM_BUDGET_S, e))
            time.sleep(0.25)
    if d.get("status") != "success":
        fail("prometheus: query %s: %r" % (expr, d))
    return [(x["metric"], float(x["value"][1])) for x in d["data"]["result"]]


WATCH = []  # processes that must keep running while the test polls Prometheus


def prom_wait(pport, expr, cond, what):
    t0 = time.time()
    while True:
        res = prom_query(pport, expr)
        if cond(res):
            return res
        if prom_left() <= 0 or any(p.poll() is not None for p in WATCH):
            dead = ["%s exited %d" % (p.args[0], p.returncode) for p in WATCH if p.poll() is not None]
            fail("prometheus: %s (after %.1f s of the case's %d s; last %s = %r%s)" %
                 (what, time.time() - t0, PROM_BUDGET_S, expr, res, "; " + ", ".join(dead) if dead else ""))
        time.sleep(0.25)


def case_prometheus():
    harness.case()
    PROM_DEADLINE[0] = time.time() + PROM_BUDGET_S
    tag = "prom"
    N, W = 1600, 2
    files = bed.gen("data-prom", N, 4)
    job_path, job = bed.write_job("job-prom", files, shard_policy="data")  # G = 8, 2 epochs
    steps = 2 * N // 8  # per worker: G/W rows a step
    sock = "ipc://%s/%s.sock" % (TMP, tag)
    ring = ",".join("ipc://%s/%s-ring-%d.sock" % (TMP, tag, w) for w in range(W))
    pport, fport = free_port(), free_port()
    tports = [free_port() for _ in range(W)]
    cfg = os.path.join(TMP, "prometheus.yml")
    with open(cfg, "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
                "scrape_configs:\n"
                "  - job_name: sluice-feeder\n    static_configs:\n      - targets: ['127.0.0.1:%d']\n"
                "  - job_name: sluice-trainer\n    static_configs:\n      - targets: [%s]\n"
                % (fport, ", ".join("'127.0.0.1:%d'" % p for p in tports)))
    prom = spawn([PROMETHEUS, "--config.file", cfg, "--web.listen-address", "127.0.0.1:%d" % pport,
                  "--storage.tsdb.path", os.path.join(TMP, "tsdb")], log=log_path(tag, "prometheus"))
    while True:
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/-/ready" % pport, timeout=5) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if prom_left() <= 0 or prom.poll() is not None:
            fail("prometheus did not become ready (%d s)" % PROM_BUDGET_S)
        time.sleep(0.2)
    feeder = spawn([FEEDER, "--job", job_path, "--listen", sock, "--threads", "1",
                    "--metrics-listen", "127.0.0.1:%d" % fport, "--metrics-linger", "120"], log=log_path(tag, "feeder"))
    traces, trainers, weights = [], [], []
    for w in range(W):
        trace = os.path.join(TMP, "%s-trace-%d.jsonl" % (tag, w))
        traces.append(fifo(trace, pipe_size=4096))
        weights.append(os.path.join(TMP, "%s-w%d.npy" % (tag, w)))
        os.mkfifo(weights[-1])
        trainers.append(spawn(trainer_args(sock, "job-prom", w, W, tag,
                                           ["--ring", ring, "--trace", trace,
                                            "--metrics-listen", "127.0.0.1:%d" % tports[w]]),
                              log=log_path(tag, "trainer%d" % w), stdout=subprocess.PIPE, text=True))
    WATCH[:] = [prom] + trainers  # the feeder exits once a scrape has read its final figures
    # held mid-run by their traces: Prometheus sees both past step 3
    res = prom_wait(pport, "sluice_trainer_steps_total", lambda r: len(r) == W and all(v >= 3 for _, v in r),
                    "both workers scraped past step 3")
    held = {m["worker"]: v for m, v in res}
    if any(v >= steps for v in held.values()):
        fail("prometheus: the trainers were not held mid-run: %r" % held)
    ok("Prometheus scrapes the trainers mid-run (held at steps %s of %d, %.1f s into the case)" %
       (sorted(held.values()), steps, PROM_BUDGET_S - prom_left()))
    drains = [drain(fd) for fd in traces]
    # the final values: every step trained (the trainers now wait for their weights' reader)
    prom_wait(pport, "sluice_trainer_trained_steps_total",
              lambda r: len(r) == W and all(v == steps for _, v in r), "both workers' %d trained steps" % steps)
    prom_wait(pport, "sluice_feeder_pieces_total", lambda r: len(r) == 1 and r[0][1] == W * steps,
              "the feeder's %d pieces" % (W * steps))
    # a scrape after the last step: the series below hold the final values
    prom_wait(pport, "sluice_trainer_step_input_wait_seconds_count",
              lambda r: len(r) == W and all(v == steps for _, v in r), "the wait histograms' final counts")
    WATCH[:] = []
    got = {}
    for expr in ("sluice_feeder_pieces_total", "sluice_feeder_records_total", "sluice_feeder_sent_bytes_total",
                 "sluice_feeder_trainers_accepted_total",
                 "sluice_feeder_transport_pieces_total", "sluice_feeder_errors_total", "sluice_feeder_scan_records",
                 "sluice_trainer_steps_total", "sluice_trainer_samples_total", "sluice_trainer_received_bytes_total",
                 "sluice_trainer_pieces_total", "sluice_trainer_shm_pieces_total", "sluice_trainer_step_seconds_count",
                 "sluice_trainer_step_input_wait_seconds_count", "sluice_trainer_weights_info", "up"):
        got[expr] = prom_query(pport, expr)
    outs = []
    for w, t in enumerate(trainers):
        reader = weights_reader(weights[w])
        try:
            out, _ = t.communicate(timeout=max(5.0, prom_left()))
        except subprocess.TimeoutExpired:
            fail("prometheus: trainer %d did not exit within the case's %d s" % (w, PROM_BUDGET_S))
        reader.join(timeout=max(5.0, prom_left()))
        if t.returncode != 0:
            fail("prometheus: trainer %d exited %d" % (w, t.returncode))
        outs.append(summary_of(out))
    for th, _ in drains:
        th.join(timeout=max(5.0, prom_left()))
    if wait(feeder, max(5.0, prom_left()), "prometheus: the feeder") != 0:
        fail("prometheus: the feeder exited %d" % feeder.returncode)

    def one(expr, **labels):
        hits = [v for m, v in got[expr] if all(m.get(k) == str(x) for k, x in labels.items())]
        if len(hits) != 1:
            fail("prometheus: %d series %s%s: %r" % (len(hits), expr, labels, got[expr]))
        return hits[0]
    if sorted(m["job"] for m, v in got["up"] if v == 1) != ["sluice-feeder", "sluice-trainer", "sluice-trainer"]:
        fail("prometheus: targets up %r" % got["up"])
    by_worker = {o["worker"]: o for o in outs}
    for w, o in by_worker.items():
        if o["steps"] != steps:
            fail("prometheus: worker %d's summary %r" % (w, o))
        for expr, key in (("sluice_trainer_steps_total", "steps"), ("sluice_trainer_samples_total", "elements"),
                          ("sluice_trainer_received_bytes_total", "bytes"), ("sluice_trainer_pieces_total", "pieces"),
                          ("sluice_trainer_shm_pieces_total", "shm_pieces")):
            if one(expr, worker=w, sluice_job="job-prom", job="sluice-trainer") != o[key]:
                fail("prometheus: worker %d %s = %s, summary %s = %s" % (w, expr, one(expr, worker=w), key, o[key]))
        if one("sluice_trainer_step_input_wait_seconds_count", worker=w) != steps or \
                one("sluice_trainer_step_seconds_count", worker=w) != steps - 1:
            fail("prometheus: worker %d histogram counts" % w)
        hashes = [json.loads(x)["weights_hash"] for x in open(os.path.join(TMP, "%s-w%d.jsonl" % (tag, w)))]
        info = [m["hash"] for m, v in got["sluice_trainer_weights_info"] if m["worker"] == str(w) and v == 1]
        if len(info) != 1 or info[0] not in hashes:
            fail("prometheus: worker %d's weights hash %r is none of its steps' (%d lines)" % (w, info, len(hashes)))
    total = lambda key: sum(o[key] for o in outs)  # noqa: E731
    for expr, want in (("sluice_feeder_pieces_total", total("pieces")), ("sluice_feeder_records_total", total("elements")),
                       ("sluice_feeder_sent_bytes_total", total("bytes")),
                       ("sluice_feeder_trainers_accepted_total", W), ("sluice_feeder_scan_records", N)):
        if one(expr, sluice_job="job-prom", feeder=0, job="sluice-feeder") != want:
            fail("prometheus: %s = %s, want %s" % (expr, one(expr), want))
    if one("sluice_feeder_transport_pieces_total", transport="shm") != total("shm_pieces") or \
            one("sluice_feeder_transport_pieces_total", transport="copy") != total("pieces") - total("shm_pieces"):
        fail("prometheus: transport split %r, trainers' shm pieces %d" % (got["sluice_feeder_transport_pieces_total"],
                                                                      total("shm_pieces")))
    if any(v != 0 for _, v in got["sluice_feeder_errors_total"]) or len(got["sluice_feeder_errors_total"]) != 4:
        fail("prometheus: errors %r" % got["sluice_feeder_errors_total"])
    ok("Prometheus holds the run's exact counts: feeder %d pieces = the trainers' sum, %d steps each, histograms, "
       "weights hashes of real steps" % (total("pieces"), steps))
    prom.terminate()
    wait(prom, 10, "prometheus")


try:
    if MODE == "curl":
        case_curl()
    elif MODE == "prometheus":
        case_prometheus()
    else:
        fail("unknown mode %r" % MODE)
    bed.finish()
finally:
    if os.environ.get("SLUICE_KEEP_TMP") is None:  # set it to keep the logs and prometheus.yml
        bed.cleanup()
