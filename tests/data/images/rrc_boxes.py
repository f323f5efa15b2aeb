#!/usr/bin/python3
"""The boxes test_img_ops pins for img_rrc_box and img_center_box, computed
independently: sl_rng (shared/sl_rng.h) again in Python integers, then
torchvision's RandomResizedCrop.get_params and center_crop formulas as
written in torchvision (transforms.py / functional.py), in doubles, drawing
the uniforms in img.h's documented order. Prints the C table."""
import math

M = (1 << 64) - 1


def mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
    return z ^ (z >> 31)


class Rng:
    def __init__(self, seed, epoch, element, op):
        s = mix((seed + 0x9E3779B97F4A7C15) & M)
        s = mix(s ^ ((epoch + 0x632BE59BD9B4E019) & M))
        s = mix(s ^ ((element + 0x8CB92BA72F3D8DD7) & M))
        self.s = mix(s ^ ((op + 0xD6E8FEB86659FD93) & M))

    def u64(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & M
        return mix(self.s)

    def uniform(self):
        return (self.u64() >> 11) * 2.0 ** -53

    def range(self, lo, hi):
        u = self.uniform()
        return lo + (hi - lo) * u if hi > lo else lo

    def below(self, n):
        return ((self.u64() >> 32) * n) >> 32


def get_params(rng, height, width, scale, ratio):
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


CASES = [  # seed, epoch, element, op, height, width, scale, ratio
    (1, 0, 0, 1, 375, 500, (0.08, 1.0), (3 / 4, 4 / 3)),
    (1, 0, 1, 1, 375, 500, (0.08, 1.0), (3 / 4, 4 / 3)),
    (1, 1, 0, 1, 375, 500, (0.08, 1.0), (3 / 4, 4 / 3)),
    (42, 3, 12345, 2, 480, 320, (0.08, 1.0), (3 / 4, 4 / 3)),
    (7, 0, 9, 0, 224, 224, (0.5, 0.5), (1.0, 1.0)),
    (7, 0, 10, 0, 1, 1, (0.08, 1.0), (3 / 4, 4 / 3)),
    # misses every attempt: the fallback with the ratio clamped
    (5, 0, 3, 1, 10, 1000, (0.9, 1.0), (0.5, 2.0)),
    (5, 0, 4, 1, 1000, 10, (0.9, 1.0), (0.5, 2.0)),
    (5, 0, 5, 1, 30, 40, (2.0, 3.0), (0.5, 2.0)),
]

CENTER = [(375, 500, 224, 224), (256, 256, 224, 224), (225, 224, 224, 224), (5, 7, 10, 10), (3, 3, 2, 2)]

if __name__ == "__main__":
    for seed, epoch, el, op, h, w, sc, ra in CASES:
        i, j, bh, bw = get_params(Rng(seed, epoch, el, op), h, w, sc, ra)
        print("    {%d, %d, %d, %d, %d, %d, %.17g, %.17g, %.17g, %.17g, %d, %d, %d, %d}," % (
            seed, epoch, el, op, h, w, sc[0], sc[1], ra[0], ra[1], i, j, bh, bw))
    for h, w, oh, ow in CENTER:
        print("    {%d, %d, %d, %d, %d, %d}," % (h, w, oh, ow, int(round((h - oh) / 2.0)), int(round((w - ow) / 2.0))))
