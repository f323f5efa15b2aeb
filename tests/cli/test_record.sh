#!/usr/bin/env bash
# CLI tests of sluice-record: the real binary on real files.
#
# Usage: test_record.sh BIN_DIR   (the folder holding sluice-record)
#
# Every input is built here by Python (stdlib only: struct, a pure-Python
# CRC-32C, gzip/zlib/tarfile), independently of sluice's own code, and every
# output is compared exactly. The script stops at the first difference,
# showing what was expected and what came, and ends with "N passed, 0 failed".
set -euo pipefail

BIN="${1:?usage: test_record.sh BIN_DIR}/sluice-record"
[ -x "$BIN" ] || { echo "no executable $BIN" >&2; exit 1; }
T="$(mktemp -d)"
trap 'rm -rf "$T"' EXIT
cd "$T"
PASSED=0
FMNIST=/usr/share/datasets/fashion-mnist

fail() {
    echo "FAIL: $*" >&2
    echo "$PASSED passed, 1 failed" >&2
    exit 1
}
pass() {
    PASSED=$((PASSED + 1))
    echo "ok $PASSED - $1"
}

# run CMD...: runs the command, keeping stdout in $T/out, stderr in $T/err,
# and the exit status in $RC (never stops the script).
run() {
    set +e
    "$@" >"$T/out" 2>"$T/err"
    RC=$?
    set -e
}

# expect_rc NAME WANT: the last run's exit status.
expect_rc() {
    if [ "$RC" != "$2" ]; then
        echo "--- stdout:" >&2; head -c 2000 "$T/out" >&2
        echo "--- stderr:" >&2; head -c 2000 "$T/err" >&2
        fail "$1: exit status $RC, expected $2"
    fi
}

# expect_file NAME FILE EXPECTED-TEXT: FILE's content equals the text exactly.
expect_file() {
    local name="$1" file="$2"
    printf '%s' "$3" >"$T/expected"
    if ! cmp -s "$T/expected" "$file"; then
        echo "--- expected vs actual ($file):" >&2
        diff -u "$T/expected" "$file" >&2 || true
        fail "$name: output differs"
    fi
}

# expect_grep NAME FILE REGEX
expect_grep() {
    if ! grep -Eq -- "$3" "$2"; then
        echo "--- $2:" >&2; head -c 2000 "$2" >&2
        fail "$1: no line matching /$3/"
    fi
}

# ok_run NAME WANT_RC CMD...: run, check the status, count a pass.
ok_run() {
    local name="$1" want="$2"
    shift 2
    run "$@"
    expect_rc "$name" "$want"
    pass "$name"
}

# ---- test file builder (independent of sluice) ----
cat >"$T/mk.py" <<'PY'
import struct, sys, gzip, zlib

_table = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
    _table.append(c)

def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF

assert crc32c(b"123456789") == 0xE3069283

def masked(data):
    c = crc32c(data)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF

def record(data):
    head = struct.pack("<Q", len(data))
    return head + struct.pack("<I", masked(head)) + data + struct.pack("<I", masked(data))

def tfrecord(records):
    return b"".join(record(r) for r in records)

def varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)

def ld(field, payload):  # length-delimited field
    return varint(field << 3 | 2) + varint(len(payload)) + payload

def example(features):
    """features: list of (key, kind, values), kind in int64/float/bytes."""
    body = b""
    for key, kind, values in features:
        if kind == "int64":
            lst = ld(1, b"".join(varint(v) for v in values)) if values else b""
            feat = ld(3, lst)
        elif kind == "float":
            lst = ld(1, b"".join(struct.pack("<f", v) for v in values)) if values else b""
            feat = ld(2, lst)
        else:
            feat = ld(1, b"".join(ld(1, v) for v in values))
        body += ld(1, ld(1, key.encode()) + ld(2, feat))
    return ld(1, body)

