#!/usr/bin/env python3
"""A real HTTP(S) server for the tests and benchmarks of remote files
(issue #28): Debian's nginx serving a folder, started on loopback or on a
host of the test bed (tests/cluster/netns.py).

Everything nginx writes (its configuration, pid file, error and access
logs, temporary files) is in a folder of its own; nothing under /etc,
/var or /run is read or written. nginx runs in the foreground (`daemon
off`), by default as one process (`master_process off`: nothing to leave
behind when its parent dies), or as a master with `workers` worker
processes. Static files are served with `sendfile`, and nginx answers
`Range` requests on them by itself (206 with the bytes asked for, 416
past the end), with keep-alive connections, and over TLS when given a
certificate (make_cert makes a test CA and a certificate signed by it).

Library:
    srv = nginx.start(ROOT)                          # loopback, a free port
    srv = nginx.start(ROOT, host="s0", net=net)      # on a test-bed host, port 8080
    srv = nginx.start(ROOT, tls=nginx.make_cert(DIR, ["127.0.0.1"]))
    srv.url                  -> "http://127.0.0.1:PORT" (or https://...)
    srv.url_of("a/b.tfrecord")  -> srv.url + "/a/b.tfrecord"
    srv.requests()           -> the access log: [{"uri", "status", "bytes", "range", "request_time"}, ...]
    srv.access_lines()       -> the access log's lines as nginx wrote them
    srv = nginx.start(ROOT, log_format='$connection $uri')   # a test's own access log line
    srv = nginx.start(ROOT, spawn=harness.spawn)     # started (and killed) by a test's harness
    srv.stop()               # also at exit; idempotent

start() raises Unavailable when there is no nginx (a test then exits 77:
skipped), RuntimeError when it does not start (with its error log).

Command line, for trying it by hand:
    tests/cluster/nginx.py ROOT [--port P] [--tls]
serves ROOT on 127.0.0.1 until Ctrl-C.
"""
import atexit
import ctypes
import ipaddress
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

NGINX = os.environ.get("SLUICE_NGINX", "/usr/sbin/nginx")
DEFAULT_PORT = 8080  # on a test-bed host (a fresh network namespace: every port is free)

# one line per request in the access log: the fields requests() reads
LOG_FORMAT = '$request_method $uri $status $body_bytes_sent $request_time "$http_range"'
_LOG_LINE = re.compile(r'(\S+) (\S+) (\d+) (\d+) ([\d.]+) "(.*)"$')


class Unavailable(Exception):
    """No nginx here (Debian: `apt-get install nginx`)."""


def free_port(addr="127.0.0.1"):
    """A TCP port free on addr now (bound and released: another process
    could take it before nginx does, which start() reports)."""
    with socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET) as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def _is_ip(name):
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


def _die_with_parent():
    """In the child, before exec: a session of its own, and SIGKILL when
    the process that started it dies (even by SIGKILL)."""
    os.setsid()
    ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


def make_cert(dirname, names=("127.0.0.1", "localhost")):
    """A test CA and a server certificate it signs, for names (IP addresses
    or DNS names, all in the certificate's subjectAltName), made with the
    openssl command in dirname. Returns {"ca": CA certificate (PEM, what a
    client trusts), "cert": server certificate, "key": its key}."""
    os.makedirs(dirname, exist_ok=True)
    p = {k: os.path.join(dirname, k + ".pem") for k in ("ca", "ca-key", "cert", "key", "csr")}
    ext = os.path.join(dirname, "san.cnf")
    san = ",".join(("IP:%s" if _is_ip(n) else "DNS:%s") % n for n in names)
    with open(ext, "w") as f:
        f.write("subjectAltName=%s\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
                "extendedKeyUsage=serverAuth\n" % san)

    def openssl(*args):
        r = subprocess.run(["openssl"] + list(args), capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("openssl %s: %s" % (args[0], r.stderr.strip()))

    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", p["ca-key"], "-out", p["ca"], "-days", "2", "-subj", "/CN=sluice test CA",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", p["key"], "-out", p["csr"], "-subj", "/CN=%s" % names[0])
    openssl("x509", "-req", "-in", p["csr"], "-CA", p["ca"], "-CAkey", p["ca-key"], "-CAcreateserial",
            "-out", p["cert"], "-days", "2", "-extfile", ext)
    return {"ca": p["ca"], "cert": p["cert"], "key": p["key"]}


