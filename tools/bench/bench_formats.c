/* sluice-bench formats: the record-format benchmarks of issue #2.
 *
 * Data: the Fashion-MNIST training set converted in memory to Examples
 * (image: 784 raw bytes, label, id), as the main job writes them, or a user
 * file (--file). Written once to a scratch folder as plain and GZIP
 * TFRecord and read once to be in the page cache.
 *
 * Each figure is the median of --repeat runs; within a run the baseline and
 * sluice alternate on the same file, each looping over it for at least
 * --min-time seconds:
 *   1. TFRecord scan with CRC verification   vs read() + CRC32C of the bytes
 *      (sluice maps plain files; the read(2) path is measured too)
 *   2. GZIP TFRecord scan                    vs the fastest inflate alone
 *      (ISA-L igzip when built with it; zlib also shown)
 *   3. Example decode into batched columns   (records/s, GB/s; in memory)
 *      and scan + decode from the file.
 *   4. Each CRC32C implementation, in record-sized and 1 MiB calls.
 *
 * --size BYTES adds test 1 (P1) again on a plain file of about that size,
 * the data's records repeated: 51 MB fits in a large last-level cache, 1 or
 * 8 GiB does not, and the two read paths differ most from DRAM. --once runs
 * one pass of one test over --file and exits, so that whole processes
 * (sluice-record verify against the baseline) can be timed from outside.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "bench.h"
#include "fmt_example.h"
#include "fmt_features.h"
#include "fmt_idx.h"
#include "fmt_reader.h"
#include "fmt_tfrecord.h"
#include "sl_alloc.h"
#include "sl_buf.h"
#include "sl_clock.h"
#include "sl_crc32c.h"
#include "sl_log.h"
#include "sl_opt.h"

#define CHUNK ((size_t)1 << 20)
#define DEFAULT_IMAGES "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"
#define DEFAULT_LABELS "/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz"

struct bench {
    const char *file;
    char plain[4096], gz[4096];
    struct fmt_feature_spec specs[16];
    size_t nspecs;
    int repeat;
    double min_time;
    size_t batch;
    int json;
    uint64_t plain_bytes, gz_bytes, records;
    uint64_t size;  /* --size: 0 none */
    char big[4096]; /* its file */
    uint64_t big_bytes, big_records;
    /* the map-or-read probe (fmt_io_probe_file) on the plain file and on
     * --size's: this machine's limits for each path, and the default path */
    struct fmt_io_probe probe, big_probe;
    /* all records in memory, for the decode test */
    uint8_t *recs;
    uint64_t *rec_off; /* records + 1 */
};

struct result {
    const char *name, *unit, *baseline_name;
    double ours, base; /* base 0: no baseline */
    double extra;      /* records/s for decode figures */
};

/* ---- the measured bodies: each does one full pass and returns bytes ---- */

typedef int (*pass_fn)(struct bench *b, const void *arg, uint64_t *bytes);

static int pass_read_crc(struct bench *b, const void *arg, uint64_t *bytes)
{
    const char *path = arg;
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    static uint8_t *buf;
    if (buf == NULL)
        buf = sl_malloc(CHUNK);
    uint32_t crc = 0;
    ssize_t n;
    uint64_t total = 0;
    while ((n = read(fd, buf, CHUNK)) > 0) {
        crc = sl_crc32c_extend(crc, buf, (size_t)n);
        total += (uint64_t)n;
    }
    close(fd);
    *bytes = total + (crc == 1); /* keep the crc alive */
    (void)b;
    return n < 0 ? -1 : 0;
}

struct inflate_arg {
    bench_pass_fn fn;
    const char *path;
};

struct scan_arg {
    const char *path;
    int use_zlib;
    enum fmt_io io;
};

static int pass_scan(struct bench *b, const void *arg, uint64_t *bytes)
{
    const struct scan_arg *a = arg;
    struct fmt_reader_opts o = {.use_zlib = a->use_zlib, .io = a->io};
    struct fmt_reader *r;
    struct sl_error err = {0};
    if (fmt_reader_open(&r, a->path, &o, &err) != 0) {
        sl_log(SL_LOG_ERROR, "%s", err.msg);
        return -1;
    }
    struct fmt_record rec;
    int rc;
    while ((rc = fmt_reader_next(r, &rec, &err)) == 0)
        ;
    *bytes = fmt_stream_offset(fmt_reader_stream(r));
    fmt_reader_close(r);
    if (rc != SL_END)
        sl_log(SL_LOG_ERROR, "%s", err.msg);
    (void)b;
    return rc == SL_END ? 0 : -1;
}

