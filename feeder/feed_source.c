/* feed_source: the scan at open, the per-file record offsets, and the
 * image cache.
 *
 * The format is a table of ops (fmt_format.h) this file calls without
 * knowing which format it is: the format's scan streams each file once and
 * says where its records lie (kept per file, a fmt_scan); its frame cuts a
 * record out of the file's image by number. This file owns the rest: the
 * threads of the scan, the error policy, the images and their cache, and
 * the path at the head of every error.
 *
 * Each file has an "image": its decompressed bytes. For an uncompressed
 * local file the image is an mmap made at open and kept; for a compressed
 * file it is inflated on demand into the cache, and so is a remote
 * (http(s)://, s3://) uncompressed file, read whole through fmt_stream,
 * which the scan then refuses when it is larger than a compressed file may
 * inflate to, unless the file is read by range: a remote TFRecord file
 * whose offsets came from its index, under remote_ranges or when it is too
 * large to be held whole; its records are then fetched by byte range
 * (feed_fetch.h), never held as an image.
 *
 * A remote file's size and ETag are taken when its scan begins (one open
 * of the source); each later read of it checks that the object there is
 * still that one, so records are never cut out of another object's bytes.
 * In the scan cache a remote file is keyed by its URL, and its identity is
 * its size, ETag and Last-Modified (feed_file_id_remote): one without a
 * strong ETag is not cached; an entry is written when the object opened
 * again after the scan is still the one opened before it (no settle time:
 * the ETag, not a timestamp's tick, tells versions apart).
 *
 * Cache: entries hold an image and a pin count; a reader pins the image it
 * last used (until it moves to another file or calls feed_reader_release).
 * A reader that misses marks the file `loading` and reserves its size under
 * the mutex, then inflates outside it, straight into one buffer of the size
 * the scan recorded; readers that want a loading file wait on the cache's
 * condition variable. Before reserving, unpinned images are evicted, least
 * recently used first, until the new image fits in cache_bytes with every
 * image held or being inflated counted; when pinned and loading images leave
 * no room, the reader waits for one to be let go (it holds no pin itself
 * then, so every pin it waits on belongs to a reader that is not waiting).
 * A file fits alone, as the scan refuses files over max_file_bytes <=
 * cache_bytes.
 *
 * Scan cache (feed_scan_cache.h): with a cache directory, a scan thread
 * first stats the file and looks for its entry; a hit stands in for the
 * scan, and the file is marked so its records are checked as they are read
 * (the frame's verify), as the cache's checksums find damage but do not
 * prove the entry came from this file's bytes. A miss scans, then writes
 * the entry if the file's identity was the same before and after the scan
 * and its timestamps are older than the settle time (git's "racily clean"
 * problem: a change within one timestamp tick of the scan would go unseen).
 */
#include "feed_source.h"

#include "feed_diskcache.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "feed_scan_cache.h"
#include "feed_source_impl.h"
#include "fmt_stream.h"
#include "sl_alloc.h"
#include "sl_clock.h"
#include "sl_thread.h"
#include "sto.h"

#define DEFAULT_CACHE ((size_t)1 << 30)
#define DEFAULT_SETTLE_MS 2000u

/* What the scan cache did for a file (struct file's cache_state). */
enum { CACHE_NONE = 0, CACHE_HIT, CACHE_WRITTEN, CACHE_UNWRITTEN, CACHE_RECENT };

