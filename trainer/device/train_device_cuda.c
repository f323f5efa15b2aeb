/* train_device_cuda: GPUs through the CUDA runtime API, in plain C
 * (no kernels, so no nvcc). Each open device owns three non-blocking
 * streams: the two copy streams of the ops table (double buffering: the
 * next batch is copied on one while the step reads the other) and a
 * collective stream, so an all-reduce never queues behind a prefetch copy.
 *
 * The CUDA current device is per thread, so every call that touches a
 * device first makes it current (cheap when it already is): a device may
 * then move between threads between calls.
 *
 * The NCCL communicators that use the collective stream are the "nccl"
 * collective's (coll/train_coll_nccl.c, train_nccl.h); this table's
 * all_reduce_sum_f32 hands the call to the communicator it is given.
 *
 * Errors: every failed CUDA call becomes SL_EDEVICE naming the call, its
 * size and the GPU, then cudaGetErrorString. After a failed CUDA
 * call the runtime's last error is cleared, so an out-of-memory does not
 * surface again from an unrelated later call.
 *
 * With no driver (this code runs on GPU-less build machines) the runtime
 * reports cudaErrorInsufficientDriver or cudaErrorNoDevice from
 * cudaGetDeviceCount; count() turns that into 0. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "sl_alloc.h"
#include "train_device_cuda.h"

/* The collective stream's index in streams[]. */
#define COLL_STREAM TRAIN_DEVICE_STREAMS

struct cuda_device {
    struct train_device base;
    cudaStream_t streams[TRAIN_DEVICE_STREAMS + 1]; /* copy 0, copy 1, collective */
};

static struct cuda_device *cuda_of(struct train_device *d)
{
    return (struct cuda_device *)d;
}

int train__cuda_fail(struct sl_error *err, cudaError_t e, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    (void)cudaGetLastError();
    return sl_error_set(err, SL_EDEVICE, "%s: %s", what, cudaGetErrorString(e));
}

int train__cuda_make_current(int ordinal, struct sl_error *err)
{
    cudaError_t e = cudaSetDevice(ordinal);
    if (e != cudaSuccess)
        return train__cuda_fail(err, e, "cudaSetDevice(%d)", ordinal);
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
        return train__cuda_fail(err, e, "GPU %d: cudaGetDeviceCount", ordinal);
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
        return train__cuda_fail(err, e, "cudaGetDeviceProperties on GPU %d", ordinal);
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
    rc = train__cuda_make_current(ordinal, err);
    if (rc != 0)
        goto out_close;
    for (int i = 0; i <= COLL_STREAM; i++) {
        /* Non-blocking: our streams never wait on the legacy default stream. */
        cudaError_t e = cudaStreamCreateWithFlags(&c->streams[i], cudaStreamNonBlocking);
        if (e != cudaSuccess) {
            c->streams[i] = NULL;
            rc = train__cuda_fail(err, e, "cudaStreamCreateWithFlags(stream %d) on GPU %d", i, ordinal);
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
    int rc = train__cuda_make_current(d->ordinal, err);
    if (rc != 0)
        return rc;
    void *p = NULL;
    cudaError_t e = cudaHostAlloc(&p, n, cudaHostAllocDefault);
    if (e != cudaSuccess)
        return train__cuda_fail(err, e, "cudaHostAlloc(%zu bytes) for GPU %d", n, d->ordinal);
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
    int rc = train__cuda_make_current(d->ordinal, err);
    if (rc != 0)
        return rc;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, n);
    if (e != cudaSuccess)
        return train__cuda_fail(err, e, "cudaMalloc(%zu bytes) on GPU %d", n, d->ordinal);
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
    rc = train__cuda_make_current(d->ordinal, err);
    if (rc != 0)
        return rc;
    cudaError_t e = cudaMemcpyAsync(dev, host, n, cudaMemcpyHostToDevice, cuda_of(d)->streams[stream]);
    if (e != cudaSuccess)
        return train__cuda_fail(err, e, "cudaMemcpyAsync(%zu bytes, host to device, stream %d) on GPU %d", n, stream,
                                d->ordinal);
    return 0;
}

static int cuda_sync(struct train_device *d, int stream, struct sl_error *err)
{
    int rc = train__device_check_stream(d, "sync", stream, err);
    if (rc != 0)
        return rc;
    rc = train__cuda_make_current(d->ordinal, err);
    if (rc != 0)
        return rc;
    cudaError_t e = cudaStreamSynchronize(cuda_of(d)->streams[stream]);
    if (e != cudaSuccess)
        return train__cuda_fail(err, e, "cudaStreamSynchronize(stream %d) on GPU %d", stream, d->ordinal);
    return 0;
}

cudaStream_t train__cuda_coll_stream(struct train_device *d)
{
    return cuda_of(d)->streams[COLL_STREAM];
}

static int cuda_all_reduce_sum_f32(struct train_comm *c, float *dev_buf, size_t n, struct sl_error *err)
{
    return c->all_reduce_sum_f32(c, dev_buf, n, err);
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
