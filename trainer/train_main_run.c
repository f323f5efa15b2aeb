/* train_main_run: sluice-trainer's training: meet (the rendezvous), start
 * (feeders, model, ring), run (the step loop), the ps mode's final pull,
 * finish and evaluate (see train_main_int.h). */
#include "train_main_int.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "sl_clock.h"
#include "sl_log.h"
#include "sl_thread.h"
#include "train_ps.h"
#include "train_rendezvous.h"

/* The training loop is created (CPU models, or each GPU's context, model
 * and NCCL rank: seconds, more across machines) on a helper thread, while
 * this thread keeps the feeders' connections alive: a trainer silent for
 * the feeders' timeout would be dropped before its first step. */
struct loop_create_job {
    struct train_loop *loop;
    const struct train_loop_opts *lo;
    const struct sl_wire_welcome *welcome;
    struct sl_error err;
    int rc;
    atomic_int done;
};

static void *loop_create_thread(void *arg)
{
    struct loop_create_job *j = arg;
    j->rc = train_loop_create(&j->loop, j->lo, j->welcome, &j->err);
    atomic_store(&j->done, 1);
    return NULL;
}

int trainer_loop_create_alive(struct train_loop **out, const struct train_loop_opts *lo, struct client *cl,
                              struct sl_error *err)
{
    struct loop_create_job j = {.lo = lo, .welcome = client_welcome(cl)};
    atomic_init(&j.done, 0);
    pthread_t t;
    if (sl_thread_start(&t, loop_create_thread, &j) != 0)
        return train_loop_create(out, lo, j.welcome, err);
    struct sl_error kerr = {0};
    int krc = 0;
    while (!atomic_load(&j.done)) {
        if (krc == 0)
            krc = client_keepalive(cl, 20, &kerr);
        else
            nanosleep(&(struct timespec){.tv_nsec = 20000000}, NULL);
    }
    pthread_join(t, NULL);
    if (j.rc != 0) {
        *err = j.err;
        return j.rc;
    }
    if (krc != 0) { /* a feeder was lost meanwhile */
        train_loop_destroy(j.loop);
        *err = kerr;
        return krc;
    }
    *out = j.loop;
    return 0;
}

/* ---- main's steps ---- */

/* The model the flags describe (inputs: the schema's, set later). */
void trainer_model_config_of(const struct trainer_opts *o, struct train_model_config *mc)
{
    memset(mc, 0, sizeof *mc);
    mc->classes = (int)o->classes;
    mc->seed = o->seed;
    mc->lr = (float)o->lr;
    mc->momentum = (float)o->momentum;
    if (o->model == MODEL_MLP) {
        mc->nhidden = o->nhidden;
        memcpy(mc->hidden, o->hidden_sizes, sizeof mc->hidden);
    }
}

/* What the workers must agree on (the rendezvous' config, and an elastic
 * joiner's): the model, its inputs, the optimizer, the replicas. */
void trainer_model_config_string(const struct trainer *t, char *cfg, size_t n)
{
    const struct trainer_opts *o = &t->o;
    snprintf(cfg, n, "model=%s hidden=%s classes=%u input=%s label=%s lr=%g momentum=%g seed=%u replicas=%u devices=%s",
             trainer_model_names[o->model], o->model == MODEL_MLP ? o->hidden : "-", o->classes, o->input, o->label,
             o->lr, o->momentum, o->seed, t->replicas, o->devspec.count > 0 ? o->devspec.kind : "cpu");
}

/* The workers meet at worker 0's ring endpoint and check that they agree
 * before anyone trains (issue #4: cluster rendezvous); with GPU replicas,
 * worker 0's NCCL group id travels in the rendezvous' blob. */
int trainer_meet(struct trainer *t)
{
    const struct trainer_opts *o = &t->o;
    if (o->model == MODEL_NONE || o->workers < 2 || t->ring_eps.n == 0)
        return 0;
    if (trainer_plaintext_listen(t) != NULL)
        sl_log(SL_LOG_WARN,
               "ring: listening on %s in plaintext (--insecure): anyone who reaches it can join the job "
               "and read its gradients",
               trainer_plaintext_listen(t));
    char cfg[TRAIN_RENDEZVOUS_MAX_CONFIG], root_bind[SL_CLUSTER_MAX_ADDR], restored[32] = "none";
    if (t->restoring && t->restore_step_given)
        snprintf(restored, sizeof restored, "step-%" PRIu64, t->o.restore_step);
    else if (t->restoring)
        snprintf(restored, sizeof restored, "newest");
    /* the workers restore alike (all or none; the same --restore-step), or
     * fail here with both choices in the message; which step "newest" is
     * they settle over the ring (ckpt_agree) */
    trainer_model_config_string(t, cfg, sizeof cfg);
    size_t cl = strlen(cfg);
    snprintf(cfg + cl, sizeof cfg - cl, " restore=%s", restored);
    const char *root = t->ring_eps.items[0];
    if (t->ring_bind[0] != '\0')
        sl_cluster_bind_addr(root, root_bind, sizeof root_bind);
    struct train_rendezvous_opts ro = {.rank = (int)o->worker,
                                       .size = (int)o->workers,
                                       .root = root,
                                       .bind = t->ring_bind[0] != '\0' ? root_bind : NULL,
                                       .names = (const char *const *)t->ring_eps.items,
                                       .job = o->job,
                                       .config = cfg,
                                       .timeout_ms = (int)(o->rendezvous_timeout_s * 1000),
                                       .stop = &trainer_stop_flag,
                                       .curve = t->have_curve ? &t->curve : NULL};
    struct sl_error err = {0};
    size_t blob_len = 0;
    double t0 = sl_clock_s();
    int sender = t->gpu && o->worker == 0;
    int rc = sender ? train_loop_group_id(t->group_id, &err) : 0;
    ro.blob = sender ? t->group_id : NULL;
    ro.blob_len = sender ? sizeof t->group_id : 0;
    if (rc == 0)
        rc = train_rendezvous(&ro, t->gpu ? t->group_id : NULL, t->gpu ? sizeof t->group_id : 0, &blob_len, &err);
    if (rc == 0 && t->gpu && blob_len != sizeof t->group_id)
        rc = sl_error_set(&err, SL_EPROTO, "rendezvous: worker 0 sent a %zu-byte group id (expected %zu)", blob_len,
                          sizeof t->group_id);
    if (rc != 0) {
        sl_log(SL_LOG_ERROR, "%s", err.msg);
        return 1;
    }
    t->have_group_id = t->gpu;
    sl_log(SL_LOG_INFO, "rendezvous: %u workers agree (worker %u, %.2f s; %s)", o->workers, o->worker,
           sl_clock_s() - t0, cfg);
    return 0;
}

