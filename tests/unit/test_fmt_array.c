/* Arrays as a source: the .npy header parser (every field, every refusal
 * with its exact message and offset), IDX headers as arrays, the dtype
 * rules, and the "arrays" format's scan / frame / decode over groups of
 * .npy and IDX files (plain and gzip), with truncated data, headers that
 * lie about their shape, groups whose row counts differ and lossy dtypes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "fmt_array.h"
#include "fmt_format.h"
#include "sl_test.h"

/* An .npy header of version `major` around `dict`, padded with spaces and
 * a newline to a multiple of 64 bytes (as NumPy writes it); returns its
 * size. */
static size_t npy_header(uint8_t *out, int major, const char *dict)
{
    size_t pre = major == 1 ? 10 : 12, len = strlen(dict);
    size_t total = (pre + len + 1 + 63) / 64 * 64;
    size_t hlen = total - pre;
    memcpy(out, "\x93NUMPY", 6);
    out[6] = (uint8_t)major;
    out[7] = 0;
    out[8] = (uint8_t)(hlen & 0xff);
    out[9] = (uint8_t)(hlen >> 8);
    if (major != 1) {
        out[10] = (uint8_t)(hlen >> 16);
        out[11] = (uint8_t)(hlen >> 24);
    }
    memcpy(out + pre, dict, len);
    memset(out + pre + len, ' ', total - pre - len - 1);
    out[total - 1] = '\n';
    return total;
}

/* The parser's message for `dict` in a version 1.0 header. */
static const char *npy_error(const char *dict)
{
    static uint8_t buf[1024];
    static struct sl_error err;
    struct fmt_array_info a;
    memset(&err, 0, sizeof err);
    size_t n = npy_header(buf, 1, dict);
    ck_assert_int_eq(fmt_npy_parse_header(buf, n, &a, &err), SL_ECORRUPT);
    return err.msg;
}

START_TEST(test_npy_good)
{
    uint8_t buf[256];
    struct fmt_array_info a;
    struct sl_error err = {0};
    size_t n = npy_header(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }");
    ck_assert_uint_eq(n, 128); /* 10 + 60 + 1 bytes, to a multiple of 64 */
    ck_assert_int_eq(fmt_npy_parse_header(buf, n, &a, &err), 0);
    ck_assert_int_eq(a.kind, FMT_ARRAY_FLOAT);
    ck_assert_uint_eq(a.size, 4);
    ck_assert_int_eq(a.big_endian, 0);
    ck_assert_int_eq(a.ndims, 2);
    ck_assert_uint_eq(a.rows, 3);
    ck_assert_uint_eq(a.row_values, 4);
    ck_assert_uint_eq(a.row_bytes, 16);
    ck_assert_uint_eq(a.data_offset, 128);
    ck_assert_uint_eq(a.data_bytes, 48);
    ck_assert_str_eq(fmt_array_type_name(&a), "float32");
    char sh[64];
    ck_assert_str_eq(fmt_array_shape(&a, sh, sizeof sh), "(3, 4)");

    /* 1-d, big-endian, keys in another order, double quotes, no trailing
     * comma, a Python 2 long, version 2.0 and 3.0 */
    n = npy_header(buf, 2, "{\"shape\": (5L,), \"fortran_order\": False, \"descr\": \">i2\"}");
    ck_assert_int_eq(fmt_npy_parse_header(buf, n, &a, &err), 0);
    ck_assert_int_eq(a.kind, FMT_ARRAY_INT);
    ck_assert_uint_eq(a.size, 2);
    ck_assert_int_eq(a.big_endian, 1);
    ck_assert_int_eq(a.ndims, 1);
    ck_assert_uint_eq(a.rows, 5);
    ck_assert_uint_eq(a.row_values, 1);
    ck_assert_uint_eq(a.data_offset, 128);
    ck_assert_str_eq(fmt_array_shape(&a, sh, sizeof sh), "(5,)");
    n = npy_header(buf, 3, "{'descr': '|b1', 'fortran_order': False, 'shape': (2, 0, 7), }");
    ck_assert_int_eq(fmt_npy_parse_header(buf, n, &a, &err), 0);
    ck_assert_int_eq(a.kind, FMT_ARRAY_BOOL);
    ck_assert_uint_eq(a.rows, 2);
    ck_assert_uint_eq(a.row_values, 0);
    ck_assert_uint_eq(a.data_bytes, 0);
    /* fortran_order True is the same layout when one dimension at most is
     * above 1 */
    n = npy_header(buf, 1, "{'descr': '<f8', 'fortran_order': True, 'shape': (6, 1), }");
    ck_assert_int_eq(fmt_npy_parse_header(buf, n, &a, &err), 0);
    ck_assert_uint_eq(a.rows, 6);
    /* every supported descr */
    static const char *const ok[] = {"|u1", "|i1", "<u2", "<i2", "<u4", "<i4", "<u8",
                                     "<i8", "<f4", "<f8", ">f8", "=i4", "|b1", "<b1"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        char d[128];
        snprintf(d, sizeof d, "{'descr': '%s', 'fortran_order': False, 'shape': (1,), }", ok[i]);
        n = npy_header(buf, 1, d);
        ck_assert_msg(fmt_npy_parse_header(buf, n, &a, &err) == 0, "%s: %s", ok[i], err.msg);
    }
}
END_TEST

