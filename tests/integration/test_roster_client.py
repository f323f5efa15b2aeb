#!/usr/bin/env python3
"""Integration: the client's side of feeders joining a running job (issue
#30 part 1), against fake feeders written with pyzmq (wire.py's layouts)
that serve whatever HELLO they get exactly: share j of modulus F from the
HELLO's resume point (F the HELLO's trailing `feeders` with the flag
FEEDERS, else the fake's own count), one int64 tensor `id` of 2 rows per
piece (ids 2 seq, 2 seq + 1), END with the stream's length.

- bad ROSTERs: feeder 0 of 1 sends, mid-stream, ROSTERs that name a
  feeder too few, an endpoint that is not one, more than 64 feeders (a
  message the decoder refuses), and one with no more feeders than the
  trainer's. sluice-trainer logs each of the bad ones (rate limited: the
  rest counted), keeps streaming with one feeder, and its trace is the
  whole stream in order; no feeder joined.
- joins 1 -> 2 -> 4: feeder 0 names feeder 1 mid-stream, feeder 1 later
  names feeders 2 and 3. The trainer says HELLO again to every share under
  the new modulus from its position (flag FEEDERS, feeders 2, then 4) and
  to the new feeders; its trace is the whole stream, each piece once, in
  order; the summary counts 3 joins; the log says "feeders: 1 -> 2
  (feeder 1 at ... joined); serving from piece S" and when the joined
  feeder's first piece came. The Python client does the same and its
  `feeders` property reads 4 at the end.
- a join, then feeder 0 lost: the joined feeder takes share 0 over under
  modulus 2 (with one feeder given there was no takeover before).
- a trainer never short of pieces (--step-ms: the ROSTER is read in its
  keepalive, the step in hand) reshapes at its next step.
- CURVE: a ROSTER entry without a key is refused; with one, the joined
  feeder is connected to with that key as its server key.

Exits 77 (skipped) when python3-zmq cannot be imported.
Usage: test_roster_client.py BUILD_DIR
"""
import os
import sys

try:
    import zmq
except ImportError:
    system = "/usr/bin/python3"
    if os.path.exists(system) and os.path.realpath(sys.executable) != os.path.realpath(system) and \
            not os.environ.get("SLUICE_ROSTER_REEXEC"):
        os.environ["SLUICE_ROSTER_REEXEC"] = "1"
        os.execv(system, [system] + sys.argv)
    print("skipped: python3-zmq is not installed (scripts/deps.sh installs it)")
    sys.exit(77)

import json  # noqa: E402
import re  # noqa: E402
import struct  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bed  # noqa: E402
import wire  # noqa: E402
from bed import log_path, read_log  # noqa: E402
import harness  # noqa: E402
from harness import fail, ok, spawn  # noqa: E402

bed.setup(sys.argv[1], "roster-client")
CTX = zmq.Context()
ROSTER = 12
FLAG_ROSTER, FLAG_FEEDERS = 0x20, 0x40
JOB = "rosterjob"
N = 40  # pieces in the stream (one epoch, one replica: step == seq)


def roster(feeders, entries, count=None):
    """A ROSTER: entries (index, endpoint, key)."""
    out = wire.header(ROSTER) + struct.pack("<IH", feeders, len(entries) if count is None else count)
    for index, ep, key in entries:
        ep = ep.encode()
        out += struct.pack("<IH", index, len(ep)) + ep + struct.pack("<B", len(key)) + key
    return out


