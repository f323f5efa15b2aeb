/* map: the op table, the pipeline's parse, the plan's resolution against
 * the features, and the per-thread runner (map.h).
 *
 * The plan keeps, per op, the index of the feature it works on among the
 * "current" features (the input features, then the masks made so far),
 * its input and output specs, and its per-plan state. A runner walks the
 * ops over a per-element array of current tensors: each op reads its
 * feature's tensor and replaces it with its output, in the op's arena.
 */
#include "map.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "map_op.h"
#include "sl_alloc.h"
#include "sl_clock.h"

/* The ops. A new op: its row (a struct map_op_def, map_op.h) and one line here. */
static const struct map_op_def *const ops[] = {
    &map__op_decode_image,
    &map__op_random_resized_crop,
    &map__op_resize,
    &map__op_center_crop,
    &map__op_random_flip,
    &map__op_normalize,
    &map__op_cast,
    &map__op_one_hot,
    &map__op_pad_or_truncate,
    &map__op_plugin,
};
#define NOPS_KNOWN (sizeof ops / sizeof ops[0])

#define MAX_FEATURES (2 * MAP_MAX_OPS + 64)

struct map_pipeline {
    size_t n;
    struct map_op op[]; /* n */
};

/* ---- specs ---- */

int map_spec_fixed(const struct map_spec *s)
{
    if (s->varlen)
        return 0;
    for (int i = 0; i < s->rank; i++)
        if (s->shape[i] < 0)
            return 0;
    return 1;
}

uint64_t map_spec_count(const struct map_spec *s)
{
    uint64_t n = 1;
    for (int i = 0; i < s->rank; i++)
        n *= (uint64_t)(s->shape[i] < 0 ? 0 : s->shape[i]);
    return n;
}

size_t map_dtype_size(enum map_dtype t)
{
    return t == MAP_DT_INT64 ? 8 : t == MAP_DT_FLOAT32 ? 4 : t == MAP_DT_FLOAT16 || t == MAP_DT_BFLOAT16 ? 2 : 1;
}

const char *map_dtype_name(enum map_dtype t)
{
    switch (t) {
    case MAP_DT_INT64: return "int64";
    case MAP_DT_FLOAT32: return "float32";
    case MAP_DT_BYTES: return "bytes";
    case MAP_DT_UINT8: return "uint8";
    case MAP_DT_FLOAT16: return "float16";
    case MAP_DT_BFLOAT16: return "bfloat16";
    }
    return "?";
}

const char *map_spec_describe(const struct map_spec *s, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "%s [", map_dtype_name(s->dtype));
    if (s->varlen) {
        snprintf(buf + (n < cap ? n : cap), n < cap ? cap - n : 0, "?] (variable-length)");
        return buf;
    }
    for (int i = 0; i < s->rank && n < cap; i++) {
        if (s->shape[i] < 0)
            n += (size_t)snprintf(buf + n, cap - n, "%s?", i ? ", " : "");
        else
            n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", (long long)s->shape[i]);
    }
    if (n < cap)
        snprintf(buf + n, cap - n, "]");
    return buf;
}

/* ---- errors and argument readers (map_op.h) ---- */

const char *map__got(const json_t *v, char *buf, size_t cap)
{
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_REAL_PRECISION(15));
    if (s == NULL) {
        snprintf(buf, cap, "?");
        return buf;
    }
    if (strlen(s) > 60)
        snprintf(buf, cap, "%.57s...", s);
    else
        snprintf(buf, cap, "%s", s);
    free(s); /* jansson's allocator */
    return buf;
}

int map__why_arg(struct map_why *w, const struct map_op *op, const char *key, const char *fmt, ...)
{
    va_list ap;
    w->unknown = 0;
    if (key != NULL)
        snprintf(w->key, sizeof w->key, "map[%zu].%s", op->index, key);
    else
        snprintf(w->key, sizeof w->key, "map[%zu]", op->index);
    va_start(ap, fmt);
    vsnprintf(w->text, sizeof w->text, fmt, ap);
    va_end(ap);
    return SL_EINVAL;
}

/* Write a default into the op's JSON (so the job writes it back). */
static int put_default(json_t *o, const char *key, json_t *v)
{
    return v != NULL && json_object_set_new(o, key, v) == 0 ? 0 : SL_ENOMEM;
}

