/* TFRecord: byte-exact records (docs/semantics.md 1.1), the writer, and every
 * corrupt and truncated case with TensorFlow's message and offset, plain and
 * compressed, through the shared read loop. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "fmt_reader.h"
#include "fmt_tfrecord.h"
#include "sl_crc32c.h"
#include "sl_test.h"

/* foo, "", 123456789: a 19 + 16 + 25 = 60 byte file (records at 0, 19, 35) */
static size_t three_records(uint8_t *out)
{
    return sl_test_hex("0300000000000000 b099490e 666f6f 618abefe"
                       "0000000000000000 29039807 d8ea82a2"
                       "0900000000000000 37f97139 313233343536373839 e5b08ac7",
                       out, 64);
}

static void write_records(const char *path, enum fmt_compression c)
{
    struct fmt_tfrecord_writer *w;
    struct sl_error err = {0};
    ck_assert_int_eq(fmt_tfrecord_writer_open(&w, path, c, -1, &err), 0);
    ck_assert_int_eq(fmt_tfrecord_writer_write(w, "foo", 3, &err), 0);
    ck_assert_uint_eq(fmt_tfrecord_writer_offset(w), 19);
    ck_assert_int_eq(fmt_tfrecord_writer_write(w, "", 0, &err), 0);
    ck_assert_int_eq(fmt_tfrecord_writer_write(w, "123456789", 9, &err), 0);
    ck_assert_uint_eq(fmt_tfrecord_writer_offset(w), 60);
    ck_assert_uint_eq(fmt_tfrecord_writer_count(w), 3);
    ck_assert_int_eq(fmt_tfrecord_writer_close(w, &err), 0);
}

START_TEST(test_header_and_footer_bytes)
{
    uint8_t h[12], want[12];
    fmt_tfrecord_header(h, 0);
    sl_test_hex("0000000000000000 29039807", want, 12);
    ck_assert_int_eq(memcmp(h, want, 12), 0);
    fmt_tfrecord_header(h, 3);
    sl_test_hex("0300000000000000 b099490e", want, 12);
    ck_assert_int_eq(memcmp(h, want, 12), 0);
    ck_assert_uint_eq(fmt_tfrecord_footer("", 0), 0xa282ead8u);
    ck_assert_uint_eq(fmt_tfrecord_footer("foo", 3), 0xfebe8a61u);
}
END_TEST

START_TEST(test_writer_is_byte_exact)
{
    uint8_t want[64];
    size_t n = three_records(want);
    ck_assert_uint_eq(n, 60);
    const char *path = sl_test_path("w.tfrecord");
    write_records(path, FMT_COMP_NONE);
    size_t len;
    uint8_t *got = sl_test_read(path, &len);
    ck_assert_uint_eq(len, 60);
    ck_assert_int_eq(memcmp(got, want, 60), 0);
    free(got);
    /* ZLIB: the file is zlib.compress() of the plain file */
    path = sl_test_path("w.tfrecord.zz");
    write_records(path, FMT_COMP_AUTO);
    got = sl_test_read(path, &len);
    uint8_t plain[128];
    uLongf plen = sizeof plain;
    ck_assert_int_eq(uncompress(plain, &plen, got, len), Z_OK);
    ck_assert_uint_eq(plen, 60);
    ck_assert_int_eq(memcmp(plain, want, 60), 0);
    free(got);
}
END_TEST

static void expect_three(struct fmt_reader *r)
{
    struct fmt_record rec;
    struct sl_error err = {0};
    static const char *data[] = {"foo", "", "123456789"};
    static const uint64_t offs[] = {0, 19, 35};
    for (int i = 0; i < 3; i++) {
        int rc = fmt_reader_next(r, &rec, &err);
        ck_assert_msg(rc == 0, "record %d: %s", i, err.msg);
        ck_assert_uint_eq(rec.len, strlen(data[i]));
        ck_assert_int_eq(memcmp(rec.data, data[i], rec.len), 0);
        ck_assert_uint_eq(rec.offset, offs[i]);
        ck_assert_uint_eq(rec.index, (uint64_t)i);
    }
    ck_assert_int_eq(fmt_reader_next(r, &rec, &err), SL_END);
    ck_assert_uint_eq(fmt_reader_dropped_tail(r), 0);
}

