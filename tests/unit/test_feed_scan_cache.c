/* feed_scan_cache and feed_source's use of it: an entry gives back exactly
 * the scan it was written from (TFRecord plain and gzip, text, tar); a
 * second open takes every file from the cache and serves the same records;
 * a file changed after caching (size, content with mtime put back, a new
 * inode) is scanned again and its new records served; truncated entries,
 * every single flipped byte, hostile counts and offsets with good
 * checksums are refused (huge counts before any allocation); an entry that
 * passes its checks but points at the wrong bytes is caught as the record
 * is read, with the file and offset, even with trust_scan; a cache
 * directory that is absent, not a directory or not writable leaves the
 * source working; two processes sharing a directory leave whole entries. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <dirent.h>
#include <unistd.h>

#include "feed_scan_cache.h"
#include "feed_source.h"
#include "fmt_tfrecord.h"
#include "sl_alloc.h"
#include "sl_bytes.h"
#include "sl_crc32c.h"
#include "sl_test.h"

/* record r of file f: "f<f>-r<r>" padded with r % 40 bytes of 'x' */
static size_t make_rec(char *buf, unsigned f, unsigned r)
{
    int n = snprintf(buf, 64, "f%u-r%u", f, r);
    memset(buf + n, 'x', r % 40);
    return (size_t)n + r % 40;
}

static const char *write_tfr(const char *name, unsigned f, unsigned count)
{
    const char *path = sl_test_path(name);
    struct fmt_tfrecord_writer *w;
    struct sl_error err = {0};
    ck_assert_int_eq(fmt_tfrecord_writer_open(&w, path, FMT_COMP_AUTO, -1, &err), 0);
    char buf[128];
    for (unsigned r = 0; r < count; r++)
        ck_assert_int_eq(fmt_tfrecord_writer_write(w, buf, make_rec(buf, f, r), &err), 0);
    ck_assert_int_eq(fmt_tfrecord_writer_close(w, &err), 0);
    return path;
}

/* A ustar member. */
static void tar_add(FILE *fp, const char *name, const char *data, size_t len)
{
    char h[512];
    memset(h, 0, sizeof h);
    snprintf(h, 100, "%s", name);
    memcpy(h + 100, "0000644", 8);
    memcpy(h + 108, "0000000", 8);
    memcpy(h + 116, "0000000", 8);
    snprintf(h + 124, 12, "%011o", (unsigned)len);
    memcpy(h + 136, "00000000000", 12);
    h[156] = '0';
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += (unsigned char)h[i];
    snprintf(h + 148, 8, "%06o", sum);
    fwrite(h, 1, 512, fp);
    fwrite(data, 1, len, fp);
    static const char zero[512];
    if (len % 512)
        fwrite(zero, 1, 512 - len % 512, fp);
}

static const char *write_tar(const char *name, unsigned samples)
{
    const char *path = sl_test_path(name);
    FILE *fp = fopen(path, "wb");
    ck_assert_ptr_nonnull(fp);
    for (unsigned i = 0; i < samples; i++) {
        char key[32], data[64];
        snprintf(key, sizeof key, "s%04u.txt", i);
        tar_add(fp, key, data, (size_t)snprintf(data, sizeof data, "text %u", i));
        snprintf(key, sizeof key, "s%04u.cls", i);
        tar_add(fp, key, data, (size_t)snprintf(data, sizeof data, "%u", i % 7));
    }
    static const char zero[1024];
    fwrite(zero, 1, sizeof zero, fp);
    fclose(fp);
    return path;
}

static const char *write_text(const char *name, unsigned lines)
{
    const char *path = sl_test_path(name);
    FILE *fp = fopen(path, "wb");
    ck_assert_ptr_nonnull(fp);
    for (unsigned i = 0; i < lines; i++)
        fprintf(fp, "%s%u\n", i % 5 == 0 ? "" : "line ", i); /* lines of several lengths */
    fclose(fp);
    return path;
}

static void settle(void)
{
    struct timespec ts = {0, 20 * 1000000L}; /* past the 1 ms settle time the tests use */
    nanosleep(&ts, NULL);
}

static struct feed_scan_key key_for(enum fmt_format format)
{
    return (struct feed_scan_key){.format = format,
                                  .compression = FMT_COMP_AUTO,
                                  .max_record_bytes = FMT_DEFAULT_MAX_RECORD_BYTES,
                                  .max_file = (uint64_t)1 << 30};
}

