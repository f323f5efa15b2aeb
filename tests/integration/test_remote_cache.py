#!/usr/bin/env python3
"""The feeder's disk cache of remote files (issue #28: --cache-dir,
--cache-bytes): 6 indexed shards served by Debian's nginx, read whole
(--remote-reads whole) through an image cache that holds two at a time, so
every epoch fetches each shard again unless the disk cache has it; the
disk cache has room for 2 of the 6.

- Two epochs: the client gets the local run's elements; the first two
  shards are kept (the others do not fit: "full"), and the second epoch
  reads those two from disk: nginx sends shards 1-2 once and 3-6 twice.
- A second run on the same directory: the two are read from disk at once
  (a cache that outlives its feeder), nothing kept anew.
- A damaged entry (cut short) is dropped and its shard fetched again.
- Shard 1 replaced on the server: its old entry is never read (the ETag is
  in its name), the new object is kept in its place; the client gets the
  new data.
- --cache-dir naming a regular file, --cache-bytes without --cache-dir:
  refused, named.

    python3 tests/integration/test_remote_cache.py BUILD_DIR [BIN_BUILD_DIR]
"""
import glob
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cluster"))
import bed  # noqa: E402
import harness  # noqa: E402
import nginx  # noqa: E402  tests/cluster/nginx.py
from harness import fail, ok  # noqa: E402

N = 6


def run(tag, job_path, cache, cache_bytes):
    stats = os.path.join(bed.TMP, tag + ".stats")
    p, codes = bed.serve_client(tag, job_path, 1, bed.ELEMENTS_CLIENT, feeder_args=lambda j: (
        "--remote-reads", "whole", "--cache-dir", cache, "--cache-bytes", str(cache_bytes), "--stats", stats))
    if p.returncode != 0 or codes != [0]:
        fail("%s: client %s, feeder %s: %s %s" % (tag, p.returncode, codes, p.stdout[-300:],
                                                 bed.read_log(tag, "feeder0")[-1500:]))
    with open(stats) as f:
        return json.loads(p.stdout), json.load(f)["disk_cache"]


def gets(srv, names, since):
    """Bytes nginx sent per shard (GETs, the scan's 64-byte probes left out) since request `since`."""
    out = {n: 0 for n in names}
    for r in srv.requests()[since:]:
        n = r["uri"].lstrip("/")
        if r["method"] == "GET" and n in out and r["range"] != "bytes=0-63":
            out[n] += r["bytes"]
    return out


