/* train_strategy_core: the strategy (train_strategy.h) but for its
 * distributed values (train_strategy_values.c): its replicas, their steps
 * and collectives, ps mode, create and destroy.
 *
 * Replica 0 is the caller's thread; replicas 1..R-1 wait on `job_cv` for
 * the next job (put or run), do it and count themselves in `done`. A job's
 * fields are written under `mu` before `job_gen` moves and read under `mu`
 * after, which is the happens-before every replica's view of the run's
 * arguments relies on; `done` under `mu` gives the caller its view of what
 * the replicas wrote (copies, counters, errors).
 *
 * Collectives inside a step go through each replica's member of the
 * composed collective (train_coll.h): the local group's sum (replica order,
 * the last arrival reduces), replica 0's sum across workers (the `across`
 * collective: the ring, whose sockets are the caller's thread's), and the
 * local group's broadcast of replica 0's result. Cross-replica calls
 * (check, reduce, sum_across_workers) use `across` alone, from the
 * caller's thread. Device buffers (GPU replicas) are summed by each
 * replica's member of its device kind's collective ("nccl"), joined at
 * create from every replica thread at once and left the same way at
 * destroy. Our own barrier (tower mode, the shapes of a reduce) is
 * abortable too: a failing replica aborts the barrier and every replica's
 * collectives together, so no replica is left waiting whichever one it is
 * blocked in.
 *
 * Lock order: `mu`, then a collective's own lock (only abort is called
 * with `mu` held: a replica's device member is published under `mu`);
 * collectives never take `mu`.
 */
#include "train_strategy.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "sl_alloc.h"
#include "sl_clock.h"
#include "sl_thread.h"
#include "train_metrics.h"
#include "train_strategy_int.h"

/* An input position (client_position.h) names at most as many replicas as
 * the devices can hold. */
_Static_assert(CLIENT_INPUT_POSITION_MAX_REPLICAS == TRAIN_DEVICE_MAX_REPLICAS, "one replica bound");

/* Fail the run for everybody: the first error wins. */
static void strategy_abort(struct train_strategy *s, int code, const char *msg)
{
    pthread_mutex_lock(&s->mu);
    if (!s->aborted) {
        /* atomic: train_strategy_aborted reads it without the lock */
        __atomic_store_n(&s->aborted, code < 0 ? code : SL_EINVAL, __ATOMIC_RELEASE);
        snprintf(s->abort_msg, sizeof s->abort_msg, "%s", msg);
    }
    pthread_cond_broadcast(&s->bar_cv);
    for (uint32_t r = 0; r < s->R; r++) {
        train_coll_abort(s->reps[r].coll, code, msg);
        train_coll_abort(s->reps[r].dcoll, code, msg);
    }
    pthread_mutex_unlock(&s->mu);
}

static int replica_fail(struct train_replica *rep, int rc, struct sl_error *err)
{
    strategy_abort(rep->s, rc, err != NULL ? err->msg : "error");
    return rc;
}

/* Every local replica arrives before any leaves; an abort wakes them all
 * with its error. */
