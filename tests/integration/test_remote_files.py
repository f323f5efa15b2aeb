#!/usr/bin/env python3
"""A job whose files are http:// URLs (issue #28): served by Debian's nginx
on loopback, read by a real feeder through the storage seam, delivered to
the Python client exactly as the same job over the same files on local
disk delivers them (every element, its bytes, in the same order, two
shuffled epochs): a plain shard (read once: kept in the image cache as
its scan read it, its bytes sent once by nginx), a gzip shard (inflated
from the stream) and a plain shard read through its FILE.idx, fetched as
URL.idx. Then what is refused, by `sluice-feeder
plan`: a URL with glob characters, a URL that is not there (404, named);
and files replaced on the server after the scan: the one kept from its
scan is served as scanned, the other refused, naming both sizes and ETags.

    python3 tests/integration/test_remote_files.py BUILD_DIR [BIN_BUILD_DIR]

BIN_BUILD_DIR (a sanitizer build): its sluice-feeder and sluice-record,
with BUILD_DIR's Python package.

nginx is required (scripts/deps.sh installs nginx-light).
"""
import gzip
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cluster"))
import bed  # noqa: E402
import harness  # noqa: E402
import nginx  # noqa: E402  tests/cluster/nginx.py
from harness import fail, ok  # noqa: E402

CLIENT = bed.ELEMENTS_CLIENT


def elements(tag, job_path):
    p, codes = bed.serve_client(tag, job_path, 1, CLIENT)
    if p.returncode != 0 or codes != [0]:
        fail("%s: client %s, feeder %s: %s %s %s" % (tag, p.returncode, codes, p.stdout[-500:], p.stderr[-500:],
                                                    bed.read_log(tag, "feeder0")[-1500:]))
    return json.loads(p.stdout)


