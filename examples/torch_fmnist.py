#!/usr/bin/python3
"""A PyTorch training loop fed by sluice: a small CNN on Fashion-MNIST,
trained by two processes with torch.distributed (gloo, CPU) and
DistributedDataParallel. Each process is worker w of 2 of the job
examples/fmnist-train.json (sluice.torch.IterableDataset, one replica),
served by one sluice-feeder; at the end rank 0 reads the 10,000 test
images through a second feeder (examples/fmnist-test.json, one worker)
and reports the test accuracy.

    examples/torch_fmnist.py [--epochs N] [--batch N] [--lr X] ...
    examples/torch_fmnist.py --quick       (a short check, for the tests)

Without --feeder the script starts the feeder itself:
    BUILD/feeder/sluice-feeder --job examples/fmnist-train.json
        --files=DATA/train-*.tfrecord --listen ipc://TMP/train.sock --quiet
        --set epochs=N --set global_batch_size=B
and stops it at the end. With --feeder ENDPOINT a running feeder of the
job (two workers of one replica each) serves the stream: its job file
decides the batch size, the order and the epochs (--epochs still bounds
the epochs trained). The shards in DATA are made from the Debian package
dataset-fashion-mnist (/usr/share/datasets/fashion-mnist) when missing,
as scripts/main-job.sh makes them.

Needs the Debian interpreter's numpy and torch (/usr/bin/python3) and a
sluice build with the Python package (BUILD/python/sluice, added to the
module path when not importable). Each process uses one thread
(--threads). Exit status: 0; 1 when the test accuracy is below
--min-accuracy (default 0.90, none with --quick), a --quick check fails or
a process fails; 2 for usage errors; 77 when torch cannot be imported;
130/143 after SIGINT/SIGTERM (every child process is stopped).
"""
import argparse
import ctypes
import glob
import importlib.util
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WORLD = 2
FMNIST = "/usr/share/datasets/fashion-mnist"
QUICK_SHARDS = 2  # --quick trains on the first two of the eight training shards (15,000 images)


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="torch_fmnist.py",
        description="Train a small CNN on Fashion-MNIST with PyTorch DistributedDataParallel "
                    "(2 processes, gloo, CPU), fed by sluice; report the test accuracy.",
        epilog="Example: examples/torch_fmnist.py --epochs 10   |   "
               "examples/torch_fmnist.py --quick --data /tmp/fmnist")
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "fmnist"),
                    help="the TFRecord shards (train-*.tfrecord, test-*.tfrecord.gz); made here from %s when "
                         "missing (default: data/fmnist of the repository)" % FMNIST)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"),
                    help="sluice's build folder (sluice-feeder, sluice-record, python/) (default: build)")
    ap.add_argument("--epochs", type=int, default=None,
                    help="epochs to train (default 8; 1 with --quick)")
    ap.add_argument("--batch", type=int, default=256,
                    help="the global batch size, over both processes (default 256; "
                         "ignored with --feeder: the feeder's job decides)")
    ap.add_argument("--lr", type=float, default=3e-3,
                    help="peak learning rate of Adam (one-cycle schedule: warm-up, then cosine decay) "
                         "(default 0.003)")
    ap.add_argument("--feeder", metavar="ENDPOINT",
                    help="a running sluice-feeder serving examples/fmnist-train.json to 2 workers of "
                         "1 replica (default: start one)")
    ap.add_argument("--test-feeder", metavar="ENDPOINT",
                    help="a running sluice-feeder serving examples/fmnist-test.json to 1 worker "
                         "(default: start one)")
    ap.add_argument("--min-accuracy", type=float, default=None,
                    help="exit 1 when the test accuracy is below this (default 0.90; none with --quick)")
    ap.add_argument("--quick", action="store_true",
                    help="a short check (for the tests): 1 epoch over 2 of the 8 training shards; checks that "
                         "the loss falls and that the two ranks got disjoint data and equal step counts")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per process (default 1)")
    ap.add_argument("--seed", type=int, default=0, help="model initialisation seed (default 0)")
    # internal: a training process started by the launcher
    ap.add_argument("--rank", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--rendezvous", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.epochs is None:
        a.epochs = 1 if a.quick else 8
    if a.min_accuracy is None and not a.quick:
        a.min_accuracy = 0.90
    if a.epochs < 1:
        ap.error("--epochs must be >= 1")
    if a.batch < WORLD:
        ap.error("--batch must be >= %d" % WORLD)
    if a.lr <= 0:
        ap.error("--lr must be > 0")
    if a.threads < 1:
        ap.error("--threads must be >= 1")
    a.data = os.path.abspath(a.data)
    a.build = os.path.abspath(a.build)
    return a


def log(*args):
    print(*args, flush=True)


# --------------------------------------------------------------------------
# The training processes
# --------------------------------------------------------------------------

def make_model():
    import torch
    from torch import nn

    class Net(nn.Module):
        """Two conv blocks and a classifier. The fully connected layers are
        written as convolutions (a 7x7 one over the 7x7 feature map, then a
        1x1): the same function, but the CPU build runs them through oneDNN,
        several times faster than its plain BLAS matrix products."""

        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),    # 16 x 14 x 14
                nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),   # 32 x 7 x 7
                nn.Conv2d(32, 128, 7), nn.ReLU(), nn.Dropout(0.25),           # 128 x 1 x 1
                nn.Conv2d(128, 10, 1), nn.Flatten())                          # 10 logits

        def forward(self, image):
            # uint8 (rows, 784) -> normalized float (rows, 1, 28, 28)
            x = image.to(torch.float32).mul_(1.0 / 255).sub_(0.2860).div_(0.3530)
            return self.features(x.view(-1, 1, 28, 28))

    return Net()


