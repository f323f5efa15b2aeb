/* train_collective_local: a generation barrier that reduces (or
 * broadcasts) on the way out.
 *
 * Each arriving replica deposits its buffer pointer, length and op in its
 * slot under the group mutex. The last to arrive (whichever replica it is)
 * checks that all slots agree, then, still holding the mutex, computes each
 * element as slot 0 + slot 1 + ... + slot R-1 and writes that one value into
 * every replica's buffer, clears the slots, bumps the generation and
 * broadcasts. Waiters sleep until the generation moves or the group is
 * aborted. Writing into the waiters' buffers is safe because a waiter
 * cannot return (and so cannot touch its buffer) before it reacquires the
 * mutex; it also gives TSan its happens-before edge. Because the abort
 * takes the same mutex, it can never land in the middle of a computation:
 * a round either completes for everybody or fails for everybody still in it.
 *
 * A broadcast is the same round: the last to arrive copies the root's
 * buffer into every other slot's.
 *
 * No allocation after create: the reduction runs in place.
 *
 * Lock order: one lock (g->lock); nothing else is taken while holding it.
 */
#include "train_collective_local.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sl_alloc.h"

#define MAX_REPLICAS 1024

struct slot {
    float *buf;
    size_t n;
    enum train_reduce_op op;
    int root;    /* a broadcast's root; -1 in an all-reduce */
    int present; /* deposited in the current round */
};

struct train_local_group {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int replicas;
    int arrived;
    uint64_t generation;
    struct slot *slots;      /* [replicas] */
    struct sl_error failure; /* code != 0 once aborted */
};

