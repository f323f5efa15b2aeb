/* train_ring: ring all-reduce over ZeroMQ.
 *
 * Each rank binds a PULL socket on its own endpoint (its predecessor is the
 * only peer that connects to it) and connects a PUSH socket to its
 * successor's endpoint. PUSH/PULL fits a ring: traffic only flows one way,
 * each socket has exactly one peer, a send never waits for the receiver's
 * application (so every rank can send and then receive in the same step
 * without deadlock), and no routing identities are needed. A socket monitor
 * on the PULL tells us at once when the predecessor's connection drops (a
 * process that dies), so we need not wait out the timeout in that case.
 *
 * all_reduce splits buf into P chunks, chunk c = [c*n/P, (c+1)*n/P). In
 * reduce-scatter step s (0 .. P-2) rank r sends chunk (r-s) mod P and adds
 * the chunk (r-s-1) mod P it receives into its own; chunk c therefore sums
 * x[c] + x[c+1] + ... + x[c+P-1] (ranks mod P) in exactly that order and is
 * complete on rank c-1. In all-gather step s (P-1 .. 2P-3) the finished
 * chunks travel round the ring again and are copied, so every rank holds
 * the same bits, and the same bits on every run of the same cluster.
 *
 * open runs a rendezvous: P-1 rounds in which each rank forwards the JOIN
 * it received in the previous round (its own in round 0), so after round k
 * a rank has heard from rank r-1-k; a missing rank is named by whoever
 * waits for its JOIN.
 *
 * With CURVE (opts.curve) every rank holds the job's one trainer key pair.
 * The PULL is a CURVE server with it, and a ZAP handler on the ring's
 * context (sl_zap) accepts exactly its public key; the PUSH is a CURVE
 * client with the same pair and that public key as the server's. A rank
 * with another key therefore cannot complete a handshake either way: its
 * PUSH encrypts for a server key its successor does not have, and its
 * predecessor does the same to it. A second monitor, on the PUSH, sees
 * our own connection's handshake fail and breaks the ring at once, naming
 * the successor (its address is ours to trust: we chose it). A failed
 * handshake on the PULL is only counted: anyone who can reach our port can
 * cause one, so it must not stop the job, but when the predecessor then
 * does not join in time the message says how many there were.
 *
 * A rank that fails (timeout, disconnect, protocol error) sends an ABORT
 * naming the culprit to its successor, which forwards it, so every rank
 * fails promptly with the same diagnosis instead of timing out on an
 * innocent neighbour. For that diagnosis to come from the right rank, a
 * rank kept waiting inside all_reduce sends a HEARTBEAT to its successor
 * every timeout/4: a predecessor that is silent but heartbeating is itself
 * waiting upstream, so we keep waiting (up to twice the timeout) for the
 * ABORT of the rank that sits right after the culprit. Only a predecessor
 * silent in every way for timeout_ms is named.
 *
 * Message framing (two ZeroMQ frames):
 *   frame 1, header, 40 bytes, integers little-endian, encoded field by field:
 *     0  magic    4 bytes "SLR1"
 *     4  version  u16 (1)
 *     6  type     u16 (1 JOIN, 2 DATA, 3 ABORT, 4 HEARTBEAT)
 *     8  sender   u32 rank that sent this message
 *     12 step     u32 DATA: step 0 .. 2P-3; JOIN: round; ABORT: reporting rank
 *     16 seq      u64 DATA, HEARTBEAT: all_reduce call number, from 1; else 0
 *     24 chunk    u32 DATA: chunk index; JOIN: joining rank; ABORT: culprit rank
 *     28 detail   u32 ABORT: reason (1 did not join, 2 silent, 3 went away,
 *                     4 protocol error, 5 could not send, 6 did not join
 *                     and CURVE handshakes failed); else 0
 *     32 bytes    u64 length of frame 2
 *   frame 2, payload: DATA: the chunk as IEEE-754 binary32 values,
 *     little-endian; JOIN, ABORT and HEARTBEAT: empty.
 * Every field is checked against what the step expects; the payload length
 * must equal the expected chunk size (and ZMQ_MAXMSGSIZE bounds any frame).
 */
#include "train_ring.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
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

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "train_ring sends floats in host order; add byte swapping for big-endian hosts"
#endif

#define RING_VERSION 1
#define HDR_LEN 40
#define DEFAULT_TIMEOUT_MS 10000
#define DEFAULT_MAX_MESSAGE (UINT64_C(1) << 30)
#define BROKEN_LINGER_MS 500
#define MONITOR_ADDR "inproc://sl-ring-monitor"
#define PUSH_MONITOR_ADDR "inproc://sl-ring-monitor-push"
#define CURVE_FRAME_EXTRA 64     /* a CURVE MESSAGE's bytes around a frame's data: 33 */
#define CURVE_HANDSHAKE_MAX 1024 /* room for CURVE's handshake commands */
#define PENDING_MAX 32           /* connections to the PULL tracked before their handshake */

enum { MSG_JOIN = 1, MSG_DATA = 2, MSG_ABORT = 3, MSG_HEARTBEAT = 4 };
enum { WHY_JOIN = 1, WHY_SILENT = 2, WHY_GONE = 3, WHY_PROTO = 4, WHY_SEND = 5, WHY_KEY = 6 };