START_TEST(test_npy_preamble_errors)
{
    uint8_t buf[256];
    struct fmt_array_info a;
    struct sl_error err = {0};
    static const uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0};
    ck_assert_int_eq(fmt_npy_parse_header(png, sizeof png, &a, &err), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "not an npy file at 0 (magic 89 50 4e 47 0d 0a: expected 93 4e 55 4d 50 59)");

    size_t n = npy_header(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }");
    ck_assert_int_eq(fmt_npy_parse_header(buf, 7, &a, &err), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "truncated npy header at 7 (the preamble ends at 10)");
    ck_assert_int_eq(fmt_npy_parse_header(buf, 40, &a, &err), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "truncated npy header at 40 (the header ends at 128)");
    ck_assert_int_eq(fmt_npy_parse_header(buf, n - 1, &a, &err), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "truncated npy header at 127 (the header ends at 128)");

    buf[6] = 4;
    ck_assert_int_eq(fmt_npy_parse_header(buf, n, &a, &err), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "npy version 4.0 is not supported (1.0, 2.0 or 3.0) at 6");
    buf[6] = 1;
    buf[7] = 1;
    ck_assert_int_eq(fmt_npy_parse_header(buf, n, &a, &err), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "npy version 1.1 is not supported (1.0, 2.0 or 3.0) at 6");

    /* a 2.0 header that claims 70000 bytes: refused before it is read */
    n = npy_header(buf, 2, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }");
    buf[8] = 0x70;
    buf[9] = 0x11;
    buf[10] = 0x01; /* 0x011170 = 70000 */
    ck_assert_int_eq(fmt_npy_parse_header(buf, n, &a, &err), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "npy header of 70000 bytes is over the limit of 65536 at 8");
    buf[8] = buf[9] = buf[10] = buf[11] = 0xff;
    ck_assert_int_eq(fmt_npy_parse_header(buf, n, &a, &err), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "npy header of 4294967295 bytes is over the limit of 65536 at 8");
}
END_TEST

