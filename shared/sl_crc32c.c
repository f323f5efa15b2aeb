/* sl_crc32c: three implementations behind one function pointer chosen on
 * first use.
 *
 *  - ISA-L's crc32_iscsi (when built with it): its own run-time dispatch to
 *    folding / 3-way interleaved crc32 code, the fastest here;
 *  - SSE4.2 crc32 instruction, 8 bytes per step (a single dependency chain);
 *  - portable slice-by-8 tables, for any other CPU.
 *
 * ISA-L's convention differs from TensorFlow's Extend(): it neither inverts
 * the initial value nor the result, so extend(crc) = ~iscsi(~crc).
 *
 * ISA-L's AVX-512 folding code returns with the upper halves of the vector
 * registers dirty (no vzeroupper). The SSE instructions compilers emit for
 * ordinary struct copies then pay a transition: each waits on the last
 * vector result, that is on the CRC's loads. Per record from DRAM this made
 * a 1 GiB TFRecord scan 3x slower (issue #13 part 7; docs/performance.md,
 * "P1 at scale"), so on CPUs with AVX the ISA-L call is followed by
 * vzeroupper.
 */
#include "sl_crc32c.h"

#include <limits.h>
#include <stdatomic.h>
#include <string.h>

#ifdef SLUICE_HAVE_ISAL
#include <isa-l/crc.h>
#endif

#define POLY 0x82F63B78u

static uint32_t table[8][256];
static atomic_int table_ready;

static void table_init(void)
{
    if (atomic_load_explicit(&table_ready, memory_order_acquire))
        return;
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
        table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xFF];
    /* Every thread computes identical contents, so a racing second init
     * writes the same values; the release store publishes them. */
    atomic_store_explicit(&table_ready, 1, memory_order_release);
}

static uint32_t crc_portable(uint32_t crc, const void *data, size_t n)
{
    table_init();
    const uint8_t *p = data;
    uint32_t c = ~crc;
    while (n >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        lo = __builtin_bswap32(lo);
        hi = __builtin_bswap32(hi);
#endif
        lo ^= c;
        c = table[7][lo & 0xFF] ^ table[6][(lo >> 8) & 0xFF] ^ table[5][(lo >> 16) & 0xFF] ^ table[4][lo >> 24] ^
            table[3][hi & 0xFF] ^ table[2][(hi >> 8) & 0xFF] ^ table[1][(hi >> 16) & 0xFF] ^ table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = (c >> 8) ^ table[0][(c ^ *p++) & 0xFF];
    return ~c;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_SSE42_IMPL 1
__attribute__((target("sse4.2"))) static uint32_t crc_sse42(uint32_t crc, const void *data, size_t n)
{
    const uint8_t *p = data;
    uint64_t c = ~crc;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return ~c32;
}
#endif

#ifdef SLUICE_HAVE_ISAL
static uint32_t crc_isal(uint32_t crc, const void *data, size_t n)
{
    const uint8_t *p = data;
    uint32_t c = ~crc;
    while (n > 0) {
        int chunk = n > (size_t)INT_MAX ? INT_MAX : (int)n;
        c = crc32_iscsi((unsigned char *)p, chunk, c);
        p += chunk;
        n -= (size_t)chunk;
    }
    return ~c;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_ISAL_VZU 1
__attribute__((target("avx"))) static uint32_t crc_isal_vzu(uint32_t crc, const void *data, size_t n)
{
    uint32_t c = n <= (size_t)INT_MAX ? ~crc32_iscsi((unsigned char *)data, (int)n, ~crc) : crc_isal(crc, data, n);
    __builtin_ia32_vzeroupper();
    return c;
}
#endif
#endif

sl_crc32c_fn sl_crc32c_impl_fn(enum sl_crc32c_impl which)
{
    switch (which) {
    case SL_CRC32C_PORTABLE: return crc_portable;
    case SL_CRC32C_SSE42:
#ifdef HAVE_SSE42_IMPL
        __builtin_cpu_init();
        if (__builtin_cpu_supports("sse4.2"))
            return crc_sse42;
#endif
        return NULL;
    case SL_CRC32C_ISAL:
#ifdef SLUICE_HAVE_ISAL
#ifdef HAVE_ISAL_VZU
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx"))
            return crc_isal_vzu;
#endif
        return crc_isal;
#else
        return NULL;
#endif
    default: return NULL;
    }
}

static _Atomic(sl_crc32c_fn) chosen;
static _Atomic(sl_crc32c_fn) chosen_small;
static const char *_Atomic chosen_name;

static sl_crc32c_fn choose(void)
{
    static const struct {
        enum sl_crc32c_impl id;
        const char *name;
    } order[] = {{SL_CRC32C_ISAL, "isa-l"}, {SL_CRC32C_SSE42, "sse4.2"}, {SL_CRC32C_PORTABLE, "portable"}};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        sl_crc32c_fn fn = sl_crc32c_impl_fn(order[i].id);
        if (fn != NULL) {
            sl_crc32c_fn small = sl_crc32c_impl_fn(SL_CRC32C_SSE42);
            atomic_store(&chosen_small, small != NULL ? small : fn);
            atomic_store(&chosen_name, order[i].name);
            atomic_store(&chosen, fn);
            return fn;
        }
    }
    return crc_portable;
}

/* Below this size the crc32 instruction beats ISA-L's folding code, whose
 * set-up costs ~14 ns a call (8 bytes: 1.7 ns vs 13.8 ns here); TFRecord
 * checks an 8-byte CRC per record, so the split matters. */
#define SMALL_INPUT 64

uint32_t sl_crc32c_extend(uint32_t crc, const void *p, size_t n)
{
    sl_crc32c_fn fn = atomic_load_explicit(n < SMALL_INPUT ? &chosen_small : &chosen, memory_order_relaxed);
    if (fn == NULL) {
        choose();
        fn = atomic_load(n < SMALL_INPUT ? &chosen_small : &chosen);
    }
    return fn(crc, p, n);
}

const char *sl_crc32c_impl_name(void)
{
    if (atomic_load(&chosen) == NULL)
        choose();
    return atomic_load(&chosen_name);
}