static int map_file(struct file *f, struct sl_error *err)
{
    const char *path = sto_local_path(f->path); /* "file://" dropped */
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return sl_error_sys(err, errno, "open(%s)", path);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int rc = sl_error_sys(err, errno, "fstat(%s)", f->path);
        close(fd);
        return rc;
    }
    if ((uint64_t)st.st_size != f->image_size) {
        close(fd);
        return sl_error_set(err, SL_ECORRUPT, "%s: file changed size since it was scanned (%llu, now %llu bytes)",
                            f->path, (unsigned long long)f->image_size, (unsigned long long)st.st_size);
    }
    if (st.st_size > 0) {
        void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            int rc = sl_error_sys(err, errno, "mmap(%s)", f->path);
            close(fd);
            return rc;
        }
        /* after a scan its pages are mostly in memory and this is cheap; a
         * file taken from the scan cache may have none there, and asking
         * for all of them now would read every file before serving, the
         * very cost the cache saves: its pages come as records are read */
        if (!f->verify)
            madvise(m, (size_t)st.st_size, MADV_WILLNEED);
        f->img.data = m;
    }
    close(fd);
    f->img.size = (size_t)st.st_size;
    f->img.mapped = 1;
    return 0;
}

static int64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A remote file (or, under test_whole_read, any single local one): its
 * size and ETag now, before the scan reads it. *keep: the source it was
 * taken from, still open, for the scan to read (the caller closes it). */
static int take_identity(struct file *f, struct sto_src **keep, struct sl_error *err)
{
    struct sto_src *src;
    *keep = NULL;
    int rc = sto_open(&src, f->path, err);
    if (rc != 0)
        return rc;
    f->src_size = src->size;
    f->src_mtime_ns = src->mtime_ns;
    f->etag = sl_strdup(src->etag);
    if (f->etag == NULL) {
        sto_close(src);
        return sl_error_set(err, SL_ENOMEM, "%s: out of memory", f->path);
    }
    *keep = src;
    return 0;
}

static int has_index(const struct feed_source *s, struct file *f)
{
    if (!s->o.use_index || s->o.format != FMT_FORMAT_TFRECORD)
        return 0;
    char idx[4096];
    if (snprintf(idx, sizeof idx, "%s.idx", f->path) >= (int)sizeof idx)
        return 0;
    if (!sto_is_remote(f->path))
        return fmt_file_readable(idx);
    if (f->idx_state == IDX_UNKNOWN) {
        struct sl_error why = {0};
        int found = fmt_index_find(idx, &f->idx, &f->nidx, &why);
        f->idx_state = found > 0 ? IDX_FOUND : found == 0 ? IDX_NONE : IDX_BAD;
    }
    return f->idx_state != IDX_NONE;
}

/* What has_index found of a remote file's index, for its scan; freed. */
static void index_hint(struct file *f, struct fmt_scan_opts *so)
{
    so->index_known = f->idx_state == IDX_NONE || f->idx_state == IDX_FOUND;
    so->index_found = f->idx_state == IDX_FOUND;
    so->index = f->idx;
    so->nindex = f->nidx;
}

static void index_drop(struct file *f)
{
    sl_free(f->idx);
    f->idx = NULL;
    f->nidx = 0;
    f->idx_state = IDX_UNKNOWN;
}

static void cache_report(struct feed_source *s, const char *path, const struct sl_error *why)
{
    if (s->o.on_cache != NULL)
        s->o.on_cache(s->o.ctx, path, why);
}

/* A file's identity for the scan cache: a local file's stat, a remote
 * one's from its open (take_identity); 0 when it has one. */
static int cache_id(const struct file *f, struct feed_file_id *id)
{
    struct sl_error why = {0};
    if (f->etag != NULL)
        return feed_file_id_remote(f->src_size, f->etag, f->src_mtime_ns, id) == 0 ? 0 : -1;
    return feed_file_id_get(sto_local_path(f->path), id, &why) == 0 ? 0 : -1;
}

/* The cache's name of a file: a local file's path ("file://" dropped), a
 * remote one's URL. */
static const char *cache_name(const struct file *f)
{
    return f->etag != NULL ? f->path : sto_local_path(f->path);
}

/* The file's entry, when it has a good one: 1 and f->scan; 0 otherwise
 * (with *id its identity, *have_id whether it could be taken). */
