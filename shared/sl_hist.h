/* sl_hist: a histogram of durations with fixed bucket bounds, in the shape
 * Prometheus exposes (cumulative buckets, a sum and a count).
 *
 * Observing costs two relaxed atomic adds, no lock, so a hot loop may
 * observe every event; a snapshot may be taken from any thread meanwhile.
 * A snapshot's buckets are read one by one: its count is the last
 * (cumulative) bucket, so buckets and count always agree; its sum may miss
 * or hold an observation made while it was read.
 *
 * Thread-safe: yes, every function but init (before any other call).
 */
#ifndef SL_HIST_H
#define SL_HIST_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define SL_HIST_MAX_BOUNDS 24

/* Bounds for durations from 100 us to 10 s (a training step, an input
 * wait), in nanoseconds. */
extern const uint64_t sl_hist_step_bounds_ns[];
extern const size_t sl_hist_step_nbounds;

struct sl_hist {
    const uint64_t *bounds_ns;                       /* ascending, borrowed for the histogram's life */
    size_t n;                                        /* bounds; bucket n is the overflow (+Inf) */
    _Atomic uint64_t bucket[SL_HIST_MAX_BOUNDS + 1]; /* not cumulative */
    _Atomic uint64_t sum_ns;
};

struct sl_hist_snap {
    const uint64_t *bounds_ns;
    size_t n;
    uint64_t cum[SL_HIST_MAX_BOUNDS + 1]; /* cumulative: cum[i] observations <= bounds_ns[i]; cum[n] all */
    uint64_t sum_ns;
};

/* All zero, over bounds_ns[0..n) (n <= SL_HIST_MAX_BOUNDS, ascending:
 * anything else is cut to the ascending prefix that fits). */
void sl_hist_init(struct sl_hist *h, const uint64_t *bounds_ns, size_t n);

/* One observation of ns nanoseconds: into the first bucket whose bound is
 * >= ns (Prometheus' "le"). */
void sl_hist_observe(struct sl_hist *h, uint64_t ns);

void sl_hist_snapshot(const struct sl_hist *h, struct sl_hist_snap *out);

#endif
