/* train_device_cpu: the host as a device, so CPU replicas run the same
 * staging code as GPUs. "Pinned" and "device" memory are both ordinary heap
 * memory from sl_malloc (so tests can make an allocation fail), aligned to
 * TRAIN_DEVICE_ALIGN by over-allocating and keeping the raw pointer just
 * below the aligned block. Copies are memcpy, done before copy_h2d_async
 * returns, so sync has nothing to wait for; the stream argument is still
 * checked so that code tested on the CPU is correct on a GPU.
 *
 * There is no all-reduce member: collectives among CPU replicas belong to
 * the CPU collectives, not to a device. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sl_alloc.h"
#include "train_device_int.h"

struct cpu_device {
    struct train_device base;
};

static int cpu_count(void)
{
    return 1;
}

static int cpu_describe(int ordinal, char *buf, size_t n, struct sl_error *err)
{
    if (ordinal < 0)
        return sl_error_set(err, SL_EINVAL, "cpu %d: no such device (expected an ordinal >= 0)", ordinal);
    long pages = sysconf(_SC_PHYS_PAGES);
    long page = sysconf(_SC_PAGESIZE);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (n == 0)
        return 0;
    if (pages > 0 && page > 0)
        snprintf(buf, n, "cpu %d: host (%ld CPUs, %.1f GiB)", ordinal, cpus,
                 (double)pages * (double)page / (1024.0 * 1024.0 * 1024.0));
    else
        snprintf(buf, n, "cpu %d: host (%ld CPUs)", ordinal, cpus);
    return 0;
}

static int cpu_open(struct train_device **out, int ordinal, struct sl_error *err)
{
    *out = NULL;
    if (ordinal < 0)
        return sl_error_set(err, SL_EINVAL, "cpu %d: no such device (expected an ordinal >= 0)", ordinal);
    struct cpu_device *c = sl_calloc(1, sizeof *c);
    if (c == NULL)
        return sl_error_set(err, SL_ENOMEM, "cpu %d: open: out of memory", ordinal);
    c->base.ops = &train__device_cpu;
    c->base.ordinal = ordinal;
    *out = &c->base;
    return 0;
}

/* n bytes aligned to TRAIN_DEVICE_ALIGN; the pointer sl_malloc returned is
 * stored in the word just below the block. */
static int aligned_alloc_sl(struct train_device *d, const char *call, size_t n, void **out, struct sl_error *err)
{
    *out = NULL;
    if (n == 0)
        return sl_error_set(err, SL_EINVAL, "%s(0 bytes) on cpu %d: size must be > 0", call, d->ordinal);
    const size_t extra = TRAIN_DEVICE_ALIGN + sizeof(void *);
    if (n > SIZE_MAX - extra)
        return sl_error_set(err, SL_ENOMEM, "%s(%zu bytes) on cpu %d: out of memory", call, n, d->ordinal);
    unsigned char *raw = sl_malloc(n + extra);
    if (raw == NULL)
        return sl_error_set(err, SL_ENOMEM, "%s(%zu bytes) on cpu %d: out of memory", call, n, d->ordinal);
    uintptr_t p = ((uintptr_t)raw + sizeof(void *) + TRAIN_DEVICE_ALIGN - 1) & ~(uintptr_t)(TRAIN_DEVICE_ALIGN - 1);
    unsigned char *block = raw + (p - (uintptr_t)raw);
    memcpy(block - sizeof(void *), &raw, sizeof raw);
    *out = block;
    return 0;
}

static void aligned_free_sl(void *block)
{
    if (block == NULL)
        return;
    void *raw;
    memcpy(&raw, (unsigned char *)block - sizeof(void *), sizeof raw);
    sl_free(raw);
}

static int cpu_alloc_pinned(struct train_device *d, size_t n, void **host, struct sl_error *err)
{
    return aligned_alloc_sl(d, "alloc_pinned", n, host, err);
}

static void cpu_free_pinned(struct train_device *d, void *host)
{
    aligned_free_sl(host);
}

static int cpu_alloc_device(struct train_device *d, size_t n, void **dev, struct sl_error *err)
{
    return aligned_alloc_sl(d, "alloc_device", n, dev, err);
}

static void cpu_free_device(struct train_device *d, void *dev)
{
    aligned_free_sl(dev);
}

static int cpu_copy_h2d_async(struct train_device *d, void *dev, const void *host, size_t n, int stream,
                              struct sl_error *err)
{
    int rc = train__device_check_stream(d, "copy_h2d_async", stream, err);
    if (rc != 0)
        return rc;
    if (n > 0)
        memcpy(dev, host, n);
    return 0;
}

static int cpu_sync(struct train_device *d, int stream, struct sl_error *err)
{
    return train__device_check_stream(d, "sync", stream, err);
}

static void cpu_close(struct train_device *d)
{
    if (d == NULL)
        return;
    sl_free((struct cpu_device *)d);
}

const struct train_device_ops train__device_cpu = {
    .name = "cpu",
    .count = cpu_count,
    .describe = cpu_describe,
    .open = cpu_open,
    .alloc_pinned = cpu_alloc_pinned,
    .free_pinned = cpu_free_pinned,
    .alloc_device = cpu_alloc_device,
    .free_device = cpu_free_device,
    .copy_h2d_async = cpu_copy_h2d_async,
    .sync = cpu_sync,
    .all_reduce_sum_f32 = NULL,
    .close = cpu_close,
};
