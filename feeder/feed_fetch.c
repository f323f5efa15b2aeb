/* feed_fetch: a piece's records read by range, fetched ahead by the
 * source's fetch threads (see feed_fetch.h).
 *
 * Lock order: the fetcher's mutex only, never held during a request. A
 * fetch's parts are handed out in order under it (f->next); each part's
 * bytes are written by the one fetch thread that took it, and read by the
 * executor only after it saw the part done under the same mutex.
 */
#include "feed_fetch.h"

#include <stdlib.h>
#include <string.h>

#include "feed_source_impl.h"
#include "sl_alloc.h"
#include "sl_thread.h"

/* A record the piece reads, in (file, record) order. */
struct fetch_rec {
    uint32_t file;
    uint64_t rec;
    uint64_t off;         /* in the file */
    size_t len;           /* its extent */
    size_t at;            /* where its bytes are in the buffer */
    size_t part0, nparts; /* the parts that bring them */
};

/* One request: bytes [off, off + len) of a file, into buf + at. */
struct fetch_part {
    uint32_t file;
    uint64_t off;
    size_t len, at;
};

struct feed_fetch {
    struct feed_source *s;
    struct fetch_rec *recs;
    size_t nrecs, cap_recs;
    struct fetch_part *parts;
    uint8_t *state; /* per part: 0 pending, 1 done, 2 failed */
    size_t nparts, cap_parts;
    uint8_t *buf;
    size_t cap_buf;
    uint64_t *gaps; /* scratch: the gaps between neighbours, to pick which to join */
    size_t cap_gaps;
    /* under the fetcher's mutex */
    size_t next;    /* the next part to hand out */
    size_t pending; /* parts not finished (queued or in flight) */
    int queued;
    struct feed_fetch *qnext;
    int rc;
    struct sl_error err;
};

struct feed_fetcher {
    struct feed_source *s;
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    struct feed_fetch *head, *tail; /* fetches with parts to hand out, oldest first */
    int stop;
    pthread_t *threads;
    unsigned nthreads;
    struct feed_fetch_stats stats;
};

/* ---- the fetch threads ---- */

int feed__read_range(struct feed_source *s, struct feed_range_src *c, uint32_t file, uint64_t off, uint8_t *dst,
                     size_t len, struct sl_error *err)
{
    const struct file *f = &s->files[file];
    if (c->src != NULL && c->file != file) {
        sto_close(c->src);
        c->src = NULL;
    }
    int rc;
    if (c->src == NULL) {
        const struct sto_known k = {.size = f->src_size, .etag = f->etag, .mtime_ns = f->src_mtime_ns};
        if ((rc = sto_open_known(&c->src, f->path, &k, err)) != 0)
            return rc;
        c->src->exact = 1;
        c->file = file;
    }
    rc = sto_read_full(c->src, off, dst, len, err);
    /* after an error its connection may be in any state: a new one next
     * time; a local file (tests) is opened again for each read, as only
     * its open compares its size with the scan's (a remote range carries
     * If-Match) */
    if (rc != 0 || c->src->kind == STO_FILE) {
        sto_close(c->src);
        c->src = NULL;
    }
    return rc;
}

uint64_t feed__range_extent(const struct feed_source *s, const struct file *f, uint64_t rec)
{
    uint64_t most = (uint64_t)s->ops->frame_head + s->ops->frame_tail +
                    (s->o.max_record_bytes ? s->o.max_record_bytes : FMT_DEFAULT_MAX_RECORD_BYTES);
    uint64_t n = fmt_scan_extent(f->scan, rec);
    return n < most ? n : most;
}

