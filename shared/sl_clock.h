/* sl_clock: monotonic time for measurements, wall time for timestamps. */
#ifndef SL_CLOCK_H
#define SL_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t sl_clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CPU time of the calling thread (a system call on most kernels: for per
 * piece or per run measurements, not per record). */
static inline uint64_t sl_clock_thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Wall-clock time (nanoseconds since the epoch, UTC): for timestamps, never
 * for durations (it jumps when the clock is set). */
static inline uint64_t sl_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec < 0 ? 0 : (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline double sl_clock_s(void)
{
    return (double)sl_clock_ns() / 1e9;
}

#endif
