/* train_coll_nccl: the "nccl" collective (train_coll.h) and the NCCL
 * communicators under it (train_nccl.h), built only with SLUICE_HAVE_CUDA.
 * One member per GPU replica of every worker (rank w x R + r of W x R),
 * buffers in the replica's device memory.
 *
 * A communicator runs on its cuda device's collective stream
 * (train_device_cuda.h); its all-reduce is what the cuda device table's
 * all_reduce_sum_f32 runs. all_reduce and broadcast both return when the
 * result is in place. NCCL cannot be interrupted from outside, so abort
 * records the failure and the communicator's wait polls it
 * (train_nccl_comm_set_stop): a member waiting for a replica that failed
 * gives up within a poll instead of hanging, and its destroy then aborts
 * the communicator (ncclCommAbort) instead of ncclCommDestroy, whose
 * closing barrier among the ranks of this host peers stuck in a collective
 * would never reach.
 *
 * Errors: every failed NCCL call becomes SL_EDEVICE naming the call, its
 * size and the GPU, then ncclGetErrorString (and ncclGetLastError's detail
 * when there is one).
 */
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "sl_alloc.h"
#include "train_coll.h"
#include "train_device.h"
#include "train_device_cuda.h"
#include "train_nccl.h"

_Static_assert(TRAIN_COLL_ID_BYTES == TRAIN_NCCL_ID_BYTES, "group id size");
_Static_assert(TRAIN_NCCL_ID_BYTES == NCCL_UNIQUE_ID_BYTES, "NCCL unique id size changed");
_Static_assert(sizeof(ncclUniqueId) == NCCL_UNIQUE_ID_BYTES, "ncclUniqueId has padding");

/* ---- the communicators (train_nccl.h) ---- */

struct nccl_comm {
    struct train_comm base; /* its all_reduce_sum_f32: nccl_all_reduce_sum_f32 */
    ncclComm_t nccl;
    struct train_device *dev; /* borrowed, a cuda device */
    int rank;
    int nranks;
    int failed;             /* a collective, or the caller, failed: destroy aborts instead of waiting */
    int (*stop)(void *ctx); /* polled by wait_collective; NULL: never */
    void *stop_ctx;
};

static struct nccl_comm *comm_of(struct train_comm *c)
{
    return (struct nccl_comm *)c;
}

/* SL_EDEVICE "<what>: <ncclGetErrorString(r)> (<ncclGetLastError>)". */
SL_PRINTF(4, 5)
static int nccl_fail(struct sl_error *err, ncclResult_t r, ncclComm_t comm, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    const char *detail = ncclGetLastError(comm);
    if (detail != NULL && detail[0] != '\0')
        return sl_error_set(err, SL_EDEVICE, "%s: %s (%s)", what, ncclGetErrorString(r), detail);
    return sl_error_set(err, SL_EDEVICE, "%s: %s", what, ncclGetErrorString(r));
}

/* Wait for the collective stream while watching the communicator, as NCCL
 * advises: a plain cudaStreamSynchronize would hang forever if a peer died,
 * whereas ncclCommGetAsyncError reports it. */
static int wait_collective(struct nccl_comm *c, const char *call, size_t n, struct sl_error *err)
{
    cudaStream_t s = train__cuda_coll_stream(c->dev);
    for (;;) {
        cudaError_t e = cudaStreamQuery(s);
        if (e == cudaSuccess)
            return 0;
        if (e != cudaErrorNotReady)
            return train__cuda_fail(err, e, "%s(%zu floats) on GPU %d, rank %d of %d: waiting", call, n,
                                    c->dev->ordinal, c->rank, c->nranks);
        ncclResult_t async = ncclSuccess;
        ncclResult_t r = ncclCommGetAsyncError(c->nccl, &async);
        if (r == ncclSuccess && async != ncclSuccess && async != ncclInProgress)
            r = async;
        if (r != ncclSuccess)
            return nccl_fail(err, r, c->nccl, "%s(%zu floats) on GPU %d, rank %d of %d", call, n, c->dev->ordinal,
                             c->rank, c->nranks);
        if (c->stop != NULL && c->stop(c->stop_ctx))
            return sl_error_set(err, SL_EDEVICE,
                                "%s(%zu floats) on GPU %d, rank %d of %d: given up, another replica failed", call, n,
                                c->dev->ordinal, c->rank, c->nranks);
        sched_yield();
    }
}

/* The communicator's all_reduce_sum_f32 (train_device_cuda.h): what the cuda
 * table's all_reduce_sum_f32 runs. */
