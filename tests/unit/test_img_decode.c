/* transform/img_decode.c: probe and decode of JPEG (TurboJPEG, libjpeg
 * regions) and PNG (libspng) against PIL's decodes of the same files
 * (tests/data/images, made by make_images.py), images encoded here with
 * tjCompress2 and libspng's encoder, and the damaged-image corpus: every
 * file decoded exactly or refused with its exact message. */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include <spng.h>
#include <turbojpeg.h>

#include "img.h"
#include "sl_alloc.h"
#include "sl_test.h"

#define DATA SL_TEST_DATA "/images/"

static uint8_t *load(const char *name, size_t *n)
{
    uint8_t *b = sl_test_read(name, n);
    ck_assert_msg(b != NULL, "read %s", name);
    return b;
}

static struct img_state *state(void)
{
    struct img_state *st;
    struct sl_error err = {0};
    ck_assert_int_eq(img_state_create(&st, &err), 0);
    return st;
}

/* Probe and decode path at 1/denom to channels; the image in a new buffer
 * (*h, *w set), or NULL with rc and err set. */
static uint8_t *decode_file(struct img_state *st, const char *path, int channels, int denom, uint32_t *h, uint32_t *w,
                            int *rc, struct sl_error *err)
{
    size_t n;
    uint8_t *data = load(path, &n);
    struct img_info info;
    uint8_t *out = NULL;
    *rc = img_probe(st, data, n, IMG_MAX_PIXELS_DEFAULT, &info, err);
    if (*rc == 0) {
        img_scaled_size(&info, denom, h, w);
        size_t cap = (size_t)*h * *w * channels;
        out = malloc(cap);
        *rc = img_decode(st, data, n, &info, channels, denom, out, cap, err);
        if (*rc != 0) {
            free(out);
            out = NULL;
        }
    }
    free(data);
    return out;
}

static void assert_same(const uint8_t *a, const uint8_t *b, size_t n, int tol)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(abs((int)a[i] - (int)b[i]) <= tol, "byte %zu: %d vs %d", i, a[i], b[i]);
}

/* decode path, compare with PIL's raw decode ref, exactly (the same
 * libjpeg-turbo: Debian's python3-pil links libjpeg62-turbo) */
static void check_vs_pil(const char *path, const char *ref, int channels, int denom, uint32_t eh, uint32_t ew)
{
    struct img_state *st = state();
    struct sl_error err = {0};
    uint32_t h, w;
    int rc;
    uint8_t *img = decode_file(st, path, channels, denom, &h, &w, &rc, &err);
    ck_assert_msg(rc == 0, "%s: %s", path, err.msg);
    ck_assert_uint_eq(h, eh);
    ck_assert_uint_eq(w, ew);
    size_t rn;
    uint8_t *want = load(ref, &rn);
    ck_assert_uint_eq(rn, (size_t)h * w * channels);
    assert_same(img, want, rn, 0);
    free(want);
    free(img);
    img_state_destroy(st);
}

START_TEST(test_jpeg_vs_pil)
{
    check_vs_pil(DATA "rgb_q95.jpg", DATA "rgb_q95.jpg.raw", 3, 1, 29, 37);
    /* PIL's draft(): libjpeg's DCT scaling at 1/2, sizes rounded up */
    check_vs_pil(DATA "rgb_q95.jpg", DATA "rgb_q95.jpg.half.raw", 3, 2, 15, 19);
    check_vs_pil(DATA "gray.jpg", DATA "gray.jpg.raw", 1, 1, 17, 23);
    check_vs_pil(DATA "progressive.jpg", DATA "progressive.jpg.raw", 3, 1, 24, 40);
}
END_TEST

START_TEST(test_png_vs_pil)
{
    check_vs_pil(DATA "rgb.png", DATA "rgb.png.raw", 3, 1, 29, 37);
    /* RGBA: alpha dropped, the colour as written */
    check_vs_pil(DATA "rgba.png", DATA "rgb.png.raw", 3, 1, 29, 37);
    /* gray from colour: PIL's convert("L") to the byte */
    check_vs_pil(DATA "rgb.png", DATA "rgb.png.L.raw", 1, 1, 29, 37);
    check_vs_pil(DATA "palette.png", DATA "palette.png.raw", 3, 1, 29, 37);
}
END_TEST

