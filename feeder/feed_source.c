/* feed_source: the scan at open, the per-file record offsets, and the
 * image cache.
 *
 * Each file has an "image": its decompressed bytes. For an uncompressed
 * file the image is an mmap made at open and kept; for a compressed file it
 * is inflated on demand into the cache. Records are found by offset in the
 * image: TFRecord at the record's framing start (length, CRCs checked on
 * access), text at the line start (up to the next '\n'; '\r's removed into
 * the reader's scratch).
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
 */
#include "feed_source.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fmt_index.h"
#include "fmt_tar.h"
#include "fmt_stream.h"
#include "fmt_tfrecord.h"
#include "sl_alloc.h"
#include "sl_clock.h"

#define DEFAULT_CACHE ((size_t)1 << 30)

struct image {
    uint8_t *data;
    size_t size;
    int mapped;     /* mmap (never evicted) vs inflated (cached) */
    int pins;
    uint64_t used;  /* LRU clock */
};

/* A tar member's data inside the file's image. */
struct tar_field {
    uint32_t ext;   /* index into the source's extension names */
    uint64_t off, len;
};

struct file {
    const char *path;
    enum fmt_compression comp;
    uint64_t count;
    uint64_t *offsets;  /* count entries; tar: count + 1 indices into fields */
    struct tar_field *fields; /* tar: every regular member, in order */
    uint64_t image_size; /* decompressed size */
    struct image img;   /* img.data NULL while not loaded */
    int loading;        /* a reader is inflating it (its size is reserved in `cached`) */
    uint64_t dropped_tail; /* bytes of a partial header at the end (reported after the scan) */
};

#define MAX_EXTS 256
#define MAX_EXT_LEN 64

struct feed_source {
    struct feed_source_opts o;
    size_t nfiles;
    struct file *files;
    char exts[MAX_EXTS][MAX_EXT_LEN]; /* tar field names seen (set during the scan, read-only after) */
    size_t nexts;
    uint64_t *counts;
    uint64_t total_bytes;
    uint64_t disk_bytes; /* the files' sizes on disk */
    uint64_t max_file;  /* most bytes a compressed file may inflate to */
    pthread_mutex_t mu;
    pthread_cond_t cv;  /* an image loaded or failed, a pin let go */
    size_t cached;      /* bytes of inflated images held or being inflated */
    uint64_t clock;
};

struct feed_reader {
    struct feed_source *s;
    struct file *pinned;
    struct sl_buf scratch;
    struct feed_field fields[FEED_MAX_FIELDS];
    uint64_t inflate_cpu_ns, inflate_wall_ns; /* time spent inflating files */
};

static int map_file(struct file *f, struct sl_error *err)
{
    int fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return sl_error_sys(err, errno, "open(%s)", f->path);
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
        madvise(m, (size_t)st.st_size, MADV_WILLNEED);
        f->img.data = m;
    }
    close(fd);
    f->img.size = (size_t)st.st_size;
    f->img.mapped = 1;
    return 0;
}

/* Take a TFRecord file's offsets from FILE.idx when it exists. Returns 1
 * when the index was used, 0 when there is none, or an error (a malformed
 * index, or one that does not fit the file). */