START_TEST(test_roundtrip_every_compression_and_inflater)
{
    const char *names[] = {"r.tfrecord", "r.tfrecord.gz", "r.tfrecord.zlib"};
    for (int i = 0; i < 3; i++) {
        const char *path = sl_test_path(names[i]);
        write_records(path, FMT_COMP_AUTO);
        char url[700]; /* the same file as a file:// name (issue #28): the same records */
        snprintf(url, sizeof url, "file://%s", path);
        for (int uz = 0; uz < 4; uz++)
            for (size_t bs = 1; bs <= 64; bs = bs * 4 + 1) {
                struct fmt_reader_opts o = {.use_zlib = uz % 2, .buffer_size = bs};
                struct fmt_reader *r;
                struct sl_error err = {0};
                ck_assert_int_eq(fmt_reader_open(&r, uz < 2 ? path : url, &o, &err), 0);
                expect_three(r);
                fmt_reader_close(r);
            }
    }
}
END_TEST

START_TEST(test_empty_file_and_zero_length_record)
{
    struct fmt_reader *r;
    struct sl_error err = {0};
    struct fmt_record rec;
    ck_assert_int_eq(fmt_reader_open_mem(&r, "empty", "", 0, NULL, &err), 0);
    ck_assert_int_eq(fmt_reader_next(r, &rec, &err), SL_END);
    fmt_reader_close(r);
    uint8_t f[16];
    sl_test_hex("0000000000000000 29039807 d8ea82a2", f, 16);
    ck_assert_int_eq(fmt_reader_open_mem(&r, "one", f, 16, NULL, &err), 0);
    ck_assert_int_eq(fmt_reader_next(r, &rec, &err), 0);
    ck_assert_uint_eq(rec.len, 0);
    ck_assert_int_eq(fmt_reader_next(r, &rec, &err), SL_END);
    fmt_reader_close(r);
}
END_TEST

/* What TensorFlow does with the 60-byte file cut to `cut` bytes:
 * records fully present are read, then either a clean end, a silently
 * dropped partial header, or "truncated record at <start>". */
static void check_cut(const uint8_t *file, size_t cut, int use_zlib, int gzip)
{
    static const size_t starts[] = {0, 19, 35, 60};
    uint8_t buf[256];
    size_t flen = cut;
    const uint8_t *src = file;
    if (gzip) { /* compress the truncated plain file: a valid gzip stream */
        z_stream z;
        memset(&z, 0, sizeof z);
        ck_assert_int_eq(deflateInit2(&z, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY), Z_OK);
        z.next_in = (Bytef *)file;
        z.avail_in = (uInt)cut;
        z.next_out = buf;
        z.avail_out = sizeof buf;
        ck_assert_int_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
        flen = sizeof buf - z.avail_out;
        deflateEnd(&z);
        src = buf;
    }
    struct fmt_reader_opts o = {.compression = gzip ? FMT_COMP_GZIP : FMT_COMP_NONE, .use_zlib = use_zlib};
    struct fmt_reader *r;
    struct sl_error err = {0};
    ck_assert_int_eq(fmt_reader_open_mem(&r, "cut.tfrecord", src, flen, &o, &err), 0);
    struct fmt_record rec;
    int i = 0, rc;
    while ((rc = fmt_reader_next(r, &rec, &err)) == 0)
        i++;
    int complete = 0;
    while (complete < 3 && starts[complete + 1] <= cut)
        complete++;
    ck_assert_msg(i == complete, "cut %zu: %d records, want %d", cut, i, complete);
    size_t left = cut - starts[complete];
    if (left == 0) {
        ck_assert_int_eq(rc, SL_END);
        ck_assert_uint_eq(fmt_reader_dropped_tail(r), 0);
    } else if (left < 12) {
        ck_assert_int_eq(rc, SL_END);
        ck_assert_uint_eq(fmt_reader_dropped_tail(r), left);
    } else {
        char want[128];
        snprintf(want, sizeof want, "cut.tfrecord: truncated record at %zu", starts[complete]);
        ck_assert_int_eq(rc, SL_ECORRUPT);
        ck_assert_str_eq(err.msg, want);
    }
    fmt_reader_close(r);
}

