#!/usr/bin/python3
"""The image pipeline benchmark of issue #27 section 3: the peer side.

Measures, on an ImageFolder tree (tools/make_photos.py's photo set), one
after another in the same run:
  pil_decode      PIL decoding every file to RGB, one thread, the files'
                  bytes already in memory (Image.open + convert("RGB")):
                  what a Python loader pays for decoding alone;
  torchvision_wN  torchvision's ImageFolder with RandomResizedCrop(224),
                  RandomHorizontalFlip, ToTensor, Normalize through a
                  torch DataLoader (batch 64, shuffled), num_workers N for
                  each N of --workers (default 0 and 2): the float32 batches
                  ready for a model, as a PyTorch user gets them.
Each rate is images per second over the whole pass (startup included) and
from the first batch on; with --repeat N every contender runs once a round,
in turn, N rounds, and each figure is its median round's (the machine is
shared: one round can be an outlier); every file is read once first so the page cache
holds the set, as the issue measures.

  sluice          a real sluice-feeder serving the set's shards
                  (`sluice-record convert images`, made first, not timed)
                  with the map decode_image, random_resized_crop 224,
                  random_flip, normalize (float32 CHW), read through
                  sluice.torch as the same float32 [64, 3, 224, 224]
                  batches (--threads: the feeder's executor threads);
  sluice_lend     the same with the client's lend=True: the batches are
                  read-only views of the feeder's shared memory, not
                  copied out.
The report ends with sluice over the peer's best (the goal of issue #27:
>= 10x).

Needs Debian's python3-torchvision (apt-get install python3-torchvision; it
brings python3-torch and python3-pil) and runs with /usr/bin/python3. Not in
CI. docs/images.md and docs/performance.md ("Images (issue #27)") give the
commands and the figures.
"""
import argparse
import json
import os
import platform
import sys
import time

try:
    from PIL import Image
except ImportError:
    sys.exit("bench_images.py: needs PIL: apt-get install python3-pil, and run it with /usr/bin/python3")


def image_files(root):
    """The tree's image files in ImageFolder's order (sorted classes, sorted files)."""
    out = []
    for cls in sorted(d for d in os.listdir(root) if not d.startswith(".") and os.path.isdir(os.path.join(root, d))):
        for dirpath, _, names in sorted(os.walk(os.path.join(root, cls), followlinks=True)):
            out += [os.path.join(dirpath, n) for n in sorted(names)
                    if n.lower().endswith((".jpg", ".jpeg", ".png"))]
    return out


def warm(files):
    """Read every file once (the page cache then holds the set); its bytes."""
    total = 0
    for f in files:
        with open(f, "rb") as fh:
            total += len(fh.read())
    return total


def pil_decode(args, files):
    blobs = []
    for f in files:
        with open(f, "rb") as fh:
            blobs.append(fh.read())
    import io
    t0 = time.perf_counter()
    pixels = 0
    for b in blobs:
        im = Image.open(io.BytesIO(b)).convert("RGB")
        pixels += im.size[0] * im.size[1]
    s = time.perf_counter() - t0
    return {"images": len(blobs), "seconds": s, "images_per_s": len(blobs) / s,
            "megapixels_per_s": pixels / s / 1e6}


def torchvision_loader(workers):
    def run(args, files):
        import torch
        from torchvision import datasets, transforms
        tf = transforms.Compose([
            transforms.RandomResizedCrop(224),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
        ])
        torch.manual_seed(args.seed)
        ds = datasets.ImageFolder(args.data, transform=tf)
        if len(ds) != len(files):
            sys.exit("bench_images.py: ImageFolder found %d images, the listing %d" % (len(ds), len(files)))
        dl = torch.utils.data.DataLoader(ds, batch_size=args.batch, shuffle=True, num_workers=workers,
                                         drop_last=False)
        t0 = time.perf_counter()
        t1, first, n = None, 0, 0
        for x, y in dl:
            assert x.dtype == torch.float32 and tuple(x.shape[1:]) == (3, 224, 224), (x.dtype, x.shape)
            n += x.shape[0]
            if t1 is None:
                t1, first = time.perf_counter(), n
        t2 = time.perf_counter()
        steady = (n - first) / (t2 - t1) if t2 > t1 and n > first else None
        return {"images": n, "seconds": t2 - t0, "images_per_s": n / (t2 - t0),
                "steady_images_per_s": steady, "first_batch_s": t1 - t0, "num_workers": workers,
                "torch_threads": torch.get_num_threads()}
    return run


SLUICE_MAP = [{"op": "decode_image", "feature": "image", "channels": 3},
              {"op": "random_resized_crop", "feature": "image", "size": [224, 224]},
              {"op": "random_flip", "feature": "image"},
              {"op": "normalize", "feature": "image", "mean": [0.485, 0.456, 0.406],
               "std": [0.229, 0.224, 0.225], "layout": "CHW"}]


def sluice_feeder(lend):
    return lambda args, files: sluice_run(args, files, lend)