/* ps mode, before the feeders' connections: where this worker's shard
 * stands on the servers (a process started again resumes there: the
 * servers adopt its session), its feeders' resume_seq. */
static int ps_resume(struct trainer *t, struct sl_error *err)
{
    const struct trainer_opts *o = &t->o;
    struct train_ps_resume_result r;
    t->ps_session = train_ps_draw_id();
    void *ctx = zmq_ctx_new();
    int rc = ctx == NULL ? sl_error_set(err, SL_EIO, "zmq_ctx_new: %s", zmq_strerror(zmq_errno()))
                         : train_ps_resume(ctx, (const char *const *)t->ps_eps.items, (uint32_t)t->ps_eps.n, o->worker,
                                           t->ps_session, t->replicas, (int)o->timeout_ms,
                                           t->have_curve ? &t->curve : NULL, &r, err);
    if (ctx != NULL)
        zmq_ctx_term(ctx);
    if (rc != 0) {
        sl_error_prefix(err, "worker %u: where to resume: ", o->worker);
        return rc;
    }
    t->ps_world_changes = r.world_changes;
    if (o->elastic != NULL && r.world_workers != 0 && r.world_workers != o->workers)
        return sl_error_set(err, SL_EINVAL,
                            "worker %u: the parameter servers serve a world of %u workers (change %" PRIu64
                            " from epoch %" PRIu64 "), not --workers %u: start every worker with --workers %u (a "
                            "former joiner with the rank it had)",
                            o->worker, r.world_workers, r.world_changes, r.world_epoch, o->workers, r.world_workers);
    if (o->elastic != NULL && r.world_changes > 0 && r.recorded < t->ps_eps.n) {
        /* an elastic job restored after a change, this worker without a push in
         * that world on some server: its world's epoch from the start, in this
         * world's shape (the servers that are ahead skip the steps they applied) */
        sl_log(SL_LOG_INFO,
               "worker %u restarted: starting at epoch %" PRIu64 ", where the parameter servers' world of %u "
               "workers begins (change %" PRIu64 "; %u of %zu servers recorded a step of it)",
               o->worker, r.world_epoch, o->workers, r.world_changes, r.recorded, t->ps_eps.n);
        t->resume_epoch = t->copts.resume_epoch = r.world_epoch;
        t->copts.reshape = 1; /* the feeders may still have the shape before the change */
        t->ps_resumed = 1;
        return 0;
    }
    if (r.recorded == 0)
        return 0; /* a fresh start: nothing of this worker's shard was trained */
    sl_log(SL_LOG_INFO,
           "worker %u restarted: resuming at epoch %" PRIu64 " step %" PRIu64 " (input position %" PRIu64
           ", as %u of %zu parameter servers recorded it%s)",
           o->worker, r.pos.epoch, r.pos.step, r.pos.seq, r.recorded - r.ahead, t->ps_eps.n,
           r.ahead > 0 ? "; the others are ahead: they acknowledge the steps they applied without applying them "
                         "again"
                       : "");
    t->copts.resume_seq = r.pos.seq;
    t->start_step = r.pos.step;
    t->ps_resumed = 1;
    return 0;
}

/* The ring across workers for this worker's place: t->o.worker of
 * t->o.workers, their endpoints t->ring_eps. */
int trainer_ring_open(struct trainer *t, struct sl_error *err)
{
    const struct trainer_opts *o = &t->o;
    struct train_ring_opts ro = {.rank = (int)o->worker,
                                 .size = (int)o->workers,
                                 .endpoints = (const char *const *)t->ring_eps.items,
                                 .timeout_ms = (int)o->timeout_ms,
                                 .connect_timeout_ms = (int)(o->connect_timeout_s * 1000),
                                 .bind = t->ring_bind[0] != '\0' ? t->ring_bind : NULL,
                                 .stop = &trainer_stop_flag,
                                 .curve = t->have_curve ? &t->curve : NULL};
    return train_ring_open(&t->ring, &ro, err);
}

