/* client_expose: the input families of sluice-trainer's /metrics, served
 * by the client library (see client_expose.h and docs/operations.md).
 *
 * Names, units and labels are the trainer's (trainer/train_expose.c):
 * the sluice_trainer_ prefix, so the dashboard's panels and queries need
 * not know whether a worker is sluice-trainer or a Python script.
 *
 * Threads: client_expose_step runs on the client's thread and owns the
 * `last_*` marks and bound_mark; the server's thread reads the metrics,
 * the histograms and the copied waits through relaxed atomics, and asks
 * for the input's bound through bound_wanted.
 */
#include "client_expose.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>

#include "sl_alloc.h"
#include "sl_clock.h"
#include "sl_hist.h"
#include "sl_http_metrics.h"
#include "sl_prom.h"
#include "client.h"

const struct sl_metric_def client_expose_defs[CLIENT_X_COUNT] = {
    CLIENT_METRIC_DEFS,
    [CLIENT_X_STEPS] = {"steps", SL_METRIC_COUNTER, "steps handed out"},
    [CLIENT_X_EPOCHS] = {"epochs", SL_METRIC_COUNTER, "epochs begun"},
};

struct client_expose {
    struct sl_http_metrics *http;
    struct sl_metrics *m;
    _Atomic uint64_t fw_ns[CLIENT_MAX_FEEDERS]; /* the wait by feeder, as of the last step */
    _Atomic size_t nfeeders;
    /* the feeder waited for most between two scrapes and its busiest
     * stage; -1: none */
    _Atomic int bound_wanted, bound_feeder, bound_stage;
    uint64_t bound_mark[CLIENT_MAX_FEEDERS]; /* step's: the wait by feeder at the last evaluation */
    struct sl_buf labels;
    struct sl_hist step, wait;
    uint64_t last_ns, last_wait_ns; /* step's: the previous step's */
    int stepped;
};

/* The feeder whose wait grew most since the last evaluation, and its
 * busiest stage (the client's thread). */
static void find_bound(struct client_expose *e, struct client *cl, const uint64_t *w_ns, size_t F)
{
    int worst = -1;
    uint64_t most = 0;
    for (size_t j = 0; j < F; j++) {
        uint64_t d = w_ns[j] > e->bound_mark[j] ? w_ns[j] - e->bound_mark[j] : 0;
        e->bound_mark[j] = w_ns[j];
        if (d > most) {
            most = d;
            worst = (int)j;
        }
    }
    uint64_t ns[SL_WIRE_STAGES];
    int stage = -1;
    if (worst >= 0 && client_feeder_stages(cl, (size_t)worst, ns, &stage) != 0)
        stage = -1;
    atomic_store_explicit(&e->bound_stage, stage, memory_order_relaxed);
    atomic_store_explicit(&e->bound_feeder, worst, memory_order_relaxed);
}

