"""What the integration tests that start sluice's binaries share, beside
harness.py (which owns the processes): where the binaries are, a scratch
folder, record files made with `sluice-record gen`, job files, the
reference model's pieces of a job, and the log of each process a test
starts (one file per case tag and role).

    import bed
    bed.setup(sys.argv[1], "hostile")      # the build folder, a name for TMP
    files = bed.gen("a", 150, 5)
    job_path, job = bed.write_job("job-x", files, epochs=1)
    bed.wait_for_log("x", "feeder", "serving job", proc, "x: the feeder did not start")
    ...
    bed.finish()                           # no process left running, "N passed, 0 failed"
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "plan"))
import harness  # noqa: E402
import ref_plan  # noqa: E402
from harness import fail  # noqa: E402

BUILD = RECORD = FEEDER = TRAINER = ROGUE = TMP = None

# a small record: a 16-byte image, a label and its id (sluice-record gen's)
FEATURES = {"image": {"dtype": "uint8", "shape": [16], "from": "bytes"},
            "label": {"dtype": "int64", "shape": []},
            "id": {"dtype": "int64", "shape": []}}


# A Python client program (run by /usr/bin/python3 with this build's
# package): argv[1] the job's name, argv[2] the feeders' endpoints joined by
# commas; it prints every element it gets as [epoch, id, label, the image's
# bytes in hex], in order, as one JSON list, or {"error": ...} and exits 3.
ELEMENTS_CLIENT = r"""
import json, sys
import sluice
out = []
try:
    with sluice.Client(sys.argv[2].split(","), sys.argv[1], replicas=1) as c:
        for step in c:
            r = step.replicas[0]
            for i in range(len(r["id"])):
                out.append([step.epoch, int(r["id"][i]), int(r["label"][i]), r["image"][i].tobytes().hex()])
except Exception as e:
    print(json.dumps({"error": str(e)}))
    sys.exit(3)
