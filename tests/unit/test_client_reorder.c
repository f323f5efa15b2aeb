/* client_reorder: any arrival order within the window comes out in seq
 * order; duplicates, replays and out-of-window pieces are protocol errors. */
#include <stdint.h>

#include "sl_test.h"
#include "client_reorder.h"

START_TEST(test_reverse_and_interleaved_arrival)
{
    struct client_reorder *r;
    struct sl_error err = {0};
    ck_assert_int_eq(client_reorder_create(&r, 8, &err), 0);
    static int items[64];
    /* three "feeders": seq % 3 each, each in its own order, batches of 8 */
    for (uint64_t base = 0; base < 64; base += 8) {
        for (int k = 7; k >= 0; k--)
            ck_assert_int_eq(client_reorder_put(r, base + (uint64_t)k, &items[base + (uint64_t)k], &err), 0);
        for (uint64_t k = 0; k < 8; k++)
            ck_assert_ptr_eq(client_reorder_pop(r), &items[base + k]);
        ck_assert_ptr_null(client_reorder_pop(r));
    }
    ck_assert_uint_eq(client_reorder_next(r), 64);
    ck_assert_uint_eq(client_reorder_held(r), 0);
    client_reorder_destroy(r);
}
END_TEST

/* A resumed stream starts at its resume point: earlier seqs are replays,
 * the window counts from there; a restart with pieces held is refused. */
START_TEST(test_restart)
{
    struct client_reorder *r;
    struct sl_error err = {0};
    ck_assert_int_eq(client_reorder_create(&r, 4, &err), 0);
    int a, b;
    ck_assert_int_eq(client_reorder_restart(r, 1000000), 0);
    ck_assert_uint_eq(client_reorder_next(r), 1000000);
    ck_assert_int_eq(client_reorder_put(r, 999999, &a, &err), SL_EPROTO);
    ck_assert_int_eq(client_reorder_put(r, 1000004, &a, &err), SL_EPROTO);
    ck_assert_int_eq(client_reorder_put(r, 1000001, &b, &err), 0);
    ck_assert_int_eq(client_reorder_restart(r, 0), -1);
    ck_assert_uint_eq(client_reorder_next(r), 1000000);
    ck_assert_ptr_null(client_reorder_pop(r));
    ck_assert_int_eq(client_reorder_put(r, 1000000, &a, &err), 0);
    ck_assert_ptr_eq(client_reorder_pop(r), &a);
    ck_assert_ptr_eq(client_reorder_pop(r), &b);
    ck_assert_uint_eq(client_reorder_next(r), 1000002);
    client_reorder_destroy(r);
}
END_TEST

START_TEST(test_gaps_wait)
{
    struct client_reorder *r;
    struct sl_error err = {0};
    ck_assert_int_eq(client_reorder_create(&r, 4, &err), 0);
    int a, b, c;
    ck_assert_int_eq(client_reorder_put(r, 1, &b, &err), 0);
    ck_assert_int_eq(client_reorder_put(r, 2, &c, &err), 0);
    ck_assert_ptr_null(client_reorder_pop(r));
    ck_assert_int_eq(client_reorder_put(r, 0, &a, &err), 0);
    ck_assert_ptr_eq(client_reorder_pop(r), &a);
    ck_assert_ptr_eq(client_reorder_pop(r), &b);
    ck_assert_ptr_eq(client_reorder_pop(r), &c);
    client_reorder_destroy(r);
}
END_TEST

START_TEST(test_protocol_errors)
{
    struct client_reorder *r;
    struct sl_error err = {0};
    ck_assert_int_eq(client_reorder_create(&r, 4, &err), 0);
    int a;
    ck_assert_int_eq(client_reorder_put(r, 4, &a, &err), SL_EPROTO);
    ck_assert_str_eq(err.msg, "piece 4 is beyond the credit window (next 0, window 4)");
    ck_assert_int_eq(client_reorder_put(r, 0, &a, &err), 0);
    ck_assert_int_eq(client_reorder_put(r, 0, &a, &err), SL_EPROTO);
    ck_assert_str_eq(err.msg, "piece 0 arrived twice");
    ck_assert_ptr_eq(client_reorder_pop(r), &a);
    ck_assert_int_eq(client_reorder_put(r, 0, &a, &err), SL_EPROTO);
    ck_assert_str_eq(err.msg, "piece 0 arrived again (already delivered up to 1)");
    client_reorder_destroy(r);
}
END_TEST

