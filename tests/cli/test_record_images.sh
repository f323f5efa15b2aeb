#!/usr/bin/env bash
# CLI tests of `sluice-record convert images` and of the map steps that
# `sluice-record stats --job` writes for image features (issue #27 section 2).
#
# The trees are built here by Python's standard library: "images" are a few
# bytes after a JPEG SOI or PNG signature (the converter checks magic bytes
# only and copies the file untouched), so every payload is known. The shards
# are read back with `sluice-record cat --decode example` and each record's
# image compared byte for byte with its file, with its label, id and class.
# Hostile trees (none, empty, no class, a class without images, a file that
# is not an image, unreadable, a FIFO, nested folders, link loops) and
# options (huge, negative, repeated) are refused with the path named and
# nothing left written; SIGINT and SIGTERM remove the partial shards.
#
# Usage: test_record_images.sh BUILD_DIR   (holding tools/)
set -uo pipefail

BUILD="$(cd "${1:?usage: test_record_images.sh BUILD_DIR}" && pwd)"
BIN="$BUILD/tools/sluice-record"
[ -x "$BIN" ] || { echo "no executable $BIN" >&2; exit 1; }
T="$(mktemp -d)"
CPID=""
cleanup() {
    [ -n "$CPID" ] && kill -KILL "$CPID" 2>/dev/null
    chmod -R u+rwx "$T" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
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

# run WANT_RC NAME CMD...: stdout in $T/out, stderr in $T/err and, without
# the time stamps of log lines, in $T/msg
run() {
    local want="$1" name="$2"
    shift 2
    "$@" >"$T/out" 2>"$T/err" </dev/null
    local rc=$?
    sed -E 's/^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]{12}Z //' "$T/err" >"$T/msg"
    [ "$rc" = "$want" ] || fail "$name: exit status $rc, expected $want"
}

# same FILE TEXT NAME: FILE holds exactly TEXT
same() {
    printf '%s' "$2" >"$T/want"
    cmp -s "$T/want" "$1" || { diff -u "$T/want" "$1" >&2; fail "$3: $1 differs"; }
}

cat >"$T/mk.py" <<'PY'
"""Image-like files (a JPEG SOI or PNG signature, then seeded bytes)."""
import os, random

PNG = b"\x89PNG\r\n\x1a\n"

def fake(path, kind, seed, size=None):
    r = random.Random(seed)
    n = size if size is not None else r.randrange(20, 400)
    head = b"\xff\xd8\xff\xe0" if kind == "jpeg" else PNG
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "wb") as f:
        f.write(head + bytes(r.randrange(256) for _ in range(n)))
PY
mk() { python3 -c "import sys; sys.path.insert(0, '$T'); from mk import *; $1" || fail "mk: $1"; }

# check DIR FILES...: the records of the shards FILES (cat --decode example)
# are exactly the tree's images in order: ids 0.., labels from the sorted
# classes, the class name, the image byte for byte; EXPECT lists
# "class/name" in record order and SHARDS the shard of each record.
check() {
    local tree="$1" expect="$2" shards="$3"
    shift 3
    "$BIN" cat --decode example "$@" >"$T/cat.jsonl" 2>"$T/err" || fail "cat --decode example $*"
    python3 - "$tree" "$expect" "$shards" "$T/cat.jsonl" <<'PY' || fail "check $tree: the records are not the tree's images"
import base64, json, sys
tree, expect, shards, cat = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4]
lines = [json.loads(l) for l in open(cat)]
assert len(lines) == len(expect), (len(lines), len(expect))
classes = sorted({e.split("/")[0] for e in expect}, key=lambda s: s.encode())
for i, (l, e, s) in enumerate(zip(lines, expect, shards)):
    f = l["example"]["features"]["feature"]
    assert list(f) == ["image", "label", "id", "class"], list(f)
    cls = e.split("/")[0]
    assert f["id"]["int64List"]["value"] == [str(i)], (i, f["id"])
    assert f["label"]["int64List"]["value"] == [str(classes.index(cls))], (i, e, f["label"])
    assert base64.b64decode(f["class"]["bytesList"]["value"][0]) == cls.encode(), (i, f["class"])
    want = open(tree + "/" + e, "rb").read()
    assert base64.b64decode(f["image"]["bytesList"]["value"][0]) == want, (i, e)
    assert l["file"].endswith(s), (i, l["file"], s)
