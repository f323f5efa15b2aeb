/* fmt_stream: windows over plain, gzip and zlib input from files and memory,
 * with both inflaters; concatenated gzip members; corrupt, truncated and
 * trailing data as errors with the compressed offset; AUTO detection; on
 * x86-64, no vector upper state left in use by ISA-L's inflate. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "fmt_stream.h"
#include "sto.h"
#include "sl_test.h"

/* Compress with zlib directly (not our writer): wbits 31 gzip, 15 zlib. */
static size_t deflate_to(const uint8_t *in, size_t n, int wbits, uint8_t *out, size_t cap)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    ck_assert_int_eq(deflateInit2(&z, 6, Z_DEFLATED, wbits, 8, Z_DEFAULT_STRATEGY), Z_OK);
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    ck_assert_int_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
    size_t made = cap - z.avail_out;
    deflateEnd(&z);
    return made;
}

static uint8_t *pattern(size_t n)
{
    uint8_t *p = malloc(n);
    uint32_t x = 7;
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        p[i] = (uint8_t)("abcdefgh"[(x >> 24) & 7] + (i % 97 == 0));
    }
    return p;
}

/* Read everything through windows of `step` bytes; returns malloc'd copy. */
static int drain(struct fmt_stream *s, size_t step, uint8_t **out, size_t *len, struct sl_error *err)
{
    size_t cap = 1024, n = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        const uint8_t *p;
        size_t avail;
        int rc = fmt_stream_window(s, step, &p, &avail, err);
        if (rc != 0) {
            free(buf);
            return rc;
        }
        size_t take = avail < step ? avail : step;
        while (n + take > cap)
            buf = realloc(buf, cap *= 2);
        memcpy(buf + n, p, take);
        n += take;
        fmt_stream_consume(s, take);
        if (avail < step)
            break;
    }
    *out = buf;
    *len = n;
    return 0;
}

static void roundtrip(const char *name, const uint8_t *file, size_t flen, const uint8_t *want, size_t wlen,
                      enum fmt_compression c, int use_zlib, size_t bufsize, size_t step)
{
    struct sl_error err = {0};
    /* memory, a mapped file, a file read with read(2), a file:// name, a
     * storage source (a remote object's path: sto_read_at, issue #28) */
    for (int from_file = 0; from_file < 5; from_file++) {
        struct fmt_stream_opts o = {.compression = c,
                                    .buffer_size = bufsize,
                                    .use_zlib = use_zlib,
                                    .io = from_file == 2 ? FMT_IO_READ : FMT_IO_MAP};
        struct fmt_stream *s;
        char url[700];
        if (from_file == 3) {
            snprintf(url, sizeof url, "file://%s", sl_test_write(name, file, flen));
            ck_assert_int_eq(fmt_stream_open(&s, url, &o, &err), 0);
            ck_assert_str_eq(fmt_stream_path(s), url);
        } else if (from_file == 4) {
            struct sto_src *src;
            ck_assert_int_eq(sto_open(&src, sl_test_write(name, file, flen), &err), 0);
            ck_assert_int_eq(fmt_stream_open_source(&s, src, &o, &err), 0);
            ck_assert_int_eq(fmt_stream_io(s), FMT_IO_READ); /* never mapped */
        } else if (from_file) {
            ck_assert_int_eq(fmt_stream_open(&s, sl_test_write(name, file, flen), &o, &err), 0);
        } else {
            ck_assert_int_eq(fmt_stream_open_mem(&s, name, file, flen, &o, &err), 0);
        }
        uint8_t *got;
        size_t n;
        int rc = drain(s, step, &got, &n, &err);
        ck_assert_msg(rc == 0, "%s: %s", name, err.msg);
        ck_assert_uint_eq(n, wlen);
        ck_assert_int_eq(memcmp(got, want, wlen), 0);
        ck_assert_uint_eq(fmt_stream_offset(s), wlen);
        free(got);
        fmt_stream_close(s);
    }
}

