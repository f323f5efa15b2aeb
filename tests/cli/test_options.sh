#!/usr/bin/env bash
# CLI tests of the option tables (issue #13): --version on every binary,
# usage errors of sluice-feeder and sluice-trainer (exit 2, the option
# named, the nearest one suggested), job overrides (--set KEY=VALUE, and
# --KEY=VALUE for a job key's exact name only), and --help listing every
# option.
#
# Usage: test_options.sh BUILD_DIR   (holding tools/, feeder/, trainer/)
set -uo pipefail

BUILD="$(cd "${1:?usage: test_options.sh BUILD_DIR}" && pwd)"
FEEDER="$BUILD/feeder/sluice-feeder"
TRAINER="$BUILD/trainer/sluice-trainer"
RECORD="$BUILD/tools/sluice-record"
BENCH="$BUILD/tools/sluice-bench"
for b in "$FEEDER" "$TRAINER" "$RECORD" "$BENCH"; do
    [ -x "$b" ] || { echo "no executable $b" >&2; exit 1; }
done
DOCS="$(cd "$(dirname "$0")/../../docs" && pwd)"
T="$(mktemp -d)"
trap 'rm -rf "$T"' EXIT
cd "$T"
unset TF_CONFIG
PASSED=0

fail() {
    echo "FAIL: $*" >&2
    echo "--- stdout:" >&2; head -c 3000 "$T/out" >&2 2>/dev/null
    echo "--- stderr:" >&2; head -c 3000 "$T/err" >&2 2>/dev/null
    echo "$PASSED passed, 1 failed" >&2
    exit 1
}
pass() { PASSED=$((PASSED + 1)); echo "ok $PASSED - $1"; }

# expect NAME RC TEXT CMD...: exit status RC and TEXT (fixed string) in
# stdout or stderr
expect() {
    local name="$1" want="$2" text="$3"
    shift 3
    "$@" >"$T/out" 2>"$T/err" </dev/null
    local rc=$?
    [ "$rc" = "$want" ] || fail "$name: exit status $rc, expected $want"
    if [ -n "$text" ] && ! cat "$T/out" "$T/err" | grep -qF -- "$text"; then
        fail "$name: no output containing '$text'"
    fi
    pass "$name"
}

# ---- --version on every binary ----
for b in "$RECORD" "$FEEDER" "$TRAINER" "$BENCH"; do
    name=$(basename "$b")
    expect "$name --version" 0 "" "$b" --version
    grep -Eq "^$name [0-9]+\.[0-9]+\.[0-9]+$" "$T/out" || fail "$name --version: no version line"
    grep -Eq '^commit: [0-9a-zA-Z.-]+$' "$T/out" || fail "$name --version: no commit line"
    grep -Eq '^build type: [A-Za-z]*' "$T/out" || fail "$name --version: no build type line"
    grep -Eq '^optional parts: CUDA (yes|no), NCCL (yes|no), ISA-L (yes|no)$' "$T/out" ||
        fail "$name --version: no optional parts line"
    [ ! -s "$T/err" ] || fail "$name --version: wrote to stderr"
    pass "$name --version lines"
done

# ---- sluice-trainer usage errors (exit 2, before connecting anywhere) ----
tr=("$TRAINER" --connect "ipc://$T/none" --job j)
expect "trainer --lr=abc" 2 "sluice-trainer: --lr: not a number: 'abc'" "${tr[@]}" --lr=abc
expect "trainer --lr empty" 2 "sluice-trainer: --lr: not a number: ''" "${tr[@]}" --lr=
expect "trainer --lr 0" 2 "sluice-trainer: --lr: must be in [" "${tr[@]}" --lr 0
expect "trainer --momentum=nan" 2 "--momentum: not a number: 'nan'" "${tr[@]}" --momentum=nan
expect "trainer --momentum=1e999" 2 "--momentum: not a finite number: '1e999'" "${tr[@]}" --momentum=1e999
expect "trainer --workers 0" 2 "--workers: must be an integer in [1, 65536], got '0'" "${tr[@]}" --workers 0
expect "trainer --worker -1" 2 "--worker: must be an integer in [0, 65535], got '-1'" "${tr[@]}" --worker -1
expect "trainer --seed huge" 2 "--seed: must be an integer in [0, 4294967295], got '99999999999999999999'" \
    "${tr[@]}" --seed 99999999999999999999
