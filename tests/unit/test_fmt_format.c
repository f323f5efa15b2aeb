/* fmt_format: the per-format ops tables the feeder reads through. For each
 * format: the registry finds it; the scan locates every record (offsets,
 * count, image size); frame cuts a record out of the whole image by number,
 * with bare errors (no path: the caller adds it); decode adds it to a batch
 * (TFRecord: an Example; text: the line as the one bytes column; tar: the
 * sample's members by extension, numbers as text, raw uint8, defaults).
 * Tar shards are written by hand as ustar, so the test needs no libarchive. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmt_features.h"
#include "fmt_format.h"
#include "fmt_tfrecord.h"
#include "sl_test.h"

START_TEST(test_registry)
{
    static const char *names[] = {"tfrecord", "text", "tar"}, *elements[] = {"record", "line", "sample"};
    for (int f = FMT_FORMAT_TFRECORD; f <= FMT_FORMAT_TAR; f++) {
        const struct fmt_format_ops *ops = fmt_format_get((enum fmt_format)f);
        ck_assert_ptr_nonnull(ops);
        ck_assert_str_eq(ops->name, names[f]);
        ck_assert_str_eq(ops->element, elements[f]);
        ck_assert_str_eq(fmt_format_name((enum fmt_format)f), names[f]);
        enum fmt_format back;
        ck_assert_int_eq(fmt_format_parse(names[f], &back), 0);
        ck_assert_int_eq(back, f);
        ck_assert(ops->scan && ops->frame && ops->decode && ops->check_specs);
    }
    ck_assert_ptr_null(fmt_format_get((enum fmt_format)7));
    enum fmt_format x;
    ck_assert_int_eq(fmt_format_parse("csv", &x), SL_EINVAL);
    ck_assert(fmt_format_get(FMT_FORMAT_TAR)->next == NULL); /* tar has its own reader */
}
END_TEST

static struct fmt_scan *scan(enum fmt_format f, const char *path)
{
    struct fmt_scan_opts o = {0};
    struct fmt_scan *s = NULL;
    struct sl_error err = {0};
    int rc = fmt_format_get(f)->scan(&s, path, &o, &err);
    ck_assert_msg(rc == 0, "%s", err.msg);
    return s;
}

/* Example {features {feature {key: "x" value {int64_list {value: 7}}}}} */
static const uint8_t example7[] = {0x0a, 0x0b, 0x0a, 0x09, 0x0a, 0x01, 0x78, 0x12, 0x04, 0x1a, 0x02, 0x08, 0x07};

START_TEST(test_tfrecord)
{
    const char *path = sl_test_path("e.tfrecord.gz");
    struct fmt_tfrecord_writer *w;
    struct sl_error err = {0};
    ck_assert_int_eq(fmt_tfrecord_writer_open(&w, path, FMT_COMP_AUTO, -1, &err), 0);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(fmt_tfrecord_writer_write(w, example7, sizeof example7, &err), 0);
    ck_assert_int_eq(fmt_tfrecord_writer_close(w, &err), 0);
    const struct fmt_format_ops *ops = fmt_format_get(FMT_FORMAT_TFRECORD);
    struct fmt_scan *s = scan(FMT_FORMAT_TFRECORD, path);
    size_t rec = 12 + sizeof example7 + 4;
    ck_assert_uint_eq(fmt_scan_count(s), 3);
    ck_assert_int_eq(fmt_scan_compression(s), FMT_COMP_GZIP);
    ck_assert_uint_eq(fmt_scan_image_bytes(s), 3 * rec);
    ck_assert_uint_eq(fmt_scan_offset(s, 2), 2 * rec);
    ck_assert_uint_eq(fmt_scan_offset(s, 3), 0);

    /* the image: the three records as the writer frames them */
    uint8_t img[3 * 29];
    for (int i = 0; i < 3; i++) {
        fmt_tfrecord_header(img + i * rec, sizeof example7);
        memcpy(img + i * rec + 12, example7, sizeof example7);
        uint32_t c = fmt_tfrecord_footer(example7, sizeof example7);
        memcpy(img + i * rec + 12 + sizeof example7, &c, 4); /* little-endian host */
    }
    struct fmt_frame fr = {0};
    ck_assert_int_eq(ops->frame(s, img, sizeof img, 1, 1, &fr, &err), 0);
    ck_assert_ptr_null(fr.fields);
    ck_assert_uint_eq(fr.len, sizeof example7);
    ck_assert_int_eq(memcmp(fr.data, example7, sizeof example7), 0);

    struct fmt_feature_spec spec = {.name = "x", .dtype = FMT_DTYPE_INT64};
    struct fmt_batch *b;
    ck_assert_int_eq(fmt_batch_create(&b, &spec, 1, 4, &err), 0);
    ck_assert_int_eq(ops->check_specs(&spec, 1, &err), 0);
    ck_assert_int_eq(ops->decode(b, &fr, &err), 0);
    struct fmt_column c;
    fmt_batch_column(b, 0, &c);
    ck_assert_int_eq(((const int64_t *)c.values)[0], 7);

    /* damaged data: a bare error (the caller names the file); unverified
     * reads lend what is there */
    img[rec + 12] ^= 1;
    ck_assert_int_eq(ops->frame(s, img, sizeof img, 1, 1, &fr, &err), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "corrupted record at 41");
    ck_assert_int_eq(ops->frame(s, img, sizeof img, 1, 0, &fr, &err), 0);
    ck_assert_int_eq(ops->frame(s, img, rec + 20, 1, 1, &fr, &err), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "truncated record at 29");
    ck_assert_int_eq(ops->frame(s, img, sizeof img, 3, 1, &fr, &err), SL_EINVAL);
    fmt_frame_free(&fr);
    fmt_batch_destroy(b);
    fmt_scan_free(s);

    /* the scan's own errors name the file */
    const char *bad = sl_test_write("bad.tfrecord", img, sizeof img);
    struct fmt_scan_opts o = {0};
    ck_assert_int_eq(ops->scan(&s, bad, &o, &err), SL_ECORRUPT);
    ck_assert_ptr_null(s);
    char want[600];
    snprintf(want, sizeof want, "%s: corrupted record at 41", bad);
    ck_assert_str_eq(err.msg, want);
}
END_TEST

