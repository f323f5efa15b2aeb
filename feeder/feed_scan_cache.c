/* feed_scan_cache: entries on disk, one per (data file, scan options).
 *
 * Reading streams the entry through one 64 KiB buffer, decoding each
 * integer as it passes (little-endian on disk, any byte order in memory)
 * and extending the body's CRC-32C as it goes, straight into the arrays of
 * a new fmt_scan: loading costs what the scan's arrays cost and one buffer.
 * Nothing is allocated before the header has passed its checksum and every
 * count in it has been bounded by the entry's size on disk, which must be
 * exactly what the header says it holds. Writing encodes into the same kind
 * of buffer and hands it to sl_output, which renames a finished temporary
 * over the entry.
 *
 * The fmt_scan is filled field by field (fmt_format.h's shared part): this
 * file and the formats' scans are the only writers of one. What a format's
 * scan holds beyond its record offsets (tar: each sample's parts and the
 * field names) the format writes and reads itself, through its table's
 * `keep` (fmt_scan_keep), on this file's buffers and checksum; this file
 * bounds the blocks the format says it needs before anything is sized.
 */
#define _GNU_SOURCE /* O_CLOEXEC, O_NOFOLLOW in older glibc headers; realpath */
#include "feed_scan_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sl_alloc.h"
#include "sl_bytes.h"
#include "sl_crc32c.h"
#include "sl_output.h"
#include "sto.h"

static const uint8_t magic[8] = {'S', 'L', 'S', 'C', 'A', 'N', 'C', '\0'};

#define BUF_BYTES ((size_t)64 << 10)
#define FLAG_COUNT_ONLY 1u

struct feed_scan_cache {
    const char *dir;
    struct feed_scan_key key;
    const struct fmt_scan_keep *keep; /* the format's, for what a scan holds beyond its offsets; NULL: nothing */
};

int feed_file_id_get(const char *path, struct feed_file_id *out, struct sl_error *err)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return sl_error_sys(err, errno, "stat(%s)", path);
    *out = (struct feed_file_id){.dev = (uint64_t)st.st_dev,
                                 .ino = (uint64_t)st.st_ino,
                                 .size = (uint64_t)st.st_size,
                                 .mtime_s = (int64_t)st.st_mtim.tv_sec,
                                 .mtime_ns = (uint32_t)st.st_mtim.tv_nsec,
                                 .ctime_s = (int64_t)st.st_ctim.tv_sec,
                                 .ctime_ns = (uint32_t)st.st_ctim.tv_nsec};
    return 0;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n);

int feed_file_id_remote(uint64_t size, const char *etag, int64_t mtime_ns, struct feed_file_id *out)
{
    if (etag[0] == '\0' || strncmp(etag, "W/", 2) == 0)
        return SL_END;
    int64_t s = mtime_ns / 1000000000, ns = mtime_ns % 1000000000;
    if (ns < 0) {
        s--;
        ns += 1000000000;
    }
    *out = (struct feed_file_id){.dev = FEED_FILE_ID_REMOTE,
                                 .ino = fnv(0xcbf29ce484222325ull, etag, strlen(etag)),
                                 .size = size,
                                 .mtime_s = s,
                                 .mtime_ns = (uint32_t)ns};
    return 0;
}

int feed_file_id_equal(const struct feed_file_id *a, const struct feed_file_id *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtime_s == b->mtime_s &&
           a->mtime_ns == b->mtime_ns && a->ctime_s == b->ctime_s && a->ctime_ns == b->ctime_ns;
}