/* the inflate baselines live in bench_limits.c (sluice-bench run uses them too) */
static int pass_inflate(struct bench *b, const void *arg, uint64_t *bytes)
{
    const struct inflate_arg *a = arg;
    (void)b;
    return a->fn(a->path, bytes);
}

static int pass_decode_mem(struct bench *b, const void *arg, uint64_t *bytes)
{
    struct fmt_batch *batch = (struct fmt_batch *)arg;
    struct sl_error err = {0};
    for (uint64_t i = 0; i < b->records; i++) {
        if (fmt_batch_rows(batch) == b->batch)
            fmt_batch_reset(batch);
        if (fmt_batch_add(batch, b->recs + b->rec_off[i], b->rec_off[i + 1] - b->rec_off[i], &err) != 0) {
            sl_log(SL_LOG_ERROR, "record %llu: %s", (unsigned long long)i, err.msg);
            return -1;
        }
    }
    fmt_batch_reset(batch);
    *bytes = b->rec_off[b->records];
    return 0;
}

struct scan_decode_arg {
    const char *path;
    struct fmt_batch *batch;
};

static int pass_scan_decode(struct bench *b, const void *arg, uint64_t *bytes)
{
    const struct scan_decode_arg *a = arg;
    struct fmt_reader *r;
    struct sl_error err = {0};
    if (fmt_reader_open(&r, a->path, NULL, &err) != 0) {
        sl_log(SL_LOG_ERROR, "%s", err.msg);
        return -1;
    }
    struct fmt_record rec;
    int rc;
    while ((rc = fmt_reader_next(r, &rec, &err)) == 0) {
        if (fmt_batch_rows(a->batch) == b->batch)
            fmt_batch_reset(a->batch);
        if ((rc = fmt_batch_add(a->batch, rec.data, rec.len, &err)) != 0)
            break;
    }
    fmt_batch_reset(a->batch);
    *bytes = fmt_stream_offset(fmt_reader_stream(r));
    fmt_reader_close(r);
    if (rc != SL_END)
        sl_log(SL_LOG_ERROR, "%s", err.msg);
    return rc == SL_END ? 0 : -1;
}

struct crc_arg {
    sl_crc32c_fn fn;
    size_t block; /* CRC calls of this many bytes over the records buffer */
};

/* CRC32C over the in-memory records in blocks, chained as a reader does. */
static int pass_crc(struct bench *b, const void *arg, uint64_t *bytes)
{
    const struct crc_arg *a = arg;
    uint64_t total = b->rec_off[b->records], done = 0;
    uint32_t c = 0;
    while (done + a->block <= total) {
        c = a->fn(c, b->recs + done, a->block);
        done += a->block;
    }
    *bytes = done + (c == 1);
    return 0;
}

/* Run fn repeatedly for at least min_time; returns bytes per second. */
static double measure(struct bench *b, pass_fn fn, const void *arg)
{
    uint64_t total = 0;
    double t0 = sl_clock_s(), el;
    do {
        uint64_t n = 0;
        if (fn(b, arg, &n) != 0)
            return -1;
        total += n;
        el = sl_clock_s() - t0;
    } while (el < b->min_time);
    return (double)total / el;
}

/* Alternate ours and the baseline `repeat` times; medians into r. */
static int compare(struct bench *b, struct result *r, pass_fn ours, const void *oa, pass_fn base, const void *ba)
{
    double o[64], s[64];
    int n = b->repeat;
    for (int i = 0; i < n; i++) {
        if (base != NULL && (s[i] = measure(b, base, ba)) < 0)
            return -1;
        if ((o[i] = measure(b, ours, oa)) < 0)
            return -1;
    }
    r->ours = bench_median(o, (size_t)n);
    r->base = base != NULL ? bench_median(s, (size_t)n) : 0;
    return 0;
}

/* ---- data preparation ---- */

