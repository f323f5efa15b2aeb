#!/usr/bin/env bash
# CLI test of tools/make_photos.py (issue #27 section 2), the photo data set
# script, on stand-in photographs drawn here with PIL (the real ones come
# from Debian's python3-skimage, fetched with apt-get download: not in a
# test, which must not need the network). Checks: the ImageFolder layout
# (class = source photograph, image i in class i mod K), sizes (shorter side
# 224-500), formats by magic bytes, the grayscale and PNG shares, the same
# bytes for the same seed whatever --jobs, other bytes for another seed,
# the manifest; refusals (an existing tree, a bad --count, offline without
# --source: what to install is said); then `sluice-record convert images`
# and `stats --job` on the tree. And tools/make_damaged_images.py: the
# corpus is as its manifest says, the same for a seed.
#
# Needs Debian's /usr/bin/python3 with python3-pil (scripts/deps.sh); exits
# 77 (skipped) without it.
#
# Usage: test_make_photos.sh BUILD_DIR   (holding tools/)
set -uo pipefail

BUILD="$(cd "${1:?usage: test_make_photos.sh BUILD_DIR}" && pwd)"
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
RECORD="$BUILD/tools/sluice-record"
PY=/usr/bin/python3
MK="$SRC/tools/make_photos.py"
[ -x "$RECORD" ] || { echo "no executable $RECORD" >&2; exit 1; }
if ! "$PY" -c "import PIL" 2>/dev/null; then
    echo "skipped: $PY has no PIL (apt-get install python3-pil)"
    exit 77
fi
T="$(mktemp -d)"
trap 'rm -rf "$T"' EXIT
cd "$T"
PASSED=0

fail() {
    echo "FAIL: $*" >&2
    echo "--- stdout:" >&2; head -c 3000 "$T/out" >&2 2>/dev/null
    echo "--- stderr:" >&2; tail -c 3000 "$T/err" >&2 2>/dev/null
    echo "$PASSED passed, 1 failed" >&2
    exit 1
}
pass() { PASSED=$((PASSED + 1)); echo "ok $PASSED - $1"; }
run() {
    local want="$1" name="$2"
    shift 2
    "$@" >"$T/out" 2>"$T/err" </dev/null
    local rc=$?
    [ "$rc" = "$want" ] || fail "$name: exit status $rc, expected $want"
}

# stand-ins for four of the photographs (three colour, one gray), of their
# real sizes and formats
"$PY" - <<'PY' || fail "drawing the stand-in photographs"
import os, random
from PIL import Image
os.makedirs("src")
r = random.Random(1)
for name, size, mode in [("chelsea.png", (451, 300), "RGB"), ("rocket.jpg", (640, 427), "RGB"),
                         ("retina.jpg", (1411, 1411), "RGB"), ("coins.png", (384, 303), "L")]:
    im = Image.new(mode, size)
    px = im.load()
    for y in range(0, size[1], 3):
        for x in range(0, size[0], 3):
            v = ((x * 7 + y * 3) % 256, (x * y) % 256, r.randrange(256))
            px[x, y] = v if mode == "RGB" else v[0]
    im.save(os.path.join("src", name))
open("src/notes.txt", "w").write("not a photograph")
PY

run 0 "make_photos.py" "$PY" "$MK" a --count 200 --seed 5 --source src --jobs 2
grep -q "src lacks astronaut.png, brick.png, .*, motorcycle_right.png: 4 classes$" "$T/err" ||
    fail "make_photos.py: the missing photographs are not named"
grep -q "a: 200 images in 4 classes (" "$T/err" || fail "make_photos.py: no summary line"
"$PY" - <<'PY' || fail "the tree is not as described (see above)"
import glob, json, os
from PIL import Image
classes = ["chelsea", "coins", "retina", "rocket"]   # SOURCES order, the missing left out
assert sorted(os.listdir("a")) == [".photos.json"] + classes, os.listdir("a")
seen, png, gray = 0, 0, 0
for i in range(200):
    cls = classes[i % 4]
    hits = glob.glob("a/%s/%07d.*" % (cls, i))
    assert len(hits) == 1, (i, hits)
    raw = open(hits[0], "rb").read()
    im = Image.open(hits[0])
    im.load()
    if hits[0].endswith(".png"):
        assert raw[:8] == b"\x89PNG\r\n\x1a\n" and im.format == "PNG", hits[0]
        png += 1
    else:
        assert hits[0].endswith(".jpg") and raw[:3] == b"\xff\xd8\xff" and im.format == "JPEG", hits[0]
    assert im.mode in ("RGB", "L"), (hits[0], im.mode)
    gray += im.mode == "L"
    assert 224 <= min(im.size) <= 500, (hits[0], im.size)
    seen += 1
