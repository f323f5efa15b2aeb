/* Unit tests for fmt_features: spec -> columns with parse_example's rules
 * and TensorFlow's error texts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmt_example.h"
#include "fmt_features.h"
#include "sl_alloc.h"
#include "sl_buf.h"
#include "sl_test.h"

/* ---- helpers ----------------------------------------------------------- */

static struct fmt_feature_spec spec_fixed(const char *name, enum fmt_dtype t, int rank, int64_t d0, int64_t d1)
{
    struct fmt_feature_spec s;
    memset(&s, 0, sizeof s);
    strcpy(s.name, name);
    s.dtype = t;
    s.rank = rank;
    s.shape[0] = d0;
    s.shape[1] = d1;
    return s;
}

static struct fmt_feature_spec spec_varlen(const char *name, enum fmt_dtype t)
{
    struct fmt_feature_spec s = spec_fixed(name, t, 0, 0, 0);
    s.varlen = 1;
    return s;
}

/* A tiny Example builder over the encoder. */
struct ex {
    struct sl_buf buf;
    struct fmt_example_enc enc;
};

static void ex_begin(struct ex *x)
{
    sl_buf_init(&x->buf, 0);
    ck_assert_int_eq(fmt_example_enc_begin(&x->enc, &x->buf), 0);
}

static void ex_i64(struct ex *x, const char *k, const int64_t *v, size_t n)
{
    ck_assert_int_eq(fmt_example_enc_int64(&x->enc, k, v, n), 0);
}

static void ex_f32(struct ex *x, const char *k, const float *v, size_t n)
{
    ck_assert_int_eq(fmt_example_enc_float(&x->enc, k, v, n), 0);
}

static void ex_str(struct ex *x, const char *k, const char *const *v, size_t n)
{
    const uint8_t *vals[16];
    size_t lens[16];
    for (size_t i = 0; i < n; i++) {
        vals[i] = (const uint8_t *)v[i];
        lens[i] = strlen(v[i]);
    }
    ck_assert_int_eq(fmt_example_enc_bytes(&x->enc, k, vals, lens, n), 0);
}

static void ex_raw(struct ex *x, const char *k, const void *p, size_t n)
{
    const uint8_t *vals[1] = {p};
    ck_assert_int_eq(fmt_example_enc_bytes(&x->enc, k, vals, &n, 1), 0);
}

static void ex_end(struct ex *x)
{
    ck_assert_int_eq(fmt_example_enc_end(&x->enc), 0);
}

/* Add from an exact-size heap copy (ASan sees over-reads). */
static int add(struct fmt_batch *b, const uint8_t *p, size_t n, struct sl_error *err)
{
    uint8_t *d = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(d);
    if (n)
        memcpy(d, p, n);
    sl_error_clear(err);
    int rc = fmt_batch_add(b, d, n, err);
    free(d);
    return rc;
}

static int add_ex(struct fmt_batch *b, struct ex *x, struct sl_error *err)
{
    int rc = add(b, x->buf.data, x->buf.len, err);
    sl_buf_free(&x->buf);
    return rc;
}

static int add_hex(struct fmt_batch *b, const char *h, struct sl_error *err)
{
    uint8_t buf[1024];
    size_t n = sl_test_hex(h, buf, sizeof buf);
    return add(b, buf, n, err);
}

static struct fmt_batch *create(const struct fmt_feature_spec *specs, size_t n, size_t cap)
{
    struct fmt_batch *b = NULL;
    struct sl_error err = {0};
    int rc = fmt_batch_create(&b, specs, n, cap, &err);
    ck_assert_msg(rc == 0, "create: %s", err.msg);
    return b;
}

static struct fmt_column col(const struct fmt_batch *b, size_t i)
{
    struct fmt_column c;
    fmt_batch_column(b, i, &c);
    return c;
}

static const int64_t *i64s(const struct fmt_column *c)
{
    return c->values;
}

static const float *f32s(const struct fmt_column *c)
{
    return c->values;
}

static void assert_err(int rc, int code, const struct sl_error *err, const char *msg)
{
    ck_assert_int_eq(rc, code);
    ck_assert_msg(strcmp(err->msg, msg) == 0, "got '%s'\nwant '%s'", err->msg, msg);
}

/* ---- Fashion-MNIST shape ----------------------------------------------- */

static struct ex fashion(int i)
{
    struct ex x;
    uint8_t img[784];
    for (int k = 0; k < 784; k++)
        img[k] = (uint8_t)(k * 31 + i);
    int64_t label = i % 10, id = 1000 + i;
    ex_begin(&x);
    ex_raw(&x, "image", img, sizeof img);
    ex_i64(&x, "label", &label, 1);
    ex_i64(&x, "id", &id, 1);
    ex_end(&x);
    return x;
}

START_TEST(test_fashion_rows)
{
    struct fmt_feature_spec specs[] = {
        spec_fixed("image", FMT_DTYPE_UINT8, 1, 784, 0),
        spec_fixed("label", FMT_DTYPE_INT64, 0, 0, 0),
        spec_fixed("id", FMT_DTYPE_INT64, 0, 0, 0),
    };
    struct fmt_batch *b = create(specs, 3, 4);
    struct sl_error err = {0};
    ck_assert_uint_eq(fmt_batch_ncolumns(b), 3);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 4; i++) {
            struct ex x = fashion(i + round);
            ck_assert_int_eq(add_ex(b, &x, &err), 0);
        }
        ck_assert_uint_eq(fmt_batch_rows(b), 4);
        struct fmt_column img = col(b, 0), label = col(b, 1), id = col(b, 2);
        ck_assert_str_eq(img.name, "image");
        ck_assert_int_eq(img.dtype, FMT_DTYPE_UINT8);
        ck_assert_int_eq(img.varlen, 0);
        ck_assert_uint_eq(img.rows, 4);
        ck_assert_uint_eq(img.nvalues, 4 * 784);
        ck_assert_uint_eq(img.value_bytes, 4 * 784);
        ck_assert_ptr_null(img.row_splits);
        ck_assert_ptr_null(img.bytes_offsets);
        const uint8_t *px = img.values;
        for (int i = 0; i < 4; i++)
            for (int k = 0; k < 784; k++)
                ck_assert_uint_eq(px[i * 784 + k], (uint8_t)(k * 31 + i + round));
        ck_assert_uint_eq(label.nvalues, 4);
        ck_assert_uint_eq(label.value_bytes, 32);
        for (int i = 0; i < 4; i++) {
            ck_assert_int_eq(i64s(&label)[i], (i + round) % 10);
            ck_assert_int_eq(i64s(&id)[i], 1000 + i + round);
        }
        /* full */
        struct ex x = fashion(9);
        assert_err(add_ex(b, &x, &err), SL_EINVAL, &err, "batch is full (4 rows)");
        fmt_batch_reset(b);
        ck_assert_uint_eq(fmt_batch_rows(b), 0);
        ck_assert_uint_eq(col(b, 0).nvalues, 0);
    }
    fmt_batch_destroy(b);
}
END_TEST

