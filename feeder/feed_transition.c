/* feed_transition: a worker's piece stream, a plain plan or the stream of
 * a new worker after a mid-epoch change of the cluster shape
 * (feed_transition.h, docs/semantics.md 5.2). */
#include "feed_transition.h"

#include <inttypes.h>
#include <string.h>

#include "sl_alloc.h"

struct feed_stream {
    struct feed_plan_config cfg, old_cfg; /* copies: the plans borrow them */
    struct feed_transition x;             /* from_workers 0: a plain plan */
    uint32_t worker;
    struct feed_plan *plan; /* the new shape's (the whole stream when plain) */
    /* the transition: its pieces are seq 0..trans-1; the new plan's piece
     * base is the stream's piece trans */
    uint64_t old_steps, trans, base;
    uint32_t R2, N2;
    struct feed_plan **old; /* from_workers plans of the old shape; NULL once the transition is over */
    int in_trans, done;
    uint64_t pos; /* the next seq while in the transition */
    /* B_s: the old plans' pieces at step b_step, in order */
    struct feed_elem *b;
    size_t b_cap, b_len;
    uint64_t b_step;
    int b_ok;
};

struct feed_plan_config feed_transition_old_config(const struct feed_plan_config *cfg, const struct feed_transition *x)
{
    struct feed_plan_config old = *cfg;
    old.workers = x->from_workers;
    old.replicas = x->from_replicas;
    return old;
}

/* Estimated bytes of one plan of cfg (feed_plan_create's allocations and
 * its struct, generously) */
static uint64_t plan_bytes(const struct feed_plan_config *cfg)
{
    uint64_t records = 0, N = (uint64_t)cfg->workers * cfg->replicas;
    for (size_t j = 0; j < cfg->nfiles; j++)
        records = cfg->counts[j] > UINT64_MAX - records ? UINT64_MAX : records + cfg->counts[j];
    uint64_t shuffle = cfg->shuffle_buffer < records ? cfg->shuffle_buffer : records;
    uint64_t cycle = cfg->parallel_reads > 1 ? cfg->parallel_reads : 1;
    uint64_t piece = (cfg->global_batch + N - 1) / N, bytes = 0;
    if (__builtin_add_overflow(shuffle, piece, &bytes) ||
        __builtin_mul_overflow(bytes, (uint64_t)sizeof(struct feed_elem), &bytes) ||
        __builtin_add_overflow(bytes, 1024 + 4 * (uint64_t)cfg->nfiles + 64 * cycle, &bytes))
        return UINT64_MAX;
    return bytes;
}

int feed_transition_check(const struct feed_plan_config *cfg, const struct feed_transition *x, uint64_t *old_steps,
                          struct sl_error *err)
{
    uint32_t W = x->from_workers, R = x->from_replicas;
    uint64_t e = x->from_epoch, t = x->from_step;
    struct feed_plan_config old = feed_transition_old_config(cfg, x);
    struct feed_plan_summary sum, now;
    int rc = feed_plan_summarize(&old, 0, &sum, err);
    if (rc != 0) {
        sl_error_prefix(err, "the shape before the change, %u x %u: ", W, R);
        return rc;
    }
    if ((rc = feed_plan_summarize(cfg, 0, &now, err)) != 0)
        return rc;
    uint64_t T = sum.steps;
    *old_steps = T;
    if (t == 0 || t >= T)
        return sl_error_set(err, SL_EINVAL,
                            "the change at step %" PRIu64 " of epoch %" PRIu64 " is not within that epoch: %u x %u "
                            "take %" PRIu64 " steps per epoch, and a change mid-epoch comes at step 1..%" PRIu64
                            " (at step 0 or %" PRIu64 ", it is an epoch's start: resume by epoch)",
                            t, e, W, R, T, T > 0 ? T - 1 : 0, T);
    if (cfg->epochs != 0 && e >= cfg->epochs)
        return sl_error_set(err, SL_EINVAL,
                            "the change at step %" PRIu64 " of epoch %" PRIu64 " is past the end of the job (%" PRIu64
                            " epochs)",
                            t, e, cfg->epochs);
    /* every seq either plan or stream names fits 64 bits */
    uint64_t a = 0, b = 0, e1 = 0;
    if (__builtin_add_overflow(e, 1, &e1) || __builtin_mul_overflow(e1, T, &a) ||
        __builtin_mul_overflow(a, (uint64_t)R, &a) || __builtin_mul_overflow(e1, now.steps, &b) ||
        __builtin_mul_overflow(b, (uint64_t)cfg->replicas, &b))
        return sl_error_set(err, SL_EINVAL,
                            "the change at step %" PRIu64 " of epoch %" PRIu64 " is past any trainer's reach", t, e);
    uint64_t bytes = feed_transition_bytes(cfg, x);
    if (bytes > FEED_TRANSITION_MAX_BYTES)
        return sl_error_set(err, SL_EINVAL,
                            "a change from %u x %u needs %u plans of the old shape for each new worker, about %" PRIu64
                            " bytes, over the bound of %" PRIu64 " bytes: change the shape at an epoch's start instead",
                            W, R, W, bytes, FEED_TRANSITION_MAX_BYTES);
    return 0;
}

