/* sluice_values: the examples of TensorFlow's tf.distribute.DistributedValues
 * and MirroredStrategy pages, in C, against an installed sluice
 * (<sluice/strategy.h>, libsluice-strategy; <sluice/client.h>, libsluice).
 *
 * Worker 0 of 1 with 2 replicas: the first step of a feeder's job is the
 * per-replica value (the pages' dataset [5., 6., 7., 8.] batched by 2:
 * replica 0 gets [5.], replica 1 [6.]); then strategy.run, strategy.reduce,
 * experimental_local_results, experimental_distribute_values_from_function
 * and ReplicaContext.all_reduce, each printed as the pages print them
 * (floats as numpy prints them, integers as integers). The rest of the
 * stream is read to its end, so the feeder sees its worker done.
 *
 * Usage: sluice_values JOB TENSOR ENDPOINT...
 *
 * A job serving the pages' dataset (docs/strategy-api.md): a float32 .npy
 * array [5., 6., 7., 8.] (numpy: np.save("x.npy", np.array([5., 6., 7., 8.],
 * np.float32))) as feature "x", global batch size 2:
 *   {"name": "values", "format": "arrays", "global_batch_size": 2, "epochs": 1,
 *    "features": {"x": {"dtype": "float32", "array": "x.npy"}}}
 *   sluice-feeder --job values.json --listen ipc:///tmp/values.sock &
 *   sluice_values values x ipc:///tmp/values.sock
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include <sluice/client.h>
#include <sluice/strategy.h>

#define REPLICAS 2

static void die(const char *what, const struct sluice_error *err)
{
    fprintf(stderr, "sluice_values: %s: %s: %s\n", what, sluice_code_name(err->code), err->message);
    exit(1);
}

/* one element as numpy prints it: 5 (integers), 5. in an array, 5.0 alone */
static void print_element(int dtype, float v, int in_array)
{
    if (dtype != SLUICE_FLOAT32)
        printf("%lld", (long long)v);
    else if (v > -1e15f && v < 1e15f && v == (float)(long long)v)
        printf(in_array ? "%.0f." : "%.1f", (double)v);
    else
        printf("%.8g", (double)v);
}

static void print_dims(const struct sluice_value *v, int d, const float **p)
{
    printf("[");
    for (int64_t i = 0; i < v->dims[d]; i++) {
        if (i > 0)
            printf(", ");
        if (d + 1 < v->rank)
            print_dims(v, d + 1, p);
        else
            print_element(v->dtype, *(*p)++, 1);
    }
    printf("]");
}

static void print_value(const struct sluice_value *v)
{
    const float *p = v->data;
    if (v->rank == 0)
        print_element(v->dtype, v->data[0], 0);
    else
        print_dims(v, 0, &p);
}

/* PerReplica:{ 0: ..., 1: ... } */
static void print_per_replica(const struct sluice_per_replica *pv)
{
    struct sluice_value vals[REPLICAS];
    size_t n = sluice_per_replica_local_results(pv, vals, REPLICAS);
    printf("PerReplica:{\n");
    for (size_t r = 0; r < n && r < REPLICAS; r++) {
        printf("  %zu: ", r);
        print_value(&vals[r]);
        printf("%s\n", r + 1 < n ? "," : "");
    }
    printf("}\n");
}

/* (..., ...): experimental_local_results */
static void print_local_results(const struct sluice_per_replica *pv)
{
    struct sluice_value vals[REPLICAS];
    size_t n = sluice_per_replica_local_results(pv, vals, REPLICAS);
    printf("(");
    for (size_t r = 0; r < n && r < REPLICAS; r++) {
        if (r > 0)
            printf(", ");
        print_value(&vals[r]);
    }
    printf("%s)\n", n == 1 ? "," : "");
}

/* --- step functions (strategy.run) --- */

struct unary {
    const struct sluice_per_replica *in;
    struct sluice_per_replica *out;
    float add, mul;
};

/* input * mul + add, element-wise, into this replica's slot of out */
static int affine(struct sluice_replica *rep, void *ctx, struct sluice_error *err)
{
    struct unary *u = ctx;
    struct sluice_value in;
    float *out;
    int rc = sluice_replica_value(rep, u->in, &in, err);
    if (rc == SLUICE_OK)
        rc = sluice_replica_set(rep, u->out, in.rank, in.dims, &out, err);
    for (int64_t i = 0; rc == SLUICE_OK && i < sluice_value_elements(&in); i++)
        out[i] = in.data[i] * u->mul + u->add;
    return rc;
}