class Fake:
    """Feeder `index` of `own` (its --feeders), serving pieces below
    `limit` (None: all)."""

    def __init__(self, index, own, curve=False):
        self.index, self.own = index, own
        self.s = CTX.socket(zmq.ROUTER)
        self.s.setsockopt(zmq.LINGER, 0)
        self.public = b""
        if curve:  # a CURVE server with a key of its own (no ZAP: any client key)
            self.public, secret = zmq.curve_keypair()
            self.s.curve_secretkey = secret
            self.s.curve_publickey = self.public
            self.s.curve_server = True
        self.s.bind("tcp://127.0.0.1:*")
        self.ep = self.s.getsockopt_string(zmq.LAST_ENDPOINT)
        self.conns = {}   # routing id -> {share, F, next, credits, ended}
        self.hellos = []  # (flags, share, F or None, resume)
        self.served = []  # seqs sent
        self.limit = None
        self.hb = 0.0

    def take(self):
        while self.s.poll(0):
            frames = self.s.recv_multipart()
            rid, hdr = frames[0], frames[1]
            mtype = struct.unpack_from("<H", hdr, 6)[0]
            if mtype == wire.HELLO:
                (worker, workers, replicas, credits, flags, hb, _re, resume, _inc, share,
                 jl) = struct.unpack_from("<IIIIIIQQQIH", hdr, 8)
                tail = hdr[8 + 54 + jl:]
                F = struct.unpack("<I", tail)[0] if flags & FLAG_FEEDERS else None
                self.hellos.append((flags, share, F, resume))
                mod = F or self.own
                # the same trainer's HELLO for a place replaces its connection
                for r in [r for r, c in self.conns.items() if c["share"] == share]:
                    del self.conns[r]
                first = resume + (share + mod - resume % mod) % mod
                self.conns[rid] = {"share": share, "F": mod, "next": first, "credits": credits, "ended": False}
                self.s.send_multipart([rid, wire.welcome(feeder=self.index, feeders=mod, steps_per_epoch=N,
                                                         epochs=1, batch=2, heartbeat_ms=1000,
                                                         fields=(wire.field("id", wire.INT64, 0, []),))])
            elif mtype == wire.CREDIT and rid in self.conns:
                self.conns[rid]["credits"] += struct.unpack_from("<I", hdr, 8)[0]
            elif mtype == wire.BYE:
                self.conns.pop(rid, None)

    def serve(self):
        now = time.time()
        for rid, c in self.conns.items():
            while c["credits"] > 0 and c["next"] < N and (self.limit is None or c["next"] < self.limit):
                seq = c["next"]
                hdr = wire.piece(epoch=0, step=seq, seq=seq, rows=2,
                                 tensors=(wire.tensor(wire.INT64, [2], 16, 0),))
                self.s.send_multipart([rid, hdr, struct.pack("<qq", 2 * seq, 2 * seq + 1)])
                self.served.append(seq)
                c["credits"] -= 1
                c["next"] += c["F"]
            if c["next"] >= N and not c["ended"]:
                self.s.send_multipart([rid, wire.end(worker=0, pieces=N, epochs=1)])
                c["ended"] = True
            if now - self.hb > 0.3:
                self.s.send_multipart([rid, wire.heartbeat()])
        if now - self.hb > 0.3:
            self.hb = now

    def idle(self):
        """Every connection has sent what it may below the limit."""
        return self.conns and all(c["next"] >= min(N, self.limit or N) for c in self.conns.values())

    def send_all(self, frame):
        for rid in self.conns:
            self.s.send_multipart([rid, frame])

    def close(self):
        self.s.close()


def run(p, fakes, step, what, timeout=60):
    """Serve until p exits, calling step() each round."""
    deadline = time.time() + timeout
    while p.poll() is None:
        if time.time() > deadline:
            fail("%s did not finish within %d s" % (what, timeout))
        for f in fakes:
            f.take()
        step()
        for f in fakes:
            f.serve()
        time.sleep(0.002)
    for f in fakes:
        f.take()
    return p.returncode


def check_trace(path, what):
    with open(path) as f:
        lines = f.read().splitlines()
    if not lines or "summary" not in json.loads(lines[-1]):
        fail("%s: no summary line" % what)
    ids = [i for line in lines[:-1] for i in json.loads(line)["ids"]]
    if ids != list(range(2 * N)):
        fail("%s: the trace's ids are not the stream's, in order: %s" % (what, ids))
    return json.loads(lines[-1])["summary"]


def trainer(tag, ep, extra=()):
    trace = os.path.join(bed.TMP, tag + "-trace.jsonl")
    p = spawn([bed.TRAINER, "--connect", ep, "--job", JOB, "--worker", "0", "--workers", "1", "--replicas", "1",
               "--trace", trace, "--timeout-ms", "10000", "--credits", "4"] + list(extra),
              log=log_path(tag, "trainer"), stdout=subprocess.DEVNULL)
    return p, trace


