/* transform/img_ops.c: random-resized-crop and centre boxes pinned
 * against an independent computation (tests/data/images/rrc_boxes.py:
 * sl_rng and torchvision's formulas in Python), resizes against PIL's
 * (make_images.py: crop(box).resize(size, BILINEAR, reducing_gap=None)),
 * crop with padding, flip, and normalize against numpy's float32. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "img.h"
#include "sl_alloc.h"
#include "sl_test.h"

#define DATA SL_TEST_DATA "/images/"

static struct img_state *state(void)
{
    struct img_state *st;
    struct sl_error err = {0};
    ck_assert_int_eq(img_state_create(&st, &err), 0);
    return st;
}

/* rrc_boxes.py's output, pasted */
static const struct {
    uint64_t seed, epoch, element, op;
    uint32_t h, w;
    double s0, s1, r0, r1;
    int64_t top, left, bh, bw;
} rrc_cases[] = {
    {1, 0, 0, 1, 375, 500, 0.080000000000000002, 1, 0.75, 1.3333333333333333, 40, 121, 329, 350},
    {1, 0, 1, 1, 375, 500, 0.080000000000000002, 1, 0.75, 1.3333333333333333, 10, 253, 241, 181},
    {1, 1, 0, 1, 375, 500, 0.080000000000000002, 1, 0.75, 1.3333333333333333, 33, 24, 306, 351},
    {42, 3, 12345, 2, 480, 320, 0.080000000000000002, 1, 0.75, 1.3333333333333333, 137, 3, 312, 316},
    {7, 0, 9, 0, 224, 224, 0.5, 0.5, 1, 1, 50, 1, 158, 158},
    {7, 0, 10, 0, 1, 1, 0.080000000000000002, 1, 0.75, 1.3333333333333333, 0, 0, 1, 1},
    {5, 0, 3, 1, 10, 1000, 0.90000000000000002, 1, 0.5, 2, 0, 490, 10, 20},
    {5, 0, 4, 1, 1000, 10, 0.90000000000000002, 1, 0.5, 2, 490, 0, 20, 10},
    {5, 0, 5, 1, 30, 40, 2, 3, 0.5, 2, 0, 0, 30, 40},
};

START_TEST(test_rrc_pinned)
{
    for (size_t i = 0; i < sizeof rrc_cases / sizeof rrc_cases[0]; i++) {
        struct sl_rng r = sl_rng_key(rrc_cases[i].seed, rrc_cases[i].epoch, rrc_cases[i].element, rrc_cases[i].op);
        struct img_box b = img_rrc_box(&r, rrc_cases[i].h, rrc_cases[i].w, rrc_cases[i].s0, rrc_cases[i].s1,
                                       rrc_cases[i].r0, rrc_cases[i].r1);
        ck_assert_msg(b.top == rrc_cases[i].top && b.left == rrc_cases[i].left && b.height == rrc_cases[i].bh &&
                          b.width == rrc_cases[i].bw,
                      "case %zu: got %lld %lld %lld %lld", i, (long long)b.top, (long long)b.left, (long long)b.height,
                      (long long)b.width);
    }
}
END_TEST

/* any stream: the box lies inside the image, its area and ratio in range
 * unless it is the fallback; the same key gives the same box */
START_TEST(test_rrc_inside)
{
    for (uint64_t e = 0; e < 2000; e++) {
        uint32_t h = 1 + (uint32_t)(e * 7919 % 700), w = 1 + (uint32_t)(e * 104729 % 900);
        struct sl_rng r = sl_rng_key(11, 0, e, 3), q = r;
        struct img_box b = img_rrc_box(&r, h, w, 0.08, 1.0, 0.75, 4.0 / 3.0);
        struct img_box c = img_rrc_box(&q, h, w, 0.08, 1.0, 0.75, 4.0 / 3.0);
        ck_assert(memcmp(&b, &c, sizeof b) == 0);
        ck_assert(b.top >= 0 && b.left >= 0 && b.height >= 1 && b.width >= 1);
        ck_assert(b.top + b.height <= h && b.left + b.width <= w);
    }
}
END_TEST

