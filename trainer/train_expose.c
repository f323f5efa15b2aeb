/* train_expose: the trainer's metrics in the Prometheus text format (see
 * train_expose.h and docs/operations.md).
 *
 * Names: the sluice_trainer_ prefix, base units, _total on counters;
 * every sample carries sluice_job and worker (not "job", which Prometheus
 * sets on every target itself). The input wait by feeder (the feeder whose
 * piece ended each wait, client_wait_by_feeder) is copied from the
 * client at each step received (on_step, the client's thread) into atomics
 * the scrape reads: a step behind at most. All-reduce time is replica 0's, timed
 * by the strategy (TRAIN_M_ALLREDUCE_NS).
 *
 * Threads: on_step runs on the main loop's thread (it alone counts steps)
 * and owns the `last_*` marks; the server's thread reads the histograms,
 * the hash and the metrics through relaxed atomics, and asks for a hash
 * through hash_wanted.
 */
#include "train_expose.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>

#include "sl_alloc.h"
#include "sl_clock.h"
#include "sl_hist.h"
#include "sl_http_metrics.h"
#include "sl_log.h"
#include "sl_prom.h"
#include "client.h"
#include "train_loop.h"
#include "train_metrics.h"

struct train_expose {
    struct sl_http_metrics *http;
    struct sl_metrics *m;
    struct train_loop *const *loop;
    struct client *const *cl;                   /* read by on_step only (the main thread's) */
    _Atomic uint64_t fw_ns[CLIENT_MAX_FEEDERS]; /* the wait by feeder, as of the last step */
    _Atomic size_t nfeeders;
    /* the input's bound between two scrapes: the feeder waited for most
     * since the previous one and its busiest stage (its STATS); -1: none */
    _Atomic int bound_wanted, bound_feeder, bound_stage;
    uint64_t bound_mark[CLIENT_MAX_FEEDERS]; /* on_step's: the wait by feeder at the last evaluation */
    struct sl_buf labels;
    struct sl_hist step, wait;
    _Atomic int hash_wanted; /* set by a scrape, taken by on_step */
    _Atomic int have_hash;
    _Atomic uint64_t hash;
    uint64_t last_ns, last_wait_ns; /* on_step's: the previous step's */
    int stepped;
};

/* A step was received (TRAIN_M_STEPS grew): its input wait is the wait
 * counted since the previous one; the time between steps is measured from
 * the second on. */
static void on_step(void *ctx, uint64_t steps)
{
    struct train_expose *e = ctx;
    (void)steps;
    uint64_t now = sl_clock_ns(), waited = sl_metrics_get(e->m, TRAIN_M_WAIT_NS);
    if (e->stepped)
        sl_hist_observe(&e->step, now - e->last_ns);
    sl_hist_observe(&e->wait, waited - e->last_wait_ns);
    e->last_ns = now;
    e->last_wait_ns = waited;
    e->stepped = 1;
    if (e->cl != NULL && *e->cl != NULL) {
        double w[CLIENT_MAX_FEEDERS];
        size_t F = client_wait_by_feeder(*e->cl, w, CLIENT_MAX_FEEDERS);
        for (size_t j = 0; j < F && j < CLIENT_MAX_FEEDERS; j++)
            atomic_store_explicit(&e->fw_ns[j], (uint64_t)(w[j] * 1e9 + 0.5), memory_order_relaxed);
        atomic_store_explicit(&e->nfeeders, F, memory_order_release);
        if (atomic_exchange_explicit(&e->bound_wanted, 0, memory_order_relaxed)) {
            int worst = -1;
            uint64_t most = 0;
            for (size_t j = 0; j < F && j < CLIENT_MAX_FEEDERS; j++) {
                uint64_t now_ns = (uint64_t)(w[j] * 1e9 + 0.5);
                uint64_t d = now_ns > e->bound_mark[j] ? now_ns - e->bound_mark[j] : 0;
                e->bound_mark[j] = now_ns;
                if (d > most) {
                    most = d;
                    worst = (int)j;
                }
            }
            uint64_t ns[SL_WIRE_STAGES];
            int stage = -1;
            if (worst >= 0 && client_feeder_stages(*e->cl, (size_t)worst, ns, &stage) != 0)
                stage = -1;
            atomic_store_explicit(&e->bound_stage, stage, memory_order_relaxed);
            atomic_store_explicit(&e->bound_feeder, worst, memory_order_relaxed);
        }
    }
    if (*e->loop != NULL && atomic_exchange_explicit(&e->hash_wanted, 0, memory_order_relaxed)) {
        atomic_store_explicit(&e->hash, train_loop_weights_hash(*e->loop), memory_order_relaxed);
        atomic_store_explicit(&e->have_hash, 1, memory_order_release);
    }
}

