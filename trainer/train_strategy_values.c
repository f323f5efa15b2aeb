/* train_strategy_values: the strategy's distributed values (see
 * train_strategy.h): mirrored variables and their check across workers,
 * per-replica values, strategy.reduce, and values from a function. */
#include "train_strategy.h"

#include <inttypes.h>
#include <string.h>

#include "sl_alloc.h"
#include "train_strategy_int.h"

int train_strategy_variable(struct train_strategy *s, const char *name, size_t n, enum train_aggregation agg,
                            const float *init, struct train_variable **out, struct sl_error *err)
{
    *out = NULL;
    if (s->nvars == TRAIN_STRATEGY_MAX_VARIABLES)
        return sl_error_set(err, SL_EINVAL, "strategy: at most %d variables", TRAIN_STRATEGY_MAX_VARIABLES);
    if (s->mode == TRAIN_STRATEGY_PS && (s->ps_var != NULL || n != train_ps_client_params(s->ps)))
        return sl_error_set(err, SL_EINVAL,
                            "strategy: parameter-server mode holds one variable, of the servers' %zu "
                            "floats (got '%s' of %zu%s)",
                            train_ps_client_params(s->ps), name, n, s->ps_var != NULL ? ", a second" : "");
    if (s->W > 1) {
        size_t need = (size_t)s->W * 4 * (s->nvars + 1);
        float *hb = sl_realloc(s->hashbuf, need * sizeof *hb);
        if (hb == NULL)
            return sl_error_set(err, SL_ENOMEM, "strategy: out of memory for the hash check");
        s->hashbuf = hb;
    }
    struct train_variable *v = &s->vars[s->nvars];
    int copies = s->mode == TRAIN_STRATEGY_TOWER ? 1 : (int)s->R;
    int rc = train_mirror_create(&v->m, name, n, copies, agg, init, err);
    if (rc != 0)
        return rc;
    v->s = s;
    v->agg = agg;
    s->nvars++;
    if (s->mode == TRAIN_STRATEGY_PS)
        s->ps_var = v;
    *out = v;
    return 0;
}

float *train_variable_copy(struct train_variable *var, int replica)
{
    if (replica < 0 || (uint32_t)replica >= var->s->R)
        return NULL;
    return train_mirror_copy(var->m, var->s->mode == TRAIN_STRATEGY_TOWER ? 0 : replica);
}

size_t train_variable_size(const struct train_variable *var)
{
    return train_mirror_size(var->m);
}

uint64_t train_variable_hash(const struct train_variable *var)
{
    return train_mirror_hash(var->m, 0);
}

int train_strategy_check(struct train_strategy *s, struct sl_error *err)
{
    for (size_t i = 0; i < s->nvars; i++) {
        int rc = train_mirror_check(s->vars[i].m, err);
        if (rc != 0)
            return rc;
    }
    if (s->W == 1 || s->nvars == 0)
        return 0;
    /* each worker's hashes as 16-bit pieces (exact in float32) in its own
     * slots, zeros elsewhere: the ring's sum hands everyone all of them */
    size_t per = 4 * s->nvars, n = per * s->W;
    memset(s->hashbuf, 0, n * sizeof *s->hashbuf);
    for (size_t i = 0; i < s->nvars; i++) {
        uint64_t h = train_mirror_hash(s->vars[i].m, 0);
        for (int k = 0; k < 4; k++)
            s->hashbuf[s->worker * per + 4 * i + (size_t)k] = (float)((h >> (16 * k)) & 0xffff);
    }
    int rc = train_coll_all_reduce(s->across, s->hashbuf, n, err);
    if (rc != 0)
        return sl_error_prefix(err, "hash check across workers: ");
    for (size_t i = 0; i < s->nvars; i++) {
        uint64_t h[2];
        for (uint32_t w = 0; w < s->W; w++) {
            uint64_t x = 0;
            for (int k = 0; k < 4; k++)
                x |= (uint64_t)s->hashbuf[w * per + 4 * i + (size_t)k] << (16 * k);
            h[w == 0 ? 0 : 1] = x;
            if (w > 0 && h[1] != h[0])
                return sl_error_set(err, SL_ECORRUPT,
                                    "mirrored variable '%s' diverged across workers: worker %u hashes 0x%016" PRIx64
                                    ", worker 0 0x%016" PRIx64,
                                    train_mirror_name(s->vars[i].m), w, h[1], h[0]);
        }
    }
    return 0;
}