/* A rejoining feeder: what it sent is taken back out, and may then arrive
 * again without being a duplicate. */
START_TEST(test_take)
{
    struct client_reorder *r;
    struct sl_error err = {0};
    ck_assert_int_eq(client_reorder_create(&r, 6, &err), 0);
    int a, b, c, d;
    ck_assert_int_eq(client_reorder_put(r, 0, &a, &err), 0);
    ck_assert_ptr_eq(client_reorder_pop(r), &a);
    ck_assert_int_eq(client_reorder_put(r, 2, &b, &err), 0);
    ck_assert_int_eq(client_reorder_put(r, 4, &c, &err), 0);
    ck_assert_int_eq(client_reorder_put(r, 5, &d, &err), 0);
    ck_assert_ptr_null(client_reorder_take(r, 0)); /* delivered */
    ck_assert_ptr_null(client_reorder_take(r, 3));
    ck_assert_ptr_null(client_reorder_take(r, 99));
    ck_assert_ptr_eq(client_reorder_take(r, 4), &c);
    ck_assert_ptr_null(client_reorder_take(r, 4));
    ck_assert_uint_eq(client_reorder_held(r), 2);
    ck_assert_int_eq(client_reorder_put(r, 4, &c, &err), 0); /* comes again: not "arrived twice" */
    ck_assert_int_eq(client_reorder_put(r, 1, &a, &err), 0);
    ck_assert_int_eq(client_reorder_put(r, 3, &a, &err), 0);
    ck_assert_ptr_eq(client_reorder_pop(r), &a);
    ck_assert_ptr_eq(client_reorder_pop(r), &b);
    ck_assert_ptr_eq(client_reorder_pop(r), &a);
    ck_assert_ptr_eq(client_reorder_pop(r), &c);
    ck_assert_ptr_eq(client_reorder_pop(r), &d);
    ck_assert_ptr_null(client_reorder_pop(r));
    ck_assert_uint_eq(client_reorder_held(r), 0);
    client_reorder_destroy(r);
}
END_TEST

/* Feeders joined (a reshape): the window grows, only while nothing is
 * held; the position is kept, and the larger window takes pieces the
 * smaller refused. */
START_TEST(test_resize)
{
    struct client_reorder *r;
    struct sl_error err = {0};
    ck_assert_int_eq(client_reorder_create(&r, 4, &err), 0);
    int a, b, c;
    ck_assert_int_eq(client_reorder_restart(r, 10), 0);
    ck_assert_int_eq(client_reorder_put(r, 11, &b, &err), 0);
    ck_assert_int_eq(client_reorder_resize(r, 16), -1); /* one held */
    ck_assert_ptr_eq(client_reorder_take(r, 11), &b);
    ck_assert_int_eq(client_reorder_resize(r, 0), -1);
    ck_assert_int_eq(client_reorder_put(r, 14, &c, &err), SL_EPROTO); /* beyond 4 */
    ck_assert_int_eq(client_reorder_resize(r, 16), 0);
    ck_assert_uint_eq(client_reorder_next(r), 10);
    ck_assert_int_eq(client_reorder_put(r, 25, &c, &err), 0);
    ck_assert_int_eq(client_reorder_put(r, 26, &c, &err), SL_EPROTO); /* beyond 16 */
    ck_assert_int_eq(client_reorder_put(r, 10, &a, &err), 0);
    ck_assert_ptr_eq(client_reorder_pop(r), &a);
    ck_assert_ptr_null(client_reorder_pop(r));
    ck_assert_ptr_eq(client_reorder_take(r, 25), &c);
    ck_assert_uint_eq(client_reorder_held(r), 0);
    client_reorder_destroy(r);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("client_reorder");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_reverse_and_interleaved_arrival);
    tcase_add_test(tc, test_gaps_wait);
    tcase_add_test(tc, test_protocol_errors);
    tcase_add_test(tc, test_take);
    tcase_add_test(tc, test_restart);
    tcase_add_test(tc, test_resize);
    suite_add_tcase(s, tc);
    return s;
}