static int cache_take(struct feed_source *s, struct file *f, struct feed_file_id *id, int *have_id)
{
    struct sl_error why = {0};
    const char *path = cache_name(f);
    *have_id = cache_id(f, id) == 0;
    if (!*have_id) /* the scan says why */
        return 0;
    int rc = feed_scan_cache_load(s->cache, path, id, &f->scan, &why);
    if (rc == 0) {
        f->cache_state = CACHE_HIT;
        f->verify = 1;
        return 1;
    }
    if (rc == SL_ECORRUPT || rc == SL_EIO) {
        f->cache_damaged = 1;
        sl_error_prefix(&why, "scan cache: ignored, %s scanned again: ", f->path);
        cache_report(s, f->path, &why);
    }
    return 0;
}

/* After a scan of a file whose identity was `id` when it began at `t0`:
 * write its entry when nothing may have changed unseen. */
static void cache_put(struct feed_source *s, struct file *f, const struct feed_file_id *id, int64_t t0)
{
    int64_t settle = (int64_t)(s->o.scan_cache_settle_ms ? s->o.scan_cache_settle_ms : DEFAULT_SETTLE_MS) * 1000000;
    int64_t mtime = id->mtime_s * 1000000000 + id->mtime_ns, ctime = id->ctime_s * 1000000000 + id->ctime_ns;
    struct feed_file_id after;
    struct sl_error why = {0};
    const char *path = cache_name(f);
    int changed;
    if (f->etag != NULL) { /* the object opened again: the same one */
        struct sto_src *src;
        changed = sto_open(&src, f->path, &why) != 0;
        if (!changed) {
            changed = feed_file_id_remote(src->size, src->etag, src->mtime_ns, &after) != 0 ||
                      !feed_file_id_equal(id, &after);
            sto_close(src);
        }
    } else
        changed = mtime >= t0 - settle || ctime >= t0 - settle || feed_file_id_get(path, &after, &why) != 0 ||
                  !feed_file_id_equal(id, &after);
    if (changed) {
        f->cache_state = CACHE_RECENT;
        return;
    }
    if (feed_scan_cache_store(s->cache, path, id, f->scan, &why) == 0) {
        f->cache_state = CACHE_WRITTEN;
        return;
    }
    f->cache_state = CACHE_UNWRITTEN;
    if (atomic_exchange(&s->cache_warned, 1) == 0) {
        sl_error_prefix(&why, "scan cache: cannot write the entry of %s (later failures are only counted): ", f->path);
        cache_report(s, f->path, &why);
    }
}

/* Scan one file through its format (or take its scan from the cache):
 * count records, keep where each lies, learn its compression and
 * decompressed size; map it when it is plain. */
/* The scan is over (rc its result): keep the copy as the file's image, or
 * give its room back. */
static void capture_end(struct feed_source *s, struct file *f, struct sto_capture *cap, int rc)
{
    if (cap->cap == 0)
        return;
    int keep = rc == 0 && cap->buf != NULL && cap->upto == cap->cap && fmt_scan_compression(f->scan) == FMT_COMP_NONE &&
               fmt_scan_image_bytes(f->scan) == cap->cap;
    pthread_mutex_lock(&s->mu);
    if (keep) {
        f->img.data = cap->buf;
        f->img.size = (size_t)cap->cap;
        f->img.used = ++s->clock;
        s->captured++;
    } else {
        s->cached -= (size_t)cap->cap;
        sl_free(cap->buf);
    }
    pthread_mutex_unlock(&s->mu);
    cap->buf = NULL;
    cap->cap = 0;
}

/* No copy: a remote file's scan reads through its identity's source; a
 * local one's (test_whole_read) opens it by name, as it always did. */
static int plain_scan(const struct file *f, struct sto_src **source)
{
    if (!sto_is_remote(f->path)) {
        sto_close(*source);
        *source = NULL;
    }
    return 0;
}

