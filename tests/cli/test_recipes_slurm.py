#!/usr/bin/env python3
"""deploy/slurm/sluice-torchrun.sbatch run on this machine (issue #29 item 4):
feeders and `torchrun` workers running a user's script in one allocation.

sluice is installed into a prefix here (cmake --install BUILD --prefix),
and the recipe is given only that prefix (SLUICE_PREFIX), never the build
tree. Slurm is stood in for by tests/cli/fake_slurm (srun: a job step's
tasks run here with Slurm's task variables, placed by --nodes, --relative
and --ntasks-per-node; scontrol show hostnames); torchrun is the real one
(Debian's python3-torch), training examples/torch_train.py on a tiny
generated job of 240 elements, 2 epochs. The allocation's "nodes" are
loopback addresses (127.0.0.1, 127.0.0.2, ...). Checked:
- 1 feeder node and 2 worker nodes of 1 process, with keys (made by the
  first run, 0700): exit 0; every element seen exactly once per epoch over
  the workers (their --summary files); the feeder ran from the prefix's
  bin/ and the workers imported sluice from the prefix; the steps asked
  for --cpus-per-task, the worker step started at node 1 (--relative=1);
  the feeder served its metrics on the port the recipe gives
  (SLUICE_METRICS_PORT + j); every option passed to sluice-feeder is in its
  --help, every torchrun option in torchrun's;
- 2 feeder nodes and 1 worker node of 2 processes (torchrun
  --nproc_per_node 2), in plaintext (SLUICE_INSECURE=1), with
  SLUICE_GPUS_PER_NODE=2 faked away (CUDA_VISIBLE_DEVICES empty): the
  worker step asks --gpus-per-task=2, feeders serve 2 workers of 1 replica;
  every element once per epoch;
- refused before any step: a prefix without sluice-feeder, fewer nodes than
  a feeder and a worker need;
- feeders that fail at start: the workers waiting for them are stopped and
  the recipe fails, saying so.
Skipped (77) without torchrun or torch for /usr/bin/python3, or without
the Python package in the build (a sanitizer build has none).

Usage: test_recipes_slurm.py BUILD_DIR   (prints "N passed, 0 failed")
"""
import glob
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.path.abspath(sys.argv[1])
SBATCH = os.path.join(ROOT, "deploy", "slurm", "sluice-torchrun.sbatch")
SCRIPT = os.path.join(ROOT, "examples", "torch_train.py")
TMP = tempfile.mkdtemp(prefix="sluice-slurm-torchrun-")
RECORDS = 240
passed = 0


def ok(what):
    global passed
    passed += 1
    print("ok %d - %s" % (passed, what))
    sys.stdout.flush()


def fail(what):
    print("FAIL: %s" % what, file=sys.stderr)
    print("%d passed, 1 failed" % passed, file=sys.stderr)
    print("(kept %s)" % TMP, file=sys.stderr)
    sys.exit(1)


def check(cond, what):
    if not cond:
        fail(what)


torchrun = shutil.which("torchrun")
if torchrun is None or subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode:
    print("SKIP: no torchrun, or no torch for /usr/bin/python3 (Debian's python3-torch)")
    sys.exit(77)
if not glob.glob(os.path.join(BUILD, "python", "sluice", "_sluice*.so")):
    print("SKIP: this build has no Python package (a sanitizer build has none)")
    sys.exit(77)

# the installed prefix: what the recipe runs
PREFIX = os.path.join(TMP, "prefix")
p = subprocess.run(["cmake", "--install", BUILD, "--prefix", PREFIX], capture_output=True, text=True)
check(p.returncode == 0, "cmake --install: %s" % p.stderr)
check(os.access(os.path.join(PREFIX, "bin", "sluice-feeder"), os.X_OK), "no bin/sluice-feeder in the prefix")

p = subprocess.run([os.path.join(BUILD, "tools", "sluice-record"), "gen", "--output-dir", os.path.join(TMP, "d"),
                    "--records", str(RECORDS), "--shards", "2", "--image-bytes", "32", "--classes", "4",
                    "--prefix", "s"], capture_output=True, text=True)
check(p.returncode == 0, "sluice-record gen: %s" % p.stderr)
JOB = os.path.join(TMP, "job.json")
with open(JOB, "w") as f:
    json.dump({"name": "slurm-tiny", "files": [os.path.join(TMP, "d", "s-*.tfrecord")], "format": "tfrecord",
               "features": {"image": {"dtype": "uint8", "shape": [32], "from": "bytes"},
                            "label": {"dtype": "int64", "shape": []}, "id": {"dtype": "int64", "shape": []}},
               "global_batch_size": 32, "epochs": 2, "shuffle": {"buffer": 64, "seed": 3}}, f)


def help_options(argv):
    p = subprocess.run(argv + ["--help"], capture_output=True, text=True)
    return set(re.findall(r"(?<![\w-])--([a-z][a-z0-9_-]*)", p.stdout))


