/* sluice-bench allreduce: the trainer's CPU ring all-reduce
 * (trainer/coll/train_ring.h) across P processes, against raw ZeroMQ moving the
 * same bytes.
 *
 * P ranks are forked, join a ring on loopback, make two untimed calls and
 * then time --iters calls of n floats; each rank writes its seconds to a
 * pipe and the slowest rank's time is the collective's. A ring rank sends
 * and receives 2(P-1) chunks of n/P floats per call; the baseline is the
 * same ring of P processes moving as many chunk-sized messages over raw
 * PUSH/PULL sockets with nothing added (same links, same copies, same
 * competition for the cores), so the ratio is the cost of the reduction
 * and the ring's framing. Both are given as "bus" bandwidth
 * (n x 4 x 2(P-1)/P bytes per call time).
 *
 * --curve also times the ring with CURVE on every link (one key pair for
 * all ranks, as sluice-trainer --curve-key gives them), in the same run:
 * its time per call and its slowdown against the plaintext ring.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "sl_alloc.h"
#include "sl_clock.h"
#include "sl_curve.h"
#include "sl_zsock.h"
#include "train_ring.h"

#include <zmq.h>

struct args {
    int procs[16], nprocs;
    long floats, iters, repeat;
    int transport; /* bench_transport_names */
    int curve, json;
};

static int set_procs(void *opts, const char *value, struct sl_error *err)
{
    struct args *a = opts;
    return bench_opt_list("--procs", value, 2, 16, a->procs, 16, &a->nprocs, err);
}

#define OFF(f) offsetof(struct args, f)
static const struct sl_opt rows[] = {
    {"procs", 0, SL_OPT_FUNC, 0, 0, 0, "2,4", "LIST", "process counts P (2-16 each)", NULL, set_procs},
    {"floats", 0, SL_OPT_LONG, OFF(floats), 16, 1L << 28, "4194304", "N", "floats per buffer (default 4194304: 16 MiB)",
     NULL, NULL},
    {"iters", 0, SL_OPT_LONG, OFF(iters), 1, 100000, "10", "K", "timed calls per run", NULL, NULL},
    BENCH_OPT_TRANSPORT_ROW(struct args, transport),
    {"repeat", 0, SL_OPT_LONG, OFF(repeat), 1, 32, "3", "N", "runs per figure: median, min, max", NULL, NULL},
    {"curve", 0, SL_OPT_FLAG, OFF(curve), 0, 0, NULL, NULL,
     "also time the ring with CURVE on every link (the encryption's cost: its slowdown against plaintext)", NULL, NULL},
    {"json", 0, SL_OPT_FLAG, OFF(json), 0, 0, NULL, NULL, "one JSON object per P instead of the table", NULL, NULL},
    BENCH_OPT_HELP_ROW,
};

static const struct sl_opt_cmd cmd = {
    .prog = "sluice-bench allreduce",
    .usage = "Usage: sluice-bench allreduce [OPTION]...\n"
             "\n"
             "CPU ring all-reduce of float32 buffers across P processes against a ring of P\n"
             "processes moving the same bytes in the same chunk size over raw ZeroMQ\n"
             "PUSH/PULL, on the same transport.\n"
             "\n",
    .rows = rows,
    .nrows = sizeof rows / sizeof rows[0],
};

/* One rank: seconds for `iters` calls into fd (as a double), exit 0. */
static void rank_main(int rank, int P, const char **eps, size_t n, int iters, int fd, const struct sl_curve_keys *curve)
{
    struct train_ring_opts ro = {.rank = rank, .size = P, .endpoints = eps, .curve = curve};
    struct train_ring *ring;
    struct sl_error err = {0};
    float *buf = sl_calloc(n ? n : 1, sizeof *buf);
    if (buf == NULL || train_ring_open(&ring, &ro, &err) != 0) {
        fprintf(stderr, "sluice-bench allreduce: rank %d: %s\n", rank, err.msg);
        _exit(1);
    }
    double t0 = 0;
    int rc = 0;
    for (int it = -2; rc == 0 && it < iters; it++) {
        if (it == 0)
            t0 = sl_clock_s();
        rc = train_ring_all_reduce(ring, buf, n, TRAIN_RING_SUM, &err);
    }
    double secs = sl_clock_s() - t0;
    train_ring_close(ring);
    sl_free(buf);
    if (rc != 0) {
        fprintf(stderr, "sluice-bench allreduce: rank %d: %s\n", rank, err.msg);
        _exit(1);
    }
    _exit(write(fd, &secs, sizeof secs) == (ssize_t)sizeof secs ? 0 : 1);
}

