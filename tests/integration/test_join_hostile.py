#!/usr/bin/env python3
"""Integration: the feeder's side of feeders joining a running job (issue
#30 part 1, docs/feeder.md "Joining a running job"), against a live feeder,
with pyzmq standing in for the joining feeder and the trainer:

- hostile JOINs: another job, another digest, an index of the job's first
  feeders, a huge feeder count (malformed), a bad endpoint, a wildcard, a
  CURVE key without CURVE, a joined index at another endpoint: each one
  REFUSEd with its exact reason, counted (--stats joins_refused), and the
  feeder keeps serving (a trainer's HELLO after them gets its WELCOME and
  pieces);
- a good JOIN is answered ROSTER (the joiner counted in), again when
  repeated (counted once), and a trainer whose HELLO reads ROSTER gets one
  after its WELCOME; a HELLO with a modulus smaller than the feeder's own
  --feeders is refused, one with a larger modulus is WELCOMEd with it;
- a real sluice-feeder --join: counted in, then exits 0 once the feeder it
  joined is gone (no trainer connected); one joining a feeder nobody
  serves, or with another plan, exits 1 naming why.

Exits 77 (skipped) when python3-zmq cannot be imported.
Usage: test_join_hostile.py BUILD_DIR
"""
import os
import sys

try:
    import zmq
except ImportError:
    system = "/usr/bin/python3"
    if os.path.exists(system) and os.path.realpath(sys.executable) != os.path.realpath(system) and \
            not os.environ.get("SLUICE_HOSTILE_REEXEC"):
        os.environ["SLUICE_HOSTILE_REEXEC"] = "1"
        os.execv(system, [system] + sys.argv)
    print("skipped: python3-zmq is not installed (scripts/deps.sh installs it)")
    sys.exit(77)

import atexit  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import struct  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bed  # noqa: E402
import wire  # noqa: E402
from bed import read_log, wait, wait_for_log, write_job  # noqa: E402
from harness import fail, ok, spawn  # noqa: E402

bed.setup(sys.argv[1], "join-hostile")
atexit.register(bed.cleanup)
CTX = zmq.Context()
ROSTER, JOIN = 12, 13
HELLO_ROSTER, HELLO_FEEDERS = 0x20, 0x40


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def join_msg(feeder, feeders, digest, job, endpoint, key=b""):
    """A JOIN (docs/protocol.md): feeder u32, feeders u32, digest u64, job
    (u16 + bytes), endpoint (u16 + bytes), key (u8 + bytes)."""
    job = job.encode() if isinstance(job, str) else job
    endpoint = endpoint.encode() if isinstance(endpoint, str) else endpoint
    return (wire.header(JOIN) + struct.pack("<IIQ", feeder, feeders, digest) + struct.pack("<H", len(job)) + job +
            struct.pack("<H", len(endpoint)) + endpoint + struct.pack("<B", len(key)) + key)


def hello_msg(worker=0, workers=1, credits=4, flags=0, share=0, job="", feeders=None, incarnation=7, resume_seq=0):
    """A HELLO; with `feeders`, the FEEDERS flag and its trailing u32."""
    if feeders is not None:
        flags |= HELLO_FEEDERS
    m = wire.hello(worker=worker, workers=workers, replicas=1, credits=credits, flags=flags, share=share, job=job,
                   incarnation=incarnation, resume_seq=resume_seq)
    return m + (struct.pack("<I", feeders) if feeders is not None else b"")


def mtype(m):
    return struct.unpack_from("<H", m, 6)[0]


def refuse_reason(m):
    if mtype(m) != wire.REFUSE:
        return None
    n = struct.unpack_from("<H", m, 8)[0]
    return m[10:10 + n].decode(errors="replace")


def roster(m):
    """(feeders, [(index, endpoint, key)]) of a ROSTER, else None."""
    if mtype(m) != ROSTER:
        return None
    feeders, count = struct.unpack_from("<IH", m, 8)
    off, entries = 14, []
    for _ in range(count):
        index, n = struct.unpack_from("<IH", m, off)
        ep = m[off + 6:off + 6 + n].decode()
        off += 6 + n
        k = m[off]
        entries.append((index, ep, m[off + 1:off + 1 + k].decode()))
        off += 1 + k
    if off != len(m):
        fail("ROSTER of %d bytes, its entries end at %d" % (len(m), off))
    return feeders, entries