/* A remote file the scan reads whole (a TFRecord or text file, no index)
 * is read once: its bytes are copied as they stream past the scan into a
 * buffer counted in the cache, and become its cached image when the scan
 * finds it uncompressed and read to its end (capture_end). Only when the
 * cache has room for it without evicting (the scan threads never evict:
 * another one may be mapping its file); otherwise it is read again on its
 * first access. *ident: the source its identity was taken from (open),
 * taken from the caller here (NULL after): the scan reads through it,
 * copied or not. *source: what the scan reads through (NULL: its name). */
static int capture_begin(struct feed_source *s, struct file *f, struct sto_capture *cap, struct sto_src **ident,
                         struct sto_src **source, struct sl_error *err)
{
    *source = NULL;
    if (s->o.format != FMT_FORMAT_TFRECORD && s->o.format != FMT_FORMAT_TEXT) {
        sto_close(*ident); /* the other formats open their files by name */
        *ident = NULL;
        return 0;
    }
    *source = *ident;
    *ident = NULL;
    if (has_index(s, f) || f->src_size == 0 || f->src_size > s->max_file)
        return plain_scan(f, source);
    pthread_mutex_lock(&s->mu);
    int room = s->cached + f->src_size <= s->o.cache_bytes;
    if (room)
        s->cached += (size_t)f->src_size;
    pthread_mutex_unlock(&s->mu);
    if (!room)
        return plain_scan(f, source);
    struct sto_src *src = *source; /* the copy reads through it */
    *source = NULL;
    int rc = 0;
    if ((cap->buf = sl_malloc((size_t)f->src_size)) == NULL)
        rc = sl_error_set(err, SL_ENOMEM, "%s: out of memory for %llu bytes", f->path, (unsigned long long)f->src_size);
    else
        rc = feed__check_identity(f, src, err); /* the same open: always the same object, kept as a guard */
    if (rc != 0)
        sto_close(src);
    cap->cap = f->src_size;
    if (rc == 0 && (rc = sto_capture_open(source, src, cap, err)) == 0)
        return 0;
    capture_end(s, f, cap, rc);
    return rc;
}

