/* Tests for fmt_text through the shared reader: TensorFlow's TextLineDataset
 * table (docs/semantics.md 1.2), lines across buffer refills, gzip and
 * zlib files, CRLF, the line length limit, offsets and indexes. Compressed
 * files are made at test time with zlib. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "fmt_reader.h"
#include "sl_alloc.h"
#include "sl_test.h"

/* An expected line: its bytes and the offset of its first byte. */
struct line {
    const char *text;
    uint64_t offset;
};

static struct fmt_reader *open_mem(const char *name, const void *data, size_t len, const struct fmt_reader_opts *o)
{
    struct fmt_reader_opts def = {.format = FMT_FORMAT_TEXT};
    struct fmt_reader *r = NULL;
    struct sl_error err = {0};
    int rc = fmt_reader_open_mem(&r, name, data, len, o ? o : &def, &err);
    ck_assert_msg(rc == 0, "open %s: %d %s", name, rc, err.msg);
    return r;
}

static struct fmt_reader *open_file(const char *path, const struct fmt_reader_opts *o)
{
    struct fmt_reader *r = NULL;
    struct sl_error err = {0};
    int rc = fmt_reader_open(&r, path, o, &err);
    ck_assert_msg(rc == 0, "open %s: %d %s", path, rc, err.msg);
    return r;
}

static void expect_lines(struct fmt_reader *r, const struct line *want, size_t n, const char *what)
{
    struct fmt_record rec;
    struct sl_error err = {0};
    for (size_t i = 0; i < n; i++) {
        int rc = fmt_reader_next(r, &rec, &err);
        ck_assert_msg(rc == 0, "%s: line %zu: rc %d %s", what, i, rc, err.msg);
        size_t len = strlen(want[i].text);
        ck_assert_msg(rec.len == len && (len == 0 || memcmp(rec.data, want[i].text, len) == 0),
                      "%s: line %zu: got %zu bytes '%.*s', want '%s'", what, i, rec.len, (int)rec.len,
                      (const char *)rec.data, want[i].text);
        ck_assert_msg(rec.offset == want[i].offset, "%s: line %zu: offset %llu, want %llu", what, i,
                      (unsigned long long)rec.offset, (unsigned long long)want[i].offset);
        ck_assert_uint_eq(rec.index, i);
    }
    int rc = fmt_reader_next(r, &rec, &err);
    ck_assert_msg(rc == SL_END, "%s: expected the end after %zu lines, rc %d (%zu bytes)", what, n, rc,
                  rc == 0 ? rec.len : 0);
    ck_assert_int_eq(fmt_reader_next(r, &rec, &err), SL_END);
}

/* docs/semantics.md 1.2, plus a few more '\r' placements. */
static const struct {
    const char *bytes;
    struct line lines[4];
    size_t n;
} table[] = {
    {"a\nb\n", {{"a", 0}, {"b", 2}}, 2},
    {"a\nb", {{"a", 0}, {"b", 2}}, 2},
    {"a\r\nb\r\n", {{"a", 0}, {"b", 3}}, 2},
    {"a\rb\n", {{"ab", 0}}, 1},
    {"\n\n", {{"", 0}, {"", 1}}, 2},
    {"a\n\r", {{"a", 0}}, 1},
    {"", {{NULL, 0}}, 0},
    {"\r", {{NULL, 0}}, 0},
    {"\r\n", {{"", 0}}, 1},
    {"\r\r\n\r", {{"", 0}}, 1},
    {"x\r\r\ny", {{"x", 0}, {"y", 4}}, 2},
    {"\rab\r", {{"ab", 0}}, 1},
    {"a\r\rb\r\nc", {{"ab", 0}, {"c", 6}}, 2},
    {"one\n\ntwo\n", {{"one", 0}, {"", 4}, {"two", 5}}, 3},
};
#define NTABLE (sizeof table / sizeof table[0])

START_TEST(test_tf_table_mem)
{
    for (size_t i = 0; i < NTABLE; i++) {
        const char *b = table[i].bytes;
        char what[64];
        snprintf(what, sizeof what, "row %zu", i);
        struct fmt_reader *r = open_mem("table.txt", b, strlen(b), NULL);
        expect_lines(r, table[i].lines, table[i].n, what);
        fmt_reader_close(r);
    }
}
END_TEST

