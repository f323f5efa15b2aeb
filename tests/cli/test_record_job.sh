#!/usr/bin/env bash
# CLI tests of `sluice-record stats --job FILE` (issue #19): the job skeleton
# written for the data read is compared whole, then served: `sluice-feeder
# plan` takes it, and a real feeder serves it to `sluice-trainer --model none`
# whose trace holds every element exactly once. Hostile inputs (a feature of
# two kinds, records that are not Examples, no records, keys and file names a
# JSON job cannot hold, tar files, an existing FILE) write nothing and say why.
#
# Inputs are built here by Python (stdlib only), independently of sluice.
#
# Usage: test_record_job.sh BUILD_DIR   (holding tools/, feeder/, trainer/)
set -uo pipefail

BUILD="$(cd "${1:?usage: test_record_job.sh BUILD_DIR}" && pwd)"
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
RECORD="$BUILD/tools/sluice-record"
FEEDER="$BUILD/feeder/sluice-feeder"
TRAINER="$BUILD/trainer/sluice-trainer"
for b in "$RECORD" "$FEEDER" "$TRAINER"; do
    [ -x "$b" ] || { echo "no executable $b" >&2; exit 1; }
done
T="$(mktemp -d)"
FPID=""
cleanup() {
    [ -n "$FPID" ] && kill -KILL "$FPID" 2>/dev/null
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
    "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    sed -E 's/^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]{12}Z //' "$T/err" >"$T/msg"
    [ "$rc" = "$want" ] || fail "$name: exit status $rc, expected $want"
}

# same FILE TEXT NAME: FILE holds exactly TEXT
same() {
    printf '%s' "$2" >"$T/want"
    cmp -s "$T/want" "$1" || { diff -u "$T/want" "$1" >&2; fail "$3: $1 differs"; }
}

# serve JOB NAME N: a feeder serves JOB to one trainer (--model none); its
# trace must hold ids 0..N-1 exactly once
serve() {
    local job="$1" name="$2" n="$3" sock="ipc://$T/f.sock"
    rm -f "$T/trace.jsonl" "$T/f.sock"
    "$FEEDER" --job "$job" --listen "$sock" --threads 1 --quiet 2>"$T/feeder.err" &
    FPID=$!
    "$TRAINER" --connect "$sock" --job "$name" --worker 0 --workers 1 --model none --quiet \
        --trace "$T/trace.jsonl" >"$T/out" 2>"$T/err" || fail "serve $job: the trainer failed"
    for _ in $(seq 100); do
        kill -0 "$FPID" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "$FPID" 2>/dev/null && fail "serve $job: the feeder did not leave after its trainer"
    wait "$FPID" || fail "serve $job: the feeder failed: $(cat "$T/feeder.err")"
    FPID=""
    python3 "$SRC/tools/check_traces.py" --expect "$n" "$T/trace.jsonl" >"$T/check" ||
        fail "serve $job: traces: $(cat "$T/check")"
}

cat >"$T/mk.py" <<'PY'
"""TFRecord files of tf.train.Example records, written from scratch."""
import struct

def _crc_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table

TABLE = _crc_table()

def crc32c(data):
    c = 0xFFFFFFFF
    for byte in data:
        c = TABLE[(c ^ byte) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF

assert crc32c(b"123456789") == 0xE3069283

def mask(c):
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF

def frame(payload):
    n = struct.pack("<Q", len(payload))
    return n + struct.pack("<I", mask(crc32c(n))) + payload + struct.pack("<I", mask(crc32c(payload)))

def uvarint(v):
    out = b""
    while v >= 0x80:
        out += bytes([v & 0x7F | 0x80])
        v >>= 7
    return out + bytes([v])

def field(number, payload):
    return uvarint(number << 3 | 2) + uvarint(len(payload)) + payload

def feature(kind, values):
    """kind: int64, float, bytes, or None for a Feature with no kind."""
    if kind is None:
        return b""
    if kind == "int64":
        return field(3, field(1, b"".join(uvarint(v) for v in values)))
    if kind == "float":
        return field(2, field(1, b"".join(struct.pack("<f", v) for v in values)))
    return field(1, b"".join(field(1, v) for v in values))

def example(feats):
    """feats: [(key as str or bytes, kind, values)]."""
    body = b""
    for key, kind, values in feats:
        k = key if isinstance(key, bytes) else key.encode()
        body += field(1, field(1, k) + field(2, feature(kind, values)))
    return field(1, body)

def write(path, records):
    with open(path, "wb") as f:
        f.write(b"".join(frame(r) for r in records))
PY
mk() { python3 -c "import sys; sys.path.insert(0, '$T'); from mk import *; $1" || fail "mk: $1"; }

# ---- --help ----
run 0 "stats --help" "$RECORD" stats --help
grep -q -- "--job=FILE             also write a job skeleton for the data read to FILE" "$T/out" ||
    fail "stats --help does not document --job"
grep -q "^--job writes the job that serves the FILEs as given" "$T/out" || fail "stats --help: no --job paragraph"
pass "stats --help documents --job"

# ---- sluice-record gen's data: fixed shapes and a varlen feature ----
"$RECORD" gen --output-dir g --records 300 --shards 3 --seed 5 --image-bytes 12 --floats 3 --varlen-max 4 \
    --prefix g >/dev/null 2>&1 || fail "sluice-record gen"
run 0 "stats --job on gen's data" "$RECORD" stats --job gen.json g/g-00000-of-00003.tfrecord \
    g/g-00001-of-00003.tfrecord g/g-00002-of-00003.tfrecord
grep -q "^records       300$" "$T/out" || fail "stats --job: the statistics are not printed as without it"
same gen.json '{"name": "gen",
 "files": ["g/g-00000-of-00003.tfrecord",
           "g/g-00001-of-00003.tfrecord",
           "g/g-00002-of-00003.tfrecord"],
 "format": "tfrecord",
 "features": {"dense": {"dtype": "float32", "shape": [3]},
              "id": {"dtype": "int64", "shape": []},
              "image": {"dtype": "bytes", "shape": []},
              "label": {"dtype": "int64", "shape": []},
              "tokens": {"dtype": "int64", "varlen": true}},
 "global_batch_size": 32}