static int write_fmnist(struct bench *b, const char *images, const char *labels)
{
    struct sl_error err = {0};
    struct fmt_idx *xi = NULL, *xl = NULL;
    if (fmt_idx_open(&xi, images, &err) != 0 || fmt_idx_open(&xl, labels, &err) != 0) {
        sl_log(SL_LOG_ERROR, "%s (install dataset-fashion-mnist or pass --file)", err.msg);
        fmt_idx_close(xi);
        return -1;
    }
    struct fmt_tfrecord_writer *wp = NULL, *wg = NULL;
    int rc = fmt_tfrecord_writer_open(&wp, b->plain, FMT_COMP_NONE, -1, &err);
    if (rc == 0)
        rc = fmt_tfrecord_writer_open(&wg, b->gz, FMT_COMP_GZIP, -1, &err);
    struct sl_buf ex;
    sl_buf_init(&ex, 0);
    const uint8_t *img, *lab;
    int64_t id = 0;
    while (rc == 0 && (rc = fmt_idx_next(xi, &img, &err)) == 0) {
        if ((rc = fmt_idx_next(xl, &lab, &err)) != 0)
            break;
        int64_t label = fmt_idx_value_i64(xl, lab, 0);
        size_t ilen = fmt_idx_info(xi)->elem_bytes;
        struct fmt_example_enc e;
        sl_buf_reset(&ex);
        rc = fmt_example_enc_begin(&e, &ex);
        if (rc == 0)
            rc = fmt_example_enc_bytes(&e, "image", &img, &ilen, 1);
        if (rc == 0)
            rc = fmt_example_enc_int64(&e, "label", &label, 1);
        if (rc == 0)
            rc = fmt_example_enc_int64(&e, "id", &id, 1);
        if (rc == 0)
            rc = fmt_example_enc_end(&e);
        else
            fmt_example_enc_abort(&e);
        if (rc == 0)
            rc = fmt_tfrecord_writer_write(wp, ex.data, ex.len, &err);
        if (rc == 0)
            rc = fmt_tfrecord_writer_write(wg, ex.data, ex.len, &err);
        id++;
    }
    if (rc == SL_END)
        rc = 0;
    sl_buf_free(&ex);
    fmt_idx_close(xi);
    fmt_idx_close(xl);
    int rc2 = fmt_tfrecord_writer_close(wp, &err);
    int rc3 = fmt_tfrecord_writer_close(wg, &err);
    if (rc == 0)
        rc = rc2 ? rc2 : rc3;
    if (rc != 0)
        sl_log(SL_LOG_ERROR, "preparing data: %s", err.msg[0] ? err.msg : sl_code_name(rc));
    return rc;
}

static int copy_to_gzip(struct bench *b)
{
    struct sl_error err = {0};
    struct fmt_reader *r;
    struct fmt_tfrecord_writer *w;
    if (fmt_reader_open(&r, b->plain, NULL, &err) != 0) {
        sl_log(SL_LOG_ERROR, "%s", err.msg);
        return -1;
    }
    int rc = fmt_tfrecord_writer_open(&w, b->gz, FMT_COMP_GZIP, -1, &err);
    struct fmt_record rec;
    while (rc == 0 && (rc = fmt_reader_next(r, &rec, &err)) == 0)
        rc = fmt_tfrecord_writer_write(w, rec.data, rec.len, &err);
    fmt_reader_close(r);
    if (rc == SL_END)
        rc = fmt_tfrecord_writer_close(w, &err);
    else
        fmt_tfrecord_writer_abort(w);
    if (rc != 0)
        sl_log(SL_LOG_ERROR, "%s", err.msg);
    return rc;
}

static int load_records(struct bench *b)
{
    struct sl_error err = {0};
    struct fmt_reader *r;
    if (fmt_reader_open(&r, b->plain, NULL, &err) != 0) {
        sl_log(SL_LOG_ERROR, "%s", err.msg);
        return -1;
    }
    struct sl_buf data, offs;
    sl_buf_init(&data, 0);
    sl_buf_init(&offs, 0);
    uint64_t zero = 0;
    int rc = sl_buf_append(&offs, &zero, sizeof zero);
    struct fmt_record rec;
    while (rc == 0 && (rc = fmt_reader_next(r, &rec, &err)) == 0) {
        rc = sl_buf_append(&data, rec.data, rec.len);
        uint64_t end = data.len;
        if (rc == 0)
            rc = sl_buf_append(&offs, &end, sizeof end);
    }
    fmt_reader_close(r);
    if (rc != SL_END) {
        sl_log(SL_LOG_ERROR, "%s", err.msg[0] ? err.msg : "out of memory");
        sl_buf_free(&data);
        sl_buf_free(&offs);
        return -1;
    }
    b->recs = data.data;
    b->rec_off = (uint64_t *)(void *)offs.data;
    b->records = offs.len / sizeof(uint64_t) - 1;
    return 0;
}

