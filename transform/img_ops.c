/* img_ops: crop boxes, crop, resize, flip and normalize over uint8 HWC
 * images (transform/img.h).
 *
 * The resize is PIL's separable resampling with the bilinear (triangle)
 * filter: for each output pixel the input pixels whose centres lie within
 * the filter's support of the output pixel's centre, mapped back, weigh
 * in by the triangle of that distance (widened by the scale factor when
 * shrinking with antialias), normalised to 1 and rounded to 22-bit fixed
 * point. The horizontal pass runs first over the rows the vertical pass
 * reads, into a uint8 image, then the vertical pass: the same order,
 * weights and rounding as PIL's, so the output equals PIL's bytes for an
 * integer box. The weights and the intermediate image live in the
 * per-thread state's scratch: no allocation once it has grown.
 */
#include "img.h"
#include "img_state.h"
#include "sl_half.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#define IMG_SSE2 1
#endif
/* The RGB horizontal pass also has an AVX2 kernel, chosen at run time
 * (x86-64 with GCC or Clang, whose target attribute builds it without
 * raising the whole file's instruction set). */
#if IMG_SSE2 && defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define IMG_AVX2 1
#endif

#define PRECISION_BITS 22

/* ---- boxes ---- */

static int64_t round_half_even(double x)
{
    return (int64_t)nearbyint(x); /* the default rounding mode: to nearest, ties to even */
}

struct img_box img_rrc_box(struct sl_rng *rng, uint32_t height, uint32_t width, double scale_lo, double scale_hi,
                           double ratio_lo, double ratio_hi)
{
    double area = (double)height * (double)width;
    double log_lo = log(ratio_lo), log_hi = log(ratio_hi);
    for (int attempt = 0; attempt < 10; attempt++) {
        double target = area * sl_rng_range(rng, scale_lo, scale_hi);
        double ratio = exp(sl_rng_range(rng, log_lo, log_hi));
        int64_t w = round_half_even(sqrt(target * ratio));
        int64_t h = round_half_even(sqrt(target / ratio));
        if (w > 0 && w <= width && h > 0 && h <= height) {
            int64_t top = sl_rng_below(rng, (uint32_t)(height - h + 1));
            int64_t left = sl_rng_below(rng, (uint32_t)(width - w + 1));
            return (struct img_box){.top = top, .left = left, .height = h, .width = w};
        }
    }
    double in_ratio = (double)width / (double)height;
    int64_t w, h;
    if (in_ratio < ratio_lo) {
        w = width;
        h = round_half_even((double)w / ratio_lo);
    } else if (in_ratio > ratio_hi) {
        h = height;
        w = round_half_even((double)h * ratio_hi);
    } else {
        w = width;
        h = height;
    }
    return (struct img_box){
        .top = ((int64_t)height - h) / 2, .left = ((int64_t)width - w) / 2, .height = h, .width = w};
}

struct img_box img_center_box(uint32_t height, uint32_t width, uint32_t out_h, uint32_t out_w)
{
    return (struct img_box){.top = round_half_even(((double)height - (double)out_h) / 2.0),
                            .left = round_half_even(((double)width - (double)out_w) / 2.0),
                            .height = out_h,
                            .width = out_w};
}

void img_crop(const uint8_t *src, uint32_t h, uint32_t w, int c, const struct img_box *box, uint8_t *dst)
{
    size_t pitch = (size_t)box->width * (size_t)c;
    /* the columns of the box inside the image: [x0, x1) of the source */
    int64_t x0 = box->left < 0 ? 0 : box->left;
    int64_t x1 = box->left + box->width > (int64_t)w ? (int64_t)w : box->left + box->width;
    for (int64_t y = 0; y < box->height; y++) {
        uint8_t *row = dst + (size_t)y * pitch;
        int64_t sy = box->top + y;
        if (sy < 0 || sy >= (int64_t)h || x1 <= x0) {
            memset(row, 0, pitch);
            continue;
        }
        size_t lead = (size_t)(x0 - box->left) * (size_t)c;
        size_t body = (size_t)(x1 - x0) * (size_t)c;
        memset(row, 0, lead);
        memcpy(row + lead, src + ((size_t)sy * w + (size_t)x0) * (size_t)c, body);
        memset(row + lead + body, 0, pitch - lead - body);
    }
}

/* ---- resize ---- */

static double triangle(double x)
{
    x = fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}

/* The filter's extent for an axis: in [in0, in1) of an input of `in`
 * samples (the box's whole-pixel hull) onto `out` samples. */