int map__arg_int(struct map_op *op, json_t *o, const char *key, int has_def, int64_t def, int64_t min, int64_t max,
                 int64_t *out, struct map_why *w)
{
    json_t *v = json_object_get(o, key);
    char g[80];
    if (v == NULL && has_def) {
        *out = def;
        return put_default(o, key, json_integer((json_int_t)def));
    }
    if (v == NULL)
        return map__why_arg(w, op, key, " is required (an integer from %lld to %lld)", (long long)min, (long long)max);
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
        return map__why_arg(w, op, key, " must be an integer from %lld to %lld (got %s)", (long long)min,
                            (long long)max, map__got(v, g, sizeof g));
    *out = (int64_t)json_integer_value(v);
    return 0;
}

int map__arg_num(struct map_op *op, json_t *o, const char *key, int has_def, double def, double min, double max,
                 double *out, struct map_why *w)
{
    json_t *v = json_object_get(o, key);
    char g[80];
    if (v == NULL && has_def) {
        *out = def;
        return put_default(o, key, json_real(def));
    }
    if (v == NULL)
        return map__why_arg(w, op, key, " is required (a number from %g to %g)", min, max);
    double x = json_number_value(v);
    if (!json_is_number(v) || !(x >= min && x <= max)) /* NaN fails both */
        return map__why_arg(w, op, key, " must be a number from %g to %g (got %s)", min, max, map__got(v, g, sizeof g));
    *out = x;
    return 0;
}

int map__arg_bool(struct map_op *op, json_t *o, const char *key, int def, int *out, struct map_why *w)
{
    json_t *v = json_object_get(o, key);
    char g[80];
    if (v == NULL) {
        *out = def;
        return put_default(o, key, json_boolean(def));
    }
    if (!json_is_boolean(v))
        return map__why_arg(w, op, key, " must be true or false (got %s)", map__got(v, g, sizeof g));
    *out = json_is_true(v);
    return 0;
}

int map__arg_ints(struct map_op *op, json_t *o, const char *key, size_t n, int64_t min, int64_t max, int64_t *out,
                  struct map_why *w)
{
    json_t *v = json_object_get(o, key);
    char g[80];
    const char *count = n == 2 ? "two" : n == 3 ? "three" : "some";
    int ok = v != NULL && json_is_array(v) && json_array_size(v) == n;
    for (size_t i = 0; ok && i < n; i++) {
        json_t *e = json_array_get(v, i);
        ok = json_is_integer(e) && json_integer_value(e) >= min && json_integer_value(e) <= max;
        if (ok)
            out[i] = (int64_t)json_integer_value(e);
    }
    if (ok)
        return 0;
    if (v == NULL)
        return map__why_arg(w, op, key, " is required (%s integers from %lld to %lld)", count, (long long)min,
                            (long long)max);
    return map__why_arg(w, op, key, " must be %s integers from %lld to %lld (got %s)", count, (long long)min,
                        (long long)max, map__got(v, g, sizeof g));
}

static int dtype_parse(const char *s, enum map_dtype *out)
{
    if (strcmp(s, "int64") == 0)
        *out = MAP_DT_INT64;
    else if (strcmp(s, "float32") == 0)
        *out = MAP_DT_FLOAT32;
    else if (strcmp(s, "uint8") == 0)
        *out = MAP_DT_UINT8;
    else if (strcmp(s, "float16") == 0)
        *out = MAP_DT_FLOAT16;
    else if (strcmp(s, "bfloat16") == 0)
        *out = MAP_DT_BFLOAT16;
    else
        return SL_EINVAL;
    return 0;
}

int map__arg_dtype(struct map_op *op, json_t *o, const char *key, int has_def, enum map_dtype def, enum map_dtype *out,
                   struct map_why *w)
{
    json_t *v = json_object_get(o, key);
    char g[80];
    if (v == NULL && has_def) {
        *out = def;
        return put_default(o, key, json_string(map_dtype_name(def)));
    }
    if (v == NULL)
        return map__why_arg(w, op, key, " is required (int64, float32, uint8, float16 or bfloat16)");
    if (!json_is_string(v) || dtype_parse(json_string_value(v), out) != 0)
        return map__why_arg(w, op, key,
                            " must be \"int64\", \"float32\", \"uint8\", \"float16\" or \"bfloat16\" (got %s)",
                            map__got(v, g, sizeof g));
    return 0;
}