/* The training loop for this worker's place (t->o.worker of t->o.workers,
 * over t->ring), created while t->cl keeps the feeders' connections
 * alive (the client is open: its WELCOME gives the schema). */
int trainer_loop_start(struct trainer *t, struct sl_error *err)
{
    const struct trainer_opts *o = &t->o;
    struct train_loop_opts lo = {.input = o->input,
                                 .label = o->label,
                                 .replicas = t->replicas,
                                 .worker = o->worker,
                                 .workers = o->workers,
                                 .hash_every = o->hash_every,
                                 .mode = o->mode == MODE_TOWER ? TRAIN_STRATEGY_TOWER
                                         : o->mode == MODE_PS  ? TRAIN_STRATEGY_PS
                                                               : TRAIN_STRATEGY_MIRRORED,
                                 .ps = (const char *const *)t->ps_eps.items,
                                 .nps = (uint32_t)t->ps_eps.n,
                                 .ps_placement = (enum train_ps_placement)o->ps_placement,
                                 .ps_timeout_ms = (int)o->timeout_ms,
                                 .ps_session = t->ps_session,
                                 .device = t->gpu ? "cuda" : "cpu",
                                 .ordinals = t->gpu ? o->devspec.ordinals : NULL,
                                 .dev_id = t->have_group_id ? t->group_id : NULL,
                                 .metrics = t->m,
                                 .ps_curve = t->have_curve ? &t->curve : NULL};
    /* a plain mirrored ring job on CPU replicas: a signal stops every worker
     * after the same step, agreed in the steps' control value (elastic
     * jobs' own control carries their changes; ps, tower and GPU jobs stop
     * as they always did) */
    t->stop_agree = o->elastic == NULL && o->mode == MODE_MIRRORED && !t->gpu && o->workers > 1 && t->ring != NULL;
    lo.control = (o->elastic != NULL && o->mode != MODE_PS) || t->stop_agree;
    trainer_model_config_of(o, &lo.model);
    lo.ring = t->ring;
    return trainer_loop_create_alive(&t->loop, &lo, t->cl, err);
}

/* With a model and several workers the ring across workers, then the
 * feeders' connections (their WELCOME gives the schema), the training loop
 * and --metrics. */
int trainer_start(struct trainer *t)
{
    const struct trainer_opts *o = &t->o;
    struct sl_error err = {0};
    if (o->join != NULL) /* its place, ring, state and input come at the boundary it is admitted at */
        return o->mode == MODE_PS ? trainer_ps_elastic_join(t) : trainer_elastic_join(t);
    trainer_client_opts(t, &t->feeders, o->job, o->worker, o->workers, t->curve_server_z85);
    /* the workers' ring first: its open waits for every worker, and a
     * client already connected would send its feeders no heartbeat
     * meanwhile (they would drop it after --timeout-ms) */
    if (o->model != MODEL_NONE && o->workers > 1 && o->mode != MODE_PS) {
        if (trainer_ring_open(t, &err) != 0)
            goto fail;
        if (t->restoring && trainer_ckpt_agree(t, &err) != 0)
            goto fail;
    }
    /* the restored position, once the workers agreed on the step */
    t->copts.resume_seq = t->restoring && t->resume_epoch == 0 && !t->changing ? t->ck.meta.pos.seq : 0;
    t->copts.resume_epoch = t->resume_epoch; /* the feeders say where that epoch starts for this shape */
    t->copts.reshape = o->reshape;
    t->copts.transition = t->transition; /* a mid-epoch change: in every HELLO, seqs counted from it */
    if (o->model != MODEL_NONE && o->mode == MODE_PS && ps_resume(t, &err) != 0)
        goto fail;
    if (client_open(&t->cl, &t->copts, &err) != 0)
        goto fail;
    if (t->resume_epoch != 0 && o->elastic != NULL && t->restoring) {
        /* an elastic job's global step carries on: this shape's count of
         * the steps before epoch E and an offset (its checkpoints' names) */
        t->step_base = t->start_step - client_position(t->cl) / t->replicas;
        sl_log(SL_LOG_INFO, "starting at epoch %" PRIu64 " (input position %" PRIu64 ", global step %" PRIu64 ")%s",
               t->resume_epoch, client_position(t->cl), t->start_step,
               o->reshape ? "; the feeders serve this run's cluster shape" : "");
    } else if (t->resume_epoch != 0) { /* the steps before epoch E, for this shape */
        t->start_step = client_position(t->cl) / t->replicas;
        sl_log(SL_LOG_INFO, "starting at epoch %" PRIu64 " (input position %" PRIu64 ", step %" PRIu64 ")%s",
               t->resume_epoch, client_position(t->cl), t->start_step,
               o->reshape ? "; the feeders serve this run's cluster shape" : "");
    }
    if (t->transition.from_workers != 0)
        sl_log(SL_LOG_INFO,
               "the job's shape changed at step %" PRIu64 " of epoch %" PRIu64 " from %u x %u; input position %" PRIu64
               " counted from there, step %" PRIu64 "%s",
               t->transition.from_step, t->transition.from_epoch, t->transition.from_workers,
               t->transition.from_replicas, client_position(t->cl), t->start_step,
               t->changing ? " (this run makes the change)" : "");
    if (o->trace != NULL && trainer_check_trace_feature(client_welcome(t->cl), o->feature, &err) != 0)
        goto fail; /* the schema is known from the WELCOME: fail before any step */
    if (o->model != MODEL_NONE) {
        if (trainer_loop_start(t, &err) != 0)
            goto fail;
        if (t->restoring &&
            train_loop_set_state(t->loop, t->ck.weights, t->ck.velocity, (size_t)t->ck.meta.nparams, &err) != 0) {
            sl_error_prefix(&err, "--restore: %s (made for inputs of %u values, the job's have %u): ", t->ck.path,
                            t->ck.meta.inputs, trainer_input_width(t));
            goto fail;
        }
    }
    train_ckpt_free(&t->ck); /* installed (or nothing to install: --model none) */
    if (o->metrics != NULL) {
        if (sl_output_open(&t->metrics_out, o->metrics, SL_OUTPUT_STREAM, &err) != 0) {
            sl_log(SL_LOG_ERROR, "--metrics: %s", err.msg);
            return 1;
        }
        t->mf = sl_output_stream(t->metrics_out);
    }
    return o->elastic == NULL ? 0 : o->mode == MODE_PS ? trainer_ps_elastic_open(t) : trainer_elastic_open(t);
fail:
    sl_log(SL_LOG_ERROR, "%s", err.msg);
    return 1;
}

