/* sluice_strategy: libsluice-strategy, the public face of the strategy's
 * distributed values (include/sluice/strategy.h) over train_strategy.h.
 *
 * A thin layer: the strategy, its replica threads, reductions and
 * collectives are train_strategy's (tested there); this file checks what a
 * caller hands in (the API is for code outside the tree, so every pointer,
 * size, dtype and integer is checked before it is used), converts values
 * and errors between the public and the internal structs, and adds what
 * the internal API leaves to its callers: a dtype per per-replica value,
 * a PerReplica from one step of a sluice feeder, and a capacity for
 * reduce's result. The public codes are the internal ones, number for
 * number. Allocation: at create and when per-replica values are made, as
 * the strategy's own.
 */
#include "sluice/strategy.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "sl_alloc.h"
#include "sl_error.h"
#include "sl_wire.h"
#include "train_strategy.h"

_Static_assert(SLUICE_EIO == SL_EIO && SLUICE_ENOMEM == SL_ENOMEM && SLUICE_EINVAL == SL_EINVAL &&
                   SLUICE_ECORRUPT == SL_ECORRUPT && SLUICE_EPROTO == SL_EPROTO && SLUICE_ETIMEOUT == SL_ETIMEOUT &&
                   SLUICE_EDEVICE == SL_EDEVICE && SLUICE_ECLOSED == SL_ECLOSED,
               "sluice codes follow sl_error.h");
_Static_assert(SLUICE_ERROR_MAX == SL_ERROR_MSG_MAX, "one message size");
_Static_assert(SLUICE_VALUE_MAX_RANK == TRAIN_VALUE_MAX_RANK && SLUICE_AXIS_NONE == TRAIN_AXIS_NONE,
               "values follow train_reduce.h");
_Static_assert((int)SLUICE_REDUCE_SUM == (int)TRAIN_SUM && (int)SLUICE_REDUCE_MEAN == (int)TRAIN_MEAN,
               "reduce ops follow train_reduce.h");
_Static_assert((int)SLUICE_INT64 == (int)SL_WIRE_INT64 && (int)SLUICE_FLOAT32 == (int)SL_WIRE_FLOAT32 &&
                   (int)SLUICE_UINT8 == (int)SL_WIRE_UINT8,
               "sluice dtypes follow sl_wire.h");

struct sluice_strategy {
    struct train_strategy *s;
};

struct sluice_per_replica {
    struct train_per_replica *pv;
    int dtype;
    uint32_t replicas;
    size_t capacity;
};

/* struct sluice_replica is never defined: a step function's replica is the
 * strategy's struct train_replica, cast on the way out and back. */
static struct train_replica *inner(const struct sluice_replica *rep)
{
    return (struct train_replica *)rep;
}

static int out_error(struct sluice_error *out, const struct sl_error *e)
{
    if (out != NULL) {
        out->code = e->code;
        snprintf(out->message, sizeof out->message, "%s", e->msg);
    }
    return e->code;
}

static int fail(struct sluice_error *out, int code, const char *fmt, ...) SL_PRINTF(3, 4);
static int fail(struct sluice_error *out, int code, const char *fmt, ...)
{
    struct sl_error e = {0};
    va_list ap;
    va_start(ap, fmt);
    char msg[SL_ERROR_MSG_MAX];
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sl_error_set(&e, code, "%s", msg);
    return out_error(out, &e);
}

static int done(struct sluice_error *out)
{
    if (out != NULL) {
        out->code = SLUICE_OK;
        out->message[0] = '\0';
    }
    return SLUICE_OK;
}

static int valid_dtype(int dtype)
{
    return dtype == SLUICE_FLOAT32 || dtype == SLUICE_INT64 || dtype == SLUICE_UINT8;
}

static const char *dtype_name(int dtype)
{
    switch (dtype) {
    case SLUICE_FLOAT32: return "float32";
    case SLUICE_INT64: return "int64";
    case SLUICE_UINT8: return "uint8";
    case SLUICE_BYTES: return "bytes";
    default: return "?";
    }
}

