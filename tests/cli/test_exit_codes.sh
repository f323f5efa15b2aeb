#!/usr/bin/env bash
# One table of exit statuses for the four programs (issue #24 item 13):
# every --help ends with the same table (shared/sl_exit.h), every man page
# help2man made from --help carries it and a synopsis that is the --help's
# usage lines (no usage line spilled into DESCRIPTION), and kindred errors
# get the same status in every program: a file that is not there is 1 (a job
# file, a glob matching no file, a key file), a refused command line or file
# content is 2, SIGINT/SIGTERM before the end 130/143 (the feeder: 0).
#
# Usage: test_exit_codes.sh BUILD_DIR   (holding feeder/, trainer/, tools/, man/)
set -uo pipefail

BUILD="$(cd "${1:?usage: test_exit_codes.sh BUILD_DIR}" && pwd)"
FEEDER="$BUILD/feeder/sluice-feeder"
TRAINER="$BUILD/trainer/sluice-trainer"
RECORD="$BUILD/tools/sluice-record"
BENCH="$BUILD/tools/sluice-bench"
for b in "$FEEDER" "$TRAINER" "$RECORD" "$BENCH"; do
    [ -x "$b" ] || { echo "no executable $b" >&2; exit 1; }
done
T="$(mktemp -d)"
BG=""
cleanup() {
    [ -n "$BG" ] && kill -KILL "$BG" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
cd "$T"
PASSED=0

fail() {
    echo "FAIL: $*" >&2
    echo "--- stderr:" >&2; tail -c 2000 "$T/err" >&2 2>/dev/null
    echo "$PASSED passed, 1 failed" >&2
    exit 1
}
pass() { PASSED=$((PASSED + 1)); echo "ok $PASSED - $1"; }

# expect NAME WANT_RC TEXT CMD...: exit status WANT_RC and TEXT (fixed
# string) in stderr, the log lines' time stamps removed
expect() {
    local name="$1" want="$2" text="$3"
    shift 3
    "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    sed -E 's/^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]{12}Z //' "$T/err" >"$T/msg"
    [ "$rc" = "$want" ] || fail "$name: exit status $rc, expected $want"
    grep -qF -- "$text" "$T/msg" || fail "$name: stderr lacks '$text'"
    pass "$name"
}

# ---- the table in every --help, the same in all four ----
for b in "$FEEDER" "$TRAINER" "$RECORD" "$BENCH"; do
    "$b" --help >"$T/help" || fail "$(basename "$b") --help: exit status $?"
    sed -n '/^Exit status:$/,/(docs\/exit-codes.md)\.$/p' "$T/help" >"$T/table.$(basename "$b")"
done
grep -q '^  130  SIGINT stopped the run before its end (143: SIGTERM; 128 + the$' "$T/table.sluice-feeder" ||
    fail "sluice-feeder --help has no exit status table"
for p in sluice-trainer sluice-record sluice-bench; do
    cmp -s "$T/table.sluice-feeder" "$T/table.$p" || {
        diff -u "$T/table.sluice-feeder" "$T/table.$p" >&2
        fail "$p --help: its exit status table differs from sluice-feeder's"
    }
done
for code in 0 1 2 3 130; do
    grep -q "^  $code " "$T/table.sluice-feeder" || fail "the table lacks status $code"
done
pass "every --help ends with the same exit status table (0 1 2 3 130/143)"

# ---- the man pages: the synopsis is --help's usage, the table is there ----
if [ -d "$BUILD/man" ]; then
    python3 - "$BUILD" <<'PY' || fail "man pages (above)"
import re, subprocess, sys
build = sys.argv[1]
progs = {"sluice-feeder": "feeder", "sluice-trainer": "trainer", "sluice-record": "tools", "sluice-bench": "tools"}
def deroff(s):
    return re.sub(r"\\f[BIRP]|\\[,/]", "", s).replace("\\-", "-")
bad = []
for prog, d in progs.items():
    page = open("%s/man/%s.1" % (build, prog)).read().split("\n")
    help_ = subprocess.run(["%s/%s/%s" % (build, d, prog), "--help"], capture_output=True, text=True).stdout
    lines = help_.split("\n")
    usage = []
    for i, l in enumerate(lines):
        m = re.match(r"^(Usage:|  or:) +(.*)$", l)
        if m is None:
            break
        usage.append(m.group(2).rstrip())
    first_desc = lines[i + 1] if lines[i] == "" else lines[i]
    syn = page[page.index(".SH SYNOPSIS") + 1:page.index(".SH DESCRIPTION")]
    got, k = [], 0
    while k < len(syn):
        if syn[k].startswith(".B "):
            got.append((syn[k][3:] + " " + deroff(syn[k + 1])).rstrip())
            k += 2
        elif syn[k] == ".br":
            k += 1
        else:
            bad.append("%s: SYNOPSIS holds %r" % (prog, syn[k]))
            k += 1
    if got != usage:
        bad.append("%s: SYNOPSIS %r, --help's usage %r" % (prog, got, usage))
    desc = deroff(page[page.index(".SH DESCRIPTION") + 1])
    if desc != first_desc:
        bad.append("%s: DESCRIPTION starts %r, not --help's %r" % (prog, desc, first_desc))
    if '.SS "Exit status:"' not in page:
        bad.append("%s: no 'Exit status:' in the man page" % prog)
for b in bad:
    print(b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
    pass "man pages: SYNOPSIS is --help's usage lines, DESCRIPTION its first paragraph, the table is there"
else
    echo "skip: no $BUILD/man (help2man not found at configure time)"
fi

# ---- kindred errors, one rule ----
cat >job-nomatch.json <<EOF
{"name": "j", "files": "$T/none-*.txt", "format": "text", "global_batch_size": 2}
EOF
cat >job-badkey.json <<EOF
{"name": "j", "files": "$T/none-*.txt", "format": "text", "bach_size": 2}
EOF
# a file that is not there: 1
expect "feeder: job file missing" 1 "sluice-feeder: error: open($T/absent.json): No such file or directory" \
    "$FEEDER" --job "$T/absent.json" --listen "ipc://$T/f.sock"
expect "feeder: a glob matching no file" 1 "sluice-feeder: error: files: pattern '$T/none-*.txt' matches no file" \
    "$FEEDER" --job job-nomatch.json --listen "ipc://$T/f.sock"
expect "feeder plan: a glob matching no file" 1 "files: pattern '$T/none-*.txt' matches no file" \
    "$FEEDER" plan --job job-nomatch.json --workers 1 --replicas 1
expect "trainer: key file missing" 1 "sluice-trainer: --curve-key: open($T/absent.key): No such file or directory" \
    "$TRAINER" --connect "ipc://$T/f.sock" --job j --curve-key "$T/absent.key" --curve-server-key "$T/absent.pub"
expect "record: input missing" 1 "sluice-record: error: open($T/absent.tfrecord): No such file or directory" \
    "$RECORD" count "$T/absent.tfrecord"
expect "bench: job file missing" 1 "sluice-bench run: --job: open($T/absent.json): No such file or directory" \
    "$BENCH" run --job "$T/absent.json"
expect "bench: a glob matching no file" 1 "no file matches its 'files'" "$BENCH" run --job job-nomatch.json
# what was typed or configured is wrong: 2
expect "feeder: job content refused" 2 "job-badkey.json: unknown key 'bach_size'" \
    "$FEEDER" --job job-badkey.json --listen "ipc://$T/f.sock"
expect "feeder: unknown option" 2 "sluice-feeder: --bogus: unknown option" "$FEEDER" --bogus
expect "trainer: unknown option" 2 "sluice-trainer: --bogus: unknown option" "$TRAINER" --bogus
expect "record: unknown command" 2 "sluice-record: unknown command 'bogus'" "$RECORD" bogus
expect "bench: unknown command" 2 "sluice-bench: unknown command 'bogus'" "$BENCH" bogus

# ---- signals: 143 / 130 before the end; the feeder (a server) 0 ----
for sig in TERM INT; do
    want=$([ $sig = TERM ] && echo 143 || echo 130)
    "$TRAINER" --connect "ipc://$T/nobody.sock" --job j --model none >"$T/out" 2>"$T/err" &
    BG=$!
    sleep 1 # it waits for its feeder's answer (logging nothing till then)
    kill -s $sig "$BG"
    wait "$BG"
    rc=$?
    BG=""
    [ "$rc" = "$want" ] || fail "trainer SIG$sig: exit status $rc, expected $want"
    pass "trainer stopped by SIG$sig while waiting for its feeder: $want"
done
printf 'a\nb\nc\nd\n' >one.txt
cat >job-one.json <<EOF
{"name": "j", "files": "$T/one.txt", "format": "text", "global_batch_size": 2}
EOF
"$FEEDER" --job job-one.json --listen "ipc://$T/f.sock" >"$T/out" 2>"$T/err" &
BG=$!
for _ in $(seq 100); do grep -q "listening" "$T/err" 2>/dev/null && break; sleep 0.1; done
kill -TERM "$BG"
wait "$BG"
rc=$?
BG=""
[ "$rc" = 0 ] || fail "feeder SIGTERM: exit status $rc, expected 0 (a server's stop is its end)"
pass "feeder stopped by SIGTERM: 0"

echo "$PASSED passed, 0 failed"
