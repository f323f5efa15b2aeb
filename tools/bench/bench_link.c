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

static const char usage[] = "Usage: sluice-bench link --push ENDPOINT [--size BYTES] [--count N]\n"
                            "       sluice-bench link --pull ENDPOINT [--count N] [--timeout-s S]\n"
                            "\n"
                            "One end of a raw ZeroMQ PUSH/PULL transfer, the baseline of a measurement\n"
                            "across two hosts: start --pull on the receiving host and --push on the\n"
                            "sending one (either first). The receiver prints one JSON line with the\n"
                            "rate from its first message to its last.\n"
                            "\n"
                            "  --push ENDPOINT     bind PUSH here (e.g. tcp://198.18.0.10:5600) and send\n"
                            "  --pull ENDPOINT     connect PULL here and receive\n"
                            "  --size BYTES        message size (default 204255; 1 to 1 GiB)\n"
                            "  --count N           messages (default 10000; at least 2)\n"
                            "  --timeout-s S       receiver: fail when no message comes for S s (default 30)\n"
                            "  -h, --help          this help\n";

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
    const char *push_ep = NULL, *pull_ep = NULL;
    long size = 204255, count = 10000, timeout_s = 30;
    const struct bench_opt opts[] = {
        {.name = "--push", .kind = BENCH_OPT_STRING, .str = &push_ep},
        {.name = "--pull", .kind = BENCH_OPT_STRING, .str = &pull_ep},
        {.name = "--size", .kind = BENCH_OPT_INT, .min = 1, .max = 1L << 30, .num = &size},
        {.name = "--count", .kind = BENCH_OPT_INT, .min = 2, .max = 1L << 40, .num = &count},
        {.name = "--timeout-s", .kind = BENCH_OPT_INT, .min = 1, .max = 86400, .num = &timeout_s},
    };
    int prc = bench_parse_opts("link", usage, argc, argv, opts, sizeof opts / sizeof opts[0]);
    if (prc != 0)
        return prc == 1 ? 0 : 2;
    if ((push_ep == NULL) == (pull_ep == NULL))
        return bench_usage_error("link", "give one of --push and --pull%s", "");
    return push_ep != NULL ? push(push_ep, (size_t)size, count) : pull(pull_ep, count, timeout_s);
}
