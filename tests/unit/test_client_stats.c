/* client_stats: the busiest stage of a feeder from its last two STATS, in
 * both forms: a feeder that reports the map stage (64-byte STATS) can be
 * bound by `map`; one from before it (56 bytes, map in decode) never is. */
#include <stdint.h>
#include <string.h>

#include "client_int.h"
#include "sl_test.h"

static struct sl_wire_stats stats(uint64_t decode, uint64_t map, int with_map)
{
    struct sl_wire_stats s;
    memset(&s, 0, sizeof s);
    s.stage_ns[SL_WIRE_STAGE_READ] = 100;
    s.stage_ns[SL_WIRE_STAGE_DECODE] = decode;
    s.stage_ns[SL_WIRE_STAGE_MAP] = map;
    s.with_map = (uint8_t)with_map;
    return s;
}

START_TEST(test_busiest_stage)
{
    struct client c;
    struct feeder f[2];
    memset(&c, 0, sizeof c);
    memset(f, 0, sizeof f);
    c.f = f;
    c.o.nfeeders = 2;
    uint64_t ns[SL_WIRE_STAGES];
    int busiest = 7;
    /* before two STATS: none named, the totals so far (zeros before any) */
    ck_assert_int_eq(client_feeder_stages(&c, 0, ns, &busiest), 0);
    ck_assert_int_eq(busiest, -1);
    ck_assert_uint_eq(ns[SL_WIRE_STAGE_MAP], 0);
    struct sl_wire_stats a = stats(1000, 5000, 1), b = stats(1500, 9000, 1);
    client__note_stats(&c, 0, &a);
    ck_assert_int_eq(client_feeder_stages(&c, 0, ns, &busiest), 0);
    ck_assert_int_eq(busiest, -1);
    ck_assert_uint_eq(ns[SL_WIRE_STAGE_MAP], 5000);
    /* the map grew most (4000 against decode's 500): the bound is map */
    client__note_stats(&c, 0, &b);
    ck_assert_int_eq(client_feeder_stages(&c, 0, ns, &busiest), 0);
    ck_assert_int_eq(busiest, SL_WIRE_STAGE_MAP);
    ck_assert_str_eq(client_stage_name(busiest), "map");
    ck_assert_uint_eq(ns[SL_WIRE_STAGE_MAP], 9000);
    /* a feeder from before the map stage: its map time is in decode */
    struct sl_wire_stats o1 = stats(1000, 0, 0), o2 = stats(6000, 0, 0);
    client__note_stats(&c, 1, &o1);
    client__note_stats(&c, 1, &o2);
    ck_assert_int_eq(client_feeder_stages(&c, 1, ns, &busiest), 0);
    ck_assert_int_eq(busiest, SL_WIRE_STAGE_DECODE);
    ck_assert_str_eq(client_stage_name(busiest), "decode");
    /* nothing grew: nobody named; a counter that went back is not growth */
    client__note_stats(&c, 1, &o1);
    ck_assert_int_eq(client_feeder_stages(&c, 1, ns, &busiest), 0);
    ck_assert_int_eq(busiest, -1);
    client__note_stats(&c, 1, &o1);
    ck_assert_int_eq(client_feeder_stages(&c, 1, ns, &busiest), 0);
    ck_assert_int_eq(busiest, -1);
    /* out of range */
    ck_assert_int_eq(client_feeder_stages(&c, 2, ns, &busiest), SL_EINVAL);
    ck_assert_int_eq(busiest, -1);
    ck_assert_int_eq(client_feeder_stages(&c, SIZE_MAX, ns, &busiest), SL_EINVAL);
}
END_TEST

START_TEST(test_stage_names)
{
    static const char *const want[SL_WIRE_STAGES] = {"read", "decompress", "decode", "assemble", "send", "map"};
    for (int k = 0; k < SL_WIRE_STAGES; k++)
        ck_assert_str_eq(client_stage_name(k), want[k]);
    ck_assert_str_eq(client_stage_name(-1), "unknown");
    ck_assert_str_eq(client_stage_name(SL_WIRE_STAGES), "unknown");
    ck_assert_str_eq(client_stage_name(1 << 30), "unknown");
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("client_stats");
    TCase *tc = tcase_create("stats");
    tcase_add_test(tc, test_busiest_stage);
    tcase_add_test(tc, test_stage_names);
    suite_add_tcase(s, tc);
    return s;
}
