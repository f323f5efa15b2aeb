/* img_decode: probe and decode JPEG and PNG into uint8 HWC (transform/img.h).
 *
 * The per-thread state holds a TurboJPEG handle (whole-image decodes,
 * tjDecompress2), a libjpeg decompressor with an error manager that turns
 * every error and every warning into a longjmp back to the call (headers
 * and region decodes) and the scratch that a gray PNG of colour needs and
 * that img_resize grows. A PNG gets a fresh libspng context per image (it
 * has no reset), its allocations routed through sl_malloc.
 *
 * Every JPEG starts from a fresh decompressor (tjInitDecompress,
 * jpeg_create_decompress: 0.3 and 0.13 us measured here): libjpeg keeps
 * an image's quantisation and Huffman tables for the next image decoded
 * with the same object (abbreviated datastreams), so a file that lacks
 * its tables would decode with the previous image's, and the output would
 * depend on what the thread decoded before (found by fuzz_image).
 *
 * Nothing is sized from a header before width x height is checked against
 * the caller's max_pixels: libjpeg's jpeg_read_header and the PNG IHDR
 * read here allocate nothing per pixel. Progressive JPEGs are limited to
 * 500 scans (TurboJPEG's TJFLAG_LIMITSCANS, the same bound in the libjpeg
 * path's progress monitor) so a crafted file cannot spin for minutes.
 */
#include "img.h"
#include "img_state.h"

#include <setjmp.h>
#include <stdio.h>
#include <inttypes.h>
#include <stdint.h>
#include <string.h>

#include <jpeglib.h>
#include <spng.h>
#include <turbojpeg.h>

#include "sl_alloc.h"

#define IMG_MAX_SCANS 500
#define PNG_CHUNK_MAX (8u << 20)  /* one ancillary chunk (iCCP, text) */
#define PNG_CACHE_MAX (32u << 20) /* all kept ancillary chunks together */

/* ---- libjpeg's error manager: errors and warnings longjmp ---- */

struct jpeg_guard {
    struct jpeg_error_mgr pub;
    struct jpeg_progress_mgr progress;
    jmp_buf jump;
    char msg[JMSG_LENGTH_MAX];
};

static void guard_error_exit(j_common_ptr cinfo)
{
    struct jpeg_guard *g = (struct jpeg_guard *)cinfo->err;
    g->pub.format_message(cinfo, g->msg);
    longjmp(g->jump, 1);
}

/* A warning (level -1: corrupt data libjpeg would skip over) is an error:
 * an image is decoded exactly or refused. Trace messages are dropped. */
static void guard_emit_message(j_common_ptr cinfo, int level)
{
    if (level < 0)
        guard_error_exit(cinfo);
}

static void guard_progress(j_common_ptr cinfo)
{
    j_decompress_ptr d = (j_decompress_ptr)cinfo;
    struct jpeg_guard *g = (struct jpeg_guard *)cinfo->err;
    if (cinfo->is_decompressor && d->input_scan_number > IMG_MAX_SCANS) {
        snprintf(g->msg, sizeof g->msg, "more than %d progressive scans", IMG_MAX_SCANS);
        longjmp(g->jump, 1);
    }
}

struct img_state {
    tjhandle tj;
    struct jpeg_decompress_struct jd;
    struct jpeg_guard guard;
    int jd_ready;
    struct img__scratch scratch;
};

struct img__scratch *img__state_scratch(struct img_state *st)
{
    return &st->scratch;
}

int img__scratch_reserve(struct img__scratch *s, size_t n, struct sl_error *err)
{
    if (n <= s->cap)
        return 0;
    uint8_t *p = sl_malloc(n);
    if (p == NULL)
        return sl_error_set(err, SL_ENOMEM, "image: out of memory for %zu bytes of scratch", n);
    sl_free(s->buf);
    s->buf = p;
    s->cap = n;
    return 0;
}