expect "trainer --step-ms -1" 2 "sluice-trainer: --step-ms: must be in [0, 600000], got '-1'" "${tr[@]}" --step-ms -1
expect "trainer --step-ms huge" 2 "sluice-trainer: --step-ms: must be in [0, 600000], got '1e9'" "${tr[@]}" --step-ms 1e9
expect "trainer --step-ms nan" 2 "sluice-trainer: --step-ms: not a number: 'nan'" "${tr[@]}" --step-ms nan
expect "trainer --step-ms absent" 2 "sluice-trainer: --step-ms needs a value" "${tr[@]}" --step-ms
expect "trainer --credits 4x" 2 "--credits: not an integer: '4x'" "${tr[@]}" --credits 4x
expect "trainer --hidden 16,x" 2 "--hidden: expected sizes" "${tr[@]}" --hidden 16,x
expect "trainer --hidden too many" 2 "--hidden: at most 4 sizes" "${tr[@]}" --hidden 1,2,3,4,5
expect "trainer --model cnn" 2 "--model: expected none, softmax or mlp, got 'cnn'" "${tr[@]}" --model cnn
expect "trainer --jb" 2 "sluice-trainer: --jb: unknown option; did you mean --job?" "$TRAINER" --jb j
expect "trainer --conn (no abbreviations)" 2 "--conn: unknown option; did you mean --connect?" \
    "$TRAINER" --conn "ipc://$T/none" --job j
expect "trainer --quiet=1" 2 "--quiet takes no value" "${tr[@]}" --quiet=1
expect "trainer --lr without a value" 2 "--lr needs a value" "${tr[@]}" --lr
expect "trainer stray argument" 2 "unexpected argument 'stray'" "${tr[@]}" stray
expect "trainer --peers count" 2 "--peers needs one address per worker (2), got 1" \
    "${tr[@]}" --workers 2 --peers 127.0.0.1:1
expect "trainer --ring count" 2 "--ring needs one endpoint per worker (2), got 1" \
    "${tr[@]}" --workers 2 --model mlp --ring "ipc://$T/r0"
expect "trainer --connect empty" 2 "--connect: no endpoint" "$TRAINER" --connect , --job j
expect "trainer 65 feeders" 2 "--connect: at most 64 endpoints" \
    "$TRAINER" --connect "$(seq -s, -f "ipc://$T/f%g" 65)" --job j
expect "trainer --help" 0 "Usage: sluice-trainer" "$TRAINER" --help
for opt in connect job worker workers replicas devices model hidden lr momentum seed input label classes \
    save-weights metrics predictions eval-connect eval-job ring peers rendezvous-timeout mode hash-every \
    log-every progress credits trace trace-feature heartbeat-ms timeout-ms connect-timeout reconnect-s no-shm \
    cluster quiet \
    log-level log-format help version; do
    grep -q -- "--$opt\b" "$T/out" || fail "trainer --help lacks --$opt"
    grep -q -- "--$opt\b" "$DOCS/trainer.md" || fail "docs/trainer.md lacks --$opt"
done
pass "trainer --help and docs/trainer.md list every option"

# ---- sluice-feeder: usage errors and job overrides ----
"$RECORD" gen --output-dir "$T/d" --records 100 --shards 2 --seed 1 --image-bytes 8 --prefix s >/dev/null 2>&1 ||
    fail "sluice-record gen"
cat >"$T/job.json" <<JOB
{"name": "opts", "files": ["$T/d/s-*.tfrecord"],
 "features": {"id": {"dtype": "int64", "shape": []}}, "global_batch_size": 8}
JOB
fd=("$FEEDER" --job "$T/job.json" --listen "ipc://$T/feeder.sock")
plan=("$FEEDER" plan --job "$T/job.json" --workers 1 --replicas 1)
expect "feeder --jb" 2 "sluice-feeder: --jb: unknown option or job key; did you mean --job?" \
    "$FEEDER" --jb "$T/job.json" --listen "ipc://$T/feeder.sock"
expect "feeder --worker (a near miss)" 2 "--worker: unknown option or job key; did you mean --workers?" \
    "${fd[@]}" --worker 2
