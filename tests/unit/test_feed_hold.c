/* feed_hold: the shared-memory offer's states, and buffers held at their
 * ordinals until credits come back, released in order, never past what
 * was scheduled, never twice. */
#include <stdint.h>

#include "feed_hold.h"
#include "sl_pool.h"
#include "sl_test.h"
#include "sl_wire.h"

START_TEST(test_offer_states)
{
    ck_assert_int_eq(feed_shm_offer(1, SL_WIRE_HELLO_SHM), FEED_SHM_PENDING);
    ck_assert_int_eq(feed_shm_offer(0, SL_WIRE_HELLO_SHM), FEED_SHM_NONE);
    ck_assert_int_eq(feed_shm_offer(1, 0), FEED_SHM_NONE);
    ck_assert_int_eq(feed_shm_answer(FEED_SHM_PENDING, SL_WIRE_CREDIT_SHM), FEED_SHM_ON);
    ck_assert_int_eq(feed_shm_answer(FEED_SHM_PENDING, 0), FEED_SHM_DECLINED);
    /* only the first CREDIT after an offer answers it */
    ck_assert_int_eq(feed_shm_answer(FEED_SHM_ON, 0), FEED_SHM_ON);
    ck_assert_int_eq(feed_shm_answer(FEED_SHM_DECLINED, SL_WIRE_CREDIT_SHM), FEED_SHM_DECLINED);
    ck_assert_int_eq(feed_shm_answer(FEED_SHM_NONE, SL_WIRE_CREDIT_SHM), FEED_SHM_NONE);
}
END_TEST

static size_t free_bufs(struct sl_pool *p)
{
    struct sl_pool_stats st;
    sl_pool_stats(p, &st);
    return st.nbufs - st.in_use;
}

START_TEST(test_hold_and_release_in_order)
{
    struct sl_pool *pool;
    ck_assert_int_eq(sl_pool_create(&pool, 8, 64), 0);
    struct feed_hold h;
    ck_assert_int_eq(feed_hold_init(&h, 3), 0); /* window 3: a ring of 6 */
    ck_assert_uint_eq(h.cap, 6);
    uint8_t *b[8];
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(sl_pool_get(pool, (void **)&b[i]), 0);
    /* finished out of order, held at their ordinals */
    ck_assert_int_eq(feed_hold_put(&h, 2, b[2]), 0);
    ck_assert_int_eq(feed_hold_put(&h, 0, b[0]), 0);
    ck_assert_int_eq(feed_hold_put(&h, 1, b[1]), 0);
    ck_assert_int_eq(feed_hold_put(&h, 5, b[5]), 0);
    /* a place taken, and one past the ring, are refused */
    ck_assert_int_eq(feed_hold_put(&h, 2, b[3]), -1);
    ck_assert_int_eq(feed_hold_put(&h, 6, b[3]), -1);
    ck_assert_uint_eq(free_bufs(pool), 2);
    /* two credits release ordinals 0 and 1 */
    feed_hold_release(&h, pool, 2, 6);
    ck_assert_uint_eq(h.released, 2);
    ck_assert_uint_eq(free_bufs(pool), 4);
    /* a consumed ordinal cannot be held again */
    ck_assert_int_eq(feed_hold_put(&h, 1, b[3]), -1);
    /* now ordinal 6 and 7 fit (the ring moved on), 8 does not */
    ck_assert_int_eq(feed_hold_put(&h, 6, b[3]), 0);
    ck_assert_int_eq(feed_hold_put(&h, 7, b[4]), 0);
    ck_assert_int_eq(feed_hold_put(&h, 8, b[4]), -1);
    /* credits beyond what was scheduled release nothing more */
    feed_hold_release(&h, pool, 100, 3);
    ck_assert_uint_eq(h.released, 3);
    ck_assert_uint_eq(free_bufs(pool), 5); /* ordinal 2 */
    /* the rest (5, 6, 7) at once; the count starts again */
    feed_hold_release_all(&h, pool);
    ck_assert_uint_eq(h.released, 0);
    ck_assert_uint_eq(free_bufs(pool), 8);
    feed_hold_free(&h);
    feed_hold_free(&h); /* twice is harmless */
    ck_assert_int_eq(sl_pool_wait_idle(pool, 0), 0);
    sl_pool_destroy(pool);
}
END_TEST

START_TEST(test_uninitialised_hold_refuses)
{
    struct feed_hold h = {0};
    ck_assert_int_eq(feed_hold_put(&h, 0, (uint8_t *)&h), -1);
    feed_hold_release(&h, NULL, 5, 5);
    feed_hold_release_all(&h, NULL);
    ck_assert_uint_eq(h.released, 0);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("feed_hold");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_offer_states);
    tcase_add_test(tc, test_hold_and_release_in_order);
    tcase_add_test(tc, test_uninitialised_hold_refuses);
    suite_add_tcase(s, tc);
    return s;
}