START_TEST(test_plain_gzip_zlib_every_inflater)
{
    size_t n = 300000;
    uint8_t *data = pattern(n);
    uint8_t *gz = malloc(n + 1024), *zz = malloc(n + 1024);
    size_t gzn = deflate_to(data, n, 31, gz, n + 1024);
    size_t zzn = deflate_to(data, n, 15, zz, n + 1024);
    for (int uz = 0; uz < 2; uz++) {
        roundtrip("a.bin", data, n, data, n, FMT_COMP_NONE, uz, 0, 1000);
        roundtrip("a.gz", gz, gzn, data, n, FMT_COMP_GZIP, uz, 0, 4096);
        roundtrip("a.zz", zz, zzn, data, n, FMT_COMP_ZLIB, uz, 0, 4096);
        /* tiny buffers: every refill and window growth path */
        roundtrip("b.gz", gz, gzn, data, n, FMT_COMP_GZIP, uz, 7, 1001);
        roundtrip("b.bin", data, n, data, n, FMT_COMP_NONE, uz, 7, 13);
        /* AUTO by extension and by magic (no extension) */
        roundtrip("c.gz", gz, gzn, data, n, FMT_COMP_AUTO, uz, 0, 4096);
        roundtrip("c.zlib", zz, zzn, data, n, FMT_COMP_AUTO, uz, 0, 4096);
        roundtrip("noext-gz", gz, gzn, data, n, FMT_COMP_AUTO, uz, 0, 4096);
        roundtrip("noext-zz", zz, zzn, data, n, FMT_COMP_AUTO, uz, 0, 4096);
        roundtrip("noext-plain", data, n, data, n, FMT_COMP_AUTO, uz, 0, 4096);
    }
    free(data);
    free(gz);
    free(zz);
}
END_TEST

START_TEST(test_concatenated_gzip_members)
{
    const char *parts[] = {"first member|", "", "second|", "third and last"};
    uint8_t file[1024];
    size_t flen = 0;
    char want[256] = "";
    for (int i = 0; i < 4; i++) {
        flen += deflate_to((const uint8_t *)parts[i], strlen(parts[i]), 31, file + flen, sizeof file - flen);
        strcat(want, parts[i]);
    }
    for (int uz = 0; uz < 2; uz++) {
        roundtrip("m.gz", file, flen, (const uint8_t *)want, strlen(want), FMT_COMP_GZIP, uz, 0, 1);
        roundtrip("m.gz", file, flen, (const uint8_t *)want, strlen(want), FMT_COMP_GZIP, uz, 5, 3);
    }
}
END_TEST

static void expect_error(const char *name, const uint8_t *file, size_t flen, enum fmt_compression c, int use_zlib,
                         const char *want_substr)
{
    struct fmt_stream_opts o = {.compression = c, .use_zlib = use_zlib};
    struct sl_error err = {0};
    struct fmt_stream *s;
    ck_assert_int_eq(fmt_stream_open_mem(&s, name, file, flen, &o, &err), 0);
    uint8_t *got;
    size_t n;
    int rc = drain(s, 4096, &got, &n, &err);
    ck_assert_int_eq(rc, SL_ECORRUPT);
    ck_assert_msg(strstr(err.msg, want_substr) != NULL, "use_zlib=%d: '%s' lacks '%s'", use_zlib, err.msg, want_substr);
    ck_assert_msg(strncmp(err.msg, name, strlen(name)) == 0, "message must start with the path: %s", err.msg);
    fmt_stream_close(s);
}

