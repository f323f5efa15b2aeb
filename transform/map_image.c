/* map_image: the image ops' rows (docs/map.md): their arguments parsed and
 * checked, their output specs derived, and their work per element through
 * the image kernels (transform/img.h), each op with a per-thread state of
 * its own (a decoder, the resize scratch, a buffer for decoded pixels).
 *
 * An image is uint8 [H, W, C] (HWC), C 1 or 3; H and W may depend on the
 * data (decode_image's output) until a resize or crop fixes them.
 *
 * A decode_image followed on its feature by a resize or a
 * random_resized_crop is fused with it (map.c): the decode passes the
 * encoded bytes on, and the next op decodes a JPEG at the smallest DCT
 * scale (1/2, 1/4, 1/8) whose decoded box still covers the output, only
 * the rows and columns of its box, then resizes that (only ever shrinking).
 * Its crop box is drawn from the same stream either way. A crop is resized
 * as torchvision's resized_crop does it: cut out, then resized, the filter
 * reaching no pixel outside the cut (at a DCT scale the box's edges fall
 * between pixels: the cut is the box's whole-pixel hull, and the box is
 * resized within it; tests/integration/test_map_images.py computes the
 * same with PIL). Against decoding at full size first a DCT-scaled decode
 * differs by the scaling's rounding (a mean of 1-2.5 of 255 at 1/4,
 * tests/unit/test_img_ops.c).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "img.h"
#include "map_op.h"
#include "sl_alloc.h"

#define SIZE_MAX_SIDE 65536
#define DEFAULT_MAX_PIXELS ((int64_t)64 << 20)

/* An image op's state on one thread. */
struct image_thread {
    struct img_state *st;
    struct map_arena scratch; /* decoded pixels a fused op resizes from */
};

