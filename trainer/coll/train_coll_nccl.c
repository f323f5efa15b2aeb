/* train_coll_nccl: the "nccl" collective (train_coll.h) over the cuda
 * backend's communicators (train_nccl.h), built only with SLUICE_HAVE_CUDA.
 * One member per GPU replica of every worker (rank w x R + r of W x R),
 * buffers in the replica's device memory.
 *
 * all_reduce is the device table's all_reduce_sum_f32 and broadcast
 * train_nccl_broadcast_f32, both on the device's collective stream and both
 * returning when the result is in place. NCCL cannot be interrupted from
 * outside, so abort records the failure and the communicator's wait polls
 * it (train_nccl_comm_set_stop): a member waiting for a replica that failed
 * gives up within a poll instead of hanging, and its destroy then aborts
 * the communicator (ncclCommAbort) instead of ncclCommDestroy, whose
 * closing barrier among the ranks of this host peers stuck in a collective
 * would never reach.
 */
#include "sl_alloc.h"
#include "train_coll.h"
#include "train_device.h"
#include "train_nccl.h"

_Static_assert(TRAIN_COLL_ID_BYTES == TRAIN_NCCL_ID_BYTES, "group id size");

struct nccl_member {
    struct train_coll base;
    const struct train_device_ops *ops; /* the device's: its all_reduce_sum_f32 */
    struct train_comm *comm;
    struct train__coll_failure aborted;
};

static struct nccl_member *nccl_of(struct train_coll *c)
{
    return (struct nccl_member *)c;
}

/* train_nccl_comm_set_stop's poll: aborted from any thread */
static int stopped(void *ctx)
{
    struct nccl_member *m = ctx;
    return __atomic_load_n(&m->aborted.code, __ATOMIC_ACQUIRE) != 0;
}

static int nccl_all_reduce(struct train_coll *c, float *buf, size_t n, struct sl_error *err)
{
    struct nccl_member *m = nccl_of(c);
    int rc = train__coll_failed(&m->aborted, err);
    return rc != 0 ? rc : m->ops->all_reduce_sum_f32(m->comm, buf, n, err);
}

static int nccl_broadcast(struct train_coll *c, float *buf, size_t n, int root, struct sl_error *err)
{
    struct nccl_member *m = nccl_of(c);
    int rc = train__coll_failed(&m->aborted, err);
    return rc != 0 ? rc : train_nccl_broadcast_f32(m->comm, buf, n, root, err);
}

static void nccl_abort(struct train_coll *c, int code, const char *msg)
{
    train__coll_fail(&nccl_of(c)->aborted, code, msg);
}

static void nccl_destroy(struct train_coll *c)
{
    struct nccl_member *m = nccl_of(c);
    if (stopped(m))
        train_nccl_comm_set_failed(m->comm);
    train_nccl_comm_destroy(m->comm);
    sl_free(m);
}

static const struct train_coll_ops nccl_ops = {
    .name = "nccl",
    .all_reduce = nccl_all_reduce,
    .broadcast = nccl_broadcast,
    .abort = nccl_abort,
    .destroy = nccl_destroy,
};

static int nccl_group_id(char out[TRAIN_COLL_ID_BYTES], struct sl_error *err)
{
    return train_nccl_unique_id(out, err);
}

static int nccl_open(struct train_coll **out, struct train_device *dev, int rank, int size,
                     const char id[TRAIN_COLL_ID_BYTES], struct sl_error *err)
{
    *out = NULL;
    struct nccl_member *m = sl_calloc(1, sizeof *m);
    if (m == NULL)
        return sl_error_set(err, SL_ENOMEM, "nccl collective: out of memory");
    int rc = train_nccl_comm_init(&m->comm, size, rank, id, dev, err);
    if (rc != 0) {
        sl_free(m);
        return rc;
    }
    train_nccl_comm_set_stop(m->comm, stopped, m);
    m->base = (struct train_coll){.ops = &nccl_ops, .rank = rank, .size = size, .mem = TRAIN_COLL_DEVICE};
    m->ops = train_device_ops_of(dev);
    *out = &m->base;
    return 0;
}

const struct train_coll_device_ops train__coll_nccl = {
    .name = "nccl",
    .group_id = nccl_group_id,
    .open = nccl_open,
};
