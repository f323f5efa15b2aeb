#!/usr/bin/python3
"""A PyTorch training script fed by sluice, to copy and make your own: a
small CNN on Fashion-MNIST under DistributedDataParallel, one sluice
trainer worker per process, with checkpoints that resume exactly and the
input metrics served for the dashboard.

    python3 examples/torch_fmnist.py                     # one process, its own feeder
    python3 -m torch.distributed.run --nproc_per_node 2 --redirects 2 --tee 2 \\
        --log_dir /tmp/torchrun examples/torch_fmnist.py --ckpt /tmp/fmnist.pt
    ... examples/torch_fmnist.py --resume /tmp/fmnist.pt --ckpt /tmp/fmnist.pt
    ... examples/torch_fmnist.py --feeders tcp://feeder0:5555,tcp://feeder1:5555

Each process is worker RANK of WORLD_SIZE (torchrun's variables; without
torchrun, worker 0 of 1), gloo on CPU (NCCL on GPU LOCAL_RANK when CUDA
is there). Without --feeders (or $SLUICE_FEEDER_ENDPOINTS), the dev mode:
rank 0 starts a feeder of examples/fmnist-train.json through
sluice.Feeder (--data's shards, --epochs, --batch) and tells the other
ranks its address; it stops when the script ends. With --feeders, running
feeders serve the job (their job file decides batch, order and epochs).
The shards are made from Debian's dataset-fashion-mnist when missing.

--ckpt PATH saves the model, the optimizer and every rank's data position
(IterableDataset.state_dict()) every --ckpt-every steps and at the end,
atomically (a temporary file, then a rename); --resume PATH restores all
three and continues at the step after the checkpoint: the same elements in
the same order, the same weights, as a run never stopped. Each process
serves its input metrics at --metrics-listen (the port + LOCAL_RANK; port
0: a free one, logged). Rank 0 reports the test accuracy at the end (in
dev mode; with --feeders when --test-feeders is given).

Exit status: 0; 1 when training fails or the accuracy is below
--min-accuracy; 2 for usage errors; 77 when torch cannot be imported.
(ctest python_torch_example, python_torch_fmnist_resume; docs/python.md.)
"""
import argparse
import glob
import json
import math
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FMNIST = "/usr/share/datasets/fashion-mnist"


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="torch_fmnist.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--feeders", default=os.environ.get("SLUICE_FEEDER_ENDPOINTS"), metavar="ENDPOINTS",
                    help="running feeders of fmnist-train, comma-separated (default $SLUICE_FEEDER_ENDPOINTS; "
                         "none: start one)")
    ap.add_argument("--job", default=os.environ.get("SLUICE_JOB_NAME", "fmnist-train"),
                    help="with --feeders: the job's name (default $SLUICE_JOB_NAME, else fmnist-train)")
    ap.add_argument("--test-feeders", metavar="ENDPOINTS", help="running feeders of fmnist-test (with --feeders)")
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "fmnist"),
                    help="dev mode: the shards, made here when missing (default data/fmnist)")
    ap.add_argument("--shards", type=int, default=0, help="dev mode: train on the first N shards (default all 8)")
    ap.add_argument("--epochs", type=int, default=8, help="dev mode: the job's epochs (default 8)")
    ap.add_argument("--batch", type=int, default=256, help="dev mode: the global batch size (default 256)")
    ap.add_argument("--lr", type=float, default=3e-3, help="peak learning rate of Adam (default 0.003)")
    ap.add_argument("--ckpt", metavar="PATH", help="save checkpoints here")
    ap.add_argument("--ckpt-every", type=int, default=100, metavar="N", help="steps between checkpoints (default 100)")
    ap.add_argument("--resume", metavar="PATH", help="continue from this checkpoint")
    ap.add_argument("--metrics-listen", default="127.0.0.1:0", metavar="HOST:PORT",
                    help="serve /metrics at HOST:PORT+LOCAL_RANK (port 0: a free one) (default 127.0.0.1:0)")
    ap.add_argument("--min-accuracy", type=float, default=0.0, help="exit 1 below this test accuracy (default 0)")
    ap.add_argument("--no-eval", action="store_true", help="skip the test set")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per process (default 1)")
    ap.add_argument("--seed", type=int, default=0, help="model initialisation seed (default 0)")
    ap.add_argument("--summary", metavar="FILE",
                    help="write this process's steps (epoch, step, ids) and accuracy as JSON ({rank}: the rank)")
    ap.add_argument("--die-at-step", type=int, default=0, help=argparse.SUPPRESS)  # the tests: SIGKILL itself there
    a = ap.parse_args(argv)
    if a.resume and not os.path.isfile(a.resume):
        ap.error("--resume %s: no such file" % a.resume)
    host, _, port = a.metrics_listen.rpartition(":")
    if not host or not port.isdigit() or int(port) > 65535:
        ap.error("--metrics-listen %r: HOST:PORT" % a.metrics_listen)
    if min(a.epochs, a.batch, a.ckpt_every, a.threads) < 1 or a.shards < 0 or not a.lr > 0:
        ap.error("--epochs, --batch, --ckpt-every, --threads >= 1, --shards >= 0, --lr > 0")
    return a