START_TEST(test_npy_dict_errors)
{
    ck_assert_str_eq(npy_error("{'descr': '<f4', 'foo': 1, 'shape': (3,), }"), "npy header: unknown key 'foo' at 27");
    ck_assert_str_eq(npy_error("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'shape': (3,), }"),
                     "npy header: key 'shape' given twice at 66");
    ck_assert_str_eq(npy_error("{'descr' '<f4', 'fortran_order': False, 'shape': (3,), }"),
                     "npy header: expected ':' at 19");
    ck_assert_str_eq(npy_error("{'fortran_order': False, 'shape': (3,), }"), "npy header: no key 'descr' at 50");
    ck_assert_str_eq(npy_error("{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }"),
                     "npy header: dtype '<c8' is not supported (bool, int8-64, uint8-64, float32, float64) at 20");
    ck_assert_str_eq(npy_error("{'descr': [('a', '<i4'), ('b', '<f8')], 'fortran_order': False, 'shape': (3,), }"),
                     "npy header: expected a string at 20");
    ck_assert_str_eq(npy_error("{'descr': '<f2', 'fortran_order': False, 'shape': (3,), }"),
                     "npy header: dtype '<f2' is not supported (bool, int8-64, uint8-64, float32, float64) at 20");
    ck_assert_str_eq(npy_error("{'descr': '<f4', 'fortran_order': False, 'shape': (), }"),
                     "npy header: a 0-d array has no rows (shape ()) at 60");
    ck_assert_str_eq(npy_error("{'descr': '|u1', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1, 1), }"),
                     "npy header: more than 9 dimensions at 88");
    ck_assert_str_eq(npy_error("{'descr': '|u1', 'fortran_order': False, 'shape': (4611686018427387905,), }"),
                     "npy header: dimension over 2^62 at 61");
    ck_assert_str_eq(npy_error("{'descr': '|u1', 'fortran_order': False, 'shape': (99999999999999999999999,), }"),
                     "npy header: dimension over 2^62 at 61");
    ck_assert_str_eq(npy_error("{'descr': '<i2', 'fortran_order': False, 'shape': (4611686018427387904, 2), }"),
                     "npy header: shape (4611686018427387904, 2) of int16 holds more than 2^62 bytes at 60");
    ck_assert_str_eq(npy_error("{'descr': '<f8', 'fortran_order': True, 'shape': (3, 4), }"),
                     "npy header: fortran_order True for shape (3, 4): only C-order rows can be served "
                     "(np.ascontiguousarray) at 44");
    ck_assert_str_eq(npy_error("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), } x"),
                     "npy header: the dictionary does not end the header at 68");
    ck_assert_str_eq(npy_error("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (3,), }"),
                     "npy header: expected True or False at 44");
    ck_assert_str_eq(npy_error("{'descr': '<f4}"), "npy header: unterminated string at 20");
    ck_assert_str_eq(npy_error("{'descr': '<\\x66', 'fortran_order': False, 'shape': (3,), }"),
                     "npy header: escapes are not supported in strings at 22");
    ck_assert_str_eq(npy_error("['descr']"), "npy header: expected '{' at 10");
    ck_assert_str_eq(npy_error("{'descr': '<f4' 'shape': (3,)}"), "npy header: expected ',' or '}' at 26");
    ck_assert_str_eq(npy_error("{'descr': '<f4', 'fortran_order': False, 'shape': (3 4), }"),
                     "npy header: expected ',' or ')' at 63");
    ck_assert_str_eq(npy_error("{'descr': '<f4', 'fortran_order': False, 'shape': (-3,), }"),
                     "npy header: expected a dimension or ')' at 61");
}
END_TEST

/* Every byte string the parser can be handed, cut anywhere: never a crash,
 * never a read past n (ASan), always 0 or SL_ECORRUPT. */
START_TEST(test_npy_every_prefix)
{
    uint8_t buf[256];
    size_t n = npy_header(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }");
    for (size_t k = 0; k <= n; k++) {
        uint8_t *copy = malloc(k ? k : 1);
        memcpy(copy, buf, k);
        struct fmt_array_info a;
        struct sl_error err = {0};
        int rc = fmt_npy_parse_header(copy, k, &a, &err);
        ck_assert_int_eq(rc, k == n ? 0 : SL_ECORRUPT);
        free(copy);
    }
}
END_TEST

START_TEST(test_idx_as_array)
{
    uint8_t buf[64];
    size_t n = sl_test_hex("00000B02 00000003 00000002", buf, sizeof buf);
    struct fmt_array_info a;
    struct sl_error err = {0};
    ck_assert_int_eq(fmt_idx_parse_array(buf, n, &a, &err), 0);
    ck_assert_int_eq(a.kind, FMT_ARRAY_INT);
    ck_assert_uint_eq(a.size, 2);
    ck_assert_int_eq(a.big_endian, 1);
    ck_assert_uint_eq(a.rows, 3);
    ck_assert_uint_eq(a.row_values, 2);
    ck_assert_uint_eq(a.data_offset, 12);
    ck_assert_int_eq(fmt_idx_parse_array(buf, 9, &a, &err), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "truncated IDX header at 9");
    buf[2] = 0x07;
    ck_assert_int_eq(fmt_idx_parse_array(buf, n, &a, &err), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "not an IDX file at 0 (magic 00 00 07 02: expected 00 00 <type> <1-8 dims>)");
}
END_TEST