struct hdr {
    uint32_t type;
    uint32_t sender;
    uint32_t step;
    uint64_t seq;
    uint32_t chunk;
    uint32_t detail;
    uint64_t bytes;
};

struct train_ring {
    int rank, size, pred, succ;
    int timeout_ms, connect_timeout_ms;
    volatile sig_atomic_t *stop; /* opts.stop */
    uint64_t max_bytes;
    char **eps; /* [size], owned */
    char *bind; /* owned; NULL: bind eps[rank] */
    void *ctx;
    void *push;                    /* to the successor */
    void *pull;                    /* from the predecessor */
    void *mon;                     /* PAIR reading the PULL's monitor */
    void *pmon;                    /* PAIR reading the PUSH's monitor */
    int pred_gone;                 /* the predecessor's connection dropped */
    int curve;                     /* opts.curve was given */
    struct sl_curve_allow *allow;  /* CURVE: the one public key, for zap */
    struct sl_zap *zap;            /* CURVE: the ZAP handler of ctx */
    uint64_t pull_hs_failed;       /* failed handshakes on the PULL */
    uint32_t pending[PENDING_MAX]; /* fds accepted on the PULL, no handshake known */
    int npending;
    int unpinned;                /* handshakes succeeded among them, not pinned to one */
    int pull_failed_open;        /* failed handshakes whose connection's DISCONNECTED has not come yet */
    struct sl_handshake push_hs; /* the PUSH's handshakes */
    uint64_t seq;                /* all_reduce calls made */
    struct sl_error fail;        /* code != 0: the ring is broken, with this error */
};

static void hdr_encode(unsigned char *p, const struct hdr *h)
{
    struct sl_writer w = sl_writer_make(p, HDR_LEN);
    sl_write_bytes(&w, "SLR1", 4);
    sl_write_u16(&w, RING_VERSION);
    sl_write_u16(&w, (uint16_t)h->type);
    sl_write_u32(&w, h->sender);
    sl_write_u32(&w, h->step);
    sl_write_u64(&w, h->seq);
    sl_write_u32(&w, h->chunk);
    sl_write_u32(&w, h->detail);
    sl_write_u64(&w, h->bytes);
}

/* 0, or a short reason the header is unusable. */
static const char *hdr_decode(const unsigned char *p, struct hdr *h)
{
    struct sl_reader r = sl_reader_make(p, HDR_LEN);
    const uint8_t *magic = sl_read_bytes(&r, 4);
    uint16_t version = 0, type = 0;
    if (magic == NULL || memcmp(magic, "SLR1", 4) != 0)
        return "bad magic";
    if (sl_read_u16(&r, &version) != 0 || version != RING_VERSION)
        return "unsupported version";
    (void)sl_read_u16(&r, &type);
    h->type = type;
    (void)sl_read_u32(&r, &h->sender);
    (void)sl_read_u32(&r, &h->step);
    (void)sl_read_u64(&r, &h->seq);
    (void)sl_read_u32(&r, &h->chunk);
    (void)sl_read_u32(&r, &h->detail);
    (void)sl_read_u64(&r, &h->bytes);
    if (r.bad) /* cannot happen: the layout is HDR_LEN long */
        return "truncated header";
    if (h->type < MSG_JOIN || h->type > MSG_HEARTBEAT)
        return "unknown message type";
    return NULL;
}

_Static_assert(HDR_LEN == TRAIN_RING_HDR_BYTES, "train_ring.h's header size");

const char *train_ring_hdr_check(const unsigned char *p, unsigned char *back)
{
    struct hdr h;
    unsigned char head[HDR_LEN];
    const char *bad = hdr_decode(p, &h);
    if (bad == NULL) {
        hdr_encode(head, &h);
        memcpy(back, head, HDR_LEN);
    }
    return bad;
}

static double secs(int ms)
{
    return (double)ms / 1000.0;
}

