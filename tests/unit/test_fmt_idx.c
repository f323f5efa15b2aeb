/* IDX arrays: header parsing, element order and values, gzip input, and
 * truncated / malformed files with their offsets. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "fmt_idx.h"
#include "sl_test.h"

/* 3 images of 2x2 uint8: values 10*i + k */
static size_t images(uint8_t *out)
{
    size_t n = sl_test_hex("00000803 00000003 00000002 00000002", out, 16);
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 4; k++)
            out[n++] = (uint8_t)(10 * i + k);
    return n;
}

START_TEST(test_images_and_labels)
{
    uint8_t buf[64];
    size_t n = images(buf);
    struct fmt_idx *x;
    struct sl_error err = {0};
    ck_assert_int_eq(fmt_idx_open(&x, sl_test_write("img.idx", buf, n), &err), 0);
    const struct fmt_idx_info *in = fmt_idx_info(x);
    ck_assert_int_eq(in->ndims, 3);
    ck_assert_uint_eq(in->count, 3);
    ck_assert_uint_eq(in->elem_bytes, 4);
    const uint8_t *e;
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(fmt_idx_next(x, &e, &err), 0);
        for (int k = 0; k < 4; k++)
            ck_assert_int_eq(e[k], 10 * i + k);
    }
    ck_assert_int_eq(fmt_idx_next(x, &e, &err), SL_END);
    fmt_idx_close(x);

    uint8_t lab[32];
    size_t ln = sl_test_hex("00000c01 00000002 fffffffe 00000109", lab, sizeof lab);
    ck_assert_int_eq(fmt_idx_open(&x, sl_test_write("lab.idx", lab, ln), &err), 0);
    ck_assert_int_eq(fmt_idx_next(x, &e, &err), 0);
    ck_assert_int_eq(fmt_idx_value_i64(x, e, 0), -2);
    ck_assert_int_eq(fmt_idx_next(x, &e, &err), 0);
    ck_assert_int_eq(fmt_idx_value_i64(x, e, 0), 265);
    fmt_idx_close(x);
}
END_TEST

START_TEST(test_gzip_input)
{
    uint8_t buf[64];
    size_t n = images(buf);
    const char *path = sl_test_path("img.idx.gz");
    gzFile g = gzopen(path, "wb");
    ck_assert_int_eq(gzwrite(g, buf, (unsigned)n), (int)n);
    gzclose(g);
    struct fmt_idx *x;
    struct sl_error err = {0};
    ck_assert_int_eq(fmt_idx_open(&x, path, &err), 0);
    const uint8_t *e;
    ck_assert_int_eq(fmt_idx_next(x, &e, &err), 0);
    ck_assert_int_eq(fmt_idx_next(x, &e, &err), 0);
    ck_assert_int_eq(e[3], 13);
    fmt_idx_close(x);
}
END_TEST

START_TEST(test_truncated_and_bad_magic)
{
    uint8_t buf[64];
    size_t n = images(buf);
    struct fmt_idx *x;
    struct sl_error err = {0};
    const char *p = sl_test_write("trunc.idx", buf, n - 1);
    ck_assert_int_eq(fmt_idx_open(&x, p, &err), 0);
    const uint8_t *e;
    ck_assert_int_eq(fmt_idx_next(x, &e, &err), 0);
    ck_assert_int_eq(fmt_idx_next(x, &e, &err), 0);
    ck_assert_int_eq(fmt_idx_next(x, &e, &err), SL_ECORRUPT);
    char want[600];
    snprintf(want, sizeof want, "%s: truncated IDX data at 24 (element 2 of 3)", p);
    ck_assert_str_eq(err.msg, want);
    fmt_idx_close(x);

    p = sl_test_write("hdr.idx", buf, 10);
    ck_assert_int_eq(fmt_idx_open(&x, p, &err), SL_ECORRUPT);
    snprintf(want, sizeof want, "%s: truncated IDX header at 10", p);
    ck_assert_str_eq(err.msg, want);

    buf[2] = 0x07;
    p = sl_test_write("magic.idx", buf, n);
    ck_assert_int_eq(fmt_idx_open(&x, p, &err), SL_ECORRUPT);
    ck_assert(strstr(err.msg, "not an IDX file at 0 (magic 00 00 07 03") != NULL);
}
END_TEST

START_TEST(test_real_fashion_mnist_if_installed)
{
    const char *path = "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz";
    size_t len;
    uint8_t *probe = sl_test_read(path, &len);
    if (probe == NULL)
        return; /* dataset-fashion-mnist not installed: covered by the CLI test */
    free(probe);
    struct fmt_idx *x;
    struct sl_error err = {0};
    ck_assert_int_eq(fmt_idx_open(&x, path, &err), 0);
    ck_assert_uint_eq(fmt_idx_info(x)->count, 10000);
    const uint8_t *e;
    long counts[10] = {0};
    int rc;
    while ((rc = fmt_idx_next(x, &e, &err)) == 0)
        counts[fmt_idx_value_i64(x, e, 0)]++;
    ck_assert_int_eq(rc, SL_END);
    for (int c = 0; c < 10; c++)
        ck_assert_int_eq(counts[c], 1000); /* the test set is balanced */
    fmt_idx_close(x);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("fmt_idx");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_images_and_labels);
    tcase_add_test(tc, test_gzip_input);
    tcase_add_test(tc, test_truncated_and_bad_magic);
    tcase_add_test(tc, test_real_fashion_mnist_if_installed);
    suite_add_tcase(s, tc);
    return s;
}