START_TEST(test_truncated_corrupt_trailing)
{
    size_t n = 100000;
    uint8_t *data = pattern(n);
    uint8_t *gz = malloc(n + 1024), *zz = malloc(n + 1024);
    size_t gzn = deflate_to(data, n, 31, gz, n + 1024);
    size_t zzn = deflate_to(data, n, 15, zz, n + 1024);
    char want[128];
    for (int uz = 0; uz < 2; uz++) {
        /* truncated: the offset is where the input ended */
        size_t cuts[] = {gzn / 2, gzn - 1, gzn - 8, 11};
        for (size_t i = 0; i < 4; i++) {
            snprintf(want, sizeof want, "truncated gzip stream at compressed offset %zu", cuts[i]);
            expect_error("t.gz", gz, cuts[i], FMT_COMP_GZIP, uz, want);
        }
        snprintf(want, sizeof want, "truncated zlib stream at compressed offset %zu", zzn - 3);
        expect_error("t.zz", zz, zzn - 3, FMT_COMP_ZLIB, uz, want);
        /* corrupt: a bad crc32 in the gzip trailer, garbage in the deflate data */
        uint8_t *bad = malloc(gzn);
        memcpy(bad, gz, gzn);
        bad[gzn - 6] ^= 0x55;
        expect_error("c.gz", bad, gzn, FMT_COMP_GZIP, uz, "corrupt gzip stream");
        memcpy(bad, gz, gzn);
        memset(bad + 20, 0xff, 64);
        expect_error("c.gz", bad, gzn, FMT_COMP_GZIP, uz, "corrupt gzip stream");
        free(bad);
        /* trailing bytes after the last member / the zlib stream */
        uint8_t *tr = malloc(gzn + 4);
        memcpy(tr, gz, gzn);
        memcpy(tr + gzn, "junk", 4);
        snprintf(want, sizeof want, "trailing bytes after gzip member at compressed offset %zu", gzn);
        expect_error("tr.gz", tr, gzn + 4, FMT_COMP_GZIP, uz, want);
        free(tr);
        tr = malloc(zzn + 4);
        memcpy(tr, zz, zzn);
        memcpy(tr + zzn, "junk", 4);
        snprintf(want, sizeof want, "trailing bytes after zlib stream at compressed offset %zu", zzn);
        expect_error("tr.zz", tr, zzn + 4, FMT_COMP_ZLIB, uz, want);
        free(tr);
        /* not compressed at all */
        expect_error("plain.gz", data, 1000, FMT_COMP_GZIP, uz, "corrupt gzip stream");
    }
    free(data);
    free(gz);
    free(zz);
}
END_TEST

START_TEST(test_empty_inputs)
{
    for (int c = FMT_COMP_AUTO; c <= FMT_COMP_ZLIB; c++)
        roundtrip("empty.gz", (const uint8_t *)"", 0, (const uint8_t *)"", 0, (enum fmt_compression)c, 0, 0, 16);
}
END_TEST

static int probe_yes(const uint8_t *head, size_t n)
{
    (void)head;
    return n >= 2;
}

START_TEST(test_plain_probe_overrides_magic)
{
    /* 0x78 0x01 is a valid zlib header, and also the start of a plain file */
    const uint8_t file[] = {0x78, 0x01, 'p', 'l', 'a', 'i', 'n'};
    struct fmt_stream_opts o = {.plain_probe = probe_yes};
    struct sl_error err = {0};
    struct fmt_stream *s;
    ck_assert_int_eq(fmt_stream_open_mem(&s, "x", file, sizeof file, &o, &err), 0);
    ck_assert_int_eq(fmt_stream_compression(s), FMT_COMP_NONE);
    fmt_stream_close(s);
    o.plain_probe = NULL;
    ck_assert_int_eq(fmt_stream_open_mem(&s, "x", file, sizeof file, &o, &err), 0);
    ck_assert_int_eq(fmt_stream_compression(s), FMT_COMP_ZLIB);
    fmt_stream_close(s);
}
END_TEST

START_TEST(test_window_limit_and_seek)
{
    uint8_t data[100];
    for (int i = 0; i < 100; i++)
        data[i] = (uint8_t)i;
    struct fmt_stream_opts o = {.compression = FMT_COMP_NONE, .buffer_size = 8, .max_window = 32};
    struct sl_error err = {0};
    struct fmt_stream *s;
    ck_assert_int_eq(fmt_stream_open(&s, sl_test_write("w.bin", data, 100), &o, &err), 0);
    const uint8_t *p;
    size_t avail;
    ck_assert_int_eq(fmt_stream_window(s, 33, &p, &avail, &err), SL_EINVAL);
    ck_assert_int_eq(fmt_stream_window(s, 32, &p, &avail, &err), 0);
    ck_assert_uint_ge(avail, 32);
    ck_assert_int_eq(p[31], 31);
    fmt_stream_consume(s, 30);
    ck_assert_int_eq(fmt_stream_window(s, 20, &p, &avail, &err), 0);
    ck_assert_int_eq(p[0], 30);
    ck_assert_int_eq(p[19], 49);
    ck_assert_int_eq(fmt_stream_seek(s, 90, &err), 0);
    ck_assert_int_eq(fmt_stream_window(s, 20, &p, &avail, &err), 0);
    ck_assert_uint_eq(avail, 10);
    ck_assert_int_eq(p[0], 90);
    ck_assert_uint_eq(fmt_stream_offset(s), 90);
    fmt_stream_close(s);
}
END_TEST