/* The ring-shaped baseline's rank: PULL bound at its endpoint, PUSH to the
 * next rank, and per "call" 2(P-1) chunk-sized messages each way, sent
 * with copying zmq_send as the ring does, nothing added: the same traffic
 * on the same links with no reduction work. Seconds into fd, exit 0. */
static void raw_rank_main(int rank, int P, const char **eps, size_t n, int iters, int fd)
{
    size_t chunk = (n + (size_t)P - 1) / (size_t)P * sizeof(float);
    void *ctx = zmq_ctx_new(), *pull = zmq_socket(ctx, ZMQ_PULL), *push = zmq_socket(ctx, ZMQ_PUSH);
    char *buf = calloc(1, chunk ? chunk : 1);
    /* linger: the last chunks must leave before the socket closes; the
     * receive timeout turns a lost rank into a failed run, not a hang */
    if (buf == NULL || sl_zsock_set_int(push, ZMQ_LINGER, 10000, "raw ring", NULL) != 0 ||
        sl_zsock_set_int(pull, ZMQ_RCVTIMEO, 30000, "raw ring", NULL) != 0 || zmq_bind(pull, eps[rank]) != 0 ||
        zmq_connect(push, eps[(rank + 1) % P]) != 0)
        _exit(1);
    double t0 = 0;
    for (int it = -2; it < iters; it++) {
        if (it == 0)
            t0 = sl_clock_s();
        for (int k = 0; k < 2 * (P - 1); k++)
            if (zmq_send(push, buf, chunk, 0) < 0 || zmq_recv(pull, buf, chunk, 0) < 0)
                _exit(1);
    }
    double secs = sl_clock_s() - t0;
    zmq_close(push);
    zmq_close(pull);
    zmq_ctx_term(ctx);
    free(buf);
    _exit(write(fd, &secs, sizeof secs) == (ssize_t)sizeof secs ? 0 : 1);
}

/* Seconds per call (the slowest rank) of the ring (raw = 0; with CURVE
 * when curve is not NULL) or of the ring-shaped raw ZeroMQ baseline
 * (raw = 1), or < 0. */
static double ring_run(const char *transport, const char *dir, int P, size_t n, int iters, int raw,
                       const struct sl_curve_keys *curve)
{
    char bind_ep[16][512], conn[512];
    const char *eps[16];
    for (int r = 0; r < P; r++) {
        if (bench_endpoint(transport, dir, r, bind_ep[r], conn, sizeof conn) != 0)
            return -1;
        eps[r] = bind_ep[r];
    }
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    struct bench_group g;
    memset(&g, 0, sizeof g);
    pid_t pids[16];
    int started = 0;
    for (int r = 0; r < P; r++) {
        fflush(NULL);
        pids[r] = fork();
        if (pids[r] == 0) {
            close(fds[0]);
            if (raw)
                raw_rank_main(r, P, eps, n, iters, fds[1]);
            rank_main(r, P, eps, n, iters, fds[1], curve);
        }
        started += pids[r] > 0;
    }
    close(fds[1]);
    double worst = 0, s;
    int got = 0;
    while (got < P && read(fds[0], &s, sizeof s) == (ssize_t)sizeof s) {
        got++;
        if (s > worst)
            worst = s;
    }
    close(fds[0]);
    int ok = started == P && got == P;
    for (int r = 0; r < P; r++) {
        int st;
        if (pids[r] > 0 && (waitpid(pids[r], &st, 0) != pids[r] || !WIFEXITED(st) || WEXITSTATUS(st) != 0))
            ok = 0;
    }
    return ok ? worst / iters : -1;
}

