/* train_collective_local: real threads (R = 1..8) arriving in random order
 * all leave with bitwise-identical results equal to an in-replica-order
 * reference; an abort (from outside or from a replica) wakes every waiter,
 * but never undoes a round that completed before it; misuse inside a round
 * (a replica out of range, the same replica twice, a length shorter or
 * longer than replica 0's) fails the round for everybody instead of
 * hanging. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "sl_clock.h"
#include "sl_test.h"
#include "train_collective_local.h"

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= UINT64_C(0xbf58476d1ce4e5b9);
    x ^= x >> 27;
    x *= UINT64_C(0x94d049bb133111eb);
    x ^= x >> 31;
    return x;
}

/* Input of (round, replica, element): mixed magnitudes so that the order of
 * additions shows in the result bits. */
static float input_value(int round, int replica, size_t j)
{
    static const float scale[7] = {1e-3f, 1e-2f, 1e-1f, 1.0f, 1e1f, 1e2f, 1e3f};
    uint64_t h = mix64(((uint64_t)round << 40) ^ ((uint64_t)replica << 24) ^ (uint64_t)j);
    float mant = (float)(h % 2000001) / 1000000.0f - 1.0f;
    return mant * scale[(h >> 32) % 7];
}

static void sleep_us(long us)
{
    struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

enum { ROUNDS = 12, NVALS = 257, MAXR = 8 };

struct worker {
    struct train_local_group *g;
    int replica;
    int replicas;
    uint64_t rng;
    int rc;
    float results[ROUNDS][NVALS];
};

static enum train_reduce_op round_op(int round)
{
    return round % 2 == 0 ? TRAIN_SUM : TRAIN_MEAN;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    for (int round = 0; round < ROUNDS; round++) {
        float *buf = w->results[round];
        for (size_t j = 0; j < NVALS; j++)
            buf[j] = input_value(round, w->replica, j);
        w->rng = mix64(w->rng + 1);
        sleep_us((long)(w->rng % 1500));
        struct sl_error err = {0};
        w->rc = train_local_all_reduce(w->g, w->replica, buf, NVALS, round_op(round), &err);
        if (w->rc != 0)
            return NULL;
    }
    return NULL;
}

START_TEST(test_threads_bitwise_identical)
{
    static struct worker workers[MAXR];
    for (int replicas = 1; replicas <= MAXR; replicas++) {
        struct train_local_group *g;
        struct sl_error err = {0};
        ck_assert_int_eq(train_local_group_create(&g, replicas, &err), 0);
        pthread_t tids[MAXR];
        for (int r = 0; r < replicas; r++) {
            workers[r] = (struct worker){.g = g,
                                         .replica = r,
                                         .replicas = replicas,
                                         .rng = mix64((uint64_t)(replicas * 100 + r) + (uint64_t)_i)};
            ck_assert_int_eq(pthread_create(&tids[r], NULL, worker_main, &workers[r]), 0);
        }
        for (int r = 0; r < replicas; r++) {
            pthread_join(tids[r], NULL);
            ck_assert_int_eq(workers[r].rc, 0);
        }
        for (int round = 0; round < ROUNDS; round++) {
            float want[NVALS];
            for (size_t j = 0; j < NVALS; j++) {
                float total = input_value(round, 0, j);
                for (int r = 1; r < replicas; r++)
                    total += input_value(round, r, j);
                want[j] = round_op(round) == TRAIN_MEAN ? total / (float)replicas : total;
            }
            for (int r = 0; r < replicas; r++)
                ck_assert_mem_eq(workers[r].results[round], want, sizeof want);
        }
        ck_assert_int_eq(train_local_group_status(g), 0);
        train_local_group_destroy(g);
    }
}
END_TEST

struct ordered {
    struct train_local_group *g;
    int replica;
    long delay_us;
    float value;
    int rc;
};

static void *ordered_main(void *arg)
{
    struct ordered *o = arg;
    sleep_us(o->delay_us);
    struct sl_error err = {0};
    o->rc = train_local_all_reduce(o->g, o->replica, &o->value, 1, TRAIN_SUM, &err);
    return NULL;
}

/* Replicas arrive 2, 1, 0: the sum is still (1e8 + -1e8) + 1 = 1 in
 * replica order; in arrival order float32 would give (1 + -1e8) + 1e8 = 0. */
START_TEST(test_replica_order_not_arrival_order)
{
    struct train_local_group *g;
    struct sl_error err = {0};
    ck_assert_int_eq(train_local_group_create(&g, 3, &err), 0);
    struct ordered o[3] = {
        {.g = g, .replica = 0, .delay_us = 40000, .value = 1e8f},
        {.g = g, .replica = 1, .delay_us = 20000, .value = -1e8f},
        {.g = g, .replica = 2, .delay_us = 0, .value = 1.0f},
    };
    pthread_t tids[3];
    for (int r = 0; r < 3; r++)
        ck_assert_int_eq(pthread_create(&tids[r], NULL, ordered_main, &o[r]), 0);
    for (int r = 0; r < 3; r++) {
        pthread_join(tids[r], NULL);
        ck_assert_int_eq(o[r].rc, 0);
        ck_assert_float_eq(o[r].value, 1.0f);
    }
    train_local_group_destroy(g);
}
END_TEST

struct waiter {
    struct train_local_group *g;
    int replica;
    size_t n;
    float buf[8];
    int rc;
    struct sl_error err;
};

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    w->rc = train_local_all_reduce(w->g, w->replica, w->buf, w->n, TRAIN_SUM, &w->err);
    return NULL;
}