/* gray files to 3 channels: the gray value three times (a gray JPEG to 1
 * channel equals PIL's: test_jpeg_vs_pil); gray with alpha as the gray
 * PNG it was made from; 1-bit gray scaled to 0 and 255 */
START_TEST(test_gray_to_rgb)
{
    const char *files[] = {DATA "gray.jpg", DATA "gray.png", DATA "gray_alpha.png", DATA "bilevel.png"};
    uint8_t first[17 * 23];
    for (int f = 0; f < 4; f++) {
        struct img_state *st = state();
        struct sl_error err = {0};
        uint32_t h, w, h1, w1;
        int rc;
        uint8_t *rgb = decode_file(st, files[f], 3, 1, &h, &w, &rc, &err);
        ck_assert_msg(rc == 0, "%s", err.msg);
        uint8_t *g = decode_file(st, files[f], 1, 1, &h1, &w1, &rc, &err);
        ck_assert_msg(rc == 0, "%s", err.msg);
        ck_assert_uint_eq(h, 17);
        ck_assert_uint_eq(w, 23);
        ck_assert_uint_eq(h1, h);
        for (size_t i = 0; i < (size_t)h * w; i++)
            for (int c = 0; c < 3; c++)
                ck_assert_uint_eq(rgb[3 * i + c], g[i]);
        if (f == 1)
            memcpy(first, g, sizeof first);
        if (f == 2)
            ck_assert_mem_eq(g, first, sizeof first);
        for (size_t i = 0; f == 3 && i < (size_t)h * w; i++)
            ck_assert(g[i] == 0 || g[i] == 255);
        free(rgb);
        free(g);
        img_state_destroy(st);
    }
}
END_TEST

/* the 16-bit gray PNG PIL wrote: each sample's high byte */
START_TEST(test_png16_gray)
{
    struct img_state *st = state();
    struct sl_error err = {0};
    uint32_t h, w;
    int rc;
    uint8_t *g = decode_file(st, DATA "gray16.png", 1, 1, &h, &w, &rc, &err);
    ck_assert_msg(rc == 0, "%s", err.msg);
    ck_assert_uint_eq(h, 7);
    ck_assert_uint_eq(w, 9);
    uint8_t *rgb = decode_file(st, DATA "gray16.png", 3, 1, &h, &w, &rc, &err);
    ck_assert_msg(rc == 0, "%s", err.msg);
    for (uint32_t y = 0; y < 7; y++)
        for (uint32_t x = 0; x < 9; x++) {
            unsigned v = (x * 7919u + y * 104729u) % 65536u;
            ck_assert_uint_eq(g[y * 9 + x], v >> 8);
            ck_assert_uint_eq(rgb[3 * (y * 9 + x) + 1], v >> 8);
        }
    free(g);
    free(rgb);
    img_state_destroy(st);
}
END_TEST

/* A PNG written with libspng's encoder (interlaced, 16-bit RGB, and 8-bit
 * RGBA) decodes back exactly (the high byte of 16-bit samples). */
static uint8_t *spng_write(const void *img, size_t len, uint32_t w, uint32_t h, int depth, int type, int interlace,
                           size_t *n)
{
    spng_ctx *ctx = spng_ctx_new(SPNG_CTX_ENCODER);
    ck_assert_ptr_nonnull(ctx);
    ck_assert_int_eq(spng_set_option(ctx, SPNG_ENCODE_TO_BUFFER, 1), 0);
    struct spng_ihdr ihdr = {.width = w,
                             .height = h,
                             .bit_depth = (uint8_t)depth,
                             .color_type = (uint8_t)type,
                             .interlace_method = (uint8_t)interlace};
    ck_assert_int_eq(spng_set_ihdr(ctx, &ihdr), 0);
    ck_assert_int_eq(spng_encode_image(ctx, img, len, SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE), 0);
    int e = 0;
    uint8_t *png = spng_get_png_buffer(ctx, n, &e);
    ck_assert_int_eq(e, 0);
    spng_ctx_free(ctx);
    return png;
}

