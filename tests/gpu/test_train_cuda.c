/* test_train_cuda: the cuda device backend on GPU 0, and a host-to-device
 * bandwidth figure. A plain program for ctest (label gpu): exit 0 when every
 * check passes, 1 on the first failure, 77 (skipped) when there is no GPU
 * or no driver. Reads back with cudaMemcpy, which the backend does not
 * offer.
 *
 * Figures (lines starting "FIGURE ", for scripts/gpu-check.sh): the
 * backend's H2D rate against plain cudaMemcpyAsync from pinned memory on a
 * stream of our own (the benchmark: >= 0.9x, checked), and the
 * latency of a one-rank NCCL all-reduce of 1 and of 2^20 floats. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_clock.h"
#include "train_cuda_module.h"
#include "train_cuda_inc.h"
#include "train_device.h"
#include "train_nccl.h"

#define SKIP 77

static int failures;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                              \
        }                                                                            \
    } while (0)

/* Stop at a failed call: later checks would only repeat it. */
static void must(int rc, const struct sl_error *err, const char *what)
{
    if (rc == 0)
        return;
    fprintf(stderr, "%s: %s (%s)\n", what, err->msg, sl_code_name(rc));
    exit(1);
}

static void read_back(void *host, const void *dev, size_t n)
{
    cudaError_t e = cudaMemcpy(host, dev, n, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) {
        fprintf(stderr, "cudaMemcpy(device to host, %zu bytes): %s\n", n, cudaGetErrorString(e));
        exit(1);
    }
}

static void test_copies(const struct train_device_ops *ops, struct train_device *d)
{
    struct sl_error err = {0};
    enum { N = 1 << 20 };
    void *host[TRAIN_DEVICE_STREAMS], *dev[TRAIN_DEVICE_STREAMS];
    unsigned char *back = malloc(N);
    CHECK(back != NULL);
    for (int s = 0; s < TRAIN_DEVICE_STREAMS; s++) {
        must(ops->alloc_pinned(d, N, &host[s], &err), &err, "alloc_pinned");
        must(ops->alloc_device(d, N, &dev[s], &err), &err, "alloc_device");
        CHECK((uintptr_t)host[s] % TRAIN_DEVICE_ALIGN == 0);
        CHECK((uintptr_t)dev[s] % TRAIN_DEVICE_ALIGN == 0);
        for (size_t i = 0; i < N; i++)
            ((unsigned char *)host[s])[i] = (unsigned char)(i * 13u + (unsigned)s * 101u);
    }
    /* both streams in flight at once, then each synced on its own */
    for (int s = 0; s < TRAIN_DEVICE_STREAMS; s++)
        must(ops->copy_h2d_async(d, dev[s], host[s], N, s, &err), &err, "copy_h2d_async");
    for (int s = TRAIN_DEVICE_STREAMS - 1; s >= 0; s--) {
        must(ops->sync(d, s, &err), &err, "sync");
        read_back(back, dev[s], N);
        CHECK(memcmp(back, host[s], N) == 0);
    }
    CHECK(ops->copy_h2d_async(d, dev[0], host[0], N, 2, &err) == SL_EINVAL);
    for (int s = 0; s < TRAIN_DEVICE_STREAMS; s++) {
        ops->free_device(d, dev[s]);
        ops->free_pinned(d, host[s]);
    }
    free(back);
    printf("copies on both streams: ok\n");
}

static void test_errors(const struct train_device_ops *ops, struct train_device *d)
{
    struct sl_error err = {0};
    void *p;
    /* more than any GPU has */
    int rc = ops->alloc_device(d, (size_t)1 << 62, &p, &err);
    CHECK(rc == SL_EDEVICE);
    CHECK(strstr(err.msg, "cudaMalloc(4611686018427387904 bytes) on GPU 0: ") == err.msg);
    printf("oversized cudaMalloc: %s\n", err.msg);
    /* and the failure does not linger into the next call */
    must(ops->alloc_device(d, 4096, &p, &err), &err, "alloc_device after a failure");
    ops->free_device(d, p);
    struct train_device *none;
    CHECK(ops->open(&none, 1 << 20, &err) == SL_EINVAL);
}

