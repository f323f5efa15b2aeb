#!/usr/bin/env python3
"""/metrics of elastic workers (sluice-trainer --elastic --metrics-listen;
docs/trainer.md "Elastic workers", docs/operations.md).

Ring: one feeder serves test_elastic.py's 3-epoch job (its helpers and
data, by import). Two ring workers start elastic, each serving /metrics on
127.0.0.1:0; the feeder is stopped for a second, so their first input
clients count a wait by feeder. Each then says sluice_trainer_workers 2,
its own sluice_trainer_worker_index and sluice_trainer_world_changes_total
0. A joiner starts (--join, its own --metrics-listen) with its --trace a
FIFO: it serves /metrics and then waits in that open, before its JOIN, and
says workers 0, no index, no steps, labelled worker=<its --join>. Its FIFO
read, it joins (2 x 1 -> 3 x 1). A scraper reads every member's /metrics
all along: the counters (steps, samples, pieces, the input wait in all and
by feeder, the step histograms' counts, the changes) never decrease across
the change (the input client is closed and another opened under the
server), workers goes 2 -> 3 (the joiner's 0 -> 3), the indexes stay as
assigned (0, 1; the joiner's 2). Each member holds at its end on its
--save-weights FIFO, and the last scrape there must be exact: steps,
trained steps, pieces, samples and epochs as its trace says, the
histograms' counts, workers 3, changes 1, and the wait by feeder at least
the first client's. The traces equal the reference (test_elastic's
check_worlds).

Ps: the same with parameter-server workers (--mode ps --elastic,
test_ps_elastic.py's helpers): the joiner comes in at an epoch's end; the
traces equal the reference plan of each epoch's shape.

Usage: test_elastic_metrics.py BUILD_DIR (a sanitizer build's too; about
12 s in a release build)
"""
import importlib
import os
import re
import shutil
import signal
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bed  # noqa: E402
import harness  # noqa: E402
from bed import read_log, wait, wait_for_log  # noqa: E402
from harness import fail, ok  # noqa: E402


def import_prefix(name):
    """Another test's helpers and data (its cases run only as a script).
    Its bed.setup gives a scratch folder (bed.TMP) from there on."""
    return importlib.import_module(name[:-3])


E = import_prefix("test_elastic.py")
TAG = "emetrics"
LISTEN = ["--metrics-listen", "127.0.0.1:0"]
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
JOIN_LABEL = {}  # the joiner's worker label (its --join)


def scrape(port):
    """{(name, frozenset(labels)): value} of one GET /metrics."""
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        m = SAMPLE.match(line)
        if m is None:
            fail("port %d: a line that is no sample: %r" % (port, line))
        out[(m.group(1), frozenset(LABEL.findall(m.group(2) or "")))] = float(m.group(3))
    return out


def get(s, name, **labels):
    """The one series of `name` whose labels include `labels`, or None."""
    hits = [v for (n, ls), v in s.items() if n == name and set(labels.items()) <= set(ls)]
    if len(hits) > 1:
        fail("%d series %s%s" % (len(hits), name, labels))
    return hits[0] if hits else None


def port_of(tag, who, proc):
    wait_for_log(tag, who, "metrics: serving /metrics on", proc, "%s did not serve /metrics" % who, 20)
    return int(re.search(r"metrics: serving /metrics on \S+ \(port (\d+)\)", read_log(tag, who)).group(1))


# the counters that must never decrease while a process serves
COUNTERS = ["sluice_trainer_steps_total", "sluice_trainer_trained_steps_total", "sluice_trainer_pieces_total",
            "sluice_trainer_samples_total", "sluice_trainer_epochs_total", "sluice_trainer_input_wait_seconds_total",
            "sluice_trainer_step_seconds_count", "sluice_trainer_step_input_wait_seconds_count",
            "sluice_trainer_world_changes_total"]


def figures(s):
    """The counters, the wait by feeder 0 and the world of one scrape."""
    f = {n: get(s, n) for n in COUNTERS}
    f["by_feeder"] = get(s, "sluice_trainer_input_wait_by_feeder_seconds_total", feeder="0")
    f["workers"] = get(s, "sluice_trainer_workers")
    f["index"] = get(s, "sluice_trainer_worker_index")
    return f


class Scraper:
    """Scrapes each member every 20 ms on a thread until stopped; keeps the
    figures in order."""

    def __init__(self, ports):
        self.ports, self.seen, self.errors = ports, {w: [] for w in ports}, []
        self.done = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.done.is_set():
            for who, port in self.ports.items():
                try:
                    self.seen[who].append(figures(scrape(port)))
                except Exception as e:  # noqa: BLE001 (reported by stop())
                    self.errors.append("%s: %r" % (who, e))
                    return
            time.sleep(0.02)

    def stop(self):
        self.done.set()
        self.t.join(timeout=30)
        if self.errors:
            fail("a scrape failed while the members served: %s" % self.errors[0])
        return self.seen