START_TEST(test_every_truncation_point)
{
    uint8_t file[64];
    three_records(file);
    for (size_t cut = 0; cut <= 60; cut++) {
        check_cut(file, cut, 0, 0);
        check_cut(file, cut, 0, 1);
        check_cut(file, cut, 1, 1);
    }
}
END_TEST

/* Flip each byte of the file in turn: header bytes (length or its crc) give
 * "corrupted record at <start>", data and footer bytes "corrupted record at
 * <start+12>" - except a flipped length byte that makes the record run past
 * the end, which cannot happen here because the header crc catches it. */
START_TEST(test_every_corrupted_byte)
{
    uint8_t file[64];
    three_records(file);
    static const size_t starts[] = {0, 19, 35, 60};
    for (size_t pos = 0; pos < 60; pos++) {
        uint8_t bad[64];
        memcpy(bad, file, 60);
        bad[pos] ^= 0x20;
        int rec_i = pos >= 35 ? 2 : pos >= 19 ? 1 : 0;
        size_t start = starts[rec_i];
        char want[128];
        if (pos - start < 12)
            snprintf(want, sizeof want, "c.tfrecord: corrupted record at %zu%s", start,
                     start == 0 ? " (Is this even a TFRecord file?)" : "");
        else
            snprintf(want, sizeof want, "c.tfrecord: corrupted record at %zu", start + 12);
        struct fmt_reader_opts o = {.compression = FMT_COMP_NONE};
        struct fmt_reader *r;
        struct sl_error err = {0};
        ck_assert_int_eq(fmt_reader_open_mem(&r, "c.tfrecord", bad, 60, &o, &err), 0);
        struct fmt_record rec;
        int n = 0, rc;
        while ((rc = fmt_reader_next(r, &rec, &err)) == 0)
            n++;
        ck_assert_int_eq(n, rec_i);
        ck_assert_int_eq(rc, SL_ECORRUPT);
        ck_assert_str_eq(err.msg, want);
        /* the reader refuses to go on after a data error */
        ck_assert_int_eq(fmt_reader_next(r, &rec, &err), SL_EINVAL);
        fmt_reader_close(r);
    }
}
END_TEST

START_TEST(test_skip_crc_reads_corrupt_data)
{
    uint8_t file[64];
    three_records(file);
    file[12] = 'g'; /* "goo" */
    struct fmt_reader_opts o = {.compression = FMT_COMP_NONE, .skip_crc = 1};
    struct fmt_reader *r;
    struct sl_error err = {0};
    struct fmt_record rec;
    ck_assert_int_eq(fmt_reader_open_mem(&r, "s", file, 60, &o, &err), 0);
    ck_assert_int_eq(fmt_reader_next(r, &rec, &err), 0);
    ck_assert_int_eq(memcmp(rec.data, "goo", 3), 0);
    fmt_reader_close(r);
}
END_TEST

