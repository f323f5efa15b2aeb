/* fmt_index: build and load tfrecord2idx index files. Building scans with
 * the ordinary reader (so every CRC is checked) and writes through
 * sl_output (an exclusive temporary, renamed into place only when the whole
 * file indexed cleanly). Loading parses strictly: a damaged index must not
 * send a reader to a wrong offset. */
#include "fmt_index.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fmt_format.h"
#include "sl_alloc.h"
#include "sl_output.h"
#include "sto.h"

/* An entry spans a record's data and its framing, as the TFRecord format
 * states it (12 + length + 4). */
static uint64_t framing_bytes(void)
{
    const struct fmt_format_ops *ops = fmt_format_get(FMT_FORMAT_TFRECORD);
    return (uint64_t)ops->frame_head + ops->frame_tail;
}

int fmt_index_build(const char *path, const char *idx_path, const struct fmt_reader_opts *opts, uint64_t *count,
                    struct sl_error *err)
{
    struct fmt_reader_opts o = opts ? *opts : (struct fmt_reader_opts){0};
    o.format = FMT_FORMAT_TFRECORD;
    struct fmt_reader *r;
    int rc = fmt_reader_open(&r, path, &o, err);
    if (rc != 0)
        return rc;
    /* through sl_output: an exclusive temporary in the index's folder,
     * renamed over it only when the whole file indexed cleanly (a device
     * or FIFO is written in place) */
    struct sl_output *out;
    if ((rc = sl_output_open(&out, idx_path, 0, err)) != 0) {
        fmt_reader_close(r);
        return rc;
    }
    FILE *f = sl_output_stream(out);
    uint64_t n = 0, framing = framing_bytes();
    struct fmt_record rec;
    while ((rc = fmt_reader_next(r, &rec, err)) == 0) {
        fprintf(f, "%" PRIu64 " %" PRIu64 "\n", rec.offset, (uint64_t)rec.len + framing);
        n++;
    }
    fmt_reader_close(r);
    if (rc == SL_END)
        rc = 0;
    if (rc != 0) {
        sl_output_abort(out);
        return rc;
    }
    if ((rc = sl_output_commit(out, err)) != 0)
        return rc;
    if (count)
        *count = n;
    return 0;
}

static int parse_u64(const char **p, uint64_t *v)
{
    const char *s = *p;
    if (*s < '0' || *s > '9')
        return -1;
    uint64_t x = 0;
    while (*s >= '0' && *s <= '9') {
        unsigned d = (unsigned)(*s - '0');
        if (x > (UINT64_MAX - d) / 10)
            return -1;
        x = x * 10 + d;
        s++;
    }
    *v = x;
    *p = s;
    return 0;
}

/* A remote index, open as src (closed here), read whole into *buf (the
 * caller frees it) and opened as a stream over that memory, so one parser
 * reads both kinds. */
static int read_remote(struct sto_src *src, const char *idx_path, FILE **f, char **buf, struct sl_error *err)
{
    int rc;
    if (src->size > FMT_INDEX_MAX_REMOTE_BYTES) {
        rc = sl_error_set(err, SL_EINVAL, "%s: an index of %llu bytes, over the %llu a remote index may hold", idx_path,
                          (unsigned long long)src->size, (unsigned long long)FMT_INDEX_MAX_REMOTE_BYTES);
        sto_close(src);
        return rc;
    }
    size_t size = (size_t)src->size;
    *buf = sl_malloc(size ? size : 1);
    if (*buf == NULL)
        rc = sl_error_set(err, SL_ENOMEM, "%s: out of memory for its %zu bytes", idx_path, size);
    else
        rc = sto_read_full(src, 0, *buf, size, err);
    sto_close(src);
    /* fmemopen may refuse 0 bytes (POSIX allows it): an empty index reads as /dev/null */
    if (rc == 0 && (*f = size ? fmemopen(*buf, size, "r") : fopen("/dev/null", "r")) == NULL)
        rc = sl_error_sys(err, errno, "%s: fmemopen", idx_path);
    if (rc != 0) {
        sl_free(*buf);
        *buf = NULL;
    }
    return rc;
}

