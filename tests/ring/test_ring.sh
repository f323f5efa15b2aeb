#!/usr/bin/env bash
# Ring all-reduce across real processes: tests/ring/test_ring.sh PATH/TO/ring_worker
#
# Starts 1 to 4 ring_worker processes on ipc:// endpoints in a temporary
# folder and on free tcp loopback ports, and checks that every rank agrees
# bitwise (same checksum), that each value is the promised ring-order sum
# (exact for the integer inputs; ring_worker checks), that a second run
# gives the same checksums, that odd sizes work, and that a rank that dies,
# hangs or never joins makes the others fail in time naming it.
set -u

worker=${1:?usage: test_ring.sh PATH/TO/ring_worker}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sl-ring.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
run_id=0

ok() { passed=$((passed + 1)); echo "ok: $*"; }
bad() { failed=$((failed + 1)); echo "FAIL: $*"; }

# Comma-separated endpoints for P ranks on transport $2; fresh each call.
endpoints() {
    local p=$1 transport=$2 list="" i
    run_id=$((run_id + 1))
    if [ "$transport" = ipc ]; then
        for ((i = 0; i < p; i++)); do list+="${list:+,}ipc://$tmp/r$run_id-$i"; done
    else
        list=$(python3 - "$p" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(",".join("tcp://127.0.0.1:%d" % s.getsockname()[1] for s in socks))
EOF
)
    fi
    echo "$list"
}

# run_ring P TRANSPORT N ITERS MODE: every rank must exit 0 with "check ok"
# and the same checksum; prints that checksum (empty on failure).
run_ring() {
    local p=$1 transport=$2 n=$3 iters=$4 mode=$5 eps r sum="" s pids=()
    eps=$(endpoints "$p" "$transport")
    for ((r = 0; r < p; r++)); do
        timeout 60 "$worker" "$r" "$p" "$eps" "$n" "$iters" "$mode" >"$tmp/out.$r" 2>"$tmp/err.$r" &
        pids+=($!)
    done
    for ((r = 0; r < p; r++)); do
        if ! wait "${pids[$r]}"; then
            echo "  rank $r failed: $(cat "$tmp/err.$r" "$tmp/out.$r")" >&2
            return 1
        fi
        s=$(sed -n "s/^rank $r checksum \([0-9a-f]*\) check ok$/\1/p" "$tmp/out.$r")
        if [ -z "$s" ] || { [ -n "$sum" ] && [ "$s" != "$sum" ]; }; then
            echo "  rank $r: checksum '$s' differs from '$sum': $(cat "$tmp/out.$r")" >&2
            return 1
        fi
        sum=$s
    done
    echo "$sum"
}

# Two runs of the same ring agree with each other and on every rank.
check_ring() {
    local p=$1 transport=$2 n=$3 iters=$4 mode=$5 a b
    a=$(run_ring "$@") && b=$(run_ring "$@")
    if [ -n "$a" ] && [ "$a" = "$b" ]; then
        ok "P=$p $transport n=$n iters=$iters $mode: checksum $a on every rank, twice"
    else
        bad "P=$p $transport n=$n iters=$iters $mode (run 1 '$a', run 2 '$b')"
    fi
}

