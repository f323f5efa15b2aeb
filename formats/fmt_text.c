/* fmt_text: TextLineDataset framing for the shared record loop.
 *
 * A line is found with memchr in the stream's window; while no newline is in
 * sight the requested window grows geometrically, up to max_record_bytes + 1
 * bytes (a longest line and its '\n'), past which the line is an error. The
 * line limit counts the line's bytes as stored, '\r' included. TensorFlow
 * deletes every '\r' of a line (not only the one before '\n'): a line with
 * none is lent straight out of the window, one with some is copied without
 * them into the reader's scratch buffer, which is reused, so no line costs an
 * allocation once the buffer has grown. At the end of the file a last line
 * without '\n' is a record unless nothing is left of it once '\r' is gone.
 *
 * Random access (the format's fmt_format_ops table): the scan is the read
 * loop's; a line is framed from its offset to the next '\n' of the image,
 * and decodes as the value of the one scalar bytes column.
 */
#include "fmt_reader.h"

#include <string.h>

#include "fmt_features.h"
#include "fmt_format.h"
#include "fmt_job.h"

#include "sl_alloc.h"

/* Hand out p[0..len) as the record, without its '\r' bytes. */
static int line_record(struct fmt__reader_state *st, const uint8_t *p, size_t len, struct fmt_record *rec,
                       struct sl_error *err)
{
    const uint8_t *cr = len ? memchr(p, '\r', len) : NULL;
    if (cr == NULL) {
        rec->data = p;
        rec->len = len;
        return 0;
    }
    if (st->scratch_cap < len) {
        size_t cap = st->scratch_cap ? st->scratch_cap : 256;
        while (cap < len)
            cap = cap > SIZE_MAX / 2 ? len : cap * 2;
        uint8_t *q = sl_realloc(st->scratch, cap);
        if (q == NULL)
            return sl_error_set(err, SL_ENOMEM, "out of memory for a line of %zu bytes at %llu", len,
                                (unsigned long long)rec->offset);
        st->scratch = q;
        st->scratch_cap = cap;
    }
    size_t head = (size_t)(cr - p);
    memcpy(st->scratch, p, head);
    size_t n = head;
    for (size_t i = head + 1; i < len; i++)
        if (p[i] != '\r')
            st->scratch[n++] = p[i];
    rec->data = st->scratch;
    rec->len = n;
    return 0;
}

static int text_next(struct fmt_reader *r, struct fmt_stream *s, struct fmt_record *rec, struct sl_error *err)
{
    struct fmt__reader_state *st = fmt__reader_state(r);
    size_t limit = st->max_record_bytes < SIZE_MAX ? st->max_record_bytes + 1 : SIZE_MAX;
    uint64_t start = fmt_stream_offset(s);
    size_t need = 1;
    size_t scanned = 0; /* the window starts at the line; these bytes hold no '\n' */
    for (;;) {
        const uint8_t *p;
        size_t avail;
        int rc = fmt_stream_window(s, need, &p, &avail, err);
        if (rc != 0)
            return rc;
        size_t scan = avail < limit ? avail : limit;
        const uint8_t *nl = scan > scanned ? memchr(p + scanned, '\n', scan - scanned) : NULL;
        scanned = scan;
        if (nl != NULL || avail < need) {
            /* a newline within the limit, or the end of the file before it */
            size_t len = nl != NULL ? (size_t)(nl - p) : avail;
            rec->offset = start;
            rc = line_record(st, p, len, rec, err);
            if (rc != 0)
                return rc;
            fmt_stream_consume(s, nl != NULL ? len + 1 : len);
            /* at the end of the file an empty last line is no line */
            if (nl == NULL && rec->len == 0)
                return SL_END;
            rec->index = st->index++;
            return 0;
        }
        if (avail >= limit)
            break;
        /* no newline in sight: ask for a window twice as big */
        need = avail < limit / 2 ? 2 * avail : limit;
        if (need <= avail)
            need = avail + 1;
    }
    return sl_error_set(err, SL_ECORRUPT, "line longer than max_record_bytes (%zu) at %llu", st->max_record_bytes,
                        (unsigned long long)start);
}

