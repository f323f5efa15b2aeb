/* sl_handshake: the verdict on a connecting socket's ZeroMQ handshake, as
 * its monitor reports it (issue #16; docs/security.md): whether the two
 * ends of a link disagree on CURVE, and the words that tell the user. One
 * implementation for the trainer's connections to the feeders (client/)
 * and for the links between the workers (the ring, the rendezvous).
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
 * So a protocol failure or a refusal is a verdict at once (the first one
 * stands); a failure without detail is one when it happens
 * SL_HANDSHAKE_NODETAIL times since the last success (ZeroMQ reconnects
 * every 100 ms; once can be a peer that died while we connected).
 *
 * The two kinds of link differ in two rules, kept as the kind:
 *   - SL_HANDSHAKE_PEERS (workers of one job, one shared trainer key: the
 *     ring's PUSH, a rendezvous peer): once a handshake has succeeded the
 *     key is known to be shared and failures without detail no longer
 *     count; and one that is not followed by a success within
 *     SL_HANDSHAKE_GRACE_MS is a verdict too (the other end, a worker that
 *     failed the same way, may have left): sl_handshake_due/_failed.
 *   - SL_HANDSHAKE_FEEDER (a trainer's DEALER to a feeder): a success
 *     starts the count again from zero (a feeder may come back with
 *     another key), and there is no grace timer: only the count.
 * Without CURVE the same holds: a failure without detail is then most
 * likely a CURVE server that found the mismatch first.
 *
 * Thread-safety: none; a value owned by the socket's thread.
 */
#ifndef SL_HANDSHAKE_H
#define SL_HANDSHAKE_H

#include <stdint.h>

#include "sl_error.h"

#define SL_HANDSHAKE_NODETAIL 3 /* ZeroMQ retries every 100 ms */
#define SL_HANDSHAKE_GRACE_MS 1000

/* The events a connecting socket's monitor needs (sl_zsock_monitor_open). */
#define SL_HANDSHAKE_FAILED_EVENTS \
    (ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
#define SL_HANDSHAKE_EVENTS (SL_HANDSHAKE_FAILED_EVENTS | ZMQ_EVENT_HANDSHAKE_SUCCEEDED)

enum sl_handshake_kind {
    SL_HANDSHAKE_PEERS,  /* the workers' links: a success settles it; a grace timer */
    SL_HANDSHAKE_FEEDER, /* a connection to a feeder: the count alone */
};

enum sl_handshake_verdict {
    SL_HANDSHAKE_NONE,     /* no verdict (yet) */
    SL_HANDSHAKE_REFUSED,  /* the server's ZAP handler refused this end's key (value: the ZAP status) */
    SL_HANDSHAKE_MISMATCH, /* one end uses CURVE and the other does not */
    SL_HANDSHAKE_PROTOCOL, /* another protocol error (value: ZMQ_PROTOCOL_ERROR_*) */
    SL_HANDSHAKE_CLOSED,   /* the connection closed during the handshake: NODETAIL times, or past the grace */
};

/* The state of one connecting socket (sl_handshake_init). */
struct sl_handshake {
    enum sl_handshake_kind kind;
    int curve;         /* this end uses CURVE */
    int settled;       /* PEERS: a handshake succeeded */
    unsigned nodetail; /* failures without detail since the last success */
    uint64_t first_ns; /* PEERS: sl_clock_ns of the first of those; 0: none */
    uint16_t event;    /* the verdict's event; 0: none yet */
    uint32_t value;    /* and its value */
};

/* All zero, then kind and curve (this end uses CURVE). */
void sl_handshake_init(struct sl_handshake *h, enum sl_handshake_kind kind, int curve);

/* One monitor event (any: those that are not a handshake's are ignored). */
void sl_handshake_note(struct sl_handshake *h, uint16_t event, uint32_t value, uint64_t now_ns);

/* Every event waiting on the connecting socket's monitor `mon`. */
void sl_handshake_read(struct sl_handshake *h, void *mon, uint64_t now_ns);

/* PEERS: when a pending failure without detail becomes a verdict
 * (sl_clock_ns), for the caller's poll; 0 when none is pending (always 0
 * for FEEDER). */
uint64_t sl_handshake_due(const struct sl_handshake *h);

/* 1 when the two ends disagree (a verdict now, or, PEERS, a failure
 * without detail past its grace, which this records), else 0. */
int sl_handshake_failed(struct sl_handshake *h, uint64_t now_ns);

/* The verdict so far (SL_HANDSHAKE_NONE: none). */
enum sl_handshake_verdict sl_handshake_verdict(const struct sl_handshake *h);

/* A PEERS link's verdict in words: SL_EPROTO, "WHAT: the CURVE handshake
 * with PEER failed: the workers do not share one trainer key
 * (--curve-key)", which end lacks CURVE, or (this end without CURVE) that
 * the peer closed the connection. */
int sl_handshake_peers_error(const struct sl_handshake *h, const char *what, const char *peer, struct sl_error *err);

/* A FEEDER link's verdict in words (the caller prefixes the feeder):
 * SL_EPROTO with what the user should do, naming the caller's options for
 * this end's key pair (`key_opt`, e.g. "--curve-key") and the feeder's
 * public key (`server_key_opt`); 0 (err untouched) when there is no
 * verdict. */
int sl_handshake_feeder_error(const struct sl_handshake *h, const char *key_opt, const char *server_key_opt,
                              struct sl_error *err);

#endif
