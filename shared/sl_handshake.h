/* train_handshake: telling from a connecting socket's monitor that the two
 * ends of one of the trainers' links (the ring, the rendezvous) disagree on
 * CURVE (issue #16; docs/security.md, "The trainers' links").
 *
 * What libzmq 4.3 reports to the connecting side:
 *   - the other end uses another mechanism (CURVE against none): a
 *     ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL with
 *     ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH, unless the other end
 *     found the mismatch first and closed the connection (then as below);
 *   - the server's ZAP handler refused our key: ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
 *   - the server holds another key than the one we encrypt for: it cannot
 *     open our HELLO and closes the connection, and we see
 *     ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL, which is also what a peer
 *     going away in the middle of a handshake, or a proxy closing a
 *     connection, looks like.
 * So a protocol failure or a refusal is a verdict at once; a failure
 * without detail is one when it happens TRAIN_HANDSHAKE_NODETAIL times or
 * is not followed by a successful handshake within TRAIN_HANDSHAKE_GRACE_MS
 * (the other end, a worker that failed the same way, may have left). Once
 * a handshake has succeeded the key is known to be shared and failures
 * without detail no longer count. The same holds without CURVE, where a
 * failure without detail is most likely a CURVE server that found the
 * mismatch first.
 *
 * Thread-safety: none; a value owned by the socket's thread.
 */
#ifndef TRAIN_HANDSHAKE_H
#define TRAIN_HANDSHAKE_H

#include <stdint.h>

#include "sl_error.h"

#define TRAIN_HANDSHAKE_NODETAIL 3 /* ZeroMQ retries every 100 ms */
#define TRAIN_HANDSHAKE_GRACE_MS 1000

/* The events a connecting socket's monitor needs (zmq_socket_monitor). */
#define TRAIN_HANDSHAKE_EVENTS                                                                                      \
    (ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | \
     ZMQ_EVENT_HANDSHAKE_SUCCEEDED)

/* All-zero, then .curve set: the state of one connecting socket. */
struct train_handshake {
    int curve;         /* this end uses CURVE */
    int ok;            /* a handshake succeeded */
    int nodetail;      /* failures without detail since the last success */
    uint64_t first_ns; /* sl_clock_ns of the first of those; 0: none */
    uint16_t event;    /* the verdict's event; 0: none yet */
    uint32_t value;    /* and its value */
};

/* The next event of a monitor PAIR (libzmq 4.3's two-frame events):
 * 1 with *event and *value, 0 when none is waiting. */
int train_monitor_event(void *mon, uint16_t *event, uint32_t *value);

/* Read every event waiting on the connecting socket's monitor `mon`. */
void train_handshake_read(struct train_handshake *h, void *mon, uint64_t now_ns);

/* 1 when the two ends disagree (a verdict now, or a failure without detail
 * past its grace), else 0. */
int train_handshake_failed(struct train_handshake *h, uint64_t now_ns);

/* When a pending failure without detail becomes a verdict (sl_clock_ns),
 * for the caller's poll; 0 when none is pending. */
uint64_t train_handshake_due(const struct train_handshake *h);

/* After train_handshake_failed: SL_EPROTO with the reason, "WHAT: the CURVE
 * handshake with PEER failed: the workers do not share one trainer key
 * (--curve-key)", which end lacks CURVE, or (this end without CURVE) that
 * the peer closed the connection. */
int train_handshake_error(const struct train_handshake *h, const char *what, const char *peer, struct sl_error *err);

#endif