static int kernel_size(double in0, double in1, uint32_t out, int antialias)
{
    double scale = (in1 - in0) / out;
    double fs = antialias && scale > 1.0 ? scale : 1.0;
    return (int)ceil(fs) * 2 + 1;
}

/* Weights of each output sample: bounds[2 * o] the first input sample,
 * bounds[2 * o + 1] how many; k[o * ksize + i] their 22-bit weights. */
static void weights(double in0, double in1, uint32_t in, uint32_t out, int antialias, int ksize, int32_t *bounds,
                    int32_t *k, double *tmp)
{
    double scale = (in1 - in0) / out;
    double fs = antialias && scale > 1.0 ? scale : 1.0;
    double support = fs; /* the triangle's support is 1 */
    double ss = 1.0 / fs;
    for (uint32_t o = 0; o < out; o++) {
        double center = in0 + (o + 0.5) * scale;
        int xmin = (int)(center - support + 0.5);
        if (xmin < 0)
            xmin = 0;
        int xmax = (int)(center + support + 0.5);
        if (xmax > (int)in)
            xmax = (int)in;
        xmax -= xmin;
        if (xmax > ksize)
            xmax = ksize;
        double total = 0.0;
        for (int x = 0; x < xmax; x++) {
            double wgt = triangle((x + xmin - center + 0.5) * ss);
            tmp[x] = wgt;
            total += wgt;
        }
        for (int x = 0; x < xmax; x++) {
            double v = total != 0.0 ? tmp[x] / total : 0.0;
            k[(size_t)o * ksize + x] =
                (int32_t)(v < 0 ? -0.5 + v * (1 << PRECISION_BITS) : 0.5 + v * (1 << PRECISION_BITS));
        }
        for (int x = xmax; x < ksize; x++)
            k[(size_t)o * ksize + x] = 0;
        bounds[2 * o] = xmin;
        bounds[2 * o + 1] = xmax;
    }
}

