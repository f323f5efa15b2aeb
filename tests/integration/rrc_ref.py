"""The feeder's random streams and crop boxes, computed independently of
the C code, for the tests that pin them (tests/integration/test_map.py,
test_map_images.py, tests/data/images/rrc_boxes.py):

- rng_key / Rng: shared/sl_rng.h (sl_rng_key's splitmix64 stream keyed by
  seed, epoch, element id and op index) again in Python integers, drawing
  the uniforms in img.h's documented order;
- rrc_box: torchvision's RandomResizedCrop.get_params as written in
  torchvision (transforms.py), in doubles, drawing from an Rng.

Stdlib only, so the scripts that import it run without numpy or PIL.
"""
import math

M64 = (1 << 64) - 1


def mix(z):
    """splitmix64's finaliser."""
    z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & M64
    z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & M64
    return z ^ (z >> 31)


def rng_key(seed, epoch, element, op):
    """shared/sl_rng.h's sl_rng_key: the stream's state before its first draw."""
    s = mix((seed + 0x9e3779b97f4a7c15) & M64)
    s = mix(s ^ ((epoch + 0x632be59bd9b4e019) & M64))
    s = mix(s ^ ((element + 0x8cb92ba72f3d8dd7) & M64))
    return mix(s ^ ((op + 0xd6e8feb86659fd93) & M64))


class Rng:
    """shared/sl_rng.h's stream for (seed, epoch, element id, op index)."""

    def __init__(self, seed, epoch, element, op):
        self.s = rng_key(seed, epoch, element, op)

    def u64(self):
        self.s = (self.s + 0x9e3779b97f4a7c15) & M64
        return mix(self.s)

    def uniform(self):
        return (self.u64() >> 11) * 2.0 ** -53

    def range(self, lo, hi):
        u = self.uniform()
        return lo + (hi - lo) * u if hi > lo else lo

    def below(self, n):
        return ((self.u64() >> 32) * n) >> 32


def rrc_box(rng, height, width, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    """torchvision's RandomResizedCrop.get_params, drawing from rng:
    (top, left, h, w)."""
    area = height * width
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target_area = area * rng.range(scale[0], scale[1])
        aspect_ratio = math.exp(rng.range(log_ratio[0], log_ratio[1]))
        w = int(round(math.sqrt(target_area * aspect_ratio)))
        h = int(round(math.sqrt(target_area / aspect_ratio)))
        if 0 < w <= width and 0 < h <= height:
            i = rng.below(height - h + 1)
            j = rng.below(width - w + 1)
            return i, j, h, w
    in_ratio = float(width) / float(height)
    if in_ratio < min(ratio):
        w = width
        h = int(round(w / min(ratio)))
    elif in_ratio > max(ratio):
        h = height
        w = int(round(h * max(ratio)))
    else:
        w = width
        h = height
    return (height - h) // 2, (width - w) // 2, h, w
