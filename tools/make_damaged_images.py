#!/usr/bin/python3
"""Write the damaged-image corpus of issue #27 section 2: JPEG and PNG files
that a decoder meets in the wild, sane and damaged, to test the feeder's
decode_image op (each file decoded or refused with a clear error under the
job's on_error rule, never a crash) and to seed its fuzz target.

OUT/NAME.jpg|png, one file each, and OUT/manifest.json: for every file, what
it is ("what"), whether it is a well-formed file ("valid"), and for the
valid ones the size and channels a decoder to 8-bit samples gets
("width", "height", "channels": 1 gray, 3 colour, 4 with alpha or CMYK).
What a decoder must do with each invalid one (refuse, or decode what it
can) is the decoder's rule, written in its own tests, not here.

JPEGs are encoded by PIL (libjpeg-turbo) from a small seeded picture and
then cut or patched at their markers; PNGs are written here byte by byte
(zlib and CRC from the standard library), so every chunk is known. The
same seed gives the same bytes. Runs with Debian's /usr/bin/python3 and
python3-pil; docs/images.md.
"""
import argparse
import io
import json
import os
import random
import struct
import sys
import zlib

try:
    from PIL import Image
except ImportError:
    sys.exit("make_damaged_images.py: needs PIL: apt-get install python3-pil, and run it with /usr/bin/python3")

W, H = 61, 47  # odd sizes: partial MCUs and odd chroma planes


def picture(rng, mode, w=W, h=H):
    """A smooth picture with some noise: compresses like a photograph."""
    im = Image.new("RGB", (w, h))
    px = im.load()
    for y in range(h):
        for x in range(w):
            px[x, y] = ((x * 255 // max(w - 1, 1) + rng.randrange(16)) % 256,
                        (y * 255 // max(h - 1, 1) + rng.randrange(16)) % 256,
                        ((x + y) * 3 + rng.randrange(16)) % 256)
    return im.convert(mode) if mode != "RGB" else im


def jpeg(im, **kw):
    b = io.BytesIO()
    im.save(b, "JPEG", quality=kw.pop("quality", 90), **kw)
    return b.getvalue()


def markers(data):
    """[(offset, marker byte, segment length or None)] up to the first SOS."""
    out, i = [], 2
    while i + 4 <= len(data) and data[i] == 0xFF:
        m = data[i + 1]
        n = struct.unpack(">H", data[i + 2:i + 4])[0]
        out.append((i, m, n))
        if m == 0xDA:
            break
        i += 2 + n
    return out


def find(data, marker):
    for off, m, n in markers(data):
        if m == marker:
            return off, n
    raise ValueError("no marker %02X" % marker)


def patch(data, at, new):
    return data[:at] + new + data[at + len(new):]


# ---- PNG, byte by byte ----
SIG = b"\x89PNG\r\n\x1a\n"


def chunk(kind, body, crc=None):
    c = zlib.crc32(kind + body) if crc is None else crc
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", c & 0xFFFFFFFF)


def ihdr(w, h, depth, ctype, interlace=0):
    return chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, interlace))