def lr_at(progress, peak, warmup=0.1):
    """One cycle: linear warm-up over the first `warmup` of training, then a
    cosine decay to 1/100 of the peak (progress in [0, 1])."""
    if progress < warmup:
        return peak * (0.1 + 0.9 * progress / warmup)
    t = min(1.0, (progress - warmup) / (1 - warmup))
    return peak * (0.01 + 0.99 * 0.5 * (1 + math.cos(math.pi * t)))


def train_rank(a):
    import numpy as np
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP
    import sluice.torch

    rank = a.rank
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", init_method="file://" + a.rendezvous, rank=rank, world_size=WORLD)
    torch.manual_seed(a.seed)
    model = DDP(make_model())  # DDP broadcasts rank 0's initial weights
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    train_job = json.load(open(os.path.join(HERE, "fmnist-train.json")))["name"]
    test_job = json.load(open(os.path.join(HERE, "fmnist-test.json")))["name"]

    ds = sluice.torch.IterableDataset(feeders=[a.feeder], job=train_job, worker=rank, workers=WORLD, replicas=1)
    loader = torch.utils.data.DataLoader(ds, batch_size=None)
    t_train = time.monotonic()
    quick_fail = []
    first_losses, last_losses = [], []  # --quick: loss per image of the first and last 10 steps
    epochs_done = 0
    for epoch in range(a.epochs):
        t0 = time.monotonic()
        model.train()
        loss_sum = torch.zeros((), dtype=torch.float64)
        correct = rows_seen = steps = 0
        ids = []
        spe = None
        for step, batch in enumerate(loader):
            if spe is None:
                spe = ds.steps_per_epoch or 0
            image, label = batch["image"], batch["label"]
            n = label.shape[0]  # 0: an empty piece (this worker has no data at this step)
            # the step's rows over both ranks: the loss is the mean over the
            # global batch (DDP averages the gradients over the ranks, hence * WORLD)
            total = torch.tensor([float(n)])
            dist.all_reduce(total)
            total = total.item()
            progress = (epoch + (step / spe if spe else 0.0)) / a.epochs
            for g in opt.param_groups:
                g["lr"] = lr_at(progress, a.lr)
            logits = model(image)
            loss = F.cross_entropy(logits, label, reduction="sum")
            opt.zero_grad(set_to_none=True)
            (loss * (WORLD / max(total, 1.0))).backward()
            opt.step()
            loss_sum += loss.detach().to(torch.float64)
            if n:
                correct += int((logits.detach().argmax(1) == label).sum())
            rows_seen += n
            steps += 1
            ids.append(batch["id"].numpy().copy())
            if a.quick and n:
                if len(first_losses) < 10:
                    first_losses.append(loss.item() / n)
                last_losses = (last_losses + [loss.item() / n])[-10:]
        if steps == 0:  # the stream had fewer epochs than --epochs
            break
        epochs_done += 1
        stats = torch.tensor([loss_sum.item(), correct, rows_seen], dtype=torch.float64)
        dist.all_reduce(stats)
        dt = time.monotonic() - t0
        # both ranks: the same step count, disjoint ids
        mine = np.concatenate(ids) if ids else np.zeros(0, np.int64)
        gathered = [None] * WORLD
        dist.all_gather_object(gathered, (steps, mine))
        step_counts = [g[0] for g in gathered]
        overlap = np.intersect1d(gathered[0][1], gathered[1][1]).size
        dup = sum(g[1].size - np.unique(g[1]).size for g in gathered)
        if rank == 0:
            total_rows = int(stats[2])
            log("epoch %d/%d: loss %.4f, accuracy %.4f, %d images in %.1f s (%.0f images/s), steps %s, "
                "ids %s" % (epoch + 1, a.epochs, stats[0] / max(total_rows, 1), stats[1] / max(total_rows, 1),
                            total_rows, dt, total_rows / dt, "+".join(map(str, step_counts)),
                            "disjoint" if overlap == 0 and dup == 0 else
                            "OVERLAP %d, repeated %d" % (overlap, dup)))
        if len(set(step_counts)) != 1:
            quick_fail.append("epoch %d: the ranks had different step counts %s" % (epoch + 1, step_counts))
        if overlap or dup:
            quick_fail.append("epoch %d: %d ids reached both ranks, %d repeated within a rank"
                              % (epoch + 1, overlap, dup))
    ds.close()
    train_s = time.monotonic() - t_train

    if a.quick:
        if first_losses and last_losses:
            fl = torch.tensor([sum(first_losses) / len(first_losses), sum(last_losses) / len(last_losses)],
                              dtype=torch.float64)
        else:
            fl = torch.zeros(2, dtype=torch.float64)
        dist.all_reduce(fl)
        first, last = fl[0].item() / WORLD, fl[1].item() / WORLD
        if rank == 0:
            log("quick: loss per image over the first steps %.4f, the last steps %.4f" % (first, last))
        if not last < first:
            quick_fail.append("the loss did not fall (first steps %.4f, last steps %.4f)" % (first, last))
        if epochs_done == 0:
            quick_fail.append("no step was received")

    status = 0
    if rank == 0:
        status = evaluate(a, model.module, test_job, epochs_done, train_s)
        for f in quick_fail:
            log("FAILED:", f)
        if quick_fail:
            status = 1
    dist.barrier()
    dist.destroy_process_group()
    return status


