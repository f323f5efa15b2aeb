/* Tests for fmt_tar: tar shards are built at test time with libarchive's
 * writer (pax, ustar, GNU tar; plain and gzip) in the test's temp folder,
 * then read back, whole or damaged, through fmt_tar_open / fmt_tar_open_mem. */
#include <archive.h>
#include <archive_entry.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "fmt_tar.h"
#include "sl_alloc.h"
#include "sl_test.h"

/* One member to write: type 'f' file, 'd' directory, 's' symlink to
 * `target`, 'h' hard link to `target`. */
struct member {
    char type;
    const char *path;
    const char *data; /* NUL-terminated unless len is set */
    size_t len;
    const char *target;
};

enum tar_kind { TAR_PAX, TAR_USTAR, TAR_GNU };

/* Compression for write_tar: none, gzip, or one of libarchive's others. */
enum { GZ_NONE = 0, GZ_GZIP = 1, GZ_XZ, GZ_ZSTD, GZ_BZIP2 };

/* Write the members as a tar (compressed as `gz` says) named `name` under
 * the temp dir; returns its path. */
static const char *write_tar(const char *name, const struct member *m, size_t n, enum tar_kind kind, int gz)
{
    const char *path = sl_test_path(name);
    struct archive *w = archive_write_new();
    ck_assert_ptr_nonnull(w);
    switch (kind) {
    case TAR_PAX: ck_assert_int_eq(archive_write_set_format_pax_restricted(w), ARCHIVE_OK); break;
    case TAR_USTAR: ck_assert_int_eq(archive_write_set_format_ustar(w), ARCHIVE_OK); break;
    case TAR_GNU: ck_assert_int_eq(archive_write_set_format_gnutar(w), ARCHIVE_OK); break;
    }
    switch (gz) {
    case GZ_GZIP: ck_assert_int_eq(archive_write_add_filter_gzip(w), ARCHIVE_OK); break;
    case GZ_XZ: ck_assert_int_eq(archive_write_add_filter_xz(w), ARCHIVE_OK); break;
    case GZ_ZSTD: ck_assert_int_eq(archive_write_add_filter_zstd(w), ARCHIVE_OK); break;
    case GZ_BZIP2: ck_assert_int_eq(archive_write_add_filter_bzip2(w), ARCHIVE_OK); break;
    default: break;
    }
    ck_assert_int_eq(archive_write_open_filename(w, path), ARCHIVE_OK);
    for (size_t i = 0; i < n; i++) {
        struct archive_entry *e = archive_entry_new();
        archive_entry_set_pathname(e, m[i].path);
        archive_entry_set_mtime(e, 1700000000, 0);
        size_t len = m[i].len ? m[i].len : (m[i].data ? strlen(m[i].data) : 0);
        switch (m[i].type) {
        case 'f':
            archive_entry_set_filetype(e, AE_IFREG);
            archive_entry_set_perm(e, 0644);
            archive_entry_set_size(e, (la_int64_t)len);
            break;
        case 'd':
            archive_entry_set_filetype(e, AE_IFDIR);
            archive_entry_set_perm(e, 0755);
            break;
        case 's':
            archive_entry_set_filetype(e, AE_IFLNK);
            archive_entry_set_perm(e, 0777);
            archive_entry_set_symlink(e, m[i].target);
            break;
        case 'h':
            archive_entry_set_filetype(e, AE_IFREG);
            archive_entry_set_perm(e, 0644);
            archive_entry_set_hardlink(e, m[i].target);
            break;
        default: ck_abort_msg("bad member type");
        }
        /* ARCHIVE_WARN: a name that is not valid in the C locale, still written */
        ck_assert_int_ge(archive_write_header(w, e), ARCHIVE_WARN);
        if (m[i].type == 'f' && len > 0)
            ck_assert_int_eq(archive_write_data(w, m[i].data, len), (la_ssize_t)len);
        archive_entry_free(e);
    }
    ck_assert_int_eq(archive_write_close(w), ARCHIVE_OK);
    archive_write_free(w);
    return path;
}

static uint8_t *read_all(const char *path, size_t *len)
{
    uint8_t *p = sl_test_read(path, len);
    ck_assert_ptr_nonnull(p);
    return p;
}