int img_state_create(struct img_state **out, struct sl_error *err)
{
    *out = NULL;
    struct img_state *st = sl_calloc(1, sizeof *st);
    if (st == NULL)
        return sl_error_set(err, SL_ENOMEM, "image: out of memory for the decoder state");
    st->tj = tjInitDecompress();
    if (st->tj == NULL) {
        sl_free(st);
        return sl_error_set(err, SL_ENOMEM, "JPEG: TurboJPEG could not start: %s", tjGetErrorStr2(NULL));
    }
    st->jd.err = jpeg_std_error(&st->guard.pub);
    st->guard.pub.error_exit = guard_error_exit;
    st->guard.pub.emit_message = guard_emit_message;
    st->guard.progress.progress_monitor = guard_progress;
    *out = st;
    return 0;
}

/* A fresh libjpeg decompressor in st->jd; called after setjmp(st->guard.
 * jump), whose handler must call jd_abort. */
static void jd_fresh(struct img_state *st)
{
    if (st->jd_ready)
        jpeg_destroy_decompress(&st->jd);
    st->jd_ready = 0;
    snprintf(st->guard.msg, sizeof st->guard.msg, "out of memory for a decompressor");
    jpeg_create_decompress(&st->jd);
    st->jd.progress = &st->guard.progress;
    st->jd_ready = 1;
}

/* After a longjmp: the error's code (SL_ENOMEM when the decompressor
 * could not be made) with st->guard.msg; the decompressor reset. */
static int jd_fail(struct img_state *st, struct sl_error *err)
{
    if (!st->jd_ready)
        return sl_error_set(err, SL_ENOMEM, "JPEG: %s", st->guard.msg);
    jpeg_abort_decompress(&st->jd);
    return sl_error_set(err, SL_ECORRUPT, "JPEG: %s", st->guard.msg);
}

void img_state_destroy(struct img_state *st)
{
    if (st == NULL)
        return;
    if (st->jd_ready)
        jpeg_destroy_decompress(&st->jd);
    tjDestroy(st->tj);
    sl_free(st->scratch.buf);
    sl_free(st);
}

/* ---- probe ---- */

static uint32_t load_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static int check_size(const char *fmt, uint32_t w, uint32_t h, uint64_t max_pixels, struct sl_error *err)
{
    if (w == 0 || h == 0)
        return sl_error_set(err, SL_ECORRUPT, "%s: zero-sized image (%" PRIu32 "x%" PRIu32 ")", fmt, w, h);
    uint64_t px = (uint64_t)w * h;
    if (px > max_pixels)
        return sl_error_set(err, SL_ECORRUPT,
                            "%s: %" PRIu32 "x%" PRIu32 " image (%" PRIu64 " pixels) is over max_pixels %" PRIu64, fmt,
                            w, h, px, max_pixels);
    return 0;
}

static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

/* The IHDR chunk, read by hand: no context, no allocation. */
static int probe_png(const uint8_t *d, size_t n, uint64_t max_pixels, struct img_info *info, struct sl_error *err)
{
    if (n < 33)
        return sl_error_set(err, SL_ECORRUPT, "PNG: truncated header (%zu bytes, IHDR needs 33)", n);
    if (load_be32(d + 8) != 13 || memcmp(d + 12, "IHDR", 4) != 0)
        return sl_error_set(err, SL_ECORRUPT, "PNG: first chunk is not a 13-byte IHDR");
    uint32_t w = load_be32(d + 16), h = load_be32(d + 20);
    int depth = d[24], type = d[25];
    if (w > 0x7fffffffu || h > 0x7fffffffu)
        return sl_error_set(err, SL_ECORRUPT, "PNG: width or height over 2^31-1 (%" PRIu32 "x%" PRIu32 ")", w, h);
    int ok;
    switch (type) {
    case 0: ok = depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16; break;
    case 3: ok = depth == 1 || depth == 2 || depth == 4 || depth == 8; break;
    case 2:
    case 4:
    case 6: ok = depth == 8 || depth == 16; break;
    default: return sl_error_set(err, SL_ECORRUPT, "PNG: unknown colour type %d", type);
    }
    if (!ok)
        return sl_error_set(err, SL_ECORRUPT, "PNG: bit depth %d is invalid for colour type %d", depth, type);
    if (d[26] != 0 || d[27] != 0 || d[28] > 1)
        return sl_error_set(err, SL_ECORRUPT, "PNG: unknown compression, filter or interlace method (%d, %d, %d)",
                            d[26], d[27], d[28]);
    int rc = check_size("PNG", w, h, max_pixels, err);
    if (rc != 0)
        return rc;
    *info = (struct img_info){.format = IMG_PNG,
                              .width = w,
                              .height = h,
                              .colors = type == 0 || type == 4 ? 1 : 3,
                              .alpha = type == 4 || type == 6,
                              .depth = depth};
    return 0;
}

