/* feed_source: counts and random access equal a sequential read, for plain,
 * gzip and zlib TFRecord and text; skip-file leaves a damaged file out with
 * zero records; the image cache evicts under a small budget and serves
 * several threads at once (run under TSan in CI's thread build); a piece's
 * errors name the file once. */
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "feed_assemble.h"
#include "feed_fetch.h"
#include "feed_source.h"
#include "fmt_index.h"
#include "fmt_tfrecord.h"
#include "sl_test.h"

/* record r of file f: "f<f>-r<r>" padded with r bytes of 'x' */
static size_t make_rec(char *buf, unsigned f, unsigned r)
{
    int n = snprintf(buf, 64, "f%u-r%u", f, r);
    memset(buf + n, 'x', r);
    return (size_t)n + r;
}

static const char *write_tfr(const char *name, unsigned f, unsigned count)
{
    const char *path = sl_test_path(name);
    struct fmt_tfrecord_writer *w;
    struct sl_error err = {0};
    ck_assert_int_eq(fmt_tfrecord_writer_open(&w, path, FMT_COMP_AUTO, -1, &err), 0);
    char buf[256];
    for (unsigned r = 0; r < count; r++)
        ck_assert_int_eq(fmt_tfrecord_writer_write(w, buf, make_rec(buf, f, r), &err), 0);
    ck_assert_int_eq(fmt_tfrecord_writer_close(w, &err), 0);
    return path;
}

static void expect_rec(struct feed_reader *rd, unsigned f, unsigned r)
{
    char want[256];
    size_t n = make_rec(want, f, r);
    const uint8_t *d;
    size_t len;
    struct sl_error err = {0};
    int rc = feed_reader_get(rd, f, r, &d, &len, &err);
    ck_assert_msg(rc == 0, "file %u record %u: %s", f, r, err.msg);
    ck_assert_uint_eq(len, n);
    ck_assert_int_eq(memcmp(d, want, n), 0);
}

static const char *paths[3];

static struct feed_source *open_three(size_t cache)
{
    paths[0] = write_tfr("a.tfrecord", 0, 50);
    paths[1] = write_tfr("b.tfrecord.gz", 1, 70);
    paths[2] = write_tfr("c.tfrecord.zz", 2, 0);
    struct feed_source_opts o = {.cache_bytes = cache};
    struct feed_source *s;
    struct sl_error err = {0};
    ck_assert_int_eq(feed_source_open(&s, paths, 3, &o, &err), 0);
    return s;
}

START_TEST(test_counts_and_random_access)
{
    struct feed_source *s = open_three(0);
    ck_assert_uint_eq(feed_source_count(s, 0), 50);
    ck_assert_uint_eq(feed_source_count(s, 1), 70);
    ck_assert_uint_eq(feed_source_count(s, 2), 0);
    struct feed_reader *rd;
    struct sl_error err = {0};
    ck_assert_int_eq(feed_reader_open(&rd, s, &err), 0);
    for (unsigned k = 0; k < 500; k++) { /* a scrambled order across files */
        unsigned f = (k * 7) % 2, r = (k * 13) % (f ? 70 : 50);
        expect_rec(rd, f, r);
    }
    const uint8_t *d;
    size_t len;
    ck_assert_int_eq(feed_reader_get(rd, 0, 50, &d, &len, &err), SL_EINVAL);
    feed_reader_close(rd);
    feed_source_close(s);
}
END_TEST

static void on_skip(void *ctx, const char *path, const struct sl_error *err)
{
    snprintf(ctx, 2048, "%.500s|%.1500s", path, err->msg);
}

