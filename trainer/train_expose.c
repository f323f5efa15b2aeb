/* train_expose: the trainer's metrics in the Prometheus text format (see
 * train_expose.h and docs/operations.md).
 *
 * Names: the sluice_trainer_ prefix, base units, _total on counters;
 * every sample carries sluice_job and worker (not "job", which Prometheus
 * sets on every target itself). The input families (steps, samples, the
 * input wait in all, by feeder and per step, the input's bound) are
 * client_input's (client/client_input.h), which the client library's
 * endpoint writes too: a step behind at most. All-reduce time is replica
 * 0's, timed by the strategy (TRAIN_M_ALLREDUCE_NS).
 *
 * Threads: on_step runs on the main loop's thread (it alone counts steps)
 * and feeds client_input; the server's thread reads the hash and the
 * metrics through relaxed atomics, and asks for a hash through
 * hash_wanted. The server's thread never reads the client or the training
 * loop: an elastic member closes and replaces both at a change (on the main
 * thread, between steps), and what the families show of them is what
 * on_step copied. The elastic world is set by the main thread and read by
 * the server's under world_mu (a consistent triple).
 */
#include "train_expose.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "sl_alloc.h"
#include "sl_http_metrics.h"
#include "sl_log.h"
#include "sl_prom.h"
#include "client.h"
#include "client_input.h"
#include "train_loop.h"
#include "train_metrics.h"

struct train_expose {
    struct sl_http_metrics *http;
    struct sl_metrics *m;
    struct train_loop *const *loop;
    struct client *const *cl; /* read by on_step only (the main thread's) */
    struct sl_buf labels;
    struct client_input in;  /* the input families (the client library's endpoint writes the same) */
    _Atomic int hash_wanted; /* set by a scrape, taken by on_step */
    _Atomic int have_hash;
    _Atomic uint64_t hash;
    /* --elastic (train_expose_world): the world's size (0: a joiner not
     * admitted yet, or a member let go), this member's index in it, the
     * changes seen; elastic 0: no elastic families */
    pthread_mutex_t world_mu;
    int elastic;
    uint32_t workers, index;
    uint64_t changes;
};

/* A step was received (TRAIN_M_STEPS grew): the input families' live
 * part (client_input_step), and the weights' hash when a scrape asked. */
static void on_step(void *ctx, uint64_t steps)
{
    struct train_expose *e = ctx;
    (void)steps;
    client_input_step(&e->in, sl_metrics_get(e->m, TRAIN_M_WAIT_NS), e->cl != NULL ? *e->cl : NULL);
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
    struct client_input_counts c = {
        .steps = v[TRAIN_M_STEPS],
        .epochs = v[TRAIN_M_EPOCHS],
        .pieces = v[TRAIN_M_PIECES],
        .shm_pieces = v[TRAIN_M_SHM_PIECES],
        .rows = v[TRAIN_M_ROWS],
        .bytes = v[TRAIN_M_BYTES],
        .wait_ns = v[TRAIN_M_WAIT_NS],
        .rejoins = v[TRAIN_M_REJOINS],
        .takeovers = v[TRAIN_M_TAKEOVERS],
        .joins = v[TRAIN_M_FEEDER_JOINS],
    };
    client_input_write(&e->in, &p, &c,
                       "Time between consecutive steps received (receiving, staging and running a step).");
    sl_prom_counter(&p, "sluice_trainer_trained_steps_total", "Steps trained (run on the model).", v[TRAIN_M_TRAINED]);
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
    if (v[TRAIN_M_TRAINED] > 0) {
        sl_prom_family(&p, "sluice_trainer_loss", "gauge", "The last trained step's loss.");
        sl_prom_double(&p, "sluice_trainer_loss", NULL, sl_metrics_seconds(&s, TRAIN_M_LOSS));
        sl_prom_family(&p, "sluice_trainer_accuracy", "gauge", "The last trained step's accuracy.");
        sl_prom_double(&p, "sluice_trainer_accuracy", NULL, sl_metrics_seconds(&s, TRAIN_M_ACCURACY));
    }
    pthread_mutex_lock(&e->world_mu);
    int elastic = e->elastic;
    uint32_t workers = e->workers, index = e->index;
    uint64_t changes = e->changes;
    pthread_mutex_unlock(&e->world_mu);
    if (elastic) {
        sl_prom_family(&p, "sluice_trainer_workers", "gauge",
                       "--elastic: the workers of the world this member is in (0: a joiner not admitted yet, or a "
                       "member let go).");
        sl_prom_u64(&p, "sluice_trainer_workers", NULL, workers);
        if (workers > 0) {
            sl_prom_family(&p, "sluice_trainer_worker_index", "gauge",
                           "--elastic: this member's index (rank) in its world; a change may renumber it.");
            sl_prom_u64(&p, "sluice_trainer_worker_index", NULL, index);
        }
        sl_prom_counter(&p, "sluice_trainer_world_changes_total",
                        "--elastic: changes of the world this member went through (its own admission and its "
                        "release included).",
                        changes);
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
                       struct train_loop *const *loop, struct client *const *cl, const char *job, const char *worker)
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
    client_input_init(&e->in);
    atomic_init(&e->hash_wanted, 1);
    atomic_init(&e->have_hash, 0);
    atomic_init(&e->hash, 0);
    if (pthread_mutex_init(&e->world_mu, NULL) != 0) {
        sl_log(SL_LOG_ERROR, "--metrics-listen: pthread_mutex_init failed");
        sl_free(e);
        return 1;
    }
    sl_buf_init(&e->labels, 4096);
    struct sl_error err = {0};
    int rc = sl_prom_label(&e->labels, "sluice_job", job);
    if (rc == 0)
        rc = sl_prom_label(&e->labels, "worker", worker);
    if (rc != 0) {
        sl_log(SL_LOG_ERROR,
               "--metrics-listen: the job's name or this worker's (--worker, --join) does not fit a label");
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
    pthread_mutex_destroy(&e->world_mu);
    sl_free(e);
    return rc == SL_EINVAL ? 2 : 1;
}

void train_expose_world(struct train_expose *e, uint32_t workers, uint32_t index, int changed)
{
    if (e == NULL)
        return;
    pthread_mutex_lock(&e->world_mu);
    e->elastic = 1;
    e->workers = workers;
    e->index = index;
    e->changes += changed != 0;
    pthread_mutex_unlock(&e->world_mu);
}

void train_expose_input_closing(struct train_expose *e, struct client *cl)
{
    if (e != NULL)
        client_input_client_closing(&e->in, cl);
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
    pthread_mutex_destroy(&e->world_mu);
    sl_free(e);
}
