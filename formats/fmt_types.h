/* fmt_types: the value vocabulary the formats share, below all of them:
 * the dtypes a feature declares (fmt_features.h), the element types an
 * array file stores (fmt_array.h), and the rules that carry stored values
 * into a dtype without loss. Whoever decodes values (the Example decoder,
 * the arrays format) and whoever reads headers includes this, and neither
 * needs the other for it.
 *
 * Thread-safe: the functions keep no state.
 */
#ifndef FMT_TYPES_H
#define FMT_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "sl_error.h"

/* ---- the dtypes of features ---- */

#define FMT_MAX_RANK 8

/* FLOAT16 and BFLOAT16 only leave a job's map (transform/map.h, whose
 * numbers these follow): no format decodes them and no job declares them
 * (fmt_dtype_parse does not take their names). */
enum fmt_dtype {
    FMT_DTYPE_INT64 = 0,
    FMT_DTYPE_FLOAT32,
    FMT_DTYPE_BYTES,
    FMT_DTYPE_UINT8,
    FMT_DTYPE_FLOAT16,
    FMT_DTYPE_BFLOAT16
};
const char *fmt_dtype_name(enum fmt_dtype t); /* "int64", "float32", "bytes", "uint8", "float16", "bfloat16" */
int fmt_dtype_parse(const char *s, enum fmt_dtype *out) SL_MUST_CHECK;
size_t fmt_dtype_size(enum fmt_dtype t); /* 8, 4, 0 (variable), 1, 2, 2 */
/* The names a job declares dtypes by (fmt_dtype_parse also takes
 * TensorFlow's "float" and "string"), for messages. */
#define FMT_DTYPE_NAMES "int64, float32, bytes or uint8"

/* ---- what array files store ---- */

/* Dimensions of an array: the row index plus up to FMT_MAX_RANK per row. */
#define FMT_ARRAY_MAX_DIMS (FMT_MAX_RANK + 1)

enum fmt_array_kind { FMT_ARRAY_BOOL = 0, FMT_ARRAY_UINT, FMT_ARRAY_INT, FMT_ARRAY_FLOAT };

/* What a header says about its array. */
struct fmt_array_info {
    enum fmt_array_kind kind;
    uint32_t size;  /* bytes per value: 1, 2, 4 or 8 */
    int big_endian; /* values stored big-endian (IDX; npy '>') */
    int ndims;      /* 1 to FMT_ARRAY_MAX_DIMS */
    uint64_t dims[FMT_ARRAY_MAX_DIMS];
    uint64_t rows;        /* dims[0] */
    uint64_t row_values;  /* product of dims[1..] (1 for a 1-d array) */
    uint64_t row_bytes;   /* row_values * size */
    uint64_t data_offset; /* header bytes: where the data starts */
    uint64_t data_bytes;  /* rows * row_bytes */
};

/* "uint8", "int16", "float32", "bool"... (NumPy's names). */
const char *fmt_array_type_name(const struct fmt_array_info *a);

/* Can an array of this type fill a feature of dtype t without loss? 0, or
 * SL_EINVAL with why (bare: "float64 values do not fit float32 without
 * loss"). The rules follow the Example decoder, which takes a feature's
 * values only from the list of its own kind: int64 takes any integer or
 * bool array whose values all fit (not uint64), float32 takes float32
 * only, uint8 takes uint8 or bool; bytes features take no arrays. */
int fmt_array_fits(const struct fmt_array_info *a, enum fmt_dtype t, struct sl_error *err) SL_MUST_CHECK;

/* Convert `n` values at src (stored as `a` says) into dst, of dtype t (one
 * that fmt_array_fits allows). */
void fmt_array_convert(const struct fmt_array_info *a, const uint8_t *src, size_t n, enum fmt_dtype t, void *dst);

#endif
