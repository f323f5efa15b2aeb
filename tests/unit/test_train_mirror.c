/* train_mirror: docs/semantics.md 6.3's aggregation semantics (the v=5 MEAN
 * docstring example, SUM, ONLY_FIRST_REPLICA, NONE's error), copies that
 * stay bit-identical over many updates, and divergence caught by the hash
 * check (even a -0.0 that compares equal to 0.0). */
#include <stdint.h>
#include <string.h>

#include "sl_alloc.h"
#include "sl_test.h"
#include "train_mirror.h"

START_TEST(test_docstring_mean_assign_add)
{
    struct train_mirror *m;
    struct sl_error err = {0};
    float init = 5.0f;
    ck_assert_int_eq(train_mirror_create(&m, "v", 1, 2, TRAIN_AGG_MEAN, &init, &err), 0);
    float one = 1.0f;
    const float *updates[2] = {&one, &one};
    ck_assert_int_eq(train_mirror_update(m, updates, TRAIN_ASSIGN_ADD, &err), 0);
    ck_assert_float_eq(train_mirror_copy(m, 0)[0], 6.0f);
    ck_assert_float_eq(train_mirror_copy(m, 1)[0], 6.0f);
    ck_assert_int_eq(train_mirror_check(m, &err), 0);
    ck_assert_uint_eq(train_mirror_hash(m, 0), train_mirror_hash(m, 1));
    train_mirror_destroy(m);
}
END_TEST

START_TEST(test_sum_and_mean_reduce_then_apply)
{
    struct train_mirror *m;
    struct sl_error err = {0};
    float init[2] = {5.0f, 0.0f};
    float u0[2] = {1.0f, 10.0f}, u1[2] = {2.0f, 20.0f}, u2[2] = {6.0f, 30.0f};
    const float *updates[3] = {u0, u1, u2};

    ck_assert_int_eq(train_mirror_create(&m, "sum_var", 2, 3, TRAIN_AGG_SUM, init, &err), 0);
    ck_assert_int_eq(train_mirror_update(m, updates, TRAIN_ASSIGN_ADD, &err), 0);
    for (int r = 0; r < 3; r++) {
        ck_assert_float_eq(train_mirror_copy(m, r)[0], 14.0f);
        ck_assert_float_eq(train_mirror_copy(m, r)[1], 60.0f);
    }
    ck_assert_int_eq(train_mirror_update(m, updates, TRAIN_ASSIGN_SUB, &err), 0);
    for (int r = 0; r < 3; r++) {
        ck_assert_float_eq(train_mirror_copy(m, r)[0], 5.0f);
        ck_assert_float_eq(train_mirror_copy(m, r)[1], 0.0f);
    }
    train_mirror_destroy(m);

    ck_assert_int_eq(train_mirror_create(&m, "mean_var", 2, 3, TRAIN_AGG_MEAN, init, &err), 0);
    ck_assert_int_eq(train_mirror_update(m, updates, TRAIN_ASSIGN, &err), 0);
    for (int r = 0; r < 3; r++) {
        ck_assert_float_eq(train_mirror_copy(m, r)[0], 3.0f);
        ck_assert_float_eq(train_mirror_copy(m, r)[1], 20.0f);
    }
    ck_assert_int_eq(train_mirror_check(m, &err), 0);
    train_mirror_destroy(m);
}
END_TEST

START_TEST(test_only_first_replica_broadcasts)
{
    struct train_mirror *m;
    struct sl_error err = {0};
    float init = 5.0f;
    ck_assert_int_eq(train_mirror_create(&m, "step", 1, 4, TRAIN_AGG_ONLY_FIRST_REPLICA, &init, &err), 0);
    float u0 = 1.0f, u1 = 100.0f, u3 = -7.0f;
    /* replica 2's update is absent: ONLY_FIRST_REPLICA never reads it */
    const float *updates[4] = {&u0, &u1, NULL, &u3};
    ck_assert_int_eq(train_mirror_update(m, updates, TRAIN_ASSIGN_ADD, &err), 0);
    for (int r = 0; r < 4; r++)
        ck_assert_float_eq(train_mirror_copy(m, r)[0], 6.0f);
    ck_assert_int_eq(train_mirror_update(m, updates, TRAIN_ASSIGN, &err), 0);
    for (int r = 0; r < 4; r++)
        ck_assert_float_eq(train_mirror_copy(m, r)[0], 1.0f);
    ck_assert_int_eq(train_mirror_check(m, &err), 0);
    train_mirror_destroy(m);
}
END_TEST