static struct fmt_tar *open_ok(const char *path, const struct fmt_tar_opts *opts)
{
    struct sl_error err = {0};
    struct fmt_tar *t = NULL;
    int rc = fmt_tar_open(&t, path, opts, &err);
    ck_assert_msg(rc == 0, "open: %d %s", rc, err.msg);
    ck_assert_ptr_nonnull(t);
    return t;
}

static void next_ok(struct fmt_tar *t, struct fmt_tar_sample *s)
{
    struct sl_error err = {0};
    int rc = fmt_tar_next(t, s, &err);
    ck_assert_msg(rc == 0, "next: %d %s", rc, err.msg);
}

static void next_end(struct fmt_tar *t)
{
    struct sl_error err = {0};
    struct fmt_tar_sample s;
    int rc = fmt_tar_next(t, &s, &err);
    ck_assert_msg(rc == SL_END, "expected the end: %d %s", rc, err.msg);
}

static void field_is(const struct fmt_tar_sample *s, size_t i, const char *ext, const void *data, size_t len)
{
    ck_assert_uint_lt(i, s->nfields);
    ck_assert_str_eq(s->fields[i].ext, ext);
    ck_assert_uint_eq(s->fields[i].len, len);
    ck_assert_ptr_nonnull(s->fields[i].data);
    ck_assert(len == 0 || memcmp(s->fields[i].data, data, len) == 0);
}

static void field_str(const struct fmt_tar_sample *s, size_t i, const char *ext, const char *data)
{
    field_is(s, i, ext, data, strlen(data));
}

/* ------------------------------------------------------------------ */

START_TEST(test_split_key)
{
    static const struct {
        const char *path, *key, *ext;
    } rows[] = {
        {"a/b.c/x.seg.png", "a/b.c/x", "seg.png"},
        {"a/b/x.seg.png", "a/b/x", "seg.png"},
        {"noext", "noext", ""},
        {"a/noext", "a/noext", ""},
        {"x.jpg", "x", "jpg"},
        {"x.", "x", ""},
        {"a.b.c", "a", "b.c"},
        {".hidden", "", "hidden"},
        {"d/.hidden", "d/", "hidden"},
        {"./x.png", "./x", "png"},
        {"dir.d/", "dir.d/", ""},
        {"", "", ""},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const char *ext = NULL;
        size_t n = fmt_tar_split_key(rows[i].path, &ext);
        ck_assert_msg(n == strlen(rows[i].key) && memcmp(rows[i].path, rows[i].key, n) == 0, "%s: key length %zu",
                      rows[i].path, n);
        ck_assert_str_eq(ext, rows[i].ext);
        /* ext points into the path */
        ck_assert(ext >= rows[i].path && ext <= rows[i].path + strlen(rows[i].path));
    }
}
END_TEST

START_TEST(test_grouping)
{
    static const struct member m[] = {
        {'f', "000.jpg", "jpeg-0", 0, NULL},     {'f', "000.json", "{\"a\":0}", 0, NULL},
        {'f', "000.seg.png", "png-0", 0, NULL},  {'f', "001.jpg", "jpeg-1", 0, NULL},
        {'f', "001.json", "{\"a\":1}", 0, NULL}, {'f', "002.txt", "two", 0, NULL},
    };
    const char *path = write_tar("group.tar", m, 6, TAR_PAX, 0);
    struct fmt_tar *t = open_ok(path, NULL);
    struct fmt_tar_sample s;
    next_ok(t, &s);
    ck_assert_str_eq(s.key, "000");
    ck_assert_uint_eq(s.index, 0);
    ck_assert_uint_eq(s.nfields, 3);
    field_str(&s, 0, "jpg", "jpeg-0");
    field_str(&s, 1, "json", "{\"a\":0}");
    field_str(&s, 2, "seg.png", "png-0");
    next_ok(t, &s);
    ck_assert_str_eq(s.key, "001");
    ck_assert_uint_eq(s.index, 1);
    ck_assert_uint_eq(s.nfields, 2);
    field_str(&s, 0, "jpg", "jpeg-1");
    field_str(&s, 1, "json", "{\"a\":1}");
    next_ok(t, &s);
    ck_assert_str_eq(s.key, "002");
    ck_assert_uint_eq(s.index, 2);
    ck_assert_uint_eq(s.nfields, 1);
    field_str(&s, 0, "txt", "two");
    next_end(t);
    next_end(t);
    fmt_tar_close(t);
}
END_TEST