void *map__arena_reserve(struct map_arena *a, size_t bytes)
{
    if (bytes <= a->cap)
        return a->p;
    if (a->borrowed)
        return map__arena_reserve(a->own, bytes);
    size_t cap = a->cap ? a->cap : 256;
    while (cap < bytes) {
        if (cap > SIZE_MAX / 2)
            return NULL;
        cap *= 2;
    }
    uint8_t *p = sl_malloc(cap);
    if (p == NULL)
        return NULL;
    sl_free(a->p);
    a->p = p;
    a->cap = cap;
    return p;
}

/* ---- the pipeline ---- */

static const struct map_op_def *op_find(const char *name)
{
    for (size_t i = 0; i < NOPS_KNOWN; i++)
        if (strcmp(ops[i]->name, name) == 0)
            return ops[i];
    return NULL;
}

static int parse_op(struct map_op *op, const json_t *v, struct map_why *w)
{
    char g[80];
    if (!json_is_object(v)) {
        snprintf(w->key, sizeof w->key, "map[%zu]", op->index);
        snprintf(w->text, sizeof w->text, " must be an object {\"op\": ..., \"feature\": ...} (got %s)",
                 map__got(v, g, sizeof g));
        return SL_EINVAL;
    }
    json_t *name = json_object_get(v, "op"), *feature = json_object_get(v, "feature");
    if (name == NULL)
        return map__why_arg(w, op, "op", " is required");
    if (!json_is_string(name) || (op->def = op_find(json_string_value(name))) == NULL) {
        char list[256];
        size_t n = 0;
        for (size_t i = 0; i < NOPS_KNOWN && n < sizeof list; i++)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", ops[i]->name);
        return map__why_arg(w, op, "op", ": unknown op %s (expected %s)", map__got(name, g, sizeof g), list);
    }
    if (feature == NULL)
        return map__why_arg(w, op, "feature", " is required");
    if (!json_is_string(feature) || json_string_length(feature) == 0 || json_string_length(feature) >= MAP_NAME_MAX ||
        strlen(json_string_value(feature)) != json_string_length(feature))
        return map__why_arg(w, op, "feature", " must be a feature's name (got %s)", map__got(feature, g, sizeof g));
    snprintf(op->feature, sizeof op->feature, "%s", json_string_value(feature));
    const char *key;
    json_t *e;
    json_object_foreach((json_t *)v, key, e)
    {
        int known = strcmp(key, "op") == 0 || strcmp(key, "feature") == 0;
        for (const char *const *k = op->def->keys; !known && k != NULL && *k != NULL; k++)
            known = strcmp(*k, key) == 0;
        if (!known) {
            w->unknown = 1;
            snprintf(w->key, sizeof w->key, "map[%zu].%s", op->index, key);
            w->text[0] = '\0';
            return SL_EINVAL;
        }
    }
    if ((op->json = json_deep_copy(v)) == NULL)
        return SL_ENOMEM;
    return op->def->parse(op, op->json, w);
}

static void op_free(struct map_op *op)
{
    if (op->def == &map__op_plugin) {
        sl_free(op->a.plugin.path);
        sl_free(op->a.plugin.args_json);
    }
    json_decref(op->json);
}

int map_pipeline_parse(struct map_pipeline **out, const json_t *v, struct map_why *w)
{
    char g[80];
    *out = NULL;
    memset(w, 0, sizeof *w);
    if (!json_is_array(v) || json_array_size(v) > MAP_MAX_OPS) {
        snprintf(w->key, sizeof w->key, "map");
        snprintf(w->text, sizeof w->text, " must be a list of at most %d ops (got %s)", MAP_MAX_OPS,
                 map__got(v, g, sizeof g));
        return SL_EINVAL;
    }
    size_t n = json_array_size(v);
    struct map_pipeline *p = sl_calloc(1, sizeof *p + n * sizeof p->op[0]);
    if (p == NULL)
        return SL_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        p->op[i].index = i;
        p->n = i + 1;
        int rc = parse_op(&p->op[i], json_array_get(v, i), w);
        if (rc != 0) {
            map_pipeline_free(p);
            return rc;
        }
    }
    *out = p;
    return 0;
}

json_t *map_pipeline_to_json(const struct map_pipeline *p)
{
    json_t *a = json_array();
    for (size_t i = 0; a != NULL && p != NULL && i < p->n; i++)
        if (json_array_append_new(a, json_deep_copy(p->op[i].json)) != 0) {
            json_decref(a);
            a = NULL;
        }
    return a;
}

