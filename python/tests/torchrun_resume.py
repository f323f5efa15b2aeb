#!/usr/bin/env python3
"""A torchrun training job killed mid-epoch and resumed from its checkpoint
(issue #29 item 3), against real feeders.

Two feeders serve a shuffled job (240 records in 4 files, global batch 16,
2 epochs reshuffled: 15 steps per epoch per worker). torchrun (Debian's
python3-torch, `python3 -m torch.distributed.run`, 2 processes, gloo, CPU)
runs torchrun_train.py, whose ranks read their worker's stream through
sluice.torch.IterableDataset and train a small MLP under DDP:
  A. uninterrupted, to the end;
  B. on new feeders, a checkpoint at step K = 21 (epoch 1, step 6: the
     model, the optimizer and each rank's data state_dict), then SIGKILL to
     the whole torchrun process group while it trains on; the same feeders
     go on serving, and torchrun again with --resume to the end.
Checked: B's ids up to its checkpoint plus the resumed run's are every
record exactly once per epoch, and in A's order, rank by rank; the killed
run had gone past its checkpoint; the final weights equal A's bit for bit.

Usage: torchrun_resume.py BUILD_DIR     (exit 77: torch is not installed)
"""
import atexit
import glob
import os
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "integration"))
import bed  # noqa: E402
import harness  # noqa: E402
from harness import fail  # noqa: E402

try:
    import torch
except ImportError:
    print("torch is not installed (python3-torch): skipped")
    sys.exit(77)

bed.setup(sys.argv[1], "torchrun")
RECORDS, EPOCHS, W, K = 240, 2, 2, 21
FILES = bed.gen("t", RECORDS, 4)
JOB_PATH, JOB = bed.write_job("tr", FILES, epochs=EPOCHS, global_batch_size=16,
                              shuffle={"buffer": 32, "seed": 5, "reshuffle_each_epoch": True})