/* Three of four replicas wait; the fourth fails and aborts: all wake with
 * the abort's error, and later calls fail the same way at once. */
START_TEST(test_abort_wakes_all)
{
    struct train_local_group *g;
    struct sl_error err = {0};
    ck_assert_int_eq(train_local_group_create(&g, 4, &err), 0);
    struct waiter w[3];
    pthread_t tids[3];
    for (int r = 0; r < 3; r++) {
        w[r] = (struct waiter){.g = g, .replica = r, .n = 4};
        ck_assert_int_eq(pthread_create(&tids[r], NULL, waiter_main, &w[r]), 0);
    }
    sleep_us(50000);
    train_local_group_abort(g, SL_EIO, "replica 3: step failed: boom");
    train_local_group_abort(g, SL_ETIMEOUT, "second error loses");
    for (int r = 0; r < 3; r++) {
        pthread_join(tids[r], NULL);
        ck_assert_int_eq(w[r].rc, SL_EIO);
        ck_assert_str_eq(w[r].err.msg, "replica 3: step failed: boom");
    }
    ck_assert_int_eq(train_local_group_status(g), SL_EIO);
    float x = 1;
    ck_assert_int_eq(train_local_all_reduce(g, 3, &x, 1, TRAIN_SUM, &err), SL_EIO);
    ck_assert_str_eq(err.msg, "replica 3: step failed: boom");
    train_local_group_destroy(g);
}
END_TEST

/* Replicas that disagree on the length fail the round together, whether
 * replica 1 has fewer values than replica 0 or more (a check weakened to
 * "fewer" would let the longer one through with its tail ignored). */
START_TEST(test_mismatched_length_fails_everyone)
{
    static const size_t n1[4] = {3, 3, 5, 5};
    static const char *const msg[4] = {
        "all-reduce: replica 1 passed 3 values but replica 0 passed 4",
        "all-reduce: replica 1 passed 3 values but replica 0 passed 4",
        "all-reduce: replica 1 passed 5 values but replica 0 passed 4",
        "all-reduce: replica 1 passed 5 values but replica 0 passed 4",
    };
    for (int last = 0; last < 4; last++) {
        struct train_local_group *g;
        struct sl_error err = {0};
        ck_assert_int_eq(train_local_group_create(&g, 3, &err), 0);
        struct waiter w[3];
        pthread_t tids[3];
        for (int r = 0; r < 3; r++)
            w[r] = (struct waiter){.g = g, .replica = r, .n = r == 1 ? n1[last] : 4};
        /* vary who arrives last, i.e. who detects it */
        int order[4][3] = {{0, 1, 2}, {2, 0, 1}, {0, 1, 2}, {1, 2, 0}};
        for (int k = 0; k < 3; k++) {
            int r = order[last][k];
            ck_assert_int_eq(pthread_create(&tids[r], NULL, waiter_main, &w[r]), 0);
            sleep_us(10000);
        }
        for (int r = 0; r < 3; r++) {
            pthread_join(tids[r], NULL);
            ck_assert_int_eq(w[r].rc, SL_EINVAL);
            ck_assert_str_eq(w[r].err.msg, msg[last]);
        }
        train_local_group_destroy(g);
    }
}
END_TEST

/* A round whose every replica arrived has completed for all of them, even
 * when an abort lands before a waiter has woken up to see it (the header
 * promises it: an abort fails only rounds that had not completed). Replica
 * 2 arrives last (after a short pause), returns, and aborts at once, while
 * replicas 0 and 1 are still on their way out of the wait; they must return
 * 0 and the sum. Deciding a waiter's result by the failure code instead of
 * the generation fails here within a few hundred tries. Bounded: 2,000
 * tries or 2.5 s. */
struct racer {
    struct train_local_group *g;
    int replica;
    float value;
    int rc;
    struct sl_error err;
};

static void *racer_main(void *arg)
{
    struct racer *r = arg;
    r->rc = train_local_all_reduce(r->g, r->replica, &r->value, 1, TRAIN_SUM, &r->err);
    return NULL;
}

