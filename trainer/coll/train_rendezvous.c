/* train_rendezvous: a star around rank 0, over ZeroMQ.
 *
 * Rank 0 binds a ROUTER on the root endpoint; every other rank connects a
 * DEALER and sends one HELLO (ZeroMQ queues it until the connection is up,
 * and keeps retrying the connection, so ranks may start in any order).
 * Rank 0 checks each HELLO against its own options as it comes, and fails
 * at the first disagreement; while it waits it sends every rank that came a
 * STATUS every half second naming the first rank still missing. A rank
 * other than 0 therefore knows whether rank 0 is alive: a rank 0 it has
 * heard from is given a little longer than the timeout (it may have started
 * later), and when even that runs out the rank names the peer rank 0 was
 * waiting for, so every rank's message points at the absent one. A rank 0
 * that falls silent for three seconds after having answered is reported as
 * gone.
 *
 * CURVE (opts.curve): rank 0's ROUTER is a CURVE server with the job's
 * trainer key pair and a ZAP handler (sl_zap, on the call's context, for
 * the call's length) that accepts only that pair's public key; each DEALER
 * is a CURVE client with the same pair. A socket monitor on the DEALER
 * sees its handshake with rank 0 fail (another key, or one side without
 * CURVE) and the rank fails at once saying so. Rank 0's own monitor only
 * counts failed handshakes: it cannot tell which rank (or which stranger)
 * failed one, so it keeps waiting, and its timeout message, which every
 * rank that came receives, says how many failed.
 *
 * The root endpoint is worker 0's own address: the ring binds it after the
 * rendezvous has closed (rank 0 closes its ROUTER, with a linger that lets
 * the last WELCOMEs leave, before it returns), so a cluster spec needs no
 * second port per worker.
 *
 * Message: one frame, integers little-endian, encoded field by field:
 *   0  magic   "SLV1"
 *   4  version u16 (1)
 *   6  type    u16: 1 HELLO, 2 STATUS, 3 WELCOME, 4 REFUSE
 *   8  rank    u32: HELLO the sender; STATUS the first missing rank;
 *                   REFUSE the rank the reason is about
 *   12 size    u32: HELLO, WELCOME the world size; STATUS ranks missing;
 *                   REFUSE 1 (timeout) or 2 (disagreement)
 *   16 a       u32: HELLO job bytes; WELCOME blob bytes; REFUSE text bytes
 *   20 b       u32: HELLO config bytes; else 0
 *   24 payload HELLO job then config; WELCOME the blob; REFUSE the text
 * Lengths are checked against the TRAIN_RENDEZVOUS_MAX_* limits and against
 * the frame before anything is read; ZMQ_MAXMSGSIZE bounds the frame.
 */
#include "train_rendezvous.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "sl_alloc.h"
#include "sl_bytes.h"
#include "sl_clock.h"
#include "sl_endpoint.h"
#include "sl_handshake.h"
#include "sl_peer.h"
#include "sl_zsock.h"

#define VERSION 1
#define HDR 24
#define MAX_FRAME \
    (HDR + TRAIN_RENDEZVOUS_MAX_JOB + TRAIN_RENDEZVOUS_MAX_CONFIG + TRAIN_RENDEZVOUS_MAX_BLOB + SL_ERROR_MSG_MAX)
#define STATUS_MS 500
#define ROOT_SILENT_MS 3000
#define EXTRA_WAIT_MS 10000
#define ROOT_LINGER_MS 2000
#define MAX_ID 256
#define CURVE_FRAME_EXTRA \
    64 /* ZMQ_MAXMSGSIZE bounds a frame as it arrives: a CURVE
                                MESSAGE command carries 33 bytes more */
#define ROOT_MONITOR "inproc://sl-rendezvous-root-monitor"
#define PEER_MONITOR "inproc://sl-rendezvous-peer-monitor"

