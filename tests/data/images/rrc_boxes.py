#!/usr/bin/python3
"""The boxes test_img_ops pins for img_rrc_box and img_center_box, computed
independently: sl_rng and torchvision's RandomResizedCrop.get_params from
tests/integration/rrc_ref.py, and center_crop's formula as written in
torchvision (functional.py). Prints the C table."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "integration"))
from rrc_ref import Rng, rrc_box  # noqa: E402

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
        i, j, bh, bw = rrc_box(Rng(seed, epoch, el, op), h, w, sc, ra)
        print("    {%d, %d, %d, %d, %d, %d, %.17g, %.17g, %.17g, %.17g, %d, %d, %d, %d}," % (
            seed, epoch, el, op, h, w, sc[0], sc[1], ra[0], ra[1], i, j, bh, bw))
    for h, w, oh, ow in CENTER:
        print("    {%d, %d, %d, %d, %d, %d}," % (h, w, oh, ow, int(round((h - oh) / 2.0)), int(round((w - ow) / 2.0))))