static int load_from(FILE *f, char *remote, const char *idx_path, struct fmt_index_entry **entries, size_t *n,
                     struct sl_error *err);

int fmt_index_load(const char *idx_path, struct fmt_index_entry **entries, size_t *n, struct sl_error *err)
{
    *entries = NULL;
    *n = 0;
    FILE *f = NULL;
    char *remote = NULL; /* a remote index's bytes, under f */
    const char *local = sto_local_path(idx_path);
    if (local == NULL) {
        struct sto_src *src;
        int rc = sto_open(&src, idx_path, err);
        if (rc == 0)
            rc = read_remote(src, idx_path, &f, &remote, err);
        if (rc != 0)
            return rc;
    } else if ((f = fopen(local, "r")) == NULL) {
        return sl_error_sys(err, errno, "open(%s)", local);
    }
    return load_from(f, remote, idx_path, entries, n, err);
}

int fmt_index_find(const char *idx_path, struct fmt_index_entry **entries, size_t *n, struct sl_error *err)
{
    *entries = NULL;
    *n = 0;
    const char *local = sto_local_path(idx_path);
    if (local != NULL) {
        if (access(local, R_OK) != 0)
            return 0;
        int rc = fmt_index_load(idx_path, entries, n, err);
        return rc != 0 ? rc : 1;
    }
    struct sto_src *src;
    struct sl_error ignored = {0};
    if (sto_open(&src, idx_path, &ignored) != 0)
        return 0; /* absent or unreadable: no index (fmt_file_readable's rule) */
    FILE *f = NULL;
    char *remote = NULL;
    int rc = read_remote(src, idx_path, &f, &remote, err);
    if (rc == 0)
        rc = load_from(f, remote, idx_path, entries, n, err);
    return rc != 0 ? rc : 1;
}

/* Parse the index open as f (closed here; remote: the bytes under it,
 * freed here). */
static int load_from(FILE *f, char *remote, const char *idx_path, struct fmt_index_entry **entries, size_t *n,
                     struct sl_error *err)
{
    struct fmt_index_entry *e = NULL;
    size_t len = 0, cap = 0, lineno = 0;
    char line[128];
    int rc = 0;
    uint64_t next = 0, framing = framing_bytes();
    while (fgets(line, sizeof line, f) != NULL) {
        lineno++;
        const char *p = line;
        uint64_t off, size;
        if (strchr(line, '\n') == NULL && !feof(f)) {
            rc = sl_error_set(err, SL_ECORRUPT, "%s:%zu: line too long", idx_path, lineno);
            break;
        }
        if (parse_u64(&p, &off) != 0 || *p++ != ' ' || parse_u64(&p, &size) != 0 || (*p != '\n' && *p != '\0')) {
            rc = sl_error_set(err, SL_ECORRUPT, "%s:%zu: expected '<offset> <size>'", idx_path, lineno);
            break;
        }
        if (size < framing) {
            rc = sl_error_set(err, SL_ECORRUPT, "%s:%zu: record size %" PRIu64 " is below %" PRIu64, idx_path, lineno,
                              size, framing);
            break;
        }
        if (off < next) {
            rc = sl_error_set(err, SL_ECORRUPT,
                              "%s:%zu: offset %" PRIu64 " overlaps the previous record (ends at %" PRIu64 ")", idx_path,
                              lineno, off, next);
            break;
        }
        if (len == cap) {
            size_t ncap = cap ? cap * 2 : 1024;
            struct fmt_index_entry *ne = sl_realloc(e, ncap * sizeof *ne);
            if (ne == NULL) {
                rc = sl_error_set(err, SL_ENOMEM, "%s: out of memory", idx_path);
                break;
            }
            e = ne;
            cap = ncap;
        }
        e[len].offset = off;
        e[len].size = size;
        len++;
        next = off + size;
    }
    if (rc == 0 && ferror(f))
        rc = sl_error_sys(err, errno ? errno : EIO, "read(%s)", idx_path);
    fclose(f);
    sl_free(remote);
    if (rc != 0) {
        sl_free(e);
        return rc;
    }
    *entries = e;
    *n = len;
    return 0;
}
