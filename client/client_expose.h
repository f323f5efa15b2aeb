/* client_expose: a client library user's /metrics endpoint (libsluice's
 * sluice_options.metrics_listen, the Python package's metrics_listen=):
 * the trainer's input families (trainer/train_expose.h), under the same
 * names and labels, so a job whose workers are Python processes shows on
 * the dashboard as sluice-trainer's do: steps, epochs, pieces, samples,
 * bytes, the input wait (in all, by feeder, per step), the input's bound
 * (feeder and stage), the time between steps, rejoins and takeovers, and
 * sluice_process_info (program "client").
 *
 * The figures are a metrics table that begins with the client's slots
 * (client_metrics.h), then steps and epochs (CLIENT_X_*), which the
 * caller counts as it hands out steps, calling client_expose_step after
 * each (the client's thread): that copies the input wait by feeder and,
 * when a scrape asked, the input's bound into atomics the scrape reads,
 * and observes the histograms. The server runs on its own thread
 * (sl_http_metrics.h) and never touches the client.
 *
 * Thread-safe: start, step and stop on the client's thread; scrapes on the
 * server's.
 */
#ifndef CLIENT_EXPOSE_H
#define CLIENT_EXPOSE_H

#include <stdint.h>

#include "sl_buf.h"
#include "sl_error.h"
#include "sl_metrics.h"
#include "client_metrics.h"

struct client;
struct client_expose;

/* The table's slots after the client's. */
enum client_expose_metric {
    CLIENT_X_STEPS = CLIENT_M_COUNT, /* steps handed out */
    CLIENT_X_EPOCHS,                 /* epochs begun (a step of a new epoch handed out) */
    CLIENT_X_COUNT
};

/* The table (client_metrics.h's rows, then steps and epochs). */
extern const struct sl_metric_def client_expose_defs[CLIENT_X_COUNT];

/* Serve /metrics on `listen` (HOST:PORT, sl_http_metrics_parse; port 0:
 * any free one). m: a table over client_expose_defs (borrowed: it outlives
 * the endpoint); job and worker: the labels sluice_job and worker. 0, or
 * SL_EINVAL (the address; the job's name too long for a label), SL_EIO
 * (the bind: "127.0.0.1:9464: bind: Address already in use") or SL_ENOMEM,
 * with err saying which. */
int client_expose_start(struct client_expose **out, const char *listen, struct sl_metrics *m, const char *job,
                        uint32_t worker, struct sl_error *err) SL_MUST_CHECK;

/* A step was counted (CLIENT_X_STEPS grew): observe it and copy cl's
 * input wait by feeder (the client's thread). */
void client_expose_step(struct client_expose *e, struct client *cl);

/* The exposition now, into b (the endpoint's callback; tests). 0 or the
 * buffer's error. */
int client_expose_write(struct client_expose *e, struct sl_buf *b) SL_MUST_CHECK;

/* The port it listens on (the kernel's pick for port 0); 0 for NULL. */
unsigned client_expose_port(const struct client_expose *e);

/* Stop serving (a scrape being answered finishes first) and free. NULL is
 * ignored. */
void client_expose_stop(struct client_expose *e);

#endif