/* libjpeg's header read, in the state's decompressor. After a longjmp the
 * decompressor is reset by jpeg_abort_decompress. */
static int probe_jpeg(struct img_state *st, const uint8_t *d, size_t n, uint64_t max_pixels, struct img_info *info,
                      struct sl_error *err)
{
    struct jpeg_decompress_struct *jd = &st->jd;
    if (setjmp(st->guard.jump))
        return jd_fail(st, err);
    jd_fresh(st);
    jpeg_mem_src(jd, d, (unsigned long)n);
    jpeg_read_header(jd, TRUE);
    uint32_t w = jd->image_width, h = jd->image_height;
    J_COLOR_SPACE cs = jd->jpeg_color_space;
    int progressive = jd->progressive_mode, comps = jd->num_components;
    jpeg_abort_decompress(jd);
    if (cs == JCS_CMYK || cs == JCS_YCCK)
        return sl_error_set(err, SL_ECORRUPT, "JPEG: %s colour is not supported (convert the image to RGB)",
                            cs == JCS_CMYK ? "CMYK" : "YCCK");
    if (cs != JCS_GRAYSCALE && cs != JCS_YCbCr && cs != JCS_RGB)
        return sl_error_set(err, SL_ECORRUPT, "JPEG: %d-component colour space %d is not supported", comps, (int)cs);
    int rc = check_size("JPEG", w, h, max_pixels, err);
    if (rc != 0)
        return rc;
    *info = (struct img_info){.format = IMG_JPEG,
                              .width = w,
                              .height = h,
                              .colors = cs == JCS_GRAYSCALE ? 1 : 3,
                              .depth = 8,
                              .progressive = progressive};
    return 0;
}

int img_probe(struct img_state *st, const uint8_t *data, size_t n, uint64_t max_pixels, struct img_info *info,
              struct sl_error *err)
{
    memset(info, 0, sizeof *info);
    if (max_pixels < 1 || max_pixels > (UINT64_C(1) << 40))
        return sl_error_set(err, SL_EINVAL, "image: max_pixels %" PRIu64 " is outside 1 .. 2^40", max_pixels);
    if (n >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff)
        return probe_jpeg(st, data, n, max_pixels, info, err);
    if (n >= 8 && memcmp(data, png_sig, 8) == 0)
        return probe_png(data, n, max_pixels, info, err);
    return sl_error_set(err, SL_ECORRUPT, "image: unknown format (not JPEG or PNG; %zu bytes)", n);
}

void img_scaled_size(const struct img_info *info, int denom, uint32_t *height, uint32_t *width)
{
    uint32_t d = info->format == IMG_JPEG && (denom == 2 || denom == 4 || denom == 8) ? (uint32_t)denom : 1;
    *height = (uint32_t)(((uint64_t)info->height + d - 1) / d);
    *width = (uint32_t)(((uint64_t)info->width + d - 1) / d);
}