START_TEST(test_tf_table_file)
{
    static const size_t sizes[] = {1, 2, 3, 7, 0};
    for (size_t i = 0; i < NTABLE; i++) {
        const char *b = table[i].bytes;
        const char *path = sl_test_write("table.txt", b, strlen(b));
        for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++) {
            char what[64];
            snprintf(what, sizeof what, "row %zu, buffer %zu", i, sizes[j]);
            struct fmt_reader_opts o = {.format = FMT_FORMAT_TEXT, .buffer_size = sizes[j]};
            struct fmt_reader *r = open_file(path, &o);
            expect_lines(r, table[i].lines, table[i].n, what);
            fmt_reader_close(r);
        }
    }
}
END_TEST

/* TensorFlow's ReadLine over the whole input, as the reference. */
struct ref_lines {
    char *buf; /* all lines' bytes */
    size_t start[4096], len[4096];
    uint64_t offset[4096];
    size_t n;
};

static void reference(const uint8_t *in, size_t len, struct ref_lines *out)
{
    out->buf = malloc(len + 1);
    out->n = 0;
    size_t w = 0, i = 0;
    while (i < len) {
        size_t s = w;
        uint64_t off = i;
        int nl = 0;
        for (; i < len; i++) {
            if (in[i] == '\n') {
                nl = 1;
                i++;
                break;
            }
            if (in[i] != '\r')
                out->buf[w++] = (char)in[i];
        }
        if (!nl && w == s)
            break;
        ck_assert_uint_lt(out->n, 4096);
        out->start[out->n] = s;
        out->len[out->n] = w - s;
        out->offset[out->n] = off;
        out->n++;
    }
}

static void expect_reference(struct fmt_reader *r, const uint8_t *in, size_t len, const char *what)
{
    struct ref_lines *ref = malloc(sizeof *ref);
    reference(in, len, ref);
    struct fmt_record rec;
    struct sl_error err = {0};
    for (size_t i = 0; i < ref->n; i++) {
        int rc = fmt_reader_next(r, &rec, &err);
        ck_assert_msg(rc == 0, "%s: line %zu: rc %d %s", what, i, rc, err.msg);
        ck_assert_msg(rec.len == ref->len[i], "%s: line %zu: %zu bytes, want %zu", what, i, rec.len, ref->len[i]);
        ck_assert_msg(rec.len == 0 || memcmp(rec.data, ref->buf + ref->start[i], rec.len) == 0, "%s: line %zu", what,
                      i);
        ck_assert_uint_eq(rec.offset, ref->offset[i]);
        ck_assert_uint_eq(rec.index, i);
    }
    int rc = fmt_reader_next(r, &rec, &err);
    ck_assert_msg(rc == SL_END, "%s: rc %d %s", what, rc, rc < 0 ? err.msg : "");
    free(ref->buf);
    free(ref);
}

/* Lines of every length from 0 to 300 bytes, some with '\r' in them, some
 * CRLF-terminated, ending with or without a newline. */
static uint8_t *mixed_text(size_t *len, int final_newline)
{
    size_t cap = 200000, n = 0;
    uint8_t *p = malloc(cap);
    uint32_t x = 12345;
    for (size_t l = 0; l <= 300; l++) {
        for (size_t i = 0; i < l; i++) {
            x = x * 1103515245u + 12345u;
            unsigned c = (x >> 16) % 97;
            p[n++] = c == 0 && l % 3 == 0 ? '\r' : (uint8_t)('!' + c % 90);
        }
        if (l % 5 == 1)
            p[n++] = '\r';
        if (l < 300 || final_newline)
            p[n++] = '\n';
    }
    *len = n;
    return p;
}

START_TEST(test_refills)
{
    static const size_t sizes[] = {1, 7, 13, 64, 4096, 0};
    for (int fin = 0; fin < 2; fin++) {
        size_t len;
        uint8_t *text = mixed_text(&len, fin);
        const char *path = sl_test_write("mixed.txt", text, len);
        for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++) {
            char what[64];
            snprintf(what, sizeof what, "final newline %d, buffer %zu", fin, sizes[j]);
            struct fmt_reader_opts o = {.format = FMT_FORMAT_TEXT, .buffer_size = sizes[j]};
            struct fmt_reader *r = open_file(path, &o);
            expect_reference(r, text, len, what);
            fmt_reader_close(r);
        }
        struct fmt_reader *r = open_mem("mixed.txt", text, len, NULL);
        expect_reference(r, text, len, "memory");
        fmt_reader_close(r);
        free(text);
    }
}
END_TEST