def evaluate(a, model, test_job, epochs_done, train_s):
    import torch
    import sluice.torch

    model.eval()
    ds = sluice.torch.IterableDataset(feeders=[a.test_feeder], job=test_job, worker=0, workers=1, replicas=1)
    correct = total = 0
    t0 = time.monotonic()
    with torch.no_grad():
        for _ in range(1000):  # each iteration one epoch of the test job (it has one)
            n_before = total
            for batch in ds:
                label = batch["label"]
                if label.shape[0]:
                    correct += int((model(batch["image"]).argmax(1) == label).sum())
                    total += label.shape[0]
            if total == n_before:
                break
    ds.close()
    acc = correct / total if total else 0.0
    log("test accuracy %.4f (%d/%d images) after %d epoch%s, trained in %.1f s, evaluated in %.1f s"
        % (acc, correct, total, epochs_done, "" if epochs_done == 1 else "s", train_s, time.monotonic() - t0))
    if total != 10000:
        log("note: the test set has %d images, not 10000" % total)
    if a.min_accuracy is not None and acc < a.min_accuracy:
        log("FAILED: test accuracy %.4f is below --min-accuracy %.4f" % (acc, a.min_accuracy))
        return 1
    return 0


# --------------------------------------------------------------------------
# The launcher: data, feeders, the two training processes, cleanup
# --------------------------------------------------------------------------