size_t map_pipeline_nops(const struct map_pipeline *p)
{
    return p ? p->n : 0;
}

int map_pipeline_random(const struct map_pipeline *p)
{
    for (size_t i = 0; p != NULL && i < p->n; i++)
        if (p->op[i].def->random)
            return 1;
    return 0;
}

void map_pipeline_free(struct map_pipeline *p)
{
    if (p == NULL)
        return;
    for (size_t i = 0; i < p->n; i++)
        op_free(&p->op[i]);
    sl_free(p);
}

/* ---- the plan ---- */

struct plan_op {
    const struct map_op *op;
    size_t feature; /* among the current features */
    size_t mask;    /* pad_or_truncate with a mask: the mask's place; else SIZE_MAX */
    struct map_spec in, out, mask_spec;
    void *shared;
    /* a decode_image followed on its feature by a resize or a
     * random_resized_crop hands that op the encoded image (pass) and the
     * op decodes only what it needs (decode: the decode_image op) */
    int pass;
    const struct map_op *decode;
    int last; /* the last op on its feature: with a destination, it writes there (map_runner_run_into) */
};

struct map_plan {
    const struct map_pipeline *p;
    size_t nin, nout;
    struct map_spec feat[MAX_FEATURES]; /* the output features (input ones, then masks) */
    int touched[MAX_FEATURES];
    struct plan_op op[MAP_MAX_OPS];
    int runnable;     /* every op has its run function */
    size_t not_built; /* else the first that has none */
};

static size_t feature_find(const struct map_plan *pl, const char *name)
{
    for (size_t i = 0; i < pl->nout; i++)
        if (strcmp(pl->feat[i].name, name) == 0)
            return i;
    return SIZE_MAX;
}

static int plan_op(struct map_plan *pl, size_t i, const char *base_dir, struct map_why *w)
{
    const struct map_op *op = &pl->p->op[i];
    struct plan_op *po = &pl->op[i];
    po->op = op;
    po->mask = SIZE_MAX;
    po->feature = feature_find(pl, op->feature);
    if (po->feature == SIZE_MAX)
        return map__why_arg(w, op, "feature", ": no feature '%s' (the job's features and the masks of earlier ops)",
                            op->feature);
    int rc = op->def->plan_init ? op->def->plan_init(op, base_dir, &po->shared, w) : 0;
    if (rc != 0)
        return rc;
    po->in = pl->feat[po->feature];
    memset(&po->out, 0, sizeof po->out);
    memcpy(po->out.name, po->in.name, sizeof po->out.name);
    if ((rc = op->def->spec(op, po->shared, &po->in, &po->out, w)) != 0)
        return rc;
    pl->feat[po->feature] = po->out;
    pl->touched[po->feature] = 1;
    if (op->def == &map__op_pad_or_truncate && op->a.pad.mask[0] != '\0') {
        if (feature_find(pl, op->a.pad.mask) != SIZE_MAX)
            return map__why_arg(w, op, "mask", ": a feature '%s' exists already (a mask is a new feature)",
                                op->a.pad.mask);
        if (pl->nout == MAX_FEATURES)
            return map__why_arg(w, op, "mask", ": too many features");
        struct map_spec *m = &pl->feat[pl->nout];
        memset(m, 0, sizeof *m);
        snprintf(m->name, sizeof m->name, "%s", op->a.pad.mask);
        m->dtype = op->a.pad.mask_dtype;
        m->rank = 1;
        m->shape[0] = op->a.pad.length;
        po->mask_spec = *m;
        pl->touched[pl->nout] = 1;
        po->mask = pl->nout++;
    }
    if (op->def->run == NULL && pl->runnable) {
        pl->runnable = 0;
        pl->not_built = i;
    }
    return 0;
}

