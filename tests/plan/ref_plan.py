#!/usr/bin/env python3
"""Reference model of sluice's feed plan (stdlib only).

Written from the rules of docs/semantics.md sections 2-4, not from
feeder/feed_plan.c: every stage is a whole-list transformation, the way the
tf.data graph reads, and the two rebatch ops follow TensorFlow's kernels
(RebatchDatasetV2 and RebatchDataset, docs/semantics.md 4.1 and 4.2) step
by step. Slow and simple on purpose.

Usage: ref_plan.py CONFIG   (CONFIG is JSON text or a path to a JSON file)
Prints, for each worker, one summary line and then every piece of every
epoch in seq order; or one {"error": ...} line when the job is invalid.

Config keys: counts (list), source_is_files (default 1), policy
(auto|off|file|data|hint), hint (files|records|batches), G, drop_remainder,
shuffle_buffer, seed (int or decimal string), reshuffle (default 1), epochs
(0 = forever), forever_epochs (epochs printed when epochs is 0, default 2),
parallel_reads, per_replica, pr_shard (none|files|records), W, R.
With from_W, from_R, from_epoch and from_step (a change of the shape
mid-epoch from from_W x from_R to W x R, docs/semantics.md 5.2): each new
worker's transition stream (transition_pieces), piece lines only.
"""
import json
import sys

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


class PlanError(Exception):
    pass


class SplitMix64:
    def __init__(self, state):
        self.state = state & MASK64

    def next(self):
        self.state = (self.state + GOLDEN) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)


def shard(seq, num_shards, index, require_non_empty, error):
    """ShardDataset: keep positions p with p % num_shards == index. With
    require_non_empty (auto-shard), a shard that gets a first element but
    whose input holds fewer than num_shards elements fails."""
    if require_non_empty and index < len(seq) < num_shards:
        raise PlanError(error(len(seq)))
    return seq[index::num_shards]


def interleave(files, counts, cycle_length):
    """InterleaveDataset, block_length 1: a slot without an iterator opens
    the next file when the cycle reaches it (without moving on); a finished
    iterator empties its slot and the cycle moves on; once the inputs are
    exhausted, empty slots are passed over."""
    cycle_length = max(1, cycle_length)
    slots = [None] * cycle_length
    pending = list(files)
    end_of_input = False
    num_open = 0
    index = 0
    out = []
    while not end_of_input or num_open > 0:
        slot = slots[index]
        if slot is not None:
            f, records = slot
            if records:
                out.append((f, records.pop(0)))
                index = (index + 1) % cycle_length
            else:
                slots[index] = None
                num_open -= 1
                index = (index + 1) % cycle_length
        elif not end_of_input:
            if pending:
                f = pending.pop(0)
                slots[index] = (f, list(range(counts[f])))
                num_open += 1
            else:
                end_of_input = True
        else:
            index = (index + 1) % cycle_length
    return out


def shuffle(elems, buffer_size, seed, reshuffle, epoch):
    """sluice's shuffle (feed_plan.h): fill S, then pick next() % len; the
    hole takes the next input or, once the input ends, the last slot."""
    if buffer_size == 0:
        return list(elems)
    rng = SplitMix64(seed ^ (((epoch * GOLDEN) & MASK64) if reshuffle else 0))
    source = iter(elems)
    buf = []
    while len(buf) < buffer_size:
        e = next(source, None)
        if e is None:
            break
        buf.append(e)
    out = []
    exhausted = False
    while buf:
        i = rng.next() % len(buf)
        out.append(buf[i])
        e = None if exhausted else next(source, None)
        if e is None:
            exhausted = True
            buf[i] = buf[-1]
            buf.pop()
        else:
            buf[i] = e
    return out


def batch(elems, size, drop_remainder):
    out = [elems[i:i + size] for i in range(0, len(elems), size)]
    if drop_remainder and out and len(out[-1]) < size:
        out.pop()
    return out