/* A storage source: seek moves the read offset; a damaged compressed
 * object's error names it and the compressed offset, as a file's. */
START_TEST(test_source_seek_and_errors)
{
    uint8_t data[100];
    for (int i = 0; i < 100; i++)
        data[i] = (uint8_t)i;
    struct fmt_stream_opts o = {.compression = FMT_COMP_NONE, .buffer_size = 8, .max_window = 32};
    struct sl_error err = {0};
    struct sto_src *src;
    struct fmt_stream *s;
    const char *path = sl_test_write("sw.bin", data, 100);
    ck_assert_int_eq(sto_open(&src, path, &err), 0);
    ck_assert_int_eq(fmt_stream_open_source(&s, src, &o, &err), 0);
    const uint8_t *p;
    size_t avail;
    ck_assert_int_eq(fmt_stream_window(s, 33, &p, &avail, &err), SL_EINVAL);
    ck_assert_int_eq(fmt_stream_window(s, 32, &p, &avail, &err), 0);
    ck_assert_int_eq(p[31], 31);
    fmt_stream_consume(s, 30);
    ck_assert_int_eq(fmt_stream_seek(s, 90, &err), 0);
    ck_assert_int_eq(fmt_stream_window(s, 20, &p, &avail, &err), 0);
    ck_assert_uint_eq(avail, 10);
    ck_assert_int_eq(p[0], 90);
    ck_assert_int_eq(fmt_stream_seek(s, 5, &err), 0); /* back */
    uint8_t two[2];
    size_t got;
    ck_assert_int_eq(fmt_stream_read(s, two, 2, &got, &err), 0);
    ck_assert_uint_eq(got, 2);
    ck_assert_int_eq(two[0], 5);
    ck_assert_int_eq(two[1], 6);
    ck_assert_int_eq(fmt_stream_seek(s, 200, &err), 0); /* past the end: the end, as a file's */
    ck_assert_int_eq(fmt_stream_window(s, 1, &p, &avail, &err), 0);
    ck_assert_uint_eq(avail, 0);
    fmt_stream_close(s);

    size_t n = 50000;
    uint8_t *big = pattern(n), *gz = malloc(n + 1024);
    size_t gzn = deflate_to(big, n, 31, gz, n + 1024);
    path = sl_test_write("st.gz", gz, gzn / 2);
    ck_assert_int_eq(sto_open(&src, path, &err), 0);
    o = (struct fmt_stream_opts){.compression = FMT_COMP_AUTO};
    ck_assert_int_eq(fmt_stream_open_source(&s, src, &o, &err), 0);
    ck_assert_int_eq(fmt_stream_compression(s), FMT_COMP_GZIP);
    ck_assert_int_eq(fmt_stream_seek(s, 0, &err), SL_EINVAL);
    uint8_t *out;
    size_t len;
    ck_assert_int_eq(drain(s, 4096, &out, &len, &err), SL_ECORRUPT);
    char want[700];
    snprintf(want, sizeof want, "%s: truncated gzip stream at compressed offset %zu", path, gzn / 2);
    ck_assert_str_eq(err.msg, want);
    fmt_stream_close(s);
    free(big);
    free(gz);
}
END_TEST

START_TEST(test_open_missing_file)
{
    struct sl_error err = {0};
    struct fmt_stream *s;
    ck_assert_int_eq(fmt_stream_open(&s, "/nonexistent/x.tfrecord", NULL, &err), SL_EIO);
    ck_assert_ptr_null(s);
    ck_assert_str_eq(err.msg, "open(/nonexistent/x.tfrecord): No such file or directory");
    /* a file:// name: the error names its path */
    ck_assert_int_eq(fmt_stream_open(&s, "file:///nonexistent/y.tfrecord", NULL, &err), SL_EIO);
    ck_assert_ptr_null(s);
    ck_assert_str_eq(err.msg, "open(/nonexistent/y.tfrecord): No such file or directory");
}
END_TEST

