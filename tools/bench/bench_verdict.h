/* bench_verdict.h: the "limited by" verdict of sluice-bench run, a pure
 * function of the figures one configuration measured (its rule is stated in
 * docs/bench.md, "limited by"). Kept apart from the reports so that a test
 * can feed it any figures.
 *
 * Thread-safe: yes (no state).
 */
#ifndef BENCH_VERDICT_H
#define BENCH_VERDICT_H

#include <stddef.h>

struct bench_verdict_in {
    /* ratio of the measured rate to each limit; < 0: no such limit */
    double r_disk, r_inflate, r_wire_zmq, r_wire_memcpy;
    double shm_share; /* of the pieces the trainers got, the share read in shared memory (0..1) */
    double cpu_util;  /* all processes' CPU / (wall x CPUs), 0..1 */
    int ncpu;
    int trains_model;       /* the trainers trained a model (not --model none) */
    double stall_pct;       /* the trainers' input stall, % */
    const char *busy_stage; /* the feeders' busiest stage; NULL: no stage breakdown */
    int wait_feeder;        /* the feeder the trainers waited for most (their attribution) */
    double wait_share;      /* its share of their input wait, 0..1; <= 0: unknown (or one feeder) */
    /* the busiest feeder thread's CPU over the stream, a fraction of one
     * core (a decode, serving or ZeroMQ I/O thread); have_busy 0: unknown */
    int have_busy;
    double busy_max;
};

/* Below this share of a core the feeder's busiest thread was not what
 * held the stream back: the verdict says so rather than name its stage as
 * a bound. */
#define BENCH_VERDICT_THREAD_BUSY 0.8

/* The share of raw ZeroMQ's rate the pieces sent by copy used: r_wire_zmq x
 * (1 - shm_share). Pieces read in a feeder's shared memory do not go through
 * ZeroMQ, so with every piece there this is 0. < 0 when r_wire_zmq is. */
double bench_verdict_copy_zmq(const struct bench_verdict_in *in);

/* The verdict ("raw ZeroMQ (0.92x of it)", "feeder stage decode", ...)
 * into buf[n], always NUL-terminated. */
void bench_verdict(const struct bench_verdict_in *in, char *buf, size_t n);

#endif