int feed_scan_cache_open(struct feed_scan_cache **out, const char *dir, const struct feed_scan_key *key,
                         struct sl_error *err)
{
    *out = NULL;
    if (dir == NULL || dir[0] == '\0')
        return sl_error_set(err, SL_EINVAL, "scan cache: empty directory name");
    struct stat st;
    if (stat(dir, &st) != 0) {
        if (errno != ENOENT)
            return sl_error_sys(err, errno, "scan cache: stat(%s)", dir);
        if (mkdir(dir, 0777) != 0 && errno != EEXIST)
            return sl_error_sys(err, errno, "scan cache: mkdir(%s)", dir);
        if (stat(dir, &st) != 0)
            return sl_error_sys(err, errno, "scan cache: stat(%s)", dir);
    }
    if (!S_ISDIR(st.st_mode))
        return sl_error_set(err, SL_EINVAL, "scan cache %s: not a directory", dir);
    struct feed_scan_cache *c = sl_calloc(1, sizeof *c);
    if (c == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    c->dir = dir;
    c->key = *key;
    const struct fmt_format_ops *ops = fmt_format_get(key->format);
    c->keep = ops != NULL ? ops->keep : NULL;
    *out = c;
    return 0;
}

void feed_scan_cache_close(struct feed_scan_cache *c)
{
    sl_free(c);
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static uint32_t key_flags(const struct feed_scan_key *k)
{
    return k->count_only ? FLAG_COUNT_ONLY : 0;
}

/* The entry's name from the absolute path and the key. */
static int entry_name(const struct feed_scan_cache *c, const char *abs, char *out, size_t cap, struct sl_error *err)
{
    uint8_t k[20];
    sl_store_le32(k, (uint32_t)c->key.format);
    sl_store_le32(k + 4, (uint32_t)c->key.compression);
    sl_store_le32(k + 8, key_flags(&c->key));
    sl_store_le64(k + 12, c->key.max_record_bytes);
    uint64_t h = fnv(0xcbf29ce484222325ull, abs, strlen(abs) + 1);
    h = fnv(h, k, sizeof k);
    int n = snprintf(out, cap, "%s/%016llx.scan", c->dir, (unsigned long long)h);
    if (n < 0 || (size_t)n >= cap)
        return sl_error_set(err, SL_EINVAL, "scan cache %s: directory name too long", c->dir);
    return 0;
}

static int resolve(const char *path, char abs[PATH_MAX], struct sl_error *err)
{
    if (sto_is_remote(path)) { /* a URL names itself */
        if (strlen(path) >= PATH_MAX)
            return sl_error_set(err, SL_EINVAL, "scan cache: a name of %zu bytes (at most %d)", strlen(path),
                                PATH_MAX - 1);
        memcpy(abs, path, strlen(path) + 1);
        return 0;
    }
    if (realpath(path, abs) == NULL)
        return sl_error_sys(err, errno, "realpath(%s)", path);
    return 0;
}

int feed_scan_cache_entry(const struct feed_scan_cache *c, const char *path, char *out, size_t cap,
                          struct sl_error *err)
{
    char abs[PATH_MAX];
    int rc = resolve(path, abs, err);
    return rc != 0 ? rc : entry_name(c, abs, out, cap, err);
}

/* ---- reading ---- */

struct rd {
    int fd;
    const char *name;
    uint8_t *buf;
    size_t pos, len;
    uint32_t crc; /* of the bytes taken since crc was last reset */
};

/* n (<= BUF_BYTES) contiguous bytes, or NULL at a short file or a read
 * error (err set). */
static const uint8_t *rd_take(struct rd *r, size_t n, struct sl_error *err)
{
    if (r->len - r->pos < n) {
        memmove(r->buf, r->buf + r->pos, r->len - r->pos);
        r->len -= r->pos;
        r->pos = 0;
        while (r->len < n) {
            ssize_t got = read(r->fd, r->buf + r->len, BUF_BYTES - r->len);
            if (got < 0 && errno == EINTR)
                continue;
            if (got < 0) {
                sl_error_sys(err, errno, "read(%s)", r->name);
                return NULL;
            }
            if (got == 0) {
                sl_error_set(err, SL_ECORRUPT, "%s: truncated", r->name);
                return NULL;
            }
            r->len += (size_t)got;
        }
    }
    const uint8_t *p = r->buf + r->pos;
    r->pos += n;
    r->crc = sl_crc32c_extend(r->crc, p, n);
    return p;
}

static const uint8_t *rd_take_fn(void *ctx, size_t n, struct sl_error *err)
{
    return rd_take(ctx, n, err);
}

static int bad(struct sl_error *err, const struct rd *r, const char *what, uint64_t a, uint64_t b)
{
    return sl_error_set(err, SL_ECORRUPT, "%s: %s (%llu, %llu)", r->name, what, (unsigned long long)a,
                        (unsigned long long)b);
}

/* *used + n * each <= total, without overflow; adds it to *used. */
static int fits(uint64_t *used, uint64_t n, uint64_t each, uint64_t total)
{
    if (*used > total || (each != 0 && n > (total - *used) / each))
        return 0;
    *used += n * each;
    return 1;
}

struct header {
    uint32_t version, format, asked, flags, compression, nnames, path_len;
    uint64_t max_record_bytes, count, image_bytes, dropped_tail, nparts;
    struct feed_file_id id;
};

static void header_decode(const uint8_t *p, struct header *h)
{
    h->version = sl_load_le32(p + 8);
    h->format = sl_load_le32(p + 12);
    h->asked = sl_load_le32(p + 16);
    h->flags = sl_load_le32(p + 20);
    h->max_record_bytes = sl_load_le64(p + 24);
    h->id = (struct feed_file_id){.dev = sl_load_le64(p + 32),
                                  .ino = sl_load_le64(p + 40),
                                  .size = sl_load_le64(p + 48),
                                  .mtime_s = (int64_t)sl_load_le64(p + 56),
                                  .mtime_ns = (uint32_t)sl_load_le64(p + 64),
                                  .ctime_s = (int64_t)sl_load_le64(p + 72),
                                  .ctime_ns = (uint32_t)sl_load_le64(p + 80)};
    h->count = sl_load_le64(p + 88);
    h->image_bytes = sl_load_le64(p + 96);
    h->dropped_tail = sl_load_le64(p + 104);
    h->compression = sl_load_le32(p + 112);
    h->nnames = sl_load_le32(p + 116);
    h->nparts = sl_load_le64(p + 120);
    h->path_len = sl_load_le32(p + 128);
}

/* The header against the key, the file's identity and the entry's size:
 * 0, SL_END (stale) or SL_ECORRUPT. */
static int header_check(const struct feed_scan_cache *c, const struct rd *r, const struct header *h,
                        const struct feed_file_id *id, size_t abs_len, uint64_t file_size, struct sl_error *err)
{
    if (h->version != FEED_SCAN_CACHE_VERSION)
        return sl_error_set(err, SL_END, "%s: written by another version (%u)", r->name, h->version);
    if (h->format != (uint32_t)c->key.format || h->asked != (uint32_t)c->key.compression ||
        h->flags != key_flags(&c->key) || h->max_record_bytes != c->key.max_record_bytes)
        return sl_error_set(err, SL_END, "%s: written with other scan options", r->name);
    if (!feed_file_id_equal(&h->id, id))
        return sl_error_set(err, SL_END, "%s: the file changed since it was cached", r->name);
    if (h->path_len != abs_len)
        return sl_error_set(err, SL_END, "%s: written for another file", r->name);
    if (h->compression != FMT_COMP_NONE && h->compression != FMT_COMP_GZIP && h->compression != FMT_COMP_ZLIB)
        return bad(err, r, "no such compression", h->compression, 0);
    if (h->compression == FMT_COMP_NONE && h->image_bytes != id->size)
        return bad(err, r, "an uncompressed image that is not the file's size", h->image_bytes, id->size);
    if (h->compression != FMT_COMP_NONE && h->image_bytes > c->key.max_file)
        return sl_error_set(err, SL_END, "%s: inflates past the per-file limit now in force", r->name);
    if (h->count > h->image_bytes || h->dropped_tail > h->image_bytes)
        return bad(err, r, "counts past the image (records, image bytes)", h->count, h->image_bytes);
    if (c->keep == NULL && (h->nparts != 0 || h->nnames != 0))
        return bad(err, r, "parts for records of bytes", h->nparts, h->nnames);
    /* what the format keeps beyond the offsets (tar: parts, names) */
    struct fmt_scan_extra x = {.nparts = h->nparts, .nnames = h->nnames};
    struct fmt_scan_block blocks[FMT_SCAN_MAX_BLOCKS];
    int nblocks = c->keep != NULL ? c->keep->layout(&x, h->count, blocks) : 0;
    if (nblocks < 0)
        return bad(err, r, "too many parts or names", h->nparts, h->nnames);
    uint64_t used = FEED_SCAN_CACHE_HEADER;
    int ok = fits(&used, h->path_len, 1, file_size) && fits(&used, h->count, 8, file_size);
    for (int i = 0; ok && i < nblocks; i++)
        ok = fits(&used, blocks[i].n, blocks[i].each, file_size);
    if (!ok || used + 4 != file_size)
        return bad(err, r, ok ? "holds another size than its header says" : "truncated: its header claims more",
                   ok ? used + 4 : h->count, file_size);
    return 0;
}

static int read_body(const struct feed_scan_cache *c, struct rd *r, const struct header *h, const char *abs,
                     struct fmt_scan *s, struct sl_error *err)
{
    const uint8_t *p;
    r->crc = 0;
    if ((p = rd_take(r, h->path_len, err)) == NULL)
        return err->code;
    /* another path with the same hash: known only once the checksum has
     * said whether the path itself is damaged */
    int other = memcmp(p, abs, h->path_len) != 0;
    uint64_t prev = 0;
    for (uint64_t i = 0; i < h->count; i++) {
        if ((p = rd_take(r, 8, err)) == NULL)
            return err->code;
        uint64_t off = sl_load_le64(p);
        if (off >= h->image_bytes || (i > 0 && off <= prev))
            return bad(err, r, "record offset out of order or past the image", i, off);
        s->offsets[i] = prev = off;
    }
    if (c->keep != NULL) {
        struct fmt_scan_extra x = {.nparts = h->nparts, .nnames = h->nnames};
        struct fmt_scan_source in = {.take = rd_take_fn, .ctx = r, .name = r->name};
        int rc = c->keep->read(s, &x, &in, err);
        if (rc != 0)
            return rc;
    }
    uint32_t body_crc = r->crc;
    if ((p = rd_take(r, 4, err)) == NULL)
        return err->code;
    if (sl_load_le32(p) != body_crc)
        return bad(err, r, "checksum mismatch (stored, computed)", sl_load_le32(p), body_crc);
    if (other)
        return sl_error_set(err, SL_END, "%s: written for another file", r->name);
    return 0;
}

/* A scan with room for what the header says (all bounded by now). */
static struct fmt_scan *scan_alloc(const struct feed_scan_cache *c, const struct header *h)
{
    struct fmt_scan_opts so = {.max_record_bytes = (size_t)c->key.max_record_bytes};
    struct fmt_scan *s = fmt__scan_new(&so);
    if (s == NULL)
        return NULL;
    uint64_t *o = sl_realloc(s->offsets, (size_t)(h->count ? h->count : 1) * sizeof *o);
    if (o == NULL) {
        fmt_scan_free(s);
        return NULL;
    }
    s->offsets = o;
    struct fmt_scan_extra x = {.nparts = h->nparts, .nnames = h->nnames};
    if (c->keep != NULL && c->keep->alloc(s, h->count, &x) != 0) {
        fmt_scan_free(s);
        return NULL;
    }
    /* what the format's read checks its values against */
    s->count = h->count;
    s->image_bytes = h->image_bytes;
    return s;
}

int feed_scan_cache_load(const struct feed_scan_cache *c, const char *path, const struct feed_file_id *id,
                         struct fmt_scan **out, struct sl_error *err)
{
    *out = NULL;
    char abs[PATH_MAX], name[PATH_MAX + 64];
    int rc = resolve(path, abs, err);
    if (rc != 0 || (rc = entry_name(c, abs, name, sizeof name, err)) != 0)
        return rc;
    /* O_NONBLOCK: a FIFO planted under the name must not block the open */
    int fd = open(name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT)
            return sl_error_set(err, SL_END, "%s: no entry", name);
        return sl_error_sys(err, errno, "open(%s)", name);
    }
    struct rd r = {.fd = fd, .name = name};
    struct fmt_scan *s = NULL;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        rc = sl_error_sys(err, errno, "fstat(%s)", name);
        goto out_close;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = sl_error_set(err, SL_ECORRUPT, "%s: not a regular file", name);
        goto out_close;
    }
    if ((uint64_t)st.st_size < FEED_SCAN_CACHE_HEADER + 4) {
        rc = bad(err, &r, "truncated: shorter than a header", (uint64_t)st.st_size, FEED_SCAN_CACHE_HEADER + 4);
        goto out_close;
    }
    if ((r.buf = sl_malloc(BUF_BYTES)) == NULL) {
        rc = sl_error_set(err, SL_ENOMEM, "out of memory");
        goto out_close;
    }
    const uint8_t *p = rd_take(&r, FEED_SCAN_CACHE_HEADER, err);
    if (p == NULL) {
        rc = err->code;
        goto out_close;
    }
    if (memcmp(p, magic, sizeof magic) != 0) {
        rc = sl_error_set(err, SL_ECORRUPT, "%s: not a scan cache entry (bad magic)", name);
        goto out_close;
    }
    if (sl_load_le32(p + 132) != sl_crc32c(p, 132)) {
        rc = sl_error_set(err, SL_ECORRUPT, "%s: header checksum mismatch", name);
        goto out_close;
    }
    struct header h;
    header_decode(p, &h);
    if ((rc = header_check(c, &r, &h, id, strlen(abs), (uint64_t)st.st_size, err)) != 0)
        goto out_close;
    if ((s = scan_alloc(c, &h)) == NULL) {
        rc = sl_error_set(err, SL_ENOMEM, "%s: out of memory for %llu offsets", name, (unsigned long long)h.count);
        goto out_close;
    }
    if ((rc = read_body(c, &r, &h, abs, s, err)) != 0)
        goto out_close;
    s->dropped_tail = h.dropped_tail;
    s->compression = (enum fmt_compression)h.compression;
    *out = s;
    s = NULL;
out_close:
    fmt_scan_free(s);
    sl_free(r.buf);
    close(fd);
    return rc;
}

