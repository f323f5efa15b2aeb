/* sluice-bench wire: the cost of sluice's wire protocol (shared/sl_wire.h)
 * against raw ZeroMQ of the same bytes.
 *
 * A piece of S payload bytes split into T tensors goes as a header frame
 * (encoded per message with sl_wire_encode_piece) and one zero-copy body
 * frame; the receiver decodes the header and checks the body against the
 * descriptors, as the trainer's client does. The baseline sends the
 * same bytes (header size + S) as one zero-copy message. The header's
 * encode + decode alone is also timed in memory.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "bench.h"
#include "sl_buf.h"
#include "sl_clock.h"
#include "sl_wire.h"

struct args {
    int sizes[16], nsizes;
    long tensors, repeat;
    int transport; /* bench_transport_names */
    int json;
};

static int set_sizes(void *opts, const char *value, struct sl_error *err)
{
    struct args *a = opts;
    return bench_opt_list("--sizes", value, 1, 256 << 20, a->sizes, 16, &a->nsizes, err);
}

#define OFF(f) offsetof(struct args, f)
static const struct sl_opt rows[] = {
    {"sizes", 0, SL_OPT_FUNC, 0, 0, 0, "4096,65536,1048576", "LIST",
     "payload bytes per piece (1 to 268435456 each, at most 16)", NULL, set_sizes},
    {"tensors", 0, SL_OPT_LONG, OFF(tensors), 1, SL_WIRE_MAX_TENSORS, "4", "T",
     "tensors per piece, in its body frame (1-64)", NULL, NULL},
    BENCH_OPT_TRANSPORT_ROW(struct args, transport),
    {"repeat", 0, SL_OPT_LONG, OFF(repeat), 1, 32, "3", "N", "runs per figure: median, min, max", NULL, NULL},
    {"json", 0, SL_OPT_FLAG, OFF(json), 0, 0, NULL, NULL, "one JSON object per size instead of the table", NULL, NULL},
    BENCH_OPT_HELP_ROW,
};

static const struct sl_opt_cmd cmd = {
    .prog = "sluice-bench wire",
    .usage = "Usage: sluice-bench wire [OPTION]...\n"
             "\n"
             "Wire protocol (PIECE header encoded and decoded per message, then one body frame)\n"
             "against raw ZeroMQ of the same bytes as one message, on the same transport.\n"
             "\n",
    .rows = rows,
    .nrows = sizeof rows / sizeof rows[0],
};

struct wire_arg {
    int tensors;
    size_t size;
    uint8_t *payload;
    struct sl_buf hdr;
    struct sl_wire_msg msg; /* receiver's decoded header */
    int bad;
};

static void piece_of(const struct wire_arg *a, long i, struct sl_wire_piece *p)
{
    memset(p, 0, sizeof *p);
    p->epoch = 0;
    p->step = (uint64_t)i;
    p->seq = (uint64_t)i;
    p->rows = 1;
    p->ntensors = (uint16_t)a->tensors;
    for (int t = 0; t < a->tensors; t++) {
        size_t share = a->size / (size_t)a->tensors + (t == 0 ? a->size % (size_t)a->tensors : 0);
        p->tensors[t].dtype = SL_WIRE_UINT8;
        p->tensors[t].rank = 2;
        p->tensors[t].dims[0] = 1;
        p->tensors[t].dims[1] = (int64_t)share;
        p->tensors[t].bytes = share;
        p->tensors[t].offset = t == 0 ? 0 : p->tensors[t - 1].offset + p->tensors[t - 1].bytes;
    }
}

static void no_free(void *data, void *hint)
{
    (void)data;
    (void)hint;
}

static int wire_send(void *sock, long i, void *arg)
{
    struct wire_arg *a = arg;
    struct sl_wire_piece p;
    piece_of(a, i, &p);
    if (sl_wire_encode_piece(&p, &a->hdr) != 0)
        return -1;
    if (zmq_send(sock, a->hdr.data, a->hdr.len, ZMQ_SNDMORE) < 0)
        return -1;
    zmq_msg_t m; /* every tensor in one body frame, as the feeder sends them */
    zmq_msg_init_data(&m, a->payload, a->size, no_free, NULL);
    if (zmq_msg_send(&m, sock, 0) < 0) {
        zmq_msg_close(&m);
        return -1;
    }
    return 0;
}

