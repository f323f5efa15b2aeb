/* record stats: sizes of records and, for TFRecord files of tf.train.Example,
 * which feature keys occur with which kinds and how many values.
 *
 * Every record of every file feeds one set of totals. Features are tallied
 * in a small open-addressing table keyed by the feature name (entries live in
 * an array, the hash slots hold indices, so growth never moves a key). A
 * record's features are first collected by fmt_example_walk into a pending
 * list and committed only when the whole record parsed, so a record that is
 * not an Example is counted as such and leaves no half-tally behind;
 * duplicate keys keep the last value, as TensorFlow does. For tar shards the
 * same table tallies field extensions (values = field bytes).
 *
 * --job FILE (issue #19) turns the tally into a job skeleton (docs/job.md):
 * each feature's dtype from its kind, a shape [] or [n] when every record
 * holding it holds n values, varlen when the counts differ, a default when
 * some Examples lack it. For that the table also keeps, per key, what the
 * records that give it a kind hold (a Feature with no kind counts as
 * missing, as the feeder's decoder reads it). Jansson writes each value;
 * the layout, one feature a line as docs/job.md shows, is ours.
 *
 * A bytes feature holding one JPEG or PNG file in every record (by the
 * values' first bytes: record_image_kind) also gets map steps (issue #27):
 * decode_image, then resize and center_crop, so the image's shape is fixed
 * as batching needs; the sizes are placeholders the user edits.
 */
#include <getopt.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fmt_example.h"
#include "fmt_reader.h"
#include "fmt_tar.h"
#include "record.h"
#include "sl_alloc.h"
#include "sl_json.h"
#include "sto.h"
#include "sl_log.h"
#include "sl_output.h"

#define NBUCKETS 65 /* 0: empty records; b: [2^(b-1), 2^b) */

struct key_stat {
    char *key; /* owned, NUL-terminated (keys with NUL bytes are cut there in the output) */
    size_t key_len;
    uint64_t hash;
    unsigned kinds;   /* bit (1 << fmt_kind) for each kind seen */
    uint64_t records; /* records holding the key */
    uint64_t min_values, max_values;
    uint64_t stamp; /* last record counted + 1 (duplicate keys) */
    /* the records that give the key a kind (its last such occurrence) */
    unsigned typed_kinds;
    uint64_t typed_records, typed_min, typed_max, typed_stamp;
    uint64_t typed_jpeg, typed_png; /* bytes values starting as a JPEG / PNG file */
};

struct key_table {
    struct key_stat *entries;
    size_t n, cap;
    size_t *slots; /* entry index + 1; 0 empty */
    size_t nslots; /* power of two */
};

struct pending {
    size_t entry;
    enum fmt_kind kind;
    uint64_t count;
    uint64_t jpeg, png; /* bytes values that start as image files */
};

struct stats {
    uint64_t files, records, bytes, min, max, not_examples;
    uint64_t hist[NBUCKETS];
    int any_tfrecord, any_tar;
    struct key_table features; /* TFRecord Examples */
    struct key_table fields;   /* tar extensions */
    struct pending *pend;
    size_t npend, pend_cap;
    struct sl_error walk_err;
};