static int send_msg(struct train_ring *r, const struct hdr *h, const void *payload, int flags)
{
    unsigned char head[HDR_LEN];
    static const unsigned char empty[1];

    hdr_encode(head, h);
    if (flags & ZMQ_DONTWAIT) {
        if (zmq_send(r->push, head, HDR_LEN, ZMQ_SNDMORE | flags) < 0)
            return -1;
    } else {
        /* a blocking send waits for room at most timeout_ms, and looks at
         * the stop flag every 250 ms (errno ECANCELED once it is set) */
        uint64_t deadline = sl_clock_ns() + (uint64_t)r->timeout_ms * 1000000u;
        while (zmq_send(r->push, head, HDR_LEN, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
            if (zmq_errno() != EAGAIN && zmq_errno() != EINTR)
                return -1;
            if (r->stop != NULL && *r->stop) {
                errno = ECANCELED;
                return -1;
            }
            uint64_t now = sl_clock_ns();
            if (now >= deadline) {
                errno = EAGAIN;
                return -1;
            }
            long ms = (long)((deadline - now + 999999) / 1000000);
            zmq_pollitem_t it = {r->push, 0, ZMQ_POLLOUT, 0};
            (void)zmq_poll(&it, 1, ms > 250 ? 250 : ms);
        }
    }
    /* Later parts of a message are never refused once the first is queued. */
    if (zmq_send(r->push, h->bytes ? payload : empty, (size_t)h->bytes, flags) < 0)
        return -1;
    return 0;
}

/* Best effort: tell the successor why we stopped, unless it is the one that
 * told us. */
static void send_abort(struct train_ring *r, uint32_t why, int culprit, int reporter)
{
    struct hdr h = {MSG_ABORT, (uint32_t)r->rank, (uint32_t)reporter, 0, (uint32_t)culprit, why, 0};

    if (r->succ != reporter)
        (void)send_msg(r, &h, NULL, ZMQ_DONTWAIT);
}

/* Break the ring with an error found here: record it, pass an ABORT on. */
static int ring_fail(struct train_ring *r, struct sl_error *err, int code, uint32_t why, int culprit, const char *fmt,
                     ...) SL_PRINTF(6, 7);

static int ring_fail(struct train_ring *r, struct sl_error *err, int code, uint32_t why, int culprit, const char *fmt,
                     ...)
{
    va_list ap;

    va_start(ap, fmt);
    sl_error_vset(&r->fail, code, fmt, ap);
    va_end(ap);
    if (err)
        *err = r->fail;
    if (why)
        send_abort(r, why, culprit, r->rank);
    return code;
}

/* Break the ring with an error another rank reported, and forward it. */
static int ring_aborted(struct train_ring *r, const struct hdr *h, struct sl_error *err)
{
    int culprit = (int)h->chunk;
    int reporter = (int)h->step;
    const char *ep;
    int code;

    if (h->chunk >= (uint32_t)r->size || h->step >= (uint32_t)r->size)
        return ring_fail(r, err, SL_EPROTO, WHY_PROTO, r->pred,
                         "ring: rank %d (%s) sent an ABORT naming rank %" PRIu32 " reported by rank %" PRIu32
                         " (ring size %d)",
                         r->pred, r->eps[r->pred], h->chunk, h->step, r->size);
    ep = r->eps[culprit];
    switch (h->detail) {
    case WHY_JOIN:
        code =
            sl_error_set(&r->fail, SL_ETIMEOUT, "ring: rank %d (%s) did not join within %.1f s (reported by rank %d)",
                         culprit, ep, secs(r->connect_timeout_ms), reporter);
        break;
    case WHY_SILENT:
        code = sl_error_set(&r->fail, SL_ETIMEOUT, "ring: no data from rank %d (%s) for %.1f s (reported by rank %d)",
                            culprit, ep, secs(r->timeout_ms), reporter);
        break;
    case WHY_GONE:
        code = sl_error_set(&r->fail, SL_ECLOSED,
                            "ring: no data from rank %d (%s): connection closed (reported by rank %d)", culprit, ep,
                            reporter);
        break;
    case WHY_SEND:
        code =
            sl_error_set(&r->fail, SL_ETIMEOUT, "ring: rank %d (%s) accepted no data for %.1f s (reported by rank %d)",
                         culprit, ep, secs(r->timeout_ms), reporter);
        break;
    case WHY_KEY:
        code = sl_error_set(&r->fail, SL_ETIMEOUT,
                            "ring: rank %d (%s) did not join within %.1f s and handshakes on rank %d's "
                            "endpoint failed: the workers do not share one trainer key (--curve-key) "
                            "(reported by rank %d)",
                            culprit, ep, secs(r->connect_timeout_ms), reporter, reporter);
        break;
    default:
        code =
            sl_error_set(&r->fail, SL_EPROTO, "ring: rank %d (%s) reported a protocol error in what rank %d (%s) sent",
                         reporter, r->eps[reporter], culprit, ep);
        break;
    }
    if (err)
        *err = r->fail;
    send_abort(r, h->detail, culprit, reporter);
    return code;
}

/* Drain the PULL's monitor; note when the predecessor's connection drops,
 * count failed handshakes.
 *
 * Anyone who can reach our port can open a connection and close it (a port
 * scan, garbage, a client of another key): that is not the predecessor
 * going away. libzmq reports each connection as ACCEPTED (its fd), then
 * maybe a handshake's success (without the fd) or failure (right before
 * that connection's DISCONNECTED), then DISCONNECTED (the fd). So the
 * accepted fds not known to have completed a handshake are kept, with the
 * number of successes among them not yet pinned to one. A failure's
 * DISCONNECTED is not always the next event (a CURVE server whose ZAP
 * handler refused a key reports the failure, sends the client an ERROR
 * and sees the close when the client hangs up, with other connections'
 * events between), so failures are counted until a DISCONNECTED takes
 * each. A pending fd that disconnects while a failure is open, or while no
 * success is unpinned, never carried the predecessor's messages; when the successes unpinned are as
 * many as the fds pending, those are all handshaken (forgotten: their loss
 * counts). Only when a pending fd disconnects without a failure while a
 * success is unpinned is it taken for the predecessor (the ring fails
 * fast, as it did before). */
static void read_monitor(struct train_ring *r)
{
    uint16_t event;
    uint32_t value;

    while (sl_zsock_monitor_event(r->mon, &event, &value)) {
        int at = -1;

        for (int i = 0; i < r->npending && at < 0; i++)
            if (r->pending[i] == value)
                at = i;
        if (event == ZMQ_EVENT_ACCEPTED) {
            if (r->npending == PENDING_MAX) { /* forget the oldest: its loss counts */
                memmove(r->pending, r->pending + 1, (PENDING_MAX - 1) * sizeof r->pending[0]);
                r->npending--;
                if (r->unpinned > r->npending)
                    r->unpinned = r->npending;
            }
            r->pending[r->npending++] = value;
        } else if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
            if (r->unpinned < r->npending)
                r->unpinned++;
        } else if (event == ZMQ_EVENT_DISCONNECTED && at >= 0) {
            if (r->pull_failed_open > 0) { /* a failed one's */
                r->pull_failed_open--;
            } else if (r->unpinned > 0) { /* perhaps the handshaken one */
                r->pred_gone = 1;
                r->unpinned--;
            }
            memmove(r->pending + at, r->pending + at + 1, (size_t)(r->npending - at - 1) * sizeof r->pending[0]);
            r->npending--;
        } else if (event == ZMQ_EVENT_DISCONNECTED) {
            r->pred_gone = 1;
        } else if (event & SL_HANDSHAKE_FAILED_EVENTS) {
            r->pull_hs_failed++;
            r->pull_failed_open++;
        }
        if (r->unpinned > 0 && r->unpinned == r->npending)
            r->unpinned = r->npending = 0;
    }
}