static int load_index(struct feed_source *s, struct file *f, struct sl_error *err)
{
    char idx[4096];
    if (snprintf(idx, sizeof idx, "%s.idx", f->path) >= (int)sizeof idx || access(idx, R_OK) != 0)
        return 0;
    struct fmt_index_entry *e;
    size_t n;
    int rc = fmt_index_load(idx, &e, &n, err);
    if (rc != 0)
        return rc;
    /* the compression and the decompressed size: open the stream once */
    struct fmt_stream_opts so = {.compression = s->o.compression, .plain_probe = fmt_tfrecord_looks_plain};
    struct fmt_stream *st;
    if ((rc = fmt_stream_open(&st, f->path, &so, err)) != 0) {
        sl_free(e);
        return rc;
    }
    f->comp = fmt_stream_compression(st);
    fmt_stream_close(st);
    uint64_t end = n ? e[n - 1].offset + e[n - 1].size : 0;
    f->offsets = sl_malloc((n ? n : 1) * sizeof *f->offsets);
    if (f->offsets == NULL) {
        sl_free(e);
        return sl_error_set(err, SL_ENOMEM, "%s: out of memory for %zu record offsets", idx, n);
    }
    for (size_t i = 0; i < n; i++) {
        if (e[i].size - 16 > s->o.max_record_bytes) {
            rc = sl_error_set(err, SL_ECORRUPT, "%s:%zu: record of %llu bytes exceeds max_record_bytes %zu", idx,
                              i + 1, (unsigned long long)e[i].size, s->o.max_record_bytes);
            break;
        }
        f->offsets[i] = e[i].offset;
    }
    sl_free(e);
    if (rc != 0) {
        sl_free(f->offsets);
        f->offsets = NULL;
        return rc;
    }
    if (f->comp != FMT_COMP_NONE && end > s->max_file) {
        sl_free(f->offsets);
        f->offsets = NULL;
        return sl_error_set(err, SL_ECORRUPT, "%s: inflates to %llu bytes by its index, over the per-file limit of "
                                              "%llu (max_file_bytes, at most the cache bound)",
                            f->path, (unsigned long long)end, (unsigned long long)s->max_file);
    }
    f->count = n;
    f->image_size = end;
    if (f->comp == FMT_COMP_NONE) {
        struct stat stt;
        if (stat(f->path, &stt) == 0 && (uint64_t)stt.st_size != end) {
            sl_free(f->offsets);
            f->offsets = NULL;
            f->count = 0;
            return sl_error_set(err, SL_ECORRUPT, "%s: the index covers %llu bytes, the file holds %llu (rebuild it "
                                                  "with sluice-record index)",
                                idx, (unsigned long long)end, (unsigned long long)stt.st_size);
        }
        if ((rc = map_file(f, err)) != 0)
            return rc;
    }
    return 1;
}

static int ext_id(struct feed_source *s, const char *ext, uint32_t *id, const char *path, struct sl_error *err)
{
    for (size_t i = 0; i < s->nexts; i++)
        if (strcmp(s->exts[i], ext) == 0) {
            *id = (uint32_t)i;
            return 0;
        }
    if (s->nexts == MAX_EXTS || strlen(ext) >= MAX_EXT_LEN)
        return sl_error_set(err, SL_EINVAL, "%s: more than %d field names, or a name of %d bytes or more ('%s')",
                            path, MAX_EXTS, MAX_EXT_LEN, ext);
    snprintf(s->exts[s->nexts], MAX_EXT_LEN, "%s", ext);
    *id = (uint32_t)s->nexts++;
    return 0;
}

/* A tar shard: every regular member is located (fmt_tar walks the headers
 * and reads the data through without keeping it), and members are grouped
 * into samples by key, as fmt_tar does. A member over max_record_bytes is
 * refused from its header. */
