/* train_reduce: strategy.reduce over per-replica float32 values
 * (docs/semantics.md 6.1).
 *
 *  axis = TRAIN_AXIS_NONE: element-wise across replicas; every replica's
 *      shape must match exactly. SUM = sum over replicas; MEAN = that sum
 *      divided by the number of replicas.
 *  axis = 0: each replica sums its rows (dim 0), then the partial sums are
 *      added across replicas; the result has the shape dims[1..rank).
 *      MEAN divides by the total number of rows across all replicas (a 4+2
 *      split divides by 6; an empty replica, dims[0] == 0, counts 0). When
 *      every replica is empty the mean is undefined: SL_EINVAL, not NaN.
 *
 * Precision and order: float32 accumulators, as TensorFlow sums float32
 * tensors in float32. The order is fixed so results are bitwise
 * reproducible: a replica's partial sum over axis 0 adds its rows in row
 * order starting from row 0; across replicas the running total starts from
 * replica 0's value (or partial) and adds replica 1, 2, ... in index order.
 * MEAN is one final float32 division by the (exact) count.
 *
 * Thread-safe: yes (pure functions over caller-owned memory).
 */
#ifndef TRAIN_REDUCE_H
#define TRAIN_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "sl_error.h"

#define TRAIN_VALUE_MAX_RANK 8
#define TRAIN_AXIS_NONE (-1)

enum train_reduce_op { TRAIN_SUM = 1, TRAIN_MEAN = 2 };

/* A row-major float32 tensor view. `data` is borrowed; it may be NULL when
 * the value has no elements. dims[rank..8) are ignored. */
struct train_value {
    float *data;
    int rank;
    int64_t dims[TRAIN_VALUE_MAX_RANK];
};

/* Number of elements of `v` into *count after checking 0 <= rank <= 8,
 * every dim >= 0 and no size_t overflow (SL_EINVAL otherwise). */
int train_value_count(const struct train_value *v, size_t *count, struct sl_error *err) SL_MUST_CHECK;

/* Write "[d0,d1,...]" ("[]" for a scalar) into buf (always terminated). */
void train_value_format_shape(const struct train_value *v, char *buf, size_t cap);

/* Validate `per_replica` (n >= 1 values) for a reduction over `axis` and
 * set out->rank and out->dims to the result's shape (out->data untouched).
 * SL_EINVAL: n == 0, bad axis (rank-0 value with axis 0: "`axis` = 0 out of
 * range for `value` with rank 0"), ranks differ, or shapes differ (the
 * message names both shapes and both replicas). */
int train_reduce_shape(const struct train_value *per_replica, size_t n, int axis, struct train_value *out,
                       struct sl_error *err) SL_MUST_CHECK;

/* Reduce `per_replica` (n values, borrowed) into `out`: the caller sets
 * out->data to a buffer of at least as many floats as the shape from
 * train_reduce_shape() has elements; out->rank/dims are (re)set here.
 * `out->data` must not alias any input. Returns 0 or SL_EINVAL (see
 * train_reduce_shape, plus a MEAN over axis 0 when every replica is empty,
 * and a bad op). On error out->data is untouched. */
int train_reduce(enum train_reduce_op op, const struct train_value *per_replica, size_t n, int axis,
                 struct train_value *out, struct sl_error *err) SL_MUST_CHECK;

#endif
