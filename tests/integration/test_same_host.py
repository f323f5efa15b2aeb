#!/usr/bin/env python3
"""Same host, another user (issue #16 part 2): real feeders, and trainers
run as root and as the user nobody (setpriv), on one machine.

1. A feeder's ipc socket file is 0600: nobody cannot connect (its HELLO
   gets no answer) and the feeder never sees it; the feeder's own user is
   served, in shared memory.
2. --ipc-group nogroup: the file is 0660 and nogroup's; nobody connects
   and is served by copy, since shared memory goes only to the feeder's own
   user (the feeder says why), and nobody cannot open the feeder's piece
   memory through /proc either.
3. tcp on 127.0.0.1 without keys: any local user can connect (documented:
   use ipc or CURVE on a shared host); still no shared memory for nobody.
4. CURVE on 127.0.0.1: nobody cannot read the trainers' secret key (0600,
   root's), and with a key of its own is refused by the feeder's allow-list
   without a byte of data.

Needs root (exit 77, skipped, otherwise).

Usage: test_same_host.py BUILD_DIR
"""
import json
import os
import re
import stat
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bed  # noqa: E402
import harness  # noqa: E402
from harness import fail, ok, spawn  # noqa: E402

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def feeder(tag, job_path, listen, extra=()):
    p = spawn([bed.FEEDER, "--job", job_path, "--listen", listen, "--threads", "1"] + list(extra),
              log=bed.log_path(tag, "feeder"))
    bed.wait_for_log(tag, "feeder", "serving job", p, "%s: the feeder did not start" % tag)
    return p


def trainer(tag, who, conn, job, as_nobody, extra=()):
    """A trainer's (exit status, summary, log)."""
    out = os.path.join(bed.TMP, "%s-%s.out" % (tag, who))
    with open(out, "w") as f:
        p = spawn((NOBODY if as_nobody else []) + [bed.TRAINER, "--connect", conn, "--job", job["name"],
                                                   "--connect-timeout", "2"] + list(extra),
                  log=bed.log_path(tag, who), stdout=f)
    code = bed.wait(p, 60, "%s: %s" % (tag, who))
    lines = open(out).read().strip().splitlines()
    summary = json.loads(lines[-1])["summary"] if lines else None
    return code, summary, bed.read_log(tag, who)


def memfd_of(pid):
    """The feeder's piece memory as /proc/PID/fd/N (a memfd)."""
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            if os.readlink("/proc/%d/fd/%s" % (pid, fd)).startswith("/memfd:"):
                return "/proc/%d/fd/%s" % (pid, fd)
        except OSError:
            pass
    return None


def nobody_can_open(path):
    r = subprocess.run(NOBODY + [sys.executable, "-c", "open(%r, 'rb').read(1)" % path], capture_output=True,
                       text=True)
    return r.returncode == 0, r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""