int map_plan_create(struct map_plan **out, const struct map_pipeline *p, const struct map_spec *in, size_t nin,
                    const char *base_dir, unsigned flags, struct map_why *w)
{
    *out = NULL;
    memset(w, 0, sizeof *w);
    if (nin > MAX_FEATURES - MAP_MAX_OPS) {
        snprintf(w->key, sizeof w->key, "map");
        snprintf(w->text, sizeof w->text, ": the job has more features than the map takes (%zu)", nin);
        return SL_EINVAL;
    }
    struct map_plan *pl = sl_calloc(1, sizeof *pl);
    if (pl == NULL)
        return SL_ENOMEM;
    pl->p = p;
    pl->nin = pl->nout = nin;
    pl->runnable = 1;
    memcpy(pl->feat, in, nin * sizeof *in);
    int rc = 0;
    size_t i;
    for (i = 0; rc == 0 && i < map_pipeline_nops(p); i++)
        rc = plan_op(pl, i, base_dir, w);
    /* every touched feature leaves the map fixed: say which op left it not */
    for (size_t f = 0; rc == 0 && f < pl->nout; f++) {
        if (!pl->touched[f] || map_spec_fixed(&pl->feat[f]))
            continue;
        size_t last = 0;
        for (size_t k = 0; k < map_pipeline_nops(p); k++)
            if (pl->op[k].feature == f)
                last = k;
        const struct map_op *op = &p->op[last];
        char d[96];
        if (pl->feat[f].varlen)
            rc = map__why_arg(w, op, "feature",
                              ": feature '%s' leaves the map variable-length (%s after map[%zu] %s): the map's "
                              "outputs have a fixed shape; add a pad_or_truncate",
                              pl->feat[f].name, map_spec_describe(&pl->feat[f], d, sizeof d), last, op->def->name);
        else
            rc = map__why_arg(w, op, "feature",
                              ": feature '%s' leaves the map with a shape that depends on the data (%s after map[%zu] "
                              "%s): add a resize, center_crop or random_resized_crop",
                              pl->feat[f].name, map_spec_describe(&pl->feat[f], d, sizeof d), last, op->def->name);
    }
    for (i = 0; rc == 0 && i < map_pipeline_nops(p); i++) {
        pl->op[i].last = 1;
        for (size_t k = i + 1; k < map_pipeline_nops(p); k++)
            if (pl->op[k].feature == pl->op[i].feature)
                pl->op[i].last = 0;
    }
    for (i = 0; rc == 0 && i + 1 < map_pipeline_nops(p); i++) {
        const struct map_op_def *next = p->op[i + 1].def;
        if (p->op[i].def == &map__op_decode_image && pl->op[i + 1].feature == pl->op[i].feature &&
            (next == &map__op_random_resized_crop || next == &map__op_resize)) {
            pl->op[i].pass = 1;
            pl->op[i + 1].decode = &p->op[i];
        }
    }
    /* the specs first (what the user can fix in the job), then what this
     * feeder cannot do */
    if (rc == 0 && !pl->runnable && !(flags & MAP_PLAN_SPECS_ONLY)) {
        const struct map_op *op = &p->op[pl->not_built];
        rc = map__why_arg(w, op, NULL, ": op '%s' is not built into this feeder yet", op->def->name);
    }
    if (rc != 0) {
        map_plan_destroy(pl);
        return rc;
    }
    *out = pl;
    return 0;
}

void map_plan_destroy(struct map_plan *pl)
{
    if (pl == NULL)
        return;
    for (size_t i = 0; i < map_pipeline_nops(pl->p); i++) {
        const struct plan_op *po = &pl->op[i];
        if (po->op != NULL && po->shared != NULL && po->op->def->plan_free != NULL)
            po->op->def->plan_free(po->op, po->shared);
    }
    sl_free(pl);
}

const struct map_spec *map_plan_out(const struct map_plan *pl, size_t *n)
{
    *n = pl->nout;
    return pl->feat;
}

size_t map_plan_out_source(const struct map_plan *pl, size_t i)
{
    return i < pl->nin ? i : pl->nin;
}

int map_plan_out_touched(const struct map_plan *pl, size_t i)
{
    return i < pl->nout && pl->touched[i];
}

const struct map_spec *map_plan_op_out(const struct map_plan *pl, size_t i)
{
    return &pl->op[i].out;
}

size_t map_plan_nops(const struct map_plan *pl)
{
    return map_pipeline_nops(pl->p);
}

const char *map_plan_op_label(const struct map_plan *pl, size_t i, char *buf, size_t cap)
{
    snprintf(buf, cap, "map[%zu] %s", i, pl->p->op[i].def->name);
    return buf;
}

/* ---- the runner ---- */

enum { SAMPLE_EVERY = 8 };

struct map_runner {
    const struct map_plan *pl;
    struct map_arena arena[MAP_MAX_OPS], mask_arena[MAP_MAX_OPS];
    void *thread[MAP_MAX_OPS];
    uint64_t op_ns[MAP_MAX_OPS];
    uint64_t tick;
    struct map_tensor cur[MAX_FEATURES];
};

