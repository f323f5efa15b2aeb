/* client_expose: the input families of sluice-trainer's /metrics, served
 * by the client library (see client_expose.h and docs/operations.md).
 *
 * The families are client_input's, as sluice-trainer's endpoint writes
 * them (trainer/train_expose.c): the dashboard's panels and queries need
 * not know whether a worker is sluice-trainer or a Python script. The
 * server's thread reads the metrics (relaxed atomics) and client_input's
 * copies; client_expose_step feeds those on the client's thread.
 */
#include "client_expose.h"

#include <inttypes.h>
#include <stdio.h>

#include "sl_alloc.h"
#include "sl_http_metrics.h"
#include "sl_prom.h"
#include "client_input.h"

const struct sl_metric_def client_expose_defs[CLIENT_X_COUNT] = {
    CLIENT_METRIC_DEFS,
    [CLIENT_X_STEPS] = {"steps", SL_METRIC_COUNTER, "steps handed out"},
    [CLIENT_X_EPOCHS] = {"epochs", SL_METRIC_COUNTER, "epochs begun"},
};

struct client_expose {
    struct sl_http_metrics *http;
    struct sl_metrics *m;
    struct sl_buf labels;
    struct client_input in;
};

void client_expose_step(struct client_expose *e, struct client *cl)
{
    if (e != NULL)
        client_input_step(&e->in, sl_metrics_get(e->m, CLIENT_M_WAIT_NS), cl);
}

int client_expose_write(struct client_expose *e, struct sl_buf *b)
{
    struct sl_metrics_snap s;
    sl_metrics_snapshot(e->m, &s);
    if (s.n < CLIENT_X_COUNT)
        return SL_EINVAL;
    const uint64_t *v = s.v;
    struct sl_prom p = {.b = b, .labels = (const char *)e->labels.data};
    sl_prom_process_info(&p, "client");
    struct client_input_counts c = {
        .steps = v[CLIENT_X_STEPS],
        .epochs = v[CLIENT_X_EPOCHS],
        .pieces = v[CLIENT_M_PIECES],
        .shm_pieces = v[CLIENT_M_SHM_PIECES],
        .rows = v[CLIENT_M_ROWS],
        .bytes = v[CLIENT_M_BYTES],
        .wait_ns = v[CLIENT_M_WAIT_NS],
        .rejoins = v[CLIENT_M_REJOINS],
        .takeovers = v[CLIENT_M_TAKEOVERS],
        .joins = v[CLIENT_M_FEEDER_JOINS],
    };
    client_input_write(&e->in, &p, &c,
                       "Time between consecutive steps handed out (the caller's work on a step, and the wait for the "
                       "next).");
    return p.rc;
}

static int serve(void *ctx, struct sl_buf *out)
{
    return client_expose_write(ctx, out);
}

int client_expose_start(struct client_expose **out, const char *listen, struct sl_metrics *m, const char *job,
                        uint32_t worker, struct sl_error *err)
{
    *out = NULL;
    struct client_expose *e = sl_calloc(1, sizeof *e);
    if (e == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    e->m = m;
    client_input_init(&e->in);
    sl_buf_init(&e->labels, 4096);
    char index[16];
    snprintf(index, sizeof index, "%" PRIu32, worker);
    int rc = sl_prom_label(&e->labels, "sluice_job", job);
    if (rc == 0)
        rc = sl_prom_label(&e->labels, "worker", index);
    if (rc != 0) {
        rc = sl_error_set(err, rc == SL_ENOMEM ? SL_ENOMEM : SL_EINVAL, "the job's name does not fit a label");
        goto out_free;
    }
    struct sl_http_metrics_opts ho = {.listen = listen, .fn = serve, .ctx = e};
    rc = sl_http_metrics_start(&e->http, &ho, err);
    if (rc != 0)
        goto out_free;
    *out = e;
    return 0;
out_free:
    sl_buf_free(&e->labels);
    sl_free(e);
    return rc;
}

unsigned client_expose_port(const struct client_expose *e)
{
    return e != NULL ? sl_http_metrics_port(e->http) : 0;
}

void client_expose_stop(struct client_expose *e)
{
    if (e == NULL)
        return;
    sl_http_metrics_stop(e->http); /* no request runs past this */
    sl_buf_free(&e->labels);
    sl_free(e);
}
