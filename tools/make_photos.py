#!/usr/bin/python3
"""Make the photo data set of issue #27: ImageNet-like JPEGs (and a few
PNGs) cut from the real photographs that Debian's python3-skimage ships,
written as an ImageFolder tree (OUT/CLASS/NNNNNNN.jpg), one class per source
photograph.

The package is never installed: `apt-get download python3-skimage` fetches
its .deb into a cache folder and `dpkg-deb -x` unpacks it there; only the
photographs under skimage/data are read. With no network, give the
photographs with --source DIR (an unpacked or installed
.../dist-packages/skimage/data) or put the .deb into the cache folder.

Image i is a pure function of (--seed, i, the source photographs): a crop of
10-100 % of its source's area with an aspect ratio of 3/4 to 4/3, resized so
its shorter side is 224-500 px, brightness 0.8-1.2, mirrored half the time;
about 5 % are saved grayscale and about 5 % as PNG, the rest as JPEG of
quality 75-95. The same seed and count give the same files, byte for byte,
with the same PIL / libjpeg. OUT/.photos.json records how the set was made.

Runs with Debian's /usr/bin/python3 and python3-pil. docs/images.md says how
the benchmark (tools/bench_images.py) and `sluice-record convert images` use
the set.
"""
import argparse
import glob
import hashlib
import io
import json
import multiprocessing
import os
import random
import shutil
import subprocess
import sys
import time

try:
    from PIL import Image, ImageEnhance
except ImportError:  # the pyenv python3 has no PIL; Debian's has
    sys.exit("make_photos.py: needs PIL: apt-get install python3-pil, and run it with /usr/bin/python3")

PACKAGE = "python3-skimage"
DATA_IN_PACKAGE = "usr/lib/python3/dist-packages/skimage/data"

# The photographs used: (file, class name). Colour photographs and a few
# grayscale ones (coins, camera, brick, grass, gravel); drawings, charts,
# text pages and tiny test patterns are left out.
SOURCES = [
    ("astronaut.png", "astronaut"),
    ("brick.png", "brick"),
    ("camera.png", "camera"),
    ("chelsea.png", "chelsea"),
    ("coffee.png", "coffee"),
    ("coins.png", "coins"),
    ("grass.png", "grass"),
    ("gravel.png", "gravel"),
    ("hubble_deep_field.jpg", "hubble_deep_field"),
    ("ihc.png", "ihc"),
    ("motorcycle_left.png", "motorcycle_left"),
    ("motorcycle_right.png", "motorcycle_right"),
    ("retina.jpg", "retina"),
    ("rocket.jpg", "rocket"),
]

MIN_SIDE, MAX_SIDE = 224, 500
QUALITY = (75, 95)
PNG_SHARE, GRAY_SHARE = 0.05, 0.05


def say(msg):
    print("make_photos.py: " + msg, file=sys.stderr, flush=True)


def offline_help(cache, why):
    return (
        "make_photos.py: cannot get the photographs of %s: %s\n"
        "  With network: apt-get update, then run again (it runs `apt-get download %s`\n"
        "  into %s; nothing is installed).\n"
        "  Offline: copy %s_*.deb into %s, or install the package\n"
        "  (apt-get install %s) and pass --source /%s,\n"
        "  or pass --source DIR holding %s." % (
            PACKAGE, why, PACKAGE, cache, PACKAGE, cache, PACKAGE, DATA_IN_PACKAGE,
            ", ".join(f for f, _ in SOURCES)))