PY
}

# ---- help, and the mode named in the usage errors ----
run 0 "convert --help" "$BIN" convert --help
grep -q "^  or:  sluice-record convert images --output-dir DIR \[OPTION\]... TREE$" "$T/out" ||
    fail "convert --help: no images usage line"
grep -q "^images: an ImageFolder TREE" "$T/out" || fail "convert --help: no images paragraph"
run 0 "convert images --help" "$BIN" convert images --help
grep -q "^images: an ImageFolder TREE" "$T/out" || fail "convert images --help: not convert's help"
run 2 "convert bad mode" "$BIN" convert tiff
same "$T/msg" "sluice-record: convert: unknown mode 'tiff' (idx, jsonl or images)
Try 'sluice-record convert --help' for more information.
" "bad mode message"
pass "convert --help documents images; the modes named"

# ---- a tree: classes sorted bytewise, files sorted, others skipped ----
mk '
fake("t/b/2.jpg", "jpeg", 1)
fake("t/b/10.jpg", "jpeg", 2)
fake("t/b/a.PNG", "png", 3)
fake("t/a/z.jpeg", "jpeg", 4)
fake("t/a/y.png", "jpeg", 5)       # a JPEG named .png: taken, by its bytes
fake("t/c d/x.JPG", "png", 6)      # a PNG named .JPG
fake("t/c d/empty-ok.jpg", "jpeg", 7, size=0)
fake("t/B/q.jpg", "jpeg", 8)       # "B" sorts before "a" (bytewise)
fake("t/.hidden/h.jpg", "jpeg", 9) # a hidden folder is no class
fake("t/a/.x.jpg", "jpeg", 10)     # a hidden file is skipped
open("t/b/notes.txt", "w").write("not an image")
open("t/a/README", "w").write("not an image")
open("t/loose.jpg", "wb").write(b"\xff\xd8\xffloose") # outside any class
open("t/.notes.json", "w").write("{}")                 # hidden: not even counted
'
EXPECT="B/q.jpg a/y.png a/z.jpeg b/10.jpg b/2.jpg b/a.PNG c_d/empty-ok.jpg c_d/x.JPG"
# (the class "c d" has a blank: the check below reads names split on blanks,
# so it gets a copy of the tree where that class is c_d)
run 0 "convert images" "$BIN" convert images t --output-dir o --shards 3 --index
same "$T/out" "o/train-00000-of-00003.tfrecord	3
o/train-00001-of-00003.tfrecord	3
o/train-00002-of-00003.tfrecord	2
" "convert images stdout"
same "$T/msg" "sluice-record: info: convert images: 8 images (6 JPEG, 2 PNG) in 4 classes, labels 0..3
sluice-record: warning: convert images: skipped 3 file(s) not named *.jpg, *.jpeg or *.png, or named .* (one: t/a/.x.jpg)
sluice-record: warning: convert images: skipped 1 file(s) in t itself, outside any class folder
" "convert images messages"
same <(ls -A o) "train-00000-of-00003.tfrecord
train-00000-of-00003.tfrecord.idx
train-00001-of-00003.tfrecord
train-00001-of-00003.tfrecord.idx
train-00002-of-00003.tfrecord
train-00002-of-00003.tfrecord.idx
" "convert images files"
cp -r t tc && mv "tc/c d" tc/c_d
"$BIN" convert images tc --output-dir oc --shards 3 >/dev/null 2>&1 || fail "convert images tc"
check tc "$EXPECT" "00000-of-00003.tfrecord 00000-of-00003.tfrecord 00000-of-00003.tfrecord
    00001-of-00003.tfrecord 00001-of-00003.tfrecord 00001-of-00003.tfrecord
    00002-of-00003.tfrecord 00002-of-00003.tfrecord" oc/train-0000{0,1,2}-of-00003.tfrecord