int train_per_replica_create(struct train_per_replica **out, const struct train_strategy *s, size_t capacity,
                             struct sl_error *err)
{
    *out = NULL;
    if (capacity > SIZE_MAX / sizeof(float) / s->R - 1)
        return sl_error_set(err, SL_EINVAL, "per-replica value: %zu floats x %u replicas is too large", capacity, s->R);
    struct train_per_replica *pv = sl_calloc(1, sizeof *pv + s->R * sizeof pv->vals[0]);
    if (pv != NULL && (pv->data = sl_malloc((capacity * s->R + 1) * sizeof(float))) == NULL) {
        sl_free(pv);
        pv = NULL;
    }
    if (pv == NULL)
        return sl_error_set(err, SL_ENOMEM, "per-replica value: out of memory");
    pv->replicas = s->R;
    pv->capacity = capacity;
    for (uint32_t r = 0; r < s->R; r++)
        pv->vals[r].data = pv->data + (size_t)r * capacity;
    *out = pv;
    return 0;
}

void train_per_replica_destroy(struct train_per_replica *pv)
{
    if (pv == NULL)
        return;
    sl_free(pv->data);
    sl_free(pv);
}

int train_per_replica_set(struct train_per_replica *pv, int replica, int rank, const int64_t *dims, float **data,
                          struct sl_error *err)
{
    if (replica < 0 || (uint32_t)replica >= pv->replicas)
        return sl_error_set(err, SL_EINVAL, "per-replica value: no replica %d", replica);
    struct train_value v = {.data = pv->vals[replica].data, .rank = rank};
    if (rank > 0)
        memcpy(v.dims, dims, (size_t)(rank <= TRAIN_VALUE_MAX_RANK ? rank : TRAIN_VALUE_MAX_RANK) * sizeof v.dims[0]);
    size_t count;
    int rc = train_value_count(&v, &count, err);
    if (rc != 0)
        return rc;
    if (count > pv->capacity)
        return sl_error_set(err, SL_EINVAL, "per-replica value: replica %d's value has %zu elements (capacity %zu)",
                            replica, count, pv->capacity);
    pv->vals[replica] = v;
    *data = v.data;
    return 0;
}

size_t train_per_replica_local_results(const struct train_per_replica *pv, const struct train_value **values)
{
    *values = pv->vals;
    return pv->replicas;
}

int train_per_replica_concat(const struct train_per_replica *pv, struct train_value *out, struct sl_error *err)
{
    return train_tower_concat(pv->vals, pv->replicas, out, err);
}

int train_strategy_reduce(struct train_strategy *s, enum train_reduce_op op, const struct train_per_replica *pv,
                          int axis, struct train_value *out, struct sl_error *err)
{
    if (pv->replicas != s->R)
        return sl_error_set(err, SL_EINVAL, "reduce: a value of %u replicas for a strategy of %u", pv->replicas, s->R);
    if (s->W == 1)
        return train_reduce(op, pv->vals, s->R, axis, out, err);
    if (op != TRAIN_SUM && op != TRAIN_MEAN)
        return sl_error_set(err, SL_EINVAL, "reduce: unknown reduce op %d", (int)op);
    /* across workers: sums first (this worker's by train_reduce), the count
     * alongside, one division at the end */
    int rc = train_reduce(TRAIN_SUM, pv->vals, s->R, axis, out, err);
    size_t m = 0;
    if (rc == 0)
        rc = train_value_count(out, &m, err);
    if (rc != 0)
        return rc;
    if (m > s->scratch_floats)
        return sl_error_set(err, SL_EINVAL, "reduce: %zu values exceed the scratch of %zu floats", m,
                            s->scratch_floats);
    float *buf = s->reps[0].scratch; /* replica 0's: this is its thread, between runs */
    memcpy(buf, out->data, m * sizeof *buf);
    float rows = 0;
    for (uint32_t r = 0; r < s->R; r++)
        rows += axis == TRAIN_AXIS_NONE ? 1.0f : (float)pv->vals[r].dims[0];
    buf[m] = rows;
    if ((rc = train_coll_all_reduce(s->across, buf, m + 1, err)) != 0)
        return sl_error_prefix(err, "reduce across workers: ");
    if (op == TRAIN_MEAN && buf[m] == 0)
        return sl_error_set(err, SL_EINVAL,
                            "reduce MEAN over axis 0: every replica is empty (0 rows in all): the "
                            "mean is undefined");
    for (size_t j = 0; j < m; j++)
        out->data[j] = op == TRAIN_MEAN ? buf[j] / buf[m] : buf[j];
    return 0;
}