int bench_allreduce_main(int argc, char **argv)
{
    struct args args = {0};
    int prc = bench_opt_parse("allreduce", &cmd, argc, argv, &args);
    if (prc != 0)
        return prc == 1 ? 0 : 2;
    const int *procs = args.procs, nprocs = args.nprocs, json = args.json, use_curve = args.curve;
    const long floats = args.floats, iters = args.iters, repeat = args.repeat;
    const char *transport = bench_transport_names[args.transport];
    char dir[64];
    if (bench_tmpdir("allreduce", dir, sizeof dir) != 0)
        return 1;
    struct sl_curve_keys keys;
    if (use_curve) {
        /* the job's trainer key pair, made for this run beside its sockets */
        char name[128], key[140];
        struct sl_error err = {0};
        snprintf(name, sizeof name, "%s/trainer", dir);
        snprintf(key, sizeof key, "%s.key", name);
        if (sl_curve_keygen(name, &err) != 0 || sl_curve_load_secret(key, &keys, &err) != 0) {
            fprintf(stderr, "sluice-bench allreduce: --curve: %s\n", err.msg);
            bench_rmtree(dir);
            return 1;
        }
    }
    if (!json)
        printf("sluice-bench allreduce: %ld floats (%.1f MB), %ld calls per run, %s, median [min-max] of %ld\n\n"
               " %-4s %-12s %-26s %-26s %-7s%s\n",
               floats, (double)floats * 4 / 1e6, iters, transport, repeat, "P", "ms/call", "ring bus MB/s",
               "raw ZeroMQ MB/s", "ratio", use_curve ? "  CURVE ms/call [min-max] CURVE/plain" : "");
    int status = 0;
    for (int k = 0; k < nprocs && status == 0; k++) {
        int P = procs[k];
        double ms[32], bus[32], raw[32], cms[32], slow[32];
        for (int rep = 0; rep < repeat && status == 0; rep++) {
            double per = ring_run(transport, dir, P, (size_t)floats, (int)iters, 0, NULL);
            double raw_per = ring_run(transport, dir, P, (size_t)floats, (int)iters, 1, NULL);
            double cper = use_curve ? ring_run(transport, dir, P, (size_t)floats, (int)iters, 0, &keys) : 1;
            if (cper <= 0) {
                fprintf(stderr, "sluice-bench allreduce: P=%d: a rank of the CURVE ring failed\n", P);
                status = 1;
                break;
            }
            cms[rep] = cper * 1e3;
            slow[rep] = per > 0 ? cper / per : 0;
            raw[rep] = raw_per > 0 ? (double)floats * 4 * 2.0 * (P - 1) / P / raw_per / 1e6 : -1;
            if (per <= 0 || raw[rep] <= 0) {
                fprintf(stderr, "sluice-bench allreduce: P=%d: a rank or the raw baseline failed\n", P);
                status = 1;
                break;
            }
            ms[rep] = per * 1e3;
            bus[rep] = (double)floats * 4 * 2.0 * (P - 1) / P / per / 1e6;
        }
        if (status != 0)
            break;
        struct bench_stat m = bench_stat_of(ms, (size_t)repeat), b = bench_stat_of(bus, (size_t)repeat),
                          r = bench_stat_of(raw, (size_t)repeat), cm = bench_stat_of(cms, (size_t)repeat),
                          sw = bench_stat_of(slow, (size_t)repeat);
        char extra[256] = "";
        if (use_curve && json)
            snprintf(extra, sizeof extra,
                     ",\"curve_ms_per_call\":{\"median\":%.6g,\"min\":%.6g,\"max\":%.6g},\"curve_slowdown\":%.4f",
                     cm.median, cm.min, cm.max, sw.median);
        else if (use_curve)
            snprintf(extra, sizeof extra, "  %8.2f [%.2f-%.2f]  %.2f", cm.median, cm.min, cm.max, sw.median);
        if (json) {
            printf("{\"bench\":\"allreduce\",\"transport\":\"%s\",\"procs\":%d,\"floats\":%ld,\"iters\":%ld,"
                   "\"ms_per_call\":{\"median\":%.6g,\"min\":%.6g,\"max\":%.6g},"
                   "\"bus_mb_per_s\":{\"median\":%.6g,\"min\":%.6g,\"max\":%.6g},"
                   "\"raw_zmq_mb_per_s\":{\"median\":%.6g,\"min\":%.6g,\"max\":%.6g},\"ratio\":%.4f%s}\n",
                   transport, P, floats, iters, m.median, m.min, m.max, b.median, b.min, b.max, r.median, r.min, r.max,
                   b.median / r.median, extra);
        } else {
            char bc[64], rc[64];
            snprintf(bc, sizeof bc, "%.1f [%.1f-%.1f]", b.median, b.min, b.max);
            snprintf(rc, sizeof rc, "%.1f [%.1f-%.1f]", r.median, r.min, r.max);
            printf(" %-4d %-12.2f %-26s %-26s %.2f%s\n", P, m.median, bc, rc, b.median / r.median, extra);
        }
    }
    bench_rmtree(dir);
    return status;
}
