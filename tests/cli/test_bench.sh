#!/usr/bin/env bash
# CLI tests of sluice-bench: options, process supervision and the JSON
# schema of `run`, on a tiny generated job. No timing is asserted.
#
# Usage: test_bench.sh BUILD_DIR   (holding tools/, feeder/, trainer/)
set -uo pipefail

BUILD="$(cd "${1:?usage: test_bench.sh BUILD_DIR}" && pwd)"
BENCH="$BUILD/tools/sluice-bench"
RECORD="$BUILD/tools/sluice-record"
[ -x "$BENCH" ] || { echo "no executable $BENCH" >&2; exit 1; }
T="$(mktemp -d)"
BGPID=""
cleanup() {
    [ -n "$BGPID" ] && kill -KILL "$BGPID" 2>/dev/null
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

# expect NAME RC REGEX CMD...: exit status RC and stderr+stdout matching REGEX
expect() {
    local name="$1" want="$2" re="$3"
    shift 3
    "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    [ "$rc" = "$want" ] || fail "$name: exit status $rc, expected $want"
    # grep reads both files itself: `cat | grep -q` under pipefail failed
    # when grep matched in out and quit before cat wrote err (SIGPIPE)
    if [ -n "$re" ] && ! grep -Eqh -- "$re" "$T/out" "$T/err"; then
        fail "$name: no output matching /$re/"
    fi
    pass "$name"
}

# every pid in "started ... (pid N)" lines of a log must be gone
no_leftovers() {
    local log="$1" pid n=0
    for pid in $(sed -n 's/.*started \(feeder\|trainer\) .*(pid \([0-9]*\)).*/\2/p' "$log"); do
        n=$((n + 1))
        if [ -e "/proc/$pid" ] && grep -qa sluice- "/proc/$pid/cmdline" 2>/dev/null; then
            fail "$2: process $pid ($(tr '\0' ' ' <"/proc/$pid/cmdline")) is still running"
        fi
    done
    [ "$n" -gt 0 ] || fail "$2: no 'started ... (pid N)' lines in the log"
}

# ---- tiny job ----
"$RECORD" gen --output-dir "$T/d" --records 3000 --shards 2 --seed 1 --image-bytes 32 --floats 8 \
    --prefix s >/dev/null 2>&1 || fail "sluice-record gen"
cat >"$T/job.json" <<EOF
{"name": "tiny", "files": ["$T/d/s-*.tfrecord"], "format": "tfrecord",
 "features": {"dense": {"dtype": "float32", "shape": [8]}, "label": {"dtype": "int64", "shape": []}},
 "global_batch_size": 64, "epochs": 1, "prefetch": 4}
EOF

# verdict.py RUN_JSON: every config's "limited by" is the rule of docs/bench.md
# recomputed from its own figures; raw ZeroMQ counts only the pieces sent by
# copy (copied_to_raw_zmq = wire_to_raw_zmq x (1 - shm_share)), so a run
# whose pieces all went through shared memory never names it
cat >"$T/verdict.py" <<'PY'
import json, re, sys
doc = json.loads(open(sys.argv[1]).read())
for c in doc["configs"]:
    r, shm = c["ratios"], c["shm_share"]
    copied = r["copied_to_raw_zmq"]
    assert abs(copied - r["wire_to_raw_zmq"] * (1 - shm)) <= 1e-4 * max(copied, 1e-9), c
    if shm == 1.0:
        assert copied == 0 and "ZeroMQ" not in c["limited_by"], c
    limits = [("read() of the files", r["disk_to_read"]), ("inflate", r["inflated_to_inflate"]),
              ("raw ZeroMQ", copied), ("memcpy", r["wire_to_memcpy"])]
    name, best = max(((n, v) for n, v in limits if v is not None), key=lambda nv: nv[1])
    # the cores' share over the stream when the stream was long enough to
    # charge the processes' CPU to it, else over the whole run
    us = c["cpu_utilization_stream"]
    util = (us if us is not None else c["cpu_utilization"])["median"]
    stall, stage = c["input_stall_pct"]["median"], c["bottleneck_stage"]
    if best >= 0.8 and name == "raw ZeroMQ" and shm > 0:
        want = "raw ZeroMQ (%.2fx of it by the %.0f%% of pieces sent by copy)" % (best, 100 * (1 - shm))
    elif best >= 0.8:
        want = "%s (%.2fx of it)" % (name, best)
    elif util >= 0.85:
        want = "CPU: %.0f%% of %d cores busy" % (100 * util, doc["cpus"])
        want += "; feeder's busiest stage: " + stage if stage else ""
    elif stall < 5:
        want = ("trainer compute (input stall %.1f%%)" if doc["model"] != "none" else
                "the trainer's receiving of pieces (--model none; input stall %.1f%%)") % stall
    else:
        # several feeders: the one the trainers waited for most (their own
        # attribution, medians over the runs) and its share of the wait
        wf = c["input_wait_by_feeder_s"]
        assert len(wf) == c["feeders"], c
        who = ""
        if len(wf) > 1 and sum(wf) > 0:
            j = max(range(len(wf)), key=lambda k: (wf[k], -k))
            who = "; feeder %d holds %.0f%% of the wait" % (j, 100 * wf[j] / sum(wf))
        busy = c.get("feeder_busy")
        top = max(busy["decode_thread"], busy["serve"], busy["zmq_io"]) if busy else None
        if stage and top is not None and top < 0.8:
            want = ("no feeder thread (the busiest at %.0f%% of a core; busiest stage %s): waits between threads, "
                    "or other processes on the cores (input stall %.1f%%%s)" % (100 * top, stage, stall, who))
        elif stage:
            want = "feeder stage %s (its busiest; input stall %.1f%%%s)" % (stage, stall, who)
        else:
            want = "feeder (stage breakdown unavailable; input stall %.1f%%%s)" % (stall, who)
    # the JSON rounds the medians the C verdict printed (57.849... shows as
    # 57.85): the words must match, each number to its last printed digit
    num = r"\d+(?:\.\d+)?"
    got = c["limited_by"]
    assert re.sub(num, "#", got) == re.sub(num, "#", want), (got, want, c)
    # (a whole number, a percentage of rounded medians, may be 1 off)
    assert all(abs(float(a) - float(b)) <= (0.1001 if "." in a else 1) for a, b in
               zip(re.findall(num, got), re.findall(num, want))), (got, want, c)
    print("verdict ok: %d feeder(s)%s, shm %.2f: limited by %s" % (c["feeders"], " CURVE" * c["curve"], shm,
                                                                     c["limited_by"]))
PY

# charts.py OUT shm|copy: OUT/run.gp as gnuplot gets it: the key below the
# plot (it covers no point), every series and y axis says its axis, every y
# tick label is a plain or SI-suffixed number (no e-notation) at the value
# it names, the top tick above the highest point, and raw ZeroMQ drawn as a
# limit only when the pieces went by copy
cat >"$T/charts.py" <<'PY'
import re, sys
out, path = sys.argv[1], sys.argv[2]
gp = open(out + "/run.gp").read().splitlines()
rows = [list(map(float, l.split())) for l in open(out + "/run.dat") if not l.startswith("#")]
assert gp.count("set key outside below left Left reverse maxcols 1 height 1.5") == 1, gp
title = {"shm": "pieces in shared memory", "copy": "pieces by copy"}[path]
assert any(l.startswith("set title 'sluice-bench run: tiny (ipc, %s)'" % title) for l in gp), gp
plots = [l for l in gp if l.startswith("plot ")]
series = [t for p in plots for t in re.findall(r"title '([^']*)'", p)]
assert len(series) == 4 + 6 * (len(plots) == 3), series
for t in series[:4]:
    assert t.endswith("(left axis)") or "(right axis)" in t, t
raw = series[2]
want = {"shm": "raw ZeroMQ MB/s (right axis): reference for the copy path, not a limit here",
        "copy": "raw ZeroMQ MB/s (right axis): the limit of pieces by copy"}[path]
assert raw == want, raw
for l in gp:
    if re.match(r"set y2?label", l):
        assert l.endswith("(left axis)'") or l.endswith("(right axis)'"), l
SI = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
# (axis, columns of run.dat it shows), in the order the script sets them
shows = [("y", [1, 2, 3]), ("y2", [4, 5]), ("y", [6, 7, 8]), ("y", None)]
ranges = [l for l in gp if re.match(r"set y2?range", l)]
tics = [l for l in gp if re.match(r"set y2?tics \(", l)]
assert len(ranges) == len(tics) == 1 + len(plots), (ranges, tics)
for (axis, cols), rl, tl in zip(shows, ranges, tics):
    assert rl.startswith("set %srange [0:" % axis) and tl.startswith("set %stics (" % axis), (rl, tl)
    top = float(rl[rl.index(":") + 1:-1])
    ticks = re.findall(r"'([^']*)' ([0-9.]+)", tl)
    values = [float(v) for _, v in ticks]
    assert values[0] == 0 and abs(values[-1] - top) <= 1e-9 * top, tl
    step = values[1] - values[0]
    assert all(abs(b - a - step) <= 1e-9 * top for a, b in zip(values, values[1:])), tl
    for label, v in ticks:
        m = re.fullmatch(r"(0|[0-9]+(?:\.[0-9]*[1-9])?)([kMGT]?)", label)
        assert m and "e" not in label, label
        assert abs(float(m.group(1)) * SI[m.group(2)] - float(v)) <= 1e-9 * top, (label, v)
    data = [r[c] for r in rows for c in cols] if cols else [sum(r[9:14]) for r in rows]
    assert max(data) < top, (axis, max(data), top)
print("charts ok: %d plots, %d series" % (len(plots), len(series)))
PY

# ---- help and usage errors ----
expect "help" 0 "Commands:" "$BENCH" --help
for cmd in formats feed run wire allreduce seek images; do
    expect "$cmd --help" 0 "Usage: sluice-bench $cmd" "$BENCH" "$cmd" --help
    expect "help $cmd" 0 "Usage: sluice-bench $cmd" "$BENCH" help "$cmd"
done
expect "no command" 2 "Usage:" "$BENCH"
expect "unknown command" 2 "unknown command 'nope'" "$BENCH" nope
expect "help with no command" 0 "^Usage: sluice-bench COMMAND" "$BENCH" help
expect "help nope" 2 "unknown command 'nope'" "$BENCH" help nope
expect "run without --job" 2 "--job is required" "$BENCH" run
expect "run --feeders 0" 2 "--feeders: must be an integer in \[1, 16\], got '0'" \
    "$BENCH" run --job job.json --feeders 1,0
expect "run --feeders x" 2 "--feeders: not an integer: 'x'" "$BENCH" run --job job.json --feeders x
expect "run --transport udp" 2 "--transport: expected ipc or tcp, got 'udp'" \
    "$BENCH" run --job job.json --transport udp
expect "run --repeat -1" 2 "--repeat: must be an integer in \[1, 32\], got '-1'" "$BENCH" run --job job.json --repeat -1
expect "run --duration 0" 2 "--duration: must be in \[0.1, 86400\], got '0'" "$BENCH" run --job job.json --duration 0
expect "run --model" 2 "--model: expected none or mlp, got 'cnn'" "$BENCH" run --job job.json --model cnn
expect "run --epochs with --duration" 2 "exclude each other" \
    "$BENCH" run --job job.json --epochs 1 --duration 1
expect "run --plot without --out" 2 "--plot needs --out" "$BENCH" run --job job.json --plot
expect "run unknown option" 2 "sluice-bench run: --bogus: unknown option" "$BENCH" run --job job.json --bogus
expect "run --workers missing value" 2 "--workers needs a value" "$BENCH" run --job job.json --workers
# files that are not there are a data error (1), as in sluice-feeder; a job
# that is not there too (issue #24 item 13: one rule for all four programs)
expect "run job without files" 1 "no file matches" "$BENCH" run --job job.json --files=/nonexistent/x*
expect "run job file missing" 1 "sluice-bench run: --job: open\(/nonexistent/job.json\): No such file or directory" \
    "$BENCH" run --job /nonexistent/job.json
expect "wire --tensors 99" 2 "--tensors: must be an integer in \[1, 64\], got '99'" "$BENCH" wire --tensors 99
expect "allreduce --procs 1" 2 "--procs: must be an integer in \[2, 16\], got '1'" "$BENCH" allreduce --procs 1
expect "allreduce --transport" 2 "--transport: expected ipc or tcp" "$BENCH" allreduce --transport x
expect "link without an end" 2 "give one of --push and --pull" "$BENCH" link
expect "link with both ends" 2 "give one of --push and --pull" "$BENCH" link --push ipc://a --pull ipc://b
expect "link --push empty" 2 "--push needs a value" "$BENCH" link --push ""
expect "link --size 0" 2 "--size" "$BENCH" link --push ipc://a --size 0
expect "link --size huge" 2 "--size" "$BENCH" link --push ipc://a --size 2000000000
expect "link --count 1" 2 "--count" "$BENCH" link --pull ipc://a --count 1
expect "seek --policy x" 2 "--policy: expected auto, off, file, data or hint, got 'x'" "$BENCH" seek --policy x
expect "seek --steps 0" 2 "--steps: must be an integer in \[1, 1099511627776\], got '0'" "$BENCH" seek --steps 0
expect "seek, a job the plan refuses" 1 "FILE sharding needs at least 4 files, found 3" \
    "$BENCH" seek --files 3 --workers 4 --policy file
expect "link --count -5" 2 "--count" "$BENCH" link --pull ipc://a --count -5
expect "link, nobody sends" 1 "message 0 of 3: none came in time" "$BENCH" link --pull "ipc://$T/none.sock" \
    --count 3 --timeout-s 1

# ---- every subcommand's options on sl_opt: hostile values, the same words ----
# huge, negative, empty, absent, junk, the =VALUE form, a flag with a value
HUGE=99999999999999999999999
expect "allreduce --floats huge" 2 "sluice-bench allreduce: --floats: must be an integer in \[16, 268435456\], got '$HUGE'" \
    "$BENCH" allreduce --floats "$HUGE"
expect "allreduce --iters -1" 2 "--iters: must be an integer in \[1, 100000\], got '-1'" "$BENCH" allreduce --iters -1
expect "allreduce --repeat absent" 2 "sluice-bench allreduce: --repeat needs a value" "$BENCH" allreduce --repeat
expect "allreduce --procs empty" 2 "--procs: not an integer: ''" "$BENCH" allreduce --procs=
expect "allreduce --procs 2,,4" 2 "--procs: not an integer: ''" "$BENCH" allreduce --procs 2,,4
expect "allreduce --procs 17 of them" 2 "--procs: at most 16 comma-separated integers" \
    "$BENCH" allreduce --procs "$(printf '2,%.0s' $(seq 16))2"
expect "allreduce --json=1" 2 "--json takes no value" "$BENCH" allreduce --json=1
expect "wire --sizes huge" 2 "--sizes: must be an integer in \[1, 268435456\], got '$HUGE'" "$BENCH" wire --sizes "4096,$HUGE"
expect "wire --sizes 0" 2 "--sizes: must be an integer in \[1, 268435456\], got '0'" "$BENCH" wire --sizes 0
expect "wire --repeat=33" 2 "--repeat: must be an integer in \[1, 32\], got '33'" "$BENCH" wire --repeat=33
expect "wire --transport empty" 2 "--transport: expected ipc or tcp, got ''" "$BENCH" wire --transport=
expect "wire --tensors absent" 2 "--tensors needs a value" "$BENCH" wire --tensors
expect "link --timeout-s 0" 2 "--timeout-s: must be an integer in \[1, 86400\], got '0'" \
    "$BENCH" link --pull ipc://a --timeout-s 0
expect "link --count huge" 2 "--count: must be an integer in \[2, 1099511627776\], got '$HUGE'" \
    "$BENCH" link --pull ipc://a --count "$HUGE"
expect "link --size 1e3" 2 "--size: not an integer: '1e3'" "$BENCH" link --push ipc://a --size 1e3
expect "link --pull absent" 2 "--pull needs a value" "$BENCH" link --pull
expect "seek --files -1" 2 "--files: must be an integer in \[1, 10000000\], got '-1'" "$BENCH" seek --files -1
expect "seek --records huge" 2 "--records: must be an integer in \[1, 1000000000\], got '$HUGE'" \
    "$BENCH" seek --records "$HUGE"
expect "seek --scales 9 of them" 2 "--scales: at most 8 comma-separated integers" "$BENCH" seek --scales 1,2,3,4,5,6,7,8,9
expect "seek --scales 0" 2 "--scales: must be an integer in \[1, 100000\], got '0'" "$BENCH" seek --scales 1,0
expect "seek --batch 0x10" 2 "--batch: not an integer: '0x10'" "$BENCH" seek --batch 0x10
expect "seek --shuffle -5" 2 "--shuffle: must be an integer in \[0, 268435456\], got '-5'" "$BENCH" seek --shuffle -5
expect "seek --parallel-reads 4097" 2 "--parallel-reads: must be an integer in \[1, 4096\], got '4097'" \
    "$BENCH" seek --parallel-reads 4097
expect "seek --workers 65537" 2 "--workers: must be an integer in \[1, 65536\], got '65537'" "$BENCH" seek --workers 65537
expect "seek --replicas +3" 2 "--replicas: not an integer: '\\+3'" "$BENCH" seek --replicas +3
expect "seek --repeat absent" 2 "--repeat needs a value" "$BENCH" seek --repeat
expect "seek --polcy (a near miss)" 2 "sluice-bench seek: --polcy: unknown option; did you mean --policy?" \
    "$BENCH" seek --polcy file
expect "run --epochs 0" 2 "--epochs: must be an integer in \[1, 1000000\], got '0'" "$BENCH" run --job job.json --epochs 0
expect "run --warmup 11" 2 "--warmup: must be an integer in \[0, 10\], got '11'" "$BENCH" run --job job.json --warmup 11
expect "run --threads huge" 2 "--threads: must be an integer in \[1, 64\], got '$HUGE'" \
    "$BENCH" run --job job.json --threads "$HUGE"
expect "run --replicas 65" 2 "--replicas: must be an integer in \[1, 64\], got '65'" "$BENCH" run --job job.json --replicas 65
expect "run --duration nan" 2 "--duration: not a number: 'nan'" "$BENCH" run --job job.json --duration nan
expect "run --duration 1e999" 2 "--duration: not a finite number: '1e999'" "$BENCH" run --job job.json --duration 1e999
expect "run --feeders 9 of them" 2 "--feeders: at most 8 comma-separated integers" \
    "$BENCH" run --job job.json --feeders 1,1,1,1,1,1,1,1,1
expect "run --model empty" 2 "--model: expected none or mlp, got ''" "$BENCH" run --job job.json --model=
expect "run --job absent" 2 "sluice-bench run: --job needs a value" "$BENCH" run --job
expect "run 33 job overrides" 2 "at most 32 job overrides" "$BENCH" run --job job.json $(seq -f '--k%g=1' 33)
expect "run stray argument" 2 "sluice-bench run: unexpected argument 'stray'" "$BENCH" run --job job.json stray
expect "feed --job absent" 2 "sluice-bench feed: --job needs a value" "$BENCH" feed --job
expect "feed --transport udp" 2 "sluice-bench feed: --transport: expected ipc or tcp, got 'udp'" \
    "$BENCH" feed --job job.json --transport udp
expect "feed --threads 257" 2 "--threads: must be an integer in \[1, 256\], got '257'" "$BENCH" feed --job job.json --threads 257
expect "formats --repeat huge" 2 "--repeat: must be an integer in \[1, 64\], got '$HUGE'" "$BENCH" formats --repeat "$HUGE"
expect "formats --min-time -1" 2 "--min-time: must be in \[0, 3600\], got '-1'" "$BENCH" formats --min-time -1
expect "formats --file absent" 2 "--file needs a value" "$BENCH" formats --file
expect "formats --once empty" 2 "--once: expected read-crc, scan, scan-read or scan-auto, got ''" "$BENCH" formats --once=
# a repeated option: the last one wins (seek is quick: step 1000, not 10)
expect "seek --steps twice" 0 '"bench":"seek"' "$BENCH" seek --files 8 --records 100 --batch 16 --workers 2 \
    --replicas 2 --shuffle 50 --steps 10 --steps=1000 --scales 1 --scales 10 --repeat 1 --json
python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["scale"] for r in rows] == [10] and rows[0]["seq"] == 2000, rows
' "$T/out" || fail "seek --steps twice: not the last value"
pass "seek: a repeated option, the last one wins"
# --help lists every option of every subcommand, in one layout
for spec in "feed:job feeders workers replicas threads transport no-shm curve repeat json help" \
    "run:job feeders workers replicas threads transport epochs duration model no-shm curve repeat warmup out json plot help" \
    "formats:file features images labels scratch repeat min-time batch size once json help" \
    "wire:sizes tensors transport repeat json help" "allreduce:procs floats iters transport repeat curve json help" \
    "link:push pull size count timeout-s help" \
    "seek:files records scales batch shuffle parallel-reads workers replicas policy hint per-replica drop-remainder steps repeat no-baseline json help" \
    "images:data threads epochs repeat rounds shards size no-feeder json help"; do
    cmd=${spec%%:*}
    expect "$cmd --help" 0 "^Usage: sluice-bench $cmd" "$BENCH" "$cmd" --help
    for opt in ${spec#*:}; do
        grep -Eq -- "^  (-h, |    )--$opt(=[A-Z]+)? " "$T/out" || fail "$cmd --help lacks --$opt"
    done
    n=$(grep -Ec -- '^  (-h, |    )--[a-z]' "$T/out")
    [ "$n" = "$(echo ${spec#*:} | wc -w)" ] || fail "$cmd --help: $n options, expected $(echo ${spec#*:} | wc -w)"
done
pass "every subcommand's --help lists its options, each once, in sl_opt's layout"

# ---- feed: a short run, its note and its JSON ----
expect "feed --threads 0" 2 "sluice-bench feed: --threads: must be an integer in \[1, 256\], got '0'" \
    "$BENCH" feed --job job.json --threads 0
# numbers are checked whole: atoi took '1x' as 1, '-1' and '99999999999' as what they wrapped to
expect "feed --workers 1x" 2 "sluice-bench feed: --workers: not an integer: '1x'" \
    "$BENCH" feed --job job.json --workers 1x
expect "feed --replicas -1" 2 "sluice-bench feed: --replicas: must be an integer in \[1, 256\], got '-1'" \
    "$BENCH" feed --job job.json --replicas -1
expect "feed --repeat huge" 2 "sluice-bench feed: --repeat: must be an integer in \[1, 64\], got '99999999999'" \
    "$BENCH" feed --job job.json --repeat 99999999999
expect "feed --feeders 1,x" 2 "sluice-bench feed: --feeders: not an integer: 'x'" \
    "$BENCH" feed --job job.json --feeders 1,x
expect "feed --feeders 9 of them" 2 "--feeders: at most 8 comma-separated integers" \
    "$BENCH" feed --job job.json --feeders 1,1,1,1,1,1,1,1,1
expect "feed --json" 0 "note: a run moves only 0.1 MB" "$BENCH" feed --job job.json --repeat 1 --threads 1 --json
python3 - "$T/out" <<'PY' || fail "feed --json: schema (see above)"
import json, sys
doc = json.loads(open(sys.argv[1]).read())
assert doc["bench"] == "feed" and (doc["feeders"], doc["workers"], doc["replicas"]) == (1, 1, 1), doc
for k in ("pieces_per_s", "records_per_s", "gb_per_s", "raw_zmq_gb_per_s", "ratio", "piece_memory_bound_mb"):
    assert isinstance(doc[k], (int, float)) and doc[k] > 0, (k, doc[k])
# the mean tensor bytes of a piece: 3000 rows of 40 bytes (8 floats, an
# int64) in ceil(3000 / 64) = 47 pieces
assert doc["piece_bytes"] == round(3000 * 40 / 47), doc["piece_bytes"]
assert doc["shm_share"] == 1.0, doc  # one host: every piece in shared memory
assert doc["curve"] is None, doc  # no --curve: no CURVE figures
PY
pass "feed --json: schema"
pass "feed without --curve: curve null"
expect "feed --no-shm --json" 0 "" "$BENCH" feed --job job.json --repeat 1 --threads 1 --no-shm --json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["shm_share"] == 0.0, d' "$T/out" ||
    fail "feed --no-shm: pieces went in shared memory"
pass "feed --no-shm: by copy"

# ---- --curve: every configuration in the clear and with CURVE ----
expect "feed --help names --curve" 0 "--curve +measure each configuration twice" "$BENCH" feed --help
expect "run --help names --curve" 0 "--curve +measure each feeder count twice" "$BENCH" run --help
expect "run --help names --no-shm" 0 "--no-shm +pieces by copy" "$BENCH" run --help
expect "feed --curve=yes" 2 "sluice-bench feed: --curve takes no value" "$BENCH" feed --job job.json --curve=yes
expect "feed --curve-key=FILE" 2 "--curve-key is not a job key" "$BENCH" feed --job job.json --curve --curve-key=x.key
expect "feed --curve-allow=DIR" 2 "--curve-allow is not a job key" "$BENCH" feed --job job.json --curve-allow=/tmp
expect "feed --insecure=1" 2 "--insecure is not a job key" "$BENCH" feed --job job.json --insecure=1
expect "feed --curve without --job" 2 "--job is required" "$BENCH" feed --curve
expect "run --curve=1" 2 "sluice-bench run: --curve takes no value" "$BENCH" run --job job.json --curve=1
expect "run --no-shm=0" 2 "sluice-bench run: --no-shm takes no value" "$BENCH" run --job job.json --no-shm=0
expect "run --curve-key=FILE" 2 "'--curve-key=k' is not a job key" "$BENCH" run --job job.json --curve-key=k
expect "run --curve --plot" 2 "--plot draws one line per feeder count .* use --json" \
    "$BENCH" run --job job.json --curve --plot --out "$T/o-curve"
[ -e "$T/o-curve" ] && fail "run --curve --plot: refused, yet wrote $T/o-curve"
mkdir -p "$T/tmp"
# shared memory (pieces never cross the socket), ipc; --curve given twice is --curve
expect "feed --curve --json" 0 "" env TMPDIR="$T/tmp" \
    "$BENCH" feed --job job.json --repeat 1 --threads 1 --curve --curve --json
python3 - "$T/out" 1.0 <<'PY' || fail "feed --curve --json (see above)"
import json, sys
doc = json.loads(open(sys.argv[1]).read())
share = float(sys.argv[2])
c = doc["curve"]
assert set(c) == {"shm_share", "pieces_per_s", "records_per_s", "gb_per_s", "raw_zmq_gb_per_s", "ratio",
                  "ratio_to_plaintext", "raw_ratio_to_plaintext", "feeder_rss_anon_mb", "feeder_rss_max_mb",
                  "sodium_box_gb_per_s", "sodium_open_gb_per_s"}, c
assert doc["shm_share"] == share and c["shm_share"] == share, doc
for k in ("pieces_per_s", "records_per_s", "gb_per_s", "raw_zmq_gb_per_s", "ratio", "ratio_to_plaintext",
          "raw_ratio_to_plaintext", "feeder_rss_max_mb"):
    assert isinstance(c[k], (int, float)) and c[k] > 0, (k, c[k])
# the same pieces, so the same records each second as the bytes
per_gb, curve_per_gb = doc["records_per_s"] / doc["gb_per_s"], c["records_per_s"] / c["gb_per_s"]
assert abs(curve_per_gb - per_gb) <= 0.01 * per_gb, doc
assert abs(c["ratio_to_plaintext"] - c["gb_per_s"] / doc["gb_per_s"]) < 0.01 * c["ratio_to_plaintext"] + 1e-6, doc
assert abs(c["raw_ratio_to_plaintext"] - c["raw_zmq_gb_per_s"] / doc["raw_zmq_gb_per_s"]) < 0.01 * c["raw_ratio_to_plaintext"] + 1e-6, doc
# CURVE cannot beat the plaintext raw pair by much, nor libsodium's one core
# (measured at another moment on a shared machine: a wide margin)
assert c["raw_zmq_gb_per_s"] < 1.5 * doc["raw_zmq_gb_per_s"], doc
box, opn = c["sodium_box_gb_per_s"], c["sodium_open_gb_per_s"]
assert (box is None) == (opn is None), c
if box is not None:
    assert 0.001 < box < 100 and 0.001 < opn < 100, c
    assert c["raw_zmq_gb_per_s"] < 3 * min(box, opn), c
PY
pass "feed --curve --json: the curve object"
[ -z "$(ls -A "$T/tmp")" ] || fail "feed --curve left its scratch folder (keys): $(ls -A "$T/tmp")"
pass "feed --curve: scratch folder and keys removed"
# the copy path over tcp on 127.0.0.1
expect "feed --curve --no-shm tcp" 0 "" \
    "$BENCH" feed --job job.json --repeat 1 --threads 1 --curve --no-shm --transport tcp --json
python3 - "$T/out" 0.0 <<'PY' || fail "feed --curve --no-shm (see above)"
import json, sys
doc = json.loads(open(sys.argv[1]).read())
assert doc["transport"] == "tcp" and doc["shm_share"] == 0.0 and doc["curve"]["shm_share"] == 0.0, doc
assert doc["curve"]["gb_per_s"] > 0 and doc["curve"]["raw_zmq_gb_per_s"] > 0, doc
PY
pass "feed --curve --no-shm --transport tcp: by copy, both ways"
expect "feed table --curve" 0 "CURVE / plaintext: feeders [0-9.]+x, raw ZeroMQ [0-9.]+x" \
    "$BENCH" feed --job job.json --repeat 1 --threads 1 --curve
grep -Eq "^  1 CURVE +[0-9]+" "$T/out" || fail "feed table --curve: no '1 CURVE' row"

expect "run --curve --no-shm --json" 0 "" "$BENCH" run --job job.json --feeders 1,2 --repeat 2 --warmup 0 \
    --epochs 2 --curve --no-shm --json --out "$T/oc"
python3 - "$T/out" <<'PY' || fail "run --curve --json (see above)"
import json, sys
doc = json.loads(open(sys.argv[1]).read())
assert doc["curve"] is True and doc["no_shm"] is True, doc
cs = doc["configs"]
assert [(c["feeders"], c["curve"]) for c in cs] == [(1, False), (1, True), (2, False), (2, True)], cs
for plain, curve in zip(cs[0::2], cs[1::2]):
    assert plain["shm_share"] == 0.0 and curve["shm_share"] == 0.0, (plain, curve)
    assert plain["piece_bytes"] == curve["piece_bytes"], (plain, curve)
    assert plain["ratios"]["wire_to_plaintext"] is None and plain["ratios"]["raw_zmq_to_plaintext"] is None
    assert plain["limits"]["sodium_box_mb_per_s"] is None and plain["limits"]["sodium_open_mb_per_s"] is None
    r = curve["ratios"]
    want = curve["wire_mb_per_s"]["median"] / plain["wire_mb_per_s"]["median"]
    assert abs(r["wire_to_plaintext"] - want) <= 1e-3 * want, (r, want)
    want = curve["limits"]["raw_zmq_mb_per_s"]["median"] / plain["limits"]["raw_zmq_mb_per_s"]["median"]
    assert abs(r["raw_zmq_to_plaintext"] - want) <= 1e-3 * want, (r, want)
    lim = curve["limits"]
    assert (lim["sodium_box_mb_per_s"] is None) == (lim["sodium_open_mb_per_s"] is None), lim
    if lim["sodium_box_mb_per_s"] is not None:
        assert lim["sodium_box_mb_per_s"] > 0 and lim["sodium_open_mb_per_s"] > 0, lim
    assert curve["runs"] == 2 and curve["samples_per_s"]["median"] > 0
    # issue #25 item 5: the path, and every limit at the piece size; the
    # CURVE result's CURVE limit is its own raw ZeroMQ, its ipc and tcp
    # limits its plaintext pair's
    assert plain["path"] == "copy" and curve["path"] == "copy", (plain, curve)
    pl, cl = plain["limits"], curve["limits"]
    assert pl["raw_zmq_ipc_mb_per_s"] == pl["raw_zmq_mb_per_s"]["median"], pl
    assert cl["raw_zmq_curve_mb_per_s"] == cl["raw_zmq_mb_per_s"]["median"], cl
    assert cl["raw_zmq_ipc_mb_per_s"] == pl["raw_zmq_ipc_mb_per_s"], (pl, cl)
    assert cl["raw_zmq_tcp_mb_per_s"] == pl["raw_zmq_tcp_mb_per_s"] > 0, (pl, cl)
    assert pl["raw_zmq_curve_mb_per_s"] > 0, pl  # measured for the plaintext result as well
PY
pass "run --curve --no-shm --json: plaintext and CURVE per feeder count"
python3 "$T/verdict.py" "$T/out" || fail "run --curve --no-shm: a verdict against the rule (see above)"
pass "run --curve --no-shm: limited by, by the rule (raw ZeroMQ counted whole: every piece by copy)"
# the CURVE runs' feeders served CURVE to the allowed trainer key alone; the plaintext ones did not
for f in "$T"/oc/logs/f1-curve-r*-feeder-0.log "$T"/oc/logs/f2-curve-r*-feeder-1.log; do
    grep -q "CURVE: .* 1 trainer keys allowed" "$f" || fail "run --curve: $f says no CURVE"
    grep -Eq "CURVE: [0-9]+ trainer connections accepted, 0 refused" "$f" || fail "run --curve: $f: no acceptance"
done
for f in "$T"/oc/logs/f1-r*-feeder-0.log; do
    grep -q "CURVE" "$f" && fail "run --curve: plaintext run's $f has CURVE"
done
pass "run --curve: the CURVE runs' feeders used CURVE, the plaintext ones did not"
expect "run --curve table" 0 "CURVE / plaintext: wire [0-9.]+x, raw ZeroMQ [0-9.]+x" \
    "$BENCH" run --job job.json --repeat 1 --warmup 0 --epochs 1 --curve
grep -Eq "^ 1 CURVE " "$T/out" || fail "run --curve table: no '1 CURVE' row"
grep -Eq "^    path: shared memory \(every piece read in the feeder's pool; only a header crosses ipc\), CURVE on the headers$" "$T/out" ||
    fail "run --curve table: no 'path: shared memory ... CURVE' line"
grep -Eq "^    limits here at [0-9]+ B: raw ZeroMQ ipc [0-9]+ MB/s, tcp [0-9]+ MB/s, CURVE \(ipc\) [0-9]+ MB/s$" "$T/out" ||
    fail "run --curve table: no 'limits here' line"
grep -Eq "^    wire vs raw ZeroMQ ipc [0-9.]+x, tcp [0-9.]+x, CURVE [0-9.]+x$" "$T/out" ||
    fail "run --curve table: no 'wire vs raw ZeroMQ ipc, tcp, CURVE' line"
pass "run table: the path and the machine's limits (ipc, tcp, CURVE) at the piece size"
no_leftovers "$T/err" "run --curve table"

# ---- the JSON schema of run ----
expect "run --json" 0 "" "$BENCH" run --job job.json --feeders 1,2 --repeat 2 --warmup 0 --epochs 2 --json
python3 - "$T/out" <<'PY' || fail "run --json: schema (see above)"
import json, sys
doc = json.loads(open(sys.argv[1]).read())
num = (int, float)
def stat(v, where):
    assert isinstance(v, dict) and set(v) == {"median", "min", "max"}, where
    assert all(isinstance(v[k], num) for k in v), where
    assert v["min"] <= v["median"] <= v["max"], where
top = {"bench": str, "version": str, "job": str, "job_name": str, "transport": str, "workers": int,
       "replicas": int, "model": str, "repeat": int, "warmup": int, "cpus": int,
       "stage_breakdown": bool, "data": dict, "limits": dict, "configs": list}
for k, t in top.items():
    assert isinstance(doc.get(k), t), "top-level %s: %r" % (k, doc.get(k))
assert doc["bench"] == "run" and doc["epochs"] == 2 and doc["duration_s"] is None
assert doc["curve"] is False and doc["no_shm"] is False
assert doc["threads"] is None  # not given: the feeder's own default
# how busy the machine was (issue #25 item 5): the 1-minute load average before the first run and after the last
la = doc["load_avg"]
assert set(la) == {"before", "after"} and all(isinstance(v, num) and v >= 0 for v in la.values()), la
d = doc["data"]
assert d["files"] == 2 and d["records"] == 3000 and d["compressed"] is False and d["inflated_bytes"] is None
assert isinstance(d["disk_bytes"], int) and d["disk_bytes"] > 0
assert isinstance(doc["limits"]["read_mb_per_s"], num) and doc["limits"]["inflate_mb_per_s"] is None
assert doc["limits"]["inflate_impl"] is None
assert [c["feeders"] for c in doc["configs"]] == [1, 2]
for c in doc["configs"]:
    assert c["runs"] == 2
    for k in ("samples_per_s", "disk_mb_per_s", "wire_mb_per_s", "pieces_per_s", "input_stall_pct",
              "cpu_utilization"):
        stat(c[k], k)
    # CPU per GB and the cores' share over the stream: null, or stats with
    # raw ZeroMQ's CPU per GB beside this stream's
    for k in ("cpu_utilization_stream", "cpu_s_per_gb", "raw_zmq_cpu_s_per_gb"):
        assert c[k] is None or stat(c[k], k) is None, (k, c)
    assert (c["cpu_utilization_stream"] is None) == (c["cpu_s_per_gb"] is None), c
    assert c["inflated_mb_per_s"] is None
    assert c["samples_per_s"]["median"] > 0 and isinstance(c["piece_bytes"], num)
    assert c["shm_share"] == 1.0, c  # feeders and trainers on one host
    if doc["stage_breakdown"]:
        assert set(c["feeder_cpu_s"]) == {"read", "decompress", "decode", "map", "assemble", "send", "total"}
        for v in c["feeder_cpu_s"].values():
            stat(v, "feeder_cpu_s")
        assert c["bottleneck_stage"] in ("read", "decompress", "decode", "map", "assemble", "send")
        # how busy each kind of feeder thread was over the stream (issue #25 item 5)
        b = c["feeder_busy"]
        assert set(b) == {"decode_threads", "decode_thread", "serve", "zmq_io"}, b
        assert isinstance(b["decode_threads"], int) and b["decode_threads"] >= 1, b
        assert all(isinstance(b[k], num) and b[k] >= 0 for k in ("decode_thread", "serve", "zmq_io")), b
    else:
        assert c["feeder_cpu_s"] is None and c["bottleneck_stage"] is None and c["feeder_busy"] is None
    stat(c["process_cpu_s"]["feeders"], "cpu feeders")
    stat(c["process_cpu_s"]["trainers"], "cpu trainers")
    assert len(c["rss_mb"]["feeders"]) == c["feeders"] and len(c["rss_mb"]["trainers"]) == 1
    assert all(isinstance(v, num) and v > 0 for v in c["rss_mb"]["feeders"] + c["rss_mb"]["trainers"])
    stat(c["limits"]["raw_zmq_mb_per_s"], "raw zmq")
    assert isinstance(c["limits"]["memcpy_mb_per_s"], num)
    r = c["ratios"]
    assert set(r) == {"disk_to_read", "inflated_to_inflate", "wire_to_raw_zmq", "wire_to_memcpy",
                      "wire_to_plaintext", "raw_zmq_to_plaintext", "copied_to_raw_zmq", "wire_to_raw_zmq_ipc",
                      "wire_to_raw_zmq_tcp", "wire_to_raw_zmq_curve"}
    assert r["wire_to_plaintext"] is None and r["raw_zmq_to_plaintext"] is None and c["curve"] is False
    assert r["inflated_to_inflate"] is None
    # the machine's limits at the piece size (issue #25 item 5): ipc is the
    # run's own transport here, so its limit is the per-run raw ZeroMQ median
    lim = c["limits"]
    assert c["path"] == "shm", c
    assert lim["raw_zmq_ipc_mb_per_s"] == lim["raw_zmq_mb_per_s"]["median"], lim
    assert isinstance(lim["raw_zmq_tcp_mb_per_s"], num) and lim["raw_zmq_tcp_mb_per_s"] > 0, lim
    assert lim["raw_zmq_curve_mb_per_s"] is None or lim["raw_zmq_curve_mb_per_s"] > 0, lim
    for t in ("ipc", "tcp", "curve"):
        v = lim["raw_zmq_%s_mb_per_s" % t]
        if v is None:
            assert r["wire_to_raw_zmq_" + t] is None, (t, r)
        else:
            want = c["wire_mb_per_s"]["median"] / v
            assert abs(r["wire_to_raw_zmq_" + t] - want) <= 1e-3 * want + 1e-4, (t, r, want)
    assert all(isinstance(r[k], num) and r[k] > 0 for k in ("disk_to_read", "wire_to_raw_zmq", "wire_to_memcpy"))
    assert isinstance(c["limited_by"], str) and c["limited_by"]
print("schema ok: %d configs, stage breakdown %s" % (len(doc["configs"]), doc["stage_breakdown"]))
PY
pass "run --json schema"
python3 "$T/verdict.py" "$T/out" || fail "run --json: a verdict against the rule (see above)"
pass "run --json: limited by, by the rule (pieces in shared memory: raw ZeroMQ never named)"
no_leftovers "$T/err" "run --json"

# the human table, a gzip job (inflate limit), and charts when gnuplot is here
gzip -k "$T/d/s-00000-of-00002.tfrecord" "$T/d/s-00001-of-00002.tfrecord"
expect "run table (gzip, 2 workers)" 0 "inflated bytes vs inflate +[0-9.]+ MB/s" \
    "$BENCH" run --job job.json "--files=$T/d/s-*.tfrecord.gz" --workers 2 --repeat 1 --warmup 0 --out "$T/o" --plot
if command -v gnuplot >/dev/null; then
    for png in throughput stall; do
        [ -s "$T/o/$png.png" ] || fail "--plot: no $png.png"
    done
    pass "run --plot wrote the charts"
    python3 "$T/charts.py" "$T/o" shm || fail "run --plot: the chart script (see above)"
    pass "run --plot: key outside, axes named, SI tick labels, raw ZeroMQ a reference under shared memory"
    expect "run --plot --no-shm" 0 "" "$BENCH" run --job job.json --repeat 1 --warmup 0 --epochs 1 --no-shm \
        --out "$T/op" --plot
    python3 "$T/charts.py" "$T/op" copy || fail "run --plot --no-shm: the chart script (see above)"
    pass "run --plot --no-shm: raw ZeroMQ drawn as the copy path's limit"
else
    grep -q "gnuplot is not installed" "$T/err" || fail "--plot without gnuplot: no message"
    pass "run --plot without gnuplot says so"
fi

# ---- supervision: a feeder killed mid-run ends the run, nothing is left ----
"$BENCH" run --job job.json --repeat 1 --warmup 0 --epochs 1000000 >"$T/out" 2>"$T/err" &
BGPID=$!
fpid=""
for _ in $(seq 300); do
    fpid=$(sed -n 's/.*started feeder 0 of 1 (pid \([0-9]*\)).*/\1/p' "$T/err" | head -1)
    grep -q "started trainer 0" "$T/err" && [ -n "$fpid" ] && break
    sleep 0.1
done
[ -n "$fpid" ] || fail "kill feeder: no feeder pid in the log"
sleep 1
kill -KILL "$fpid"
wait "$BGPID"
rc=$?
BGPID=""
[ "$rc" = 1 ] || fail "kill feeder: exit status $rc, expected 1"
grep -q "feeder 0 (pid $fpid) killed by signal 9" "$T/err" || fail "kill feeder: no message naming the feeder"
no_leftovers "$T/err" "kill feeder"
pass "a feeder killed mid-run: exit 1, message, no process left"

# ---- SIGTERM to sluice-bench stops and reaps every process ----
"$BENCH" run --job job.json --feeders 2 --repeat 1 --warmup 0 --epochs 1000000 >"$T/out" 2>"$T/err" &
BGPID=$!
for _ in $(seq 300); do
    grep -q "started trainer 0" "$T/err" && break
    sleep 0.1
done
sleep 1
kill -TERM "$BGPID"
wait "$BGPID"
rc=$?
BGPID=""
[ "$rc" = 143 ] || fail "SIGTERM: exit status $rc, expected 143 (128 + 15)"
grep -q "interrupted by signal 15" "$T/err" || fail "SIGTERM: no message"
no_leftovers "$T/err" "SIGTERM"
pass "SIGTERM: exit 143, every process stopped"

# ---- a damaged file: the feeder fails, the run says so ----
cp "$T/d/s-00000-of-00002.tfrecord" "$T/bad.tfrecord"
printf 'XXXXXXXX' | dd of="$T/bad.tfrecord" bs=1 seek=100 conv=notrunc 2>/dev/null
expect "damaged file" 1 "(feeder|trainer) 0 \(pid [0-9]+\) exited" \
    "$BENCH" run --job job.json "--files=$T/bad.tfrecord" --repeat 1 --warmup 0 --epochs 1
no_leftovers "$T/err" "damaged file"

# ---- the micro-benchmarks, small ----
expect "wire --json" 0 '"bench":"wire"' "$BENCH" wire --sizes 4096 --repeat 1 --json
python3 -c '
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    assert d["bytes"] == 4096 and d["ratio"] > 0 and d["header_encode_decode_ns"] > 0
    assert set(d["wire_mb_per_s"]) == {"median", "min", "max"}
' "$T/out" || fail "wire --json keys"
expect "allreduce --json" 0 '"bench":"allreduce"' \
    "$BENCH" allreduce --procs 2,3 --floats 4096 --iters 3 --repeat 1 --json
python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["procs"] for r in rows] == [2, 3]
assert all(r["ratio"] > 0 and r["ms_per_call"]["median"] > 0 for r in rows)
' "$T/out" || fail "allreduce --json keys"
# seek: step 1000 of 2 x 2 replicas (seq 2000); 51 steps an epoch at x1, 510 at x10
expect "seek --json" 0 '"bench":"seek"' "$BENCH" seek --files 8 --records 100 --batch 16 --workers 2 \
    --replicas 2 --shuffle 50 --steps 1000 --scales 1,10 --repeat 1 --json
