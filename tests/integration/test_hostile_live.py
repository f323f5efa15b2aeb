#!/usr/bin/env python3
"""Integration: a live feeder serving real trainers while a rogue client
attacks it (issue #16 part 3). The rogue speaks ZeroMQ through Debian's
python3-zmq and raw TCP through Python's socket module:

- live: two real sluice-trainer workers are served a shuffled job while the
  rogue sends garbage frames, truncated headers, other protocol versions,
  enormous declared sizes (in sluice's headers and in ZMTP's own frame
  header), thousands of HELLOs with random cluster shapes, CREDITs,
  HEARTBEATs and BYEs from peers that are not trainers, HELLOs claiming
  the connected workers, takeover HELLOs for shares out of range, and
  holds hundreds of slow-loris connections open. Each trainer's trace must
  equal, piece by piece, a run without the rogue; every refusal is counted
  (--stats, and the log's lines plus its "N more ... were not logged"),
  each kind logged with its reason, the log held to a bounded number of
  lines a second, the feeder's memory bounded.
- pending handshakes: what hundreds of connections that never finish their
  ZMTP handshake cost the feeder (resident memory and descriptors), and how
  long the feeder keeps them (ZeroMQ's ZMQ_HANDSHAKE_IVL); a real client is
  served meanwhile. Under a small RLIMIT_NOFILE the feeder keeps running and
  serves again once they are gone.

Exits 77 (skipped) only when python3-zmq cannot be imported; scripts/deps.sh
installs it. Usage: test_hostile_live.py BUILD_DIR
"""
import os
import sys

try:
    import zmq
except ImportError:
    # Debian's python3-zmq belongs to /usr/bin/python3; a python3 found
    # first on PATH (pyenv, a virtual environment) may lack it
    system = "/usr/bin/python3"
    if os.path.exists(system) and os.path.realpath(sys.executable) != os.path.realpath(system) and \
            not os.environ.get("SLUICE_HOSTILE_REEXEC"):
        os.environ["SLUICE_HOSTILE_REEXEC"] = "1"
        os.execv(system, [system] + sys.argv)
    print("skipped: python3-zmq is not installed (scripts/deps.sh installs it)")
    sys.exit(77)

import calendar  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import select  # noqa: E402
import socket  # noqa: E402
import struct  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bed  # noqa: E402
import harness  # noqa: E402
import wire  # noqa: E402
from bed import log_path, read_log, wait, wait_for_log, write_job  # noqa: E402
from harness import fail, ok, spawn  # noqa: E402

bed.setup(sys.argv[1], "hostile-live")
RND = random.Random(int(os.environ.get("SLUICE_HOSTILE_SEED", "16")))
CTX = zmq.Context()
LOG_LINES_PER_S = 30   # refusals and bad messages: 10 a second each, + a summary line each, + the rest
HANDSHAKE_S = 5        # the feeder's ZMQ_HANDSHAKE_IVL (FEED_HANDSHAKE_MS)
SLOW_LORIS = 200       # of each kind (silent, half a greeting) during the live run
# the attacked trainers' --step-ms: 20,000 steps last 18 s at least (about
# 20 s here); below 1 ms, as a whole millisecond is spent polling the
# feeders in 1 ms slices and came to 1.43 ms a step
LIVE_STEP_MS = 0.9
# the feeder's growth under attack; AddressSanitizer keeps up to 256 MiB of
# freed memory in quarantine (its quarantine_size_mb) on top
VERSION = subprocess.run([bed.FEEDER, "--version"], capture_output=True, text=True).stdout
RSS_BOUND_KB = (64 + (256 if "address" in VERSION else 0)) * 1024
# a pending connection's memory; a sanitizer's shadow memory multiplies it
CONN_BOUND_KB = 64 if "sanitizers:" in VERSION else 16


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_feeder(tag, job_path, extra=(), prefix=()):
    port = free_port()
    ep = "tcp://127.0.0.1:%d" % port
    stats = os.path.join(bed.TMP, tag + "-stats.json")
    p = spawn(list(prefix) + [bed.FEEDER, "--job", job_path, "--listen", ep, "--threads", "1", "--heartbeat-ms",
                              "200", "--timeout-ms", "5000", "--stats", stats] + list(extra),
              log=log_path(tag, "feeder"))
    wait_for_log(tag, "feeder", "serving job", p, "%s: the feeder did not start" % tag, timeout=60)
    return p, ep, port, stats