static int image_thread_init(const struct map_op *op, void *shared, void **thread, struct sl_error *err)
{
    struct image_thread *t = sl_calloc(1, sizeof *t);
    if (t == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    int rc = img_state_create(&t->st, err);
    if (rc != 0) {
        sl_free(t);
        return rc;
    }
    *thread = t;
    return 0;
}

static void image_thread_free(const struct map_op *op, void *shared, void *thread)
{
    struct image_thread *t = thread;
    img_state_destroy(t->st);
    sl_free(t->scratch.p);
    sl_free(t);
}

static int no_memory(struct sl_error *err)
{
    return sl_error_set(err, SL_ENOMEM, "out of memory");
}

static void image_tensor(struct map_tensor *out, const uint8_t *data, int64_t h, int64_t w, int64_t c)
{
    *out = (struct map_tensor){
        .dtype = MAP_DT_UINT8, .rank = 3, .shape = {h, w, c}, .data = data, .bytes = (size_t)(h * w * c)};
}

/* The fused way (c->decode set): the encoded image in `in`, its box (a
 * random_resized_crop's draw, or the whole image) decoded at the smallest
 * DCT scale that covers oh x ow, then resized into dst. */
static int decode_resize(struct map_call *c, const struct map_tensor *in, int random, uint8_t *dst, int64_t oh,
                         int64_t ow, struct sl_error *err)
{
    struct image_thread *t = c->thread;
    const struct map_op *d = c->decode;
    int ch = d->a.decode.channels;
    struct img_info info;
    int rc = img_probe(t->st, in->data, in->bytes, (uint64_t)d->a.decode.max_pixels, &info, err);
    if (rc != 0)
        return rc;
    const double *sc = c->op->a.crop.scale, *ra = c->op->a.crop.ratio;
    struct img_box box = random ? img_rrc_box(&c->rng, info.height, info.width, sc[0], sc[1], ra[0], ra[1])
                                : (struct img_box){0, 0, info.height, info.width};
    int denom = img_pick_scale(&info, &box, (uint32_t)oh, (uint32_t)ow);
    size_t cap = img_region_bytes(&info, ch, denom, &box);
    uint8_t *buf = map__arena_reserve(&t->scratch, cap);
    if (buf == NULL)
        return no_memory(err);
    struct img_region got;
    rc = img_decode_region(t->st, in->data, in->bytes, &info, ch, denom, &box, buf, cap, &got, err);
    if (rc != 0)
        return rc;
    double y0, x0, y1, x1;
    img_region_box(&info, denom, &box, &got, &y0, &x0, &y1, &x1);
    return img_resize(t->st, buf, got.height, got.width, ch, y0, x0, y1, x1, dst, (uint32_t)oh, (uint32_t)ow,
                      c->op->a.crop.antialias, err);
}

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
        rc = map__arg_int(op, o, "max_pixels", 1, DEFAULT_MAX_PIXELS, 1, (int64_t)1 << 30, &op->a.decode.max_pixels, w);
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

/* The whole image at full size, or (fused into the next op) the encoded
 * bytes passed on. */
static int run_decode(struct map_call *c, const struct map_tensor *in, struct map_tensor *out, struct sl_error *err)
{
    if (c->pass) {
        *out = *in;
        return 0;
    }
    struct image_thread *t = c->thread;
    int ch = c->op->a.decode.channels;
    struct img_info info;
    int rc = img_probe(t->st, in->data, in->bytes, (uint64_t)c->op->a.decode.max_pixels, &info, err);
    if (rc != 0)
        return rc;
    size_t bytes = (size_t)info.height * info.width * (size_t)ch;
    uint8_t *dst = map__arena_reserve(c->arena, bytes);
    if (dst == NULL)
        return no_memory(err);
    rc = img_decode(t->st, in->data, in->bytes, &info, ch, 1, dst, bytes, err);
    if (rc == 0)
        image_tensor(out, dst, info.height, info.width, ch);
    return rc;
}

const struct map_op_def map__op_decode_image = {
    "decode_image",    decode_keys,       0,    parse_decode, spec_decode, run_decode,
    image_thread_init, image_thread_free, NULL, NULL};

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

/* random_resized_crop (random 1) and resize (0): a box of the image (the
 * draw, or the whole) resized to `size`; fused with a decode_image before
 * it, from the encoded bytes. */
static int run_sized(struct map_call *c, const struct map_tensor *in, struct map_tensor *out, int random,
                     struct sl_error *err)
{
    struct image_thread *t = c->thread;
    int64_t oh = c->op->a.crop.size[0], ow = c->op->a.crop.size[1], ch = c->out_spec->shape[2];
    uint8_t *dst = map__arena_reserve(c->arena, (size_t)(oh * ow * ch));
    if (dst == NULL)
        return no_memory(err);
    int rc;
    if (c->decode != NULL) {
        rc = decode_resize(c, in, random, dst, oh, ow, err);
    } else {
        uint32_t h = (uint32_t)in->shape[0], w = (uint32_t)in->shape[1];
        const double *sc = c->op->a.crop.scale, *ra = c->op->a.crop.ratio;
        struct img_box b =
            random ? img_rrc_box(&c->rng, h, w, sc[0], sc[1], ra[0], ra[1]) : (struct img_box){0, 0, h, w};
        rc = img_resize(t->st, in->data, h, w, (int)ch, (double)b.top, (double)b.left, (double)(b.top + b.height),
                        (double)(b.left + b.width), dst, (uint32_t)oh, (uint32_t)ow, c->op->a.crop.antialias, err);
    }
    if (rc == 0)
        image_tensor(out, dst, oh, ow, ch);
    return rc;
}

static int run_rrc(struct map_call *c, const struct map_tensor *in, struct map_tensor *out, struct sl_error *err)
{
    return run_sized(c, in, out, 1, err);
}

static int run_resize(struct map_call *c, const struct map_tensor *in, struct map_tensor *out, struct sl_error *err)
{
    return run_sized(c, in, out, 0, err);
}

/* torchvision's center_crop: the centred box, padded with 0 where it
 * passes the image's edges. */
static int run_center(struct map_call *c, const struct map_tensor *in, struct map_tensor *out, struct sl_error *err)
{
    int64_t oh = c->op->a.crop.size[0], ow = c->op->a.crop.size[1], ch = in->shape[2];
    uint8_t *dst = map__arena_reserve(c->arena, (size_t)(oh * ow * ch));
    if (dst == NULL)
        return no_memory(err);
    struct img_box b = img_center_box((uint32_t)in->shape[0], (uint32_t)in->shape[1], (uint32_t)oh, (uint32_t)ow);
    img_crop(in->data, (uint32_t)in->shape[0], (uint32_t)in->shape[1], (int)ch, &b, dst);
    image_tensor(out, dst, oh, ow, ch);
    return 0;
}

const struct map_op_def map__op_random_resized_crop = {
    "random_resized_crop", rrc_keys,          1,    parse_rrc, spec_sized, run_rrc,
    image_thread_init,     image_thread_free, NULL, NULL};
const struct map_op_def map__op_resize = {
    "resize", resize_keys, 0, parse_resize, spec_sized, run_resize, image_thread_init, image_thread_free, NULL, NULL};
const struct map_op_def map__op_center_crop = {"center_crop", center_keys, 0,    parse_center, spec_sized,
                                               run_center,    NULL,        NULL, NULL,         NULL};

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

/* Mirrored left to right when the element's one draw u is < p (as
 * torchvision's torch.rand(1) < p); else the image as it came. */
static int run_flip(struct map_call *c, const struct map_tensor *in, struct map_tensor *out, struct sl_error *err)
{
    if (!(sl_rng_uniform(&c->rng) < c->op->a.flip.p)) {
        *out = *in;
        return 0;
    }
    uint8_t *dst = map__arena_reserve(c->arena, in->bytes);
    if (dst == NULL)
        return no_memory(err);
    memcpy(dst, in->data, in->bytes);
    img_flip(dst, (uint32_t)in->shape[0], (uint32_t)in->shape[1], (int)in->shape[2]);
    image_tensor(out, dst, in->shape[0], in->shape[1], in->shape[2]);
    return 0;
}

const struct map_op_def map__op_random_flip = {"random_flip", flip_keys, 1,    parse_flip, spec_flip,
                                               run_flip,      NULL,      NULL, NULL,       NULL};

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
    op->a.norm.dtype = MAP_DT_FLOAT32;
    if (rc == 0 && dt == NULL)
        rc = json_object_set_new(o, "dtype", json_string("float32")) == 0 ? 0 : SL_ENOMEM;
    else if (rc == 0 && json_is_string(dt) && strcmp(json_string_value(dt), "float32") == 0)
        op->a.norm.dtype = MAP_DT_FLOAT32;
    else if (rc == 0 && json_is_string(dt) && strcmp(json_string_value(dt), "float16") == 0)
        op->a.norm.dtype = MAP_DT_FLOAT16;
    else if (rc == 0 && json_is_string(dt) && strcmp(json_string_value(dt), "bfloat16") == 0)
        op->a.norm.dtype = MAP_DT_BFLOAT16;
    else if (rc == 0)
        rc = map__why_arg(w, op, "dtype", " must be \"float32\", \"float16\" or \"bfloat16\" (got %s)",
                          map__got(dt, g, sizeof g));
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
    out->dtype = op->a.norm.dtype;
    if (op->a.norm.layout == MAP_LAYOUT_CHW) {
        out->shape[0] = in->shape[2];
        out->shape[1] = in->shape[0];
        out->shape[2] = in->shape[1];
    }
    return 0;
}