def case_bad():
    tag = "bad"
    f0 = Fake(0, 1)
    f0.limit = 6
    p, trace = trainer(tag, f0.ep)
    sent = []

    def step():
        if not sent and f0.idle():
            for frame in (roster(65, [], count=0),                  # refused by the decoder
                          roster(3, [(1, f0.ep, b"")]),             # feeder 2 missing
                          roster(2, []),                            # feeder 1 missing
                          roster(2, [(1, "udp://127.0.0.1:9", b"")]),  # not an endpoint
                          roster(1, [])):                           # no more feeders: silent
                f0.send_all(frame)
            sent.append(time.time())
        elif sent and f0.limit is not None and time.time() - sent[0] > 1.2:
            f0.send_all(roster(2, [(1, "udp://127.0.0.1:9", b"")]))  # after the second: logged again
            f0.limit = None
    if run(p, [f0], step, "bad: the trainer") != 0:
        fail("bad: the trainer failed:\n" + read_log(tag, "trainer"))
    s = check_trace(trace, "bad")
    log = read_log(tag, "trainer")
    if s.get("feeder_joins") != 0:
        fail("bad: feeder_joins %r, want 0" % s.get("feeder_joins"))
    want = ["a ROSTER ignored (ROSTER header: ",
            "a ROSTER of 3 feeders ignored (feeder 2 is missing); serving on with 1",
            "2 more bad ROSTERs were not logged",
            "a ROSTER of 2 feeders ignored (feeder 1: 'udp://127.0.0.1:9'"]
    for w in want:
        if w not in log:
            fail("bad: the trainer's log lacks %r:\n%s" % (w, log))
    if len(re.findall(r"ROSTER.*ignored", log)) != 3:
        fail("bad: want 3 ROSTERs logged as ignored (2, then 1 a second later):\n" + log)
    if any(h[0] & FLAG_FEEDERS or not h[0] & FLAG_ROSTER for h in f0.hellos) or len(f0.hellos) != 1:
        fail("bad: want one HELLO, with ROSTER and without FEEDERS: %s" % f0.hellos)
    f0.close()
    ok("bad ROSTERs are logged (rate limited) and ignored; the stream goes on with one feeder")


def joins(tag, p, fakes):
    f0, f1, f2, f3 = fakes
    f0.limit = 6
    stage = [0]

    def step():
        if stage[0] == 0 and f0.idle():
            f0.send_all(roster(2, [(1, f1.ep, b"")]))
            f0.limit = f1.limit = 24
            stage[0] = 1
        elif stage[0] == 1 and f1.conns and f0.idle() and f1.idle() and \
                all(c["F"] == 2 for f in (f0, f1) for c in f.conns.values()):
            f1.send_all(roster(4, [(1, f1.ep, b""), (2, f2.ep, b""), (3, f3.ep, b"")]))
            for f in fakes:
                f.limit = None
            stage[0] = 2
    rc = run(p, fakes, step, "%s: the client" % tag)
    if stage[0] != 2:
        fail("%s: the second ROSTER was never sent (stage %d)" % (tag, stage[0]))
    # HELLOs: feeder 0 first without the modulus, then with 2, then 4
    h0 = f0.hellos
    if not h0 or h0[0][0] & FLAG_FEEDERS or not h0[0][0] & FLAG_ROSTER or h0[0][3] != 0:
        fail("%s: feeder 0's first HELLO: %s" % (tag, h0))
    if [h[2] for h in h0[1:]] != [2, 4] or any(h[1] != 0 for h in h0):
        fail("%s: feeder 0's HELLOs after the joins should say feeders 2, then 4, share 0: %s" % (tag, h0))
    for f, j, mods in ((f1, 1, [2, 4]), (f2, 2, [4]), (f3, 3, [4])):
        if [h[2] for h in f.hellos] != mods or any(h[1] != j or h[3] % h[2] != j for h in f.hellos):
            fail("%s: feeder %d's HELLOs: %s" % (tag, j, f.hellos))
        if not f.served:
            fail("%s: feeder %d served nothing" % (tag, j))
    return rc


