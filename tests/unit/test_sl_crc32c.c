/* CRC-32C: TensorFlow's crc32c_test.cc vectors (RFC 3720 B.4), the standard
 * check value, TFRecord's mask, and agreement of every implementation at
 * every length and alignment; on x86-64, that no implementation leaves the
 * upper halves of the vector registers in use. */
#include <stdlib.h>
#include <string.h>

#include "sl_crc32c.h"
#include "sl_test.h"

static const struct {
    const char *name;
    uint32_t crc;
} named[] = {
    {"123456789", 0xe3069283u},   {"", 0x00000000u}, {"a", 0xc1d04330u}, {"foo", 0xcfc4ae1du},
    {"hello world", 0xc99465aau},
};

static void check_all_impls(const void *p, size_t n, uint32_t want)
{
    for (int i = 0; i < SL_CRC32C_NIMPL; i++) {
        sl_crc32c_fn fn = sl_crc32c_impl_fn((enum sl_crc32c_impl)i);
        if (fn == NULL)
            continue;
        ck_assert_msg(fn(0, p, n) == want, "impl %d: got %08x want %08x (n=%zu)", i, fn(0, p, n), want, n);
    }
    ck_assert_uint_eq(sl_crc32c(p, n), want);
}

START_TEST(test_rfc3720_vectors)
{
    uint8_t buf[48];
    memset(buf, 0, 32);
    check_all_impls(buf, 32, 0x8a9136aau);
    memset(buf, 0xff, 32);
    check_all_impls(buf, 32, 0x62a8ab43u);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)i;
    check_all_impls(buf, 32, 0x46dd794eu);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)(31 - i);
    check_all_impls(buf, 32, 0x113fdb5cu);
    uint8_t pdu[48];
    ck_assert_uint_eq(sl_test_hex("01c00000 00000000 00000000 00000000 14000000 00000400 00000014"
                                  "00000018 28000000 00000000 02000000 00000000",
                                  pdu, sizeof pdu),
                      48);
    check_all_impls(pdu, 48, 0xd9963a56u);
    check_all_impls(pdu, 41, 0xdd1b19beu);
    check_all_impls(pdu + 1, 44, 0x4930c4b1u);
}
END_TEST

START_TEST(test_named_vectors_and_masks)
{
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        check_all_impls(named[i].name, strlen(named[i].name), named[i].crc);
    ck_assert_uint_eq(sl_crc32c_mask(0xe3069283u), 0xc78ab0e5u);
    ck_assert_uint_eq(sl_crc32c_mask(0), 0xa282ead8u);
    ck_assert_uint_eq(sl_crc32c_mask(0xcfc4ae1du), 0xfebe8a61u);
    uint8_t len0[8] = {0};
    ck_assert_uint_eq(sl_crc32c_mask(sl_crc32c(len0, 8)), 0x07980329u);
    uint8_t len3[8] = {3};
    ck_assert_uint_eq(sl_crc32c_mask(sl_crc32c(len3, 8)), 0x0e4999b0u);
    for (uint32_t v = 1; v < 0xF0000000u; v += 0x01234567u)
        ck_assert_uint_eq(sl_crc32c_unmask(sl_crc32c_mask(v)), v);
}
END_TEST

START_TEST(test_extend_is_concatenation)
{
    uint32_t a = sl_crc32c("hello ", 6);
    ck_assert_uint_eq(sl_crc32c_extend(a, "world", 5), sl_crc32c("hello world", 11));
}
END_TEST

START_TEST(test_impls_agree_every_length_and_alignment)
{
    uint8_t *buf = malloc(4096 + 16);
    uint32_t x = 12345;
    for (int i = 0; i < 4096 + 16; i++) {
        x = x * 1103515245u + 12345u;
        buf[i] = (uint8_t)(x >> 16);
    }
    sl_crc32c_fn ref = sl_crc32c_impl_fn(SL_CRC32C_PORTABLE);
    ck_assert(ref != NULL);
    for (size_t align = 0; align < 8; align++)
        for (size_t n = 0; n < 300; n++) {
            uint32_t want = ref(0, buf + align, n);
            check_all_impls(buf + align, n, want);
            /* split at every point: extend(a, b) */
            if (n > 0) {
                size_t k = n / 3;
                ck_assert_uint_eq(sl_crc32c_extend(sl_crc32c(buf + align, k), buf + align + k, n - k), want);
            }
        }
    check_all_impls(buf, 4096 + 16, ref(0, buf, 4096 + 16));
    free(buf);
}
END_TEST

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* ISA-L's AVX-512 code returns with the upper register halves in use; any
 * SSE instruction after it then waits on the CRC (3x slower record scans
 * from DRAM, docs/performance.md "P1 at scale"). sl_crc32c clears them. */
START_TEST(test_upper_vector_state_clean_after_crc)
{
    uint64_t before;
    if (!sl_test_xinuse(&before))
        return; /* cannot be observed on this CPU */
    size_t n = (size_t)1 << 20;
    uint8_t *buf = malloc(n);
    for (size_t i = 0; i < n; i++)
        buf[i] = (uint8_t)(i * 7 + (i >> 9));
    static const size_t sizes[] = {8, 63, 64, 836, 4096, (size_t)1 << 20};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        for (int i = 0; i < SL_CRC32C_NIMPL; i++) {
            sl_crc32c_fn fn = sl_crc32c_impl_fn((enum sl_crc32c_impl)i);
            if (fn == NULL)
                continue;
            volatile uint32_t c = fn(0, buf, sizes[k]);
            (void)c;
            uint64_t after = 0;
            ck_assert(sl_test_xinuse(&after));
            ck_assert_msg((after & 0x44) == 0, "impl %d, %zu bytes: XINUSE %#llx after the call", i, sizes[k],
                          (unsigned long long)after);
        }
        volatile uint32_t c = sl_crc32c(buf, sizes[k]);
        (void)c;
        uint64_t after = 0;
        ck_assert(sl_test_xinuse(&after));
        ck_assert_msg((after & 0x44) == 0, "sl_crc32c, %zu bytes: XINUSE %#llx", sizes[k], (unsigned long long)after);
    }
    free(buf);
}
END_TEST
#endif

START_TEST(test_impl_name)
{
    const char *n = sl_crc32c_impl_name();
    ck_assert(strcmp(n, "isa-l") == 0 || strcmp(n, "sse4.2") == 0 || strcmp(n, "portable") == 0);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("sl_crc32c");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_rfc3720_vectors);
    tcase_add_test(tc, test_named_vectors_and_masks);
    tcase_add_test(tc, test_extend_is_concatenation);
    tcase_add_test(tc, test_impls_agree_every_length_and_alignment);
    tcase_add_test(tc, test_impl_name);
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    tcase_add_test(tc, test_upper_vector_state_clean_after_crc);
#endif
    suite_add_tcase(s, tc);
    return s;
}