expect "feeder job key typo" 2 \
    "--global_bach_size: unknown option or job key; did you mean --global_batch_size?" \
    "${fd[@]}" --global_bach_size=16
expect "feeder dotted job key typo" 2 "--shuffle.sed: unknown option or job key; did you mean --shuffle.seed?" \
    "${fd[@]}" --shuffle.sed=3
expect "feeder --set without =" 2 "--set: expected KEY=VALUE" "${fd[@]}" --set global_batch_size
expect "feeder --set unknown key" 2 "--set: unknown job key 'global_bach_size'; did you mean global_batch_size?" \
    "${fd[@]}" --set global_bach_size=16
expect "feeder --set bad value" 2 "--global_batch_size: " "${fd[@]}" --set global_batch_size=-3
expect "feeder --threads=abc" 2 "sluice-feeder: --threads: not an integer: 'abc'" "${fd[@]}" --threads=abc
expect "feeder --report-s huge" 2 "--report-s: must be an integer in [0, 86400]" "${fd[@]}" --report-s 86401
expect "feeder --piece-memory 1P" 2 "--piece-memory: not a byte count" "${fd[@]}" --piece-memory 1P
expect "feeder --quiet=yes" 2 "--quiet takes no value" "${fd[@]}" --quiet=yes
# the remote sources' options (storage/sto_opt.h): bounds, values, the pair rule
expect "feeder --remote-connect-timeout-ms 0" 2 "--remote-connect-timeout-ms: must be an integer in [1, 86400000]" \
    "${fd[@]}" --remote-connect-timeout-ms 0
expect "feeder --remote-stall-timeout-ms huge" 2 "--remote-stall-timeout-ms: must be an integer in [1, 86400000]" \
    "${fd[@]}" --remote-stall-timeout-ms 99999999999999999999
expect "feeder --remote-retries -1" 2 "--remote-retries: must be an integer in [0, 100]" "${fd[@]}" --remote-retries -1
expect "feeder --remote-retries 101" 2 "--remote-retries: must be an integer in [0, 100]" "${fd[@]}" --remote-retries 101
expect "feeder --remote-retries absent" 2 "--remote-retries needs a value" "${fd[@]}" --remote-retries
expect "feeder --remote-redirects x" 2 "--remote-redirects: not an integer: 'x'" "${fd[@]}" --remote-redirects x
expect "feeder --remote-backoff-ms above its max" 2 "remote backoff: first 500 ms, most 100 ms" \
    "${fd[@]}" --remote-backoff-ms 500 --remote-backoff-max-ms 100
expect "feeder --remote-ca-file missing" 2 "remote CA file $T/none.pem: No such file or directory" \
    "${fd[@]}" --remote-ca-file "$T/none.pem"
expect "feeder --remote-cross-host-redirects=1" 2 "--remote-cross-host-redirects takes no value" \
    "${fd[@]}" --remote-cross-host-redirects=1
expect "feeder --s3-path-style=yes" 2 "--s3-path-style takes no value" "${fd[@]}" --s3-path-style=yes
expect "feeder --s3-endpoint absent" 2 "--s3-endpoint needs a value" "${fd[@]}" --s3-endpoint
expect "feeder plan, remote options given (repeated: the last wins)" 0 "global batch" "${plan[@]}" \
    --remote-retries 0 --remote-retries 7 --remote-backoff-ms 0 --remote-backoff-max-ms 0 --remote-ca-file "$T/job.json" \
    --s3-endpoint http://127.0.0.1:1 --s3-region x --s3-path-style --remote-cross-host-redirects
expect "feeder plan, overrides" 0 "global batch 16" "${plan[@]}" --global_batch_size=16 --set epochs=2 \
    --shuffle.seed 3 --set 'shuffle={"buffer": 10}'
expect "feeder plan, the last override wins" 0 "global batch 32" "${plan[@]}" --global_batch_size=16 \
    --set global_batch_size=32