START_TEST(test_png_spng_round_trip)
{
    enum { W = 13, H = 11 };
    uint16_t rgb16[H * W * 3];
    uint8_t rgba[H * W * 4];
    for (int i = 0; i < H * W * 3; i++)
        rgb16[i] = (uint16_t)(i * 2654435761u >> 16);
    for (int i = 0; i < H * W * 4; i++)
        rgba[i] = (uint8_t)(i * 37 + 11);
    struct img_state *st = state();
    for (int interlace = 0; interlace < 2; interlace++) {
        size_t n;
        uint8_t *png = spng_write(rgb16, sizeof rgb16, W, H, 16, SPNG_COLOR_TYPE_TRUECOLOR, interlace, &n);
        struct img_info info;
        struct sl_error err = {0};
        ck_assert_int_eq(img_probe(st, png, n, 1000, &info, &err), 0);
        ck_assert_int_eq(info.format, IMG_PNG);
        ck_assert_int_eq(info.depth, 16);
        ck_assert_int_eq(info.colors, 3);
        uint8_t out[H * W * 3];
        ck_assert_int_eq(img_decode(st, png, n, &info, 3, 1, out, sizeof out, &err), 0);
        for (int i = 0; i < H * W * 3; i++)
            ck_assert_uint_eq(out[i], rgb16[i] >> 8);
        free(png);
        png = spng_write(rgba, sizeof rgba, W, H, 8, SPNG_COLOR_TYPE_TRUECOLOR_ALPHA, interlace, &n);
        ck_assert_int_eq(img_probe(st, png, n, 1000, &info, &err), 0);
        ck_assert_int_eq(info.alpha, 1);
        ck_assert_int_eq(img_decode(st, png, n, &info, 3, 1, out, sizeof out, &err), 0);
        for (int i = 0; i < H * W; i++)
            for (int c = 0; c < 3; c++)
                ck_assert_uint_eq(out[3 * i + c], rgba[4 * i + c]);
        free(png);
    }
    img_state_destroy(st);
}
END_TEST

/* A picture with edges and gradients, w x h RGB. */
static void picture(uint8_t *p, int w, int h)
{
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *q = p + 3 * (y * w + x);
            q[0] = (uint8_t)(x * 255 / (w - 1));
            q[1] = (uint8_t)(y * 255 / (h - 1));
            q[2] = (uint8_t)(((x / 8 + y / 8) % 2) ? 200 : 40);
        }
}

static uint8_t *tj_encode(const uint8_t *rgb, int w, int h, int quality, int subsamp, int flags, unsigned long *n)
{
    tjhandle tj = tjInitCompress();
    ck_assert_ptr_nonnull(tj);
    unsigned char *jpg = NULL;
    *n = 0;
    ck_assert_int_eq(tjCompress2(tj, rgb, w, w * 3, h, TJPF_RGB, &jpg, n, subsamp, quality, flags), 0);
    tjDestroy(tj);
    return jpg;
}

/* tjCompress2 at quality 100, 4:4:4: the decode is within 3 of the
 * source everywhere (the DCT's rounding only), and its sizes at every
 * scale are libjpeg's (rounded up) */
START_TEST(test_jpeg_tj_round_trip)
{
    enum { W = 67, H = 45 };
    static uint8_t src[H * W * 3], out[H * W * 3];
    picture(src, W, H);
    unsigned long n;
    uint8_t *jpg = tj_encode(src, W, H, 100, TJSAMP_444, 0, &n);
    struct img_state *st = state();
    struct img_info info;
    struct sl_error err = {0};
    ck_assert_int_eq(img_probe(st, jpg, n, 10000, &info, &err), 0);
    ck_assert_int_eq(info.format, IMG_JPEG);
    ck_assert_uint_eq(info.width, W);
    ck_assert_uint_eq(info.height, H);
    ck_assert_int_eq(info.colors, 3);
    ck_assert_int_eq(info.progressive, 0);
    ck_assert_int_eq(img_decode(st, jpg, n, &info, 3, 1, out, sizeof out, &err), 0);
    assert_same(out, src, sizeof src, 3);
    static const uint32_t sizes[4][2] = {{45, 67}, {23, 34}, {12, 17}, {6, 9}};
    for (int k = 0; k < 4; k++) {
        uint32_t h, w;
        img_scaled_size(&info, 1 << k, &h, &w);
        ck_assert_uint_eq(h, sizes[k][0]);
        ck_assert_uint_eq(w, sizes[k][1]);
        ck_assert_int_eq(img_decode(st, jpg, n, &info, 3, 1 << k, out, (size_t)h * w * 3, &err), 0);
        ck_assert_int_eq(img_decode(st, jpg, n, &info, 1, 1 << k, out, (size_t)h * w, &err), 0);
    }
    /* a PNG has no scaled decode */
    struct img_info png = info;
    png.format = IMG_PNG;
    uint32_t h, w;
    img_scaled_size(&png, 4, &h, &w);
    ck_assert_uint_eq(h, H);
    tjFree(jpg);
    img_state_destroy(st);
}
END_TEST

