/* ring_worker: one rank of a train_ring all-reduce, for tests/ring/test_ring.sh
 * and for benchmarks.
 *
 *   ring_worker RANK SIZE EP0,EP1,... N ITERATIONS [MODE [RAW0,RAW1,...]]
 *
 * MODE: sum (default: small integers, exact sums), mean, frac (fractions
 * whose sums round), die-after-1 (sum; _exit after the first call), bench
 * (times the all-reduce and, as a baseline, raw PUSH/PULL of the same bytes
 * between ring neighbours over the RAW endpoints).
 *
 * Each call fills buf from (rank, index, iteration), reduces it and checks
 * every element bitwise against the value the ring promises: chunk c summed
 * in ring order x[c] + x[c+1] + ... (for integers, the exact sum). Prints
 * "rank R checksum HEX check ok" (FNV-1a 64 over all results) and exits 0,
 * or prints the failure and exits 1. RING_TIMEOUT_MS sets both timeouts.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "sl_alloc.h"
#include "sl_clock.h"
#include "train_ring.h"

enum mode { MODE_SUM, MODE_MEAN, MODE_FRAC, MODE_DIE, MODE_BENCH };

static float value(enum mode m, int rank, size_t i, int iter)
{
    if (m == MODE_FRAC)
        return (float)(rank + 1) / (float)(3 + (i * 5 + (size_t)iter) % 29);
    return (float)((int)(((size_t)rank * 31 + i * 7 + (size_t)iter * 13) % 19) - 9);
}

static void fill(float *buf, size_t n, enum mode m, int rank, int iter)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = value(m, rank, i, iter);
}

/* The ring's promise for element i: its chunk's owner order, then MEAN. */
static float expected(enum mode m, int size, size_t n, size_t i, int iter)
{
    int c = 0;
    float acc;

    while ((size_t)(((uint64_t)n * (uint64_t)(c + 1)) / (uint64_t)size) <= i)
        c++;
    acc = value(m, c, i, iter);
    for (int k = 1; k < size; k++)
        acc = value(m, (c + k) % size, i, iter) + acc;
    if (m == MODE_MEAN)
        acc = acc / (float)size;
    return acc;
}

static uint64_t fnv1a(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;

    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= UINT64_C(1099511628211);
    }
    return h;
}

static int check(const float *buf, enum mode m, int rank, int size, size_t n, int iter)
{
    for (size_t i = 0; i < n; i++) {
        float want = expected(m, size, n, i, iter);
        double exact = 0;

        if (memcmp(&buf[i], &want, sizeof want) != 0) {
            printf("rank %d check FAILED call %d index %zu: got %.9g expected %.9g\n", rank, iter, i, (double)buf[i],
                   (double)want);
            return -1;
        }
        if (m == MODE_SUM || m == MODE_DIE) {
            for (int r = 0; r < size; r++)
                exact += (double)value(m, r, i, iter);
            if ((double)buf[i] != exact) {
                printf("rank %d check FAILED call %d index %zu: got %.9g exact sum %.9g\n", rank, iter, i,
                       (double)buf[i], exact);
                return -1;
            }
        }
    }
    return 0;
}

/* Split a comma-separated list in place into at most max entries. */
static int split(char *s, const char **out, int max)
{
    int k = 0;

    for (char *tok = strtok(s, ","); tok; tok = strtok(NULL, ",")) {
        if (k == max)
            return -1;
        out[k++] = tok;
    }
    return k;
}

/* A barrier: a one-float all-reduce. */
static int barrier(struct train_ring *ring)
{
    float one = 1;
    struct sl_error err = {0};

    return train_ring_all_reduce(ring, &one, 1, TRAIN_RING_SUM, &err);
}

/* Raw baseline: PUSH n*4 bytes to the successor, PULL as many from the
 * predecessor, iters times between two ring barriers, so every rank times
 * the same cluster-wide interval; returns seconds per exchange, or < 0. */
static double raw_bench(struct train_ring *ring, const char **raw, int rank, int size, const float *buf, size_t n,
                        int iters)
{
    void *ctx = zmq_ctx_new();
    void *push = zmq_socket(ctx, ZMQ_PUSH), *pull = zmq_socket(ctx, ZMQ_PULL);
    size_t bytes = n * sizeof(float);
    int linger = 5000;
    double t = -1;
    uint64_t t0 = 0;
    zmq_msg_t m;

    zmq_setsockopt(push, ZMQ_LINGER, &linger, sizeof linger);
    if (zmq_bind(pull, raw[rank]) < 0 || zmq_connect(push, raw[(rank + 1) % size]) < 0) {
        fprintf(stderr, "ring_worker: raw endpoints: %s\n", zmq_strerror(zmq_errno()));
        goto out_close;
    }
    for (int it = -1; it < iters; it++) { /* it -1: warm-up and rendezvous */
        if (it == 0) {
            if (barrier(ring) < 0)
                goto out_close;
            t0 = sl_clock_ns();
        }
        zmq_msg_init(&m);
        if (zmq_send(push, buf, bytes, 0) < 0 || zmq_msg_recv(&m, pull, 0) < 0 || zmq_msg_size(&m) != bytes) {
            zmq_msg_close(&m);
            t = -1;
            goto out_close;
        }
        zmq_msg_close(&m);
    }
    if (barrier(ring) < 0)
        goto out_close;
    t = (double)(sl_clock_ns() - t0) / 1e9 / iters;
out_close:
    zmq_close(pull);
    zmq_close(push);
    zmq_ctx_term(ctx);
    return t;
}