static uint64_t fnv1a(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

static int table_grow(struct key_table *t)
{
    size_t nslots = t->nslots ? t->nslots * 2 : 64;
    size_t *slots = sl_calloc(nslots, sizeof *slots);
    if (slots == NULL)
        return SL_ENOMEM;
    for (size_t i = 0; i < t->n; i++) {
        size_t j = (size_t)t->entries[i].hash & (nslots - 1);
        while (slots[j])
            j = (j + 1) & (nslots - 1);
        slots[j] = i + 1;
    }
    sl_free(t->slots);
    t->slots = slots;
    t->nslots = nslots;
    return 0;
}

/* The entry for key, created on first sight. 0 or SL_ENOMEM. */
static int table_get(struct key_table *t, const char *key, size_t len, size_t *out)
{
    if ((t->n + 1) * 2 > t->nslots && table_grow(t) != 0)
        return SL_ENOMEM;
    uint64_t h = fnv1a(key, len);
    size_t j = (size_t)h & (t->nslots - 1);
    while (t->slots[j]) {
        struct key_stat *e = &t->entries[t->slots[j] - 1];
        if (e->hash == h && e->key_len == len && memcmp(e->key, key, len) == 0) {
            *out = t->slots[j] - 1;
            return 0;
        }
        j = (j + 1) & (t->nslots - 1);
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        struct key_stat *e = sl_realloc(t->entries, cap * sizeof *e);
        if (e == NULL)
            return SL_ENOMEM;
        t->entries = e;
        t->cap = cap;
    }
    struct key_stat *e = &t->entries[t->n];
    memset(e, 0, sizeof *e);
    e->key = sl_malloc(len + 1);
    if (e->key == NULL)
        return SL_ENOMEM;
    memcpy(e->key, key, len);
    e->key[len] = '\0';
    e->key_len = len;
    e->hash = h;
    t->slots[j] = t->n + 1;
    *out = t->n++;
    return 0;
}

static void table_free(struct key_table *t)
{
    for (size_t i = 0; i < t->n; i++)
        sl_free(t->entries[i].key);
    sl_free(t->entries);
    sl_free(t->slots);
}

static void key_count(struct key_stat *e, unsigned kind_bit, uint64_t count)
{
    e->kinds |= kind_bit;
    if (e->records == 0 || count < e->min_values)
        e->min_values = count;
    if (count > e->max_values)
        e->max_values = count;
    e->records++;
}

static void count_size(struct stats *st, uint64_t size)
{
    if (st->records == 0 || size < st->min)
        st->min = size;
    if (size > st->max)
        st->max = size;
    st->records++;
    st->bytes += size;
    int b = 0;
    while (b < NBUCKETS - 1 && size >> b)
        b++;
    st->hist[b]++;
}

static int on_feature(void *ctx, const struct fmt_feature_view *f)
{
    struct stats *st = ctx;
    size_t count = 0;
    int rc = 0;
    switch (f->kind) {
    case FMT_KIND_INT64: rc = fmt_int64_list_count(f->list, f->list_len, &count, &st->walk_err); break;
    case FMT_KIND_FLOAT: rc = fmt_float_list_count(f->list, f->list_len, &count, &st->walk_err); break;
    case FMT_KIND_BYTES: rc = fmt_bytes_list_count(f->list, f->list_len, &count, &st->walk_err); break;
    default: break;
    }
    if (rc != 0)
        return rc;
    if (st->npend == st->pend_cap) {
        size_t cap = st->pend_cap ? st->pend_cap * 2 : 32;
        struct pending *p = sl_realloc(st->pend, cap * sizeof *p);
        if (p == NULL)
            return sl_error_set(&st->walk_err, SL_ENOMEM, "out of memory");
        st->pend = p;
        st->pend_cap = cap;
    }
    size_t entry;
    if (table_get(&st->features, f->key, f->key_len, &entry) != 0)
        return sl_error_set(&st->walk_err, SL_ENOMEM, "out of memory");
    struct pending *p = &st->pend[st->npend++];
    *p = (struct pending){.entry = entry, .kind = f->kind, .count = count};
    if (f->kind == FMT_KIND_BYTES) { /* the list was checked by the count */
        struct fmt_bytes_iter it;
        const uint8_t *v;
        size_t n;
        fmt_bytes_iter_init(&it, f->list, f->list_len);
        while ((rc = fmt_bytes_iter_next(&it, &v, &n, &st->walk_err)) == 0) {
            enum record_image k = record_image_kind(v, n);
            p->jpeg += k == RECORD_IMAGE_JPEG;
            p->png += k == RECORD_IMAGE_PNG;
        }
        if (rc != SL_END)
            return rc;
    }
    return 0;
}

static int stats_example(struct stats *st, const struct fmt_record *rec)
{
    st->npend = 0;
    int rc = fmt_example_walk(rec->data, rec->len, on_feature, st, &st->walk_err);
    if (rc == SL_ENOMEM)
        return rc;
    if (rc != 0) {
        st->not_examples++;
        return 0;
    }
    /* last occurrence of a key first: earlier duplicates are overridden */
    uint64_t stamp = st->records + 1;
    for (size_t i = st->npend; i-- > 0;) {
        struct key_stat *e = &st->features.entries[st->pend[i].entry];
        if (e->stamp == stamp)
            continue;
        e->stamp = stamp;
        key_count(e, 1u << st->pend[i].kind, st->pend[i].count);
    }
    /* what the feeder decodes: the last occurrence that has a kind */
    for (size_t i = st->npend; i-- > 0;) {
        struct key_stat *e = &st->features.entries[st->pend[i].entry];
        if (st->pend[i].kind == FMT_KIND_NONE || e->typed_stamp == stamp)
            continue;
        e->typed_stamp = stamp;
        e->typed_kinds |= 1u << st->pend[i].kind;
        if (e->typed_records == 0 || st->pend[i].count < e->typed_min)
            e->typed_min = st->pend[i].count;
        if (st->pend[i].count > e->typed_max)
            e->typed_max = st->pend[i].count;
        e->typed_records++;
        e->typed_jpeg += st->pend[i].jpeg;
        e->typed_png += st->pend[i].png;
    }
    return 0;
}

static int stats_records(struct stats *st, const char *path, enum fmt_format f, const struct record_read_opts *ro,
                         struct sl_error *err)
{
    struct fmt_reader *r = NULL;
    int rc = record_reader_open(&r, path, ro, f, err);
    if (rc != 0)
        return rc;
    struct fmt_record rec;
    while ((rc = fmt_reader_next(r, &rec, err)) == 0) {
        if (f == FMT_FORMAT_TFRECORD && stats_example(st, &rec) != 0) {
            rc = sl_error_set(err, SL_ENOMEM, "out of memory");
            break;
        }
        count_size(st, rec.len);
    }
    if (fmt_reader_dropped_tail(r))
        sl_log(SL_LOG_WARN, "%s: dropped a partial record header of %llu bytes at the end of the file", path,
               (unsigned long long)fmt_reader_dropped_tail(r));
    fmt_reader_close(r);
    return rc == SL_END ? 0 : rc;
}

static int stats_tar(struct stats *st, const char *path, const struct record_read_opts *ro, struct sl_error *err)
{
    struct fmt_tar *t = NULL;
    int rc = record_tar_open(&t, path, ro, err);
    if (rc != 0)
        return rc;
    struct fmt_tar_sample smp;
    while ((rc = fmt_tar_next(t, &smp, err)) == 0) {
        uint64_t size = 0;
        for (size_t i = 0; i < smp.nfields && rc == 0; i++) {
            size_t entry;
            size += smp.fields[i].len;
            if (table_get(&st->fields, smp.fields[i].ext, strlen(smp.fields[i].ext), &entry) != 0)
                rc = sl_error_set(err, SL_ENOMEM, "out of memory");
            else
                key_count(&st->fields.entries[entry], 1u << FMT_KIND_BYTES, smp.fields[i].len);
        }
        if (rc != 0)
            break;
        count_size(st, size);
    }
    fmt_tar_close(t);
    return rc == SL_END ? 0 : rc;
}

static int cmp_key(const void *a, const void *b)
{
    const struct key_stat *x = *(const struct key_stat *const *)a, *y = *(const struct key_stat *const *)b;
    size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
    int c = memcmp(x->key, y->key, n);
    return c ? c : (x->key_len > y->key_len) - (x->key_len < y->key_len);
}

/* Keys seen in at least one committed record, sorted bytewise (caller frees). */
static struct key_stat **sorted_keys(const struct key_table *t, size_t *n)
{
    struct key_stat **v = sl_malloc((t->n ? t->n : 1) * sizeof *v);
    *n = 0;
    if (v == NULL)
        return NULL;
    for (size_t i = 0; i < t->n; i++)
        if (t->entries[i].records)
            v[(*n)++] = &t->entries[i];
    qsort(v, *n, sizeof *v, cmp_key);
    return v;
}

static int put_kinds(struct sl_buf *b, unsigned kinds, int json)
{
    static const enum fmt_kind order[] = {FMT_KIND_INT64, FMT_KIND_FLOAT, FMT_KIND_BYTES, FMT_KIND_NONE};
    int rc = json ? sl_buf_putc(b, '[') : 0, first = 1;
    for (size_t i = 0; rc == 0 && i < sizeof order / sizeof order[0]; i++) {
        if (!(kinds & (1u << order[i])))
            continue;
        const char *name = order[i] == FMT_KIND_NONE ? "none" : fmt_kind_name(order[i]);
        if (!first)
            rc = sl_buf_putc(b, ',');
        rc = rc ? rc : json ? sl_buf_printf(b, "\"%s\"", name) : sl_buf_puts(b, name);
        first = 0;
    }
    return rc ? rc : json ? sl_buf_putc(b, ']') : 0;
}

static uint64_t bucket_lo(int b)
{
    return b == 0 ? 0 : (uint64_t)1 << (b - 1);
}

static uint64_t bucket_hi(int b) /* inclusive */
{
    return b == 0 ? 0 : b == 64 ? UINT64_MAX : ((uint64_t)1 << b) - 1;
}

static int hist_range(const struct stats *st, int *first, int *last)
{
    *first = NBUCKETS;
    *last = -1;
    for (int b = 0; b < NBUCKETS; b++) {
        if (st->hist[b]) {
            if (*first == NBUCKETS)
                *first = b;
            *last = b;
        }
    }
    return *last >= 0;
}

static int print_json(struct sl_buf *b, const struct stats *st)
{
    double mean = st->records ? (double)st->bytes / (double)st->records : 0.0;
    int rc =
        sl_buf_printf(b,
                      "{\"files\":%llu,\"records\":%llu,\"bytes\":%llu,\"size\":{\"min\":%llu,\"mean\":%.3f,"
                      "\"max\":%llu},\"histogram\":[",
                      (unsigned long long)st->files, (unsigned long long)st->records, (unsigned long long)st->bytes,
                      (unsigned long long)st->min, mean, (unsigned long long)st->max);
    int first, last;
    if (hist_range(st, &first, &last))
        for (int i = first; rc == 0 && i <= last; i++)
            rc = sl_buf_printf(b, "%s{\"min\":%llu,\"max\":%llu,\"count\":%llu}", i == first ? "" : ",",
                               (unsigned long long)bucket_lo(i), (unsigned long long)bucket_hi(i),
                               (unsigned long long)st->hist[i]);
    rc = rc ? rc : sl_buf_putc(b, ']');
    const struct key_table *tables[2] = {st->any_tfrecord ? &st->features : NULL, st->any_tar ? &st->fields : NULL};
    const char *names[2] = {"features", "fields"};
    if (st->any_tfrecord)
        rc = rc ? rc : sl_buf_printf(b, ",\"not_examples\":%llu", (unsigned long long)st->not_examples);
    for (int t = 0; t < 2; t++) {
        if (tables[t] == NULL)
            continue;
        size_t n;
        struct key_stat **keys = sorted_keys(tables[t], &n);
        if (keys == NULL)
            return SL_ENOMEM;
        rc = rc ? rc : sl_buf_printf(b, ",\"%s\":{", names[t]);
        for (size_t i = 0; rc == 0 && i < n; i++) {
            rc = i ? sl_buf_putc(b, ',') : 0;
            rc = rc ? rc : sl_json_string(b, keys[i]->key, keys[i]->key_len);
            if (t == 0) {
                rc = rc ? rc : sl_buf_puts(b, ":{\"kinds\":");
                rc = rc ? rc : put_kinds(b, keys[i]->kinds, 1);
                rc = rc ? rc
                        : sl_buf_printf(b, ",\"records\":%llu,\"min_values\":%llu,\"max_values\":%llu}",
                                        (unsigned long long)keys[i]->records, (unsigned long long)keys[i]->min_values,
                                        (unsigned long long)keys[i]->max_values);
            } else {
                rc = rc ? rc
                        : sl_buf_printf(b, ":{\"samples\":%llu,\"min_bytes\":%llu,\"max_bytes\":%llu}",
                                        (unsigned long long)keys[i]->records, (unsigned long long)keys[i]->min_values,
                                        (unsigned long long)keys[i]->max_values);
            }
        }
        rc = rc ? rc : sl_buf_putc(b, '}');
        sl_free(keys);
    }
    return rc ? rc : sl_buf_puts(b, "}\n");
}

static int print_text(struct sl_buf *b, const struct stats *st)
{
    double mean = st->records ? (double)st->bytes / (double)st->records : 0.0;
    int rc =
        sl_buf_printf(b,
                      "files         %llu\n"
                      "records       %llu\n"
                      "bytes         %llu\n"
                      "record size   min %llu  mean %.1f  max %llu\n",
                      (unsigned long long)st->files, (unsigned long long)st->records, (unsigned long long)st->bytes,
                      (unsigned long long)st->min, mean, (unsigned long long)st->max);
    int first, last;
    if (rc == 0 && hist_range(st, &first, &last)) {
        uint64_t top = 0;
        for (int i = first; i <= last; i++)
            top = st->hist[i] > top ? st->hist[i] : top;
        rc = sl_buf_puts(b, "size histogram (bytes):\n");
        for (int i = first; rc == 0 && i <= last; i++) {
            int bar = (int)((st->hist[i] * 40 + top - 1) / top);
            char range[48];
            if (i == 0)
                snprintf(range, sizeof range, "0");
            else
                snprintf(range, sizeof range, "%llu..%llu", (unsigned long long)bucket_lo(i),
                         (unsigned long long)bucket_hi(i));
            rc = sl_buf_printf(b, "  %-24s %12llu%s%.*s\n", range, (unsigned long long)st->hist[i], bar ? "  " : "",
                               bar, "########################################");
        }
    }
    if (rc == 0 && st->any_tfrecord)
        rc = sl_buf_printf(b, "not examples  %llu\n", (unsigned long long)st->not_examples);
    const struct key_table *tables[2] = {st->any_tfrecord ? &st->features : NULL, st->any_tar ? &st->fields : NULL};
    for (int t = 0; rc == 0 && t < 2; t++) {
        if (tables[t] == NULL)
            continue;
        size_t n;
        struct key_stat **keys = sorted_keys(tables[t], &n);
        if (keys == NULL)
            return SL_ENOMEM;
        int w = 3;
        for (size_t i = 0; i < n; i++)
            w = keys[i]->key_len > (size_t)w ? (int)(keys[i]->key_len < 60 ? keys[i]->key_len : 60) : w;
        if (t == 0)
            rc = sl_buf_printf(b, "features (%zu keys)%s\n", n, n ? ":" : "");
        else
            rc = sl_buf_printf(b, "fields (%zu extensions)%s\n", n, n ? ":" : "");
        if (rc == 0 && n)
            rc = t == 0 ? sl_buf_printf(b, "  %-*s  %-18s %12s  %s\n", w, "key", "kinds", "records", "values")
                        : sl_buf_printf(b, "  %-*s  %12s  %s\n", w, "ext", "samples", "bytes");
        for (size_t i = 0; rc == 0 && i < n; i++) {
            rc = sl_buf_printf(b, "  %-*s  ", w, keys[i]->key);
            if (t == 0) {
                size_t at = b->len;
                rc = rc ? rc : put_kinds(b, keys[i]->kinds, 0);
                int used = (int)(b->len - at);
                rc = rc ? rc : sl_buf_printf(b, "%*s ", used < 18 ? 18 - used : 0, "");
            }
            rc = rc ? rc
                    : sl_buf_printf(b, "%12llu  %llu..%llu\n", (unsigned long long)keys[i]->records,
                                    (unsigned long long)keys[i]->min_values, (unsigned long long)keys[i]->max_values);
        }
        sl_free(keys);
    }
    return rc;
}

/* ---- --job: a job skeleton for the data read ---- */

#define JOB_BATCH 32 /* Keras' default batch size: a placeholder the user edits */

/* "name" for a message: the key as a JSON string (odd bytes escaped). */
static const char *quoted(struct sl_buf *b, const char *key, size_t len)
{
    b->len = 0;
    if (sl_json_string(b, key, len) != 0 || sl_buf_putc(b, '\0') != 0)
        return "(out of memory)";
    return (const char *)b->data;
}

/* A path as a glob(3) pattern matching itself alone: the feeder expands
 * the job's local files with glob, so *, ?, [ and \ are escaped; a remote
 * name is taken as written (never globbed), so it is kept as it is. */
static int glob_literal(struct sl_buf *b, const char *path)
{
    if (sto_is_remote(path))
        return sl_buf_printf(b, "%s", path);
    int rc = 0;
    for (const char *c = path; rc == 0 && *c; c++)
        rc = strchr("*?[\\", *c) != NULL ? sl_buf_printf(b, "\\%c", *c) : sl_buf_putc(b, *c);
    return rc;
}

/* The job's name from its file's: the base name without ".json", bytes
 * outside A-Z a-z 0-9 . _ - as '-', at most 64; "job" when nothing is left. */
static void job_name(const char *path, char *name, size_t n)
{
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    size_t len = strlen(base);
    if (len > 5 && strcmp(base + len - 5, ".json") == 0)
        len -= 5;
    if (len > 64)
        len = 64;
    if (len >= n)
        len = n - 1;
    for (size_t i = 0; i < len; i++) {
        char c = base[i];
        int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || strchr("._-", c);
        name[i] = ok && c ? c : '-';
    }
    name[len] = '\0';
    if (len == 0)
        snprintf(name, n, "job");
}

/* Refuse before reading anything: an existing job file (a skeleton is
 * never written over a job someone may have edited) and files that are
 * not TFRecord. 0, or the usage error's status. */
static int job_precheck(const char *path, const struct record_read_opts *ro, char **files, int nfiles)
{
    struct stat sb;
    if (path[0] == '\0')
        return record_usage_error("stats", "--job: empty path");
    if (lstat(path, &sb) == 0 && (S_ISREG(sb.st_mode) || S_ISLNK(sb.st_mode) || S_ISDIR(sb.st_mode)))
        return record_usage_error("stats", "--job: '%s' exists: not replaced (remove it or name another file)", path);
    for (int i = 0; i < nfiles; i++) {
        enum fmt_format f = record_file_format(ro, files[i]);
        if (f != FMT_FORMAT_TFRECORD)
            return record_usage_error("stats",
                                      "--job: '%s' is read as %s: --job writes jobs for TFRecord files of "
                                      "tf.train.Example only",
                                      files[i], f == FMT_FORMAT_TAR ? "a tar shard" : "text lines");
    }
    return 0;
}

/* One feature's declaration as jansson writes it ({"dtype": "int64",
 * "shape": [8]}), or NULL when it cannot have one (the reason logged, or
 * *left_out set when it only has no values to type). */
static char *feature_decl(const struct key_stat *k, uint64_t examples, struct sl_buf *tmp, int *left_out)
{
    const char *name = quoted(tmp, k->key, k->key_len);
    *left_out = 0;
    if (k->typed_records == 0) {
        sl_log(SL_LOG_WARN, "stats --job: feature %s has no values of any kind in any record: left out", name);
        *left_out = 1;
        return NULL;
    }
    unsigned kinds = k->typed_kinds;
    if (kinds & (kinds - 1)) {
        struct sl_buf kb;
        sl_buf_init(&kb, 0);
        int ok = put_kinds(&kb, kinds, 0) == 0 && sl_buf_putc(&kb, '\0') == 0;
        sl_log(SL_LOG_ERROR, "stats --job: feature %s holds %s values in different records: no dtype fits them all",
               name, ok ? (const char *)kb.data : "(out of memory)");
        sl_buf_free(&kb);
        return NULL;
    }
    const char *dtype = kinds == 1u << FMT_KIND_INT64 ? "int64" : kinds == 1u << FMT_KIND_FLOAT ? "float32" : "bytes";
    json_t *d = json_object();
    int varlen = k->typed_min != k->typed_max;
    int bad = d == NULL || json_object_set_new(d, "dtype", json_string(dtype)) != 0;
    if (!bad && varlen) {
        bad = json_object_set_new(d, "varlen", json_true()) != 0;
        sl_log(SL_LOG_INFO, "stats --job: feature %s holds %llu to %llu values a record: written as varlen", name,
               (unsigned long long)k->typed_min, (unsigned long long)k->typed_max);
    } else if (!bad) {
        json_t *shape = json_array(); /* [] for one value a record, else [n] */
        if (shape != NULL && k->typed_min != 1 &&
            json_array_append_new(shape, json_integer((json_int_t)k->typed_min)) != 0) {
            json_decref(shape);
            shape = NULL;
        }
        bad = shape == NULL || json_object_set_new(d, "shape", shape) != 0; /* takes shape even when failing */
    }
    if (!bad && !varlen && k->typed_records < examples) {
        json_t *def = kinds == 1u << FMT_KIND_INT64   ? json_integer(0)
                      : kinds == 1u << FMT_KIND_FLOAT ? json_real(0)
                                                      : json_string("");
        bad = json_object_set_new(d, "default", def) != 0;
        sl_log(SL_LOG_INFO, "stats --job: feature %s is missing from %llu of %llu records: written with default %s",
               name, (unsigned long long)(examples - k->typed_records), (unsigned long long)examples,
               kinds == 1u << FMT_KIND_INT64   ? "0"
               : kinds == 1u << FMT_KIND_FLOAT ? "0.0"
                                               : "\"\"");
    }
    char *text = bad ? NULL : json_dumps(d, JSON_PRESERVE_ORDER);
    json_decref(d);
    if (text == NULL && !bad)
        sl_log(SL_LOG_ERROR, "stats --job: out of memory");
    return text;
}

/* A JSON string for s[0..n) through jansson, which refuses what is not
 * UTF-8; NULL then (and for NUL bytes, which the feeder's loader refuses). */
static char *json_text(const char *s, size_t n)
{
    if (memchr(s, '\0', n) != NULL)
        return NULL;
    json_t *v = json_stringn(s, n);
    char *text = v ? json_dumps(v, JSON_ENCODE_ANY) : NULL;
    json_decref(v);
    return text;
}

/* The placeholder sizes of the image steps: the usual evaluation transform
 * (resize to 256, center crop 224); the user edits them. */
#define JOB_RESIZE 256
#define JOB_CROP 224

/* The "map" line (docs/job.md) for the bytes features holding one JPEG or
 * PNG image in every record: decode_image to RGB, then resize and
 * center_crop, so the feature's shape is fixed as batching needs. Nothing
 * when no feature qualifies. 0, or SL_ENOMEM. */
static int job_map(struct sl_buf *b, struct key_stat **keys, size_t n, uint64_t examples, struct sl_buf *tmp)
{
    int rc = 0, steps = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const struct key_stat *k = keys[i];
        uint64_t images = k->typed_jpeg + k->typed_png;
        if (images == 0 || k->typed_kinds != 1u << FMT_KIND_BYTES)
            continue;
        const char *name = quoted(tmp, k->key, k->key_len);
        if (k->typed_min != 1 || k->typed_max != 1 || k->typed_records != examples || images != k->typed_records) {
            sl_log(SL_LOG_INFO,
                   "stats --job: feature %s holds %llu JPEG/PNG images but not one image in each of the %llu "
                   "records: no decode_image step written",
                   name, (unsigned long long)images, (unsigned long long)examples);
            continue;
        }
        sl_log(SL_LOG_INFO,
               "stats --job: feature %s holds a JPEG or PNG image in every record (%llu JPEG, %llu PNG): map "
               "steps decode_image (RGB), resize %dx%d, center_crop %dx%d written; the sizes are placeholders",
               name, (unsigned long long)k->typed_jpeg, (unsigned long long)k->typed_png, JOB_RESIZE, JOB_RESIZE,
               JOB_CROP, JOB_CROP);
        char *key = json_text(k->key, k->key_len); /* valid: its feature was written */
        if (key == NULL)
            return SL_ENOMEM;
        rc = sl_buf_printf(b,
                           "%s{\"op\": \"decode_image\", \"feature\": %s, \"channels\": 3},\n"
                           "         {\"op\": \"resize\", \"feature\": %s, \"size\": [%d, %d], \"antialias\": true},\n"
                           "         {\"op\": \"center_crop\", \"feature\": %s, \"size\": [%d, %d]}",
                           steps ? ",\n         " : " \"map\": [", key, key, JOB_RESIZE, JOB_RESIZE, key, JOB_CROP,
                           JOB_CROP);
        free(key);
        steps++;
    }
    return rc ? rc : steps ? sl_buf_puts(b, "],\n") : 0;
}