for s in 0 1 2; do
    cmp -s "o/train-0000$s-of-00003.tfrecord" "oc/train-0000$s-of-00003.tfrecord" ||
        [ "$s" = 2 ] || fail "shard $s differs between t and tc"
done
"$BIN" cat --decode example o/train-00002-of-00003.tfrecord >"$T/out" 2>"$T/err" || fail "cat shard 2 of t"
python3 -c '
import base64, json
l = [json.loads(x) for x in open("'"$T/out"'")]
assert [base64.b64decode(x["example"]["features"]["feature"]["class"]["bytesList"]["value"][0]) for x in l] == [b"c d"] * 2, l
' || fail "the class name with a blank is not in the records"
"$BIN" verify o/*.tfrecord >/dev/null 2>&1 || fail "verify the shards"
python3 -c '
idx = open("o/train-00001-of-00003.tfrecord.idx").read().split("\n")
assert len(idx) == 4 and idx[0].startswith("0 ") and idx[3] == "", idx
' || fail "the index of shard 1"
pass "convert images: ids, labels, classes in bytewise order, payloads byte for byte, index files"

# more shards than images: empty shards; gzip; --prefix
run 0 "convert images gzip, 10 shards" "$BIN" convert images tc -o oz -n 10 -c gzip --prefix val
[ "$(ls -A oz | wc -l)" = 10 ] || fail "10 shards: $(ls -A oz)"
grep -c "	0$" "$T/out" | grep -qx 2 || fail "10 shards of 8 images: not 2 empty ones"
check tc "$EXPECT" "$(for _ in $EXPECT; do printf 'gz '; done)" oz/val-000{00..09}-of-00010.tfrecord.gz
pass "convert images: gzip, --prefix, more shards than images (empty shards)"

# ---- options: hostile values, repeats ----
# usage RC NAME MESSAGE CMD...: exit status 2, the message, nothing written
usage() {
    local name="$1" msg="$2"
    shift 2
    run 2 "$name" "$@"
    same "$T/msg" "sluice-record: convert: $msg
Try 'sluice-record convert --help' for more information.
" "$name"
    [ -e u ] && fail "$name: created u"
    pass "$name"
}
usage "--shards 0" "invalid value '0' for --shards: must be between 1 and 99999" \
    "$BIN" convert images tc -o u --shards 0
usage "--shards -1" "invalid value '-1' for --shards: not a non-negative integer" \
    "$BIN" convert images tc -o u --shards -1
usage "--shards 100000" "invalid value '100000' for --shards: must be between 1 and 99999" \
    "$BIN" convert images tc -o u --shards 100000
usage "--shards 2^64" "invalid value '18446744073709551616' for --shards: not a non-negative integer" \
    "$BIN" convert images tc -o u --shards 18446744073709551616
usage "--shards 3x" "invalid value '3x' for --shards: not a non-negative integer" \
    "$BIN" convert images tc -o u --shards 3x
usage "--max-record-bytes 0" "invalid value '0' for --max-record-bytes: must be between 1 and 4294967296" \
    "$BIN" convert images tc -o u --max-record-bytes 0
usage "--max-record-bytes 4 GiB + 1" \
    "invalid value '4294967297' for --max-record-bytes: must be between 1 and 4294967296" \
    "$BIN" convert images tc -o u --max-record-bytes 4294967297
usage "--compression auto" "invalid compression 'auto' (none, gzip or zlib)" \
    "$BIN" convert images tc -o u --compression auto
usage "--prefix with /" "invalid --prefix 'a/b': a non-empty name without '/'" \
    "$BIN" convert images tc -o u --prefix a/b
usage "no TREE" "images: missing TREE (the ImageFolder folder: TREE/CLASS/IMAGE)" "$BIN" convert images -o u
usage "no --output-dir" "images: missing --output-dir" "$BIN" convert images tc
usage "two TREEs" "unexpected argument 't'" "$BIN" convert images tc t -o u
usage "an empty TREE name" "images: empty TREE name" "$BIN" convert images "" -o u
usage "an unknown option" "unrecognized option '--recursive'" "$BIN" convert images tc -o u --recursive
usage "--index with a value" "option '--index' doesn't allow an argument" "$BIN" convert images tc -o u --index=1
# repeated: the last one counts, as in every sluice-record option
run 0 "repeated options" "$BIN" convert images tc -o u -o r --shards 5 --shards 2 --prefix x --prefix y
same "$T/out" "r/y-00000-of-00002.tfrecord	4
r/y-00001-of-00002.tfrecord	4
" "repeated options: the last of each"
[ -e u ] && fail "repeated -o: the first one was created"
pass "repeated options: the last one counts"

# ---- hostile trees: refused with the path named, nothing left ----
# refused NAME MESSAGE TREE [OPTION]...: exit 1, the last message, no shard
refused() {
    local name="$1" msg="$2" tree="$3"
    shift 3
    rm -rf x
    run 1 "$name" ${RUNAS[@]+"${RUNAS[@]}"} "$BIN" convert images "$tree" -o x "$@"
    tail -1 "$T/msg" >"$T/last"
    same "$T/last" "sluice-record: error: convert images: $msg
" "$name"
    [ -z "$(ls -A x 2>/dev/null)" ] || fail "$name: left $(ls -A x)"
    pass "$name"
}
refused "no such TREE" "opendir(nope): No such file or directory" nope
: >afile
refused "TREE is a file" "opendir(afile): Not a directory" afile
mkdir empty
refused "an empty TREE" "empty holds no class folder (expected TREE/CLASS/IMAGE.jpg)" empty
mk 'fake("flat/a.jpg", "jpeg", 1); fake("flat/b.png", "png", 2)'
refused "images but no class folder" "flat holds no class folder (expected TREE/CLASS/IMAGE.jpg)" flat
mk 'fake("noimg/a/1.jpg", "jpeg", 1); fake("noimg/b/1.txt", "jpeg", 2)'
mkdir noimg/c
refused "a class without images" "class folder noimg/b holds no .jpg, .jpeg or .png file" noimg
rm noimg/b/1.txt
refused "an empty class folder" "class folder noimg/b holds no .jpg, .jpeg or .png file" noimg
# a bad file after good ones: the shards written so far are removed
mk '
for i in range(50):
    fake("bad/a/%02d.jpg" % i, "jpeg", i)
open("bad/a/50.jpg", "wb").write(b"GIF89a not a jpeg")
fake("bad/b/0.png", "png", 1)
'
refused "a file that is not an image" \
    "bad/a/50.jpg: not a JPEG or PNG image (its first bytes are neither FF D8 FF nor PNG's signature)" bad -n 2
: >bad/a/50.jpg
refused "an empty image file" "bad/a/50.jpg: not a JPEG or PNG image (an empty file)" bad
printf '\xff\xd8' >bad/a/50.jpg
refused "a cut JPEG signature" \
    "bad/a/50.jpg: not a JPEG or PNG image (its first bytes are neither FF D8 FF nor PNG's signature)" bad
printf '\x89PNG\r\n\x1a' >bad/a/50.jpg
refused "a cut PNG signature" \
    "bad/a/50.jpg: not a JPEG or PNG image (its first bytes are neither FF D8 FF nor PNG's signature)" bad
rm bad/a/50.jpg
ln -s gone.jpg bad/a/50.jpg
refused "a dangling link named .jpg" "stat(bad/a/50.jpg): No such file or directory" bad
rm bad/a/50.jpg
ln -s gone bad/a/50.txt # named like no image: skipped, not refused
mkfifo bad/b/fifo.jpg
refused "a FIFO named .jpg (never opened)" "bad/b/fifo.jpg: not a regular file" bad
rm bad/b/fifo.jpg
# unreadable files: root reads any file, so as root these run as nobody
RUNAS=()
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null &&
    setpriv --reuid=nobody --regid=nogroup --clear-groups true 2>/dev/null; then
    RUNAS=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
    chmod 777 "$T" # nobody writes x here
fi
if [ "$(id -u)" != 0 ] || [ ${#RUNAS[@]} -gt 0 ]; then
    mk 'fake("bad/b/1.jpg", "jpeg", 3)'
    chmod 000 bad/b/1.jpg
    refused "an unreadable image" "open(bad/b/1.jpg): Permission denied" bad
    rm -f bad/b/1.jpg
    chmod 000 bad/b
    refused "an unreadable class folder" "opendir(bad/b): Permission denied" bad
    chmod 755 bad/b
    chmod 000 bad
    refused "an unreadable TREE" "opendir(bad): Permission denied" bad
    chmod 755 bad
else
    echo "# skipped: unreadable files (root, and no setpriv to run as nobody)"
fi
RUNAS=()
mk 'fake("bad/b/sub/1.jpg", "jpeg", 3)'
refused "a folder inside a class folder" \
    "bad/b/sub: a folder inside a class folder (convert images reads TREE/CLASS/FILE, one level: move its images up or make it a class of its own)" bad
rm -r bad/b/sub
ln -s .. bad/b/up # a link loop: TREE/b/up is TREE
refused "a link back up inside a class" \
    "bad/b/up: a folder inside a class folder (convert images reads TREE/CLASS/FILE, one level: move its images up or make it a class of its own)" bad
rm bad/b/up
ln -s . bad/loop # a class folder that is TREE itself
refused "a class folder linked to TREE" \
    "bad/loop/a: a folder inside a class folder (convert images reads TREE/CLASS/FILE, one level: move its images up or make it a class of its own)" bad
rm bad/loop
mk 'fake("bad/b/big.png", "png", 4, size=3000)'
refused "an image over --max-record-bytes" \
    "bad/b/big.png: 3008 bytes: its record would be over the limit of 3000 bytes (--max-record-bytes)" bad \
    --max-record-bytes 3000
refused "a record over --max-record-bytes" \
    "bad/b/big.png: its record of 3075 bytes is over the limit of 3008 bytes (--max-record-bytes)" bad \
    --max-record-bytes 3008
ln -s a bad/linked          # a class folder that is a link: followed
ln -s ../a/07.jpg bad/b/l.jpg # an image that is a link: followed
run 0 "links to images and class folders are followed" "$BIN" convert images bad -o x --max-record-bytes 3075
same "$T/out" "x/train-00000-of-00001.tfrecord	103
" "bad, repaired"
"$BIN" cat --decode example x/train-00000-of-00001.tfrecord >"$T/out" 2>"$T/err" || fail "cat bad, repaired"
python3 - "$T/out" <<'PY' || fail "links: the records are not the linked files"
import base64, json, sys
recs = [json.loads(l)["example"]["features"]["feature"] for l in open(sys.argv[1])]
img = lambda r: base64.b64decode(r["image"]["bytesList"]["value"][0])
lab = lambda r: r["label"]["int64List"]["value"][0]
a07 = open("bad/a/07.jpg", "rb").read()
assert img(recs[7]) == a07 and img(recs[52]) == a07, "b/l.jpg is a/07.jpg"  # b: 0.png, big.png, l.jpg
assert [lab(r) for r in recs] == ["0"] * 50 + ["1"] * 3 + ["2"] * 50, [lab(r) for r in recs]
assert [img(r) for r in recs[53:]] == [img(r) for r in recs[:50]], "linked/ is a/"
PY
pass "links to image files and to class folders are followed"
mkdir under-a-file && : >under-a-file/f
run 1 "--output-dir under a file" "$BIN" convert images bad -o under-a-file/f/sub
grep -q "mkdir(under-a-file/f/sub): Not a directory" "$T/msg" || fail "--output-dir under a file: message"
pass "--output-dir under a file: exit 1, mkdir named"

# ---- SIGINT / SIGTERM: the partial shards are removed ----
mkdir -p sig/a
head -c $((1 << 20)) /dev/urandom >sig/one
printf '\xff\xd8\xff' | dd of=sig/one conv=notrunc 2>/dev/null
for i in $(seq 600); do ln sig/one "sig/a/$i.jpg"; done # 600 MiB of links to one file
for s in TERM INT; do
    want=$([ $s = TERM ] && echo 143 || echo 130)
    rm -rf so
    "$BIN" convert images sig -o so -n 4 -c gzip >/dev/null 2>sig.err &
    CPID=$!
    for _ in $(seq 100); do
        [ -n "$(ls -A so 2>/dev/null)" ] && break
        sleep 0.05
    done
    sleep 0.2
    kill -s $s $CPID
    wait $CPID
    rc=$?
    CPID=""
    [ "$rc" = "$want" ] || fail "SIG$s: exit status $rc, expected $want ($(cat sig.err))"
    [ -z "$(ls -A so)" ] || fail "SIG$s left files: $(ls -A so)"
    grep -q "interrupted: partial outputs removed" sig.err || fail "SIG$s: no message"
    pass "convert images SIG$s: exit $want, outputs removed"
done

# ---- stats --job: map steps for the image feature ----
run 0 "stats --job on converted images" "$BIN" stats --job img.json oc/train-00000-of-00003.tfrecord \
    oc/train-00001-of-00003.tfrecord oc/train-00002-of-00003.tfrecord
same img.json '{"name": "img",
 "files": ["oc/train-00000-of-00003.tfrecord",
           "oc/train-00001-of-00003.tfrecord",
           "oc/train-00002-of-00003.tfrecord"],
 "format": "tfrecord",
 "features": {"class": {"dtype": "bytes", "shape": []},
              "id": {"dtype": "int64", "shape": []},
              "image": {"dtype": "bytes", "shape": []},
              "label": {"dtype": "int64", "shape": []}},
 "map": [{"op": "decode_image", "feature": "image", "channels": 3},
         {"op": "resize", "feature": "image", "size": [256, 256], "antialias": true},
         {"op": "center_crop", "feature": "image", "size": [224, 224]}],
 "global_batch_size": 32}
' "the job of converted images"
same "$T/msg" 'sluice-record: info: stats --job: feature "image" holds a JPEG or PNG image in every record (6 JPEG, 2 PNG): map steps decode_image (RGB), resize 256x256, center_crop 224x224 written; the sizes are placeholders
sluice-record: info: stats --job: wrote img.json: 4 features of 3 files; global_batch_size 32 is a placeholder
' "the job of converted images: messages"
python3 -c 'import json; json.load(open("img.json"))' || fail "img.json is not JSON"
# the skeleton loads as it is: the feeder checks its map and plans it
"$BUILD/feeder/sluice-feeder" plan --job img.json --workers 1 --replicas 1 >"$T/plan.out" 2>&1 ||
    fail "sluice-feeder plan refused the skeleton: $(cat "$T/plan.out")"
grep -q "8 records" "$T/plan.out" || fail "sluice-feeder plan of the skeleton: $(cat "$T/plan.out")"
pass "stats --job: an image feature gets decode_image, resize, center_crop; the feeder plans the skeleton"

# features that hold images, but not one in every record: no step; two
# image features: steps for each, in key order
cat >"$T/ex.py" <<'PY'
import struct, sys
sys.path.insert(0, sys.argv[1])
def uv(v):
    o = b""
    while v >= 0x80:
        o += bytes([v & 0x7F | 0x80]); v >>= 7
    return o + bytes([v])
def fld(n, p):
    return uv(n << 3 | 2) + uv(len(p)) + p
def ex(feats):
    body = b""
    for k, vals in feats:
        body += fld(1, fld(1, k.encode()) + fld(2, fld(1, b"".join(fld(1, v) for v in vals))))
    return fld(1, body)
def crc(d):  # CRC-32C, masked as TFRecord does
    c = 0xFFFFFFFF
    for b in d:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    c ^= 0xFFFFFFFF
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF
def frame(p):
    n = struct.pack("<Q", len(p))
    return n + struct.pack("<I", crc(n)) + p + struct.pack("<I", crc(p))
J, P = b"\xff\xd8\xff\xe0jfif", b"\x89PNG\r\n\x1a\nihdr"
recs = []
for i in range(6):
    recs.append(ex([("b_photo", [J if i % 2 else P]),   # every record: steps
                    ("a_thumb", [P]),                    # every record: steps
                    ("some", [J] if i < 5 else [b"x"]),  # one is not an image
                    ("pair", [J, J]),                    # two a record
                    ("opt", [J] if i % 3 else []),       # a record without
                    ("text", [b"plain"])]))
open("two.tfrecord", "wb").write(b"".join(frame(r) for r in recs))
PY
python3 "$T/ex.py" "$T" || fail "ex.py"
run 0 "stats --job, several bytes features" "$BIN" stats --job two.json two.tfrecord
same two.json '{"name": "two",
 "files": ["two.tfrecord"],
 "format": "tfrecord",
 "features": {"a_thumb": {"dtype": "bytes", "shape": []},
              "b_photo": {"dtype": "bytes", "shape": []},
              "opt": {"dtype": "bytes", "varlen": true},
              "pair": {"dtype": "bytes", "shape": [2]},
              "some": {"dtype": "bytes", "shape": []},
              "text": {"dtype": "bytes", "shape": []}},
 "map": [{"op": "decode_image", "feature": "a_thumb", "channels": 3},
         {"op": "resize", "feature": "a_thumb", "size": [256, 256], "antialias": true},
         {"op": "center_crop", "feature": "a_thumb", "size": [224, 224]},
         {"op": "decode_image", "feature": "b_photo", "channels": 3},
         {"op": "resize", "feature": "b_photo", "size": [256, 256], "antialias": true},
         {"op": "center_crop", "feature": "b_photo", "size": [224, 224]}],
 "global_batch_size": 32}
' "the job of several bytes features"
same "$T/msg" 'sluice-record: info: stats --job: feature "opt" holds 0 to 1 values a record: written as varlen
sluice-record: info: stats --job: feature "a_thumb" holds a JPEG or PNG image in every record (0 JPEG, 6 PNG): map steps decode_image (RGB), resize 256x256, center_crop 224x224 written; the sizes are placeholders
sluice-record: info: stats --job: feature "b_photo" holds a JPEG or PNG image in every record (3 JPEG, 3 PNG): map steps decode_image (RGB), resize 256x256, center_crop 224x224 written; the sizes are placeholders
sluice-record: info: stats --job: feature "opt" holds 4 JPEG/PNG images but not one image in each of the 6 records: no decode_image step written
sluice-record: info: stats --job: feature "pair" holds 12 JPEG/PNG images but not one image in each of the 6 records: no decode_image step written
sluice-record: info: stats --job: feature "some" holds 5 JPEG/PNG images but not one image in each of the 6 records: no decode_image step written
sluice-record: info: stats --job: wrote two.json: 6 features of 1 file; global_batch_size 32 is a placeholder
' "the messages of several bytes features"
pass "stats --job: steps only for features with one image in every record, in key order"

echo "$PASSED passed, 0 failed"