START_TEST(test_compression_names)
{
    enum fmt_compression c;
    ck_assert_int_eq(fmt_compression_parse("GZIP", &c), 0);
    ck_assert_int_eq(c, FMT_COMP_GZIP);
    ck_assert_int_eq(fmt_compression_parse("", &c), 0);
    ck_assert_int_eq(c, FMT_COMP_NONE);
    ck_assert_int_eq(fmt_compression_parse("snappy", &c), SL_EINVAL);
    ck_assert_str_eq(fmt_compression_name(FMT_COMP_ZLIB), "zlib");
}
END_TEST

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* isal_inflate returns with the upper halves of the ymm registers in use;
 * the window comes back with them clean (bits 2 and 6 of XINUSE), so the
 * framing code's SSE instructions do not wait on the inflate. */
START_TEST(test_inflate_leaves_upper_vector_state_clean)
{
    uint64_t x;
    if (!sl_test_xinuse(&x))
        return;
    size_t n = 300000;
    uint8_t *data = pattern(n), *gz = malloc(n + 1024);
    size_t gzn = deflate_to(data, n, 31, gz, n + 1024);
    struct fmt_stream_opts o = {.compression = FMT_COMP_GZIP};
    struct fmt_stream *s;
    struct sl_error err = {0};
    ck_assert_int_eq(fmt_stream_open(&s, sl_test_write("v.gz", gz, gzn), &o, &err), 0);
    if (strcmp(fmt_stream_inflater_name(s), "isa-l") == 0) {
        for (size_t done = 0; done < n;) {
            const uint8_t *p;
            size_t avail;
            ck_assert_int_eq(fmt_stream_window(s, 65536, &p, &avail, &err), 0);
            ck_assert(sl_test_xinuse(&x));
            ck_assert_msg((x & 0x44) == 0, "at %zu: XINUSE %#llx", done, (unsigned long long)x);
            ck_assert_uint_gt(avail, 0);
            size_t take = avail < 65536 ? avail : 65536;
            fmt_stream_consume(s, take);
            done += take;
        }
    }
    fmt_stream_close(s);
    free(data);
    free(gz);
}
END_TEST
#endif

