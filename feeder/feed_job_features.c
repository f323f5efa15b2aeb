/* feed_job_features: a job's 'features' (docs/job.md): each feature's
 * dtype, shape, varlen, default, "from": "bytes" and arrays, parsed and
 * checked with the job file's messages ("'features.x.shape' must be ...");
 * and written back as JSON (feed_job_to_json, a flag over one feature).
 */
#include "feed_job_features.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_alloc.h"

static const char *const feature_fields[] = {"dtype", "shape", "varlen", "default", "from", "array"};
#define NFIELDS (sizeof feature_fields / sizeof feature_fields[0])
#define FEATURE_MAX_VALUES ((uint64_t)1 << 32)

void feed__features_free(struct fmt_feature_spec *specs, struct feed_job_list *arrays, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        sl_free((void *)specs[i].default_bytes);
        if (arrays != NULL)
            feed__list_free(&arrays[i]);
    }
    sl_free(specs);
    sl_free(arrays);
}

/* features.NAME.array: a pattern or a non-empty list of patterns. */
static int parse_array(const char *key, json_t *v, struct feed_job_list *out, struct why *w)
{
    char g[80];
    size_t cap = 0, i;
    json_t *e;
    int rc = 0;
    if (json_is_string(v) && json_string_length(v) > 0 && strlen(json_string_value(v)) == json_string_length(v))
        rc = feed__list_push(out, &cap, json_string_value(v));
    else if (!json_is_array(v) || json_array_size(v) == 0)
        rc = SL_EINVAL;
    else
        json_array_foreach(v, i, e)
        {
            if (rc == 0 && (!json_is_string(e) || json_string_length(e) == 0 ||
                            strlen(json_string_value(e)) != json_string_length(e)))
                rc = SL_EINVAL;
            if (rc == 0)
                rc = feed__list_push(out, &cap, json_string_value(e));
        }
    if (rc != 0) {
        feed__list_free(out);
        if (rc == SL_EINVAL)
            return feed__why_set(w, key, " must be a pattern or a non-empty list of patterns (got %s)",
                                 feed__got(v, g, sizeof g));
    }
    return rc;
}

int feed__feature_field(const char *s)
{
    for (size_t i = 0; i < NFIELDS; i++)
        if (strcmp(s, feature_fields[i]) == 0)
            return 1;
    return 0;
}

/* Collect the leaves of a (possibly nested) array default. */
static void leaves(json_t *v, json_t **first, int *same, size_t *n)
{
    if (!json_is_array(v)) {
        if (*first == NULL)
            *first = v;
        else if (!json_equal(*first, v))
            *same = 0;
        (*n)++;
        return;
    }
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) leaves(e, first, same, n);
}

/* The default of a fixed-length feature: one value for every element, or
 * an array (flat or nested) of `count` equal values. */
static int parse_default(const char *key, json_t *v, struct fmt_feature_spec *s, uint64_t count, struct why *w)
{
    char g[80];
    json_t *one = NULL;
    int same = 1;
    size_t n = 0;
    leaves(v, &one, &same, &n);
    if (json_is_array(v) && n != count)
        return feed__why_set(w, key, " must be one value or an array of %llu values (got %s)",
                             (unsigned long long)count, feed__got(v, g, sizeof g));
    if (!same)
        return feed__why_set(w, key, ": every value must be the same (got %s)", feed__got(v, g, sizeof g));
    s->has_default = 1;
    if (one == NULL)
        return 0; /* an empty shape: nothing to fill */
    switch (s->dtype) {
    case FMT_DTYPE_INT64:
        if (!json_is_integer(one))
            return feed__why_set(w, key, " must be an integer (got %s)", feed__got(v, g, sizeof g));
        s->default_i64 = (int64_t)json_integer_value(one);
        break;
    case FMT_DTYPE_FLOAT32: {
        /* below 0x1.ffffffp127 a double still rounds to a finite float */
        double d = json_number_value(one);
        if (!json_is_number(one) || !(d < 0x1.ffffffp127 && d > -0x1.ffffffp127))
            return feed__why_set(w, key, " must be a float32 number (got %s)", feed__got(v, g, sizeof g));
        s->default_f32 = (float)d;
        break;
    }
    case FMT_DTYPE_UINT8:
        if (!json_is_integer(one) || json_integer_value(one) < 0 || json_integer_value(one) > 255)
            return feed__why_set(w, key, " must be an integer from 0 to 255 (got %s)", feed__got(v, g, sizeof g));
        s->default_u8 = (uint8_t)json_integer_value(one);
        break;
    case FMT_DTYPE_BYTES: {
        if (!json_is_string(one))
            return feed__why_set(w, key, " must be a string (got %s)", feed__got(v, g, sizeof g));
        size_t len = json_string_length(one);
        uint8_t *p = sl_malloc(len);
        if (p == NULL)
            return SL_ENOMEM;
        memcpy(p, json_string_value(one), len);
        s->default_bytes = p;
        s->default_bytes_len = len;
        break;
    }
    case FMT_DTYPE_FLOAT16: /* a map's output only: no job declares it */
    case FMT_DTYPE_BFLOAT16: break;
    }
    return 0;
}