static int scan_file(struct feed_source *s, struct file *f, struct sl_error *err)
{
    struct fmt_scan_opts so = {.compression = s->o.compression,
                               .max_record_bytes = s->o.max_record_bytes,
                               .max_output = s->max_file,
                               .skip_crc = s->o.count_only,
                               .use_index = s->o.use_index,
                               .stop = s->o.stop};
    struct feed_file_id id;
    int have_id = 0, rc = 0; /* a cache hit on a compressed file reaches the end without setting it */
    int64_t t0 = realtime_ns();
    int remote = f->nmembers == 1 && (sto_is_remote(f->path) || s->o.test_whole_read);
    /* its records may be read by range: the scan takes their offsets from its index */
    int indexed = remote && s->ops->frame_at != NULL && has_index(s, f);
    struct sto_src *ident = NULL; /* the source the identity came from: the scan reads through it */
    if (remote && (rc = take_identity(f, &ident, err)) != 0)
        return rc;
    struct feed_file_id rid;
    int cacheable =
        s->cache != NULL && (!remote || cache_id(f, &rid) == 0) && !has_index(s, f) && s->ops->scan_group == NULL;
    if (s->ops->scan_group != NULL) { /* groups of arrays: the scan reads headers and sizes only */
        so.specs = s->o.specs;
        so.nspecs = s->o.specs != NULL ? s->o.nspecs : 0;
        if ((rc = s->ops->scan_group(&f->scan, f->members, f->nmembers, &so, err)) != 0) {
            sto_close(ident);
            return rc;
        }
    } else if (!cacheable || !cache_take(s, f, &id, &have_id)) {
        struct sto_capture cap = {0};
        if (ident != NULL && (rc = capture_begin(s, f, &cap, &ident, &so.source, err)) != 0) {
            index_drop(f);
            return rc;
        }
        if (sto_is_remote(f->path)) {
            has_index(s, f); /* looked for once: the scan takes what it found */
            index_hint(f, &so);
        }
        rc = s->ops->scan(&f->scan, f->path, &so, err);
        index_drop(f);
        capture_end(s, f, &cap, rc);
        if (rc != 0)
            return rc;
        if (cacheable && have_id)
            cache_put(s, f, &id, t0);
    }
    sto_close(ident); /* not taken by a scan (a cache hit, a group) */
    index_drop(f);
    f->count = fmt_scan_count(f->scan);
    f->comp = fmt_scan_compression(f->scan);
    f->image_size = fmt_scan_image_bytes(f->scan);
    /* a group of several arrays is one image made of several files:
     * loaded into the cache as a compressed file is */
    if (fmt_scan_parts(f->scan) > 1 && f->comp == FMT_COMP_NONE)
        f->comp = FMT_COMP_AUTO;
    if (fmt_scan_parts(f->scan) > 1 && f->image_size > s->max_file) {
        rc = sl_error_set(err, SL_EINVAL,
                          "%s: its group of %zu arrays holds %llu bytes, more than the %llu a group may hold in the "
                          "cache (inflate_cache_bytes)",
                          f->path, fmt_scan_parts(f->scan), (unsigned long long)f->image_size,
                          (unsigned long long)s->max_file);
        fmt_scan_free(f->scan);
        f->scan = NULL;
        f->count = 0;
        return rc;
    }
    if (remote && f->comp == FMT_COMP_NONE) {
        /* read by range, or whole into the cache as a compressed file is inflated */
        int big = f->count > 0 && f->image_size / f->count >= FEED_RANGES_BIG_RECORD;
        f->ranged = indexed && (s->o.remote_ranges == FEED_RANGES_ALL || f->image_size > s->max_file ||
                                (s->o.remote_ranges == FEED_RANGES_BIG && big));
        f->whole = !f->ranged;
        if (f->image_size != f->src_size)
            rc = sl_error_set(err, SL_ECORRUPT, "%s: changed while it was scanned (%llu bytes, then %llu)", f->path,
                              (unsigned long long)f->src_size, (unsigned long long)f->image_size);
        else if (!f->ranged && f->image_size > s->max_file)
            rc = sl_error_set(err, SL_EINVAL,
                              "%s: %llu bytes, more than the %llu a remote file may hold in the cache "
                              "(inflate_cache_bytes); with an index (FILE.idx: sluice-record index) and use_index "
                              "its records are read by range instead",
                              f->path, (unsigned long long)f->image_size, (unsigned long long)s->max_file);
    } else if (f->comp == FMT_COMP_NONE) {
        rc = map_file(f, err);
    }
    if (rc != 0) {
        fmt_scan_free(f->scan);
        f->scan = NULL;
        f->count = 0;
        f->ranged = 0;
    }
    return rc;
}

/* A file the scan could not take, with why (kept only for those: a
 * message per file would cost 1 KiB a file for datasets of many files). */
struct scan_failure {
    size_t file;
    struct sl_error err;
};

/* The scan's shared state: files are taken in order under the mutex. */
struct scan_ctl {
    struct feed_source *s;
    int *rcs;
    struct scan_failure *failed; /* in completion order */
    size_t nfailed, cap;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t next, done, running;
    uint64_t bytes, records;
    int halt; /* a fatal error or a stop: take no more files */
};

/* Called with the mutex held. */
static int add_failure(struct scan_ctl *c, size_t file, const struct sl_error *e)
{
    if (c->nfailed == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 8;
        struct scan_failure *f = sl_realloc(c->failed, cap * sizeof *f);
        if (f == NULL)
            return -1;
        c->failed = f;
        c->cap = cap;
    }
    c->failed[c->nfailed++] = (struct scan_failure){.file = file, .err = *e};
    return 0;
}

static int by_file(const void *a, const void *b)
{
    size_t x = ((const struct scan_failure *)a)->file, y = ((const struct scan_failure *)b)->file;
    return x < y ? -1 : x > y;
}

