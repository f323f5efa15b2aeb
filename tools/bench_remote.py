#!/usr/bin/env python3
"""Remote files (issue #28 section 3): sluice reading a job's shards from an
HTTP server on another host of the test bed (tests/cluster/netns.py),
against curl downloading the same bytes over the same link, in the same
run.

    tools/bench_remote.py BUILD_DIR [--job FILE] [--files GLOB] [--copies 8]
                          [--repeat 3] [--rate RATE] [--only LIST] [--threads N]
                          [--feeder-args ARGS] [--nginx-workers N] [--port 8080]
                          [--timeout-s 600] [--keep] [--json]
                          [--share W] [--first-piece]

Two hosts: s0 runs Debian's nginx (tests/cluster/nginx.py: sendfile,
Range, keep-alive) serving the shards; c0 is the client. --rate shapes
both hosts' links (tc tbf, 4 MB burst, as tools/bench_testbed.py does),
e.g. 1gbit or 10gbit; unshaped, the veth link runs at the speed of memory
and the figures say how the processes share this machine's cores.

The shards: --files GLOB (comma-separated globs of local shards; the job's
features must fit them), else the job's `files` (relative to the current
folder), else, for a job whose files are not there, the Fashion-MNIST
training set converted to 8 indexed TFRecord shards as scripts/main-job.sh
does. The server's folder holds --copies links to each shard (and to its
.idx), so the data set can be made larger than the shards without using
more disk or memory: at 10gbit a start-up of 0.1 s is 5% of 2.5 GB.

Each round runs, on c0, one after the other (the order rotated each round):
  curl     the baseline: one curl process, every URL, keep-alive, to /dev/null
  verify   sluice-record verify URL...: every record of every object read
           through the formats, every CRC checked
  feeder   sluice-feeder, the job's files rewritten to the URLs, --set
           epochs=1, serving one sluice-trainer --model none (ipc://);
           every record must arrive
  local    the same feeder and trainer on the same files read locally (from
           the page cache: a reference, not bounded by the link)
Each is timed from its start to its end (for the feeder: from starting the
feeder to the trainer's exit): bytes/s = the files' bytes / that time, and
its ratio to curl's bytes/s in the same round. The report gives medians over
--repeat rounds and each round's ratio, the bytes nginx sent for each
(its access log), and whether the feeder meets issue #28's goal: >= 0.9x
curl. --only curl,verify,feeder,local picks contenders (curl always runs).

--share W: the feeders serve worker 0 of W with `shard_policy` "data" (a
share of about 1/W of every file; with `use_index`, read by range: the
feeder's --remote-reads auto); the feeder's and local's bytes/s are then
the share's bytes (the records the trainer got times the files' bytes
per record) over the time, and the report adds what was fetched (nginx's
access log, indexes included; and the feeder's ranges alone) over the
share's record bytes (the feeder's --stats; issue #28: <= 1.1x).

--first-piece: no contenders; the time from starting the feeder to a
Python client's first step (the client started and its imports done
before the feeder starts), --repeat times, on --copies
links to each shard (default here: 100 links to one indexed shard of
just over 1 GiB, generated: issue #28's 100 shards of 1 GiB); goal 2 s.

Root is needed (namespaces); without it, or without nginx, the script says
so and exits 77. A contender that fails (today: opening an http:// name
says the remote sources are not built yet) is reported with its error and
not run again; the other contenders go on, and the exit status is then 1.
"""
import argparse
import glob
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "cluster"))
import netns  # noqa: E402
import nginx  # noqa: E402

CONTENDERS = ["curl", "verify", "feeder", "local"]
FMNIST = "/usr/share/datasets/fashion-mnist"
GOAL = 0.9  # issue #28: the feeder >= 0.9x curl over the same link