/* Fixed-size columns decoded straight into caller memory (the feeder's
 * send buffer): values land at dst, defaults too, nothing past cap. */
START_TEST(test_bind_decodes_in_place)
{
    struct fmt_feature_spec specs[] = {
        spec_fixed("image", FMT_DTYPE_UINT8, 1, 784, 0),
        spec_fixed("label", FMT_DTYPE_INT64, 0, 0, 0),
        spec_fixed("id", FMT_DTYPE_INT64, 0, 0, 0),
        spec_varlen("tokens", FMT_DTYPE_INT64),
    };
    specs[1].has_default = 1;
    specs[1].default_i64 = -7;
    struct fmt_batch *b = create(specs, 4, 8);
    struct sl_error err = {0};
    ck_assert_uint_eq(fmt_batch_row_bytes(b, 0), 784);
    ck_assert_uint_eq(fmt_batch_row_bytes(b, 1), 8);
    ck_assert_uint_eq(fmt_batch_row_bytes(b, 3), 0);
    uint8_t img[3 * 784 + 16];
    int64_t ids[3 + 1];
    memset(img, 0xEE, sizeof img);
    ids[3] = 12345; /* a guard past the bound */
    ck_assert_int_eq(fmt_batch_bind(b, 0, img, 3 * 784, &err), 0);
    ck_assert_int_eq(fmt_batch_bind(b, 2, ids, 3 * sizeof(int64_t), &err), 0);
    assert_err(fmt_batch_bind(b, 3, ids, sizeof ids, &err), SL_EINVAL, &err,
               "column 3 is not a fixed-size numeric column");
    for (int i = 0; i < 3; i++) {
        struct ex x;
        if (i == 1) { /* no label: the default goes to the (unbound) label column */
            uint8_t px[784];
            memset(px, 5, sizeof px);
            int64_t id = 77;
            ex_begin(&x);
            ex_raw(&x, "image", px, sizeof px);
            ex_i64(&x, "id", &id, 1);
            ex_end(&x);
        } else {
            x = fashion(i);
        }
        ck_assert_int_eq(add_ex(b, &x, &err), 0);
    }
    for (int k = 0; k < 784; k++) {
        ck_assert_uint_eq(img[k], (uint8_t)(k * 31));
        ck_assert_uint_eq(img[784 + k], 5);
        ck_assert_uint_eq(img[2 * 784 + k], (uint8_t)(k * 31 + 2));
    }
    for (int k = 3 * 784; k < (int)sizeof img; k++)
        ck_assert_uint_eq(img[k], 0xEE);
    ck_assert_int_eq(ids[0], 1000);
    ck_assert_int_eq(ids[1], 77);
    ck_assert_int_eq(ids[2], 1002);
    ck_assert_int_eq(ids[3], 12345);
    struct fmt_column c = col(b, 0), l = col(b, 1);
    ck_assert_ptr_eq(c.values, img);
    ck_assert_int_eq(i64s(&l)[1], -7);
    /* a fourth row does not fit the bound memory: refused, nothing written */
    struct ex x = fashion(3);
    assert_err(add_ex(b, &x, &err), SL_EINVAL, &err, "feature image: the bound buffer holds 3 rows");
    ck_assert_int_eq(ids[3], 12345);
    ck_assert_uint_eq(fmt_batch_rows(b), 3);
    /* binding needs an empty batch; unbind returns to own storage */
    assert_err(fmt_batch_bind(b, 0, img, sizeof img, &err), SL_EINVAL, &err,
               "bind before the first row (batch holds 3)");
    fmt_batch_reset(b);
    fmt_batch_unbind(b);
    x = fashion(3); /* add_ex consumed the first one */
    ck_assert_int_eq(add_ex(b, &x, &err), 0);
    ck_assert_ptr_ne(col(b, 0).values, img);
    fmt_batch_destroy(b);
}
END_TEST

/* ---- duplicates and empty Features ------------------------------------- */

/* entries used below (key "a"):
 *   A1 = a: int64 [1]   A2 = a: int64 [2]   AE = a: no kind */
#define A1 "0a0a 0a0161 1205 1a03 0a0101"
#define A2 "0a0a 0a0161 1205 1a03 0a0102"
#define AE "0a05 0a0161 1200"

START_TEST(test_duplicates_last_wins)
{
    struct fmt_feature_spec specs[] = {spec_fixed("a", FMT_DTYPE_INT64, 0, 0, 0)};
    struct fmt_batch *b = create(specs, 1, 8);
    struct sl_error err = {0};
    /* in one Features message */
    ck_assert_int_eq(add_hex(b, "0a18" A1 A2, &err), 0);
    /* in two concatenated Features messages */
    ck_assert_int_eq(add_hex(b, "0a0c" A2 "0a0c" A1, &err), 0);
    /* a later empty Feature does not override */
    ck_assert_int_eq(add_hex(b, "0a13" A2 AE, &err), 0);
    /* an earlier empty Feature is simply overridden */
    ck_assert_int_eq(add_hex(b, "0a13" AE A1, &err), 0);
    struct fmt_column c = col(b, 0);
    ck_assert_uint_eq(c.rows, 4);
    ck_assert_int_eq(i64s(&c)[0], 2);
    ck_assert_int_eq(i64s(&c)[1], 1);
    ck_assert_int_eq(i64s(&c)[2], 2);
    ck_assert_int_eq(i64s(&c)[3], 1);
    /* only empty Features: missing */
    assert_err(add_hex(b, "0a07" AE, &err), SL_EINVAL, &err,
               "Feature: a (data type: int64) is required but could not be found.");
    /* an earlier duplicate of the wrong type does not matter */
    ck_assert_int_eq(add_hex(b, "0a1b 0a0d 0a0161 1208 1206 0a04 0000803f" A2, &err), 0);
    c = col(b, 0);
    ck_assert_int_eq(i64s(&c)[4], 2);
    fmt_batch_destroy(b);
}
END_TEST