/* --check-numerics: the step's loss and the weights (the host copy: in ps
 * mode the values pulled). 0, or 1 with the step named in the log. */
static int check_step_numerics(struct trainer *t, uint64_t epoch, uint64_t step, const struct train_step_result *res)
{
    const struct trainer_opts *o = &t->o;
    if (o->check_numerics == CHECK_OFF)
        return 0;
    long long bad = train_loop_first_non_finite(t->loop);
    double bound = 1000.0 * log((double)(o->classes > 1 ? o->classes : 2));
    const char *how = "--check-numerics off trains on anyway";
    if (res->rows > 0 && !isfinite(res->loss))
        sl_log(SL_LOG_ERROR,
               "epoch %" PRIu64 " step %" PRIu64 ": the loss is %s: the training diverged (a lower --lr "
               "may help; %s)",
               epoch, step, isnan(res->loss) ? "nan" : "inf", how);
    else if (bad >= 0)
        sl_log(SL_LOG_ERROR,
               "epoch %" PRIu64 " step %" PRIu64 ": weight %lld is not finite%s: the training diverged "
               "(a lower --lr may help; %s)",
               epoch, step, bad, o->mode == MODE_PS ? " (as pulled from the servers)" : "", how);
    else if (o->check_numerics == CHECK_ON && res->rows > 0 && res->loss > bound)
        sl_log(SL_LOG_ERROR,
               "epoch %" PRIu64 " step %" PRIu64 ": the loss is %.6g, over %.6g (1000 x ln %u classes: "
               "a uniform guess scores ln %u): the training diverged (a lower --lr may help; --check-numerics finite "
               "stops only for NaN or infinity, off never)",
               epoch, step, res->loss, bound, o->classes, o->classes);
    else
        return 0;
    t->last_loss = res->loss; /* the summary shows the loss that stopped the run (null when not finite) */
    return 1;
}

/* t->stop_agree: step `s` ran with `mine` (1: this worker wanted to stop)
 * and the workers' sum `sum` of it: with any wish in it, every worker has
 * the same sum for the same step and stops right after it (the stop
 * checkpoint of that step, exit 128 + the signal); a worker no signal
 * reached stops as SIGTERM would stop it. */
static void stop_agreed(struct trainer *t, struct progress_line *bar, const struct staged_step *s, float mine,
                        float sum)
{
    if (sum <= 0.0f) /* a sum of 0s and 1s, exact in float32 */
        return;
    int own = mine > 0.0f;
    trainer_stop_flag = own ? trainer_stop_wanted : SIGTERM;
    trainer_progress_line_clear(bar);
    sl_log(SL_LOG_INFO,
           "%s: %.0f of %u workers were signalled; every worker stops after epoch %" PRIu64 " step %" PRIu64,
           own ? "a signal stops the job" : "stopped by another worker's signal", (double)sum, t->o.workers, s->epoch,
           s->step);
}

/* Run step `prev` (its pieces staged before the next step's arrived):
 * metrics, the mirrored check at an epoch's end, progress and logs.
 * --elastic: `want` is this member's control value for the run and
 * *change whether the members' sum of it is not 0 (trainer_elastic_want);
 * change NULL otherwise. t->stop_agree: the run carries this worker's wish
 * to stop (stop_agreed). 0, or SL_EIO with the error logged. */
