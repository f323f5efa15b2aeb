/* sl_half: float16 (IEEE 754 binary16) and bfloat16 values, to and from
 * float32 and int64, bit by bit (no compiler or CPU support assumed).
 *
 * Narrowing rounds to nearest, ties to even, as numpy's astype(float16)
 * and torch's .to(torch.bfloat16) do: a value past the largest finite one
 * becomes an infinity of its sign (float16: |x| >= 65520), a value below
 * the smallest subnormal's half becomes a zero of its sign, and a NaN stays
 * a NaN (quiet; its payload's top bits kept). bfloat16 is the top 16 bits
 * of a float32, rounded. Widening to float32 is exact.
 *
 * Thread-safe: yes (pure functions). Header-only: called per value.
 */
#ifndef SL_HALF_H
#define SL_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t sl_f32_bits(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    return x;
}

static inline float sl_f32_from_bits(uint32_t x)
{
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

static inline uint16_t sl_f32_to_f16(float f)
{
    uint32_t x = sl_f32_bits(f), ax = x & 0x7fffffffu;
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    if (ax > 0x7f800000u) /* NaN: quiet, the payload's top bits */
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x477ff000u) /* 65520 and up (ties to even past 65504), and infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x38800000u) { /* a normal float16 (2^-14 and up): rebias, round the 13 bits dropped */
        uint32_t r = ax + 0xfffu + ((ax >> 13) & 1u) - 0x38000000u;
        return (uint16_t)(sign | (r >> 13));
    }
    uint32_t e = ax >> 23;
    if (e < 102) /* below 2^-25: zero (2^-25 itself is a tie, to the even 0) */
        return sign;
    /* a subnormal float16: the value in units of 2^-24 is mant >> shift */
    uint32_t mant = (ax & 0x7fffffu) | 0x800000u, shift = 126 - e; /* 14..24 */
    uint32_t q = mant >> shift, rest = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (q & 1u)))
        q++; /* may carry into the smallest normal: its bits are right */
    return (uint16_t)(sign | q);
}

static inline float sl_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) /* infinity, NaN (payload kept) */
        return sl_f32_from_bits(sign | 0x7f800000u | (m << 13));
    if (e != 0)
        return sl_f32_from_bits(sign | ((e + 112) << 23) | (m << 13));
    if (m == 0)
        return sl_f32_from_bits(sign);
    /* a subnormal: m x 2^-24, normal in float32 */
    int k = 0;
    while (!(m & 0x400u)) {
        m <<= 1;
        k++;
    }
    return sl_f32_from_bits(sign | ((uint32_t)(113 - k) << 23) | ((m & 0x3ffu) << 13));
}

static inline uint16_t sl_f32_to_bf16(float f)
{
    uint32_t x = sl_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: quiet, so that it stays a NaN */
        return (uint16_t)((x >> 16) | 0x0040u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16); /* infinity stays; overflow carries into it */
}

static inline float sl_bf16_to_f32(uint16_t b)
{
    return sl_f32_from_bits((uint32_t)b << 16);
}

/* An integer to `bits` significant bits (11: float16, 8: bfloat16), to
 * nearest, ties to even, as a float32 (exact: at most 11 bits, below
 * 2^64); narrowing that to the format then rounds no more. Rounding the
 * integer once avoids int64 -> float32 -> format's double rounding. */
static inline float sl_i64_round_bits(int64_t v, int bits)
{
    uint64_t a = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    int top = 63;
    if (a == 0)
        return 0.0f;
    while (!(a >> top))
        top--;
    int drop = top + 1 - bits;
    if (drop > 0) {
        uint64_t rest = a & ((UINT64_C(1) << drop) - 1), half = UINT64_C(1) << (drop - 1);
        a >>= drop;
        if (rest > half || (rest == half && (a & 1u)))
            a++;
    } else {
        drop = 0;
    }
    float m = (float)a; /* at most 2^bits: exact */
    for (int i = 0; i < drop; i++)
        m *= 2.0f; /* powers of two: exact up to 2^64 */
    return v < 0 ? -m : m;
}

static inline uint16_t sl_i64_to_f16(int64_t v)
{
    return sl_f32_to_f16(sl_i64_round_bits(v, 11));
}

static inline uint16_t sl_i64_to_bf16(int64_t v)
{
    return sl_f32_to_bf16(sl_i64_round_bits(v, 8));
}

#endif