START_TEST(test_pick_scale)
{
    struct img_info jpg = {.format = IMG_JPEG, .width = 2000, .height = 1500};
    struct img_info png = {.format = IMG_PNG, .width = 2000, .height = 1500};
    struct img_box box = {.top = 0, .left = 0, .height = 1500, .width = 2000};
    ck_assert_int_eq(img_pick_scale(&jpg, &box, 224, 224), 4); /* 1500 / 8 < 224 */
    ck_assert_int_eq(img_pick_scale(&png, &box, 224, 224), 1);
    box = (struct img_box){.height = 1792, .width = 1792};
    ck_assert_int_eq(img_pick_scale(&jpg, &box, 224, 224), 8); /* exactly 8 x 224 */
    box = (struct img_box){.height = 1791, .width = 1792};
    ck_assert_int_eq(img_pick_scale(&jpg, &box, 224, 224), 4);
    box = (struct img_box){.height = 447, .width = 2000};
    ck_assert_int_eq(img_pick_scale(&jpg, &box, 224, 224), 1);
    box = (struct img_box){.height = 448, .width = 448};
    ck_assert_int_eq(img_pick_scale(&jpg, &box, 224, 224), 2);
    box = (struct img_box){.height = 100, .width = 100};
    ck_assert_int_eq(img_pick_scale(&jpg, &box, 224, 224), 1); /* enlarging: full size */
}
END_TEST

/* Every damaged or refused file: the probe's or the decode's exact code
 * and message (libjpeg's and libspng's own words behind the prefix). */
START_TEST(test_damaged_corpus)
{
    static const struct {
        const char *file;
        int probe_rc, decode_rc;
        const char *msg;
    } cases[] = {
        {"truncated.jpg", 0, SL_ECORRUPT, "JPEG: Premature end of JPEG file"},
        /* after truncated.jpg's tables were read: not taken for this one's */
        {"no_tables.jpg", 0, SL_ECORRUPT, "JPEG: Quantization table 0x00 was not defined"},
        {"huffman.jpg", SL_ECORRUPT, 0, "JPEG: Bogus Huffman table definition"},
        {"scrambled.jpg", 0, SL_ECORRUPT, "JPEG: Corrupt JPEG data: "},
        {"cmyk.jpg", SL_ECORRUPT, 0, "JPEG: CMYK colour is not supported (convert the image to RGB)"},
        {"zero.jpg", SL_ECORRUPT, 0, "JPEG: Empty JPEG image (DNL not supported)"},
        {"huge.jpg", SL_ECORRUPT, 0, "JPEG: 60000x60000 image (3600000000 pixels) is over max_pixels 67108864"},
        {"zero.png", SL_ECORRUPT, 0, "PNG: zero-sized image (0x5)"},
        {"huge.png", SL_ECORRUPT, 0, "PNG: 60000x60000 image (3600000000 pixels) is over max_pixels 67108864"},
        {"truncated.png", 0, SL_ECORRUPT, "PNG: "},
        {"not_an_image.txt", SL_ECORRUPT, 0, "image: unknown format (not JPEG or PNG; 26 bytes)"},
    };
    struct img_state *st = state();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, DATA "%s", cases[i].file);
        size_t n;
        uint8_t *data = load(path, &n);
        struct img_info info;
        struct sl_error err = {0};
        int rc = img_probe(st, data, n, IMG_MAX_PIXELS_DEFAULT, &info, &err);
        ck_assert_msg(rc == cases[i].probe_rc, "%s: probe %d (%s)", cases[i].file, rc, err.msg);
        if (rc == 0) {
            uint32_t h, w;
            img_scaled_size(&info, 1, &h, &w);
            size_t cap = (size_t)h * w * 3;
            uint8_t *out = malloc(cap);
            rc = img_decode(st, data, n, &info, 3, 1, out, cap, &err);
            ck_assert_msg(rc == cases[i].decode_rc, "%s: decode %d (%s)", cases[i].file, rc, err.msg);
            /* the region decode of the whole image refuses it too */
            struct img_box all = {.height = info.height, .width = info.width};
            struct img_region got;
            struct sl_error err2 = {0};
            int rc2 = img_decode_region(st, data, n, &info, 3, 1, &all, out, cap, &got, &err2);
            ck_assert_msg(rc2 == rc, "%s: region %d (%s)", cases[i].file, rc2, err2.msg);
            ck_assert_str_eq(err2.msg, err.msg);
            free(out);
        }
        ck_assert_msg(strncmp(err.msg, cases[i].msg, strlen(cases[i].msg)) == 0, "%s: '%s'", cases[i].file, err.msg);
        ck_assert_int_eq(err.code, rc);
        free(data);
    }
    /* the state decodes a good file after all those */
    struct sl_error err = {0};
    uint32_t h, w;
    int rc;
    uint8_t *img = decode_file(st, DATA "rgb_q95.jpg", 3, 1, &h, &w, &rc, &err);
    ck_assert_msg(rc == 0, "%s", err.msg);
    free(img);
    img_state_destroy(st);
}
END_TEST