# fail_ring P TRANSPORT VICTIM HOW: HOW is die (die-after-1), stop
# (SIGSTOP after the first calls) or absent (never started). Every other
# rank must exit non-zero within the timeout (plus slack for the close) with
# a message naming the victim and its endpoint.
fail_ring() {
    local p=$1 transport=$2 victim=$3 how=$4 eps r t0 t1 pids=() vpid="" msg ep
    local timeout_ms=3000 slack_ms=2000 ok_all=1 n=1000
    [ "$how" = stop ] && n=100000
    eps=$(endpoints "$p" "$transport")
    ep=$(echo "$eps" | cut -d, -f$((victim + 1)))
    t0=$(date +%s%N)
    for ((r = 0; r < p; r++)); do
        if [ "$r" = "$victim" ]; then
            case $how in
            die) RING_TIMEOUT_MS=$timeout_ms "$worker" "$r" "$p" "$eps" $n 5 die-after-1 \
                     >/dev/null 2>&1 & vpid=$! ;;
            stop) RING_TIMEOUT_MS=$timeout_ms "$worker" "$r" "$p" "$eps" $n 1000000 \
                     >/dev/null 2>&1 & vpid=$! ;;
            esac
            pids+=(0)
            continue
        fi
        RING_TIMEOUT_MS=$timeout_ms timeout 60 "$worker" "$r" "$p" "$eps" $n 1000000 \
            >"$tmp/out.$r" 2>"$tmp/err.$r" &
        pids+=($!)
    done
    if [ "$how" = stop ]; then
        sleep 1
        kill -STOP "$vpid"
        t0=$(date +%s%N)
    fi
    case $how in
    absent) msg="ring: rank $victim ($ep) did not join within 3.0 s" ;;
    stop) msg="ring: no data from rank $victim ($ep) for 3.0 s" ;;
    die) msg="ring: no data from rank $victim ($ep)" ;;
    esac
    for ((r = 0; r < p; r++)); do
        [ "$r" = "$victim" ] && continue
        if wait "${pids[$r]}"; then
            echo "  rank $r exited 0 although rank $victim is gone" >&2
            ok_all=0
        elif ! grep -qF "$msg" "$tmp/err.$r"; then
            echo "  rank $r: expected '$msg', got: $(cat "$tmp/err.$r")" >&2
            ok_all=0
        fi
    done
    t1=$(date +%s%N)
    if [ -n "$vpid" ]; then
        kill -KILL "$vpid" 2>/dev/null
        wait "$vpid" 2>/dev/null
    fi
    if [ $(((t1 - t0) / 1000000)) -gt $((timeout_ms + slack_ms)) ]; then
        echo "  took $(((t1 - t0) / 1000000)) ms (timeout $timeout_ms ms)" >&2
        ok_all=0
    fi
    if [ $ok_all = 1 ]; then
        ok "P=$p $transport rank $victim $how: others failed in $(((t1 - t0) / 1000000)) ms naming it"
    else
        bad "P=$p $transport rank $victim $how"
    fi
}

# Ranks that disagree on n: every rank fails with a protocol error, none hangs.
mismatch_ring() {
    local eps r pids=() ok_all=1 t0 t1
    eps=$(endpoints 3 ipc)
    t0=$(date +%s%N)
    for r in 0 1 2; do
        RING_TIMEOUT_MS=3000 timeout 60 "$worker" "$r" 3 "$eps" $((10 + r / 2)) 2 \
            >"$tmp/out.$r" 2>"$tmp/err.$r" &
        pids+=($!)
    done
    for r in 0 1 2; do
        if wait "${pids[$r]}" || ! grep -q "(proto)$" "$tmp/err.$r"; then
            echo "  rank $r: expected a protocol error, got: $(cat "$tmp/err.$r")" >&2
            ok_all=0
        fi
    done
    t1=$(date +%s%N)
    if ! grep -qF "expected DATA call 1 step 0 chunk 1 of 16 bytes" "$tmp/err.2"; then
        echo "  rank 2 did not say what it expected: $(cat "$tmp/err.2")" >&2
        ok_all=0
    fi
    if [ $ok_all = 1 ]; then
        ok "P=3 ranks disagreeing on n: all failed with a protocol error in $(((t1 - t0) / 1000000)) ms"
    else
        bad "P=3 ranks disagreeing on n"
    fi
}

for transport in ipc tcp; do
    for p in 2 3 4; do
        check_ring "$p" "$transport" 1000 3 sum
        check_ring "$p" "$transport" 4099 2 frac
    done
    check_ring 3 "$transport" 1001 2 mean
done

# P = 1, and sizes that do not divide evenly, are smaller than P, or empty
check_ring 1 ipc 5 2 sum
check_ring 1 ipc 0 1 mean
for p in 2 3 4; do
    for n in $(printf "%s\n" 0 1 $((p - 1)) $((p + 1)) 7 1001 | sort -un); do
        check_ring "$p" ipc "$n" 2 sum
    done
done
check_ring 4 tcp 3 2 frac
check_ring 3 tcp 0 2 sum
check_ring 4 tcp 300001 2 frac

# a rank dies, hangs, or never joins
fail_ring 2 ipc 1 die
fail_ring 3 ipc 1 die
fail_ring 4 tcp 2 die
fail_ring 4 ipc 0 die
fail_ring 3 tcp 1 stop
fail_ring 4 ipc 3 stop
fail_ring 3 ipc 2 absent
fail_ring 2 tcp 0 absent
mismatch_ring

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