static void to_public(const struct train_value *v, int dtype, struct sluice_value *out)
{
    memset(out, 0, sizeof *out);
    out->dtype = dtype;
    out->rank = v->rank;
    int rank = v->rank < 0 ? 0 : v->rank > SLUICE_VALUE_MAX_RANK ? SLUICE_VALUE_MAX_RANK : v->rank;
    memcpy(out->dims, v->dims, (size_t)rank * sizeof out->dims[0]);
    out->data = v->data;
}

/* 0 when every element of a value of an integer dtype is an integer that
 * float32 holds exactly; else SL_EINVAL naming the first that is not. */
static int check_integers(int dtype, const float *data, size_t count, struct sl_error *err)
{
    if (dtype == SLUICE_FLOAT32)
        return 0;
    for (size_t i = 0; i < count; i++) {
        float v = data[i];
        if (!(v >= -(float)SLUICE_VALUE_MAX_EXACT_INT && v <= (float)SLUICE_VALUE_MAX_EXACT_INT) ||
            v != (float)(int64_t)v || (dtype == SLUICE_UINT8 && (v < 0 || v > 255)))
            return sl_error_set(err, SL_EINVAL, "element %zu is %g, not a %s value (integers within 2^24)", i,
                                (double)v, dtype_name(dtype));
    }
    return 0;
}

int64_t sluice_value_elements(const struct sluice_value *v)
{
    if (v == NULL || v->rank < 0 || v->rank > SLUICE_VALUE_MAX_RANK)
        return -1;
    int64_t n = 1;
    for (int i = 0; i < v->rank; i++) {
        if (v->dims[i] < 0 || (v->dims[i] > 0 && n > INT64_MAX / v->dims[i]))
            return -1;
        n *= v->dims[i];
    }
    return n;
}

/* --- the strategy --- */

int sluice_strategy_create(struct sluice_strategy **out, const struct sluice_strategy_options *o,
                           struct sluice_error *err)
{
    if (out == NULL)
        return fail(err, SLUICE_EINVAL, "strategy: nowhere to put it (out is NULL)");
    *out = NULL;
    struct train_strategy_opts to = {.replicas = o != NULL ? o->replicas : 0, .device = "cpu"};
    struct sluice_strategy *s = sl_calloc(1, sizeof *s);
    if (s == NULL)
        return fail(err, SLUICE_ENOMEM, "strategy: out of memory");
    struct sl_error e = {0};
    if (train_strategy_create(&s->s, &to, &e) != 0) {
        sl_free(s);
        return out_error(err, &e);
    }
    *out = s;
    return done(err);
}

void sluice_strategy_destroy(struct sluice_strategy *s)
{
    if (s == NULL)
        return;
    train_strategy_destroy(s->s);
    sl_free(s);
}

uint32_t sluice_strategy_replicas(const struct sluice_strategy *s)
{
    return s != NULL ? train_strategy_replicas(s->s) : 0;
}

uint32_t sluice_strategy_num_replicas_in_sync(const struct sluice_strategy *s)
{
    return s != NULL ? train_strategy_num_replicas_in_sync(s->s) : 0;
}

/* --- per-replica values --- */

/* A new per-replica value of s (capacity checked), every slot a scalar 0. */
static int per_replica_new(struct sluice_per_replica **out, const struct sluice_strategy *s, size_t capacity, int dtype,
                           struct sl_error *e)
{
    *out = NULL;
    if (capacity == 0)
        return sl_error_set(e, SL_EINVAL, "per-replica value: capacity 0 (at least 1 element)");
    struct sluice_per_replica *p = sl_calloc(1, sizeof *p);
    if (p == NULL)
        return sl_error_set(e, SL_ENOMEM, "per-replica value: out of memory");
    int rc = train_per_replica_create(&p->pv, s->s, capacity, e);
    if (rc != 0) {
        sl_free(p);
        return rc;
    }
    p->dtype = dtype;
    p->replicas = train_strategy_replicas(s->s);
    p->capacity = capacity;
    for (uint32_t r = 0; r < p->replicas && rc == 0; r++) {
        float *d;
        if ((rc = train_per_replica_set(p->pv, (int)r, 0, NULL, &d, e)) == 0)
            d[0] = 0.0f;
    }
    if (rc != 0) {
        sluice_per_replica_destroy(p);
        return rc;
    }
    *out = p;
    return 0;
}