static void expect_same_scan(const struct fmt_scan *a, const struct fmt_scan *b)
{
    ck_assert_uint_eq(a->count, b->count);
    ck_assert_uint_eq(a->image_bytes, b->image_bytes);
    ck_assert_uint_eq(a->dropped_tail, b->dropped_tail);
    ck_assert_int_eq(a->compression, b->compression);
    ck_assert_uint_eq(a->max_record_bytes, b->max_record_bytes);
    for (uint64_t i = 0; i < a->count; i++)
        ck_assert_uint_eq(a->offsets[i], b->offsets[i]);
    ck_assert_int_eq(a->first == NULL, b->first == NULL);
    if (a->first == NULL)
        return;
    ck_assert_uint_eq(a->nnames, b->nnames);
    for (uint64_t i = 0; i <= a->count; i++)
        ck_assert_uint_eq(a->first[i], b->first[i]);
    for (uint64_t i = 0; i < a->first[a->count]; i++) {
        ck_assert_uint_eq(a->parts[i].name, b->parts[i].name);
        ck_assert_uint_eq(a->parts[i].off, b->parts[i].off);
        ck_assert_uint_eq(a->parts[i].len, b->parts[i].len);
    }
    for (size_t i = 0; i < a->nnames; i++)
        ck_assert_str_eq(a->names[i], b->names[i]);
}

/* Scan `path`, store the scan, load it back: the same scan. */
static void round_trip(const char *path, enum fmt_format format, const char *dir)
{
    struct feed_scan_key key = key_for(format);
    struct fmt_scan_opts so = {.compression = FMT_COMP_AUTO, .max_output = key.max_file};
    struct fmt_scan *scan, *back;
    struct sl_error err = {0};
    ck_assert_msg(fmt_format_get(format)->scan(&scan, path, &so, &err) == 0, "%s", err.msg);
    struct feed_scan_cache *c;
    ck_assert_int_eq(feed_scan_cache_open(&c, dir, &key, &err), 0);
    struct feed_file_id id;
    ck_assert_int_eq(feed_file_id_get(path, &id, &err), 0);
    ck_assert_int_eq(feed_scan_cache_load(c, path, &id, &back, &err), SL_END); /* none yet */
    ck_assert_int_eq(feed_scan_cache_store(c, path, &id, scan, &err), 0);
    int rc = feed_scan_cache_load(c, path, &id, &back, &err);
    ck_assert_msg(rc == 0, "%s: %s", path, err.msg);
    expect_same_scan(scan, back);
    fmt_scan_free(back);
    /* another identity: stale, never a hit */
    struct feed_file_id other = id;
    other.mtime_ns ^= 1;
    ck_assert_int_eq(feed_scan_cache_load(c, path, &other, &back, &err), SL_END);
    ck_assert_ptr_null(back);
    ck_assert_ptr_nonnull(strstr(err.msg, "changed since it was cached"));
    fmt_scan_free(back);
    fmt_scan_free(scan);
    feed_scan_cache_close(c);
}

START_TEST(test_round_trip_every_format)
{
    const char *dir = sl_test_path("cache");
    round_trip(write_tfr("a.tfrecord", 0, 300), FMT_FORMAT_TFRECORD, dir);
    round_trip(write_tfr("b.tfrecord.gz", 1, 200), FMT_FORMAT_TFRECORD, dir);
    round_trip(write_tfr("empty.tfrecord", 2, 0), FMT_FORMAT_TFRECORD, dir);
    round_trip(write_text("c.txt", 500), FMT_FORMAT_TEXT, dir);
    round_trip(write_tar("d.tar", 40), FMT_FORMAT_TAR, dir);
}
END_TEST

/* A remote file's entry (issue #28): named by its URL as written, its
 * identity its size, ETag hash and Last-Modified; no strong ETag, no
 * identity; another ETag is stale; another URL has no entry. */
