/* The "limited by" rule of sluice-bench run (tools/bench/bench_verdict.c), fed
 * figures chosen to hit each branch; the verdicts are compared whole.
 * Real runs cannot be made to reach a limit on purpose, so the rule is
 * tested here and tests/cli/test_bench.sh checks that real runs use it.
 */
#include <string.h>

#include "../../tools/bench/bench_verdict.h"
#include "sl_test.h"

/* One row: the ratios to read(), inflate, raw ZeroMQ (whole wire rate) and
 * memcpy (< 0: none), the shared-memory share, CPU use, a model trained or
 * not, input stall %, the busiest stage; the verdict wanted. Two CPUs. */
struct verdict_case {
    const char *what;
    double r_disk, r_inflate, r_zmq, r_memcpy, shm, util;
    int model;
    double stall;
    const char *stage, *want;
};

static const struct verdict_case cases[] = {
    /* the run: pieces in shared memory at 1.35x raw ZeroMQ's rate */
    {"shm: raw ZeroMQ is no bound", 0.1, -1, 1.35, 0.01, 1, 0.5, 0, 40, "decode",
     "feeder stage decode (its busiest; input stall 40.0%)"},
    {"copy: raw ZeroMQ named", 0.1, -1, 0.92, 0.01, 0, 0.5, 0, 40, "decode", "raw ZeroMQ (0.92x of it)"},
    {"copy below 0.8: not named", 0.1, -1, 0.79, 0.01, 0, 0.5, 0, 40, "decode",
     "feeder stage decode (its busiest; input stall 40.0%)"},
    {"half by copy: the copied half counts", 0.1, -1, 2.0, 0.01, 0.5, 0.5, 0, 40, "decode",
     "raw ZeroMQ (1.00x of it by the 50% of pieces sent by copy)"},
    {"half by copy, under 0.8 once shared memory is taken out", 0.1, -1, 1.5, 0.01, 0.5, 0.5, 0, 40, "decode",
     "feeder stage decode (its busiest; input stall 40.0%)"},
    {"shm, memcpy near", 0.1, -1, 3, 0.85, 1, 0.5, 0, 40, "decode", "memcpy (0.85x of it)"},
    {"shm, read() the highest", 0.9, -1, 5, 0.01, 1, 0.5, 0, 40, "decode", "read() of the files (0.90x of it)"},
    {"copy, inflate above raw ZeroMQ", 0.1, 0.95, 0.9, 0.01, 0, 0.5, 0, 40, "decode", "inflate (0.95x of it)"},
    {"shm, CPU busy", 0.1, -1, 2, 0.01, 1, 0.9, 0, 40, "decode",
     "CPU: 90% of 2 cores busy; feeder's busiest stage: decode"},
    {"CPU busy, no stage breakdown", 0.1, -1, 0.2, 0.01, 0, 0.97, 0, 40, NULL, "CPU: 97% of 2 cores busy"},
    {"a model, little stall", 0.1, -1, 0.2, 0.01, 0, 0.5, 1, 2.5, "decode", "trainer compute (input stall 2.5%)"},
    {"--model none, little stall", 0.1, -1, 0.2, 0.01, 1, 0.5, 0, 1.25, "decode",
     "the trainer's receiving of pieces (--model none; input stall 1.2%)"},
    {"a model, much stall", 0.1, -1, 0.2, 0.01, 0, 0.5, 1, 30, "send",
     "feeder stage send (its busiest; input stall 30.0%)"},
    {"no stage breakdown", 0.1, -1, 0.2, 0.01, 0, 0.5, 0, 40, NULL,
     "feeder (stage breakdown unavailable; input stall 40.0%)"},
    {"no raw ZeroMQ figure", 0.1, -1, -1, 0.01, 0, 0.5, 0, 40, "read",
     "feeder stage read (its busiest; input stall 40.0%)"},
};

static struct bench_verdict_in input_of(const struct verdict_case *c)
{
    return (struct bench_verdict_in){.r_disk = c->r_disk,
                                     .r_inflate = c->r_inflate,
                                     .r_wire_zmq = c->r_zmq,
                                     .r_wire_memcpy = c->r_memcpy,
                                     .shm_share = c->shm,
                                     .cpu_util = c->util,
                                     .ncpu = 2,
                                     .trains_model = c->model,
                                     .stall_pct = c->stall,
                                     .busy_stage = c->stage};
}