int main(int argc, char **argv)
{
    const char *eps[TRAIN_RING_MAX_SIZE], *raw[TRAIN_RING_MAX_SIZE];
    struct train_ring_opts o = {0};
    struct train_ring *ring;
    struct sl_error err = {0};
    enum mode m = MODE_SUM;
    const char *tmo = getenv("RING_TIMEOUT_MS");
    uint64_t sum = UINT64_C(14695981039346656037);
    double ring_s = 0;
    float *buf;
    size_t n;
    int iters, rc, status = 0;

    if (argc < 6 || argc > 8) {
        fprintf(stderr, "usage: ring_worker RANK SIZE EP0,EP1,... N ITERATIONS "
                        "[sum|mean|frac|die-after-1|bench [RAW0,RAW1,...]]\n");
        return 2;
    }
    o.rank = atoi(argv[1]);
    o.size = atoi(argv[2]);
    n = (size_t)strtoull(argv[4], NULL, 10);
    iters = atoi(argv[5]);
    if (argc > 6) {
        static const char *names[] = {"sum", "mean", "frac", "die-after-1", "bench"};
        int k = 0;

        while (k < 5 && strcmp(argv[6], names[k]) != 0)
            k++;
        if (k == 5) {
            fprintf(stderr, "ring_worker: unknown mode '%s'\n", argv[6]);
            return 2;
        }
        m = (enum mode)k;
    }
    if (split(argv[3], eps, TRAIN_RING_MAX_SIZE) != o.size || iters < 1 ||
        (m == MODE_BENCH && (argc != 8 || split(argv[7], raw, TRAIN_RING_MAX_SIZE) != o.size))) {
        fprintf(stderr, "ring_worker: need SIZE endpoints, ITERATIONS >= 1 "
                        "(and SIZE raw endpoints for bench)\n");
        return 2;
    }
    o.endpoints = eps;
    if (tmo)
        o.timeout_ms = o.connect_timeout_ms = atoi(tmo);
    if ((buf = sl_malloc(n ? n * sizeof *buf : 1)) == NULL) {
        fprintf(stderr, "ring_worker: out of memory\n");
        return 1;
    }
    rc = train_ring_open(&ring, &o, &err);
    if (rc < 0) {
        fprintf(stderr, "ring_worker: rank %d: %s (%s)\n", o.rank, err.msg, sl_code_name(rc));
        sl_free(buf);
        return 1;
    }
    for (int it = m == MODE_BENCH ? -2 : 0; it < iters; it++) { /* bench: 2 warm-up calls */
        uint64_t t0;

        if (m != MODE_BENCH || it < 0)
            fill(buf, n, m, o.rank, it < 0 ? 0 : it);
        t0 = sl_clock_ns();
        rc = train_ring_all_reduce(ring, buf, n, m == MODE_MEAN ? TRAIN_RING_MEAN : TRAIN_RING_SUM, &err);
        if (it >= 0)
            ring_s += (double)(sl_clock_ns() - t0) / 1e9;
        if (rc < 0) {
            fprintf(stderr, "ring_worker: rank %d: call %d: %s (%s)\n", o.rank, it, err.msg, sl_code_name(rc));
            status = 1;
            break;
        }
        if (m == MODE_BENCH)
            continue;
        if (check(buf, m, o.rank, o.size, n, it) < 0) {
            status = 1;
            break;
        }
        sum = fnv1a(sum, buf, n * sizeof *buf);
        if (m == MODE_DIE) {
            printf("rank %d dying after call 0\n", o.rank);
            fflush(stdout);
            _exit(3);
        }
    }
    if (status == 0 && m == MODE_BENCH) {
        double raw_s;

        fill(buf, n, m, o.rank, 0);
        raw_s = raw_bench(ring, raw, o.rank, o.size, buf, n, iters);
        if (raw_s <= 0) {
            fprintf(stderr, "ring_worker: rank %d: raw baseline failed\n", o.rank);
            status = 1;
        } else {
            double bytes = (double)n * sizeof(float), per = ring_s / iters;
            printf("rank %d P=%d bytes=%.0f ring %.3f GB/s (bus %.3f GB/s, %.3f ms/call) "
                   "raw push/pull %.3f GB/s (%.3f ms)\n",
                   o.rank, o.size, bytes, bytes / per / 1e9, bytes / per / 1e9 * 2.0 * (o.size - 1) / o.size, per * 1e3,
                   bytes / raw_s / 1e9, raw_s * 1e3);
        }
    } else if (status == 0) {
        printf("rank %d checksum %016" PRIx64 " check ok\n", o.rank, sum);
    }
    train_ring_close(ring);
    sl_free(buf);
    return status;
}