static void *scan_worker(void *arg)
{
    struct scan_ctl *c = arg;
    struct feed_source *s = c->s;
    pthread_mutex_lock(&c->mu);
    while (!c->halt && c->next < s->nfiles) {
        size_t i = c->next++;
        pthread_mutex_unlock(&c->mu);
        struct file *f = &s->files[i];
        struct sl_error e = {0};
        int rc = s->o.stop != NULL && *s->o.stop ? sl_error_set(&e, SL_ECLOSED, "%s: scan interrupted", f->path)
                                                 : scan_file(s, f, &e);
        pthread_mutex_lock(&c->mu);
        if (rc != 0 && add_failure(c, i, &e) != 0)
            rc = SL_ENOMEM; /* no room to say why: stop the scan */
        c->rcs[i] = rc;
        c->done++;
        c->bytes += f->image_size;
        c->records += f->count;
        if (rc == SL_ENOMEM || rc == SL_ECLOSED || (rc != 0 && s->o.on_error == FMT_ON_ERROR_FAIL))
            c->halt = 1;
        pthread_cond_signal(&c->cv);
    }
    c->running--;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* Scan every file with up to scan_threads threads, calling on_progress
 * from this thread. Files are taken in order, so when a fatal error or a stop halts
 * the scan, every file before the last one taken has its result; the
 * files never taken keep rcs 0 and are not looked at (an earlier one
 * failed), except after a stop, where the first of them says so. */
static int scan_all(struct feed_source *s, int *rcs, struct scan_failure **failed, size_t *nfailed,
                    struct sl_error *err)
{
    struct scan_ctl c = {.s = s, .rcs = rcs};
    unsigned want = s->o.scan_threads ? s->o.scan_threads : 1;
    if (want > 64)
        want = 64;
    if (s->nfiles < want)
        want = s->nfiles ? (unsigned)s->nfiles : 1;
    pthread_t th[64];
    pthread_mutex_init(&c.mu, NULL);
    pthread_cond_init(&c.cv, NULL);
    unsigned started = 0;
    pthread_mutex_lock(&c.mu);
    for (unsigned k = 0; k < want; k++) {
        c.running++;
        if (sl_thread_start(&th[k], scan_worker, &c) != 0) {
            c.running--;
            break;
        }
        started++;
    }
    int rc = started == 0 ? sl_error_set(err, SL_EIO, "cannot start a scan thread") : 0;
    unsigned every = s->o.progress_ms ? s->o.progress_ms : 2000;
    uint64_t next = sl_clock_ns() + (uint64_t)every * 1000000u;
    while (c.running > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 200 * 1000000L; /* wake 5 times a second: stop flag, progress */
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&c.cv, &c.mu, &ts);
        if (s->o.stop != NULL && *s->o.stop)
            c.halt = 1;
        uint64_t now = sl_clock_ns();
        if (now >= next && s->o.on_progress != NULL && c.running > 0) {
            size_t done = c.done;
            uint64_t bytes = c.bytes, records = c.records;
            pthread_mutex_unlock(&c.mu);
            s->o.on_progress(s->o.ctx, done, s->nfiles, bytes, records);
            pthread_mutex_lock(&c.mu);
            next = now + (uint64_t)every * 1000000u;
        }
    }
    size_t taken = c.next;
    pthread_mutex_unlock(&c.mu);
    for (unsigned k = 0; k < started; k++)
        pthread_join(th[k], NULL);
    pthread_mutex_destroy(&c.mu);
    pthread_cond_destroy(&c.cv);
    if (rc == 0 && taken < s->nfiles && s->o.stop != NULL && *s->o.stop) {
        struct sl_error e = {0};
        rcs[taken] = sl_error_set(&e, SL_ECLOSED, "%s: scan interrupted", s->files[taken].path);
        if (add_failure(&c, taken, &e) != 0)
            rc = sl_error_set(err, SL_ENOMEM, "out of memory");
    }
    /* in file order, for the caller's walk */
    if (c.nfailed > 1)
        qsort(c.failed, c.nfailed, sizeof *c.failed, by_file);
    *failed = c.failed;
    *nfailed = c.nfailed;
    return rc;
}

