#!/usr/bin/env python3
"""Images decoded and augmented in the feeder, through real processes
(issue #27 sections 1 and 4): an ImageFolder tree of JPEGs and PNGs (RGB
and gray, sizes 40-150 px, made here with PIL) converted with
`sluice-record convert images`, served by sluice-feeder with the map
decode_image -> random_resized_crop(24x20) -> random_flip -> normalize(CHW)
to the Python client (sluice.Client), two epochs.

1. Every element of both epochs equals an independent computation with
   PIL and numpy, exactly (float32 bits; an element decoded at a DCT scale
   within one uint8 step at under 1% of its values, libjpeg's region and
   whole decodes rounding a pixel of the last rows apart): the crop box drawn by
   torchvision's get_params formula from the stream sl_rng_key(seed,
   epoch, element id, op index) recomputed here; for a JPEG the DCT scale
   the feeder picks (the largest of 8, 4, 2, 1 whose scaled box still
   covers the output), decoded by PIL's draft() at that scale (the same
   libjpeg), the box scaled to it, cut out by its whole-pixel hull and
   resized within it by PIL's bilinear resize (torchvision's resized_crop:
   crop, then resize); the flip when the flip op's first draw is < 0.5;
   (x / 255 - mean) / std in float32.
2. F = 2 feeders give the same elements bit for bit, and the two epochs
   draw different crops (a new draw each epoch).
3. A damaged JPEG (cut short) stops the job with an error naming the
   file, the record, its offset, the element and the op.

Usage: test_map_images.py BUILD_DIR [SANITIZER_BUILD_DIR]
  (the second: run that build's feeder and sluice-record, the first's Python
  package; how the sanitizer builds run it)
"""
import glob
import json
import math
import os
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bed  # noqa: E402
import harness  # noqa: E402
from harness import fail, ok  # noqa: E402
from rrc_ref import Rng, rrc_box  # noqa: E402

try:
    import numpy as np
    from PIL import Image
except ImportError:
    print("1..0 # SKIP numpy or PIL (python3-pil) missing")
    sys.exit(77)

SEED, OUT_H, OUT_W = 11, 24, 20
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]



