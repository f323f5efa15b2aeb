/* feed_reader: a record source's random access (feed_source.h): records
 * lent from mapped images, or from the cache of inflated (compressed,
 * remote, grouped) images, loaded by one reader at a time, pinned while
 * read, evicted least recently used first within cache_bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "feed_diskcache.h"
#include "feed_source_impl.h"
#include "fmt_stream.h"
#include "sl_alloc.h"
#include "sl_clock.h"

int feed__check_identity(const struct file *f, const struct sto_src *src, struct sl_error *err)
{
    uint64_t size = src->size;
    const char *etag = src->etag;
    if (size == f->src_size && strcmp(etag, f->etag) == 0)
        return 0;
    if (f->etag[0] == '\0' && etag[0] == '\0')
        return sl_error_set(err, SL_ECORRUPT, "%s: changed since it was scanned (%llu bytes, now %llu)", f->path,
                            (unsigned long long)f->src_size, (unsigned long long)size);
    return sl_error_set(err, SL_ECORRUPT,
                        "%s: changed since it was scanned (%llu bytes, ETag %s; now %llu bytes, ETag %s)", f->path,
                        (unsigned long long)f->src_size, f->etag[0] ? f->etag : "(none)", (unsigned long long)size,
                        etag[0] ? etag : "(none)");
}

/* A TFRecord file that will be read through its index (FILE.idx). A
 * remote one's index is looked for once (fmt_index_find: one open that is
 * also its read) and kept in f for its scan (index_hint). */