def ask(endpoint, msg, timeout_ms=5000):
    """msg from a fresh DEALER; the first answer (bytes)."""
    s = CTX.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(endpoint)
    try:
        s.send(msg)
        if not s.poll(timeout_ms):
            fail("no answer from %s" % endpoint)
        return s.recv()
    finally:
        s.close()


def answers(sock, n, timeout_ms=5000):
    out = []
    for _ in range(n):
        if not sock.poll(timeout_ms):
            break
        out.append(sock.recv_multipart()[0])
    return out


files = bed.gen("a", 200, 4)
job_path, job = write_job("join", files, epochs=1, shuffle={"buffer": 50, "seed": 5})
# the joiners listen on ipc (no port another connection may have taken meanwhile)
port = free_port()
EP, JEP = "tcp://127.0.0.1:%d" % port, "ipc://%s/j.sock" % bed.TMP
stats = os.path.join(bed.TMP, "f0-stats.json")
f0 = spawn([bed.FEEDER, "--job", job_path, "--listen", EP, "--feeder-index", "0", "--feeders", "2", "--workers", "1",
            "--replicas", "1", "--heartbeat-ms", "200", "--timeout-ms", "2000", "--stats", stats],
           log=bed.log_path("f0", "feeder"))
wait_for_log("f0", "feeder", "serving job", f0, "feeder 0 did not start")
m = re.search(r"job digest ([0-9a-f]{16})", read_log("f0", "feeder"))
if m is None:
    fail("the feeder's log gives no job digest")
DIGEST = int(m.group(1), 16)

# ---- hostile JOINs: each refused with its reason ----
CASES = [
    ("another job", join_msg(2, 3, DIGEST, "other", JEP), "feeder 2 joins job 'other', this feeder serves 'join'"),
    ("another digest", join_msg(2, 3, DIGEST ^ 1, "join", JEP),
     "feeder 2 joins with another plan: digest %016x, this job's %016x (files, record counts, plan settings or "
     "schema differ)" % (DIGEST ^ 1, DIGEST)),
    ("a first feeder's index", join_msg(1, 3, DIGEST, "join", JEP),
     "feeder index 1 is one of the job's first 2 feeders, it cannot join"),
    ("huge feeders", join_msg(2, 1000, DIGEST, "join", JEP), "malformed JOIN: "),
    ("feeders below the index", join_msg(5, 3, DIGEST, "join", JEP), "malformed JOIN: "),
    ("a port out of range", join_msg(2, 3, DIGEST, "join", "tcp://127.0.0.1:99999"),
     "feeder 2: endpoint 'tcp://127.0.0.1:99999': port 99999 is out of range"),
    ("not an endpoint", join_msg(2, 3, DIGEST, "join", "http://x"), "feeder 2: endpoint"),
    ("a wildcard", join_msg(2, 3, DIGEST, "join", "tcp://*:5000"),
     "feeder 2 advertises 'tcp://*:5000', which trainers cannot connect to"),
    ("a key without CURVE", join_msg(2, 3, DIGEST, "join", JEP, key=b"A" * 40),
     "feeder 2 gave a CURVE key, and this job's feeders serve without CURVE"),
    ("a key of another length", join_msg(2, 3, DIGEST, "join", JEP, key=b"A" * 7), "malformed JOIN: "),
    ("truncated", join_msg(2, 3, DIGEST, "join", JEP)[:20], "malformed JOIN: "),
]
refused = 0
for what, msg, want in CASES:
    reason = refuse_reason(ask(EP, msg))
    if reason is None or not reason.startswith(want):
        fail("%s: refused with %r, expected %r" % (what, reason, want))
    refused += 1
ok("hostile JOINs: %d refused, each with its reason" % refused)

# ---- a good JOIN: ROSTER, idempotent; the same index elsewhere refused ----
for attempt in range(2):
    r = roster(ask(EP, join_msg(2, 3, DIGEST, "join", JEP)))
    if r != (3, [(2, JEP, "")]):
        fail("JOIN %d answered %r, expected ROSTER (3, [(2, %s, '')])" % (attempt + 1, r, JEP))
    time.sleep(0.15)  # a repeated JOIN is answered at most twice a heartbeat (200 ms)
