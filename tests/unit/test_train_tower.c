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

/* Two tensors per piece, as the trainer's loop stages them: "image" uint8
 * [rows][3] holding (v, v, v) and "label" int64 [rows] holding v, v the
 * row's number in the batch. */
struct step {
    struct client_piece p[4];
    uint8_t img[4][16][3];
    int64_t lab[4][16];
};

static void make_step(struct step *st, uint32_t n, const uint32_t *rows)
{
    memset(st, 0, sizeof *st);
    int64_t v = 0;
    for (uint32_t t = 0; t < n; t++) {
        struct client_piece *p = &st->p[t];
        p->step = 9;
        p->seq = 100 + t;
        p->replica = t;
        p->rows = rows[t];
        p->flags = t == 0 ? SL_WIRE_PIECE_LAST_STEP : 0;
        p->ntensors = 2;
        for (uint32_t i = 0; i < rows[t]; i++, v++) {
            memset(st->img[t][i], (int)v, 3);
            st->lab[t][i] = v;
        }
        p->t[0] = (struct client_tensor){.name = "image",
                                         .dtype = SL_WIRE_UINT8,
                                         .rank = 2,
                                         .dims = {rows[t], 3},
                                         .data = rows[t] ? st->img[t] : NULL,
                                         .bytes = 3ull * rows[t]};
        p->t[1] = (struct client_tensor){.name = "label",
                                         .dtype = SL_WIRE_INT64,
                                         .rank = 1,
                                         .dims = {rows[t]},
                                         .data = rows[t] ? st->lab[t] : NULL,
                                         .bytes = 8ull * rows[t]};
    }
}

/* replicate_model_fn's tf.split: the step's rows in order, cut into equal
 * towers, whatever split they came in (issue #24 D.17) */
START_TEST(test_resplit)
{
    static const struct {
        uint32_t n, rows[4];
    } cases[] = {
        {2, {96 / 8, 0}}, /* the partial last batch of a stream split: 12 and 0 -> 6 and 6 */
        {2, {0, 4}},      {4, {3, 1, 2, 2}}, {4, {8, 0, 0, 0}}, {3, {7, 2, 0}}, {4, {1, 0, 0, 3}}, {1, {5}},
    };
    static struct step st;
    struct client_piece out[4];
    _Alignas(TRAIN_TOWER_ALIGN) unsigned char scratch[4 * (16 * 3 + 16 * 8) + 2 * TRAIN_TOWER_ALIGN];
    struct sl_error err = {0};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint32_t n = cases[c].n, total = 0;
        make_step(&st, n, cases[c].rows);
        for (uint32_t t = 0; t < n; t++)
            total += cases[c].rows[t];
        uint32_t k = total / n;
        memset(scratch, 0xee, sizeof scratch);
        ck_assert_msg(train_tower_resplit(st.p, n, out, scratch, sizeof scratch, &err) == 0, "case %zu: %s", c,
                      err.msg);
        for (uint32_t t = 0; t < n; t++) {
            ck_assert_uint_eq(out[t].rows, k);
            ck_assert_uint_eq(out[t].replica, t);
            ck_assert_uint_eq(out[t].seq, 100 + t);
            ck_assert_uint_eq(out[t].step, 9);
            ck_assert_uint_eq(out[t].flags, t == 0 ? SL_WIRE_PIECE_LAST_STEP : 0);
            ck_assert_uint_eq(out[t].ntensors, 2);
            ck_assert_str_eq(out[t].t[0].name, "image");
            ck_assert_str_eq(out[t].t[1].name, "label");
            ck_assert_int_eq(out[t].t[0].rank, 2);
            ck_assert_int_eq(out[t].t[0].dims[0], k);
            ck_assert_int_eq(out[t].t[0].dims[1], 3);
            ck_assert_int_eq(out[t].t[1].rank, 1);
            ck_assert_int_eq(out[t].t[1].dims[0], k);
            ck_assert_uint_eq(out[t].t[0].bytes, 3ull * k);
            ck_assert_uint_eq(out[t].t[1].bytes, 8ull * k);
            const uint8_t *img = out[t].t[0].data;
            const int64_t *lab = out[t].t[1].data;
            for (uint32_t i = 0; i < k; i++) {
                int64_t v = (int64_t)(t * k + i);
                ck_assert_int_eq(lab[i], v);
                for (int j = 0; j < 3; j++)
                    ck_assert_uint_eq(img[3 * i + j], (uint8_t)v);
            }
        }
    }

    /* equal pieces pass through as views, nothing copied */
    uint32_t eq[2] = {4, 4};
    make_step(&st, 2, eq);
    ck_assert_int_eq(train_tower_resplit(st.p, 2, out, NULL, 0, &err), 0);
    ck_assert_ptr_eq(out[1].t[0].data, st.img[1]);
    ck_assert_ptr_eq(out[1].t[1].data, st.lab[1]);
    uint32_t none[2] = {0, 0};
    make_step(&st, 2, none);
    ck_assert_int_eq(train_tower_resplit(st.p, 2, out, NULL, 0, &err), 0);
    ck_assert_uint_eq(out[0].rows + out[1].rows, 0);
}
END_TEST