def samples(rng, w, h, depth, channels):
    """Rows of raw samples (bytes, big-endian for 16 bits; packed below 8 bits)."""
    rows = []
    for y in range(h):
        if depth < 8:
            per = 8 // depth
            vals = [((x + y) // 3 + rng.randrange(2)) % (1 << depth) for x in range(w)]
            row = bytearray()
            for k in range(0, w, per):
                byte = 0
                for j in range(per):
                    v = vals[k + j] if k + j < w else 0
                    byte |= v << (8 - depth * (j + 1))
                row.append(byte)
            rows.append(bytes(row))
        else:
            row = bytearray()
            for x in range(w):
                for c in range(channels):
                    v = ((x * 37 + y * 11 + c * 80) * 131 + rng.randrange(64)) % (1 << depth)
                    row += v.to_bytes(depth // 8, "big")
            rows.append(bytes(row))
    return rows


def png(w, h, depth, ctype, rows, extra=b"", interlace=0):
    raw = b"".join(b"\x00" + r for r in rows)  # filter 0 on every row
    return SIG + ihdr(w, h, depth, ctype, interlace) + extra + chunk(b"IDAT", zlib.compress(raw, 9)) + \
        chunk(b"IEND", b"")


def adam7(rng, w, h):
    """An interlaced (Adam7) 8-bit RGB PNG's IDAT payload, and the full picture's rows."""
    rows = samples(rng, w, h, 8, 3)
    passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
    raw = b""
    for x0, y0, dx, dy in passes:
        for y in range(y0, h, dy):
            xs = range(x0, w, dx)
            if not xs:
                continue
            raw += b"\x00" + b"".join(rows[y][3 * x:3 * x + 3] for x in xs)
    return raw


CHANNELS = {0: 1, 2: 3, 3: 3, 4: 2, 6: 4}


def build(seed):
    """{name: (bytes, manifest entry)}."""
    rng = random.Random("damaged/%d" % seed)
    out = {}

    def put(name, data, what, valid, w=None, h=None, channels=None):
        e = {"what": what, "valid": valid, "bytes": len(data)}
        if valid:
            e.update(width=w, height=h, channels=channels)
        out[name] = (data, e)

    rgb = picture(rng, "RGB")
    base = jpeg(rgb)
    # ---- sane JPEGs ----
    put("ok_baseline.jpg", base, "baseline JPEG, 4:2:0, quality 90", True, W, H, 3)
    put("ok_444.jpg", jpeg(rgb, subsampling=0), "baseline JPEG, 4:4:4", True, W, H, 3)
    put("ok_422.jpg", jpeg(rgb, subsampling=1), "baseline JPEG, 4:2:2", True, W, H, 3)
    put("ok_gray.jpg", jpeg(rgb.convert("L")), "grayscale JPEG (one component)", True, W, H, 1)
    put("ok_progressive.jpg", jpeg(rgb, progressive=True), "progressive JPEG", True, W, H, 3)
    put("ok_optimized.jpg", jpeg(rgb, optimize=True), "baseline JPEG with optimized Huffman tables", True, W, H, 3)
    put("ok_quality5.jpg", jpeg(rgb, quality=5), "quality 5 (coarse tables)", True, W, H, 3)
    put("ok_quality100.jpg", jpeg(rgb, quality=100), "quality 100 (all-ones tables)", True, W, H, 3)
    put("ok_cmyk.jpg", jpeg(rgb.convert("CMYK")), "CMYK JPEG (four components, Adobe APP14 marker)",
        True, W, H, 4)
    put("ok_1x1.jpg", jpeg(picture(rng, "RGB", 1, 1)), "1x1 JPEG", True, 1, 1, 3)
    put("ok_wide.jpg", jpeg(picture(rng, "RGB", 517, 3)), "517x3 JPEG (one MCU row)", True, 517, 3, 3)
    exif = Image.Exif()
    exif[0x0112] = 6  # orientation: rotate 90
    put("ok_exif_rotated.jpg", jpeg(rgb, exif=exif.tobytes()),
        "JPEG with EXIF orientation 6 (the stored pixels are W x H; rotating is a decoder's choice)", True, W, H, 3)
    # ---- damaged JPEGs ----
    sos, _ = find(base, 0xDA)
    put("trunc_soi.jpg", base[:3], "only FF D8 FF: cut after the start of image", False)
    put("trunc_header.jpg", base[:find(base, 0xDB)[0] + 20], "cut inside the quantization table", False)
    put("trunc_before_scan.jpg", base[:sos], "cut before the start of scan", False)
    put("trunc_mid_scan.jpg", base[:sos + (len(base) - sos) // 2], "cut in the middle of the entropy-coded data",
        False)
    put("trunc_no_eoi.jpg", base[:-2], "all the data, no end-of-image marker", False)
    dht, n = find(base, 0xC4)
    put("bad_huffman_counts.jpg", patch(base, dht + 5, b"\xff" * 16),
        "Huffman table whose code counts (255 each) overflow the code space", False)
    put("bad_huffman_class.jpg", patch(base, dht + 4, b"\x7f"), "Huffman table of class 7 / id 15", False)
    dqt, n = find(base, 0xDB)
    put("bad_dqt_zero.jpg", patch(base, dqt + 5, b"\x00" * 64), "quantization table of zeros", False)
    put("bad_dqt_id.jpg", patch(base, dqt + 4, b"\x0f"), "quantization table id 15 (0-3 exist)", False)
    sof, n = find(base, 0xC0)
    put("bad_sof_huge.jpg", patch(base, sof + 5, struct.pack(">HH", 60000, 60000)),
        "frame header of 60000x60000 (3.6 gigapixels) on a small file: refuse before allocating", False)
    put("bad_sof_max.jpg", patch(base, sof + 5, struct.pack(">HH", 65535, 65535)), "frame header of 65535x65535",
        False)
    put("bad_sof_zero.jpg", patch(base, sof + 5, struct.pack(">HH", 0, 0)), "frame header of 0x0", False)
    put("bad_sof_components.jpg", patch(base, sof + 9, b"\x07"), "frame header with 7 components", False)
    put("bad_sof_precision.jpg", patch(base, sof + 4, b"\x0c"), "12-bit sample precision in a baseline frame",
        False)
    scan = bytearray(base)
    for k in range(sos + 14, len(base) - 2, 7):
        scan[k] = rng.randrange(256)
    put("bad_scan_noise.jpg", bytes(scan), "entropy-coded data overwritten with noise every 7th byte", False)
    put("bad_after_soi.jpg", b"\xff\xd8\xff" + bytes(rng.randrange(256) for _ in range(200)),
        "a JPEG start of image, then noise", False)
    put("bad_no_sos.jpg", base[:sos] + b"\xff\xd9", "headers and end of image, no scan", False)
    # ---- sane PNGs ----
    for name, depth, ctype, what in [
        ("ok_rgb8.png", 8, 2, "8-bit RGB"), ("ok_gray8.png", 8, 0, "8-bit grayscale"),
        ("ok_rgba8.png", 8, 6, "8-bit RGBA"), ("ok_graya8.png", 8, 4, "8-bit grayscale + alpha"),
        ("ok_rgb16.png", 16, 2, "16-bit RGB"), ("ok_gray16.png", 16, 0, "16-bit grayscale"),
        ("ok_rgba16.png", 16, 6, "16-bit RGBA"), ("ok_gray1.png", 1, 0, "1-bit grayscale"),
        ("ok_gray4.png", 4, 0, "4-bit grayscale")]:
        put(name, png(W, H, depth, ctype, samples(rng, W, H, depth, CHANNELS[ctype])), what + " PNG", True, W, H,
            CHANNELS[ctype])
    plte = chunk(b"PLTE", bytes(rng.randrange(256) for _ in range(3 * 16)))
    put("ok_palette4.png", png(W, H, 4, 3, samples(rng, W, H, 4, 1), plte), "4-bit palette PNG (16 colours)",
        True, W, H, 3)
    trns = chunk(b"tRNS", bytes(range(0, 256, 16)))
    put("ok_palette_trns.png", png(W, H, 4, 3, samples(rng, W, H, 4, 1), plte + trns),
        "palette PNG with transparency (tRNS)", True, W, H, 4)
    put("ok_interlaced.png",
        SIG + ihdr(W, H, 8, 2, 1) + chunk(b"IDAT", zlib.compress(adam7(rng, W, H), 9)) + chunk(b"IEND", b""),
        "Adam7-interlaced 8-bit RGB PNG", True, W, H, 3)
    rows = samples(rng, W, H, 8, 3)
    raw = zlib.compress(b"".join(b"\x00" + r for r in rows), 9)
    split = SIG + ihdr(W, H, 8, 2) + b"".join(chunk(b"IDAT", raw[k:k + 100]) for k in range(0, len(raw), 100)) + \
        chunk(b"IEND", b"")
    put("ok_split_idat.png", split, "8-bit RGB PNG, its data in IDAT chunks of 100 bytes", True, W, H, 3)
    put("ok_1x1.png", png(1, 1, 8, 2, samples(rng, 1, 1, 8, 3)), "1x1 PNG", True, 1, 1, 3)
    # ---- damaged PNGs ----
    good = png(W, H, 8, 2, rows)
    put("trunc_sig.png", SIG, "only the PNG signature", False)
    put("trunc_ihdr.png", good[:20], "cut inside IHDR", False)
    put("trunc_idat.png", good[:len(good) // 2], "cut in the middle of IDAT", False)
    put("trunc_no_iend.png", good[:-12], "all the data, no IEND chunk", False)
    put("bad_ihdr_crc.png", SIG + chunk(b"IHDR", struct.pack(">IIBBBBB", W, H, 8, 2, 0, 0, 0), crc=0) + good[33:],
        "IHDR with a wrong CRC", False)
    put("bad_idat_crc.png", good[:-16] + b"\0\0\0\0" + good[-12:], "IDAT with a wrong CRC", False)
    put("bad_zlib.png", SIG + ihdr(W, H, 8, 2) + chunk(b"IDAT", bytes(rng.randrange(256) for _ in range(300))) +
        chunk(b"IEND", b""), "IDAT that is not a zlib stream", False)
    short = zlib.compress(b"".join(b"\x00" + r for r in rows[:H // 2]), 9)
    put("bad_short_data.png", SIG + ihdr(W, H, 8, 2) + chunk(b"IDAT", short) + chunk(b"IEND", b""),
        "IDAT holding half the rows", False)
    filt = zlib.compress(b"".join(b"\x09" + r for r in rows), 9)
    put("bad_filter.png", SIG + ihdr(W, H, 8, 2) + chunk(b"IDAT", filt) + chunk(b"IEND", b""),
        "rows with filter type 9 (0-4 exist)", False)
    put("bad_huge.png", SIG + ihdr(60000, 60000, 8, 2) + good[33:],
        "IHDR of 60000x60000 on a small file: refuse before allocating", False)
    put("bad_max.png", SIG + ihdr(0x7FFFFFFF, 0x7FFFFFFF, 8, 2) + good[33:], "IHDR of 2^31-1 x 2^31-1", False)
    put("bad_zero_width.png", SIG + ihdr(0, H, 8, 2) + good[33:], "IHDR of width 0", False)
    put("bad_depth.png", SIG + ihdr(W, H, 7, 2) + good[33:], "IHDR of bit depth 7", False)
    put("bad_color_type.png", SIG + ihdr(W, H, 8, 5) + good[33:], "IHDR of colour type 5", False)
    put("bad_palette_missing.png", png(W, H, 4, 3, samples(rng, W, H, 4, 1)), "palette PNG without PLTE", False)
    bomb = zlib.compress(b"\x00" * (64 << 20), 9)  # 64 MiB of zeros in ~64 KB
    put("bad_inflate_bomb.png", SIG + ihdr(W, H, 8, 2) + chunk(b"IDAT", bomb) + chunk(b"IEND", b""),
        "IDAT inflating to 64 MiB for a 61x47 image (too much data)", False)
    # ---- neither ----
    put("empty.jpg", b"", "a file of 0 bytes", False)
    put("noise.png", bytes(rng.randrange(256) for _ in range(512)), "512 bytes of noise", False)
    put("text.jpg", b"this is not an image\n", "a line of text", False)
    return out


def main():
    ap = argparse.ArgumentParser(description="Write the damaged-image corpus of issue #27 (docs/images.md).")
    ap.add_argument("out", metavar="OUT", help="the folder to write (must not exist, or be empty)")
    ap.add_argument("--seed", type=int, default=27, help="seed of the pictures and the noise (default 27)")
    a = ap.parse_args()
    if not 0 <= a.seed < 2**63:
        ap.error("--seed must be between 0 and 2^63-1")
    out = a.out.rstrip("/") or "/"
    if os.path.exists(out) and (not os.path.isdir(out) or os.listdir(out)):
        ap.error("%s exists and is not an empty folder: not written over" % out)
    files = build(a.seed)
    os.makedirs(out, exist_ok=True)
    for name, (data, _) in sorted(files.items()):
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump({"made_by": "tools/make_damaged_images.py", "seed": a.seed,
                   "files": {n: e for n, (_, e) in sorted(files.items())}}, f, indent=1)
        f.write("\n")
    valid = sum(e["valid"] for _, e in files.values())
    print("make_damaged_images.py: %s: %d files (%d valid, %d damaged), manifest.json" % (
        out, len(files), valid, len(files) - valid), file=sys.stderr)


if __name__ == "__main__":
    main()
