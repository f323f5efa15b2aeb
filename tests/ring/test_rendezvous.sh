#!/usr/bin/env bash
# Cluster rendezvous across real processes:
#   tests/ring/test_rendezvous.sh PATH/TO/rdv_worker PATH/TO/sluice-trainer
#
# rdv_worker: 1 to 4 ranks on ipc:// and tcp loopback, started in shuffled
# order, agree and all end with rank 0's 128 random bytes; a missing rank
# (or rank 0) makes the others fail within the timeout naming it; a rank
# that disagrees on the config, the job or the world size is refused with
# the reason on every rank.
# sluice-trainer: the same from a TF_CONFIG spec (environment and
# --cluster FILE) and from --peers: a missing worker is named within
# --rendezvous-timeout, a different model is refused, agreeing workers log
# "rendezvous: 2 workers agree" (there is no feeder: they are killed while
# they wait for it).
set -u

worker=${1:?usage: test_rendezvous.sh PATH/TO/rdv_worker PATH/TO/sluice-trainer}
trainer=${2:?usage: test_rendezvous.sh PATH/TO/rdv_worker PATH/TO/sluice-trainer}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sl-rdv.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
run_id=0

ok() { passed=$((passed + 1)); echo "ok: $*"; }
bad() { failed=$((failed + 1)); echo "FAIL: $*"; }

# free tcp loopback ports, comma-separated
ports() {
    python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(",".join(str(s.getsockname()[1]) for s in socks))
PY
}

root_ep() {
    run_id=$((run_id + 1))
    if [ "$1" = ipc ]; then echo "ipc://$tmp/root-$run_id"; else echo "tcp://127.0.0.1:$(ports 1)"; fi
}

ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }

# agree P TRANSPORT: every rank exits 0 with the same 256 hex digits
agree() {
    local p=$1 transport=$2 root r pids=() blob="" b ok_all=1
    root=$(root_ep "$transport")
    for r in $(seq 0 $((p - 1)) | shuf); do
        "$worker" "$r" "$p" "$root" job-a "model=mlp 784-64-10" 10000 >"$tmp/out.$r" 2>"$tmp/err.$r" &
        pids[$r]=$!
        sleep 0.0$((RANDOM % 3))
    done
    for ((r = 0; r < p; r++)); do
        if ! wait "${pids[$r]}"; then
            echo "  rank $r failed: $(cat "$tmp/err.$r")" >&2
            ok_all=0
            continue
        fi
        b=$(sed -n "s/^rank $r blob \([0-9a-f]*\)$/\1/p" "$tmp/out.$r")
        if [ ${#b} -ne 256 ] || { [ -n "$blob" ] && [ "$b" != "$blob" ]; }; then
            echo "  rank $r: blob '$b' differs from '$blob'" >&2
            ok_all=0
        fi
        blob=$b
    done
    if [ $ok_all = 1 ]; then ok "P=$p $transport: every rank agreed and has rank 0's 128 bytes"; else bad "P=$p $transport agree"; fi
}

# expect_fail NAME TIMEOUT_MS MESSAGE RANKS...: the listed ranks (already
# started, pids in $pids[rank]) exit non-zero with MESSAGE within the
# timeout plus slack
expect_fail() {
    local name=$1 timeout_ms=$2 msg=$3 t0=$4 r ok_all=1
    shift 4
    for r in "$@"; do
        if wait "${pids[$r]}"; then
            echo "  rank $r exited 0" >&2
            ok_all=0
        elif ! grep -qF -- "$msg" "$tmp/err.$r"; then
            echo "  rank $r: expected '$msg', got: $(cat "$tmp/err.$r")" >&2
            ok_all=0
        fi
    done
    local took
    took=$(ms_since "$t0")
    if [ "$took" -gt $((timeout_ms + 2500)) ]; then
        echo "  took $took ms (timeout $timeout_ms ms)" >&2
        ok_all=0
    fi
    if [ $ok_all = 1 ]; then ok "$name: ranks $* failed in $took ms with '$msg'"; else bad "$name"; fi
}

for transport in ipc tcp; do
    for p in 1 2 3 4; do
        agree "$p" "$transport"
    done
done

# rank 2 of 3 never starts
root=$(root_ep tcp)
pids=()
t0=$(date +%s%N)
for r in 0 1; do
    "$worker" "$r" 3 "$root" job-a cfg 2000 >"$tmp/out.$r" 2>"$tmp/err.$r" &
    pids[$r]=$!
done
expect_fail "missing rank 2" 2000 "rendezvous: rank 2 (worker-2) did not show up within 2.0 s" "$t0" 0 1
grep -qF "(reported by rank 0 (worker-0))" "$tmp/err.1" || bad "rank 1 does not say rank 0 reported the missing rank: $(cat "$tmp/err.1")"

# rank 0 never starts
root=$(root_ep ipc)
pids=()
t0=$(date +%s%N)
for r in 1 2; do
    "$worker" "$r" 3 "$root" job-a cfg 2000 >"$tmp/out.$r" 2>"$tmp/err.$r" &
    pids[$r]=$!
done
expect_fail "missing rank 0" 2000 "rendezvous: rank 0 (worker-0) did not answer within 2." "$t0" 1 2

# rank 0 starts 1.5 s after the others, whose timeout is 2 s: still fine
root=$(root_ep tcp)
pids=()
for r in 1 2; do
    "$worker" "$r" 3 "$root" job-a cfg 2000 >"$tmp/out.$r" 2>"$tmp/err.$r" &
    pids[$r]=$!
done
sleep 1.5
"$worker" 0 3 "$root" job-a cfg 2000 >"$tmp/out.0" 2>"$tmp/err.0" &
pids[0]=$!
late_ok=1
for r in 0 1 2; do wait "${pids[$r]}" || late_ok=0; done
if [ $late_ok = 1 ]; then ok "rank 0 started 1.5 s late: all agreed"; else bad "rank 0 late: $(cat "$tmp"/err.*)"; fi

# rank 0 late, so that rank 1's timeout runs out before rank 0's does,
# while rank 2 is missing: rank 1 has heard rank 0 and names rank 2, as
# rank 0 does. (0.3 s late: a loaded machine may take a second or more to
# start rank 0, which must still be heard within rank 1's 2 s.)
root=$(root_ep ipc)
pids=()
t0=$(date +%s%N)
"$worker" 1 3 "$root" job-a cfg 2000 >"$tmp/out.1" 2>"$tmp/err.1" &
pids[1]=$!
sleep 0.3
"$worker" 0 3 "$root" job-a cfg 2000 >"$tmp/out.0" 2>"$tmp/err.0" &
pids[0]=$!
expect_fail "rank 0 late, rank 2 missing" 3000 "rendezvous: rank 2 (worker-2) did not show up within" "$t0" 0 1

# disagreements: config, job, world size
root=$(root_ep ipc)
pids=()
t0=$(date +%s%N)
"$worker" 0 2 "$root" job-a "model=mlp 784-64-10" 5000 >"$tmp/out.0" 2>"$tmp/err.0" &
pids[0]=$!
"$worker" 1 2 "$root" job-a "model=mlp 784-32-10" 5000 >"$tmp/out.1" 2>"$tmp/err.1" &
pids[1]=$!
expect_fail "config differs" 0 \
    "rendezvous: rank 1 (worker-1) has config 'model=mlp 784-32-10', but rank 0 (worker-0) has 'model=mlp 784-64-10'" \
    "$t0" 0 1
root=$(root_ep tcp)
pids=()
t0=$(date +%s%N)
"$worker" 0 2 "$root" job-a cfg 5000 >"$tmp/out.0" 2>"$tmp/err.0" &
pids[0]=$!
"$worker" 1 2 "$root" job-b cfg 5000 >"$tmp/out.1" 2>"$tmp/err.1" &
pids[1]=$!
expect_fail "job differs" 0 "rendezvous: rank 1 (worker-1) is in job 'job-b', but rank 0 (worker-0) is in job 'job-a'" \
    "$t0" 0 1
root=$(root_ep ipc)
pids=()
t0=$(date +%s%N)
"$worker" 0 2 "$root" job-a cfg 5000 >"$tmp/out.0" 2>"$tmp/err.0" &
pids[0]=$!
"$worker" 1 3 "$root" job-a cfg 5000 >"$tmp/out.1" 2>"$tmp/err.1" &
pids[1]=$!
expect_fail "world size differs" 0 \
    "rendezvous: rank 1 (worker-1) says the cluster has 3 workers, but rank 0 (worker-0) has 2" "$t0" 0 1

# sluice-trainer: TF_CONFIG in the environment, worker 1 missing
IFS=, read -r p0 p1 <<<"$(ports 2)"
spec() { # TASK_INDEX
    printf '{"cluster": {"worker": ["127.0.0.1:%s", "127.0.0.1:%s"], "feeder": ["ipc://%s/no-feeder"]},
             "task": {"type": "worker", "index": %s}}' "$p0" "$p1" "$tmp" "$1"
}
# worker addresses bind every interface: plaintext there takes --insecure
# (CURVE on these links: tests/integration/test_ring_curve.py)
common=(--job fmnist --model mlp --hidden 16 --rendezvous-timeout 2 --quiet --insecure)
pids=()
t0=$(date +%s%N)
TF_CONFIG=$(spec 0) timeout 20 "$trainer" "${common[@]}" >"$tmp/out.0" 2>"$tmp/err.0" &
pids[0]=$!
expect_fail "sluice-trainer TF_CONFIG, worker 1 missing" 2000 \
    "rendezvous: rank 1 (tcp://127.0.0.1:$p1) did not show up within 2.0 s" "$t0" 0

# --cluster FILE, the two workers disagree on the model
spec 0 >"$tmp/c0.json"
spec 1 >"$tmp/c1.json"
pids=()
t0=$(date +%s%N)
timeout 20 "$trainer" "${common[@]}" --cluster "$tmp/c0.json" >"$tmp/out.0" 2>"$tmp/err.0" &
pids[0]=$!
timeout 20 "$trainer" "${common[@]}" --hidden 32 --cluster "$tmp/c1.json" >"$tmp/out.1" 2>"$tmp/err.1" &
pids[1]=$!
expect_fail "sluice-trainer --cluster, different models" 0 \
    "rendezvous: rank 1 (tcp://127.0.0.1:$p1) has config 'model=mlp hidden=32 " "$t0" 0 1

# agreeing workers, from TF_CONFIG and from --peers: they log the
# rendezvous, then wait for a feeder that does not exist; stop them there
wait_agree() {
    local name=$1 ok_all=1 r waited=0
    while [ $waited -lt 150 ]; do
        grep -q "rendezvous: 2 workers agree" "$tmp/err.0" && grep -q "rendezvous: 2 workers agree" "$tmp/err.1" &&
            break
        sleep 0.1
        waited=$((waited + 1))
    done
    for r in 0 1; do
        kill -KILL "${pids[$r]}" 2>/dev/null
        wait "${pids[$r]}" 2>/dev/null
        grep -q "rendezvous: 2 workers agree" "$tmp/err.$r" || ok_all=0
    done
    if [ $ok_all = 1 ]; then ok "$name: both workers agree"; else bad "$name: $(cat "$tmp/err.0" "$tmp/err.1")"; fi
}
common=(--job fmnist --model mlp --hidden 16 --rendezvous-timeout 5 --insecure)
pids=()
for r in 1 0; do
    TF_CONFIG=$(spec $r) "$trainer" "${common[@]}" >/dev/null 2>"$tmp/err.$r" &
    pids[$r]=$!
done
wait_agree "sluice-trainer TF_CONFIG"
IFS=, read -r p0 p1 <<<"$(ports 2)"
pids=()
for r in 0 1; do
    env -u TF_CONFIG "$trainer" "${common[@]}" --connect "ipc://$tmp/no-feeder" --worker $r --workers 2 \
        --peers "127.0.0.1:$p0,127.0.0.1:$p1" >/dev/null 2>"$tmp/err.$r" &
    pids[$r]=$!
done
wait_agree "sluice-trainer --peers"

# --devices errors name the option (exit 2, before any connection)
devices_error() {
    local spec=$1 want=$2 out rc
    out=$(env -u TF_CONFIG "$trainer" --connect "ipc://$tmp/no-feeder" --job j --model mlp --devices "$spec" 2>&1)
    rc=$?
    if [ $rc = 2 ] && grep -qF -- "$want" <<<"$out"; then
        ok "--devices $spec refused: $want"
    else
        bad "--devices $spec: exit $rc, '$out' (expected '$want')"
    fi
}
devices_error cpu:0 "sluice-trainer: --devices: cpu:N needs N in [1, 1024], got 'cpu:0'"
devices_error tpu:2 "sluice-trainer: --devices: expected auto, cpu, cpu:N, gpu or gpu:I,J,..., got 'tpu:2'"
devices_error gpu:0,x "sluice-trainer: --devices: "

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