int sluice_per_replica_create(struct sluice_per_replica **out, const struct sluice_strategy *s, size_t capacity,
                              int dtype, struct sluice_error *err)
{
    if (out == NULL)
        return fail(err, SLUICE_EINVAL, "per-replica value: nowhere to put it (out is NULL)");
    *out = NULL;
    if (s == NULL)
        return fail(err, SLUICE_EINVAL, "per-replica value: no strategy");
    if (!valid_dtype(dtype))
        return fail(err, SLUICE_EINVAL, "per-replica value: dtype %d (float32, int64 or uint8)", dtype);
    struct sl_error e = {0};
    return per_replica_new(out, s, capacity, dtype, &e) != 0 ? out_error(err, &e) : done(err);
}

void sluice_per_replica_destroy(struct sluice_per_replica *pv)
{
    if (pv == NULL)
        return;
    train_per_replica_destroy(pv->pv);
    sl_free(pv);
}

size_t sluice_per_replica_local_results(const struct sluice_per_replica *pv, struct sluice_value *values, size_t n)
{
    if (pv == NULL)
        return 0;
    const struct train_value *vals;
    size_t R = train_per_replica_local_results(pv->pv, &vals);
    for (size_t r = 0; r < R && r < n && values != NULL; r++)
        to_public(&vals[r], pv->dtype, &values[r]);
    return R;
}

/* --- a step of a feeder --- */

static const struct sluice_tensor *find_tensor(const struct sluice_piece *p, const char *name)
{
    for (size_t i = 0; i < p->ntensors; i++)
        if (p->tensors[i].name != NULL && strcmp(p->tensors[i].name, name) == 0)
            return &p->tensors[i];
    return NULL;
}

/* piece r's tensor, checked: its elements into *count */
static int step_tensor(const struct sluice_piece *p, uint32_t r, const char *name, const struct sluice_tensor **out,
                       size_t *count, struct sl_error *e)
{
    if (p->ntensors > 0 && p->tensors == NULL)
        return sl_error_set(e, SL_EINVAL, "distribute_step: replica %u's piece has %zu tensors but no array", r,
                            p->ntensors);
    const struct sluice_tensor *t = find_tensor(p, name);
    if (t == NULL) {
        char names[256] = "";
        for (size_t i = 0; i < p->ntensors; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s'%s'", i ? ", " : "",
                     p->tensors[i].name != NULL ? p->tensors[i].name : "(null)");
        return sl_error_set(e, SL_EINVAL, "distribute_step: replica %u's piece has no tensor '%s' (it has %s)", r, name,
                            p->ntensors ? names : "none");
    }
    if (!valid_dtype(t->dtype))
        return sl_error_set(e, SL_EINVAL, "distribute_step: tensor '%s' is %s (float32, int64 or uint8 values only)",
                            name, dtype_name(t->dtype));
    if (t->rank < 0 || t->rank > SLUICE_VALUE_MAX_RANK || (t->rank > 0 && t->shape == NULL))
        return sl_error_set(e, SL_EINVAL, "distribute_step: replica %u's tensor '%s' has rank %d (0..%d)", r, name,
                            t->rank, SLUICE_VALUE_MAX_RANK);
    struct sluice_value v = {.rank = t->rank};
    memcpy(v.dims, t->shape, (size_t)t->rank * sizeof v.dims[0]);
    int64_t n = sluice_value_elements(&v);
    size_t size = t->dtype == SLUICE_UINT8 ? 1 : t->dtype == SLUICE_INT64 ? 8 : 4;
    if (n < 0 || (uint64_t)n > UINT64_MAX / size || (uint64_t)n * size != t->bytes || (t->bytes > 0 && t->data == NULL))
        return sl_error_set(e, SL_EINVAL,
                            "distribute_step: replica %u's tensor '%s' holds %llu bytes, not its "
                            "shape's",
                            r, name, (unsigned long long)t->bytes);
    *out = t;
    *count = (size_t)n;
    return 0;
}