python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["scale"] for r in rows] == [1, 10]
for r in rows:
    per = r["steps_per_epoch"] * 2
    assert r["seq"] == 2000 and r["within"] == 0
    assert r["epoch"] == 2000 // per and r["pieces_in_epoch"] == 2000 % per
    assert r["ratio"] > 0 and r["seek_s"]["median"] > 0 and r["from_start_s"] > 0
    assert r["ratio_against"] == "from_start"
assert [r["steps_per_epoch"] for r in rows] == [51, 510]
' "$T/out" || fail "seek --json keys"
pass "micro-benchmark JSON keys"

# ---- images: decode-only against the map path in a real feeder (issue #27 section 3) ----
expect "images without --data" 2 "sluice-bench images: --data is required" "$BENCH" images
expect "images --threads 0" 2 "--threads: must be an integer in \[1, 256\], got '0'" "$BENCH" images --data x --threads 1,0
expect "images --threads -2" 2 "--threads: must be an integer in \[1, 256\], got '-2'" "$BENCH" images --data x --threads -2
expect "images --threads 9 of them" 2 "--threads: at most 8 comma-separated integers" \
    "$BENCH" images --data x --threads 1,2,3,4,5,6,7,8,9
expect "images --threads x" 2 "--threads: not an integer: 'x'" "$BENCH" images --data x --threads x
expect "images --epochs -1" 2 "--epochs: must be an integer in \[1, 1000\], got '-1'" "$BENCH" images --data x --epochs -1
expect "images --repeat huge" 2 "--repeat: must be an integer in \[1, 64\], got '$HUGE'" \
    "$BENCH" images --data x --repeat "$HUGE"