def fetch_sources(cache):
    """The folder holding the photographs: unpacked from the package's .deb
    in `cache` (downloaded there first when missing)."""
    unpacked = os.path.join(cache, "unpacked")
    data = os.path.join(unpacked, DATA_IN_PACKAGE)
    if os.path.isdir(data):
        return data
    os.makedirs(cache, exist_ok=True)
    debs = sorted(glob.glob(os.path.join(cache, PACKAGE + "_*.deb")))
    if not debs:
        if shutil.which("apt-get") is None:
            sys.exit(offline_help(cache, "no apt-get on this machine"))
        say("apt-get download %s into %s" % (PACKAGE, cache))
        try:
            r = subprocess.run(["apt-get", "download", PACKAGE], cwd=cache, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=600)
        except subprocess.TimeoutExpired:
            sys.exit(offline_help(cache, "apt-get download took over 10 minutes"))
        debs = sorted(glob.glob(os.path.join(cache, PACKAGE + "_*.deb")))
        if r.returncode != 0 or not debs:
            tail = r.stdout.decode(errors="replace").strip().splitlines()[-3:]
            sys.exit(offline_help(cache, "apt-get download failed (exit %d): %s" % (r.returncode, " / ".join(tail))))
    if shutil.which("dpkg-deb") is None:
        sys.exit(offline_help(cache, "no dpkg-deb on this machine to unpack %s" % debs[-1]))
    tmp = unpacked + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    r = subprocess.run(["dpkg-deb", "-x", debs[-1], tmp], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        sys.exit("make_photos.py: dpkg-deb -x %s failed: %s\n  (a partial download? remove it and run again)" % (
            debs[-1], r.stdout.decode(errors="replace").strip()))
    shutil.rmtree(unpacked, ignore_errors=True)
    os.rename(tmp, unpacked)
    return data


def load_sources(folder):
    """[(class, RGB image, sha256 of the file)] for every photograph found."""
    out = []
    for name, cls in SOURCES:
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            continue
        raw = open(path, "rb").read()
        im = Image.open(io.BytesIO(raw))
        im.load()
        out.append((cls, im.convert("RGB"), hashlib.sha256(raw).hexdigest()))
    return out


def cut(src, rng):
    """One image cut from src (an RGB image): (image, format, quality)."""
    w, h = src.size
    area = w * h
    for _ in range(10):  # a crop box as RandomResizedCrop draws it, 10 tries
        a = area * rng.uniform(0.10, 1.0)
        ratio = rng.uniform(3 / 4, 4 / 3)
        cw, ch = int(round((a * ratio) ** 0.5)), int(round((a / ratio) ** 0.5))
        if 0 < cw <= w and 0 < ch <= h:
            break
    else:
        cw, ch = min(w, h), min(w, h)
    x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
    short = rng.randint(MIN_SIDE, MAX_SIDE)
    if cw <= ch:
        size = (short, max(short, int(round(ch * short / cw))))
    else:
        size = (max(short, int(round(cw * short / ch))), short)
    im = src.crop((x, y, x + cw, y + ch)).resize(size, Image.BILINEAR)
    im = ImageEnhance.Brightness(im).enhance(rng.uniform(0.8, 1.2))
    if rng.random() < 0.5:
        im = im.transpose(Image.FLIP_LEFT_RIGHT)
    if rng.random() < GRAY_SHARE:
        im = im.convert("L")
    if rng.random() < PNG_SHARE:
        return im, "PNG", None
    return im, "JPEG", rng.randint(*QUALITY)


# set by pool_init in each worker process
_SOURCES = None
_SEED = None


def pool_init(sources, seed):
    global _SOURCES, _SEED
    _SOURCES, _SEED = sources, seed


def make_one(job):
    """Write image i; returns (i, format, mode, width, height, bytes)."""
    i, out = job
    cls, src, _ = _SOURCES[i % len(_SOURCES)]
    rng = random.Random("%d/%d" % (_SEED, i))  # str seeds hash the same on every run
    im, fmt, quality = cut(src, rng)
    name = os.path.join(out, cls, "%07d.%s" % (i, "png" if fmt == "PNG" else "jpg"))
    buf = io.BytesIO()
    if fmt == "PNG":
        im.save(buf, "PNG")
    else:
        im.save(buf, "JPEG", quality=quality)
    with open(name, "wb") as f:
        f.write(buf.getvalue())
    return i, fmt, im.mode, im.size[0], im.size[1], buf.tell()


def main():
    ap = argparse.ArgumentParser(
        description="Cut ImageNet-like images from the photographs of Debian's python3-skimage into an "
        "ImageFolder tree OUT/CLASS/NNNNNNN.jpg (docs/images.md).")
    ap.add_argument("out", metavar="OUT", help="the tree to write (must not exist, or be an empty folder)")
    ap.add_argument("--count", type=int, default=30000, help="number of images (default 30000)")
    ap.add_argument("--seed", type=int, default=27, help="seed of the cuts (default 27)")
    ap.add_argument("--cache", default=os.path.join(os.path.expanduser("~"), ".cache", "sluice", "photos"),
                    help="where the package's .deb is downloaded and unpacked (default ~/.cache/sluice/photos)")
    ap.add_argument("--source", metavar="DIR",
                    help="take the photographs from DIR (an unpacked or installed .../skimage/data) "
                    "instead of downloading the package")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes (default: every CPU)")
    a = ap.parse_args()
    if not 1 <= a.count <= 10_000_000:
        ap.error("--count must be between 1 and 10000000 (got %d)" % a.count)
    if not 0 <= a.seed < 2**63:
        ap.error("--seed must be between 0 and 2^63-1 (got %d)" % a.seed)
    if not 1 <= a.jobs <= 1024:
        ap.error("--jobs must be between 1 and 1024 (got %d)" % a.jobs)
    out = a.out.rstrip("/") or "/"
    if os.path.exists(out) and (not os.path.isdir(out) or os.listdir(out)):
        ap.error("%s exists and is not an empty folder: not written over" % out)

    folder = a.source if a.source else fetch_sources(a.cache)
    if not os.path.isdir(folder):
        sys.exit("make_photos.py: --source %s: not a folder" % folder)
    sources = load_sources(folder)
    if not sources:
        sys.exit("make_photos.py: %s holds none of the photographs (%s)" % (folder, ", ".join(f for f, _ in SOURCES)))
    missing = [f for f, c in SOURCES if c not in {s[0] for s in sources}]
    if missing:
        say("%s lacks %s: %d classes" % (folder, ", ".join(missing), len(sources)))

    # written beside OUT, renamed at the end: OUT is whole or absent
    part = out + ".partial"
    shutil.rmtree(part, ignore_errors=True)
    for cls, _, _ in sources:
        os.makedirs(os.path.join(part, cls))
    t0 = time.time()
    stats = {"JPEG": 0, "PNG": 0, "L": 0, "bytes": 0, "min_side": None, "max_side": 0}
    try:
        jobs = [(i, part) for i in range(a.count)]
        with multiprocessing.Pool(a.jobs, initializer=pool_init, initargs=(sources, a.seed)) as pool:
            for n, (i, fmt, mode, w, h, size) in enumerate(pool.imap_unordered(make_one, jobs, chunksize=64), 1):
                stats[fmt] += 1
                stats["L"] += mode == "L"
                stats["bytes"] += size
                side = min(w, h)
                stats["min_side"] = side if stats["min_side"] is None else min(stats["min_side"], side)
                stats["max_side"] = max(stats["max_side"], side)
                if sys.stderr.isatty() and n % 500 == 0:
                    print("\rmake_photos.py: %d/%d images" % (n, a.count), end="", file=sys.stderr, flush=True)
        if sys.stderr.isatty():
            print(file=sys.stderr)
        manifest = {
            "made_by": "tools/make_photos.py",
            "package": PACKAGE,
            "seed": a.seed,
            "count": a.count,
            "classes": [c for c, _, _ in sources],
            "sources_sha256": {c: h for c, _, h in sources},
            "jpeg": stats["JPEG"], "png": stats["PNG"], "grayscale": stats["L"], "bytes": stats["bytes"],
            "shorter_side": [stats["min_side"], stats["max_side"]],
            "pil": Image.__version__,
        }
        with open(os.path.join(part, ".photos.json"), "w") as f:
            json.dump(manifest, f, indent=1)
            f.write("\n")
        if os.path.isdir(out):
            os.rmdir(out)  # empty, checked above
        os.rename(part, out)
    except BaseException:
        shutil.rmtree(part, ignore_errors=True)
        raise
    say("%s: %d images in %d classes (%d JPEG, %d PNG, %d grayscale), %.1f MB, shorter side %d-%d px, %.1f s" % (
        out, a.count, len(sources), stats["JPEG"], stats["PNG"], stats["L"], stats["bytes"] / 1e6,
        stats["min_side"], stats["max_side"], time.time() - t0))


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit("make_photos.py: interrupted: the partial tree was removed")