static uint8_t clip8(int32_t v)
{
    v >>= PRECISION_BITS;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* One row: out_w samples of c channels from the in row (stride c). */
static void pass_row(const uint8_t *in, uint8_t *out, uint32_t out_w, int c, int ksize, const int32_t *bounds,
                     const int32_t *k)
{
    for (uint32_t o = 0; o < out_w; o++) {
        const int32_t *kk = k + (size_t)o * ksize;
        const uint8_t *p = in + (size_t)bounds[2 * o] * c;
        int n = bounds[2 * o + 1];
        if (c == 3) {
            int32_t a = 1 << (PRECISION_BITS - 1), b = a, d = a;
            for (int x = 0; x < n; x++) {
                a += p[3 * x] * kk[x];
                b += p[3 * x + 1] * kk[x];
                d += p[3 * x + 2] * kk[x];
            }
            out[3 * o] = clip8(a);
            out[3 * o + 1] = clip8(b);
            out[3 * o + 2] = clip8(d);
        } else {
            for (int ch = 0; ch < c; ch++) {
                int32_t a = 1 << (PRECISION_BITS - 1);
                for (int x = 0; x < n; x++)
                    a += p[x * c + ch] * kk[x];
                out[(size_t)o * c + ch] = clip8(a);
            }
        }
    }
}

/* One output row of the vertical pass: n input rows of pitch bytes from
 * base, weights kk. */
static void vpass_row_scalar(const uint8_t *base, size_t pitch, int n, const int32_t *kk, uint8_t *row, size_t from)
{
    for (size_t i = from; i < pitch; i++) {
        int32_t a = 1 << (PRECISION_BITS - 1);
        for (int y = 0; y < n; y++)
            a += base[(size_t)y * pitch + i] * kk[y];
        row[i] = clip8(a);
    }
}

#if IMG_SSE2
/* The same sums with SSE2's pmaddwd (16-bit x 16-bit, pairs added): a
 * weight k (0 .. 2^22) is split as (k >> 11) << 11 | (k & 2047) so each
 * half fits 16 bits; the two sums are joined at the end. Integer
 * arithmetic throughout: the bytes equal the scalar code's. */
static void vpass_row_sse2(const uint8_t *base, size_t pitch, int n, const int32_t *kk, uint8_t *row, size_t from)
{
    const __m128i zero = _mm_setzero_si128(), half = _mm_set1_epi32(1 << (PRECISION_BITS - 1));
    size_t i = from;
    for (; i + 16 <= pitch; i += 16) {
        __m128i h0 = zero, h1 = zero, h2 = zero, h3 = zero, l0 = zero, l1 = zero, l2 = zero, l3 = zero;
        for (int y = 0; y < n; y += 2) {
            uint32_t ka = (uint32_t)kk[y], kb = y + 1 < n ? (uint32_t)kk[y + 1] : 0;
            __m128i wh = _mm_set1_epi32((int32_t)((kb >> 11) << 16 | (ka >> 11)));
            __m128i wl = _mm_set1_epi32((int32_t)((kb & 2047) << 16 | (ka & 2047)));
            __m128i ra = _mm_loadu_si128((const __m128i *)(const void *)(base + (size_t)y * pitch + i));
            __m128i rb =
                y + 1 < n ? _mm_loadu_si128((const __m128i *)(const void *)(base + (size_t)(y + 1) * pitch + i)) : zero;
            __m128i lo = _mm_unpacklo_epi8(ra, rb), hi = _mm_unpackhi_epi8(ra, rb);
            __m128i v0 = _mm_unpacklo_epi8(lo, zero), v1 = _mm_unpackhi_epi8(lo, zero);
            __m128i v2 = _mm_unpacklo_epi8(hi, zero), v3 = _mm_unpackhi_epi8(hi, zero);
            h0 = _mm_add_epi32(h0, _mm_madd_epi16(v0, wh));
            h1 = _mm_add_epi32(h1, _mm_madd_epi16(v1, wh));
            h2 = _mm_add_epi32(h2, _mm_madd_epi16(v2, wh));
            h3 = _mm_add_epi32(h3, _mm_madd_epi16(v3, wh));
            l0 = _mm_add_epi32(l0, _mm_madd_epi16(v0, wl));
            l1 = _mm_add_epi32(l1, _mm_madd_epi16(v1, wl));
            l2 = _mm_add_epi32(l2, _mm_madd_epi16(v2, wl));
            l3 = _mm_add_epi32(l3, _mm_madd_epi16(v3, wl));
        }
        __m128i s0 = _mm_srai_epi32(_mm_add_epi32(_mm_add_epi32(_mm_slli_epi32(h0, 11), l0), half), PRECISION_BITS);
        __m128i s1 = _mm_srai_epi32(_mm_add_epi32(_mm_add_epi32(_mm_slli_epi32(h1, 11), l1), half), PRECISION_BITS);
        __m128i s2 = _mm_srai_epi32(_mm_add_epi32(_mm_add_epi32(_mm_slli_epi32(h2, 11), l2), half), PRECISION_BITS);
        __m128i s3 = _mm_srai_epi32(_mm_add_epi32(_mm_add_epi32(_mm_slli_epi32(h3, 11), l3), half), PRECISION_BITS);
        /* saturating packs: the clamp to 0 .. 255 of clip8 */
        __m128i out = _mm_packus_epi16(_mm_packs_epi32(s0, s1), _mm_packs_epi32(s2, s3));
        _mm_storeu_si128((__m128i *)(void *)(row + i), out);
    }
    vpass_row_scalar(base, pitch, n, kk, row, i);
}

static __m128i load_rgb(const uint8_t *p)
{
    return _mm_cvtsi32_si128((int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16));
}

/* A pixel and the byte after it (one load; the fourth byte meets a zero
 * weight): only where that byte is inside the image */
static __m128i load_rgbx(const uint8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm_cvtsi32_si128(v);
}

/* The horizontal weights as pmaddwd operands: for output o and taps 2j,
 * 2j + 1, the vectors (k0, k1) x 3 then (0, 0), of the high halves then
 * of the low halves. */
static void hweights_rgb(const int32_t *k, int ksize, uint32_t out_w, int npair, __m128i *wv)
{
    for (uint32_t o = 0; o < out_w; o++)
        for (int j = 0; j < npair; j++) {
            uint32_t k0 = (uint32_t)k[(size_t)o * ksize + 2 * j];
            uint32_t k1 = 2 * j + 1 < ksize ? (uint32_t)k[(size_t)o * ksize + 2 * j + 1] : 0;
            short h0 = (short)(k0 >> 11), h1 = (short)(k1 >> 11), m0 = (short)(k0 & 2047), m1 = (short)(k1 & 2047);
            wv[((size_t)o * npair + j) * 2] = _mm_setr_epi16(h0, h1, h0, h1, h0, h1, 0, 0);
            wv[((size_t)o * npair + j) * 2 + 1] = _mm_setr_epi16(m0, m1, m0, m1, m0, m1, 0, 0);
        }
}

/* pass_row for 3 channels: two taps' R, G, B interleaved per pmaddwd */
static void hpass_rgb_sse2(const uint8_t *in, uint8_t *out, uint32_t out_w, int npair, const int32_t *bounds,
                           const __m128i *wv, int overread_ok)
{
    const __m128i zero = _mm_setzero_si128(), half = _mm_set1_epi32(1 << (PRECISION_BITS - 1));
    for (uint32_t o = 0; o < out_w; o++) {
        const uint8_t *p = in + (size_t)bounds[2 * o] * 3;
        int n = bounds[2 * o + 1];
        const __m128i *w = wv + (size_t)o * npair * 2;
        __m128i hi = zero, lo = zero;
        int x = 0;
        if (overread_ok) {
            for (; x + 1 < n; x += 2, w += 2) {
                __m128i v = _mm_unpacklo_epi8(_mm_unpacklo_epi8(load_rgbx(p + 3 * x), load_rgbx(p + 3 * x + 3)), zero);
                hi = _mm_add_epi32(hi, _mm_madd_epi16(v, w[0]));
                lo = _mm_add_epi32(lo, _mm_madd_epi16(v, w[1]));
            }
        }
        for (; x + 1 < n; x += 2, w += 2) {
            __m128i v = _mm_unpacklo_epi8(_mm_unpacklo_epi8(load_rgb(p + 3 * x), load_rgb(p + 3 * x + 3)), zero);
            hi = _mm_add_epi32(hi, _mm_madd_epi16(v, w[0]));
            lo = _mm_add_epi32(lo, _mm_madd_epi16(v, w[1]));
        }
        if (x < n) {
            __m128i v = _mm_unpacklo_epi8(_mm_unpacklo_epi8(load_rgb(p + 3 * x), zero), zero);
            hi = _mm_add_epi32(hi, _mm_madd_epi16(v, w[0]));
            lo = _mm_add_epi32(lo, _mm_madd_epi16(v, w[1]));
        }
        __m128i s = _mm_srai_epi32(_mm_add_epi32(_mm_add_epi32(_mm_slli_epi32(hi, 11), lo), half), PRECISION_BITS);
        s = _mm_packus_epi16(_mm_packs_epi32(s, s), zero);
        uint32_t px = (uint32_t)_mm_cvtsi128_si32(s);
        out[3 * o] = (uint8_t)px;
        out[3 * o + 1] = (uint8_t)(px >> 8);
        out[3 * o + 2] = (uint8_t)(px >> 16);
    }
}
#endif

#if IMG_AVX2
static int have_avx2(void)
{
    static int known = -1; /* the answer is the same in every thread: a racy first write is harmless */
    int v = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (v < 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_supports("avx2") ? 1 : 0;
        __atomic_store_n(&known, v, __ATOMIC_RELAXED);
    }
    return v;
}

/* hweights_rgb for the AVX2 kernel, which makes two outputs at once: for
 * outputs 2P, 2P + 1 and taps 2j, 2j + 1, 32 int16 (one 256-bit operand of
 * the weights' high halves, one of their low halves), output 2P's pair in
 * the low 128 bits and 2P + 1's in the high, each laid out as
 * hweights_rgb's (k0, k1) x 3 then (0, 0). Taps past the kernel weigh 0.
 * An odd last output is left to the SSE2 kernel. */
static void hweights_rgb_avx2(const int32_t *k, int ksize, uint32_t out_w, int npair, int16_t *wq)
{
    for (uint32_t o = 0; o < out_w / 2 * 2; o++)
        for (int j = 0; j < npair; j++) {
            int16_t *hw = wq + ((size_t)(o / 2) * npair + j) * 32 + (o % 2) * 8, *lw = hw + 16;
            for (int t = 0; t < 2; t++) {
                uint32_t kk = 2 * j + t < ksize ? (uint32_t)k[(size_t)o * ksize + 2 * j + t] : 0;
                for (int ch = 0; ch < 3; ch++) {
                    hw[t + 2 * ch] = (int16_t)(kk >> 11);
                    lw[t + 2 * ch] = (int16_t)(kk & 2047);
                }
            }
            hw[6] = hw[7] = lw[6] = lw[7] = 0;
        }
}

/* hpass_rgb_sse2 two outputs at a time: for each pair of taps, an 8-byte
 * load at each output's pixels (two pixels and two bytes more) into one
 * 256-bit register, a byte shuffle to (R0 R1 G0 G1 B0 B1 0 0) per half,
 * and pmaddwd by both outputs' weights at once; the sums stay apart, so no
 * horizontal add. The same integer sums as the scalar code in another
 * order (exact: no sum overflows). A pair of outputs whose last load would
 * pass `end` (the image's last byte + 1), and an odd last output, go to
 * the SSE2 kernel. */
__attribute__((target("avx2"))) static void hpass_rgb_avx2(const uint8_t *in, const uint8_t *end, uint8_t *out,
                                                           uint32_t out_w, int npair, const int32_t *bounds,
                                                           const int16_t *wq, const __m128i *wv, int overread_ok)
{
    const __m256i spread = _mm256_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1, 0, -1, 3, -1, 1,
                                            -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1);
    const __m256i half = _mm256_set1_epi32(1 << (PRECISION_BITS - 1));
    uint32_t o = 0;
    for (; o + 1 < out_w; o += 2) {
        const uint8_t *p0 = in + (size_t)bounds[2 * o] * 3, *p1 = in + (size_t)bounds[2 * o + 2] * 3;
        if ((p0 > p1 ? p0 : p1) + (size_t)npair * 6 + 2 > end) { /* the last 8-byte load passes the image */
            hpass_rgb_sse2(in, out + 3 * (size_t)o, 2, npair, bounds + 2 * o, wv + (size_t)o * npair * 2, overread_ok);
            continue;
        }
        const int16_t *w = wq + (size_t)(o / 2) * npair * 32;
        __m256i hi = _mm256_setzero_si256(), lo = _mm256_setzero_si256();
        for (int j = 0; j < npair; j++, w += 32, p0 += 6, p1 += 6) {
            __m256i v =
                _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadl_epi64((const __m128i *)(const void *)p0)),
                                        _mm_loadl_epi64((const __m128i *)(const void *)p1), 1);
            v = _mm256_shuffle_epi8(v, spread);
            hi = _mm256_add_epi32(hi, _mm256_madd_epi16(v, _mm256_loadu_si256((const __m256i *)(const void *)w)));
            lo =
                _mm256_add_epi32(lo, _mm256_madd_epi16(v, _mm256_loadu_si256((const __m256i *)(const void *)(w + 16))));
        }
        /* (R, G, B, 0) of output o, then of o + 1 */
        __m256i s =
            _mm256_srai_epi32(_mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(hi, 11), lo), half), PRECISION_BITS);
        __m128i s16 = _mm_packs_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        __m128i s8 = _mm_packus_epi16(s16, s16);
        uint64_t px = (uint64_t)_mm_cvtsi128_si64(s8);
        uint8_t *d = out + 3 * (size_t)o;
        d[0] = (uint8_t)px;
        d[1] = (uint8_t)(px >> 8);
        d[2] = (uint8_t)(px >> 16);
        d[3] = (uint8_t)(px >> 32);
        d[4] = (uint8_t)(px >> 40);
        d[5] = (uint8_t)(px >> 48);
    }
    if (o < out_w)
        hpass_rgb_sse2(in, out + 3 * (size_t)o, 1, npair, bounds + 2 * o, wv + (size_t)o * npair * 2, overread_ok);
}

