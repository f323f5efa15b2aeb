#!/usr/bin/env python3
"""A feeder reading http:// shards through a faulty proxy (issue #28
section 2): a small TCP proxy on loopback between the feeder and Debian's
nginx that spoils the first connections it carries, then passes the rest
untouched.

- truncate: the first 3 connections are closed after 100,000 bytes of the
  server's side (headers and a cut body): the feeder's reads are retried,
  each resuming at the first byte not received, and the Python client gets
  exactly the local run's elements;
- stall: the first 2 connections stop passing the server's bytes after
  100,000 of them and hold the connection open: the feeder's stall bound
  (--remote-stall-timeout-ms 400) ends each, the retry resumes, the
  elements are exact;
- truncate every connection with no retries (--remote-retries 0): the
  feeder fails at once with an error naming the URL and the cause, and the
  client with it: no hang.

    python3 tests/integration/test_remote_faults.py BUILD_DIR

nginx is required (scripts/deps.sh installs nginx-light).
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "cluster"))
import bed  # noqa: E402
import harness  # noqa: E402
import nginx  # noqa: E402
from harness import fail, ok  # noqa: E402

CUT = 100000
CLIENT = bed.ELEMENTS_CLIENT


class Proxy:
    """Loopback TCP proxy to upstream: the first `spoil` connections whose
    server side reaches CUT bytes get `mode` there ("truncate": closed;
    "stall": no byte passed after CUT, the connection held open), and every
    other byte passes untouched. spoiled counts the connections spoiled."""

    def __init__(self, upstream, mode, spoil):
        self.upstream, self.mode, self.spoil = upstream, mode, spoil
        self.conns = self.spoiled = 0
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while not self.done.is_set():
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.conns += 1
            u = socket.create_connection(self.upstream)
            threading.Thread(target=self.pump, args=(c, u, None), daemon=True).start()
            threading.Thread(target=self.pump, args=(u, c, self.mode), daemon=True).start()

    def take(self):
        """Whether this connection, reaching CUT bytes, is spoiled: the first `spoil` that do."""
        with self.lock:
            if self.spoiled >= self.spoil:
                return False
            self.spoiled += 1
            return True

    def pump(self, src, dst, bad):
        sent = 0
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if bad is not None and sent + len(data) >= CUT and self.take():
                    dst.sendall(data[:CUT - sent])
                    if bad == "stall":
                        self.done.wait(30)  # hold it open, passing nothing
                    break
                dst.sendall(data)
                sent += len(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self):
        self.done.set()
        self.sock.close()


def run(tag, job_path, extra, timeout=60):
    """A feeder (extra options) and the client: (client rc, its output, the feeder's exit status, its log,
    the client's seconds from the feeder's start to its own end)."""
    sock = os.path.join(bed.TMP, tag + ".sock")
    feeder = harness.spawn([bed.FEEDER, "--job", job_path, "--listen", "ipc://" + sock, "--threads", "2"] + extra,
                           log=bed.log_path(tag, "feeder0"))
    env = dict(os.environ, PYTHONPATH=os.path.join(bed.BUILD, "python"), PYTHONDONTWRITEBYTECODE="1")
    t0 = time.time()
    ended = []
    threading.Thread(target=lambda: ended.append((feeder.wait(), time.time() - t0)), daemon=True).start()
    try:
        p = subprocess.run(["/usr/bin/python3", "-c", CLIENT, tag, "ipc://" + sock], capture_output=True, text=True,
                           env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        fail("%s: the client did not finish within %d s (a hang):\n%s" % (tag, timeout,
                                                                         bed.read_log(tag, "feeder0")[-1500:]))
    client_s = time.time() - t0
    code = bed.wait(feeder, 30, tag + ": feeder")
    while not ended:
        time.sleep(0.01)
    return p.returncode, p.stdout, code, bed.read_log(tag, "feeder0"), client_s


def main():
    bed.setup(sys.argv[1], "faults")
    parts = bed.gen("data", 900, 3, seed=31, image_bytes=1000)
    www = os.path.join(bed.TMP, "www")
    os.makedirs(www)
    for f in parts:
        shutil.copy(f, www)
    names = [os.path.basename(f) for f in parts]
    if min(os.path.getsize(f) for f in parts) < 2 * CUT:
        fail("the shards must be larger than twice the cut")
    try:
        srv = nginx.start(www, tmp=os.path.join(bed.TMP, "nginx"), spawn=harness.spawn)
    except (nginx.Unavailable, RuntimeError) as e:
        fail(str(e))
    feats = dict(bed.FEATURES, image={"dtype": "uint8", "shape": [1000], "from": "bytes"})
    keys = dict(epochs=2, shuffle={"buffer": 64, "seed": 5}, features=feats)
    local_job, _ = bed.write_job("local", parts, **keys)
    rc, out, code, log, _ = run("local", local_job, [])
    if rc != 0 or code != 0:
        fail("local: client %d, feeder %d: %s" % (rc, code, log[-1500:]))
    want = json.loads(out)
    if len(want) != 2 * 900:
        fail("local: %d elements, want 1800" % len(want))

    quick = ["--remote-backoff-ms", "20", "--remote-backoff-max-ms", "100"]
    for mode, spoil, extra in (("truncate", 3, ["--remote-retries", "5"]),
                               ("stall", 2, ["--remote-retries", "5", "--remote-stall-timeout-ms", "400"])):
        harness.case()
        proxy = Proxy(("127.0.0.1", srv.port), mode, spoil)
        job, _ = bed.write_job(mode, ["http://127.0.0.1:%d/%s" % (proxy.port, n) for n in names], **keys)
        rc, out, code, log, took = run(mode, job, extra + quick)
        proxy.close()
        if rc != 0 or code != 0 or json.loads(out) != want:
            fail("%s: client %d, feeder %d, the elements %s the local run's:\n%s" %
                 (mode, rc, code, "differ from" if rc == 0 else "are not", log[-1500:]))
        if proxy.spoiled != spoil:
            fail("%s: the proxy spoiled %d connections of the %d it was to (the faults did not happen)" %
                 (mode, proxy.spoiled, spoil))
        ok("%s: %d connections spoiled after %d bytes, retried and resumed: the local run's 1800 elements (%.1f s)"
           % (mode, proxy.spoiled, CUT, took))

    harness.case()
    proxy = Proxy(("127.0.0.1", srv.port), "truncate", 1 << 30)
    job, _ = bed.write_job("noretry", ["http://127.0.0.1:%d/%s" % (proxy.port, n) for n in names], **keys)
    rc, out, code, log, took = run("noretry", job, ["--remote-retries", "0"] + quick)
    proxy.close()
    # the feeder fails at its scan and refuses trainers with its error (until
    # 10 s pass without one, then exits 1): the client ends at once, told why
    url = "http://127.0.0.1:%d/" % proxy.port
    lines = [x for x in log.splitlines() if ": error: " in x and url in x]
    if code == 0 or not lines or "1 attempt failed" not in lines[0]:
        fail("no retries: feeder exit %d, no error naming %s:\n%s" % (code, url, log[-1500:]))
    why = json.loads(out).get("error", "") if out.strip().startswith("{") else ""
    if rc != 3 or url not in why or "1 attempt failed" not in why or took > 5:
        fail("no retries: client exit %d after %.1f s, told %r" % (rc, took, out[-500:]))
    ok("every connection cut, no retries: the client refused in %.1f s with the feeder's error: %s" %
       (took, lines[0].split(": error: ")[1]))

    harness.stop_all()
    bed.finish()
    bed.cleanup()


if __name__ == "__main__":
    main()
