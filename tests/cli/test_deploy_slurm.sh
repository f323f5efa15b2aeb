#!/usr/bin/env bash
# The Slurm recipe, run (issue #14 part 4): deploy/slurm/sluice.sbatch as
# sbatch would run it, its srun being tests/cli/fake_srun.sh, which starts
# every task on this machine with the variables a real srun gives (and each
# task's SLURMD_NODENAME, from a placement of its own that sluice's is
# checked against). A tiny generated job, an MLP trained by the workers
# through the rendezvous and the ring:
#   - 1 feeder + 2 workers on nodes 127.0.0.[1-2] (tasks 1,2)
#   - 2 feeders + 2 workers on 2(x2) tasks per node
#   - refused: srun told the tasks "cyclic" but placed them by block (each
#     misplaced task names its node), and no task left for a worker
#   - keys (issue #16): the first run makes them in SLUICE_KEYS (mode 0700,
#     feeder and trainer pairs, the allow-list), every feeder serves over
#     CURVE only the trainer key, the ring uses the shared trainer key; the
#     next runs reuse them. Refused: a key folder others may open, a worker
#     whose key is not on the allow-list (named by the workers, counted by
#     the feeder), SLUICE_INSECURE other than 0 or 1. SLUICE_INSECURE=1
#     trains in plaintext with the binaries' warnings.
#   - across hosts, when tests/cluster/netns.py can make network namespaces
#     (root): three nodes 198.18.0.x, each task in its node's namespace and
#     a PID namespace of its own, every piece and gradient over the links
#     (skipped, saying so, elsewhere)
# Each run must end with every worker's summary ok, the same weights hash on
# both workers, and the workers' rendezvous in their logs.
#
# Usage: test_deploy_slurm.sh BUILD_DIR   (holding tools/, feeder/, trainer/)
set -uo pipefail

BUILD="$(cd "${1:?usage: test_deploy_slurm.sh BUILD_DIR}" && pwd)"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
SBATCH="$ROOT/deploy/slurm/sluice.sbatch"
RECORD="$BUILD/tools/sluice-record"
for b in "$BUILD/feeder/sluice-feeder" "$BUILD/trainer/sluice-trainer" "$RECORD"; do
    [ -x "$b" ] || { echo "no executable $b" >&2; exit 1; }
done

if [ "${2:-}" != "--across-hosts" ]; then
    T="$(mktemp -d)"
    trap 'rm -rf "$T"' EXIT
else
    T="$3" # the outer run's folder, inside tests/cluster/netns.py
fi
PASSED=0

