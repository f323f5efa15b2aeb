/* train_reduce: the worked examples of docs/semantics.md 6.1 (TensorFlow's
 * docstring example, the 4+2 MEAN over axis 0, empty replicas), shape
 * errors naming both shapes, and the fixed summation order. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "sl_test.h"
#include "train_reduce.h"

static struct train_value vec(float *data, int64_t d0)
{
    struct train_value v = {.data = data, .rank = 1};
    v.dims[0] = d0;
    return v;
}

static struct train_value mat(float *data, int64_t d0, int64_t d1)
{
    struct train_value v = {.data = data, .rank = 2};
    v.dims[0] = d0;
    v.dims[1] = d1;
    return v;
}

/* docs/semantics.md 6.1 (TensorFlow's docstring): G=8, two replicas, [0..3]
 * and [4..7]. */
START_TEST(test_docstring_example)
{
    float a[4] = {0, 1, 2, 3}, b[4] = {4, 5, 6, 7};
    struct train_value in[2] = {vec(a, 4), vec(b, 4)};
    struct sl_error err = {0};
    float out[4];
    struct train_value o = {.data = out};

    ck_assert_int_eq(train_reduce(TRAIN_SUM, in, 2, TRAIN_AXIS_NONE, &o, &err), 0);
    ck_assert_int_eq(o.rank, 1);
    ck_assert_int_eq(o.dims[0], 4);
    const float want_sum[4] = {4, 6, 8, 10};
    ck_assert_mem_eq(out, want_sum, sizeof want_sum);

    ck_assert_int_eq(train_reduce(TRAIN_MEAN, in, 2, TRAIN_AXIS_NONE, &o, &err), 0);
    const float want_mean[4] = {2, 3, 4, 5};
    ck_assert_mem_eq(out, want_mean, sizeof want_mean);

    ck_assert_int_eq(train_reduce(TRAIN_SUM, in, 2, 0, &o, &err), 0);
    ck_assert_int_eq(o.rank, 0);
    ck_assert_float_eq(out[0], 28.0f);

    ck_assert_int_eq(train_reduce(TRAIN_MEAN, in, 2, 0, &o, &err), 0);
    ck_assert_float_eq(out[0], 3.5f);
}
END_TEST

/* A final batch of 6 split 4+2: MEAN over axis 0 divides by 6, not by 2
 * (which would weigh some values 1/8 and others 1/4). */
START_TEST(test_mean_axis0_split_4_2)
{
    float a[4] = {1, 2, 3, 4}, b[2] = {5, 6};
    struct train_value in[2] = {vec(a, 4), vec(b, 2)};
    struct sl_error err = {0};
    float out[1];
    struct train_value o = {.data = out};
    ck_assert_int_eq(train_reduce(TRAIN_MEAN, in, 2, 0, &o, &err), 0);
    ck_assert_float_eq(out[0], 21.0f / 6.0f);
    /* the mean of per-replica means would be (2.5 + 5.5) / 2 = 4 */
    ck_assert_float_ne(out[0], 4.0f);
    ck_assert_int_eq(train_reduce(TRAIN_SUM, in, 2, 0, &o, &err), 0);
    ck_assert_float_eq(out[0], 21.0f);
}
END_TEST

START_TEST(test_mean_axis0_split_4_2_matrix)
{
    /* rows of [x, 10x] */
    float a[8] = {1, 10, 2, 20, 3, 30, 4, 40}, b[4] = {5, 50, 6, 60};
    struct train_value in[2] = {mat(a, 4, 2), mat(b, 2, 2)};
    struct sl_error err = {0};
    struct train_value shape;
    ck_assert_int_eq(train_reduce_shape(in, 2, 0, &shape, &err), 0);
    ck_assert_int_eq(shape.rank, 1);
    ck_assert_int_eq(shape.dims[0], 2);
    float out[2];
    struct train_value o = {.data = out};
    ck_assert_int_eq(train_reduce(TRAIN_MEAN, in, 2, 0, &o, &err), 0);
    ck_assert_float_eq(out[0], 21.0f / 6.0f);
    ck_assert_float_eq(out[1], 210.0f / 6.0f);
}
END_TEST