START_TEST(test_aggregation_none_and_bad_updates)
{
    struct train_mirror *m;
    struct sl_error err = {0};
    float init = 5.0f, u = 1.0f;
    const float *updates[2] = {&u, &u};
    ck_assert_int_eq(train_mirror_create(&m, "w", 1, 2, TRAIN_AGG_NONE, &init, &err), 0);
    ck_assert_int_eq(train_mirror_update(m, updates, TRAIN_ASSIGN_ADD, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "mirrored variable 'w': You must specify an aggregation method to update a "
                              "MirroredVariable in Replica Context. You can do so by passing an explicit value for "
                              "argument `aggregation` to tf.Variable(..).");
    ck_assert_float_eq(train_mirror_copy(m, 0)[0], 5.0f);
    train_mirror_destroy(m);

    ck_assert_int_eq(train_mirror_create(&m, "w", 1, 2, TRAIN_AGG_SUM, &init, &err), 0);
    const float *missing[2] = {&u, NULL};
    ck_assert_int_eq(train_mirror_update(m, missing, TRAIN_ASSIGN_ADD, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "mirrored variable 'w': replica 1's update is missing");
    ck_assert_int_eq(train_mirror_update(m, updates, (enum train_mirror_mode)0, &err), SL_EINVAL);
    /* failed updates touched nothing */
    ck_assert_float_eq(train_mirror_copy(m, 0)[0], 5.0f);
    ck_assert_float_eq(train_mirror_copy(m, 1)[0], 5.0f);
    ck_assert_ptr_null(train_mirror_copy(m, 2));
    ck_assert_ptr_null(train_mirror_copy(m, -1));
    train_mirror_destroy(m);

    ck_assert_int_eq(train_mirror_create(&m, "w", 1, 0, TRAIN_AGG_SUM, &init, &err), SL_EINVAL);
    ck_assert_ptr_null(m);
    ck_assert_int_eq(train_mirror_create(&m, "w", 1, 2, (enum train_aggregation)9, &init, &err), SL_EINVAL);
    train_mirror_destroy(NULL);
}
END_TEST

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* 500 SGD-like steps with distinct per-replica gradients: every copy stays
 * bit-identical, and equals a scalar model of the same arithmetic. */
START_TEST(test_many_updates_stay_identical)
{
    enum { R = 5, N = 33, STEPS = 500 };
    struct train_mirror *m;
    struct sl_error err = {0};
    float init[N], model[N];
    for (int j = 0; j < N; j++)
        init[j] = model[j] = (float)j * 0.125f - 2.0f;
    ck_assert_int_eq(train_mirror_create(&m, "dense/kernel", N, R, TRAIN_AGG_MEAN, init, &err), 0);
    uint64_t seed = 12345;
    static float grads[R][N];
    const float *updates[R];
    for (int step = 0; step < STEPS; step++) {
        for (int r = 0; r < R; r++) {
            for (int j = 0; j < N; j++)
                grads[r][j] = ((float)(rng_next(&seed) % 20001) / 10000.0f - 1.0f) * 0.01f;
            updates[r] = grads[r];
        }
        ck_assert_int_eq(train_mirror_update(m, updates, TRAIN_ASSIGN_SUB, &err), 0);
        for (int j = 0; j < N; j++) {
            float total = grads[0][j];
            for (int r = 1; r < R; r++)
                total += grads[r][j];
            model[j] -= total / (float)R;
        }
        ck_assert_int_eq(train_mirror_check(m, &err), 0);
    }
    for (int r = 0; r < R; r++)
        ck_assert_mem_eq(train_mirror_copy(m, r), model, sizeof model);
    train_mirror_destroy(m);
}
END_TEST

START_TEST(test_divergence_detected)
{
    struct train_mirror *m;
    struct sl_error err = {0};
    float init[4] = {1, 2, 3, 4};
    ck_assert_int_eq(train_mirror_create(&m, "dense/bias", 4, 4, TRAIN_AGG_SUM, init, &err), 0);
    ck_assert_int_eq(train_mirror_check(m, &err), 0);
    train_mirror_copy(m, 3)[1] = 2.5f;
    train_mirror_copy(m, 2)[3] = 4.25f;
    ck_assert_int_eq(train_mirror_check(m, &err), SL_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(err.msg, "mirrored variable 'dense/bias' diverged: replica 2's copy hashes 0x"));
    ck_assert_ptr_nonnull(strstr(err.msg, "first difference at element 3: 4.25 vs 4"));
    ck_assert_uint_ne(train_mirror_hash(m, 2), train_mirror_hash(m, 0));
    ck_assert_uint_eq(train_mirror_hash(m, 1), train_mirror_hash(m, 0));
    train_mirror_destroy(m);
}
END_TEST

/* The check compares bits, not values: -0.0 == 0.0 but is divergence. */
START_TEST(test_negative_zero_diverges)
{
    struct train_mirror *m;
    struct sl_error err = {0};
    ck_assert_int_eq(train_mirror_create(&m, "z", 3, 2, TRAIN_AGG_SUM, NULL, &err), 0);
    ck_assert_float_eq(train_mirror_copy(m, 1)[2], 0.0f);
    ck_assert_int_eq(train_mirror_check(m, &err), 0);
    train_mirror_copy(m, 1)[2] = -0.0f;
    ck_assert_int_eq(train_mirror_check(m, &err), SL_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(err.msg, "replica 1"));
    ck_assert_ptr_nonnull(strstr(err.msg, "element 2"));
    train_mirror_destroy(m);
}
END_TEST

START_TEST(test_hash_properties)
{
    unsigned char a[64] = {0}, b[64] = {0};
    ck_assert_uint_eq(train_hash64(a, sizeof a), train_hash64(b, sizeof b));
    ck_assert_uint_ne(train_hash64(a, sizeof a), train_hash64(a, sizeof a - 1));
    /* every single-bit flip changes the hash */
    uint64_t h0 = train_hash64(a, sizeof a);
    for (size_t bit = 0; bit < sizeof b * 8; bit++) {
        b[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        ck_assert_uint_ne(train_hash64(b, sizeof b), h0);
        b[bit / 8] ^= (unsigned char)(1u << (bit % 8));
    }
    /* FNV-1a 64 of "a" is 0xaf63dc4c8601ec8c; the finaliser then mixes it */
    uint64_t x = UINT64_C(0xaf63dc4c8601ec8c);
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x *= UINT64_C(0xc4ceb9fe1a85ec53);
    x ^= x >> 33;
    ck_assert_uint_eq(train_hash64("a", 1), x);
}
END_TEST

START_TEST(test_empty_variable_and_alloc_failure)
{
    struct train_mirror *m;
    struct sl_error err = {0};
    ck_assert_int_eq(train_mirror_create(&m, "empty", 0, 3, TRAIN_AGG_MEAN, NULL, &err), 0);
    const float *updates[3] = {NULL, NULL, NULL};
    ck_assert_int_eq(train_mirror_update(m, updates, TRAIN_ASSIGN_ADD, &err), 0);
    ck_assert_int_eq(train_mirror_check(m, &err), 0);
    ck_assert_uint_eq(train_mirror_size(m), 0);
    ck_assert_str_eq(train_mirror_name(m), "empty");
    train_mirror_destroy(m);

    /* create makes four allocations: failing any of them is a clean ENOMEM */
    for (long k = 1; k <= 5; k++) {
        sl_alloc_fail_after(k);
        int rc = train_mirror_create(&m, "v", 8, 2, TRAIN_AGG_SUM, NULL, &err);
        sl_alloc_fail_reset();
        if (k <= 4) {
            ck_assert_int_eq(rc, SL_ENOMEM);
            ck_assert_ptr_null(m);
        } else {
            ck_assert_int_eq(rc, 0);
            train_mirror_destroy(m);
        }
    }
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("train_mirror");
    TCase *tc = tcase_create("mirror");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_docstring_mean_assign_add);
    tcase_add_test(tc, test_sum_and_mean_reduce_then_apply);
    tcase_add_test(tc, test_only_first_replica_broadcasts);
    tcase_add_test(tc, test_aggregation_none_and_bad_updates);
    tcase_add_test(tc, test_many_updates_stay_identical);
    tcase_add_test(tc, test_divergence_detected);
    tcase_add_test(tc, test_negative_zero_diverges);
    tcase_add_test(tc, test_hash_properties);
    tcase_add_test(tc, test_empty_variable_and_alloc_failure);
    suite_add_tcase(s, tc);
    return s;
}