START_TEST(test_center_box)
{
    static const int64_t cases[][6] = {
        {375, 500, 224, 224, 76, 138}, {256, 256, 224, 224, 16, 16}, {225, 224, 224, 224, 0, 0},
        {5, 7, 10, 10, -2, -2},        {3, 3, 2, 2, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct img_box b =
            img_center_box((uint32_t)cases[i][0], (uint32_t)cases[i][1], (uint32_t)cases[i][2], (uint32_t)cases[i][3]);
        ck_assert_int_eq(b.top, cases[i][4]);
        ck_assert_int_eq(b.left, cases[i][5]);
        ck_assert_int_eq(b.height, cases[i][2]);
        ck_assert_int_eq(b.width, cases[i][3]);
    }
}
END_TEST

/* a crop inside copies; one past the edges pads with 0 (torchvision's
 * center_crop of a small image) */
START_TEST(test_crop)
{
    uint8_t src[3 * 4 * 2]; /* 3 rows, 4 columns, 2 channels */
    for (int i = 0; i < 24; i++)
        src[i] = (uint8_t)(i + 1);
    uint8_t dst[5 * 6 * 2];
    struct img_box in = {.top = 1, .left = 1, .height = 2, .width = 2};
    img_crop(src, 3, 4, 2, &in, dst);
    static const uint8_t want_in[] = {11, 12, 13, 14, 19, 20, 21, 22};
    ck_assert_mem_eq(dst, want_in, sizeof want_in);
    struct img_box pad = img_center_box(3, 4, 5, 6);
    ck_assert_int_eq(pad.top, -1);
    ck_assert_int_eq(pad.left, -1);
    memset(dst, 0xAA, sizeof dst);
    img_crop(src, 3, 4, 2, &pad, dst);
    for (int y = 0; y < 5; y++)
        for (int x = 0; x < 6; x++)
            for (int c = 0; c < 2; c++) {
                int sy = y - 1, sx = x - 1;
                int want = sy >= 0 && sy < 3 && sx >= 0 && sx < 4 ? src[(sy * 4 + sx) * 2 + c] : 0;
                ck_assert_uint_eq(dst[(y * 6 + x) * 2 + c], want);
            }
    /* wholly outside: all zero */
    struct img_box out = {.top = 10, .left = -20, .height = 2, .width = 3};
    img_crop(src, 3, 4, 2, &out, dst);
    for (int i = 0; i < 12; i++)
        ck_assert_uint_eq(dst[i], 0);
}
END_TEST

static uint8_t *decode_png(struct img_state *st, const char *path, uint32_t *h, uint32_t *w)
{
    size_t n;
    uint8_t *data = sl_test_read(path, &n);
    ck_assert_ptr_nonnull(data);
    struct img_info info;
    struct sl_error err = {0};
    ck_assert_int_eq(img_probe(st, data, n, 1000000, &info, &err), 0);
    *h = info.height;
    *w = info.width;
    uint8_t *img = malloc((size_t)*h * *w * 3);
    ck_assert_int_eq(img_decode(st, data, n, &info, 3, 1, img, (size_t)*h * *w * 3, &err), 0);
    free(data);
    return img;
}

/* PIL's crop(box).resize((ow, oh), BILINEAR, reducing_gap=None): the
 * same bytes (the same weights, order and rounding) */
START_TEST(test_resize_vs_pil)
{
    static const struct {
        const char *ref;
        int x0, y0, x1, y1, ow, oh;
    } cases[] = {
        {"resize_shrink.raw", 3, 2, 58, 45, 17, 11},
        {"resize_enlarge.raw", 10, 5, 21, 14, 30, 25},
        {"resize_mixed.raw", 0, 0, 61, 47, 80, 13},
    };
    struct img_state *st = state();
    uint32_t h, w;
    uint8_t *src = decode_png(st, DATA "resize_src.png", &h, &w);
    ck_assert_uint_eq(h, 47);
    ck_assert_uint_eq(w, 61);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, DATA "%s", cases[i].ref);
        size_t n;
        uint8_t *want = sl_test_read(path, &n);
        ck_assert_ptr_nonnull(want);
        ck_assert_uint_eq(n, (size_t)cases[i].ow * cases[i].oh * 3);
        uint8_t *got = malloc(n);
        struct sl_error err = {0};
        ck_assert_int_eq(img_resize(st, src, h, w, 3, cases[i].y0, cases[i].x0, cases[i].y1, cases[i].x1, got,
                                    (uint32_t)cases[i].oh, (uint32_t)cases[i].ow, 1, &err),
                         0);
        int worst = 0;
        for (size_t k = 0; k < n; k++)
            worst = abs(got[k] - want[k]) > worst ? abs(got[k] - want[k]) : worst;
        ck_assert_msg(worst == 0, "%s: off by %d", cases[i].ref, worst);
        /* the same as resizing the cropped image */
        struct img_box box = {.top = cases[i].y0,
                              .left = cases[i].x0,
                              .height = cases[i].y1 - cases[i].y0,
                              .width = cases[i].x1 - cases[i].x0};
        uint8_t *crop = malloc((size_t)box.height * box.width * 3), *got2 = malloc(n);
        img_crop(src, h, w, 3, &box, crop);
        ck_assert_int_eq(img_resize(st, crop, (uint32_t)box.height, (uint32_t)box.width, 3, 0, 0, (double)box.height,
                                    (double)box.width, got2, (uint32_t)cases[i].oh, (uint32_t)cases[i].ow, 1, &err),
                         0);
        ck_assert_mem_eq(got, got2, n);
        free(crop);
        free(got2);
        free(got);
        free(want);
    }
    free(src);
    /* gray (a path of its own): the PNG decoded to 1 channel is PIL's
     * convert("L") (test_img_decode), then cropped and resized */
    size_t n, wn;
    uint8_t *data = sl_test_read(DATA "resize_src.png", &n), *want = sl_test_read(DATA "resize_gray.raw", &wn);
    ck_assert_uint_eq(wn, 23 * 9);
    struct img_info info;
    struct sl_error err = {0};
    ck_assert_int_eq(img_probe(st, data, n, 1000000, &info, &err), 0);
    uint8_t gray[47 * 61], out[23 * 9];
    ck_assert_int_eq(img_decode(st, data, n, &info, 1, 1, gray, sizeof gray, &err), 0);
    ck_assert_int_eq(img_resize(st, gray, 47, 61, 1, 1, 5, 40, 60, out, 9, 23, 1, &err), 0);
    ck_assert_mem_eq(out, want, sizeof out);
    free(data);
    free(want);
    img_state_destroy(st);
}
END_TEST

