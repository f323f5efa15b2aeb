/* train_tower: tower-mode helpers. The error texts are replicate_model_fn's
 * ValueError messages, with the numbers filled in, so logs match what a
 * TensorFlow user would search for. */
#include "train_tower.h"

#include <string.h>

int train_tower_split(int64_t batch_rows, int towers, int64_t *rows_per_tower, struct sl_error *err)
{
    *rows_per_tower = 0;
    if (towers < 1)
        return sl_error_set(err, SL_EINVAL, "tower split: needs >= 1 tower (got %d)", towers);
    if (batch_rows < 0)
        return sl_error_set(err, SL_EINVAL, "tower split: negative batch size %lld", (long long)batch_rows);
    if (batch_rows % towers != 0)
        return sl_error_set(err, SL_EINVAL, "Batch size %lld needs to be divisible by the number of GPUs, which is %d.",
                            (long long)batch_rows, towers);
    *rows_per_tower = batch_rows / towers;
    return 0;
}

int train_tower_loss_scale(enum train_loss_reduction reduction, int towers, float *scale, struct sl_error *err)
{
    *scale = 1.0f;
    if (towers < 1)
        return sl_error_set(err, SL_EINVAL, "tower loss scale: needs >= 1 tower (got %d)", towers);
    if (reduction == TRAIN_LOSS_NONE)
        return sl_error_set(err, SL_EINVAL,
                            "Tower losses need to be reduced in some way, yet none reduction is specified.");
    if (reduction < TRAIN_LOSS_NONE || reduction > TRAIN_LOSS_SUM_BY_NONZERO_WEIGHTS)
        return sl_error_set(err, SL_EINVAL, "tower loss scale: unknown loss reduction %d", (int)reduction);
    if (towers > 1 && reduction != TRAIN_LOSS_SUM)
        *scale = 1.0f / (float)towers;
    return 0;
}

int train_tower_concat(const struct train_value *per_tower, size_t n, struct train_value *out, struct sl_error *err)
{
    if (n == 0)
        return sl_error_set(err, SL_EINVAL, "tower concat: no tower values");
    const struct train_value *first = &per_tower[0];
    size_t counts_total = 0;
    int64_t rows = 0;
    for (size_t t = 0; t < n; t++) {
        const struct train_value *v = &per_tower[t];
        size_t count;
        int rc = train_value_count(v, &count, err);
        if (rc != 0)
            return sl_error_prefix(err, "tower concat: tower %zu: ", t);
        if (v->rank < 1)
            return sl_error_set(err, SL_EINVAL, "tower concat: tower %zu's value is a scalar (rank 0)", t);
        int same = v->rank == first->rank;
        for (int d = 1; same && d < v->rank; d++)
            same = v->dims[d] == first->dims[d];
        if (!same) {
            char s0[128], st[128];
            train_value_format_shape(first, s0, sizeof s0);
            train_value_format_shape(v, st, sizeof st);
            return sl_error_set(err, SL_EINVAL,
                                "tower concat: tower %zu has shape %s but tower 0 has shape %s (dimensions after "
                                "dim 0 must match)",
                                t, st, s0);
        }
        if (count > SIZE_MAX / sizeof(float) - counts_total)
            return sl_error_set(err, SL_EINVAL, "tower concat: the result has too many elements");
        counts_total += count;
        rows += v->dims[0];
    }
    size_t used = 0;
    for (size_t t = 0; t < n; t++) {
        size_t count;
        if (train_value_count(&per_tower[t], &count, NULL) != 0 || count == 0)
            continue;
        memcpy(out->data + used, per_tower[t].data, count * sizeof(float));
        used += count;
    }
    out->rank = first->rank;
    memset(out->dims, 0, sizeof out->dims);
    memcpy(out->dims, first->dims, (size_t)first->rank * sizeof out->dims[0]);
    out->dims[0] = rows;
    return 0;
}