def check_series(who, seen, workers, index):
    """Counters never decrease; the world goes through `workers` in order
    (each value at least once, no other); the index through `index`."""
    for a, b in zip(seen, seen[1:]):
        for n in COUNTERS + ["by_feeder"]:
            if a[n] is not None and (b[n] is None or b[n] < a[n]):
                fail("%s: %s went from %s to %s between two scrapes" % (who, n, a[n], b[n]))
    for key, want in (("workers", workers), ("index", index)):
        got = [x[key] for x in seen]
        runs = [v for i, v in enumerate(got) if i == 0 or got[i - 1] != v]
        if runs != want:
            fail("%s: %s over the scrapes %r, want %r in that order" % (who, key, runs, want))


def series_checks(seen):
    check_series("w0", seen["w0"], [2, 3], [0])
    check_series("w1", seen["w1"], [2, 3], [1])
    # the scraper starts once the joiner has sent its JOIN: it may be in already
    check_series("joiner", seen["joiner"], [0, 3] if seen["joiner"][0]["workers"] == 0 else [3],
                 [None, 2] if seen["joiner"][0]["index"] is None else [2])


def weights_fifos():
    """A --save-weights FIFO per member: each holds there at its end."""
    fifos = {}
    for who in ("w0", "w1", "joiner"):
        fifos[who] = os.path.join(bed.TMP, "%s.weights" % who)
        os.mkfifo(fifos[who])
    return fifos


def release(fifos):
    for p in fifos.values():
        threading.Thread(target=lambda p=p: open(p, "rb").read(), daemon=True).start()


def stall_feeder(tag, f, ports, job):
    """The feeder stopped for 1 s: past the members' windows (8 steps) they
    wait for it, a wait by feeder their first client counts and the next
    one must carry on from. Each member's figures then (2 workers, its
    index, no change)."""
    f.send_signal(signal.SIGSTOP)
    try:
        time.sleep(1.0)
    finally:
        f.send_signal(signal.SIGCONT)
    before = {}
    for who, rank in (("w0", 0), ("w1", 1)):
        deadline = time.time() + 10
        while True:  # the wait is counted at the next step received
            s = scrape(ports[who])
            x = before[who] = figures(s)
            if x["by_feeder"] is not None and x["by_feeder"] >= 0.1 or time.time() > deadline:
                break
            time.sleep(0.02)
        if (x["workers"], x["index"], x["sluice_trainer_world_changes_total"]) != (2, rank, 0) or \
                get(s, "sluice_process_info", worker=str(rank), sluice_job=job["name"], program="trainer") != 1 or \
                not x["sluice_trainer_steps_total"] >= 1 or not x["by_feeder"] >= 0.1:
            fail("%s: %s before the join (the feeder stopped for 1 s): %r" % (tag, who, x))
    return before


def held_joiner(tag, start, ports):
    """Start the joiner (start()) with its --trace a FIFO: it serves
    /metrics, then waits in the trace's open, before its JOIN (a trainer
    opens its outputs first). Scrape it there: no world yet. Then read the
    FIFO into joiner.trace.copy on a thread (joined by the caller).
    Returns (the process tuple with the copy as its trace, the thread)."""
    trace = os.path.join(bed.TMP, "joiner.trace")
    os.mkfifo(trace)
    proc = start()
    if proc[1] != trace:
        fail("%s: the joiner's trace is %s, not %s" % (tag, proc[1], trace))
    ports["joiner"] = port_of(tag, "joiner", proc[0])
    s = scrape(ports["joiner"])
    x = figures(s)
    if x["workers"] != 0 or x["index"] is not None or x["sluice_trainer_world_changes_total"] != 0 or \
            x["sluice_trainer_steps_total"] != 0 or x["sluice_trainer_samples_total"] != 0 or \
            get(s, "sluice_process_info", worker=JOIN_LABEL["joiner"], program="trainer") != 1:
        fail("%s: the joiner before its JOIN: %r" % (tag, x))
    copy = trace + ".copy"

    def run():
        with open(trace, "rb") as src, open(copy, "wb") as dst:
            dst.write(src.read())
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return (proc[0], copy, proc[2]), t


def counts(pieces):
    return {"steps": len(pieces), "samples": sum(x["size"] for x in pieces),
            "epochs": len({x["epoch"] for x in pieces})}