# a flood of the same JOIN: a few answers, not one each
flood = CTX.socket(zmq.DEALER)
flood.setsockopt(zmq.LINGER, 0)
flood.connect(EP)
for _ in range(500):
    flood.send(join_msg(2, 3, DIGEST, "join", JEP))
n = 0
t_end = time.time() + 0.5
while time.time() < t_end:
    if flood.poll(50):
        flood.recv()
        n += 1
flood.close()
if not 1 <= n <= 8:
    fail("500 repeated JOINs in 0.5 s got %d answers, expected 1 to 8" % n)
reason = refuse_reason(ask(EP, join_msg(2, 3, DIGEST, "join", "tcp://127.0.0.1:1")))
if reason != "feeder index 2 has joined already at %s (this JOIN says tcp://127.0.0.1:1)" % JEP:
    fail("index 2 at another endpoint: %r" % reason)
refused += 1
wait_for_log("f0", "feeder", "roster: 2 -> 3 feeders (feeder 2 at %s)" % JEP, f0, "the roster's growth not logged")
ok("a good JOIN is answered ROSTER (twice: counted once; a flood of it: %d answers); the same index at another "
   "endpoint is refused" % n)

# ---- trainers: the modulus of a HELLO, ROSTER after the WELCOME ----
reason = refuse_reason(ask(EP, hello_msg(job="join", feeders=1)))
if reason != "this trainer counts 1 feeders, this feeder is one of 2: shrinking the feeders is not supported":
    fail("a smaller modulus: %r" % reason)
refused += 0  # a trainer's refusal: counted in "refused", not in joins_refused
t = CTX.socket(zmq.DEALER)
t.setsockopt(zmq.LINGER, 0)
t.connect(EP)
t.send(hello_msg(job="join", flags=HELLO_ROSTER, credits=2, incarnation=11))
got = answers(t, 2)
if len(got) < 2 or mtype(got[0]) != wire.WELCOME:
    fail("HELLO with the ROSTER flag: %r" % [mtype(x) for x in got])
welcome_feeders = struct.unpack_from("<I", got[0], 12)[0]
if welcome_feeders != 2:
    fail("WELCOME says %d feeders, expected the feeder's own 2" % welcome_feeders)
if roster(got[1]) != (3, [(2, JEP, "")]):
    fail("after the WELCOME: %r, expected the ROSTER" % (roster(got[1]),))
# the trainer reshapes: a new connection of the same process (its
# incarnation) with modulus 3 takes the place at once
t.close()
t = CTX.socket(zmq.DEALER)
t.setsockopt(zmq.LINGER, 0)
t.connect(EP)
t.send(hello_msg(job="join", flags=HELLO_ROSTER, credits=2, feeders=3, incarnation=11))
x = answers(t, 1)
if not x or mtype(x[0]) != wire.WELCOME:
    fail("the reshaping HELLO: %r" % (refuse_reason(x[0]) if x else "no answer"))
welcome_feeders = struct.unpack_from("<I", x[0], 12)[0]
if welcome_feeders != 3:
    fail("WELCOME to a HELLO of modulus 3 says %d feeders" % welcome_feeders)
pieces = []
while len(pieces) < 2:
    x = t.recv_multipart() if t.poll(5000) else fail("no piece after the reshaping HELLO")
    if mtype(x[0]) == wire.PIECE:
        pieces.append(struct.unpack_from("<Q", x[0], 8 + 24)[0])
    elif mtype(x[0]) == ROSTER:
        fail("a ROSTER to a connection whose modulus is the roster's")
if any(seq % 3 != 0 for seq in pieces):
    fail("pieces of share 0 mod 3 expected, got seqs %r" % pieces)
t.send(wire.bye())
t.close()
ok("HELLO modulus: smaller refused; the feeder's own WELCOMEd and told the ROSTER; 3 WELCOMEd, pieces 0 mod 3")

# ---- a real joiner: counted in, then gone with the feeder it joined ----
jstats = os.path.join(bed.TMP, "j-stats.json")
j = spawn([bed.FEEDER, "--job", job_path, "--listen", JEP, "--feeder-index", "2", "--feeders", "3", "--join", EP,
           "--heartbeat-ms", "200", "--timeout-ms", "1500", "--stats", jstats], log=bed.log_path("j", "feeder"))
