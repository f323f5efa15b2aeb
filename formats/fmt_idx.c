/* fmt_idx: IDX arrays through fmt_stream (so .gz files read directly), one
 * element at a time out of the stream window: no copy, no allocation per
 * element. The header's sizes are checked before they size anything. */
#include "fmt_idx.h"

#include <string.h>

#include "fmt_stream.h"
#include "sl_alloc.h"

#define MAX_ELEM_BYTES ((size_t)1 << 30)

struct fmt_idx {
    struct fmt_stream *s;
    struct fmt_idx_info info;
    uint64_t next;
};

static size_t type_size(uint8_t t)
{
    switch (t) {
    case 0x08:
    case 0x09: return 1;
    case 0x0B: return 2;
    case 0x0C:
    case 0x0D: return 4;
    case 0x0E: return 8;
    default: return 0;
    }
}

int fmt_idx_parse_header(const uint8_t *p, size_t n, struct fmt_idx_info *in, size_t *hdr, struct sl_error *err)
{
    memset(in, 0, sizeof *in);
    if (n < 4)
        return sl_error_set(err, SL_ECORRUPT, "truncated IDX header at %zu", n);
    if (p[0] != 0 || p[1] != 0 || type_size(p[2]) == 0 || p[3] == 0 || p[3] > FMT_IDX_MAX_DIMS)
        return sl_error_set(err, SL_ECORRUPT,
                            "not an IDX file at 0 (magic %02x %02x %02x %02x: expected 00 00 <type> <1-%d dims>)", p[0],
                            p[1], p[2], p[3], FMT_IDX_MAX_DIMS);
    in->type = p[2];
    in->type_size = type_size(p[2]);
    in->ndims = p[3];
    *hdr = 4 + 4 * (size_t)in->ndims;
    if (n < *hdr)
        return sl_error_set(err, SL_ECORRUPT, "truncated IDX header at %zu", n);
    in->elem_values = 1;
    for (int i = 0; i < in->ndims; i++) {
        const uint8_t *d = p + 4 + 4 * i;
        in->dims[i] = (uint32_t)d[0] << 24 | (uint32_t)d[1] << 16 | (uint32_t)d[2] << 8 | d[3];
        if (i > 0) {
            if (in->dims[i] != 0 && in->elem_values > MAX_ELEM_BYTES / in->dims[i])
                return sl_error_set(err, SL_ECORRUPT, "IDX element larger than 1 GiB at %d", 4 + 4 * i);
            in->elem_values *= in->dims[i];
        }
    }
    in->count = in->dims[0];
    in->elem_bytes = in->elem_values * in->type_size;
    if (in->elem_bytes > MAX_ELEM_BYTES)
        return sl_error_set(err, SL_ECORRUPT, "IDX element larger than 1 GiB at 4");
    return 0;
}

int fmt_idx_open(struct fmt_idx **out, const char *path, struct sl_error *err)
{
    *out = NULL;
    struct fmt_idx *x = sl_calloc(1, sizeof *x);
    if (x == NULL)
        return sl_error_set(err, SL_ENOMEM, "%s: out of memory", path);
    struct fmt_stream_opts so = {.max_window = MAX_ELEM_BYTES + 64};
    int rc = fmt_stream_open(&x->s, path, &so, err);
    if (rc != 0) {
        sl_free(x);
        return rc;
    }
    const uint8_t *p;
    size_t avail, hdr = 0;
    rc = fmt_stream_window(x->s, 4 + 4 * FMT_IDX_MAX_DIMS, &p, &avail, err);
    if (rc == 0 && (rc = fmt_idx_parse_header(p, avail, &x->info, &hdr, err)) != 0)
        sl_error_prefix(err, "%s: ", path);
    if (rc != 0) {
        fmt_stream_close(x->s);
        sl_free(x);
        return rc;
    }
    fmt_stream_consume(x->s, hdr);
    *out = x;
    return 0;
}

const struct fmt_idx_info *fmt_idx_info(const struct fmt_idx *x)
{
    return &x->info;
}

int fmt_idx_next(struct fmt_idx *x, const uint8_t **elem, struct sl_error *err)
{
    if (x->next >= x->info.count)
        return SL_END;
    const uint8_t *p;
    size_t avail;
    uint64_t at = fmt_stream_offset(x->s);
    size_t want = x->info.elem_bytes ? x->info.elem_bytes : 1;
    int rc = fmt_stream_window(x->s, want, &p, &avail, err);
    if (rc != 0)
        return rc;
    if (avail < x->info.elem_bytes)
        return sl_error_set(err, SL_ECORRUPT, "%s: truncated IDX data at %llu (element %llu of %llu)",
                            fmt_stream_path(x->s), (unsigned long long)at, (unsigned long long)x->next,
                            (unsigned long long)x->info.count);
    fmt_stream_consume(x->s, x->info.elem_bytes);
    *elem = p;
    x->next++;
    return 0;
}

int64_t fmt_idx_value_i64(const struct fmt_idx *x, const uint8_t *e, size_t i)
{
    const uint8_t *p = e + i * x->info.type_size;
    switch (x->info.type) {
    case 0x08: return p[0];
    case 0x09: return (int8_t)p[0];
    case 0x0B: return (int16_t)(uint16_t)(p[0] << 8 | p[1]);
    case 0x0C: return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
    default: return 0; /* float types have no integer value */
    }
}

void fmt_idx_close(struct fmt_idx *x)
{
    if (x == NULL)
        return;
    fmt_stream_close(x->s);
    sl_free(x);
}
