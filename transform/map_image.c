/* map_image: the image ops' rows (docs/map.md): their arguments parsed and
 * checked, their output specs derived. Their run functions are not built
 * into this feeder yet (run NULL: a job using one is refused at load); each
 * is to call the image kernels (transform/img.h) with the per-thread state
 * of thread_init.
 *
 * An image is uint8 [H, W, C] (HWC), C 1 to 4; H and W may depend on the
 * data (decode_image's output) until a resize or crop fixes them.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "map_op.h"

#define SIZE_MAX_SIDE 65536
#define DEFAULT_MAX_PIXELS ((int64_t)64 << 20)

static int image_in(const struct map_op *op, const struct map_spec *in, struct map_why *w)
{
    char d[96];
    if (in->dtype != MAP_DT_UINT8 || in->varlen || in->rank != 3 || in->shape[2] < 1 || in->shape[2] > 4)
        return map__why_arg(w, op, "feature",
                            ": %s takes an image, uint8 [height, width, channels] ('%s' is %s): decode_image it "
                            "first",
                            op->def->name, in->name, map_spec_describe(in, d, sizeof d));
    return 0;
}

/* A pair of numbers lo <= hi within [min, max], or the default. */
static int arg_range(struct map_op *op, json_t *o, const char *key, const double def[2], double min, double max,
                     int open_min, double out[2], struct map_why *w)
{
    json_t *v = json_object_get(o, key);
    char g[80];
    if (v == NULL) {
        out[0] = def[0];
        out[1] = def[1];
        json_t *a = json_pack("[ff]", def[0], def[1]);
        return a != NULL && json_object_set_new(o, key, a) == 0 ? 0 : SL_ENOMEM;
    }
    int ok = json_is_array(v) && json_array_size(v) == 2 && json_is_number(json_array_get(v, 0)) &&
             json_is_number(json_array_get(v, 1));
    if (ok) {
        out[0] = json_number_value(json_array_get(v, 0));
        out[1] = json_number_value(json_array_get(v, 1));
        ok = (open_min ? out[0] > min : out[0] >= min) && out[0] <= out[1] && out[1] <= max;
    }
    if (!ok)
        return map__why_arg(w, op, key, " must be two numbers lo <= hi in %s%g, %g] (got %s)", open_min ? "(" : "[",
                            min, max, map__got(v, g, sizeof g));
    return 0;
}

static void image_out(struct map_spec *out, const struct map_spec *in, int64_t h, int64_t wd)
{
    *out = *in;
    out->shape[0] = h;
    out->shape[1] = wd;
}

/* ---- decode_image ---- */

static const char *const decode_keys[] = {"channels", "max_pixels", NULL};

static int parse_decode(struct map_op *op, json_t *o, struct map_why *w)
{
    int64_t ch;
    int rc = map__arg_int(op, o, "channels", 1, 3, 1, 3, &ch, w);
    if (rc == 0 && ch == 2)
        rc = map__why_arg(w, op, "channels", " must be 1 (grayscale) or 3 (RGB) (got 2)");
    op->a.decode.channels = (int)ch;
    if (rc == 0)
        rc = map__arg_int(op, o, "max_pixels", 1, DEFAULT_MAX_PIXELS, 1, (int64_t)1 << 30, &op->a.decode.max_pixels,
                          w);
    return rc;
}

static int spec_decode(const struct map_op *op, void *shared, const struct map_spec *in, struct map_spec *out,
                       struct map_why *w)
{
    char d[96];
    if (in->dtype != MAP_DT_BYTES || in->varlen || in->rank != 0)
        return map__why_arg(w, op, "feature", ": decode_image takes one encoded image, a bytes scalar ('%s' is %s)",
                            in->name, map_spec_describe(in, d, sizeof d));
    memset(out->shape, 0, sizeof out->shape);
    out->dtype = MAP_DT_UINT8;
    out->varlen = 0;
    out->rank = 3;
    out->shape[0] = MAP_DIM_DATA;
    out->shape[1] = MAP_DIM_DATA;
    out->shape[2] = op->a.decode.channels;
    return 0;
}