wait_for_log("j", "feeder", "joined: the feeder at %s counted this one in as feeder 2 of 3" % EP, j,
             "the joiner was not counted in")
f0.send_signal(signal.SIGTERM)
if wait(f0, 30, "feeder 0") != 0:
    fail("feeder 0 exited %d" % f0.returncode)
with open(stats) as f:
    st = json.load(f)
if st["joins"] != 1 or st["joins_refused"] != refused or st["roster"] != {"feeders": 3, "joined": [2]} or \
        st["digest"] != "%016x" % DIGEST:
    fail("feeder 0's --stats: joins %r, joins_refused %r (expected %d), roster %r, digest %r" %
         (st["joins"], st["joins_refused"], refused, st["roster"], st["digest"]))
rc = wait(j, 30, "the joiner")
if rc != 0 or "every feeder this one joined is gone and no trainer is connected: done" not in read_log("j", "feeder"):
    fail("the joiner exited %d without saying why" % rc)
with open(jstats) as f:
    js = json.load(f)
if js["digest"] != "%016x" % DIGEST or js["roster"]["feeders"] != 3:
    fail("the joiner's --stats: digest %r roster %r" % (js["digest"], js["roster"]))
ok("sluice-feeder --join: counted in (the same digest), exits 0 once the feeder it joined is gone; "
   "--stats counts %d refusals" % refused)

# ---- a joiner nobody counts in: exit 1, naming why ----
nobody = "ipc://%s/nobody.sock" % bed.TMP
j = spawn([bed.FEEDER, "--job", job_path, "--listen", "ipc://%s/j2.sock" % bed.TMP, "--feeder-index", "1",
           "--feeders", "2", "--join", nobody, "--heartbeat-ms", "100", "--timeout-ms", "800"],
          log=bed.log_path("j2", "feeder"))
if wait(j, 30, "a joiner of nobody") != 1:
    fail("a joiner of nobody exited %d, expected 1" % j.returncode)
if "--join: no feeder of the job counted this one in within 0.8 s: %s never answered" % nobody not in \
        read_log("j2", "feeder"):
    fail("a joiner of nobody did not say why")
port = free_port()
EP = "tcp://127.0.0.1:%d" % port
f0 = spawn([bed.FEEDER, "--job", job_path, "--listen", EP, "--heartbeat-ms", "100"], log=bed.log_path("f1", "feeder"))
wait_for_log("f1", "feeder", "serving job", f0, "feeder 0 did not start again")
j = spawn([bed.FEEDER, "--job", job_path, "--listen", "ipc://%s/j3.sock" % bed.TMP, "--feeder-index", "1",
           "--feeders", "2", "--join", EP, "--heartbeat-ms", "100", "--timeout-ms", "800", "--set", "shuffle.seed=6"],
          log=bed.log_path("j3", "feeder"))
if wait(j, 30, "a joiner with another plan") != 1:
    fail("a joiner with another plan exited %d, expected 1" % j.returncode)
if not re.search(r"%s refused: feeder 1 joins with another plan: digest [0-9a-f]{16}, this job's %016x" %
                 (re.escape(EP), DIGEST), read_log("j3", "feeder")):
    fail("a joiner with another plan did not say why")
f0.send_signal(signal.SIGTERM)
wait(f0, 30, "feeder 0")
ok("sluice-feeder --join exits 1 naming each feeder's silence or refusal")

# ---- a stream reshaped at S: feeder 0 and the joiner serve exactly the
# fixed-feeder run's pieces from S on ----
def conn(endpoint, **hello):
    s = CTX.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(endpoint)
    s.send(hello_msg(job="join2", **hello))
    return s