def sluice_run(args, files, lend):
    """A real sluice-feeder serving the set's shards (`sluice-record convert
    images`, made first and not timed) with the training map, read by
    sluice.torch through a DataLoader(batch_size=None): float32
    [64, 3, 224, 224] batches, one epoch. The clock starts before the
    client connects (the feeder has only scanned its files by then). With
    lend, the client's lend=True: each batch a read-only view of the
    feeder's shared memory (no copy out; torch warns once that the tensor
    is not writable, which a model's input need not be)."""
    import shutil
    import subprocess
    import tempfile
    build = os.path.abspath(args.build)
    feeder = os.path.join(build, "feeder", "sluice-feeder")
    record = os.path.join(build, "tools", "sluice-record")
    for b in (feeder, record):
        if not os.access(b, os.X_OK):
            sys.exit("bench_images.py: %s is not built (--build BUILD, cmake --build BUILD)" % b)
    sys.path.insert(0, os.path.join(build, "python"))
    import torch
    import torch.utils.data
    import sluice.torch
    tmp = tempfile.mkdtemp(prefix="bench-images-")
    proc = None
    try:
        shards = os.path.join(tmp, "shards")
        t0 = time.perf_counter()
        subprocess.run([record, "convert", "images", "--output-dir", shards, "--shards", "4", args.data],
                       check=True, capture_output=True)
        convert_s = time.perf_counter() - t0
        names = sorted(n for n in os.listdir(shards) if n.endswith(".tfrecord"))
        job = os.path.join(tmp, "images.json")
        with open(job, "w") as f:
            json.dump({"name": "bench-images", "files": [os.path.join(shards, n) for n in names],
                       "format": "tfrecord", "global_batch_size": args.batch, "epochs": 1,
                       "shuffle": {"buffer": 1024, "seed": args.seed},
                       "features": {"image": {"dtype": "bytes", "shape": []},
                                    "label": {"dtype": "int64", "shape": []}},
                       "map": SLUICE_MAP}, f)
        sock = "ipc://" + os.path.join(tmp, "feeder.sock")
        log = os.path.join(tmp, "feeder.log")
        cmd = [feeder, "--job", job, "--listen", sock]
        if args.threads:
            cmd += ["--threads", str(args.threads)]
        with open(log, "w") as lf:
            proc = subprocess.Popen(cmd, stdout=lf, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while "serving job" not in open(log).read():
            if proc.poll() is not None or time.time() > deadline:
                sys.exit("bench_images.py: the feeder did not start:\n" + open(log).read()[-2000:])
            time.sleep(0.05)
        import warnings
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        ds = sluice.torch.IterableDataset(feeders=[sock], job="bench-images", **({"lend": True} if lend else {}))
        t0 = time.perf_counter()
        t1, first, n = None, 0, 0
        for batch in torch.utils.data.DataLoader(ds, batch_size=None):
            x = batch["image"]
            assert x.dtype == torch.float32 and tuple(x.shape[1:]) == (3, 224, 224), (x.dtype, x.shape)
            n += x.shape[0]
            if t1 is None:
                t1, first = time.perf_counter(), n
        t2 = time.perf_counter()
        ds.close()
        if n != len(files):
            sys.exit("bench_images.py: sluice delivered %d images, the set has %d" % (n, len(files)))
        rc = proc.wait(timeout=30)
        proc = None
        if rc != 0:
            sys.exit("bench_images.py: the feeder exited %d:\n%s" % (rc, open(log).read()[-2000:]))
        steady = (n - first) / (t2 - t1) if t2 > t1 and n > first else None
        return {"images": n, "seconds": t2 - t0, "images_per_s": n / (t2 - t0),
                "steady_images_per_s": steady, "first_batch_s": t1 - t0, "feeder_threads": args.threads,
                "convert_s": convert_s, "lend": lend, "map": SLUICE_MAP}
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


# ---- contenders ----
# (name, function(args, files) -> result dict with "images", "seconds",
# "images_per_s"). Each runs alone, in this order, in the same process.
# sluice: a feeder decoding and augmenting the set's shards with the map
# above (decode_image, random_resized_crop [224, 224], random_flip,
# normalize float32 CHW), sluice.torch delivering the same float32
# [64, 3, 224, 224] batches as the torchvision peer, the feeder on the
# same cores.
def contenders(workers):
    out = [("pil_decode", pil_decode)]
    out += [("torchvision_w%d" % w, torchvision_loader(w)) for w in workers]
    out += [("sluice", sluice_feeder(False)), ("sluice_lend", sluice_feeder(True))]
    return out


def machine():
    cpu = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info = {"cpu": cpu, "cpus": os.cpu_count(), "python": platform.python_version(), "pil": Image.__version__}
    try:
        import torch
        import torchvision
        info.update(torch=torch.__version__, torchvision=torchvision.__version__)
    except ImportError:
        pass
    return info


def main():
    ap = argparse.ArgumentParser(description="Peer figures for issue #27: PIL decoding and torchvision's "
                                 "ImageFolder + DataLoader on an ImageFolder tree (docs/images.md).")
    ap.add_argument("--data", required=True, help="the ImageFolder tree (tools/make_photos.py OUT)")
    ap.add_argument("--batch", type=int, default=64, help="DataLoader batch size (default 64)")
    ap.add_argument("--workers", default="0,2", help="DataLoader num_workers to measure, comma-separated "
                    "(default 0,2)")
    ap.add_argument("--only", help="run only these contenders, comma-separated (pil_decode, torchvision_wN, sluice, sluice_lend)")
    ap.add_argument("--repeat", type=int, default=1, help="rounds: every contender once a round, in turn; "
                    "each figure is the median round's (default 1)")
    ap.add_argument("--seed", type=int, default=0, help="torch's seed (the shuffle and the crops)")
    ap.add_argument("--build", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build"),
                    help="the build folder holding feeder/sluice-feeder, tools/sluice-record and python/ "
                    "(default: the repository's build)")
    ap.add_argument("--threads", type=int, default=0, help="sluice-feeder --threads (default: the feeder's "
                    "default, one per CPU)")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON to FILE")
    a = ap.parse_args()
    if not 1 <= a.batch <= 65536:
        ap.error("--batch must be between 1 and 65536")
    try:
        workers = [int(w) for w in a.workers.split(",")]
    except ValueError:
        ap.error("--workers: comma-separated integers (got %r)" % a.workers)
    if any(not 0 <= w <= 256 for w in workers):
        ap.error("--workers: each between 0 and 256")
    if not 1 <= a.repeat <= 64:
        ap.error("--repeat must be between 1 and 64")
    if not 0 <= a.threads <= 256:
        ap.error("--threads must be between 0 and 256")
    if not os.path.isdir(a.data):
        ap.error("--data %s: not a folder" % a.data)
    files = image_files(a.data)
    if not files:
        ap.error("--data %s: no DATA/CLASS/*.jpg|*.jpeg|*.png" % a.data)
    chosen = contenders(workers)
    if a.only:
        names = a.only.split(",")
        unknown = [n for n in names if n not in {c for c, _ in chosen}]
        if unknown:
            ap.error("--only: unknown %s (have %s)" % (", ".join(unknown), ", ".join(c for c, _ in chosen)))
        chosen = [c for c in chosen if c[0] in names]
    if any(c.startswith(("torchvision", "sluice")) for c, _ in chosen):
        try:
            import torchvision  # noqa: F401
        except ImportError:
            sys.exit("bench_images.py: needs torchvision: apt-get install python3-torchvision, and run it with "
                     "/usr/bin/python3 (or --only pil_decode)")
    nbytes = warm(files)
    load = os.getloadavg()[0]
    report = {"load_avg_before": load, "data": os.path.abspath(a.data), "images": len(files), "bytes": nbytes, "batch": a.batch,
              "machine": machine(), "results": {}}
    print("bench_images: %d images, %.1f MB, %s x%d, load %.2f" % (
        len(files), nbytes / 1e6, report["machine"]["cpu"], report["machine"]["cpus"], load), flush=True)
    rounds = {name: [] for name, _ in chosen}
    for rnd in range(a.repeat):
        if a.repeat > 1:
            print("round %d of %d (load %.2f)" % (rnd + 1, a.repeat, os.getloadavg()[0]), flush=True)
        for name, fn in chosen:
            r = fn(a, files)
            rounds[name].append(r)
            extra = ""
            if r.get("steady_images_per_s"):
                extra = "  (from the first batch on: %.1f images/s; first batch after %.2f s)" % (
                    r["steady_images_per_s"], r["first_batch_s"])
            print("%-16s %9.1f images/s  %6d images in %7.2f s%s" % (name, r["images_per_s"], r["images"],
                                                                     r["seconds"], extra), flush=True)
    # each contender's median round (by images/s); its rounds' rates beside it
    res = report["results"]
    for name, rs in rounds.items():
        rs_sorted = sorted(rs, key=lambda r: r["images_per_s"])
        res[name] = dict(rs_sorted[(len(rs) - 1) // 2], rounds=[r["images_per_s"] for r in rs])
    if a.repeat > 1:
        print("medians of %d rounds:" % a.repeat)
        for name, r in res.items():
            print("%-16s %9.1f images/s  (rounds: %s)" % (name, r["images_per_s"],
                                                          ", ".join("%.1f" % v for v in r["rounds"])))
    peers = [r["images_per_s"] for k, r in res.items() if k.startswith("torchvision")]
    for k in ("sluice", "sluice_lend"):
        if k in res and peers:
            report[k + "_over_best_peer"] = res[k]["images_per_s"] / max(peers)
            print("%s / the best torchvision DataLoader: %.2fx (goal >= 10x)" % (k, report[k + "_over_best_peer"]))
        if k in res and "pil_decode" in res:
            report[k + "_over_pil_decode"] = res[k]["images_per_s"] / res["pil_decode"]["images_per_s"]
            print("%s / PIL decoding alone on one thread: %.2fx" % (k, report[k + "_over_pil_decode"]))
    report["load_avg_after"] = os.getloadavg()[0]
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