expect "images --rounds absent" 2 "--rounds needs a value" "$BENCH" images --data x --rounds
expect "images --shards 0x10" 2 "--shards: not an integer: '0x10'" "$BENCH" images --data x --shards 0x10
expect "images --json=1" 2 "--json takes no value" "$BENCH" images --data x --json=1
expect "images --size 7" 2 "--size: must be an integer in \[8, 1024\], got '7'" "$BENCH" images --data x --size 7
expect "images --size -64" 2 "--size: must be an integer in \[8, 1024\], got '-64'" "$BENCH" images --data x --size -64
expect "images --size huge" 2 "--size: must be an integer in \[8, 1024\], got '$HUGE'" \
    "$BENCH" images --data x --size "$HUGE"
expect "images --size absent" 2 "--size needs a value" "$BENCH" images --data x --size
expect "images --dat (a near miss)" 2 "sluice-bench images: --dat: unknown option; did you mean --data\?" \
    "$BENCH" images --dat x
expect "images --data absent folder" 1 "images: --data $T/nothere: No such file or directory" \
    "$BENCH" images --data "$T/nothere" --no-feeder
mkdir -p "$T/noimg/cls" && echo text >"$T/noimg/cls/readme.txt"
expect "images --data without images" 1 "no TREE/CLASS/\*.jpg, \*.jpeg or \*.png" "$BENCH" images --data "$T/noimg"
# the test images need PIL: Debian's /usr/bin/python3 with python3-pil (scripts/deps.sh)
PYPIL=python3
python3 -c 'import PIL' 2>/dev/null || PYPIL=/usr/bin/python3
if "$PYPIL" -c 'import PIL' 2>/dev/null; then
    # 6 small images in 2 classes: JPEGs, a gray JPEG, a PNG
    "$PYPIL" - "$T/imgs" <<'PY' || fail "images: cannot make the test images"