def config(root, addr, port, tmp, tls=None, workers=0, log_format=LOG_FORMAT):
    """nginx.conf's text: root served on addr:port, every path in tmp, the
    access log's lines in log_format (nginx's log_format; no single quote)."""
    listen = "[%s]:%d" % (addr, port) if ":" in addr else "%s:%d" % (addr, port)
    lines = ["daemon off;",
             "master_process %s;" % ("on" if workers > 0 else "off"),
             "worker_processes %d;" % max(1, workers),
             "pid %s/nginx.pid;" % tmp,
             "lock_file %s/nginx.lock;" % tmp,
             "error_log %s/error.log warn;" % tmp]
    if workers > 0 and os.geteuid() == 0:
        lines.append("user root;")  # the workers read what root can (a test's 0700 folders)
    lines += ["events { worker_connections 1024; }",
              "http {",
              "  default_type application/octet-stream;",
              "  types { }",
              "  sendfile on;",
              "  tcp_nopush on;",
              "  keepalive_requests 100000;",
              "  keepalive_timeout 60s;",
              "  server_tokens off;",
              "  log_format sluice '%s';" % log_format,
              "  access_log %s/access.log sluice;" % tmp]
    for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        lines.append("  %s_temp_path %s/%s;" % (k, tmp, k))
    lines += ["  server {",
              "    listen %s%s;" % (listen, " ssl http2" if tls else ""),
              "    root %s;" % os.path.abspath(root)]
    if tls:
        lines += ["    ssl_certificate %s;" % os.path.abspath(tls["cert"]),
                  "    ssl_certificate_key %s;" % os.path.abspath(tls["key"])]
    lines += ["    location / { }", "  }", "}", ""]
    return "\n".join(lines)