START_TEST(test_text)
{
    static const char text[] = "a\r\nbb\n\nc\rd";
    const char *path = sl_test_write("t.txt", text, sizeof text - 1);
    const struct fmt_format_ops *ops = fmt_format_get(FMT_FORMAT_TEXT);
    struct fmt_scan *s = scan(FMT_FORMAT_TEXT, path);
    ck_assert_uint_eq(fmt_scan_count(s), 4);
    ck_assert_uint_eq(fmt_scan_offset(s, 3), 7);
    ck_assert_uint_eq(fmt_scan_image_bytes(s), sizeof text - 1);

    struct fmt_feature_spec spec = {.name = "line", .dtype = FMT_DTYPE_BYTES};
    struct sl_error err = {0};
    ck_assert_int_eq(ops->check_specs(&spec, 1, &err), 0);
    struct fmt_feature_spec two[2] = {spec, spec};
    ck_assert_int_eq(ops->check_specs(two, 2, &err), SL_EINVAL);
    struct fmt_batch *b;
    ck_assert_int_eq(fmt_batch_create(&b, &spec, 1, 4, &err), 0);
    struct fmt_frame fr = {0};
    for (uint64_t i = 4; i-- > 0;) {
        ck_assert_int_eq(ops->frame(s, (const uint8_t *)text, sizeof text - 1, i, 1, &fr, &err), 0);
        ck_assert_int_eq(ops->decode(b, &fr, &err), 0);
    }
    struct fmt_column c;
    fmt_batch_column(b, 0, &c);
    ck_assert_uint_eq(c.nvalues, 4);
    ck_assert_uint_eq(c.value_bytes, 5);
    ck_assert_int_eq(memcmp(c.values, "cdbba", 5), 0); /* in the order added: lines 3, 2, 1, 0 */
    ck_assert_uint_eq(c.bytes_offsets[1], 2);
    ck_assert_uint_eq(c.bytes_offsets[2], 2);
    ck_assert_uint_eq(fmt_batch_variable_bytes(b), 5);
    fmt_frame_free(&fr);
    fmt_batch_destroy(b);
    fmt_scan_free(s);
}
END_TEST

/* ---- tar, written by hand (ustar) ---- */

