/* sl_endpoint (issue #24 items 8, 11, 12): the one endpoint checker over a
 * table of hostile values with the exact message for each; every parser
 * that uses it (sl_cluster_list_split for --connect/--ring/--peers/--ps, a
 * cluster spec's lists, the Slurm layout's spec) refusing the same; binds
 * of tcp://localhost and tcp://[::1] through real ZeroMQ sockets, which
 * are reached; and ipc:// paths: a live server's refused, a stale one
 * replaced, a file that is not a socket left alone. */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <zmq.h>

#include "sl_alloc.h"
#include "sl_cluster.h"
#include "sl_endpoint.h"
#include "sl_peer.h"
#include "sl_test.h"

static const struct {
    const char *ep;
    const char *msg; /* NULL: accepted */
} cases[] = {
    {"tcp://127.0.0.1:5555", NULL},
    {"tcp://127.0.0.1:1", NULL},
    {"tcp://127.0.0.1:65535", NULL},
    {"tcp://127.0.0.1:00080", NULL},
    {"tcp://*:5555", NULL},
    {"tcp://127.0.0.1:*", NULL},
    {"tcp://localhost:7000", NULL},
    {"tcp://host-1.example_x.org:7000", NULL},
    {"tcp://eth0:5555", NULL},
    {"tcp://[::1]:5555", NULL},
    {"tcp://[::ffff:127.0.0.1]:5555", NULL},
    {"ipc:///tmp/x.sock", NULL},
    {"ipc://@abstract", NULL},
    {"inproc://x", NULL},
    {"tcp://127.0.0.1:0", "'tcp://127.0.0.1:0': port 0 is out of range (1-65535)"},
    {"tcp://127.0.0.1:65536", "'tcp://127.0.0.1:65536': port 65536 is out of range (1-65535)"},
    {"tcp://127.0.0.1:99999", "'tcp://127.0.0.1:99999': port 99999 is out of range (1-65535)"},
    {"tcp://127.0.0.1:-1", "'tcp://127.0.0.1:-1': port '-1' is not a decimal number (expected 1-65535)"},
    {"tcp://127.0.0.1:+80", "'tcp://127.0.0.1:+80': port '+80' is not a decimal number (expected 1-65535)"},
    {"tcp://127.0.0.1: 80", "'tcp://127.0.0.1: 80': port ' 80' is not a decimal number (expected 1-65535)"},
    {"tcp://127.0.0.1:80x", "'tcp://127.0.0.1:80x': port '80x' is not a decimal number (expected 1-65535)"},
    {"tcp://127.0.0.1:000000000000000000000080",
     "'tcp://127.0.0.1:000000000000000000000080': port 0000000000000000... is out of range (1-65535)"},
    {"tcp://127.0.0.1:18446744073709551617",
     "'tcp://127.0.0.1:18446744073709551617': port 1844674407370955... is out of range (1-65535)"},
    {"tcp://127.0.0.1:", "'tcp://127.0.0.1:': no port (expected HOST:PORT, PORT 1-65535)"},
    {"tcp://127.0.0.1", "'tcp://127.0.0.1': no port (expected HOST:PORT, PORT 1-65535)"},
    {"tcp://", "'tcp://': no port (expected HOST:PORT, PORT 1-65535)"},
    {"tcp://:5555", "'tcp://:5555': no host (tcp://HOST:PORT; '*' binds every interface)"},
    {"tcp://a:b:5555", "'tcp://a:b:5555': an IPv6 address needs brackets ([::1]:PORT), and a host one colon"},
    {"tcp://::1:5555", "'tcp://::1:5555': an IPv6 address needs brackets ([::1]:PORT), and a host one colon"},
    {"tcp://127.0.0.1::5555",
     "'tcp://127.0.0.1::5555': an IPv6 address needs brackets ([::1]:PORT), and a host one colon"},
    {"tcp://[::1]5555:80", "'tcp://[::1]5555:80': an IPv6 address in brackets needs ']:PORT' after it"},
    {"tcp://[::1:5555", "'tcp://[::1:5555': an IPv6 address in brackets needs ']:PORT' after it"},
    {"tcp://[]:5555", "'tcp://[]:5555': an IPv6 address in brackets needs ']:PORT' after it"},
    {"tcp://[zz]:5555", "'tcp://[zz]:5555': '[zz]' is not an IPv6 address"},
    {"tcp://[::1]:99999", "'tcp://[::1]:99999': port 99999 is out of range (1-65535)"},
    {"tcp://a b:5555", "'tcp://a b:5555': the host holds ' ' (expected an address, a name or '*')"},
    {"tcp://a\x01:5555", "'tcp://a\x01:5555': the host holds '?' (expected an address, a name or '*')"},
    {"tcp://127.0.0.1;127.0.0.2:5555",
     "'tcp://127.0.0.1;127.0.0.2:5555': the host holds ';' (expected an address, a name or '*')"},
    {"", "no endpoint (expected tcp://HOST:PORT, ipc://PATH or inproc://NAME)"},
    {"127.0.0.1:5555", "'127.0.0.1:5555': unknown transport (expected tcp://HOST:PORT, ipc://PATH or inproc://NAME)"},
    {"udp://127.0.0.1:5555",
     "'udp://127.0.0.1:5555': unknown transport (expected tcp://HOST:PORT, ipc://PATH or inproc://NAME)"},
    {"ipc://", "'ipc://': no path (ipc://PATH, or ipc://@NAME for an abstract socket)"},
    {"ipc://@", "'ipc://@': no path (ipc://PATH, or ipc://@NAME for an abstract socket)"},
    {"inproc://", "'inproc://': no name (inproc://NAME)"},
};