START_TEST(test_verdicts)
{
    const struct verdict_case *c = &cases[_i];
    struct bench_verdict_in in = input_of(c);
    char got[160];
    memset(got, 'x', sizeof got);
    bench_verdict(&in, got, sizeof got);
    ck_assert_msg(strcmp(got, c->want) == 0, "%s: got '%s', want '%s'", c->what, got, c->want);
}
END_TEST

START_TEST(test_copy_share)
{
    struct bench_verdict_in in = {.r_wire_zmq = 1.6, .shm_share = 0.25};
    ck_assert_double_eq_tol(bench_verdict_copy_zmq(&in), 1.2, 1e-12);
    in.shm_share = 1;
    ck_assert_double_eq(bench_verdict_copy_zmq(&in), 0);
    in.shm_share = 0;
    ck_assert_double_eq(bench_verdict_copy_zmq(&in), 1.6);
    in.r_wire_zmq = -1; /* no figure stays no figure */
    ck_assert_double_eq(bench_verdict_copy_zmq(&in), -1);
}
END_TEST

/* Several feeders: the one the trainers waited for most, by their own
 * attribution, and its share of the wait follow the stage; none with a
 * share of 0 (one feeder, or no wait attributed). */
START_TEST(test_waited_feeder)
{
    struct bench_verdict_in in = {.r_disk = 0.1,
                                  .r_inflate = -1,
                                  .r_wire_zmq = 0.2,
                                  .r_wire_memcpy = 0.01,
                                  .cpu_util = 0.4,
                                  .ncpu = 2,
                                  .stall_pct = 40,
                                  .busy_stage = "decode",
                                  .wait_feeder = 1,
                                  .wait_share = 0.625};
    char got[192];
    bench_verdict(&in, got, sizeof got);
    ck_assert_str_eq(got, "feeder stage decode (its busiest; input stall 40.0%; feeder 1 holds 62% of the wait)");
    in.busy_stage = NULL;
    bench_verdict(&in, got, sizeof got);
    ck_assert_str_eq(got, "feeder (stage breakdown unavailable; input stall 40.0%; feeder 1 holds 62% of the wait)");
    in.wait_share = 0;
    bench_verdict(&in, got, sizeof got);
    ck_assert_str_eq(got, "feeder (stage breakdown unavailable; input stall 40.0%)");
    /* the busiest feeder thread well under a core: no stage is named as
     * the bound (issue #25: "limited by feeder stage send" with the serving
     * thread a quarter busy); at 0.8 of a core and above the stage is */
    in.busy_stage = "send";
    in.wait_share = 0;
    in.have_busy = 1;
    in.busy_max = 0.57;
    bench_verdict(&in, got, sizeof got);
    ck_assert_str_eq(got, "no feeder thread (the busiest at 57% of a core; busiest stage send): waits between threads, "
                          "or other processes on the cores (input stall 40.0%)");
    in.busy_max = 0.8;
    bench_verdict(&in, got, sizeof got);
    ck_assert_str_eq(got, "feeder stage send (its busiest; input stall 40.0%)");
    in.have_busy = 0;
    in.busy_max = 0.1;
    bench_verdict(&in, got, sizeof got);
    ck_assert_str_eq(got, "feeder stage send (its busiest; input stall 40.0%)");
    in.busy_stage = NULL;
    in.wait_share = 0.9; /* the trainer's own bound names no feeder */
    in.stall_pct = 2;
    bench_verdict(&in, got, sizeof got);
    ck_assert_str_eq(got, "the trainer's receiving of pieces (--model none; input stall 2.0%)");
}
END_TEST

START_TEST(test_truncates)
{
    struct bench_verdict_in in = input_of(&cases[1]); /* raw ZeroMQ (0.92x of it) */
    char got[8];
    bench_verdict(&in, got, sizeof got);
    ck_assert_str_eq(got, "raw Zer");
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("bench_verdict");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 10);
    tcase_add_loop_test(tc, test_verdicts, 0, (int)(sizeof cases / sizeof cases[0]));
    tcase_add_test(tc, test_copy_share);
    tcase_add_test(tc, test_truncates);
    tcase_add_test(tc, test_waited_feeder);
    suite_add_tcase(s, tc);
    return s;
}