static int run_step(struct trainer *t, struct run_counters *c, struct progress_line *bar,
                    const struct staged_step *prev, uint64_t ran, float want, int *change)
{
    struct train_step_result res;
    struct sl_error err = {0};
    float stop_mine = t->stop_agree && trainer_stop_wanted ? 1.0f : 0.0f;
    if (change != NULL)
        train_loop_control(t->loop, want);
    else if (t->stop_agree)
        train_loop_control(t->loop, stop_mine);
    if (train_loop_run(t->loop, &res, &err) != 0) {
        trainer_progress_line_clear(bar);
        /* --elastic with a ring: the survivors may go on (elastic_survived) */
        sl_log(t->el != NULL && t->ring != NULL && !trainer_stop_flag ? SL_LOG_WARN : SL_LOG_ERROR,
               "epoch %" PRIu64 " step %" PRIu64 ": %s", prev->epoch, prev->step, err.msg);
        return SL_EIO;
    }
    if (change != NULL)
        *change = res.control != 0.0f;
    if (check_step_numerics(t, prev->epoch, prev->step, &res) != 0) {
        trainer_progress_line_clear(bar);
        return SL_EIO;
    }
    if (res.ps.pushed) {
        t->ps_steps++;
        t->ps_stale_sum += res.ps.staleness;
        if (res.ps.staleness > t->ps_stale_max)
            t->ps_stale_max = res.ps.staleness;
    }
    t->ps_pull_s += res.ps.pull_s;
    t->ps_push_s += res.ps.push_s;
    if (t->mf != NULL)
        trainer_write_metrics(t, c, prev, &res);
    if (res.rows > 0) {
        c->loss_sum += res.loss;
        c->acc_sum += res.accuracy;
        c->loss_steps++;
    }
    int last = (prev->flags & SL_WIRE_PIECE_LAST_STEP) != 0;
    if (last && train_loop_check_mirrored(t->loop, &err) != 0) {
        sl_log(SL_LOG_ERROR, "%s", err.msg);
        return SL_EIO;
    }
    if (bar->line.on) {
        struct train_counters m;
        train_metrics_read(t->m, &m);
        double el = sl_clock_s() - t->t_first;
        trainer_progress_line_draw(bar, prev->epoch, prev->step,
                                   c->loss_steps ? c->loss_sum / (double)c->loss_steps : 0,
                                   el > 0 ? (double)m.rows * t->o.workers / el : 0, el > 0 ? 100.0 * m.wait_s / el : 0);
    }
    if ((t->o.log_every && ran % t->o.log_every == 0) || (!t->o.log_every && last)) {
        trainer_progress_line_clear(bar);
        trainer_log_progress(t, c, prev);
    }
    if (t->stop_agree && change == NULL) /* after the mirrored check: it is the ring's too */
        stop_agreed(t, bar, prev, stop_mine, res.control);
    return 0;
}

/* ps mode, before step s runs: the input position after it, which its
 * push carries (the servers record it: a restart resumes there); --trace
 * flushed first, so its lines for the steps pushed outlive a kill. 0, or
 * 1 with the error logged. */
static int ps_position(struct trainer *t, const struct staged_step *s)
{
    struct client_input_position next;
    struct sl_error err = {0};
    if (t->tf != NULL)
        fflush(t->tf);
    if (client_input_position_at(&next, s->seq + t->replicas, t->replicas, s->epoch, &err) != 0 ||
        train_loop_ps_position(t->loop, &next, &err) != 0) {
        sl_log(SL_LOG_ERROR, "%s", err.msg);
        return 1;
    }
    return 0;
}

void trainer_client_opts(struct trainer *t, const struct sl_cluster_list *feeders, const char *job, uint32_t worker,
                         uint32_t workers, const char *const *curve_server)
{
    const struct trainer_opts *o = &t->o;
    t->copts = (struct client_opts){.feeders = (const char *const *)feeders->items,
                                    .nfeeders = feeders->n,
                                    .job = job,
                                    .worker = worker,
                                    .workers = workers,
                                    .replicas = t->replicas,
                                    .credits = o->credits,
                                    .heartbeat_ms = (int)o->heartbeat_ms,
                                    .timeout_ms = (int)o->timeout_ms,
                                    .connect_timeout_ms = (int)(o->connect_timeout_s * 1000),
                                    .reconnect_ms = (int)(o->reconnect_s * 1000),
                                    .no_shm = o->no_shm,
                                    .takeover_ms = (int)(o->takeover_s * 1000 + 0.5),
                                    .curve = t->have_curve ? &t->curve : NULL,
                                    .curve_server = curve_server,
                                    .stop = &trainer_stop_flag,
                                    .metrics = t->m};
}

/* --step-ms: ms of a stand-in compute with the step in hand. Whole
 * milliseconds go to client_keepalive (heartbeats out, pieces in,
 * as a real step's wait would); the fraction is slept. A signal ends it
 * early (the loop then sees trainer_stop_flag). */
static int simulated_step(struct trainer *t, double ms, struct sl_error *err)
{
    int whole = (int)ms;
    for (int left = whole; left > 0 && !trainer_stop_flag; left -= 100) { /* a signal is seen within 0.1 s */
        int rc = client_keepalive(t->cl, left < 100 ? left : 100, err);
        if (rc != 0)
            return rc;
    }
    long frac_ns = (long)((ms - whole) * 1e6);
    struct timespec left = {.tv_nsec = frac_ns};
    while (frac_ns > 0 && !trainer_stop_flag && nanosleep(&left, &left) != 0 && errno == EINTR)
        ;
    return 0;
}

/* --elastic: step s's run failed, not by a signal, with a ring: a member
 * may have died. 1 when the survivors went on as a smaller world from
 * step s (trainer_elastic_broken; *ran: the new world's global step),
 * 0 when not (the error logged). */