START_TEST(test_nested_dirs)
{
    static const struct member m[] = {
        {'d', "train/", NULL, 0, NULL},
        {'d', "train/a.b/", NULL, 0, NULL},
        {'f', "train/a.b/x.seg.png", "seg", 0, NULL},
        {'f', "train/a.b/x.cls", "7", 0, NULL},
        {'f', "train/c/x.cls", "8", 0, NULL},
        {'f', "train/c/x", "bare", 0, NULL},
    };
    const char *path = write_tar("nested.tar", m, 6, TAR_PAX, 0);
    struct fmt_tar *t = open_ok(path, NULL);
    struct fmt_tar_sample s;
    next_ok(t, &s);
    ck_assert_str_eq(s.key, "train/a.b/x");
    ck_assert_uint_eq(s.nfields, 2);
    field_str(&s, 0, "seg.png", "seg");
    field_str(&s, 1, "cls", "7");
    /* same base name in another folder: another sample; no extension is "" */
    next_ok(t, &s);
    ck_assert_str_eq(s.key, "train/c/x");
    ck_assert_uint_eq(s.nfields, 2);
    field_str(&s, 0, "cls", "8");
    field_str(&s, 1, "", "bare");
    next_end(t);
    fmt_tar_close(t);
}
END_TEST

START_TEST(test_non_regular_skipped)
{
    static const struct member m[] = {
        {'d', "d/", NULL, 0, NULL},         {'f', "d/a.jpg", "A", 0, NULL},
        {'s', "d/a.lnk", NULL, 0, "a.jpg"}, {'h', "d/a.hard", NULL, 0, "d/a.jpg"},
        {'d', "d/a.dir/", NULL, 0, NULL},   {'f', "d/a.txt", "T", 0, NULL},
        {'s', "d/b.jpg", NULL, 0, "a.jpg"}, {'d', "e/", NULL, 0, NULL},
    };
    const char *path = write_tar("links.tar", m, 8, TAR_PAX, 0);
    struct fmt_tar *t = open_ok(path, NULL);
    struct fmt_tar_sample s;
    /* skipped members do not break up a sample */
    next_ok(t, &s);
    ck_assert_str_eq(s.key, "d/a");
    ck_assert_uint_eq(s.nfields, 2);
    field_str(&s, 0, "jpg", "A");
    field_str(&s, 1, "txt", "T");
    next_end(t);
    fmt_tar_close(t);

    static const struct member only_dirs[] = {
        {'d', "x/", NULL, 0, NULL},
        {'s', "x/y.png", NULL, 0, "z"},
    };
    t = open_ok(write_tar("dirs.tar", only_dirs, 2, TAR_USTAR, 0), NULL);
    next_end(t);
    fmt_tar_close(t);
}
END_TEST

START_TEST(test_repeated_extension)
{
    static const struct member m[] = {
        {'f', "k.txt", "1", 0, NULL},
        {'f', "q.jpg", "2", 0, NULL},
        {'f', "q.txt", "3", 0, NULL},
        {'f', "q.jpg", "4", 0, NULL},
    };
    const char *path = write_tar("repeat.tar", m, 4, TAR_USTAR, 0);
    struct fmt_tar *t = open_ok(path, NULL);
    struct fmt_tar_sample s;
    next_ok(t, &s);
    ck_assert_str_eq(s.key, "k");
    struct sl_error err = {0};
    ck_assert_int_eq(fmt_tar_next(t, &s, &err), SL_ECORRUPT);
    char want[512];
    /* each member is one header block and one data block */
    snprintf(want, sizeof want, "%s: repeated extension 'jpg' in sample 'q' (member 'q.jpg', at byte 3072)", path);
    ck_assert_str_eq(err.msg, want);
    ck_assert_int_eq(err.code, SL_ECORRUPT);
    ck_assert_int_eq(fmt_tar_next(t, &s, &err), SL_EINVAL);
    snprintf(want, sizeof want, "%s: read after an error", path);
    ck_assert_str_eq(err.msg, want);
    fmt_tar_close(t);
}
END_TEST

