/* libsluice-strategy's public API (trainer/include/sluice/strategy.h),
 * linked against the shared library as a trainer author's program is:
 * the seed pages' values from hand-made pieces (unaligned data, as the
 * client promises none), and every hostile input refused with its code
 * and exact message: options, dtypes, capacities, pieces that do not add
 * up, integers float32 cannot hold, value functions and step functions
 * that fail or misbehave, reductions with a bad axis, op, shape or room. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sl_test.h"
#include "sluice/strategy.h"

static struct sluice_strategy *make(uint32_t replicas)
{
    struct sluice_strategy_options o = {.replicas = replicas};
    struct sluice_strategy *s = NULL;
    struct sluice_error err;
    ck_assert_int_eq(sluice_strategy_create(&s, &o, &err), SLUICE_OK);
    ck_assert_int_eq(err.code, SLUICE_OK);
    return s;
}

static void expect(int rc, const struct sluice_error *err, int code, const char *msg)
{
    ck_assert_int_eq(rc, code);
    ck_assert_int_eq(err->code, code);
    ck_assert_str_eq(err->message, msg);
}

START_TEST(test_create)
{
    struct sluice_strategy *s = (struct sluice_strategy *)1;
    struct sluice_error err;
    struct sluice_strategy_options o = {.replicas = 2000};
    expect(sluice_strategy_create(&s, &o, &err), &err, SLUICE_EINVAL, "strategy: 2000 replicas (at most 1024)");
    ck_assert_ptr_null(s);
    expect(sluice_strategy_create(NULL, &o, &err), &err, SLUICE_EINVAL, "strategy: nowhere to put it (out is NULL)");
    ck_assert_int_eq(sluice_strategy_create(&s, NULL, NULL), SLUICE_OK); /* NULL options: one replica; NULL err */
    ck_assert_uint_eq(sluice_strategy_replicas(s), 1);
    ck_assert_uint_eq(sluice_strategy_num_replicas_in_sync(s), 1);
    sluice_strategy_destroy(s);
    sluice_strategy_destroy(NULL);
    sluice_per_replica_destroy(NULL);
    ck_assert_uint_eq(sluice_strategy_replicas(NULL), 0);
}
END_TEST

START_TEST(test_value_elements)
{
    struct sluice_value v = {.rank = 0};
    ck_assert_int_eq(sluice_value_elements(&v), 1);
    v = (struct sluice_value){.rank = 2, .dims = {3, 4}};
    ck_assert_int_eq(sluice_value_elements(&v), 12);
    v = (struct sluice_value){.rank = 2, .dims = {0, 4}};
    ck_assert_int_eq(sluice_value_elements(&v), 0);
    v = (struct sluice_value){.rank = 9};
    ck_assert_int_eq(sluice_value_elements(&v), -1);
    v = (struct sluice_value){.rank = -1};
    ck_assert_int_eq(sluice_value_elements(&v), -1);
    v = (struct sluice_value){.rank = 1, .dims = {-2}};
    ck_assert_int_eq(sluice_value_elements(&v), -1);
    v = (struct sluice_value){.rank = 3, .dims = {INT64_C(1) << 40, INT64_C(1) << 40, 2}};
    ck_assert_int_eq(sluice_value_elements(&v), -1);
    ck_assert_int_eq(sluice_value_elements(NULL), -1);
}
END_TEST

START_TEST(test_per_replica_create)
{
    struct sluice_strategy *s = make(3);
    struct sluice_per_replica *pv = (struct sluice_per_replica *)1;
    struct sluice_error err;
    expect(sluice_per_replica_create(&pv, s, 4, SLUICE_BYTES, &err), &err, SLUICE_EINVAL,
           "per-replica value: dtype 2 (float32, int64 or uint8)");
    ck_assert_ptr_null(pv);
    expect(sluice_per_replica_create(&pv, s, 0, SLUICE_FLOAT32, &err), &err, SLUICE_EINVAL,
           "per-replica value: capacity 0 (at least 1 element)");
    ck_assert_int_eq(sluice_per_replica_create(&pv, s, SIZE_MAX, SLUICE_FLOAT32, &err), SLUICE_EINVAL);
    ck_assert_msg(strstr(err.message, "is too large") != NULL, "%s", err.message);
    expect(sluice_per_replica_create(&pv, NULL, 4, SLUICE_FLOAT32, &err), &err, SLUICE_EINVAL,
           "per-replica value: no strategy");
    ck_assert_int_eq(sluice_per_replica_create(&pv, s, 4, SLUICE_INT64, &err), SLUICE_OK);
    struct sluice_value vals[4];
    ck_assert_uint_eq(sluice_per_replica_local_results(pv, vals, 4), 3);
    for (int r = 0; r < 3; r++) {
        ck_assert_int_eq(vals[r].dtype, SLUICE_INT64);
        ck_assert_int_eq(vals[r].rank, 0);
        ck_assert_float_eq(vals[r].data[0], 0.0f);
    }
    ck_assert_uint_eq(sluice_per_replica_local_results(pv, NULL, 0), 3);
    ck_assert_uint_eq(sluice_per_replica_local_results(NULL, vals, 4), 0);
    sluice_per_replica_destroy(pv);
    sluice_strategy_destroy(s);
}
END_TEST