START_TEST(test_length_over_limit_is_refused_before_allocation)
{
    uint8_t h[12];
    fmt_tfrecord_header(h, (uint64_t)1 << 62); /* valid crc, absurd length */
    struct fmt_reader_opts o = {.compression = FMT_COMP_NONE, .max_record_bytes = 1000};
    struct fmt_reader *r;
    struct sl_error err = {0};
    struct fmt_record rec;
    ck_assert_int_eq(fmt_reader_open(&r, sl_test_write("big.tfrecord", h, 12), &o, &err), 0);
    ck_assert_int_eq(fmt_reader_next(r, &rec, &err), SL_ECORRUPT);
    char want[512];
    snprintf(want, sizeof want, "%s: record length 4611686018427387904 exceeds max_record_bytes 1000 at 0",
             sl_test_path("big.tfrecord"));
    ck_assert_str_eq(err.msg, want);
    fmt_reader_close(r);
    /* exactly at the limit is fine */
    struct fmt_tfrecord_writer *w;
    uint8_t *data = calloc(1, 1000);
    ck_assert_int_eq(fmt_tfrecord_writer_open(&w, sl_test_path("lim.tfrecord"), FMT_COMP_NONE, -1, &err), 0);
    ck_assert_int_eq(fmt_tfrecord_writer_write(w, data, 1000, &err), 0);
    ck_assert_int_eq(fmt_tfrecord_writer_close(w, &err), 0);
    ck_assert_int_eq(fmt_reader_open(&r, sl_test_path("lim.tfrecord"), &o, &err), 0);
    ck_assert_int_eq(fmt_reader_next(r, &rec, &err), 0);
    ck_assert_uint_eq(rec.len, 1000);
    fmt_reader_close(r);
    free(data);
}
END_TEST

START_TEST(test_auto_detects_plain_file_that_looks_like_zlib)
{
    /* a first record of 376 bytes starts with 78 01: a valid zlib header */
    struct fmt_tfrecord_writer *w;
    struct sl_error err = {0};
    uint8_t data[376];
    memset(data, 'x', sizeof data);
    const char *path = sl_test_path("looks-zlib");
    ck_assert_int_eq(fmt_tfrecord_writer_open(&w, path, FMT_COMP_NONE, -1, &err), 0);
    ck_assert_int_eq(fmt_tfrecord_writer_write(w, data, sizeof data, &err), 0);
    ck_assert_int_eq(fmt_tfrecord_writer_close(w, &err), 0);
    struct fmt_reader *r;
    struct fmt_record rec;
    ck_assert_int_eq(fmt_reader_open(&r, path, NULL, &err), 0);
    ck_assert_int_eq(fmt_stream_compression(fmt_reader_stream(r)), FMT_COMP_NONE);
    ck_assert_int_eq(fmt_reader_next(r, &rec, &err), 0);
    ck_assert_uint_eq(rec.len, 376);
    fmt_reader_close(r);
}
END_TEST

START_TEST(test_seek_to_record)
{
    uint8_t file[64];
    three_records(file);
    struct fmt_reader *r;
    struct sl_error err = {0};
    struct fmt_record rec;
    ck_assert_int_eq(fmt_reader_open(&r, sl_test_write("seek.tfrecord", file, 60), NULL, &err), 0);
    ck_assert_int_eq(fmt_reader_seek(r, 35, 2, &err), 0);
    ck_assert_int_eq(fmt_reader_next(r, &rec, &err), 0);
    ck_assert_uint_eq(rec.offset, 35);
    ck_assert_uint_eq(rec.index, 2);
    ck_assert_int_eq(memcmp(rec.data, "123456789", 9), 0);
    ck_assert_int_eq(fmt_reader_seek(r, 0, 0, &err), 0);
    ck_assert_int_eq(fmt_reader_next(r, &rec, &err), 0);
    ck_assert_int_eq(memcmp(rec.data, "foo", 3), 0);
    fmt_reader_close(r);
}
END_TEST

START_TEST(test_large_records_across_refills)
{
    const char *path = sl_test_path("large.tfrecord.gz");
    struct fmt_tfrecord_writer *w;
    struct sl_error err = {0};
    size_t sizes[] = {3 << 20, 1, 0, 700000, 5};
    uint8_t *data = malloc(3 << 20);
    for (size_t i = 0; i < (3u << 20); i++)
        data[i] = (uint8_t)(i * 131 + (i >> 12));
    ck_assert_int_eq(fmt_tfrecord_writer_open(&w, path, FMT_COMP_AUTO, 1, &err), 0);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(fmt_tfrecord_writer_write(w, data, sizes[i], &err), 0);
    ck_assert_int_eq(fmt_tfrecord_writer_close(w, &err), 0);
    for (int uz = 0; uz < 2; uz++) {
        struct fmt_reader_opts o = {.use_zlib = uz, .buffer_size = 65536};
        struct fmt_reader *r;
        struct fmt_record rec;
        ck_assert_int_eq(fmt_reader_open(&r, path, &o, &err), 0);
        for (int i = 0; i < 5; i++) {
            ck_assert_int_eq(fmt_reader_next(r, &rec, &err), 0);
            ck_assert_uint_eq(rec.len, sizes[i]);
            ck_assert_int_eq(memcmp(rec.data, data, sizes[i]), 0);
        }
        ck_assert_int_eq(fmt_reader_next(r, &rec, &err), SL_END);
        fmt_reader_close(r);
    }
    free(data);
}
END_TEST

