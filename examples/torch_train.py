#!/usr/bin/python3
"""Your training script, fed by sluice, as the cluster recipes run it
(deploy/slurm/sluice-torchrun.sbatch, deploy/kubernetes/torchrun/,
docs/deploy.md "Your own training script"). Copy it and replace the model
and the loop; keep how it finds its data.

    torchrun --nnodes=N --nproc-per-node=G ... examples/torch_train.py \\
        --feeders tcp://feeder0:5555,tcp://feeder1:5556 --job fmnist-train

Every process torchrun starts is one trainer worker of the job: worker
RANK of WORLD_SIZE, one replica (so the feeders serve the shape
--workers WORLD_SIZE --replicas 1). Each reads its own share of every step
from all the feeders (sluice.torch.IterableDataset); the feeders shard,
shuffle and batch, so the DataLoader only passes steps on
(batch_size=None). The model is a small MLP on one input feature (--input,
flattened, scaled to [0, 1] when it is uint8) predicting --label, trained
with DistributedDataParallel (NCCL on the process's GPU, LOCAL_RANK, when
there is one, else gloo on CPU). Run without torchrun it is worker 0 of 1.

Settings also come from the environment, so a recipe sets them once for
every process: SLUICE_FEEDER_ENDPOINTS (comma-separated endpoints, feeder j at
place j), SLUICE_JOB_NAME, SLUICE_CURVE_KEY and SLUICE_CURVE_SERVER_KEY
(the workers' secret key and the feeders' public key, docs/security.md).

--summary FILE writes this worker's figures as JSON (steps, samples, the
final loss, and per epoch the sorted element ids when the job has an "id"
feature); {rank} in FILE is replaced by the rank. Exit status: 0; 1 when
training fails (the error says why); 2 for usage errors; 77 when torch or
sluice cannot be imported.
"""
import argparse
import itertools
import json
import os
import sys


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="torch_train.py",
        description="Train a small model on a sluice job's stream, one trainer worker per torchrun process.")
    ap.add_argument("--feeders", default=os.environ.get("SLUICE_FEEDER_ENDPOINTS"),
                    help="the feeders' endpoints, comma-separated, feeder j at place j (default: $SLUICE_FEEDER_ENDPOINTS)")
    ap.add_argument("--job", default=os.environ.get("SLUICE_JOB_NAME"),
                    help="the job's name, as in its job file (default: $SLUICE_JOB_NAME)")
    ap.add_argument("--input", default="image", help="the input feature (default image)")
    ap.add_argument("--label", default="label", help="the label feature, int64 class ids (default label)")
    ap.add_argument("--classes", type=int, default=10, help="number of classes (default 10)")
    ap.add_argument("--hidden", type=int, default=128, help="hidden units of the MLP (default 128)")
    ap.add_argument("--lr", type=float, default=0.05, help="SGD learning rate (default 0.05)")
    ap.add_argument("--epochs", type=int, default=0,
                    help="epochs to train, at most the job's (default 0: all of the job's)")
    ap.add_argument("--curve-key", default=os.environ.get("SLUICE_CURVE_KEY"),
                    help="this worker's CURVE secret key file (default: $SLUICE_CURVE_KEY)")
    ap.add_argument("--curve-server-key", default=os.environ.get("SLUICE_CURVE_SERVER_KEY"),
                    help="the feeders' CURVE public key file (default: $SLUICE_CURVE_SERVER_KEY)")
    ap.add_argument("--metrics-listen", metavar="HOST:PORT",
                    help="serve this worker's input metrics at http://HOST:PORT+LOCAL_RANK/metrics "
                         "(docs/operations.md, \"From a training script\")")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per process (default 1)")
    ap.add_argument("--seed", type=int, default=0, help="model initialisation seed (default 0)")
    ap.add_argument("--summary", metavar="FILE", help="write this worker's figures as JSON ({rank}: the rank)")
    a = ap.parse_args(argv)
    if not a.feeders:
        ap.error("no feeders: give --feeders or set SLUICE_FEEDER_ENDPOINTS")
    if not a.job:
        ap.error("no job: give --job or set SLUICE_JOB_NAME")
    if (a.curve_key is None) != (a.curve_server_key is None):
        ap.error("--curve-key and --curve-server-key go together")
    if a.classes < 2 or a.hidden < 1 or a.epochs < 0 or a.threads < 1:
        ap.error("--classes >= 2, --hidden >= 1, --epochs >= 0 and --threads >= 1")
    if a.metrics_listen is not None:
        host, _, port = a.metrics_listen.rpartition(":")
        if not host or not port.isdigit() or int(port) > 65535:
            ap.error("--metrics-listen %r: HOST:PORT" % a.metrics_listen)
    return a