uint64_t feed_transition_bytes(const struct feed_plan_config *cfg, const struct feed_transition *x)
{
    /* W old plans and B_s's buffer (G + W R elements); saturated */
    struct feed_plan_config old = feed_transition_old_config(cfg, x);
    uint64_t bytes = 0, buf = 0;
    if (__builtin_mul_overflow(plan_bytes(&old), (uint64_t)x->from_workers, &bytes) ||
        __builtin_add_overflow(cfg->global_batch, (uint64_t)x->from_workers * x->from_replicas, &buf) ||
        __builtin_mul_overflow(buf, (uint64_t)sizeof(struct feed_elem), &buf) ||
        __builtin_add_overflow(bytes, buf, &bytes))
        return UINT64_MAX;
    return bytes;
}

uint64_t feed_transition_total(const struct feed_transition *x, uint64_t old_steps, uint64_t steps, uint32_t replicas,
                               uint64_t epochs)
{
    uint64_t per = 0, total = 0, head = 0;
    if (__builtin_mul_overflow(steps, (uint64_t)replicas, &per))
        return UINT64_MAX;
    if (!feed_transition_set(x)) {
        if (epochs == 0 && per != 0)
            return UINT64_MAX;
        return __builtin_mul_overflow(per, epochs, &total) ? UINT64_MAX : total;
    }
    if (x->from_step > old_steps || __builtin_mul_overflow(old_steps - x->from_step, (uint64_t)replicas, &head))
        return UINT64_MAX;
    if (epochs == 0)
        return per != 0 ? UINT64_MAX : head;
    uint64_t later = epochs > x->from_epoch ? epochs - x->from_epoch - 1 : 0;
    if (__builtin_mul_overflow(per, later, &total) || __builtin_add_overflow(total, head, &total))
        return UINT64_MAX;
    return total;
}

static void free_old(struct feed_stream *st)
{
    for (uint32_t w = 0; st->old != NULL && w < st->x.from_workers; w++)
        feed_plan_destroy(st->old[w]);
    sl_free(st->old);
    st->old = NULL;
    sl_free(st->b);
    st->b = NULL;
    st->b_ok = 0;
}

/* The old plans (and B_s's buffer) made again, for a seek into the
 * transition once it was over. */
static int make_old(struct feed_stream *st, struct sl_error *err)
{
    if (st->old != NULL)
        return 0;
    uint32_t W = st->x.from_workers;
    st->old = sl_calloc(W, sizeof *st->old);
    st->b_cap = (size_t)(st->cfg.global_batch + (uint64_t)W * st->x.from_replicas);
    st->b = sl_malloc(st->b_cap * sizeof *st->b);
    if (st->old == NULL || st->b == NULL) {
        free_old(st);
        return sl_error_set(err, SL_ENOMEM, "transition: out of memory for %u plans of the old shape", W);
    }
    for (uint32_t w = 0; w < W; w++) {
        /* the old steps known: not W x files again for each plan */
        int rc = feed_plan_create_steps(&st->old[w], &st->old_cfg, w, st->old_steps, err);
        if (rc != 0) {
            free_old(st);
            return rc;
        }
    }
    return 0;
}

int feed_stream_create(struct feed_stream **out, const struct feed_plan_config *cfg, const struct feed_transition *x,
                       uint32_t worker, struct sl_error *err)
{
    *out = NULL;
    struct feed_stream *st = sl_calloc(1, sizeof *st);
    if (st == NULL)
        return sl_error_set(err, SL_ENOMEM, "stream: out of memory");
    st->cfg = *cfg;
    st->worker = worker;
    int rc = feed_plan_create(&st->plan, &st->cfg, worker, err);
    if (rc == 0 && feed_transition_set(x)) {
        st->x = *x;
        st->old_cfg = feed_transition_old_config(cfg, x);
        rc = feed_transition_check(&st->cfg, x, &st->old_steps, err);
        struct feed_plan_summary now;
        if (rc == 0)
            rc = feed_plan_summarize(&st->cfg, worker, &now, err);
        if (rc == 0) {
            /* within 64 bits: feed_transition_check */
            st->R2 = cfg->replicas;
            st->N2 = cfg->workers * cfg->replicas;
            st->trans = (st->old_steps - x->from_step) * st->R2;
            st->base = (x->from_epoch + 1) * now.steps * st->R2;
            rc = feed_stream_seek(st, 0, err);
            if (rc == SL_END) /* cannot be: the transition has a piece */
                rc = sl_error_set(err, SL_EINVAL, "transition: no piece at its start");
        }
    }
    if (rc != 0) {
        feed_stream_destroy(st);
        return rc;
    }
    *out = st;
    return 0;
}