/* Two pieces (replicas 0 and 1), each with a float32 "x" and an int64 "id"
 * whose data sit one byte off alignment. */
struct step {
    unsigned char buf[2][64];
    int64_t shape[2][2][SLUICE_VALUE_MAX_RANK + 1];
    struct sluice_tensor t[2][2];
    struct sluice_piece p[2];
};

static void make_step(struct step *st, const float *x, const int64_t *id)
{
    memset(st, 0, sizeof *st);
    for (int r = 0; r < 2; r++) {
        memcpy(st->buf[r] + 1, &x[r], 4);
        memcpy(st->buf[r] + 9, &id[r], 8);
        st->shape[r][0][0] = st->shape[r][1][0] = 1;
        st->t[r][0] = (struct sluice_tensor){.name = "x",
                                             .dtype = SLUICE_FLOAT32,
                                             .rank = 1,
                                             .shape = st->shape[r][0],
                                             .data = st->buf[r] + 1,
                                             .bytes = 4};
        st->t[r][1] = (struct sluice_tensor){.name = "id",
                                             .dtype = SLUICE_INT64,
                                             .rank = 1,
                                             .shape = st->shape[r][1],
                                             .data = st->buf[r] + 9,
                                             .bytes = 8};
        st->p[r] = (struct sluice_piece){.replica = (uint32_t)r, .rows = 1, .ntensors = 2, .tensors = st->t[r]};
    }
}

