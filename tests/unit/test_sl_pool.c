/* sl_pool: buffers handed out once each, aligned and fully writable;
 * references for a buffer sent as several frames; interior pointers; close;
 * misuse aborts. Threads: a get blocks until another thread puts; close
 * wakes blocked getters; a stress run where an "I/O thread" returns every
 * frame through sl_pool_zmq_free exactly as libzmq would. Run under TSan
 * as well (SLUICE_SANITIZE). */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sl_alloc.h"
#include "sl_clock.h"
#include "sl_pool.h"
#include "sl_queue.h"
#include "sl_test.h"

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

START_TEST(test_create_invalid_and_nomem)
{
    struct sl_pool *p = (struct sl_pool *)&p;
    ck_assert_int_eq(sl_pool_create(&p, 0, 10), SL_EINVAL);
    ck_assert_ptr_null(p);
    ck_assert_int_eq(sl_pool_create(&p, 10, 0), SL_EINVAL);
    ck_assert_int_eq(sl_pool_create(&p, SIZE_MAX / 64, 1000), SL_EINVAL);
    for (long n = 1; n <= 3; n++) {
        sl_alloc_fail_after(n);
        ck_assert_int_eq(sl_pool_create(&p, 4, 100), SL_ENOMEM);
        sl_alloc_fail_reset();
    }
    sl_pool_destroy(NULL);
}
END_TEST

START_TEST(test_get_put_single_thread)
{
    struct sl_pool *p;
    ck_assert_int_eq(sl_pool_create(&p, 4, 100), 0);
    ck_assert_uint_eq(sl_pool_bytes(p), 100);
    void *b[4];
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(sl_pool_try_get(p, &b[i]), 0);
        ck_assert_uint_eq((uintptr_t)b[i] % 64, 0);
        memset(b[i], i, 100); /* every byte writable (ASan) */
        for (int j = 0; j < i; j++)
            ck_assert_ptr_ne(b[i], b[j]);
    }
    void *x;
    ck_assert_int_eq(sl_pool_try_get(p, &x), SL_ETIMEOUT);
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < 100; k++)
            ck_assert_uint_eq(((uint8_t *)b[i])[k], (unsigned)i);
    struct sl_pool_stats st;
    sl_pool_stats(p, &st);
    ck_assert_uint_eq(st.nbufs, 4);
    ck_assert_uint_eq(st.bytes_each, 100);
    ck_assert_uint_eq(st.in_use, 4);
    ck_assert_uint_eq(st.peak, 4);
    ck_assert_uint_eq(st.gets, 4);
    ck_assert_uint_eq(st.waits, 0);
    /* the last byte is in the buffer; the padding up to the next 64-byte
     * stride is in none */
    ck_assert_int_eq(sl_pool_ref(p, (uint8_t *)b[0] + 99, 1), 0);
    sl_pool_put(p, b[0]);
    ck_assert_int_eq(sl_pool_ref(p, (uint8_t *)b[0] + 100, 1), SL_EINVAL);
    /* a put through an interior pointer returns the buffer */
    sl_pool_put(p, (uint8_t *)b[2] + 99);
    ck_assert_int_eq(sl_pool_get(p, &x), 0);
    ck_assert_ptr_eq(x, b[2]);
    for (int i = 0; i < 4; i++)
        sl_pool_put(p, b[i]);
    sl_pool_stats(p, &st);
    ck_assert_uint_eq(st.in_use, 0);
    ck_assert_uint_eq(st.peak, 4);
    ck_assert_uint_eq(st.gets, 5);
    ck_assert_int_eq(sl_pool_wait_idle(p, 0), 0);
    sl_pool_destroy(p);
}
END_TEST