static int barrier(struct train_strategy *s, struct sl_error *err)
{
    pthread_mutex_lock(&s->mu);
    uint64_t gen = s->bar_gen;
    if (!s->aborted && ++s->bar_count == s->R) {
        s->bar_count = 0;
        s->bar_gen++;
        pthread_cond_broadcast(&s->bar_cv);
    }
    while (s->bar_gen == gen && !s->aborted)
        pthread_cond_wait(&s->bar_cv, &s->mu);
    int rc = s->bar_gen == gen ? s->aborted : 0;
    if (rc != 0)
        sl_error_set(err, rc, "%s", s->abort_msg);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* The sum over every replica of every worker, the same bits everywhere. */
static int sum_all(struct train_replica *rep, float *buf, size_t n, struct sl_error *err)
{
    uint64_t t0 = rep->id == 0 && rep->s->metrics != NULL ? sl_clock_ns() : 0;
    int rc = train_coll_all_reduce(rep->coll, buf, n, err);
    if (t0 != 0) /* replica 0's view: waiting for the others included */
        sl_metrics_add(rep->s->metrics, TRAIN_M_ALLREDUCE_NS, sl_clock_ns() - t0);
    return rc != 0 ? replica_fail(rep, rc, err) : 0;
}

int train_replica_all_reduce_device(struct train_replica *rep, float *buf, size_t n, struct sl_error *err)
{
    struct train_coll *c = rep->s->backend->coll == NULL ? rep->coll : rep->dcoll;
    if (c == NULL)
        return replica_fail(rep,
                            sl_error_set(err, SL_EINVAL,
                                         "all_reduce_device: the strategy's '%s' devices have "
                                         "no group (device_group)",
                                         rep->s->backend->kind),
                            err);
    uint64_t t0 = rep->id == 0 && rep->s->metrics != NULL ? sl_clock_ns() : 0;
    int rc = train_coll_all_reduce(c, buf, n, err);
    if (t0 != 0)
        sl_metrics_add(rep->s->metrics, TRAIN_M_ALLREDUCE_NS, sl_clock_ns() - t0);
    return rc != 0 ? replica_fail(rep, rc, err) : 0;
}

int train_replica_all_reduce(struct train_replica *rep, enum train_reduce_op op, float *buf, size_t n,
                             struct sl_error *err)
{
    if (op != TRAIN_SUM && op != TRAIN_MEAN)
        return replica_fail(rep, sl_error_set(err, SL_EINVAL, "all_reduce: unknown reduce op %d", (int)op), err);
    int rc = sum_all(rep, buf, n, err);
    if (rc != 0 || op == TRAIN_SUM)
        return rc;
    float div = (float)(rep->s->R * rep->s->W);
    for (size_t j = 0; j < n; j++)
        buf[j] /= div;
    return 0;
}

int train_replica_reduce(struct train_replica *rep, enum train_reduce_op op, const struct train_value *value, int axis,
                         struct train_value *out, struct sl_error *err)
{
    struct train_strategy *s = rep->s;
    if (op != TRAIN_SUM && op != TRAIN_MEAN)
        return replica_fail(rep, sl_error_set(err, SL_EINVAL, "reduce: unknown reduce op %d", (int)op), err);
    /* every replica validates every replica's shape with train_reduce_shape,
     * so all agree on the result or all fail with the same message */
    /* shapes[id] is rewritten by the next call only after this call's
     * all-reduce, which every replica enters after reading it */
    s->shapes[rep->id] = *value;
    s->shapes[rep->id].data = NULL;
    int rc = barrier(s, err);
    if (rc != 0)
        return rc;
    struct train_value res;
    if ((rc = train_reduce_shape(s->shapes, s->R, axis, &res, err)) != 0)
        return replica_fail(rep, rc, err);
    size_t m;
    if ((rc = train_value_count(&res, &m, err)) != 0)
        return replica_fail(rep, rc, err);
    if (axis == TRAIN_AXIS_NONE) {
        if (m > 0 && out->data != value->data)
            memcpy(out->data, value->data, m * sizeof(float));
        rc = train_replica_all_reduce(rep, op, out->data, m, err);
    } else {
        if (m > s->scratch_floats)
            return replica_fail(rep,
                                sl_error_set(err, SL_EINVAL,
                                             "reduce over axis 0: %zu values exceed the "
                                             "scratch of %zu floats",
                                             m, s->scratch_floats),
                                err);
        /* this replica's rows summed by train_reduce itself, then the row
         * count rides along in the same all-reduce */
        struct train_value part = {.data = rep->scratch};
        if ((rc = train_reduce(TRAIN_SUM, value, 1, 0, &part, err)) != 0)
            return replica_fail(rep, rc, err);
        rep->scratch[m] = (float)value->dims[0];
        if ((rc = sum_all(rep, rep->scratch, m + 1, err)) != 0)
            return rc;
        float rows = rep->scratch[m];
        if (op == TRAIN_MEAN && rows == 0) /* the same on every replica: all fail alike */
            return replica_fail(rep,
                                sl_error_set(err, SL_EINVAL,
                                             "reduce MEAN over axis 0: every replica is empty "
                                             "(0 rows in all): the mean is undefined"),
                                err);
        for (size_t j = 0; j < m; j++)
            out->data[j] = op == TRAIN_MEAN ? rep->scratch[j] / rows : rep->scratch[j];
    }
    if (rc == 0) {
        out->rank = res.rank;
        memcpy(out->dims, res.dims, sizeof out->dims);
    }
    return rc;
}

int train_replica_id(const struct train_replica *rep)
{
    return rep->id;
}

int train_replica_global_id(const struct train_replica *rep)
{
    return (int)(rep->s->worker * rep->s->R) + rep->id;
}

uint32_t train_replica_num_replicas_in_sync(const struct train_replica *rep)
{
    return rep->s->R * rep->s->W;
}

struct train_device *train_replica_device(const struct train_replica *rep)
{
    return rep->dev;
}

float train_replica_loss_scale(const struct train_replica *rep)
{
    return rep->s->loss_scale;
}

float *train_replica_var(struct train_replica *rep, struct train_variable *var)
{
    return train_variable_copy(var, rep->id);
}

static void apply_mode(float *copy, const float *u, size_t n, enum train_mirror_mode mode)
{
    for (size_t j = 0; j < n; j++)
        copy[j] = mode == TRAIN_ASSIGN ? u[j] : mode == TRAIN_ASSIGN_ADD ? copy[j] + u[j] : copy[j] - u[j];
}

int train_replica_var_update(struct train_replica *rep, struct train_variable *var, enum train_mirror_mode mode,
                             const float *update, struct sl_error *err)
{
    struct train_strategy *s = rep->s;
    size_t n = train_mirror_size(var->m);
    int rc;
    if (var->agg == TRAIN_AGG_NONE) /* TensorFlow's error text, from train_mirror (NONE is refused first) */
        return replica_fail(rep, train_mirror_update(var->m, NULL, mode, err), err);
    if (mode != TRAIN_ASSIGN && mode != TRAIN_ASSIGN_ADD && mode != TRAIN_ASSIGN_SUB)
        return replica_fail(rep,
                            sl_error_set(err, SL_EINVAL, "mirrored variable '%s': unknown update mode %d",
                                         train_mirror_name(var->m), (int)mode),
                            err);
    if (n > s->scratch_floats)
        return replica_fail(rep,
                            sl_error_set(err, SL_EINVAL,
                                         "mirrored variable '%s': %zu values exceed the "
                                         "scratch of %zu floats",
                                         train_mirror_name(var->m), n, s->scratch_floats),
                            err);
    float *u = rep->scratch;
    if (n > 0)
        memcpy(u, update, n * sizeof *u);
    if (var->agg == TRAIN_AGG_ONLY_FIRST_REPLICA) {
        /* worker 0's replica 0's value, to everyone */
        if ((rc = train_coll_broadcast(rep->coll, u, n, 0, err)) != 0)
            return replica_fail(rep, rc, err);
    } else {
        if ((rc = train_replica_all_reduce(rep, var->agg == TRAIN_AGG_MEAN ? TRAIN_MEAN : TRAIN_SUM, u, n, err)) != 0)
            return rc;
    }
    if (s->mode == TRAIN_STRATEGY_MIRRORED) {
        apply_mode(train_mirror_copy(var->m, rep->id), u, n, mode);
        return 0;
    }
    /* tower: every tower has arrived (the reduction above waited for all),
     * so nobody reads the one copy while the last tower writes it */
    if (s->R == 1 || (rc = barrier(s, err)) == 0) {
        if (rep->id == (int)s->R - 1)
            apply_mode(train_mirror_copy(var->m, 0), u, n, mode);
        rc = s->R == 1 ? 0 : barrier(s, err);
    }
    return rc;
}

int train_replica_var_apply(struct train_replica *rep, struct train_variable *var, train_var_apply_fn fn, void *arg,
                            struct sl_error *err)
{
    struct train_strategy *s = rep->s;
    size_t n = train_mirror_size(var->m);
    int rc = 0;
    if (s->mode == TRAIN_STRATEGY_MIRRORED) {
        if ((rc = fn(train_mirror_copy(var->m, rep->id), n, arg, err)) != 0)
            return replica_fail(rep, rc, err);
        return 0;
    }
    if (s->R > 1 && (rc = barrier(s, err)) != 0)
        return rc;
    if (rep->id == (int)s->R - 1 && (rc = fn(train_mirror_copy(var->m, 0), n, arg, err)) != 0)
        return replica_fail(rep, rc, err);
    return s->R > 1 ? barrier(s, err) : 0;
}

int train_replica_var_apply_gradient(struct train_replica *rep, struct train_variable *var, const float *grad,
                                     train_var_apply_fn fn, void *arg, struct sl_error *err)
{
    struct train_strategy *s = rep->s;
    if (s->mode != TRAIN_STRATEGY_PS)
        return train_replica_var_apply(rep, var, fn, arg, err);
    if (var != s->ps_var || s->ps_done)
        return replica_fail(rep,
                            sl_error_set(err, SL_EINVAL, "apply_gradient: %s",
                                         s->ps_done ? "the training has finished (train_strategy_ps_finish)"
                                                    : "not the parameter servers' variable"),
                            err);
    if (rep->id != 0)
        return 0;
    uint64_t t0 = sl_clock_ns();
    int rc = train_ps_push(s->ps, grad, 1, &s->ps_last.staleness, err);
    if (rc != 0)
        return replica_fail(rep, rc, err);
    s->ps_last.push_s = (double)(sl_clock_ns() - t0) / 1e9;
    s->ps_last.pushed = 1;
    return 0;
}

int train_replica_var_skip_step(struct train_replica *rep, struct train_variable *var, struct sl_error *err)
{
    struct train_strategy *s = rep->s;
    if (s->mode != TRAIN_STRATEGY_PS || rep->id != 0)
        return 0;
    if (var != s->ps_var || s->ps_done)
        return replica_fail(rep,
                            sl_error_set(err, SL_EINVAL, "skip_step: %s",
                                         s->ps_done ? "the training has finished (train_strategy_ps_finish)"
                                                    : "not the parameter servers' variable"),
                            err);
    uint64_t t0 = sl_clock_ns();
    int rc = train_ps_push(s->ps, NULL, 0, NULL, err);
    if (rc != 0)
        return replica_fail(rep, rc, err);
    s->ps_last.push_s = (double)(sl_clock_ns() - t0) / 1e9;
    return 0;
}

/* One replica's share of a job. */
static void do_job(struct train_replica *rep, enum job job, const struct client_piece *pieces, train_step_fn fn,
                   void *ctx)
{
    struct train_strategy *s = rep->s;
    rep->rc = 0;
    if (job == JOB_PUT) {
        uint64_t t0 = sl_clock_ns();
        const struct client_piece *p = &pieces[rep->id];
        rep->rc = train_stage_put(rep->stage, p, &rep->err);
        sl_metrics_add(s->metrics, TRAIN_M_H2D_NS, sl_clock_ns() - t0);
        if (rep->rc != 0) {
            sl_error_prefix(&rep->err, "replica %d: ", rep->id);
            return;
        }
        uint64_t bytes = 0;
        for (size_t i = 0; i < p->ntensors; i++)
            bytes += p->t[i].bytes;
        sl_metrics_add(s->metrics, TRAIN_M_H2D_BYTES, bytes);
        return;
    }
    int rc = 0;
    if (job != JOB_EACH) {
        uint64_t t0 = sl_clock_ns();
        rc = train_stage_get(rep->stage, &rep->view, &rep->err);
        sl_metrics_add(s->metrics, TRAIN_M_H2D_NS, sl_clock_ns() - t0);
    }
    if (rc == 0)
        rc = fn(rep, job == JOB_EACH ? NULL : &rep->view, ctx, &rep->err);
    if (rc != 0) {
        pthread_mutex_lock(&s->mu);
        int first = !s->aborted;
        pthread_mutex_unlock(&s->mu);
        if (first && job == JOB_EACH)
            sl_error_prefix(&rep->err, "replica %d: ", rep->id);
        else if (first)
            sl_error_prefix(&rep->err, "replica %d step %" PRIu64 ": ", rep->id, rep->view.step);
        strategy_abort(s, rc, rep->err.msg);
    }
    rep->rc = rc;
}

static void *replica_main(void *arg)
{
    struct train_replica *rep = arg;
    struct train_strategy *s = rep->s;
    uint64_t seen = 0;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (s->job_gen == seen && !s->stop)
            pthread_cond_wait(&s->job_cv, &s->mu);
        if (s->stop)
            break;
        seen = s->job_gen;
        enum job job = s->job;
        const struct client_piece *pieces = s->pieces;
        train_step_fn fn = s->fn;
        void *ctx = s->ctx;
        pthread_mutex_unlock(&s->mu);
        do_job(rep, job, pieces, fn, ctx);
        pthread_mutex_lock(&s->mu);
        if (++s->done == s->R - 1)
            pthread_cond_signal(&s->done_cv);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Run a job on every replica (0 on this thread) and wait for all; the
 * first error (the abort's, else the lowest replica's) into err. */
static int dispatch(struct train_strategy *s, enum job job, const struct client_piece *pieces, train_step_fn fn,
                    void *ctx, struct sl_error *err)
{
    pthread_mutex_lock(&s->mu);
    s->job = job;
    s->pieces = pieces;
    s->fn = fn;
    s->ctx = ctx;
    s->done = 0;
    s->job_gen++;
    pthread_cond_broadcast(&s->job_cv);
    pthread_mutex_unlock(&s->mu);
    do_job(&s->reps[0], job, pieces, fn, ctx);
    pthread_mutex_lock(&s->mu);
    while (s->done < s->R - 1)
        pthread_cond_wait(&s->done_cv, &s->mu);
    int rc = s->aborted;
    if (rc != 0)
        sl_error_set(err, rc, "%s", s->abort_msg);
    pthread_mutex_unlock(&s->mu);
    for (uint32_t r = 0; rc == 0 && r < s->R; r++)
        if (s->reps[r].rc != 0) {
            rc = s->reps[r].rc;
            *err = s->reps[r].err;
        }
    if (rc != 0) {
        s->broken = rc;
        snprintf(s->broken_msg, sizeof s->broken_msg, "%s", err->msg);
    }
    return rc;
}

/* On each replica's thread, all at once: join the device collective (it
 * blocks until every replica of every worker has come). */
static int join_device_group(struct train_replica *rep, const struct train_staged *p, void *ctx, struct sl_error *err)
{
    (void)p;
    (void)ctx;
    struct train_strategy *s = rep->s;
    struct train_coll *c;
    /* ps mode: each worker's replicas are a group of their own (s->W is 1) */
    int rank = s->mode == TRAIN_STRATEGY_PS ? rep->id : train_replica_global_id(rep);
    int rc = s->backend->coll->open(&c, rep->dev, rank, (int)(s->R * s->W), s->group_id, err);
    if (rc == 0) {
        pthread_mutex_lock(&s->mu);
        rep->dcoll = c;
        pthread_mutex_unlock(&s->mu);
    }
    return rc;
}

/* On each replica's thread, all at once: leave it (a plain leave waits for
 * the other members of this host). */
static int leave_device_group(struct train_replica *rep, const struct train_staged *p, void *ctx, struct sl_error *err)
{
    (void)p;
    (void)ctx;
    (void)err;
    struct train_strategy *s = rep->s;
    pthread_mutex_lock(&s->mu);
    struct train_coll *c = rep->dcoll;
    rep->dcoll = NULL;
    pthread_mutex_unlock(&s->mu);
    train_coll_destroy(c);
    return 0;
}

static int refuse_broken(const struct train_strategy *s, struct sl_error *err)
{
    return sl_error_set(err, s->broken, "strategy failed earlier: %s", s->broken_msg);
}

int train_strategy_put(struct train_strategy *s, const struct client_piece *pieces, struct sl_error *err)
{
    if (s->broken)
        return refuse_broken(s, err);
    if (s->staged == TRAIN_STAGE_SLOTS)
        return sl_error_set(err, SL_EINVAL, "put: %u steps are staged already (run one first)", s->staged);
    if (s->mode == TRAIN_STRATEGY_TOWER && s->R > 1) {
        /* replicate_model_fn splits the step's batch along dim 0 into equal
         * shards, whatever split the pieces arrived in (a partial last batch
         * of the stream split comes as 96 and 0 rows: 48 and 48) */
        int rc = train_tower_resplit(pieces, s->R, s->tower_pieces, s->tower_buf, s->tower_buf_bytes, err);
        if (rc != 0) {
            sl_error_prefix(err, "tower mode: step %" PRIu64 ": ", pieces[0].step);
            return rc;
        }
        pieces = s->tower_pieces;
    }
    int rc = dispatch(s, JOB_PUT, pieces, NULL, NULL, err);
    if (rc == 0)
        s->staged++;
    return rc;
}

/* ps mode: the servers' values into every copy (no replica runs). */
static void ps_spread(struct train_strategy *s)
{
    struct train_mirror *m = s->ps_var->m;
    for (uint32_t r = 1; r < s->R; r++)
        memcpy(train_mirror_copy(m, (int)r), train_mirror_copy(m, 0), train_mirror_size(m) * sizeof(float));
}

static int ps_pull(struct train_strategy *s, struct sl_error *err)
{
    memset(&s->ps_last, 0, sizeof s->ps_last);
    uint64_t t0 = sl_clock_ns();
    int rc = train_ps_pull(s->ps, train_mirror_copy(s->ps_var->m, 0), &s->ps_last.global_step, err);
    if (rc != 0)
        return rc;
    ps_spread(s);
    s->ps_last.pull_s = (double)(sl_clock_ns() - t0) / 1e9;
    return 0;
}

void train_strategy_ps_last(const struct train_strategy *s, struct train_ps_step *out)
{
    *out = s->ps_last;
}

int train_strategy_ps_finish(struct train_strategy *s, volatile sig_atomic_t *stop, uint64_t *global_step,
                             struct sl_error *err)
{
    if (s->ps_var == NULL)
        return sl_error_set(err, SL_EINVAL, "ps_finish: not in parameter-server mode with a variable");
    if (s->broken)
        return refuse_broken(s, err);
    int rc = train_ps_pull_final(s->ps, train_mirror_copy(s->ps_var->m, 0), global_step, stop, err);
    if (rc != 0)
        return rc;
    ps_spread(s);
    s->ps_done = 1;
    return 0;
}

int train_strategy_run(struct train_strategy *s, train_step_fn fn, void *ctx, struct sl_error *err)
{
    if (s->broken)
        return refuse_broken(s, err);
    if (s->staged == 0)
        return sl_error_set(err, SL_EINVAL, "run: no step is staged (put one first)");
    int rc = s->ps_var != NULL && !s->ps_done ? ps_pull(s, err) : 0;
    if (rc != 0) {
        s->staged--;
        s->broken = rc;
        snprintf(s->broken_msg, sizeof s->broken_msg, "%s", err->msg);
        return rc;
    }
    rc = dispatch(s, JOB_RUN, NULL, fn, ctx, err);
    s->staged--;
    if (rc != 0)
        return rc;
    s->steps++;
    if (s->hash_every && s->steps % s->hash_every == 0 && (rc = train_strategy_check(s, err)) != 0) {
        sl_error_prefix(err, "after step %" PRIu64 ": ", s->steps);
        s->broken = rc;
        snprintf(s->broken_msg, sizeof s->broken_msg, "%s", err->msg);
    }
    return rc;
}

int train_strategy_call_for_each_replica(struct train_strategy *s, train_step_fn fn, void *ctx, struct sl_error *err)
{
    if (s->broken)
        return refuse_broken(s, err);
    return dispatch(s, JOB_EACH, NULL, fn, ctx, err);
}

uint64_t train_strategy_steps(const struct train_strategy *s)
{
    return s->steps;
}

int train_strategy_aborted(const struct train_strategy *s)
{
    return __atomic_load_n(&s->aborted, __ATOMIC_ACQUIRE);
}

uint32_t train_strategy_replicas(const struct train_strategy *s)
{
    return s->R;
}

uint32_t train_strategy_num_replicas_in_sync(const struct train_strategy *s)
{
    return s->R * s->W;
}

enum train_strategy_mode train_strategy_mode(const struct train_strategy *s)
{
    return s->mode;
}

/* The options' consistency for R replicas and *W workers (ps mode: *W
 * becomes 1, each worker its own group): 0, or SL_EINVAL saying what does
 * not fit. */
static int check_opts(const struct train_strategy_opts *o, uint32_t R, uint32_t *W, struct sl_error *err)
{
    if (R > 1024)
        return sl_error_set(err, SL_EINVAL, "strategy: %u replicas (at most 1024)", R);
    int across = o->ring != NULL || o->across != NULL;
    if (o->mode == TRAIN_STRATEGY_PS) {
        /* each worker is its own synchronous group: no collective across
         * workers; W only bounds this worker's rank */
        if (o->ps == NULL || across || o->worker >= *W)
            return sl_error_set(err, SL_EINVAL,
                                "strategy: parameter-server mode needs the servers' client and no "
                                "ring (worker %u of %u)",
                                o->worker, *W);
        *W = 1;
    } else if (o->ps != NULL)
        return sl_error_set(err, SL_EINVAL, "strategy: parameter servers outside parameter-server mode");
    if (o->ring != NULL && o->across != NULL)
        return sl_error_set(err, SL_EINVAL, "strategy: a ring and a collective across workers (give one)");
    if (o->mode != TRAIN_STRATEGY_PS && (across != (*W > 1) || o->worker >= *W))
        return sl_error_set(err, SL_EINVAL, "strategy: worker %u of %u %s a ring", o->worker, *W,
                            across ? "with" : "without");
    if (o->across != NULL &&
        (o->across->rank != (int)o->worker || o->across->size != (int)*W || o->across->mem != TRAIN_COLL_HOST))
        return sl_error_set(err, SL_EINVAL,
                            "strategy: worker %u of %u with a '%s' collective across workers of "
                            "member %d of %d",
                            o->worker, *W, o->across->ops->name, o->across->rank, o->across->size);
    if (o->mode != TRAIN_STRATEGY_MIRRORED && o->mode != TRAIN_STRATEGY_TOWER && o->mode != TRAIN_STRATEGY_PS)
        return sl_error_set(err, SL_EINVAL, "strategy: unknown mode %d", (int)o->mode);
    if (o->mode == TRAIN_STRATEGY_TOWER && across)
        return sl_error_set(err, SL_EINVAL, "strategy: tower mode (replicate_model_fn) runs on one worker");
    return 0;
}

int train_strategy_create(struct train_strategy **out, const struct train_strategy_opts *o, struct sl_error *err)
{
    *out = NULL;
    uint32_t R = o->replicas ? o->replicas : 1, W = o->workers ? o->workers : 1;
    int rc = check_opts(o, R, &W, err);
    if (rc != 0)
        return rc;
    float scale = 1.0f;
    if (o->mode == TRAIN_STRATEGY_TOWER && (rc = train_tower_loss_scale(o->loss_reduction, (int)R, &scale, err)) != 0)
        return rc;
    const char *kind = o->device ? o->device : "cpu";
    const struct train_backend *backend;
    struct sl_error why = {0};
    if (train_backend_load(kind, &backend, &why) != 0)
        return sl_error_set(err, SL_EINVAL, "strategy: no '%s' device backend: %s", kind, why.msg);
    const struct train_device_ops *ops = backend->device;
    struct train_strategy *s = sl_calloc(1, sizeof *s);
    if (s == NULL)
        return sl_error_set(err, SL_ENOMEM, "strategy: out of memory");
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->job_cv, NULL);
    pthread_cond_init(&s->done_cv, NULL);
    pthread_cond_init(&s->bar_cv, NULL);
    s->R = R;
    s->W = W;
    s->worker = o->worker;
    s->mode = o->mode;
    s->across = o->across;
    s->ps = o->ps;
    s->hash_every = o->hash_every;
    s->metrics = o->metrics;
    s->loss_scale = scale;
    s->scratch_floats = o->scratch_floats ? o->scratch_floats : TRAIN_STRATEGY_DEFAULT_SCRATCH;
    s->ops = ops;
    s->backend = backend;
    if ((s->reps = sl_calloc(R, sizeof *s->reps)) == NULL || (s->shapes = sl_calloc(R, sizeof *s->shapes)) == NULL)
        rc = sl_error_set(err, SL_ENOMEM, "strategy: out of memory");
    if (rc == 0 && R > 1)
        rc = train_local_group_create(&s->group, (int)R, err);
    if (rc == 0 && R > 1 && o->mode == TRAIN_STRATEGY_TOWER) {
        size_t sum = 0;
        for (size_t i = 0; rc == 0 && i < o->ntensors && o->tensor_capacity != NULL; i++) {
            if (o->tensor_capacity[i] > SIZE_MAX / R - sum)
                rc = sl_error_set(err, SL_EINVAL, "strategy: tensor capacities of %u towers overflow", R);
            else
                sum += o->tensor_capacity[i];
        }
        /* each tensor's rows start aligned in it */
        if (rc == 0 && o->ntensors > (SIZE_MAX - sum * R) / TRAIN_TOWER_ALIGN)
            rc = sl_error_set(err, SL_EINVAL, "strategy: tensor capacities of %u towers overflow", R);
        s->tower_buf_bytes = rc == 0 ? sum * R + o->ntensors * TRAIN_TOWER_ALIGN : 0;
        if (rc == 0 && ((s->tower_pieces = sl_calloc(R, sizeof *s->tower_pieces)) == NULL ||
                        (s->tower_buf_bytes > 0 && (s->tower_buf = sl_malloc(s->tower_buf_bytes)) == NULL)))
            rc = sl_error_set(err, SL_ENOMEM, "strategy: out of memory for the towers' split");
    }
    if (rc == 0 && o->ring != NULL) {
        rc = train_ring_coll_open(&s->across, o->ring, err);
        s->own_across = rc == 0;
    }
    for (uint32_t r = 0; rc == 0 && r < R; r++) {
        struct train_replica *rep = &s->reps[r];
        rep->s = s;
        rep->id = (int)r;
        if ((rep->scratch = sl_malloc((s->scratch_floats + 1) * sizeof(float))) == NULL)
            rc = sl_error_set(err, SL_ENOMEM, "strategy: out of memory for replica %u's scratch", r);
        if (rc == 0 && R > 1)
            rc = train_local_coll_open(&rep->local, s->group, (int)r, err);
        if (rc == 0)
            rc = train_coll_compose(&rep->coll, rep->local, r == 0 ? s->across : NULL, (int)r, (int)R,
                                    s->mode == TRAIN_STRATEGY_PS ? 0 : (int)s->worker, (int)W, err);
        if (rc == 0)
            rc = ops->open(&rep->dev, o->ordinals != NULL ? o->ordinals[r] : (int)r, err);
        if (rc == 0)
            rc = train_stage_create(&rep->stage, ops, rep->dev, o->tensor_capacity, o->ntensors, err);
        if (rc != 0)
            sl_error_prefix(err, "strategy: replica %u: ", r);
    }
    for (uint32_t r = 1; rc == 0 && r < R; r++) {
        if (sl_thread_start(&s->reps[r].thread, replica_main, &s->reps[r]) != 0)
            rc = sl_error_set(err, SL_EIO, "strategy: cannot start the thread of replica %u", r);
        else
            s->reps[r].started = 1;
    }
    if (rc == 0 && o->device_group != NULL && backend->coll != NULL) {
        /* first, so that nothing local can fail while the other members wait */
        memcpy(s->group_id, o->device_group, sizeof s->group_id);
        if ((rc = dispatch(s, JOB_EACH, NULL, join_device_group, NULL, err)) != 0)
            sl_error_prefix(err, "strategy: joining the '%s' group: ", backend->coll->name);
    }
    if (rc != 0) {
        train_strategy_destroy(s);
        return rc;
    }
    *out = s;
    return 0;
}

void train_strategy_destroy(struct train_strategy *s)
{
    if (s == NULL)
        return;
    int joined = 0;
    for (uint32_t r = 0; s->reps != NULL && r < s->R; r++)
        joined |= s->reps[r].dcoll != NULL;
    /* device members leave together, each on its own thread; after a failure
     * they were aborted and leave from here without waiting for anyone */
    int started = s->R == 1 || (s->reps != NULL && s->reps[s->R - 1].started);
    if (joined && started && !s->broken && !s->aborted) {
        struct sl_error err = {0};
        (void)dispatch(s, JOB_EACH, NULL, leave_device_group, NULL, &err);
    }
    for (uint32_t r = 0; joined && r < s->R; r++) {
        train_coll_abort(s->reps[r].dcoll, SL_ECLOSED, "strategy destroyed after a failure");
        train_coll_destroy(s->reps[r].dcoll);
        s->reps[r].dcoll = NULL;
    }
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_broadcast(&s->job_cv);
    pthread_mutex_unlock(&s->mu);
    for (uint32_t r = 0; s->reps != NULL && r < s->R; r++) {
        struct train_replica *rep = &s->reps[r];
        if (rep->started)
            pthread_join(rep->thread, NULL);
        train_stage_destroy(rep->stage);
        if (rep->dev != NULL)
            s->ops->close(rep->dev);
        train_coll_destroy(rep->coll);
        train_coll_destroy(rep->local);
        sl_free(rep->scratch);
    }
    if (s->own_across)
        train_coll_destroy(s->across);
    for (size_t i = 0; i < s->nvars; i++)
        train_mirror_destroy(s->vars[i].m);
    train_local_group_destroy(s->group);
    sl_free(s->hashbuf);
    sl_free(s->shapes);
    sl_free(s->tower_pieces);
    sl_free(s->tower_buf);
    sl_free(s->reps);
    pthread_cond_destroy(&s->bar_cv);
    pthread_cond_destroy(&s->done_cv);
    pthread_cond_destroy(&s->job_cv);
    pthread_mutex_destroy(&s->mu);
    sl_free(s);
}

int train_strategy_sum_across_workers(struct train_strategy *s, float *buf, size_t n, struct sl_error *err)
{
    return s->across != NULL ? train_coll_all_reduce(s->across, buf, n, err) : 0;
}

void train_strategy_abort(struct train_strategy *s, int code, const char *msg)
{
    if (msg == NULL)
        msg = "aborted";
    strategy_abort(s, code, msg);
    if (!s->broken) {
        s->broken = code < 0 ? code : SL_EINVAL;
        snprintf(s->broken_msg, sizeof s->broken_msg, "%s", msg);
    }
}