START_TEST(test_key_reappears)
{
    static const struct member m[] = {
        {'f', "a.x", "ax", 0, NULL},
        {'f', "b.x", "bx", 0, NULL},
        {'f', "a.y", "ay", 0, NULL},
        {'f', "a.x", "ax2", 0, NULL},
    };
    struct fmt_tar *t = open_ok(write_tar("again.tar", m, 4, TAR_PAX, 0), NULL);
    struct fmt_tar_sample s;
    next_ok(t, &s);
    ck_assert_str_eq(s.key, "a");
    ck_assert_uint_eq(s.nfields, 1);
    field_str(&s, 0, "x", "ax");
    next_ok(t, &s);
    ck_assert_str_eq(s.key, "b");
    field_str(&s, 0, "x", "bx");
    /* not consecutive with the first "a": a new sample, so "x" again is fine */
    next_ok(t, &s);
    ck_assert_str_eq(s.key, "a");
    ck_assert_uint_eq(s.index, 2);
    ck_assert_uint_eq(s.nfields, 2);
    field_str(&s, 0, "y", "ay");
    field_str(&s, 1, "x", "ax2");
    next_end(t);
    fmt_tar_close(t);
}
END_TEST

START_TEST(test_empty_archive)
{
    const char *path = write_tar("empty.tar", NULL, 0, TAR_PAX, 0);
    struct fmt_tar *t = open_ok(path, NULL);
    next_end(t);
    next_end(t);
    fmt_tar_close(t);

    path = write_tar("empty.tar.gz", NULL, 0, TAR_PAX, GZ_GZIP);
    t = open_ok(path, NULL);
    next_end(t);
    fmt_tar_close(t);

    /* a zero-byte file is no tar archive (GNU tar and Python agree) */
    path = sl_test_write("zero.tar", "", 0);
    struct sl_error err = {0};
    ck_assert_int_eq(fmt_tar_open(&t, path, NULL, &err), SL_ECORRUPT);
    ck_assert_ptr_null(t);
    char want[512];
    snprintf(want, sizeof want, "%s: Unrecognized archive format (at byte 0)", path);
    ck_assert_str_eq(err.msg, want);
    ck_assert_int_eq(fmt_tar_open_mem(&t, "zero.tar", NULL, 0, NULL, &err), SL_ECORRUPT);
    ck_assert_ptr_null(t);
}
END_TEST

/* Read every sample; return the first non-zero code (with err filled). */
static int drain(struct fmt_tar *t, struct sl_error *err, size_t *nsamples)
{
    struct fmt_tar_sample s;
    int rc;
    *nsamples = 0;
    while ((rc = fmt_tar_next(t, &s, err)) == 0)
        (*nsamples)++;
    return rc;
}

/* Deterministic binary bytes, NULs included. */
static uint8_t *pattern(size_t n, unsigned seed)
{
    uint8_t *p = malloc(n ? n : 1);
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = (uint8_t)(x >> 24);
    }
    return p;
}

static const size_t field_sizes[] = {0, 1, 511, 512, 513, 4096, 100000, 300000};
#define NSIZES (sizeof field_sizes / sizeof field_sizes[0])

static void check_exact_bytes(enum tar_kind kind, int gz, const char *name)
{
    struct member m[NSIZES * 2];
    uint8_t *bufs[NSIZES * 2];
    char names[NSIZES * 2][32];
    for (size_t i = 0; i < NSIZES * 2; i++) {
        size_t n = field_sizes[i % NSIZES];
        bufs[i] = pattern(n, (unsigned)i);
        /* two samples of all sizes, the second in reverse order */
        size_t k = i < NSIZES ? i : NSIZES + (NSIZES - 1 - (i - NSIZES));
        snprintf(names[k], sizeof names[k], "s%zu.f%zu.bin", i / NSIZES, i % NSIZES);
        m[k] = (struct member){'f', names[k], (const char *)bufs[i], n, NULL};
        if (n == 0)
            m[k].data = NULL;
    }
    const char *path = write_tar(name, m, NSIZES * 2, kind, gz);
    for (int mem = 0; mem < 2; mem++) {
        struct fmt_tar *t;
        size_t flen = 0;
        uint8_t *file = NULL;
        if (mem) {
            file = read_all(path, &flen);
            struct sl_error err = {0};
            ck_assert_int_eq(fmt_tar_open_mem(&t, name, file, flen, NULL, &err), 0);
        } else {
            t = open_ok(path, NULL);
        }
        struct fmt_tar_sample s;
        for (size_t sample = 0; sample < 2; sample++) {
            next_ok(t, &s);
            ck_assert_str_eq(s.key, sample ? "s1" : "s0");
            ck_assert_uint_eq(s.nfields, NSIZES);
            for (size_t j = 0; j < NSIZES; j++) {
                size_t f = sample ? NSIZES - 1 - j : j;
                char ext[16];
                snprintf(ext, sizeof ext, "f%zu.bin", f);
                field_is(&s, j, ext, bufs[sample * NSIZES + f], field_sizes[f]);
            }
        }
        next_end(t);
        fmt_tar_close(t);
        free(file);
    }
    for (size_t i = 0; i < NSIZES * 2; i++)
        free(bufs[i]);
}