import os, sys
from PIL import Image
root = sys.argv[1]
for i in range(6):
    d = os.path.join(root, "c%d" % (i % 2))
    os.makedirs(d, exist_ok=True)
    im = Image.new("RGB", (64 + 8 * i, 48 + 4 * i))
    im.putdata([((x * 7 + i) % 256, (y * 5) % 256, (x * y) % 256) for y in range(im.size[1]) for x in range(im.size[0])])
    if i == 4:
        im.save(os.path.join(d, "%d.png" % i))
    else:
        (im.convert("L") if i == 3 else im).save(os.path.join(d, "%d.jpg" % i), quality=90)
PY
    # repeated options: the last wins (--threads 2 then 1: one thread count)
    expect "images --json" 0 '"bench":"images"' env TMPDIR="$T" "$BENCH" images --data "$T/imgs" --threads 2 \
        --threads 1 --repeat 2 --repeat 1 --rounds 2 --shards 3 --size 40 --size 32 --json
    python3 - "$T/out" <<'PY' || fail "images --json: keys and values"
import json, sys
d = json.load(open(sys.argv[1]))
assert set(d) == {"bench", "data", "images", "bytes", "rounds", "epochs", "repeat", "size", "cpus", "load_avg",
                  "decode_per_s", "decode_per_cpu_s", "runs"}, sorted(d)
