/* fmt_array: whole arrays as a feeder source (tf.distribute's
 * experimental_make_numpy_dataset): NumPy .npy files and IDX files (MNIST,
 * Fashion-MNIST), plain or compressed, whose first dimension is the element
 * index. A row of an array is one element's value of one feature.
 *
 * The "arrays" format (fmt_format.h) reads a group of arrays, one per
 * feature in the features' order, all with as many rows: the group is what
 * a file is to the other formats (the plan counts its rows, FILE sharding
 * deals groups out), and row r of the group is the element whose features
 * are row r of each array. Its image is the members' decompressed bytes one
 * after the other; its frame lends each member's row as a typed field
 * (fmt_field.array), which fmt_batch_add_arrays converts into the columns.
 *
 * Header parsing never allocates and trusts no size it reads: every
 * product is checked for overflow and bounded, and a header that declares
 * more data than its file holds (or less) is refused by the scan with the
 * file's name and the offset, before anything is sized from it.
 *
 * Thread-safe: the functions keep no state.
 */
#ifndef FMT_ARRAY_H
#define FMT_ARRAY_H

#include <stddef.h>
#include <stdint.h>

#include "fmt_features.h" /* the arrays format fills features (fmt_batch_add_arrays) */
#include "fmt_types.h"
#include "sl_error.h"

/* The most header bytes an .npy file may declare (NumPy's own reader
 * stops at 10000 by default; sluice allows more, and no more). */
#define FMT_NPY_MAX_HEADER 65536
/* The most bytes an array's data may declare (2^62): products stay exact. */
#define FMT_ARRAY_MAX_BYTES ((uint64_t)1 << 62)

/* "(60000, 28, 28)", as NumPy prints a shape, into buf. */
const char *fmt_array_shape(const struct fmt_array_info *a, char *buf, size_t cap);

/* Parse an .npy header from the first `n` bytes of the file (`n` may run
 * past the header: the data that follows is not looked at). 0 and *out;
 * or SL_ECORRUPT with a bare message ending " at OFFSET" (the caller puts
 * the path in front):
 *   not an npy file at 0 (magic 89 50 4e 47 0d 0a: expected 93 4e 55 4d 50 59)
 *   npy version 4.0 is not supported (1.0, 2.0 or 3.0) at 6
 *   npy header of 70000 bytes is over the limit of 65536 at 8
 *   truncated npy header at 40 (the header ends at 128)
 *   npy header: expected ':' at 18
 *   npy header: unknown key 'foo' at 11
 *   npy header: key 'shape' given twice at 60
 *   npy header: no key 'descr' at 70
 *   npy header: dtype '<c8' is not supported (bool, int8-64, uint8-64, float32, float64) at 19
 *   npy header: a 0-d array has no rows (shape ()) at 61
 *   npy header: more than 9 dimensions at 80
 *   npy header: dimension over 2^62 at 62
 *   npy header: shape (4611686018427387904, 2) of int8 holds more than 2^62 bytes at 61
 *   npy header: fortran_order True for shape (3, 4): only C-order rows can be served (np.ascontiguousarray) at 45
 *   npy header: the dictionary does not end the header at 120 */
int fmt_npy_parse_header(const uint8_t *p, size_t n, struct fmt_array_info *out, struct sl_error *err) SL_MUST_CHECK;

/* The header of an IDX file (fmt_idx.h) as an array: 0 and *out, or
 * SL_ECORRUPT with fmt_idx's messages (bare: "not an IDX file at 0 ..."). */
int fmt_idx_parse_array(const uint8_t *p, size_t n, struct fmt_array_info *out, struct sl_error *err) SL_MUST_CHECK;

#endif