/* Break the ring because our connection to the successor failed its
 * handshake (sl_handshake_failed said so). */
static int ring_handshake_failed(struct train_ring *r, struct sl_error *err)
{
    char peer[SL_ERROR_MSG_MAX / 2];
    struct sl_error why = {0};

    snprintf(peer, sizeof peer, "rank %d (%s)", r->succ, r->eps[r->succ]);
    sl_handshake_peers_error(&r->push_hs, "ring", peer, &why);
    return ring_fail(r, err, why.code, 0, 0, "%s", why.msg);
}

/* Read one message that zmq_poll says is waiting. */
static int recv_one(struct train_ring *r, struct hdr *h, zmq_msg_t *payload, struct sl_error *err)
{
    zmq_msg_t head;
    const char *bad = NULL;

    zmq_msg_init(&head);
    if (zmq_msg_recv(&head, r->pull, 0) < 0) {
        zmq_msg_close(&head);
        return ring_fail(r, err, SL_EIO, 0, 0, "ring: zmq_msg_recv: %s", zmq_strerror(zmq_errno()));
    }
    bad = zmq_msg_size(&head) != HDR_LEN ? "bad header length"
          : !zmq_msg_more(&head)         ? "header without payload"
                                         : hdr_decode(zmq_msg_data(&head), h);
    if (zmq_msg_more(&head)) {
        int more;

        zmq_msg_init(payload);
        if (zmq_msg_recv(payload, r->pull, 0) < 0) {
            zmq_msg_close(payload);
            zmq_msg_close(&head);
            return ring_fail(r, err, SL_EIO, 0, 0, "ring: zmq_msg_recv: %s", zmq_strerror(zmq_errno()));
        }
        more = zmq_msg_more(payload);
        if (!bad && more)
            bad = "more than two frames";
        if (!bad && zmq_msg_size(payload) != h->bytes)
            bad = "payload length differs from the header";
        if (bad)
            zmq_msg_close(payload);
        /* drop the surplus frames of a malformed message */
        while (more) {
            zmq_msg_t extra;

            zmq_msg_init(&extra);
            if (zmq_msg_recv(&extra, r->pull, ZMQ_DONTWAIT) < 0)
                more = 0;
            else
                more = zmq_msg_more(&extra);
            zmq_msg_close(&extra);
        }
    }
    zmq_msg_close(&head);
    if (bad)
        return ring_fail(r, err, SL_EPROTO, WHY_PROTO, r->pred, "ring: malformed message from rank %d (%s): %s",
                         r->pred, r->eps[r->pred], bad);
    if (h->type == MSG_ABORT) {
        zmq_msg_close(payload);
        return ring_aborted(r, h, err);
    }
    if (h->sender != (uint32_t)r->pred) {
        zmq_msg_close(payload);
        return ring_fail(r, err, SL_EPROTO, WHY_PROTO, r->pred,
                         "ring: message on rank %d's endpoint (%s) from rank %" PRIu32 " (expected rank %d)", r->rank,
                         r->eps[r->rank], h->sender, r->pred);
    }
    return 0;
}

/* Receive one message from the predecessor. It must come within silence_ns
 * of the start or of the predecessor's last HEARTBEAT, and before
 * start + cap_ns. With `beat` set we send our own heartbeats while waiting.
 * On 0 the caller owns *payload (initialised) and *h is decoded; on
 * SL_ETIMEOUT nothing came and *heard says whether heartbeats did; any other
 * error has broken the ring already. An ABORT breaks the ring here. */
