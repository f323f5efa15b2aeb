/* sl_queue: FIFO order, full/empty behaviour, timeouts, the two kinds of
 * close, then threads: 4 producers x 4 consumers pass 100k items, each
 * exactly once and in per-producer order; a close with an error wakes every
 * blocked producer and consumer. Run under TSan as well (SLUICE_SANITIZE). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sl_alloc.h"
#include "sl_clock.h"
#include "sl_queue.h"
#include "sl_test.h"

static void *item(uintptr_t v)
{
    return (void *)v;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

START_TEST(test_create_invalid_and_nomem)
{
    struct sl_queue *q = item(1);
    ck_assert_int_eq(sl_queue_create(&q, 0), SL_EINVAL);
    ck_assert_ptr_null(q);
    sl_alloc_fail_after(1);
    ck_assert_int_eq(sl_queue_create(&q, 4), SL_ENOMEM);
    sl_alloc_fail_after(2);
    ck_assert_int_eq(sl_queue_create(&q, 4), SL_ENOMEM);
    sl_alloc_fail_reset();
    ck_assert_ptr_null(q);
    sl_queue_destroy(NULL);
}
END_TEST

START_TEST(test_fifo_full_empty)
{
    struct sl_queue *q;
    ck_assert_int_eq(sl_queue_create(&q, 3), 0);
    ck_assert_uint_eq(sl_queue_capacity(q), 3);
    void *out;
    ck_assert_int_eq(sl_queue_try_pop(q, &out), SL_ETIMEOUT);
    /* wrap around the ring many times */
    uintptr_t next_in = 1, next_out = 1;
    for (int round = 0; round < 50; round++) {
        while (sl_queue_len(q) < 3)
            ck_assert_int_eq(sl_queue_push(q, item(next_in++)), 0);
        ck_assert_int_eq(sl_queue_try_push(q, item(999)), SL_ETIMEOUT);
        int take = 1 + round % 3;
        for (int i = 0; i < take; i++) {
            ck_assert_int_eq(sl_queue_pop(q, &out), 0);
            ck_assert_ptr_eq(out, item(next_out++));
        }
    }
    while (sl_queue_len(q) > 0) {
        ck_assert_int_eq(sl_queue_try_pop(q, &out), 0);
        ck_assert_ptr_eq(out, item(next_out++));
    }
    ck_assert_uint_eq(next_in, next_out);
    /* NULL is an item like any other */
    ck_assert_int_eq(sl_queue_try_push(q, NULL), 0);
    out = item(5);
    ck_assert_int_eq(sl_queue_pop(q, &out), 0);
    ck_assert_ptr_null(out);
    sl_queue_destroy(q);
}
END_TEST

START_TEST(test_pop_timeout)
{
    struct sl_queue *q;
    ck_assert_int_eq(sl_queue_create(&q, 1), 0);
    void *out;
    uint64_t t0 = sl_clock_ns();
    ck_assert_int_eq(sl_queue_pop_timeout(q, &out, 30), SL_ETIMEOUT);
    ck_assert_uint_ge(sl_clock_ns() - t0, 30000000u);
    ck_assert_int_eq(sl_queue_pop_timeout(q, &out, 0), SL_ETIMEOUT);
    ck_assert_int_eq(sl_queue_push(q, item(7)), 0);
    ck_assert_int_eq(sl_queue_pop_timeout(q, &out, 1000), 0);
    ck_assert_ptr_eq(out, item(7));
    sl_queue_destroy(q);
}
END_TEST