START_TEST(test_varlen_duplicates)
{
    struct fmt_feature_spec specs[] = {spec_varlen("a", FMT_DTYPE_INT64)};
    struct fmt_batch *b = create(specs, 1, 8);
    struct sl_error err = {0};
    ck_assert_int_eq(add_hex(b, "0a18" A1 A2, &err), 0);
    /* TensorFlow's sparse path: the last occurrence wins even when empty */
    ck_assert_int_eq(add_hex(b, "0a13" A1 AE, &err), 0);
    ck_assert_int_eq(add_hex(b, "0a13" AE A1, &err), 0);
    struct fmt_column c = col(b, 0);
    ck_assert_uint_eq(c.rows, 3);
    ck_assert_uint_eq(c.nvalues, 2);
    ck_assert_int_eq(c.row_splits[0], 0);
    ck_assert_int_eq(c.row_splits[1], 1);
    ck_assert_int_eq(c.row_splits[2], 1);
    ck_assert_int_eq(c.row_splits[3], 2);
    ck_assert_int_eq(i64s(&c)[0], 2);
    ck_assert_int_eq(i64s(&c)[1], 1);
    fmt_batch_destroy(b);
}
END_TEST

/* ---- missing, defaults ------------------------------------------------- */

START_TEST(test_missing_required)
{
    static const struct {
        enum fmt_dtype t;
        const char *msg;
    } cases[] = {
        {FMT_DTYPE_INT64, "Feature: f (data type: int64) is required but could not be found."},
        {FMT_DTYPE_FLOAT32, "Feature: f (data type: float) is required but could not be found."},
        {FMT_DTYPE_BYTES, "Feature: f (data type: string) is required but could not be found."},
        {FMT_DTYPE_UINT8, "Feature: f (data type: string) is required but could not be found."},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct fmt_feature_spec specs[] = {spec_fixed("f", cases[i].t, 1, 2, 0)};
        struct fmt_batch *b = create(specs, 1, 2);
        struct sl_error err = {0};
        struct ex x;
        int64_t v = 1;
        ex_begin(&x);
        ex_i64(&x, "other", &v, 1);
        ex_end(&x);
        assert_err(add_ex(b, &x, &err), SL_EINVAL, &err, cases[i].msg);
        assert_err(add(b, NULL, 0, &err), SL_EINVAL, &err, cases[i].msg);
        ck_assert_uint_eq(fmt_batch_rows(b), 0);
        fmt_batch_destroy(b);
    }
}
END_TEST

START_TEST(test_defaults)
{
    struct fmt_feature_spec specs[] = {
        spec_fixed("i", FMT_DTYPE_INT64, 1, 3, 0), spec_fixed("f", FMT_DTYPE_FLOAT32, 2, 2, 2),
        spec_fixed("u", FMT_DTYPE_UINT8, 1, 5, 0), spec_fixed("s", FMT_DTYPE_BYTES, 1, 2, 0),
        spec_fixed("e", FMT_DTYPE_BYTES, 0, 0, 0), spec_varlen("v", FMT_DTYPE_FLOAT32),
    };
    specs[0].has_default = 1;
    specs[0].default_i64 = -7;
    specs[1].has_default = 1;
    specs[1].default_f32 = 2.5f;
    specs[2].has_default = 1;
    specs[2].default_u8 = 0xAB;
    char dflt[] = "xyz";
    specs[3].has_default = 1;
    specs[3].default_bytes = (const uint8_t *)dflt;
    specs[3].default_bytes_len = 3;
    specs[4].has_default = 1; /* the empty string */
    struct fmt_batch *b = create(specs, 6, 2);
    dflt[0] = 'Q'; /* the batch kept its own copy */
    struct sl_error err = {0};
    ck_assert_int_eq(add(b, NULL, 0, &err), 0);
    /* a present feature beats its default */
    struct ex x;
    const int64_t iv[] = {1, 2, 3};
    ex_begin(&x);
    ex_i64(&x, "i", iv, 3);
    ex_end(&x);
    ck_assert_int_eq(add_ex(b, &x, &err), 0);

    struct fmt_column c = col(b, 0);
    ck_assert_uint_eq(c.nvalues, 6);
    const int64_t want_i[] = {-7, -7, -7, 1, 2, 3};
    for (int k = 0; k < 6; k++)
        ck_assert_int_eq(i64s(&c)[k], want_i[k]);
    c = col(b, 1);
    ck_assert_uint_eq(c.nvalues, 8);
    for (int k = 0; k < 8; k++)
        ck_assert(f32s(&c)[k] == 2.5f);
    c = col(b, 2);
    ck_assert_uint_eq(c.value_bytes, 10);
    for (int k = 0; k < 10; k++)
        ck_assert_uint_eq(((const uint8_t *)c.values)[k], 0xAB);
    c = col(b, 3);
    ck_assert_uint_eq(c.nvalues, 4);
    ck_assert_uint_eq(c.value_bytes, 12);
    ck_assert(memcmp(c.values, "xyzxyzxyzxyz", 12) == 0);
    for (int k = 0; k <= 4; k++)
        ck_assert_uint_eq(c.bytes_offsets[k], 3u * (unsigned)k);
    c = col(b, 4);
    ck_assert_uint_eq(c.nvalues, 2);
    ck_assert_uint_eq(c.value_bytes, 0);
    ck_assert_uint_eq(c.bytes_offsets[2], 0);
    c = col(b, 5); /* varlen: missing is an empty row */
    ck_assert_uint_eq(c.nvalues, 0);
    ck_assert_uint_eq(c.row_splits[1], 0);
    ck_assert_uint_eq(c.row_splits[2], 0);
    fmt_batch_destroy(b);
}
END_TEST