/* antialias off: the triangle of support 1 whatever the scale (a 2x
 * shrink averages pairs, rounding half up); enlarging is the same either
 * way; the same size is a copy */
START_TEST(test_resize_no_antialias)
{
    struct img_state *st = state();
    struct sl_error err = {0};
    static const uint8_t row[8] = {0, 10, 20, 31, 100, 101, 255, 0};
    uint8_t out[4], big_a[16 * 3], big_b[16 * 3];
    ck_assert_int_eq(img_resize(st, row, 1, 8, 1, 0, 0, 1, 8, out, 1, 4, 0, &err), 0);
    static const uint8_t want[4] = {5, 26, 101, 128};
    ck_assert_mem_eq(out, want, 4);
    ck_assert_int_eq(img_resize(st, row, 1, 8, 1, 0, 0, 1, 8, big_a, 3, 16, 0, &err), 0);
    ck_assert_int_eq(img_resize(st, row, 1, 8, 1, 0, 0, 1, 8, big_b, 3, 16, 1, &err), 0);
    ck_assert_mem_eq(big_a, big_b, sizeof big_a);
    uint8_t same[8];
    ck_assert_int_eq(img_resize(st, row, 1, 8, 1, 0, 0, 1, 8, same, 1, 8, 1, &err), 0);
    ck_assert_mem_eq(same, row, 8);
    img_state_destroy(st);
}
END_TEST