static int scan_tar(struct feed_source *s, struct file *f, struct sl_error *err)
{
    struct fmt_tar_opts to = {.max_member_bytes = s->o.max_record_bytes, .max_fields = FEED_MAX_FIELDS,
                              .compression = s->o.compression, .max_output = s->max_file};
    struct fmt_tar *t;
    int rc = fmt_tar_open(&t, f->path, &to, err);
    if (rc != 0)
        return rc;
    f->comp = fmt_tar_compression(t);
    size_t cap = 0, ncap = 0, nfields = 0;
    char key[4096] = "";
    size_t sample_start = 0;
    struct fmt_tar_member m;
    while ((rc = fmt_tar_next_member(t, &m, err)) == 0) {
        const char *path = m.path, *ext;
        size_t klen = fmt_tar_split_key(path, &ext);
        int new_sample = f->count == 0 || klen != strlen(key) || strncmp(path, key, klen) != 0;
        if (new_sample) {
            if (klen >= sizeof key) {
                rc = sl_error_set(err, SL_EINVAL, "%s: key of member '%s' is too long (at byte %llu)", f->path,
                                  path, (unsigned long long)m.header_offset);
                goto out;
            }
            memcpy(key, path, klen);
            key[klen] = '\0';
            if (f->count + 2 > cap) {
                size_t c2 = cap ? cap * 2 : 1024;
                uint64_t *no = sl_realloc(f->offsets, c2 * sizeof *no);
                if (no == NULL) {
                    rc = sl_error_set(err, SL_ENOMEM, "out of memory");
                    goto out;
                }
                f->offsets = no;
                cap = c2;
            }
            f->offsets[f->count++] = nfields;
            sample_start = nfields;
        }
        uint32_t id = 0;
        if ((rc = ext_id(s, ext, &id, f->path, err)) != 0)
            goto out;
        for (size_t k = sample_start; k < nfields; k++)
            if (f->fields[k].ext == id) {
                rc = sl_error_set(err, SL_ECORRUPT,
                                  "%s: repeated extension '%s' in sample '%s' (member '%s', at byte %llu)", f->path,
                                  ext, key, path, (unsigned long long)m.header_offset);
                goto out;
            }
        if (nfields - sample_start >= FEED_MAX_FIELDS) {
            rc = sl_error_set(err, SL_EINVAL, "%s: sample '%s' has more than %d fields (member '%s', at byte %llu)",
                              f->path, key, FEED_MAX_FIELDS, path, (unsigned long long)m.header_offset);
            goto out;
        }
        if (nfields == ncap) {
            size_t c2 = ncap ? ncap * 2 : 1024;
            struct tar_field *nf = sl_realloc(f->fields, c2 * sizeof *nf);
            if (nf == NULL) {
                rc = sl_error_set(err, SL_ENOMEM, "out of memory");
                goto out;
            }
            f->fields = nf;
            ncap = c2;
        }
        f->fields[nfields++] = (struct tar_field){.ext = id, .off = m.data_offset, .len = m.size};
    }
    if (rc != SL_END)
        goto out;
    rc = 0;
    if (f->count == 0 && (f->offsets = sl_malloc(sizeof *f->offsets)) == NULL) {
        rc = sl_error_set(err, SL_ENOMEM, "out of memory");
        goto out;
    }
    f->offsets[f->count] = nfields; /* the end of the last sample */
    if (f->comp == FMT_COMP_NONE) {
        struct stat stt;
        if (stat(f->path, &stt) != 0) {
            rc = sl_error_sys(err, errno, "stat(%s)", f->path);
            goto out;
        }
        f->image_size = (uint64_t)stt.st_size;
        rc = map_file(f, err);
    } else {
        f->image_size = fmt_tar_stream_bytes(t);
    }
out:
    fmt_tar_close(t);
    if (rc != 0) {
        sl_free(f->offsets);
        sl_free(f->fields);
        f->offsets = NULL;
        f->fields = NULL;
        f->count = 0;
    }
    return rc;
}

/* Scan one file: count records, keep offsets, learn its compression and
 * decompressed size. */