const struct map_op_def map__op_decode_image = {"decode_image", decode_keys, 0,    parse_decode, spec_decode,
                                                NULL,           NULL,        NULL, NULL,         NULL};

/* ---- random_resized_crop, resize, center_crop ---- */

static const char *const rrc_keys[] = {"size", "scale", "ratio", "antialias", NULL};
static const char *const resize_keys[] = {"size", "antialias", NULL};
static const char *const center_keys[] = {"size", NULL};

static int parse_rrc(struct map_op *op, json_t *o, struct map_why *w)
{
    static const double scale[2] = {0.08, 1.0}, ratio[2] = {3.0 / 4.0, 4.0 / 3.0};
    int rc = map__arg_ints(op, o, "size", 2, 1, SIZE_MAX_SIDE, op->a.crop.size, w);
    if (rc == 0)
        rc = arg_range(op, o, "scale", scale, 0, 1, 1, op->a.crop.scale, w);
    if (rc == 0)
        rc = arg_range(op, o, "ratio", ratio, 0, 100, 1, op->a.crop.ratio, w);
    if (rc == 0)
        rc = map__arg_bool(op, o, "antialias", 1, &op->a.crop.antialias, w);
    return rc;
}

static int parse_resize(struct map_op *op, json_t *o, struct map_why *w)
{
    int rc = map__arg_ints(op, o, "size", 2, 1, SIZE_MAX_SIDE, op->a.crop.size, w);
    if (rc == 0)
        rc = map__arg_bool(op, o, "antialias", 1, &op->a.crop.antialias, w);
    return rc;
}

static int parse_center(struct map_op *op, json_t *o, struct map_why *w)
{
    return map__arg_ints(op, o, "size", 2, 1, SIZE_MAX_SIDE, op->a.crop.size, w);
}

static int spec_sized(const struct map_op *op, void *shared, const struct map_spec *in, struct map_spec *out,
                      struct map_why *w)
{
    int rc = image_in(op, in, w);
    if (rc != 0)
        return rc;
    if (op->def == &map__op_center_crop && in->shape[0] >= 0 && in->shape[1] >= 0 &&
        (in->shape[0] < op->a.crop.size[0] || in->shape[1] < op->a.crop.size[1]))
        return map__why_arg(w, op, "size", ": a %lldx%lld crop of '%s', whose images are %lldx%lld",
                            (long long)op->a.crop.size[0], (long long)op->a.crop.size[1], in->name,
                            (long long)in->shape[0], (long long)in->shape[1]);
    image_out(out, in, op->a.crop.size[0], op->a.crop.size[1]);
    return 0;
}

const struct map_op_def map__op_random_resized_crop = {"random_resized_crop", rrc_keys, 1,    parse_rrc, spec_sized,
                                                       NULL,                  NULL,     NULL, NULL,      NULL};
const struct map_op_def map__op_resize = {"resize", resize_keys, 0,    parse_resize, spec_sized,
                                          NULL,     NULL,        NULL, NULL,         NULL};
const struct map_op_def map__op_center_crop = {"center_crop", center_keys, 0,    parse_center, spec_sized,
                                               NULL,          NULL,        NULL, NULL,         NULL};

/* ---- random_flip ---- */

static const char *const flip_keys[] = {"p", NULL};

static int parse_flip(struct map_op *op, json_t *o, struct map_why *w)
{
    return map__arg_num(op, o, "p", 1, 0.5, 0, 1, &op->a.flip.p, w);
}

static int spec_flip(const struct map_op *op, void *shared, const struct map_spec *in, struct map_spec *out,
                     struct map_why *w)
{
    int rc = image_in(op, in, w);
    if (rc == 0)
        *out = *in;
    return rc;
}

const struct map_op_def map__op_random_flip = {"random_flip", flip_keys, 1,    parse_flip, spec_flip,
                                               NULL,          NULL,      NULL, NULL,       NULL};

/* ---- normalize ---- */