START_TEST(test_skip_file_and_fail)
{
    const char *p0 = write_tfr("ok.tfrecord", 0, 5);
    const char *p1 = write_tfr("bad.tfrecord", 1, 5);
    size_t len;
    uint8_t *bytes = sl_test_read(p1, &len);
    bytes[len - 5] ^= 1;
    sl_test_write("bad.tfrecord", bytes, len);
    free(bytes);
    const char *list[] = {p0, p1};
    char seen[2048] = "";
    struct feed_source_opts o = {.on_error = FMT_ON_ERROR_SKIP_FILE, .on_skip = on_skip, .ctx = seen};
    struct feed_source *s;
    struct sl_error err = {0};
    ck_assert_int_eq(feed_source_open(&s, list, 2, &o, &err), 0);
    ck_assert_uint_eq(feed_source_count(s, 0), 5);
    ck_assert_uint_eq(feed_source_count(s, 1), 0);
    /* the last record ("f1-r4xxxx", 9 bytes) starts at len - 25; its data
     * crc is the damaged one, reported at start + 12 */
    char want[1200];
    snprintf(want, sizeof want, "%s|%s: corrupted record at %zu", p1, p1, len - 25 + 12);
    ck_assert_str_eq(seen, want);
    feed_source_close(s);
    o.on_error = FMT_ON_ERROR_FAIL;
    ck_assert_int_eq(feed_source_open(&s, list, 2, &o, &err), SL_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(err.msg, "bad.tfrecord: corrupted record at"));
}
END_TEST

/* several scan threads: the same counts and records as one, the first
 * damaged file in list order reported under fail (whichever thread met
 * it), every damaged one skipped in list order under skip-file, and a
 * stop flag ending the scan with SL_ECLOSED */
static void on_skip_append(void *ctx, const char *path, const struct sl_error *err)
{
    (void)err;
    const char *base = strrchr(path, '/');
    size_t n = strlen(ctx);
    snprintf((char *)ctx + n, 512 - n, "%s;", base ? base + 1 : path);
}

START_TEST(test_parallel_scan)
{
    enum { N = 9 };
    const char *list[N];
    char name[64];
    for (unsigned f = 0; f < N; f++) {
        snprintf(name, sizeof name, "p%u.tfrecord%s", f, f % 3 == 1 ? ".gz" : "");
        list[f] = strdup(write_tfr(name, f, 20 + 7 * f));
    }
    for (unsigned threads = 1; threads <= 4; threads++) {
        struct feed_source_opts o = {.scan_threads = threads};
        struct feed_source *s;
        struct sl_error err = {0};
        ck_assert_int_eq(feed_source_open(&s, list, N, &o, &err), 0);
        struct feed_reader *rd;
        ck_assert_int_eq(feed_reader_open(&rd, s, &err), 0);
        for (unsigned f = 0; f < N; f++) {
            ck_assert_uint_eq(feed_source_count(s, f), 20 + 7 * f);
            for (unsigned r = 0; r < 20 + 7 * f; r += 3)
                expect_rec(rd, f, r);
        }
        feed_reader_close(rd);
        feed_source_close(s);
    }
    /* damage files 3 and 6, plain ones (the last record's data CRC) */
    for (unsigned f = 3; f < N; f += 3) {
        size_t len;
        uint8_t *bytes = sl_test_read(list[f], &len);
        bytes[len - 5] ^= 1;
        snprintf(name, sizeof name, "p%u.tfrecord", f);
        sl_test_write(name, bytes, len);
        free(bytes);
    }
    for (int round = 0; round < 20; round++) {
        struct feed_source_opts o = {.scan_threads = 4};
        struct feed_source *s;
        struct sl_error err = {0};
        ck_assert_int_eq(feed_source_open(&s, list, N, &o, &err), SL_ECORRUPT);
        ck_assert_msg(strstr(err.msg, "p3.tfrecord: corrupted record at") != NULL, "round %d: %s", round, err.msg);
    }
    char seen[512] = "";
    struct feed_source_opts o = {
        .scan_threads = 3, .on_error = FMT_ON_ERROR_SKIP_FILE, .on_skip = on_skip_append, .ctx = seen};
    struct feed_source *s;
    struct sl_error err = {0};
    ck_assert_int_eq(feed_source_open(&s, list, N, &o, &err), 0);
    ck_assert_str_eq(seen, "p3.tfrecord;p6.tfrecord;");
    ck_assert_uint_eq(feed_source_count(s, 3), 0);
    ck_assert_uint_eq(feed_source_count(s, 6), 0);
    ck_assert_uint_eq(feed_source_count(s, 7), 20 + 7 * 7);
    feed_source_close(s);
    volatile sig_atomic_t stop = 1;
    struct feed_source_opts so = {.scan_threads = 2, .stop = &stop};
    ck_assert_int_eq(feed_source_open(&s, list, N, &so, &err), SL_ECLOSED);
    ck_assert_ptr_nonnull(strstr(err.msg, "p0.tfrecord: scan interrupted"));
    for (unsigned f = 0; f < N; f++)
        free((void *)list[f]);
}
END_TEST