START_TEST(test_exact_bytes)
{
    check_exact_bytes(TAR_PAX, 0, "bytes.tar");
    check_exact_bytes(TAR_USTAR, 0, "bytes-ustar.tar");
    check_exact_bytes(TAR_GNU, 0, "bytes-gnu.tar");
}
END_TEST

START_TEST(test_gzip)
{
    check_exact_bytes(TAR_PAX, GZ_GZIP, "bytes.tar.gz");
    /* the filter is found by content, not by name */
    check_exact_bytes(TAR_USTAR, GZ_GZIP, "bytes-gz.tar");
}
END_TEST

START_TEST(test_other_filters)
{
    /* libarchive undoes what the stream passes through */
    check_exact_bytes(TAR_PAX, GZ_XZ, "bytes.tar.xz");
    check_exact_bytes(TAR_PAX, GZ_ZSTD, "bytes.tar.zst");
    check_exact_bytes(TAR_USTAR, GZ_BZIP2, "bytes.tar.bz2");
}
END_TEST

/* libarchive stops at the end-of-archive block and its gzip filter checks no
 * CRC: the stream is read to its end, so a damaged trailer is still found
 * when megabytes of padding follow the end-of-archive block. */
START_TEST(test_gzip_trailer)
{
    static const struct member m[] = {
        {'f', "a.txt", "first", 0, NULL},
        {'f', "b.txt", "last", 0, NULL},
    };
    size_t tlen;
    uint8_t *plain = read_all(write_tar("padded.tar", m, 2, TAR_USTAR, GZ_NONE), &tlen);
    const char *path = sl_test_path("padded.tar.gz");
    gzFile gz = gzopen(path, "wb");
    ck_assert_ptr_nonnull(gz);
    ck_assert_int_eq(gzwrite(gz, plain, (unsigned)tlen), (int)tlen);
    static uint8_t zeros[1 << 16];
    for (int i = 0; i < 128; i++)
        ck_assert_int_eq(gzwrite(gz, zeros, sizeof zeros), (int)sizeof zeros);
    ck_assert_int_eq(gzclose(gz), Z_OK);
    size_t len;
    uint8_t *file = read_all(path, &len);
    static const size_t from_end[] = {8, 5, 4, 1}; /* CRC, then length */
    for (size_t i = 0; i <= 4; i++) {
        if (i < 4)
            file[len - from_end[i]] ^= 0x01;
        struct fmt_tar *t;
        struct sl_error err = {0};
        ck_assert_int_eq(fmt_tar_open_mem(&t, "padded.tar.gz", file, len, NULL, &err), 0);
        struct fmt_tar_sample s;
        next_ok(t, &s);
        field_str(&s, 0, "txt", "first");
        if (i == 4) {
            next_ok(t, &s);
            field_str(&s, 0, "txt", "last");
            next_end(t);
        } else {
            /* the last sample is held back: the error may concern it */
            ck_assert_int_eq(fmt_tar_next(t, &s, &err), SL_ECORRUPT);
            ck_assert_msg(strncmp(err.msg, "padded.tar.gz: ", 15) == 0 && strstr(err.msg, "compressed offset") &&
                              strstr(err.msg, "(after member 'b.txt', at byte "),
                          "%s", err.msg);
            file[len - from_end[i]] ^= 0x01;
        }
        fmt_tar_close(t);
    }
    /* bytes after the last gzip member */
    uint8_t *junk = malloc(len + 4);
    memcpy(junk, file, len);
    memcpy(junk + len, "junk", 4);
    struct fmt_tar *t;
    struct sl_error err = {0};
    ck_assert_int_eq(fmt_tar_open_mem(&t, "junk.tar.gz", junk, len + 4, NULL, &err), 0);
    size_t n;
    ck_assert_int_eq(drain(t, &err, &n), SL_ECORRUPT);
    ck_assert_uint_eq(n, 1);
    ck_assert_msg(strstr(err.msg, "trailing") != NULL, "%s", err.msg);
    fmt_tar_close(t);
    free(junk);
    free(file);
    free(plain);
}
END_TEST