START_TEST(test_check_table)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct sl_error err = {0};
        int rc = sl_endpoint_check(cases[i].ep, &err);
        if (cases[i].msg == NULL) {
            ck_assert_msg(rc == 0, "'%s' refused: %s", cases[i].ep, err.msg);
        } else {
            ck_assert_msg(rc == SL_EINVAL, "'%s' accepted", cases[i].ep);
            ck_assert_str_eq(err.msg, cases[i].msg);
        }
    }
    struct sl_error err = {0};
    ck_assert_int_eq(sl_endpoint_check(NULL, &err), SL_EINVAL);
    /* a long path, a long host */
    char ep[400];
    snprintf(ep, sizeof ep, "ipc:///%0*d", 120, 0);
    ck_assert_int_eq(sl_endpoint_check(ep, &err), SL_EINVAL);
    ck_assert(strstr(err.msg, "the path is longer than 107 bytes") != NULL);
    memcpy(ep, "tcp://", 6);
    memset(ep + 6, 'h', 300);
    strcpy(ep + 306, ":80");
    ck_assert_int_eq(sl_endpoint_check(ep, &err), SL_EINVAL);
    ck_assert(strstr(err.msg, "the host is longer than 253 bytes") != NULL);
    /* HOST:PORT for /metrics: port 0 allowed there, '*' not */
    char host[64];
    unsigned port = 1;
    ck_assert_int_eq(sl_endpoint_hostport("a:0", 3, SL_ENDPOINT_PORT_ZERO, host, sizeof host, &port, &err), 0);
    ck_assert_uint_eq(port, 0);
    ck_assert_int_eq(sl_endpoint_hostport("a:*", 3, SL_ENDPOINT_PORT_ZERO, host, sizeof host, &port, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "port '*' is for binds only (expected 1-65535)");
    ck_assert_int_eq(sl_endpoint_hostport("a:70000", 7, SL_ENDPOINT_PORT_ZERO, host, sizeof host, &port, &err),
                     SL_EINVAL);
    ck_assert_str_eq(err.msg, "port 70000 is out of range (0-65535)");
}
END_TEST