FEEDER_OPTS = help_options([os.path.join(PREFIX, "bin", "sluice-feeder")])
TORCHRUN_OPTS = help_options([torchrun])
check("metrics-listen" in FEEDER_OPTS and "nproc_per_node" in TORCHRUN_OPTS, "--help parsing found no options")
base_port = random.randint(20000, 50000)


def run(name, nodes, expect, **settings):
    """The recipe in a fresh submit folder; returns (run folder, output)."""
    d = os.path.join(TMP, name)
    os.makedirs(os.path.join(d, "logs"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLUICE_", "SLURM_", "PYTHONPATH"))}
    env.update({"PATH": os.path.join(ROOT, "tests", "cli", "fake_slurm") + ":/usr/bin:/bin",
                "SLURM_SUBMIT_DIR": d, "SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "fake[1-%d]" % len(nodes),
                "FAKE_NODES": " ".join(nodes), "FAKE_SRUN_LOG": os.path.join(d, "steps"),
                "FAKE_SRUN_LOGS": os.path.join(d, "logs"), "SLUICE_PREFIX": PREFIX, "SLUICE_JOB": JOB,
                "SLUICE_SCRIPT": SCRIPT, "SLUICE_FEEDER_CPUS": "1", "SLUICE_WORKER_CPUS": "1",
                "SLUICE_FEEDER_ARGS": "--report-s 0",
                "SLUICE_SCRIPT_ARGS": "--classes 4 --hidden 16 --summary %s/summary-{rank}.json" % d,
                "SLUICE_FEEDER_PORT": str(base_port), "SLUICE_METRICS_PORT": str(base_port + 100),
                "SLUICE_MASTER_PORT": str(base_port + 200)})
    env.update(settings)
    try:
        p = subprocess.run(["bash", SBATCH], cwd=ROOT, env=env, capture_output=True, text=True, timeout=150,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        fail("%s: the recipe ran past 150 s" % name)
    out = p.stdout + p.stderr
    if p.returncode != expect and not (expect == "nonzero" and p.returncode != 0):
        logs = "".join("--- %s\n%s" % (f, open(f).read()[-1500:])
                       for f in sorted(glob.glob(os.path.join(d, "logs", "*"))))
        fail("%s: exit status %d, not %d:\n%s\n%s" % (name, p.returncode, expect, out[-3000:], logs))
    return d, out


def steps(d):
    """The feeders' and the workers' step: (number, options) each, told
    apart by --relative (the feeders' is 0)."""
    out = {}
    for line in open(os.path.join(d, "steps")).read().splitlines():
        number, rest = line.split(" ", 1)
        opts = rest.split(" -- ", 1)[0]
        out["feeders" if "--relative=0" in opts.split() else "workers"] = (number, opts)
    check(len(out) == 2, "steps: %s" % out)
    return out["feeders"], out["workers"]


def trained(name, d, world):
    sums = []
    for r in range(world):
        path = os.path.join(d, "summary-%d.json" % r)
        check(os.path.exists(path), "%s: worker %d wrote no summary" % (name, r))
        sums.append(json.load(open(path)))
    for s in sums:
        check(s["world"] == world and s["epochs"] == 2, "%s: a summary %s" % (name, s))
        check(s["sluice"].startswith(PREFIX + "/"), "%s: rank %d imported sluice from %s, not the prefix"
              % (name, s["rank"], s["sluice"]))
    for e in range(2):
        ids = sorted(i for s in sums for i in s["ids"][e])
        check(ids == list(range(RECORDS)), "%s: epoch %d: the workers saw %d ids, %d distinct, not 0..%d once each"
              % (name, e, len(ids), len(set(ids)), RECORDS - 1))
    ok("%s: %d workers trained 2 epochs, every element once per epoch, sluice imported from the prefix"
       % (name, world))


def checked_options(name, d, nfeeders):
    """The options each task actually ran with: sluice-feeder's against its
    --help, torchrun's against torchrun's."""
    (fstep, fopts), (wstep, wopts) = steps(d)
    feeder_logs = sorted(glob.glob(os.path.join(d, "logs", "step-%s-task-*.err" % fstep)))
    check(len(feeder_logs) == nfeeders, "%s: %d feeder tasks, not %d" % (name, len(feeder_logs), nfeeders))
    text = open(SBATCH).read()
    feeder_cmd = re.search(r'exec "\$SLUICE_FEEDER"(.*?)\n\' &', text, re.S).group(1)
    torchrun_cmd = re.search(r'exec "\$SLUICE_TORCHRUN"(.*?)"\$SLUICE_SCRIPT"', text, re.S).group(1)
    used = re.findall(r"--([a-z][a-z0-9_-]*)", feeder_cmd + " --report-s")  # and SLUICE_FEEDER_ARGS's
    for o in used:
        check(o in FEEDER_OPTS, "%s: the recipe passes sluice-feeder --%s, not in its --help" % (name, o))
    for o in re.findall(r"--([a-z][a-z0-9_-]*)", torchrun_cmd + " --redirects --tee --log_dir"):
        check(o in TORCHRUN_OPTS, "%s: the recipe passes torchrun --%s, not in torchrun --help" % (name, o))
    for j, log in enumerate(feeder_logs):
        t = open(log).read()
        check("metrics: serving /metrics on *:%d" % (base_port + 100 + j) in t,
              "%s: feeder %d did not serve its metrics on *:%d: %s" % (name, j, base_port + 100 + j, t[-800:]))
        check("as feeder %d of %d" % (j, nfeeders) in t, "%s: task %d is not feeder %d of %d" % (name, j, j,
                                                                                          nfeeders))
    return fopts, wopts, len(used)


# ---- 1 feeder node, 2 worker nodes, keys ----
nodes = ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
d, out = run("keys", nodes, 0)
trained("1 feeder, 2 worker nodes x 1, keys", d, 2)
fopts, wopts, n = checked_options("keys", d, 1)
check(fopts.split() == ["--nodes=1", "--ntasks=1", "--ntasks-per-node=1", "--relative=0", "--cpus-per-task=1",
                        "--kill-on-bad-exit=1"], "the feeder step's options: %s" % fopts)
check(wopts.split() == ["--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--relative=1", "--cpus-per-task=1",
                        "--kill-on-bad-exit=1"], "the worker step's options: %s" % wopts)
ok("steps: the feeder on node 0, torchrun on nodes 1-2 (--relative=1), --cpus-per-task each, no GPU asked; "
   "the %d sluice-feeder options in its --help, torchrun's in torchrun's; metrics on SLUICE_METRICS_PORT" % n)
K = os.path.join(d, "sluice-keys")
check("made the job's keys in %s" % K in out and oct(os.stat(K).st_mode & 0o777) == "0o700",
      "the keys: %s" % out[-500:])
flog = open(os.path.join(d, "logs", "step-%s-task-0.err" % steps(d)[0][0])).read()
check("CURVE: this feeder's public key" in flog and "every worker has its data: done" in flog,
      "the feeder did not serve over CURVE to its end: %s" % flog[-800:])
check("job 'slurm-tiny': 1 feeder(s) (tcp://127.0.0.1:%d), 2 worker node(s) x 1 process(es) from 127.0.0.2"
      % base_port in out, "the recipe's first line: %s" % out[-500:])
ok("keys made once (0700), the feeder served over CURVE until every worker had its data, then ended")

# ---- 2 feeder nodes, 1 worker node of 2 processes, plaintext, GPUs asked ----
d, out = run("insecure", ["127.0.0.1", "127.0.0.2", "127.0.0.3"], 0, SLUICE_FEEDERS="2", SLUICE_INSECURE="1",
             SLUICE_GPUS_PER_NODE="2", CUDA_VISIBLE_DEVICES="")
trained("2 feeders, 1 worker node x 2 processes, plaintext", d, 2)
fopts, wopts, n = checked_options("insecure", d, 2)
check("--gpus-per-task=2" in wopts.split() and "--relative=2" in wopts.split(),
      "the worker step's options: %s" % wopts)
check("--nproc_per_node=\"$SLUICE_NPROC_PER_NODE\"" in open(SBATCH).read(), "torchrun's --nproc_per_node")
check("SLUICE_INSECURE=1: no keys" in out and not os.path.exists(os.path.join(d, "sluice-keys")),
      "SLUICE_INSECURE=1: %s" % out[-500:])
ok("2 feeders (ports P, P+1), torchrun --nproc_per_node 2 on node 2 with --gpus-per-task=2, plaintext")

# ---- refused before any step ----
d, out = run("no-prefix", nodes, 2, SLUICE_PREFIX=os.path.join(TMP, "nowhere"))
check("no executable %s/nowhere/bin/sluice-feeder (set SLUICE_PREFIX)" % TMP in out, "no prefix: %s" % out)
check(not os.path.exists(os.path.join(d, "steps")), "no prefix: a step started")
d, out = run("one-node", ["127.0.0.1"], 2)
check("1 nodes and SLUICE_FEEDERS=1: at least one feeder node and one worker node" in out, "one node: %s" % out)
check(not os.path.exists(os.path.join(d, "steps")), "one node: a step started")
ok("refused before any step: a prefix without sluice-feeder, one node for a feeder and a worker")

# feeders that fail at start: the workers, waiting for them, are stopped
t0 = time.monotonic()
d, out = run("feeder-fails", nodes, "nonzero", SLUICE_INSECURE="1", SLUICE_FEEDER_ARGS="--report-s 0 --no-such-option")
check("the feeders failed (exit status 2): stopping the workers" in out, "a failing feeder: %s" % out[-1000:])
check(time.monotonic() - t0 < 60, "a failing feeder: the recipe took %.0f s" % (time.monotonic() - t0))
ok("feeders that fail at start (exit 2): the recipe stops the waiting workers and fails, in %.0f s"
   % (time.monotonic() - t0))

shutil.rmtree(TMP, ignore_errors=True)
print("%d passed, 0 failed" % passed)