static int elastic_survived(struct trainer *t, const struct staged_step *s, uint64_t *ran)
{
    if (t->el == NULL || t->ring == NULL || trainer_stop_flag)
        return 0;
    uint64_t steps = *ran - 1; /* ran counted step s, which failed */
    if (trainer_elastic_broken(t, s, &steps) != 0)
        return 0;
    *ran = steps;
    return 1;
}

/* Receive every step, trace its pieces, and with a model train on it.
 * Look-ahead: step s+1 is received and staged (its copies queued on the
 * replicas' devices) before step s runs, so on a GPU the copy of s+1
 * overlaps step s; the last step runs after the stream ends. A step's
 * pieces are borrowed until the next receive: the stagers have copied
 * them by then (train_loop_put). 0, or 1 with the error logged. */
int trainer_run(struct trainer *t)
{
    const struct trainer_opts *o = &t->o;
    const struct sl_wire_welcome *w = client_welcome(t->cl);
    sl_log(SL_LOG_INFO, "worker %u of %u, %u replicas: %zu feeders, %" PRIu64 " steps per epoch, %u tensors", o->worker,
           o->workers, t->replicas, t->feeders.n, w->steps_per_epoch, w->ntensors);
    struct progress_line bar = {.steps_per_epoch = w->steps_per_epoch, .epochs = w->epochs};
    sl_status_line_init(&bar.line,
                        o->progress == PROGRESS_ON || (o->progress == PROGRESS_AUTO && o->worker == 0 && isatty(2)),
                        200000000u, 0); /* 5 redraws a second at most */
    struct run_counters c = {.step_t0 = sl_clock_s()};
    struct staged_step cur = {0}, prev = {0};
    struct sl_buf line;
    struct sl_error err = {0};
    sl_buf_init(&line, 0);
    const struct client_piece *pieces;
    uint64_t ran = t->start_step, last_epoch = UINT64_MAX; /* ran: steps trained, for --log-every */
    struct staged_step last = {0};                         /* the last step trained (traced, without a model) */
    int have_prev = 0, have_last = 0, rc;
    if (t->stop_agree) { /* the grace: the ring's own patience with a silent peer (--timeout-ms) */
        unsigned ms = o->timeout_ms > 0 ? o->timeout_ms : 10000;
        trainer_stop_agree_begin((ms + 999) / 1000);
    }
    for (;;) {
        if (t->pel != NULL && have_prev && !trainer_stop_flag && trainer_ps_elastic_after(t, &prev)) {
            /* --elastic --mode ps: every worker meets at the epoch's end, after its last push */
            int released = 0;
            if (ps_position(t, &prev) != 0 || (rc = run_step(t, &c, &bar, &prev, ++ran, 0.0f, NULL)) != 0 ||
                trainer_ps_elastic_boundary(t, &prev, ran, &released) != 0) {
                rc = SL_EIO;
                break;
            }
            last = prev;
            have_last = 1;
            have_prev = 0;
            if (released) {
                rc = SL_END;
                break;
            }
            bar.steps_per_epoch = client_welcome(t->cl)->steps_per_epoch;
            continue;
        }
        if (t->el != NULL && have_prev && !trainer_stop_flag && trainer_elastic_changes_after(t, &prev)) {
            /* --elastic: the epoch's last step runs before the next epoch's
             * first is received, for the workers may change in between; its
             * own run carries the decision for the boundary */
            int change = 0, released = 0;
            if ((rc = run_step(t, &c, &bar, &prev, ++ran, trainer_elastic_want(t, &prev), &change)) != 0) {
                if (!elastic_survived(t, &prev, &ran))
                    break;
                have_prev = 0;
                bar.steps_per_epoch = client_welcome(t->cl)->steps_per_epoch;
                continue;
            }
            last = prev;
            have_last = 1;
            have_prev = 0;
            /* the epoch's checkpoint, by this world (its ranks) before any change */
            if (trainer_maybe_checkpoint(t, prev.epoch, prev.seq, prev.flags, 0) != 0) {
                rc = SL_EIO;
                break;
            }
            if (change && trainer_elastic_boundary(t, &prev, ran, &released) != 0) {
                rc = SL_EIO;
                break;
            }
            if (released) {
                rc = SL_END;
                break;
            }
            bar.steps_per_epoch = client_welcome(t->cl)->steps_per_epoch;
            continue;
        }
        rc = trainer_stop_flag ? 0 : client_next_step(t->cl, &pieces, &err);
        if (trainer_stop_flag || (rc != 0 && rc != SL_END))
            break;
        int got = rc == 0;
        if (got) {
            if (t->t_first == 0)
                t->t_first = sl_clock_s();
            sl_metrics_add(t->m, TRAIN_M_STEPS, 1);
            trainer_elastic_poll(t, pieces[0].epoch);
            trainer_ps_elastic_poll(t, pieces[0].epoch);
            if (pieces[0].epoch != last_epoch) {
                last_epoch = pieces[0].epoch;
                sl_metrics_add(t->m, TRAIN_M_EPOCHS, 1);
            }
            for (uint32_t r = 0; t->tf != NULL && r < t->replicas; r++)
                if (trainer_trace_piece(&line, &pieces[r], o->feature, t->tf) != 0) {
                    sl_log(SL_LOG_ERROR, "cannot write the trace line to %s (I/O error or malformed string offsets)",
                           o->trace);
                    t->trace_failed = 1;
                    rc = SL_EIO;
                    break;
                }
            if (rc != 0)
                break;
            if (t->el != NULL && t->tf != NULL) /* a member that dies leaves the trace of every step it trained */
                fflush(t->tf);
            if (o->step_ms > 0 && (rc = simulated_step(t, o->step_ms, &err)) != 0) {
                trainer_progress_line_clear(&bar);
                sl_log(SL_LOG_ERROR, "%s", err.msg);
                rc = SL_EIO;
                break;
            }
            if (t->loop == NULL) {
                last = (struct staged_step){.epoch = pieces[0].epoch, .seq = pieces[0].seq, .flags = pieces[0].flags};
                have_last = 1;
                if (trainer_maybe_checkpoint(t, last.epoch, last.seq, last.flags, 0) != 0) {
                    rc = SL_EIO;
                    break;
                }
            }
            if (t->loop != NULL) {
                cur = (struct staged_step){
                    .epoch = pieces[0].epoch, .step = pieces[0].step, .seq = pieces[0].seq, .flags = pieces[0].flags};
                if (train_loop_put(t->loop, pieces, t->replicas, &err) != 0) {
                    trainer_progress_line_clear(&bar);
                    sl_log(SL_LOG_ERROR, "%s", err.msg);
                    rc = SL_EIO;
                    break;
                }
            }
        }
        if (t->loop != NULL && have_prev && o->mode == MODE_PS && ps_position(t, &prev) != 0) {
            rc = SL_EIO;
            break;
        }
        /* --elastic within an epoch: step s runs with s+1 staged, and its
         * run carries the decision for a change after s+1 (before s+2) */
        int deciding =
            t->el != NULL && have_prev && got && !(cur.flags & SL_WIRE_PIECE_LAST_STEP) && !trainer_stop_flag;
        int change = 0;
        if (t->loop != NULL && have_prev &&
            (rc = run_step(t, &c, &bar, &prev, ++ran, deciding ? trainer_elastic_want(t, &cur) : 0.0f,
                           t->el != NULL ? &change : NULL)) != 0) {
            if (!elastic_survived(t, &prev, &ran))
                break;
            have_prev = 0; /* cur, staged, is the old world's: not trained */
            bar.steps_per_epoch = client_welcome(t->cl)->steps_per_epoch;
            continue;
        }
        if (t->loop != NULL && have_prev) {
            last = prev;
            have_last = 1;
        }
        if (t->loop != NULL && have_prev && trainer_maybe_checkpoint(t, prev.epoch, prev.seq, prev.flags, 0) != 0) {
            trainer_progress_line_clear(&bar);
            rc = SL_EIO;
            break;
        }
        if (deciding && change) { /* s+1 runs, then the change */
            int released = 0;
            if ((rc = run_step(t, &c, &bar, &cur, ++ran, 0.0f, &change)) != 0) {
                if (!elastic_survived(t, &cur, &ran))
                    break;
                have_prev = 0;
                bar.steps_per_epoch = client_welcome(t->cl)->steps_per_epoch;
                continue;
            }
            last = cur;
            have_last = 1;
            have_prev = 0;
            if (trainer_maybe_checkpoint(t, cur.epoch, cur.seq, cur.flags, 0) != 0) { /* s+1's, the old world's */
                rc = SL_EIO;
                break;
            }
            if (trainer_elastic_boundary(t, &cur, ran, &released) != 0) {
                rc = SL_EIO;
                break;
            }
            if (released) {
                rc = SL_END;
                break;
            }
            bar.steps_per_epoch = client_welcome(t->cl)->steps_per_epoch;
            continue;
        }
        if (!got) {
            rc = SL_END;
            break;
        }
        prev = cur;
        have_prev = t->loop != NULL;
    }
    trainer_progress_line_clear(&bar);
    sl_buf_free(&line);
    if (t->stop_agree)
        trainer_stop_agree_end();
    if (trainer_stop_flag) {
        struct train_counters m;
        train_metrics_read(t->m, &m);
        sl_log(SL_LOG_INFO, "stopped by %s after %" PRIu64 " steps",
               trainer_stop_wanted || !t->stop_agree ? "a signal" : "another worker's signal", m.steps);
        /* preempted: the last step trained is not lost (a step cut short by
         * the signal, e.g. in its all-reduce, was not trained) */
        if (have_last && trainer_maybe_checkpoint(t, last.epoch, last.seq, last.flags, 1) != 0)
            sl_log(SL_LOG_ERROR, "the checkpoint at the stop could not be written");
        return 1;
    }
    if (rc != SL_END) {
        if (rc != SL_EIO)
            sl_log(SL_LOG_ERROR, "%s", err.msg);
        return 1;
    }
    return 0;
}