void client_expose_step(struct client_expose *e, struct client *cl)
{
    if (e == NULL)
        return;
    uint64_t now = sl_clock_ns(), waited = sl_metrics_get(e->m, CLIENT_M_WAIT_NS);
    if (e->stepped)
        sl_hist_observe(&e->step, now - e->last_ns);
    sl_hist_observe(&e->wait, waited - e->last_wait_ns);
    e->last_ns = now;
    e->last_wait_ns = waited;
    e->stepped = 1;
    double w[CLIENT_MAX_FEEDERS];
    uint64_t w_ns[CLIENT_MAX_FEEDERS];
    size_t F = client_wait_by_feeder(cl, w, CLIENT_MAX_FEEDERS);
    if (F > CLIENT_MAX_FEEDERS)
        F = CLIENT_MAX_FEEDERS;
    for (size_t j = 0; j < F; j++) {
        w_ns[j] = (uint64_t)(w[j] * 1e9 + 0.5);
        atomic_store_explicit(&e->fw_ns[j], w_ns[j], memory_order_relaxed);
    }
    atomic_store_explicit(&e->nfeeders, F, memory_order_release);
    if (atomic_exchange_explicit(&e->bound_wanted, 0, memory_order_relaxed))
        find_bound(e, cl, w_ns, F);
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
    sl_prom_counter(&p, "sluice_trainer_steps_total", "Steps received (one piece per replica each).",
                    v[CLIENT_X_STEPS]);
    sl_prom_counter(&p, "sluice_trainer_epochs_total", "Epochs begun.", v[CLIENT_X_EPOCHS]);
    sl_prom_counter(&p, "sluice_trainer_pieces_total", "Pieces received.", v[CLIENT_M_PIECES]);
    sl_prom_counter(&p, "sluice_trainer_shm_pieces_total", "Pieces read in a feeder's shared memory (no copy).",
                    v[CLIENT_M_SHM_PIECES]);
    sl_prom_counter(&p, "sluice_trainer_samples_total", "Samples (rows) received.", v[CLIENT_M_ROWS]);
    sl_prom_counter(&p, "sluice_trainer_received_bytes_total", "Tensor bytes received.", v[CLIENT_M_BYTES]);
    sl_prom_counter_seconds(&p, "sluice_trainer_input_wait_seconds_total",
                            "Time waiting for pieces (the input stall), all feeders.", v[CLIENT_M_WAIT_NS]);
    size_t F = atomic_load_explicit(&e->nfeeders, memory_order_acquire);
    if (F > 0) {
        const char *name = "sluice_trainer_input_wait_by_feeder_seconds_total";
        sl_prom_family(&p, name, "counter",
                       "Time waiting for pieces, by the feeder whose piece ended each wait (the piece next in order; "
                       "after a takeover, the survivor's index). As of the last step received.");
        for (size_t j = 0; j < F; j++) {
            char label[32];
            snprintf(label, sizeof label, "feeder=\"%zu\"", j);
            sl_prom_seconds(&p, name, label, atomic_load_explicit(&e->fw_ns[j], memory_order_relaxed));
        }
    }
    atomic_store_explicit(&e->bound_wanted, 1, memory_order_relaxed);
    int bf = atomic_load_explicit(&e->bound_feeder, memory_order_relaxed);
    if (bf >= 0) {
        char label[64];
        int st = atomic_load_explicit(&e->bound_stage, memory_order_relaxed);
        snprintf(label, sizeof label, "feeder=\"%d\",stage=\"%s\"", bf, st >= 0 ? client_stage_name(st) : "");
        sl_prom_family(&p, "sluice_trainer_input_bound_info", "gauge",
                       "Between the two scrapes before this one: the feeder the input waited for most, and its busiest "
                       "stage lately (from its STATS; \"\" before two); always 1, absent when nothing was waited for.");
        sl_prom_u64(&p, "sluice_trainer_input_bound_info", label, 1);
    }
    struct sl_hist_snap h;
    sl_hist_snapshot(&e->step, &h);
    sl_prom_hist(&p, "sluice_trainer_step_seconds",
                 "Time between consecutive steps handed out (the caller's work on a step, and the wait for the next).",
                 NULL, &h);
    sl_hist_snapshot(&e->wait, &h);
    sl_prom_hist(&p, "sluice_trainer_step_input_wait_seconds", "Each step's time waiting for its pieces.", NULL, &h);
    sl_prom_counter(&p, "sluice_trainer_feeder_rejoins_total", "Feeders lost and asked to resume.",
                    v[CLIENT_M_REJOINS]);
    sl_prom_counter(&p, "sluice_trainer_feeder_takeovers_total",
                    "Lost feeders' shares taken over by surviving feeders.", v[CLIENT_M_TAKEOVERS]);
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
    sl_hist_init(&e->step, sl_hist_step_bounds_ns, sl_hist_step_nbounds);
    sl_hist_init(&e->wait, sl_hist_step_bounds_ns, sl_hist_step_nbounds);
    atomic_init(&e->nfeeders, 0);
    atomic_init(&e->bound_wanted, 1);
    atomic_init(&e->bound_feeder, -1);
    atomic_init(&e->bound_stage, -1);
    for (size_t j = 0; j < CLIENT_MAX_FEEDERS; j++)
        atomic_init(&e->fw_ns[j], 0);
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
