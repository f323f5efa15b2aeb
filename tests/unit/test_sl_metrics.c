/* sl_metrics: a table is checked at create; counters add, gauges set,
 * out-of-range ids and a NULL object are ignored; snapshots see every
 * add made by threads that finished (exact sums under contention; run
 * under TSan too). */
#include <pthread.h>
#include <stdint.h>

#include "sl_metrics.h"
#include "sl_test.h"

static const struct sl_metric_def defs[] = {
    {"pieces", SL_METRIC_COUNTER, "pieces sent"},
    {"wait_s", SL_METRIC_NS, "time waiting"},
    {"pool_bytes", SL_METRIC_GAUGE, "memory"},
    {"loss", SL_METRIC_REAL, "the last loss"},
};

START_TEST(test_create_checks_the_table)
{
    struct sl_metrics *m = (struct sl_metrics *)1;
    static const struct sl_metric_def dup[] = {{"a", SL_METRIC_COUNTER, ""}, {"a", SL_METRIC_NS, ""}};
    ck_assert_int_eq(sl_metrics_create(&m, dup, 2), SL_EINVAL);
    ck_assert_ptr_null(m);
    static const struct sl_metric_def unnamed[] = {{"a", SL_METRIC_COUNTER, ""}, {NULL, SL_METRIC_NS, ""}};
    ck_assert_int_eq(sl_metrics_create(&m, unnamed, 2), SL_EINVAL);
    ck_assert_int_eq(sl_metrics_create(&m, NULL, 1), SL_EINVAL);
    ck_assert_int_eq(sl_metrics_create(&m, defs, SL_METRICS_MAX + 1), SL_EINVAL);
    ck_assert_int_eq(sl_metrics_create(&m, NULL, 0), 0); /* an empty table is fine */
    struct sl_metrics_snap s;
    sl_metrics_snapshot(m, &s);
    ck_assert_uint_eq(s.n, 0);
    sl_metrics_destroy(m);
    sl_metrics_destroy(NULL);
}
END_TEST

START_TEST(test_add_set_snapshot)
{
    struct sl_metrics *m;
    ck_assert_int_eq(sl_metrics_create(&m, defs, 3), 0);
    sl_metrics_set_real(m, 3, 2.5); /* out of range in this object: ignored */
    sl_metrics_add(m, 0, 2);
    sl_metrics_add(m, 0, 3);
    sl_metrics_add(m, 1, 1500000000);
    sl_metrics_set(m, 2, 4096);
    sl_metrics_set(m, 2, 1024); /* a gauge is replaced */
    sl_metrics_add(m, 3, 99);   /* out of range: ignored */
    sl_metrics_add(m, UINT32_MAX, 99);
    sl_metrics_add(NULL, 0, 1); /* nothing measured */
    struct sl_metrics_snap s;
    sl_metrics_snapshot(m, &s);
    ck_assert_uint_eq(s.n, 3);
    ck_assert_ptr_eq(s.defs, defs);
    ck_assert_uint_eq(s.v[0], 5);
    ck_assert_uint_eq(s.v[1], 1500000000);
    ck_assert_uint_eq(s.v[2], 1024);
    ck_assert_uint_eq(s.v[3], 0);
    ck_assert_double_eq_tol(sl_metrics_seconds(&s, 1), 1.5, 1e-12);
    ck_assert_double_eq_tol(sl_metrics_seconds(&s, 0), 5.0, 1e-12);
    ck_assert_double_eq_tol(sl_metrics_seconds(&s, 7), 0.0, 1e-12);
    sl_metrics_snapshot(NULL, &s);
    ck_assert_uint_eq(s.n, 0);
    sl_metrics_destroy(m);
}
END_TEST

/* A real gauge keeps a double exactly (negative, tiny, replaced); the other
 * kinds are not reinterpreted. */