/* Every list parser refuses the same, naming its option or key. */
START_TEST(test_parsers_refuse)
{
    struct sl_cluster_list l;
    struct sl_error err = {0};
    ck_assert_int_eq(sl_cluster_list_split(&l, "tcp://127.0.0.1:5555,tcp://127.0.0.1:99999", 8, 0, "--connect", &err),
                     SL_EINVAL);
    ck_assert_str_eq(err.msg, "--connect: 'tcp://127.0.0.1:99999': port 99999 is out of range (1-65535)");
    ck_assert_uint_eq(l.n, 0);
    ck_assert_ptr_null(l.items);
    ck_assert_int_eq(sl_cluster_list_split(&l, "h0:7000,h1:0", 8, SL_CLUSTER_BARE_TCP, "--peers", &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "--peers: 'tcp://h1:0': port 0 is out of range (1-65535)");
    ck_assert_int_eq(sl_cluster_list_split(&l, "h0", 8, SL_CLUSTER_BARE_TCP, "--ps", &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "--ps: 'tcp://h0': no port (expected HOST:PORT, PORT 1-65535)");
    ck_assert_int_eq(sl_cluster_list_split(&l, "tcp://a:1:2", 8, 0, "--ring", &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "--ring: 'tcp://a:1:2': an IPv6 address needs brackets ([::1]:PORT), and a host one "
                              "colon");
    ck_assert_int_eq(sl_cluster_list_split(&l, "localhost:7000,[::1]:7001", 8, SL_CLUSTER_BARE_TCP, "--peers", &err),
                     0);
    ck_assert_str_eq(l.items[0], "tcp://localhost:7000");
    ck_assert_str_eq(l.items[1], "tcp://[::1]:7001");
    sl_cluster_list_free(&l);
    /* TF_CONFIG */
    static const struct {
        const char *spec, *msg;
    } specs[] = {
        {"{\"cluster\": {\"ps\": [\"localhost:99999\"]}}",
         "cluster spec: 'cluster.ps[0]': 'tcp://localhost:99999': port 99999 is out of range (1-65535)"},
        {"{\"cluster\": {\"worker\": [\"a:1\", \"b:-1\"]}}",
         "cluster spec: 'cluster.worker[1]': 'tcp://b:-1': port '-1' is not a decimal number (expected 1-65535)"},
        {"{\"cluster\": {\"chief\": [\"a\"]}}", "cluster spec: 'cluster.chief[0]': 'tcp://a': no port (expected "
                                                "HOST:PORT, PORT 1-65535)"},
        {"{\"cluster\": {\"feeder\": [\"tcp://f:65536\"]}}",
         "cluster spec: 'cluster.feeder[0]': 'tcp://f:65536': port 65536 is out of range (1-65535)"},
        {"{\"cluster\": {\"feeder\": [\"pgm://f:5\"]}}",
         "cluster spec: 'cluster.feeder[0]': 'pgm://f:5': unknown transport (expected tcp://HOST:PORT, ipc://PATH "
         "or inproc://NAME)"},
    };
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        struct sl_cluster c;
        ck_assert_msg(sl_cluster_parse(&c, specs[i].spec, &err) == SL_EINVAL, "%s accepted", specs[i].spec);
        ck_assert_str_eq(err.msg, specs[i].msg);
    }
    /* the seed's own TF_CONFIG */
    struct sl_cluster c;
    ck_assert_int_eq(sl_cluster_parse(&c,
                                      "{\"cluster\": {\"worker\": [\"localhost:12345\", \"localhost:23456\"], "
                                      "\"ps\": [\"localhost:34567\"]}, \"task\": {\"type\": \"ps\", \"index\": 0}}",
                                      &err),
                     0);
    ck_assert_str_eq(c.ps_addrs[0], "tcp://localhost:34567");
    sl_cluster_free(&c);
}
END_TEST

static int has_ipv6_loopback(void)
{
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

/* Bind ep on a PULL through sl_bind_private and reach it with a PUSH at
 * the same endpoint (connect side through sl_endpoint_connect). */
static void bind_and_reach(void *ctx, const char *bind_ep, const char *connect_fmt)
{
    void *pull = zmq_socket(ctx, ZMQ_PULL), *push = zmq_socket(ctx, ZMQ_PUSH);
    struct sl_error err = {0};
    ck_assert_msg(sl_bind_private(pull, bind_ep, NULL, &err) == 0, "%s: %s", bind_ep, err.msg);
    char last[256], ep[256];
    size_t n = sizeof last;
    ck_assert_int_eq(zmq_getsockopt(pull, ZMQ_LAST_ENDPOINT, last, &n), 0);
    const char *port = strrchr(last, ':') + 1;
    snprintf(ep, sizeof ep, connect_fmt, port);
    int linger = 0, tmo = 5000;
    zmq_setsockopt(push, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(pull, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(pull, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
    ck_assert_msg(sl_endpoint_connect(push, ep, &err) == 0, "%s: %s", ep, err.msg);
    ck_assert_int_eq(zmq_send(push, "hi", 2, 0), 2);
    char buf[4];
    ck_assert_msg(zmq_recv(pull, buf, sizeof buf, 0) == 2, "%s (bound as %s) not reached", ep, last);
    zmq_close(push);
    zmq_close(pull);
}

START_TEST(test_bind_localhost_and_ipv6)
{
    void *ctx = zmq_ctx_new();
    /* ZeroMQ alone: "No such device" */
    void *s = zmq_socket(ctx, ZMQ_PULL);
    ck_assert_int_ne(zmq_bind(s, "tcp://localhost:*"), 0);
    zmq_close(s);
    bind_and_reach(ctx, "tcp://localhost:*", "tcp://localhost:%s");
    bind_and_reach(ctx, "tcp://localhost:*", "tcp://127.0.0.1:%s");
    if (has_ipv6_loopback())
        bind_and_reach(ctx, "tcp://[::1]:*", "tcp://[::1]:%s");
    else
        fprintf(stderr, "no IPv6 loopback here: [::1] not tried\n");
    /* a bad endpoint never reaches ZeroMQ */
    s = zmq_socket(ctx, ZMQ_PULL);
    struct sl_error err = {0};
    ck_assert_int_eq(sl_bind_private(s, "tcp://127.0.0.1:99999", NULL, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "bind: 'tcp://127.0.0.1:99999': port 99999 is out of range (1-65535)");
    zmq_close(s);
    zmq_ctx_term(ctx);
}
END_TEST

/* 1 when a process accepts on the unix socket at path. */
static int accepts(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    snprintf(un.sun_path, sizeof un.sun_path, "%s", path);
    int ok = connect(fd, (struct sockaddr *)&un, sizeof un) == 0;
    close(fd);
    return ok;
}

START_TEST(test_ipc_live_stale_other)
{
    void *ctx = zmq_ctx_new();
    char ep[300];
    const char *path = sl_test_path("live.sock");
    snprintf(ep, sizeof ep, "ipc://%s", path);
    struct sl_error err = {0};
    void *a = zmq_socket(ctx, ZMQ_ROUTER), *b = zmq_socket(ctx, ZMQ_ROUTER);
    ck_assert_msg(sl_bind_private(a, ep, NULL, &err) == 0, "%s", err.msg);
    struct stat st1, st2;
    ck_assert_int_eq(stat(path, &st1), 0);
    /* a second bind of a live server's path: refused, the file untouched */
    ck_assert_int_eq(sl_bind_private(b, ep, NULL, &err), SL_EINVAL);
    char want[700];
    snprintf(want, sizeof want,
             "bind(%s): a live process serves %s (another feeder, trainer or server?): stop it or "
             "choose another path",
             ep, path);
    ck_assert_str_eq(err.msg, want);
    ck_assert_int_eq(stat(path, &st2), 0);
    ck_assert_uint_eq(st1.st_ino, st2.st_ino);
    /* a stale socket (nobody accepts: its server died) is replaced */
    const char *stale = sl_test_path("stale.sock");
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    snprintf(un.sun_path, sizeof un.sun_path, "%s", stale);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&un, sizeof un), 0);
    close(fd); /* bound, never listening, closed: the file stays */
    ck_assert_int_eq(stat(stale, &st1), 0);
    snprintf(ep, sizeof ep, "ipc://%s", stale);
    ck_assert_int_eq(accepts(stale), 0);
    ck_assert_msg(sl_bind_private(b, ep, NULL, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(accepts(stale), 1); /* b's now */
    /* a file that is not a socket: never unlinked */
    const char *file = sl_test_write("data.txt", "keep", 4);
    snprintf(ep, sizeof ep, "ipc://%s", file);
    void *c = zmq_socket(ctx, ZMQ_ROUTER);
    ck_assert_int_eq(sl_bind_private(c, ep, NULL, &err), SL_EINVAL);
    snprintf(want, sizeof want, "bind(%s): %s exists and is not a socket: refusing to replace it", ep, file);
    ck_assert_str_eq(err.msg, want);
    size_t len;
    uint8_t *kept = sl_test_read(file, &len);
    ck_assert_ptr_nonnull(kept);
    ck_assert_uint_eq(len, 4);
    free(kept);
    zmq_close(a);
    zmq_close(b);
    zmq_close(c);
    zmq_ctx_term(ctx);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("sl_endpoint");
    TCase *tc = tcase_create("endpoint");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_check_table);
    tcase_add_test(tc, test_parsers_refuse);
    tcase_add_test(tc, test_bind_localhost_and_ipv6);
    tcase_add_test(tc, test_ipc_live_stale_other);
    suite_add_tcase(s, tc);
    return s;
}