START_TEST(test_dtype_rules)
{
    struct fmt_array_info a = {.kind = FMT_ARRAY_UINT, .size = 1};
    struct sl_error err = {0};
    ck_assert_int_eq(fmt_array_fits(&a, FMT_DTYPE_UINT8, &err), 0);
    ck_assert_int_eq(fmt_array_fits(&a, FMT_DTYPE_INT64, &err), 0);
    ck_assert_int_eq(fmt_array_fits(&a, FMT_DTYPE_FLOAT32, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "uint8 values cannot fill a float32 feature (declare it int64)");
    ck_assert_int_eq(fmt_array_fits(&a, FMT_DTYPE_BYTES, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "arrays cannot fill a bytes feature");
    a = (struct fmt_array_info){.kind = FMT_ARRAY_FLOAT, .size = 8};
    ck_assert_int_eq(fmt_array_fits(&a, FMT_DTYPE_FLOAT32, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "float64 values do not fit float32 without loss (save as float32)");
    ck_assert_int_eq(fmt_array_fits(&a, FMT_DTYPE_INT64, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "float64 values cannot fill an int64 feature (declare it float32)");
    a = (struct fmt_array_info){.kind = FMT_ARRAY_UINT, .size = 8};
    ck_assert_int_eq(fmt_array_fits(&a, FMT_DTYPE_INT64, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "uint64 values do not all fit int64");
    a = (struct fmt_array_info){.kind = FMT_ARRAY_INT, .size = 2};
    ck_assert_int_eq(fmt_array_fits(&a, FMT_DTYPE_UINT8, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "int16 values do not all fit uint8 (declare it int64)");
    a = (struct fmt_array_info){.kind = FMT_ARRAY_BOOL, .size = 1};
    ck_assert_int_eq(fmt_array_fits(&a, FMT_DTYPE_UINT8, &err), 0);
    ck_assert_int_eq(fmt_array_fits(&a, FMT_DTYPE_INT64, &err), 0);

    /* conversions: both byte orders, signs */
    uint8_t be[] = {0xff, 0xfe, 0x00, 0x05};
    int64_t out[2];
    a = (struct fmt_array_info){.kind = FMT_ARRAY_INT, .size = 2, .big_endian = 1};
    fmt_array_convert(&a, be, 2, FMT_DTYPE_INT64, out);
    ck_assert_int_eq(out[0], -2);
    ck_assert_int_eq(out[1], 5);
    a.big_endian = 0;
    fmt_array_convert(&a, be, 2, FMT_DTYPE_INT64, out);
    ck_assert_int_eq(out[0], -257);
    ck_assert_int_eq(out[1], 0x500);
    a.kind = FMT_ARRAY_UINT;
    fmt_array_convert(&a, be, 2, FMT_DTYPE_INT64, out);
    ck_assert_int_eq(out[0], 0xfeff);
    uint8_t f[] = {0x3f, 0xc0, 0x00, 0x00}; /* 1.5f big-endian */
    float fo;
    a = (struct fmt_array_info){.kind = FMT_ARRAY_FLOAT, .size = 4, .big_endian = 1};
    fmt_array_convert(&a, f, 1, FMT_DTYPE_FLOAT32, &fo);
    ck_assert(fo == 1.5f);
}
END_TEST

/* ---- the format, over files ---- */

static const char *write_npy(const char *name, const char *descr, const char *shape, const void *data, size_t len,
                             long extra)
{
    uint8_t buf[4096];
    char dict[256];
    snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
    size_t n = npy_header(buf, 1, dict);
    ck_assert_uint_le(n + len, sizeof buf);
    memcpy(buf + n, data, len);
    n += len;
    if (extra < 0)
        n -= (size_t)-extra;
    else
        for (long i = 0; i < extra; i++)
            buf[n++] = 0;
    return sl_test_write(name, buf, n);
}

static const char *gzip_file(const char *name, const void *data, size_t len)
{
    const char *path = sl_test_path(name);
    gzFile g = gzopen(path, "wb");
    ck_assert_ptr_nonnull(g);
    ck_assert_int_eq(gzwrite(g, data, (unsigned)len), (int)len);
    gzclose(g);
    return path;
}

static int scan(const char *const *paths, size_t n, const struct fmt_feature_spec *specs, struct fmt_scan **out,
                struct sl_error *err)
{
    struct fmt_scan_opts so = {.specs = specs, .nspecs = specs ? n : 0, .max_output = 1 << 20};
    return fmt_format_get(FMT_FORMAT_ARRAYS)->scan_group(out, paths, n, &so, err);
}

/* A group of three: float32 [4, 2] (.npy), int16 labels (IDX, big-endian,
 * gzip), int64 ids (.npy): frame every row, decode, check the values. */
START_TEST(test_group_rows)
{
    float img[8];
    for (int i = 0; i < 8; i++)
        img[i] = (float)i * 0.5f;
    int64_t ids[4] = {100, 101, 102, 103};
    uint8_t idx[64];
    size_t ni = sl_test_hex("00000B01 00000004 FFFF 0001 0002 8000", idx, sizeof idx);
    char paths_buf[3][512];
    snprintf(paths_buf[0], 512, "%s", write_npy("img.npy", "<f4", "(4, 2)", img, sizeof img, 0));
    snprintf(paths_buf[1], 512, "%s", gzip_file("lab.idx.gz", idx, ni));
    snprintf(paths_buf[2], 512, "%s", write_npy("id.npy", "<i8", "(4,)", ids, sizeof ids, 0));
    const char *paths[3] = {paths_buf[0], paths_buf[1], paths_buf[2]};
    struct fmt_feature_spec specs[3] = {{.name = "image", .dtype = FMT_DTYPE_FLOAT32, .rank = 1, .shape = {2}},
                                        {.name = "label", .dtype = FMT_DTYPE_INT64},
                                        {.name = "id", .dtype = FMT_DTYPE_INT64}};
    struct fmt_scan *s;
    struct sl_error err = {0};
    ck_assert_msg(scan(paths, 3, specs, &s, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(fmt_scan_count(s), 4);
    ck_assert_uint_eq(fmt_scan_parts(s), 3);
    ck_assert_uint_eq(fmt_scan_part_bytes(s, 0), 128 + 32);
    ck_assert_uint_eq(fmt_scan_part_bytes(s, 1), ni);
    ck_assert_int_eq(fmt_scan_part_compression(s, 1), FMT_COMP_GZIP);
    ck_assert_uint_eq(fmt_scan_image_bytes(s), 160 + ni + 160);
    ck_assert_uint_eq(fmt_scan_offset(s, 2), 128 + 16);

    /* the image: the members' decompressed bytes one after the other */
    size_t size = (size_t)fmt_scan_image_bytes(s), at = 0;
    uint8_t *image = malloc(size);
    for (int k = 0; k < 3; k++) {
        const uint8_t *raw = NULL;
        size_t len = 0;
        uint8_t *file = k == 1 ? NULL : sl_test_read(paths[k], &len);
        raw = k == 1 ? idx : file;
        len = k == 1 ? ni : len;
        memcpy(image + at, raw, len);
        at += len;
        free(file);
    }
    ck_assert_uint_eq(at, size);
    const struct fmt_format_ops *ops = fmt_format_get(FMT_FORMAT_ARRAYS);
    ck_assert_int_eq(ops->check_specs(specs, 3, &err), 0);
    struct fmt_batch *b;
    ck_assert_int_eq(fmt_batch_create(&b, specs, 3, 4, &err), 0);
    struct fmt_frame fr = {0};
    for (uint64_t r = 0; r < 4; r++) {
        ck_assert_int_eq(ops->frame(s, image, size, r, 1, &fr, &err), 0);
        ck_assert_uint_eq(fr.nfields, 3);
        ck_assert_int_eq(ops->decode(b, &fr, &err), 0);
    }
    ck_assert_int_eq(ops->frame(s, image, size, 4, 1, &fr, &err), SL_EINVAL);
    ck_assert_int_eq(ops->frame(s, image, size - 1, 3, 1, &fr, &err), SL_ECORRUPT);
    struct fmt_column c;
    fmt_batch_column(b, 0, &c);
    for (int i = 0; i < 8; i++)
        ck_assert(((const float *)c.values)[i] == (float)i * 0.5f);
    fmt_batch_column(b, 1, &c);
    static const int64_t labels[4] = {-1, 1, 2, -32768};
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(((const int64_t *)c.values)[i], labels[i]);
    fmt_batch_column(b, 2, &c);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(((const int64_t *)c.values)[i], 100 + i);
    fmt_frame_free(&fr);
    fmt_batch_destroy(b);
    free(image);
    fmt_scan_free(s);
}
END_TEST

START_TEST(test_group_errors)
{
    struct fmt_scan *s;
    struct sl_error err = {0};
    char want[2048];
    uint8_t zeros[256] = {0};
    struct fmt_feature_spec f32 = {.name = "x", .dtype = FMT_DTYPE_FLOAT32, .rank = 1, .shape = {4}};

    /* truncated data, a header that claims less than the file holds */
    const char *p = write_npy("short.npy", "<f4", "(3, 4)", zeros, 48, -1);
    ck_assert_int_eq(scan(&p, 1, &f32, &s, &err), SL_ECORRUPT);
    snprintf(want, sizeof want,
             "%s: truncated array data at 175 (shape (3, 4) of float32 needs 48 bytes of data from 128)", p);
    ck_assert_str_eq(err.msg, want);
    p = write_npy("long.npy", "<f4", "(3, 4)", zeros, 48, 5);
    ck_assert_int_eq(scan(&p, 1, &f32, &s, &err), SL_ECORRUPT);
    snprintf(want, sizeof want, "%s: 5 bytes after the array's data at 176 (shape (3, 4) of float32 ends there)", p);
    ck_assert_str_eq(err.msg, want);
    /* the same through gzip: the stream is read to its end */
    uint8_t buf[512];
    size_t n = npy_header(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }");
    memset(buf + n, 0, 47);
    p = gzip_file("short.npy.gz", buf, n + 47);
    ck_assert_int_eq(scan(&p, 1, &f32, &s, &err), SL_ECORRUPT);
    snprintf(want, sizeof want,
             "%s: truncated array data at 175 (shape (3, 4) of float32 needs 48 bytes of data from 128)", p);
    ck_assert_str_eq(err.msg, want);
    /* a huge shape in a small compressed file: refused from the header */
    n = npy_header(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000, 4), }");
    p = gzip_file("huge.npy.gz", buf, n);
    ck_assert_int_eq(scan(&p, 1, &f32, &s, &err), SL_ECORRUPT);
    snprintf(want, sizeof want,
             "%s: shape (1000000000, 4) of float32 declares 16000000128 bytes, over the inflate limit of 1048576 "
             "(inflate_cache_bytes) at 128",
             p);
    ck_assert_str_eq(err.msg, want);
    /* and in a plain one: its size says it lies */
    p = sl_test_write("huge.npy", buf, n);
    ck_assert_int_eq(scan(&p, 1, &f32, &s, &err), SL_ECORRUPT);
    snprintf(want, sizeof want,
             "%s: truncated array data at 128 (shape (1000000000, 4) of float32 needs 16000000000 bytes of data "
             "from 128)",
             p);
    ck_assert_str_eq(err.msg, want);
    /* a bad header names the file */
    p = sl_test_write("bad.npy", "\x93NUMPY\x01\x00\x08\x00{'x': 1}", 18);
    ck_assert_int_eq(scan(&p, 1, &f32, &s, &err), SL_ECORRUPT);
    snprintf(want, sizeof want, "%s: npy header: unknown key 'x' at 11", p);
    ck_assert_str_eq(err.msg, want);
    p = sl_test_write("png.npy", "\x89PNG", 4);
    ck_assert_int_eq(scan(&p, 1, &f32, &s, &err), SL_ECORRUPT);
    snprintf(want, sizeof want, "%s: not an npy or IDX array at 0 (first byte 89: expected 93 for npy, 00 00 for IDX)",
             p);
    ck_assert_str_eq(err.msg, want);

    /* the arrays of a group must have as many rows */
    char a_path[512], b_path[512];
    snprintf(a_path, sizeof a_path, "%s", write_npy("a.npy", "<f4", "(3, 4)", zeros, 48, 0));
    snprintf(b_path, sizeof b_path, "%s", write_npy("b.npy", "<i8", "(2,)", zeros, 16, 0));
    const char *group[2] = {a_path, b_path};
    struct fmt_feature_spec two[2] = {f32, {.name = "y", .dtype = FMT_DTYPE_INT64}};
    ck_assert_int_eq(scan(group, 2, two, &s, &err), SL_ECORRUPT);
    snprintf(want, sizeof want, "%s: 2 rows (shape (2,)), but %s has 3: the arrays of a group need as many rows at 128",
             b_path, a_path);
    ck_assert_str_eq(err.msg, want);

    /* dtypes and row sizes against the features */
    p = write_npy("f8.npy", "<f8", "(3, 4)", zeros, 96, 0);
    ck_assert_int_eq(scan(&p, 1, &f32, &s, &err), SL_EINVAL);
    snprintf(want, sizeof want,
             "%s: feature 'x' (float32): float64 values do not fit float32 without loss (save as float32) at 128", p);
    ck_assert_str_eq(err.msg, want);
    p = write_npy("f4.npy", "<f4", "(4, 3)", zeros, 48, 0);
    ck_assert_int_eq(scan(&p, 1, &f32, &s, &err), SL_EINVAL);
    snprintf(want, sizeof want, "%s: shape (4, 3) gives 3 values a row, feature 'x' wants 4 at 128", p);
    ck_assert_str_eq(err.msg, want);
    /* a reshape that keeps the count is fine: [2, 2] from (3, 4)'s rows of 4 */
    struct fmt_feature_spec sq = {.name = "x", .dtype = FMT_DTYPE_FLOAT32, .rank = 2, .shape = {2, 2}};
    p = write_npy("ok.npy", "<f4", "(3, 4)", zeros, 48, 0);
    ck_assert_msg(scan(&p, 1, &sq, &s, &err) == 0, "%s", err.msg);
    fmt_scan_free(s);
    /* rows over max_record_bytes */
    struct fmt_scan_opts so = {.max_record_bytes = 8};
    ck_assert_int_eq(fmt_format_get(FMT_FORMAT_ARRAYS)->scan(&s, p, &so, &err), SL_ECORRUPT);
    snprintf(want, sizeof want, "%s: rows of 16 bytes (shape (3, 4) of float32) exceed max_record_bytes (8) at 128", p);
    ck_assert_str_eq(err.msg, want);
    /* features the format cannot fill */
    struct fmt_feature_spec bytes = {.name = "s", .dtype = FMT_DTYPE_BYTES};
    ck_assert_int_eq(fmt_format_get(FMT_FORMAT_ARRAYS)->check_specs(&bytes, 1, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "feature s: an array fills a fixed-shape int64, float32 or uint8 feature");
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("fmt_array");
    TCase *tc = tcase_create("array");
    tcase_add_test(tc, test_npy_good);
    tcase_add_test(tc, test_npy_preamble_errors);
    tcase_add_test(tc, test_npy_dict_errors);
    tcase_add_test(tc, test_npy_every_prefix);
    tcase_add_test(tc, test_idx_as_array);
    tcase_add_test(tc, test_dtype_rules);
    tcase_add_test(tc, test_group_rows);
    tcase_add_test(tc, test_group_errors);
    suite_add_tcase(s, tc);
    return s;
}