def batch_sizes_for_worker(G, W, R, w):
    """TensorFlow's batch_sizes_for_worker (docs/semantics.md 4.1)."""
    n = W * R
    floor = G // n
    num_ceil = G - n * floor
    worker0 = [floor + 1] * num_ceil + [floor] * (n - num_ceil)
    offset = w * R
    return worker0[offset:] + worker0[:offset]


def rebatch_v2(batches, batch_sizes):
    """RebatchDatasetV2::GetNext (docs/semantics.md 4.1), drop_remainder False."""
    source = iter(batches)
    tensors = None
    offset = -1
    index = 0
    end_of_sequence = False
    out = []
    while True:
        if end_of_sequence:
            return out
        want = batch_sizes[index]
        got = 0
        pieces = []
        while got < want:
            if offset == -1:
                tensors = next(source, None)
                if tensors is None:
                    end_of_sequence = True
                    break
                offset = 0
            end = min(offset + want - got, len(tensors))
            pieces.extend(tensors[offset:end])
            got += end - offset
            offset = end
            if offset == len(tensors):
                offset = -1
        index = (index + 1) % len(batch_sizes)
        if got == 0 and want > 0:
            return out
        out.append(pieces)


def rebatch_legacy(batches, num_replicas):
    """RebatchDataset v1 (docs/semantics.md 4.2): N slices of ceil(b/N) each."""
    out = []
    for b in batches:
        interval = -(-len(b) // num_replicas)
        for k in range(num_replicas):
            out.append(b[k * interval:(k + 1) * interval])
    return out


def worker_files(cfg, w):
    W = cfg["W"]
    files = list(range(len(cfg["counts"])))
    if cfg["per_replica"]:
        return files[w::W] if cfg["pr_shard"] == "files" else files
    policy = effective_policy(cfg)
    if policy == "file" or (policy == "hint" and cfg["hint"] == "files"):
        return files[w::W]
    return files


def effective_policy(cfg):
    if cfg["policy"] == "auto":
        return "file" if cfg["source_is_files"] else "data"
    return cfg["policy"]


def worker_pieces(cfg, w, epoch):
    """The pieces worker w's pipeline yields in one epoch (no padding)."""
    W, R, G = cfg["W"], cfg["R"], cfg["G"]
    N = W * R
    counts = cfg["counts"]
    files = list(range(len(counts)))

    def sh(elems):
        return shuffle(elems, cfg["shuffle_buffer"], cfg["seed"], cfg["reshuffle"], epoch)

    if cfg["per_replica"]:
        # distribute_datasets_from_function: the user's own shard (plain
        # Dataset.shard, no require_non_empty) and batch(G / N)
        if cfg["pr_shard"] == "files":
            files = shard(files, W, w, False, None)
        elems = interleave(files, counts, cfg["parallel_reads"])
        if cfg["pr_shard"] == "records":
            elems = shard(elems, W, w, False, None)
        return batch(sh(elems), G // N, cfg["drop_remainder"])

    policy = effective_policy(cfg)
    hint = cfg["hint"] if policy == "hint" else None
    if policy == "file" and W > 1:
        if not cfg["source_is_files"]:
            raise PlanError("FILE sharding needs a file source (found an unshardable source dataset)")
        files = shard(files, W, w, True,
                      lambda k: "FILE sharding needs at least %d files, found %d" % (W, k))
    if hint == "files":
        files = shard(files, W, w, True,
                      lambda k: "HINT sharding needs at least %d files, found %d" % (W, k))
    elems = interleave(files, counts, cfg["parallel_reads"])
    if hint == "records":
        elems = shard(elems, W, w, True,
                      lambda k: "HINT sharding needs at least %d records, found %d" % (W, k))
    batches = batch(sh(elems), G, cfg["drop_remainder"])
    if hint == "batches":
        batches = shard(batches, W, w, True,
                        lambda k: "HINT sharding needs at least %d batches, found %d" % (W, k))
    if N == 1:
        pieces = batches
    elif policy == "data":
        pieces = rebatch_legacy(batches, N)
    else:
        pieces = rebatch_v2(batches, batch_sizes_for_worker(G, W, R, w))
    if policy == "data":
        pieces = shard(pieces, W, w, True, lambda k: "DATA sharding: too few pieces")
    return pieces


def epoch_steps(cfg):
    """Steps per epoch of cfg's shape: the largest ceil(pieces / R) over
    the workers (the same every epoch)."""
    R = cfg["R"]
    if cfg["per_replica"] and cfg["G"] % (cfg["W"] * R) != 0:
        raise PlanError("The global_batch_size %d is not divisible by num_replicas_in_sync %d"
                        % (cfg["G"], cfg["W"] * R))
    return max((len(worker_pieces(cfg, w, 0)) + R - 1) // R for w in range(cfg["W"]))


def padded_pieces(cfg, w, epoch, steps):
    """Worker w's pieces of one epoch, padded with empty pieces to steps x R
    (index k: step k // R, replica k % R)."""
    pieces = worker_pieces(cfg, w, epoch)
    return pieces + [[] for _ in range(steps * cfg["R"] - len(pieces))]


def transition_pieces(cfg_old, cfg_new, worker, from_epoch, from_step, epochs):
    """New worker `worker`'s piece stream after a mid-epoch change of the
    cluster shape (docs/semantics.md 5.2): the old shape cfg_old (W x R, T
    steps per epoch) took steps 0..from_step-1 of epoch from_epoch; the new
    shape cfg_new (W' x R', N' = W' R') takes the rest. cfg_old and cfg_new
    are normalize()d configs of one job that differ in W and R only.

    For each step s = from_step..T-1 of epoch from_epoch, B_s is the
    concatenation (old worker 0..W-1, then old replica 0..R-1) of the old
    plan's pieces at step s; B_s is cut into N' contiguous pieces, the
    first |B_s| % N' of |B_s| // N' + 1 elements, the rest of |B_s| // N';
    piece p goes to new worker p // R', replica p % R'. Then epochs
    from_epoch+1 .. epochs-1 of the plain W' x R' plan (`epochs`: where the
    stream ends, the job's epochs or as many as wanted when it has none).

    Returns a list of pieces indexed by the stream's seq, padding included:
    each piece is a list of (file, record) tuples, as worker_pieces gives.
    seq k < (T - from_step) R' is step from_step + k // R', replica k % R'
    of epoch from_epoch; after those, T' R' pieces per epoch (step k // R',
    replica k % R' within the epoch). Raises PlanError for an invalid job
    or a from_step outside 1..T-1."""
    W, R = cfg_old["W"], cfg_old["R"]
    R2 = cfg_new["R"]
    N2 = cfg_new["W"] * R2
    T = epoch_steps(cfg_old)
    T2 = epoch_steps(cfg_new)
    if not 1 <= from_step < T:
        raise PlanError("from_step %d is not in 1..%d" % (from_step, T - 1))
    old = [padded_pieces(cfg_old, w, from_epoch, T) for w in range(W)]
    out = []
    for s in range(from_step, T):
        b = [e for w in range(W) for r in range(R) for e in old[w][s * R + r]]
        lo, hi = divmod(len(b), N2)
        for r2 in range(R2):
            p = worker * R2 + r2
            start = p * lo + min(p, hi)
            out.append(b[start:start + lo + (1 if p < hi else 0)])
    for e in range(from_epoch + 1, epochs):
        out.extend(padded_pieces(cfg_new, worker, e, T2))
    return out


def normalize(raw):
    cfg = {
        "counts": list(raw.get("counts", [])),
        "source_is_files": int(raw.get("source_is_files", 1)),
        "policy": raw.get("policy", "auto"),
        "hint": raw.get("hint", "files"),
        "G": int(raw["G"]),
        "drop_remainder": int(raw.get("drop_remainder", 0)),
        "shuffle_buffer": int(raw.get("shuffle_buffer", 0)),
        "seed": int(raw.get("seed", 0)) & MASK64,
        "reshuffle": int(raw.get("reshuffle", 1)),
        "epochs": int(raw.get("epochs", 1)),
        "forever_epochs": int(raw.get("forever_epochs", 2)),
        "parallel_reads": int(raw.get("parallel_reads", 1)),
        "per_replica": int(raw.get("per_replica", 0)),
        "pr_shard": raw.get("pr_shard", "none"),
        "W": int(raw["W"]),
        "R": int(raw["R"]),
    }
    return cfg


def plan_lines(cfg):
    W, R, G = cfg["W"], cfg["R"], cfg["G"]
    N = W * R
    if cfg["per_replica"] and G % N != 0:
        raise PlanError("The global_batch_size %d is not divisible by num_replicas_in_sync %d" % (G, N))
    epochs = cfg["epochs"] if cfg["epochs"] > 0 else cfg["forever_epochs"]
    # all epochs of all workers first: the step count is a max over workers
    per_epoch = []
    for e in range(max(epochs, 1)):
        per_epoch.append([worker_pieces(cfg, w, e) for w in range(W)])
    steps = max((len(p) + R - 1) // R for p in per_epoch[0])
    lines = []
    for w in range(W):
        first = per_epoch[0][w]
        rep = [sum(len(x) for i, x in enumerate(first) if i % R == r) for r in range(min(R, 64))]
        lines.append('{"worker":%d,"steps":%d,"files":%d,"elements":%d,"pieces":%d,"replica_elements":[%s]}'
                     % (w, steps, len(worker_files(cfg, w)), sum(len(x) for x in first), len(first),
                        ",".join(str(v) for v in rep)))
        if steps == 0:
            continue
        for e in range(epochs):
            pieces = per_epoch[e][w]
            assert max((len(p) + R - 1) // R for p in per_epoch[e]) == steps
            pieces = pieces + [[]] * (steps * R - len(pieces))
            for k, piece in enumerate(pieces):
                lines.append('{"worker":%d,"replica":%d,"epoch":%d,"step":%d,"seq":%d,"elems":[%s]}'
                             % (w, k % R, e, k // R, e * steps * R + k,
                                ",".join("[%d,%d]" % fr for fr in piece)))
    return lines


def transition_lines(cfg, raw):
    """Every new worker's transition stream (transition_pieces) as plan
    lines, for a config with from_W, from_R, from_epoch, from_step (the
    shape before the change; W and R are the new shape's)."""
    old = dict(cfg, W=int(raw["from_W"]), R=int(raw["from_R"]))
    e, t = int(raw["from_epoch"]), int(raw["from_step"])
    epochs = cfg["epochs"] if cfg["epochs"] > 0 else cfg["forever_epochs"]
    T = epoch_steps(old)
    T2 = epoch_steps(cfg)
    R2 = cfg["R"]
    trans = (T - t) * R2
    lines = []
    for w in range(cfg["W"]):
        for k, piece in enumerate(transition_pieces(old, cfg, w, e, t, epochs)):
            if k < trans:
                epoch, step = e, t + k // R2
            else:
                epoch, step = e + 1 + (k - trans) // (T2 * R2), (k - trans) % (T2 * R2) // R2
            lines.append('{"worker":%d,"replica":%d,"epoch":%d,"step":%d,"seq":%d,"elems":[%s]}'
                         % (w, k % R2, epoch, step, k, ",".join("[%d,%d]" % fr for fr in piece)))
    return lines


def run(text):
    raw = json.loads(text)
    cfg = normalize(raw)
    if "from_W" in raw:
        return transition_lines(cfg, raw)
    try:
        return plan_lines(cfg)
    except PlanError as exc:
        return ['{"error":%s}' % json.dumps(str(exc))]


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: ref_plan.py CONFIG-JSON-or-PATH\n")
        return 2
    arg = sys.argv[1]
    if not arg.lstrip().startswith("{"):
        with open(arg) as f:
            arg = f.read()
    sys.stdout.write("".join(line + "\n" for line in run(arg)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
