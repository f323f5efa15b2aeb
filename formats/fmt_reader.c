/* fmt_reader: the shared record loop. It opens the stream with the window
 * limit the record size limit implies, asks the format's framing for each
 * record, and turns the framing's bare "<what> at N" into
 * "<path>: <what> at N". After an error the reader refuses further reads:
 * TensorFlow moves to the next file after a data error, and so must callers.
 */
#include "fmt_reader.h"

#include <string.h>

#include "fmt_format.h"
#include "sl_alloc.h"
#include "sto.h"

struct fmt_reader {
    struct fmt__reader_state st;
    const struct fmt_format_ops *ops;
    int failed;
};

struct fmt__reader_state *fmt__reader_state(struct fmt_reader *r)
{
    return &r->st;
}

static int reader_new(struct fmt_reader **out, const char *name, const struct fmt_reader_opts *opts,
                      struct fmt_stream_opts *so, struct sl_error *err)
{
    static const struct fmt_reader_opts defaults;
    const struct fmt_reader_opts *o = opts ? opts : &defaults;
    const struct fmt_format_ops *ops = fmt_format_get(o->format);
    if (ops == NULL || ops->next == NULL)
        return sl_error_set(err, SL_EINVAL, "%s: format '%s' is not a record format", name, fmt_format_name(o->format));
    struct fmt_reader *r = sl_calloc(1, sizeof *r);
    if (r == NULL)
        return sl_error_set(err, SL_ENOMEM, "%s: out of memory", name);
    r->ops = ops;
    r->st.max_record_bytes = o->max_record_bytes ? o->max_record_bytes : FMT_DEFAULT_MAX_RECORD_BYTES;
    r->st.skip_crc = o->skip_crc;
    memset(so, 0, sizeof *so);
    so->compression = o->compression;
    so->buffer_size = o->buffer_size;
    /* a whole record plus its framing must fit, as the format frames it */
    so->max_window = r->st.max_record_bytes + ops->frame_head + ops->frame_tail;
    so->plain_probe = ops->plain_probe;
    so->use_zlib = o->use_zlib;
    so->io = o->io;
    so->max_output = o->max_output;
    *out = r;
    return 0;
}

int fmt_reader_open(struct fmt_reader **out, const char *path, const struct fmt_reader_opts *opts, struct sl_error *err)
{
    struct fmt_stream_opts so;
    *out = NULL;
    struct fmt_reader *r = NULL;
    int rc = reader_new(&r, path, opts, &so, err);
    if (rc != 0)
        return rc;
    rc = fmt_stream_open(&r->st.stream, path, &so, err);
    if (rc != 0) {
        fmt_reader_close(r);
        return rc;
    }
    r->st.lend_ahead = fmt_stream_io(r->st.stream) == FMT_IO_READ;
    *out = r;
    return 0;
}

int fmt_reader_open_source(struct fmt_reader **out, struct sto_src *src, const struct fmt_reader_opts *opts,
                           struct sl_error *err)
{
    struct fmt_stream_opts so;
    *out = NULL;
    struct fmt_reader *r = NULL;
    int rc = reader_new(&r, src->name, opts, &so, err);
    if (rc != 0) {
        sto_close(src);
        return rc;
    }
    rc = fmt_stream_open_source(&r->st.stream, src, &so, err);
    if (rc != 0) {
        fmt_reader_close(r);
        return rc;
    }
    r->st.lend_ahead = fmt_stream_io(r->st.stream) == FMT_IO_READ;
    *out = r;
    return 0;
}

int fmt_reader_open_mem(struct fmt_reader **out, const char *name, const void *data, size_t len,
                        const struct fmt_reader_opts *opts, struct sl_error *err)
{
    struct fmt_stream_opts so;
    *out = NULL;
    struct fmt_reader *r = NULL;
    int rc = reader_new(&r, name, opts, &so, err);
    if (rc != 0)
        return rc;
    rc = fmt_stream_open_mem(&r->st.stream, name, data, len, &so, err);
    if (rc != 0) {
        fmt_reader_close(r);
        return rc;
    }
    *out = r;
    return 0;
}

void fmt_reader_close(struct fmt_reader *r)
{
    if (r == NULL)
        return;
    fmt_stream_close(r->st.stream);
    sl_free(r->st.scratch);
    sl_free(r);
}

int fmt_reader_next(struct fmt_reader *r, struct fmt_record *rec, struct sl_error *err)
{
    if (r->failed)
        return sl_error_set(err, SL_EINVAL, "%s: read after an error", fmt_stream_path(r->st.stream));
    int rc = r->ops->next(r, r->st.stream, rec, err);
    if (rc < 0) {
        r->failed = 1;
        /* stream errors already carry the path; framing errors do not */
        const char *path = fmt_stream_path(r->st.stream);
        if (err != NULL && strncmp(err->msg, path, strlen(path)) != 0)
            sl_error_prefix(err, "%s: ", path);
    }
    return rc;
}

int fmt_reader_seek(struct fmt_reader *r, uint64_t off, uint64_t index, struct sl_error *err)
{
    int rc = fmt_stream_seek(r->st.stream, off, err);
    if (rc != 0)
        return rc;
    r->st.index = index;
    r->st.ahead_len = 0;
    r->failed = 0;
    return 0;
}

uint64_t fmt_reader_dropped_tail(const struct fmt_reader *r)
{
    return r->st.dropped_tail;
}

const char *fmt_reader_path(const struct fmt_reader *r)
{
    return fmt_stream_path(r->st.stream);
}

struct fmt_stream *fmt_reader_stream(struct fmt_reader *r)
{
    return r->st.stream;
}

/* The read loop run over a file once, keeping each record's offset. */
int fmt__reader_scan(struct fmt_scan **out, const char *path, enum fmt_format format, const struct fmt_scan_opts *opts,
                     struct sl_error *err)
{
    *out = NULL;
    struct fmt_reader_opts ro = {.format = format,
                                 .compression = opts->compression,
                                 .max_record_bytes = opts->max_record_bytes,
                                 .skip_crc = opts->skip_crc,
                                 .max_output = opts->max_output};
    struct fmt_scan *s = fmt__scan_new(opts);
    if (s == NULL) {
        sto_close(opts->source);
        return sl_error_set(err, SL_ENOMEM, "%s: out of memory", path);
    }
    struct fmt_reader *r;
    int rc =
        opts->source != NULL ? fmt_reader_open_source(&r, opts->source, &ro, err) : fmt_reader_open(&r, path, &ro, err);
    if (rc != 0) {
        fmt_scan_free(s);
        return rc;
    }
    s->compression = fmt_stream_compression(fmt_reader_stream(r));
    size_t cap = 0;
    struct fmt_record rec;
    while ((rc = fmt_reader_next(r, &rec, err)) == 0) {
        if ((s->count & 0xffff) == 0xffff && opts->stop != NULL && *opts->stop) {
            rc = sl_error_set(err, SL_ECLOSED, "%s: scan interrupted", path);
            break;
        }
        if (fmt__scan_push(s, rec.offset, &cap) != 0) {
            rc = sl_error_set(err, SL_ENOMEM, "%s: out of memory for %llu record offsets", path,
                              (unsigned long long)s->count + 1);
            break;
        }
    }
    if (rc == SL_END) {
        rc = 0;
        s->image_bytes = fmt_stream_offset(fmt_reader_stream(r));
        s->dropped_tail = fmt_reader_dropped_tail(r);
    }
    fmt_reader_close(r);
    if (rc != 0) {
        fmt_scan_free(s);
        return rc;
    }
    *out = s;
    return 0;
}