class Failed(Exception):
    """A contender failed: the message says how (exit status, its error)."""


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build")
    ap.add_argument("--job", default=os.path.join(ROOT, "examples", "fmnist-train.json"))
    ap.add_argument("--files", default=None, help="comma-separated globs of local shards (default: the job's files)")
    ap.add_argument("--copies", type=int, default=None,
                    help="links to each shard the server serves (default 8; --first-piece: 100)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds (default 3); medians over them")
    ap.add_argument("--rate", default=None, help="shape both hosts' links to this rate (tc tbf), e.g. 1gbit")
    ap.add_argument("--only", default=",".join(CONTENDERS),
                    help="contenders, from %s (curl, the baseline, always runs)" % ",".join(CONTENDERS))
    ap.add_argument("--threads", type=int, default=0, help="the feeder's --threads (default: its own)")
    ap.add_argument("--feeder-args", default="",
                    help="more options for both feeders (split as a shell would), e.g. \"--remote-retries 2\"")
    ap.add_argument("--nginx-workers", type=int, default=0,
                    help="0: nginx as one process (default); N: a master and N workers")
    ap.add_argument("--port", type=int, default=nginx.DEFAULT_PORT, help="the server's port (default 8080)")
    ap.add_argument("--timeout-s", type=float, default=600, help="the longest one contender may take (default 600)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the logs folder (each program's log, nginx's access log with every Range asked)")
    ap.add_argument("--json", action="store_true", help="one JSON object at the end")
    ap.add_argument("--epochs", type=int, default=1,
                    help="epochs the feeders serve (default 1); bytes/s count the files' bytes once an epoch")
    ap.add_argument("--share", type=int, default=0,
                    help="W >= 2: serve worker 0 of W, shard_policy data (the feeder reads a share of each file)")
    ap.add_argument("--first-piece", action="store_true",
                    help="time from the feeder's start to the trainer's first step (no contenders)")
    a = ap.parse_args()
    if a.copies is None:
        a.copies = 100 if a.first_piece else 8
    if a.epochs < 1 or a.epochs > 100:
        ap.error("--epochs must be 1 to 100")
    if a.share == 1 or a.share < 0 or a.share > 64:
        ap.error("--share W needs 2 <= W <= 64")
    if a.repeat < 1 or a.copies < 1 or a.copies > 1000:
        ap.error("--repeat must be at least 1, --copies between 1 and 1000")
    if a.threads < 0 or a.nginx_workers < 0 or a.nginx_workers > 16 or a.timeout_s <= 0:
        ap.error("--threads >= 0, --nginx-workers 0..16, --timeout-s > 0")
    try:
        a.feeder_args = shlex.split(a.feeder_args)
    except ValueError as e:
        ap.error("--feeder-args: %s" % e)
    a.only = [c for c in a.only.split(",") if c]
    bad = [c for c in a.only if c not in CONTENDERS]
    if bad:
        ap.error("--only: unknown contender %s (from %s)" % (", ".join(bad), ",".join(CONTENDERS)))
    a.only = [c for c in CONTENDERS if c == "curl" or c in a.only]
    return a


def say(msg):
    print("bench_remote: %s" % msg, file=sys.stderr)
    sys.stderr.flush()


def binary(a, *path):
    p = os.path.join(os.path.abspath(a.build), *path)
    if not os.access(p, os.X_OK):
        sys.exit("bench_remote: no executable %s (build first)" % p)
    return p


def tail(path, n=1500):
    try:
        with open(path, errors="replace") as f:
            return f.read()[-n:].strip()
    except OSError:
        return ""


def excerpt(path, lines=2):
    """A log's first lines (where the first error is), and how many more."""
    try:
        with open(path, errors="replace") as f:
            text = [line.rstrip() for line in f if line.strip()]
    except OSError:
        return "(no log)"
    if not text:
        return "(nothing logged)"
    more = len(text) - lines
    return " / ".join(x[:400] for x in text[:lines]) + (" (and %d more lines: %s)" % (more, path) if more > 0 else "")