START_TEST(test_long_and_utf8_names)
{
    char longdir[300];
    memset(longdir, 'd', 250);
    strcpy(longdir + 250, "/k");
    char p1[320], p2[320];
    snprintf(p1, sizeof p1, "%s.a.png", longdir);
    snprintf(p2, sizeof p2, "%s.cls", longdir);
    const struct member m[] = {
        {'f', p1, "png", 0, NULL},
        {'f', p2, "3", 0, NULL},
        {'f', "d\xc3\xa9j\xc3\xa0/\xc3\xa9t\xc3\xa9.txt", "utf8", 0, NULL},
    };
    static const enum tar_kind kinds[] = {TAR_PAX, TAR_GNU};
    for (int k = 0; k < 2; k++) {
        struct fmt_tar *t = open_ok(write_tar(k ? "long-gnu.tar" : "long-pax.tar", m, 3, kinds[k], 0), NULL);
        struct fmt_tar_sample s;
        next_ok(t, &s);
        ck_assert_str_eq(s.key, longdir);
        ck_assert_uint_eq(s.nfields, 2);
        field_str(&s, 0, "a.png", "png");
        field_str(&s, 1, "cls", "3");
        next_ok(t, &s);
        ck_assert_str_eq(s.key, "d\xc3\xa9j\xc3\xa0/\xc3\xa9t\xc3\xa9");
        field_str(&s, 0, "txt", "utf8");
        next_end(t);
        fmt_tar_close(t);
    }
}
END_TEST

static const struct member trunc_members[] = {
    {'f', "a.x", "first member, a bit longer than nothing", 0, NULL},
    {'f', "a.y", "second", 0, NULL},
    {'f', "b.x", "third", 0, NULL},
};

START_TEST(test_truncated)
{
    const char *path = write_tar("trunc.tar", trunc_members, 3, TAR_USTAR, 0);
    size_t len;
    uint8_t *file = read_all(path, &len);
    /* 3 x (header + data block), then the end-of-archive blocks */
    const size_t members_end = 3 * 1024;
    ck_assert_uint_ge(len, members_end + 1024);
    for (size_t cut = 0; cut <= len; cut++) {
        struct fmt_tar *t;
        struct sl_error err = {0};
        int rc = fmt_tar_open_mem(&t, "trunc.tar", file, cut, NULL, &err);
        size_t n = 0;
        if (rc == 0) {
            rc = drain(t, &err, &n);
            fmt_tar_close(t);
        }
        /* one end-of-archive block is enough, as for libarchive */
        if (cut >= members_end + 512) {
            ck_assert_msg(rc == SL_END && n == 2, "cut %zu: %d %s", cut, rc, err.msg);
        } else {
            ck_assert_msg(rc == SL_ECORRUPT, "cut %zu: rc %d %s", cut, rc, err.msg);
            ck_assert_msg(strncmp(err.msg, "trunc.tar: ", 11) == 0, "cut %zu: %s", cut, err.msg);
            /* sample "a" is only complete once the header of "b.x" is read */
            ck_assert_uint_le(n, cut >= 2560 ? 1 : 0);
        }
    }

    struct fmt_tar *t;
    struct sl_error err = {0};
    size_t n;
    /* cut at a member boundary: looks like an archive without end blocks */
    ck_assert_int_eq(fmt_tar_open_mem(&t, "trunc.tar", file, 2048, NULL, &err), 0);
    ck_assert_int_eq(drain(t, &err, &n), SL_ECORRUPT);
    ck_assert_str_eq(err.msg,
                     "trunc.tar: truncated archive: no end-of-archive block (after member 'a.y', at byte 2048)");
    fmt_tar_close(t);
    /* cut inside a member's data */
    ck_assert_int_eq(fmt_tar_open_mem(&t, "trunc.tar", file, 2600, NULL, &err), 0);
    ck_assert_int_eq(drain(t, &err, &n), SL_ECORRUPT);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(
        err.msg, "trunc.tar: Truncated input file (needed 507 bytes, only 35 available) (member 'b.x', at byte 2048)");
    fmt_tar_close(t);
    /* cut inside a header */
    ck_assert_int_eq(fmt_tar_open_mem(&t, "trunc.tar", file, 1300, NULL, &err), 0);
    ck_assert_int_eq(drain(t, &err, &n), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "trunc.tar: Truncated tar archive (after member 'a.x', at byte 1024)");
    fmt_tar_close(t);
    free(file);
}
END_TEST

