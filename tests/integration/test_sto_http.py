#!/usr/bin/env python3
"""http(s):// sources (storage/sto_http.c, issue #28) against real servers
on loopback, read through tests/integration/sto_fetch.c:

- Debian's nginx serving files of random bytes (0, 1, 4096 and 5 MiB + 7
  bytes): whole sequential reads at several chunk sizes equal the files and
  cost one GET each; random ranges equal, on one kept-alive connection; a
  read past the end; 404; a file replaced between open and read; TLS with a
  CA made here by the openssl CLI (read with --ca-file, refused without).
- A hostile/faulty server (Python, threaded, on 127.0.0.1 and 127.0.0.2): a
  body cut short (resumed at the first byte not received), stalls, 503s,
  bodies longer than asked, Content-Length 2^63, endless headers, a redirect
  loop, a redirect to another host or scheme, 403 (no retry).

    python3 tests/integration/test_sto_http.py BUILD_DIR

nginx is required (scripts/deps.sh installs nginx-light): without it the
test fails saying so.
"""
import os
import random
import shutil
import socket
import socketserver
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cluster"))
import harness  # noqa: E402
import nginx  # noqa: E402  tests/cluster/nginx.py
from harness import fail, ok  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
FETCH = os.path.join(BUILD, "tests", "sto_fetch")
TMP = tempfile.mkdtemp(prefix="sluice-stohttp-")
WWW = os.path.join(TMP, "www")
rnd = random.Random(28)


def fetch(name, *args, timeout=30, stdin=None):
    """sto_fetch NAME ARGS -> (rc, stdout, stderr, the bytes read)."""
    out = os.path.join(TMP, "fetch.out")
    if os.path.exists(out):
        os.unlink(out)
    t0 = time.monotonic()
    try:
        p = subprocess.run([FETCH, "--out", out] + list(args) + [name], capture_output=True, text=True,
                           timeout=timeout, input=stdin)
    except subprocess.TimeoutExpired:
        fail("sto_fetch %s %s: no exit in %d s (a hang)" % (" ".join(args), name, timeout))
    fetch.elapsed = time.monotonic() - t0
    data = open(out, "rb").read() if os.path.exists(out) else b""
    return p.returncode, p.stdout, p.stderr, data


def expect_error(what, rc, err, want_rc, *parts):
    if rc != want_rc:
        fail("%s: exit %d (expected %d); stderr: %s" % (what, rc, want_rc, err.strip()))
    for part in parts:
        if part not in err:
            fail("%s: expected %r in the error, got: %s" % (what, part, err.strip()))


# ---- the files and nginx ----

if not os.access(nginx.NGINX, os.X_OK):
    fail("no %s: this test needs Debian's nginx (apt-get install nginx-light; scripts/deps.sh does)" % nginx.NGINX)
if shutil.which("openssl") is None:
    fail("no openssl CLI: this test makes its CA with it (apt-get install openssl)")
os.makedirs(WWW)
FILES = {}
for fname, size in (("f0", 0), ("f1", 1), ("f4096", 4096), ("big", 5 * 1024 * 1024 + 7)):
    FILES[fname] = rnd.randbytes(size)
    with open(os.path.join(WWW, fname), "wb") as f:
        f.write(FILES[fname])

# a test CA and a server certificate for 127.0.0.1 (EC keys: quick to make);
# nginx on two ports, each a process owned by the harness: http, and https
# (HTTP/1.1 and HTTP/2); each access log line: the connection's number
# first, the protocol last
LOG_FORMAT = '$connection $request_method $uri "$http_range" "$http_if_match" $status $server_protocol'
try:
    tls = nginx.make_cert(os.path.join(TMP, "tls"), ["127.0.0.1", "localhost"])
    srv = nginx.start(WWW, tmp=os.path.join(TMP, "nginx"), timeout=15, log_format=LOG_FORMAT, spawn=harness.spawn)
    tls_srv = nginx.start(WWW, tmp=os.path.join(TMP, "nginx-tls"), tls=tls, timeout=15, log_format=LOG_FORMAT,
                          spawn=harness.spawn)