def take(s, pieces, until=None, what="", credit_below=1 << 62, rosters_wanted=0):
    """Pieces (seq -> header + body) from s, those below credit_below
    credited back, until its END (returns END's pieces), `until` pieces or
    `rosters_wanted` ROSTERs; the ROSTERs returned too."""
    rosters = []
    while (until is None or len(pieces) < until) and (rosters_wanted == 0 or len(rosters) < rosters_wanted):
        if not s.poll(10000):
            fail("%s: nothing for 10 s (%d pieces)" % (what, len(pieces)))
        frames = s.recv_multipart()
        t = mtype(frames[0])
        if t == wire.PIECE:
            seq = struct.unpack_from("<Q", frames[0], 32)[0]
            pieces[seq] = b"".join(frames)
            if seq < credit_below:
                s.send(wire.credit(1))
        elif t == wire.END:
            return struct.unpack_from("<Q", frames[0], 12)[0], rosters
        elif t == ROSTER:
            rosters.append(roster(frames[0]))
        elif t not in (wire.WELCOME, wire.HEARTBEAT):
            fail("%s: unexpected message %d (%r)" % (what, t, refuse_reason(frames[0])))
    return None, rosters


job_path, job = write_job("join2", files, epochs=2, shuffle={"buffer": 50, "seed": 5})
EP, JEP = "tcp://127.0.0.1:%d" % free_port(), "ipc://%s/r1.sock" % bed.TMP
common = ["--job", job_path, "--heartbeat-ms", "200", "--timeout-ms", "3000"]
f0 = spawn([bed.FEEDER, "--listen", EP] + common, log=bed.log_path("r0", "feeder"))
wait_for_log("r0", "feeder", "serving job", f0, "feeder 0 did not start")
# 4 credits, and 6 more back: pieces 0..9, the trainer's position S = 10
S = 10
a = conn(EP, flags=HELLO_ROSTER, credits=4, incarnation=21)
first = {}
take(a, first, until=S, what="before the join", credit_below=S - 4)
j = spawn([bed.FEEDER, "--listen", JEP, "--feeder-index", "1", "--feeders", "2", "--join", EP] + common,
          log=bed.log_path("r1", "feeder"))
_, rosters = take(a, first, what="waiting for the ROSTER", credit_below=0, rosters_wanted=1)
if sorted(first) != list(range(S)) or rosters[0] != (2, [(1, JEP, "")]):
    fail("before the join %r, then the ROSTER %r" % (sorted(first), rosters[0]))
a.close()
b = conn(EP, flags=HELLO_ROSTER, feeders=2, share=0, resume_seq=S, credits=8, incarnation=21)
c = conn(JEP, flags=HELLO_ROSTER, feeders=2, share=1, resume_seq=S, credits=8, incarnation=21)
mine, joined = {}, {}
end_b, _ = take(b, mine, what="feeder 0 under modulus 2")
end_c, _ = take(c, joined, what="the joiner")
b.send(wire.bye())
c.send(wire.bye())
if sorted(mine) != list(range(S, 50, 2)) or sorted(joined) != list(range(S + 1, 50, 2)) or \
        end_b != 49 or end_c != 50:  # END: the last piece of the share + 1
    fail("from S = %d: feeder 0 sent %r (END %r), the joiner %r (END %r)" %
         (S, sorted(mine), end_b, sorted(joined), end_c))
for p_, who in ((f0, "feeder 0"), (j, "the joiner")):
    if wait(p_, 30, who) != 0:
        fail("%s exited %d after every worker had its END" % (who, p_.returncode))
b.close()
c.close()
if "worker 0: end of data after 20 pieces from this feeder" not in read_log("r1", "feeder") or \
        "worker 0 connected (8 credits, resume at piece 10, pieces 0 mod 2: feeders joined)" not in read_log("r0", "feeder"):
    fail("the logs do not show the joiner's 20 pieces and feeder 0's connection of modulus 2")
# the fixed-feeder run's pieces, from a feeder alone
f0 = spawn([bed.FEEDER, "--listen", EP] + common, log=bed.log_path("r2", "feeder"))
wait_for_log("r2", "feeder", "serving job", f0, "the reference feeder did not start")
# feeder 0 of 1 takes over the joiner's share (1 mod 2), as after its loss
e = conn(EP, flags=HELLO_ROSTER, feeders=2, share=1, resume_seq=40, credits=8, incarnation=23)
taken = {}
end_e, _ = take(e, taken, what="a takeover of share 1 mod 2")
e.send(wire.bye())
if sorted(taken) != list(range(41, 50, 2)) or end_e != 50:
    fail("the takeover of share 1 mod 2 from piece 40: %r (END %r)" % (sorted(taken), end_e))