START_TEST(test_truncated_gzip)
{
    const char *path = write_tar("trunc.tar.gz", trunc_members, 3, TAR_PAX, GZ_GZIP);
    size_t len;
    uint8_t *file = read_all(path, &len);
    /* the whole small stream is inflated at once, trailer check included */
    for (size_t cut = 0; cut < len; cut++) {
        struct fmt_tar *t;
        struct sl_error err = {0};
        int rc = fmt_tar_open_mem(&t, "trunc.tar.gz", file, cut, NULL, &err);
        size_t n = 0;
        if (rc == 0) {
            rc = drain(t, &err, &n);
            fmt_tar_close(t);
        }
        ck_assert_msg(rc == SL_ECORRUPT, "cut %zu of %zu: rc %d %s", cut, len, rc, err.msg);
        ck_assert_msg(strncmp(err.msg, "trunc.tar.gz: ", 14) == 0, "%s", err.msg);
    }
    /* a damaged deflate stream or CRC */
    for (size_t at = 10; at < len; at++) {
        file[at] ^= 0x55;
        struct fmt_tar *t;
        struct sl_error err = {0};
        int rc = fmt_tar_open_mem(&t, "bad.tar.gz", file, len, NULL, &err);
        size_t n = 0;
        if (rc == 0) {
            rc = drain(t, &err, &n);
            fmt_tar_close(t);
        }
        ck_assert_msg(rc < 0, "flip at %zu of %zu: rc %d", at, len, rc);
        file[at] ^= 0x55;
    }
    free(file);
}
END_TEST

START_TEST(test_member_too_big)
{
    char big[101];
    memset(big, 'z', 100);
    big[100] = '\0';
    const struct member m[] = {
        {'f', "a.ok", big, 100, NULL},
        {'f', "b.ok", big, 100, NULL},
        {'f', "b.big", "0123456789", 0, NULL},
    };
    const char *path = write_tar("big.tar", m, 3, TAR_USTAR, 0);
    struct fmt_tar_opts opts = {.max_member_bytes = 100};
    struct fmt_tar *t = open_ok(path, &opts);
    struct fmt_tar_sample s;
    next_ok(t, &s);
    field_is(&s, 0, "ok", big, 100);
    next_ok(t, &s);
    field_is(&s, 0, "ok", big, 100);
    fmt_tar_close(t);

    opts.max_member_bytes = 99;
    t = open_ok(path, &opts);
    struct sl_error err = {0};
    ck_assert_int_eq(fmt_tar_next(t, &s, &err), SL_ECORRUPT);
    char want[512];
    snprintf(want, sizeof want, "%s: member of 100 bytes is over max_member_bytes (99) (member 'a.ok', at byte 0)",
             path);
    ck_assert_str_eq(err.msg, want);
    fmt_tar_close(t);
}
END_TEST

START_TEST(test_max_fields)
{
    static const struct member m[] = {
        {'f', "a.1", "1", 0, NULL},
        {'f', "a.2", "2", 0, NULL},
        {'f', "a.3", "3", 0, NULL},
    };
    const char *path = write_tar("fields.tar", m, 3, TAR_USTAR, 0);
    struct fmt_tar_opts opts = {.max_fields = 3};
    struct fmt_tar *t = open_ok(path, &opts);
    struct fmt_tar_sample s;
    next_ok(t, &s);
    ck_assert_uint_eq(s.nfields, 3);
    fmt_tar_close(t);

    opts.max_fields = 2;
    t = open_ok(path, &opts);
    struct sl_error err = {0};
    ck_assert_int_eq(fmt_tar_next(t, &s, &err), SL_ECORRUPT);
    char want[512];
    snprintf(want, sizeof want, "%s: sample 'a' has more than max_fields (2) fields (member 'a.3', at byte 2048)",
             path);
    ck_assert_str_eq(err.msg, want);
    fmt_tar_close(t);
}
END_TEST

