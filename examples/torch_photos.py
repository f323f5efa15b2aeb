#!/usr/bin/python3
"""A small CNN trained on photographs that the feeder decodes and
augments (issue #27): the ImageFolder tree of tools/make_photos.py (one
class per source photograph), split into train (4 in 5 images) and test
(every 5th), each converted with `sluice-record convert images`, served by
its own sluice-feeder:

  train: decode_image -> random_resized_crop SIZE -> random_flip ->
         normalize (float32, CHW), shuffled, a new crop each epoch
  test:  decode_image -> resize SIZE -> normalize

and read through sluice.torch as float32 batches ready for the model. The
feeders do all the image work; this process only trains. Prints each
epoch's loss, training accuracy and images/s, then the test accuracy.

    /usr/bin/python3 tools/make_photos.py photos3k --count 3000
    /usr/bin/python3 examples/torch_photos.py --data photos3k [--epochs 2] [--size 64]

Needs the Debian interpreter's torch (/usr/bin/python3) and a sluice build
(--build, default the repository's build: feeder/sluice-feeder,
tools/sluice-record, python/sluice). Exit status 0; 1 when the test
accuracy is below --min-accuracy (default 0.5; 14 classes: chance is
0.07) or a feeder fails; 2 for usage errors. Not run in CI.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def split_tree(src, dst):
    """dst/train/CLASS and dst/test/CLASS of links to src's images: every
    5th image of a class (in sorted order) to test."""
    classes = sorted(d for d in os.listdir(src) if not d.startswith(".") and os.path.isdir(os.path.join(src, d)))
    for cls in classes:
        names = sorted(n for n in os.listdir(os.path.join(src, cls)) if n.lower().endswith((".jpg", ".jpeg", ".png")))
        for i, n in enumerate(names):
            part = "test" if i % 5 == 4 else "train"
            os.makedirs(os.path.join(dst, part, cls), exist_ok=True)
            os.symlink(os.path.abspath(os.path.join(src, cls, n)), os.path.join(dst, part, cls, n))
    return classes


def start_feeder(build, tmp, part, size, batch, epochs, threads):
    """Convert tmp/PART to shards, write its job, start its feeder: (proc, endpoint, job name)."""
    shards = os.path.join(tmp, part + "-shards")
    subprocess.run([os.path.join(build, "tools", "sluice-record"), "convert", "images", "--output-dir", shards,
                    "--shards", "2", os.path.join(tmp, part)], check=True, capture_output=True)
    if part == "train":
        ops = [{"op": "random_resized_crop", "feature": "image", "size": [size, size]},
               {"op": "random_flip", "feature": "image"}]
    else:
        ops = [{"op": "resize", "feature": "image", "size": [size, size]}]
    job = {"name": "photos-" + part, "format": "tfrecord", "global_batch_size": batch, "epochs": epochs,
           "files": sorted(os.path.join(shards, n) for n in os.listdir(shards) if n.endswith(".tfrecord")),
           "features": {"image": {"dtype": "bytes", "shape": []}, "label": {"dtype": "int64", "shape": []}},
           "map": [{"op": "decode_image", "feature": "image", "channels": 3}] + ops +
                  [{"op": "normalize", "feature": "image", "mean": MEAN, "std": STD, "layout": "CHW"}]}
    if part == "train":
        job["shuffle"] = {"buffer": 4096, "seed": 27}
    path = os.path.join(tmp, part + ".json")
    with open(path, "w") as f:
        json.dump(job, f)
    ep = "ipc://" + os.path.join(tmp, part + ".sock")
    log = os.path.join(tmp, part + ".log")
    with open(log, "w") as lf:
        proc = subprocess.Popen([os.path.join(build, "feeder", "sluice-feeder"), "--job", path, "--listen", ep,
                                 "--threads", str(threads)], stdout=lf, stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    while "serving job" not in open(log).read():
        if proc.poll() is not None or time.time() > deadline:
            sys.exit("torch_photos.py: the %s feeder did not start:\n%s" % (part, open(log).read()[-2000:]))
        time.sleep(0.05)
    return proc, ep, job["name"]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description="A small CNN on photographs decoded and augmented by sluice feeders.")
    ap.add_argument("--data", required=True, help="the ImageFolder tree (tools/make_photos.py OUT)")
    ap.add_argument("--build", default=os.path.join(here, "..", "build"), help="the sluice build folder")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--size", type=int, default=64, help="the crop's side in pixels (default 64)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--threads", type=int, default=1, help="each feeder's --threads (default 1)")
    ap.add_argument("--min-accuracy", type=float, default=0.5)
    a = ap.parse_args()
    if not (1 <= a.epochs <= 1000 and 8 <= a.size <= 512 and 1 <= a.batch <= 4096 and 1 <= a.threads <= 64):
        ap.error("--epochs 1-1000, --size 8-512, --batch 1-4096, --threads 1-64")
    if not os.path.isdir(a.data):
        ap.error("--data %s: not a folder" % a.data)
    build = os.path.abspath(a.build)
    sys.path.insert(0, os.path.join(build, "python"))
    import torch
    import torch.nn as nn
    import torch.utils.data
    import sluice.torch
    torch.manual_seed(27)
    torch.set_num_threads(1)

    tmp = tempfile.mkdtemp(prefix="torch-photos-")
    procs = []
    try:
        classes = split_tree(a.data, tmp)
        train_p, train_ep, train_job = start_feeder(build, tmp, "train", a.size, a.batch, a.epochs, a.threads)
        procs.append(train_p)
        test_p, test_ep, test_job = start_feeder(build, tmp, "test", a.size, 256, 1, a.threads)
        procs.append(test_p)
        model = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, len(classes)))
        opt = torch.optim.Adam(model.parameters(), lr=a.lr)
        loss_fn = nn.CrossEntropyLoss()
        train = sluice.torch.IterableDataset(feeders=[train_ep], job=train_job)
        loader = torch.utils.data.DataLoader(train, batch_size=None)
        for epoch in range(a.epochs):
            model.train()
            t0, n, right, total_loss = time.perf_counter(), 0, 0, 0.0
            for batch in loader:
                x, y = batch["image"], batch["label"].reshape(-1)
                opt.zero_grad()
                out = model(x)
                loss = loss_fn(out, y)
                loss.backward()
                opt.step()
                n += len(y)
                right += int((out.argmax(1) == y).sum())
                total_loss += float(loss) * len(y)
            print("epoch %d: loss %.3f, training accuracy %.3f, %d images, %.0f images/s" % (
                epoch, total_loss / max(n, 1), right / max(n, 1), n, n / (time.perf_counter() - t0)), flush=True)
        train.close()
        model.eval()
        test = sluice.torch.IterableDataset(feeders=[test_ep], job=test_job)
        n = right = 0
        with torch.no_grad():
            for batch in torch.utils.data.DataLoader(test, batch_size=None):
                y = batch["label"].reshape(-1)
                right += int((model(batch["image"]).argmax(1) == y).sum())
                n += len(y)
        test.close()
        acc = right / max(n, 1)
        print("test accuracy %.3f on %d images of %d classes (chance %.3f)" % (acc, n, len(classes), 1 / len(classes)))
        for p in procs:
            if p.wait(timeout=30) != 0:
                sys.exit("torch_photos.py: a feeder exited %d (logs in %s)" % (p.returncode, tmp))
        procs = []
        return 0 if acc >= a.min_accuracy else 1
    finally:
        for p in procs:
            p.kill()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