except (nginx.Unavailable, RuntimeError) as e:
    fail(str(e))
ca = tls["ca"]
TLS_PORT = tls_srv.port
URL = srv.url + "/"


def access_lines(since, server=srv):
    """server's access log lines after the first `since` (nginx writes each
    when the request is done: wait a little for the last)."""
    time.sleep(0.1)
    return server.access_lines()[since:]


def access_count(server=srv):
    return len(server.access_lines())


# ---- nginx: whole objects, ranges, errors ----

harness.case()
for fname, data in FILES.items():
    chunks = (1, 7, 4096, 65536, 1000003, 8 << 20) if fname == "big" else (1, 7, 4096, 65536)
    for chunk in chunks:
        if fname == "big" and chunk == 1:
            continue  # 5 M calls: the small files cover a byte a call
        before = access_count()
        rc, out, err, got = fetch(URL + fname, "--chunk", str(chunk))
        if rc != 0:
            fail("%s chunk %d: exit %d: %s" % (fname, chunk, rc, err.strip()))
        if got != data:
            fail("%s chunk %d: %d bytes read, not the file's %d (or other bytes)" % (fname, chunk, len(got), len(data)))
        mtime = int(os.stat(os.path.join(WWW, fname)).st_mtime) * 1000000000
        if "open size=%d etag=\"" % len(data) not in out or "mtime_ns=%d\n" % mtime not in out:
            fail("%s: expected the size, a quoted ETag and Last-Modified %d, got %r" % (fname, mtime, out))
        gets = [ln for ln in access_lines(before) if " GET " in ln]
        # a first read under 256 KiB (STREAM_MIN) at 0 asks for its bytes
        # only (a probe of the head); the next one, continuing it, streams
        want = 0 if len(data) == 0 else 1 if chunk >= min(len(data), 256 << 10) else 2
        if len(gets) != want:
            fail("%s chunk %d: %d GETs for one sequential read (expected %d): %s" % (fname, chunk, len(gets), want,
                                                                                  gets))
ok("whole objects read sequentially at chunks 1 .. 8 MiB equal the files: one stream (and a first range under "
   "256 KiB)")
big = FILES["big"]

# a slow consumer: the stream waits paused between reads, longer than the
# stall bound, and is neither counted as stalled nor asked for again
before = access_count()
rc, out, err, got = fetch(URL + "big", "--chunk", str(2 << 20), "--pause-ms", "400", "--stall-ms", "250",
                          "--retries", "0")
if rc != 0 or got != big:
    fail("slow consumer: exit %d, %d bytes: %s" % (rc, len(got), err.strip()))
gets = [ln for ln in access_lines(before) if " GET " in ln]
if len(gets) != 1:
    fail("slow consumer: expected one GET, saw %s" % gets)
ok("a consumer slower than the stall bound: one paused stream, exact bytes")

ranges = []
at = 1
while len(ranges) < 20:
    off = rnd.randrange(at, len(big) - 1)
    n = rnd.choice((1, 100, 4096, 70000, 300000))
    if all(off != o + m and off + n != o for o, m in ranges):
        ranges.append((off, n))
ranges.append((len(big) - 10, 100))  # past the end: 10 bytes
ranges.append((len(big) + 5, 10))    # at or past the end: nothing
before = access_count()
args = []
for off, n in ranges:
    args += ["--range", "%d:%d" % (off, n)]
rc, out, err, got = fetch(URL + "big", *args)
if rc != 0:
    fail("random ranges: exit %d: %s" % (rc, err.strip()))
want = b"".join(big[off:off + n] for off, n in ranges)
if got != want:
    fail("random ranges: the bytes differ from the file's (%d read, %d expected)" % (len(got), len(want)))
if "read %d 100 10\n" % (len(big) - 10) not in out or "read %d 10 0\n" % (len(big) + 5) not in out:
    fail("a read past the end: expected 10 bytes and then none, got %r" % out)