assert seen == 200 and sum(len(os.listdir("a/" + c)) for c in classes) == 200
# about 5 % of each; the seed fixes the draw, the bounds only say "some, not many"
assert 2 <= png <= 25 and 2 <= gray <= 25, (png, gray)
m = json.load(open("a/.photos.json"))
assert (m["seed"], m["count"], m["classes"]) == (5, 200, classes), m
assert (m["png"], m["grayscale"], m["jpeg"] + m["png"]) == (png, gray, 200), m
assert 224 <= m["shorter_side"][0] <= m["shorter_side"][1] <= 500, m
PY
pass "make_photos.py: layout, sizes, formats by magic, PNG and grayscale shares, manifest"

run 0 "make_photos.py again, one process" "$PY" "$MK" b --count 200 --seed 5 --source src --jobs 1
diff -r a b >/dev/null || fail "the same seed gave other files with --jobs 1"
run 0 "make_photos.py, another seed" "$PY" "$MK" c --count 200 --seed 6 --source src
cmp -s a/rocket/0000003.jpg c/rocket/0000003.jpg 2>/dev/null && fail "another seed gave the same image 3"
pass "make_photos.py: the same seed gives the same bytes whatever --jobs; another seed, others"

run 2 "an existing tree" "$PY" "$MK" a --count 5 --source src
grep -q "a exists and is not an empty folder: not written over" "$T/err" || fail "an existing tree: message"
for n in 0 -3 10000001; do
    run 2 "--count $n" "$PY" "$MK" d --count "$n" --source src
    grep -q -- "--count must be between 1 and 10000000" "$T/err" || fail "--count $n: message"
done
[ -e d ] || [ -e d.partial ] && fail "a refused run left d"
run 1 "a --source without the photographs" "$PY" "$MK" d --count 5 --source "$T"
grep -q "holds none of the photographs" "$T/err" || fail "no photographs: message"
[ -e d ] || [ -e d.partial ] && fail "a failed run left d"
pass "make_photos.py: an existing tree, bad --count, no photographs refused, nothing left"

# offline: apt-get download fails; the message says what to install
mkdir fakebin
printf '#!/bin/sh\necho "E: Failed to fetch (offline)" >&2\nexit 100\n' >fakebin/apt-get
chmod +x fakebin/apt-get
PATH="$T/fakebin:$PATH" run 1 "offline" "$PY" "$MK" d --count 5 --cache "$T/cache"
grep -q "cannot get the photographs of python3-skimage: apt-get download failed (exit 100): E: Failed to fetch (offline)" \
    "$T/err" || fail "offline: no reason"
grep -q "apt-get install python3-skimage) and pass --source /usr/lib/python3/dist-packages/skimage/data" "$T/err" ||
    fail "offline: what to install is not said"
[ -e d ] || [ -e d.partial ] && fail "offline: left d"
pass "make_photos.py offline: apt-get's failure and what to install are said, nothing left"
mkdir badcache
echo "not a deb" >badcache/python3-skimage_0.19.3-8_all.deb
run 1 "a damaged .deb in the cache" "$PY" "$MK" d --count 5 --cache "$T/badcache"
grep -q "dpkg-deb -x $T/badcache/python3-skimage_0.19.3-8_all.deb failed: .*not a Debian format archive" "$T/err" ||
    fail "a damaged .deb: no reason"
grep -q "(a partial download? remove it and run again)" "$T/err" || fail "a damaged .deb: no advice"
[ -e d ] || [ -e d.partial ] || [ -e badcache/unpacked ] || [ -e badcache/unpacked.tmp ] &&
    fail "a damaged .deb: left d or an unpacked folder"
pass "make_photos.py: a damaged .deb in the cache is named, with what to do"

