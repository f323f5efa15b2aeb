#!/usr/bin/python3
"""Writes the image corpus of transform/img's tests (issue #27) into this
folder, with PIL (Debian's python3-pil): small, deterministic images, the
damaged ones made by editing a good file's bytes, and PIL's own decodes
and resizes of some of them as raw uint8 HWC (*.raw) for the tests to
compare against. Run: /usr/bin/python3 tests/data/images/make_images.py
The encoded files are also copied as the fuzz target's seeds
(tests/fuzz/seeds/image/). Not made here: progressive_smoothed.jpg, an
input fuzz_image found (progressive.jpg mutated so that libjpeg's block
smoothing of missing scans applies; kept as found)."""
import io
import os
import struct
import zlib

from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))


def put(name, data):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)


def pattern(w, h, mode="RGB"):
    """A smooth picture with some edges (so the JPEG is not trivial)."""
    im = Image.new("RGB", (w, h))
    px = im.load()
    for y in range(h):
        for x in range(w):
            px[x, y] = ((x * 7 + y * 3) % 256, (x * x + 2 * y * y) % 256, 255 - (x * y) % 256 if (x // 5 + y // 5) % 2 else (x * 13) % 256)
    return im.convert(mode) if mode != "RGB" else im


def jpeg(im, **kw):
    b = io.BytesIO()
    im.save(b, "JPEG", **kw)
    return b.getvalue()


def png(im, **kw):
    b = io.BytesIO()
    im.save(b, "PNG", **kw)
    return b.getvalue()


def png_chunk(kind, body):
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


def forged_png(w, h, depth=8, ctype=2, rows=b""):
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, 0))
            + png_chunk(b"IDAT", zlib.compress(rows)) + png_chunk(b"IEND", b""))


def sof_offset(data):
    """Offset of the SOFn marker's height field."""
    i = 2
    while i < len(data):
        assert data[i] == 0xFF
        m = data[i + 1]
        n = struct.unpack(">H", data[i + 2:i + 4])[0]
        if m in (0xC0, 0xC1, 0xC2):
            return i + 5
        i += 2 + n
    raise ValueError("no SOF")


def dht_offset(data):
    i = 2
    while i < len(data):
        m = data[i + 1]
        n = struct.unpack(">H", data[i + 2:i + 4])[0]
        if m == 0xC4:
            return i
        i += 2 + n
    raise ValueError("no DHT")


def strip_segments(data, marker):
    out, i = bytearray(data[:2]), 2
    while data[i + 1] != 0xDA:
        n = struct.unpack(">H", data[i + 2:i + 4])[0]
        if data[i + 1] != marker:
            out += data[i:i + 2 + n]
        i += 2 + n
    return bytes(out + data[i:])


def main():
    rgb = pattern(37, 29)
    good = jpeg(rgb, quality=95)
    put("rgb_q95.jpg", good)
    with Image.open(io.BytesIO(good)) as im:
        put("rgb_q95.jpg.raw", im.convert("RGB").tobytes())
    # PIL's DCT-scaled decode (draft): libjpeg at scale 1/2
    with Image.open(io.BytesIO(good)) as im:
        im.draft("RGB", (18, 14))
        assert im.size == (19, 15), im.size
        put("rgb_q95.jpg.half.raw", im.convert("RGB").tobytes())
    gray = jpeg(pattern(23, 17, "L"), quality=90)
    put("gray.jpg", gray)
    with Image.open(io.BytesIO(gray)) as im:
        put("gray.jpg.raw", im.tobytes())
    prog = jpeg(pattern(40, 24), quality=85, progressive=True)
    put("progressive.jpg", prog)
    with Image.open(io.BytesIO(prog)) as im:
        put("progressive.jpg.raw", im.convert("RGB").tobytes())
    put("cmyk.jpg", jpeg(pattern(16, 16, "CMYK"), quality=90))
    put("truncated.jpg", good[: len(good) // 2])
    # the first Huffman table's code counts made impossible (more codes of
    # length 1..16 than fit): libjpeg refuses the table
    bad = bytearray(good)
    d = dht_offset(good)
    for k in range(16):
        bad[d + 5 + k] = 0xFF
    put("huffman.jpg", bytes(bad))
    # a Huffman-coded body of garbage after the tables
    bad = bytearray(good)
    start = good.index(b"\xff\xda")
    body = start + 2 + struct.unpack(">H", good[start + 2:start + 4])[0]
    for k in range(body + 10, min(body + 60, len(bad) - 2)):
        bad[k] = (bad[k] * 31 + 7) & 0xFF
        if bad[k] == 0xFF:
            bad[k] = 0xFE
    put("scrambled.jpg", bytes(bad))
    # every DQT segment taken out: libjpeg would take the tables of the
    # image decoded before with the same decompressor
    put("no_tables.jpg", strip_segments(good, 0xDB))
    z = bytearray(good)
    o = sof_offset(good)
    z[o:o + 2] = b"\x00\x00"
    put("zero.jpg", bytes(z))
    huge = bytearray(good)
    huge[o:o + 4] = struct.pack(">HH", 60000, 60000)
    put("huge.jpg", bytes(huge))
    put("rgb.png", png(rgb))
    put("rgb.png.raw", rgb.tobytes())
    put("rgb.png.L.raw", rgb.convert("L").tobytes())
    rgba = rgb.copy()
    rgba.putalpha(Image.linear_gradient("L").resize((37, 29)))
    put("rgba.png", png(rgba))
    put("gray.png", png(pattern(23, 17, "L")))
    la = pattern(23, 17, "L").convert("LA")
    la.putalpha(Image.linear_gradient("L").resize((23, 17)))
    put("gray_alpha.png", png(la))
    put("bilevel.png", png(pattern(23, 17, "L").convert("1")))
    put("palette.png", png(rgb.convert("P", palette=Image.ADAPTIVE, colors=16)))
    with Image.open(os.path.join(HERE, "palette.png")) as im:
        put("palette.png.raw", im.convert("RGB").tobytes())
    g16 = Image.new("I;16", (9, 7))
    g16.putdata([(x * 7919 + y * 104729) % 65536 for y in range(7) for x in range(9)])
    put("gray16.png", png(g16))
    put("zero.png", forged_png(0, 5))
    put("huge.png", forged_png(60000, 60000))
    put("truncated.png", png(rgb)[:200])
    put("not_an_image.txt", b"GIF89a is not JPEG or PNG\n")
    # resizes: PIL's crop(box).resize(size, BILINEAR, reducing_gap=None)
    src = pattern(61, 47)
    put("resize_src.png", png(src))
    for name, box, size in (("shrink", (3, 2, 58, 45), (17, 11)),
                            ("enlarge", (10, 5, 21, 14), (30, 25)),
                            ("mixed", (0, 0, 61, 47), (80, 13))):
        out = src.crop(box).resize(size, Image.BILINEAR, reducing_gap=None)
        put("resize_%s.raw" % name, out.tobytes())
    out = src.convert("L").crop((5, 1, 60, 40)).resize((23, 9), Image.BILINEAR, reducing_gap=None)
    put("resize_gray.raw", out.tobytes())


def seeds():
    out = os.path.join(HERE, "..", "..", "fuzz", "seeds", "image")
    os.makedirs(out, exist_ok=True)
    for name in sorted(os.listdir(HERE)):
        if name.endswith((".jpg", ".png", ".txt")):
            with open(os.path.join(HERE, name), "rb") as f, open(os.path.join(out, name), "wb") as g:
                g.write(f.read())


if __name__ == "__main__":
    main()
    seeds()
