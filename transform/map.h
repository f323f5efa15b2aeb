/* map: the job's map stage (docs/map.md), a list of ops applied per
 * element after its record is decoded and before the piece is laid out.
 *
 * Three objects, one per lifetime:
 *
 *     map_pipeline_parse(&p, json, &why);     the job key, checked op by op
 *     map_plan_create(&plan, p, in, nin, dir, 0, &why);
 *                                             resolved against the features:
 *                                             each op's input and output spec,
 *                                             plugins loaded; read-only after
 *     map_runner_create(&r, plan, &err);      one per executor thread: its
 *     map_runner_run(r, &key, in, out, &err); arenas and per-thread states
 *
 * Each op works on one feature in place (its name stays; dtype and shape
 * change); pad_or_truncate also makes a mask feature, which follows the
 * job's features in the order of the ops that make them. Every feature the
 * map touches leaves it with a fixed shape (map_spec_fixed): the map never
 * makes ragged tensors, and a pipeline whose output would depend on the
 * data is refused when the plan is made, naming the op and the feature.
 *
 * Randomness: an op draws only from its stream sl_rng_key(seed, epoch,
 * element, op index) (sl_rng.h): the same element gets the same draws on
 * any feeder, thread, takeover or resume.
 *
 * Errors at load (map_why) name the op and the key as the job file does:
 * key "map[2].size", text " must be two integers >= 1 (got [0, 224])".
 * Errors per element (sl_error) read "map[N] OP: what"; the caller adds
 * the element id and the record's file and offset.
 *
 * Adding an op: one row in map.c's op table (map_op.h says what each
 * function of a row does) and its functions.
 *
 * Thread-safe: a pipeline and a plan are read-only once made; a runner has
 * one owner.
 */
#ifndef MAP_H
#define MAP_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "sl_error.h"

/* The wire's dtype numbers (sl_wire.h, feed_assemble.h). float16 and
 * bfloat16 (2 bytes a value, sl_half.h) come only out of normalize and
 * cast. */
enum map_dtype {
    MAP_DT_INT64 = 0,
    MAP_DT_FLOAT32 = 1,
    MAP_DT_BYTES = 2,
    MAP_DT_UINT8 = 3,
    MAP_DT_FLOAT16 = 4,
    MAP_DT_BFLOAT16 = 5
};

#define MAP_MAX_RANK 8
#define MAP_DIM_DATA (-1) /* a dimension that depends on the data (a decoded image's height) */
#define MAP_MAX_OPS 64
#define MAP_NAME_MAX 128

/* A feature's spec: dtype and per-element shape. varlen: a variable-length
 * list of values (rank 1, shape unused). */
struct map_spec {
    char name[MAP_NAME_MAX];
    enum map_dtype dtype;
    int varlen;
    int rank;
    int64_t shape[MAP_MAX_RANK]; /* >= 0, or MAP_DIM_DATA */
};

/* 1 when every element has the same shape: not varlen, no MAP_DIM_DATA. */
int map_spec_fixed(const struct map_spec *s);
/* Values per element of a fixed spec (the product of its shape). */
uint64_t map_spec_count(const struct map_spec *s);
size_t map_dtype_size(enum map_dtype t); /* bytes per value; 1 for bytes */
const char *map_dtype_name(enum map_dtype t);
/* "float32 [3, 224, 224]", "int64 [?]" (varlen), "uint8 [?, ?, 3]" */
const char *map_spec_describe(const struct map_spec *s, char *buf, size_t cap);

/* One element's value of a feature: `bytes` bytes at `data` (borrowed).
 * Fixed and variable-length numeric features: the values, shape[0] of a
 * varlen one their count; a scalar bytes feature: its one value's bytes
 * (rank 0). */
struct map_tensor {
    enum map_dtype dtype;
    int rank;
    int64_t shape[MAP_MAX_RANK];
    const void *data;
    size_t bytes;
};

/* Why the job's map is refused: the key ("map[2].size"; "map" for the
 * whole list) and the text after it (" must be ..." or ": ..."). unknown:
 * the key does not exist (the job file says "unknown key 'map[2].sizee'"). */
struct map_why {
    int unknown;
    char key[160];
    char text[640];
};

struct map_pipeline;

/* Parse the job key's value: a list of op objects, each checked (its op,
 * feature and arguments; unknown keys refused). Nothing about features is
 * known yet (map_plan_create checks those). 0, SL_ENOMEM, or SL_EINVAL with
 * *w filled; *out NULL on error. */
