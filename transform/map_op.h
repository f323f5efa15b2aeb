/* map_op: what an op of the map stage is made of, for the files that
 * implement ops (map_ops.c: the tensor ops; map_plugin.c: plugins; the
 * image ops' run functions to come). Not for users of the map (map.h).
 *
 * An op is one row of the table in map.c:
 *
 *     {"one_hot", one_hot_keys, 0, parse_one_hot, spec_one_hot, run_one_hot, NULL, NULL}
 *
 *   name         the job's "op"
 *   keys         the op's argument keys besides "op" and "feature" (NULL-ended);
 *                any other key is refused as unknown
 *   random       1 when run draws from call->rng
 *   parse        fill op->a from the op's JSON object (a copy the parser may
 *                add defaults to, so the job writes them back); errors name
 *                "map[N].KEY" (map__why_arg)
 *   spec         the op's output spec from its input spec (name already
 *                copied into out); refuse an input it does not take
 *   run          map one element: in -> out, out's data in call->arena
 *                (map__arena_reserve); NULL: "not built into this feeder yet"
 *   thread_init / thread_free   per-thread state (call->thread); NULL: none
 *   plan_init / plan_free       per-plan state (call->shared), made when the
 *                plan is (a plugin's dlopen); NULL: none
 *
 * A run function allocates nothing per element but through the arena,
 * which grows to the largest output seen and is kept.
 */
#ifndef MAP_OP_H
#define MAP_OP_H

#include <stddef.h>
#include <stdint.h>

#include "map.h"
#include "sl_rng.h"

enum map_layout { MAP_LAYOUT_HWC = 0, MAP_LAYOUT_CHW = 1 };

/* One op as parsed: its arguments, per kind. */
struct map_op {
    const struct map_op_def *def;
    size_t index; /* its place in the list: map[index] */
    char feature[MAP_NAME_MAX];
    json_t *json; /* the op object with its defaults (owned) */
    union {
        struct {
            enum map_dtype dtype;
        } cast;
        struct {
            int64_t depth;
        } one_hot;
        struct {
            int64_t length;
            double pad;
            char mask[MAP_NAME_MAX]; /* "" when no mask */
            enum map_dtype mask_dtype;
        } pad;
        struct {
            int channels;
            int64_t max_pixels;
        } decode;
        struct {
            int64_t size[2]; /* height, width */
            double scale[2], ratio[2];
            int antialias;
        } crop; /* random_resized_crop, resize, center_crop */
        struct {
            double p;
        } flip;
        struct {
            double mean[4], std[4];
            int n;
            enum map_dtype dtype;
            enum map_layout layout;
        } norm;
        struct {
            char *path;      /* as given (owned) */
            char *args_json; /* the "args" object as compact JSON text (owned) */
        } plugin;
    } a;
};

struct map_arena {
    uint8_t *p;
    size_t cap;
    /* p is the caller's (the element's row in the piece): never grown or
     * freed; a reservation larger than it is taken from `own` instead */
    int borrowed;
    struct map_arena *own;
};

/* At least `bytes` of the arena (its old contents may be lost), aligned
 * as malloc's; NULL when out of memory. Grows by doubling, never shrinks.
 * A borrowed arena (the element's row in the piece, for the last op on a
 * feature) never grows: more than it holds comes from its op's own arena
 * (a plugin's capacity beyond its described size, say). */
void *map__arena_reserve(struct map_arena *a, size_t bytes);

/* What a run function gets besides the tensors. */
struct map_call {
    const struct map_op *op;
    const struct map_spec *in_spec, *out_spec; /* as derived at load */
    struct sl_rng rng;                         /* this op's stream for this element */
    struct map_arena *arena;                   /* the op's output memory on this thread */
    void *thread;                              /* thread_init's state, or NULL */
    void *shared;                              /* plan_init's state, or NULL */
    uint64_t seed;                             /* the stream's key as one word (a plugin's) */
    uint64_t element;
    struct map_tensor *mask; /* pad_or_truncate: its mask output (data in mask_arena) */
    struct map_arena *mask_arena;
    /* a decode_image fused into the next op (map.c): pass the encoded
     * image on untouched (pass, in decode_image's call); decode it here
     * with decode's arguments (decode, in the resize's or
     * random_resized_crop's call: its input is then the bytes scalar) */
    int pass;
    const struct map_op *decode;
};

typedef int (*map_parse_fn)(struct map_op *op, json_t *o, struct map_why *w);
typedef int (*map_spec_fn)(const struct map_op *op, void *shared, const struct map_spec *in, struct map_spec *out,
                           struct map_why *w);
typedef int (*map_run_fn)(struct map_call *call, const struct map_tensor *in, struct map_tensor *out,
                          struct sl_error *err);

struct map_op_def {
    const char *name;
    const char *const *keys;
    int random;
    map_parse_fn parse;
    map_spec_fn spec;
    map_run_fn run;
    int (*thread_init)(const struct map_op *op, void *shared, void **thread, struct sl_error *err);
    void (*thread_free)(const struct map_op *op, void *shared, void *thread);
    int (*plan_init)(const struct map_op *op, const char *base_dir, void **shared, struct map_why *w);
    void (*plan_free)(const struct map_op *op, void *shared);
};

/* Errors at load, naming "map[N].KEY" (or "map[N]" when key is NULL). */
int map__why_arg(struct map_why *w, const struct map_op *op, const char *key, const char *fmt, ...) SL_PRINTF(4, 5);
/* A value as the user wrote it (compact JSON, cut at 60 bytes). */
const char *map__got(const json_t *v, char *buf, size_t cap);

/* Argument readers: the value of key in o, or its default written into o
 * when absent (has_def). SL_EINVAL naming map[N].KEY otherwise. */
int map__arg_int(struct map_op *op, json_t *o, const char *key, int has_def, int64_t def, int64_t min, int64_t max,
                 int64_t *out, struct map_why *w);
int map__arg_num(struct map_op *op, json_t *o, const char *key, int has_def, double def, double min, double max,
                 double *out, struct map_why *w);
int map__arg_bool(struct map_op *op, json_t *o, const char *key, int def, int *out, struct map_why *w);
/* A list of n integers in [min, max] ("size"). */
int map__arg_ints(struct map_op *op, json_t *o, const char *key, size_t n, int64_t min, int64_t max, int64_t *out,
                  struct map_why *w);
/* "int64", "float32" or "uint8" */
int map__arg_dtype(struct map_op *op, json_t *o, const char *key, int has_def, enum map_dtype def, enum map_dtype *out,
                   struct map_why *w);

/* The ops of map_ops.c (tensor ops), map_image.c (image ops' parse and
 * spec) and map_plugin.c. */
extern const struct map_op_def map__op_cast, map__op_one_hot, map__op_pad_or_truncate;
extern const struct map_op_def map__op_decode_image, map__op_random_resized_crop, map__op_resize, map__op_center_crop,
    map__op_random_flip, map__op_normalize;
extern const struct map_op_def map__op_plugin;

#endif