enum { MSG_HELLO = 1, MSG_STATUS = 2, MSG_WELCOME = 3, MSG_REFUSE = 4 };
enum { WHY_TIMEOUT = 1, WHY_DISAGREE = 2 };

struct msg {
    uint32_t type, rank, size, a, b;
    const unsigned char *payload; /* borrowed from the frame */
    size_t payload_len;
};

/* Encode a header and up to two payload parts into buf (MAX_FRAME bytes);
 * returns the frame length. */
static size_t encode(unsigned char *buf, uint32_t type, uint32_t rank, uint32_t size, const void *p1, uint32_t n1,
                     const void *p2, uint32_t n2)
{
    if ((size_t)n1 + n2 > MAX_FRAME - HDR) /* callers stay within the limits: never */
        return 0;
    memcpy(buf, "SLV1", 4);
    sl_store_le16(buf + 4, VERSION);
    sl_store_le16(buf + 6, (uint16_t)type);
    sl_store_le32(buf + 8, rank);
    sl_store_le32(buf + 12, size);
    sl_store_le32(buf + 16, n1);
    sl_store_le32(buf + 20, n2);
    if (n1)
        memcpy(buf + HDR, p1, n1);
    if (n2)
        memcpy(buf + HDR + n1, p2, n2);
    return HDR + (size_t)n1 + n2;
}

/* NULL, or why the frame is unusable. */
static const char *decode(const unsigned char *p, size_t n, struct msg *m)
{
    struct sl_reader r = sl_reader_make(p, n);
    const uint8_t *magic = sl_read_bytes(&r, 4);
    uint16_t version = 0, type = 0;
    (void)sl_read_u16(&r, &version);
    (void)sl_read_u16(&r, &type);
    (void)sl_read_u32(&r, &m->rank);
    (void)sl_read_u32(&r, &m->size);
    (void)sl_read_u32(&r, &m->a);
    (void)sl_read_u32(&r, &m->b);
    if (r.bad)
        return "short message";
    if (memcmp(magic, "SLV1", 4) != 0)
        return "bad magic";
    if (version != VERSION)
        return "unsupported version";
    m->type = type;
    m->payload = p + r.off;
    m->payload_len = sl_reader_left(&r);
    switch (m->type) {
    case MSG_HELLO:
        if (m->a > TRAIN_RENDEZVOUS_MAX_JOB || m->b > TRAIN_RENDEZVOUS_MAX_CONFIG)
            return "job or config longer than the limits";
        if ((size_t)m->a + m->b != m->payload_len)
            return "payload length differs from the header";
        return NULL;
    case MSG_STATUS: return m->payload_len == 0 && m->a == 0 && m->b == 0 ? NULL : "STATUS with a payload";
    case MSG_WELCOME:
        if (m->a > TRAIN_RENDEZVOUS_MAX_BLOB || m->a != m->payload_len || m->b != 0)
            return "bad WELCOME blob length";
        return NULL;
    case MSG_REFUSE:
        if (m->a >= SL_ERROR_MSG_MAX || m->a != m->payload_len || m->b != 0)
            return "bad REFUSE text length";
        return NULL;
    default: return "unknown message type";
    }
}

const char *train_rendezvous_check(const unsigned char *p, size_t n, unsigned char *back, size_t *back_len)
{
    struct msg m;
    const char *bad = decode(p, n, &m);
    if (bad == NULL)
        *back_len = m.type == MSG_HELLO ? encode(back, m.type, m.rank, m.size, m.payload, m.a, m.payload + m.a, m.b)
                                        : encode(back, m.type, m.rank, m.size, m.payload, m.a, NULL, 0);
    return bad;
}

static double secs(int ms)
{
    return (double)ms / 1000.0;
}

/* "rank 2 (host2:2222)" into buf. */
static const char *who(const struct train_rendezvous_opts *o, int rank, char *buf, size_t n)
{
    const char *name = o->names != NULL ? o->names[rank] : rank == 0 ? o->root : NULL;
    if (name != NULL && name[0] != '\0')
        snprintf(buf, n, "rank %d (%s)", rank, name);
    else
        snprintf(buf, n, "rank %d", rank);
    return buf;
}

