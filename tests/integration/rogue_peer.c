/* rogue_peer: a raw wire peer that says whatever it is told, for the hostile
 * cases of integration/test_hostile.py (real ZeroMQ, real feeder).
 *
 *   rogue_peer ENDPOINT JOB WORKER WORKERS REPLICAS RESUME_SEQ [OPTION]...
 *     --credits N     initial credits of the HELLO (default 4)
 *     --wait-ms MS    how long to wait for the answer (default 5000)
 *     --take N        after a WELCOME, receive N pieces, giving a credit
 *                     back for each (default 0: take none)
 *     --garbage N     before the HELLO, send N malformed frames
 *     --hellos N      send the HELLO N times, each from a new connection
 *                     (a new identity), waiting for each answer
 *     --bye 1         say BYE before going (default 0: just go)
 *     --big N         before the HELLO, send one frame of N zero bytes
 *     --flags N       the HELLO's flags (default 0: a trainer from before
 *                     STATUS; 2 asks a scanning feeder for a STATUS)
 *     --share N       the HELLO's share (default 0), any 32-bit value: one
 *                     the encoder refuses is written into the bytes
 *     --incarnation N the HELLO's incarnation (default 0)
 *     --version N     the header's version field (default this build's)
 *
 * Prints one JSON line per HELLO sent:
 *   {"reply":"WELCOME"|"REFUSE"|"ERROR"|"STATUS"|"none","ms":T,"reason":"...","pieces":P,"end":N}
 * (reason for REFUSE and ERROR; a STATUS's state, retry_ms, files_done,
 * files, records and bytes; pieces with --take; end: the END's piece
 * count, when one came before the pieces asked for) and exits 0, or 2 on a
 * usage error. Without --bye the connection just goes (linger 0), as a
 * crashed or hostile trainer's does. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "sl_alloc.h"
#include "sl_buf.h"
#include "sl_clock.h"
#include "sl_error.h"
#include "sl_wire.h"

static unsigned raw_version; /* the header's version field as sent */

static void print_json_string(const char *s, size_t n)
{
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\')
            printf("\\%c", ch);
        else if (ch < 0x20 || ch >= 0x7f)
            printf("\\u%04x", ch);
        else
            putchar(ch);
    }
    putchar('"');
}

/* The next message's header frame into m (its body frame, if any, is
 * dropped). 0, or -1 when none came in time. */
static int recv_msg(void *sock, zmq_msg_t *hdr, struct sl_wire_msg *m, long wait_ms)
{
    zmq_pollitem_t it = {.socket = sock, .events = ZMQ_POLLIN};
    if (zmq_poll(&it, 1, wait_ms) <= 0)
        return -1;
    if (zmq_msg_recv(hdr, sock, 0) < 0)
        return -1;
    while (zmq_msg_more(hdr)) {
        zmq_msg_t extra;
        zmq_msg_init(&extra);
        int r = zmq_msg_recv(&extra, sock, 0);
        int more = r >= 0 && zmq_msg_more(&extra);
        zmq_msg_close(&extra);
        if (!more)
            break;
    }
    struct sl_error err = {0};
    if (sl_wire_decode(zmq_msg_data(hdr), zmq_msg_size(hdr), m, &err) != 0) {
        fprintf(stderr, "rogue_peer: undecodable answer: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static int one_hello(void *ctx, const char *endpoint, const struct sl_wire_hello *h, long wait_ms, long take,
                     long garbage, long bye, long big)
{
    void *sock = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero);
    if (zmq_connect(sock, endpoint) != 0) {
        fprintf(stderr, "rogue_peer: connect(%s): %s\n", endpoint, zmq_strerror(errno));
        zmq_close(sock);
        return 2;
    }
    for (long i = 0; i < garbage; i++)
        zmq_send(sock, "not a sluice header", 19, 0);
    if (big > 0) {
        void *zeros = calloc(1, (size_t)big);
        if (zeros == NULL)
            abort();
        zmq_send(sock, zeros, (size_t)big, 0);
        free(zeros);
    }
    struct sl_buf b;
    sl_buf_init(&b, SL_WIRE_MAX_HEADER);
    struct sl_wire_hello hh = *h;
    if (hh.share >= SL_WIRE_MAX_FEEDERS)
        hh.share = 0;
    if (sl_wire_encode_hello(&hh, &b) != 0) {
        fprintf(stderr, "rogue_peer: the HELLO does not encode (check its fields)\n");
        sl_buf_free(&b);
        zmq_close(sock);
        return 2;
    }
    for (int k = 0; k < 4; k++) /* share at 56 (version 4's layout) */
        b.data[56 + k] = (uint8_t)(h->share >> (8 * k));
    b.data[4] = (uint8_t)(raw_version & 0xff);
    b.data[5] = (uint8_t)(raw_version >> 8);
    struct sl_wire_msg *m = sl_malloc(sizeof *m);
    if (m == NULL)
        abort();
    uint64_t t0 = sl_clock_ns();
    zmq_send(sock, b.data, b.len, 0);
    zmq_msg_t hdr;
    zmq_msg_init(&hdr);
    const char *reply = "none";
    int got = 0;
    /* heartbeats are not answers */
    while ((got = recv_msg(sock, &hdr, m, wait_ms) == 0) && m->type == SL_WIRE_HEARTBEAT) {
        zmq_msg_close(&hdr);
        zmq_msg_init(&hdr);
        if (sl_clock_ns() - t0 > (uint64_t)wait_ms * 1000000u) {
            got = 0;
            break;
        }
    }
    double ms = (double)(sl_clock_ns() - t0) / 1e6;
    const char *reason = NULL;
    size_t reason_len = 0;
    if (got) {
        reply = sl_wire_type_name(m->type);
        if (m->type == SL_WIRE_REFUSE) {
            reason = m->refuse.reason;
            reason_len = m->refuse.reason_len;
        } else if (m->type == SL_WIRE_ERROR) {
            reason = m->error.msg;
            reason_len = m->error.msg_len;
        }
    }
    printf("{\"reply\":\"%s\",\"ms\":%.1f", reply, ms);
    if (reason != NULL) {
        printf(",\"reason\":");
        print_json_string(reason, reason_len);
    }
    if (got && m->type == SL_WIRE_STATUS)
        printf(",\"state\":%" PRIu32 ",\"retry_ms\":%" PRIu32 ",\"files_done\":%" PRIu64 ",\"files\":%" PRIu64
               ",\"records\":%" PRIu64 ",\"bytes\":%" PRIu64,
               m->status.state, m->status.retry_ms, m->status.files_done, m->status.files, m->status.records,
               m->status.bytes);
    zmq_msg_close(&hdr);
    if (got && m->type == SL_WIRE_WELCOME && take > 0) {
        long pieces = 0;
        int64_t end = -1;
        while (pieces < take) {
            zmq_msg_init(&hdr);
            if (recv_msg(sock, &hdr, m, wait_ms) != 0) {
                zmq_msg_close(&hdr);
                break;
            }
            if (m->type == SL_WIRE_PIECE) {
                pieces++;
                struct sl_wire_credit c = {.credits = 1};
                if (sl_wire_encode_credit(&c, &b) == 0)
                    zmq_send(sock, b.data, b.len, 0);
            } else if (m->type == SL_WIRE_END || m->type == SL_WIRE_ERROR) {
                if (m->type == SL_WIRE_END)
                    end = (int64_t)m->end.pieces;
                zmq_msg_close(&hdr);
                break;
            }
            zmq_msg_close(&hdr);
        }
        printf(",\"pieces\":%ld", pieces);
        if (end >= 0)
            printf(",\"end\":%" PRId64, end);
    }
    printf("}\n");
    fflush(stdout);
    if (bye && sl_wire_encode_bye(&b) == 0) {
        int linger = 1000;
        zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger);
        zmq_send(sock, b.data, b.len, 0);
    }
    sl_free(m);
    sl_buf_free(&b);
    zmq_close(sock);
    return 0;
}