/* vpass_row_sse2 32 bytes a step, from byte 0; returns where it stopped
 * (the SSE2 and scalar code finish the row). The unpacks and packs work
 * within each 128-bit half, and undo each other: the bytes come out in
 * order. */
__attribute__((target("avx2"))) static size_t vpass_row_avx2(const uint8_t *base, size_t pitch, int n,
                                                             const int32_t *kk, uint8_t *row)
{
    const __m256i zero = _mm256_setzero_si256(), half = _mm256_set1_epi32(1 << (PRECISION_BITS - 1));
    size_t i = 0;
    for (; i + 32 <= pitch; i += 32) {
        __m256i h0 = zero, h1 = zero, h2 = zero, h3 = zero, l0 = zero, l1 = zero, l2 = zero, l3 = zero;
        for (int y = 0; y < n; y += 2) {
            uint32_t ka = (uint32_t)kk[y], kb = y + 1 < n ? (uint32_t)kk[y + 1] : 0;
            __m256i wh = _mm256_set1_epi32((int32_t)((kb >> 11) << 16 | (ka >> 11)));
            __m256i wl = _mm256_set1_epi32((int32_t)((kb & 2047) << 16 | (ka & 2047)));
            __m256i ra = _mm256_loadu_si256((const __m256i *)(const void *)(base + (size_t)y * pitch + i));
            __m256i rb = y + 1 < n
                             ? _mm256_loadu_si256((const __m256i *)(const void *)(base + (size_t)(y + 1) * pitch + i))
                             : zero;
            __m256i lo = _mm256_unpacklo_epi8(ra, rb), hi = _mm256_unpackhi_epi8(ra, rb);
            __m256i v0 = _mm256_unpacklo_epi8(lo, zero), v1 = _mm256_unpackhi_epi8(lo, zero);
            __m256i v2 = _mm256_unpacklo_epi8(hi, zero), v3 = _mm256_unpackhi_epi8(hi, zero);
            h0 = _mm256_add_epi32(h0, _mm256_madd_epi16(v0, wh));
            h1 = _mm256_add_epi32(h1, _mm256_madd_epi16(v1, wh));
            h2 = _mm256_add_epi32(h2, _mm256_madd_epi16(v2, wh));
            h3 = _mm256_add_epi32(h3, _mm256_madd_epi16(v3, wh));
            l0 = _mm256_add_epi32(l0, _mm256_madd_epi16(v0, wl));
            l1 = _mm256_add_epi32(l1, _mm256_madd_epi16(v1, wl));
            l2 = _mm256_add_epi32(l2, _mm256_madd_epi16(v2, wl));
            l3 = _mm256_add_epi32(l3, _mm256_madd_epi16(v3, wl));
        }
        __m256i s0 =
            _mm256_srai_epi32(_mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(h0, 11), l0), half), PRECISION_BITS);
        __m256i s1 =
            _mm256_srai_epi32(_mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(h1, 11), l1), half), PRECISION_BITS);
        __m256i s2 =
            _mm256_srai_epi32(_mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(h2, 11), l2), half), PRECISION_BITS);
        __m256i s3 =
            _mm256_srai_epi32(_mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(h3, 11), l3), half), PRECISION_BITS);
        __m256i out = _mm256_packus_epi16(_mm256_packs_epi32(s0, s1), _mm256_packs_epi32(s2, s3));
        _mm256_storeu_si256((__m256i *)(void *)(row + i), out);
    }
    return i;
}
#endif