static int recv_msg(struct train_ring *r, uint64_t silence_ns, uint64_t cap_ns, int beat, int *heard, struct hdr *h,
                    zmq_msg_t *payload, struct sl_error *err)
{
    zmq_pollitem_t items[3] = {{r->pull, 0, ZMQ_POLLIN, 0}, {r->mon, 0, ZMQ_POLLIN, 0}, {r->pmon, 0, ZMQ_POLLIN, 0}};
    uint64_t start = sl_clock_ns(), alive = start;
    uint64_t beat_ns = silence_ns / 4, next_beat = start + beat_ns;
    int rc;

    *heard = 0;
    for (;;) {
        uint64_t now = sl_clock_ns();
        uint64_t deadline = alive + silence_ns < start + cap_ns ? alive + silence_ns : start + cap_ns;
        uint64_t wake = beat && next_beat < deadline ? next_beat : deadline;
        uint64_t hs_due = sl_handshake_due(&r->push_hs);

        if (sl_handshake_failed(&r->push_hs, now))
            return ring_handshake_failed(r, err);
        if (hs_due != 0 && hs_due < wake)
            wake = hs_due;
        long wait_ms = now >= wake ? 0 : (long)((wake - now + 999999) / 1000000);

        if (r->stop != NULL && *r->stop)
            return ring_fail(r, err, SL_ECLOSED, 0, 0, "ring: stopped by a signal");
        if (r->stop != NULL && wait_ms > 250)
            wait_ms = 250;
        if (r->pred_gone)
            wait_ms = 0; /* whatever it sent is already queued */
        rc = zmq_poll(items, 3, wait_ms);
        if (rc < 0 && zmq_errno() == EINTR)
            continue;
        if (rc < 0)
            return ring_fail(r, err, SL_EIO, 0, 0, "ring: zmq_poll: %s", zmq_strerror(zmq_errno()));
        if (items[0].revents & ZMQ_POLLIN) {
            rc = recv_one(r, h, payload, err);
            if (rc < 0)
                return rc;
            if (h->type != MSG_HEARTBEAT)
                return 0;
            zmq_msg_close(payload);
            alive = sl_clock_ns();
            *heard = 1;
            continue;
        }
        if (items[1].revents & ZMQ_POLLIN) {
            read_monitor(r);
            continue; /* look at the PULL once more before judging */
        }
        if (items[2].revents & ZMQ_POLLIN) {
            sl_handshake_read(&r->push_hs, r->pmon, sl_clock_ns());
            continue; /* judged at the top */
        }
        if (r->pred_gone)
            return ring_fail(r, err, SL_ECLOSED, WHY_GONE, r->pred,
                             "ring: no data from rank %d (%s): connection closed", r->pred, r->eps[r->pred]);
        now = sl_clock_ns();
        if (now >= deadline)
            return SL_ETIMEOUT;
        if (beat && now >= next_beat) {
            struct hdr hb = {MSG_HEARTBEAT, (uint32_t)r->rank, 0, r->seq, 0, 0, 0};

            (void)send_msg(r, &hb, NULL, ZMQ_DONTWAIT);
            next_beat = now + beat_ns;
        }
    }
}

static int rendezvous(struct train_ring *r, uint64_t start_ns, struct sl_error *err)
{
    uint64_t deadline = start_ns + (uint64_t)r->connect_timeout_ms * 1000000u;
    struct hdr h = {MSG_JOIN, (uint32_t)r->rank, 0, 0, (uint32_t)r->rank, 0, 0};
    int rc;

    if (send_msg(r, &h, NULL, 0) < 0)
        return ring_fail(r, err, SL_EIO, 0, 0, "ring: cannot send to rank %d (%s): %s", r->succ, r->eps[r->succ],
                         zmq_strerror(zmq_errno()));
    for (int k = 0; k < r->size - 1; k++) {
        int origin = ((r->rank - 1 - k) % r->size + r->size) % r->size;
        struct hdr in;
        zmq_msg_t payload;

        uint64_t now = sl_clock_ns();
        int heard;

        rc = recv_msg(r, now < deadline ? deadline - now : 0, now < deadline ? deadline - now : 0, 0, &heard, &in,
                      &payload, err);
        if (rc == SL_ETIMEOUT && r->fail.code == 0 && r->pull_hs_failed > 0)
            return ring_fail(r, err, SL_ETIMEOUT, WHY_KEY, r->pred,
                             "ring: rank %d (%s) did not join within %.1f s and %" PRIu64
                             " %shandshake(s) on this rank's endpoint failed: %s",
                             r->pred, r->eps[r->pred], secs(r->connect_timeout_ms), r->pull_hs_failed,
                             r->curve ? "CURVE " : "",
                             r->curve ? "the workers do not share one trainer key (--curve-key), or one "
                                        "of them has none"
                                      : "a worker with a trainer key (--curve-key) where this one has none?");
        if (rc == SL_ETIMEOUT && r->fail.code == 0)
            return ring_fail(r, err, SL_ETIMEOUT, WHY_JOIN, origin, "ring: rank %d (%s) did not join within %.1f s",
                             origin, r->eps[origin], secs(r->connect_timeout_ms));
        if (rc < 0)
            return rc;
        zmq_msg_close(&payload);
        if (in.type != MSG_JOIN || in.step != (uint32_t)k || in.chunk != (uint32_t)origin || in.bytes != 0)
            return ring_fail(r, err, SL_EPROTO, WHY_PROTO, r->pred,
                             "ring: rank %d (%s) sent type %" PRIu32 " round %" PRIu32 " rank %" PRIu32
                             " while joining (expected JOIN round %d rank %d)",
                             r->pred, r->eps[r->pred], in.type, in.step, in.chunk, k, origin);
        if (k < r->size - 2) {
            h.step = (uint32_t)k + 1;
            h.chunk = (uint32_t)origin;
            if (send_msg(r, &h, NULL, 0) < 0)
                return ring_fail(r, err, SL_EIO, 0, 0, "ring: cannot send to rank %d (%s): %s", r->succ,
                                 r->eps[r->succ], zmq_strerror(zmq_errno()));
        }
    }
    return 0;
}