assert d["images"] == 6 and d["rounds"] == 2 and d["repeat"] == 1 and d["epochs"] == 1 and d["size"] == 32, d
assert min(d["decode_per_s"].values()) > 0 and min(d["decode_per_cpu_s"].values()) > 0, d
assert [(r["map"], r["threads"]) for r in d["runs"]] == [("fused", 1), ("whole", 1)], d["runs"]
for r in d["runs"]:
    assert set(r) == {"map", "threads", "images_per_s", "thread_cpu_s", "map_cpu_s", "per_core_images_per_s",
                      "per_core_to_decode", "scaling"}, sorted(r)
    assert r["images_per_s"] > 0 and r["thread_cpu_s"] >= r["map_cpu_s"] > 0, r
    assert abs(r["per_core_images_per_s"] - 6 / r["thread_cpu_s"]) <= 0.01 * r["per_core_images_per_s"] + 0.1, r
    assert abs(r["per_core_to_decode"] - r["per_core_images_per_s"] / d["decode_per_cpu_s"]["scale_1"]) < 2e-3 + \
        1e-3 * r["per_core_to_decode"], r
    assert r["scaling"] == 1.0, r
PY
    ls "$T" | grep -q '^sluice-bench-' && fail "images left its scratch folder"
    expect "images, table" 0 "^ fused +2 +[0-9.]+" "$BENCH" images --data "$T/imgs" --threads 1,2
    grep -Eq "^limit: decode only .*1/1 [0-9.]+ images/s, 1/2 [0-9.]+ images/s \([0-9.]+x\) per CPU second" "$T/out" ||
        fail "images: no limit line"
    [ "$(grep -Ec '^ (fused|whole) +[12] ' "$T/out")" = 4 ] || fail "images: not 4 rows (fused, whole x 1, 2 threads)"
    expect "images --no-feeder" 0 "^limit: decode only" "$BENCH" images --data "$T/imgs" --no-feeder
    grep -q "fused" "$T/out" && fail "images --no-feeder ran a feeder"
    # a damaged image is named (its index in the listing) and fails the run (1)
    head -c 300 "$T/imgs/c0/0.jpg" >"$T/imgs/c0/cut.jpg"
    expect "images, a cut JPEG" 1 "decode-only: image [0-9]+: JPEG: " "$BENCH" images --data "$T/imgs" --no-feeder
    pass "images: decode-only and the map path in a real feeder, JSON, table, hostile options, a damaged image"
