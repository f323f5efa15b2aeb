/* map_ops: the tensor ops of the map stage (docs/map.md): cast, one_hot,
 * pad_or_truncate. Each is a row (struct map_op_def, map_op.h) and its
 * parse, spec and run functions.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "map_op.h"
#include "sl_half.h"

static int not_varlen(const struct map_op *op, const struct map_spec *in, struct map_why *w)
{
    if (in->varlen)
        return map__why_arg(w, op, "feature",
                            ": %s takes a fixed-shape feature; '%s' is variable-length: pad_or_truncate it first",
                            op->def->name, in->name);
    return 0;
}

static size_t tensor_count(const struct map_tensor *t)
{
    size_t n = 1;
    for (int i = 0; i < t->rank; i++)
        n *= (size_t)t->shape[i];
    return n;
}

/* ---- cast ---- */

static const char *const cast_keys[] = {"dtype", NULL};

static int parse_cast(struct map_op *op, json_t *o, struct map_why *w)
{
    return map__arg_dtype(op, o, "dtype", 0, MAP_DT_INT64, &op->a.cast.dtype, w);
}

static int spec_cast(const struct map_op *op, void *shared, const struct map_spec *in, struct map_spec *out,
                     struct map_why *w)
{
    char d[96];
    if (in->dtype == MAP_DT_BYTES)
        return map__why_arg(w, op, "feature",
                            ": cast takes an int64, float32, uint8, float16 or bfloat16 feature ('%s' is %s)", in->name,
                            map_spec_describe(in, d, sizeof d));
    int rc = not_varlen(op, in, w);
    if (rc != 0)
        return rc;
    *out = *in;
    out->dtype = op->a.cast.dtype;
    return 0;
}

/* float -> integer: toward zero, then saturated to [lo, hi]; NaN -> 0 */
static int64_t f32_to_int(float x, double lo, double hi)
{
    if (x != x)
        return 0;
    double t = trunc((double)x);
    if (t <= lo)
        return (int64_t)lo;
    if (t >= hi)
        return hi >= 9.2e18 ? INT64_MAX : (int64_t)hi;
    return (int64_t)t;
}