void feed_stream_destroy(struct feed_stream *st)
{
    if (st == NULL)
        return;
    free_old(st);
    feed_plan_destroy(st->plan);
    sl_free(st);
}

/* B_s for step s of the change's epoch: every old plan's R pieces of that
 * step (the plans stand at its start), in order. */
static int build_step(struct feed_stream *st, uint64_t s, struct sl_error *err)
{
    uint64_t e = st->x.from_epoch;
    st->b_len = 0;
    st->b_ok = 0;
    for (uint32_t w = 0; w < st->x.from_workers; w++)
        for (uint32_t r = 0; r < st->x.from_replicas; r++) {
            struct feed_piece pc;
            int rc = feed_plan_next(st->old[w], &pc, err);
            if (rc != 0 || pc.epoch != e || pc.step != s || pc.replica != r)
                return sl_error_set(err, SL_EINVAL,
                                    "transition: old worker %u's plan did not give replica %u of step %" PRIu64
                                    " of epoch %" PRIu64,
                                    w, r, s, e);
            if (pc.n > st->b_cap - st->b_len)
                return sl_error_set(err, SL_EINVAL,
                                    "transition: step %" PRIu64 " of epoch %" PRIu64 " has over %zu elements", s, e,
                                    st->b_cap);
            if (pc.n > 0)
                memcpy(st->b + st->b_len, pc.elems, pc.n * sizeof *st->b);
            st->b_len += pc.n;
        }
    st->b_step = s;
    st->b_ok = 1;
    return 0;
}

int feed_stream_next(struct feed_stream *st, struct feed_piece *piece, struct sl_error *err)
{
    if (st->done)
        return SL_END;
    if (st->in_trans && st->pos < st->trans) {
        uint64_t s = st->x.from_step + st->pos / st->R2;
        uint32_t r2 = (uint32_t)(st->pos % st->R2);
        if (!st->b_ok || st->b_step != s) {
            int rc = build_step(st, s, err);
            if (rc != 0)
                return rc;
        }
        /* piece p of N': sizes lo + 1 for the first hi, then lo */
        uint64_t p = (uint64_t)st->worker * st->R2 + r2, lo = st->b_len / st->N2, hi = st->b_len % st->N2;
        uint64_t start = p * lo + (p < hi ? p : hi);
        piece->worker = st->worker;
        piece->replica = r2;
        piece->epoch = st->x.from_epoch;
        piece->step = s;
        piece->seq = st->pos++;
        piece->n = (size_t)(lo + (p < hi));
        piece->elems = st->b + start;
        return 0;
    }
    if (st->in_trans) { /* the transition is over: the new plan from epoch e+1 */
        free_old(st);
        st->in_trans = 0;
        uint64_t within = 0;
        if (feed_plan_seek(st->plan, st->base, &within) == SL_END) {
            st->done = 1;
            return SL_END;
        }
    }
    int rc = feed_plan_next(st->plan, piece, err);
    if (rc == SL_END)
        st->done = 1;
    if (rc == 0 && feed_transition_set(&st->x))
        piece->seq = piece->seq - st->base + st->trans;
    return rc;
}

int feed_stream_seek(struct feed_stream *st, uint64_t seq, struct sl_error *err)
{
    uint64_t within = 0;
    st->done = 0;
    if (!feed_transition_set(&st->x)) {
        int rc = feed_plan_seek(st->plan, seq, &within);
        st->done = rc == SL_END;
        return rc;
    }
    if (seq < st->trans) {
        int rc = make_old(st, err);
        if (rc != 0)
            return rc;
        /* every old plan at step s of epoch e: (e T + s) R, within 64 bits
         * (feed_transition_check) */
        uint64_t s = st->x.from_step + seq / st->R2;
        uint64_t at = (st->x.from_epoch * st->old_steps + s) * st->x.from_replicas;
        for (uint32_t w = 0; w < st->x.from_workers; w++)
            if (feed_plan_seek(st->old[w], at, &within) != 0)
                return sl_error_set(err, SL_EINVAL,
                                    "transition: old worker %u's plan has no step %" PRIu64 " of epoch %" PRIu64, w, s,
                                    st->x.from_epoch);
        st->in_trans = 1;
        st->b_ok = 0;
        st->pos = seq;
        return 0;
    }
    free_old(st);
    st->in_trans = 0;
    uint64_t at = 0;
    if (__builtin_add_overflow(st->base, seq - st->trans, &at) || feed_plan_seek(st->plan, at, &within) == SL_END) {
        st->done = 1;
        return SL_END;
    }
    return 0;
}
