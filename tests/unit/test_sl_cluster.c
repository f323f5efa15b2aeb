/* TF_CONFIG cluster specs: worker numbering with and without a chief, feeder
 * endpoints and bind addresses, and each malformed shape's message; the
 * 'curve' key files' paths (absent, wrong types, empty, NUL, huge,
 * misspelt, repeated). */
#include <stdio.h>
#include <stdlib.h>
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
        {"{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": \"worker\", \"index\": 3}}",
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

/* Endpoint lists: split (empty items skipped, bare host:port as tcp when
 * asked), the bounds (count, length), join into a bounded buffer, and the
 * spec's lists. */
START_TEST(test_list_split)
{
    struct sl_cluster_list l;
    struct sl_error err = {0};
    ck_assert_int_eq(sl_cluster_list_split(&l, "ipc:///tmp/a,,tcp://h:1,", 64, 0, "--connect", &err), 0);
    ck_assert_uint_eq(l.n, 2);
    ck_assert_str_eq(l.items[0], "ipc:///tmp/a");
    ck_assert_str_eq(l.items[1], "tcp://h:1");
    ck_assert_ptr_null(l.items[2]);
    sl_cluster_list_free(&l);
    ck_assert_uint_eq(l.n, 0);
    sl_cluster_list_free(&l); /* twice is fine */
    ck_assert_int_eq(sl_cluster_list_split(&l, "h0:7000,ipc:///w1,h2:7002", 64, SL_CLUSTER_BARE_TCP, "--peers", &err),
                     0);
    ck_assert_uint_eq(l.n, 3);
    ck_assert_str_eq(l.items[0], "tcp://h0:7000");
    ck_assert_str_eq(l.items[1], "ipc:///w1");
    ck_assert_str_eq(l.items[2], "tcp://h2:7002");
    sl_cluster_list_free(&l);
}
END_TEST

START_TEST(test_list_bounds)
{
    struct sl_cluster_list l;
    struct sl_error err = {0};
    ck_assert_int_eq(sl_cluster_list_split(&l, "a,b,c", 2, 0, "--connect", &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "--connect: at most 2 endpoints");
    ck_assert_ptr_null(l.items);
    ck_assert_int_eq(sl_cluster_list_split(&l, ",,", 2, 0, "--ring", &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "--ring: no endpoint");
    ck_assert_int_eq(sl_cluster_list_split(&l, "", 2, 0, "--ring", &err), SL_EINVAL);
    char big[SL_CLUSTER_MAX_ADDR + 8];
    memset(big, 'h', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    /* 255 bytes fit as given, 250 with "tcp://" before them */
    big[SL_CLUSTER_MAX_ADDR - 1] = '\0';
    memcpy(big, "inproc://", 9); /* an endpoint (sl_endpoint_check) */
    ck_assert_int_eq(sl_cluster_list_split(&l, big, 2, 0, "--ring", &err), 0);
    ck_assert_uint_eq(strlen(l.items[0]), SL_CLUSTER_MAX_ADDR - 1);
    sl_cluster_list_free(&l);
    memset(big, 'h', 9);
    ck_assert_int_eq(sl_cluster_list_split(&l, big, 2, SL_CLUSTER_BARE_TCP, "--peers", &err), SL_EINVAL);
    ck_assert(strstr(err.msg, "--peers: 'hhhh") == err.msg);
    ck_assert(strstr(err.msg, "is longer than 249 bytes") != NULL);
    big[SL_CLUSTER_MAX_ADDR - 7] = '\0';
    memcpy(big + SL_CLUSTER_MAX_ADDR - 9, ":1", 2); /* HOST:PORT */
    ck_assert_int_eq(sl_cluster_list_split(&l, big, 2, SL_CLUSTER_BARE_TCP, "--peers", &err), 0);
    ck_assert_uint_eq(strlen(l.items[0]), SL_CLUSTER_MAX_ADDR - 1);
    sl_cluster_list_free(&l);
}
END_TEST

START_TEST(test_list_join)
{
    const char *items[] = {"tcp://a:1", "ipc:///b"};
    char buf[32];
    struct sl_error err = {0};
    ck_assert_int_eq(sl_cluster_list_join(items, 2, buf, sizeof buf, &err), 0);
    ck_assert_str_eq(buf, "tcp://a:1,ipc:///b");
    ck_assert_int_eq(sl_cluster_list_join(items, 0, buf, sizeof buf, &err), 0);
    ck_assert_str_eq(buf, "");
    /* exactly full: 18 bytes and the NUL */
    ck_assert_int_eq(sl_cluster_list_join(items, 2, buf, 19, &err), 0);
    ck_assert_int_eq(sl_cluster_list_join(items, 2, buf, 18, &err), SL_EINVAL);
    ck_assert_str_eq(buf, "");
    ck_assert_str_eq(err.msg, "endpoint list longer than 17 bytes");
    ck_assert_int_eq(sl_cluster_list_join(items, 1, buf, 0, &err), SL_EINVAL);
}
END_TEST

START_TEST(test_spec_lists)
{
    struct sl_cluster c;
    struct sl_error err = {0};
    ck_assert_int_eq(sl_cluster_parse(&c,
                                      "{\"cluster\": {\"chief\": [\"h0:1\"], \"worker\": [\"h1:1\"],"
                                      " \"feeder\": [\"ipc:///f0\", \"f1:5\"]}}",
                                      &err),
                     0);
    struct sl_cluster_list f, w;
    ck_assert_int_eq(sl_cluster_feeder_list(&c, &f, &err), 0);
    ck_assert_int_eq(sl_cluster_worker_list(&c, &w, &err), 0);
    ck_assert_uint_eq(f.n, 2);
    ck_assert_str_eq(f.items[0], "ipc:///f0");
    ck_assert_str_eq(f.items[1], "tcp://f1:5");
    ck_assert_uint_eq(w.n, 2);
    ck_assert_str_eq(w.items[0], "tcp://h0:1");
    ck_assert_str_eq(w.items[1], "tcp://h1:1");
    char buf[64];
    ck_assert_int_eq(sl_cluster_list_join((const char *const *)w.items, w.n, buf, sizeof buf, &err), 0);
    ck_assert_str_eq(buf, "tcp://h0:1,tcp://h1:1");
    sl_cluster_list_free(&f);
    sl_cluster_list_free(&w);
    sl_cluster_free(&c);
    ck_assert_int_eq(sl_cluster_parse(&c, "{\"cluster\": {}}", &err), 0);
    ck_assert_int_eq(sl_cluster_feeder_list(&c, &f, &err), 0);
    ck_assert_uint_eq(f.n, 0);
    ck_assert_ptr_null(f.items);
    sl_cluster_free(&c);
}
END_TEST

/* 'curve': the key files' paths, absent or given, and every bad shape. */
/* ParameterServerStrategy's evaluator (issue #24 item 18): not part of the
 * training cluster, so a task of type 'evaluator' index 0 is accepted
 * whether or not the spec lists it; at most one is listed; index 1 is
 * out of range; it is no worker. */
START_TEST(test_evaluator_task)
{
    struct sl_cluster c;
    struct sl_error err = {0};
    ck_assert_int_eq(sl_cluster_parse(&c,
                                      "{\"cluster\": {\"worker\": [\"a:1\", \"b:1\"], \"ps\": [\"p:2\"]},"
                                      " \"task\": {\"type\": \"evaluator\", \"index\": 0}}",
                                      &err),
                     0);
    ck_assert_str_eq(c.task_type, "evaluator");
    ck_assert_uint_eq(c.task_index, 0);
    ck_assert_uint_eq(c.nevaluators, 0);
    ck_assert_uint_eq(c.workers, 2);
    ck_assert_uint_eq(c.nps, 1);
    uint32_t w, W;
    ck_assert_int_eq(sl_cluster_worker(&c, &w, &W, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "cluster spec: this task is 'evaluator', not a chief or worker");
    sl_cluster_free(&c);
    ck_assert_int_eq(sl_cluster_parse(&c,
                                      "{\"cluster\": {\"worker\": [\"a:1\"], \"ps\": [\"p:2\"], \"evaluator\": "
                                      "[\"e:1\"]}, \"task\": {\"type\": \"ps\", \"index\": 0}}",
                                      &err),
                     0);
    ck_assert_uint_eq(c.nevaluators, 1);
    sl_cluster_free(&c);
    static const struct {
        const char *spec, *msg;
    } bad[] = {
        {"{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": \"evaluator\", \"index\": 1}}",
         "cluster spec: 'task.index' 1 is out of range for the 1 'evaluator' tasks"},
        {"{\"cluster\": {\"worker\": [\"a:1\"], \"evaluator\": [\"e:1\", \"e:2\"]}}",
         "cluster spec: 'cluster.evaluator' holds 2 tasks, at most 1"},
        {"{\"cluster\": {\"worker\": [\"a:1\"], \"evaluator\": \"e:1\"}}",
         "cluster spec: 'cluster.evaluator' must be a list of addresses"},
        {"{\"cluster\": {\"worker\": [\"a:1\"], \"evaluator\": [7]}}",
         "cluster spec: 'cluster.evaluator[0]' must be a string"},
        {"{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": \"evaluator\", \"index\": "
         "99999999999999}}",
         "cluster spec: 'task.index' 99999999999999 is out of range for the 1 'evaluator' tasks"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(sl_cluster_parse(&c, bad[i].spec, &err), SL_EINVAL);
        ck_assert_str_eq(err.msg, bad[i].msg);
    }
}
END_TEST

START_TEST(test_curve_paths)
{
    static const char *const base = "{\"cluster\": {\"worker\": [\"a:1\", \"b:1\"]}, \"task\": {\"type\": \"worker\", "
                                    "\"index\": 0}";
    char spec[12000];
    struct sl_cluster c;
    struct sl_error err = {0};

    /* absent: NULL both */
    snprintf(spec, sizeof spec, "%s}", base);
    ck_assert_int_eq(sl_cluster_parse(&c, spec, &err), 0);
    ck_assert_ptr_null(c.curve_key);
    ck_assert_ptr_null(c.curve_server_keys);
    sl_cluster_free(&c);
    /* both, one, none of the two (an empty object) */
    snprintf(spec, sizeof spec, "%s, \"curve\": {\"key\": \"/k/trainer.key\", \"server_keys\": \"/k/feeders\"}}", base);
    ck_assert_int_eq(sl_cluster_parse(&c, spec, &err), 0);
    ck_assert_ptr_null(c.curve_allow);
    sl_cluster_free(&c);
    /* a feeder's: its key and its allow-list */
    snprintf(spec, sizeof spec, "%s, \"curve\": {\"key\": \"/k/feeder.key\", \"allow\": \"/k/trainers\"}}", base);
    ck_assert_int_eq(sl_cluster_parse(&c, spec, &err), 0);
    ck_assert_str_eq(c.curve_key, "/k/feeder.key");
    ck_assert_str_eq(c.curve_allow, "/k/trainers");
    ck_assert_ptr_null(c.curve_server_keys);
    sl_cluster_free(&c);
    snprintf(spec, sizeof spec, "%s, \"curve\": {\"key\": \"/k/trainer.key\", \"server_keys\": \"/k/feeders\"}}", base);
    ck_assert_int_eq(sl_cluster_parse(&c, spec, &err), 0);
    ck_assert_str_eq(c.curve_key, "/k/trainer.key");
    ck_assert_str_eq(c.curve_server_keys, "/k/feeders");
    sl_cluster_free(&c);
    ck_assert_ptr_null(c.curve_key);
    snprintf(spec, sizeof spec, "%s, \"curve\": {\"server_keys\": \"f.pub\"}}", base);
    ck_assert_int_eq(sl_cluster_parse(&c, spec, &err), 0);
    ck_assert_ptr_null(c.curve_key);
    ck_assert_str_eq(c.curve_server_keys, "f.pub");
    sl_cluster_free(&c);
    snprintf(spec, sizeof spec, "%s, \"curve\": {}}", base);
    ck_assert_int_eq(sl_cluster_parse(&c, spec, &err), 0);
    ck_assert_ptr_null(c.curve_key);
    ck_assert_ptr_null(c.curve_server_keys);
    sl_cluster_free(&c);
    /* the longest path taken, one byte more refused */
    char path[SL_CLUSTER_MAX_PATH + 1];
    memset(path, 'p', sizeof path);
    path[SL_CLUSTER_MAX_PATH - 1] = '\0';
    snprintf(spec, sizeof spec, "%s, \"curve\": {\"key\": \"%s\"}}", base, path);
    ck_assert_int_eq(sl_cluster_parse(&c, spec, &err), 0);
    ck_assert_uint_eq(strlen(c.curve_key), SL_CLUSTER_MAX_PATH - 1);
    sl_cluster_free(&c);

    static const struct {
        const char *curve, *msg;
    } bad[] = {
        {"\"curve\": \"/k/trainer.key\"",
         "cluster spec: 'curve' must be an object with 'key', 'server_keys' and 'allow' (key files' paths)"},
        {"\"curve\": [\"/k/trainer.key\"]",
         "cluster spec: 'curve' must be an object with 'key', 'server_keys' and 'allow' (key files' paths)"},
        {"\"curve\": null",
         "cluster spec: 'curve' must be an object with 'key', 'server_keys' and 'allow' (key files' paths)"},
        {"\"curve\": {\"key\": 7}", "cluster spec: 'curve.key' must be a key file's path (a non-empty string)"},
        {"\"curve\": {\"key\": -1}", "cluster spec: 'curve.key' must be a key file's path (a non-empty string)"},
        {"\"curve\": {\"key\": 1e999}", "cluster spec (inline):1:"}, /* jansson's: a number out of range */
        {"\"curve\": {\"key\": null}", "cluster spec: 'curve.key' must be a key file's path (a non-empty string)"},
        {"\"curve\": {\"key\": true}", "cluster spec: 'curve.key' must be a key file's path (a non-empty string)"},
        {"\"curve\": {\"key\": {}}", "cluster spec: 'curve.key' must be a key file's path (a non-empty string)"},
        {"\"curve\": {\"key\": \"\"}", "cluster spec: 'curve.key' must be a key file's path (a non-empty string)"},
        {"\"curve\": {\"allow\": 3}", "cluster spec: 'curve.allow' must be a key file's path (a non-empty string)"},
        {"\"curve\": {\"allow\": \"/k/a\", \"allow\": \"/k/b\"}", "duplicate object key"},
        {"\"curve\": {\"server_keys\": [\"a\", \"b\"]}",
         "cluster spec: 'curve.server_keys' must be a key file's path (a non-empty string)"},
        {"\"curve\": {\"key\": \"a\\u0000.key\"}", "\\u0000 is not allowed"}, /* jansson refuses it */
        /* a misspelt name is not ignored */
        {"\"curve\": {\"secret\": \"/k/trainer.key\"}",
         "cluster spec: unknown key 'curve.secret' (expected 'key', 'server_keys' or 'allow')"},
        {"\"curve\": {\"key\": \"/k/t.key\", \"server_key\": \"/k/f\"}",
         "cluster spec: unknown key 'curve.server_key' (expected 'key', 'server_keys' or 'allow')"},
        /* repeated: inside 'curve', and 'curve' itself */
        {"\"curve\": {\"key\": \"/k/a.key\", \"key\": \"/k/b.key\"}", "duplicate object key"},
        {"\"curve\": {\"key\": \"/k/a.key\"}, \"curve\": {\"key\": \"/k/b.key\"}", "duplicate object key"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(spec, sizeof spec, "%s, %s}", base, bad[i].curve);
        memset(&err, 0, sizeof err);
        ck_assert_int_eq(sl_cluster_parse(&c, spec, &err), SL_EINVAL);
        if (strncmp(bad[i].msg, "cluster spec: ", 14) == 0) /* ours: exact */
            ck_assert_str_eq(err.msg, bad[i].msg);
        else /* jansson's, after our prefix */
            ck_assert_msg(strncmp(err.msg, "cluster spec (inline):", 22) == 0 && strstr(err.msg, bad[i].msg) != NULL,
                          "%s", err.msg);
        ck_assert_ptr_null(c.curve_key); /* nothing kept */
        ck_assert_ptr_null(c.curve_server_keys);
        ck_assert_ptr_null(c.curve_allow);
    }
    /* one byte past the longest path */
    path[SL_CLUSTER_MAX_PATH - 1] = 'p';
    path[SL_CLUSTER_MAX_PATH] = '\0';
    snprintf(spec, sizeof spec, "%s, \"curve\": {\"server_keys\": \"%s\"}}", base, path);
    ck_assert_int_eq(sl_cluster_parse(&c, spec, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "cluster spec: 'curve.server_keys' is longer than 4095 bytes");
    /* a huge one (1 MiB) the same */
    size_t huge = (size_t)1 << 20;
    char *big = malloc(huge + 200);
    ck_assert_ptr_nonnull(big);
    int n = snprintf(big, 200, "%s, \"curve\": {\"key\": \"", base);
    memset(big + n, 'x', huge);
    strcpy(big + n + huge, "\"}}");
    ck_assert_int_eq(sl_cluster_parse(&c, big, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "cluster spec: 'curve.key' is longer than 4095 bytes");
    free(big);
    /* a duplicate key anywhere else in the spec is refused too */
    ck_assert_int_eq(sl_cluster_parse(&c, "{\"cluster\": {\"worker\": [\"a:1\"], \"worker\": [\"b:1\"]}}", &err),
                     SL_EINVAL);
    ck_assert_msg(strstr(err.msg, "duplicate") != NULL, "%s", err.msg);
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
    tcase_add_test(tc, test_list_split);
    tcase_add_test(tc, test_list_bounds);
    tcase_add_test(tc, test_list_join);
    tcase_add_test(tc, test_spec_lists);
    tcase_add_test(tc, test_curve_paths);
    tcase_add_test(tc, test_evaluator_task);
    suite_add_tcase(s, tc);
    return s;
}
