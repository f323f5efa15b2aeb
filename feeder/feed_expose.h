/* feed_expose: the feeder's /metrics endpoint (--metrics-listen): its
 * figures (feed_metrics.h) in the Prometheus text format, served on a
 * thread of its own (sl_http_metrics.h). Every request reads a snapshot
 * of the metrics object, relaxed atomics: the serving loop and the
 * executors never wait for a scrape. docs/operations.md lists every
 * metric.
 *
 * Thread-safe: start and stop from one thread.
 */
#ifndef FEED_EXPOSE_H
#define FEED_EXPOSE_H

#include <stdint.h>

#include "sl_buf.h"
#include "sl_error.h"
#include "sl_metrics.h"

struct feed_expose;

struct feed_expose_opts {
    const char *listen;         /* HOST:PORT */
    const struct sl_metrics *m; /* over feed_metric_defs; borrowed, outlives the endpoint */
    const char *job;            /* the job's name (label sluice_job) */
    uint32_t feeder_index;      /* label feeder */
};

/* Serve /metrics on o->listen. 0, SL_EINVAL (the address: err says what
 * was expected), SL_EIO (bind: err says why) or SL_ENOMEM. */
int feed_expose_start(struct feed_expose **out, const struct feed_expose_opts *o, struct sl_error *err) SL_MUST_CHECK;

/* The port it listens on (the kernel's pick for port 0). */
unsigned feed_expose_port(const struct feed_expose *e);

/* sl_http_metrics_scrapes and _begun of its server. */
uint64_t feed_expose_scrapes(const struct feed_expose *e);
uint64_t feed_expose_begun(const struct feed_expose *e);

/* Stop serving and free; NULL is ignored. */
void feed_expose_stop(struct feed_expose *e);

/* The exposition of a snapshot with the given labels, into b (for tests
 * and the endpoint). 0 or the buffer's error. */
int feed_expose_write(const struct sl_metrics_snap *s, const char *labels, struct sl_buf *b) SL_MUST_CHECK;

#endif