int sluice_strategy_distribute_step(struct sluice_per_replica **out, const struct sluice_strategy *s,
                                    const struct sluice_piece *pieces, size_t npieces, const char *tensor,
                                    struct sluice_error *err)
{
    if (out == NULL)
        return fail(err, SLUICE_EINVAL, "distribute_step: nowhere to put the values (out is NULL)");
    *out = NULL;
    if (s == NULL || tensor == NULL)
        return fail(err, SLUICE_EINVAL, "distribute_step: %s", s == NULL ? "no strategy" : "no tensor name");
    uint32_t R = train_strategy_replicas(s->s);
    if (pieces == NULL || npieces != R)
        return fail(err, SLUICE_EINVAL, "distribute_step: %zu pieces for %u replicas (one step: one piece each)",
                    pieces == NULL ? 0 : npieces, R);
    struct sl_error e = {0};
    const struct sluice_tensor *first = NULL;
    size_t most = 1;
    for (uint32_t r = 0; r < R; r++) {
        const struct sluice_tensor *t;
        size_t count;
        if (step_tensor(&pieces[r], r, tensor, &t, &count, &e) != 0)
            return out_error(err, &e);
        if (first != NULL && t->dtype != first->dtype)
            return fail(err, SLUICE_EINVAL,
                        "distribute_step: tensor '%s' is %s in replica %u's piece, %s in replica "
                        "0's",
                        tensor, dtype_name(t->dtype), r, dtype_name(first->dtype));
        first = r == 0 ? t : first;
        most = count > most ? count : most;
    }
    struct sluice_per_replica *p;
    if (per_replica_new(&p, s, most, first->dtype, &e) != 0)
        return out_error(err, &e);
    for (uint32_t r = 0; r < R; r++) {
        const struct sluice_tensor *t = NULL;
        size_t count = 0;
        float *d = NULL;
        int rc = step_tensor(&pieces[r], r, tensor, &t, &count, &e);
        int64_t dims[SLUICE_VALUE_MAX_RANK];
        if (rc == 0) {
            memcpy(dims, t->shape, (size_t)t->rank * sizeof dims[0]);
            rc = train_per_replica_set(p->pv, (int)r, t->rank, dims, &d, &e);
        }
        /* the data has no alignment promise: element by element, memcpy */
        const unsigned char *src = t != NULL ? t->data : NULL;
        for (size_t i = 0; rc == 0 && i < count; i++) {
            if (t->dtype == SLUICE_FLOAT32) {
                memcpy(&d[i], src + 4 * i, 4);
            } else if (t->dtype == SLUICE_UINT8) {
                d[i] = (float)src[i];
            } else {
                int64_t v;
                memcpy(&v, src + 8 * i, 8);
                if (v < -SLUICE_VALUE_MAX_EXACT_INT || v > SLUICE_VALUE_MAX_EXACT_INT)
                    rc = sl_error_set(&e, SL_EINVAL,
                                      "distribute_step: replica %u's '%s' element %zu is %lld, beyond "
                                      "2^24 (not exact as float32)",
                                      r, tensor, i, (long long)v);
                d[i] = (float)v;
            }
        }
        if (rc != 0) {
            sluice_per_replica_destroy(p);
            return out_error(err, &e);
        }
    }
    *out = p;
    return done(err);
}

/* --- values from a function --- */

struct vff {
    sluice_value_fn fn;
    void *ctx;
    int dtype; /* replica 0's */
};