static void *fetch_main(void *arg)
{
    struct feed_fetcher *p = arg;
    struct feed_range_src c = {0};
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->head == NULL)
            pthread_cond_wait(&p->work, &p->mu);
        if (p->stop)
            break;
        struct feed_fetch *f = p->head;
        size_t k = f->next++;
        if (f->next == f->nparts) {
            p->head = f->qnext;
            if (p->head == NULL)
                p->tail = NULL;
            f->queued = 0;
            f->qnext = NULL;
        }
        const struct fetch_part part = f->parts[k];
        uint8_t *dst = f->buf + part.at;
        pthread_mutex_unlock(&p->mu);

        struct sl_error err = {0};
        int rc = feed__read_range(p->s, &c, part.file, part.off, dst, part.len, &err);

        pthread_mutex_lock(&p->mu);
        f->state[k] = rc == 0 ? 1 : 2;
        if (rc != 0 && f->rc == 0) {
            f->rc = rc;
            f->err = err;
        }
        f->pending--;
        p->stats.requests++;
        p->stats.bytes += rc == 0 ? part.len : 0;
        pthread_cond_broadcast(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    sto_close(c.src);
    return NULL;
}

int feed__fetcher_create(struct feed_fetcher **out, struct feed_source *s, unsigned threads, struct sl_error *err)
{
    *out = NULL;
    if (threads == 0 || threads > FEED_FETCH_THREADS_MAX)
        return sl_error_set(err, SL_EINVAL, "%u remote requests at once (need 1 .. %d)", threads,
                            FEED_FETCH_THREADS_MAX);
    struct feed_fetcher *p = sl_calloc(1, sizeof *p);
    if (p == NULL || (p->threads = sl_calloc(threads, sizeof *p->threads)) == NULL) {
        sl_free(p);
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    }
    p->s = s;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    for (unsigned i = 0; i < threads; i++) {
        if (sl_thread_start(&p->threads[i], fetch_main, p) != 0) {
            feed__fetcher_destroy(p);
            return sl_error_set(err, SL_EIO, "pthread_create failed");
        }
        p->nthreads = i + 1;
    }
    *out = p;
    return 0;
}

void feed__fetcher_destroy(struct feed_fetcher *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i < p->nthreads; i++)
        pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    sl_free(p->threads);
    sl_free(p);
}

void feed_source_fetch_stats(const struct feed_source *s, struct feed_fetch_stats *out)
{
    *out = (struct feed_fetch_stats){0};
    struct feed_fetcher *p = s->fetcher;
    if (p != NULL) {
        pthread_mutex_lock(&p->mu);
        *out = p->stats;
        pthread_mutex_unlock(&p->mu);
    }
    out->alone = atomic_load(&((struct feed_source *)s)->fetched_alone);
}

void feed__fetcher_count_records(struct feed_source *s, uint64_t bytes)
{
    struct feed_fetcher *p = s->fetcher;
    pthread_mutex_lock(&p->mu);
    p->stats.record_bytes += bytes;
    pthread_mutex_unlock(&p->mu);
}

/* ---- a piece's fetch ---- */