int feed_reader_open(struct feed_reader **out, struct feed_source *s, struct sl_error *err)
{
    struct feed_reader *r = sl_calloc(1, sizeof *r);
    if (r == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    r->s = s;
    *out = r;
    return 0;
}

static void unpin(struct feed_reader *r)
{
    if (r->pinned == NULL)
        return;
    if (!r->pinned->img.mapped) {
        pthread_mutex_lock(&r->s->mu);
        if (--r->pinned->img.pins == 0)
            pthread_cond_broadcast(&r->s->cv); /* room for a reader waiting to inflate */
        pthread_mutex_unlock(&r->s->mu);
    }
    r->pinned = NULL;
}

void feed_reader_release(struct feed_reader *r)
{
    unpin(r);
}

void feed_reader_close(struct feed_reader *r)
{
    if (r == NULL)
        return;
    unpin(r);
    sto_close(r->alone.src);
    sl_free(r->alone_buf);
    fmt_frame_free(&r->frame);
    sl_free(r);
}

/* Read one part of an image (a file, or one array of a group) straight
 * into buf (size bytes, as the scan found), then check that its stream
 * ends there. With `scanned` (a remote file, or any under test_whole_read)
 * it is opened through the storage seam and first checked to be the
 * object scanned. */
static int inflate_part(const char *path, enum fmt_compression comp, uint64_t size, uint8_t *buf,
                        const struct file *scanned, struct sl_error *err)
{
    struct fmt_stream_opts so = {
        .compression = comp, .max_output = size + 1, .io = comp == FMT_COMP_NONE ? FMT_IO_READ : FMT_IO_AUTO};
    struct fmt_stream *st;
    int rc;
    if (scanned != NULL) {
        struct sto_src *src;
        if ((rc = sto_open(&src, path, err)) != 0)
            return rc;
        if ((rc = feed__check_identity(scanned, src, err)) != 0) {
            sto_close(src);
            return rc;
        }
        rc = fmt_stream_open_source(&st, src, &so, err);
    } else {
        rc = fmt_stream_open(&st, path, &so, err);
    }
    if (rc != 0)
        return rc;
    size_t got = 0;
    rc = fmt_stream_read(st, buf, (size_t)size, &got, err);
    if (rc == 0 && got < size)
        rc = sl_error_set(err, SL_ECORRUPT, "%s: inflates to %zu bytes, %llu when it was scanned", path, got,
                          (unsigned long long)size);
    uint8_t extra;
    if (rc == 0 && (rc = fmt_stream_read(st, &extra, 1, &got, err)) == 0 && got != 0) /* the end: trailer, CRC */
        rc = sl_error_set(err, SL_ECORRUPT, "%s: inflates to more than the %llu bytes it held when it was scanned",
                          path, (unsigned long long)size);
    fmt_stream_close(st);
    return rc;
}

/* A remote plain file read whole: from the disk cache when it holds the
 * object the scan found (its URL, size and strong ETag), else from the
 * server, then kept there if it fits. */
static int fetch_whole(struct feed_source *s, const struct file *f, uint8_t *buf, struct sl_error *err)
{
    int keep = s->disk != NULL && f->etag[0] == '"';
    if (keep && feed_diskcache_get(s->disk, f->path, f->src_size, f->etag, buf) == 1)
        return 0;
    int rc = inflate_part(f->path, f->comp, f->image_size, buf, f, err);
    struct sl_error why = {0};
    if (rc == 0 && keep && feed_diskcache_put(s->disk, f->path, f->src_size, f->etag, buf, &why) < 0 &&
        atomic_exchange(&s->disk_warned, 1) == 0 && s->o.on_cache != NULL)
        s->o.on_cache(s->o.ctx, s->o.disk_cache_dir, &why);
    return rc;
}

/* The image of a compressed file, or of a group of arrays (its parts one
 * after the other), into buf (image_size bytes). */
static int inflate_file(struct feed_source *s, const struct file *f, uint8_t *buf, struct sl_error *err)
{
    size_t parts = fmt_scan_parts(f->scan);
    if (parts <= 1 && f->etag != NULL && f->comp == FMT_COMP_NONE && f->whole)
        return fetch_whole(s, f, buf, err);
    if (parts <= 1)
        return inflate_part(f->path, f->comp, f->image_size, buf, f->etag != NULL ? f : NULL, err);
    uint64_t at = 0;
    for (size_t k = 0; k < parts && k < f->nmembers; k++) {
        uint64_t n = fmt_scan_part_bytes(f->scan, k);
        if (n > f->image_size - at)
            return sl_error_set(err, SL_ECORRUPT, "%s: the group's arrays outgrow its image", f->path);
        int rc = inflate_part(f->members[k], fmt_scan_part_compression(f->scan, k), n, buf + at, NULL, err);
        if (rc != 0)
            return rc;
        at += n;
    }
    return 0;
}

/* Evict unpinned inflated images, least recently used first, until `need`
 * more bytes fit. Called with the mutex held. */
static void evict(struct feed_source *s, size_t need)
{
    while (s->cached + need > s->o.cache_bytes) {
        struct file *victim = NULL;
        for (size_t i = 0; i < s->nfiles; i++) {
            struct file *f = &s->files[i];
            if (!f->img.mapped && f->img.data && !f->loading && f->img.pins == 0 &&
                (victim == NULL || f->img.used < victim->img.used))
                victim = f;
        }
        if (victim == NULL)
            return;
        sl_free(victim->img.data);
        victim->img.data = NULL;
        s->cached -= victim->img.size;
    }
}

static int pin(struct feed_reader *r, struct file *f, struct sl_error *err)
{
    if (r->pinned == f)
        return 0;
    unpin(r);
    if (f->img.mapped) {
        r->pinned = f;
        return 0;
    }
    struct feed_source *s = r->s;
    size_t size = (size_t)f->image_size;
    if (f->image_size > s->o.cache_bytes) /* the scan refuses these; never wait for room that cannot be */
        return sl_error_set(err, SL_EINVAL, "%s: inflates to %llu bytes, more than the cache's %zu", f->path,
                            (unsigned long long)f->image_size, s->o.cache_bytes);
    pthread_mutex_lock(&s->mu);
    for (;;) {
        if (f->img.data != NULL && !f->loading) {
            f->img.pins++;
            f->img.used = ++s->clock;
            pthread_mutex_unlock(&s->mu);
            r->pinned = f;
            return 0;
        }
        if (!f->loading) {
            evict(s, size);
            if (s->cached + size <= s->o.cache_bytes)
                break;
        }
        /* another reader is inflating it, or every byte of the cache is
         * pinned or being inflated: wait for that to change */
        pthread_cond_wait(&s->cv, &s->mu);
    }
    f->loading = 1;
    s->cached += size;
    pthread_mutex_unlock(&s->mu);

    uint64_t cpu0 = sl_clock_thread_cpu_ns(), wall0 = sl_clock_ns();
    uint8_t *data = sl_malloc(size ? size : 1);
    int rc = data == NULL ? sl_error_set(err, SL_ENOMEM, "%s: out of memory for %zu inflated bytes", f->path, size)
                          : inflate_file(s, f, data, err);
    r->inflate_cpu_ns += sl_clock_thread_cpu_ns() - cpu0;
    r->inflate_wall_ns += sl_clock_ns() - wall0;

    pthread_mutex_lock(&s->mu);
    f->loading = 0;
    if (rc != 0) {
        s->cached -= size;
        sl_free(data);
    } else {
        f->img.data = data;
        f->img.size = size;
        f->img.pins++;
        f->img.used = ++s->clock;
        r->pinned = f;
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void feed_reader_use(struct feed_reader *r, struct feed_fetch *fetch)
{
    r->fetch = fetch;
}

/* A record of a file read by range that the reader's fetch does not hold
 * (no fetch, or a caller that reads what it did not plan): its bytes
 * alone, through the reader's own source (kept open for the next). */
static int fetch_alone(struct feed_reader *r, struct file *f, uint32_t file, uint64_t rec, const uint8_t **at,
                       size_t *len, struct sl_error *err)
{
    struct feed_source *s = r->s;
    uint64_t n = feed__range_extent(s, f, rec);
    if (n > r->alone_cap) {
        uint8_t *b = sl_realloc(r->alone_buf, (size_t)n);
        if (b == NULL)
            return sl_error_set(err, SL_ENOMEM, "%s: out of memory for a record of %llu bytes", f->path,
                                (unsigned long long)n);
        r->alone_buf = b;
        r->alone_cap = (size_t)n;
    }
    int rc = feed__read_range(s, &r->alone, file, fmt_scan_offset(f->scan, rec), r->alone_buf, (size_t)n, err);
    if (rc != 0)
        return rc;
    atomic_fetch_add(&s->fetched_alone, 1);
    *at = r->alone_buf;
    *len = (size_t)n;
    return 0;
}

static int frame_ranged(struct feed_reader *r, struct file *f, uint32_t file, uint64_t rec,
                        const struct fmt_frame **out, struct sl_error *err)
{
    unpin(r);
    const uint8_t *at;
    size_t len;
    int rc = feed__fetch_find(r->fetch, file, rec, &at, &len, err);
    if (rc == 0 && at == NULL)
        rc = fetch_alone(r, f, file, rec, &at, &len, err);
    if (rc != 0)
        return rc;
    /* the bytes came over the network: their CRCs are always checked */
    rc = r->s->ops->frame_at(f->scan, at, len, rec, 1, &r->frame, err);
    if (rc != 0) {
        sl_error_prefix(err, "%s: ", f->path);
        return rc;
    }
    *out = &r->frame;
    return 0;
}

int feed_reader_frame(struct feed_reader *r, uint32_t file, uint64_t rec, const struct fmt_frame **out,
                      struct sl_error *err)
{
    struct feed_source *s = r->s;
    if (file >= s->nfiles || rec >= s->files[file].count)
        return sl_error_set(err, SL_EINVAL, "%s %llu of file %u does not exist", s->ops->element,
                            (unsigned long long)rec, file);
    struct file *f = &s->files[file];
    if (f->ranged)
        return frame_ranged(r, f, file, rec, out, err);
    int rc = pin(r, f, err);
    if (rc != 0)
        return rc;
    rc = s->ops->frame(f->scan, f->img.data, f->img.size, rec, !s->o.trust_scan || f->verify, &r->frame, err);
    if (rc != 0) {
        sl_error_prefix(err, "%s: ", f->path); /* the format's error is bare */
        return rc;
    }
    *out = &r->frame;
    return 0;
}

int feed_reader_get(struct feed_reader *r, uint32_t file, uint64_t rec, const uint8_t **data, size_t *len,
                    struct sl_error *err)
{
    const struct fmt_frame *fr;
    int rc = feed_reader_frame(r, file, rec, &fr, err);
    if (rc != 0)
        return rc;
    if (fr->data == NULL && fr->fields != NULL)
        return sl_error_set(err, SL_EINVAL, "%s: %s %llu is made of fields (feed_reader_sample)",
                            r->s->files[file].path, r->s->ops->element, (unsigned long long)rec);
    *data = fr->data;
    *len = fr->len;
    return 0;
}

int feed_reader_sample(struct feed_reader *r, uint32_t file, uint64_t sample, const struct feed_field **fields,
                       size_t *n, struct sl_error *err)
{
    const struct fmt_frame *fr;
    int rc = feed_reader_frame(r, file, sample, &fr, err);
    if (rc != 0)
        return rc;
    if (fr->fields == NULL)
        return sl_error_set(err, SL_EINVAL, "%s: %s %llu has no fields", r->s->files[file].path, r->s->ops->element,
                            (unsigned long long)sample);
    for (size_t k = 0; k < fr->nfields; k++)
        r->fields[k] = (struct feed_field){fr->fields[k].name, fr->fields[k].data, fr->fields[k].len};
    *fields = r->fields;
    *n = fr->nfields;
    return 0;
}

void feed_reader_prefetch(const struct feed_reader *r, uint32_t file, uint64_t rec)
{
    const struct feed_source *s = r->s;
    if (file >= s->nfiles)
        return;
    const struct file *f = &s->files[file];
    /* only mapped images: they stay put for the source's lifetime, while an
     * inflated one may be evicted by another reader */
    if (!f->img.mapped || f->img.data == NULL || rec >= f->count)
        return;
    uint64_t off = fmt_scan_offset(f->scan, rec);
    uint64_t end = rec + 1 < f->count ? fmt_scan_offset(f->scan, rec + 1) : f->img.size;
    if (end > f->img.size || off >= end)
        return;
    if (end - off > 2048)
        end = off + 2048;
    for (uint64_t p = off & ~(uint64_t)63; p < end; p += 64)
        __builtin_prefetch(f->img.data + p, 0, 0);
}

void feed_reader_inflate_ns(const struct feed_reader *r, uint64_t *cpu_ns, uint64_t *wall_ns)
{
    *cpu_ns = r->inflate_cpu_ns;
    *wall_ns = r->inflate_wall_ns;
}
