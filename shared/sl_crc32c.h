/* sl_crc32c: CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) and
 * TFRecord's mask. The fastest implementation available on this CPU is
 * chosen once at run time (ISA-L's crc32_iscsi when built with it, else
 * SSE4.2 crc32 instructions, else a portable slice-by-8 table).
 *
 * Thread-safe: yes.
 */
#ifndef SL_CRC32C_H
#define SL_CRC32C_H

#include <stddef.h>
#include <stdint.h>

#define SL_CRC32C_MASK_DELTA 0xa282ead8u

/* crc32c of p[0..n), continuing from `crc` (0 to start):
 * sl_crc32c_extend(sl_crc32c(a), b) == sl_crc32c(a || b). */
uint32_t sl_crc32c_extend(uint32_t crc, const void *p, size_t n);

static inline uint32_t sl_crc32c(const void *p, size_t n)
{
    return sl_crc32c_extend(0, p, n);
}

static inline uint32_t sl_crc32c_mask(uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + SL_CRC32C_MASK_DELTA;
}

static inline uint32_t sl_crc32c_unmask(uint32_t masked)
{
    uint32_t rot = masked - SL_CRC32C_MASK_DELTA;
    return (rot >> 17) | (rot << 15);
}

/* Each implementation, for tests and benchmarks; an unavailable one returns
 * NULL from sl_crc32c_impl_fn(). */
enum sl_crc32c_impl { SL_CRC32C_PORTABLE, SL_CRC32C_SSE42, SL_CRC32C_ISAL, SL_CRC32C_NIMPL };
typedef uint32_t (*sl_crc32c_fn)(uint32_t crc, const void *p, size_t n);
sl_crc32c_fn sl_crc32c_impl_fn(enum sl_crc32c_impl which);
/* Name of the implementation sl_crc32c_extend() uses: "isa-l", "sse4.2", "portable". */
const char *sl_crc32c_impl_name(void);

#endif