class Server:
    def __init__(self, proc, root, addr, port, tmp, tls, owns_tmp, log_format=LOG_FORMAT):
        self.proc, self.root, self.addr, self.port, self.dir = proc, root, addr, port, tmp
        self.tls, self.log_format = tls, log_format
        self._owns_tmp = owns_tmp
        host = "[%s]" % addr if ":" in addr else addr
        self.url = "%s://%s:%d" % ("https" if tls else "http", host, port)
        self.error_log = os.path.join(tmp, "error.log")
        self.access_log = os.path.join(tmp, "access.log")

    def url_of(self, relpath):
        """The URL of root/relpath (relpath's characters as they are: the
        tests' file names need no escaping)."""
        return "%s/%s" % (self.url, relpath.lstrip("/"))

    def requests(self):
        """The requests served so far, from the access log, in order:
        {"method", "uri", "status", "bytes" (the body's), "request_time" (s),
        "range" (the Range header, "" when none)}. Only with the default
        log_format (start()'s): with another, access_lines()."""
        if self.log_format != LOG_FORMAT:
            raise RuntimeError("nginx: requests() reads the default access log format; this one is %r: "
                               "access_lines()" % self.log_format)
        out = []
        for line in self.access_lines():
            m = _LOG_LINE.match(line)
            if m:
                out.append({"method": m.group(1), "uri": m.group(2), "status": int(m.group(3)),
                            "bytes": int(m.group(4)), "request_time": float(m.group(5)),
                            "range": "" if m.group(6) == "-" else m.group(6)})
        return out

    def access_lines(self):
        """The access log's lines so far, as nginx wrote them (in the
        log_format start() was given), without their newlines. nginx
        writes a request's line when it is done with it."""
        try:
            with open(self.access_log) as f:
                return f.read().splitlines()
        except FileNotFoundError:
            return []

    def errors(self):
        """The error log's text."""
        try:
            with open(self.error_log) as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def alive(self):
        return self.proc.poll() is None

    def stop(self, timeout=10):
        """SIGTERM (nginx's fast shutdown), SIGKILL if it lingers; the
        folder nginx wrote in is removed when start() made it."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except OSError:
                pass
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except OSError:
                    pass
                self.proc.wait(timeout=timeout)
        if self._owns_tmp:
            shutil.rmtree(self.dir, ignore_errors=True)
            self._owns_tmp = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def _probe(addr, port, net, host, timeout):
    """Until a TCP connection to addr:port is accepted (from host's
    namespace when net is given), or timeout: True when it was."""
    code = ("import socket, sys, time\n"
            "end = time.time() + float(sys.argv[3])\n"
            "while True:\n"
            "    try:\n"
            "        socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1).close()\n"
            "        sys.exit(0)\n"
            "    except OSError:\n"
            "        if time.time() > end:\n"
            "            sys.exit(1)\n"
            "        time.sleep(0.02)\n")
    args = [sys.executable, "-c", code, addr, str(port), str(timeout)]
    if net is not None:
        return net.run(host, args, capture_output=True).returncode == 0
    return subprocess.run(args, capture_output=True).returncode == 0


def start(root, host="127.0.0.1", port=None, net=None, tls=None, workers=0, tmp=None, timeout=10,
          log_format=LOG_FORMAT, spawn=None):
    """Serve the folder root with nginx. Without net, host is the address
    to listen on (default 127.0.0.1; port None: a free one). With net (a
    netns.Cluster), host is one of its hosts: nginx runs in that host's
    namespace (through net.spawn: killed with the cluster) and listens on
    its address (port None: 8080). tls: {"cert", "key"} (make_cert's) to
    serve https (HTTP/1.1 and HTTP/2). workers: 0, one process; N > 0, a
    master and N workers. tmp: the folder for nginx's files (default: a
    new one, removed by stop()). log_format: the access log's line
    (nginx's log_format; requests() reads only the default one,
    access_lines() any). spawn (without net): what starts nginx instead of
    subprocess.Popen, called as spawn(args, log=PATH, preexec_fn=...) with
    PATH taking nginx's stdout and stderr, returning the Popen:
    tests/integration/harness.spawn, so that the test's harness owns the
    process (kills and reaps it in stop_all(), shows the log's tail when a
    case fails). Returns a Server once nginx accepts connections."""
    if not os.access(NGINX, os.X_OK):
        raise Unavailable("no nginx at %s (Debian: apt-get install nginx)" % NGINX)
    if not os.path.isdir(root):
        raise RuntimeError("nginx: the folder to serve is not there: %s" % root)
    addr = net.addr(host) if net is not None else host
    if port is None:
        port = DEFAULT_PORT if net is not None else free_port(addr)
    owns_tmp = tmp is None
    tmp = tempfile.mkdtemp(prefix="sluice-nginx-") if tmp is None else os.path.abspath(tmp)
    os.makedirs(tmp, exist_ok=True)
    conf = os.path.join(tmp, "nginx.conf")
    with open(conf, "w") as f:
        f.write(config(root, addr, port, tmp, tls, workers, log_format))
    args = [NGINX, "-p", tmp, "-e", os.path.join(tmp, "error.log"), "-c", conf]
    log = os.path.join(tmp, "stderr.log")
    if spawn is not None:
        if net is not None:
            raise ValueError("nginx.start: spawn is for loopback (net.spawn starts it on a host)")
        proc = spawn(args, log=log, preexec_fn=_die_with_parent)
    else:
        out = open(log, "w")
        try:
            if net is not None:
                proc = net.spawn(host, args, stdout=out, stderr=subprocess.STDOUT)
            else:
                proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                                        preexec_fn=_die_with_parent)
        finally:
            out.close()
    srv = Server(proc, root, addr, port, tmp, tls, owns_tmp, log_format)
    atexit.register(srv.stop)
    if not _probe(addr, port, net, host, timeout) or not srv.alive():
        why = srv.errors().strip()
        try:
            with open(os.path.join(tmp, "stderr.log")) as f:
                why = (why + "\n" + f.read()).strip()
        except OSError:
            pass
        srv._owns_tmp = False  # keep the logs for the reader
        srv.stop()
        raise RuntimeError("nginx did not start on %s:%d (its files in %s): %s" % (addr, port, tmp, why[-2000:]))
    return srv


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description="serve a folder with nginx on 127.0.0.1 until Ctrl-C")
    ap.add_argument("root")
    ap.add_argument("--port", type=int, default=None)
    ap.add_argument("--tls", action="store_true", help="https, with a test CA made in nginx's folder")
    a = ap.parse_args(argv)
    tls = make_cert(tempfile.mkdtemp(prefix="sluice-nginx-tls-")) if a.tls else None
    try:
        srv = start(a.root, port=a.port, tls=tls)
    except (Unavailable, RuntimeError) as e:
        print("nginx.py: %s" % e, file=sys.stderr)
        return 77 if isinstance(e, Unavailable) else 1
    print("serving %s at %s%s (logs in %s); Ctrl-C ends" % (
        a.root, srv.url, ", CA %s" % tls["ca"] if tls else "", srv.dir))
    sys.stdout.flush()
    try:
        srv.proc.wait()
    except KeyboardInterrupt:
        pass
    srv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
