/* feed_assemble: decode a piece's records into a per-thread batch of
 * columns, then lay each column out in the caller's buffer, each tensor at
 * a 64-byte boundary (so a device copy of any tensor starts aligned).
 *
 * One loop for every format: the source frames each record (its bytes or
 * its named fields) and the format's decode (fmt_format_ops) adds it to the
 * batch as a row; this file never asks which format it is. Fixed-size
 * numeric and uint8 columns are decoded straight into the buffer
 * (fmt_batch_bind); only variable-size columns (bytes, ragged) are decoded
 * into the batch's own storage and copied in after, and a piece whose
 * records take them past the buffer stops at the element that did. */
#include "feed_assemble.h"

#include <stdio.h>
#include <string.h>

#include "feed_cache.h"
#include "feed_job_map.h"
#include "feed_metrics.h"
#include "sl_alloc.h"
#include "sl_clock.h"

#define ALIGN 64

struct feed_assembler {
    struct feed_source *src;
    struct feed_reader *rd;
    struct fmt_batch *batch;
    const struct fmt_feature_spec *specs;
    size_t nspecs;
    size_t max_rows;
    const struct fmt_format_ops *ops; /* the format: frame, decode; never named here */
    /* stage accounting: every 8th record's read and decode are timed
     * (wall); each piece's thread CPU time is split in those proportions */
    uint64_t tick; /* reads so far */
    uint64_t read_wall, decode_wall, sampled;
    uint64_t read_bytes;        /* the records' bytes framed so far */
    struct sl_metrics *metrics; /* borrowed; NULL: not measured */
    struct feed_cache *cache;   /* borrowed; NULL: every element is decoded */
    uint64_t hits, misses;      /* elements copied from the cache / decoded, while it is on */
    /* the map stage (feed_assembler_use_map); runner NULL: none */
    struct map_runner *runner;
    const struct map_plan *plan;
    uint64_t seed;
    uint64_t *first_id;           /* per file: the element id of its record 0 */
    struct fmt_feature_spec *out; /* the features leaving the map (owned) */
    size_t nout;
    struct map_tensor *in_t, *out_t; /* one element's tensors (nspecs, nout; owned) */
    uint64_t map_cpu, map_wall;      /* the map's time so far */
    uint64_t *op_ns;                 /* borrowed: per op, every assembler's (atomic adds); NULL: none */
    uint64_t *op_ns_seen;            /* this runner's per-op time already added there (owned) */
};

enum { SAMPLE_EVERY = 8 };

static inline int sampling(struct feed_assembler *a)
{
    return (a->tick++ % SAMPLE_EVERY) == 0;
}

/* Timing a sampled read: the wall time from `start`, less any time the
 * reader spent inflating a file meanwhile (counted as decompress). */
struct read_timer {
    uint64_t t0, inflate0;
};

static void read_timer_start(const struct feed_assembler *a, struct read_timer *t)
{
    uint64_t cpu;
    feed_reader_inflate_ns(a->rd, &cpu, &t->inflate0);
    t->t0 = sl_clock_ns();
}

static void read_timer_stop(struct feed_assembler *a, const struct read_timer *t)
{
    uint64_t cpu, inflate1, d = sl_clock_ns() - t->t0;
    feed_reader_inflate_ns(a->rd, &cpu, &inflate1);
    uint64_t inf = inflate1 - t->inflate0;
    a->read_wall += d > inf ? d - inf : 0;
    a->sampled++;
}

/* feed_reader_frame, timed when `timed` (a sampled record) */
static int frame_record(struct feed_assembler *a, int timed, uint32_t file, uint64_t rec, const struct fmt_frame **out,
                        struct sl_error *err)
{
    if (!timed)
        return feed_reader_frame(a->rd, file, rec, out, err);
    struct read_timer t;
    read_timer_start(a, &t);
    int rc = feed_reader_frame(a->rd, file, rec, out, err);
    read_timer_stop(a, &t);
    return rc;
}

static enum feed_dtype dtype_of(enum fmt_dtype t)
{
    switch (t) {
    case FMT_DTYPE_INT64: return FEED_DT_INT64;
    case FMT_DTYPE_FLOAT32: return FEED_DT_FLOAT32;
    case FMT_DTYPE_UINT8: return FEED_DT_UINT8;
    case FMT_DTYPE_FLOAT16: return FEED_DT_FLOAT16;
    case FMT_DTYPE_BFLOAT16: return FEED_DT_BFLOAT16;
    default: return FEED_DT_BYTES;
    }
}