/* Framing a record found by offset (the feeder's random access): the same
 * checks and messages as the reader, at the record's own offset. */
START_TEST(test_frame_by_offset)
{
    uint8_t file[64];
    three_records(file);
    const uint8_t *d;
    size_t n;
    struct sl_error err = {0};
    ck_assert_int_eq(fmt_tfrecord_frame(file + 35, 25, 35, 1000, 0, &d, &n, &err), 0);
    ck_assert_uint_eq(n, 9);
    ck_assert_int_eq(memcmp(d, "123456789", 9), 0);
    for (size_t avail = 0; avail < 25; avail++) {
        ck_assert_int_eq(fmt_tfrecord_frame(file + 35, avail, 35, 1000, 0, &d, &n, &err), SL_ECORRUPT);
        ck_assert_str_eq(err.msg, "truncated record at 35");
    }
    ck_assert_int_eq(fmt_tfrecord_frame(file + 35, 25, 35, 8, 0, &d, &n, &err), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "record length 9 exceeds max_record_bytes 8 at 35");
    file[40] ^= 1; /* header crc */
    ck_assert_int_eq(fmt_tfrecord_frame(file + 35, 25, 35, 1000, 0, &d, &n, &err), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "corrupted record at 35");
    file[40] ^= 1;
    file[50] ^= 1; /* data */
    ck_assert_int_eq(fmt_tfrecord_frame(file + 35, 25, 35, 1000, 0, &d, &n, &err), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "corrupted record at 47");
    ck_assert_int_eq(fmt_tfrecord_frame(file + 35, 25, 35, 1000, 1, &d, &n, &err), 0); /* skip_crc */
}
END_TEST

START_TEST(test_writer_abort_removes_file)
{
    const char *path = sl_test_path("abort.tfrecord");
    struct fmt_tfrecord_writer *w;
    struct sl_error err = {0};
    ck_assert_int_eq(fmt_tfrecord_writer_open(&w, path, FMT_COMP_NONE, -1, &err), 0);
    ck_assert_int_eq(fmt_tfrecord_writer_write(w, "x", 1, &err), 0);
    fmt_tfrecord_writer_abort(w);
    size_t len;
    ck_assert_ptr_null(sl_test_read(path, &len));
    ck_assert_int_eq(fmt_tfrecord_writer_open(&w, "/nonexistent/dir/x", FMT_COMP_NONE, -1, &err), SL_EIO);
    ck_assert_str_eq(err.msg, "open(/nonexistent/dir/x): No such file or directory");
}
END_TEST

/* ---- the three plain read paths (mapped file, read(2), memory) ---- */

/* Records of lengths that make starts, data and footers fall on both sides
 * of 4 KiB boundaries (fmt_stream prefetches a lent window a few KiB ahead,
 * in steps of 2 KiB).
 * Returns the file size; starts[] gets each record's offset, then the end. */
static size_t paths_file(uint8_t *out, size_t cap, size_t *starts, size_t *nrec)
{
    static const size_t lens[] = {0, 1, 100, 777, 4083, 4084, 4085, 5000, 12, 8180, 3, 9000, 64, 2048};
    size_t off = 0, n = 0;
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        size_t len = lens[i];
        ck_assert(off + len + 16 <= cap);
        starts[n++] = off;
        fmt_tfrecord_header(out + off, len);
        for (size_t k = 0; k < len; k++)
            out[off + 12 + k] = (uint8_t)(k * 31 + i);
        uint32_t f = fmt_tfrecord_footer(out + off + 12, len);
        for (int b = 0; b < 4; b++)
            out[off + 12 + len + (size_t)b] = (uint8_t)(f >> (8 * b));
        off += len + 16;
    }
    starts[n] = off;
    *nrec = n;
    return off;
}