/* ---- writing ---- */

struct wr {
    FILE *f;
    uint8_t *buf;
    size_t len;
    uint32_t crc;
    int failed;
};

static void wr_flush(struct wr *w)
{
    if (w->len > 0 && fwrite(w->buf, 1, w->len, w->f) != w->len)
        w->failed = 1;
    w->len = 0;
}

static void wr_put(struct wr *w, const void *p, size_t n)
{
    w->crc = sl_crc32c_extend(w->crc, p, n);
    while (n > 0) {
        if (w->len == BUF_BYTES)
            wr_flush(w);
        size_t k = BUF_BYTES - w->len < n ? BUF_BYTES - w->len : n;
        memcpy(w->buf + w->len, p, k);
        w->len += k;
        p = (const uint8_t *)p + k;
        n -= k;
    }
}

static void wr_put_fn(void *ctx, const void *p, size_t n)
{
    wr_put(ctx, p, n);
}

static void wr_u64(struct wr *w, uint64_t v)
{
    uint8_t b[8];
    sl_store_le64(b, v);
    wr_put(w, b, 8);
}

int feed_scan_cache_store(const struct feed_scan_cache *c, const char *path, const struct feed_file_id *id,
                          const struct fmt_scan *s, struct sl_error *err)
{
    char abs[PATH_MAX], name[PATH_MAX + 64];
    int rc = resolve(path, abs, err);
    if (rc != 0 || (rc = entry_name(c, abs, name, sizeof name, err)) != 0)
        return rc;
    struct fmt_scan_extra x = {0};
    if (c->keep != NULL)
        c->keep->extra(s, &x);
    uint8_t h[FEED_SCAN_CACHE_HEADER];
    memset(h, 0, sizeof h);
    memcpy(h, magic, sizeof magic);
    sl_store_le32(h + 8, FEED_SCAN_CACHE_VERSION);
    sl_store_le32(h + 12, (uint32_t)c->key.format);
    sl_store_le32(h + 16, (uint32_t)c->key.compression);
    sl_store_le32(h + 20, key_flags(&c->key));
    sl_store_le64(h + 24, c->key.max_record_bytes);
    sl_store_le64(h + 32, id->dev);
    sl_store_le64(h + 40, id->ino);
    sl_store_le64(h + 48, id->size);
    sl_store_le64(h + 56, (uint64_t)id->mtime_s);
    sl_store_le64(h + 64, id->mtime_ns);
    sl_store_le64(h + 72, (uint64_t)id->ctime_s);
    sl_store_le64(h + 80, id->ctime_ns);
    sl_store_le64(h + 88, s->count);
    sl_store_le64(h + 96, s->image_bytes);
    sl_store_le64(h + 104, s->dropped_tail);
    sl_store_le32(h + 112, (uint32_t)s->compression);
    sl_store_le32(h + 116, x.nnames);
    sl_store_le64(h + 120, x.nparts);
    sl_store_le32(h + 128, (uint32_t)strlen(abs));
    sl_store_le32(h + 132, sl_crc32c(h, 132));

    struct sl_output *o;
    if ((rc = sl_output_open(&o, name, 0, err)) != 0)
        return rc;
    struct wr w = {.f = sl_output_stream(o), .buf = sl_malloc(BUF_BYTES)};
    if (w.buf == NULL) {
        sl_output_abort(o);
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    }
    wr_put(&w, h, sizeof h);
    w.crc = 0;
    wr_put(&w, abs, strlen(abs));
    for (uint64_t i = 0; i < s->count; i++)
        wr_u64(&w, s->offsets[i]);
    if (c->keep != NULL)
        c->keep->write(s, &(struct fmt_scan_sink){.put = wr_put_fn, .ctx = &w});
    uint8_t crc[4];
    sl_store_le32(crc, w.crc);
    wr_put(&w, crc, sizeof crc);
    wr_flush(&w);
    sl_free(w.buf);
    if (w.failed) {
        rc = sl_error_sys(err, errno, "write(%s)", sl_output_write_path(o));
        sl_output_abort(o);
        return rc;
    }
    return sl_output_commit(o, err);
}
