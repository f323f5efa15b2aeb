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
 * An elastic member (--elastic) serves from its start to its end, across
 * the changes of its world: the figures are the process's (the table m
 * outlives every client and loop), the client's wait by feeder is carried
 * from one client to the next (train_expose_input_closing), and three
 * families say which world it is in (train_expose_world).
 *
 * Thread-safe: start, stop, world and input_closing from the main thread;
 * stop after every thread that adds to the metrics has ended.
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
 * worker: the labels' values (worker: the index, or an elastic joiner's
 * --join, fixed for the process's life). Logs the port, or why it cannot serve. 0, or the
 * exit status: 2 for an address it cannot parse, 1 otherwise. */
int train_expose_start(struct train_expose **out, const char *listen, struct sl_metrics *m,
                       struct train_loop *const *loop, struct client *const *cl, const char *job, const char *worker);

/* --elastic: this member is now in a world of `workers` (0: not admitted
 * yet, or let go) as worker `index`; changed: the world changed (counted in
 * sluice_trainer_world_changes_total). The first call turns the elastic
 * families on. NULL e: nothing. */
void train_expose_world(struct train_expose *e, uint32_t workers, uint32_t index, int changed);

/* The client cl is about to be closed, another to be opened in its place
 * (an elastic change): keep its wait by feeder (client_input.h). NULL e or
 * cl: nothing. */
void train_expose_input_closing(struct train_expose *e, struct client *cl);

/* Stop serving, stop watching the metrics, free. NULL is ignored. */
void train_expose_stop(struct train_expose *e);

/* The exposition now, into b (for tests and the endpoint). 0 or the
 * buffer's error. */
int train_expose_write(struct train_expose *e, struct sl_buf *b) SL_MUST_CHECK;

/* The port it listens on (the kernel's pick for port 0). */
unsigned train_expose_port(const struct train_expose *e);

#endif