def idx(type_code, dims, values_bytes):
    return bytes([0, 0, type_code, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + values_bytes

def write(path, data):
    with open(path, "wb") as f:
        f.write(data)
PY
py() { python3 -c "import sys; sys.path.insert(0, '$T'); from mk import *; $1"; }

# ---- top level and usage ----
ok_run "--help" 0 "$BIN" --help
expect_grep "--help text" "$T/out" '^Usage: sluice-record COMMAND'
ok_run "--version" 0 "$BIN" --version
expect_grep "--version text" "$T/out" '^sluice-record [0-9]+\.[0-9]+\.[0-9]+$'
expect_grep "--version commit" "$T/out" '^commit: [0-9a-zA-Z.-]+$'
expect_grep "--version build type" "$T/out" '^build type: '
expect_grep "--version optional parts" "$T/out" '^optional parts: CUDA (yes|no), NCCL (yes|no), ISA-L (yes|no)$'
for cmd in cat count verify index stats convert gen; do
    ok_run "$cmd --help" 0 "$BIN" "$cmd" --help
    expect_grep "$cmd --help text" "$T/out" "^Usage: sluice-record $cmd"
done
ok_run "no command" 2 "$BIN"
ok_run "unknown command" 2 "$BIN" frobnicate
expect_grep "unknown command message" "$T/err" "unknown command 'frobnicate'"
ok_run "cat without files" 2 "$BIN" cat
expect_file "cat without files message" "$T/err" "sluice-record: cat: missing file argument
Try 'sluice-record cat --help' for more information.
"
ok_run "unknown option" 2 "$BIN" count --bogus x
expect_grep "unknown option message" "$T/err" "unrecognized option '--bogus'"
expect_grep "unknown option hint" "$T/err" "^Try 'sluice-record count --help'"
ok_run "bad --format" 2 "$BIN" cat --format=csv x
expect_grep "bad --format message" "$T/err" "invalid format 'csv'"
ok_run "bad --compression" 2 "$BIN" verify --compression=lz4 x
ok_run "bad --decode" 2 "$BIN" cat --decode=json x
ok_run "missing option value" 2 "$BIN" cat x --format
expect_grep "missing option value message" "$T/err" "option '--format' requires an argument"
ok_run "bad number" 2 "$BIN" gen --output-dir d --records 12x
expect_grep "bad number message" "$T/err" "invalid value '12x' for --records"
for v in -1 0x10 " 5" "" 18446744073709551616; do
    ok_run "gen --records '$v'" 2 "$BIN" gen --output-dir d --records "$v"
    expect_grep "gen --records '$v' message" "$T/err" "invalid value '$v' for --records: not a non-negative integer"
done
ok_run "gen --records over its bound" 2 "$BIN" gen --output-dir d --records 1099511627777
expect_grep "gen --records over its bound message" "$T/err" \
    "invalid value '1099511627777' for --records: must be between 0 and 1099511627776"
ok_run "gen --seed 2^64-1" 0 "$BIN" gen --output-dir dmax --records 1 --seed 18446744073709551615
ok_run "gen without --records" 2 "$BIN" gen --output-dir d
ok_run "gen zero shards" 2 "$BIN" gen --output-dir d --records 5 --shards 0
ok_run "convert without mode" 2 "$BIN" convert
ok_run "convert bad mode" 2 "$BIN" convert csv
ok_run "convert idx without --labels" 2 "$BIN" convert idx --images a --output-dir d
ok_run "index --output with two files" 2 "$BIN" index --output o.idx a b
ok_run "--decode example on text" 2 "$BIN" cat --decode example notes.txt
[ ! -e d ] || fail "usage errors must not create outputs"
pass "usage errors create nothing"

# ---- cat, count, verify, index on a 3-record TFRecord ----
py 'write("t3.tfrecord", tfrecord([b"abc", b"def", b"hello, world"]))'
ok_run "cat tfrecord" 0 "$BIN" cat t3.tfrecord
expect_file "cat tfrecord output" "$T/out" '{"file":"t3.tfrecord","index":0,"offset":0,"length":3,"data":"YWJj"}
{"file":"t3.tfrecord","index":1,"offset":19,"length":3,"data":"ZGVm"}
{"file":"t3.tfrecord","index":2,"offset":38,"length":12,"data":"aGVsbG8sIHdvcmxk"}
'
expect_file "cat tfrecord stderr" "$T/err" ""

py 'write("t3.tfrecord.gz", gzip.compress(tfrecord([b"abc", b"def", b"hello, world"])))'
py 'write("t3.zz", zlib.compress(tfrecord([b"abc", b"def", b"hello, world"])))'
py 'write("t3-noext", zlib.compress(tfrecord([b"abc", b"def", b"hello, world"])))'
for f in t3.tfrecord.gz t3.zz t3-noext; do
    ok_run "cat compressed $f" 0 "$BIN" cat "$f"
    sed "s/\"t3.tfrecord\"/\"$f\"/" >"$T/want" <<'EOF'
{"file":"t3.tfrecord","index":0,"offset":0,"length":3,"data":"YWJj"}
{"file":"t3.tfrecord","index":1,"offset":19,"length":3,"data":"ZGVm"}
{"file":"t3.tfrecord","index":2,"offset":38,"length":12,"data":"aGVsbG8sIHdvcmxk"}
EOF
    expect_file "cat compressed $f output" "$T/out" "$(cat "$T/want")
"
done
ok_run "cat --compression none on gzip" 1 "$BIN" cat --compression none t3.tfrecord.gz

ok_run "cat --max-record-bytes" 1 "$BIN" cat --max-record-bytes 5 t3.tfrecord
expect_file "cat --max-record-bytes prints what came before" "$T/out" '{"file":"t3.tfrecord","index":0,"offset":0,"length":3,"data":"YWJj"}
{"file":"t3.tfrecord","index":1,"offset":19,"length":3,"data":"ZGVm"}
'
ok_run "cat missing file (--on-error fail)" 1 "$BIN" cat nonexistent.tfrecord t3.tfrecord
expect_grep "cat missing file message" "$T/err" "open\(nonexistent.tfrecord\): No such file or directory"
[ "$(wc -l <"$T/out")" = 0 ] || fail "cat --on-error=fail stops at the first bad file"
ok_run "cat missing file (--on-error skip-file)" 0 "$BIN" cat --on-error skip-file nonexistent.tfrecord t3.tfrecord
[ "$(wc -l <"$T/out")" = 3 ] || fail "cat --on-error=skip-file goes on with the next file"
expect_grep "skip-file reports the skipped file" "$T/err" "open\(nonexistent.tfrecord\): No such file or directory"
expect_grep "skip-file reports the count" "$T/err" "cat: skipped 1 file\(s\) with data errors"
ok_run "count --on-error skip-file" 0 "$BIN" count --on-error=skip-file nonexistent.tfrecord t3.tfrecord
expect_file "count skip-file output" "$T/out" "t3.tfrecord	3
total	3
"
ok_run "count --on-error fail" 1 "$BIN" count t3.tfrecord nonexistent.tfrecord
ok_run "stats --on-error skip-file" 0 "$BIN" stats --on-error skip-file nonexistent.tfrecord t3.tfrecord
expect_grep "stats skip-file counts the good file" "$T/out" "^records +3$"
ok_run "bad --on-error value" 2 "$BIN" cat --on-error ignore t3.tfrecord
ok_run "verify takes no --on-error" 2 "$BIN" verify --on-error skip-file t3.tfrecord
pass "cat continues after a bad file"

py 'write("empty.tfrecord", b""); write("zero.tfrecord", tfrecord([b""]))'
ok_run "cat zero-length record" 0 "$BIN" cat empty.tfrecord zero.tfrecord
expect_file "cat zero-length record output" "$T/out" '{"file":"zero.tfrecord","index":0,"offset":0,"length":0,"data":""}
'

ok_run "count" 0 "$BIN" count t3.tfrecord t3.tfrecord.gz empty.tfrecord
expect_file "count output" "$T/out" "t3.tfrecord	3
t3.tfrecord.gz	3
empty.tfrecord	0
total	6
"
ok_run "count --json" 0 "$BIN" count --json t3.tfrecord zero.tfrecord
expect_file "count --json output" "$T/out" '{"files":[{"file":"t3.tfrecord","records":3},{"file":"zero.tfrecord","records":1}],"total":4}
'

ok_run "verify good" 0 "$BIN" verify t3.tfrecord t3.tfrecord.gz
expect_file "verify good summary" "$T/out" "verified 2 files, 6 records, 36 bytes: 0 errors
"
expect_file "verify good stderr" "$T/err" ""
# --io and --show-io (issue #25): the path each plain file took, and where
# auto's choice came from; the same summary by either path
for io in map read; do
    ok_run "verify --io=$io" 0 "$BIN" verify --io=$io --show-io t3.tfrecord t3.tfrecord.gz
    expect_file "verify --io=$io summary" "$T/out" "verified 2 files, 6 records, 36 bytes: 0 errors
"
done
expect_file "verify --io=read --show-io" "$T/err" "io: 1 plain files read(2), 0 mapped; --io=read
"
SLUICE_IO=map ok_run "verify SLUICE_IO=map" 0 "$BIN" verify --show-io t3.tfrecord
expect_file "verify SLUICE_IO=map --show-io" "$T/err" "io: 0 plain files read(2), 1 mapped; auto: map, from SLUICE_IO
"
SLUICE_IO= ok_run "verify auto, small file" 0 "$BIN" verify --show-io t3.tfrecord
expect_file "verify auto --show-io, nothing to probe" "$T/err" "io: 1 plain files read(2), 0 mapped; auto: read, not probed (no plain file of 32 MiB or more in the page cache)
"
ok_run "verify --io=mmap" 2 "$BIN" verify --io=mmap t3.tfrecord
expect_grep "verify --io=mmap message" "$T/err" "--io: expected auto, map or read, got 'mmap'"
ok_run "count takes no --io" 2 "$BIN" count --io=read t3.tfrecord

# damaged copies: flipped data byte, flipped header byte, cut inside data, partial header
py '
d = tfrecord([b"abc", b"def", b"hello, world"])
b = bytearray(d); b[12] ^= 1; write("bad-data.tfrecord", bytes(b))
b = bytearray(d); b[19 + 12 + 1] ^= 0x40; write("bad-data2.tfrecord", bytes(b))
b = bytearray(d); b[19 + 2] ^= 1; write("bad-head.tfrecord", bytes(b))
write("cut.tfrecord", d[:19 + 12 + 2])
write("cut-crc.tfrecord", d[:19 + 19 - 1])
write("tail.tfrecord", d + b"\x05\x00\x00\x00\x00")
'
ok_run "verify flipped data byte" 1 "$BIN" verify bad-data.tfrecord
expect_file "verify flipped data byte message" "$T/err" "sluice-record: verify: bad-data.tfrecord: corrupted record at 12
"
expect_file "verify flipped data byte summary" "$T/out" "verified 1 files, 0 records, 0 bytes: 1 errors
"
ok_run "verify flipped byte of record 1" 1 "$BIN" verify bad-data2.tfrecord
expect_file "verify flipped byte of record 1 message" "$T/err" "sluice-record: verify: bad-data2.tfrecord: corrupted record at 31
"
ok_run "verify flipped header byte" 1 "$BIN" verify bad-head.tfrecord
expect_file "verify flipped header byte message" "$T/err" "sluice-record: verify: bad-head.tfrecord: corrupted record at 19
"
ok_run "verify truncated data" 1 "$BIN" verify cut.tfrecord
expect_file "verify truncated data message" "$T/err" "sluice-record: verify: cut.tfrecord: truncated record at 19
"
ok_run "verify truncated crc" 1 "$BIN" verify cut-crc.tfrecord
expect_file "verify truncated crc message" "$T/err" "sluice-record: verify: cut-crc.tfrecord: truncated record at 19
"
ok_run "verify goes on after a bad file" 1 "$BIN" verify bad-data.tfrecord t3.tfrecord cut.tfrecord
expect_file "verify several files messages" "$T/err" "sluice-record: verify: bad-data.tfrecord: corrupted record at 12
sluice-record: verify: cut.tfrecord: truncated record at 19
"
expect_file "verify several files summary" "$T/out" "verified 3 files, 4 records, 21 bytes: 2 errors
"
ok_run "verify partial header at EOF is a warning" 0 "$BIN" verify tail.tfrecord
expect_file "verify partial header message" "$T/err" "sluice-record: verify: tail.tfrecord: warning: dropped a partial record header of 5 bytes at the end of the file
"
expect_file "verify partial header summary" "$T/out" "verified 1 files, 3 records, 18 bytes: 0 errors, 1 warnings
"

# a damaged gzip stream: many records so the damage lands inside deflate data
py '
import random
rnd = random.Random(7)
recs = [bytes(rnd.randrange(256) for _ in range(200)) for _ in range(200)]
g = gzip.compress(tfrecord(recs))
write("big.tfrecord.gz", g)
b = bytearray(g)
for i in range(len(b) // 2, len(b) // 2 + 64): b[i] ^= 0x55
write("badz.tfrecord.gz", bytes(b))
write("cutz.tfrecord.gz", g[: len(g) // 2])
'
ok_run "verify gzip good" 0 "$BIN" verify big.tfrecord.gz
expect_file "verify gzip good summary" "$T/out" "verified 1 files, 200 records, 40000 bytes: 0 errors
"
ok_run "verify corrupted gzip" 1 "$BIN" verify badz.tfrecord.gz
expect_grep "verify corrupted gzip message" "$T/err" '^sluice-record: verify: badz\.tfrecord\.gz: .*compressed offset [0-9]+'
ok_run "verify truncated gzip" 1 "$BIN" verify cutz.tfrecord.gz
expect_grep "verify truncated gzip message" "$T/err" '^sluice-record: verify: cutz\.tfrecord\.gz: .*(compressed offset [0-9]+|truncated record at [0-9]+)'

ok_run "index" 0 "$BIN" index t3.tfrecord zero.tfrecord
expect_file "index stdout" "$T/out" "t3.tfrecord.idx	3
zero.tfrecord.idx	1
"
expect_file "index file" t3.tfrecord.idx "0 19
19 19
38 28
"
expect_file "index file of a zero-length record" zero.tfrecord.idx "0 16
"
ok_run "index --output" 0 "$BIN" index --output my.idx t3.tfrecord.gz
expect_file "index --output file" my.idx "0 19
19 19
38 28
"
ok_run "index of a damaged file" 1 "$BIN" index bad-data.tfrecord
expect_grep "index of a damaged file message" "$T/err" "sluice-record: error: bad-data.tfrecord: corrupted record at 12"
[ ! -e bad-data.tfrecord.idx ] || fail "index left a partial index for a damaged file"
pass "index leaves no partial index"

# ---- --decode example ----
py '
e0 = example([("label", "int64", [7]), ("name", "bytes", [b"cat"]), ("score", "float", [0.5, -1.25]), ("neg", "int64", [-3])])
e1 = example([("empty", "float", []), ("two", "bytes", [b"", b"\xff"])])
write("ex.tfrecord", tfrecord([e0, e1]))
print(len(e0), len(e1), file=open("ex.len", "w"))
'
read -r L0 L1 <ex.len
ok_run "cat --decode example" 0 "$BIN" cat --decode example ex.tfrecord
expect_file "cat --decode example output" "$T/out" "{\"file\":\"ex.tfrecord\",\"index\":0,\"offset\":0,\"length\":$L0,\"example\":{\"features\":{\"feature\":{\"label\":{\"int64List\":{\"value\":[\"7\"]}},\"name\":{\"bytesList\":{\"value\":[\"Y2F0\"]}},\"score\":{\"floatList\":{\"value\":[0.5,-1.25]}},\"neg\":{\"int64List\":{\"value\":[\"-3\"]}}}}}}
{\"file\":\"ex.tfrecord\",\"index\":1,\"offset\":$((L0 + 16)),\"length\":$L1,\"example\":{\"features\":{\"feature\":{\"empty\":{\"floatList\":{}},\"two\":{\"bytesList\":{\"value\":[\"\",\"/w==\"]}}}}}}
"
py 'write("notex.tfrecord", tfrecord([example([("a", "int64", [1])]), b"\x1c\x00"]))'
ok_run "cat --decode example on a non-Example" 1 "$BIN" cat --decode example notex.tfrecord
expect_grep "non-Example message" "$T/err" "notex.tfrecord: record 1 at offset [0-9]+: not a tf.train.Example"
[ "$(wc -l <"$T/out")" = 1 ] || fail "the good record before a non-Example is printed"
pass "records before a non-Example are printed"

# ---- text lines ----
py '
write("lines.txt", b"a\r\nb\n\nc\rd\n\r\nlast")
write("lines.txt.gz", gzip.compress(b"x\ny\n"))
'
ok_run "cat text" 0 "$BIN" cat lines.txt lines.txt.gz
expect_file "cat text output" "$T/out" '{"file":"lines.txt","index":0,"offset":0,"length":1,"data":"YQ=="}
{"file":"lines.txt","index":1,"offset":3,"length":1,"data":"Yg=="}
{"file":"lines.txt","index":2,"offset":5,"length":0,"data":""}
{"file":"lines.txt","index":3,"offset":6,"length":2,"data":"Y2Q="}
{"file":"lines.txt","index":4,"offset":10,"length":0,"data":""}
{"file":"lines.txt","index":5,"offset":12,"length":4,"data":"bGFzdA=="}
{"file":"lines.txt.gz","index":0,"offset":0,"length":1,"data":"eA=="}
{"file":"lines.txt.gz","index":1,"offset":2,"length":1,"data":"eQ=="}
'
cp lines.txt lines.log
ok_run "count --format text" 0 "$BIN" count --format text lines.log lines.txt.gz
expect_file "count --format text output" "$T/out" "lines.log	6
lines.txt.gz	2
total	8
"

# ---- tar shards ----
py '
import tarfile, io
def tar(path, members, mode):
    with tarfile.open(path, mode) as t:
        d = tarfile.TarInfo("dir"); d.type = tarfile.DIRTYPE; t.addfile(d)
        for name, data in members:
            ti = tarfile.TarInfo(name); ti.size = len(data); t.addfile(ti, io.BytesIO(data))
m = [("s1.jpg", b"J1"), ("s1.cls", b"3"), ("s2.jpg", b"J2"), ("dir/s3.seg.png", b"P"), ("dir/s3.txt", b"")]
tar("shard.tar", m, "w")
tar("shard.tar.gz", m, "w:gz")
tar("dup.tar", [("a.x", b"1"), ("a.x", b"2")], "w")
'
ok_run "cat tar" 0 "$BIN" cat shard.tar shard.tar.gz
expect_file "cat tar output" "$T/out" '{"file":"shard.tar","key":"s1","index":0,"fields":{"jpg":"SjE=","cls":"Mw=="}}
{"file":"shard.tar","key":"s2","index":1,"fields":{"jpg":"SjI="}}
{"file":"shard.tar","key":"dir/s3","index":2,"fields":{"seg.png":"UA==","txt":""}}
{"file":"shard.tar.gz","key":"s1","index":0,"fields":{"jpg":"SjE=","cls":"Mw=="}}
{"file":"shard.tar.gz","key":"s2","index":1,"fields":{"jpg":"SjI="}}
{"file":"shard.tar.gz","key":"dir/s3","index":2,"fields":{"seg.png":"UA==","txt":""}}
'
ok_run "count tar" 0 "$BIN" count shard.tar
expect_file "count tar output" "$T/out" "shard.tar	3
total	3
"
ok_run "verify tar with a repeated extension" 1 "$BIN" verify dup.tar shard.tar
expect_grep "repeated extension message" "$T/err" "^sluice-record: verify: dup\.tar: "
expect_file "verify tar summary" "$T/out" "verified 2 files, 3 records, 6 bytes: 1 errors
"

# ---- stats ----
ok_run "stats --json of raw records" 0 "$BIN" stats --json t3.tfrecord
expect_file "stats --json of raw records output" "$T/out" '{"files":1,"records":3,"bytes":18,"size":{"min":3,"mean":6.000,"max":12},"histogram":[{"min":2,"max":3,"count":2},{"min":4,"max":7,"count":0},{"min":8,"max":15,"count":1}],"not_examples":3,"features":{}}
'
py '
recs = [example([("id", "int64", [i]), ("tok", "int64", list(range(i))), ("x", "float", [1.0] * 3)] + ([("opt", "bytes", [b"q"])] if i % 2 else [])) for i in range(5)]
recs.append(b"\x1c")
recs.append(example([("x", "bytes", [b"s"]), ("x", "float", [2.0, 3.0])]))
write("feat.tfrecord", tfrecord(recs))
'
ok_run "stats --json of Examples" 0 "$BIN" stats --json feat.tfrecord
py '
import json
s = json.load(open("out"))
assert s["records"] == 7 and s["not_examples"] == 1, s
f = s["features"]
assert list(f) == ["id", "opt", "tok", "x"], list(f)
assert f["id"] == {"kinds": ["int64"], "records": 5, "min_values": 1, "max_values": 1}, f["id"]
assert f["tok"] == {"kinds": ["int64"], "records": 5, "min_values": 0, "max_values": 4}, f["tok"]
assert f["opt"] == {"kinds": ["bytes"], "records": 2, "min_values": 1, "max_values": 1}, f["opt"]
# the duplicate key of the last record: the last value (float, 2 values) wins
assert f["x"] == {"kinds": ["float"], "records": 6, "min_values": 2, "max_values": 3}, f["x"]
' || fail "stats --json of Examples: wrong numbers: $(cat out)"
pass "stats feature keys, kinds and value counts"
ok_run "stats text" 0 "$BIN" stats feat.tfrecord shard.tar
expect_grep "stats text records" "$T/out" '^records +10$'
expect_grep "stats text feature line" "$T/out" '^  tok +int64 +5  0\.\.4$'
expect_grep "stats text tar field line" "$T/out" '^  jpg +2  2\.\.2$'

# ---- convert idx: a tiny IDX pair built here ----
py '
imgs = bytes((i * 16 + j) & 0xFF for i in range(10) for j in range(16))
write("img-idx3-ubyte.gz", gzip.compress(idx(0x08, [10, 4, 4], imgs)))
write("lab-idx1-ubyte", idx(0x08, [10], bytes(i % 3 for i in range(10))))
write("lab9-idx1-ubyte", idx(0x08, [9], bytes(9)))
'
ok_run "convert idx" 0 "$BIN" convert idx --images img-idx3-ubyte.gz --labels lab-idx1-ubyte --output-dir conv --shards 3 --index
expect_file "convert idx stdout" "$T/out" "conv/train-00000-of-00003.tfrecord	4
conv/train-00001-of-00003.tfrecord	3
conv/train-00002-of-00003.tfrecord	3
"
expect_file "convert idx files" <(ls -A conv) "train-00000-of-00003.tfrecord
train-00000-of-00003.tfrecord.idx
train-00001-of-00003.tfrecord
train-00001-of-00003.tfrecord.idx
train-00002-of-00003.tfrecord
train-00002-of-00003.tfrecord.idx
"
ok_run "cat --decode example of converted shards" 0 "$BIN" cat --decode example conv/train-0000{0,1,2}-of-00003.tfrecord
py '
import json, base64
lines = [json.loads(l) for l in open("out")]
assert len(lines) == 10, len(lines)
for i, l in enumerate(lines):
    f = l["example"]["features"]["feature"]
    assert list(f) == ["image", "label", "id"], list(f)
    assert f["id"]["int64List"]["value"] == [str(i)], (i, f["id"])
    assert f["label"]["int64List"]["value"] == [str(i % 3)], (i, f["label"])
    assert base64.b64decode(f["image"]["bytesList"]["value"][0]) == bytes((i * 16 + j) & 0xFF for j in range(16)), i
    assert l["file"] == "conv/train-%05d-of-00003.tfrecord" % (0 if i < 4 else 1 if i < 7 else 2), l["file"]
idx = open("conv/train-00001-of-00003.tfrecord.idx").read().split("\n")
assert len(idx) == 4 and idx[0].startswith("0 ") and idx[3] == "", idx
' || fail "convert idx: the Examples are not elements 0..9 in order"
pass "convert idx content and order"

ok_run "convert idx gzip" 0 "$BIN" convert idx --images img-idx3-ubyte.gz --labels lab-idx1-ubyte --output-dir convz --prefix test --shards 2 --compression gzip
expect_file "convert idx gzip files" <(ls -A convz) "test-00000-of-00002.tfrecord.gz
test-00001-of-00002.tfrecord.gz
"
ok_run "count gzip shards" 0 "$BIN" count convz/test-00000-of-00002.tfrecord.gz convz/test-00001-of-00002.tfrecord.gz
expect_file "count gzip shards output" "$T/out" "convz/test-00000-of-00002.tfrecord.gz	5
convz/test-00001-of-00002.tfrecord.gz	5
total	10
"
ok_run "convert idx more shards than elements" 0 "$BIN" convert idx --images img-idx3-ubyte.gz --labels lab-idx1-ubyte --output-dir conv12 --shards 12
ok_run "count of 12 shards" 0 "$BIN" count conv12/*
expect_grep "12 shards hold 10 records" "$T/out" '^total	10$'
ok_run "convert idx count mismatch" 1 "$BIN" convert idx --images img-idx3-ubyte.gz --labels lab9-idx1-ubyte --output-dir convbad
expect_grep "count mismatch message" "$T/err" "10 images but lab9-idx1-ubyte has 9 labels"
[ -z "$(ls -A convbad 2>/dev/null)" ] || fail "convert idx left files after an error: $(ls -A convbad)"
pass "convert idx removes outputs on error"
ok_run "convert idx missing input" 1 "$BIN" convert idx --images nope.gz --labels lab-idx1-ubyte --output-dir convbad
# --output-dir's missing parents are made, as --help says "created if missing"
# (issue #24 item 13: was "mkdir(deep/er/conv): No such file or directory")
ok_run "convert idx into missing parents" 0 "$BIN" convert idx --images img-idx3-ubyte.gz --labels lab-idx1-ubyte \
    --output-dir deep/er/conv --shards 2
[ -f deep/er/conv/train-00000-of-00002.tfrecord ] && [ -f deep/er/conv/train-00001-of-00002.tfrecord ] ||
    fail "convert into missing parents: no shards in deep/er/conv"
ok_run "gen into missing parents" 0 "$BIN" gen --output-dir "$T/abs/deeper/g" --records 3
[ -f "$T/abs/deeper/g/gen-00000-of-00001.tfrecord" ] || fail "gen into missing parents: no shard"
: >plainfile
ok_run "convert idx under a file" 1 "$BIN" convert idx --images img-idx3-ubyte.gz --labels lab-idx1-ubyte \
    --output-dir plainfile/sub/conv
expect_grep "convert idx under a file message" "$T/err" "sluice-record: error: convert idx: mkdir\(plainfile/sub\): Not a directory"

# ---- convert idx on the real Fashion-MNIST test set ----
if [ -r "$FMNIST/t10k-images-idx3-ubyte.gz" ] && [ -r "$FMNIST/t10k-labels-idx1-ubyte.gz" ]; then
    ok_run "convert Fashion-MNIST t10k" 0 "$BIN" convert idx --images "$FMNIST/t10k-images-idx3-ubyte.gz" \
        --labels "$FMNIST/t10k-labels-idx1-ubyte.gz" --output-dir fm --prefix test --shards 4 --index
    ok_run "count Fashion-MNIST shards" 0 "$BIN" count fm/test-0000{0,1,2,3}-of-00004.tfrecord
    expect_file "count Fashion-MNIST shards output" "$T/out" "fm/test-00000-of-00004.tfrecord	2500
fm/test-00001-of-00004.tfrecord	2500
fm/test-00002-of-00004.tfrecord	2500
fm/test-00003-of-00004.tfrecord	2500
total	10000
"
    ok_run "verify Fashion-MNIST shards" 0 "$BIN" verify fm/test-0000{0,1,2,3}-of-00004.tfrecord
    "$BIN" cat --decode example fm/test-0000{0,1,2,3}-of-00004.tfrecord >fm.jsonl || fail "cat of Fashion-MNIST shards"
    python3 - "$FMNIST" <<'PY' || fail "Fashion-MNIST: ids, labels or images wrong"
import sys, json, gzip, base64
d = sys.argv[1]
imgs = gzip.open(d + "/t10k-images-idx3-ubyte.gz").read()[16:]
labs = gzip.open(d + "/t10k-labels-idx1-ubyte.gz").read()[8:]
seen = []
for line in open("fm.jsonl"):
    f = json.loads(line)["example"]["features"]["feature"]
    i = int(f["id"]["int64List"]["value"][0])
    assert int(f["label"]["int64List"]["value"][0]) == labs[i], i
    assert base64.b64decode(f["image"]["bytesList"]["value"][0]) == imgs[i * 784:(i + 1) * 784], i
    seen.append(i)
assert seen == list(range(10000)), "ids are not 0..9999 in order, each once"
PY
    pass "Fashion-MNIST ids 0..9999 exactly once, labels and images match"
    ok_run "stats Fashion-MNIST" 0 "$BIN" stats --json fm/test-00000-of-00004.tfrecord
    expect_grep "stats Fashion-MNIST image feature" "$T/out" '"image":\{"kinds":\["bytes"\],"records":2500,"min_values":1,"max_values":1\}'
else
    echo "skip: $FMNIST not installed (scripts/deps.sh installs dataset-fashion-mnist)"
fi

# ---- convert jsonl ----
cat >in.jsonl <<'EOF'
{"id": 1, "w": 0.5, "name": "héllo", "ints": [1, 2, -3], "mix": [1, 2.5], "blob": {"base64": "AAH/"}, "tags": ["a", {"base64": "Yg=="}]}

{"id": 2, "w": 1, "name": "", "ints": [], "mix": [], "blob": {"base64": ""}, "tags": []}
EOF
ok_run "convert jsonl" 0 "$BIN" convert jsonl --input in.jsonl --output j.tfrecord
expect_file "convert jsonl stdout" "$T/out" "j.tfrecord	2
"
ok_run "cat converted jsonl" 0 "$BIN" cat --decode example j.tfrecord
py '
import json
got = [json.loads(l)["example"]["features"]["feature"] for l in open("out")]
want0 = {"id": {"int64List": {"value": ["1"]}}, "w": {"floatList": {"value": [0.5]}},
         "name": {"bytesList": {"value": ["aMOpbGxv"]}}, "ints": {"int64List": {"value": ["1", "2", "-3"]}},
         "mix": {"floatList": {"value": [1, 2.5]}}, "blob": {"bytesList": {"value": ["AAH/"]}},
         "tags": {"bytesList": {"value": ["YQ==", "Yg=="]}}}
want1 = {"id": {"int64List": {"value": ["2"]}}, "w": {"floatList": {"value": [1]}},
         "name": {"bytesList": {"value": [""]}}, "ints": {"int64List": {}}, "mix": {"floatList": {}},
         "blob": {"bytesList": {"value": [""]}}, "tags": {"bytesList": {}}}
assert got[0] == want0, got[0]
assert list(got[0]) == list(want0), list(got[0])
assert got[1] == want1, got[1]
' || fail "convert jsonl: wrong Examples: $(cat out)"
pass "convert jsonl values, kinds and key order"
printf '{"a": 1}\n{"a": [1, "x"]}\n' >mixed.jsonl
ok_run "convert jsonl mixed array" 1 "$BIN" convert jsonl --input mixed.jsonl --output m.tfrecord
expect_grep "mixed array message" "$T/err" "mixed\.jsonl:2: 'a': array mixes strings and numbers"
[ ! -e m.tfrecord ] && [ -z "$(ls -A | grep -F m.tfrecord || true)" ] || fail "convert jsonl left a partial output"
pass "convert jsonl removes its output on error"
printf '{"a": 1}\n{"a": \n' >badjson.jsonl
ok_run "convert jsonl bad JSON" 1 "$BIN" convert jsonl --input badjson.jsonl --output b.tfrecord
expect_grep "bad JSON message" "$T/err" "badjson\.jsonl:2: invalid JSON"
printf '{"a": 1.5}\n{"a": 2}\n{"a": true}\n' >kinds.jsonl
ok_run "convert jsonl boolean" 1 "$BIN" convert jsonl --input kinds.jsonl --output k.tfrecord
expect_grep "boolean message" "$T/err" "kinds\.jsonl:3: 'a': unsupported value: a boolean"
ok_run "convert jsonl gzip output" 0 "$BIN" convert jsonl --input in.jsonl --output j.tfrecord.gz
ok_run "count jsonl gzip output" 0 "$BIN" count j.tfrecord.gz
expect_file "count jsonl gzip output" "$T/out" "j.tfrecord.gz	2
total	2
"
py 'assert open("j.tfrecord.gz", "rb").read(2) == b"\x1f\x8b"' || fail "j.tfrecord.gz is not gzip"
pass "convert jsonl picks gzip from the output name"

# ---- gen ----
ok_run "gen" 0 "$BIN" gen --output-dir g1 --records 300 --shards 3 --seed 42 --image-bytes 50 --floats 4 --varlen-max 6
expect_file "gen stdout" "$T/out" "g1/gen-00000-of-00003.tfrecord	100
g1/gen-00001-of-00003.tfrecord	100
g1/gen-00002-of-00003.tfrecord	100
"
ok_run "gen same seed" 0 "$BIN" gen --output-dir g2 --records 300 --shards 3 --seed 42 --image-bytes 50 --floats 4 --varlen-max 6
for i in 0 1 2; do
    cmp -s g1/gen-0000$i-of-00003.tfrecord g2/gen-0000$i-of-00003.tfrecord || fail "gen: same seed, different shard $i"
done
pass "gen: same seed, identical bytes"
ok_run "gen other seed" 0 "$BIN" gen --output-dir g3 --records 300 --shards 3 --seed 43 --image-bytes 50 --floats 4 --varlen-max 6
! cmp -s g1/gen-00000-of-00003.tfrecord g3/gen-00000-of-00003.tfrecord || fail "gen: different seeds gave the same data"
pass "gen: different seed, different bytes"
ok_run "gen one shard" 0 "$BIN" gen --output-dir g4 --records 300 --seed 42 --image-bytes 50 --floats 4 --varlen-max 6
cat g1/gen-0000{0,1,2}-of-00003.tfrecord | cmp -s - g4/gen-00000-of-00001.tfrecord || fail "gen: records depend on the shard count"
pass "gen: records do not depend on the shard count"
ok_run "verify gen" 0 "$BIN" verify g1/gen-0000{0,1,2}-of-00003.tfrecord
ok_run "stats gen" 0 "$BIN" stats --json g1/gen-0000{0,1,2}-of-00003.tfrecord
py '
import json
s = json.load(open("out"))
f = s["features"]
assert s["records"] == 300 and s["not_examples"] == 0, s
assert f["id"] == {"kinds": ["int64"], "records": 300, "min_values": 1, "max_values": 1}, f["id"]
assert f["label"]["records"] == 300, f["label"]
assert f["image"] == {"kinds": ["bytes"], "records": 300, "min_values": 1, "max_values": 1}, f["image"]
assert f["dense"] == {"kinds": ["float"], "records": 300, "min_values": 4, "max_values": 4}, f["dense"]
assert f["tokens"]["kinds"] == ["int64"] and f["tokens"]["min_values"] == 0 and f["tokens"]["max_values"] == 6, f["tokens"]
' || fail "gen: wrong features: $(cat out)"
pass "gen features"
"$BIN" cat --decode example g1/gen-0000{0,1,2}-of-00003.tfrecord >gen.jsonl
py '
import json, base64
for i, l in enumerate(open("gen.jsonl")):
    f = json.loads(l)["example"]["features"]["feature"]
    assert f["id"]["int64List"]["value"] == [str(i)], i
    assert 0 <= int(f["label"]["int64List"]["value"][0]) < 10
    assert len(base64.b64decode(f["image"]["bytesList"]["value"][0])) == 50
    assert all(0 <= v < 1 for v in f["dense"]["floatList"]["value"])
' || fail "gen: record content out of range"
pass "gen ids in order, values in range"
ok_run "gen gzip with index" 0 "$BIN" gen --output-dir g5 --records 10 --compression gzip --index
expect_file "gen gzip files" <(ls -A g5) "gen-00000-of-00001.tfrecord.gz
gen-00000-of-00001.tfrecord.gz.idx
"

# ---- outputs on devices, FIFOs and links (issue #12) ----
# A device is written, never replaced by a regular file (as root, a rename
# over /dev/null would turn it into one); no output follows a link planted
# at a guessable temporary name.
is_chr() { [ -c "$1" ] && [ ! -L "$1" ]; }
ok_run "index --output /dev/null" 0 "$BIN" index --output /dev/null t3.tfrecord
expect_file "index --output /dev/null stdout" "$T/out" "/dev/null	3
"
is_chr /dev/null || fail "index --output /dev/null: /dev/null is no longer a character device"
pass "index --output /dev/null leaves a character device"
ln -s /dev/null null-link
ok_run "index --output LINK-TO-/dev/null" 0 "$BIN" index --output null-link t3.tfrecord
[ -L null-link ] && [ "$(readlink null-link)" = /dev/null ] || fail "index replaced the link to /dev/null"
pass "index --output through a link to /dev/null keeps the link"
if mknod own-null c 1 3 2>/dev/null; then # root: a device node of our own
    ok_run "index --output DEVICE-NODE" 0 "$BIN" index --output own-null t3.tfrecord
    is_chr own-null || fail "index --output replaced a device node by a regular file"
    ok_run "convert jsonl --output DEVICE-NODE" 0 "$BIN" convert jsonl --input in.jsonl --output own-null
    is_chr own-null || fail "convert jsonl --output replaced a device node by a regular file"
    pass "index and convert jsonl write a device node, never replace it"
fi
ok_run "convert jsonl --output /dev/null" 0 "$BIN" convert jsonl --input in.jsonl --output /dev/null
is_chr /dev/null || fail "convert jsonl --output /dev/null: /dev/null is no longer a character device"
pass "convert jsonl --output /dev/null leaves a character device"
mkfifo idx-fifo
timeout 20 cat idx-fifo >fifo.got & # bounded: no writer must not hang the test
reader=$!
ok_run "index --output FIFO" 0 "$BIN" index --output idx-fifo t3.tfrecord
wait $reader
expect_file "index through a FIFO" fifo.got "0 19
19 19
38 28
"
[ -p idx-fifo ] || fail "index --output replaced the FIFO"
pass "index --output FIFO: the index goes through, the FIFO stays"
# links planted where the old writers put their temporaries
mkdir planted
printf precious >victim
ln -s "$T/victim" planted/.j.tfrecord.tmp
ln -s "$T/victim" planted/j.tfrecord.tmp
ln -s "$T/victim" planted/.gen-00000-of-00001.tfrecord.tmp
ln -s "$T/victim" planted/gen-00000-of-00001.tfrecord.idx.tmp
ok_run "convert jsonl beside planted links" 0 "$BIN" convert jsonl --input in.jsonl --output planted/j.tfrecord
ok_run "gen --index beside planted links" 0 "$BIN" gen --output-dir planted --records 3 --index
[ "$(cat victim)" = precious ] || fail "a writer followed a link planted at its temporary name"
[ -f planted/j.tfrecord ] && [ ! -L planted/j.tfrecord ] && [ -f planted/gen-00000-of-00001.tfrecord ] &&
    [ ! -L planted/gen-00000-of-00001.tfrecord ] || fail "outputs beside planted links: $(ls -lA planted)"
ok_run "verify the outputs beside planted links" 0 "$BIN" verify planted/j.tfrecord planted/gen-00000-of-00001.tfrecord
pass "convert and gen create exclusive temporaries: planted links neither followed nor renamed into place"
ok_run "index into a missing folder" 1 "$BIN" index --output no-such-dir/x.idx t3.tfrecord
expect_grep "index into a missing folder message" "$T/err" "open\\(no-such-dir/x\\.idx\\): No such file or directory"

# ---- signals: SIGTERM / SIGINT stop a writer and remove its outputs ----
for sig in TERM INT; do
    want=$([ $sig = TERM ] && echo 143 || echo 130)
    rm -rf sig
    # far more than can be written before the signal arrives
    "$BIN" gen --output-dir sig --records 50000000 --shards 4 --image-bytes 1000 --compression gzip \
        >/dev/null 2>sig.err &
    pid=$!
    for _ in $(seq 50); do
        [ -n "$(ls -A sig 2>/dev/null)" ] && break
        sleep 0.1
    done
    sleep 0.3
    kill -s $sig $pid
    set +e
    wait $pid
    RC=$?
    set -e
    [ "$RC" = "$want" ] || fail "gen after SIG$sig: exit status $RC, expected $want ($(cat sig.err))"
    [ -z "$(ls -A sig)" ] || fail "gen after SIG$sig left files: $(ls -A sig)"
    grep -q "interrupted" sig.err || fail "gen after SIG$sig: no message"
    pass "gen SIG$sig: exit $want, outputs removed"
done

echo "$PASSED passed, 0 failed"