/* The --size file: the records in memory, repeated in order, while the
 * next one still fits in b->size bytes. */
static int write_big(struct bench *b)
{
    struct sl_error err = {0};
    struct fmt_tfrecord_writer *w = NULL;
    if (b->records == 0) {
        sl_log(SL_LOG_ERROR, "--size: the data holds no records to repeat");
        return -1;
    }
    int rc = fmt_tfrecord_writer_open(&w, b->big, FMT_COMP_NONE, -1, &err);
    uint64_t n = 0;
    for (uint64_t i = 0; rc == 0; i = i + 1 == b->records ? 0 : i + 1, n++) {
        uint64_t len = b->rec_off[i + 1] - b->rec_off[i];
        if (fmt_tfrecord_writer_offset(w) + len + FMT_TFRECORD_HEADER + FMT_TFRECORD_FOOTER > b->size)
            break;
        rc = fmt_tfrecord_writer_write(w, b->recs + b->rec_off[i], (size_t)len, &err);
    }
    if (rc == 0)
        rc = fmt_tfrecord_writer_close(w, &err);
    else
        fmt_tfrecord_writer_abort(w);
    if (rc != 0) {
        sl_log(SL_LOG_ERROR, "writing %s: %s", b->big, err.msg[0] ? err.msg : sl_code_name(rc));
        return -1;
    }
    b->big_records = n;
    return 0;
}

/* --once: one pass of one test over a file. */
static int run_once(struct bench *b, const char *test)
{
    uint64_t bytes = 0;
    struct scan_arg a = {b->file, 0,
                         strcmp(test, "scan-read") == 0 ? FMT_IO_READ
                         : strcmp(test, "scan") == 0    ? FMT_IO_MAP
                                                        : FMT_IO_AUTO};
    double t0 = sl_clock_s();
    int rc;
    if (strcmp(test, "read-crc") == 0)
        rc = pass_read_crc(b, b->file, &bytes);
    else
        rc = pass_scan(b, &a, &bytes);
    double el = sl_clock_s() - t0;
    if (rc != 0) {
        sl_log(SL_LOG_ERROR, "%s: %s failed", b->file, test);
        return 1;
    }
    printf("%s: %llu bytes in %.3f s (%.2f GB/s)", test, (unsigned long long)bytes, el,
           el > 0 ? (double)bytes / el / 1e9 : 0.0);
    if (strcmp(test, "read-crc") != 0) {
        struct fmt_io_probe p;
        const char *source;
        enum fmt_io io = a.io != FMT_IO_AUTO ? a.io : fmt_io_current(&p, &source);
        printf("; path %s", fmt_io_name(io));
        if (a.io == FMT_IO_AUTO && p.done)
            printf(" (probe: read()+crc32c %.2f GB/s, mmap+crc32c %.2f GB/s)", p.read_bps / 1e9, p.map_bps / 1e9);
        else if (a.io == FMT_IO_AUTO)
            printf(" (%s)", source);
    }
    printf("\n");
    return 0;
}

static uint64_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

static int parse_features(struct bench *b, const char *spec)
{
    char *copy = sl_strdup(spec), *save = NULL;
    b->nspecs = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (b->nspecs == 16) {
            sl_free(copy);
            return -1;
        }
        struct fmt_feature_spec *s = &b->specs[b->nspecs++];
        memset(s, 0, sizeof *s);
        char *name = tok, *dtype = strchr(tok, ':');
        if (dtype == NULL) {
            sl_free(copy);
            return -1;
        }
        *dtype++ = '\0';
        char *count = strchr(dtype, ':');
        if (count)
            *count++ = '\0';
        snprintf(s->name, sizeof s->name, "%s", name);
        if (fmt_dtype_parse(dtype, &s->dtype) != 0) {
            sl_free(copy);
            return -1;
        }
        struct sl_error ignored = {0};
        uint64_t n = 0;
        if (count != NULL && sl_opt_parse_u64(count, 1, (uint64_t)1 << 24, &n, &ignored) != 0) {
            sl_free(copy);
            return -1;
        }
        if (count != NULL) {
            s->rank = 1;
            s->shape[0] = n;
        }
    }
    sl_free(copy);
    return b->nspecs ? 0 : -1;
}