START_TEST(test_distribute_step)
{
    struct sluice_strategy *s = make(2);
    struct step st;
    const float x[2] = {5.0f, 6.0f};
    const int64_t id[2] = {-16777216, 16777216};
    make_step(&st, x, id);
    struct sluice_per_replica *pv;
    struct sluice_error err;
    ck_assert_int_eq(sluice_strategy_distribute_step(&pv, s, st.p, 2, "x", &err), SLUICE_OK);
    struct sluice_value v[2];
    ck_assert_uint_eq(sluice_per_replica_local_results(pv, v, 2), 2);
    for (int r = 0; r < 2; r++) {
        ck_assert_int_eq(v[r].dtype, SLUICE_FLOAT32);
        ck_assert_int_eq(v[r].rank, 1);
        ck_assert_int_eq(v[r].dims[0], 1);
        ck_assert_float_eq(v[r].data[0], x[r]);
    }
    float sum = -1;
    struct sluice_value out = {.data = &sum};
    ck_assert_int_eq(sluice_strategy_reduce(s, SLUICE_REDUCE_SUM, pv, 0, &out, 1, &err), SLUICE_OK);
    ck_assert_float_eq(sum, 11.0f);
    ck_assert_int_eq(out.rank, 0);
    sluice_per_replica_destroy(pv);
    /* int64 within 2^24: exact, integers */
    ck_assert_int_eq(sluice_strategy_distribute_step(&pv, s, st.p, 2, "id", &err), SLUICE_OK);
    ck_assert_uint_eq(sluice_per_replica_local_results(pv, v, 2), 2);
    ck_assert_int_eq(v[0].dtype, SLUICE_INT64);
    ck_assert_float_eq(v[0].data[0], -16777216.0f);
    ck_assert_float_eq(v[1].data[0], 16777216.0f);
    sluice_per_replica_destroy(pv);

    pv = (struct sluice_per_replica *)1;
    expect(sluice_strategy_distribute_step(&pv, s, st.p, 1, "x", &err), &err, SLUICE_EINVAL,
           "distribute_step: 1 pieces for 2 replicas (one step: one piece each)");
    ck_assert_ptr_null(pv);
    expect(sluice_strategy_distribute_step(&pv, s, NULL, 2, "x", &err), &err, SLUICE_EINVAL,
           "distribute_step: 0 pieces for 2 replicas (one step: one piece each)");
    expect(sluice_strategy_distribute_step(&pv, s, st.p, 2, NULL, &err), &err, SLUICE_EINVAL,
           "distribute_step: no tensor name");
    expect(sluice_strategy_distribute_step(&pv, s, st.p, 2, "image", &err), &err, SLUICE_EINVAL,
           "distribute_step: replica 0's piece has no tensor 'image' (it has 'x', 'id')");
    /* beyond 2^24: refused, named */
    const int64_t big[2] = {0, 16777217};
    make_step(&st, x, big);
    expect(sluice_strategy_distribute_step(&pv, s, st.p, 2, "id", &err), &err, SLUICE_EINVAL,
           "distribute_step: replica 1's 'id' element 0 is 16777217, beyond 2^24 (not exact as float32)");
    ck_assert_ptr_null(pv);
    /* bytes that do not match the shape, data missing, a bad rank or dim */
    make_step(&st, x, id);
    st.t[1][0].bytes = 3;
    expect(sluice_strategy_distribute_step(&pv, s, st.p, 2, "x", &err), &err, SLUICE_EINVAL,
           "distribute_step: replica 1's tensor 'x' holds 3 bytes, not its shape's");
    make_step(&st, x, id);
    st.t[0][0].data = NULL;
    expect(sluice_strategy_distribute_step(&pv, s, st.p, 2, "x", &err), &err, SLUICE_EINVAL,
           "distribute_step: replica 0's tensor 'x' holds 4 bytes, not its shape's");
    make_step(&st, x, id);
    st.shape[0][0][0] = -1;
    expect(sluice_strategy_distribute_step(&pv, s, st.p, 2, "x", &err), &err, SLUICE_EINVAL,
           "distribute_step: replica 0's tensor 'x' holds 4 bytes, not its shape's");
    make_step(&st, x, id);
    st.t[0][0].rank = 9;
    expect(sluice_strategy_distribute_step(&pv, s, st.p, 2, "x", &err), &err, SLUICE_EINVAL,
           "distribute_step: replica 0's tensor 'x' has rank 9 (0..8)");
    make_step(&st, x, id);
    st.t[1][0].dtype = SLUICE_BYTES;
    expect(sluice_strategy_distribute_step(&pv, s, st.p, 2, "x", &err), &err, SLUICE_EINVAL,
           "distribute_step: tensor 'x' is bytes (float32, int64 or uint8 values only)");
    make_step(&st, x, id);
    st.t[1][0].dtype = SLUICE_UINT8;
    expect(sluice_strategy_distribute_step(&pv, s, st.p, 2, "x", &err), &err, SLUICE_EINVAL,
           "distribute_step: replica 1's tensor 'x' holds 4 bytes, not its shape's");
    st.t[1][0].bytes = 1;
    expect(sluice_strategy_distribute_step(&pv, s, st.p, 2, "x", &err), &err, SLUICE_EINVAL,
           "distribute_step: tensor 'x' is uint8 in replica 1's piece, float32 in replica 0's");
    make_step(&st, x, id);
    st.p[1].tensors = NULL;
    expect(sluice_strategy_distribute_step(&pv, s, st.p, 2, "x", &err), &err, SLUICE_EINVAL,
           "distribute_step: replica 1's piece has 2 tensors but no array");
    /* an empty piece: a [0] value, and a MEAN over axis 0 of its rows only */
    make_step(&st, x, id);
    st.shape[1][0][0] = 0;
    st.t[1][0].bytes = 0;
    st.p[1].rows = 0;
    ck_assert_int_eq(sluice_strategy_distribute_step(&pv, s, st.p, 2, "x", &err), SLUICE_OK);
    ck_assert_uint_eq(sluice_per_replica_local_results(pv, v, 2), 2);
    ck_assert_int_eq(v[1].rank, 1);
    ck_assert_int_eq(v[1].dims[0], 0);
    ck_assert_int_eq(sluice_strategy_reduce(s, SLUICE_REDUCE_MEAN, pv, 0, &out, 1, &err), SLUICE_OK);
    ck_assert_float_eq(sum, 5.0f);
    ck_assert_int_eq(out.dtype, SLUICE_FLOAT32);
    sluice_per_replica_destroy(pv);
    sluice_strategy_destroy(s);
}
END_TEST