' "gen job"
same "$T/msg" 'sluice-record: info: stats --job: feature "tokens" holds 0 to 4 values a record: written as varlen
sluice-record: info: stats --job: wrote gen.json: 5 features of 3 files; global_batch_size 32 is a placeholder
' "gen job messages"
pass "stats --job: gen's data, exact job and messages"
run 0 "feeder plan of gen.json" "$FEEDER" plan --job gen.json --workers 1 --replicas 1
grep -q "^job 'gen': 3 files, 300 records; 1 workers x 1 replicas, global batch 32, policy auto$" "$T/out" ||
    fail "feeder plan of gen.json: not the plan expected"
pass "sluice-feeder plan takes gen.json"
serve gen.json gen 300
pass "gen.json served: 300 elements exactly once, tokens ragged"

# ---- missing features, a Feature with no kind, a key with none at all ----
mk '
recs = []
for i in range(40):
    f = [("id", "int64", [i]), ("pos", "int64", [i, i + 1, i + 2]), ("w", "float", [0.5] * 2)]
    if i % 3:
        f.append(("score", "float", [i / 4]))
    f.append(("name", None, []) if i % 5 == 0 else ("name", "bytes", [b"n%d" % i]))
    f.append(("empty", None, []))
    f.append(("none", "int64", []))
    recs.append(example(f))
write("m-0.tfrecord", recs)
'
run 0 "stats --job, missing features" "$RECORD" stats --job=m.json m-0.tfrecord
same m.json '{"name": "m",
 "files": ["m-0.tfrecord"],
 "format": "tfrecord",
 "features": {"id": {"dtype": "int64", "shape": []},
              "name": {"dtype": "bytes", "shape": [], "default": ""},
              "none": {"dtype": "int64", "shape": [0]},
              "pos": {"dtype": "int64", "shape": [3]},
              "score": {"dtype": "float32", "shape": [], "default": 0.0},
              "w": {"dtype": "float32", "shape": [2]}},
 "global_batch_size": 32}
' "missing-features job"
same "$T/msg" 'sluice-record: warning: stats --job: feature "empty" has no values of any kind in any record: left out
sluice-record: info: stats --job: feature "name" is missing from 8 of 40 records: written with default ""
sluice-record: info: stats --job: feature "score" is missing from 14 of 40 records: written with default 0.0
sluice-record: info: stats --job: wrote m.json: 6 features of 1 file; global_batch_size 32 is a placeholder
' "missing-features messages"
pass "stats --job: defaults for missing features, a kindless key left out"
run 0 "feeder plan of m.json" "$FEEDER" plan --job m.json --workers 1 --replicas 1
serve m.json m 40
pass "m.json served: 40 elements exactly once (defaults filled)"

# ---- file names: glob characters escaped, the name from FILE's, options kept ----
cp m-0.tfrecord 'odd[1]*.tfrecord'
gzip -c m-0.tfrecord >z.tfrecord.gz
run 0 "stats --job, odd names" "$RECORD" stats --compression gzip --max-record-bytes 4096 \
    --on-error skip-file --job 'my job!.json' z.tfrecord.gz
run 0 "stats --job, glob characters" "$RECORD" stats --job 'odd.json' 'odd[1]*.tfrecord'
python3 - <<'PY' || fail "odd names: the jobs are not as expected (see above)"
import json
j = json.load(open("my job!.json"))
assert j["name"] == "my-job-" and j["files"] == ["z.tfrecord.gz"], j
assert (j["compression"], j["max_record_bytes"], j["on_error"]) == ("gzip", 4096, "skip-file"), j
k = json.load(open("odd.json"))
assert k["name"] == "odd" and k["files"] == ["odd\\[1]\\*.tfrecord"], k  # [ and * escaped for glob(3)
assert "compression" not in k and "on_error" not in k and "max_record_bytes" not in k, k
PY
run 0 "feeder plan of odd.json" "$FEEDER" plan --job odd.json --workers 1 --replicas 1
grep -q "^job 'odd': 1 files, 40 records" "$T/out" || fail "odd.json: the escaped name matches no file"
run 0 "feeder plan of 'my job!.json'" "$FEEDER" plan --job 'my job!.json' --workers 1 --replicas 1
grep -q "^job 'my-job-': 1 files, 40 records" "$T/out" || fail "my job!.json: not planned"
pass "stats --job: glob characters escaped, name from FILE, --compression/--max-record-bytes/--on-error kept"