START_TEST(test_remote_keys)
{
    struct feed_file_id id, other;
    ck_assert_int_eq(feed_file_id_remote(10, "", 0, &id), SL_END);
    ck_assert_int_eq(feed_file_id_remote(10, "W/\"abc\"", 0, &id), SL_END);
    ck_assert_int_eq(feed_file_id_remote(10, "\"abc\"", -1, &id), 0);
    ck_assert_int_eq(id.mtime_s, -1);
    ck_assert_uint_eq(id.mtime_ns, 999999999);
    ck_assert_int_eq(feed_file_id_remote(77, "\"abc\"", 1700000000123456789LL, &id), 0);
    ck_assert_uint_eq(id.dev, FEED_FILE_ID_REMOTE);
    ck_assert_uint_eq(id.size, 77);
    ck_assert_int_eq(id.mtime_s, 1700000000);
    ck_assert_uint_eq(id.mtime_ns, 123456789);
    ck_assert_int_eq(id.ctime_s, 0);
    ck_assert_int_eq(feed_file_id_remote(77, "\"abd\"", 1700000000123456789LL, &other), 0);
    ck_assert_uint_ne(id.ino, other.ino);
    ck_assert_int_eq(feed_file_id_equal(&id, &other), 0);

    const char *path = write_tfr("r.tfrecord", 0, 30);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(feed_file_id_remote((uint64_t)st.st_size, "\"abc\"", 5, &id), 0);
    ck_assert_int_eq(feed_file_id_remote((uint64_t)st.st_size, "\"abd\"", 5, &other), 0);
    struct feed_scan_key key = key_for(FMT_FORMAT_TFRECORD);
    struct fmt_scan_opts so = {.compression = FMT_COMP_AUTO, .max_output = key.max_file};
    struct fmt_scan *scan, *back;
    struct sl_error err = {0};
    ck_assert_int_eq(fmt_format_get(FMT_FORMAT_TFRECORD)->scan(&scan, path, &so, &err), 0);
    struct feed_scan_cache *c;
    ck_assert_int_eq(feed_scan_cache_open(&c, sl_test_path("rcache"), &key, &err), 0);
    const char *url = "https://[::1]:8443/d/r.tfrecord?X-Amz-Signature=ab";
    char e1[PATH_MAX + 64], e2[PATH_MAX + 64];
    ck_assert_int_eq(feed_scan_cache_entry(c, url, e1, sizeof e1, &err), 0);
    ck_assert_int_eq(feed_scan_cache_entry(c, path, e2, sizeof e2, &err), 0);
    ck_assert_str_ne(e1, e2);
    ck_assert_int_eq(feed_scan_cache_load(c, url, &id, &back, &err), SL_END); /* none yet */
    ck_assert_int_eq(feed_scan_cache_store(c, url, &id, scan, &err), 0);
    ck_assert_int_eq(feed_scan_cache_load(c, url, &id, &back, &err), 0);
    expect_same_scan(scan, back);
    fmt_scan_free(back);
    ck_assert_int_eq(feed_scan_cache_load(c, url, &other, &back, &err), SL_END);
    ck_assert_ptr_nonnull(strstr(err.msg, "changed since it was cached"));
    ck_assert_int_eq(feed_scan_cache_load(c, "https://[::1]:8443/d/other.tfrecord", &id, &back, &err), SL_END);
    ck_assert_ptr_null(back);
    /* a URL longer than a path may be */
    char *huge = malloc(PATH_MAX + 16);
    memset(huge, 'a', PATH_MAX + 15);
    memcpy(huge, "s3://", 5);
    huge[PATH_MAX + 15] = '\0';
    ck_assert_int_eq(feed_scan_cache_entry(c, huge, e1, sizeof e1, &err), SL_EINVAL);
    char want[200];
    snprintf(want, sizeof want, "scan cache: a name of %d bytes (at most %d)", PATH_MAX + 15, PATH_MAX - 1);
    ck_assert_str_eq(err.msg, want);
    free(huge);
    fmt_scan_free(scan);
    feed_scan_cache_close(c);
}
END_TEST

/* ---- through feed_source ---- */

static char warned[4096];
static int nwarned;

static void on_cache(void *ctx, const char *path, const struct sl_error *why)
{
    (void)ctx;
    (void)path;
    nwarned++;
    snprintf(warned, sizeof warned, "%s", why->msg);
}

static struct feed_source *open_src(const char **paths, size_t n, const char *dir, int trust,
                                    struct feed_source_cache_stats *st)
{
    struct feed_source_opts o = {
        .scan_cache = dir, .scan_cache_settle_ms = 1, .on_cache = on_cache, .trust_scan = trust, .scan_threads = 2};
    struct feed_source *s;
    struct sl_error err = {0};
    int rc = feed_source_open(&s, paths, n, &o, &err);
    ck_assert_msg(rc == 0, "%s", err.msg);
    feed_source_cache_stats(s, st);
    return s;
}