static int run_cast(struct map_call *c, const struct map_tensor *in, struct map_tensor *out, struct sl_error *err)
{
    enum map_dtype to = c->op->a.cast.dtype;
    size_t n = tensor_count(in), bytes = n * map_dtype_size(to);
    void *dst = map__arena_reserve(c->arena, bytes);
    if (dst == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    *out = *in;
    out->dtype = to;
    out->data = dst;
    out->bytes = bytes;
    if (in->dtype == to) {
        memcpy(dst, in->data, bytes);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        /* memcpy: the input may be unaligned (a record's bytes). A float
         * input of any width is read as the float32 it widens to exactly. */
        int64_t iv = 0;
        float fv = 0;
        uint8_t uv = 0;
        uint16_t hv = 0;
        const uint8_t *src = (const uint8_t *)in->data;
        switch (in->dtype) {
        case MAP_DT_INT64: memcpy(&iv, src + 8 * i, 8); break;
        case MAP_DT_FLOAT32: memcpy(&fv, src + 4 * i, 4); break;
        case MAP_DT_FLOAT16:
            memcpy(&hv, src + 2 * i, 2);
            fv = sl_f16_to_f32(hv);
            break;
        case MAP_DT_BFLOAT16:
            memcpy(&hv, src + 2 * i, 2);
            fv = sl_bf16_to_f32(hv);
            break;
        default: uv = src[i]; break;
        }
        int is_int = in->dtype == MAP_DT_INT64, is_u8 = in->dtype == MAP_DT_UINT8;
        switch (to) {
        case MAP_DT_INT64: {
            int64_t v = is_int  ? iv
                        : is_u8 ? (int64_t)uv
                                : f32_to_int(fv, -9223372036854775808.0, 9223372036854775807.0);
            memcpy((uint8_t *)dst + 8 * i, &v, 8);
            break;
        }
        case MAP_DT_FLOAT32: {
            float v = is_int ? (float)iv : is_u8 ? (float)uv : fv;
            memcpy((uint8_t *)dst + 4 * i, &v, 4);
            break;
        }
        case MAP_DT_FLOAT16:
        case MAP_DT_BFLOAT16: { /* one rounding, to nearest, ties to even (sl_half.h) */
            int f16 = to == MAP_DT_FLOAT16;
            uint16_t v = is_int || is_u8 ? (f16 ? sl_i64_to_f16(is_int ? iv : uv) : sl_i64_to_bf16(is_int ? iv : uv))
                                         : (f16 ? sl_f32_to_f16(fv) : sl_f32_to_bf16(fv));
            memcpy((uint8_t *)dst + 2 * i, &v, 2);
            break;
        }
        default: {
            int64_t v = is_int ? (iv < 0 ? 0 : iv > 255 ? 255 : iv) : is_u8 ? uv : f32_to_int(fv, 0, 255);
            ((uint8_t *)dst)[i] = (uint8_t)v;
            break;
        }
        }
    }
    return 0;
}

const struct map_op_def map__op_cast = {"cast", cast_keys, 0, parse_cast, spec_cast, run_cast, NULL, NULL, NULL, NULL};

/* ---- one_hot ---- */

#define ONE_HOT_MAX_DEPTH ((int64_t)1 << 20)

static const char *const one_hot_keys[] = {"depth", NULL};

static int parse_one_hot(struct map_op *op, json_t *o, struct map_why *w)
{
    return map__arg_int(op, o, "depth", 0, 0, 1, ONE_HOT_MAX_DEPTH, &op->a.one_hot.depth, w);
}

static int spec_one_hot(const struct map_op *op, void *shared, const struct map_spec *in, struct map_spec *out,
                        struct map_why *w)
{
    char d[96];
    if (in->dtype != MAP_DT_INT64 || in->varlen || !map_spec_fixed(in) || map_spec_count(in) != 1)
        return map__why_arg(w, op, "feature", ": one_hot takes one int64 label per element ('%s' is %s)", in->name,
                            map_spec_describe(in, d, sizeof d));
    memset(out->shape, 0, sizeof out->shape);
    out->dtype = MAP_DT_FLOAT32;
    out->varlen = 0;
    out->rank = 1;
    out->shape[0] = op->a.one_hot.depth;
    return 0;
}

static int run_one_hot(struct map_call *c, const struct map_tensor *in, struct map_tensor *out, struct sl_error *err)
{
    int64_t depth = c->op->a.one_hot.depth, label;
    memcpy(&label, in->data, 8);
    if (label < 0 || label >= depth)
        return sl_error_set(err, SL_EINVAL, "label %lld is outside [0, %lld)", (long long)label, (long long)depth);
    size_t bytes = (size_t)depth * 4;
    float *dst = map__arena_reserve(c->arena, bytes);
    if (dst == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    memset(dst, 0, bytes);
    dst[label] = 1.0f;
    *out = (struct map_tensor){.dtype = MAP_DT_FLOAT32, .rank = 1, .shape = {depth}, .data = dst, .bytes = bytes};
    return 0;
}

const struct map_op_def map__op_one_hot = {"one_hot",   one_hot_keys, 0,    parse_one_hot, spec_one_hot,
                                           run_one_hot, NULL,         NULL, NULL,          NULL};

/* ---- pad_or_truncate ---- */

#define PAD_MAX_LENGTH ((int64_t)1 << 24)

static const char *const pad_keys[] = {"length", "pad", "mask", "mask_dtype", NULL};

static int parse_pad(struct map_op *op, json_t *o, struct map_why *w)
{
    char g[80];
    int rc = map__arg_int(op, o, "length", 0, 0, 1, PAD_MAX_LENGTH, &op->a.pad.length, w);
    if (rc == 0)
        rc = map__arg_num(op, o, "pad", 1, 0, -3.4e38, 3.4e38, &op->a.pad.pad, w);
    if (rc == 0)
        rc = map__arg_dtype(op, o, "mask_dtype", 1, MAP_DT_UINT8, &op->a.pad.mask_dtype, w);
    if (rc == 0 && op->a.pad.mask_dtype != MAP_DT_UINT8 && op->a.pad.mask_dtype != MAP_DT_INT64)
        rc = map__why_arg(w, op, "mask_dtype", " must be \"uint8\" or \"int64\" (got \"%s\")",
                          map_dtype_name(op->a.pad.mask_dtype));
    json_t *m = json_object_get(o, "mask");
    if (rc == 0 && m != NULL) {
        if (!json_is_string(m) || json_string_length(m) == 0 || json_string_length(m) >= MAP_NAME_MAX ||
            strlen(json_string_value(m)) != json_string_length(m))
            return map__why_arg(w, op, "mask", " must be the name of a new feature (got %s)", map__got(m, g, sizeof g));
        snprintf(op->a.pad.mask, sizeof op->a.pad.mask, "%s", json_string_value(m));
    }
    return rc;
}

static int spec_pad(const struct map_op *op, void *shared, const struct map_spec *in, struct map_spec *out,
                    struct map_why *w)
{
    char d[96];
    if ((in->dtype != MAP_DT_INT64 && in->dtype != MAP_DT_FLOAT32) || (!in->varlen && in->rank != 1))
        return map__why_arg(w, op, "feature",
                            ": pad_or_truncate takes a list of int64 or float32 values, variable-length or of rank 1 "
                            "('%s' is %s)",
                            in->name, map_spec_describe(in, d, sizeof d));
    double pad = op->a.pad.pad;
    if (in->dtype == MAP_DT_INT64 && (pad != floor(pad) || fabs(pad) > 9007199254740992.0))
        return map__why_arg(w, op, "pad", " must be an integer for int64 feature '%s' (got %g)", in->name, pad);
    memset(out->shape, 0, sizeof out->shape);
    out->dtype = in->dtype;
    out->varlen = 0;
    out->rank = 1;
    out->shape[0] = op->a.pad.length;
    return 0;
}

static int run_pad(struct map_call *c, const struct map_tensor *in, struct map_tensor *out, struct sl_error *err)
{
    size_t length = (size_t)c->op->a.pad.length, size = map_dtype_size(in->dtype);
    size_t n = in->rank >= 1 ? (size_t)in->shape[0] : 0, keep = n < length ? n : length;
    uint8_t *dst = map__arena_reserve(c->arena, length * size);
    if (dst == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    if (keep > 0)
        memcpy(dst, in->data, keep * size);
    if (in->dtype == MAP_DT_INT64) {
        int64_t v = (int64_t)c->op->a.pad.pad;
        for (size_t i = keep; i < length; i++)
            memcpy(dst + 8 * i, &v, 8);
    } else {
        float v = (float)c->op->a.pad.pad;
        for (size_t i = keep; i < length; i++)
            memcpy(dst + 4 * i, &v, 4);
    }
    *out = (struct map_tensor){
        .dtype = in->dtype, .rank = 1, .shape = {(int64_t)length}, .data = dst, .bytes = length * size};
    if (c->mask != NULL) {
        enum map_dtype md = c->op->a.pad.mask_dtype;
        size_t mb = length * map_dtype_size(md);
        uint8_t *m = map__arena_reserve(c->mask_arena, mb);
        if (m == NULL)
            return sl_error_set(err, SL_ENOMEM, "out of memory");
        if (md == MAP_DT_UINT8) {
            memset(m, 1, keep);
            memset(m + keep, 0, length - keep);
        } else {
            for (size_t i = 0; i < length; i++) {
                int64_t v = i < keep;
                memcpy(m + 8 * i, &v, 8);
            }
        }
        *c->mask = (struct map_tensor){.dtype = md, .rank = 1, .shape = {(int64_t)length}, .data = m, .bytes = mb};
    }
    return 0;
}

const struct map_op_def map__op_pad_or_truncate = {"pad_or_truncate", pad_keys, 0,    parse_pad, spec_pad,
                                                   run_pad,           NULL,     NULL, NULL,      NULL};