START_TEST(test_refs_for_frames)
{
    struct sl_pool *p;
    ck_assert_int_eq(sl_pool_create(&p, 2, 4096), 0);
    void *b;
    ck_assert_int_eq(sl_pool_get(p, &b), 0);
    /* a piece of three tensors: three frames, three free callbacks */
    ck_assert_int_eq(sl_pool_ref(p, b, 2), 0);
    uint8_t *base = b;
    sl_pool_zmq_free(base + 1024, p);
    sl_pool_zmq_free(base, p);
    struct sl_pool_stats st;
    sl_pool_stats(p, &st);
    ck_assert_uint_eq(st.in_use, 1);
    ck_assert_int_eq(sl_pool_wait_idle(p, 10), SL_ETIMEOUT);
    sl_pool_zmq_free(base + 4095, p);
    sl_pool_stats(p, &st);
    ck_assert_uint_eq(st.in_use, 0);
    ck_assert_int_eq(sl_pool_wait_idle(p, 10), 0);
    /* refs on a free buffer or a foreign pointer are refused */
    ck_assert_int_eq(sl_pool_ref(p, b, 1), SL_EINVAL);
    int local;
    ck_assert_int_eq(sl_pool_ref(p, &local, 1), SL_EINVAL);
    ck_assert_int_eq(sl_pool_get(p, &b), 0);
    ck_assert_int_eq(sl_pool_ref(p, b, UINT32_MAX), SL_EINVAL);
    sl_pool_put(p, b);
    sl_pool_destroy(p);
}
END_TEST

START_TEST(test_close)
{
    struct sl_pool *p;
    ck_assert_int_eq(sl_pool_create(&p, 2, 8), 0);
    void *b;
    ck_assert_int_eq(sl_pool_get(p, &b), 0);
    sl_pool_close(p);
    void *c;
    ck_assert_int_eq(sl_pool_get(p, &c), SL_ECLOSED);
    ck_assert_int_eq(sl_pool_try_get(p, &c), SL_ECLOSED);
    sl_pool_put(p, b); /* puts still work */
    ck_assert_int_eq(sl_pool_wait_idle(p, -1), 0);
    sl_pool_destroy(p);
}
END_TEST

/* Misuse aborts (run in a forked child by Check). */
START_TEST(test_destroy_with_buffer_out_aborts)
{
    struct sl_pool *p;
    ck_assert_int_eq(sl_pool_create(&p, 2, 8), 0);
    void *b;
    ck_assert_int_eq(sl_pool_get(p, &b), 0);
    sl_pool_destroy(p);
}
END_TEST

START_TEST(test_double_put_aborts)
{
    struct sl_pool *p;
    ck_assert_int_eq(sl_pool_create(&p, 2, 8), 0);
    void *b;
    ck_assert_int_eq(sl_pool_get(p, &b), 0);
    sl_pool_put(p, b);
    sl_pool_put(p, b);
}
END_TEST

START_TEST(test_foreign_put_aborts)
{
    struct sl_pool *p;
    ck_assert_int_eq(sl_pool_create(&p, 2, 8), 0);
    static int foreign;
    sl_pool_zmq_free(&foreign, p);
}
END_TEST

/* ---- threads ---------------------------------------------------------- */

struct getter {
    struct sl_pool *p;
    atomic_int started;
    void *buf;
    int rc;
};

static void *get_thread(void *arg)
{
    struct getter *g = arg;
    atomic_store(&g->started, 1);
    g->rc = sl_pool_get(g->p, &g->buf);
    return NULL;
}

/* A shared pool: the memfd another process opens read-only through
 * /proc/<pid>/fd/<fd> shows the header (magic, token) and every buffer's
 * bytes at sl_pool_offset, and cannot be resized by anyone. */
START_TEST(test_shared)
{
    struct sl_pool *p;
    struct sl_pool_shm shm;
    ck_assert_int_eq(sl_pool_create_shared(&p, 3, 1000, &shm), 0);
    ck_assert_uint_eq(shm.size, SL_POOL_SHM_HEADER + 3 * 1024); /* 64-byte stride */
    ck_assert(shm.token != 0);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)getpid(), shm.fd);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    struct stat st;
    ck_assert_int_eq(fstat(fd, &st), 0);
    ck_assert_int_eq((long long)st.st_size, (long long)shm.size);
    const uint8_t *view = mmap(NULL, shm.size, PROT_READ, MAP_SHARED, fd, 0);
    ck_assert(view != MAP_FAILED);
    ck_assert_int_eq(memcmp(view, "SLSHM001", 8), 0);
    uint64_t token = 0;
    for (int i = 0; i < 8; i++)
        token |= (uint64_t)view[8 + i] << (8 * i);
    ck_assert_uint_eq(token, shm.token);
    void *b[3];
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(sl_pool_get(p, &b[i]), 0);
        memset(b[i], 'a' + i, 1000);
    }
    for (int i = 0; i < 3; i++) {
        uint64_t off = sl_pool_offset(p, (uint8_t *)b[i] + 10);
        ck_assert_uint_ge(off, SL_POOL_SHM_HEADER + 10);
        ck_assert_uint_le(off + 990, shm.size);
        ck_assert_int_eq(view[off], 'a' + i);
        ck_assert_int_eq(view[off + 989], 'a' + i);
    }
    /* sealed: neither the owner nor a reader resizes it */
    ck_assert_int_ne(ftruncate(shm.fd, 1 << 20), 0);
    ck_assert_int_ne(ftruncate(shm.fd, 100), 0);
    ck_assert_int_ne(ftruncate(fd, 100), 0);
    for (int i = 0; i < 3; i++)
        sl_pool_put(p, b[i]);
    sl_pool_destroy(p);
    /* the reader's mapping outlives the pool (a trainer holding pieces of a
     * feeder that exited) */
    ck_assert_int_eq(view[SL_POOL_SHM_HEADER], 'a'); /* the stack hands the lowest buffer out first */
    munmap((void *)view, shm.size);
    close(fd);
    /* a private pool has no offsets */
    ck_assert_int_eq(sl_pool_create(&p, 1, 10), 0);
    void *x;
    ck_assert_int_eq(sl_pool_get(p, &x), 0);
    ck_assert_uint_eq(sl_pool_offset(p, x), 0);
    sl_pool_put(p, x);
    sl_pool_destroy(p);
}
END_TEST