static int run_norm(struct map_call *c, const struct map_tensor *in, struct map_tensor *out, struct sl_error *err)
{
    int64_t h = in->shape[0], w = in->shape[1], ch = in->shape[2];
    float mean[4], std[4];
    for (int k = 0; k < c->op->a.norm.n; k++) {
        mean[k] = (float)c->op->a.norm.mean[k];
        std[k] = (float)c->op->a.norm.std[k];
    }
    enum map_dtype dt = c->op->a.norm.dtype;
    size_t bytes = (size_t)(h * w * ch) * map_dtype_size(dt);
    void *dst = map__arena_reserve(c->arena, bytes);
    if (dst == NULL)
        return no_memory(err);
    int chw = c->op->a.norm.layout == MAP_LAYOUT_CHW;
    if (dt == MAP_DT_FLOAT32)
        img_normalize(in->data, (uint32_t)h, (uint32_t)w, (int)ch, mean, std, chw, dst);
    else /* float16, bfloat16: the float32 values rounded to nearest, ties to even */
        img_normalize16(in->data, (uint32_t)h, (uint32_t)w, (int)ch, mean, std, chw, dt == MAP_DT_BFLOAT16, dst);
    *out = (struct map_tensor){
        .dtype = dt, .rank = 3, .shape = {chw ? ch : h, chw ? h : w, chw ? w : ch}, .data = dst, .bytes = bytes};
    return 0;
}

const struct map_op_def map__op_normalize = {"normalize", norm_keys, 0,    parse_norm, spec_norm,
                                             run_norm,    NULL,      NULL, NULL,       NULL};
