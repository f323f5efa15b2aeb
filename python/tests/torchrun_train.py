"""A deterministic CPU training process for torchrun_resume.py, run by
`python3 -m torch.distributed.run --nproc_per_node N` (gloo): each rank
reads its worker's stream through sluice.torch.IterableDataset and trains
a small MLP under DistributedDataParallel. Every step appends "epoch step
ids..." to OUT/ids-TAG-rankR.txt. With --ckpt-at K, after step K rank 0
saves OUT/ckpt.pt (the model, the optimizer, every rank's data state_dict,
the step) and each rank writes OUT/ckpt-done-R, then goes on slowly (to be
killed mid-epoch); --resume continues from OUT/ckpt.pt. At the end rank 0
saves the weights to OUT/final-TAG.pt.

Usage: torchrun_train.py FEEDERS(comma-separated) JOB OUT TAG EPOCHS [--ckpt-at K] [--resume]
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

import sluice.torch


def main():
    ap = argparse.ArgumentParser()
    for name in ("feeders", "job", "out", "tag"):
        ap.add_argument(name)
    ap.add_argument("epochs", type=int)
    ap.add_argument("--ckpt-at", type=int, default=0)
    ap.add_argument("--resume", action="store_true")
    a = ap.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(7)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
    ddp = DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    ds = sluice.torch.IterableDataset(a.feeders.split(","), a.job, worker=rank, workers=world, heartbeat_ms=200)
    loader = torch.utils.data.DataLoader(ds, batch_size=None)

    step, first_epoch = 0, 0
    ckpt = os.path.join(a.out, "ckpt.pt")
    if a.resume:
        saved = torch.load(ckpt)
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["opt"])
        ds.load_state_dict(saved["data"][rank])  # this rank's position
        step = saved["step"]
        d = saved["data"][rank]
        first_epoch = d["position"] // d["replicas"] // d["steps_per_epoch"]  # the epoch of the next step

    log = open(os.path.join(a.out, "ids-%s-rank%d.txt" % (a.tag, rank)), "a")
    for epoch in range(first_epoch, a.epochs):
        for batch in loader:
            x = batch["image"].float() / 255.0
            loss = F.cross_entropy(ddp(x), batch["label"])
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            log.write("%d %d %s\n" % (epoch, step, " ".join(str(i) for i in batch["id"].tolist())))
            log.flush()
            if step == a.ckpt_at:
                states = [None] * world
                dist.all_gather_object(states, ds.state_dict())
                if rank == 0:
                    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "data": states, "step": step},
                               ckpt + ".tmp")
                    os.replace(ckpt + ".tmp", ckpt)
                dist.barrier()
                open(os.path.join(a.out, "ckpt-done-%d" % rank), "w").close()
            elif a.ckpt_at and step > a.ckpt_at:
                time.sleep(0.2)  # the test kills this run now, mid-epoch
    if rank == 0:
        torch.save(model.state_dict(), os.path.join(a.out, "final-%s.pt" % a.tag))
    ds.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
