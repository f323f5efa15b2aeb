/* train_reduce: strategy.reduce, element by element.
 *
 * Both reductions walk the output one element at a time and, for that
 * element, visit replicas in index order and (for axis 0) rows in order.
 * This needs no scratch memory and fixes the summation order completely,
 * so a result is bitwise reproducible whatever the caller's threading. The
 * strided access over rows is slower than a row-wise sweep, which is fine
 * for the sizes a reduce of metrics and losses sees.
 */
#include "train_reduce.h"

#include <stdio.h>
#include <string.h>

int train_value_count(const struct train_value *v, size_t *count, struct sl_error *err)
{
    *count = 0;
    if (v->rank < 0 || v->rank > TRAIN_VALUE_MAX_RANK)
        return sl_error_set(err, SL_EINVAL, "value rank %d is outside 0..%d", v->rank, TRAIN_VALUE_MAX_RANK);
    size_t total = 1;
    for (int d = 0; d < v->rank; d++) {
        int64_t dim = v->dims[d];
        if (dim < 0)
            return sl_error_set(err, SL_EINVAL, "value dimension %d is negative (%lld)", d, (long long)dim);
        if (dim != 0 && total > SIZE_MAX / sizeof(float) / (uint64_t)dim)
            return sl_error_set(err, SL_EINVAL, "value has too many elements (dimension %d = %lld overflows)", d,
                                (long long)dim);
        total *= (size_t)dim;
    }
    *count = total;
    return 0;
}

void train_value_format_shape(const struct train_value *v, char *buf, size_t cap)
{
    if (cap == 0)
        return;
    int rank = v->rank < 0 ? 0 : v->rank > TRAIN_VALUE_MAX_RANK ? TRAIN_VALUE_MAX_RANK : v->rank;
    size_t used = 0;
    for (int d = 0; d <= rank && used < cap; d++) {
        int k = d < rank ? snprintf(buf + used, cap - used, "%s%lld", d == 0 ? "[" : ",", (long long)v->dims[d])
                         : snprintf(buf + used, cap - used, "%s]", d == 0 ? "[" : "");
        if (k < 0)
            return;
        used += (size_t)k;
    }
}

/* The shape check names both replicas and both shapes. */
static int shape_mismatch(const struct train_value *a, size_t ia, const struct train_value *b, size_t ib,
                          const char *what, struct sl_error *err)
{
    char sa[128], sb[128];
    train_value_format_shape(a, sa, sizeof sa);
    train_value_format_shape(b, sb, sizeof sb);
    return sl_error_set(err, SL_EINVAL, "reduce: replica %zu has shape %s but replica %zu has shape %s (%s)", ib, sb,
                        ia, sa, what);
}

int train_reduce_shape(const struct train_value *per_replica, size_t n, int axis, struct train_value *out,
                       struct sl_error *err)
{
    if (n == 0)
        return sl_error_set(err, SL_EINVAL, "reduce: no replica values");
    if (axis != TRAIN_AXIS_NONE && axis != 0)
        return sl_error_set(err, SL_EINVAL, "reduce: axis %d is not supported (only None or 0)", axis);
    const struct train_value *first = &per_replica[0];
    for (size_t r = 0; r < n; r++) {
        size_t count;
        int rc = train_value_count(&per_replica[r], &count, err);
        if (rc != 0)
            return sl_error_prefix(err, "reduce: replica %zu: ", r);
    }
    if (axis == 0 && first->rank == 0)
        return sl_error_set(err, SL_EINVAL, "`axis` = 0 out of range for `value` with rank 0");
    for (size_t r = 1; r < n; r++) {
        const struct train_value *v = &per_replica[r];
        if (v->rank != first->rank)
            return shape_mismatch(first, 0, v, r, "ranks differ", err);
        for (int d = axis == 0 ? 1 : 0; d < v->rank; d++)
            if (v->dims[d] != first->dims[d])
                return shape_mismatch(
                    first, 0, v, r,
                    axis == 0 ? "dimensions after the batch axis must match" : "axis=None needs identical shapes", err);
    }
    memset(out->dims, 0, sizeof out->dims);
    if (axis == TRAIN_AXIS_NONE) {
        out->rank = first->rank;
        memcpy(out->dims, first->dims, (size_t)first->rank * sizeof out->dims[0]);
    } else {
        out->rank = first->rank - 1;
        memcpy(out->dims, first->dims + 1, (size_t)out->rank * sizeof out->dims[0]);
    }
    return 0;
}

static void reduce_none(const struct train_value *per_replica, size_t n, size_t count, float *out)
{
    for (size_t j = 0; j < count; j++) {
        float total = per_replica[0].data[j];
        for (size_t r = 1; r < n; r++)
            total += per_replica[r].data[j];
        out[j] = total;
    }
}

/* A replica's sum over its rows for inner element j; an empty replica
 * contributes the sum of nothing, +0.0f. */
static float replica_rows_sum(const struct train_value *v, size_t inner, size_t j)
{
    size_t rows = (size_t)v->dims[0];
    if (rows == 0)
        return 0.0f;
    float partial = v->data[j];
    for (size_t row = 1; row < rows; row++)
        partial += v->data[row * inner + j];
    return partial;
}

static void reduce_axis0(const struct train_value *per_replica, size_t n, size_t inner, float *out)
{
    for (size_t j = 0; j < inner; j++) {
        float total = replica_rows_sum(&per_replica[0], inner, j);
        for (size_t r = 1; r < n; r++)
            total += replica_rows_sum(&per_replica[r], inner, j);
        out[j] = total;
    }
}

int train_reduce(enum train_reduce_op op, const struct train_value *per_replica, size_t n, int axis,
                 struct train_value *out, struct sl_error *err)
{
    if (op != TRAIN_SUM && op != TRAIN_MEAN)
        return sl_error_set(err, SL_EINVAL, "reduce: unknown reduce op %d (expected SUM or MEAN)", (int)op);
    struct train_value shape;
    int rc = train_reduce_shape(per_replica, n, axis, &shape, err);
    if (rc != 0)
        return rc;
    size_t count;
    rc = train_value_count(&shape, &count, err);
    if (rc != 0)
        return rc;

    if (axis == TRAIN_AXIS_NONE) {
        if (count > 0)
            reduce_none(per_replica, n, count, out->data);
        if (op == TRAIN_MEAN)
            for (size_t j = 0; j < count; j++)
                out->data[j] /= (float)n;
    } else {
        uint64_t rows = 0;
        for (size_t r = 0; r < n; r++)
            rows += (uint64_t)per_replica[r].dims[0];
        if (op == TRAIN_MEAN && rows == 0)
            return sl_error_set(err, SL_EINVAL,
                                "reduce MEAN over axis 0: all %zu replicas are empty (0 rows in total), so the "
                                "mean has no denominator",
                                n);
        if (count > 0)
            reduce_axis0(per_replica, n, count, out->data);
        if (op == TRAIN_MEAN)
            for (size_t j = 0; j < count; j++)
                out->data[j] /= (float)rows;
    }
    out->rank = shape.rank;
    memcpy(out->dims, shape.dims, sizeof out->dims);
    return 0;
}