START_TEST(test_normal_close_drains)
{
    struct sl_queue *q;
    struct sl_error err = {0};
    ck_assert_int_eq(sl_queue_create(&q, 4), 0);
    ck_assert_int_eq(sl_queue_error(q, &err), 0);
    ck_assert_int_eq(err.code, 0);
    ck_assert_int_eq(sl_queue_push(q, item(1)), 0);
    ck_assert_int_eq(sl_queue_push(q, item(2)), 0);
    sl_queue_close(q, 0, NULL);
    sl_queue_close(q, SL_EIO, "too late: the first close wins");
    ck_assert_int_eq(sl_queue_push(q, item(3)), SL_ECLOSED);
    ck_assert_int_eq(sl_queue_try_push(q, item(3)), SL_ECLOSED);
    void *out;
    ck_assert_int_eq(sl_queue_pop(q, &out), 0);
    ck_assert_ptr_eq(out, item(1));
    ck_assert_int_eq(sl_queue_pop_timeout(q, &out, 10), 0);
    ck_assert_ptr_eq(out, item(2));
    ck_assert_int_eq(sl_queue_pop(q, &out), SL_ECLOSED);
    ck_assert_int_eq(sl_queue_try_pop(q, &out), SL_ECLOSED);
    ck_assert_int_eq(sl_queue_pop_timeout(q, &out, 10), SL_ECLOSED);
    ck_assert_int_eq(sl_queue_error(q, &err), SL_ECLOSED);
    ck_assert_int_eq(err.code, SL_ECLOSED);
    ck_assert_str_eq(err.msg, "queue closed");
    sl_queue_destroy(q);
}
END_TEST

START_TEST(test_error_close_fails_fast)
{
    struct sl_queue *q;
    struct sl_error err = {0};
    ck_assert_int_eq(sl_queue_create(&q, 4), 0);
    ck_assert_int_eq(sl_queue_push(q, item(1)), 0);
    ck_assert_int_eq(sl_queue_push(q, item(2)), 0);
    sl_queue_close(q, SL_ECORRUPT, "a.tfrecord: corrupted record at 12");
    sl_queue_close(q, 0, NULL);
    void *out;
    ck_assert_int_eq(sl_queue_pop(q, &out), SL_ECORRUPT);
    ck_assert_int_eq(sl_queue_push(q, item(3)), SL_ECORRUPT);
    ck_assert_int_eq(sl_queue_error(q, &err), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "a.tfrecord: corrupted record at 12");
    ck_assert_int_eq(sl_queue_error(q, NULL), SL_ECORRUPT);
    /* the items are still there for cleanup */
    ck_assert_uint_eq(sl_queue_len(q), 2);
    ck_assert_int_eq(sl_queue_reclaim(q, &out), 0);
    ck_assert_ptr_eq(out, item(1));
    ck_assert_int_eq(sl_queue_reclaim(q, &out), 0);
    ck_assert_ptr_eq(out, item(2));
    ck_assert_int_eq(sl_queue_reclaim(q, &out), SL_END);
    sl_queue_destroy(q);

    /* no message: the code's name; a positive code is a normal close */
    ck_assert_int_eq(sl_queue_create(&q, 1), 0);
    sl_queue_close(q, SL_EIO, NULL);
    ck_assert_int_eq(sl_queue_error(q, &err), SL_EIO);
    ck_assert_str_eq(err.msg, "io");
    sl_queue_destroy(q);
    ck_assert_int_eq(sl_queue_create(&q, 1), 0);
    sl_queue_close(q, SL_END, NULL);
    ck_assert_int_eq(sl_queue_error(q, &err), SL_ECLOSED);
    sl_queue_destroy(q);
}
END_TEST

/* ---- threads ---------------------------------------------------------- */

#define PRODUCERS 4
#define CONSUMERS 4
#define PER_PRODUCER 25000

struct stress {
    struct sl_queue *q;
    atomic_int next_id;
    uint8_t *seen[CONSUMERS]; /* per consumer: times each item was seen */
    int order_ok[CONSUMERS];
    long count[CONSUMERS];
};

static void *producer(void *arg)
{
    struct stress *s = arg;
    int id = atomic_fetch_add(&s->next_id, 1);
    for (uintptr_t i = 0; i < PER_PRODUCER; i++) {
        /* item = producer * PER_PRODUCER + i + 1 (never NULL) */
        uintptr_t v = (uintptr_t)id * PER_PRODUCER + i + 1;
        int rc = (i % 7 == 0) ? sl_queue_try_push(s->q, item(v)) : SL_ETIMEOUT;
        if (rc == SL_ETIMEOUT)
            rc = sl_queue_push(s->q, item(v));
        if (rc != 0)
            return item(1);
    }
    return NULL;
}

