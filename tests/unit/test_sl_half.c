/* sl_half: float16 and bfloat16 against independent references. float16:
 * the compiler's own _Float16 conversions (GCC's, correctly rounded) over
 * every float16 and a spread of float32 bit patterns that hits every
 * exponent, the ties and the ends; bfloat16: the nearest of the two
 * truncations by exact distance (double), ties to the even one; int64: the
 * nearest value by exact integer distance. NaNs stay NaNs. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "sl_half.h"
#include "sl_test.h"

#if defined(__FLT16_MAX__)
__extension__ typedef _Float16 ref_f16;
#define HAVE_REF_F16 1
#endif

static int f32_is_nan(uint32_t x)
{
    return (x & 0x7fffffffu) > 0x7f800000u;
}

/* bfloat16 by distance: the truncation lo and the next value up hi (in
 * magnitude), whichever is nearer, the even one on a tie. */
static uint16_t ref_bf16(uint32_t x)
{
    uint32_t lo = x & 0xffff0000u, hi = lo + 0x10000u;
    float f = sl_f32_from_bits(x), flo = sl_f32_from_bits(lo);
    if ((lo & 0x7f800000u) == 0x7f800000u) /* an infinity: nothing beyond it */
        return (uint16_t)(lo >> 16);
    double dlo = fabs((double)f - (double)flo);
    double dhi = (hi & 0x7f800000u) == 0x7f800000u && (hi & 0x007fffffu) == 0
                     ? fabs(ldexp(1.0, 128) * (hi & 0x80000000u ? -1 : 1) - (double)f) /* past the largest: 2^128 */
                     : fabs((double)sl_f32_from_bits(hi) - (double)f);
    if (dlo < dhi || (dlo == dhi && !((lo >> 16) & 1)))
        return (uint16_t)(lo >> 16);
    return (uint16_t)(hi >> 16);
}

