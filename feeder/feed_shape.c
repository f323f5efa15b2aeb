/* feed_shape: the cluster shape's lifetime on a feeder (docs/protocol.md,
 * "How sluice's feeder and trainer use it"): set from the feeder's
 * --workers/--replicas or the first HELLO, sized against --piece-memory
 * before anything is allocated, kept once a trainer consumed a piece, and
 * released when the trainers of an unconsumed shape are gone. */
#include "feed_serve.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "feed_metrics.h"
#include "sl_alloc.h"
#include "sl_clock.h"

int feed__shape_setup(struct server *s, uint32_t W, uint32_t R, struct sl_error *err)
{
    /* A piece holds at most ceil(G / (W R)) rows under every split (the
     * stream split's sizes are lo or lo + 1, the legacy split's ceil(b / N)
     * with b <= G, per-replica input's G / N), so buffers are sized for
     * that, not for the global batch. */
    uint64_t n = (uint64_t)W * R;
    s->piece_rows = (size_t)((s->max_rows + n - 1) / n);
    s->piece_bytes = s->o->max_piece_bytes;
    if (s->piece_bytes == 0) {
        s->piece_bytes = s->o->map != NULL ? feed_piece_fixed_bytes(s->o->out_specs, s->o->nout_specs, s->piece_rows)
                                           : feed_piece_fixed_bytes(s->o->specs, s->o->nspecs, s->piece_rows);
        if (s->piece_bytes == 0) /* variable-size features: a generous default, overridable */
            s->piece_bytes = s->piece_rows * 16384 + ((uint64_t)1 << 20);
        s->piece_bytes += 64 * FEED_MAX_TENSORS;
    }
    /* `prefetch` counts steps, as tf.data's prefetch after batching does:
     * a trainer may have prefetch x R pieces outstanding (a window below R
     * could never make up a step). Buffers: that window for every worker
     * (pieces queued in ZeroMQ towards a trainer that stops reading stay
     * within its own window, so it can never starve another), plus one per
     * task for pieces of a dropped connection still being assembled. */
    s->window = s->prefetch * R;
    /* the pool's size is checked before anything is allocated: a HELLO
     * cannot make the feeder take more than --piece-memory */
    uint64_t nbufs64 = 0, pool_bytes = 0;
    int huge = __builtin_mul_overflow(s->window, (uint64_t)W, &nbufs64) ||
               __builtin_add_overflow(nbufs64, (uint64_t)s->ntasks, &nbufs64) ||
               __builtin_mul_overflow(nbufs64, s->piece_bytes, &pool_bytes);
    /* a window of at least FEED_WINDOW_MIN_BYTES of pieces where that
     * still fits --piece-memory (else the prefetch window, as before) */
    uint64_t least = s->piece_bytes > 0 ? (FEED_WINDOW_MIN_BYTES + s->piece_bytes - 1) / s->piece_bytes : 0;
    uint64_t wide_bufs = 0, wide_bytes = 0;
    if (!huge && least > s->window && !__builtin_mul_overflow(least, (uint64_t)W, &wide_bufs) &&
        !__builtin_add_overflow(wide_bufs, (uint64_t)s->ntasks, &wide_bufs) &&
        !__builtin_mul_overflow(wide_bufs, s->piece_bytes, &wide_bytes) && wide_bytes <= s->o->piece_memory) {
        s->window = least;
        nbufs64 = wide_bufs;
        pool_bytes = wide_bytes;
    }
    if (huge || pool_bytes > s->o->piece_memory) {
        char need[32] = "over 2^64";
        if (!huge)
            snprintf(need, sizeof need, "%" PRIu64, pool_bytes);
        return sl_error_set(err, SL_EINVAL,
                            "%u workers x %u replicas need %s bytes of piece memory (%" PRIu64 " buffers of %" PRIu64
                            " bytes: %zu steps of prefetch x %u replicas x %u workers + %zu "
                            "tasks), over this feeder's --piece-memory of %" PRIu64 " bytes",
                            W, R, need, huge ? 0 : nbufs64, s->piece_bytes, s->prefetch, R, W, s->ntasks,
                            s->o->piece_memory);
    }
    /* planning looks at every worker: only for a shape within the bound */
    int rc = feed_job_fill_plan_config(s->o->job, feed_source_counts(s->o->src), W, R, &s->cfg);
    if (rc != 0)
        return sl_error_set(err, rc, "cannot plan for %u workers x %u replicas", W, R);
    struct feed_plan_summary sum;
    rc = feed_plan_summarize(&s->cfg, 0, &sum, err);
    if (rc != 0)
        return rc;
    size_t nbufs = (size_t)nbufs64;
    s->trainers = sl_calloc(W, sizeof *s->trainers);
    if (s->trainers == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    for (uint32_t w = 0; w < W; w++) {
        s->trainers[w].worker = w;
        s->trainers[w].share = s->o->feeder_index;
        if (feed_hold_init(&s->trainers[w].hold, s->window) != 0)
            rc = SL_ENOMEM;
    }
    /* takeovers of lost feeders' shares: entries made as HELLOs ask */
    uint64_t most = (uint64_t)W * (s->o->feeders - 1);
    s->max_takeovers = (size_t)(most < MAX_TAKEOVERS ? most : MAX_TAKEOVERS);
    /* Pieces in shared memory when a trainer on this host maps it; else,
     * or where memfd is missing, a private pool and copies. */
    _Static_assert(SL_POOL_SHM_HEADER == SL_WIRE_SHM_HEADER, "shared memory header sizes differ");
    if (rc == 0 && !s->o->no_shm &&
        (rc = sl_pool_create_shared(&s->pool, nbufs, (size_t)s->piece_bytes, &s->shm)) != 0) {
        sl_log(SL_LOG_INFO, "no shared memory for piece buffers (%s): pieces go by copy", sl_code_name(rc));
        memset(&s->shm, 0, sizeof s->shm);
        rc = 0;
    }
    if (rc == 0 && s->pool == NULL)
        rc = sl_pool_create(&s->pool, nbufs, (size_t)s->piece_bytes);
    if (rc != 0) {
        for (uint32_t w = 0; w < W; w++)
            feed_hold_free(&s->trainers[w].hold);
        sl_free(s->trainers);
        s->trainers = NULL;
        return sl_error_set(err, rc, "cannot allocate %zu piece buffers of %" PRIu64 " bytes", nbufs, s->piece_bytes);
    }
    sl_metrics_set(s->m, FEED_M_POOL_BYTES, (uint64_t)nbufs * s->piece_bytes);
    sl_metrics_set(s->m, FEED_M_WORKERS, W);
    s->workers = W;
    s->replicas = R;
    s->ntrainers = s->cap_trainers = W;
    s->steps = sum.steps;
    sl_log(SL_LOG_INFO,
           "cluster: %u workers x %u replicas, %" PRIu64 " steps per epoch; %zu piece buffers of %" PRIu64 " bytes "
           "(a window of %" PRIu64 " pieces per worker)",
           W, R, s->steps, nbufs, s->piece_bytes, s->window);
    return 0;
}

/* Destroy retired pools whose every buffer is back. */
void feed__shape_reap(struct server *s)
{
    for (size_t i = 0; i < sizeof s->retired / sizeof s->retired[0]; i++)
        if (s->retired[i] != NULL && sl_pool_wait_idle(s->retired[i], 0) == 0) {
            sl_pool_destroy(s->retired[i]);
            s->retired[i] = NULL;
        }
}

/* Free the shape's connections and retire its pool (it goes once ZeroMQ
 * gave its frames back): 0, or -1 while that cannot be done yet (pieces
 * are being assembled in its pool, or earlier pools are still in ZeroMQ's
 * hands). The shape's figures are the caller's to reset. */
static int shape_free(struct server *s)
{
    if (feed_exec_free(s->exec) != feed_exec_tasks(s->exec)) /* executors hold buffers of this pool */
        return -1;
    feed__shape_reap(s);
    size_t slot = 0, nslots = sizeof s->retired / sizeof s->retired[0];
    while (slot < nslots && s->retired[slot] != NULL)
        slot++;
    if (slot == nslots)
        return -1;
    for (size_t i = 0; i < s->ntrainers; i++) {
        feed_stream_destroy(s->trainers[i].stream);
        feed_hold_release_all(&s->trainers[i].hold, s->pool);
        feed_hold_free(&s->trainers[i].hold);
    }
    sl_free(s->trainers);
    s->trainers = NULL;
    s->ntrainers = s->cap_trainers = 0;
    /* frames sent by copy may still be queued in ZeroMQ: the pool goes
     * when they are back (reap_retired) */
    s->retired[slot] = s->pool;
    s->pool = NULL;
    memset(&s->shm, 0, sizeof s->shm);
    return 0;
}

int feed__shape_release(struct server *s)
{
    if (s->workers == 0)
        return 0;
    if (shape_free(s) != 0)
        return -1;
    sl_log(SL_LOG_INFO, "cluster shape %u workers x %u replicas released: its trainers left without taking a piece",
           s->workers, s->replicas);
    s->workers = s->replicas = 0;
    s->steps = 0;
    s->ended = 0;
    memset(&s->tr, 0, sizeof s->tr); /* the next shape's first HELLO says */
    s->tr_steps = 0;
    sl_metrics_set(s->m, FEED_M_POOL_BYTES, 0);
    sl_metrics_set(s->m, FEED_M_WORKERS, 0);
    s->release_pending = 0;
    return 0;
}

void feed__drop(struct server *s, struct trainer *t, const char *why)
{
    if (t->share == s->o->feeder_index)
        sl_log(SL_LOG_INFO, "worker %u %s after %" PRIu64 " pieces", t->worker, why, t->sent);
    else
        sl_log(SL_LOG_INFO, "worker %u (feeder %u's share, taken over) %s after %" PRIu64 " pieces", t->worker,
               t->share, why, t->sent);
    t->active = 0;
    t->dropped_ns = sl_clock_ns();
    t->generation = ++s->generation; /* tasks in flight for it are dropped */
    /* its shared buffers stay held until the worker's next HELLO */
    t->shm = FEED_SHM_NONE;
    /* one dropped after its END had every piece of its stream, as one that
     * said BYE (feed_message.c): the shape is this job's, its trainer may
     * come back to resume (--end-wait-s) */
    if (t->end_sent && t->sent > 0)
        s->consumed = 1;
    /* the last trainer of a shape nobody consumed from: release it */
    if (!s->fixed && !s->consumed) {
        uint32_t active = 0;
        for (size_t i = 0; i < s->ntrainers; i++)
            active += s->trainers[i].active != 0;
        s->release_pending = active == 0;
    }
}

/* How long a trainer may be silent before another connection may take its
 * place: 2.5 of its heartbeats (1 s when it sends none). */
uint64_t feed__grace_ns(const struct trainer *t)
{
    return (uint64_t)(t->heartbeat_ms ? t->heartbeat_ms : 1000) * 2500000u;
}

/* A HELLO of another shape, while the shape is the first trainers' and
 * none has consumed a piece: if every one of them is silent past its grace
 * (gone), drop them and release the shape. 0 when released. */
int feed__shape_take_over(struct server *s)
{
    if (s->fixed || s->consumed)
        return -1;
    uint64_t now = sl_clock_ns();
    for (size_t i = 0; i < s->ntrainers; i++) {
        const struct trainer *t = &s->trainers[i];
        if (t->active && now - t->last_seen_ns < feed__grace_ns(t))
            return -1;
    }
    for (size_t i = 0; i < s->ntrainers; i++)
        if (s->trainers[i].active)
            feed__drop(s, &s->trainers[i], "was silent and had taken no piece when a trainer of another shape came");
    return feed__shape_release(s);
}

/* Steps per epoch of a W x R shape (the plan summarized, nothing kept):
 * 0, or the error. */
static int shape_steps(const struct server *s, uint32_t W, uint32_t R, uint64_t *steps, struct sl_error *err)
{
    struct feed_plan_config cfg;
    int rc = feed_job_fill_plan_config(s->o->job, feed_source_counts(s->o->src), W, R, &cfg);
    if (rc != 0)
        return sl_error_set(err, rc, "cannot plan for %u workers x %u replicas", W, R);
    struct feed_plan_summary sum;
    if ((rc = feed_plan_summarize(&cfg, 0, &sum, err)) != 0)
        return rc;
    *steps = sum.steps;
    return 0;
}

struct feed_transition feed__hello_transition(const struct sl_wire_hello *h)
{
    struct feed_transition x = {0};
    if (h->flags & SL_WIRE_HELLO_TRANSITION) {
        x.from_workers = h->from_workers;
        x.from_replicas = h->from_replicas;
        x.from_epoch = h->from_epoch;
        x.from_step = h->from_step;
    }
    return x;
}

int feed__transition_check(const struct server *s, uint32_t W, uint32_t R, const struct feed_transition *x,
                           uint64_t *old_steps, struct sl_error *err)
{
    struct feed_plan_config cfg;
    int rc = feed_job_fill_plan_config(s->o->job, feed_source_counts(s->o->src), W, R, &cfg);
    if (rc != 0)
        return sl_error_set(err, rc, "cannot plan for %u workers x %u replicas", W, R);
    rc = feed_transition_check(&cfg, x, old_steps, err);
    /* the W' connections of this feeder's own shares hold a stream each:
     * together within --piece-memory, beside the pool */
    uint64_t one = rc == 0 ? feed_transition_bytes(&cfg, x) : 0, all = 0;
    if (rc == 0 && (__builtin_mul_overflow(one, (uint64_t)W, &all) || all > s->o->piece_memory))
        rc = sl_error_set(err, SL_EINVAL,
                          "its %u connections would hold %u plans of the old shape each until epoch %" PRIu64
                          " ends, about %" PRIu64 " bytes each, over this feeder's --piece-memory of %" PRIu64
                          " bytes in all: give the feeder more --piece-memory, or change the shape at an epoch's start",
                          W, x->from_workers, x->from_epoch, one, s->o->piece_memory);
    if (rc != 0)
        sl_error_prefix(err,
                        "this trainer continues a change of the job's shape from %u x %u to %u x %u at step %" PRIu64
                        " of epoch %" PRIu64 ", which this feeder cannot serve: ",
                        x->from_workers, x->from_replicas, W, R, x->from_step, x->from_epoch);
    return rc;
}

/* Why a HELLO that asks to reshape with a transition (a change mid-epoch)
 * cannot have it, into why[n] ("" when it may): the trainers' checkpoint
 * must be of the shape this feeder served, when one was consumed; one
 * change per epoch; the transition within the job (feed_transition_check). */
static void transition_refusal(struct server *s, const struct sl_wire_hello *h, char *why, size_t n)
{
    struct feed_transition x = feed__hello_transition(h);
    if (s->consumed && (x.from_workers != s->workers || x.from_replicas != s->replicas)) {
        snprintf(why, n,
                 "this trainer continues a change of the job's shape from %u x %u at step %" PRIu64 " of epoch %" PRIu64
                 ", but this feeder served %u workers x %u replicas: the trainer's checkpoint is not of the shape "
                 "this feeder served",
                 x.from_workers, x.from_replicas, x.from_step, x.from_epoch, s->workers, s->replicas);
        return;
    }
    if (feed_transition_set(&s->tr) && x.from_epoch <= s->tr.from_epoch) {
        if (x.from_epoch == s->tr.from_epoch)
            snprintf(why, n,
                     "a second change within epoch %" PRIu64 ": the job's shape changed at step %" PRIu64
                     " of it from %u x %u to %u x %u, and this trainer asks to change it again at step %" PRIu64
                     " to %u x %u: change again at epoch %" PRIu64 "'s start",
                     x.from_epoch, s->tr.from_step, s->tr.from_workers, s->tr.from_replicas, s->workers, s->replicas,
                     x.from_step, h->workers, h->replicas, x.from_epoch + 1);
        else
            snprintf(why, n,
                     "this trainer asks to change the job's shape at step %" PRIu64 " of epoch %" PRIu64
                     ", before its last change (at step %" PRIu64 " of epoch %" PRIu64 " from %u x %u to %u x %u)",
                     x.from_step, x.from_epoch, s->tr.from_step, s->tr.from_epoch, s->tr.from_workers,
                     s->tr.from_replicas, s->workers, s->replicas);
        return;
    }
    uint64_t T = 0;
    struct sl_error err = {0};
    if (feed__transition_check(s, h->workers, h->replicas, &x, &T, &err) != 0)
        snprintf(why, n, "%s", err.msg);
}

/* Why a HELLO that asks to reshape (SL_WIRE_HELLO_RESHAPE) cannot have
 * it now, into why[n]; "" when it may. The rules of docs/protocol.md,
 * "Shape and refusals": a shape not fixed, no trainer of the old shape
 * heard from within its grace, the resume point an epoch's first piece
 * of the new shape (or, with a transition, transition_refusal's rules),
 * and the old pool free of pieces being assembled. */
static void reshape_refusal(struct server *s, const struct sl_wire_hello *h, char *why, size_t n)
{
    why[0] = '\0';
    if (s->fixed) {
        snprintf(why, n,
                 "this trainer asks to reshape the job from %u workers x %u replicas to %u x %u, but the shape is "
                 "fixed by the feeder's --workers and --replicas, or its job's: restart the feeder to change it",
                 s->workers, s->replicas, h->workers, h->replicas);
        return;
    }
    uint64_t now = sl_clock_ns();
    for (size_t i = 0; i < s->ntrainers; i++) {
        const struct trainer *t = &s->trainers[i];
        if (t->active && now - t->last_seen_ns < feed__grace_ns(t)) {
            snprintf(why, n,
                     "this trainer asks to reshape the job from %u workers x %u replicas to %u x %u, but worker %u "
                     "of the old shape is still connected (heard from %.1f s ago): stop every trainer of the old "
                     "shape first",
                     s->workers, s->replicas, h->workers, h->replicas, t->worker,
                     (double)(now - t->last_seen_ns) / 1e9);
            return;
        }
    }
    uint64_t epochs = s->o->job->epochs;
    if (h->flags & SL_WIRE_HELLO_EPOCH) {
        if (h->resume_seq != 0)
            snprintf(why, n, "a HELLO that resumes by epoch (epoch %" PRIu64 ") must say resume_seq 0, not %" PRIu64,
                     h->resume_epoch, h->resume_seq);
        else if (epochs != 0 && h->resume_epoch > epochs)
            snprintf(why, n,
                     "this trainer asks to reshape at epoch %" PRIu64 ", past the end of the job (%" PRIu64 " epochs)",
                     h->resume_epoch, epochs);
    } else if (h->flags & SL_WIRE_HELLO_TRANSITION) {
        transition_refusal(s, h, why, n);
    } else {
        uint64_t steps = 0, per = 0;
        struct sl_error err = {0};
        if (shape_steps(s, h->workers, h->replicas, &steps, &err) != 0) {
            snprintf(why, n, "%s", err.msg);
            return;
        }
        per = steps * h->replicas;
        if (per == 0 || h->resume_seq % per != 0)
            snprintf(why, n,
                     "this trainer asks to reshape the job to %u workers x %u replicas at piece %" PRIu64
                     ", which is not an epoch's first piece of that shape (%" PRIu64 " steps x %u replicas per "
                     "epoch): sluice changes the shape at an epoch's start, or mid-epoch with a transition (a trainer "
                     "restored with --reshape from a checkpoint taken mid-epoch)",
                     h->workers, h->replicas, h->resume_seq, steps, h->replicas);
    }
    if (why[0] == '\0' && feed_exec_free(s->exec) != feed_exec_tasks(s->exec))
        snprintf(why, n, "the old shape's last pieces are still being assembled: try again in a moment");
}

int feed__shape_reshape(struct server *s, const struct sl_wire_hello *h, char *why, size_t n)
{
    if (!(h->flags & SL_WIRE_HELLO_RESHAPE))
        return 0;
    reshape_refusal(s, h, why, n);
    if (why[0] != '\0')
        return -1;
    uint32_t W = s->workers, R = s->replicas;
    uint64_t sent = 0;
    for (size_t i = 0; i < s->ntrainers; i++) {
        struct trainer *t = &s->trainers[i];
        if (t->share == s->o->feeder_index && t->last_seq > sent)
            sent = t->last_seq;
        if (t->active)
            feed__drop(s, t, "was silent when a trainer of another shape asked to reshape");
    }
    if (shape_free(s) != 0) {
        snprintf(why, n, "the old shape's pieces are still in ZeroMQ's hands: try again in a moment");
        return -1;
    }
    s->workers = s->replicas = 0;
    s->steps = 0;
    s->ended = 0;
    s->consumed = 0; /* the new shape is kept once its trainers consume a piece */
    s->release_pending = 0;
    struct sl_error err = {0};
    if (feed__shape_setup(s, h->workers, h->replicas, &err) != 0) {
        sl_metrics_set(s->m, FEED_M_POOL_BYTES, 0);
        sl_metrics_set(s->m, FEED_M_WORKERS, 0);
        snprintf(why, n, "%s", err.msg);
        return -1;
    }
    /* a change mid-epoch sets the transition; one at an epoch's start
     * forgets the last one (the new shape's plan from that epoch) */
    struct feed_transition x = feed__hello_transition(h);
    memset(&s->tr, 0, sizeof s->tr);
    s->tr_steps = 0;
    if (feed_transition_set(&x)) {
        uint64_t T = 0;
        if (feed__transition_check(s, h->workers, h->replicas, &x, &T, &err) != 0) { /* checked: cannot be */
            snprintf(why, n, "%s", err.msg);
            return -1;
        }
        s->tr = x;
        s->tr_steps = T;
        sl_metrics_add(s->m, FEED_M_RESHAPES, 1);
        sl_log(SL_LOG_WARN,
               "cluster shape %u x %u -> %u x %u at step %" PRIu64 " of epoch %" PRIu64 " (worker %u's HELLO asked "
               "to reshape mid-epoch: steps %" PRIu64 "..%" PRIu64 " of that epoch cut among the new shape; the old "
               "shape's workers had been sent pieces up to %" PRIu64 ")",
               W, R, h->workers, h->replicas, x.from_step, x.from_epoch, h->worker, x.from_step, T - 1, sent);
        return 1;
    }
    uint64_t per = s->steps * s->replicas;
    uint64_t epoch = (h->flags & SL_WIRE_HELLO_EPOCH) ? h->resume_epoch : per ? h->resume_seq / per : 0;
    sl_metrics_add(s->m, FEED_M_RESHAPES, 1);
    sl_log(SL_LOG_WARN,
           "cluster shape %u x %u -> %u x %u at epoch %" PRIu64 " (worker %u's HELLO asked to reshape; the old "
           "shape's workers had been sent pieces up to %" PRIu64 ")",
           W, R, h->workers, h->replicas, epoch, h->worker, sent);
    return 1;
}