static int parse_shape(const char *key, json_t *v, struct fmt_feature_spec *s, struct why *w)
{
    char g[80];
    int ok = json_is_array(v) && json_array_size(v) <= FMT_MAX_RANK;
    uint64_t count = 1;
    size_t i;
    json_t *d;
    if (ok)
        json_array_foreach(v, i, d)
        {
            if (!json_is_integer(d) || json_integer_value(d) < 0) {
                ok = 0;
                break;
            }
            s->shape[i] = (int64_t)json_integer_value(d);
            uint64_t dim = (uint64_t)s->shape[i];
            count = dim == 0 || count == 0             ? 0
                    : count > FEATURE_MAX_VALUES / dim ? FEATURE_MAX_VALUES + 1
                                                       : count * dim;
        }
    if (!ok)
        return feed__why_set(w, key, " must be an array of at most %d integers >= 0 (got %s)", FMT_MAX_RANK,
                             feed__got(v, g, sizeof g));
    if (count > FEATURE_MAX_VALUES)
        return feed__why_set(w, key, " must hold at most %llu values (got %s)", (unsigned long long)FEATURE_MAX_VALUES,
                             feed__got(v, g, sizeof g));
    s->rank = (int)json_array_size(v);
    return 0;
}

static int parse_feature(const char *name, json_t *v, struct fmt_feature_spec *s, struct feed_job_list *arr,
                         struct why *w)
{
    char key[256], g[80];
    snprintf(key, sizeof key, "features.%s", name);
    if (name[0] == '\0')
        return feed__why_set(w, "features", ": a feature name must not be empty");
    if (strlen(name) >= sizeof s->name)
        return feed__why_set(w, key, ": a feature name has at most %zu bytes", sizeof s->name - 1);
    if (!json_is_object(v))
        return feed__why_set(w, key, " must be an object (got %s)", feed__got(v, g, sizeof g));
    const char *field;
    json_t *fv;
    json_object_foreach(v, field, fv)
    {
        if (!feed__feature_field(field)) {
            snprintf(key, sizeof key, "features.%s.%s", name, field);
            return feed__why_unknown(w, key);
        }
    }
    snprintf(s->name, sizeof s->name, "%s", name);

    json_t *dtype = json_object_get(v, "dtype"), *shape = json_object_get(v, "shape");
    json_t *varlen = json_object_get(v, "varlen"), *def = json_object_get(v, "default");
    json_t *from = json_object_get(v, "from"), *array = json_object_get(v, "array");
    if (array != NULL && json_is_null(array))
        array = NULL;
    if (array != NULL) {
        snprintf(key, sizeof key, "features.%s.array", name);
        int rc = parse_array(key, array, arr, w);
        if (rc != 0)
            return rc;
    }
    snprintf(key, sizeof key, "features.%s.dtype", name);
    if (dtype == NULL || json_is_null(dtype))
        return feed__why_set(w, key, " is required");
    if (!json_is_string(dtype))
        return feed__why_set(w, key, " must be a string (got %s)", feed__got(dtype, g, sizeof g));
    if (fmt_dtype_parse(json_string_value(dtype), &s->dtype) != 0)
        return feed__why_set(w, key, ": unknown dtype '%s' (expected " FMT_DTYPE_NAMES ")", json_string_value(dtype));
    snprintf(key, sizeof key, "features.%s.varlen", name);
    if (varlen != NULL && !json_is_null(varlen) && !json_is_boolean(varlen))
        return feed__why_set(w, key, " must be true or false (got %s)", feed__got(varlen, g, sizeof g));
    s->varlen = json_is_true(varlen);
    snprintf(key, sizeof key, "features.%s.from", name);
    if (from != NULL && !json_is_null(from)) {
        if (!json_is_string(from) || strcmp(json_string_value(from), "bytes") != 0)
            return feed__why_set(w, key, " must be \"bytes\" (got %s)", feed__got(from, g, sizeof g));
        if (s->dtype != FMT_DTYPE_UINT8)
            return feed__why_set(w, key, ": only dtype uint8 is read from bytes");
        if (array != NULL)
            return feed__why_set(w, key, ": an array feature takes its values from its array");
    } else if (s->dtype == FMT_DTYPE_UINT8 && array == NULL) {
        snprintf(key, sizeof key, "features.%s", name);
        return feed__why_set(w, key, ": dtype uint8 requires \"from\": \"bytes\"");
    }
    snprintf(key, sizeof key, "features.%s.shape", name);
    if (shape != NULL && !json_is_null(shape)) {
        if (s->varlen)
            return feed__why_set(w, key, ": a varlen feature has no shape");
        int rc = parse_shape(key, shape, s, w);
        if (rc != 0)
            return rc;
    }
    snprintf(key, sizeof key, "features.%s.default", name);
    if (def != NULL && !json_is_null(def)) {
        if (s->varlen)
            return feed__why_set(w, key, ": a varlen feature takes no default");
        return parse_default(key, def, s, fmt_feature_spec_count(s), w);
    }
    return 0;
}