/* CURVE on both sockets, and the ZAP handler that lets in only holders of
 * the job's trainer key (before any bind or connect). */
static int make_curve(struct train_ring *r, const struct sl_curve_keys *k, struct sl_error *err)
{
    const char *pub = k->public_z85;
    int rc = sl_curve_allow_load(&r->allow, NULL, &pub, 1, err);

    if (rc == 0)
        rc = sl_zap_start(&r->zap, r->ctx, r->allow, "ring", err);
    if (rc == 0)
        rc = sl_curve_server(r->pull, k, err);
    if (rc == 0)
        rc = sl_curve_client(r->push, k, pub, err);
    if (rc != 0)
        sl_error_prefix(err, "ring: ");
    return rc;
}

static int make_sockets(struct train_ring *r, const struct sl_curve_keys *curve, struct sl_error *err)
{
    int64_t maxmsg = (int64_t)(r->max_bytes > HDR_LEN ? r->max_bytes : HDR_LEN);

    /* ZMQ_MAXMSGSIZE bounds every frame as it arrives: with CURVE a data
     * frame comes inside a MESSAGE command (33 bytes more), and the
     * handshake's own commands (INITIATE: about 300 bytes) too */
    if (curve != NULL)
        maxmsg = maxmsg > INT64_MAX - CURVE_FRAME_EXTRA             ? INT64_MAX
                 : maxmsg + CURVE_FRAME_EXTRA < CURVE_HANDSHAKE_MAX ? CURVE_HANDSHAKE_MAX
                                                                    : maxmsg + CURVE_FRAME_EXTRA;

    if ((r->ctx = zmq_ctx_new()) == NULL)
        return sl_error_sys(err, errno, "zmq_ctx_new");
    const struct sl_zsock_opts pull = {.max_msg = maxmsg},
                               push = {.linger_ms = r->timeout_ms, .send_timeout_ms = r->timeout_ms};
    if ((r->pull = sl_zsock_open(r->ctx, ZMQ_PULL, &pull, "ring: the receiving socket", err)) == NULL ||
        (r->push = sl_zsock_open(r->ctx, ZMQ_PUSH, &push, "ring: the sending socket", err)) == NULL)
        return SL_EIO;
    if ((r->mon = sl_zsock_monitor_open(r->ctx, r->pull, MONITOR_ADDR,
                                        ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED |
                                            SL_HANDSHAKE_FAILED_EVENTS,
                                        "ring", err)) == NULL ||
        (r->pmon = sl_zsock_monitor_open(r->ctx, r->push, PUSH_MONITOR_ADDR, SL_HANDSHAKE_EVENTS, "ring", err)) == NULL)
        return SL_EIO;
    if (curve != NULL) {
        int rc = make_curve(r, curve, err);
        if (rc != 0)
            return rc;
    }
    const char *bind = r->bind ? r->bind : r->eps[r->rank];
    /* an ipc socket file 0600: only this user's workers connect */
    int brc = sl_bind_private(r->pull, bind, NULL, err);
    if (brc != 0) {
        sl_error_prefix(err, "ring: ");
        return brc;
    }
    if (sl_endpoint_connect(r->push, r->eps[r->succ], err) != 0)
        return sl_error_prefix(err, "ring: ");
    return 0;
}

int train_ring_open(struct train_ring **out, const struct train_ring_opts *o, struct sl_error *err)
{
    uint64_t start = sl_clock_ns();
    struct train_ring *r;
    int rc;

    *out = NULL;
    if (o->size < 1 || o->size > TRAIN_RING_MAX_SIZE)
        return sl_error_set(err, SL_EINVAL, "ring: size %d (expected 1 .. %d)", o->size, TRAIN_RING_MAX_SIZE);
    if (o->rank < 0 || o->rank >= o->size)
        return sl_error_set(err, SL_EINVAL, "ring: rank %d (expected 0 .. %d)", o->rank, o->size - 1);
    if (o->timeout_ms < 0 || o->connect_timeout_ms < 0)
        return sl_error_set(err, SL_EINVAL, "ring: negative timeout");
    if (!o->endpoints)
        return sl_error_set(err, SL_EINVAL, "ring: no endpoints");
    for (int i = 0; i < o->size; i++)
        if (!o->endpoints[i] || !o->endpoints[i][0])
            return sl_error_set(err, SL_EINVAL, "ring: endpoint of rank %d is empty", i);

    if ((r = sl_calloc(1, sizeof *r)) == NULL)
        return sl_error_set(err, SL_ENOMEM, "ring: out of memory");
    r->rank = o->rank;
    r->size = o->size;
    r->pred = (o->rank + o->size - 1) % o->size;
    r->succ = (o->rank + 1) % o->size;
    r->timeout_ms = o->timeout_ms ? o->timeout_ms : DEFAULT_TIMEOUT_MS;
    r->stop = o->stop;
    r->curve = o->curve != NULL;
    sl_handshake_init(&r->push_hs, SL_HANDSHAKE_PEERS, r->curve);
    r->connect_timeout_ms = o->connect_timeout_ms ? o->connect_timeout_ms : DEFAULT_TIMEOUT_MS;
    r->max_bytes = o->max_message_bytes ? o->max_message_bytes : DEFAULT_MAX_MESSAGE;
    if (r->max_bytes > INT64_MAX)
        r->max_bytes = INT64_MAX;
    if ((r->eps = sl_calloc((size_t)r->size, sizeof *r->eps)) == NULL) {
        train_ring_close(r);
        return sl_error_set(err, SL_ENOMEM, "ring: out of memory");
    }
    for (int i = 0; i < r->size; i++) {
        if ((r->eps[i] = sl_strdup(o->endpoints[i])) == NULL) {
            train_ring_close(r);
            return sl_error_set(err, SL_ENOMEM, "ring: out of memory");
        }
    }
    if (o->bind && (r->bind = sl_strdup(o->bind)) == NULL) {
        train_ring_close(r);
        return sl_error_set(err, SL_ENOMEM, "ring: out of memory");
    }
    if (r->size > 1) {
        rc = make_sockets(r, o->curve, err);
        if (rc == 0)
            rc = rendezvous(r, start, err);
        if (rc < 0) {
            r->fail.code = rc; /* short linger on the way out */
            train_ring_close(r);
            return rc;
        }
    }
    *out = r;
    return 0;
}

