/* fmt_tar_keep: a tar scan's parts as a keeper (the feeder's scan cache)
 * stores them after the record offsets: each sample's first part (count + 1
 * u64, the last one the number of parts), the parts (u32 name, u32 0, u64
 * offset, u64 length) and the field names (FMT__MAX_NAME_LEN bytes each,
 * NUL-terminated), all little-endian.
 *
 * Reading trusts nothing it reads: the counts are bounded against the
 * records before the keeper sizes anything, every first part is in order
 * and at most FMT_MAX_FIELDS after the last, every part lies inside the
 * image and names a known field, every name ends.
 */
#include <stdio.h>
#include <string.h>

#include "fmt_format.h"
#include "sl_alloc.h"
#include "sl_bytes.h"

#define PART_BYTES 24u

static void tar_extra(const struct fmt_scan *s, struct fmt_scan_extra *out)
{
    out->nparts = s->first != NULL ? s->first[s->count] : 0;
    out->nnames = (uint32_t)s->nnames;
}

static int tar_layout(const struct fmt_scan_extra *x, uint64_t count, struct fmt_scan_block *out)
{
    /* a sample has 1 to FMT_MAX_FIELDS parts */
    if (x->nnames > FMT__MAX_NAMES || x->nparts / FMT_MAX_FIELDS + (x->nparts % FMT_MAX_FIELDS != 0) > count)
        return -1;
    out[0] = (struct fmt_scan_block){count + 1, 8};
    out[1] = (struct fmt_scan_block){x->nparts, PART_BYTES};
    out[2] = (struct fmt_scan_block){x->nnames, FMT__MAX_NAME_LEN};
    return 3;
}

static int tar_alloc(struct fmt_scan *s, uint64_t count, const struct fmt_scan_extra *x)
{
    s->first = sl_malloc((size_t)(count + 1) * sizeof *s->first);
    s->parts = sl_malloc((size_t)(x->nparts ? x->nparts : 1) * sizeof *s->parts);
    s->names = sl_malloc((size_t)(x->nnames ? x->nnames : 1) * sizeof *s->names);
    return s->first == NULL || s->parts == NULL || s->names == NULL ? SL_ENOMEM : 0;
}

static void put_u64(const struct fmt_scan_sink *out, uint64_t v)
{
    uint8_t b[8];
    sl_store_le64(b, v);
    out->put(out->ctx, b, sizeof b);
}

static void tar_write(const struct fmt_scan *s, const struct fmt_scan_sink *out)
{
    struct fmt_scan_extra x;
    tar_extra(s, &x);
    for (uint64_t i = 0; i <= s->count; i++)
        put_u64(out, s->first != NULL ? s->first[i] : 0);
    for (uint64_t i = 0; i < x.nparts; i++) {
        uint8_t b[PART_BYTES];
        sl_store_le32(b, s->parts[i].name);
        sl_store_le32(b + 4, 0);
        sl_store_le64(b + 8, s->parts[i].off);
        sl_store_le64(b + 16, s->parts[i].len);
        out->put(out->ctx, b, sizeof b);
    }
    for (size_t i = 0; i < s->nnames; i++) {
        char n[FMT__MAX_NAME_LEN];
        memset(n, 0, sizeof n);
        snprintf(n, sizeof n, "%s", s->names[i]);
        out->put(out->ctx, n, sizeof n);
    }
}

static int bad(struct sl_error *err, const struct fmt_scan_source *in, const char *what, uint64_t a, uint64_t b)
{
    return sl_error_set(err, SL_ECORRUPT, "%s: %s (%llu, %llu)", in->name, what, (unsigned long long)a,
                        (unsigned long long)b);
}

static int tar_read(struct fmt_scan *s, const struct fmt_scan_extra *x, const struct fmt_scan_source *in,
                    struct sl_error *err)
{
    const uint8_t *p;
    for (uint64_t i = 0; i <= s->count; i++) {
        if ((p = in->take(in->ctx, 8, err)) == NULL)
            return err->code;
        uint64_t first = sl_load_le64(p);
        if ((i == 0 && first != 0) ||
            (i > 0 && (first < s->first[i - 1] || first - s->first[i - 1] > FMT_MAX_FIELDS)) ||
            (i == s->count && first != x->nparts))
            return bad(err, in, "sample's first part out of order", i, first);
        s->first[i] = first;
    }
    for (uint64_t i = 0; i < x->nparts; i++) {
        if ((p = in->take(in->ctx, PART_BYTES, err)) == NULL)
            return err->code;
        struct fmt__part part = {.name = sl_load_le32(p), .off = sl_load_le64(p + 8), .len = sl_load_le64(p + 16)};
        if (part.name >= x->nnames || sl_load_le32(p + 4) != 0 || part.off > s->image_bytes ||
            part.len > s->image_bytes - part.off)
            return bad(err, in, "part past the image or of no known name", i, part.off);
        s->parts[i] = part;
    }
    for (uint32_t i = 0; i < x->nnames; i++) {
        if ((p = in->take(in->ctx, FMT__MAX_NAME_LEN, err)) == NULL)
            return err->code;
        if (memchr(p, '\0', FMT__MAX_NAME_LEN) == NULL)
            return bad(err, in, "field name without its end", i, 0);
        memcpy(s->names[i], p, FMT__MAX_NAME_LEN);
    }
    s->nnames = x->nnames;
    return 0;
}

const struct fmt_scan_keep fmt__tar_keep = {
    .extra = tar_extra,
    .layout = tar_layout,
    .alloc = tar_alloc,
    .write = tar_write,
    .read = tar_read,
};