def make_model(nn):
    """Two conv blocks and a classifier written as convolutions (CPU: oneDNN)."""
    return nn.Sequential(
        nn.Unflatten(1, (1, 28, 28)),
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),   # 16 x 14 x 14
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),  # 32 x 7 x 7
        nn.Conv2d(32, 128, 7), nn.ReLU(),                             # 128 x 1 x 1
        nn.Conv2d(128, 10, 1), nn.Flatten())                          # 10 logits


def scaled(image):
    """uint8 pixels -> normalized floats (Fashion-MNIST's mean and deviation)."""
    return image.float().mul(1 / 255.0).sub(0.286).div(0.353)


def lr_at(progress, peak, warmup=0.1):
    """One cycle: linear warm-up, then a cosine decay to peak/100 (progress in [0, 1])."""
    if progress < warmup:
        return peak * (0.1 + 0.9 * progress / warmup)
    t = min(1.0, (progress - warmup) / (1 - warmup))
    return peak * (0.01 + 0.99 * 0.5 * (1 + math.cos(math.pi * t)))


def ensure_shards(data):
    """Fashion-MNIST as TFRecord shards in data (8 train, 2 gzip'd test), from Debian's IDX files."""
    if glob.glob(os.path.join(data, "train-*.tfrecord")) and glob.glob(os.path.join(data, "test-*.tfrecord.gz")):
        return
    builds = [os.environ.get("SLUICE_BUILD", ""), os.path.join(ROOT, "build")]
    rec = next((r for r in (os.path.join(b, "tools", "sluice-record") for b in builds if b)
                if os.access(r, os.X_OK)), "sluice-record")
    print("making the Fashion-MNIST shards in %s from %s" % (data, FMNIST), flush=True)
    for part, idx, shards, more in (("train", "train", "8", ["--index"]), ("test", "t10k", "2", ["--compression", "gzip"])):
        subprocess.run([rec, "convert", "idx", "--images", "%s/%s-images-idx3-ubyte.gz" % (FMNIST, idx),
                        "--labels", "%s/%s-labels-idx1-ubyte.gz" % (FMNIST, idx), "--output-dir", data,
                        "--prefix", part, "--shards", shards] + more, check=True, stdout=subprocess.DEVNULL)


def dev_feeder(a, name, workers):
    """A sluice.Feeder of examples/NAME.json over --data's shards (the dev mode)."""
    import sluice
    job = json.load(open(os.path.join(HERE, name + ".json")))
    if name == "fmnist-train":
        files = sorted(glob.glob(os.path.join(a.data, "train-*.tfrecord")))
        job.update(files=files[:a.shards or None], epochs=a.epochs, global_batch_size=a.batch)
    else:
        job["files"] = sorted(glob.glob(os.path.join(a.data, "test-*.tfrecord.gz")))
    # idle_exit: it ends by itself if this process dies without stopping it (SIGKILL)
    return sluice.Feeder(job, workers=workers, replicas=1, threads=2, idle_exit=60)


