/* sluice-bench link: one end of a raw ZeroMQ PUSH/PULL transfer, started
 * by hand or by a script on each of two hosts, so that the baseline of a
 * cross-host measurement crosses the same link as the pieces
 * (tools/bench_testbed.py runs it on the test bed's hosts).
 *
 * The sender binds PUSH, sends --count messages of --size bytes (one
 * buffer, zero-copy, as a feeder sends pieces) and lingers until they are
 * out; the receiver connects PULL and times from the first message to the
 * last, so connection set-up is not timed, then prints one JSON line:
 *   {"bench":"link","bytes":S,"messages":N,"seconds":T,"bytes_per_s":B}
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "bench.h"
#include "sl_clock.h"
#include "sl_zsock.h"

struct args {
    const char *push, *pull;
    long size, count, timeout_s;
};

/* --push and --pull need an endpoint: an empty one is refused here. */
static int set_push(void *opts, const char *value, struct sl_error *err)
{
    if (*value == '\0')
        return sl_error_set(err, SL_EINVAL, "--push needs a value");
    ((struct args *)opts)->push = value;
    return 0;
}

static int set_pull(void *opts, const char *value, struct sl_error *err)
{
    if (*value == '\0')
        return sl_error_set(err, SL_EINVAL, "--pull needs a value");
    ((struct args *)opts)->pull = value;
    return 0;
}

#define OFF(f) offsetof(struct args, f)
static const struct sl_opt rows[] = {
    {"push", 0, SL_OPT_FUNC, 0, 0, 0, NULL, "ENDPOINT", "bind PUSH here (e.g. tcp://198.18.0.10:5600) and send", NULL,
     set_push},
    {"pull", 0, SL_OPT_FUNC, 0, 0, 0, NULL, "ENDPOINT", "connect PULL here and receive", NULL, set_pull},
    {"size", 0, SL_OPT_LONG, OFF(size), 1, 1L << 30, "204255", "BYTES", "message size (1 to 1 GiB)", NULL, NULL},
    {"count", 0, SL_OPT_LONG, OFF(count), 2, (double)(1L << 40), "10000", "N", "messages (at least 2)", NULL, NULL},
    {"timeout-s", 0, SL_OPT_LONG, OFF(timeout_s), 1, 86400, "30", "S", "receiver: fail when no message comes for S s",
     NULL, NULL},
    BENCH_OPT_HELP_ROW,
};

static const struct sl_opt_cmd cmd = {
    .prog = "sluice-bench link",
    .usage = "Usage: sluice-bench link --push ENDPOINT [--size BYTES] [--count N]\n"
             "       sluice-bench link --pull ENDPOINT [--count N] [--timeout-s S]\n"
             "\n"
             "One end of a raw ZeroMQ PUSH/PULL transfer, the baseline of a measurement\n"
             "across two hosts: start --pull on the receiving host and --push on the\n"
             "sending one (either first). The receiver prints one JSON line with the\n"
             "rate from its first message to its last.\n"
             "\n",
    .rows = rows,
    .nrows = sizeof rows / sizeof rows[0],
};

static void no_free(void *data, void *hint)
{
    (void)data;
    (void)hint;
}

static int push(const char *ep, size_t size, long count)
{
    void *buf = calloc(1, size);
    void *ctx = zmq_ctx_new();
    void *sock = ctx != NULL ? zmq_socket(ctx, ZMQ_PUSH) : NULL;
    int rc = buf != NULL && sock != NULL && zmq_bind(sock, ep) == 0 ? 0 : -1;
    if (rc != 0)
        fprintf(stderr, "sluice-bench link: cannot bind %s: %s\n", ep, zmq_strerror(zmq_errno()));
    for (long i = 0; rc == 0 && i < count; i++) {
        zmq_msg_t m;
        zmq_msg_init_data(&m, buf, size, no_free, NULL);
        if (zmq_msg_send(&m, sock, 0) < 0) {
            zmq_msg_close(&m);
            fprintf(stderr, "sluice-bench link: send: %s\n", zmq_strerror(zmq_errno()));
            rc = -1;
        }
    }
    if (sock != NULL) {
        sl_zsock_linger(sock, -1); /* every message leaves before the close */
        zmq_close(sock);
    }
    if (ctx != NULL)
        zmq_ctx_term(ctx);
    free(buf);
    return rc == 0 ? 0 : 1;
}

static int pull(const char *ep, long count, long timeout_s)
{
    void *ctx = zmq_ctx_new();
    void *sock = ctx != NULL ? zmq_socket(ctx, ZMQ_PULL) : NULL;
    int tmo = (int)(timeout_s * 1000);
    int rc = sock != NULL && zmq_connect(sock, ep) == 0 ? 0 : -1;
    struct sl_error err = {0};
    if (rc != 0)
        fprintf(stderr, "sluice-bench link: cannot connect to %s: %s\n", ep, zmq_strerror(zmq_errno()));
    else if ((rc = sl_zsock_set_int(sock, ZMQ_RCVTIMEO, tmo, "sluice-bench link", &err)) != 0)
        fprintf(stderr, "%s\n", err.msg);
    double t0 = 0;
    size_t size = 0;
    for (long i = 0; rc == 0 && i < count; i++) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, sock, 0) < 0) {
            fprintf(stderr, "sluice-bench link: message %ld of %ld: %s\n", i, count,
                    zmq_errno() == EAGAIN ? "none came in time" : zmq_strerror(zmq_errno()));
            rc = -1;
        } else if (i == 0) {
            t0 = sl_clock_s();
            size = zmq_msg_size(&m);
        }
        zmq_msg_close(&m);
    }
    double el = sl_clock_s() - t0;
    if (sock != NULL)
        zmq_close(sock);
    if (ctx != NULL)
        zmq_ctx_term(ctx);
    if (rc != 0 || el <= 0)
        return 1;
    /* the clock starts at message 0: count - 1 messages are timed */
    printf("{\"bench\":\"link\",\"bytes\":%zu,\"messages\":%ld,\"seconds\":%.9g,\"bytes_per_s\":%.9g}\n", size, count,
           el, (double)size * (double)(count - 1) / el);
    return 0;
}

int bench_link_main(int argc, char **argv)
{
    struct args a = {0};
    int prc = bench_opt_parse("link", &cmd, argc, argv, &a);
    if (prc != 0)
        return prc == 1 ? 0 : 2;
    if ((a.push == NULL) == (a.pull == NULL))
        return bench_usage_error("link", "give one of --push and --pull%s", "");
    return a.push != NULL ? push(a.push, (size_t)a.size, a.count) : pull(a.pull, a.count, a.timeout_s);
}
