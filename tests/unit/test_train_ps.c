/* train_ps (issue #18, the first part of the parameter servers): the
 * placement of variables on servers, round robin and balanced, with
 * colocation groups, exactly as train_ps.h states it; the model's variable
 * list; and train_sgd_apply, the arithmetic a server will apply, equal bit
 * for bit to the model's own step. */
#include <stdlib.h>
#include <string.h>

#include "sl_test.h"
#include "train_model.h"
#include "train_ps.h"

static void expect_place(const size_t *sizes, const int *group, size_t n, uint32_t nps, enum train_ps_placement how,
                         const uint32_t *want)
{
    uint32_t got[16];
    struct sl_error err = {0};
    ck_assert_msg(train_ps_place(sizes, group, n, nps, how, got, &err) == 0, "%s", err.msg);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == want[i], "variable %zu: server %u, want %u", i, got[i], want[i]);
}

START_TEST(test_round_robin)
{
    const size_t sizes[5] = {100, 10, 50, 60, 5};
    expect_place(sizes, NULL, 5, 2, TRAIN_PS_ROUND_ROBIN, (const uint32_t[]){0, 1, 0, 1, 0});
    expect_place(sizes, NULL, 5, 3, TRAIN_PS_ROUND_ROBIN, (const uint32_t[]){0, 1, 2, 0, 1});
    expect_place(sizes, NULL, 5, 1, TRAIN_PS_ROUND_ROBIN, (const uint32_t[]){0, 0, 0, 0, 0});
    expect_place(sizes, NULL, 5, 8, TRAIN_PS_ROUND_ROBIN, (const uint32_t[]){0, 1, 2, 3, 4});
    /* 1 and 3 colocated: the units are 0, {1, 3}, 2, 4 */
    const int group[5] = {-1, 7, -1, 7, -1};
    expect_place(sizes, group, 5, 2, TRAIN_PS_ROUND_ROBIN, (const uint32_t[]){0, 1, 0, 1, 1});
    /* every variable in one group: one server */
    const int all[5] = {0, 0, 0, 0, 0};
    expect_place(sizes, all, 5, 3, TRAIN_PS_ROUND_ROBIN, (const uint32_t[]){0, 0, 0, 0, 0});
}
END_TEST

START_TEST(test_balanced)
{
    const size_t sizes[5] = {100, 10, 50, 60, 5};
    /* 100 -> 0; 60 -> 1; 50 -> 1 (60 < 100); 10 -> 0 (100 < 110); 5 -> 0 (110 = 110: the lower) */
    expect_place(sizes, NULL, 5, 2, TRAIN_PS_BALANCED, (const uint32_t[]){0, 0, 1, 1, 0});
    /* {1, 3} is one unit of 70: 100 -> 0, 70 -> 1, 50 -> 1 (70 < 100), 5 -> 0 */
    const int group[5] = {-1, 7, -1, 7, -1};
    expect_place(sizes, group, 5, 2, TRAIN_PS_BALANCED, (const uint32_t[]){0, 1, 1, 1, 0});
    /* equal sizes: creation order, lowest server on ties: round robin */
    const size_t same[4] = {8, 8, 8, 8};
    expect_place(same, NULL, 4, 3, TRAIN_PS_BALANCED, (const uint32_t[]){0, 1, 2, 0});
}
END_TEST