/* Exhausted replicas get 0-row batches; they add nothing and count 0. */
START_TEST(test_empty_replicas_count_zero)
{
    float a[3] = {1, 2, 6};
    struct train_value in[3] = {vec(NULL, 0), vec(a, 3), vec(NULL, 0)};
    struct sl_error err = {0};
    float out[1] = {-1};
    struct train_value o = {.data = out};
    ck_assert_int_eq(train_reduce(TRAIN_MEAN, in, 3, 0, &o, &err), 0);
    ck_assert_float_eq(out[0], 3.0f);
    ck_assert_int_eq(train_reduce(TRAIN_SUM, in, 3, 0, &o, &err), 0);
    ck_assert_float_eq(out[0], 9.0f);

    float m[4] = {1, 2, 3, 4};
    struct train_value in2[2] = {mat(m, 2, 2), mat(NULL, 0, 2)};
    float out2[2];
    struct train_value o2 = {.data = out2};
    ck_assert_int_eq(train_reduce(TRAIN_MEAN, in2, 2, 0, &o2, &err), 0);
    ck_assert_float_eq(out2[0], 2.0f);
    ck_assert_float_eq(out2[1], 3.0f);
}
END_TEST

START_TEST(test_all_empty_mean_is_error_not_nan)
{
    struct train_value in[2] = {mat(NULL, 0, 3), mat(NULL, 0, 3)};
    struct sl_error err = {0};
    float out[3] = {7, 7, 7};
    struct train_value o = {.data = out};
    ck_assert_int_eq(train_reduce(TRAIN_MEAN, in, 2, 0, &o, &err), SL_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "empty"));
    ck_assert_ptr_nonnull(strstr(err.msg, "0 rows"));
    ck_assert_float_eq(out[0], 7.0f); /* untouched */
    /* SUM of nothing is well defined: zeros */
    ck_assert_int_eq(train_reduce(TRAIN_SUM, in, 2, 0, &o, &err), 0);
    for (int j = 0; j < 3; j++) {
        ck_assert_float_eq(out[j], 0.0f);
        ck_assert(!signbit(out[j]));
    }
}
END_TEST

START_TEST(test_mean_none_divides_by_replicas)
{
    float a[2] = {1, 2}, b[2] = {3, 4}, c[2] = {5, 9};
    struct train_value in[3] = {vec(a, 2), vec(b, 2), vec(c, 2)};
    struct sl_error err = {0};
    float out[2];
    struct train_value o = {.data = out};
    ck_assert_int_eq(train_reduce(TRAIN_MEAN, in, 3, TRAIN_AXIS_NONE, &o, &err), 0);
    ck_assert_float_eq(out[0], 3.0f);
    ck_assert_float_eq(out[1], 15.0f / 3.0f);
    /* one replica: the value itself */
    ck_assert_int_eq(train_reduce(TRAIN_MEAN, in, 1, TRAIN_AXIS_NONE, &o, &err), 0);
    ck_assert_float_eq(out[0], 1.0f);
    ck_assert_float_eq(out[1], 2.0f);
    /* scalars reduce too */
    float s0 = 2, s1 = 5;
    struct train_value sc[2] = {{.data = &s0, .rank = 0}, {.data = &s1, .rank = 0}};
    ck_assert_int_eq(train_reduce(TRAIN_SUM, sc, 2, TRAIN_AXIS_NONE, &o, &err), 0);
    ck_assert_int_eq(o.rank, 0);
    ck_assert_float_eq(out[0], 7.0f);
}
END_TEST