def plan(job_path):
    p = subprocess.run([bed.FEEDER, "plan", "--job", job_path, "--workers", "1", "--replicas", "1"],
                       capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout + p.stderr


def main():
    bed.setup(sys.argv[1], "remote")
    if len(sys.argv) > 2:
        bed.use_binaries(sys.argv[2])
    if not os.access(nginx.NGINX, os.X_OK):
        fail("no %s: this test needs Debian's nginx (apt-get install nginx-light; scripts/deps.sh does)" % nginx.NGINX)
    parts = bed.gen("data", 600, 3, seed=28)
    www = os.path.join(bed.TMP, "www")
    os.makedirs(www)
    names = ["a.tfrecord", "b.tfrecord.gz", "c.tfrecord"]
    shutil.copy(parts[0], os.path.join(www, names[0]))
    with open(parts[1], "rb") as f, gzip.open(os.path.join(www, names[1]), "wb") as g:
        g.write(f.read())
    shutil.copy(parts[2], os.path.join(www, names[2]))
    subprocess.run([bed.RECORD, "index", os.path.join(www, names[2])], check=True, capture_output=True)

    # nginx on loopback, a process of the harness's (stop_all() kills it)
    try:
        srv = nginx.start(www, tmp=os.path.join(bed.TMP, "nginx"), spawn=harness.spawn)
    except (nginx.Unavailable, RuntimeError) as e:
        fail(str(e))
    url = srv.url + "/"

    keys = dict(epochs=2, shuffle={"buffer": 64, "seed": 5}, use_index=True)
    local_job, _ = bed.write_job("local", [os.path.join(www, n) for n in names], **keys)
    remote_job, _ = bed.write_job("remote", [url + n for n in names], **keys)
    want = elements("local", local_job)
    got = elements("remote", remote_job)
    if len(want) != 2 * 600:
        fail("local: %d elements, want 1200" % len(want))
    if got != want:
        first = next(i for i in range(min(len(got), len(want))) if got[i] != want[i]) if got[:1] else 0
        fail("remote: %d elements differ from the local run's %d (first at %d: %s vs %s)" %
             (len(got), len(want), first, got[first:first + 1], want[first:first + 1]))
    log = bed.read_log("remote", "feeder0")
    if ": error:" in log or ": warning:" in log:
        fail("remote: the feeder logged an error or a warning: %s" % log[-1500:])
    ok("http: 3 shards (plain, gzip, plain with URL.idx), 2 epochs: the local run's 1200 elements, in order")
    # read once: the plain shard without an index is kept from its scan:
    # its bytes cross the link once for the scan and both epochs (the
    # first 64, the compression probe, by a range of their own, the rest
    # by one stream); the gzip one is fetched again to be inflated; the
    # indexed one is read at its first access (and 64 bytes at its scan)
    if "1 remote file(s) read once: kept in the cache as the scan read them" not in log:
        fail("remote: the feeder's log does not say one file was read once: %s" % log[-1500:])
    access = srv.requests()
    sent = {n: sum(r["bytes"] for r in access if r["method"] == "GET" and r["uri"] == "/" + n) for n in names}
    size = {n: os.path.getsize(os.path.join(www, n)) for n in names}
    if sent != {names[0]: size[names[0]], names[1]: 2 * size[names[1]], names[2]: 64 + size[names[2]]}:
        fail("remote: bytes sent per object %s, sizes %s: expected a once, b (gzip) twice, c (indexed) once "
             "and 64" % (sent, size))
    ok("read once: the plain shard's bytes sent once for the scan and both epochs (%s)" % sent)
    # requests per object, index included (issue #28): each URL.idx looked
    # for once (one open that is also its read; a 404: none), the object's
    # identity and the scan's probe from one open, the index's check from
    # that open's size; at the first access, the object opened again (its
    # size and ETag checked against the scan's) and read
    reqs = {}
    for r in access:
        reqs.setdefault(r["uri"].lstrip("/"), []).append(r["method"])
    reqs = {k: sorted(v) for k, v in reqs.items()}
    a, b, c = names
    want_reqs = {
        a: ["GET", "GET", "HEAD"],  # identity (the scan reads through it), probe, stream (kept)
        a + ".idx": ["HEAD"],  # 404: no index
        b: ["GET", "GET", "HEAD", "HEAD"],  # identity, the scan's probe and stream; at first access HEAD, GET
        b + ".idx": ["HEAD"],
        c: ["GET", "GET", "HEAD", "HEAD"],  # identity, probe (64 bytes); at first access HEAD, GET
        c + ".idx": ["GET", "HEAD"],  # found and read by one open
    }
    if reqs != want_reqs:
        fail("remote: requests per object %s, expected %s (6 for the indexed shard, its index included: "
             "10 before)" % (reqs, want_reqs))
    ok("requests per object: %d for the indexed shard with its index, %d for the plain one (%s)" %
       (len(reqs[c]) + len(reqs[c + ".idx"]), len(reqs[a]) + len(reqs[a + ".idx"]), reqs))

    # the server goes away between the scan and the first fetches (the
    # gzip and the indexed shard are fetched at their first access) and
    # comes back within the retries (backoff 100, 200, 400, 400 ... ms): the
    # fetches that found no server are retried, and the client gets the
    # local run's elements exactly
    sock = os.path.join(bed.TMP, "restart.sock")
    feeder = harness.spawn([bed.FEEDER, "--job", remote_job, "--listen", "ipc://" + sock, "--threads", "2",
                            "--remote-retries", "10", "--remote-backoff-ms", "100", "--remote-backoff-max-ms", "400"],
                           log=bed.log_path("restart", "feeder0"))
    bed.wait_for_log("restart", "feeder0", "serving job", feeder, "restart: the feeder did not start")
    srv.stop()
    env = dict(os.environ, PYTHONPATH=os.path.join(sys.argv[1], "python"), PYTHONDONTWRITEBYTECODE="1")
    t0 = time.time()
    client = subprocess.Popen(["/usr/bin/python3", "-c", CLIENT, "remote", "ipc://" + sock], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env)
    time.sleep(1.0)
    if client.poll() is not None:
        fail("restart: the client ended while the server was down: %s" % client.communicate()[0][-500:])
    try:
        srv = nginx.start(www, port=srv.port, tmp=os.path.join(bed.TMP, "nginx2"), spawn=harness.spawn)
    except (nginx.Unavailable, RuntimeError) as e:
        fail("restart: nginx did not start again: %s" % e)
    out, err = client.communicate(timeout=60)
    took = time.time() - t0
    bed.wait(feeder, 30, "restart: feeder")
    if client.returncode != 0 or json.loads(out) != want:
        fail("restart: client %d, %s: %s" % (client.returncode, (out or err)[-500:],
                                             bed.read_log("restart", "feeder0")[-1500:]))
    refetched = sorted(set(r["uri"] for r in srv.requests() if r["method"] == "GET"))
    if refetched != ["/" + names[1], "/" + names[2]]:
        fail("restart: the server back up served GETs of %s, expected the gzip and the indexed shard" % refetched)
    ok("the server down between the scan and the first fetches, back 1 s later: retried, the local run's 1200 "
       "elements (%.1f s; %s fetched after the restart)" % (took, refetched))

    # refused before anything is read: a URL with glob characters; a
    # missing URL fails at the scan, naming it and the status
    glob_job, _ = bed.write_job("glob", [url + "*.tfrecord"])
    rc, out = plan(glob_job)
    want_msg = "files: '%s*.tfrecord': http URLs cannot be globbed; list the files" % url
    if rc == 0 or want_msg not in out:
        fail("glob: rc %d, %r lacks %r" % (rc, out[-500:], want_msg))
    ok("http glob refused: %s" % want_msg)
    gone_job, _ = bed.write_job("gone", [url + names[0], url + "gone.tfrecord"])
    rc, out = plan(gone_job)
    want_msg = "open(%sgone.tfrecord): HTTP 404" % url
    if rc == 0 or want_msg not in out:
        fail("404: rc %d, %r lacks %r" % (rc, out[-500:], want_msg))
    ok("a missing URL named with its status: %s" % want_msg)

    # replaced on the server after the scan, before the first read. The
    # cache (1 MiB) holds one shard's scanned copy: the first (--threads 1
    # scans in order) is served as it was scanned; the second is fetched at
    # its first access, found changed and refused, naming both
    big = bed.gen("swap", 400, 2, seed=29, image_bytes=4096)
    os.makedirs(os.path.join(www, "r"))
    swapped = ["r/s0.tfrecord", "r/s1.tfrecord"]
    for src, dst in zip(big, swapped):
        shutil.copy(src, os.path.join(www, dst))
    feats = dict(bed.FEATURES, image={"dtype": "uint8", "shape": [4096], "from": "bytes"})
    swap_job, _ = bed.write_job("swap", [url + n for n in swapped], epochs=1, inflate_cache_bytes=1 << 20,
                                features=feats)
    sock = os.path.join(bed.TMP, "swap.sock")
    feeder = harness.spawn([bed.FEEDER, "--job", swap_job, "--listen", "ipc://" + sock, "--threads", "1"],
                           log=bed.log_path("swap", "feeder0"))
    bed.wait_for_log("swap", "feeder0", "serving job", feeder, "swap: the feeder did not start")
    sizes = [os.path.getsize(b) for b in big]
    if not (1 << 20) // 2 < min(sizes) <= max(sizes) <= 1 << 20:
        fail("swap: shards of %s bytes: each must fit the 1 MiB cache, two must not" % sizes)
    for dst in swapped:
        with open(os.path.join(www, dst), "ab") as f:
            f.write(b"more")
    env = dict(os.environ, PYTHONPATH=os.path.join(sys.argv[1], "python"), PYTHONDONTWRITEBYTECODE="1")
    p = subprocess.run(["/usr/bin/python3", "-c", CLIENT, "swap", "ipc://" + sock], capture_output=True, text=True,
                       env=env, timeout=60)
    bed.wait(feeder, 30, "swap: feeder")
    log = bed.read_log("swap", "feeder0")
    want_msg = "%s%s: changed since it was scanned (%d bytes, ETag " % (url, swapped[1], sizes[1])
    if p.returncode == 0 or want_msg not in log or "; now %d bytes, ETag " % (sizes[1] + 4) not in log:
        fail("swap: client %d (%s), the feeder's log lacks %r: %s" % (p.returncode, p.stdout[-300:], want_msg,
                                                                     log[-1500:]))
    if "1 remote file(s) read once" not in log or "%s%s: changed" % (url, swapped[0]) in log:
        fail("swap: the first shard was not served from its scanned copy: %s" % log[-1500:])
    ok("objects replaced after the scan: the one kept from its scan served as scanned, the other refused: %s" %
       [x for x in log.splitlines() if want_msg in x][0])

    harness.stop_all()
    bed.finish()
    bed.cleanup()


if __name__ == "__main__":
    main()