START_TEST(test_refused)
{
    const size_t sizes[2] = {1, 2};
    uint32_t owner[2] = {77, 77};
    struct sl_error err = {0};
    ck_assert_int_eq(train_ps_place(sizes, NULL, 2, 0, TRAIN_PS_ROUND_ROBIN, owner, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "0 parameter servers (1 to 256)");
    ck_assert_int_eq(train_ps_place(sizes, NULL, 2, 257, TRAIN_PS_ROUND_ROBIN, owner, &err), SL_EINVAL);
    ck_assert_int_eq(train_ps_place(sizes, NULL, TRAIN_PS_MAX_VARS + 1, 2, TRAIN_PS_ROUND_ROBIN, owner, &err),
                     SL_EINVAL);
    ck_assert_str_eq(err.msg, "4097 variables (at most 4096)");
    ck_assert_int_eq(train_ps_place(sizes, (const int[]){-1, -2}, 2, 2, TRAIN_PS_BALANCED, owner, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "variable 1: colocation group -2 (-1: none, or >= 0)");
    ck_assert_int_eq(train_ps_place(sizes, NULL, 2, 2, (enum train_ps_placement)9, owner, &err), SL_EINVAL);
    ck_assert_uint_eq(owner[0], 77);
    ck_assert_uint_eq(owner[1], 77);
    ck_assert_int_eq(train_ps_place(sizes, NULL, 0, 2, TRAIN_PS_BALANCED, owner, &err), 0);
}
END_TEST

/* The MLP 784-128-10: W1, b1, W2, b2 cover the parameters in order;
 * round robin on 2 servers alternates, balanced puts W1 alone. */
START_TEST(test_model_variables)
{
    struct train_model_config cfg = {.inputs = 784, .classes = 10, .nhidden = 1, .hidden = {128}, .seed = 1};
    struct train_model *m;
    struct sl_error err = {0};
    ck_assert_int_eq(train_model_create(&m, &cfg, &err), 0);
    struct train_model_var v[TRAIN_MODEL_MAX_VARS];
    size_t n = train_model_variables(m, v, TRAIN_MODEL_MAX_VARS);
    ck_assert_uint_eq(n, 4);
    ck_assert_uint_eq(train_model_variables(m, v, 1), 4); /* the count, whatever max */
    const char kinds[4] = {'W', 'b', 'W', 'b'};
    const size_t counts[4] = {784 * 128, 128, 128 * 10, 10};
    size_t at = 0, sizes[4];
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(v[i].kind, kinds[i]);
        ck_assert_int_eq(v[i].layer, (int)i / 2 + 1);
        ck_assert_uint_eq(v[i].offset, at);
        ck_assert_uint_eq(v[i].count, counts[i]);
        at += v[i].count;
        sizes[i] = v[i].count;
    }
    ck_assert_uint_eq(at, train_model_nparams(m));
    expect_place(sizes, NULL, 4, 2, TRAIN_PS_ROUND_ROBIN, (const uint32_t[]){0, 1, 0, 1});
    expect_place(sizes, NULL, 4, 2, TRAIN_PS_BALANCED, (const uint32_t[]){0, 1, 1, 1});
    train_model_destroy(m);
}
END_TEST

/* train_sgd_apply on a model's parameters and velocity, variable by
 * variable (as the servers will), equals the model's own step bit for bit,
 * over a few steps with momentum. */
START_TEST(test_sgd_apply_is_the_models_step)
{
    struct train_model_config cfg = {.inputs = 20, .classes = 3, .nhidden = 1, .hidden = {7}, .seed = 9,
                                     .lr = 0.05f, .momentum = 0.9f};
    struct train_model *a, *b;
    struct sl_error err = {0};
    ck_assert_int_eq(train_model_create(&a, &cfg, &err), 0);
    ck_assert_int_eq(train_model_create(&b, &cfg, &err), 0);
    size_t np = train_model_nparams(a);
    float *g = malloc(np * sizeof *g);
    ck_assert_ptr_nonnull(g);
    struct train_model_var v[TRAIN_MODEL_MAX_VARS];
    size_t nv = train_model_variables(b, v, TRAIN_MODEL_MAX_VARS);
    uint32_t state = 12345;
    for (int step = 0; step < 5; step++) {
        for (size_t k = 0; k < np; k++) {
            state = state * 1664525u + 1013904223u;
            g[k] = (float)((int)(state >> 8) % 2001 - 1000) / 3000.0f;
        }
        ck_assert_int_eq(train_model_sgd_step(a, g, &err), 0);
        for (size_t i = nv; i-- > 0;) /* any order: the variables are disjoint */
            train_sgd_apply(train_model_params(b) + v[i].offset, train_model_velocity(b) + v[i].offset,
                            g + v[i].offset, v[i].count, cfg.lr, cfg.momentum);
    }
    ck_assert(memcmp(train_model_params(a), train_model_params(b), np * sizeof(float)) == 0);
    ck_assert(memcmp(train_model_velocity(a), train_model_velocity(b), np * sizeof(float)) == 0);
    free(g);
    train_model_destroy(a);
    train_model_destroy(b);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("train_ps");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_round_robin);
    tcase_add_test(tc, test_balanced);
    tcase_add_test(tc, test_refused);
    tcase_add_test(tc, test_model_variables);
    tcase_add_test(tc, test_sgd_apply_is_the_models_step);
    suite_add_tcase(s, tc);
    return s;
}