static size_t align16(size_t n)
{
    return (n + 15) & ~(size_t)15;
}

/* A resize's layout in the state's scratch: both axes' bounds and
 * weights, the RGB weights as SSE2 operands, then the intermediate image
 * (out_w wide, the rows [first, last) of the hull the vertical pass
 * reads). The hull is the box's whole-pixel hull [ylo, ylo + in_h) x
 * [xlo, xlo + in_w): the image the filter sees. */
struct plan {
    uint32_t ylo, xlo, in_h, in_w, first, last;
    int kh, kv, npair;
    size_t pitch;
    int32_t *bh, *k_h, *bv, *k_v;
    void *wv;
    void *wq; /* the AVX2 kernel's weights (RGB); NULL when it is not used */
    int avx2; /* the CPU has AVX2: the vertical pass uses it */
    uint8_t *mid;
};

static int plan_resize(struct img_state *st, int c, double y0, double x0, double y1, double x1, uint32_t out_h,
                       uint32_t out_w, int antialias, struct plan *p, struct sl_error *err)
{
    p->ylo = (uint32_t)floor(y0);
    p->xlo = (uint32_t)floor(x0);
    p->in_h = (uint32_t)ceil(y1) - p->ylo;
    p->in_w = (uint32_t)ceil(x1) - p->xlo;
    double ry0 = y0 - p->ylo, ry1 = y1 - p->ylo, rx0 = x0 - p->xlo, rx1 = x1 - p->xlo;
    p->kh = kernel_size(rx0, rx1, out_w, antialias);
    p->kv = kernel_size(ry0, ry1, out_h, antialias);
    if (p->kh > (int)p->in_w * 2 + 3)
        p->kh = (int)p->in_w * 2 + 3;
    if (p->kv > (int)p->in_h * 2 + 3)
        p->kv = (int)p->in_h * 2 + 3;
    p->npair = (p->kh + 1) / 2;
    p->pitch = (size_t)out_w * (size_t)c;
    size_t n_bh = align16((size_t)out_w * 2 * sizeof(int32_t)), n_kh = align16((size_t)out_w * p->kh * sizeof(int32_t));
    size_t n_bv = align16((size_t)out_h * 2 * sizeof(int32_t)), n_kv = align16((size_t)out_h * p->kv * sizeof(int32_t));
    size_t n_tmp = align16((size_t)(p->kh > p->kv ? p->kh : p->kv) * sizeof(double));
    size_t n_wv = 0, n_wq = 0;
#if IMG_SSE2
    if (c == 3)
        n_wv = (size_t)out_w * p->npair * 2 * sizeof(__m128i);
#endif
    p->avx2 = 0;
#if IMG_AVX2
    p->avx2 = have_avx2();
    if (c == 3 && p->avx2)
        n_wq = (size_t)(out_w / 2) * p->npair * 32 * sizeof(int16_t);
#endif
    size_t head = n_bh + n_kh + n_bv + n_kv + n_tmp + n_wv + n_wq;
    struct img__scratch *s = img__state_scratch(st);
    int rc = img__scratch_reserve(s, head + p->pitch * p->in_h, err);
    if (rc != 0)
        return rc;
    uint8_t *b = s->buf;
    p->bh = (int32_t *)(void *)b;
    p->k_h = (int32_t *)(void *)(b += n_bh);
    p->bv = (int32_t *)(void *)(b += n_kh);
    p->k_v = (int32_t *)(void *)(b += n_bv);
    double *tmp = (double *)(void *)(b += n_kv);
    p->wv = b += n_tmp;
    b += n_wv;
    p->wq = n_wq ? b : NULL;
    p->mid = s->buf + head;
    weights(rx0, rx1, p->in_w, out_w, antialias, p->kh, p->bh, p->k_h, tmp);
    weights(ry0, ry1, p->in_h, out_h, antialias, p->kv, p->bv, p->k_v, tmp);
#if IMG_SSE2
    if (c == 3)
        hweights_rgb(p->k_h, p->kh, out_w, p->npair, p->wv);
#endif
#if IMG_AVX2
    if (p->wq != NULL)
        hweights_rgb_avx2(p->k_h, p->kh, out_w, p->npair, p->wq);
#endif
    p->first = (uint32_t)p->bv[0];
    p->last = (uint32_t)(p->bv[2 * (out_h - 1)] + p->bv[2 * (out_h - 1) + 1]);
    if (p->last <= p->first)
        p->last = p->first + 1;
    return 0;
}