static void print_json_results(const struct result *r, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        printf("%s{\"name\":\"%s\",\"unit\":\"%s\",\"sluice\":%.4g", i ? "," : "", r[i].name, r[i].unit, r[i].ours);
        if (r[i].base > 0)
            printf(",\"baseline\":\"%s\",\"baseline_value\":%.4g,\"ratio\":%.3f", r[i].baseline_name, r[i].base,
                   r[i].ours / r[i].base);
        if (r[i].extra > 0)
            printf(",\"records_per_s\":%.4g", r[i].extra);
        printf("}");
    }
}

static void print_table(const struct result *r, size_t n)
{
    printf("  %-38s %-22s %-32s %s\n", "test", "sluice", "baseline", "ratio");
    for (size_t i = 0; i < n; i++) {
        char ours[64], base[64] = "", ratio[16] = "";
        if (r[i].extra > 0)
            snprintf(ours, sizeof ours, "%.2f M rec/s %.2f %s", r[i].extra / 1e6, r[i].ours, r[i].unit);
        else
            snprintf(ours, sizeof ours, "%.2f %s", r[i].ours, r[i].unit);
        if (r[i].base > 0) {
            snprintf(base, sizeof base, "%-18s %.2f %s", r[i].baseline_name, r[i].base, r[i].unit);
            snprintf(ratio, sizeof ratio, "%.2fx", r[i].ours / r[i].base);
        }
        printf("  %-38s %-22s %-32s %s\n", r[i].name, ours, base, ratio);
    }
}

/* r[0..n): the default data's figures; big[0..nbig): the --size file's. */
/* One probe as JSON, or as a line of the table's header. */
static void print_probe(const struct bench *b, const struct fmt_io_probe *p, const char *what)
{
    if (b->json) {
        if (!p->done) {
            printf(",\"io_probe\":null");
            return;
        }
        printf(",\"io_probe\":{\"read_crc_gbps\":%.3f,\"map_crc_gbps\":%.3f,\"choice\":\"%s\"}", p->read_bps / 1e9,
               p->map_bps / 1e9, fmt_io_name(p->choice));
        return;
    }
    if (!p->done) {
        printf("map or read on %s: not probed (under 32 MiB, or not in the page cache)\n", what);
        return;
    }
    printf("map or read on %s (probe, 3 x 2 MiB each, fastest): read()+crc32c %.2f GB/s, mmap+crc32c %.2f GB/s: "
           "%s\n",
           what, p->read_bps / 1e9, p->map_bps / 1e9,
           p->choice == FMT_IO_MAP ? "map wins, the default path maps" : "the default path reads");
}

static void print_results(const struct bench *b, const struct result *r, size_t n, const struct result *big,
                          size_t nbig)
{
    const char *source;
    enum fmt_io io = fmt_io_current(NULL, &source);
    if (b->json) {
        printf("{\"bench\":\"formats\",\"records\":%llu,\"plain_bytes\":%llu,\"gzip_bytes\":%llu,"
               "\"crc32c\":\"%s\",\"repeat\":%d,\"results\":[",
               (unsigned long long)b->records, (unsigned long long)b->plain_bytes, (unsigned long long)b->gz_bytes,
               sl_crc32c_impl_name(), b->repeat);
        print_json_results(r, n);
        printf("],\"io\":\"%s\",\"io_source\":\"%s\"", fmt_io_name(io), source);
        print_probe(b, &b->probe, "");
        if (b->size) {
            printf(",\"at_size\":{\"size\":%llu,\"records\":%llu,\"plain_bytes\":%llu,\"results\":[",
                   (unsigned long long)b->size, (unsigned long long)b->big_records, (unsigned long long)b->big_bytes);
            print_json_results(big, nbig);
            printf("]");
            print_probe(b, &b->big_probe, "");
            printf("}");
        }
        printf("}\n");
        return;
    }
    printf("sluice-bench formats: %llu records, %.1f MB plain, %.1f MB gzip; crc32c %s; median of %d\n\n",
           (unsigned long long)b->records, (double)b->plain_bytes / 1e6, (double)b->gz_bytes / 1e6,
           sl_crc32c_impl_name(), b->repeat);
    print_probe(b, &b->probe, "the plain file");
    printf("default path for plain files in this process: %s (%s)\n\n", fmt_io_name(io), source);
    print_table(r, n);
    if (b->size) {
        printf("\nat --size %llu: %llu records, %.1f MB plain (in the page cache)\n\n", (unsigned long long)b->size,
               (unsigned long long)b->big_records, (double)b->big_bytes / 1e6);
        print_probe(b, &b->big_probe, "this file");
        printf("\n");
        print_table(big, nbig);
    }
}