START_TEST(test_text_lines)
{
    const char *p = sl_test_write("t.txt", "a\r\nbb\n\nc\rd\ne", 12);
    struct feed_source_opts o = {.format = FMT_FORMAT_TEXT};
    struct feed_source *s;
    struct sl_error err = {0};
    ck_assert_int_eq(feed_source_open(&s, &p, 1, &o, &err), 0);
    ck_assert_uint_eq(feed_source_count(s, 0), 5);
    struct feed_reader *rd;
    ck_assert_int_eq(feed_reader_open(&rd, s, &err), 0);
    const char *want[] = {"a", "bb", "", "cd", "e"};
    for (int i = 4; i >= 0; i--) {
        const uint8_t *d;
        size_t len;
        ck_assert_int_eq(feed_reader_get(rd, 0, (uint64_t)i, &d, &len, &err), 0);
        ck_assert_uint_eq(len, strlen(want[i]));
        ck_assert(len == 0 || memcmp(d, want[i], len) == 0);
    }
    feed_reader_close(rd);
    feed_source_close(s);
}
END_TEST

/* A file changed after the scan: reads check the CRCs again (the default)
 * and report it; with trust_scan they lend what is there. */
START_TEST(test_change_after_scan)
{
    for (int trust = 0; trust < 2; trust++) {
        const char *p = write_tfr(trust ? "t1.tfrecord" : "t0.tfrecord", 0, 3);
        struct feed_source_opts o = {.trust_scan = trust};
        struct feed_source *s;
        struct sl_error err = {0};
        ck_assert_int_eq(feed_source_open(&s, &p, 1, &o, &err), 0);
        int fd = open(p, O_WRONLY);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(pwrite(fd, "Z", 1, 12), 1); /* first data byte of record 0 */
        close(fd);
        struct feed_reader *rd;
        ck_assert_int_eq(feed_reader_open(&rd, s, &err), 0);
        const uint8_t *d;
        size_t len;
        int rc = feed_reader_get(rd, 0, 0, &d, &len, &err);
        if (trust) {
            ck_assert_int_eq(rc, 0);
            ck_assert_int_eq(d[0], 'Z');
        } else {
            ck_assert_int_eq(rc, SL_ECORRUPT);
            char want[700];
            snprintf(want, sizeof want, "%s: corrupted record at 12", p);
            ck_assert_str_eq(err.msg, want);
        }
        feed_reader_close(rd);
        feed_source_close(s);
    }
}
END_TEST

/* The remote files' path (issue #28), run on local files through the
 * test-only option: a plain file is read whole into the cache (no map),
 * through the storage seam, a file:// name as a path; the records are the
 * same; a file over the cache's per-file bound is refused at the scan; a
 * file changed after its scan is an error naming both sizes. */
static uint64_t image_bytes(const char *path);