/* ctx.replica_id_in_sync_group, a scalar */
static int replica_id(struct sluice_replica *rep, void *ctx, struct sluice_error *err)
{
    struct unary *u = ctx;
    float *out;
    int rc = sluice_replica_set(rep, u->out, 0, NULL, &out, err);
    if (rc == SLUICE_OK)
        out[0] = (float)sluice_replica_id_in_sync_group(rep);
    return rc;
}

/* tf.distribute.get_replica_context().all_reduce("sum", input) */
static int all_reduce_sum(struct sluice_replica *rep, void *ctx, struct sluice_error *err)
{
    struct unary *u = ctx;
    struct sluice_value in;
    float *out;
    int rc = sluice_replica_value(rep, u->in, &in, err);
    if (rc == SLUICE_OK)
        rc = sluice_replica_set(rep, u->out, in.rank, in.dims, &out, err);
    int64_t n = sluice_value_elements(&in);
    for (int64_t i = 0; rc == SLUICE_OK && i < n; i++)
        out[i] = in.data[i];
    if (rc == SLUICE_OK)
        rc = sluice_replica_all_reduce(rep, SLUICE_REDUCE_SUM, out, (size_t)n, err);
    return rc;
}

/* --- value functions (experimental_distribute_values_from_function) --- */

static int constant_one(const struct sluice_value_context *vc, struct sluice_value *out, void *ctx,
                        struct sluice_error *err)
{
    (void)vc, (void)ctx, (void)err;
    out->data[0] = 1.0f; /* tf.constant(1.) */
    return SLUICE_OK;
}

static int from_array(const struct sluice_value_context *vc, struct sluice_value *out, void *ctx,
                      struct sluice_error *err)
{
    static const float array_value[3] = {3.0f, 2.0f, 1.0f}; /* np.array([3., 2., 1.]) */
    (void)ctx;
    if (vc->replica_id_in_sync_group >= 3) {
        snprintf(err->message, sizeof err->message, "array_value has 3 elements, no %d", vc->replica_id_in_sync_group);
        return SLUICE_EINVAL;
    }
    out->data[0] = array_value[vc->replica_id_in_sync_group];
    return SLUICE_OK;
}

static int num_in_sync(const struct sluice_value_context *vc, struct sluice_value *out, void *ctx,
                       struct sluice_error *err)
{
    (void)ctx, (void)err;
    out->dtype = SLUICE_INT64;
    out->data[0] = (float)vc->num_replicas_in_sync;
    return SLUICE_OK;
}

static int id_in_sync(const struct sluice_value_context *vc, struct sluice_value *out, void *ctx,
                      struct sluice_error *err)
{
    (void)ctx, (void)err;
    out->dtype = SLUICE_INT64;
    out->data[0] = (float)vc->replica_id_in_sync_group;
    return SLUICE_OK;
}

static struct sluice_per_replica *from_function(struct sluice_strategy *s, sluice_value_fn fn, const char *what)
{
    struct sluice_error err;
    struct sluice_per_replica *pv;
    if (sluice_strategy_values_from_function(&pv, s, 1, fn, NULL, &err) != SLUICE_OK)
        die(what, &err);
    return pv;
}

