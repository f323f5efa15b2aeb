/* train_expose: the trainer's /metrics endpoint (--metrics-listen): its
 * figures (train_metrics.h) in the Prometheus text format, on a thread of
 * its own (sl_http_metrics.h), plus two histograms and the weights' hash
 * that the counters alone cannot give.
 *
 * The histograms (the time between steps received, each step's input
 * wait) are observed by a watcher on the steps counter (sl_metrics_watch):
 * it runs on the thread that counts steps, the main loop's, when a step
 * has been received, and costs two clock reads and four atomic adds. The
 * weights' hash is computed on that same thread (the only one that may
 * read the weights between steps) at the first step received after a
 * scrape asked for it, so that it costs nothing when nobody scrapes and
 * one hash per scrape otherwise; a scrape shows the hash of the weights
 * as they were at that step (a step or two behind the last trained; the
 * summary line has the final one).
 *
 * Thread-safe: start and stop from the main thread; stop after every thread
 * that adds to the metrics has ended.
 */
#ifndef TRAIN_EXPOSE_H
#define TRAIN_EXPOSE_H

#include <stdint.h>

#include "sl_buf.h"
#include "sl_error.h"
#include "sl_metrics.h"

struct train_loop;
struct client;
struct train_expose;

/* Serve /metrics on `listen` (NULL: nothing; *out NULL and 0). m: the
 * trainer's table (borrowed, outlives the endpoint); loop: where the main
 * thread keeps its training loop (NULL until made, and without a model);
 * cl: where it keeps its client (NULL until open; read on the main thread
 * only, at each step received, for the input wait by feeder); job and
 * worker: labels. Logs the port, or why it cannot serve. 0, or the
 * exit status: 2 for an address it cannot parse, 1 otherwise. */
int train_expose_start(struct train_expose **out, const char *listen, struct sl_metrics *m,
                       struct train_loop *const *loop, struct client *const *cl, const char *job, uint32_t worker);

/* Stop serving, stop watching the metrics, free. NULL is ignored. */
void train_expose_stop(struct train_expose *e);

/* The exposition now, into b (for tests and the endpoint). 0 or the
 * buffer's error. */
int train_expose_write(struct train_expose *e, struct sl_buf *b) SL_MUST_CHECK;

/* The port it listens on (the kernel's pick for port 0). */
unsigned train_expose_port(const struct train_expose *e);

#endif
