/* TF_CONFIG cluster specs: worker numbering with and without a chief, feeder
 * endpoints and bind addresses, and each malformed shape's message. */
#include <string.h>

#include "sl_cluster.h"
#include "sl_test.h"

START_TEST(test_chief_counts_as_worker_zero)
{
    struct sl_cluster c;
    struct sl_error err = {0};
    ck_assert_int_eq(sl_cluster_parse(&c,
                                      "{\"cluster\": {\"chief\": [\"h0:1\"], \"worker\": [\"h1:1\", \"h2:1\"],"
                                      " \"feeder\": [\"h5:5555\", \"ipc:///tmp/f1\"]},"
                                      " \"task\": {\"type\": \"worker\", \"index\": 1}}",
                                      &err),
                     0);
    uint32_t w, W;
    ck_assert_int_eq(sl_cluster_worker(&c, &w, &W, &err), 0);
    ck_assert_uint_eq(w, 2);
    ck_assert_uint_eq(W, 3);
    ck_assert_uint_eq(c.nfeeders, 2);
    ck_assert_str_eq(c.feeders[0], "tcp://h5:5555");
    ck_assert_str_eq(c.feeders[1], "ipc:///tmp/f1");
    uint32_t j, F;
    char bind[300];
    ck_assert_int_eq(sl_cluster_feeder(&c, &j, &F, bind, sizeof bind, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "cluster spec: this task is 'worker', not a feeder");
    sl_cluster_free(&c);
}
END_TEST

START_TEST(test_feeder_task_binds_its_port)
{
    struct sl_cluster c;
    struct sl_error err = {0};
    ck_assert_int_eq(sl_cluster_parse(&c,
                                      "{\"cluster\": {\"worker\": [\"a:1\"], \"feeder\": [\"tcp://f0:5555\","
                                      " \"tcp://f1:6000\"]}, \"task\": {\"type\": \"feeder\", \"index\": 1}}",
                                      &err),
                     0);
    uint32_t j, F;
    char bind[300];
    ck_assert_int_eq(sl_cluster_feeder(&c, &j, &F, bind, sizeof bind, &err), 0);
    ck_assert_uint_eq(j, 1);
    ck_assert_uint_eq(F, 2);
    ck_assert_str_eq(bind, "tcp://*:6000");
    sl_cluster_free(&c);
}
END_TEST

/* The trainers' ring endpoints: the chief first, bare host:port as tcp. */
START_TEST(test_worker_addresses)
{
    struct sl_cluster c;
    struct sl_error err = {0};
    ck_assert_int_eq(sl_cluster_parse(&c,
                                      "{\"cluster\": {\"worker\": [\"h1:2222\", \"ipc:///tmp/w2\"],"
                                      " \"chief\": [\"h0:2222\"]}, \"task\": {\"type\": \"chief\", \"index\": 0}}",
                                      &err),
                     0);
    ck_assert_uint_eq(c.workers, 3);
    ck_assert_str_eq(c.worker_addrs[0], "tcp://h0:2222");
    ck_assert_str_eq(c.worker_addrs[1], "tcp://h1:2222");
    ck_assert_str_eq(c.worker_addrs[2], "ipc:///tmp/w2");
    char bind[300];
    sl_cluster_bind_addr(c.worker_addrs[1], bind, sizeof bind);
    ck_assert_str_eq(bind, "tcp://*:2222");
    sl_cluster_bind_addr(c.worker_addrs[2], bind, sizeof bind);
    ck_assert_str_eq(bind, "ipc:///tmp/w2");
    sl_cluster_free(&c);
    ck_assert_int_eq(sl_cluster_parse(&c, "{\"cluster\": {\"worker\": [\"a:1\", \"b:1\"]}}", &err), 0);
    ck_assert_uint_eq(c.workers, 2);
    ck_assert_str_eq(c.worker_addrs[1], "tcp://b:1");
    sl_cluster_free(&c);
    char longer[400];
    memset(longer, 'x', sizeof longer);
    memcpy(longer, "{\"cluster\": {\"worker\": [\"", 25);
    memcpy(longer + 25 + 250, "\"]}}", 5);
    ck_assert_int_eq(sl_cluster_parse(&c, longer, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "cluster spec: 'cluster.worker[0]' is longer than 249 bytes");
}
END_TEST

START_TEST(test_errors)
{
    static const struct {
        const char *spec, *msg;
    } cases[] = {
        {"{\"cluster\": 3}", "cluster spec: 'cluster' must be an object"},
        {"{\"cluster\": {\"worker\": \"a\"}}", "cluster spec: 'cluster.worker' must be a list of addresses"},
        {"{\"cluster\": {\"feeder\": [1]}}", "cluster spec: 'cluster.feeder[0]' must be a string"},
        {"{\"cluster\": {\"chief\": [\"a\", \"b\"]}}", "cluster spec: 'cluster.chief' holds 2 tasks, at most 1"},
        {"{\"cluster\": {\"worker\": [\"a\"]}, \"task\": {\"type\": \"worker\", \"index\": 3}}",
         "cluster spec: 'task.index' 3 is out of range for the 1 'worker' tasks"},
        {"{\"cluster\": {}, \"task\": {\"type\": \"worker\"}}",
         "cluster spec: 'task' needs a string 'type' and an integer 'index' >= 0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct sl_cluster c;
        struct sl_error err = {0};
        ck_assert_int_eq(sl_cluster_parse(&c, cases[i].spec, &err), SL_EINVAL);
        ck_assert_str_eq(err.msg, cases[i].msg);
    }
    struct sl_cluster c;
    struct sl_error err = {0};
    ck_assert_int_eq(sl_cluster_parse(&c, "{\"cluster\": ", &err), SL_EINVAL);
    ck_assert(strncmp(err.msg, "cluster spec (inline):1:", 24) == 0);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("sl_cluster");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_chief_counts_as_worker_zero);
    tcase_add_test(tc, test_feeder_task_binds_its_port);
    tcase_add_test(tc, test_worker_addresses);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return s;
}