START_TEST(test_get_blocks_until_put)
{
    struct sl_pool *p;
    ck_assert_int_eq(sl_pool_create(&p, 1, 64), 0);
    void *b;
    ck_assert_int_eq(sl_pool_get(p, &b), 0);
    struct getter g = {.p = p, .buf = NULL, .rc = 99};
    atomic_store(&g.started, 0);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, get_thread, &g), 0);
    while (!atomic_load(&g.started))
        sleep_ms(1);
    sleep_ms(50);
    struct sl_pool_stats st;
    sl_pool_stats(p, &st);
    ck_assert_uint_eq(st.gets, 1); /* still waiting */
    sl_pool_put(p, b);
    pthread_join(t, NULL);
    ck_assert_int_eq(g.rc, 0);
    ck_assert_ptr_eq(g.buf, b);
    sl_pool_stats(p, &st);
    ck_assert_uint_eq(st.gets, 2);
    ck_assert_uint_eq(st.waits, 1);
    sl_pool_put(p, g.buf);
    sl_pool_destroy(p);
}
END_TEST

START_TEST(test_close_wakes_getters)
{
    struct sl_pool *p;
    ck_assert_int_eq(sl_pool_create(&p, 1, 64), 0);
    void *b;
    ck_assert_int_eq(sl_pool_get(p, &b), 0);
    struct getter g[3];
    pthread_t t[3];
    for (int i = 0; i < 3; i++) {
        g[i] = (struct getter){.p = p, .buf = NULL, .rc = 99};
        atomic_store(&g[i].started, 0);
        ck_assert_int_eq(pthread_create(&t[i], NULL, get_thread, &g[i]), 0);
    }
    for (int i = 0; i < 3; i++)
        while (!atomic_load(&g[i].started))
            sleep_ms(1);
    sleep_ms(30);
    sl_pool_close(p);
    for (int i = 0; i < 3; i++) {
        pthread_join(t[i], NULL);
        ck_assert_int_eq(g[i].rc, SL_ECLOSED);
    }
    sl_pool_put(p, b);
    sl_pool_destroy(p);
}
END_TEST

static void *put_later(void *arg)
{
    void **pair = arg;
    sleep_ms(50);
    sl_pool_put(pair[0], pair[1]);
    return NULL;
}

START_TEST(test_wait_idle_wakes)
{
    struct sl_pool *p;
    ck_assert_int_eq(sl_pool_create(&p, 2, 64), 0);
    void *b;
    ck_assert_int_eq(sl_pool_get(p, &b), 0);
    void *pair[2] = {p, b};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, put_later, pair), 0);
    ck_assert_int_eq(sl_pool_wait_idle(p, 10000), 0);
    pthread_join(t, NULL);
    sl_pool_destroy(p);
}
END_TEST

/* Executor threads take a buffer, fill it with a pattern and "send" it as
 * FRAMES frames through a queue; one I/O thread checks each frame and frees
 * it with sl_pool_zmq_free, as libzmq's would after sending. */
#define EXECUTORS 4
#define PIECES 5000
#define FRAMES 3
#define BUF_BYTES 3000

struct frame {
    uint8_t *data;
    size_t len;
    uint8_t pattern;
};