static void *consumer(void *arg)
{
    struct stress *s = arg;
    int id = atomic_fetch_add(&s->next_id, 1) - PRODUCERS;
    uintptr_t last[PRODUCERS] = {0};
    s->order_ok[id] = 1;
    for (;;) {
        void *out;
        int rc = (s->count[id] % 5 == 0) ? sl_queue_pop_timeout(s->q, &out, 1) : sl_queue_pop(s->q, &out);
        if (rc == SL_ETIMEOUT)
            continue;
        if (rc == SL_ECLOSED)
            break;
        if (rc != 0)
            return item(1);
        uintptr_t v = (uintptr_t)out - 1;
        s->seen[id][v]++;
        s->count[id]++;
        /* each producer's items arrive in the order it pushed them */
        uintptr_t p = v / PER_PRODUCER;
        if (v + 1 <= last[p])
            s->order_ok[id] = 0;
        last[p] = v + 1;
    }
    return NULL;
}

START_TEST(test_mpmc_stress)
{
    struct stress s;
    memset(&s, 0, sizeof s);
    ck_assert_int_eq(sl_queue_create(&s.q, 16), 0);
    const size_t total = (size_t)PRODUCERS * PER_PRODUCER;
    for (int c = 0; c < CONSUMERS; c++)
        s.seen[c] = calloc(total, 1);
    pthread_t prod[PRODUCERS], cons[CONSUMERS];
    atomic_store(&s.next_id, 0);
    for (int i = 0; i < PRODUCERS; i++)
        ck_assert_int_eq(pthread_create(&prod[i], NULL, producer, &s), 0);
    /* consumers take ids PRODUCERS.. once every producer has its id */
    while (atomic_load(&s.next_id) < PRODUCERS)
        sleep_ms(1);
    for (int i = 0; i < CONSUMERS; i++)
        ck_assert_int_eq(pthread_create(&cons[i], NULL, consumer, &s), 0);
    for (int i = 0; i < PRODUCERS; i++) {
        void *r;
        pthread_join(prod[i], &r);
        ck_assert_ptr_null(r);
    }
    sl_queue_close(s.q, 0, NULL);
    long sum = 0;
    for (int i = 0; i < CONSUMERS; i++) {
        void *r;
        pthread_join(cons[i], &r);
        ck_assert_ptr_null(r);
        ck_assert(s.order_ok[i]);
        sum += s.count[i];
    }
    ck_assert_int_eq(sum, (long)total);
    for (size_t v = 0; v < total; v++) {
        int times = 0;
        for (int c = 0; c < CONSUMERS; c++)
            times += s.seen[c][v];
        ck_assert_msg(times == 1, "item %zu seen %d times", v, times);
    }
    ck_assert_uint_eq(sl_queue_len(s.q), 0);
    for (int c = 0; c < CONSUMERS; c++)
        free(s.seen[c]);
    sl_queue_destroy(s.q);
}
END_TEST

struct waiter {
    struct sl_queue *q;
    atomic_int *started;
    int push;        /* 1: push, 0: pop */
    long timeout_ms; /* pop only; < 0: plain pop */
    int rc;
};

static void *wait_thread(void *arg)
{
    struct waiter *w = arg;
    atomic_fetch_add(w->started, 1);
    void *out;
    if (w->push)
        w->rc = sl_queue_push(w->q, item(42));
    else if (w->timeout_ms >= 0)
        w->rc = sl_queue_pop_timeout(w->q, &out, w->timeout_ms);
    else
        w->rc = sl_queue_pop(w->q, &out);
    return NULL;
}