/* value functions: the seed's, and misbehaving ones */
static int vf_mixed(const struct sluice_value_context *vc, struct sluice_value *out, void *ctx,
                    struct sluice_error *err)
{
    (void)ctx, (void)err;
    out->dtype = vc->replica_id_in_sync_group == 0 ? SLUICE_FLOAT32 : SLUICE_INT64;
    return SLUICE_OK;
}

static int vf_half(const struct sluice_value_context *vc, struct sluice_value *out, void *ctx, struct sluice_error *err)
{
    (void)vc, (void)ctx, (void)err;
    out->dtype = SLUICE_INT64;
    out->data[0] = 2.5f;
    return SLUICE_OK;
}

static int vf_fails(const struct sluice_value_context *vc, struct sluice_value *out, void *ctx,
                    struct sluice_error *err)
{
    (void)out, (void)ctx;
    if (vc->replica_id_in_sync_group < 1)
        return SLUICE_OK;
    snprintf(err->message, sizeof err->message, "no shard for replica %d", vc->replica_id_in_sync_group);
    return SLUICE_ECORRUPT;
}

static int vf_positive(const struct sluice_value_context *vc, struct sluice_value *out, void *ctx,
                       struct sluice_error *err)
{
    (void)vc, (void)out, (void)ctx, (void)err;
    return 3;
}

static int vf_wide(const struct sluice_value_context *vc, struct sluice_value *out, void *ctx, struct sluice_error *err)
{
    (void)vc, (void)ctx, (void)err;
    out->rank = 1;
    out->dims[0] = 5;
    return SLUICE_OK;
}

static int vf_ids(const struct sluice_value_context *vc, struct sluice_value *out, void *ctx, struct sluice_error *err)
{
    (void)ctx, (void)err;
    out->dtype = SLUICE_INT64;
    out->rank = 1;
    out->dims[0] = 2;
    out->data[0] = (float)vc->replica_id_in_sync_group;
    out->data[1] = (float)vc->num_replicas_in_sync;
    return SLUICE_OK;
}