int feed_fetch_open(struct feed_fetch **out, struct feed_source *s, struct sl_error *err)
{
    *out = NULL;
    if (s->fetcher == NULL)
        return 0;
    struct feed_fetch *f = sl_calloc(1, sizeof *f);
    if (f == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    f->s = s;
    *out = f;
    return 0;
}

void feed_fetch_cancel(struct feed_fetch *f)
{
    if (f == NULL)
        return;
    struct feed_fetcher *p = f->s->fetcher;
    pthread_mutex_lock(&p->mu);
    if (f->queued) { /* unlink it: its parts not handed out are never fetched */
        struct feed_fetch **at = &p->head, *prev = NULL;
        while (*at != f) {
            prev = *at;
            at = &(*at)->qnext;
        }
        *at = f->qnext;
        if (p->tail == f)
            p->tail = prev;
        f->queued = 0;
        f->qnext = NULL;
        f->pending -= f->nparts - f->next;
        f->next = f->nparts;
    }
    while (f->pending > 0)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

void feed_fetch_close(struct feed_fetch *f)
{
    if (f == NULL)
        return;
    feed_fetch_cancel(f);
    sl_free(f->recs);
    sl_free(f->parts);
    sl_free(f->state);
    sl_free(f->buf);
    sl_free(f->gaps);
    sl_free(f);
}

static int grow(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 16;
    while (n < need)
        n *= 2;
    void *q = sl_realloc(*p, n * size);
    if (q == NULL)
        return -1;
    *p = q;
    *cap = n;
    return 0;
}

static int rec_cmp(const void *a, const void *b)
{
    const struct fetch_rec *x = a, *y = b;
    if (x->file != y->file)
        return x->file < y->file ? -1 : 1;
    return x->rec < y->rec ? -1 : x->rec > y->rec;
}

static int u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The largest gap that is joined: gaps are joined smallest first while
 * their bytes stay within 1/16 of the records' and each is at most
 * FEED_FETCH_GAP_MAX (0: none is). */
static uint64_t gap_limit(struct feed_fetch *f, uint64_t record_bytes)
{
    size_t ng = 0;
    for (size_t i = 1; i < f->nrecs; i++) {
        const struct fetch_rec *a = &f->recs[i - 1], *b = &f->recs[i];
        if (a->file == b->file && b->off > a->off + a->len)
            f->gaps[ng++] = b->off - (a->off + a->len);
    }
    if (ng == 0)
        return 0;
    qsort(f->gaps, ng, sizeof *f->gaps, u64_cmp);
    uint64_t budget = record_bytes / 16, spent = 0, limit = 0;
    size_t i = 0;
    for (; i < ng && f->gaps[i] <= FEED_FETCH_GAP_MAX && spent + f->gaps[i] <= budget; i++) {
        spent += f->gaps[i];
        limit = f->gaps[i];
    }
    /* stopped inside a run of equal gaps: the threshold would join all of
     * them, so none of that size is */
    if (i < ng && i > 0 && f->gaps[i] == limit) {
        while (i > 0 && f->gaps[i - 1] == limit)
            i--;
        limit = i > 0 ? f->gaps[i - 1] : 0;
    }
    return limit;
}

/* One part of a range; its records' part counts follow. */
static int add_part(struct feed_fetch *f, uint32_t file, uint64_t off, size_t len, size_t at)
{
    if (grow((void **)&f->parts, &f->cap_parts, f->nparts + 1, sizeof *f->parts) != 0)
        return -1;
    size_t cap = f->cap_parts;
    uint8_t *st = sl_realloc(f->state, cap);
    if (st == NULL)
        return -1;
    f->state = st;
    f->parts[f->nparts] = (struct fetch_part){file, off, len, at};
    f->state[f->nparts++] = 0;
    return 0;
}

/* Lay out the ranges of recs[lo, hi) (one file, neighbours joined) as
 * parts of at most FEED_FETCH_PART bytes, at `at` in the buffer. */
static int add_range(struct feed_fetch *f, size_t lo, size_t hi, size_t at)
{
    const struct fetch_rec *first = &f->recs[lo], *last = &f->recs[hi - 1];
    uint64_t off = first->off, end = last->off + last->len;
    size_t p0 = f->nparts;
    for (uint64_t o = off; o < end; o += FEED_FETCH_PART) {
        size_t len = end - o < FEED_FETCH_PART ? (size_t)(end - o) : FEED_FETCH_PART;
        if (add_part(f, first->file, o, len, at + (size_t)(o - off)) != 0)
            return -1;
    }
    for (size_t i = lo; i < hi; i++) {
        struct fetch_rec *r = &f->recs[i];
        size_t rel = (size_t)(r->off - off);
        r->at = at + rel;
        r->part0 = p0 + rel / FEED_FETCH_PART;
        size_t plast = p0 + (rel + (r->len ? r->len - 1 : 0)) / FEED_FETCH_PART;
        r->nparts = plast - r->part0 + 1;
    }
    return 0;
}

int feed_fetch_start(struct feed_fetch *f, const struct feed_elem *elems, size_t n, struct sl_error *err)
{
    feed_fetch_cancel(f); /* a piece not read (a stop): nothing of it may be in flight */
    struct feed_source *s = f->s;
    f->nrecs = f->nparts = 0;
    f->next = f->pending = 0;
    f->rc = 0;
    sl_error_clear(&f->err);
    uint64_t record_bytes = 0;
    for (size_t i = 0; i < n; i++) {
        const struct feed_elem *e = &elems[i];
        if (e->file >= s->nfiles || !s->files[e->file].ranged || e->record >= s->files[e->file].count)
            continue;
        const struct file *fl = &s->files[e->file];
        if (grow((void **)&f->recs, &f->cap_recs, f->nrecs + 1, sizeof *f->recs) != 0)
            goto oom;
        uint64_t len = feed__range_extent(s, fl, e->record);
        f->recs[f->nrecs++] = (struct fetch_rec){
            .file = e->file, .rec = e->record, .off = fmt_scan_offset(fl->scan, e->record), .len = (size_t)len};
    }
    if (f->nrecs == 0)
        return 0;
    qsort(f->recs, f->nrecs, sizeof *f->recs, rec_cmp);
    size_t w = 1; /* a record asked twice is fetched once */
    for (size_t i = 1; i < f->nrecs; i++)
        if (rec_cmp(&f->recs[i], &f->recs[w - 1]) != 0)
            f->recs[w++] = f->recs[i];
    f->nrecs = w;
    for (size_t i = 0; i < f->nrecs; i++)
        record_bytes += f->recs[i].len;
    if (grow((void **)&f->gaps, &f->cap_gaps, f->nrecs, sizeof *f->gaps) != 0)
        goto oom;
    uint64_t limit = gap_limit(f, record_bytes);
    /* the buffer: each range's bytes, one range after the other */
    size_t total = 0, lo = 0;
    for (size_t i = 1; i <= f->nrecs; i++) {
        const struct fetch_rec *a = &f->recs[i - 1], *b = i < f->nrecs ? &f->recs[i] : NULL;
        if (b != NULL && b->file == a->file && b->off >= a->off + a->len && b->off - (a->off + a->len) <= limit)
            continue;
        total += (size_t)(a->off + a->len - f->recs[lo].off);
        lo = i;
    }
    if (grow((void **)&f->buf, &f->cap_buf, total ? total : 1, 1) != 0)
        goto oom;
    size_t at = 0;
    lo = 0;
    for (size_t i = 1; i <= f->nrecs; i++) {
        const struct fetch_rec *a = &f->recs[i - 1], *b = i < f->nrecs ? &f->recs[i] : NULL;
        if (b != NULL && b->file == a->file && b->off >= a->off + a->len && b->off - (a->off + a->len) <= limit)
            continue;
        if (add_range(f, lo, i, at) != 0)
            goto oom;
        at += (size_t)(a->off + a->len - f->recs[lo].off);
        lo = i;
    }
    feed__fetcher_count_records(s, record_bytes);
    struct feed_fetcher *p = s->fetcher;
    pthread_mutex_lock(&p->mu);
    f->pending = f->nparts;
    f->queued = 1;
    if (p->tail != NULL)
        p->tail->qnext = f;
    else
        p->head = f;
    p->tail = f;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    return 0;
oom:
    f->nrecs = f->nparts = 0;
    return sl_error_set(err, SL_ENOMEM, "out of memory for a piece's ranges");
}

int feed__fetch_find(struct feed_fetch *f, uint32_t file, uint64_t rec, const uint8_t **at, size_t *len,
                     struct sl_error *err)
{
    *at = NULL;
    *len = 0;
    if (f == NULL || f->nrecs == 0)
        return 0;
    const struct fetch_rec key = {.file = file, .rec = rec};
    const struct fetch_rec *r = bsearch(&key, f->recs, f->nrecs, sizeof *f->recs, rec_cmp);
    if (r == NULL)
        return 0;
    struct feed_fetcher *p = f->s->fetcher;
    int rc = 0;
    pthread_mutex_lock(&p->mu);
    for (size_t k = r->part0; k < r->part0 + r->nparts; k++) {
        while (f->state[k] == 0 && f->rc == 0)
            pthread_cond_wait(&p->done, &p->mu);
        if (f->state[k] != 1) {
            rc = f->rc ? f->rc : SL_EIO;
            *err = f->err;
            break;
        }
    }
    pthread_mutex_unlock(&p->mu);
    if (rc != 0)
        return rc;
    *at = f->buf + r->at;
    *len = r->len;
    return 0;
}