START_TEST(test_whole_read)
{
    const char *plain = write_tfr("w0.tfrecord", 0, 50);
    char url[700];
    snprintf(url, sizeof url, "file://%s", write_tfr("w1.tfrecord.gz", 1, 70));
    const char *two[2] = {plain, url};
    uint64_t a0 = image_bytes(two[0]), a1 = image_bytes(two[1]);
    /* room for one image at a time: every switch of file evicts */
    struct feed_source_opts o = {.cache_bytes = (size_t)(a0 > a1 ? a0 : a1), .test_whole_read = 1};
    struct feed_source *s;
    struct sl_error err = {0};
    ck_assert_msg(feed_source_open(&s, two, 2, &o, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(feed_source_count(s, 0), 50);
    ck_assert_uint_eq(feed_source_count(s, 1), 70);
    ck_assert_uint_eq(feed_source_total_bytes(s), a0 + a1);
    struct feed_reader *rd;
    ck_assert_int_eq(feed_reader_open(&rd, s, &err), 0);
    for (unsigned k = 0; k < 300; k++) {
        unsigned f = (k * 7) % 2, r = (k * 13) % (f ? 70 : 50);
        expect_rec(rd, f, r);
    }
    feed_reader_close(rd);
    feed_source_close(s);

    /* over the bound a file may hold in the cache */
    o.cache_bytes = (size_t)a0 - 1;
    ck_assert_int_eq(feed_source_open(&s, &plain, 1, &o, &err), SL_EINVAL);
    char want[900];
    snprintf(want, sizeof want,
             "%s: %llu bytes, more than the %llu a remote file may hold in the cache (inflate_cache_bytes); with an "
             "index (FILE.idx: sluice-record index) and use_index its records are read by range instead",
             plain, (unsigned long long)a0, (unsigned long long)a0 - 1);
    ck_assert_str_eq(err.msg, want);

    /* read once: the scan's copy of the first file is its cached image (the
     * cache has room for it alone: the second is read again at its first
     * access). Both changed after the scan: the first is served as it was
     * scanned, the second refused, naming both sizes. */
    const char *later = write_tfr("w2.tfrecord", 2, 50);
    const char *pair[2] = {plain, later};
    uint64_t a2 = image_bytes(later);
    o.cache_bytes = (size_t)(a0 > a2 ? a0 : a2);
    o.scan_threads = 1; /* in order: the first file takes the room */
    ck_assert_msg(feed_source_open(&s, pair, 2, &o, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(feed_source_captured(s), 1);
    for (int i = 0; i < 2; i++) {
        int fd = open(pair[i], O_WRONLY | O_APPEND);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, "tail", 4), 4);
        close(fd);
    }
    ck_assert_int_eq(feed_reader_open(&rd, s, &err), 0);
    for (unsigned r = 0; r < 50; r++)
        expect_rec(rd, 0, r);
    const uint8_t *d;
    size_t len;
    ck_assert_int_eq(feed_reader_get(rd, 1, 0, &d, &len, &err), SL_ECORRUPT);
    snprintf(want, sizeof want, "%s: changed since it was scanned (%llu bytes, now %llu)", later,
             (unsigned long long)a2, (unsigned long long)a2 + 4);
    ck_assert_str_eq(err.msg, want);
    feed_reader_close(rd);
    feed_source_close(s);
    o.scan_threads = 0;

    /* a missing file: the seam's open error, before any scan */
    const char *gone = sl_test_path("gone.tfrecord");
    ck_assert_int_eq(feed_source_open(&s, &gone, 1, &o, &err), SL_EIO);
    snprintf(want, sizeof want, "open(%s): No such file or directory", gone);
    ck_assert_str_eq(err.msg, want);
}
END_TEST

/* Records read by range (issue #28), on local files through the test-only
 * option (the same path as http:// and s3:// files, by sto_open_known):
 * each record of a piece's fetch is its own bytes; neighbours are one
 * request, a record asked twice is fetched once, a small gap among many
 * records is joined (within 1/16 of their bytes), a large one is not; a
 * record no fetch holds is fetched alone; a file changed after its scan
 * is refused naming both sizes. */
static uint64_t extent(const struct feed_source *s, uint32_t f, uint64_t r, uint64_t count, uint64_t size)
{
    uint64_t end = r + 1 < count ? feed_source_offset(s, f, r + 1) : size;
    return end - feed_source_offset(s, f, r);
}

START_TEST(test_ranged_read)
{
    const char *two[2] = {write_tfr("g0.tfrecord", 0, 50), write_tfr("g1.tfrecord", 1, 70)};
    struct sl_error err = {0};
    for (int k = 0; k < 2; k++) {
        char idx[600];
        uint64_t n;
        snprintf(idx, sizeof idx, "%s.idx", two[k]);
        ck_assert_int_eq(fmt_index_build(two[k], idx, NULL, &n, &err), 0);
    }
    uint64_t size0 = image_bytes(two[0]);
    struct feed_source_opts o = {
        .use_index = 1, .test_whole_read = 1, .remote_ranges = FEED_RANGES_ALL, .remote_requests = 3};
    struct feed_source *s;
    ck_assert_msg(feed_source_open(&s, two, 2, &o, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(feed_source_ranged(s), 2);
    struct feed_reader *rd;
    ck_assert_int_eq(feed_reader_open(&rd, s, &err), 0);
    struct feed_fetch_stats st;

    /* no fetch: each record alone */
    expect_rec(rd, 1, 7);
    expect_rec(rd, 0, 49);
    feed_source_fetch_stats(s, &st);
    ck_assert_uint_eq(st.alone, 2);
    ck_assert_uint_eq(st.requests, 0);

    struct feed_fetch *f;
    ck_assert_int_eq(feed_fetch_open(&f, s, &err), 0);
    ck_assert_ptr_nonnull(f);
    const struct feed_elem piece[] = {{0, 4}, {1, 69}, {0, 3}, {0, 40}, {1, 10}, {0, 5}, {0, 3}};
    ck_assert_int_eq(feed_fetch_start(f, piece, sizeof piece / sizeof *piece, &err), 0);
    feed_reader_use(rd, f);
    for (size_t i = sizeof piece / sizeof *piece; i-- > 0;)
        expect_rec(rd, piece[i].file, piece[i].record);
    feed_source_fetch_stats(s, &st);
    uint64_t recs = extent(s, 0, 3, 50, size0) + extent(s, 0, 4, 50, size0) + extent(s, 0, 5, 50, size0) +
                    extent(s, 0, 40, 50, size0) + extent(s, 1, 10, 70, 0) + extent(s, 1, 69, 70, image_bytes(two[1]));
    ck_assert_uint_eq(st.requests, 4); /* 3-5, 40, 10, 69 */
    ck_assert_uint_eq(st.record_bytes, recs);
    ck_assert_uint_eq(st.bytes, recs);
    ck_assert_uint_eq(st.alone, 2);
    /* one not in this fetch: alone */
    expect_rec(rd, 1, 0);
    feed_source_fetch_stats(s, &st);
    ck_assert_uint_eq(st.alone, 3);

    /* 49 records with one missing: its bytes are joined in, one request */
    struct feed_elem many[49];
    uint64_t want = 0;
    for (unsigned r = 0, n = 0; r < 50; r++)
        if (r != 25) {
            many[n++] = (struct feed_elem){0, r};
            want += extent(s, 0, r, 50, size0);
        }
    ck_assert_uint_le(extent(s, 0, 25, 50, size0), want / 16);
    struct feed_fetch_stats before = st;
    feed_reader_use(rd, NULL);
    ck_assert_int_eq(feed_fetch_start(f, many, 49, &err), 0);
    feed_reader_use(rd, f);
    for (unsigned n = 0; n < 49; n++)
        expect_rec(rd, 0, many[n].record);
    feed_source_fetch_stats(s, &st);
    ck_assert_uint_eq(st.requests - before.requests, 1);
    ck_assert_uint_eq(st.record_bytes - before.record_bytes, want);
    ck_assert_uint_eq(st.bytes - before.bytes, want + extent(s, 0, 25, 50, size0));
    ck_assert_uint_eq(st.alone, before.alone);

    /* changed after the scan: the fetch's error is the piece's */
    feed_reader_use(rd, NULL);
    int fd = open(two[0], O_WRONLY | O_APPEND);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "more", 4), 4);
    close(fd);
    const struct feed_elem one[] = {{0, 1}};
    ck_assert_int_eq(feed_fetch_start(f, one, 1, &err), 0);
    feed_reader_use(rd, f);
    const uint8_t *d;
    size_t len;
    ck_assert_int_eq(feed_reader_get(rd, 0, 1, &d, &len, &err), SL_ECORRUPT);
    char msg[900];
    snprintf(msg, sizeof msg, "%s: changed since it was scanned (%llu bytes, now %llu)", two[0],
             (unsigned long long)size0, (unsigned long long)size0 + 4);
    ck_assert_str_eq(err.msg, msg);
    feed_reader_use(rd, NULL);
    feed_fetch_close(f);
    feed_reader_close(rd);
    feed_source_close(s);

    /* read whole (FEED_RANGES_NONE): no fetch */
    o.remote_ranges = FEED_RANGES_NONE;
    const char *g1 = two[1];
    ck_assert_int_eq(feed_source_open(&s, &g1, 1, &o, &err), 0);
    ck_assert_uint_eq(feed_source_ranged(s), 0);
    ck_assert_int_eq(feed_fetch_open(&f, s, &err), 0);
    ck_assert_ptr_null(f);
    feed_source_close(s);

    /* FEED_RANGES_BIG: by range only a file whose records average 64 KiB
     * or more (3 records of 64 KiB - 16 bytes of data: 64 KiB each) */
    const char *big = sl_test_path("big.tfrecord");
    struct fmt_tfrecord_writer *w;
    ck_assert_int_eq(fmt_tfrecord_writer_open(&w, big, FMT_COMP_AUTO, -1, &err), 0);
    static uint8_t rec[(64 << 10) - 16];
    for (int r = 0; r < 3; r++) {
        memset(rec, 'a' + r, sizeof rec);
        ck_assert_int_eq(fmt_tfrecord_writer_write(w, rec, sizeof rec, &err), 0);
    }
    ck_assert_int_eq(fmt_tfrecord_writer_close(w, &err), 0);
    char idx[600];
    uint64_t n;
    snprintf(idx, sizeof idx, "%s.idx", big);
    ck_assert_int_eq(fmt_index_build(big, idx, NULL, &n, &err), 0);
    const char *mixed[2] = {g1, big};
    o.remote_ranges = FEED_RANGES_BIG;
    ck_assert_int_eq(feed_source_open(&s, mixed, 2, &o, &err), 0);
    ck_assert_uint_eq(feed_source_ranged(s), 1);
    ck_assert_int_eq(feed_reader_open(&rd, s, &err), 0);
    const uint8_t *d2;
    size_t len2;
    char small[256];
    size_t nsmall = make_rec(small, 1, 33); /* g1's record 33, file 0 here */
    ck_assert_int_eq(feed_reader_get(rd, 0, 33, &d2, &len2, &err), 0);
    ck_assert_uint_eq(len2, nsmall);
    ck_assert_int_eq(memcmp(d2, small, nsmall), 0);
    ck_assert_int_eq(feed_reader_get(rd, 1, 2, &d2, &len2, &err), 0);
    ck_assert_uint_eq(len2, sizeof rec);
    ck_assert(d2[0] == 'c' && d2[len2 - 1] == 'c');
    feed_source_fetch_stats(s, &st);
    ck_assert_uint_eq(st.alone, 1); /* the big file's record; the small file's came from its cached image */
    feed_reader_close(rd);
    feed_source_close(s);
}
END_TEST

/* Offsets from FILE.idx instead of a scan: same records; an index that
 * does not fit its file is an error. */
START_TEST(test_use_index)
{
    const char *names[] = {"ix.tfrecord", "ix.tfrecord.gz"};
    for (int k = 0; k < 4; k++) {
        const char *p = write_tfr(names[k % 2], 0, 40);
        char url[600]; /* k >= 2: as a file:// name (issue #28) */
        snprintf(url, sizeof url, "file://%s", p);
        char idx[600];
        snprintf(idx, sizeof idx, "%s.idx", p);
        uint64_t n;
        struct sl_error err = {0};
        ck_assert_int_eq(fmt_index_build(p, idx, NULL, &n, &err), 0);
        struct feed_source_opts o = {.use_index = 1};
        struct feed_source *s;
        const char *name = k < 2 ? p : url;
        ck_assert_int_eq(feed_source_open(&s, &name, 1, &o, &err), 0);
        ck_assert_uint_eq(feed_source_count(s, 0), 40);
        struct feed_reader *rd;
        ck_assert_int_eq(feed_reader_open(&rd, s, &err), 0);
        for (unsigned r = 0; r < 40; r += 3)
            expect_rec(rd, 0, r);
        feed_reader_close(rd);
        feed_source_close(s);
    }
    /* the index of a longer file than the one on disk */
    const char *p = write_tfr("short.tfrecord", 1, 10);
    char idx[600];
    snprintf(idx, sizeof idx, "%s.idx", p);
    sl_test_write("short.tfrecord.idx", "0 19\n19 19\n38 19\n", 17);
    struct feed_source_opts o = {.use_index = 1};
    struct feed_source *s;
    struct sl_error err = {0};
    ck_assert_int_eq(feed_source_open(&s, &p, 1, &o, &err), SL_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(err.msg, "the index covers 57 bytes, the file holds"));
    /* found and read as FILE.idx of a file:// name too */
    char url[600], want[1400];
    snprintf(url, sizeof url, "file://%s", p);
    const char *name = url;
    ck_assert_int_eq(feed_source_open(&s, &name, 1, &o, &err), SL_ECORRUPT);
    snprintf(want, sizeof want,
             "file://%s.idx: the index covers 57 bytes, the file holds %llu (rebuild it with sluice-record index)", p,
             (unsigned long long)image_bytes(p));
    ck_assert_str_eq(err.msg, want);
}
END_TEST

/* Errors of a piece name the file once (issue #13): a damaged record as
 * the source reads it, a record that does not decode with its element and
 * offset after the path, and a piece over its buffer at the element that
 * took it there. */
static size_t count_of(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = strstr(hay, needle); p != NULL; p = strstr(p + 1, needle))
        n++;
    return n;
}

START_TEST(test_piece_errors_name_the_file_once)
{
    const char *p = write_tfr("pe.tfrecord", 0, 3);
    struct feed_source *s;
    struct sl_error err = {0};
    ck_assert_int_eq(feed_source_open(&s, &p, 1, NULL, &err), 0);
    int fd = open(p, O_WRONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pwrite(fd, "Z", 1, 21 + 12), 1); /* record 1's first data byte ("f0-r0": 21 bytes framed) */
    close(fd);
    struct fmt_feature_spec spec = {.name = "x", .dtype = FMT_DTYPE_INT64};
    struct feed_assembler *a;
    ck_assert_int_eq(feed_assembler_create(&a, s, &spec, 1, FMT_FORMAT_TFRECORD, 4, NULL, &err), 0);
    static uint8_t buf[4096];
    struct feed_layout l;
    struct feed_elem e1 = {0, 1};
    struct feed_piece piece = {.n = 1, .elems = &e1};
    ck_assert_int_eq(feed_assembler_fill(a, &piece, buf, sizeof buf, &l, &err), SL_ECORRUPT);
    char want[700];
    snprintf(want, sizeof want, "%s: corrupted record at 33", p);
    ck_assert_str_eq(err.msg, want);
    struct feed_elem e0 = {0, 0}; /* "f0-r0" is no tf.train.Example */
    piece.elems = &e0;
    ck_assert_int_ne(feed_assembler_fill(a, &piece, buf, sizeof buf, &l, &err), 0);
    snprintf(want, sizeof want, "%s: record 0 at 0: ", p);
    ck_assert_msg(strncmp(err.msg, want, strlen(want)) == 0 && count_of(err.msg, p) == 1, "%s", err.msg);
    feed_assembler_destroy(a);
    feed_source_close(s);

    const char *t = sl_test_write("pe.txt", "ab\ncdefgh\n", 10);
    struct feed_source_opts o = {.format = FMT_FORMAT_TEXT};
    ck_assert_int_eq(feed_source_open(&s, &t, 1, &o, &err), 0);
    struct fmt_feature_spec line = {.name = "line", .dtype = FMT_DTYPE_BYTES};
    ck_assert_int_eq(feed_assembler_create(&a, s, &line, 1, FMT_FORMAT_TEXT, 4, NULL, &err), 0);
    struct feed_elem two[2] = {{0, 0}, {0, 1}};
    piece = (struct feed_piece){.n = 2, .elems = two};
    ck_assert_int_eq(feed_assembler_fill(a, &piece, buf, 5, &l, &err), SL_EINVAL);
    snprintf(want, sizeof want,
             "%s: line 1 at byte 3: a piece of 2 lines needs 8 bytes, more than its 5-byte buffer (--max-piece-bytes)",
             t);
    ck_assert_str_eq(err.msg, want);
    ck_assert_int_eq(feed_assembler_fill(a, &piece, buf, sizeof buf, &l, &err), 0);
    ck_assert_uint_eq(l.ntensors, 2);
    ck_assert_int_eq(memcmp(buf + l.t[0].off, "abcdefgh", 8), 0);
    feed_assembler_destroy(a);
    feed_source_close(s);
}
END_TEST

struct worker_arg {
    struct feed_source *s;
    unsigned seed;
};

static void *hammer(void *p)
{
    struct worker_arg *a = p;
    struct feed_reader *rd;
    struct sl_error err = {0};
    ck_assert_int_eq(feed_reader_open(&rd, a->s, &err), 0);
    unsigned x = a->seed;
    for (int k = 0; k < 400; k++) {
        x = x * 1103515245u + 12345u;
        unsigned f = (x >> 16) % 2, r = (x >> 8) % (f ? 70 : 50);
        expect_rec(rd, f, r);
    }
    feed_reader_close(rd);
    return NULL;
}

/* The inflated size of one file, as the scan finds it. */
static uint64_t image_bytes(const char *path)
{
    struct feed_source *s;
    struct sl_error err = {0};
    ck_assert_int_eq(feed_source_open(&s, &path, 1, NULL, &err), 0);
    uint64_t n = feed_source_total_bytes(s);
    feed_source_close(s);
    return n;
}

START_TEST(test_threads_with_tiny_cache)
{
    /* two compressed files and room for the larger one only: every switch
     * evicts (a cache smaller than a file is refused at the scan) */
    static const char *two[2];
    two[0] = write_tfr("x0.tfrecord.gz", 0, 50);
    two[1] = write_tfr("x1.tfrecord.zz", 1, 70);
    uint64_t a0 = image_bytes(two[0]), a1 = image_bytes(two[1]);
    struct feed_source_opts o = {.cache_bytes = (size_t)(a0 > a1 ? a0 : a1)};
    struct feed_source *s;
    struct sl_error err = {0};
    ck_assert_int_eq(feed_source_open(&s, two, 2, &o, &err), 0);
    pthread_t t[4];
    struct worker_arg a[4];
    for (int i = 0; i < 4; i++) {
        a[i] = (struct worker_arg){s, (unsigned)i + 1};
        pthread_create(&t[i], NULL, hammer, &a[i]);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    feed_source_close(s);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("feed_source");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_counts_and_random_access);
    tcase_add_test(tc, test_skip_file_and_fail);
    tcase_add_test(tc, test_parallel_scan);
    tcase_add_test(tc, test_text_lines);
    tcase_add_test(tc, test_threads_with_tiny_cache);
    tcase_add_test(tc, test_change_after_scan);
    tcase_add_test(tc, test_use_index);
    tcase_add_test(tc, test_whole_read);
    tcase_add_test(tc, test_ranged_read);
    tcase_add_test(tc, test_piece_errors_name_the_file_once);
    suite_add_tcase(s, tc);
    return s;
}