print(json.dumps(out))
"""


def setup(build, name):
    """The binaries under build/, and a fresh scratch folder."""
    global BUILD, RECORD, FEEDER, TRAINER, ROGUE, TMP
    BUILD = os.path.abspath(build)
    RECORD = os.path.join(BUILD, "tools", "sluice-record")
    FEEDER = os.path.join(BUILD, "feeder", "sluice-feeder")
    TRAINER = os.path.join(BUILD, "trainer", "sluice-trainer")
    ROGUE = os.path.join(BUILD, "tests", "rogue_peer")
    TMP = tempfile.mkdtemp(prefix="sluice-%s-" % name)


def use_binaries(other):
    """The feeder, sluice-record and the trainer of another build (a
    sanitizer build's, under other/) in place of setup()'s; the Python
    package stays setup()'s build's."""
    global RECORD, FEEDER, TRAINER
    other = os.path.abspath(other)
    FEEDER = os.path.join(other, "feeder", "sluice-feeder")
    RECORD = os.path.join(other, "tools", "sluice-record")
    TRAINER = os.path.join(other, "trainer", "sluice-trainer")


def cleanup():
    if TMP is not None:
        shutil.rmtree(TMP, ignore_errors=True)


def gen(name, records, shards, seed=3, image_bytes=16):
    """`shards` TFRecord files of `records` generated records in all, in TMP/name."""
    out = os.path.join(TMP, name)
    subprocess.run([RECORD, "gen", "--output-dir", out, "--records", str(records), "--shards", str(shards),
                    "--seed", str(seed), "--image-bytes", str(image_bytes), "--prefix", "part"],
                   check=True, capture_output=True)
    return sorted(os.path.join(out, f) for f in os.listdir(out) if f.startswith("part-"))


def write_job(name, files, **keys):
    """A job named `name` at TMP/name.json: G = 8, 2 epochs, prefetch 4 and
    FEATURES unless keys say otherwise. Returns (path, job)."""
    job = {"name": name, "files": files, "format": "tfrecord", "features": FEATURES, "global_batch_size": 8,
           "epochs": 2, "prefetch": 4}
    job.update(keys)
    path = os.path.join(TMP, name + ".json")
    with open(path, "w") as f:
        json.dump(job, f)
    return path, job


def reference(job, counts, W, R):
    """The reference model's pieces of a job per worker (tests/plan/ref_plan.py):
    {worker: [piece, ...]}, `counts` the records of each file."""
    shuffle = job.get("shuffle") or {}
    policy = job.get("shard_policy", "auto")
    if policy == "auto" and job.get("format") == "arrays" and not job.get("per_replica_input", False):
        policy = "data"  # arrays have no file reader: AUTO is DATA (docs/semantics.md 3.4)
    cfg = {"counts": counts, "source_is_files": 1, "policy": policy,
           "hint": job.get("shard_hint", "files"), "G": job["global_batch_size"],
           "drop_remainder": int(job.get("drop_remainder", False)), "shuffle_buffer": shuffle.get("buffer", 0),
           "seed": str(shuffle.get("seed", 0)), "reshuffle": int(shuffle.get("reshuffle_each_epoch", True)),
           "epochs": job["epochs"], "parallel_reads": job.get("parallel_reads", 1),
           "per_replica": int(job.get("per_replica_input", False)), "pr_shard": job.get("per_replica_shard", "none"),
           "W": W, "R": R}
    lines = [json.loads(x) for x in ref_plan.run(json.dumps(cfg))]
    if lines and "error" in lines[0]:
        fail("reference model refused the job: %s" % lines[0]["error"])
    per_worker = {}
    for x in lines:
        if "elems" in x:
            per_worker.setdefault(x["worker"], []).append(x)
    return per_worker


def log_path(tag, who):
    return os.path.join(TMP, "%s-%s.log" % (tag, who))


def read_log(tag, who):
    """The log so far ("" before the process wrote one)."""
    try:
        with open(log_path(tag, who), errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def wait_for_log(tag, who, text, proc, what, timeout=30):
    """Until who's log holds text; fail with `what` if proc ends first or
    the time is up."""
    deadline = time.time() + timeout
    while text not in read_log(tag, who):
        if time.time() > deadline or (proc is not None and proc.poll() is not None):
            fail("%s (waiting for %r in the %s's log)" % (what, text, who))
        time.sleep(0.02)


def wait(p, timeout, what):
    """p's exit status; fail when it runs past the timeout."""
    try:
        return p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        fail("%s did not finish within %d s" % (what, timeout))


def serve_client(tag, job_path, F, client, feeder_args=lambda j: ()):
    """F feeders serving job_path (feeder j: ipc socket TMP/tag-j.sock,
    --feeder-index j of F, --threads 2, then feeder_args(j)), and the Python
    program `client` run to its end by /usr/bin/python3 with this build's
    package, argv[1] the job's name and argv[2] the endpoints joined by
    commas: (the client's CompletedProcess, the feeders' exit statuses)."""
    socks = [os.path.join(TMP, "%s-%d.sock" % (tag, j)) for j in range(F)]
    procs = [harness.spawn([FEEDER, "--job", job_path, "--listen", "ipc://" + socks[j], "--feeder-index", str(j),
                            "--feeders", str(F), "--threads", "2"] + list(feeder_args(j)),
                           log=log_path(tag, "feeder%d" % j))
             for j in range(F)]
    for j in range(F):
        wait_for_log(tag, "feeder%d" % j, "serving job", procs[j], "%s: feeder %d did not start" % (tag, j))
    env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"), PYTHONDONTWRITEBYTECODE="1")
    with open(job_path) as f:
        name = json.load(f)["name"]
    p = subprocess.run(["/usr/bin/python3", "-c", client, name, ",".join("ipc://" + s for s in socks)],
                       capture_output=True, text=True, env=env, timeout=120)
    codes = [wait(q, 30, "%s: feeder" % tag) for q in procs]
    return p, codes


def finish():
    """The end of a test file: no process may be left running."""
    left = harness.running()
    harness.stop_all()
    if left:
        fail("%d processes were still running at the end: %s" % (len(left), [p.args[0] for p in left]))
    print("%d passed, 0 failed" % harness.passed())