def expected(path, epoch, element):
    """The element as PIL and numpy compute it."""
    im = Image.open(path)
    W, H = im.size
    top, left, h, w = rrc_box(Rng(SEED, epoch, element, 1), H, W)
    denom = 1
    if im.format == "JPEG":
        for d in (8, 4, 2):
            if h >= OUT_H * d and w >= OUT_W * d:
                denom = d
                break
    sw, sh = -(-W // denom), -(-H // denom)
    if denom > 1:
        im.draft("RGB", (W // denom, H // denom))  # PIL picks the largest scale <= min(W // w, H // h)
        if im.size != (sw, sh):
            fail("%s: PIL's draft gave %s for 1/%d, want %s" % (path, im.size, denom, (sw, sh)))
    im = im.convert("RGB")
    # the box at that scale, cut out by its whole-pixel hull and resized
    # within it (torchvision's resized_crop: crop, then resize)
    fy, fx = sh / H, sw / W
    y0, x0, y1, x1 = top * fy, left * fx, (top + h) * fy, (left + w) * fx
    hy, hx = math.floor(y0), math.floor(x0)
    cut = im.crop((hx, hy, math.ceil(x1), math.ceil(y1)))
    out = cut.resize((OUT_W, OUT_H), Image.BILINEAR, box=(x0 - hx, y0 - hy, x1 - hx, y1 - hy), reducing_gap=None)
    a = np.asarray(out, dtype=np.uint8)
    if Rng(SEED, epoch, element, 2).uniform() < 0.5:
        a = a[:, ::-1, :]
    x = a.astype(np.float32) / np.float32(255)
    x = (x - np.array(MEAN, dtype=np.float32)) / np.array(STD, dtype=np.float32)
    return np.ascontiguousarray(x.transpose(2, 0, 1)), denom


def make_tree(root):
    """40 images in 4 classes: JPEG (RGB, gray, progressive) and PNG (RGB,
    gray, RGBA), 40-150 px a side, smooth gradients with noise."""
    r = random.Random(5)
    paths = []
    for k in range(4):
        os.makedirs(os.path.join(root, "c%d" % k))
        for i in range(10):
            W, H = r.randint(40, 150), r.randint(40, 150)
            yy, xx = np.mgrid[0:H, 0:W]
            base = np.stack([(xx * 255 // W), (yy * 255 // H), ((xx + yy) * 127 // (W + H)) + 64 * k], -1)
            noise = np.array([r.randint(0, 40) for _ in range(H * W * 3)]).reshape(H, W, 3)
            im = Image.fromarray(((base + noise) % 256).astype(np.uint8), "RGB")
            kind = (k * 10 + i) % 6
            name = os.path.join(root, "c%d" % k, "%02d.%s" % (i, "jpg" if kind < 3 else "png"))
            if kind == 0:
                im.save(name, quality=90)
            elif kind == 1:
                im.convert("L").save(name, quality=80)
            elif kind == 2:
                im.save(name, quality=85, progressive=True)
            elif kind == 3:
                im.save(name)
            elif kind == 4:
                im.convert("L").save(name)
            else:
                im.convert("RGBA").save(name)
            paths.append(name)
    return sorted(paths, key=lambda p: (os.path.basename(os.path.dirname(p)), os.path.basename(p)))


def job_for(name, files):
    path = os.path.join(bed.TMP, name + ".json")
    with open(path, "w") as f:
        json.dump({"name": name, "files": files, "format": "tfrecord", "global_batch_size": 4, "epochs": 2,
                   "prefetch": 4, "shuffle": {"buffer": 16, "seed": SEED},
                   "features": {"image": {"dtype": "bytes", "shape": []}, "id": {"dtype": "int64", "shape": []},
                                "label": {"dtype": "int64", "shape": []}},
                   "map": [{"op": "decode_image", "feature": "image", "channels": 3},
                           {"op": "random_resized_crop", "feature": "image", "size": [OUT_H, OUT_W]},
                           {"op": "random_flip", "feature": "image"},
                           {"op": "normalize", "feature": "image", "mean": MEAN, "std": STD, "layout": "CHW"}]},
                  f)
    return path


CLIENT = r"""
import json, sys
import sluice
out = []
try:
    with sluice.Client(sys.argv[2].split(","), sys.argv[1], replicas=1) as c:
        for step in c:
            r = step.replicas[0]
            for i in range(len(r["id"])):
                out.append({"epoch": step.epoch, "id": int(r["id"][i]), "dtype": str(r["image"].dtype),
                            "shape": list(r["image"][i].shape), "hex": r["image"][i].tobytes().hex()})
except Exception as e:
    print(json.dumps({"error": str(e)}))
    sys.exit(3)
print(json.dumps(out))
"""


def serve(tag, job_path, F):
    return bed.serve_client(tag, job_path, F, CLIENT)


def main():
    bed.setup(sys.argv[1], "map-images")
    if len(sys.argv) > 2:  # a sanitizer build's feeder and tools, this build's Python package
        bed.use_binaries(sys.argv[2])
    try:
        tree = os.path.join(bed.TMP, "tree")
        paths = make_tree(tree)
        shards = os.path.join(bed.TMP, "shards")
        subprocess.run([bed.RECORD, "convert", "images", "--output-dir", shards, "--shards", "3", tree],
                       check=True, capture_output=True)
        files = sorted(glob.glob(os.path.join(shards, "*.tfrecord")))
        job = job_for("imgs", files)
        got = {}
        for F in (1, 2):
            tag = "f%d" % F
            p, codes = serve(tag, job, F)
            if p.returncode != 0 or codes != [0] * F:
                fail("%s: client exit %d, feeders %s\n%s%s" % (tag, p.returncode, codes, p.stdout[-2000:],
                                                                p.stderr[-2000:]))
            got[F] = {(e["epoch"], e["id"]): e for e in json.loads(p.stdout)}
            if sorted(got[F]) != sorted((ep, i) for ep in (0, 1) for i in range(len(paths))):
                fail("%s: not every image once per epoch (%d elements)" % (tag, len(got[F])))
        scaled = near = 0
        for (ep, i), e in sorted(got[1].items()):
            want, denom = expected(paths[i], ep, i)
            scaled += denom > 1
            if e["dtype"] != "float32" or e["shape"] != [3, OUT_H, OUT_W]:
                fail("id %d epoch %d: %s %s, want float32 [3, %d, %d]" % (i, ep, e["dtype"], e["shape"], OUT_H,
                                                                          OUT_W))
            g = np.frombuffer(bytes.fromhex(e["hex"]), dtype=np.float32).reshape(3, OUT_H, OUT_W)
            d = np.abs(g - want)
            # at a DCT scale libjpeg's region decode (the feeder's) and its
            # whole decode (PIL's draft) may round a pixel of the image's
            # last rows 1 apart: one uint8 step, a few values; at 1/1 and
            # for PNGs nothing may differ
            step = 1.0 / (255 * min(STD)) * 1.0001
            if denom > 1 and d.max() <= step and (d > 0).sum() <= d.size // 100:
                near += (d > 0).any()
                continue
            if g.tobytes() != want.tobytes():
                fail("id %d (%s) epoch %d, DCT 1/%d: differs from PIL's: max %.4g at %s, %d of %d values" %
                     (i, os.path.relpath(paths[i], tree), ep, denom, d.max(), np.unravel_index(d.argmax(), d.shape),
                      int((d > 0).sum()), d.size))
        if scaled == 0:
            fail("no element was decoded at a DCT scale: the test images are too small for the fused path")
        ok("F=1: %d elements of 2 epochs equal PIL + numpy bit for bit (%d decoded at a DCT scale of 1/2-1/8; %d of "
           "those within one uint8 step at under 1%% of their values)" % (len(got[1]), scaled, near))
        if got[1] != got[2]:
            diff = [k for k in got[1] if got[1][k] != got[2].get(k)]
            fail("F=2 differs from F=1 at %d elements, e.g. %s" % (len(diff), diff[:3]))
        same = sum(got[1][(0, i)]["hex"] == got[1][(1, i)]["hex"] for i in range(len(paths)))
        if same > 2:
            fail("%d of %d images are the same in both epochs: the draw does not change with the epoch"
                 % (same, len(paths)))
        ok("F=2: the same %d elements bit for bit; epochs 0 and 1 differ for %d of %d images"
           % (len(got[2]), len(paths) - same, len(paths)))

        # a JPEG cut short: the job stops with the record and the op named
        victim = next(p for p in paths if p.endswith(".jpg"))
        with open(victim, "rb") as f:
            data = f.read()
        with open(victim, "wb") as f:
            f.write(data[:len(data) // 2])
        bad_shards = os.path.join(bed.TMP, "bad")
        subprocess.run([bed.RECORD, "convert", "images", "--output-dir", bad_shards, "--shards", "1", tree],
                       check=True, capture_output=True)
        job = job_for("bad", sorted(glob.glob(os.path.join(bad_shards, "*.tfrecord"))))
        p, codes = serve("bad", job, 1)
        idx = paths.index(victim)
        log = bed.read_log("bad", "feeder0")
        import re
        m = re.search(r"\S+\.tfrecord: record %d at \d+: element %d: map\[1\] random_resized_crop: JPEG: [^\n]+"
                      % (idx, idx), log)
        if p.returncode == 0 or codes == [0] or m is None:
            fail("a cut JPEG: client exit %d, feeder %s; want the file, record %d, element, op and libjpeg's words "
                 "in the feeder's error:\n%s" % (p.returncode, codes, idx, log[-2000:]))
        ok("a cut JPEG stops the job: %s" % m.group(0)[m.group(0).rfind("/") + 1:])
    finally:
        harness.stop_all()
    bed.finish()


if __name__ == "__main__":
    main()
