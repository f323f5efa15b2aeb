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
from the first batch on; every file is read once first so the page cache
holds the set, as the issue measures.

The sluice contender (a feeder decoding and augmenting the set's
`sluice-record convert images` shards, delivered by sluice.torch) is not
here yet: see CONTENDERS below.

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


# ---- contenders ----
# (name, function(args, files) -> result dict with "images", "seconds",
# "images_per_s"). Each runs alone, in this order, in the same process.
#
# THE SLUICE CONTENDER GOES HERE, once the feeder's map stage runs the image
# ops (issue #27 section 1): serve the set's shards (`sluice-record convert
# images DATA --output-dir SHARDS`) with a job whose map is decode_image,
# random_resized_crop [224, 224], random_flip, normalize (float32, CHW), and
# time sluice.torch delivering the same number of float32 [64, 3, 224, 224]
# batches, with the feeder on the same cores. It is not measured yet: no
# figure for it is printed, and none may be written by hand.
def contenders(workers):
    out = [("pil_decode", pil_decode)]
    out += [("torchvision_w%d" % w, torchvision_loader(w)) for w in workers]
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
    ap.add_argument("--only", help="run only these contenders, comma-separated (pil_decode, torchvision_wN)")
    ap.add_argument("--seed", type=int, default=0, help="torch's seed (the shuffle and the crops)")
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
    if any(c.startswith("torchvision") for c, _ in chosen):
        try:
            import torchvision  # noqa: F401
        except ImportError:
            sys.exit("bench_images.py: needs torchvision: apt-get install python3-torchvision, and run it with "
                     "/usr/bin/python3 (or --only pil_decode)")
    nbytes = warm(files)
    report = {"data": os.path.abspath(a.data), "images": len(files), "bytes": nbytes, "batch": a.batch,
              "machine": machine(), "results": {}}
    print("bench_images: %d images, %.1f MB, %s x%d" % (len(files), nbytes / 1e6, report["machine"]["cpu"],
                                                         report["machine"]["cpus"]), flush=True)
    for name, fn in chosen:
        r = fn(a, files)
        report["results"][name] = r
        extra = ""
        if r.get("steady_images_per_s"):
            extra = "  (from the first batch on: %.1f images/s; first batch after %.2f s)" % (
                r["steady_images_per_s"], r["first_batch_s"])
        print("%-16s %9.1f images/s  %6d images in %7.2f s%s" % (name, r["images_per_s"], r["images"], r["seconds"],
                                                                 extra), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
