/* img_bench: the decode-only limit of the map stage (transform/img.h):
 * in-memory images decoded to RGB on one thread, as the issue's
 * reference figure measures libjpeg-turbo (tjDecompress2, one thread,
 * files in memory). The output buffer is allocated once, for the largest
 * image; the clock covers probe and decode. */
#include "img.h"

#include <time.h>

#include "sl_alloc.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int img_bench_decode(const uint8_t *const *data, const size_t *sizes, size_t count, int rounds, int denom,
                     double *per_s, struct sl_error *err)
{
    *per_s = 0.0;
    if (count == 0 || rounds < 1)
        return sl_error_set(err, SL_EINVAL, "bench: no images or rounds (%zu, %d)", count, rounds);
    struct img_state *st;
    int rc = img_state_create(&st, err);
    if (rc != 0)
        return rc;
    size_t cap = 0;
    for (size_t i = 0; i < count; i++) {
        struct img_info info;
        rc = img_probe(st, data[i], sizes[i], IMG_MAX_PIXELS_DEFAULT, &info, err);
        if (rc != 0) {
            sl_error_prefix(err, "image %zu: ", i);
            goto out_state;
        }
        uint32_t h, w;
        img_scaled_size(&info, info.format == IMG_JPEG ? denom : 1, &h, &w);
        if ((size_t)h * w * 3 > cap)
            cap = (size_t)h * w * 3;
    }
    uint8_t *out = sl_malloc(cap);
    if (out == NULL) {
        rc = sl_error_set(err, SL_ENOMEM, "bench: out of memory for %zu bytes", cap);
        goto out_state;
    }
    double t0 = now_s();
    for (int r = 0; r < rounds; r++)
        for (size_t i = 0; i < count; i++) {
            struct img_info info;
            rc = img_probe(st, data[i], sizes[i], IMG_MAX_PIXELS_DEFAULT, &info, err);
            if (rc == 0)
                rc = img_decode(st, data[i], sizes[i], &info, 3, info.format == IMG_JPEG ? denom : 1, out, cap, err);
            if (rc != 0) {
                sl_error_prefix(err, "image %zu: ", i);
                goto out_free;
            }
        }
    double dt = now_s() - t0;
    *per_s = dt > 0 ? (double)count * rounds / dt : 0.0;
out_free:
    sl_free(out);
out_state:
    img_state_destroy(st);
    return rc;
}
