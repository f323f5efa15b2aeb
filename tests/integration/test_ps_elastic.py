#!/usr/bin/env python3
"""Parameter-server workers that join and leave a running job (sluice-trainer
--mode ps --elastic, issue #30 part 2; docs/trainer.md "Parameter servers").

One feeder serves a 3-epoch job; one parameter server (--elastic: it takes
worker 0's WORLD) and two ps workers start. A third process asks to join
(--join) in epoch 0: it is admitted, and at epoch 0's end (every worker
meets there; worker 1 is slow, so the others wait there longer than the
feeder's heartbeat timeout, their connections kept alive) the world
becomes 3 workers; it trains from epoch 1. In epoch
1 worker 1 gets a SIGTERM: it is let go at epoch 1's end, after its last
push, and epoch 2 has 2 workers (worker 0, the joiner as worker 1). Each
process's --trace must equal the reference model's plan
(tests/plan/ref_plan.py) of each epoch's shape for its rank there, every
epoch every element exactly once across the workers; the server exits 0
(both changes taken, every worker of the last world made its final pull),
its pushes are the steps traced, and the two workers left end with the same
weights hash. Then the refusals (another model, other replicas, too many,
a repeated name, the last epoch) and usage errors.

Usage: test_ps_elastic.py BUILD_DIR
"""
import json
import os
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bed  # noqa: E402
import harness  # noqa: E402
from bed import read_log, wait, wait_for_log  # noqa: E402
from harness import fail, ok, spawn  # noqa: E402

bed.setup(sys.argv[1], "ps_elastic")
EPOCHS = 3
FILES = bed.gen("data", 240, 6)
SHUFFLE = {"buffer": 40, "seed": 11}
TAG = "pse"
MODEL = ["--model", "softmax", "--input", "image", "--label", "label", "--classes", "10", "--lr", "0.05",
         "--seed", "5", "--mode", "ps"]


def ids_of_files():
    out = []
    for f in FILES:
        p = subprocess.run([bed.RECORD, "cat", "--decode", "example", f], check=True, capture_output=True, text=True)
        out.append([int(json.loads(x)["example"]["features"]["feature"]["id"]["int64List"]["value"][0])
                    for x in p.stdout.splitlines()])
    return out


IDS = ids_of_files()


def sock(name):
    return "ipc://" + os.path.join(bed.TMP, name + ".sock")


COORD = sock("coord")
PS = sock("ps0")


