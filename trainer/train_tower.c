/* train_tower: tower-mode helpers. The error texts are replicate_model_fn's
 * ValueError messages, with the numbers filled in, so logs match what a
 * TensorFlow user would search for. */
#include "train_tower.h"

#include <string.h>

#include "sl_wire.h"

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

/* Bytes of one row of tensor t (dims after dim 0), or 0 with err set when
 * t cannot be cut along dim 0 for a piece of `rows` rows. */
static uint64_t row_bytes(const struct client_tensor *t, uint32_t tower, uint32_t rows, struct sl_error *err)
{
    const char *name = t->name != NULL ? t->name : "";
    size_t esize = sl_wire_dtype_size(t->dtype);
    if (esize == 0) {
        sl_error_set(err, SL_EINVAL,
                     "tower split: tensor '%s' is %s: only fixed-size values can be split along "
                     "dim 0",
                     name, sl_wire_dtype_name(t->dtype));
        return 0;
    }
    if (t->rank < 1 || t->rank > SL_WIRE_MAX_PIECE_RANK || t->dims[0] != (int64_t)rows) {
        sl_error_set(err, SL_EINVAL, "tower split: tower %u's tensor '%s' has rank %d and dim 0 of %lld for %u rows",
                     tower, name, t->rank, t->rank >= 1 ? (long long)t->dims[0] : 0LL, rows);
        return 0;
    }
    uint64_t b = esize;
    for (int d = 1; d < t->rank; d++) {
        if (t->dims[d] < 0 || (t->dims[d] > 0 && b > UINT64_MAX / (uint64_t)t->dims[d] / rows)) {
            sl_error_set(err, SL_EINVAL, "tower split: tower %u's tensor '%s': bad dim %d (%lld)", tower, name, d,
                         (long long)t->dims[d]);
            return 0;
        }
        b *= (uint64_t)t->dims[d];
    }
    if (b == 0 || t->bytes != b * rows || t->data == NULL) {
        sl_error_set(err, SL_EINVAL, "tower split: tower %u's tensor '%s' holds %llu bytes, its shape %llu", tower,
                     name, (unsigned long long)t->bytes, (unsigned long long)(b * rows));
        return 0;
    }
    return b;
}

int train_tower_resplit(const struct client_piece *in, uint32_t n, struct client_piece *out, void *scratch,
                        size_t scratch_bytes, struct sl_error *err)
{
    if (n < 1)
        return sl_error_set(err, SL_EINVAL, "tower split: needs >= 1 tower (got %u)", n);
    uint64_t total = 0;
    for (uint32_t t = 0; t < n; t++)
        total += in[t].rows;
    int64_t k;
    int rc = train_tower_split((int64_t)total, (int)n, &k, err);
    if (rc != 0)
        return rc;
    int equal = 1;
    for (uint32_t t = 0; t < n; t++)
        equal &= in[t].rows == (uint64_t)k;
    if (equal) {
        memcpy(out, in, n * sizeof *out);
        return 0;
    }

    /* the first non-empty piece gives the tensors' layout; every other
     * non-empty piece must agree with it */
    const struct client_piece *ref = NULL;
    for (uint32_t t = 0; ref == NULL && t < n; t++)
        if (in[t].rows > 0)
            ref = &in[t];
    uint64_t rb[SL_WIRE_MAX_TENSORS];
    if (ref->ntensors > SL_WIRE_MAX_TENSORS)
        return sl_error_set(err, SL_EINVAL, "tower split: %zu tensors (at most %d)", ref->ntensors,
                            SL_WIRE_MAX_TENSORS);
    uint64_t need = 0;
    for (size_t i = 0; i < ref->ntensors; i++) {
        if ((rb[i] = row_bytes(&ref->t[i], (uint32_t)(ref - in), ref->rows, err)) == 0)
            return SL_EINVAL;
        need += (rb[i] * total + TRAIN_TOWER_ALIGN - 1) / TRAIN_TOWER_ALIGN * TRAIN_TOWER_ALIGN;
    }
    for (uint32_t t = 0; t < n; t++) {
        const struct client_piece *p = &in[t];
        if (p->rows == 0 || p == ref)
            continue;
        if (p->ntensors != ref->ntensors)
            return sl_error_set(err, SL_EINVAL, "tower split: tower %u has %zu tensors, tower %u %zu", t, p->ntensors,
                                (uint32_t)(ref - in), ref->ntensors);
        for (size_t i = 0; i < p->ntensors; i++) {
            const struct client_tensor *a = &p->t[i], *b = &ref->t[i];
            int same = a->dtype == b->dtype && a->rank == b->rank &&
                       strcmp(a->name != NULL ? a->name : "", b->name != NULL ? b->name : "") == 0;
            for (int d = 1; same && d < a->rank && d < SL_WIRE_MAX_PIECE_RANK; d++)
                same = a->dims[d] == b->dims[d];
            if (!same)
                return sl_error_set(err, SL_EINVAL,
                                    "tower split: tower %u's tensor %zu differs from tower %u's in "
                                    "name, dtype or shape after dim 0",
                                    t, i, (uint32_t)(ref - in));
            if (row_bytes(a, t, p->rows, err) == 0)
                return SL_EINVAL;
        }
    }
    if (need > scratch_bytes)
        return sl_error_set(err, SL_EINVAL, "tower split: the step's %llu bytes exceed the %zu-byte scratch",
                            (unsigned long long)need, scratch_bytes);

    /* tensor i's rows of the whole batch, one after another, then cut */
    unsigned char *base = scratch;
    for (uint32_t t = 0; t < n; t++) {
        out[t] = in[t];
        out[t].rows = (uint32_t)k;
        out[t].ntensors = ref->ntensors;
    }
    for (size_t i = 0; i < ref->ntensors; i++) {
        size_t used = 0;
        for (uint32_t t = 0; t < n; t++) {
            if (in[t].rows == 0)
                continue;
            memcpy(base + used, in[t].t[i].data, (size_t)in[t].t[i].bytes);
            used += (size_t)in[t].t[i].bytes;
        }
        for (uint32_t t = 0; t < n; t++) {
            struct client_tensor *o = &out[t].t[i];
            *o = ref->t[i];
            o->dims[0] = k;
            o->bytes = rb[i] * (uint64_t)k;
            o->data = k > 0 ? base + (size_t)t * (size_t)o->bytes : NULL;
        }
        base += (used + TRAIN_TOWER_ALIGN - 1) / TRAIN_TOWER_ALIGN * TRAIN_TOWER_ALIGN;
    }
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