static int nccl_all_reduce_sum_f32(struct train_comm *comm, float *dev_buf, size_t n, struct sl_error *err)
{
    struct nccl_comm *c = comm_of(comm);
    if (n == 0)
        return 0;
    int rc = train__cuda_make_current(c->dev->ordinal, err);
    if (rc != 0)
        return rc;
    ncclResult_t r = ncclAllReduce(dev_buf, dev_buf, n, ncclFloat, ncclSum, c->nccl, train__cuda_coll_stream(c->dev));
    if (r != ncclSuccess) {
        c->failed = 1;
        return nccl_fail(err, r, c->nccl, "ncclAllReduce(%zu floats) on GPU %d, rank %d of %d", n, c->dev->ordinal,
                         c->rank, c->nranks);
    }
    rc = wait_collective(c, "ncclAllReduce", n, err);
    if (rc != 0)
        c->failed = 1;
    return rc;
}

int train_nccl_broadcast_f32(struct train_comm *comm, float *dev_buf, size_t n, int root, struct sl_error *err)
{
    struct nccl_comm *c = comm_of(comm);
    if (root < 0 || root >= c->nranks)
        return sl_error_set(err, SL_EINVAL, "ncclBroadcast on GPU %d: root %d of %d is out of range", c->dev->ordinal,
                            root, c->nranks);
    if (n == 0)
        return 0;
    int rc = train__cuda_make_current(c->dev->ordinal, err);
    if (rc != 0)
        return rc;
    ncclResult_t r = ncclBroadcast(dev_buf, dev_buf, n, ncclFloat, root, c->nccl, train__cuda_coll_stream(c->dev));
    if (r != ncclSuccess) {
        c->failed = 1;
        return nccl_fail(err, r, c->nccl, "ncclBroadcast(%zu floats from rank %d) on GPU %d, rank %d of %d", n, root,
                         c->dev->ordinal, c->rank, c->nranks);
    }
    rc = wait_collective(c, "ncclBroadcast", n, err);
    if (rc != 0)
        c->failed = 1;
    return rc;
}

int train_nccl_unique_id(char out[TRAIN_NCCL_ID_BYTES], struct sl_error *err)
{
    ncclUniqueId id;
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess)
        return nccl_fail(err, r, NULL, "ncclGetUniqueId");
    memcpy(out, &id, sizeof id);
    return 0;
}

int train_nccl_comm_init(struct train_comm **out, int nranks, int rank, const char id[TRAIN_NCCL_ID_BYTES],
                         struct train_device *dev, struct sl_error *err)
{
    *out = NULL;
    if (dev == NULL || dev->ops != &train__device_cuda)
        return sl_error_set(err, SL_EINVAL, "ncclCommInitRank: the device is not a cuda device");
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return sl_error_set(err, SL_EINVAL, "ncclCommInitRank on GPU %d: rank %d of %d is out of range", dev->ordinal,
                            rank, nranks);
    struct nccl_comm *c = sl_calloc(1, sizeof *c);
    if (c == NULL)
        return sl_error_set(err, SL_ENOMEM, "ncclCommInitRank on GPU %d: out of memory", dev->ordinal);
    c->base.all_reduce_sum_f32 = nccl_all_reduce_sum_f32;
    c->dev = dev;
    c->rank = rank;
    c->nranks = nranks;
    int rc = train__cuda_make_current(dev->ordinal, err);
    if (rc != 0)
        goto out_free_comm;
    ncclUniqueId uid;
    memcpy(&uid, id, sizeof uid);
    ncclResult_t r = ncclCommInitRank(&c->nccl, nranks, uid, rank);
    if (r != ncclSuccess) {
        rc = nccl_fail(err, r, NULL, "ncclCommInitRank(rank %d of %d) on GPU %d", rank, nranks, dev->ordinal);
        goto out_free_comm;
    }
    *out = &c->base;
    return 0;

out_free_comm:
    sl_free(c);
    return rc;
}

void train_nccl_comm_set_stop(struct train_comm *comm, int (*stop)(void *ctx), void *ctx)
{
    if (comm != NULL) {
        comm_of(comm)->stop = stop;
        comm_of(comm)->stop_ctx = ctx;
    }
}

void train_nccl_comm_set_failed(struct train_comm *comm)
{
    if (comm != NULL)
        comm_of(comm)->failed = 1;
}

void train_nccl_comm_destroy(struct train_comm *comm)
{
    if (comm == NULL)
        return;
    struct nccl_comm *c = comm_of(comm);
    if (cudaSetDevice(c->dev->ordinal) != cudaSuccess)
        (void)cudaGetLastError();
    /* After a failed collective the kernels may still wait for a peer that
     * never comes; ncclCommDestroy would wait with them, ncclCommAbort
     * stops them. */
    if (c->failed)
        (void)ncclCommAbort(c->nccl);
    else
        (void)ncclCommDestroy(c->nccl);
    sl_free(c);
}

/* ---- the "nccl" collective (train_coll.h) ---- */

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
