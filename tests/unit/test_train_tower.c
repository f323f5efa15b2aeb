/* train_tower: replicate_model_fn's split, loss scaling and prediction
 * concatenation (docs/semantics.md 6.4), with its exact error texts. */
#include <string.h>

#include "sl_test.h"
#include "train_tower.h"

START_TEST(test_split)
{
    struct sl_error err = {0};
    int64_t rows = -1;
    ck_assert_int_eq(train_tower_split(8, 2, &rows, &err), 0);
    ck_assert_int_eq(rows, 4);
    ck_assert_int_eq(train_tower_split(8, 1, &rows, &err), 0);
    ck_assert_int_eq(rows, 8);
    ck_assert_int_eq(train_tower_split(0, 4, &rows, &err), 0);
    ck_assert_int_eq(rows, 0);
    ck_assert_int_eq(train_tower_split(7, 2, &rows, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "Batch size 7 needs to be divisible by the number of GPUs, which is 2.");
    ck_assert_int_eq(rows, 0);
    ck_assert_int_eq(train_tower_split(10, 4, &rows, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "Batch size 10 needs to be divisible by the number of GPUs, which is 4.");
    ck_assert_int_eq(train_tower_split(8, 0, &rows, &err), SL_EINVAL);
    ck_assert_int_eq(train_tower_split(-8, 2, &rows, &err), SL_EINVAL);
}
END_TEST

START_TEST(test_loss_scale)
{
    struct sl_error err = {0};
    float scale = 0;
    ck_assert_int_eq(train_tower_loss_scale(TRAIN_LOSS_SUM_BY_NONZERO_WEIGHTS, 4, &scale, &err), 0);
    ck_assert_float_eq(scale, 0.25f);
    ck_assert_int_eq(train_tower_loss_scale(TRAIN_LOSS_MEAN, 2, &scale, &err), 0);
    ck_assert_float_eq(scale, 0.5f);
    ck_assert_int_eq(train_tower_loss_scale(TRAIN_LOSS_SUM_OVER_BATCH_SIZE, 3, &scale, &err), 0);
    ck_assert_float_eq(scale, 1.0f / 3.0f);
    ck_assert_int_eq(train_tower_loss_scale(TRAIN_LOSS_SUM, 4, &scale, &err), 0);
    ck_assert_float_eq(scale, 1.0f);
    /* one tower: no aggregation at all */
    ck_assert_int_eq(train_tower_loss_scale(TRAIN_LOSS_MEAN, 1, &scale, &err), 0);
    ck_assert_float_eq(scale, 1.0f);
    ck_assert_int_eq(train_tower_loss_scale(TRAIN_LOSS_NONE, 2, &scale, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "Tower losses need to be reduced in some way, yet none reduction is specified.");
    ck_assert_int_eq(train_tower_loss_scale(TRAIN_LOSS_MEAN, 0, &scale, &err), SL_EINVAL);
    ck_assert_int_eq(train_tower_loss_scale((enum train_loss_reduction)42, 2, &scale, &err), SL_EINVAL);

    /* aggregated loss = add_n of scaled tower losses = their mean */
    float losses[4] = {1.0f, 2.0f, 3.0f, 6.0f}, total = 0;
    ck_assert_int_eq(train_tower_loss_scale(TRAIN_LOSS_MEAN, 4, &scale, &err), 0);
    for (int t = 0; t < 4; t++)
        total += losses[t] * scale;
    ck_assert_float_eq(total, 3.0f);
}
END_TEST

START_TEST(test_concat_in_tower_order)
{
    float a[4] = {1, 2, 3, 4}, b[2] = {5, 6}, out[6] = {0};
    struct train_value in[3] = {
        {.data = a, .rank = 2, .dims = {2, 2}},
        {.data = NULL, .rank = 2, .dims = {0, 2}},
        {.data = b, .rank = 2, .dims = {1, 2}},
    };
    struct train_value o = {.data = out};
    struct sl_error err = {0};
    ck_assert_int_eq(train_tower_concat(in, 3, &o, &err), 0);
    ck_assert_int_eq(o.rank, 2);
    ck_assert_int_eq(o.dims[0], 3);
    ck_assert_int_eq(o.dims[1], 2);
    const float want[6] = {1, 2, 3, 4, 5, 6};
    ck_assert_mem_eq(out, want, sizeof want);

    in[2].dims[1] = 1;
    ck_assert_int_eq(train_tower_concat(in, 3, &o, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg,
                     "tower concat: tower 2 has shape [1,1] but tower 0 has shape [2,2] (dimensions after dim 0 must "
                     "match)");
    float s = 1;
    struct train_value scalar = {.data = &s, .rank = 0};
    ck_assert_int_eq(train_tower_concat(&scalar, 1, &o, &err), SL_EINVAL);
    ck_assert_int_eq(train_tower_concat(in, 0, &o, &err), SL_EINVAL);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("train_tower");
    TCase *tc = tcase_create("tower");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_split);
    tcase_add_test(tc, test_loss_scale);
    tcase_add_test(tc, test_concat_in_tower_order);
    suite_add_tcase(s, tc);
    return s;
}