START_TEST(test_values_from_function)
{
    struct sluice_strategy *s = make(2);
    struct sluice_per_replica *pv = (struct sluice_per_replica *)1;
    struct sluice_error err;
    expect(sluice_strategy_values_from_function(&pv, s, 1, vf_mixed, NULL, &err), &err, SLUICE_EINVAL,
           "values_from_function: replica 1 (replica_id_in_sync_group 1): dtype int64, replica 0's is float32");
    ck_assert_ptr_null(pv);
    expect(sluice_strategy_values_from_function(&pv, s, 1, vf_half, NULL, &err), &err, SLUICE_EINVAL,
           "values_from_function: replica 0 (replica_id_in_sync_group 0): element 0 is 2.5, not a int64 value "
           "(integers within 2^24)");
    expect(sluice_strategy_values_from_function(&pv, s, 1, vf_fails, NULL, &err), &err, SLUICE_ECORRUPT,
           "values_from_function: replica 1 (replica_id_in_sync_group 1): no shard for replica 1");
    expect(sluice_strategy_values_from_function(&pv, s, 1, vf_positive, NULL, &err), &err, SLUICE_EINVAL,
           "values_from_function: replica 0 (replica_id_in_sync_group 0): value_fn returned 3 (not an error code)");
    expect(sluice_strategy_values_from_function(&pv, s, 4, vf_wide, NULL, &err), &err, SLUICE_EINVAL,
           "values_from_function: replica 0 (replica_id_in_sync_group 0): value [5] has 5 elements, over the "
           "capacity 4");
    expect(sluice_strategy_values_from_function(&pv, s, 0, vf_ids, NULL, &err), &err, SLUICE_EINVAL,
           "values_from_function: capacity 0 (at least 1 element)");
    expect(sluice_strategy_values_from_function(&pv, s, 1, NULL, NULL, &err), &err, SLUICE_EINVAL,
           "values_from_function: no value function");
    expect(sluice_strategy_values_from_function(&pv, NULL, 1, vf_ids, NULL, &err), &err, SLUICE_EINVAL,
           "values_from_function: no strategy");
    ck_assert_ptr_null(pv);
    ck_assert_int_eq(sluice_strategy_values_from_function(&pv, s, 2, vf_ids, NULL, &err), SLUICE_OK);
    struct sluice_value v[2];
    ck_assert_uint_eq(sluice_per_replica_local_results(pv, v, 2), 2);
    for (int r = 0; r < 2; r++) {
        ck_assert_int_eq(v[r].dtype, SLUICE_INT64);
        ck_assert_float_eq(v[r].data[0], (float)r);
        ck_assert_float_eq(v[r].data[1], 2.0f);
    }
    /* SUM keeps int64; MEAN is float32; axis None keeps the shape */
    float res[2] = {-1, -1};
    struct sluice_value out = {.data = res};
    ck_assert_int_eq(sluice_strategy_reduce(s, SLUICE_REDUCE_SUM, pv, SLUICE_AXIS_NONE, &out, 2, &err), SLUICE_OK);
    ck_assert_int_eq(out.dtype, SLUICE_INT64);
    ck_assert_int_eq(out.rank, 1);
    ck_assert_int_eq(out.dims[0], 2);
    ck_assert_float_eq(res[0], 1.0f);
    ck_assert_float_eq(res[1], 4.0f);
    ck_assert_int_eq(sluice_strategy_reduce(s, SLUICE_REDUCE_MEAN, pv, 0, &out, 2, &err), SLUICE_OK);
    ck_assert_int_eq(out.dtype, SLUICE_FLOAT32);
    ck_assert_int_eq(out.rank, 0);
    ck_assert_float_eq(res[0], 1.25f); /* (0 + 2 + 1 + 2) / 4 rows */
    /* the room for the result, a bad axis or op: refused, out unchanged */
    out = (struct sluice_value){.dtype = 99, .rank = 7, .data = res};
    expect(sluice_strategy_reduce(s, SLUICE_REDUCE_SUM, pv, SLUICE_AXIS_NONE, &out, 1, &err), &err, SLUICE_EINVAL,
           "reduce: the result [2] has 2 elements, out has room for 1");
    expect(sluice_strategy_reduce(s, SLUICE_REDUCE_SUM, pv, 1, &out, 2, &err), &err, SLUICE_EINVAL,
           "reduce: axis 1 (SLUICE_AXIS_NONE or 0)");
    expect(sluice_strategy_reduce(s, (enum sluice_reduce_op)3, pv, 0, &out, 2, &err), &err, SLUICE_EINVAL,
           "reduce: unknown reduce op 3 (SUM or MEAN)");
    out.data = NULL;
    expect(sluice_strategy_reduce(s, SLUICE_REDUCE_SUM, pv, 0, &out, 2, &err), &err, SLUICE_EINVAL,
           "reduce: the result [] has 1 elements, out has room for 0");
    ck_assert_int_eq(out.dtype, 99);
    ck_assert_int_eq(out.rank, 7);
    /* a value of another strategy's size */
    struct sluice_strategy *three = make(3);
    out.data = res;
    expect(sluice_strategy_reduce(three, SLUICE_REDUCE_SUM, pv, 0, &out, 2, &err), &err, SLUICE_EINVAL,
           "reduce: a value of 2 replicas for a strategy of 3");
    sluice_strategy_destroy(three);
    sluice_per_replica_destroy(pv);
    sluice_strategy_destroy(s);
}
END_TEST

/* step functions */
struct run_ctx {
    const struct sluice_per_replica *in;
    struct sluice_per_replica *out;
    int mode;
    /* mode 1: each field written by one replica only */
    int rc[4];
    char msg[4][SLUICE_ERROR_MAX];
    int rc_rank, rc_nodims, rc_value;
    char msg_rank[SLUICE_ERROR_MAX], msg_value[SLUICE_ERROR_MAX];
};