/* Lay out the job into b. 0, or 1 with the reason logged. */
static int job_layout(struct sl_buf *b, const char *path, const struct stats *st, char **files, int nfiles,
                      const struct record_read_opts *ro, size_t *nfeatures)
{
    uint64_t examples = st->records - st->not_examples;
    if (st->records == 0) {
        sl_log(SL_LOG_ERROR, "stats --job: the files hold no records: nothing to describe");
        return 1;
    }
    if (st->not_examples > 0) {
        sl_log(SL_LOG_ERROR,
               "stats --job: %llu of %llu records are not tf.train.Example records: a job cannot decode "
               "them",
               (unsigned long long)st->not_examples, (unsigned long long)st->records);
        return 1;
    }
    char name[65];
    job_name(path, name, sizeof name);
    int rc = sl_buf_printf(b, "{\"name\": \"%s\",\n \"files\": [", name);
    struct sl_buf tmp;
    sl_buf_init(&tmp, 0);
    for (int i = 0; rc == 0 && i < nfiles; i++) {
        tmp.len = 0;
        char *text = NULL;
        if (glob_literal(&tmp, files[i]) != 0 || (text = json_text((const char *)tmp.data, tmp.len)) == NULL) {
            sl_log(SL_LOG_ERROR, "stats --job: file name %s is not valid UTF-8: a job file cannot name it",
                   quoted(&tmp, files[i], strlen(files[i])));
            rc = 1;
            break;
        }
        rc = sl_buf_printf(b, "%s%s", i ? ",\n           " : "", text);
        free(text);
    }
    rc = rc ? rc : sl_buf_puts(b, "],\n \"format\": \"tfrecord\",\n");
    if (rc == 0 && ro->compression != FMT_COMP_AUTO)
        rc = sl_buf_printf(b, " \"compression\": \"%s\",\n", fmt_compression_name(ro->compression));
    size_t n = 0;
    struct key_stat **keys = rc ? NULL : sorted_keys(&st->features, &n);
    if (rc == 0 && keys == NULL)
        rc = SL_ENOMEM;
    *nfeatures = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        int left_out;
        char *decl = feature_decl(keys[i], examples, &tmp, &left_out), *key = NULL;
        if (decl == NULL && left_out)
            continue;
        if (decl != NULL && (key = json_text(keys[i]->key, keys[i]->key_len)) == NULL)
            sl_log(SL_LOG_ERROR,
                   "stats --job: feature key %s is not valid UTF-8 or holds a NUL byte: a job file "
                   "cannot name it",
                   quoted(&tmp, keys[i]->key, keys[i]->key_len));
        if (decl == NULL || key == NULL)
            rc = 1;
        else
            rc = sl_buf_printf(b, "%s%s: %s", *nfeatures ? ",\n              " : " \"features\": {", key, decl);
        *nfeatures += rc == 0;
        free(key);
        free(decl);
    }
    if (rc == 0 && *nfeatures == 0) {
        sl_log(SL_LOG_ERROR, "stats --job: no feature has values: nothing to describe");
        rc = 1;
    }
    rc = rc ? rc : sl_buf_puts(b, "},\n");
    rc = rc ? rc : job_map(b, keys, n, examples, &tmp);
    sl_free(keys);
    sl_buf_free(&tmp);
    if (rc == 0 && ro->max_record_bytes != 0)
        rc = sl_buf_printf(b, " \"max_record_bytes\": %llu,\n", (unsigned long long)ro->max_record_bytes);
    if (rc == 0 && ro->on_error != FMT_ON_ERROR_FAIL)
        rc = sl_buf_printf(b, " \"on_error\": \"%s\",\n", fmt_on_error_name(ro->on_error));
    rc = rc ? rc : sl_buf_printf(b, " \"global_batch_size\": %d}\n", JOB_BATCH);
    if (rc == SL_ENOMEM)
        sl_log(SL_LOG_ERROR, "stats --job: out of memory");
    return rc ? 1 : 0;
}