else
    pass "images: options only (no PIL to make test images)"
fi

# ---- formats: --size (P1 on a file of about that size) and --once, small ----
expect "formats --size 1x" 2 "--size: not a byte count \\(digits, then K, M, G or T\\): '1x'" "$BENCH" formats --size 1x
expect "formats --size 0" 2 "--size: must be a byte count in \[4096, 1125899906842624\], got '0'" "$BENCH" formats --size 0
expect "formats --size 4095" 2 "--size: must be a byte count in \[4096, " "$BENCH" formats --size 4095
expect "formats --size 2P" 2 "--size: not a byte count" "$BENCH" formats --size 2P
expect "formats --repeat 0" 2 "sluice-bench formats: --repeat: must be an integer in \[1, 64\], got '0'" \
    "$BENCH" formats --repeat 0
expect "formats --batch -5" 2 "sluice-bench formats: --batch: must be an integer in \[1, 1048576\], got '-5'" \
    "$BENCH" formats --batch -5
expect "formats --min-time abc" 2 "sluice-bench formats: --min-time: not a number: 'abc'" \
    "$BENCH" formats --min-time abc
expect "formats --features count -1" 2 "bad --features 'image:uint8:-1'" "$BENCH" formats --features image:uint8:-1
expect "formats --features count huge" 2 "bad --features 'image:uint8:99999999999'" \
    "$BENCH" formats --features image:uint8:99999999999
