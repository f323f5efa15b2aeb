#!/usr/bin/env python3
"""Cluster test: the end-to-end trace tests across hosts.

Four hosts (network namespaces on one bridge, tests/cluster/netns.py):
feeders on f0 and f1, trainers on t0 and t1, each trainer in a PID
namespace of its own. Every policy (AUTO on plain and gzip shards, FILE,
DATA, OFF, HINT records and batches, per-replica input), each with W x R =
1x1, 1x2, 2x1, 2x2 and F = 1, 2 (64 runs); every trace is compared with
the reference model (tests/plan/ref_plan.py) piece by piece.
Each case also checks that the pieces really crossed the link: every
feeder logs that it offered no shared memory to each worker (the peer is on
another host: its connection is not in the feeder's network namespace's
/proc/net/tcp), the trainer's summary counts no piece in shared memory, and
its host's eth0 received at least the pieces' bytes. A control case: a
trainer in another network namespace but the same /proc, which could open
the feeder's memory, still gets every piece by copy, because the feeder
does not offer it to a peer on another host.
Every link is encrypted (common.py: each feeder its own key pair, the
workers one pair on every feeder's allow-list): each feeder must log that it
served over CURVE and accepted exactly its W workers, refusing none.

Usage: test_cluster_feed.py BUILD_DIR   (root; exit 77 where namespaces
cannot be made; prints "N passed, 0 failed")
"""
import time

from common import (HB, TRAINER, check_curve, check_trace, cleanup, fail, finish, gen, harness, ids_of, netns, ok,
                    path, read_log, reference, start_feeder, start_trainer, trainer_keys, wait_all, wait_for_log,
                    write_job)

FEEDER_HOSTS = ("f0", "f1")
TRAINER_HOSTS = ("t0", "t1")
NOT_OFFERED = "worker %d: shared memory not offered (the peer is on another host); pieces go by copy"


def run_case(net, name, files, ids, W, R, F, port, pidns=True, **keys):
    harness.case()
    tag = "c%d" % port
    job_path, job = write_job("job-" + tag, files, **keys)
    feeders = [start_feeder(net, FEEDER_HOSTS[j], job_path, port, j, F, tag=tag) for j in range(F)]
    for p, _, log in feeders:
        wait_for_log(log, "serving job", p, "%s: a feeder did not start" % name)
    before = [net.link_bytes(TRAINER_HOSTS[w])[0] for w in range(W)]
    conns = [ep for _, ep, _ in feeders]
    trainers = []
    for w in range(W):
        if pidns:
            trainers.append(start_trainer(net, TRAINER_HOSTS[w], conns, job["name"], w, W, R, tag=tag))
        else:  # the control: the trainer shares the feeders' /proc (it could open their memory)
            trace, log = path("%s-trace%d.jsonl" % (tag, w)), path("%s-trainer%d.log" % (tag, w))
            p = net.spawn(TRAINER_HOSTS[w], [TRAINER, "--connect", ",".join(conns), "--job", job["name"],
                                             "--worker", str(w), "--workers", str(W), "--replicas", str(R),
                                             "--trace", trace] + trainer_keys() + list(HB), log=log)
            trainers.append((p, trace, log))
    codes = wait_all([p for p, _, _ in trainers], 60, name + ": trainers")
    for w, c in enumerate(codes):
        if c != 0:
            fail("%s: trainer %d exited %d" % (name, w, c))
    for j, c in enumerate(wait_all([p for p, _, _ in feeders], 15, name + ": feeders")):
        if c != 0:
            fail("%s: feeder %d exited %d" % (name, j, c))
    for j, (_, _, log) in enumerate(feeders):
        check_curve("%s: feeder %d" % (name, j), log, W)
        for w in range(W):
            if NOT_OFFERED % w not in read_log(log):
                fail("%s: feeder %d did not say it offered worker %d no shared memory (another host):\n%s"
                     % (name, j, w, read_log(log)))
    ref = reference(job, [len(x) for x in ids], W, R)
    for w, (_, trace, log) in enumerate(trainers):
        s = check_trace(name, w, trace, ref, ids)
        got = net.link_bytes(TRAINER_HOSTS[w])[0] - before[w]
        if s["shm_pieces"] != 0 or "pieces through shared memory" in read_log(log):
            fail("%s: worker %d must get every piece by copy (%d in shared memory):\n%s"
                 % (name, w, s["shm_pieces"], read_log(log)))
        if got < s["bytes"]:
            fail("%s: %s's eth0 received %d bytes, fewer than the %d bytes of worker %d's pieces"
                 % (name, TRAINER_HOSTS[w], got, s["bytes"], w))
    ok(name)


def main():
    net = netns.require(list(FEEDER_HOSTS + TRAINER_HOSTS))
    files = gen("a", 150, 5)
    ids = ids_of(files)
    gz = gen("g", 70, 3, "gzip")
    gz_ids = ids_of(gz)
    shuffle = {"buffer": 20, "seed": 11, "reshuffle_each_epoch": True}
    policies = [
        ("AUTO (by files), shuffled, interleaved", files, ids, dict(shuffle=shuffle, parallel_reads=2)),
        ("FILE", files, ids, dict(shard_policy="file")),
        ("DATA G=5", files, ids, dict(shard_policy="data", global_batch_size=5)),
        ("OFF G=7 drop_remainder", files, ids, dict(shard_policy="off", global_batch_size=7, drop_remainder=True)),
        ("HINT records G=6, shuffled", files, ids,
         dict(shard_policy="hint", shard_hint="records", global_batch_size=6, shuffle=shuffle)),
        ("HINT batches G=4", files, ids, dict(shard_policy="hint", shard_hint="batches", global_batch_size=4)),
        ("per-replica input, records", files, ids, dict(per_replica_input=True, per_replica_shard="records")),
        ("AUTO, gzip shards, 3 epochs", gz, gz_ids, dict(epochs=3)),
    ]
    t0 = time.time()
    port = 5600
    for name, fl, fids, keys in policies:
        for W, R in ((1, 1), (1, 2), (2, 1), (2, 2)):
            for F in (1, 2):
                run_case(net, "%s W=%d R=%d F=%d: traces exact, every piece over the link, encrypted"
                         % (name, W, R, F),
                         fl, fids, W, R, F, port, **keys)
                port += 1
    run_case(net, "control: trainers without a PID namespace of their own, which could open the feeders' memory, "
             "are not offered it from another host: every piece by copy (W=2 R=2 F=2)", files, ids,
             2, 2, 2, port, pidns=False, shuffle=shuffle)
    finish(net, t0)


if __name__ == "__main__":
    try:
        main()
    finally:
        cleanup()