static int wire_recv(void *sock, long i, void *arg)
{
    struct wire_arg *a = arg;
    struct sl_error err = {0};
    zmq_msg_t m;
    (void)i;
    zmq_msg_init(&m);
    int rc = zmq_msg_recv(&m, sock, 0) < 0 ? -1 : 0;
    if (rc == 0 && sl_wire_decode(zmq_msg_data(&m), zmq_msg_size(&m), &a->msg, &err) != 0)
        rc = -1;
    if (rc == 0 && (zmq_msg_recv(&m, sock, 0) < 0 || sl_wire_check_body(&a->msg.piece, zmq_msg_size(&m), &err) != 0))
        rc = -1;
    zmq_msg_close(&m);
    if (rc != 0 && err.msg[0])
        fprintf(stderr, "sluice-bench wire: %s\n", err.msg);
    return rc;
}

/* In memory: ns per header encode + decode. */
static double header_ns(struct wire_arg *a)
{
    struct sl_wire_piece p;
    struct sl_error err = {0};
    long n = 0;
    double t0 = sl_clock_s(), el;
    do {
        for (int k = 0; k < 1000; k++, n++) {
            piece_of(a, n, &p);
            if (sl_wire_encode_piece(&p, &a->hdr) != 0 || sl_wire_decode(a->hdr.data, a->hdr.len, &a->msg, &err) != 0)
                return -1;
        }
        el = sl_clock_s() - t0;
    } while (el < 0.2);
    return el / (double)n * 1e9;
}

int bench_wire_main(int argc, char **argv)
{
    struct args args = {0};
    int prc = bench_opt_parse("wire", &cmd, argc, argv, &args);
    if (prc != 0)
        return prc == 1 ? 0 : 2;
    const int *sizes = args.sizes, nsizes = args.nsizes, json = args.json;
    const long tensors = args.tensors, repeat = args.repeat;
    const char *transport = bench_transport_names[args.transport];
    char dir[64];
    if (bench_tmpdir("wire", dir, sizeof dir) != 0)
        return 1;
    int status = 0;
    if (!json)
        printf("sluice-bench wire: %ld tensors per piece, %s, median [min-max] of %ld\n\n"
               " %-10s %-12s %-26s %-26s %-7s\n",
               tensors, transport, repeat, "bytes", "header ns", "sluice wire MB/s", "raw ZeroMQ MB/s", "ratio");
    for (int k = 0; k < nsizes && status == 0; k++) {
        struct wire_arg a = {.tensors = (int)tensors, .size = (size_t)sizes[k]};
        sl_buf_init(&a.hdr, SL_WIRE_MAX_HEADER);
        a.payload = calloc(1, a.size);
        double ns = a.payload ? header_ns(&a) : -1;
        long count = (long)(3e8 / (double)(a.size + a.hdr.len));
        if (count < 2000)
            count = 2000;
        double w[32], r[32];
        for (int rep = 0; rep < repeat && ns > 0; rep++) {
            double s = bench_zmq_pair(transport, dir, count, wire_send, &a, wire_recv, &a);
            w[rep] = s > 0 ? (double)a.size * (double)(count - 1) / s / 1e6 : -1;
            r[rep] = bench_raw_zmq(transport, dir, a.size + a.hdr.len, count) / 1e6;
            if (w[rep] < 0 || r[rep] < 0)
                ns = -1;
        }
        if (ns < 0) {
            fprintf(stderr, "sluice-bench wire: the %d-byte measurement failed\n", sizes[k]);
            status = 1;
        } else {
            struct bench_stat ws = bench_stat_of(w, (size_t)repeat), rs = bench_stat_of(r, (size_t)repeat);
            if (json)
                printf("{\"bench\":\"wire\",\"transport\":\"%s\",\"bytes\":%d,\"tensors\":%ld,\"header_bytes\":%zu,"
                       "\"header_encode_decode_ns\":%.1f,\"wire_mb_per_s\":{\"median\":%.6g,\"min\":%.6g,\"max\":%.6g},"
                       "\"raw_zmq_mb_per_s\":{\"median\":%.6g,\"min\":%.6g,\"max\":%.6g},\"ratio\":%.4f}\n",
                       transport, sizes[k], tensors, a.hdr.len, ns, ws.median, ws.min, ws.max, rs.median, rs.min,
                       rs.max, ws.median / rs.median);
            else {
                char wc[64], rc[64];
                snprintf(wc, sizeof wc, "%.1f [%.1f-%.1f]", ws.median, ws.min, ws.max);
                snprintf(rc, sizeof rc, "%.1f [%.1f-%.1f]", rs.median, rs.min, rs.max);
                printf(" %-10d %-12.0f %-26s %-26s %.2f\n", sizes[k], ns, wc, rc, ws.median / rs.median);
            }
        }
        free(a.payload);
        sl_buf_free(&a.hdr);
    }
    bench_rmtree(dir);
    return status;
}