/* ---- count and type errors --------------------------------------------- */

START_TEST(test_wrong_count)
{
    struct fmt_feature_spec specs[] = {
        spec_fixed("i", FMT_DTYPE_INT64, 1, 2, 0),
        spec_fixed("f", FMT_DTYPE_FLOAT32, 2, 2, 3),
        spec_fixed("s", FMT_DTYPE_BYTES, 0, 0, 0),
    };
    struct fmt_batch *b = create(specs, 3, 4);
    struct sl_error err = {0};
    const int64_t iv[] = {1, 2, 3};
    const float fv[7] = {0};
    const char *sv[] = {"a", "b"};
    struct ex x;

    ex_begin(&x);
    ex_i64(&x, "i", iv, 2);
    ex_f32(&x, "f", fv, 6);
    ex_str(&x, "s", sv, 1);
    ex_end(&x);
    ck_assert_int_eq(add_ex(b, &x, &err), 0);

    ex_begin(&x);
    ex_i64(&x, "i", iv, 3);
    ex_f32(&x, "f", fv, 6);
    ex_str(&x, "s", sv, 1);
    ex_end(&x);
    assert_err(add_ex(b, &x, &err), SL_EINVAL, &err,
               "Key: i, Index: 1.  Number of int64 values != expected.  Values size: 3 but output shape: [2]");

    ex_begin(&x);
    ex_i64(&x, "i", iv, 2);
    ex_f32(&x, "f", fv, 7);
    ex_str(&x, "s", sv, 1);
    ex_end(&x);
    assert_err(add_ex(b, &x, &err), SL_EINVAL, &err,
               "Key: f, Index: 1.  Number of float values != expected.  Values size: 7 but output shape: [2,3]");

    ex_begin(&x);
    ex_i64(&x, "i", iv, 2);
    ex_f32(&x, "f", fv, 6);
    ex_str(&x, "s", sv, 2);
    ex_end(&x);
    assert_err(add_ex(b, &x, &err), SL_EINVAL, &err,
               "Key: s, Index: 1.  Number of bytes values != expected.  Values size: 2 but output shape: []");

    /* an explicitly empty list is present with 0 values */
    ex_begin(&x);
    ex_i64(&x, "i", NULL, 0);
    ex_f32(&x, "f", fv, 6);
    ex_str(&x, "s", sv, 1);
    ex_end(&x);
    assert_err(add_ex(b, &x, &err), SL_EINVAL, &err,
               "Key: i, Index: 1.  Number of int64 values != expected.  Values size: 0 but output shape: [2]");
    ex_begin(&x);
    ex_i64(&x, "i", iv, 2);
    ex_f32(&x, "f", fv, 6);
    ex_str(&x, "s", NULL, 0);
    ex_end(&x);
    assert_err(add_ex(b, &x, &err), SL_EINVAL, &err,
               "Key: s, Index: 1.  Number of bytes values != expected.  Values size: 0 but output shape: []");
    ck_assert_uint_eq(fmt_batch_rows(b), 1);
    fmt_batch_destroy(b);
}
END_TEST

START_TEST(test_wrong_type)
{
    struct fmt_feature_spec specs[] = {
        spec_fixed("i", FMT_DTYPE_INT64, 0, 0, 0),
        spec_fixed("u", FMT_DTYPE_UINT8, 1, 2, 0),
        spec_varlen("v", FMT_DTYPE_FLOAT32),
    };
    struct fmt_batch *b = create(specs, 3, 4);
    struct sl_error err = {0};
    const int64_t one = 1;
    const float f = 1;
    struct ex x;

    ex_begin(&x);
    ex_f32(&x, "i", &f, 1);
    ex_raw(&x, "u", "ab", 2);
    ex_end(&x);
    assert_err(add_ex(b, &x, &err), SL_EINVAL, &err,
               "Key: i, Index: 0.  Data types don't match. Data type: float but expected type: int64");

    ex_begin(&x);
    ex_i64(&x, "i", &one, 1);
    ex_i64(&x, "u", &one, 1);
    ex_end(&x);
    assert_err(add_ex(b, &x, &err), SL_EINVAL, &err,
               "Key: u, Index: 0.  Data types don't match. Data type: int64 but expected type: string");

    ex_begin(&x);
    ex_i64(&x, "i", &one, 1);
    ex_raw(&x, "u", "ab", 2);
    ex_raw(&x, "v", "ab", 2);
    ex_end(&x);
    assert_err(add_ex(b, &x, &err), SL_EINVAL, &err,
               "Key: v, Index: 0.  Data types don't match. Expected type: float, Actual type: string");
    ck_assert_uint_eq(fmt_batch_rows(b), 0);
    fmt_batch_destroy(b);
}
END_TEST

START_TEST(test_uint8_from_bytes)
{
    struct fmt_feature_spec specs[] = {spec_fixed("u", FMT_DTYPE_UINT8, 2, 2, 2)};
    struct fmt_batch *b = create(specs, 1, 4);
    struct sl_error err = {0};
    struct ex x;
    ex_begin(&x);
    ex_raw(&x, "u", "\x01\x02\x03\x04", 4);
    ex_end(&x);
    ck_assert_int_eq(add_ex(b, &x, &err), 0);
    ex_begin(&x);
    ex_raw(&x, "u", "\x01\x02\x03", 3);
    ex_end(&x);
    assert_err(add_ex(b, &x, &err), SL_EINVAL, &err,
               "Key: u, Index: 1.  Number of uint8 values != expected.  Values size: 3 but output shape: [2,2]");
    ex_begin(&x);
    ex_raw(&x, "u", "\x01\x02\x03\x04\x05", 5);
    ex_end(&x);
    assert_err(add_ex(b, &x, &err), SL_EINVAL, &err,
               "Key: u, Index: 1.  Number of uint8 values != expected.  Values size: 5 but output shape: [2,2]");
    const char *two[] = {"ab", "cd"};
    ex_begin(&x);
    ex_str(&x, "u", two, 2);
    ex_end(&x);
    assert_err(add_ex(b, &x, &err), SL_EINVAL, &err,
               "Key: u, Index: 1.  Number of bytes values != expected.  Values size: 2 but output shape: []");
    ex_begin(&x);
    ex_str(&x, "u", NULL, 0);
    ex_end(&x);
    assert_err(add_ex(b, &x, &err), SL_EINVAL, &err,
               "Key: u, Index: 1.  Number of bytes values != expected.  Values size: 0 but output shape: []");
    struct fmt_column c = col(b, 0);
    ck_assert_uint_eq(c.rows, 1);
    ck_assert(memcmp(c.values, "\x01\x02\x03\x04", 4) == 0);
    fmt_batch_destroy(b);
}
END_TEST