ENV = dict(os.environ, PYTHONPATH=os.path.join(bed.BUILD, "python"), PYTHONDONTWRITEBYTECODE="1",
           GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def feeders(tag):
    """Two feeders of the job on ipc sockets: (processes, endpoints)."""
    eps = ["ipc://%s/%s-%d.sock" % (bed.TMP, tag, j) for j in range(2)]
    procs = [harness.spawn([bed.FEEDER, "--job", JOB_PATH, "--listen", eps[j], "--feeder-index", str(j),
                            "--feeders", "2", "--threads", "1", "--heartbeat-ms", "200", "--timeout-ms", "3000"],
                           log=bed.log_path(tag, "feeder%d" % j)) for j in range(2)]
    for j in range(2):
        bed.wait_for_log(tag, "feeder%d" % j, "serving job", procs[j], "%s: feeder %d did not start" % (tag, j))
    return procs, eps


SESSIONS = []


@atexit.register
def kill_sessions():
    """torchrun's workers too, on every path (harness kills the launcher)."""
    for pid in SESSIONS:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass


def torchrun(tag, eps, out, run_tag, *extra):
    """torchrun of torchrun_train.py, W processes, in a session of its own."""
    cmd = ["/usr/bin/python3", "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", str(W),
           "--master_addr", "127.0.0.1", "--master_port", str(free_port()),
           # Debian 12's torch 1.13 under Python 3.11 reads the default "0"
           # of --redirects and --tee as None and fails (to_map: 'NoneType'
           # object has no attribute 'get'): stderr is teed instead
           "--redirects", "2", "--tee", "2", "--log_dir", os.path.join(bed.TMP, "torchrun-logs"),
           os.path.join(HERE, "torchrun_train.py"), ",".join(eps), JOB["name"], out, run_tag, str(EPOCHS)]
    p = harness.spawn(cmd + list(extra), log=bed.log_path(tag, "torchrun-" + run_tag), env=ENV,
                      start_new_session=True)
    SESSIONS.append(p.pid)
    return p


def ids_log(out, run_tag, rank):
    """[(epoch, step, [ids])] of one rank's run."""
    with open(os.path.join(out, "ids-%s-rank%d.txt" % (run_tag, rank))) as f:
        return [(int(e), int(s), [int(x) for x in ids.split()]) for e, s, ids in
                (ln.split(" ", 2) for ln in f.read().splitlines())]


t0 = time.monotonic()
# A: nobody kills it
out_a = os.path.join(bed.TMP, "a")
os.mkdir(out_a)
procs, eps = feeders("a")
if bed.wait(torchrun("a", eps, out_a, "whole"), 120, "run A") != 0:
    fail("run A failed:\n" + bed.read_log("a", "torchrun-whole")[-3000:])
if [bed.wait(p, 30, "feeder of A") for p in procs] != [0, 0]:
    fail("A's feeders did not end well")
print("A: uninterrupted in %.1f s" % (time.monotonic() - t0))

# B: a checkpoint at step K, killed while training on, resumed
out_b = os.path.join(bed.TMP, "b")
os.mkdir(out_b)
procs, eps = feeders("b")
p = torchrun("b", eps, out_b, "killed", "--ckpt-at", str(K))
deadline = time.time() + 120
while len(glob.glob(os.path.join(out_b, "ckpt-done-*"))) < W:
    if p.poll() is not None or time.time() > deadline:
        fail("run B ended or hung before its checkpoint:\n" + bed.read_log("b", "torchrun-killed")[-3000:])
    time.sleep(0.02)
time.sleep(0.5)  # a step or two past the checkpoint
os.killpg(p.pid, signal.SIGKILL)
p.wait()
killed = [ids_log(out_b, "killed", r) for r in range(W)]
if not all(log[-1][1] > K for log in killed):
    fail("the killed run had not gone past its checkpoint (step %d): %s" % (K, [log[-1][:2] for log in killed]))
if any(log[-1][1] >= EPOCHS * 15 for log in killed):
    fail("the killed run reached its end")
print("B: killed at steps %s, after its checkpoint at step %d (epoch 1, step 6)"
      % ([log[-1][1] for log in killed], K))
if bed.wait(torchrun("b", eps, out_b, "resumed", "--resume"), 120, "run B resumed") != 0:
    fail("the resumed run failed:\n" + bed.read_log("b", "torchrun-resumed")[-3000:])
if [bed.wait(q, 30, "feeder of B") for q in procs] != [0, 0]:
    fail("B's feeders did not end well")

# every record exactly once per epoch, in A's order, rank by rank
whole = [ids_log(out_a, "whole", r) for r in range(W)]
for r in range(W):
    b = [x for x in killed[r] if x[1] <= K] + ids_log(out_b, "resumed", r)
    if b != whole[r]:
        fail("rank %d: the killed and resumed runs' steps differ from the uninterrupted run's" % r)
    if [s for _, s, _ in b] != list(range(1, EPOCHS * 15 + 1)):
        fail("rank %d: steps %s" % (r, [s for _, s, _ in b]))
for e in range(EPOCHS):
    seen = sorted(i for r in range(W) for ep, _, ids in whole[r] if ep == e for i in ids)
    if seen != list(range(RECORDS)):
        fail("epoch %d: not every record exactly once (%d ids)" % (e, len(seen)))
# the weights, bit for bit
wa = torch.load(os.path.join(out_a, "final-whole.pt"))
wb = torch.load(os.path.join(out_b, "final-resumed.pt"))
if list(wa) != list(wb) or not all(torch.equal(wa[k], wb[k]) for k in wa):
    fail("the resumed run's weights differ from the uninterrupted run's: %s"
         % [k for k in wa if not torch.equal(wa[k], wb.get(k, torch.zeros(0)))])
if all(torch.equal(wa[k], torch.load(os.path.join(out_b, "ckpt.pt"))["model"][k]) for k in wa):
    fail("the checkpoint's weights are the final ones: nothing was trained after it")
harness.ok("killed at step %d of %d and resumed: every record once per epoch, the weights equal bit for bit"
           % (K, EPOCHS * 15))
print("done in %.1f s" % (time.monotonic() - t0))
bed.finish()
bed.cleanup()
