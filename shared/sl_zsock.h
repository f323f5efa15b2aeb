/* sl_zsock: one way to make a sluice ZeroMQ socket. Every link (the
 * feeder's ROUTER, the trainer's DEALERs, the ring, the rendezvous, the
 * parameter servers, the feeder's task queue) states the options it wants
 * in a struct and gets a socket with all of them set and every setting's
 * result checked, or NULL and an error naming the link and the option.
 *
 * Endpoints (sl_endpoint.h) and CURVE (sl_curve.h) stay where they are:
 * this file is the layer under them, the socket's own options.
 *
 * Thread-safe: as ZeroMQ sockets are (one thread a socket).
 */
#ifndef SL_ZSOCK_H
#define SL_ZSOCK_H

#include <stdint.h>

#include "sl_error.h"

struct sl_zsock_opts {
    int linger_ms;        /* ZMQ_LINGER: how long close waits for unsent messages (0: not at all) */
    int64_t max_msg;      /* ZMQ_MAXMSGSIZE: a peer sending a bigger message is disconnected; 0: no bound set */
    int unbounded_send;   /* ZMQ_SNDHWM 0: the protocol's credits bound what is queued to send */
    int unbounded_recv;   /* ZMQ_RCVHWM 0: the credits this end gave bound what arrives (never on a
                             socket that hostile peers send to unasked: its default bound stays) */
    int send_timeout_ms;  /* ZMQ_SNDTIMEO; 0: not set (a send blocks) */
    int handshake_ms;     /* ZMQ_HANDSHAKE_IVL: a connection still in its handshake after this long is closed; 0:
                             ZeroMQ's default */
    int router_mandatory; /* ZMQ_ROUTER_MANDATORY (ROUTER only): a send to an unknown or gone peer fails */
};

/* A socket of `type` in ctx with o's options (NULL: all zero). `what`
 * names the link in the error ("feeder 2 (tcp://f:5555)"). NULL with err
 * set (SL_EIO) when ZeroMQ refuses the socket or an option. */
void *sl_zsock_open(void *ctx, int type, const struct sl_zsock_opts *o, const char *what, struct sl_error *err);

/* Set one int option on a live socket (a linger or a timeout that changes
 * on the way out). 0, or SL_EIO naming `what` and the option. */
int sl_zsock_set_int(void *sock, int option, int value, const char *what, struct sl_error *err) SL_MUST_CHECK;

/* The linger of a socket about to close (how long its last messages, a
 * BYE, get to leave). Best effort by contract: a failure leaves the linger
 * the socket had, which changes only how long the close waits. */
void sl_zsock_linger(void *sock, int ms);

#endif