int feed_source_open(struct feed_source **out, const char *const *paths, size_t npaths,
                     const struct feed_source_opts *opts, struct sl_error *err)
{
    *out = NULL;
    static const struct feed_source_opts defaults; /* all zero: the defaults */
    if (opts == NULL)
        opts = &defaults;
    const struct fmt_format_ops *ops = fmt_format_get(opts->format);
    if (ops == NULL)
        return sl_error_set(err, SL_EINVAL, "format %d is not a format", (int)opts->format);
    struct feed_source *s = sl_calloc(1, sizeof *s);
    if (s == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    s->o = *opts;
    s->ops = ops;
    if (s->o.cache_bytes == 0)
        s->o.cache_bytes = DEFAULT_CACHE;
    if (s->o.max_record_bytes == 0)
        s->o.max_record_bytes = FMT_DEFAULT_MAX_RECORD_BYTES;
    s->max_file =
        s->o.max_file_bytes == 0 || s->o.max_file_bytes > s->o.cache_bytes ? s->o.cache_bytes : s->o.max_file_bytes;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    atomic_init(&s->cache_warned, 0);
    if (s->o.scan_cache != NULL) {
        struct feed_scan_key key = {.format = s->o.format,
                                    .compression = s->o.compression,
                                    .max_record_bytes = s->o.max_record_bytes,
                                    .count_only = s->o.count_only,
                                    .max_file = s->max_file};
        struct sl_error why = {0};
        if (feed_scan_cache_open(&s->cache, s->o.scan_cache, &key, &why) != 0) {
            struct sl_error w = {0};
            sl_error_set(&w, why.code, "%s; every file is scanned, none cached", why.msg);
            cache_report(s, s->o.scan_cache, &w);
        }
    }
    size_t group = s->o.group_size ? s->o.group_size : 1;
    if (npaths % group != 0 || (group > 1 && ops->scan_group == NULL)) {
        feed_source_close(s);
        return sl_error_set(err, SL_EINVAL, "%zu paths do not make groups of %zu (format %s)", npaths, group,
                            ops->name);
    }
    npaths /= group;
    s->nfiles = npaths;
    s->files = sl_calloc(npaths ? npaths : 1, sizeof *s->files);
    s->counts = sl_calloc(npaths ? npaths : 1, sizeof *s->counts);
    if (s->files == NULL || s->counts == NULL) {
        feed_source_close(s);
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < npaths; i++) {
        s->files[i].path = paths[i * group];
        s->files[i].members = paths + i * group;
        s->files[i].nmembers = group;
    }
    /* scan (threads take the files in order), then take the results in
     * file order: the first damaged file under `fail` is the one reported,
     * whatever finished first */
    int *rcs = sl_calloc(npaths ? npaths : 1, sizeof *rcs);
    if (rcs == NULL) {
        feed_source_close(s);
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    }
    struct scan_failure *failed = NULL;
    size_t nfailed = 0, next_failed = 0;
    int rc = scan_all(s, rcs, &failed, &nfailed, err);
    for (size_t i = 0; rc == 0 && i < npaths; i++) {
        struct file *f = &s->files[i];
        if (rcs[i] != 0) {
            /* failures are sorted by file: this one's is the next */
            struct sl_error why = {0};
            if (next_failed < nfailed && failed[next_failed].file == i)
                why = failed[next_failed++].err;
            else
                sl_error_set(&why, rcs[i], "%s: out of memory for the scan's error", f->path);
            if (s->o.on_error == FMT_ON_ERROR_FAIL || rcs[i] == SL_ENOMEM || rcs[i] == SL_ECLOSED) {
                *err = why;
                rc = rcs[i];
                break;
            }
            if (s->o.on_skip)
                s->o.on_skip(s->o.ctx, f->path, &why);
            continue;
        }
        uint64_t tail = fmt_scan_dropped_tail(f->scan);
        if (tail > 0 && s->o.on_tail)
            s->o.on_tail(s->o.ctx, f->path, tail);
        s->counts[i] = f->count;
        s->total_bytes += f->image_size;
        for (size_t k = 0; k < f->nmembers; k++) {
            struct stat dst;
            const char *local = sto_local_path(f->members[k]);
            if (f->etag != NULL)
                s->disk_bytes += f->src_size;
            else if (local != NULL && stat(local, &dst) == 0)
                s->disk_bytes += (uint64_t)dst.st_size;
        }
    }
    sl_free(failed);
    sl_free(rcs);
    if (rc == 0 && s->o.disk_cache_dir != NULL)
        rc = feed_diskcache_open(&s->disk, s->o.disk_cache_dir,
                                 s->o.disk_cache_bytes ? s->o.disk_cache_bytes : (uint64_t)10 << 30, err);
    int ranged = 0;
    for (size_t i = 0; rc == 0 && i < npaths; i++)
        ranged |= s->files[i].ranged && s->files[i].count > 0;
    if (rc == 0 && ranged)
        rc = feed__fetcher_create(&s->fetcher, s, s->o.remote_requests ? s->o.remote_requests : 8, err);
    if (rc != 0) {
        feed_source_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

void feed_source_close(struct feed_source *s)
{
    if (s == NULL)
        return;
    feed__fetcher_destroy(s->fetcher);
    feed_diskcache_close(s->disk);
    for (size_t i = 0; s->files && i < s->nfiles; i++) {
        struct file *f = &s->files[i];
        if (f->img.mapped && f->img.data)
            munmap(f->img.data, f->img.size);
        else
            sl_free(f->img.data);
        fmt_scan_free(f->scan);
        sl_free(f->etag);
    }
    feed_scan_cache_close(s->cache);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    sl_free(s->files);
    sl_free(s->counts);
    sl_free(s);
}

size_t feed_source_nfiles(const struct feed_source *s)
{
    return s->nfiles;
}

uint64_t feed_source_count(const struct feed_source *s, size_t i)
{
    return s->counts[i];
}

const uint64_t *feed_source_counts(const struct feed_source *s)
{
    return s->counts;
}

uint64_t feed_source_disk_bytes(const struct feed_source *s)
{
    return s->disk_bytes;
}

size_t feed_source_captured(const struct feed_source *s)
{
    return s->captured;
}

uint64_t feed_source_total_bytes(const struct feed_source *s)
{
    return s->total_bytes;
}

void feed_source_disk_cache_stats(const struct feed_source *s, struct feed_diskcache_stats *out)
{
    *out = (struct feed_diskcache_stats){0};
    if (s->disk != NULL)
        feed_diskcache_stats(s->disk, out);
}

size_t feed_source_ranged(const struct feed_source *s)
{
    size_t n = 0;
    for (size_t i = 0; i < s->nfiles; i++)
        n += s->files[i].ranged;
    return n;
}

const char *feed_source_path(const struct feed_source *s, size_t i)
{
    return s->files[i].path;
}

void feed_source_cache_stats(const struct feed_source *s, struct feed_source_cache_stats *out)
{
    *out = (struct feed_source_cache_stats){0};
    if (s->cache == NULL)
        return;
    for (size_t i = 0; i < s->nfiles; i++) {
        const struct file *f = &s->files[i];
        out->hits += f->cache_state == CACHE_HIT;
        out->scanned += f->cache_state != CACHE_HIT;
        out->damaged += f->cache_damaged;
        out->written += f->cache_state == CACHE_WRITTEN;
        out->unwritten += f->cache_state == CACHE_UNWRITTEN;
        out->recent += f->cache_state == CACHE_RECENT;
    }
}

uint64_t feed_source_offset(const struct feed_source *s, size_t file, uint64_t rec)
{
    return s->files[file].scan ? fmt_scan_offset(s->files[file].scan, rec) : 0;
}
