/* img: the image kernels of the map stage (issue #27): probe, decode,
 * crop boxes, resize, flip, normalize. Pure functions over caller-owned
 * buffers: no job, no JSON, no element.
 *
 * Images are uint8 HWC (row-major, `c` channels interleaved: 1 gray or 3
 * RGB), `h` rows of `w * c` bytes with no padding between rows.
 *
 * A decode is two calls: img_probe reads the header only (format, size,
 * colour) and refuses, before anything is allocated, a size over the
 * caller's max_pixels, a zero size and a format it does not know; the
 * caller then sizes its output from img_scaled_size and calls img_decode
 * (or img_decode_region, which decodes only the rows and columns a crop
 * box needs) with the same bytes. JPEG: libjpeg-turbo's TurboJPEG API
 * (tjDecompressHeader3, tjDecompress2) for whole images, libjpeg's own API
 * (jpeg_crop_scanline, jpeg_skip_scanlines, both in libjpeg-turbo 2.1's
 * <jpeglib.h>) for regions; PNG: libspng. Accurate DCT and fancy
 * upsampling (libjpeg's defaults, as PIL decodes), so a decode equals
 * PIL's to the byte for the same file.
 *
 * Errors: every data refusal (damaged, truncated, unsupported, too big) is
 * SL_ECORRUPT with a message that starts with "JPEG: " or "PNG: " and
 * names what is wrong (libjpeg's and libspng's own text where they found
 * it, e.g. "JPEG: Premature end of JPEG file"); a libjpeg warning (corrupt
 * data it would skip over) is an error too, so an image is either decoded
 * exactly or refused. SL_EINVAL: a bad argument (a scale not 1, 2, 4 or 8,
 * a buffer too small); SL_ENOMEM: an allocation failed.
 *
 * Thread-safety: a struct img_state belongs to one thread at a time (it
 * holds the TurboJPEG and libjpeg decoders and the resize scratch); every
 * other function touches only its arguments.
 */
#ifndef IMG_H
#define IMG_H

#include <stddef.h>
#include <stdint.h>

#include "sl_error.h"
#include "sl_rng.h"

#define IMG_MAX_PIXELS_DEFAULT (UINT64_C(64) << 20) /* 64 Mi pixels */
#define IMG_RESIZE_MAX 65536                        /* img_resize's output, on a side */

enum img_format {
    IMG_UNKNOWN = 0,
    IMG_JPEG = 1,
    IMG_PNG = 2,
};

/* What a header says (img_probe). `colors`: the file's colour channels
 * (1 gray, 3 colour; a PNG palette counts as 3; alpha not counted).
 * `depth`: bits per sample (JPEG 8; PNG 1, 2, 4, 8 or 16). */
struct img_info {
    int format;
    uint32_t width, height;
    int colors;
    int alpha;
    int depth;
    int progressive; /* JPEG only: a progressive (SOF2) scan */
};

/* A crop box in pixels of an image: rows [top, top + height), columns
 * [left, left + width). top/left may be negative and the box may pass
 * the image's edges only where a function says so (img_crop pads). */
struct img_box {
    int64_t top, left;
    int64_t height, width;
};

/* The part of an image img_decode_region decoded, in pixels of the image
 * at the scale decoded: rows [top, top + height), columns [left, left +
 * width) of the scaled image, stored as an HWC image of width `width`. */
struct img_region {
    uint32_t top, left;
    uint32_t height, width;
};

/* The per-thread decoder and scratch state. Created once per thread;
 * grows its scratch to the largest resize seen and keeps it. */
struct img_state;

/* 0, or SL_ENOMEM / SL_EIO (TurboJPEG could not start) with err set. */
int img_state_create(struct img_state **out, struct sl_error *err) SL_MUST_CHECK;
/* Accepts NULL. */
void img_state_destroy(struct img_state *st);