static void test_all_reduce(const struct train_device_ops *ops, struct train_device *d)
{
    struct sl_error err = {0};
    char id[TRAIN_NCCL_ID_BYTES];
    struct train_comm *comm;
    must(train_nccl_unique_id(id, &err), &err, "train_nccl_unique_id");
    must(train_nccl_comm_init(&comm, 1, 0, id, d, &err), &err, "train_nccl_comm_init");
    enum { N = 12345 };
    float *host, *back = malloc(N * sizeof(float));
    void *dev;
    CHECK(back != NULL);
    must(ops->alloc_pinned(d, N * sizeof(float), (void **)&host, &err), &err, "alloc_pinned");
    must(ops->alloc_device(d, N * sizeof(float), &dev, &err), &err, "alloc_device");
    for (int i = 0; i < N; i++)
        host[i] = (float)i * 0.5f - 77.0f;
    must(ops->copy_h2d_async(d, dev, host, N * sizeof(float), 1, &err), &err, "copy_h2d_async");
    must(ops->sync(d, 1, &err), &err, "sync");
    must(ops->all_reduce_sum_f32(comm, dev, N, &err), &err, "all_reduce_sum_f32");
    read_back(back, dev, N * sizeof(float));
    CHECK(memcmp(back, host, N * sizeof(float)) == 0); /* the sum over one rank */
    CHECK(ops->all_reduce_sum_f32(comm, dev, 0, &err) == 0);
    ops->free_device(d, dev);
    ops->free_pinned(d, host);
    free(back);
    train_nccl_comm_destroy(comm);
    CHECK(train_nccl_comm_init(&comm, 1, 1, id, d, &err) == SL_EINVAL);
    printf("one-rank NCCL all-reduce: ok\n");
}

static void bandwidth(const struct train_device_ops *ops, struct train_device *d)
{
    struct sl_error err = {0};
    const size_t n = (size_t)256 << 20;
    const int reps = 20;
    void *host, *dev[TRAIN_DEVICE_STREAMS];
    must(ops->alloc_pinned(d, n, &host, &err), &err, "alloc_pinned");
    memset(host, 1, n);
    for (int s = 0; s < TRAIN_DEVICE_STREAMS; s++)
        must(ops->alloc_device(d, n, &dev[s], &err), &err, "alloc_device");
    must(ops->copy_h2d_async(d, dev[0], host, n, 0, &err), &err, "warm-up copy");
    must(ops->sync(d, 0, &err), &err, "sync");
    /* the peak: cudaMemcpyAsync itself, outside the backend */
    cudaStream_t raw;
    if (cudaStreamCreateWithFlags(&raw, cudaStreamNonBlocking) != cudaSuccess) {
        fprintf(stderr, "cudaStreamCreateWithFlags failed\n");
        exit(1);
    }
    /* the backend and the raw copy in turn, 3 times each, best of each: one
     * noisy run must not decide the ratio */
    double one = 0, peak = 0;
    for (int k = 0; k < 3; k++) {
        uint64_t t0 = sl_clock_ns();
        for (int r = 0; r < reps; r++)
            must(ops->copy_h2d_async(d, dev[0], host, n, 0, &err), &err, "copy_h2d_async");
        must(ops->sync(d, 0, &err), &err, "sync");
        double s1 = (double)(sl_clock_ns() - t0) / 1e9;
        t0 = sl_clock_ns();
        for (int r = 0; r < reps; r++)
            if (cudaMemcpyAsync(dev[0], host, n, cudaMemcpyHostToDevice, raw) != cudaSuccess) {
                fprintf(stderr, "cudaMemcpyAsync failed\n");
                exit(1);
            }
        if (cudaStreamSynchronize(raw) != cudaSuccess) {
            fprintf(stderr, "cudaStreamSynchronize failed\n");
            exit(1);
        }
        double s2 = (double)(sl_clock_ns() - t0) / 1e9;
        if (k == 0 || s1 < one)
            one = s1;
        if (k == 0 || s2 < peak)
            peak = s2;
    }
    (void)cudaStreamDestroy(raw);
    /* both streams: the copy engine is shared, so this shows overlap, not 2x */
    uint64_t t0 = sl_clock_ns();
    for (int r = 0; r < reps; r++)
        must(ops->copy_h2d_async(d, dev[r % 2], host, n, r % 2, &err), &err, "copy_h2d_async");
    for (int s = 0; s < TRAIN_DEVICE_STREAMS; s++)
        must(ops->sync(d, s, &err), &err, "sync");
    double two = (double)(sl_clock_ns() - t0) / 1e9;
    double gb_one = (double)n * reps / one / 1e9, gb_peak = (double)n * reps / peak / 1e9;
    printf("H2D from pinned memory, GPU 0, %d x %zu MiB (best of 3): %.2f GB/s on one stream, %.2f GB/s on two; "
           "cudaMemcpyAsync alone %.2f GB/s\n",
           reps, n >> 20, gb_one, (double)n * reps / two / 1e9, gb_peak);
    printf("FIGURE h2d_backend_gb_per_s %.3f\nFIGURE h2d_peak_gb_per_s %.3f\nFIGURE h2d_ratio %.3f\n", gb_one, gb_peak,
           gb_one / gb_peak);
    CHECK(gb_one >= 0.9 * gb_peak); /* the benchmark */
    for (int s = 0; s < TRAIN_DEVICE_STREAMS; s++)
        ops->free_device(d, dev[s]);
    ops->free_pinned(d, host);
}