/* The command line, parsed; main copies what struct bench keeps. */
struct args {
    const char *file, *features, *images, *labels, *scratch;
    int repeat, batch, json;
    double min_time;
    uint64_t size; /* 0: none */
    int once;      /* -1: none, else an index into once_names */
};

static const char *const once_names[] = {"read-crc", "scan", "scan-read", "scan-auto"};

#define OFF(f) offsetof(struct args, f)
static const struct sl_opt rows[] = {
    {"file", 0, SL_OPT_STRING, OFF(file), 0, 0, NULL, "PATH",
     "a plain TFRecord file of tf.train.Example records to use (default: Fashion-MNIST train set converted to a "
     "scratch file)",
     NULL, NULL},
    {"features", 0, SL_OPT_STRING, OFF(features), 0, 0, "image:uint8:784,label:int64,id:int64", "SPEC",
     "declared features for the decode test, as name:dtype[:count] comma-separated", NULL, NULL},
    {"images", 0, SL_OPT_STRING, OFF(images), 0, 0, DEFAULT_IMAGES, "PATH",
     "IDX images for the default data (default " DEFAULT_IMAGES ")", NULL, NULL},
    {"labels", 0, SL_OPT_STRING, OFF(labels), 0, 0, DEFAULT_LABELS, "PATH", "IDX labels", NULL, NULL},
    {"scratch", 0, SL_OPT_STRING, OFF(scratch), 0, 0, NULL, "DIR",
     "where to write the scratch files (default $TMPDIR or /tmp)", NULL, NULL},
    {"repeat", 0, SL_OPT_INT, OFF(repeat), 1, 64, "5", "N", "runs per figure; the median is reported", NULL, NULL},
    {"min-time", 0, SL_OPT_DOUBLE, OFF(min_time), 0, 3600, "0.3", "SECONDS", "least time per measurement", NULL, NULL},
    {"batch", 0, SL_OPT_INT, OFF(batch), 1, 1 << 20, "256", "N", "rows per decoded batch", NULL, NULL},
    {"size", 0, SL_OPT_BYTES, OFF(size), 4096, (double)((uint64_t)1 << 50), NULL, "BYTES",
     "also measure the TFRecord scan (P1) on a plain file of about BYTES (at least 4096; K, M, G, T: powers of "
     "1024), the data's records repeated, written under --scratch, read once to be in the page cache and removed "
     "at the end (it needs BYTES of disk and of free memory)",
     NULL, NULL},
    {"once", 0, SL_OPT_CHOICE, OFF(once), 0, 0, NULL, "TEST",
     "one pass of TEST over --file, then exit (for timing whole processes): read-crc (the baseline), scan "
     "(mapped), scan-read (read(2)) or scan-auto (the default: SLUICE_IO, else the probe's choice)",
     "read-crc|scan|scan-read|scan-auto", NULL},
    {"json", 0, SL_OPT_FLAG, OFF(json), 0, 0, NULL, NULL, "one JSON object instead of the table", NULL, NULL},
    BENCH_OPT_HELP_ROW,
};

static const struct sl_opt_cmd cmd = {
    .prog = "sluice-bench formats",
    .usage = "Usage: sluice-bench formats [OPTIONS]\n"
             "\n"
             "Measure record reading and decoding against the least-work baselines, in one run.\n"
             "\n",
    .rows = rows,
    .nrows = sizeof rows / sizeof rows[0],
};

/* Tests 1 to 4 on the prepared data: appends to res[*nres..), at most cap
 * figures, in bytes per second. Returns 0, or -1 when a pass failed (logged). */