static int parse_long(const char *s, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || errno != 0 || v < 0)
        return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    raw_version = SL_WIRE_VERSION;
    if (argc < 7) {
        fprintf(stderr, "usage: rogue_peer ENDPOINT JOB WORKER WORKERS REPLICAS RESUME_SEQ [--credits N] "
                        "[--wait-ms MS] [--take N] [--garbage N] [--hellos N] [--bye 1] [--big N] [--flags N]\n");
        return 2;
    }
    struct sl_wire_hello h = {.job = argv[2], .job_len = strlen(argv[2]), .credits = 4, .heartbeat_ms = 0};
    h.worker = (uint32_t)strtoul(argv[3], NULL, 10);
    h.workers = (uint32_t)strtoul(argv[4], NULL, 10);
    h.replicas = (uint32_t)strtoul(argv[5], NULL, 10);
    h.resume_seq = strtoull(argv[6], NULL, 0);
    long wait_ms = 5000, take = 0, garbage = 0, hellos = 1, bye = 0, big = 0;
    for (int i = 7; i < argc; i += 2) {
        long v;
        if (i + 1 >= argc || parse_long(argv[i + 1], &v) != 0) {
            fprintf(stderr, "rogue_peer: %s needs a number\n", argv[i]);
            return 2;
        }
        if (strcmp(argv[i], "--credits") == 0)
            h.credits = (uint32_t)v;
        else if (strcmp(argv[i], "--wait-ms") == 0)
            wait_ms = v;
        else if (strcmp(argv[i], "--take") == 0)
            take = v;
        else if (strcmp(argv[i], "--garbage") == 0)
            garbage = v;
        else if (strcmp(argv[i], "--hellos") == 0)
            hellos = v;
        else if (strcmp(argv[i], "--bye") == 0)
            bye = v;
        else if (strcmp(argv[i], "--big") == 0 && v <= (1L << 30))
            big = v;
        else if (strcmp(argv[i], "--flags") == 0 && v <= (long)UINT32_MAX)
            h.flags = (uint32_t)v;
        else if (strcmp(argv[i], "--share") == 0 && v <= (long)UINT32_MAX)
            h.share = (uint32_t)v;
        else if (strcmp(argv[i], "--incarnation") == 0)
            h.incarnation = (uint64_t)v;
        else if (strcmp(argv[i], "--version") == 0 && v <= 0xffff)
            raw_version = (unsigned)v;
        else {
            fprintf(stderr, "rogue_peer: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    void *ctx = zmq_ctx_new();
    int rc = 0;
    for (long i = 0; i < hellos && rc == 0; i++)
        rc = one_hello(ctx, argv[1], &h, wait_ms, take, i == 0 ? garbage : 0, bye, i == 0 ? big : 0);
    zmq_ctx_term(ctx);
    return rc;
}
