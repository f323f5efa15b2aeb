/* bench_verdict: which bound one configuration of sluice-bench run met.
 *
 * A rule of thumb, in this order (docs/bench.md, "limited by"):
 *  1. the limit whose ratio is highest, when it is >= 0.8: read() of the
 *     files, inflate, raw ZeroMQ, memcpy. Raw ZeroMQ bounds only the pieces
 *     that went through it: those read in a feeder's shared memory carry
 *     their bytes outside ZeroMQ (only a small handle is sent), so its ratio
 *     counts the copied share of the wire rate alone, and with every piece
 *     in shared memory it is never the verdict;
 *  2. the CPU, when the processes kept >= 85% of all cores busy;
 *  3. the trainer, when it waited for input < 5% of the time: its model's
 *     compute, or with --model none its own receiving of pieces;
 *  4. else the feeders, named by their busiest stage (CPU seconds), and,
 *     with several feeders, the one the trainers waited for most with its
 *     share of their input wait (the trainers' own attribution, their
 *     summaries' input_wait_by_feeder_s).
 */
#include "bench_verdict.h"

#include <stdio.h>

#define LIMIT_RATIO 0.8
#define CPU_BUSY 0.85
#define STALL_LOW_PCT 5.0

double bench_verdict_copy_zmq(const struct bench_verdict_in *in)
{
    if (in->r_wire_zmq < 0)
        return -1;
    double copied = 1 - in->shm_share;
    return in->r_wire_zmq * (copied > 0 ? copied : 0);
}

void bench_verdict(const struct bench_verdict_in *in, char *buf, size_t n)
{
    enum { DISK, INFLATE, ZMQ, MEMCPY, NLIMITS };
    static const char *const names[NLIMITS] = {"read() of the files", "inflate", "raw ZeroMQ", "memcpy"};
    double ratios[NLIMITS] = {in->r_disk, in->r_inflate, bench_verdict_copy_zmq(in), in->r_wire_memcpy};
    int best = 0;
    for (int k = 1; k < NLIMITS; k++)
        if (ratios[k] > ratios[best])
            best = k;
    if (ratios[best] >= LIMIT_RATIO && best == ZMQ && in->shm_share > 0)
        snprintf(buf, n, "raw ZeroMQ (%.2fx of it by the %.0f%% of pieces sent by copy)", ratios[best],
                 100 * (1 - in->shm_share));
    else if (ratios[best] >= LIMIT_RATIO)
        snprintf(buf, n, "%s (%.2fx of it)", names[best], ratios[best]);
    else if (in->cpu_util >= CPU_BUSY)
        snprintf(buf, n, "CPU: %.0f%% of %d cores busy%s%s", 100 * in->cpu_util, in->ncpu,
                 in->busy_stage ? "; feeder's busiest stage: " : "", in->busy_stage ? in->busy_stage : "");
    else if (in->stall_pct < STALL_LOW_PCT && in->trains_model)
        snprintf(buf, n, "trainer compute (input stall %.1f%%)", in->stall_pct);
    else if (in->stall_pct < STALL_LOW_PCT)
        snprintf(buf, n, "the trainer's receiving of pieces (--model none; input stall %.1f%%)", in->stall_pct);
    else {
        char who[64] = "";
        if (in->wait_share > 0)
            snprintf(who, sizeof who, "; feeder %d holds %.0f%% of the wait", in->wait_feeder, 100 * in->wait_share);
        if (in->busy_stage && in->have_busy && in->busy_max < BENCH_VERDICT_THREAD_BUSY)
            snprintf(buf, n,
                     "no feeder thread (the busiest at %.0f%% of a core; busiest stage %s): waits between threads, or "
                     "other processes on the cores (input stall %.1f%%%s)",
                     100 * in->busy_max, in->busy_stage, in->stall_pct, who);
        else if (in->busy_stage)
            snprintf(buf, n, "feeder stage %s (its busiest; input stall %.1f%%%s)", in->busy_stage, in->stall_pct, who);
        else
            snprintf(buf, n, "feeder (stage breakdown unavailable; input stall %.1f%%%s)", in->stall_pct, who);
    }
}
