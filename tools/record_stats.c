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
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "fmt_example.h"
#include "fmt_reader.h"
#include "fmt_tar.h"
#include "record.h"
#include "sl_alloc.h"
#include "sl_json.h"
#include "sl_log.h"

#define NBUCKETS 65 /* 0: empty records; b: [2^(b-1), 2^b) */

struct key_stat {
    char *key; /* owned, NUL-terminated (keys with NUL bytes are cut there in the output) */
    size_t key_len;
    uint64_t hash;
    unsigned kinds;       /* bit (1 << fmt_kind) for each kind seen */
    uint64_t records;     /* records holding the key */
    uint64_t min_values, max_values;
    uint64_t stamp;       /* last record counted + 1 (duplicate keys) */
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
    case FMT_KIND_INT64:
        rc = fmt_int64_list_count(f->list, f->list_len, &count, &st->walk_err);
        break;
    case FMT_KIND_FLOAT:
        rc = fmt_float_list_count(f->list, f->list_len, &count, &st->walk_err);
        break;
    case FMT_KIND_BYTES:
        rc = fmt_bytes_list_count(f->list, f->list_len, &count, &st->walk_err);
        break;
    default:
        break;
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
    st->pend[st->npend++] = (struct pending){.entry = entry, .kind = f->kind, .count = count};
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
    return 0;
}

static int stats_records(struct stats *st, const char *path, enum fmt_format f, const struct record_read_opts *ro,
                         struct sl_error *err)
{
    struct fmt_reader_opts opts;
    record_reader_opts(ro, f, &opts);
    struct fmt_reader *r = NULL;
    int rc = fmt_reader_open(&r, path, &opts, err);
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
    struct fmt_tar_opts topts = {.max_member_bytes = ro->max_record_bytes};
    struct fmt_tar *t = NULL;
    int rc = fmt_tar_open(&t, path, &topts, err);
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
    int rc = sl_buf_printf(b,
                           "{\"files\":%llu,\"records\":%llu,\"bytes\":%llu,\"size\":{\"min\":%llu,\"mean\":%.3f,"
                           "\"max\":%llu},\"histogram\":[",
                           (unsigned long long)st->files, (unsigned long long)st->records,
                           (unsigned long long)st->bytes, (unsigned long long)st->min, mean,
                           (unsigned long long)st->max);
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
                rc = rc ? rc : sl_buf_printf(b, ",\"records\":%llu,\"min_values\":%llu,\"max_values\":%llu}",
                                             (unsigned long long)keys[i]->records,
                                             (unsigned long long)keys[i]->min_values,
                                             (unsigned long long)keys[i]->max_values);
            } else {
                rc = rc ? rc : sl_buf_printf(b, ":{\"samples\":%llu,\"min_bytes\":%llu,\"max_bytes\":%llu}",
                                             (unsigned long long)keys[i]->records,
                                             (unsigned long long)keys[i]->min_values,
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
    int rc = sl_buf_printf(b,
                           "files         %llu\n"
                           "records       %llu\n"
                           "bytes         %llu\n"
                           "record size   min %llu  mean %.1f  max %llu\n",
                           (unsigned long long)st->files, (unsigned long long)st->records,
                           (unsigned long long)st->bytes, (unsigned long long)st->min, mean,
                           (unsigned long long)st->max);
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
            rc = rc ? rc : sl_buf_printf(b, "%12llu  %llu..%llu\n", (unsigned long long)keys[i]->records,
                                         (unsigned long long)keys[i]->min_values,
                                         (unsigned long long)keys[i]->max_values);
        }
        sl_free(keys);
    }
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
    RECORD_ON_ERROR_HELP
    "  -h, --help                 show this help and exit\n"
    "\n"
    "A file that cannot be read to its end is reported (its records so far are\n"
    "included); under --on-error=fail nothing after it is read and the exit\n"
    "status is 1.\n";

int record_stats_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"format", required_argument, NULL, 'f'},
        {"compression", required_argument, NULL, 'c'},
        {"max-record-bytes", required_argument, NULL, RECORD_OPT_MAX_RECORD_BYTES},
        {"json", no_argument, NULL, RECORD_OPT_JSON},
        {"on-error", required_argument, NULL, RECORD_OPT_ON_ERROR},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *cmd = "stats";
    struct record_read_opts ro = {0};
    int json = 0, c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":f:c:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'h':
            return record_help(stats_help);
        case RECORD_OPT_JSON:
            json = 1;
            continue;
        case 'f':
            c = RECORD_OPT_FORMAT;
            break;
        case 'c':
            c = RECORD_OPT_COMPRESSION;
            break;
        case RECORD_OPT_MAX_RECORD_BYTES:
        case RECORD_OPT_ON_ERROR:
            break;
        default:
            return record_getopt_error(cmd, argv, c);
        }
        if (record_read_opt(cmd, c, optarg, &ro) != 0)
            return RECORD_EXIT_USAGE;
    }
    if (optind >= argc)
        return record_usage_error(cmd, "missing file argument");

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
    table_free(&st->features);
    table_free(&st->fields);
    sl_free(st->pend);
    sl_free(st);
    return status;
}
