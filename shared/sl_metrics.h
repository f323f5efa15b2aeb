/* sl_metrics: the counters and times a process reports, written by its
 * hot loops and read, as snapshots, from any thread. They are the one
 * source of every figure a program prints about itself (--stats, progress
 * lines, the counters logged at exit), and what a live exporter reads.
 *
 * A metrics object is a fixed table of slots, declared once by the program
 * (name, kind, help line): counters only grow (pieces, bytes, refusals),
 * times are nanoseconds summed by whoever measured them, gauges are set
 * (a pool's size), real gauges hold a double (the last step's loss). Every slot is a 64-bit atomic updated with relaxed
 * ordering: a write costs one atomic add, no lock, and a snapshot taken
 * while others write gives each slot a value it really had (slots are not
 * read at one instant together).
 *
 * Thread-safe: yes, every function but create and destroy.
 */
#ifndef SL_METRICS_H
#define SL_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "sl_error.h"

#define SL_METRICS_MAX 64 /* slots in one object */

enum sl_metric_kind {
    SL_METRIC_COUNTER, /* a count that only grows */
    SL_METRIC_NS,      /* nanoseconds, summed */
    SL_METRIC_GAUGE,   /* a value that is set */
    SL_METRIC_REAL     /* a double that is set (its bits in the slot) */
};

struct sl_metric_def {
    const char *name; /* snake_case, unique in its table: what --stats and exporters print */
    enum sl_metric_kind kind;
    const char *help; /* one line */
};

struct sl_metrics;

/* A metrics object over defs[0..n) (borrowed for its life; n <= 64), all
 * zero. 0, SL_EINVAL or SL_ENOMEM. */
int sl_metrics_create(struct sl_metrics **out, const struct sl_metric_def *defs, size_t n) SL_MUST_CHECK;
void sl_metrics_destroy(struct sl_metrics *m);

/* Add v to slot id (a counter or a time); set slot id (a gauge). An id out
 * of range is ignored. NULL m is accepted (nothing is measured). */
void sl_metrics_add(struct sl_metrics *m, unsigned id, uint64_t v);
void sl_metrics_set(struct sl_metrics *m, unsigned id, uint64_t v);
void sl_metrics_set_real(struct sl_metrics *m, unsigned id, double v);

/* Every slot's value now. */
struct sl_metrics_snap {
    const struct sl_metric_def *defs;
    size_t n;
    uint64_t v[SL_METRICS_MAX];
};
void sl_metrics_snapshot(const struct sl_metrics *m, struct sl_metrics_snap *out);

/* A slot of a snapshot as seconds (a time), as the double it holds (a real
 * gauge) or as a number; 0 for an id out of range. */
double sl_metrics_seconds(const struct sl_metrics_snap *s, unsigned id);

/* One slot's value now (0 for an id out of range or a NULL m). */
uint64_t sl_metrics_get(const struct sl_metrics *m, unsigned id);

/* A watcher of one slot: after each sl_metrics_add to slot `id`, fn(ctx,
 * the slot's new value) runs on the thread that added, before the add
 * returns. It turns a counter's events into per-event figures (a
 * histogram of the time between steps) without touching the code that
 * counts; it must be short and never block (it runs on a hot path). One
 * watcher per object; fn NULL removes it. The caller makes sure no add can
 * still be calling an old watcher when its ctx goes away (remove it once
 * every thread that adds to the slot has ended). */
typedef void (*sl_metrics_watch_fn)(void *ctx, uint64_t value);
void sl_metrics_watch(struct sl_metrics *m, unsigned id, sl_metrics_watch_fn fn, void *ctx);

#endif