/* ---- variable length and bytes ------------------------------------------ */

START_TEST(test_varlen_ragged)
{
    struct fmt_feature_spec specs[] = {
        spec_varlen("i", FMT_DTYPE_INT64),
        spec_varlen("f", FMT_DTYPE_FLOAT32),
        spec_varlen("s", FMT_DTYPE_BYTES),
        spec_varlen("u", FMT_DTYPE_UINT8),
    };
    struct fmt_batch *b = create(specs, 4, 4);
    struct sl_error err = {0};
    struct ex x;
    const int64_t iv[] = {10, -20, 30};
    const float fv[] = {0.5f, 1.5f};
    const char *sv[] = {"hello", "", "w"};

    ex_begin(&x);
    ex_i64(&x, "i", iv, 3);
    ex_f32(&x, "f", fv, 2);
    ex_str(&x, "s", sv, 3);
    ex_str(&x, "u", sv, 3);
    ex_end(&x);
    ck_assert_int_eq(add_ex(b, &x, &err), 0);
    ck_assert_int_eq(add(b, NULL, 0, &err), 0); /* all missing */
    ex_begin(&x);
    ex_i64(&x, "i", iv + 1, 2);
    ex_f32(&x, "f", NULL, 0);
    ex_str(&x, "s", sv + 2, 1);
    ex_raw(&x, "u", "\x00\xff", 2);
    ex_end(&x);
    ck_assert_int_eq(add_ex(b, &x, &err), 0);

    struct fmt_column c = col(b, 0);
    ck_assert_int_eq(c.varlen, 1);
    ck_assert_uint_eq(c.rows, 3);
    ck_assert_uint_eq(c.nvalues, 5);
    ck_assert_uint_eq(c.value_bytes, 40);
    const uint64_t want_i[] = {0, 3, 3, 5};
    for (int k = 0; k < 4; k++)
        ck_assert_uint_eq(c.row_splits[k], want_i[k]);
    const int64_t want_iv[] = {10, -20, 30, -20, 30};
    for (int k = 0; k < 5; k++)
        ck_assert_int_eq(i64s(&c)[k], want_iv[k]);

    c = col(b, 1);
    ck_assert_uint_eq(c.nvalues, 2);
    ck_assert_uint_eq(c.row_splits[1], 2);
    ck_assert_uint_eq(c.row_splits[3], 2);
    ck_assert(f32s(&c)[1] == 1.5f);

    c = col(b, 2);
    ck_assert_uint_eq(c.nvalues, 4);
    ck_assert_uint_eq(c.value_bytes, 7);
    const uint64_t want_s[] = {0, 3, 3, 4};
    for (int k = 0; k < 4; k++)
        ck_assert_uint_eq(c.row_splits[k], want_s[k]);
    const uint64_t want_off[] = {0, 5, 5, 6, 7};
    for (int k = 0; k < 5; k++)
        ck_assert_uint_eq(c.bytes_offsets[k], want_off[k]);
    ck_assert(memcmp(c.values, "helloww", 7) == 0);

    c = col(b, 3); /* varlen uint8: the bytes of all values */
    ck_assert_uint_eq(c.nvalues, 8);
    ck_assert_ptr_null(c.bytes_offsets);
    const uint64_t want_u[] = {0, 6, 6, 8};
    for (int k = 0; k < 4; k++)
        ck_assert_uint_eq(c.row_splits[k], want_u[k]);
    ck_assert(memcmp(c.values, "hellow\x00\xff", 8) == 0);
    fmt_batch_destroy(b);
}
END_TEST

START_TEST(test_bytes_offsets_and_growth)
{
    struct fmt_feature_spec specs[] = {spec_fixed("s", FMT_DTYPE_BYTES, 1, 3, 0), spec_varlen("v", FMT_DTYPE_BYTES)};
    struct fmt_batch *b = create(specs, 2, 64);
    struct sl_error err = {0};
    static char big[3000];
    memset(big, 'z', sizeof big - 1);
    for (int r = 0; r < 64; r++) {
        const char *three[] = {"", "ab", r % 2 ? big : "c"};
        struct ex x;
        ex_begin(&x);
        ex_str(&x, "s", three, 3);
        ex_str(&x, "v", three, (size_t)(r % 4));
        ex_end(&x);
        ck_assert_int_eq(add_ex(b, &x, &err), 0);
    }
    struct fmt_column c = col(b, 0);
    ck_assert_uint_eq(c.nvalues, 192);
    size_t off = 0;
    for (int r = 0; r < 64; r++) {
        size_t l3 = r % 2 ? sizeof big - 1 : 1;
        ck_assert_uint_eq(c.bytes_offsets[3 * r], off);
        ck_assert_uint_eq(c.bytes_offsets[3 * r + 1], off);
        ck_assert_uint_eq(c.bytes_offsets[3 * r + 2], off + 2);
        ck_assert(memcmp((const char *)c.values + off + 2, r % 2 ? big : "c", l3) == 0);
        off += 2 + l3;
        ck_assert_uint_eq(c.bytes_offsets[3 * r + 3], off);
    }
    ck_assert_uint_eq(c.value_bytes, off);
    c = col(b, 1);
    size_t nv = 0;
    for (int r = 0; r < 64; r++) {
        ck_assert_uint_eq(c.row_splits[r], nv);
        nv += (size_t)(r % 4);
    }
    ck_assert_uint_eq(c.row_splits[64], nv);
    ck_assert_uint_eq(c.nvalues, nv);
    ck_assert_uint_eq(c.bytes_offsets[nv], c.value_bytes);
    fmt_batch_destroy(b);
}
END_TEST