class Stop(Exception):
    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def _on_signal(signum, _frame):
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second one does not interrupt the cleanup
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Stop(signum)


def _die_with_parent():
    """In a child, before exec: get SIGTERM when the launcher dies (even by
    SIGKILL), so no feeder or rank outlives it; ignore the terminal's
    SIGINT: the launcher stops the children itself."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def ensure_data(a):
    train = sorted(glob.glob(os.path.join(a.data, "train-*.tfrecord")))
    test = sorted(glob.glob(os.path.join(a.data, "test-*.tfrecord.gz")))
    if train and test:
        return
    rec = os.path.join(a.build, "tools", "sluice-record")
    if not os.access(rec, os.X_OK):
        sys.exit("torch_fmnist.py: no shards in %s and no %s to make them (build sluice first)" % (a.data, rec))
    if not os.path.isdir(FMNIST):
        sys.exit("torch_fmnist.py: no shards in %s and no %s (apt-get install dataset-fashion-mnist)"
                 % (a.data, FMNIST))
    log("making the Fashion-MNIST shards in %s" % a.data)
    os.makedirs(a.data, exist_ok=True)
    if not train:
        subprocess.run([rec, "convert", "idx", "--images", FMNIST + "/train-images-idx3-ubyte.gz",
                        "--labels", FMNIST + "/train-labels-idx1-ubyte.gz", "--output-dir", a.data,
                        "--prefix", "train", "--shards", "8", "--index"], check=True, stdout=subprocess.DEVNULL,
                       preexec_fn=_die_with_parent)
    if not test:
        subprocess.run([rec, "convert", "idx", "--images", FMNIST + "/t10k-images-idx3-ubyte.gz",
                        "--labels", FMNIST + "/t10k-labels-idx1-ubyte.gz", "--output-dir", a.data,
                        "--prefix", "test", "--shards", "2", "--compression", "gzip"],
                       check=True, stdout=subprocess.DEVNULL, preexec_fn=_die_with_parent)


def stop_all(procs):
    for p in procs:
        if p.poll() is None:
            p.terminate()
    deadline = time.monotonic() + 5
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def launch(a):
    if importlib.util.find_spec("torch") is None:
        print("torch_fmnist.py: %s cannot import torch (Debian: apt-get install python3-torch): skipped"
              % sys.executable, file=sys.stderr)
        return 77
    t_start = time.monotonic()
    env = dict(os.environ)
    pypath = os.path.join(a.build, "python")
    if os.path.isdir(os.path.join(pypath, "sluice")):
        env["PYTHONPATH"] = pypath + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("OMP_NUM_THREADS", str(a.threads))
    feeder_bin = os.path.join(a.build, "feeder", "sluice-feeder")
    if (not a.feeder or not a.test_feeder) and not os.access(feeder_bin, os.X_OK):
        sys.exit("torch_fmnist.py: no %s (build sluice, or give --feeder and --test-feeder)" % feeder_bin)
    ensure_data(a)

    tmp = tempfile.mkdtemp(prefix="sluice-torch-")
    procs = []
    feeders = []
    own_feeder = not a.feeder
    try:
        if own_feeder:
            a.feeder = "ipc://" + os.path.join(tmp, "train.sock")
            files = os.path.join(a.data, "train-*.tfrecord")
            if a.quick:
                files = ",".join(sorted(glob.glob(files))[:QUICK_SHARDS])
            cmd = [feeder_bin, "--job", os.path.join(HERE, "fmnist-train.json"), "--files=" + files,
                   "--listen", a.feeder, "--quiet", "--idle-exit", "120",
                   "--set", "epochs=%d" % a.epochs, "--set", "global_batch_size=%d" % a.batch]
            feeders.append(subprocess.Popen(cmd, preexec_fn=_die_with_parent))
        if not a.test_feeder:
            a.test_feeder = "ipc://" + os.path.join(tmp, "test.sock")
            cmd = [feeder_bin, "--job", os.path.join(HERE, "fmnist-test.json"),
                   "--files=" + os.path.join(a.data, "test-*.tfrecord.gz"), "--listen", a.test_feeder, "--quiet"]
            feeders.append(subprocess.Popen(cmd, preexec_fn=_die_with_parent))
        procs += feeders
        log("torch_fmnist: %d processes (gloo, %d thread%s each), data %s, feeder %s, test feeder %s, "
            "%d epoch%s, global batch %s, lr %g%s"
            % (WORLD, a.threads, "" if a.threads == 1 else "s", a.data, a.feeder, a.test_feeder, a.epochs,
               "" if a.epochs == 1 else "s", a.batch if own_feeder else "(the feeder's)", a.lr,
               ", quick check" if a.quick else ""))
        base = [sys.executable, os.path.abspath(__file__), "--build", a.build, "--data", a.data,
                "--epochs", str(a.epochs), "--batch", str(a.batch), "--lr", repr(a.lr),
                "--feeder", a.feeder, "--test-feeder", a.test_feeder, "--threads", str(a.threads),
                "--seed", str(a.seed), "--rendezvous", os.path.join(tmp, "rendezvous")]
        if a.quick:
            base.append("--quick")
        if a.min_accuracy is not None:
            base += ["--min-accuracy", repr(a.min_accuracy)]
        ranks = [subprocess.Popen(base + ["--rank", str(r)], env=env, preexec_fn=_die_with_parent)
                 for r in range(WORLD)]
        procs += ranks
        status = 0
        running = list(ranks)
        while running:
            failed = None
            for p in list(running):
                rc = p.poll()
                if rc is not None:
                    running.remove(p)
                    if rc != 0 and failed is None:
                        failed = "rank %d exited with status %d" % (ranks.index(p), rc)
            for f in feeders:
                rc = f.poll()
                if rc not in (None, 0) and failed is None:
                    failed = "the feeder %s exited with status %d" % (f.args[f.args.index("--listen") + 1], rc)
            if failed:
                status = 1
                if running:  # the other rank would wait for it for ever
                    log("torch_fmnist: %s: stopping" % failed)
                    stop_all(running)
                    running = []
            time.sleep(0.1)
        log("torch_fmnist: %s in %.1f s" % ("done" if status == 0 else "FAILED", time.monotonic() - t_start))
        return status
    finally:
        stop_all(procs)
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv):
    a = parse_args(argv)
    if a.rank is not None:
        # a training process: the launcher handles SIGINT; SIGTERM ends it
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if importlib.util.find_spec("sluice") is None:
            sys.path.insert(0, os.path.join(a.build, "python"))
        import sluice
        try:
            return train_rank(a)
        except sluice.Error as e:
            print("torch_fmnist: rank %d: %s" % (a.rank, e), file=sys.stderr, flush=True)
            return 1
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    try:
        return launch(a)
    except Stop as e:
        print("torch_fmnist: %s: stopped (every child process ended)" % signal.Signals(e.signum).name,
              file=sys.stderr, flush=True)
        return 128 + e.signum


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
