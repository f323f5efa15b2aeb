/* fmt_crc32c: CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) and
 * TFRecord's mask. The fastest implementation available on this CPU is
 * chosen once at run time (ISA-L's crc32_iscsi when built with it, else
 * SSE4.2 crc32 instructions, else a portable slice-by-8 table).
 *
 * Thread-safe: yes.
 */
#ifndef FMT_CRC32C_H
#define FMT_CRC32C_H

#include <stddef.h>
#include <stdint.h>

#define FMT_CRC32C_MASK_DELTA 0xa282ead8u

/* crc32c of p[0..n), continuing from `crc` (0 to start):
 * fmt_crc32c_extend(fmt_crc32c(a), b) == fmt_crc32c(a || b). */
uint32_t fmt_crc32c_extend(uint32_t crc, const void *p, size_t n);

static inline uint32_t fmt_crc32c(const void *p, size_t n)
{
    return fmt_crc32c_extend(0, p, n);
}

static inline uint32_t fmt_crc32c_mask(uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + FMT_CRC32C_MASK_DELTA;
}

static inline uint32_t fmt_crc32c_unmask(uint32_t masked)
{
    uint32_t rot = masked - FMT_CRC32C_MASK_DELTA;
    return (rot >> 17) | (rot << 15);
}

/* Each implementation, for tests and benchmarks; an unavailable one returns
 * NULL from fmt_crc32c_impl_fn(). */
enum fmt_crc32c_impl { FMT_CRC32C_PORTABLE, FMT_CRC32C_SSE42, FMT_CRC32C_ISAL, FMT_CRC32C_NIMPL };
typedef uint32_t (*fmt_crc32c_fn)(uint32_t crc, const void *p, size_t n);
fmt_crc32c_fn fmt_crc32c_impl_fn(enum fmt_crc32c_impl which);
/* Name of the implementation fmt_crc32c_extend() uses: "isa-l", "sse4.2", "portable". */
const char *fmt_crc32c_impl_name(void);

#endif