static const char *const norm_keys[] = {"mean", "std", "dtype", "layout", NULL};

/* 1 to 4 numbers, each within (lo, hi] (std) or [lo, hi] (mean). */
static int arg_channels(struct map_op *op, json_t *o, const char *key, int positive, double out[4], int *n,
                        struct map_why *w)
{
    json_t *v = json_object_get(o, key);
    char g[80];
    if (v == NULL)
        return map__why_arg(w, op, key, " is required (one number per channel)");
    int ok = json_is_array(v) && json_array_size(v) >= 1 && json_array_size(v) <= 4;
    for (size_t i = 0; ok && i < json_array_size(v); i++) {
        json_t *e = json_array_get(v, i);
        double x = json_number_value(e);
        ok = json_is_number(e) && (positive ? x > 0 && x <= 1e6 : x >= -1e6 && x <= 1e6);
        out[i] = x;
    }
    if (!ok)
        return map__why_arg(w, op, key, " must be 1 to 4 numbers, one per channel, each %s (got %s)",
                            positive ? "in (0, 1e6]" : "in [-1e6, 1e6]", map__got(v, g, sizeof g));
    *n = (int)json_array_size(v);
    return 0;
}

static int parse_norm(struct map_op *op, json_t *o, struct map_why *w)
{
    int nm = 0, ns = 0;
    char g[80];
    int rc = arg_channels(op, o, "mean", 0, op->a.norm.mean, &nm, w);
    if (rc == 0)
        rc = arg_channels(op, o, "std", 1, op->a.norm.std, &ns, w);
    if (rc == 0 && nm != ns)
        rc = map__why_arg(w, op, "std", " must have as many numbers as 'mean' (%d, got %d)", nm, ns);
    op->a.norm.n = nm;
    json_t *dt = json_object_get(o, "dtype"), *lay = json_object_get(o, "layout");
    if (rc == 0 && dt == NULL)
        rc = json_object_set_new(o, "dtype", json_string("float32")) == 0 ? 0 : SL_ENOMEM;
    else if (rc == 0 && (!json_is_string(dt) || strcmp(json_string_value(dt), "float32") != 0))
        rc = map__why_arg(w, op, "dtype",
                          " must be \"float32\" (got %s; float16 and bfloat16 wait for the wire to carry them)",
                          map__got(dt, g, sizeof g));
    op->a.norm.dtype = MAP_DT_FLOAT32;
    if (rc == 0 && lay == NULL)
        rc = json_object_set_new(o, "layout", json_string("HWC")) == 0 ? 0 : SL_ENOMEM;
    else if (rc == 0 && json_is_string(lay) && strcmp(json_string_value(lay), "HWC") == 0)
        op->a.norm.layout = MAP_LAYOUT_HWC;
    else if (rc == 0 && json_is_string(lay) && strcmp(json_string_value(lay), "CHW") == 0)
        op->a.norm.layout = MAP_LAYOUT_CHW;
    else if (rc == 0)
        rc = map__why_arg(w, op, "layout", " must be \"HWC\" or \"CHW\" (got %s)", map__got(lay, g, sizeof g));
    return rc;
}

static int spec_norm(const struct map_op *op, void *shared, const struct map_spec *in, struct map_spec *out,
                     struct map_why *w)
{
    int rc = image_in(op, in, w);
    if (rc != 0)
        return rc;
    if (in->shape[2] != op->a.norm.n)
        return map__why_arg(w, op, "mean", ": %d numbers for '%s', whose images have %lld channels", op->a.norm.n,
                            in->name, (long long)in->shape[2]);
    *out = *in;
    out->dtype = MAP_DT_FLOAT32;
    if (op->a.norm.layout == MAP_LAYOUT_CHW) {
        out->shape[0] = in->shape[2];
        out->shape[1] = in->shape[0];
        out->shape[2] = in->shape[1];
    }
    return 0;
}

const struct map_op_def map__op_normalize = {"normalize", norm_keys, 0,    parse_norm, spec_norm,
                                             NULL,        NULL,      NULL, NULL,       NULL};
