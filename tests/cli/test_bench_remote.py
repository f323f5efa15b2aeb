#!/usr/bin/env python3
"""tools/bench_remote.py and tests/cluster/nginx.py, smoke-tested (issue #28
section 3; docs/bench.md, "Remote files"). No timing is asserted.

- nginx.py on loopback: a file served whole and by a Range (206, the bytes
  asked for), a second request on the same connection, https with the
  test CA of make_cert; the access log read back; nothing left at stop().
- The bench with the curl baseline alone (--only curl, one copy, one
  round, --json): exit 0, the JSON's shape, curl's bytes equal to the
  files' and fetched from nginx once.
- A contender that fails (the local feeder on a job whose image shape does
  not fit the shards): exit 1, the JSON still printed, the contender's
  error in it (naming the feeder's own message), curl still measured.
- --share 2 (the feeder serves worker 0 of 2 by range): its fetched bytes
  within 1.1x the share's records, the same-ranges curl baseline measured;
  --share 1 refused (exit 2).
- Without root: exit 77 and a SKIP line (setpriv, where there is one).

Root (the test bed's namespaces), nginx and curl are needed: without them,
exit 77 (skipped).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "cluster"))
import nginx  # noqa: E402

BENCH = os.path.join(ROOT, "tools", "bench_remote.py")
FMNIST = "/usr/share/datasets/fashion-mnist"
TMP = None  # the test's folder


def fail(msg):
    print("FAIL: %s" % msg)
    sys.exit(1)


def skip(msg):
    print("SKIP: %s" % msg)
    sys.exit(77)


def bench(build, *args):
    env = dict(os.environ, TMPDIR=TMP)  # what the bench keeps on failure (its logs) goes with the test
    p = subprocess.run([sys.executable, BENCH, build] + list(args), capture_output=True, text=True, timeout=120,
                       env=env)
    doc = None
    lines = p.stdout.strip().splitlines()
    if lines:
        try:
            doc = json.loads(lines[-1])
        except ValueError:
            pass
    return p, doc


def check_nginx(tmp, shard):
    www = os.path.join(tmp, "www")
    os.makedirs(www)
    shutil.copy(shard, os.path.join(www, "a.tfrecord"))
    with open(shard, "rb") as f:
        data = f.read()
    tls = nginx.make_cert(os.path.join(tmp, "tls"))
    for kw in ({}, {"tls": tls}):
        srv = nginx.start(www, **kw)
        u = srv.url_of("a.tfrecord")
        ca = ["--cacert", tls["ca"]] if kw else []
        whole, part = os.path.join(tmp, "whole"), os.path.join(tmp, "part")
        opts = ["-sS", "--fail", "-w", "%{http_code} %{num_connects}\\n"] + ca
        r = subprocess.run(["curl"] + opts + ["-o", whole, u, "--next"] + opts + ["-r", "100-199", "-o", part, u],
                           capture_output=True, text=True, timeout=30)
        codes = r.stdout.split()
        if r.returncode != 0 or codes != ["200", "1", "206", "0"]:
            fail("nginx %s: curl exited %d, statuses and new connections %s (want 200 1 206 0): %s"
                 % (srv.url, r.returncode, codes, r.stderr))
        with open(whole, "rb") as f, open(part, "rb") as g:
            if f.read() != data or g.read() != data[100:200]:
                fail("nginx %s: the bytes served differ from the file's" % srv.url)
        log = srv.requests()
        want = [("/a.tfrecord", 200, len(data), ""), ("/a.tfrecord", 206, 100, "bytes=100-199")]
        if [(q["uri"], q["status"], q["bytes"], q["range"]) for q in log] != want:
            fail("nginx %s: access log %s, want %s" % (srv.url, log, want))
        if kw and not srv.url.startswith("https://"):
            fail("nginx with tls: url %s" % srv.url)
        d = srv.dir
        srv.stop()
        if srv.alive() or os.path.exists(d):
            fail("nginx %s: still running or its folder %s left after stop()" % (srv.url, d))
    print("ok nginx.py: 200, Range 206, keep-alive, https with the test CA, the access log")


def main():
    if len(sys.argv) != 2:
        print("usage: test_bench_remote.py BUILD_DIR", file=sys.stderr)
        return 2
    build = os.path.abspath(sys.argv[1])
    if os.geteuid() != 0:
        skip("not root: the test bed's namespaces need CAP_SYS_ADMIN and CAP_NET_ADMIN")
    if not os.access(nginx.NGINX, os.X_OK) or not shutil.which("curl"):
        skip("no nginx (%s) or curl: apt-get install nginx curl" % nginx.NGINX)
    if not os.path.exists(os.path.join(FMNIST, "train-images-idx3-ubyte.gz")):
        skip("no Fashion-MNIST in %s (apt-get install dataset-fashion-mnist)" % FMNIST)
    global TMP
    tmp = TMP = tempfile.mkdtemp(prefix="sluice-test-remote-")
    try:
        data = os.path.join(tmp, "data")
        r = subprocess.run([os.path.join(build, "tools", "sluice-record"), "convert", "idx",
                            "--images", os.path.join(FMNIST, "t10k-images-idx3-ubyte.gz"),
                            "--labels", os.path.join(FMNIST, "t10k-labels-idx1-ubyte.gz"),
                            "--output-dir", data, "--prefix", "t", "--shards", "2", "--index"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            fail("sluice-record convert idx: %s" % r.stderr)
        shards = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".tfrecord"))
        size = sum(os.path.getsize(s) for s in shards)
        check_nginx(tmp, shards[0])

        glob = os.path.join(data, "t-*.tfrecord")
        p, doc = bench(build, "--files", glob, "--only", "curl", "--copies", "1", "--repeat", "1", "--json")
        if p.returncode != 0 or doc is None:
            fail("bench --only curl: exit %d, stdout %r, stderr %s" % (p.returncode, p.stdout, p.stderr))
        c = doc.get("contenders", {}).get("curl", {})
        shape = (doc.get("bench"), doc.get("rate"), doc.get("objects"), doc.get("bytes"), doc.get("records"),
                 sorted(doc.get("contenders", {})), doc.get("goal"), doc.get("goal_met"), len(c.get("seconds", [])),
                 c.get("fetched_bytes"))
        want = ("remote", "unshaped", 2, size, 10000, ["curl"], 0.9, None, 1, size)
        if shape != want or not c.get("bytes_per_s", 0) > 0:
            fail("bench --only curl: %r, want %r and bytes_per_s > 0: %s" % (shape, want, p.stdout))
        print("ok bench --only curl: %.1f MB/s unshaped, %d bytes fetched" % (c["bytes_per_s"] / 1e6,
                                                                             c["fetched_bytes"]))

        job = os.path.join(tmp, "bad-job.json")
        with open(os.path.join(ROOT, "examples", "fmnist-train.json")) as f:
            j = json.load(f)
        j["features"]["image"]["shape"] = [100]
        with open(job, "w") as f:
            json.dump(j, f)
        p, doc = bench(build, "--job", job, "--files", glob, "--only", "local", "--copies", "1", "--repeat", "2",
                       "--json")
        loc = (doc or {}).get("contenders", {}).get("local", {})
        err = loc.get("error", "")
        if p.returncode != 1 or "sluice-feeder exited 1" not in err or "image" not in err or \
                len(doc["contenders"]["curl"].get("seconds", [])) != 2 or "bytes_per_s" in loc:
            fail("bench with a failing contender: exit %d (want 1), stdout %r, stderr %s"
                 % (p.returncode, p.stdout, p.stderr[-2000:]))
        if "local FAILED" not in p.stderr:
            fail("bench with a failing contender: stderr does not name it: %s" % p.stderr[-2000:])
        print("ok bench with a failing contender: exit 1, its error in the JSON: %s" % err[:160])

        p, doc = bench(build, "--files", glob, "--only", "curl,feeder", "--copies", "1", "--repeat", "1", "--share",
                       "2", "--feeder-args", "--set use_index=true", "--json")
        fd = (doc or {}).get("contenders", {}).get("feeder", {})
        rem = fd.get("remote", {})
        if p.returncode != 0 or not 1.0 <= fd.get("ranges_over_share", 0) <= 1.1 or \
                not 1.0 <= fd.get("fetched_over_share", 0) <= 1.1 or not 0 < rem.get("record_bytes", 0) < size or \
                not fd.get("curl_ranges_bytes_per_s", 0) > 0 or rem.get("records_alone") != 0:
            fail("bench --share 2: exit %d, feeder %r: %s" % (p.returncode, fd, p.stderr[-1500:]))
        print("ok bench --share 2: fetched %.3fx the share's %d bytes of records (ranges %.3fx), %d requests" %
              (fd["fetched_over_share"], rem["record_bytes"], fd["ranges_over_share"], rem["requests"]))
        q = subprocess.run([sys.executable, BENCH, build, "--share", "1"], capture_output=True, text=True, timeout=30)
        if q.returncode != 2 or "--share W needs 2 <= W <= 64" not in q.stderr:
            fail("bench --share 1: exit %d (want 2), %r" % (q.returncode, q.stderr))
        print("ok bench --share 1 refused: %s" % q.stderr.strip().splitlines()[-1])

        if shutil.which("setpriv"):
            q = subprocess.run(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
                                sys.executable, BENCH, build], capture_output=True, text=True, timeout=30)
            if q.returncode != 77 or not q.stdout.startswith("SKIP: bench_remote needs root"):
                fail("bench without root: exit %d (want 77), %r %r" % (q.returncode, q.stdout, q.stderr))
            print("ok bench without root: exit 77, %s" % q.stdout.strip())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("6 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
