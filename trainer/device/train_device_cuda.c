/* train_device_cuda: GPUs through the CUDA runtime API and NCCL, in plain C
 * (no kernels, so no nvcc). Each open device owns three non-blocking
 * streams: the two copy streams of the ops table (double buffering: the
 * next batch is copied on one while the step reads the other) and a
 * collective stream, so an all-reduce never queues behind a prefetch copy.
 *
 * The CUDA current device is per thread, so every call that touches a
 * device first makes it current (cheap when it already is): a device may
 * then move between threads between calls.
 *
 * Errors: every failed CUDA or NCCL call becomes SL_EDEVICE naming the
 * call, its size and the GPU, then cudaGetErrorString / ncclGetErrorString
 * (and ncclGetLastError's detail when there is one). After a failed CUDA
 * call the runtime's last error is cleared, so an out-of-memory does not
 * surface again from an unrelated later call.
 *
 * With no driver (this code runs on GPU-less build machines) the runtime
 * reports cudaErrorInsufficientDriver or cudaErrorNoDevice from
 * cudaGetDeviceCount; count() turns that into 0. */
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "sl_alloc.h"
#include "train_cuda_inc.h"
#include "train_device_int.h"
#include "train_nccl.h"

_Static_assert(TRAIN_NCCL_ID_BYTES == NCCL_UNIQUE_ID_BYTES, "NCCL unique id size changed");
_Static_assert(sizeof(ncclUniqueId) == NCCL_UNIQUE_ID_BYTES, "ncclUniqueId has padding");

/* The collective stream's index in streams[]. */
#define COLL_STREAM TRAIN_DEVICE_STREAMS

struct cuda_device {
    struct train_device base;
    cudaStream_t streams[TRAIN_DEVICE_STREAMS + 1]; /* copy 0, copy 1, collective */
};

struct train_comm {
    ncclComm_t nccl;
    struct cuda_device *dev; /* borrowed */
    int rank;
    int nranks;
    int failed; /* a collective, or the caller, failed: destroy aborts instead of waiting */
    int (*stop)(void *ctx); /* polled by wait_collective; NULL: never */
    void *stop_ctx;
};

static struct cuda_device *cuda_of(struct train_device *d)
{
    return (struct cuda_device *)d;
}

/* SL_EDEVICE "<what>: <cudaGetErrorString(e)>", clearing the runtime's
 * last error. */
SL_PRINTF(3, 4)
static int cuda_fail(struct sl_error *err, cudaError_t e, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    (void)cudaGetLastError();
    return sl_error_set(err, SL_EDEVICE, "%s: %s", what, cudaGetErrorString(e));
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

static int make_current(int ordinal, struct sl_error *err)
{
    cudaError_t e = cudaSetDevice(ordinal);
    if (e != cudaSuccess)
        return cuda_fail(err, e, "cudaSetDevice(%d)", ordinal);
    return 0;
}

static int cuda_count(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

/* 0 when ordinal names a present GPU. */
static int check_ordinal(int ordinal, struct sl_error *err)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess)
        return cuda_fail(err, e, "GPU %d: cudaGetDeviceCount", ordinal);
    if (ordinal < 0 || ordinal >= n)
        return sl_error_set(err, SL_EINVAL, "GPU %d: no such device (%d found)", ordinal, n);
    return 0;
}

static int cuda_describe(int ordinal, char *buf, size_t n, struct sl_error *err)
{
    int rc = check_ordinal(ordinal, err);
    if (rc != 0)
        return rc;
    struct cudaDeviceProp prop;
    cudaError_t e = cudaGetDeviceProperties(&prop, ordinal);
    if (e != cudaSuccess)
        return cuda_fail(err, e, "cudaGetDeviceProperties on GPU %d", ordinal);
    if (n > 0)
        snprintf(buf, n, "GPU %d: %.*s (%.1f GiB, compute %d.%d)", ordinal, (int)sizeof prop.name, prop.name,
                 (double)prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), prop.major, prop.minor);
    return 0;
}

static void cuda_close(struct train_device *d)
{
    if (d == NULL)
        return;
    struct cuda_device *c = cuda_of(d);
    /* Best effort: close has no error channel, and the device is going. */
    if (cudaSetDevice(d->ordinal) == cudaSuccess) {
        for (int i = 0; i <= COLL_STREAM; i++) {
            if (c->streams[i] == NULL)
                continue;
            (void)cudaStreamSynchronize(c->streams[i]);
            (void)cudaStreamDestroy(c->streams[i]);
        }
    }
    (void)cudaGetLastError();
    sl_free(c);
}

