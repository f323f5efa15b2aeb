/* feed_assemble: decode a piece's records into a per-thread batch of
 * columns, then lay each column out in the caller's buffer, each tensor at
 * a 64-byte boundary (so a device copy of any tensor starts aligned).
 *
 * Fixed-size numeric and uint8 columns are decoded straight into the
 * buffer (fmt_batch_bind); only variable-size columns (bytes, ragged) are
 * decoded into the batch's own storage and copied in after. */
#include "feed_assemble.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    enum fmt_format format;
    uint64_t *offsets; /* text: max_rows + 1 line offsets */
    /* stage accounting: every 8th record's read and decode are timed
     * (wall); each piece's thread CPU time is split in those proportions */
    uint64_t tick; /* reads so far */
    uint64_t read_wall, decode_wall, sampled;
    struct feed_stage_times times;
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

/* feed_reader_get, timed when `timed` (a sampled record) */
static int get_record(struct feed_assembler *a, int timed, uint32_t file, uint64_t rec, const uint8_t **data,
                      size_t *len, struct sl_error *err)
{
    if (!timed)
        return feed_reader_get(a->rd, file, rec, data, len, err);
    struct read_timer t;
    read_timer_start(a, &t);
    int rc = feed_reader_get(a->rd, file, rec, data, len, err);
    read_timer_stop(a, &t);
    return rc;
}

/* feed_reader_sample, timed on sampled calls */
static int get_sample(struct feed_assembler *a, uint32_t file, uint64_t sample, const struct feed_field **fields,
                      size_t *n, struct sl_error *err)
{
    if (!sampling(a))
        return feed_reader_sample(a->rd, file, sample, fields, n, err);
    struct read_timer t;
    read_timer_start(a, &t);
    int rc = feed_reader_sample(a->rd, file, sample, fields, n, err);
    read_timer_stop(a, &t);
    return rc;
}