/* a fractional box (a scaled decode's crop) and hostile arguments */
START_TEST(test_resize_boxes)
{
    struct img_state *st = state();
    struct sl_error err = {0};
    uint8_t img[6 * 6 * 3];
    for (int i = 0; i < (int)sizeof img; i++)
        img[i] = 77;
    uint8_t out[4 * 4 * 3];
    /* a flat image stays flat for any box inside it */
    ck_assert_int_eq(img_resize(st, img, 6, 6, 3, 0.25, 1.5, 5.75, 4.125, out, 4, 4, 1, &err), 0);
    for (int i = 0; i < (int)sizeof out; i++)
        ck_assert_uint_eq(out[i], 77);
    ck_assert_int_eq(img_resize(st, img, 6, 6, 3, 0, 0, 6.5, 6, out, 4, 4, 1, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "resize: box [0, 6.5) x [0, 6) is not inside the 6x6 image");
    ck_assert_int_eq(img_resize(st, img, 6, 6, 3, 2, 0, 2, 6, out, 4, 4, 1, &err), SL_EINVAL);
    ck_assert_int_eq(img_resize(st, img, 6, 6, 3, -1, 0, 2, 6, out, 4, 4, 1, &err), SL_EINVAL);
    ck_assert_int_eq(img_resize(st, img, 6, 6, 3, 0, 0, 6, 6, out, 0, 4, 1, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "resize: 3 channels to 4x0 (need 1..4, 1x1 .. 65536x65536)");
    ck_assert_int_eq(img_resize(st, img, 6, 6, 3, 0, 0, 6, 6, out, 4, 65537, 1, &err), SL_EINVAL);
    ck_assert_int_eq(img_resize(st, img, 6, 6, 5, 0, 0, 6, 6, out, 4, 4, 1, &err), SL_EINVAL);
    ck_assert_int_eq(img_resize(st, img, 6, 6, 3, 0, 0, 0.0 / 0.0, 6, out, 4, 4, 1, &err), SL_EINVAL);
    img_state_destroy(st);
    /* the scratch cannot grow: SL_ENOMEM */
    st = state();
    sl_alloc_fail_after(1);
    ck_assert_int_eq(img_resize(st, img, 6, 6, 3, 0, 0, 6, 6, out, 4, 4, 1, &err), SL_ENOMEM);
    sl_alloc_fail_reset();
    ck_assert_int_eq(img_resize(st, img, 6, 6, 3, 0, 0, 6, 6, out, 4, 4, 1, &err), 0);
    img_state_destroy(st);
}
END_TEST

/* one pixel to many, many to one (the widest kernel), both ways */
START_TEST(test_resize_extremes)
{
    struct img_state *st = state();
    struct sl_error err = {0};
    uint8_t px[3] = {1, 128, 255};
    static uint8_t big[300 * 200 * 3];
    ck_assert_int_eq(img_resize(st, px, 1, 1, 3, 0, 0, 1, 1, big, 300, 200, 1, &err), 0);
    for (int i = 0; i < 300 * 200; i++)
        ck_assert_mem_eq(big + 3 * i, px, 3);
    uint8_t one[3];
    ck_assert_int_eq(img_resize(st, big, 300, 200, 3, 0, 0, 300, 200, one, 1, 1, 1, &err), 0);
    ck_assert_mem_eq(one, px, 3);
    ck_assert_int_eq(img_resize(st, big, 300, 200, 3, 0, 0, 300, 200, one, 1, 1, 0, &err), 0);
    ck_assert_mem_eq(one, px, 3);
    img_state_destroy(st);
}
END_TEST

/* The RGB resize's vector kernels (SSE2, and AVX2 where the CPU has it)
 * against the one-channel scalar pass run on each plane: the same bytes
 * for random images and boxes, shrinking up to 9x and enlarging, boxes
 * at every edge (where the wide loads fall back) and fractional ones. */
START_TEST(test_resize_rgb_kernels_vs_scalar)
{
    struct img_state *st = state();
    struct sl_error err = {0};
    enum { MAXS = 181 };
    static uint8_t out[MAXS * MAXS * 3], po[3][MAXS * MAXS];
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int round = 0; round < 300; round++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        uint32_t h = 1 + (uint32_t)(x % MAXS), w = 1 + (uint32_t)((x >> 20) % MAXS);
        /* sized exactly, so that AddressSanitizer sees a load past the image */
        uint8_t *img = malloc((size_t)h * w * 3), *plane[3];
        for (int c = 0; c < 3; c++)
            plane[c] = malloc((size_t)h * w);
        ck_assert(img != NULL && plane[0] != NULL && plane[1] != NULL && plane[2] != NULL);
        for (size_t i = 0; i < (size_t)h * w * 3; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            img[i] = (uint8_t)(x >> 32);
            plane[i % 3][i / 3] = img[i];
        }
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        double y0 = (double)(x % h), x0 = (double)((x >> 16) % w);
        double y1 = y0 + 1 + (double)((x >> 32) % (h - (uint32_t)y0)),
               x1 = x0 + 1 + (double)((x >> 48) % (w - (uint32_t)x0));
        if (round % 3 == 0) { /* the whole image: boxes at the right and bottom edges */
            y0 = x0 = 0;
            y1 = h;
            x1 = w;
        } else if (round % 3 == 1 && y1 - y0 > 1 && x1 - x0 > 1) { /* fractional */
            y0 += 0.375;
            x1 -= 0.625;
        }
        uint32_t oh = 1 + (uint32_t)((x >> 8) % 64), ow = 1 + (uint32_t)((x >> 40) % 64);
        int aa = (int)(x >> 63);
        ck_assert_int_eq(img_resize(st, img, h, w, 3, y0, x0, y1, x1, out, oh, ow, aa, &err), 0);
        for (int c = 0; c < 3; c++)
            ck_assert_int_eq(img_resize(st, plane[c], h, w, 1, y0, x0, y1, x1, po[c], oh, ow, aa, &err), 0);
        for (size_t i = 0; i < (size_t)oh * ow * 3; i++)
            if (out[i] != po[i % 3][i / 3])
                ck_abort_msg("round %d: %ux%u box [%g, %g) x [%g, %g) to %ux%u aa %d: byte %zu is %u, scalar %u", round,
                             w, h, y0, y1, x0, x1, ow, oh, aa, i, out[i], po[i % 3][i / 3]);
        free(img);
        for (int c = 0; c < 3; c++)
            free(plane[c]);
    }
    img_state_destroy(st);
}
END_TEST

START_TEST(test_flip)
{
    uint8_t rgb[2 * 3 * 3] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18};
    static const uint8_t want[] = {7, 8, 9, 4, 5, 6, 1, 2, 3, 16, 17, 18, 13, 14, 15, 10, 11, 12};
    img_flip(rgb, 2, 3, 3);
    ck_assert_mem_eq(rgb, want, sizeof want);
    uint8_t g[2 * 4] = {1, 2, 3, 4, 5, 6, 7, 8};
    static const uint8_t gw[] = {4, 3, 2, 1, 8, 7, 6, 5};
    img_flip(g, 2, 4, 1);
    ck_assert_mem_eq(g, gw, sizeof gw);
    uint8_t one[3] = {9, 8, 7};
    img_flip(one, 1, 1, 3);
    ck_assert_uint_eq(one[0], 9);
    img_flip(one, 0, 0, 3); /* nothing */
}
END_TEST