expect "formats --once nope" 2 "--once: expected read-crc, scan, scan-read or scan-auto, got 'nope'" \
    "$BENCH" formats --once nope --file x
expect "formats --once without --file" 2 "--once needs --file" "$BENCH" formats --once scan
F="$T/d/s-00000-of-00002.tfrecord"
for t in read-crc scan scan-read scan-auto; do
    expect "formats --once $t" 0 "^$t: $(stat -c %s "$F") bytes in" "$BENCH" formats --file "$F" --once "$t"
done
# the path each scan took (issue #25 item 5); a small file is never probed
expect "formats --once scan: path" 0 "; path map$" "$BENCH" formats --file "$F" --once scan
expect "formats --once scan-read: path" 0 "; path read$" "$BENCH" formats --file "$F" --once scan-read
SLUICE_IO= expect "formats --once scan-auto: path" 0 "; path read \(default\)$" "$BENCH" formats --file "$F" --once scan-auto
SLUICE_IO=map expect "formats --once scan-auto, SLUICE_IO=map" 0 "; path map \(SLUICE_IO\)$" \
    "$BENCH" formats --file "$F" --once scan-auto
expect "formats --once on a damaged file" 1 "scan failed" "$BENCH" formats --file "$T/bad.tfrecord" --once scan
SMALL=(--file "$F" --features label:int64,id:int64 --scratch "$T" --size 64K --repeat 1 --min-time 0)
expect "formats --size 64K --json" 0 '"at_size"' "$BENCH" formats "${SMALL[@]}" --json
python3 - "$T/out" <<'PY' || fail "formats --size --json: schema (see above)"
import json, sys
d = json.load(open(sys.argv[1]))
a = d["at_size"]
assert a["size"] == 65536 and 0 < a["plain_bytes"] <= 65536 and a["records"] > 0, a
assert [r["name"] for r in a["results"]] == ["tfrecord scan + crc (mmap)", "tfrecord scan + crc (read)"], a
assert all(r["baseline"] == "read()+crc32c" and r["ratio"] > 0 for r in a["results"]), a
assert d["results"][0]["name"] == "tfrecord scan + crc (mmap)", d
# the map-or-read report: the default path, where it came from, the probes
# (none here: the files are under 32 MiB)
assert d["io"] in ("read", "map") and d["io_source"] in ("default", "probe", "SLUICE_IO"), d
assert d["io_probe"] is None and a["io_probe"] is None, d
PY
ls "$T" | grep -q '^sluice-bench-' && fail "formats --size left its scratch folder"
expect "formats --size, table" 0 "at --size 65536: [0-9]+ records" "$BENCH" formats "${SMALL[@]}"
expect "formats, table: the default path" 0 "^default path for plain files in this process: (read|map) " \
    "$BENCH" formats "${SMALL[@]}"
expect "formats, table: not probed" 0 "^map or read on this file: not probed \(under 32 MiB" \
    "$BENCH" formats "${SMALL[@]}"
pass "formats --size and --once"

# ---- link: the two ends of a raw transfer, as tools/bench_testbed.py runs them ----
"$BENCH" link --pull "ipc://$T/link.sock" --count 300 >"$T/link.json" 2>"$T/link.err" &
lp=$!
"$BENCH" link --push "ipc://$T/link.sock" --size 4099 --count 300 2>"$T/err" || fail "link --push failed"
wait $lp || fail "link --pull failed: $(cat "$T/link.err")"
python3 - "$T/link.json" <<'PY' || fail "link: not the JSON line expected (see above)"
import json, sys
d = json.loads(open(sys.argv[1]).read())
assert set(d) == {"bench", "bytes", "messages", "seconds", "bytes_per_s"}, d
assert d["bench"] == "link" and d["bytes"] == 4099 and d["messages"] == 300 and d["seconds"] > 0, d
assert abs(d["bytes_per_s"] - 4099 * 299 / d["seconds"]) <= 1e-5 * d["bytes_per_s"], d
PY
pass "link: 300 messages of 4099 bytes, rate over the 299 after the first"

echo "$PASSED passed, 0 failed"