int img_pick_scale(const struct img_info *info, const struct img_box *box, uint32_t out_h, uint32_t out_w)
{
    if (info->format != IMG_JPEG)
        return 1;
    for (int d = 8; d > 1; d /= 2)
        if (box->height >= (int64_t)out_h * d && box->width >= (int64_t)out_w * d)
            return d;
    return 1;
}

/* ---- decode ---- */

static int check_args(const struct img_info *info, int channels, int denom, size_t cap, struct sl_error *err)
{
    if (channels != 1 && channels != 3)
        return sl_error_set(err, SL_EINVAL, "image: channels must be 1 or 3 (got %d)", channels);
    if (denom != 1 && denom != 2 && denom != 4 && denom != 8)
        return sl_error_set(err, SL_EINVAL, "image: scale must be 1/1, 1/2, 1/4 or 1/8 (got 1/%d)", denom);
    if (info->format == IMG_PNG && denom != 1)
        return sl_error_set(err, SL_EINVAL, "PNG: a scaled decode (1/%d) is for JPEG only", denom);
    if (info->format != IMG_PNG && info->format != IMG_JPEG)
        return sl_error_set(err, SL_EINVAL, "image: not a probed JPEG or PNG");
    uint32_t h, w;
    img_scaled_size(info, denom, &h, &w);
    uint64_t need = (uint64_t)h * w * (uint64_t)channels;
    if (need > cap)
        return sl_error_set(err, SL_EINVAL, "image: output of %" PRIu64 " bytes does not fit %zu", need, cap);
    return 0;
}

static int decode_jpeg(struct img_state *st, const uint8_t *data, size_t n, const struct img_info *info, int channels,
                       int denom, uint8_t *out, struct sl_error *err)
{
    int w = 0, h = 0, sub = 0, cs = 0;
    tjhandle fresh = tjInitDecompress();
    if (fresh == NULL)
        return sl_error_set(err, SL_ENOMEM, "JPEG: out of memory for a decompressor");
    tjDestroy(st->tj);
    st->tj = fresh;
    /* the header again, in TurboJPEG this time: the output is sized from info */
    if (tjDecompressHeader3(st->tj, data, (unsigned long)n, &w, &h, &sub, &cs) != 0)
        return sl_error_set(err, SL_ECORRUPT, "JPEG: %s", tjGetErrorStr2(st->tj));
    if ((uint32_t)w != info->width || (uint32_t)h != info->height || cs == TJCS_CMYK || cs == TJCS_YCCK)
        return sl_error_set(err, SL_EINVAL, "JPEG: header differs from the probe's (%dx%d)", w, h);
    uint32_t sh, sw;
    img_scaled_size(info, denom, &sh, &sw);
    int flags = TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS;
    if (tjDecompress2(st->tj, data, (unsigned long)n, out, (int)sw, (int)sw * channels, (int)sh,
                      channels == 3 ? TJPF_RGB : TJPF_GRAY, flags) != 0)
        return sl_error_set(err, SL_ECORRUPT, "JPEG: %s", tjGetErrorStr2(st->tj));
    return 0;
}

/* libspng's allocations through sl_malloc; a failed one is remembered for
 * the thread's decode in progress, since libspng reports zlib's failure
 * to allocate as a damaged stream */
static _Thread_local int png_alloc_failed;

static void *png_malloc(size_t n)
{
    void *p = sl_malloc(n);
    png_alloc_failed |= p == NULL;
    return p;
}

static void *png_realloc(void *q, size_t n)
{
    void *p = sl_realloc(q, n);
    png_alloc_failed |= p == NULL;
    return p;
}

static void *png_calloc(size_t count, size_t n)
{
    void *p = sl_calloc(count, n);
    png_alloc_failed |= p == NULL;
    return p;
}

static struct spng_alloc png_alloc = {png_malloc, png_realloc, png_calloc, sl_free};

static int png_error(int rc, const char *what, struct sl_error *err)
{
    if (rc == SPNG_EMEM || png_alloc_failed)
        return sl_error_set(err, SL_ENOMEM, "PNG: out of memory (%s)", what);
    return sl_error_set(err, SL_ECORRUPT, "PNG: %s (%s)", spng_strerror(rc), what);
}