static int measure_default(struct bench *b, struct fmt_batch *batch, struct result *res, size_t cap, size_t *nres_out)
{
    size_t nres = *nres_out;
    int rc = -1;
    struct scan_arg plain = {b->plain, 0, FMT_IO_MAP}, plain_read = {b->plain, 0, FMT_IO_READ},
                    gz = {b->gz, 0, FMT_IO_AUTO}, gz_zlib = {b->gz, 1, FMT_IO_AUTO};
    res[nres] = (struct result){"tfrecord scan + crc (mmap)", "GB/s", "read()+crc32c", 0, 0, 0};
    if (compare(b, &res[nres++], pass_scan, &plain, pass_read_crc, b->plain) != 0)
        goto out;
    res[nres] = (struct result){"tfrecord scan + crc (read)", "GB/s", "read()+crc32c", 0, 0, 0};
    if (compare(b, &res[nres++], pass_scan, &plain_read, pass_read_crc, b->plain) != 0)
        goto out;
#ifdef SLUICE_HAVE_ISAL
    res[nres] = (struct result){"gzip tfrecord scan", "GB/s", "igzip inflate", 0, 0, 0};
    struct inflate_arg isal = {bench_pass_isal_inflate, b->gz};
    if (compare(b, &res[nres++], pass_scan, &gz, pass_inflate, &isal) != 0)
        goto out;
#else
    (void)gz;
#endif
    res[nres] = (struct result){"gzip tfrecord scan (zlib inflate)", "GB/s", "zlib inflate", 0, 0, 0};
    struct inflate_arg zlib_arg = {bench_pass_zlib_inflate, b->gz};
    if (compare(b, &res[nres++], pass_scan, &gz_zlib, pass_inflate, &zlib_arg) != 0)
        goto out;
    res[nres] = (struct result){"example decode (in memory)", "GB/s", "", 0, 0, 0};
    if (compare(b, &res[nres], pass_decode_mem, batch, NULL, NULL) != 0)
        goto out;
    res[nres].extra = res[nres].ours * (double)b->records / (double)b->rec_off[b->records];
    nres++;
    struct scan_decode_arg sd = {b->plain, batch};
    res[nres] = (struct result){"scan + crc + decode (file)", "GB/s", "", 0, 0, 0};
    if (compare(b, &res[nres], pass_scan_decode, &sd, NULL, NULL) != 0)
        goto out;
    res[nres].extra = res[nres].ours * (double)b->records / (double)b->plain_bytes;
    nres++;
    static const char *crc_names[] = {"portable", "sse4.2", "isa-l"};
    static char crc_labels[SL_CRC32C_NIMPL][2][48];
    size_t avg = (size_t)(b->rec_off[b->records] / (b->records ? b->records : 1));
    for (int i = 0; i < SL_CRC32C_NIMPL && nres + 2 <= cap; i++) {
        sl_crc32c_fn fn = sl_crc32c_impl_fn((enum sl_crc32c_impl)i);
        if (fn == NULL)
            continue;
        for (int k = 0; k < 2; k++) {
            struct crc_arg ca = {fn, k == 0 ? (avg ? avg : 1) : CHUNK};
            snprintf(crc_labels[i][k], sizeof crc_labels[i][k], "crc32c %s, %zu-byte calls", crc_names[i], ca.block);
            res[nres] = (struct result){crc_labels[i][k], "GB/s", "", 0, 0, 0};
            if (compare(b, &res[nres++], pass_crc, &ca, NULL, NULL) != 0)
                goto out;
        }
    }
    rc = 0;
out:
    *nres_out = nres;
    return rc;
}

/* --size: drops the default files from the page cache, writes and warms the
 * big file and measures test 1 on it into big[0..*nbig) (at most 2), in bytes
 * per second. Returns 0, or -1 on failure (logged). */
