/* The trainers' own links with CURVE (issue #16): train_ring and
 * train_rendezvous with opts.curve, ranks as threads over tcp loopback,
 * keys made with zmq_curve_keypair.
 *
 * What each case proves:
 *   - a CURVE ring of 3 ranks gives the plaintext ring's bits, call after
 *     call (encryption changes nothing in what is summed, or in which
 *     order);
 *   - on the wire (a TCP proxy written here relays every ring link, and the
 *     rendezvous' root, and keeps every byte) the plaintext runs show the
 *     ring's "SLR1" headers, a gradient's bytes, the rendezvous' "SLV1"
 *     frames and the blob (the capture works), while the CURVE runs show
 *     none of them: what the links carry is encrypted;
 *   - a rank with another key pair: the ranks whose connection fails its
 *     handshake fail at once saying the workers do not share one trainer
 *     key, the others when their join times out, naming the rank (ring),
 *     or with rank 0's timeout that counts the failed handshakes
 *     (rendezvous);
 *   - one side with CURVE and the other without: both say which;
 *   - a stranger that knows the job's public key (it is public: feeders'
 *     allow-lists hold it) but not its secret key is refused by the ZAP
 *     handler (its monitor sees ZMQ_EVENT_HANDSHAKE_FAILED_AUTH, status
 *     400), and the forged ABORT it queued never reaches the ring, which
 *     sums correctly with the stranger knocking;
 *   - a connection that never completes a handshake (a port scan) does not
 *     pass for the predecessor going away: the ring sums on;
 *   - unusable keys are refused before anything is bound. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include "sl_clock.h"
#include "sl_test.h"
#include "train_rendezvous.h"
#include "train_ring.h"

#define MAXP 4

static void make_keys(struct sl_curve_keys *k)
{
    memset(k, 0, sizeof *k);
    ck_assert_int_eq(zmq_curve_keypair(k->public_z85, k->secret_z85), 0);
}

/* A tcp port on 127.0.0.1 that was free a moment ago. */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static int contains(const unsigned char *hay, size_t n, const void *needle, size_t m)
{
    for (size_t i = 0; i + m <= n; i++)
        if (memcmp(hay + i, needle, m) == 0)
            return 1;
    return 0;
}

/* ---- a relaying TCP proxy that keeps every byte ----
 *
 * It listens on a port of 127.0.0.1 and relays each connection to the
 * target port in both directions. A connection that arrives before the
 * target listens is held (the connect retried every 20 ms) rather than
 * closed, so ZeroMQ never sees a handshake cut short by the proxy. */

#define PROXY_CONNS 32

struct proxy {
    int lfd, port, target;
    int wake[2];
    pthread_t th;
    pthread_mutex_t mu;
    unsigned char *cap;
    size_t len, capacity;
    int a[PROXY_CONNS], b[PROXY_CONNS]; /* client side, target side (-1: none yet) */
};

static void keep(struct proxy *p, const unsigned char *d, size_t n)
{
    pthread_mutex_lock(&p->mu);
    if (p->len + n > p->capacity) {
        size_t c = (p->len + n) * 2;
        unsigned char *m = realloc(p->cap, c);
        if (m != NULL) {
            p->cap = m;
            p->capacity = c;
        }
    }
    if (p->len + n <= p->capacity) {
        memcpy(p->cap + p->len, d, n);
        p->len += n;
    }
    pthread_mutex_unlock(&p->mu);
}

static int dial(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0)
        return fd;
    if (fd >= 0)
        close(fd);
    return -1;
}

static void drop(struct proxy *p, int i)
{
    close(p->a[i]);
    if (p->b[i] >= 0)
        close(p->b[i]);
    p->a[i] = p->b[i] = -1;
}

/* Relay what fd `from` has into `to`; 0 on end or error. */
static int relay(struct proxy *p, int from, int to)
{
    unsigned char buf[65536];
    ssize_t got = read(from, buf, sizeof buf);
    if (got <= 0)
        return 0;
    keep(p, buf, (size_t)got);
    for (ssize_t off = 0; off < got;) {
        ssize_t w = write(to, buf + off, (size_t)(got - off));
        if (w <= 0)
            return 0;
        off += w;
    }
    return 1;
}

static void *proxy_main(void *arg)
{
    struct proxy *p = arg;
    for (;;) {
        struct pollfd fds[2 + 2 * PROXY_CONNS];
        int who[2 + 2 * PROXY_CONNS], nf = 2, pending = 0;
        fds[0] = (struct pollfd){.fd = p->wake[0], .events = POLLIN};
        fds[1] = (struct pollfd){.fd = p->lfd, .events = POLLIN};
        for (int i = 0; i < PROXY_CONNS; i++) {
            if (p->a[i] < 0)
                continue;
            if (p->b[i] < 0 && (p->b[i] = dial(p->target)) < 0) {
                pending = 1;
                continue;
            }
            who[nf] = i;
            fds[nf++] = (struct pollfd){.fd = p->a[i], .events = POLLIN};
            who[nf] = i;
            fds[nf++] = (struct pollfd){.fd = p->b[i], .events = POLLIN};
        }
        if (poll(fds, (nfds_t)nf, pending ? 20 : 500) < 0 && errno != EINTR)
            return NULL;
        if (fds[0].revents)
            return NULL;
        if (fds[1].revents & POLLIN) {
            int c = accept(p->lfd, NULL, NULL);
            int slot = -1;
            for (int i = 0; c >= 0 && i < PROXY_CONNS && slot < 0; i++)
                if (p->a[i] < 0)
                    slot = i;
            if (slot >= 0)
                p->a[slot] = c;
            else if (c >= 0)
                close(c);
        }
        for (int k = 2; k < nf; k += 2) {
            int i = who[k];
            if (((fds[k].revents & (POLLIN | POLLHUP | POLLERR)) && !relay(p, p->a[i], p->b[i])) ||
                ((fds[k + 1].revents & (POLLIN | POLLHUP | POLLERR)) && !relay(p, p->b[i], p->a[i])))
                drop(p, i);
        }
    }
}

