/* fmt_features: serialized Examples -> typed batch columns.
 *
 * fmt_batch_add makes one pass over the Example's map entries and, for each
 * declared feature, remembers only where its winning Feature lies (the last
 * non-empty occurrence; for a variable-length feature simply the last one).
 * Entries whose keys are not declared are skipped unparsed. Each winner is
 * then decoded once, straight into its column at the row being added: fixed
 * columns are preallocated at create for `capacity` rows, so the common row
 * (an image as one bytes value plus a few int64 scalars) costs a handful of
 * varint reads and one memcpy. Variable-length and bytes columns grow
 * geometrically up to MAX_COLUMN_BYTES.
 *
 * A row is staged before it is committed: decoding writes past the committed
 * end of each column (t_values_len / t_nvalues), and only when every feature
 * decoded do the committed counts move. An error therefore leaves the batch
 * exactly as it was, apart from spare capacity.
 *
 * Error texts follow TensorFlow's example_proto_fast_parsing.cc without its
 * "Name: <name>, " head (the caller puts "<path>:<offset>: " there).
 *
 * fmt_batch_add_fields stages and commits a row the same way from named
 * raw fields (what the tar and text formats' decode hands it) instead of
 * an Example: each column looks its name up among the few fields.
 */
#include "fmt_features.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmt_format.h"
#include "fmt_types.h"

#include "sl_alloc.h"

#define MAX_COLUMN_BYTES ((size_t)1 << (sizeof(size_t) > 4 ? 36 : 30))
#define LINEAR_LOOKUP_MAX 8

struct column {
    struct fmt_feature_spec spec;
    uint8_t *default_bytes; /* owned copy of spec.default_bytes */
    size_t key_len;
    size_t count;       /* fixed-length: values per row */
    size_t esize;       /* bytes per value in `values` (1 for BYTES, UINT8) */
    enum fmt_kind kind; /* the Feature kind that feeds this column */
    char shape[FMT_MAX_RANK * 22 + 3];

    uint8_t *values;     /* own storage, or the bound caller memory */
    uint8_t *own_values; /* what the column allocated (freed at destroy) */
    size_t bound_rows;   /* bound: rows that fit in the caller's memory; 0: not bound */
    size_t values_cap;   /* bytes */
    uint64_t *offsets;   /* BYTES: value byte offsets */
    size_t offsets_cap;  /* entries */
    uint64_t *splits;    /* varlen: capacity + 1 entries */
    size_t values_len;   /* committed bytes in values */
    size_t nvalues;      /* committed values (strings for BYTES) */

    /* the row being added; staged: a varlen or BYTES column, whose row is
     * staged in t_values_len / t_nvalues (a fixed numeric column's row has
     * its place, row * count, and needs no staging) */
    int staged;
    size_t t_values_len, t_nvalues;
    int seen;
    const uint8_t *feat;
    size_t feat_len;
};

struct fmt_batch {
    size_t ncols, capacity, rows;
    struct column *cols;
    uint32_t *table; /* open addressing: column index + 1, 0 empty; NULL for few columns */
    size_t table_mask;
};

size_t fmt_feature_spec_count(const struct fmt_feature_spec *s)
{
    if (s->varlen)
        return 0;
    size_t n = 1;
    for (int i = 0; i < s->rank && i < FMT_MAX_RANK; i++) {
        if (s->shape[i] < 0)
            return 0;
        uint64_t d = (uint64_t)s->shape[i];
        if (d != 0 && n > SIZE_MAX / d)
            return SIZE_MAX;
        n *= (size_t)d;
    }
    return n;
}

/* ---- create / destroy -------------------------------------------------- */

static uint64_t hash_key(const void *key, size_t len)
{
    const uint8_t *p = key;
    uint64_t h = 0xcbf29ce484222325u; /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3u;
    return h;
}

static void format_shape(char *buf, size_t cap, const struct fmt_feature_spec *s)
{
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < s->rank && n < cap; i++) {
        if (s->shape[i] < 0)
            n += (size_t)snprintf(buf + n, cap - n, "%s?", i ? "," : "");
        else
            n += (size_t)snprintf(buf + n, cap - n, "%s%" PRId64, i ? "," : "", s->shape[i]);
    }
    if (n < cap)
        snprintf(buf + n, cap - n, "]");
}

static int mul_ok(size_t a, size_t b, size_t *out)
{
    if (b != 0 && a > SIZE_MAX / b)
        return 0;
    *out = a * b;
    return 1;
}