int train_expose_write(struct train_expose *e, struct sl_buf *b)
{
    struct sl_metrics_snap s;
    sl_metrics_snapshot(e->m, &s);
    if (s.n < TRAIN_M_COUNT)
        return SL_EINVAL;
    const uint64_t *v = s.v;
    struct sl_prom p = {.b = b, .labels = (const char *)e->labels.data};
    sl_prom_process_info(&p, "trainer");
    sl_prom_counter(&p, "sluice_trainer_steps_total", "Steps received (one piece per replica each).", v[TRAIN_M_STEPS]);
    sl_prom_counter(&p, "sluice_trainer_trained_steps_total", "Steps trained (run on the model).", v[TRAIN_M_TRAINED]);
    sl_prom_counter(&p, "sluice_trainer_epochs_total", "Epochs begun.", v[TRAIN_M_EPOCHS]);
    sl_prom_counter(&p, "sluice_trainer_pieces_total", "Pieces received.", v[TRAIN_M_PIECES]);
    sl_prom_counter(&p, "sluice_trainer_shm_pieces_total", "Pieces read in a feeder's shared memory (no copy).",
                    v[TRAIN_M_SHM_PIECES]);
    sl_prom_counter(&p, "sluice_trainer_samples_total", "Samples (rows) received.", v[TRAIN_M_ROWS]);
    sl_prom_counter(&p, "sluice_trainer_received_bytes_total", "Tensor bytes received.", v[TRAIN_M_BYTES]);
    sl_prom_counter_seconds(&p, "sluice_trainer_input_wait_seconds_total",
                            "Time waiting for pieces (the input stall), all feeders.", v[TRAIN_M_WAIT_NS]);
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
                 "Time between consecutive steps received (receiving, staging and running a step).", NULL, &h);
    sl_hist_snapshot(&e->wait, &h);
    sl_prom_hist(&p, "sluice_trainer_step_input_wait_seconds", "Each step's time waiting for its pieces.", NULL, &h);
    sl_prom_counter(&p, "sluice_trainer_h2d_bytes_total", "Bytes staged to the replicas' devices.",
                    v[TRAIN_M_H2D_BYTES]);
    sl_prom_counter_seconds(&p, "sluice_trainer_h2d_seconds_total",
                            "Replica time staging pieces to devices (packing, queuing and waiting for the copies).",
                            v[TRAIN_M_H2D_NS]);
    sl_prom_counter_seconds(&p, "sluice_trainer_step_run_seconds_total",
                            "Time running trained steps (compute and all-reduce).", v[TRAIN_M_RUN_NS]);
    sl_prom_counter_seconds(&p, "sluice_trainer_allreduce_seconds_total",
                            "Replica 0's time in all-reduces, host and device (waiting for the other replicas and "
                            "workers included; a part of step_run).",
                            v[TRAIN_M_ALLREDUCE_NS]);
    sl_prom_counter(&p, "sluice_trainer_feeder_rejoins_total", "Feeders lost and asked to resume.", v[TRAIN_M_REJOINS]);
    sl_prom_counter(&p, "sluice_trainer_feeder_takeovers_total",
                    "Lost feeders' shares taken over by surviving feeders.", v[TRAIN_M_TAKEOVERS]);
    if (v[TRAIN_M_TRAINED] > 0) {
        sl_prom_family(&p, "sluice_trainer_loss", "gauge", "The last trained step's loss.");
        sl_prom_double(&p, "sluice_trainer_loss", NULL, sl_metrics_seconds(&s, TRAIN_M_LOSS));
        sl_prom_family(&p, "sluice_trainer_accuracy", "gauge", "The last trained step's accuracy.");
        sl_prom_double(&p, "sluice_trainer_accuracy", NULL, sl_metrics_seconds(&s, TRAIN_M_ACCURACY));
    }
    atomic_store_explicit(&e->hash_wanted, 1, memory_order_relaxed);
    if (atomic_load_explicit(&e->have_hash, memory_order_acquire)) {
        char hex[24], label[40];
        snprintf(hex, sizeof hex, "%016" PRIx64, atomic_load_explicit(&e->hash, memory_order_relaxed));
        snprintf(label, sizeof label, "hash=\"%s\"", hex);
        sl_prom_family(&p, "sluice_trainer_weights_info", "gauge",
                       "The weights' hash (as in the --metrics lines and the summary) at the first step received "
                       "after the previous scrape; always 1.");
        sl_prom_u64(&p, "sluice_trainer_weights_info", label, 1);
    }
    return p.rc;
}

