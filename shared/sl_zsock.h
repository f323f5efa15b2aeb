/* sl_zsock: the one ZeroMQ link helper. Every link (the feeder's ROUTER,
 * the trainer's DEALERs, the ring, the rendezvous, the parameter servers,
 * the feeder's task queue) states the options it wants in a struct and
 * gets a socket with all of them set and every setting's result checked,
 * or NULL and an error naming the link and the option.
 *
 * Every zmq_setsockopt of the tree is here (sl_zsock_set_int/_bytes):
 * sl_curve_server/_client (sl_curve.h, the CURVE part of this helper: the
 * keys and their checks live with the keys) and ZMQ_IPV6 of a bracketed
 * endpoint (sl_endpoint.h) set theirs through it. So does the socket
 * monitor (below, sl_zsock_monitor.c) with its PAIR; what a connecting
 * socket's monitor says about its handshake is judged in sl_handshake.h.
 *
 * Thread-safe: as ZeroMQ sockets are (one thread a socket).
 */
#ifndef SL_ZSOCK_H
#define SL_ZSOCK_H

#include <stddef.h>
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

/* Set an option of any type (a CURVE key, the ZAP domain): v, len bytes.
 * 0, or SL_EIO naming `what` and the option ("WHAT:
 * zmq_setsockopt(ZMQ_CURVE_SERVERKEY): Invalid argument"), with errno
 * left as ZeroMQ set it. The same holds for sl_zsock_set_int. */
int sl_zsock_set_bytes(void *sock, int option, const void *v, size_t len, const char *what,
                       struct sl_error *err) SL_MUST_CHECK;

/* The linger of a socket about to close (how long its last messages, a
 * BYE, get to leave). Best effort by contract: a failure leaves the linger
 * the socket had, which changes only how long the close waits. */
void sl_zsock_linger(void *sock, int ms);

/* ---- the socket monitor (sl_zsock_monitor.c) ----
 *
 * A link that must learn at once that a connection closed or a handshake
 * failed (the client's DEALER per feeder, the ring's sockets, the
 * rendezvous) watches its socket with a monitor: a PAIR in the same
 * context connected to the inproc address the monitor publishes on. */

/* Start a monitor of `events` (ZMQ_EVENT_*) on sock at `addr` (an
 * inproc:// name unique in the context) and return the PAIR reading it
 * (linger 0), or NULL with err set (SL_EIO, "WHAT: zmq_socket_monitor:
 * ..."); then sock is left unmonitored. */
void *sl_zsock_monitor_open(void *ctx, void *sock, const char *addr, int events, const char *what,
                            struct sl_error *err);

/* The next event waiting on a monitor PAIR (libzmq 4.3's two frames: the
 * event and its value, then the endpoint, which is dropped): 1 with *event
 * and *value (0 and 0 for a first frame shorter than 6 bytes), 0 when none
 * is waiting. Never blocks for the first frame. */
int sl_zsock_monitor_event(void *mon, uint16_t *event, uint32_t *value);

/* Close `sock` (may be NULL; its linger as set) and its monitor PAIR `mon`
 * (may be NULL). This takes an order: stop the monitor, close the socket,
 * then drain the PAIR before closing it, since an event left in its pipe
 * is leaked by libzmq 4.3. */
void sl_zsock_monitor_close(void *sock, void *mon);

#endif