static int cuda_open(struct train_device **out, int ordinal, struct sl_error *err)
{
    *out = NULL;
    int rc = check_ordinal(ordinal, err);
    if (rc != 0)
        return rc;
    struct cuda_device *c = sl_calloc(1, sizeof *c);
    if (c == NULL)
        return sl_error_set(err, SL_ENOMEM, "GPU %d: open: out of memory", ordinal);
    c->base.ops = &train__device_cuda;
    c->base.ordinal = ordinal;
    rc = make_current(ordinal, err);
    if (rc != 0)
        goto out_close;
    for (int i = 0; i <= COLL_STREAM; i++) {
        /* Non-blocking: our streams never wait on the legacy default stream. */
        cudaError_t e = cudaStreamCreateWithFlags(&c->streams[i], cudaStreamNonBlocking);
        if (e != cudaSuccess) {
            c->streams[i] = NULL;
            rc = cuda_fail(err, e, "cudaStreamCreateWithFlags(stream %d) on GPU %d", i, ordinal);
            goto out_close;
        }
    }
    *out = &c->base;
    return 0;

out_close:
    cuda_close(&c->base);
    return rc;
}

static int cuda_alloc_pinned(struct train_device *d, size_t n, void **host, struct sl_error *err)
{
    *host = NULL;
    if (n == 0)
        return sl_error_set(err, SL_EINVAL, "cudaHostAlloc(0 bytes) for GPU %d: size must be > 0", d->ordinal);
    int rc = make_current(d->ordinal, err);
    if (rc != 0)
        return rc;
    void *p = NULL;
    cudaError_t e = cudaHostAlloc(&p, n, cudaHostAllocDefault);
    if (e != cudaSuccess)
        return cuda_fail(err, e, "cudaHostAlloc(%zu bytes) for GPU %d", n, d->ordinal);
    *host = p;
    return 0;
}

static void cuda_free_pinned(struct train_device *d, void *host)
{
    if (host == NULL)
        return;
    if (cudaFreeHost(host) != cudaSuccess)
        (void)cudaGetLastError();
}

static int cuda_alloc_device(struct train_device *d, size_t n, void **dev, struct sl_error *err)
{
    *dev = NULL;
    if (n == 0)
        return sl_error_set(err, SL_EINVAL, "cudaMalloc(0 bytes) on GPU %d: size must be > 0", d->ordinal);
    int rc = make_current(d->ordinal, err);
    if (rc != 0)
        return rc;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, n);
    if (e != cudaSuccess)
        return cuda_fail(err, e, "cudaMalloc(%zu bytes) on GPU %d", n, d->ordinal);
    *dev = p;
    return 0;
}

static void cuda_free_device(struct train_device *d, void *dev)
{
    if (dev == NULL)
        return;
    if (cudaSetDevice(d->ordinal) != cudaSuccess || cudaFree(dev) != cudaSuccess)
        (void)cudaGetLastError();
}

static int cuda_copy_h2d_async(struct train_device *d, void *dev, const void *host, size_t n, int stream,
                               struct sl_error *err)
{
    int rc = train__device_check_stream(d, "copy_h2d_async", stream, err);
    if (rc != 0)
        return rc;
    if (n == 0)
        return 0;
    rc = make_current(d->ordinal, err);
    if (rc != 0)
        return rc;
    cudaError_t e = cudaMemcpyAsync(dev, host, n, cudaMemcpyHostToDevice, cuda_of(d)->streams[stream]);
    if (e != cudaSuccess)
        return cuda_fail(err, e, "cudaMemcpyAsync(%zu bytes, host to device, stream %d) on GPU %d", n, stream,
                         d->ordinal);
    return 0;
}

static int cuda_sync(struct train_device *d, int stream, struct sl_error *err)
{
    int rc = train__device_check_stream(d, "sync", stream, err);
    if (rc != 0)
        return rc;
    rc = make_current(d->ordinal, err);
    if (rc != 0)
        return rc;
    cudaError_t e = cudaStreamSynchronize(cuda_of(d)->streams[stream]);
    if (e != cudaSuccess)
        return cuda_fail(err, e, "cudaStreamSynchronize(stream %d) on GPU %d", stream, d->ordinal);
    return 0;
}

/* Wait for the collective stream while watching the communicator, as NCCL
 * advises: a plain cudaStreamSynchronize would hang forever if a peer died,
 * whereas ncclCommGetAsyncError reports it. */