# ---- refused: nothing written ----
# refused RC NAME MESSAGE CMD...: exit status RC, stderr ends with MESSAGE, no x.json
refused() {
    local want="$1" name="$2" msg="$3"
    shift 3
    rm -f x.json
    run "$want" "$name" "$@"
    [ -e x.json ] && fail "$name: x.json written"
    same "$T/msg" "$msg" "$name"
    pass "$name"
}
echo '{"edited": true}' >kept.json
refused 2 "an existing FILE" "sluice-record: stats: --job: 'kept.json' exists: not replaced (remove it or name another file)
Try 'sluice-record stats --help' for more information.
" "$RECORD" stats --job kept.json m-0.tfrecord
same kept.json '{"edited": true}
' "the existing FILE"
mkdir adir
refused 2 "a directory as FILE" "sluice-record: stats: --job: 'adir' exists: not replaced (remove it or name another file)
Try 'sluice-record stats --help' for more information.
" "$RECORD" stats --job adir m-0.tfrecord
refused 2 "an empty FILE name" "sluice-record: stats: --job: empty path
Try 'sluice-record stats --help' for more information.
" "$RECORD" stats --job= m-0.tfrecord
printf 'a line\n' >t.txt
refused 2 "a text file" "sluice-record: stats: --job: 't.txt' is read as text lines: --job writes jobs for TFRecord files of tf.train.Example only
Try 'sluice-record stats --help' for more information.
" "$RECORD" stats --job x.json m-0.tfrecord t.txt
: >empty.tfrecord
refused 1 "no records" "sluice-record: error: stats --job: the files hold no records: nothing to describe
sluice-record: error: stats --job: no job written
" "$RECORD" stats --job x.json empty.tfrecord
mk 'write("two.tfrecord", [example([("v", "int64", [1, 2])]), example([("v", "float", [1.0])]),
                           example([("v", "bytes", [b"x"])])])'
refused 1 "a feature of three kinds" "sluice-record: error: stats --job: feature \"v\" holds int64,float,bytes values in different records: no dtype fits them all
sluice-record: error: stats --job: no job written
" "$RECORD" stats --job x.json two.tfrecord
mk 'write("raw.tfrecord", [example([("v", "int64", [1])]), b"not an example"])'
refused 1 "records that are not Examples" "sluice-record: error: stats --job: 1 of 2 records are not tf.train.Example records: a job cannot decode them
sluice-record: error: stats --job: no job written
" "$RECORD" stats --job x.json raw.tfrecord
mk 'write("kinds.tfrecord", [example([("e", None, [])])])'
refused 1 "no feature with values" "sluice-record: warning: stats --job: feature \"e\" has no values of any kind in any record: left out
sluice-record: error: stats --job: no feature has values: nothing to describe
sluice-record: error: stats --job: no job written
" "$RECORD" stats --job x.json kinds.tfrecord
mk 'write("bad-key.tfrecord", [example([("id", "int64", [0]), (b"\xff", "int64", [1])])])'
refused 1 "a key that is not UTF-8" "sluice-record: error: stats --job: feature key \"\\u00ff\" is not valid UTF-8 or holds a NUL byte: a job file cannot name it
sluice-record: error: stats --job: no job written
" "$RECORD" stats --job x.json bad-key.tfrecord
mk 'write("nul-key.tfrecord", [example([(b"a\x00b", "int64", [1])])])'
refused 1 "a key with a NUL byte" "sluice-record: error: stats --job: feature key \"a\\u0000b\" is not valid UTF-8 or holds a NUL byte: a job file cannot name it
sluice-record: error: stats --job: no job written
" "$RECORD" stats --job x.json nul-key.tfrecord
cp m-0.tfrecord "$(printf 'bad\xffname.tfrecord')"
refused 1 "a file name that is not UTF-8" "sluice-record: error: stats --job: file name \"bad\\u00ffname.tfrecord\" is not valid UTF-8: a job file cannot name it
sluice-record: error: stats --job: no job written
" "$RECORD" stats --job x.json "$(printf 'bad\xffname.tfrecord')"
head -c 100 m-0.tfrecord >cut.tfrecord
printf 'XXXX' | dd of=cut.tfrecord bs=1 seek=20 conv=notrunc 2>/dev/null
run 1 "a damaged file" "$RECORD" stats --job x.json cut.tfrecord
[ -e x.json ] && fail "a damaged file: x.json written"
tail -1 "$T/msg" | grep -qx "sluice-record: error: stats --job: a file failed: no job written" ||
    fail "a damaged file: no 'no job written' line"
pass "a damaged file: exit 1, no job written"

echo "$PASSED passed, 0 failed"