/* What one path returned for a file: each record, the end code, the error. */
struct path_run {
    size_t n;
    uint64_t off[32], index[32], len[32];
    uint32_t crc[32];
    int rc;
    uint64_t dropped;
    char msg[SL_ERROR_MSG_MAX];
};

/* The paths: the file mapped; memory; read(2) in chunks of each size
 * (records of 16 + 4083..4085 bytes straddle chunks of 4099-4101 bytes by
 * one byte either way, 9000 is larger than every small chunk; 0: the
 * default 1 MiB). */
static const struct {
    int mode; /* 0 mapped, 1 read(2), 2 memory */
    size_t chunk;
} paths[] = {{0, 0}, {2, 0}, {1, 1000}, {1, 4096}, {1, 4099}, {1, 4100}, {1, 4101}, {1, 8196}, {1, 0}};
#define NPATHS (sizeof paths / sizeof paths[0])

static void run_path(const char *path, const uint8_t *bytes, size_t len, int mode, size_t chunk, struct path_run *pr)
{
    struct fmt_reader_opts o = {
        .compression = FMT_COMP_NONE, .io = mode == 1 ? FMT_IO_READ : FMT_IO_MAP, .buffer_size = chunk};
    struct fmt_reader *r;
    struct sl_error err = {0};
    if (mode == 2)
        ck_assert_int_eq(fmt_reader_open_mem(&r, path, bytes, len, &o, &err), 0);
    else
        ck_assert_int_eq(fmt_reader_open(&r, path, &o, &err), 0);
    memset(pr, 0, sizeof *pr);
    struct fmt_record rec;
    while ((pr->rc = fmt_reader_next(r, &rec, &err)) == 0) {
        ck_assert_uint_lt(pr->n, 32);
        pr->off[pr->n] = rec.offset;
        pr->index[pr->n] = rec.index;
        pr->len[pr->n] = rec.len;
        pr->crc[pr->n] = sl_crc32c(rec.data, rec.len);
        pr->n++;
    }
    pr->dropped = fmt_reader_dropped_tail(r);
    snprintf(pr->msg, sizeof pr->msg, "%s", pr->rc == SL_END ? "" : err.msg);
    fmt_reader_close(r);
}

/* The three paths over `bytes` agree with each other and with `want_n`
 * records then `want_msg` ("" for a clean end). */
static void check_paths(const uint8_t *bytes, size_t len, size_t want_n, const char *want_msg, const char *what)
{
    const char *path = sl_test_write("paths.tfrecord", bytes, len);
    struct path_run pr[NPATHS];
    for (size_t m = 0; m < NPATHS; m++)
        run_path(path, bytes, len, paths[m].mode, paths[m].chunk, &pr[m]);
    for (size_t m = 0; m < NPATHS; m++) {
        ck_assert_msg(pr[m].n == want_n, "%s, path %zu: %zu records, want %zu", what, m, pr[m].n, want_n);
        char want[1200];
        snprintf(want, sizeof want, "%s%s", want_msg[0] ? path : "", want_msg);
        ck_assert_msg(strcmp(pr[m].msg, want) == 0, "%s, path %zu: '%s', want '%s'", what, m, pr[m].msg, want);
        if (m == 0)
            continue;
        ck_assert_int_eq(pr[m].rc, pr[0].rc);
        ck_assert_uint_eq(pr[m].dropped, pr[0].dropped);
        for (size_t i = 0; i < pr[0].n; i++) {
            ck_assert_uint_eq(pr[m].off[i], pr[0].off[i]);
            ck_assert_uint_eq(pr[m].index[i], pr[0].index[i]);
            ck_assert_uint_eq(pr[m].len[i], pr[0].len[i]);
            ck_assert_uint_eq(pr[m].crc[i], pr[0].crc[i]);
        }
    }
}