static struct sluice_per_replica *run(struct sluice_strategy *s, sluice_step_fn fn, const struct sluice_per_replica *in,
                                      int dtype, float add, float mul, const char *what)
{
    struct sluice_error err;
    struct unary u = {.in = in, .add = add, .mul = mul};
    if (sluice_per_replica_create(&u.out, s, 16, dtype, &err) != SLUICE_OK ||
        sluice_strategy_run(s, fn, &u, &err) != SLUICE_OK)
        die(what, &err);
    return u.out;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s JOB TENSOR ENDPOINT...\n", argv[0]);
        return 2;
    }
    struct sluice_error err;
    struct sluice_options o = {0};
    o.job = argv[1];
    o.replicas = REPLICAS;
    o.feeders = (const char *const *)&argv[3];
    o.nfeeders = (size_t)(argc - 3);
    struct sluice_client *c;
    if (sluice_client_open(&c, &o, &err) != SLUICE_OK)
        die("client", &err);
    struct sluice_strategy_options so = {.replicas = REPLICAS};
    struct sluice_strategy *s;
    if (sluice_strategy_create(&s, &so, &err) != SLUICE_OK)
        die("strategy", &err);

    /* dataset_iterator = iter(strategy.experimental_distribute_dataset(dataset)) */
    const struct sluice_piece *step;
    if (sluice_client_next_step(c, &step, &err) != SLUICE_OK)
        die("first step", &err);
    struct sluice_per_replica *dv;
    if (sluice_strategy_distribute_step(&dv, s, step, sluice_client_replicas(c), argv[2], &err) != SLUICE_OK)
        die("distribute_step", &err);
    printf("distributed_values = next(dataset_iterator)\n");
    print_per_replica(dv);

    struct sluice_per_replica *up = run(s, affine, dv, SLUICE_FLOAT32, 1.0f, 1.0f, "run(input + 1.0)");
    printf("strategy.run(lambda input: input + 1.0, args=(distributed_values,))\n");
    print_per_replica(up);

    float sum;
    struct sluice_value red = {.data = &sum};
    if (sluice_strategy_reduce(s, SLUICE_REDUCE_SUM, dv, 0, &red, 1, &err) != SLUICE_OK)
        die("reduce", &err);
    printf("strategy.reduce(SUM, distributed_values, axis=0)\n");
    print_value(&red);
    printf("\n");
    /* axis None: element-wise over the replicas, the shape kept; MEAN over
     * axis 0 divides by the rows of every replica */
    if (sluice_strategy_reduce(s, SLUICE_REDUCE_SUM, dv, SLUICE_AXIS_NONE, &red, 1, &err) != SLUICE_OK)
        die("reduce", &err);
    printf("strategy.reduce(SUM, distributed_values, axis=None)\n");
    print_value(&red);
    printf("\n");
    if (sluice_strategy_reduce(s, SLUICE_REDUCE_MEAN, dv, 0, &red, 1, &err) != SLUICE_OK)
        die("reduce", &err);
    printf("strategy.reduce(MEAN, distributed_values, axis=0)\n");
    print_value(&red);
    printf("\n");

    printf("strategy.experimental_local_results(distributed_values)\n");
    print_local_results(dv);

    struct sluice_per_replica *ids = run(s, replica_id, NULL, SLUICE_INT64, 0, 1, "run(replica_id_in_sync_group)");
    printf("strategy.run(lambda: get_replica_context().replica_id_in_sync_group)\n");
    print_per_replica(ids);

    struct sluice_per_replica *one = from_function(s, constant_one, "values_from_function(1.)");
    printf("experimental_local_results(values_from_function(lambda ctx: tf.constant(1.)))\n");
    print_local_results(one);
    struct sluice_per_replica *arr = from_function(s, from_array, "values_from_function(array_value)");
    printf("experimental_local_results(values_from_function(lambda ctx: array_value[ctx.replica_id_in_sync_group]))\n");
    print_local_results(arr);
    struct sluice_per_replica *nrs = from_function(s, num_in_sync, "values_from_function(num_replicas_in_sync)");
    printf("experimental_local_results(values_from_function(lambda ctx: ctx.num_replicas_in_sync))\n");
    print_local_results(nrs);
    struct sluice_per_replica *twice = run(s, affine, nrs, SLUICE_INT64, 0, 2, "run(input * 2)");
    printf("strategy.run(lambda input: input * 2, args=(values_from_function(num_replicas_in_sync),))\n");
    print_per_replica(twice);
    struct sluice_per_replica *gid = from_function(s, id_in_sync, "values_from_function(replica_id_in_sync_group)");
    struct sluice_per_replica *all = run(s, all_reduce_sum, gid, SLUICE_INT64, 0, 1, "run(all_reduce)");
    printf("strategy.run(lambda input: get_replica_context().all_reduce(\"sum\", input), "
           "args=(values_from_function(replica_id_in_sync_group),))\n");
    print_per_replica(all);

    /* the rest of the stream, so the feeder sees its worker done */
    int rc;
    uint64_t steps = 1;
    while ((rc = sluice_client_next_step(c, &step, &err)) == SLUICE_OK)
        steps++;
    if (rc != SLUICE_END)
        die("stream", &err);
    printf("steps %" PRIu64 "\n", steps);

    sluice_per_replica_destroy(all);
    sluice_per_replica_destroy(gid);
    sluice_per_replica_destroy(twice);
    sluice_per_replica_destroy(nrs);
    sluice_per_replica_destroy(arr);
    sluice_per_replica_destroy(one);
    sluice_per_replica_destroy(ids);
    sluice_per_replica_destroy(up);
    sluice_per_replica_destroy(dv);
    sluice_strategy_destroy(s);
    sluice_client_close(c);
    return 0;
}