static int measure_big(struct bench *b, struct result *big, size_t *nbig)
{
    struct sl_error err = {0};
    /* one copy in the page cache at a time: the default files go first */
    if (b->file == NULL)
        unlink(b->plain);
    unlink(b->gz);
    uint64_t warm = 0;
    if (write_big(b) != 0 || pass_read_crc(b, b->big, &warm) != 0)
        return -1;
    b->big_bytes = file_size(b->big);
    if (fmt_io_probe_file(b->big, &b->big_probe, &err) != 0)
        b->big_probe.done = 0;
    struct scan_arg bp = {b->big, 0, FMT_IO_MAP}, bpr = {b->big, 0, FMT_IO_READ};
    big[*nbig] = (struct result){"tfrecord scan + crc (mmap)", "GB/s", "read()+crc32c", 0, 0, 0};
    if (compare(b, &big[(*nbig)++], pass_scan, &bp, pass_read_crc, b->big) != 0)
        return -1;
    big[*nbig] = (struct result){"tfrecord scan + crc (read)", "GB/s", "read()+crc32c", 0, 0, 0};
    if (compare(b, &big[(*nbig)++], pass_scan, &bpr, pass_read_crc, b->big) != 0)
        return -1;
    return 0;
}

/* Figures from bytes per second to GB/s. */
static void to_gbps(struct result *r, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        r[i].ours /= 1e9;
        r[i].base /= 1e9;
    }
}

/* The whole run on prepared data (b's files and records loaded): measures,
 * prints. Returns 0, or 1 on failure (logged). */
static int run_all(struct bench *b)
{
    struct result res[16];
    size_t nres = 0;
    struct sl_error err = {0};
    struct fmt_batch *batch = NULL;
    if (fmt_batch_create(&batch, b->specs, b->nspecs, b->batch, &err) != 0) {
        sl_log(SL_LOG_ERROR, "%s", err.msg);
        return 1;
    }
    int status = 1;
    if (measure_default(b, batch, res, sizeof res / sizeof res[0], &nres) != 0)
        goto out_batch;
    struct result big[2];
    size_t nbig = 0;
    if (b->size != 0 && measure_big(b, big, &nbig) != 0)
        goto out_batch;
    to_gbps(res, nres);
    to_gbps(big, nbig);
    print_results(b, res, nres, big, nbig);
    status = 0;
out_batch:
    fmt_batch_destroy(batch);
    return status;
}

int bench_formats_main(int argc, char **argv)
{
    struct args a = {.once = -1};
    int prc = bench_opt_parse("formats", &cmd, argc, argv, &a);
    if (prc != 0)
        return prc == 1 ? 0 : 2;
    if (a.scratch == NULL)
        a.scratch = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    struct bench b = {.file = a.file,
                      .repeat = a.repeat,
                      .min_time = a.min_time,
                      .batch = (size_t)a.batch,
                      .json = a.json,
                      .size = a.size};
    if (a.once >= 0) {
        if (b.file == NULL) {
            fprintf(stderr, "sluice-bench formats: --once needs --file\n");
            return 2;
        }
        return run_once(&b, once_names[a.once]);
    }
    if (parse_features(&b, a.features) != 0) {
        fprintf(stderr, "sluice-bench formats: bad --features '%s' (name:dtype[:count],...)\n", a.features);
        return 2;
    }
    char dir[3072];
    snprintf(dir, sizeof dir, "%s/sluice-bench-XXXXXX", a.scratch);
    if (mkdtemp(dir) == NULL) {
        sl_log(SL_LOG_ERROR, "mkdtemp(%s): %s", dir, strerror(errno));
        return 1;
    }
    snprintf(b.plain, sizeof b.plain, "%s/data.tfrecord", dir);
    snprintf(b.gz, sizeof b.gz, "%s/data.tfrecord.gz", dir);
    snprintf(b.big, sizeof b.big, "%s/size.tfrecord", dir);
    int status = 1;
    if (b.file != NULL) {
        snprintf(b.plain, sizeof b.plain, "%s", b.file);
        if (copy_to_gzip(&b) != 0)
            goto out_rmdir;
    } else if (write_fmnist(&b, a.images, a.labels) != 0) {
        goto out_rmdir;
    }
    if (load_records(&b) != 0) /* also warms the page cache */
        goto out_rmdir;
    b.plain_bytes = file_size(b.plain);
    b.gz_bytes = file_size(b.gz);
    struct sl_error perr = {0};
    if (fmt_io_probe_file(b.plain, &b.probe, &perr) != 0) /* printed as not probed */
        b.probe.done = 0;
    status = run_all(&b);
out_rmdir:
    if (b.file == NULL)
        unlink(b.plain);
    unlink(b.gz);
    unlink(b.big);
    rmdir(dir);
    sl_free(b.recs);
    sl_free(b.rec_off);
    return status;
}