/* The horizontal pass: rows [first, last) of the hull into p->mid. */
static void hpass(const struct plan *p, const uint8_t *src, uint32_t h, uint32_t w, int c, uint32_t out_w)
{
    size_t src_pitch = (size_t)w * (size_t)c;
    for (uint32_t y = p->first; y < p->last; y++) {
        const uint8_t *in = src + (size_t)(p->ylo + y) * src_pitch + (size_t)p->xlo * c;
        uint8_t *to = p->mid + (size_t)(y - p->first) * p->pitch;
#if IMG_SSE2
        if (c == 3) {
            /* a 4-byte load at the hull's last pixel reads the next
             * column or row: not past the image's last byte */
            int overread_ok = p->ylo + y + 1 < h || p->xlo + p->in_w < w;
#if IMG_AVX2
            if (p->wq != NULL) {
                hpass_rgb_avx2(in, src + (size_t)h * src_pitch, to, out_w, p->npair, p->bh, p->wq, p->wv, overread_ok);
                continue;
            }
#endif
            hpass_rgb_sse2(in, to, out_w, p->npair, p->bh, p->wv, overread_ok);
            continue;
        }
#endif
        pass_row(in, to, out_w, c, p->kh, p->bh, p->k_h);
    }
}

/* The vertical pass: p->mid into dst. */
static void vpass(const struct plan *p, uint8_t *dst, uint32_t out_h)
{
    for (uint32_t o = 0; o < out_h; o++) {
        const int32_t *kk = p->k_v + (size_t)o * p->kv;
        const uint8_t *base = p->mid + (size_t)(p->bv[2 * o] - (int32_t)p->first) * p->pitch;
        int n = p->bv[2 * o + 1];
        uint8_t *row = dst + (size_t)o * p->pitch;
#if IMG_SSE2
        size_t from = 0;
#if IMG_AVX2
        if (p->avx2)
            from = vpass_row_avx2(base, p->pitch, n, kk, row);
#endif
        vpass_row_sse2(base, p->pitch, n, kk, row, from);
#else
        vpass_row_scalar(base, p->pitch, n, kk, row, 0);
#endif
    }
}