def main():
    if os.geteuid() != 0:
        print("skipped: needs root (to run a trainer as another user)")
        sys.exit(77)
    bed.setup(sys.argv[1], "samehost")
    os.chmod(bed.TMP, 0o755)  # only the socket's own mode may keep nobody out
    files = bed.gen("d", 120, 2)
    # one epoch of 120 records, G = 8: 15 steps of one piece for a 1 x 1 trainer
    job_path, job = bed.write_job("samehost", files, epochs=1)

    # 1. ipc, 0600
    harness.case()
    tag = "ipc"
    sock = os.path.join(bed.TMP, "f.sock")
    f = feeder(tag, job_path, "ipc://" + sock)
    mode = stat.S_IMODE(os.stat(sock).st_mode)
    if mode != 0o600:
        fail("ipc: the socket file is %o, not 600" % mode)
    code, _, log = trainer(tag, "nobody", "ipc://" + sock, job, True)
    if code == 0 or "no answer to HELLO within 2.0 s" not in log or "connected" in bed.read_log(tag, "feeder"):
        fail("ipc: nobody should get no answer and the feeder see nobody: exit %d\n%s" % (code, log[-1000:]))
    code, s, log = trainer(tag, "root", "ipc://" + sock, job, False)
    if code != 0 or s["shm_pieces"] != 15:
        fail("ipc: the feeder's own user should be served in shared memory: exit %d %s\n%s" % (code, s, log[-800:]))
    bed.wait(f, 20, "ipc: the feeder")
    ok("ipc socket 0600: nobody's HELLO never reaches the feeder (no answer in 2 s); root's trainer gets its 15 "
       "pieces in shared memory")

    # 2. --ipc-group nogroup: nobody connects, by copy only
    harness.case()
    tag = "group"
    sock = os.path.join(bed.TMP, "g.sock")
    # the shape fixed from the start: the piece memory exists before any trainer
    f = feeder(tag, job_path, "ipc://" + sock, extra=("--ipc-group", "nogroup", "--workers", "1", "--replicas", "1"))
    st = os.stat(sock)
    if stat.S_IMODE(st.st_mode) != 0o660 or st.st_gid != 65534:
        fail("group: the socket file is %o, group %d (want 660, nogroup)" % (stat.S_IMODE(st.st_mode), st.st_gid))
    mem = memfd_of(f.pid)
    opened, why = nobody_can_open(mem) if mem else (True, "no memfd found")
    if opened or "Permission denied" not in why:
        fail("group: nobody should not open the feeder's piece memory %s: %s" % (mem, why))
    code, s, log = trainer(tag, "nobody", "ipc://" + sock, job, True)
    flog = bed.read_log(tag, "feeder")
    if code != 0 or s["pieces"] != 15 or s["shm_pieces"] != 0 or \
            "shared memory not offered: the trainer runs as uid 65534, this feeder as 0" not in flog:
        fail("group: nobody should be served its 15 pieces by copy, with the reason logged: exit %d %s\n%s"
             % (code, s, flog[-1000:]))
    bed.wait(f, 20, "group: the feeder")
    ok("--ipc-group nogroup: socket 0660 nogroup; nobody gets its 15 pieces by copy, never the shared memory (%s: "
       "%s)" % (mem, why))

    # 3. tcp on loopback, no keys: reachable by any local user, no shared memory
    harness.case()
    tag = "tcp"
    port = 47000 + os.getpid() % 1000
    # two workers: nobody is worker 0, root worker 1
    f = feeder(tag, job_path, "tcp://127.0.0.1:%d" % port, extra=("--workers", "2", "--replicas", "1"))
    two = ("--workers", "2")
    code, s, _ = trainer(tag, "nobody", "tcp://127.0.0.1:%d" % port, job, True, extra=two + ("--worker", "0"))
    code2, s2, _ = trainer(tag, "root", "tcp://127.0.0.1:%d" % port, job, False, extra=two + ("--worker", "1"))
    if code != 0 or s["pieces"] == 0 or s["shm_pieces"] != 0 or code2 != 0 or s2["shm_pieces"] == 0 or \
            "the trainer runs as uid 65534" not in bed.read_log(tag, "feeder"):
        fail("tcp: nobody by copy (%s), root in shared memory (%s)" % (s, s2))
    bed.wait(f, 20, "tcp: the feeder")
    ok("tcp on 127.0.0.1 without keys: nobody is served, by copy (the uid read from /proc/net/tcp), root in shared "
       "memory: on a shared host, use ipc or CURVE")

    # 4. CURVE on loopback: nobody has no allowed key
    harness.case()
    tag = "curve"
    keys = os.path.join(bed.TMP, "keys")
    allow = os.path.join(keys, "allow")
    os.makedirs(allow)
    for name in ("feeder", "trainer"):
        subprocess.run([bed.FEEDER, "keygen", os.path.join(keys, name)], check=True, capture_output=True)
    os.rename(os.path.join(keys, "trainer.pub"), os.path.join(allow, "trainer.pub"))
    os.chmod(keys, 0o755)
    f = feeder(tag, job_path, "tcp://127.0.0.1:%d" % (port + 1),
               extra=("--curve-key", os.path.join(keys, "feeder.key"), "--curve-allow", allow))
    conn = "tcp://127.0.0.1:%d" % (port + 1)
    server = ("--curve-server-key", os.path.join(keys, "feeder.pub"))
    code, _, log = trainer(tag, "nobody-stolen", conn, job, True,
                           extra=("--curve-key", os.path.join(keys, "trainer.key")) + server)
    if code == 0 or not re.search(r"trainer\.key.*Permission denied|Permission denied.*trainer\.key", log):
        fail("curve: nobody should not read root's trainer key: exit %d\n%s" % (code, log[-800:]))
    own = os.path.join(bed.TMP, "nobody-keys")
    os.makedirs(own)
    os.chown(own, 65534, 65534)
    subprocess.run(NOBODY + [bed.FEEDER, "keygen", os.path.join(own, "mine")], check=True, capture_output=True)
    code, s, log = trainer(tag, "nobody-own", conn, job, True,
                           extra=("--curve-key", os.path.join(own, "mine.key")) + server)
    if code == 0 or (s and s["pieces"] != 0):
        fail("curve: nobody's own key should be refused with nothing delivered: exit %d %s" % (code, s))
    code2, s2, log2 = trainer(tag, "root", conn, job, False,
                              extra=("--curve-key", os.path.join(keys, "trainer.key")) + server)
    if code2 != 0 or s2["pieces"] != 15:
        fail("curve: root with the allowed key should be served: exit %d %s\n%s" % (code2, s2, log2[-800:]))
    bed.wait(f, 20, "curve: the feeder")
    ok("CURVE on 127.0.0.1: nobody cannot read the trainers' key (Permission denied), and its own key is refused "
       "with no piece delivered; root with the allowed key gets its 15 pieces")
    bed.finish()


if __name__ == "__main__":
    try:
        main()
    finally:
        harness.stop_all()
        bed.cleanup()