struct pipeline {
    struct sl_pool *pool;
    struct sl_queue *wire;
    atomic_int next_id;
    atomic_long frames_freed;
    atomic_int bad;
};

static void *executor(void *arg)
{
    struct pipeline *pl = arg;
    int id = atomic_fetch_add(&pl->next_id, 1);
    for (int i = 0; i < PIECES; i++) {
        void *buf;
        if (sl_pool_get(pl->pool, &buf) != 0)
            return (void *)1;
        uint8_t pattern = (uint8_t)(id * 31 + i);
        memset(buf, pattern, BUF_BYTES);
        if (sl_pool_ref(pl->pool, buf, FRAMES - 1) != 0)
            return (void *)1;
        for (int f = 0; f < FRAMES; f++) {
            struct frame *fr = sl_malloc(sizeof *fr);
            fr->data = (uint8_t *)buf + f * (BUF_BYTES / FRAMES);
            fr->len = BUF_BYTES / FRAMES;
            fr->pattern = pattern;
            if (sl_queue_push(pl->wire, fr) != 0)
                return (void *)1;
        }
    }
    return NULL;
}

static void *io_thread(void *arg)
{
    struct pipeline *pl = arg;
    void *item;
    while (sl_queue_pop(pl->wire, &item) == 0) {
        struct frame *fr = item;
        for (size_t k = 0; k < fr->len; k++)
            if (fr->data[k] != fr->pattern) {
                atomic_store(&pl->bad, 1);
                break;
            }
        sl_pool_zmq_free(fr->data, pl->pool);
        atomic_fetch_add(&pl->frames_freed, 1);
        sl_free(fr);
    }
    return NULL;
}

START_TEST(test_stress_zero_copy_cycle)
{
    struct pipeline pl;
    memset(&pl, 0, sizeof pl);
    ck_assert_int_eq(sl_pool_create(&pl.pool, 6, BUF_BYTES), 0);
    ck_assert_int_eq(sl_queue_create(&pl.wire, 8), 0);
    atomic_store(&pl.next_id, 0);
    atomic_store(&pl.frames_freed, 0);
    atomic_store(&pl.bad, 0);
    pthread_t ex[EXECUTORS], io;
    ck_assert_int_eq(pthread_create(&io, NULL, io_thread, &pl), 0);
    for (int i = 0; i < EXECUTORS; i++)
        ck_assert_int_eq(pthread_create(&ex[i], NULL, executor, &pl), 0);
    for (int i = 0; i < EXECUTORS; i++) {
        void *r;
        pthread_join(ex[i], &r);
        ck_assert_ptr_null(r);
    }
    sl_queue_close(pl.wire, 0, NULL);
    pthread_join(io, NULL);
    ck_assert_int_eq(atomic_load(&pl.bad), 0);
    ck_assert_int_eq(atomic_load(&pl.frames_freed), (long)EXECUTORS * PIECES * FRAMES);
    ck_assert_int_eq(sl_pool_wait_idle(pl.pool, 1000), 0);
    struct sl_pool_stats st;
    sl_pool_stats(pl.pool, &st);
    ck_assert_uint_eq(st.in_use, 0);
    ck_assert_uint_eq(st.gets, (uint64_t)EXECUTORS * PIECES);
    ck_assert_uint_le(st.peak, 6);
    ck_assert_uint_gt(st.waits, 0);
    sl_queue_destroy(pl.wire);
    sl_pool_destroy(pl.pool);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("sl_pool");
    TCase *tc = tcase_create("single");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_create_invalid_and_nomem);
    tcase_add_test(tc, test_get_put_single_thread);
    tcase_add_test(tc, test_refs_for_frames);
    tcase_add_test(tc, test_close);
    tcase_add_test(tc, test_shared);
    tcase_add_test_raise_signal(tc, test_destroy_with_buffer_out_aborts, SIGABRT);
    tcase_add_test_raise_signal(tc, test_double_put_aborts, SIGABRT);
    tcase_add_test_raise_signal(tc, test_foreign_put_aborts, SIGABRT);
    suite_add_tcase(s, tc);
    tc = tcase_create("threads");
    tcase_set_timeout(tc, 100);
    tcase_add_test(tc, test_get_blocks_until_put);
    tcase_add_test(tc, test_close_wakes_getters);
    tcase_add_test(tc, test_wait_idle_wakes);
    tcase_add_test(tc, test_stress_zero_copy_cycle);
    suite_add_tcase(s, tc);
    return s;
}