def shards(a, job, tmp):
    """The local shards to serve: (sorted list of absolute paths, where from)."""
    pats = a.files.split(",") if a.files else job.get("files", [])
    if isinstance(pats, str):
        pats = [pats]
    files = []
    for p in pats:
        files += sorted(f for f in glob.glob(p) if os.path.isfile(f))
    if files:
        return [os.path.abspath(f) for f in files], "--files" if a.files else "the job's files"
    if a.files:
        sys.exit("bench_remote: --files %s matches no file" % a.files)
    src = [os.path.join(FMNIST, n) for n in ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz")]
    if not all(os.path.exists(s) for s in src):
        sys.exit("bench_remote: the job's files %s match nothing, and there is no Fashion-MNIST in %s to "
                 "convert (apt-get install dataset-fashion-mnist, or give --files)" % (pats, FMNIST))
    out = os.path.join(tmp, "data")
    r = subprocess.run([binary(a, "tools", "sluice-record"), "convert", "idx", "--images", src[0], "--labels", src[1],
                        "--output-dir", out, "--prefix", "train", "--shards", "8", "--index"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("bench_remote: sluice-record convert idx failed: %s" % r.stderr.strip())
    return sorted(glob.glob(os.path.join(out, "train-*.tfrecord"))), "Fashion-MNIST, converted (8 shards, indexed)"


def serve_dir(files, copies, tmp):
    """tmp/www holding copies links to each file (c000-NAME ...) and to its
    .idx when there is one. Returns the served names, in order."""
    www = os.path.join(tmp, "www")
    os.makedirs(www)
    names = []
    for k in range(copies):
        for f in files:
            n = "c%03d-%s" % (k, os.path.basename(f))
            if n in names:
                sys.exit("bench_remote: two shards are named %s: serve them from one folder" % os.path.basename(f))
            os.symlink(f, os.path.join(www, n))
            if os.path.exists(f + ".idx"):
                os.symlink(f + ".idx", os.path.join(www, n + ".idx"))
            names.append(n)
    return www, names


def shape(net, hosts, rate):
    for h in hosts:
        r = net.run(h, ["tc", "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate", rate, "burst", "4mb",
                        "latency", "50ms"], capture_output=True, text=True)
        if r.returncode != 0:
            net.down()
            sys.exit("bench_remote: cannot shape %s's link (tc qdisc tbf rate %s): %s" % (h, rate, r.stderr.strip()))


def finish(p, what, timeout, log):
    try:
        return p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        p.wait()
        raise Failed("%s did not finish within %g s: %s" % (what, timeout, tail(log)))


class Bench:
    def __init__(self, a, net, srv, tmp, names, total, records):
        self.a, self.net, self.srv, self.tmp = a, net, srv, tmp
        self.names, self.total, self.records = names, total, records
        self.urls = [srv.url_of(n) for n in names]
        self.local = [os.path.join(srv.root, n) for n in names]
        self.record = binary(a, "tools", "sluice-record")
        self.feeder = binary(a, "feeder", "sluice-feeder")
        self.trainer = binary(a, "trainer", "sluice-trainer")
        with open(a.job) as f:
            job = json.load(f)
        self.job_name = job["name"]
        self.jobs = {}
        for kind, files in (("feeder", self.urls), ("local", self.local)):
            j = dict(job, files=files)
            self.jobs[kind] = os.path.join(tmp, "job-%s.json" % kind)
            with open(self.jobs[kind], "w") as f:
                json.dump(j, f, indent=1)

    def run(self, name, rnd):
        """One contender once: {"seconds", "bytes_per_s", and for a remote
        one "fetched_bytes" and "requests" (what nginx served meanwhile)}."""
        seen = len(self.srv.requests())
        r = getattr(self, "run_" + name)(rnd, time.monotonic())
        r["bytes_per_s"] = r.get("served_bytes", self.total) / r["seconds"]
        if name != "local":
            served = self.srv.requests()[seen:]
            r["fetched_bytes"] = sum(q["bytes"] for q in served)
            r["requests"] = len(served)
            if name == "feeder" and self.a.share:  # the same ranges, fetched by curl at once after
                r["curl_ranges"] = self.curl_ranges(served, rnd)
        return r

    def curl_ranges(self, served, rnd):
        """--share's baseline: curl fetching exactly the ranges the feeder
        asked for (nginx's log of its run), as many at once as the feeder's
        --remote-requests (8 unless given), keep-alive: {"seconds",
        "bytes_per_s" (the ranges' bytes over the time), "requests"}."""
        ranges = [q for q in served if q["method"] == "GET" and q["range"].startswith("bytes=")]
        cfg, log = os.path.join(self.tmp, "curl-ranges-%d.cfg" % rnd), self.log("curl-ranges", rnd)
        with open(cfg, "w") as f:
            f.write("next\n".join('url = "%s%s"\nrange = "%s"\noutput = "/dev/null"\n' % (
                self.srv.url, q["uri"], q["range"][len("bytes="):]) for q in ranges))
        par = "8"
        if "--remote-requests" in self.a.feeder_args:
            par = self.a.feeder_args[self.a.feeder_args.index("--remote-requests") + 1]
        t0 = time.monotonic()
        p = self.net.spawn("c0", [shutil.which("curl"), "-sS", "--fail", "--parallel", "--parallel-max", par,
                                  "-K", cfg], log=log)
        code = finish(p, "curl (ranges)", self.a.timeout_s, log)
        secs = time.monotonic() - t0
        if code != 0:
            raise Failed("curl (the feeder's ranges) exited %d: %s" % (code, excerpt(log)))
        got = sum(q["bytes"] for q in ranges)
        return {"seconds": secs, "bytes_per_s": got / secs, "requests": len(ranges)}

    def log(self, name, rnd):
        return os.path.join(self.tmp, "%s-%d.log" % (name, rnd))

    def run_curl(self, rnd, t0):
        out, log = os.path.join(self.tmp, "curl-%d.out" % rnd), self.log("curl", rnd)
        args = [shutil.which("curl"), "-sS", "--fail", "-w", "%{size_download} %{time_total}\\n"]
        for u in self.urls:
            args += ["-o", "/dev/null", u]
        with open(out, "w") as o:
            p = self.net.spawn("c0", args, stdout=o, log=log)
            code = finish(p, "curl", self.a.timeout_s, log)
        secs = time.monotonic() - t0
        if code != 0:
            raise Failed("curl exited %d: %s" % (code, excerpt(log)))
        with open(out) as f:
            rows = [line.split() for line in f if line.strip()]
        got = sum(int(float(x[0])) for x in rows)
        if len(rows) != len(self.urls) or got != self.total:
            raise Failed("curl downloaded %d bytes in %d transfers, not %d in %d" % (
                got, len(rows), self.total, len(self.urls)))
        return {"seconds": secs, "transfer_seconds": sum(float(x[1]) for x in rows)}

    def run_verify(self, rnd, t0):
        out, log = os.path.join(self.tmp, "verify-%d.out" % rnd), self.log("verify", rnd)
        with open(out, "w") as o:
            p = self.net.spawn("c0", [self.record, "verify"] + self.urls, stdout=o, log=log)
            code = finish(p, "sluice-record verify", self.a.timeout_s, log)
        secs = time.monotonic() - t0
        summary = tail(out, 400).splitlines()[-1:] or [""]
        want = "verified %d files, %d records" % (len(self.urls), self.records)
        if code != 0 or not summary[0].startswith(want) or not summary[0].endswith(": 0 errors"):
            raise Failed("sluice-record verify exited %d (%s; want \"%s, ...: 0 errors\"): %s" % (
                code, summary[0] or "no summary", want, excerpt(log)))
        return {"seconds": secs}

    def feed(self, kind, rnd, t0):
        """A feeder on c0 (files: the URLs, or the same files locally) and
        one trainer --model none, over ipc://; the time from the feeder's
        start to the trainer's exit."""
        sock = "ipc://%s/%s-%d.sock" % (self.tmp, kind, rnd)
        flog, tlog = self.log(kind + "-feeder", rnd), self.log(kind + "-trainer", rnd)
        args = [self.feeder, "--job", self.jobs[kind], "--listen", sock, "--set", "epochs=%d" % self.a.epochs, "-q"]
        stats = os.path.join(self.tmp, "%s-feeder-%d.stats" % (kind, rnd))
        shard = []
        if self.a.share:  # worker 0 of W: the other workers never come; the feeder is stopped after
            args += ["--set", "shard_policy=data", "--workers", str(self.a.share), "--replicas", "1",
                     "--stats", stats]
            shard = ["--worker", "0", "--workers", str(self.a.share)]
        if self.a.threads:
            args += ["--threads", str(self.a.threads)]
        args += self.a.feeder_args
        f = self.net.spawn("c0", args, log=flog)
        out = os.path.join(self.tmp, "%s-trainer-%d.json" % (kind, rnd))
        with open(out, "w") as o:
            t = self.net.spawn("c0", [self.trainer, "--connect", sock, "--job", self.job_name, "--model", "none",
                                      "-q"] + shard, stdout=o, log=tlog)

            def watch():  # a feeder that fails ends the trainer's wait for it at once
                if f.wait() != 0:
                    self.net.kill(t)
            threading.Thread(target=watch, daemon=True).start()
            try:
                code = finish(t, "sluice-trainer", self.a.timeout_s, tlog)
            except Failed as e:
                self.net.kill(f)
                f.wait()
                raise Failed("%s; the feeder: %s" % (e, excerpt(flog)))
        secs = time.monotonic() - t0
        if self.a.share:
            self.net.kill(f, 15)
        try:
            fcode = finish(f, "sluice-feeder", 60, flog)
        except Failed as e:
            raise Failed("%s (the trainer exited %d)" % (e, code))
        if fcode != 0:
            raise Failed("sluice-feeder exited %d: %s" % (fcode, excerpt(flog)))
        if code != 0:
            raise Failed("sluice-trainer exited %d: %s; the feeder: %s" % (code, excerpt(tlog), excerpt(flog)))
        try:
            with open(out) as fo:
                s = json.loads(fo.read().splitlines()[-1])["summary"]
        except (ValueError, IndexError, KeyError) as e:
            raise Failed("the trainer's summary cannot be read (%s): %s" % (e, tail(out, 400)))
        r = {"seconds": secs, "stream_bytes_per_s": s["stream_bytes_per_s"]}
        if self.a.share:
            with open(stats) as fs:
                remote = json.load(fs)["remote"]
            r["served_bytes"] = self.share_bytes(s["elements"])
            if kind == "feeder":
                r["remote"] = remote
            return r
        if s["elements"] != self.records * self.a.epochs:
            raise Failed("the trainer got %d records, not %d" % (s["elements"], self.records * self.a.epochs))
        r["served_bytes"] = self.total * self.a.epochs
        return r

    def share_bytes(self, elements):
        """The bytes of the share's records: the files' bytes per record
        times the records the trainer got (every record of a generated or
        converted shard set is about the same size)."""
        return self.total * elements // self.records

    def run_feeder(self, rnd, t0):
        return self.feed("feeder", rnd, t0)

    def run_local(self, rnd, t0):
        return self.feed("local", rnd, t0)


def count_records(a, files):
    r = subprocess.run([binary(a, "tools", "sluice-record"), "count"] + files, capture_output=True, text=True)
    last = r.stdout.strip().splitlines()[-1:] or [""]
    if r.returncode != 0 or not last[0].startswith("total"):
        sys.exit("bench_remote: sluice-record count failed: %s" % r.stderr.strip())
    return int(last[0].split()[1])


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def summarize(runs, errors, name):
    if name in errors:
        return {"error": errors[name], "runs": runs[name]}
    rs = runs[name]
    if not rs:  # the baseline failed first
        return {"error": "not measured: curl, the baseline, failed", "runs": []}
    d = {"bytes_per_s": statistics.median(r["bytes_per_s"] for r in rs),
         "seconds": [round(r["seconds"], 4) for r in rs]}
    if name != "curl":
        d["ratio"] = statistics.median(r["ratio"] for r in rs)
        d["ratios"] = [round(r["ratio"], 4) for r in rs]
    for k in ("fetched_bytes", "requests", "stream_bytes_per_s", "transfer_seconds"):
        if k in rs[0]:
            d[k] = statistics.median(r[k] for r in rs)
    if "remote" in rs[0]:  # --share: what the feeder fetched against its share's records
        d["remote"] = rs[-1]["remote"]
        # against curl fetching the same ranges: the feeder's ranges' bytes/s over curl's
        d["curl_ranges_bytes_per_s"] = statistics.median(r["curl_ranges"]["bytes_per_s"] for r in rs)
        d["ratio_same_ranges"] = statistics.median(
            r["remote"]["bytes"] / r["seconds"] / r["curl_ranges"]["bytes_per_s"] for r in rs)
        d["fetched_over_share"] = statistics.median(r["fetched_bytes"] / r["remote"]["record_bytes"] for r in rs)
        d["ranges_over_share"] = statistics.median(r["remote"]["bytes"] / r["remote"]["record_bytes"] for r in rs)
    return d


FIRST_PIECE_GOAL = 2.0  # issue #28: the first piece within 2 s (http: no listing)
BIG_RECORD = 100 * 1024  # --first-piece's generated records: 100 KiB images
BIG_RECORDS = 10500  # ... just over 1 GiB in one shard


def big_shard(a, tmp):
    """One indexed TFRecord shard of just over 1 GiB (sluice-record gen)
    and a job for it."""
    out = os.path.join(tmp, "data")
    r = subprocess.run([binary(a, "tools", "sluice-record"), "gen", "--output-dir", out, "--records",
                        str(BIG_RECORDS), "--shards", "1", "--image-bytes", str(BIG_RECORD), "--prefix", "big"],
                       capture_output=True, text=True)
    files = sorted(glob.glob(os.path.join(out, "big-*")))
    if r.returncode != 0 or len(files) != 1:
        sys.exit("bench_remote: sluice-record gen failed: %s" % r.stderr.strip())
    r = subprocess.run([binary(a, "tools", "sluice-record"), "index", files[0]], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("bench_remote: sluice-record index failed: %s" % r.stderr.strip())
    job = {"name": "first-piece", "format": "tfrecord", "use_index": True, "global_batch_size": 32, "epochs": 1,
           "shuffle": {"buffer": 1000, "seed": 1},
           "features": {"image": {"dtype": "uint8", "shape": [BIG_RECORD], "from": "bytes"},
                        "label": {"dtype": "int64", "shape": []}, "id": {"dtype": "int64", "shape": []}}}
    path = os.path.join(tmp, "job-first-piece.json")
    with open(path, "w") as f:
        json.dump(job, f)
    return files, path


FIRST_CLIENT = r"""
import sys
import sluice
print("ready", flush=True)
with sluice.Client([sys.argv[1]], sys.argv[2], replicas=1) as c:
    for step in c:
        print("first", len(step.replicas[0]["id"]), flush=True)
        break
"""


def first_piece(a, net, srv, tmp, names, total):
    """--first-piece: from the feeder's start to the trainer's first
    step, --repeat times: (median seconds, [each round's (first step s,
    serving s)])."""
    with open(a.job) as f:
        job = json.load(f)
    jpath = os.path.join(tmp, "job-remote.json")
    with open(jpath, "w") as f:
        json.dump(dict(job, files=[srv.url_of(n) for n in names]), f)
    rounds = []
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.abspath(a.build), "python"), PYTHONDONTWRITEBYTECODE="1")
    for rnd in range(a.repeat):
        sock = "ipc://%s/first-%d.sock" % (tmp, rnd)
        flog, clog = os.path.join(tmp, "first-feeder-%d.log" % rnd), os.path.join(tmp, "first-client-%d.log" % rnd)
        out = os.path.join(tmp, "first-client-%d.out" % rnd)
        # the Python client, its imports done before the clock starts; it
        # says "first" once it holds the first step's batch
        with open(out, "w") as o:
            c = net.spawn("c0", ["/usr/bin/python3", "-c", FIRST_CLIENT, sock, job["name"]], stdout=o, log=clog,
                          env=env)
        deadline = time.monotonic() + 60
        while "ready" not in tail(out, 100) and c.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        t0 = time.monotonic()
        f = net.spawn("c0", [binary(a, "feeder", "sluice-feeder"), "--job", jpath, "--listen", sock]
                      + (["--threads", str(a.threads)] if a.threads else []) + a.feeder_args, log=flog)
        serving = first = None
        while first is None and time.monotonic() - t0 < a.timeout_s:
            if serving is None and "serving job" in tail(flog, 100000):
                serving = time.monotonic() - t0
            if "first" in tail(out, 100):
                first = time.monotonic() - t0
            if f.poll() is not None or c.poll() is not None:
                break
            time.sleep(0.002)
        for p in (c, f):
            net.kill(p)
            p.wait()
        if first is None:
            net.down()
            sys.exit("bench_remote: round %d: no first step within %g s: the feeder: %s; the client: %s %s" % (
                rnd, a.timeout_s, excerpt(flog), tail(out, 300), excerpt(clog)))
        say("round %d: first step %.3f s after the feeder's start (serving after %.3f s)" % (rnd, first, serving or 0))
        rounds.append((first, serving))
    return statistics.median(x[0] for x in rounds), rounds


def main():
    a = parse()
    a.job = os.path.abspath(a.job)
    if os.geteuid() != 0:
        print("SKIP: bench_remote needs root: the test bed's network namespaces need CAP_SYS_ADMIN and "
              "CAP_NET_ADMIN (docs/testbed.md)")
        sys.exit(netns.SKIP)
    if not os.access(nginx.NGINX, os.X_OK) or not shutil.which("curl"):
        print("SKIP: bench_remote needs nginx (%s) and curl: apt-get install nginx curl" % nginx.NGINX)
        sys.exit(netns.SKIP)
    with open(a.job) as f:
        job = json.load(f)
    tmp = tempfile.mkdtemp(prefix="sluice-remote-")
    if a.first_piece and not a.files:
        files, a.job = big_shard(a, tmp)
        origin = "one generated shard of %d records of %d KiB, indexed" % (BIG_RECORDS, BIG_RECORD // 1024)
        with open(a.job) as f:
            job = json.load(f)
    else:
        files, origin = shards(a, job, tmp)
    www, names = serve_dir(files, a.copies, tmp)
    total = sum(os.path.getsize(f) for f in files) * a.copies
    records = count_records(a, files) * a.copies
    net = netns.require(["s0", "c0"])
    if a.rate:
        shape(net, ["s0", "c0"], a.rate)
    try:
        srv = nginx.start(www, host="s0", net=net, port=a.port, workers=a.nginx_workers,
                          tmp=os.path.join(tmp, "nginx"))
    except (nginx.Unavailable, RuntimeError) as e:
        net.down()
        sys.exit("bench_remote: %s" % e)
    if a.first_piece:
        load0 = loadavg()
        say("%d objects of %.2f GB (%s) on s0 (%s), %s link, %d rounds; logs in %s" % (
            len(names), total / len(names) / 1e9, origin, srv.url, a.rate or "unshaped", a.repeat, tmp))
        med, rounds = first_piece(a, net, srv, tmp, names, total)
        net.down()
        doc = {"bench": "remote-first-piece", "rate": a.rate or "unshaped", "objects": len(names), "bytes": total,
               "data": origin, "repeat": a.repeat, "load": [load0, loadavg()], "first_step_s": med,
               "rounds": [{"first_step_s": x, "serving_s": y} for x, y in rounds], "goal_s": FIRST_PIECE_GOAL,
               "goal_met": med <= FIRST_PIECE_GOAL}
        if a.json:
            print(json.dumps(doc))
        else:
            print("first piece: %d objects, %.1f GB, %s link: the trainer's first step %.3f s after the feeder's "
                  "start (median of %d; serving after %s s); goal (issue #28) <= %.1f s: %s" % (
                      len(names), total / 1e9, doc["rate"], med, a.repeat,
                      ", ".join("%.3f" % (y or 0) for _, y in rounds), FIRST_PIECE_GOAL,
                      "met" if doc["goal_met"] else "NOT met"))
        shutil.rmtree(os.path.join(tmp, "data"), ignore_errors=True)
        shutil.rmtree(os.path.join(tmp, "www"), ignore_errors=True)
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        return
    b = Bench(a, net, srv, tmp, names, total, records)
    load0 = loadavg()
    say("%d files (%s) x %d copies = %d objects, %.1f MB, %d records; nginx on s0 (%s), the client on c0, "
        "%s link; %d rounds; logs in %s" % (len(files), origin, a.copies, len(names), total / 1e6, records,
                                            srv.url, a.rate or "unshaped", a.repeat, tmp))
    runs = {c: [] for c in a.only}
    errors = {}
    for rnd in range(a.repeat):
        order = a.only[rnd % len(a.only):] + a.only[:rnd % len(a.only)]
        got = {}
        for c in order:
            if c in errors:
                continue
            try:
                got[c] = b.run(c, rnd)
            except Failed as e:
                errors[c] = str(e)
                say("round %d: %s FAILED: %s" % (rnd, c, e))
                if c == "curl":
                    break
        if "curl" in errors:
            break
        for c, r in got.items():
            if c != "curl":
                r["ratio"] = r["bytes_per_s"] / got["curl"]["bytes_per_s"]
            runs[c].append(r)
        say("round %d: %s" % (rnd, ", ".join(
            "%s %.1f MB/s%s" % (c, got[c]["bytes_per_s"] / 1e6, " (%.3fx)" % got[c]["ratio"] if c != "curl" else "")
            for c in a.only if c in got)))
    load1 = loadavg()
    net.down()
    res = {c: summarize(runs, errors, c) for c in a.only}
    feeder = res.get("feeder", {})
    goal = None if "ratio" not in feeder else feeder["ratio"] >= GOAL
    doc = {"bench": "remote", "rate": a.rate or "unshaped", "server": "nginx", "nginx_workers": a.nginx_workers,
           "shards": len(files), "copies": a.copies, "objects": len(names), "bytes": total, "records": records,
           "data": origin, "repeat": a.repeat, "load": [load0, load1], "goal": GOAL, "goal_met": goal,
           "contenders": res}
    if a.json:
        print(json.dumps(doc))
    else:
        print("remote files: %d objects, %.1f MB, nginx on s0, client on c0, %s link, %d rounds (load %.1f -> %.1f)" % (
            len(names), total / 1e6, doc["rate"], a.repeat, load0, load1))
        for c in a.only:
            r = res[c]
            if "error" in r:
                print("  %-7s FAILED: %s" % (c, r["error"]))
                continue
            extra = "" if c == "curl" else "  %.3fx curl (rounds %s)" % (
                r["ratio"], ", ".join("%.3f" % x for x in r["ratios"]))
            if "fetched_over_share" in r:
                extra += (", fetched %.3fx the share's records (ranges alone %.3fx) in %d requests; the same "
                          "ranges by curl: %.1f MB/s, the feeder %.3fx that" % (
                              r["fetched_over_share"], r["ranges_over_share"], r["requests"],
                              r["curl_ranges_bytes_per_s"] / 1e6, r["ratio_same_ranges"]))
            elif "fetched_bytes" in r and c != "curl":
                extra += ", fetched %.3fx the files in %d requests" % (r["fetched_bytes"] / total, r["requests"])
            print("  %-7s %9.1f MB/s%s%s" % (c, r["bytes_per_s"] / 1e6, extra,
                                              "  (a reference: local files)" if c == "local" else ""))
        if "feeder" in res:
            print("goal (issue #28): the feeder >= %.1fx curl: %s" % (
                GOAL, "not measured" if goal is None else "met" if goal else "NOT met"))
    for d in ("www", "data"):  # the data; the logs stay when something failed
        shutil.rmtree(os.path.join(tmp, d), ignore_errors=True)
    if errors or a.keep:
        say("logs in %s" % tmp)
    if errors:
        sys.exit(1)
    if not a.keep:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
