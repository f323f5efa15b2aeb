/* libsluice's public API (client/include/sluice/client.h) where no feeder is
 * needed: every option refused by sluice_client_open with its code and
 * message, before anything is sent; CURVE key files missing or absent;
 * the names of codes and dtypes; the log setup; TF_CONFIG read into the
 * options (chief and workers, bare feeders, the environment variable) and
 * every malformed one refused with what and where; metrics_listen's
 * hostile addresses, a port in use, and /metrics served while the open
 * waits for the feeders. Linked against the
 * shared library, as a user's program is (only sluice_* symbols). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sl_test.h"
#include "sluice/client.h"

/* sluice_client_open(o) must fail with `code` and a message containing `want`. */
static void expect_refused(const struct sluice_options *o, int code, const char *want)
{
    struct sluice_client *c = (struct sluice_client *)1;
    struct sluice_error err;
    memset(&err, 0x55, sizeof err);
    int rc = sluice_client_open(&c, o, &err);
    ck_assert_int_eq(rc, code);
    ck_assert_int_eq(err.code, code);
    ck_assert_ptr_null(c);
    ck_assert_msg(strstr(err.message, want) != NULL, "'%s' lacks '%s'", err.message, want);
}

START_TEST(test_open_refuses_bad_options)
{
    const char *one[] = {"ipc:///nonexistent-dir/f.sock"};
    struct sluice_options o = {0};
    expect_refused(NULL, SLUICE_EINVAL, "feeders, nfeeders and job are required");
    expect_refused(&o, SLUICE_EINVAL, "feeders, nfeeders and job are required");
    o.feeders = one;
    o.nfeeders = 1;
    expect_refused(&o, SLUICE_EINVAL, "feeders, nfeeders and job are required"); /* no job */
    o.job = "j";
    o.nfeeders = 0;
    expect_refused(&o, SLUICE_EINVAL, "feeders, nfeeders and job are required");
    static const char *many[65];
    for (int i = 0; i < 65; i++)
        many[i] = one[0];
    o.feeders = many;
    o.nfeeders = 65;
    expect_refused(&o, SLUICE_EINVAL, "65 feeders, at most 64");
    const char *holes[] = {one[0], NULL};
    o.feeders = holes;
    o.nfeeders = 2;
    expect_refused(&o, SLUICE_EINVAL, "feeders[1] is NULL");
    o.feeders = one;
    o.nfeeders = 1;
    o.worker = 2;
    o.workers = 2;
    expect_refused(&o, SLUICE_EINVAL, "worker 2 of 2");
    o.worker = 1;
    o.workers = 0; /* 0: 1 */
    expect_refused(&o, SLUICE_EINVAL, "worker 1 of 1");
    o.worker = 0;
    /* resume by epoch: not with a resume_seq, and at most 2^48 */
    o.resume_epoch = 2;
    o.resume_seq = 4;
    expect_refused(&o, SLUICE_EINVAL, "resume at epoch 2 and at piece 4: give one or the other");
    o.resume_seq = 0;
    o.resume_epoch = ((uint64_t)1 << 48) + 1;
    expect_refused(&o, SLUICE_EINVAL, "resume at epoch 281474976710657 and at piece 0");
    o.resume_epoch = 0;
    /* a transition (a mid-epoch change of shape): every field in range, and
     * not with resume_epoch (its resume_seq counts from the change) */
    o.transition = (struct sluice_transition){2, 1, 1, 3};
    o.resume_epoch = 2;
    expect_refused(&o, SLUICE_EINVAL,
                   "resume at epoch 2 with a transition (from 2 x 1 at step 3 of epoch 1): give one or the other "
                   "(with a transition, resume_seq counts from the change)");
    o.resume_epoch = 0;
    o.transition = (struct sluice_transition){0, 1, 1, 3};
    expect_refused(&o, SLUICE_EINVAL, "transition: from_workers 0 is out of range (1 to 65536)");
    o.transition = (struct sluice_transition){65537, 1, 1, 3};
    expect_refused(&o, SLUICE_EINVAL, "transition: from_workers 65537 is out of range (1 to 65536)");
    o.transition = (struct sluice_transition){UINT32_MAX, 1, 1, 3};
    expect_refused(&o, SLUICE_EINVAL, "transition: from_workers 4294967295 is out of range (1 to 65536)");
    o.transition = (struct sluice_transition){2, 0, 1, 3};
    expect_refused(&o, SLUICE_EINVAL, "transition: from_replicas 0 is out of range (1 to 1024)");
    o.transition = (struct sluice_transition){2, 1025, 1, 3};
    expect_refused(&o, SLUICE_EINVAL, "transition: from_replicas 1025 is out of range (1 to 1024)");
    o.transition = (struct sluice_transition){2, 1, ((uint64_t)1 << 48) + 1, 3};
    expect_refused(&o, SLUICE_EINVAL, "transition: from_epoch 281474976710657 is out of range (at most 2^48)");
    o.transition = (struct sluice_transition){2, 1, UINT64_MAX, 3};
    expect_refused(&o, SLUICE_EINVAL, "transition: from_epoch 18446744073709551615 is out of range (at most 2^48)");
    o.transition = (struct sluice_transition){2, 1, 1, 0};
    expect_refused(&o, SLUICE_EINVAL,
                   "transition: from_step 0 is out of range (1 to 2^48; a change at step 0 is an epoch's start: "
                   "resume_epoch with reshape)");
    o.transition = (struct sluice_transition){2, 1, 1, ((uint64_t)1 << 48) + 1};
    expect_refused(&o, SLUICE_EINVAL, "transition: from_step 281474976710657 is out of range (1 to 2^48");
    o.transition = (struct sluice_transition){0, 0, 0, 7}; /* a partial one is no "none" */
    expect_refused(&o, SLUICE_EINVAL, "transition: from_workers 0 is out of range (1 to 65536)");
    o.transition = (struct sluice_transition){0};
    /* the bounds the trainer's flags and Python share (SLUICE_MAX_*): one
     * past each, a negative time, and the least nonzero heartbeat and
     * timeout; 0 stays the default */
    o.replicas = SLUICE_MAX_REPLICAS + 1;
    expect_refused(&o, SLUICE_EINVAL, "replicas: 65537 is out of range (1 to 65536)");
    o.replicas = UINT32_MAX; /* 4 x replicas wrapped to 0 in the default credits */
    expect_refused(&o, SLUICE_EINVAL, "replicas: 4294967295 is out of range (1 to 65536)");
    o.replicas = 0;
    o.credits = SLUICE_MAX_CREDITS + 1;
    expect_refused(&o, SLUICE_EINVAL, "credits: 1048577 is out of range (0 or 1 to 1048576)");
    o.credits = UINT32_MAX;
    expect_refused(&o, SLUICE_EINVAL, "credits: 4294967295 is out of range (0 or 1 to 1048576)");
    o.credits = 0;
    o.heartbeat_ms = 9;
    expect_refused(&o, SLUICE_EINVAL, "heartbeat_ms: 9 is out of range (0 or 10 to 600000)");
    o.heartbeat_ms = SLUICE_MAX_HEARTBEAT_MS + 1;
    expect_refused(&o, SLUICE_EINVAL, "heartbeat_ms: 600001 is out of range (0 or 10 to 600000)");
    o.heartbeat_ms = -1;
    expect_refused(&o, SLUICE_EINVAL, "heartbeat_ms: -1 is out of range (0 or 10 to 600000)");
    o.heartbeat_ms = 0;
    o.timeout_ms = 49;
    expect_refused(&o, SLUICE_EINVAL, "timeout_ms: 49 is out of range (0 or 50 to 3600000)");
    o.timeout_ms = 0;
    o.connect_timeout_ms = SLUICE_MAX_WAIT_MS + 1;
    expect_refused(&o, SLUICE_EINVAL, "connect_timeout_ms: 86400001 is out of range (0 or 1 to 86400000)");
    o.connect_timeout_ms = 0;
    o.reconnect_ms = -5;
    expect_refused(&o, SLUICE_EINVAL, "reconnect_ms: -5 is out of range (0 or 1 to 86400000)");
    o.reconnect_ms = 0;
    o.takeover_ms = INT32_MAX;
    expect_refused(&o, SLUICE_EINVAL, "takeover_ms: 2147483647 is out of range (0 or 1 to 86400000)");
    o.takeover_ms = 0;
    o.curve_key = sl_test_path("missing.key");
    expect_refused(&o, SLUICE_EINVAL, "curve_key given without curve_server_keys");
    const char *servers[] = {sl_test_path("f.pub")};
    o.curve_server_keys = servers;
    expect_refused(&o, SLUICE_EIO, "missing.key");
}
END_TEST