static int vff_call(const struct train_value_context *vc, struct train_value *out, void *ctx, struct sl_error *err)
{
    struct vff *f = ctx;
    struct sluice_value_context svc = {.replica_id_in_sync_group = vc->replica_id_in_sync_group,
                                       .num_replicas_in_sync = vc->num_replicas_in_sync,
                                       .capacity = vc->capacity};
    struct sluice_value v = {.dtype = SLUICE_FLOAT32, .rank = 0, .data = out->data};
    struct sluice_error fe = {0};
    int rc = f->fn(&svc, &v, f->ctx, &fe);
    if (rc > 0)
        return rc; /* named by the strategy: not an error code */
    if (rc < 0)
        return fe.message[0] != '\0' ? sl_error_set(err, rc, "%s", fe.message) : rc;
    if (!valid_dtype(v.dtype))
        return sl_error_set(err, SL_EINVAL, "dtype %d (float32, int64 or uint8)", v.dtype);
    if (vc->replica > 0 && v.dtype != f->dtype)
        return sl_error_set(err, SL_EINVAL, "dtype %s, replica 0's is %s", dtype_name(v.dtype), dtype_name(f->dtype));
    f->dtype = v.dtype;
    int64_t n = sluice_value_elements(&v);
    if (n > 0 && (size_t)n <= vc->capacity && v.data != NULL) {
        int cr = check_integers(v.dtype, v.data, (size_t)n, err);
        if (cr != 0)
            return cr;
    }
    /* what is left to check (rank, dims, capacity, data) the strategy does */
    out->rank = v.rank;
    int rank = v.rank < 0 ? 0 : v.rank > SLUICE_VALUE_MAX_RANK ? SLUICE_VALUE_MAX_RANK : v.rank;
    memcpy(out->dims, v.dims, (size_t)rank * sizeof out->dims[0]);
    out->data = v.data;
    return 0;
}

int sluice_strategy_values_from_function(struct sluice_per_replica **out, const struct sluice_strategy *s,
                                         size_t capacity, sluice_value_fn fn, void *ctx, struct sluice_error *err)
{
    if (out == NULL)
        return fail(err, SLUICE_EINVAL, "values_from_function: nowhere to put the values (out is NULL)");
    *out = NULL;
    if (s == NULL || fn == NULL)
        return fail(err, SLUICE_EINVAL, "values_from_function: %s", s == NULL ? "no strategy" : "no value function");
    if (capacity == 0)
        return fail(err, SLUICE_EINVAL, "values_from_function: capacity 0 (at least 1 element)");
    struct sluice_per_replica *p = sl_calloc(1, sizeof *p);
    if (p == NULL)
        return fail(err, SLUICE_ENOMEM, "values_from_function: out of memory");
    struct vff f = {.fn = fn, .ctx = ctx, .dtype = SLUICE_FLOAT32};
    struct sl_error e = {0};
    if (train_strategy_values_from_function(&p->pv, s->s, capacity, vff_call, &f, &e) != 0) {
        sl_free(p);
        return out_error(err, &e);
    }
    p->dtype = f.dtype;
    p->replicas = train_strategy_replicas(s->s);
    p->capacity = capacity;
    *out = p;
    return done(err);
}

/* --- run --- */

struct run_call {
    sluice_step_fn fn;
    void *ctx;
};

static int run_call(struct train_replica *rep, const struct train_staged *piece, void *ctx, struct sl_error *err)
{
    (void)piece;
    struct run_call *c = ctx;
    struct sluice_error fe = {0};
    int rc = c->fn((struct sluice_replica *)rep, c->ctx, &fe);
    /* the strategy prefixes "replica r: " */
    if (rc > 0)
        return sl_error_set(err, SL_EINVAL, "the step function returned %d (not an error code)", rc);
    if (rc < 0)
        return fe.message[0] != '\0' ? sl_error_set(err, rc, "%s", fe.message)
                                     : sl_error_set(err, rc, "the step function failed (%d)", rc);
    return 0;
}

int sluice_strategy_run(struct sluice_strategy *s, sluice_step_fn fn, void *ctx, struct sluice_error *err)
{
    if (s == NULL || fn == NULL)
        return fail(err, SLUICE_EINVAL, "run: %s", s == NULL ? "no strategy" : "no step function");
    struct run_call c = {.fn = fn, .ctx = ctx};
    struct sl_error e = {0};
    return train_strategy_call_for_each_replica(s->s, run_call, &c, &e) != 0 ? out_error(err, &e) : done(err);
}

int sluice_replica_id(const struct sluice_replica *rep)
{
    return train_replica_id(inner(rep));
}

int sluice_replica_id_in_sync_group(const struct sluice_replica *rep)
{
    return train_replica_global_id(inner(rep));
}

uint32_t sluice_replica_num_replicas_in_sync(const struct sluice_replica *rep)
{
    return train_replica_num_replicas_in_sync(inner(rep));
}

