#!/usr/bin/env python3
"""The trace grid against each kind of source (issue #28, "Done when"): a
subset of test_feed.py's cases, run with the job's files as local paths,
as http:// URLs served by Debian's nginx, and as s3://bucket/key names
served by npm's s3rver (tests/integration/test_sto_s3.py starts it the
same way). Every trainer's trace (worker, replica, epoch, step, seq, size,
the ids of its elements) must equal, line for line, what the reference
model (tests/plan/ref_plan.py) gives that worker; that checks sharding
(FILE and DATA), shuffle, batching, both splits and F = 1, 2, 3 feeders
reading remote files, plain and gzip.

    python3 tests/integration/test_remote_grid.py BUILD_DIR

nginx and s3rver are required (scripts/deps.sh installs them).
"""
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "cluster"))
import harness  # noqa: E402
import nginx  # noqa: E402
import test_feed as tf  # noqa: E402  (its run_case, gen, ids_of; BUILD is argv[1])
import test_sto_s3 as s3  # noqa: E402  (s3rver)
from harness import fail, ok  # noqa: E402,F401

SHUFFLE = {"buffer": 20, "seed": 11, "reshuffle_each_epoch": True}


def cases(kind, files, ids, gz, gz_ids, extra):
    tf.run_case("%s: FILE W=2 R=2 shuffled, interleaved, F=1" % kind, files, ids, 2, 2, 1, kind="tcp",
                shuffle=SHUFFLE, parallel_reads=2, feeder_extra=extra)
    tf.run_case("%s: FILE W=2 R=2 shuffled, F=3" % kind, files, ids, 2, 2, 3, shuffle=SHUFFLE, feeder_extra=extra)
    tf.run_case("%s: DATA W=3 R=1 G=5 F=2" % kind, files, ids, 3, 1, 2, shard_policy="data", global_batch_size=5,
                feeder_extra=extra)
    tf.run_case("%s: gzip shards DATA W=1 R=3 G=8 F=2, 3 epochs" % kind, gz, gz_ids, 1, 3, 2, shard_policy="data",
                epochs=3, feeder_extra=extra)


def main():
    files = tf.gen("a", 150, 5)
    ids = tf.ids_of(files)
    gz = tf.gen("g", 70, 3, "gzip")
    gz_ids = tf.ids_of(gz)

    cases("local", files, ids, gz, gz_ids, ())

    www = os.path.join(tf.TMP, "www")
    os.makedirs(www)
    for f in files + gz:
        shutil.copy(f, www)
    try:
        srv = nginx.start(www, tmp=os.path.join(tf.TMP, "nginx"), spawn=harness.spawn)
    except (nginx.Unavailable, RuntimeError) as e:
        fail(str(e))
    cases("http", [srv.url_of(os.path.basename(f)) for f in files], ids,
          [srv.url_of(os.path.basename(f)) for f in gz], gz_ids, ())

    endpoint, _ = s3.start_s3rver(os.path.join(tf.TMP, "s3"), bucket="grid")
    for f in files + gz:
        with open(f, "rb") as fh:
            s3.put(os.path.basename(f), fh.read(), endpoint=endpoint, bucket="grid")
    os.environ.update(AWS_ACCESS_KEY_ID="S3RVER", AWS_SECRET_ACCESS_KEY="S3RVER")
    extra = ("--s3-endpoint", endpoint, "--s3-path-style")
    cases("s3", ["s3://grid/" + os.path.basename(f) for f in files], ids,
          ["s3://grid/" + os.path.basename(f) for f in gz], gz_ids, extra)

    # the servers are the harness's to stop; a feeder or trainer left is a failure
    left = [p.args[0] for p in harness.running() if os.path.basename(p.args[0]).startswith("sluice-")]
    harness.stop_all()
    if left:
        fail("processes still running at the end: %s" % left)
    print("%d passed, 0 failed" % harness.passed())


if __name__ == "__main__":
    try:
        main()
    finally:
        shutil.rmtree(tf.TMP, ignore_errors=True)