static int scan_file(struct feed_source *s, struct file *f, struct sl_error *err)
{
    if (s->o.format == FMT_FORMAT_TAR)
        return scan_tar(s, f, err);
    if (s->o.use_index && s->o.format == FMT_FORMAT_TFRECORD) {
        int used = load_index(s, f, err);
        if (used != 0)
            return used > 0 ? 0 : used;
    }
    struct fmt_reader_opts ro = {.format = s->o.format, .compression = s->o.compression,
                                 .max_record_bytes = s->o.max_record_bytes, .skip_crc = s->o.count_only,
                                 .max_output = s->max_file};
    struct fmt_reader *r;
    int rc = fmt_reader_open(&r, f->path, &ro, err);
    if (rc != 0)
        return rc;
    f->comp = fmt_stream_compression(fmt_reader_stream(r));
    size_t cap = 0;
    struct fmt_record rec;
    while ((rc = fmt_reader_next(r, &rec, err)) == 0) {
        if ((f->count & 0xffff) == 0xffff && s->o.stop != NULL && *s->o.stop) {
            rc = sl_error_set(err, SL_ECLOSED, "%s: scan interrupted", f->path);
            break;
        }
        if (f->count == cap) {
            size_t ncap = cap ? cap * 2 : 1024;
            uint64_t *no = sl_realloc(f->offsets, ncap * sizeof *no);
            if (no == NULL) {
                rc = sl_error_set(err, SL_ENOMEM, "%s: out of memory for %zu record offsets", f->path, ncap);
                break;
            }
            f->offsets = no;
            cap = ncap;
        }
        f->offsets[f->count++] = rec.offset;
    }
    if (rc == SL_END) {
        rc = 0;
        f->image_size = fmt_stream_offset(fmt_reader_stream(r));
        f->dropped_tail = fmt_reader_dropped_tail(r);
    }
    fmt_reader_close(r);
    if (rc != 0) {
        sl_free(f->offsets);
        f->offsets = NULL;
        f->count = 0;
        return rc;
    }
    if (f->comp == FMT_COMP_NONE)
        return map_file(f, err);
    return 0;
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

/* Scan every file with up to scan_threads threads (tar: one, as field
 * names get their ids in scan order), calling on_progress from this
 * thread. Files are taken in order, so when a fatal error or a stop halts
 * the scan, every file before the last one taken has its result; the
 * files never taken keep rcs 0 and are not looked at (an earlier one
 * failed), except after a stop, where the first of them says so. */
static int scan_all(struct feed_source *s, int *rcs, struct scan_failure **failed, size_t *nfailed,
                    struct sl_error *err)
{
    struct scan_ctl c = {.s = s, .rcs = rcs};
    unsigned want = s->o.scan_threads ? s->o.scan_threads : 1;
    if (s->o.format == FMT_FORMAT_TAR)
        want = 1;
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
        if (pthread_create(&th[k], NULL, scan_worker, &c) != 0) {
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
    struct feed_source *s = sl_calloc(1, sizeof *s);
    if (s == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    if (opts)
        s->o = *opts;
    if (s->o.cache_bytes == 0)
        s->o.cache_bytes = DEFAULT_CACHE;
    if (s->o.max_record_bytes == 0)
        s->o.max_record_bytes = FMT_DEFAULT_MAX_RECORD_BYTES;
    s->max_file = s->o.max_file_bytes == 0 || s->o.max_file_bytes > s->o.cache_bytes ? s->o.cache_bytes
                                                                                       : s->o.max_file_bytes;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->nfiles = npaths;
    s->files = sl_calloc(npaths ? npaths : 1, sizeof *s->files);
    s->counts = sl_calloc(npaths ? npaths : 1, sizeof *s->counts);
    if (s->files == NULL || s->counts == NULL) {
        feed_source_close(s);
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < npaths; i++)
        s->files[i].path = paths[i];
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
        if (f->dropped_tail > 0 && s->o.on_tail)
            s->o.on_tail(s->o.ctx, f->path, f->dropped_tail);
        s->counts[i] = f->count;
        s->total_bytes += f->image_size;
        struct stat dst;
        if (stat(f->path, &dst) == 0)
            s->disk_bytes += (uint64_t)dst.st_size;
    }
    sl_free(failed);
    sl_free(rcs);
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
    for (size_t i = 0; s->files && i < s->nfiles; i++) {
        struct file *f = &s->files[i];
        if (f->img.mapped && f->img.data)
            munmap(f->img.data, f->img.size);
        else
            sl_free(f->img.data);
        sl_free(f->offsets);
        sl_free(f->fields);
    }
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

uint64_t feed_source_total_bytes(const struct feed_source *s)
{
    return s->total_bytes;
}

const char *feed_source_path(const struct feed_source *s, size_t i)
{
    return s->files[i].path;
}

uint64_t feed_source_offset(const struct feed_source *s, size_t file, uint64_t rec)
{
    return rec < s->files[file].count ? s->files[file].offsets[rec] : 0;
}

int feed_reader_open(struct feed_reader **out, struct feed_source *s, struct sl_error *err)
{
    struct feed_reader *r = sl_calloc(1, sizeof *r);
    if (r == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    r->s = s;
    sl_buf_init(&r->scratch, 0);
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
    sl_buf_free(&r->scratch);
    sl_free(r);
}

/* Inflate a compressed file straight into buf (image_size bytes, as the
 * scan found), then check that the stream ends there. */
static int inflate_file(const struct file *f, uint8_t *buf, struct sl_error *err)
{
    struct fmt_stream_opts so = {.compression = f->comp, .max_output = f->image_size + 1};
    struct fmt_stream *st;
    int rc = fmt_stream_open(&st, f->path, &so, err);
    if (rc != 0)
        return rc;
    size_t got = 0;
    rc = fmt_stream_read(st, buf, (size_t)f->image_size, &got, err);
    if (rc == 0 && got < f->image_size)
        rc = sl_error_set(err, SL_ECORRUPT, "%s: inflates to %zu bytes, %llu when it was scanned", f->path, got,
                          (unsigned long long)f->image_size);
    uint8_t extra;
    if (rc == 0 && (rc = fmt_stream_read(st, &extra, 1, &got, err)) == 0 && got != 0) /* the end: trailer, CRC */
        rc = sl_error_set(err, SL_ECORRUPT, "%s: inflates to more than the %llu bytes it held when it was scanned",
                          f->path, (unsigned long long)f->image_size);
    fmt_stream_close(st);
    return rc;
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
                          : inflate_file(f, data, err);
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

int feed_reader_sample(struct feed_reader *r, uint32_t file, uint64_t sample, const struct feed_field **fields,
                       size_t *n, struct sl_error *err)
{
    struct feed_source *s = r->s;
    if (s->o.format != FMT_FORMAT_TAR || file >= s->nfiles || sample >= s->files[file].count)
        return sl_error_set(err, SL_EINVAL, "sample %llu of file %u does not exist", (unsigned long long)sample, file);
    struct file *f = &s->files[file];
    int rc = pin(r, f, err);
    if (rc != 0)
        return rc;
    size_t k = 0;
    for (uint64_t i = f->offsets[sample]; i < f->offsets[sample + 1]; i++, k++) {
        const struct tar_field *t = &f->fields[i];
        if (t->off + t->len > f->img.size)
            return sl_error_set(err, SL_ECORRUPT, "%s: the file changed since it was scanned", f->path);
        r->fields[k].name = s->exts[t->ext];
        r->fields[k].data = f->img.data + t->off;
        r->fields[k].len = (size_t)t->len;
    }
    *fields = r->fields;
    *n = k;
    return 0;
}

int feed_reader_get(struct feed_reader *r, uint32_t file, uint64_t rec, const uint8_t **data, size_t *len,
                    struct sl_error *err)
{
    struct feed_source *s = r->s;
    if (file >= s->nfiles || rec >= s->files[file].count)
        return sl_error_set(err, SL_EINVAL, "record %llu of file %u does not exist", (unsigned long long)rec, file);
    struct file *f = &s->files[file];
    int rc = pin(r, f, err);
    if (rc != 0)
        return rc;
    uint64_t off = f->offsets[rec];
    const uint8_t *img = f->img.data;
    size_t size = f->img.size;
    if (s->o.format == FMT_FORMAT_TEXT) {
        const uint8_t *start = img + off;
        size_t room = size - off;
        const uint8_t *nl = memchr(start, '\n', room);
        size_t raw = nl ? (size_t)(nl - start) : room;
        if (memchr(start, '\r', raw) == NULL) {
            *data = start;
            *len = raw;
            return 0;
        }
        sl_buf_reset(&r->scratch);
        if ((rc = sl_buf_reserve(&r->scratch, raw)) != 0)
            return sl_error_set(err, rc, "%s: out of memory for a line at %llu", f->path, (unsigned long long)off);
        for (size_t i = 0; i < raw; i++)
            if (start[i] != '\r')
                r->scratch.data[r->scratch.len++] = start[i];
        *data = r->scratch.data;
        *len = r->scratch.len;
        return 0;
    }
    /* TFRecord: the scan checked the framing; check it (and both CRCs,
     * unless trusting the scan) again, as the file may have changed */
    rc = fmt_tfrecord_frame(img + off, size - off, off, s->o.max_record_bytes, s->o.trust_scan, data, len, err);
    if (rc != 0)
        sl_error_prefix(err, "%s: ", f->path);
    return rc;
}

void feed_reader_prefetch(const struct feed_reader *r, uint32_t file, uint64_t rec)
{
    const struct feed_source *s = r->s;
    if (s->o.format != FMT_FORMAT_TFRECORD || file >= s->nfiles)
        return;
    const struct file *f = &s->files[file];
    /* only mapped images: they stay put for the source's lifetime, while an
     * inflated one may be evicted by another reader */
    if (!f->img.mapped || f->img.data == NULL || rec >= f->count)
        return;
    uint64_t off = f->offsets[rec];
    uint64_t end = rec + 1 < f->count ? f->offsets[rec + 1] : f->img.size;
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