fail() {
    echo "FAIL: $*" >&2
    for f in "$T"/run/out "$T"/run/err "$T"/run/logs/*.err "$T"/run/sum/*.json; do
        [ -s "$f" ] && { echo "--- $f:" >&2; tail -c 2000 "$f" >&2; }
    done
    echo "$PASSED passed, 1 failed" >&2
    exit 1
}
pass() { PASSED=$((PASSED + 1)); echo "ok $PASSED - $1"; }

# sbatch NAME RC VAR=VALUE...: the script run as a batch job with these
# variables; exit status RC
sbatch() {
    local name="$1" want="$2"
    shift 2
    rm -rf "$T/run"
    mkdir -p "$T/run/logs"
    # distinct ports per run: other tests may be listening on this machine
    port=$((20000 + RANDOM % 20000))
    (cd "$T" && env -u TF_CONFIG PATH="$T/bin:$PATH" SLURM_JOB_ID=4242 SLURM_SUBMIT_DIR="$T" SLUICE_BUILD="$BUILD" \
        SLUICE_JOB="$T/job.json" SLUICE_OUT="$T/run/sum" SLUICE_FEEDER_PORT=$port SLUICE_RING_PORT=$((port + 100)) \
        SLUICE_FEEDER_ARGS="--threads 1 --report-s 0" \
        SLUICE_TRAINER_ARGS="--model mlp --input dense --label label --classes 4 --hidden 16 --devices cpu:1" \
        FAKE_SRUN_LOGS="$T/run/logs" "$@" timeout -k 5 150 bash "$SBATCH" >"$T/run/out" 2>"$T/run/err")
    local rc=$?
    [ "$rc" = "$want" ] || fail "$name: exit status $rc, expected $want"
}

# trained NAME W: every worker's summary ok with steps, one weights hash,
# the rendezvous in the logs
trained() {
    local name="$1" W="$2" w hash="" h
    for ((w = 0; w < W; w++)); do
        python3 - "$T/run/sum/worker-$w.json" "$w" >"$T/run/hash" <<'PY' || fail "$name: worker $w's summary"
import json, sys
s = json.loads(open(sys.argv[1]).read())["summary"]
assert s["ok"] is True and s["worker"] == int(sys.argv[2]) and s["steps"] > 0, s
print(s["weights_hash"], s["shm_pieces"])
PY
        read -r h shm <"$T/run/hash"
        [ -z "$hash" ] || [ "$h" = "$hash" ] || fail "$name: worker $w's weights hash $h, worker 0's $hash"
        hash=$h
        [ -z "${NO_SHM:-}" ] || [ "$shm" = 0 ] || fail "$name: worker $w read $shm pieces in shared memory"
    done
    grep -q "rendezvous: $W workers agree" "$T"/run/logs/*.err || fail "$name: no rendezvous in the logs"
    pass "$name"
}

# curved: the run used the keys of $T/sluice-keys: the feeders served
# over CURVE the trainer key only (every worker accepted, none refused) and
# no task warned about plaintext
curved() {
    local name="$1" F="$2" W="$3" j pub
    pub=$(cat "$T/sluice-keys/feeder.pub")
    for ((j = 0; j < F; j++)); do
        grep -qF "CURVE: this feeder's public key is $pub; 1 trainer keys allowed" "$T/run/logs/task-$j.err" ||
            fail "$name: feeder $j did not serve with the key folder's feeder key and one trainer key"
        grep -q "CURVE: $W trainer connections accepted, 0 refused" "$T/run/logs/task-$j.err" ||
            fail "$name: feeder $j did not accept exactly the $W workers over CURVE"
    done
    ! grep -q "insecure\|plaintext\|in the clear" "$T"/run/logs/*.err || fail "$name: a task runs in plaintext"
    pass "$name: every feeder served over CURVE the $W workers' key, nothing in plaintext"
}

# a tiny job: 2 shards of 2000 records, dense float32[8] and 4 classes
setup() {
    mkdir -p "$T/bin"
    ln -sf "$ROOT/tests/cli/fake_srun.sh" "$T/bin/srun"
    "$RECORD" gen --output-dir "$T/d" --records 2000 --shards 2 --seed 3 --image-bytes 16 --floats 8 --classes 4 \
        --prefix s >/dev/null 2>&1 || fail "sluice-record gen"
    cat >"$T/job.json" <<EOF
{"name": "deploy-tiny", "files": ["$T/d/s-*.tfrecord"], "format": "tfrecord",
 "features": {"dense": {"dtype": "float32", "shape": [8]}, "label": {"dtype": "int64", "shape": []}},
 "global_batch_size": 64, "epochs": 2, "prefetch": 4}
EOF
}

if [ "${2:-}" = "--across-hosts" ]; then
    # inside tests/cluster/netns.py: hosts n1, n2, n3 (SLUICE_NS_N1, SLUICE_ADDR_N1, ...)
    nodes="$SLUICE_ADDR_N1 $SLUICE_ADDR_N2 $SLUICE_ADDR_N3"
    base=${SLUICE_ADDR_N1%.*}
    list="$SLUICE_ADDR_N1,$SLUICE_ADDR_N2,$SLUICE_ADDR_N3"
    a1=${SLUICE_ADDR_N1##*.} a3=${SLUICE_ADDR_N3##*.}
    if [ "${SLUICE_ADDR_N2%.*}" = "$base" ] && [ "${SLUICE_ADDR_N3%.*}" = "$base" ] &&
        [ "${SLUICE_ADDR_N2##*.}" = $((a1 + 1)) ] && [ "$a3" = $((a1 + 2)) ]; then
        list="$base.[$a1-$a3]" # as Slurm would write it
    fi
    sbatch "across hosts ($list)" 0 SLURM_JOB_NODELIST="$list" SLURM_TASKS_PER_NODE="1(x3)" \
        FAKE_SRUN_NODES="$nodes" FAKE_SRUN_COUNTS="1 1 1" FAKE_SRUN_NS="$SLUICE_NS_N1 $SLUICE_NS_N2 $SLUICE_NS_N3"
    NO_SHM=1 trained "across hosts: a feeder on $SLUICE_ADDR_N1, workers on the two others, nothing shared" 2
    curved "across hosts" 1 2
    exit 0
fi

setup

# ---- on this machine ----
sbatch "1 feeder, 2 workers" 0 SLURM_JOB_NODELIST="127.0.0.[1-2]" SLURM_TASKS_PER_NODE="1,2" \
    FAKE_SRUN_NODES="127.0.0.1 127.0.0.2" FAKE_SRUN_COUNTS="1 2"
trained "1 feeder, 2 workers: trained, through the rendezvous" 2
grep -q "job 'deploy-tiny' on 127.0.0.\[1-2\]: slurm:feeders=1," "$T/run/out" || fail "the script's first line"
pass "the job's name read from the job file"
K="$T/sluice-keys"
grep -q "made the job's keys in $K" "$T/run/out" || fail "the first run did not say it made the keys"
[ "$(stat -c %a "$K")" = 700 ] && [ "$(stat -c %a "$K/feeder.key")" = 600 ] &&
    [ "$(stat -c %a "$K/trainer.key")" = 600 ] && cmp -s "$K/trainer.pub" "$K/trainers/trainer.pub" &&
    [ "$(ls "$K/trainers")" = trainer.pub ] || fail "the key folder: $(ls -lR "$K")"
pass "the first run made the keys: a 0700 folder, two 0600 secret keys, the trainer key alone on the allow-list"
curved "1 feeder, 2 workers" 1 2
cp -p "$K/feeder.key" "$T/feeder.key.first"

sbatch "2 feeders, 2 workers" 0 SLURM_JOB_NODELIST="127.0.0.[1-2]" SLURM_TASKS_PER_NODE="2(x2)" \
    SLUICE_FEEDERS=2 FAKE_SRUN_NODES="127.0.0.1 127.0.0.2" FAKE_SRUN_COUNTS="2 2"
trained "2 feeders, 2 workers (2(x2) tasks per node)" 2
grep -q "as feeder 1 of 2" "$T/run/logs/task-1.err" || fail "task 1 is not feeder 1 of 2"
pass "task 1 serves as feeder 1 of 2"
curved "2 feeders, 2 workers" 2 2
! grep -q "made the job's keys" "$T/run/out" && cmp -s "$K/feeder.key" "$T/feeder.key.first" ||
    fail "the second run made new keys"
pass "the second run reused the keys"

# the opt-out: plaintext on every link, said by the script and by each task
sbatch "SLUICE_INSECURE=1" 0 SLURM_JOB_NODELIST="127.0.0.[1-2]" SLURM_TASKS_PER_NODE="1,2" SLUICE_INSECURE=1 \
    SLUICE_KEYS="$T/no-keys" FAKE_SRUN_NODES="127.0.0.1 127.0.0.2" FAKE_SRUN_COUNTS="1 2"
trained "SLUICE_INSECURE=1: trained in plaintext" 2
[ ! -e "$T/no-keys" ] || fail "SLUICE_INSECURE=1 made keys"
grep -q "SLUICE_INSECURE=1: no keys, every link in plaintext" "$T/run/err" || fail "SLUICE_INSECURE=1: no warning"
grep -q "serving in the clear on tcp://\*:$port (--insecure)" "$T/run/logs/task-0.err" ||
    fail "SLUICE_INSECURE=1: the feeder did not warn"
grep -q "ring: listening on tcp://\*:$((port + 101)) in plaintext (--insecure)" "$T/run/logs/task-2.err" ||
    fail "SLUICE_INSECURE=1: worker 1 did not warn"
pass "SLUICE_INSECURE=1: the script, the feeder and the workers each warn of plaintext"

sbatch "SLUICE_INSECURE=yes" 2 SLURM_JOB_NODELIST="127.0.0.1" SLURM_TASKS_PER_NODE="2" SLUICE_INSECURE=yes \
    FAKE_SRUN_NODES="127.0.0.1" FAKE_SRUN_COUNTS="2"
grep -qF "SLUICE_INSECURE is 'yes': 0 (keys, the default) or 1 (plaintext)" "$T/run/err" ||
    fail "SLUICE_INSECURE=yes: the message"
pass "SLUICE_INSECURE=yes: refused, nothing started"

# a key folder others may open is refused before any task starts
chmod 750 "$K"
sbatch "a key folder of mode 0750" 2 SLURM_JOB_NODELIST="127.0.0.1" SLURM_TASKS_PER_NODE="2" \
    FAKE_SRUN_NODES="127.0.0.1" FAKE_SRUN_COUNTS="2"
chmod 700 "$K"
grep -qF "$K must be a folder of this user's that only it may open (mode 750" "$T/run/err" ||
    fail "a key folder of mode 0750: the message"
[ ! -e "$T/run/logs/task-0.err" ] || fail "a key folder of mode 0750: a task started"
sbatch "SLUICE_KEYS with a space" 2 SLURM_JOB_NODELIST="127.0.0.1" SLURM_TASKS_PER_NODE="2" \
    SLUICE_KEYS="$T/my keys" FAKE_SRUN_NODES="127.0.0.1" FAKE_SRUN_COUNTS="2"
grep -qF "holds a space" "$T/run/err" || fail "SLUICE_KEYS with a space: the message"
mkdir -p -m 700 "$T/half-keys"
sbatch "a key folder without the trainer key" 2 SLURM_JOB_NODELIST="127.0.0.1" SLURM_TASKS_PER_NODE="2" \
    SLUICE_KEYS="$T/half-keys" FAKE_SRUN_NODES="127.0.0.1" FAKE_SRUN_COUNTS="2"
grep -qF "$T/half-keys has no feeder.key" "$T/run/err" || fail "a key folder without keys: the message"
pass "refused before any task: a key folder of mode 0750, a path with a space, a folder without the keys"

# a worker key the feeders do not allow: the workers fail naming the
# allow-list, the feeder counts the refusals and serves nothing
mv "$K/trainers/trainer.pub" "$T/trainer.pub.saved"
(cd "$K/trainers" && "$BUILD/feeder/sluice-feeder" keygen other >/dev/null && rm other.key)
sbatch "the trainer key not on the allow-list" 1 SLURM_JOB_NODELIST="127.0.0.[1-2]" SLURM_TASKS_PER_NODE="1,2" \
    FAKE_SRUN_NODES="127.0.0.1 127.0.0.2" FAKE_SRUN_COUNTS="1 2"
rm "$K/trainers/other.pub"
mv "$T/trainer.pub.saved" "$K/trainers/trainer.pub"
grep -q "is not on the feeder's allow-list" "$T/run/logs/task-1.err" "$T/run/logs/task-2.err" ||
    fail "a refused trainer key: no worker named the allow-list"
grep -qF "refused a CURVE client from 127.0.0.1: its public key $(cut -c1-20 "$K/trainer.pub")" \
    "$T/run/logs/task-0.err" || fail "a refused trainer key: the feeder did not log the key"
pass "a trainer key not on the allow-list: the workers fail naming it, the feeder logs the key"

# srun placed the tasks by block but tells them cyclic: the misplaced tasks
# (1 and 2) refuse to start, naming their node (the first to fail stops
# the others, so one of them may not get to say it)
sbatch "placement disagrees" 2 SLURM_JOB_NODELIST="127.0.0.[1-2]" SLURM_TASKS_PER_NODE="2(x2)" \
    FAKE_SRUN_NODES="127.0.0.1 127.0.0.2" FAKE_SRUN_COUNTS="2 2" FAKE_SRUN_DISTRIBUTION=cyclic
m1="sluice-trainer: --cluster-from slurm:feeders=1,feeder-port=$((port)),ring-port=$((port + 100)): task 1 would run \
on '127.0.0.2' by the tasks per node (cyclic placement), but SLURMD_NODENAME is '127.0.0.1' (srun \
--distribution=block, docs/deploy.md)"
m2="task 2 would run on '127.0.0.1' by the tasks per node (cyclic placement), but SLURMD_NODENAME is '127.0.0.2'"
grep -qF "$m1" "$T/run/logs/task-1.err" || grep -qF "$m2" "$T/run/logs/task-2.err" ||
    fail "placement disagrees: no task named its node"
pass "placement disagrees: refused, naming the node"

sbatch "no worker" 2 SLURM_JOB_NODELIST="127.0.0.1" SLURM_TASKS_PER_NODE="2" SLUICE_FEEDERS=2 \
    FAKE_SRUN_NODES="127.0.0.1" FAKE_SRUN_COUNTS="2"
grep -qF "slurm layout: feeders=2 leaves no task for a trainer worker: the step has 2 tasks" "$T/run/logs/task-0.err" ||
    fail "no worker: the message"
pass "feeders=2 of 2 tasks: refused"

# ---- across hosts: network namespaces (tests/cluster/netns.py) ----
NETNS="$ROOT/tests/cluster/netns.py"
if [ ! -f "$NETNS" ]; then
    echo "SKIP across hosts: no $NETNS"
else
    python3 "$NETNS" --hosts n1,n2,n3 -- bash "$0" "$BUILD" --across-hosts "$T" >"$T/netns.out" 2>&1
    rc=$?
    if [ $rc -eq 77 ]; then
        echo "SKIP across hosts: $(grep -m1 SKIP "$T/netns.out")"
    elif [ $rc -ne 0 ]; then
        cat "$T/netns.out" >&2
        fail "across hosts: exit status $rc"
    else
        grep '^ok' "$T/netns.out" | sed 's/^ok [0-9]* - //' | while read -r line; do echo "ok - $line"; done
        PASSED=$((PASSED + 1))
    fi
fi
echo "$PASSED passed, 0 failed"