/* Write the skeleton to path (through sl_output: whole or not at all).
 * 0, or 1 with the reason logged and nothing written. */
static int job_write(const char *path, const struct stats *st, char **files, int nfiles,
                     const struct record_read_opts *ro)
{
    struct sl_buf b;
    sl_buf_init(&b, 0);
    size_t nfeatures = 0;
    int rc = job_layout(&b, path, st, files, nfiles, ro, &nfeatures);
    struct sl_output *out = NULL;
    struct sl_error err = {0};
    if (rc == 0) {
        if (sl_output_open(&out, path, 0, &err) != 0) {
            rc = 1;
        } else if (fwrite(b.data, 1, b.len, sl_output_stream(out)) != b.len) {
            sl_output_abort(out); /* the reason comes at the flush; a short fwrite has none */
            sl_error_set(&err, SL_EIO, "write(%s): short write", path);
            rc = 1;
        } else if (sl_output_commit(out, &err) != 0) { /* frees out in every case */
            rc = 1;
        }
        if (rc != 0)
            sl_log(SL_LOG_ERROR, "stats --job: %s", err.msg);
    }
    if (rc == 0)
        sl_log(SL_LOG_INFO, "stats --job: wrote %s: %zu feature%s of %d file%s; global_batch_size %d is a placeholder",
               path, nfeatures, nfeatures == 1 ? "" : "s", nfiles, nfiles == 1 ? "" : "s", JOB_BATCH);
    else
        sl_log(SL_LOG_ERROR, "stats --job: no job written");
    sl_buf_free(&b);
    return rc;
}