static int add_tensor(struct feed_schema *s, const char *name, const char *suffix, enum feed_dtype dt, int ragged,
                      int rank, const int64_t *shape, struct sl_error *err)
{
    if (s->ntensors == FEED_MAX_TENSORS)
        return sl_error_set(err, SL_EINVAL, "features: more than %d tensors", FEED_MAX_TENSORS);
    struct feed_schema_tensor *t = &s->t[s->ntensors++];
    snprintf(t->name, sizeof t->name, "%s%s", name, suffix);
    t->dtype = dt;
    t->ragged = ragged;
    t->rank = rank;
    for (int i = 0; i < rank; i++)
        t->shape[i] = shape[i];
    return 0;
}

int feed_schema_build(const struct fmt_feature_spec *specs, size_t nspecs, struct feed_schema *out,
                      struct sl_error *err)
{
    memset(out, 0, sizeof *out);
    static const int64_t none[1] = {0};
    for (size_t i = 0; i < nspecs; i++) {
        const struct fmt_feature_spec *f = &specs[i];
        enum feed_dtype dt = dtype_of(f->dtype);
        int rc;
        if (f->varlen) {
            rc = add_tensor(out, f->name, "", dt, 1, 0, none, err);
            if (rc == 0)
                rc = add_tensor(out, f->name, ".row_splits", FEED_DT_INT64, 1, 0, none, err);
        } else {
            rc = add_tensor(out, f->name, "", dt, dt == FEED_DT_BYTES, f->rank, f->shape, err);
        }
        if (rc == 0 && dt == FEED_DT_BYTES)
            rc = add_tensor(out, f->name, ".offsets", FEED_DT_INT64, 1, 0, none, err);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static uint64_t round_up(uint64_t v)
{
    return (v + ALIGN - 1) / ALIGN * ALIGN;
}

uint64_t feed_piece_fixed_bytes(const struct fmt_feature_spec *specs, size_t nspecs, uint64_t rows)
{
    uint64_t total = 0;
    for (size_t i = 0; i < nspecs; i++) {
        if (specs[i].varlen || specs[i].dtype == FMT_DTYPE_BYTES)
            return 0;
        total += round_up(rows * fmt_feature_spec_count(&specs[i]) * fmt_dtype_size(specs[i].dtype));
    }
    return total;
}

int feed_assembler_create(struct feed_assembler **out, struct feed_source *src, const struct fmt_feature_spec *specs,
                          size_t nspecs, enum fmt_format format, size_t max_rows, struct sl_metrics *metrics,
                          struct sl_error *err)
{
    *out = NULL;
    struct feed_assembler *a = sl_calloc(1, sizeof *a);
    if (a == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    a->metrics = metrics;
    a->src = src;
    a->specs = specs;
    a->nspecs = nspecs;
    a->max_rows = max_rows;
    a->ops = fmt_format_get(format);
    int rc = a->ops == NULL ? sl_error_set(err, SL_EINVAL, "format %d is not a format", (int)format)
                            : a->ops->check_specs(specs, nspecs, err);
    if (rc == 0)
        rc = feed_reader_open(&a->rd, src, err);
    if (rc == 0)
        rc = fmt_batch_create(&a->batch, specs, nspecs, max_rows ? max_rows : 1, err);
    if (rc != 0) {
        feed_assembler_destroy(a);
        return rc;
    }
    *out = a;
    return 0;
}

void feed_assembler_destroy(struct feed_assembler *a)
{
    if (a == NULL)
        return;
    map_runner_destroy(a->runner);
    sl_free(a->first_id);
    sl_free(a->op_ns_seen);
    sl_free(a->out);
    sl_free(a->in_t);
    sl_free(a->out_t);
    feed_reader_close(a->rd);
    fmt_batch_destroy(a->batch);
    sl_free(a);
}

/* A piece that does not fit its buffer: the error names the element where
 * it overflowed (file, element, byte offset), so the operator can find the
 * oversized record and size --max-piece-bytes. */
static int too_big(const struct feed_assembler *a, const struct feed_piece *piece, size_t i, uint64_t need, size_t cap,
                   struct sl_error *err)
{
    const char *what = a->ops->element;
    if (piece->n == 0)
        return sl_error_set(err, SL_EINVAL, "an empty piece needs more than its %zu-byte buffer (--max-piece-bytes)",
                            cap);
    const struct feed_elem *e = &piece->elems[i < piece->n ? i : 0];
    return sl_error_set(err, SL_EINVAL,
                        "%s: %s %llu at byte %llu: a piece of %zu %ss needs %s%llu bytes, more than its %zu-byte "
                        "buffer (--max-piece-bytes)",
                        feed_source_path(a->src, e->file), what, (unsigned long long)e->record,
                        (unsigned long long)feed_source_offset(a->src, e->file, e->record), piece->n, what,
                        need == 0 ? "over " : "", (unsigned long long)(need == 0 ? cap : need), cap);
}

/* Append a tensor to the layout, copying `bytes` from src when it fits. */
static int put(struct feed_layout *l, uint8_t *buf, size_t cap, enum feed_dtype dt, int rank, const int64_t *dims,
               const void *src, uint64_t bytes, struct sl_error *err)
{
    uint64_t off = round_up(l->total);
    if (off > cap || bytes > cap - off)
        return sl_error_set(err, SL_EINVAL, "a piece of %llu rows needs more than the %zu-byte buffer (at tensor %zu)",
                            (unsigned long long)l->rows, cap, l->ntensors);
    struct feed_tensor *t = &l->t[l->ntensors++];
    t->dtype = dt;
    t->rank = rank;
    for (int i = 0; i < rank; i++)
        t->dims[i] = dims[i];
    t->off = off;
    t->bytes = bytes;
    if (bytes)
        memcpy(buf + off, src, bytes);
    l->total = off + bytes;
    return 0;
}

/* A fixed-size tensor already in its place in the buffer, to the layout. */
static void placed(struct feed_layout *out, const struct fmt_feature_spec *f, uint64_t rows, uint64_t off,
                   uint64_t bytes)
{
    struct feed_tensor *t = &out->t[out->ntensors++];
    t->dtype = dtype_of(f->dtype);
    t->rank = f->rank + 1;
    t->dims[0] = (int64_t)rows;
    for (int k = 0; k < f->rank; k++)
        t->dims[k + 1] = f->shape[k];
    t->off = off;
    t->bytes = bytes;
}

/* A variable-size (bytes, variable-length) decoded column copied to the
 * layout: its values, then its row_splits and bytes offsets. SL_EINVAL
 * past the buffer (put). */
static int put_column(struct feed_layout *out, uint8_t *buf, size_t cap, const struct fmt_feature_spec *f,
                      const struct fmt_column *c, struct sl_error *err)
{
    enum feed_dtype dt = dtype_of(f->dtype);
    int64_t dims[FEED_MAX_RANK];
    int rc;
    if (f->varlen) {
        dims[0] = (int64_t)c->nvalues;
        rc = put(out, buf, cap, dt, 1, dims, c->values, c->value_bytes, err);
        dims[0] = (int64_t)c->rows + 1;
        if (rc == 0)
            rc = put(out, buf, cap, FEED_DT_INT64, 1, dims, c->row_splits, (c->rows + 1) * sizeof(uint64_t), err);
    } else {
        dims[0] = (int64_t)c->rows;
        for (int k = 0; k < f->rank; k++)
            dims[k + 1] = f->shape[k];
        rc = put(out, buf, cap, dt, f->rank + 1, dims, c->values, c->value_bytes, err);
    }
    if (rc == 0 && dt == FEED_DT_BYTES) {
        dims[0] = (int64_t)c->nvalues + 1;
        rc = put(out, buf, cap, FEED_DT_INT64, 1, dims, c->bytes_offsets, (c->nvalues + 1) * sizeof(uint64_t), err);
    }
    return rc;
}

/* put_column for a piece: past the buffer, SL_EINVAL naming its last
 * element (too_big). */
static int put_piece_column(const struct feed_assembler *a, const struct feed_piece *piece, struct feed_layout *out,
                            uint8_t *buf, size_t cap, const struct fmt_feature_spec *f, const struct fmt_column *c,
                            struct sl_error *err)
{
    int rc = put_column(out, buf, cap, f, c, err);
    if (rc == SL_EINVAL) /* put(): past the buffer */
        return too_big(a, piece, piece->n - 1, 0, cap, err);
    return rc;
}

/* An empty layout for the piece's rows. SL_EINVAL: more rows than the
 * assembler was made for. */
static int layout_start(const struct feed_assembler *a, const struct feed_piece *piece, struct feed_layout *out,
                        struct sl_error *err)
{
    if (piece->n > a->max_rows)
        return sl_error_set(err, SL_EINVAL, "piece of %zu rows exceeds the assembler's %zu", piece->n, a->max_rows);
    memset(out, 0, sizeof *out);
    out->rows = piece->n;
    return 0;
}

/* Room for a fixed-size column of `bytes` at the layout's next 64-byte
 * boundary: its offset in *off. SL_EINVAL past the buffer (too_big, at the
 * piece's first element). */
static int reserve(const struct feed_assembler *a, const struct feed_piece *piece, struct feed_layout *out, size_t cap,
                   uint64_t bytes, uint64_t *off, struct sl_error *err)
{
    uint64_t o = round_up(out->total);
    if (o > cap || bytes > cap - o)
        return too_big(a, piece, 0, o + bytes, cap, err);
    *off = o;
    out->total = o + bytes;
    return 0;
}

/* Read element e's record and decode it into the batch as its next row,
 * timed when `timed` (a sampled record), its bytes counted. A reader's
 * error names the file and offset already; a decode error is prefixed
 * with the file, the record and its offset when `named` (SL_ENOMEM never). */
static inline int read_decode(struct feed_assembler *a, const struct feed_elem *e, int timed, int named,
                              struct sl_error *err)
{
    const struct fmt_frame *fr;
    int rc = frame_record(a, timed, e->file, e->record, &fr, err);
    if (rc != 0)
        return rc;
    a->read_bytes += fr->data != NULL ? fr->len : 0;
    for (size_t k = 0; fr->data == NULL && k < fr->nfields; k++)
        a->read_bytes += fr->fields[k].len;
    uint64_t t0 = timed ? sl_clock_ns() : 0;
    rc = a->ops->decode(a->batch, fr, err);
    if (timed)
        a->decode_wall += sl_clock_ns() - t0;
    if (rc != 0 && rc != SL_ENOMEM && named)
        sl_error_prefix(err, "%s: %s %llu at %llu: ", feed_source_path(a->src, e->file), a->ops->element,
                        (unsigned long long)e->record,
                        (unsigned long long)feed_source_offset(a->src, e->file, e->record));
    return rc;
}

/* a shuffled piece's records are scattered over the files: the next ones
 * are asked for while one is checked and decoded (feed_reader_prefetch) */
enum { AHEAD = 2 }; /* measured: 2 beats 0, 4, 8 and 16 (docs/performance.md) */

/* Every record of the piece read and decoded into the batch, in order
 * (read_decode, named). With `out`, the batch's variable-size columns go
 * after out's fixed ones: stop at the element that takes them past the
 * buffer, naming it (too_big); NULL: no such stop (they are laid out
 * later). */
static inline int decode_records(struct feed_assembler *a, const struct feed_piece *piece,
                                 const struct feed_layout *out, size_t cap, struct sl_error *err)
{
    for (size_t i = 0; i < piece->n && i < AHEAD; i++)
        feed_reader_prefetch(a->rd, piece->elems[i].file, piece->elems[i].record);
    for (size_t i = 0; i < piece->n; i++) {
        if (i + AHEAD < piece->n)
            feed_reader_prefetch(a->rd, piece->elems[i + AHEAD].file, piece->elems[i + AHEAD].record);
        int rc = read_decode(a, &piece->elems[i], sampling(a), 1, err);
        if (rc != 0)
            return rc;
        if (out == NULL)
            continue;
        uint64_t need = round_up(out->total) + fmt_batch_variable_bytes(a->batch);
        if (need > cap)
            return too_big(a, piece, i, need, cap, err);
    }
    return 0;
}

static int fill_piece(struct feed_assembler *a, const struct feed_piece *piece, uint8_t *buf, size_t cap,
                      struct feed_layout *out, struct sl_error *err)
{
    int rc = layout_start(a, piece, out, err);
    if (rc != 0)
        return rc;
    fmt_batch_reset(a->batch);
    fmt_batch_unbind(a->batch);
    /* Fixed-size columns are decoded straight into their place in the
     * buffer: they go first (their sizes are known from the row count);
     * variable-size ones are copied in after them once decoded. The frames
     * go out in schema order whatever the placement. */
    uint64_t fixed_off[FEED_MAX_TENSORS];
    for (size_t i = 0; i < a->nspecs; i++) {
        size_t rb = fmt_batch_row_bytes(a->batch, i);
        if (rb == 0)
            continue;
        uint64_t bytes = (uint64_t)rb * piece->n;
        if ((rc = reserve(a, piece, out, cap, bytes, &fixed_off[i], err)) != 0)
            return rc;
        if ((rc = fmt_batch_bind(a->batch, i, buf + fixed_off[i], (size_t)bytes, err)) != 0)
            return rc;
    }
    if ((rc = decode_records(a, piece, out, cap, err)) != 0)
        return rc;
    for (size_t i = 0; i < a->nspecs; i++) {
        const struct fmt_feature_spec *f = &a->specs[i];
        struct fmt_column c;
        fmt_batch_column(a->batch, i, &c);
        if (fmt_batch_row_bytes(a->batch, i) != 0) {
            /* already in place */
            placed(out, f, c.rows, fixed_off[i], c.value_bytes);
            continue;
        }
        if ((rc = put_piece_column(a, piece, out, buf, cap, f, &c, err)) != 0)
            return rc;
    }
    return 0;
}

int feed_assembler_use_cache(struct feed_assembler *a, struct feed_cache *cache, struct sl_error *err)
{
    size_t row = 0;
    if (cache != NULL && a->runner != NULL)
        return sl_error_set(err, SL_EINVAL, "the decoded-element cache is off with a map stage");
    for (size_t i = 0; i < a->nspecs; i++) {
        size_t rb = fmt_batch_row_bytes(a->batch, i);
        if (rb == 0)
            return sl_error_set(err, SL_EINVAL, "feature '%s' is not fixed-size: no cache", a->specs[i].name);
        row += rb;
    }
    if (cache != NULL && (a->nspecs == 0 || feed_cache_row_bytes(cache) != row))
        return sl_error_set(err, SL_EINVAL, "the cache's rows are %zu bytes, the features' %zu",
                            feed_cache_row_bytes(cache), row);
    a->cache = cache;
    return 0;
}

/* fill_piece with the cache on (every column fixed-size, decoded in
 * place): an element whose row is ready is copied from the cache, column by
 * column, to where its decode would have put it; any other is read and
 * decoded into its place alone (the batch reset and bound to that row),
 * then copied into its slot if this thread claims it. Any error: the
 * caller makes the piece again without the cache, which reports it as
 * without (the row numbers in decode errors are the piece's). */
/* Bring element e's bytes closer before they are needed: its cached row
 * into the CPU's cache, or its record's pages (feed_reader_prefetch). */
static void ahead(struct feed_assembler *a, const struct feed_elem *e, size_t row_bytes)
{
    const uint8_t *hit = feed_cache_get(a->cache, e->file, e->record);
    if (hit == NULL) {
        feed_reader_prefetch(a->rd, e->file, e->record);
        return;
    }
    for (size_t o = 0; o < row_bytes; o += 64)
        __builtin_prefetch(hit + o);
}

static int fill_cached(struct feed_assembler *a, const struct feed_piece *piece, uint8_t *buf, size_t cap,
                       struct feed_layout *out, struct sl_error *err)
{
    int rc = layout_start(a, piece, out, err);
    if (rc != 0)
        return rc;
    uint64_t off[FEED_MAX_TENSORS];
    size_t rb[FEED_MAX_TENSORS], in_row[FEED_MAX_TENSORS], row = 0;
    for (size_t i = 0; i < a->nspecs; i++) {
        rb[i] = fmt_batch_row_bytes(a->batch, i);
        in_row[i] = row;
        row += rb[i];
        if ((rc = reserve(a, piece, out, cap, (uint64_t)rb[i] * piece->n, &off[i], err)) != 0)
            return rc;
    }
    /* as fill_piece, elements not in the cache are read AHEAD ahead; a
     * cached row is fetched into the CPU's cache as far ahead: shuffled
     * rows of a cache larger than the CPU's are each a miss otherwise, and
     * the copies below wait on them */
    for (size_t i = 0; i < piece->n && i < AHEAD; i++)
        ahead(a, &piece->elems[i], row);
    for (size_t i = 0; i < piece->n; i++) {
        const struct feed_elem *e = &piece->elems[i];
        if (i + AHEAD < piece->n)
            ahead(a, &piece->elems[i + AHEAD], row);
        const uint8_t *hit = feed_cache_get(a->cache, e->file, e->record);
        if (hit != NULL) {
            for (size_t k = 0; k < a->nspecs; k++)
                memcpy(buf + off[k] + i * rb[k], hit + in_row[k], rb[k]);
            a->hits++;
            continue;
        }
        a->misses++;
        fmt_batch_reset(a->batch);
        for (size_t k = 0; k < a->nspecs && rc == 0; k++)
            rc = fmt_batch_bind(a->batch, k, buf + off[k] + i * rb[k], rb[k], err);
        int timed = sampling(a);
        if (rc == 0)
            rc = read_decode(a, e, timed, 0, err); /* unnamed: the caller makes the piece again without */
        if (rc != 0)
            return rc;
        uint8_t *slot = feed_cache_claim(a->cache, e->file, e->record);
        if (slot != NULL) {
            for (size_t k = 0; k < a->nspecs; k++)
                memcpy(slot + in_row[k], buf + off[k] + i * rb[k], rb[k]);
            feed_cache_publish(a->cache, e->file, e->record);
        }
    }
    for (size_t i = 0; i < a->nspecs; i++)
        placed(out, &a->specs[i], piece->n, off[i], (uint64_t)rb[i] * piece->n);
    return 0;
}

int feed_assembler_use_map(struct feed_assembler *a, const struct map_plan *plan, uint64_t seed, uint64_t *op_ns,
                           struct sl_error *err)
{
    if (a->cache != NULL)
        return sl_error_set(err, SL_EINVAL, "the map stage does not run with the decoded-element cache");
    size_t nfiles = feed_source_nfiles(a->src);
    const uint64_t *counts = feed_source_counts(a->src);
    int rc = feed_map_out_specs(plan, a->specs, a->nspecs, &a->out, &a->nout);
    if (rc != 0)
        return sl_error_set(err, rc, "out of memory");
    if (a->nout > FEED_MAX_TENSORS)
        return sl_error_set(err, SL_EINVAL, "features: more than %d leave the map", FEED_MAX_TENSORS);
    a->first_id = sl_calloc(nfiles ? nfiles : 1, sizeof *a->first_id);
    a->in_t = sl_calloc(a->nspecs ? a->nspecs : 1, sizeof *a->in_t);
    a->out_t = sl_calloc(a->nout ? a->nout : 1, sizeof *a->out_t);
    a->op_ns_seen = sl_calloc(map_plan_nops(plan) + 1, sizeof *a->op_ns_seen);
    if (a->first_id == NULL || a->in_t == NULL || a->out_t == NULL || a->op_ns_seen == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    for (size_t f = 1; f < nfiles; f++)
        a->first_id[f] = a->first_id[f - 1] + counts[f - 1];
    if ((rc = map_runner_create(&a->runner, plan, err)) != 0)
        return rc;
    a->plan = plan;
    a->seed = seed;
    a->op_ns = op_ns;
    return 0;
}

/* Row r of decoded column c (feature f) as the map sees it. A bytes
 * feature that is not one scalar is only passed through: no op takes it. */
static void row_view(const struct fmt_feature_spec *f, const struct fmt_column *c, size_t r, struct map_tensor *t)
{
    memset(t, 0, sizeof *t);
    t->dtype = (enum map_dtype)f->dtype;
    if (f->dtype == FMT_DTYPE_BYTES) {
        if (!f->varlen && f->rank == 0) {
            t->data = (const uint8_t *)c->values + c->bytes_offsets[r];
            t->bytes = (size_t)(c->bytes_offsets[r + 1] - c->bytes_offsets[r]);
        }
        return;
    }
    size_t size = fmt_dtype_size(f->dtype);
    if (f->varlen) {
        t->rank = 1;
        t->shape[0] = (int64_t)(c->row_splits[r + 1] - c->row_splits[r]);
        t->data = (const uint8_t *)c->values + c->row_splits[r] * size;
        t->bytes = (size_t)t->shape[0] * size;
        return;
    }
    size_t n = fmt_feature_spec_count(f);
    t->rank = f->rank;
    for (int k = 0; k < f->rank; k++)
        t->shape[k] = f->shape[k];
    t->data = (const uint8_t *)c->values + r * n * size;
    t->bytes = n * size;
}

/* Map each element of the decoded piece (cols) and copy its fixed-size
 * features leaving the map to their rows in buf (feature i at off[i],
 * rb[i] bytes a row; rb[i] 0: not fixed, laid out later). Timed as the
 * map stage. */
static int map_rows(struct feed_assembler *a, const struct feed_piece *piece, const struct fmt_column *cols,
                    uint8_t *buf, const uint64_t *off, const size_t *rb, struct sl_error *err)
{
    uint64_t cpu0 = sl_clock_thread_cpu_ns(), wall0 = sl_clock_ns();
    int rc = 0;
    for (size_t r = 0; r < piece->n && rc == 0; r++) {
        const struct feed_elem *e = &piece->elems[r];
        for (size_t k = 0; k < a->nspecs; k++)
            row_view(&a->specs[k], &cols[k], r, &a->in_t[k]);
        struct map_key key = {a->seed, piece->epoch, a->first_id[e->file] + e->record};
        void *dst[FEED_MAX_TENSORS];
        for (size_t i = 0; i < a->nout && i < FEED_MAX_TENSORS; i++)
            dst[i] = rb[i] != 0 ? buf + off[i] + r * rb[i] : NULL;
        rc = map_runner_run_into(a->runner, &key, a->in_t, a->out_t, dst, err);
        if (rc != 0) {
            if (rc != SL_ENOMEM)
                sl_error_prefix(err, "%s: %s %llu at %llu: element %llu: ", feed_source_path(a->src, e->file),
                                a->ops->element, (unsigned long long)e->record,
                                (unsigned long long)feed_source_offset(a->src, e->file, e->record),
                                (unsigned long long)key.element);
            break;
        }
        for (size_t i = 0; i < a->nout; i++) {
            if (rb[i] == 0)
                continue;
            if (a->out_t[i].bytes != rb[i]) { /* the map's contract: never expected */
                rc = sl_error_set(err, SL_EINVAL, "element %llu: feature '%s' left the map with %zu bytes, not %zu",
                                  (unsigned long long)key.element, a->out[i].name, a->out_t[i].bytes, rb[i]);
                break;
            }
            if (a->out_t[i].data != dst[i]) /* written in place by the feature's last op, or passed on */
                memcpy(dst[i], a->out_t[i].data, rb[i]);
        }
    }
    a->map_cpu += sl_clock_thread_cpu_ns() - cpu0;
    a->map_wall += sl_clock_ns() - wall0;
    for (size_t i = 0; a->op_ns != NULL && i < map_plan_nops(a->plan); i++) {
        uint64_t now = map_runner_op_ns(a->runner, i);
        __atomic_fetch_add(&a->op_ns[i], now - a->op_ns_seen[i], __ATOMIC_RELAXED);
        a->op_ns_seen[i] = now;
    }
    return rc;
}

/* fill_piece with the map: every record decoded into the batch's own
 * columns, then element by element its features mapped and the fixed ones
 * leaving the map copied to their rows in the buffer; the features the map
 * leaves variable-size (untouched ones) copied in after, as fill_piece
 * does. */
static int fill_mapped(struct feed_assembler *a, const struct feed_piece *piece, uint8_t *buf, size_t cap,
                       struct feed_layout *out, struct sl_error *err)
{
    int rc = layout_start(a, piece, out, err);
    if (rc != 0)
        return rc;
    fmt_batch_reset(a->batch);
    fmt_batch_unbind(a->batch);
    uint64_t off[FEED_MAX_TENSORS];
    size_t rb[FEED_MAX_TENSORS];
    for (size_t i = 0; i < a->nout; i++) {
        const struct fmt_feature_spec *f = &a->out[i];
        rb[i] = f->varlen || f->dtype == FMT_DTYPE_BYTES ? 0 : fmt_feature_spec_count(f) * fmt_dtype_size(f->dtype);
        if (rb[i] == 0)
            continue;
        if ((rc = reserve(a, piece, out, cap, (uint64_t)rb[i] * piece->n, &off[i], err)) != 0)
            return rc;
    }
    /* the variable-size columns are laid out after the map: no stop at the buffer while decoding */
    if ((rc = decode_records(a, piece, NULL, cap, err)) != 0)
        return rc;
    struct fmt_column cols[FEED_MAX_TENSORS];
    for (size_t k = 0; k < a->nspecs && k < FEED_MAX_TENSORS; k++)
        fmt_batch_column(a->batch, k, &cols[k]);
    rc = map_rows(a, piece, cols, buf, off, rb, err);
    if (rc != 0)
        return rc;
    for (size_t i = 0; i < a->nout; i++) {
        if (rb[i] != 0) {
            placed(out, &a->out[i], piece->n, off[i], (uint64_t)rb[i] * piece->n);
            continue;
        }
        /* untouched and variable-size: the decoded column, as fill_piece */
        const struct fmt_column *c = &cols[map_plan_out_source(a->plan, i)];
        if ((rc = put_piece_column(a, piece, out, buf, cap, &a->out[i], c, err)) != 0)
            return rc;
    }
    return 0;
}

void feed_assembler_use_fetch(struct feed_assembler *a, struct feed_fetch *fetch)
{
    feed_reader_use(a->rd, fetch);
}

int feed_assembler_fill(struct feed_assembler *a, const struct feed_piece *piece, uint8_t *buf, size_t cap,
                        struct feed_layout *out, struct sl_error *err)
{
    uint64_t icpu0, iwall0, icpu1, iwall1;
    feed_reader_inflate_ns(a->rd, &icpu0, &iwall0);
    uint64_t cpu0 = sl_clock_thread_cpu_ns(), wall0 = sl_clock_ns();
    uint64_t rw0 = a->read_wall, dw0 = a->decode_wall, n0 = a->sampled, calls0 = a->tick, rb0 = a->read_bytes;
    uint64_t hits0 = a->hits, misses0 = a->misses, mcpu0 = a->map_cpu, mwall0 = a->map_wall;
    int rc = 0;
    if (a->runner != NULL)
        rc = fill_mapped(a, piece, buf, cap, out, err);
    else if (a->cache == NULL || fill_cached(a, piece, buf, cap, out, err) != 0) /* errors: as without the cache */
        rc = fill_piece(a, piece, buf, cap, out, err);
    sl_metrics_add(a->metrics, FEED_M_CACHE_HITS, a->hits - hits0);
    sl_metrics_add(a->metrics, FEED_M_CACHE_MISSES, a->misses - misses0);
    /* between pieces hold no cached image: a reader waiting for cache room
     * must not wait on an idle executor */
    feed_reader_release(a->rd);
    uint64_t cpu = sl_clock_thread_cpu_ns() - cpu0, wall = sl_clock_ns() - wall0;
    feed_reader_inflate_ns(a->rd, &icpu1, &iwall1);
    uint64_t icpu = icpu1 - icpu0, iwall = iwall1 - iwall0;
    cpu = cpu > icpu ? cpu - icpu : 0;
    wall = wall > iwall ? wall - iwall : 0;
    /* the map's time is its own stage: out of the piece's before sharing */
    uint64_t mcpu = a->map_cpu - mcpu0, mwall = a->map_wall - mwall0;
    mcpu = mcpu < cpu ? mcpu : cpu;
    cpu -= mcpu;
    wall = wall > mwall ? wall - mwall : 0;
    sl_metrics_add(a->metrics, FEED_M_MAP_NS, mcpu);
    sl_metrics_add(a->metrics, FEED_M_DECOMPRESS_NS, icpu);
    sl_metrics_add(a->metrics, FEED_M_READ_BYTES, a->read_bytes - rb0);
    /* scale the sampled reads up to all of this piece's reads (a tar
     * piece reads each sample once per column), then share the piece's CPU
     * time in the proportions its wall time was spent */
    double read_w = 0, decode_w = 0, n = (double)(a->sampled - n0);
    if (n > 0) {
        double scale = (double)(a->tick - calls0) / n;
        read_w = (double)(a->read_wall - rw0) * scale;
        decode_w = (double)(a->decode_wall - dw0) * scale;
    }
    uint64_t read = 0, decode = 0;
    if (wall > 0 && read_w + decode_w > 0) {
        double share = (read_w + decode_w) / (double)wall;
        if (share > 1)
            share = 1;
        read = (uint64_t)((double)cpu * share * read_w / (read_w + decode_w));
        decode = (uint64_t)((double)cpu * share * decode_w / (read_w + decode_w));
        if (read + decode > cpu) /* rounding */
            decode = cpu - read;
    }
    sl_metrics_add(a->metrics, FEED_M_READ_NS, read);
    sl_metrics_add(a->metrics, FEED_M_DECODE_NS, decode);
    sl_metrics_add(a->metrics, FEED_M_ASSEMBLE_NS, cpu - read - decode);
    return rc;
}