/* Nothing listening: the connect timeout is the bound, and the message
 * names the feeder. */
START_TEST(test_open_times_out_naming_the_feeder)
{
    const char *one[] = {"ipc:///nonexistent-dir/none.sock"};
    struct sluice_options o = {.feeders = one, .nfeeders = 1, .job = "j", .connect_timeout_ms = 200};
    expect_refused(&o, SLUICE_ETIMEOUT, "ipc:///nonexistent-dir/none.sock");
}
END_TEST

/* A listening socket on 127.0.0.1 (port 0: any); its port in *port. */
static int listen_on(unsigned *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(fd, 4), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

struct scrape {
    unsigned port;
    char text[8192];
};

/* GET /metrics on 127.0.0.1:port, retried until it answers (the open
 * starts the server first), the whole answer into text. */
static void *scrape_thread(void *arg)
{
    struct scrape *sc = arg;
    for (int tries = 0; tries < 200 && sc->text[0] == '\0'; tries++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {
            .sin_family = AF_INET, .sin_port = htons((uint16_t)sc->port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
            static const char req[] = "GET /metrics HTTP/1.0\r\n\r\n";
            if (write(fd, req, sizeof req - 1) == (ssize_t)(sizeof req - 1)) {
                size_t n = 0;
                ssize_t r;
                while (n < sizeof sc->text - 1 && (r = read(fd, sc->text + n, sizeof sc->text - 1 - n)) > 0)
                    n += (size_t)r;
                sc->text[n] = '\0';
            }
        }
        close(fd);
        if (sc->text[0] == '\0')
            usleep(10000);
    }
    return NULL;
}

START_TEST(test_metrics_listen)
{
    const char *one[] = {"ipc:///nonexistent-dir/none.sock"};
    struct sluice_options o = {.feeders = one, .nfeeders = 1, .job = "j\"x", .connect_timeout_ms = 200};
    /* hostile addresses: refused before anything is sent */
    static const char *const bad[] = {
        "nonsense", "127.0.0.1",        "127.0.0.1:70000", "127.0.0.1:-1",
        "",         "example.com:9464", "[::1:9464",       "127.0.0.1:99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o.metrics_listen = bad[i];
        expect_refused(&o, SLUICE_EINVAL, "metrics_listen: expected HOST:PORT");
    }
    o.metrics_listen = ":9464";
    expect_refused(&o, SLUICE_EINVAL, "metrics_listen: ':9464' names no host");
    /* a port in use: the bind's reason */
    unsigned port;
    int fd = listen_on(&port);
    char listen_at[64], want[96];
    snprintf(listen_at, sizeof listen_at, "127.0.0.1:%u", port);
    snprintf(want, sizeof want, "metrics_listen: 127.0.0.1:%u: bind: Address already in use", port);
    o.metrics_listen = listen_at;
    expect_refused(&o, SLUICE_EIO, want);
    close(fd);
    /* free now: served while the open waits for the feeder (a probe sees
     * the process), with the job's labels escaped; then the open times
     * out and the port is free again */
    o.connect_timeout_ms = 1000;
    struct scrape sc = {.port = port};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, scrape_thread, &sc), 0);
    expect_refused(&o, SLUICE_ETIMEOUT, "ipc:///nonexistent-dir/none.sock");
    pthread_join(t, NULL);
    ck_assert_msg(strstr(sc.text, "HTTP/1.0 200") != NULL || strstr(sc.text, "HTTP/1.1 200") != NULL, "%.200s",
                  sc.text);
    ck_assert_msg(strstr(sc.text, "\nsluice_process_info{sluice_job=\"j\\\"x\",worker=\"0\",program=\"client\","
                                  "version=\"0.1.0\"} 1\n") != NULL,
                  "%s", sc.text);
    ck_assert_msg(strstr(sc.text, "\nsluice_trainer_steps_total{sluice_job=\"j\\\"x\",worker=\"0\"} 0\n") != NULL, "%s",
                  sc.text);
    /* the open closed its server: the port binds again */
    int again = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_port = htons((uint16_t)sc.port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int one_ = 1;
    (void)setsockopt(again, SOL_SOCKET, SO_REUSEADDR, &one_, sizeof one_);
    ck_assert_int_eq(bind(again, (struct sockaddr *)&a, sizeof a), 0);
    close(again);
}
END_TEST

START_TEST(test_names)
{
    ck_assert_str_eq(sluice_version(), "0.1.0");
    ck_assert_str_eq(sluice_code_name(SLUICE_OK), "ok");
    ck_assert_str_eq(sluice_code_name(SLUICE_END), "end");
    ck_assert_str_eq(sluice_code_name(SLUICE_EINVAL), "invalid");
    ck_assert_str_eq(sluice_code_name(SLUICE_EPROTO), "proto");
    ck_assert_str_eq(sluice_code_name(SLUICE_ETIMEOUT), "timeout");
    ck_assert_str_eq(sluice_code_name(-1000), "unknown");
    ck_assert_str_eq(sluice_dtype_name(SLUICE_INT64), "int64");
    ck_assert_str_eq(sluice_dtype_name(SLUICE_UINT8), "uint8");
    ck_assert_str_eq(sluice_dtype_name(-1), "?");
    ck_assert_str_eq(sluice_dtype_name(SLUICE_FLOAT16), "float16");
    ck_assert_str_eq(sluice_dtype_name(SLUICE_BFLOAT16), "bfloat16");
    ck_assert_int_eq(SLUICE_FLOAT16, 4);
    ck_assert_int_eq(SLUICE_BFLOAT16, 5);
    ck_assert_int_eq(SLUICE_DTYPE_MAX, 5);
    ck_assert_str_eq(sluice_dtype_name(6), "?");
    ck_assert_str_eq(sluice_dtype_name(255), "?");
    ck_assert_str_eq(sluice_dtype_name(2147483647), "?");
    /* the log's name is copied; -1 silences; huge and negative levels clamp */
    char prog[] = "mine";
    sluice_log_setup(prog, -1, 99);
    sluice_log_setup(prog, 2, -7);
    prog[0] = 'X';
    sluice_log_setup(NULL, 2, SLUICE_LOG_INFO);
    sluice_client_close(NULL);
    sluice_step_free(NULL);
    sluice_cluster_free(NULL);
}
END_TEST

static void expect_cluster(const char *text, uint32_t w, uint32_t W, const char *feeders)
{
    struct sluice_cluster *cl = NULL;
    struct sluice_error err;
    ck_assert_msg(sluice_cluster_from_tf_config(&cl, text, &err) == 0, "%s: %s", text, err.message);
    struct sluice_options o = {.replicas = 3};
    sluice_cluster_apply(cl, &o);
    ck_assert_uint_eq(o.worker, w);
    ck_assert_uint_eq(o.workers, W);
    ck_assert_uint_eq(o.replicas, 3);
    char got[1024] = "";
    size_t used = 0;
    for (size_t i = 0; i < o.nfeeders; i++)
        used += (size_t)snprintf(got + used, sizeof got - used, "%s%s", i ? " " : "", o.feeders[i]);
    ck_assert_str_eq(got, feeders);
    sluice_cluster_free(cl);
}

static void expect_cluster_refused(const char *text, const char *want)
{
    struct sluice_cluster *cl = (struct sluice_cluster *)1;
    struct sluice_error err;
    ck_assert_int_eq(sluice_cluster_from_tf_config(&cl, text, &err), SLUICE_EINVAL);
    ck_assert_ptr_null(cl);
    ck_assert_msg(strstr(err.message, want) != NULL, "%s: '%s' lacks '%s'", text, err.message, want);
}

START_TEST(test_tf_config)
{
    expect_cluster(
        "{\"cluster\": {\"chief\": [\"h0:1\"], \"worker\": [\"h1:1\", \"h2:1\"],"
        " \"feeder\": [\"f0:5555\", \"ipc:///run/f1.sock\"]}, \"task\": {\"type\": \"worker\", \"index\": 1}}",
        2, 3, "tcp://f0:5555 ipc:///run/f1.sock");
    expect_cluster("{\"cluster\": {\"chief\": [\"h0:1\"], \"worker\": [\"h1:1\"], \"feeder\": [\"tcp://f:1\"]},"
                   " \"task\": {\"type\": \"chief\", \"index\": 0}}",
                   0, 2, "tcp://f:1");
    expect_cluster("{\"cluster\": {\"worker\": [\"a:1\", \"b:1\"], \"feeder\": [\"f:1\"]}, \"task\": {\"type\": "
                   "\"worker\", \"index\": 1}}",
                   1, 2, "tcp://f:1");
    expect_cluster_refused("{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": \"worker\", \"index\": 0}}",
                           "no 'feeder' list");
    expect_cluster_refused("{\"cluster\": {\"worker\": [\"a:1\"], \"feeder\": [\"f:1\"]}, \"task\": {\"type\": "
                           "\"ps\", \"index\": 0}}",
                           "'ps'");
    expect_cluster_refused("{\"cluster\": {\"worker\": [\"a:1\"], \"feeder\": [\"f:1\"]}, \"task\": {\"type\": "
                           "\"worker\", \"index\": 1}}",
                           "index");
    expect_cluster_refused("{\"cluster\": {}, \"cluster\": {}}", "TF_CONFIG:1:");
    expect_cluster_refused("{", "TF_CONFIG");
    expect_cluster_refused("", "TF_CONFIG");
    expect_cluster_refused("[1]", "TF_CONFIG");
    /* 65 feeders */
    char many[4096];
    size_t n = (size_t)snprintf(many, sizeof many, "{\"cluster\": {\"worker\": [\"a:1\"], \"feeder\": [");
    for (int i = 0; i < 65; i++)
        n += (size_t)snprintf(many + n, sizeof many - n, "%s\"f:%d\"", i ? "," : "", 1000 + i);
    snprintf(many + n, sizeof many - n, "]}, \"task\": {\"type\": \"worker\", \"index\": 0}}");
    expect_cluster_refused(many, "65 feeders, at most 64");
    /* over 4 MiB, refused before parsing */
    size_t big = (4u << 20) + 16;
    char *huge = malloc(big + 1);
    ck_assert_ptr_nonnull(huge);
    memset(huge, ' ', big);
    huge[0] = '{';
    huge[big - 1] = '}';
    huge[big] = '\0';
    expect_cluster_refused(huge, "at most");
    free(huge);
    /* the environment variable */
    unsetenv("TF_CONFIG");
    expect_cluster_refused(NULL, "TF_CONFIG is not set");
    setenv("TF_CONFIG",
           "{\"cluster\": {\"worker\": [\"a:1\"], \"feeder\": [\"f:7\"]}, \"task\": {\"type\": \"worker\","
           " \"index\": 0}}",
           1);
    expect_cluster(NULL, 0, 1, "tcp://f:7");
    unsetenv("TF_CONFIG");
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("sluice_api");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_open_refuses_bad_options);
    tcase_add_test(tc, test_open_times_out_naming_the_feeder);
    tcase_add_test(tc, test_metrics_listen);
    tcase_add_test(tc, test_names);
    tcase_add_test(tc, test_tf_config);
    suite_add_tcase(s, tc);
    return s;
}