/* A 60000x60000 header is refused before anything is allocated for its
 * pixels: no sl_malloc at all (every one would fail), the heap no bigger
 * afterwards, and with a bound above its size the probe accepts it (so it
 * is the bound that refused) */
START_TEST(test_huge_refused_unallocated)
{
    const char *files[] = {DATA "huge.jpg", DATA "huge.png"};
    struct img_state *st = state();
    for (int f = 0; f < 2; f++) {
        size_t n;
        uint8_t *data = load(files[f], &n);
        struct img_info info;
        struct sl_error err = {0};
        struct mallinfo2 before = mallinfo2();
        sl_alloc_fail_after(1);
        ck_assert_int_eq(img_probe(st, data, n, IMG_MAX_PIXELS_DEFAULT, &info, &err), SL_ECORRUPT);
        sl_alloc_fail_reset();
        struct mallinfo2 after = mallinfo2();
        ck_assert_msg(after.uordblks <= before.uordblks + 65536, "heap grew %zu -> %zu", before.uordblks,
                      after.uordblks);
        ck_assert_ptr_nonnull(strstr(err.msg, "60000x60000"));
        ck_assert_int_eq(img_probe(st, data, n, UINT64_C(1) << 40, &info, &err), 0);
        ck_assert_uint_eq(info.width, 60000);
        ck_assert_uint_eq(info.height, 60000);
        /* 1 x 1 is the smallest bound; 0 and over 2^40 are refused */
        ck_assert_int_eq(img_probe(st, data, n, 0, &info, &err), SL_EINVAL);
        ck_assert_int_eq(img_probe(st, data, n, (UINT64_C(1) << 40) + 1, &info, &err), SL_EINVAL);
        ck_assert_str_eq(err.msg, "image: max_pixels 1099511627777 is outside 1 .. 2^40");
        free(data);
    }
    img_state_destroy(st);
}
END_TEST