static size_t chunk_lo(size_t n, int size, int c)
{
    return (size_t)(((uint64_t)n * (uint64_t)c) / (uint64_t)size);
}

/* One step: send chunk `out_c`, receive chunk `in_c` and add it (reduce) or
 * copy it (gather) into buf. */
static int ring_step(struct train_ring *r, float *buf, size_t n, uint32_t step, int out_c, int in_c, int add,
                     struct sl_error *err)
{
    size_t olo = chunk_lo(n, r->size, out_c), ohi = chunk_lo(n, r->size, out_c + 1);
    size_t ilo = chunk_lo(n, r->size, in_c), ihi = chunk_lo(n, r->size, in_c + 1);
    struct hdr h = {
        MSG_DATA, (uint32_t)r->rank, step, r->seq, (uint32_t)out_c, 0, (uint64_t)(ohi - olo) * sizeof(float)};
    uint64_t want = (uint64_t)(ihi - ilo) * sizeof(float);
    uint64_t silence = (uint64_t)r->timeout_ms * 1000000u;
    int heard;
    struct hdr in;
    zmq_msg_t payload;
    const unsigned char *p;
    int rc;

    /* an empty chunk sends no bytes, and buf may be NULL when n is 0 */
    if (send_msg(r, &h, ohi > olo ? buf + olo : NULL, 0) < 0) {
        if (r->stop != NULL && *r->stop)
            return ring_fail(r, err, SL_ECLOSED, 0, 0, "ring: stopped by a signal");
        if (zmq_errno() == EAGAIN)
            return ring_fail(r, err, SL_ETIMEOUT, WHY_SEND, r->succ, "ring: rank %d (%s) accepted no data for %.1f s",
                             r->succ, r->eps[r->succ], secs(r->timeout_ms));
        return ring_fail(r, err, SL_EIO, 0, 0, "ring: cannot send to rank %d (%s): %s", r->succ, r->eps[r->succ],
                         zmq_strerror(zmq_errno()));
    }
    rc = recv_msg(r, silence, 2 * silence, 1, &heard, &in, &payload, err);
    if (rc == SL_ETIMEOUT && r->fail.code == 0 && heard)
        return ring_fail(r, err, SL_ETIMEOUT, WHY_SILENT, r->pred,
                         "ring: no data from rank %d (%s) for %.1f s (it was waiting too, "
                         "and no rank upstream reported why)",
                         r->pred, r->eps[r->pred], 2 * secs(r->timeout_ms));
    if (rc == SL_ETIMEOUT && r->fail.code == 0)
        return ring_fail(r, err, SL_ETIMEOUT, WHY_SILENT, r->pred, "ring: no data from rank %d (%s) for %.1f s",
                         r->pred, r->eps[r->pred], secs(r->timeout_ms));
    if (rc < 0)
        return rc;
    if (in.type != MSG_DATA || in.seq != r->seq || in.step != step || in.chunk != (uint32_t)in_c || in.bytes != want) {
        zmq_msg_close(&payload);
        return ring_fail(
            r, err, SL_EPROTO, WHY_PROTO, r->pred,
            "ring: rank %d (%s) sent type %" PRIu32 " call %" PRIu64 " step %" PRIu32 " chunk %" PRIu32 " of %" PRIu64
            " bytes (expected DATA call %" PRIu64 " step %" PRIu32 " chunk %d of %" PRIu64 " bytes)",
            r->pred, r->eps[r->pred], in.type, in.seq, in.step, in.chunk, in.bytes, r->seq, step, in_c, want);
    }
    /* ZeroMQ may hand us an unaligned buffer: read each float with memcpy. */
    p = zmq_msg_data(&payload);
    if (add) {
        for (size_t i = ilo; i < ihi; i++) {
            float v;
            memcpy(&v, p + (i - ilo) * sizeof v, sizeof v);
            buf[i] = buf[i] + v;
        }
    } else if (ihi > ilo) {
        memcpy(buf + ilo, p, (ihi - ilo) * sizeof(float));
    }
    zmq_msg_close(&payload);
    return 0;
}