def case_join_trainer():
    tag = "join"
    fakes = [Fake(0, 1), Fake(1, 2), Fake(2, 4), Fake(3, 4)]
    p, trace = trainer(tag, fakes[0].ep)
    if joins(tag, p, fakes) != 0:
        fail("join: the trainer failed:\n" + read_log(tag, "trainer"))
    s = check_trace(trace, "join")
    if s.get("feeder_joins") != 3:
        fail("join: feeder_joins %r, want 3" % s.get("feeder_joins"))
    log = read_log(tag, "trainer")
    for w in (r"feeders: 1 -> 2 \(feeder 1 at %s joined\); serving from piece \d+" % re.escape(fakes[1].ep),
              r"feeders: 2 -> 4 \(feeder 2 at %s, feeder 3 at %s joined\); serving from piece \d+"
              % (re.escape(fakes[2].ep), re.escape(fakes[3].ep)),
              r"feeder %s \(joined\): its first piece, \d+, came [0-9.]+ s after the ROSTER" % re.escape(fakes[3].ep)):
        if not re.search(w, log):
            fail("join: the trainer's log lacks /%s/:\n%s" % (w, log))
    for f in fakes:
        f.close()
    ok("joins 1 -> 2 -> 4: every share said HELLO again under the new modulus, the new feeders served, "
       "the trace is the whole stream in order, 3 joins counted")


def case_join_loss():
    """1 -> 2, then feeder 0 is lost: with one feeder given there was no
    takeover; after the join, feeder 1 takes share 0 over under modulus 2."""
    tag = "join-loss"
    f0, f1 = Fake(0, 1), Fake(1, 2)
    live = [f0, f1]
    f0.limit = 6
    stage = [0]
    p, trace = trainer(tag, f0.ep, ["--takeover-s", "0.5"])

    def step():
        if stage[0] == 0 and f0.idle():
            f0.send_all(roster(2, [(1, f1.ep, b"")]))
            f0.limit = f1.limit = 20
            stage[0] = 1
        elif stage[0] == 1 and f1.conns and all(c["F"] == 2 for c in f0.conns.values()) and f0.idle() and \
                f1.idle():
            f0.close()  # killed: its connection closes without END
            live.remove(f0)
            f1.limit = None
            stage[0] = 2
    if run(p, live, step, "join-loss: the trainer") != 0:
        fail("join-loss: the trainer failed:\n" + read_log(tag, "trainer"))
    s = check_trace(trace, "join-loss")
    if s.get("feeder_joins") != 1 or s.get("feeder_takeovers") != 1:
        fail("join-loss: feeder_joins %r and feeder_takeovers %r, want 1 and 1" %
             (s.get("feeder_joins"), s.get("feeder_takeovers")))
    if (0, 2) not in [(h[1], h[2]) for h in f1.hellos]:
        fail("join-loss: feeder 1 was not asked for share 0 under modulus 2: %s" % f1.hellos)
    log = read_log(tag, "trainer")
    if not re.search(r"feeder %s took over feeder %s's share" % (re.escape(f1.ep), re.escape(f0.ep)), log):
        fail("join-loss: no takeover in the trainer's log:\n" + log)
    f1.close()
    ok("a join, then the loss of feeder 0: feeder 1 takes its share over under the new modulus, the trace whole")


def case_join_busy():
    """A trainer never short of pieces (feeder 0 always ahead, a step of
    20 ms with the step in hand: the ROSTER is read during its keepalive)
    reshapes at its next step, not at its next wait (which never comes)."""
    tag = "join-busy"
    f0, f1 = Fake(0, 1), Fake(1, 2)
    sent = []
    p, trace = trainer(tag, f0.ep, ["--step-ms", "20"])

    def step():
        if not sent and len(f0.served) >= 6:
            f0.send_all(roster(2, [(1, f1.ep, b"")]))
            sent.append(len(f0.served))
    if run(p, [f0, f1], step, "join-busy: the trainer") != 0:
        fail("join-busy: the trainer failed:\n" + read_log(tag, "trainer"))
    s = check_trace(trace, "join-busy")
    log = read_log(tag, "trainer")
    m = re.search(r"feeders: 1 -> 2 .* serving from piece (\d+)", log)
    if not m or int(m.group(1)) > sent[0] + 4 or not f1.served or s.get("feeder_joins") != 1:
        fail("join-busy: the reshape should come within a step of the ROSTER (sent after piece %d), and feeder 1 "
             "serve: %s, feeder 1 served %s:\n%s" % (sent[0] - 1, m and m.group(0), f1.served, log))
    f0.close()
    f1.close()
    ok("a trainer never short of pieces reshapes at its next step (piece %s, the ROSTER sent after piece %d)"
       % (m.group(1), sent[0] - 1))


