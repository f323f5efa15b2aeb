/* fmt_features: decode serialized Examples into typed, batched columns
 * according to a declared feature spec (TensorFlow's FixedLenFeature /
 * VarLenFeature with parse_example's rules and error texts).
 *
 * A batch holds up to `capacity` rows. Fixed-length numeric columns are one
 * contiguous row-major array [rows, shape...]; variable-length columns are
 * values plus per-row lengths (ragged); bytes columns are concatenated bytes
 * plus per-value offsets. Buffers are allocated once at create and reused:
 * adding a row allocates nothing unless a bytes/varlen column must grow.
 *
 * Decoding rules (docs/semantics.md 1.4):
 *  - duplicate keys: the last wins; a Feature with no kind counts as missing
 *    (and, for fixed-length features, does not override an earlier
 *    duplicate; a variable-length feature takes the last occurrence even
 *    when it has no kind, as TensorFlow's sparse path does);
 *  - fixed-length: count must equal the shape's product, else
 *    "Key: <k>, Index: <row>.  Number of <int64|float|bytes> values != expected.
 *     Values size: <n> but output shape: [d0,d1]";
 *    missing without default: "Feature: <k> (data type: <t>) is required but
 *    could not be found."; wrong type: "Key: <k>, Index: <row>.  Data types
 *    don't match. Data type: <actual> but expected type: <expected>";
 *  - uint8 "from bytes": a bytes feature holding exactly one value of
 *    prod(shape) bytes, copied as raw uint8 (else "... Number of bytes
 *    values != expected.  Values size: <n> but output shape: []" or "...
 *    Number of uint8 values != expected.  Values size: <bytes> but output
 *    shape: [d0,d1]"); variable-length uint8 is all its values' bytes;
 *  - variable-length: missing -> an empty row; wrong type: "Key: <k>,
 *    Index: <row>.  Data types don't match. Expected type: <e>, Actual
 *    type: <a>" (TensorFlow's sparse text).
 * On error the row is not added and the batch is unchanged.
 *
 * Thread-safe: no; one owner per batch. A spec is immutable after parse.
 */
#ifndef FMT_FEATURES_H
#define FMT_FEATURES_H

#include <stddef.h>
#include <stdint.h>

#include "fmt_example.h"
#include "fmt_types.h" /* FMT_MAX_RANK, enum fmt_dtype */
#include "sl_error.h"

struct fmt_feature_spec {
    char name[128];
    enum fmt_dtype dtype; /* UINT8 means "a bytes feature decoded as raw uint8" */
    int rank;             /* fixed-length: number of dims (0 = scalar) */
    int64_t shape[FMT_MAX_RANK];
    int varlen;          /* 1: variable length (ragged); shape ignored */
    int has_default;     /* fixed-length only */
    int64_t default_i64; /* INT64 default (every value) */
    float default_f32;   /* FLOAT32 default (every value) */
    uint8_t default_u8;  /* UINT8 default (every byte) */
    /* BYTES default: every value is this string (owned by the spec array's
     * creator, borrowed here) */
    const uint8_t *default_bytes;
    size_t default_bytes_len;
};

/* Number of values per row of a fixed-length feature (product of shape). */
size_t fmt_feature_spec_count(const struct fmt_feature_spec *s);

struct fmt_column {
    const char *name;
    enum fmt_dtype dtype;
    int varlen;
    size_t rows;
    /* INT64 / FLOAT32 / UINT8: values, row-major; for fixed-length exactly
     * rows * count values. BYTES: the concatenated bytes of all values. */
    const void *values;
    size_t nvalues;                /* number of values (BYTES: number of strings) */
    size_t value_bytes;            /* bytes at `values` */
    const uint64_t *row_splits;    /* varlen: rows + 1 entries, values of row i are
                                      [row_splits[i], row_splits[i+1]); else NULL */
    const uint64_t *bytes_offsets; /* BYTES: nvalues + 1 byte offsets into values */
};

struct fmt_batch;

/* Create a batch for `capacity` rows of the given features (specs copied). */
int fmt_batch_create(struct fmt_batch **out, const struct fmt_feature_spec *specs, size_t nspecs, size_t capacity,
                     struct sl_error *err) SL_MUST_CHECK;
void fmt_batch_destroy(struct fmt_batch *b);
void fmt_batch_reset(struct fmt_batch *b);
size_t fmt_batch_rows(const struct fmt_batch *b);
size_t fmt_batch_ncolumns(const struct fmt_batch *b);

/* Decode one serialized Example into the next row. SL_EINVAL when full;
 * SL_ECORRUPT / SL_EINVAL with TensorFlow's texts on bad data (the caller
 * adds "<path>:<offset>: "). */
int fmt_batch_add(struct fmt_batch *b, const uint8_t *data, size_t len, struct sl_error *err) SL_MUST_CHECK;

/* Add a row from named raw fields (fmt_format.h; a tar sample's members
 * by extension, a text line): each column takes the field of its name, or
 * its default, else "Feature: <k> (data type: <t>) is required but could
 * not be found."; a scalar bytes column takes the field's bytes, a uint8
 * one exactly prod(shape) raw bytes, an int64 / float32 one numbers written
 * as text (decimal, separated by spaces, commas or newlines: "Key: <k>.
 * Number of <t> values != expected.  Values size: <n> but expected <m>",
 * or "field '<k>' is not a list of <t> numbers"). Fields no column names
 * are ignored. Variable-length and shaped bytes columns cannot be filled
 * this way (SL_EINVAL). On error the batch is unchanged. */
struct fmt_field;
int fmt_batch_add_fields(struct fmt_batch *b, const struct fmt_field *fields, size_t nfields,
                         struct sl_error *err) SL_MUST_CHECK;

/* Add a row from array rows (the arrays format, fmt_array.h): field i
 * (typed: its `array` says how its values are stored) fills column i, which
 * must be a fixed-shape int64 / float32 / uint8 one of exactly as many
 * values ("Key: <k>.  Number of <t> values != expected.  Values size: <n>
 * but expected <m>"), converted without loss (fmt_array_fits; else "Key:
 * <k>.  float64 values do not fit float32 without loss ..."). On error the
 * batch is unchanged. */
int fmt_batch_add_arrays(struct fmt_batch *b, const struct fmt_field *fields, size_t nfields,
                         struct sl_error *err) SL_MUST_CHECK;

/* Bytes the committed rows take in the variable-size columns (bytes,
 * variable length): what a caller copies out after the bound ones. */
size_t fmt_batch_variable_bytes(const struct fmt_batch *b);

/* Bytes per row of a fixed-length int64 / float32 / uint8 column; 0 for a
 * variable-length or bytes column. */
size_t fmt_batch_row_bytes(const struct fmt_batch *b, size_t col);

/* Decode column `col` (fixed-length numeric or uint8) straight into caller
 * memory: row r goes to dst + r * row_bytes, for the cap / row_bytes rows
 * that fit; adding a row beyond that is an error, nothing is written out of
 * bounds. Lets a feeder decode into the buffer it sends. Only on an empty
 * batch (after create or reset); stays until fmt_batch_unbind. The column
 * view then points at dst. SL_EINVAL otherwise. */
int fmt_batch_bind(struct fmt_batch *b, size_t col, void *dst, size_t cap, struct sl_error *err) SL_MUST_CHECK;
/* Every column back to its own storage. */
void fmt_batch_unbind(struct fmt_batch *b);

/* View of column i (valid until the next add/reset/destroy). */
void fmt_batch_column(const struct fmt_batch *b, size_t i, struct fmt_column *out);

#endif