# the tree through sluice-record: every image converted, labels by class
run 0 "convert images of the photo set" "$RECORD" convert images a --output-dir s --shards 2
[ "$(awk -F'\t' '{s += $2} END {print s}' "$T/out")" = 200 ] || fail "convert images: not 200 records"
grep -q "200 images (.* JPEG, .* PNG) in 4 classes, labels 0..3$" "$T/err" || fail "convert images: summary"
grep -q "outside any class folder" "$T/err" && fail "convert images counted .photos.json as a loose file"
run 0 "stats --job of the photo set" "$RECORD" stats --job s.json s/train-00000-of-00002.tfrecord \
    s/train-00001-of-00002.tfrecord
grep -q '"map": \[{"op": "decode_image", "feature": "image", "channels": 3},' s.json || fail "stats --job: no map"
pass "the photo set converts (200 records, 4 labels) and stats --job writes its decode_image step"

# ---- tools/make_damaged_images.py: the damaged-image corpus ----
DMG="$SRC/tools/make_damaged_images.py"
run 0 "make_damaged_images.py" "$PY" "$DMG" dm
grep -q "^make_damaged_images.py: dm: 62 files (26 valid, 36 damaged), manifest.json$" "$T/err" ||
    fail "make_damaged_images.py: no summary"
run 0 "make_damaged_images.py again" "$PY" "$DMG" dm2
diff -r dm dm2 >/dev/null || fail "make_damaged_images.py: two runs of the same seed differ"
run 0 "make_damaged_images.py, another seed" "$PY" "$DMG" dm3 --seed 3
cmp -s dm/ok_baseline.jpg dm3/ok_baseline.jpg && fail "another seed gave the same picture"
run 2 "make_damaged_images.py over a tree" "$PY" "$DMG" dm
grep -q "dm exists and is not an empty folder: not written over" "$T/err" || fail "damaged over a tree: message"
"$PY" - <<'PY' || fail "the damaged corpus is not as its manifest says (see above)"
import json, os, struct
from PIL import Image
m = json.load(open("dm/manifest.json"))
files = m["files"]
assert sorted(os.listdir("dm")) == sorted(list(files) + ["manifest.json"]), sorted(os.listdir("dm"))
for name, e in files.items():
    data = open("dm/" + name, "rb").read()
    assert e["bytes"] == len(data) and e["what"], (name, e)
    assert e["valid"] == name.startswith("ok_"), name
    if e["valid"]:  # every well-formed file loads, at its size
        im = Image.open("dm/" + name)
        im.load()
        assert im.size == (e["width"], e["height"]), (name, im.size, e)
        assert e["channels"] in (1, 2, 3, 4), (name, e)
for name in ("ok_baseline.jpg", "ok_progressive.jpg", "trunc_soi.jpg", "bad_sof_huge.jpg", "bad_after_soi.jpg"):
    assert open("dm/" + name, "rb").read()[:3] == b"\xff\xd8\xff", name
assert open("dm/ok_progressive.jpg", "rb").read().find(b"\xff\xc2") > 0, "not progressive (no SOF2)"
assert Image.open("dm/ok_cmyk.jpg").mode == "CMYK" and Image.open("dm/ok_gray16.png").mode in ("I", "I;16")
# the oversized headers say what the manifest says, on small files
d = open("dm/bad_sof_huge.jpg", "rb").read()
i = d.find(b"\xff\xc0")
assert struct.unpack(">HH", d[i + 5:i + 9]) == (60000, 60000) and len(d) < 10000, len(d)
p = open("dm/bad_huge.png", "rb").read()
assert p[12:16] == b"IHDR" and struct.unpack(">II", p[16:24]) == (60000, 60000) and len(p) < 20000
assert os.path.getsize("dm/empty.jpg") == 0
PY
pass "make_damaged_images.py: 62 files as the manifest says, well-formed ones load, same bytes for a seed"
mkdir -p dt/damaged && cp dm/*.jpg dm/*.png dt/damaged/ && rm dt/damaged/{empty.jpg,noise.png,text.jpg}
run 0 "convert images of the damaged corpus" "$RECORD" convert images dt --output-dir ds
[ "$(cut -f2 "$T/out")" = 59 ] || fail "the damaged corpus: not 59 records"
cp dm/text.jpg dt/damaged/
run 1 "convert images of the damaged corpus with text.jpg" "$RECORD" convert images dt --output-dir ds2
grep -q "dt/damaged/text.jpg: not a JPEG or PNG image" "$T/err" || fail "text.jpg: not refused by name"
pass "convert images takes the 59 corpus files that start as images, refuses the others by name"

echo "$PASSED passed, 0 failed"