/* Every cut around the records' boundaries and around each multiple of
 * 4 KiB, a damaged byte in records that straddle them, and an empty file:
 * the mapped (prefetched), read(2) (chunks smaller than a record, around
 * a record's size, and the default) and memory paths give the same
 * records, offsets and TensorFlow's errors at the same offsets. */
START_TEST(test_mapped_read_and_memory_paths_agree)
{
    static uint8_t file[64 << 10];
    size_t starts[32], nrec;
    size_t size = paths_file(file, sizeof file, starts, &nrec);
    check_paths(file, 0, 0, "", "empty file");
    check_paths(file, size, nrec, "", "whole file");
    size_t cuts[256], ncut = 0;
    for (size_t i = 1; i <= nrec; i++)
        for (size_t d = 0; d < 3; d++) {
            cuts[ncut++] = starts[i] - d;
            if (starts[i] - starts[i - 1] > 13)
                cuts[ncut++] = starts[i - 1] + 12 + d; /* just past the header */
        }
    for (size_t k = 4096; k < size; k += 4096)
        for (size_t d = 0; d < 3; d++) {
            cuts[ncut++] = k - 1 + d;
        }
    for (size_t c = 0; c < ncut; c++) {
        size_t cut = cuts[c], complete = 0;
        while (complete < nrec && starts[complete + 1] <= cut)
            complete++;
        size_t left = cut - starts[complete];
        char want[128] = "", what[64];
        if (left >= 12)
            snprintf(want, sizeof want, ": truncated record at %zu", starts[complete]);
        snprintf(what, sizeof what, "cut at %zu", cut);
        check_paths(file, cut, complete, want, what);
    }
    /* a damaged byte: in the header, the first data byte, the last data byte, the footer */
    for (size_t i = 0; i < nrec; i++) {
        size_t len = starts[i + 1] - starts[i] - 16;
        size_t pos[] = {starts[i] + 3, starts[i] + 12, starts[i] + 11 + len, starts[i + 1] - 1};
        for (int k = 0; k < 4; k++) {
            file[pos[k]] ^= 0x10;
            char want[128], what[64];
            size_t at = pos[k] < starts[i] + 12 ? starts[i] : starts[i] + 12; /* header, else data/footer */
            snprintf(want, sizeof want, ": corrupted record at %zu%s", at,
                     at == 0 ? " (Is this even a TFRecord file?)" : "");
            snprintf(what, sizeof what, "byte %zu of record %zu damaged", pos[k], i);
            check_paths(file, size, i, want, what);
            file[pos[k]] ^= 0x10;
        }
    }
}
END_TEST

/* A mapped reader moved forward past what it has prefetched and back to
 * the start reads the right records (fmt_stream keeps its prefetch mark
 * from the position, not from where it was). */
START_TEST(test_mapped_seek_forward_and_back)
{
    static uint8_t file[64 << 10];
    size_t starts[32], nrec;
    size_t size = paths_file(file, sizeof file, starts, &nrec);
    struct fmt_reader *r;
    struct sl_error err = {0};
    struct fmt_record rec;
    ck_assert_int_eq(fmt_reader_open(&r, sl_test_write("seekmap.tfrecord", file, size), NULL, &err), 0);
    ck_assert_int_eq(fmt_reader_next(r, &rec, &err), 0);
    size_t order[] = {nrec - 1, 1, nrec - 3, 0};
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
        size_t i = order[k];
        ck_assert_int_eq(fmt_reader_seek(r, starts[i], i, &err), 0);
        for (size_t j = i; j < nrec; j++) {
            ck_assert_int_eq(fmt_reader_next(r, &rec, &err), 0);
            ck_assert_uint_eq(rec.offset, starts[j]);
            ck_assert_uint_eq(rec.index, j);
            ck_assert_uint_eq(rec.len, starts[j + 1] - starts[j] - 16);
            ck_assert_uint_eq(fmt_tfrecord_footer(rec.data, rec.len),
                              fmt_tfrecord_footer(file + starts[j] + 12, rec.len));
        }
        ck_assert_int_eq(fmt_reader_next(r, &rec, &err), SL_END);
    }
    fmt_reader_close(r);
}
END_TEST

