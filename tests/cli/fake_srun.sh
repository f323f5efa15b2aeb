#!/usr/bin/env bash
# A stand-in for srun, for test_deploy_slurm.sh: runs the command once per
# task on this machine, with the variables a real srun gives its tasks.
#
#   srun [--kill-on-bad-exit=1] [--distribution=block|cyclic] [OTHER OPTIONS] COMMAND [ARGS...]
#
# The step comes from the environment, the way the test describes it:
#   SLURM_JOB_NODELIST, SLURM_TASKS_PER_NODE   passed on as the step's
#   FAKE_SRUN_NODES    the node names, expanded here by the test (not by
#                      sluice), space-separated, in the node list's order
#   FAKE_SRUN_COUNTS   tasks per node, space-separated
#   FAKE_SRUN_NS       optional: a network namespace per node; each task runs
#                      in its node's, in a PID namespace of its own (so it is
#                      another host to the others: no shared /proc)
#   FAKE_SRUN_DISTRIBUTION  optional: the SLURM_DISTRIBUTION the tasks are
#                      told, whatever the placement was (to test the check)
#   FAKE_SRUN_LOGS     optional: a folder for each task's stderr (task-N.err)
# Tasks are placed by --distribution (block by default), each told its
# SLURMD_NODENAME, so sluice's own placement is checked against this one.
# Exit status: the first failing task's (all others are then killed when
# --kill-on-bad-exit is given), else 0.
set -u
kill_on_bad=0 dist=block
while [ $# -gt 0 ]; do
    case "$1" in
        --kill-on-bad-exit|--kill-on-bad-exit=1|-K) kill_on_bad=1; shift ;;
        --distribution=*) dist=${1#*=}; shift ;;
        -m) dist=$2; shift 2 ;;
        --*) shift ;;
        *) break ;;
    esac
done
[ $# -gt 0 ] || { echo "fake srun: no command" >&2; exit 2; }
read -ra nodes <<<"${FAKE_SRUN_NODES:?}"
read -ra counts <<<"${FAKE_SRUN_COUNTS:?}"
read -ra nss <<<"${FAKE_SRUN_NS:-}"
[ ${#nodes[@]} -eq ${#counts[@]} ] || { echo "fake srun: FAKE_SRUN_NODES and _COUNTS differ in length" >&2; exit 2; }

# placement: task -> node index, and its local id there
place=() localid=() used=()
for i in "${!nodes[@]}"; do used[i]=0; done
ntasks=0
for c in "${counts[@]}"; do ntasks=$((ntasks + c)); done
t=0
if [ "${dist%%[:,]*}" = cyclic ]; then
    for ((round = 0; t < ntasks; round++)); do
        for i in "${!nodes[@]}"; do
            if [ "${counts[i]}" -gt "$round" ] && [ $t -lt $ntasks ]; then
                place[t]=$i localid[t]=${used[i]}; used[i]=$((used[i] + 1)); t=$((t + 1))
            fi
        done
    done
else
    for i in "${!nodes[@]}"; do
        for ((k = 0; k < counts[i]; k++)); do place[t]=$i localid[t]=$k; t=$((t + 1)); done
    done
fi

pids=()
for ((t = 0; t < ntasks; t++)); do
    i=${place[t]}
    prefix=()
    if [ ${#nss[@]} -gt 0 ]; then
        prefix=(ip netns exec "${nss[i]}" unshare --pid --fork --mount-proc --kill-child)
    fi
    errout=/dev/stderr
    [ -n "${FAKE_SRUN_LOGS:-}" ] && errout="$FAKE_SRUN_LOGS/task-$t.err"
    env SLURM_PROCID=$t SLURM_LOCALID=${localid[t]} SLURM_NODEID=$i SLURMD_NODENAME="${nodes[i]}" \
        SLURM_STEP_ID=0 SLURM_STEP_NODELIST="$SLURM_JOB_NODELIST" SLURM_STEP_NUM_NODES=${#nodes[@]} \
        SLURM_STEP_NUM_TASKS=$ntasks SLURM_NTASKS=$ntasks SLURM_STEP_TASKS_PER_NODE="$SLURM_TASKS_PER_NODE" \
        SLURM_DISTRIBUTION="${FAKE_SRUN_DISTRIBUTION:-$dist}" \
        "${prefix[@]}" "$@" 2>"$errout" &
    pids+=($!)
done

# wait for every task, polling (bash's wait -n loses statuses of tasks that
# end together); a task that fails first stops the others with
# --kill-on-bad-exit
status=0 stopping=0
live=("${pids[@]}")
while [ ${#live[@]} -gt 0 ]; do
    rest=()
    for p in "${live[@]}"; do
        if kill -0 "$p" 2>/dev/null; then
            rest+=("$p")
            continue
        fi
        wait "$p"
        rc=$?
        if [ $rc -ne 0 ] && [ $status -eq 0 ]; then
            status=$rc
            echo "fake srun: a task (pid $p) exited with status $rc" >&2
        fi
    done
    live=("${rest[@]}")
    if [ $status -ne 0 ] && [ $kill_on_bad -eq 1 ] && [ $stopping -eq 0 ]; then
        stopping=1
        for p in "${live[@]}"; do kill -TERM "$p" 2>/dev/null; done
    fi
    [ ${#live[@]} -eq 0 ] || sleep 0.1
done
exit $status