/* The end of training: --metrics committed (a failed run's metrics stay:
 * they say how far it went), then --save-weights after a good run. */
int trainer_finish_training(struct trainer *t, int status)
{
    struct sl_error err = {0};
    if (t->metrics_out != NULL) {
        int rc = sl_output_commit(t->metrics_out, &err);
        t->metrics_out = NULL;
        if (rc != 0 && status == 0) {
            sl_log(SL_LOG_ERROR, "--metrics: %s", err.msg);
            status = 1;
        }
    }
    if (status == 0 && t->loop != NULL && t->o.save_weights != NULL) {
        struct train_model *m = train_loop_model(t->loop);
        if (trainer_save_weights(t->o.save_weights, train_model_params(m), train_model_nparams(m), &err) != 0) {
            sl_log(SL_LOG_ERROR, "%s", err.msg);
            status = 1;
        }
    }
    return status;
}

/* Evaluation on a second job: every worker predicts its own pieces; the
 * counts are summed over workers (and --predictions gathered). Look-ahead
 * as in training: stage step s+1, then predict step s. ec: the evaluation
 * job's client when already open (the evaluator's, borrowed), or NULL:
 * opened and closed here. 0, or 1 with the error logged. */
int trainer_evaluate(struct trainer *t, struct client *ec)
{
    const struct trainer_opts *o = &t->o;
    struct client_opts eo = t->copts;
    eo.feeders = (const char *const *)t->eval_feeders.items;
    eo.nfeeders = t->eval_feeders.n;
    eo.curve_server = t->curve_eval_z85;
    eo.job = o->eval_job ? o->eval_job : o->job;
    eo.metrics = NULL; /* the training's figures stay the training's */
    /* the training stream's position and change are not the evaluation's:
     * it reads its job from the start */
    eo.transition = (struct client_transition){0};
    eo.resume_seq = 0;
    eo.resume_epoch = 0;
    eo.reshape = 0;
    int own = ec == NULL;
    const struct client_piece *pieces;
    struct pred_gather g = {0};
    struct sl_error err = {0};
    int rc = own ? client_open(&ec, &eo, &err) : 0;
    for (int have_prev = 0, slot = 0; rc == 0 && !trainer_stop_flag; slot ^= 1) {
        int got = (rc = client_next_step(ec, &pieces, &err)) == 0;
        if (rc != 0 && rc != SL_END)
            break;
        if (got && o->predictions != NULL &&
            (rc = trainer_gather_keep(&g, slot, pieces, t->replicas, o->feature, o->label, &err)) != 0)
            break;
        if (got && (rc = train_loop_put(t->loop, pieces, t->replicas, &err)) != 0)
            break;
        if (have_prev && (rc = train_loop_eval_run(t->loop, &t->test_rows, &t->test_correct, &err)) != 0)
            break;
        if (have_prev && o->predictions != NULL &&
            (rc = trainer_gather_add(&g, slot ^ 1, t->loop, t->replicas, &err)) != 0)
            break;
        if (!got) {
            rc = SL_END;
            break;
        }
        have_prev = 1;
    }
    if (rc == SL_END) {
        float counts[2] = {(float)t->test_rows, (float)t->test_correct};
        rc = train_loop_sum(t->loop, counts, 2, &err);
        t->test_rows = counts[0];
        t->test_correct = counts[1];
    }
    if (rc == 0 && o->predictions != NULL && !trainer_stop_flag) /* rc is the counts' sum's */
        rc = trainer_gather_write(&g, t->loop, o->worker, t->test_rows, t->test_correct, o->predictions, &err);
    trainer_gather_free(&g);
    if (own)
        client_close(ec);
    if (rc != 0) {
        sl_log(SL_LOG_ERROR, "evaluation: %s", err.msg);
        return 1;
    }
    sl_log(SL_LOG_INFO, "test accuracy %.4f over %.0f elements (%s)",
           t->test_rows > 0 ? t->test_correct / t->test_rows : 0, t->test_rows,
           t->is_evaluator      ? "the whole test set: the evaluator, with the final weights"
           : o->mode == MODE_PS ? "this worker's share; every worker holds the same final weights"
                                : "all workers");
    return 0;
}