START_TEST(test_io_names)
{
    static const char *names[] = {"auto", "read", "map"};
    for (int i = 0; i < 3; i++) {
        enum fmt_io io;
        ck_assert_int_eq(fmt_io_parse(names[i], &io), 0);
        ck_assert_int_eq(io, i);
        ck_assert_str_eq(fmt_io_name(io), names[i]);
    }
    enum fmt_io io = FMT_IO_MAP;
    static const char *bad[] = {"", "MAP", "mmap", "read ", "2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_int_eq(fmt_io_parse(bad[i], &io), SL_EINVAL);
    ck_assert_int_eq(io, FMT_IO_MAP);
}
END_TEST

/* Opens `path` with io AUTO and says which path it took. */
static enum fmt_io auto_path(const char *path)
{
    struct fmt_stream *s;
    struct sl_error err = {0};
    struct fmt_stream_opts o = {.compression = FMT_COMP_NONE};
    ck_assert_int_eq(fmt_stream_open(&s, path, &o, &err), 0);
    enum fmt_io io = fmt_stream_io(s);
    fmt_stream_close(s);
    return io;
}

/* The probe: a file under 32 MiB is refused; one of 32 MiB in the page
 * cache (just written) is measured both ways, and the choice follows the
 * rule (map only when 5% faster). AUTO without SLUICE_IO reads small files
 * before any probe, then takes the probe's choice for every file. */
START_TEST(test_io_probe_and_auto)
{
    const char *env = getenv("SLUICE_IO"); /* ctest runs this binary under SLUICE_IO=map too */
    size_t n = (size_t)32 << 20;
    uint8_t *big = malloc(n);
    for (size_t i = 0; i < n; i++)
        big[i] = (uint8_t)(i * 7 + (i >> 12));
    const char *small = sl_test_write("probe-small.bin", big, 4096);
    struct fmt_io_probe p;
    struct sl_error err = {0};
    ck_assert_int_eq(fmt_io_probe_file(small, &p, &err), SL_EINVAL);
    char want[1200];
    snprintf(want, sizeof want, "%s: 4096 bytes, too small to probe (at least 33554432)", small);
    ck_assert_str_eq(err.msg, want);
    ck_assert_int_eq(p.done, 0);
    const char *source = NULL;
    if (env == NULL) {
        ck_assert_int_eq(auto_path(small), FMT_IO_READ);
        ck_assert_int_eq(fmt_io_current(&p, &source), FMT_IO_READ);
        ck_assert_str_eq(source, "default");
        ck_assert_int_eq(p.done, 0);
    }
    const char *path = sl_test_write("probe-big.bin", big, n);
    free(big);
    ck_assert_int_eq(fmt_io_probe_file(path, &p, &err), 0);
    ck_assert_int_eq(p.done, 1);
    ck_assert(p.read_bps > 1e6 && p.map_bps > 1e6);
    ck_assert_int_eq(p.choice, p.map_bps >= p.read_bps * 1.05 ? FMT_IO_MAP : FMT_IO_READ);
    ck_assert_str_eq(p.path, path);
    if (env != NULL)
        return;
    /* fmt_io_probe_file does not decide for the process; opening does */
    ck_assert_int_eq(fmt_io_current(NULL, &source), FMT_IO_READ);
    ck_assert_str_eq(source, "default");
    enum fmt_io first = auto_path(path);
    struct fmt_io_probe q;
    ck_assert_int_eq(fmt_io_current(&q, &source), first);
    ck_assert_str_eq(source, "probe");
    ck_assert_int_eq(q.done, 1);
    ck_assert_int_eq(q.choice, first);
    ck_assert_int_eq(auto_path(small), first);
}
END_TEST

/* SLUICE_IO decides AUTO for the whole process, before any probe; a value
 * it does not know is ignored; an explicit io is never overridden. */
static void env_case(const char *value, enum fmt_io want, const char *want_source)
{
    setenv("SLUICE_IO", value, 1);
    const char *source;
    ck_assert_int_eq(fmt_io_current(NULL, &source), want); /* before any file is opened */
    ck_assert_str_eq(source, want_source);
    uint8_t b[100] = {0};
    const char *path = sl_test_write("env.bin", b, sizeof b);
    ck_assert_int_eq(auto_path(path), want);
    ck_assert_int_eq(fmt_io_current(NULL, &source), want);
    ck_assert_str_eq(source, want_source);
    struct fmt_stream *s;
    struct sl_error err = {0};
    struct fmt_stream_opts o = {.compression = FMT_COMP_NONE, .io = want == FMT_IO_MAP ? FMT_IO_READ : FMT_IO_MAP};
    ck_assert_int_eq(fmt_stream_open(&s, path, &o, &err), 0);
    ck_assert_int_eq(fmt_stream_io(s), o.io);
    fmt_stream_close(s);
}

START_TEST(test_io_env_map)
{
    env_case("map", FMT_IO_MAP, "SLUICE_IO");
}
END_TEST

START_TEST(test_io_env_read)
{
    env_case("read", FMT_IO_READ, "SLUICE_IO");
}
END_TEST

START_TEST(test_io_env_unknown)
{
    env_case("mmap", FMT_IO_READ, "default");
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("fmt_stream");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_plain_gzip_zlib_every_inflater);
    tcase_add_test(tc, test_concatenated_gzip_members);
    tcase_add_test(tc, test_truncated_corrupt_trailing);
    tcase_add_test(tc, test_empty_inputs);
    tcase_add_test(tc, test_plain_probe_overrides_magic);
    tcase_add_test(tc, test_window_limit_and_seek);
    tcase_add_test(tc, test_open_missing_file);
    tcase_add_test(tc, test_source_seek_and_errors);
    tcase_add_test(tc, test_compression_names);
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    tcase_add_test(tc, test_inflate_leaves_upper_vector_state_clean);
    tcase_add_test(tc, test_io_names);
    tcase_add_test(tc, test_io_probe_and_auto);
    tcase_add_test(tc, test_io_env_map);
    tcase_add_test(tc, test_io_env_read);
    tcase_add_test(tc, test_io_env_unknown);
#endif
    suite_add_tcase(s, tc);
    return s;
}