def trainers(tag, ep, job, W, step_ms=0.0):
    """W trainers of one replica; step_ms: their --step-ms (0: as fast as
    the stream goes)."""
    out = []
    for w in range(W):
        trace = os.path.join(bed.TMP, "%s-trace%d.jsonl" % (tag, w))
        # the trainers' heartbeat stays at its default (1 s): a feeder gives
        # a connection 2.5 of them before a HELLO for its worker may replace it
        p = spawn([bed.TRAINER, "--connect", ep, "--job", job["name"], "--worker", str(w), "--workers", str(W),
                   "--replicas", "1", "--trace", trace, "--timeout-ms", "10000"]
                  + (["--step-ms", "%g" % step_ms] if step_ms > 0 else []),
                  log=log_path(tag, "trainer%d" % w), stdout=subprocess.DEVNULL)
        out.append((p, trace))
    return out


def pieces_of(path):
    with open(path) as f:
        lines = f.read().splitlines()
    if not lines or "summary" not in json.loads(lines[-1]):
        fail("%s: no summary line" % path)
    return lines[:-1], json.loads(lines[-1])["summary"]


def proc_kb(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def cpu_s(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(") ", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


# ---- the rogue's means ----

def dealer(ep, rid=None):
    s = CTX.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    if rid is not None:
        s.setsockopt(zmq.ROUTING_ID, rid)
    s.connect(ep)
    return s


def answer(s, wait_ms):
    """The next message's type and text (REFUSE's reason), or (None, None)."""
    deadline = time.time() + wait_ms / 1000
    while True:
        left = int((deadline - time.time()) * 1000)
        if left <= 0 or not s.poll(left):
            return None, None
        frames = s.recv_multipart()
        h = frames[0]
        if len(h) < 8 or h[:4] != wire.MAGIC:
            return "garbage", None
        mtype = struct.unpack_from("<H", h, 6)[0]
        if mtype == wire.HEARTBEAT:
            continue
        if mtype == wire.REFUSE:
            n = struct.unpack_from("<H", h, 8)[0]
            return "REFUSE", h[10:10 + n].decode("utf-8", "replace")
        return wire.NAMES.get(mtype, "?").upper(), None


class Tally:
    """What the rogue sent and got: the feeder's counts must match."""

    def __init__(self):
        self.bad = 0         # frames the feeder cannot decode
        self.unexpected = 0  # decodable, but not a trainer's message
        self.refused = 0     # REFUSEs received
        self.ignored = 0     # CREDIT, HEARTBEAT, BYE from a peer that is not a trainer
        self.reasons = {}    # phase -> the first reason

    def ask(self, s, frame, phase, want, wait_ms=5000):
        s.send(frame)
        kind, reason = answer(s, wait_ms)
        if kind != "REFUSE":
            fail("%s: expected a REFUSE, got %s" % (phase, kind))
        self.refused += 1
        if want not in reason:
            fail("%s: the REFUSE should say %r, it says %r" % (phase, want, reason))
        self.reasons.setdefault(phase, reason)

    def sync(self, s):
        """Close s once the feeder has read everything sent on it: a
        connection's messages arrive in order, so the answer to one more
        HELLO (another job's) proves it."""
        self.ask(s, wire.hello(job="sync"), "sync", "job 'sync' is not served here")
        s.close()


def zmtp_greeting():
    """ZMTP 3.0's 64-byte greeting, NULL mechanism, as a client."""
    return b"\xff" + b"\0" * 8 + b"\x7f" + b"\x03\x00" + b"NULL".ljust(20, b"\0") + b"\x00" + b"\0" * 31


def zmtp_ready():
    body = b"\x05READY" + b"\x0bSocket-Type" + struct.pack(">I", 6) + b"DEALER"
    return b"\x04" + bytes([len(body)]) + body


def zmtp_huge_frame(port, size):
    """A raw ZMTP peer that completes the handshake, then declares a frame of
    `size` bytes: True when the feeder closes the connection."""
    c = socket.create_connection(("127.0.0.1", port), timeout=10)
    c.sendall(zmtp_greeting() + zmtp_ready())
    got = b""
    while len(got) < 64:  # the feeder's greeting
        d = c.recv(64 - len(got))
        if not d:
            c.close()
            return False
        got += d
    c.sendall(b"\x02" + struct.pack(">Q", size) + b"\0" * 4096)
    closed = False
    c.settimeout(10)
    try:
        while True:
            d = c.recv(65536)
            if not d:
                closed = True
                break
    except (ConnectionResetError, BrokenPipeError):
        closed = True
    except socket.timeout:
        pass
    c.close()
    return closed


class SlowLoris:
    """Raw TCP connections that never finish ZMTP's handshake: `silent`
    ones send nothing, `half` ones half a greeting (11 of 64 bytes)."""

    def __init__(self, port):
        self.port = port
        self.conns = {}  # fd -> (socket, opened at)

    def open(self, silent, half):
        for i in range(silent + half):
            c = socket.create_connection(("127.0.0.1", self.port), timeout=10)
            if i >= silent:
                c.sendall(zmtp_greeting()[:11])
            c.setblocking(False)
            self.conns[c.fileno()] = (c, time.time())

    def wait_closed(self, timeout):
        """Until the feeder has closed every one: the seconds each lived."""
        p = select.poll()
        for fd in self.conns:
            p.register(fd, select.POLLIN)
        lived = []
        deadline = time.time() + timeout
        while self.conns and time.time() < deadline:
            for fd, _ in p.poll(200):
                c, opened = self.conns[fd]
                try:
                    gone = c.recv(4096) == b""  # else the feeder's greeting
                except ConnectionResetError:
                    gone = True
                except BlockingIOError:
                    gone = False
                if gone:
                    lived.append(time.time() - opened)
                    p.unregister(fd)
                    del self.conns[fd]
                    c.close()
        return lived

    def close(self):
        for c, _ in self.conns.values():
            c.close()
        self.conns = {}


def log_counts(flog):
    """(refusals shown + held, bad or unexpected messages shown + held)."""
    shown_ref = len(re.findall(r"refused a trainer: ", flog))
    held_ref = sum(int(x) for x in re.findall(r"(\d+) more refusals were not logged", flog))
    shown_bad = len(re.findall(r"(bad message|unexpected \w+ message) from an unknown peer|"
                               r"(CREDIT|HEARTBEAT|BYE) from an unknown peer \(not a connected trainer\) ignored", flog))
    held_bad = sum(int(x) for x in re.findall(r"(\d+) more malformed or unexpected messages were not logged", flog))
    return shown_ref + held_ref, shown_bad + held_bad


def lines_per_second(flog, t0, t1):
    """The most log lines stamped within one second of [t0, t1] (UTC epoch seconds)."""
    per = {}
    for line in flog.splitlines():
        m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)", line)
        if not m:
            continue
        t = calendar.timegm(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S"))
        if t0 - 1 <= t <= t1 + 1:
            per[t] = per.get(t, 0) + 1
    return max(per.values()) if per else 0, sum(per.values())


# ---- the attack on a live feeder ----

def attack(ep, port, job, W, feeder, slow, tally, watch):
    """Every hostile input, phase by phase, each phase after a pause of a
    second so its first refusal or bad message is logged (the limit allows
    10 a second). watch(): samples the feeder's memory."""
    name = job["name"]

    def pause():
        watch()
        time.sleep(1.2)

    # HELLOs claiming the connected workers: another process (its incarnation
    # differs, or is 0), its old connection alive (the probe reaches it)
    s = dealer(ep)
    for w in range(W):
        for inc in (0, 1, RND.getrandbits(64)):
            tally.ask(s, wire.hello(worker=w, workers=W, job=name, incarnation=inc, credits=64), "claim",
                      "worker %d is already connected (another trainer process" % w)
            s.close()
            s = dealer(ep)
    # credits, heartbeats and BYEs from that refused peer, and from peers
    # that never said HELLO (some with routing ids of their own choosing):
    # a CREDIT names no worker, so they can only reach their own connection
    for rid in (None, b"rogue", b"\x00\x00\x00\x00\x01", b"\x00" + os.urandom(4)):
        d = dealer(ep, rid)
        for _ in range(100):
            d.send(wire.credit(1 << 20))
            d.send(wire.credit(1 << 20, 1))
            d.send(wire.heartbeat(1))
            tally.ignored += 3
        d.send(wire.bye())
        tally.ignored += 1
        tally.sync(d)  # no answer before the sync's
    for _ in range(50):
        s.send(wire.credit(1 << 20))
        s.send(wire.bye())
        tally.ignored += 2
    tally.sync(s)
    pause()

    # the slow-loris connections, held open from here to the end
    slow.open(SLOW_LORIS, SLOW_LORIS)
    pause()

    # garbage frames, of every length up to 300 bytes and a few large ones
    s = dealer(ep)
    for i in range(2000):
        n = i % 300
        s.send(b"X" + os.urandom(n) if n else b"")
        tally.bad += 1
    for n in (4096, 65535, 65536):
        s.send(b"Y" * n)
        tally.bad += 1
    tally.sync(s)
    pause()

    # feeder -> trainer messages sent to the feeder: unexpected, not malformed
    s = dealer(ep)
    for m in (wire.welcome(), wire.refuse(), wire.PINNED_PIECE, wire.end(), wire.error(), wire.PINNED_STATUS):
        s.send(m)
        tally.unexpected += 1
    # truncated headers: every valid message a trainer sends, cut at every length
    for m in (wire.hello(worker=0, workers=W, job=name), wire.credit(3), wire.heartbeat(5), wire.bye()):
        for cut in range(len(m)):
            s.send(m[:cut])
            tally.bad += 1
    tally.sync(s)
    pause()

    # other protocol versions: a HELLO is refused naming both, anything else is malformed
    s = dealer(ep)
    s.send(wire.hello(worker=0, workers=W, job=name, version=0))  # not a version: malformed, unanswered
    tally.bad += 1
    for v in (1, 2, 3, 5, 65535):
        tally.ask(s, wire.hello(worker=0, workers=W, job=name, version=v), "version",
                  "this feeder speaks protocol version 4, the trainer %d" % v)
        tally.bad += 1
        s.send(wire.credit(1, version=v))
        tally.bad += 1
    tally.sync(s)
    pause()

    # enormous declared sizes: in sluice's headers (malformed, unanswered)...
    s = dealer(ep)
    for m in (wire.hello(job=name, job_len=65535), wire.hello(job="j" * 257), wire.refuse(b"r", reason_len=65535),
              wire.error(msg=b"e", msg_len=65535), wire.welcome(ntensors=65535),
              wire.piece(tensors=(wire.tensor(wire.BYTES, [1], 1 << 63, 0),), ntensors=65535),
              wire.piece(rows=1, tensors=(wire.tensor(wire.UINT8, [1], 1, 1 << 63),))):
        s.send(m)
        tally.bad += 1
    if answer(s, 500)[0] is not None:
        fail("a malformed header was answered")
    tally.sync(s)
    # ... in a frame over the 64 KiB limit (ZeroMQ drops the connection
    # unread), and in ZMTP's own frame header (2^63 - 1 bytes declared)
    big = dealer(ep)
    big.send(b"\0" * (1 << 20))
    big.close()
    rss0 = proc_kb(feeder.pid, "VmRSS")
    for size in ((1 << 63) - 1, 1 << 40, 65537):
        if not zmtp_huge_frame(port, size):
            fail("a ZMTP frame declaring %d bytes: the feeder should drop the connection" % size)
    if proc_kb(feeder.pid, "VmRSS") > rss0 + 16 * 1024:
        fail("ZMTP frames declaring 2^63 bytes grew the feeder's memory from %d kB to %d kB"
             % (rss0, proc_kb(feeder.pid, "VmRSS")))
    pause()

    # thousands of HELLOs with random worker ids and cluster shapes: on one
    # connection, then each on a new connection
    s = dealer(ep)
    for i in range(2000):
        workers = RND.randrange(W + 1, 65537)
        tally.ask(s, wire.hello(worker=RND.randrange(workers), workers=workers, replicas=RND.randrange(1, 1025),
                                job=name, incarnation=RND.getrandbits(64), credits=RND.randrange(1 << 20)),
                  "shape", "cluster shape disagrees: this trainer says %d workers" % workers)
    s.close()
    for i in range(300):
        s = dealer(ep)
        tally.ask(s, wire.hello(worker=0, workers=1, replicas=RND.randrange(1, 9), job=name), "shape-new",
                  "cluster shape disagrees")
        s.close()
    pause()

    # another job; a resume point no trainer can have reached
    s = dealer(ep)
    tally.ask(s, wire.hello(worker=0, workers=W, job="not-" + name), "job", "is not served here")
    tally.ask(s, wire.hello(worker=0, workers=W, job=name, resume_seq=1 << 62), "resume", "asks to resume at piece")
    s.close()
    pause()

    # takeover HELLOs for shares out of range: refused below the wire's 4096, malformed from it on
    s = dealer(ep)
    for share in (1, 2, 4095):
        tally.ask(s, wire.hello(worker=0, workers=W, job=name, share=share), "share",
                  "asks for feeder %d's share, but the job has 1 feeders" % share)
    for share in (4096, (1 << 32) - 1):
        s.send(wire.hello(worker=0, workers=W, job=name, share=share))
        tally.bad += 1
    if answer(s, 500)[0] is not None:
        fail("a HELLO for share 4096 or 2^32 - 1 (malformed) was answered")
    tally.sync(s)
    watch()


def case_live(files):
    harness.case()
    W = 2
    # the attacked run lasts longer than the whole attack (about 12 s here)
    # however fast the stream goes: 8 epochs of 2,500 steps a worker, each
    # step at least LIVE_STEP_MS (a floor of 18 s). The run without the
    # rogue is the same job unpaced (its trace does not depend on the pace).
    # (It used to be 25 s of unpaced stream from a calibration run, twice:
    # 590,000 pieces a worker, and the clean run waited as long as the
    # attacked one.)
    epochs = 8
    job_path, job = write_job("live", files, epochs=epochs, shuffle={"buffer": 64, "seed": 11})

    # the run without the rogue
    tag = "clean"
    f, ep, port, stats = start_feeder(tag, job_path)
    ps = trainers(tag, ep, job, W)
    ref = []
    for w, (p, trace) in enumerate(ps):
        if wait(p, 900, "clean trainer") != 0:
            fail("clean: worker %d failed:\n%s" % (w, read_log(tag, "trainer%d" % w)))
        ref.append(pieces_of(trace)[0])
    if wait(f, 60, "clean feeder") != 0:
        fail("clean: the feeder failed:\n" + read_log(tag, "feeder"))
    with open(stats) as fh:
        clean_stats = json.load(fh)

    # the same run with the rogue
    harness.case()
    tag = "hostile"
    f, ep, port, stats = start_feeder(tag, job_path)
    ps = trainers(tag, ep, job, W, step_ms=LIVE_STEP_MS)
    for w in range(W):
        wait_for_log(tag, "feeder", "worker %d connected" % w, f, "hostile: worker %d never connected" % w, timeout=60)
    base = {"rss": proc_kb(f.pid, "VmRSS"), "fds": fds(f.pid)}
    peak = dict(base)

    def watch():
        if f.poll() is None:
            peak["rss"] = max(peak["rss"], proc_kb(f.pid, "VmRSS"))
            peak["fds"] = max(peak["fds"], fds(f.pid))

    tally = Tally()
    slow = SlowLoris(port)
    t_attack = time.time()
    attack(ep, port, job, W, f, slow, tally, watch)
    t_end = time.time()
    running = sum(p.poll() is None for p, _ in ps)
    if running != W:
        fail("hostile: the trainers finished before the attack did (%d of %d running): the job is too short "
             "for the test to mean anything" % (running, W))
    hwm = proc_kb(f.pid, "VmHWM")
    slow.close()
    for w, (p, trace) in enumerate(ps):
        if wait(p, 900, "hostile trainer") != 0:
            fail("hostile: worker %d failed:\n%s" % (w, read_log(tag, "trainer%d" % w)))
    after = {"rss": proc_kb(f.pid, "VmRSS") if f.poll() is None else -1}
    if wait(f, 60, "hostile feeder") != 0:
        fail("hostile: the feeder failed:\n" + read_log(tag, "feeder"))

    # the trainers' traces: piece by piece as without the rogue
    stream_s = 0.0
    for w, (_, trace) in enumerate(ps):
        got, summary = pieces_of(trace)
        if not summary.get("ok", True):
            fail("hostile: worker %d's summary says it failed" % w)
        stream_s = max(stream_s, summary.get("seconds", 0.0))
        if got != ref[w]:
            for i, (g, e) in enumerate(zip(got, ref[w])):
                if g != e:
                    fail("hostile: worker %d piece %d differs from the run without the rogue:\n  got  %s\n  want %s"
                         % (w, i, g, e))
            fail("hostile: worker %d got %d pieces, %d without the rogue" % (w, len(got), len(ref[w])))
    with open(stats) as fh:
        st = json.load(fh)
    for k in ("pieces", "records", "bytes", "trainers"):
        if st.get(k) != clean_stats.get(k):
            fail("hostile: the feeder's %s: %s, %s without the rogue (someone else was served)"
                 % (k, st.get(k), clean_stats.get(k)))
    # every refusal counted: the REFUSEs the rogue got, --stats, the log
    flog = read_log(tag, "feeder")
    logged_ref, logged_bad = log_counts(flog)
    if st["refused"] != tally.refused or logged_ref != tally.refused:
        fail("hostile: %d REFUSEs received; --stats counts %d, the log %d (shown + held)"
             % (tally.refused, st["refused"], logged_ref))
    sent_bad = tally.bad + tally.unexpected + tally.ignored
    if logged_bad != sent_bad or st.get("bad_messages") != sent_bad:
        fail("hostile: %d malformed, %d unexpected and %d stray CREDIT/HEARTBEAT/BYE messages sent; the log "
             "accounts for %d, --stats bad_messages %s" % (tally.bad, tally.unexpected, tally.ignored, logged_bad,
                                                          st.get("bad_messages")))
    # each kind of refusal logged with its reason (its phase began after a
    # quiet second, so its first line was not held back)
    for phase, reason in sorted(tally.reasons.items()):
        if phase not in ("shape-new", "sync") and "refused a trainer: " + reason not in flog:
            fail("hostile: the %s refusal was not logged with its reason %r" % (phase, reason))
    for what in ("bad message from an unknown peer: bad magic", "truncated", "unsupported version",
                 "unexpected WELCOME message from an unknown peer", "job name length 65535 exceeds 256",
                 "share 4096 not below 4096"):
        if what not in flog:
            fail("hostile: the feeder's log never says %r" % what)
    most, total = lines_per_second(flog, t_attack, t_end)
    if most > LOG_LINES_PER_S:
        fail("hostile: %d log lines within one second (at most %d)" % (most, LOG_LINES_PER_S))
    if peak["rss"] - base["rss"] > RSS_BOUND_KB or hwm - base["rss"] > RSS_BOUND_KB:
        fail("hostile: the feeder's memory grew from %d kB to %d kB (peak %d kB)" % (base["rss"], peak["rss"], hwm))
    ok("a live 2-worker job (%d epochs, %d pieces a worker, %.1f s) under attack for %.1f s: traces equal the run "
       "without the rogue, piece by piece; %d refusals (--stats, log), %d malformed + %d unexpected messages and %d "
       "credits/heartbeats/BYEs from non-trainers; the log at most %d lines a second (%d in all); feeder RSS %d kB "
       "before, %d kB peak (VmHWM %d kB) with %d slow-loris connections, %d kB after; descriptors %d -> %d"
       % (epochs, len(ref[0]), stream_s, t_end - t_attack, tally.refused, tally.bad, tally.unexpected,
          tally.ignored, most, total, base["rss"], peak["rss"], hwm, 2 * SLOW_LORIS, after["rss"], base["fds"],
          peak["fds"]))


# ---- pending handshakes: their cost and their end ----

def serve_one(ep, name, take=10):
    """A client that says HELLO and takes `take` pieces, a credit back for
    each (the feeder keeps at most the job's prefetch in flight): the pieces
    taken."""
    s = dealer(ep)
    s.send(wire.hello(worker=0, workers=1, job=name, credits=4, incarnation=RND.getrandbits(64)))
    got = 0
    deadline = time.time() + 60
    while got < take and time.time() < deadline:
        if not s.poll(1000):
            continue
        h = s.recv_multipart()[0]
        mtype = struct.unpack_from("<H", h, 6)[0]
        if mtype == wire.PIECE:
            got += 1
            s.send(wire.credit(1))
        elif mtype in (wire.REFUSE, wire.ERROR, wire.END):
            break
    s.send(wire.bye())
    s.close()
    return got


def case_pending(files):
    harness.case()
    tag = "pending"
    job_path, job = write_job("pending", files, epochs=0)  # forever
    f, ep, port, _ = start_feeder(tag, job_path, extra=("--no-shm",))
    if serve_one(ep, job["name"]) != 10:
        fail("pending: a client before the slow-loris was not served")
    base_rss, base_fds = proc_kb(f.pid, "VmRSS"), fds(f.pid)
    slow = SlowLoris(port)
    rows = []
    t0 = time.time()
    young = 0  # connections of the last step still within the feeder's handshake interval when counted
    for n in (250, 500, 1000):
        slow.open((n - len(slow.conns)) // 2, (n - len(slow.conns)) // 2)
        time.sleep(0.5)
        now = time.time()
        rows.append((len(slow.conns), proc_kb(f.pid, "VmRSS"), fds(f.pid)))
        # the feeder closes each after HANDSHAKE_S: on a slow machine the
        # first may be gone before the last are made; count those it must hold
        young = sum(1 for _, opened in slow.conns.values() if now - opened < HANDSHAKE_S - 0.5)
    n, rss, nfd = rows[-1]
    per_kb = (rss - base_rss) / n
    if nfd - base_fds < young * 0.9 or nfd - base_fds > n + 4:
        fail("pending: %d pending connections (%d younger than %.1f s) hold %d descriptors (before %d)"
             % (n, young, HANDSHAKE_S - 0.5, nfd, base_fds))
    if per_kb > CONN_BOUND_KB:
        fail("pending: %.1f kB of resident memory per pending connection" % per_kb)
    # a real client is served while they are pending
    if serve_one(ep, job["name"]) != 10:
        fail("pending: a client was not served while %d handshakes were pending" % n)
    lived = slow.wait_closed(HANDSHAKE_S + 30)
    if slow.conns:
        fail("pending: %d of %d connections still open %.0f s after they were made"
             % (len(slow.conns), n, time.time() - t0))
    lived.sort()
    if not HANDSHAKE_S - 0.5 <= lived[len(lived) // 2] <= HANDSHAKE_S + 5:
        fail("pending: the feeder closed the pending connections after %.1f s (median), not its %d s"
             % (lived[len(lived) // 2], HANDSHAKE_S))
    after_rss, after_fds = proc_kb(f.pid, "VmRSS"), fds(f.pid)
    if after_fds > base_fds + 2:
        fail("pending: descriptors %d before, %d after the handshakes ended" % (base_fds, after_fds))
    if serve_one(ep, job["name"]) != 10:
        fail("pending: a client after the slow-loris was not served")
    ok("pending handshakes: none: %d kB, %d fds; %s; %.1f kB and one descriptor each; the feeder closed each %.1f-%.1f s after it "
       "was made (median %.1f); after: %d kB, %d descriptors; real clients served before, during and after"
       % (base_rss, base_fds, ", ".join("%d connections: %d kB, %d fds" % r for r in rows), per_kb, lived[0], lived[-1],
          lived[len(lived) // 2], after_rss, after_fds))
    f.terminate()
    wait(f, 20, "pending feeder")

    # at RLIMIT_NOFILE: the feeder neither fails nor serves a newcomer while
    # the descriptors are held, and serves again once they are gone
    harness.case()
    tag = "nofile"
    limit = 64
    f, ep, port, _ = start_feeder(tag, job_path, extra=("--no-shm",), prefix=("prlimit", "--nofile=%d" % limit,
                                                                                   "--"))
    base_fds = fds(f.pid)
    slow = SlowLoris(port)
    held = 0
    try:
        for _ in range(limit):
            slow.open(1, 0)
            held += 1
    except OSError:
        pass
    time.sleep(1)
    c0 = cpu_s(f.pid)
    t0 = time.time()
    s = dealer(ep)
    s.send(wire.hello(worker=0, workers=1, job=job["name"], credits=1))
    first, _ = answer(s, 2000)
    spin = (cpu_s(f.pid) - c0) / (time.time() - t0)
    full_fds = fds(f.pid)
    slow.close()
    if first is None:
        first, _ = answer(s, 30000)
    s.send(wire.bye())
    time.sleep(0.2)
    s.close()
    if f.poll() is not None:
        fail("nofile: the feeder exited at its descriptor limit:\n" + read_log(tag, "feeder"))
    if first != "WELCOME" or serve_one(ep, job["name"]) != 10:
        fail("nofile: after the held connections closed, a client was not served (first answer %s)" % first)
    ok("at RLIMIT_NOFILE %d (%d descriptors at start, %d at the limit with %d connections held): the feeder "
       "keeps running, a newcomer waits (%.0f%% of a CPU spent meanwhile in ZeroMQ's accept), and is served "
       "once they are gone" % (limit, base_fds, full_fds, held, 100 * spin))
    f.terminate()
    wait(f, 20, "nofile feeder")


def main():
    files = bed.gen("a", 20000, 4)
    case_live(files)
    case_pending(files)
    CTX.destroy(linger=0)
    bed.finish()


if __name__ == "__main__":
    try:
        main()
    finally:
        bed.cleanup()