START_TEST(test_real_gauge)
{
    struct sl_metrics *m;
    ck_assert_int_eq(sl_metrics_create(&m, defs, 4), 0);
    sl_metrics_set_real(m, 3, 0.693147);
    sl_metrics_set_real(m, 3, -1.25e-300);
    sl_metrics_set_real(m, 2, 3.0); /* a uint64 gauge given a double's bits: read as the number they make */
    sl_metrics_set_real(NULL, 3, 1.0);
    struct sl_metrics_snap s;
    sl_metrics_snapshot(m, &s);
    ck_assert(sl_metrics_seconds(&s, 3) == -1.25e-300);
    ck_assert_uint_eq(s.v[2], 0x4008000000000000u);
    ck_assert(sl_metrics_seconds(&s, 2) == (double)0x4008000000000000u);
    sl_metrics_destroy(m);
}
END_TEST

enum { THREADS = 4, ADDS = 100000 };

static void *adder(void *arg)
{
    struct sl_metrics *m = arg;
    for (int i = 0; i < ADDS; i++) {
        sl_metrics_add(m, 0, 1);
        sl_metrics_add(m, 1, 3);
    }
    return NULL;
}

START_TEST(test_concurrent_adds_are_exact)
{
    struct sl_metrics *m;
    ck_assert_int_eq(sl_metrics_create(&m, defs, 3), 0);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, adder, m), 0);
    struct sl_metrics_snap s;
    uint64_t last = 0;
    for (int i = 0; i < 100; i++) { /* a reader meanwhile sees counts that only grow */
        sl_metrics_snapshot(m, &s);
        ck_assert_uint_ge(s.v[0], last);
        last = s.v[0];
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    sl_metrics_snapshot(m, &s);
    ck_assert_uint_eq(s.v[0], (uint64_t)THREADS * ADDS);
    ck_assert_uint_eq(s.v[1], (uint64_t)THREADS * ADDS * 3);
    sl_metrics_destroy(m);
}
END_TEST

/* sl_metrics_watch: the watcher sees every add to its slot, on the adding
 * thread, with the value after the add; adds to other slots, sets, and
 * adds after it is removed are not seen. sl_metrics_get reads one slot. */
struct seen {
    uint64_t calls, last, sum_of_values;
};

static void watcher(void *ctx, uint64_t v)
{
    struct seen *s = ctx;
    s->calls++;
    s->last = v;
    s->sum_of_values += v;
}

START_TEST(test_watch)
{
    struct sl_metrics *m;
    ck_assert_int_eq(sl_metrics_create(&m, defs, 4), 0);
    struct seen seen = {0};
    sl_metrics_watch(m, 0, watcher, &seen);
    sl_metrics_add(m, 0, 2);
    sl_metrics_add(m, 0, 3);
    sl_metrics_add(m, 1, 7);   /* another slot */
    sl_metrics_set(m, 0, 100); /* a set is no add */
    sl_metrics_add(m, 0, 1);
    ck_assert_uint_eq(seen.calls, 3);
    ck_assert_uint_eq(seen.last, 101);
    ck_assert_uint_eq(seen.sum_of_values, 2 + 5 + 101);
    ck_assert_uint_eq(sl_metrics_get(m, 0), 101);
    ck_assert_uint_eq(sl_metrics_get(m, 1), 7);
    ck_assert_uint_eq(sl_metrics_get(m, 9), 0);
    ck_assert_uint_eq(sl_metrics_get(NULL, 0), 0);
    sl_metrics_watch(m, 1, watcher, &seen); /* moved: slot 0 no longer watched */
    sl_metrics_add(m, 0, 1);
    sl_metrics_add(m, 1, 1);
    ck_assert_uint_eq(seen.calls, 4);
    ck_assert_uint_eq(seen.last, 8);
    sl_metrics_watch(m, 0, NULL, NULL);
    sl_metrics_add(m, 1, 1);
    sl_metrics_add(m, 0, 1);
    ck_assert_uint_eq(seen.calls, 4);
    sl_metrics_watch(NULL, 0, watcher, &seen); /* ignored */
    sl_metrics_destroy(m);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("sl_metrics");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_create_checks_the_table);
    tcase_add_test(tc, test_add_set_snapshot);
    tcase_add_test(tc, test_real_gauge);
    tcase_add_test(tc, test_concurrent_adds_are_exact);
    tcase_add_test(tc, test_watch);
    suite_add_tcase(s, tc);
    return s;
}