static int wait_collective(struct train_comm *c, const char *call, size_t n, struct sl_error *err)
{
    cudaStream_t s = c->dev->streams[COLL_STREAM];
    for (;;) {
        cudaError_t e = cudaStreamQuery(s);
        if (e == cudaSuccess)
            return 0;
        if (e != cudaErrorNotReady)
            return cuda_fail(err, e, "%s(%zu floats) on GPU %d, rank %d of %d: waiting", call, n,
                             c->dev->base.ordinal, c->rank, c->nranks);
        ncclResult_t async = ncclSuccess;
        ncclResult_t r = ncclCommGetAsyncError(c->nccl, &async);
        if (r == ncclSuccess && async != ncclSuccess && async != ncclInProgress)
            r = async;
        if (r != ncclSuccess)
            return nccl_fail(err, r, c->nccl, "%s(%zu floats) on GPU %d, rank %d of %d", call, n,
                             c->dev->base.ordinal, c->rank, c->nranks);
        if (c->stop != NULL && c->stop(c->stop_ctx))
            return sl_error_set(err, SL_EDEVICE,
                                "%s(%zu floats) on GPU %d, rank %d of %d: given up, another replica failed", call,
                                n, c->dev->base.ordinal, c->rank, c->nranks);
        sched_yield();
    }
}

static int cuda_all_reduce_sum_f32(struct train_comm *c, float *dev_buf, size_t n, struct sl_error *err)
{
    if (n == 0)
        return 0;
    int rc = make_current(c->dev->base.ordinal, err);
    if (rc != 0)
        return rc;
    ncclResult_t r = ncclAllReduce(dev_buf, dev_buf, n, ncclFloat, ncclSum, c->nccl, c->dev->streams[COLL_STREAM]);
    if (r != ncclSuccess) {
        c->failed = 1;
        return nccl_fail(err, r, c->nccl, "ncclAllReduce(%zu floats) on GPU %d, rank %d of %d", n,
                         c->dev->base.ordinal, c->rank, c->nranks);
    }
    rc = wait_collective(c, "ncclAllReduce", n, err);
    if (rc != 0)
        c->failed = 1;
    return rc;
}

int train_nccl_broadcast_f32(struct train_comm *c, float *dev_buf, size_t n, int root, struct sl_error *err)
{
    if (root < 0 || root >= c->nranks)
        return sl_error_set(err, SL_EINVAL, "ncclBroadcast on GPU %d: root %d of %d is out of range",
                            c->dev->base.ordinal, root, c->nranks);
    if (n == 0)
        return 0;
    int rc = make_current(c->dev->base.ordinal, err);
    if (rc != 0)
        return rc;
    ncclResult_t r = ncclBroadcast(dev_buf, dev_buf, n, ncclFloat, root, c->nccl, c->dev->streams[COLL_STREAM]);
    if (r != ncclSuccess) {
        c->failed = 1;
        return nccl_fail(err, r, c->nccl, "ncclBroadcast(%zu floats from rank %d) on GPU %d, rank %d of %d", n, root,
                         c->dev->base.ordinal, c->rank, c->nranks);
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
        return sl_error_set(err, SL_EINVAL, "ncclCommInitRank on GPU %d: rank %d of %d is out of range",
                            dev->ordinal, rank, nranks);
    struct train_comm *c = sl_calloc(1, sizeof *c);
    if (c == NULL)
        return sl_error_set(err, SL_ENOMEM, "ncclCommInitRank on GPU %d: out of memory", dev->ordinal);
    c->dev = cuda_of(dev);
    c->rank = rank;
    c->nranks = nranks;
    int rc = make_current(dev->ordinal, err);
    if (rc != 0)
        goto out_free_comm;
    ncclUniqueId uid;
    memcpy(&uid, id, sizeof uid);
    ncclResult_t r = ncclCommInitRank(&c->nccl, nranks, uid, rank);
    if (r != ncclSuccess) {
        rc = nccl_fail(err, r, NULL, "ncclCommInitRank(rank %d of %d) on GPU %d", rank, nranks, dev->ordinal);
        goto out_free_comm;
    }
    *out = c;
    return 0;

out_free_comm:
    sl_free(c);
    return rc;
}

void train_nccl_comm_set_stop(struct train_comm *c, int (*stop)(void *ctx), void *ctx)
{
    if (c != NULL) {
        c->stop = stop;
        c->stop_ctx = ctx;
    }
}

void train_nccl_comm_set_failed(struct train_comm *c)
{
    if (c != NULL)
        c->failed = 1;
}

void train_nccl_comm_destroy(struct train_comm *c)
{
    if (c == NULL)
        return;
    if (cudaSetDevice(c->dev->base.ordinal) != cudaSuccess)
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

const struct train_device_ops train__device_cuda = {
    .name = "cuda",
    .count = cuda_count,
    .describe = cuda_describe,
    .open = cuda_open,
    .alloc_pinned = cuda_alloc_pinned,
    .free_pinned = cuda_free_pinned,
    .alloc_device = cuda_alloc_device,
    .free_device = cuda_free_device,
    .copy_h2d_async = cuda_copy_h2d_async,
    .sync = cuda_sync,
    .all_reduce_sum_f32 = cuda_all_reduce_sum_f32,
    .close = cuda_close,
};