int map_pipeline_parse(struct map_pipeline **out, const json_t *v, struct map_why *w) SL_MUST_CHECK;
/* The list as the job file writes it back, every default written out
 * (loads back to the same pipeline). NULL when out of memory. */
json_t *map_pipeline_to_json(const struct map_pipeline *p);
size_t map_pipeline_nops(const struct map_pipeline *p);
/* 1 when some op draws random numbers (a plugin counts as random). */
int map_pipeline_random(const struct map_pipeline *p);
void map_pipeline_free(struct map_pipeline *p);

struct map_plan;

#define MAP_PLAN_SPECS_ONLY \
    1u /* derive the specs even where an op is not built into this feeder yet (the
                                * plan then cannot run: map_runner_create refuses it) */

/* Resolve pipeline p (borrowed: it must outlive the plan) against the
 * input features in[0..nin) (copied): each op's feature found, its input
 * checked, its output spec derived; plugins loaded (a relative path is
 * relative to base_dir, the job file's directory; NULL: the current
 * directory) and their states created. Refused (SL_EINVAL, *w): a feature
 * that does not exist, an input an op does not take, a touched feature
 * whose output shape is not fixed, a mask that names an existing feature,
 * an op not built into this feeder (unless MAP_PLAN_SPECS_ONLY), a plugin
 * that cannot be loaded or says no. */
int map_plan_create(struct map_plan **out, const struct map_pipeline *p, const struct map_spec *in, size_t nin,
                    const char *base_dir, unsigned flags, struct map_why *w) SL_MUST_CHECK;
void map_plan_destroy(struct map_plan *pl);

/* The features leaving the map: the input features in their order (those
 * the map touches with their new specs), then the masks. Borrowed. */
const struct map_spec *map_plan_out(const struct map_plan *pl, size_t *n);
/* The input feature output feature i comes from; nin for a mask. */
size_t map_plan_out_source(const struct map_plan *pl, size_t i);
/* 1 when some op writes output feature i. */
int map_plan_out_touched(const struct map_plan *pl, size_t i);
/* Op i's spec of its feature after it ran (i < nops). */
const struct map_spec *map_plan_op_out(const struct map_plan *pl, size_t i);
size_t map_plan_nops(const struct map_plan *pl);
/* "map[3] one_hot" */
const char *map_plan_op_label(const struct map_plan *pl, size_t i, char *buf, size_t cap);

/* What an element's streams are keyed by, besides the op index. */
struct map_key {
    uint64_t seed;    /* the job's shuffle.seed */
    uint64_t epoch;   /* the element's epoch (0-based) */
    uint64_t element; /* the element id: its record's place in the job's files (docs/map.md) */
};

struct map_runner;

/* A runner for one thread: an arena per op (sized at create for fixed
 * outputs, grown and kept for the rest), the ops' per-thread states. */
int map_runner_create(struct map_runner **out, const struct map_plan *pl, struct sl_error *err) SL_MUST_CHECK;
void map_runner_destroy(struct map_runner *r);

/* Map one element. in[0..nin): its input features (the plan's input
 * order); out[0..nout): the output features (map_plan_out's order), views
 * into in or into the runner's arenas, valid until the next call. Errors
 * read "map[N] OP: what" (SL_EINVAL or SL_ECORRUPT for bad data, SL_ENOMEM). */
int map_runner_run(struct map_runner *r, const struct map_key *key, const struct map_tensor *in, struct map_tensor *out,
                   struct sl_error *err) SL_MUST_CHECK;
/* map_runner_run, with a destination per output feature (dst[i] for
 * output i, NULL: none; dst itself may be NULL): the last op on a fixed
 * feature writes its output there (exactly the feature's bytes) instead of
 * into its arena, so that out[i].data == dst[i] and the caller copies
 * nothing. An op that passes its input on (a flip not drawn) leaves
 * out[i].data elsewhere: compare before copying. */
int map_runner_run_into(struct map_runner *r, const struct map_key *key, const struct map_tensor *in,
                        struct map_tensor *out, void *const *dst, struct sl_error *err) SL_MUST_CHECK;
/* Thread CPU ns op i took so far in this runner (each op is timed every
 * 8th element and scaled up). */
uint64_t map_runner_op_ns(const struct map_runner *r, size_t i);

#endif