START_TEST(test_bad_arguments)
{
    size_t n;
    uint8_t *data = load(DATA "rgb_q95.jpg", &n);
    struct img_state *st = state();
    struct img_info info;
    struct sl_error err = {0};
    ck_assert_int_eq(img_probe(st, data, n, 1000000, &info, &err), 0);
    uint8_t out[29 * 37 * 3];
    ck_assert_int_eq(img_decode(st, data, n, &info, 2, 1, out, sizeof out, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "image: channels must be 1 or 3 (got 2)");
    ck_assert_int_eq(img_decode(st, data, n, &info, 3, 3, out, sizeof out, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "image: scale must be 1/1, 1/2, 1/4 or 1/8 (got 1/3)");
    ck_assert_int_eq(img_decode(st, data, n, &info, 3, 1, out, sizeof out - 1, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "image: output of 3219 bytes does not fit 3218");
    struct img_box box = {.top = 1, .left = 1, .height = 29, .width = 10};
    struct img_region got;
    ck_assert_int_eq(img_decode_region(st, data, n, &info, 3, 1, &box, out, sizeof out, &got, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "image: box 10x29 at (1, 1) is not inside the 37x29 image");
    /* a probe's info of other bytes: refused, not trusted */
    struct img_info wrong = info;
    wrong.width = 36;
    ck_assert_int_eq(img_decode(st, data, n, &wrong, 3, 1, out, sizeof out, &err), SL_EINVAL);
    /* empty and tiny inputs */
    ck_assert_int_eq(img_probe(st, data, 0, 1000, &info, &err), SL_ECORRUPT);
    ck_assert_int_eq(img_probe(st, data, 3, 1000, &info, &err), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "JPEG: Premature end of JPEG file");
    img_state_destroy(st);
    free(data);
}
END_TEST

/* img_decode_region: for boxes all over a 4:2:0, a 4:4:4, a gray and a
 * progressive JPEG, at every scale, each decoded pixel equals the whole
 * decode's at the same place, the region covers the scaled box, and the
 * region fits img_region_bytes */
START_TEST(test_region_equals_whole)
{
    enum { W = 203, H = 157 };
    static uint8_t src[H * W * 3], whole[H * W * 3], part[H * W * 3];
    picture(src, W, H);
    struct img_state *st = state();
    static const int subs[] = {TJSAMP_420, TJSAMP_444, TJSAMP_422, TJSAMP_GRAY, TJSAMP_420, TJSAMP_411, TJSAMP_440};
    struct sl_rng rng = sl_rng_key(3, 0, 0, 0);
    for (int s = 0; s < 7; s++) {
        unsigned long n;
        uint8_t *jpg = tj_encode(src, W, H, 90, subs[s], s == 4 ? TJFLAG_PROGRESSIVE : 0, &n);
        struct img_info info;
        struct sl_error err = {0};
        ck_assert_int_eq(img_probe(st, jpg, n, 100000, &info, &err), 0);
        ck_assert_int_eq(info.progressive, s == 4);
        for (int c = 1; c <= 3; c += 2)
            for (int denom = 1; denom <= 8; denom *= 2) {
                uint32_t sh, sw;
                img_scaled_size(&info, denom, &sh, &sw);
                ck_assert_int_eq(img_decode(st, jpg, n, &info, c, denom, whole, sizeof whole, &err), 0);
                for (int k = 0; k < 12; k++) {
                    struct img_box box = img_rrc_box(&rng, H, W, 0.01, 1.0, 0.5, 2.0);
                    size_t cap = img_region_bytes(&info, c, denom, &box);
                    struct img_region got;
                    int rc = img_decode_region(st, jpg, n, &info, c, denom, &box, part, cap, &got, &err);
                    ck_assert_msg(rc == 0, "%s", err.msg);
                    ck_assert_uint_le((size_t)got.height * got.width * c, cap);
                    ck_assert_uint_le(got.top + got.height, sh);
                    ck_assert_uint_le(got.left + got.width, sw);
                    /* covers the box scaled */
                    ck_assert_uint_le((uint64_t)got.top * H, (uint64_t)box.top * sh);
                    ck_assert_uint_ge((uint64_t)(got.top + got.height) * H, (uint64_t)(box.top + box.height) * sh);
                    ck_assert_uint_le((uint64_t)got.left * W, (uint64_t)box.left * sw);
                    ck_assert_uint_ge((uint64_t)(got.left + got.width) * W, (uint64_t)(box.left + box.width) * sw);
                    for (uint32_t y = 0; y < got.height; y++)
                        ck_assert_msg(
                            memcmp(part + (size_t)y * got.width * c,
                                   whole + ((size_t)(got.top + y) * sw + got.left) * c, (size_t)got.width * c) == 0,
                            "sub %d c %d 1/%d box %lld,%lld %lldx%lld: row %u differs", s, c, denom, (long long)box.top,
                            (long long)box.left, (long long)box.height, (long long)box.width, y);
                }
            }
        tjFree(jpg);
    }
    img_state_destroy(st);
}
END_TEST

/* the corpus's decodable JPEGs, a progressive one whose damaged scans
 * libjpeg smooths over among them (fuzz_image's find: a cut or a skip
 * changed its pixels): every region equals the whole decode */
START_TEST(test_region_corpus)
{
    const char *files[] = {"rgb_q95.jpg", "gray.jpg", "progressive.jpg", "progressive_smoothed.jpg"};
    struct img_state *st = state();
    for (int f = 0; f < 4; f++) {
        char path[512];
        snprintf(path, sizeof path, DATA "%s", files[f]);
        size_t n;
        uint8_t *data = load(path, &n);
        struct img_info info;
        struct sl_error err = {0};
        ck_assert_int_eq(img_probe(st, data, n, 100000, &info, &err), 0);
        static uint8_t whole[64 * 64 * 3], part[64 * 64 * 3];
        struct sl_rng rng = sl_rng_key(5, 0, (uint64_t)f, 0);
        for (int denom = 1; denom <= 2; denom *= 2) {
            uint32_t sh, sw;
            img_scaled_size(&info, denom, &sh, &sw);
            ck_assert_int_eq(img_decode(st, data, n, &info, 3, denom, whole, sizeof whole, &err), 0);
            for (int k = 0; k < 20; k++) {
                struct img_box box = img_rrc_box(&rng, info.height, info.width, 0.05, 1.0, 0.5, 2.0);
                struct img_region got;
                ck_assert_int_eq(img_decode_region(st, data, n, &info, 3, denom, &box, part,
                                                   img_region_bytes(&info, 3, denom, &box), &got, &err),
                                 0);
                for (uint32_t y = 0; y < got.height; y++)
                    ck_assert_msg(memcmp(part + (size_t)y * got.width * 3,
                                         whole + ((size_t)(got.top + y) * sw + got.left) * 3,
                                         (size_t)got.width * 3) == 0,
                                  "%s 1/%d: row %u differs", files[f], denom, y);
            }
        }
        free(data);
    }
    img_state_destroy(st);
}
END_TEST

/* random-resized-crop the short way (a region decoded at the scale
 * img_pick_scale gives, the box mapped by img_region_box) and the long way
 * (the whole image at 1/1, the box itself): the same picture, within the
 * DCT scaling's blur: mean difference under 3 of 255, no pixel off by more
 * than 40 on this picture's hard edges (measured at 1/4: means 1.1 .. 2.3,
 * worst 28); at scale 1/1 the same bytes */
START_TEST(test_scaled_crop_close)
{
    enum { W = 640, H = 480 };
    uint8_t *src = malloc(H * W * 3), *whole = malloc(H * W * 3), *part = malloc(H * W * 3);
    picture(src, W, H);
    unsigned long n;
    uint8_t *jpg = tj_encode(src, W, H, 95, TJSAMP_420, 0, &n);
    struct img_state *st = state();
    struct img_info info;
    struct sl_error err = {0};
    ck_assert_int_eq(img_probe(st, jpg, n, 1000000, &info, &err), 0);
    ck_assert_int_eq(img_decode(st, jpg, n, &info, 3, 1, whole, (size_t)H * W * 3, &err), 0);
    struct sl_rng rng = sl_rng_key(9, 0, 0, 0);
    int scaled = 0;
    for (int k = 0; k < 16; k++) {
        struct img_box box = img_rrc_box(&rng, H, W, 0.3, 1.0, 0.75, 4.0 / 3.0);
        int denom = img_pick_scale(&info, &box, 64, 64);
        scaled += denom > 1;
        struct img_region got;
        ck_assert_int_eq(img_decode_region(st, jpg, n, &info, 3, denom, &box, part,
                                           img_region_bytes(&info, 3, denom, &box), &got, &err),
                         0);
        double y0, x0, y1, x1;
        img_region_box(&info, denom, &box, &got, &y0, &x0, &y1, &x1);
        uint8_t a[64 * 64 * 3], b[64 * 64 * 3];
        ck_assert_int_eq(img_resize(st, part, got.height, got.width, 3, y0, x0, y1, x1, a, 64, 64, 1, &err), 0);
        ck_assert_int_eq(img_resize(st, whole, H, W, 3, (double)box.top, (double)box.left,
                                    (double)(box.top + box.height), (double)(box.left + box.width), b, 64, 64, 1, &err),
                         0);
        long sum = 0;
        int worst = 0;
        for (int i = 0; i < 64 * 64 * 3; i++) {
            int d = abs(a[i] - b[i]);
            sum += d;
            worst = d > worst ? d : worst;
        }
        if (denom == 1)
            ck_assert_int_eq(worst, 0);
        ck_assert_msg(sum < 3L * 64 * 64 * 3 && worst <= 40, "1/%d: mean %.2f, worst %d", denom,
                      (double)sum / (64 * 64 * 3), worst);
    }
    ck_assert_int_gt(scaled, 0);
    tjFree(jpg);
    free(src);
    free(whole);
    free(part);
    img_state_destroy(st);
}
END_TEST

/* allocation failures: refused with SL_ENOMEM, nothing leaked (ASan),
 * the state still usable */
START_TEST(test_alloc_failures)
{
    struct img_state *st;
    struct sl_error err = {0};
    sl_alloc_fail_after(1);
    ck_assert_int_eq(img_state_create(&st, &err), SL_ENOMEM);
    sl_alloc_fail_reset();
    ck_assert_ptr_null(st);
    st = state();
    size_t n;
    uint8_t *data = load(DATA "rgb.png", &n);
    struct img_info info;
    ck_assert_int_eq(img_probe(st, data, n, 100000, &info, &err), 0);
    uint8_t out[29 * 37 * 3];
    int failed = 0;
    for (long k = 1; k < 64; k++) {
        sl_alloc_fail_after(k);
        int rc = img_decode(st, data, n, &info, 1, 1, out, sizeof out, &err);
        sl_alloc_fail_reset();
        ck_assert_msg(rc == 0 || rc == SL_ENOMEM, "%d %s", rc, err.msg);
        failed += rc == SL_ENOMEM;
        if (rc == 0)
            break;
    }
    ck_assert_int_gt(failed, 0);
    ck_assert_int_eq(img_decode(st, data, n, &info, 3, 1, out, sizeof out, &err), 0);
    free(data);
    img_state_destroy(st);
    img_state_destroy(NULL);
}
END_TEST

/* the benchmark entry point decodes and counts; an image it cannot decode
 * is named by index */
START_TEST(test_bench_decode)
{
    size_t n1, n2;
    uint8_t *a = load(DATA "rgb_q95.jpg", &n1), *b = load(DATA "rgb.png", &n2);
    const uint8_t *imgs[] = {a, b};
    size_t sizes[] = {n1, n2};
    double per_s = 0;
    struct sl_error err = {0};
    ck_assert_int_eq(img_bench_decode(imgs, sizes, 2, 3, 2, &per_s, &err), 0);
    ck_assert(per_s > 0);
    sizes[1] = 20;
    ck_assert_int_eq(img_bench_decode(imgs, sizes, 2, 3, 1, &per_s, &err), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "image 1: PNG: truncated header (20 bytes, IHDR needs 33)");
    free(a);
    free(b);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("img_decode");
    TCase *tc = tcase_create("img_decode");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_jpeg_vs_pil);
    tcase_add_test(tc, test_png_vs_pil);
    tcase_add_test(tc, test_gray_to_rgb);
    tcase_add_test(tc, test_png16_gray);
    tcase_add_test(tc, test_png_spng_round_trip);
    tcase_add_test(tc, test_jpeg_tj_round_trip);
    tcase_add_test(tc, test_pick_scale);
    tcase_add_test(tc, test_damaged_corpus);
    tcase_add_test(tc, test_huge_refused_unallocated);
    tcase_add_test(tc, test_bad_arguments);
    tcase_add_test(tc, test_region_equals_whole);
    tcase_add_test(tc, test_region_corpus);
    tcase_add_test(tc, test_scaled_crop_close);
    tcase_add_test(tc, test_alloc_failures);
    tcase_add_test(tc, test_bench_decode);
    suite_add_tcase(s, tc);
    return s;
}