int sluice_replica_value(const struct sluice_replica *rep, const struct sluice_per_replica *pv,
                         struct sluice_value *out, struct sluice_error *err)
{
    if (out == NULL)
        return fail(err, SLUICE_EINVAL, "replica value: nowhere to put it (out is NULL)");
    const struct train_value *v = pv != NULL ? train_replica_value(inner(rep), pv->pv) : NULL;
    if (v == NULL)
        return fail(err, SLUICE_EINVAL, "replica %d: %s", train_replica_id(inner(rep)),
                    pv == NULL ? "no per-replica value" : "a per-replica value of another number of replicas");
    to_public(v, pv->dtype, out);
    return done(err);
}

int sluice_replica_set(struct sluice_replica *rep, struct sluice_per_replica *pv, int rank, const int64_t *dims,
                       float **data, struct sluice_error *err)
{
    int id = train_replica_id(inner(rep));
    if (pv == NULL || data == NULL || (rank > 0 && dims == NULL))
        return fail(err, SLUICE_EINVAL, "replica %d: set: %s", id,
                    pv == NULL     ? "no per-replica value"
                    : data == NULL ? "nowhere to put the data"
                                   : "no dims");
    if (pv->replicas != train_replica_num_replicas_in_sync(inner(rep)))
        return fail(err, SLUICE_EINVAL, "replica %d: set: a per-replica value of %u replicas", id, pv->replicas);
    struct sl_error e = {0};
    return train_per_replica_set(pv->pv, id, rank, dims, data, &e) != 0 ? out_error(err, &e) : done(err);
}

int sluice_replica_all_reduce(struct sluice_replica *rep, enum sluice_reduce_op op, float *buf, size_t n,
                              struct sluice_error *err)
{
    if (buf == NULL && n > 0)
        return fail(err, SLUICE_EINVAL, "replica %d: all_reduce: no buffer for %zu values",
                    train_replica_id(inner(rep)), n);
    struct sl_error e = {0};
    return train_replica_all_reduce(inner(rep), (enum train_reduce_op)op, buf, n, &e) != 0 ? out_error(err, &e)
                                                                                           : done(err);
}

/* --- reduce --- */

int sluice_strategy_reduce(struct sluice_strategy *s, enum sluice_reduce_op op, const struct sluice_per_replica *pv,
                           int axis, struct sluice_value *out, size_t capacity, struct sluice_error *err)
{
    if (s == NULL || pv == NULL || out == NULL)
        return fail(err, SLUICE_EINVAL, "reduce: %s", s == NULL ? "no strategy" : pv == NULL ? "no value" : "no out");
    if (op != SLUICE_REDUCE_SUM && op != SLUICE_REDUCE_MEAN)
        return fail(err, SLUICE_EINVAL, "reduce: unknown reduce op %d (SUM or MEAN)", (int)op);
    if (axis != SLUICE_AXIS_NONE && axis != 0)
        return fail(err, SLUICE_EINVAL, "reduce: axis %d (SLUICE_AXIS_NONE or 0)", axis);
    if (pv->replicas != train_strategy_replicas(s->s))
        return fail(err, SLUICE_EINVAL, "reduce: a value of %u replicas for a strategy of %u", pv->replicas,
                    train_strategy_replicas(s->s));
    const struct train_value *vals;
    size_t R = train_per_replica_local_results(pv->pv, &vals);
    struct sl_error e = {0};
    struct train_value shape = {0};
    size_t count;
    if (train_reduce_shape(vals, R, axis, &shape, &e) != 0 || train_value_count(&shape, &count, &e) != 0)
        return out_error(err, &e);
    if (count > capacity || (count > 0 && out->data == NULL)) {
        char dims[128];
        train_value_format_shape(&shape, dims, sizeof dims);
        return fail(err, SLUICE_EINVAL, "reduce: the result %s has %zu elements, out has room for %zu", dims, count,
                    out->data == NULL ? 0 : capacity);
    }
    struct train_value r = {.data = out->data};
    if (train_strategy_reduce(s->s, (enum train_reduce_op)op, pv->pv, axis, &r, &e) != 0)
        return out_error(err, &e);
    to_public(&r, op == SLUICE_REDUCE_MEAN ? SLUICE_FLOAT32 : pv->dtype, out);
    return done(err);
}