/* ---- random access (fmt_format.h) ---- */

static int text_scan(struct fmt_scan **out, const char *path, const struct fmt_scan_opts *opts, struct sl_error *err)
{
    return fmt__reader_scan(out, path, FMT_FORMAT_TEXT, opts, err);
}

/* The line at its scanned offset runs to the next '\n' (or the end of the
 * image); '\r's are removed into the frame's scratch. */
static int text_frame(const struct fmt_scan *s, const uint8_t *img, size_t size, uint64_t rec, int verify,
                      struct fmt_frame *out, struct sl_error *err)
{
    (void)verify;
    if (rec >= s->count)
        return sl_error_set(err, SL_EINVAL, "line %llu does not exist", (unsigned long long)rec);
    uint64_t off = s->offsets[rec];
    if (off > size)
        return sl_error_set(err, SL_ECORRUPT, "line %llu at %llu is past the end of the file (%zu bytes)",
                            (unsigned long long)rec, (unsigned long long)off, size);
    const uint8_t *start = img + off;
    const uint8_t *nl = memchr(start, '\n', size - off);
    size_t raw = nl ? (size_t)(nl - start) : size - off;
    out->fields = NULL;
    out->nfields = 0;
    if (raw == 0 || memchr(start, '\r', raw) == NULL) {
        out->data = start;
        out->len = raw;
        return 0;
    }
    if (out->scratch_cap < raw) {
        uint8_t *q = sl_realloc(out->scratch, raw);
        if (q == NULL)
            return sl_error_set(err, SL_ENOMEM, "out of memory for a line of %zu bytes at %llu", raw,
                                (unsigned long long)off);
        out->scratch = q;
        out->scratch_cap = raw;
    }
    size_t n = 0;
    for (size_t i = 0; i < raw; i++)
        if (start[i] != '\r')
            out->scratch[n++] = start[i];
    out->data = out->scratch;
    out->len = n;
    return 0;
}

/* The line is the value of the one (scalar bytes) column. */
static int text_decode(struct fmt_batch *b, const struct fmt_frame *f, struct sl_error *err)
{
    struct fmt_column c;
    fmt_batch_column(b, 0, &c);
    struct fmt_field line = {c.name, f->data, f->len, NULL};
    return fmt_batch_add_fields(b, &line, 1, err);
}

static int text_specs(const struct fmt_feature_spec *specs, size_t nspecs, struct sl_error *err)
{
    if (nspecs != 1 || specs[0].varlen || specs[0].dtype != FMT_DTYPE_BYTES || specs[0].rank != 0)
        return sl_error_set(err, SL_EINVAL, "text lines need exactly one scalar bytes feature");
    return 0;
}

/* A line is one scalar bytes value; a job that declares none gets one
 * named "line" (the feeder's default). */
static int text_job_features(const struct fmt_job_input *in, struct sl_error *err)
{
    const struct fmt_feature_spec *f = in->features;
    if (in->nfeatures > 1 || (in->nfeatures == 1 && (f[0].dtype != FMT_DTYPE_BYTES || f[0].rank != 0 || f[0].varlen)))
        return sl_error_set(err, SL_EINVAL,
                            "'features': format \"text\" takes one scalar bytes feature (each line), or none "
                            "(it is then named \"line\")");
    return 0;
}

const struct fmt_format_ops fmt__text_format = {
    .name = "text",
    .element = "line",
    .plain_probe = NULL,
    .next = text_next,
    .frame_head = 0,
    .frame_tail = 1, /* the '\n' */
    .check_specs = text_specs,
    .job_features = text_job_features,
    .scan = text_scan,
    .frame = text_frame,
    .decode = text_decode,
};