static void append(const char *path, const uint8_t *p, size_t n)
{
    FILE *f = fopen(path, "ab");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(p, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

/* A file that grows while it is read is read to the size it had when it
 * was opened, by both paths (a mapping sees no further); one that shrinks
 * while read(2) reads it is an error that says where it ended (a mapping
 * would raise SIGBUS there: docs/formats.md), after exactly the records
 * that lay before that point. */
START_TEST(test_file_changing_size_while_read)
{
    static uint8_t file[64 << 10];
    size_t starts[32], nrec;
    size_t size = paths_file(file, sizeof file, starts, &nrec);
    struct sl_error err = {0};
    struct fmt_record rec;
    for (int io = 0; io < 2; io++) {
        const char *path = sl_test_write("grow.tfrecord", file, starts[nrec - 1]);
        struct fmt_reader_opts o = {.io = io ? FMT_IO_READ : FMT_IO_MAP, .buffer_size = 1000};
        struct fmt_reader *r;
        ck_assert_int_eq(fmt_reader_open(&r, path, &o, &err), 0);
        ck_assert_int_eq(fmt_reader_next(r, &rec, &err), 0);
        append(path, file + starts[nrec - 1], size - starts[nrec - 1]);
        size_t n = 1;
        while (fmt_reader_next(r, &rec, &err) == 0) {
            ck_assert_uint_eq(rec.offset, starts[n]);
            n++;
        }
        ck_assert_uint_eq(n, nrec - 1);
        ck_assert_uint_eq(fmt_stream_offset(fmt_reader_stream(r)), starts[nrec - 1]);
        fmt_reader_close(r);
    }
    /* shrinks to the middle of record 5 (starts[5] = 5041) after record 0 */
    const char *path = sl_test_write("shrink.tfrecord", file, size);
    struct fmt_reader_opts o = {.io = FMT_IO_READ, .buffer_size = 1000};
    struct fmt_reader *r;
    ck_assert_int_eq(fmt_reader_open(&r, path, &o, &err), 0);
    ck_assert_int_eq(fmt_reader_next(r, &rec, &err), 0);
    ck_assert_uint_eq(starts[5], 5041);
    ck_assert_int_eq(truncate(path, 5061), 0);
    size_t n = 1;
    int rc;
    while ((rc = fmt_reader_next(r, &rec, &err)) == 0)
        n++;
    ck_assert_int_eq(rc, SL_ECORRUPT);
    ck_assert_uint_eq(n, 5);
    char want[1200];
    snprintf(want, sizeof want, "%s: the file shrank while read: it ends at 5061, it held %zu bytes when opened", path,
             size);
    ck_assert_str_eq(err.msg, want);
    fmt_reader_close(r);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("fmt_tfrecord");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_header_and_footer_bytes);
    tcase_add_test(tc, test_writer_is_byte_exact);
    tcase_add_test(tc, test_roundtrip_every_compression_and_inflater);
    tcase_add_test(tc, test_empty_file_and_zero_length_record);
    tcase_add_test(tc, test_every_truncation_point);
    tcase_add_test(tc, test_every_corrupted_byte);
    tcase_add_test(tc, test_skip_crc_reads_corrupt_data);
    tcase_add_test(tc, test_length_over_limit_is_refused_before_allocation);
    tcase_add_test(tc, test_auto_detects_plain_file_that_looks_like_zlib);
    tcase_add_test(tc, test_seek_to_record);
    tcase_add_test(tc, test_large_records_across_refills);
    tcase_add_test(tc, test_frame_by_offset);
    tcase_add_test(tc, test_writer_abort_removes_file);
    tcase_add_test(tc, test_mapped_read_and_memory_paths_agree);
    tcase_add_test(tc, test_mapped_seek_forward_and_back);
    tcase_add_test(tc, test_file_changing_size_while_read);
    suite_add_tcase(s, tc);
    return s;
}