int train_local_group_create(struct train_local_group **out, int replicas, struct sl_error *err)
{
    *out = NULL;
    if (replicas < 1 || replicas > MAX_REPLICAS)
        return sl_error_set(err, SL_EINVAL, "local all-reduce group needs 1..%d replicas (got %d)", MAX_REPLICAS,
                            replicas);
    struct train_local_group *g = sl_calloc(1, sizeof *g);
    if (g == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory for a local all-reduce group");
    g->slots = sl_calloc((size_t)replicas, sizeof *g->slots);
    if (g->slots == NULL) {
        sl_free(g);
        return sl_error_set(err, SL_ENOMEM, "out of memory for %d all-reduce slots", replicas);
    }
    int code;
    int rc = pthread_mutex_init(&g->lock, NULL);
    if (rc != 0) {
        code = sl_error_sys(err, rc, "pthread_mutex_init");
        goto out_free_group;
    }
    rc = pthread_cond_init(&g->changed, NULL);
    if (rc != 0) {
        code = sl_error_sys(err, rc, "pthread_cond_init");
        goto out_destroy_lock;
    }
    g->replicas = replicas;
    *out = g;
    return 0;

out_destroy_lock:
    pthread_mutex_destroy(&g->lock);
out_free_group:
    sl_free(g->slots);
    sl_free(g);
    return code;
}

void train_local_group_destroy(struct train_local_group *g)
{
    if (g == NULL)
        return;
    pthread_cond_destroy(&g->changed);
    pthread_mutex_destroy(&g->lock);
    sl_free(g->slots);
    sl_free(g);
}

/* Caller holds g->lock. First error wins. */
static void fail_locked(struct train_local_group *g, int code, const char *msg)
{
    if (g->failure.code == 0) {
        g->failure.code = code < 0 ? code : SL_EINVAL;
        snprintf(g->failure.msg, sizeof g->failure.msg, "%s", msg != NULL ? msg : "");
    }
    pthread_cond_broadcast(&g->changed);
}

/* Caller holds g->lock and has seen the group failed. */
static int report_failure_locked(const struct train_local_group *g, struct sl_error *err)
{
    return sl_error_set(err, g->failure.code, "%s", g->failure.msg);
}

/* Caller holds g->lock and is the last arriver: every slot is filled. */
static int check_round_locked(struct train_local_group *g, struct sl_error *err)
{
    const struct slot *s0 = &g->slots[0];
    if (s0->op != TRAIN_SUM && s0->op != TRAIN_MEAN)
        return sl_error_set(err, SL_EINVAL, "all-reduce: unknown reduce op %d", (int)s0->op);
    for (int r = 1; r < g->replicas; r++) {
        const struct slot *s = &g->slots[r];
        if (s->n != s0->n)
            return sl_error_set(err, SL_EINVAL, "all-reduce: replica %d passed %zu values but replica 0 passed %zu", r,
                                s->n, s0->n);
        if (s->op != s0->op)
            return sl_error_set(err, SL_EINVAL, "all-reduce: replica %d asked for op %d but replica 0 for op %d", r,
                                (int)s->op, (int)s0->op);
        if (s->root != s0->root)
            return sl_error_set(err, SL_EINVAL, "collective: replica %d asked for %s %d but replica 0 for %s %d", r,
                                s->root < 0 ? "an all-reduce" : "a broadcast from", s->root,
                                s0->root < 0 ? "an all-reduce" : "a broadcast from", s0->root);
    }
    return 0;
}

/* Caller holds g->lock; the round is checked. */
static void reduce_round_locked(struct train_local_group *g)
{
    int root = g->slots[0].root;
    if (root >= 0) { /* a broadcast: the root's buffer into every other */
        for (int r = 0; r < g->replicas; r++)
            if (r != root && g->slots[0].n > 0)
                memcpy(g->slots[r].buf, g->slots[root].buf, g->slots[0].n * sizeof(float));
        return;
    }
    size_t n = g->slots[0].n;
    int replicas = g->replicas;
    int mean = g->slots[0].op == TRAIN_MEAN;
    for (size_t j = 0; j < n; j++) {
        float total = g->slots[0].buf[j];
        for (int r = 1; r < replicas; r++)
            total += g->slots[r].buf[j];
        if (mean)
            total /= (float)replicas;
        for (int r = 0; r < replicas; r++)
            g->slots[r].buf[j] = total;
    }
}

/* One round of either kind: root -1 reduces with op, root >= 0 broadcasts. */
static int round_trip(struct train_local_group *g, int replica, float *buf, size_t n, enum train_reduce_op op, int root,
                      struct sl_error *err)
{
    int rc = pthread_mutex_lock(&g->lock);
    if (rc != 0)
        return sl_error_sys(err, rc, "pthread_mutex_lock");
    if (g->failure.code != 0) {
        rc = report_failure_locked(g, err);
        goto out_unlock;
    }
    struct sl_error misuse = {0};
    if (replica < 0 || replica >= g->replicas)
        sl_error_set(&misuse, SL_EINVAL, "all-reduce: replica %d is outside 0..%d", replica, g->replicas - 1);
    else if (buf == NULL && n > 0)
        sl_error_set(&misuse, SL_EINVAL, "all-reduce: replica %d passed a NULL buffer for %zu values", replica, n);
    else if (g->slots[replica].present)
        sl_error_set(&misuse, SL_EINVAL, "all-reduce: replica %d joined the same round twice", replica);
    else if (root >= g->replicas)
        sl_error_set(&misuse, SL_EINVAL, "broadcast: root %d is outside 0..%d", root, g->replicas - 1);
    if (misuse.code != 0) {
        fail_locked(g, misuse.code, misuse.msg);
        rc = report_failure_locked(g, err);
        goto out_unlock;
    }

    g->slots[replica] = (struct slot){.buf = buf, .n = n, .op = op, .root = root, .present = 1};
    uint64_t my_generation = g->generation;
    if (++g->arrived == g->replicas) {
        rc = check_round_locked(g, &misuse);
        if (rc != 0) {
            fail_locked(g, rc, misuse.msg);
            rc = report_failure_locked(g, err);
            goto out_unlock;
        }
        reduce_round_locked(g);
        memset(g->slots, 0, (size_t)g->replicas * sizeof *g->slots);
        g->arrived = 0;
        g->generation++;
        pthread_cond_broadcast(&g->changed);
        rc = 0;
        goto out_unlock;
    }
    while (g->generation == my_generation && g->failure.code == 0)
        pthread_cond_wait(&g->changed, &g->lock);
    /* A round that completed before a later abort still delivered. */
    rc = g->generation != my_generation ? 0 : report_failure_locked(g, err);

out_unlock:
    pthread_mutex_unlock(&g->lock);
    return rc;
}

int train_local_all_reduce(struct train_local_group *g, int replica, float *buf, size_t n, enum train_reduce_op op,
                           struct sl_error *err)
{
    return round_trip(g, replica, buf, n, op, -1, err);
}

int train_local_broadcast(struct train_local_group *g, int replica, int root, float *buf, size_t n,
                          struct sl_error *err)
{
    return round_trip(g, replica, buf, n, TRAIN_SUM, root < 0 ? g->replicas : root, err);
}

void train_local_group_abort(struct train_local_group *g, int code, const char *msg)
{
    pthread_mutex_lock(&g->lock);
    fail_locked(g, code, msg);
    pthread_mutex_unlock(&g->lock);
}

int train_local_group_status(struct train_local_group *g)
{
    pthread_mutex_lock(&g->lock);
    int code = g->failure.code;
    pthread_mutex_unlock(&g->lock);
    return code;
}

/* --- the "local" train_coll backend: one member per replica thread --- */

struct local_member {
    struct train_coll base;
    struct train_local_group *g; /* borrowed */
};

static struct local_member *local_of(struct train_coll *c)
{
    return (struct local_member *)c;
}

static int local_coll_all_reduce(struct train_coll *c, float *buf, size_t n, struct sl_error *err)
{
    return train_local_all_reduce(local_of(c)->g, c->rank, buf, n, TRAIN_SUM, err);
}

static int local_coll_broadcast(struct train_coll *c, float *buf, size_t n, int root, struct sl_error *err)
{
    return train_local_broadcast(local_of(c)->g, c->rank, root, buf, n, err);
}

static void local_coll_abort(struct train_coll *c, int code, const char *msg)
{
    train_local_group_abort(local_of(c)->g, code, msg);
}

static void local_coll_destroy(struct train_coll *c)
{
    sl_free(c);
}

static const struct train_coll_ops local_coll_ops = {
    .name = "local",
    .all_reduce = local_coll_all_reduce,
    .broadcast = local_coll_broadcast,
    .abort = local_coll_abort,
    .destroy = local_coll_destroy,
};

int train_local_coll_open(struct train_coll **out, struct train_local_group *g, int replica, struct sl_error *err)
{
    *out = NULL;
    if (replica < 0 || replica >= g->replicas)
        return sl_error_set(err, SL_EINVAL, "local collective: replica %d is outside 0..%d", replica, g->replicas - 1);
    struct local_member *m = sl_calloc(1, sizeof *m);
    if (m == NULL)
        return sl_error_set(err, SL_ENOMEM, "local collective: out of memory");
    m->base = (struct train_coll){.ops = &local_coll_ops, .rank = replica, .size = g->replicas, .mem = TRAIN_COLL_HOST};
    m->g = g;
    *out = &m->base;
    return 0;
}