static int serve(void *ctx, struct sl_buf *out)
{
    return train_expose_write(ctx, out);
}

int train_expose_start(struct train_expose **out, const char *listen, struct sl_metrics *m,
                       struct train_loop *const *loop, struct client *const *cl, const char *job, uint32_t worker)
{
    *out = NULL;
    if (listen == NULL)
        return 0;
    struct train_expose *e = sl_calloc(1, sizeof *e);
    if (e == NULL) {
        sl_log(SL_LOG_ERROR, "out of memory");
        return 1;
    }
    e->m = m;
    e->loop = loop;
    e->cl = cl;
    sl_hist_init(&e->step, sl_hist_step_bounds_ns, sl_hist_step_nbounds);
    sl_hist_init(&e->wait, sl_hist_step_bounds_ns, sl_hist_step_nbounds);
    atomic_init(&e->hash_wanted, 1);
    atomic_init(&e->have_hash, 0);
    atomic_init(&e->bound_wanted, 1);
    atomic_init(&e->bound_feeder, -1);
    atomic_init(&e->bound_stage, -1);
    atomic_init(&e->hash, 0);
    sl_buf_init(&e->labels, 4096);
    char index[16];
    snprintf(index, sizeof index, "%" PRIu32, worker);
    struct sl_error err = {0};
    int rc = sl_prom_label(&e->labels, "sluice_job", job);
    if (rc == 0)
        rc = sl_prom_label(&e->labels, "worker", index);
    if (rc != 0) {
        sl_log(SL_LOG_ERROR, "--metrics-listen: the job's name does not fit a label");
        goto out_free;
    }
    struct sl_http_metrics_opts ho = {.listen = listen, .fn = serve, .ctx = e};
    rc = sl_http_metrics_start(&e->http, &ho, &err);
    if (rc != 0) {
        sl_log(SL_LOG_ERROR, "--metrics-listen: %s", err.msg);
        goto out_free;
    }
    sl_metrics_watch(m, TRAIN_M_STEPS, on_step, e);
    sl_log(SL_LOG_INFO, "metrics: serving /metrics on %s (port %u)", listen, sl_http_metrics_port(e->http));
    if (!sl_http_metrics_local(e->http))
        sl_log(SL_LOG_WARN, SL_HTTP_METRICS_REACHABLE, listen);
    *out = e;
    return 0;
out_free:
    sl_buf_free(&e->labels);
    sl_free(e);
    return rc == SL_EINVAL ? 2 : 1;
}

unsigned train_expose_port(const struct train_expose *e)
{
    return e != NULL ? sl_http_metrics_port(e->http) : 0;
}

void train_expose_stop(struct train_expose *e)
{
    if (e == NULL)
        return;
    sl_http_metrics_stop(e->http); /* no request runs past this */
    sl_metrics_watch(e->m, 0, NULL, NULL);
    sl_buf_free(&e->labels);
    sl_free(e);
}