/* The header of the n bytes at data into *info. Refused (SL_ECORRUPT,
 * nothing allocated for the pixels): not a JPEG or PNG ("image: unknown
 * format (not JPEG or PNG)"), a damaged header, a zero width or height,
 * width x height over max_pixels (1 .. 2^40). A JPEG in CMYK or YCCK is
 * refused here ("JPEG: CMYK colour is not supported"): no conversion.
 * Reads only the header: a truncated or damaged image body is found by
 * the decode. */
int img_probe(struct img_state *st, const uint8_t *data, size_t n, uint64_t max_pixels, struct img_info *info,
              struct sl_error *err) SL_MUST_CHECK;

/* The size of the image decoded at 1/denom (denom 1, 2, 4 or 8; JPEG
 * only, 1 for PNG): ceil(width / denom) x ceil(height / denom), as
 * libjpeg scales. */
void img_scaled_size(const struct img_info *info, int denom, uint32_t *height, uint32_t *width);

/* The largest denom in {8, 4, 2, 1} (1 for PNG) at which `box` (in pixels
 * of the full image) still covers an out_h x out_w output: box->height >=
 * out_h * denom and box->width >= out_w * denom, so a crop resized to the
 * output is only ever shrunk, never enlarged, by the smaller decode. */
int img_pick_scale(const struct img_info *info, const struct img_box *box, uint32_t out_h, uint32_t out_w);

/* Decode the whole image at 1/denom into out (cap bytes, at least
 * scaled height * width * channels), channels 1 (gray: a colour JPEG's
 * luma plane; a colour PNG by PIL's L = (19595 R + 38470 G + 7471 B +
 * 2^15) >> 16) or 3 (RGB; gray replicated). 16-bit PNG samples keep
 * their high byte; a palette is expanded; alpha is dropped (not
 * composited); tRNS is ignored. `info` is img_probe's for the same bytes.
 * On error out holds garbage. */
int img_decode(struct img_state *st, const uint8_t *data, size_t n, const struct img_info *info, int channels,
               int denom, uint8_t *out, size_t cap, struct sl_error *err) SL_MUST_CHECK;

/* Decode at 1/denom only the part of the image that `box` (in pixels of
 * the FULL image, inside it) covers: for a JPEG the rows and columns of
 * the scaled image that the box scaled by (scaled size / full size)
 * touches, plus one pixel of margin each side where the image has it,
 * the columns widened to libjpeg's iMCU boundary (jpeg_crop_scanline);
 * rows above are skipped (jpeg_skip_scanlines), rows below not decoded
 * (so damage there is not seen); a progressive JPEG is decoded in whole
 * rows from the top down to the region's last (libjpeg's block smoothing
 * of missing scans reads neighbouring blocks). Every pixel in the region equals the
 * whole image's decode. For a PNG: the whole image (denom must be 1).
 * *got says where the decoded part lies in the scaled image; out is
 * got->height x got->width x channels, cap at least
 * img_region_bytes(info, channels, denom, box). Otherwise as img_decode. */
int img_decode_region(struct img_state *st, const uint8_t *data, size_t n, const struct img_info *info, int channels,
                      int denom, const struct img_box *box, uint8_t *out, size_t cap, struct img_region *got,
                      struct sl_error *err) SL_MUST_CHECK;

/* An upper bound of the bytes img_decode_region writes for box (the
 * whole scaled image's for a PNG or a box not inside the image). */
size_t img_region_bytes(const struct img_info *info, int channels, int denom, const struct img_box *box);

/* Where box (in pixels of the full image) lies in the part img_decode_region
 * decoded at 1/denom (*got): the box scaled by (scaled size / full size),
 * less the region's origin, clamped to the region; the arguments of
 * img_resize over the region's pixels. */
void img_region_box(const struct img_info *info, int denom, const struct img_box *box, const struct img_region *got,
                    double *y0, double *x0, double *y1, double *x1);