START_TEST(test_error_close_wakes_every_waiter)
{
    struct sl_queue *full, *empty;
    ck_assert_int_eq(sl_queue_create(&full, 1), 0);
    ck_assert_int_eq(sl_queue_create(&empty, 1), 0);
    ck_assert_int_eq(sl_queue_push(full, item(1)), 0);
    atomic_int started;
    atomic_store(&started, 0);
    struct waiter w[6];
    pthread_t t[6];
    for (int i = 0; i < 6; i++) {
        w[i] = (struct waiter){
            .q = i < 3 ? full : empty, .started = &started, .push = i < 3, .timeout_ms = i == 5 ? 60000 : -1, .rc = 99};
        ck_assert_int_eq(pthread_create(&t[i], NULL, wait_thread, &w[i]), 0);
    }
    while (atomic_load(&started) < 6)
        sleep_ms(1);
    sleep_ms(50); /* let them block */
    uint64_t t0 = sl_clock_ns();
    sl_queue_close(full, SL_EPROTO, "feeder 0: bad header");
    sl_queue_close(empty, SL_ETIMEOUT, "feeder 1: silent for 10 s");
    for (int i = 0; i < 6; i++)
        pthread_join(t[i], NULL);
    ck_assert_uint_lt(sl_clock_ns() - t0, 5000000000u);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(w[i].rc, SL_EPROTO);
    for (int i = 3; i < 6; i++)
        ck_assert_int_eq(w[i].rc, SL_ETIMEOUT);
    struct sl_error err = {0};
    ck_assert_int_eq(sl_queue_error(empty, &err), SL_ETIMEOUT);
    ck_assert_str_eq(err.msg, "feeder 1: silent for 10 s");
    sl_queue_destroy(full);
    sl_queue_destroy(empty);
}
END_TEST

START_TEST(test_normal_close_wakes_consumers)
{
    struct sl_queue *q;
    ck_assert_int_eq(sl_queue_create(&q, 2), 0);
    atomic_int started;
    atomic_store(&started, 0);
    struct waiter w[3];
    pthread_t t[3];
    for (int i = 0; i < 3; i++) {
        w[i] = (struct waiter){.q = q, .started = &started, .push = 0, .timeout_ms = i == 0 ? 60000 : -1, .rc = 99};
        ck_assert_int_eq(pthread_create(&t[i], NULL, wait_thread, &w[i]), 0);
    }
    while (atomic_load(&started) < 3)
        sleep_ms(1);
    sleep_ms(30);
    sl_queue_close(q, 0, NULL);
    for (int i = 0; i < 3; i++) {
        pthread_join(t[i], NULL);
        ck_assert_int_eq(w[i].rc, SL_ECLOSED);
    }
    sl_queue_destroy(q);
}
END_TEST

static void *push_later(void *arg)
{
    sleep_ms(50);
    if (sl_queue_push(arg, item(9)) != 0)
        return item(1);
    return NULL;
}

START_TEST(test_blocked_pop_gets_item)
{
    struct sl_queue *q;
    ck_assert_int_eq(sl_queue_create(&q, 1), 0);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, push_later, q), 0);
    void *out;
    ck_assert_int_eq(sl_queue_pop_timeout(q, &out, 10000), 0);
    ck_assert_ptr_eq(out, item(9));
    void *r;
    pthread_join(t, &r);
    ck_assert_ptr_null(r);
    /* and a blocked push goes through once a pop makes room */
    ck_assert_int_eq(sl_queue_push(q, item(1)), 0);
    ck_assert_int_eq(pthread_create(&t, NULL, push_later, q), 0);
    sleep_ms(100);
    ck_assert_int_eq(sl_queue_pop(q, &out), 0);
    ck_assert_ptr_eq(out, item(1));
    pthread_join(t, &r);
    ck_assert_ptr_null(r);
    ck_assert_int_eq(sl_queue_pop(q, &out), 0);
    ck_assert_ptr_eq(out, item(9));
    sl_queue_destroy(q);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("sl_queue");
    TCase *tc = tcase_create("single");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_create_invalid_and_nomem);
    tcase_add_test(tc, test_fifo_full_empty);
    tcase_add_test(tc, test_pop_timeout);
    tcase_add_test(tc, test_normal_close_drains);
    tcase_add_test(tc, test_error_close_fails_fast);
    suite_add_tcase(s, tc);
    tc = tcase_create("threads");
    tcase_set_timeout(tc, 100);
    tcase_add_test(tc, test_mpmc_stress);
    tcase_add_test(tc, test_error_close_wakes_every_waiter);
    tcase_add_test(tc, test_normal_close_wakes_consumers);
    tcase_add_test(tc, test_blocked_pop_gets_item);
    suite_add_tcase(s, tc);
    return s;
}