START_TEST(test_completed_round_survives_later_abort)
{
    uint64_t t0 = sl_clock_ns();
    int tries = 0;
    for (; tries < 2000 && sl_clock_ns() - t0 < 2500000000u; tries++) {
        struct train_local_group *g;
        struct sl_error err = {0};
        ck_assert_int_eq(train_local_group_create(&g, 3, &err), 0);
        struct racer r[2];
        pthread_t tids[2];
        for (int k = 0; k < 2; k++) {
            r[k] = (struct racer){.g = g, .replica = k, .value = (float)(k + 1)};
            ck_assert_int_eq(pthread_create(&tids[k], NULL, racer_main, &r[k]), 0);
        }
        sleep_us(tries % 4 == 0 ? 0 : 30); /* mostly last; sometimes not */
        float mine = 4.0f;
        ck_assert_int_eq(train_local_all_reduce(g, 2, &mine, 1, TRAIN_SUM, &err), 0);
        train_local_group_abort(g, SL_EIO, "late abort");
        ck_assert_float_eq(mine, 7.0f);
        for (int k = 0; k < 2; k++) {
            pthread_join(tids[k], NULL);
            ck_assert_msg(r[k].rc == 0, "try %d: replica %d of a completed round got %d (%s)", tries, k, r[k].rc,
                          r[k].err.msg);
            ck_assert_float_eq(r[k].value, 7.0f);
        }
        /* the abort stands for every later round */
        ck_assert_int_eq(train_local_group_status(g), SL_EIO);
        ck_assert_int_eq(train_local_all_reduce(g, 0, &mine, 1, TRAIN_SUM, &err), SL_EIO);
        ck_assert_str_eq(err.msg, "late abort");
        train_local_group_destroy(g);
    }
    ck_assert_int_ge(tries, 50);
}
END_TEST

START_TEST(test_misuse_aborts_group)
{
    struct train_local_group *g;
    struct sl_error err = {0};
    ck_assert_int_eq(train_local_group_create(&g, 2, &err), 0);
    struct waiter w = {.g = g, .replica = 0, .n = 4};
    pthread_t tid;
    ck_assert_int_eq(pthread_create(&tid, NULL, waiter_main, &w), 0);
    sleep_us(20000);
    float x = 0;
    ck_assert_int_eq(train_local_all_reduce(g, 2, &x, 1, TRAIN_SUM, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "all-reduce: replica 2 is outside 0..1");
    pthread_join(tid, NULL);
    ck_assert_int_eq(w.rc, SL_EINVAL);
    ck_assert_str_eq(w.err.msg, "all-reduce: replica 2 is outside 0..1");
    train_local_group_destroy(g);

    /* the same replica twice in one round: both calls fail, nobody waits
     * for a round that can never fill (and replica 1's later call sees the
     * abort) */
    ck_assert_int_eq(train_local_group_create(&g, 2, &err), 0);
    w = (struct waiter){.g = g, .replica = 0, .n = 1, .buf = {5.0f}};
    ck_assert_int_eq(pthread_create(&tid, NULL, waiter_main, &w), 0);
    sleep_us(20000);
    x = 6.0f;
    ck_assert_int_eq(train_local_all_reduce(g, 0, &x, 1, TRAIN_SUM, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "all-reduce: replica 0 joined the same round twice");
    pthread_join(tid, NULL);
    ck_assert_int_eq(w.rc, SL_EINVAL);
    ck_assert_str_eq(w.err.msg, "all-reduce: replica 0 joined the same round twice");
    ck_assert_float_eq(x, 6.0f);
    ck_assert_int_eq(train_local_all_reduce(g, 1, &x, 1, TRAIN_SUM, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "all-reduce: replica 0 joined the same round twice");
    ck_assert_int_eq(train_local_group_status(g), SL_EINVAL);
    train_local_group_destroy(g);

    ck_assert_int_eq(train_local_group_create(&g, 0, &err), SL_EINVAL);
    ck_assert_ptr_null(g);
    ck_assert_int_eq(train_local_group_create(&g, 1025, &err), SL_EINVAL);
    train_local_group_destroy(NULL);
}
END_TEST

/* One replica: the round returns at once; MEAN / 1 is the value; an empty
 * round with a NULL buffer is fine. */
START_TEST(test_single_replica_and_empty_round)
{
    struct train_local_group *g;
    struct sl_error err = {0};
    ck_assert_int_eq(train_local_group_create(&g, 1, &err), 0);
    float v[2] = {3.5f, -2.0f};
    ck_assert_int_eq(train_local_all_reduce(g, 0, v, 2, TRAIN_MEAN, &err), 0);
    ck_assert_float_eq(v[0], 3.5f);
    ck_assert_float_eq(v[1], -2.0f);
    ck_assert_int_eq(train_local_all_reduce(g, 0, NULL, 0, TRAIN_SUM, &err), 0);
    ck_assert_int_eq(train_local_all_reduce(g, 0, v, 2, (enum train_reduce_op)9, &err), SL_EINVAL);
    ck_assert_int_eq(train_local_group_status(g), SL_EINVAL);
    train_local_group_destroy(g);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("train_collective_local");
    TCase *tc = tcase_create("all_reduce");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_threads_bitwise_identical, 0, 3);
    tcase_add_test(tc, test_replica_order_not_arrival_order);
    tcase_add_test(tc, test_abort_wakes_all);
    tcase_add_test(tc, test_mismatched_length_fails_everyone);
    tcase_add_test(tc, test_completed_round_survives_later_abort);
    tcase_add_test(tc, test_misuse_aborts_group);
    tcase_add_test(tc, test_single_replica_and_empty_round);
    suite_add_tcase(s, tc);
    return s;
}
