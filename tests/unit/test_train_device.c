/* train_device, cpu backend: the staging round trip, alignment, both copy
 * streams, and every error path a caller can hit. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sl_alloc.h"
#include "sl_test.h"
#include "train_backend.h"
#include "train_cuda_module.h"
#include "train_device.h"

static struct train_device *open_cpu(const struct train_device_ops **ops, int ordinal)
{
    struct sl_error err = {0};
    struct train_device *d = NULL;
    *ops = train_device_find("cpu");
    ck_assert_ptr_nonnull(*ops);
    ck_assert_int_eq((*ops)->open(&d, ordinal, &err), 0);
    ck_assert_ptr_nonnull(d);
    return d;
}

START_TEST(test_find)
{
    const struct train_device_ops *cpu = train_device_find("cpu");
    ck_assert_ptr_nonnull(cpu);
    ck_assert_str_eq(cpu->name, "cpu");
    ck_assert(cpu->all_reduce_sum_f32 == NULL);
    ck_assert_ptr_null(train_device_find("tpu"));
    ck_assert_ptr_null(train_device_find(""));
    ck_assert_ptr_null(train_device_find(NULL));
    ck_assert_int_eq(train_device_count("cpu"), 1);
    ck_assert_int_eq(train_device_count("tpu"), 0);
    /* cuda: absent from the build or present with 0..n GPUs; never a crash */
    ck_assert_int_ge(train_device_count("cuda"), 0);
    const struct train_device_ops *cuda = train_device_find("cuda");
    if (cuda != NULL) {
        ck_assert_str_eq(cuda->name, "cuda");
        ck_assert(cuda->all_reduce_sum_f32 != NULL);
    }
}
END_TEST

/* The backend table's reasons (issue #24 item 14): an unknown kind, and a
 * "cuda" module from another sluice refused at load, naming both versions
 * (a forked test: the load happens once per process). */