/* numpy: (np.float32(x) / np.float32(255) - np.float32(m)) / np.float32(s) */
START_TEST(test_normalize_exact)
{
    static const uint8_t px[] = {0, 0, 1, 1, 128, 128, 254, 254, 255, 255}; /* 5 pixels, 2 channels */
    static const float mean[] = {0.485f, 0.406f}, std[] = {0.229f, 0.225f};
    static const float want[] = {
        -0x1.0f177ap+1f, -0x1.cdf012p+0f, -0x1.0ce656p+1f, -0x1.c979d4p+0f, 0x1.2f5e64p-4f,
        0x1.b4ba78p-2f,  0x1.1dab14p+1f,  0x1.4fb068p+1f,  0x1.1fdc3ap+1f,  0x1.51eb86p+1f,
    };
    float hwc[10], chw[10];
    img_normalize(px, 1, 5, 2, mean, std, 0, hwc);
    img_normalize(px, 1, 5, 2, mean, std, 1, chw);
    for (int p = 0; p < 5; p++)
        for (int c = 0; c < 2; c++) {
            ck_assert_msg(hwc[2 * p + c] == want[2 * p + c], "hwc %d %d: %a", p, c, (double)hwc[2 * p + c]);
            ck_assert(chw[c * 5 + p] == want[2 * p + c]);
        }
    /* three channels (a path of its own for CHW): the same values, planes */
    static const uint8_t rgb[] = {128, 0, 255, 0, 1, 254};
    static const float m3[] = {0.485f, 0.485f, 0.406f}, s3[] = {0.229f, 0.229f, 0.225f};
    float h3[6], c3[6];
    img_normalize(rgb, 1, 2, 3, m3, s3, 0, h3);
    img_normalize(rgb, 1, 2, 3, m3, s3, 1, c3);
    ck_assert(h3[0] == 0x1.2f5e64p-4f && h3[1] == -0x1.0f177ap+1f && h3[2] == 0x1.51eb86p+1f);
    ck_assert(h3[3] == -0x1.0f177ap+1f && h3[4] == -0x1.0ce656p+1f && h3[5] == 0x1.4fb068p+1f);
    for (int p = 0; p < 2; p++)
        for (int c = 0; c < 3; c++)
            ck_assert(c3[c * 2 + p] == h3[p * 3 + c]);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("img_ops");
    TCase *tc = tcase_create("img_ops");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_rrc_pinned);
    tcase_add_test(tc, test_rrc_inside);
    tcase_add_test(tc, test_center_box);
    tcase_add_test(tc, test_crop);
    tcase_add_test(tc, test_resize_vs_pil);
    tcase_add_test(tc, test_resize_no_antialias);
    tcase_add_test(tc, test_resize_boxes);
    tcase_add_test(tc, test_resize_extremes);
    tcase_add_test(tc, test_resize_rgb_kernels_vs_scalar);
    tcase_add_test(tc, test_flip);
    tcase_add_test(tc, test_normalize_exact);
    suite_add_tcase(s, tc);
    return s;
}