int map_runner_create(struct map_runner **out, const struct map_plan *pl, struct sl_error *err)
{
    *out = NULL;
    if (!pl->runnable)
        return sl_error_set(err, SL_EINVAL, "map: the plan has ops not built into this feeder");
    struct map_runner *r = sl_calloc(1, sizeof *r);
    if (r == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    r->pl = pl;
    for (size_t i = 0; i < map_plan_nops(pl); i++) {
        const struct plan_op *po = &pl->op[i];
        int rc = 0;
        /* fixed outputs: the arena is sized once, here */
        if (map_spec_fixed(&po->out) &&
            map__arena_reserve(&r->arena[i], map_spec_count(&po->out) * map_dtype_size(po->out.dtype) + 1) == NULL)
            rc = sl_error_set(err, SL_ENOMEM, "out of memory");
        if (rc == 0 && po->mask != SIZE_MAX &&
            map__arena_reserve(&r->mask_arena[i],
                               map_spec_count(&po->mask_spec) * map_dtype_size(po->mask_spec.dtype) + 1) == NULL)
            rc = sl_error_set(err, SL_ENOMEM, "out of memory");
        if (rc == 0 && po->op->def->thread_init != NULL)
            rc = po->op->def->thread_init(po->op, po->shared, &r->thread[i], err);
        if (rc != 0) {
            map_runner_destroy(r);
            return rc;
        }
    }
    *out = r;
    return 0;
}

void map_runner_destroy(struct map_runner *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; i < map_plan_nops(r->pl); i++) {
        const struct plan_op *po = &r->pl->op[i];
        if (r->thread[i] != NULL && po->op->def->thread_free != NULL)
            po->op->def->thread_free(po->op, po->shared, r->thread[i]);
        sl_free(r->arena[i].p);
        sl_free(r->mask_arena[i].p);
    }
    sl_free(r);
}

int map_runner_run(struct map_runner *r, const struct map_key *key, const struct map_tensor *in, struct map_tensor *out,
                   struct sl_error *err)
{
    return map_runner_run_into(r, key, in, out, NULL, err);
}

int map_runner_run_into(struct map_runner *r, const struct map_key *key, const struct map_tensor *in,
                        struct map_tensor *out, void *const *dst, struct sl_error *err)
{
    const struct map_plan *pl = r->pl;
    memcpy(r->cur, in, pl->nin * sizeof *in);
    int timed = (r->tick++ % SAMPLE_EVERY) == 0;
    for (size_t i = 0; i < map_plan_nops(pl); i++) {
        const struct plan_op *po = &pl->op[i];
        struct map_call call = {.op = po->op,
                                .in_spec = &po->in,
                                .out_spec = &po->out,
                                .rng = sl_rng_key(key->seed, key->epoch, key->element, i),
                                .arena = &r->arena[i],
                                .thread = r->thread[i],
                                .shared = po->shared,
                                .element = key->element,
                                .mask = po->mask != SIZE_MAX ? &r->cur[po->mask] : NULL,
                                .mask_arena = &r->mask_arena[i],
                                .pass = po->pass,
                                .decode = po->decode};
        call.seed = call.rng.s;
        /* the last op on a fixed feature writes straight into its row */
        struct map_arena row = {0};
        if (dst != NULL && po->last && dst[po->feature] != NULL && map_spec_fixed(&po->out)) {
            row = (struct map_arena){.p = dst[po->feature],
                                     .cap = map_spec_count(&po->out) * map_dtype_size(po->out.dtype),
                                     .borrowed = 1,
                                     .own = &r->arena[i]};
            call.arena = &row;
        }
        struct map_tensor t = r->cur[po->feature];
        uint64_t t0 = timed ? sl_clock_thread_cpu_ns() : 0;
        int rc = po->op->def->run(&call, &t, &r->cur[po->feature], err);
        if (timed)
            r->op_ns[i] += (sl_clock_thread_cpu_ns() - t0) * SAMPLE_EVERY;
        if (rc != 0) {
            if (rc != SL_ENOMEM)
                sl_error_prefix(err, "map[%zu] %s: ", i, po->op->def->name);
            return rc;
        }
    }
    memcpy(out, r->cur, pl->nout * sizeof *out);
    return 0;
}

uint64_t map_runner_op_ns(const struct map_runner *r, size_t i)
{
    return i < MAP_MAX_OPS ? r->op_ns[i] : 0;
}