static void expect_records(struct feed_source *s, size_t file, unsigned tag, unsigned count)
{
    ck_assert_uint_eq(feed_source_count(s, file), count);
    struct feed_reader *rd;
    struct sl_error err = {0};
    ck_assert_int_eq(feed_reader_open(&rd, s, &err), 0);
    for (unsigned r = 0; r < count; r++) {
        char want[128];
        size_t n = make_rec(want, tag, r);
        const uint8_t *d;
        size_t len;
        int rc = feed_reader_get(rd, (uint32_t)file, r, &d, &len, &err);
        ck_assert_msg(rc == 0, "file %zu record %u: %s", file, r, err.msg);
        ck_assert_uint_eq(len, n);
        ck_assert_int_eq(memcmp(d, want, n), 0);
    }
    feed_reader_close(rd);
}

START_TEST(test_hit_then_changes)
{
    const char *dir = sl_test_path("cache");
    const char *paths[3];
    char p0[512], p1[512], p2[512];
    snprintf(p0, sizeof p0, "%s", write_tfr("a.tfrecord", 0, 120));
    snprintf(p1, sizeof p1, "%s", write_tfr("b.tfrecord.gz", 1, 80));
    snprintf(p2, sizeof p2, "%s", write_tfr("c.tfrecord", 2, 60));
    paths[0] = p0, paths[1] = p1, paths[2] = p2;
    settle();
    struct feed_source_cache_stats st;
    struct feed_source *s = open_src(paths, 3, dir, 0, &st);
    ck_assert_uint_eq(st.hits, 0);
    ck_assert_uint_eq(st.scanned, 3);
    ck_assert_uint_eq(st.written, 3);
    feed_source_close(s);

    s = open_src(paths, 3, dir, 0, &st);
    ck_assert_uint_eq(st.hits, 3);
    ck_assert_uint_eq(st.scanned, 0);
    ck_assert_uint_eq(st.written, 0);
    expect_records(s, 0, 0, 120);
    expect_records(s, 1, 1, 80);
    expect_records(s, 2, 2, 60);
    feed_source_close(s);

    /* a new size: scanned again, the new records served */
    write_tfr("a.tfrecord", 7, 130);
    /* the same size and another content, mtime put back: ctime tells */
    struct stat before;
    ck_assert_int_eq(stat(p2, &before), 0);
    write_tfr("c.tfrecord", 5, 60); /* rewritten in place: same inode, same lengths */
    struct timespec times[2] = {before.st_atim, before.st_mtim};
    ck_assert_int_eq(utimensat(AT_FDCWD, p2, times, 0), 0);
    struct stat after;
    ck_assert_int_eq(stat(p2, &after), 0);
    ck_assert_int_eq(after.st_size, before.st_size);
    ck_assert_int_eq(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
    /* a new inode by rename, with the same contents */
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.new", p1);
    FILE *in = fopen(p1, "rb"), *out = fopen(tmp, "wb");
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        fwrite(buf, 1, n, out);
    fclose(in);
    fclose(out);
    ck_assert_int_eq(rename(tmp, p1), 0);
    settle();
    s = open_src(paths, 3, dir, 0, &st);
    ck_assert_uint_eq(st.hits, 0);
    ck_assert_uint_eq(st.scanned, 3);
    ck_assert_uint_eq(st.written, 3);
    expect_records(s, 0, 7, 130);
    expect_records(s, 1, 1, 80);
    expect_records(s, 2, 5, 60);
    feed_source_close(s);
    s = open_src(paths, 3, dir, 0, &st);
    ck_assert_uint_eq(st.hits, 3);
    expect_records(s, 0, 7, 130);
    expect_records(s, 2, 5, 60);
    feed_source_close(s);
}
END_TEST

START_TEST(test_recent_files_not_cached)
{
    const char *dir = sl_test_path("cache");
    const char *paths[1] = {write_tfr("a.tfrecord", 0, 10)};
    struct feed_source_opts o = {.scan_cache = dir}; /* the default settle time: 2 s */
    struct feed_source *s;
    struct sl_error err = {0};
    ck_assert_int_eq(feed_source_open(&s, paths, 1, &o, &err), 0);
    struct feed_source_cache_stats st;
    feed_source_cache_stats(s, &st);
    ck_assert_uint_eq(st.recent, 1);
    ck_assert_uint_eq(st.written, 0);
    feed_source_close(s);
}
END_TEST

/* The entry of `path` under the default test key, read whole. */
static char entry_path[4096];
static uint8_t *read_entry(const char *path, const char *dir, size_t *len)
{
    struct feed_scan_cache *c;
    struct sl_error err = {0};
    struct feed_scan_key key = key_for(FMT_FORMAT_TFRECORD);
    ck_assert_int_eq(feed_scan_cache_open(&c, dir, &key, &err), 0);
    ck_assert_int_eq(feed_scan_cache_entry(c, path, entry_path, sizeof entry_path, &err), 0);
    feed_scan_cache_close(c);
    uint8_t *b = sl_test_read(entry_path, len);
    ck_assert_ptr_nonnull(b);
    return b;
}

static void write_entry(const uint8_t *b, size_t len)
{
    FILE *fp = fopen(entry_path, "wb");
    ck_assert_ptr_nonnull(fp);
    ck_assert_uint_eq(fwrite(b, 1, len, fp), len);
    fclose(fp);
}

static int load_entry(const char *path, const char *dir, struct sl_error *err)
{
    struct feed_scan_cache *c;
    struct feed_scan_key key = key_for(FMT_FORMAT_TFRECORD);
    ck_assert_int_eq(feed_scan_cache_open(&c, dir, &key, err), 0);
    struct feed_file_id id;
    ck_assert_int_eq(feed_file_id_get(path, &id, err), 0);
    struct fmt_scan *s;
    int rc = feed_scan_cache_load(c, path, &id, &s, err);
    ck_assert_int_eq(s != NULL, rc == 0);
    fmt_scan_free(s);
    feed_scan_cache_close(c);
    return rc;
}

/* A cached file with its entry damaged by `damage`: the entry refused as
 * damaged, the file scanned again and its entry rewritten. */
static void expect_rescan_after(const char *path, const char *dir)
{
    struct feed_source_cache_stats st;
    nwarned = 0;
    const char *paths[1] = {path};
    struct feed_source *s = open_src(paths, 1, dir, 0, &st);
    ck_assert_uint_eq(st.hits, 0);
    ck_assert_uint_eq(st.damaged, 1);
    ck_assert_uint_eq(st.written, 1);
    ck_assert_int_eq(nwarned, 1);
    ck_assert_ptr_nonnull(strstr(warned, "scan cache: ignored"));
    ck_assert_ptr_nonnull(strstr(warned, entry_path));
    expect_records(s, 0, 0, 50);
    feed_source_close(s);
    s = open_src(paths, 1, dir, 0, &st);
    ck_assert_uint_eq(st.hits, 1);
    feed_source_close(s);
}

static const char *cached_file(const char *dir)
{
    const char *p = write_tfr("a.tfrecord", 0, 50);
    static char path[512];
    snprintf(path, sizeof path, "%s", p);
    settle();
    const char *paths[1] = {path};
    struct feed_source_cache_stats st;
    feed_source_close(open_src(paths, 1, dir, 0, &st));
    ck_assert_uint_eq(st.written, 1);
    return path;
}

START_TEST(test_truncated_entries)
{
    const char *dir = sl_test_path("cache");
    const char *path = cached_file(dir);
    size_t len;
    uint8_t *good = read_entry(path, dir, &len);
    ck_assert_uint_eq(len, FEED_SCAN_CACHE_HEADER + strlen(path) + 0 + 50 * 8 + 4 + 0); /* path is absolute */
    size_t cuts[] = {
        0,       1,       8,      100, FEED_SCAN_CACHE_HEADER - 1, FEED_SCAN_CACHE_HEADER, FEED_SCAN_CACHE_HEADER + 3,
        len - 9, len - 4, len - 1};
    for (size_t k = 0; k < sizeof cuts / sizeof *cuts; k++) {
        write_entry(good, cuts[k]);
        struct sl_error err = {0};
        int rc = load_entry(path, dir, &err);
        ck_assert_msg(rc == SL_ECORRUPT, "cut at %zu: rc %d (%s)", cuts[k], rc, err.msg);
    }
    /* one byte more: the size does not match the header either */
    uint8_t *longer = malloc(len + 1);
    memcpy(longer, good, len);
    longer[len] = 0;
    write_entry(longer, len + 1);
    struct sl_error err = {0};
    ck_assert_int_eq(load_entry(path, dir, &err), SL_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(err.msg, "another size"));
    free(longer);
    write_entry(good, len / 2);
    expect_rescan_after(path, dir);
    free(good);
}
END_TEST

START_TEST(test_every_flipped_byte)
{
    const char *dir = sl_test_path("cache");
    const char *path = cached_file(dir);
    size_t len;
    uint8_t *good = read_entry(path, dir, &len);
    for (size_t i = 0; i < len; i++) {
        for (int bit = 0; bit < 8; bit += 7) {
            good[i] ^= (uint8_t)(1u << bit);
            write_entry(good, len);
            struct sl_error err = {0};
            int rc = load_entry(path, dir, &err);
            ck_assert_msg(rc == SL_ECORRUPT, "byte %zu bit %d: rc %d (%s)", i, bit, rc, err.msg);
            good[i] ^= (uint8_t)(1u << bit);
        }
    }
    write_entry(good, len);
    struct sl_error err = {0};
    ck_assert_int_eq(load_entry(path, dir, &err), 0);
    good[len - 20] ^= 0x40;
    write_entry(good, len);
    expect_rescan_after(path, dir);
    free(good);
}
END_TEST

/* Rewrite the header's CRC after editing it: a hostile entry. */
static void reseal_header(uint8_t *b)
{
    sl_store_le32(b + 132, sl_crc32c(b, 132));
}

static void reseal_body(uint8_t *b, size_t len)
{
    sl_store_le32(b + len - 4, sl_crc32c(b + FEED_SCAN_CACHE_HEADER, len - 4 - FEED_SCAN_CACHE_HEADER));
}

START_TEST(test_hostile_entries)
{
    const char *dir = sl_test_path("cache");
    const char *path = cached_file(dir);
    size_t len;
    uint8_t *good = read_entry(path, dir, &len);
    uint8_t *b = malloc(len);
    size_t plen = strlen(path);
    struct {
        size_t at;
        int width;
        uint64_t value;
        const char *says;
    } cases[] = {
        {88, 8, (uint64_t)1 << 60, "counts past the image"}, /* count */
        {88, 8, UINT64_MAX, "counts past the image"},
        {88, 8, 51, "claims more"}, /* one more record than it holds */
        {88, 8, 49, "another size"},
        {96, 8, (uint64_t)1 << 62, "not the file's size"}, /* image bytes */
        {104, 8, UINT64_MAX, "counts past the image"},     /* dropped tail */
        {112, 4, 9, "no such compression"},
        {112, 4, 0, "no such compression"}, /* AUTO is never a result */
        {116, 4, 3, "parts for records of bytes"},
        {120, 8, UINT64_MAX, "parts for records of bytes"},
        {128, 4, UINT32_MAX, "written for another file"}, /* path length */
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        memcpy(b, good, len);
        if (cases[k].width == 8)
            sl_store_le64(b + cases[k].at, cases[k].value);
        else
            sl_store_le32(b + cases[k].at, (uint32_t)cases[k].value);
        reseal_header(b);
        write_entry(b, len);
        struct sl_error err = {0};
        /* refused before anything is allocated past the read buffer */
        sl_alloc_fail_after(3); /* 1: the cache, 2: the read buffer */
        int rc = load_entry(path, dir, &err);
        sl_alloc_fail_reset();
        ck_assert_msg(rc == SL_ECORRUPT || rc == SL_END, "case %zu: rc %d (%s)", k, rc, err.msg);
        ck_assert_msg(strstr(err.msg, cases[k].says) != NULL, "case %zu: %s", k, err.msg);
    }
    /* offsets out of order, past the image, with both checksums good */
    size_t off0 = FEED_SCAN_CACHE_HEADER + plen;
    uint64_t bad_offsets[][2] = {{3, 0}, {49, (uint64_t)1 << 40}, {10, 0}};
    for (size_t k = 0; k < 3; k++) {
        memcpy(b, good, len);
        sl_store_le64(b + off0 + 8 * bad_offsets[k][0], bad_offsets[k][1]);
        reseal_body(b, len);
        write_entry(b, len);
        struct sl_error err = {0};
        ck_assert_int_eq(load_entry(path, dir, &err), SL_ECORRUPT);
        ck_assert_ptr_nonnull(strstr(err.msg, "out of order or past the image"));
    }
    /* not an entry at all: a FIFO under its name does not block, a link is not followed */
    unlink(entry_path);
    ck_assert_int_eq(mkfifo(entry_path, 0600), 0);
    struct sl_error err = {0};
    ck_assert_int_eq(load_entry(path, dir, &err), SL_ECORRUPT);
    unlink(entry_path);
    ck_assert_int_eq(symlink(path, entry_path), 0);
    ck_assert_int_ne(load_entry(path, dir, &err), 0);
    unlink(entry_path);
    free(b);
    free(good);
}
END_TEST

/* An entry whose checksums are good but whose offsets are wrong (shifted
 * by 4 bytes, still in order): the scan is taken from it, and the record
 * is refused as it is read, naming the file and the offset, even when the
 * job trusts its scan. */
START_TEST(test_hit_still_checks_records)
{
    const char *dir = sl_test_path("cache");
    const char *path = cached_file(dir);
    size_t len;
    uint8_t *b = read_entry(path, dir, &len);
    size_t at = FEED_SCAN_CACHE_HEADER + strlen(path) + 8 * 7; /* record 7 */
    uint64_t off = sl_load_le64(b + at);
    sl_store_le64(b + at, off + 4);
    reseal_body(b, len);
    write_entry(b, len);
    free(b);
    for (int trust = 0; trust <= 1; trust++) {
        const char *paths[1] = {path};
        struct feed_source_cache_stats st;
        struct feed_source *s = open_src(paths, 1, dir, trust, &st);
        ck_assert_uint_eq(st.hits, 1);
        struct feed_reader *rd;
        struct sl_error err = {0};
        ck_assert_int_eq(feed_reader_open(&rd, s, &err), 0);
        const uint8_t *d;
        size_t n;
        ck_assert_int_eq(feed_reader_get(rd, 6, 0, &d, &n, &err), SL_EINVAL); /* no file 6 */
        ck_assert_int_eq(feed_reader_get(rd, 0, 6, &d, &n, &err), 0);
        ck_assert_int_eq(feed_reader_get(rd, 0, 7, &d, &n, &err), SL_ECORRUPT);
        char want[600];
        snprintf(want, sizeof want, "%s: corrupted record at %llu", path, (unsigned long long)off + 4);
        ck_assert_msg(strncmp(err.msg, want, strlen(want)) == 0, "got '%s', want '%s'", err.msg, want);
        feed_reader_close(rd);
        feed_source_close(s);
    }
}
END_TEST

START_TEST(test_unusable_directories)
{
    const char *path = write_tfr("a.tfrecord", 0, 50);
    char p[512];
    snprintf(p, sizeof p, "%s", path);
    const char *paths[1] = {p};
    settle();
    struct feed_source_cache_stats st;
    /* a directory whose parent does not exist */
    nwarned = 0;
    struct feed_source *s = open_src(paths, 1, sl_test_path("no/such/dir"), 0, &st);
    ck_assert_int_eq(nwarned, 1);
    ck_assert_ptr_nonnull(strstr(warned, "mkdir("));
    ck_assert_ptr_nonnull(strstr(warned, "No such file or directory"));
    ck_assert_uint_eq(st.hits + st.written, 0);
    expect_records(s, 0, 0, 50);
    feed_source_close(s);
    /* a regular file */
    nwarned = 0;
    s = open_src(paths, 1, p, 0, &st);
    ck_assert_int_eq(nwarned, 1);
    ck_assert_ptr_nonnull(strstr(warned, "not a directory"));
    expect_records(s, 0, 0, 50);
    feed_source_close(s);
    /* an empty name */
    nwarned = 0;
    s = open_src(paths, 1, "", 0, &st);
    ck_assert_int_eq(nwarned, 1);
    feed_source_close(s);
    /* absent: made */
    const char *made = sl_test_path("made");
    nwarned = 0;
    s = open_src(paths, 1, made, 0, &st);
    ck_assert_int_eq(nwarned, 0);
    ck_assert_uint_eq(st.written, 1);
    feed_source_close(s);
    /* not writable (as root too: /proc/self takes no new files): used, each
     * write fails, the first is reported once */
    const char *more[2] = {p, write_tfr("b.tfrecord", 1, 5)};
    char p1[512];
    snprintf(p1, sizeof p1, "%s", more[1]);
    more[1] = p1;
    settle();
    nwarned = 0;
    s = open_src(more, 2, "/proc/self", 0, &st);
    ck_assert_int_eq(nwarned, 1);
    ck_assert_ptr_nonnull(strstr(warned, "cannot write the entry"));
    ck_assert_uint_eq(st.unwritten, 2);
    ck_assert_uint_eq(st.written, 0);
    expect_records(s, 0, 0, 50);
    expect_records(s, 1, 1, 5);
    feed_source_close(s);
}
END_TEST

START_TEST(test_options_key_entries)
{
    const char *dir = sl_test_path("cache");
    const char *path = cached_file(dir); /* default max_record_bytes, CRCs checked */
    const char *paths[1] = {path};
    struct feed_source_opts o = {.scan_cache = dir, .scan_cache_settle_ms = 1, .max_record_bytes = 4096};
    struct feed_source *s;
    struct sl_error err = {0};
    struct feed_source_cache_stats st;
    for (int round = 0; round < 2; round++) { /* another max_record_bytes: its own entry */
        ck_assert_int_eq(feed_source_open(&s, paths, 1, &o, &err), 0);
        feed_source_cache_stats(s, &st);
        ck_assert_uint_eq(st.hits, (size_t)round);
        feed_source_close(s);
    }
    o.max_record_bytes = 0;
    o.count_only = 1;
    for (int round = 0; round < 2; round++) { /* counting only: its own entry */
        ck_assert_int_eq(feed_source_open(&s, paths, 1, &o, &err), 0);
        feed_source_cache_stats(s, &st);
        ck_assert_uint_eq(st.hits, (size_t)round);
        feed_source_close(s);
    }
    /* the first entry is still there */
    o.count_only = 0;
    ck_assert_int_eq(feed_source_open(&s, paths, 1, &o, &err), 0);
    feed_source_cache_stats(s, &st);
    ck_assert_uint_eq(st.hits, 1);
    feed_source_close(s);
    /* a file read through its index does not use the cache */
    char idx[600];
    snprintf(idx, sizeof idx, "%s.idx", path);
    FILE *fp = fopen(idx, "w");
    for (unsigned r = 0, at = 0; r < 50; r++) {
        char rec[128];
        unsigned n = (unsigned)make_rec(rec, 0, r) + 16;
        fprintf(fp, "%u %u\n", at, n);
        at += n;
    }
    fclose(fp);
    o.use_index = 1;
    ck_assert_int_eq(feed_source_open(&s, paths, 1, &o, &err), 0);
    feed_source_cache_stats(s, &st);
    ck_assert_uint_eq(st.hits, 0);
    ck_assert_uint_eq(st.written, 0);
    expect_records(s, 0, 0, 50);
    feed_source_close(s);
}
END_TEST

/* Two processes at once over one directory, many times: every entry is
 * whole (loads as a hit), no temporary is left. */
START_TEST(test_two_processes_share_a_directory)
{
    enum { N = 40 };
    static char names[N][512];
    const char *paths[N];
    for (unsigned i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "f%02u.tfrecord", i);
        snprintf(names[i], sizeof names[i], "%s", write_tfr(name, i, 20 + i));
        paths[i] = names[i];
    }
    settle();
    const char *dir = sl_test_path("shared");
    for (int round = 0; round < 5; round++) {
        pid_t kids[2];
        for (int k = 0; k < 2; k++) {
            kids[k] = fork();
            ck_assert_int_ge(kids[k], 0);
            if (kids[k] == 0) {
                struct feed_source_opts o = {.scan_cache = dir, .scan_cache_settle_ms = 1, .scan_threads = 4};
                struct feed_source *s;
                struct sl_error err = {0};
                if (feed_source_open(&s, paths, N, &o, &err) != 0)
                    _exit(1);
                for (unsigned i = 0; i < N; i++)
                    if (feed_source_count(s, i) != 20 + i)
                        _exit(2);
                feed_source_close(s);
                _exit(0);
            }
        }
        for (int k = 0; k < 2; k++) {
            int status;
            ck_assert_int_eq(waitpid(kids[k], &status, 0), kids[k]);
            ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "round %d: child %d", round, k);
        }
        /* force rewrites next round: damage every entry */
        DIR *d = opendir(dir);
        struct dirent *e;
        size_t entries = 0;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.') {
                ck_assert_msg(strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0, "left behind: %s",
                              e->d_name);
                continue;
            }
            entries++;
        }
        closedir(d);
        ck_assert_uint_eq(entries, N);
        struct feed_source_cache_stats st;
        struct feed_source *s = open_src(paths, N, dir, 0, &st);
        ck_assert_uint_eq(st.hits, N);
        ck_assert_uint_eq(st.damaged, 0);
        feed_source_close(s);
        if (round % 2 == 0) /* a new mtime for every file: every entry stale, rewritten by both at once */
            for (unsigned i = 0; i < N; i++)
                ck_assert_int_eq(utimensat(AT_FDCWD, paths[i], NULL, 0), 0);
        settle();
    }
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("feed_scan_cache");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_round_trip_every_format);
    tcase_add_test(tc, test_remote_keys);
    tcase_add_test(tc, test_hit_then_changes);
    tcase_add_test(tc, test_recent_files_not_cached);
    tcase_add_test(tc, test_truncated_entries);
    tcase_add_test(tc, test_every_flipped_byte);
    tcase_add_test(tc, test_hostile_entries);
    tcase_add_test(tc, test_hit_still_checks_records);
    tcase_add_test(tc, test_unusable_directories);
    tcase_add_test(tc, test_options_key_entries);
    tcase_add_test(tc, test_two_processes_share_a_directory);
    suite_add_tcase(s, tc);
    return s;
}