static int step(struct sluice_replica *rep, void *ctx, struct sluice_error *err)
{
    struct run_ctx *c = ctx;
    int id = sluice_replica_id(rep);
    float *d = NULL;
    struct sluice_value v;
    int rc;
    switch (c->mode) {
    case 0: /* the all-reduces: replica r holds r + 1 */
        rc = sluice_replica_set(rep, c->out, 1, (const int64_t[]){2}, &d, err);
        if (rc != SLUICE_OK)
            return rc;
        d[0] = d[1] = (float)(id + 1);
        rc = sluice_replica_all_reduce(rep, SLUICE_REDUCE_SUM, d, 1, err);
        return rc != SLUICE_OK ? rc : sluice_replica_all_reduce(rep, SLUICE_REDUCE_MEAN, d + 1, 1, err);
    case 1: /* what a replica is refused, each on its own (no collective) */
        c->rc[id] = sluice_replica_set(rep, c->out, 1, (const int64_t[]){5}, &d, err);
        snprintf(c->msg[id], sizeof c->msg[id], "%s", err->message);
        if (id == 0) {
            c->rc_rank = sluice_replica_set(rep, c->out, 9, (const int64_t[9]){0}, &d, err);
            snprintf(c->msg_rank, sizeof c->msg_rank, "%s", err->message);
        }
        if (id == 1)
            c->rc_nodims = sluice_replica_set(rep, c->out, 1, NULL, &d, err);
        if (id == 2) {
            c->rc_value = sluice_replica_value(rep, NULL, &v, err);
            snprintf(c->msg_value, sizeof c->msg_value, "%s", err->message);
        }
        return SLUICE_OK;
    case 2: /* replica 2 fails */
        if (id == 2) {
            snprintf(err->message, sizeof err->message, "ran out of patience");
            return SLUICE_ETIMEOUT;
        }
        return SLUICE_OK;
    default: /* a positive return */ return 7;
    }
}

START_TEST(test_run)
{
    struct sluice_strategy *s = make(3);
    struct sluice_error err;
    struct run_ctx c = {.mode = 0};
    ck_assert_int_eq(sluice_per_replica_create(&c.out, s, 4, SLUICE_FLOAT32, &err), SLUICE_OK);
    ck_assert_int_eq(sluice_strategy_run(s, step, &c, &err), SLUICE_OK);
    struct sluice_value v[3];
    ck_assert_uint_eq(sluice_per_replica_local_results(c.out, v, 3), 3);
    for (int r = 0; r < 3; r++) {
        ck_assert_int_eq(v[r].rank, 1);
        ck_assert_float_eq(v[r].data[0], 6.0f); /* 1 + 2 + 3 */
        ck_assert_float_eq(v[r].data[1], 2.0f); /* 6 / 3 */
    }
    c.mode = 1;
    ck_assert_int_eq(sluice_strategy_run(s, step, &c, &err), SLUICE_OK);
    ck_assert_int_eq(c.rc[1], SLUICE_EINVAL);
    ck_assert_str_eq(c.msg[1], "per-replica value: replica 1's value has 5 elements (capacity 4)");
    ck_assert_int_eq(c.rc_rank, SLUICE_EINVAL);
    ck_assert_str_eq(c.msg_rank, "value rank 9 is outside 0..8");
    ck_assert_int_eq(c.rc_nodims, SLUICE_EINVAL);
    ck_assert_int_eq(c.rc_value, SLUICE_EINVAL);
    ck_assert_str_eq(c.msg_value, "replica 2: no per-replica value");
    ck_assert_int_eq(sluice_strategy_run(s, NULL, &c, &err), SLUICE_EINVAL);
    ck_assert_str_eq(err.message, "run: no step function");
    /* a replica's error fails the run and breaks the strategy */
    c.mode = 2;
    expect(sluice_strategy_run(s, step, &c, &err), &err, SLUICE_ETIMEOUT, "replica 2: ran out of patience");
    c.mode = 0;
    ck_assert_int_eq(sluice_strategy_run(s, step, &c, &err), SLUICE_ETIMEOUT);
    ck_assert_msg(strstr(err.message, "replica 2: ran out of patience") != NULL, "%s", err.message);
    sluice_per_replica_destroy(c.out);
    sluice_strategy_destroy(s);

    s = make(2);
    c.mode = 3;
    ck_assert_int_eq(sluice_strategy_run(s, step, &c, &err), SLUICE_EINVAL);
    ck_assert_msg(strcmp(err.message, "replica 0: the step function returned 7 (not an error code)") == 0 ||
                      strcmp(err.message, "replica 1: the step function returned 7 (not an error code)") == 0,
                  "%s", err.message);
    sluice_strategy_destroy(s);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("sluice_strategy");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_create);
    tcase_add_test(tc, test_value_elements);
    tcase_add_test(tc, test_per_replica_create);
    tcase_add_test(tc, test_distribute_step);
    tcase_add_test(tc, test_values_from_function);
    tcase_add_test(tc, test_run);
    suite_add_tcase(s, tc);
    return s;
}