static size_t put_member(uint8_t *out, const char *name, const char *data)
{
    size_t len = strlen(data);
    memset(out, 0, 512);
    snprintf((char *)out, 100, "%s", name);
    snprintf((char *)out + 100, 8, "%07o", 0644);
    snprintf((char *)out + 108, 8, "%07o", 0);
    snprintf((char *)out + 116, 8, "%07o", 0);
    snprintf((char *)out + 124, 12, "%011o", (unsigned)len);
    snprintf((char *)out + 136, 12, "%011o", 1700000000);
    out[156] = '0';
    memcpy(out + 257, "ustar", 6);
    memcpy(out + 263, "00", 2);
    memset(out + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += out[i];
    snprintf((char *)out + 148, 8, "%06o", sum);
    size_t padded = (len + 511) / 512 * 512;
    memset(out + 512, 0, padded);
    memcpy(out + 512, data, len);
    return 512 + padded;
}

static const char *write_tar(const char *name, const char *const *members, size_t n, size_t *size)
{
    static uint8_t buf[64 * 1024];
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        len += put_member(buf + len, members[2 * i], members[2 * i + 1]);
    memset(buf + len, 0, 1024);
    len += 1024;
    *size = len;
    return sl_test_write(name, buf, len);
}

START_TEST(test_tar)
{
    static const char *m[] = {"a/s1.cls", "3",    "a/s1.img", "wxyz", "a/s1.txt", "one",
                              "a/s2.cls", " 5\n", "a/s2.txt", "two",  "a/s3.cls", "x"};
    size_t size;
    const char *path = write_tar("s.tar", m, 6, &size);
    uint8_t *img = sl_test_read(path, &size);
    const struct fmt_format_ops *ops = fmt_format_get(FMT_FORMAT_TAR);
    struct fmt_scan *s = scan(FMT_FORMAT_TAR, path);
    ck_assert_uint_eq(fmt_scan_count(s), 3);
    ck_assert_uint_eq(fmt_scan_offset(s, 0), 0);
    ck_assert_uint_eq(fmt_scan_offset(s, 1), 3 * 1024); /* the header of its first member */
    ck_assert_uint_eq(fmt_scan_image_bytes(s), size);

    struct fmt_frame fr = {0};
    struct sl_error err = {0};
    ck_assert_int_eq(ops->frame(s, img, size, 0, 1, &fr, &err), 0);
    ck_assert_ptr_null(fr.data);
    ck_assert_uint_eq(fr.nfields, 3);
    ck_assert_str_eq(fr.fields[1].name, "img");
    ck_assert_uint_eq(fr.fields[1].len, 4);
    ck_assert_int_eq(memcmp(fr.fields[1].data, "wxyz", 4), 0);

    struct fmt_feature_spec specs[3] = {
        {.name = "cls", .dtype = FMT_DTYPE_INT64},
        {.name = "img", .dtype = FMT_DTYPE_UINT8, .rank = 1, .shape = {4}, .has_default = 1, .default_u8 = 9},
        {.name = "txt", .dtype = FMT_DTYPE_BYTES},
    };
    ck_assert_int_eq(ops->check_specs(specs, 3, &err), 0);
    struct fmt_batch *b;
    ck_assert_int_eq(fmt_batch_create(&b, specs, 3, 4, &err), 0);
    ck_assert_int_eq(ops->decode(b, &fr, &err), 0);
    ck_assert_int_eq(ops->frame(s, img, size, 1, 1, &fr, &err), 0);
    ck_assert_int_eq(ops->decode(b, &fr, &err), 0);
    struct fmt_column c;
    fmt_batch_column(b, 0, &c);
    ck_assert_int_eq(((const int64_t *)c.values)[0], 3);
    ck_assert_int_eq(((const int64_t *)c.values)[1], 5);
    fmt_batch_column(b, 1, &c);
    ck_assert_int_eq(memcmp(c.values, "wxyz\x09\x09\x09\x09", 8), 0); /* s2 has no .img: the default */
    fmt_batch_column(b, 2, &c);
    ck_assert_int_eq(memcmp(c.values, "onetwo", 6), 0);

    /* a number that is not one; a required field missing; the batch unchanged */
    ck_assert_int_eq(ops->frame(s, img, size, 2, 1, &fr, &err), 0);
    ck_assert_int_eq(ops->decode(b, &fr, &err), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "field 'cls' is not a list of int64 numbers");
    struct fmt_field only = {"img", (const uint8_t *)"abc", 3, NULL};
    struct fmt_frame f2 = {.fields = &only, .nfields = 1};
    ck_assert_int_eq(ops->decode(b, &f2, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "Feature: cls (data type: int64) is required but could not be found.");
    specs[0].has_default = 1;
    struct fmt_batch *b2;
    ck_assert_int_eq(fmt_batch_create(&b2, specs, 3, 4, &err), 0);
    ck_assert_int_eq(ops->decode(b2, &f2, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "Key: img.  Number of uint8 values != expected.  Values size: 3 but expected 4");
    fmt_batch_destroy(b2);
    ck_assert_uint_eq(fmt_batch_rows(b), 2);

    /* a sample past the image (the file shrank since the scan) */
    ck_assert_int_eq(ops->frame(s, img, 2000, 0, 1, &fr, &err), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "the file changed since it was scanned");

    struct fmt_feature_spec ragged = {.name = "cls", .dtype = FMT_DTYPE_INT64, .varlen = 1};
    ck_assert_int_eq(ops->check_specs(&ragged, 1, &err), SL_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "tar fields are scalar bytes or fixed-shape"));
    fmt_frame_free(&fr);
    fmt_batch_destroy(b);
    fmt_scan_free(s);
    free(img);

    /* grouping errors name the file, the member and its header */
    static const char *rep[] = {"k.a", "1", "k.a", "2"};
    const char *p2 = write_tar("rep.tar", rep, 2, &size);
    struct fmt_scan_opts o = {0};
    ck_assert_int_eq(ops->scan(&s, p2, &o, &err), SL_ECORRUPT);
    char want[700];
    snprintf(want, sizeof want, "%s: repeated extension 'a' in sample 'k' (member 'k.a', at byte 1024)", p2);
    ck_assert_str_eq(err.msg, want);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("fmt_format");
    TCase *tc = tcase_create("format");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_registry);
    tcase_add_test(tc, test_tfrecord);
    tcase_add_test(tc, test_text);
    tcase_add_test(tc, test_tar);
    suite_add_tcase(s, tc);
    return s;
}