/* A failing row leaves every column as it was, even the ones decoded before
 * the failure. */
START_TEST(test_error_leaves_batch_unchanged)
{
    struct fmt_feature_spec specs[] = {
        spec_varlen("v", FMT_DTYPE_INT64),
        spec_varlen("s", FMT_DTYPE_BYTES),
        spec_fixed("b", FMT_DTYPE_BYTES, 0, 0, 0),
        spec_fixed("z", FMT_DTYPE_INT64, 0, 0, 0),
    };
    struct fmt_batch *b = create(specs, 4, 4);
    struct sl_error err = {0};
    const int64_t iv[] = {1, 2, 3, 4};
    const char *sv[] = {"p", "q"};
    struct ex x;
    for (int pass = 0; pass < 2; pass++) {
        ex_begin(&x);
        ex_i64(&x, "v", iv, (size_t)(2 + pass));
        ex_str(&x, "s", sv, 2);
        ex_str(&x, "b", sv + pass, 1);
        ex_i64(&x, "z", iv + pass, 1);
        ex_end(&x);
        ck_assert_int_eq(add_ex(b, &x, &err), 0);
        /* the same with z missing: everything before it was staged */
        ex_begin(&x);
        ex_i64(&x, "v", iv, 4);
        ex_str(&x, "s", sv, 2);
        ex_str(&x, "b", sv, 1);
        ex_end(&x);
        ck_assert_int_eq(add_ex(b, &x, &err), SL_EINVAL);
    }
    ck_assert_uint_eq(fmt_batch_rows(b), 2);
    struct fmt_column c = col(b, 0);
    ck_assert_uint_eq(c.nvalues, 5);
    ck_assert_uint_eq(c.row_splits[2], 5);
    const int64_t want[] = {1, 2, 1, 2, 3};
    for (int k = 0; k < 5; k++)
        ck_assert_int_eq(i64s(&c)[k], want[k]);
    c = col(b, 1);
    ck_assert_uint_eq(c.nvalues, 4);
    ck_assert_uint_eq(c.value_bytes, 4);
    ck_assert(memcmp(c.values, "pqpq", 4) == 0);
    c = col(b, 2);
    ck_assert_uint_eq(c.nvalues, 2);
    ck_assert(memcmp(c.values, "pq", 2) == 0);
    ck_assert_uint_eq(c.bytes_offsets[2], 2);
    c = col(b, 3);
    ck_assert_int_eq(i64s(&c)[0], 1);
    ck_assert_int_eq(i64s(&c)[1], 2);
    fmt_batch_destroy(b);
}
END_TEST

/* ---- framing and laziness ---------------------------------------------- */

START_TEST(test_undeclared_keys_not_parsed)
{
    struct fmt_feature_spec specs[] = {spec_fixed("a", FMT_DTYPE_INT64, 0, 0, 0)};
    struct fmt_batch *b = create(specs, 1, 4);
    struct sl_error err = {0};
    /* key "z" has an unsupported datatype and garbage; only framing counts */
    ck_assert_int_eq(add_hex(b, "0a15" A1 "0a07 0a017a 1202 2aff", &err), 0);
    /* a declared key with an unsupported datatype is an error */
    assert_err(add_hex(b, "0a09 0a07 0a0161 1202 2aff", &err), SL_ECORRUPT, &err,
               "Key: a, Index: 1.  Unsupported datatype (tag 0x2a) at byte 9");
    /* a bad list under a declared key */
    assert_err(
        add_hex(b, "0a09 0a07 0a0161 1202 1a05", &err), SL_ECORRUPT, &err,
        "Key: a, Index: 1.  Can't parse serialized Example: list length 5 past the end (0 bytes left) at byte 10");
    assert_err(add_hex(b, "0a0b 0a09 0a0161 1204 1a02 0a05", &err), SL_ECORRUPT, &err,
               "Key: a, Index: 1.  Can't parse serialized Example: packed int64 length 5 past the end (0 bytes left) "
               "at byte 12");
    /* framing errors come from the walk */
    assert_err(add_hex(b, "0a05 0a03", &err), SL_ECORRUPT, &err,
               "Features length 5 past the end (2 bytes left) at byte 1");
    assert_err(add_hex(b, "13", &err), SL_ECORRUPT, &err, "group start (wire type 3) at byte 0");
    ck_assert_uint_eq(fmt_batch_rows(b), 1);
    fmt_batch_destroy(b);
}
END_TEST

START_TEST(test_unpacked_and_first_chunk)
{
    struct fmt_feature_spec specs[] = {spec_fixed("a", FMT_DTYPE_INT64, 1, 3, 0), spec_varlen("f", FMT_DTYPE_FLOAT32)};
    struct fmt_batch *b = create(specs, 2, 4);
    struct sl_error err = {0};
    /* docs/semantics.md 1.4's unpacked a=[1,2,3] */
    ck_assert_int_eq(add_hex(b, "0a0f 0a0d 0a0161 1208 1a06 080108020803", &err), 0);
    /* packed [4,5,6] followed by a second chunk [7]: ignored;
     * f: unpacked floats */
    ck_assert_int_eq(add_hex(b,
                             "0a24 0a0f 0a0161 120a 1a08 0a03 040506 0a01 07"
                             "0a11 0a0166 120c 120a 0d 0000803f 0d 00000040",
                             &err),
                     0);
    struct fmt_column c = col(b, 0);
    const int64_t want[] = {1, 2, 3, 4, 5, 6};
    for (int k = 0; k < 6; k++)
        ck_assert_int_eq(i64s(&c)[k], want[k]);
    c = col(b, 1);
    ck_assert_uint_eq(c.nvalues, 2);
    ck_assert(f32s(&c)[0] == 1.0f && f32s(&c)[1] == 2.0f);
    fmt_batch_destroy(b);
}
END_TEST