def summary(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        for line in f:
            if line.startswith('{"summary"'):
                return json.loads(line)["summary"]
    return None


def server(workers=2, extra=()):
    out = os.path.join(bed.TMP, "ps0.out")
    p = spawn([bed.TRAINER, "--ps", PS, "--ps-task", "0", "--workers", str(workers), "--elastic", COORD,
               "--ps-worker-timeout", "20"] + MODEL + list(extra),
              log=bed.log_path(TAG, "ps0"), stdout=open(out, "w"))
    wait_for_log(TAG, "ps0", "serving", p, "the parameter server did not start")
    return p, out


def trainer(who, ep, job, extra, step_ms=40, model=MODEL):
    trace = os.path.join(bed.TMP, "%s.trace" % who)
    out = os.path.join(bed.TMP, "%s.out" % who)
    p = spawn([bed.TRAINER, "--connect", ep, "--job", job["name"], "--devices", "cpu:1", "--trace", trace,
               "--ps", PS, "--heartbeat-ms", "200", "--timeout-ms", "5000", "--progress", "off",
               "--credits", "8", "--step-ms", str(step_ms), "--log-every", "1", "--elastic", COORD]
              + model + list(extra),
              log=bed.log_path(TAG, who), stdout=open(out, "w"))
    return p, trace, out


def lines(path):
    out = []
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            if not line.endswith("\n"):
                break
            x = json.loads(line)
            if "summary" not in x:
                out.append(x)
    return out


def plan(job, W, r, epoch):
    """Worker r's pieces of epoch `epoch` in the W x 1 plan, as its trace writes them."""
    return [{"worker": r, "replica": 0, "epoch": x["epoch"], "step": x["step"], "seq": x["seq"],
             "size": len(x["elems"]), "ids": [IDS[fi][k] for fi, k in x["elems"]]}
            for x in bed.reference(job, [len(x) for x in IDS], W, 1).get(r, []) if x["epoch"] == epoch]


def check(what, got, expect):
    if got != expect:
        for i, (g, e) in enumerate(zip(got, expect)):
            if g != e:
                fail("%s: piece %d differs:\n  got  %s\n  want %s" % (what, i, g, e))
        fail("%s: %d pieces, want %d" % (what, len(got), len(expect)))


def feeder():
    job_path, job = bed.write_job("job-" + TAG, FILES, epochs=EPOCHS, shuffle=SHUFFLE)
    f = spawn([bed.FEEDER, "--job", job_path, "--listen", sock("feeder"), "--threads", "2", "--heartbeat-ms", "200",
               "--timeout-ms", "1000"], log=bed.log_path(TAG, "feeder"))
    wait_for_log(TAG, "feeder", "serving job", f, "the feeder did not start")
    return f, job, sock("feeder")


def refused_join(who, ep, job, extra, text, model=MODEL):
    p, _, _ = trainer(who, ep, job, ["--join", "name-" + who] + list(extra), model=model)
    rc = wait(p, 20, "the refused joiner %s" % who)
    log = read_log(TAG, who)
    if rc == 0 or text not in log:
        fail("%s: expected a failure saying %r, got exit %d:\n%s" % (who, text, rc, log[-1500:]))


def main_case():
    harness.case()
    f, job, ep = feeder()
    ps, ps_out = server()
    w0 = trainer("w0", ep, job, ["--worker", "0", "--workers", "2", "--elastic-max-workers", "3"])
    # worker 1 is 3 times slower: the others wait for it at each epoch's end longer than the feeder's
    # --timeout-ms (1 s), so their connections must be kept alive there
    w1 = trainer("w1", ep, job, ["--worker", "1", "--workers", "2"], step_ms=120)
    wait_for_log(TAG, "w0", "epoch 0 step 1: loss", w0[0], "worker 0 did not train epoch 0")
    j = trainer("joiner", ep, job, ["--join", "joiner"])
    wait_for_log(TAG, "w0", "elastic: a worker (joiner) asks to join in epoch 0: admitted at the epoch's end",
                 w0[0], "the join was not admitted", 10)
    # refusals while the job runs (epoch 0 of 3)
    refused_join("other-model", ep, job, [], "elastic: the joining worker (name-other-model) has config",
                 model=[x if x != "0.05" else "0.1" for x in MODEL])
    refused_join("other-replicas", ep, job, ["--devices", "cpu:2"],
                 "has 2 replicas, but the job's workers have 1")
    refused_join("too-many", ep, job, [], "elastic: the joining worker (name-too-many) would make 4 workers, more "
                 "than --elastic-max-workers 3")
    p, _, _ = trainer("again", ep, job, ["--join", "joiner"])  # the name of a joiner already admitted
    log = read_log(TAG, "again") if wait(p, 20, "the repeated joiner") != 0 else ""
    # still waiting in epoch 0 (the usual case), or already worker 2 on a slow machine
    if "elastic: a worker with ring endpoint joiner already asked to join" not in log and \
            "elastic: the joining worker's ring endpoint joiner is already worker 2's" not in log:
        fail("a repeated JOIN name was not refused:\n%s" % read_log(TAG, "again")[-1500:])
    wait_for_log(TAG, "w1", "elastic: from epoch 1: 2 workers -> 3; worker 1 is now worker 1 of 3", w1[0],
                 "worker 1 did not enter the 3-worker world", 20)
    wait_for_log(TAG, "w1", "epoch 1 step 1: loss", w1[0], "worker 1 did not train epoch 1", 10)
    w1[0].send_signal(signal.SIGTERM)
    wait_for_log(TAG, "w0", "elastic: worker 1 asks to leave in epoch 1: let go at the epoch's end", w0[0],
                 "the leave was not recorded", 10)
    wait_for_log(TAG, "w0", "epoch 2 step 1: loss", w0[0], "worker 0 did not reach epoch 2", 20)
    refused_join("late", ep, job, [], "elastic: the job is in its last epoch (epoch 2 of 3)")
    procs = {"w0": w0, "w1": w1, "joiner": j}
    for who, (p, _, _) in procs.items():
        if wait(p, 40, who) != 0:
            fail("%s exited %d:\n%s" % (who, p.returncode, read_log(TAG, who)[-3000:]))
    if wait(ps, 30, "the parameter server") != 0:
        fail("the parameter server exited %d:\n%s" % (ps.returncode, read_log(TAG, "ps0")[-3000:]))
    if wait(f, 30, "the feeder") != 0:
        fail("the feeder did not exit 0:\n%s" % read_log(TAG, "feeder")[-2000:])
    # each epoch's shape: (W, {process: rank})
    worlds = [(2, {"w0": 0, "w1": 1}), (3, {"w0": 0, "w1": 1, "joiner": 2}), (2, {"w0": 0, "joiner": 1})]
    want = {}
    for e, (W, ranks) in enumerate(worlds):
        for who, r in ranks.items():
            want.setdefault(who, []).extend(plan(job, W, r, e))
    seen = {e: [] for e in range(EPOCHS)}
    steps = 0
    for who, (_, trace, _) in procs.items():
        got = lines(trace)
        check(who, [dict(x, ids=x["ids"]) for x in got], want[who])
        steps += len(got)
        for x in got:
            seen[x["epoch"]] += x["ids"]
    every = sorted(i for ids in IDS for i in ids)
    for e in range(EPOCHS):
        if sorted(seen[e]) != every:
            fail("epoch %d delivered %d elements (%d distinct), want each of %d once"
                 % (e, len(seen[e]), len(set(seen[e])), len(every)))
    s = summary(ps_out)
    if s is None or not s["ok"] or s["world_changes"] != 2 or s["final_workers"] != 2 or s["pushes"] != steps \
            or s["failed_workers"] != 0 or s["lost_workers"] != 0:
        fail("the server's summary: %r (want ok, 2 changes, 2 workers at the end, %d pushes)" % (s, steps))
    h = [summary(procs[who][2]) for who in ("w0", "joiner")]
    if None in h or h[0]["weights_hash"] != h[1]["weights_hash"]:
        fail("the final weights differ: %r" % h)
    for text in ("parameter server 0: the workers change (change 1): 2 -> 3 from epoch 1 (2 kept, 1 joined, 0 let "
                 "go)", "parameter server 0: the workers change (change 2): 3 -> 2 from epoch 2 (2 kept, 0 joined, 1 "
                 "let go)"):
        if text not in read_log(TAG, "ps0"):
            fail("the server's log does not say %r:\n%s" % (text, read_log(TAG, "ps0")[-2000:]))
    if "elastic: worker 1 let go at epoch 1's end" not in read_log(TAG, "w1"):
        fail("worker 1 does not say it was let go:\n%s" % read_log(TAG, "w1")[-2000:])
    ok("2 ps workers + 1 server: a joiner trains from epoch 1 (2 -> 3), worker 1 let go at epoch 1's end (3 -> 2); "
       "traces equal the reference per epoch's shape, every element once per epoch, %d pushes, the server's two "
       "changes, one final weights hash; 5 refusals" % steps)


def usage_errors():
    harness.case()
    base = [bed.TRAINER, "--connect", sock("none"), "--job", "j", "--ps", PS]
    cases = [
        (["--elastic", COORD] + MODEL + ["--workers", "2", "--ring", "ipc://a,ipc://b"],
         "--elastic --mode ps: the workers have no ring, drop --ring and --peers"),
        (["--elastic", COORD] + MODEL + ["--checkpoint", os.path.join(bed.TMP, "ck")],
         "--mode ps keeps the weights and the optimizer state on the parameter servers: give --checkpoint and "
         "--restore to the ps tasks"),
        (["--elastic", COORD] + MODEL + ["--reshape"],
         "--elastic --mode ps: --reshape is not needed: the job restored goes on with the worker count the "
         "parameter servers recorded"),
        (["--elastic", COORD] + MODEL + ["--join", "x", "--workers", "2"],
         "--join: worker 0 gives this process its index, the worker count"),
        (["--elastic", ""] + MODEL, "--elastic: an empty endpoint"),
        (["--ps-task", "0", "--elastic", COORD, "--join", "x"] + MODEL,
         "--join is a worker's: a parameter server is never one of the workers"),
        (["--ps-task", "0", "--elastic", ""] + MODEL, "--elastic: an empty endpoint"),
        (["--ps-task", "0", "--elastic", COORD, "--checkpoint", ""] + MODEL,
         "--checkpoint and --restore: an empty directory name"),
    ]
    for extra, text in cases:
        p = subprocess.run(base + extra, capture_output=True, text=True, timeout=20)
        if p.returncode != 2 or text not in p.stderr:
            fail("sluice-trainer %s: expected exit 2 saying %r, got %d:\n%s" % (" ".join(extra), text, p.returncode,
                                                                               p.stderr[-1000:]))
    ok("usage errors: %d" % len(cases))


if __name__ == "__main__":  # test_elastic_metrics.py imports the helpers above
    try:
        usage_errors()
        main_case()
    finally:
        bed.finish()