static int column_init(struct column *c, const struct fmt_feature_spec *s, size_t idx, size_t capacity,
                       struct sl_error *err)
{
    if (memchr(s->name, '\0', sizeof s->name) == NULL)
        return sl_error_set(err, SL_EINVAL, "feature #%zu: name is not NUL-terminated", idx);
    if ((unsigned)s->dtype > FMT_DTYPE_UINT8)
        return sl_error_set(err, SL_EINVAL, "Invalid config dtype: %d (feature %s)", (int)s->dtype, s->name);
    c->spec = *s;
    c->spec.varlen = s->varlen != 0;
    c->key_len = strlen(s->name);
    c->kind = s->dtype == FMT_DTYPE_INT64     ? FMT_KIND_INT64
              : s->dtype == FMT_DTYPE_FLOAT32 ? FMT_KIND_FLOAT
                                              : FMT_KIND_BYTES;
    c->esize = s->dtype == FMT_DTYPE_BYTES ? 1 : fmt_dtype_size(s->dtype);
    c->staged = c->spec.varlen || s->dtype == FMT_DTYPE_BYTES;
    c->spec.default_bytes = NULL;
    c->spec.default_bytes_len = 0;

    if (c->spec.varlen) {
        c->spec.has_default = 0;
        c->spec.rank = 0;
        snprintf(c->shape, sizeof c->shape, "[?]");
        c->splits = sl_malloc((capacity + 1) * sizeof *c->splits);
        c->values_cap = 4096;
        c->values = sl_malloc(c->values_cap);
        if (c->splits == NULL || c->values == NULL)
            return sl_error_set(err, SL_ENOMEM, "out of memory for feature %s", s->name);
        c->splits[0] = 0;
        if (s->dtype == FMT_DTYPE_BYTES) {
            c->offsets_cap = capacity + 1;
            if ((c->offsets = sl_malloc(c->offsets_cap * sizeof *c->offsets)) == NULL)
                return sl_error_set(err, SL_ENOMEM, "out of memory for feature %s", s->name);
            c->offsets[0] = 0;
        }
        return 0;
    }