int img_resize(struct img_state *st, const uint8_t *src, uint32_t h, uint32_t w, int c, double y0, double x0, double y1,
               double x1, uint8_t *dst, uint32_t out_h, uint32_t out_w, int antialias, struct sl_error *err)
{
    if (c < 1 || c > 4 || out_h < 1 || out_w < 1 || out_h > IMG_RESIZE_MAX || out_w > IMG_RESIZE_MAX)
        return sl_error_set(err, SL_EINVAL, "resize: %d channels to %" PRIu32 "x%" PRIu32 " (need 1..4, 1x1 .. %dx%d)",
                            c, out_w, out_h, IMG_RESIZE_MAX, IMG_RESIZE_MAX);
    if (!(y0 >= 0 && y0 < y1 && y1 <= h && x0 >= 0 && x0 < x1 && x1 <= w))
        return sl_error_set(err, SL_EINVAL,
                            "resize: box [%g, %g) x [%g, %g) is not inside the %" PRIu32 "x%" PRIu32 " image", y0, y1,
                            x0, x1, w, h);
    struct plan p;
    int rc = plan_resize(st, c, y0, x0, y1, x1, out_h, out_w, antialias, &p, err);
    if (rc != 0)
        return rc;
    hpass(&p, src, h, w, c, out_w);
    vpass(&p, dst, out_h);
    return 0;
}