def main(argv):
    a = parse_args(argv)
    try:
        import torch
        import torch.distributed as dist
        import torch.nn.functional as F
    except ImportError as e:
        print("torch_fmnist.py: %s (Debian: apt-get install python3-torch)" % e, file=sys.stderr)
        return 77
    try:
        import sluice.torch
    except ImportError:  # a build tree's package
        sys.path.insert(0, os.path.join(ROOT, "build", "python"))
        import sluice.torch

    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.set_num_threads(a.threads)
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if world > 1:
        dist.init_process_group("nccl" if cuda else "gloo")

    def all_reduce(t):  # a sum over the ranks (nothing to do alone)
        if world > 1:
            dist.all_reduce(t)
        return t

    def gather(obj):  # every rank's obj, in rank order
        if world == 1:
            return [obj]
        out = [None] * world
        dist.all_gather_object(out, obj)
        return out

    # the data: running feeders, or the dev mode's own, started by rank 0
    feeder = None
    feeders = a.feeders.split(",") if a.feeders else None
    if feeders is None:
        if rank == 0:
            ensure_shards(a.data)
            feeder = dev_feeder(a, "fmnist-train", world)
        feeders = gather(feeder.address if feeder else None)[0].split(",")
    host, _, port = a.metrics_listen.rpartition(":")
    metrics = "%s:%d" % (host, int(port) + local_rank if int(port) else 0)
    job = a.job if a.feeders else "fmnist-train"  # the dev mode serves examples/fmnist-train.json
    ds = sluice.torch.IterableDataset(feeders, job, worker=rank, workers=world, metrics_listen=metrics)
    loader = torch.utils.data.DataLoader(ds, batch_size=None)

    torch.manual_seed(a.seed)
    model = make_model(torch.nn).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    step, first_epoch = 0, 0
    if a.resume:
        ck = torch.load(a.resume, map_location=device)
        if len(ck["data"]) != world:
            sys.exit("torch_fmnist.py: %s was saved by %d processes, not %d" % (a.resume, len(ck["data"]), world))
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        ds.load_state_dict(ck["data"][rank])
        step, d = ck["step"], ck["data"][rank]
        first_epoch = d["position"] // d["replicas"] // d["steps_per_epoch"]  # the next step's epoch
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank] if cuda else None) \
        if world > 1 else model
    total = len(ds) * ds.epochs  # connects: the feeders announce the plan
    if rank == 0:
        print("torch_fmnist: %d process%s, %d steps per epoch, %d epochs, from step %d; metrics at %s"
              % (world, "" if world == 1 else "es", len(ds), ds.epochs, step, ds.metrics_url), flush=True)

    def checkpoint():
        if not a.ckpt:
            return
        states = gather(ds.state_dict())
        if rank == 0:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "data": states, "step": step},
                       a.ckpt + ".tmp")
            os.replace(a.ckpt + ".tmp", a.ckpt)

    seen = []
    for epoch in range(first_epoch, ds.epochs):
        t0, loss_sum, rows = time.monotonic(), 0.0, 0
        for batch in loader:
            x, y = batch["image"].to(device), batch["label"].to(device)
            # the loss is the mean over the global batch (DDP averages over the ranks: hence x world);
            # a worker's share of a step may be empty
            n = all_reduce(torch.tensor([float(y.shape[0])], device=device))
            for g in opt.param_groups:
                g["lr"] = lr_at(step / total, a.lr)
            loss = F.cross_entropy(ddp(scaled(x)), y, reduction="sum")
            opt.zero_grad(set_to_none=True)
            (loss * (world / max(n.item(), 1.0))).backward()
            opt.step()
            step += 1
            loss_sum, rows = loss_sum + loss.item(), rows + y.shape[0]
            if a.summary:
                seen.append((epoch, step, batch["id"].tolist()))
            if step % a.ckpt_every == 0:
                checkpoint()
            if step == a.die_at_step:
                os.kill(os.getpid(), signal.SIGKILL)
        stats = all_reduce(torch.tensor([loss_sum, float(rows)], dtype=torch.float64, device=device))
        if rank == 0:
            print("epoch %d/%d: loss %.4f, %d images in %.1f s" % (epoch + 1, ds.epochs, stats[0] / max(stats[1], 1),
                                                                  stats[1], time.monotonic() - t0), flush=True)
    checkpoint()
    ds.close()

    accuracy = None
    if rank == 0 and not a.no_eval and (feeder is not None or a.test_feeders):
        accuracy = evaluate(a, model, device, sluice, torch)
    if a.summary:
        with open(a.summary.replace("{rank}", str(rank)), "w") as f:
            json.dump({"rank": rank, "world": world, "steps": seen, "accuracy": accuracy}, f)
    if world > 1:
        dist.barrier()  # the dev mode's feeder serves until every rank is done
        dist.destroy_process_group()
    if feeder is not None:
        feeder.close()
    return 1 if accuracy is not None and accuracy < a.min_accuracy else 0


def evaluate(a, model, device, sluice, torch):
    """The test set's accuracy (rank 0, one worker of its own job)."""
    test = dev_feeder(a, "fmnist-test", 1) if not a.test_feeders else None
    ds = sluice.torch.IterableDataset(a.test_feeders.split(",") if test is None else [test.address], "fmnist-test")
    correct = total = 0
    model.eval()
    with torch.no_grad():
        for batch in ds:
            x, y = batch["image"].to(device), batch["label"].to(device)
            correct += int((model(scaled(x)).argmax(1) == y).sum())
            total += y.shape[0]
    ds.close()
    if test is not None:
        test.close()
    print("test accuracy %.4f (%d images)" % (correct / max(total, 1), total), flush=True)
    return correct / max(total, 1)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