/* CURVE for rank 0's ROUTER: the allow-list of the one public key and the
 * context's ZAP handler (before the bind). */
static int root_curve(const struct train_rendezvous_opts *o, void *ctx, void *sock, struct sl_curve_allow **allow,
                      struct sl_zap **zap, struct sl_error *err)
{
    const char *pub = o->curve->public_z85;
    int rc = sl_curve_allow_load(allow, NULL, &pub, 1, err);

    if (rc == 0)
        rc = sl_zap_start(zap, ctx, *allow, "rendezvous", err);
    if (rc == 0)
        rc = sl_curve_server(sock, o->curve, err);
    if (rc != 0)
        sl_error_prefix(err, "rendezvous: ");
    return rc;
}

struct root {
    const struct train_rendezvous_opts *o;
    void *sock;
    void *mon;                    /* the ROUTER's monitor */
    uint64_t hs_failed;           /* handshakes failed on the ROUTER */
    unsigned char (*ids)[MAX_ID]; /* [size]: routing ids of joined ranks */
    size_t *idlen;                /* [size]: 0 = not joined */
    int joined;                   /* ranks other than 0 that came */
    unsigned char *buf;           /* MAX_FRAME */
};

static void root_send(struct root *r, int rank, const unsigned char *frame, size_t n)
{
    /* best effort: a rank that left is no longer routable, and ZeroMQ drops */
    if (zmq_send(r->sock, r->ids[rank], r->idlen[rank], ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0)
        (void)zmq_send(r->sock, frame, n, ZMQ_DONTWAIT);
}

/* Tell every joined rank (and the peer `extra`, a routing id not in the
 * table, when not NULL) why the rendezvous failed; return the error. */
static int root_refuse(struct root *r, const void *extra, size_t extra_len, int code, uint32_t why, int culprit,
                       struct sl_error *err)
{
    size_t tl = strlen(err->msg);
    if (tl >= SL_ERROR_MSG_MAX)
        tl = SL_ERROR_MSG_MAX - 1;
    size_t n = encode(r->buf, MSG_REFUSE, (uint32_t)culprit, why, err->msg, (uint32_t)tl, NULL, 0);
    for (int k = 1; k < r->o->size; k++)
        if (r->idlen[k] > 0)
            root_send(r, k, r->buf, n);
    if (extra != NULL && zmq_send(r->sock, extra, extra_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0)
        (void)zmq_send(r->sock, r->buf, n, ZMQ_DONTWAIT);
    return code;
}

/* One HELLO from routing id `id`: record it or refuse the rendezvous. */
static int root_hello(struct root *r, const unsigned char *id, size_t idlen, const struct msg *m, struct sl_error *err)
{
    const struct train_rendezvous_opts *o = r->o;
    char a[320], b[320];
    const char *config = o->config ? o->config : "";
    size_t jl = strlen(o->job), cl = strlen(config);

    if (m->rank == 0 || m->rank >= (uint32_t)o->size) {
        sl_error_set(err, SL_EPROTO, "rendezvous: a peer says it is rank %u of %u, but %s has %d workers", m->rank,
                     m->size, who(o, 0, a, sizeof a), o->size);
        return root_refuse(r, id, idlen, SL_EPROTO, WHY_DISAGREE, 0, err);
    }
    int k = (int)m->rank;
    who(o, k, a, sizeof a);
    if (m->size != (uint32_t)o->size) {
        sl_error_set(err, SL_EPROTO, "rendezvous: %s says the cluster has %u workers, but %s has %d", a, m->size,
                     who(o, 0, b, sizeof b), o->size);
        return root_refuse(r, id, idlen, SL_EPROTO, WHY_DISAGREE, k, err);
    }
    if (r->idlen[k] > 0) {
        sl_error_set(err, SL_EPROTO, "rendezvous: two workers say they are %s", a);
        return root_refuse(r, id, idlen, SL_EPROTO, WHY_DISAGREE, k, err);
    }
    if (m->a != jl || memcmp(m->payload, o->job, jl) != 0) {
        sl_error_set(err, SL_EPROTO, "rendezvous: %s is in job '%.*s', but %s is in job '%s'", a, (int)m->a,
                     (const char *)m->payload, who(o, 0, b, sizeof b), o->job);
        return root_refuse(r, id, idlen, SL_EPROTO, WHY_DISAGREE, k, err);
    }
    if (m->b != cl || memcmp(m->payload + m->a, config, cl) != 0) {
        sl_error_set(err, SL_EPROTO, "rendezvous: %s has config '%.*s', but %s has '%s'", a, (int)m->b,
                     (const char *)m->payload + m->a, who(o, 0, b, sizeof b), config);
        return root_refuse(r, id, idlen, SL_EPROTO, WHY_DISAGREE, k, err);
    }
    memcpy(r->ids[k], id, idlen);
    r->idlen[k] = idlen;
    r->joined++;
    return 0;
}

static int first_missing(const struct root *r)
{
    for (int k = 1; k < r->o->size; k++)
        if (r->idlen[k] == 0)
            return k;
    return 0;
}

/* A poll's timeout for a wait of ns: at most 250 ms when a stop flag may
 * end the wait. */
static long poll_ms(const struct train_rendezvous_opts *o, uint64_t ns)
{
    long ms = (long)((ns + 999999) / 1000000);
    return o->stop != NULL && ms > 250 ? 250 : ms;
}

static int root_loop(struct root *r, uint64_t start, struct sl_error *err)
{
    const struct train_rendezvous_opts *o = r->o;
    uint64_t deadline = start + (uint64_t)o->timeout_ms * 1000000u, next_status = start;
    unsigned char id[MAX_ID];

    while (r->joined < o->size - 1) {
        uint64_t now = sl_clock_ns();
        if (o->stop != NULL && *o->stop)
            return sl_error_set(err, SL_ECLOSED, "rendezvous: stopped by a signal");
        if (now >= next_status) {
            int miss = first_missing(r);
            size_t n =
                encode(r->buf, MSG_STATUS, (uint32_t)miss, (uint32_t)(o->size - 1 - r->joined), NULL, 0, NULL, 0);
            for (int k = 1; k < o->size; k++)
                if (r->idlen[k] > 0)
                    root_send(r, k, r->buf, n);
            next_status = now + (uint64_t)STATUS_MS * 1000000u;
        }
        if (now >= deadline) {
            char a[320], hint[200] = "";
            int miss = first_missing(r), nmiss = o->size - 1 - r->joined;
            if (r->hs_failed > 0)
                snprintf(hint, sizeof hint, "; %" PRIu64 " %shandshake(s) on %s's endpoint failed: %s", r->hs_failed,
                         o->curve ? "CURVE " : "", "rank 0",
                         o->curve ? "the workers do not share one trainer key (--curve-key)"
                                  : "a worker with a trainer key (--curve-key) where rank 0 has none?");
            if (nmiss == 1)
                sl_error_set(err, SL_ETIMEOUT, "rendezvous: %s did not show up within %.1f s%s",
                             who(o, miss, a, sizeof a), secs(o->timeout_ms), hint);
            else
                sl_error_set(err, SL_ETIMEOUT, "rendezvous: %s and %d other rank(s) did not show up within %.1f s%s",
                             who(o, miss, a, sizeof a), nmiss - 1, secs(o->timeout_ms), hint);
            return root_refuse(r, NULL, 0, SL_ETIMEOUT, WHY_TIMEOUT, miss, err);
        }
        uint64_t wake = next_status < deadline ? next_status : deadline;
        zmq_pollitem_t it[2] = {{r->sock, 0, ZMQ_POLLIN, 0}, {r->mon, 0, ZMQ_POLLIN, 0}};
        int rc = zmq_poll(it, 2, poll_ms(o, wake - now));
        if (rc < 0 && zmq_errno() == EINTR)
            continue;
        if (rc < 0)
            return sl_error_set(err, SL_EIO, "rendezvous: zmq_poll: %s", zmq_strerror(zmq_errno()));
        if (it[1].revents & ZMQ_POLLIN) {
            uint16_t event;
            uint32_t value;
            while (sl_zsock_monitor_event(r->mon, &event, &value))
                r->hs_failed += (event & SL_HANDSHAKE_FAILED_EVENTS) != 0;
        }
        if (!(it[0].revents & ZMQ_POLLIN))
            continue;
        int idn = zmq_recv(r->sock, id, sizeof id, ZMQ_DONTWAIT);
        int more = 0;
        size_t ml = sizeof more;
        if (idn < 0)
            continue;
        zmq_getsockopt(r->sock, ZMQ_RCVMORE, &more, &ml);
        if (!more || idn > MAX_ID)
            continue; /* not a message from a DEALER */
        zmq_msg_t frame;
        zmq_msg_init(&frame);
        if (zmq_msg_recv(&frame, r->sock, 0) < 0) {
            zmq_msg_close(&frame);
            continue;
        }
        int extra = zmq_msg_more(&frame);
        while (extra) { /* drop surplus frames */
            zmq_msg_t x;
            zmq_msg_init(&x);
            extra = zmq_msg_recv(&x, r->sock, 0) >= 0 && zmq_msg_more(&x);
            zmq_msg_close(&x);
        }
        struct msg m;
        const char *bad = decode(zmq_msg_data(&frame), zmq_msg_size(&frame), &m);
        if (bad == NULL && m.type != MSG_HELLO)
            bad = "expected a HELLO";
        if (bad != NULL) {
            zmq_msg_close(&frame);
            sl_error_set(err, SL_EPROTO, "rendezvous: malformed message on %s's endpoint (%s): %s", "rank 0",
                         o->bind ? o->bind : o->root, bad);
            return root_refuse(r, id, (size_t)idn, SL_EPROTO, WHY_DISAGREE, 0, err);
        }
        rc = root_hello(r, id, (size_t)idn, &m, err);
        zmq_msg_close(&frame);
        if (rc != 0)
            return rc;
    }
    size_t n = encode(r->buf, MSG_WELCOME, 0, (uint32_t)o->size, o->blob, (uint32_t)o->blob_len, NULL, 0);
    for (int k = 1; k < o->size; k++)
        root_send(r, k, r->buf, n);
    return 0;
}

static int run_root(const struct train_rendezvous_opts *o, void *ctx, uint64_t start, struct sl_error *err)
{
    struct root r = {.o = o};
    struct sl_curve_allow *allow = NULL;
    struct sl_zap *zap = NULL;
    const struct sl_zsock_opts zo = {.linger_ms = ROOT_LINGER_MS,
                                     .max_msg = MAX_FRAME + (o->curve != NULL ? CURVE_FRAME_EXTRA : 0)};
    const char *ep = o->bind ? o->bind : o->root;
    int rc;

    r.ids = sl_calloc((size_t)o->size, sizeof *r.ids);
    r.idlen = sl_calloc((size_t)o->size, sizeof *r.idlen);
    r.buf = sl_malloc(MAX_FRAME);
    if (r.ids == NULL || r.idlen == NULL || r.buf == NULL) {
        rc = sl_error_set(err, SL_ENOMEM, "rendezvous: out of memory");
        goto out_free;
    }
    if ((r.sock = sl_zsock_open(ctx, ZMQ_ROUTER, &zo, "rendezvous", err)) == NULL) {
        rc = SL_EIO;
        goto out_free;
    }
    if ((r.mon = sl_zsock_monitor_open(ctx, r.sock, ROOT_MONITOR, SL_HANDSHAKE_FAILED_EVENTS, "rendezvous", err)) ==
        NULL) {
        rc = SL_EIO;
        goto out_close;
    }
    if (o->curve != NULL && (rc = root_curve(o, ctx, r.sock, &allow, &zap, err)) != 0)
        goto out_close;
    /* an ipc socket file 0600: only this user's workers connect */
    if ((rc = sl_bind_private(r.sock, ep, NULL, err)) != 0) {
        sl_error_prefix(err, "rendezvous: ");
        goto out_close;
    }
    rc = root_loop(&r, start, err);
out_close:
    /* the ROUTER first: ZAP must outlive its listener (the WELCOMEs still
     * leaving need no handshake) */
    sl_zsock_monitor_close(r.sock, r.mon);
    sl_zap_stop(zap);
    sl_curve_allow_free(allow);
out_free:
    sl_free(r.buf);
    sl_free(r.idlen);
    sl_free(r.ids);
    return rc;
}

/* A peer's wait ended at `now` (the deadline, or rank 0 silent past
 * ROOT_SILENT_MS, capped at `cap`): the error that says which. */
static int peer_timed_out(const struct train_rendezvous_opts *o, uint64_t now, uint64_t start, uint64_t heard,
                          uint64_t cap, int missing, struct sl_error *err)
{
    char a[320], b[320];
    if (heard && now < cap)
        return sl_error_set(err, SL_ECLOSED, "rendezvous: %s stopped answering (silent for %.1f s)",
                            who(o, 0, a, sizeof a), secs(ROOT_SILENT_MS));
    if (heard && missing > 0)
        return sl_error_set(err, SL_ETIMEOUT,
                            "rendezvous: %s did not show up within %.1f s (%s was still waiting for it)",
                            who(o, missing, a, sizeof a), (double)(now - start) / 1e9, who(o, 0, b, sizeof b));
    return sl_error_set(err, SL_ETIMEOUT, "rendezvous: %s did not answer within %.1f s", who(o, 0, a, sizeof a),
                        (double)(now - start) / 1e9);
}

/* Rank 0's WELCOME m: its blob into blob_out (*blob_len), or the error when
 * it names another number of workers or a blob over blob_cap. */
static int take_welcome(const struct train_rendezvous_opts *o, const struct msg *m, void *blob_out, size_t blob_cap,
                        size_t *blob_len, struct sl_error *err)
{
    char a[320];
    if (m->size != (uint32_t)o->size)
        return sl_error_set(err, SL_EPROTO, "rendezvous: %s welcomed us into %u workers (expected %d)",
                            who(o, 0, a, sizeof a), m->size, o->size);
    if (m->a > blob_cap)
        return sl_error_set(err, SL_EINVAL, "rendezvous: %s sent a %u-byte blob, more than the %zu expected",
                            who(o, 0, a, sizeof a), m->a, blob_cap);
    if (m->a > 0)
        memcpy(blob_out, m->payload, m->a);
    *blob_len = m->a;
    return 0;
}

static int run_peer(const struct train_rendezvous_opts *o, void *ctx, uint64_t start, void *blob_out, size_t blob_cap,
                    size_t *blob_len, struct sl_error *err)
{
    const struct sl_zsock_opts zo = {.max_msg = MAX_FRAME + (o->curve != NULL ? CURVE_FRAME_EXTRA : 0)};
    const char *config = o->config ? o->config : "";
    char a[320];
    unsigned char *buf = sl_malloc(MAX_FRAME);
    void *sock = NULL, *mon = NULL;
    int rc;

    if (buf == NULL)
        return sl_error_set(err, SL_ENOMEM, "rendezvous: out of memory");
    if ((sock = sl_zsock_open(ctx, ZMQ_DEALER, &zo, "rendezvous", err)) == NULL) {
        rc = SL_EIO;
        goto out_free;
    }
    if ((mon = sl_zsock_monitor_open(ctx, sock, PEER_MONITOR, SL_HANDSHAKE_EVENTS, "rendezvous", err)) == NULL) {
        rc = SL_EIO;
        goto out_close;
    }
    if (o->curve != NULL && (rc = sl_curve_client(sock, o->curve, o->curve->public_z85, err)) != 0) {
        sl_error_prefix(err, "rendezvous: ");
        goto out_close;
    }
    if ((rc = sl_endpoint_connect(sock, o->root, err)) != 0) {
        sl_error_prefix(err, "rendezvous: ");
        goto out_close;
    }
    size_t n = encode(buf, MSG_HELLO, (uint32_t)o->rank, (uint32_t)o->size, o->job, (uint32_t)strlen(o->job), config,
                      (uint32_t)strlen(config));
    if (zmq_send(sock, buf, n, 0) < 0) {
        rc = sl_error_set(err, SL_EIO, "rendezvous: cannot send to %s: %s", who(o, 0, a, sizeof a),
                          zmq_strerror(zmq_errno()));
        goto out_close;
    }
    uint64_t deadline = start + (uint64_t)o->timeout_ms * 1000000u;
    uint64_t cap = deadline + (uint64_t)EXTRA_WAIT_MS * 1000000u;
    uint64_t heard = 0; /* when rank 0 last spoke; 0: never */
    int missing = 0;
    struct sl_handshake hs;
    sl_handshake_init(&hs, SL_HANDSHAKE_PEERS, o->curve != NULL);
    for (;;) {
        uint64_t now = sl_clock_ns();
        if (o->stop != NULL && *o->stop) {
            rc = sl_error_set(err, SL_ECLOSED, "rendezvous: stopped by a signal");
            goto out_close;
        }
        uint64_t alive = heard + (uint64_t)ROOT_SILENT_MS * 1000000u;
        uint64_t until = !heard ? deadline : alive < cap ? alive : cap;
        uint64_t hs_due = sl_handshake_due(&hs);
        if (now >= until) {
            rc = peer_timed_out(o, now, start, heard, cap, missing, err);
            goto out_close;
        }
        uint64_t wake = hs_due != 0 && hs_due < until ? hs_due : until;
        zmq_pollitem_t it[2] = {{sock, 0, ZMQ_POLLIN, 0}, {mon, 0, ZMQ_POLLIN, 0}};
        rc = zmq_poll(it, 2, poll_ms(o, wake > now ? wake - now : 0));
        if (rc < 0 && zmq_errno() == EINTR)
            continue;
        if (rc < 0) {
            rc = sl_error_set(err, SL_EIO, "rendezvous: zmq_poll: %s", zmq_strerror(zmq_errno()));
            goto out_close;
        }
        if (it[1].revents & ZMQ_POLLIN)
            sl_handshake_read(&hs, mon, sl_clock_ns());
        if (sl_handshake_failed(&hs, sl_clock_ns())) {
            rc = sl_handshake_peers_error(&hs, "rendezvous", who(o, 0, a, sizeof a), err);
            goto out_close;
        }
        if (!(it[0].revents & ZMQ_POLLIN))
            continue;
        zmq_msg_t frame;
        struct msg m;
        zmq_msg_init(&frame);
        if (zmq_msg_recv(&frame, sock, 0) < 0) {
            zmq_msg_close(&frame);
            continue;
        }
        const char *bad =
            zmq_msg_more(&frame) ? "more than one frame" : decode(zmq_msg_data(&frame), zmq_msg_size(&frame), &m);
        if (bad == NULL && m.type == MSG_HELLO)
            bad = "unexpected HELLO";
        if (bad != NULL) {
            zmq_msg_close(&frame);
            rc = sl_error_set(err, SL_EPROTO, "rendezvous: malformed message from %s: %s", who(o, 0, a, sizeof a), bad);
            goto out_close;
        }
        heard = sl_clock_ns();
        if (m.type == MSG_STATUS) {
            missing = m.rank > 0 && m.rank < (uint32_t)o->size ? (int)m.rank : 0;
            zmq_msg_close(&frame);
            continue;
        }
        if (m.type == MSG_REFUSE) {
            rc = sl_error_set(err, m.size == WHY_TIMEOUT ? SL_ETIMEOUT : SL_EPROTO, "%.*s (reported by %s)", (int)m.a,
                              (const char *)m.payload, who(o, 0, a, sizeof a));
            zmq_msg_close(&frame);
            goto out_close;
        }
        rc = take_welcome(o, &m, blob_out, blob_cap, blob_len, err);
        zmq_msg_close(&frame);
        goto out_close;
    }
out_close:
    sl_zsock_monitor_close(sock, mon);
out_free:
    sl_free(buf);
    return rc;
}

int train_rendezvous(const struct train_rendezvous_opts *o, void *blob_out, size_t blob_cap, size_t *blob_len,
                     struct sl_error *err)
{
    uint64_t start = sl_clock_ns();
    struct train_rendezvous_opts oo;

    if (blob_len != NULL)
        *blob_len = 0;
    if (o == NULL || blob_len == NULL || (blob_cap > 0 && blob_out == NULL))
        return sl_error_set(err, SL_EINVAL, "rendezvous: NULL argument");
    if (o->size < 1 || o->size > TRAIN_RENDEZVOUS_MAX_SIZE || o->rank < 0 || o->rank >= o->size)
        return sl_error_set(err, SL_EINVAL, "rendezvous: rank %d of %d (expected 0 <= rank < size <= %d)", o->rank,
                            o->size, TRAIN_RENDEZVOUS_MAX_SIZE);
    if (o->job == NULL || strlen(o->job) > TRAIN_RENDEZVOUS_MAX_JOB)
        return sl_error_set(err, SL_EINVAL, "rendezvous: job name missing or longer than %d bytes",
                            TRAIN_RENDEZVOUS_MAX_JOB);
    if (o->config != NULL && strlen(o->config) > TRAIN_RENDEZVOUS_MAX_CONFIG)
        return sl_error_set(err, SL_EINVAL, "rendezvous: config longer than %d bytes", TRAIN_RENDEZVOUS_MAX_CONFIG);
    if (o->timeout_ms < 0)
        return sl_error_set(err, SL_EINVAL, "rendezvous: negative timeout");
    if (o->rank == 0 && (o->blob_len > TRAIN_RENDEZVOUS_MAX_BLOB || (o->blob_len > 0 && o->blob == NULL)))
        return sl_error_set(err, SL_EINVAL, "rendezvous: blob of %zu bytes (at most %d)", o->blob_len,
                            TRAIN_RENDEZVOUS_MAX_BLOB);
    if (o->rank == 0 && o->blob_len > blob_cap)
        return sl_error_set(err, SL_EINVAL, "rendezvous: blob of %zu bytes does not fit the %zu-byte buffer",
                            o->blob_len, blob_cap);
    if (o->size > 1 && (o->root == NULL || o->root[0] == '\0'))
        return sl_error_set(err, SL_EINVAL, "rendezvous: no root endpoint");
    oo = *o;
    if (oo.timeout_ms == 0)
        oo.timeout_ms = TRAIN_RENDEZVOUS_DEFAULT_TIMEOUT_MS;

    int rc = 0;
    if (o->size > 1) {
        void *ctx = zmq_ctx_new();
        if (ctx == NULL)
            return sl_error_sys(err, errno, "rendezvous: zmq_ctx_new");
        rc = o->rank == 0 ? run_root(&oo, ctx, start, err)
                          : run_peer(&oo, ctx, start, blob_out, blob_cap, blob_len, err);
        /* rank 0: waits (up to the linger) for the last WELCOMEs or REFUSEs */
        while (zmq_ctx_term(ctx) < 0 && zmq_errno() == EINTR) {
        }
    }
    if (rc == 0 && o->rank == 0) {
        if (o->blob_len > 0)
            memcpy(blob_out, o->blob, o->blob_len);
        *blob_len = o->blob_len;
    }
    return rc;
}