expect "feeder plan, features.* overrides" 0 "global batch 8" "${plan[@]}" "--features.id.shape=[]"
# --join and --advertise (issue #30): what a joining feeder needs, refused
# before anything starts
jn=("$FEEDER" --job "$T/job.json" --listen tcp://127.0.0.1:5599 --feeder-index 1 --feeders 2)
expect "feeder --join with index 0" 2 "--join: --feeder-index 0 is one of the job's first feeders" \
    "${fd[@]}" --feeders 2 --join tcp://127.0.0.1:5555
expect "feeder --join with 65 feeders" 2 "--join: --feeders 65: at most 64 feeders" \
    "${fd[@]}" --feeder-index 64 --feeders 65 --join tcp://127.0.0.1:5555
expect "feeder --join, a bad endpoint" 2 "--join: 'tcp://127.0.0.1:99999': port 99999 is out of range" \
    "${jn[@]}" --join tcp://127.0.0.1:5555,tcp://127.0.0.1:99999
expect "feeder --join, an empty endpoint" 2 "--join 'tcp://127.0.0.1:5555,': an empty endpoint" \
    "${jn[@]}" --join tcp://127.0.0.1:5555,
expect "feeder --join, a wildcard" 2 "--join tcp://*:5555: a wildcard, which cannot be connected to" \
    "${jn[@]}" --join 'tcp://*:5555'
expect "feeder --join, 65 endpoints" 2 "--join: 65 endpoints, at most 64" \
    "${jn[@]}" --join "$(printf 'tcp://127.0.0.1:5555,%.0s' $(seq 64))tcp://127.0.0.1:5555"
expect "feeder --join, --listen a wildcard" 2 \
    "--join: --listen tcp://*:5598 is a wildcard trainers cannot connect to: give --advertise" \
    "$FEEDER" --job "$T/job.json" --listen 'tcp://*:5598' --insecure --feeder-index 1 --feeders 2 \
    --join tcp://127.0.0.1:5555
expect "feeder --advertise a wildcard" 2 "--advertise tcp://0.0.0.0:5598: trainers cannot connect to it" \
    "${jn[@]}" --join tcp://127.0.0.1:5555 --advertise tcp://0.0.0.0:5598
expect "feeder --advertise bad" 2 "--advertise: 'tcp://h:0': " "${jn[@]}" --join tcp://127.0.0.1:5555 \
    --advertise tcp://h:0
expect "feeder --advertise without --join" 2 "--advertise needs --join" "${jn[@]}" --advertise tcp://h:5598
expect "feeder --join with --serve-runs" 2 "--join and --serve-runs do not go together" \
    "${jn[@]}" --join tcp://127.0.0.1:5555 --serve-runs
expect "feeder --help" 0 "Usage: sluice-feeder" "$FEEDER" --help
for opt in job listen feeder-index feeders threads max-piece-bytes piece-memory workers replicas heartbeat-ms \
    report-s timeout-ms idle-exit cluster stats no-shm json set quiet log-level log-format help version \
    remote-connect-timeout-ms remote-stall-timeout-ms remote-retries remote-backoff-ms remote-backoff-max-ms \
    remote-redirects remote-cross-host-redirects remote-ca-file s3-endpoint s3-region s3-path-style join advertise; do
    grep -q -- "--$opt\b" "$T/out" || fail "feeder --help lacks --$opt"
    grep -q -- "--$opt\b" "$DOCS/feeder.md" || fail "docs/feeder.md lacks --$opt"
done
pass "feeder --help and docs/feeder.md list every option"

# ---- the rows sluice-feeder and sluice-trainer share (shared/sl_opt.h):
# the same entry, word for word, in both --help ----
# help_entry FILE OPT: OPT's line of a --help and its continuation lines
help_entry() {
    awk -v opt="--$2" '
        /^  (-., |    )--/ { on = 0; s = $0; sub(/^  (-., |    )/, "", s); split(s, w, /[= ]/); if (w[1] == opt) on = 1 }
        /^        +[^ ]/ && on { print; next }
        on && /^  (-., |    )--/ { print; next }
        { on = 0 }' "$1"
}
"$FEEDER" --help >"$T/feeder.help" 2>&1 || fail "feeder --help"
"$TRAINER" --help >"$T/trainer.help" 2>&1 || fail "trainer --help"
for opt in metrics-listen curve-key insecure no-shm quiet log-level log-format help version; do
    help_entry "$T/feeder.help" "$opt" >"$T/f.entry"
    help_entry "$T/trainer.help" "$opt" >"$T/t.entry"
    [ -s "$T/f.entry" ] || fail "feeder --help: no entry for --$opt"
    cmp -s "$T/f.entry" "$T/t.entry" ||
        fail "--$opt: feeder and trainer --help differ: $(diff "$T/f.entry" "$T/t.entry" | head -c 600)"
done
pass "the shared rows read the same in sluice-feeder and sluice-trainer --help"

# ---- sluice-bench: every subcommand's --help (generated from its sl_opt
# table) names each option once, and docs/bench.md documents each ----
for cmd in run formats feed wire allreduce link seek; do
    expect "sluice-bench $cmd --help" 0 "Usage: sluice-bench $cmd" "$BENCH" "$cmd" --help
    opts=$(grep -oE '^  (-h, |    )--[a-z-]+' "$T/out" | sed 's/.*--//')
    [ "$(echo "$opts" | wc -l)" -ge 4 ] || fail "sluice-bench $cmd --help: too few options: $opts"
    [ -z "$(echo "$opts" | sort | uniq -d)" ] || fail "sluice-bench $cmd --help: an option twice"
    for opt in $opts; do
        grep -q -- "--$opt\b" "$DOCS/bench.md" || fail "docs/bench.md lacks sluice-bench $cmd --$opt"
    done
done
pass "sluice-bench: every subcommand's options in --help and docs/bench.md"

# ---- log lines: an RFC 3339 time on each, --log-level, --log-format json ----
bad=(--job "$T/nonexistent.json" --listen "ipc://$T/never.sock")
for b in "$FEEDER" "$TRAINER"; do
    name=$(basename "$b")
    expect "$name --log-level loud" 2 "--log-level: expected debug, info, warning or error, got 'loud'" \
        "$b" --log-level loud
    expect "$name --log-level empty" 2 "--log-level: expected debug, info, warning or error, got ''" \
        "$b" --log-level=
    expect "$name --log-level missing" 2 "--log-level needs a value" "$b" --log-level
    expect "$name --log-format xml" 2 "--log-format: expected text or json, got 'xml'" "$b" --log-format xml
done
# a feeder that fails at once (its job file is missing) logs one error line
expect "feeder error line, text" 1 "" "$FEEDER" "${bad[@]}"
grep -Eq '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z sluice-feeder: error: .*nonexistent\.json' \
    "$T/err" || fail "feeder error line: not '<RFC 3339 time> sluice-feeder: error: ...'"
pass "feeder error line: time, program, level"
expect "feeder error line, json (the last --log-format wins)" 1 "" "$FEEDER" "${bad[@]}" --log-format text \
    --log-format json
python3 - "$T/err" <<'PY' || fail "feeder --log-format json: not one JSON object per line (see above)"
import json, os, re, sys
lines = open(sys.argv[1]).read().splitlines()
assert lines, "no log line"
for line in lines:
    d = json.loads(line)
    assert set(d) == {"time", "prog", "pid", "level", "msg"}, d
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", d["time"]), d
    assert d["prog"] == "sluice-feeder" and isinstance(d["pid"], int) and d["pid"] > 0, d
assert json.loads(lines[-1])["level"] == "error" and "nonexistent.json" in json.loads(lines[-1])["msg"], lines
PY
pass "feeder --log-format json: one object per line"
# --log-level error hides the info lines of a feeder serving for a second;
# --quiet wins over a lower --log-level
printf 'ab\n' >"$T/lines.txt"
printf '{"name": "t", "files": ["%s"], "format": "text", "global_batch_size": 1, "features": {"line": {"dtype": "string"}}}' \
    "$T/lines.txt" >"$T/text.json"
serve() { timeout -s TERM 1 "$FEEDER" --job "$T/text.json" --listen "ipc://$T/s.sock" --workers 1 --replicas 1 "$@" \
    >"$T/out" 2>"$T/err"; }
serve
grep -Eq '^[0-9TZ:.-]{24} sluice-feeder: info: serving job' "$T/err" || fail "feeder: no info line at the default level"
serve --log-level error
[ ! -s "$T/err" ] || fail "feeder --log-level error: logged $(head -c 300 "$T/err")"
serve -q --log-level debug
[ ! -s "$T/err" ] || fail "feeder -q --log-level debug: logged $(head -c 300 "$T/err")"
serve --log-level warning --log-level info
grep -q ': info: serving job' "$T/err" || fail "feeder: the last --log-level does not win"
pass "feeder --log-level and --quiet"

echo "$PASSED passed, 0 failed"
