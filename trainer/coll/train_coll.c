/* train_coll: the calls through the ops table, the failure record the
 * backends share, and the "composed" collective.
 *
 * The composed member is three steps over two borrowed collectives: the
 * worker's local group sums (replica order), replica 0 sums the result
 * across workers (the across collective's order), and the local group
 * hands replica 0's buffer back to every replica. Every replica of every
 * worker therefore holds the bits replica 0 of its worker received, which
 * the across collective made equal on every worker. With one worker the
 * last two steps are skipped; with one replica the local steps are. A
 * failure in a step is returned as it is: the caller aborts the group,
 * which wakes the replicas waiting in the local broadcast.
 */
#include "train_coll.h"

#include <stdio.h>

#include "sl_alloc.h"

int train_coll_all_reduce(struct train_coll *c, float *buf, size_t n, struct sl_error *err)
{
    return c->ops->all_reduce(c, buf, n, err);
}

int train_coll_broadcast(struct train_coll *c, float *buf, size_t n, int root, struct sl_error *err)
{
    if (root < 0 || root >= c->size)
        return sl_error_set(err, SL_EINVAL, "%s broadcast: root %d is outside 0..%d", c->ops->name, root, c->size - 1);
    return c->ops->broadcast(c, buf, n, root, err);
}

void train_coll_abort(struct train_coll *c, int code, const char *msg)
{
    if (c != NULL)
        c->ops->abort(c, code, msg);
}

void train_coll_destroy(struct train_coll *c)
{
    if (c != NULL)
        c->ops->destroy(c);
}

void train__coll_fail(struct train__coll_failure *f, int code, const char *msg)
{
    int expected = 0;
    if (!__atomic_compare_exchange_n(&f->claimed, &expected, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return;
    snprintf(f->msg, sizeof f->msg, "%s", msg != NULL ? msg : "");
    __atomic_store_n(&f->code, code < 0 ? code : SL_EINVAL, __ATOMIC_RELEASE);
}

int train__coll_failed(struct train__coll_failure *f, struct sl_error *err)
{
    int code = __atomic_load_n(&f->code, __ATOMIC_ACQUIRE);
    if (code == 0)
        return 0;
    return sl_error_set(err, code, "%s", f->msg);
}

/* --- composed --- */

struct composed {
    struct train_coll base;
    struct train_coll *local;  /* borrowed; NULL when R == 1 */
    struct train_coll *across; /* borrowed; replica 0 only, NULL when W == 1 */
    int replica, replicas, worker, workers;
};

static struct composed *composed_of(struct train_coll *c)
{
    return (struct composed *)c;
}

static int composed_all_reduce(struct train_coll *c, float *buf, size_t n, struct sl_error *err)
{
    struct composed *m = composed_of(c);
    int rc = 0;
    if (m->local != NULL && (rc = train_coll_all_reduce(m->local, buf, n, err)) != 0)
        return rc;
    if (m->workers == 1)
        return 0;
    if (m->across != NULL && (rc = train_coll_all_reduce(m->across, buf, n, err)) != 0)
        return rc;
    return m->local != NULL ? train_coll_broadcast(m->local, buf, n, 0, err) : 0;
}

static int composed_broadcast(struct train_coll *c, float *buf, size_t n, int root, struct sl_error *err)
{
    struct composed *m = composed_of(c);
    int rw = root / m->replicas, rr = root % m->replicas;
    int rc = 0;
    if (m->workers == 1)
        return m->local != NULL ? train_coll_broadcast(m->local, buf, n, rr, err) : 0;
    /* the root's buffer to its worker's replica 0, across, then to every replica */
    if (m->worker == rw && rr != 0 && (rc = train_coll_broadcast(m->local, buf, n, rr, err)) != 0)
        return rc;
    if (m->across != NULL && (rc = train_coll_broadcast(m->across, buf, n, rw, err)) != 0)
        return rc;
    return m->local != NULL ? train_coll_broadcast(m->local, buf, n, 0, err) : 0;
}

static void composed_abort(struct train_coll *c, int code, const char *msg)
{
    struct composed *m = composed_of(c);
    train_coll_abort(m->local, code, msg);
    train_coll_abort(m->across, code, msg);
}

static void composed_destroy(struct train_coll *c)
{
    sl_free(c);
}

static const struct train_coll_ops composed_ops = {
    .name = "composed",
    .all_reduce = composed_all_reduce,
    .broadcast = composed_broadcast,
    .abort = composed_abort,
    .destroy = composed_destroy,
};

int train_coll_compose(struct train_coll **out, struct train_coll *local, struct train_coll *across, int replica,
                       int replicas, int worker, int workers, struct sl_error *err)
{
    *out = NULL;
    int leader = replica == 0 && workers > 1;
    if (replicas < 1 || workers < 1 || replica < 0 || replica >= replicas || worker < 0 || worker >= workers ||
        (local == NULL) != (replicas == 1) ||
        (local != NULL && (local->rank != replica || local->size != replicas || local->mem != TRAIN_COLL_HOST)) ||
        (across != NULL) != leader ||
        (across != NULL && (across->rank != worker || across->size != workers || across->mem != TRAIN_COLL_HOST)))
        return sl_error_set(err, SL_EINVAL,
                            "composed collective: replica %d of %d on worker %d of %d does not fit "
                            "its local group (%s) and collective across workers (%s)",
                            replica, replicas, worker, workers, local != NULL ? local->ops->name : "none",
                            across != NULL ? across->ops->name : "none");
    struct composed *m = sl_calloc(1, sizeof *m);
    if (m == NULL)
        return sl_error_set(err, SL_ENOMEM, "composed collective: out of memory");
    m->base = (struct train_coll){
        .ops = &composed_ops, .rank = worker * replicas + replica, .size = workers * replicas, .mem = TRAIN_COLL_HOST};
    m->local = local;
    m->across = across;
    m->replica = replica;
    m->replicas = replicas;
    m->worker = worker;
    m->workers = workers;
    *out = &m->base;
    return 0;
}