/* Every prefix of a valid row: an error or the right row, never a crash. */
START_TEST(test_every_cut_point)
{
    struct fmt_feature_spec specs[] = {
        spec_fixed("image", FMT_DTYPE_UINT8, 1, 8, 0),
        spec_fixed("label", FMT_DTYPE_INT64, 0, 0, 0),
        spec_varlen("v", FMT_DTYPE_FLOAT32),
        spec_varlen("s", FMT_DTYPE_BYTES),
    };
    struct fmt_batch *b = create(specs, 4, 2);
    struct ex x;
    const int64_t label = -3;
    const float fv[] = {1, 2, 3};
    const char *sv[] = {"abc", "de"};
    ex_begin(&x);
    ex_raw(&x, "image", "01234567", 8);
    ex_i64(&x, "label", &label, 1);
    ex_f32(&x, "v", fv, 3);
    ex_str(&x, "s", sv, 2);
    ex_end(&x);
    for (size_t cut = 0; cut < x.buf.len; cut++) {
        struct sl_error err = {0};
        int rc = add(b, x.buf.data, cut, &err);
        ck_assert(rc == SL_ECORRUPT || rc == SL_EINVAL);
        ck_assert_uint_eq(fmt_batch_rows(b), 0);
    }
    struct sl_error err = {0};
    ck_assert_int_eq(add(b, x.buf.data, x.buf.len, &err), 0);
    struct fmt_column c = col(b, 1);
    ck_assert_int_eq(i64s(&c)[0], -3);
    c = col(b, 3);
    ck_assert_uint_eq(c.nvalues, 2);
    sl_buf_free(&x.buf);
    fmt_batch_destroy(b);
}
END_TEST

/* ---- create ------------------------------------------------------------ */

START_TEST(test_many_features_hashed)
{
    struct fmt_feature_spec specs[40];
    char name[32];
    for (int i = 0; i < 40; i++) {
        snprintf(name, sizeof name, "feature_%d", i);
        specs[i] = spec_fixed(name, FMT_DTYPE_INT64, 0, 0, 0);
    }
    struct fmt_batch *b = create(specs, 40, 2);
    struct ex x;
    ex_begin(&x);
    for (int i = 39; i >= 0; i--) {
        int64_t v = i * 11;
        snprintf(name, sizeof name, "feature_%d", i);
        ex_i64(&x, name, &v, 1);
        ex_i64(&x, "not_declared", &v, 1);
    }
    ex_end(&x);
    struct sl_error err = {0};
    ck_assert_int_eq(add_ex(b, &x, &err), 0);
    for (int i = 0; i < 40; i++) {
        struct fmt_column c = col(b, (size_t)i);
        ck_assert_int_eq(i64s(&c)[0], i * 11);
    }
    fmt_batch_destroy(b);
}
END_TEST

START_TEST(test_create_errors)
{
    struct fmt_batch *b = (struct fmt_batch *)&b;
    struct sl_error err = {0};
    struct fmt_feature_spec specs[2] = {spec_fixed("a", FMT_DTYPE_INT64, 0, 0, 0),
                                        spec_fixed("a", FMT_DTYPE_FLOAT32, 0, 0, 0)};
    assert_err(fmt_batch_create(&b, specs, 2, 4, &err), SL_EINVAL, &err, "feature a is declared twice");
    ck_assert_ptr_null(b);
    assert_err(fmt_batch_create(&b, specs, 1, 0, &err), SL_EINVAL, &err, "batch capacity must be at least 1");
    specs[0] = spec_fixed("img", FMT_DTYPE_UINT8, 2, 28, -1);
    assert_err(fmt_batch_create(&b, specs, 1, 4, &err), SL_EINVAL, &err,
               "All dimensions of shape for feature img need to be known but received [28,?].");
    specs[0] = spec_fixed("img", FMT_DTYPE_UINT8, 9, 1, 1);
    assert_err(fmt_batch_create(&b, specs, 1, 4, &err), SL_EINVAL, &err, "feature img: rank 9 is outside 0..8");
    specs[0] = spec_fixed("img", (enum fmt_dtype)7, 0, 0, 0);
    assert_err(fmt_batch_create(&b, specs, 1, 4, &err), SL_EINVAL, &err, "Invalid config dtype: 7 (feature img)");
    specs[0] = spec_fixed("s", FMT_DTYPE_BYTES, 0, 0, 0);
    specs[0].has_default = 1;
    specs[0].default_bytes_len = 3;
    assert_err(fmt_batch_create(&b, specs, 1, 4, &err), SL_EINVAL, &err, "feature s: default_bytes is NULL");
    specs[0] = spec_fixed("huge", FMT_DTYPE_INT64, 2, INT64_MAX / 2, 4);
    ck_assert_int_eq(fmt_batch_create(&b, specs, 1, 4, &err), SL_EINVAL);
    memset(specs[0].name, 'x', sizeof specs[0].name);
    assert_err(fmt_batch_create(&b, specs, 1, 4, &err), SL_EINVAL, &err, "feature #0: name is not NUL-terminated");
    ck_assert_ptr_null(b);
    /* no features: rows only */
    ck_assert_int_eq(fmt_batch_create(&b, NULL, 0, 2, &err), 0);
    ck_assert_int_eq(add_hex(b, "0a00", &err), 0);
    ck_assert_uint_eq(fmt_batch_rows(b), 1);
    ck_assert_uint_eq(fmt_batch_ncolumns(b), 0);
    struct fmt_column c = col(b, 5);
    ck_assert_ptr_null(c.name);
    fmt_batch_destroy(b);
    fmt_batch_destroy(NULL);
}
END_TEST

/* Fail the 1st, 2nd, ... allocation of create until it succeeds: every
 * failure is a clean SL_ENOMEM with nothing leaked (LeakSanitizer). */