/* Gray from RGB as PIL's convert("L"), in place (dst may equal src). */
static void rgb_to_gray(const uint8_t *src, uint8_t *dst, size_t pixels)
{
    for (size_t i = 0; i < pixels; i++) {
        const uint8_t *p = src + 3 * i;
        dst[i] = (uint8_t)((19595u * p[0] + 38470u * p[1] + 7471u * p[2] + 0x8000u) >> 16);
    }
}

static int decode_png(struct img_state *st, const uint8_t *data, size_t n, const struct img_info *info, int channels,
                      uint8_t *out, struct sl_error *err)
{
    png_alloc_failed = 0;
    spng_ctx *ctx = spng_ctx_new2(&png_alloc, 0);
    if (ctx == NULL)
        return sl_error_set(err, SL_ENOMEM, "PNG: out of memory for a decoder");
    int rc = 0, e;
    if ((e = spng_set_image_limits(ctx, info->width, info->height)) != 0 ||
        (e = spng_set_chunk_limits(ctx, PNG_CHUNK_MAX, PNG_CACHE_MAX)) != 0 ||
        (e = spng_set_png_buffer(ctx, data, n)) != 0) {
        rc = png_error(e, "setup", err);
        goto out_free_ctx;
    }
    struct spng_ihdr ihdr;
    if ((e = spng_get_ihdr(ctx, &ihdr)) != 0) {
        rc = png_error(e, "header", err);
        goto out_free_ctx;
    }
    if (ihdr.width != info->width || ihdr.height != info->height) {
        rc = sl_error_set(err, SL_EINVAL, "PNG: header differs from the probe's");
        goto out_free_ctx;
    }
    size_t pixels = (size_t)info->width * info->height;
    /* libspng's G8 is for gray without alpha, 1 to 8 bits (scaled up) */
    int gray_direct = channels == 1 && info->colors == 1 && !info->alpha && info->depth <= 8;
    int fmt = gray_direct ? SPNG_FMT_G8 : SPNG_FMT_RGB8;
    uint8_t *dst = out;
    if (channels == 1 && !gray_direct) {
        rc = img__scratch_reserve(&st->scratch, pixels * 3, err);
        if (rc != 0)
            goto out_free_ctx;
        dst = st->scratch.buf;
    }
    size_t len = 0;
    if ((e = spng_decoded_image_size(ctx, fmt, &len)) != 0) {
        rc = png_error(e, "size", err);
        goto out_free_ctx;
    }
    if (len != pixels * (fmt == SPNG_FMT_G8 ? 1 : 3)) {
        rc = sl_error_set(err, SL_ECORRUPT, "PNG: decoded size %zu is not %zu pixels", len, pixels);
        goto out_free_ctx;
    }
    if ((e = spng_decode_image(ctx, dst, len, fmt, 0)) != 0) {
        rc = png_error(e, "image data", err);
        goto out_free_ctx;
    }
    if (dst != out)
        rgb_to_gray(dst, out, pixels);
out_free_ctx:
    spng_ctx_free(ctx);
    return rc;
}

int img_decode(struct img_state *st, const uint8_t *data, size_t n, const struct img_info *info, int channels,
               int denom, uint8_t *out, size_t cap, struct sl_error *err)
{
    int rc = check_args(info, channels, denom, cap, err);
    if (rc != 0)
        return rc;
    if (info->format == IMG_JPEG)
        return decode_jpeg(st, data, n, info, channels, denom, out, err);
    return decode_png(st, data, n, info, channels, out, err);
}

/* ---- region decode (libjpeg) ---- */