def main(argv):
    a = parse_args(argv)
    try:
        import torch
        import torch.distributed as dist
        import sluice.torch
    except ImportError as e:
        print("torch_train.py: %s (needs torch and the sluice package)" % e, file=sys.stderr)
        return 77

    # torchrun's variables; without torchrun, worker 0 of 1
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.set_num_threads(a.threads)
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    if world > 1:
        dist.init_process_group("nccl" if cuda else "gloo")

    feeders = [f.strip() for f in a.feeders.split(",") if f.strip()]
    options = {"worker": rank, "workers": world, "replicas": 1}
    if a.curve_key is not None:
        options["curve_key"] = a.curve_key
        options["curve_server_keys"] = [a.curve_server_key] * len(feeders)
    if a.metrics_listen is not None:
        host, _, port = a.metrics_listen.rpartition(":")
        options["metrics_listen"] = "%s:%d" % (host, int(port) + local_rank)
    data = sluice.torch.IterableDataset(feeders, a.job, pin_memory=cuda, **options)
    loader = torch.utils.data.DataLoader(data, batch_size=None)

    def inputs(batch):
        x = batch[a.input].to(device, non_blocking=True)
        x = x.reshape(x.shape[0], -1)
        return x.float() / 255.0 if x.dtype == torch.uint8 else x.float()

    model = opt = None
    steps = samples = 0
    loss_value = None
    ids_by_epoch = []
    epoch = 0
    while a.epochs == 0 or epoch < a.epochs:
        try:
            it = iter(loader)
            first = next(it, None)
        except TypeError as e:
            if "metrics_listen" in str(e):
                print("torch_train.py: --metrics-listen: this sluice's client does not serve /metrics", file=sys.stderr)
                return 2
            raise
        if first is None:  # the job's last epoch is behind us
            break
        if model is None:  # the input's width is known from the first step
            torch.manual_seed(a.seed)
            model = torch.nn.Sequential(torch.nn.Linear(inputs(first).shape[1], a.hidden), torch.nn.ReLU(),
                                        torch.nn.Linear(a.hidden, a.classes)).to(device)
            if world > 1:
                model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank] if cuda else None)
            opt = torch.optim.SGD(model.parameters(), lr=a.lr)
        ids = []
        for batch in itertools.chain([first], it):
            x, y = inputs(batch), batch[a.label].to(device, non_blocking=True).long().reshape(-1)
            # a worker's share of the last step may be empty: the sum is then
            # 0, and every worker still takes part in the all-reduce
            loss = torch.nn.functional.cross_entropy(model(x), y, reduction="sum") / max(1, y.shape[0])
            opt.zero_grad()
            loss.backward()
            opt.step()
            steps += 1
            samples += int(y.shape[0])
            loss_value = float(loss.detach())
            if "id" in batch:
                ids.extend(int(i) for i in batch["id"].reshape(-1).tolist())
        ids_by_epoch.append(sorted(ids))
        print("rank %d: epoch %d done: %d steps, %d samples so far, loss %.4f"
              % (rank, data.epoch if data.epoch is not None else epoch, steps, samples, loss_value), file=sys.stderr, flush=True)
        epoch += 1
    data.close()
    if a.summary:
        summary = {"rank": rank, "world": world, "epochs": epoch, "steps": steps, "samples": samples,
                   "loss": loss_value, "device": str(device), "sluice": sluice.__file__}
        if any(ids_by_epoch):
            summary["ids"] = ids_by_epoch
        with open(a.summary.replace("{rank}", str(rank)), "w") as f:
            json.dump(summary, f)
    if world > 1:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