static enum feed_dtype dtype_of(enum fmt_dtype t)
{
    switch (t) {
    case FMT_DTYPE_INT64: return FEED_DT_INT64;
    case FMT_DTYPE_FLOAT32: return FEED_DT_FLOAT32;
    case FMT_DTYPE_UINT8: return FEED_DT_UINT8;
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
                          size_t nspecs, enum fmt_format format, size_t max_rows, struct sl_error *err)
{
    *out = NULL;
    struct feed_assembler *a = sl_calloc(1, sizeof *a);
    if (a == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    a->src = src;
    a->specs = specs;
    a->nspecs = nspecs;
    a->max_rows = max_rows;
    a->format = format;
    if (format == FMT_FORMAT_TEXT && (nspecs != 1 || specs[0].dtype != FMT_DTYPE_BYTES || specs[0].rank != 0)) {
        sl_free(a);
        return sl_error_set(err, SL_EINVAL, "text lines need exactly one scalar bytes feature");
    }
    for (size_t i = 0; format == FMT_FORMAT_TAR && i < nspecs; i++)
        if (specs[i].varlen || (specs[i].dtype == FMT_DTYPE_BYTES && specs[i].rank != 0)) {
            sl_free(a);
            return sl_error_set(err, SL_EINVAL,
                                "feature %s: tar fields are scalar bytes or fixed-shape int64/float32/uint8",
                                specs[i].name);
        }
    int rc = feed_reader_open(&a->rd, src, err);
    if (rc == 0 && format != FMT_FORMAT_TFRECORD && (a->offsets = sl_calloc(max_rows + 1, sizeof *a->offsets)) == NULL)
        rc = sl_error_set(err, SL_ENOMEM, "out of memory");
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
    feed_reader_close(a->rd);
    fmt_batch_destroy(a->batch);
    sl_free(a->offsets);
    sl_free(a);
}

/* A piece that does not fit its buffer: the error names the element where
 * it overflowed (file, element, byte offset), so the operator can find the
 * oversized record and size --max-piece-bytes. */
static int too_big(const struct feed_assembler *a, const struct feed_piece *piece, size_t i, const char *what,
                   uint64_t need, size_t cap, struct sl_error *err)
{
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

/* Text lines: the lines' bytes straight into the buffer, then their
 * offsets: NAME (bytes, [rows]) and NAME.offsets (int64, [rows + 1]). */
static int fill_lines(struct feed_assembler *a, const struct feed_piece *piece, uint8_t *buf, size_t cap,
                      struct feed_layout *out, struct sl_error *err)
{
    memset(out, 0, sizeof *out);
    out->rows = piece->n;
    uint64_t used = 0;
    a->offsets[0] = 0;
    for (size_t i = 0; i < piece->n; i++) {
        const struct feed_elem *e = &piece->elems[i];
        const uint8_t *data;
        size_t len;
        int rc = get_record(a, sampling(a), e->file, e->record, &data, &len, err);
        if (rc != 0) {
            sl_error_prefix(err, "%s: line %llu: ", feed_source_path(a->src, e->file), (unsigned long long)e->record);
            return rc;
        }
        if (len > cap || used > cap - len)
            return too_big(a, piece, i, "line", used + len, cap, err);
        if (len)
            memcpy(buf + used, data, len);
        used += len;
        a->offsets[i + 1] = used;
    }
    struct feed_tensor *t = &out->t[out->ntensors++];
    t->dtype = FEED_DT_BYTES;
    t->rank = 1;
    t->dims[0] = (int64_t)piece->n;
    t->off = 0;
    t->bytes = used;
    out->total = used;
    int64_t dims[1] = {(int64_t)piece->n + 1};
    int rc = put(out, buf, cap, FEED_DT_INT64, 1, dims, a->offsets, (piece->n + 1) * sizeof(uint64_t), err);
    return rc == SL_EINVAL ? too_big(a, piece, piece->n - 1, "line", 0, cap, err) : rc;
}

/* Numbers written as text (WebDataset's .cls, .idx): decimal values
 * separated by spaces, commas or newlines. Writes up to `count`, returns
 * how many there are, or -1 at a token that is not a number. */
static long parse_numbers(const uint8_t *p, size_t len, enum fmt_dtype t, void *out, size_t count)
{
    char tok[64];
    long n = 0;
    size_t i = 0;
    while (i < len) {
        while (i < len && (p[i] == ' ' || p[i] == ',' || p[i] == '\n' || p[i] == '\r' || p[i] == '\t'))
            i++;
        if (i == len)
            break;
        size_t k = 0;
        while (i < len && !(p[i] == ' ' || p[i] == ',' || p[i] == '\n' || p[i] == '\r' || p[i] == '\t')) {
            if (k + 1 >= sizeof tok)
                return -1;
            tok[k++] = (char)p[i++];
        }
        tok[k] = '\0';
        char *end;
        errno = 0;
        if (t == FMT_DTYPE_INT64) {
            long long v = strtoll(tok, &end, 10);
            if (*end != '\0' || errno != 0)
                return -1;
            if ((size_t)n < count)
                ((int64_t *)out)[n] = v;
        } else {
            float v = strtof(tok, &end);
            if (*end != '\0')
                return -1;
            if ((size_t)n < count)
                ((float *)out)[n] = v;
        }
        n++;
    }
    return n;
}

static const struct feed_field *find_field(const struct feed_field *f, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(f[i].name, name) == 0)
            return &f[i];
    return NULL;
}

static const char *tf_type(enum fmt_dtype t)
{
    return t == FMT_DTYPE_INT64 ? "int64" : t == FMT_DTYPE_FLOAT32 ? "float" : "string";
}

/* Tar samples: each feature is the field (member) named by its extension.
 * Fixed-shape int64 / float32 are numbers written as text; uint8 is the
 * raw bytes (exactly prod(shape) of them); bytes is a scalar string. Column
 * by column, fixed-size ones straight into place. */
static int fill_tar(struct feed_assembler *a, const struct feed_piece *piece, uint8_t *buf, size_t cap,
                    struct feed_layout *out, struct sl_error *err)
{
    memset(out, 0, sizeof *out);
    out->rows = piece->n;
    for (size_t i = 0; i < a->nspecs; i++) {
        const struct fmt_feature_spec *f = &a->specs[i];
        enum feed_dtype dt = dtype_of(f->dtype);
        size_t count = fmt_feature_spec_count(f);
        int bytes_col = f->dtype == FMT_DTYPE_BYTES;
        size_t esize = f->dtype == FMT_DTYPE_UINT8 ? 1 : bytes_col ? 0 : fmt_dtype_size(f->dtype);
        /* sizes: fixed from the shape; bytes from a first pass */
        uint64_t total = 0;
        size_t over = piece->n; /* the first row past the buffer */
        for (size_t r = 0; bytes_col && r < piece->n; r++) {
            const struct feed_field *fl;
            size_t nf;
            int rc = get_sample(a, piece->elems[r].file, piece->elems[r].record, &fl, &nf, err);
            if (rc != 0)
                return rc;
            const struct feed_field *x = find_field(fl, nf, f->name);
            total += x ? x->len : f->has_default ? f->default_bytes_len : 0;
            if (over == piece->n && total > cap)
                over = r;
        }
        if (!bytes_col)
            total = (uint64_t)count * esize * piece->n;
        uint64_t off = round_up(out->total);
        if (off > cap || total > cap - off)
            return too_big(a, piece, over < piece->n ? over : 0, "sample", off + total, cap, err);
        uint8_t *dst = buf + off;
        uint64_t used = 0;
        if (bytes_col)
            a->offsets[0] = 0;
        for (size_t r = 0; r < piece->n; r++) {
            const struct feed_elem *e = &piece->elems[r];
            const struct feed_field *fl;
            size_t nf;
            int rc = get_sample(a, e->file, e->record, &fl, &nf, err);
            if (rc != 0)
                return rc;
            const struct feed_field *x = find_field(fl, nf, f->name);
            const char *path = feed_source_path(a->src, e->file);
            if (x == NULL && !f->has_default)
                return sl_error_set(err, SL_EINVAL,
                                    "%s: sample %llu: Feature: %s (data type: %s) is required but could not be found.",
                                    path, (unsigned long long)e->record, f->name, tf_type(f->dtype));
            if (bytes_col) {
                const uint8_t *src = x ? x->data : f->default_bytes;
                size_t len = x ? x->len : f->default_bytes_len;
                if (len)
                    memcpy(dst + used, src, len);
                used += len;
                a->offsets[r + 1] = used;
                continue;
            }
            uint8_t *row = dst + (uint64_t)r * count * esize;
            if (x == NULL) {
                for (size_t k = 0; k < count; k++) {
                    if (f->dtype == FMT_DTYPE_INT64)
                        memcpy(row + 8 * k, &f->default_i64, 8);
                    else if (f->dtype == FMT_DTYPE_FLOAT32)
                        memcpy(row + 4 * k, &f->default_f32, 4);
                    else
                        row[k] = f->default_u8;
                }
                continue;
            }
            long n;
            if (f->dtype == FMT_DTYPE_UINT8) {
                n = (long)x->len;
                if ((size_t)n == count)
                    memcpy(row, x->data, count);
            } else {
                n = parse_numbers(x->data, x->len, f->dtype, row, count);
                if (n < 0)
                    return sl_error_set(err, SL_ECORRUPT, "%s: sample %llu: field '%s' is not a list of %s numbers",
                                        path, (unsigned long long)e->record, f->name, tf_type(f->dtype));
            }
            if ((size_t)n != count)
                return sl_error_set(err, SL_EINVAL,
                                    "%s: sample %llu: Key: %s.  Number of %s values != expected.  Values size: %ld "
                                    "but expected %zu",
                                    path, (unsigned long long)e->record, f->name,
                                    f->dtype == FMT_DTYPE_UINT8 ? "uint8" : tf_type(f->dtype), n, count);
        }
        struct feed_tensor *t = &out->t[out->ntensors++];
        t->dtype = dt;
        t->rank = f->rank + 1;
        t->dims[0] = (int64_t)piece->n;
        for (int k = 0; k < f->rank; k++)
            t->dims[k + 1] = f->shape[k];
        t->off = off;
        t->bytes = bytes_col ? used : total;
        out->total = off + t->bytes;
        if (bytes_col) {
            int64_t dims[1] = {(int64_t)piece->n + 1};
            int rc = put(out, buf, cap, FEED_DT_INT64, 1, dims, a->offsets, (piece->n + 1) * sizeof(uint64_t), err);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

static int fill_piece(struct feed_assembler *a, const struct feed_piece *piece, uint8_t *buf, size_t cap,
                      struct feed_layout *out, struct sl_error *err)
{
    if (piece->n > a->max_rows)
        return sl_error_set(err, SL_EINVAL, "piece of %zu rows exceeds the assembler's %zu", piece->n, a->max_rows);
    if (a->format == FMT_FORMAT_TEXT)
        return fill_lines(a, piece, buf, cap, out, err);
    if (a->format == FMT_FORMAT_TAR)
        return fill_tar(a, piece, buf, cap, out, err);
    memset(out, 0, sizeof *out);
    out->rows = piece->n;
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
        uint64_t off = round_up(out->total), bytes = (uint64_t)rb * piece->n;
        if (off > cap || bytes > cap - off)
            return too_big(a, piece, 0, "record", off + bytes, cap, err);
        int rc = fmt_batch_bind(a->batch, i, buf + off, (size_t)bytes, err);
        if (rc != 0)
            return rc;
        fixed_off[i] = off;
        out->total = off + bytes;
    }
    /* a shuffled piece's records are scattered over the files: ask for
     * the next ones while this one is checked and decoded */
    enum { AHEAD = 2 }; /* measured: 2 beats 0, 4, 8 and 16 (docs/performance.md) */
    for (size_t i = 0; i < piece->n && i < AHEAD; i++)
        feed_reader_prefetch(a->rd, piece->elems[i].file, piece->elems[i].record);
    for (size_t i = 0; i < piece->n; i++) {
        const struct feed_elem *e = &piece->elems[i];
        if (i + AHEAD < piece->n)
            feed_reader_prefetch(a->rd, piece->elems[i + AHEAD].file, piece->elems[i + AHEAD].record);
        const uint8_t *data;
        size_t len;
        int timed = sampling(a);
        int rc = get_record(a, timed, e->file, e->record, &data, &len, err);
        if (rc == 0 && timed) {
            uint64_t t0 = sl_clock_ns();
            rc = fmt_batch_add(a->batch, data, len, err);
            a->decode_wall += sl_clock_ns() - t0;
        } else if (rc == 0) {
            rc = fmt_batch_add(a->batch, data, len, err);
        }
        if (rc != 0) {
            if (rc != SL_ENOMEM)
                sl_error_prefix(err, "%s: record %llu at %llu: ", feed_source_path(a->src, e->file),
                                (unsigned long long)e->record,
                                (unsigned long long)feed_source_offset(a->src, e->file, e->record));
            return rc;
        }
    }
    for (size_t i = 0; i < a->nspecs; i++) {
        const struct fmt_feature_spec *f = &a->specs[i];
        struct fmt_column c;
        fmt_batch_column(a->batch, i, &c);
        enum feed_dtype dt = dtype_of(f->dtype);
        int64_t dims[FEED_MAX_RANK];
        int rc = 0;
        if (fmt_batch_row_bytes(a->batch, i) != 0) {
            /* already in place */
            struct feed_tensor *t = &out->t[out->ntensors++];
            t->dtype = dt;
            t->rank = f->rank + 1;
            t->dims[0] = (int64_t)c.rows;
            for (int k = 0; k < f->rank; k++)
                t->dims[k + 1] = f->shape[k];
            t->off = fixed_off[i];
            t->bytes = c.value_bytes;
            continue;
        }
        if (f->varlen) {
            dims[0] = (int64_t)c.nvalues;
            rc = put(out, buf, cap, dt, 1, dims, c.values, c.value_bytes, err);
            dims[0] = (int64_t)c.rows + 1;
            if (rc == 0)
                rc = put(out, buf, cap, FEED_DT_INT64, 1, dims, c.row_splits, (c.rows + 1) * sizeof(uint64_t), err);
        } else {
            dims[0] = (int64_t)c.rows;
            for (int k = 0; k < f->rank; k++)
                dims[k + 1] = f->shape[k];
            rc = put(out, buf, cap, dt, f->rank + 1, dims, c.values, c.value_bytes, err);
        }
        if (rc == 0 && dt == FEED_DT_BYTES) {
            dims[0] = (int64_t)c.nvalues + 1;
            rc = put(out, buf, cap, FEED_DT_INT64, 1, dims, c.bytes_offsets, (c.nvalues + 1) * sizeof(uint64_t), err);
        }
        if (rc == SL_EINVAL) /* put(): past the buffer */
            return too_big(a, piece, 0, "record", 0, cap, err);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int feed_assembler_fill(struct feed_assembler *a, const struct feed_piece *piece, uint8_t *buf, size_t cap,
                        struct feed_layout *out, struct sl_error *err)
{
    uint64_t icpu0, iwall0, icpu1, iwall1;
    feed_reader_inflate_ns(a->rd, &icpu0, &iwall0);
    uint64_t cpu0 = sl_clock_thread_cpu_ns(), wall0 = sl_clock_ns();
    uint64_t rw0 = a->read_wall, dw0 = a->decode_wall, n0 = a->sampled, calls0 = a->tick;
    int rc = fill_piece(a, piece, buf, cap, out, err);
    /* between pieces hold no cached image: a reader waiting for cache room
     * must not wait on an idle executor */
    feed_reader_release(a->rd);
    uint64_t cpu = sl_clock_thread_cpu_ns() - cpu0, wall = sl_clock_ns() - wall0;
    feed_reader_inflate_ns(a->rd, &icpu1, &iwall1);
    uint64_t icpu = icpu1 - icpu0, iwall = iwall1 - iwall0;
    cpu = cpu > icpu ? cpu - icpu : 0;
    wall = wall > iwall ? wall - iwall : 0;
    a->times.decompress += (double)icpu / 1e9;
    /* scale the sampled reads up to all of this piece's reads (a tar
     * piece reads each sample once per column), then share the piece's CPU
     * time in the proportions its wall time was spent */
    double read_w = 0, decode_w = 0, n = (double)(a->sampled - n0);
    if (n > 0) {
        double scale = (double)(a->tick - calls0) / n;
        read_w = (double)(a->read_wall - rw0) * scale;
        decode_w = (double)(a->decode_wall - dw0) * scale;
    }
    double c = (double)cpu / 1e9, read = 0, decode = 0;
    if (wall > 0 && read_w + decode_w > 0) {
        double share = (read_w + decode_w) / (double)wall;
        if (share > 1)
            share = 1;
        read = c * share * read_w / (read_w + decode_w);
        decode = c * share * decode_w / (read_w + decode_w);
    }
    a->times.read += read;
    a->times.decode += decode;
    a->times.assemble += c - read - decode;
    return rc;
}

void feed_assembler_times(const struct feed_assembler *a, struct feed_stage_times *out)
{
    *out = a->times;
}