START_TEST(test_long_line_refills)
{
    /* one line far longer than the buffer, between short ones */
    size_t big = 100000;
    size_t len = big + 10;
    uint8_t *text = malloc(len);
    memcpy(text, "ab\n", 3);
    memset(text + 3, 'q', big);
    text[3 + big / 2] = '\r';
    memcpy(text + 3 + big, "\r\ncd\n", 5);
    memcpy(text + 8 + big, "e", 2);
    len = big + 9;
    const char *path = sl_test_write("long.txt", text, len);
    struct fmt_reader_opts o = {.format = FMT_FORMAT_TEXT, .buffer_size = 7};
    struct fmt_reader *r = open_file(path, &o);
    expect_reference(r, text, len, "long line");
    fmt_reader_close(r);
    free(text);
}
END_TEST

START_TEST(test_crlf)
{
    static const char crlf[] = "first\r\nsecond\r\n\r\nlast\r\n";
    static const struct line want[] = {{"first", 0}, {"second", 7}, {"", 15}, {"last", 17}};
    const char *path = sl_test_write("crlf.txt", crlf, strlen(crlf));
    struct fmt_reader_opts o = {.format = FMT_FORMAT_TEXT, .buffer_size = 7};
    struct fmt_reader *r = open_file(path, &o);
    expect_lines(r, want, 4, "crlf file");
    fmt_reader_close(r);
    r = open_mem("crlf.txt", crlf, strlen(crlf), NULL);
    expect_lines(r, want, 4, "crlf memory");
    fmt_reader_close(r);
}
END_TEST

START_TEST(test_gzip)
{
    size_t len;
    uint8_t *text = mixed_text(&len, 0);
    const char *path = sl_test_path("mixed.txt.gz");
    gzFile gz = gzopen(path, "wb9");
    ck_assert_ptr_nonnull(gz);
    /* in two pieces, so the file holds two gzip members */
    ck_assert_int_eq(gzwrite(gz, text, (unsigned)(len / 3)), (int)(len / 3));
    ck_assert_int_eq(gzclose(gz), Z_OK);
    gz = gzopen(path, "ab");
    ck_assert_int_eq(gzwrite(gz, text + len / 3, (unsigned)(len - len / 3)), (int)(len - len / 3));
    ck_assert_int_eq(gzclose(gz), Z_OK);
    static const size_t sizes[] = {7, 0};
    for (size_t j = 0; j < 2; j++) {
        for (int explicit_gz = 0; explicit_gz < 2; explicit_gz++) {
            struct fmt_reader_opts o = {.format = FMT_FORMAT_TEXT,
                                        .buffer_size = sizes[j],
                                        .compression = explicit_gz ? FMT_COMP_GZIP : FMT_COMP_AUTO};
            struct fmt_reader *r = open_file(path, &o);
            expect_reference(r, text, len, "gzip");
            ck_assert_int_eq(fmt_stream_compression(fmt_reader_stream(r)), FMT_COMP_GZIP);
            fmt_reader_close(r);
        }
    }

    /* a zlib (RFC 1950) stream */
    uLongf zlen = compressBound((uLong)len);
    uint8_t *z = malloc(zlen);
    ck_assert_int_eq(compress2(z, &zlen, text, (uLong)len, 6), Z_OK);
    path = sl_test_write("mixed.txt.zz", z, zlen);
    struct fmt_reader_opts o = {.format = FMT_FORMAT_TEXT, .buffer_size = 7, .compression = FMT_COMP_ZLIB};
    struct fmt_reader *r = open_file(path, &o);
    expect_reference(r, text, len, "zlib");
    fmt_reader_close(r);
    free(z);
    free(text);
}
END_TEST