/* One-rank NCCL all-reduce latency: the floor of every step's gradient sum. */
static void all_reduce_latency(const struct train_device_ops *ops, struct train_device *d)
{
    struct sl_error err = {0};
    char id[TRAIN_NCCL_ID_BYTES];
    struct train_comm *comm;
    must(train_nccl_unique_id(id, &err), &err, "train_nccl_unique_id");
    must(train_nccl_comm_init(&comm, 1, 0, id, d, &err), &err, "train_nccl_comm_init");
    const size_t big = (size_t)1 << 20;
    void *dev;
    must(ops->alloc_device(d, big * sizeof(float), &dev, &err), &err, "alloc_device");
    size_t sizes[2] = {1, big};
    for (int k = 0; k < 2; k++) {
        const int iters = k == 0 ? 2000 : 200;
        for (int i = 0; i < 10; i++) /* warm-up */
            must(ops->all_reduce_sum_f32(comm, dev, sizes[k], &err), &err, "all_reduce_sum_f32");
        uint64_t t0 = sl_clock_ns();
        for (int i = 0; i < iters; i++)
            must(ops->all_reduce_sum_f32(comm, dev, sizes[k], &err), &err, "all_reduce_sum_f32");
        double us = (double)(sl_clock_ns() - t0) / 1e3 / iters;
        printf("one-rank NCCL all-reduce of %zu floats: %.1f us per call (blocking, %d calls)\n", sizes[k], us, iters);
        printf("FIGURE nccl_1rank_allreduce_%zu_floats_us %.2f\n", sizes[k], us);
    }
    ops->free_device(d, dev);
    train_nccl_comm_destroy(comm);
}

int main(void)
{
    train_backend_use_cuda(&train__cuda_module); /* this program's copy, not the module */
    int count = train_device_count("cuda");
    if (count == 0) {
        printf("SKIP: no CUDA device (or no driver)\n");
        return SKIP;
    }
    const struct train_device_ops *ops = train_device_find("cuda");
    struct sl_error err = {0};
    char line[256];
    must(train_device_describe("cuda", 0, line, sizeof line, &err), &err, "describe");
    printf("%d GPU(s); %s\n", count, line);
    struct train_device *d;
    must(ops->open(&d, 0, &err), &err, "open");
    test_copies(ops, d);
    test_errors(ops, d);
    test_all_reduce(ops, d);
    bandwidth(ops, d);
    all_reduce_latency(ops, d);
    ops->close(d);
    if (failures > 0) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("all passed\n");
    return 0;
}