/* ---- flip, normalize ---- */

void img_flip(uint8_t *img, uint32_t h, uint32_t w, int c)
{
    if (c == 3) { /* the common case, unrolled */
        for (uint32_t y = 0; y < h; y++) {
            uint8_t *row = img + (size_t)y * w * 3;
            for (uint32_t a = 0, b = w - 1; w > 0 && a < b; a++, b--) {
                uint8_t *p = row + (size_t)a * 3, *q = row + (size_t)b * 3;
                uint8_t t0 = p[0], t1 = p[1], t2 = p[2];
                p[0] = q[0];
                p[1] = q[1];
                p[2] = q[2];
                q[0] = t0;
                q[1] = t1;
                q[2] = t2;
            }
        }
        return;
    }
    for (uint32_t y = 0; y < h; y++) {
        uint8_t *row = img + (size_t)y * w * (size_t)c;
        for (uint32_t a = 0, b = w - 1; w > 0 && a < b; a++, b--)
            for (int ch = 0; ch < c; ch++) {
                uint8_t t = row[(size_t)a * c + ch];
                row[(size_t)a * c + ch] = row[(size_t)b * c + ch];
                row[(size_t)b * c + ch] = t;
            }
    }
}

/* The float32 value of each channel's 256 inputs. */
static void normalize_lut(int c, const float *mean, const float *std, float lut[4][256])
{
    for (int ch = 0; ch < c && ch < 4; ch++)
        for (int x = 0; x < 256; x++)
            lut[ch][x] = ((float)x / 255.0f - mean[ch]) / std[ch];
}

void img_normalize(const uint8_t *src, uint32_t h, uint32_t w, int c, const float *mean, const float *std, int chw,
                   float *out)
{
    float lut[4][256];
    normalize_lut(c, mean, std, lut);
    size_t plane = (size_t)h * w;
    if (c == 3 && chw) { /* the common case: three planes written in order */
        float *r = out, *g = out + plane, *b = out + 2 * plane;
        for (size_t p = 0; p < plane; p++) {
            r[p] = lut[0][src[3 * p]];
            g[p] = lut[1][src[3 * p + 1]];
            b[p] = lut[2][src[3 * p + 2]];
        }
        return;
    }
    for (size_t p = 0; p < plane; p++)
        for (int ch = 0; ch < c && ch < 4; ch++) {
            float v = lut[ch][src[p * c + ch]];
            if (chw)
                out[(size_t)ch * plane + p] = v;
            else
                out[p * c + ch] = v;
        }
}

void img_normalize16(const uint8_t *src, uint32_t h, uint32_t w, int c, const float *mean, const float *std, int chw,
                     int bf16, uint16_t *out)
{
    float lut[4][256];
    uint16_t lut16[4][256];
    normalize_lut(c, mean, std, lut);
    for (int ch = 0; ch < c && ch < 4; ch++)
        for (int x = 0; x < 256; x++)
            lut16[ch][x] = bf16 ? sl_f32_to_bf16(lut[ch][x]) : sl_f32_to_f16(lut[ch][x]);
    size_t plane = (size_t)h * w;
    for (size_t p = 0; p < plane; p++)
        for (int ch = 0; ch < c && ch < 4; ch++) {
            uint16_t v = lut16[ch][src[p * c + ch]];
            if (chw)
                out[(size_t)ch * plane + p] = v;
            else
                out[p * c + ch] = v;
        }
}