/* torchvision's RandomResizedCrop.get_params for an image of height x
 * width (both >= 1): up to 10 attempts, each drawing (in this order)
 * s = sl_rng_range(scale_lo, scale_hi), then
 * r = exp(sl_rng_range(log(ratio_lo), log(ratio_hi))); target area
 * A = height * width * s, w = round(sqrt(A * r)), h = round(sqrt(A / r))
 * (round half to even, as Python's round); when 0 < w <= width and 0 < h
 * <= height, then top = sl_rng_below(height - h + 1), then left =
 * sl_rng_below(width - w + 1), and the box is returned. After 10 misses:
 * the centred crop of the whole image with its ratio clamped to
 * [ratio_lo, ratio_hi] (w = width, h = round(w / ratio_lo) when narrower;
 * h = height, w = round(h * ratio_hi) when wider), top = (height - h) / 2,
 * left = (width - w) / 2 (floor). Doubles throughout (torchvision's
 * float32 log-ratio is not copied). Arguments: 0 < scale_lo <= scale_hi,
 * 0 < ratio_lo <= ratio_hi (the caller validated them). */
struct img_box img_rrc_box(struct sl_rng *rng, uint32_t height, uint32_t width, double scale_lo, double scale_hi,
                           double ratio_lo, double ratio_hi);

/* torchvision's center_crop box: top = round((height - out_h) / 2), left
 * = round((width - out_w) / 2) (half to even); negative (the box passes
 * the edges) when the output is larger than the image. */
struct img_box img_center_box(uint32_t height, uint32_t width, uint32_t out_h, uint32_t out_w);

/* Copy box of src (h x w x c) into dst (box->height x box->width x c);
 * pixels of the box outside src are 0 (torchvision pads center_crop so).
 * box->height and ->width must be >= 1 and their product with c fit in
 * memory (the caller sized dst from them). */
void img_crop(const uint8_t *src, uint32_t h, uint32_t w, int c, const struct img_box *box, uint8_t *dst);

/* Resize the region [y0, y1) x [x0, x1) of src (h x w x c, coordinates in
 * pixels, fractional allowed: 0 <= y0 < y1 <= h, 0 <= x0 < x1 <= w) to
 * dst (out_h x out_w x c), bilinear as PIL's Image.resize(BILINEAR, box=)
 * (reducing_gap None): pixel centres at +0.5, a triangle filter, widened
 * by the scale factor when shrinking if `antialias` (torchvision
 * antialias=True), of support 1 otherwise; horizontal pass first into a
 * uint8 scratch of the rows the vertical pass needs, 22-bit fixed-point
 * weights (SSE2 where built for x86-64: the same bytes). Allocates only
 * by growing st's scratch (SL_ENOMEM). SL_EINVAL for a box outside src
 * (or NaN), an output size of 0 or over IMG_RESIZE_MAX on a side. */
int img_resize(struct img_state *st, const uint8_t *src, uint32_t h, uint32_t w, int c, double y0, double x0, double y1,
               double x1, uint8_t *dst, uint32_t out_h, uint32_t out_w, int antialias,
               struct sl_error *err) SL_MUST_CHECK;

/* Mirror an h x w x c image left to right, in place. */
void img_flip(uint8_t *img, uint32_t h, uint32_t w, int c);

/* float32 (x / 255 - mean[k]) / std[k] for channel k, computed in float
 * as torchvision's ToTensor then Normalize compute it; out is HWC (chw 0)
 * or CHW (chw 1), h * w * c floats. std[k] != 0 (the caller checked). */
void img_normalize(const uint8_t *src, uint32_t h, uint32_t w, int c, const float *mean, const float *std, int chw,
                   float *out);
/* The same values narrowed to float16 (bf16 0) or bfloat16 (bf16 1), to
 * nearest, ties to even (sl_half.h): h * w * c 2-byte values. */
void img_normalize16(const uint8_t *src, uint32_t h, uint32_t w, int c, const float *mean, const float *std, int chw,
                     int bf16, uint16_t *out);

/* Decode each of `count` images (JPEG or PNG, in memory) `rounds` times
 * at 1/denom to 3 channels, one thread: *per_s gets images per second;
 * the first error stops it (its message names the image's index). */
int img_bench_decode(const uint8_t *const *data, const size_t *sizes, size_t count, int rounds, int denom,
                     double *per_s, struct sl_error *err) SL_MUST_CHECK;

#endif