START_TEST(test_line_too_long)
{
    static const char text[] = "12345\n123\r45\n123456\nnever\n";
    struct fmt_reader_opts o = {.format = FMT_FORMAT_TEXT, .max_record_bytes = 5};
    struct fmt_record rec;
    struct sl_error err = {0};
    char want[512];

    struct fmt_reader *r = open_mem("long.txt", text, strlen(text), &o);
    ck_assert_int_eq(fmt_reader_next(r, &rec, &err), 0);
    ck_assert_uint_eq(rec.len, 5);
    /* the limit counts the stored bytes, '\r' included */
    ck_assert_int_eq(fmt_reader_next(r, &rec, &err), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "long.txt: line longer than max_record_bytes (5) at 6");
    fmt_reader_close(r);

    const char *path = sl_test_write("long6.txt", text + 13, strlen(text + 13));
    o.buffer_size = 2;
    r = open_file(path, &o);
    ck_assert_int_eq(fmt_reader_next(r, &rec, &err), SL_ECORRUPT);
    snprintf(want, sizeof want, "%s: line longer than max_record_bytes (5) at 0", path);
    ck_assert_str_eq(err.msg, want);
    ck_assert_int_eq(err.code, SL_ECORRUPT);
    fmt_reader_close(r);

    /* a last line without '\n' obeys the same limit */
    static const struct line five[] = {{"abcde", 0}};
    r = open_mem("eof5.txt", "abcde", 5, &o);
    expect_lines(r, five, 1, "five at eof");
    fmt_reader_close(r);
    path = sl_test_write("eof6.txt", "ab\nabcdef", 9);
    r = open_file(path, &o);
    ck_assert_int_eq(fmt_reader_next(r, &rec, &err), 0);
    ck_assert_int_eq(fmt_reader_next(r, &rec, &err), SL_ECORRUPT);
    snprintf(want, sizeof want, "%s: line longer than max_record_bytes (5) at 3", path);
    ck_assert_str_eq(err.msg, want);
    fmt_reader_close(r);

    /* a much longer line, found through several window doublings */
    o.max_record_bytes = 1000;
    o.buffer_size = 7;
    char *huge = malloc(5000);
    memset(huge, 'h', 5000);
    huge[0] = '\n';
    path = sl_test_write("huge.txt", huge, 5000);
    r = open_file(path, &o);
    ck_assert_int_eq(fmt_reader_next(r, &rec, &err), 0);
    ck_assert_uint_eq(rec.len, 0);
    ck_assert_int_eq(fmt_reader_next(r, &rec, &err), SL_ECORRUPT);
    snprintf(want, sizeof want, "%s: line longer than max_record_bytes (1000) at 1", path);
    ck_assert_str_eq(err.msg, want);
    fmt_reader_close(r);
    free(huge);
}
END_TEST

/* A line without '\r' is lent from the input itself; one with '\r' is a copy. */
START_TEST(test_zero_copy)
{
    static const char text[] = "plain\nwith\rcr\nend";
    struct fmt_reader *r = open_mem("zc.txt", text, strlen(text), NULL);
    struct fmt_record rec;
    struct sl_error err = {0};
    ck_assert_int_eq(fmt_reader_next(r, &rec, &err), 0);
    ck_assert_ptr_eq(rec.data, (const uint8_t *)text);
    ck_assert_int_eq(fmt_reader_next(r, &rec, &err), 0);
    ck_assert_ptr_ne(rec.data, (const uint8_t *)text + 6);
    ck_assert_uint_eq(rec.len, 6);
    ck_assert_int_eq(memcmp(rec.data, "withcr", 6), 0);
    ck_assert_int_eq(fmt_reader_next(r, &rec, &err), 0);
    ck_assert_ptr_eq(rec.data, (const uint8_t *)text + 14);
    ck_assert_uint_eq(rec.offset, 14);
    fmt_reader_close(r);
}
END_TEST

/* Once the window and scratch buffer have grown, lines cost no allocation. */
START_TEST(test_no_alloc_when_warm)
{
    size_t len;
    uint8_t *text = mixed_text(&len, 1);
    /* a line longer (and with more '\r') than any that follows, first */
    size_t first = 2002;
    uint8_t *twice = malloc(first + len);
    memset(twice, 'w', first - 2);
    twice[7] = '\r';
    memcpy(twice + first - 2, "\r\n", 2);
    memcpy(twice + first, text, len);
    const char *path = sl_test_write("warm.txt", twice, first + len);
    struct fmt_reader_opts o = {.format = FMT_FORMAT_TEXT, .buffer_size = 64};
    struct fmt_reader *r = open_file(path, &o);
    struct fmt_record rec;
    struct sl_error err = {0};
    ck_assert_int_eq(fmt_reader_next(r, &rec, &err), 0);
    ck_assert_uint_eq(rec.len, first - 3);
    sl_alloc_fail_after(1);
    size_t count = 1;
    int rc;
    while ((rc = fmt_reader_next(r, &rec, &err)) == 0)
        count++;
    sl_alloc_fail_reset();
    ck_assert_msg(rc == SL_END, "rc %d %s", rc, err.msg);
    ck_assert_uint_eq(count, 302);
    fmt_reader_close(r);
    free(twice);
    free(text);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("fmt_text");
    TCase *tc = tcase_create("text");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_tf_table_mem);
    tcase_add_test(tc, test_tf_table_file);
    tcase_add_test(tc, test_refills);
    tcase_add_test(tc, test_long_line_refills);
    tcase_add_test(tc, test_crlf);
    tcase_add_test(tc, test_gzip);
    tcase_add_test(tc, test_line_too_long);
    tcase_add_test(tc, test_zero_copy);
    tcase_add_test(tc, test_no_alloc_when_warm);
    suite_add_tcase(s, tc);
    return s;
}