lines = access_lines(before)
conns = set(ln.split()[0] for ln in lines)
if len([ln for ln in lines if " GET " in ln]) != 21 or len(conns) != 1:
    fail("random ranges: expected 21 GETs on one kept-alive connection, got %s" % lines)
ok("random ranges equal the file's bytes (one request each, one connection); a read past the end is short")

rc, out, err, got = fetch(URL + "nope")
expect_error("404", rc, err, 3, "open(%snope): HTTP 404 Not Found" % URL)
ok("a missing object: open(<url>): HTTP 404 Not Found")

# replaced between open and read: same size, other bytes, another mtime
p = subprocess.Popen([FETCH, "--wait", URL + "f4096"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, text=True)
first = p.stdout.readline()
if not first.startswith("open size=4096 etag="):
    fail("changed object: unexpected open line %r" % first)
old_etag = first.split("etag=")[1].split()[0]
path = os.path.join(WWW, "f4096")
with open(path + ".new", "wb") as f:
    f.write(rnd.randbytes(4096))
os.utime(path + ".new", (time.time() + 100, time.time() + 100))
os.rename(path + ".new", path)
try:
    out, err = p.communicate("go\n", timeout=30)
except subprocess.TimeoutExpired:
    p.kill()
    fail("changed object: sto_fetch hung")
expect_error("changed object", p.returncode, err, 4, "read(%sf4096) bytes [0, 4096)" % URL,
             "the object changed since open (ETag %s at open" % old_etag, "HTTP 412")
ok("an object replaced between open and read: the changed-object error with the ETag")

before = access_count(tls_srv)
rc, out, err, got = fetch("https://127.0.0.1:%d/big" % TLS_PORT, "--ca-file", ca, "--chunk", "100000")
if rc != 0 or got != big:
    fail("https with the test CA: exit %d, %d bytes: %s" % (rc, len(got), err.strip()))
rc, out, err, got = fetch("https://127.0.0.1:%d/big" % TLS_PORT, "--ca-file", ca, "--range", "1000:5000",
                          "--range", "3000000:70000", "--range", "%d:100" % (len(big) - 7))
if rc != 0 or got != big[1000:6000] + big[3000000:3070000] + big[-7:]:
    fail("https ranges with the test CA: exit %d, %d bytes: %s" % (rc, len(got), err.strip()))
lines = access_lines(before, tls_srv)
if len([ln for ln in lines if " GET " in ln]) != 5:
    fail("https: expected 5 GETs (the first 100000 bytes, one stream, 3 ranges), saw %s" % lines)
if not all(ln.endswith("HTTP/2.0") for ln in lines):
    fail("https: expected HTTP/2 (nginx has http2 on its TLS port), saw %s" % lines)
rc, out, err, got = fetch("https://127.0.0.1:%d/big" % TLS_PORT, "--retries", "1", "--backoff-ms", "1")
expect_error("https without the CA", rc, err, 3, "open(https://127.0.0.1:%d/big): TLS certificate refused" % TLS_PORT,
             "certificate")
rc, out, err, got = fetch("https://127.0.0.1:%d/big" % TLS_PORT, "--ca-file", ca, "--threads", "4", "--chunk",
                          "300000")
if rc != 0 or got != big or "threads 4 agree" not in out:
    fail("https from 4 threads at once: exit %d, %d bytes: %s" % (rc, len(got), err.strip()))
ok("https (HTTP/2): read with --ca-file (the test's CA), streamed, by ranges and from 4 threads at once; refused without it, named")

# connections outlive their source (issue #28): 4 threads each open, read
# and close an object 6 times; the closed sources' connections serve the
# next opens, whichever thread makes them: 4 connections at most, not one
# per open (48 requests: a HEAD and a GET each)
for label, server, base, extra in (("http", srv, URL, []),
                                   ("https", tls_srv, "https://127.0.0.1:%d/" % TLS_PORT, ["--ca-file", ca])):
    before = access_count(server)
    with open(os.path.join(WWW, "f4096"), "rb") as f:
        want = f.read()  # as the cases above left it
    rc, out, err, got = fetch(base + "f4096", "--threads", "4", "--rounds", "6", *extra)
    if rc != 0 or got != want or "threads 4 agree" not in out:
        fail("%s: 4 threads x 6 opens: exit %d, %d bytes: %s %s" % (label, rc, len(got), out.strip(), err.strip()))
    lines = access_lines(before, server)
    conns = set(ln.split(" ", 1)[0] for ln in lines)
    if len(lines) != 48 or len(conns) > 4:
        fail("%s: 4 threads x 6 opens: %d requests over %d connections, expected 48 over at most 4: %s" %
             (label, len(lines), len(conns), lines))
ok("connections reused across sources and threads: 4 threads x 6 opens, 48 requests over at most 4 connections "
   "(http and https)")

# ---- the hostile/faulty server ----

DATA = rnd.randbytes(300000)
N = len(DATA)
LOG = []  # (host, method, path, Range)
LOCK = threading.Lock()
RELEASE = threading.Event()  # stalled handlers wait for it (or 5 s)


def head(status, fields=""):
    return ("HTTP/1.1 %s\r\n%sConnection: close\r\n\r\n" % (status, fields)).encode()


def send_object(sock, method, rng, cut=None, cl_extra=0, cr_extra=0, body_extra=0, no_length=False):
    if method == "HEAD":
        sock.sendall(head("200 OK", 'Content-Length: %d\r\nETag: "h1"\r\n' % N))
        return
    if rng is None:
        sock.sendall(head("200 OK", 'Content-Length: %d\r\nETag: "h1"\r\n' % N) + DATA)
        return
    a, b = rng[len("bytes="):].split("-")
    a, b = int(a), min(int(b) if b else N - 1, N - 1)
    body = DATA[a:b + 1] + b"\0" * body_extra
    fields = "Content-Range: bytes %d-%d/%d\r\n" % (a, b + cr_extra, N)
    if not no_length:
        fields += "Content-Length: %d\r\n" % (len(body) + cl_extra)
    sock.sendall(head("206 Partial Content", fields + 'ETag: "h1"\r\n') + (body if cut is None else body[:cut]))


def behave(sock, host, method, path, rng, n):
    """What the server does for the n-th request (per method) of a path."""
    if path == "/ok":
        send_object(sock, method, rng)
    elif path == "/trunc":  # the first GET's body is cut after 100000 bytes
        send_object(sock, method, rng, cut=None if method == "HEAD" or n > 1 else 200000)
    elif path in ("/stall1", "/stall"):  # a GET stops after 10000 bytes (/stall1: the first only)
        if method == "GET" and (path == "/stall" or n == 1):
            send_object(sock, method, rng, cut=10000)
            RELEASE.wait(5)
        else:
            send_object(sock, method, rng)
    elif path == "/stallhead":  # never answers
        RELEASE.wait(5)
    elif path in ("/503", "/503always"):
        if method == "GET" and (path == "/503always" or n <= 2):
            sock.sendall(head("503 Service Unavailable", "Content-Length: 4\r\n") + b"busy")
        else:
            send_object(sock, method, rng)
    elif path == "/head405":
        if method == "HEAD":
            sock.sendall(head("405 Method Not Allowed", "Content-Length: 0\r\n"))
        else:
            send_object(sock, method, rng)
    elif path == "/longcl":
        send_object(sock, method, rng, body_extra=100)
    elif path == "/longrange":
        send_object(sock, method, rng, body_extra=100, cr_extra=100)
    elif path == "/longclose":
        send_object(sock, method, rng, body_extra=5000, no_length=True)
    elif path == "/reset":  # the first GET is reset (RST) after 100000 bytes
        if method == "GET" and n == 1:
            send_object(sock, method, rng, cut=100000)
            time.sleep(0.2)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()
        else:
            send_object(sock, method, rng)
    elif path == "/longetag":
        sock.sendall(head("200 OK", 'Content-Length: 10\r\nETag: "%s"\r\n' % ("e" * 200)))
    elif path == "/oneheader":  # one header line that never ends
        sock.sendall(b"HTTP/1.1 200 OK\r\nX-Long: ")
        for i in range(10000):
            sock.sendall(b"a" * 1000)
    elif path == "/huge":
        sock.sendall(head("200 OK", "Content-Length: 9223372036854775808\r\n"))
    elif path == "/headers":
        sock.sendall(b"HTTP/1.1 200 OK\r\n")
        for i in range(100000):
            sock.sendall(b"X-Junk-%d: %s\r\n" % (i, b"j" * 100))
    elif path == "/loop":
        sock.sendall(head("302 Found", "Location: /loop\r\nContent-Length: 0\r\n"))
    elif path == "/cross":
        sock.sendall(head("302 Found", "Location: http://127.0.0.2:%d/ok\r\nContent-Length: 0\r\n" % PORT2))
    elif path == "/longloc":  # a Location whose host hides behind 2000 bytes of user name
        sock.sendall(head("302 Found", "Location: http://127.0.0.1%s@127.0.0.2:%d/ok\r\nContent-Length: 0\r\n"
                          % ("x" * 2000, PORT2)))
    elif path == "/ftp":
        sock.sendall(head("302 Found", "Location: ftp://127.0.0.1/x\r\nContent-Length: 0\r\n"))
    elif path == "/403":
        sock.sendall(head("403 Forbidden", "Content-Length: 0\r\n"))
    elif path == "/403get":
        if method == "GET":
            sock.sendall(head("403 Forbidden", "Content-Length: 0\r\n"))
        else:
            send_object(sock, method, rng)
    else:
        sock.sendall(head("404 Not Found", "Content-Length: 0\r\n"))


class Hostile(socketserver.BaseRequestHandler):
    def handle(self):
        f = self.request.makefile("rb")
        line = f.readline(8192).decode("latin-1").split()
        if len(line) != 3:
            return
        hdrs = {}
        while True:
            h = f.readline(8192).decode("latin-1")
            if h in ("\r\n", "\n", ""):
                break
            k, _, v = h.partition(":")
            hdrs[k.strip().lower()] = v.strip()
        host = self.server.server_address[0]
        with LOCK:
            LOG.append((host, line[0], line[1], hdrs.get("range")))
            n = sum(1 for e in LOG if e[:3] == (host, line[0], line[1]))
        try:
            behave(self.request, host, line[0], line[1], hdrs.get("range"), n)
        except OSError:
            pass  # the client gave up (as it should, for the hostile ones)


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def serve(host):
    try:
        srv = Server((host, 0), Hostile)
    except OSError as e:
        fail("cannot listen on %s (loopback): %s" % (host, e))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, srv.server_address[1]


srv1, PORT1 = serve("127.0.0.1")
srv2, PORT2 = serve("127.0.0.2")
H = "http://127.0.0.1:%d" % PORT1
QUICK = ["--backoff-ms", "10", "--backoff-max-ms", "40", "--chunk", "262144"]  # reads of STREAM_MIN: one stream


def seen(path, method=None, host="127.0.0.1"):
    with LOCK:
        return [e for e in LOG if e[2] == path and e[0] == host and (method is None or e[1] == method)]


harness.case()
rc, out, err, got = fetch(H + "/trunc", *QUICK)
if rc != 0 or got != DATA:
    fail("truncated body: exit %d, %d bytes: %s" % (rc, len(got), err.strip()))
ranges_seen = [e[3] for e in seen("/trunc", "GET")]
if ranges_seen != ["bytes=0-%d" % (N - 1), "bytes=200000-%d" % (N - 1)]:
    fail("truncated body: expected the stream and its resumption at byte 200000, saw %s" % ranges_seen)
rc, out, err, got = fetch(H + "/reset", *QUICK)
if rc != 0 or got != DATA:
    fail("reset: exit %d, %d bytes: %s" % (rc, len(got), err.strip()))
ranges_seen = [e[3] for e in seen("/reset", "GET")]
if len(ranges_seen) != 2 or ranges_seen[0] != "bytes=0-%d" % (N - 1) or \
        not 0 < int(ranges_seen[1][6:].split("-")[0]) <= 100000:
    fail("reset: expected the stream and its resumption within the first 100000 bytes, saw %s" % ranges_seen)
ok("a body cut short is resumed at the first byte not received (bytes=200000-), a reset too (%s): exact bytes"
   % ranges_seen[1])

port = nginx.free_port()
rc, out, err, got = fetch("http://127.0.0.1:%d/x" % port, *QUICK, "--retries", "2")
expect_error("closed port", rc, err, 3, "open(http://127.0.0.1:%d/x): HEAD failed (3 attempts), the last: " % port,
             "port %d" % port)
ok("no server: 3 attempts, then the URL and curl's cause")

rc, out, err, got = fetch(H + "/stall1", *QUICK, "--stall-ms", "300")
if rc != 0 or got != DATA:
    fail("one stall: exit %d, %d bytes: %s" % (rc, len(got), err.strip()))
if [e[3] for e in seen("/stall1", "GET")] != ["bytes=0-%d" % (N - 1), "bytes=10000-%d" % (N - 1)]:
    fail("one stall: expected the stream and one resumed at byte 10000, saw %s" % seen("/stall1"))
rc, out, err, got = fetch(H + "/stall", *QUICK, "--stall-ms", "300", "--retries", "2", timeout=20)
expect_error("stalls", rc, err, 4, "read(%s/stall) bytes [0, 262144): 3 attempts failed" % H,
             "no byte received for 300 ms")
if fetch.elapsed > 5:
    fail("stalls: %.1f s to give up (3 x 300 ms stalls and backoff expected)" % fetch.elapsed)
if len(seen("/stall", "GET")) != 3:
    fail("stalls: expected 3 GETs, saw %s" % seen("/stall", "GET"))
rc, out, err, got = fetch(H + "/stallhead", *QUICK, "--stall-ms", "300", "--connect-ms", "300", "--retries", "1",
                          timeout=20)
expect_error("silent server", rc, err, 3, "open(%s/stallhead): HEAD failed (2 attempts), the last: no byte received" % H)
if fetch.elapsed > 5:
    fail("silent server: %.1f s to give up" % fetch.elapsed)
ok("a stall is retried and resumed; one that keeps stalling ends in %.1f s naming the URL" % fetch.elapsed)

rc, out, err, got = fetch(H + "/503", *QUICK, "--retries", "3")
if rc != 0 or got != DATA or len(seen("/503", "GET")) != 3:
    fail("503 twice: exit %d, %d bytes, %d GETs: %s" % (rc, len(got), len(seen("/503", "GET")), err.strip()))
rc, out, err, got = fetch(H + "/503always", *QUICK, "--retries", "2")
expect_error("503 always", rc, err, 4, "read(%s/503always) bytes [0, 262144): 3 attempts failed" % H,
             "HTTP 503 Service Unavailable")
if len(seen("/503always", "GET")) != 3:
    fail("503 always: expected 3 GETs, saw %d" % len(seen("/503always", "GET")))
ok("503 twice then OK: read after 3 GETs; 503 always: 3 attempts, the status named")

rc, out, err, got = fetch(H + "/head405", *QUICK)
if rc != 0 or got != DATA or "open size=%d" % N not in out:
    fail("HEAD refused: exit %d, %d bytes: %s" % (rc, len(got), err.strip()))
if [e[3] for e in seen("/head405", "GET")][:1] != ["bytes=0-0"]:
    fail("HEAD refused: expected a GET of bytes=0-0, saw %s" % seen("/head405"))
ok("HEAD refused (405): the size from a GET of bytes=0-0")

for path, what in (("/longcl", "Content-Length %d for Content-Range bytes 0-%d" % (N + 100, N - 1)),
                   ("/longrange", "the server sent bytes 0-%d for bytes=0-%d" % (N + 99, N - 1)),
                   ("/longclose", "the server sent more than the %d bytes asked" % N)):
    rc, out, err, got = fetch(H + path, *QUICK)
    # /longclose: the bytes within the range reach the reads before it; the excess ends the last one
    first = "[262144, %d)" % N if path == "/longclose" else "[0, 262144)"
    expect_error(path, rc, err, 4, "read(%s%s) bytes %s: " % (H, path, first), what)
    if len(seen(path, "GET")) != 1:
        fail("%s: a hostile body was retried: %s" % (path, seen(path, "GET")))
ok("bodies longer than asked: refused, named, not retried, nothing written past the buffer")

rc, out, err, got = fetch(H + "/huge", *QUICK)
expect_error("Content-Length 2^63", rc, err, 3, "open(%s/huge): Content-Length 9223372036854775808 is over 2^62" % H)
rc, out, err, got = fetch(H + "/headers", *QUICK, timeout=20)
expect_error("endless headers", rc, err, 3, "open(%s/headers): more than 65536 bytes of response headers" % H)
rc, out, err, got = fetch(H + "/oneheader", *QUICK, timeout=20)
expect_error("an endless header line", rc, err, 3, "open(%s/oneheader): a response header line too long" % H)
rc, out, err, got = fetch(H + "/longetag", *QUICK)
expect_error("a long ETag", rc, err, 3, "open(%s/longetag): the ETag is too long (at most 127 bytes)" % H)
ok("Content-Length 2^63, endless headers, an endless header line, a 202-byte ETag: refused at open, named")

rc, out, err, got = fetch(H + "/loop", *QUICK)
expect_error("redirect loop", rc, err, 3, "open(%s/loop): Maximum (5) redirects followed" % H)
if len(seen("/loop")) != 6:
    fail("redirect loop: expected 6 requests (5 redirects), saw %d" % len(seen("/loop")))
rc, out, err, got = fetch(H + "/cross", *QUICK)
expect_error("cross-host redirect", rc, err, 3, "open(%s/cross): a redirect to another host" % H,
             "http://127.0.0.2:%d/ok" % PORT2, "cross_host_redirects is off")
if seen("/ok", host="127.0.0.2"):
    fail("cross-host redirect: 127.0.0.2 was asked: %s" % seen("/ok", host="127.0.0.2"))
rc, out, err, got = fetch(H + "/cross", *QUICK, "--cross-host")
if rc != 0 or got != DATA:
    fail("cross-host redirect allowed: exit %d, %d bytes: %s" % (rc, len(got), err.strip()))
rc, out, err, got = fetch(H + "/ftp", *QUICK)
expect_error("ftp redirect", rc, err, 3, "open(%s/ftp): a redirect to 'ftp://127.0.0.1/x' (only http and https" % H)
rc, out, err, got = fetch(H + "/longloc", *QUICK)
expect_error("a long Location", rc, err, 3, "open(%s/longloc): a redirect URL over 1013 bytes" % H)
ok("a redirect loop (5 followed), another host (refused, allowed with cross_host_redirects), ftp, a 2 KB Location: "
   "named")

rc, out, err, got = fetch(H + "/403", *QUICK)
expect_error("403", rc, err, 3, "open(%s/403): HTTP 403 Forbidden" % H)
if len(seen("/403")) != 1:
    fail("403: expected exactly one request, saw %d" % len(seen("/403")))
rc, out, err, got = fetch(H + "/403get", *QUICK)
expect_error("403 on GET", rc, err, 4, "read(%s/403get) bytes [0, 262144): HTTP 403 Forbidden" % H)
if len(seen("/403get", "GET")) != 1:
    fail("403 on GET: expected exactly one GET, saw %d" % len(seen("/403get", "GET")))
ok("403 at open and at read: at once, one request each")

RELEASE.set()
harness.stop_all()
shutil.rmtree(TMP, ignore_errors=True)
print("%d passed, 0 failed" % harness.passed())