START_TEST(test_backend_load)
{
    struct sl_error err = {0};
    const struct train_backend *b = (const struct train_backend *)&err;
    ck_assert_int_eq(train_backend_load("tpu", &b, &err), SL_EINVAL);
    ck_assert_ptr_null(b);
    ck_assert_str_eq(err.msg, "unknown device kind 'tpu' (cpu or cuda)");
    ck_assert_int_eq(train_backend_load(NULL, &b, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "unknown device kind '(null)' (cpu or cuda)");
    ck_assert_int_eq(train_backend_load("cpu", &b, &err), 0);
    ck_assert_str_eq(b->kind, "cpu");

    static const struct train_cuda_module foreign = {.abi = 99, .version = "0.0.9"};
    train_backend_use_cuda(&foreign);
    ck_assert_int_eq(train_backend_load("cuda", &b, &err), SL_EINVAL);
    ck_assert_ptr_null(b);
#ifdef SLUICE_HAVE_CUDA
    char want[SL_ERROR_MSG_MAX];
    snprintf(want, sizeof want,
             "the CUDA backend module libsluice-cuda.so is from another sluice (version 0.0.9, "
             "ABI 99; this is %s, ABI 1)",
             SL_TEST_PROJECT_VERSION);
#else
    const char *want = "this build has no CUDA backend (CUDA and NCCL were not found at configure time)";
#endif
    ck_assert_str_eq(err.msg, want);
    ck_assert_ptr_null(train_device_find("cuda"));
    ck_assert_int_eq(train_device_count("cuda"), 0);
    ck_assert_uint_eq(train_backend_count(), 1);
    char buf[64];
    ck_assert_int_eq(train_device_describe("cuda", 0, buf, sizeof buf, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, want);
    ck_assert_str_eq(buf, "cuda 0: unavailable");
}
END_TEST

START_TEST(test_round_trip)
{
    const struct train_device_ops *ops;
    struct train_device *d = open_cpu(&ops, 0);
    struct sl_error err = {0};
    ck_assert_int_eq(train_device_ordinal(d), 0);
    ck_assert_ptr_eq(train_device_ops_of(d), ops);
    enum { N = 100003 };
    void *host, *dev;
    ck_assert_int_eq(ops->alloc_pinned(d, N, &host, &err), 0);
    ck_assert_int_eq(ops->alloc_device(d, N, &dev, &err), 0);
    for (size_t i = 0; i < N; i++)
        ((unsigned char *)host)[i] = (unsigned char)(i * 31u + 7u);
    ck_assert_int_eq(ops->copy_h2d_async(d, dev, host, N, 0, &err), 0);
    ck_assert_int_eq(ops->sync(d, 0, &err), 0);
    ck_assert_int_eq(memcmp(dev, host, N), 0);
    /* zero-length copies are allowed and do nothing */
    ck_assert_int_eq(ops->copy_h2d_async(d, dev, host, 0, 1, &err), 0);
    ops->free_device(d, dev);
    ops->free_pinned(d, host);
    ops->free_device(d, NULL);
    ops->free_pinned(d, NULL);
    ops->close(d);
    ops->close(NULL);
}
END_TEST

START_TEST(test_alignment)
{
    const struct train_device_ops *ops;
    struct train_device *d = open_cpu(&ops, 3);
    struct sl_error err = {0};
    void *bufs[2][33];
    for (size_t n = 1; n <= 33; n++) {
        ck_assert_int_eq(ops->alloc_pinned(d, n, &bufs[0][n - 1], &err), 0);
        ck_assert_int_eq(ops->alloc_device(d, n * 7, &bufs[1][n - 1], &err), 0);
        ck_assert_uint_eq((uintptr_t)bufs[0][n - 1] % TRAIN_DEVICE_ALIGN, 0);
        ck_assert_uint_eq((uintptr_t)bufs[1][n - 1] % TRAIN_DEVICE_ALIGN, 0);
        memset(bufs[0][n - 1], 0xab, n); /* the whole block is writable */
        memset(bufs[1][n - 1], 0xcd, n * 7);
    }
    for (size_t n = 1; n <= 33; n++) {
        ops->free_pinned(d, bufs[0][n - 1]);
        ops->free_device(d, bufs[1][n - 1]);
    }
    ops->close(d);
}
END_TEST

/* The double-buffering pattern: batch k is copied on stream k % 2 into its
 * own device buffer while the previous one is "used". */
START_TEST(test_double_buffer)
{
    const struct train_device_ops *ops;
    struct train_device *d = open_cpu(&ops, 1);
    struct sl_error err = {0};
    enum { N = 4096, BATCHES = 9 };
    void *host[TRAIN_DEVICE_STREAMS], *dev[TRAIN_DEVICE_STREAMS];
    for (int s = 0; s < TRAIN_DEVICE_STREAMS; s++) {
        ck_assert_int_eq(ops->alloc_pinned(d, N * sizeof(uint32_t), &host[s], &err), 0);
        ck_assert_int_eq(ops->alloc_device(d, N * sizeof(uint32_t), &dev[s], &err), 0);
    }
    for (int k = 0; k < BATCHES; k++) {
        int s = k % TRAIN_DEVICE_STREAMS;
        ck_assert_int_eq(ops->sync(d, s, &err), 0); /* the buffer's previous copy is done */
        uint32_t *h = host[s];
        for (uint32_t i = 0; i < N; i++)
            h[i] = (uint32_t)k * 1000003u + i;
        ck_assert_int_eq(ops->copy_h2d_async(d, dev[s], host[s], N * sizeof(uint32_t), s, &err), 0);
        if (k > 0) {
            int prev = 1 - s;
            ck_assert_int_eq(ops->sync(d, prev, &err), 0);
            const uint32_t *v = dev[prev];
            for (uint32_t i = 0; i < N; i++)
                ck_assert_uint_eq(v[i], (uint32_t)(k - 1) * 1000003u + i);
        }
    }
    int last = (BATCHES - 1) % TRAIN_DEVICE_STREAMS;
    ck_assert_int_eq(ops->sync(d, last, &err), 0);
    ck_assert_uint_eq(((const uint32_t *)dev[last])[N - 1], (uint32_t)(BATCHES - 1) * 1000003u + N - 1);
    for (int s = 0; s < TRAIN_DEVICE_STREAMS; s++) {
        ops->free_pinned(d, host[s]);
        ops->free_device(d, dev[s]);
    }
    ops->close(d);
}
END_TEST

START_TEST(test_errors)
{
    const struct train_device_ops *ops;
    struct train_device *d = open_cpu(&ops, 2);
    struct sl_error err = {0};
    void *p = (void *)&err;
    ck_assert_int_eq(ops->alloc_pinned(d, SIZE_MAX, &p, &err), SL_ENOMEM);
    ck_assert_ptr_null(p);
    ck_assert_str_eq(err.msg, "alloc_pinned(18446744073709551615 bytes) on cpu 2: out of memory");
    ck_assert_int_eq(ops->alloc_device(d, SIZE_MAX - 8, &p, &err), SL_ENOMEM);
    ck_assert_str_eq(err.msg, "alloc_device(18446744073709551607 bytes) on cpu 2: out of memory");
    ck_assert_int_eq(ops->alloc_device(d, 0, &p, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "alloc_device(0 bytes) on cpu 2: size must be > 0");

    char a[8] = "abcdefg", b[8] = {0};
    ck_assert_int_eq(ops->copy_h2d_async(d, b, a, sizeof a, 2, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "copy_h2d_async on cpu 2: stream 2 (expected 0..1)");
    ck_assert_str_eq(b, ""); /* nothing copied */
    ck_assert_int_eq(ops->copy_h2d_async(d, b, a, sizeof a, -1, &err), SL_EINVAL);
    ck_assert_int_eq(ops->sync(d, 2, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "sync on cpu 2: stream 2 (expected 0..1)");

    /* an injected allocation failure */
    sl_alloc_fail_after(1);
    ck_assert_int_eq(ops->alloc_pinned(d, 64, &p, &err), SL_ENOMEM);
    sl_alloc_fail_reset();
    ck_assert_str_eq(err.msg, "alloc_pinned(64 bytes) on cpu 2: out of memory");
    ops->close(d);

    struct train_device *d2 = (struct train_device *)&err;
    ck_assert_int_eq(ops->open(&d2, -1, &err), SL_EINVAL);
    ck_assert_ptr_null(d2);
    ck_assert_str_eq(err.msg, "cpu -1: no such device (expected an ordinal >= 0)");
    sl_alloc_fail_after(1);
    ck_assert_int_eq(ops->open(&d2, 0, &err), SL_ENOMEM);
    sl_alloc_fail_reset();
    ck_assert_ptr_null(d2);
}
END_TEST

START_TEST(test_describe)
{
    struct sl_error err = {0};
    char buf[128];
    ck_assert_int_eq(train_device_describe("cpu", 0, buf, sizeof buf, &err), 0);
    ck_assert_msg(strncmp(buf, "cpu 0: host (", 13) == 0, "got '%s'", buf);
    ck_assert_msg(strstr(buf, "GiB)") != NULL, "got '%s'", buf);
    /* truncation keeps a terminated string */
    char tiny[6];
    ck_assert_int_eq(train_device_describe("cpu", 0, tiny, sizeof tiny, &err), 0);
    ck_assert_str_eq(tiny, "cpu 0");
    ck_assert_int_eq(train_device_describe("tpu", 0, buf, sizeof buf, &err), SL_EINVAL);
    ck_assert_msg(strncmp(err.msg, "unknown device kind 'tpu'", 25) == 0, "got '%s'", err.msg);
    ck_assert_str_eq(buf, "tpu 0: unavailable");
    ck_assert_int_eq(train_device_describe("cpu", -2, buf, sizeof buf, &err), SL_EINVAL);
    ck_assert_str_eq(buf, "cpu -2: unavailable");
    if (train_device_find("cuda") != NULL && train_device_count("cuda") == 0) {
        /* a cuda build on a machine without GPUs: an error, not a crash */
        int rc = train_device_describe("cuda", 0, buf, sizeof buf, &err);
        ck_assert_msg(rc == SL_EDEVICE || rc == SL_EINVAL, "rc %d", rc);
        ck_assert_str_eq(buf, "cuda 0: unavailable");
        ck_assert_msg(strncmp(err.msg, "GPU 0: ", 7) == 0, "got '%s'", err.msg);
        struct train_device *d = (struct train_device *)&err;
        rc = train_device_find("cuda")->open(&d, 0, &err);
        ck_assert_msg(rc == SL_EDEVICE || rc == SL_EINVAL, "rc %d", rc);
        ck_assert_ptr_null(d);
    }
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("train_device");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_find);
    tcase_add_test(tc, test_backend_load);
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_alignment);
    tcase_add_test(tc, test_double_buffer);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_describe);
    suite_add_tcase(s, tc);
    return s;
}