/* everything that cannot be split, each with its message */
START_TEST(test_resplit_refused)
{
    static struct step st;
    struct client_piece out[4];
    _Alignas(TRAIN_TOWER_ALIGN) unsigned char scratch[4 * (16 * 3 + 16 * 8) + 2 * TRAIN_TOWER_ALIGN];
    struct sl_error err = {0};
    uint32_t odd[2] = {7, 0}, un[2] = {6, 2};
    make_step(&st, 2, odd);
    ck_assert_int_eq(train_tower_resplit(st.p, 2, out, scratch, sizeof scratch, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "Batch size 7 needs to be divisible by the number of GPUs, which is 2.");
    ck_assert_int_eq(train_tower_resplit(st.p, 0, out, scratch, sizeof scratch, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "tower split: needs >= 1 tower (got 0)");

    static const struct {
        int what;
        const char *msg;
    } bad[] = {
        {0, "tower split: the step's 96 bytes exceed the 95-byte scratch"},
        {1, "tower split: tower 1 has 1 tensors, tower 0 2"},
        {2, "tower split: tower 1's tensor 1 differs from tower 0's in name, dtype or shape after dim 0"},
        {3, "tower split: tower 1's tensor 0 differs from tower 0's in name, dtype or shape after dim 0"},
        {4, "tower split: tower 1's tensor 'label' has rank 1 and dim 0 of 3 for 2 rows"},
        {5, "tower split: tower 0's tensor 'label' holds 40 bytes, its shape 48"},
        {6, "tower split: tensor 'image' is bytes: only fixed-size values can be split along dim 0"},
        {7, "tower split: tower 0's tensor 'label' has rank 0 and dim 0 of 0 for 6 rows"},
        {8, "tower split: tower 0's tensor 'image' holds 18 bytes, its shape 0"},
        {9, "tower split: tower 0's tensor 'image': bad dim 1 (-3)"},
        {10, "tower split: tower 0's tensor 'label' holds 48 bytes, its shape 48"},
    };
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        make_step(&st, 2, un);
        size_t room = sizeof scratch;
        switch (bad[b].what) {
        case 0: room = 32 + 64 - 1; break; /* 8 rows: 24 bytes (aligned: 32) and 64 */
        case 1: st.p[1].ntensors = 1; break;
        case 2: st.p[1].t[1].name = "labels"; break;
        case 3: st.p[1].t[0].dims[1] = 4; break;
        case 4: st.p[1].t[1].dims[0] = 3; break;
        case 5: st.p[0].t[1].bytes = 40; break;
        case 6:
            st.p[0].t[0].dtype = SL_WIRE_BYTES;
            st.p[1].t[0].dtype = SL_WIRE_BYTES;
            break;
        case 7:
            st.p[0].t[1].rank = 0;
            st.p[1].t[1].rank = 0;
            break;
        case 8:
            st.p[0].t[0].dims[1] = 0;
            st.p[1].t[0].dims[1] = 0;
            break;
        case 9:
            st.p[0].t[0].dims[1] = -3;
            st.p[1].t[0].dims[1] = -3;
            break;
        case 10: st.p[0].t[1].data = NULL; break;
        }
        ck_assert_int_eq(train_tower_resplit(st.p, 2, out, scratch, room, &err), SL_EINVAL);
        ck_assert_str_eq(err.msg, bad[b].msg);
    }
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
    tcase_add_test(tc, test_resplit);
    tcase_add_test(tc, test_resplit_refused);
    suite_add_tcase(s, tc);
    return s;
}