def case_curve():
    """Under CURVE, a joined feeder's key comes with the ROSTER and is its
    server key; an entry without one is a bad ROSTER."""
    tag = "curve"
    f0, f1 = Fake(0, 1, curve=True), Fake(1, 2, curve=True)
    keys = os.path.join(bed.TMP, "keys")
    os.makedirs(keys, exist_ok=True)
    r = subprocess.run([bed.FEEDER, "keygen", os.path.join(keys, "trainer")], capture_output=True, text=True)
    if r.returncode != 0:
        fail("keygen: exit %d: %s" % (r.returncode, r.stderr))
    with open(os.path.join(keys, "f0.pub"), "w") as f:
        f.write(f0.public.decode() + "\n")
    f0.limit = 6
    stage = [0]
    p, trace = trainer(tag, f0.ep, ["--curve-key", os.path.join(keys, "trainer.key"),
                                    "--curve-server-key", os.path.join(keys, "f0.pub")])

    def step():
        if stage[0] == 0 and f0.idle():
            f0.send_all(roster(2, [(1, f1.ep, b"")]))  # no key: bad under CURVE
            f0.send_all(roster(2, [(1, f1.ep, f1.public)]))
            f0.limit = None
            stage[0] = 1
    if run(p, [f0, f1], step, "curve: the trainer") != 0:
        fail("curve: the trainer failed:\n" + read_log(tag, "trainer"))
    s = check_trace(trace, "curve")
    log = read_log(tag, "trainer")
    if "a ROSTER of 2 feeders ignored (feeder 1 at %s: no CURVE key (this trainer uses CURVE))" % f1.ep not in log \
            or s.get("feeder_joins") != 1 or not f1.served:
        fail("curve: want the keyless ROSTER refused, then a join to feeder 1 with its key (joins %r, feeder 1 "
             "served %d):\n%s" % (s.get("feeder_joins"), len(f1.served), log))
    f0.close()
    f1.close()
    ok("CURVE: a joined feeder's key comes with the ROSTER (without one the ROSTER is refused)")


PY_CLIENT = r"""
import json, sys
import sluice
ids = []
with sluice.Client([sys.argv[1]], "%s", replicas=1, credits=4) as c:
    before = c.feeders
    for step in c:
        ids.extend(int(i) for i in step.replicas[0]["id"])
    print(json.dumps({"ids": ids, "before": before, "after": c.feeders}))
""" % JOB


def case_join_python():
    tag = "join-py"
    import glob
    if not glob.glob(os.path.join(bed.BUILD, "python", "sluice", "_sluice*.so")):
        ok("# skip Python: this build has no Python package")
        return
    fakes = [Fake(0, 1), Fake(1, 2), Fake(2, 4), Fake(3, 4)]
    env = dict(os.environ, PYTHONPATH=os.path.join(bed.BUILD, "python"), PYTHONDONTWRITEBYTECODE="1")
    out = os.path.join(bed.TMP, tag + ".json")
    with open(out, "w") as fo:
        p = spawn(["/usr/bin/python3", "-c", PY_CLIENT, fakes[0].ep], log=log_path(tag, "client"), stdout=fo,
                  env=env)
    if joins(tag, p, fakes) != 0:
        fail("join-py: the Python client failed:\n" + read_log(tag, "client"))
    with open(out) as f:
        r = json.load(f)
    if r["ids"] != list(range(2 * N)) or r["before"] != 1 or r["after"] != 4:
        fail("join-py: ids in order and feeders 1 then 4 wanted: %s" % r)
    for f in fakes:
        f.close()
    ok("Python: joins 1 -> 2 -> 4, the stream whole and in order, Client.feeders 1 then 4")


def main():
    try:
        for c in (case_bad, case_join_trainer, case_join_loss, case_join_busy, case_curve, case_join_python):
            harness.case()
            c()
        bed.finish()
    finally:
        bed.cleanup()


if __name__ == "__main__":
    main()