e.close()
d = conn(EP, credits=8, incarnation=22)
ref = {}
take(d, ref, what="the reference run")
if any(taken[k] != ref[k] for k in taken):
    fail("the takeover's pieces differ from the reference run's")
d.send(wire.bye())
wait(f0, 30, "the reference feeder")
d.close()
got = {k: v for k, v in first.items() if k < S}
got.update(mine)
got.update(joined)
if sorted(got) != list(range(50)) or any(got[k] != ref[k] for k in ref):
    fail("the reshaped stream differs from the fixed-feeder run's at pieces %r" %
         [k for k in range(50) if got.get(k) != ref.get(k)][:10])
ok("a stream reshaped at piece %d: feeder 0 (0 mod 2) and the joiner (1 mod 2) send exactly the pieces of a "
   "fixed-feeder run, ENDs after their last pieces, both exit 0; feeder 0 of 1 takes over share 1 mod 2" % S)

# ---- CURVE: a JOIN must carry a key; a joiner with the job's feeder keys
# is counted in, its public key in the ROSTER ----
def keygen(name):
    path = os.path.join(bed.TMP, "keys", name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    r = subprocess.run([bed.FEEDER, "keygen", path], capture_output=True, text=True)
    if r.returncode != 0:
        fail("keygen %s: %s" % (name, r.stderr))
    with open(path + ".pub") as f:
        public = f.read().strip()
    with open(path + ".key") as f:
        secret = f.read().strip()
    return path, public, secret


fkey, fpub, _ = keygen("feeder")
ckey, cpub, csec = keygen("client")
allow = os.path.join(bed.TMP, "allow")
os.makedirs(allow)
for k in (fkey, ckey):
    shutil.copy(k + ".pub", allow)


def curve_sock(endpoint):
    s = CTX.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.curve_secretkey = csec.encode()
    s.curve_publickey = cpub.encode()
    s.curve_serverkey = fpub.encode()
    s.connect(endpoint)
    return s


EP, JEP = "tcp://127.0.0.1:%d" % free_port(), "ipc://%s/c1.sock" % bed.TMP
keys = ["--curve-key", fkey + ".key", "--curve-allow", allow, "--heartbeat-ms", "200", "--timeout-ms", "1500"]
f0 = spawn([bed.FEEDER, "--job", job_path, "--listen", EP, "--feeders", "2"] + keys,
           log=bed.log_path("c0", "feeder"))
wait_for_log("c0", "feeder", "serving job", f0, "the CURVE feeder did not start")
DIGEST2 = int(re.search(r"job digest ([0-9a-f]{16})", read_log("c0", "feeder")).group(1), 16)
s_ = curve_sock(EP)
s_.send(join_msg(2, 3, DIGEST2, "join2", JEP))
reason = refuse_reason(s_.recv()) if s_.poll(5000) else None
if reason != "feeder 2 gave no CURVE key, and this job's feeders use CURVE":
    fail("a JOIN without a key under CURVE: %r" % reason)
s_.close()
j = spawn([bed.FEEDER, "--job", job_path, "--listen", JEP, "--feeder-index", "2", "--feeders", "3", "--join", EP] +
          keys, log=bed.log_path("c1", "feeder"))
wait_for_log("c1", "feeder", "counted this one in as feeder 2 of 3", j, "the CURVE joiner was not counted in")
t = curve_sock(EP)
t.send(hello_msg(job="join2", flags=HELLO_ROSTER, credits=0, incarnation=31))
got = answers(t, 2)
if len(got) < 2 or roster(got[1]) != (3, [(2, JEP, fpub)]):
    fail("under CURVE, the ROSTER after the WELCOME: %r" % (roster(got[1]) if len(got) > 1 else got))
t.send(wire.bye())
t.close()
f0.send_signal(signal.SIGTERM)
wait(f0, 30, "the CURVE feeder")
if wait(j, 30, "the CURVE joiner") != 0:
    fail("the CURVE joiner exited %d" % j.returncode)
ok("CURVE: a JOIN without a key refused; a joiner with the job's feeder keys counted in, its key in the ROSTER")

bed.finish()