static void check_f32(uint32_t x)
{
    float f = sl_f32_from_bits(x);
    uint16_t b = sl_f32_to_bf16(f);
    if (f32_is_nan(x)) {
        ck_assert_msg((b & 0x7fffu) > 0x7f80u, "bfloat16 of NaN %08x: %04x is not a NaN", x, b);
        ck_assert_msg(f32_is_nan(sl_f32_bits(sl_bf16_to_f32(b))), "NaN %08x", x);
    } else {
        ck_assert_msg(b == ref_bf16(x), "bfloat16 of %08x (%a): %04x, want %04x", x, (double)f, b, ref_bf16(x));
    }
    uint16_t h = sl_f32_to_f16(f);
    if (f32_is_nan(x)) {
        ck_assert_msg((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0, "float16 of NaN %08x: %04x", x, h);
        return;
    }
#if HAVE_REF_F16
    ref_f16 r = (ref_f16)f;
    uint16_t want;
    memcpy(&want, &r, 2);
    ck_assert_msg(h == want, "float16 of %08x (%a): %04x, want %04x", x, (double)f, h, want);
#endif
}

START_TEST(test_f32_to_half)
{
    /* every exponent, with mantissas around every rounding boundary of
     * both formats (the low 13 and 16 bits at 0, the half, one either
     * side), and a stride through all the rest */
    static const uint32_t lows[] = {0,       1,       0xfffu,  0x1000u, 0x1001u,  0x1fffu,  0x2000u,  0x3000u,
                                    0x7fffu, 0x8000u, 0x8001u, 0xffffu, 0x10000u, 0x18000u, 0x7fffffu};
    for (uint32_t sign = 0; sign < 2; sign++)
        for (uint32_t e = 0; e < 256; e++)
            for (uint32_t top = 0; top < 0x80u; top += 3)
                for (size_t k = 0; k < sizeof lows / sizeof lows[0]; k++)
                    check_f32(sign << 31 | e << 23 | (((top << 16) | lows[k]) & 0x7fffffu));
    for (uint64_t x = 0; x < ((uint64_t)1 << 32); x += 65521) /* a prime stride */
        check_f32((uint32_t)x);
}
END_TEST

START_TEST(test_half_to_f32)
{
    for (uint32_t h = 0; h < 0x10000u; h++) {
        float f = sl_f16_to_f32((uint16_t)h);
        uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
        if (e == 0x1f && m != 0) {
            ck_assert_msg(isnan(f), "float16 %04x", h);
            continue;
        }
        /* exact, and back to the same bits */
        double want = e == 0x1f ? INFINITY : e ? ldexp(1024.0 + m, (int)e - 25) : ldexp((double)m, -24);
        if (h & 0x8000u)
            want = -want;
        ck_assert_msg((double)f == want && !signbit(f) == !signbit(want), "float16 %04x: %a, want %a", h, (double)f,
                      want);
        ck_assert_uint_eq(sl_f32_to_f16(f), h);
#if HAVE_REF_F16
        ref_f16 r;
        uint16_t hv = (uint16_t)h;
        memcpy(&r, &hv, 2);
        ck_assert((float)r == f);
#endif
        /* bfloat16: widening is the bits shifted, and back */
        ck_assert_uint_eq(sl_f32_bits(sl_bf16_to_f32((uint16_t)h)), h << 16);
        if (!((h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0))
            ck_assert_uint_eq(sl_f32_to_bf16(sl_bf16_to_f32((uint16_t)h)), h);
    }
}
END_TEST

/* |v| as a float16 or bfloat16 by brute force: the representable value
 * (as a double) nearest, ties to an even significand. */
static double ref_int(int64_t v, int bits, double max)
{
    double a = v < 0 ? -(double)(uint64_t)(0 - (uint64_t)v) : (double)v; /* only for the exponent */
    long double x = v < 0 ? -(long double)(0 - (uint64_t)v) : (long double)v;
    int e;
    frexp(fabs(a), &e);
    long double best = 0;
    for (int de = -2; de <= 1; de++) { /* the binade of |v| and its neighbours */
        int ee = e + de;
        if (ee < 1)
            continue;
        long double step = ldexpl(1.0L, ee - bits);
        long double q = floorl(fabsl(x) / step);
        for (int k = -1; k <= 2; k++) {
            long double c = (q + k) * step;
            if (c < 0 || c > ldexpl(1.0L, ee))
                continue;
            long double d = fabsl(fabsl(x) - c), db = fabsl(fabsl(x) - best);
            int even = fmodl(c / step, 2.0L) == 0;
            if (d < db || (d == db && even))
                best = c;
        }
    }
    /* past the largest finite value, by at least half a step there: an infinity */
    double r = (double)best;
    if (r > max)
        r = INFINITY;
    return v < 0 ? -r : r;
}

START_TEST(test_int64_to_half)
{
    static const int64_t edge[] = {0,
                                   1,
                                   -1,
                                   255,
                                   256,
                                   257,
                                   259,
                                   2047,
                                   2048,
                                   2049,
                                   2050,
                                   2051,
                                   65504,
                                   65519,
                                   65520,
                                   -65520,
                                   65535,
                                   16777217,
                                   16842753,
                                   -16842753,
                                   INT64_MAX,
                                   INT64_MIN,
                                   9223372036854775806,
                                   -9223372036854775807,
                                   1099511627776,
                                   1103806595072};
    uint64_t s = 0x243f6a8885a308d3ull;
    for (size_t i = 0; i < 200000; i++) {
        int64_t v;
        if (i < sizeof edge / sizeof edge[0]) {
            v = edge[i];
        } else {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            int shift = (int)(s >> 58); /* magnitudes of every size */
            v = (int64_t)(s >> shift);
            if (s & 1)
                v = -v;
        }
        float h = sl_f16_to_f32(sl_i64_to_f16(v)), b = sl_bf16_to_f32(sl_i64_to_bf16(v));
        double wh = ref_int(v, 11, 65504.0), wb = ref_int(v, 8, 3.3895313892515355e38);
        ck_assert_msg((double)h == wh, "float16 of %lld: %a, want %a", (long long)v, (double)h, wh);
        ck_assert_msg((double)b == wb, "bfloat16 of %lld: %a, want %a", (long long)v, (double)b, wb);
    }
    /* the double rounding one rounding avoids: 2^24 + 2^16 + 1 through float32 is a bfloat16 tie */
    ck_assert_uint_eq(sl_i64_to_bf16(16842753), 0x4b81);
    ck_assert_uint_eq(sl_f32_to_bf16((float)16842753), 0x4b80);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("sl_half");
    TCase *tc = tcase_create("half");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_f32_to_half);
    tcase_add_test(tc, test_half_to_f32);
    tcase_add_test(tc, test_int64_to_half);
    suite_add_tcase(s, tc);
    return s;
}
