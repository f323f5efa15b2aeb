/* libFuzzer target for the image kernels (transform/img.h): any bytes as
 * an encoded image. img_probe (a small max_pixels: 2^18) answers 0 or
 * SL_ECORRUPT with a message; what it accepts is self-consistent; then
 * img_decode at 1/1 and at a scale picked for a box, and img_decode_region
 * for that box, each 0 or SL_ECORRUPT. When both decodes of a scale
 * succeed, every pixel of the region equals the whole decode's (the region
 * decode's contract), the region covers the box, and the box resized to
 * 16 x 16, flipped and normalized stays within its buffers (ASan); 1 and 3
 * channels agree (check_channels). */
#include "fuzz_common.h"
#include "img.h"

#define FUZZ_MAX_PIXELS (UINT64_C(1) << 18)

static const int errors[] = {SL_ECORRUPT, 0};

static struct img_state *st;

static void check_region(const struct img_info *info, int c, int denom, const struct img_box *box, const uint8_t *whole,
                         const uint8_t *part, const struct img_region *got)
{
    uint32_t sh, sw;
    img_scaled_size(info, denom, &sh, &sw);
    CHECK(got->height >= 1 && got->width >= 1);
    CHECK(got->top + got->height <= sh && got->left + got->width <= sw);
    CHECK((uint64_t)got->top * info->height <= (uint64_t)box->top * sh);
    CHECK((uint64_t)(got->top + got->height) * info->height >= (uint64_t)(box->top + box->height) * sh);
    CHECK((uint64_t)got->left * info->width <= (uint64_t)box->left * sw);
    CHECK((uint64_t)(got->left + got->width) * info->width >= (uint64_t)(box->left + box->width) * sw);
    for (uint32_t y = 0; y < got->height; y++)
        CHECK(memcmp(part + (size_t)y * got->width * c, whole + ((size_t)(got->top + y) * sw + got->left) * c,
                     (size_t)got->width * c) == 0);
}

static void ops(uint8_t *img, uint32_t h, uint32_t w, int c)
{
    uint8_t out[16 * 16 * 3];
    float norm[16 * 16 * 3];
    static const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    struct sl_error err = {0};
    CHECK(img_resize(st, img, h, w, c, 0, 0, h, w, out, 16, 16, 1, &err) == 0);
    img_flip(out, 16, 16, c);
    img_normalize(out, 16, 16, c, mean, std, 1, norm);
    for (int i = 0; i < 16 * 16 * c; i++)
        CHECK(norm[i] > -3.0f && norm[i] < 3.0f);
}

/* The image at 1/1 in 1 and in 3 channels: both decoded or both
 * refused; gray replicated in RGB; a colour PNG's gray is PIL's L of its
 * RGB (a JPEG's is its luma plane, not derived from RGB). */
static void check_channels(const struct img_info *info, const uint8_t *data, size_t size)
{
    size_t px = (size_t)info->width * info->height;
    uint8_t *g = malloc(px), *rgb = malloc(px * 3);
    CHECK(g != NULL && rgb != NULL);
    struct sl_error e1 = {0}, e3 = {0};
    int r1 = img_decode(st, data, size, info, 1, 1, g, px, &e1);
    int r3 = img_decode(st, data, size, info, 3, 1, rgb, px * 3, &e3);
    CHECK((r1 == 0) == (r3 == 0));
    if (r1 == 0) {
        for (size_t i = 0; i < px; i++) {
            const uint8_t *p = rgb + 3 * i;
            if (info->colors == 1)
                CHECK(p[0] == g[i] && p[1] == g[i] && p[2] == g[i]);
            else if (info->format == IMG_PNG)
                CHECK(g[i] == (uint8_t)((19595u * p[0] + 38470u * p[1] + 7471u * p[2] + 0x8000u) >> 16));
        }
    }
    free(g);
    free(rgb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sl_error err = {0};
    if (st == NULL)
        CHECK(img_state_create(&st, &err) == 0);
    struct img_info info;
    int rc = img_probe(st, data, size, FUZZ_MAX_PIXELS, &info, &err);
    fuzz_note("img_probe", rc, err.msg);
    if (rc != 0) {
        fuzz_check_error(rc, &err, errors);
        return 0;
    }
    CHECK(info.format == IMG_JPEG || info.format == IMG_PNG);
    CHECK(info.width >= 1 && info.height >= 1 && (uint64_t)info.width * info.height <= FUZZ_MAX_PIXELS);
    CHECK(info.colors == 1 || info.colors == 3);
    check_channels(&info, data, size);
    struct sl_rng rng = sl_rng_key(size, info.width, info.height, 0);
    struct img_box box = img_rrc_box(&rng, info.height, info.width, 0.05, 1.0, 0.5, 2.0);
    CHECK(box.top >= 0 && box.left >= 0 && box.top + box.height <= info.height && box.left + box.width <= info.width);
    int c = size % 2 ? 3 : 1;
    int denom = img_pick_scale(&info, &box, 4, 4);
    for (int pass = 0; pass < 2; pass++) {
        int d = pass == 0 ? 1 : denom;
        if (pass == 1 && d == 1)
            break;
        uint32_t sh, sw;
        img_scaled_size(&info, d, &sh, &sw);
        size_t cap = (size_t)sh * sw * c;
        uint8_t *whole = malloc(cap);
        CHECK(whole != NULL);
        rc = img_decode(st, data, size, &info, c, d, whole, cap, &err);
        fuzz_note("img_decode", rc, err.msg);
        if (rc != 0)
            fuzz_check_error(rc, &err, errors);
        else
            ops(whole, sh, sw, c);
        size_t rcap = img_region_bytes(&info, c, d, &box);
        CHECK(rcap <= cap);
        uint8_t *part = malloc(rcap);
        CHECK(part != NULL);
        struct img_region got;
        struct sl_error err2 = {0};
        int rc2 = img_decode_region(st, data, size, &info, c, d, &box, part, rcap, &got, &err2);
        fuzz_note("img_decode_region", rc2, err2.msg);
        if (rc2 != 0)
            fuzz_check_error(rc2, &err2, errors);
        if (rc == 0 && rc2 == 0)
            check_region(&info, c, d, &box, whole, part, &got);
        free(part);
        free(whole);
    }
    return 0;
}
