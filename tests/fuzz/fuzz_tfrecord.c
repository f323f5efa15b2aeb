/* libFuzzer target: the shared record loop over arbitrary bytes, as
 * TFRecord (compression AUTO, so the gzip and zlib paths are fuzzed too)
 * and as text lines, with a small record limit so huge lengths are cheap.
 *
 * Differential (issue #25): the same bytes as a plain TFRecord file, read
 * from memory, mapped, and read(2) in chunks smaller than, around and
 * larger than a record, must give the same records (offsets, lengths,
 * CRCs of their data), the same end and the same error message; any
 * difference aborts. The file is a memfd named by its /proc/self/fd path. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fmt_reader.h"
#include "sl_crc32c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void drain(const uint8_t *data, size_t size, enum fmt_format f, int use_zlib)
{
    struct fmt_reader_opts o = {.format = f, .max_record_bytes = 1 << 16, .buffer_size = 4096, .use_zlib = use_zlib};
    struct fmt_reader *r;
    struct sl_error err = {0};
    if (fmt_reader_open_mem(&r, "fuzz", data, size, &o, &err) != 0)
        return;
    struct fmt_record rec;
    uint64_t sum = 0;
    while (fmt_reader_next(r, &rec, &err) == 0) {
        if (rec.len > 0)
            sum += rec.data[0] + rec.data[rec.len - 1];
    }
    (void)sum;
    fmt_reader_close(r);
}

/* What one path gave: a digest of its records, their count, its end. */
struct outcome {
    uint64_t n, digest, dropped;
    int rc;
    char msg[SL_ERROR_MSG_MAX + 8];
};

static void outcome_of(const char *name, const uint8_t *data, size_t size, int path, size_t chunk, struct outcome *out)
{
    struct fmt_reader_opts o = {.format = FMT_FORMAT_TFRECORD,
                                .compression = FMT_COMP_NONE,
                                .max_record_bytes = 1 << 16,
                                .buffer_size = chunk,
                                .io = path == 2 ? FMT_IO_READ : FMT_IO_MAP};
    struct fmt_reader *r;
    struct sl_error err = {0};
    memset(out, 0, sizeof *out);
    int rc = path == 0 ? fmt_reader_open_mem(&r, name, data, size, &o, &err) : fmt_reader_open(&r, name, &o, &err);
    if (rc != 0) {
        out->rc = rc;
        snprintf(out->msg, sizeof out->msg, "open: %s", err.msg);
        return;
    }
    struct fmt_record rec;
    while ((rc = fmt_reader_next(r, &rec, &err)) == 0) {
        out->n++;
        out->digest =
            out->digest * 1000003u + rec.offset * 31u + rec.len * 7u + rec.index + sl_crc32c(rec.data, rec.len);
    }
    out->rc = rc;
    out->dropped = fmt_reader_dropped_tail(r);
    if (rc != SL_END)
        snprintf(out->msg, sizeof out->msg, "%s", err.msg);
    fmt_reader_close(r);
}

static void differential(const uint8_t *data, size_t size)
{
    int fd = memfd_create("fuzz_tfrecord", MFD_CLOEXEC);
    if (fd < 0)
        return;
    if (size > 0 && write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return;
    }
    char name[64];
    snprintf(name, sizeof name, "/proc/self/fd/%d", fd);
    static const struct {
        int path; /* 0 memory, 1 mapped, 2 read(2) */
        size_t chunk;
    } paths[] = {{0, 0}, {1, 0}, {2, 0}, {2, 16}, {2, 100}, {2, 4096}};
    struct outcome first, o;
    outcome_of(name, data, size, paths[0].path, paths[0].chunk, &first);
    for (size_t i = 1; i < sizeof paths / sizeof paths[0]; i++) {
        outcome_of(name, data, size, paths[i].path, paths[i].chunk, &o);
        if (o.n != first.n || o.digest != first.digest || o.rc != first.rc || o.dropped != first.dropped ||
            strcmp(o.msg, first.msg) != 0) {
            fprintf(stderr,
                    "path %zu (io %d, chunk %zu) differs from memory: %llu records rc %d '%s', memory %llu "
                    "records rc %d '%s'\n",
                    i, paths[i].path, paths[i].chunk, (unsigned long long)o.n, o.rc, o.msg, (unsigned long long)first.n,
                    first.rc, first.msg);
            abort();
        }
    }
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    drain(data, size, FMT_FORMAT_TFRECORD, 0);
    drain(data, size, FMT_FORMAT_TFRECORD, 1);
    drain(data, size, FMT_FORMAT_TEXT, 0);
    differential(data, size);
    return 0;
}