int train_ring_all_reduce(struct train_ring *r, float *buf, size_t n, enum train_ring_op op, struct sl_error *err)
{
    int P = r->size;
    int rc;

    if (r->fail.code) {
        if (err)
            *err = r->fail;
        return r->fail.code;
    }
    if (op != TRAIN_RING_SUM && op != TRAIN_RING_MEAN)
        return sl_error_set(err, SL_EINVAL, "ring: unknown reduction %d", (int)op);
    if (n > SIZE_MAX / sizeof(float) / TRAIN_RING_MAX_SIZE ||
        (uint64_t)(n / (size_t)P + 1) * sizeof(float) > r->max_bytes)
        return sl_error_set(err, SL_EINVAL, "ring: %zu floats make chunks over the %" PRIu64 "-byte message limit", n,
                            r->max_bytes);
    if (n > 0 && !buf)
        return sl_error_set(err, SL_EINVAL, "ring: no buffer");
    if (P > 1) {
        r->seq++;
        for (int s = 0; s < P - 1; s++) {
            rc = ring_step(r, buf, n, (uint32_t)s, (r->rank - s + P) % P, (r->rank - s - 1 + 2 * P) % P, 1, err);
            if (rc < 0)
                return rc;
        }
        for (int s = 0; s < P - 1; s++) {
            rc = ring_step(r, buf, n, (uint32_t)(P - 1 + s), (r->rank + 1 - s + P) % P, (r->rank - s + P) % P, 0, err);
            if (rc < 0)
                return rc;
        }
    }
    if (op == TRAIN_RING_MEAN) {
        float div = (float)P;
        for (size_t i = 0; i < n; i++)
            buf[i] = buf[i] / div;
    }
    return 0;
}

void train_ring_close(struct train_ring *r)
{
    if (!r)
        return;
    /* a broken ring, or one a signal stopped (its peers learn of it by their
     * own failure detection): what is still queued is not waited for long */
    if (r->push && (r->fail.code || (r->stop != NULL && *r->stop)))
        sl_zsock_linger(r->push, r->timeout_ms < BROKEN_LINGER_MS ? r->timeout_ms : BROKEN_LINGER_MS);
    /* Stop the monitor and read what it still holds before closing: an
     * event message left in the monitor's pipe is leaked by libzmq 4.3
     * (LeakSanitizer saw the 92-byte frame of a DISCONNECTED event). */
    sl_zsock_monitor_close(r->pull, r->mon);
    sl_zsock_monitor_close(r->push, r->pmon);
    sl_zap_stop(r->zap); /* before the context's end, which waits for its socket */
    if (r->ctx) {
        while (zmq_ctx_term(r->ctx) < 0 && zmq_errno() == EINTR) {
        }
    }
    if (r->eps) {
        for (int i = 0; i < r->size; i++)
            sl_free(r->eps[i]);
        sl_free(r->eps);
    }
    if (r->allow)
        sl_curve_allow_free(r->allow);
    sl_free(r->bind);
    sl_free(r);
}

/* --- the "ring" train_coll backend: one member per process --- */

struct ring_member {
    struct train_coll base;
    struct train_ring *ring; /* borrowed */
    struct train__coll_failure aborted;
};

static struct ring_member *ring_of(struct train_coll *c)
{
    return (struct ring_member *)c;
}

static int ring_coll_all_reduce(struct train_coll *c, float *buf, size_t n, struct sl_error *err)
{
    struct ring_member *m = ring_of(c);
    int rc = train__coll_failed(&m->aborted, err);
    return rc != 0 ? rc : train_ring_all_reduce(m->ring, buf, n, TRAIN_RING_SUM, err);
}

/* The ring has no broadcast message: the root's values travel as a sum with
 * zeros from every other rank. */
static int ring_coll_broadcast(struct train_coll *c, float *buf, size_t n, int root, struct sl_error *err)
{
    if (c->rank != root && n > 0)
        memset(buf, 0, n * sizeof *buf);
    return ring_coll_all_reduce(c, buf, n, err);
}

static void ring_coll_abort(struct train_coll *c, int code, const char *msg)
{
    train__coll_fail(&ring_of(c)->aborted, code, msg);
}

static void ring_coll_destroy(struct train_coll *c)
{
    sl_free(c);
}

static const struct train_coll_ops ring_coll_ops = {
    .name = "ring",
    .all_reduce = ring_coll_all_reduce,
    .broadcast = ring_coll_broadcast,
    .abort = ring_coll_abort,
    .destroy = ring_coll_destroy,
};

int train_ring_coll_open(struct train_coll **out, struct train_ring *r, struct sl_error *err)
{
    *out = NULL;
    struct ring_member *m = sl_calloc(1, sizeof *m);
    if (m == NULL)
        return sl_error_set(err, SL_ENOMEM, "ring collective: out of memory");
    m->base = (struct train_coll){.ops = &ring_coll_ops, .rank = r->rank, .size = r->size, .mem = TRAIN_COLL_HOST};
    m->ring = r;
    *out = &m->base;
    return 0;
}
