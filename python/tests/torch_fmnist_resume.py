#!/usr/bin/env python3
"""examples/torch_fmnist.py, the template users copy, under torchrun (2
processes, gloo, CPU) in its dev mode (rank 0 starts the feeder through
sluice.Feeder), on the repository's Fashion-MNIST shards (the first 2 of 8:
15,000 images, batch 512, 2 epochs of 30 steps):
  A. uninterrupted, checkpoints every 40 steps and at the end, the test
     set evaluated (accuracy at least 0.6);
  B. the same, every process SIGKILLed after step 45 (its checkpoint at
     step 40: epoch 1, step 10), its feeder with it;
  C. --resume from B's checkpoint (a new feeder, the positions restored).
Checked: A saw every training image exactly once per epoch over the ranks;
C's steps (epoch, step, ids), rank by rank, are A's from step 41 on; C's
final weights equal A's bit for bit, and B's checkpoint's differ from them.
torchrun_resume.py does the same for a script on running feeders.

Usage: torch_fmnist_resume.py BUILD_DIR     (exit 77: torch is not installed)
"""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(ROOT, "examples", "torch_fmnist.py")
try:
    import torch
except ImportError:
    print("torch is not installed (python3-torch): skipped")
    sys.exit(77)

BUILD = os.path.abspath(sys.argv[1])
DATA = os.path.join(BUILD, "python", "fmnist-data")
TMP = tempfile.mkdtemp(prefix="sluice-fmnist-resume-")
ENV = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"), SLUICE_BUILD=BUILD, PYTHONDONTWRITEBYTECODE="1",
           GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
ENV.pop("SLUICE_FEEDER_ENDPOINTS", None)
W, EVERY, DIE, STEPS = 2, 40, 45, 60


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def torchrun(tag, *extra):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = ["/usr/bin/python3", "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", str(W),
           "--master_addr", "127.0.0.1", "--master_port", str(port),
           # Debian 12's torch 1.13 under Python 3.11 needs --redirects/--tee other than 0 (docs/python.md)
           "--redirects", "2", "--tee", "2", "--log_dir", os.path.join(TMP, "logs-" + tag),
           SCRIPT, "--data", DATA, "--shards", "2", "--epochs", "2", "--batch", "512", "--ckpt-every", str(EVERY),
           "--summary", os.path.join(TMP, tag + "-{rank}.json")] + list(extra)
    p = subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        out = p.communicate(timeout=240)[0]
    finally:
        try:  # what is left of the session: the feeder of a killed rank 0 (no finalizer ran)
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
    print("---- %s: exit %d\n%s" % (tag, p.returncode, out[-6000:]))
    return p


def summary(tag, rank):
    with open(os.path.join(TMP, "%s-%d.json" % (tag, rank))) as f:
        return [tuple(x[:2]) + (x[2],) for x in json.load(f)["steps"]]


try:
    a = torchrun("a", "--ckpt", os.path.join(TMP, "a.pt"), "--min-accuracy", "0.6")
    if a.returncode != 0:
        fail("run A failed")
    b = torchrun("b", "--ckpt", os.path.join(TMP, "b.pt"), "--no-eval", "--die-at-step", str(DIE))
    if b.returncode == 0 or os.path.exists(os.path.join(TMP, "b-0.json")):
        fail("run B was not killed (exit %d)" % b.returncode)
    ckb = torch.load(os.path.join(TMP, "b.pt"))
    if ckb["step"] != EVERY or [d["position"] for d in ckb["data"]] != [EVERY, EVERY]:
        fail("B's checkpoint: step %s, positions %s (want %d)" % (ckb["step"], [d["position"] for d in ckb["data"]],
                                                                  EVERY))
    c = torchrun("c", "--resume", os.path.join(TMP, "b.pt"), "--ckpt", os.path.join(TMP, "c.pt"), "--no-eval")
    if c.returncode != 0:
        fail("the resumed run C failed")

    whole = [summary("a", r) for r in range(W)]
    for r in range(W):
        if [s for _, s, _ in whole[r]] != list(range(1, STEPS + 1)):
            fail("A rank %d: steps %s" % (r, [s for _, s, _ in whole[r]]))
        if summary("c", r) != whole[r][EVERY:]:
            fail("rank %d: the resumed run's steps (epoch, step, ids) are not the uninterrupted run's from step %d"
                 % (r, EVERY + 1))
    for e in range(2):
        ids = [i for r in range(W) for ep, _, step_ids in whole[r] if ep == e for i in step_ids]
        if len(ids) != 15000 or len(set(ids)) != 15000:
            fail("A epoch %d: %d ids, %d distinct (want 15000 once each)" % (e, len(ids), len(set(ids))))
    wa, wc = torch.load(os.path.join(TMP, "a.pt"))["model"], torch.load(os.path.join(TMP, "c.pt"))["model"]
    if list(wa) != list(wc) or not all(torch.equal(wa[k], wc[k]) for k in wa):
        fail("the resumed run's final weights differ from the uninterrupted run's")
    if all(torch.equal(wa[k], ckb["model"][k]) for k in wa):
        fail("B's checkpoint holds the final weights: nothing was trained after it")
    print("ok - torch_fmnist.py killed at step %d of %d after its checkpoint at step %d and resumed: the same "
          "steps and ids rank by rank, every image once per epoch, the final weights equal bit for bit"
          % (DIE, STEPS, EVERY))
finally:
    shutil.rmtree(TMP, ignore_errors=True)