START_TEST(test_open_errors)
{
    struct fmt_tar *t;
    struct sl_error err = {0};
    const char *path = sl_test_path("missing.tar");
    ck_assert_int_eq(fmt_tar_open(&t, path, NULL, &err), SL_EIO);
    ck_assert_ptr_null(t);
    char want[600];
    snprintf(want, sizeof want, "open(%s): No such file or directory", path);
    ck_assert_str_eq(err.msg, want);

    static const char junk[2048] = "this is not a tar archive at all";
    ck_assert_int_eq(fmt_tar_open_mem(&t, "junk", junk, sizeof junk, NULL, &err), SL_ECORRUPT);
    ck_assert_ptr_null(t);
    ck_assert_str_eq(err.msg, "junk: Unrecognized archive format (at byte 0)");
    fmt_tar_close(NULL);
}
END_TEST

/* Once the arena holds the largest sample, reading allocates nothing of ours. */
START_TEST(test_no_alloc_when_warm)
{
    struct member m[40];
    char names[40][16];
    uint8_t *data = pattern(5000, 9);
    for (size_t i = 0; i < 40; i++) {
        snprintf(names[i], sizeof names[i], "%02zu.%s", i / 2, i % 2 ? "b" : "a");
        m[i] = (struct member){'f', names[i], (const char *)data, 5000 - i * 10, NULL};
    }
    struct fmt_tar *t = open_ok(write_tar("warm.tar.gz", m, 40, TAR_PAX, GZ_GZIP), NULL);
    struct fmt_tar_sample s;
    next_ok(t, &s);
    sl_alloc_fail_after(1);
    for (size_t i = 1; i < 20; i++) {
        next_ok(t, &s);
        ck_assert_uint_eq(s.index, i);
        field_is(&s, 1, "b", data, 5000 - (2 * i + 1) * 10);
    }
    next_end(t);
    sl_alloc_fail_reset();
    fmt_tar_close(t);
    free(data);
}
END_TEST

/* Every allocation of ours may fail; each failure is a clean SL_ENOMEM. */
START_TEST(test_alloc_failures)
{
    static const struct member m[] = {
        {'f', "a.x", "ax", 0, NULL},
        {'f', "a.y", "ay", 0, NULL},
        {'f', "b.x", "bx", 0, NULL},
    };
    const char *path = write_tar("alloc.tar", m, 3, TAR_PAX, 0);
    int finished = 0;
    for (long n = 1; n < 100 && !finished; n++) {
        sl_alloc_fail_after(n);
        struct fmt_tar *t;
        struct sl_error err = {0};
        int rc = fmt_tar_open(&t, path, NULL, &err);
        size_t got = 0;
        if (rc == 0) {
            rc = drain(t, &err, &got);
            fmt_tar_close(t);
        }
        sl_alloc_fail_reset();
        if (rc == SL_END && got == 2)
            finished = 1;
        else
            ck_assert_msg(rc == SL_ENOMEM, "fail after %ld: rc %d %s", n, rc, err.msg);
    }
    ck_assert(finished);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("fmt_tar");
    TCase *tc = tcase_create("tar");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_split_key);
    tcase_add_test(tc, test_grouping);
    tcase_add_test(tc, test_nested_dirs);
    tcase_add_test(tc, test_non_regular_skipped);
    tcase_add_test(tc, test_repeated_extension);
    tcase_add_test(tc, test_key_reappears);
    tcase_add_test(tc, test_empty_archive);
    tcase_add_test(tc, test_exact_bytes);
    tcase_add_test(tc, test_gzip);
    tcase_add_test(tc, test_other_filters);
    tcase_add_test(tc, test_gzip_trailer);
    tcase_add_test(tc, test_long_and_utf8_names);
    tcase_add_test(tc, test_truncated);
    tcase_add_test(tc, test_truncated_gzip);
    tcase_add_test(tc, test_member_too_big);
    tcase_add_test(tc, test_max_fields);
    tcase_add_test(tc, test_open_errors);
    tcase_add_test(tc, test_no_alloc_when_warm);
    tcase_add_test(tc, test_alloc_failures);
    suite_add_tcase(s, tc);
    return s;
}
