/* bench_zmq: raw ZeroMQ transfers, the baseline for everything that moves
 * bytes between sluice processes.
 *
 * The sender is a forked process (so, like a feeder, it has its own
 * ZeroMQ I/O thread and core); it binds PUSH, sends, and lingers until
 * everything has left. The receiver starts its clock at the first message,
 * so connection set-up is not timed.
 *
 * With CURVE (bench_zmq_pair_curve) the sender is set up as a feeder's
 * ROUTER is: a CURVE server whose ZAP handler checks the receiver's key
 * against an allow-list folder, and the receiver as a trainer: a CURVE
 * client that knows the server's public key. Only the handshake differs
 * until the first message, which starts the clock; from then on every
 * frame is sealed in the sender's I/O thread and opened in the
 * receiver's.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "bench.h"
#include "sl_clock.h"
#include "sl_curve.h"
#include "sl_zsock.h"

/* The sender's side of a CURVE pair: server keys, ZAP handler. 0, or -1
 * said on stderr. */
static int curve_sender(void *ctx, void *push, const struct bench_curve_pair *c, struct sl_curve_allow **allow,
                        struct sl_zap **zap)
{
    struct sl_error err = {0};
    int rc = sl_curve_allow_load(allow, c->allow, NULL, 0, &err);
    if (rc == 0)
        rc = sl_zap_start(zap, ctx, *allow, "raw ZeroMQ baseline", &err);
    if (rc == 0)
        rc = sl_curve_server(push, &c->server, &err);
    if (rc != 0)
        fprintf(stderr, "sluice-bench: raw ZeroMQ with CURVE: sender: %s\n", err.msg);
    return rc == 0 ? 0 : -1;
}

static double cpu_of(const struct rusage *ru)
{
    return (double)ru->ru_utime.tv_sec + ru->ru_utime.tv_usec / 1e6 + (double)ru->ru_stime.tv_sec +
           ru->ru_stime.tv_usec / 1e6;
}

double bench_zmq_pair_cpu(const char *transport, const char *dir, long count, const struct bench_curve_pair *curve,
                          bench_send_fn send, void *send_arg, bench_recv_fn recv, void *recv_arg, double *cpu_s)
{
    struct rusage self0, self1;
    getrusage(RUSAGE_SELF, &self0);
    char bind_ep[512], conn[512];
    if (count < 2 || bench_endpoint(transport, dir, 900, bind_ep, conn, sizeof bind_ep) != 0)
        return -1;
    pid_t child = fork();
    if (child < 0)
        return -1;
    struct rusage cru;
    memset(&cru, 0, sizeof cru);
    if (child == 0) {
        void *ctx = zmq_ctx_new();
        void *push = zmq_socket(ctx, ZMQ_PUSH);
        struct sl_curve_allow *allow = NULL;
        struct sl_zap *zap = NULL;
        int rc = curve != NULL ? curve_sender(ctx, push, curve, &allow, &zap) : 0;
        if (rc == 0 && zmq_bind(push, bind_ep) != 0)
            rc = 1;
        for (long i = 0; rc == 0 && i < count; i++)
            rc = send(push, i, send_arg);
        sl_zsock_linger(push, -1); /* every message leaves before the close */
        zmq_close(push);
        sl_zap_stop(zap);
        zmq_ctx_term(ctx);
        sl_curve_allow_free(allow);
        _exit(rc == 0 ? 0 : 1);
    }
    void *ctx = zmq_ctx_new();
    void *pull = zmq_socket(ctx, ZMQ_PULL);
    int tmo = 10000, rc = 0;
    if (curve != NULL) {
        struct sl_error err = {0};
        if (sl_curve_client(pull, &curve->client, curve->server.public_z85, &err) != 0) {
            fprintf(stderr, "sluice-bench: raw ZeroMQ with CURVE: receiver: %s\n", err.msg);
            rc = -1;
        }
    }
    if (rc == 0)
        rc = zmq_connect(pull, conn);
    struct sl_error err = {0};
    if (rc == 0 && (rc = sl_zsock_set_int(pull, ZMQ_RCVTIMEO, tmo, "sluice-bench: raw ZeroMQ receiver", &err)) != 0)
        fprintf(stderr, "%s\n", err.msg);
    double t0 = 0;
    for (long i = 0; rc == 0 && i < count; i++) {
        rc = recv(pull, i, recv_arg);
        if (i == 0)
            t0 = sl_clock_s();
    }
    double el = sl_clock_s() - t0;
    zmq_close(pull);
    zmq_ctx_term(ctx);
    int st = 0;
    if (rc != 0)
        kill(child, SIGKILL);
    wait4(child, &st, 0, &cru);
    getrusage(RUSAGE_SELF, &self1);
    if (cpu_s != NULL)
        *cpu_s = cpu_of(&cru) + cpu_of(&self1) - cpu_of(&self0);
    if (strncmp(bind_ep, "ipc://", 6) == 0)
        unlink(bind_ep + 6);
    if (rc != 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0 || el <= 0)
        return -1;
    return el;
}