static const char stats_help[] =
    "Usage: sluice-record stats [OPTION]... FILE...\n"
    "Summarize the records of all FILEs together: count, bytes, min/mean/max\n"
    "record size and a histogram of sizes in power-of-two buckets. For TFRecord\n"
    "files of tf.train.Example, every feature key with the kinds seen (int64,\n"
    "float, bytes; none for a Feature with no kind), the records that hold it\n"
    "and the range of its value counts; records that are not Examples are\n"
    "counted as such. For tar shards, samples count as records and each field\n"
    "extension is listed with its range of sizes.\n"
    "\n"
    "  -f, --format=FMT           tfrecord, text or tar (default: by file name)\n"
    "  -c, --compression=C        auto (default), none, gzip or zlib\n"
    "      --max-record-bytes=N   refuse records larger than N bytes (default 64 MiB)\n"
    "      --json                 print one JSON object\n"
    "      --job=FILE             also write a job skeleton for the data read to FILE\n"
    "                             (docs/job.md; TFRecord files of tf.train.Example)\n" RECORD_ON_ERROR_HELP
    "  -h, --help                 show this help and exit\n"
    "\n"
    "A file that cannot be read to its end is reported (its records so far are\n"
    "included); under --on-error=fail nothing after it is read and the exit\n"
    "status is 1.\n"
    "\n"
    "--job writes the job that serves the FILEs as given (glob characters escaped):\n"
    "each feature key with its dtype (int64, float32 or bytes, from its kind), its\n"
    "shape ([] for one value a record, [N] for N) or varlen: true when the count\n"
    "varies between records, and a default (0, 0.0 or \"\") when some records lack\n"
    "it; the job's name comes from FILE's name, global_batch_size is 32: edit both,\n"
    "and add shuffle and epochs, before serving it. A bytes feature holding one\n"
    "JPEG or PNG file in every record (by its first bytes) also gets \"map\" steps:\n"
    "decode_image (RGB), resize to 256x256 and center_crop to 224x224, a fixed\n"
    "shape for batching (placeholder sizes: edit them, or use random_resized_crop\n"
    "for training). A FILE that exists is not replaced (exit status 2). Nothing\n"
    "is written (exit status 1) when the data cannot be described: no records,\n"
    "records that are not Examples, a feature with values of two kinds, a key or\n"
    "file name that is not UTF-8.\n";