def wait_trained(tag, ports, want):
    """Until every member has trained its steps (it then holds on its
    --save-weights FIFO)."""
    deadline = time.time() + 60
    while True:
        last = {who: scrape(port) for who, port in ports.items()}
        if all(get(last[w], "sluice_trainer_trained_steps_total") == want[w]["steps"] for w in ports):
            return
        if time.time() > deadline:
            fail("%s: the members did not train their steps %r: %r" % (
                tag, {w: want[w]["steps"] for w in want}, {w: figures(x) for w, x in last.items()}))
        time.sleep(0.05)


def check_final(tag, final, want, ranks, before):
    """Each member's last scrape, held at its end: exact against its pieces."""
    for who, rank in ranks.items():
        x = figures(final[who])
        w = want[who]
        got = {"steps": x["sluice_trainer_steps_total"], "trained": x["sluice_trainer_trained_steps_total"],
               "pieces": x["sluice_trainer_pieces_total"], "samples": x["sluice_trainer_samples_total"],
               "epochs": x["sluice_trainer_epochs_total"], "step_count": x["sluice_trainer_step_seconds_count"],
               "wait_count": x["sluice_trainer_step_input_wait_seconds_count"], "workers": x["workers"],
               "index": x["index"], "changes": x["sluice_trainer_world_changes_total"]}
        exp = {"steps": w["steps"], "trained": w["steps"], "pieces": w["steps"], "samples": w["samples"],
               "epochs": w["epochs"], "step_count": w["steps"] - 1, "wait_count": w["steps"], "workers": 3,
               "index": rank, "changes": 1}
        if got != exp:
            fail("%s: %s at its end: %r, want (its pieces) %r" % (tag, who, got, exp))
        label = JOIN_LABEL.get(who, str(rank))
        if get(final[who], "sluice_trainer_steps_total", worker=label) != w["steps"]:
            fail("%s: %s's series are not labelled worker=%r" % (tag, who, label))
        # the wait by feeder carried over the change: at least the first
        # client's (the feeder's stop), at most the wait in all
        floor = before[who]["by_feeder"] if who in before else 0
        if x["by_feeder"] is None or not floor <= x["by_feeder"] <= x["sluice_trainer_input_wait_seconds_total"]:
            fail("%s: %s: the wait by feeder 0 %s s at the end, %s s before the change, %s s in all"
                 % (tag, who, x["by_feeder"], floor, x["sluice_trainer_input_wait_seconds_total"]))


def ring_case():
    harness.case()
    f, job, ep = E.feeder(TAG, "feeder")
    ring = ",".join(E.RING)
    fifos = weights_fifos()
    kw = dict(step_ms=60, tag=TAG)
    w0 = E.trainer("w0", ep, job, ["--worker", "0", "--workers", "2", "--ring", ring, "--elastic-max-workers", "3",
                                   "--save-weights", fifos["w0"]] + LISTEN, **kw)
    w1 = E.trainer("w1", ep, job, ["--worker", "1", "--workers", "2", "--ring", ring,
                                   "--save-weights", fifos["w1"]] + LISTEN, **kw)
    ports = {"w0": port_of(TAG, "w0", w0[0]), "w1": port_of(TAG, "w1", w1[0])}
    E.wait_step("w0", w0[0], 0, 1, "worker 0 did not train epoch 0", tag=TAG)
    before = stall_feeder(TAG, f, ports, job)
    JOIN_LABEL["joiner"] = E.sock("joiner")
    j, reader = held_joiner(TAG, lambda: E.trainer("joiner", ep, job, ["--join", E.sock("joiner"), "--save-weights",
                                                                       fifos["joiner"]] + LISTEN, **kw), ports)
    scraper = Scraper(ports)
    E.wait_change(TAG, "w0", w0[0], 1, "the join did not come")
    e1, t1 = E.changes(TAG, "w0")[0][:2]
    worlds = [{"at": (0, 0), "W": 2, "kind": None, "ranks": {"w0": 0, "w1": 1}},
              {"at": (e1, t1), "W": 3, "kind": (2, e1, t1) if t1 > 0 else None,
               "ranks": {"w0": 0, "w1": 1, "joiner": 2}}]
    pieces = {}
    for i, wd in enumerate(worlds):  # as check_worlds cuts the reference streams
        end = worlds[i + 1]["at"] if i + 1 < len(worlds) else (E.EPOCHS, 0)
        for who, r in wd["ranks"].items():
            pieces.setdefault(who, []).extend(x for x in E.stream(job, wd["W"], 1, wd["kind"], r)
                                              if wd["at"] <= (x["epoch"], x["step"]) < end)
    want = {who: counts(p) for who, p in pieces.items()}
    wait_trained(TAG, ports, want)
    seen = scraper.stop()
    final = {who: scrape(port) for who, port in ports.items()}
    release(fifos)
    procs = {"w0": w0, "w1": w1, "joiner": j}
    E.exits(TAG, procs, f)
    reader.join(timeout=30)
    n = E.check_worlds(TAG, job, worlds, procs)
    check_final(TAG, final, want, {"w0": 0, "w1": 1, "joiner": 2}, before)
    series_checks(seen)
    ok("ring: 2 x 1 -> 3 x 1 before step %d of epoch %d; workers 2 -> 3 on every member (the joiner's 0 before its "
       "JOIN, served from its start), indexes 0, 1, 2, one change each; %d scrapes across the change, no counter "
       "ever decreased (the input client replaced under the server, the wait by feeder carried); at the end steps, "
       "pieces, samples, epochs and the histograms' counts exact (%d steps, traces = the reference)"
       % (t1, e1, sum(len(v) for v in seen.values()), n))


