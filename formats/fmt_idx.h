/* fmt_idx: IDX arrays (the MNIST / Fashion-MNIST file format), optionally
 * gzip-compressed, read element by element (an element is one slice along
 * the first dimension: an image, or a label).
 *
 * Header: 0x00 0x00 <type> <ndims>, then ndims u32 big-endian sizes.
 * Types: 0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D float32,
 * 0x0E float64 (values big-endian).
 */
#ifndef FMT_IDX_H
#define FMT_IDX_H

#include <stddef.h>
#include <stdint.h>

#include "sl_error.h"

#define FMT_IDX_MAX_DIMS 8

struct fmt_idx_info {
    uint8_t type;     /* IDX type code */
    size_t type_size; /* bytes per value */
    int ndims;
    uint32_t dims[FMT_IDX_MAX_DIMS];
    uint64_t count;     /* dims[0] */
    size_t elem_values; /* product of dims[1..] */
    size_t elem_bytes;  /* elem_values * type_size */
};

struct fmt_idx;

/* Parse the header at p (n bytes of the file's decompressed start): 0 with
 * *out and *hdr (the header's bytes), or SL_ECORRUPT with a bare message
 * ("truncated IDX header at N", "not an IDX file at 0 (...)", "IDX element
 * larger than 1 GiB at N"); fmt_idx_open puts the path in front. */
int fmt_idx_parse_header(const uint8_t *p, size_t n, struct fmt_idx_info *out, size_t *hdr,
                         struct sl_error *err) SL_MUST_CHECK;

int fmt_idx_open(struct fmt_idx **out, const char *path, struct sl_error *err) SL_MUST_CHECK;
const struct fmt_idx_info *fmt_idx_info(const struct fmt_idx *x);
/* Next element's raw big-endian bytes, borrowed until the next call.
 * 0, SL_END after the last, or SL_ECORRUPT "<path>: truncated IDX data at N". */
int fmt_idx_next(struct fmt_idx *x, const uint8_t **elem, struct sl_error *err) SL_MUST_CHECK;
/* Value i of an element as int64 (integer types) - for labels. */
int64_t fmt_idx_value_i64(const struct fmt_idx *x, const uint8_t *elem, size_t i);
void fmt_idx_close(struct fmt_idx *x);

#endif