def main():
    bed.setup(sys.argv[1], "rcache")
    if len(sys.argv) > 2:
        bed.use_binaries(sys.argv[2])
    if not os.access(nginx.NGINX, os.X_OK):
        fail("no %s: this test needs Debian's nginx (apt-get install nginx-light; scripts/deps.sh does)" % nginx.NGINX)
    parts = bed.gen("data", 6 * 300, N, seed=43, image_bytes=1500)
    www = os.path.join(bed.TMP, "www")
    os.makedirs(www)
    names = ["s%d.tfrecord" % i for i in range(N)]
    for src, n in zip(parts, names):
        shutil.copy(src, os.path.join(www, n))
        subprocess.run([bed.RECORD, "index", os.path.join(www, n)], check=True, capture_output=True)
    size = {n: os.path.getsize(os.path.join(www, n)) for n in names}
    if not 2 * max(size.values()) < 1 << 20 < 3 * min(size.values()):
        fail("shards of %s bytes: two must fit the 1 MiB image cache, three must not" % size)
    try:
        srv = nginx.start(www, tmp=os.path.join(bed.TMP, "nginx"), spawn=harness.spawn)
    except (nginx.Unavailable, RuntimeError) as e:
        fail(str(e))
    feats = dict(bed.FEATURES, image={"dtype": "uint8", "shape": [1500], "from": "bytes"})
    keys = dict(epochs=2, use_index=True, inflate_cache_bytes=1 << 20, features=feats)
    local_job, _ = bed.write_job("local", [os.path.join(www, n) for n in names], **keys)
    remote_job, _ = bed.write_job("remote", [srv.url_of(n) for n in names], **keys)
    want = json.loads(bed.serve_client("local", local_job, 1, bed.ELEMENTS_CLIENT)[0].stdout)
    cache = os.path.join(bed.TMP, "cache")
    room = size[names[0]] + size[names[1]] + size[names[2]] // 2  # two shards, not three

    seen = len(srv.requests())
    got, dc = run("first", remote_job, cache, room)
    if got != want:
        fail("first run: %d elements, not the local run's %d" % (len(got), len(want)))
    sent = gets(srv, names, seen)
    expect = {n: size[n] * (1 if i < 2 else 2) for i, n in enumerate(names)}
    if sent != expect or (dc["kept"], dc["hits"], dc["full"], dc["entries"]) != (2, 2, 8, 2):
        fail("first run: nginx sent %s (want %s); disk cache %s (want 2 kept, 2 hits, 8 full, 2 entries)" %
             (sent, expect, dc))
    if len(glob.glob(os.path.join(cache, "*.obj"))) != 2 or dc["bytes"] != size[names[0]] + size[names[1]]:
        fail("first run: the cache holds %s, %s" % (os.listdir(cache), dc))
    ok("2 epochs, room for 2 of 6 shards: the local run's elements; shards 1-2 fetched once, 3-6 twice (%s)" % dc)

    seen = len(srv.requests())
    got, dc = run("again", remote_job, cache, room)
    sent = gets(srv, names, seen)
    if got != want or sent[names[0]] != 0 or sent[names[1]] != 0 or dc["hits"] != 4 or dc["kept"] != 0:
        fail("second run: nginx sent %s, disk cache %s (want shards 1-2 never fetched, 4 hits, 0 kept)" % (sent, dc))
    if "cache %s: 2 remote file(s)" % cache not in bed.read_log("again", "feeder0"):
        fail("second run: the feeder does not log the 2 kept files: %s" % bed.read_log("again", "feeder0")[-800:])
    ok("a second run: shards 1-2 read from the cache left by the first (4 hits, none fetched)")

    # a damaged entry: cut short, dropped, fetched again, kept again
    obj = sorted(glob.glob(os.path.join(cache, "*.obj")), key=os.path.getsize)[0]
    os.truncate(obj, 100)
    seen = len(srv.requests())
    got, dc = run("damaged", remote_job, cache, room)
    sent = gets(srv, names, seen)
    refetched = [n for n in names[:2] if sent[n] > 0]
    if got != want or len(refetched) != 1 or dc["kept"] != 1 or dc["hits"] != 3:
        fail("damaged entry: nginx sent %s, disk cache %s (want one of shards 1-2 fetched and kept again)" %
             (sent, dc))
    ok("an entry cut short: dropped, %s fetched again and kept (%s)" % (refetched[0], dc))

    # shard 1 replaced on the server
    new = bed.gen("new", 300, 1, seed=44, image_bytes=1500)[0]
    old_mtime = os.stat(os.path.join(www, names[0])).st_mtime_ns
    shutil.copy(new, os.path.join(www, names[0]))
    # nginx's ETag is the file's mtime in seconds and its size: a file of
    # the same size replaced within the second it was written keeps its
    # ETag (this test ran in 1.4 s once, and read the old entry); a real
    # replacement comes later, so its mtime is set a few seconds on
    later = old_mtime + 5 * 10**9
    os.utime(os.path.join(www, names[0]), ns=(later, later))
    subprocess.run([bed.RECORD, "index", os.path.join(www, names[0])], check=True, capture_output=True)
    want2 = json.loads(bed.serve_client("local2", bed.write_job("local2", [os.path.join(www, n) for n in names],
                                                                **keys)[0], 1, bed.ELEMENTS_CLIENT)[0].stdout)
    got, dc = run("replaced", remote_job, cache, room)
    if got != want2 or got == want or dc["kept"] != 1 or len(glob.glob(os.path.join(cache, "*.obj"))) != 2:
        fail("replaced: %d elements (the new local run's: %s), disk cache %s, files %s" %
             (len(got), got == want2, dc, os.listdir(cache)))
    ok("shard 1 replaced on the server: its old entry never read, the new one kept in its place (%s)" % dc)

    # refused
    plain = os.path.join(bed.TMP, "a-file")
    open(plain, "w").close()
    p = subprocess.run([bed.FEEDER, "plan", "--job", remote_job, "--workers", "1", "--replicas", "1", "--cache-dir",
                        plain], capture_output=True, text=True, timeout=60)
    if p.returncode == 0 or "--cache-dir %s: not a directory" % plain not in p.stderr:
        fail("--cache-dir on a file: exit %d, %r" % (p.returncode, p.stderr[-400:]))
    p = subprocess.run([bed.FEEDER, "--job", remote_job, "--listen", "ipc:///nonexistent/x", "--cache-bytes", "1G"],
                       capture_output=True, text=True, timeout=60)
    if p.returncode != 2 or "--cache-bytes needs --cache-dir" not in p.stderr:
        fail("--cache-bytes alone: exit %d, %r" % (p.returncode, p.stderr[-400:]))
    ok("refused: --cache-dir naming a file, --cache-bytes without --cache-dir")

    harness.stop_all()
    bed.finish()
    bed.cleanup()


if __name__ == "__main__":
    main()