def ps_case():
    """The same for parameter-server workers (--mode ps --elastic): the
    joiner comes in at an epoch's end."""
    harness.case()
    P = import_prefix("test_ps_elastic.py")  # its own scratch folder from here on
    if P.IDS != E.IDS:
        fail("test_ps_elastic.py's data differ from test_elastic.py's")
    tag = P.TAG
    f, job, ep = E.feeder(tag, "ps-feeder")  # --timeout-ms 5000: the members hold on their FIFOs at the end
    ps, _ = P.server()
    fifos = weights_fifos()
    w0 = P.trainer("w0", ep, job, ["--worker", "0", "--workers", "2", "--elastic-max-workers", "3",
                                   "--save-weights", fifos["w0"]] + LISTEN)
    w1 = P.trainer("w1", ep, job, ["--worker", "1", "--workers", "2", "--save-weights", fifos["w1"]] + LISTEN)
    ports = {"w0": port_of(tag, "w0", w0[0]), "w1": port_of(tag, "w1", w1[0])}
    wait_for_log(tag, "w0", "epoch 0 step 1: loss", w0[0], "ps: worker 0 did not train epoch 0")
    before = stall_feeder(tag, f, ports, job)
    JOIN_LABEL["joiner"] = "ps-joiner"
    j, reader = held_joiner(tag, lambda: P.trainer("joiner", ep, job, ["--join", "ps-joiner", "--save-weights",
                                                                       fifos["joiner"]] + LISTEN), ports)
    scraper = Scraper(ports)
    wait_for_log(tag, "joiner", "elastic: joined as worker 2 of 3 from epoch", j[0], "ps: the joiner did not come in",
                 30)
    e1 = int(re.search(r"joined as worker 2 of 3 from epoch (\d+)", read_log(tag, "joiner")).group(1))
    ranks = {"w0": 0, "w1": 1, "joiner": 2}
    pieces = {}
    for e in range(P.EPOCHS):
        for who, r in ranks.items():
            if who != "joiner" or e >= e1:
                pieces.setdefault(who, []).extend(P.plan(job, 3 if e >= e1 else 2, r, e))
    want = {who: counts(p) for who, p in pieces.items()}
    wait_trained(tag, ports, want)
    seen = scraper.stop()
    final = {who: scrape(port) for who, port in ports.items()}
    release(fifos)
    procs = {"w0": w0, "w1": w1, "joiner": j}
    for who, (p, _, _) in procs.items():
        if wait(p, 40, who) != 0:
            fail("ps: %s exited %d:\n%s" % (who, p.returncode, read_log(tag, who)[-3000:]))
    for what, p in (("the parameter server", ps), ("the feeder", f)):
        if wait(p, 30, what) != 0:
            fail("ps: %s exited %d" % (what, p.returncode))
    reader.join(timeout=30)
    for who, (_, trace, _) in procs.items():
        P.check("ps: " + who, P.lines(trace), pieces[who])
    check_final(tag, final, want, ranks, before)
    series_checks(seen)
    ok("ps: 2 -> 3 workers from epoch %d; the same figures (workers 2 -> 3, indexes 0, 1, 2, one change each, the "
       "joiner's 0 before its JOIN; counters never decreasing over %d scrapes; exact at the end against the traces, "
       "which equal the reference)" % (e1, sum(len(v) for v in seen.values())))


scratch = [bed.TMP]  # test_elastic's; test_ps_elastic's is bed.TMP at the end
try:
    ring_case()
    ps_case()
    bed.finish()
finally:
    if not os.environ.get("SLUICE_ELASTIC_KEEP"):
        bed.cleanup()
        for d in scratch:
            shutil.rmtree(d, ignore_errors=True)