/* ---- values from a function (train_strategy.h) ---- */

const struct train_value *train_replica_value(const struct train_replica *rep, const struct train_per_replica *pv)
{
    if (pv == NULL || pv->replicas != rep->s->R)
        return NULL;
    return &pv->vals[rep->id];
}

/* What fn left in *v is a value of at most `capacity` elements with its
 * data somewhere: into the slot with it (a no-op when fn wrote there). */
static int take_value(struct train_value *v, float *slot, size_t capacity, struct sl_error *err)
{
    size_t count;
    int rc = train_value_count(v, &count, err);
    if (rc != 0)
        return rc;
    char shape[128];
    train_value_format_shape(v, shape, sizeof shape);
    if (count > capacity)
        return sl_error_set(err, SL_EINVAL, "value %s has %zu elements, over the capacity %zu", shape, count, capacity);
    if (count > 0 && v->data == NULL)
        return sl_error_set(err, SL_EINVAL, "value %s has %zu elements but no data", shape, count);
    if (count > 0 && v->data != slot)
        memmove(slot, v->data, count * sizeof *slot);
    v->data = slot;
    return 0;
}

int train_strategy_values_from_function(struct train_per_replica **out, const struct train_strategy *s, size_t capacity,
                                        train_value_fn fn, void *ctx, struct sl_error *err)
{
    if (out == NULL)
        return sl_error_set(err, SL_EINVAL, "values_from_function: nowhere to put the values (out is NULL)");
    *out = NULL;
    if (s == NULL)
        return sl_error_set(err, SL_EINVAL, "values_from_function: no strategy (no replicas to make values for)");
    if (fn == NULL)
        return sl_error_set(err, SL_EINVAL, "values_from_function: no value function");
    struct train_per_replica *pv;
    int rc = train_per_replica_create(&pv, s, capacity, err);
    if (rc != 0)
        return rc;
    memset(pv->data, 0, (capacity * s->R + 1) * sizeof *pv->data);
    /* one replica after the other, on this thread: the replica threads are
     * idle between runs, and fn sees the replicas in their order */
    for (uint32_t r = 0; r < s->R; r++) {
        struct train_value_context vc = {.replica_id_in_sync_group = (int)(s->worker * s->R + r),
                                         .num_replicas_in_sync = s->R * s->W,
                                         .replica = (int)r,
                                         .worker = s->worker,
                                         .loss_scale = s->loss_scale,
                                         .capacity = capacity};
        float *slot = pv->data + (size_t)r * capacity;
        struct train_value v = {.data = slot};
        struct sl_error ferr = {0};
        rc = fn(&vc, &v, ctx, &ferr);
        if (rc > 0)
            rc = sl_error_set(&ferr, SL_EINVAL, "value_fn returned %d (not an error code)", rc);
        else if (rc < 0 && ferr.msg[0] == '\0')
            sl_error_set(&ferr, rc, "value_fn failed (%s)", sl_code_name(rc));
        if (rc == 0)
            rc = take_value(&v, slot, capacity, &ferr);
        if (rc != 0) {
            train_per_replica_destroy(pv);
            return sl_error_set(err, rc, "values_from_function: replica %u (replica_id_in_sync_group %d): %s", r,
                                vc.replica_id_in_sync_group, ferr.msg);
        }
        pv->vals[r] = v;
    }
    *out = pv;
    return 0;
}