int feed__features_parse(json_t *v, struct fmt_feature_spec **out, struct feed_job_list **arrays_out, size_t *nout,
                         struct why *w)
{
    char g[80];
    *out = NULL;
    *arrays_out = NULL;
    *nout = 0;
    if (json_is_null(v))
        return 0;
    if (!json_is_object(v))
        return feed__why_set(w, "features", " must be an object of name -> feature (got %s)",
                             feed__got(v, g, sizeof g));
    size_t n = json_object_size(v), i = 0;
    struct fmt_feature_spec *specs = sl_calloc(n ? n : 1, sizeof *specs);
    struct feed_job_list *arrays = sl_calloc(n ? n : 1, sizeof *arrays);
    if (specs == NULL || arrays == NULL) {
        sl_free(specs);
        sl_free(arrays);
        return SL_ENOMEM;
    }
    const char *name;
    json_t *fv;
    json_object_foreach(v, name, fv)
    {
        i++;
        int rc = parse_feature(name, fv, &specs[i - 1], &arrays[i - 1], w);
        if (rc != 0) {
            feed__features_free(specs, arrays, i);
            return rc;
        }
    }
    *out = specs;
    *arrays_out = arrays;
    *nout = n;
    return 0;
}

/* The precision that gives f back when printed with %.*g. */
static int float_digits(float f)
{
    char tmp[32];
    for (int p = 1; p < 9; p++) {
        snprintf(tmp, sizeof tmp, "%.*g", p, (double)f);
        if ((float)strtod(tmp, NULL) == f) /* as the loader reads it back */
            return p;
    }
    return 9;
}

static json_t *default_to_json(const struct fmt_feature_spec *s)
{
    switch (s->dtype) {
    case FMT_DTYPE_INT64: return json_integer((json_int_t)s->default_i64);
    case FMT_DTYPE_FLOAT32: return json_real((double)s->default_f32);
    case FMT_DTYPE_UINT8: return json_integer(s->default_u8);
    case FMT_DTYPE_BYTES: return json_stringn((const char *)s->default_bytes, s->default_bytes_len);
    case FMT_DTYPE_FLOAT16: /* a map's output only: no job declares it */
    case FMT_DTYPE_BFLOAT16: break;
    }
    return NULL;
}

json_t *feed__features_to_json(const struct fmt_feature_spec *specs, const struct feed_job_list *arrays, size_t n,
                               int *digits)
{
    json_t *all = json_object();
    if (all == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        const struct fmt_feature_spec *s = &specs[i];
        json_t *f = json_object(), *shape;
        /* the _new setters take the value's reference even when they fail */
        if (json_object_set_new(all, s->name, f) != 0 ||
            json_object_set_new(f, "dtype", json_string(fmt_dtype_name(s->dtype))) != 0)
            goto out_free_all;
        if (s->varlen) {
            if (json_object_set_new(f, "varlen", json_true()) != 0)
                goto out_free_all;
        } else {
            if (json_object_set_new(f, "shape", shape = json_array()) != 0)
                goto out_free_all;
            for (int d = 0; d < s->rank; d++)
                if (json_array_append_new(shape, json_integer((json_int_t)s->shape[d])) != 0)
                    goto out_free_all;
        }
        if (s->has_default && json_object_set_new(f, "default", default_to_json(s)) != 0)
            goto out_free_all;
        if (s->has_default && s->dtype == FMT_DTYPE_FLOAT32 && float_digits(s->default_f32) > *digits)
            *digits = float_digits(s->default_f32);
        const struct feed_job_list *arr = arrays != NULL ? &arrays[i] : NULL;
        if (arr != NULL && arr->n > 0) {
            json_t *a = arr->n == 1 ? json_string(arr->items[0]) : json_array();
            if (json_object_set_new(f, "array", a) != 0)
                goto out_free_all;
            for (size_t k = 0; arr->n > 1 && k < arr->n; k++)
                if (json_array_append_new(a, json_string(arr->items[k])) != 0)
                    goto out_free_all;
        } else if (s->dtype == FMT_DTYPE_UINT8 && json_object_set_new(f, "from", json_string("bytes")) != 0) {
            goto out_free_all;
        }
    }
    return all;
out_free_all:
    json_decref(all);
    return NULL;
}
