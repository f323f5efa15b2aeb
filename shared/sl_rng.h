/* sl_rng: a small deterministic random stream for augmentation.
 *
 * A stream is a pure function of its key, (seed, epoch, element id, op
 * index): the same element of the same epoch gets the same draws from the
 * same op whichever feeder, thread or takeover computes it, and a resumed
 * run draws what an uninterrupted one drew. The key is mixed into a state
 * with splitmix64's finaliser, one word at a time, and the stream is
 * splitmix64's sequence from that state: the same numbers on every
 * platform and compiler (integer arithmetic only; a double is made from
 * the top 53 bits).
 *
 * Thread-safe: a stream has one owner; streams share nothing. Header-only:
 * one is made per element and op.
 */
#ifndef SL_RNG_H
#define SL_RNG_H

#include <stdint.h>

struct sl_rng {
    uint64_t s;
};

static inline uint64_t sl_rng_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* The stream of (seed, epoch, element, op). Different keys give unrelated
 * streams: each word is folded in after the previous ones are mixed, so
 * (1, 2, ...) and (2, 1, ...) differ. */
static inline struct sl_rng sl_rng_key(uint64_t seed, uint64_t epoch, uint64_t element, uint64_t op)
{
    uint64_t s = sl_rng_mix(seed + UINT64_C(0x9e3779b97f4a7c15));
    s = sl_rng_mix(s ^ (epoch + UINT64_C(0x632be59bd9b4e019)));
    s = sl_rng_mix(s ^ (element + UINT64_C(0x8cb92ba72f3d8dd7)));
    s = sl_rng_mix(s ^ (op + UINT64_C(0xd6e8feb86659fd93)));
    return (struct sl_rng){s};
}

static inline uint64_t sl_rng_u64(struct sl_rng *r)
{
    r->s += UINT64_C(0x9e3779b97f4a7c15);
    return sl_rng_mix(r->s);
}

/* Uniform in [0, 1), 53 bits. */
static inline double sl_rng_uniform(struct sl_rng *r)
{
    return (double)(sl_rng_u64(r) >> 11) * 0x1.0p-53;
}

/* Uniform in [lo, hi) (lo when hi <= lo). */
static inline double sl_rng_range(struct sl_rng *r, double lo, double hi)
{
    double u = sl_rng_uniform(r);
    return hi > lo ? lo + (hi - lo) * u : lo;
}

/* Uniform integer in [0, n) without modulo bias worth naming (n <= 2^32:
 * the multiply-shift of a 64-bit draw's top half); 0 when n == 0. */
static inline uint32_t sl_rng_below(struct sl_rng *r, uint32_t n)
{
    return (uint32_t)(((sl_rng_u64(r) >> 32) * (uint64_t)n) >> 32);
}

#endif
