/* fmt_format: the registry of format tables and what a scan holds. The
 * record formats scan through the read loop (fmt__reader_scan: each
 * record's offset, 8 bytes a record); tar shards scan their own way
 * (fmt_tar.c), noting where each member's data lies.
 */
#include "fmt_format.h"

#include <string.h>

#include "sl_alloc.h"

static const struct fmt_format_ops *const formats[] = {
    [FMT_FORMAT_TFRECORD] = &fmt__tfrecord_format,
    [FMT_FORMAT_TEXT] = &fmt__text_format,
    [FMT_FORMAT_TAR] = &fmt__tar_format,
    [FMT_FORMAT_ARRAYS] = &fmt__arrays_format,
};
enum { NFORMATS = sizeof formats / sizeof formats[0] };

const struct fmt_format_ops *fmt_format_get(enum fmt_format f)
{
    return (unsigned)f < NFORMATS ? formats[f] : NULL;
}

int fmt_format_parse(const char *s, enum fmt_format *out)
{
    for (unsigned i = 0; i < NFORMATS; i++)
        if (strcmp(s, formats[i]->name) == 0) {
            *out = (enum fmt_format)i;
            return 0;
        }
    return SL_EINVAL;
}

const char *fmt_format_name(enum fmt_format f)
{
    const struct fmt_format_ops *ops = fmt_format_get(f);
    return ops ? ops->name : "?";
}

void fmt_frame_free(struct fmt_frame *f)
{
    if (f == NULL)
        return;
    sl_free(f->scratch);
    f->scratch = NULL;
    f->scratch_cap = 0;
}

/* ---- scans ---------------------------------------------------------- */

struct fmt_scan *fmt__scan_new(const struct fmt_scan_opts *opts)
{
    struct fmt_scan *s = sl_calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    if ((s->offsets = sl_malloc(sizeof *s->offsets)) == NULL) {
        sl_free(s);
        return NULL;
    }
    s->max_record_bytes = opts && opts->max_record_bytes ? opts->max_record_bytes : FMT_DEFAULT_MAX_RECORD_BYTES;
    s->compression = FMT_COMP_NONE;
    return s;
}

int fmt__scan_push(struct fmt_scan *s, uint64_t off, size_t *cap)
{
    if (s->count == *cap) {
        size_t ncap = *cap ? *cap * 2 : 1024;
        uint64_t *no = sl_realloc(s->offsets, ncap * sizeof *no);
        if (no == NULL)
            return SL_ENOMEM;
        s->offsets = no;
        *cap = ncap;
    }
    s->offsets[s->count++] = off;
    return 0;
}

void fmt_scan_free(struct fmt_scan *s)
{
    if (s == NULL)
        return;
    sl_free(s->offsets);
    sl_free(s->first);
    sl_free(s->parts);
    sl_free(s->names);
    sl_free(s->arrays);
    sl_free(s);
}

uint64_t fmt_scan_count(const struct fmt_scan *s)
{
    return s->count;
}

uint64_t fmt_scan_offset(const struct fmt_scan *s, uint64_t rec)
{
    if (rec >= s->count)
        return 0;
    if (s->arrays != NULL) /* rows are not listed: the first array's row, in the image */
        return s->arrays[0].image_off + s->arrays[0].info.data_offset + rec * s->arrays[0].info.row_bytes;
    return s->offsets[rec];
}

uint64_t fmt_scan_extent(const struct fmt_scan *s, uint64_t rec)
{
    if (rec >= s->count || s->arrays != NULL)
        return 0;
    uint64_t end = rec + 1 < s->count ? s->offsets[rec + 1] : s->image_bytes;
    return end > s->offsets[rec] ? end - s->offsets[rec] : 0;
}

size_t fmt_scan_parts(const struct fmt_scan *s)
{
    return s->arrays != NULL ? s->narrays : 1;
}

uint64_t fmt_scan_part_bytes(const struct fmt_scan *s, size_t k)
{
    if (s->arrays != NULL)
        return k < s->narrays ? s->arrays[k].image_bytes : 0;
    return k == 0 ? s->image_bytes : 0;
}

enum fmt_compression fmt_scan_part_compression(const struct fmt_scan *s, size_t k)
{
    if (s->arrays != NULL && k < s->narrays)
        return (enum fmt_compression)s->arrays[k].compression;
    return s->compression;
}

uint64_t fmt_scan_image_bytes(const struct fmt_scan *s)
{
    return s->image_bytes;
}

enum fmt_compression fmt_scan_compression(const struct fmt_scan *s)
{
    return s->compression;
}

uint64_t fmt_scan_dropped_tail(const struct fmt_scan *s)
{
    return s->dropped_tail;
}