/* --mode ps after the last step: the final pull (waiting for every
 * worker: they all end with the same weights) releases the servers. */
int trainer_ps_finish(struct trainer *t)
{
    struct sl_error err = {0};
    if (train_loop_ps_finish(t->loop, &trainer_stop_flag, &t->ps_global_step, &err) != 0) {
        sl_log(SL_LOG_ERROR, "%s", err.msg);
        return 1;
    }
    uint32_t first = 0;
    t->ps_lost = train_loop_ps_lost(t->loop, &first);
    if (t->ps_lost > 0) {
        sl_log(SL_LOG_ERROR,
               "the job did not finish: %u of %u workers were lost or failed (worker %u first; the "
               "servers' logs say which and why): their shards were not trained to the end (global step %" PRIu64 ")",
               t->ps_lost, t->o.workers, first, t->ps_global_step);
        return 1;
    }
    long long bad = t->o.check_numerics != CHECK_OFF ? train_loop_first_non_finite(t->loop) : -1;
    if (bad >= 0) {
        sl_log(SL_LOG_ERROR,
               "the final pull (global step %" PRIu64 "): weight %lld is not finite: the training "
               "diverged (--check-numerics off trains on anyway)",
               t->ps_global_step, bad);
        return 1;
    }
    sl_log(SL_LOG_INFO,
           "parameter servers: every worker is done; global step %" PRIu64 " (this worker's %" PRIu64
           " steps, staleness mean %.2f max %" PRIu64 ")",
           t->ps_global_step, t->ps_steps, t->ps_steps ? (double)t->ps_stale_sum / (double)t->ps_steps : 0.0,
           t->ps_stale_max);
    return 0;
}