START_TEST(test_create_alloc_failures)
{
    struct fmt_feature_spec specs[] = {
        spec_fixed("image", FMT_DTYPE_UINT8, 1, 784, 0),
        spec_fixed("s", FMT_DTYPE_BYTES, 0, 0, 0),
        spec_varlen("v", FMT_DTYPE_BYTES),
        spec_varlen("i", FMT_DTYPE_INT64),
        spec_fixed("label", FMT_DTYPE_INT64, 0, 0, 0),
    };
    specs[1].has_default = 1;
    specs[1].default_bytes = (const uint8_t *)"dflt";
    specs[1].default_bytes_len = 4;
    int failures = 0;
    for (long n = 1;; n++) {
        struct fmt_batch *b = (struct fmt_batch *)&b;
        struct sl_error err = {0};
        sl_alloc_fail_after(n);
        int rc = fmt_batch_create(&b, specs, 5, 16, &err);
        sl_alloc_fail_reset();
        if (rc == 0) {
            fmt_batch_destroy(b);
            break;
        }
        ck_assert_int_eq(rc, SL_ENOMEM);
        ck_assert_ptr_null(b);
        ck_assert(strstr(err.msg, "out of memory") != NULL);
        failures++;
        ck_assert_int_lt(failures, 100);
    }
    ck_assert_int_ge(failures, 10);
}
END_TEST

/* A column that must grow while memory fails: SL_ENOMEM, row not added. */
START_TEST(test_add_alloc_failure)
{
    struct fmt_feature_spec specs[] = {spec_varlen("s", FMT_DTYPE_BYTES), spec_fixed("a", FMT_DTYPE_INT64, 0, 0, 0)};
    struct fmt_batch *b = create(specs, 2, 4);
    struct sl_error err = {0};
    static char big[10000];
    memset(big, 'q', sizeof big - 1);
    const char *sv[] = {big};
    const int64_t one = 1;
    struct ex x;
    ex_begin(&x);
    ex_str(&x, "s", sv, 1);
    ex_i64(&x, "a", &one, 1);
    ex_end(&x);
    sl_alloc_fail_after(1);
    int rc = add(b, x.buf.data, x.buf.len, &err);
    sl_alloc_fail_reset();
    ck_assert_int_eq(rc, SL_ENOMEM);
    ck_assert_uint_eq(fmt_batch_rows(b), 0);
    ck_assert_int_eq(add(b, x.buf.data, x.buf.len, &err), 0);
    struct fmt_column c = col(b, 0);
    ck_assert_uint_eq(c.value_bytes, sizeof big - 1);
    sl_buf_free(&x.buf);
    fmt_batch_destroy(b);
}
END_TEST

START_TEST(test_dtypes)
{
    enum fmt_dtype t;
    ck_assert_int_eq(fmt_dtype_parse("int64", &t), 0);
    ck_assert_int_eq(t, FMT_DTYPE_INT64);
    ck_assert_int_eq(fmt_dtype_parse("float32", &t), 0);
    ck_assert_int_eq(t, FMT_DTYPE_FLOAT32);
    ck_assert_int_eq(fmt_dtype_parse("float", &t), 0);
    ck_assert_int_eq(t, FMT_DTYPE_FLOAT32);
    ck_assert_int_eq(fmt_dtype_parse("bytes", &t), 0);
    ck_assert_int_eq(t, FMT_DTYPE_BYTES);
    ck_assert_int_eq(fmt_dtype_parse("string", &t), 0);
    ck_assert_int_eq(t, FMT_DTYPE_BYTES);
    ck_assert_int_eq(fmt_dtype_parse("uint8", &t), 0);
    ck_assert_int_eq(t, FMT_DTYPE_UINT8);
    ck_assert_int_eq(fmt_dtype_parse("int32", &t), SL_EINVAL);
    ck_assert_int_eq(fmt_dtype_parse(NULL, &t), SL_EINVAL);
    ck_assert_str_eq(fmt_dtype_name(FMT_DTYPE_INT64), "int64");
    ck_assert_str_eq(fmt_dtype_name(FMT_DTYPE_FLOAT32), "float32");
    ck_assert_str_eq(fmt_dtype_name(FMT_DTYPE_BYTES), "bytes");
    ck_assert_str_eq(fmt_dtype_name(FMT_DTYPE_UINT8), "uint8");
    ck_assert_uint_eq(fmt_dtype_size(FMT_DTYPE_INT64), 8);
    ck_assert_uint_eq(fmt_dtype_size(FMT_DTYPE_FLOAT32), 4);
    ck_assert_uint_eq(fmt_dtype_size(FMT_DTYPE_BYTES), 0);
    ck_assert_uint_eq(fmt_dtype_size(FMT_DTYPE_UINT8), 1);
    struct fmt_feature_spec s = spec_fixed("x", FMT_DTYPE_INT64, 2, 28, 28);
    ck_assert_uint_eq(fmt_feature_spec_count(&s), 784);
    s.rank = 0;
    ck_assert_uint_eq(fmt_feature_spec_count(&s), 1);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("fmt_features");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_fashion_rows);
    tcase_add_test(tc, test_bind_decodes_in_place);
    tcase_add_test(tc, test_duplicates_last_wins);
    tcase_add_test(tc, test_varlen_duplicates);
    tcase_add_test(tc, test_missing_required);
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_wrong_count);
    tcase_add_test(tc, test_wrong_type);
    tcase_add_test(tc, test_uint8_from_bytes);
    tcase_add_test(tc, test_varlen_ragged);
    tcase_add_test(tc, test_bytes_offsets_and_growth);
    tcase_add_test(tc, test_error_leaves_batch_unchanged);
    tcase_add_test(tc, test_undeclared_keys_not_parsed);
    tcase_add_test(tc, test_unpacked_and_first_chunk);
    tcase_add_test(tc, test_every_cut_point);
    tcase_add_test(tc, test_many_features_hashed);
    tcase_add_test(tc, test_create_errors);
    tcase_add_test(tc, test_create_alloc_failures);
    tcase_add_test(tc, test_add_alloc_failure);
    tcase_add_test(tc, test_dtypes);
    suite_add_tcase(s, tc);
    return s;
}