static int64_t floor_div(int64_t a, int64_t b)
{
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

/* The rows and columns of the scaled image that cover box: [floor(top *
 * sh / H), ceil((top + height) * sh / H)), the same for columns. */
static void scaled_span(int64_t lo, int64_t len, uint32_t full, uint32_t scaled, uint32_t *a, uint32_t *b)
{
    /* one pixel of margin each side, so that no pixel of the box sits at
     * the cut, where libjpeg's fancy upsampling has no neighbour */
    int64_t s0 = floor_div(lo * scaled, full) - 1;
    int64_t s1 = -floor_div(-(lo + len) * (int64_t)scaled, full) + 1;
    if (s0 < 0)
        s0 = 0;
    if (s1 > scaled)
        s1 = scaled;
    if (s1 <= s0)
        s1 = s0 + 1;
    *a = (uint32_t)s0;
    *b = (uint32_t)s1;
}

static int region_jpeg(struct img_state *st, const uint8_t *data, size_t n, const struct img_info *info, int channels,
                       int denom, const struct img_box *box, uint8_t *out, size_t cap, struct img_region *got,
                       struct sl_error *err)
{
    struct jpeg_decompress_struct *jd = &st->jd;
    uint32_t sh, sw, r0, r1, c0, c1;
    img_scaled_size(info, denom, &sh, &sw);
    scaled_span(box->top, box->height, info->height, sh, &r0, &r1);
    scaled_span(box->left, box->width, info->width, sw, &c0, &c1);
    if (setjmp(st->guard.jump))
        return jd_fail(st, err);
    jd_fresh(st);
    jpeg_mem_src(jd, data, (unsigned long)n);
    jpeg_read_header(jd, TRUE);
    if (jd->image_width != info->width || jd->image_height != info->height || jd->jpeg_color_space == JCS_CMYK ||
        jd->jpeg_color_space == JCS_YCCK) {
        jpeg_abort_decompress(jd);
        return sl_error_set(err, SL_EINVAL, "JPEG: header differs from the probe's");
    }
    jd->out_color_space = channels == 3 ? JCS_RGB : JCS_GRAYSCALE;
    jd->scale_num = 1;
    jd->scale_denom = (unsigned)denom;
    jd->dct_method = JDCT_ISLOW;
    jpeg_start_decompress(jd);
    if (jd->output_width != sw || jd->output_height != sh || jd->output_components != channels) {
        jpeg_abort_decompress(jd);
        return sl_error_set(err, SL_EINVAL, "JPEG: scaled size %ux%u is not the expected %" PRIu32 "x%" PRIu32,
                            jd->output_width, jd->output_height, sw, sh);
    }
    /* a progressive image is decoded whole rows from the top: libjpeg's
     * block smoothing of an image whose later scans are missing reads the
     * neighbouring blocks, which a cut or a skip would change */
    int whole_rows = jd->progressive_mode;
    JDIMENSION xoff = c0, cw = c1 - c0;
    if (whole_rows) {
        xoff = 0;
        cw = sw;
    } else if (xoff != 0 || cw != sw) {
        jpeg_crop_scanline(jd, &xoff, &cw);
    }
    size_t pitch = (size_t)cw * (size_t)channels;
    if ((uint64_t)pitch * (r1 - r0) > cap) {
        jpeg_abort_decompress(jd);
        return sl_error_set(err, SL_EINVAL, "image: region of %zu bytes does not fit %zu", pitch * (r1 - r0), cap);
    }
    if (r0 > 0 && !whole_rows && jpeg_skip_scanlines(jd, r0) != r0)
        longjmp(st->guard.jump, 1); /* unreachable: a short skip raises a warning first */
    while (jd->output_scanline < r1) {
        /* rows above the region (progressive) land in the first row's place */
        JSAMPROW row = out + (jd->output_scanline < r0 ? 0 : (size_t)(jd->output_scanline - r0) * pitch);
        if (jpeg_read_scanlines(jd, &row, 1) != 1) {
            snprintf(st->guard.msg, sizeof st->guard.msg, "no scanline %u", jd->output_scanline);
            longjmp(st->guard.jump, 1);
        }
    }
    if (r1 == sh)
        jpeg_finish_decompress(jd); /* to the EOI marker, as a whole decode reads */
    else
        jpeg_abort_decompress(jd); /* the rows below the region are not decoded */
    /* a cut column has no neighbour on one side for the chroma's fancy
     * upsampling: it differs from the whole decode, so it is left out (the
     * margin keeps the box covered) */
    uint32_t cut_left = xoff > 0, cut_right = xoff + cw < sw;
    if (cw <= cut_left + cut_right)
        cut_left = cut_right = 0;
    if (cut_left + cut_right > 0) {
        size_t keep = (size_t)(cw - cut_left - cut_right) * (size_t)channels;
        for (uint32_t y = 0; y < r1 - r0; y++)
            memmove(out + y * keep, out + y * pitch + cut_left * (size_t)channels, keep);
    }
    *got =
        (struct img_region){.top = r0, .left = xoff + cut_left, .height = r1 - r0, .width = cw - cut_left - cut_right};
    return 0;
}

int img_decode_region(struct img_state *st, const uint8_t *data, size_t n, const struct img_info *info, int channels,
                      int denom, const struct img_box *box, uint8_t *out, size_t cap, struct img_region *got,
                      struct sl_error *err)
{
    memset(got, 0, sizeof *got);
    int rc = check_args(info, channels, denom, SIZE_MAX, err);
    if (rc != 0)
        return rc;
    if (box->top < 0 || box->left < 0 || box->height < 1 || box->width < 1 ||
        box->top + box->height > (int64_t)info->height || box->left + box->width > (int64_t)info->width)
        return sl_error_set(err, SL_EINVAL,
                            "image: box %" PRId64 "x%" PRId64 " at (%" PRId64 ", %" PRId64
                            ") is not inside the %" PRIu32 "x%" PRIu32 " image",
                            box->width, box->height, box->left, box->top, info->width, info->height);
    if (info->format == IMG_PNG) {
        rc = check_args(info, channels, denom, cap, err);
        if (rc != 0)
            return rc;
        rc = decode_png(st, data, n, info, channels, out, err);
        if (rc == 0)
            *got = (struct img_region){.height = info->height, .width = info->width};
        return rc;
    }
    return region_jpeg(st, data, n, info, channels, denom, box, out, cap, got, err);
}

size_t img_region_bytes(const struct img_info *info, int channels, int denom, const struct img_box *box)
{
    uint32_t sh, sw, r0, r1, c0, c1;
    img_scaled_size(info, denom, &sh, &sw);
    if (info->format != IMG_JPEG || box->top < 0 || box->left < 0 || box->height < 1 || box->width < 1 ||
        box->top + box->height > (int64_t)info->height || box->left + box->width > (int64_t)info->width)
        return (size_t)sh * sw * (size_t)channels;
    scaled_span(box->top, box->height, info->height, sh, &r0, &r1);
    scaled_span(box->left, box->width, info->width, sw, &c0, &c1);
    /* jpeg_crop_scanline moves the left edge down to an iMCU boundary:
     * at most 31 columns (4 x 8 samples) */
    uint32_t cols = c1 - c0 + 31 < sw && !info->progressive ? c1 - c0 + 31 : sw;
    return (size_t)(r1 - r0) * cols * (size_t)channels;
}

static double clampd(double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

void img_region_box(const struct img_info *info, int denom, const struct img_box *box, const struct img_region *got,
                    double *y0, double *x0, double *y1, double *x1)
{
    uint32_t sh, sw;
    img_scaled_size(info, denom, &sh, &sw);
    double fy = (double)sh / info->height, fx = (double)sw / info->width;
    *y0 = clampd((double)box->top * fy - got->top, 0, got->height);
    *y1 = clampd((double)(box->top + box->height) * fy - got->top, 0, got->height);
    *x0 = clampd((double)box->left * fx - got->left, 0, got->width);
    *x1 = clampd((double)(box->left + box->width) * fx - got->left, 0, got->width);
}