static void proxy_start(struct proxy *p, int target)
{
    memset(p, 0, sizeof *p);
    p->target = target;
    for (int i = 0; i < PROXY_CONNS; i++)
        p->a[i] = p->b[i] = -1;
    pthread_mutex_init(&p->mu, NULL);
    ck_assert_int_eq(pipe(p->wake), 0);
    p->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    ck_assert_int_eq(bind(p->lfd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(p->lfd, 16), 0);
    ck_assert_int_eq(getsockname(p->lfd, (struct sockaddr *)&a, &len), 0);
    p->port = ntohs(a.sin_port);
    ck_assert_int_eq(pthread_create(&p->th, NULL, proxy_main, p), 0);
}

/* Stop the thread; the capture stays until proxy_free. */
static void proxy_stop(struct proxy *p)
{
    ck_assert_int_eq(write(p->wake[1], "x", 1), 1);
    pthread_join(p->th, NULL);
    for (int i = 0; i < PROXY_CONNS; i++)
        if (p->a[i] >= 0)
            drop(p, i);
    close(p->lfd);
    close(p->wake[0]);
    close(p->wake[1]);
}

static void proxy_free(struct proxy *p)
{
    free(p->cap);
    pthread_mutex_destroy(&p->mu);
}

/* ---- ring ranks as threads ---- */

struct ring_arg {
    struct train_ring_opts o;
    int calls;
    size_t n;
    float *buf; /* [calls * n]: call c's input, replaced by its result */
    int rc;
    struct sl_error err;
    double secs;       /* from the start to the end of open, or of the failure */
    _Atomic int *hold; /* when set, the calls wait (after open) until it is 0 */
};

static void *ring_rank(void *p)
{
    struct ring_arg *a = p;
    struct train_ring *r = NULL;
    double t0 = sl_clock_s();
    a->rc = train_ring_open(&r, &a->o, &a->err);
    while (a->rc == 0 && a->hold != NULL && atomic_load(a->hold))
        usleep(10000);
    for (int c = 0; a->rc == 0 && c < a->calls; c++)
        a->rc = train_ring_all_reduce(r, a->buf + (size_t)c * a->n, a->n, TRAIN_RING_SUM, &a->err);
    a->secs = sl_clock_s() - t0;
    train_ring_close(r);
    return NULL;
}

/* Fractions whose sums round: the order of the additions shows. */
static float value(int rank, size_t i, int call)
{
    return (float)(rank + 1) / (float)(3 + (i * 5 + (size_t)call) % 29) + (float)i * 0.001f;
}

struct ring_run {
    int size;
    char ep[MAXP][64], bind[MAXP][64];
    const char *eps[MAXP];
    struct ring_arg arg[MAXP];
};

/* Endpoints for `size` ranks on fresh tcp ports; with proxies, rank i binds
 * its own port and the others reach it through proxy i. */
static void ring_setup(struct ring_run *run, int size, struct proxy *proxies)
{
    memset(run, 0, sizeof *run);
    run->size = size;
    for (int i = 0; i < size; i++) {
        int port = free_port();
        snprintf(run->bind[i], sizeof run->bind[i], "tcp://127.0.0.1:%d", port);
        if (proxies != NULL) {
            proxy_start(&proxies[i], port);
            snprintf(run->ep[i], sizeof run->ep[i], "tcp://127.0.0.1:%d", proxies[i].port);
        } else {
            snprintf(run->ep[i], sizeof run->ep[i], "%s", run->bind[i]);
        }
        run->eps[i] = run->ep[i];
    }
    for (int r = 0; r < size; r++)
        run->arg[r].o = (struct train_ring_opts){.rank = r,
                                                 .size = size,
                                                 .endpoints = run->eps,
                                                 .bind = proxies != NULL ? run->bind[r] : NULL,
                                                 .timeout_ms = 10000,
                                                 .connect_timeout_ms = 10000};
}

static void ring_go(struct ring_run *run)
{
    pthread_t th[MAXP];
    for (int r = 0; r < run->size; r++)
        ck_assert_int_eq(pthread_create(&th[r], NULL, ring_rank, &run->arg[r]), 0);
    for (int r = 0; r < run->size; r++)
        pthread_join(th[r], NULL);
}

static void ring_inputs(struct ring_run *run, size_t n, int calls)
{
    for (int r = 0; r < run->size; r++) {
        run->arg[r].n = n;
        run->arg[r].calls = calls;
        run->arg[r].buf = malloc(n * (size_t)calls * sizeof(float));
        ck_assert_ptr_nonnull(run->arg[r].buf);
        for (int c = 0; c < calls; c++)
            for (size_t i = 0; i < n; i++)
                run->arg[r].buf[(size_t)c * n + i] = value(r, i, c);
    }
}

static void ring_free(struct ring_run *run)
{
    for (int r = 0; r < run->size; r++)
        free(run->arg[r].buf);
}

START_TEST(test_curve_ring_same_bits)
{
    enum { P = 3, CALLS = 3 };
    const size_t n = 1001;
    struct sl_curve_keys k;
    struct ring_run plain, curve;
    make_keys(&k);
    ring_setup(&plain, P, NULL);
    ring_inputs(&plain, n, CALLS);
    ring_go(&plain);
    ring_setup(&curve, P, NULL);
    ring_inputs(&curve, n, CALLS);
    for (int r = 0; r < P; r++)
        curve.arg[r].o.curve = &k;
    ring_go(&curve);
    for (int r = 0; r < P; r++) {
        ck_assert_msg(plain.arg[r].rc == 0, "plaintext rank %d: %s", r, plain.arg[r].err.msg);
        ck_assert_msg(curve.arg[r].rc == 0, "CURVE rank %d: %s", r, curve.arg[r].err.msg);
        /* every rank the same bits, and the same as without CURVE */
        ck_assert(memcmp(curve.arg[r].buf, plain.arg[0].buf, n * CALLS * sizeof(float)) == 0);
        ck_assert(memcmp(plain.arg[r].buf, plain.arg[0].buf, n * CALLS * sizeof(float)) == 0);
    }
    /* and the sum is the ring's: chunk c summed from rank c on, in order */
    for (size_t i = 0; i < n; i++) {
        int c = 0;
        while ((size_t)(((uint64_t)n * (uint64_t)(c + 1)) / P) <= i)
            c++;
        float acc = value(c, i, 2);
        for (int j = 1; j < P; j++)
            acc = value((c + j) % P, i, 2) + acc;
        ck_assert(memcmp(&curve.arg[0].buf[2 * n + i], &acc, sizeof acc) == 0);
    }
    ring_free(&plain);
    ring_free(&curve);
}
END_TEST

/* Rank 0's gradient holds this text; as floats its bytes are ordinary
 * numbers (about 1e11 .. 1e17), and chunk 0 leaves rank 0 unchanged in the
 * first reduce-scatter step. */
static const char GRADIENT_TEXT[] = "a-secret-gradient-only-trainers-may-read";

static void ring_capture(const struct sl_curve_keys *k, unsigned char **all, size_t *len)
{
    enum { P = 2 };
    const size_t n = 64;
    struct proxy px[P];
    struct ring_run run;
    ring_setup(&run, P, px);
    ring_inputs(&run, n, 1);
    memcpy(run.arg[0].buf, GRADIENT_TEXT, sizeof GRADIENT_TEXT - 1);
    for (int r = 0; r < P; r++)
        run.arg[r].o.curve = k;
    ring_go(&run);
    for (int r = 0; r < P; r++)
        ck_assert_msg(run.arg[r].rc == 0, "rank %d: %s", r, run.arg[r].err.msg);
    ck_assert(memcmp(run.arg[0].buf, run.arg[1].buf, n * sizeof(float)) == 0);
    *len = 0;
    *all = NULL;
    for (int r = 0; r < P; r++) {
        proxy_stop(&px[r]);
        *all = realloc(*all, *len + px[r].len);
        ck_assert_ptr_nonnull(*all);
        memcpy(*all + *len, px[r].cap, px[r].len);
        *len += px[r].len;
        proxy_free(&px[r]);
    }
    ring_free(&run);
}

START_TEST(test_curve_ring_wire_encrypted)
{
    struct sl_curve_keys k;
    unsigned char *cap;
    size_t len;
    make_keys(&k);
    /* the control: without CURVE the capture shows headers and the text */
    ring_capture(NULL, &cap, &len);
    ck_assert_uint_gt(len, 2 * 64 * sizeof(float));
    ck_assert(contains(cap, len, "SLR1", 4));
    ck_assert(contains(cap, len, GRADIENT_TEXT, sizeof GRADIENT_TEXT - 1));
    free(cap);
    ring_capture(&k, &cap, &len);
    ck_assert_uint_gt(len, 2 * 64 * sizeof(float));
    ck_assert(contains(cap, len, "CURVE", 5)); /* ZMTP's greeting names the mechanism */
    ck_assert(!contains(cap, len, "SLR1", 4));
    ck_assert(!contains(cap, len, GRADIENT_TEXT, 8)); /* not even 8 bytes of it */
    free(cap);
}
END_TEST

START_TEST(test_curve_ring_other_key)
{
    enum { P = 3 };
    struct sl_curve_keys job, other;
    struct ring_run run;
    make_keys(&job);
    make_keys(&other);
    ring_setup(&run, P, NULL);
    ring_inputs(&run, 16, 1);
    for (int r = 0; r < P; r++) {
        run.arg[r].o.curve = r == 2 ? &other : &job;
        run.arg[r].o.connect_timeout_ms = 6000;
    }
    ring_go(&run);
    char want[3][512];
    /* rank 1 sends to rank 2, rank 2 to rank 0: those handshakes fail and
     * both say so at once; rank 0 waits for rank 2's JOIN, in vain */
    snprintf(want[1], sizeof want[1],
             "ring: the CURVE handshake with rank 2 (%s) failed: the workers do not share one trainer key "
             "(--curve-key)",
             run.ep[2]);
    snprintf(want[2], sizeof want[2],
             "ring: the CURVE handshake with rank 0 (%s) failed: the workers do not share one trainer key "
             "(--curve-key)",
             run.ep[0]);
    for (int r = 1; r < P; r++) {
        ck_assert_msg(run.arg[r].rc == SL_EPROTO, "rank %d: %d %s", r, run.arg[r].rc, run.arg[r].err.msg);
        ck_assert_str_eq(run.arg[r].err.msg, want[r]);
        ck_assert_msg(run.arg[r].secs < 3.5, "rank %d took %.2f s", r, run.arg[r].secs);
    }
    ck_assert_int_eq(run.arg[0].rc, SL_ETIMEOUT);
    snprintf(want[0], sizeof want[0], "ring: rank 2 (%s) did not join within 6.0 s and ", run.ep[2]);
    ck_assert_msg(strncmp(run.arg[0].err.msg, want[0], strlen(want[0])) == 0, "%s", run.arg[0].err.msg);
    ck_assert_msg(strstr(run.arg[0].err.msg, " CURVE handshake(s) on this rank's endpoint failed: the workers do "
                                             "not share one trainer key (--curve-key)") != NULL,
                  "%s", run.arg[0].err.msg);
    ck_assert_msg(run.arg[0].secs >= 5.9 && run.arg[0].secs < 8.0, "rank 0 took %.2f s", run.arg[0].secs);
    ring_free(&run);
}
END_TEST

START_TEST(test_curve_ring_one_side_plain)
{
    enum { P = 2 };
    struct sl_curve_keys k;
    struct ring_run run;
    make_keys(&k);
    ring_setup(&run, P, NULL);
    ring_inputs(&run, 16, 1);
    run.arg[0].o.curve = &k; /* rank 1 has none */
    for (int r = 0; r < P; r++)
        run.arg[r].o.connect_timeout_ms = 5000;
    ring_go(&run);
    char want[4][512];
    snprintf(want[0], sizeof want[0],
             "ring: the handshake with rank 1 (%s) failed: it does not use CURVE, but this worker has a trainer "
             "key (give every worker the same --curve-key)",
             run.ep[1]);
    snprintf(want[1], sizeof want[1],
             "ring: the handshake with rank 0 (%s) failed: it uses CURVE, but this worker has no trainer key "
             "(give every worker the same --curve-key)",
             run.ep[0]);
    /* either end may see the other close the connection before it reads
     * the other's greeting (each finds the mismatch on its own), and then
     * it can only say that the handshake failed */
    snprintf(want[2], sizeof want[2],
             "ring: the CURVE handshake with rank 1 (%s) failed: the workers do not share one trainer key "
             "(--curve-key)",
             run.ep[1]);
    snprintf(want[3], sizeof want[3],
             "ring: the handshake with rank 0 (%s) failed: it closed the connection (a worker with a trainer key? "
             "give every worker the same --curve-key, or none)",
             run.ep[0]);
    /* and either may find the other gone (failed at once) before its own
     * connection is accepted: then it waits out its join, and says how many
     * handshakes failed on its endpoint (seen for rank 1, and once, in a
     * CI run, for rank 0) */
    char late[2][512];
    snprintf(late[0], sizeof late[0], "ring: rank 1 (%s) did not join within 5.0 s and ", run.ep[1]);
    snprintf(late[1], sizeof late[1], "ring: rank 0 (%s) did not join within 5.0 s and ", run.ep[0]);
    const char *why[2] = {" CURVE handshake(s) on this rank's endpoint failed: the workers do not share one trainer "
                          "key (--curve-key), or one of them has none",
                          " handshake(s) on this rank's endpoint failed: a worker with a trainer key (--curve-key) "
                          "where this one has none?"};
    /* or rank 0, whose connection to the plaintext rank 1 never completes
     * its handshake, finds its first send to rank 1 timing out (seen once
     * under ASan in a fresh-clone CI run): it names rank 1's endpoint */
    char nosend[512];
    snprintf(nosend, sizeof nosend, "ring: cannot send to rank 1 (%s): ", run.ep[1]);
    for (int r = 0; r < P; r++) {
        if (r == 0 && run.arg[r].rc == SL_EIO) {
            ck_assert_msg(strncmp(run.arg[r].err.msg, nosend, strlen(nosend)) == 0, "rank 0: %s", run.arg[r].err.msg);
            continue;
        }
        if (run.arg[r].rc == SL_ETIMEOUT) {
            ck_assert_msg(strncmp(run.arg[r].err.msg, late[r], strlen(late[r])) == 0 &&
                              strstr(run.arg[r].err.msg, why[r]) != NULL,
                          "rank %d: %s", r, run.arg[r].err.msg);
            continue;
        }
        ck_assert_msg(run.arg[r].rc == SL_EPROTO, "rank %d: %d %s", r, run.arg[r].rc, run.arg[r].err.msg);
        ck_assert_msg(strcmp(run.arg[r].err.msg, want[r]) == 0 || strcmp(run.arg[r].err.msg, want[2 + r]) == 0,
                      "rank %d: %s", r, run.arg[r].err.msg);
        ck_assert_msg(run.arg[r].secs < 3.5, "rank %d took %.2f s", r, run.arg[r].secs);
    }
    ring_free(&run);
}
END_TEST

/* A stranger that knows the job's public key (so its handshake gets as far
 * as the ZAP handler) but holds another secret key. */
START_TEST(test_curve_ring_stranger_refused)
{
    enum { P = 2 };
    struct sl_curve_keys job, stranger;
    struct ring_run run;
    make_keys(&job);
    make_keys(&stranger);
    ring_setup(&run, P, NULL);
    ring_inputs(&run, 64, 2);
    _Atomic int hold = 1; /* the ring stays open until the stranger is refused */
    for (int r = 0; r < P; r++) {
        run.arg[r].o.curve = &job;
        run.arg[r].hold = &hold;
    }

    void *ctx = zmq_ctx_new();
    void *push = zmq_socket(ctx, ZMQ_PUSH), *mon = zmq_socket(ctx, ZMQ_PAIR);
    int zero = 0;
    zmq_setsockopt(push, ZMQ_LINGER, &zero, sizeof zero);
    ck_assert_int_eq(zmq_setsockopt(push, ZMQ_CURVE_SERVERKEY, job.public_z85, 40), 0);
    ck_assert_int_eq(zmq_setsockopt(push, ZMQ_CURVE_PUBLICKEY, stranger.public_z85, 40), 0);
    ck_assert_int_eq(zmq_setsockopt(push, ZMQ_CURVE_SECRETKEY, stranger.secret_z85, 40), 0);
    ck_assert_int_eq(zmq_socket_monitor(push, "inproc://stranger", ZMQ_EVENT_HANDSHAKE_FAILED_AUTH), 0);
    ck_assert_int_eq(zmq_connect(mon, "inproc://stranger"), 0);
    ck_assert_int_eq(zmq_connect(push, run.ep[0]), 0);
    /* a forged ABORT from rank 1 naming rank 1: rank 0 would fail on it */
    unsigned char head[40] = "SLR1\x01\x00\x03\x00\x01\x00\x00\x00\x01\x00\x00\x00";
    head[24] = 1; /* culprit */
    head[28] = 2; /* silent */
    ck_assert_int_eq(zmq_send(push, head, sizeof head, ZMQ_SNDMORE), 40);
    ck_assert_int_eq(zmq_send(push, "", 0, 0), 0);

    pthread_t th[P];
    for (int r = 0; r < P; r++)
        ck_assert_int_eq(pthread_create(&th[r], NULL, ring_rank, &run.arg[r]), 0);
    /* the stranger is refused by the ring's ZAP handler ... */
    zmq_pollitem_t it = {mon, 0, ZMQ_POLLIN, 0};
    ck_assert_int_eq(zmq_poll(&it, 1, 10000), 1);
    unsigned char ev[6];
    ck_assert_int_eq(zmq_recv(mon, ev, sizeof ev, 0), 6);
    uint16_t event;
    uint32_t status;
    memcpy(&event, ev, 2);
    memcpy(&status, ev + 2, 4);
    ck_assert_uint_eq(event, ZMQ_EVENT_HANDSHAKE_FAILED_AUTH);
    ck_assert_uint_eq(status, 400);
    /* ... and the ring never sees what it queued */
    atomic_store(&hold, 0);
    for (int r = 0; r < P; r++)
        pthread_join(th[r], NULL);
    for (int r = 0; r < P; r++)
        ck_assert_msg(run.arg[r].rc == 0, "rank %d: %s", r, run.arg[r].err.msg);
    ck_assert(memcmp(run.arg[0].buf, run.arg[1].buf, 2 * 64 * sizeof(float)) == 0);
    for (size_t i = 0; i < 64; i++) {
        float want = value(1, i, 0) + value(0, i, 0);
        if (i >= 32)
            want = value(0, i, 0) + value(1, i, 0);
        ck_assert(memcmp(&run.arg[0].buf[i], &want, sizeof want) == 0);
    }
    zmq_socket_monitor(push, NULL, 0);
    zmq_close(push);
    while (zmq_poll(&it, 1, 20) > 0) {
        char x[64];
        if (zmq_recv(mon, x, sizeof x, ZMQ_DONTWAIT) < 0)
            break;
    }
    zmq_close(mon);
    zmq_ctx_term(ctx);
    ring_free(&run);
}
END_TEST

/* A connection to a ring's endpoint that never completes a handshake (a
 * port scan; garbage) is not the predecessor going away: with and without
 * CURVE the ring sums on. */
START_TEST(test_ring_survives_port_scan)
{
    enum { P = 2 };
    struct sl_curve_keys k;
    make_keys(&k);
    for (int curve = 0; curve < 2; curve++) {
        struct ring_run run;
        _Atomic int hold = 1;
        ring_setup(&run, P, NULL);
        ring_inputs(&run, 64, 2);
        for (int r = 0; r < P; r++) {
            run.arg[r].o.curve = curve ? &k : NULL;
            run.arg[r].hold = &hold;
        }
        pthread_t th[P];
        for (int r = 0; r < P; r++)
            ck_assert_int_eq(pthread_create(&th[r], NULL, ring_rank, &run.arg[r]), 0);
        int port = atoi(strrchr(run.ep[0], ':') + 1);
        for (int i = 0; i < 3; i++) {
            int fd;
            while ((fd = dial(port)) < 0) /* until rank 0 listens */
                usleep(10000);
            if (i == 1)
                ck_assert_int_eq(write(fd, "GET / HTTP/1.0\r\n\r\n", 18), 18);
            usleep(50000);
            close(fd);
        }
        usleep(300000); /* the monitor has told rank 0 by now */
        atomic_store(&hold, 0);
        for (int r = 0; r < P; r++)
            pthread_join(th[r], NULL);
        for (int r = 0; r < P; r++)
            ck_assert_msg(run.arg[r].rc == 0, "curve %d rank %d: %s", curve, r, run.arg[r].err.msg);
        ck_assert(memcmp(run.arg[0].buf, run.arg[1].buf, 2 * 64 * sizeof(float)) == 0);
        ring_free(&run);
    }
}
END_TEST

START_TEST(test_curve_ring_bad_keys)
{
    struct sl_curve_keys bad[3], good;
    make_keys(&good);
    memset(&bad[0], 0, sizeof bad[0]); /* nothing */
    bad[1] = good;
    bad[1].public_z85[7] = ' '; /* not Z85 */
    bad[2] = good;
    memset(bad[2].secret_z85, 0, sizeof bad[2].secret_z85); /* a public key alone */
    for (int i = 0; i < 3; i++) {
        struct ring_run run;
        ring_setup(&run, 2, NULL);
        struct train_ring *r = NULL;
        struct sl_error err = {0};
        run.arg[0].o.curve = &bad[i];
        uint64_t t0 = sl_clock_ns();
        ck_assert_int_eq(train_ring_open(&r, &run.arg[0].o, &err), SL_EINVAL);
        ck_assert_ptr_null(r);
        ck_assert_msg(strncmp(err.msg, "ring: ", 6) == 0, "%s", err.msg);
        ck_assert_uint_lt(sl_clock_ns() - t0, 1000000000u);
        /* nothing stays bound: the port can be bound again at once */
        void *ctx = zmq_ctx_new(), *s = zmq_socket(ctx, ZMQ_PULL);
        ck_assert_int_eq(zmq_bind(s, run.ep[0]), 0);
        zmq_close(s);
        zmq_ctx_term(ctx);
    }
}
END_TEST

/* ---- the rendezvous ---- */

struct rdv_arg {
    struct train_rendezvous_opts o;
    unsigned char got[TRAIN_RENDEZVOUS_MAX_BLOB];
    size_t len;
    int rc;
    struct sl_error err;
    double secs;
};

static void *rdv_rank(void *p)
{
    struct rdv_arg *a = p;
    double t0 = sl_clock_s();
    a->rc = train_rendezvous(&a->o, a->got, sizeof a->got, &a->len, &a->err);
    a->secs = sl_clock_s() - t0;
    return NULL;
}

struct rdv_run {
    int size;
    char root[64], bind[64];
    struct rdv_arg arg[MAXP];
};

static void rdv_setup(struct rdv_run *run, int size, struct proxy *px, const void *blob, size_t blob_len)
{
    memset(run, 0, sizeof *run);
    run->size = size;
    int port = free_port();
    snprintf(run->bind, sizeof run->bind, "tcp://127.0.0.1:%d", port);
    if (px != NULL) {
        proxy_start(px, port);
        snprintf(run->root, sizeof run->root, "tcp://127.0.0.1:%d", px->port);
    } else {
        snprintf(run->root, sizeof run->root, "%s", run->bind);
    }
    for (int r = 0; r < size; r++)
        run->arg[r].o = (struct train_rendezvous_opts){.rank = r,
                                                       .size = size,
                                                       .root = run->root,
                                                       .bind = run->bind,
                                                       .job = "the-job-name",
                                                       .config = "model=mlp",
                                                       .timeout_ms = 10000,
                                                       .blob = r == 0 ? blob : NULL,
                                                       .blob_len = r == 0 ? blob_len : 0};
}

static void rdv_go(struct rdv_run *run)
{
    pthread_t th[MAXP];
    for (int r = 0; r < run->size; r++)
        ck_assert_int_eq(pthread_create(&th[r], NULL, rdv_rank, &run->arg[r]), 0);
    for (int r = 0; r < run->size; r++)
        pthread_join(th[r], NULL);
}

/* What the blob stands for: an NCCL unique id, 128 bytes that let whoever
 * has them join the GPUs' communicator. */
static void secret_blob(unsigned char blob[128])
{
    for (int i = 0; i < 128; i++)
        blob[i] = (unsigned char)("nccl-unique-id:"[i % 15] ^ (i / 15));
}

static void rdv_capture(const struct sl_curve_keys *k, unsigned char **cap, size_t *len)
{
    enum { P = 3 };
    unsigned char blob[128];
    struct proxy px;
    struct rdv_run run;
    secret_blob(blob);
    rdv_setup(&run, P, &px, blob, sizeof blob);
    for (int r = 0; r < P; r++)
        run.arg[r].o.curve = k;
    rdv_go(&run);
    for (int r = 0; r < P; r++) {
        ck_assert_msg(run.arg[r].rc == 0, "rank %d: %s", r, run.arg[r].err.msg);
        ck_assert_uint_eq(run.arg[r].len, sizeof blob);
        ck_assert(memcmp(run.arg[r].got, blob, sizeof blob) == 0);
    }
    proxy_stop(&px);
    *cap = px.cap;
    *len = px.len;
    px.cap = NULL;
    proxy_free(&px);
}

START_TEST(test_curve_rendezvous_wire_encrypted)
{
    struct sl_curve_keys k;
    unsigned char blob[128], *cap;
    size_t len;
    make_keys(&k);
    secret_blob(blob);
    rdv_capture(NULL, &cap, &len); /* the control */
    ck_assert(contains(cap, len, "SLV1", 4));
    ck_assert(contains(cap, len, "the-job-name", 12));
    ck_assert(contains(cap, len, blob, sizeof blob));
    free(cap);
    rdv_capture(&k, &cap, &len);
    ck_assert_uint_gt(len, 2 * sizeof blob);
    ck_assert(contains(cap, len, "CURVE", 5));
    ck_assert(!contains(cap, len, "SLV1", 4));
    ck_assert(!contains(cap, len, "the-job-name", 12));
    for (size_t off = 0; off + 8 <= sizeof blob; off += 8)
        ck_assert(!contains(cap, len, blob + off, 8)); /* no 8 bytes of it */
    free(cap);
}
END_TEST

START_TEST(test_curve_rendezvous_other_key)
{
    enum { P = 3 };
    struct sl_curve_keys job, other;
    struct rdv_run run;
    make_keys(&job);
    make_keys(&other);
    rdv_setup(&run, P, NULL, "id", 2);
    for (int r = 0; r < P; r++) {
        run.arg[r].o.curve = r == 2 ? &other : &job;
        run.arg[r].o.timeout_ms = 4000;
    }
    rdv_go(&run);
    char want[512];
    snprintf(want, sizeof want,
             "rendezvous: the CURVE handshake with rank 0 (%s) failed: the workers do not share one trainer key "
             "(--curve-key)",
             run.root);
    ck_assert_int_eq(run.arg[2].rc, SL_EPROTO);
    ck_assert_str_eq(run.arg[2].err.msg, want);
    ck_assert_msg(run.arg[2].secs < 3.0, "rank 2 took %.2f s", run.arg[2].secs);
    /* rank 0 waits out its timeout and says why; rank 1 hears it from rank 0 */
    const char *head = "rendezvous: rank 2 did not show up within 4.0 s; ";
    const char *tail = " CURVE handshake(s) on rank 0's endpoint failed: the workers do not share one trainer "
                       "key (--curve-key)";
    for (int r = 0; r < 2; r++) {
        ck_assert_int_eq(run.arg[r].rc, SL_ETIMEOUT);
        ck_assert_msg(strncmp(run.arg[r].err.msg, head, strlen(head)) == 0, "%s", run.arg[r].err.msg);
        ck_assert_msg(strstr(run.arg[r].err.msg, tail) != NULL, "%s", run.arg[r].err.msg);
        ck_assert_msg(run.arg[r].secs >= 3.9 && run.arg[r].secs < 6.5, "rank %d took %.2f s", r, run.arg[r].secs);
    }
    ck_assert_msg(strstr(run.arg[1].err.msg, "(reported by rank 0 (") != NULL, "%s", run.arg[1].err.msg);
}
END_TEST

START_TEST(test_curve_rendezvous_one_side_plain)
{
    struct sl_curve_keys k;
    make_keys(&k);
    for (int curve_root = 0; curve_root < 2; curve_root++) {
        struct rdv_run run;
        rdv_setup(&run, 2, NULL, NULL, 0);
        run.arg[curve_root ? 0 : 1].o.curve = &k;
        for (int r = 0; r < 2; r++)
            run.arg[r].o.timeout_ms = 4000;
        rdv_go(&run);
        char want[512];
        if (curve_root)
            snprintf(want, sizeof want,
                     "rendezvous: the handshake with rank 0 (%s) failed: it uses CURVE, but this worker has no "
                     "trainer key (give every worker the same --curve-key)",
                     run.root);
        else
            snprintf(want, sizeof want,
                     "rendezvous: the handshake with rank 0 (%s) failed: it does not use CURVE, but this worker "
                     "has a trainer key (give every worker the same --curve-key)",
                     run.root);
        /* rank 1 may see rank 0 close the connection before it reads rank
         * 0's greeting, and then only says the handshake failed */
        char or [512];
        if (curve_root)
            snprintf(or, sizeof or,
                     "rendezvous: the handshake with rank 0 (%s) failed: it closed the connection (a worker with a "
                     "trainer key? give every worker the same --curve-key, or none)",
                     run.root);
        else
            snprintf(or, sizeof or,
                     "rendezvous: the CURVE handshake with rank 0 (%s) failed: the workers do not share one trainer "
                     "key (--curve-key)",
                     run.root);
        ck_assert_int_eq(run.arg[1].rc, SL_EPROTO);
        ck_assert_msg(strcmp(run.arg[1].err.msg, want) == 0 || strcmp(run.arg[1].err.msg, or) == 0, "%s",
                      run.arg[1].err.msg);
        ck_assert_msg(run.arg[1].secs < 3.0, "rank 1 took %.2f s", run.arg[1].secs);
        ck_assert_int_eq(run.arg[0].rc, SL_ETIMEOUT);
        ck_assert_msg(strstr(run.arg[0].err.msg, "rendezvous: rank 1 did not show up within 4.0 s; ") ==
                          run.arg[0].err.msg,
                      "%s", run.arg[0].err.msg);
        ck_assert_msg(strstr(run.arg[0].err.msg, curve_root ? " CURVE handshake(s) on rank 0's endpoint failed"
                                                            : " handshake(s) on rank 0's endpoint failed: a worker "
                                                              "with a trainer key (--curve-key) where rank 0 has "
                                                              "none?") != NULL,
                      "%s", run.arg[0].err.msg);
    }
}
END_TEST

START_TEST(test_curve_rendezvous_bad_keys)
{
    struct sl_curve_keys bad;
    memset(&bad, 0, sizeof bad);
    for (int r = 0; r < 2; r++) {
        struct rdv_run run;
        rdv_setup(&run, 2, NULL, NULL, 0);
        run.arg[r].o.curve = &bad;
        struct sl_error err = {0};
        size_t len = 5;
        unsigned char out[4];
        uint64_t t0 = sl_clock_ns();
        ck_assert_int_eq(train_rendezvous(&run.arg[r].o, out, sizeof out, &len, &err), SL_EINVAL);
        ck_assert_msg(strncmp(err.msg, "rendezvous: ", 12) == 0, "%s", err.msg);
        ck_assert_uint_eq(len, 0);
        ck_assert_uint_lt(sl_clock_ns() - t0, 1000000000u);
    }
}
END_TEST

/* max_message_bytes bounds the data: a chunk of exactly that size passes
 * with CURVE too (its frames arrive 33 bytes larger), one more float is
 * refused before anything is sent. The rendezvous' largest blob the same. */
START_TEST(test_curve_message_limit)
{
    enum { P = 2 };
    struct sl_curve_keys k;
    struct ring_run run;
    make_keys(&k);
    ring_setup(&run, P, NULL);
    ring_inputs(&run, 30, 2); /* chunks of 15 floats: 60 bytes, and (30/2 + 1) * 4 = 64 */
    for (int r = 0; r < P; r++) {
        run.arg[r].o.curve = &k;
        run.arg[r].o.max_message_bytes = 64;
    }
    ring_go(&run);
    for (int r = 0; r < P; r++)
        ck_assert_msg(run.arg[r].rc == 0, "rank %d: %s", r, run.arg[r].err.msg);
    ck_assert(memcmp(run.arg[0].buf, run.arg[1].buf, 2 * 30 * sizeof(float)) == 0);
    ring_free(&run);

    static unsigned char blob[TRAIN_RENDEZVOUS_MAX_BLOB];
    for (size_t i = 0; i < sizeof blob; i++)
        blob[i] = (unsigned char)(i * 7);
    struct rdv_run rdv;
    rdv_setup(&rdv, 3, NULL, blob, sizeof blob);
    for (int r = 0; r < 3; r++)
        rdv.arg[r].o.curve = &k;
    rdv_go(&rdv);
    for (int r = 0; r < 3; r++) {
        ck_assert_msg(rdv.arg[r].rc == 0, "rank %d: %s", r, rdv.arg[r].err.msg);
        ck_assert_uint_eq(rdv.arg[r].len, sizeof blob);
        ck_assert(memcmp(rdv.arg[r].got, blob, sizeof blob) == 0);
    }
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("train_ring_curve");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_curve_ring_same_bits);
    tcase_add_test(tc, test_curve_ring_wire_encrypted);
    tcase_add_test(tc, test_curve_ring_other_key);
    tcase_add_test(tc, test_curve_ring_one_side_plain);
    tcase_add_test(tc, test_curve_ring_stranger_refused);
    tcase_add_test(tc, test_ring_survives_port_scan);
    tcase_add_test(tc, test_curve_ring_bad_keys);
    tcase_add_test(tc, test_curve_rendezvous_wire_encrypted);
    tcase_add_test(tc, test_curve_rendezvous_other_key);
    tcase_add_test(tc, test_curve_rendezvous_one_side_plain);
    tcase_add_test(tc, test_curve_rendezvous_bad_keys);
    tcase_add_test(tc, test_curve_message_limit);
    suite_add_tcase(s, tc);
    return s;
}