START_TEST(test_none_needs_identical_shapes)
{
    float a[4] = {0}, b[2] = {0};
    struct train_value in[2] = {vec(a, 4), vec(b, 2)};
    struct sl_error err = {0};
    float out[4];
    struct train_value o = {.data = out};
    ck_assert_int_eq(train_reduce(TRAIN_SUM, in, 2, TRAIN_AXIS_NONE, &o, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "reduce: replica 1 has shape [2] but replica 0 has shape [4] (axis=None needs "
                              "identical shapes)");
    /* axis 0 accepts exactly this split */
    ck_assert_int_eq(train_reduce(TRAIN_SUM, in, 2, 0, &o, &err), 0);
}
END_TEST

START_TEST(test_axis0_needs_matching_inner_dims)
{
    float a[8] = {0}, b[6] = {0};
    struct train_value in[2] = {mat(a, 4, 2), mat(b, 2, 3)};
    struct sl_error err = {0};
    float out[3];
    struct train_value o = {.data = out};
    ck_assert_int_eq(train_reduce(TRAIN_MEAN, in, 2, 0, &o, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "reduce: replica 1 has shape [2,3] but replica 0 has shape [4,2] (dimensions after "
                              "the batch axis must match)");

    struct train_value in2[2] = {mat(a, 4, 2), vec(b, 6)};
    ck_assert_int_eq(train_reduce(TRAIN_SUM, in2, 2, 0, &o, &err), SL_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "[6]"));
    ck_assert_ptr_nonnull(strstr(err.msg, "[4,2]"));
    ck_assert_ptr_nonnull(strstr(err.msg, "ranks differ"));
}
END_TEST

START_TEST(test_bad_arguments)
{
    struct sl_error err = {0};
    float s = 1, out[1];
    struct train_value o = {.data = out};
    struct train_value scalar = {.data = &s, .rank = 0};
    ck_assert_int_eq(train_reduce(TRAIN_SUM, &scalar, 1, 0, &o, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "`axis` = 0 out of range for `value` with rank 0");
    ck_assert_int_eq(train_reduce(TRAIN_SUM, &scalar, 0, TRAIN_AXIS_NONE, &o, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "reduce: no replica values");
    ck_assert_int_eq(train_reduce(TRAIN_SUM, &scalar, 1, 1, &o, &err), SL_EINVAL);
    ck_assert_int_eq(train_reduce((enum train_reduce_op)7, &scalar, 1, TRAIN_AXIS_NONE, &o, &err), SL_EINVAL);
    struct train_value neg = vec(&s, -1);
    ck_assert_int_eq(train_reduce(TRAIN_SUM, &neg, 1, TRAIN_AXIS_NONE, &o, &err), SL_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "replica 0"));
    struct train_value big = {.data = &s, .rank = 9};
    ck_assert_int_eq(train_reduce(TRAIN_SUM, &big, 1, TRAIN_AXIS_NONE, &o, &err), SL_EINVAL);
    struct train_value huge = mat(&s, INT64_C(1) << 40, INT64_C(1) << 40);
    ck_assert_int_eq(train_reduce(TRAIN_SUM, &huge, 1, TRAIN_AXIS_NONE, &o, &err), SL_EINVAL);
}
END_TEST

/* float32 addition is not associative: near 1e8 the spacing is 8, so
 * 1e8 + 1 rounds back to 1e8. The documented order (replica 0 first; rows
 * in order) gives (1e8 + -1e8) + 1 = 1 here; the reverse gives 0. */
START_TEST(test_summation_order_is_fixed)
{
    float a[1] = {1e8f}, b[1] = {-1e8f}, c[1] = {1.0f};
    struct train_value in[3] = {vec(a, 1), vec(b, 1), vec(c, 1)};
    struct sl_error err = {0};
    float out[1];
    struct train_value o = {.data = out};
    ck_assert_int_eq(train_reduce(TRAIN_SUM, in, 3, TRAIN_AXIS_NONE, &o, &err), 0);
    ck_assert_float_eq(out[0], 1.0f);
    ck_assert_int_eq(train_reduce(TRAIN_SUM, in, 3, 0, &o, &err), 0);
    ck_assert_float_eq(out[0], 1.0f);
    struct train_value reversed[3] = {vec(c, 1), vec(b, 1), vec(a, 1)};
    ck_assert_int_eq(train_reduce(TRAIN_SUM, reversed, 3, TRAIN_AXIS_NONE, &o, &err), 0);
    ck_assert_float_eq(out[0], 0.0f);

    float rows[3] = {1e8f, -1e8f, 1.0f};
    struct train_value one = vec(rows, 3);
    ck_assert_int_eq(train_reduce(TRAIN_SUM, &one, 1, 0, &o, &err), 0);
    ck_assert_float_eq(out[0], 1.0f);
    float rows_reversed[3] = {1.0f, -1e8f, 1e8f};
    one = vec(rows_reversed, 3);
    ck_assert_int_eq(train_reduce(TRAIN_SUM, &one, 1, 0, &o, &err), 0);
    ck_assert_float_eq(out[0], 0.0f);
}
END_TEST

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static float rng_float(uint64_t *s)
{
    /* mixed magnitudes so the order of additions shows in the bits */
    float mant = (float)(rng_next(s) % 2000001) / 1000000.0f - 1.0f;
    static const float scale[9] = {1e-4f, 1e-3f, 1e-2f, 1e-1f, 1.0f, 1e1f, 1e2f, 1e3f, 1e4f};
    return mant * scale[rng_next(s) % 9];
}

/* Random shapes: the result equals an independent in-order reference,
 * bit for bit, and a second run gives the same bits. */
START_TEST(test_random_against_reference)
{
    uint64_t seed = 0x9e3779b97f4a7c15u;
    enum { MAXR = 8, INNER = 5, MAXROWS = 7 };
    static float data[MAXR][MAXROWS * INNER];
    for (int iter = 0; iter < 200; iter++) {
        size_t n = 1 + rng_next(&seed) % MAXR;
        struct train_value in[MAXR];
        uint64_t total_rows = 0;
        for (size_t r = 0; r < n; r++) {
            int64_t rows = (int64_t)(rng_next(&seed) % (MAXROWS + 1));
            if (r == 0 && iter % 2 == 0)
                rows = rows == 0 ? 1 : rows;
            total_rows += (uint64_t)rows;
            for (int k = 0; k < rows * INNER; k++)
                data[r][k] = rng_float(&seed);
            in[r] = mat(data[r], rows, INNER);
        }
        enum train_reduce_op op = iter % 3 == 0 ? TRAIN_MEAN : TRAIN_SUM;
        float got[INNER], again[INNER], want[INNER];
        struct train_value o = {.data = got}, o2 = {.data = again};
        struct sl_error err = {0};
        int rc = train_reduce(op, in, n, 0, &o, &err);
        if (op == TRAIN_MEAN && total_rows == 0) {
            ck_assert_int_eq(rc, SL_EINVAL);
            continue;
        }
        ck_assert_int_eq(rc, 0);
        ck_assert_int_eq(train_reduce(op, in, n, 0, &o2, &err), 0);
        ck_assert_mem_eq(got, again, sizeof got);
        for (int j = 0; j < INNER; j++) {
            float total = 0.0f;
            for (size_t r = 0; r < n; r++) {
                float partial = 0.0f;
                for (int64_t row = 0; row < in[r].dims[0]; row++)
                    partial = row == 0 ? data[r][j] : partial + data[r][row * INNER + j];
                total = r == 0 ? partial : total + partial;
            }
            want[j] = op == TRAIN_MEAN ? total / (float)total_rows : total;
        }
        ck_assert_mem_eq(got, want, sizeof got);
    }
}
END_TEST

START_TEST(test_format_shape)
{
    char buf[64];
    struct train_value v = {.rank = 3, .dims = {4, 0, 12}};
    train_value_format_shape(&v, buf, sizeof buf);
    ck_assert_str_eq(buf, "[4,0,12]");
    v.rank = 0;
    train_value_format_shape(&v, buf, sizeof buf);
    ck_assert_str_eq(buf, "[]");
    v.rank = 3;
    train_value_format_shape(&v, buf, 4);
    ck_assert_str_eq(buf, "[4,");
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("train_reduce");
    TCase *tc = tcase_create("reduce");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_docstring_example);
    tcase_add_test(tc, test_mean_axis0_split_4_2);
    tcase_add_test(tc, test_mean_axis0_split_4_2_matrix);
    tcase_add_test(tc, test_empty_replicas_count_zero);
    tcase_add_test(tc, test_all_empty_mean_is_error_not_nan);
    tcase_add_test(tc, test_mean_none_divides_by_replicas);
    tcase_add_test(tc, test_none_needs_identical_shapes);
    tcase_add_test(tc, test_axis0_needs_matching_inner_dims);
    tcase_add_test(tc, test_bad_arguments);
    tcase_add_test(tc, test_summation_order_is_fixed);
    tcase_add_test(tc, test_random_against_reference);
    tcase_add_test(tc, test_format_shape);
    suite_add_tcase(s, tc);
    return s;
}