    if (s->rank < 0 || s->rank > FMT_MAX_RANK)
        return sl_error_set(err, SL_EINVAL, "feature %s: rank %d is outside 0..%d", s->name, s->rank, FMT_MAX_RANK);
    format_shape(c->shape, sizeof c->shape, s);
    for (int i = 0; i < s->rank; i++)
        if (s->shape[i] < 0)
            return sl_error_set(err, SL_EINVAL,
                                "All dimensions of shape for feature %s need to be known but received %s.", s->name,
                                c->shape);
    c->count = fmt_feature_spec_count(s);
    size_t per_batch, bytes;
    if (c->count == SIZE_MAX || !mul_ok(c->count, capacity, &per_batch) || !mul_ok(per_batch, c->esize, &bytes) ||
        bytes > MAX_COLUMN_BYTES)
        return sl_error_set(err, SL_EINVAL, "feature %s: %zu rows of shape %s are too large", s->name, capacity,
                            c->shape);
    if (s->dtype == FMT_DTYPE_BYTES) {
        if (s->has_default && s->default_bytes_len) {
            if (s->default_bytes == NULL)
                return sl_error_set(err, SL_EINVAL, "feature %s: default_bytes is NULL", s->name);
            if ((c->default_bytes = sl_malloc(s->default_bytes_len)) == NULL)
                return sl_error_set(err, SL_ENOMEM, "out of memory for feature %s", s->name);
            memcpy(c->default_bytes, s->default_bytes, s->default_bytes_len);
            c->spec.default_bytes = c->default_bytes;
            c->spec.default_bytes_len = s->default_bytes_len;
        }
        c->offsets_cap = per_batch + 1;
        c->offsets = sl_malloc(c->offsets_cap * sizeof *c->offsets);
        c->values_cap = 4096;
        c->values = sl_malloc(c->values_cap);
        if (c->offsets == NULL || c->values == NULL)
            return sl_error_set(err, SL_ENOMEM, "out of memory for feature %s", s->name);
        c->offsets[0] = 0;
        return 0;
    }
    c->values_cap = bytes;
    if ((c->values = c->own_values = sl_malloc(bytes)) == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory for feature %s (%zu bytes)", s->name, bytes);
    return 0;
}

/* Feature keys are short ("image", "label"): an inline loop rather than a
 * call to memcmp, which held a tenth of the feeder's decode-thread samples
 * (much of it waiting on memory, so the net gain is smaller; see
 * docs/performance.md). */
static int key_equal(const struct column *c, const uint8_t *key, size_t len)
{
    if (c->key_len != len)
        return 0;
    const uint8_t *name = (const uint8_t *)c->spec.name;
    for (size_t i = 0; i < len; i++)
        if (name[i] != key[i])
            return 0;
    return 1;
}

static struct column *find_column(const struct fmt_batch *b, const uint8_t *key, size_t len)
{
    if (b->table == NULL) {
        for (size_t i = 0; i < b->ncols; i++)
            if (key_equal(&b->cols[i], key, len))
                return &b->cols[i];
        return NULL;
    }
    for (size_t h = (size_t)hash_key(key, len) & b->table_mask;; h = (h + 1) & b->table_mask) {
        uint32_t slot = b->table[h];
        if (slot == 0)
            return NULL;
        if (key_equal(&b->cols[slot - 1], key, len))
            return &b->cols[slot - 1];
    }
}

int fmt_batch_create(struct fmt_batch **out, const struct fmt_feature_spec *specs, size_t nspecs, size_t capacity,
                     struct sl_error *err)
{
    *out = NULL;
    if (capacity == 0)
        return sl_error_set(err, SL_EINVAL, "batch capacity must be at least 1");
    if (capacity > SIZE_MAX / 64 || nspecs > UINT32_MAX / 4)
        return sl_error_set(err, SL_EINVAL, "batch of %zu rows and %zu features is too large", capacity, nspecs);
    if (nspecs > 0 && specs == NULL)
        return sl_error_set(err, SL_EINVAL, "feature specs are NULL");
    struct fmt_batch *b = sl_calloc(1, sizeof *b);
    if (b == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory creating a batch");
    b->capacity = capacity;
    int rc = 0;
    if (nspecs > 0 && (b->cols = sl_calloc(nspecs, sizeof *b->cols)) == NULL) {
        rc = sl_error_set(err, SL_ENOMEM, "out of memory creating a batch");
        goto out_destroy;
    }
    for (size_t i = 0; i < nspecs; i++) {
        b->ncols = i + 1; /* so destroy frees a partly built column */
        if ((rc = column_init(&b->cols[i], &specs[i], i, capacity, err)) != 0)
            goto out_destroy;
        for (size_t j = 0; j < i; j++)
            if (strcmp(b->cols[j].spec.name, b->cols[i].spec.name) == 0) {
                rc = sl_error_set(err, SL_EINVAL, "feature %s is declared twice", specs[i].name);
                goto out_destroy;
            }
    }
    if (nspecs > LINEAR_LOOKUP_MAX) {
        size_t size = 16;
        while (size < 2 * nspecs)
            size *= 2;
        if ((b->table = sl_calloc(size, sizeof *b->table)) == NULL) {
            rc = sl_error_set(err, SL_ENOMEM, "out of memory creating a batch");
            goto out_destroy;
        }
        b->table_mask = size - 1;
        for (size_t i = 0; i < nspecs; i++) {
            size_t h = (size_t)hash_key(b->cols[i].spec.name, b->cols[i].key_len) & b->table_mask;
            while (b->table[h] != 0)
                h = (h + 1) & b->table_mask;
            b->table[h] = (uint32_t)(i + 1);
        }
    }
    *out = b;
    return 0;

out_destroy:
    fmt_batch_destroy(b);
    return rc;
}

void fmt_batch_destroy(struct fmt_batch *b)
{
    if (b == NULL)
        return;
    for (size_t i = 0; i < b->ncols; i++) {
        struct column *c = &b->cols[i];
        sl_free(c->bound_rows ? c->own_values : c->values);
        sl_free(c->offsets);
        sl_free(c->splits);
        sl_free(c->default_bytes);
    }
    sl_free(b->cols);
    sl_free(b->table);
    sl_free(b);
}

void fmt_batch_reset(struct fmt_batch *b)
{
    b->rows = 0;
    for (size_t i = 0; i < b->ncols; i++) {
        b->cols[i].values_len = 0;
        b->cols[i].nvalues = 0;
    }
}

size_t fmt_batch_row_bytes(const struct fmt_batch *b, size_t col)
{
    if (col >= b->ncols)
        return 0;
    const struct column *c = &b->cols[col];
    return c->spec.varlen || c->spec.dtype == FMT_DTYPE_BYTES ? 0 : c->count * c->esize;
}

int fmt_batch_bind(struct fmt_batch *b, size_t col, void *dst, size_t cap, struct sl_error *err)
{
    size_t row_bytes = fmt_batch_row_bytes(b, col);
    if (row_bytes == 0)
        return sl_error_set(err, SL_EINVAL, "column %zu is not a fixed-size numeric column", col);
    if (b->rows != 0)
        return sl_error_set(err, SL_EINVAL, "bind before the first row (batch holds %zu)", b->rows);
    struct column *c = &b->cols[col];
    c->values = dst;
    c->bound_rows = cap / row_bytes;
    if (c->bound_rows == 0) { /* room for no row: keep own storage, refuse rows */
        c->values = c->own_values;
        c->bound_rows = SIZE_MAX; /* marks "bound to nothing" */
    }
    return 0;
}

void fmt_batch_unbind(struct fmt_batch *b)
{
    for (size_t i = 0; i < b->ncols; i++)
        if (b->cols[i].bound_rows) {
            b->cols[i].values = b->cols[i].own_values;
            b->cols[i].bound_rows = 0;
        }
}

size_t fmt_batch_rows(const struct fmt_batch *b)
{
    return b->rows;
}

size_t fmt_batch_ncolumns(const struct fmt_batch *b)
{
    return b->ncols;
}

void fmt_batch_column(const struct fmt_batch *b, size_t i, struct fmt_column *out)
{
    memset(out, 0, sizeof *out);
    if (i >= b->ncols)
        return;
    const struct column *c = &b->cols[i];
    out->name = c->spec.name;
    out->dtype = c->spec.dtype;
    out->varlen = c->spec.varlen;
    out->rows = b->rows;
    out->values = c->values;
    out->nvalues = c->nvalues;
    out->value_bytes = c->values_len;
    out->row_splits = c->spec.varlen ? c->splits : NULL;
    out->bytes_offsets = c->spec.dtype == FMT_DTYPE_BYTES ? c->offsets : NULL;
}

/* ---- add --------------------------------------------------------------- */

static int grow_values(struct column *c, size_t extra, size_t row, struct sl_error *err)
{
    if (extra <= c->values_cap - c->t_values_len)
        return 0;
    if (extra > MAX_COLUMN_BYTES - c->t_values_len)
        return sl_error_set(err, SL_EINVAL, "Key: %s, Index: %zu.  Column would exceed %zu bytes", c->spec.name, row,
                            MAX_COLUMN_BYTES);
    size_t need = c->t_values_len + extra, cap = c->values_cap ? c->values_cap : 4096;
    while (cap < need)
        cap = cap > MAX_COLUMN_BYTES / 2 ? MAX_COLUMN_BYTES : cap * 2;
    uint8_t *p = sl_realloc(c->values, cap);
    if (p == NULL)
        return sl_error_set(err, SL_ENOMEM, "Key: %s, Index: %zu.  Out of memory growing the column to %zu bytes",
                            c->spec.name, row, cap);
    c->values = p;
    c->values_cap = cap;
    return 0;
}

/* Room for `extra` more strings' end offsets (varlen BYTES). */
static int grow_offsets(struct column *c, size_t extra, size_t row, struct sl_error *err)
{
    if (extra < c->offsets_cap - c->t_nvalues)
        return 0;
    size_t max = MAX_COLUMN_BYTES / sizeof *c->offsets;
    if (extra >= max - c->t_nvalues)
        return sl_error_set(err, SL_EINVAL, "Key: %s, Index: %zu.  Column would exceed %zu values", c->spec.name, row,
                            max);
    size_t need = c->t_nvalues + extra + 1, cap = c->offsets_cap;
    while (cap < need)
        cap = cap > max / 2 ? max : cap * 2;
    uint64_t *p = sl_realloc(c->offsets, cap * sizeof *p);
    if (p == NULL)
        return sl_error_set(err, SL_ENOMEM, "Key: %s, Index: %zu.  Out of memory growing the column to %zu values",
                            c->spec.name, row, cap);
    c->offsets = p;
    c->offsets_cap = cap;
    return 0;
}

static int count_error(const struct column *c, size_t row, const char *type, size_t n, const char *shape,
                       struct sl_error *err)
{
    return sl_error_set(err, SL_EINVAL,
                        "Key: %s, Index: %zu.  Number of %s values != expected.  "
                        "Values size: %zu but output shape: %s",
                        c->spec.name, row, type, n, shape);
}

static int parse_error(int rc, const struct column *c, size_t row, struct sl_error *err)
{
    sl_error_prefix(err, "Key: %s, Index: %zu.  Can't parse serialized Example: ", c->spec.name, row);
    return rc;
}

/* Count the rest of a BytesList (for error texts). */
static int count_rest(struct fmt_bytes_iter *it, size_t *n, struct sl_error *err)
{
    const uint8_t *v = NULL;
    size_t len = 0;
    int rc;
    while ((rc = fmt_bytes_iter_next(it, &v, &len, err)) == 0)
        (*n)++;
    return rc == SL_END ? 0 : rc;
}

static int add_bytes(struct column *c, size_t row, struct fmt_bytes_iter *it, struct sl_error *err)
{
    const uint8_t *v = NULL;
    size_t len = 0, k = 0;
    int rc;
    while ((rc = fmt_bytes_iter_next(it, &v, &len, err)) == 0) {
        if (!c->spec.varlen && k == c->count) {
            k++;
            if ((rc = count_rest(it, &k, err)) != 0)
                return parse_error(rc, c, row, err);
            return count_error(c, row, "bytes", k, c->shape, err);
        }
        if ((rc = grow_values(c, len, row, err)) != 0)
            return rc;
        if (c->spec.dtype == FMT_DTYPE_BYTES && c->spec.varlen && (rc = grow_offsets(c, 1, row, err)) != 0)
            return rc;
        if (len)
            memcpy(c->values + c->t_values_len, v, len);
        c->t_values_len += len;
        if (c->spec.dtype == FMT_DTYPE_BYTES)
            c->offsets[++c->t_nvalues] = c->t_values_len;
        else
            c->t_nvalues += len; /* varlen uint8 counts bytes */
        k++;
    }
    if (rc != SL_END)
        return parse_error(rc, c, row, err);
    if (!c->spec.varlen && k != c->count)
        return count_error(c, row, "bytes", k, c->shape, err);
    return 0;
}

static int add_uint8(struct column *c, size_t row, struct fmt_bytes_iter *it, struct sl_error *err)
{
    const uint8_t *v = NULL, *v2 = NULL;
    size_t len = 0, len2 = 0, k = 0;
    int rc = fmt_bytes_iter_next(it, &v, &len, err);
    if (rc == 0) {
        k = 1;
        rc = fmt_bytes_iter_next(it, &v2, &len2, err);
        if (rc == 0) {
            k = 2;
            rc = count_rest(it, &k, err);
        }
    }
    if (rc < 0)
        return parse_error(rc, c, row, err);
    if (k != 1)
        return count_error(c, row, "bytes", k, "[]", err);
    if (len != c->count)
        return count_error(c, row, "uint8", len, c->shape, err);
    if (len)
        memcpy(c->values + row * c->count, v, len);
    return 0;
}

static int decode(struct fmt_batch *b, struct column *c, const uint8_t *data, struct sl_error *err)
{
    size_t row = b->rows;
    enum fmt_kind kind;
    const uint8_t *list;
    size_t list_len, n;
    int rc = fmt__feature_parse(c->feat, c->feat_len, (size_t)(c->feat - data), &kind, &list, &list_len, err);
    if (rc != 0)
        return parse_error(rc, c, row, err);
    if (kind == FMT_KIND_NONE)
        return 0; /* varlen: present but empty */
    if (kind != c->kind) {
        if (c->spec.varlen)
            return sl_error_set(err, SL_EINVAL,
                                "Key: %s, Index: %zu.  Data types don't match. "
                                "Expected type: %s, Actual type: %s",
                                c->spec.name, row, fmt_kind_tf_name(c->kind), fmt_kind_tf_name(kind));
        return sl_error_set(err, SL_EINVAL,
                            "Key: %s, Index: %zu.  Data types don't match. "
                            "Data type: %s but expected type: %s",
                            c->spec.name, row, fmt_kind_tf_name(kind), fmt_kind_tf_name(c->kind));
    }
    size_t base = (size_t)(list - data);
    struct fmt_bytes_iter it;
    switch (c->spec.dtype) {
    case FMT_DTYPE_INT64:
        if (!c->spec.varlen) {
            rc = fmt__int64_list_scan(list, list_len, base, (int64_t *)(void *)c->values + row * c->count, c->count, &n,
                                      err);
            if (rc != 0)
                return parse_error(rc, c, row, err);
            return n == c->count ? 0 : count_error(c, row, "int64", n, c->shape, err);
        }
        if ((rc = fmt__int64_list_scan(list, list_len, base, NULL, 0, &n, err)) != 0)
            return parse_error(rc, c, row, err);
        if ((rc = grow_values(c, n * 8, row, err)) != 0)
            return rc;
        rc = fmt__int64_list_scan(list, list_len, base, (int64_t *)(void *)c->values + c->t_nvalues, n, &n, err);
        if (rc != 0)
            return parse_error(rc, c, row, err);
        c->t_nvalues += n;
        c->t_values_len += n * 8;
        return 0;
    case FMT_DTYPE_FLOAT32:
        if (!c->spec.varlen) {
            rc = fmt__float_list_scan(list, list_len, base, (float *)(void *)c->values + row * c->count, c->count, &n,
                                      err);
            if (rc != 0)
                return parse_error(rc, c, row, err);
            return n == c->count ? 0 : count_error(c, row, "float", n, c->shape, err);
        }
        if ((rc = fmt__float_list_scan(list, list_len, base, NULL, 0, &n, err)) != 0)
            return parse_error(rc, c, row, err);
        if ((rc = grow_values(c, n * 4, row, err)) != 0)
            return rc;
        rc = fmt__float_list_scan(list, list_len, base, (float *)(void *)c->values + c->t_nvalues, n, &n, err);
        if (rc != 0)
            return parse_error(rc, c, row, err);
        c->t_nvalues += n;
        c->t_values_len += n * 4;
        return 0;
    case FMT_DTYPE_UINT8:
    case FMT_DTYPE_BYTES:
        fmt_bytes_iter_init(&it, list, list_len);
        it.start = data; /* offsets in errors relative to the Example */
        if (c->spec.dtype == FMT_DTYPE_UINT8 && !c->spec.varlen)
            return add_uint8(c, row, &it, err);
        return add_bytes(c, row, &it, err);
    case FMT_DTYPE_FLOAT16: /* a map's output only: never decoded */
    case FMT_DTYPE_BFLOAT16: break;
    }
    return sl_error_set(err, SL_EINVAL, "feature %s: bad dtype", c->spec.name);
}

static int fill_default(struct fmt_batch *b, struct column *c, struct sl_error *err)
{
    size_t row = b->rows;
    if (!c->spec.has_default)
        return sl_error_set(err, SL_EINVAL, "Feature: %s (data type: %s) is required but could not be found.",
                            c->spec.name, fmt_kind_tf_name(c->kind));
    switch (c->spec.dtype) {
    case FMT_DTYPE_INT64: {
        int64_t *p = (int64_t *)(void *)c->values + row * c->count;
        for (size_t i = 0; i < c->count; i++)
            p[i] = c->spec.default_i64;
        return 0;
    }
    case FMT_DTYPE_FLOAT32: {
        float *p = (float *)(void *)c->values + row * c->count;
        for (size_t i = 0; i < c->count; i++)
            p[i] = c->spec.default_f32;
        return 0;
    }
    case FMT_DTYPE_UINT8:
        if (c->count)
            memset(c->values + row * c->count, c->spec.default_u8, c->count);
        return 0;
    case FMT_DTYPE_BYTES: {
        size_t dlen = c->spec.default_bytes_len, total;
        if (!mul_ok(dlen, c->count, &total))
            total = SIZE_MAX;
        int rc = grow_values(c, total, row, err);
        if (rc != 0)
            return rc;
        for (size_t i = 0; i < c->count; i++) {
            if (dlen)
                memcpy(c->values + c->t_values_len, c->spec.default_bytes, dlen);
            c->t_values_len += dlen;
            c->offsets[++c->t_nvalues] = c->t_values_len;
        }
        return 0;
    }
    case FMT_DTYPE_FLOAT16: /* a map's output only: never decoded */
    case FMT_DTYPE_BFLOAT16: break;
    }
    return 0;
}

/* Start a row: room checked, every column unseen, staged counts loaded. */
static inline int row_begin(struct fmt_batch *b, struct sl_error *err)
{
    if (b->rows == b->capacity)
        return sl_error_set(err, SL_EINVAL, "batch is full (%zu rows)", b->capacity);
    size_t ncols = b->ncols;
    struct column *cols = b->cols;
    for (size_t i = 0; i < ncols; i++) {
        size_t bound = cols[i].bound_rows;
        if (bound && (bound == SIZE_MAX || b->rows >= bound))
            return sl_error_set(err, SL_EINVAL, "feature %s: the bound buffer holds %zu rows", cols[i].spec.name,
                                bound == SIZE_MAX ? (size_t)0 : bound);
        cols[i].seen = 0;
        /* Only staged columns read their committed counts: a fixed
         * column's were just stored by the last commit, and loading them
         * back waited for those stores, queued behind the row copy's
         * cache misses. */
        if (cols[i].staged) {
            cols[i].t_values_len = cols[i].values_len;
            cols[i].t_nvalues = cols[i].nvalues;
        }
    }
    return 0;
}

/* Commit the staged row. */
static inline void row_commit(struct fmt_batch *b)
{
    size_t row = b->rows;
    for (size_t i = 0; i < b->ncols; i++) {
        struct column *c = &b->cols[i];
        if (!c->spec.varlen && c->spec.dtype != FMT_DTYPE_BYTES) {
            c->nvalues = (row + 1) * c->count;
            c->values_len = c->nvalues * c->esize;
            continue;
        }
        c->values_len = c->t_values_len;
        c->nvalues = c->t_nvalues;
        if (c->spec.varlen)
            c->splits[row + 1] = c->nvalues;
    }
    b->rows = row + 1;
}

int fmt_batch_add(struct fmt_batch *b, const uint8_t *data, size_t len, struct sl_error *err)
{
    int rc = row_begin(b, err);
    if (rc != 0)
        return rc;
    size_t ncols = b->ncols;
    struct column *cols = b->cols;

    /* Pass 1: where each declared feature's winning Feature lies. */
    struct fmt__example_iter it;
    fmt__example_iter_init(&it, data, len);
    struct fmt__entry e;
    while ((rc = fmt__example_iter_next(&it, &e, err)) == 0) {
        struct column *c = find_column(b, e.key, e.key_len);
        if (c == NULL)
            continue;
        if (e.feature_len == 0) {
            /* no kind: absent for a fixed-length feature (an earlier
             * duplicate stands), an empty row for a variable-length one */
            if (c->spec.varlen) {
                c->seen = 1;
                c->feat = e.feature;
                c->feat_len = 0;
            }
            continue;
        }
        uint8_t t = e.feature[0];
        if (t != 0x0A && t != 0x12 && t != 0x1A)
            return sl_error_set(err, SL_ECORRUPT, "Key: %s, Index: %zu.  Unsupported datatype (tag 0x%02x) at byte %zu",
                                c->spec.name, b->rows, t, (size_t)(e.feature - it.data));
        c->seen = 1;
        c->feat = e.feature;
        c->feat_len = e.feature_len;
    }
    if (rc != SL_END)
        return rc;

    /* Pass 2: decode the winners into the staged row, then fill the rest. */
    for (size_t i = 0; i < ncols; i++)
        if (cols[i].seen && (rc = decode(b, &cols[i], it.data, err)) != 0)
            return rc;
    for (size_t i = 0; i < ncols; i++)
        if (!cols[i].seen && !cols[i].spec.varlen && (rc = fill_default(b, &cols[i], err)) != 0)
            return rc;

    row_commit(b);
    return 0;
}

/* ---- add from named fields (tar samples, text lines) ------------------- */

/* Numbers written as text (WebDataset's .cls, .idx): decimal values
 * separated by spaces, commas or newlines. Writes up to `count`, returns
 * how many there are, or -1 at a token that is not a number. */
static long parse_numbers(const uint8_t *p, size_t len, enum fmt_dtype t, void *out, size_t count)
{
    char tok[64];
    long n = 0;
    size_t i = 0;
#define SEP(ch) ((ch) == ' ' || (ch) == ',' || (ch) == '\n' || (ch) == '\r' || (ch) == '\t')
    while (i < len) {
        while (i < len && SEP(p[i]))
            i++;
        if (i == len)
            break;
        size_t k = 0;
        while (i < len && !SEP(p[i])) {
            if (k + 1 >= sizeof tok)
                return -1;
            tok[k++] = (char)p[i++];
        }
#undef SEP
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

static const char *value_type(enum fmt_dtype t)
{
    return t == FMT_DTYPE_INT64     ? "int64"
           : t == FMT_DTYPE_FLOAT32 ? "float"
           : t == FMT_DTYPE_UINT8   ? "uint8"
                                    : "string";
}

/* The field's bytes into column c's staged row. */
static int field_value(struct fmt_batch *b, struct column *c, const struct fmt_field *x, struct sl_error *err)
{
    size_t row = b->rows;
    if (c->spec.dtype == FMT_DTYPE_BYTES) {
        int rc = grow_values(c, x->len, row, err);
        if (rc != 0)
            return rc;
        if (x->len)
            memcpy(c->values + c->t_values_len, x->data, x->len);
        c->t_values_len += x->len;
        c->offsets[++c->t_nvalues] = c->t_values_len;
        return 0;
    }
    uint8_t *dst = c->values + row * c->count * c->esize;
    long n;
    if (c->spec.dtype == FMT_DTYPE_UINT8) {
        n = (long)x->len;
        if ((size_t)n == c->count && n)
            memcpy(dst, x->data, c->count);
    } else {
        n = parse_numbers(x->data, x->len, c->spec.dtype, dst, c->count);
        if (n < 0)
            return sl_error_set(err, SL_ECORRUPT, "field '%s' is not a list of %s numbers", c->spec.name,
                                value_type(c->spec.dtype));
    }
    if ((size_t)n != c->count)
        return sl_error_set(err, SL_EINVAL,
                            "Key: %s.  Number of %s values != expected.  Values size: %ld but expected %zu",
                            c->spec.name, value_type(c->spec.dtype), n, c->count);
    return 0;
}

int fmt_batch_add_fields(struct fmt_batch *b, const struct fmt_field *fields, size_t nfields, struct sl_error *err)
{
    int rc = row_begin(b, err);
    if (rc != 0)
        return rc;
    for (size_t i = 0; i < b->ncols; i++) {
        struct column *c = &b->cols[i];
        if (c->spec.varlen || (c->spec.dtype == FMT_DTYPE_BYTES && c->count != 1))
            return sl_error_set(err, SL_EINVAL,
                                "feature %s: named fields fill scalar bytes or fixed-shape numeric columns only",
                                c->spec.name);
        const struct fmt_field *x = NULL;
        for (size_t k = 0; k < nfields && x == NULL; k++)
            if (strcmp(fields[k].name, c->spec.name) == 0)
                x = &fields[k];
        rc = x != NULL ? field_value(b, c, x, err) : fill_default(b, c, err);
        if (rc != 0)
            return rc;
    }
    row_commit(b);
    return 0;
}

/* ---- add from array rows (the arrays format) ---------------------------- */

int fmt_batch_add_arrays(struct fmt_batch *b, const struct fmt_field *fields, size_t nfields, struct sl_error *err)
{
    if (nfields != b->ncols)
        return sl_error_set(err, SL_EINVAL, "%zu arrays for %zu features", nfields, b->ncols);
    int rc = row_begin(b, err);
    if (rc != 0)
        return rc;
    /* check every field before writing any: the row is not staged */
    for (size_t i = 0; i < b->ncols; i++) {
        const struct column *c = &b->cols[i];
        const struct fmt_array_info *a = fields[i].array;
        if (a == NULL || c->spec.varlen || c->spec.dtype == FMT_DTYPE_BYTES)
            return sl_error_set(err, SL_EINVAL, "feature %s: not an array row, or not a fixed-shape numeric feature",
                                c->spec.name);
        if ((rc = fmt_array_fits(a, c->spec.dtype, err)) != 0)
            return sl_error_prefix(err, "Key: %s.  ", c->spec.name);
        if (a->size == 0 || fields[i].len % a->size != 0 || fields[i].len / a->size != c->count)
            return sl_error_set(
                err, SL_EINVAL, "Key: %s.  Number of %s values != expected.  Values size: %zu but expected %zu",
                c->spec.name, value_type(c->spec.dtype), a->size ? fields[i].len / a->size : 0, c->count);
    }
    size_t row = b->rows;
    for (size_t i = 0; i < b->ncols; i++) {
        struct column *c = &b->cols[i];
        fmt_array_convert(fields[i].array, fields[i].data, c->count, c->spec.dtype,
                          c->values + row * c->count * c->esize);
    }
    row_commit(b);
    return 0;
}

size_t fmt_batch_variable_bytes(const struct fmt_batch *b)
{
    size_t n = 0;
    for (size_t i = 0; i < b->ncols; i++)
        if (b->cols[i].spec.varlen || b->cols[i].spec.dtype == FMT_DTYPE_BYTES)
            n += b->cols[i].values_len;
    return n;
}