int record_stats_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"format", required_argument, NULL, 'f'},
        {"compression", required_argument, NULL, 'c'},
        {"max-record-bytes", required_argument, NULL, RECORD_OPT_MAX_RECORD_BYTES},
        {"json", no_argument, NULL, RECORD_OPT_JSON},
        {"on-error", required_argument, NULL, RECORD_OPT_ON_ERROR},
        {"job", required_argument, NULL, RECORD_OPT_FIRST_PRIVATE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *cmd = "stats", *job = NULL;
    struct record_read_opts ro = {0};
    int json = 0, c, bad;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":f:c:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'h': return record_help(stats_help);
        case RECORD_OPT_JSON: json = 1; continue;
        case RECORD_OPT_FIRST_PRIVATE: job = optarg; continue;
        default:
            if ((bad = record_read_opt(cmd, argv, c, optarg, &ro)) != 0)
                return bad;
        }
    }
    if (optind >= argc)
        return record_usage_error(cmd, "missing file argument");
    if (job != NULL && (c = job_precheck(job, &ro, argv + optind, argc - optind)) != 0)
        return c;

    struct stats *st = sl_calloc(1, sizeof *st);
    if (st == NULL) {
        sl_log(SL_LOG_ERROR, "out of memory");
        return RECORD_EXIT_DATA;
    }
    int status = RECORD_EXIT_OK;
    for (int i = optind; i < argc; i++) {
        struct sl_error err = {0};
        enum fmt_format f = record_file_format(&ro, argv[i]);
        st->any_tfrecord |= f == FMT_FORMAT_TFRECORD;
        st->any_tar |= f == FMT_FORMAT_TAR;
        int rc = f == FMT_FORMAT_TAR ? stats_tar(st, argv[i], &ro, &err) : stats_records(st, argv[i], f, &ro, &err);
        st->files++;
        if (rc != 0) {
            sl_log(SL_LOG_ERROR, "%s", err.msg);
            if (record_file_failed(&ro)) {
                status = RECORD_EXIT_DATA;
                break;
            }
        }
    }
    record_report_skipped(cmd, &ro);
    struct record_out o;
    record_out_init(&o, stdout);
    int rc = json ? print_json(&o.buf, st) : print_text(&o.buf, st);
    if (rc != 0) {
        sl_log(SL_LOG_ERROR, "out of memory");
        status = RECORD_EXIT_DATA;
    }
    if (record_out_flush(&o) != 0)
        status = RECORD_EXIT_DATA;
    record_out_free(&o);
    if (job != NULL && status == RECORD_EXIT_OK && job_write(job, st, argv + optind, argc - optind, &ro) != 0)
        status = RECORD_EXIT_DATA;
    else if (job != NULL && status != RECORD_EXIT_OK)
        sl_log(SL_LOG_ERROR, "stats --job: a file failed: no job written");
    table_free(&st->features);
    table_free(&st->fields);
    sl_free(st->pend);
    sl_free(st);
    return status;
}
