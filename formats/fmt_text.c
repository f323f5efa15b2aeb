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
 */
#include "fmt_reader.h"

#include <string.h>

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

const struct fmt__format_ops fmt__text_ops = {
    .name = "text",
    .plain_probe = NULL,
    .next = text_next,
};