double bench_zmq_pair_curve(const char *transport, const char *dir, long count, const struct bench_curve_pair *curve,
                            bench_send_fn send, void *send_arg, bench_recv_fn recv, void *recv_arg)
{
    return bench_zmq_pair_cpu(transport, dir, count, curve, send, send_arg, recv, recv_arg, NULL);
}

double bench_zmq_pair(const char *transport, const char *dir, long count, bench_send_fn send, void *send_arg,
                      bench_recv_fn recv, void *recv_arg)
{
    return bench_zmq_pair_curve(transport, dir, count, NULL, send, send_arg, recv, recv_arg);
}

static void no_free(void *data, void *hint)
{
    (void)data;
    (void)hint;
}

/* The sender's messages: RAW_SET bytes of distinct buffers (at least one),
 * every byte written before the clock starts, sent in turn. A sender that
 * sent one buffer, or a calloc'd one never written (whose pages are all the
 * kernel's one zero page, always in the CPU's cache), would read hotter
 * bytes than any real stream does: a feeder sends each piece once, from
 * one of the many buffers its window keeps in flight. */
#define RAW_SET ((size_t)8 << 20)
#define RAW_MAX_BUFS 4096

struct raw_msg {
    uint8_t *bufs[RAW_MAX_BUFS];
    size_t nbufs, size;
};

static int raw_send(void *sock, long i, void *arg)
{
    struct raw_msg *m = arg;
    zmq_msg_t msg;
    zmq_msg_init_data(&msg, m->bufs[(size_t)i % m->nbufs], m->size, no_free, NULL);
    if (zmq_msg_send(&msg, sock, 0) < 0) {
        zmq_msg_close(&msg);
        return -1;
    }
    return 0;
}

static int raw_recv(void *sock, long i, void *arg)
{
    zmq_msg_t msg;
    (void)i;
    (void)arg;
    zmq_msg_init(&msg);
    int rc = zmq_msg_recv(&msg, sock, 0) < 0 ? -1 : 0;
    zmq_msg_close(&msg);
    return rc;
}

static void raw_free(struct raw_msg *m)
{
    for (size_t b = 0; b < m->nbufs; b++)
        free(m->bufs[b]);
    free(m);
}

static struct raw_msg *raw_make(size_t size, long count)
{
    struct raw_msg *m = calloc(1, sizeof *m);
    if (m == NULL)
        return NULL;
    m->size = size ? size : 1;
    size_t want = (RAW_SET + m->size - 1) / m->size;
    if (want > (size_t)count)
        want = (size_t)count;
    if (want > RAW_MAX_BUFS)
        want = RAW_MAX_BUFS;
    if (want < 1)
        want = 1;
    for (; m->nbufs < want; m->nbufs++) {
        if ((m->bufs[m->nbufs] = malloc(m->size)) == NULL) {
            raw_free(m);
            return NULL;
        }
        memset(m->bufs[m->nbufs], (int)(m->nbufs % 251) + 1, m->size);
    }
    return m;
}

double bench_raw_zmq_cpu(const char *transport, const char *dir, size_t size, long count,
                         const struct bench_curve_pair *curve, double *cpu_s)
{
    struct raw_msg *m = raw_make(size, count);
    if (m == NULL)
        return -1;
    double s = bench_zmq_pair_cpu(transport, dir, count, curve, raw_send, m, raw_recv, NULL, cpu_s);
    raw_free(m);
    return s > 0 ? (double)size * (double)(count - 1) / s : -1;
}

double bench_raw_zmq_curve(const char *transport, const char *dir, size_t size, long count,
                           const struct bench_curve_pair *curve)
{
    return bench_raw_zmq_cpu(transport, dir, size, count, curve, NULL);
}

double bench_raw_zmq(const char *transport, const char *dir, size_t size, long count)
{
    return bench_raw_zmq_curve(transport, dir, size, count, NULL);
}
