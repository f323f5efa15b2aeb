#!/usr/bin/env python3
"""sluice-feeder tells systemd when it serves (issue #29 item 4; the
Type=notify unit deploy/systemd/sluice-feeder.service).

The feeder runs as systemd would run it: NOTIFY_SOCKET names a Unix
datagram socket that this test made and reads, as the service manager
does. Checked:
- READY=1 comes once, and only after the feeder logged that it serves
  (its scan done, its socket bound);
- on SIGTERM STOPPING=1 comes, and the feeder exits 0 (a server whose stop
  is its end);
- the same through an abstract socket ("@name", as systemd may give);
- a feeder that fails before serving (a job whose files do not exist)
  sends no READY=1;
- without NOTIFY_SOCKET the feeder serves as before (nothing to tell).
Skipped (77), saying why, when the build has no libsystemd
(SLUICE_WITH_SYSTEMD off or libsystemd-dev absent).

Usage: test_recipes_notify.py BUILD_DIR   (prints "N passed, 0 failed")
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

BUILD = os.path.abspath(sys.argv[1])
FEEDER = os.path.join(BUILD, "feeder", "sluice-feeder")
RECORD = os.path.join(BUILD, "tools", "sluice-record")
TMP = tempfile.mkdtemp(prefix="sluice-notify-")
passed = 0


def ok(what):
    global passed
    passed += 1
    print("ok %d - %s" % (passed, what))
    sys.stdout.flush()


def fail(what):
    print("FAIL: %s" % what, file=sys.stderr)
    print("%d passed, 1 failed" % passed, file=sys.stderr)
    shutil.rmtree(TMP, ignore_errors=True)
    sys.exit(1)


def check(cond, what):
    if not cond:
        fail(what)


def built_with_systemd():
    try:
        with open(os.path.join(BUILD, "CMakeCache.txt")) as f:
            return any(line.strip() == "SYSTEMD_FOUND:INTERNAL=1" for line in f)
    except OSError:
        return False


if not built_with_systemd():
    print("SKIP: this build has no libsystemd (libsystemd-dev, SLUICE_WITH_SYSTEMD): the feeder cannot notify")
    sys.exit(77)

p = subprocess.run([RECORD, "gen", "--output-dir", os.path.join(TMP, "d"), "--records", "200", "--shards", "2",
                    "--image-bytes", "16", "--classes", "4", "--prefix", "s"], capture_output=True, text=True)
check(p.returncode == 0, "sluice-record gen: %s" % p.stderr)
JOB = os.path.join(TMP, "job.json")
with open(JOB, "w") as f:
    f.write('{"name": "notify", "files": ["%s/d/s-*.tfrecord"], "format": "tfrecord", '
            '"features": {"image": {"dtype": "uint8", "shape": [16], "from": "bytes"}, '
            '"label": {"dtype": "int64", "shape": []}}, "global_batch_size": 10, "epochs": 1}' % TMP)


def manager_socket(name):
    """A datagram socket like the service manager's: a path, or an abstract
    name for '@name'. Returns (socket, NOTIFY_SOCKET value)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    if name.startswith("@"):
        s.bind("\0" + name[1:])
    else:
        s.bind(name)
    s.settimeout(0.2)
    return s, name


def messages(s):
    """Every datagram waiting on s, as lists of KEY=VALUE lines."""
    out = []
    while True:
        try:
            out.append(s.recv(4096).decode().split("\n"))
        except socket.timeout:
            return out


def start(job, env_extra, log):
    env = dict(os.environ)
    env.pop("NOTIFY_SOCKET", None)
    env.update(env_extra)
    return subprocess.Popen([FEEDER, "--job", job, "--listen", "ipc://%s/f.sock" % TMP, "--workers", "1",
                             "--replicas", "1", "--report-s", "0"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(log, "w"), env=env)


def wait_for(pred, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        r = pred()
        if r:
            return r
        time.sleep(0.05)
    fail("waited %d s for %s" % (seconds, what))


def ready_then_stopping(name):
    s, value = manager_socket(name)
    log = os.path.join(TMP, "feeder.log")
    proc = start(JOB, {"NOTIFY_SOCKET": value}, log)
    got = []

    def ready():
        got.extend(messages(s))
        return any("READY=1" in m for m in got)

    try:
        wait_for(ready, 30, "READY=1 on %s" % value)
        text = open(log).read()
        check("serving job 'notify'" in text, "READY=1 came before the feeder logged that it serves: %s" % text)
        check(sum(m.count("READY=1") for m in got) == 1, "READY=1 more than once: %s" % got)
        check(proc.poll() is None, "the feeder exited after READY=1")
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    got.extend(messages(s))
    s.close()
    check(rc == 0, "SIGTERM: exit status %d, not 0: %s" % (rc, open(log).read()[-500:]))
    check(any("STOPPING=1" in m for m in got), "no STOPPING=1 after SIGTERM: %s" % got)
    last_ready = max(i for i, m in enumerate(got) if "READY=1" in m)
    check(all("STOPPING=1" not in m for m in got[:last_ready]), "STOPPING=1 before READY=1: %s" % got)
    return got


got = ready_then_stopping(os.path.join(TMP, "notify.sock"))
ok("NOTIFY_SOCKET a path: READY=1 once, after 'serving job'; SIGTERM: STOPPING=1, exit 0 (%s)" %
   " | ".join(";".join(m) for m in got))
ready_then_stopping("@sluice-notify-test-%d" % os.getpid())
ok("NOTIFY_SOCKET an abstract name (@...): READY=1, then STOPPING=1 on SIGTERM")

# a feeder that never serves: no READY=1
bad = os.path.join(TMP, "bad.json")
with open(bad, "w") as f:
    f.write(open(JOB).read().replace("/d/s-*.tfrecord", "/none/s-*.tfrecord"))
s, value = manager_socket(os.path.join(TMP, "bad.sock"))
log = os.path.join(TMP, "bad.log")
proc = start(bad, {"NOTIFY_SOCKET": value}, log)
try:
    rc = proc.wait(timeout=30)
except subprocess.TimeoutExpired:
    proc.kill()
    proc.wait()
    fail("a job without files: the feeder did not exit")
got = messages(s)
s.close()
check(rc != 0, "a job without files: exit status 0")
check(not any("READY=1" in m for m in got), "a job without files: READY=1 sent: %s" % got)
ok("a feeder that fails before serving (exit %d) sends no READY=1" % rc)

# no NOTIFY_SOCKET: it serves (and stops on SIGTERM) as before
log = os.path.join(TMP, "plain.log")
proc = start(JOB, {}, log)
try:
    wait_for(lambda: "serving job 'notify'" in open(log).read(), 30, "the feeder to serve without NOTIFY_SOCKET")
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(timeout=30)
finally:
    if proc.poll() is None:
        proc.kill()
        proc.wait()
check(rc == 0, "without NOTIFY_SOCKET: exit status %d" % rc)
check("sd_notify" not in open(log).read(), "without NOTIFY_SOCKET: a warning about sd_notify")
ok("without NOTIFY_SOCKET: serves, stops on SIGTERM with exit 0, nothing logged about sd_notify")

shutil.rmtree(TMP, ignore_errors=True)
print("%d passed, 0 failed" % passed)
